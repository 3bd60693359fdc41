/*
 * checksum.h — the checksum each DATA chunk carries.
 *
 * XXH3-64 (libxxhash), seeded with the transfer id and the chunk index: a
 * chunk whose bytes changed on the way (in staging, on a NIC, by a bug)
 * fails, and so does one that arrives in another transfer's or another
 * chunk's place. The sender computes it where the chunk was gathered and
 * sends it in a trailer after the chunk's bytes, in the same DATA message;
 * the receiver checks it before a byte of the chunk is scattered into the
 * rank's memory (copy.c).
 *
 * A chunk of up to CHECKSUM_BLOCK bytes is summed in one piece. A larger one
 * is summed a block at a time, block i with seed + i (so that blocks that
 * trade places fail too), and the chunk's sum is XXH3-64 with seed of the
 * blocks' sums as little-endian u64s: the blocks can be summed on several
 * threads at once, so that a 4 MiB chunk does not wait for one core, and
 * on a GPU, whose threads each follow one block (XXH3 is sequential inside
 * a block: 16 KiB gives a 4 MiB chunk 256 of them, enough to keep PCIe
 * reads in flight; cuda/gpu-copy.h).
 *
 * The trailer follows the chunk in the same DATA message, from the first
 * 8-aligned offset after it (the sender zeroes the bytes between),
 * little-endian words: for a chunk of more than one block, each block's sum
 * (so that the GPU checks a view's blocks inside the scatter's submission);
 * then the chunk's sum; then a word that says whether there is one:
 * CHECKSUM_PRESENT, or CHECKSUM_ABSENT beside a zero sum (a sender that did
 * not sum the chunk; it sends zero block sums too, and they are not read).
 * Those two words differ in every bit and neither is zero, so no flip of a
 * few bits turns a summed chunk into an unchecked one, and the blocks' sums
 * must give the chunk's: any other trailer fails the chunk as corrupt.
 */
#ifndef B10D_CHECKSUM_H
#define B10D_CHECKSUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "b10/b10.h"

#define CHECKSUM_PRESENT 0x5355534430316235ull    /* "5b10DSUS" */
#define CHECKSUM_ABSENT  (~CHECKSUM_PRESENT)
#define CHECKSUM_BLOCK (16u << 10)

uint64_t checksum_seed(uint64_t xfer_id, uint32_t chunk);
/* The chunk's sum, all on this thread. */
uint64_t checksum(const void *bytes, size_t length, uint64_t seed);

/* The same in parts: how many blocks a chunk of length has (1 up to CHECKSUM_BLOCK)... */
uint32_t checksum_blocks(size_t length);
/* ...the sums of blocks [first, first + count) into sums[first...] (any thread)... */
void checksum_block_sums(const void *bytes, size_t length, uint64_t seed, uint32_t first,
                         uint32_t count, uint64_t *sums);
/* ...and the chunk's sum from all of them: equal to checksum(bytes, length, seed). */
uint64_t checksum_combine(const uint64_t *sums, uint32_t nblocks, size_t length, uint64_t seed);

/* Where a chunk of length bytes has its trailer (8-aligned), and its DATA message's length. */
size_t checksum_trailer_at(size_t length);
size_t checksum_message_bytes(size_t length);
/* Write the trailer after chunk[0, length); block_sums: checksum_blocks(length) of them, read
 * when present and the chunk has more than one block. */
void checksum_trailer_put(uint8_t *chunk, size_t length, const uint64_t *block_sums, uint64_t sum,
                          bool present);
/*
 * Read it: B10_OK, *present_p whether the sender put a sum there and *sum_p
 * that sum (0 without one); B10_ERR_DATA_CORRUPT when the trailer itself
 * changed on the way (the outputs are then untouched).
 */
b10_status_t checksum_trailer_get(const uint8_t *chunk, size_t length, uint64_t seed,
                                  uint64_t *sum_p, bool *present_p);
/* A chunk of more than one block whose trailer has a sum: block i's sum, as the sender had it, and
 * the table of them (little-endian words, 8-aligned). */
uint64_t checksum_trailer_block(const uint8_t *chunk, size_t length, uint32_t i);
const uint8_t *checksum_trailer_table(const uint8_t *chunk, size_t length);

/* checksum-avx2.c's XXH3, for checksum.c to call where the CPU has AVX2 (x86-64 only). */
uint64_t checksum_xxh3_avx2(const void *bytes, size_t length, uint64_t seed);

#endif
