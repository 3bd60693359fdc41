/*
 * test-pace.c — daemon/base/pace.c: one driver call a piece while that keeps
 * up, batched calls while it does not.
 *
 * The clock is the test's: each case feeds pace_note submissions of known
 * cost at known times, as a feed thread would, and reads the mode the next
 * submission gets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "pace.h"

#define US 1000ull
#define MS (1000ull * US)

/*
 * Submissions of n pieces every `every` ns for `span` ns from *now: singly at
 * `cost` ns a piece while the pace says single, batched at a third of it.
 */
static void feed(struct pace *p, uint64_t *now, size_t n, uint64_t every, uint64_t cost,
                 uint64_t span)
{
    for (uint64_t end = *now + span; *now < end; *now += every) {
        bool batched = pace_batch(p);
        uint64_t took = n * (batched ? cost / 3 : cost);
        pace_note(p, batched, n, *now, *now + took);
    }
}

/* A trickle (a fifth of what single calls could take) stays single. */
static void test_trickle_stays_single(void **state)
{
    struct pace p;
    uint64_t now = 1 * MS;
    pace_init(&p);
    assert_false(pace_batch(&p));
    feed(&p, &now, 128, 1 * MS, 1500, 50 * MS);     /* 128 x 1.5 us = 0.19 ms a ms */
    assert_false(pace_batch(&p));
    assert_int_equal(p.switches, 0);
    assert_true(p.piece_ns > 1400 && p.piece_ns < 1600);
}

/*
 * Pieces coming faster than single calls can take them: the thread is busy
 * all of a window, and the next submission is batched. It stays batched
 * while the pieces keep coming that fast.
 */
static void test_saturated_single_calls_batch(void **state)
{
    struct pace p;
    uint64_t now = 1 * MS;
    pace_init(&p);
    /* Back to back: each submission starts as the last ends (384 us of 128 x 3 us). */
    for (int i = 0; i < 6; i++) {
        bool batched = pace_batch(&p);
        uint64_t took = 128 * (batched ? 1000 : 3000);
        pace_note(&p, batched, 128, now, now + took);
        now += took;
    }
    assert_true(pace_batch(&p));
    assert_int_equal(p.switches, 1);
    /* Demand at 1.2 x what single calls could take: batched throughout. */
    feed(&p, &now, 128, 320 * US, 3000, 50 * MS);
    assert_true(pace_batch(&p));
    assert_int_equal(p.switches, 1);
}

/* Batched, and the demand falls to a third of what single calls take: single again. */
static void test_falling_demand_goes_single(void **state)
{
    struct pace p;
    uint64_t now = 1 * MS;
    pace_init(&p);
    feed(&p, &now, 128, 300 * US, 3000, 10 * MS);   /* 1.28 x: batched */
    assert_true(pace_batch(&p));
    feed(&p, &now, 128, 1152 * US, 3000, 10 * MS);  /* 0.33 x */
    assert_false(pace_batch(&p));
    assert_int_equal(p.switches, 2);
}

/*
 * Between the two thresholds the mode holds, either way: a demand at 0.65 of
 * what single calls take keeps single calls single and batches batched.
 */
static void test_between_the_thresholds_holds(void **state)
{
    struct pace p;
    uint64_t now = 1 * MS;
    pace_init(&p);
    feed(&p, &now, 128, 590 * US, 3000, 40 * MS);   /* 0.65 x */
    assert_false(pace_batch(&p));
    assert_int_equal(p.switches, 0);
    feed(&p, &now, 128, 300 * US, 3000, 10 * MS);   /* batched */
    assert_true(pace_batch(&p));
    feed(&p, &now, 128, 590 * US, 3000, 40 * MS);   /* 0.65 x again */
    assert_true(pace_batch(&p));
    assert_int_equal(p.switches, 1);
}

/*
 * A burst after a long pause: the pause counts in the window, so the burst's
 * first window may still read as light; its next window is full and batches.
 */
static void test_burst_after_a_pause(void **state)
{
    struct pace p;
    uint64_t now = 1 * MS;
    pace_init(&p);
    pace_note(&p, false, 1, now, now + 3000);
    now += 1000 * MS;
    for (int i = 0; i < 12 && !pace_batch(&p); i++) {
        pace_note(&p, false, 128, now, now + 128 * 3000);
        now += 128 * 3000;
    }
    assert_true(pace_batch(&p));
}

/* The cost of a single call is what it costs of late: the driver slowing down batches. */
static void test_cost_follows_the_driver(void **state)
{
    struct pace p;
    uint64_t now = 1 * MS;
    pace_init(&p);
    feed(&p, &now, 128, 1 * MS, 2000, 20 * MS);     /* 0.26 x */
    assert_false(pace_batch(&p));
    feed(&p, &now, 128, 1 * MS, 7000, 20 * MS);     /* the same pieces at 0.9 x */
    assert_true(pace_batch(&p));
    assert_true(p.piece_ns > 6000);
}

/*
 * A cost raised once does not hold the feed to batches: the thread preempted
 * in one single submission (20 ms for 128 pieces) batches the next window,
 * but while batching every PACE_PROBE_WINDOWS-th window sends one submission
 * singly, which measures the calls' true cost again, and the demand, a third
 * of what single calls take, goes back to single calls.
 */
static void test_probe_measures_a_stale_cost_again(void **state)
{
    struct pace p;
    uint64_t now = 1 * MS;
    pace_init(&p);
    feed(&p, &now, 128, 1152 * US, 3000, 10 * MS);  /* 0.33 x: single */
    assert_false(pace_batch(&p));
    pace_note(&p, false, 128, now, now + 20 * MS);  /* preempted */
    now += 20 * MS;
    feed(&p, &now, 128, 1152 * US, 3000, 3 * MS);
    assert_true(pace_batch(&p));
    double raised = p.piece_ns;
    assert_true(raised > 10000);
    unsigned probes = 0;
    for (int i = 0; i < 2000 && (p.batch || probes == 0); i++) {
        bool batched = pace_batch(&p);
        probes += !batched && p.batch;
        pace_note(&p, batched, 128, now, now + 128 * (batched ? 1000 : 3000));
        now += 1152 * US;
    }
    assert_true(probes > 0);
    assert_false(p.batch);
    /* Back at single calls where their cost would keep the thread half busy: 4.5 us. */
    assert_true(p.piece_ns <= 4500 && p.piece_ns > 3000);
}

/* Submissions of no pieces (a sum alone) say nothing of the pace. */
static void test_empty_submissions_ignored(void **state)
{
    struct pace p;
    pace_init(&p);
    pace_note(&p, false, 0, 1 * MS, 50 * MS);
    assert_int_equal(p.window_start, 0);
    assert_true(p.piece_ns == 0);
    assert_false(pace_batch(&p));
    assert_true(pace_load(&p, 100 * MS) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trickle_stays_single),
        cmocka_unit_test(test_saturated_single_calls_batch),
        cmocka_unit_test(test_falling_demand_goes_single),
        cmocka_unit_test(test_between_the_thresholds_holds),
        cmocka_unit_test(test_burst_after_a_pause),
        cmocka_unit_test(test_cost_follows_the_driver),
        cmocka_unit_test(test_probe_measures_a_stale_cost_again),
        cmocka_unit_test(test_empty_submissions_ignored),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
