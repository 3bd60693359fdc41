/* checksum.c — see checksum.h. */
#include "checksum.h"

#define XXH_STATIC_LINKING_ONLY     /* XXH3_state_t on the stack */
#include <xxhash.h>

#include <string.h>

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

/* The chunk's sum from the sums of blocks, fed to XXH3's streaming state a batch at a time. */
struct combine {
    XXH3_state_t state;
    uint8_t le[8 * 256];
};

/* A state on the stack must be initialized first: reset keeps the secret of a state whose
 * seed already matches, and stack bytes may hold that seed beside no secret. */
static void combine_start(struct combine *c, uint64_t seed)
{
    XXH3_INITSTATE(&c->state);
    XXH3_64bits_reset_withSeed(&c->state, seed);
}

static void combine_feed(struct combine *c, const uint64_t *sums, uint32_t n)
{
    /* Little-endian whatever the host: both ends must hash the same bytes. */
    for (uint32_t k = 0; k < n; k++)
        frame_put_u64(c->le + 8 * k, sums[k]);
    XXH3_64bits_update(&c->state, c->le, 8 * (size_t)n);
}

uint64_t checksum_combine(const uint64_t *sums, uint32_t nblocks, size_t length, uint64_t seed)
{
    if (length <= CHECKSUM_BLOCK)
        return sums[0];
    struct combine c;
    combine_start(&c, seed);
    for (uint32_t i = 0; i < nblocks; i += 256)
        combine_feed(&c, sums + i, nblocks - i < 256 ? nblocks - i : 256);
    return XXH3_64bits_digest(&c.state);
}

uint64_t checksum(const void *bytes, size_t length, uint64_t seed)
{
    if (length <= CHECKSUM_BLOCK)
        return xxh3(bytes, length, seed);
    /* A 1 GiB view has 65,536 blocks: summed and fed 256 at a time. */
    uint32_t n = checksum_blocks(length);
    uint64_t sums[256];
    struct combine c;
    combine_start(&c, seed);
    for (uint32_t i = 0; i < n; i += 256) {
        uint32_t count = n - i < 256 ? n - i : 256;
        checksum_block_sums((const uint8_t *)bytes + (size_t)i * CHECKSUM_BLOCK,
                            length - (size_t)i * CHECKSUM_BLOCK, seed + i, 0, count, sums);
        combine_feed(&c, sums, count);
    }
    return XXH3_64bits_digest(&c.state);
}

size_t checksum_trailer_at(size_t length)
{
    return (length + 7) & ~(size_t)7;
}

static size_t table_bytes(size_t length)
{
    return length > CHECKSUM_BLOCK ? 8 * (size_t)checksum_blocks(length) : 0;
}

size_t checksum_message_bytes(size_t length)
{
    return checksum_trailer_at(length) + table_bytes(length) + 16;
}

const uint8_t *checksum_trailer_table(const uint8_t *chunk, size_t length)
{
    return chunk + checksum_trailer_at(length);
}

uint64_t checksum_trailer_block(const uint8_t *chunk, size_t length, uint32_t i)
{
    return frame_get_u64(checksum_trailer_table(chunk, length) + 8 * (size_t)i);
}

void checksum_trailer_put(uint8_t *chunk, size_t length, const uint64_t *block_sums, uint64_t sum,
                          bool present)
{
    uint8_t *at = chunk + checksum_trailer_at(length);
    size_t table = table_bytes(length);
    memset(chunk + length, 0, (size_t)(at - (chunk + length)));
    for (size_t i = 0; i < table / 8; i++)
        frame_put_u64(at + 8 * i, present ? block_sums[i] : 0);
    frame_put_u64(at + table, present ? sum : 0);
    frame_put_u64(at + table + 8, present ? CHECKSUM_PRESENT : CHECKSUM_ABSENT);
}

b10_status_t checksum_trailer_get(const uint8_t *chunk, size_t length, uint64_t seed,
                                  uint64_t *sum_p, bool *present_p)
{
    const uint8_t *at = chunk + checksum_trailer_at(length);
    size_t table = table_bytes(length);
    uint64_t sum = frame_get_u64(at + table), flags = frame_get_u64(at + table + 8);
    bool present = flags == CHECKSUM_PRESENT;

    /* The table, as little-endian words, is the very input of the chunk's sum. */
    if (present && table != 0 && XXH3_64bits_withSeed(at, table, seed) != sum)
        return B10_ERR_DATA_CORRUPT;
    /* Anything but the two words, or a sum beside "none": the trailer itself changed. */
    if (!present && (flags != CHECKSUM_ABSENT || sum != 0))
        return B10_ERR_DATA_CORRUPT;
    *sum_p = sum;
    *present_p = present;
    return B10_OK;
}
