/*
 * peer.h — remote daemons, the links to and from each, and their share of
 * this daemon.
 *
 * A peer is known by its stable name (--name on that node), which only a
 * holder of the cluster key can claim: it comes from an agent descriptor
 * that opened under a cluster key, or from a handshake that did. Its
 * daemon id and incarnation name its current boot; a newer boot of the
 * same name replaces the entry instead of taking another slot, and an
 * entry with no link, no work and no rank naming it is evicted after
 * --peer-idle-ms.
 *
 * One endpoint per peer carries both directions. A link is one direction
 * of transfers: ours (out: we opened it with a HELLO and send transfers on
 * it) and theirs (in: they opened it, we receive). Each has an endpoint
 * generation that is never reused, and keys derived in its handshake
 * (auth.h): its tag key and a MAC key for each direction. Every message
 * on a link is sealed under them; one that does not open is dropped unread
 * and counted, and never retires the link or fails a transfer.
 *
 * The handshake: the opener sends HELLO (sealed under a cluster key, with
 * a fresh nonce and its worker address); the receiver opens it, answers
 * HELLO_ACK (sealed under the same key, echoing the opener's nonce, with
 * its own) and holds the link pending; the opener, having seen the
 * receiver prove the key, derives the link's keys and counts its link up;
 * the receiver counts it up at the first message under those keys (a
 * CONFIRM the opener sends at once, or anything after it), which proves
 * the opener fresh: a replayed HELLO gets an answer and opens nothing.
 *
 * When the endpoint fails, both generations are retired into the
 * quarantine and every transfer on the peer fails; the next use opens a
 * new link.
 */
#ifndef B10D_PEER_H
#define B10D_PEER_H

#include <stdbool.h>
#include <stdint.h>

#include "auth.h"
#include "b10d.h"
#include "hello.h"
#include "tags.h"

struct peer_ack;
struct wire_ep;
struct wire_op;
struct peer;
struct ProtobufCMessage;
struct B10__Peer__Msg;
struct B10__Peer__Control;
struct B10__Peer__ReadRequest;
struct B10__Peer__Check;
struct B10__Peer__Notify;

/*
 * Work under way with a remote daemon, as this room sees it: a transfer or
 * an ask embeds one, on one of the peer's lists. The peer tells it through
 * its ops that the outbound link came up, or that the link it runs on (or
 * waits for) is gone, and never names what it is: news goes up through
 * hooks the rooms above install.
 */
struct link_user;
struct link_user_ops {
    /* The outbound link came up: send now. */
    void (*up)(struct link_user *u);
    /* The link is gone, or the peer: fail with status; detail says why. It
     * leaves the peer's list before it returns. */
    void (*lost)(struct link_user *u, b10_status_t status, const char *detail);
};
struct link_user {
    struct list node;               /* peer.waiting, peer.xfers or peer.asks */
    const struct link_user_ops *ops;
    const struct tag_link *link;    /* the owner's: link->gen, the generation it runs on (0: none yet) */
    bool unsent;                    /* on peer.asks, not sent yet: up() when the link comes */
};

/*
 * What arrives on a link's control tag for the rooms above: peer-dispatch.c
 * opens and checks each message, then hands it to these (installed by b10d.c).
 */
struct peer_hooks {
    void (*on_control)(struct peer *peer, const struct B10__Peer__Control *control, size_t length);
    void (*on_read)(struct peer *peer, const struct B10__Peer__ReadRequest *req, size_t length);
    void (*on_check)(struct peer *peer, const struct B10__Peer__Check *check);
    void (*on_notify)(struct peer *peer, const struct B10__Peer__Notify *notify);
};

enum peer_state {
    PEER_DOWN,          /* no outbound link */
    PEER_KNOCKING,      /* at its door (door.h), before a HELLO can reach its UCX */
    PEER_CONNECTING,    /* HELLO sent, waiting for HELLO_ACK */
    PEER_UP,
};

/* What one peer sent that this daemon dropped or refused: b10ctl peers and metrics. */
struct peer_counters {
    uint64_t unauthenticated;       /* messages that did not open under the link's keys */
    uint64_t replayed;              /* messages whose counter was seen already */
    uint64_t refused;               /* transfers, reads, notices refused for its limits */
    uint64_t links;                 /* links opened with it, either direction */
    uint64_t corrupt;               /* its DATA chunks that failed their checksum (checksum.h) */
};

struct peer {
    struct list node;               /* b10d.peers */
    struct b10d *d;
    char name[HELLO_NAME_MAX];      /* its stable, authenticated name: the table's key */
    uint64_t daemon_id;             /* its current boot's id */
    uint64_t incarnation;           /* when that boot started, ns since the epoch */
    uint8_t *address;               /* its UCX worker addresses, authenticated */
    size_t address_length;
    struct wire_ep *ep;             /* NULL until first needed, and after a failure */
    uint32_t refs;                  /* remote agents of local ranks that name it */
    uint32_t holds;                 /* transfers and asks that point here, until freed */
    uint64_t reload_link_ms;        /* a rank's reload last asked for a link (session.c) */

    enum peer_state state;
    struct door_knock *knock;       /* KNOCKING: at its door */
    uint64_t knock_since_ms;        /* ... since (b10d.now_ms): knocked again for at least
                                     * --connect-timeout-ms, then while work waits */
    bool knocked;                   /* let in: the next HELLO goes straight to its UCX */
    struct auth_link out;           /* our link to it: its keys once PEER_UP */
    const struct auth_key *out_key; /* the cluster key our HELLO went under */
    uint8_t out_nonce[AUTH_NONCE_BYTES];
    uint8_t out_kx[AUTH_KX_BYTES];          /* certified: our HELLO's X25519 key, and its secret */
    uint8_t out_kx_secret[AUTH_KX_BYTES];   /* until the HELLO_ACK, then wiped */
    uint64_t ack_tag;               /* CONNECTING: the HELLO_ACK's tag */
    uint64_t max_chunk;             /* its limits, from HELLO_ACK */
    uint64_t max_control;
    uint64_t max_pieces;
    struct peer_ack *ack;           /* CONNECTING: this attempt's HELLO_ACK receive and buffer */
    struct wire_op *ack_op;         /* ... while posted */
    uint32_t acks_out;              /* HELLO_ACK receives posted and not completed, any attempt */
    uv_timer_t connect_timer;
    struct list waiting;            /* struct link_user.node: sends waiting for PEER_UP */

    bool in_up;
    struct auth_link in;            /* its link to us */
    uint64_t in_control_tag;
    uint64_t hello_gen_seen;        /* the newest HELLO of its boot answered here: older ones are replays */

    /* The last retired link of each direction: their keys answer heartbeats about them. */
    struct auth_link out_old, in_old;
    bool out_old_valid, in_old_valid;

    uint64_t heard_ms;              /* its last sign of life: a message, DATA, a reply */
    uint64_t answer_ep_ms;          /* when an endpoint was last made only to answer it */
    uint64_t nonces[2];             /* of our last two heartbeats: answers must echo one */
    uint64_t idle_since_ms;         /* since it had no link, work or rank naming it */

    /* Its share of this daemon, held to the --max-peer-* and --peer-quarantine-bytes bounds. */
    uint32_t in_xfers;              /* transfers it sends us (and READs we serve it), unfinished */
    uint64_t views_bytes;           /* staging views our sends to it hold */
    uint64_t reserved;              /* staging windows its transfers here reserved */
    uint64_t control_inflight;      /* its control-tag messages being received now */
    uint64_t control_held;          /* the CONTROLs of its admitted transfers */
    uint64_t quarantined;           /* staging quarantined by transfers with it (quarantine.c) */
    struct peer_counters counters;
    uint64_t refused_log_ms;        /* its refusals log at most once a second */
    bool unchecked_said;            /* logged that its chunks come without checksums */
    double refusal_tokens;          /* control messages still to be read this second only to */
    uint64_t refusal_tokens_ms;     /* be refused (peer-int.h: PEER_REFUSED_READS_PER_S) */

    struct list xfers;              /* struct link_user.node: every transfer using the peer */
    struct list asks;               /* struct link_user.node: questions waiting or asked */
};

/* What an agent descriptor says of the daemon behind it, once it opened (session.c). */
struct peer_desc {
    const char *name;
    uint64_t daemon_id;
    uint64_t incarnation;
    const uint8_t *address;
    size_t address_length;
};

/* The hooks wire.c calls (peer-dispatch.c). */
void *peer_take_control(void *arg, uint64_t tag, size_t length);
void peer_on_control(void *arg, void *cookie, uint64_t tag, void *buf, size_t length);
void peer_on_ep_error(void *arg, void *ep_user, b10_status_t status);
bool peer_on_data(void *arg, uint64_t tag, size_t length);

/* Start and stop the link rooms: where messages go up, the keys, the handshakes, the sweep. */
b10_status_t peer_start(struct b10d *d, const struct peer_hooks *hooks);
void peer_stop(struct b10d *d);

/*
 * The peer an agent descriptor names, added if new. A newer boot of a
 * known name replaces the entry (the old boot's links retire and its work
 * fails B10_ERR_PEER_LOST); a descriptor of an older boot names the later
 * boot known (it never rolls the entry back). Refusals say why in detail.
 */
b10_status_t peer_get(struct b10d *d, const struct peer_desc *desc, struct peer **peer_p,
                      char *detail, size_t detail_len);
/* A local rank's remote agent names the peer (ref) or no longer does (unref). */
void peer_ref(struct peer *peer);
void peer_unref(struct peer *peer);
/* A transfer or ask points at the peer until it is freed: the entry is not evicted meanwhile. */
void peer_hold(struct peer *peer);
void peer_release(struct peer *peer);

/*
 * A sending transfer needs the outbound link. If it is up, returns B10_OK
 * and the caller goes on; otherwise the transfer waits on the peer and its
 * up() or lost() is called later: B10_IN_PROGRESS.
 */
b10_status_t peer_use(struct peer *peer, struct link_user *u);

/*
 * The outbound link: B10_OK when up; B10_IN_PROGRESS when opening (started
 * now if it was down), after which the peer calls up() of its unsent asks.
 */
b10_status_t peer_ensure_link(struct peer *peer);
/*
 * Why the outbound link is not up yet, for work that waited for it past
 * its own deadline: what the knocks at the peer's door met so far (its
 * door did not answer, or never let this daemon in), or "" (not
 * knocking: the HELLO is out). Good until the loop runs.
 */
const char *peer_link_why(struct peer *peer);

/* Is the link of generation gen up (not retired, not given up)? */
bool peer_link_live(const struct peer *peer, uint64_t gen);
/*
 * Is this the entry of this daemon itself (its ranks loaded descriptors of
 * ranks of their own node)? Only this daemon opens links under its own
 * boot (peer_hello_on_hello checks the nonce), so what comes by it is local.
 */
bool peer_is_self(const struct peer *peer);

/* The endpoint failed or must not be trusted: retire everything of it. */
void peer_lost(struct peer *peer, b10_status_t status, const char *detail);

/*
 * Sealed messages on a link: the one of generation gen, ours or theirs,
 * live or the last retired of its direction. 0, or -1 when there is no
 * such link or no endpoint (nothing was sent).
 */
b10_status_t peer_send(struct peer *peer, uint64_t gen, uint64_t tag,
                       const struct ProtobufCMessage *msg);
/* The same for a message already encoded (an ask keeps its question so). */
b10_status_t peer_send_packed(struct peer *peer, uint64_t gen, uint64_t tag,
                              const uint8_t *payload, size_t length);
/*
 * Open what a posted receive took for link gen and decode it. B10_OK and
 * *msg_p (the caller frees it); B10_ERR_UNAUTHENTICATED when it did not
 * open under the link's keys or replays an earlier message: dropped unread
 * and counted, the caller posts its receive again; B10_ERR_PEER_PROTOCOL
 * when it opened and does not decode.
 */
b10_status_t peer_open(struct peer *peer, uint64_t gen, const uint8_t *buf, size_t length,
                       struct B10__Peer__Msg **msg_p);

/*
 * A Result for transfer (or ask) id on link gen: a transfer's outcome, a
 * refusal, an answer. Best effort: the other side's deadline covers a lost one.
 */
void peer_send_result(struct peer *peer, uint64_t gen, uint64_t id, b10_status_t status,
                      const char *detail);

/*
 * One of the peer's limits refused something (a transfer, a read, a
 * notice): count it, and log why at most once a second.
 */
void peer_refused(struct peer *peer, const char *what, const char *why);

/*
 * Liveness (--peer-timeout-ms T, 0: off). A timer runs every T/4. While a
 * daemon has transfers or questions open on a link with a peer it sends
 * the peer a heartbeat about each of its links each tick, and a peer it has
 * not heard from for T is given up: its links retire and its work fails,
 * but its endpoint stays (silence is no endpoint failure). A tick 3T/4
 * late means this daemon itself stalled (SIGSTOP, a frozen host): its
 * peers may have given it up and reported its transfers failed, so it
 * fails its own open transfers with them before any late DATA can land,
 * and asks each peer whether its links still stand.
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

#endif
