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
 * Bounded: DOOR_MAX_CONNS connections at once, DOOR_MAX_CONNS_PER_ADDR of
 * them from one address, each for --connect-timeout-ms at most, one framed
 * message of KNOCK_MAX_BYTES in and one out, knocks that open under a key
 * answered at --max-hellos-per-s (all knockers together; a stranger's spend
 * nothing of it; a proof is checked only within it).
 */
#ifndef B10D_DOOR_H
#define B10D_DOOR_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "auth.h"
#include "b10/b10.h"
#include "gate.h"
#include "wireaddr.h"

#define DOOR_MAX_CONNS 64
#define DOOR_MAX_CONNS_PER_ADDR 8

struct door_config {
    const char *name;           /* this daemon's --name */
    uint64_t daemon_id;
    const char *devices;        /* --net-devices, else UCX_NET_DEVICES; "" or "all": every device */
    uint16_t port;              /* --door-port; 0: one the kernel picks, a door each */
    uint32_t timeout_ms;        /* a knock's whole exchange, either side */
    double knocks_per_s;        /* knocks answered, all knockers together */
};

struct door_stats {
    uint64_t let_in;            /* knocks answered, their addresses on the gate */
    uint64_t refused;           /* knocks that opened under a key, refused (answered) */
    uint64_t dropped;           /* connections closed unanswered: no key, malformed, slow, too many */
    uint64_t knocked;           /* knocks of this daemon that were let in */
    uint64_t knock_failed;
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
const struct door_stats *door_stats(const struct door *door);

/*
 * Knock at the doors of the daemon `name` (tried in turn until one
 * answers) and call cb once, from the loop, never before door_knock
 * returned: B10_OK when it let this daemon in and its addresses are on
 * this gate (a certified daemon's: only once its answer proved the node
 * `name`). The handle is good until cb runs or door_knock_cancel.
 */
struct door_knock *door_knock(struct door *door, const struct wireaddr_door *doors, unsigned n,
                              const char *name, void *user, door_knock_cb cb);
void door_knock_cancel(struct door_knock *k);

/* What this daemon's doors answer: its boot's worker address (kept, not copied) and incarnation. */
void door_set_boot(struct door *door, const void *address, size_t length, uint64_t incarnation);

/* Seal the gate again (the list changed): UCX's listeners get the list as it is now. */
b10_status_t door_seal(struct door *door, char *detail, size_t detail_len);

#endif
