/*
 * xfer-trace.c — --trace: every step of a transfer with its µs since the
 * transfer began here, logged in one line when it ends (see xfer-int.h).
 *
 * The steps of the first XFER_TRACE_CHUNKS chunks are kept, so that a large
 * transfer's line shows its fixed costs and how its pipeline fills, not
 * thousands of chunks; the others are counted. Times come from the
 * monotonic clock, and the line says when the transfer began on it, so that
 * the traces of two daemons on one host line up.
 */
#include "xfer-int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "plan.h"

#define XFER_TRACE_CHUNKS 8
/* Per-transfer steps (at most 6) and per-chunk ones (at most 4 a chunk, some twice on a retry). */
#define XFER_TRACE_MAX (16 + 6 * XFER_TRACE_CHUNKS)

struct xfer_trace {
    uint64_t t0_ns;
    uint32_t n;
    uint32_t untraced;              /* chunk steps past XFER_TRACE_CHUNKS, or past the table */
    struct {
        uint32_t us;
        uint16_t step;
        uint32_t chunk;
    } ev[XFER_TRACE_MAX];
};

static const char *const xfer_step_names[] = {
    [XS_PLANNED] = "planned",   [XS_CONTROL] = "control",       [XS_ADMITTED] = "admitted",
    [XS_READY] = "ready",       [XS_GATHER] = "gather",         [XS_GATHERED] = "gathered",
    [XS_SENT] = "sent",         [XS_POSTED] = "posted",         [XS_ARRIVED] = "arrived",
    [XS_SCATTER] = "scatter",   [XS_SCATTERED] = "scattered",   [XS_COPY] = "copy",
    [XS_COPIED] = "copied",     [XS_RESULT] = "result",         [XS_TOLD] = "told",
};

void xfer_trace_begin(struct xfer *x, uint64_t t0_ns)
{
    if (!x->d->cfg.trace || x->trace != NULL)
        return;
    /* Without memory the transfer goes on untraced: tracing is no reason to fail it. */
    x->trace = calloc(1, sizeof(*x->trace));
    if (x->trace != NULL)
        x->trace->t0_ns = t0_ns;
}

void xfer_trace_step(struct xfer *x, enum xfer_step step, int64_t chunk)
{
    struct xfer_trace *t = x->trace;
    if (t == NULL)
        return;
    if ((chunk != XFER_TRACE_NO_CHUNK && chunk >= XFER_TRACE_CHUNKS) || t->n == XFER_TRACE_MAX) {
        t->untraced++;
        return;
    }
    uint64_t ns = uv_hrtime() - t->t0_ns;
    t->ev[t->n].us = (uint32_t)(ns / 1000 < UINT32_MAX ? ns / 1000 : UINT32_MAX);
    t->ev[t->n].step = (uint16_t)step;
    t->ev[t->n].chunk = (uint32_t)chunk;
    t->n++;
}

void xfer_trace_log(struct xfer *x)
{
    struct xfer_trace *t = x->trace;
    char line[2048];
    size_t len = 0;

    if (t == NULL)
        return;
    for (uint32_t i = 0; i < t->n && len < sizeof(line) - 64; i++) {
        int k = t->ev[i].chunk == XFER_TRACE_NO_CHUNK
                    ? snprintf(line + len, sizeof(line) - len, "%s%s %" PRIu32, i ? ", " : "",
                               xfer_step_names[t->ev[i].step], t->ev[i].us)
                    : snprintf(line + len, sizeof(line) - len, "%s%s#%" PRIu32 " %" PRIu32,
                               i ? ", " : "", xfer_step_names[t->ev[i].step], t->ev[i].chunk,
                               t->ev[i].us);
        len += k > 0 ? (size_t)k : 0;
    }
    if (len >= sizeof(line))
        len = sizeof(line) - 1;
    line[len] = '\0';
    /* A write-back and its receiver name the READ they serve: its three traces join up. */
    char serves[40] = "";
    if (x->role != XFER_READ && x->read.id != 0)
        snprintf(serves, sizeof(serves), ", for READ %016" PRIx64, x->read.id);
    log_info("trace %016" PRIx64 " (%s, %s, %" PRIu64 " bytes in %u chunks%s, from %.3f ms "
             "monotonic), us: %s%s%s", x->id, xfer_role_name(x->role),
             x->status == B10_OK ? "landed" : b10_status_name(x->status),
             x->plan != NULL ? x->plan->total : 0, x->plan != NULL ? x->plan->nchunks : 0,
             serves, t->t0_ns / 1e6, line, t->untraced ? "; steps untraced: " : "",
             t->untraced ? "later chunks'" : "");
    free(t);
    x->trace = NULL;
}
