/*
 * test-log.c — daemon/base/log.c: stderr lines with "<N>" priority prefixes.
 *
 * What journald and the operators rely on: the prefix is the level, then
 * the daemon's name; the level is checked before anything is formatted
 * (so a debug line's arguments are not even evaluated at info); a line
 * longer than the buffer is cut, never run past, and still ends the line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"

static char text[8192];
static int saved_fd = -1;
static FILE *file;

static void capture(void)
{
    fflush(stderr);
    file = tmpfile();
    assert_non_null(file);
    saved_fd = dup(STDERR_FILENO);
    assert_true(saved_fd >= 0);
    assert_true(dup2(fileno(file), STDERR_FILENO) >= 0);
}

static const char *captured(void)
{
    fflush(stderr);
    assert_true(dup2(saved_fd, STDERR_FILENO) >= 0);
    close(saved_fd);
    rewind(file);
    size_t n = fread(text, 1, sizeof(text) - 1, file);
    text[n] = '\0';
    fclose(file);
    return text;
}

static int teardown(void **state)
{
    log_setup(LOG_LEVEL_INFO, "b10d");
    return 0;
}

static void test_prefix_and_name(void **state)
{
    log_setup(LOG_LEVEL_DEBUG, "node-7");
    capture();
    log_err("peer %s lost", "b");
    log_warning("w %d", 1);
    log_notice("n");
    log_info("i");
    log_debug("d %s", "x");
    assert_string_equal(captured(), "<3>node-7: peer b lost\n<4>node-7: w 1\n<5>node-7: n\n"
                                    "<6>node-7: i\n<7>node-7: d x\n");
    /* A NULL name keeps the one set before. */
    log_setup(LOG_LEVEL_INFO, NULL);
    capture();
    log_info("still");
    assert_string_equal(captured(), "<6>node-7: still\n");
}

static int evaluated;

static int count(void)
{
    return ++evaluated;
}

/* Below the level nothing is written, nor are the arguments evaluated; at it, both. */
static void test_level_checked_first(void **state)
{
    log_setup(LOG_LEVEL_NOTICE, "t");
    evaluated = 0;
    capture();
    log_info("%d", count());
    log_debug("%d", count());
    log_notice("%d", count());
    log_err("%d", count());
    assert_string_equal(captured(), "<5>t: 1\n<3>t: 2\n");
    assert_int_equal(evaluated, 2);
    assert_int_equal(log_max_level, LOG_LEVEL_NOTICE);
}

/* A long line is cut at the buffer and still ends; a long name is cut at 63 bytes. */
static void test_long_lines_and_names(void **state)
{
    char *big = malloc(5000), name[100];

    memset(big, 'x', 4999);
    big[4999] = '\0';
    memset(name, 'n', sizeof(name));
    name[99] = '\0';
    log_setup(LOG_LEVEL_INFO, name);
    capture();
    log_info("%s", big);
    log_info("after");
    const char *out = captured();
    char want_prefix[80];
    snprintf(want_prefix, sizeof(want_prefix), "<6>%.63s: ", name);
    assert_int_equal(strncmp(out, want_prefix, strlen(want_prefix)), 0);
    const char *nl = strchr(out, '\n');
    assert_non_null(nl);
    assert_int_equal(nl - out, (long)strlen(want_prefix) + 1023);
    assert_string_equal(nl + 1 + strlen(want_prefix), "after\n");
    free(big);
}

static void test_level_words(void **state)
{
    static const struct {
        const char *word;
        int level;
    } known[] = {
        { "err", LOG_LEVEL_ERR },         { "error", LOG_LEVEL_ERR },
        { "WARNING", LOG_LEVEL_WARNING }, { "Notice", LOG_LEVEL_NOTICE },
        { "info", LOG_LEVEL_INFO },       { "debug", LOG_LEVEL_DEBUG },
    };
    static const char *const unknown[] = { "", "warn", "debug2", "7" };
    int level;

    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        level = -1;
        assert_int_equal(log_level_parse(known[i].word, &level), B10_OK);
        assert_int_equal(level, known[i].level);
    }
    /* A word it does not know leaves the level as it was. */
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        level = 42;
        assert_int_equal(log_level_parse(unknown[i], &level), B10_ERR_INVALID_ARG);
        assert_int_equal(level, 42);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_prefix_and_name, teardown),
        cmocka_unit_test_teardown(test_level_checked_first, teardown),
        cmocka_unit_test_teardown(test_long_lines_and_names, teardown),
        cmocka_unit_test(test_level_words),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
