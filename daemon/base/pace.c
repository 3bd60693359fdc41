/* pace.c — see pace.h. */
#include "pace.h"

/*
 * A closed window's weight in piece_ns: a few windows' single calls make the
 * figure, weighed by their pieces within each (a submission's fixed costs,
 * its event and callback, spread over its pieces as they are).
 */
#define PACE_EWMA 0.25

void pace_init(struct pace *p)
{
    *p = (struct pace){ 0 };
}

bool pace_batch(const struct pace *p)
{
    return p->batch && !p->probe;
}

double pace_load(const struct pace *p, uint64_t now_ns)
{
    if (p->window_start == 0 || now_ns <= p->window_start)
        return 0;
    return (double)p->pieces * p->piece_ns / (double)(now_ns - p->window_start);
}

void pace_note(struct pace *p, bool batched, size_t npieces, uint64_t start_ns, uint64_t end_ns)
{
    if (npieces == 0)
        return;
    if (p->window_start == 0)
        p->window_start = start_ns;
    if (!batched) {
        p->single_ns += end_ns > start_ns ? end_ns - start_ns : 0;
        p->single_pieces += npieces;
        p->probe = false;
    }
    p->pieces += npieces;
    if (end_ns < p->window_start || end_ns - p->window_start < PACE_WINDOW_NS)
        return;
    if (p->single_pieces > 0) {
        double sample = (double)p->single_ns / (double)p->single_pieces;
        p->piece_ns = p->piece_ns == 0 ? sample : p->piece_ns + PACE_EWMA * (sample - p->piece_ns);
    }
    double load = pace_load(p, end_ns);
    bool batch = p->batch ? load > PACE_SINGLE_AT : load >= PACE_BATCH_AT;
    p->switches += batch != p->batch;
    p->batch = batch;
    p->batched_windows = batch ? p->batched_windows + 1 : 0;
    if (p->batched_windows >= PACE_PROBE_WINDOWS) {
        p->probe = true;
        p->batched_windows = 0;
    }
    p->window_start = end_ns;
    p->pieces = p->single_ns = p->single_pieces = 0;
}
