/*
 * pace.h — one driver call a piece while that keeps up, batched calls when it does not.
 *
 * The copy engines take scattered pieces two ways. One cudaMemcpyAsync a
 * piece never cost a co-resident model a time slice in any run on the H200,
 * but the driver takes 2-3 us of a CPU a call, one submitting context at a
 * time: 4 KiB pieces move at 1.5 GB/s however many streams submit. A
 * cudaMemcpyBatchAsync of 128 pieces costs about a third of that a piece, but
 * in about half the runs a model's step queued behind such batches for up to
 * 0.3 ms before its first kernel (tests/bench/RESULTS.md, runs 46-49).
 *
 * So a feed submits one call a piece while it can keep up at that cost and
 * batches while it cannot: the tail is paid only where the single calls would
 * cost the rate. The rule looks back over windows of PACE_WINDOW_NS: the
 * pieces submitted in one, at what one call a piece has cost of late, would
 * have kept the thread busy for `load` of the window. At PACE_BATCH_AT or
 * more it batches; batching, back to single calls at PACE_SINGLE_AT or less.
 * The gap between the two keeps it from flapping at a rate near the bound.
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

struct pace {
    bool batch;                 /* how the next submission goes */
    uint64_t window_start;      /* ns: where the window began; 0 before the first note */
    uint64_t pieces;            /* submitted in the window, either way */
    double piece_ns;            /* a piece's cost submitted singly, averaged; 0: never measured */
    uint64_t switches;          /* times the mode changed */
};

/* Single calls to begin with: they cost a model nothing, and measure their cost. */
void pace_init(struct pace *p);

/* Whether the next submission should be batched. */
static inline bool pace_batch(const struct pace *p)
{
    return p->batch;
}

/*
 * A submission of npieces, batched or not, took [start_ns, end_ns) of the
 * submitting thread. Ends the window if it is over, and picks the mode of
 * the next.
 */
void pace_note(struct pace *p, bool batched, size_t npieces, uint64_t start_ns, uint64_t end_ns);

/* The last window's load, for logs and tests: see above. */
double pace_load(const struct pace *p, uint64_t now_ns);

#endif
