/*
 * test-checksum.c — daemon/base/checksum.c: the checksum every DATA chunk carries.
 *
 * Known answers first: XXH3-64 with seed 0 of the prefixes of a published
 * xorshift sequence, at lengths that cross every one of the algorithm's
 * length classes (0, 1-3, 4-8, 9-16, 17-128, 129-240, and the long path
 * with its stripes and blocks), so that the library linked is the standard
 * algorithm and not something that merely hashes. A chunk larger than a
 * block is summed as checksum.h defines, checked here against XXH3 called
 * directly, and its blocks summed in any split give the same sum. Then what b10d relies on:
 * single-bit flips anywhere in a 1 MiB chunk change the sum; the seed binds a
 * chunk to its transfer and index; the trailer round-trips, byte order
 * fixed, and says when no sum was put there.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <xxhash.h>

#include "checksum.h"

#define KAT_BYTES 2243

/* The sequence of the vectors: xorshift64 (13, 7, 17) from 1, its low byte. */
static void kat_input(uint8_t *a, size_t n)
{
    uint64_t x = 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        a[i] = (uint8_t)x;
    }
}

static void test_known_answers(void **state)
{
    (void)state;
    static const struct {
        size_t len;
        uint64_t sum;
    } kat[] = {
        { 0, 0x2d06800538d394c2ull },    { 1, 0xd0d496e05c553485ull },
        { 3, 0x6ea2d59aca5c3778ull },    { 4, 0xbf65290914e80242ull },
        { 8, 0xabc1413da6cd0209ull },    { 9, 0x8bc89400bfed51f6ull },
        { 16, 0x7e46916754d7c9b8ull },   { 17, 0xed4be912ba5f836dull },
        { 128, 0x06a146ee9a2da378ull },  { 129, 0xbc7138129bf065daull },
        { 403, 0xcefeb3ffa532ad8cull },  { 512, 0xcdfa6b6268e3650full },
        { 2048, 0x330ce110cbb79eaeull }, { 2243, 0x0979f786a24edde7ull },
    };
    uint8_t a[KAT_BYTES];
    kat_input(a, sizeof(a));
    for (size_t i = 0; i < sizeof(kat) / sizeof(kat[0]); i++) {
        assert_int_equal(checksum(a, kat[i].len, 0), kat[i].sum);
        /* Both of checksum.c's paths: the library's build, and the AVX2 one where it runs. */
        assert_int_equal(XXH3_64bits_withSeed(a, kat[i].len, 0), kat[i].sum);
#if defined(__x86_64__)
        if (__builtin_cpu_supports("avx2"))
            assert_int_equal(checksum_xxh3_avx2(a, kat[i].len, 0), kat[i].sum);
#endif
    }
}

static void put_le64(uint8_t *at, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        at[i] = (uint8_t)(v >> (8 * i));
}

static void test_blocks_as_defined(void **state)
{
    (void)state;
    /* Up to and past 256 blocks, the batch checksum.c feeds XXH3's stream with. */
    size_t lens[] = { CHECKSUM_BLOCK, CHECKSUM_BLOCK + 1, 4u << 20, (4u << 20) - 77,
                      (5u << 20) + 3 };
    size_t most = (5u << 20) + 3;
    uint8_t *a = malloc(most);
    uint8_t *le = malloc(8 * checksum_blocks(most));
    uint64_t *sums = malloc(8 * checksum_blocks(most));
    assert_non_null(a);
    assert_non_null(le);
    assert_non_null(sums);
    kat_input(a, most);
    uint64_t seed = checksum_seed(0xabcdef, 5);
    for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
        size_t len = lens[k];
        uint32_t n = checksum_blocks(len);
        assert_int_equal(n, len <= CHECKSUM_BLOCK ? 1 : (len + CHECKSUM_BLOCK - 1) / CHECKSUM_BLOCK);
        /* The definition, spelled out with XXH3 itself. */
        uint64_t want;
        if (len <= CHECKSUM_BLOCK) {
            want = XXH3_64bits_withSeed(a, len, seed);
        } else {
            for (uint32_t i = 0; i < n; i++) {
                size_t at = (size_t)i * CHECKSUM_BLOCK;
                size_t m = len - at < CHECKSUM_BLOCK ? len - at : CHECKSUM_BLOCK;
                put_le64(le + 8 * i, XXH3_64bits_withSeed(a + at, m, seed + i));
            }
            want = XXH3_64bits_withSeed(le, 8 * (size_t)n, seed);
        }
        assert_int_equal(checksum(a, len, seed), want);
        /* In parts, as copy.c's tasks sum them: blocks in uneven groups, last group first. */
        memset(sums, 0, 8 * (size_t)n);
        for (uint32_t first = n; first > 0;) {
            uint32_t count = first >= 3 ? 3 : first;
            first -= count;
            checksum_block_sums(a, len, seed, first, count, sums);
        }
        assert_int_equal(checksum_combine(sums, n, len, seed), want);
    }
    /* Two blocks that trade places fail. */
    size_t len = 2 * (size_t)CHECKSUM_BLOCK;
    uint64_t before = checksum(a, len, seed);
    uint8_t *swapped = malloc(len);
    assert_non_null(swapped);
    memcpy(swapped, a + CHECKSUM_BLOCK, CHECKSUM_BLOCK);
    memcpy(swapped + CHECKSUM_BLOCK, a, CHECKSUM_BLOCK);
    assert_true(checksum(swapped, len, seed) != before);
    free(swapped);
    free(sums);
    free(le);
    free(a);
}

static void test_every_bit_flip_changes_the_sum(void **state)
{
    (void)state;
    size_t n = 1u << 20;
    uint8_t *chunk = malloc(n);
    assert_non_null(chunk);
    kat_input(chunk, n);
    uint64_t seed = checksum_seed(0x1234, 7);
    uint64_t sum = checksum(chunk, n, seed);
    /* Every bit of the first and last 256 bytes, and of one byte in each 4 KiB between. */
    size_t offs[256 + 256 + 256], k = 0;
    for (size_t i = 0; i < 256; i++) {
        offs[k++] = i;
        offs[k++] = n - 256 + i;
        offs[k++] = i * 4096 + 1000;
    }
    for (size_t i = 0; i < k; i++) {
        for (int bit = 0; bit < 8; bit++) {
            chunk[offs[i]] ^= (uint8_t)(1u << bit);
            assert_true(checksum(chunk, n, seed) != sum);
            chunk[offs[i]] ^= (uint8_t)(1u << bit);
        }
    }
    assert_int_equal(checksum(chunk, n, seed), sum);
    free(chunk);
}

static void test_seed_binds_transfer_and_chunk(void **state)
{
    (void)state;
    uint8_t a[4096];
    kat_input(a, sizeof(a));
    uint64_t base = checksum(a, sizeof(a), checksum_seed(42, 3));
    assert_int_equal(checksum(a, sizeof(a), checksum_seed(42, 3)), base);
    assert_true(checksum(a, sizeof(a), checksum_seed(42, 4)) != base);
    assert_true(checksum(a, sizeof(a), checksum_seed(43, 3)) != base);
    /* Distinct seeds for the chunks of one transfer and for neighbouring transfers. */
    for (uint32_t c = 0; c < 1000; c++) {
        assert_true(checksum_seed(42, c) != checksum_seed(42, c + 1));
        assert_true(checksum_seed(42, c) != checksum_seed(43, c));
    }
}

/* What a trailer reads as: 1 a sum (in *sum_p), 0 none, -1 damaged. */
static int trailer_read(const uint8_t *chunk, size_t length, uint64_t seed, uint64_t *sum_p)
{
    bool present = false;
    uint64_t before = *sum_p;
    b10_status_t st = checksum_trailer_get(chunk, length, seed, sum_p, &present);

    if (st == B10_ERR_DATA_CORRUPT) {
        assert_int_equal(*sum_p, before);   /* written only on success */
        return -1;
    }
    assert_int_equal(st, B10_OK);
    if (!present)
        assert_int_equal(*sum_p, 0);
    return present ? 1 : 0;
}

static void test_trailer_round_trip(void **state)
{
    (void)state;
    /* A chunk of one block: 13 bytes, 3 of pad, then sum and flag; not a byte outside. */
    uint8_t t[1 + 13 + 3 + 16 + 1];
    uint64_t sum = 0;
    memset(t, 0xee, sizeof(t));
    assert_int_equal(checksum_trailer_at(13), 16);
    assert_int_equal(checksum_message_bytes(13), 32);
    checksum_trailer_put(t + 1, 13, NULL, 0x0102030405060708ull, true);
    uint8_t want[3 + 16] = { 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1 };
    for (int i = 0; i < 8; i++)
        want[11 + i] = (uint8_t)(CHECKSUM_PRESENT >> (8 * i));
    assert_memory_equal(t + 14, want, sizeof(want));
    assert_int_equal(t[0], 0xee);
    assert_int_equal(t[13], 0xee);          /* the chunk's last byte is the chunk's */
    assert_int_equal(t[sizeof(t) - 1], 0xee);
    assert_int_equal(trailer_read(t + 1, 13, 5, &sum), 1);
    assert_int_equal(sum, 0x0102030405060708ull);

    /* No sum: said as such, and read back as none. */
    checksum_trailer_put(t + 1, 13, NULL, 0x99, false);
    assert_int_equal(trailer_read(t + 1, 13, 5, &sum), 0);
    /* Every single-bit flip of either word is damage, never "no sum". */
    for (int present = 0; present < 2; present++) {
        for (int bit = 0; bit < 128; bit++) {
            checksum_trailer_put(t + 1, 13, NULL, present ? 0x1234 : 0, present);
            t[17 + bit / 8] ^= (uint8_t)(1u << (bit % 8));
            int got = trailer_read(t + 1, 13, 5, &sum);
            if (present && bit < 64)
                assert_int_equal(got, 1);   /* a flipped sum: the check itself catches it */
            else
                assert_int_equal(got, -1);
        }
    }
    /* "No sum" beside a sum that is not zero: damaged too. */
    checksum_trailer_put(t + 1, 13, NULL, 0, false);
    t[17] = 1;
    assert_int_equal(trailer_read(t + 1, 13, 5, &sum), -1);

    /* A chunk of four blocks, the last of 5 bytes: its blocks' sums travel, and must give its sum. */
    size_t len = 3 * (size_t)CHECKSUM_BLOCK + 5, msg = checksum_message_bytes(len);
    assert_int_equal(msg, len + 3 + 4 * 8 + 16);
    uint8_t *c = malloc(msg + 1);
    assert_non_null(c);
    kat_input(c, len);
    c[msg] = 0xee;
    uint64_t seed = checksum_seed(77, 3), blocks[4];
    checksum_block_sums(c, len, seed, 0, 4, blocks);
    uint64_t whole = checksum_combine(blocks, 4, len, seed);
    assert_int_equal(whole, checksum(c, len, seed));
    checksum_trailer_put(c, len, blocks, whole, true);
    assert_int_equal(c[msg], 0xee);
    assert_int_equal(trailer_read(c, len, seed, &sum), 1);
    assert_int_equal(sum, whole);
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(checksum_trailer_block(c, len, i), blocks[i]);
    /* One flipped bit of the table, or of the sum, and the trailer is damaged; another seed too. */
    for (size_t bit = 0; bit < 8 * (4 * 8 + 8); bit++) {
        uint8_t *at = c + checksum_trailer_at(len) + bit / 8;
        *at ^= (uint8_t)(1u << (bit % 8));
        assert_int_equal(trailer_read(c, len, seed, &sum), -1);
        *at ^= (uint8_t)(1u << (bit % 8));
    }
    assert_int_equal(trailer_read(c, len, seed + 1, &sum), -1);
    /* Without a sum the table is zeros and is not read. */
    checksum_trailer_put(c, len, blocks, whole, false);
    assert_int_equal(trailer_read(c, len, seed, &sum), 0);
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(checksum_trailer_block(c, len, i), 0);
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_answers),
        cmocka_unit_test(test_blocks_as_defined),
        cmocka_unit_test(test_every_bit_flip_changes_the_sum),
        cmocka_unit_test(test_seed_binds_transfer_and_chunk),
        cmocka_unit_test(test_trailer_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
