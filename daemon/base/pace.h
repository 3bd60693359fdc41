/*
 * pace.h — one driver call a piece while that keeps up, batched calls when it does not.
 *
 * The copy engines take scattered pieces two ways. One cudaMemcpyAsync a
 * piece never cost a co-resident model a time slice in any run on the H200,
 * but the driver takes 2-3 us of a CPU a call, one submitting thread of a
 * process at a time: 4 KiB pieces move at 1.5 GB/s however many streams
 * submit. A cudaMemcpyBatchAsync of 128 pieces costs about a third of that a
 * piece, but in about half the runs a model's step queued behind such
 * batches for up to 0.3 ms before its first kernel (H200 runs 46-51,
 * tests/bench/notes/2026-12-01-h200-runs.md).
 *
 * So a feed submits one call a piece while it can keep up at that cost and
 * batches while it cannot: the tail is paid only where single calls would
 * cost the rate. The rule looks back over windows of at least
 * PACE_WINDOW_NS, closed by the first submission noted past that: the
 * pieces submitted in one, at what single calls have cost a piece of late,
 * would have kept the thread busy for `load` of the window. At
 * PACE_BATCH_AT or more it batches; batching, back to single calls at
 * PACE_SINGLE_AT or less. The gap keeps it from flapping at a rate near the
 * bound.
 *
 * Single calls' cost is measured only on single calls, so while batching
 * every PACE_PROBE_WINDOWS-th window's first submission goes singly: a cost
 * raised once (the thread preempted, the driver slow for a moment) is
 * measured again instead of holding the feed to batches for good.
 *
 * Pure: the caller owns the clock (ns, monotonic) and the locking.
 */
#ifndef B10D_PACE_H
#define B10D_PACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PACE_WINDOW_NS (2u * 1000u * 1000u)
#define PACE_BATCH_AT 0.8
#define PACE_SINGLE_AT 0.5
#define PACE_PROBE_WINDOWS 8

struct pace {
    bool batch;                 /* the mode: how submissions go, probes aside */
    bool probe;                 /* batching, and the next submission goes singly */
    uint64_t window_start;      /* ns: where the window began; 0 before the first note */
    uint64_t pieces;            /* submitted in the window, either way */
    uint64_t single_ns;         /* the window's single submissions: their time */
    uint64_t single_pieces;     /* ... and their pieces */
    uint32_t batched_windows;   /* windows closed batching since the last probe */
    double piece_ns;            /* a piece's cost submitted singly, averaged over windows;
                                   0: never measured */
    uint64_t switches;          /* times the mode changed */
};

/* Single calls to begin with: they cost a model nothing, and measure their cost. */
void pace_init(struct pace *p);

/* Whether the next submission should be batched. */
bool pace_batch(const struct pace *p);

/*
 * A submission of npieces, batched or not, took [start_ns, end_ns) of the
 * submitting thread; only those the driver took count. Ends the window if
 * it is over, and picks the mode of the next.
 */
void pace_note(struct pace *p, bool batched, size_t npieces, uint64_t start_ns, uint64_t end_ns);

/* The open window's load so far, for logs and tests: see above. */
double pace_load(const struct pace *p, uint64_t now_ns);

#endif
