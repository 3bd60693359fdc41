/*
 * peer-liveness.h — the liveness room's state (peer-liveness.c), embedded
 * in struct b10d: the timer of heartbeats and silence checks, and when it
 * last ran, by which this daemon tells that it stalled itself. Only the
 * link rooms touch it; the rest of the daemon sees peer.h.
 */
#ifndef B10D_PEER_LIVENESS_H
#define B10D_PEER_LIVENESS_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

struct peer_liveness {
    uv_timer_t timer;               /* every --peer-timeout-ms / 4 */
    uint64_t tick_ms;               /* when it last ran: a late tick means this daemon stalled */
    bool on;                        /* the timer runs (--peer-timeout-ms is not 0) */
};

#endif
