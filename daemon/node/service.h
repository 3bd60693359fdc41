/*
 * service.h — the daemon's life under a service manager, and its drain.
 *
 * The only room that speaks to systemd (<systemd/sd-daemon.h>): the client
 * socket from socket activation, READY=1 once listening, a one-line STATUS=
 * kept current, WATCHDOG=1 from a loop timer (a stuck loop stops pinging and
 * systemd restarts the daemon), STOPPING=1 when the end begins. Without a
 * service manager (no NOTIFY_SOCKET, no LISTEN_FDS) all of it is silent.
 *
 * A drain stops admitting transfers (d->stopping: new submissions and
 * CONTROLs are refused with B10_ERR_DRAINING), lets those in flight finish
 * or fail on their own, and when its bound expires fails what is left
 * through the funnel with B10_ERR_DRAINING. SIGTERM and SIGINT drain and
 * then stop the loop; a second signal stops it at once. An operator's drain
 * (b10ctl drain) leaves the daemon running, admitting nothing, until it is
 * restarted.
 */
#ifndef B10D_SERVICE_H
#define B10D_SERVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "b10d.h"

struct service;

/* B10_OK, or B10_ERR_NO_MEMORY. */
b10_status_t service_create(struct b10d *d, struct service **service_p);
/* Says STOPPING=1 if nothing did yet; closes the timers. Accepts NULL. */
void service_destroy(struct service *svc);

/*
 * The listening socket systemd passed (LISTEN_FDS) in *fd_p, or -1 there
 * when not socket activated; the caller owns it. B10_ERR_INVALID_ARG when
 * what was passed is not one listening Unix stream socket, or what
 * sd_listen_fds' errno says (both logged).
 */
b10_status_t service_listen_fd(struct service *svc, int *fd_p);

/* Listening and serving: READY=1 with the first STATUS=. */
void service_ready(struct service *svc);

/*
 * Begin (or tighten) a drain: fail what is still in flight bound_ms from
 * now. stop: stop the loop once drained (a signal's drain).
 */
void service_drain(struct service *svc, uint32_t bound_ms, bool stop);
/*
 * End an operator's drain: transfers are admitted again, and those in flight
 * are no longer failed at its bound. B10_OK, *ended_p saying whether one
 * ran; B10_ERR_DRAINING when the daemon is stopping (a signal's drain is
 * not undone).
 */
b10_status_t service_resume(struct service *svc, bool *ended_p);

/* SIGTERM or SIGINT arrived. */
void service_on_signal(struct service *svc, int signum);

/* What b10ctl shows of it. */
struct service_info {
    uint64_t started_ms;            /* b10d.now_ms at start */
    bool activated;                 /* the socket came from systemd */
    uint64_t watchdog_usec;         /* 0: no watchdog */
    const char *state;              /* serving, draining, drained, stopping */
    uint64_t drain_left_ms;         /* until the bound of a drain that runs; else 0 */
    uint32_t drain_in_flight;       /* transfers in flight when the drain began */
    uint32_t drain_forced;          /* failed at the bound */
    uint64_t drain_ms;              /* how long it took, once drained */
    uint64_t drain_succeeded;       /* sends that landed during the drain */
    uint64_t drain_failed;          /* sends that failed during the drain */
};

void service_info(const struct service *svc, struct service_info *info_p);

#endif
