/* ids.c — see ids.h. */
#include "ids.h"

/*
 * Rounds of the Feistel network over the counter's two 16-bit halves. A
 * Feistel network is a permutation whatever its round function, so ids
 * never repeat; with a keyed pseudorandom function in each round (SipHash),
 * and more rounds than the four that make a strong one, what a rank learns
 * from its own ids says nothing of the counters between them.
 */
#define IDS_ROUNDS 8

#define IDS_ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static void ids_sipround(uint64_t v[4])
{
    v[0] += v[1];
    v[1] = IDS_ROTL(v[1], 13) ^ v[0];
    v[0] = IDS_ROTL(v[0], 32);
    v[2] += v[3];
    v[3] = IDS_ROTL(v[3], 16) ^ v[2];
    v[0] += v[3];
    v[3] = IDS_ROTL(v[3], 21) ^ v[0];
    v[2] += v[1];
    v[1] = IDS_ROTL(v[1], 17) ^ v[2];
    v[2] = IDS_ROTL(v[2], 32);
}

/* SipHash-2-4 of one 8-byte word m under key (the reference's, for an 8-byte message). */
static uint64_t ids_siphash(const uint64_t key[2], uint64_t m)
{
    uint64_t v[4] = { 0x736f6d6570736575ull ^ key[0], 0x646f72616e646f6dull ^ key[1],
                      0x6c7967656e657261ull ^ key[0], 0x7465646279746573ull ^ key[1] };
    const uint64_t blocks[2] = { m, (uint64_t)8 << 56 };

    for (int b = 0; b < 2; b++) {
        v[3] ^= blocks[b];
        ids_sipround(v);
        ids_sipround(v);
        v[0] ^= blocks[b];
    }
    v[2] ^= 0xff;
    for (int i = 0; i < 4; i++)
        ids_sipround(v);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

static uint32_t ids_permute(const uint64_t key[2], uint32_t x)
{
    uint32_t l = x >> 16, r = x & 0xffffu;

    for (uint64_t i = 0; i < IDS_ROUNDS; i++) {
        uint32_t f = (uint32_t)ids_siphash(key, i << 32 | r) & 0xffffu;
        uint32_t t = l ^ f;
        l = r;
        r = t;
    }
    return l << 16 | r;
}

void ids_init(struct ids *ids, const uint64_t seed[IDS_SEED_WORDS])
{
    /* An id 0 is no transfer (a READ's read_id, an unset id): no epoch makes one. */
    uint64_t epoch = seed[0] & 0xffffffffu;
    *ids = (struct ids){ .epoch = epoch != 0 ? epoch : 1, .key = { seed[1], seed[2] } };
}

uint64_t ids_new_xfer(struct ids *ids)
{
    return (ids->epoch << 32) | ids_permute(ids->key, (uint32_t)++ids->next_xfer);
}

uint64_t ids_new_generation(struct ids *ids)
{
    return (ids->epoch << 32) | (++ids->next_gen & 0xffffffffu);
}
