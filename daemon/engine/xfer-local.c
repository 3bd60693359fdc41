/* xfer-local.c — transfers between two ranks of this daemon (see xfer-int.h). */
#include "xfer-int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "peer.h"
#include "plan.h"
#include "rank.h"
#include "session.h"

/*
 * Both ranks on this daemon: each chunk is copied from one rank's mapping
 * into the other's, with no UCX and no second daemon. Where both sides are
 * host memory, or VRAM of one device, the copy is direct (a memcpy on the
 * copy workers, a device-to-device copy on the GPU); otherwise the chunk is
 * gathered into a pinned staging view and scattered from it. It keeps
 * every contract of a transfer between daemons: admitted only as the
 * target would admit it (access.h, its registrations, its notices), fenced
 * by its deadline, failed through the funnel, reported only once its
 * copies into the destination ended, landed only once every chunk did, the
 * sync message after. Nothing but this daemon's own copies can write for
 * it, so its failure waits for nothing else.
 */

static void xfer_local_on_scattered(struct copy_job *job, b10_status_t status);

static void xfer_local_on_gathered(struct copy_job *job, b10_status_t status)
{
    struct xfer_slot *slot = job->arg;
    struct xfer *x = slot->x;

    if (!xfer_copy_ended(slot, job, status) || xfer_past_deadline(x))
        return;
    xfer_chunk_seal(slot, job);     /* the view is checked again before the scatter */
    b10_status_t st = xfer_copy_chunk(slot, false, xfer_local_on_scattered);
    if (st != B10_OK)
        xfer_fail_dst(x, st, slot->chunk, x->to ? x->to->agent : "?");
}

static void xfer_local_on_scattered(struct copy_job *job, b10_status_t status)
{
    struct xfer_slot *slot = job->arg;
    struct xfer *x = slot->x;

    if (!xfer_copy_ended(slot, job, status))
        return;
    for (uint32_t c = slot->chunk; c < slot->chunk + slot->nchunks; c++)
        x->d->stats.bytes_landed += x->plan->chunks[c].bytes;
    x->chunks_done += slot->nchunks;
    xfer_slot_release(slot);
    if (x->picker == NULL && x->chunks_done == x->plan->nchunks)
        xfer_finish(x);
    else
        xfer_local_pump(x);
}

/*
 * A direct copy: each piece of the chunk is walked through the source
 * rank's registrations and, run by run, through the destination's, and
 * every pair of runs becomes one segment of a job that writes the
 * destination (a scatter, for the quiescence rules).
 */
struct xfer_direct_ctx {
    struct copy_job *job;
    struct mem_table *dst_mem;
    uint64_t dst;                   /* next destination address of the piece */
    struct region *src_r;           /* the source run being paired */
    uint64_t src_off;
    bool src_open_only, dst_open_only;
    bool dst_side;                  /* the failure, if any, is the destination's */
};

static b10_status_t xfer_direct_emit_dst(void *arg, struct region *r, uint64_t offset, uint64_t n)
{
    struct xfer_direct_ctx *ctx = arg;
    if (ctx->dst_open_only && !r->open)
        return B10_ERR_PERMISSION;
    b10_status_t status = copy_job_add_direct(ctx->job, ctx->src_r, r, r->base + offset,
                                              ctx->src_r->base + ctx->src_off, n);
    ctx->src_off += n;
    return status;
}

static b10_status_t xfer_direct_emit_src(void *arg, struct region *r, uint64_t offset, uint64_t n)
{
    struct xfer_direct_ctx *ctx = arg;
    if (ctx->src_open_only && !r->open)
        return B10_ERR_PERMISSION;
    ctx->src_r = r;
    ctx->src_off = offset;
    b10_status_t status = mem_table_walk(ctx->dst_mem, ctx->dst, n, xfer_direct_emit_dst, ctx);
    /* B10_ERR_UNSUPPORTED is no refusal: the pair needs staging between. */
    ctx->dst_side = status != B10_OK && status != B10_ERR_UNSUPPORTED;
    ctx->dst += n;
    return status;
}

/*
 * A direct copy takes consecutive chunks up to this many bytes: no view
 * bounds it, and each copy costs a trip through the loop (about 0.3 ms from
 * submission to its completion there), which 4 MiB chunks on one GPU would
 * make the whole cost. A transfer's first copy takes its first chunk alone:
 * walking 64 MiB of 2 KiB spans through both ranks' registrations took 1 ms
 * before any byte moved, and the copies after it overlap that walk.
 *
 * Host memory is copied by one pool thread a job, so its jobs stay small
 * enough to share a transfer among threads. Between two ranks holding only
 * VRAM a job is one kernel launch, whose fixed cost (the descriptor upload,
 * the launch, events, the callback and the loop's turn after it) the loop
 * paid 40 times for 2.5 GiB at 64 MiB, while the kernel itself ran about
 * half of the time (H200 run 42, tests/bench/notes/2026-12-01-h200-runs.md).
 */
#define XFER_DIRECT_HOST_BYTES (64u << 20)
#define XFER_DIRECT_GPU_BYTES (256u << 20)
/*
 * ... and up to this many pieces: each is a walk and a segment made on the
 * loop thread. 64 MiB of unmergeable 64-byte spans made a job of a million
 * segments, which held every rank and b10ctl for 60 to 100 ms on 2 cores as
 * it was made, and again as it was freed. A job still takes a chunk whole.
 */
#define XFER_DIRECT_PIECES 65536u

/*
 * A request of at least XFER_PARTS_MIN picks is packed a part at a time
 * (plan.h, plan_picker), the first of XFER_PART_FIRST picks, each next one
 * twice the last up to XFER_PART_MOST, and only when a copy could take its
 * chunks: its first copy starts once a part of it is packed, not all of
 * it. Planning 81,920 picks took 0.7-0.9 ms on the H200 host before any
 * byte moved, where the kernels moved all 2.5 GiB in about 1.6 ms
 * (H200 runs 42 and 47). Every check comes first: no
 * part can fail for what the request holds.
 */
#define XFER_PARTS_MIN 4096
#define XFER_PART_FIRST 1024
#define XFER_PART_MOST 65536

/* Chunks a copy may take: those whole (a plan made in parts keeps growing its last). */
static uint32_t xfer_local_sealed(const struct xfer *x)
{
    return x->picker != NULL ? plan_picker_sealed(x->picker) : x->plan->nchunks;
}

/* Plan the next part; the picker goes once the plan is whole. */
static void xfer_local_plan_part(struct xfer *x)
{
    uint64_t t0 = uv_hrtime();
    plan_picker_next(x->picker, x->picker_part);
    x->parts++;
    x->parts_ns += uv_hrtime() - t0;
    x->picker_part = x->picker_part < XFER_PART_MOST / 2 ? x->picker_part * 2 : XFER_PART_MOST;
    if (plan_picker_done(x->picker)) {
        plan_picker_free(x->picker);
        x->picker = NULL;
    }
}

/*
 * Copy slot's chunks directly (chunk on, as many as fit the bound above):
 * B10_OK (submitted, slot->nchunks set); B10_ERR_UNSUPPORTED when a pair of
 * their runs needs staging; another status (*dst_side says whose side
 * refused) when a span is no longer where it was admitted.
 */
static b10_status_t xfer_local_direct(struct xfer_slot *slot, bool *dst_side)
{
    struct xfer *x = slot->x;
    const struct plan *plan = x->plan;

    *dst_side = false;
    if (x->from == NULL || x->to == NULL)
        return B10_ERR_CLIENT_GONE;
    /* The other rank's side is the one admitted through open regions only, if so. */
    struct xfer_direct_ctx ctx = {
        .job = copy_job_new(x->d, false, xfer_local_on_scattered, slot, slot->chunk),
        .dst_mem = &x->to->mem,
        .src_open_only = x->open_only && x->local_read,
        .dst_open_only = x->open_only && !x->local_read,
    };
    if (ctx.job == NULL)
        return B10_ERR_NO_MEMORY;
    /* The chunks it takes, and room for their pieces (a piece across two regions adds one). */
    uint64_t most = x->from->mem.host_bytes == 0 && x->to->mem.host_bytes == 0
                        ? XFER_DIRECT_GPU_BYTES : XFER_DIRECT_HOST_BYTES;
    uint64_t bytes = plan->chunks[slot->chunk].bytes;
    uint32_t npieces = plan->chunks[slot->chunk].count, end = slot->chunk + 1;
    uint32_t sealed = xfer_local_sealed(x);
    while (slot->chunk > 0 && end < sealed && bytes + plan->chunks[end].bytes <= most &&
           npieces + plan->chunks[end].count <= XFER_DIRECT_PIECES) {
        bytes += plan->chunks[end].bytes;
        npieces += plan->chunks[end].count;
        end++;
    }
    if (copy_job_reserve(ctx.job, npieces) != B10_OK) {
        copy_job_free(ctx.job);
        return B10_ERR_NO_MEMORY;
    }
    for (uint32_t c = slot->chunk; c < end; c++) {
        const struct plan_chunk *chunk = &plan->chunks[c];
        for (uint32_t p = chunk->first; p < chunk->first + chunk->count; p++) {
            const struct plan_piece *piece = &plan->pieces[p];
            /* Most pieces lie whole in the regions the last walks began in: no walk. */
            struct region *rs = mem_table_hinted(&x->from->mem, piece->src, piece->len);
            struct region *rd = rs != NULL ? mem_table_hinted(ctx.dst_mem, piece->dst, piece->len)
                                           : NULL;
            if (rd != NULL && (!ctx.src_open_only || rs->open) &&
                (!ctx.dst_open_only || rd->open) &&
                copy_job_add_direct(ctx.job, rs, rd, rd->base + (piece->dst - rd->addr),
                                    rs->base + (piece->src - rs->addr), piece->len) == B10_OK)
                continue;
            /* Else the walk, run by run, which also names whose side refused. */
            ctx.dst = piece->dst;
            b10_status_t status = mem_table_walk(&x->from->mem, piece->src, piece->len,
                                                 xfer_direct_emit_src, &ctx);
            if (status != B10_OK) {
                copy_job_free(ctx.job);
                *dst_side = ctx.dst_side;
                return status;
            }
        }
    }
    slot->nchunks = end - slot->chunk;
    x->next_chunk = end;
    x->holds++;
    x->scatters++;
    x->pipe.direct++;
    slot->job = ctx.job;
    slot->phase_ns = uv_hrtime();
    xfer_times_first(x);
    xfer_trace_step(x, XS_COPY, slot->chunk);
    copy_job_submit(ctx.job);
    return B10_OK;
}

/*
 * Picks between two grids in VRAM of one GPU, where its kernels may run:
 * the GPU copies each pick's row straight from the two indices (gpu-copy.h's
 * grid copy), so nothing is planned or walked a piece at a time. Planned
 * and walked piece by piece, a local VRAM -> VRAM copy of 2.5 GiB in 32 KiB
 * picks moved 0.25-0.35 x the device's own copy: the GPU waited for the
 * CPU, each 256 MiB job's kernel running 0.12 ms of its 0.58 (H200 run
 * 48). Each copy looks the grids' bases up again (a KV pool's grid has a
 * base a layer's K or V), so a region deregistered meanwhile fails it as a
 * walk would.
 */
struct xfer_grid {
    struct picks_grid src, dst;     /* bases: into the grid's own copy */
    uint8_t *bases;
    uint32_t *pairs;                /* count (source row, destination row) */
    size_t count;
};

/*
 * A grid copy takes up to XFER_GRID_BYTES, and XFER_GRID_ROWS rows (within
 * gpu-copy.h's bound on one launch's table). Each copy ends in a host
 * callback, which holds the stream until a driver thread has run it, and a
 * trip through the loop: on the H200, 2.5 GiB in copies of 256 MiB moved in
 * 2.3-2.7 ms where their kernels ran 1.6; in copies of 1 GiB, 1.9 where
 * they ran 1.5 (H200 run 52). A 4 GiB kernel runs about 2.4 ms there,
 * which a failure waits for at most once per copy in flight.
 */
#define XFER_GRID_BYTES (4ull << 30)
#define XFER_GRID_ROWS COPY_GRID_ROWS
_Static_assert(PLAN_GRID_BASES <= COPY_GRID_BASES, "a checked grid's bases fit a grid job");

void xfer_local_grid_free(struct xfer_grid *grid)
{
    if (grid == NULL)
        return;
    free(grid->bases);
    free(grid->pairs);
    free(grid);
}

/* Bytes from a base to the end of its last row (below 2^64: picks_grid_check). */
static uint64_t xfer_grid_reach(const struct picks_grid *g)
{
    return (g->per_base - 1) * g->stride + g->length;
}

/*
 * Regions a grid copy's bases may lie in, counted once a base: each copy
 * walks and holds them all again, so a rank that cut one allocation into
 * thousands of regions under a thousand bases would cost the loop millions
 * of steps a copy. Past this, the request is planned.
 */
#define XFER_GRID_RUNS 4096u

/*
 * The regions a base's rows lie in, walked: each VRAM of one device, and
 * one mapping for all (the daemon's address a fixed distance from the
 * rank's: regions of one allocation, which CUDA maps once), so that the
 * kernel can reach every row from one base. With a job, each is held.
 */
struct xfer_grid_walk {
    struct b10d *d;
    struct copy_job *job;           /* NULL: a check only */
    bool written, open_only;
    uint32_t runs;                  /* regions walked, every base's (each held once a copy) */
    int device;                     /* every region's, once one was seen (-1 before) */
    bool seen;                      /* a region of this base was seen: delta is its */
    uint64_t delta;                 /* the daemon's address minus the rank's */
};

static b10_status_t xfer_grid_emit(void *arg, struct region *r, uint64_t offset, uint64_t n)
{
    struct xfer_grid_walk *w = arg;
    uint64_t delta = (uint64_t)(uintptr_t)r->base - r->addr;
    if (!mem_region_on_device(r) || (w->device >= 0 && r->device != w->device) ||
        (w->seen && delta != w->delta) || !copy_direct_ok(w->d, r, r))
        return B10_ERR_UNSUPPORTED;
    if (w->open_only && !r->open)
        return B10_ERR_PERMISSION;
    if (++w->runs > XFER_GRID_RUNS)
        return B10_ERR_UNSUPPORTED;
    w->device = r->device;
    w->seen = true;
    w->delta = delta;
    return w->job != NULL ? copy_job_hold(w->job, r, w->written) : B10_OK;
}

/* Base b's rows through w: B10_OK with the daemon's address of the base in *addr_p. */
static b10_status_t xfer_grid_base(struct mem_table *mem, const struct picks_grid *g, size_t b,
                                   struct xfer_grid_walk *w, uint64_t *addr_p)
{
    uint64_t addr = frame_get_u64(g->bases + b * 8), reach = xfer_grid_reach(g);
    w->seen = false;
    struct region *r = mem_table_hinted(mem, addr, reach);
    b10_status_t status = r != NULL ? xfer_grid_emit(w, r, addr - r->addr, reach)
                                    : mem_table_walk(mem, addr, reach, xfer_grid_emit, w);
    *addr_p = addr + w->delta;
    return status;
}

/*
 * A grid copy of the request, where it can be one: B10_OK with the grid and
 * its plan (plan_rows); B10_ERR_UNSUPPORTED: plan it; B10_ERR_NO_MEMORY.
 */
static b10_status_t xfer_local_grid_new(struct b10d *d, const struct xfer_rows *rows, bool read,
                                        struct session *from, struct session *to, bool open_only,
                                        struct xfer_grid **grid_p, struct plan **plan_p,
                                        uint64_t *ns_p)
{
    const struct xfer_picks *p = rows->picks;
    if (p == NULL || d->test_local_staged)
        return B10_ERR_UNSUPPORTED;
    uint64_t t0 = uv_hrtime();
    const struct picks_grid *src = read ? &p->remote : &p->local;
    const struct picks_grid *dst = read ? &p->local : &p->remote;
    if (src->nbases > PLAN_GRID_BASES || dst->nbases > PLAN_GRID_BASES)
        return B10_ERR_UNSUPPORTED;
    /*
     * Every base's rows in VRAM of one device, one mapping a base, and the kernels
     * allowed; the other rank's regions open, where it admitted only those, as each
     * copy asks again (of all a base's rows, where the planned copy asks of the picked).
     */
    struct xfer_grid_walk w = { .d = d, .device = -1, .open_only = open_only && read };
    uint64_t addr;
    for (size_t b = 0; b < src->nbases + dst->nbases; b++) {
        if (b == src->nbases)
            w.open_only = open_only && !read;
        if ((b < src->nbases ? xfer_grid_base(&from->mem, src, b, &w, &addr)
                             : xfer_grid_base(&to->mem, dst, b - src->nbases, &w, &addr)) != B10_OK)
            return B10_ERR_UNSUPPORTED;
    }
    struct xfer_grid *g = calloc(1, sizeof(*g));
    size_t nbases = src->nbases + dst->nbases;
    if (g == NULL || (g->pairs = malloc(rows->count * 2 * sizeof(*g->pairs))) == NULL ||
        (g->bases = malloc(nbases * 8)) == NULL) {
        xfer_local_grid_free(g);
        return B10_ERR_NO_MEMORY;
    }
    b10_status_t status = plan_grid_pairs(src, dst, read ? p->remote_rows : p->local_rows,
                                          read ? p->local_rows : p->remote_rows, rows->count,
                                          g->pairs);
    uint32_t per_chunk = src->length >= XFER_GRID_BYTES / XFER_GRID_ROWS
                             ? (uint32_t)(XFER_GRID_BYTES / src->length) : XFER_GRID_ROWS;
    if (status == B10_OK)
        status = (*plan_p = plan_rows(rows->count, src->length, per_chunk ? per_chunk : 1)) != NULL
                     ? B10_OK : B10_ERR_NO_MEMORY;
    if (status != B10_OK) {
        xfer_local_grid_free(g);
        return status;
    }
    /* The grids outlive the request: their bases copied. */
    memcpy(g->bases, src->bases, src->nbases * 8);
    memcpy(g->bases + src->nbases * 8, dst->bases, dst->nbases * 8);
    g->src = *src;
    g->src.bases = g->bases;
    g->dst = *dst;
    g->dst.bases = g->bases + src->nbases * 8;
    g->count = rows->count;
    *grid_p = g;
    *ns_p = uv_hrtime() - t0;
    return B10_OK;
}

/*
 * The daemon's address of each base of one side into bases, its regions
 * held by job: B10_OK, or why the side is no longer as admitted.
 */
static b10_status_t xfer_grid_side(struct xfer_grid_walk *w, struct mem_table *mem,
                                   const struct picks_grid *g, uint64_t *bases)
{
    for (size_t b = 0; b < g->nbases; b++) {
        b10_status_t status = xfer_grid_base(mem, g, b, w, &bases[b]);
        if (status != B10_OK)
            return status == B10_ERR_UNSUPPORTED ? B10_ERR_NOT_REGISTERED : status;
    }
    return B10_OK;
}

/* Copy slot's chunk of the grid: B10_OK (submitted), or why not (*dst_side: whose). */
static b10_status_t xfer_local_grid_copy(struct xfer_slot *slot, bool *dst_side)
{
    struct xfer *x = slot->x;
    const struct xfer_grid *g = x->grid;
    const struct plan_chunk *chunk = &x->plan->chunks[slot->chunk];

    *dst_side = false;
    if (x->from == NULL || x->to == NULL)
        return B10_ERR_CLIENT_GONE;
    struct copy_job *job = copy_job_new(x->d, false, xfer_local_on_scattered, slot, slot->chunk);
    struct copy_grid *cg = calloc(1, sizeof(*cg));
    if (job == NULL || cg == NULL ||
        (cg->src_bases = malloc(g->src.nbases * sizeof(uint64_t))) == NULL ||
        (cg->dst_bases = malloc(g->dst.nbases * sizeof(uint64_t))) == NULL) {
        if (cg != NULL) {
            free(cg->src_bases);
            free(cg);
        }
        copy_job_free(job);
        return B10_ERR_NO_MEMORY;
    }
    /* The other rank's side is the one admitted through open regions only, if so. */
    struct xfer_grid_walk w = { .d = x->d, .job = job, .device = -1,
                                .open_only = x->open_only && x->local_read };
    b10_status_t status = xfer_grid_side(&w, &x->from->mem, &g->src, cg->src_bases);
    if (status == B10_OK) {
        *dst_side = true;
        w.written = true;
        w.open_only = x->open_only && !x->local_read;
        status = xfer_grid_side(&w, &x->to->mem, &g->dst, cg->dst_bases);
    }
    if (status == B10_OK) {
        *dst_side = false;
        cg->device = w.device;
        cg->src_nbases = (uint32_t)g->src.nbases;
        cg->dst_nbases = (uint32_t)g->dst.nbases;
        cg->src_per_base = (uint32_t)g->src.per_base;
        cg->dst_per_base = (uint32_t)g->dst.per_base;
        cg->src_stride = g->src.stride;
        cg->dst_stride = g->dst.stride;
        cg->length = g->src.length;
        cg->pairs = g->pairs + 2 * (size_t)chunk->first;
        cg->count = chunk->count;
        status = copy_job_add_grid(job, cg);
        cg = NULL;
    }
    if (status != B10_OK) {
        if (cg != NULL) {
            free(cg->src_bases);
            free(cg->dst_bases);
            free(cg);
        }
        copy_job_free(job);
        return status;
    }
    x->next_chunk = slot->chunk + 1;
    x->holds++;
    x->scatters++;
    x->pipe.direct++;
    slot->job = job;
    slot->phase_ns = uv_hrtime();
    xfer_times_first(x);
    xfer_trace_step(x, XS_COPY, slot->chunk);
    copy_job_submit(job);
    return B10_OK;
}

/*
 * Keep up to nslots chunks in copies: direct where it can be, else through
 * a view. A plan made in parts grows by a part where a copy could take more
 * than is planned.
 */
void xfer_local_pump(struct xfer *x)
{
    while (x->state == XFER_RUNNING) {
        if (x->next_chunk >= xfer_local_sealed(x)) {
            if (x->picker == NULL)
                return;                 /* every chunk is copying or copied */
            if (xfer_free_slot(x) == NULL)
                return;                 /* the next part waits for a copy to end */
            xfer_local_plan_part(x);
            continue;
        }
        struct xfer_slot *slot = xfer_free_slot(x);
        if (slot == NULL)
            return;
        *slot = (struct xfer_slot){ .x = x, .busy = true, .chunk = x->next_chunk, .nchunks = 1 };
        bool dst_side = false;
        /* One chunk that needed staging: the rest of the transfer is the same memory. */
        b10_status_t status = x->grid != NULL ? xfer_local_grid_copy(slot, &dst_side)
                              : x->staged     ? B10_ERR_UNSUPPORTED
                                              : xfer_local_direct(slot, &dst_side);
        if (status == B10_ERR_UNSUPPORTED && x->grid == NULL) {
            x->staged = true;
            slot->view = staging_get(x->d->staging, VIEW_SEND);
            if (slot->view == NULL) {
                slot->busy = false;
                xfer_wait_for_view(x);
                return;
            }
            x->next_chunk++;
            status = xfer_copy_chunk(slot, true, xfer_local_on_gathered);
        }
        if (status != B10_OK) {
            xfer_slot_release(slot);
            if (dst_side)
                xfer_fail_dst(x, status, slot->chunk, x->to->agent);
            else
                xfer_fail(x, status, "copying chunk %u from %s: %s", slot->chunk,
                          x->from ? x->from->agent : "?", b10_status_str(status));
            return;
        }
    }
}

/*
 * A plan made in parts, where the request allows it: picks enough, and for
 * a WRITE every row of the destination
 * grid inside the other rank's regions, so that no part needs a check of
 * its own (a READ's other side was checked as rows). B10_OK with the picker
 * and its plan; B10_ERR_UNSUPPORTED: plan it whole; B10_ERR_NO_MEMORY.
 */
static b10_status_t xfer_local_picker(struct b10d *d, struct xfer_rows *rows, bool read,
                                      struct session *other, struct plan_picker **picker_p,
                                      struct plan **plan_p, uint64_t *ns_p)
{
    const struct xfer_picks *p = rows->picks;
    if (p == NULL || rows->count < XFER_PARTS_MIN ||
        (!read && !xfer_grid_inside(&other->mem, &p->remote, rows->count)))
        return B10_ERR_UNSUPPORTED;
    uint64_t t0 = uv_hrtime(), view = staging_view_bytes(d->staging);
    b10_status_t status =
        read ? plan_picker_new(&p->remote, &p->local, p->remote_rows, p->local_rows, rows->count,
                               view, picker_p, plan_p)
             : plan_picker_new(&p->local, &p->remote, p->local_rows, p->remote_rows, rows->count,
                               view, picker_p, plan_p);
    *ns_p = uv_hrtime() - t0;
    return status;
}

/* How a local transfer is planned (xfer_local_plan): the plan, and what copies it. */
struct xfer_local_planned {
    struct plan *plan;
    struct plan_picker *picker;     /* planned in parts: the rest still to pack, else NULL */
    struct xfer_grid *grid;         /* copied by the GPU as rows of two grids, else NULL */
    uint64_t ns;                    /* planning's own time */
};

/*
 * Plan rank s's request with other: a grid copy where the GPU can take
 * the picks whole, else a plan made in parts where the picks allow one,
 * else the whole plan. B10_OK with *p (at most one of grid and picker);
 * else the refusal, said in detail.
 */
static b10_status_t xfer_local_plan(struct session *s, struct session *other,
                                    struct xfer_rows *rows, bool read, bool open_only,
                                    struct xfer_local_planned *p, char *detail, size_t detail_len)
{
    struct b10d *d = s->d;
    *p = (struct xfer_local_planned){ 0 };
    /* A WRITE's destination grid must lie in the other rank's regions, as for a picker. */
    b10_status_t status =
        read || (rows->picks != NULL &&
                 xfer_grid_inside(&other->mem, &rows->picks->remote, rows->count))
            ? xfer_local_grid_new(d, rows, read, read ? other : s, read ? s : other, open_only,
                                  &p->grid, &p->plan, &p->ns)
            : B10_ERR_UNSUPPORTED;
    if (status == B10_ERR_UNSUPPORTED)
        status = xfer_local_picker(d, rows, read, other, &p->picker, &p->plan, &p->ns);
    if (status == B10_ERR_NO_MEMORY) {
        snprintf(detail, detail_len, "out of memory for the plan of %zu spans", rows->count);
        return status;
    }
    if (status != B10_OK)
        status = xfer_plan(d, rows, read, &p->plan, &p->ns, detail, detail_len);
    return status;
}

/*
 * A WRITE or READ of rank s with a rank of this daemon: checked as the
 * other rank's daemon would check it, planned (in parts where it can be),
 * listed with both ranks.
 */
b10_status_t xfer_local_new(struct session *s, struct peer *self, const B10__SubmitXfer *req,
                            struct xfer_rows *rows, struct xfer **xfer_p, char *detail,
                            size_t detail_len)
{
    struct b10d *d = s->d;
    bool read = req->op == B10__OP__OP_READ;
    struct session *other = rank_find(d, req->remote_agent);
    size_t count = rows->count;
    enum access_op op = read ? ACCESS_READ : ACCESS_WRITE;
    struct access_origin origin;
    enum access_grant grant;
    b10_status_t status;

    if (other == NULL) {
        snprintf(detail, detail_len, "no rank named '%.200s' is connected to this daemon",
                 req->remote_agent);
        return B10_ERR_UNKNOWN_AGENT;
    }
    uint64_t checked_from = uv_hrtime();
    if ((status = xfer_admit_limits(s, count, detail, detail_len)) != B10_OK ||
        (status = xfer_check_local(s, rows, false, detail, detail_len)) != B10_OK)
        return status;
    /* The other rank's leave, as its daemon would ask it of a rank of another node. */
    access_origin(&origin, self, s->agent);
    /* Short of a full grant, its regions' leave is asked span by span. */
    char scratch[8];
    if (access_grant(other, &origin, op, scratch, sizeof(scratch)) != ACCESS_FULL &&
        (status = xfer_rows_spans(rows, detail, detail_len)) != B10_OK)
        return status;
    status = access_spans(other, &origin, op, rows->remote, count, req->sync_msg.len > 0,
                          &grant, detail, detail_len);
    if (status != B10_OK)
        return status;
    if (req->sync_msg.len > 0 && !rank_notice_room(d, other, req->sync_msg.len)) {
        snprintf(detail, detail_len, "notices for '%.200s' wait unread (--max-notice-bytes)",
                 req->remote_agent);
        return B10_ERR_BUSY;
    }
    struct xfer_local_planned p;
    if ((status = xfer_local_plan(s, other, rows, read, grant == ACCESS_OPEN_ONLY, &p, detail,
                                  detail_len)) != B10_OK)
        return status;
    struct plan *plan = p.plan;
    struct plan_picker *picker = p.picker;
    struct xfer_grid *grid = p.grid;
    /* Its side inside its registrations, as for a transfer from another node. */
    if (read)
        status = xfer_check_local(other, rows, true, detail, detail_len);
    else if (picker == NULL && grid == NULL)
        status = xfer_check_dst(plan, &other->mem,
                                rows->picks != NULL ? &rows->picks->remote : NULL, detail,
                                detail_len);
    if (status != B10_OK) {
        plan_picker_free(picker);
        xfer_local_grid_free(grid);
        plan_free(plan);
        return status == B10_ERR_NOT_REGISTERED ? B10_ERR_REMOTE_REJECTED : status;
    }
    struct xfer *x = xfer_new_submitted(d, XFER_LOCAL, s, plan, req->deadline_ms, checked_from,
                                        p.ns);
    if (x == NULL) {
        plan_picker_free(picker);
        xfer_local_grid_free(grid);
        return B10_ERR_NO_MEMORY;
    }
    if (picker != NULL) {
        x->picker = picker;
        x->picker_part = XFER_PART_FIRST;
    }
    x->grid = grid;
    x->local_read = read;
    x->staged = d->test_local_staged;
    x->from = read ? other : s;
    x->to = read ? s : other;
    x->open_only = grant == ACCESS_OPEN_ONLY;
    snprintf(x->local_agent, sizeof(x->local_agent), "%s", s->agent);
    snprintf(x->remote_agent, sizeof(x->remote_agent), "%s", other->agent);
    list_insert_tail(&s->xfers, &x->session_node);
    list_insert_tail(&other->locals, &x->other_node);
    s->nxfers++;
    d->stats.xfers_submitted++;
    if (xfer_set_sync(x, req->sync_msg.data, req->sync_msg.len) != B10_OK) {
        xfer_discard(x);
        return B10_ERR_NO_MEMORY;
    }
    x->notice_reserved = req->sync_msg.len;
    rank_notice_reserve(d, other, x->notice_reserved);
    if (x->picker != NULL)
        d->stats.xfers_planned_in_parts++;
    if (x->grid != NULL)
        d->stats.xfers_grid_copied++;
    *xfer_p = x;
    log_debug("transfer %016" PRIx64 ": %s %s %s here, %zu spans, %" PRIu64 " bytes", x->id, s->agent,
              read ? "←" : "→", other->agent, count, plan->total);
    return B10_OK;
}

void xfer_local_forget_rank(struct session *s)
{
    while (!list_empty(&s->locals)) {
        struct xfer *x = list_entry(s->locals.next, struct xfer, other_node);
        xfer_fail(x, B10_ERR_CLIENT_GONE, "rank '%.200s', whose memory it %s, disconnected",
                  s->agent, x->local_read ? "read" : "wrote");
        if (x->from == s)
            x->from = NULL;
        if (x->to == s)
            x->to = NULL;
    }
}

/* ---------------------------------------------------------------- its end (xfer_role_ops) */

static void xfer_local_landed(struct xfer *x)
{
    struct b10d *d = x->d;

    d->stats.xfers_succeeded++;
    stats_landed(&d->hists, x->role, (double)(d->now_ms(d) - x->started_ms) / 1e3, x->plan_ms / 1e3,
                 x->plan->total, x->plan->npieces);
    char pipe[256], parts[64] = "";
    xfer_pipe_describe(x, pipe, sizeof(pipe));
    if (x->parts > 0)
        snprintf(parts, sizeof(parts), ", then planned in %u parts, %.2f ms, as it copied",
                 x->parts, (double)x->parts_ns / 1e6);
    else if (x->grid != NULL)
        snprintf(parts, sizeof(parts), ", copied by the GPU as rows of two grids");
    log_info("local %s %016" PRIx64 " %s %s landed: %" PRIu64 " bytes in %u chunks, %" PRIu64
             " ms of a %" PRIu64 " ms deadline (checked and planned in %.1f ms before%s; %s)",
             x->local_read ? "read" : "write", x->id, x->local_read ? "from" : "to",
             x->remote_agent, x->plan->total, x->plan->nchunks, d->now_ms(d) - x->started_ms,
             x->deadline_ms - x->started_ms, x->plan_ms, parts, pipe);
    /* The other rank hears the sync message once its bytes landed (or were read) first. */
    struct session *noticed = xfer_noticed(x);
    if (noticed != NULL && x->sync_length > 0)
        rank_notice(d, noticed, x->local_agent, x->sync, x->sync_length);
    if (x->session != NULL)
        xfer_tell_rank(x);
}

/* A local transfer registers no tags: no wire. */
static void xfer_local_each_tag(struct xfer *x, void (*fn)(struct xfer *x, uint64_t tag))
{
}

static uint32_t xfer_local_ntags(const struct xfer *x)
{
    return 0;
}

const struct xfer_role_ops xfer_local_role = {
    .name = "local",
    .landed = xfer_local_landed,
    .failed = xfer_role_failed,
    .report = xfer_role_report,
    .each_tag = xfer_local_each_tag,
    .ntags = xfer_local_ntags,
};
