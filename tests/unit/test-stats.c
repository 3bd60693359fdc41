/*
 * test-stats.c — daemon/base/stats.c: the histograms of how transfers ended.
 *
 * A value lands in the first bucket whose bound holds it (a bound is
 * inclusive, as Prometheus's le), one past the last bound only in the
 * count; the sum adds every value; planning is skipped for a receiver's
 * transfer (plan_seconds < 0); roles and statuses out of range are
 * counted nowhere or in the last status slot, never outside the arrays.
 *
 * And the counters: every word of struct stats is exported once, under a
 * name of its own, with help, and the metric names the operators' dashboards
 * know come out as they were.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
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

/*
 * Each word of struct stats holds a value of its own; reading every row of the
 * table must give each value exactly once: a member the table misses, or one it
 * reads twice, fails here (and a member beside the lists fails stats.h's assert).
 */
static void test_counters_exported(void **state)
{
    static struct stats s;
    const size_t words = sizeof(s) / sizeof(uint64_t);
    uint64_t word[sizeof(s) / sizeof(uint64_t)];
    bool seen[sizeof(s) / sizeof(uint64_t)] = { false };

    (void)state;
    assert_int_equal(words, STATS_NCOUNTERS);
    for (size_t i = 0; i < words; i++)
        word[i] = 1000 + i;
    memcpy(&s, word, sizeof(s));
    for (size_t i = 0; i < STATS_NCOUNTERS; i++) {
        uint64_t v = stats_value(&s, &stats_counters[i]);
        assert_true(v >= 1000 && v < 1000 + words);
        assert_false(seen[v - 1000]);
        seen[v - 1000] = true;
    }
    for (size_t i = 0; i < words; i++)
        assert_true(seen[i]);
    /* door.c counts through .door: the same words as the rows of its names. */
    s.door.knocks_retried = 7;
    assert_int_equal(s.knocks_retried, 7);
}

static bool metric_name_ok(const char *name)
{
    if (name[0] == '\0' || !(name[0] == '_' || (name[0] >= 'a' && name[0] <= 'z')))
        return false;
    for (const char *c = name; *c != '\0'; c++)
        if (!(*c == '_' || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9')))
            return false;
    return true;
}

static void test_counter_names(void **state)
{
    char names[STATS_NCOUNTERS][128];
    size_t unnamed = 0;

    (void)state;
    for (size_t i = 0; i < STATS_NCOUNTERS; i++) {
        const struct stats_counter *c = &stats_counters[i];
        assert_true(c->help[0] != '\0');
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(c->name, stats_counters[j].name);
        if (!stats_metric_name(c, names[i], sizeof(names[i]))) {
            assert_string_equal(c->name, "cpu_us");     /* process_cpu_seconds_total */
            names[i][0] = '\0';
            unnamed++;
            continue;
        }
        assert_true(metric_name_ok(names[i]));
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(names[i], names[j]);
    }
    assert_int_equal(unnamed, 1);
    /* The names are an interface: the rule as dashboards and tests/ops know it. */
    assert_string_equal(stats_counters[0].name, "xfers_submitted");
    assert_string_equal(names[0], "b10d_transfers_submitted_total");
    for (size_t i = 0; i < STATS_NCOUNTERS; i++)
        if (strcmp(stats_counters[i].name, "door_let_in") == 0)
            assert_string_equal(names[i], "b10d_door_let_in_total");
        else if (strcmp(stats_counters[i].name, "bytes_landed") == 0)
            assert_string_equal(names[i], "b10d_bytes_landed_total");
    char small[8];
    assert_false(stats_metric_name(&stats_counters[0], small, sizeof(small)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounds_ascend),
        cmocka_unit_test(test_landed),
        cmocka_unit_test(test_failed),
        cmocka_unit_test(test_counters_exported),
        cmocka_unit_test(test_counter_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
