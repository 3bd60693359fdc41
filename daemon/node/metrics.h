/*
 * metrics.h — GET /metrics over HTTP (--metrics-listen): the Prometheus text
 * admin.c renders for `b10ctl metrics`, for a scraper that cannot run b10ctl.
 *
 * Off unless asked; on 127.0.0.1 unless an address is named. It answers
 * nothing but GET /metrics (404 for other paths, 405 for other methods,
 * 400 for what is no HTTP/1.x request), one request per connection, then
 * closes (HTTP/1.0 style). Every input is bounded, since anyone who reaches
 * the port can send it anything: the request and its headers together, the
 * header lines, the time a whole request may take to arrive, the time a
 * connection may stay open, and the connections open at once. A full table
 * makes room for a newcomer: the oldest connection that is not being
 * answered, of the address that holds the most of them, goes (so that idle
 * or trickling connections, a source's own first, cannot lock a scraper
 * out); only when every connection is being answered is the newcomer
 * closed unanswered. Each drop is counted by its reason. No
 * authentication: what it shows is what `b10ctl metrics` shows an operator
 * (peers' names, counts), so expose it only to the network the scraper is on.
 * Loop thread only; libuv handles freed in their close callbacks.
 */
#ifndef B10D_METRICS_H
#define B10D_METRICS_H

#include "b10/b10.h"

#define METRICS_MAX_CONNECTIONS 16u
#define METRICS_MAX_REQUEST 8192u       /* request line and headers, bytes */
#define METRICS_MAX_HEADERS 64u         /* header lines */
#define METRICS_REQUEST_MS 2000u        /* from accept to the whole request head */
#define METRICS_TIMEOUT_MS 10000u       /* from accept to the response written */
#define METRICS_LINGER_MS 1000u         /* from the response written to the client's close */
/*
 * The kernel's queue of connections not yet accepted: well above the bound,
 * so that connections are accepted (and counted) in the order they came
 * while the loop is busy; a full queue drops handshakes, and a client whose
 * handshake the kernel completes later would be counted out of its turn.
 */
#define METRICS_BACKLOG 128

struct b10d;
struct metrics;

/*
 * Listen on cfg.metrics_host:metrics_port when cfg.metrics_on; *m_p stays
 * NULL otherwise. When it cannot listen, libuv's reason is logged and the
 * status says what to do (B10_ERR_EXISTS: the port is in use;
 * B10_ERR_INVALID_ARG: not an address of this host; ...).
 * m_p NULL: only check that it could (--check-config), and close again.
 */
b10_status_t metrics_start(struct b10d *d, struct metrics **m_p);
/* Stop listening and close every connection; m is freed once they are closed. NULL is fine. */
void metrics_stop(struct metrics *m);

#endif
