/* checksum.c — see checksum.h. */
#include "checksum.h"

#include <xxhash.h>

#include "frame.h"

uint64_t checksum_seed(uint64_t xfer_id, uint32_t chunk)
{
    /* Distinct for every (transfer, chunk): the id's bits mixed with a chunk's odd multiple. */
    return xfer_id ^ ((uint64_t)chunk * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull);
}

#if defined(__x86_64__)
/* XXH3 with AVX2 where the CPU has it (checksum-avx2.c), else the library's. */
static uint64_t xxh3(const void *bytes, size_t length, uint64_t seed)
{
    static int avx2 = -1;       /* asked once; every thread would store the same answer */
    int has = __atomic_load_n(&avx2, __ATOMIC_RELAXED);
    if (has < 0) {
        has = __builtin_cpu_supports("avx2") ? 1 : 0;
        __atomic_store_n(&avx2, has, __ATOMIC_RELAXED);
    }
    return has ? checksum_xxh3_avx2(bytes, length, seed) : XXH3_64bits_withSeed(bytes, length, seed);
}
#else
static uint64_t xxh3(const void *bytes, size_t length, uint64_t seed)
{
    return XXH3_64bits_withSeed(bytes, length, seed);
}
#endif

uint32_t checksum_blocks(size_t length)
{
    return length <= CHECKSUM_BLOCK ? 1 : (uint32_t)((length + CHECKSUM_BLOCK - 1) / CHECKSUM_BLOCK);
}

void checksum_block_sums(const void *bytes, size_t length, uint64_t seed, uint32_t first,
                         uint32_t count, uint64_t *sums)
{
    const uint8_t *p = bytes;
    for (uint32_t i = first; i < first + count; i++) {
        size_t at = (size_t)i * CHECKSUM_BLOCK;
        size_t n = length - at < CHECKSUM_BLOCK ? length - at : CHECKSUM_BLOCK;
        sums[i] = xxh3(p + at, n, seed + i);
    }
}

uint64_t checksum_combine(const uint64_t *sums, uint32_t nblocks, size_t length, uint64_t seed)
{
    if (length <= CHECKSUM_BLOCK)
        return sums[0];
    if (nblocks > CHECKSUM_MAX_BLOCKS)
        return 0;       /* past any view (--view-bytes is at most 1 GiB): never matches a sum */
    /* Little-endian whatever the host: both ends must hash the same bytes. */
    uint8_t le[8 * CHECKSUM_MAX_BLOCKS];
    for (uint32_t i = 0; i < nblocks; i++)
        frame_put_u64(le + 8 * i, sums[i]);
    return xxh3(le, 8 * (size_t)nblocks, seed);
}

uint64_t checksum(const void *bytes, size_t length, uint64_t seed)
{
    if (length <= CHECKSUM_BLOCK)
        return xxh3(bytes, length, seed);
    uint32_t n = checksum_blocks(length);
    if (n > CHECKSUM_MAX_BLOCKS)
        return 0;
    uint64_t sums[CHECKSUM_MAX_BLOCKS];
    checksum_block_sums(bytes, length, seed, 0, n, sums);
    return checksum_combine(sums, n, length, seed);
}

void checksum_trailer_put(uint8_t *at, uint64_t sum, bool present)
{
    frame_put_u64(at, present ? sum : 0);
    frame_put_u64(at + 8, present ? CHECKSUM_PRESENT : CHECKSUM_ABSENT);
}

int checksum_trailer_get(const uint8_t *at, uint64_t *sum_p)
{
    uint64_t sum = frame_get_u64(at), flags = frame_get_u64(at + 8);
    *sum_p = sum;
    if (flags == CHECKSUM_PRESENT)
        return 1;
    /* Anything but the two words, or a sum beside "none": the trailer itself changed. */
    return flags == CHECKSUM_ABSENT && sum == 0 ? 0 : -1;
}
