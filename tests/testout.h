/*
 * testout.h — the lines a test program of b10d prints for each case:
 * "ok CASE: what held" or "FAIL CASE: what went wrong". The runners grep
 * for the FAIL lines. Also the command line such a program takes,
 * "[-t TIMEOUT_MS] [OPTIONS] SOCKET CASE...", and the running of its named cases.
 * Header-only: each program includes it once.
 */
#ifndef B10_TESTOUT_H
#define B10_TESTOUT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct testout_case {
    const char *name;
    int (*fn)(const char *name);    /* 0 when the case held */
};

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

/*
 * Parse "[-t TIMEOUT_MS] [OPTIONS] SOCKET CASE...": -t sets *timeout_ms; a
 * program's own options (getopt letters in more, each handled by opt, which
 * returns 0 or -1 for a bad value) may come beside it. Returns the index of
 * SOCKET in argv (the case names follow it), or -1 after printing the usage
 * with the case names.
 */
static int testout_args_more(int argc, char **argv, const struct testout_case *cases,
                             size_t ncases, int *timeout_ms, const char *more,
                             int (*opt)(int c, const char *arg)) __attribute__((unused));
static int testout_args_more(int argc, char **argv, const struct testout_case *cases,
                             size_t ncases, int *timeout_ms, const char *more,
                             int (*opt)(int c, const char *arg))
{
    char letters[32];
    int c;

    snprintf(letters, sizeof(letters), "t:%s", more != NULL ? more : "");
    while ((c = getopt(argc, argv, letters)) != -1) {
        if (c == 't' && atoi(optarg) > 0) {
            *timeout_ms = atoi(optarg);
            continue;
        }
        if (c != 't' && c != '?' && opt != NULL && opt(c, optarg) == 0)
            continue;
        fprintf(stderr, "usage: %s [-t TIMEOUT_MS] SOCKET CASE...\n", argv[0]);
        return -1;
    }
    if (argc - optind < 2) {
        fprintf(stderr, "usage: %s [-t TIMEOUT_MS] SOCKET CASE...\ncases: all", argv[0]);
        for (size_t i = 0; i < ncases; i++)
            fprintf(stderr, " %s", cases[i].name);
        fputc('\n', stderr);
        return -1;
    }
    return optind;
}

static int testout_args(int argc, char **argv, const struct testout_case *cases, size_t ncases,
                        int *timeout_ms) __attribute__((unused));
static int testout_args(int argc, char **argv, const struct testout_case *cases, size_t ncases,
                        int *timeout_ms)
{
    return testout_args_more(argc, argv, cases, ncases, timeout_ms, NULL, NULL);
}

/*
 * Run the cases that names[0..n) name ("all": every one), in order. After
 * each, after(name) (if given) returns 0, or 1 to count a failure, or -1 to
 * count one and stop. Returns 0 when every case held, 1 when one failed or
 * the run stopped, 2 on a name that is no case.
 */
static int testout_run(char **names, int n, const struct testout_case *cases, size_t ncases,
                       int (*after)(const char *name)) __attribute__((unused));
static int testout_run(char **names, int n, const struct testout_case *cases, size_t ncases,
                       int (*after)(const char *name))
{
    int bad = 0;

    for (int a = 0; a < n; a++) {
        bool all = strcmp(names[a], "all") == 0, found = false;

        for (size_t i = 0; i < ncases; i++) {
            if (!all && strcmp(names[a], cases[i].name) != 0)
                continue;
            found = true;
            bad |= cases[i].fn(cases[i].name) != 0;
            int rc = after != NULL ? after(cases[i].name) : 0;
            bad |= rc != 0;
            if (rc < 0)
                return 1;
        }
        if (!found) {
            fprintf(stderr, "unknown case %s\n", names[a]);
            return 2;
        }
    }
    return bad;
}

#endif
