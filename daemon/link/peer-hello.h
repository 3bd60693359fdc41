/*
 * peer-hello.h — the handshake room's state (peer-hello.c), embedded in
 * struct b10d: the handshakes this daemon answered and waits to see
 * confirmed, the MACs of recent HELLOs, the HELLO budget and the sweep that
 * expires what was never confirmed. Only the link rooms touch it; the rest
 * of the daemon sees peer.h.
 */
#ifndef B10D_PEER_HELLO_H
#define B10D_PEER_HELLO_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "hello.h"
#include "list.h"

struct auth_seen;

/*
 * With node certificates, HELLOs are budgeted per certified node: a bucket
 * of --max-hellos-per-s each, for this many nodes at a time (the least
 * recently heard gives its bucket up, and starts full when it comes back).
 */
#define PEER_HELLO_NODES 64
struct peer_hello_bucket {
    char name[HELLO_NAME_MAX];      /* the certified name; "" unused */
    double tokens;
    uint64_t tokens_ms;
};

struct peer_handshakes {
    struct list pending;            /* struct peer_pending.node (peer-int.h) */
    uint32_t npending;
    struct auth_seen *seen;         /* recent HELLOs' MACs: a replay of one is dropped */
    double tokens;                  /* --max-hellos-per-s, a token bucket of one second */
    uint64_t tokens_ms;             /* when it was last filled */
    struct peer_hello_bucket nodes[PEER_HELLO_NODES];   /* certified: a bucket per node */
    double proofs;                  /* certified: chains checked, 8 x --max-hellos-per-s a second */
    uint64_t proofs_ms;
    uint64_t identity_ms;           /* certified: when the files were last looked at, by the sweep */
    uint64_t expiry_said_ms;        /* certified: when the coming expiry was last warned of */
    uint64_t stranger_log_ms;       /* what strangers send logs at most once a second */
    uv_timer_t sweep;               /* pending handshakes expire, idle peers go, strays summed up */
    bool sweep_on;
};

#endif
