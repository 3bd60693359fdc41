/* pace.c — see pace.h. */
#include "pace.h"

/* A new sample's weight in piece_ns: a few windows' submissions make the figure. */
#define PACE_EWMA 0.125

void pace_init(struct pace *p)
{
    *p = (struct pace){ 0 };
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
    if (!batched && end_ns > start_ns) {
        double sample = (double)(end_ns - start_ns) / (double)npieces;
        p->piece_ns = p->piece_ns == 0 ? sample : p->piece_ns + PACE_EWMA * (sample - p->piece_ns);
    }
    p->pieces += npieces;
    if (end_ns - p->window_start < PACE_WINDOW_NS)
        return;
    double load = pace_load(p, end_ns);
    bool batch = p->batch ? load > PACE_SINGLE_AT : load >= PACE_BATCH_AT;
    p->switches += batch != p->batch;
    p->batch = batch;
    p->window_start = end_ns;
    p->pieces = 0;
}
