/*
 * test-wire.c — daemon/io/wire.c and its data lanes (lane.c): tag messages
 * between two real UCX workers of this process, over tcp on loopback.
 *
 * Two wires, A and B, on one libuv loop, each with two data lanes (worker
 * threads), as a daemon has by default. The tests walk what the wire
 * promises its callers (wire.h): a message lands in the receive posted for
 * exactly its tag; every completion comes through its callback on the
 * loop thread, never from inside the call that posted it; a message
 * larger than its buffer, a cancel, a control-class message the hooks
 * refuse and a stray data message each end as documented; bulk data
 * spreads over the lanes and comes back on the loop thread.
 *
 * Waits run the loop until the awaited callback came, under a guard timer
 * that fails the test if it never does: a bound, not a measurement.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "rng.h"

#include "b10d.h"
#include "tags.h"
#include "wire.h"
#include "wireaddr.h"

#ifndef GUARD_MS
#define GUARD_MS 10000
#endif

static uv_loop_t test_loop;
static struct b10d test_d;
static pthread_t loop_thread;
static bool posting;                /* inside a wire_* call: no callback may run now */

/* ---------------------------------------------------------------- one side's hooks */

struct side {
    const char *name;
    struct wire *wire;
    /* take_control */
    bool take;                      /* answer with a cookie, or refuse */
    unsigned take_calls;
    uint64_t take_tag;
    size_t take_length;
    /* on_control */
    unsigned controls;
    void *control_cookie;
    uint64_t control_tag;
    uint8_t control_bytes[256];
    size_t control_length;
    bool control_buf_null;
    /* on_data */
    bool drop_data;
    unsigned data_calls;
    bool data_control;              /* a control-class tag was ever offered as data */
    uint64_t data_tag;
    size_t data_length;
    /* on_ep_error */
    unsigned ep_errors;
};

static struct side side_a = { .name = "a" }, side_b = { .name = "b" };

/*
 * The wire delivers from the loop's prepare phase, after which
 * UV_RUN_ONCE would still block for I/O: each callback stops the loop, so
 * that the test's wait sees what just came without waiting for more.
 */
static void news(void)
{
    uv_stop(&test_loop);
}

static void *hook_take_control(void *arg, uint64_t tag, size_t length)
{
    struct side *s = arg;
    assert_false(posting);
    s->take_calls++;
    news();
    s->take_tag = tag;
    s->take_length = length;
    return s->take ? s : NULL;
}

static void hook_control(void *arg, void *cookie, uint64_t tag, void *buf, size_t length)
{
    struct side *s = arg;
    assert_false(posting);
    s->controls++;
    news();
    s->control_cookie = cookie;
    s->control_tag = tag;
    s->control_length = length;
    s->control_buf_null = buf == NULL;
    if (buf != NULL && length <= sizeof(s->control_bytes))
        memcpy(s->control_bytes, buf, length);
    free(buf);
}

static bool hook_data(void *arg, uint64_t tag, size_t length)
{
    struct side *s = arg;
    s->data_calls++;
    news();
    s->data_control |= (tag & TAG_CLASS_CONTROL) != 0;
    s->data_tag = tag;
    s->data_length = length;
    return s->drop_data;
}

static void hook_ep_error(void *arg, void *ep_user, b10_status_t status)
{
    ((struct side *)arg)->ep_errors++;
    news();
}

static b10_status_t side_create(struct side *s)
{
    struct wire_hooks hooks = {
        .arg = s,
        .take_control = hook_take_control,
        .on_control = hook_control,
        .on_ep_error = hook_ep_error,
        .on_data = hook_data,
    };
    return wire_create(&test_d, &hooks, true, &s->wire);
}

static void side_reset(struct side *s)
{
    struct wire *w = s->wire;
    const char *name = s->name;
    memset(s, 0, sizeof(*s));
    s->wire = w;
    s->name = name;
}

/* ---------------------------------------------------------------- operations */

struct result {
    unsigned calls;
    b10_status_t status;
    size_t length;
    bool on_loop_thread;
};

static void on_done(void *arg, b10_status_t status, size_t length)
{
    struct result *r = arg;
    assert_false(posting);
    r->calls++;
    news();
    r->status = status;
    r->length = length;
    r->on_loop_thread = pthread_equal(pthread_self(), loop_thread);
}

static bool guard_fired;

static void on_guard(uv_timer_t *t)
{
    guard_fired = true;
}

/* Run the loop until *count reaches want; fail past the guard. */
static void wait_count(const unsigned *count, unsigned want)
{
    uv_timer_t guard;
    guard_fired = false;
    uv_timer_init(&test_loop, &guard);
    uv_timer_start(&guard, on_guard, GUARD_MS, 0);
    while (*count < want && !guard_fired)
        uv_run(&test_loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&guard, NULL);
    uv_run(&test_loop, UV_RUN_NOWAIT);
    if (*count < want)
        fail_msg("waited past %d ms for %u completions (%u came)", GUARD_MS, want, *count);
}

/* Run the loop until the wire has nothing outstanding; fail past the guard. */
static void wait_settled(struct wire *wire)
{
    uv_timer_t guard;
    guard_fired = false;
    uv_timer_init(&test_loop, &guard);
    uv_timer_start(&guard, on_guard, GUARD_MS, 0);
    while (wire_outstanding(wire) > 0 && !guard_fired)
        uv_run(&test_loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&guard, NULL);
    uv_run(&test_loop, UV_RUN_NOWAIT);
    if (wire_outstanding(wire) > 0)
        fail_msg("%u operations still outstanding after %d ms", wire_outstanding(wire), GUARD_MS);
}

static void wait_result(struct result *r)
{
    wait_count(&r->calls, 1);
    assert_int_equal(r->calls, 1);
    assert_true(r->on_loop_thread);
}

static struct wire_ep *link_sides(struct side *from, struct side *to)
{
    const void *addr;
    size_t len;
    struct wire_ep *ep = NULL;

    wire_address(to->wire, &addr, &len);
    assert_int_equal(wire_ep_create(from->wire, addr, len, from, &ep), 0);
    assert_non_null(ep);
    return ep;
}

static b10_status_t post_send(struct wire_ep *ep, uint64_t tag, const void *buf, size_t len,
                              struct result *r)
{
    posting = true;
    b10_status_t st = wire_send(ep, tag, buf, len, NULL, on_done, r, NULL);
    posting = false;
    return st;
}

static struct wire_op *post_recv(struct side *s, uint64_t tag, void *buf, size_t len,
                                 struct result *r)
{
    struct wire_op *op = NULL;
    posting = true;
    b10_status_t st = wire_recv(s->wire, NULL, tag, buf, len, NULL, on_done, r, &op);
    posting = false;
    assert_int_equal(st, B10_OK);
    assert_non_null(op);
    return op;
}

static uint8_t *random_bytes(size_t len, uint64_t seed)
{
    uint8_t *p = malloc(len ? len : 1);
    assert_non_null(p);
    rng_seed(seed);
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)rng_next();
    return p;
}

/* ---------------------------------------------------------------- fixture */

/*
 * The endpoints A→B and B→A, made once and used by every test. Each
 * carries a message on the loop's worker and on both lanes before the
 * tests start, and is closed only after: UCX 1.13 aborts
 * (tcp_iface.c, "conn_state != UCT_TCP_EP_CONN_STATE_CLOSED") when an
 * endpoint is closed while its connection is still being set up and the
 * other worker then progresses.
 */
static struct wire_ep *ab, *ba;

static void warm_up(struct wire_ep *ep, struct wire_ep *back, struct side *to)
{
    uint8_t out[3][16] = { "main", "lane 0", "lane 1" }, in[3][16];
    struct result rs[3], rr[3];

    memset(rs, 0, sizeof(rs));
    memset(rr, 0, sizeof(rr));
    assert_int_equal(wire_recv(to->wire, NULL, 0xf000, in[0], 16, NULL, on_done, &rr[0], NULL), 0);
    assert_int_equal(wire_send(ep, 0xf000, out[0], 16, NULL, on_done, &rs[0], NULL), 0);
    for (uint32_t k = 0; k < 2; k++) {
        assert_int_equal(wire_recv_bulk(back, k, 0xf001 + k, in[1 + k], 16, NULL, on_done,
                                        &rr[1 + k], NULL), 0);
        assert_int_equal(wire_send_bulk(ep, k, 0xf001 + k, out[1 + k], 16, NULL, on_done,
                                        &rs[1 + k], NULL), 0);
    }
    for (int i = 0; i < 3; i++) {
        wait_result(&rr[i]);
        wait_result(&rs[i]);
        assert_int_equal(rr[i].status, B10_OK);
        assert_memory_equal(in[i], out[i], 16);
    }
}

static int group_setup(void **state)
{
    setenv("UCX_TLS", "self,tcp", 1);
    setenv("UCX_NET_DEVICES", "lo", 1);
    log_setup(LOG_LEVEL_ERR, "test-wire");
    loop_thread = pthread_self();
    if (uv_loop_init(&test_loop) != 0)
        return -1;
    memset(&test_d, 0, sizeof(test_d));
    config_defaults(&test_d.cfg);
    test_d.cfg.wire_lanes = 2;
    test_d.cfg.progress_spin = false;
    test_d.loop = &test_loop;
    if (side_create(&side_a) != 0 || side_create(&side_b) != 0)
        return -1;
    ab = link_sides(&side_a, &side_b);
    ba = link_sides(&side_b, &side_a);
    warm_up(ab, ba, &side_b);
    warm_up(ba, ab, &side_a);
    return 0;
}

static int group_teardown(void **state)
{
    wire_ep_close(ab);
    wire_ep_close(ba);
    wire_destroy(side_a.wire);
    wire_destroy(side_b.wire);
    wire_destroy(NULL);
    uv_run(&test_loop, UV_RUN_NOWAIT);
    return uv_loop_close(&test_loop) == 0 ? 0 : -1;
}

static int test_setup(void **state)
{
    side_reset(&side_a);
    side_reset(&side_b);
    return 0;
}

/* Every test leaves nothing posted behind. */
static int test_teardown(void **state)
{
    if (wire_outstanding(side_a.wire) != 0 || wire_outstanding(side_b.wire) != 0)
        return -1;
    return 0;
}

/* ---------------------------------------------------------------- addresses */

/* A wire's address carries its loop worker and each lane's; garbage makes no endpoint. */
static void test_address(void **state)
{
    const void *addr;
    size_t len;
    const uint8_t *addrs[1 + WIREADDR_MAX_LANES];
    size_t lengths[1 + WIREADDR_MAX_LANES];
    struct wire_ep *ep = NULL;

    wire_address(side_a.wire, &addr, &len);
    unsigned workers = 0;
    assert_int_equal(wireaddr_unpack(addr, len, addrs, lengths, &workers), B10_OK);
    assert_int_equal(workers, 3);

    uint8_t *bad = malloc(len);
    memcpy(bad, addr, len);
    bad[0] ^= 0xff;                             /* not a wire address */
    assert_int_equal(wire_ep_create(side_b.wire, bad, len, NULL, &ep), B10_ERR_INVALID_ARG);
    assert_null(ep);
    assert_int_equal(wire_ep_create(side_b.wire, addr, len - 1, NULL, &ep), B10_ERR_INVALID_ARG);
    assert_null(ep);
    free(bad);

    /* The address as it was made the fixture's endpoints: on both lanes, over tcp. */
    assert_int_equal(wire_ep_lanes(ab), 2);
    assert_int_equal(wire_ep_lanes(ba), 2);
    assert_non_null(strstr(wire_ep_transports(ab), "tcp"));
    wire_ep_close(NULL);
}

/* ---------------------------------------------------------------- send and receive */

/*
 * Eager and rendezvous sizes: the bytes land, the lengths are the sender's,
 * and no callback runs inside the call that posted it.
 */
static void test_send_recv(void **state)
{
    static const size_t sizes[] = { 0, 1, 4096, 65536, (1u << 20) + 3 };
    struct wire_ep *ep = ab;

    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t len = sizes[k];
        uint8_t *src = random_bytes(len, 100 + k), *dst = calloc(1, len + 16);
        struct result rs = { 0 }, rr = { 0 };
        uint64_t tag = 0x1000 + k;

        post_recv(&side_b, tag, dst, len + 16, &rr);
        assert_int_equal(post_send(ep, tag, src, len, &rs), 0);
        assert_int_equal(rs.calls + rr.calls, 0);
        assert_true(wire_outstanding(side_a.wire) <= 1);
        wait_result(&rr);
        wait_result(&rs);
        assert_int_equal(rr.status, B10_OK);
        assert_int_equal(rs.status, B10_OK);
        assert_int_equal(rr.length, len);
        assert_memory_equal(dst, src, len);
        free(src);
        free(dst);
    }
    assert_int_equal(wire_outstanding(side_a.wire), 0);
    assert_int_equal(wire_outstanding(side_b.wire), 0);
    assert_int_equal(side_b.data_calls, 0);
}

/* A message lands in the receive for exactly its tag, whatever the order of posting. */
static void test_exact_tag(void **state)
{
    struct wire_ep *ep = ab;
    uint8_t one[64], two[64], got1[64] = { 0 }, got2[64] = { 0 };
    struct result s1 = { 0 }, s2 = { 0 }, r1 = { 0 }, r2 = { 0 };

    memset(one, 0x11, sizeof(one));
    memset(two, 0x22, sizeof(two));
    post_recv(&side_b, 0x2001, got1, sizeof(got1), &r1);
    post_recv(&side_b, 0x2002, got2, sizeof(got2), &r2);
    assert_int_equal(post_send(ep, 0x2002, two, sizeof(two), &s2), 0);
    assert_int_equal(post_send(ep, 0x2001, one, sizeof(one), &s1), 0);
    wait_result(&r1);
    wait_result(&r2);
    wait_result(&s1);
    wait_result(&s2);
    assert_memory_equal(got1, one, sizeof(one));
    assert_memory_equal(got2, two, sizeof(two));

    /* Sent before its receive is posted: it waits in UCX for it (no hook drops it). */
    struct result s3 = { 0 }, r3 = { 0 };
    memset(got1, 0, sizeof(got1));
    side_b.drop_data = false;
    assert_int_equal(post_send(ep, 0x2003, one, sizeof(one), &s3), 0);
    wait_result(&s3);
    wait_count(&side_b.data_calls, 1);
    assert_int_equal(side_b.data_tag, 0x2003);
    assert_int_equal(side_b.data_length, sizeof(one));
    post_recv(&side_b, 0x2003, got1, sizeof(got1), &r3);
    wait_result(&r3);
    assert_int_equal(r3.status, B10_OK);
    assert_memory_equal(got1, one, sizeof(one));
}

/* A message larger than the receive's buffer fails it B10_ERR_PEER_PROTOCOL. */
static void test_truncated(void **state)
{
    struct wire_ep *ep = ab;
    uint8_t *src = random_bytes(1000, 3), dst[999];
    struct result rs = { 0 }, rr = { 0 };

    post_recv(&side_b, 0x3001, dst, sizeof(dst), &rr);
    assert_int_equal(post_send(ep, 0x3001, src, 1000, &rs), 0);
    wait_result(&rr);
    assert_int_equal(rr.status, B10_ERR_PEER_PROTOCOL);
    wait_result(&rs);

    /* The same message into a buffer of its size lands. */
    struct result rs2 = { 0 }, rr2 = { 0 };
    uint8_t whole[1000];
    post_recv(&side_b, 0x3002, whole, sizeof(whole), &rr2);
    assert_int_equal(post_send(ep, 0x3002, src, 1000, &rs2), 0);
    wait_result(&rr2);
    wait_result(&rs2);
    assert_int_equal(rr2.status, B10_OK);
    assert_memory_equal(whole, src, 1000);
    free(src);
}

/* A cancelled receive ends B10_ERR_CANCELLED, through its callback, later; once. */
static void test_cancel_recv(void **state)
{
    uint8_t buf[64];
    struct result r = { 0 };

    struct wire_op *op = post_recv(&side_b, 0x4001, buf, sizeof(buf), &r);
    assert_int_equal(wire_outstanding(side_b.wire), 1);
    posting = true;
    wire_cancel(side_b.wire, op);
    posting = false;
    assert_int_equal(r.calls, 0);
    wait_result(&r);
    assert_int_equal(r.status, B10_ERR_CANCELLED);
    assert_int_equal(wire_outstanding(side_b.wire), 0);
    wire_cancel(side_b.wire, NULL);

    /* A receive not cancelled takes its message. */
    struct wire_ep *ep = ab;
    struct result rs = { 0 }, rr = { 0 };
    uint8_t msg[64];
    memset(msg, 0x44, sizeof(msg));
    post_recv(&side_b, 0x4001, buf, sizeof(buf), &rr);
    assert_int_equal(post_send(ep, 0x4001, msg, sizeof(msg), &rs), 0);
    wait_result(&rr);
    wait_result(&rs);
    assert_int_equal(rr.status, B10_OK);
    assert_memory_equal(buf, msg, sizeof(msg));
}

/* A send whose buffer the wire owns frees it once sent (the leak check would see it). */
static void test_send_owned(void **state)
{
    struct wire_ep *ep = ab;
    uint8_t *src = random_bytes(5000, 5), dst[5000];
    uint8_t *owned = malloc(5000);
    struct result rr = { 0 };

    memcpy(owned, src, 5000);
    post_recv(&side_b, 0x5001, dst, sizeof(dst), &rr);
    assert_int_equal(wire_send_owned(ep, 0x5001, owned, 5000), 0);
    wait_result(&rr);
    assert_int_equal(rr.status, B10_OK);
    assert_memory_equal(dst, src, 5000);
    wait_settled(side_a.wire);
    free(src);
}

/* ---------------------------------------------------------------- control messages */

/*
 * A control-class message is offered to take_control with its claimed
 * length before anything is allocated; taken, it comes to on_control with
 * the cookie; refused, it is dropped unread and the next one still comes.
 */
static void test_control_messages(void **state)
{
    struct wire_ep *ep = ab;
    uint8_t msg[200];
    uint64_t tag = TAG_CLASS_CONTROL | 0x6001;
    struct result s1 = { 0 }, s2 = { 0 }, s3 = { 0 };

    memset(msg, 0x66, sizeof(msg));
    side_b.take = false;
    assert_int_equal(post_send(ep, tag, msg, 100, &s1), 0);
    wait_count(&side_b.take_calls, 1);
    assert_int_equal(side_b.take_tag, tag);
    assert_int_equal(side_b.take_length, 100);
    wait_result(&s1);
    assert_int_equal(side_b.controls, 0);

    side_b.take = true;
    msg[0] = 0x77;
    assert_int_equal(post_send(ep, tag + 1, msg, 200, &s2), 0);
    wait_count(&side_b.controls, 1);
    assert_int_equal(side_b.take_calls, 2);
    assert_ptr_equal(side_b.control_cookie, &side_b);
    assert_int_equal(side_b.control_tag, tag + 1);
    assert_int_equal(side_b.control_length, 200);
    assert_false(side_b.control_buf_null);
    assert_memory_equal(side_b.control_bytes, msg, 200);
    wait_result(&s2);

    /* An empty control message is a message too. */
    assert_int_equal(post_send(ep, tag + 2, msg, 0, &s3), 0);
    wait_count(&side_b.controls, 2);
    assert_int_equal(side_b.control_length, 0);
    assert_int_equal(side_b.control_tag, tag + 2);
    wait_result(&s3);
    /* None of them was a data message. */
    assert_int_equal(side_b.data_calls, 0);
}

/* ---------------------------------------------------------------- strays */

/*
 * A data message nobody will receive is dropped when on_data says so: a
 * receive posted for its tag afterwards gets the next message, not it.
 */
static void test_stray_dropped(void **state)
{
    struct wire_ep *ep = ab;
    uint8_t stale[128], fresh[128], got[128] = { 0 };
    struct result s1 = { 0 }, s2 = { 0 }, r = { 0 };

    memset(stale, 0xdd, sizeof(stale));
    memset(fresh, 0x0f, sizeof(fresh));
    side_b.drop_data = true;
    assert_int_equal(post_send(ep, 0x7001, stale, sizeof(stale), &s1), 0);
    wait_result(&s1);
    wait_count(&side_b.data_calls, 1);
    assert_int_equal(side_b.data_tag, 0x7001);
    assert_int_equal(side_b.data_length, sizeof(stale));
    /* The drop's own scratch receive settles. */
    wait_settled(side_b.wire);

    post_recv(&side_b, 0x7001, got, sizeof(got), &r);
    assert_int_equal(post_send(ep, 0x7001, fresh, sizeof(fresh), &s2), 0);
    wait_result(&r);
    wait_result(&s2);
    assert_int_equal(r.status, B10_OK);
    assert_memory_equal(got, fresh, sizeof(fresh));
}

/* ---------------------------------------------------------------- data lanes */

/*
 * Bulk data goes over the lanes both ends have, keyed so that both ends
 * pick the same lane; completions come back on the loop thread.
 */
static void test_bulk_over_lanes(void **state)
{
    enum { N = 8, LEN = 200000 };
    uint8_t *src[N], *dst[N];
    struct result rs[N], rr[N];

    assert_int_equal(wire_ep_lanes(ab), 2);
    assert_int_equal(wire_ep_lanes(ba), 2);
    memset(rs, 0, sizeof(rs));
    memset(rr, 0, sizeof(rr));
    for (uint32_t i = 0; i < N; i++) {
        src[i] = random_bytes(LEN, 200 + i);
        dst[i] = calloc(1, LEN);
        posting = true;
        assert_int_equal(wire_recv_bulk(ba, i, 0x8000 + i, dst[i], LEN, NULL, on_done, &rr[i],
                                        NULL), 0);
        posting = false;
    }
    for (uint32_t i = 0; i < N; i++) {
        posting = true;
        assert_int_equal(wire_send_bulk(ab, i, 0x8000 + i, src[i], LEN, NULL, on_done, &rs[i],
                                        NULL), 0);
        posting = false;
    }
    for (uint32_t i = 0; i < N; i++) {
        wait_result(&rr[i]);
        wait_result(&rs[i]);
        assert_int_equal(rr[i].status, B10_OK);
        assert_int_equal(rs[i].status, B10_OK);
        assert_int_equal(rr[i].length, LEN);
        assert_memory_equal(dst[i], src[i], LEN);
        free(src[i]);
        free(dst[i]);
    }
    assert_true(wire_progress_ns(side_a.wire) > 0);
}

/* A bulk receive cancelled on its lane ends B10_ERR_CANCELLED on the loop thread. */
static void test_bulk_cancel(void **state)
{
    uint8_t buf[4096];
    struct result r = { 0 };
    struct wire_op *op = NULL;

    assert_int_equal(wire_recv_bulk(ba, 1, 0x9001, buf, sizeof(buf), NULL, on_done, &r, &op), 0);
    assert_non_null(op);
    assert_int_equal(wire_outstanding(side_b.wire), 1);
    wire_cancel(side_b.wire, op);
    wait_result(&r);
    assert_int_equal(r.status, B10_ERR_CANCELLED);
    assert_int_equal(wire_outstanding(side_b.wire), 0);
}

/*
 * A lane carries DATA only: a control-class message sent to it is dropped
 * without being offered to anyone (it would otherwise block the head of the
 * lane's queue for good); a data message nobody receives is offered to
 * on_data and dropped when it says so, and the next message with its tag
 * lands in the receive posted for it.
 */
static void test_lane_strays(void **state)
{
    enum { ROUNDS = 48, BURST = 8 };
    uint8_t ctl[64], stale[300], fresh[300], got[300];

    memset(ctl, 0xcc, sizeof(ctl));
    memset(stale, 0xdd, sizeof(stale));
    memset(fresh, 0x0f, sizeof(fresh));
    side_b.drop_data = true;
    for (uint64_t round = 0; round < ROUNDS; round++) {
        const uint64_t ctl_tag = TAG_CLASS_CONTROL | (0xc000 + round * 0x100);
        const uint64_t tag = 0xc000 + round;
        struct result sc[BURST], s2 = { 0 }, s3 = { 0 }, r = { 0 };
        unsigned asked = side_b.data_calls;

        /* A burst: the lane finds the control messages waiting ahead of the data one. */
        memset(sc, 0, sizeof(sc));
        for (int i = 0; i < BURST; i++)
            assert_int_equal(wire_send_bulk(ab, 0, ctl_tag + (uint64_t)i, ctl, sizeof(ctl), NULL,
                                            on_done, &sc[i], NULL), 0);
        assert_int_equal(wire_send_bulk(ab, 0, tag, stale, sizeof(stale), NULL, on_done, &s2,
                                        NULL), 0);
        for (int i = 0; i < BURST; i++)
            wait_result(&sc[i]);
        wait_result(&s2);
        wait_count(&side_b.data_calls, asked + 1);
        /* Only the data message was offered: the control ones had gone unasked. */
        assert_false(side_b.data_control);
        assert_int_equal(side_b.data_tag, tag);
        assert_int_equal(side_b.data_length, sizeof(stale));
        assert_int_equal(side_b.take_calls, 0);
        assert_int_equal(side_b.controls, 0);

        /* Dropped: the next message with its tag lands in the receive posted for it. */
        memset(got, 0, sizeof(got));
        assert_int_equal(wire_recv_bulk(ba, 0, tag, got, sizeof(got), NULL, on_done, &r, NULL),
                         0);
        assert_int_equal(wire_send_bulk(ab, 0, tag, fresh, sizeof(fresh), NULL, on_done, &s3,
                                        NULL), 0);
        wait_result(&r);
        wait_result(&s3);
        assert_int_equal(r.status, B10_OK);
        assert_int_equal(r.length, sizeof(fresh));
        assert_memory_equal(got, fresh, sizeof(fresh));
    }
}

/* ---------------------------------------------------------------- destroying a wire */

/*
 * A wire destroyed with a bulk receive still posted on a lane reports it
 * cancelled, through its callback, on the loop thread, before the wire is
 * gone: its owner learns that the buffer is free again. The wire at the
 * other end learns that its peer went, through on_ep_error.
 */
static void test_destroy_reports_lane_ops(void **state)
{
    struct side c = { .name = "c" }, d = { .name = "d" };
    uint8_t buf[4096];
    struct result r = { 0 };

    assert_int_equal(side_create(&c), 0);
    assert_int_equal(side_create(&d), 0);
    struct wire_ep *cd = link_sides(&c, &d), *dc = link_sides(&d, &c);
    warm_up(cd, dc, &d);
    warm_up(dc, cd, &c);

    assert_int_equal(wire_recv_bulk(dc, 1, 0xb001, buf, sizeof(buf), NULL, on_done, &r, NULL), 0);
    assert_int_equal(wire_outstanding(d.wire), 1);
    wire_ep_close(dc);
    assert_int_equal(r.calls, 0);
    wire_destroy(d.wire);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.status, B10_ERR_CANCELLED);
    assert_true(r.on_loop_thread);
    assert_int_equal(d.ep_errors, 0);
    /* The peer is gone: C hears of it through on_ep_error, and only then closes its endpoint. */
    wait_count(&c.ep_errors, 1);
    wire_ep_close(cd);
    wire_destroy(c.wire);
    uv_run(&test_loop, UV_RUN_NOWAIT);
}

/*
 * wire_quiesce, which b10d_stop calls before the staging pool goes: what
 * the lanes hold is reported cancelled, on the loop thread, before it
 * returns, so that its owners put their views back into a pool still
 * there; memory registrations still work after it (the pool's views are
 * unregistered next); a second call does nothing, and wire_destroy after
 * it finishes the wire.
 */
static void test_quiesce_reports_lane_ops(void **state)
{
    struct side c = { .name = "c" }, d = { .name = "d" };
    uint8_t buf[4096];
    struct result r = { 0 };
    void *memh = NULL;

    assert_int_equal(side_create(&c), 0);
    assert_int_equal(side_create(&d), 0);
    struct wire_ep *cd = link_sides(&c, &d), *dc = link_sides(&d, &c);
    warm_up(cd, dc, &d);
    warm_up(dc, cd, &c);

    assert_int_equal(wire_recv_bulk(dc, 1, 0xb002, buf, sizeof(buf), NULL, on_done, &r, NULL), 0);
    assert_int_equal(wire_outstanding(d.wire), 1);
    assert_int_equal(r.calls, 0);
    wire_quiesce(d.wire);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.status, B10_ERR_CANCELLED);
    assert_true(r.on_loop_thread);
    assert_int_equal(wire_outstanding(d.wire), 0);
    assert_int_equal(wire_mem_map(d.wire, buf, sizeof(buf), &memh), 0);
    wire_mem_unmap(d.wire, memh);
    wire_quiesce(d.wire);
    assert_int_equal(r.calls, 1);
    wire_ep_close(dc);
    wire_destroy(d.wire);
    assert_int_equal(r.calls, 1);
    wait_count(&c.ep_errors, 1);
    wire_ep_close(cd);
    wire_destroy(c.wire);
    uv_run(&test_loop, UV_RUN_NOWAIT);
}

/* ---------------------------------------------------------------- a node-local wire */

/*
 * network false (a daemon that serves its own node's ranks only): UCX's
 * self transport alone and no lanes, whatever the configuration says; it
 * still registers memory, which staging needs.
 */
static void test_local_wire(void **state)
{
    struct side local = { .name = "local" };
    const void *addr;
    size_t len;
    const uint8_t *addrs[1 + WIREADDR_MAX_LANES];
    size_t lengths[1 + WIREADDR_MAX_LANES];
    struct wire_hooks hooks = {
        .arg = &local,
        .take_control = hook_take_control,
        .on_control = hook_control,
        .on_ep_error = hook_ep_error,
    };
    void *memh = NULL;
    uint8_t *buf = aligned_alloc(4096, 1u << 20);

    assert_int_equal(test_d.cfg.wire_lanes, 2);
    assert_int_equal(wire_create(&test_d, &hooks, false, &local.wire), 0);
    wire_address(local.wire, &addr, &len);
    unsigned workers = 0;
    assert_int_equal(wireaddr_unpack(addr, len, addrs, lengths, &workers), B10_OK);
    assert_int_equal(workers, 1);
    assert_int_equal(wire_mem_map(local.wire, buf, 1u << 20, &memh), 0);
    assert_non_null(memh);
    wire_mem_unmap(local.wire, memh);
    wire_mem_unmap(local.wire, NULL);
    assert_int_equal(wire_outstanding(local.wire), 0);
    wire_destroy(local.wire);
    uv_run(&test_loop, UV_RUN_NOWAIT);
    free(buf);
}

/* The sockets this process holds: a connection made over tcp adds two. */
static unsigned count_sockets(void)
{
    DIR *dir = opendir("/proc/self/fd");
    struct dirent *e;
    unsigned n = 0;
    char path[300], target[64];

    assert_non_null(dir);
    while ((e = readdir(dir)) != NULL) {
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, target, sizeof(target) - 1);
        if (len > 0) {
            target[len] = '\0';
            n += strncmp(target, "socket:", 7) == 0;
        }
    }
    closedir(dir);
    return n;
}

/*
 * A wire's endpoint to its own address is its link to itself: on a worker
 * of UCX's self transport, with no lanes and no socket (the gate keeps
 * this host's own addresses out, gate.h). Its control-class messages reach
 * the hooks; a message of another tag lands in a receive posted by that
 * endpoint, and not in one posted on the loop's worker, where every other
 * peer's messages come.
 */
static void test_link_to_itself(void **state)
{
    uint8_t hello[32], data[48], got[64] = { 0 }, other[64] = { 0 };
    struct result rs = { 0 }, rc = { 0 }, rr = { 0 }, ro = { 0 };
    struct wire_op *op = NULL;
    unsigned sockets = count_sockets();

    struct wire_ep *self = link_sides(&side_a, &side_a);
    assert_non_null(strstr(wire_ep_transports(self), "self"));
    assert_null(strstr(wire_ep_transports(self), "tcp"));
    assert_int_equal(wire_ep_lanes(self), 0);

    memset(hello, 0x5a, sizeof(hello));
    side_a.take = true;
    assert_int_equal(post_send(self, TAG_CLASS_CONTROL | 0x77, hello, sizeof(hello), &rc), 0);
    wait_count(&side_a.controls, 1);
    assert_int_equal(side_a.control_length, sizeof(hello));
    assert_memory_equal(side_a.control_bytes, hello, sizeof(hello));
    wait_result(&rc);
    assert_int_equal(rc.status, B10_OK);

    memset(data, 0xa5, sizeof(data));
    posting = true;
    assert_int_equal(wire_recv(side_a.wire, NULL, 0x3003, other, sizeof(other), NULL, on_done,
                               &ro, &op), B10_OK);
    assert_int_equal(wire_recv(side_a.wire, self, 0x3003, got, sizeof(got), NULL, on_done, &rr,
                               NULL), B10_OK);
    posting = false;
    assert_int_equal(post_send(self, 0x3003, data, sizeof(data), &rs), 0);
    wait_result(&rr);
    wait_result(&rs);
    assert_int_equal(rr.status, B10_OK);
    assert_int_equal(rr.length, sizeof(data));
    assert_memory_equal(got, data, sizeof(data));
    assert_int_equal(ro.calls, 0);
    wire_cancel(side_a.wire, op);
    wait_result(&ro);
    assert_int_equal(ro.status, B10_ERR_CANCELLED);

    assert_int_equal(count_sockets(), sockets);
    wire_ep_close(self);
    wait_settled(side_a.wire);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, test_setup, test_teardown)
    const struct CMUnitTest tests[] = {
        T(test_address),
        T(test_send_recv),
        T(test_exact_tag),
        T(test_truncated),
        T(test_cancel_recv),
        T(test_send_owned),
        T(test_control_messages),
        T(test_stray_dropped),
        T(test_bulk_over_lanes),
        T(test_bulk_cancel),
        T(test_lane_strays),
        T(test_destroy_reports_lane_ops),
        T(test_quiesce_reports_lane_ops),
        T(test_local_wire),
        T(test_link_to_itself),
    };
#undef T
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
