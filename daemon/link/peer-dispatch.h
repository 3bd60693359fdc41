/*
 * peer-dispatch.h — the dispatch room's state (peer-dispatch.c), embedded
 * in struct b10d: where a link's messages go up (the peer_hooks b10d.c
 * installs with peer_start), what is being received that no peer can be
 * charged for yet, and the stray messages of the bursts still going on.
 * Only the link rooms touch it; the rest of the daemon sees peer.h.
 */
#ifndef B10D_PEER_DISPATCH_H
#define B10D_PEER_DISPATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"

struct peer_hooks;

/* What a stray message was: on which kind of tag it came. */
enum peer_stray_kind {
    PEER_STRAY_LATE,                /* a data tag in the quarantine: a failed or cancelled transfer's */
    PEER_STRAY_UNKNOWN,             /* a data tag never registered, or gone from the quarantine */
    PEER_STRAY_CONTROL,             /* a control tag of no live link */
    PEER_STRAY_KINDS,
};

/*
 * The stray messages of one sender, from the first (logged as it comes)
 * until none came for PEER_STRAY_QUIET_MS (then summed up in one line).
 */
struct peer_stray_burst {
    bool open;
    bool said;                      /* its first stray was logged (at most one a second is) */
    uint64_t from;                  /* the sender's daemon id; 0: not known */
    char who[CONFIG_NAME_MAX + 16]; /* "peer NAME" when the burst began, for the summary */
    uint64_t first_ms, last_ms;     /* the burst's first stray and its latest, ms */
    uint64_t since_ms;              /* the next summary counts from: first_ms, or the last summary */
    uint64_t count[PEER_STRAY_KINDS];   /* since since_ms */
};

/* Senders followed at once; strays of any more are summed up together. */
#define PEER_STRAY_SENDERS 8

struct peer_dispatch {
    const struct peer_hooks *hooks; /* b10d.c's: where a link's messages go up */
    uint64_t unbound_inflight;      /* HELLO, heartbeat and handshake bytes being received, bytes */
    struct peer_stray_burst strays[PEER_STRAY_SENDERS];
    struct peer_stray_burst strays_more;    /* the senders past those */
    uint64_t stray_said_ms;         /* when a burst's first stray was last logged */
};

#endif
