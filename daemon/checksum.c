/* checksum.c — see checksum.h. */
#include "checksum.h"

#include <xxhash.h>

uint64_t checksum_seed(uint64_t xfer_id, uint32_t chunk)
{
    /* Distinct for every (transfer, chunk): the id's bits mixed with a chunk's odd multiple. */
    return xfer_id ^ ((uint64_t)chunk * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull);
}

uint64_t checksum(const void *bytes, size_t length, uint64_t seed)
{
    return XXH3_64bits_withSeed(bytes, length, seed);
}

static void put_le64(uint8_t *at, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        at[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t *at)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)at[i] << (8 * i);
    return v;
}

void checksum_trailer_put(uint8_t *at, uint64_t sum, bool present)
{
    put_le64(at, present ? sum : 0);
    put_le64(at + 8, present ? CHECKSUM_PRESENT : 0);
}

bool checksum_trailer_get(const uint8_t *at, uint64_t *sum_p)
{
    *sum_p = get_le64(at);
    return (get_le64(at + 8) & CHECKSUM_PRESENT) != 0;
}
