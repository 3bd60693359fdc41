/*
 * test-ids.c — daemon/base/ids.c: transfer ids and endpoint generations.
 *
 * What the quarantine and the peers' replay windows rely on: a boot's
 * epoch in the high half of every value, a counter in the low half, no
 * value handed out twice within a boot (up to the 2^32 the header
 * promises), the two kinds counted apart, and two boots' values apart.
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

static void test_epoch_in_high_half(void **state)
{
    struct ids ids;

    /* Only 32 random bits count: the rest of the word is dropped. */
    ids_init(&ids, UINT64_C(0xdeadbeef12345678));
    assert_int_equal(ids.epoch, 0x12345678);
    uint64_t x = ids_new_xfer(&ids), g = ids_new_generation(&ids);
    assert_int_equal(x >> 32, 0x12345678);
    assert_int_equal(g >> 32, 0x12345678);
    /* Counting starts at 1: the bare epoch comes only at the wrap (test_wrap_after_2_32). */
    assert_int_equal(x & 0xffffffffu, 1);
    assert_int_equal(g & 0xffffffffu, 1);
}

/* The two kinds count on their own: taking one never moves the other. */
static void test_kinds_count_apart(void **state)
{
    struct ids ids;

    ids_init(&ids, 7);
    for (uint64_t i = 1; i <= 10; i++)
        assert_int_equal(ids_new_xfer(&ids), (UINT64_C(7) << 32) | i);
    assert_int_equal(ids_new_generation(&ids), (UINT64_C(7) << 32) | 1);
    assert_int_equal(ids_new_xfer(&ids), (UINT64_C(7) << 32) | 11);
    assert_int_equal(ids_new_generation(&ids), (UINT64_C(7) << 32) | 2);
}

/* A second init is a new boot: counters start over under the new epoch. */
static void test_reinit_is_a_new_boot(void **state)
{
    struct ids ids;

    ids_init(&ids, 1);
    for (int i = 0; i < 5; i++)
        ids_new_xfer(&ids);
    ids_init(&ids, 2);
    assert_int_equal(ids.next_xfer, 0);
    assert_int_equal(ids.next_gen, 0);
    assert_int_equal(ids_new_xfer(&ids), (UINT64_C(2) << 32) | 1);
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
        ids_init(&ids, rng_next());
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
 * The bound the header states: the counter half wraps after 2^32 values
 * (the 2^32-th has a zero low half), and the first value comes back only
 * after that. What a boot may use, no more.
 */
static void test_wrap_after_2_32(void **state)
{
    struct ids ids;

    ids_init(&ids, 9);
    uint64_t first = ids_new_xfer(&ids);
    ids.next_xfer = UINT64_C(0xfffffffe);
    assert_int_equal(ids_new_xfer(&ids), (UINT64_C(9) << 32) | 0xffffffffu);
    assert_int_equal(ids_new_xfer(&ids), UINT64_C(9) << 32);
    /* The epoch never changes: wrapping cannot leak into another boot's values. */
    assert_int_equal(ids_new_xfer(&ids), first);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_epoch_in_high_half),
        cmocka_unit_test(test_kinds_count_apart),
        cmocka_unit_test(test_reinit_is_a_new_boot),
        cmocka_unit_test(test_distinct_across_boots),
        cmocka_unit_test(test_wrap_after_2_32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
