/*
 * gate.h — what may reach UCX's listeners: the addresses of daemons that
 * proved they hold the cluster key at the door (door.h), enforced by the
 * kernel.
 *
 * UCX parses a connection's bytes before b10d can check any of them, and
 * trusts them: a connection request cut short crashes it (daemon/SECURITY.md, "Below
 * the envelope"). So a keyed daemon attaches a socket filter (classic BPF,
 * SO_ATTACH_FILTER) to each TCP listener its UCX workers opened, which
 * drops every packet, the SYN first, from an address not on this list.
 * A stranger's connection is never established; the sockets a listener
 * accepts inherit its filter.
 *
 * The listeners are those of this process at the first seal, less the ones
 * the caller keeps (the door's own): UCX opens them when its workers are
 * created, and none after. A seal after that re-attaches the filter to the
 * same sockets (held to their inode, so a reused descriptor number is left
 * alone), with the list as it is then.
 */
#ifndef B10D_GATE_H
#define B10D_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "b10/b10.h"

/* Addresses on the list, at most: the oldest allowed goes first beyond it. */
#define GATE_MAX_ADDRS 256
/* Listening sockets sealed, at most (UCX opens one a device and worker). */
#define GATE_MAX_LISTENERS 64

/* An IPv4 or IPv6 address, in network order; IPv4 in the first 4 bytes. */
struct gate_addr {
    uint8_t family;         /* 4 or 6 */
    uint8_t bytes[16];
};

struct gate;

struct gate *gate_create(void);
void gate_destroy(struct gate *g);

/*
 * Put these addresses on the list (refreshing those already there, as the
 * newest); true when the list changed, so that the caller seals again.
 */
bool gate_allow(struct gate *g, const struct gate_addr *addrs, unsigned n);
bool gate_allows(const struct gate *g, const struct gate_addr *addr);
unsigned gate_count(const struct gate *g);
/* Listening sockets sealed at the first seal. */
unsigned gate_listeners(const struct gate *g);

/*
 * Attach the filter of the list as it is now. The first call finds the
 * process's TCP listeners, but those in keep[]; each later call seals the
 * same ones. B10_OK, or what failed (the detail says which socket).
 */
b10_status_t gate_seal(struct gate *g, const int *keep, unsigned nkeep, char *detail,
                       size_t detail_len);

bool gate_addr_eq(const struct gate_addr *a, const struct gate_addr *b);
/* A sockaddr's address, or false for another family. */
bool gate_addr_of(const struct sockaddr *sa, struct gate_addr *out);
/* "192.0.2.1" or "2001:db8::1". */
const char *gate_addr_str(const struct gate_addr *a, char *buf, size_t size);

/*
 * The filter program for a listener of this family (AF_INET or AF_INET6),
 * in out (room for max instructions); how many, or 0 when it does not fit.
 * Exposed for the unit tests.
 */
struct sock_filter;
size_t gate_program(const struct gate *g, int family, struct sock_filter *out, size_t max);

#endif
