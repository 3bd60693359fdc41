/*
 * b10-settle — quiescence before news, against two real daemons of which B
 * delays every scatter by DELAY_MS (B10_TEST_COPY_DELAY_MS): a failure is
 * reported only once no copy for it can still write, and a deregistration
 * is answered only once the copies through its region ended.
 *
 *   b10-settle SOCKET_A SOCKET_B DELAY_MS CASE
 *
 * One process plays both ranks: "src" on A, "dst" on B; with both sockets
 * B's, a local transfer (no wire), whose failures wait for the same. Cases:
 *   deadline   src WRITEs into dst with a deadline far below DELAY_MS: the
 *              failure reaches src only after B's delayed scatter ended,
 *              and dst's memory does not change after that;
 *   read       dst READs from src, the same: its failure waits for the
 *              scatter of the write-back landing in its own memory;
 *   dereg      dst deregisters its region while a scatter into it is
 *              delayed: the answer comes after the scatter, and the memory
 *              does not change after it;
 *   leave      src leaves while its failed WRITE's news waits for B's
 *              scatter: A goes on serving (a new src's WRITE lands);
 *   unsettled  B runs --settle-ms far below DELAY_MS: the failure comes
 *              before the scatter ended, as B10_ERR_UNSETTLED, and says so
 *              truly (dst's memory changes after it); a new WRITE into the
 *              region is refused while that copy runs, and lands after;
 *   read_unsettled  the same for a READ, whose write-back's scatter runs late.
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
#include <time.h>
#include <unistd.h>

#define REGION (4u << 20)
#define PIECE (1u << 20)        /* one chunk: below the daemons' view size */
#define DEADLINE_MS 300

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* from WRITEs (or READs) PIECE bytes at offset 0 of both: the handle, or NULL with *st_p and why. */
static b10_xfer_t *submit_or(struct rank *from, struct rank *to, b10_op_t op, uint32_t deadline_ms,
                             b10_status_t *st_p, char *why, size_t why_len)
{
    static b10_span_t local, remote;
    local = (b10_span_t){ (uint64_t)(uintptr_t)from->mem, PIECE };
    remote = (b10_span_t){ (uint64_t)(uintptr_t)to->mem, PIECE };
    b10_xfer_params_t xp = { .field_mask = B10_XFER_FIELD_DEADLINE, .op = op, .local = &local,
                             .remote = &remote, .count = 1, .remote_agent = to->name,
                             .deadline_ms = deadline_ms };
    b10_xfer_t *x = NULL;
    *st_p = b10_xfer_submit(from->conn, &xp, &x);
    if (*st_p != B10_OK) {
        snprintf(why, why_len, "%s", b10_conn_detail(from->conn));
        return NULL;
    }
    return x;
}

/* Like submit_or, a refusal said as a failure. */
static b10_xfer_t *submit(struct rank *from, struct rank *to, b10_op_t op, uint32_t deadline_ms)
{
    b10_status_t st;
    char why[256];
    b10_xfer_t *x = submit_or(from, to, op, deadline_ms, &st, why, sizeof(why));
    if (x == NULL)
        fail("submit", st, why);
    return x;
}

/* Submitted and waited for: how it ended (a refusal too), and why. */
static b10_status_t run(struct rank *from, struct rank *to, b10_op_t op, uint32_t deadline_ms,
                        char *why, size_t why_len)
{
    b10_status_t st;
    b10_xfer_t *x = submit_or(from, to, op, deadline_ms, &st, why, why_len);
    if (x == NULL)
        return st;
    st = b10_xfer_wait(x, 60000);
    snprintf(why, why_len, "%s", b10_xfer_detail(x));
    b10_xfer_release(x);
    return st;
}

/* Does memory change after this moment? Compares a copy with the live bytes after wait_ms. */
static bool changes_after(const uint8_t *mem, uint32_t wait_ms)
{
    uint8_t *snap = malloc(PIECE);
    if (snap == NULL)
        return true;
    memcpy(snap, mem, PIECE);
    usleep(wait_ms * 1000u);
    bool changed = memcmp(snap, mem, PIECE) != 0;
    free(snap);
    return changed;
}

/* A failure that must come only after the delayed scatter, with nothing written after it. */
static int quiet_failure(const char *what, b10_xfer_t *x, double t0, uint32_t delay_ms,
                         const uint8_t *dst)
{
    b10_status_t st = b10_xfer_wait(x, 60000);
    double took = now_ms() - t0;
    char detail[256];
    snprintf(detail, sizeof(detail), "%s", b10_xfer_detail(x));
    b10_xfer_release(x);
    if (st == B10_OK || st == B10_IN_PROGRESS || st == B10_ERR_UNSETTLED)
        return fail(what, st, "not the failure of its deadline");
    if (took < delay_ms - 50)
        return printf("FAIL %s: %s reported after %.0f ms, while the %u ms scatter still ran\n",
                      what, b10_status_name(st), took, delay_ms), 1;
    if (changes_after(dst, delay_ms + 300))
        return printf("FAIL %s: the destination changed after the failure was reported\n", what), 1;
    printf("ok %s: %s after %.0f ms (the scatter took %u), nothing written after it: %s\n", what,
           b10_status_name(st), took, delay_ms, detail);
    return 0;
}

static struct rank src, dst;

/* At exit, whatever the case's outcome: the ranks leave, their memory goes. */
static void ranks_close(void)
{
    struct rank *ranks[] = { &src, &dst };
    for (int i = 0; i < 2; i++) {
        b10_conn_close(ranks[i]->conn);
        if (ranks[i]->mem != NULL)
            b10_dram_free(ranks[i]->mem);
    }
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: b10-settle SOCKET_A SOCKET_B DELAY_MS deadline|read|dereg|leave|"
                        "unsettled|read_unsettled\n");
        return 2;
    }
    uint32_t delay = (uint32_t)strtoul(argv[3], NULL, 10);
    const char *c = argv[4];

    setvbuf(stdout, NULL, _IOLBF, 0);
    atexit(ranks_close);
    if (rank_open(&src, argv[1], "settle-src", REGION, 0x5a) != 0 ||
        rank_open(&dst, argv[2], "settle-dst", REGION, 0) != 0 ||
        rank_load(&src, &dst) != 0 || rank_load(&dst, &src) != 0)
        return 1;
    double t0 = now_ms();
    b10_status_t st;

    if (strcmp(c, "deadline") == 0) {
        b10_xfer_t *x = submit(&src, &dst, B10_OP_WRITE, DEADLINE_MS);
        return x == NULL || quiet_failure("a WRITE past its deadline", x, t0, delay, dst.mem);
    }
    if (strcmp(c, "read") == 0) {
        b10_xfer_t *x = submit(&dst, &src, B10_OP_READ, DEADLINE_MS);
        return x == NULL || quiet_failure("a READ past its deadline", x, t0, delay, dst.mem);
    }
    if (strcmp(c, "dereg") == 0) {
        b10_xfer_t *x = submit(&src, &dst, B10_OP_WRITE, 60000);
        if (x == NULL)
            return 1;
        usleep(200000);     /* DATA is in, its scatter waits */
        double t1 = now_ms();
        st = b10_mem_deregister(dst.conn, dst.reg);
        double took = now_ms() - t0;
        if (st != B10_OK)
            return fail("deregister during a scatter", st, b10_conn_detail(dst.conn));
        if (took < delay - 50)
            return printf("FAIL deregister answered after %.0f ms, while the %u ms scatter into "
                          "the region still ran\n", took, delay), 1;
        if (changes_after(dst.mem, 300))
            return printf("FAIL the region changed after its deregistration was answered\n"), 1;
        printf("ok a deregistration during a scatter was answered after %.0f ms (asked at %.0f ms, "
               "the scatter took %u), nothing written after it\n", took, t1 - t0, delay);
        st = b10_xfer_wait(x, 60000);
        b10_xfer_release(x);
        printf("ok the transfer ended %s\n", b10_status_name(st));
        return 0;
    }
    if (strcmp(c, "unsettled") == 0) {
        char detail[256];
        st = run(&src, &dst, B10_OP_WRITE, DEADLINE_MS, detail, sizeof(detail));
        double took = now_ms() - t0;
        if (st != B10_ERR_UNSETTLED)
            return fail("a WRITE whose scatter outlives --settle-ms", st, detail);
        if (took >= delay)
            return printf("FAIL B10_ERR_UNSETTLED only after %.0f ms, once the %u ms scatter "
                          "ended\n", took, delay), 1;
        /* While that copy runs the region takes nothing new (refused at once when local). */
        char why[256];
        st = run(&src, &dst, B10_OP_WRITE, 20000, why, sizeof(why));
        if (st != B10_ERR_UNSETTLED)
            return fail("a WRITE into the region a late scatter holds", st, why);
        printf("ok a WRITE into that region meanwhile: %s: %s\n", b10_status_name(st), why);
        if (!changes_after(dst.mem, delay))
            return printf("FAIL the late scatter never wrote: B10_ERR_UNSETTLED said it might\n"), 1;
        printf("ok B10_ERR_UNSETTLED after %.0f ms (the scatter took %u), and the late scatter "
               "did write after it: %s\n", took, delay, detail);
        if ((st = run(&src, &dst, B10_OP_WRITE, 20000, why, sizeof(why))) != B10_OK)
            return fail("a WRITE once the late scatter ended", st, why);
        printf("ok once it ended the region took a WRITE again\n");
        return 0;
    }
    if (strcmp(c, "leave") == 0) {
        /* The rank leaves while its failed WRITE's news still waits for B's scatter. */
        b10_xfer_t *x = submit(&src, &dst, B10_OP_WRITE, DEADLINE_MS);
        if (x == NULL)
            return 1;
        usleep((DEADLINE_MS + 200) * 1000u);
        b10_xfer_release(x);
        b10_conn_close(src.conn);
        src.conn = NULL;
        usleep((delay + 300) * 1000u);
        /* Daemon A still serves: a new rank of the same name writes, and it lands. */
        b10_dram_free(src.mem);
        src.mem = NULL;
        if (rank_open(&src, argv[1], "settle-src", REGION, 0x77) != 0 || rank_load(&src, &dst) != 0)
            return 1;
        char why[256];
        st = run(&src, &dst, B10_OP_WRITE, 60000, why, sizeof(why));
        if (st != B10_OK || dst.mem[0] != 0x77)
            return fail("a WRITE after the rank left with news pending", st, why);
        printf("ok a rank left while its failure's news waited; the daemon went on serving\n");
        return 0;
    }
    if (strcmp(c, "read_unsettled") == 0) {
        /* A READ whose write-back's scatter outlives --settle-ms: B10_ERR_UNSETTLED, truly. */
        char detail[256];
        st = run(&dst, &src, B10_OP_READ, DEADLINE_MS, detail, sizeof(detail));
        double took = now_ms() - t0;
        if (st != B10_ERR_UNSETTLED)
            return fail("a READ whose write-back's scatter outlives --settle-ms", st, detail);
        if (!changes_after(dst.mem, delay))
            return printf("FAIL the late scatter never wrote: B10_ERR_UNSETTLED said it might\n"), 1;
        printf("ok a READ: B10_ERR_UNSETTLED after %.0f ms (the scatter took %u), and the late "
               "scatter did write after it: %s\n", took, delay, detail);
        return 0;
    }
    fprintf(stderr, "b10-settle: no case '%s'\n", c);
    return 2;
}
