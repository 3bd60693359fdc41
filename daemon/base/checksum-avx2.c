/*
 * checksum-avx2.c — XXH3-64 built for AVX2, for checksum.c to call on CPUs
 * that have it.
 *
 * Debian's libxxhash is built for the x86-64 baseline (SSE2): 13 GB/s on
 * the build machine, where the same code from its header, compiled here
 * with -mavx2 (the Makefile adds it for this file alone), hashes 23 GB/s.
 * The algorithm is the library's own (xxhash.h, XXH_INLINE_ALL): the
 * known-answer tests hold both paths to the same sums.
 */
#include "checksum.h"

#if defined(__AVX2__)
#define XXH_INLINE_ALL
#include <xxhash.h>

uint64_t checksum_xxh3_avx2(const void *bytes, size_t length, uint64_t seed)
{
    return XXH3_64bits_withSeed(bytes, length, seed);
}
#endif
