/*
 * regions.h — opening a rank's region through mem.c, as the daemon does, for
 * the unit tests of its host-memory kinds (test-dram, test-procmem): the
 * status, the detail that says why, and whether it names the cause.
 */
#ifndef B10_TEST_REGIONS_H
#define B10_TEST_REGIONS_H

#include <string.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"

static char detail[320];        /* the last open_region's */
static long page;

/* Open one region through its kind; the status, and the region when OK. */
static b10_status_t open_region(const struct mem_request *req, struct region **r_p)
{
    detail[0] = '\0';
    return mem_region_open(1, req, detail, sizeof(detail), r_p);
}

static void refused_because(b10_status_t st, b10_status_t want, const char *why)
{
    assert_int_equal(st, want);
    if (strstr(detail, why) == NULL)
        fail_msg("the detail \"%s\" does not say \"%s\"", detail, why);
}

/* cmocka's group setup: the log (errors only) named name, and the page size. */
static int regions_setup(const char *name)
{
    log_setup(LOG_LEVEL_ERR, name);
    page = sysconf(_SC_PAGESIZE);
    return 0;
}

#endif
