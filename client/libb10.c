/*
 * libb10.c — the client library of b10d (see client/include/b10/b10.h).
 *
 * Object graph:
 *
 *   b10_conn_t            one Unix socket to the local b10d; owns everything below
 *    ├─ struct pending    one per request waiting for its Reply (lives on the
 *    │                    waiting thread's stack, linked here while it waits)
 *    ├─ b10_xfer_t        every transfer handle (list); those still in progress
 *    │                    are also in a hash table by xfer_id, where XferDone
 *    │                    notices find them
 *    ├─ b10_mem_t         every registered region (list), with what it takes to
 *    │                    register it again (a duplicate of its memfd)
 *    ├─ struct loaded     every remote agent descriptor loaded (list)
 *    └─ struct old_desc   this rank's descriptors of earlier daemon boots, kept
 *                         so that the pointers b10_agent_desc() gave stay valid
 *
 *   dram table            the only process-wide state: b10_dram_alloc()'s
 *                         allocations, so that b10_mem_register() can find the
 *                         memfd behind an address
 *
 * Threads: every field of a connection is guarded by conn->lock. The socket
 * is non-blocking. A thread that must wait for the daemon (a request's
 * reply, b10_xfer_wait) becomes the connection's single reader if nobody
 * reads yet: it polls with the lock released, then relocks, drains and
 * dispatches every complete frame and wakes the others. The other waiters
 * sleep on conn->cond meanwhile (leader/follower). Writes happen under the
 * lock so that frames never interleave.
 *
 * Surviving the daemon's restart: when the socket ends (EOF, a reset), the
 * daemon exited or dropped us. Everything in flight fails, with
 * B10_ERR_DAEMON_EXITED once the daemon's process ended (its pidfd turned
 * readable within EXIT_CONFIRM_MS), else with B10_ERR_DAEMON_LOST (it still
 * runs, or cannot be watched: its copies may still write), and the
 * connection reconnects as below; the socket's fd number is taken over by
 * a timer that turns readable when a reconnection is due, so that a caller
 * polling b10_conn_fd() (an epoll set of libb10's that holds whatever file
 * that number names now) wakes up for it instead of spinning on a dead
 * socket. The next call (or b10_conn_progress) connects again to the same
 * path, says hello, registers every region again and reloads every loaded
 * descriptor, under the lock, each step bounded by the request timeout;
 * the new socket takes the same fd number. While no daemon listens, every
 * call tries a connect() (cheap); an attempt the daemon refused backs off
 * (50 ms doubling to 2 s), and the timer paces pollers the same way. The
 * calls meanwhile return B10_ERR_DAEMON_EXITED with the reason in
 * b10_conn_detail().
 *
 * Everything the daemon sends is treated as hostile: frame lengths, status
 * values, body kinds, ids and strings are checked or bounded before use, and
 * a violation kills the connection with B10_ERR_PROTOCOL, never the process.
 */
#include <b10/b10.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "b10.pb-c.h"
#include "frame.h"
#include "vram.h"

#define DEFAULT_SOCKET_PATH     "/run/b10d/b10d.sock"
#define DEFAULT_REQUEST_TIMEOUT 30000          /* ms */
#define AGENT_NAME_MAX          255            /* bytes, as the header promises */
#define DETAIL_MAX              512            /* bytes kept of a daemon's explanation */
#define RECV_CHUNK              (64u << 10)    /* bytes read from the socket at once */
/*
 * Chunks drained per reading round. A daemon that floods us must not keep
 * one thread in the drain loop under the lock forever; what is left stays
 * readable and the next round takes it.
 */
#define RECV_ROUNDS             64
#define XFER_BUCKETS_INITIAL    64
#define NSEC_PER_MSEC           1000000LL
#define NSEC_PER_SEC            1000000000LL
#define DEADLINE_NEVER          INT64_MAX
/* Reconnecting after the daemon exited: first try at once, then back off up to this. */
#define REVIVE_BACKOFF_MIN      50             /* ms */
#define REVIVE_BACKOFF_MAX      2000           /* ms */
/* One connect() to a daemon coming back; its backlog may be full while it starts. */
#define REVIVE_CONNECT_MS       1000
/*
 * The socket ended: how long to wait for the daemon's process to end (its
 * pidfd readable) before deciding that it dropped us and still runs.
 */
#define EXIT_CONFIRM_MS         3000
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD            77
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open          434
#endif

/* One request waiting for its Reply. */
struct pending {
    uint64_t seq;
    B10__Reply__BodyCase expect;   /* body an OK reply must carry; NOT_SET: any */
    b10_xfer_t *xfer;              /* Submit only: enters the table when the reply is OK */
    B10__DaemonMsg *msg;           /* the reply, owned once done; NULL when the connection died */
    b10_status_t failed;           /* done without a reply: why */
    bool done;
    struct pending *next;
};

struct b10_xfer {
    b10_conn_t *conn;
    uint64_t id;                   /* the daemon's, from SubmitReply */
    uint64_t boot;                 /* conn->boot when submitted: a later boot never knew the id */
    b10_status_t status;           /* B10_IN_PROGRESS until XferDone or connection loss */
    char *detail;                  /* owned, NULL while none; set once, with the final status */
    bool in_table;                 /* still waiting for its XferDone */
    b10_xfer_times_t times;        /* the client's at submission, the daemon's from XferDone */
    b10_xfer_t *table_next;        /* hash chain */
    b10_xfer_t *prev, *next;       /* conn->xfers */
};

struct b10_mem {
    b10_conn_t *conn;
    uint64_t region_id;            /* the daemon's, from RegisterReply; renewed on reconnection */
    b10_mem_t *more;               /* VRAM across allocations: the next part's handle */
    b10_mem_t *prev, *next;        /* conn->mems */
    /* What registering it again with a restarted daemon takes. */
    b10_mem_kind_t kind;
    uint64_t addr, length;
    uint64_t fd_offset;
    int fd;                        /* DRAM memfd: our own duplicate, owned; else -1 */
    bool process_mem;              /* DRAM through /proc/self/mem, opened again each time */
    bool open;                     /* B10_MEM_OPEN_TO_NODE */
};

/* A remote agent descriptor loaded on this connection, reloaded after a reconnection. */
struct loaded {
    struct loaded *next;
    char name[256];
    uint8_t *desc;                 /* owned */
    size_t length;
    uint32_t grants;               /* B10_GRANT_* */
    /* Why the daemon refused it when libb10 connected again ("": it did not). */
    char refused[300];
};

/* This rank's descriptor of an earlier daemon boot: a caller may still hold the pointer. */
struct old_desc {
    struct old_desc *next;
    uint8_t *bytes;                /* owned */
};

/* A message notified to this rank, kept until b10_agent_notifications() takes it. */
struct notice {
    struct notice *next;
    char agent[AGENT_NAME_MAX + 1];
    void *data;
    size_t length;
};

#define NOTICES_MAX 65536          /* kept at once; past that new ones are dropped, and logged */

struct b10_conn {
    pthread_mutex_t lock;
    pthread_cond_t cond;           /* broadcast after each reading round and on death */
    int fd;                        /* the socket, O_NONBLOCK | O_CLOEXEC */
    int request_timeout_ms;
    void (*log_cb)(void *arg, int level, const char *line);
    void *log_arg;

    uint64_t next_seq;
    uint32_t max_frame;            /* bytes, the daemon's HelloReply.max_frame (bounded) */
    /*
     * The span arena (SpanArena in b10.proto): a large request's span
     * tables are written here, a memfd the daemon maps, and its frame
     * carries their count; a 100,000-span request no longer crosses the
     * socket as 3.2 MB read in 64 KiB turns and decoded into a copy.
     */
    bool daemon_arena;             /* the daemon reads one (HelloReply.span_arena) */
    bool daemon_grids;             /* and picked rows of grids (HelloReply.span_grids) */
    int arena_fd;                  /* -1 while none */
    uint8_t *arena;                /* its mapping, arena_len bytes */
    size_t arena_len;
    uint64_t arena_boot;           /* the boot the daemon was given it in; 0: none yet */
    bool unanswered;               /* the last request went out and its answer did not come */
    bool reading;                  /* a thread polls the socket with the lock released */
    b10_status_t dead;             /* B10_OK while usable, else what every call returns */

    /* Reconnection, while dead is B10_ERR_DAEMON_EXITED. */
    char *path;                    /* the socket path, owned */
    char agent_name[AGENT_NAME_MAX + 1];
    uint64_t boot;                 /* connections made so far: 1 after b10_conn_open */
    bool reviving;                 /* reviver is connecting again; the others wait */
    pthread_t reviver;
    int64_t retry_at;              /* CLOCK_MONOTONIC ns: the next attempt, not before */
    int backoff_ms;                /* 0 until an attempt failed */
    /*
     * The last attempt found nobody listening: a connect() costs next to
     * nothing, so any call tries again whatever the backoff, which then
     * only paces the timer (pollers) and the attempts the daemon refused.
     */
    bool absent;
    int timer_fd;                  /* stands in conn->fd's number while no socket does; -1 */
    /*
     * b10_conn_fd(): an epoll set holding whatever open file conn->fd names
     * now (the socket, or the timer), so that a caller's poll or epoll of it
     * follows the replacements (conn_watch after each).
     */
    int epoll_fd;
    /*
     * The daemon's process (SO_PEERPIDFD, else pidfd_open of SO_PEERCRED's
     * pid), -1 when its pid is not visible here (another pid namespace) or
     * the kernel has no pidfds. Readable once the process ended and with it
     * every file it held: then nothing of it can write our memory.
     */
    int daemon_pidfd;
    pid_t daemon_pid;              /* the socket's peer (SO_PEERCRED), 0 unknown */
    struct loaded *loaded;
    struct old_desc *old_descs;

    struct frame_reader reader;
    uint8_t *rbuf;                 /* RECV_CHUNK bytes */
    struct pending *pending;

    b10_xfer_t **buckets;          /* in-progress transfers by id */
    size_t nbuckets;               /* power of two */
    size_t ntable;
    b10_xfer_t *xfers;             /* every handle, for b10_conn_close */
    b10_mem_t *mems;

    struct notice *notices;        /* oldest first */
    struct notice **notices_tail;
    size_t nnotices;

    uint8_t *agent_desc;           /* owned, from HelloReply */
    uint64_t daemon_id;            /* the boot that gave it */
    size_t agent_desc_len;
    char detail[DETAIL_MAX];
};

/* ---------------------------------------------------------------- small helpers */

static int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

static int64_t deadline_after(int timeout_ms)
{
    if (timeout_ms < 0)
        return DEADLINE_NEVER;
    return now_ns() + (int64_t)timeout_ms * NSEC_PER_MSEC;
}

/* Milliseconds left until deadline for poll(): rounded up, -1 for never. */
static int poll_timeout(int64_t deadline)
{
    if (deadline == DEADLINE_NEVER)
        return -1;
    int64_t left = deadline - now_ns();
    if (left <= 0)
        return 0;
    int64_t ms = (left + NSEC_PER_MSEC - 1) / NSEC_PER_MSEC;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

static bool status_known(int value)
{
    switch (value) {
#define B10_STATUS_CASE(name, v, action, text) case v:
        B10_STATUS_MAP(B10_STATUS_CASE)
#undef B10_STATUS_CASE
        return true;
    }
    return false;
}

/*
 * Copy text from the daemon into dst, bounded, with control and non-ASCII
 * bytes replaced: a hostile detail must not smuggle escape sequences or
 * newlines into the caller's logs.
 */
static void copy_text(char *dst, size_t size, const char *src)
{
    size_t i = 0;

    if (src != NULL) {
        for (; src[i] != '\0' && i + 1 < size; i++) {
            unsigned char c = (unsigned char)src[i];
            dst[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
        }
    }
    dst[i] = '\0';
}

/* Agent names travel into the daemon's logs and tables: printable, no spaces. */
static bool agent_name_valid(const char *name)
{
    if (name == NULL || name[0] == '\0')
        return false;
    size_t n = strnlen(name, AGENT_NAME_MAX + 1);
    if (n > AGENT_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c <= 0x20 || c >= 0x7f)
            return false;
    }
    return true;
}

static b10_status_t status_from_errno(int err)
{
    return err == ENOMEM ? B10_ERR_NO_MEMORY : B10_ERR_IO;
}

/* ---------------------------------------------------------------- logging and detail */

static void conn_log(b10_conn_t *conn, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void conn_log(b10_conn_t *conn, int level, const char *fmt, ...)
{
    char line[DETAIL_MAX + 128];
    va_list ap;

    if (conn->log_cb == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    conn->log_cb(conn->log_arg, level, line);
}

/* Set the connection's detail; the caller holds the lock. */
static void conn_set_detail(b10_conn_t *conn, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void conn_set_detail(b10_conn_t *conn, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(conn->detail, sizeof(conn->detail), fmt, ap);
    va_end(ap);
}

/*
 * Refuse a call before it reaches the daemon: record why and return status.
 * Takes the lock itself; call it without the lock.
 */
static b10_status_t conn_reject(b10_conn_t *conn, b10_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static b10_status_t conn_reject(b10_conn_t *conn, b10_status_t status, const char *fmt, ...)
{
    va_list ap;

    pthread_mutex_lock(&conn->lock);
    va_start(ap, fmt);
    vsnprintf(conn->detail, sizeof(conn->detail), fmt, ap);
    va_end(ap);
    pthread_mutex_unlock(&conn->lock);
    return status;
}

/* ---------------------------------------------------------------- transfer table */

static size_t xfer_bucket(const b10_conn_t *conn, uint64_t id)
{
    /* Ids come from the daemon; a multiplicative hash spreads sequential ones. */
    return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 32) & (conn->nbuckets - 1);
}

static b10_xfer_t *xfer_table_find(b10_conn_t *conn, uint64_t id)
{
    for (b10_xfer_t *x = conn->buckets[xfer_bucket(conn, id)]; x != NULL; x = x->table_next)
        if (x->id == id)
            return x;
    return NULL;
}

/* Doubling keeps chains short; if memory is short, longer chains still work. */
static void xfer_table_grow(b10_conn_t *conn)
{
    size_t n = conn->nbuckets * 2;
    b10_xfer_t **buckets = calloc(n, sizeof(*buckets));

    if (buckets == NULL)
        return;
    b10_xfer_t **old = conn->buckets;
    size_t old_n = conn->nbuckets;
    conn->buckets = buckets;
    conn->nbuckets = n;
    for (size_t i = 0; i < old_n; i++) {
        b10_xfer_t *x = old[i];
        while (x != NULL) {
            b10_xfer_t *next = x->table_next;
            size_t b = xfer_bucket(conn, x->id);
            x->table_next = buckets[b];
            buckets[b] = x;
            x = next;
        }
    }
    free(old);
}

static void xfer_table_insert(b10_conn_t *conn, b10_xfer_t *xfer)
{
    if (conn->ntable >= conn->nbuckets)
        xfer_table_grow(conn);
    size_t b = xfer_bucket(conn, xfer->id);
    xfer->table_next = conn->buckets[b];
    conn->buckets[b] = xfer;
    xfer->in_table = true;
    conn->ntable++;
}

static void xfer_table_remove(b10_conn_t *conn, b10_xfer_t *xfer)
{
    if (!xfer->in_table)
        return;
    for (b10_xfer_t **pp = &conn->buckets[xfer_bucket(conn, xfer->id)]; *pp != NULL;
         pp = &(*pp)->table_next) {
        if (*pp == xfer) {
            *pp = xfer->table_next;
            break;
        }
    }
    xfer->table_next = NULL;
    xfer->in_table = false;
    conn->ntable--;
}

static void xfer_list_add(b10_conn_t *conn, b10_xfer_t *xfer)
{
    xfer->prev = NULL;
    xfer->next = conn->xfers;
    if (conn->xfers != NULL)
        conn->xfers->prev = xfer;
    conn->xfers = xfer;
}

static void xfer_list_remove(b10_conn_t *conn, b10_xfer_t *xfer)
{
    if (xfer->prev != NULL)
        xfer->prev->next = xfer->next;
    else
        conn->xfers = xfer->next;
    if (xfer->next != NULL)
        xfer->next->prev = xfer->prev;
}

static void xfer_free(b10_xfer_t *xfer)
{
    if (xfer == NULL)
        return;
    free(xfer->detail);
    free(xfer);
}

/*
 * Give the transfer its final status, once. If the copy of the detail fails
 * the status still lands; the detail is a courtesy.
 */
static void xfer_finish(b10_conn_t *conn, b10_xfer_t *xfer, b10_status_t status,
                        const char *detail)
{
    xfer_table_remove(conn, xfer);
    if (detail != NULL && detail[0] != '\0') {
        char *copy = malloc(DETAIL_MAX);
        if (copy != NULL) {
            copy_text(copy, DETAIL_MAX, detail);
            xfer->detail = copy;
        }
    }
    xfer->status = status;
}

/* ---------------------------------------------------------------- connection death */

/*
 * conn->fd's current open file joins b10_conn_fd()'s epoll set with events;
 * conn_unwatch takes it out before dup3 replaces that file (a file still
 * open elsewhere, the timer, would stay in the set under the old entry).
 */
static void conn_watch(b10_conn_t *conn, uint32_t events)
{
    struct epoll_event ev = { .events = events, .data.fd = conn->fd };
    if (conn->epoll_fd < 0 || conn->fd < 0)
        return;
    if (epoll_ctl(conn->epoll_fd, EPOLL_CTL_MOD, conn->fd, &ev) < 0 && errno == ENOENT)
        (void)epoll_ctl(conn->epoll_fd, EPOLL_CTL_ADD, conn->fd, &ev);
}

static void conn_unwatch(b10_conn_t *conn)
{
    if (conn->epoll_fd >= 0 && conn->fd >= 0)
        (void)epoll_ctl(conn->epoll_fd, EPOLL_CTL_DEL, conn->fd, NULL);
}

/* For good: the shut-down socket is readable; the caller hears it once, not in a spin. */
static void conn_shut(b10_conn_t *conn)
{
    shutdown(conn->fd, SHUT_RDWR);
    conn_watch(conn, EPOLLIN | EPOLLONESHOT);
}

/*
 * The daemon went: conn->fd's number now names a timer that turns readable
 * at conn->retry_at, when the next reconnection is due. A caller that polls
 * b10_conn_fd() then calls b10_conn_progress(), which makes the attempt; a
 * dead socket would keep its poll readable and spin it meanwhile. Without
 * a timer the socket is only shut down, and the poll spins.
 */
static void conn_park(b10_conn_t *conn)
{
    if (conn->timer_fd < 0)
        conn->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (conn->timer_fd < 0) {
        conn_shut(conn);
        return;
    }
    int64_t at = conn->retry_at > 0 ? conn->retry_at : 1;   /* 0 would disarm it */
    struct itimerspec its = { .it_value = { .tv_sec = at / NSEC_PER_SEC,
                                            .tv_nsec = at % NSEC_PER_SEC } };
    (void)timerfd_settime(conn->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
    conn_unwatch(conn);
    if (conn->fd != conn->timer_fd && dup3(conn->timer_fd, conn->fd, O_CLOEXEC) < 0) {
        conn_shut(conn);
        return;
    }
    conn_watch(conn, EPOLLIN);
}

/*
 * The connection is unusable from now on: the stream broke or the daemon
 * spoke garbage. Every transfer still waiting learns it, every later call
 * returns status, and the socket is shut down so that the daemon fails our
 * transfers (client gone) instead of waiting for us. The fd stays open: the
 * caller may have it in a poll set, and b10_conn_close() closes it.
 */
static void conn_kill_v(b10_conn_t *conn, b10_status_t status, b10_status_t inflight,
                        const char *fmt, va_list ap)
{
    if (conn->dead != B10_OK)
        return;
    conn->dead = status;
    vsnprintf(conn->detail, sizeof(conn->detail), fmt, ap);
    conn_log(conn, B10_LOG_ERR, "daemon connection unusable: %s", conn->detail);
    for (size_t i = 0; i < conn->nbuckets; i++) {
        while (conn->buckets[i] != NULL)
            xfer_finish(conn, conn->buckets[i], inflight, conn->detail);
    }
    /* Requests waiting for a reply get none: they return what the transfers got. */
    while (conn->pending != NULL) {
        struct pending *p = conn->pending;
        conn->pending = p->next;
        p->next = NULL;
        p->msg = NULL;
        p->failed = inflight;
        p->done = true;
    }
    if (status == B10_ERR_DAEMON_EXITED) {
        conn->retry_at = now_ns() + (int64_t)conn->backoff_ms * NSEC_PER_MSEC;
        conn_park(conn);
    } else {
        conn_shut(conn);
    }
    pthread_cond_broadcast(&conn->cond);
}

static void conn_kill(b10_conn_t *conn, b10_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void conn_kill(b10_conn_t *conn, b10_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    conn_kill_v(conn, status, status, fmt, ap);
    va_end(ap);
}

/* Dead as after an exit (it connects again), but what was in flight fails inflight. */
static void conn_kill2(b10_conn_t *conn, b10_status_t inflight, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void conn_kill2(b10_conn_t *conn, b10_status_t inflight, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    conn_kill_v(conn, B10_ERR_DAEMON_EXITED, inflight, fmt, ap);
    va_end(ap);
}

/*
 * The socket ended (how: EOF, a reset). That alone does not say the
 * daemon stopped writing: it also drops a client that reads nothing or
 * sends garbage while its copies into that client's memory run on, and a
 * killed process may close its socket before its other files. Only its
 * process ending (the pidfd readable, waited for up to EXIT_CONFIRM_MS)
 * says that nothing of it writes any more: then what was in flight fails
 * B10_ERR_DAEMON_EXITED. Otherwise it fails B10_ERR_DAEMON_LOST, which
 * claims nothing about the bytes. Either way libb10 connects again.
 * Called with the lock held; the wait holds it.
 */
static void conn_gone(b10_conn_t *conn, const char *how)
{
    if (conn->dead != B10_OK)
        return;
    /* Nothing in flight (a reconnection's own requests are not the caller's): nothing to tell. */
    if (conn->reviving || (conn->ntable == 0 && conn->pending == NULL)) {
        conn_kill(conn, B10_ERR_DAEMON_EXITED, "the daemon closed the connection (%s)", how);
        return;
    }
    int r = -1;
    if (conn->daemon_pidfd >= 0) {
        struct pollfd pfd = { .fd = conn->daemon_pidfd, .events = POLLIN };
        int64_t deadline = deadline_after(EXIT_CONFIRM_MS);
        do
            r = poll(&pfd, 1, poll_timeout(deadline));
        while (r < 0 && errno == EINTR);
    }
    if (r > 0) {
        conn_kill(conn, B10_ERR_DAEMON_EXITED, "the daemon exited (%s)", how);
        return;
    }
    /* Dead as after an exit, so that it connects again; the transfers claim nothing. */
    if (conn->daemon_pidfd < 0)
        conn_kill2(conn, B10_ERR_DAEMON_LOST, "the daemon closed the connection (%s), and its "
                   "process cannot be watched from here: copies it began may still write; "
                   "what was in flight may or may not land", how);
    else
        conn_kill2(conn, B10_ERR_DAEMON_LOST, "the daemon closed the connection (%s), but its "
                   "process still runs after %d ms: it dropped this rank, and copies it began "
                   "may still write; what was in flight may or may not land", how,
                   EXIT_CONFIRM_MS);
}

/* ---------------------------------------------------------------- writing */

/* One sendmsg() of what iov holds; pass_fd (or -1) rides on its bytes. */
static ssize_t send_iov(int fd, struct iovec *iov, int niov, int pass_fd)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int))];
    } control;
    struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)niov };

    if (pass_fd < 0)
        return sendmsg(fd, &mh, MSG_NOSIGNAL);
    memset(&control, 0, sizeof(control));
    mh.msg_control = control.buf;
    mh.msg_controllen = sizeof(control.buf);
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
    return sendmsg(fd, &mh, MSG_NOSIGNAL);
}

/*
 * Write one whole frame, under the lock, waiting for room with poll() until
 * deadline. pass_fd (or -1) rides on the first sendmsg() that moves bytes:
 * the kernel attaches it to exactly those bytes, so the daemon receives it
 * with the start of this frame. A frame cut in the middle breaks the stream
 * for good, so that kills the connection; a frame not started is only a
 * failed request.
 */
static b10_status_t conn_send(b10_conn_t *conn, const struct frame_iov *frame, int pass_fd,
                              int64_t deadline)
{
    struct iovec iov[FRAME_IOV_MAX];
    int at = 0, niov = frame->niov;
    size_t sent = 0;

    memcpy(iov, frame->iov, sizeof(iov[0]) * (size_t)niov);
    while (sent < frame->length) {
        ssize_t n = send_iov(conn->fd, iov + at, niov - at, sent == 0 ? pass_fd : -1);
        if (n > 0) {
            sent += (size_t)n;
            /* Past what went: whole parts dropped, the part cut short moved on. */
            for (size_t left = (size_t)n; left > 0 && at < niov;) {
                size_t take = left < iov[at].iov_len ? left : iov[at].iov_len;
                iov[at].iov_base = (uint8_t *)iov[at].iov_base + take;
                iov[at].iov_len -= take;
                left -= take;
                if (iov[at].iov_len == 0)
                    at++;
            }
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
            /* This frame never reaches it; what else was in flight, conn_gone says. */
            conn_gone(conn, strerror(errno));
            return B10_ERR_DAEMON_EXITED;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            conn_kill(conn, B10_ERR_DAEMON_LOST, "writing to the daemon: %s", strerror(errno));
            return B10_ERR_DAEMON_LOST;
        }
        struct pollfd pfd = { .fd = conn->fd, .events = POLLOUT };
        int r = poll(&pfd, 1, poll_timeout(deadline));
        if (r < 0 && errno != EINTR) {
            conn_kill(conn, B10_ERR_DAEMON_LOST, "polling the daemon socket: %s",
                      strerror(errno));
            return B10_ERR_DAEMON_LOST;
        }
        if (r == 0) {
            if (sent > 0) {
                conn_kill(conn, B10_ERR_DAEMON_LOST,
                          "daemon stopped reading in the middle of a request (%d ms)",
                          conn->request_timeout_ms);
                return B10_ERR_DAEMON_LOST;
            }
            conn_set_detail(conn, "daemon did not accept the request within %d ms",
                            conn->request_timeout_ms);
            return B10_ERR_IO;
        }
    }
    return B10_OK;
}

/* ---------------------------------------------------------------- reading and dispatch */

static struct pending *pending_take(b10_conn_t *conn, uint64_t seq)
{
    for (struct pending **pp = &conn->pending; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->seq == seq) {
            struct pending *p = *pp;
            *pp = p->next;
            p->next = NULL;
            return p;
        }
    }
    return NULL;
}

static void pending_unlink(b10_conn_t *conn, struct pending *p)
{
    for (struct pending **pp = &conn->pending; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            p->next = NULL;
            return;
        }
    }
}

/*
 * An OK reply to a Submit puts the handle into the table here, while the
 * lock is still held: the XferDone for it may be the very next frame of
 * this drain, before the submitting thread wakes.
 */
static bool dispatch_submit_reply(b10_conn_t *conn, struct pending *p, const B10__Reply *reply)
{
    uint64_t id = reply->submit->xfer_id;

    if (xfer_table_find(conn, id) != NULL) {
        conn_kill(conn, B10_ERR_PROTOCOL, "daemon reused transfer id %llu",
                  (unsigned long long)id);
        return false;
    }
    p->xfer->id = id;
    p->xfer->boot = conn->boot;
    xfer_table_insert(conn, p->xfer);
    xfer_list_add(conn, p->xfer);
    return true;
}

/* Takes ownership of msg. */
static void dispatch_reply(b10_conn_t *conn, B10__DaemonMsg *msg)
{
    const B10__Reply *reply = msg->reply;

    if (!status_known(reply->status) || reply->status == B10__STATUS__IN_PROGRESS) {
        conn_kill(conn, B10_ERR_PROTOCOL, "daemon replied with status %d", (int)reply->status);
        goto free_msg;
    }
    struct pending *p = pending_take(conn, reply->seq);
    if (p == NULL)
        goto free_msg;   /* a request that timed out, or a ReleaseXfer: nobody waits */
    if (reply->status == B10__STATUS__OK && p->expect != B10__REPLY__BODY__NOT_SET &&
        reply->body_case != p->expect) {
        conn_kill(conn, B10_ERR_PROTOCOL, "daemon reply %llu carries body %d, expected %d",
                  (unsigned long long)reply->seq, (int)reply->body_case, (int)p->expect);
        goto free_msg;
    }
    if (reply->status == B10__STATUS__OK && p->xfer != NULL &&
        !dispatch_submit_reply(conn, p, reply))
        goto free_msg;
    p->msg = msg;
    p->done = true;
    return;

free_msg:
    b10__daemon_msg__free_unpacked(msg, NULL);
}

static void dispatch_done(b10_conn_t *conn, const B10__XferDone *done)
{
    if (!status_known(done->status) || done->status == B10__STATUS__IN_PROGRESS) {
        conn_kill(conn, B10_ERR_PROTOCOL, "daemon finished transfer %llu with status %d",
                  (unsigned long long)done->xfer_id, (int)done->status);
        return;
    }
    b10_xfer_t *xfer = xfer_table_find(conn, done->xfer_id);
    if (xfer == NULL)
        return;   /* released, or a duplicate notice: its outcome is nobody's */
    const B10__XferTimes *t = done->times;
    if (t != NULL) {
        /* Plain numbers, read by no one but the caller: nothing to bound. */
        xfer->times.received_ns = t->received_ns;
        xfer->times.decoded_ns = t->decoded_ns;
        xfer->times.accepted_ns = t->accepted_ns;
        xfer->times.first_ns = t->first_ns;
        xfer->times.ended_ns = t->ended_ns;
        xfer->times.bytes = t->bytes;
        xfer->times.spans = t->spans;
        xfer->times.plan_ns = t->plan_ns;
        xfer->times.field_mask |= B10_XFER_TIMES_DAEMON | (t->first_ns ? B10_XFER_TIMES_FIRST : 0);
    }
    xfer_finish(conn, xfer, (b10_status_t)done->status, done->detail);
}

static void dispatch_notice(b10_conn_t *conn, const B10__Notice *notice)
{
    size_t name = strnlen(notice->from_agent, AGENT_NAME_MAX + 1);

    if (name == 0 || name > AGENT_NAME_MAX || notice->message.len > B10_SYNC_MSG_MAX) {
        conn_kill(conn, B10_ERR_PROTOCOL, "malformed notice from the daemon");
        return;
    }
    if (conn->nnotices >= NOTICES_MAX) {
        conn_log(conn, B10_LOG_WARNING, "dropping a message from %s: %d are waiting to be taken",
                 notice->from_agent, NOTICES_MAX);
        return;
    }
    struct notice *n = calloc(1, sizeof(*n));
    if (n == NULL || (n->data = malloc(notice->message.len ? notice->message.len : 1)) == NULL) {
        free(n);
        conn_log(conn, B10_LOG_ERR, "out of memory: dropping a message from %s", notice->from_agent);
        return;
    }
    memcpy(n->agent, notice->from_agent, name);
    /* An empty message has no data at all (protobuf-c leaves it NULL): nothing to copy. */
    if (notice->message.len > 0)
        memcpy(n->data, notice->message.data, notice->message.len);
    n->length = notice->message.len;
    *conn->notices_tail = n;
    conn->notices_tail = &n->next;
    conn->nnotices++;
}

static void dispatch_frame(b10_conn_t *conn, const uint8_t *payload, uint32_t len)
{
    B10__DaemonMsg *msg = b10__daemon_msg__unpack(NULL, len, payload);

    if (msg == NULL) {
        conn_kill(conn, B10_ERR_PROTOCOL, "undecodable %u-byte message from the daemon", len);
        return;
    }
    switch (msg->body_case) {
    case B10__DAEMON_MSG__BODY_REPLY:
        dispatch_reply(conn, msg);
        return;
    case B10__DAEMON_MSG__BODY_DONE:
        dispatch_done(conn, msg->done);
        break;
    case B10__DAEMON_MSG__BODY_NOTICE:
        dispatch_notice(conn, msg->notice);
        break;
    default:
        conn_kill(conn, B10_ERR_PROTOCOL, "daemon message without a known body (%d)",
                  (int)msg->body_case);
        break;
    }
    b10__daemon_msg__free_unpacked(msg, NULL);
}

/* Feed n received bytes to the frame reader, dispatching each whole frame. */
static void conn_feed(b10_conn_t *conn, const uint8_t *data, size_t n)
{
    size_t off = 0;

    while (off < n && conn->dead == B10_OK) {
        size_t used = 0;
        enum frame_result r = frame_reader_feed(&conn->reader, data + off, n - off, &used);
        off += used;
        switch (r) {
        case FRAME_MORE:
            break;
        case FRAME_READY: {
            uint32_t len;
            uint8_t *payload = frame_reader_take(&conn->reader, &len);
            dispatch_frame(conn, payload, len);
            free(payload);
            break;
        }
        case FRAME_TOO_LARGE:
            conn_kill(conn, B10_ERR_PROTOCOL, "daemon announced a %u-byte frame, limit %u",
                      conn->reader.length, conn->reader.max);
            break;
        case FRAME_NO_MEMORY:
            conn_kill(conn, B10_ERR_DAEMON_LOST,
                      "out of memory for a %u-byte frame from the daemon", conn->reader.length);
            break;
        }
    }
}

/*
 * Read whatever the socket holds, without blocking, and dispatch it. The
 * caller holds the lock; waiters are woken by the caller.
 */
static void conn_drain(b10_conn_t *conn)
{
    for (int round = 0; round < RECV_ROUNDS && conn->dead == B10_OK; round++) {
        ssize_t n = recv(conn->fd, conn->rbuf, RECV_CHUNK, 0);
        if (n > 0) {
            conn_feed(conn, conn->rbuf, (size_t)n);
            continue;
        }
        /* The daemon exited, or dropped us: conn_gone tells which. */
        if (n == 0 || errno == ECONNRESET) {
            conn_gone(conn, n == 0 ? "end of stream" : strerror(errno));
            return;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return;
        conn_kill(conn, B10_ERR_DAEMON_LOST, "reading from the daemon: %s", strerror(errno));
        return;
    }
}

/*
 * Make progress towards whatever the caller waits for, until deadline at
 * the latest: become the reader if nobody reads, else sleep until the
 * reader has finished a round. Called with the lock held; returns with it
 * held, having released it in between.
 */
static void conn_wait_round(b10_conn_t *conn, int64_t deadline)
{
    if (conn->reading) {
        if (deadline == DEADLINE_NEVER) {
            pthread_cond_wait(&conn->cond, &conn->lock);
        } else {
            struct timespec ts = { .tv_sec = deadline / NSEC_PER_SEC,
                                   .tv_nsec = deadline % NSEC_PER_SEC };
            pthread_cond_timedwait(&conn->cond, &conn->lock, &ts);
        }
        return;
    }
    conn->reading = true;
    pthread_mutex_unlock(&conn->lock);
    struct pollfd pfd = { .fd = conn->fd, .events = POLLIN };
    int r = poll(&pfd, 1, poll_timeout(deadline));
    int err = errno;
    pthread_mutex_lock(&conn->lock);
    conn->reading = false;
    if (r > 0)
        conn_drain(conn);
    else if (r < 0 && err != EINTR)
        conn_kill(conn, B10_ERR_DAEMON_LOST, "polling the daemon socket: %s", strerror(err));
    pthread_cond_broadcast(&conn->cond);
}

/* ---------------------------------------------------------------- requests */

static void conn_settle(b10_conn_t *conn, bool wait);

/*
 * Send msg (assigning its seq) and wait for the Reply. On B10_OK, *reply_p
 * (if not NULL) receives the decoded message, which the caller frees with
 * b10__daemon_msg__free_unpacked. A failure status from the daemon is
 * returned with its detail in conn->detail. For a Submit, xfer is the
 * handle that enters the table when the daemon accepts.
 * Called with the lock held.
 */
static b10_status_t conn_request(b10_conn_t *conn, B10__ClientMsg *msg, int pass_fd,
                                 B10__Reply__BodyCase expect, b10_xfer_t *xfer,
                                 B10__DaemonMsg **reply_p)
{
    struct pending p = { .expect = expect, .xfer = xfer };
    int64_t deadline = deadline_after(conn->request_timeout_ms);
    struct frame_iov frame;
    b10_status_t status;

    conn_settle(conn, true);
    if (conn->dead != B10_OK)
        return conn->dead;
    /* The seq is spent only once the frame exists: the daemon sees 1, 2, 3 … without gaps. */
    msg->seq = conn->next_seq;
    p.seq = msg->seq;
    int rc = frame_encode_iov(&msg->base, conn->max_frame, &frame);
    if (rc == -EMSGSIZE) {
        conn_set_detail(conn, "request of %zu bytes exceeds the daemon's limit of %u bytes",
                        protobuf_c_message_get_packed_size(&msg->base), conn->max_frame);
        return B10_ERR_TOO_LARGE;
    }
    if (rc < 0) {
        conn_set_detail(conn, "out of memory encoding a request");
        return B10_ERR_NO_MEMORY;
    }
    conn->next_seq++;
    p.next = conn->pending;
    conn->pending = &p;
    if (xfer != NULL)
        xfer->times.encoded_ns = (uint64_t)now_ns();
    conn->unanswered = false;
    status = conn_send(conn, &frame, pass_fd, deadline);
    frame_iov_free(&frame);
    if (status != B10_OK)
        goto unlink;
    if (xfer != NULL)
        xfer->times.sent_ns = (uint64_t)now_ns();

    while (!p.done && conn->dead == B10_OK && now_ns() < deadline)
        conn_wait_round(conn, deadline);
    if (!p.done) {
        if (conn->dead != B10_OK) {
            status = conn->dead;
        } else if (expect == B10__REPLY__BODY_SUBMIT) {
            /*
             * A stopped or stalled daemon may still read this submit and run it: a
             * failure that claimed it did not (a retry, its memory reused) would be
             * written into later. So it claims nothing, and the connection is closed
             * behind it: the daemon then reads the submit with its client gone and
             * fails it, instead of running it to its deadline unheard.
             */
            pending_unlink(conn, &p);
            conn->unanswered = true;
            conn_kill2(conn, B10_ERR_DAEMON_LOST, "the daemon did not answer a submit within "
                       "%d ms: it may still take it, so the connection was closed; what was "
                       "in flight may or may not land", conn->request_timeout_ms);
            return B10_ERR_DAEMON_LOST;
        } else {
            conn_set_detail(conn, "daemon did not answer within %d ms",
                            conn->request_timeout_ms);
            conn->unanswered = true;
            status = B10_ERR_IO;
        }
        goto unlink;
    }

    if (p.msg == NULL)
        return p.failed;   /* the connection died first; conn_kill unlinked p and said why */
    const B10__Reply *reply = p.msg->reply;
    if (reply->status != B10__STATUS__OK) {
        copy_text(conn->detail, sizeof(conn->detail), reply->detail);
        status = (b10_status_t)reply->status;
        b10__daemon_msg__free_unpacked(p.msg, NULL);
        return status;
    }
    if (reply_p != NULL)
        *reply_p = p.msg;
    else
        b10__daemon_msg__free_unpacked(p.msg, NULL);
    return B10_OK;

unlink:
    pending_unlink(conn, &p);
    return status;
}

/* ---------------------------------------------------------------- connection */

/*
 * conn->daemon_pidfd: the process at the other end of the socket fd, or -1
 * (conn_gone then cannot confirm an exit). A pid of 0 is one of another pid
 * namespace.
 */
static void conn_watch_daemon(b10_conn_t *conn, int fd)
{
    int pidfd = -1;
    struct ucred cred = { 0 };
    socklen_t len = sizeof(cred);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || len != sizeof(cred))
        cred.pid = 0;
    len = sizeof(pidfd);
    if (cred.pid > 0 &&
        (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0 || len != sizeof(pidfd)))
        pidfd = (int)syscall(SYS_pidfd_open, cred.pid, 0);
    conn->daemon_pid = pidfd >= 0 ? cred.pid : 0;
    if (pidfd >= 0)
        (void)fcntl(pidfd, F_SETFD, FD_CLOEXEC);
    else
        conn_log(conn, B10_LOG_INFO, "the daemon's process cannot be watched here: a closed "
                 "connection will not be taken for its exit");
    if (conn->daemon_pidfd >= 0)
        close(conn->daemon_pidfd);
    conn->daemon_pidfd = pidfd;
}

/* A connected, non-blocking socket to the daemon at conn->path in *fd_p. */
static b10_status_t conn_dial(b10_conn_t *conn, int timeout_ms, int *fd_p)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    const char *path = conn->path;
    /*
     * connect() on a Unix socket waits while the daemon's backlog is full;
     * SO_SNDTIMEO bounds that wait. The socket turns non-blocking after.
     */
    struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
    b10_status_t status;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        conn_log(conn, B10_LOG_ERR, "socket path %s is longer than %zu bytes", path,
                 sizeof(sa.sun_path) - 1);
        return B10_ERR_INVALID_ARG;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        conn_log(conn, B10_LOG_ERR, "socket: %s", strerror(errno));
        return status_from_errno(errno);
    }
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        conn_set_detail(conn, "connect to %s: %s", path, strerror(errno));
        conn_log(conn, B10_LOG_ERR, "%s", conn->detail);
        status = B10_ERR_DAEMON_UNREACHABLE;
        goto close_fd;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        conn_log(conn, B10_LOG_ERR, "fcntl O_NONBLOCK: %s", strerror(errno));
        status = B10_ERR_IO;
        goto close_fd;
    }
    conn_watch_daemon(conn, fd);
    *fd_p = fd;
    return B10_OK;

close_fd:
    close(fd);
    return status;
}

/*
 * Hello: the daemon names us, tells its limits and gives our descriptor.
 * Called with the lock held. A descriptor of an earlier boot is kept until
 * b10_conn_close: the caller may still hold the pointer to it.
 */
static b10_status_t conn_hello(b10_conn_t *conn)
{
    B10__Hello hello = B10__HELLO__INIT;
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;
    B10__DaemonMsg *reply;
    b10_status_t status;

    hello.version = B10_API_VERSION;
    hello.agent_name = conn->agent_name;
    msg.body_case = B10__CLIENT_MSG__BODY_HELLO;
    msg.hello = &hello;
    status = conn_request(conn, &msg, -1, B10__REPLY__BODY_HELLO, NULL, &reply);
    if (status != B10_OK) {
        conn_log(conn, B10_LOG_ERR, "hello refused: %s: %s", b10_status_name(status),
                 conn->detail);
        return status;
    }
    /*
     * Garbage right behind the HelloReply arrives in the same read: a
     * connection that died while the reply was in hand is not handed out.
     */
    if (conn->dead != B10_OK) {
        status = conn->dead;
        goto free_reply;
    }
    const B10__HelloReply *hr = reply->reply->hello;
    if (hr->version != B10_API_VERSION) {
        conn_log(conn, B10_LOG_ERR, "daemon speaks protocol version %u, this library %d",
                 hr->version, B10_API_VERSION);
        status = B10_ERR_VERSION;
        goto free_reply;
    }
    if (hr->pid != 0 && conn->daemon_pidfd >= 0 && hr->pid != (uint32_t)conn->daemon_pid) {
        conn_log(conn, B10_LOG_INFO, "the daemon is process %u, the socket's peer %d (socket "
                 "activation, or another pid namespace): its exit cannot be watched",
                 hr->pid, (int)conn->daemon_pid);
        close(conn->daemon_pidfd);
        conn->daemon_pidfd = -1;
    }
    /* 0 means the daemon left it unset; the library's default then holds. */
    uint64_t max = hr->max_frame == 0 ? FRAME_MAX_DEFAULT : hr->max_frame;
    conn->max_frame = max > FRAME_MAX_LIMIT ? FRAME_MAX_LIMIT : (uint32_t)max;
    conn->reader.max = conn->max_frame;
    conn->daemon_arena = hr->span_arena;
    conn->daemon_grids = hr->span_grids;
    /*
     * The same boot again (it dropped us, or an attempt failed after the
     * hello): the descriptor held is still its own; only a new boot's
     * replaces it, the old one's bytes kept for a caller still holding them.
     */
    bool same_boot = conn->agent_desc != NULL && hr->daemon_id == conn->daemon_id;
    conn->daemon_id = hr->daemon_id;
    if (hr->agent_desc.len > 0 && !same_boot) {
        uint8_t *desc = malloc(hr->agent_desc.len);
        struct old_desc *old = conn->agent_desc != NULL ? malloc(sizeof(*old)) : NULL;
        if (desc == NULL || (conn->agent_desc != NULL && old == NULL)) {
            free(desc);
            free(old);
            status = B10_ERR_NO_MEMORY;
            goto free_reply;
        }
        memcpy(desc, hr->agent_desc.data, hr->agent_desc.len);
        if (old != NULL) {
            old->bytes = conn->agent_desc;
            old->next = conn->old_descs;
            conn->old_descs = old;
        }
        conn->agent_desc = desc;
        conn->agent_desc_len = hr->agent_desc.len;
    }
    conn_log(conn, B10_LOG_DEBUG, "connected to daemon %016llx, max frame %u bytes",
             (unsigned long long)hr->daemon_id, conn->max_frame);
free_reply:
    b10__daemon_msg__free_unpacked(reply, NULL);
    return status;
}

static void conn_free(b10_conn_t *conn)
{
    if (conn == NULL)
        return;
    if (conn->arena != NULL)
        munmap(conn->arena, conn->arena_len);
    if (conn->arena_fd >= 0)
        close(conn->arena_fd);
    while (conn->xfers != NULL) {
        b10_xfer_t *x = conn->xfers;
        conn->xfers = x->next;
        xfer_free(x);
    }
    while (conn->mems != NULL) {
        b10_mem_t *m = conn->mems;
        conn->mems = m->next;
        if (m->fd >= 0)
            close(m->fd);
        free(m);
    }
    while (conn->loaded != NULL) {
        struct loaded *l = conn->loaded;
        conn->loaded = l->next;
        free(l->desc);
        free(l);
    }
    while (conn->old_descs != NULL) {
        struct old_desc *o = conn->old_descs;
        conn->old_descs = o->next;
        free(o->bytes);
        free(o);
    }
    while (conn->notices != NULL) {
        struct notice *n = conn->notices;
        conn->notices = n->next;
        free(n->data);
        free(n);
    }
    if (conn->fd >= 0)
        close(conn->fd);
    if (conn->timer_fd >= 0)
        close(conn->timer_fd);
    if (conn->daemon_pidfd >= 0)
        close(conn->daemon_pidfd);
    if (conn->epoll_fd >= 0)
        close(conn->epoll_fd);
    free(conn->path);
    frame_reader_free(&conn->reader);
    free(conn->agent_desc);
    free(conn->buckets);
    free(conn->rbuf);
    pthread_cond_destroy(&conn->cond);
    pthread_mutex_destroy(&conn->lock);
    free(conn);
}

/* The allocations and the lock primitives; no I/O yet. */
static b10_conn_t *conn_alloc(const b10_conn_params_t *params)
{
    b10_conn_t *conn = calloc(1, sizeof(*conn));
    pthread_condattr_t ca;

    if (conn != NULL)
        conn->notices_tail = &conn->notices;

    if (conn == NULL)
        return NULL;
    conn->fd = -1;
    conn->timer_fd = -1;
    conn->arena_fd = -1;
    conn->epoll_fd = -1;
    conn->daemon_pidfd = -1;
    conn->next_seq = 1;
    conn->max_frame = FRAME_MAX_DEFAULT;
    conn->request_timeout_ms = DEFAULT_REQUEST_TIMEOUT;
    if (params->field_mask & B10_CONN_FIELD_REQUEST_TIMEOUT)
        conn->request_timeout_ms = params->request_timeout_ms;
    if (params->field_mask & B10_CONN_FIELD_LOG) {
        conn->log_cb = params->log_cb;
        conn->log_arg = params->log_arg;
    }
    frame_reader_init(&conn->reader, FRAME_MAX_DEFAULT);
    if (pthread_mutex_init(&conn->lock, NULL) != 0)
        goto free_conn;
    /* Deadlines are monotonic; the condvar must measure the same clock. */
    if (pthread_condattr_init(&ca) != 0)
        goto destroy_lock;
    if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&conn->cond, &ca) != 0) {
        pthread_condattr_destroy(&ca);
        goto destroy_lock;
    }
    pthread_condattr_destroy(&ca);
    conn->rbuf = malloc(RECV_CHUNK);
    conn->nbuckets = XFER_BUCKETS_INITIAL;
    conn->buckets = calloc(conn->nbuckets, sizeof(*conn->buckets));
    if (conn->rbuf == NULL || conn->buckets == NULL)
        goto destroy_cond;
    return conn;

destroy_cond:
    free(conn->rbuf);
    free(conn->buckets);
    pthread_cond_destroy(&conn->cond);
destroy_lock:
    pthread_mutex_destroy(&conn->lock);
free_conn:
    free(conn);
    return NULL;
}

/*
 * A refused b10_conn_open has no connection to keep a detail in; the log
 * callback, if any, is the only place to say why.
 */
static b10_status_t open_reject(const b10_conn_params_t *params, const char *why)
{
    if ((params->field_mask & B10_CONN_FIELD_LOG) && params->log_cb != NULL)
        params->log_cb(params->log_arg, B10_LOG_ERR, why);
    return B10_ERR_INVALID_ARG;
}

b10_status_t b10_conn_open(const b10_conn_params_t *params, b10_conn_t **conn_p)
{
    b10_status_t status;

    if (params == NULL || conn_p == NULL)
        return B10_ERR_INVALID_ARG;
    if (!agent_name_valid(params->agent_name))
        return open_reject(params, "agent name must be 1 to 255 bytes of printable ASCII "
                                   "without spaces");
    if ((params->field_mask & B10_CONN_FIELD_REQUEST_TIMEOUT) && params->request_timeout_ms <= 0)
        return open_reject(params, "request timeout must be positive");
    if ((params->field_mask & B10_CONN_FIELD_SOCKET_PATH) &&
        (params->socket_path == NULL || params->socket_path[0] == '\0'))
        return open_reject(params, "socket path is empty");

    const char *path = DEFAULT_SOCKET_PATH;
    const char *env = getenv("B10_SOCKET");
    if (params->field_mask & B10_CONN_FIELD_SOCKET_PATH)
        path = params->socket_path;
    else if (env != NULL && env[0] != '\0')
        path = env;

    b10_conn_t *conn = conn_alloc(params);
    if (conn == NULL)
        return B10_ERR_NO_MEMORY;
    snprintf(conn->agent_name, sizeof(conn->agent_name), "%s", params->agent_name);
    if ((conn->path = strdup(path)) == NULL) {
        status = B10_ERR_NO_MEMORY;
        goto free_conn;
    }
    if ((conn->epoll_fd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
        status = status_from_errno(errno);
        goto free_conn;
    }
    status = conn_dial(conn, conn->request_timeout_ms, &conn->fd);
    if (status != B10_OK)
        goto free_conn;
    conn_watch(conn, EPOLLIN);
    conn->boot = 1;
    pthread_mutex_lock(&conn->lock);
    status = conn_hello(conn);
    pthread_mutex_unlock(&conn->lock);
    if (status != B10_OK)
        goto free_conn;
    *conn_p = conn;
    return B10_OK;

free_conn:
    conn_free(conn);
    return status;
}

void b10_conn_close(b10_conn_t *conn)
{
    conn_free(conn);
}

/* The epoll set: it stays for the connection's life, whatever file it watches. */
int b10_conn_fd(b10_conn_t *conn)
{
    return conn == NULL ? -1 : conn->epoll_fd;
}

/*
 * Nonblocking progress, called with the lock held. If another thread is the
 * reader, it will dispatch what arrived; reading beside it would race for
 * the bytes.
 */
static void conn_poke(b10_conn_t *conn)
{
    conn_settle(conn, false);
    if (conn->dead != B10_OK || conn->reading)
        return;
    conn_drain(conn);
    pthread_cond_broadcast(&conn->cond);
}

b10_status_t b10_conn_progress(b10_conn_t *conn)
{
    if (conn == NULL)
        return B10_ERR_INVALID_ARG;
    pthread_mutex_lock(&conn->lock);
    conn_poke(conn);
    b10_status_t status = conn->dead;
    pthread_mutex_unlock(&conn->lock);
    return status;
}

const char *b10_conn_detail(b10_conn_t *conn)
{
    return conn == NULL ? "" : conn->detail;
}

/* ---------------------------------------------------------------- DRAM allocations */

/*
 * The process-wide table of b10_dram_alloc() allocations. It is the one
 * piece of global state of the library: registering memory by address alone
 * needs to find the memfd behind that address, whatever the connection.
 */
struct dram_entry {
    uintptr_t addr;
    size_t length;   /* bytes mapped */
    int fd;          /* the memfd, owned */
};

static pthread_mutex_t dram_lock = PTHREAD_MUTEX_INITIALIZER;
static struct dram_entry *dram_table;
static size_t dram_count, dram_cap;

static int dram_table_add(uintptr_t addr, size_t length, int fd)
{
    int rc = 0;

    pthread_mutex_lock(&dram_lock);
    if (dram_count == dram_cap) {
        size_t cap = dram_cap == 0 ? 16 : dram_cap * 2;
        struct dram_entry *t = realloc(dram_table, cap * sizeof(*t));
        if (t == NULL) {
            rc = -ENOMEM;
            goto unlock;
        }
        dram_table = t;
        dram_cap = cap;
    }
    dram_table[dram_count++] = (struct dram_entry){ .addr = addr, .length = length, .fd = fd };
unlock:
    pthread_mutex_unlock(&dram_lock);
    return rc;
}

/*
 * Find the allocation holding [addr, addr+length) and return a duplicate of
 * its fd (so that a concurrent b10_dram_free cannot close it under our
 * sendmsg) and the file offset of addr. -ENOENT: no allocation holds addr;
 * -ERANGE: one does, but the range runs past its end.
 */
static int dram_table_lookup(uintptr_t addr, size_t length, int *fd_p, uint64_t *offset_p)
{
    int rc = -ENOENT;

    pthread_mutex_lock(&dram_lock);
    for (size_t i = 0; i < dram_count; i++) {
        const struct dram_entry *e = &dram_table[i];
        if (addr < e->addr || addr - e->addr >= e->length)
            continue;
        if (length > e->length - (addr - e->addr)) {
            rc = -ERANGE;
            break;
        }
        int fd = fcntl(e->fd, F_DUPFD_CLOEXEC, 0);
        if (fd < 0) {
            rc = -errno;
            break;
        }
        *fd_p = fd;
        *offset_p = addr - e->addr;
        rc = 0;
        break;
    }
    pthread_mutex_unlock(&dram_lock);
    return rc;
}

static bool dram_table_remove(uintptr_t addr, struct dram_entry *entry_p)
{
    bool found = false;

    pthread_mutex_lock(&dram_lock);
    for (size_t i = 0; i < dram_count; i++) {
        if (dram_table[i].addr == addr) {
            *entry_p = dram_table[i];
            dram_table[i] = dram_table[--dram_count];
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&dram_lock);
    return found;
}

/*
 * Write every page of a new allocation, at this process's cost (its memory
 * cgroup's): the daemon never fills a hole of a rank's memfd, whose page it
 * would pay for, and fails a copy that meets one B10_ERR_NOT_POPULATED.
 * MADV_POPULATE_WRITE a piece at a time (Linux 5.14), else a store into
 * each page; a new memfd reads zeros, and still does.
 */
#define DRAM_POPULATE_STEP (64u << 20)

static b10_status_t dram_populate(uint8_t *addr, size_t length)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t off = 0; off < length;) {
        size_t n = length - off < DRAM_POPULATE_STEP ? length - off : DRAM_POPULATE_STEP;
        if (madvise(addr + off, n, MADV_POPULATE_WRITE) != 0) {
            if (errno == EINTR)
                continue;
            if (errno != EINVAL)
                return errno == EFAULT ? B10_ERR_NO_MEMORY : status_from_errno(errno);
            for (size_t p = off; p < off + n; p += page)
                ((volatile uint8_t *)addr)[p] = 0;
        }
        off += n;
    }
    return B10_OK;
}

b10_status_t b10_dram_alloc(size_t length, void **addr_p)
{
    b10_status_t status;

    if (length == 0 || addr_p == NULL || length > (size_t)INT64_MAX)
        return B10_ERR_INVALID_ARG;
    int fd = memfd_create("b10-dram", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return status_from_errno(errno);
    if (ftruncate(fd, (off_t)length) < 0) {
        status = errno == EFBIG || errno == EINVAL ? B10_ERR_TOO_LARGE : status_from_errno(errno);
        goto close_fd;
    }
    /* The daemon maps this file too: a shrink would turn its copies into SIGBUS, so it insists on the seal. */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0) {
        status = status_from_errno(errno);
        goto close_fd;
    }
    void *addr = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) {
        status = status_from_errno(errno);
        goto close_fd;
    }
    if ((status = dram_populate(addr, length)) != B10_OK)
        goto unmap;
    if (dram_table_add((uintptr_t)addr, length, fd) < 0) {
        status = B10_ERR_NO_MEMORY;
        goto unmap;
    }
    *addr_p = addr;
    return B10_OK;

unmap:
    munmap(addr, length);
close_fd:
    close(fd);
    return status;
}

void b10_dram_free(void *addr)
{
    struct dram_entry e;

    if (addr == NULL || !dram_table_remove((uintptr_t)addr, &e))
        return;
    munmap((void *)e.addr, e.length);
    close(e.fd);
}

/* ---------------------------------------------------------------- memory */

/*
 * The fd and offset to send for a DRAM region: the caller's (not ours to
 * close, so *owned_p is false), a duplicate from the DRAM table, or for
 * any other memory this process's /proc/self/mem (*process_mem_p).
 */
static b10_status_t mem_dram_fd(b10_conn_t *conn, const b10_mem_params_t *params, int *fd_p,
                                uint64_t *offset_p, bool *process_mem_p, bool *owned_p)
{
    if (params->field_mask & B10_MEM_FIELD_FD) {
        /* Checked here: a bad fd would fail sendmsg() and look like a dead socket. */
        if (params->fd < 0 || fcntl(params->fd, F_GETFD) < 0)
            return conn_reject(conn, B10_ERR_INVALID_ARG, "fd %d is not an open descriptor",
                               params->fd);
        *fd_p = params->fd;
        *offset_p = params->field_mask & B10_MEM_FIELD_FD_OFFSET ? params->fd_offset : 0;
        *owned_p = false;
        return B10_OK;
    }
    int rc = dram_table_lookup((uintptr_t)params->addr, params->length, fd_p, offset_p);
    if (rc == -ENOENT) {
        /*
         * Any other host memory: the daemon reaches it through this
         * process's memory file. Opening it is the grant: the kernel checks
         * the opener, and a process may always open its own.
         */
        int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
        if (fd < 0)
            return conn_reject(conn, B10_ERR_INVALID_ARG,
                               "host memory not from b10_dram_alloc is reached through "
                               "/proc/self/mem, which this process cannot open (%s): allocate "
                               "with b10_dram_alloc or pass a memfd as B10_MEM_FIELD_FD",
                               strerror(errno));
        *fd_p = fd;
        *offset_p = 0;
        *process_mem_p = true;
        *owned_p = true;
        return B10_OK;
    }
    if (rc == -ERANGE)
        return conn_reject(conn, B10_ERR_INVALID_ARG,
                           "region of %zu bytes at %p runs past the end of its b10_dram_alloc "
                           "allocation", params->length, params->addr);
    if (rc < 0)
        return conn_reject(conn, status_from_errno(-rc), "duplicating the DRAM fd: %s",
                           strerror(-rc));
    *owned_p = true;
    return B10_OK;
}

/*
 * Send one RegisterMem (with fd, if >= 0) and make its handle. The handle
 * keeps what registering it again takes: a memfd is duplicated (the
 * memory then lives while the handle does, as it does in the daemon).
 */
static b10_status_t mem_register_one(b10_conn_t *conn, B10__RegisterMem *rm, int fd,
                                     b10_mem_t **mem_p)
{
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;
    B10__DaemonMsg *reply;
    b10_mem_t *mem = calloc(1, sizeof(*mem));

    if (mem == NULL)
        return conn_reject(conn, B10_ERR_NO_MEMORY, "out of memory");
    mem->kind = rm->kind == B10__MEM_KIND__MEM_VRAM ? B10_MEM_VRAM : B10_MEM_DRAM;
    mem->addr = rm->addr;
    mem->length = rm->length;
    mem->fd_offset = rm->fd_offset;
    mem->process_mem = rm->process_mem;
    mem->open = rm->open_to_node;
    mem->fd = -1;
    if (mem->kind == B10_MEM_DRAM && !rm->process_mem &&
        (mem->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
        int err = errno;
        free(mem);
        return conn_reject(conn, status_from_errno(err), "duplicating the region's fd: %s",
                           strerror(err));
    }
    msg.body_case = B10__CLIENT_MSG__BODY_REGISTER_MEM;
    msg.register_mem = rm;
    pthread_mutex_lock(&conn->lock);
    b10_status_t status = conn_request(conn, &msg, fd, B10__REPLY__BODY_REGISTER_MEM, NULL, &reply);
    if (status == B10_OK) {
        mem->conn = conn;
        mem->region_id = reply->reply->register_mem->region_id;
        mem->next = conn->mems;
        if (conn->mems != NULL)
            conn->mems->prev = mem;
        conn->mems = mem;
        b10__daemon_msg__free_unpacked(reply, NULL);
    }
    pthread_mutex_unlock(&conn->lock);
    if (status != B10_OK) {
        if (mem->fd >= 0)
            close(mem->fd);
        free(mem);
        return status;
    }
    *mem_p = mem;
    return B10_OK;
}

static bool mem_open_to_node(const b10_mem_params_t *params)
{
    return (params->field_mask & B10_MEM_FIELD_FLAGS) && (params->flags & B10_MEM_OPEN_TO_NODE);
}

/*
 * VRAM: one daemon region per allocation the range crosses. PyTorch's
 * expandable segments map many VMM allocations side by side, and a tensor
 * may span several; the daemon translates across regions that are
 * contiguous here, so the range works as one. The handle chains the parts.
 */
static b10_status_t mem_register_vram(b10_conn_t *conn, const b10_mem_params_t *params,
                                      b10_mem_t **mem_p)
{
    uintptr_t addr = (uintptr_t)params->addr, end = addr + params->length;
    b10_mem_t *first = NULL, **link = &first;
    b10_status_t status = B10_OK;

    while (addr < end) {
        struct vram_export vx;
        size_t piece;
        char why[384];
        status = vram_export((void *)addr, end - addr, &vx, &piece, why, sizeof(why));
        if (status != B10_OK) {
            status = conn_reject(conn, status, "%s", why);
            break;
        }
        B10__RegisterMem rm = B10__REGISTER_MEM__INIT;
        rm.kind = B10__MEM_KIND__MEM_VRAM;
        rm.addr = addr;
        rm.length = piece;
        rm.pci_bus_id = vx.pci_bus_id;
        rm.alloc_base = vx.alloc_base;
        rm.alloc_length = vx.alloc_length;
        if (vx.has_ipc_handle)
            rm.cuda_ipc_handle = (ProtobufCBinaryData){ sizeof(vx.ipc_handle), vx.ipc_handle };
        rm.vmm_fd = vx.fd >= 0;
        rm.open_to_node = mem_open_to_node(params);
        status = mem_register_one(conn, &rm, vx.fd, link);
        if (vx.fd >= 0)
            close(vx.fd);
        if (status != B10_OK)
            break;
        link = &(*link)->more;
        addr += piece;
    }
    if (status != B10_OK) {
        /* All or nothing: the parts registered so far go again. */
        if (first != NULL)
            b10_mem_deregister(conn, first);
        return status;
    }
    *mem_p = first;
    return B10_OK;
}

b10_status_t b10_mem_register(b10_conn_t *conn, const b10_mem_params_t *params,
                              b10_mem_t **mem_p)
{
    B10__RegisterMem rm = B10__REGISTER_MEM__INIT;
    int fd = -1;
    bool fd_owned = false, process_mem = false;
    b10_status_t status;

    if (conn == NULL)
        return B10_ERR_INVALID_ARG;
    if (params == NULL || mem_p == NULL || params->addr == NULL || params->length == 0)
        return conn_reject(conn, B10_ERR_INVALID_ARG, "a region needs an address and a length");
    if ((uintptr_t)params->addr + params->length < (uintptr_t)params->addr)
        return conn_reject(conn, B10_ERR_INVALID_ARG, "region wraps around the address space");
    if ((params->field_mask & B10_MEM_FIELD_FLAGS) && (params->flags & ~(uint64_t)B10_MEM_OPEN_TO_NODE))
        return conn_reject(conn, B10_ERR_INVALID_ARG, "unknown region flags 0x%" PRIx64,
                           params->flags & ~(uint64_t)B10_MEM_OPEN_TO_NODE);
    if (params->kind == B10_MEM_VRAM)
        return mem_register_vram(conn, params, mem_p);
    if (params->kind != B10_MEM_DRAM)
        return conn_reject(conn, B10_ERR_INVALID_ARG, "unknown memory kind %d", (int)params->kind);
    rm.kind = B10__MEM_KIND__MEM_DRAM;
    status = mem_dram_fd(conn, params, &fd, &rm.fd_offset, &process_mem, &fd_owned);
    rm.process_mem = process_mem;
    if (status != B10_OK)
        return status;
    rm.addr = (uintptr_t)params->addr;
    rm.length = params->length;
    rm.open_to_node = mem_open_to_node(params);
    status = mem_register_one(conn, &rm, fd, mem_p);
    if (fd_owned)
        close(fd);
    return status;
}

/*
 * The handle is freed only when the daemon confirms: after a failure it
 * still names a region the daemon may hold, and b10_conn_close frees it.
 */
static b10_status_t mem_deregister_one(b10_conn_t *conn, b10_mem_t *mem)
{
    B10__DeregisterMem dm = B10__DEREGISTER_MEM__INIT;
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;

    msg.body_case = B10__CLIENT_MSG__BODY_DEREGISTER_MEM;
    msg.deregister_mem = &dm;
    pthread_mutex_lock(&conn->lock);
    /*
     * A reconnection first (it registers every region again, under new
     * ids), then the id: read before, it would name the old boot's region,
     * or another's in the new boot.
     */
    conn_settle(conn, true);
    dm.region_id = mem->region_id;
    b10_status_t status = conn_request(conn, &msg, -1, B10__REPLY__BODY__NOT_SET, NULL, NULL);
    /* UNSETTLED: gone from the daemon's table too, but a copy may still write the memory. */
    if (status == B10_OK || status == B10_ERR_UNSETTLED) {
        if (mem->prev != NULL)
            mem->prev->next = mem->next;
        else
            conn->mems = mem->next;
        if (mem->next != NULL)
            mem->next->prev = mem->prev;
        if (mem->fd >= 0)
            close(mem->fd);
        free(mem);
    }
    pthread_mutex_unlock(&conn->lock);
    return status;
}

b10_status_t b10_mem_deregister(b10_conn_t *conn, b10_mem_t *mem)
{
    if (conn == NULL)
        return B10_ERR_INVALID_ARG;
    if (mem == NULL || mem->conn != conn)
        return conn_reject(conn, B10_ERR_INVALID_ARG, "region handle of another connection");
    /* Parts first, then the head: a failure leaves a handle that names what is still there. */
    b10_status_t status = B10_OK;
    bool unsettled = false;     /* a part went, but a copy may still write it: say so at the end */
    while (mem->more != NULL && status == B10_OK) {
        b10_mem_t *part = mem->more;
        mem->more = part->more;
        part->more = NULL;
        status = mem_deregister_one(conn, part);
        if (status == B10_ERR_UNSETTLED) {
            unsettled = true;
            status = B10_OK;
        } else if (status != B10_OK) {
            part->more = mem->more;
            mem->more = part;
        }
    }
    if (status != B10_OK)
        return status;
    status = mem_deregister_one(conn, mem);
    return status == B10_OK && unsettled ? B10_ERR_UNSETTLED : status;
}

/* ---------------------------------------------------------------- agents */

b10_status_t b10_agent_desc(b10_conn_t *conn, const void **desc_p, size_t *length_p)
{
    if (conn == NULL)
        return B10_ERR_INVALID_ARG;
    if (desc_p == NULL || length_p == NULL)
        return conn_reject(conn, B10_ERR_INVALID_ARG, "desc_p and length_p are required");
    /*
     * After the daemon restarted, the descriptor of its new boot; the bytes
     * of an earlier one stay valid too (conn_hello keeps them).
     */
    pthread_mutex_lock(&conn->lock);
    conn_poke(conn);
    const void *desc = conn->agent_desc;
    size_t length = conn->agent_desc_len;
    pthread_mutex_unlock(&conn->lock);
    if (length == 0)
        return conn_reject(conn, B10_ERR_NOT_FOUND, "the daemon gave no agent descriptor");
    *desc_p = desc;
    *length_p = length;
    return B10_OK;
}

/* Drop name from the descriptors to reload; the lock is held. */
static void loaded_forget(b10_conn_t *conn, const char *name)
{
    for (struct loaded **pp = &conn->loaded; *pp != NULL; pp = &(*pp)->next) {
        if (strcmp((*pp)->name, name) == 0) {
            struct loaded *l = *pp;
            *pp = l->next;
            free(l->desc);
            free(l);
            return;
        }
    }
}

/*
 * A transfer to name was refused B10_ERR_UNKNOWN_AGENT: where its descriptor
 * was refused when libb10 connected again (a daemon started with a rotated
 * cluster key that no longer holds the one it was sealed under), the detail
 * says so and what to do, which the daemon alone cannot. The lock is held.
 */
static void loaded_why_not(b10_conn_t *conn, const char *name)
{
    for (const struct loaded *l = conn->loaded; l != NULL; l = l->next) {
        if (strcmp(l->name, name) == 0 && l->refused[0] != '\0') {
            char daemon[sizeof(conn->detail)];
            snprintf(daemon, sizeof(daemon), "%s", conn->detail);
            conn_set_detail(conn, "%.300s: its descriptor, loaded again when libb10 connected "
                            "to the daemon anew, was refused (%.300s): load a fresh one of that "
                            "rank", daemon, l->refused);
            return;
        }
    }
}

/* A request whose OK reply carries nothing but its status. */
static b10_status_t conn_call(b10_conn_t *conn, B10__ClientMsg *msg)
{
    pthread_mutex_lock(&conn->lock);
    b10_status_t status = conn_request(conn, msg, -1, B10__REPLY__BODY__NOT_SET, NULL, NULL);
    pthread_mutex_unlock(&conn->lock);
    return status;
}

static b10_status_t agent_name_reject(b10_conn_t *conn)
{
    return conn_reject(conn, B10_ERR_INVALID_ARG,
                       "agent name must be 1 to %d bytes of printable ASCII without spaces",
                       AGENT_NAME_MAX);
}

b10_status_t b10_agent_load(b10_conn_t *conn, const char *name, const void *desc,
                            size_t length)
{
    return b10_agent_pair(conn, name, desc, length, 0);
}

b10_status_t b10_agent_pair(b10_conn_t *conn, const char *name, const void *desc,
                            size_t length, uint32_t grants)
{
    B10__LoadAgent la = B10__LOAD_AGENT__INIT;
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;

    if (conn == NULL)
        return B10_ERR_INVALID_ARG;
    if (!agent_name_valid(name))
        return agent_name_reject(conn);
    if (desc == NULL || length == 0)
        return conn_reject(conn, B10_ERR_INVALID_ARG, "empty agent descriptor");
    if (grants & ~(uint32_t)(B10_GRANT_WRITE | B10_GRANT_READ))
        return conn_reject(conn, B10_ERR_INVALID_ARG, "grants 0x%x: only B10_GRANT_WRITE and "
                           "B10_GRANT_READ are known", grants);
    la.name = (char *)name;
    la.grants = grants;
    la.desc.data = (uint8_t *)desc;
    la.desc.len = length;
    msg.body_case = B10__CLIENT_MSG__BODY_LOAD_AGENT;
    msg.load_agent = &la;
    struct loaded *l = calloc(1, sizeof(*l));
    if (l == NULL || (l->desc = malloc(length)) == NULL) {
        free(l);
        return conn_reject(conn, B10_ERR_NO_MEMORY, "out of memory for a descriptor");
    }
    snprintf(l->name, sizeof(l->name), "%s", name);
    memcpy(l->desc, desc, length);
    l->length = length;
    l->grants = grants;
    pthread_mutex_lock(&conn->lock);
    b10_status_t status = conn_request(conn, &msg, -1, B10__REPLY__BODY__NOT_SET, NULL, NULL);
    /* Kept for a restarted daemon, which knows nothing a rank loaded: the newest per name. */
    if (status == B10_OK) {
        loaded_forget(conn, name);
        l->next = conn->loaded;
        conn->loaded = l;
        l = NULL;
    }
    pthread_mutex_unlock(&conn->lock);
    if (l != NULL) {
        free(l->desc);
        free(l);
    }
    return status;
}

b10_status_t b10_agent_invalidate(b10_conn_t *conn, const char *name)
{
    B10__InvalidateAgent ia = B10__INVALIDATE_AGENT__INIT;
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;

    if (conn == NULL)
        return B10_ERR_INVALID_ARG;
    if (!agent_name_valid(name))
        return agent_name_reject(conn);
    ia.name = (char *)name;
    msg.body_case = B10__CLIENT_MSG__BODY_INVALIDATE_AGENT;
    msg.invalidate_agent = &ia;
    pthread_mutex_lock(&conn->lock);
    b10_status_t status = conn_request(conn, &msg, -1, B10__REPLY__BODY__NOT_SET, NULL, NULL);
    if (status == B10_OK || status == B10_ERR_NOT_FOUND)
        loaded_forget(conn, name);
    pthread_mutex_unlock(&conn->lock);
    return status;
}

/*
 * On a little-endian host an array of b10_span_t is already the wire's span
 * table (u64 address, u64 length, little-endian, 16 bytes a span): a request
 * sends the caller's array as it is, instead of a copy of megabytes.
 */
#define SPANS_ARE_WIRE (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__)
_Static_assert(sizeof(b10_span_t) == SPAN_BYTES && offsetof(b10_span_t, addr) == 0 &&
               offsetof(b10_span_t, length) == 8, "b10_span_t is the wire's span layout");

static void pack_spans(uint8_t *out, const b10_span_t *spans, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        frame_put_u64(out + i * SPAN_BYTES, spans[i].addr);
        frame_put_u64(out + i * SPAN_BYTES + 8, spans[i].length);
    }
}

/* Requests of fewer spans carry them in the frame (at most 128 KiB of it). */
#define ARENA_MIN_SPANS 4096

/* Let the arena go (the lock held): the next large request makes a fresh one. */
static void conn_arena_drop(b10_conn_t *conn)
{
    if (conn->arena != NULL)
        munmap(conn->arena, conn->arena_len);
    if (conn->arena_fd >= 0)
        close(conn->arena_fd);
    conn->arena = NULL;
    conn->arena_fd = -1;
    conn->arena_len = 0;
    conn->arena_boot = 0;
}

/*
 * Make the span arena hold need bytes and this boot of the daemon map it
 * (the lock held): B10_OK, else why not, and the caller's spans go in the
 * frame instead. It grows by doubling up to the daemon's max_frame, the
 * bound it holds an arena to; a new one is sealed against shrinking, as
 * the daemon insists (a shrink under its reads would be a SIGBUS).
 */
static b10_status_t conn_arena_ready(b10_conn_t *conn, size_t need)
{
    B10__SpanArena sa = B10__SPAN_ARENA__INIT;
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;

    if (conn->arena_len < need) {
        size_t len = conn->arena_len > 0 ? conn->arena_len : (size_t)1 << 20;
        while (len < need)
            len *= 2;
        if (len > conn->max_frame)
            len = conn->max_frame;
        int fd = memfd_create("b10-spans", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
            return status_from_errno(errno);
        void *map = MAP_FAILED;
        if (ftruncate(fd, (off_t)len) < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0 ||
            (map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
            b10_status_t status = status_from_errno(errno);
            close(fd);
            return status;
        }
        conn_arena_drop(conn);
        conn->arena = map;
        conn->arena_len = len;
        conn->arena_fd = fd;
        conn->arena_boot = 0;
    }
    if (conn->arena_boot == conn->boot)
        return B10_OK;
    sa.length = conn->arena_len;
    msg.body_case = B10__CLIENT_MSG__BODY_SPAN_ARENA;
    msg.span_arena = &sa;
    b10_status_t status = conn_request(conn, &msg, conn->arena_fd, B10__REPLY__BODY__NOT_SET,
                                       NULL, NULL);
    if (status == B10_OK)
        conn->arena_boot = conn->boot;
    return status;
}

b10_status_t b10_agent_check(b10_conn_t *conn, const char *remote_agent, const b10_span_t *spans,
                             size_t count)
{
    B10__CheckAgent ca = B10__CHECK_AGENT__INIT;
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;

    if (conn == NULL)
        return B10_ERR_INVALID_ARG;
    if (!agent_name_valid(remote_agent))
        return agent_name_reject(conn);
    if (spans == NULL || count == 0 || count > FRAME_MAX_LIMIT / SPAN_BYTES)
        return conn_reject(conn, B10_ERR_INVALID_ARG, "a check needs 1 or more spans");
    uint8_t *packed = NULL;
    if (!SPANS_ARE_WIRE) {
        if ((packed = malloc(count * SPAN_BYTES)) == NULL)
            return conn_reject(conn, B10_ERR_NO_MEMORY, "out of memory for %zu spans", count);
        pack_spans(packed, spans, count);
    }
    ca.remote_agent = (char *)remote_agent;
    ca.spans = (ProtobufCBinaryData){ .len = count * SPAN_BYTES,
                                      .data = SPANS_ARE_WIRE ? (uint8_t *)spans : packed };
    msg.body_case = B10__CLIENT_MSG__BODY_CHECK_AGENT;
    msg.check_agent = &ca;
    b10_status_t status = conn_call(conn, &msg);
    free(packed);
    return status;
}

b10_status_t b10_agent_notify(b10_conn_t *conn, const char *remote_agent, const void *data,
                              size_t length)
{
    B10__NotifyAgent na = B10__NOTIFY_AGENT__INIT;
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;

    if (conn == NULL)
        return B10_ERR_INVALID_ARG;
    if (!agent_name_valid(remote_agent))
        return agent_name_reject(conn);
    if (length > B10_SYNC_MSG_MAX || (length > 0 && data == NULL))
        return conn_reject(conn, B10_ERR_TOO_LARGE, "a sync message holds at most %d bytes",
                           B10_SYNC_MSG_MAX);
    na.remote_agent = (char *)remote_agent;
    na.message = (ProtobufCBinaryData){ .len = length, .data = (uint8_t *)data };
    msg.body_case = B10__CLIENT_MSG__BODY_NOTIFY_AGENT;
    msg.notify_agent = &na;
    return conn_call(conn, &msg);
}

b10_status_t b10_agent_notifications(b10_conn_t *conn, b10_notification_t **list_p,
                                     size_t *count_p)
{
    if (conn == NULL || list_p == NULL || count_p == NULL)
        return B10_ERR_INVALID_ARG;
    pthread_mutex_lock(&conn->lock);
    conn_poke(conn);
    size_t n = conn->nnotices;
    b10_notification_t *list = NULL;
    if (n > 0 && (list = calloc(n, sizeof(*list))) == NULL) {
        pthread_mutex_unlock(&conn->lock);
        return conn_reject(conn, B10_ERR_NO_MEMORY, "out of memory for %zu messages", n);
    }
    for (size_t i = 0; i < n; i++) {
        struct notice *head = conn->notices;
        conn->notices = head->next;
        memcpy(list[i].agent, head->agent, sizeof(list[i].agent));
        list[i].data = head->data;
        list[i].length = head->length;
        free(head);
    }
    conn->notices_tail = &conn->notices;
    conn->nnotices = 0;
    pthread_mutex_unlock(&conn->lock);
    *list_p = list;
    *count_p = n;
    return B10_OK;
}

void b10_notifications_free(b10_notification_t *list, size_t count)
{
    if (list == NULL)
        return;
    for (size_t i = 0; i < count; i++)
        free(list[i].data);
    free(list);
}

/* ---------------------------------------------------------------- reconnection */

/* Register m again with the daemon of a new boot; the reviver holds the lock. */
static b10_status_t revive_region(b10_conn_t *conn, b10_mem_t *m)
{
    B10__RegisterMem rm = B10__REGISTER_MEM__INIT;
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;
    B10__DaemonMsg *reply;
    struct vram_export vx;
    int fd = m->fd;
    bool fd_ours = false;
    b10_status_t status;

    rm.addr = m->addr;
    rm.length = m->length;
    rm.open_to_node = m->open;
    if (m->kind == B10_MEM_VRAM) {
        char why[384];
        size_t piece;
        /* A fresh export: the handle or fd of the first one went with the old daemon. */
        status = vram_export((void *)(uintptr_t)m->addr, m->length, &vx, &piece, why, sizeof(why));
        if (status == B10_OK && piece != m->length) {
            if (vx.fd >= 0)
                close(vx.fd);
            status = B10_ERR_INVALID_ARG;
            snprintf(why, sizeof(why), "its allocations changed since it was registered");
        }
        if (status != B10_OK) {
            conn_set_detail(conn, "exporting VRAM at 0x%" PRIx64 " again: %s", m->addr, why);
            return status;
        }
        rm.kind = B10__MEM_KIND__MEM_VRAM;
        rm.pci_bus_id = vx.pci_bus_id;
        rm.alloc_base = vx.alloc_base;
        rm.alloc_length = vx.alloc_length;
        if (vx.has_ipc_handle)
            rm.cuda_ipc_handle = (ProtobufCBinaryData){ sizeof(vx.ipc_handle), vx.ipc_handle };
        rm.vmm_fd = vx.fd >= 0;
        fd = vx.fd;
        fd_ours = fd >= 0;
    } else {
        rm.kind = B10__MEM_KIND__MEM_DRAM;
        rm.fd_offset = m->fd_offset;
        rm.process_mem = m->process_mem;
        if (m->process_mem) {
            if ((fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC)) < 0) {
                conn_set_detail(conn, "opening /proc/self/mem again: %s", strerror(errno));
                return status_from_errno(errno);
            }
            fd_ours = true;
        }
    }
    msg.body_case = B10__CLIENT_MSG__BODY_REGISTER_MEM;
    msg.register_mem = &rm;
    status = conn_request(conn, &msg, fd, B10__REPLY__BODY_REGISTER_MEM, NULL, &reply);
    if (fd_ours)
        close(fd);
    if (status != B10_OK)
        return status;
    m->region_id = reply->reply->register_mem->region_id;
    b10__daemon_msg__free_unpacked(reply, NULL);
    return B10_OK;
}

static bool revive_final(b10_status_t status)
{
    return status == B10_ERR_VERSION || status == B10_ERR_PERMISSION ||
           status == B10_ERR_UNAUTHENTICATED || status == B10_ERR_INVALID_ARG ||
           status == B10_ERR_UNSUPPORTED;
}

/*
 * Connect again after the daemon exited: hello, every region, every loaded
 * descriptor. Called with the lock held; the other threads wait (conn_settle)
 * until it is done. A region the new daemon refuses fails the attempt (the
 * caller's handles must all hold); a descriptor it refuses is only logged,
 * and a transfer to that agent then says why.
 */
static void conn_revive(b10_conn_t *conn)
{
    char why[DETAIL_MAX];
    size_t regions = 0, agents = 0;
    int fd;

    conn->reviving = true;
    conn->reviver = pthread_self();
    b10_status_t status = conn_dial(conn, REVIVE_CONNECT_MS < conn->request_timeout_ms ?
                                    REVIVE_CONNECT_MS : conn->request_timeout_ms, &fd);
    conn->absent = status == B10_ERR_DAEMON_UNREACHABLE;
    if (status != B10_OK)
        goto failed;
    conn_unwatch(conn);
    int dup_rc = dup3(fd, conn->fd, O_CLOEXEC);
    conn_watch(conn, EPOLLIN);
    if (dup_rc < 0) {
        conn_set_detail(conn, "dup3: %s", strerror(errno));
        close(fd);
        status = B10_ERR_IO;
        goto failed;
    }
    close(fd);
    frame_reader_free(&conn->reader);
    frame_reader_init(&conn->reader, FRAME_MAX_DEFAULT);
    conn->max_frame = FRAME_MAX_DEFAULT;
    conn->boot++;
    conn->dead = B10_OK;
    if ((status = conn_hello(conn)) != B10_OK)
        goto failed;
    for (b10_mem_t *m = conn->mems; m != NULL; m = m->next, regions++) {
        if ((status = revive_region(conn, m)) != B10_OK) {
            snprintf(why, sizeof(why), "registering the region at 0x%" PRIx64 " again: %.400s",
                     m->addr, conn->detail);
            conn_set_detail(conn, "%s", why);
            goto failed;
        }
    }
    for (struct loaded *l = conn->loaded; l != NULL; l = l->next) {
        B10__LoadAgent la = B10__LOAD_AGENT__INIT;
        B10__ClientMsg msg = B10__CLIENT_MSG__INIT;
        la.name = l->name;
        la.desc = (ProtobufCBinaryData){ l->length, l->desc };
        la.reload = true;
        la.grants = l->grants;
        msg.body_case = B10__CLIENT_MSG__BODY_LOAD_AGENT;
        msg.load_agent = &la;
        status = conn_request(conn, &msg, -1, B10__REPLY__BODY__NOT_SET, NULL, NULL);
        if (status != B10_OK && conn->dead != B10_OK)
            goto failed;
        l->refused[0] = '\0';
        if (status != B10_OK) {
            conn_log(conn, B10_LOG_WARNING, "remote agent %s not reloaded: %s: %s", l->name,
                     b10_status_name(status), conn->detail);
            snprintf(l->refused, sizeof(l->refused), "%s: %.250s", b10_status_name(status),
                     conn->detail);
        } else {
            agents++;
        }
    }
    conn->reviving = false;
    conn->backoff_ms = 0;
    conn->detail[0] = '\0';
    conn_log(conn, B10_LOG_INFO, "connected to the daemon again: %zu regions registered, "
             "%zu remote agents loaded", regions, agents);
    pthread_cond_broadcast(&conn->cond);
    return;

failed:
    snprintf(why, sizeof(why), "%s", conn->detail);
    /*
     * A final refusal (another protocol version, the name held by another
     * user, a request or memory kind the daemon will never take) ends the
     * connection with it: trying again would be refused again, forever.
     * Limits (TOO_LARGE: the daemon is full) and a name still connected
     * (EXISTS) may pass: those are tried again.
     */
    if (revive_final(status)) {
        conn->reviving = false;
        conn->dead = B10_OK;    /* the daemon may have closed behind its refusal */
        conn_kill(conn, status, "reconnecting was refused for good: %s: %.400s",
                  b10_status_name(status), why);
        return;
    }
    /* A refusal leaves the new socket up: drop it, and try again later. */
    if (conn->dead == B10_OK)
        conn_kill(conn, B10_ERR_DAEMON_EXITED, "reconnecting: %s: %.400s", b10_status_name(status),
                  why);
    conn->backoff_ms = conn->backoff_ms == 0 ? REVIVE_BACKOFF_MIN
                       : conn->backoff_ms * 2 > REVIVE_BACKOFF_MAX ? REVIVE_BACKOFF_MAX
                       : conn->backoff_ms * 2;
    conn->retry_at = now_ns() + (int64_t)conn->backoff_ms * NSEC_PER_MSEC;
    conn_park(conn);
    conn_set_detail(conn, "the daemon exited; reconnecting failed (%.400s), next try in %d ms",
                    why, conn->backoff_ms);
    conn->reviving = false;
    pthread_cond_broadcast(&conn->cond);
}

/*
 * Before a call uses the connection: reconnect if the daemon exited and
 * the backoff allows. The lock is held. While another thread reconnects, a
 * request waits for it (wait: its frames must follow the registrations),
 * a look at news (progress, status, wait) does not: it has a bound of its
 * own, and no transfer is in progress meanwhile. A thread that reads
 * (conn->reading) sees the socket end itself and leaves; until then the
 * call returns B10_ERR_DAEMON_EXITED.
 */
static void conn_settle(b10_conn_t *conn, bool wait)
{
    if (conn->reviving && (!wait || pthread_equal(conn->reviver, pthread_self())))
        return;
    while (conn->reviving)
        pthread_cond_wait(&conn->cond, &conn->lock);
    /*
     * A socket that ended unnoticed (nobody read since) is noticed now, so
     * that the call goes to the daemon's next boot rather than failing on
     * the old one's socket.
     */
    if (conn->dead == B10_OK && !conn->reading) {
        struct pollfd pfd = { .fd = conn->fd, .events = POLLRDHUP };
        if (poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
            conn_drain(conn);
            pthread_cond_broadcast(&conn->cond);
        }
    }
    if (conn->dead != B10_ERR_DAEMON_EXITED || conn->reading ||
        (now_ns() < conn->retry_at && !conn->absent))
        return;
    /* The timer fired (or is about to): taken, so that it stops being readable. */
    uint64_t ticks;
    if (conn->timer_fd >= 0 && read(conn->timer_fd, &ticks, sizeof(ticks)) < 0)
        ticks = 0;
    conn_revive(conn);
}

/* ---------------------------------------------------------------- transfers */

static b10_status_t xfer_check_params(b10_conn_t *conn, const b10_xfer_params_t *params)
{
    if (params->op != B10_OP_WRITE && params->op != B10_OP_READ)
        return conn_reject(conn, B10_ERR_INVALID_ARG, "op %d is neither B10_OP_WRITE nor B10_OP_READ",
                           (int)params->op);
    if ((params->field_mask & B10_XFER_FIELD_SYNC) &&
        (params->sync_length > B10_SYNC_MSG_MAX || (params->sync_length > 0 && params->sync_msg == NULL)))
        return conn_reject(conn, B10_ERR_TOO_LARGE, "a sync message holds at most %d bytes",
                           B10_SYNC_MSG_MAX);
    if (params->remote_agent == NULL || params->remote_agent[0] == '\0')
        return conn_reject(conn, B10_ERR_INVALID_ARG, "remote_agent is required");
    if (params->count == 0)
        return conn_reject(conn, B10_ERR_INVALID_ARG, "a transfer needs at least one span");
    if (!(params->field_mask & B10_XFER_FIELD_INDICES) &&
        (params->local == NULL || params->remote == NULL))
        return conn_reject(conn, B10_ERR_INVALID_ARG, "a transfer needs at least one span");
    if ((params->field_mask & B10_XFER_FIELD_INDICES) &&
        (params->local_index == NULL || params->remote_index == NULL))
        return conn_reject(conn, B10_ERR_INVALID_ARG, "B10_XFER_FIELD_INDICES needs both "
                           "sides' indices");
    /* Bounded before allocating: two span tables must fit in one frame. */
    if (params->count > FRAME_MAX_LIMIT / (2 * SPAN_BYTES))
        return conn_reject(conn, B10_ERR_TOO_LARGE, "%zu spans cannot fit in one request",
                           params->count);
    return B10_OK;
}

/* How many rows ahead a pass over picked spans asks for: they lie anywhere in their tables. */
#define PICK_PREFETCH 16

/* One side of a transfer whose rows are picked by index (B10_XFER_FIELD_INDICES). */
struct pick_side {
    const b10_span_t *table;        /* its rows, unless it is a grid */
    const b10_span_grid_t *grid;
    uint64_t rows;
    /* A grid of fewer than 2^32 rows: per_base's reciprocal, so that a row's base is a
     * multiply and a shift, not a division (Lemire, Kaser, Kurz 2019); 0: divide. */
    uint64_t magic;
};

static b10_status_t pick_side_init(b10_conn_t *conn, const char *side, const b10_span_t *table,
                                   size_t count, const b10_span_grid_t *grid,
                                   struct pick_side *ps)
{
    *ps = (struct pick_side){ table, grid, count, 0 };
    if (grid == NULL)
        return table != NULL && count > 0
                   ? B10_OK
                   : conn_reject(conn, B10_ERR_INVALID_ARG, "B10_XFER_FIELD_INDICES: the %s "
                                 "table is missing or empty", side);
    if (grid->bases == NULL || grid->nbases == 0 || grid->per_base == 0 || grid->length == 0 ||
        grid->nbases > UINT64_MAX / grid->per_base)
        return conn_reject(conn, B10_ERR_INVALID_ARG, "the %s grid needs bases, rows per base "
                           "and a length, none of them 0", side);
    ps->rows = (uint64_t)grid->nbases * grid->per_base;
    if (ps->rows <= UINT32_MAX && grid->per_base > 1)
        ps->magic = UINT64_MAX / grid->per_base + 1;
    return B10_OK;
}

/* Row k (below ps->rows) of a side. */
static inline b10_span_t pick_row(const struct pick_side *ps, uint64_t k)
{
    const b10_span_grid_t *g = ps->grid;
    if (g == NULL)
        return ps->table[k];
    uint64_t base = g->per_base == 1 ? k
                    : ps->magic != 0 ? (uint64_t)(((unsigned __int128)ps->magic * k) >> 64)
                    : k / g->per_base;
    return (b10_span_t){ g->bases[base] + (k - base * g->per_base) * g->stride, g->length };
}

/* Refuse the first index outside its side, naming it (B10_XFER_FIELD_INDICES). */
static b10_status_t xfer_bad_index(b10_conn_t *conn, const b10_xfer_params_t *params,
                                   const struct pick_side *picks, size_t i)
{
    bool local = (uint64_t)params->local_index[i] >= picks[0].rows;
    conn_set_detail(conn, "%s index %lld (at %zu) is outside its table of %llu spans",
                    local ? "local" : "remote",
                    (long long)(local ? params->local_index[i] : params->remote_index[i]), i,
                    (unsigned long long)picks[local ? 0 : 1].rows);
    return B10_ERR_INVALID_ARG;
}

/*
 * The spans' own checks (the lock held), refused here with the daemon's
 * words rather than after a round trip; copied on the way into out (the
 * span arena, or the frame's own tables: one pass over them, not two)
 * unless out is NULL. With picks (B10_XFER_FIELD_INDICES) the pass picks
 * each pair's rows from the two sides by their indices, checking those first.
 */
static b10_status_t xfer_check_spans(b10_conn_t *conn, const b10_xfer_params_t *params,
                                     const struct pick_side *picks, uint8_t *out)
{
    size_t table = params->count * SPAN_BYTES;
    for (size_t i = 0; i < params->count; i++) {
        b10_span_t lrow, rrow;
        const b10_span_t *l, *r;
        if (picks != NULL) {
            uint64_t li = (uint64_t)params->local_index[i], ri = (uint64_t)params->remote_index[i];
            if (li >= picks[0].rows || ri >= picks[1].rows)
                return xfer_bad_index(conn, params, picks, i);
            if (i + PICK_PREFETCH < params->count) {
                uint64_t lf = (uint64_t)params->local_index[i + PICK_PREFETCH];
                uint64_t rf = (uint64_t)params->remote_index[i + PICK_PREFETCH];
                if (picks[0].grid == NULL && lf < picks[0].rows)
                    __builtin_prefetch(&picks[0].table[lf]);
                if (picks[1].grid == NULL && rf < picks[1].rows)
                    __builtin_prefetch(&picks[1].table[rf]);
            }
            lrow = pick_row(&picks[0], li);
            rrow = pick_row(&picks[1], ri);
            l = &lrow;
            r = &rrow;
        } else {
            l = &params->local[i];
            r = &params->remote[i];
        }
        if (l->length == 0 || l->length != r->length) {
            conn_set_detail(conn, "span %zu: lengths %llu and %llu must be equal and non-zero",
                            i, (unsigned long long)l->length, (unsigned long long)r->length);
            return B10_ERR_INVALID_ARG;
        }
        if (l->addr + l->length < l->addr || r->addr + r->length < r->addr) {
            conn_set_detail(conn, "span %zu wraps around the address space", i);
            return B10_ERR_INVALID_ARG;
        }
        if (out != NULL) {
            frame_put_u64(out + i * SPAN_BYTES, l->addr);
            frame_put_u64(out + i * SPAN_BYTES + 8, l->length);
            frame_put_u64(out + table + i * SPAN_BYTES, r->addr);
            frame_put_u64(out + table + i * SPAN_BYTES + 8, r->length);
        }
    }
    return B10_OK;
}

/*
 * The frame's own copy of the tables (the lock held), checked on the way:
 * picked rows, or any spans on a host whose arrays are not the wire's. Else
 * the frame carries the caller's arrays as they are (checked without a copy).
 */
static b10_status_t xfer_frame_tables(b10_conn_t *conn, const b10_xfer_params_t *params,
                                      const struct pick_side *picks, B10__SubmitXfer *sx,
                                      uint8_t **spans_p)
{
    size_t table = params->count * SPAN_BYTES;
    if (SPANS_ARE_WIRE && picks == NULL) {
        sx->local_spans = (ProtobufCBinaryData){ .len = table, .data = (uint8_t *)params->local };
        sx->remote_spans = (ProtobufCBinaryData){ .len = table, .data = (uint8_t *)params->remote };
        return xfer_check_spans(conn, params, NULL, NULL);
    }
    if (*spans_p == NULL && (*spans_p = malloc(2 * table)) == NULL) {
        conn_set_detail(conn, "out of memory for %zu spans", params->count);   /* the lock held */
        return B10_ERR_NO_MEMORY;
    }
    sx->local_spans = (ProtobufCBinaryData){ .len = table, .data = *spans_p };
    sx->remote_spans = (ProtobufCBinaryData){ .len = table, .data = *spans_p + table };
    return xfer_check_spans(conn, params, picks, *spans_p);
}

/* Whether some row of a grid wraps around the address space. */
static bool xfer_grid_wraps(const b10_span_grid_t *g)
{
    uint64_t reach, end;
    if (__builtin_mul_overflow((uint64_t)g->per_base - 1, g->stride, &reach) ||
        __builtin_add_overflow(reach, g->length, &reach))
        return true;
    for (size_t b = 0; b < g->nbases; b++)
        if (__builtin_add_overflow(g->bases[b], reach, &end))
            return true;
    return false;
}

/*
 * Picks of two grids go to the daemon as they are: the grids in the request
 * and a u32 index a row in the arena (8 bytes a pair where the spans take
 * 32), when both sides are grids of fewer than 2^32 rows and one length,
 * no row of either wraps (the daemon checks grids whole; the spans' way
 * checks only the rows picked), their bases take fewer bytes than the
 * spans would and fit a frame, and the daemon reads them. Else the spans
 * go, and are checked, as before. The daemon checks it all again.
 */
static bool xfer_sends_picks(const b10_conn_t *conn, const b10_xfer_params_t *params,
                             const struct pick_side *picks)
{
    if (picks == NULL || !conn->daemon_grids || picks[0].grid == NULL || picks[1].grid == NULL ||
        picks[0].rows > UINT32_MAX || picks[1].rows > UINT32_MAX ||
        picks[0].grid->length != picks[1].grid->length)
        return false;
    uint64_t bases = (uint64_t)picks[0].grid->nbases + picks[1].grid->nbases;
    if (bases > params->count * 3 || bases * 8 + 4096 > conn->max_frame)
        return false;
    return !xfer_grid_wraps(picks[0].grid) && !xfer_grid_wraps(picks[1].grid);
}

/*
 * The picks' own checks (the lock held), written into out on the way: count
 * u32 local indices, then count remote ones (the arena's layout for
 * SubmitXfer.arena_picks).
 */
static b10_status_t xfer_write_picks(b10_conn_t *conn, const b10_xfer_params_t *params,
                                     const struct pick_side *picks, uint8_t *out)
{
    uint8_t *rout = out + params->count * 4;
    for (size_t i = 0; i < params->count; i++) {
        uint64_t li = (uint64_t)params->local_index[i], ri = (uint64_t)params->remote_index[i];
        if (li >= picks[0].rows || ri >= picks[1].rows)
            return xfer_bad_index(conn, params, picks, i);
        frame_put_u32(out + i * 4, (uint32_t)li);
        frame_put_u32(rout + i * 4, (uint32_t)ri);
    }
    return B10_OK;
}

/* A grid as the request carries it; bases in *packed_p (malloc'd) where the host's u64s are not the wire's. */
static b10_status_t xfer_grid_msg(const b10_span_grid_t *g, B10__SpanGrid *msg, uint8_t **packed_p)
{
    size_t bytes = g->nbases * 8;
    const uint8_t *bases = (const uint8_t *)g->bases;
    if (!SPANS_ARE_WIRE) {
        if ((*packed_p = malloc(bytes)) == NULL)
            return B10_ERR_NO_MEMORY;
        for (size_t b = 0; b < g->nbases; b++)
            frame_put_u64(*packed_p + b * 8, g->bases[b]);
        bases = *packed_p;
    }
    msg->bases = (ProtobufCBinaryData){ .len = bytes, .data = (uint8_t *)bases };
    msg->per_base = g->per_base;
    msg->stride = g->stride;
    msg->length = g->length;
    return B10_OK;
}


b10_status_t b10_xfer_submit(b10_conn_t *conn, const b10_xfer_params_t *params,
                             b10_xfer_t **xfer_p)
{
    B10__SubmitXfer sx = B10__SUBMIT_XFER__INIT;
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;
    b10_status_t status;
    uint64_t submit_ns = (uint64_t)now_ns();

    if (conn == NULL)
        return B10_ERR_INVALID_ARG;
    if (params == NULL || xfer_p == NULL)
        return conn_reject(conn, B10_ERR_INVALID_ARG, "params and xfer_p are required");
    status = xfer_check_params(conn, params);
    if (status != B10_OK)
        return status;
    struct pick_side pick_sides[2], *picks = NULL;
    if (params->field_mask & B10_XFER_FIELD_INDICES) {
        picks = pick_sides;
        if ((status = pick_side_init(conn, "local", params->local, params->local_table_count,
                                     params->local_grid, &picks[0])) != B10_OK ||
            (status = pick_side_init(conn, "remote", params->remote, params->remote_table_count,
                                     params->remote_grid, &picks[1])) != B10_OK)
            return status;
    }

    size_t table = params->count * SPAN_BYTES;
    uint8_t *spans = NULL, *grid_bases[2] = { NULL, NULL };
    B10__SpanGrid local_grid = B10__SPAN_GRID__INIT, remote_grid = B10__SPAN_GRID__INIT;
    b10_xfer_t *xfer = calloc(1, sizeof(*xfer));
    if (xfer == NULL)
        return conn_reject(conn, B10_ERR_NO_MEMORY, "out of memory for a transfer");
    xfer->conn = conn;
    xfer->status = B10_IN_PROGRESS;
    xfer->times.submit_ns = submit_ns;
    sx.op = params->op == B10_OP_READ ? B10__OP__OP_READ : B10__OP__OP_WRITE;
    if (params->field_mask & B10_XFER_FIELD_SYNC)
        sx.sync_msg = (ProtobufCBinaryData){ .len = params->sync_length,
                                             .data = (uint8_t *)params->sync_msg };
    sx.remote_agent = (char *)params->remote_agent;
    sx.deadline_ms = params->field_mask & B10_XFER_FIELD_DEADLINE ? params->deadline_ms : 0;
    msg.body_case = B10__CLIENT_MSG__BODY_SUBMIT;
    msg.submit = &sx;

    pthread_mutex_lock(&conn->lock);
    /*
     * Written under the lock, and the daemon copies them out before it
     * answers, which this thread awaits still holding it: no other request
     * rewrites them meanwhile. A boot that does not have the arena yet is
     * given it first; one that came up between the two requests never had
     * it and refuses the spans, so such a request goes again in the frame.
     */
    uint64_t boot = conn->boot;
    bool in_arena = params->count >= ARENA_MIN_SPANS && conn->daemon_arena, as_picks = false;
    /* Asked again once the arena is ready: readying it may meet a restarted daemon. */
    if (in_arena && xfer_sends_picks(conn, params, picks) &&
        params->count * 8 <= conn->max_frame && conn_arena_ready(conn, params->count * 8) == B10_OK)
        as_picks = xfer_sends_picks(conn, params, picks);
    if (in_arena && !as_picks)
        in_arena = 2 * table <= conn->max_frame && conn_arena_ready(conn, 2 * table) == B10_OK;
    if (as_picks) {
        status = xfer_write_picks(conn, params, picks, conn->arena);
        if (status == B10_OK &&
            (xfer_grid_msg(picks[0].grid, &local_grid, &grid_bases[0]) != B10_OK ||
             xfer_grid_msg(picks[1].grid, &remote_grid, &grid_bases[1]) != B10_OK)) {
            conn_set_detail(conn, "out of memory for the grids");
            status = B10_ERR_NO_MEMORY;
        }
    } else {
        status = in_arena ? xfer_check_spans(conn, params, picks, conn->arena)
                          : xfer_frame_tables(conn, params, picks, &sx, &spans);
    }
    if (status != B10_OK) {
        pthread_mutex_unlock(&conn->lock);
        goto free_all;
    }
    if (as_picks) {
        sx.arena_picks = params->count;
        sx.local_grid = &local_grid;
        sx.remote_grid = &remote_grid;
    } else if (in_arena) {
        sx.arena_spans = params->count;
    }
    if (in_arena) {
        status = conn_request(conn, &msg, -1, B10__REPLY__BODY_SUBMIT, xfer, NULL);
        /*
         * Unanswered, the submit may still be read later: the daemon takes frames in order
         * and copies the tables only when it reaches this one. The next request must not
         * rewrite them, so this arena is let go (the daemon keeps its own descriptor of it)
         * and the next large one makes and hands over a fresh one.
         */
        if (conn->unanswered)
            conn_arena_drop(conn);
        if (status == B10_ERR_INVALID_ARG && conn->boot != boot && conn->arena_boot != conn->boot) {
            sx.arena_spans = 0;
            sx.arena_picks = 0;
            sx.local_grid = sx.remote_grid = NULL;
            in_arena = false;
            status = xfer_frame_tables(conn, params, picks, &sx, &spans);
            if (status != B10_OK) {
                pthread_mutex_unlock(&conn->lock);
                goto free_all;
            }
        }
    }
    if (!in_arena)
        status = conn_request(conn, &msg, -1, B10__REPLY__BODY_SUBMIT, xfer, NULL);
    if (status == B10_OK) {
        /* Under the lock: another thread's progress may read its XferDone any moment. */
        xfer->times.replied_ns = (uint64_t)now_ns();
        xfer->times.field_mask |= B10_XFER_TIMES_CLIENT;
    } else if (status == B10_ERR_UNKNOWN_AGENT) {
        loaded_why_not(conn, params->remote_agent);
    }
    pthread_mutex_unlock(&conn->lock);
    if (status != B10_OK)
        goto free_all;
    free(spans);
    free(grid_bases[0]);
    free(grid_bases[1]);
    /* The reply's dispatch already put xfer into the table and the list. */
    *xfer_p = xfer;
    return B10_OK;

free_all:
    free(spans);
    free(grid_bases[0]);
    free(grid_bases[1]);
    xfer_free(xfer);
    return status;
}

b10_status_t b10_xfer_status(b10_xfer_t *xfer)
{
    if (xfer == NULL)
        return B10_ERR_INVALID_ARG;
    b10_conn_t *conn = xfer->conn;
    pthread_mutex_lock(&conn->lock);
    /* A caller that only polls status still sees news without b10_conn_progress. */
    if (xfer->status == B10_IN_PROGRESS)
        conn_poke(conn);
    b10_status_t status = xfer->status;
    pthread_mutex_unlock(&conn->lock);
    return status;
}

b10_status_t b10_xfer_wait(b10_xfer_t *xfer, int timeout_ms)
{
    if (xfer == NULL)
        return B10_ERR_INVALID_ARG;
    b10_conn_t *conn = xfer->conn;
    int64_t deadline = deadline_after(timeout_ms);

    pthread_mutex_lock(&conn->lock);
    conn_poke(conn);
    /* A dead connection has already finished every transfer in the table. */
    while (xfer->status == B10_IN_PROGRESS && conn->dead == B10_OK && now_ns() < deadline)
        conn_wait_round(conn, deadline);
    b10_status_t status = xfer->status;
    pthread_mutex_unlock(&conn->lock);
    return status;
}

b10_status_t b10_xfer_cancel(b10_xfer_t *xfer)
{
    B10__CancelXfer cx = B10__CANCEL_XFER__INIT;
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;

    if (xfer == NULL)
        return B10_ERR_INVALID_ARG;
    b10_conn_t *conn = xfer->conn;
    cx.xfer_id = xfer->id;
    msg.body_case = B10__CLIENT_MSG__BODY_CANCEL;
    msg.cancel = &cx;
    pthread_mutex_lock(&conn->lock);
    b10_status_t status = conn->dead;
    /* Finished already: there is nothing left to cancel, and that is no error. */
    if (status == B10_OK && xfer->status == B10_IN_PROGRESS)
        status = conn_request(conn, &msg, -1, B10__REPLY__BODY__NOT_SET, NULL, NULL);
    pthread_mutex_unlock(&conn->lock);
    return status;
}

const char *b10_xfer_detail(b10_xfer_t *xfer)
{
    if (xfer == NULL)
        return "";
    b10_conn_t *conn = xfer->conn;
    pthread_mutex_lock(&conn->lock);
    const char *detail = xfer->detail != NULL ? xfer->detail : "";
    pthread_mutex_unlock(&conn->lock);
    return detail;
}

uint64_t b10_xfer_id(b10_xfer_t *xfer)
{
    return xfer == NULL ? 0 : xfer->id;
}

b10_status_t b10_xfer_times(b10_xfer_t *xfer, b10_xfer_times_t *times_p)
{
    if (xfer == NULL || times_p == NULL)
        return B10_ERR_INVALID_ARG;
    b10_conn_t *conn = xfer->conn;
    pthread_mutex_lock(&conn->lock);
    if (xfer->status == B10_IN_PROGRESS)
        conn_poke(conn);
    b10_status_t status = xfer->status == B10_IN_PROGRESS ? B10_IN_PROGRESS : B10_OK;
    if (status == B10_OK)
        *times_p = xfer->times;
    pthread_mutex_unlock(&conn->lock);
    return status;
}

/*
 * ReleaseXfer is fire-and-forget: its reply finds no pending request and is
 * dropped, and a later XferDone finds no handle and is ignored.
 */
void b10_xfer_release(b10_xfer_t *xfer)
{
    B10__ReleaseXfer rx = B10__RELEASE_XFER__INIT;
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;
    struct frame_iov frame;

    if (xfer == NULL)
        return;
    b10_conn_t *conn = xfer->conn;
    rx.xfer_id = xfer->id;
    msg.body_case = B10__CLIENT_MSG__BODY_RELEASE;
    msg.release = &rx;
    pthread_mutex_lock(&conn->lock);
    xfer_table_remove(conn, xfer);
    xfer_list_remove(conn, xfer);
    /*
     * A daemon of a later boot never knew the id: nothing to release there.
     * Nor does one that told the outcome: it forgot the transfer as it sent
     * XferDone, so the message would only cost both ends a wake-up (a
     * small transfer's share of them is most of its time).
     */
    if (conn->dead == B10_OK && xfer->boot == conn->boot && !conn->reviving &&
        xfer->status == B10_IN_PROGRESS) {
        msg.seq = conn->next_seq;
        if (frame_encode_iov(&msg.base, conn->max_frame, &frame) == 0) {
            conn->next_seq++;
            /*
             * Nobody waits for this; a failure to send is either a dead
             * connection (recorded by conn_send) or a daemon that will drop
             * the transfer with the client anyway.
             */
            (void)conn_send(conn, &frame, -1, deadline_after(conn->request_timeout_ms));
            frame_iov_free(&frame);
        } else {
            conn_log(conn, B10_LOG_WARNING, "transfer %llu: no memory to send its release",
                     (unsigned long long)xfer->id);
        }
    }
    pthread_mutex_unlock(&conn->lock);
    xfer_free(xfer);
}
