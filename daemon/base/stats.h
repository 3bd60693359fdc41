/*
 * stats.h — histograms of how transfers ended, by role: how long they took,
 * how long their planning took, how large they were, how many pieces they
 * moved, and their failures by status.
 *
 * Fed by the transfer engine where a transfer ends (each role's landed and
 * failed operations, xfer-*.c), read by admin.c's renderer for `b10ctl
 * metrics` and GET /metrics. Loop thread only. Buckets are fixed at build
 * time (STATS_*_BOUNDS in stats.c), in base units: seconds, bytes, pieces.
 */
#ifndef B10D_STATS_H
#define B10D_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "b10/b10.h"

#define STATS_ROLES 4            /* enum xfer_role: send, recv, read, local */
#define STATS_MAX_BUCKETS 20
#define STATS_MAX_STATUS 128     /* b10_status_t codes counted; others count as the last */

enum stats_kind {
    STATS_DURATION,              /* seconds from submission (or admission) to landed */
    STATS_PLANNING,              /* seconds from submission to planned (the rank waits) */
    STATS_SIZE,                  /* bytes */
    STATS_PIECES,                /* pieces moved: spans after contiguous runs merged */
    STATS_KINDS,
};

/* One histogram: per-bucket counts (not cumulative), the sum and the count of all. */
struct stats_hist {
    uint64_t buckets[STATS_MAX_BUCKETS];
    uint64_t count;
    double sum;
};

struct stats_hists {
    struct stats_hist hist[STATS_KINDS][STATS_ROLES];
    uint64_t failed[STATS_ROLES][STATS_MAX_STATUS];
};

/*
 * A transfer of role landed after seconds, planned in plan_seconds (< 0:
 * not one planned here, the receiver's), of bytes in pieces.
 */
void stats_landed(struct stats_hists *h, unsigned role, double seconds, double plan_seconds,
                  uint64_t bytes, uint32_t pieces);
/* A transfer of role failed with status. */
void stats_failed(struct stats_hists *h, unsigned role, b10_status_t status);

/* The upper bounds of kind's buckets (the +Inf one not among them), and how many. */
const double *stats_bounds(enum stats_kind kind, size_t *n_p);

#endif
