/*
 * wireaddr.h — the worker address a daemon gives out (in agent descriptors
 * and HELLOs): its loop worker's UCX address, then each data lane's.
 *
 *   "b10w", version 1, lane count, door count, a zero byte,
 *   then 1 + lanes times: a 32-bit little-endian length and that many bytes,
 *   then each door (door.h): a family byte (4 or 6), 16 address bytes (an
 *   IPv4 address in the first 4, the rest zero) and a little-endian port.
 *
 * No UCX here: the format is ours, and a peer's copy of it is hostile input.
 */
#ifndef B10D_WIREADDR_H
#define B10D_WIREADDR_H

#include <stddef.h>
#include <stdint.h>

#include "b10/b10.h"

/* Data lanes a daemon may have. */
#define WIREADDR_MAX_LANES 8
/* Doors a daemon may name: where another knocks before its UCX may connect. */
#define WIREADDR_MAX_DOORS 8
#define WIREADDR_DOOR_BYTES 19

struct wireaddr_door {
    uint8_t family;         /* 4 or 6 */
    uint8_t addr[16];       /* network order; IPv4 in the first 4 bytes */
    uint16_t port;
};

/* The packed size of count (1 + lanes) worker addresses. */
size_t wireaddr_size(unsigned count, const size_t *lengths);
/* Pack them into out, wireaddr_size() bytes. */
void wireaddr_pack(uint8_t *out, unsigned count, const void *const *addrs, const size_t *lengths);
/*
 * Split a packed address into its workers' addresses (pointers into p) and
 * how many there are (1 + lanes) in *count_p. B10_ERR_INVALID_ARG when
 * anything about it is malformed: addrs, lengths and *count_p are then
 * untouched, and the caller says what the bytes were (a peer's HELLO, a
 * rank's descriptor). addrs and lengths hold 1 + WIREADDR_MAX_LANES entries.
 */
b10_status_t wireaddr_unpack(const uint8_t *p, size_t length, const uint8_t **addrs,
                             size_t *lengths, unsigned *count_p);

/*
 * Append doors to a packed address of packed_length bytes, which has
 * WIREADDR_DOOR_BYTES × n bytes of room after it (at most
 * WIREADDR_MAX_DOORS); its new length.
 */
size_t wireaddr_add_doors(uint8_t *packed, size_t packed_length, const struct wireaddr_door *doors,
                          unsigned n);
/* The doors of a packed address (WIREADDR_MAX_DOORS of room): how many, or -1 when malformed. */
int wireaddr_doors(const uint8_t *p, size_t length, struct wireaddr_door *doors);

#endif
