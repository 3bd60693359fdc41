/*
 * test-names.c — daemon/mem/names.c: an agent name is its first uid's, connected
 * or not, for the hold after its rank left; the table's bounds forget idle
 * claims, a uid's own first, and never a connected rank's; what names-file.c
 * needs: every change told, the claims walked and put back in order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "names.h"

static struct names *n;
static uint64_t clock_ms = 1;
static unsigned changes;

static uint64_t test_clock(void *arg)
{
    (void)arg;
    return clock_ms;
}

static void test_changed(void *arg)
{
    (void)arg;
    changes++;
}

static int setup(void **state)
{
    (void)state;
    n = names_create();
    clock_ms = 1;
    changes = 0;
    if (n != NULL)
        names_set_clock(n, test_clock, NULL);
    return n != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    names_destroy(n);
    n = NULL;
    return 0;
}

static void name_of(char *buf, size_t len, unsigned uid, unsigned i)
{
    snprintf(buf, len, "rank-%u-%u", uid, i);
}

static void test_first_uid_holds(void **state)
{
    uid_t holder = 0, uid = 0;
    (void)state;

    assert_int_equal(names_claim(n, "prefill-0", 1000, &holder), 0);
    assert_true(names_holder(n, "prefill-0", &uid));
    assert_int_equal(uid, 1000);
    /* Another uid: refused, told whose it is; also once the first left. */
    assert_int_equal(names_claim(n, "prefill-0", 1001, &holder), B10_ERR_PERMISSION);
    assert_int_equal(holder, 1000);
    names_release(n, "prefill-0");
    holder = 0;
    assert_int_equal(names_claim(n, "prefill-0", 1001, &holder), B10_ERR_PERMISSION);
    assert_int_equal(holder, 1000);
    /* The same uid takes it back, once: a second connection under it is refused. */
    assert_int_equal(names_claim(n, "prefill-0", 1000, &holder), 0);
    assert_int_equal(names_claim(n, "prefill-0", 1000, &holder), B10_ERR_EXISTS);
    assert_int_equal(names_count(n), 1);
    /* Root is a uid like any other here. */
    assert_int_equal(names_claim(n, "prefill-0", 0, &holder), B10_ERR_PERMISSION);
    assert_false(names_holder(n, "decode-0", &uid));
    /* A release of a name nobody holds, or twice, changes nothing. */
    names_release(n, "decode-0");
    names_release(n, "prefill-0");
    names_release(n, "prefill-0");
    assert_int_equal(names_claim(n, "prefill-0", 1000, &holder), 0);
}

static void test_bad_names(void **state)
{
    char longname[300];
    uid_t holder;
    (void)state;

    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(names_claim(n, "", 1000, &holder), B10_ERR_INVALID_ARG);
    assert_int_equal(names_claim(n, longname, 1000, &holder), B10_ERR_INVALID_ARG);
    longname[255] = '\0';
    assert_int_equal(names_claim(n, longname, 1000, &holder), 0);
    assert_int_equal(names_count(n), 1);
}

/* Past NAMES_PER_UID a uid forgets its own oldest idle claim; connected ones stay. */
static void test_per_uid_bound(void **state)
{
    char name[64];
    uid_t holder, uid;
    (void)state;

    assert_int_equal(names_claim(n, "other-users", 2000, &holder), 0);
    names_release(n, "other-users");
    for (unsigned i = 0; i < NAMES_PER_UID; i++) {
        name_of(name, sizeof(name), 1000, i);
        assert_int_equal(names_claim(n, name, 1000, &holder), 0);
    }
    /* All connected: nothing of the uid's may go, and another user's idle claim is no answer. */
    assert_int_equal(names_claim(n, "one-too-many", 1000, &holder), B10_ERR_TOO_LARGE);
    assert_true(names_holder(n, "other-users", &uid));
    /* Released in order 5, 3, 7: the first released goes first. */
    name_of(name, sizeof(name), 1000, 5);
    names_release(n, name);
    name_of(name, sizeof(name), 1000, 3);
    names_release(n, name);
    name_of(name, sizeof(name), 1000, 7);
    names_release(n, name);
    assert_int_equal(names_claim(n, "next-0", 1000, &holder), 0);
    name_of(name, sizeof(name), 1000, 5);
    assert_false(names_holder(n, name, &uid));
    name_of(name, sizeof(name), 1000, 3);
    assert_true(names_holder(n, name, &uid));
    assert_int_equal(names_claim(n, "next-1", 1000, &holder), 0);
    assert_false(names_holder(n, name, &uid));
    name_of(name, sizeof(name), 1000, 7);
    assert_true(names_holder(n, name, &uid));
    /* The other user's idle claim outlived all of that. */
    assert_true(names_holder(n, "other-users", &uid));
    assert_int_equal(uid, 2000);
    assert_int_equal(names_claim(n, "other-users", 1000, &holder), B10_ERR_PERMISSION);
    assert_int_equal(names_count(n), NAMES_PER_UID + 1);
}

/* Past NAMES_MAX the daemon forgets the oldest idle claim of anyone. */
static void test_global_bound(void **state)
{
    char name[64];
    uid_t holder, uid;
    const unsigned uids = NAMES_MAX / NAMES_PER_UID;
    (void)state;

    for (unsigned u = 0; u < uids; u++)
        for (unsigned i = 0; i < NAMES_PER_UID; i++) {
            name_of(name, sizeof(name), 100 + u, i);
            assert_int_equal(names_claim(n, name, 100 + u, &holder), 0);
        }
    assert_int_equal(names_count(n), NAMES_MAX);
    assert_int_equal(names_claim(n, "late", 5000, &holder), B10_ERR_TOO_LARGE);
    name_of(name, sizeof(name), 100 + 3, 9);
    names_release(n, name);
    assert_int_equal(names_claim(n, "late", 5000, &holder), 0);
    assert_false(names_holder(n, name, &uid));
    /* Its name is free, but the table is full of connected ranks again. */
    assert_int_equal(names_claim(n, name, 5000, &holder), B10_ERR_TOO_LARGE);
    /* At the daemon's bound a uid forgets its own idle claim before an older one of another's. */
    name_of(name, sizeof(name), 100 + 7, 1);
    names_release(n, name);
    names_release(n, "late");
    assert_int_equal(names_claim(n, "late-2", 5000, &holder), 0);
    assert_false(names_holder(n, "late", &uid));
    assert_true(names_holder(n, name, &uid));
    assert_int_equal(uid, 107);
    name_of(name, sizeof(name), 100, 0);
    assert_true(names_holder(n, name, &uid));
    assert_int_equal(uid, 100);
}

/* An idle claim holds for the hold after its rank left, and not a moment more. */
static void test_hold(void **state)
{
    uid_t holder = 0, uid;
    (void)state;

    names_set_hold(n, 1000);
    clock_ms = 5000;
    assert_int_equal(names_claim(n, "prefill-0", 1000, &holder), 0);
    /* Connected, it holds however long. */
    clock_ms = 1000000;
    assert_int_equal(names_claim(n, "prefill-0", 1001, &holder), B10_ERR_PERMISSION);
    names_release(n, "prefill-0");
    clock_ms += 999;
    assert_int_equal(names_claim(n, "prefill-0", 1001, &holder), B10_ERR_PERMISSION);
    assert_int_equal(holder, 1000);
    /* Taken back in time, then left again: the hold starts again from that leaving. */
    assert_int_equal(names_claim(n, "prefill-0", 1000, &holder), 0);
    clock_ms += 500;
    names_release(n, "prefill-0");
    clock_ms += 999;
    assert_int_equal(names_claim(n, "prefill-0", 1001, &holder), B10_ERR_PERMISSION);
    clock_ms += 1;
    /* Past it: the name is free, and the other user's rank takes it. */
    assert_int_equal(names_claim(n, "prefill-0", 1001, &holder), 0);
    assert_true(names_holder(n, "prefill-0", &uid));
    assert_int_equal(uid, 1001);
    assert_int_equal(names_count(n), 1);
    assert_int_equal(names_claim(n, "prefill-0", 1000, &holder), B10_ERR_PERMISSION);
    assert_int_equal(holder, 1001);
}

/* Without a hold (the table's default), an idle claim stays; names_expire forgets in order. */
static void test_hold_none_and_expire(void **state)
{
    uid_t holder = 0, uid;
    (void)state;

    assert_int_equal(names_claim(n, "a", 1000, &holder), 0);
    assert_int_equal(names_claim(n, "b", 1000, &holder), 0);
    assert_int_equal(names_claim(n, "c", 1000, &holder), 0);
    names_release(n, "b");
    clock_ms = 100;
    names_release(n, "a");
    clock_ms = UINT64_MAX / 2;
    names_expire(n);
    assert_int_equal(names_count(n), 3);
    assert_int_equal(names_claim(n, "a", 1001, &holder), B10_ERR_PERMISSION);
    names_set_hold(n, 500);
    clock_ms = 550;
    names_expire(n);
    /* b left at 1, a at 100: only b is past 500 ms; c is connected. */
    assert_false(names_holder(n, "b", &uid));
    assert_true(names_holder(n, "a", &uid));
    assert_true(names_holder(n, "c", &uid));
    clock_ms = 600;
    names_expire(n);
    assert_false(names_holder(n, "a", &uid));
    assert_true(names_holder(n, "c", &uid));
    assert_int_equal(names_count(n), 1);
}

/* Every change a restart must see is told; a refusal changes nothing. */
static void test_changes_told(void **state)
{
    uid_t holder = 0;
    char name[64];
    (void)state;

    names_on_change(n, test_changed, NULL);
    assert_int_equal(names_claim(n, "x", 1000, &holder), 0);
    assert_int_equal(changes, 1);
    assert_int_equal(names_claim(n, "x", 1000, &holder), B10_ERR_EXISTS);
    assert_int_equal(names_claim(n, "x", 1001, &holder), B10_ERR_PERMISSION);
    assert_int_equal(names_claim(n, "", 1000, &holder), B10_ERR_INVALID_ARG);
    names_release(n, "nobody");
    assert_int_equal(changes, 1);
    names_release(n, "x");
    assert_int_equal(changes, 2);
    names_release(n, "x");
    assert_int_equal(changes, 2);
    assert_int_equal(names_claim(n, "x", 1000, &holder), 0);
    assert_int_equal(changes, 3);
    /* Forgotten for the bound: told, then the new claim. */
    names_release(n, "x");
    for (unsigned i = 0; i < NAMES_PER_UID - 1; i++) {
        name_of(name, sizeof(name), 1000, i);
        assert_int_equal(names_claim(n, name, 1000, &holder), 0);
    }
    changes = 0;
    assert_int_equal(names_claim(n, "y", 1000, &holder), 0);
    assert_int_equal(changes, 2);
    /* Forgotten for the hold. */
    name_of(name, sizeof(name), 1000, 0);
    names_release(n, name);
    names_set_hold(n, 10);
    clock_ms += 10;
    changes = 0;
    names_expire(n);
    assert_int_equal(changes, 1);
}

struct walked {
    unsigned count, idle;
    uint64_t idle_sum;
};

static void walk_one(void *arg, const char *name, size_t len, uid_t uid, uint64_t idle_ms)
{
    struct walked *w = arg;
    assert_int_equal(strlen(name), len);
    assert_int_equal(uid, strcmp(name, "other") == 0 ? 2000 : 1000);
    w->count++;
    w->idle += idle_ms != 0;
    w->idle_sum += idle_ms;
}

/* The walk sees every claim, idle ones with the time they went idle. */
static void test_walk(void **state)
{
    struct walked w = { 0 };
    uid_t holder;
    (void)state;

    assert_int_equal(names_claim(n, "a", 1000, &holder), 0);
    assert_int_equal(names_claim(n, "b", 1000, &holder), 0);
    assert_int_equal(names_claim(n, "other", 2000, &holder), 0);
    clock_ms = 70;
    names_release(n, "b");
    names_walk(n, walk_one, &w);
    assert_int_equal(w.count, 3);
    assert_int_equal(w.idle, 1);
    assert_int_equal(w.idle_sum, 70);
}

/* Restored claims: idle, in the order they went idle, refused past the bounds or twice. */
static void test_restore(void **state)
{
    char name[64];
    uid_t holder, uid;
    (void)state;

    assert_int_equal(names_restore(n, "late-xxx", 4, 1000, 300), 0);   /* "late" */
    assert_int_equal(names_restore(n, "early", 5, 1000, 100), 0);
    assert_int_equal(names_restore(n, "middle", 6, 2000, 200), 0);
    assert_int_equal(names_restore(n, "early", 5, 3000, 100), B10_ERR_EXISTS);
    assert_int_equal(names_restore(n, "", 0, 1000, 1), B10_ERR_INVALID_ARG);
    assert_int_equal(names_restore(n, "a\0b", 3, 1000, 1), B10_ERR_INVALID_ARG);
    assert_int_equal(names_restore_done(n), 0);
    assert_true(names_holder(n, "late", &uid));
    assert_int_equal(uid, 1000);
    assert_false(names_holder(n, "late-xxx", &uid));
    /* Idle: another uid is refused, the holder takes it back. */
    assert_int_equal(names_claim(n, "middle", 1000, &holder), B10_ERR_PERMISSION);
    assert_int_equal(holder, 2000);
    assert_int_equal(names_claim(n, "middle", 2000, &holder), 0);
    /* They go in the order they went idle, whatever order they came back in. */
    names_set_hold(n, 1000);
    clock_ms = 1100;
    names_expire(n);
    assert_false(names_holder(n, "early", &uid));
    assert_true(names_holder(n, "late", &uid));
    clock_ms = 1300;
    names_expire(n);
    assert_false(names_holder(n, "late", &uid));
    assert_true(names_holder(n, "middle", &uid));      /* connected now */
    /* A uid's bound, and the table's, are not stretched by a restore. */
    names_clear(n);
    assert_int_equal(names_count(n), 0);
    for (unsigned i = 0; i < NAMES_PER_UID; i++) {
        name_of(name, sizeof(name), 1000, i);
        assert_int_equal(names_restore(n, name, strlen(name), 1000, 1), 0);
    }
    assert_int_equal(names_restore(n, "one-more", 8, 1000, 1), B10_ERR_TOO_LARGE);
    assert_int_equal(names_restore(n, "one-more", 8, 1001, 1), 0);
    assert_int_equal(names_restore_done(n), 0);
}

/* Many uids in any order: each counted apart, and a uid that holds nothing any more is gone. */
static void test_many_uids(void **state)
{
    char name[64];
    uid_t holder, uid;
    (void)state;

    for (unsigned i = 0; i < 3000; i++) {
        unsigned u = (i * 2654435761u) % 100003u;
        name_of(name, sizeof(name), u, 0);
        assert_int_equal(names_claim(n, name, u, &holder), 0);
    }
    for (unsigned i = 0; i < 3000; i++) {
        unsigned u = (i * 2654435761u) % 100003u;
        name_of(name, sizeof(name), u, 0);
        assert_true(names_holder(n, name, &uid));
        assert_int_equal(uid, u);
        names_release(n, name);
    }
    names_set_hold(n, 1);
    clock_ms += 1;
    names_expire(n);
    assert_int_equal(names_count(n), 0);
    /* Each uid may hold its full share again. */
    for (unsigned i = 0; i < NAMES_PER_UID; i++) {
        name_of(name, sizeof(name), 7, i);
        assert_int_equal(names_claim(n, name, 7, &holder), 0);
    }
    assert_int_equal(names_claim(n, "too-many", 7, &holder), B10_ERR_TOO_LARGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_hold, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hold_none_and_expire, setup, teardown),
        cmocka_unit_test_setup_teardown(test_changes_told, setup, teardown),
        cmocka_unit_test_setup_teardown(test_walk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restore, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_uids, setup, teardown),
        cmocka_unit_test_setup_teardown(test_first_uid_holds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_per_uid_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_global_bound, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
