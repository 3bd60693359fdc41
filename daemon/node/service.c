/* service.c — see service.h. */
#include "service.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "quarantine.h"
#include "status.h"
#include "xfer.h"

#define SERVICE_TICK_MS       1000   /* STATUS= refresh; the watchdog may need it faster */
#define SERVICE_DRAIN_POLL_MS 20     /* how often a drain looks whether it is done */

enum service_drain {
    DRAIN_NONE,
    DRAIN_RUNNING,
    DRAIN_DONE,
};

struct service {
    struct b10d *d;
    uint64_t started_ms;
    bool activated;
    uint64_t watchdog_usec;         /* 0: systemd asked for no watchdog */
    bool ready;
    bool said_stopping;
    bool notify_warned;
    char status[256];               /* the STATUS= last sent */
    uv_timer_t tick;                /* STATUS= and WATCHDOG=1 */
    uv_timer_t drain_timer;
    int closing;                    /* handles whose close callback is still to come */

    enum service_drain drain;
    bool stop_when_drained;         /* a signal's drain: the loop stops after it */
    uint32_t bound_ms;              /* of the drain that runs */
    uint64_t drain_start_ms;
    uint64_t drain_deadline_ms;
    uint64_t drain_end_ms;
    uint32_t drain_in_flight;
    uint32_t drain_forced;
    uint64_t drain_ok_base, drain_failed_base;     /* counters when it began */
    uint64_t drain_ok, drain_failed;               /* their growth, once drained */
};

static void service_notify(struct service *svc, const char *text)
{
    int rc = sd_notify(0, text);
    if (rc < 0 && !svc->notify_warned) {
        svc->notify_warned = true;
        log_warning("sd_notify: %s", strerror(-rc));
    }
}

static const char *service_state(const struct service *svc)
{
    if (svc->stop_when_drained)
        return "stopping";
    if (svc->drain == DRAIN_RUNNING)
        return "draining";
    if (svc->drain == DRAIN_DONE)
        return "drained";
    return "serving";
}

/* The one-line summary systemctl status shows. */
static void service_summary(struct service *svc, char *buf, size_t length)
{
    struct b10d *d = svc->d;
    int n = snprintf(buf, length, "%s: %u clients, %u peers, %u transfers in flight, %u quarantined "
                     "(%" PRIu64 " MiB of staging)", service_state(svc), d->nsessions, d->npeers,
                     d->nxfers, quarantine_count(d->quarantine), quarantine_bytes(d->quarantine) >> 20);
    if (svc->drain == DRAIN_RUNNING && n > 0 && (size_t)n < length) {
        uint64_t now = d->now_ms(d);
        uint64_t left = svc->drain_deadline_ms > now ? svc->drain_deadline_ms - now : 0;
        snprintf(buf + n, length - (size_t)n, ", drain bound in %" PRIu64 ".%" PRIu64 " s",
                 left / 1000, left % 1000 / 100);
    }
}

/* Send STATUS= when it changed: systemd keeps the last one. */
static void service_refresh(struct service *svc)
{
    char line[sizeof(svc->status)];
    char msg[sizeof(line) + 8];

    if (!svc->ready)
        return;
    service_summary(svc, line, sizeof(line));
    if (strcmp(line, svc->status) == 0)
        return;
    memcpy(svc->status, line, sizeof(line));
    snprintf(msg, sizeof(msg), "STATUS=%s", line);
    service_notify(svc, msg);
}

static void service_on_tick(uv_timer_t *timer)
{
    struct service *svc = timer->data;

    /* From the loop thread on purpose: a loop that is stuck stops pinging. */
    if (svc->watchdog_usec > 0)
        service_notify(svc, "WATCHDOG=1");
    service_refresh(svc);
}

b10_status_t service_create(struct b10d *d, struct service **service_p)
{
    struct service *svc = calloc(1, sizeof(*svc));
    uint64_t usec = 0;

    if (svc == NULL)
        return B10_ERR_NO_MEMORY;
    svc->d = d;
    svc->started_ms = d->now_ms(d);
    /* Unset nothing: NOTIFY_SOCKET is needed for every later message. */
    if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0)
        svc->watchdog_usec = usec;
    uv_timer_init(d->loop, &svc->tick);
    uv_timer_init(d->loop, &svc->drain_timer);
    svc->tick.data = svc->drain_timer.data = svc;
    /* Neither keeps the loop alive: the client socket does. */
    uv_unref((uv_handle_t *)&svc->tick);
    uv_unref((uv_handle_t *)&svc->drain_timer);
    *service_p = svc;
    return B10_OK;
}

static void service_on_closed(uv_handle_t *handle)
{
    struct service *svc = handle->data;
    if (--svc->closing == 0)
        free(svc);
}

void service_destroy(struct service *svc)
{
    if (svc == NULL)
        return;
    if (svc->ready && !svc->said_stopping) {
        svc->said_stopping = true;
        service_notify(svc, "STOPPING=1");
    }
    svc->closing = 2;
    uv_close((uv_handle_t *)&svc->tick, service_on_closed);
    uv_close((uv_handle_t *)&svc->drain_timer, service_on_closed);
}

b10_status_t service_listen_fd(struct service *svc, int *fd_p)
{
    /* Unset LISTEN_*: nothing this process starts may think the socket is its own. */
    int n = sd_listen_fds(1);

    if (n < 0) {
        log_err("socket activation: %s", strerror(-n));
        return status_from_errno(-n);
    }
    if (n == 0) {
        *fd_p = -1;
        return B10_OK;
    }
    for (int i = 1; i < n; i++) {
        log_warning("socket activation: closing descriptor %d: b10d listens on one socket",
                    SD_LISTEN_FDS_START + i);
        close(SD_LISTEN_FDS_START + i);
    }
    int fd = SD_LISTEN_FDS_START;
    if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0) {
        log_err("socket activation: descriptor %d is not a listening Unix stream socket", fd);
        close(fd);
        return B10_ERR_INVALID_ARG;
    }
    svc->activated = true;
    *fd_p = fd;
    return B10_OK;
}

void service_ready(struct service *svc)
{
    char msg[sizeof(svc->status) + 32];

    service_summary(svc, svc->status, sizeof(svc->status));
    snprintf(msg, sizeof(msg), "READY=1\nSTATUS=%s", svc->status);
    service_notify(svc, msg);
    svc->ready = true;
    uint64_t every = SERVICE_TICK_MS;
    if (svc->watchdog_usec > 0) {
        /* Twice per interval, as sd_watchdog_enabled(3) advises. */
        uint64_t half = svc->watchdog_usec / 2000;
        every = half < 1 ? 1 : half < every ? half : every;
        log_info("watchdog: %" PRIu64 " ms, pinging every %" PRIu64 " ms",
                 svc->watchdog_usec / 1000, every);
    }
    uv_timer_start(&svc->tick, service_on_tick, every, every);
}

/* Done when nothing is in flight; at the bound, fail what is. */
static void service_drain_check(struct service *svc)
{
    struct b10d *d = svc->d;

    if (svc->drain == DRAIN_RUNNING) {
        uint64_t now = d->now_ms(d);
        if (d->nxfers > 0 && now >= svc->drain_deadline_ms) {
            log_warning("drain: bound of %u ms expired with %u transfers in flight; failing them",
                        svc->bound_ms, d->nxfers);
            /*
             * Always the first: a failure frees views, and a transfer woken by
             * that may fail too and leave the list, so a saved "next" could be
             * stale. Each xfer_fail() takes its transfer off the list.
             */
            for (uint32_t n = d->nxfers; n > 0 && !list_empty(&d->xfers); n--) {
                svc->drain_forced++;
                xfer_fail(list_entry(d->xfers.next, struct xfer, node), B10_ERR_DRAINING,
                          "the daemon's drain bound of %u ms expired", svc->bound_ms);
            }
        }
        if (d->nxfers > 0)
            return;
        svc->drain = DRAIN_DONE;
        svc->drain_end_ms = now;
        svc->drain_ok = d->stats.xfers_succeeded - svc->drain_ok_base;
        svc->drain_failed = d->stats.xfers_failed - svc->drain_failed_base;
        uv_timer_stop(&svc->drain_timer);
        log_notice("drained in %" PRIu64 " ms: %u transfers were in flight; %" PRIu64 " sends "
                   "landed, %" PRIu64 " failed, %u failed at the bound", now - svc->drain_start_ms,
                   svc->drain_in_flight, svc->drain_ok, svc->drain_failed, svc->drain_forced);
        service_refresh(svc);
    }
    if (svc->drain == DRAIN_DONE && svc->stop_when_drained)
        uv_stop(d->loop);
}

static void service_on_drain_timer(uv_timer_t *timer)
{
    struct service *svc = timer->data;
    service_drain_check(svc);
    service_refresh(svc);
}

void service_drain(struct service *svc, uint32_t bound_ms, bool stop)
{
    struct b10d *d = svc->d;
    uint64_t now = d->now_ms(d);

    if (stop) {
        svc->stop_when_drained = true;
        if (!svc->said_stopping) {
            svc->said_stopping = true;
            service_notify(svc, "STOPPING=1");
        }
    }
    if (svc->drain == DRAIN_NONE) {
        svc->drain = DRAIN_RUNNING;
        d->stopping = true;
        svc->bound_ms = bound_ms;
        svc->drain_start_ms = now;
        svc->drain_deadline_ms = now + bound_ms;
        svc->drain_in_flight = d->nxfers;
        svc->drain_ok_base = d->stats.xfers_succeeded;
        svc->drain_failed_base = d->stats.xfers_failed;
        log_notice("draining: admitting no new transfers; %u in flight, bound %u ms", d->nxfers,
                   bound_ms);
    } else if (svc->drain == DRAIN_RUNNING && now + bound_ms < svc->drain_deadline_ms) {
        /* A tighter bound wins (SIGTERM during an operator's longer drain). */
        svc->bound_ms = (uint32_t)(now + bound_ms - svc->drain_start_ms);
        svc->drain_deadline_ms = now + bound_ms;
    }
    service_drain_check(svc);
    if (svc->drain == DRAIN_RUNNING && !uv_is_active((uv_handle_t *)&svc->drain_timer))
        uv_timer_start(&svc->drain_timer, service_on_drain_timer, SERVICE_DRAIN_POLL_MS,
                       SERVICE_DRAIN_POLL_MS);
    service_refresh(svc);
}

b10_status_t service_resume(struct service *svc, bool *ended_p)
{
    if (svc->stop_when_drained)
        return B10_ERR_DRAINING;
    *ended_p = svc->drain != DRAIN_NONE;
    if (svc->drain == DRAIN_NONE)
        return B10_OK;
    uv_timer_stop(&svc->drain_timer);
    svc->drain = DRAIN_NONE;
    svc->d->stopping = false;
    log_notice("drain ended: admitting transfers again");
    service_refresh(svc);
    return B10_OK;
}

void service_on_signal(struct service *svc, int signum)
{
    if (svc->stop_when_drained) {
        log_notice("signal %d again: stopping without waiting for the drain", signum);
        uv_stop(svc->d->loop);
        return;
    }
    log_notice("signal %d: draining for at most %u ms, then stopping", signum,
               svc->d->cfg.drain_timeout_ms);
    service_drain(svc, svc->d->cfg.drain_timeout_ms, true);
}

void service_info(const struct service *svc, struct service_info *info_p)
{
    struct b10d *d = svc->d;
    uint64_t now = d->now_ms(d);

    *info_p = (struct service_info){
        .started_ms = svc->started_ms,
        .activated = svc->activated,
        .watchdog_usec = svc->watchdog_usec,
        .state = service_state(svc),
        .drain_in_flight = svc->drain_in_flight,
        .drain_forced = svc->drain_forced,
    };
    if (svc->drain == DRAIN_RUNNING) {
        info_p->drain_left_ms = svc->drain_deadline_ms > now ? svc->drain_deadline_ms - now : 0;
        info_p->drain_succeeded = d->stats.xfers_succeeded - svc->drain_ok_base;
        info_p->drain_failed = d->stats.xfers_failed - svc->drain_failed_base;
    } else if (svc->drain == DRAIN_DONE) {
        info_p->drain_ms = svc->drain_end_ms - svc->drain_start_ms;
        info_p->drain_succeeded = svc->drain_ok;
        info_p->drain_failed = svc->drain_failed;
    }
}
