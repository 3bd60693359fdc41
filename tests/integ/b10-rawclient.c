/*
 * b10-rawclient — a hostile client of b10d's Unix socket, for the
 * integration tests. It speaks raw frames (proto/frame.h: a 4-byte
 * little-endian length, then an encoded b10.ClientMsg) instead of going
 * through libb10, so that it can send what libb10 never would: lengths over
 * the daemon's maximum, junk, a first message that is not a Hello, a second
 * Hello, register requests without a file descriptor or with one that cannot
 * back the region.
 *
 *   b10-rawclient [-t TIMEOUT_MS] SOCKET CASE...    (CASE "all": every case)
 *
 * Each case prints "ok CASE: what happened" or "FAIL CASE: why". The daemon
 * must drop a connection that sent garbage (an Error reply before the drop
 * is fine, an OK reply is not) and must refuse a bad registration; the
 * case "alive" then checks that a fresh connection is still served.
 * Exit status: 0 if every case passed, 1 otherwise, 2 on usage error.
 */
#include <b10/b10.h>

#include "b10.pb-c.h"
#include "frame.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../testout.h"

#ifdef B10_HAVE_CUDA
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#endif

/* The protocol version a client speaks in Hello (libb10 sends the same). */
#define RAW_PROTO_VERSION B10_API_VERSION

static const char *sock_path;
static int timeout_ms = 5000;
static int name_seq;

struct conn {
    int fd;
    struct frame_reader rd;
    uint64_t seq;
    uint64_t max_frame;
    /* Bytes received past the last message taken: the daemon may send a
     * transfer's events right behind its Reply, in one read. */
    uint8_t held[4096];
    size_t held_off, held_len;
};

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int conn_open(struct conn *c)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };

    memset(c, 0, sizeof(*c));
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return -errno;
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        int e = errno;

        close(c->fd);
        c->fd = -1;
        return -e;
    }
    frame_reader_init(&c->rd, FRAME_MAX_LIMIT);
    return 0;
}

static void conn_close(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    frame_reader_free(&c->rd);
}

/* Send bytes, with at most one fd attached to the first byte. */
static int send_raw(struct conn *c, const void *buf, size_t len, int pass_fd)
{
    const uint8_t *p = buf;
    bool fd_sent = pass_fd < 0;

    while (len > 0) {
        struct iovec iov = { (void *)p, len };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(sizeof(int))];
        } cm;
        ssize_t n;

        if (!fd_sent) {
            memset(&cm, 0, sizeof(cm));
            mh.msg_control = cm.buf;
            mh.msg_controllen = sizeof(cm.buf);
            struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
            h->cmsg_level = SOL_SOCKET;
            h->cmsg_type = SCM_RIGHTS;
            h->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(h), &pass_fd, sizeof(int));
        }
        n = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        fd_sent = true;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int send_msg(struct conn *c, B10__ClientMsg *msg, int pass_fd)
{
    uint8_t *frame;
    size_t len;
    int rc;

    msg->seq = ++c->seq;
    rc = frame_encode(&msg->base, FRAME_MAX_LIMIT, &frame, &len);
    if (rc != 0)
        return rc;
    rc = send_raw(c, frame, len, pass_fd);
    free(frame);
    return rc;
}

enum recv_result { RECV_MSG, RECV_EOF, RECV_TIMEOUT, RECV_ERROR };

/* Receive one DaemonMsg within the timeout; the caller frees *msg_p. */
static enum recv_result recv_msg(struct conn *c, int wait_ms, B10__DaemonMsg **msg_p,
                                 char *why, size_t why_len)
{
    double end = now_ms() + wait_ms;

    for (;;) {
        if (c->held_off == c->held_len) {
            struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
            int left = (int)(end - now_ms());
            ssize_t n;

            if (left < 0)
                return RECV_TIMEOUT;
            n = poll(&pfd, 1, left);
            if (n < 0 && errno != EINTR) {
                snprintf(why, why_len, "poll: %s", strerror(errno));
                return RECV_ERROR;
            }
            if (n <= 0)
                continue;
            n = recv(c->fd, c->held, sizeof(c->held), 0);
            if (n == 0)
                return RECV_EOF;
            if (n < 0) {
                if (errno == EINTR || errno == EAGAIN)
                    continue;
                if (errno == ECONNRESET)
                    return RECV_EOF;
                snprintf(why, why_len, "recv: %s", strerror(errno));
                return RECV_ERROR;
            }
            c->held_off = 0;
            c->held_len = (size_t)n;
        }
        while (c->held_off < c->held_len) {
            size_t used;
            enum frame_result fr = frame_reader_feed(&c->rd, c->held + c->held_off,
                                                     c->held_len - c->held_off, &used);

            c->held_off += used;
            if (fr == FRAME_READY) {
                uint32_t len;
                uint8_t *body = frame_reader_take(&c->rd, &len);
                B10__DaemonMsg *m = b10__daemon_msg__unpack(NULL, len, body);

                free(body);
                if (m == NULL) {
                    snprintf(why, why_len, "daemon sent a frame that is not a DaemonMsg");
                    return RECV_ERROR;
                }
                *msg_p = m;     /* the bytes after it wait for the next call */
                return RECV_MSG;
            }
            if (fr != FRAME_MORE) {
                snprintf(why, why_len, "daemon sent a frame over the limit");
                return RECV_ERROR;
            }
        }
    }
}

/*
 * After garbage: the daemon may answer with a failure Reply, then must
 * close. Any OK reply, or a connection still open at the timeout, fails.
 */
static int expect_drop(struct conn *c, const char *name, const char *what)
{
    char why[256] = "", seen[256] = "no reply";

    for (;;) {
        B10__DaemonMsg *m = NULL;
        enum recv_result r = recv_msg(c, timeout_ms, &m, why, sizeof(why));

        switch (r) {
        case RECV_EOF:
            return pass(name, "%s: dropped (%s)", what, seen);
        case RECV_TIMEOUT:
            return fail(name, "%s: connection still open after %d ms (%s)", what, timeout_ms, seen);
        case RECV_ERROR:
            return fail(name, "%s: %s", what, why);
        case RECV_MSG:
            if (m->body_case != B10__DAEMON_MSG__BODY_REPLY) {
                b10__daemon_msg__free_unpacked(m, NULL);
                return fail(name, "%s: daemon sent an unsolicited message", what);
            }
            if (m->reply->status == B10__STATUS__OK) {
                b10__daemon_msg__free_unpacked(m, NULL);
                return fail(name, "%s: daemon answered OK", what);
            }
            snprintf(seen, sizeof(seen), "reply %s: %s",
                     b10_status_name((b10_status_t)m->reply->status), m->reply->detail);
            b10__daemon_msg__free_unpacked(m, NULL);
            break;
        }
    }
}

/* Wait for the Reply to the last request; *status_p its status. 1: dropped instead. */
static int get_reply(struct conn *c, const char *name, b10_status_t *status_p, char *detail,
                     size_t detail_len, B10__DaemonMsg **keep_p)
{
    char why[256] = "";

    for (;;) {
        B10__DaemonMsg *m = NULL;
        enum recv_result r = recv_msg(c, timeout_ms, &m, why, sizeof(why));

        if (r == RECV_EOF)
            return 1;
        if (r == RECV_TIMEOUT) {
            fail(name, "no reply within %d ms", timeout_ms);
            return -1;
        }
        if (r == RECV_ERROR) {
            fail(name, "%s", why);
            return -1;
        }
        if (m->body_case != B10__DAEMON_MSG__BODY_REPLY) {
            b10__daemon_msg__free_unpacked(m, NULL);
            continue;
        }
        if (m->reply->seq != c->seq) {
            fail(name, "reply for seq %llu, expected %llu", (unsigned long long)m->reply->seq,
                 (unsigned long long)c->seq);
            b10__daemon_msg__free_unpacked(m, NULL);
            return -1;
        }
        *status_p = (b10_status_t)m->reply->status;
        snprintf(detail, detail_len, "%s", m->reply->detail ? m->reply->detail : "");
        if (keep_p != NULL)
            *keep_p = m;
        else
            b10__daemon_msg__free_unpacked(m, NULL);
        return 0;
    }
}

static int hello(struct conn *c, const char *name)
{
    B10__Hello h = B10__HELLO__INIT;
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;
    B10__DaemonMsg *m = NULL;
    char agent[64], detail[256];
    b10_status_t st;
    int rc;

    snprintf(agent, sizeof(agent), "raw-%ld-%d", (long)getpid(), ++name_seq);
    h.version = RAW_PROTO_VERSION;
    h.agent_name = agent;
    msg.body_case = B10__CLIENT_MSG__BODY_HELLO;
    msg.hello = &h;
    rc = send_msg(c, &msg, -1);
    if (rc != 0)
        return fail(name, "send hello: %s", strerror(-rc));
    rc = get_reply(c, name, &st, detail, sizeof(detail), &m);
    if (rc > 0)
        return fail(name, "daemon dropped the connection after hello");
    if (rc < 0)
        return 1;
    if (st != B10_OK || m->reply->body_case != B10__REPLY__BODY_HELLO) {
        b10__daemon_msg__free_unpacked(m, NULL);
        return fail(name, "hello refused: %s: %s", b10_status_name(st), detail);
    }
    c->max_frame = m->reply->hello->max_frame;
    b10__daemon_msg__free_unpacked(m, NULL);
    return 0;
}

/* ---------------------------------------------------------------- cases */

static void junk_fill(uint8_t *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (uint8_t)(seed >> 56);
    }
}

static int case_oversize_prehello(const char *name)
{
    struct conn c;
    uint8_t buf[4 + 64];
    int rc;

    if ((rc = conn_open(&c)) != 0)
        return fail(name, "connect: %s", strerror(-rc));
    frame_put_u32(buf, 0xffffffffu);
    junk_fill(buf + 4, 64, 1);
    send_raw(&c, buf, sizeof(buf), -1);
    rc = expect_drop(&c, name, "length 0xffffffff before hello");
    conn_close(&c);
    return rc;
}

static int case_oversize(const char *name)
{
    struct conn c;
    uint8_t buf[4 + 64];
    uint64_t max;
    int rc;

    if ((rc = conn_open(&c)) != 0)
        return fail(name, "connect: %s", strerror(-rc));
    if (hello(&c, name) != 0) {
        conn_close(&c);
        return 1;
    }
    max = c.max_frame ? c.max_frame : FRAME_MAX_DEFAULT;
    if (max >= UINT32_MAX) {
        conn_close(&c);
        return fail(name, "daemon announces max_frame %llu: no length exceeds it",
                    (unsigned long long)max);
    }
    frame_put_u32(buf, (uint32_t)max + 1);
    junk_fill(buf + 4, 64, 2);
    send_raw(&c, buf, sizeof(buf), -1);
    char what[96];
    snprintf(what, sizeof(what), "length %llu, one over the announced max_frame",
             (unsigned long long)max + 1);
    rc = expect_drop(&c, name, what);
    conn_close(&c);
    return rc;
}

static int case_junk(const char *name)
{
    struct conn c;
    uint8_t buf[4096];
    int rc, bad = 0;

    /* Unframed junk: whatever the first four bytes announce. */
    if ((rc = conn_open(&c)) != 0)
        return fail(name, "connect: %s", strerror(-rc));
    junk_fill(buf, sizeof(buf), 3);
    send_raw(&c, buf, sizeof(buf), -1);
    bad |= expect_drop(&c, name, "4 KiB of random bytes");
    conn_close(&c);

    /* Well-framed junk: the decoder itself must refuse it. */
    if ((rc = conn_open(&c)) != 0)
        return fail(name, "connect: %s", strerror(-rc));
    frame_put_u32(buf, 512);
    junk_fill(buf + 4, 512, 4);
    buf[4] = 0x0f;   /* field 1, wire type 7: invalid in any protobuf */
    send_raw(&c, buf, 4 + 512, -1);
    bad |= expect_drop(&c, name, "a 512-byte frame of junk first");
    conn_close(&c);

    /* Junk after a good hello. */
    if ((rc = conn_open(&c)) != 0)
        return fail(name, "connect: %s", strerror(-rc));
    if (hello(&c, name) != 0) {
        conn_close(&c);
        return 1;
    }
    frame_put_u32(buf, 100);
    junk_fill(buf + 4, 100, 5);
    buf[4] = 0x0f;
    send_raw(&c, buf, 4 + 100, -1);
    bad |= expect_drop(&c, name, "a 100-byte frame of junk after hello");
    conn_close(&c);

    /* An empty frame after hello: a ClientMsg with no body. */
    if ((rc = conn_open(&c)) != 0)
        return fail(name, "connect: %s", strerror(-rc));
    if (hello(&c, name) != 0) {
        conn_close(&c);
        return 1;
    }
    frame_put_u32(buf, 0);
    send_raw(&c, buf, 4, -1);
    bad |= expect_drop(&c, name, "an empty frame (a message with no body) after hello");
    conn_close(&c);
    return bad;
}

static int case_truncated(const char *name)
{
    struct conn c;
    uint8_t buf[4 + 10];
    int rc;

    /* Half a frame, then the client goes away: the daemon must just forget it. */
    if ((rc = conn_open(&c)) != 0)
        return fail(name, "connect: %s", strerror(-rc));
    frame_put_u32(buf, 100);
    junk_fill(buf + 4, 10, 6);
    send_raw(&c, buf, sizeof(buf), -1);
    conn_close(&c);
    return pass(name, "sent 14 of 104 bytes of a frame and closed");
}

static int case_nohello(const char *name)
{
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;
    B10__RegisterMem reg = B10__REGISTER_MEM__INIT;
    B10__SubmitXfer sub = B10__SUBMIT_XFER__INIT;
    struct conn c;
    int rc, bad = 0;

    if ((rc = conn_open(&c)) != 0)
        return fail(name, "connect: %s", strerror(-rc));
    reg.kind = B10__MEM_KIND__MEM_DRAM;
    reg.addr = 0x10000;
    reg.length = 4096;
    msg.body_case = B10__CLIENT_MSG__BODY_REGISTER_MEM;
    msg.register_mem = &reg;
    send_msg(&c, &msg, -1);
    bad |= expect_drop(&c, name, "RegisterMem as the first message");
    conn_close(&c);

    if ((rc = conn_open(&c)) != 0)
        return fail(name, "connect: %s", strerror(-rc));
    uint8_t spans[SPAN_BYTES];
    frame_put_u64(spans, 0x10000);
    frame_put_u64(spans + 8, 4096);
    sub.op = B10__OP__OP_WRITE;
    sub.remote_agent = "nobody";
    sub.local_spans = (ProtobufCBinaryData){ sizeof(spans), spans };
    sub.remote_spans = (ProtobufCBinaryData){ sizeof(spans), spans };
    msg.body_case = B10__CLIENT_MSG__BODY_SUBMIT;
    msg.submit = &sub;
    send_msg(&c, &msg, -1);
    bad |= expect_drop(&c, name, "SubmitXfer as the first message");
    conn_close(&c);

    if ((rc = conn_open(&c)) != 0)
        return fail(name, "connect: %s", strerror(-rc));
    if (hello(&c, name) != 0) {
        conn_close(&c);
        return 1;
    }
    B10__Hello h = B10__HELLO__INIT;
    h.version = RAW_PROTO_VERSION;
    h.agent_name = "raw-second-hello";
    msg.body_case = B10__CLIENT_MSG__BODY_HELLO;
    msg.hello = &h;
    send_msg(&c, &msg, -1);
    bad |= expect_drop(&c, name, "a second Hello on the same connection");
    conn_close(&c);
    return bad;
}

/*
 * One registration on a fresh connection. want_ok: it must be accepted;
 * otherwise the daemon must refuse it (a failure reply, or a drop).
 */
static int try_register_as(const char *name, const char *what, uint64_t addr, uint64_t length,
                           uint64_t fd_offset, int pass_fd, bool process_mem, bool want_ok)
{
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;
    B10__RegisterMem reg = B10__REGISTER_MEM__INIT;
    struct conn c;
    char detail[256];
    b10_status_t st;
    int rc;

    if ((rc = conn_open(&c)) != 0)
        return fail(name, "connect: %s", strerror(-rc));
    if (hello(&c, name) != 0) {
        conn_close(&c);
        return 1;
    }
    reg.kind = B10__MEM_KIND__MEM_DRAM;
    reg.addr = addr;
    reg.length = length;
    reg.fd_offset = fd_offset;
    reg.process_mem = process_mem;
    msg.body_case = B10__CLIENT_MSG__BODY_REGISTER_MEM;
    msg.register_mem = &reg;
    rc = send_msg(&c, &msg, pass_fd);
    if (rc != 0) {
        conn_close(&c);
        return fail(name, "%s: send: %s", what, strerror(-rc));
    }
    rc = get_reply(&c, name, &st, detail, sizeof(detail), NULL);
    conn_close(&c);
    if (rc < 0)
        return 1;
    if (want_ok) {
        if (rc > 0)
            return fail(name, "%s: the daemon dropped the connection", what);
        if (st != B10_OK)
            return fail(name, "%s: refused: %s: %s", what, b10_status_name(st), detail);
        return pass(name, "%s: accepted", what);
    }
    if (rc > 0)
        return pass(name, "%s: refused by dropping the connection", what);
    if (st == B10_OK)
        return fail(name, "%s: daemon accepted it", what);
    return pass(name, "%s: refused: %s: %s", what, b10_status_name(st),
                detail[0] ? detail : "(no detail)");
}

static int try_register(const char *name, const char *what, uint64_t addr, uint64_t length,
                        uint64_t fd_offset, int pass_fd, bool want_ok)
{
    return try_register_as(name, what, addr, length, fd_offset, pass_fd, false, want_ok);
}

/*
 * A memfd as b10_dram_alloc makes one: sealed against shrinking, so that
 * the daemon's mapping can never run past the file's end (SIGBUS).
 */
static int sealed_memfd(size_t size, bool seal)
{
    int fd = memfd_create("b10-rawclient", MFD_CLOEXEC | MFD_ALLOW_SEALING);

    if (fd < 0)
        return -1;
    if (ftruncate(fd, (off_t)size) != 0 || (seal && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0)) {
        close(fd);
        return -1;
    }
    return fd;
}

static int case_badreg(const char *name)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t size = 16 * (size_t)page;
    int mfd = sealed_memfd(size, true), ufd = sealed_memfd(size, false), pfd[2] = { -1, -1 };
    int bad = 0;
    void *addr;

    if (mfd < 0 || ufd < 0)
        return fail(name, "memfd: %s", strerror(errno));
    addr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    if (addr == MAP_FAILED)
        return fail(name, "mmap: %s", strerror(errno));
    if (pipe2(pfd, O_CLOEXEC) != 0)
        return fail(name, "pipe: %s", strerror(errno));

    uint64_t a = (uint64_t)(uintptr_t)addr;
    bad |= try_register(name, "DRAM without a file descriptor", a, size, 0, -1, false);
    bad |= try_register(name, "DRAM backed by a pipe", a, size, 0, pfd[0], false);
    bad |= try_register(name, "length 64x the memfd's size", a, size * 64, 0, mfd, false);
    bad |= try_register(name, "length one byte past the memfd's end", a, size + 1, 0, mfd, false);
    bad |= try_register(name, "fd offset past the memfd's end", a, (size_t)page, size * 2, mfd, false);
    bad |= try_register(name, "fd offset + length past the memfd's end", a, size, (size_t)page, mfd, false);
    bad |= try_register(name, "a memfd not sealed against shrinking", a, size, 0, ufd, false);
    bad |= try_register(name, "zero length", a, 0, 0, mfd, false);
    bad |= try_register(name, "address + length wrapping around", UINT64_MAX - 100, size, 0, mfd, false);

    /* The controls: the same memfd, registered properly, is accepted... */
    bad |= try_register(name, "the whole sealed memfd", a, size, 0, mfd, true);
    /* ...and so is a region that starts inside the file, off any page boundary. */
    bad |= try_register(name, "a region 100 bytes into the memfd, to its end", a + 100,
                         size - 100, 100, mfd, true);
    munmap(addr, size);
    close(mfd);
    close(ufd);
    close(pfd[0]);
    close(pfd[1]);
    return bad;
}

/*
 * Process memory (the daemon reads and writes the rank's /proc/<pid>/mem):
 * only the rank's own memory file, open for both, over memory it has.
 */
static int case_procreg(const char *name)
{
    size_t size = 1u << 20;
    uint8_t *heap = malloc(size);
    int self = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
    int rdonly = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
    int status = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    int mfd = sealed_memfd(size, true), other = -1, bad = 0;
    char path[64];

    if (heap == NULL || self < 0 || rdonly < 0 || status < 0 || mfd < 0)
        return fail(name, "setting up: %s", strerror(errno));
    memset(heap, 1, size);
    /* Another process's memory file, which this process could open: still not its own. */
    pid_t child = fork();
    if (child == 0) {
        pause();
        _exit(0);
    }
    snprintf(path, sizeof(path), "/proc/%ld/mem", (long)child);
    other = child > 0 ? open(path, O_RDWR | O_CLOEXEC) : -1;
    /* Four pages mapped, and the four after them mapped once and unmapped since. */
    size_t four = 4 * (size_t)sysconf(_SC_PAGESIZE);
    uint8_t *pages = mmap(NULL, 2 * four, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                          -1, 0);
    if (other < 0 || pages == MAP_FAILED || munmap(pages + four, four) != 0)
        return fail(name, "setting up: %s", strerror(errno));

    uint64_t a = (uint64_t)(uintptr_t)heap;
    bad |= try_register_as(name, "process memory without a descriptor", a, size, 0, -1, true, false);
    bad |= try_register_as(name, "process memory through a memfd", a, size, 0, mfd, true, false);
    bad |= try_register_as(name, "process memory through /proc/self/status", a, size, 0, status,
                           true, false);
    bad |= try_register_as(name, "process memory through a read-only /proc/self/mem", a, size, 0,
                           rdonly, true, false);
    bad |= try_register_as(name, "process memory through another process's /proc/<pid>/mem", a,
                           size, 0, other, true, false);
    bad |= try_register_as(name, "process memory over unmapped pages",
                           (uint64_t)(uintptr_t)(pages + four), four, 0, self, true, false);
    bad |= try_register_as(name, "process memory running past its mapping",
                           (uint64_t)(uintptr_t)pages, 2 * four, 0, self, true, false);
    /* The control: the rank's own memory file over its own heap is accepted. */
    bad |= try_register_as(name, "the rank's heap through its own /proc/self/mem", a, size, 0,
                           self, true, true);
    bad |= try_register_as(name, "its mapped pages alone", (uint64_t)(uintptr_t)pages, four, 0,
                           self, true, true);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    munmap(pages, four);
    close(other);
    close(self);
    close(rdonly);
    close(status);
    close(mfd);
    free(heap);
    return bad;
}

/* The same refusals through libb10's public API. */
static int case_libreg(const char *name)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t size = 16 * (size_t)page;
    b10_conn_params_t cp = { .field_mask = B10_CONN_FIELD_SOCKET_PATH, .socket_path = sock_path };
    b10_conn_t *conn;
    b10_mem_t *mem;
    char agent[64];
    int mfd = sealed_memfd(size, true), bad = 0;
    void *addr;
    b10_status_t st;

    if (mfd < 0)
        return fail(name, "memfd: %s", strerror(errno));
    addr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    if (addr == MAP_FAILED)
        return fail(name, "mmap: %s", strerror(errno));
    snprintf(agent, sizeof(agent), "raw-lib-%ld", (long)getpid());
    cp.agent_name = agent;
    st = b10_conn_open(&cp, &conn);
    if (st != B10_OK)
        return fail(name, "b10_conn_open: %s: %s", b10_status_name(st), b10_status_str(st));

    struct { const char *what; int fd; size_t length; uint64_t off; } cases[] = {
        { "a closed fd", 1000, size, 0 },
        { "length 64x the memfd's size", mfd, size * 64, 0 },
        { "fd offset + length past the memfd's end", mfd, size, (uint64_t)page },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        b10_mem_params_t mp = {
            .field_mask = B10_MEM_FIELD_FD | B10_MEM_FIELD_FD_OFFSET,
            .kind = B10_MEM_DRAM,
            .addr = addr,
            .length = cases[i].length,
            .fd = cases[i].fd,
            .fd_offset = cases[i].off,
        };

        st = b10_mem_register(conn, &mp, &mem);
        if (st == B10_OK) {
            bad |= fail(name, "libb10: %s: accepted", cases[i].what);
            b10_mem_deregister(conn, mem);
        } else {
            pass(name, "libb10: %s: refused: %s: %s", cases[i].what, b10_status_name(st),
                 b10_conn_detail(conn)[0] ? b10_conn_detail(conn) : "(no detail)");
        }
        if (b10_status_action(st) == B10_ACTION_REOPEN) {
            b10_conn_close(conn);
            st = b10_conn_open(&cp, &conn);
            if (st != B10_OK) {
                munmap(addr, size);
                close(mfd);
                return fail(name, "reopen: %s", b10_status_name(st));
            }
        }
    }
    b10_mem_params_t ok = {
        .field_mask = B10_MEM_FIELD_FD | B10_MEM_FIELD_FD_OFFSET,
        .kind = B10_MEM_DRAM, .addr = addr, .length = size, .fd = mfd, .fd_offset = 0,
    };
    st = b10_mem_register(conn, &ok, &mem);
    if (st != B10_OK) {
        bad |= fail(name, "libb10: a valid registration was refused: %s: %s", b10_status_name(st),
                    b10_conn_detail(conn));
    } else {
        pass(name, "libb10: a valid registration of the same memfd is accepted");
        st = b10_mem_deregister(conn, mem);
        if (st != B10_OK)
            bad |= fail(name, "libb10: deregister: %s", b10_status_name(st));
    }
    b10_conn_close(conn);
    munmap(addr, size);
    close(mfd);
    return bad;
}

static int case_alive(const char *name)
{
    b10_conn_params_t cp = { .field_mask = B10_CONN_FIELD_SOCKET_PATH, .socket_path = sock_path };
    b10_conn_t *conn;
    const void *desc;
    size_t len;
    char agent[64];
    void *mem;
    b10_mem_t *reg;
    b10_status_t st;

    snprintf(agent, sizeof(agent), "raw-alive-%ld", (long)getpid());
    cp.agent_name = agent;
    st = b10_conn_open(&cp, &conn);
    if (st != B10_OK)
        return fail(name, "b10_conn_open: %s: %s", b10_status_name(st), b10_status_str(st));
    st = b10_agent_desc(conn, &desc, &len);
    if (st != B10_OK) {
        b10_conn_close(conn);
        return fail(name, "b10_agent_desc: %s", b10_status_name(st));
    }
    st = b10_dram_alloc(1 << 20, &mem);
    if (st != B10_OK) {
        b10_conn_close(conn);
        return fail(name, "b10_dram_alloc: %s", b10_status_name(st));
    }
    b10_mem_params_t mp = { .kind = B10_MEM_DRAM, .addr = mem, .length = 1 << 20 };
    st = b10_mem_register(conn, &mp, &reg);
    if (st == B10_OK)
        st = b10_mem_deregister(conn, reg);
    b10_dram_free(mem);
    b10_conn_close(conn);
    if (st != B10_OK)
        return fail(name, "register/deregister 1 MiB: %s: %s", b10_status_name(st), b10_status_str(st));
    return pass(name, "a fresh client connects, gets a %zu-byte descriptor, registers 1 MiB", len);
}


/*
 * A request's lengths are only the client's claim until checked: one span
 * claiming 2^54 bytes must be refused at once (--max-xfer-bytes), not
 * planned into billions of chunks on the loop thread; a span outside the
 * registrations is refused by name.
 */
/*
 * A connection that said hello as agent and loaded its own descriptor, so
 * that it may submit to itself: 0, with *hello_p the HelloReply's message
 * (the caller frees it); else the failure, said.
 */
static int hello_self(struct conn *c, const char *name, char *agent, size_t agent_len,
                      B10__DaemonMsg **hello_p)
{
    B10__Hello h = B10__HELLO__INIT;
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;
    B10__DaemonMsg *m = NULL;
    char detail[256];
    b10_status_t st;

    snprintf(agent, agent_len, "raw-%ld-%d", (long)getpid(), ++name_seq);
    h.version = RAW_PROTO_VERSION;
    h.agent_name = agent;
    msg.body_case = B10__CLIENT_MSG__BODY_HELLO;
    msg.hello = &h;
    if (send_msg(c, &msg, -1) != 0 || get_reply(c, name, &st, detail, sizeof(detail), &m) != 0 ||
        st != B10_OK || m->reply->body_case != B10__REPLY__BODY_HELLO) {
        if (m != NULL)
            b10__daemon_msg__free_unpacked(m, NULL);
        return fail(name, "hello");
    }
    /* The daemon's own descriptor for us serves as a loaded remote agent. */
    B10__LoadAgent load = B10__LOAD_AGENT__INIT;
    load.name = agent;
    load.desc = m->reply->hello->agent_desc;
    msg = (B10__ClientMsg)B10__CLIENT_MSG__INIT;
    msg.body_case = B10__CLIENT_MSG__BODY_LOAD_AGENT;
    msg.load_agent = &load;
    if (send_msg(c, &msg, -1) != 0 || get_reply(c, name, &st, detail, sizeof(detail), NULL) != 0 ||
        st != B10_OK) {
        b10__daemon_msg__free_unpacked(m, NULL);
        return fail(name, "load agent: %s %s", b10_status_name(st), detail);
    }
    c->max_frame = m->reply->hello->max_frame;
    *hello_p = m;
    return 0;
}

static int case_hugespan(const char *name)
{
    struct conn c;
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;
    B10__DaemonMsg *m = NULL;
    char agent[64], detail[256];
    b10_status_t st;
    int rc = 1;

    if (conn_open(&c) != 0)
        return fail(name, "connect");
    if (hello_self(&c, name, agent, sizeof(agent), &m) != 0)
        goto out;
    static const struct {
        uint64_t len;
        b10_status_t want;
    } tries[] = { { UINT64_C(1) << 54, B10_ERR_TOO_LARGE }, { UINT64_C(1) << 20, B10_ERR_NOT_REGISTERED } };
    for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
        uint8_t span[SPAN_BYTES];
        frame_put_u64(span, 0x100000);
        frame_put_u64(span + 8, tries[i].len);
        B10__SubmitXfer sub = B10__SUBMIT_XFER__INIT;
        sub.op = B10__OP__OP_WRITE;
        sub.remote_agent = agent;
        sub.local_spans = (ProtobufCBinaryData){ sizeof(span), span };
        sub.remote_spans = (ProtobufCBinaryData){ sizeof(span), span };
        msg = (B10__ClientMsg)B10__CLIENT_MSG__INIT;
        msg.body_case = B10__CLIENT_MSG__BODY_SUBMIT;
        msg.submit = &sub;
        if (send_msg(&c, &msg, -1) != 0 || get_reply(&c, name, &st, detail, sizeof(detail), NULL) != 0) {
            fail(name, "no reply to a submit of %llu bytes", (unsigned long long)tries[i].len);
            goto out;
        }
        if (st != tries[i].want || detail[0] == '\0') {
            fail(name, "a submit of %llu bytes got %s (%s), expected %s", (unsigned long long)tries[i].len,
                 b10_status_name(st), detail, b10_status_name(tries[i].want));
            goto out;
        }
    }
    rc = pass(name, "a 2^54-byte claim and an unregistered span were refused at once, with reasons");
out:
    if (m != NULL)
        b10__daemon_msg__free_unpacked(m, NULL);
    conn_close(&c);
    return rc;
}

/* One request on c; 0 with its status and detail, else the failure (a drop included), said. */
static int ask(struct conn *c, const char *name, const char *what, B10__ClientMsg *msg, int pass_fd,
               b10_status_t *st_p, char *detail, size_t detail_len)
{
    if (send_msg(c, msg, pass_fd) != 0)
        return fail(name, "%s: could not send", what);
    int rc = get_reply(c, name, st_p, detail, detail_len, NULL);
    if (rc > 0)
        return fail(name, "%s: the daemon dropped the connection", what);
    return rc;
}

/* Submit sub (a WRITE to agent), answered want with a reason (that says says, when not NULL). */
static int submit_says(struct conn *c, const char *name, const char *what, const char *agent,
                       B10__SubmitXfer *sub, b10_status_t want, const char *says)
{
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;
    char detail[256] = "";
    b10_status_t st;

    sub->op = B10__OP__OP_WRITE;
    sub->remote_agent = (char *)agent;
    msg.body_case = B10__CLIENT_MSG__BODY_SUBMIT;
    msg.submit = sub;
    if (ask(c, name, what, &msg, -1, &st, detail, sizeof(detail)) != 0)
        return 1;
    if (st != want || (want != B10_OK && detail[0] == '\0') ||
        (says != NULL && strstr(detail, says) == NULL))
        return fail(name, "%s: %s (%s), expected %s with a reason%s%s", what, b10_status_name(st),
                    detail, b10_status_name(want), says != NULL ? " saying " : "",
                    says != NULL ? says : "");
    return 0;
}

/* A submit to itself of count spans in the arena (and frame_spans of them in the frame too),
 * answered want with a reason (that says says, when not NULL). */
static int arena_submit_says(struct conn *c, const char *name, const char *what, const char *agent,
                             uint64_t count, size_t frame_spans, b10_status_t want, const char *says)
{
    B10__SubmitXfer sub = B10__SUBMIT_XFER__INIT;
    uint8_t span[SPAN_BYTES] = { 0 };

    sub.arena_spans = count;
    if (frame_spans > 0) {
        sub.local_spans = (ProtobufCBinaryData){ sizeof(span), span };
        sub.remote_spans = (ProtobufCBinaryData){ sizeof(span), span };
    }
    return submit_says(c, name, what, agent, &sub, want, says);
}

static int arena_submit(struct conn *c, const char *name, const char *what, const char *agent,
                        uint64_t count, size_t frame_spans, b10_status_t want)
{
    return arena_submit_says(c, name, what, agent, count, frame_spans, want, NULL);
}

/* A SpanArena request of length bytes with pass_fd. */
static int arena_give(struct conn *c, const char *name, const char *what, uint64_t length,
                      int pass_fd, b10_status_t want)
{
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;
    B10__SpanArena sa = B10__SPAN_ARENA__INIT;
    char detail[256] = "";
    b10_status_t st;

    sa.length = length;
    msg.body_case = B10__CLIENT_MSG__BODY_SPAN_ARENA;
    msg.span_arena = &sa;
    if (ask(c, name, what, &msg, pass_fd, &st, detail, sizeof(detail)) != 0)
        return 1;
    if (st != want || (want != B10_OK && detail[0] == '\0'))
        return fail(name, "%s: %s (%s), expected %s", what, b10_status_name(st), detail,
                    b10_status_name(want));
    return 0;
}

/*
 * The span arena: a memfd the rank hands over for its large requests'
 * span tables, whose bytes are the rank's to change at any time. Every
 * arena the daemon cannot map safely and every count that does not lie
 * inside the arena is refused with a reason, the connection kept; what
 * the arena holds is checked as a frame's spans would be.
 */
static int case_arena(const char *name)
{
    struct conn c;
    B10__DaemonMsg *m = NULL;
    char agent[64];
    size_t size = 1u << 20;
    int mfd = sealed_memfd(size, true), ufd = sealed_memfd(size, false), pfd[2] = { -1, -1 };
    int bad = 1;
    uint8_t *arena = MAP_FAILED;

    if (mfd < 0 || ufd < 0 || pipe2(pfd, O_CLOEXEC) != 0)
        return fail(name, "memfd or pipe: %s", strerror(errno));
    if (conn_open(&c) != 0)
        return fail(name, "connect");
    if (hello_self(&c, name, agent, sizeof(agent), &m) != 0)
        goto out;
    if (!m->reply->hello->span_arena) {
        fail(name, "the daemon does not say it reads a span arena");
        goto out;
    }
    arena = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    if (arena == MAP_FAILED) {
        fail(name, "mmap: %s", strerror(errno));
        goto out;
    }
    if (arena_submit(&c, name, "spans in an arena never given", agent, 10, 0, B10_ERR_INVALID_ARG) ||
        arena_give(&c, name, "an arena without a descriptor", size, -1, B10_ERR_INVALID_ARG) ||
        arena_give(&c, name, "an arena in a pipe", size, pfd[0], B10_ERR_INVALID_ARG) ||
        arena_give(&c, name, "an arena not sealed against shrinking", size, ufd, B10_ERR_INVALID_ARG) ||
        arena_give(&c, name, "an arena past its memfd's end", size + 1, mfd, B10_ERR_INVALID_ARG) ||
        arena_give(&c, name, "an arena of 0 bytes", 0, mfd, B10_ERR_TOO_LARGE) ||
        arena_give(&c, name, "an arena over --max-frame", (uint64_t)c.max_frame + 1, mfd,
                   B10_ERR_TOO_LARGE) ||
        arena_give(&c, name, "the sealed memfd", size, mfd, B10_OK))
        goto out;
    if (arena_submit(&c, name, "one span more than the arena holds", agent, size / 32 + 1, 0,
                     B10_ERR_INVALID_ARG) ||
        arena_submit(&c, name, "2^64 - 1 spans", agent, UINT64_MAX, 0, B10_ERR_INVALID_ARG) ||
        arena_submit(&c, name, "spans in the arena and the frame", agent, 1, 1, B10_ERR_INVALID_ARG))
        goto out;
    /* Zeros (pages never written read as zeros, and the daemon's read makes none): spans of
     * length 0, refused by the same checks as a frame's. */
    if (arena_submit_says(&c, name, "spans of 0 bytes", agent, size / 32, 0, B10_ERR_INVALID_ARG,
                          "non-zero"))
        goto out;
    /* Junk: spans of memory nobody registered. */
    for (size_t i = 0; i < 2 * 10; i++) {
        frame_put_u64(arena + i * SPAN_BYTES, 0x100000 + i * 4096);
        frame_put_u64(arena + i * SPAN_BYTES + 8, 4096);
    }
    if (arena_submit(&c, name, "spans of memory not registered", agent, 10, 0,
                     B10_ERR_NOT_REGISTERED))
        goto out;
    bad = pass(name, "unsafe arenas, counts outside the arena and its junk refused with reasons, "
               "the connection kept");
out:
    if (arena != MAP_FAILED)
        munmap(arena, size);
    if (m != NULL)
        b10__daemon_msg__free_unpacked(m, NULL);
    conn_close(&c);
    close(mfd);
    close(ufd);
    close(pfd[0]);
    close(pfd[1]);
    return bad;
}

/* A grid for a picks submit: nbases bases from 0x100000, 1 MiB apart. */
struct raw_grid {
    uint8_t bases[4 * 8];
    B10__SpanGrid msg;
};

static void raw_grid(struct raw_grid *g, size_t nbases, uint64_t per_base, uint64_t stride,
                     uint64_t length)
{
    for (size_t b = 0; b < nbases && b < 4; b++)
        frame_put_u64(g->bases + b * 8, 0x100000 + b * (1u << 20));
    g->msg = (B10__SpanGrid)B10__SPAN_GRID__INIT;
    g->msg.bases = (ProtobufCBinaryData){ nbases * 8, g->bases };
    g->msg.per_base = per_base;
    g->msg.stride = stride;
    g->msg.length = length;
}

/* Register a memfd of length bytes on c, at addr: where the rank says it lies. */
static int register_on(struct conn *c, const char *name, const char *what, uint64_t addr,
                       uint64_t length, int fd)
{
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;
    B10__RegisterMem reg = B10__REGISTER_MEM__INIT;
    char detail[256] = "";
    b10_status_t st;

    reg.kind = B10__MEM_KIND__MEM_DRAM;
    reg.addr = addr;
    reg.length = length;
    msg.body_case = B10__CLIENT_MSG__BODY_REGISTER_MEM;
    msg.register_mem = &reg;
    if (ask(c, name, what, &msg, fd, &st, detail, sizeof(detail)) != 0)
        return 1;
    if (st != B10_OK)
        return fail(name, "%s: %s: %s", what, b10_status_name(st), detail);
    return 0;
}

/* A submit to itself of count picks in the arena with these grids (NULL: none) and arena_spans. */
static int picks_submit(struct conn *c, const char *name, const char *what, const char *agent,
                        uint64_t count, uint64_t arena_spans, struct raw_grid *lg,
                        struct raw_grid *rg, b10_status_t want, const char *says)
{
    B10__SubmitXfer sub = B10__SUBMIT_XFER__INIT;

    sub.arena_picks = count;
    sub.arena_spans = arena_spans;
    sub.local_grid = lg != NULL ? &lg->msg : NULL;
    sub.remote_grid = rg != NULL ? &rg->msg : NULL;
    return submit_says(c, name, what, agent, &sub, want, says);
}

/*
 * Spans as rows picked from two grids (SubmitXfer.arena_picks): the grids
 * are the frame's and the indices the arena's, all the rank's. Every grid
 * that is no grid, every count outside the arena or past --max-spans and
 * every index past its grid is refused with a reason, the connection kept;
 * picks that pass reach the registration check as a frame's spans would.
 * Over memory the rank registered, where the daemon takes the grids whole
 * and reads each index only as it plans, the same indices are refused with
 * the same reasons, and so is a destination row picked twice; the picks
 * within every bound are accepted.
 */
static int case_picks(const char *name)
{
    struct conn c;
    B10__DaemonMsg *m = NULL;
    char agent[64];
    size_t size = 1u << 20;
    int mfd = sealed_memfd(size, true), big = -1, kv = -1;
    int bad = 1;
    uint8_t *arena = MAP_FAILED;
    struct raw_grid lg, rg, g;

    if (mfd < 0)
        return fail(name, "memfd: %s", strerror(errno));
    if (conn_open(&c) != 0)
        return fail(name, "connect");
    if (hello_self(&c, name, agent, sizeof(agent), &m) != 0)
        goto out;
    if (!m->reply->hello->span_grids) {
        fail(name, "the daemon does not say it reads picked rows of grids");
        goto out;
    }
    arena = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    if (arena == MAP_FAILED) {
        fail(name, "mmap: %s", strerror(errno));
        goto out;
    }
    raw_grid(&lg, 2, 64, 8192, 4096);          /* 128 rows */
    raw_grid(&rg, 1, 256, 4096, 4096);         /* 256 rows */
    /* Indices 0..9 each way, all inside both grids. */
    for (uint32_t i = 0; i < 10; i++) {
        frame_put_u32(arena + i * 4, i);
        frame_put_u32(arena + 40 + i * 4, i);
    }
    if (picks_submit(&c, name, "picks in an arena never given", agent, 10, 0, &lg, &rg,
                     B10_ERR_INVALID_ARG, "arena") ||
        arena_give(&c, name, "the sealed memfd", size, mfd, B10_OK))
        goto out;
    if (picks_submit(&c, name, "picks without grids", agent, 10, 0, NULL, &rg,
                     B10_ERR_INVALID_ARG, "both sides' grids") ||
        picks_submit(&c, name, "grids without picks", agent, 0, 0, &lg, &rg,
                     B10_ERR_INVALID_ARG, "picked rows") ||
        picks_submit(&c, name, "grids beside spans in the arena", agent, 0, 10, &lg, &rg,
                     B10_ERR_INVALID_ARG, "both as spans and as picked rows") ||
        picks_submit(&c, name, "picks past the arena", agent, size / 8 + 1, 0, &lg, &rg,
                     B10_ERR_INVALID_ARG, "inside the span arena") ||
        picks_submit(&c, name, "2^64 - 1 picks", agent, UINT64_MAX, 0, &lg, &rg,
                     B10_ERR_INVALID_ARG, "inside the span arena"))
        goto out;
    raw_grid(&g, 2, 64, 8192, 0);
    if (picks_submit(&c, name, "a grid of rows of 0 bytes", agent, 10, 0, &g, &rg,
                     B10_ERR_INVALID_ARG, "local grid"))
        goto out;
    raw_grid(&g, 1, 4, 4096, 4096);
    g.msg.bases.len = 7;
    if (picks_submit(&c, name, "bases that are not whole u64s", agent, 10, 0, &lg, &g,
                     B10_ERR_INVALID_ARG, "remote grid"))
        goto out;
    raw_grid(&g, 1, 65536, 65536, 4096);
    g.msg.per_base = (uint64_t)1 << 32;
    if (picks_submit(&c, name, "a grid of 2^32 rows", agent, 10, 0, &g, &rg,
                     B10_ERR_INVALID_ARG, "2^32"))
        goto out;
    raw_grid(&g, 1, 3, UINT64_MAX / 2, 4096);     /* the third row ends past 2^64 */
    if (picks_submit(&c, name, "a grid whose rows wrap", agent, 10, 0, &g, &rg,
                     B10_ERR_INVALID_ARG, "address space"))
        goto out;
    raw_grid(&g, 1, 256, 4096, 2048);
    if (picks_submit(&c, name, "grids of rows of different lengths", agent, 10, 0, &lg, &g,
                     B10_ERR_INVALID_ARG, "as long"))
        goto out;
    frame_put_u32(arena + 3 * 4, 128);
    if (picks_submit(&c, name, "a local index one past its grid", agent, 10, 0, &lg, &rg,
                     B10_ERR_INVALID_ARG, "local index 128 (at 3)"))
        goto out;
    frame_put_u32(arena + 3 * 4, 127);
    frame_put_u32(arena + 40 + 9 * 4, UINT32_MAX);
    if (picks_submit(&c, name, "a remote index of 2^32 - 1", agent, 10, 0, &lg, &rg,
                     B10_ERR_INVALID_ARG, "remote index 4294967295 (at 9)"))
        goto out;
    /* Within every bound: the rows are memory nobody registered, refused as such. */
    frame_put_u32(arena + 40 + 9 * 4, 255);
    if (picks_submit(&c, name, "picks of memory not registered", agent, 10, 0, &lg, &rg,
                     B10_ERR_NOT_REGISTERED, "local span"))
        goto out;
    /* The grids' rows all registered (4 MiB from the bases' 0x100000). */
    kv = sealed_memfd(4u << 20, true);
    if (kv < 0 || register_on(&c, name, "4 MiB at the grids' bases", 0x100000, 4u << 20, kv))
        goto out;
    frame_put_u32(arena + 3 * 4, 128);
    if (picks_submit(&c, name, "a local index one past its grid, its rows registered", agent, 10,
                     0, &lg, &rg, B10_ERR_INVALID_ARG, "local index 128 (at 3)"))
        goto out;
    frame_put_u32(arena + 3 * 4, 127);
    frame_put_u32(arena + 40 + 9 * 4, 256);
    if (picks_submit(&c, name, "a remote index one past its grid, its rows registered", agent, 10,
                     0, &lg, &rg, B10_ERR_INVALID_ARG, "remote index 256 (at 9)"))
        goto out;
    frame_put_u32(arena + 40 + 9 * 4, 4);
    if (picks_submit(&c, name, "a destination row picked twice", agent, 10, 0, &lg, &rg,
                     B10_ERR_INVALID_ARG, "overlap"))
        goto out;
    frame_put_u32(arena + 40 + 9 * 4, 255);
    if (picks_submit(&c, name, "picks of registered rows", agent, 10, 0, &lg, &rg, B10_OK, NULL))
        goto out;
    /* An arena of 9 MiB holds more picks than the daemon's default --max-spans (2^20). */
    big = sealed_memfd(9u << 20, true);
    if (big < 0 || arena_give(&c, name, "an arena of 9 MiB", 9u << 20, big, B10_OK) ||
        picks_submit(&c, name, "2^20 + 1 picks", agent, (1u << 20) + 1, 0, &lg, &rg,
                     B10_ERR_TOO_LARGE, "--max-spans"))
        goto out;
    bad = pass(name, "grids that are no grids, picks outside the arena or their grids refused "
               "with reasons, the connection kept; picks within them reach the registrations");
out:
    if (arena != MAP_FAILED)
        munmap(arena, size);
    if (m != NULL)
        b10__daemon_msg__free_unpacked(m, NULL);
    conn_close(&c);
    close(mfd);
    if (big >= 0)
        close(big);
    if (kv >= 0)
        close(kv);
    return bad;
}

/*
 * A forged VRAM registration: real memory of this process (a cudaMalloc
 * exported as an IPC handle, a VMM allocation exported as a descriptor)
 * that the frame says is far larger than it is. The daemon must take the
 * allocation's size from the driver and refuse, with both figures; the
 * same allocations registered as they are must be accepted. Without a
 * CUDA device there is nothing to forge: the case says so and holds.
 */
#ifdef B10_HAVE_CUDA
#define VRAM_CLAIM_REAL (2u << 20)

/* One VRAM RegisterMem on a fresh connection: its status, and detail. */
static int send_vram(const char *name, uint64_t addr, uint64_t length, uint64_t alloc_length,
                     const char *bus, const void *ipc, int fd, b10_status_t *st_p, char *detail,
                     size_t detail_len)
{
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;
    B10__RegisterMem reg = B10__REGISTER_MEM__INIT;
    struct conn c;
    int rc;

    if ((rc = conn_open(&c)) != 0)
        return fail(name, "connect: %s", strerror(-rc));
    if (hello(&c, name) != 0) {
        conn_close(&c);
        return 1;
    }
    reg.kind = B10__MEM_KIND__MEM_VRAM;
    reg.addr = addr;
    reg.length = length;
    reg.pci_bus_id = (char *)bus;
    reg.alloc_base = addr;
    reg.alloc_length = alloc_length;
    if (ipc != NULL)
        reg.cuda_ipc_handle = (ProtobufCBinaryData){ sizeof(cudaIpcMemHandle_t), (uint8_t *)ipc };
    reg.vmm_fd = fd >= 0;
    msg.body_case = B10__CLIENT_MSG__BODY_REGISTER_MEM;
    msg.register_mem = &reg;
    rc = send_msg(&c, &msg, fd);
    if (rc == 0)
        rc = get_reply(&c, name, st_p, detail, detail_len, NULL);
    conn_close(&c);
    if (rc > 0)
        return fail(name, "the daemon dropped the connection of a VRAM registration");
    return rc != 0;
}

/* Claim alloc_length of a real allocation: refused with the driver's size, or (honest) accepted. */
static int vram_claim(const char *name, const char *what, uint64_t addr, uint64_t claim,
                      const char *bus, const void *ipc, int fd, bool honest)
{
    b10_status_t st;
    char detail[256] = "", real[32];

    if (send_vram(name, addr, claim, claim, bus, ipc, fd, &st, detail, sizeof(detail)) != 0)
        return 1;
    if (honest)
        return st == B10_OK ? pass(name, "%s: accepted", what)
                            : fail(name, "%s: refused: %s: %s", what, b10_status_name(st), detail);
    snprintf(real, sizeof(real), "holds %u", VRAM_CLAIM_REAL);
    if (st == B10_OK)
        return fail(name, "%s: accepted a claim of %" PRIu64 " bytes", what, claim);
    if (strstr(detail, real) == NULL)
        return fail(name, "%s: refused %s, but not for the driver's size: %s", what,
                    b10_status_name(st), detail);
    return pass(name, "%s: refused: %s: %s", what, b10_status_name(st), detail);
}

/* A VMM allocation of VRAM_CLAIM_REAL bytes exported as a descriptor, or -1 (why says). */
static int vmm_export(int device, char *why, size_t why_len)
{
    PFN_cuMemCreate_v10020 create;
    PFN_cuMemExportToShareableHandle_v10020 export_;
    PFN_cuMemRelease_v10020 release;
    enum cudaDriverEntryPointQueryResult q;
    CUmemGenericAllocationHandle h;
    CUmemAllocationProp prop;
    int fd = -1;

    if (cudaGetDriverEntryPointByVersion("cuMemCreate", (void **)&create, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        cudaGetDriverEntryPointByVersion("cuMemExportToShareableHandle", (void **)&export_, 12000,
                                         cudaEnableDefault, &q) != cudaSuccess ||
        cudaGetDriverEntryPointByVersion("cuMemRelease", (void **)&release, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess) {
        snprintf(why, why_len, "the driver lacks the VMM calls");
        return -1;
    }
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CUresult r = create(&h, VRAM_CLAIM_REAL, &prop, 0);
    if (r != CUDA_SUCCESS) {
        snprintf(why, why_len, "cuMemCreate: CUDA driver error %d", (int)r);
        return -1;
    }
    r = export_(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    release(h);   /* the descriptor keeps the allocation */
    if (r != CUDA_SUCCESS) {
        snprintf(why, why_len, "cuMemExportToShareableHandle: CUDA driver error %d", (int)r);
        return -1;
    }
    return fd;
}

static int case_vramclaim(const char *name)
{
    char bus[32], why[128];
    int n = 0, bad = 0;
    void *p = NULL;
    cudaIpcMemHandle_t h;

    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
        return pass(name, "no CUDA device here: no VRAM to forge a registration of");
    if (cudaSetDevice(0) != cudaSuccess || cudaDeviceGetPCIBusId(bus, sizeof(bus), 0) != cudaSuccess ||
        cudaMalloc(&p, VRAM_CLAIM_REAL) != cudaSuccess || cudaIpcGetMemHandle(&h, p) != cudaSuccess)
        return fail(name, "could not make and export %u bytes of VRAM", VRAM_CLAIM_REAL);
    uint64_t a = (uint64_t)(uintptr_t)p;
    bad |= vram_claim(name, "a cudaMalloc of 2 MiB claimed as 1 GiB", a, 1u << 30, bus, &h, -1, false);
    bad |= vram_claim(name, "a cudaMalloc of 2 MiB claimed one byte larger", a, VRAM_CLAIM_REAL + 1,
                      bus, &h, -1, false);
    bad |= vram_claim(name, "the same cudaMalloc as it is", a, VRAM_CLAIM_REAL, bus, &h, -1, true);
    int fd = vmm_export(0, why, sizeof(why));
    if (fd < 0) {
        bad |= fail(name, "a VMM allocation: %s", why);
    } else {
        /* The address is only the client's name for it: the daemon maps the descriptor. */
        uint64_t va = UINT64_C(1) << 44;
        bad |= vram_claim(name, "a VMM allocation of 2 MiB claimed as 64 MiB", va, 64u << 20, bus,
                          NULL, fd, false);
        bad |= vram_claim(name, "the same VMM allocation as it is", va, VRAM_CLAIM_REAL, bus, NULL,
                          fd, true);
        close(fd);
    }
    cudaFree(p);
    return bad;
}
#else
static int case_vramclaim(const char *name)
{
    return pass(name, "built without CUDA: no VRAM to forge a registration of");
}
#endif

static const struct testout_case cases[] = {
    { "oversize-prehello", case_oversize_prehello },
    { "oversize", case_oversize },
    { "junk", case_junk },
    { "truncated", case_truncated },
    { "nohello", case_nohello },
    { "badreg", case_badreg },
    { "libreg", case_libreg },
    { "procreg", case_procreg },
    { "hugespan", case_hugespan },
    { "arena", case_arena },
    { "picks", case_picks },
    { "vramclaim", case_vramclaim },
    { "alive", case_alive },
};

/* Every case must leave the daemon serving. */
static int after_case(const char *name)
{
    return strcmp(name, "alive") != 0 && case_alive("alive") != 0;
}

int main(int argc, char **argv)
{
    size_t ncases = sizeof(cases) / sizeof(cases[0]);

    signal(SIGPIPE, SIG_IGN);
    int sock = testout_args(argc, argv, cases, ncases, &timeout_ms);
    if (sock < 0)
        return 2;
    sock_path = argv[sock];
    return testout_run(argv + sock + 1, argc - sock - 1, cases, ncases, after_case);
}
