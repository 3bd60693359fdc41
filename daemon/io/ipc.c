/* ipc.c — see ipc.h. */
#include "ipc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "frame.h"
#include "status.h"

#define IPC_READ_BYTES   (64 * 1024)
#define IPC_MAX_FDS      4            /* descriptors waiting for their frame */
#define IPC_MAX_QUEUED   (256u << 20) /* a client that reads nothing is dropped past this */
/*
 * One loop turn reads at most this much of one connection, so that a
 * client streaming frames shares the loop with the others (and with
 * b10ctl, the peers, the liveness timer); the rest waits for the next turn.
 * A frame's bytes are not always its work: a submit of a few bytes may name
 * a million spans in the span arena, which the daemon reads, checks and
 * plans, so its user charges that work too (ipc_conn_charge, session.c: what
 * each span costs), and the turn ends sooner.
 */
#define IPC_FRAMES_PER_TURN 32u
#define IPC_BYTES_PER_TURN  (4u << 20)
/*
 * Connections that said neither Hello nor an admin request yet: at most 64,
 * 16 of one uid. Past either the oldest of the uid that holds the most go
 * for a new one: a user flooding connections pushes out its own.
 */
#define IPC_MAX_FRESH    64u
#define IPC_MAX_FRESH_PER_UID 16u
/* Besides ranks, fresh and non-operators' b10ctl connections (ipc.h): operators' b10ctl. */
#define IPC_OPERATOR_RESERVE 16u

struct ipc_out {
    struct list node;
    uint8_t *buf;
    size_t length;
    size_t done;
    bool notice;                /* counts in ipc_conn.notices too */
};

/* What one connection may still be fed this turn. */
struct ipc_budget {
    uint32_t frames;
    size_t bytes;
};

struct ipc_conn {
    struct list node;           /* ipc.conns */
    struct ipc *ipc;
    int fd;
    uv_poll_t poll;
    struct frame_reader reader;
    int fds[IPC_MAX_FDS];
    uint32_t nfds;
    struct list out;            /* struct ipc_out */
    size_t queued;
    size_t notices;             /* of queued, the bytes of notices (session.c bounds them) */
    int events;
    bool closing;
    bool doomed;                /* to be dropped by the reaper, outside any of its callbacks */
    void *user;                 /* the hooks' (a session), from open to close */
    pid_t pid;                  /* of the connecting process (SO_PEERCRED) */
    uid_t uid;
    struct list fresh_node;     /* ipc.fresh, until its user is introduced */
    uint64_t accepted_ms;
    /* Fairness: bytes read past a turn's budget, fed on the next turn. */
    uint8_t *backlog;
    size_t backlog_len, backlog_off;
    bool paused;                /* its user waits on work off the loop: no frame is fed */
    bool in_ready;              /* in ipc.ready */
    struct list ready_node;
    struct ipc_budget budget;   /* of the turn being read: the frames' bytes and the work charged */
};

struct ipc {
    struct b10d *d;
    const struct ipc_hooks *hooks;
    int fd;
    char path[108];
    bool adopted;               /* from socket activation: the path is systemd's, not ours to unlink */
    uv_poll_t poll;
    uv_idle_t reaper;           /* drops doomed connections on the next loop turn */
    struct list conns;
    struct list fresh;          /* struct ipc_conn.fresh_node, oldest first */
    uint32_t nfresh;
    uint64_t fresh_log_ms;      /* evictions of fresh connections log at most once a second */
    struct list ready;          /* struct ipc_conn.ready_node: frames wait for the next turn */
    uv_idle_t resume;
    uv_timer_t sweep;           /* fresh connections past --hello-timeout-ms go */
};

static void ipc_conn_on_closed(uv_handle_t *handle)
{
    struct ipc_conn *c = handle->data;
    struct list *pos, *tmp;

    list_for_each_safe(pos, tmp, &c->out) {
        struct ipc_out *o = list_entry(pos, struct ipc_out, node);
        list_remove(pos);
        free(o->buf);
        free(o);
    }
    for (uint32_t i = 0; i < c->nfds; i++)
        close(c->fds[i]);
    free(c->backlog);
    frame_reader_free(&c->reader);
    close(c->fd);
    free(c);
}

static b10_status_t ipc_conn_flush(struct ipc_conn *c);

static void ipc_conn_unfresh(struct ipc_conn *c)
{
    if (list_empty(&c->fresh_node))
        return;
    list_remove(&c->fresh_node);
    c->ipc->nfresh--;
}

void ipc_conn_close(struct ipc_conn *c)
{
    if (c->closing)
        return;
    list_remove(&c->node);
    list_remove(&c->ready_node);
    c->in_ready = false;
    ipc_conn_unfresh(c);
    /* What is queued (replies, done notices) goes out as far as the socket takes it now. */
    c->ipc->hooks->close(c->user);
    c->user = NULL;
    ipc_conn_flush(c);
    c->closing = true;
    uv_close((uv_handle_t *)&c->poll, ipc_conn_on_closed);
}

static void ipc_conn_on_poll(uv_poll_t *handle, int status, int events);

static void ipc_conn_want(struct ipc_conn *c, int events)
{
    if (c->closing || events == c->events)
        return;
    c->events = events;
    if (events == 0)
        uv_poll_stop(&c->poll);
    else
        uv_poll_start(&c->poll, events, ipc_conn_on_poll);
}

/* Readable only while nothing of it waits: a backlog, a pause, its turn in ipc.ready. */
static void ipc_conn_events(struct ipc_conn *c)
{
    bool read = !c->paused && c->backlog == NULL && !c->in_ready;
    ipc_conn_want(c, (read ? UV_READABLE : 0) | (list_empty(&c->out) ? 0 : UV_WRITABLE));
}

/* Write what the socket takes now; the rest waits for POLLOUT. */
static b10_status_t ipc_conn_flush(struct ipc_conn *c)
{
    while (!list_empty(&c->out)) {
        struct ipc_out *o = list_entry(c->out.next, struct ipc_out, node);
        ssize_t n = send(c->fd, o->buf + o->done, o->length - o->done, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            if (errno == EINTR)
                continue;
            return B10_ERR_CLIENT_GONE;
        }
        o->done += (size_t)n;
        if (o->done < o->length)
            continue;
        c->queued -= o->length;
        if (o->notice)
            c->notices -= o->length;
        list_remove(&o->node);
        free(o->buf);
        free(o);
    }
    ipc_conn_events(c);
    return B10_OK;
}

static void ipc_on_reap(uv_idle_t *handle)
{
    struct ipc *ipc = handle->data;
    struct list *pos, *tmp;

    uv_idle_stop(handle);
    list_for_each_safe(pos, tmp, &ipc->conns) {
        struct ipc_conn *c = list_entry(pos, struct ipc_conn, node);
        if (c->doomed)
            ipc_conn_close(c);
    }
}

int ipc_conn_take_fd(struct ipc_conn *c)
{
    if (c->nfds == 0)
        return -1;
    int fd = c->fds[0];
    memmove(&c->fds[0], &c->fds[1], (c->nfds - 1) * sizeof(int));
    c->nfds--;
    return fd;
}

static b10_status_t ipc_queue(struct ipc_conn *c, uint8_t *frame, size_t length, bool notice)
{
    struct ipc_out *o;

    if (c->closing || c->doomed)
        goto drop;
    if (c->queued + length > IPC_MAX_QUEUED || (o = calloc(1, sizeof(*o))) == NULL) {
        /*
         * A client that reads nothing cannot hold daemon memory hostage. The
         * caller may be deep in this client's session: drop it on the next
         * loop turn, not now.
         */
        log_warning("client %s is not reading what the daemon sends; dropping it",
                    c->user != NULL ? c->ipc->hooks->name(c->user) : "?");
        c->doomed = true;
        uv_idle_start(&c->ipc->reaper, ipc_on_reap);
        goto drop;
    }
    o->buf = frame;
    o->length = length;
    o->notice = notice;
    list_insert_tail(&c->out, &o->node);
    c->queued += length;
    if (notice)
        c->notices += length;
    return ipc_conn_flush(c);
drop:
    free(frame);
    return B10_ERR_CLIENT_GONE;
}

b10_status_t ipc_send(struct ipc_conn *c, uint8_t *frame, size_t length)
{
    return ipc_queue(c, frame, length, false);
}

b10_status_t ipc_send_notice(struct ipc_conn *c, uint8_t *frame, size_t length)
{
    return ipc_queue(c, frame, length, true);
}

size_t ipc_notice_bytes(const struct ipc_conn *c)
{
    return c->notices;
}

/* Keep the descriptors that came with a message, bounded. */
static int ipc_conn_take_fds(struct ipc_conn *c, struct msghdr *mh)
{
    int bad = 0;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm != NULL; cm = CMSG_NXTHDR(mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int *fds = (int *)CMSG_DATA(cm);
        for (size_t i = 0; i < n; i++) {
            if (c->nfds < IPC_MAX_FDS)
                c->fds[c->nfds++] = fds[i];
            else {
                close(fds[i]);
                bad = -1;
            }
        }
    }
    if (mh->msg_flags & MSG_CTRUNC)
        bad = -1;
    return bad;
}

static void ipc_on_resume(uv_idle_t *handle);

/* Come back to c on the next loop turn: its frames wait. */
static void ipc_conn_later(struct ipc_conn *c)
{
    if (!c->in_ready && !c->closing && !c->doomed) {
        c->in_ready = true;
        list_insert_tail(&c->ipc->ready, &c->ready_node);
        uv_idle_start(&c->ipc->resume, ipc_on_resume);
    }
    ipc_conn_events(c);
}

/*
 * Feed n bytes to c's frame reader, complete frames to its user, within
 * the budget and while it is not paused. *used_p: how many were consumed
 * (the rest is the caller's to keep). 0, or -1 to drop the connection.
 */
static int ipc_conn_feed(struct ipc_conn *c, const uint8_t *buf, size_t n, size_t *used_p)
{
    struct ipc_budget *b = &c->budget;
    size_t off = 0;

    while (off < n && !c->paused && b->frames > 0 && b->bytes > 0) {
        size_t used;
        enum frame_result r = frame_reader_feed(&c->reader, buf + off, n - off, &used);
        off += used;
        if (r == FRAME_MORE)
            break;
        if (r != FRAME_READY) {
            c->ipc->d->stats.client_protocol_errors++;
            log_warning("client frame of %u bytes exceeds --max-frame; dropping the client",
                        frame_get_u32(c->reader.header));
            return -1;
        }
        uint32_t length;
        uint8_t *frame = frame_reader_take(&c->reader, &length);
        b10_status_t st = c->ipc->hooks->on_frame(c->user, frame, length);
        free(frame);
        b->frames--;
        b->bytes -= length < b->bytes ? length : b->bytes;
        if ((st != B10_OK && st != B10_IN_PROGRESS) || c->closing || c->doomed)
            return -1;
        if (st == B10_IN_PROGRESS)
            c->paused = true;           /* until ipc_conn_resume */
        if (c->ipc->hooks->introduced(c->user))
            ipc_conn_unfresh(c);
    }
    *used_p = off;
    return 0;
}

/* One turn's worth of c: its backlog first, then the socket. 0, or -1 to drop it. */
static int ipc_conn_read(struct ipc_conn *c)
{
    struct ipc_budget *b = &c->budget;
    uint8_t buf[IPC_READ_BYTES];
    union {
        struct cmsghdr align;
        char space[CMSG_SPACE(sizeof(int) * IPC_MAX_FDS)];
    } control;
    size_t used;

    *b = (struct ipc_budget){ IPC_FRAMES_PER_TURN, IPC_BYTES_PER_TURN };
    if (c->backlog != NULL) {
        if (ipc_conn_feed(c, c->backlog + c->backlog_off, c->backlog_len - c->backlog_off,
                          &used) != 0)
            return -1;
        c->backlog_off += used;
        if (c->backlog_off < c->backlog_len) {
            if (!c->paused)
                ipc_conn_later(c);
            return 0;
        }
        free(c->backlog);
        c->backlog = NULL;
    }
    while (!c->paused && b->frames > 0 && b->bytes > 0) {
        struct iovec iov = { buf, sizeof(buf) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.space,
                             .msg_controllen = sizeof(control.space) };
        ssize_t n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                ipc_conn_events(c);
                return 0;
            }
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0)
            return -1;
        /*
         * A descriptor rides with the first bytes of its frame, so it is here
         * by the time that frame completes; the frame's handler takes it.
         */
        if (ipc_conn_take_fds(c, &mh) != 0) {
            log_warning("client %s sent too many descriptors; dropping it",
                        c->user != NULL ? c->ipc->hooks->name(c->user) : "?");
            return -1;
        }
        if (ipc_conn_feed(c, buf, (size_t)n, &used) != 0)
            return -1;
        if (used < (size_t)n) {
            c->backlog_len = (size_t)n - used;
            c->backlog_off = 0;
            if ((c->backlog = malloc(c->backlog_len)) == NULL)
                return -1;
            memcpy(c->backlog, buf + used, c->backlog_len);
            if (!c->paused)
                ipc_conn_later(c);
            ipc_conn_events(c);
            return 0;
        }
    }
    /* The budget spent, more may wait in the socket: after the others' turn. */
    if (!c->paused)
        ipc_conn_later(c);
    ipc_conn_events(c);
    return 0;
}

void ipc_conn_charge(struct ipc_conn *c, size_t bytes)
{
    c->budget.bytes -= bytes < c->budget.bytes ? bytes : c->budget.bytes;
}

void ipc_conn_resume(struct ipc_conn *c)
{
    if (c->closing || c->doomed || !c->paused)
        return;
    c->paused = false;
    ipc_conn_later(c);
}

/* The connections whose frames waited: one turn each, then back to the poll. */
static void ipc_on_resume(uv_idle_t *handle)
{
    struct ipc *ipc = handle->data;
    struct list turn;

    list_init(&turn);
    list_splice_tail(&turn, &ipc->ready);
    while (!list_empty(&turn)) {
        struct ipc_conn *c = list_entry(turn.next, struct ipc_conn, ready_node);
        list_remove(&c->ready_node);
        c->in_ready = false;
        if (ipc_conn_read(c) != 0) {
            if (!c->closing)
                ipc_conn_flush(c);
            ipc_conn_close(c);
        }
    }
    if (list_empty(&ipc->ready))
        uv_idle_stop(handle);
}

static void ipc_conn_on_poll(uv_poll_t *handle, int status, int events)
{
    struct ipc_conn *c = handle->data;

    if (status < 0 || ((events & UV_WRITABLE) && ipc_conn_flush(c) != B10_OK) ||
        ((events & UV_READABLE) && ipc_conn_read(c) != 0)) {
        /* Let queued error replies out before dropping, as far as the socket takes them now. */
        if (!c->closing)
            ipc_conn_flush(c);
        ipc_conn_close(c);
    }
}

/* How many fresh connections uid holds, and its oldest. */
static uint32_t ipc_fresh_of(struct ipc *ipc, uid_t uid, struct ipc_conn **oldest_p)
{
    uint32_t n = 0;
    *oldest_p = NULL;
    for (struct list *p = ipc->fresh.next; p != &ipc->fresh; p = p->next) {
        struct ipc_conn *c = list_entry(p, struct ipc_conn, fresh_node);
        if (c->uid != uid)
            continue;
        if (n++ == 0)
            *oldest_p = c;
    }
    return n;
}

/* The fresh connection to drop for a new one of uid: NULL while there is room. */
static struct ipc_conn *ipc_fresh_victim(struct ipc *ipc, uid_t uid)
{
    struct ipc_conn *own, *victim = NULL;
    uint32_t most = 0;

    if (ipc_fresh_of(ipc, uid, &own) >= IPC_MAX_FRESH_PER_UID)
        return own;
    if (ipc->nfresh < IPC_MAX_FRESH)
        return NULL;
    for (struct list *p = ipc->fresh.next; p != &ipc->fresh; p = p->next) {
        struct ipc_conn *c = list_entry(p, struct ipc_conn, fresh_node), *first;
        uint32_t n = ipc_fresh_of(ipc, c->uid, &first);
        if (n > most) {
            most = n;
            victim = first;
        }
    }
    return victim;
}

/* Drop fresh connection c (one that has not said who it is). */
static void ipc_evict_fresh(struct ipc *ipc, struct ipc_conn *c, const char *why)
{
    struct b10d *d = ipc->d;
    if (c == NULL)
        return;
    uint64_t now = d->now_ms(d);
    if (now - ipc->fresh_log_ms >= 1000) {
        ipc->fresh_log_ms = now;
        log_warning("dropping client pid %d uid %u: it said neither Hello nor a b10ctl request "
                    "in %" PRIu64 " ms, %s (%u such connections at most, %u of one user)",
                    (int)c->pid, (unsigned)c->uid, now - c->accepted_ms, why,
                    IPC_MAX_FRESH, IPC_MAX_FRESH_PER_UID);
    }
    ipc_conn_close(c);
}

/* Connections that have said nothing past --hello-timeout-ms go. */
static void ipc_on_sweep(uv_timer_t *timer)
{
    struct ipc *ipc = timer->data;
    uint64_t now = ipc->d->now_ms(ipc->d);
    while (!list_empty(&ipc->fresh)) {
        struct ipc_conn *c = list_entry(ipc->fresh.next, struct ipc_conn, fresh_node);
        if (now - c->accepted_ms < ipc->d->cfg.hello_timeout_ms)
            break;
        ipc_evict_fresh(ipc, c, "past --hello-timeout-ms");
    }
}

static void ipc_on_accept(uv_poll_t *handle, int status, int events)
{
    struct ipc *ipc = handle->data;
    struct b10d *d = ipc->d;

    for (;;) {
        int fd = accept4(ipc->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                log_warning("accept: %s", strerror(errno));
            return;
        }
        struct ucred cred;
        socklen_t len = sizeof(cred);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
            close(fd);
            continue;
        }
        /*
         * --max-clients bounds the ranks, at their Hello; admin.c the b10ctl
         * connections of non-operators. Connections yet to say who they are
         * are bounded apart (IPC_MAX_FRESH): the oldest gives way to a new
         * one, so idle connections lock out neither ranks nor b10ctl.
         */
        uint32_t cap = d->cfg.max_clients + IPC_MAX_FRESH + IPC_MAX_ADMIN + IPC_OPERATOR_RESERVE;
        ipc_evict_fresh(ipc, ipc_fresh_victim(ipc, cred.uid), "for a new connection");
        if (d->nsessions >= cap && !list_empty(&ipc->fresh))
            ipc_evict_fresh(ipc, list_entry(ipc->fresh.next, struct ipc_conn, fresh_node),
                            "for a new connection");
        if (d->nsessions >= cap) {
            log_warning("refusing client pid %d: %u connections (--max-clients %u, and %u for "
                        "b10ctl and connections yet to say Hello)", (int)cred.pid, d->nsessions,
                        d->cfg.max_clients, cap - d->cfg.max_clients);
            close(fd);
            continue;
        }
        struct ipc_conn *c = calloc(1, sizeof(*c));
        if (c == NULL) {
            close(fd);
            continue;
        }
        c->ipc = ipc;
        c->fd = fd;
        list_init(&c->out);
        list_init(&c->ready_node);
        c->accepted_ms = d->now_ms(d);
        frame_reader_init(&c->reader, d->cfg.max_frame);
        c->pid = cred.pid;
        c->uid = cred.uid;
        c->user = ipc->hooks->open(d, c, cred.pid, cred.uid, cred.gid);
        if (c->user == NULL) {
            close(fd);
            free(c);
            continue;
        }
        uv_poll_init(d->loop, &c->poll, fd);
        c->poll.data = c;
        list_insert_tail(&ipc->conns, &c->node);
        list_insert_tail(&ipc->fresh, &c->fresh_node);
        ipc->nfresh++;
        ipc_conn_want(c, UV_READABLE);
    }
}

static void ipc_lists_init(struct ipc *ipc)
{
    list_init(&ipc->conns);
    list_init(&ipc->fresh);
    list_init(&ipc->ready);
}

static void ipc_start(struct ipc *ipc)
{
    struct b10d *d = ipc->d;
    uint32_t every = d->cfg.hello_timeout_ms / 4 > 50 ? d->cfg.hello_timeout_ms / 4 : 50;

    uv_poll_init(d->loop, &ipc->poll, ipc->fd);
    uv_idle_init(d->loop, &ipc->reaper);
    uv_idle_init(d->loop, &ipc->resume);
    uv_timer_init(d->loop, &ipc->sweep);
    ipc->poll.data = ipc->reaper.data = ipc->resume.data = ipc->sweep.data = ipc;
    uv_poll_start(&ipc->poll, UV_READABLE, ipc_on_accept);
    uv_timer_start(&ipc->sweep, ipc_on_sweep, every, every);
}

/* A call on the listening socket failed: said once, with the path; errno's status. */
static b10_status_t ipc_listen_failed(const char *path, const char *call)
{
    int err = errno;
    log_err("cannot listen on %s: %s: %s", path, call, strerror(err));
    return status_from_errno(err);
}

b10_status_t ipc_create(struct b10d *d, const char *path, const struct ipc_hooks *hooks,
                        struct ipc **ipc_p)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    struct stat st;
    b10_status_t status;
    struct ipc *ipc = calloc(1, sizeof(*ipc));

    if (ipc == NULL)
        return B10_ERR_NO_MEMORY;
    ipc->d = d;
    ipc->hooks = hooks;
    ipc_lists_init(ipc);
    snprintf(ipc->path, sizeof(ipc->path), "%s", path);
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    ipc->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (ipc->fd < 0) {
        status = ipc_listen_failed(path, "socket");
        goto err;
    }
    /*
     * A socket left by an earlier run goes. One that answers belongs to a
     * daemon still running, and anything else at the path is not ours.
     */
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            log_err("%s exists and is not a socket", path);
            status = B10_ERR_EXISTS;
            goto err;
        }
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool live = probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0;
        if (probe >= 0)
            close(probe);
        if (live) {
            log_err("%s is in use by a running daemon", path);
            status = B10_ERR_EXISTS;
            goto err;
        }
        unlink(path);
    }
    if (bind(ipc->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        status = ipc_listen_failed(path, "bind");
        goto err;
    }
    if (chmod(path, 0660) != 0) {
        status = ipc_listen_failed(path, "chmod");
        goto err;
    }
    if (listen(ipc->fd, 128) != 0) {
        status = ipc_listen_failed(path, "listen");
        goto err;
    }
    ipc_start(ipc);
    *ipc_p = ipc;
    return B10_OK;
err:
    if (ipc->fd >= 0)
        close(ipc->fd);
    free(ipc);
    return status;
}

/*
 * A listening socket systemd passed (socket activation). Its path, for the
 * logs and the admin check, is what it is bound to, whatever --socket says.
 */
b10_status_t ipc_adopt(struct b10d *d, int fd, const struct ipc_hooks *hooks, struct ipc **ipc_p)
{
    struct sockaddr_un sa;
    socklen_t len = sizeof(sa);
    struct ipc *ipc = calloc(1, sizeof(*ipc));
    int flags;

    if (ipc == NULL)
        return B10_ERR_NO_MEMORY;
    memset(&sa, 0, sizeof(sa));
    errno = 0;
    if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0 || sa.sun_family != AF_UNIX ||
        (flags = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0 ||
        fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
        int err = errno ? errno : EINVAL;
        log_err("socket activation: descriptor %d: %s", fd, strerror(err));
        free(ipc);
        return status_from_errno(err);
    }
    ipc->d = d;
    ipc->hooks = hooks;
    ipc->fd = fd;
    ipc->adopted = true;
    ipc_lists_init(ipc);
    /* An abstract or unnamed socket has no path: say so rather than show garbage. */
    if (len > offsetof(struct sockaddr_un, sun_path) && sa.sun_path[0] != '\0')
        snprintf(ipc->path, sizeof(ipc->path), "%.*s",
                 (int)(len - offsetof(struct sockaddr_un, sun_path)), sa.sun_path);
    else
        snprintf(ipc->path, sizeof(ipc->path), "(unnamed)");
    ipc_start(ipc);
    *ipc_p = ipc;
    return B10_OK;
}

const char *ipc_path(const struct ipc *ipc)
{
    return ipc->path;
}

/* The peer's supplementary groups as the kernel recorded them at connect (SO_PEERGROUPS). */
bool ipc_conn_in_group(struct ipc_conn *c, gid_t gid)
{
    gid_t groups[256];
    socklen_t len = sizeof(groups);

    if (getsockopt(c->fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) != 0)
        return false;
    for (size_t i = 0; i < len / sizeof(gid_t); i++)
        if (groups[i] == gid)
            return true;
    return false;
}

static void ipc_on_closed(uv_handle_t *handle)
{
    struct ipc *ipc = handle->data;
    close(ipc->fd);
    free(ipc);
}

void ipc_destroy(struct ipc *ipc)
{
    struct list *pos, *tmp;

    if (ipc == NULL)
        return;
    list_for_each_safe(pos, tmp, &ipc->conns)
        ipc_conn_close(list_entry(pos, struct ipc_conn, node));
    if (!ipc->adopted)
        unlink(ipc->path);
    uv_close((uv_handle_t *)&ipc->reaper, NULL);
    uv_close((uv_handle_t *)&ipc->resume, NULL);
    uv_close((uv_handle_t *)&ipc->sweep, NULL);
    uv_close((uv_handle_t *)&ipc->poll, ipc_on_closed);
}
