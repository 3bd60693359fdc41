/*
 * test-stats.c — daemon/base/stats.c: the histograms of how transfers ended.
 *
 * A value lands in the first bucket whose bound holds it (a bound is
 * inclusive, as Prometheus's le), one past the last bound only in the
 * count; the sum adds every value; planning is skipped for a receiver's
 * transfer (plan_seconds < 0); roles and statuses out of range are
 * counted nowhere or in the last status slot, never outside the arrays.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "stats.h"

static uint64_t bucket_of(const struct stats_hist *h, enum stats_kind kind, double v)
{
    size_t n;
    const double *bounds = stats_bounds(kind, &n);
    for (size_t i = 0; i < n; i++)
        if (v <= bounds[i])
            return h->buckets[i];
    return UINT64_MAX;
}

static void test_bounds_ascend(void **state)
{
    (void)state;
    for (int k = 0; k < STATS_KINDS; k++) {
        size_t n;
        const double *b = stats_bounds((enum stats_kind)k, &n);
        assert_true(n > 0 && n <= STATS_MAX_BUCKETS);
        for (size_t i = 1; i < n; i++)
            assert_true(b[i] > b[i - 1]);
    }
}

static void test_landed(void **state)
{
    static struct stats_hists h;
    size_t n;
    const double *sizes = stats_bounds(STATS_SIZE, &n);

    (void)state;
    memset(&h, 0, sizeof(h));
    stats_landed(&h, 0, 0.003, 0.0005, 4096, 1);          /* on the bound: its bucket */
    stats_landed(&h, 0, 0.003, 0.0005, 4097, 3);
    stats_landed(&h, 0, 9999.0, 0.0, sizes[n - 1] * 2, 1u << 30);   /* past every bound */
    const struct stats_hist *size = &h.hist[STATS_SIZE][0];
    assert_int_equal(size->count, 3);
    assert_int_equal(size->buckets[0], 1);
    assert_int_equal(size->buckets[1], 1);
    uint64_t in_buckets = 0;
    for (size_t i = 0; i < STATS_MAX_BUCKETS; i++)
        in_buckets += size->buckets[i];
    assert_int_equal(in_buckets, 2);                       /* the third only in count: +Inf */
    assert_true(size->sum == 4096.0 + 4097.0 + sizes[n - 1] * 2);
    assert_int_equal(bucket_of(&h.hist[STATS_DURATION][0], STATS_DURATION, 0.003), 2);
    assert_int_equal(h.hist[STATS_PLANNING][0].count, 3);
    assert_int_equal(h.hist[STATS_PIECES][0].buckets[0], 1); /* 1 in le 1, 3 in le 4, 2^30 past */
    assert_int_equal(h.hist[STATS_PIECES][0].buckets[1], 1);
    assert_int_equal(h.hist[STATS_PIECES][0].count, 3);

    /* A receiver's: no planning of its own. */
    stats_landed(&h, 1, 0.1, -1, 1, 1);
    assert_int_equal(h.hist[STATS_DURATION][1].count, 1);
    assert_int_equal(h.hist[STATS_PLANNING][1].count, 0);
    /* No such role: counted nowhere. */
    stats_landed(&h, STATS_ROLES, 0.1, 0.1, 1, 1);
    for (int r = 2; r < STATS_ROLES; r++)
        assert_int_equal(h.hist[STATS_DURATION][r].count, 0);
}

static void test_failed(void **state)
{
    static struct stats_hists h;

    (void)state;
    memset(&h, 0, sizeof(h));
    stats_failed(&h, 0, B10_ERR_DEADLINE);
    stats_failed(&h, 0, B10_ERR_DEADLINE);
    stats_failed(&h, 3, B10_ERR_CANCELLED);
    assert_int_equal(h.failed[0][B10_ERR_DEADLINE], 2);
    assert_int_equal(h.failed[3][B10_ERR_CANCELLED], 1);
    stats_failed(&h, 1, (b10_status_t)100000);             /* no such status: the last slot */
    assert_int_equal(h.failed[1][STATS_MAX_STATUS - 1], 1);
    stats_failed(&h, STATS_ROLES + 7, B10_ERR_DEADLINE);   /* no such role: nowhere */
    assert_int_equal(h.failed[0][B10_ERR_DEADLINE], 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounds_ascend),
        cmocka_unit_test(test_landed),
        cmocka_unit_test(test_failed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
