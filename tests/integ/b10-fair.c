/*
 * b10-fair — clients that would have one b10d serve them alone, for the
 * fairness tests (tests/ops/run.sh, scenario fair).
 *
 *   b10-fair flood SOCKET SECONDS
 *       A rank that streams small requests (CANCELs of no transfer) as fast
 *       as the socket takes them, reading the answers as they come, for
 *       SECONDS; prints how many it sent and how many were answered.
 *   b10-fair regdelay SOCKET_A SOCKET_B BYTES
 *       A rank on A writes 64 KiB to a rank on B, one transfer after
 *       another: first alone, then while another rank registers BYTES of
 *       memory on A. Prints the transfers' times alone and during the
 *       registration (p50, p99, max, in µs), how long registering took, and
 *       the delay: the p99 during it less the p99 alone.
 *
 * Prints "ok …" lines and exits 0, or "FAIL …" and 1.
 */
#include <b10/b10.h>

#include "b10.pb-c.h"
#include "frame.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int fail(const char *what, b10_status_t st, const char *detail)
{
    printf("FAIL %s: %s%s%s\n", what, b10_status_name(st), detail && detail[0] ? ": " : "",
           detail ? detail : "");
    return 1;
}

/* ---------------------------------------------------------------- flood */

static int connect_to(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* Append one encoded ClientMsg frame to buf at *off. */
static void put_frame(uint8_t *buf, size_t *off, B10__ClientMsg *m)
{
    uint8_t *frame;
    size_t len;
    if (frame_encode(&m->base, FRAME_MAX_LIMIT, &frame, &len) == 0) {
        memcpy(buf + *off, frame, len);
        *off += len;
        free(frame);
    }
}

static int flood(const char *path, double seconds)
{
    int fd = connect_to(path);
    if (fd < 0) {
        printf("FAIL flood: connect %s: %s\n", path, strerror(errno));
        return 1;
    }
    /* Hello first: a rank, not a stranger. */
    B10__ClientMsg m = B10__CLIENT_MSG__INIT;
    B10__Hello h = B10__HELLO__INIT;
    char name[64];
    snprintf(name, sizeof(name), "flooder-%d", (int)getpid());
    h.version = B10_API_VERSION;
    h.agent_name = name;
    m.body_case = B10__CLIENT_MSG__BODY_HELLO;
    m.hello = &h;
    m.seq = 1;
    static uint8_t batch[64 * 1024];
    size_t off = 0;
    put_frame(batch, &off, &m);
    if (write(fd, batch, off) != (ssize_t)off) {
        printf("FAIL flood: hello: %s\n", strerror(errno));
        return 1;
    }
    /* A batch of CANCELs of no transfer: each answered NOT_FOUND, each a frame of a few bytes. */
    B10__CancelXfer cancel = B10__CANCEL_XFER__INIT;
    cancel.xfer_id = 1;
    m.body_case = B10__CLIENT_MSG__BODY_CANCEL;
    m.cancel = &cancel;
    off = 0;
    uint64_t per_batch = 0;
    while (off + 64 < sizeof(batch)) {
        m.seq = 2 + per_batch++;
        put_frame(batch, &off, &m);
    }
    uint64_t sent = 0, answered_bytes = 0;
    double end = now_us() + seconds * 1e6;
    static uint8_t sink[256 * 1024];
    size_t done = 0;
    while (now_us() < end) {
        struct pollfd p = { .fd = fd, .events = POLLIN | POLLOUT };
        if (poll(&p, 1, 100) < 0 && errno != EINTR)
            break;
        if (p.revents & POLLIN) {
            ssize_t n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
            if (n == 0) {
                printf("FAIL flood: the daemon dropped the flooding rank after %" PRIu64
                       " requests\n", sent);
                return 1;
            }
            if (n > 0)
                answered_bytes += (uint64_t)n;
        }
        if (p.revents & POLLOUT) {
            ssize_t n = send(fd, batch + done, off - done, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n > 0) {
                done += (size_t)n;
                if (done == off) {
                    done = 0;
                    sent += per_batch;
                }
            }
        }
    }
    close(fd);
    printf("ok flood: %" PRIu64 " requests in %.0f s, %" PRIu64 " bytes of answers read\n", sent,
           seconds, answered_bytes);
    return 0;
}

/* ---------------------------------------------------------------- regdelay */

#define PIECE (64u << 10)
#define ROUNDS 300

struct rank {
    b10_conn_t *conn;
    void *mem;
    b10_mem_t *reg;
};

static int rank_open(struct rank *r, const char *socket, const char *name)
{
    b10_conn_params_t cp = { .field_mask = B10_CONN_FIELD_SOCKET_PATH, .agent_name = name,
                             .socket_path = socket };
    b10_status_t st = b10_conn_open(&cp, &r->conn);
    if (st != B10_OK)
        return fail("open", st, NULL);
    if ((st = b10_dram_alloc(1u << 20, &r->mem)) != B10_OK)
        return fail("dram alloc", st, NULL);
    b10_mem_params_t mp = { .kind = B10_MEM_DRAM, .addr = r->mem, .length = 1u << 20 };
    if ((st = b10_mem_register(r->conn, &mp, &r->reg)) != B10_OK)
        return fail("register", st, b10_conn_detail(r->conn));
    return 0;
}

struct big {
    const char *socket;
    size_t bytes;
    atomic_int state;               /* 0 before, 1 registering, 2 done */
    double took_us;
    b10_status_t status;
};

static void *big_register(void *arg)
{
    struct big *b = arg;
    struct rank r = { 0 };
    b10_conn_params_t cp = { .field_mask = B10_CONN_FIELD_SOCKET_PATH, .agent_name = "fair-big",
                             .socket_path = b->socket };
    b->status = b10_conn_open(&cp, &r.conn);
    if (b->status == B10_OK)
        b->status = b10_dram_alloc(b->bytes, &r.mem);
    /* Written first, as a rank's pool is: the daemon maps in what the rank has (a sparse
     * region's holes it leaves alone), and that mapping is the long work measured here. */
    if (b->status == B10_OK)
        memset(r.mem, 0x5a, b->bytes);
    atomic_store(&b->state, 1);
    if (b->status == B10_OK) {
        b10_mem_params_t mp = { .kind = B10_MEM_DRAM, .addr = r.mem, .length = b->bytes };
        double t0 = now_us();
        b->status = b10_mem_register(r.conn, &mp, &r.reg);
        b->took_us = now_us() - t0;
    }
    atomic_store(&b->state, 2);
    b10_conn_close(r.conn);
    if (r.mem != NULL)
        b10_dram_free(r.mem);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void stats(const char *what, double *t, int n)
{
    qsort(t, (size_t)n, sizeof(*t), cmp_double);
    printf("ok %s: %d transfers of 64 KiB: p50 %.0f us, p99 %.0f us, max %.0f us\n", what, n,
           t[n / 2], t[(n * 99) / 100], t[n - 1]);
}

static int regdelay(const char *sock_a, const char *sock_b, size_t bytes)
{
    struct rank src = { 0 }, dst = { 0 };
    static double alone[ROUNDS], during[100000];
    int nduring = 0;

    if (rank_open(&src, sock_a, "fair-src") != 0 || rank_open(&dst, sock_b, "fair-dst") != 0)
        return 1;
    const void *desc;
    size_t len;
    b10_status_t st = b10_agent_desc(dst.conn, &desc, &len);
    if (st == B10_OK)
        st = b10_agent_load(src.conn, "fair-dst", desc, len);
    if (st != B10_OK)
        return fail("load", st, b10_conn_detail(src.conn));
    b10_span_t local = { (uint64_t)(uintptr_t)src.mem, PIECE };
    b10_span_t remote = { (uint64_t)(uintptr_t)dst.mem, PIECE };
    b10_xfer_params_t xp = { .op = B10_OP_WRITE, .local = &local, .remote = &remote, .count = 1,
                             .remote_agent = "fair-dst" };
    struct big big = { .socket = sock_a, .bytes = bytes };
    pthread_t th;
    b10_xfer_t *x;

    /* Once to open the link: its set-up is not what is measured. */
    if ((st = b10_xfer_submit(src.conn, &xp, &x)) != B10_OK || (st = b10_xfer_wait(x, 30000)) != B10_OK)
        return fail("the first transfer", st, NULL);
    b10_xfer_release(x);

    for (int phase = 0; phase < 2; phase++) {
        if (phase == 1 && pthread_create(&th, NULL, big_register, &big) != 0)
            return fail("thread", B10_ERR_INTERNAL, NULL);
        for (int i = 0;; i++) {
            if (phase == 0 && i == ROUNDS)
                break;
            if (phase == 1 && (atomic_load(&big.state) == 2 || nduring == 100000))
                break;
            double t0 = now_us();
            if ((st = b10_xfer_submit(src.conn, &xp, &x)) == B10_OK)
                st = b10_xfer_wait(x, 30000);
            double us = now_us() - t0;
            if (st != B10_OK)
                return fail("transfer", st, x != NULL ? b10_xfer_detail(x) : NULL);
            b10_xfer_release(x);
            if (phase == 0)
                alone[i] = us;
            else if (atomic_load(&big.state) == 1)
                during[nduring++] = us;
        }
    }
    pthread_join(th, NULL);
    if (big.status != B10_OK)
        return fail("registering the large region", big.status, NULL);
    double alone_total = 0;
    for (int i = 0; i < ROUNDS; i++)
        alone_total += alone[i];
    stats("alone", alone, ROUNDS);
    /*
     * As many transfers ran meanwhile as the registration's time allows, at
     * a tenth of their pace alone at least: a loop that waited on the
     * registration (or on a lock it held) ran few, however fast each was.
     */
    double expected = big.took_us / (alone_total / ROUNDS);
    if (nduring == 0 || nduring < expected / 10) {
        printf("FAIL %d transfers ran while %zu bytes were registered (%.0f ms): at their pace "
               "alone, %.0f would have\n", nduring, bytes, big.took_us / 1e3, expected);
        return 1;
    }
    stats("during the registration", during, nduring);
    /*
     * The p99s, not the maxima: on a small machine a transfer alone is now
     * and then descheduled for tens of ms. A registration that held the
     * loop would hold every transfer meanwhile: their p99 would be its time.
     */
    double p99_alone = alone[(ROUNDS * 99) / 100], p99_during = during[(nduring * 99) / 100];
    printf("ok registering %zu bytes took %.0f ms; %d transfers meanwhile, p99 %.0f us against "
           "%.0f us alone (max %.0f, %.0f): delay %.0f us\n", bytes, big.took_us / 1e3, nduring,
           p99_during, p99_alone, during[nduring - 1], alone[ROUNDS - 1], p99_during - p99_alone);
    b10_conn_close(src.conn);
    b10_conn_close(dst.conn);
    b10_dram_free(src.mem);
    b10_dram_free(dst.mem);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 4 && strcmp(argv[1], "flood") == 0)
        return flood(argv[2], atof(argv[3]));
    if (argc == 5 && strcmp(argv[1], "regdelay") == 0)
        return regdelay(argv[2], argv[3], (size_t)strtoull(argv[4], NULL, 10));
    fprintf(stderr, "usage: b10-fair flood SOCKET SECONDS | regdelay SOCKET_A SOCKET_B BYTES\n");
    return 2;
}
