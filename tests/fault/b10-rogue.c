/*
 * b10-rogue — a hostile remote daemon, for the fault tests of b10d.
 *
 * It speaks the peer protocol (proto/peer.proto, daemon/tags.h) over UCX to
 * a victim b10d, and is at the same time a rank of that daemon: it connects
 * with libb10, registers a region of its own (host memory shared with the
 * daemon) and gets its agent descriptor, which carries the daemon's id and
 * UCX worker address. Its transfers target that region, so it sees every
 * byte the daemon writes there and can tell what must not have changed.
 *
 *   b10-rogue [-t TIMEOUT_MS] SOCKET CASE...     (CASE "all": every case)
 *
 * Cases: good, unknown, oversize, undersize, oob, badgen, oldgen, replay,
 * malformed, heartbeat, lane. Each prints "ok CASE: what happened" or "FAIL CASE: why"; after
 * every case the region must hold exactly what the successful transfers
 * wrote, and "good" must still work. Exit status: 0 pass, 1 fail, 2 setup.
 */
#include <b10/b10.h>

#include "b10.pb-c.h"
#include "frame.h"
#include "peer.pb-c.h"
#include "tags.h"
#include "wireaddr.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#include "../testout.h"

#define REG_BYTES (1u << 20)
#define CHUNK 8192

static int timeout_ms = 5000;

/* ---------------------------------------------------------------- output */

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static uint64_t rnd64(void)
{
    uint64_t v = 0;

    while (getrandom(&v, sizeof(v), 0) != sizeof(v) || v == 0)
        ;
    return v;
}

/* ---------------------------------------------------------------- state */

static struct {
    b10_conn_t *conn;
    char agent[64];
    uint8_t *reg;                   /* our registered region, shared with the daemon */
    uint8_t *want;                  /* what it must hold */
    uint64_t victim_id;
    uint8_t *victim_addr;
    size_t victim_addr_len;
    const uint8_t *lane_addr;   /* the victim's first data lane (in victim_addr), or NULL */
    uint64_t self_id;
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_address_t *addr;
    uint8_t *packed;            /* addr as a daemon gives it out (wireaddr.h) */
    size_t packed_len;
    size_t addr_len;
    ucp_ep_h ep;
    bool ep_failed;
    uint64_t next_xfer;
} g;

static uint8_t pat(uint64_t key, uint64_t i)
{
    uint64_t x = (key + i) * 0x9e3779b97f4a7c15ull;
    return (uint8_t)((x >> 29) ^ (x >> 47) ^ key);
}

/* ---------------------------------------------------------------- UCX */

struct req_state {
    bool done;
    ucs_status_t status;
    size_t length;
};

static void on_send(void *req, ucs_status_t st, void *user)
{
    struct req_state *rs = user;
    rs->done = true;
    rs->status = st;
}

static void on_recv(void *req, ucs_status_t st, const ucp_tag_recv_info_t *info, void *user)
{
    struct req_state *rs = user;
    rs->done = true;
    rs->status = st;
    rs->length = st == UCS_OK ? info->length : 0;
}

static void on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t st)
{
    g.ep_failed = true;
}

static void progress_for(double ms)
{
    double end = now_ms() + ms;
    while (now_ms() < end) {
        if (ucp_worker_progress(g.worker) == 0)
            usleep(200);
    }
}

/* Wait for a request; returns its status (UCS_ERR_TIMED_OUT after the bound, cancelled). */
static ucs_status_t req_wait(void *req, struct req_state *rs, bool cancel_on_timeout)
{
    double end = now_ms() + timeout_ms;

    if (req == NULL)
        return UCS_OK;
    if (UCS_PTR_IS_ERR(req))
        return UCS_PTR_STATUS(req);
    while (!rs->done && now_ms() < end) {
        if (ucp_worker_progress(g.worker) == 0)
            usleep(100);
    }
    if (!rs->done) {
        if (!cancel_on_timeout)
            return UCS_ERR_TIMED_OUT;   /* a send: left to finish on its own */
        ucp_request_cancel(g.worker, req);
        while (!rs->done)
            ucp_worker_progress(g.worker);
        ucp_request_free(req);
        return UCS_ERR_TIMED_OUT;
    }
    ucp_request_free(req);
    return rs->status;
}

static int send_bytes(uint64_t tag, const void *buf, size_t len)
{
    static struct req_state rs;     /* sends may outlive a timeout: keep their state alive */
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = on_send,
        .user_data = &rs,
    };

    rs = (struct req_state){ 0 };
    void *req = ucp_tag_send_nbx(g.ep, buf, len, tag, &p);
    ucs_status_t st = req_wait(req, &rs, false);
    return st == UCS_OK || st == UCS_ERR_TIMED_OUT ? 0 : -1;
}

/* Send without waiting (DATA into a peer that may not want it); the buffer must stay valid. */
static void send_nowait(uint64_t tag, const void *buf, size_t len)
{
    ucp_request_param_t p = { .op_attr_mask = 0 };
    void *req = ucp_tag_send_nbx(g.ep, buf, len, tag, &p);
    if (UCS_PTR_IS_PTR(req))
        ucp_request_free(req);
}

/* Receive the message with this tag within wait ms: its length, -1 on timeout or error. */
static long recv_bytes(uint64_t tag, void *buf, size_t len, double wait)
{
    struct req_state rs = { 0 };
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.recv = on_recv,
        .user_data = &rs,
    };
    int saved = timeout_ms;

    timeout_ms = (int)wait;
    void *req = ucp_tag_recv_nbx(g.worker, buf, len, tag, UINT64_MAX, &p);
    ucs_status_t st = req_wait(req, &rs, true);
    timeout_ms = saved;
    return st == UCS_OK ? (long)rs.length : -1;
}

static int ucx_setup(void)
{
    ucp_config_t *cfg;
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES,
        .features = UCP_FEATURE_TAG,
    };
    ucp_worker_params_t wp = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE,
    };

    if (ucp_config_read(NULL, NULL, &cfg) != UCS_OK)
        return -1;
    ucs_status_t st = ucp_init(&params, cfg, &g.ctx);
    ucp_config_release(cfg);
    if (st != UCS_OK || ucp_worker_create(g.ctx, &wp, &g.worker) != UCS_OK ||
        ucp_worker_get_address(g.worker, &g.addr, &g.addr_len) != UCS_OK)
        return -1;
    /* Ours goes out as a daemon's would, with no data lanes: everything then comes to g.worker. */
    const void *mine[1] = { g.addr };
    size_t mine_len[1] = { g.addr_len };
    g.packed_len = wireaddr_size(1, mine_len);
    if ((g.packed = malloc(g.packed_len)) == NULL)
        return -1;
    wireaddr_pack(g.packed, 1, mine, mine_len);
    /* The victim's loop worker: the first of its address. */
    const uint8_t *theirs[1 + WIREADDR_MAX_LANES];
    size_t theirs_len[1 + WIREADDR_MAX_LANES];
    int workers = wireaddr_unpack(g.victim_addr, g.victim_addr_len, theirs, theirs_len);
    if (workers < 1)
        return -1;
    g.lane_addr = workers > 1 ? theirs[1] : NULL;
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = (const ucp_address_t *)theirs[0],
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = { .cb = on_ep_error, .arg = NULL },
    };
    return ucp_ep_create(g.worker, &ep, &g.ep) == UCS_OK ? 0 : -1;
}

/* Force-close an endpoint, waiting for it at most 2 s. */
static void ep_close(ucp_ep_h ep)
{
    ucp_request_param_t p = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                              .flags = UCP_EP_CLOSE_FLAG_FORCE };
    void *req = ucp_ep_close_nbx(ep, &p);
    double end = now_ms() + 2000;
    if (UCS_PTR_IS_PTR(req)) {
        while (ucp_request_check_status(req) == UCS_INPROGRESS && now_ms() < end)
            ucp_worker_progress(g.worker);
        ucp_request_free(req);
    }
}

static void ucx_teardown(void)
{
    if (g.ep != NULL)
        ep_close(g.ep);
    free(g.packed);
    if (g.addr != NULL)
        ucp_worker_release_address(g.worker, g.addr);
    if (g.worker != NULL)
        ucp_worker_destroy(g.worker);
    if (g.ctx != NULL)
        ucp_cleanup(g.ctx);
}

/* ---------------------------------------------------------------- the peer protocol */

static int send_msg(uint64_t tag, B10__Peer__Msg *msg)
{
    size_t len = b10__peer__msg__get_packed_size(msg);
    uint8_t *buf = malloc(len ? len : 1);
    int rc;

    if (buf == NULL)
        return -1;
    b10__peer__msg__pack(msg, buf);
    rc = send_bytes(tag, buf, len);
    free(buf);
    return rc;
}

/* Wait for a peer message on tag: decoded, or NULL. */
static B10__Peer__Msg *recv_msg(uint64_t tag, double wait)
{
    uint8_t buf[1024];
    long n = recv_bytes(tag, buf, sizeof(buf), wait);

    return n < 0 ? NULL : b10__peer__msg__unpack(NULL, (size_t)n, buf);
}

/* Open a link with a fresh generation: HELLO, then HELLO_ACK. */
static int link_open(struct tag_link *l, const char *c)
{
    B10__Peer__Hello h = B10__PEER__HELLO__INIT;
    B10__Peer__Msg m = B10__PEER__MSG__INIT;

    l->sender_id = g.self_id;
    l->receiver_id = g.victim_id;
    l->gen = rnd64();
    for (int i = 0; i < 2; i++) {
        uint64_t k = rnd64();
        memcpy(l->key + 8 * i, &k, 8);
    }
    h.version = 2;   /* B10_PEER_PROTOCOL_VERSION */
    h.daemon_id = g.self_id;
    h.to_daemon_id = g.victim_id;
    h.gen = l->gen;
    h.tag_key = (ProtobufCBinaryData){ sizeof(l->key), l->key };
    h.worker_address = (ProtobufCBinaryData){ g.packed_len, g.packed };
    m.body_case = B10__PEER__MSG__BODY_HELLO;
    m.hello = &h;
    if (send_msg(TAG_HELLO, &m) != 0)
        return fail(c, "sending HELLO failed");
    B10__Peer__Msg *ack = recv_msg(tags_derive(l, 0, 0, TAG_KIND_HELLO_ACK), timeout_ms);
    if (ack == NULL || ack->body_case != B10__PEER__MSG__BODY_HELLO_ACK ||
        ack->hello_ack->status != B10__STATUS__OK) {
        if (ack != NULL)
            b10__peer__msg__free_unpacked(ack, NULL);
        return fail(c, "no HELLO_ACK with OK for generation %016" PRIx64, l->gen);
    }
    b10__peer__msg__free_unpacked(ack, NULL);
    return 0;
}

struct piece {
    uint64_t off;   /* in our region, or an absolute address when abs */
    uint64_t len;
    bool abs;
};

/* Send a CONTROL: chunks[i] pieces each, pieces in order. */
static int send_control(const struct tag_link *l, uint64_t xid, uint64_t gen, const char *dst,
                        const uint32_t *chunks, uint32_t nchunks, const struct piece *pc,
                        uint32_t npieces, uint64_t total_override)
{
    uint8_t cp[64 * 4], ps[64 * 16];
    uint64_t total = 0;
    B10__Peer__Control ctl = B10__PEER__CONTROL__INIT;
    B10__Peer__Msg m = B10__PEER__MSG__INIT;

    for (uint32_t i = 0; i < nchunks; i++)
        frame_put_u32(cp + 4 * i, chunks[i]);
    for (uint32_t i = 0; i < npieces; i++) {
        uint64_t a = pc[i].abs ? pc[i].off : (uint64_t)(uintptr_t)g.reg + pc[i].off;
        frame_put_u64(ps + 16 * i, a);
        frame_put_u64(ps + 16 * i + 8, pc[i].len);
        total += pc[i].len;
    }
    ctl.xfer_id = xid;
    ctl.gen = gen;
    ctl.dst_agent = (char *)dst;
    ctl.src_agent = "rogue-src";
    ctl.deadline_ms = 3000;
    ctl.nchunks = nchunks;
    ctl.total_bytes = total_override ? total_override : total;
    ctl.chunk_pieces = (ProtobufCBinaryData){ 4 * nchunks, cp };
    ctl.pieces = (ProtobufCBinaryData){ 16 * npieces, ps };
    m.body_case = B10__PEER__MSG__BODY_CONTROL;
    m.control = &ctl;
    return send_msg(tags_derive(l, 0, 0, TAG_KIND_CONTROL), &m);
}

/* READY (0), RESULT with its status (>0: status + 1000), or nothing within wait (-1). */
static int await_ready_or_result(const struct tag_link *l, uint64_t xid, double wait,
                                 char *detail, size_t detail_len)
{
    uint8_t rbuf[1024], tbuf[1024];
    struct req_state rr = { 0 }, rt = { 0 };
    ucp_request_param_t pr = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                               .cb.recv = on_recv, .user_data = &rr };
    ucp_request_param_t pt = pr;
    pt.user_data = &rt;
    void *qr = ucp_tag_recv_nbx(g.worker, rbuf, sizeof(rbuf), tags_derive(l, xid, 0, TAG_KIND_READY),
                                UINT64_MAX, &pr);
    void *qt = ucp_tag_recv_nbx(g.worker, tbuf, sizeof(tbuf), tags_derive(l, xid, 0, TAG_KIND_RESULT),
                                UINT64_MAX, &pt);
    double end = now_ms() + wait;
    int out = -1;

    if (detail_len)
        detail[0] = '\0';
    while (!rr.done && !rt.done && now_ms() < end)
        if (ucp_worker_progress(g.worker) == 0)
            usleep(100);
    if (rt.done && rt.status == UCS_OK) {
        B10__Peer__Msg *m = b10__peer__msg__unpack(NULL, rt.length, tbuf);
        if (m != NULL && m->body_case == B10__PEER__MSG__BODY_RESULT) {
            out = 1000 + (int)m->result->status;
            snprintf(detail, detail_len, "%s", m->result->detail);
        }
        if (m != NULL)
            b10__peer__msg__free_unpacked(m, NULL);
    } else if (rr.done && rr.status == UCS_OK) {
        out = 0;
    }
    void *qs[2] = { qr, qt };
    struct req_state *rs[2] = { &rr, &rt };
    for (int i = 0; i < 2; i++) {
        if (!UCS_PTR_IS_PTR(qs[i]))
            continue;
        if (!rs[i]->done)
            ucp_request_cancel(g.worker, qs[i]);
        while (!rs[i]->done)
            ucp_worker_progress(g.worker);
        ucp_request_free(qs[i]);
    }
    return out;
}

/* The RESULT of a transfer: its status, or -1. */
static int await_result(const struct tag_link *l, uint64_t xid, double wait, char *detail,
                        size_t detail_len)
{
    B10__Peer__Msg *m = recv_msg(tags_derive(l, xid, 0, TAG_KIND_RESULT), wait);
    int st = -1;

    if (detail_len)
        detail[0] = '\0';
    if (m != NULL && m->body_case == B10__PEER__MSG__BODY_RESULT) {
        st = (int)m->result->status;
        snprintf(detail, detail_len, "%s", m->result->detail);
    }
    if (m != NULL)
        b10__peer__msg__free_unpacked(m, NULL);
    return st;
}

static uint64_t new_xid(void)
{
    return (g.self_id << 32) | ++g.next_xfer;
}

/* Does the region hold exactly what it must? */
static int region_check(const char *c, const char *when)
{
    for (uint32_t i = 0; i < REG_BYTES; i++)
        if (g.reg[i] != g.want[i])
            return fail(c, "%s: region byte %u is 0x%02x, must be 0x%02x", when, i, g.reg[i],
                        g.want[i]);
    return 0;
}

static const char *sname(int st)
{
    return b10_status_name((b10_status_t)st);
}

/* ---------------------------------------------------------------- cases */

static struct tag_link L;       /* the current link */
static bool L_up;

static int ensure_link(const char *c)
{
    if (L_up)
        return 0;
    if (link_open(&L, c) != 0)
        return 1;
    L_up = true;
    return 0;
}

static uint64_t key_seq = 100;

/* A correct transfer: two chunks of pieces in our region; it must land exactly. */
static int case_good(const char *c)
{
    static uint8_t data[2][CHUNK];
    uint64_t key = ++key_seq, xid = new_xid();
    uint64_t base = (key % 32) * 16384;
    struct piece pc[] = { { base, 4096, false }, { base + 8192, 4096, false },
                          { base + 4096, 4096, false }, { base + 12288, 4096, false } };
    uint32_t chunks[] = { 2, 2 };
    char detail[256];

    if (ensure_link(c) != 0)
        return 1;
    if (send_control(&L, xid, L.gen, g.agent, chunks, 2, pc, 4, 0) != 0)
        return fail(c, "sending CONTROL failed");
    int r = await_ready_or_result(&L, xid, timeout_ms, detail, sizeof(detail));
    if (r != 0)
        return fail(c, "a correct CONTROL got %s (%s)", r < 0 ? "no answer" : sname(r - 1000), detail);
    /* Chunk 0 is pieces 0 and 1, chunk 1 pieces 2 and 3, each in order. */
    for (uint32_t i = 0; i < CHUNK; i++) {
        data[0][i] = pat(key, i);
        data[1][i] = pat(key, CHUNK + i);
    }
    memcpy(g.want + base, data[0], 4096);
    memcpy(g.want + base + 8192, data[0] + 4096, 4096);
    memcpy(g.want + base + 4096, data[1], 4096);
    memcpy(g.want + base + 12288, data[1] + 4096, 4096);
    send_bytes(tags_derive(&L, xid, 0, TAG_KIND_DATA), data[0], CHUNK);
    send_bytes(tags_derive(&L, xid, 1, TAG_KIND_DATA), data[1], CHUNK);
    int st = await_result(&L, xid, timeout_ms, detail, sizeof(detail));
    if (st != 0)
        return fail(c, "RESULT %s (%s), expected OK", st < 0 ? "missing" : sname(st), detail);
    if (region_check(c, "after a correct transfer") != 0)
        return 1;
    return pass(c, "a correct transfer of 2 chunks landed exactly (RESULT OK)");
}

/* Start a transfer of one CHUNK-byte chunk into a fresh area; returns its id, 0 on failure. */
static uint64_t start_one(const char *c, const struct tag_link *l, uint64_t *off_p)
{
    uint64_t xid = new_xid(), off = 512 * 1024 + (xid % 32) * 16384;
    struct piece pc[] = { { off, CHUNK, false } };
    uint32_t chunks[] = { 1 };
    char detail[256];

    if (send_control(l, xid, l->gen, g.agent, chunks, 1, pc, 1, 0) != 0) {
        fail(c, "sending CONTROL failed");
        return 0;
    }
    int r = await_ready_or_result(l, xid, timeout_ms, detail, sizeof(detail));
    if (r != 0) {
        fail(c, "CONTROL got %s (%s), expected READY", r < 0 ? "no answer" : sname(r - 1000), detail);
        return 0;
    }
    *off_p = off;
    return xid;
}

static uint8_t junk[4 * CHUNK];

static int case_size(const char *c, size_t len, const char *what)
{
    uint64_t off, xid;
    char detail[256];

    if (ensure_link(c) != 0 || (xid = start_one(c, &L, &off)) == 0)
        return 1;
    memset(junk, 0x5a, sizeof(junk));
    send_bytes(tags_derive(&L, xid, 0, TAG_KIND_DATA), junk, len);
    int st = await_result(&L, xid, timeout_ms, detail, sizeof(detail));
    progress_for(200);
    if (region_check(c, what) != 0)
        return 1;
    if (st != B10_ERR_PEER_PROTOCOL)
        return fail(c, "%s: RESULT %s (%s), expected B10_ERR_PEER_PROTOCOL", what,
                    st < 0 ? "missing" : sname(st), detail);
    return pass(c, "%s: refused with %s (%s), nothing scattered", what, sname(st), detail);
}

static int case_oversize(const char *c)
{
    return case_size(c, 2 * CHUNK, "DATA twice the announced size");
}

static int case_undersize(const char *c)
{
    return case_size(c, CHUNK / 2, "DATA half the announced size");
}

/* DATA for transfers that were never announced, on derived and random tags. */
static int case_unknown(const char *c)
{
    if (ensure_link(c) != 0)
        return 1;
    memset(junk, 0x66, sizeof(junk));
    for (int i = 0; i < 8; i++) {
        send_nowait(tags_derive(&L, new_xid(), 0, TAG_KIND_DATA), junk, CHUNK);
        send_nowait(rnd64() & ~TAG_CLASS_CONTROL, junk, 64);
    }
    progress_for(500);
    if (region_check(c, "after DATA for unknown transfers") != 0)
        return 1;
    return pass(c, "16 DATA messages for unknown transfers changed nothing");
}

/* Destination pieces outside our registration, and for ranks that do not exist. */
static int case_oob(const char *c)
{
    struct {
        const char *what;
        struct piece pc;
        const char *dst;
        int want;
    } tries[] = {
        { "a piece running past the end of the region", { REG_BYTES - 100, 4096, false }, NULL,
          B10_ERR_REMOTE_REJECTED },
        { "a piece before the region", { (uint64_t)-4096, 8192, false }, NULL, B10_ERR_REMOTE_REJECTED },
        { "a piece at address 4096", { 4096, 4096, true }, NULL, B10_ERR_REMOTE_REJECTED },
        { "a rank that does not exist", { 0, 4096, false }, "no-such-rank", B10_ERR_UNKNOWN_AGENT },
    };
    int bad = 0;

    if (ensure_link(c) != 0)
        return 1;
    for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
        uint64_t xid = new_xid();
        uint32_t chunks[] = { 1 };
        char detail[256];

        send_control(&L, xid, L.gen, tries[i].dst ? tries[i].dst : g.agent, chunks, 1,
                     &tries[i].pc, 1, 0);
        int r = await_ready_or_result(&L, xid, timeout_ms, detail, sizeof(detail));
        if (r == 0) {
            /* Admitted: the worst case. Push the bytes so that the check below sees them. */
            memset(junk, 0x77, sizeof(junk));
            send_bytes(tags_derive(&L, xid, 0, TAG_KIND_DATA), junk, tries[i].pc.len);
            bad |= fail(c, "%s: admitted", tries[i].what);
        } else if (r - 1000 != tries[i].want) {
            bad |= fail(c, "%s: got %s (%s), expected %s", tries[i].what,
                        r < 0 ? "no answer" : sname(r - 1000), detail, sname(tries[i].want));
        } else {
            pass(c, "%s: refused, %s: %s", tries[i].what, sname(r - 1000), detail);
        }
    }
    progress_for(100);
    return bad | region_check(c, "after out-of-bounds CONTROLs");
}

/* A CONTROL naming a generation that is not its link's. */
static int case_badgen(const char *c)
{
    uint64_t xid = new_xid();
    uint32_t chunks[] = { 1 };
    struct piece pc = { 0, 4096, false };
    char detail[256];

    if (ensure_link(c) != 0)
        return 1;
    send_control(&L, xid, L.gen ^ 0x5555, g.agent, chunks, 1, &pc, 1, 0);
    int r = await_ready_or_result(&L, xid, timeout_ms, detail, sizeof(detail));
    if (r != 1000 + B10_ERR_PEER_PROTOCOL)
        return fail(c, "a CONTROL with a wrong generation got %s (%s)",
                    r < 0 ? "no answer" : r == 0 ? "READY" : sname(r - 1000), detail);
    return pass(c, "a CONTROL with a wrong generation: %s (%s)", sname(r - 1000), detail);
}

/*
 * A transfer in flight on link 1 when link 2 opens: the daemon fails it; its
 * DATA then arrives on the old generation's tags and must land nowhere; a
 * CONTROL on the old link's control tag must not be admitted.
 */
static int case_oldgen(const char *c)
{
    uint64_t off, xid;
    struct tag_link old;

    if (ensure_link(c) != 0 || (xid = start_one(c, &L, &off)) == 0)
        return 1;
    old = L;
    L_up = false;
    if (ensure_link(c) != 0)
        return 1;
    memset(junk, 0x99, sizeof(junk));
    send_bytes(tags_derive(&old, xid, 0, TAG_KIND_DATA), junk, CHUNK);
    uint64_t x2 = new_xid();
    uint32_t chunks[] = { 1 };
    struct piece pc = { off, CHUNK, false };
    char detail[256];
    send_control(&old, x2, old.gen, g.agent, chunks, 1, &pc, 1, 0);
    int r = await_ready_or_result(&old, x2, 1000, detail, sizeof(detail));
    if (r == 0) {
        send_bytes(tags_derive(&old, x2, 0, TAG_KIND_DATA), junk, CHUNK);
        progress_for(200);
        region_check(c, "after DATA on an old generation");
        return fail(c, "a CONTROL on the retired generation was admitted");
    }
    progress_for(300);
    if (region_check(c, "after DATA and CONTROL on a retired generation") != 0)
        return 1;
    return pass(c, "DATA and CONTROL on a retired generation changed nothing (CONTROL: %s)",
                r < 0 ? "no answer" : sname(r - 1000));
}

/*
 * Replays: the DATA of a finished transfer, and the whole of a failed one
 * (its CONTROL again, then its DATA): nothing may land.
 */
static int case_replay(const char *c)
{
    uint64_t off, xid;
    char detail[256];
    uint32_t chunks[] = { 1 };

    if (ensure_link(c) != 0 || (xid = start_one(c, &L, &off)) == 0)
        return 1;
    /* Fail it with undersize DATA, then replay CONTROL and a full DATA. */
    memset(junk, 0x42, sizeof(junk));
    send_bytes(tags_derive(&L, xid, 0, TAG_KIND_DATA), junk, 100);
    int st = await_result(&L, xid, timeout_ms, detail, sizeof(detail));
    if (st != B10_ERR_PEER_PROTOCOL)
        return fail(c, "setup: undersize DATA got %s", st < 0 ? "no RESULT" : sname(st));
    struct piece pc = { off, CHUNK, false };
    send_control(&L, xid, L.gen, g.agent, chunks, 1, &pc, 1, 0);
    int r = await_ready_or_result(&L, xid, timeout_ms, detail, sizeof(detail));
    send_bytes(tags_derive(&L, xid, 0, TAG_KIND_DATA), junk, CHUNK);
    progress_for(300);
    if (region_check(c, "after replaying a failed transfer") != 0)
        return 1;
    if (r == 0)
        return fail(c, "the replayed CONTROL of a failed transfer was admitted");
    pass(c, "replayed CONTROL of a failed transfer: %s (%s); its DATA changed nothing",
         r < 0 ? "no answer" : sname(r - 1000), detail);

    /* A finished transfer's DATA again, with other bytes. */
    if (case_good(c) != 0)
        return 1;
    uint64_t done_xid = (g.self_id << 32) | g.next_xfer;
    memset(junk, 0x24, sizeof(junk));
    send_bytes(tags_derive(&L, done_xid, 0, TAG_KIND_DATA), junk, CHUNK);
    send_bytes(tags_derive(&L, done_xid, 1, TAG_KIND_DATA), junk, CHUNK);
    progress_for(300);
    if (region_check(c, "after replaying a finished transfer's DATA") != 0)
        return 1;
    return pass(c, "the DATA of a finished transfer, replayed, changed nothing");
}

/* Garbage where HELLO and CONTROL go. */
static int case_malformed(const char *c)
{
    uint8_t bytes[256];
    int bad = 0;

    for (size_t i = 0; i < sizeof(bytes); i++)
        bytes[i] = (uint8_t)(i * 37 + 11);
    send_bytes(TAG_HELLO, bytes, sizeof(bytes));
    send_bytes(TAG_HELLO, bytes, 0);
    /* A HELLO of the wrong version and one with a short key: no link may come of them. */
    B10__Peer__Hello h = B10__PEER__HELLO__INIT;
    B10__Peer__Msg m = B10__PEER__MSG__INIT;
    struct tag_link bogus = { .sender_id = g.self_id, .receiver_id = g.victim_id, .gen = rnd64() };
    h.version = 99;
    h.daemon_id = g.self_id;
    h.to_daemon_id = g.victim_id;
    h.gen = bogus.gen;
    h.tag_key = (ProtobufCBinaryData){ sizeof(bogus.key), bogus.key };
    h.worker_address = (ProtobufCBinaryData){ g.packed_len, g.packed };
    m.body_case = B10__PEER__MSG__BODY_HELLO;
    m.hello = &h;
    send_msg(TAG_HELLO, &m);
    B10__Peer__Msg *ack = recv_msg(tags_derive(&bogus, 0, 0, TAG_KIND_HELLO_ACK), 500);
    if (ack != NULL && ack->body_case == B10__PEER__MSG__BODY_HELLO_ACK &&
        ack->hello_ack->status == B10__STATUS__OK)
        bad |= fail(c, "a HELLO of version 99 was acknowledged OK");
    if (ack != NULL)
        b10__peer__msg__free_unpacked(ack, NULL);
    h.version = 2;   /* right version: only the key is wrong */
    h.tag_key.len = 3;
    send_msg(TAG_HELLO, &m);
    ack = recv_msg(tags_derive(&bogus, 0, 0, TAG_KIND_HELLO_ACK), 500);
    if (ack != NULL && ack->body_case == B10__PEER__MSG__BODY_HELLO_ACK &&
        ack->hello_ack->status == B10__STATUS__OK)
        bad |= fail(c, "a HELLO with a 3-byte key was acknowledged OK");
    if (ack != NULL)
        b10__peer__msg__free_unpacked(ack, NULL);

    if (ensure_link(c) != 0)
        return 1;
    /* Garbage, and a READY, on the control tag. */
    send_bytes(tags_derive(&L, 0, 0, TAG_KIND_CONTROL), bytes, sizeof(bytes));
    B10__Peer__Ready rd = B10__PEER__READY__INIT;
    B10__Peer__Msg mr = B10__PEER__MSG__INIT;
    mr.body_case = B10__PEER__MSG__BODY_READY;
    mr.ready = &rd;
    send_msg(tags_derive(&L, 0, 0, TAG_KIND_CONTROL), &mr);

    /* CONTROLs whose tables lie: counts, totals, empty pieces, empty names. */
    struct {
        const char *what;
        uint32_t chunks[2];
        uint32_t nchunks;
        struct piece pc[2];
        uint32_t npieces;
        uint64_t total;
        const char *dst;
    } lies[] = {
        { "a chunk table naming 3 pieces of 1", { 3 }, 1, { { 0, 4096, false } }, 1, 0, NULL },
        { "a total of 1 byte for 4096", { 1 }, 1, { { 0, 4096, false } }, 1, 1, NULL },
        { "a zero-length piece", { 1 }, 1, { { 0, 0, false } }, 1, 0, NULL },
        { "a chunk larger than a staging view", { 1 }, 1, { { 0, (uint64_t)1 << 40, false } }, 1, 0, NULL },
        { "a piece that wraps around", { 1 }, 1, { { UINT64_MAX - 10, 4096, true } }, 1, 0, NULL },
        { "an empty destination name", { 1 }, 1, { { 0, 4096, false } }, 1, 0, "" },
        { "no chunks", { 0 }, 0, { { 0, 4096, false } }, 1, 0, NULL },
    };
    for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
        uint64_t xid = new_xid();
        char detail[256];

        send_control(&L, xid, L.gen, lies[i].dst ? lies[i].dst : g.agent, lies[i].chunks,
                     lies[i].nchunks, lies[i].pc, lies[i].npieces, lies[i].total);
        int r = await_ready_or_result(&L, xid, timeout_ms, detail, sizeof(detail));
        if (r == 0) {
            memset(junk, 0x13, sizeof(junk));
            send_bytes(tags_derive(&L, xid, 0, TAG_KIND_DATA), junk, 4096);
            bad |= fail(c, "%s: admitted", lies[i].what);
        } else if (r < 0) {
            bad |= fail(c, "%s: no answer", lies[i].what);
        } else {
            pass(c, "%s: refused, %s: %s", lies[i].what, sname(r - 1000), detail);
        }
    }
    progress_for(200);
    bad |= region_check(c, "after malformed messages");
    if (!bad)
        pass(c, "garbage HELLOs and CONTROLs changed nothing");
    return bad;
}

/* Send a heartbeat as this rogue daemon. */
static int send_beat(uint64_t from, uint64_t out_gen, uint64_t in_gen, bool reply, bool stale,
                     uint64_t nonce)
{
    B10__Peer__Heartbeat hb = B10__PEER__HEARTBEAT__INIT;
    B10__Peer__Msg m = B10__PEER__MSG__INIT;

    hb.daemon_id = from;
    hb.to_daemon_id = g.victim_id;
    hb.out_gen = out_gen;
    hb.in_gen = in_gen;
    hb.reply = reply;
    hb.out_stale = stale && out_gen != 0;
    hb.in_stale = stale && in_gen != 0;
    hb.nonce = nonce;
    m.body_case = B10__PEER__MSG__BODY_HEARTBEAT;
    m.heartbeat = &hb;
    return send_msg(TAG_HEARTBEAT, &m);
}

/* The victim's answer to our heartbeat with this nonce: 1 stale, 0 held, -1 none. */
static int beat_answer(uint64_t nonce, double wait)
{
    double end = now_ms() + wait;
    int r = -1;

    while (r < 0 && now_ms() < end) {
        B10__Peer__Msg *m = recv_msg(TAG_HEARTBEAT, end - now_ms());
        if (m == NULL)
            break;
        /* The victim's own heartbeats (it is busy with us) are not answers: skip them. */
        if (m->body_case == B10__PEER__MSG__BODY_HEARTBEAT && m->heartbeat->reply &&
            m->heartbeat->nonce == nonce)
            r = m->heartbeat->out_stale ? 1 : 0;
        b10__peer__msg__free_unpacked(m, NULL);
    }
    return r;
}

/*
 * Heartbeats: ours on the live link is answered as held, on a made-up
 * generation as stale, each echoing our nonce; one from a daemon the victim
 * does not know gets no answer. Forged answers (to no heartbeat of the
 * victim's) calling our links stale change nothing: a correct transfer on
 * the link still lands.
 */
static int case_heartbeat(const char *c)
{
    uint64_t nonce = rnd64();

    if (ensure_link(c) != 0)
        return 1;
    send_beat(g.self_id, L.gen, 0, false, false, nonce);
    int r = beat_answer(nonce, timeout_ms);
    if (r != 0)
        return fail(c, "a heartbeat on the live link was answered %s", r < 0 ? "not at all" : "stale");
    send_beat(g.self_id, L.gen ^ 0x77, 0, false, false, ++nonce);
    if ((r = beat_answer(nonce, timeout_ms)) != 1)
        return fail(c, "a heartbeat naming a made-up generation was answered %s",
                    r < 0 ? "not at all" : "held");
    send_beat(rnd64(), L.gen, 0, false, false, ++nonce);
    if ((r = beat_answer(nonce, 300)) != -1)
        return fail(c, "a heartbeat from an unknown daemon was answered");
    /* Our link is the victim's inbound one: in_gen of its answers. */
    send_beat(g.self_id, 0, L.gen, true, true, 0);
    send_beat(g.self_id, 0, L.gen, true, true, rnd64());
    send_beat(g.self_id, L.gen, L.gen, true, true, rnd64());
    progress_for(200);
    if (case_good(c) != 0)
        return fail(c, "forged heartbeat answers broke the link");
    return pass(c, "heartbeats answered held / stale / not at all as they should; forged answers "
                   "calling the live link stale changed nothing");
}

/*
 * A data lane carries only DATA: a control-class message sent straight to
 * one (its address is in the agent descriptor) is dropped there. Sent with a
 * registered tag (TAG_HEARTBEAT) and large enough for a rendezvous, it
 * completes at our end only once the lane has taken it; asked about instead,
 * as DATA is, it would wait at the head of the lane's queue for good.
 */
static int case_lane(const char *c)
{
    static uint8_t big[16 << 20];
    static struct req_state rs;     /* the send may outlive the case */
    ucp_ep_h ep;

    if (g.lane_addr == NULL)
        return pass(c, "the victim has no data lanes: nothing to test");
    ucp_ep_params_t params = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
        .address = (const ucp_address_t *)g.lane_addr,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
    };
    if (ucp_ep_create(g.worker, &params, &ep) != UCS_OK)
        return fail(c, "no endpoint to the victim's first data lane");
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = on_send,
        .user_data = &rs,
    };
    rs = (struct req_state){ 0 };
    void *req = ucp_tag_send_nbx(ep, big, sizeof(big), TAG_HEARTBEAT, &p);
    ucs_status_t st = req_wait(req, &rs, false);
    ep_close(ep);
    if (st == UCS_ERR_TIMED_OUT)
        return fail(c, "a control-class message to a data lane was never taken off it");
    if (case_good(c) != 0)
        return fail(c, "a control-class message to a data lane broke the link");
    return pass(c, "a control-class message to a data lane was dropped there (%s)",
                ucs_status_string(st));
}

static const struct testout_case cases[] = {
    { "good", case_good },
    { "unknown", case_unknown },
    { "oversize", case_oversize },
    { "undersize", case_undersize },
    { "oob", case_oob },
    { "badgen", case_badgen },
    { "oldgen", case_oldgen },
    { "replay", case_replay },
    { "malformed", case_malformed },
    { "heartbeat", case_heartbeat },
    { "lane", case_lane },
};

/* ---------------------------------------------------------------- setup */

static int setup(const char *sock)
{
    b10_conn_params_t cp = { .field_mask = B10_CONN_FIELD_SOCKET_PATH, .socket_path = sock };
    const void *desc;
    size_t len;
    b10_mem_t *mem;
    b10_status_t st;

    snprintf(g.agent, sizeof(g.agent), "rogue-%ld", (long)getpid());
    cp.agent_name = g.agent;
    if ((st = b10_conn_open(&cp, &g.conn)) != B10_OK)
        return fail("setup", "b10_conn_open: %s", b10_status_name(st));
    if ((st = b10_dram_alloc(REG_BYTES, (void **)&g.reg)) != B10_OK)
        return fail("setup", "b10_dram_alloc: %s", b10_status_name(st));
    g.want = malloc(REG_BYTES);
    if (g.want == NULL)
        return fail("setup", "out of memory");
    for (uint32_t i = 0; i < REG_BYTES; i++)
        g.reg[i] = g.want[i] = pat(7, i);
    b10_mem_params_t mp = { .kind = B10_MEM_DRAM, .addr = g.reg, .length = REG_BYTES };
    if ((st = b10_mem_register(g.conn, &mp, &mem)) != B10_OK)
        return fail("setup", "b10_mem_register: %s", b10_status_name(st));
    if ((st = b10_agent_desc(g.conn, &desc, &len)) != B10_OK)
        return fail("setup", "b10_agent_desc: %s", b10_status_name(st));
    B10__AgentDesc *ad = b10__agent_desc__unpack(NULL, len, desc);
    if (ad == NULL || ad->daemon_id == 0 || ad->worker_address.len == 0)
        return fail("setup", "the agent descriptor does not decode");
    g.victim_id = ad->daemon_id;
    g.victim_addr_len = ad->worker_address.len;
    g.victim_addr = malloc(g.victim_addr_len);
    if (g.victim_addr == NULL)
        return fail("setup", "out of memory");
    memcpy(g.victim_addr, ad->worker_address.data, g.victim_addr_len);
    b10__agent_desc__free_unpacked(ad, NULL);
    g.self_id = rnd64() & 0x7fffffffffffffffull;
    if (ucx_setup() != 0)
        return fail("setup", "UCX setup failed");
    return 0;
}

/* After each case: a daemon that dropped our endpoint ends the run. */
static int after_case(const char *name)
{
    return g.ep_failed ? -fail(name, "the daemon dropped our endpoint") : 0;
}

int main(int argc, char **argv)
{
    size_t ncases = sizeof(cases) / sizeof(cases[0]);

    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    int sock = testout_args(argc, argv, cases, ncases, &timeout_ms);
    if (sock < 0 || setup(argv[sock]) != 0)
        return 2;
    int bad = testout_run(argv + sock + 1, argc - sock - 1, cases, ncases, after_case);
    /* Whatever came before, the daemon still takes a correct transfer from us. */
    if (!g.ep_failed)
        bad |= case_good("good-after") != 0;
    ucx_teardown();
    b10_conn_close(g.conn);
    b10_dram_free(g.reg);
    free(g.want);
    free(g.victim_addr);
    return bad ? 1 : 0;
}
