/*
 * wireaddr.h — the worker address a daemon gives out (in agent descriptors
 * and HELLOs): its loop worker's UCX address, then each data lane's.
 *
 *   "b10w", version 1, lane count, two zero bytes,
 *   then 1 + lanes times: a 32-bit little-endian length and that many bytes.
 *
 * No UCX here: the format is ours, and a peer's copy of it is hostile input.
 */
#ifndef B10D_WIREADDR_H
#define B10D_WIREADDR_H

#include <stddef.h>
#include <stdint.h>

/* Data lanes a daemon may have. */
#define WIREADDR_MAX_LANES 8

/* The packed size of count (1 + lanes) worker addresses. */
size_t wireaddr_size(unsigned count, const size_t *lengths);
/* Pack them into out, wireaddr_size() bytes. */
void wireaddr_pack(uint8_t *out, unsigned count, const void *const *addrs, const size_t *lengths);
/*
 * Split a packed address into its workers' addresses (pointers into p);
 * returns how many (1 + lanes), or -1 when anything about it is malformed
 * (addrs and lengths are then untouched).
 * addrs and lengths hold 1 + WIREADDR_MAX_LANES entries.
 */
int wireaddr_unpack(const uint8_t *p, size_t length, const uint8_t **addrs, size_t *lengths);

#endif
