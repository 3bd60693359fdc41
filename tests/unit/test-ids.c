/*
 * test-ids.c — daemon/base/ids.c: transfer ids and endpoint generations.
 *
 * What the quarantine and the peers' replay windows rely on: a boot's
 * epoch in the high half of every value (never 0), no value handed out
 * twice within a boot (up to the 2^32 the header promises), the two kinds
 * counted apart, and two boots' values apart. What the ranks must not
 * learn: transfer ids that count, one after the other, how many transfers
 * came between two of theirs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "rng.h"

#include "ids.h"

#define SEED(epoch, k0, k1) ((const uint64_t[IDS_SEED_WORDS]){ (epoch), (k0), (k1) })

static void test_epoch_in_high_half(void **state)
{
    struct ids ids;

    /* Only 32 random bits count: the rest of the word is dropped. */
    ids_init(&ids, SEED(UINT64_C(0xdeadbeef12345678), 1, 2));
    assert_int_equal(ids.epoch, 0x12345678);
    uint64_t x = ids_new_xfer(&ids), g = ids_new_generation(&ids);
    assert_int_equal(x >> 32, 0x12345678);
    assert_int_equal(g >> 32, 0x12345678);
    /* Generations count from 1. */
    assert_int_equal(g & 0xffffffffu, 1);
    /* An epoch of 0 would let an id be 0, which is no transfer. */
    ids_init(&ids, SEED(UINT64_C(0xffffffff00000000), 1, 2));
    assert_int_equal(ids.epoch, 1);
}

/* The two kinds count on their own: taking one never moves the other. */
static void test_kinds_count_apart(void **state)
{
    struct ids mixed, alone;
    uint64_t want[11];

    ids_init(&alone, SEED(7, 3, 4));
    for (int i = 0; i < 11; i++)
        want[i] = ids_new_xfer(&alone);
    ids_init(&mixed, SEED(7, 3, 4));
    for (int i = 0; i < 10; i++)
        assert_int_equal(ids_new_xfer(&mixed), want[i]);
    assert_int_equal(ids_new_generation(&mixed), (UINT64_C(7) << 32) | 1);
    assert_int_equal(ids_new_xfer(&mixed), want[10]);
    assert_int_equal(ids_new_generation(&mixed), (UINT64_C(7) << 32) | 2);
}

/* A second init is a new boot: counters start over under the new epoch and key. */
static void test_reinit_is_a_new_boot(void **state)
{
    struct ids ids;

    ids_init(&ids, SEED(1, 5, 6));
    uint64_t first = ids_new_xfer(&ids);
    for (int i = 0; i < 5; i++)
        ids_new_xfer(&ids);
    ids_init(&ids, SEED(1, 5, 6));
    assert_int_equal(ids.next_xfer, 0);
    assert_int_equal(ids.next_gen, 0);
    assert_int_equal(ids_new_xfer(&ids), first);
    ids_init(&ids, SEED(2, 5, 6));
    assert_int_equal(ids_new_xfer(&ids), (UINT64_C(2) << 32) | (first & 0xffffffffu));
    /* Another key, another order. */
    ids_init(&ids, SEED(1, 5, 7));
    assert_int_not_equal(ids_new_xfer(&ids), first);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* No value twice, within a kind, over two boots with random epochs and both kinds mixed. */
static void assert_all_distinct(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_u64);
    for (size_t i = 1; i < n; i++)
        if (v[i] == v[i - 1])
            fail_msg("0x%016llx handed out twice", (unsigned long long)v[i]);
}

static void test_distinct_across_boots(void **state)
{
    enum { PER_BOOT = 20000 };
    uint64_t *xfers = malloc(2 * PER_BOOT * sizeof(*xfers));
    uint64_t *gens = malloc(2 * PER_BOOT * sizeof(*gens));
    size_t nx = 0, ng = 0;
    uint64_t epochs[2];

    assert_non_null(xfers);
    assert_non_null(gens);
    rng_seed(26);
    for (int boot = 0; boot < 2; boot++) {
        struct ids ids;
        uint64_t seed[IDS_SEED_WORDS] = { rng_next(), rng_next(), rng_next() };
        ids_init(&ids, seed);
        epochs[boot] = ids.epoch;
        for (int i = 0; i < PER_BOOT; i++) {
            uint64_t v = rng_next() & 1 ? (xfers[nx++] = ids_new_xfer(&ids))
                                        : (gens[ng++] = ids_new_generation(&ids));
            /* Whatever the mix, every value carries its boot's epoch. */
            assert_int_equal(v >> 32, epochs[boot]);
        }
    }
    assert_int_not_equal(epochs[0], epochs[1]);
    assert_true(nx > PER_BOOT / 2 && ng > PER_BOOT / 2);
    assert_all_distinct(xfers, nx);
    assert_all_distinct(gens, ng);
    free(xfers);
    free(gens);
}

/*
 * One boot's ids one after the other: none twice (the permutation), and
 * their low halves no count. Of 2^17 ids in a row, a counter's would all
 * lie within 2^17 of each other and step by one; a random draw of 32 bits
 * steps by one between neighbours about never, and spreads over the range.
 */
static void test_xfer_ids_do_not_count(void **state)
{
    enum { N = 1 << 17 };
    uint64_t *v = malloc(N * sizeof(*v));
    struct ids ids;
    unsigned steps_of_one = 0;
    uint32_t lo = UINT32_MAX, hi = 0;

    assert_non_null(v);
    ids_init(&ids, SEED(0x51, UINT64_C(0x0123456789abcdef), UINT64_C(0xfedcba9876543210)));
    for (size_t i = 0; i < N; i++) {
        v[i] = ids_new_xfer(&ids);
        uint32_t low = (uint32_t)v[i];
        steps_of_one += i > 0 && low == (uint32_t)v[i - 1] + 1;
        lo = low < lo ? low : lo;
        hi = low > hi ? low : hi;
    }
    assert_true(steps_of_one < 4);
    assert_true(hi - lo > UINT32_C(0xf0000000));
    assert_all_distinct(v, N);
    free(v);
}

/*
 * The bound the header states: the counter half wraps after 2^32 values,
 * and the first value comes back only after that. What a boot may use, no
 * more.
 */
static void test_wrap_after_2_32(void **state)
{
    struct ids ids;

    ids_init(&ids, SEED(9, 1, 2));
    uint64_t first = ids_new_xfer(&ids), second = ids_new_xfer(&ids);
    ids.next_xfer = UINT64_C(0xfffffffe);
    assert_int_equal(ids_new_xfer(&ids) >> 32, 9);      /* the 2^32 - 1th */
    assert_int_equal(ids_new_xfer(&ids) >> 32, 9);      /* the 2^32th: counter 0 */
    /* The epoch never changes: wrapping cannot leak into another boot's values. */
    assert_int_equal(ids_new_xfer(&ids), first);
    assert_int_equal(ids_new_xfer(&ids), second);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_epoch_in_high_half),
        cmocka_unit_test(test_kinds_count_apart),
        cmocka_unit_test(test_reinit_is_a_new_boot),
        cmocka_unit_test(test_distinct_across_boots),
        cmocka_unit_test(test_xfer_ids_do_not_count),
        cmocka_unit_test(test_wrap_after_2_32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
