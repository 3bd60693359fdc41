/*
 * plan-picks.c — plan_build_picks (plan.h): the plan of rows picked from
 * two grids, made from the indices without writing their spans out.
 *
 * plan_build orders a request's spans by source address. Rows of a grid
 * whose rows do not overlap (a stride no shorter than the length) and
 * whose bases' rows do not interleave lie in address order once the bases
 * are: row r of the base ranked k by address comes at k * per_base + r.
 * That key fits 32 bits (a grid has fewer than 2^32 rows). Where the
 * source rows are few beside the picks (at most two a pick) and none is
 * picked twice, each row's slot takes its pick's destination index and the
 * packing walks the slots, base by base. Else a pick sorts as one 64-bit
 * record, the key above the destination index: no spans, no indirection
 * through an order array, two radix passes for a pool of up to 2^22 rows.
 * The destination rows of such a grid overlap only where they are the same
 * row: a bitmap of them decides. The packing is plan.c's,
 * walked in the same order (ties in request order), so the plan is the one
 * plan_build makes of the spans picks_spans writes.
 *
 * Everything unusual is left to that path (B10_ERR_UNSUPPORTED): grids of
 * another shape, an index outside its grid, a destination row picked twice,
 * totals that overflow. It names the refusal, as it always did.
 *
 * plan_picker makes the same plan a part at a time, for a transfer that
 * starts copying before it is planned whole: every check and the source
 * order first, then the packing, part by part; plan_build_picks is the
 * picker packing every pick at once.
 */
#include "plan.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "picks.h"
#include "plan-pack.h"

/* As plan.c's sort: 2^11 counters stay in the L1 cache. */
#define PICKS_DIGIT_MAX_BITS 11
#define PICKS_PASSES_MAX 3     /* 32 key bits */
/* A destination bitmap of at most this many bits a pick (8 bytes: the size of its record). */
#define PICKS_BITS_PER_PICK 64

/* plan_grid_pairs' bitmap of destination rows may have this many bits whatever the picks (2 MiB). */
#define PICKS_GRID_BITS (UINT64_C(1) << 24)

/* A grid in address order: its bases sorted, each one's rank. */
struct picks_order {
    struct picks_side side;
    uint64_t *sorted;       /* bases by address */
    uint32_t *rank;         /* rank[b]: base b's place in sorted */
};

struct picks_base {
    uint64_t addr;
    uint32_t index;
};

static int picks_base_cmp(const void *a, const void *b)
{
    const struct picks_base *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Again after a failed picks_order_init, or of one never made (zeroed): nothing. */
static void picks_order_free(struct picks_order *o)
{
    free(o->sorted);
    free(o->rank);
    o->sorted = NULL;
    o->rank = NULL;
}

/*
 * Order a checked grid's bases; false where its rows are not in address
 * order that way (a stride shorter than the length, or one base's rows
 * reaching another's), or without memory: the spans path decides then.
 */
static bool picks_order_init(struct picks_order *o, const struct picks_grid *g)
{
    *o = (struct picks_order){ 0 };
    picks_side_init(&o->side, g);
    if (g->stride < g->length)
        return false;
    size_t n = g->nbases;
    struct picks_base *b = malloc(n * sizeof(*b));
    o->sorted = malloc(n * sizeof(*o->sorted));
    o->rank = malloc(n * sizeof(*o->rank));
    bool ok = b != NULL && o->sorted != NULL && o->rank != NULL;
    for (size_t i = 0; ok && i < n; i++)
        b[i] = (struct picks_base){ frame_get_u64(g->bases + i * 8), (uint32_t)i };
    if (ok && n > 1)
        qsort(b, n, sizeof(*b), picks_base_cmp);
    /* A base's rows end at base + reach, below 2^64 (picks_grid_check). */
    uint64_t reach = (g->per_base - 1) * g->stride + g->length;
    for (size_t i = 0; ok && i < n; i++) {
        ok = i == 0 || b[i].addr - b[i - 1].addr >= reach;
        o->sorted[i] = b[i].addr;
        o->rank[b[i].index] = (uint32_t)i;
    }
    free(b);
    if (!ok)
        picks_order_free(o);
    return ok;
}

/* Row k's place in address order. */
static inline uint64_t picks_key(const struct picks_order *o, uint64_t k)
{
    uint64_t b = picks_base_of(&o->side, k);
    return (uint64_t)o->rank[b] * o->side.g->per_base + (k - b * o->side.g->per_base);
}

/* The address of the row at place key. */
static inline uint64_t picks_key_addr(const struct picks_order *o, uint64_t key)
{
    uint64_t b = picks_base_of(&o->side, key);
    return o->sorted[b] + (key - b * o->side.g->per_base) * o->side.g->stride;
}

/*
 * Check every pick and mark its destination row in bits; false where the
 * spans path must decide. With slots (not NULL: the source rows, zeroed),
 * each source row's slot takes its destination index + 1, and *slotted_p
 * says whether that held (no source row twice). Else, or where it did not
 * hold, recs takes a record a pick (source place above, destination index
 * below) and digits the counts of each pass's digits.
 */
static bool picks_read(const struct picks_order *src, const struct picks_order *dst,
                       const uint8_t *src_picks, const uint8_t *dst_picks, size_t count,
                       uint32_t *slots, bool *slotted_p, uint64_t *bits)
{
    bool slotted = slots != NULL;
    for (size_t i = 0; i < count; i++) {
        uint32_t s = frame_get_u32(src_picks + i * 4), d = frame_get_u32(dst_picks + i * 4);
        if (s >= src->side.rows || d >= dst->side.rows)
            return false;
        uint64_t dk = picks_key(dst, d), bit = UINT64_C(1) << (dk & 63);
        if ((bits[dk / 64] & bit) != 0)
            return false;
        bits[dk / 64] |= bit;
        if (slotted) {
            uint64_t sk = picks_key(src, s);
            slotted = slots[sk] == 0;
            slots[sk] = d + 1;
        }
    }
    *slotted_p = slotted;
    return true;
}

static bool picks_records(const struct picks_order *src, const uint8_t *src_picks,
                          const uint8_t *dst_picks, size_t count, uint64_t *recs, unsigned passes,
                          unsigned width, uint32_t (*digits)[1u << PICKS_DIGIT_MAX_BITS])
{
    uint64_t mask = (UINT64_C(1) << width) - 1, prev = 0;
    bool sorted = true;
    for (size_t i = 0; i < count; i++) {
        uint64_t sk = picks_key(src, frame_get_u32(src_picks + i * 4));
        sorted &= sk >= prev;
        prev = sk;
        recs[i] = sk << 32 | frame_get_u32(dst_picks + i * 4);
        for (unsigned p = 0; p < passes; p++)
            digits[p][sk >> (p * width) & mask]++;
    }
    return sorted;
}

/* Stable LSD passes over the source places; returns where the records end up. */
static uint64_t *picks_sort(uint64_t *recs, uint64_t *tmp, size_t count, unsigned passes,
                            unsigned width, uint32_t (*digits)[1u << PICKS_DIGIT_MAX_BITS])
{
    uint64_t mask = (UINT64_C(1) << width) - 1;
    uint64_t *from = recs, *to = tmp;
    for (unsigned p = 0; p < passes; p++) {
        plan_radix_pass(from, to, count, 32 + p * width, mask, digits[p]);
        uint64_t *swap = from;
        from = to;
        to = swap;
    }
    return from;
}

/*
 * The shapes both planners take: B10_OK with the request's bytes in *total_p
 * and its most chunks in *max_chunks_p, else B10_ERR_UNSUPPORTED.
 */
static b10_status_t picks_admit(const struct picks_grid *src, const struct picks_grid *dst,
                                size_t count, uint64_t max_chunk, uint64_t *total_p,
                                uint64_t *max_chunks_p)
{
    uint64_t len = src->length, total;
    if (count < 2 || count > UINT32_MAX / 2 || max_chunk == 0 || dst->length != len ||
        __builtin_mul_overflow((uint64_t)count, len, &total))
        return B10_ERR_UNSUPPORTED;
    /* Bounds of plan.c's packing: every pick a run of its own, each split one chunk more. */
    uint64_t full = total / max_chunk;
    if (full > UINT32_MAX || full + 2 * (uint64_t)count > UINT32_MAX)
        return B10_ERR_UNSUPPORTED;
    /*
     * Bounded by the picks before any work a grid's size sets: its bases are sorted and
     * its destination rows a bitmap, and a rank may send millions of bases for two picks.
     */
    if (src->nbases > 2 * (uint64_t)count || dst->nbases > 2 * (uint64_t)count ||
        picks_grid_rows(dst) / PICKS_BITS_PER_PICK > count)
        return B10_ERR_UNSUPPORTED;
    *total_p = total;
    *max_chunks_p = full + count;
    return B10_OK;
}

/* How many radix passes of what width sort places of a grid of rows rows. */
static void picks_passes(uint64_t rows, unsigned *passes_p, unsigned *width_p)
{
    uint64_t top = rows - 1;
    unsigned kbits = top == 0 ? 1 : 64 - (unsigned)__builtin_clzll(top);
    unsigned passes = (kbits + PICKS_DIGIT_MAX_BITS - 1) / PICKS_DIGIT_MAX_BITS;
    *passes_p = passes;
    *width_p = (kbits + passes - 1) / passes;
}

/* ---------------------------------------------------------------- the picker */

/*
 * Both planners' state: plan_build_picks packs every pick at once,
 * plan_picker a part at a time, in the same order, so that their plans are
 * the same piece for piece. All the checks and the order are made first
 * (picker_prepare); the packing walks the slots or the sorted records.
 */
struct plan_picker {
    struct picks_grid src, dst;     /* a picker's own copies of the request's grids */
    uint8_t *bases;                 /* their bases; NULL when the grids are the caller's */
    struct picks_order so, dor;
    size_t count, packed;           /* picks, and those packed so far */
    uint32_t *slots;                /* each source place's destination index + 1, or NULL: */
    uint64_t *recs;                 /* the picks' records, two a pick, */
    const uint64_t *walk;           /* in source order */
    uint64_t place, base, row;      /* slots: the next place to look at, its base and row */
    struct plan_packer pk;
    uint64_t max_pieces, max_chunks;
};

static void picker_release(struct plan_picker *pp)
{
    picks_order_free(&pp->so);
    picks_order_free(&pp->dor);
    free(pp->slots);
    free(pp->recs);
    pp->slots = NULL;
    pp->recs = NULL;
    pp->walk = NULL;
}

/*
 * Everything but the packing, for pp zeroed with its grids set: B10_OK,
 * B10_ERR_UNSUPPORTED (left to the spans), B10_ERR_NO_MEMORY. On failure
 * pp holds nothing (its grids aside).
 */
static b10_status_t picker_prepare(struct plan_picker *pp, const uint8_t *src_picks,
                                   const uint8_t *dst_picks, size_t count, uint64_t max_chunk)
{
    uint64_t total, max_chunks;
    if (picks_admit(&pp->src, &pp->dst, count, max_chunk, &total, &max_chunks) != B10_OK ||
        !picks_order_init(&pp->so, &pp->src) || !picks_order_init(&pp->dor, &pp->dst)) {
        picker_release(pp);
        return B10_ERR_UNSUPPORTED;
    }
    pp->count = count;
    b10_status_t status = B10_ERR_NO_MEMORY;
    uint64_t nslots = pp->so.side.rows;
    uint64_t *bits = calloc(pp->dor.side.rows / 64 + 1, sizeof(*bits));
    if (nslots <= 2 * (uint64_t)count)
        pp->slots = calloc(nslots, sizeof(*pp->slots));
    if (bits == NULL || (nslots <= 2 * (uint64_t)count && pp->slots == NULL))
        goto fail;
    bool slotted;
    if (!picks_read(&pp->so, &pp->dor, src_picks, dst_picks, count, pp->slots, &slotted, bits)) {
        status = B10_ERR_UNSUPPORTED;
        goto fail;
    }
    free(bits);
    bits = NULL;
    if (!slotted) {
        /* A source row picked twice, or rows too many for slots: the picks sorted. */
        free(pp->slots);
        pp->slots = NULL;
        if ((pp->recs = malloc(2 * count * sizeof(*pp->recs))) == NULL)
            goto fail;
        unsigned passes, width;
        picks_passes(nslots, &passes, &width);
        uint32_t digits[PICKS_PASSES_MAX][1u << PICKS_DIGIT_MAX_BITS];
        memset(digits, 0, passes * sizeof(digits[0]));
        pp->walk = pp->recs;
        if (!picks_records(&pp->so, src_picks, dst_picks, count, pp->recs, passes, width, digits))
            pp->walk = picks_sort(pp->recs, pp->recs + count, count, passes, width, digits);
    }
    pp->max_pieces = count + max_chunks;
    pp->max_chunks = max_chunks;
    pp->pk = (struct plan_packer){ plan_alloc(pp->max_pieces, max_chunks), NULL, NULL, max_chunk };
    if (pp->pk.plan == NULL)
        goto fail;
    pp->pk.plan->total = total;
    return B10_OK;
fail:
    free(bits);
    picker_release(pp);
    return status;
}

/*
 * Pack the next picks, at most n, in source order; the plan trimmed once all
 * are. The packer and the cursor are worked on in locals: through pp, the
 * compiler reloaded them after every piece written (a fifth more time).
 */
static void picker_pack(struct plan_picker *pp, size_t n)
{
    size_t left = pp->count - pp->packed, want = n < left ? n : left, got = 0;
    if (want == 0)
        return;
    uint64_t len = pp->src.length;
    struct plan_packer pk = pp->pk;
    const struct picks_side dside = pp->dor.side;
    if (pp->slots != NULL) {
        /* The slots in order, base by base: each row's address without a divide. */
        const uint32_t *slots = pp->slots;
        const uint64_t *sorted = pp->so.sorted;
        uint64_t per_base = pp->src.per_base, stride = pp->src.stride;
        uint64_t k = pp->place, b = pp->base, r = pp->row;
        while (got < want) {
            uint32_t slot = slots[k];
            if (slot != 0) {
                plan_pack_add(&pk, sorted[b] + r * stride, picks_addr(&dside, slot - 1), len);
                got++;
            }
            k++;
            if (++r == per_base) {
                r = 0;
                b++;
            }
        }
        pp->place = k;
        pp->base = b;
        pp->row = r;
    } else {
        const uint64_t *walk = pp->walk + pp->packed;
        for (; got < want; got++)
            plan_pack_add(&pk, picks_key_addr(&pp->so, walk[got] >> 32),
                          picks_addr(&dside, (uint32_t)walk[got]), len);
    }
    pp->pk = pk;
    pp->packed += got;
    if (pp->packed == pp->count) {
        plan_trim(pp->pk.plan, pp->max_pieces, pp->max_chunks);
        pp->pk.chunk = NULL;        /* the plan's arrays may have moved */
        pp->pk.last = NULL;
        picker_release(pp);
    }
}

b10_status_t plan_grid_pairs(const struct picks_grid *src, const struct picks_grid *dst,
                             const uint8_t *src_picks, const uint8_t *dst_picks, size_t count,
                             uint32_t *pairs)
{
    uint64_t total, src_rows = picks_grid_rows(src), dst_rows = picks_grid_rows(dst);
    struct picks_order dor;
    /*
     * Bounded before any work a grid's size sets: its bases are looked up for every
     * copy and sorted here, its destination rows a bitmap. A KV pool's grid has
     * a base a layer's K or V, and rows for every block of the pool, which a
     * transfer of a few blocks a layer picks few of.
     */
    if (count == 0 || count > UINT32_MAX || src->length != dst->length ||
        __builtin_mul_overflow((uint64_t)count, src->length, &total) ||
        src->nbases > PLAN_GRID_BASES || dst->nbases > PLAN_GRID_BASES ||
        (dst_rows / PICKS_BITS_PER_PICK > count && dst_rows > PICKS_GRID_BITS) ||
        !picks_order_init(&dor, dst))
        return B10_ERR_UNSUPPORTED;
    uint64_t *bits = calloc(dor.side.rows / 64 + 1, sizeof(*bits));
    b10_status_t status = bits != NULL ? B10_OK : B10_ERR_NO_MEMORY;
    for (size_t i = 0; status == B10_OK && i < count; i++) {
        uint32_t s = frame_get_u32(src_picks + i * 4), d = frame_get_u32(dst_picks + i * 4);
        if (s >= src_rows || d >= dst_rows) {
            status = B10_ERR_UNSUPPORTED;
            break;
        }
        /* Rows of the destination grid overlap only where they are the same row. */
        uint64_t dk = picks_key(&dor, d), bit = UINT64_C(1) << (dk & 63);
        if ((bits[dk / 64] & bit) != 0) {
            status = B10_ERR_UNSUPPORTED;
            break;
        }
        bits[dk / 64] |= bit;
        pairs[2 * i] = s;
        pairs[2 * i + 1] = d;
    }
    free(bits);
    picks_order_free(&dor);
    return status;
}

b10_status_t plan_build_picks(const struct picks_grid *src, const struct picks_grid *dst,
                              const uint8_t *src_picks, const uint8_t *dst_picks, size_t count,
                              uint64_t max_chunk, struct plan **plan_p)
{
    struct plan_picker pp = { .src = *src, .dst = *dst };
    b10_status_t status = picker_prepare(&pp, src_picks, dst_picks, count, max_chunk);
    if (status != B10_OK)
        return status;
    picker_pack(&pp, count);
    *plan_p = pp.pk.plan;
    return B10_OK;
}

b10_status_t plan_picker_new(const struct picks_grid *src, const struct picks_grid *dst,
                             const uint8_t *src_picks, const uint8_t *dst_picks, size_t count,
                             uint64_t max_chunk, struct plan_picker **picker_p,
                             struct plan **plan_p)
{
    /* Bounded as plan_build_picks bounds them before the copy: at most two bases a pick. */
    if (count > UINT32_MAX / 2 || src->nbases > 2 * (uint64_t)count ||
        dst->nbases > 2 * (uint64_t)count)
        return B10_ERR_UNSUPPORTED;
    struct plan_picker *pp = calloc(1, sizeof(*pp));
    uint8_t *bases = pp != NULL ? malloc((src->nbases + dst->nbases) * 8) : NULL;
    if (bases == NULL) {
        free(pp);
        return B10_ERR_NO_MEMORY;
    }
    /* The grids outlive the request that carried them: their bases are copied. */
    memcpy(bases, src->bases, src->nbases * 8);
    memcpy(bases + src->nbases * 8, dst->bases, dst->nbases * 8);
    pp->bases = bases;
    pp->src = *src;
    pp->src.bases = bases;
    pp->dst = *dst;
    pp->dst.bases = bases + src->nbases * 8;
    b10_status_t status = picker_prepare(pp, src_picks, dst_picks, count, max_chunk);
    if (status != B10_OK) {
        free(bases);
        free(pp);
        return status;
    }
    *picker_p = pp;
    *plan_p = pp->pk.plan;
    return B10_OK;
}

void plan_picker_next(struct plan_picker *pp, size_t n)
{
    picker_pack(pp, n);
}

bool plan_picker_done(const struct plan_picker *pp)
{
    return pp->packed == pp->count;
}

uint32_t plan_picker_chunks(const struct plan_picker *pp)
{
    const struct plan *plan = pp->pk.plan;
    return (uint32_t)((plan->total + pp->pk.max_chunk - 1) / pp->pk.max_chunk);
}

uint32_t plan_picker_sealed(const struct plan_picker *pp)
{
    const struct plan *plan = pp->pk.plan;
    /* The last chunk grows with the next part, unless it is full. */
    if (plan_picker_done(pp) || plan->nchunks == 0 ||
        plan->chunks[plan->nchunks - 1].bytes == pp->pk.max_chunk)
        return plan->nchunks;
    return plan->nchunks - 1;
}

void plan_picker_free(struct plan_picker *pp)
{
    if (pp == NULL)
        return;
    picker_release(pp);
    free(pp->bases);
    free(pp);
}
