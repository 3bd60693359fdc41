/*
 * test-names.c — daemon/mem/names.c: an agent name is its first uid's, connected
 * or not; the table's bounds forget idle claims, a uid's own first, and
 * never a connected rank's.
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

static int setup(void **state)
{
    (void)state;
    n = names_create();
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_first_uid_holds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_per_uid_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_global_bound, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
