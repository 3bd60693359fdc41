/*
 * test-checksum.c — daemon/checksum.c: the checksum every DATA chunk carries.
 *
 * Known answers first: XXH3-64 with seed 0 of the prefixes of a published
 * xorshift sequence, at lengths that cross every one of the algorithm's
 * length classes (0, 1-3, 4-8, 9-16, 17-128, 129-240, and the long path
 * with its stripes and blocks), so that the library linked is the standard
 * algorithm and not something that merely hashes. Then what b10d relies on:
 * single-bit flips anywhere in a 1 MiB chunk change the sum; the seed binds a
 * chunk to its transfer and index; the trailer round-trips, byte order
 * fixed, and says when no sum was put there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

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
    for (size_t i = 0; i < sizeof(kat) / sizeof(kat[0]); i++)
        assert_int_equal(checksum(a, kat[i].len, 0), kat[i].sum);
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

static void test_trailer_round_trip(void **state)
{
    (void)state;
    uint8_t t[CHECKSUM_TRAILER_BYTES + 2];
    uint64_t sum = 0;
    memset(t, 0xee, sizeof(t));
    checksum_trailer_put(t + 1, 0x0102030405060708ull, true);
    /* Little-endian, then the flags; not a byte outside. */
    static const uint8_t want[CHECKSUM_TRAILER_BYTES] = { 8, 7, 6, 5, 4, 3, 2, 1,
                                                          CHECKSUM_PRESENT, 0, 0, 0, 0, 0, 0, 0 };
    assert_memory_equal(t + 1, want, sizeof(want));
    assert_int_equal(t[0], 0xee);
    assert_int_equal(t[CHECKSUM_TRAILER_BYTES + 1], 0xee);
    assert_true(checksum_trailer_get(t + 1, &sum));
    assert_int_equal(sum, 0x0102030405060708ull);

    checksum_trailer_put(t + 1, 0x99, false);
    assert_false(checksum_trailer_get(t + 1, &sum));
    /* Unknown flag bits do not make a sum present. */
    t[1 + 8] = 0x02;
    assert_false(checksum_trailer_get(t + 1, &sum));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_answers),
        cmocka_unit_test(test_every_bit_flip_changes_the_sum),
        cmocka_unit_test(test_seed_binds_transfer_and_chunk),
        cmocka_unit_test(test_trailer_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
