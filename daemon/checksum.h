/*
 * checksum.h — the checksum each DATA chunk carries.
 *
 * XXH3-64 (libxxhash) of the chunk's bytes, seeded with the transfer id and
 * the chunk index: a chunk whose bytes changed on the way (in staging, on a
 * NIC, by a bug) fails, and so does one that arrives in another transfer's
 * or another chunk's place. The sender computes it where the bytes were
 * gathered and sends it in a trailer after the chunk's bytes, in the same
 * DATA message; the receiver checks it before a byte of the chunk is
 * scattered into the rank's memory (copy.c).
 *
 * The trailer is CHECKSUM_TRAILER_BYTES, little-endian: the sum, then flags
 * (CHECKSUM_PRESENT: the sender computed it; a sender running
 * --verify-data off sends none, and the chunk is not checked).
 */
#ifndef B10D_CHECKSUM_H
#define B10D_CHECKSUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CHECKSUM_TRAILER_BYTES 16
#define CHECKSUM_PRESENT 1u

uint64_t checksum_seed(uint64_t xfer_id, uint32_t chunk);
uint64_t checksum(const void *bytes, size_t length, uint64_t seed);

/* Write the trailer at `at` (CHECKSUM_TRAILER_BYTES). */
void checksum_trailer_put(uint8_t *at, uint64_t sum, bool present);
/* Read it: true and *sum_p when the sender put a checksum there. */
bool checksum_trailer_get(const uint8_t *at, uint64_t *sum_p);

#endif
