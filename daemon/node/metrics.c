/* metrics.c — see metrics.h. */
#include "metrics.h"

#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "b10d.h"
#include "status.h"

struct metrics {
    struct b10d *d;
    uv_tcp_t server;
    bool listening;                 /* server is open (until its close callback) */
    bool stopping;
    struct list conns;              /* struct metrics_conn, oldest first */
    uint32_t nconns;
    uint64_t drop_log_ms;           /* drops log at most once a second */
};

struct metrics_conn {
    struct list node;               /* metrics.conns */
    struct metrics *m;
    uv_tcp_t tcp;
    uv_timer_t timer;               /* the bound of the stage it is in (metrics.h) */
    uint64_t accepted_ms;
    struct sockaddr_storage from;   /* the client's address (its port aside); AF_UNSPEC: unknown */
    uv_write_t write;
    uv_shutdown_t shutdown;
    int open_handles;               /* of tcp and timer, until their close callbacks */
    bool closing;
    bool answered;                  /* a response is written or being written */
    bool draining;                  /* answered and shut down: what still comes is dropped */
    size_t length;                  /* bytes of request in buf */
    char buf[METRICS_MAX_REQUEST];
    char *response;                 /* malloc'd, freed once both handles closed */
};

static void metrics_maybe_free(struct metrics *m)
{
    if (m->stopping && !m->listening && list_empty(&m->conns))
        free(m);
}

static void metrics_conn_closed(uv_handle_t *handle)
{
    struct metrics_conn *c = handle->data;
    if (--c->open_handles > 0)
        return;
    struct metrics *m = c->m;
    list_remove(&c->node);
    m->nconns--;
    free(c->response);
    free(c);
    metrics_maybe_free(m);
}

static void metrics_conn_close(struct metrics_conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    uv_close((uv_handle_t *)&c->tcp, metrics_conn_closed);
    uv_close((uv_handle_t *)&c->timer, metrics_conn_closed);
}

/* Say why connections are dropped, at most once a second; the counters say how many. */
static void metrics_conn_drop(struct metrics_conn *c, uint64_t *counter, const char *why)
{
    struct b10d *d = c->m->d;
    uint64_t now = d->now_ms(d);
    (*counter)++;
    if (now - c->m->drop_log_ms >= 1000) {
        c->m->drop_log_ms = now;
        log_warning("metrics: closing a connection %s (b10ctl stats: metrics_dropped_slow %" PRIu64
                    ", metrics_dropped_evicted %" PRIu64 ", metrics_refused %" PRIu64 ")", why,
                    d->stats.metrics_dropped_slow, d->stats.metrics_dropped_evicted,
                    d->stats.metrics_refused);
    }
    metrics_conn_close(c);
}

_Static_assert(METRICS_REQUEST_MS == 2000, "the log line and the counter's help say 2 s");

static void metrics_on_timeout(uv_timer_t *timer)
{
    struct metrics_conn *c = timer->data;
    if (!c->answered)
        metrics_conn_drop(c, &c->m->d->stats.metrics_dropped_slow,
                          "that sent no whole request within 2 s");
    else
        metrics_conn_close(c);
}

/* The rest of its time from accept up to bound_ms, at most most_ms, and at least 1 ms. */
static void metrics_conn_bound(struct metrics_conn *c, uint64_t bound_ms, uint64_t most_ms)
{
    if (c->closing)
        return;
    uint64_t age = c->m->d->now_ms(c->m->d) - c->accepted_ms;
    uint64_t left = age < bound_ms ? bound_ms - age : 1;
    uv_timer_start(&c->timer, metrics_on_timeout, left < most_ms ? left : most_ms, 0);
}

static void metrics_on_shutdown(uv_shutdown_t *req, int status)
{
    if (status < 0)
        metrics_conn_close(req->data);
}

static void metrics_on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *buf);
static void metrics_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf);

static void metrics_on_written(uv_write_t *req, int status)
{
    struct metrics_conn *c = req->data;

    /*
     * HTTP/1.0, one response each. Closed with bytes of the request unread
     * (an oversized one), the kernel would reset the connection and the
     * client might lose the answer: send FIN, read and drop what still
     * comes until the client closes, the time bound at the latest.
     */
    c->draining = true;
    metrics_conn_bound(c, METRICS_TIMEOUT_MS, METRICS_LINGER_MS);
    c->shutdown.data = c;
    if (status < 0 || uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, metrics_on_shutdown) != 0 ||
        uv_read_start((uv_stream_t *)&c->tcp, metrics_alloc, metrics_on_read) != 0)
        metrics_conn_close(c);
}

/* Write status (and body, or a one-line reason) and close once written. */
static void metrics_respond(struct metrics_conn *c, const char *status, const char *extra,
                            const char *body, size_t body_length)
{
    char head[256];
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->answered = true;
    /* The response has the rest of the connection's time to be written. */
    metrics_conn_bound(c, METRICS_TIMEOUT_MS, METRICS_TIMEOUT_MS);
    int n = snprintf(head, sizeof(head), "HTTP/1.0 %s\r\nContent-Type: text/plain; version=0.0.4; "
                     "charset=utf-8\r\nContent-Length: %zu\r\nConnection: close\r\n%s\r\n", status,
                     body_length, extra);
    if (n < 0 || (size_t)n >= sizeof(head) || (c->response = malloc((size_t)n + body_length)) == NULL) {
        metrics_conn_close(c);
        return;
    }
    memcpy(c->response, head, (size_t)n);
    if (body_length > 0)
        memcpy(c->response + n, body, body_length);
    uv_buf_t buf = uv_buf_init(c->response, (unsigned)((size_t)n + body_length));
    c->write.data = c;
    if (uv_write(&c->write, (uv_stream_t *)&c->tcp, &buf, 1, metrics_on_written) != 0)
        metrics_conn_close(c);
}

static void metrics_error(struct metrics_conn *c, const char *status, const char *extra)
{
    char body[128];
    int n = snprintf(body, sizeof(body), "%s: b10d serves GET /metrics only\n", status);
    log_debug("metrics: answered %s", status);
    metrics_respond(c, status, extra, body, n > 0 ? (size_t)n : 0);
}

/* A whole request head is in c->buf (NUL-terminated): answer it. */
static void metrics_answer(struct metrics_conn *c, const char *head_end)
{
    char method[16], target[256], version[16];
    uint32_t lines = 0;

    for (const char *p = strchr(c->buf, '\n'); p != NULL && p < head_end; p = strchr(p + 1, '\n'))
        lines++;
    if (lines > METRICS_MAX_HEADERS) {
        metrics_error(c, "431 Request Header Fields Too Large", "");
        return;
    }
    if (sscanf(c->buf, "%15[A-Z] %255[^ \r\n] %15[^ \r\n]", method, target, version) != 3 ||
        strncmp(version, "HTTP/1.", 7) != 0) {
        metrics_error(c, "400 Bad Request", "");
        return;
    }
    if (strcmp(method, "GET") != 0) {
        metrics_error(c, "405 Method Not Allowed", "Allow: GET\r\n");
        return;
    }
    size_t path = strcspn(target, "?");
    if (path != strlen("/metrics") || strncmp(target, "/metrics", path) != 0) {
        metrics_error(c, "404 Not Found", "");
        return;
    }
    char *text;
    size_t length;
    if (admin_metrics_text(c->m->d, &text, &length) != B10_OK) {
        metrics_error(c, "503 Service Unavailable", "");
        return;
    }
    metrics_respond(c, "200 OK", "", text, length);
    free(text);
}

static void metrics_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    struct metrics_conn *c = handle->data;
    if (c->draining) {
        *buf = uv_buf_init(c->buf, sizeof(c->buf));
        return;
    }
    /* One byte kept for the NUL that ends the head. */
    *buf = uv_buf_init(c->buf + c->length, (unsigned)(sizeof(c->buf) - 1 - c->length));
}

static void metrics_on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *buf)
{
    struct metrics_conn *c = stream->data;

    if (n < 0) {
        metrics_conn_close(c);
        return;
    }
    if (c->answered || c->closing)
        return;     /* dropped: a request's rest, after its answer */
    c->length += (size_t)n;
    c->buf[c->length] = '\0';
    if (memchr(c->buf, '\0', c->length) != NULL) {
        metrics_error(c, "400 Bad Request", "");
        return;
    }
    const char *end = strstr(c->buf, "\r\n\r\n");
    if (end == NULL)
        end = strstr(c->buf, "\n\n");
    if (end != NULL)
        metrics_answer(c, end);
    else if (c->length >= sizeof(c->buf) - 1)
        metrics_error(c, "431 Request Header Fields Too Large", "");
}

/* Do a and b name one host (their ports aside)? Unknown addresses are one host. */
static bool metrics_same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return false;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->ss_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                      &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
    return true;
}

/* May it go for a newcomer? Not while its response is being written. */
static bool metrics_conn_evictable(const struct metrics_conn *c)
{
    return !c->closing && (!c->answered || c->draining);
}

/*
 * The connection to close for a newcomer once the table is full: the oldest
 * evictable one of the address that holds the most of them (a flood from
 * one source pushes out its own). NULL when every one is being answered.
 */
static struct metrics_conn *metrics_victim(struct metrics *m)
{
    struct metrics_conn *victim = NULL;
    uint32_t most = 0;

    for (struct list *p = m->conns.next; p != &m->conns; p = p->next) {
        struct metrics_conn *c = list_entry(p, struct metrics_conn, node);
        if (!metrics_conn_evictable(c))
            continue;
        uint32_t n = 0;
        struct metrics_conn *first = NULL;
        for (struct list *q = m->conns.next; q != &m->conns; q = q->next) {
            struct metrics_conn *o = list_entry(q, struct metrics_conn, node);
            if (metrics_conn_evictable(o) && metrics_same_host(&o->from, &c->from) && n++ == 0)
                first = o;
        }
        if (n > most) {
            most = n;
            victim = first;
        }
    }
    return victim;
}

static void metrics_on_connection(uv_stream_t *server, int status)
{
    struct metrics *m = server->data;
    struct metrics_conn *c;

    if (status < 0) {
        log_warning("metrics: accepting a connection failed: %s", uv_strerror(status));
        return;
    }
    if ((c = calloc(1, sizeof(*c))) == NULL) {
        log_warning("metrics: no memory for a connection");
        return;
    }
    c->m = m;
    uv_tcp_init(m->d->loop, &c->tcp);
    uv_timer_init(m->d->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->open_handles = 2;
    list_insert_tail(&m->conns, &c->node);
    m->nconns++;
    c->accepted_ms = m->d->now_ms(m->d);
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0 || m->stopping) {
        metrics_conn_close(c);
        return;
    }
    int len = sizeof(c->from);
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&c->from, &len) != 0)
        c->from.ss_family = AF_UNSPEC;
    /* Closing ones count until their close callbacks: only the open ones take a place. */
    uint32_t open = 0;
    for (struct list *p = m->conns.next; p != &m->conns; p = p->next)
        open += !list_entry(p, struct metrics_conn, node)->closing;
    if (open > METRICS_MAX_CONNECTIONS) {
        struct metrics_conn *victim = metrics_victim(m);
        if (victim == NULL || victim == c) {
            metrics_conn_drop(c, &m->d->stats.metrics_refused,
                              "on arrival: every connection open is being answered");
            return;
        }
        metrics_conn_drop(victim, &m->d->stats.metrics_dropped_evicted,
                          "not yet answered, for a newcomer (the oldest of the address holding "
                          "the most)");
    }
    metrics_conn_bound(c, METRICS_REQUEST_MS, METRICS_REQUEST_MS);
    if (uv_read_start((uv_stream_t *)&c->tcp, metrics_alloc, metrics_on_read) != 0)
        metrics_conn_close(c);
}

static void metrics_server_closed(uv_handle_t *handle)
{
    struct metrics *m = handle->data;
    m->listening = false;
    metrics_maybe_free(m);
}

b10_status_t metrics_start(struct b10d *d, struct metrics **m_p)
{
    const struct config *cfg = &d->cfg;
    struct sockaddr_storage addr;
    struct metrics *m;
    char where[96];
    bool v6 = strchr(cfg->metrics_host, ':') != NULL;
    int rc;

    if (!cfg->metrics_on)
        return B10_OK;
    rc = v6 ? uv_ip6_addr(cfg->metrics_host, cfg->metrics_port, (struct sockaddr_in6 *)&addr)
            : uv_ip4_addr(cfg->metrics_host, cfg->metrics_port, (struct sockaddr_in *)&addr);
    if (rc != 0) {
        log_err("--metrics-listen %s: %s", cfg->metrics_host, uv_strerror(rc));
        return B10_ERR_INVALID_ARG;
    }
    if ((m = calloc(1, sizeof(*m))) == NULL)
        return B10_ERR_NO_MEMORY;
    m->d = d;
    list_init(&m->conns);
    uv_tcp_init(d->loop, &m->server);
    m->server.data = m;
    m->listening = true;
    if ((rc = uv_tcp_bind(&m->server, (const struct sockaddr *)&addr, 0)) != 0 ||
        (rc = uv_listen((uv_stream_t *)&m->server, METRICS_BACKLOG, metrics_on_connection)) != 0) {
        log_err("cannot listen for metrics on %s%s%s:%u: %s", v6 ? "[" : "", cfg->metrics_host,
                v6 ? "]" : "", (unsigned)cfg->metrics_port, uv_strerror(rc));
        m->stopping = true;
        uv_close((uv_handle_t *)&m->server, metrics_server_closed);
        return status_from_errno(-rc);      /* libuv's errors are -errno on Unix */
    }
    if (m_p == NULL) {
        metrics_stop(m);
        return B10_OK;
    }
    /* The port the kernel gave, for --metrics-listen ADDR:0. */
    int len = sizeof(addr);
    unsigned port = cfg->metrics_port;
    if (uv_tcp_getsockname(&m->server, (struct sockaddr *)&addr, &len) == 0)
        port = ntohs(addr.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&addr)->sin6_port
                                                : ((struct sockaddr_in *)&addr)->sin_port);
    snprintf(where, sizeof(where), "%s%s%s:%u", v6 ? "[" : "", cfg->metrics_host, v6 ? "]" : "", port);
    log_info("metrics on http://%s/metrics%s", where,
             strcmp(cfg->metrics_host, "127.0.0.1") == 0 || strcmp(cfg->metrics_host, "::1") == 0
                 ? " (this host only)" : "");
    *m_p = m;
    return B10_OK;
}

void metrics_stop(struct metrics *m)
{
    struct list *pos, *tmp;

    if (m == NULL || m->stopping)
        return;
    m->stopping = true;
    list_for_each_safe(pos, tmp, &m->conns)
        metrics_conn_close(list_entry(pos, struct metrics_conn, node));
    uv_close((uv_handle_t *)&m->server, metrics_server_closed);
}
