/*
 * wireloop.h — a real UCX wire on loopback (self and tcp over lo) for the
 * unit tests of rooms that register memory with the wire, as the daemon
 * does: staging's views, and what quarantine keeps of them. No peer ever
 * talks to it; whatever comes is dropped. One wire per test program.
 */
#ifndef B10_TEST_WIRELOOP_H
#define B10_TEST_WIRELOOP_H

#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "b10d.h"
#include "wire.h"

static void *wireloop_take_control(void *arg, uint64_t tag, size_t length)
{
    return NULL;
}

static void wireloop_control(void *arg, void *cookie, uint64_t tag, void *buf, size_t length)
{
    free(buf);
}

static void wireloop_ep_error(void *arg, void *ep_user, b10_status_t status)
{
}

/*
 * A daemon of defaults around loop, its log named name, and its wire in
 * d->wire: cmocka's group setup, 0 or -1.
 */
static int wireloop_start(struct b10d *d, uv_loop_t *loop, const char *name)
{
    struct wire_hooks hooks = {
        .arg = d,
        .take_control = wireloop_take_control,
        .on_control = wireloop_control,
        .on_ep_error = wireloop_ep_error,
    };

    setenv("UCX_TLS", "self,tcp", 1);
    setenv("UCX_NET_DEVICES", "lo", 1);
    log_setup(LOG_LEVEL_WARNING, name);
    if (uv_loop_init(loop) != 0)
        return -1;
    memset(d, 0, sizeof(*d));
    config_defaults(&d->cfg);
    d->loop = loop;
    list_init(&d->sessions);
    list_init(&d->peers);
    list_init(&d->xfers);
    if (wire_create(d, &hooks, true, &d->wire) != B10_OK) {
        uv_loop_close(loop);
        return -1;
    }
    return 0;
}

/*
 * The wire destroyed, and the loop closed cleanly once every handle the wire
 * opened is closed: cmocka's group teardown, 0 or -1. A test that failed
 * with views still registered skips it (UCX would abort on them).
 */
static int wireloop_stop(struct b10d *d, uv_loop_t *loop)
{
    wire_destroy(d->wire);
    d->wire = NULL;
    uv_run(loop, UV_RUN_NOWAIT);
    return uv_loop_close(loop) == 0 ? 0 : -1;
}

#endif
