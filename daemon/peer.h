/*
 * peer.h — remote daemons, and the links to and from each.
 *
 * One endpoint per remote daemon carries both directions. A link is one
 * direction of transfers: ours (out: we opened it with a HELLO and send
 * transfers on it) and theirs (in: they opened it, we receive). Each link
 * has an endpoint generation that is never reused and a fresh tag key. When
 * the endpoint fails, both generations are retired into the quarantine and
 * every transfer on the peer fails; the next use opens a new link.
 */
#ifndef B10D_PEER_H
#define B10D_PEER_H

#include <stdbool.h>
#include <stdint.h>

#include "b10d.h"
#include "tags.h"

struct wire_ep;
struct wire_op;
struct xfer;

enum peer_state {
    PEER_DOWN,          /* no outbound link */
    PEER_CONNECTING,    /* HELLO sent, waiting for HELLO_ACK */
    PEER_UP,
};

struct peer {
    struct list node;               /* b10d.peers */
    struct b10d *d;
    uint64_t daemon_id;
    uint8_t *address;               /* its UCX worker address */
    size_t address_length;
    struct wire_ep *ep;             /* NULL until first needed, and after a failure */

    enum peer_state state;
    struct tag_link out;            /* our link to it, valid unless PEER_DOWN */
    uint64_t max_chunk;             /* its limits, from HELLO_ACK */
    uint64_t max_control;
    uint64_t max_pieces;
    struct wire_op *ack_op;
    uint8_t ack_buf[512];
    uv_timer_t connect_timer;
    struct list waiting;            /* struct xfer.peer_node: sends waiting for PEER_UP */

    bool in_up;
    struct tag_link in;             /* its link to us */
    uint64_t in_control_tag;

    uint64_t heard_ms;              /* its last sign of life: a message, DATA, a reply */
    uint64_t answer_ep_ms;          /* when an endpoint was last made only to answer it */
    uint64_t nonces[2];             /* of our last two heartbeats: answers must echo one */

    struct list xfers;              /* struct xfer.peer_node: every transfer using the peer */
    struct list asks;               /* struct ask.peer_node: questions waiting or asked */
};

/* The hooks wire.c calls. */
void peer_on_control(void *arg, uint64_t tag, void *buf, size_t length);
void peer_on_oversize(void *arg, uint64_t tag, size_t length);
void peer_on_ep_error(void *arg, void *ep_user, b10_status_t status);
bool peer_on_data(void *arg, uint64_t tag, size_t length);

/* Find the peer of a daemon id, adding it (with its address) if new. */
b10_status_t peer_get(struct b10d *d, uint64_t daemon_id, const void *address, size_t length,
                      struct peer **peer_p);

/*
 * A sending transfer needs the outbound link. If it is up, returns B10_OK
 * and the caller goes on; otherwise the transfer waits on the peer and
 * xfer_link_up() or the failure funnel is called later: B10_IN_PROGRESS.
 */
b10_status_t peer_use(struct peer *peer, struct xfer *x);

/*
 * The outbound link: B10_OK when up; B10_IN_PROGRESS when opening (started
 * now if it was down), after which the peer calls ask_link_up() for its asks.
 */
b10_status_t peer_ensure_link(struct peer *peer);

/* The endpoint failed or must not be trusted: retire everything of it. */
void peer_lost(struct peer *peer, b10_status_t status, const char *detail);

/*
 * Liveness (--peer-timeout-ms T, 0: off). A timer runs every T/4. While a
 * daemon has transfers or questions open on a link with a peer it sends
 * the peer a heartbeat each tick, and a peer it has not heard from for T
 * is given up: its links retire and its work fails, but its endpoint
 * stays (silence is no endpoint failure). A tick 3T/4 late means this
 * daemon itself stalled (SIGSTOP, a frozen host): its peers may have given
 * it up and reported its transfers failed, so it fails its own open
 * transfers with them before any late DATA can land, and asks each peer
 * whether its links still stand.
 */
void peer_liveness_start(struct b10d *d);
void peer_liveness_stop(struct b10d *d);

/* A sign of life from the peer (any message or completion that needed it). */
void peer_heard(struct peer *peer);

/*
 * Has this daemon stalled since the last tick? If so, handle it now (as
 * the tick would) and return true. For completions that are about to act
 * on bytes a stalled daemon may no longer own: the event loop runs I/O
 * that was pending across a stall before its timers.
 */
bool peer_liveness_check(struct b10d *d);

/* Close every peer's endpoint at shutdown; peer_free_all() after the wire is gone. */
void peer_close_all(struct b10d *d);
void peer_free_all(struct b10d *d);

/*
 * A Result for transfer (or ask) id on link: a transfer's outcome, a refusal,
 * an answer. Best effort: the other side's deadline covers a lost one.
 */
void peer_send_result(struct peer *peer, const struct tag_link *link, uint64_t id,
                      b10_status_t status, const char *detail);

/* Send a small peer message (encoded protobuf) on the peer's endpoint. */
int peer_send_msg(struct peer *peer, uint64_t tag, const void *msg);

#endif
