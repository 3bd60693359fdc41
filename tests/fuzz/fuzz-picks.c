/*
 * fuzz-picks — libFuzzer target for a submit whose spans are rows picked
 * from two grids (daemon/base/picks.c, SubmitXfer.arena_picks): the grids
 * from the frame and the indices in the arena are all the rank's.
 *
 * Input: 8 bytes the count; per side 1 byte its count of bases (0-15), then
 * u64 per_base, stride and length, then its bases; the rest is the arena.
 * Values with their top bit clear are folded small (below), so that most
 * inputs reach the indices; those with it set stay as they are.
 * Both grids are checked as session.c checks them; arena_take must read
 * nothing outside the arena and hand over 8 bytes a pick; then, when
 * picks_spans accepts them, every span must be its row (computed here by
 * division), every index inside its grid, no span wrapping, and the tables
 * must go through plan_build as session.c hands them to the engine; and
 * plan_build_picks, from the picks themselves, must make plan_build's plan
 * or leave the request to it, never plan one plan_build refuses; and
 * plan_picker, a part at a time, must take exactly what plan_build_picks
 * takes and make its plan, chunk by chunk within the bound.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arena-input.h"
#include "frame.h"
#include "picks.h"
#include "plan.h"

/*
 * The same request through plan_picker in parts of 1,000 picks: it takes it
 * exactly where plan_build_picks did (want_st; memory aside), its chunks
 * are full but the last, and its plan is want's.
 */
static void picker_check(const struct picks_grid *l, const struct picks_grid *r,
                         const uint8_t *picks, size_t count, b10_status_t want_st,
                         const struct plan *want)
{
    struct plan_picker *pp = NULL;
    struct plan *got = NULL;
    b10_status_t st = plan_picker_new(l, r, picks, picks + count * 4, count, 4u << 20, &pp,
                                      &got);
    if (st != B10_OK && st != B10_ERR_UNSUPPORTED && st != B10_ERR_NO_MEMORY)
        abort();
    if (st == B10_ERR_NO_MEMORY || want_st == B10_ERR_NO_MEMORY) {     /* memory aside */
        plan_picker_free(pp);
        plan_free(got);
        return;
    }
    if ((st == B10_OK) != (want_st == B10_OK))
        abort();
    if (st != B10_OK) {
        if (pp != NULL || got != NULL)
            abort();
        return;
    }
    while (!plan_picker_done(pp))
        plan_picker_next(pp, 1000);
    plan_picker_free(pp);
    uint64_t bytes = 0;
    for (uint32_t c = 0; c < got->nchunks; c++) {
        const struct plan_chunk *ch = &got->chunks[c];
        uint64_t in = 0;
        if ((uint64_t)ch->first + ch->count > got->npieces)
            abort();
        for (uint32_t i = ch->first; i < ch->first + ch->count; i++)
            in += got->pieces[i].len;
        if (in != ch->bytes || ch->bytes == 0 || ch->bytes > (4u << 20) ||
            (c + 1 < got->nchunks && ch->bytes != (4u << 20)))
            abort();
        bytes += in;
    }
    if (bytes != want->total || got->total != want->total || got->npieces != want->npieces ||
        got->nchunks != want->nchunks ||
        memcmp(got->pieces, want->pieces, want->npieces * sizeof(*want->pieces)) != 0 ||
        memcmp(got->chunks, want->chunks, want->nchunks * sizeof(*want->chunks)) != 0)
        abort();
    plan_free(got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One side's grid from the input: false when the input ends first. */
static bool take_grid(const uint8_t **p, size_t *left, struct picks_grid *g, size_t *bases_len)
{
    if (*left < 1 + 24)
        return false;
    size_t nbases = (*p)[0] % 16;
    g->per_base = frame_get_u64(*p + 1);
    g->stride = frame_get_u64(*p + 9);
    g->length = frame_get_u64(*p + 17);
    /* Small grids reach their last rows: per_base folded, as a rank's pool would be; a
     * stride and a length with their top bit clear folded below 16 MiB, so that most
     * grids pass their checks and the indices are what is fuzzed. */
    if (g->per_base > 4096)
        g->per_base %= 4096;
    if (!(g->stride >> 63))
        g->stride %= 1u << 24;
    if (!(g->length >> 63))
        g->length %= 1u << 24;
    *p += 25;
    *left -= 25;
    if (*left < nbases * 8)
        return false;
    g->bases = *p;
    g->nbases = nbases;
    *bases_len = nbases * 8;
    *p += nbases * 8;
    *left -= nbases * 8;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    uint64_t count = frame_get_u64(data);
    if (!(count >> 63))
        count %= 65536;        /* counts the arena holds, mostly; fuzz-arena has the rest */
    const uint8_t *p = data + 8;
    size_t left = size - 8, llen, rlen;
    struct picks_grid l, r;
    if (!take_grid(&p, &left, &l, &llen) || !take_grid(&p, &left, &r, &rlen))
        return 0;
    char detail[256];
    if (picks_grid_check(&l, llen, "local", detail, sizeof(detail)) != B10_OK ||
        picks_grid_check(&r, rlen, "remote", detail, sizeof(detail)) != B10_OK)
        return 0;
    if (picks_grid_rows(&l) == 0 || picks_grid_rows(&l) > UINT32_MAX ||
        picks_grid_rows(&r) == 0 || picks_grid_rows(&r) > UINT32_MAX)
        abort();

    uint8_t *picks = NULL;
    b10_status_t st = arena_input_take(p, left, count, 4, &picks);
    if (st != B10_OK)
        return 0;
    if (count == 0 || count * 8 > left || memcmp(picks, p, count * 8) != 0)
        abort();
    uint8_t *tables = malloc(count * 2 * SPAN_BYTES);
    if (tables == NULL) {
        free(picks);
        return 0;
    }
    st = picks_spans(&l, &r, picks, count, tables, detail, sizeof(detail));
    if (st == B10_OK) {
        if (l.length != r.length)
            abort();
        for (uint64_t i = 0; i < count; i++) {
            uint64_t li = frame_get_u32(picks + i * 4), ri = frame_get_u32(picks + count * 4 + i * 4);
            if (li >= picks_grid_rows(&l) || ri >= picks_grid_rows(&r))
                abort();
            uint64_t la = frame_get_u64(l.bases + (li / l.per_base) * 8) + (li % l.per_base) * l.stride;
            uint64_t ra = frame_get_u64(r.bases + (ri / r.per_base) * 8) + (ri % r.per_base) * r.stride;
            const uint8_t *ls = tables + i * SPAN_BYTES, *rs = tables + (count + i) * SPAN_BYTES;
            if (frame_get_u64(ls) != la || frame_get_u64(rs) != ra ||
                frame_get_u64(ls + 8) != l.length || frame_get_u64(rs + 8) != r.length ||
                la + l.length < la || ra + r.length < ra)
                abort();
        }
        /* xfer_check_local's bound on the bytes (--max-xfer-bytes, 256 GiB), then the planner. */
        struct plan *plan = NULL;
        if (l.length <= (UINT64_C(256) << 30) / count)
            st = plan_build(tables, tables + count * SPAN_BYTES, count, 4u << 20, &plan, detail,
                            sizeof(detail));
        if (plan != NULL && plan->total != count * l.length)
            abort();
        /* The planner of the picks themselves: plan_build's plan, or none where it refused. */
        if (l.length <= (UINT64_C(256) << 30) / count) {
            struct plan *fast = NULL;
            b10_status_t fst = plan_build_picks(&l, &r, picks, picks + count * 4, count, 4u << 20,
                                                &fast);
            if (fst == B10_OK && (st != B10_OK || fast->npieces != plan->npieces ||
                                  fast->nchunks != plan->nchunks || fast->total != plan->total ||
                                  memcmp(fast->pieces, plan->pieces,
                                         plan->npieces * sizeof(*plan->pieces)) != 0 ||
                                  memcmp(fast->chunks, plan->chunks,
                                         plan->nchunks * sizeof(*plan->chunks)) != 0))
                abort();
            if (fst != B10_OK && (fast != NULL || (fst != B10_ERR_UNSUPPORTED &&
                                                   fst != B10_ERR_NO_MEMORY)))
                abort();
            picker_check(&l, &r, picks, count, fst, fast);
            plan_free(fast);
        }
        plan_free(plan);
    } else {
        /* A request picks_spans refuses is never planned from its picks. */
        struct plan *fast = NULL;
        if (plan_build_picks(&l, &r, picks, picks + count * 4, count, 4u << 20, &fast) == B10_OK)
            abort();
        picker_check(&l, &r, picks, count, B10_ERR_UNSUPPORTED, NULL);
    }
    free(tables);
    free(picks);
    return 0;
}
