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
 *   b10-fair spans SOCKET SECONDS COUNT [merged|read|framed]
 *       A rank that streams WRITEs to itself of COUNT spans each, their
 *       tables in the span arena, as fast as the socket takes them, for
 *       SECONDS. The spans lie on randomly permuted slots of both sides, so
 *       that none merge and each request costs the daemon its full planning
 *       ("merged": in order on both sides, so that they merge into one
 *       piece; "read": READs instead of WRITEs; "framed": the tables in
 *       each submit's frame, 4 submits ahead of their answers). Meanwhile, on a second connection, it asks for the daemon's
 *       counters (b10ctl stats) again and again, and says for each how many
 *       of its transfers the daemon admitted between the question and its
 *       answer: "ok spans: ... admitted between question and answer: at
 *       most N (of Q questions)".
 *
 * Prints "ok …" lines and exits 0, or "FAIL …" and 1.
 */
#include <b10/b10.h>

#include "b10.pb-c.h"
#include "frame.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
     * a twentieth of their pace alone at least: a loop that waited on the
     * registration (or on a lock it held) ran a handful, however fast each
     * was, while one that kept serving ran a tenth to a fifth of its pace
     * alone on two cores (the populating thread takes one) under ASan, and
     * a tenth was too close to that to hold on a loaded machine.
     */
    double expected = big.took_us / (alone_total / ROUNDS);
    if (nduring == 0 || nduring < expected / 20) {
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

/* ---------------------------------------------------------------- spans */

#define SPANS_LEN 64u                   /* bytes a span: many spans, little memory */
#define SPANS_UNANSWERED 64u            /* submits sent and not yet answered, at most */
#define SPANS_UNANSWERED_FRAMED 4u      /* ... when each carries its tables */

/* A raw connection: frames in and out, one DaemonMsg at a time. */
struct raw {
    int fd;
    struct frame_reader rd;
    uint64_t seq;
    uint8_t held[64 * 1024];
    size_t held_off, held_len;
};

static int raw_open(struct raw *r, const char *path)
{
    memset(r, 0, sizeof(*r));
    if ((r->fd = connect_to(path)) < 0)
        return -1;
    frame_reader_init(&r->rd, FRAME_MAX_LIMIT);
    return 0;
}

static void raw_close(struct raw *r)
{
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
    frame_reader_free(&r->rd);
}

/* Send m (its seq the next), with pass_fd riding on its first byte when >= 0. */
static int raw_send(struct raw *r, B10__ClientMsg *m, int pass_fd)
{
    uint8_t *frame;
    size_t len, done = 0;

    m->seq = ++r->seq;
    if (frame_encode(&m->base, FRAME_MAX_LIMIT, &frame, &len) != 0)
        return -1;
    while (done < len) {
        struct iovec iov = { frame + done, len - done };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(sizeof(int))];
        } cm;
        if (pass_fd >= 0 && done == 0) {
            memset(&cm, 0, sizeof(cm));
            mh.msg_control = cm.buf;
            mh.msg_controllen = sizeof(cm.buf);
            struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
            h->cmsg_level = SOL_SOCKET;
            h->cmsg_type = SCM_RIGHTS;
            h->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(h), &pass_fd, sizeof(int));
        }
        ssize_t n = sendmsg(r->fd, &mh, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            free(frame);
            return -1;
        }
        done += (size_t)n;
    }
    free(frame);
    return 0;
}

/* The next message, waiting at most wait_ms for it; NULL on a timeout, a drop or junk. */
static B10__DaemonMsg *raw_next(struct raw *r, int wait_ms)
{
    double end = now_us() + wait_ms * 1e3;
    for (;;) {
        while (r->held_off < r->held_len) {
            size_t used;
            enum frame_result fr = frame_reader_feed(&r->rd, r->held + r->held_off,
                                                     r->held_len - r->held_off, &used);
            r->held_off += used;
            if (fr == FRAME_READY) {
                uint32_t len;
                uint8_t *body = frame_reader_take(&r->rd, &len);
                B10__DaemonMsg *m = b10__daemon_msg__unpack(NULL, len, body);
                free(body);
                return m;
            }
            if (fr != FRAME_MORE)
                return NULL;
        }
        int left = (int)((end - now_us()) / 1e3);
        struct pollfd p = { .fd = r->fd, .events = POLLIN };
        if (left < 0 || (poll(&p, 1, left) < 0 && errno != EINTR))
            return NULL;
        if (!(p.revents & (POLLIN | POLLHUP)))
            continue;
        ssize_t n = recv(r->fd, r->held, sizeof(r->held), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            return NULL;
        r->held_off = 0;
        r->held_len = n > 0 ? (size_t)n : 0;
    }
}

/* m, and its answer (the caller frees it); NULL, said, when none came. */
static B10__DaemonMsg *raw_ask(struct raw *r, const char *what, B10__ClientMsg *m, int pass_fd)
{
    if (raw_send(r, m, pass_fd) != 0) {
        printf("FAIL spans: %s: send: %s\n", what, strerror(errno));
        return NULL;
    }
    for (;;) {
        B10__DaemonMsg *a = raw_next(r, 30000);
        if (a == NULL) {
            printf("FAIL spans: %s: no answer within 30 s\n", what);
            return NULL;
        }
        if (a->body_case == B10__DAEMON_MSG__BODY_REPLY && a->reply->seq == r->seq) {
            if (a->reply->status == B10__STATUS__OK)
                return a;
            printf("FAIL spans: %s: %s: %s\n", what, b10_status_name((b10_status_t)a->reply->status),
                   a->reply->detail);
            b10__daemon_msg__free_unpacked(a, NULL);
            return NULL;
        }
        b10__daemon_msg__free_unpacked(a, NULL);
    }
}

/* A memfd of size bytes, sealed against shrinking as libb10 makes one; -1 on failure. */
static int spans_memfd(size_t size)
{
    int fd = memfd_create("b10-fair", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd >= 0 && (ftruncate(fd, (off_t)size) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* The daemon's count of admitted transfers (b10ctl stats: xfers_submitted); -1 on failure. */
static int64_t spans_admitted(struct raw *admin)
{
    B10__ClientMsg m = B10__CLIENT_MSG__INIT;
    B10__AdminRequest req = B10__ADMIN_REQUEST__INIT;
    req.op = B10__ADMIN_OP__ADMIN_STATS;
    m.body_case = B10__CLIENT_MSG__BODY_ADMIN;
    m.admin = &req;
    B10__DaemonMsg *a = raw_ask(admin, "stats", &m, -1);
    int64_t n = -1;
    if (a == NULL)
        return -1;
    B10__AdminReply *ar = a->reply->body_case == B10__REPLY__BODY_ADMIN ? a->reply->admin : NULL;
    for (size_t i = 0; ar != NULL && i < ar->n_counters; i++)
        if (strcmp(ar->counters[i]->name, "xfers_submitted") == 0)
            n = (int64_t)ar->counters[i]->value;
    b10__daemon_msg__free_unpacked(a, NULL);
    if (n < 0)
        printf("FAIL spans: the stats answer has no xfers_submitted\n");
    return n;
}

/* Slot i of count, in a random order (seeded), or in order when merged. */
static void spans_slots(uint32_t *slot, size_t count, bool merged, uint64_t seed)
{
    for (size_t i = 0; i < count; i++)
        slot[i] = (uint32_t)i;
    for (size_t i = count - 1; !merged && i > 0; i--) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t j = (size_t)((seed >> 33) % (i + 1));
        uint32_t t = slot[i];
        slot[i] = slot[j];
        slot[j] = t;
    }
}

/* Hello, its own descriptor loaded, a pool registered and the span arena written and given. */
static int spans_setup(struct raw *r, size_t count, bool merged, uint64_t base, char *agent,
                       size_t agent_len, uint8_t **tables_p)
{
    B10__ClientMsg m = B10__CLIENT_MSG__INIT;
    B10__Hello h = B10__HELLO__INIT;
    snprintf(agent, agent_len, "spanner-%d", (int)getpid());
    h.version = B10_API_VERSION;
    h.agent_name = agent;
    m.body_case = B10__CLIENT_MSG__BODY_HELLO;
    m.hello = &h;
    B10__DaemonMsg *hr = raw_ask(r, "hello", &m, -1);
    if (hr == NULL)
        return 1;
    B10__LoadAgent load = B10__LOAD_AGENT__INIT;
    load.name = agent;
    load.desc = hr->reply->hello->agent_desc;
    m = (B10__ClientMsg)B10__CLIENT_MSG__INIT;
    m.body_case = B10__CLIENT_MSG__BODY_LOAD_AGENT;
    m.load_agent = &load;
    B10__DaemonMsg *a = raw_ask(r, "load its own descriptor", &m, -1);
    b10__daemon_msg__free_unpacked(hr, NULL);
    if (a == NULL)
        return 1;
    b10__daemon_msg__free_unpacked(a, NULL);

    /* One pool: the sources in its first half, the destinations in its second. */
    size_t pool = 2 * count * SPANS_LEN, table = count * SPAN_BYTES;
    int pfd = spans_memfd(pool), afd = spans_memfd(2 * table);
    uint8_t *arena = afd >= 0 ? mmap(NULL, 2 * table, PROT_READ | PROT_WRITE, MAP_SHARED, afd, 0)
                              : MAP_FAILED;
    uint32_t *src = malloc(count * sizeof(*src)), *dst = malloc(count * sizeof(*dst));
    int rc = 1;
    if (pfd < 0 || arena == MAP_FAILED || src == NULL || dst == NULL) {
        printf("FAIL spans: memfds of %zu and %zu bytes: %s\n", pool, 2 * table, strerror(errno));
        goto out;
    }
    B10__RegisterMem reg = B10__REGISTER_MEM__INIT;
    reg.kind = B10__MEM_KIND__MEM_DRAM;
    reg.addr = base;
    reg.length = pool;
    m = (B10__ClientMsg)B10__CLIENT_MSG__INIT;
    m.body_case = B10__CLIENT_MSG__BODY_REGISTER_MEM;
    m.register_mem = &reg;
    if ((a = raw_ask(r, "register the pool", &m, pfd)) == NULL)
        goto out;
    b10__daemon_msg__free_unpacked(a, NULL);
    spans_slots(src, count, merged, 1);
    spans_slots(dst, count, merged, 2);
    for (size_t i = 0; i < count; i++) {
        frame_put_u64(arena + i * SPAN_BYTES, base + (uint64_t)src[i] * SPANS_LEN);
        frame_put_u64(arena + i * SPAN_BYTES + 8, SPANS_LEN);
        frame_put_u64(arena + table + i * SPAN_BYTES, base + (count + (uint64_t)dst[i]) * SPANS_LEN);
        frame_put_u64(arena + table + i * SPAN_BYTES + 8, SPANS_LEN);
    }
    /* The tables for the frames too, when they go there. */
    if (tables_p != NULL && (*tables_p = malloc(2 * table)) == NULL) {
        printf("FAIL spans: no memory for %zu bytes of tables\n", 2 * table);
        goto out;
    }
    if (tables_p != NULL)
        memcpy(*tables_p, arena, 2 * table);
    B10__SpanArena sa = B10__SPAN_ARENA__INIT;
    sa.length = 2 * table;
    m = (B10__ClientMsg)B10__CLIENT_MSG__INIT;
    m.body_case = B10__CLIENT_MSG__BODY_SPAN_ARENA;
    m.span_arena = &sa;
    if ((a = raw_ask(r, "give the span arena", &m, afd)) == NULL)
        goto out;
    b10__daemon_msg__free_unpacked(a, NULL);
    rc = 0;
out:
    free(src);
    free(dst);
    if (arena != MAP_FAILED)
        munmap(arena, 2 * table);
    if (afd >= 0)
        close(afd);
    if (pfd >= 0)
        close(pfd);
    return rc;
}

/* What the streaming rank has seen of its submits. */
struct spans_seen {
    uint64_t sent, admitted, refused, landed, failed;
    char refusal[256];
};

/* Take every message that already came; -1 when the daemon dropped the rank or sent junk. */
static int spans_drain(struct raw *r, struct spans_seen *seen, int wait_ms)
{
    for (int first = 1;; first = 0) {
        B10__DaemonMsg *a = raw_next(r, first ? wait_ms : 0);
        if (a == NULL)
            return r->held_off < r->held_len ? -1 : 0;
        if (a->body_case == B10__DAEMON_MSG__BODY_REPLY) {
            if (a->reply->status == B10__STATUS__OK) {
                seen->admitted++;
            } else {
                if (seen->refused++ == 0)
                    snprintf(seen->refusal, sizeof(seen->refusal), "%s: %s",
                             b10_status_name((b10_status_t)a->reply->status), a->reply->detail);
            }
        } else if (a->body_case == B10__DAEMON_MSG__BODY_DONE) {
            if (a->done->status == B10__STATUS__OK)
                seen->landed++;
            else
                seen->failed++;
        }
        b10__daemon_msg__free_unpacked(a, NULL);
    }
}

static int spans(const char *path, double seconds, size_t count, bool merged, bool read,
                 bool framed)
{
    struct raw r, admin;
    char agent[64];
    struct spans_seen seen = { 0 };
    uint8_t *tables = NULL;
    unsigned ahead = framed ? SPANS_UNANSWERED_FRAMED : SPANS_UNANSWERED;

    if (count < 2 || count > (1u << 24)) {
        printf("FAIL spans: COUNT %zu: 2 .. 2^24\n", count);
        return 1;
    }
    if (raw_open(&r, path) != 0 || raw_open(&admin, path) != 0) {
        printf("FAIL spans: connect %s: %s\n", path, strerror(errno));
        return 1;
    }
    if (spans_setup(&r, count, merged, UINT64_C(1) << 40, agent, sizeof(agent),
                    framed ? &tables : NULL) != 0)
        return 1;
    int64_t base = spans_admitted(&admin);
    if (base < 0)
        return 1;
    B10__SubmitXfer sub = B10__SUBMIT_XFER__INIT;
    sub.op = read ? B10__OP__OP_READ : B10__OP__OP_WRITE;
    sub.remote_agent = agent;
    sub.arena_spans = count;
    if (framed) {
        sub.arena_spans = 0;
        sub.local_spans = (ProtobufCBinaryData){ count * SPAN_BYTES, tables };
        sub.remote_spans = (ProtobufCBinaryData){ count * SPAN_BYTES, tables + count * SPAN_BYTES };
    }
    B10__ClientMsg m = B10__CLIENT_MSG__INIT;
    m.body_case = B10__CLIENT_MSG__BODY_SUBMIT;
    m.submit = &sub;
    /*
     * Submits back to back, SPANS_UNANSWERED of them ahead of their answers;
     * a question on the admin connection every 50 ms, each noting how many
     * of this rank's transfers the daemon admitted between the question and
     * its answer: as many as it planned before it turned to the question.
     */
    double end = now_us() + seconds * 1e6, next_ask = now_us() + 200e3;
    int64_t most = -1;
    unsigned asked = 0;
    while (now_us() < end) {
        while (seen.sent - seen.admitted - seen.refused < ahead) {
            if (raw_send(&r, &m, -1) != 0) {
                printf("FAIL spans: the daemon dropped the rank after %" PRIu64 " submits\n",
                       seen.sent);
                return 1;
            }
            seen.sent++;
        }
        if (spans_drain(&r, &seen, 20) != 0) {
            printf("FAIL spans: the daemon dropped the rank after %" PRIu64 " submits\n", seen.sent);
            return 1;
        }
        if (now_us() < next_ask)
            continue;
        if (spans_drain(&r, &seen, 0) != 0)
            return 1;
        uint64_t before = seen.admitted;
        int64_t now = spans_admitted(&admin);
        if (now < 0)
            return 1;
        int64_t between = now - base - (int64_t)before;
        most = between > most ? between : most;
        asked++;
        next_ask = now_us() + 50e3;
    }
    raw_close(&admin);
    raw_close(&r);
    free(tables);
    if (seen.admitted == 0) {
        printf("FAIL spans: none of %" PRIu64 " submits was admitted (%s)\n", seen.sent,
               seen.refusal);
        return 1;
    }
    printf("ok spans: %" PRIu64 " %s of %zu %s spans in %.0f s: %" PRIu64 " admitted, %" PRIu64
           " refused%s%s, %" PRIu64 " landed, %" PRIu64 " failed\n", seen.sent,
           read ? "READs" : "submits", count, merged ? "mergeable" : "unmergeable", seconds,
           seen.admitted, seen.refused,
           seen.refused ? ": " : "", seen.refusal, seen.landed, seen.failed);
    printf("ok spans: admitted between question and answer: at most %" PRId64 " (of %u questions)\n",
           most, asked);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 4 && strcmp(argv[1], "flood") == 0)
        return flood(argv[2], atof(argv[3]));
    if (argc == 5 && strcmp(argv[1], "regdelay") == 0)
        return regdelay(argv[2], argv[3], (size_t)strtoull(argv[4], NULL, 10));
    const char *how = argc == 6 ? argv[5] : "";
    if ((argc == 5 || (argc == 6 && (strcmp(how, "merged") == 0 || strcmp(how, "read") == 0 ||
                                     strcmp(how, "framed") == 0))) &&
        strcmp(argv[1], "spans") == 0)
        return spans(argv[2], atof(argv[3]), (size_t)strtoull(argv[4], NULL, 10),
                     strcmp(how, "merged") == 0, strcmp(how, "read") == 0,
                     strcmp(how, "framed") == 0);
    fprintf(stderr, "usage: b10-fair flood SOCKET SECONDS | regdelay SOCKET_A SOCKET_B BYTES | "
            "spans SOCKET SECONDS COUNT [merged|read|framed]\n");
    return 2;
}
