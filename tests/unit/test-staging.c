/*
 * test-staging.c — daemon/mem/staging.c: the pool of registered host views.
 *
 * Real components, no mocks: a libuv loop and a real UCX wire (self and tcp
 * on loopback) register every view, as in the daemon. Each test makes its own
 * pool and returns every view before destroying it, so ASan's leak check
 * sees any view the pool loses.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "b10d.h"
#include "staging.h"
#include "wire.h"
#include "wireloop.h"

#define VIEW_BYTES (64u << 10)

static uv_loop_t test_loop;
static struct b10d test_d;

/*
 * The pool of the running test. A test that fails halfway leaves views out,
 * still registered; UCX would abort on them at teardown, so the wire is then
 * left alone (the failure is already reported).
 */
static struct staging *current;
static bool views_left_out;

static int group_setup(void **state)
{
    return wireloop_start(&test_d, &test_loop, "test-staging");
}

static int group_teardown(void **state)
{
    return views_left_out ? 0 : wireloop_stop(&test_d, &test_loop);
}

static struct staging *pool(uint32_t views)
{
    struct staging *s = NULL;
    assert_int_equal(staging_create(&test_d, (uint64_t)views * VIEW_BYTES, VIEW_BYTES, &s), 0);
    assert_non_null(s);
    current = s;
    assert_int_equal(staging_views(s), views);
    assert_int_equal(staging_free_views(s), views);
    assert_int_equal(staging_quarantined_views(s), 0);
    assert_int_equal(staging_view_bytes(s), VIEW_BYTES);
    return s;
}

/* Destroy a pool whose views are all back: the count proves none was lost. */
static void pool_destroy(struct staging *s)
{
    assert_ptr_equal(s, current);
    assert_int_equal(staging_free_views(s), staging_views(s));
    assert_int_equal(staging_quarantined_views(s), 0);
    current = NULL;
    staging_destroy(s);
}

static int test_teardown(void **state)
{
    if (current != NULL) {
        views_left_out = true;
        current = NULL;
    }
    return 0;
}

/* Take n views of one use; all must come. */
static void take(struct staging *s, enum view_use use, struct view **v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        v[i] = staging_get(s, use);
        assert_non_null(v[i]);
        assert_int_equal(v[i]->use, use);
    }
}

static void put_all(struct staging *s, struct view **v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        staging_put(s, v[i]);
}

/* ---------------------------------------------------------------- basics */

static void test_create_get_put(void **state)
{
    struct staging *s = pool(8);
    struct view *v[8];
    long page = sysconf(_SC_PAGESIZE);

    take(s, VIEW_SEND, v, 8);
    assert_int_equal(staging_free_views(s), 0);
    assert_null(staging_get(s, VIEW_SEND));
    assert_null(staging_get(s, VIEW_RECV));
    for (int i = 0; i < 8; i++) {
        assert_non_null(v[i]->base);
        assert_int_equal((uintptr_t)v[i]->base % (uintptr_t)page, 0);
        assert_int_equal(v[i]->bytes, VIEW_BYTES);
        assert_non_null(v[i]->memh);   /* registered with UCX */
        assert_int_equal(v[i]->holds, 0);
        /* Each view is its own buffer, writable end to end. */
        memset(v[i]->base, i + 1, VIEW_BYTES);
        for (int j = 0; j < i; j++) {
            assert_int_not_equal(v[i]->id, v[j]->id);
            assert_true(v[i]->base + VIEW_BYTES <= v[j]->base ||
                        v[j]->base + VIEW_BYTES <= v[i]->base);
        }
    }
    for (int i = 0; i < 8; i++)
        assert_int_equal(v[i]->base[VIEW_BYTES - 1], i + 1);

    staging_put(s, v[3]);
    assert_int_equal(v[3]->use, VIEW_FREE);
    assert_int_equal(staging_free_views(s), 1);
    struct view *again = staging_get(s, VIEW_SEND);
    assert_ptr_equal(again, v[3]);
    put_all(s, v, 8);
    assert_int_equal(staging_free_views(s), 8);
    assert_int_equal(staging_views(s), 8);
    pool_destroy(s);
    staging_destroy(NULL);
}

/* The most recently freed view comes back first: a transfer keeps few views warm. */
static void test_reuse_is_lifo(void **state)
{
    struct staging *s = pool(8);
    struct view *v[8];

    take(s, VIEW_SEND, v, 8);
    put_all(s, v, 8);
    struct view *a = staging_get(s, VIEW_SEND);
    struct view *b = staging_get(s, VIEW_RECV);
    assert_ptr_equal(a, v[7]);
    assert_ptr_equal(b, v[6]);
    staging_put(s, b);
    staging_put(s, a);
    /* a went back last: the next get takes it, then b, then the older ones. */
    assert_ptr_equal(staging_get(s, VIEW_SEND), a);
    assert_ptr_equal(staging_get(s, VIEW_SEND), b);
    assert_ptr_equal(staging_get(s, VIEW_SEND), v[5]);
    staging_put(s, v[5]);
    staging_put(s, b);
    staging_put(s, a);
    pool_destroy(s);
}

static void test_receive_cap(void **state)
{
    struct staging *s = pool(8);
    struct view *r[4], *w[4];

    /* At most half the views for receives, whatever is free. */
    take(s, VIEW_RECV, r, 4);
    assert_int_equal(staging_free_views(s), 4);
    assert_null(staging_get(s, VIEW_RECV));
    assert_int_equal(staging_free_views(s), 4);
    /* The other half still serves sends. */
    take(s, VIEW_SEND, w, 4);
    assert_null(staging_get(s, VIEW_SEND));

    /* A send view coming back does not lift the receive cap. */
    staging_put(s, w[0]);
    assert_null(staging_get(s, VIEW_RECV));
    w[0] = staging_get(s, VIEW_SEND);
    assert_non_null(w[0]);
    /* A receive view coming back does. */
    staging_put(s, r[2]);
    r[2] = staging_get(s, VIEW_RECV);
    assert_non_null(r[2]);
    assert_int_equal(r[2]->use, VIEW_RECV);
    put_all(s, w, 4);
    /* With sends gone the cap still holds at 4. */
    assert_null(staging_get(s, VIEW_RECV));
    put_all(s, r, 4);
    assert_int_equal(staging_free_views(s), 8);

    /* A receive view put back frees its slot even if the view then serves a send. */
    take(s, VIEW_RECV, r, 4);
    staging_put(s, r[0]);
    r[0] = staging_get(s, VIEW_SEND);
    assert_non_null(r[0]);
    struct view *extra = staging_get(s, VIEW_RECV);
    assert_non_null(extra);
    assert_null(staging_get(s, VIEW_RECV));
    staging_put(s, extra);
    put_all(s, r, 4);
    pool_destroy(s);

    /* Odd pools round the cap down: 5 views, 2 receives. */
    s = pool(5);
    take(s, VIEW_RECV, r, 2);
    assert_null(staging_get(s, VIEW_RECV));
    assert_int_equal(staging_free_views(s), 3);
    put_all(s, r, 2);
    pool_destroy(s);
}

/*
 * Views gathered ahead of READY: at most a quarter of the pool, so that with
 * receives at their half, running sends still have a quarter. READY promotes
 * one to a send's, which frees its place in the quarter; a quarantined one
 * frees it too.
 */
static void test_ahead_cap(void **state)
{
    struct staging *s = pool(8);
    struct view *a[2], *r[4], *w[2];

    take(s, VIEW_AHEAD, a, 2);
    assert_null(staging_get(s, VIEW_AHEAD));
    take(s, VIEW_RECV, r, 4);
    /* Ahead and receives at their caps: the last quarter serves sends. */
    take(s, VIEW_SEND, w, 2);
    assert_null(staging_get(s, VIEW_SEND));
    put_all(s, w, 2);

    /* READY: a view gathered ahead is a send's now, and its place in the quarter free. */
    staging_promote(s, a[0]);
    assert_int_equal(a[0]->use, VIEW_SEND);
    struct view *b = staging_get(s, VIEW_AHEAD);
    assert_non_null(b);
    assert_null(staging_get(s, VIEW_AHEAD));
    /* Promoting a send's view changes nothing. */
    staging_promote(s, a[0]);
    assert_int_equal(a[0]->use, VIEW_SEND);
    assert_null(staging_get(s, VIEW_AHEAD));
    /* A send's view coming back does not free the quarter; an ahead view does. */
    staging_put(s, a[0]);
    assert_null(staging_get(s, VIEW_AHEAD));
    staging_put(s, b);
    a[0] = staging_get(s, VIEW_AHEAD);
    assert_non_null(a[0]);
    put_all(s, a, 2);
    put_all(s, r, 4);
    pool_destroy(s);

    /* A pool of fewer than 4 views gathers nothing ahead. */
    s = pool(3);
    assert_null(staging_get(s, VIEW_AHEAD));
    w[0] = staging_get(s, VIEW_SEND);
    assert_non_null(w[0]);
    staging_put(s, w[0]);
    pool_destroy(s);
}

/* ---------------------------------------------------------------- waiters */

struct test_waiter {
    struct staging_waiter w;
    struct staging *s;
    int name;
    enum view_use want;
    bool take;          /* take a view when woken */
    bool rewait;        /* queue again when woken without getting one */
    struct view *got;
    int wakes;
};

static int wake_log[64];
static int nwake;

static void test_wake(struct staging_waiter *w)
{
    struct test_waiter *t = (struct test_waiter *)((char *)w - offsetof(struct test_waiter, w));
    t->wakes++;
    assert_true(t->wakes < 100);   /* a waiter re-woken without end would trip this */
    if (nwake < 64)
        wake_log[nwake++] = t->name;
    if (t->take && t->got == NULL)
        t->got = staging_get(t->s, t->want);
    if (t->got == NULL && t->rewait)
        staging_wait(t->s, &t->w);
}

static void waiter_init(struct test_waiter *t, struct staging *s, int name, enum view_use want,
                        bool take_view, bool rewait)
{
    memset(t, 0, sizeof(*t));
    t->w.wake = test_wake;
    t->s = s;
    t->name = name;
    t->want = want;
    t->take = take_view;
    t->rewait = rewait;
}

static void test_waiters_fifo(void **state)
{
    struct staging *s = pool(4);
    struct view *v[4];
    struct test_waiter t[3];

    take(s, VIEW_SEND, v, 4);
    for (int i = 0; i < 3; i++) {
        waiter_init(&t[i], s, i + 1, VIEW_SEND, true, false);
        staging_wait(s, &t[i].w);
    }
    nwake = 0;

    /* One view back: the first waiter, and only it, is woken and takes it. */
    staging_put(s, v[0]);
    assert_int_equal(nwake, 1);
    assert_int_equal(wake_log[0], 1);
    assert_ptr_equal(t[0].got, v[0]);
    assert_int_equal(staging_free_views(s), 0);
    assert_int_equal(t[1].wakes, 0);

    staging_put(s, v[1]);
    staging_put(s, v[2]);
    assert_int_equal(nwake, 3);
    assert_int_equal(wake_log[1], 2);
    assert_int_equal(wake_log[2], 3);
    assert_ptr_equal(t[1].got, v[1]);
    assert_ptr_equal(t[2].got, v[2]);

    /* Nobody is waiting now: the next view simply returns to the pool. */
    staging_put(s, v[3]);
    assert_int_equal(nwake, 3);
    assert_int_equal(staging_free_views(s), 1);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(t[i].wakes, 1);
        staging_put(s, t[i].got);
    }
    assert_int_equal(staging_free_views(s), 4);
    pool_destroy(s);
}

static void test_waiters_that_do_not_take(void **state)
{
    struct staging *s = pool(2);
    struct view *v[2];
    struct test_waiter t[3];

    take(s, VIEW_SEND, v, 2);
    /* The first two only look; the third takes. All three hear of one free view, in order. */
    waiter_init(&t[0], s, 1, VIEW_SEND, false, false);
    waiter_init(&t[1], s, 2, VIEW_SEND, false, false);
    waiter_init(&t[2], s, 3, VIEW_SEND, true, false);
    for (int i = 0; i < 3; i++)
        staging_wait(s, &t[i].w);
    nwake = 0;
    staging_put(s, v[0]);
    assert_int_equal(nwake, 3);
    assert_int_equal(wake_log[0], 1);
    assert_int_equal(wake_log[1], 2);
    assert_int_equal(wake_log[2], 3);
    assert_ptr_equal(t[2].got, v[0]);
    staging_put(s, t[2].got);
    staging_put(s, v[1]);
    assert_int_equal(nwake, 3);
    pool_destroy(s);
}

static void test_rewaiting_waiter_does_not_loop(void **state)
{
    struct staging *s = pool(4);   /* receive cap 2 */
    struct view *r[2], *w[2];
    struct test_waiter t[2];

    take(s, VIEW_RECV, r, 2);
    take(s, VIEW_SEND, w, 2);
    /* Two receivers blocked by the cap; each re-waits when woken in vain. */
    waiter_init(&t[0], s, 1, VIEW_RECV, true, true);
    waiter_init(&t[1], s, 2, VIEW_RECV, true, true);
    staging_wait(s, &t[0].w);
    staging_wait(s, &t[1].w);
    nwake = 0;

    /* A send view comes back: each waiter gets exactly one chance, in order, and stays queued. */
    staging_put(s, w[0]);
    assert_int_equal(t[0].wakes, 1);
    assert_int_equal(t[1].wakes, 1);
    assert_null(t[0].got);
    assert_null(t[1].got);
    assert_int_equal(nwake, 2);
    assert_int_equal(wake_log[0], 1);
    assert_int_equal(wake_log[1], 2);
    assert_int_equal(staging_free_views(s), 1);

    staging_put(s, w[1]);
    assert_int_equal(t[0].wakes, 2);
    assert_int_equal(t[1].wakes, 2);
    assert_int_equal(wake_log[2], 1);
    assert_int_equal(wake_log[3], 2);

    /* A receive view comes back: the first receiver takes it; the second tries and waits on. */
    staging_put(s, r[0]);
    assert_non_null(t[0].got);
    assert_int_equal(t[0].got->use, VIEW_RECV);
    assert_int_equal(t[0].wakes, 3);
    assert_int_equal(t[1].wakes, 3);
    assert_null(t[1].got);

    /* The next receive view goes to the second, still in order. */
    staging_put(s, r[1]);
    assert_int_equal(t[0].wakes, 3);
    assert_int_equal(t[1].wakes, 4);
    assert_non_null(t[1].got);

    staging_put(s, t[0].got);
    staging_put(s, t[1].got);
    assert_int_equal(t[0].wakes, 3);
    assert_int_equal(t[1].wakes, 4);
    assert_int_equal(staging_free_views(s), 4);
    pool_destroy(s);
}

static void test_unwait(void **state)
{
    struct staging *s = pool(2);
    struct view *v[2];
    struct test_waiter t[2];

    take(s, VIEW_SEND, v, 2);
    waiter_init(&t[0], s, 1, VIEW_SEND, true, false);
    waiter_init(&t[1], s, 2, VIEW_SEND, true, false);
    staging_wait(s, &t[0].w);
    staging_wait(s, &t[1].w);
    /* A transfer that fails while waiting leaves the queue. */
    staging_unwait(&t[0].w);
    nwake = 0;
    staging_put(s, v[0]);
    assert_int_equal(t[0].wakes, 0);
    assert_int_equal(t[1].wakes, 1);
    assert_ptr_equal(t[1].got, v[0]);
    /* Unwaiting one that was already woken is harmless. */
    staging_unwait(&t[1].w);
    staging_unwait(&t[0].w);
    staging_put(s, v[1]);
    assert_int_equal(nwake, 1);
    staging_put(s, t[1].got);
    assert_int_equal(staging_free_views(s), 2);
    pool_destroy(s);
}

/* ---------------------------------------------------------------- quarantine */

static void test_quarantine_and_drop(void **state)
{
    struct staging *s = pool(4);
    struct view *v[4];

    take(s, VIEW_RECV, v, 2);
    take(s, VIEW_SEND, v + 2, 2);
    uint32_t old_id = v[0]->id;

    /* A failed transfer's view leaves circulation. */
    staging_quarantine(s, v[0]);
    assert_int_equal(v[0]->use, VIEW_QUARANTINED);
    assert_int_equal(staging_quarantined_views(s), 1);
    assert_int_equal(staging_views(s), 4);
    assert_int_equal(staging_free_views(s), 0);
    /* It no longer counts as a receive, but it is not free either. */
    staging_put(s, v[2]);
    struct view *r = staging_get(s, VIEW_RECV);
    assert_non_null(r);
    assert_ptr_equal(r, v[2]);
    assert_int_not_equal(r->id, old_id);

    /* A waiter is woken by the fresh view the drop brings. */
    struct test_waiter t;
    waiter_init(&t, s, 1, VIEW_SEND, true, false);
    staging_wait(s, &t.w);
    staging_drop(s, v[0]);
    assert_int_equal(staging_quarantined_views(s), 0);
    assert_int_equal(staging_views(s), 4);
    assert_int_equal(t.wakes, 1);
    assert_non_null(t.got);
    /* A fresh view: a new id, registered, writable. */
    assert_int_not_equal(t.got->id, old_id);
    for (int i = 1; i < 4; i++)
        assert_int_not_equal(t.got->id, v[i]->id);
    assert_non_null(t.got->memh);
    assert_int_equal(t.got->bytes, VIEW_BYTES);
    memset(t.got->base, 0xee, VIEW_BYTES);

    staging_put(s, t.got);
    staging_put(s, v[1]);
    staging_put(s, r);
    staging_put(s, v[3]);
    assert_int_equal(staging_free_views(s), 4);
    pool_destroy(s);
}

static void test_drop_refills_pool(void **state)
{
    struct staging *s = pool(3);
    struct view *v[3];
    uint32_t ids[3];

    take(s, VIEW_SEND, v, 3);
    for (int i = 0; i < 3; i++)
        ids[i] = v[i]->id;
    /* Quarantine and drop every view, twice over: the pool stays whole with new views. */
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 3; i++)
            staging_quarantine(s, v[i]);
        assert_int_equal(staging_quarantined_views(s), 3);
        assert_int_equal(staging_free_views(s), 0);
        for (int i = 0; i < 3; i++)
            staging_drop(s, v[i]);
        assert_int_equal(staging_quarantined_views(s), 0);
        assert_int_equal(staging_views(s), 3);
        assert_int_equal(staging_free_views(s), 3);
        take(s, VIEW_SEND, v, 3);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                assert_int_not_equal(v[i]->id, ids[j]);
        for (int i = 0; i < 3; i++)
            ids[i] = v[i]->id;
    }
    put_all(s, v, 3);
    pool_destroy(s);
}

/*
 * Quarantining a receive view frees a receive slot; a receiver that waits on
 * the cap while views sit free should hear of it (staging.h: "wake() runs once
 * one may be free"); without it a receiver would wait until some other view
 * is put back or the quarantine expires (120 s by default).
 */
static void test_quarantine_wakes_receive_waiter(void **state)
{
    struct staging *s = pool(4);   /* receive cap 2 */
    struct view *r[2];
    struct test_waiter t;

    take(s, VIEW_RECV, r, 2);
    waiter_init(&t, s, 1, VIEW_RECV, true, true);
    staging_wait(s, &t.w);
    assert_null(staging_get(s, VIEW_RECV));
    assert_int_equal(staging_free_views(s), 2);
    staging_quarantine(s, r[0]);
    /* The slot is free and two views are: the waiter may proceed. */
    int wakes = t.wakes;
    bool got = t.got != NULL;

    /* Clean up first, so that a failure here is a plain test failure. */
    staging_unwait(&t.w);
    if (t.got != NULL)
        staging_put(s, t.got);
    staging_drop(s, r[0]);
    staging_put(s, r[1]);
    pool_destroy(s);
    assert_int_equal(wakes, 1);
    assert_true(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_create_get_put, test_teardown),
        cmocka_unit_test_teardown(test_reuse_is_lifo, test_teardown),
        cmocka_unit_test_teardown(test_receive_cap, test_teardown),
        cmocka_unit_test_teardown(test_ahead_cap, test_teardown),
        cmocka_unit_test_teardown(test_waiters_fifo, test_teardown),
        cmocka_unit_test_teardown(test_waiters_that_do_not_take, test_teardown),
        cmocka_unit_test_teardown(test_rewaiting_waiter_does_not_loop, test_teardown),
        cmocka_unit_test_teardown(test_unwait, test_teardown),
        cmocka_unit_test_teardown(test_quarantine_and_drop, test_teardown),
        cmocka_unit_test_teardown(test_drop_refills_pool, test_teardown),
        cmocka_unit_test_teardown(test_quarantine_wakes_receive_waiter, test_teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
