/*
 * door.h — where a daemon proves it holds the cluster key before another
 * lets it reach its UCX (gate.h).
 *
 * A keyed daemon listens on a TCP port of each address of its network
 * devices (--net-devices) and names these doors in its worker address
 * (wireaddr.h), so in every descriptor and HELLO it hands out. Before a
 * daemon opens a link it knocks: a KNOCK (knock.h) sealed under the
 * cluster key, from one of the addresses it lists. The door checks it (the
 * key, the clock within a minute, the connection's source among the listed
 * addresses), puts those addresses on its gate, and answers with a
 * KNOCK_ACK that lists its own, which the knocker puts on its gate in turn
 * (the answering daemon's UCX connects back), with its boot and worker
 * address: a door at a fixed port (--door-port) so answers for whichever
 * boot of its node runs now, and a descriptor of an earlier boot still
 * reaches the node. What does not open under a key is dropped unanswered.
 *
 * With node certificates (nodeid.h) the key is not enough: a certified
 * door lets in only a knock that proves a certified node by the name it
 * claims (knock.h), and refuses, answering, a key holder without one, so
 * that only certified nodes reach UCX, which parses bytes before b10d can
 * check them. Its answer proves its node in turn, and a certified knocker
 * lets in only an answer proven for the node it knocked for. An
 * uncertified door refuses a proof it cannot check.
 *
 * Bounded: each family (IPv4, IPv6) a pool of DOOR_POOL_CONNS connections
 * of its own, so that strangers of one family cannot keep out the knocks
 * of the other; DOOR_MAX_CONNS_PER_SOURCE of them from one source (an IPv4
 * address; an IPv6 /64, which its holder has billions of addresses of).
 * A real knock is one small write right after connect, and a connection
 * has DOOR_WHOLE_KNOCK_MS (at most half of --connect-timeout-ms) to
 * deliver its whole knock, --connect-timeout-ms for the exchange. One that
 * has not delivered it yet gives its slot up to a newcomer: when a source
 * or a pool is full, the oldest such connection (of the source holding the
 * most) is closed for the newcomer, so that a flood of connections that
 * trickle bytes never keeps a real knock out (door_admit). One message of
 * KNOCK_MAX_BYTES in and one out; knocks that open under a key answered at
 * --max-hellos-per-s (all knockers together; a stranger's spend nothing of
 * it; a proof is checked only within it).
 *
 * A knock of this daemon tries each door of the other in turn; a round
 * where some door took the connection and then dropped it or kept silent
 * (a flood at that door, its rate, a key it does not hold) is tried again
 * after a backoff with jitter while the knocker's caller says something
 * still waits for the link (door_knock_again_cb). A refusal the door
 * answered under the key is its say and ends the knock; so do doors that
 * nothing listens at (the daemon is down).
 */
#ifndef B10D_DOOR_H
#define B10D_DOOR_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "auth.h"
#include "b10/b10.h"
#include "gate.h"
#include "stats.h"
#include "wireaddr.h"

#define DOOR_POOL_CONNS 64              /* connections at once, each family */
#define DOOR_MAX_CONNS_PER_SOURCE 4     /* of them from one IPv4 address or IPv6 /64 */
#define DOOR_SOURCE_V6_BYTES 8          /* an IPv6 source: its /64 */
#define DOOR_WHOLE_KNOCK_MS 1000        /* from accept to a whole knock, at most */
#define DOOR_RETRY_FIRST_MS 50          /* a knock's first backoff; doubling, jittered */
#define DOOR_RETRY_MAX_MS 1000

struct door_config {
    const char *name;           /* this daemon's --name */
    uint64_t daemon_id;
    const char *devices;        /* --net-devices, else UCX_NET_DEVICES; "" or "all": every device */
    uint16_t port;              /* --door-port; 0: one the kernel picks, a door each */
    uint32_t timeout_ms;        /* a knock's whole exchange, either side */
    uint32_t whole_ms;          /* from accept to a whole knock (0: DOOR_WHOLE_KNOCK_MS), at most
                                 * half of timeout_ms; the unit tests lengthen it */
    double knocks_per_s;        /* knocks answered, all knockers together */
    struct stats_door *stats;   /* where the door counts (the caller's, outliving it; its counters
                                 * are stats.h's); NULL: its own */
};

struct door;
struct door_knock;
struct knock;
/*
 * A knock's end. On B10_OK, ack is the door's answer (knock.h): the name,
 * boot (sender_id, incarnation) and worker address of the daemon that
 * answers there now, good for the callback's length.
 */
typedef void (*door_knock_cb)(void *user, b10_status_t status, const char *detail,
                              const struct knock *ack);
/*
 * A round of the doors went unanswered (some door took the connection,
 * then dropped it or kept silent): true to knock again after a backoff,
 * false to end the knock B10_ERR_PEER_UNREACHABLE. Called from the loop.
 */
typedef bool (*door_knock_again_cb)(void *user);

struct nodeid;
/*
 * Listen at the addresses of cfg->devices and keep gate's list. B10_OK
 * with no door at all where the devices have no IP address (an RDMA-only
 * fabric: no TCP listener of UCX's to guard either). nodeid: this node's
 * identity (certified mode; the caller's, outliving the door), or NULL.
 */
b10_status_t door_create(uv_loop_t *loop, const struct auth_keyring *keys,
                         const struct nodeid *nodeid, struct gate *gate,
                         const struct door_config *cfg, struct door **door_p, char *detail,
                         size_t detail_len);
/* Close the doors and every knock in flight (no callback is called). */
void door_destroy(struct door *door);

/* This daemon's doors, for its worker address: how many (at most WIREADDR_MAX_DOORS). */
unsigned door_endpoints(const struct door *door, struct wireaddr_door *out);
/* The doors' listening sockets, which the gate must not filter. */
unsigned door_fds(const struct door *door, int *fds, unsigned max);
const struct stats_door *door_stats(const struct door *door);

/*
 * Knock at the doors of the daemon `name` (tried in turn until one
 * answers, each round bounded by cfg->timeout_ms) and call cb once, from
 * the loop, never before door_knock returned: B10_OK when it let this
 * daemon in and its addresses are on this gate (a certified daemon's: only
 * once its answer proved the node `name`). A round no door answered is
 * tried again while again(user) says so (NULL: one round). The handle is
 * good until cb runs or door_knock_cancel.
 */
struct door_knock *door_knock(struct door *door, const struct wireaddr_door *doors, unsigned n,
                              const char *name, void *user, door_knock_cb cb,
                              door_knock_again_cb again);
void door_knock_cancel(struct door_knock *k);
/*
 * What the knock met so far, for what waited for it past its own
 * deadline: for how long no door answered it, or how many rounds no door
 * let this daemon in and the last door's reason. Good until the loop runs.
 */
const char *door_knock_why(struct door_knock *k);

/* One connection at a door, as its admission sees it (door_admit). */
struct door_slot {
    struct gate_addr from;
    bool whole;                 /* its knock came whole: being answered, never evicted */
};

enum door_admit_verdict {
    DOOR_ADMIT_TAKE,            /* room for it */
    DOOR_ADMIT_EVICT_SOURCE,    /* its source is at its bound: that source's oldest slow one goes */
    DOOR_ADMIT_EVICT_POOL,      /* its family's pool is full: a slow one goes (below) */
    DOOR_ADMIT_FULL,            /* no room: all there are whole knocks being answered */
};

/*
 * Where a new connection from `from` goes, beside the n connections held
 * now, oldest first (both families; at most 2 * DOOR_POOL_CONNS, what a
 * door holds). Its source (an IPv4 address, an IPv6
 * /64) at DOOR_MAX_CONNS_PER_SOURCE: that source's oldest slow connection
 * (knock not yet whole) makes room. Its family at DOOR_POOL_CONNS: the
 * oldest slow connection of the source holding the most of that pool. An
 * attacker's connections all stay slow, so they go first, oldest first,
 * and a real knock, whole at once, is never among them; none evictable:
 * DOOR_ADMIT_FULL. *victim_p: the index of the connection to close
 * (EVICT_*), else untouched. Pure: the unit tests drive it from tables.
 */
enum door_admit_verdict door_admit(const struct door_slot *slots, unsigned n,
                                   const struct gate_addr *from, unsigned *victim_p);
/* Is b the same source as a: the same IPv4 address, the same IPv6 /64? */
bool door_same_source(const struct gate_addr *a, const struct gate_addr *b);

/* What this daemon's doors answer: its boot's worker address (kept, not copied) and incarnation. */
void door_set_boot(struct door *door, const void *address, size_t length, uint64_t incarnation);

/* Seal the gate again (the list changed): UCX's listeners get the list as it is now. */
b10_status_t door_seal(struct door *door, char *detail, size_t detail_len);

#endif
