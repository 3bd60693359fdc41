/*
 * b10ctl — inspect and steer a running b10d.
 *
 * It speaks the daemon's socket protocol directly (proto/frame.h framing,
 * ClientMsg.admin requests of proto/admin.proto) on its own connection,
 * which never says Hello and so is never a rank. Operators (root, the
 * daemon's user, its --admin-group) see every rank; anyone else the socket
 * lets in sees only its own uid's transfers and ranks (daemon/node/admin.h).
 *
 * Output: aligned tables for people, --json (one object per line) for
 * scripts, Prometheus text for `metrics`. Exit status, for scripts:
 *   0  done                      4  no such transfer (cancel; another user's is none
 *   1  the daemon refused or        to anyone but an operator)
 *      failed the request        5  not permitted (operators only)
 *   2  usage                     6  drain: transfers still in flight when the wait ended
 *   3  daemon unreachable, or the connection broke
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
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
#include "optdoc.h"

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
    bool regions;               /* clients: each rank's registrations too */
    uint64_t xfer_id;           /* cancel's argument */
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

/* The last failure said, for --json's error object; and whether an answer went out in JSON. */
static char last_failure[512];
static bool json_answered;
static bool verbose;            /* -v: legends under the tables */

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_failure, sizeof(last_failure), fmt, ap);
    va_end(ap);
    fprintf(stderr, "b10ctl: %s\n", last_failure);
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
        fail("cannot reach b10d at %s: %s (%s)", path, strerror(err),
             err == ENOENT || err == ECONNREFUSED
                 ? "is it running? systemctl status b10d; or name its socket: -s PATH or $B10_SOCKET"
                 : err == EACCES ? "the socket is for its group (b10d) and operators"
                                 : "see b10ctl --help");
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

/* One admin request, its answer in *msg_p (free with b10__daemon_msg__free_unpacked). */
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

static const char *fmt_bytes(char *buf, size_t n, uint64_t v)
{
    static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
    double x = (double)v;
    int u = 0;

    if (v < 1024) {
        snprintf(buf, n, "%" PRIu64 " B", v);
        return buf;
    }
    while (x >= 1024 && u < 5) {
        x /= 1024;
        u++;
    }
    snprintf(buf, n, "%.1f %s", x, units[u]);
    return buf;
}

static const char *fmt_ms(char *buf, size_t n, uint64_t ms)
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
    return buf;
}

/* "in 28s", or "0.2s ago" for a moment already past. */
static const char *fmt_until(char *buf, size_t n, int64_t ms)
{
    char t[32];
    fmt_ms(t, sizeof(t), (uint64_t)(ms < 0 ? -ms : ms));
    snprintf(buf, n, ms < 0 ? "%s ago" : "in %s", t);
    return buf;
}

/* ---------------------------------------------------------------- JSON values */

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

/* An id as 16 hex digits, or null for none (0 is no id b10d gives out). */
static void jid(bool *first, const char *key, uint64_t v)
{
    char id[17];
    if (v == 0) {
        jkey(first, key);
        fputs("null", stdout);
        return;
    }
    jstr(first, key, fmt_id(id, v));
}

/* A u64 past 2^53 (an incarnation in ns) as a decimal string: JSON readers take numbers as doubles. */
static void ju64s(bool *first, const char *key, uint64_t v)
{
    char text[24];
    snprintf(text, sizeof(text), "%" PRIu64, v);
    jstr(first, key, text);
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

/* ---------------------------------------------------------------- the answers, as data */

/*
 * Each view is a description, not code: the members of an answer are listed
 * once with how JSON and the tables show them, and one emitter of each kind
 * walks the lists. A member is found by its offset in its protobuf-c message,
 * a repeated one by the offsets of its n_ count and its array.
 */
#define N(a) (sizeof(a) / sizeof((a)[0]))

struct rows;

/*
 * How a JSON member shows its field: J_ID a uint64_t as a string of 16 hex
 * digits (null for 0), J_U64S one as a decimal string (exact past 2^53), J_BOOL a protobuf_c_boolean, J_ROWS a repeated message as an array
 * (named by its rows), J_FN as fn writes it.
 */
enum jkind { J_STR, J_ID, J_U32, J_U64, J_U64S, J_I64, J_BOOL, J_ROWS, J_FN };

struct jfield {
    const char *key;
    enum jkind kind;
    size_t off;
    const struct rows *rows;                                   /* J_ROWS */
    void (*fn)(bool *first, const char *key, const void *msg); /* J_FN */
};

/*
 * How a table cell shows its field: _DASH "-" for an empty string or a zero
 * id, C_COUNT a size_t, C_HEX a uint64_t as 0x..., C_BYTES in KiB, MiB, ...,
 * C_MS a uint64_t of milliseconds as a duration, C_UNTIL an int64_t of them
 * from now, C_FN as fn says (in buf, or a string of the row's).
 */
enum ckind {
    C_STR, C_STR_DASH, C_ID, C_ID_DASH, C_U32, C_U64, C_COUNT, C_HEX, C_BYTES, C_MS, C_UNTIL, C_FN
};

struct column {
    const char *head;   /* the alignment, 'l' or 'r', then the heading */
    enum ckind kind;
    size_t off;
    const char *(*fn)(char *buf, size_t n, const void *row, const void *parent); /* C_FN */
};

/* A repeated member: an array in JSON, a table for people. */
struct rows {
    const char *key;            /* its JSON name */
    size_t n_off, v_off;        /* of n_<member> and <member> in the parent message */
    const struct jfield *json;
    size_t njson;
    const struct column *cols;
    int ncols;
    const char *empty;          /* the text when there are none and none were left out */
    const struct rows *sub;     /* each row's own rows, shown in a second table */
    const char *legend;         /* -v: what the columns mean, one "COLUMN  meaning" a line */
};

#define ROWS(name, parent, member) .key = (name), .n_off = offsetof(parent, n_##member), \
                                   .v_off = offsetof(parent, member)
#define JSON(fields) .json = (fields), .njson = N(fields)
#define COLS(c) .cols = (c), .ncols = (int)N(c)

/* MSG names the message of the list being written. */
#define JF(name, k) { .key = #name, .kind = (k), .off = offsetof(MSG, name) }
#define COL(h, k, name) { .head = (h), .kind = (k), .off = offsetof(MSG, name) }
#define COL_FN(h, f) { .head = (h), .kind = C_FN, .fn = (f) }

static size_t rows_count(const struct rows *r, const void *msg)
{
    return *(const size_t *)((const char *)msg + r->n_off);
}

static const void *rows_item(const struct rows *r, const void *msg, size_t i)
{
    return (*(void *const *const *)((const char *)msg + r->v_off))[i];
}

static bool is_view(const B10__AdminQuarantine *q)
{
    return strcmp(q->kind, "view") == 0;
}

/* A view's number, or the id of a transfer or generation, as the table shows it. */
static void json_quarantine_value(bool *first, const char *key, const void *msg)
{
    const B10__AdminQuarantine *q = msg;
    if (is_view(q))
        ju64(first, key, q->value);
    else
        jid(first, key, q->value);
}

/* A transfer's whole deadline, the daemon's effective one: its age and what is left, of one instant. */
static uint64_t xfer_deadline_ms(const B10__AdminXfer *x)
{
    int64_t total = (int64_t)x->age_ms + x->deadline_in_ms;
    return total > 0 ? (uint64_t)total : 0;
}

static void json_xfer_deadline(bool *first, const char *key, const void *msg)
{
    ju64(first, key, xfer_deadline_ms(msg));
}

/* "in 12.3 s of 30 s": what is left, of the deadline the daemon took (its default for 0). */
static const char *cell_xfer_deadline(char *buf, size_t n, const void *row, const void *parent)
{
    const B10__AdminXfer *x = row;
    char left[48], total[32];
    fmt_until(left, sizeof(left), x->deadline_in_ms);
    fmt_ms(total, sizeof(total), xfer_deadline_ms(x));
    snprintf(buf, n, "%s of %s", left, total);
    return buf;
}

static const char *cell_chunks(char *buf, size_t n, const void *row, const void *parent)
{
    const B10__AdminXfer *x = row;
    snprintf(buf, n, "%u/%u", x->chunks_done, x->chunks);
    return buf;
}

/* A view's number, or the id of a transfer or generation. */
static const char *cell_quarantine_value(char *buf, size_t n, const void *row, const void *parent)
{
    const B10__AdminQuarantine *q = row;
    if (is_view(q))
        snprintf(buf, n, "%" PRIu64, q->value);
    else
        fmt_id(buf, q->value);
    return buf;
}

static const char *cell_quarantine_size(char *buf, size_t n, const void *row, const void *parent)
{
    const B10__AdminQuarantine *q = row;
    if (is_view(q))
        return fmt_bytes(buf, n, q->size);
    if (strcmp(q->kind, "tags") == 0)
        snprintf(buf, n, "%" PRIu64 " tags", q->size);
    else
        snprintf(buf, n, "-");
    return buf;
}

static const char *cell_quarantine_expires(char *buf, size_t n, const void *row, const void *parent)
{
    const B10__AdminQuarantine *q = row;
    return q->expires_in_ms >= 0 ? fmt_until(buf, n, q->expires_in_ms) : "due, still held";
}

static const char *cell_peer_in_gen(char *buf, size_t n, const void *row, const void *parent)
{
    const B10__AdminPeer *p = row;
    return p->in_up ? fmt_id(buf, p->in_gen) : "-";
}

/*
 * LINK: which of the two links is up, ours to it (out) and its to us (in): a
 * receiver streamed into shows "in", not "down" (its own outbound link is);
 * an outbound link being opened says "connecting", with "+in" if the other is up.
 */
static const char *cell_peer_link(char *buf, size_t n, const void *row, const void *parent)
{
    const B10__AdminPeer *p = row;
    bool out = strcmp(p->state, "up") == 0, opening = strcmp(p->state, "connecting") == 0;
    if (opening)
        snprintf(buf, n, "connecting%s", p->in_up ? "+in" : "");
    else
        snprintf(buf, n, "%s", out && p->in_up ? "both" : out ? "out" : p->in_up ? "in" : "none");
    return buf;
}

/* A peer by its name, and its boot's id where the name is not known (or "-": none). */
static const char *cell_peer_named(char *buf, size_t n, const char *name, uint64_t id)
{
    char hex[17];
    if (name != NULL && name[0] != '\0')
        snprintf(buf, n, "%s", name);
    else
        snprintf(buf, n, "%s", id != 0 ? fmt_id(hex, id) : "-");
    return buf;
}

static const char *cell_xfer_peer(char *buf, size_t n, const void *row, const void *parent)
{
    const B10__AdminXfer *x = row;
    return cell_peer_named(buf, n, x->peer_name, x->peer);
}

static const char *cell_quarantine_peer(char *buf, size_t n, const void *row, const void *parent)
{
    const B10__AdminQuarantine *q = row;
    return cell_peer_named(buf, n, q->peer_name, q->peer);
}

static const char *cell_region_agent(char *buf, size_t n, const void *row, const void *parent)
{
    return ((const B10__AdminClient *)parent)->agent;
}

#define MSG B10__AdminDaemon
static const struct jfield daemon_json[] = {
    JF(version, J_STR), JF(name, J_STR), JF(daemon_id, J_ID), JF(pid, J_U32),
    JF(uptime_ms, J_U64), JF(state, J_STR), JF(socket, J_STR), JF(socket_activated, J_BOOL),
    JF(ucx_err_mode, J_STR), JF(watchdog_usec, J_U64), JF(connections, J_U32),
    JF(clients, J_U32), JF(peers, J_U32), JF(xfers_send, J_U32), JF(xfers_recv, J_U32),
    JF(quarantine_entries, J_U32), JF(quarantine_bytes, J_U64), JF(quarantine_budget, J_U64),
    JF(quarantine_ttl_ms, J_U32), JF(tags_live, J_U32), JF(tags_quarantined, J_U32),
    JF(drain_left_ms, J_U64), JF(drain_in_flight, J_U32), JF(drain_forced, J_U32),
    JF(drain_ms, J_U64), JF(drain_succeeded, J_U64), JF(drain_failed, J_U64),
    JF(trust, J_STR), JF(key_id, J_ID), JF(next_key_id, J_ID), JF(insecure, J_BOOL),
    JF(remote_access, J_STR), JF(names_held, J_U32), JF(node_cert, J_STR),
    JF(node_cert_not_after, J_I64),
};
#undef MSG

#define MSG B10__AdminStaging
static const struct jfield staging_json[] = {
    JF(view_bytes, J_U64), JF(views, J_U32), JF(free, J_U32), JF(busy, J_U32),
    JF(quarantined, J_U32), JF(configured_bytes, J_U64),
};
#undef MSG

#define MSG B10__AdminXfer
static const struct jfield xfer_json[] = {
    JF(id, J_ID), JF(role, J_STR), JF(state, J_STR), JF(peer, J_ID), JF(peer_name, J_STR),
    JF(local_agent, J_STR),
    JF(remote_agent, J_STR), JF(bytes, J_U64), JF(chunks, J_U32), JF(chunks_done, J_U32),
    JF(age_ms, J_U64), JF(deadline_in_ms, J_I64),
    { .key = "deadline_ms", .kind = J_FN, .fn = json_xfer_deadline },
};
static const struct column xfer_cols[] = {
    COL("lID", C_ID, id), COL("lROLE", C_STR, role), COL("lSTATE", C_STR, state),
    COL("lLOCAL", C_STR, local_agent), COL("lREMOTE", C_STR, remote_agent),
    COL_FN("lPEER", cell_xfer_peer), COL("rBYTES", C_BYTES, bytes), COL_FN("rCHUNKS", cell_chunks),
    COL("rAGE", C_MS, age_ms), COL_FN("lDEADLINE", cell_xfer_deadline),
};
#undef MSG
static const struct rows xfer_rows = {
    ROWS("transfers", B10__AdminReply, xfers), JSON(xfer_json), COLS(xfer_cols),
    .empty = "no transfers in flight",
    .legend = "ID        the transfer's id (the sending daemon's), as logs and cancel take it\n"
              "ROLE      send, recv (a remote daemon writes here), read, local (both ranks here)\n"
              "STATE     wait-link, wait-ready (CONTROL sent), queued (for the peer's staging),\n"
              "          running\n"
              "LOCAL     this node's rank; REMOTE the other rank\n"
              "PEER      the remote daemon by name (its boot's id when the name is not known)\n"
              "CHUNKS    landed of all; AGE since submission; DEADLINE left of the one in effect\n",
};

#define MSG B10__AdminQuarantine
static const struct jfield quarantine_json[] = {
    JF(kind, J_STR), { .key = "value", .kind = J_FN, .fn = json_quarantine_value },
    JF(size, J_U64), JF(reason, J_STR), JF(reason_code, J_U32), JF(xfer_id, J_ID),
    JF(peer, J_ID), JF(peer_name, J_STR), JF(age_ms, J_U64), JF(expires_in_ms, J_I64),
};
static const struct column quarantine_cols[] = {
    COL("lKIND", C_STR, kind), COL_FN("lVALUE", cell_quarantine_value),
    COL_FN("rSIZE", cell_quarantine_size), COL("lREASON", C_STR, reason),
    COL("lTRANSFER", C_ID_DASH, xfer_id), COL_FN("lPEER", cell_quarantine_peer),
    COL("rAGE", C_MS, age_ms), COL_FN("lEXPIRES", cell_quarantine_expires),
};
#undef MSG
static const struct rows quarantine_rows = {
    ROWS("quarantine", B10__AdminReply, quarantine), JSON(quarantine_json), COLS(quarantine_cols),
    .empty = "quarantine empty",
};

#define MSG B10__AdminPeer
static const struct jfield peer_json[] = {
    JF(name, J_STR), JF(daemon_id, J_ID), JF(incarnation, J_U64S), JF(state, J_STR),
    JF(out_gen, J_ID), JF(in_up, J_BOOL), JF(in_gen, J_ID), JF(transports, J_STR),
    JF(xfers, J_U32), JF(waiting, J_U32), JF(in_xfers, J_U32), JF(staging_bytes, J_U64),
    JF(quarantined_bytes, J_U64), JF(control_bytes, J_U64), JF(refs, J_U32), JF(links, J_U64),
    JF(unauthenticated, J_U64), JF(replayed, J_U64), JF(refused, J_U64), JF(corrupt, J_U64),
};
static const struct column peer_cols[] = {
    COL("lNAME", C_STR, name), COL("lDAEMON", C_ID, daemon_id), COL_FN("lLINK", cell_peer_link),
    COL("lOUT-GEN", C_ID_DASH, out_gen), COL_FN("lIN-GEN", cell_peer_in_gen),
    COL("lTRANSPORTS", C_STR_DASH, transports), COL("rXFERS", C_U32, xfers),
    COL("rWAITING", C_U32, waiting), COL("rSTAGING", C_BYTES, staging_bytes),
    COL("rQUARANTINED", C_BYTES, quarantined_bytes), COL("rUNAUTH", C_U64, unauthenticated),
    COL("rREPLAYED", C_U64, replayed), COL("rREFUSED", C_U64, refused),
    COL("rCORRUPT", C_U64, corrupt),
};
#undef MSG
static const struct rows peer_rows = {
    ROWS("peers", B10__AdminReply, peers), JSON(peer_json), COLS(peer_cols), .empty = "no peers",
    .legend = "LINK         out: ours to it is up; in: its to us; both; none; connecting\n"
              "OUT-GEN      our link's endpoint generation (a new one per reconnection)\n"
              "IN-GEN       its link's generation, as it told us\n"
              "TRANSPORTS   what UCX chose for the link (a silent fallback to tcp shows here)\n"
              "XFERS        our transfers with it; WAITING those waiting for the link\n"
              "STAGING      views our transfers with it hold; QUARANTINED of its failed ones\n"
              "UNAUTH       its messages dropped: they did not open under the link's keys\n"
              "REPLAYED     its messages dropped as replays of earlier ones\n"
              "REFUSED      its work refused for its limits; CORRUPT its chunks failing checksums\n",
};

#define MSG B10__AdminRegion
static const struct jfield region_json[] = {
    JF(id, J_U64), JF(kind, J_STR), JF(backend, J_STR), JF(addr, J_U64), JF(length, J_U64),
    JF(open_to_node, J_BOOL),
};
static const struct column region_cols[] = {
    COL_FN("lAGENT", cell_region_agent), COL("rREGION", C_U64, id), COL("lKIND", C_STR, kind),
    COL("lBACKEND", C_STR, backend), COL("lADDRESS", C_HEX, addr),
    COL("rLENGTH", C_BYTES, length),
};
#undef MSG
static const struct rows region_rows = {
    ROWS("regions", B10__AdminClient, regions), JSON(region_json), COLS(region_cols),
};

#define MSG B10__AdminClient
static const struct jfield client_json[] = {
    JF(agent, J_STR), JF(pid, J_U32), JF(uid, J_U32), JF(gid, J_U32),
    JF(registered_bytes, J_U64), JF(remote_agents, J_U32), JF(xfers, J_U32),
    JF(targets, J_U32), { .kind = J_ROWS, .rows = &region_rows },
};
static const struct column client_cols[] = {
    COL("lAGENT", C_STR, agent), COL("rPID", C_U32, pid), COL("rUID", C_U32, uid),
    COL("rREGIONS", C_COUNT, n_regions), COL("rREGISTERED", C_BYTES, registered_bytes),
    COL("rREMOTES", C_U32, remote_agents), COL("rSENDING", C_U32, xfers),
    COL("rRECEIVING", C_U32, targets),
};
#undef MSG
static const struct rows client_rows = {
    ROWS("clients", B10__AdminReply, clients), JSON(client_json), COLS(client_cols),
    .empty = "no ranks connected", .sub = &region_rows,
};

/* Counters are an object in JSON (json_counters), a table for people. */
#define MSG B10__AdminCounter
static const struct column counter_cols[] = {
    COL("lCOUNTER", C_STR, name), COL("rVALUE", C_U64, value), COL("lMEANING", C_STR, help),
};
#undef MSG
static const struct rows counter_rows = { ROWS("counters", B10__AdminReply, counters), COLS(counter_cols) };

/* Status and staging: key-value tables without headings. */
static const struct column kv_cols[] = { { .head = "lKEY" }, { .head = "lVALUE" } };

#undef JF
#undef COL
#undef COL_FN

/* ---------------------------------------------------------------- tables */

#define TABLE_MAX_COLS 12

struct table {
    int ncols;
    const struct column *cols;
    char **cells;
    size_t nrows, cap;
};

static void table_init(struct table *t, const struct column *cols, int ncols)
{
    memset(t, 0, sizeof(*t));
    t->cols = cols;
    t->ncols = ncols < TABLE_MAX_COLS ? ncols : TABLE_MAX_COLS;
}

static void table_row(struct table *t, const char *const *cells)
{
    if (t->nrows == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 16;
        t->cells = realloc(t->cells, t->cap * t->ncols * sizeof(char *));
        if (t->cells == NULL) {
            fail("out of memory");
            exit(EXIT_REFUSED);
        }
    }
    for (int i = 0; i < t->ncols; i++)
        t->cells[t->nrows * t->ncols + i] = strdup(cells[i] != NULL ? cells[i] : "");
    t->nrows++;
}

static void table_pair(struct table *t, const char *key, const char *value)
{
    table_row(t, (const char *[]){ key, value });
}

static void table_kv(struct table *t, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void table_kv(struct table *t, const char *key, const char *fmt, ...)
{
    char value[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(value, sizeof(value), fmt, ap);
    va_end(ap);
    table_pair(t, key, value);
}

/* The cell of column col for row, in buf unless it is a string of the row's. */
static const char *table_cell(const struct column *col, char *buf, size_t n, const void *row,
                              const void *parent)
{
    const void *p = (const char *)row + col->off;

    switch (col->kind) {
    case C_STR: return *(char *const *)p;
    case C_STR_DASH: return (*(char *const *)p)[0] ? *(char *const *)p : "-";
    case C_ID: return fmt_id(buf, *(const uint64_t *)p);
    case C_ID_DASH: return *(const uint64_t *)p ? fmt_id(buf, *(const uint64_t *)p) : "-";
    case C_U32: snprintf(buf, n, "%u", *(const uint32_t *)p); return buf;
    case C_U64: snprintf(buf, n, "%" PRIu64, *(const uint64_t *)p); return buf;
    case C_COUNT: snprintf(buf, n, "%zu", *(const size_t *)p); return buf;
    case C_HEX: snprintf(buf, n, "0x%" PRIx64, *(const uint64_t *)p); return buf;
    case C_BYTES: return fmt_bytes(buf, n, *(const uint64_t *)p);
    case C_MS: return fmt_ms(buf, n, *(const uint64_t *)p);
    case C_UNTIL: return fmt_until(buf, n, *(const int64_t *)p);
    case C_FN: return col->fn(buf, n, row, parent);
    }
    return "";
}

/* A row per item of the rows r of msg, its cells as the columns of t say. */
static void table_fill(struct table *t, const struct rows *r, const void *msg)
{
    char bufs[TABLE_MAX_COLS][64];
    const char *cells[TABLE_MAX_COLS];

    for (size_t i = 0; i < rows_count(r, msg); i++) {
        const void *row = rows_item(r, msg, i);
        for (int c = 0; c < t->ncols; c++)
            cells[c] = table_cell(&t->cols[c], bufs[c], sizeof(bufs[c]), row, msg);
        table_row(t, cells);
    }
}

static void table_free(struct table *t)
{
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
}

static void table_print(struct table *t, bool heads)
{
    size_t width[TABLE_MAX_COLS];

    for (int i = 0; i < t->ncols; i++)
        width[i] = heads ? strlen(t->cols[i].head + 1) : 0;
    for (size_t r = 0; r < t->nrows; r++)
        for (int i = 0; i < t->ncols; i++) {
            size_t w = strlen(t->cells[r * t->ncols + i]);
            width[i] = w > width[i] ? w : width[i];
        }
    for (size_t r = heads ? 0 : 1; r <= t->nrows; r++) {
        for (int i = 0; i < t->ncols; i++) {
            const char *s = r == 0 ? t->cols[i].head + 1 : t->cells[(r - 1) * t->ncols + i];
            bool last = i == t->ncols - 1;
            if (t->cols[i].head[0] == 'r')
                printf("%*s%s", (int)width[i], s, last ? "" : "  ");
            else if (last)
                printf("%s", s);
            else
                printf("%-*s  ", (int)width[i], s);
        }
        putchar('\n');
    }
    table_free(t);
}

/* ---------------------------------------------------------------- JSON objects */

static void json_rows(bool *first, const struct rows *r, const void *msg);

/* msg as an object of the members fields lists. */
static void json_fields(const struct jfield *fields, size_t n, const void *msg)
{
    bool first = true;

    putchar('{');
    for (const struct jfield *f = fields; f < fields + n; f++) {
        const void *p = (const char *)msg + f->off;
        switch (f->kind) {
        case J_STR: jstr(&first, f->key, *(char *const *)p); break;
        case J_ID: jid(&first, f->key, *(const uint64_t *)p); break;
        case J_U32: ju64(&first, f->key, *(const uint32_t *)p); break;
        case J_U64: ju64(&first, f->key, *(const uint64_t *)p); break;
        case J_U64S: ju64s(&first, f->key, *(const uint64_t *)p); break;
        case J_I64: ji64(&first, f->key, *(const int64_t *)p); break;
        case J_BOOL: jbool(&first, f->key, *(const protobuf_c_boolean *)p); break;
        case J_ROWS: json_rows(&first, f->rows, msg); break;
        case J_FN: f->fn(&first, f->key, msg); break;
        }
    }
    putchar('}');
}

static void json_object(bool *first, const char *key, const struct jfield *fields, size_t n,
                        const void *msg)
{
    jkey(first, key);
    json_fields(fields, n, msg);
}

static void json_rows(bool *first, const struct rows *r, const void *msg)
{
    jkey(first, r->key);
    putchar('[');
    for (size_t i = 0; i < rows_count(r, msg); i++) {
        if (i > 0)
            putchar(',');
        json_fields(r->json, r->njson, rows_item(r, msg, i));
    }
    putchar(']');
}

static void json_counters(bool *first, const B10__AdminReply *a)
{
    bool g = true;

    jkey(first, "counters");
    putchar('{');
    for (size_t i = 0; i < a->n_counters; i++)
        ju64(&g, a->counters[i]->name, a->counters[i]->value);
    putchar('}');
}

/* ---------------------------------------------------------------- the views */

enum {
    ALSO_STAGING = 1 << 0,
    ALSO_COUNTERS = 1 << 1,
};

struct command {
    const char *name;
    B10__AdminOp op;
    const char *arg;                                /* its one argument (a transfer id), for usage */
    const struct rows *rows;                        /* the list it shows */
    unsigned also;                                  /* ALSO_*: JSON members past daemon and rows */
    void (*text)(const B10__AdminReply *a);         /* for people, when not the rows' table */
    /* An action's request and report; NULL for the read-only views, which run_query shows
     * and --watch repeats. */
    int (*act)(struct conn *c, const struct command *cmd, const struct opts *o);
    const char *help;
    const char *man;                                /* b10ctl(8)'s words (optdoc.h); NULL: help's */
};

static const B10__AdminDaemon *reply_daemon(const B10__AdminReply *a)
{
    static B10__AdminDaemon none = B10__ADMIN_DAEMON__INIT;
    return a->daemon != NULL ? a->daemon : &none;
}

static const B10__AdminStaging *reply_staging(const B10__AdminReply *a)
{
    static const B10__AdminStaging none = B10__ADMIN_STAGING__INIT;
    return a->staging != NULL ? a->staging : &none;
}

/* One object: the daemon, then what the command adds. */
static void show_json(const struct command *cmd, const B10__AdminReply *a)
{
    bool f = true;

    json_answered = true;
    putchar('{');
    json_object(&f, "daemon", daemon_json, N(daemon_json), reply_daemon(a));
    jbool(&f, "operator", a->operator_);
    ju64(&f, "uid", a->uid);
    if (cmd->rows != NULL) {
        json_rows(&f, cmd->rows, a);
        ju64(&f, "omitted", a->omitted);
    }
    if (cmd->also & ALSO_STAGING)
        json_object(&f, "staging", staging_json, N(staging_json), reply_staging(a));
    if (cmd->also & ALSO_COUNTERS)
        json_counters(&f, a);
    puts("}");
}

/*
 * A list's table, its rows' own rows in a second one when asked for (a rank's
 * registrations: tens a rank, read when one is in question), and what the
 * limit left out.
 */
static void show_rows(const struct rows *r, const B10__AdminReply *a, bool sub_rows)
{
    struct table t;

    if (rows_count(r, a) == 0 && a->omitted == 0) {
        if (a->operator_)
            puts(r->empty);
        else
            printf("%s (of uid %u's ranks: b10ctl runs as no operator of this daemon)\n", r->empty,
                   a->uid);
        return;
    }
    table_init(&t, r->cols, r->ncols);
    table_fill(&t, r, a);
    table_print(&t, true);
    if (r->sub != NULL && sub_rows) {
        table_init(&t, r->sub->cols, r->sub->ncols);
        for (size_t i = 0; i < rows_count(r, a); i++)
            table_fill(&t, r->sub, rows_item(r, a, i));
        if (t.nrows > 0) {
            putchar('\n');
            table_print(&t, true);
        } else {
            table_free(&t);
        }
    }
    if (a->omitted > 0)
        printf("(%u rows left out: raise --limit, up to the daemon's --max-admin-rows)\n", a->omitted);
    if (verbose && r->legend != NULL)
        printf("\n%s", r->legend);
    if (!a->operator_)
        printf("(only the ranks of uid %u: b10ctl runs as no operator of this daemon)\n", a->uid);
}

static void show_status(const B10__AdminReply *a)
{
    const B10__AdminDaemon *m = reply_daemon(a);
    char id[17], t1[64], t2[64], t3[64];
    struct table t;

    table_init(&t, kv_cols, N(kv_cols));
    table_kv(&t, "daemon", "%s (b10d %s, pid %u, name %s)", fmt_id(id, m->daemon_id), m->version,
             m->pid, m->name);
    table_pair(&t, "state", m->state);
    table_pair(&t, "uptime", fmt_ms(t1, sizeof(t1), m->uptime_ms));
    table_kv(&t, "socket", "%s%s", m->socket, m->socket_activated ? " (from systemd)" : "");
    table_pair(&t, "watchdog",
               m->watchdog_usec > 0 ? fmt_ms(t1, sizeof(t1), m->watchdog_usec / 1000) : "off");
    table_kv(&t, "clients", "ranks %u, connections %u", m->clients, m->connections);
    table_kv(&t, "peers", "%u", m->peers);
    table_kv(&t, "transfers", "%u in flight (%u sending, %u receiving)",
             m->xfers_send + m->xfers_recv, m->xfers_send, m->xfers_recv);
    table_kv(&t, "quarantine", "%u entries, %s of staging (budget %s), ttl %s",
             m->quarantine_entries, fmt_bytes(t1, sizeof(t1), m->quarantine_bytes),
             fmt_bytes(t2, sizeof(t2), m->quarantine_budget),
             fmt_ms(t3, sizeof(t3), m->quarantine_ttl_ms));
    table_kv(&t, "tags", "%u live, %u quarantined", m->tags_live, m->tags_quarantined);
    table_pair(&t, "ucx errors", m->ucx_err_mode);
    if (m->key_id != 0 && m->next_key_id != 0)
        table_kv(&t, "trust", "%s %s, and %s during a rotation%s", m->trust, fmt_id(t1, m->key_id),
                 fmt_id(t2, m->next_key_id), m->insecure ? "; insecure peers accepted" : "");
    else if (m->key_id != 0)
        table_kv(&t, "trust", "%s %s%s", m->trust, fmt_id(t1, m->key_id),
                 m->insecure ? "; insecure peers accepted" : "");
    else
        table_pair(&t, "trust", m->trust);
    if (m->node_cert != NULL && m->node_cert[0] != '\0') {
        time_t until = (time_t)m->node_cert_not_after;
        struct tm tm;
        char when[64];
        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&until, &tm));
        table_kv(&t, "node certificate", "%s, valid until %s; peers must prove theirs",
                 m->node_cert, when);
    }
    table_kv(&t, "ranks", "remote ones %s; %u agent names held by their users",
             strcmp(m->remote_access, "paired") == 0 ? "only when paired (--remote-access paired)"
                                                     : "of any authenticated daemon",
             m->names_held);
    if (a->operator_)
        table_kv(&t, "you", "uid %u, an operator", a->uid);
    else
        table_kv(&t, "you", "uid %u, no operator: transfers and clients show your uid's alone", a->uid);
    if (strcmp(m->state, "draining") == 0 || strcmp(m->state, "stopping") == 0)
        table_kv(&t, "drain", "running: %u were in flight; %" PRIu64 " landed, %" PRIu64
                 " failed so far; bound %s", m->drain_in_flight, m->drain_succeeded,
                 m->drain_failed, fmt_until(t1, sizeof(t1), (int64_t)m->drain_left_ms));
    else if (strcmp(m->state, "drained") == 0)
        table_kv(&t, "drain", "done in %s: %u were in flight; %" PRIu64 " landed, %" PRIu64
                 " failed, %u failed at the bound", fmt_ms(t1, sizeof(t1), m->drain_ms),
                 m->drain_in_flight, m->drain_succeeded, m->drain_failed, m->drain_forced);
    table_print(&t, false);
}

static void show_staging(const B10__AdminReply *a)
{
    const B10__AdminStaging *s = reply_staging(a);
    const B10__AdminDaemon *m = reply_daemon(a);
    char v[64], w[64];
    struct table t;

    table_init(&t, kv_cols, N(kv_cols));
    table_kv(&t, "views", "%u of %s (%s)", s->views, fmt_bytes(v, sizeof(v), s->view_bytes),
             fmt_bytes(w, sizeof(w), s->view_bytes * s->views));
    table_kv(&t, "free", "%u", s->free);
    table_kv(&t, "busy", "%u", s->busy);
    table_kv(&t, "quarantined", "%u", s->quarantined);
    table_kv(&t, "quarantined bytes", "%s of %s budget",
             fmt_bytes(v, sizeof(v), m->quarantine_bytes),
             fmt_bytes(w, sizeof(w), m->quarantine_budget));
    table_pair(&t, "configured", fmt_bytes(v, sizeof(v), s->configured_bytes));
    table_print(&t, false);
}

static void show_stats(const B10__AdminReply *a)
{
    struct table t;

    table_init(&t, counter_rows.cols, counter_rows.ncols);
    table_fill(&t, &counter_rows, a);
    table_print(&t, true);
    /* What moving bytes costs the node's cores: the figure lanes and spinning trade against. */
    uint64_t cpu_us = 0, moved = 0;
    for (size_t i = 0; i < a->n_counters; i++) {
        const char *n = a->counters[i]->name;
        if (strcmp(n, "cpu_us") == 0)
            cpu_us = a->counters[i]->value;
        else if (strcmp(n, "bytes_sent") == 0 || strcmp(n, "bytes_landed") == 0)
            moved += a->counters[i]->value;
    }
    if (moved > 0)
        printf("\ncore-seconds per GB moved (sent and landed): %.3f (%.1f core-s for %.3f GB)\n",
               cpu_us / 1e6 / (moved / 1e9), cpu_us / 1e6, moved / 1e9);
}

/* ---------------------------------------------------------------- Prometheus */

static void prom_up(bool up)
{
    printf("# HELP b10d_up Whether b10ctl reached the daemon.\n# TYPE b10d_up gauge\nb10d_up %d\n",
           up);
}

/*
 * The daemon renders its metrics (admin.c), the same text GET /metrics
 * serves (--metrics-listen); b10ctl adds only whether it reached it.
 */
static void show_metrics(const B10__AdminReply *a)
{
    prom_up(true);
    if (a->metrics_text == NULL || a->metrics_text[0] == '\0') {
        fprintf(stderr, "b10ctl: the daemon sent no metrics: older than this b10ctl?\n");
        return;
    }
    fputs(a->metrics_text, stdout);
}

/* ---------------------------------------------------------------- requests */

/*
 * One request; its exit code, the answer in *msg_p (free it) even when the
 * daemon refused, so that a report can say so.
 */
static int ask(struct conn *c, B10__AdminRequest *req, B10__DaemonMsg **msg_p)
{
    int rc = conn_request(c, req, msg_p);
    return rc != EXIT_OK ? rc : reply_exit((*msg_p)->reply);
}

static bool has_admin(const B10__DaemonMsg *msg)
{
    return msg->reply->body_case == B10__REPLY__BODY_ADMIN;
}

static int run_query(struct conn *c, const struct command *cmd, const struct opts *o)
{
    B10__AdminRequest req = B10__ADMIN_REQUEST__INIT;
    B10__DaemonMsg *msg = NULL;
    int rc;

    req.op = cmd->op;
    req.limit = o->limit;
    if ((rc = ask(c, &req, &msg)) == EXIT_OK) {
        if (!has_admin(msg)) {
            fail("b10d answered without an admin body");
            rc = EXIT_UNREACHABLE;
        } else if (o->json) {
            show_json(cmd, msg->reply->admin);
        } else if (cmd->text != NULL) {
            cmd->text(msg->reply->admin);
        } else {
            show_rows(cmd->rows, msg->reply->admin, o->regions);
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
/*
 * A transfer id as `b10ctl transfers` and the logs show it (16 hex digits, or
 * 0x and hex), or in decimal as a program may print the u64 (all digits, and
 * not 16 of them: 16 digits are the hex form).
 */
static int parse_xfer_id(const char *arg, uint64_t *id_p)
{
    const char *hex = strncmp(arg, "0x", 2) == 0 || strncmp(arg, "0X", 2) == 0 ? arg + 2 : arg;
    size_t len = strlen(arg);
    char *end;

    errno = 0;
    if (hex == arg && len > 0 && len != 16 && strspn(arg, "0123456789") == len) {
        uint64_t id = strtoull(arg, &end, 10);
        if (errno == 0 && *end == '\0') {
            *id_p = id;
            return 0;
        }
    }
    errno = 0;
    uint64_t id = strtoull(hex, &end, 16);
    if (hex[0] == '\0' || *end != '\0' || errno != 0 || strlen(hex) > 16 || hex[0] == '-' ||
        hex[0] == '+' || hex[0] == ' ') {
        fail("cancel: '%s' is not a transfer id (16 hex digits, as `b10ctl transfers` shows, "
             "or its decimal value)", arg);
        return -1;
    }
    *id_p = id;
    return 0;
}

/* The report says whether it was cancelled, also in JSON when the daemon refused. */
static int run_cancel(struct conn *c, const struct command *cmd, const struct opts *o)
{
    B10__AdminRequest req = B10__ADMIN_REQUEST__INIT;
    B10__DaemonMsg *msg = NULL;
    char id[17];
    int rc;

    req.op = cmd->op;
    req.xfer_id = o->xfer_id;
    rc = ask(c, &req, &msg);
    if (msg == NULL)
        return rc;
    if (o->json) {
        bool f = true;
        json_answered = true;
        putchar('{');
        jid(&f, "xfer_id", o->xfer_id);
        jbool(&f, "cancelled", rc == EXIT_OK);
        jstr(&f, "status", b10_status_name((b10_status_t)msg->reply->status));
        jstr(&f, "detail", msg->reply->detail);
        if (has_admin(msg))
            json_object(&f, "daemon", daemon_json, N(daemon_json), reply_daemon(msg->reply->admin));
        puts("}");
    } else if (rc == EXIT_OK) {
        printf("transfer %s cancelled\n", fmt_id(id, o->xfer_id));
    }
    b10__daemon_msg__free_unpacked(msg, NULL);
    return rc;
}

/* End a drain; the state that comes back says it. */
static int run_resume(struct conn *c, const struct command *cmd, const struct opts *o)
{
    B10__AdminRequest req = B10__ADMIN_REQUEST__INIT;
    B10__DaemonMsg *msg = NULL;

    req.op = cmd->op;
    int rc = ask(c, &req, &msg);
    if (msg == NULL)
        return rc;
    if (o->json) {
        bool f = true;
        json_answered = true;
        putchar('{');
        jbool(&f, "resumed", rc == EXIT_OK);
        jstr(&f, "status", b10_status_name((b10_status_t)msg->reply->status));
        jstr(&f, "detail", msg->reply->detail);
        if (has_admin(msg))
            json_object(&f, "daemon", daemon_json, N(daemon_json), reply_daemon(msg->reply->admin));
        puts("}");
    } else if (rc == EXIT_OK && has_admin(msg)) {
        printf("%s: b10d admits transfers\n", reply_daemon(msg->reply->admin)->state);
    }
    b10__daemon_msg__free_unpacked(msg, NULL);
    return rc;
}

/* Drain, then ask the status until it says drained or the daemon's bound has passed. */
static int run_drain(struct conn *c, const struct command *cmd, const struct opts *o)
{
    B10__AdminRequest req = B10__ADMIN_REQUEST__INIT;
    B10__DaemonMsg *msg = NULL;
    const B10__AdminDaemon *m;
    int64_t wait_until = 0;
    int rc;

    req.op = cmd->op;
    req.drain_timeout_ms = o->drain_timeout_ms;
    for (;;) {
        if ((rc = ask(c, &req, &msg)) != EXIT_OK)
            goto out;
        if (!has_admin(msg)) {
            fail("b10d answered without an admin body");
            rc = EXIT_UNREACHABLE;   /* as for the queries: no answer that can be read */
            goto out;
        }
        m = reply_daemon(msg->reply->admin);
        /* Past the daemon's bound every transfer has finished or failed: wait that, and a margin. */
        if (req.op == B10__ADMIN_OP__ADMIN_DRAIN)
            wait_until = now_ms() + (int64_t)m->drain_left_ms + 5000;
        if (o->no_wait || strcmp(m->state, "drained") == 0)
            break;
        if (now_ms() >= wait_until) {
            fail("drain: %u transfers still in flight", m->xfers_send + m->xfers_recv);
            rc = EXIT_NOT_DRAINED;
            break;
        }
        sleep_ms(100);
        b10__daemon_msg__free_unpacked(msg, NULL);
        msg = NULL;
        req.op = B10__ADMIN_OP__ADMIN_STATUS;
    }
    if (o->json) {
        show_json(cmd, msg->reply->admin);
    } else {
        char t[32];
        if (strcmp(m->state, "drained") == 0)
            printf("drained in %s: %u transfers were in flight; %" PRIu64 " sends landed, %" PRIu64
                   " failed, %u failed at the bound. b10d admits no new transfers until b10ctl "
                   "resume, or a restart.\n",
                   fmt_ms(t, sizeof(t), m->drain_ms), m->drain_in_flight, m->drain_succeeded,
                   m->drain_failed, m->drain_forced);
        else
            printf("draining: %u transfers in flight; b10d admits no new transfers\n",
                   m->xfers_send + m->xfers_recv);
    }
out:
    b10__daemon_msg__free_unpacked(msg, NULL);
    return rc;
}

/* ---------------------------------------------------------------- commands */

static const struct command commands[] = {
    { "status", B10__ADMIN_OP__ADMIN_STATUS, .text = show_status,
      .help = "the daemon: state, clients, transfers, quarantine",
      .man = "(also `b10ctl` without a command) The daemon: id, version, state (serving, draining, "
             "drained, stopping), uptime, socket, watchdog, clients, peers, transfers in flight, "
             "quarantine, tags, the current or last drain, and its trust: the ids of the cluster "
             "keys it holds (two during a rotation), \"no cluster key: local ranks only, no network "
             "transport\", or \"insecure\"." },
    { "transfers", B10__ADMIN_OP__ADMIN_TRANSFERS, .rows = &xfer_rows,
      .help = "transfers in flight",
      .man = "Transfers in flight: id, role (send, recv, read, or local: both ranks on this "
             "daemon), state, local and remote agent, remote daemon, bytes, chunks done, age, and "
             "the deadline: the time left of the deadline the daemon took (`in 12 s of 30 s`; a "
             "rank's 0 is the daemon's --deadline-ms). --json gives both, `deadline_in_ms` and "
             "`deadline_ms`." },
    { "quarantine", B10__ADMIN_OP__ADMIN_QUARANTINE, .rows = &quarantine_rows,
      .help = "quarantine entries, their reason and expiry",
      .man = "Quarantine entries: kind (view, tags, xfer-id, generation), value, size, reason (the "
             "status that failed the transfer), transfer, remote daemon, age and expiry. An entry "
             "whose time has come but whose memory an outstanding request may still write shows "
             "\"due, still held\"." },
    { "staging", B10__ADMIN_OP__ADMIN_STAGING, .also = ALSO_STAGING, .text = show_staging,
      .help = "the staging pool",
      .man = "The staging pool: views, free, busy with a transfer, quarantined, and the "
             "quarantined bytes against the budget." },
    { "peers", B10__ADMIN_OP__ADMIN_PEERS, .rows = &peer_rows,
      .help = "remote daemons: links, endpoint generations, transports",
      .man = "Remote daemons, by the name each proved with the cluster key: LINK says which links "
             "are up (`out`: ours to it; `in`: its to us, as on a daemon that is only streamed "
             "into; `both`; `none`; `connecting` while ours opens), OUT-GEN our endpoint's "
             "generation, IN-GEN that of its link to us, the UCX transports of the endpoint (a "
             "silent fallback to tcp shows here), their transfers, the staging held and "
             "quarantined for them, and how many of their messages were dropped (they did not open "
             "under their link's keys, or replayed earlier ones) and how much of their work was "
             "refused for their limits." },
    { "clients", B10__ADMIN_OP__ADMIN_CLIENTS, .rows = &client_rows,
      .help = "connected ranks and their registered memory",
      .man = "Connected ranks, one row each: pid, uid, registrations and registered bytes, remote "
             "agents, transfers sending and receiving. With --regions, then every registered "
             "region (--json always has them)." },
    { "stats", B10__ADMIN_OP__ADMIN_STATS, .also = ALSO_COUNTERS, .text = show_stats,
      .help = "counters",
      .man = "The daemon's counters, with what each counts; then its core-seconds per GB moved: "
             "its CPU time (`cpu_us`, all threads) over the bytes it sent and landed, what moving "
             "them cost the node's cores." },
    { "metrics", B10__ADMIN_OP__ADMIN_METRICS, .also = ALSO_STAGING | ALSO_COUNTERS,
      .text = show_metrics, .help = "status, staging and counters as Prometheus text",
      .man = "The daemon's metrics in the Prometheus text exposition format, the text its "
             "`GET /metrics` serves (`b10d --metrics-listen`), with `b10d_up 1` in front: status, "
             "staging, counters, histograms of landed transfers by role (duration, planning, size, "
             "pieces), failures by status, transfers and bytes in flight by peer, each peer's "
             "dropped messages and refused work, the trust mode and the `process_*` family. For a "
             "node exporter's textfile collector (see EXAMPLES: write a temporary file and rename "
             "it, so a scrape never reads half a file). When the daemon cannot be reached it "
             "prints `b10d_up 0` and exits 3; when it refuses a user who is no operator, `b10d_up 1` "
             "and `b10d_scrape_permitted 0`, and exits 5." },
    { "cancel", B10__ADMIN_OP__ADMIN_CANCEL, .arg = "ID", .act = run_cancel,
      .help = "cancel transfer ID (as `transfers` shows it)",
      .man = "Fail transfer <ID> (16 hex digits, as `transfers` shows it) with B10_ERR_CANCELLED, "
             "on whichever side this daemon is: its resources go into the quarantine and the "
             "other daemon is told." },
    { "drain", B10__ADMIN_OP__ADMIN_DRAIN, .act = run_drain,
      .help = "admit nothing new; wait for in-flight transfers to end",
      .man = "Stop admitting transfers (submissions and incoming requests fail with "
             "B10_ERR_DRAINING), wait until those in flight finished or failed, and report how "
             "many landed and failed. What is still in flight at the bound fails with "
             "B10_ERR_DRAINING. The daemon keeps answering `b10ctl` but admits nothing until "
             "`resume` or a restart." },
    { "resume", B10__ADMIN_OP__ADMIN_RESUME, .act = run_resume,
      .help = "end a drain: admit transfers again (not a stopping daemon's)",
      .man = "End an operator's drain: transfers are admitted again, and those still in flight "
             "are no longer failed at its bound. A daemon stopping on a signal cannot be resumed "
             "(B10_ERR_DRAINING, exit 1)." },
};

/* ---------------------------------------------------------------- options */

enum { OPT_LIMIT = 256, OPT_DRAIN_TIMEOUT, OPT_NO_WAIT, OPT_REGIONS, OPT_VERSION, OPT_MAN };

/* b10ctl's options, in --help's order: getopt_long, --help and b10ctl(8) all read them here. */
static const struct optdoc ctl_opts[] = {
    { "socket", 's', required_argument, "PATH",
      "the daemon's socket (default: $B10_SOCKET, else " SOCKET_DEFAULT ")",
      "The daemon's socket (default: `$B10_SOCKET`, else <" SOCKET_DEFAULT ">)." },
    { "json", 'j', no_argument, NULL,
      "one JSON object per answer, on one line",
      "One JSON object per answer, on one line: `\"daemon\"` and the command's section. Ids are "
      "strings of 16 hex digits, `null` for none; an incarnation (nanoseconds) is a decimal "
      "string, exact past 2^53; times are milliseconds; a peer's `\"peer_name\"` stands beside "
      "its id. A failure with no answer from the daemon prints "
      "`{\"error\":{\"exit\":N,\"message\":...}}`." },
    { "watch", 'w', optional_argument, "SECONDS",
      "ask again every SECONDS (default 2) until interrupted",
      "Ask again every <SECONDS> (default 2) until interrupted; on a terminal the screen is "
      "redrawn, with --json one line per answer." },
    { "count", 'n', required_argument, "N",
      "with --watch: stop after N answers",
      "With --watch, stop after <N> answers." },
    { "limit", OPT_LIMIT, required_argument, "N",
      "most rows of a list (default and cap: the daemon's --max-admin-rows)",
      "The most rows of a list; the daemon's --max-admin-rows is the default and the cap. Rows "
      "left out are counted." },
    { "timeout", 't', required_argument, "MS",
      "how long to wait for an answer (default 5000)", NULL },
    { "drain-timeout", OPT_DRAIN_TIMEOUT, required_argument, "MS",
      "drain: fail what is still in flight after MS\n"
      "(default: the daemon's --drain-timeout-ms)",
      "For `drain`: fail what is still in flight after <MS> (default: the daemon's "
      "--drain-timeout-ms)." },
    { "no-wait", OPT_NO_WAIT, no_argument, NULL,
      "drain: return once the daemon admits nothing new",
      "For `drain`: return as soon as the daemon admits nothing new." },
    { "regions", OPT_REGIONS, no_argument, NULL,
      "clients: each rank's registrations too (JSON has them always)",
      "`clients`: each rank's registered regions too, after the ranks." },
    { "verbose", 'v', no_argument, NULL,
      "what the columns of transfers and peers mean, under them",
      "Under `transfers` and `peers`, what each column means." },
    { "help", 'h', no_argument, NULL, "this text", "Print the commands and options, and exit." },
    { "version", OPT_VERSION, no_argument, NULL, "the version", "Print the version, and exit." },
    /* `make man` asks for b10ctl(8)'s entries of both tables (scripts/man-sections.py). */
    { "man", OPT_MAN, required_argument, "SECTION", NULL, NULL },
};

/* --man=commands or --man=options: the entries of b10ctl(8)'s COMMANDS or OPTIONS, as troff. */
static int man_section(const char *section)
{
    if (strcmp(section, "commands") == 0) {
        for (size_t i = 0; i < N(commands); i++)
            optdoc_man_item(stdout, commands[i].name, commands[i].arg,
                            commands[i].man != NULL ? commands[i].man : commands[i].help);
    } else if (strcmp(section, "options") == 0) {
        for (size_t i = 0; i < N(ctl_opts); i++)
            optdoc_man(stdout, &ctl_opts[i]);
    } else {
        fail("--man: '%s' is not commands or options", section);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

static void usage(FILE *f)
{
    fprintf(f,
"usage: b10ctl [OPTIONS] [COMMAND [ARGS]]\n"
"\n"
"Inspect and steer the b10d of this node. Without a command: status.\n"
"\n"
"Commands:\n");
    for (size_t i = 0; i < N(commands); i++) {
        char name[32];
        snprintf(name, sizeof(name), "%s%s%s", commands[i].name, commands[i].arg ? " " : "",
                 commands[i].arg ? commands[i].arg : "");
        fprintf(f, "  %-12s %s\n", name, commands[i].help);
    }
    fprintf(f, "\nOptions:\n");
    for (size_t i = 0; i < N(ctl_opts); i++)
        optdoc_help(f, &ctl_opts[i], 27);
    fprintf(f,
"\n"
"Exit status: 0 done; 1 the daemon refused or failed the request; 2 usage;\n"
"3 daemon unreachable or the connection broke; 4 no such transfer; 5 not\n"
"permitted (drain, quarantine, peers, stats, metrics and other users' transfers are\n"
"for operators: root, the daemon's user and its --admin-group); 6 drain:\n"
"transfers still in flight when the wait ended.\n");
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
    struct option longopts[N(ctl_opts) + 1];
    char shorts[3 * N(ctl_opts) + 1] = "";
    size_t n = 0;
    struct opts o = { .watch_s = 2, .timeout_ms = 5000 };
    const char *env = getenv("B10_SOCKET");
    uint64_t v;
    int c;

    o.socket_path = env != NULL && env[0] != '\0' ? env : SOCKET_DEFAULT;
    for (size_t i = 0; i < N(ctl_opts); i++)
        n += optdoc_getopt(&ctl_opts[i], &longopts[n], shorts);
    longopts[n] = (struct option){ NULL, 0, NULL, 0 };
    while ((c = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
        switch (c) {
        case 'v':
            verbose = true;
            break;
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
        case OPT_REGIONS:
            o.regions = true;
            break;
        case 'h':
            usage(stdout);
            return EXIT_OK;
        case OPT_VERSION:
            printf("b10ctl %s (protocol %d)\n", B10CTL_VERSION, 1);
            return EXIT_OK;
        case OPT_MAN:
            return man_section(optarg);
        default:
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    /* b10ctl alone is the question an operator asks first: is it up, and how is it doing. */
    const char *name = optind < argc ? argv[optind] : "status";
    int nargs = optind < argc ? argc - optind - 1 : 0;
    const struct command *cmd = NULL;
    for (size_t i = 0; i < N(commands); i++)
        if (strcmp(name, commands[i].name) == 0)
            cmd = &commands[i];
    if (cmd == NULL) {
        fail("unknown command '%s'; try --help", name);
        return EXIT_USAGE;
    }
    int want = cmd->arg != NULL ? 1 : 0;
    if (nargs != want) {
        fail("%s takes %s", cmd->name, want ? "one argument, the transfer id" : "no arguments");
        return EXIT_USAGE;
    }
    if (o.watch && cmd->act != NULL) {
        fail("--watch is for the read-only commands, not %s", cmd->name);
        return EXIT_USAGE;
    }
    if (cmd->arg != NULL && parse_xfer_id(argv[optind + 1], &o.xfer_id) != 0)
        return EXIT_USAGE;

    struct conn conn;
    int rc = conn_open(&conn, o.socket_path, o.timeout_ms);
    bool reached = rc == EXIT_OK;
    if (reached) {
        rc = cmd->act != NULL ? cmd->act(&conn, cmd, &o)
             : o.watch        ? run_watch(&conn, cmd, &o)
                              : run_query(&conn, cmd, &o);
        conn_close(&conn);
    }
    /*
     * A scrape still gets an answer: the daemon is down, or it is up and
     * refused this user the metrics (no operator), which is not "down".
     */
    /* --json answers every time: a failure with no answer of the daemon's is an error object. */
    if (o.json && rc != EXIT_OK && !json_answered) {
        bool f = true;
        printf("{\"error\":{");
        ju64(&f, "exit", (uint64_t)rc);
        jstr(&f, "message", last_failure);
        printf("}}\n");
    }
    if ((!reached || rc == EXIT_UNREACHABLE) && cmd->op == B10__ADMIN_OP__ADMIN_METRICS && !o.json)
        prom_up(false);
    else if (rc == EXIT_PERMISSION && cmd->op == B10__ADMIN_OP__ADMIN_METRICS && !o.json) {
        prom_up(true);
        printf("# HELP b10d_scrape_permitted Whether the daemon gave this user its metrics "
               "(operators only: root, its user, --admin-group).\n"
               "# TYPE b10d_scrape_permitted gauge\nb10d_scrape_permitted 0\n");
    }
    return rc;
}
