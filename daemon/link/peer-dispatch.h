/*
 * peer-dispatch.h — the dispatch room's state (peer-dispatch.c), embedded
 * in struct b10d: where a link's messages go up (the peer_hooks b10d.c
 * installs with peer_start), and what is being received that no peer can
 * be charged for yet. Only the link rooms touch it; the rest of the daemon
 * sees peer.h.
 */
#ifndef B10D_PEER_DISPATCH_H
#define B10D_PEER_DISPATCH_H

#include <stdint.h>

struct peer_hooks;

struct peer_dispatch {
    const struct peer_hooks *hooks; /* b10d.c's: where a link's messages go up */
    uint64_t unbound_inflight;      /* HELLO, heartbeat and handshake bytes being received, bytes */
    uint64_t stale_log_ms;          /* stray messages log at most once a second */
};

#endif
