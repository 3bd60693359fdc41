/*
 * peer-int.h — what the rooms of the link layer share: the peer table and
 * its links (peer.c) and the three rooms around it.
 *
 *   peer.c           the table: add, find, replace, evict, ref and hold; the
 *                    links of each peer, sealed messages on them, and their
 *                    retirement with the work that ran on them
 *   peer-hello.c     the handshake: HELLO, HELLO_ACK and CONFIRM, the
 *                    handshakes answered and waiting (struct peer_pending),
 *                    their sweep, the HELLO budget and its refusals
 *   peer-liveness.c  heartbeats, silence, this daemon's own stalls
 *   peer-dispatch.c  the wire's hooks: what arrives on a control-class tag,
 *                    charged, opened and handed to its room or, through
 *                    struct peer_hooks, up to the engine
 *
 * Each room's state in struct b10d is a struct of its own, defined in its
 * header (peer-hello.h, peer-liveness.h, peer-dispatch.h). Only these files
 * and their unit tests include this one; the rest of the daemon sees peer.h.
 */
#ifndef B10D_PEER_INT_H
#define B10D_PEER_INT_H

#include "peer.h"

#include <stdarg.h>

#include "peer.pb-c.h"

/* Control messages read only to be refused: a few a second per peer (a token bucket). */
#define PEER_REFUSED_READS_PER_S 8

/*
 * A handshake this daemon answered. The opener proved the cluster key in
 * its HELLO, but a HELLO can be replayed: only a message under the link's
 * keys, which come from this daemon's fresh nonce too, shows the opener is
 * here now. Until one comes the link waits here, apart from the peer table
 * and the tag registry, and expires after --connect-timeout-ms.
 */
struct peer_pending {
    struct list node;               /* b10d.handshakes.pending */
    struct b10d *d;
    char name[HELLO_NAME_MAX];
    uint64_t daemon_id;
    uint64_t incarnation;
    uint64_t gen;
    uint8_t *address;
    size_t address_length;
    struct auth_link link;
    uint64_t control_tag;
    bool refused;                   /* answered with a refusal: nothing to confirm */
    struct wire_ep *ep;             /* made to answer, when no peer had one to lend */
    uint64_t expires_ms;
};

/* ---------------------------------------------------------------- peer.c: the table */

struct peer *peer_find(struct b10d *d, uint64_t daemon_id);
struct peer *peer_find_name(struct b10d *d, const char *name);
/*
 * The latest boot a daemon may claim: a day past this daemon's clock. A
 * boot claimed further ahead would outrank every real one for good.
 */
uint64_t peer_incarnation_bound(const struct b10d *d);
/* Links, work, or something that still points here: not to be evicted. */
bool peer_in_use(const struct peer *p);
/* A link standing, either direction. */
bool peer_has_link(const struct peer *peer);
/* A new entry, making room by evicting the unused one idle longest: B10_ERR_TOO_LARGE if none. */
b10_status_t peer_new(struct b10d *d, const char *name, uint64_t daemon_id, uint64_t incarnation,
                      const uint8_t *address, size_t length, struct peer **peer_p);
/* A newer boot of the peer's node: the old boot's links and work end, the entry stays. */
b10_status_t peer_replace(struct peer *p, uint64_t daemon_id, uint64_t incarnation,
                          const uint8_t *address, size_t length);
/* The sweep's share of the table: entries unused for --peer-idle-ms go. */
void peer_evict_idle(struct b10d *d, uint64_t now);

/* ---------------------------------------------------------------- peer.c: links and their messages */

/*
 * The link of generation gen to seal with: ours or theirs while up, or the
 * last one retired in either direction (its keys answer heartbeats about
 * it); *live_p says which.
 */
struct auth_link *peer_link(struct peer *peer, uint64_t gen, bool *live_p);
/* The link that opens the envelope in buf, of generation gen. */
struct auth_link *peer_link_opening(struct peer *peer, uint64_t gen, const uint8_t *buf,
                                    size_t length, bool *live_p);
/* Open under link (which may be a pending handshake's; count then goes to no peer). */
b10_status_t peer_open_with(struct b10d *d, struct peer *count, struct auth_link *link,
                            const uint8_t *buf, size_t length, B10__Peer__Msg **msg_p);
/* A message on a link of the peer's that did not open: dropped unread, counted. */
void peer_count_unopened(struct peer *peer, enum auth_result r);
/*
 * Something dropped that no peer answers for: counted in *counter, and
 * said at level at most once a second (*said_ms: when it last was), so
 * that neither a flood of it nor a busy shutdown floods the log.
 */
void peer_say_dropped(struct b10d *d, int level, uint64_t *said_ms, uint64_t *counter,
                      const char *fmt, va_list ap) __attribute__((format(printf, 5, 0)));
/* The peer's endpoint, made now if it has none: 0, or -1. */
b10_status_t peer_ensure_ep(struct peer *peer);

/* Retire a direction's link: its generation and tags go to the quarantine. */
void peer_retire_out(struct peer *peer, b10_status_t why);
void peer_retire_in(struct peer *peer, b10_status_t why);
/*
 * Fail the transfers and questions under way with the peer: those on link
 * generation gen, or all of them when gen is 0.
 */
void peer_fail_work(struct peer *peer, uint64_t gen, b10_status_t status, const char *detail);
/* Retire both links and fail everything with the peer; close_ep: the endpoint too. */
void peer_give_up(struct peer *peer, b10_status_t status, const char *detail, bool close_ep);

/* ---------------------------------------------------------------- peer-hello.c: the handshake */

/* Load the keys, start the HELLO budget and the sweep. */
b10_status_t peer_hello_start(struct b10d *d);
void peer_hello_stop(struct b10d *d);
/* Drop the handshakes still pending (shutdown); peer_hello_free() once the wire is gone. */
void peer_hello_close(struct b10d *d);
void peer_hello_free(struct b10d *d);
/*
 * One pass of the sweep (its timer calls it): pending handshakes expire, idle
 * peers go, bursts of stray messages that stopped are summed up.
 */
void peer_hello_sweep(struct b10d *d);

/* Open the outbound link: a new generation and nonce, HELLO, then wait for HELLO_ACK. */
b10_status_t peer_hello_connect(struct peer *peer);
/* The attempt's HELLO_ACK receive is done with (a later completion of it finds no peer->ack). */
void peer_hello_drop_ack(struct peer *peer);
/* A HELLO came in (peer-dispatch.c): opened, checked, answered, held pending. */
void peer_hello_on_hello(struct b10d *d, const uint8_t *buf, size_t length);

/* The handshake answered for a sender boot and not yet confirmed, or NULL. */
struct peer_pending *peer_hello_pending_of(struct b10d *d, uint64_t daemon_id);
/* The pending handshake whose link's control tag is tag (not a refused one), or NULL. */
struct peer_pending *peer_hello_pending_by_tag(struct b10d *d, uint64_t tag);
/* The pending handshake that is user (an endpoint's), or NULL. */
struct peer_pending *peer_hello_pending_by_user(struct b10d *d, const void *user);
void peer_hello_pending_free(struct peer_pending *p);
/*
 * A message opened under a pending handshake's keys: the opener was fresh.
 * Its link joins the peer of its name (made, or moved on to this boot of
 * it), and the pending entry is freed. NULL when there is no room.
 */
struct peer *peer_hello_adopt(struct peer_pending *pend);

/* Something of nobody we know was dropped: count it, and say so at most once a second. */
void peer_hello_stranger(struct b10d *d, uint64_t *counter, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---------------------------------------------------------------- peer-liveness.c */

/* A heartbeat came in (peer-dispatch.c): answered, or taken as news of its link. */
void peer_liveness_on_heartbeat(struct b10d *d, const uint8_t *buf, size_t length);
/* One tick (its timer calls it): heartbeats out, silent peers given up, a stall handled. */
void peer_liveness_tick(struct b10d *d);

/* ---------------------------------------------------------------- peer-dispatch.c */

/* Where a link's messages go up, from now on. */
void peer_dispatch_start(struct b10d *d, const struct peer_hooks *hooks);
/*
 * The sweep's share (peer_hello_sweep): a sender's burst of stray messages
 * that has been quiet for PEER_STRAY_QUIET_MS is summed up in one line, one
 * still going after PEER_STRAY_LONGEST_MS so far.
 */
void peer_dispatch_sweep(struct b10d *d, uint64_t now);
/* Shutdown: the bursts still open are summed up. */
void peer_dispatch_stop(struct b10d *d);

#endif
