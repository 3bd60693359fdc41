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
 * plan_picker makes the same kind of plan a part at a time, for a transfer
 * that starts copying before it is planned whole: the same checks of every
 * pick first, then each part's picks sorted among themselves and packed
 * onto the end of the plan.
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

/*
 * Pack count picks in source order among themselves: recs (2 * count
 * records) takes them, sorted unless they came so.
 */
static void picks_pack_sorted(struct plan_packer *pk, const struct picks_order *so,
                              const struct picks_order *dor, const uint8_t *src_picks,
                              const uint8_t *dst_picks, size_t count, uint64_t *recs)
{
    unsigned passes, width;
    picks_passes(so->side.rows, &passes, &width);
    uint32_t digits[PICKS_PASSES_MAX][1u << PICKS_DIGIT_MAX_BITS];
    memset(digits, 0, passes * sizeof(digits[0]));
    const uint64_t *walk = recs;
    if (!picks_records(so, src_picks, dst_picks, count, recs, passes, width, digits))
        walk = picks_sort(recs, recs + count, count, passes, width, digits);
    uint64_t len = so->side.g->length;
    for (size_t i = 0; i < count; i++)
        plan_pack_add(pk, picks_key_addr(so, walk[i] >> 32),
                      picks_addr(&dor->side, (uint32_t)walk[i]), len);
}

b10_status_t plan_build_picks(const struct picks_grid *src, const struct picks_grid *dst,
                              const uint8_t *src_picks, const uint8_t *dst_picks, size_t count,
                              uint64_t max_chunk, struct plan **plan_p)
{
    uint64_t len = src->length, total, max_chunks;
    if (picks_admit(src, dst, count, max_chunk, &total, &max_chunks) != B10_OK)
        return B10_ERR_UNSUPPORTED;
    struct picks_order so, dor;
    if (!picks_order_init(&so, src))
        return B10_ERR_UNSUPPORTED;
    if (!picks_order_init(&dor, dst)) {
        picks_order_free(&so);
        return B10_ERR_UNSUPPORTED;
    }
    b10_status_t status = B10_ERR_UNSUPPORTED;
    uint64_t nbits = dor.side.rows, nslots = so.side.rows;
    uint64_t *recs = NULL, *bits = NULL;
    uint32_t *slots = NULL;
    struct plan *plan = NULL;
    if (nbits / PICKS_BITS_PER_PICK > count)
        goto out;
    bits = calloc(nbits / 64 + 1, sizeof(*bits));
    if (nslots <= 2 * (uint64_t)count)
        slots = calloc(nslots, sizeof(*slots));
    if (bits == NULL || (nslots <= 2 * (uint64_t)count && slots == NULL)) {
        status = B10_ERR_NO_MEMORY;
        goto out;
    }
    bool slotted;
    if (!picks_read(&so, &dor, src_picks, dst_picks, count, slots, &slotted, bits))
        goto out;

    struct plan_packer pk = { plan_alloc(count + max_chunks, max_chunks), NULL, NULL, max_chunk };
    if ((plan = pk.plan) == NULL) {
        status = B10_ERR_NO_MEMORY;
        goto out;
    }
    if (slotted) {
        /* The slots in order, base by base: each row's address without a divide. */
        const struct picks_grid *g = so.side.g;
        for (size_t b = 0, k = 0; b < g->nbases; b++)
            for (uint64_t r = 0; r < g->per_base; r++, k++)
                if (slots[k] != 0)
                    plan_pack_add(&pk, so.sorted[b] + r * g->stride,
                                  picks_addr(&dor.side, slots[k] - 1), len);
    } else {
        /* The places' bits, in as few passes of at most 11 bits as they take. */
        if ((recs = malloc(2 * count * sizeof(*recs))) == NULL) {
            status = B10_ERR_NO_MEMORY;
            goto out;
        }
        picks_pack_sorted(&pk, &so, &dor, src_picks, dst_picks, count, recs);
    }
    plan->total = total;
    plan_trim(plan, count + max_chunks, max_chunks);
    *plan_p = plan;
    plan = NULL;
    status = B10_OK;
out:
    plan_free(plan);
    free(recs);
    free(bits);
    free(slots);
    picks_order_free(&so);
    picks_order_free(&dor);
    return status;
}

/* ---------------------------------------------------------------- a part at a time */

struct plan_picker {
    struct picks_grid src, dst;     /* the request's grids, their bases in bases */
    uint8_t *bases;
    struct picks_order so, dor;
    const uint8_t *src_picks, *dst_picks;
    size_t count, next;             /* picks, and the first not planned */
    uint64_t *recs;                 /* two records a pick of a part */
    size_t most_part;
    struct plan_packer pk;
    uint64_t max_pieces, max_chunks;
};

b10_status_t plan_picker_new(const struct picks_grid *src, const struct picks_grid *dst,
                             const uint8_t *src_picks, const uint8_t *dst_picks, size_t count,
                             uint64_t max_chunk, size_t most_part, struct plan_picker **picker_p,
                             struct plan **plan_p)
{
    uint64_t total, max_chunks;
    if (most_part == 0 || picks_admit(src, dst, count, max_chunk, &total, &max_chunks) != B10_OK)
        return B10_ERR_UNSUPPORTED;
    struct plan_picker *pp = calloc(1, sizeof(*pp));
    if (pp == NULL)
        return B10_ERR_NO_MEMORY;
    /* The grids outlive the request that carried them: their bases are copied. */
    pp->bases = malloc((src->nbases + dst->nbases) * 8);
    if (pp->bases == NULL) {
        free(pp);
        return B10_ERR_NO_MEMORY;
    }
    memcpy(pp->bases, src->bases, src->nbases * 8);
    memcpy(pp->bases + src->nbases * 8, dst->bases, dst->nbases * 8);
    pp->src = *src;
    pp->src.bases = pp->bases;
    pp->dst = *dst;
    pp->dst.bases = pp->bases + src->nbases * 8;
    pp->src_picks = src_picks;
    pp->dst_picks = dst_picks;
    pp->count = count;
    b10_status_t status = B10_ERR_UNSUPPORTED;
    if (!picks_order_init(&pp->so, &pp->src) || !picks_order_init(&pp->dor, &pp->dst))
        goto fail;
    /* Every pick checked now, the whole request: no part may fail for what it holds. */
    uint64_t *bits = calloc(pp->dor.side.rows / 64 + 1, sizeof(*bits));
    if (bits == NULL) {
        status = B10_ERR_NO_MEMORY;
        goto fail;
    }
    bool slotted;
    bool ok = picks_read(&pp->so, &pp->dor, src_picks, dst_picks, count, NULL, &slotted, bits);
    free(bits);
    if (!ok)
        goto fail;
    /* Every part's records now: a transfer's later parts cannot run out of memory. */
    pp->most_part = most_part < count ? most_part : count;
    pp->recs = malloc(2 * pp->most_part * sizeof(*pp->recs));
    if (pp->recs == NULL) {
        status = B10_ERR_NO_MEMORY;
        goto fail;
    }
    pp->max_pieces = count + max_chunks;
    pp->max_chunks = max_chunks;
    pp->pk = (struct plan_packer){ plan_alloc(pp->max_pieces, max_chunks), NULL, NULL, max_chunk };
    if (pp->pk.plan == NULL) {
        status = B10_ERR_NO_MEMORY;
        goto fail;
    }
    pp->pk.plan->total = total;
    *picker_p = pp;
    *plan_p = pp->pk.plan;
    return B10_OK;
fail:
    picks_order_free(&pp->dor);
    picks_order_free(&pp->so);
    free(pp->recs);
    free(pp->bases);
    free(pp);
    return status;
}

void plan_picker_next(struct plan_picker *pp, size_t n)
{
    size_t m = pp->count - pp->next < n ? pp->count - pp->next : n;
    if (m > pp->most_part)
        m = pp->most_part;
    if (m == 0)
        return;
    picks_pack_sorted(&pp->pk, &pp->so, &pp->dor, pp->src_picks + pp->next * 4,
                      pp->dst_picks + pp->next * 4, m, pp->recs);
    pp->next += m;
    if (pp->next == pp->count) {
        plan_trim(pp->pk.plan, pp->max_pieces, pp->max_chunks);
        pp->pk.chunk = NULL;        /* the plan's arrays may have moved */
        pp->pk.last = NULL;
        free(pp->recs);
        pp->recs = NULL;
    }
}

bool plan_picker_done(const struct plan_picker *pp)
{
    return pp->next == pp->count;
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
    picks_order_free(&pp->so);
    picks_order_free(&pp->dor);
    free(pp->recs);
    free(pp->bases);
    free(pp);
}
