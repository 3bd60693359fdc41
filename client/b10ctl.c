/*
 * b10ctl — inspect and steer a running b10d.
 *
 * It speaks the daemon's socket protocol directly (proto/frame.h framing,
 * ClientMsg.admin requests of proto/admin.proto) on its own connection,
 * which never says Hello and so is never a rank. The daemon answers only
 * root, its own user and the socket's group.
 *
 * Output: aligned tables for people, --json (one object per line) for
 * scripts, Prometheus text for `metrics`. Exit status, for scripts:
 *   0  done                      4  no such transfer (cancel)
 *   1  the daemon refused or     5  not permitted (root or the socket's group)
 *      failed the request        6  drain: transfers still in flight when the wait ended
 *   2  usage                     3  daemon unreachable, or the connection broke
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <b10/b10.h>

#include "b10.pb-c.h"
#include "frame.h"

#define B10CTL_VERSION "0.1.0"
#define SOCKET_DEFAULT "/run/b10d/b10d.sock"

enum {
    EXIT_OK = 0,
    EXIT_REFUSED = 1,
    EXIT_USAGE = 2,
    EXIT_UNREACHABLE = 3,
    EXIT_NOT_FOUND = 4,
    EXIT_PERMISSION = 5,
    EXIT_NOT_DRAINED = 6,
};

struct opts {
    const char *socket_path;
    bool json;
    bool watch;
    double watch_s;
    long count;                 /* --watch rounds; 0: until interrupted */
    uint32_t limit;
    int timeout_ms;
    uint32_t drain_timeout_ms;
    bool no_wait;
};

struct conn {
    int fd;
    uint64_t seq;
    int timeout_ms;
    struct frame_reader reader;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("b10ctl: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---------------------------------------------------------------- the connection */

static int conn_open(struct conn *c, const char *path, int timeout_ms)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };

    memset(c, 0, sizeof(*c));
    c->timeout_ms = timeout_ms;
    if (strlen(path) >= sizeof(sa.sun_path)) {
        fail("socket path too long: %s", path);
        return EXIT_USAGE;
    }
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        int err = errno;
        fail("cannot reach b10d at %s: %s", path, strerror(err));
        if (c->fd >= 0)
            close(c->fd);
        c->fd = -1;
        return err == EACCES ? EXIT_PERMISSION : EXIT_UNREACHABLE;
    }
    /* The daemon may send large answers; its frames are bounded by its own --max-frame. */
    frame_reader_init(&c->reader, FRAME_MAX_LIMIT);
    return EXIT_OK;
}

static void conn_close(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    frame_reader_free(&c->reader);
}

/* Wait for fd to be ready for events until deadline; 0, or -1 with a message. */
static int conn_wait(struct conn *c, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0) {
            fail("b10d did not answer within %d ms", c->timeout_ms);
            return -1;
        }
        struct pollfd pfd = { .fd = c->fd, .events = events };
        int n = poll(&pfd, 1, (int)left);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR) {
            fail("poll: %s", strerror(errno));
            return -1;
        }
    }
}

/* One admin request, its answer in *reply_p (free with b10__daemon_msg__free_unpacked). */
static int conn_request(struct conn *c, B10__AdminRequest *req, B10__DaemonMsg **msg_p)
{
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;
    uint8_t *frame;
    size_t length, done = 0;
    int64_t deadline = now_ms() + c->timeout_ms;

    msg.seq = ++c->seq;
    msg.body_case = B10__CLIENT_MSG__BODY_ADMIN;
    msg.admin = req;
    if (frame_encode(&msg.base, FRAME_MAX_DEFAULT, &frame, &length) != 0) {
        fail("cannot encode the request");
        return EXIT_UNREACHABLE;
    }
    while (done < length) {
        ssize_t n = send(c->fd, frame + done, length - done, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (conn_wait(c, POLLOUT, deadline) != 0)
                goto broken;
            continue;
        }
        if (n < 0) {
            fail("sending to b10d: %s", strerror(errno));
            goto broken;
        }
        done += (size_t)n;
    }
    free(frame);
    frame = NULL;
    for (;;) {
        uint8_t buf[65536];
        if (conn_wait(c, POLLIN, deadline) != 0)
            goto broken;
        ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n <= 0) {
            fail("b10d closed the connection%s%s", n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
            goto broken;
        }
        size_t off = 0;
        while (off < (size_t)n) {
            size_t used;
            enum frame_result r = frame_reader_feed(&c->reader, buf + off, (size_t)n - off, &used);
            off += used;
            if (r == FRAME_MORE)
                break;
            if (r != FRAME_READY) {
                fail("b10d sent a malformed frame");
                goto broken;
            }
            uint32_t flen;
            uint8_t *body = frame_reader_take(&c->reader, &flen);
            B10__DaemonMsg *dm = b10__daemon_msg__unpack(NULL, flen, body);
            free(body);
            if (dm == NULL) {
                fail("b10d sent an undecodable message");
                goto broken;
            }
            if (dm->body_case == B10__DAEMON_MSG__BODY_REPLY && dm->reply->seq == msg.seq) {
                *msg_p = dm;
                return EXIT_OK;
            }
            b10__daemon_msg__free_unpacked(dm, NULL);
        }
    }
broken:
    free(frame);
    return EXIT_UNREACHABLE;
}

/* The answer's status as an exit code, with the daemon's words on stderr. */
static int reply_exit(const B10__Reply *r)
{
    b10_status_t st = (b10_status_t)r->status;

    if (st == B10_OK)
        return EXIT_OK;
    fail("%s: %s%s%s", b10_status_name(st), b10_status_str(st), r->detail[0] ? ": " : "", r->detail);
    return st == B10_ERR_PERMISSION ? EXIT_PERMISSION
           : st == B10_ERR_NOT_FOUND ? EXIT_NOT_FOUND
                                     : EXIT_REFUSED;
}

/* ---------------------------------------------------------------- formatting */

static const char *fmt_id(char *buf, uint64_t id)
{
    snprintf(buf, 17, "%016" PRIx64, id);
    return buf;
}

static void fmt_bytes(char *buf, size_t n, uint64_t v)
{
    static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
    double x = (double)v;
    int u = 0;

    if (v < 1024) {
        snprintf(buf, n, "%" PRIu64 " B", v);
        return;
    }
    while (x >= 1024 && u < 5) {
        x /= 1024;
        u++;
    }
    snprintf(buf, n, "%.1f %s", x, units[u]);
}

static void fmt_ms(char *buf, size_t n, uint64_t ms)
{
    uint64_t s = ms / 1000;
    if (ms < 10000)
        snprintf(buf, n, "%.1fs", (double)ms / 1000);
    else if (s < 120)
        snprintf(buf, n, "%" PRIu64 "s", s);
    else if (s < 7200)
        snprintf(buf, n, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
    else if (s < 172800)
        snprintf(buf, n, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s / 60 % 60);
    else
        snprintf(buf, n, "%" PRIu64 "d%02" PRIu64 "h", s / 86400, s / 3600 % 24);
}

/* "in 28s", or "0.2s ago" for a moment already past. */
static void fmt_until(char *buf, size_t n, int64_t ms)
{
    char t[32];
    fmt_ms(t, sizeof(t), (uint64_t)(ms < 0 ? -ms : ms));
    snprintf(buf, n, ms < 0 ? "%s ago" : "in %s", t);
}

/* ---------------------------------------------------------------- tables */

#define TABLE_MAX_COLS 12

struct table {
    int ncols;
    const char *heads[TABLE_MAX_COLS];
    char align[TABLE_MAX_COLS];      /* 'l' or 'r' */
    char **cells;
    size_t nrows, cap;
};

static void table_init(struct table *t, const char *spec)
{
    /* spec: "lID rBYTES ...": alignment letter then heading, space separated. */
    char *copy = strdup(spec), *save = NULL;
    memset(t, 0, sizeof(*t));
    for (char *w = strtok_r(copy, " ", &save); w != NULL && t->ncols < TABLE_MAX_COLS;
         w = strtok_r(NULL, " ", &save)) {
        t->align[t->ncols] = w[0];
        t->heads[t->ncols++] = strdup(w + 1);
    }
    free(copy);
}

static void table_add(struct table *t, ...)
{
    va_list ap;

    if (t->nrows == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 16;
        t->cells = realloc(t->cells, t->cap * t->ncols * sizeof(char *));
        if (t->cells == NULL) {
            fail("out of memory");
            exit(EXIT_REFUSED);
        }
    }
    va_start(ap, t);
    for (int i = 0; i < t->ncols; i++) {
        const char *s = va_arg(ap, const char *);
        t->cells[t->nrows * t->ncols + i] = strdup(s != NULL ? s : "");
    }
    va_end(ap);
    t->nrows++;
}

static void table_print(struct table *t, bool heads)
{
    size_t width[TABLE_MAX_COLS];

    for (int i = 0; i < t->ncols; i++)
        width[i] = heads ? strlen(t->heads[i]) : 0;
    for (size_t r = 0; r < t->nrows; r++)
        for (int i = 0; i < t->ncols; i++) {
            size_t w = strlen(t->cells[r * t->ncols + i]);
            width[i] = w > width[i] ? w : width[i];
        }
    for (size_t r = heads ? 0 : 1; r <= t->nrows; r++) {
        for (int i = 0; i < t->ncols; i++) {
            const char *s = r == 0 ? t->heads[i] : t->cells[(r - 1) * t->ncols + i];
            bool last = i == t->ncols - 1;
            if (t->align[i] == 'r')
                printf("%*s%s", (int)width[i], s, last ? "" : "  ");
            else if (last)
                printf("%s", s);
            else
                printf("%-*s  ", (int)width[i], s);
        }
        putchar('\n');
    }
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    for (int i = 0; i < t->ncols; i++)
        free((char *)t->heads[i]);
    free(t->cells);
}

/* ---------------------------------------------------------------- JSON */

static void json_str(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", stdout); break;
        case '\\': fputs("\\\\", stdout); break;
        case '\n': fputs("\\n", stdout); break;
        case '\t': fputs("\\t", stdout); break;
        default:
            if (*p < 0x20)
                printf("\\u%04x", *p);
            else
                putchar(*p);
        }
    }
    putchar('"');
}

/* Key-value members: the first of an object passes first = true. */
static void jkey(bool *first, const char *key)
{
    if (!*first)
        putchar(',');
    *first = false;
    json_str(key);
    putchar(':');
}

static void jstr(bool *first, const char *key, const char *v)
{
    jkey(first, key);
    json_str(v != NULL ? v : "");
}

static void jid(bool *first, const char *key, uint64_t v)
{
    char id[17];
    jstr(first, key, fmt_id(id, v));
}

static void ju64(bool *first, const char *key, uint64_t v)
{
    jkey(first, key);
    printf("%" PRIu64, v);
}

static void ji64(bool *first, const char *key, int64_t v)
{
    jkey(first, key);
    printf("%" PRId64, v);
}

static void jbool(bool *first, const char *key, bool v)
{
    jkey(first, key);
    fputs(v ? "true" : "false", stdout);
}

static void json_daemon(bool *first, const B10__AdminDaemon *m)
{
    bool f = true;

    jkey(first, "daemon");
    putchar('{');
    jstr(&f, "version", m->version);
    jstr(&f, "name", m->name);
    jid(&f, "daemon_id", m->daemon_id);
    ju64(&f, "pid", m->pid);
    ju64(&f, "uptime_ms", m->uptime_ms);
    jstr(&f, "state", m->state);
    jstr(&f, "socket", m->socket);
    jbool(&f, "socket_activated", m->socket_activated);
    jstr(&f, "ucx_err_mode", m->ucx_err_mode);
    ju64(&f, "watchdog_usec", m->watchdog_usec);
    ju64(&f, "connections", m->connections);
    ju64(&f, "clients", m->clients);
    ju64(&f, "peers", m->peers);
    ju64(&f, "xfers_send", m->xfers_send);
    ju64(&f, "xfers_recv", m->xfers_recv);
    ju64(&f, "quarantine_entries", m->quarantine_entries);
    ju64(&f, "quarantine_bytes", m->quarantine_bytes);
    ju64(&f, "quarantine_budget", m->quarantine_budget);
    ju64(&f, "quarantine_ttl_ms", m->quarantine_ttl_ms);
    ju64(&f, "tags_live", m->tags_live);
    ju64(&f, "tags_quarantined", m->tags_quarantined);
    ju64(&f, "drain_left_ms", m->drain_left_ms);
    ju64(&f, "drain_in_flight", m->drain_in_flight);
    ju64(&f, "drain_forced", m->drain_forced);
    ju64(&f, "drain_ms", m->drain_ms);
    ju64(&f, "drain_succeeded", m->drain_succeeded);
    ju64(&f, "drain_failed", m->drain_failed);
    putchar('}');
}

/* ---------------------------------------------------------------- the views */

static const B10__AdminDaemon *reply_daemon(const B10__AdminReply *a)
{
    static B10__AdminDaemon none = B10__ADMIN_DAEMON__INIT;
    return a->daemon != NULL ? a->daemon : &none;
}

static void show_status(const B10__AdminReply *a, bool json)
{
    const B10__AdminDaemon *m = reply_daemon(a);
    char id[17], t1[64], t2[64], t3[64], line[512];
    struct table t;

    if (json) {
        bool f = true;
        putchar('{');
        json_daemon(&f, m);
        puts("}");
        return;
    }
    table_init(&t, "lKEY lVALUE");
    snprintf(line, sizeof(line), "%s (b10d %s, pid %u, name %s)", fmt_id(id, m->daemon_id),
             m->version, m->pid, m->name);
    table_add(&t, "daemon", line);
    table_add(&t, "state", m->state);
    fmt_ms(t1, sizeof(t1), m->uptime_ms);
    table_add(&t, "uptime", t1);
    snprintf(line, sizeof(line), "%s%s", m->socket, m->socket_activated ? " (from systemd)" : "");
    table_add(&t, "socket", line);
    if (m->watchdog_usec > 0)
        fmt_ms(t1, sizeof(t1), m->watchdog_usec / 1000);
    table_add(&t, "watchdog", m->watchdog_usec > 0 ? t1 : "off");
    snprintf(line, sizeof(line), "ranks %u, connections %u", m->clients, m->connections);
    table_add(&t, "clients", line);
    snprintf(line, sizeof(line), "%u", m->peers);
    table_add(&t, "peers", line);
    snprintf(line, sizeof(line), "%u in flight (%u sending, %u receiving)",
             m->xfers_send + m->xfers_recv, m->xfers_send, m->xfers_recv);
    table_add(&t, "transfers", line);
    fmt_bytes(t1, sizeof(t1), m->quarantine_bytes);
    fmt_bytes(t2, sizeof(t2), m->quarantine_budget);
    fmt_ms(t3, sizeof(t3), m->quarantine_ttl_ms);
    snprintf(line, sizeof(line), "%u entries, %s of staging (budget %s), ttl %s",
             m->quarantine_entries, t1, t2, t3);
    table_add(&t, "quarantine", line);
    snprintf(line, sizeof(line), "%u live, %u quarantined", m->tags_live, m->tags_quarantined);
    table_add(&t, "tags", line);
    table_add(&t, "ucx errors", m->ucx_err_mode);
    if (strcmp(m->state, "draining") == 0 || strcmp(m->state, "stopping") == 0) {
        fmt_until(t1, sizeof(t1), (int64_t)m->drain_left_ms);
        snprintf(line, sizeof(line), "running: %u were in flight; %" PRIu64 " landed, %" PRIu64
                 " failed so far; bound %s", m->drain_in_flight, m->drain_succeeded,
                 m->drain_failed, t1);
        table_add(&t, "drain", line);
    } else if (strcmp(m->state, "drained") == 0) {
        fmt_ms(t1, sizeof(t1), m->drain_ms);
        snprintf(line, sizeof(line), "done in %s: %u were in flight; %" PRIu64 " landed, %" PRIu64
                 " failed, %u failed at the bound", t1, m->drain_in_flight, m->drain_succeeded,
                 m->drain_failed, m->drain_forced);
        table_add(&t, "drain", line);
    }
    table_print(&t, false);
}

static void show_omitted(const B10__AdminReply *a, bool json, bool *first)
{
    if (json)
        ju64(first, "omitted", a->omitted);
    else if (a->omitted > 0)
        printf("(%u rows left out: raise --limit, up to the daemon's --max-admin-rows)\n", a->omitted);
}

static void show_transfers(const B10__AdminReply *a, bool json)
{
    char id[17], peer[17], bytes[32], chunks[32], age[32], dl[32];

    if (json) {
        bool f = true;
        putchar('{');
        json_daemon(&f, reply_daemon(a));
        jkey(&f, "transfers");
        putchar('[');
        for (size_t i = 0; i < a->n_xfers; i++) {
            const B10__AdminXfer *x = a->xfers[i];
            bool g = true;
            printf("%s{", i ? "," : "");
            jid(&g, "id", x->id);
            jstr(&g, "role", x->role);
            jstr(&g, "state", x->state);
            jid(&g, "peer", x->peer);
            jstr(&g, "local_agent", x->local_agent);
            jstr(&g, "remote_agent", x->remote_agent);
            ju64(&g, "bytes", x->bytes);
            ju64(&g, "chunks", x->chunks);
            ju64(&g, "chunks_done", x->chunks_done);
            ju64(&g, "age_ms", x->age_ms);
            ji64(&g, "deadline_in_ms", x->deadline_in_ms);
            putchar('}');
        }
        putchar(']');
        show_omitted(a, true, &f);
        puts("}");
        return;
    }
    if (a->n_xfers == 0 && a->omitted == 0) {
        puts("no transfers in flight");
        return;
    }
    struct table t;
    table_init(&t, "lID lROLE lSTATE lLOCAL lREMOTE lPEER rBYTES rCHUNKS rAGE lDEADLINE");
    for (size_t i = 0; i < a->n_xfers; i++) {
        const B10__AdminXfer *x = a->xfers[i];
        fmt_bytes(bytes, sizeof(bytes), x->bytes);
        snprintf(chunks, sizeof(chunks), "%u/%u", x->chunks_done, x->chunks);
        fmt_ms(age, sizeof(age), x->age_ms);
        fmt_until(dl, sizeof(dl), x->deadline_in_ms);
        table_add(&t, fmt_id(id, x->id), x->role, x->state, x->local_agent, x->remote_agent,
                  fmt_id(peer, x->peer), bytes, chunks, age, dl);
    }
    table_print(&t, true);
    show_omitted(a, false, NULL);
}

static void show_quarantine(const B10__AdminReply *a, bool json)
{
    char value[32], size[32], xid[17], peer[17], age[32], exp[48];

    if (json) {
        bool f = true;
        putchar('{');
        json_daemon(&f, reply_daemon(a));
        jkey(&f, "quarantine");
        putchar('[');
        for (size_t i = 0; i < a->n_quarantine; i++) {
            const B10__AdminQuarantine *q = a->quarantine[i];
            bool g = true;
            printf("%s{", i ? "," : "");
            jstr(&g, "kind", q->kind);
            if (strcmp(q->kind, "view") == 0)
                ju64(&g, "value", q->value);
            else
                jid(&g, "value", q->value);
            ju64(&g, "size", q->size);
            jstr(&g, "reason", q->reason);
            ju64(&g, "reason_code", q->reason_code);
            jid(&g, "xfer_id", q->xfer_id);
            jid(&g, "peer", q->peer);
            ju64(&g, "age_ms", q->age_ms);
            ji64(&g, "expires_in_ms", q->expires_in_ms);
            putchar('}');
        }
        putchar(']');
        show_omitted(a, true, &f);
        puts("}");
        return;
    }
    if (a->n_quarantine == 0 && a->omitted == 0) {
        puts("quarantine empty");
        return;
    }
    struct table t;
    table_init(&t, "lKIND lVALUE rSIZE lREASON lTRANSFER lPEER rAGE lEXPIRES");
    for (size_t i = 0; i < a->n_quarantine; i++) {
        const B10__AdminQuarantine *q = a->quarantine[i];
        bool view = strcmp(q->kind, "view") == 0;
        if (view)
            snprintf(value, sizeof(value), "%" PRIu64, q->value);
        else
            fmt_id(value, q->value);
        if (view)
            fmt_bytes(size, sizeof(size), q->size);
        else if (strcmp(q->kind, "tags") == 0)
            snprintf(size, sizeof(size), "%" PRIu64 " tags", q->size);
        else
            snprintf(size, sizeof(size), "-");
        fmt_ms(age, sizeof(age), q->age_ms);
        if (q->expires_in_ms >= 0)
            fmt_until(exp, sizeof(exp), q->expires_in_ms);
        else
            snprintf(exp, sizeof(exp), "due, still held");
        table_add(&t, q->kind, value, size, q->reason, q->xfer_id ? fmt_id(xid, q->xfer_id) : "-",
                  q->peer ? fmt_id(peer, q->peer) : "-", age, exp);
    }
    table_print(&t, true);
    show_omitted(a, false, NULL);
}

static void show_staging(const B10__AdminReply *a, bool json)
{
    static const B10__AdminStaging none = B10__ADMIN_STAGING__INIT;
    const B10__AdminStaging *s = a->staging != NULL ? a->staging : &none;
    const B10__AdminDaemon *m = reply_daemon(a);
    char v[64], w[64], line[160];
    struct table t;

    if (json) {
        bool f = true, g = true;
        putchar('{');
        json_daemon(&f, m);
        jkey(&f, "staging");
        putchar('{');
        ju64(&g, "view_bytes", s->view_bytes);
        ju64(&g, "views", s->views);
        ju64(&g, "free", s->free);
        ju64(&g, "busy", s->busy);
        ju64(&g, "quarantined", s->quarantined);
        ju64(&g, "configured_bytes", s->configured_bytes);
        puts("}}");
        return;
    }
    table_init(&t, "lKEY lVALUE");
    fmt_bytes(v, sizeof(v), s->view_bytes);
    fmt_bytes(w, sizeof(w), s->view_bytes * s->views);
    snprintf(line, sizeof(line), "%u of %s (%s)", s->views, v, w);
    table_add(&t, "views", line);
    snprintf(line, sizeof(line), "%u", s->free);
    table_add(&t, "free", line);
    snprintf(line, sizeof(line), "%u", s->busy);
    table_add(&t, "busy", line);
    snprintf(line, sizeof(line), "%u", s->quarantined);
    table_add(&t, "quarantined", line);
    fmt_bytes(v, sizeof(v), m->quarantine_bytes);
    fmt_bytes(w, sizeof(w), m->quarantine_budget);
    snprintf(line, sizeof(line), "%s of %s budget", v, w);
    table_add(&t, "quarantined bytes", line);
    fmt_bytes(v, sizeof(v), s->configured_bytes);
    table_add(&t, "configured", v);
    table_print(&t, false);
}

static void show_peers(const B10__AdminReply *a, bool json)
{
    char id[17], og[17], ig[17], n1[16], n2[16];

    if (json) {
        bool f = true;
        putchar('{');
        json_daemon(&f, reply_daemon(a));
        jkey(&f, "peers");
        putchar('[');
        for (size_t i = 0; i < a->n_peers; i++) {
            const B10__AdminPeer *p = a->peers[i];
            bool g = true;
            printf("%s{", i ? "," : "");
            jid(&g, "daemon_id", p->daemon_id);
            jstr(&g, "state", p->state);
            jid(&g, "out_gen", p->out_gen);
            jbool(&g, "in_up", p->in_up);
            jid(&g, "in_gen", p->in_gen);
            jstr(&g, "transports", p->transports);
            ju64(&g, "xfers", p->xfers);
            ju64(&g, "waiting", p->waiting);
            putchar('}');
        }
        putchar(']');
        show_omitted(a, true, &f);
        puts("}");
        return;
    }
    if (a->n_peers == 0 && a->omitted == 0) {
        puts("no peers");
        return;
    }
    struct table t;
    table_init(&t, "lDAEMON lLINK lOUT-GEN lIN-GEN lTRANSPORTS rXFERS rWAITING");
    for (size_t i = 0; i < a->n_peers; i++) {
        const B10__AdminPeer *p = a->peers[i];
        snprintf(n1, sizeof(n1), "%u", p->xfers);
        snprintf(n2, sizeof(n2), "%u", p->waiting);
        table_add(&t, fmt_id(id, p->daemon_id), p->state, p->out_gen ? fmt_id(og, p->out_gen) : "-",
                  p->in_up ? fmt_id(ig, p->in_gen) : "-", p->transports[0] ? p->transports : "-",
                  n1, n2);
    }
    table_print(&t, true);
    show_omitted(a, false, NULL);
}

static void show_clients(const B10__AdminReply *a, bool json)
{
    char pid[16], uid[16], nreg[16], reg[32], ag[16], sx[16], rx[16], rid[24], addr[24], len[32];

    if (json) {
        bool f = true;
        putchar('{');
        json_daemon(&f, reply_daemon(a));
        jkey(&f, "clients");
        putchar('[');
        for (size_t i = 0; i < a->n_clients; i++) {
            const B10__AdminClient *c = a->clients[i];
            bool g = true;
            printf("%s{", i ? "," : "");
            jstr(&g, "agent", c->agent);
            ju64(&g, "pid", c->pid);
            ju64(&g, "uid", c->uid);
            ju64(&g, "gid", c->gid);
            ju64(&g, "registered_bytes", c->registered_bytes);
            ju64(&g, "remote_agents", c->remote_agents);
            ju64(&g, "xfers", c->xfers);
            ju64(&g, "targets", c->targets);
            jkey(&g, "regions");
            putchar('[');
            for (size_t j = 0; j < c->n_regions; j++) {
                const B10__AdminRegion *r = c->regions[j];
                bool h = true;
                printf("%s{", j ? "," : "");
                ju64(&h, "id", r->id);
                jstr(&h, "kind", r->kind);
                jstr(&h, "backend", r->backend);
                ju64(&h, "addr", r->addr);
                ju64(&h, "length", r->length);
                putchar('}');
            }
            fputs("]}", stdout);
        }
        putchar(']');
        show_omitted(a, true, &f);
        puts("}");
        return;
    }
    if (a->n_clients == 0 && a->omitted == 0) {
        puts("no ranks connected");
        return;
    }
    struct table t, rt;
    size_t nregions = 0;
    table_init(&t, "lAGENT rPID rUID rREGIONS rREGISTERED rREMOTES rSENDING rRECEIVING");
    table_init(&rt, "lAGENT rREGION lKIND lBACKEND lADDRESS rLENGTH");
    for (size_t i = 0; i < a->n_clients; i++) {
        const B10__AdminClient *c = a->clients[i];
        snprintf(pid, sizeof(pid), "%u", c->pid);
        snprintf(uid, sizeof(uid), "%u", c->uid);
        snprintf(nreg, sizeof(nreg), "%zu", c->n_regions);
        fmt_bytes(reg, sizeof(reg), c->registered_bytes);
        snprintf(ag, sizeof(ag), "%u", c->remote_agents);
        snprintf(sx, sizeof(sx), "%u", c->xfers);
        snprintf(rx, sizeof(rx), "%u", c->targets);
        table_add(&t, c->agent, pid, uid, nreg, reg, ag, sx, rx);
        for (size_t j = 0; j < c->n_regions; j++) {
            const B10__AdminRegion *r = c->regions[j];
            snprintf(rid, sizeof(rid), "%" PRIu64, r->id);
            snprintf(addr, sizeof(addr), "0x%" PRIx64, r->addr);
            fmt_bytes(len, sizeof(len), r->length);
            table_add(&rt, c->agent, rid, r->kind, r->backend, addr, len);
            nregions++;
        }
    }
    table_print(&t, true);
    if (nregions > 0) {
        putchar('\n');
        table_print(&rt, true);
    } else {
        table_print(&rt, false);   /* frees it */
    }
    show_omitted(a, false, NULL);
}

static void show_stats(const B10__AdminReply *a, bool json)
{
    char v[32];

    if (json) {
        bool f = true, g = true;
        putchar('{');
        json_daemon(&f, reply_daemon(a));
        jkey(&f, "counters");
        putchar('{');
        for (size_t i = 0; i < a->n_counters; i++)
            ju64(&g, a->counters[i]->name, a->counters[i]->value);
        puts("}}");
        return;
    }
    struct table t;
    table_init(&t, "lCOUNTER rVALUE lMEANING");
    for (size_t i = 0; i < a->n_counters; i++) {
        snprintf(v, sizeof(v), "%" PRIu64, a->counters[i]->value);
        table_add(&t, a->counters[i]->name, v, a->counters[i]->help);
    }
    table_print(&t, true);
}

/* ---------------------------------------------------------------- Prometheus */

static void prom_label(const char *v)
{
    putchar('"');
    for (const char *p = v; *p; p++) {
        if (*p == '\\' || *p == '"')
            printf("\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", stdout);
        else
            putchar(*p);
    }
    putchar('"');
}

static void prom_family(const char *name, const char *type, const char *help)
{
    printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void prom_gauge(const char *name, const char *help, uint64_t v)
{
    prom_family(name, "gauge", help);
    printf("%s %" PRIu64 "\n", name, v);
}

static void show_metrics(const B10__AdminReply *a, bool json)
{
    static const B10__AdminStaging none = B10__ADMIN_STAGING__INIT;
    static const char *states[] = { "serving", "draining", "drained", "stopping" };
    const B10__AdminDaemon *m = reply_daemon(a);
    const B10__AdminStaging *s = a->staging != NULL ? a->staging : &none;
    char id[17];

    if (json) {
        bool f = true, g = true, h = true;
        putchar('{');
        json_daemon(&f, m);
        jkey(&f, "staging");
        putchar('{');
        ju64(&g, "view_bytes", s->view_bytes);
        ju64(&g, "views", s->views);
        ju64(&g, "free", s->free);
        ju64(&g, "busy", s->busy);
        ju64(&g, "quarantined", s->quarantined);
        ju64(&g, "configured_bytes", s->configured_bytes);
        putchar('}');
        jkey(&f, "counters");
        putchar('{');
        for (size_t i = 0; i < a->n_counters; i++)
            ju64(&h, a->counters[i]->name, a->counters[i]->value);
        puts("}}");
        return;
    }
    prom_gauge("b10d_up", "Whether b10ctl reached the daemon.", 1);
    prom_family("b10d_info", "gauge", "The daemon's version, name and id for this boot.");
    fputs("b10d_info{version=", stdout);
    prom_label(m->version);
    fputs(",name=", stdout);
    prom_label(m->name);
    fputs(",daemon_id=", stdout);
    prom_label(fmt_id(id, m->daemon_id));
    fputs("} 1\n", stdout);
    prom_family("b10d_uptime_seconds", "gauge", "Seconds since the daemon started.");
    printf("b10d_uptime_seconds %.3f\n", (double)m->uptime_ms / 1000);
    prom_family("b10d_state", "gauge", "The daemon's life-cycle state: 1 for the current one.");
    for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
        printf("b10d_state{state=\"%s\"} %d\n", states[i], strcmp(m->state, states[i]) == 0);
    prom_family("b10d_watchdog_seconds", "gauge", "systemd watchdog interval, 0 without one.");
    printf("b10d_watchdog_seconds %.3f\n", (double)m->watchdog_usec / 1e6);
    prom_gauge("b10d_connections", "Client connections, ranks and admin.", m->connections);
    prom_gauge("b10d_clients", "Ranks connected (said Hello).", m->clients);
    prom_gauge("b10d_peers", "Remote daemons known.", m->peers);
    prom_family("b10d_transfers_in_flight", "gauge", "Transfers in flight, by role.");
    printf("b10d_transfers_in_flight{role=\"send\"} %u\n", m->xfers_send);
    printf("b10d_transfers_in_flight{role=\"recv\"} %u\n", m->xfers_recv);
    prom_gauge("b10d_quarantine_entries", "Quarantine entries (views, tags, ids, generations).",
               m->quarantine_entries);
    prom_gauge("b10d_quarantine_bytes", "Staging bytes in quarantine.", m->quarantine_bytes);
    prom_gauge("b10d_quarantine_budget_bytes",
               "Quarantined staging past which new transfers fail fast.", m->quarantine_budget);
    prom_family("b10d_tags", "gauge", "Registered UCX tags, live or quarantined.");
    printf("b10d_tags{state=\"live\"} %u\n", m->tags_live);
    printf("b10d_tags{state=\"quarantined\"} %u\n", m->tags_quarantined);
    prom_family("b10d_staging_views", "gauge", "Staging views, by state.");
    printf("b10d_staging_views{state=\"free\"} %u\n", s->free);
    printf("b10d_staging_views{state=\"busy\"} %u\n", s->busy);
    printf("b10d_staging_views{state=\"quarantined\"} %u\n", s->quarantined);
    prom_gauge("b10d_staging_view_bytes", "Bytes of one staging view.", s->view_bytes);
    prom_gauge("b10d_staging_configured_bytes", "The staging pool's configured size.",
               s->configured_bytes);
    for (size_t i = 0; i < a->n_counters; i++) {
        char name[128];
        snprintf(name, sizeof(name), "b10d_%s_total", a->counters[i]->name);
        prom_family(name, "counter", a->counters[i]->help);
        printf("%s %" PRIu64 "\n", name, a->counters[i]->value);
    }
}

/* ---------------------------------------------------------------- commands */

struct command {
    const char *name;
    B10__AdminOp op;
    void (*show)(const B10__AdminReply *a, bool json);
    const char *help;
};

static const struct command commands[] = {
    { "status", B10__ADMIN_OP__ADMIN_STATUS, show_status, "the daemon: state, clients, transfers, quarantine" },
    { "transfers", B10__ADMIN_OP__ADMIN_TRANSFERS, show_transfers, "transfers in flight" },
    { "quarantine", B10__ADMIN_OP__ADMIN_QUARANTINE, show_quarantine, "quarantine entries, their reason and expiry" },
    { "staging", B10__ADMIN_OP__ADMIN_STAGING, show_staging, "the staging pool" },
    { "peers", B10__ADMIN_OP__ADMIN_PEERS, show_peers, "remote daemons: links, endpoint generations, transports" },
    { "clients", B10__ADMIN_OP__ADMIN_CLIENTS, show_clients, "connected ranks and their registered memory" },
    { "stats", B10__ADMIN_OP__ADMIN_STATS, show_stats, "counters" },
    { "metrics", B10__ADMIN_OP__ADMIN_METRICS, show_metrics, "status, staging and counters as Prometheus text" },
    { "cancel", B10__ADMIN_OP__ADMIN_CANCEL, NULL, "cancel transfer ID (as `transfers` shows it)" },
    { "drain", B10__ADMIN_OP__ADMIN_DRAIN, NULL, "admit nothing new; wait for in-flight transfers to end" },
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
    fprintf(f,
"usage: b10ctl [OPTIONS] COMMAND [ARGS]\n"
"\n"
"Inspect and steer the b10d of this node.\n"
"\n"
"Commands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-12s %s\n", strcmp(commands[i].name, "cancel") == 0 ? "cancel ID" : commands[i].name,
                commands[i].help);
    fprintf(f,
"\n"
"Options:\n"
"  -s, --socket PATH        the daemon's socket (default: $B10_SOCKET, else " SOCKET_DEFAULT ")\n"
"  -j, --json               one JSON object per answer, on one line\n"
"  -w, --watch[=SECONDS]    ask again every SECONDS (default 2) until interrupted\n"
"  -n, --count N            with --watch: stop after N answers\n"
"      --limit N            most rows of a list (default and cap: the daemon's --max-admin-rows)\n"
"  -t, --timeout MS         how long to wait for an answer (default 5000)\n"
"      --drain-timeout MS   drain: fail what is still in flight after MS\n"
"                           (default: the daemon's --drain-timeout-ms)\n"
"      --no-wait            drain: return once the daemon admits nothing new\n"
"  -h, --help               this text\n"
"      --version            the version\n"
"\n"
"Exit status: 0 done; 1 the daemon refused or failed the request; 2 usage;\n"
"3 daemon unreachable or the connection broke; 4 no such transfer; 5 not\n"
"permitted (root, the daemon's user or the socket's group only); 6 drain:\n"
"transfers still in flight when the wait ended.\n");
}

static int run_query(struct conn *c, const struct command *cmd, const struct opts *o)
{
    B10__AdminRequest req = B10__ADMIN_REQUEST__INIT;
    B10__DaemonMsg *msg = NULL;
    int rc;

    req.op = cmd->op;
    req.limit = o->limit;
    if ((rc = conn_request(c, &req, &msg)) != EXIT_OK)
        return rc;
    if ((rc = reply_exit(msg->reply)) == EXIT_OK) {
        if (msg->reply->body_case != B10__REPLY__BODY_ADMIN) {
            fail("b10d answered without an admin body");
            rc = EXIT_UNREACHABLE;
        } else {
            cmd->show(msg->reply->admin, o->json);
        }
    }
    b10__daemon_msg__free_unpacked(msg, NULL);
    fflush(stdout);
    return rc;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int run_watch(struct conn *c, const struct command *cmd, const struct opts *o)
{
    bool tty = isatty(STDOUT_FILENO) && !o->json;
    int64_t every = (int64_t)(o->watch_s * 1000);

    for (long round = 1;; round++) {
        int64_t t0 = now_ms();
        if (tty) {
            time_t now = time(NULL);
            char when[64];
            strftime(when, sizeof(when), "%H:%M:%S", localtime(&now));
            printf("\033[H\033[2J" "every %.1fs: b10ctl %s    %s\n\n", o->watch_s, cmd->name, when);
        } else if (round > 1 && !o->json) {
            putchar('\n');
        }
        int rc = run_query(c, cmd, o);
        if (rc != EXIT_OK)
            return rc;
        if (o->count > 0 && round >= o->count)
            return EXIT_OK;
        int64_t left = every - (now_ms() - t0);
        if (left > 0)
            sleep_ms(left);
    }
}

/* A transfer id as b10ctl and the logs show it: 16 hex digits, 0x allowed. */
static int parse_xfer_id(const char *arg, uint64_t *id_p)
{
    const char *hex = strncmp(arg, "0x", 2) == 0 || strncmp(arg, "0X", 2) == 0 ? arg + 2 : arg;
    char *end;

    errno = 0;
    uint64_t id = strtoull(hex, &end, 16);
    if (hex[0] == '\0' || *end != '\0' || errno != 0 || strlen(hex) > 16 || hex[0] == '-' ||
        hex[0] == '+' || hex[0] == ' ') {
        fail("cancel: '%s' is not a transfer id (16 hex digits, as `b10ctl transfers` shows)", arg);
        return -1;
    }
    *id_p = id;
    return 0;
}

static int run_cancel(struct conn *c, uint64_t xid, const struct opts *o)
{
    B10__AdminRequest req = B10__ADMIN_REQUEST__INIT;
    B10__DaemonMsg *msg = NULL;
    char id[17];
    int rc;

    req.op = B10__ADMIN_OP__ADMIN_CANCEL;
    req.xfer_id = xid;
    if ((rc = conn_request(c, &req, &msg)) != EXIT_OK)
        return rc;
    rc = reply_exit(msg->reply);
    if (o->json) {
        bool f = true;
        putchar('{');
        jid(&f, "xfer_id", xid);
        jbool(&f, "cancelled", rc == EXIT_OK);
        jstr(&f, "status", b10_status_name((b10_status_t)msg->reply->status));
        jstr(&f, "detail", msg->reply->detail);
        if (msg->reply->body_case == B10__REPLY__BODY_ADMIN)
            json_daemon(&f, reply_daemon(msg->reply->admin));
        puts("}");
    } else if (rc == EXIT_OK) {
        printf("transfer %s cancelled\n", fmt_id(id, xid));
    }
    b10__daemon_msg__free_unpacked(msg, NULL);
    return rc;
}

static int run_drain(struct conn *c, const struct opts *o)
{
    B10__AdminRequest req = B10__ADMIN_REQUEST__INIT;
    B10__DaemonMsg *msg = NULL;
    int rc;

    req.op = B10__ADMIN_OP__ADMIN_DRAIN;
    req.drain_timeout_ms = o->drain_timeout_ms;
    if ((rc = conn_request(c, &req, &msg)) != EXIT_OK)
        return rc;
    if ((rc = reply_exit(msg->reply)) != EXIT_OK || msg->reply->body_case != B10__REPLY__BODY_ADMIN)
        goto out;
    /* Past the daemon's bound every transfer has finished or failed: wait that, and a margin. */
    int64_t wait_until = now_ms() + (int64_t)reply_daemon(msg->reply->admin)->drain_left_ms + 5000;
    while (!o->no_wait && strcmp(reply_daemon(msg->reply->admin)->state, "drained") != 0) {
        if (now_ms() >= wait_until) {
            const B10__AdminDaemon *m = reply_daemon(msg->reply->admin);
            fail("drain: %u transfers still in flight", m->xfers_send + m->xfers_recv);
            rc = EXIT_NOT_DRAINED;
            break;
        }
        sleep_ms(100);
        b10__daemon_msg__free_unpacked(msg, NULL);
        msg = NULL;
        req.op = B10__ADMIN_OP__ADMIN_STATUS;
        if ((rc = conn_request(c, &req, &msg)) != EXIT_OK)
            return rc;
        if ((rc = reply_exit(msg->reply)) != EXIT_OK || msg->reply->body_case != B10__REPLY__BODY_ADMIN)
            goto out;
    }
    if (o->json) {
        bool f = true;
        putchar('{');
        json_daemon(&f, reply_daemon(msg->reply->admin));
        puts("}");
    } else {
        const B10__AdminDaemon *m = reply_daemon(msg->reply->admin);
        char t[32];
        fmt_ms(t, sizeof(t), m->drain_ms);
        if (strcmp(m->state, "drained") == 0)
            printf("drained in %s: %u transfers were in flight; %" PRIu64 " sends landed, %" PRIu64
                   " failed, %u failed at the bound. b10d admits no new transfers until it restarts.\n",
                   t, m->drain_in_flight, m->drain_succeeded, m->drain_failed, m->drain_forced);
        else
            printf("draining: %u transfers in flight; b10d admits no new transfers\n",
                   m->xfers_send + m->xfers_recv);
    }
out:
    b10__daemon_msg__free_unpacked(msg, NULL);
    return rc;
}

static int parse_uint(const char *name, const char *text, uint64_t max, uint64_t *v_p)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (text[0] == '\0' || text[0] == '-' || *end != '\0' || errno != 0 || v > max) {
        fail("%s: '%s' is not a number in [0, %" PRIu64 "]", name, text, max);
        return -1;
    }
    *v_p = v;
    return 0;
}

int main(int argc, char **argv)
{
    enum { OPT_LIMIT = 256, OPT_DRAIN_TIMEOUT, OPT_NO_WAIT, OPT_VERSION };
    static const struct option longopts[] = {
        { "socket", required_argument, NULL, 's' },
        { "json", no_argument, NULL, 'j' },
        { "watch", optional_argument, NULL, 'w' },
        { "count", required_argument, NULL, 'n' },
        { "limit", required_argument, NULL, OPT_LIMIT },
        { "timeout", required_argument, NULL, 't' },
        { "drain-timeout", required_argument, NULL, OPT_DRAIN_TIMEOUT },
        { "no-wait", no_argument, NULL, OPT_NO_WAIT },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, OPT_VERSION },
        { NULL, 0, NULL, 0 },
    };
    struct opts o = { .watch_s = 2, .timeout_ms = 5000 };
    const char *env = getenv("B10_SOCKET");
    uint64_t v;
    int c;

    o.socket_path = env != NULL && env[0] != '\0' ? env : SOCKET_DEFAULT;
    while ((c = getopt_long(argc, argv, "s:jw::n:t:h", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            o.socket_path = optarg;
            break;
        case 'j':
            o.json = true;
            break;
        case 'w':
            o.watch = true;
            if (optarg != NULL) {
                char *end;
                o.watch_s = strtod(optarg, &end);
                if (*end != '\0' || !(o.watch_s >= 0.05 && o.watch_s <= 86400)) {
                    fail("--watch: '%s' is not a number of seconds in [0.05, 86400]", optarg);
                    return EXIT_USAGE;
                }
            }
            break;
        case 'n':
            if (parse_uint("--count", optarg, 1000000000, &v) != 0)
                return EXIT_USAGE;
            o.count = (long)v;
            break;
        case OPT_LIMIT:
            if (parse_uint("--limit", optarg, UINT32_MAX, &v) != 0)
                return EXIT_USAGE;
            o.limit = (uint32_t)v;
            break;
        case 't':
            if (parse_uint("--timeout", optarg, 3600000, &v) != 0)
                return EXIT_USAGE;
            if (v == 0) {
                fail("--timeout must be at least 1 ms");
                return EXIT_USAGE;
            }
            o.timeout_ms = (int)v;
            break;
        case OPT_DRAIN_TIMEOUT:
            if (parse_uint("--drain-timeout", optarg, 600000, &v) != 0)
                return EXIT_USAGE;
            o.drain_timeout_ms = (uint32_t)v;
            break;
        case OPT_NO_WAIT:
            o.no_wait = true;
            break;
        case 'h':
            usage(stdout);
            return EXIT_OK;
        case OPT_VERSION:
            printf("b10ctl %s (protocol %d)\n", B10CTL_VERSION, 1);
            return EXIT_OK;
        default:
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const struct command *cmd = NULL;
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(argv[optind], commands[i].name) == 0)
            cmd = &commands[i];
    if (cmd == NULL) {
        fail("unknown command '%s'; try --help", argv[optind]);
        return EXIT_USAGE;
    }
    int want = cmd->op == B10__ADMIN_OP__ADMIN_CANCEL ? 1 : 0;
    if (argc - optind - 1 != want) {
        fail("%s takes %s", cmd->name, want ? "one argument, the transfer id" : "no arguments");
        return EXIT_USAGE;
    }
    if (o.watch && cmd->show == NULL) {
        fail("--watch is for the read-only commands, not %s", cmd->name);
        return EXIT_USAGE;
    }
    uint64_t xid = 0;
    if (cmd->op == B10__ADMIN_OP__ADMIN_CANCEL && parse_xfer_id(argv[optind + 1], &xid) != 0)
        return EXIT_USAGE;

    struct conn conn;
    int rc = conn_open(&conn, o.socket_path, o.timeout_ms);
    if (rc != EXIT_OK) {
        if (cmd->op == B10__ADMIN_OP__ADMIN_METRICS && !o.json)
            prom_gauge("b10d_up", "Whether b10ctl reached the daemon.", 0);
        return rc;
    }
    if (cmd->op == B10__ADMIN_OP__ADMIN_CANCEL)
        rc = run_cancel(&conn, xid, &o);
    else if (cmd->op == B10__ADMIN_OP__ADMIN_DRAIN)
        rc = run_drain(&conn, &o);
    else if (o.watch)
        rc = run_watch(&conn, cmd, &o);
    else
        rc = run_query(&conn, cmd, &o);
    if (rc == EXIT_UNREACHABLE && cmd->op == B10__ADMIN_OP__ADMIN_METRICS && !o.json)
        prom_gauge("b10d_up", "Whether b10ctl reached the daemon.", 0);
    conn_close(&conn);
    return rc;
}
