/*
 * testout.h — the lines a test program of b10d prints for each case:
 * "ok CASE: what held" or "FAIL CASE: what went wrong". The runners grep
 * for the FAIL lines. Header-only: each program includes it once.
 */
#ifndef B10_TESTOUT_H
#define B10_TESTOUT_H

#include <stdarg.h>
#include <stdio.h>

static int testout_line(const char *tag, int rc, const char *c, const char *fmt, va_list ap)
{
    printf("%s %s: ", tag, c);
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
    return rc;
}

/* Report a failed case; returns 1 so that callers can `return fail(…)`. */
static int fail(const char *c, const char *fmt, ...) __attribute__((format(printf, 2, 3), unused));
static int fail(const char *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = testout_line("FAIL", 1, c, fmt, ap);
    va_end(ap);
    return rc;
}

/* Report a case that held; returns 0. */
static int pass(const char *c, const char *fmt, ...) __attribute__((format(printf, 2, 3), unused));
static int pass(const char *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = testout_line("ok", 0, c, fmt, ap);
    va_end(ap);
    return rc;
}

#endif
