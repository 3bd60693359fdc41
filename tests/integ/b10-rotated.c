/*
 * b10-rotated — after a cluster key rotation, a rank whose daemon restarted
 * holding only the new key is told why a remote rank it had loaded is no
 * longer loaded, and a fresh descriptor of that rank serves. Found by make
 * chaos: at the rotation's last step (README "Rotating the key") a node's
 * ranks lost every remote rank when their daemon restarted, each refusal
 * saying only "remote agent 'X' is not loaded": libb10 had loaded every
 * descriptor again, and the daemon had refused each, sealed under the key it
 * no longer holds.
 *
 *   b10-rotated SOCKET_A SOCKET_B DIR
 *
 * Rank d on A loads rank s on B (the descriptor sealed under B's key then)
 * and READs part 0 of s's memory (0x5a) into its own (0x00). It prints
 * "loaded" and waits for DIR/go, the runner's sign that both daemons were
 * restarted under the next key (A holding it alone). A READ of part 1 must
 * then be refused B10_ERR_UNKNOWN_AGENT, its detail saying that the
 * descriptor was refused when libb10 connected again, and why; with a fresh
 * descriptor of s loaded, the READ must land.
 *
 * Exits 0, or 1 with a "FAIL what: ..." line.
 */
#include <b10/b10.h>

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "rank.h"

#define PART (64u << 10)
#define REGION (2 * PART)
#define GO_WAIT_S 120

static b10_status_t read_part(struct rank *d, struct rank *s, unsigned part, b10_xfer_t **x_p)
{
    static b10_span_t local, remote;
    local = (b10_span_t){ (uint64_t)(uintptr_t)(d->mem + part * PART), PART };
    remote = (b10_span_t){ (uint64_t)(uintptr_t)(s->mem + part * PART), PART };
    b10_xfer_params_t xp = { .op = B10_OP_READ, .local = &local, .remote = &remote, .count = 1,
                             .remote_agent = s->name };
    return b10_xfer_submit(d->conn, &xp, x_p);
}

/* The READ of a part, waited for: 0 once its bytes landed, else 1 (said). */
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

    if (argc != 4) {
        fprintf(stderr, "usage: b10-rotated SOCKET_A SOCKET_B DIR\n");
        return 2;
    }
    if (rank_open(&s, argv[2], "rot-s", REGION, 0x5a) || rank_open(&d, argv[1], "rot-d", REGION, 0) ||
        rank_load(&d, &s) || read_whole(&d, &s, 0))
        return 1;
    printf("loaded\n");
    fflush(stdout);
    if (wait_go(argv[3]))
        return 1;

    /* The reconnection loads s's old descriptor again, which A refuses now. */
    b10_xfer_t *x = NULL;
    b10_status_t st = read_part(&d, &s, 1, &x);
    const char *why = b10_conn_detail(d.conn);
    if (st == B10_OK) {
        b10_xfer_release(x);
        return fail("READ with the descriptor sealed under the retired key: taken", st, NULL);
    }
    if (st != B10_ERR_UNKNOWN_AGENT)
        return fail("READ with the descriptor sealed under the retired key", st, why);
    if (strstr(why, "loaded again when libb10 connected") == NULL ||
        strstr(why, "does not hold") == NULL)
        return fail("READ with the descriptor sealed under the retired key: no reason given", st,
                    why);
    printf("refused: %s\n", why);
    if (rank_load(&d, &s) || read_whole(&d, &s, 1))
        return 1;
    printf("ok: told why the old descriptor went, a fresh one served\n");
    b10_conn_close(d.conn);
    b10_conn_close(s.conn);
    return 0;
}
