/*
 * b10-agentops — the agent operations beyond WRITE, between two real daemons:
 * a WRITE whose sync message reaches the destination rank only after its
 * bytes landed, a READ (the remote daemon writes back) verified byte for byte,
 * notify, check of remote descriptors true and false, and READs refused with
 * their reasons. One process plays both ranks, one connection to each daemon.
 *
 *   b10-agentops SOCKET_A SOCKET_B
 *
 * Prints "ok …" per check, "FAIL …" on the first failure; exits 0 or 1.
 */
#include <b10/b10.h>

#include "rank.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REGION (4u << 20)
#define WAIT_MS 30000





/*
 * The timings of transfer x, over with status st, of n spans: present, in
 * order, on one clock (client and daemons share this host's), the daemon's
 * byte count the spans'. Durations are never compared with a figure.
 */
static b10_status_t check_times(b10_xfer_t *x, b10_status_t st, const b10_span_t *local,
                                size_t n, char *detail, size_t detail_len)
{
    b10_xfer_times_t t;
    uint64_t bytes = 0;

    for (size_t i = 0; i < n; i++)
        bytes += local[i].length;
    b10_status_t ts = b10_xfer_times(x, &t);
    const char *bad = NULL;
    if (ts != B10_OK)
        bad = "b10_xfer_times of a transfer over did not answer B10_OK";
    else if (!(t.field_mask & B10_XFER_TIMES_CLIENT) || !(t.field_mask & B10_XFER_TIMES_DAEMON))
        bad = "client or daemon timings missing";
    else if (!(t.submit_ns <= t.encoded_ns && t.encoded_ns <= t.sent_ns &&
               t.sent_ns <= t.replied_ns))
        bad = "client timings out of order";
    else if (!(t.submit_ns <= t.received_ns && t.received_ns <= t.decoded_ns &&
               t.decoded_ns <= t.accepted_ns && t.accepted_ns <= t.replied_ns &&
               t.accepted_ns <= t.ended_ns))
        bad = "daemon timings out of order, or off the client's clock";
    else if (t.spans != n || t.bytes != bytes)
        bad = "span or byte count differs from the request";
    else if (st == B10_OK && (!(t.field_mask & B10_XFER_TIMES_FIRST) || t.first_ns < t.accepted_ns ||
                              t.first_ns > t.ended_ns || t.ended_ns <= t.received_ns))
        bad = "a landed transfer without its first byte between acceptance and end";
    if (bad == NULL)
        return st;
    snprintf(detail, detail_len, "%s (mask %" PRIx64 ", submit %" PRIu64 " encoded %" PRIu64
             " sent %" PRIu64 " replied %" PRIu64 ", received %" PRIu64 " decoded %" PRIu64
             " accepted %" PRIu64 " first %" PRIu64 " ended %" PRIu64 ", %" PRIu64 " bytes of %"
             PRIu64 ", %" PRIu64 " spans of %zu)", bad, t.field_mask, t.submit_ns, t.encoded_ns,
             t.sent_ns, t.replied_ns, t.received_ns, t.decoded_ns, t.accepted_ns, t.first_ns,
             t.ended_ns, t.bytes, bytes, t.spans, n);
    return B10_ERR_INTERNAL;
}

/*
 * Run one transfer of from's connection to completion; returns its status
 * (B10_ERR_INTERNAL, said in detail, when its timings do not hold together).
 */
static b10_status_t run(struct rank *from, struct rank *to, b10_op_t op, const b10_span_t *local,
                        const b10_span_t *remote, size_t n, const char *sync, char *detail,
                        size_t detail_len)
{
    b10_xfer_params_t xp = { .field_mask = B10_XFER_FIELD_DEADLINE, .op = op, .local = local,
                             .remote = remote, .count = n, .remote_agent = to->name,
                             .deadline_ms = WAIT_MS };
    if (sync != NULL) {
        xp.field_mask |= B10_XFER_FIELD_SYNC;
        xp.sync_msg = sync;
        xp.sync_length = strlen(sync);
    }
    b10_xfer_t *x;
    b10_status_t st = b10_xfer_submit(from->conn, &xp, &x);
    if (st != B10_OK) {
        snprintf(detail, detail_len, "%s", b10_conn_detail(from->conn));
        return st;
    }
    st = b10_xfer_wait(x, WAIT_MS);
    snprintf(detail, detail_len, "%s", b10_xfer_detail(x));
    if (st != B10_IN_PROGRESS)
        st = check_times(x, st, local, n, detail, detail_len);
    b10_xfer_release(x);
    return st;
}

/* Wait for one notification at r; *seen_p set when it came. */
static int expect_notice(struct rank *r, const char *from, const char *text, bool *seen_p,
                         const uint8_t *check_mem, uint8_t check_byte, size_t check_len)
{
    for (int i = 0; i < 3000; i++) {
        b10_notification_t *list;
        size_t n;
        b10_status_t st = b10_agent_notifications(r->conn, &list, &n);
        if (st != B10_OK)
            return fail("notifications", st, NULL);
        for (size_t k = 0; k < n; k++) {
            bool match = strcmp(list[k].agent, from) == 0 && list[k].length == strlen(text) &&
                         memcmp(list[k].data, text, list[k].length) == 0;
            if (match) {
                *seen_p = true;
                /* Seen only after the bytes it rode on landed. */
                for (size_t b = 0; check_mem != NULL && b < check_len; b++)
                    if (check_mem[b] != check_byte) {
                        b10_notifications_free(list, n);
                        printf("FAIL notice '%s' came before byte %zu landed\n", text, b);
                        return 1;
                    }
            }
        }
        b10_notifications_free(list, n);
        if (*seen_p)
            return 0;
        usleep(1000);
    }
    printf("FAIL notice '%s' from %s never came\n", text, from);
    return 1;
}

int main(int argc, char **argv)
{
    struct rank a = { 0 }, b = { 0 };
    char detail[512];
    b10_status_t st;
    bool seen = false;

    if (argc != 3) {
        fprintf(stderr, "usage: %s SOCKET_A SOCKET_B\n", argv[0]);
        return 2;
    }
    if (rank_open(&a, argv[1], "ops-a", REGION, 0xA1) || rank_open(&b, argv[2], "ops-b", REGION, 0xB2) ||
        rank_load(&a, &b) || rank_load(&b, &a))
        return 1;
    uint64_t A = (uintptr_t)a.mem, B = (uintptr_t)b.mem;

    /* 1. WRITE a→b with a sync message: b hears it only once the bytes are there. */
    b10_span_t wl[2] = { { A + 100, 70000 }, { A + 1000000, 1 << 20 } };
    b10_span_t wr[2] = { { B + 5, 70000 }, { B + 2000000, 1 << 20 } };
    st = run(&a, &b, B10_OP_WRITE, wl, wr, 2, "write-landed", detail, sizeof(detail));
    if (st != B10_OK)
        return fail("WRITE with a sync message", st, detail);
    if (expect_notice(&b, "ops-a", "write-landed", &seen, b.mem + 2000000, 0xA1, 1 << 20))
        return 1;
    if (memcmp(b.mem + 5, a.mem + 100, 70000) != 0 || b.mem[4] != 0xB2 || b.mem[70005] != 0xB2)
        return printf("FAIL WRITE bytes\n"), 1;
    printf("ok WRITE landed and its sync message reached the destination rank after the bytes\n");

    /* 2. READ: a pulls b's bytes; b (the holder) hears the sync message. */
    for (size_t i = 0; i < REGION; i++)
        b.mem[i] = (uint8_t)(i * 7 + 3);
    b10_span_t rl[3] = { { A + 3, 4096 }, { A + 3000000, 12345 }, { A + 500000, 300000 } };
    b10_span_t rr[3] = { { B + 17, 4096 }, { B + 100, 12345 }, { B + 3500000, 300000 } };
    st = run(&a, &b, B10_OP_READ, rl, rr, 3, "read-done", detail, sizeof(detail));
    if (st != B10_OK)
        return fail("READ", st, detail);
    for (int i = 0; i < 3; i++)
        if (memcmp(a.mem + (rl[i].addr - A), b.mem + (rr[i].addr - B), rl[i].length) != 0)
            return printf("FAIL READ bytes of span %d\n", i), 1;
    if (a.mem[2] != 0xA1 || a.mem[3 + 4096] != 0xA1)
        return printf("FAIL READ wrote outside its spans\n"), 1;
    seen = false;
    if (expect_notice(&b, "ops-a", "read-done", &seen, NULL, 0, 0))
        return 1;
    printf("ok READ landed byte for byte and the holding rank heard its sync message\n");

    /* 3. notify alone. */
    if ((st = b10_agent_notify(a.conn, "ops-b", "hello-b", 7)) != B10_OK)
        return fail("notify", st, b10_conn_detail(a.conn));
    seen = false;
    if (expect_notice(&b, "ops-a", "hello-b", &seen, NULL, 0, 0))
        return 1;
    printf("ok notify delivered\n");

    /* 4. check remote descriptors: inside, then one span past the end. */
    b10_span_t in[2] = { { B, 10 }, { B + REGION - 10, 10 } };
    if ((st = b10_agent_check(a.conn, "ops-b", in, 2)) != B10_OK)
        return fail("check inside", st, b10_conn_detail(a.conn));
    b10_span_t out[2] = { { B, 10 }, { B + REGION - 10, 11 } };
    st = b10_agent_check(a.conn, "ops-b", out, 2);
    if (st != B10_ERR_REMOTE_REJECTED || strstr(b10_conn_detail(a.conn), "span 1") == NULL)
        return fail("check outside (want B10_ERR_REMOTE_REJECTED naming span 1)", st,
                    b10_conn_detail(a.conn));
    printf("ok check: inside accepted, outside refused (%s)\n", b10_conn_detail(a.conn));

    /* 5. READs refused with their reasons, nothing written. */
    uint8_t before = a.mem[10];
    b10_span_t badr[1] = { { B + REGION - 100, 200 } };
    b10_span_t okl[1] = { { A + 10, 200 } };
    st = run(&a, &b, B10_OP_READ, okl, badr, 1, NULL, detail, sizeof(detail));
    if (st != B10_ERR_REMOTE_REJECTED || detail[0] == '\0')
        return fail("READ of a remote span outside registrations (want REMOTE_REJECTED)", st, detail);
    if (a.mem[10] != before)
        return printf("FAIL a refused READ wrote\n"), 1;
    printf("ok READ outside the remote registrations refused: %s\n", detail);
    b10_span_t badl[1] = { { A + REGION - 100, 200 } };
    b10_span_t okr[1] = { { B, 200 } };
    st = run(&a, &b, B10_OP_READ, badl, okr, 1, NULL, detail, sizeof(detail));
    if (st != B10_ERR_NOT_REGISTERED)
        return fail("READ into local memory outside registrations (want NOT_REGISTERED)", st, detail);
    printf("ok READ into unregistered local memory refused: %s\n", detail);

    /* 6. The daemons still serve: a fresh READ of everything b has. */
    b10_span_t all_l[1] = { { A, REGION } }, all_r[1] = { { B, REGION } };
    st = run(&a, &b, B10_OP_READ, all_l, all_r, 1, NULL, detail, sizeof(detail));
    if (st != B10_OK || memcmp(a.mem, b.mem, REGION) != 0)
        return fail("a fresh READ of the whole region", st, detail);
    printf("ok a fresh READ of %u bytes landed\n", REGION);

    /*
     * 7. Requests of many spans, whose tables go through the span arena
     * (libb10 takes it from 4096 spans): a WRITE of 6000 spans of 64 bytes
     * scattered backwards, then a READ of 5000 (the same arena, rewritten),
     * then a WRITE of 40,000, whose 1.25 MiB of tables outgrow the first
     * arena of 1 MiB (a new one, given again).
     */
    enum { SPAN = 64, MANY_MAX = 40000 };
    static const size_t many[] = { 6000, 5000, MANY_MAX };
    b10_span_t *ml = calloc(MANY_MAX, sizeof(*ml)), *mr = calloc(MANY_MAX, sizeof(*mr));
    if (ml == NULL || mr == NULL)
        return printf("FAIL out of memory\n"), 1;
    for (size_t k = 0; k < sizeof(many) / sizeof(many[0]); k++) {
        size_t n = many[k];
        b10_op_t op = k == 1 ? B10_OP_READ : B10_OP_WRITE;
        for (size_t i = 0; i < REGION; i++) {
            a.mem[i] = (uint8_t)(i * 5 + k);
            b.mem[i] = (uint8_t)(i * 11 + k + 1);
        }
        for (size_t i = 0; i < n; i++) {
            ml[i] = (b10_span_t){ A + i * SPAN, SPAN };
            mr[i] = (b10_span_t){ B + (n - 1 - i) * SPAN, SPAN };
        }
        st = run(&a, &b, op, ml, mr, n, NULL, detail, sizeof(detail));
        if (st != B10_OK)
            return fail("a transfer of thousands of spans (span arena)", st, detail);
        const uint8_t *from = op == B10_OP_WRITE ? a.mem : b.mem;
        const uint8_t *to = op == B10_OP_WRITE ? b.mem : a.mem;
        for (size_t i = 0; i < n; i++) {
            size_t f = op == B10_OP_WRITE ? i : n - 1 - i, t = op == B10_OP_WRITE ? n - 1 - i : i;
            if (memcmp(to + t * SPAN, from + f * SPAN, SPAN) != 0)
                return printf("FAIL %zu-span %s: span %zu differs\n", n,
                              op == B10_OP_WRITE ? "WRITE" : "READ", i), 1;
        }
        printf("ok a %s of %zu spans landed byte for byte\n", op == B10_OP_WRITE ? "WRITE" : "READ",
               n);
    }
    free(ml);
    free(mr);

    b10_conn_close(a.conn);
    b10_conn_close(b.conn);
    b10_dram_free(a.mem);
    b10_dram_free(b.mem);
    return 0;
}
