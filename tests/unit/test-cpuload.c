/*
 * test-cpuload.c — daemon/base/cpuload.c: is the host's CPU oversubscribed?
 *
 * The answer comes from field 4 of /proc/loadavg ("runnable/total") against
 * the online CPUs. The file is the test's here (open and read are wrapped,
 * -Wl,--wrap): runnable threads at, one below and one above the CPU count,
 * and a file that is missing, empty or malformed, which must all read as
 * "not oversubscribed" so that a daemon that cannot tell never stops
 * spinning for nothing. The answer is kept per thread for 10 ms, so each
 * case asks from a thread of its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <cmocka.h>

#include "cpuload.h"

#define FAKE_FD 9999

static const char *loadavg;         /* the file's text; NULL: it cannot be opened */
static unsigned opens;

int __real_open(const char *path, int flags, ...);
int __wrap_open(const char *path, int flags, ...);
ssize_t __real_read(int fd, void *buf, size_t n);
ssize_t __wrap_read(int fd, void *buf, size_t n);
int __real_close(int fd);
int __wrap_close(int fd);

int __wrap_open(const char *path, int flags, ...)
{
    if (strcmp(path, "/proc/loadavg") != 0) {
        va_list ap;
        va_start(ap, flags);
        int mode = va_arg(ap, int);
        va_end(ap);
        return __real_open(path, flags, mode);
    }
    opens++;
    if (loadavg == NULL) {
        errno = ENOENT;
        return -1;
    }
    return FAKE_FD;
}

ssize_t __wrap_read(int fd, void *buf, size_t n)
{
    if (fd != FAKE_FD)
        return __real_read(fd, buf, n);
    size_t len = strlen(loadavg);
    if (len > n)
        len = n;
    memcpy(buf, loadavg, len);
    return (ssize_t)len;
}

int __wrap_close(int fd)
{
    return fd == FAKE_FD ? 0 : __real_close(fd);
}

static void *ask(void *arg)
{
    *(bool *)arg = cpuload_oversubscribed();
    return NULL;
}

/* The answer of a fresh thread (no answer kept yet) for this file text. */
static bool answer(const char *text)
{
    pthread_t t;
    bool over = false;

    loadavg = text;
    opens = 0;
    assert_int_equal(pthread_create(&t, NULL, ask, &over), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(opens, 1);
    return over;
}

static void test_runnable_against_cpus(void **state)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    char text[128];

    assert_true(cpus > 0);
    snprintf(text, sizeof(text), "0.50 0.40 0.30 %ld/900 12345\n", cpus);
    assert_false(answer(text));             /* every CPU busy: not yet too many */
    snprintf(text, sizeof(text), "0.50 0.40 0.30 %ld/900 12345\n", cpus + 1);
    assert_true(answer(text));              /* one more than the CPUs */
    snprintf(text, sizeof(text), "9.00 9.00 9.00 %ld/900 12345\n", cpus - 1);
    assert_false(answer(text));             /* the load averages do not count, runnable does */
    assert_true(answer("0.00 0.00 0.00 100000/100001 1\n"));
}

/* A daemon that cannot tell reads "not oversubscribed". */
static void test_unreadable_is_not_oversubscribed(void **state)
{
    assert_false(answer(NULL));
    assert_false(answer(""));
    assert_false(answer("garbage"));
    assert_false(answer("0.50 0.40 0.30 100000 12345\n"));     /* no "/total" */
    assert_false(answer("0.50 0.40 100000/200000\n"));         /* a field short */
    /* The same shape, well formed, does say yes: the refusals above are the text's. */
    assert_true(answer("0.50 0.40 0.30 100000/200000 12345\n"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runnable_against_cpus),
        cmocka_unit_test(test_unreadable_is_not_oversubscribed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
