/*
 * b10-unanswered — a submit its daemon does not answer in time claims
 * nothing, and what the daemon reads of it later lands nowhere. Found by
 * make chaos: a rank's READ went to a daemon stopped for 9.5 s; libb10 gave
 * up after its request timeout with B10_ERR_IO (retry: it did not happen),
 * the rank reused the blocks, and the daemon, resumed, ran the READ into
 * them.
 *
 *   b10-unanswered SOCKET_A SOCKET_B PID_A DIR
 *
 * Rank d on A (request timeout 1 s) loads rank s on B, whose memory is
 * 0x5a, and READs part 0 of it into its own (0x00): every byte lands. Then
 * A is stopped (SIGSTOP to PID_A) and d READs part 1: the submit must fail
 * B10_ERR_DAEMON_LOST, which claims nothing about the bytes, not a failure
 * that says the transfer did not happen. A resumed (SIGCONT), this prints
 * "resumed" and waits for DIR/go (the runner's sign that A failed the READ
 * it read after d's connection had closed); part 1 must still be 0x00, a
 * READ of part 2 (the connection opened anew) must land, and part 1 must
 * still be 0x00 after it.
 *
 * Exits 0, or 1 with a "FAIL what: ..." line.
 */
#include <b10/b10.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "rank.h"

#define PART (256u << 10)
#define REGION (3 * PART)
#define DEADLINE_MS 20000
#define TIMEOUT_MS 1000
#define GO_WAIT_S 120

/* d READs part `part` of s into the same part of its own memory: how the submit went. */
static b10_status_t read_part(struct rank *d, struct rank *s, unsigned part, b10_xfer_t **x_p)
{
    static b10_span_t local, remote;
    local = (b10_span_t){ (uint64_t)(uintptr_t)(d->mem + part * PART), PART };
    remote = (b10_span_t){ (uint64_t)(uintptr_t)(s->mem + part * PART), PART };
    b10_xfer_params_t xp = { .field_mask = B10_XFER_FIELD_DEADLINE, .op = B10_OP_READ,
                             .local = &local, .remote = &remote, .count = 1,
                             .remote_agent = s->name, .deadline_ms = DEADLINE_MS };
    return b10_xfer_submit(d->conn, &xp, x_p);
}

/* The READ of a part, submitted and waited for: 0 once its bytes landed, else 1 (said). */
static int read_whole(struct rank *d, struct rank *s, unsigned part)
{
    b10_xfer_t *x = NULL;
    b10_status_t st = read_part(d, s, part, &x);
    if (st != B10_OK)
        return fail("submit", st, b10_conn_detail(d->conn));
    st = b10_xfer_wait(x, 60000);
    if (st != B10_OK) {
        int rc = fail("read", st, b10_xfer_detail(x));
        b10_xfer_release(x);
        return rc;
    }
    b10_xfer_release(x);
    for (size_t i = 0; i < PART; i++)
        if (d->mem[part * PART + i] != 0x5a) {
            printf("FAIL read: part %u landed, but byte %zu is %#x\n", part, i,
                   d->mem[part * PART + i]);
            return 1;
        }
    return 0;
}

/* Is part 1 still as d wrote it (0x00)? 0, else 1 (said). */
static int untouched(const struct rank *d, const char *when)
{
    for (size_t i = 0; i < PART; i++)
        if (d->mem[PART + i] != 0) {
            printf("FAIL late write: %s, byte %zu of the unanswered READ's destination is %#x\n",
                   when, i, d->mem[PART + i]);
            return 1;
        }
    return 0;
}

static int wait_go(const char *dir)
{
    char path[4096];
    struct stat st;
    snprintf(path, sizeof(path), "%s/go", dir);
    for (int i = 0; i < GO_WAIT_S * 20; i++) {
        if (stat(path, &st) == 0)
            return 0;
        nanosleep(&(struct timespec){ .tv_nsec = 50 * 1000 * 1000 }, NULL);
    }
    printf("FAIL go: no %s within %d s\n", path, GO_WAIT_S);
    return 1;
}

int main(int argc, char **argv)
{
    struct rank d = { 0 }, s = { 0 };

    if (argc != 5) {
        fprintf(stderr, "usage: b10-unanswered SOCKET_A SOCKET_B PID_A DIR\n");
        return 2;
    }
    pid_t pid_a = (pid_t)atoi(argv[3]);
    if (rank_open(&s, argv[2], "ua-s", REGION, 0x5a))
        return 1;
    /* d as rank_open makes one, but with a request timeout the stop outlasts. */
    b10_conn_params_t cp = { .field_mask = B10_CONN_FIELD_SOCKET_PATH | B10_CONN_FIELD_REQUEST_TIMEOUT,
                             .agent_name = "ua-d", .socket_path = argv[1],
                             .request_timeout_ms = TIMEOUT_MS };
    void *mem;
    b10_status_t st = b10_conn_open(&cp, &d.conn);
    if (st != B10_OK || (st = b10_dram_alloc(REGION, &mem)) != B10_OK)
        return fail("open d", st, NULL);
    d.name = "ua-d";
    d.mem = mem;
    memset(d.mem, 0, REGION);
    b10_mem_params_t mp = { .kind = B10_MEM_DRAM, .addr = mem, .length = REGION };
    if ((st = b10_mem_register(d.conn, &mp, &d.reg)) != B10_OK)
        return fail("register d", st, b10_conn_detail(d.conn));
    if (rank_load(&d, &s) || read_whole(&d, &s, 0))
        return 1;

    if (kill(pid_a, SIGSTOP) != 0)
        return fail("SIGSTOP", B10_ERR_IO, strerror(errno));
    b10_xfer_t *x = NULL;
    st = read_part(&d, &s, 1, &x);
    char why[512];
    snprintf(why, sizeof(why), "%s", b10_conn_detail(d.conn));
    kill(pid_a, SIGCONT);
    if (st == B10_OK) {
        b10_xfer_release(x);
        return fail("unanswered submit: the daemon was stopped, yet it answered", st, NULL);
    }
    if (st != B10_ERR_DAEMON_LOST)
        return fail("unanswered submit: not B10_ERR_DAEMON_LOST, which claims nothing", st, why);
    printf("resumed: %s\n", why);
    fflush(stdout);
    if (wait_go(argv[4]) || untouched(&d, "after A failed it") || read_whole(&d, &s, 2) ||
        untouched(&d, "after the next READ landed"))
        return 1;
    printf("ok: the unanswered READ claimed nothing and landed nowhere; the next one landed\n");
    b10_conn_close(d.conn);
    b10_conn_close(s.conn);
    return 0;
}
