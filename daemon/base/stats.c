/* stats.c — see stats.h. */
#include "stats.h"

#include <stdio.h>
#include <string.h>

const struct stats_counter stats_counters[STATS_NCOUNTERS] = {
#define STATS_ROW(field, text) { #field, text, offsetof(struct stats, field) },
    STATS_COUNTERS(STATS_ROW)
    STATS_DOOR_COUNTERS(STATS_ROW)
#undef STATS_ROW
};

bool stats_metric_name(const struct stats_counter *c, char *buf, size_t len)
{
    int n;

    if (strcmp(c->name, "cpu_us") == 0)
        return false;
    if (strncmp(c->name, "xfers_", 6) == 0)
        n = snprintf(buf, len, "b10d_transfers_%s_total", c->name + 6);
    else
        n = snprintf(buf, len, "b10d_%s_total", c->name);
    return n > 0 && (size_t)n < len;
}

/*
 * Durations from half a millisecond (a small local copy) to ten minutes (the
 * default cap on a deadline); sizes from one page to 16 GiB in steps of four;
 * pieces from one to a million (--max-spans), in steps of four.
 */
static const double stats_duration_bounds[] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 600,
};
static const double stats_size_bounds[] = {
    4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0, 67108864.0,
    268435456.0, 1073741824.0, 4294967296.0, 17179869184.0,
};
static const double stats_pieces_bounds[] = {
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576,
};

#define STATS_N(a) (sizeof(a) / sizeof((a)[0]))
_Static_assert(STATS_N(stats_duration_bounds) <= STATS_MAX_BUCKETS, "duration buckets");
_Static_assert(STATS_N(stats_size_bounds) <= STATS_MAX_BUCKETS, "size buckets");
_Static_assert(STATS_N(stats_pieces_bounds) <= STATS_MAX_BUCKETS, "pieces buckets");

const double *stats_bounds(enum stats_kind kind, size_t *n_p)
{
    switch (kind) {
    case STATS_SIZE:
        *n_p = STATS_N(stats_size_bounds);
        return stats_size_bounds;
    case STATS_PIECES:
        *n_p = STATS_N(stats_pieces_bounds);
        return stats_pieces_bounds;
    default:
        *n_p = STATS_N(stats_duration_bounds);
        return stats_duration_bounds;
    }
}

/* The first bucket whose bound holds v; values past the last go to +Inf (count only). */
static void stats_observe(struct stats_hist *hist, enum stats_kind kind, double v)
{
    size_t n;
    const double *bounds = stats_bounds(kind, &n);

    for (size_t i = 0; i < n; i++)
        if (v <= bounds[i]) {
            hist->buckets[i]++;
            break;
        }
    hist->count++;
    hist->sum += v;
}

void stats_landed(struct stats_hists *h, unsigned role, double seconds, double plan_seconds,
                  uint64_t bytes, uint32_t pieces)
{
    if (role >= STATS_ROLES)
        return;
    stats_observe(&h->hist[STATS_DURATION][role], STATS_DURATION, seconds);
    if (plan_seconds >= 0)
        stats_observe(&h->hist[STATS_PLANNING][role], STATS_PLANNING, plan_seconds);
    stats_observe(&h->hist[STATS_SIZE][role], STATS_SIZE, (double)bytes);
    stats_observe(&h->hist[STATS_PIECES][role], STATS_PIECES, (double)pieces);
}

void stats_failed(struct stats_hists *h, unsigned role, b10_status_t status)
{
    unsigned code = (unsigned)status < STATS_MAX_STATUS ? (unsigned)status : STATS_MAX_STATUS - 1;
    if (role < STATS_ROLES)
        h->failed[role][code]++;
}
