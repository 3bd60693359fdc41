/* plan.c — see plan.h. */
#include "plan.h"

#include <assert.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "plan-pack.h"


struct plan_span {
    uint64_t src, dst, len;
};

/* The widest radix digit: 2^11 counters stay in the L1 cache. */
#define PLAN_DIGIT_MAX_BITS 11
/* At most this many digit passes over one segment of key bits (64 bits / 11 + 1). */
#define PLAN_PASSES_MAX 7

static inline uint64_t plan_key(const struct plan_span *s, bool by_dst)
{
    return by_dst ? s->dst : s->src;
}

/* How many spans ahead a walk in sorted order asks for: about a DRAM latency of work. */
#define PLAN_PREFETCH 16

/*
 * What one pass over the spans learnt of a side's keys: which bits differ
 * (the OR of every key XOR the first: one register where an OR and an AND of
 * them took two, in a loop that tracks both sides), whether they came in order.
 */
struct plan_keys {
    uint64_t first, differ;
    bool sorted;
};

static inline void plan_keys_init(struct plan_keys *k, uint64_t first)
{
    *k = (struct plan_keys){ first, 0, true };
}

static inline void plan_keys_add(struct plan_keys *k, uint64_t key, uint64_t prev)
{
    k->sorted &= key >= prev;
    k->differ |= key ^ k->first;
}

/*
 * Sort n spans by key (destination or source), stably: spans of equal keys
 * stay in request order. keys is what the reading pass learnt of them.
 * Returns the order (indices into spans, written to order), or NULL when
 * the spans are in order already.
 *
 * A request of KV blocks holds up to a million spans, and planning runs on
 * the loop thread at both ends of every transfer, so this is a radix sort,
 * not qsort's callbacks (82k spans took 27 ms that way, several percent of a
 * 2.5 GiB transfer). A record is one 64-bit word: the key's bits above the
 * span's index, so that a pass moves 8 bytes, not a span. Its digits cover
 * only the bits where the keys differ, in as few passes of at most 11 bits as
 * those take: the addresses of one KV pool differ in 20 to 30 bits, so two or
 * three passes. The records are built and every pass's digits counted in one
 * read of the spans, so that a pass is one scatter. Keys that differ in more
 * bits than fit beside the index are sorted a segment at a time, lowest
 * first, each stable pass keeping the order the ones before made. recs and
 * tmp hold n records each.
 */
static const uint32_t *plan_sort(const struct plan_span *spans, size_t n, bool by_dst,
                                 const struct plan_keys *keys, uint64_t *recs, uint64_t *tmp,
                                 uint32_t *order)
{
    uint64_t differ = keys->differ;
    if (keys->sorted || differ == 0)
        return NULL;
    /* n >= 2 here: the index takes 1 to 31 bits, the key part the rest. */
    unsigned index_bits = 64 - (unsigned)__builtin_clzll((uint64_t)(n - 1));
    uint64_t index_mask = (UINT64_C(1) << index_bits) - 1;
    unsigned low = (unsigned)__builtin_ctzll(differ);
    unsigned end = 64 - (unsigned)__builtin_clzll(differ);
    uint64_t *from = recs, *to = tmp;
    static_assert(64 / PLAN_DIGIT_MAX_BITS + 1 <= PLAN_PASSES_MAX, "passes of a segment");
    for (unsigned seg = low; seg < end; seg += 64 - index_bits) {
        unsigned bits = end - seg < 64 - index_bits ? end - seg : 64 - index_bits;
        uint64_t key_mask = (UINT64_C(1) << bits) - 1;
        unsigned passes = (bits + PLAN_DIGIT_MAX_BITS - 1) / PLAN_DIGIT_MAX_BITS;
        unsigned width = (bits + passes - 1) / passes;
        uint64_t mask = (UINT64_C(1) << width) - 1;
        uint32_t count[PLAN_PASSES_MAX][1u << PLAN_DIGIT_MAX_BITS];
        memset(count, 0, passes * sizeof(count[0]));
        for (size_t i = 0; i < n; i++) {
            size_t index = seg == low ? i : (size_t)(from[i] & index_mask);
            uint64_t r = (plan_key(&spans[index], by_dst) >> seg & key_mask) << index_bits | index;
            from[i] = r;
            for (unsigned pass = 0; pass < passes; pass++)
                count[pass][r >> (index_bits + pass * width) & mask]++;
        }
        for (unsigned pass = 0; pass < passes; pass++) {
            plan_radix_pass(from, to, n, index_bits + pass * width, mask, count[pass]);
            uint64_t *swap = from;
            from = to;
            to = swap;
        }
    }
    for (size_t i = 0; i < n; i++)
        order[i] = (uint32_t)(from[i] & index_mask);
    return order;
}

struct plan_range {
    uint64_t start, end;
};

static int plan_range_cmp(const void *a, const void *b)
{
    const struct plan_range *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

bool plan_covers(const struct plan *outer, const struct plan *inner)
{
    if (inner->total != outer->total || outer->npieces == 0)
        return inner->total == outer->total && inner->npieces == 0;
    struct plan_range *r = malloc(outer->npieces * sizeof(*r));
    if (r == NULL)
        return false;
    for (uint32_t i = 0; i < outer->npieces; i++)
        r[i] = (struct plan_range){ outer->pieces[i].dst, outer->pieces[i].dst + outer->pieces[i].len };
    qsort(r, outer->npieces, sizeof(*r), plan_range_cmp);
    /* Merge what touches: a piece may then span two of outer's that lie side by side. */
    uint32_t n = 0;
    for (uint32_t i = 0; i < outer->npieces; i++) {
        if (n > 0 && r[i].start <= r[n - 1].end) {
            if (r[i].end > r[n - 1].end)
                r[n - 1].end = r[i].end;
        } else {
            r[n++] = r[i];
        }
    }
    bool ok = true;
    for (uint32_t i = 0; ok && i < inner->npieces; i++) {
        uint64_t start = inner->pieces[i].dst, end = start + inner->pieces[i].len;
        /* The last range that starts at or before this piece. */
        uint32_t lo = 0, hi = n;
        while (hi - lo > 1) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (r[mid].start <= start)
                lo = mid;
            else
                hi = mid;
        }
        ok = end >= start && r[lo].start <= start && end <= r[lo].end;
    }
    free(r);
    return ok;
}

void plan_free(struct plan *plan)
{
    if (plan == NULL)
        return;
    free(plan->pieces);
    free(plan->chunks);
    free(plan);
}

struct plan *plan_rows(size_t count, uint64_t len, uint32_t per_chunk)
{
    uint64_t total;
    if (count == 0 || count > UINT32_MAX || len == 0 || per_chunk == 0 ||
        __builtin_mul_overflow((uint64_t)count, len, &total))
        return NULL;
    uint32_t nchunks = (uint32_t)((count + per_chunk - 1) / per_chunk);
    struct plan *plan = calloc(1, sizeof(*plan));
    if (plan == NULL || (plan->chunks = malloc(nchunks * sizeof(*plan->chunks))) == NULL) {
        free(plan);
        return NULL;
    }
    for (uint32_t c = 0; c < nchunks; c++) {
        uint32_t first = c * per_chunk;
        uint32_t n = count - first < per_chunk ? (uint32_t)(count - first) : per_chunk;
        plan->chunks[c] = (struct plan_chunk){ first, n, n * len };
    }
    plan->nchunks = nchunks;
    plan->npieces = (uint32_t)count;
    plan->total = total;
    return plan;
}

struct plan *plan_alloc(size_t max_pieces, size_t max_chunks)
{
    struct plan *plan = calloc(1, sizeof(*plan));
    if (plan == NULL)
        return NULL;
    plan->pieces = malloc(max_pieces * sizeof(*plan->pieces));
    plan->chunks = malloc(max_chunks * sizeof(*plan->chunks));
    if (plan->pieces == NULL || plan->chunks == NULL) {
        plan_free(plan);
        return NULL;
    }
    return plan;
}

/*
 * Give back what a plan sized for max_pieces and max_chunks did not fill,
 * where that is much (kept as it is if the allocator cannot): a transfer
 * holds its plan while it runs, and merged spans can leave most of the
 * bound unused. A plan that filled a quarter keeps it: shrinking its block made
 * the allocator hand the next plan fresh pages, whose faults cost more
 * than the pass the bound saves.
 */
void plan_trim(struct plan *plan, uint64_t max_pieces, uint64_t max_chunks)
{
    if (plan->npieces > 0 && plan->npieces < max_pieces / 4) {
        struct plan_piece *p = realloc(plan->pieces, plan->npieces * sizeof(*p));
        if (p != NULL)
            plan->pieces = p;
    }
    if (plan->nchunks > 0 && plan->nchunks < max_chunks / 4) {
        struct plan_chunk *c = realloc(plan->chunks, plan->nchunks * sizeof(*c));
        if (c != NULL)
            plan->chunks = c;
    }
}


/*
 * Destinations of one size that is a power of two, each at a whole number of
 * sizes from the lowest (a KV pool's blocks), overlap only where two are the
 * same: a bitmap of those slots decides in one pass, where sorting them cost
 * about 10 ns a span. Returns false when the spans are not of that shape, or
 * their slots too sparse for words (n 64-bit words), and the sort decides.
 * Else *dup_p is the lowest slot written twice, or UINT64_MAX for none.
 */
static bool plan_dst_slots(const struct plan_span *spans, size_t n, uint64_t dmin, uint64_t dmax,
                           uint64_t *words, uint64_t *dup_p)
{
    uint64_t len = spans[0].len;
    if (n < 2 || (len & (len - 1)) != 0)
        return false;
    unsigned shift = (unsigned)__builtin_ctzll(len);
    uint64_t range = (dmax - dmin) >> shift;          /* the highest slot */
    if (range / 64 >= n)
        return false;
    size_t nwords = (size_t)(range / 64) + 1;
    memset(words, 0, nwords * sizeof(*words));
    uint64_t dup = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        uint64_t off = spans[i].dst - dmin;
        if ((off & (len - 1)) != 0)
            return false;
        uint64_t slot = off >> shift, bit = UINT64_C(1) << (slot & 63);
        if ((words[slot / 64] & bit) != 0 && slot < dup)
            dup = slot;
        words[slot / 64] |= bit;
    }
    *dup_p = dup;
    return true;
}

/*
 * Sources of one size that is a power of two, each at a whole number of
 * sizes from the lowest and no two the same (a KV pool's blocks, each read
 * once): their order by source is a walk of those slots, and each slot
 * holds its span's destination, the source being the slot's own address.
 * One pass fills the slots and the packing walks them in order, reading no
 * span again: the radix sort made five passes (its records, two digits, the
 * order) at about 10 ns a span, and a walk of the spans in that order, a
 * scatter through them, cost as much again. Returns the number of slots
 * (the highest plus one), or 0 when the spans are not of that shape, two
 * share a slot (the sort keeps those in request order), or the slots would
 * outnumber slots_max; then the sort decides.
 */
#define PLAN_SLOT_EMPTY UINT64_MAX      /* no destination: dst + len would wrap */

static uint64_t plan_src_slots(const struct plan_span *spans, size_t n, uint64_t smin,
                               uint64_t smax, uint64_t *slots, size_t slots_max)
{
    uint64_t len = spans[0].len;
    if (n < 2 || (len & (len - 1)) != 0)
        return 0;
    unsigned shift = (unsigned)__builtin_ctzll(len);
    uint64_t range = (smax - smin) >> shift;          /* the highest slot */
    if (range >= slots_max)
        return 0;
    memset(slots, 0xff, (size_t)(range + 1) * sizeof(*slots));
    for (size_t i = 0; i < n; i++) {
        uint64_t off = spans[i].src - smin;
        if ((off & (len - 1)) != 0 || slots[off >> shift] != PLAN_SLOT_EMPTY)
            return 0;
        slots[off >> shift] = spans[i].dst;
    }
    return range + 1;
}

/*
 * Both of the above read straight from the request's tables in one pass,
 * for a request of that shape on both sides (KV blocks: one power-of-two
 * size, whole sizes from the lowest destination and source, no source
 * twice): each source slot takes its destination, each destination slot
 * its bit. Writing the spans out first and walking them twice more moved
 * 2.4 MB more for 100,000 spans. words holds cap 64-bit words: the slots,
 * then the bitmap. Returns the number of slots, *dup_p the lowest
 * destination slot written twice (UINT64_MAX: none); 0 where the request
 * is not of that shape or does not fit, and the spans decide as above.
 * The tables are the caller's own copy: read twice, they hold what the
 * first pass checked, and every slot is bounded all the same.
 */
static uint64_t plan_kv_slots(const uint8_t *src_spans, const uint8_t *dst_spans, size_t n,
                              uint64_t len, uint64_t smin, uint64_t smax, uint64_t dmin,
                              uint64_t dmax, uint64_t *words, size_t cap, uint64_t *dup_p)
{
    if (n < 2 || (len & (len - 1)) != 0)
        return 0;
    unsigned shift = (unsigned)__builtin_ctzll(len);
    uint64_t srange = (smax - smin) >> shift, drange = (dmax - dmin) >> shift;
    /* slots (srange + 1) and bitmap words (drange / 64 + 1) within cap */
    if (srange + 1 >= cap || drange / 64 + 1 > cap - (srange + 1))
        return 0;
    uint64_t nslots = srange + 1, *slots = words, *bits = words + nslots;
    memset(slots, 0xff, (size_t)nslots * sizeof(*slots));
    memset(bits, 0, (size_t)(drange / 64 + 1) * sizeof(*bits));
    uint64_t dup = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        uint64_t src = frame_get_u64(src_spans + i * SPAN_BYTES) - smin;
        uint64_t dst = frame_get_u64(dst_spans + i * SPAN_BYTES) - dmin;
        uint64_t ss = src >> shift, ds = dst >> shift;
        if (((src | dst) & (len - 1)) != 0 || ss >= nslots || ds > drange ||
            slots[ss] != PLAN_SLOT_EMPTY)
            return 0;
        slots[ss] = dst + dmin;
        uint64_t bit = UINT64_C(1) << (ds & 63);
        if ((bits[ds / 64] & bit) != 0 && ds < dup)
            dup = ds;
        bits[ds / 64] |= bit;
    }
    *dup_p = dup;
    return nslots;
}

/* How read_spans left the spans in source order. */
struct plan_order {
    const uint32_t *order;      /* their indices in that order; NULL: request order */
    uint64_t nslots;            /* else, nonzero: slots of one size by source (plan_src_slots) */
    uint64_t smin;              /* the lowest source: slot 0's */
};

/* What the one pass over a request's spans learnt of them (plan_scan_spans). */
struct plan_scan {
    bool one_size;              /* every span len0 bytes long */
    bool overflow;              /* their bytes overflow 64 bits */
    uint64_t len0;              /* the first span's length */
    uint64_t dmin, dmax, smin, smax;    /* the lowest and highest destination and source */
    uint64_t total;             /* their bytes (mod 2^64 where overflow) */
    struct plan_keys src_keys, dst_keys;    /* what the sorts need */
};

/*
 * Check each span alone (equal, non-zero lengths; no wrap of the address
 * space) and learn in the same pass what the rest needs: checked and
 * summed, not yet written out, for a KV request needs no span of it again.
 */
static b10_status_t plan_scan_spans(const uint8_t *src_spans, const uint8_t *dst_spans,
                                    size_t count, struct plan_scan *sc, char *detail,
                                    size_t detail_len)
{
    uint64_t prev_src = frame_get_u64(src_spans), prev_dst = frame_get_u64(dst_spans);

    *sc = (struct plan_scan){ .one_size = true, .len0 = frame_get_u64(src_spans + 8),
                              .dmin = UINT64_MAX, .smin = UINT64_MAX };
    plan_keys_init(&sc->src_keys, prev_src);
    plan_keys_init(&sc->dst_keys, prev_dst);
    for (size_t i = 0; i < count; i++) {
        uint64_t src = frame_get_u64(src_spans + i * SPAN_BYTES);
        uint64_t len = frame_get_u64(src_spans + i * SPAN_BYTES + 8);
        uint64_t dst = frame_get_u64(dst_spans + i * SPAN_BYTES);
        uint64_t dlen = frame_get_u64(dst_spans + i * SPAN_BYTES + 8);
        if (len == 0 || len != dlen) {
            snprintf(detail, detail_len, "span %zu: lengths %" PRIu64 " and %" PRIu64
                     " must be equal and non-zero", i, len, dlen);
            return B10_ERR_INVALID_ARG;
        }
        if (src + len < src || dst + len < dst) {
            snprintf(detail, detail_len, "span %zu wraps the address space", i);
            return B10_ERR_INVALID_ARG;
        }
        /* Said only once the destinations are known not to overlap, as before. */
        sc->overflow |= sc->total + len < sc->total;
        sc->total += len;
        sc->one_size &= len == sc->len0;
        sc->dmin = dst < sc->dmin ? dst : sc->dmin;
        sc->dmax = dst > sc->dmax ? dst : sc->dmax;
        sc->smin = src < sc->smin ? src : sc->smin;
        sc->smax = src > sc->smax ? src : sc->smax;
        /* What the sorts need to know, learnt here rather than in a pass of their own. */
        plan_keys_add(&sc->src_keys, src, prev_src);
        plan_keys_add(&sc->dst_keys, dst, prev_dst);
        prev_src = src;
        prev_dst = dst;
    }
    return B10_OK;
}

/*
 * Spans of one size len whose destination slot dup (from dmin) holds two:
 * named as the sort names them, the slot's first two spans in request order.
 */
static b10_status_t plan_say_overlap(const uint8_t *dst_spans, uint64_t dmin, uint64_t dup,
                                     uint64_t len, char *detail, size_t detail_len)
{
    uint64_t at = dmin + (dup << __builtin_ctzll(len));
    size_t p = 0, c;

    while (frame_get_u64(dst_spans + p * SPAN_BYTES) != at)
        p++;
    for (c = p + 1; frame_get_u64(dst_spans + c * SPAN_BYTES) != at; c++)
        ;
    snprintf(detail, detail_len, "destination spans %zu and %zu overlap", p, c);
    return B10_ERR_INVALID_ARG;
}

/*
 * Read and check the request's spans into spans (request order), refusing
 * overlapping destinations, and leave in *ord how to walk them by source
 * (equal sources in request order) and in *total_p their bytes. recs and
 * tmp hold count records each (and are the slots where ord says so),
 * order count indices.
 */
static b10_status_t plan_read_spans(const uint8_t *src_spans, const uint8_t *dst_spans,
                                    size_t count, struct plan_span *spans, uint64_t *recs,
                                    uint64_t *tmp, uint32_t *order, struct plan_order *ord,
                                    uint64_t *total_p, char *detail, size_t detail_len)
{
    struct plan_scan sc;
    b10_status_t rc;

    if ((rc = plan_scan_spans(src_spans, dst_spans, count, &sc, detail, detail_len)) != B10_OK)
        return rc;
    /* Two spans writing the same destination byte make the result depend on order. */
    uint64_t dup;
    /* recs and tmp, one block: 2 words a span. */
    uint64_t nslots = sc.one_size ? plan_kv_slots(src_spans, dst_spans, count, sc.len0, sc.smin,
                                                  sc.smax, sc.dmin, sc.dmax, recs, 2 * count, &dup)
                                  : 0;
    if (nslots > 0) {
        if (dup != UINT64_MAX)
            return plan_say_overlap(dst_spans, sc.dmin, dup, sc.len0, detail, detail_len);
        if (sc.overflow) {
            snprintf(detail, detail_len, "transfer length overflows 64 bits");
            return B10_ERR_TOO_LARGE;
        }
        /* The packing walks the slots; of the spans it reads the first's length. */
        spans[0] = (struct plan_span){ frame_get_u64(src_spans), frame_get_u64(dst_spans), sc.len0 };
        *ord = (struct plan_order){ NULL, nslots, sc.smin };
        *total_p = sc.total;
        return B10_OK;
    }
    for (size_t i = 0; i < count; i++)
        spans[i] = (struct plan_span){ frame_get_u64(src_spans + i * SPAN_BYTES),
                                       frame_get_u64(dst_spans + i * SPAN_BYTES),
                                       frame_get_u64(src_spans + i * SPAN_BYTES + 8) };
    if (sc.one_size && plan_dst_slots(spans, count, sc.dmin, sc.dmax, recs, &dup)) {
        if (dup != UINT64_MAX)
            return plan_say_overlap(dst_spans, sc.dmin, dup, spans[0].len, detail, detail_len);
    } else {
        const uint32_t *by_dst = plan_sort(spans, count, true, &sc.dst_keys, recs, tmp, order);
        for (size_t i = 1; i < count; i++) {
            uint32_t p = by_dst != NULL ? by_dst[i - 1] : (uint32_t)(i - 1);
            uint32_t c = by_dst != NULL ? by_dst[i] : (uint32_t)i;
            if (spans[c].dst < spans[p].dst + spans[p].len) {
                snprintf(detail, detail_len, "destination spans %u and %u overlap", p, c);
                return B10_ERR_INVALID_ARG;
            }
        }
    }
    if (sc.overflow) {
        snprintf(detail, detail_len, "transfer length overflows 64 bits");
        return B10_ERR_TOO_LARGE;
    }
    *ord = (struct plan_order){ NULL, 0, sc.smin };
    /* recs and tmp, free again and one block, hold the slots: 2 a span. */
    if (!sc.src_keys.sorted && sc.one_size)
        ord->nslots = plan_src_slots(spans, count, sc.smin, sc.smax, recs, 2 * count);
    if (ord->nslots == 0)
        ord->order = plan_sort(spans, count, false, &sc.src_keys, recs, tmp, order);
    *total_p = sc.total;
    return B10_OK;
}

/* The runs n spans make walked as ord says once those contiguous on both sides are merged. */
static uint64_t plan_runs(const struct plan_span *spans, const struct plan_order *ord,
                          const uint64_t *slots, size_t n)
{
    uint64_t runs = 0;
    if (ord != NULL && ord->nslots > 0) {
        /* Slots side by side are contiguous sources; a run goes on where the destination does. */
        uint64_t len = spans[0].len, prev_slot = 0, prev_dst = 0;
        for (uint64_t slot = 0; slot < ord->nslots; slot++) {
            if (slots[slot] == PLAN_SLOT_EMPTY)
                continue;
            runs += runs == 0 || prev_slot + 1 != slot || prev_dst + len != slots[slot];
            prev_slot = slot;
            prev_dst = slots[slot];
        }
        return runs;
    }
    const uint32_t *order = ord != NULL ? ord->order : NULL;
    const struct plan_span *prev = NULL;
    for (size_t i = 0; i < n; i++) {
        const struct plan_span *s = order != NULL ? &spans[order[i]] : &spans[i];
        runs += prev == NULL || prev->src + prev->len != s->src || prev->dst + prev->len != s->dst;
        prev = s;
    }
    return runs;
}

/*
 * Pack n spans of total bytes, walked by source as ord says (NULL order
 * and no slots: as they are), into chunks of at most max_chunk bytes.
 *
 * One pass over the spans: the tables are sized for every span a run of
 * its own (the order is a scatter through memory, and a pass to count the
 * runs first cost as much as the packing), then given back what they did
 * not fill. Only spans so large that this bound overflows a chunk index
 * are counted first, to refuse exactly the plans that need too many chunks.
 */
static b10_status_t plan_pack(const struct plan_span *spans, const struct plan_order *ord,
                              const uint64_t *slots, size_t n, uint64_t total,
                              uint64_t max_chunk, struct plan **plan_p, char *detail,
                              size_t detail_len)
{
    const uint32_t *order = ord != NULL ? ord->order : NULL;

    /* Each split adds at most one chunk. Both terms are bounded first, so no sum wraps. */
    uint64_t full = total / max_chunk, runs = n;
    if (full > UINT32_MAX || runs > UINT32_MAX || full + 2 * runs > UINT32_MAX)
        runs = plan_runs(spans, ord, slots, n);
    if (full > UINT32_MAX || runs > UINT32_MAX || full + 2 * runs > UINT32_MAX) {
        snprintf(detail, detail_len, "transfer of %" PRIu64 " bytes needs too many chunks", total);
        return B10_ERR_TOO_LARGE;
    }
    uint64_t max_chunks = full + runs;
    /* A piece is split once per chunk boundary it crosses: at most one extra piece per chunk. */
    struct plan_packer pk = { plan_alloc(runs + max_chunks, max_chunks), NULL, NULL, max_chunk };
    if (pk.plan == NULL)
        return B10_ERR_NO_MEMORY;

    if (ord != NULL && ord->nslots > 0) {
        /* By source is the slots' own order, each slot's source its address. */
        uint64_t len = spans[0].len;
        unsigned shift = (unsigned)__builtin_ctzll(len);
        for (uint64_t slot = 0; slot < ord->nslots; slot++)
            if (slots[slot] != PLAN_SLOT_EMPTY)
                plan_pack_add(&pk, ord->smin + (slot << shift), slots[slot], len);
    } else {
        for (size_t i = 0; i < n; i++) {
            /* In source order the spans are a scatter through memory: ask for them ahead. */
            if (order != NULL && i + PLAN_PREFETCH < n)
                __builtin_prefetch(&spans[order[i + PLAN_PREFETCH]]);
            const struct plan_span *s = order != NULL ? &spans[order[i]] : &spans[i];
            plan_pack_add(&pk, s->src, s->dst, s->len);
        }
    }
    pk.plan->total = total;
    plan_trim(pk.plan, runs + max_chunks, max_chunks);
    *plan_p = pk.plan;
    return B10_OK;
}

b10_status_t plan_build(const uint8_t *src_spans, const uint8_t *dst_spans, size_t count,
                        uint64_t max_chunk, struct plan **plan_p, char *detail, size_t detail_len)
{
    struct plan *plan = NULL;
    b10_status_t status;

    if (count == 0 || count > UINT32_MAX / 2) {
        snprintf(detail, detail_len, "a transfer needs 1..%u spans", UINT32_MAX / 2);
        return B10_ERR_INVALID_ARG;
    }
    if (max_chunk == 0) {
        snprintf(detail, detail_len, "chunks of 0 bytes");
        return B10_ERR_INVALID_ARG;
    }
    /* The spans, two sort records and an index: 44 bytes a span. */
    struct plan_span *spans = malloc(count * (sizeof(*spans) + 2 * sizeof(uint64_t) +
                                              sizeof(uint32_t)));
    if (spans == NULL)
        return B10_ERR_NO_MEMORY;
    uint64_t *recs = (uint64_t *)(spans + count);
    uint32_t *order_buf = (uint32_t *)(recs + 2 * count);
    uint64_t total;
    struct plan_order ord;
    status = plan_read_spans(src_spans, dst_spans, count, spans, recs, recs + count, order_buf,
                             &ord, &total, detail, detail_len);
    if (status != B10_OK)
        goto out;

    status = plan_pack(spans, &ord, recs, count, total, max_chunk, &plan, detail, detail_len);
    if (status != B10_OK)
        goto out;
    *plan_p = plan;
    plan = NULL;
out:
    plan_free(plan);
    free(spans);
    return status;
}

b10_status_t plan_rechunk(struct plan *plan, uint64_t max_chunk)
{
    struct plan_span *spans = malloc((plan->npieces ? plan->npieces : 1) * sizeof(*spans));
    struct plan *packed = NULL;
    char detail[128];

    if (spans == NULL)
        return B10_ERR_NO_MEMORY;
    /* Packing joins again the pieces split at the old chunk boundaries. */
    for (uint32_t i = 0; i < plan->npieces; i++)
        spans[i] = (struct plan_span){ plan->pieces[i].src, plan->pieces[i].dst, plan->pieces[i].len };
    b10_status_t status = plan_pack(spans, NULL, NULL, plan->npieces, plan->total, max_chunk,
                                    &packed, detail, sizeof(detail));
    free(spans);
    if (status != B10_OK)
        return status;
    free(plan->pieces);
    free(plan->chunks);
    *plan = *packed;
    free(packed);
    return B10_OK;
}

/* CONTROL's chunk table: each chunk's piece count, u32 a chunk. NULL without memory. */
static uint8_t *plan_encode_chunks(const struct plan *plan, size_t *chunk_len_p)
{
    size_t chunk_len = (size_t)plan->nchunks * 4;
    uint8_t *chunk_pieces = malloc(chunk_len ? chunk_len : 1);
    if (chunk_pieces == NULL)
        return NULL;
    for (uint32_t c = 0; c < plan->nchunks; c++)
        frame_put_u32(chunk_pieces + 4 * c, plan->chunks[c].count);
    *chunk_len_p = chunk_len;
    return chunk_pieces;
}

b10_status_t plan_encode(const struct plan *plan, uint8_t **chunk_pieces_p, size_t *chunk_len_p,
                         uint8_t **pieces_p, size_t *pieces_len_p)
{
    size_t pieces_len = (size_t)plan->npieces * SPAN_BYTES;
    uint8_t *chunk_pieces = plan_encode_chunks(plan, chunk_len_p);
    uint8_t *pieces = malloc(pieces_len ? pieces_len : 1);

    if (chunk_pieces == NULL || pieces == NULL) {
        free(chunk_pieces);
        free(pieces);
        return B10_ERR_NO_MEMORY;
    }
    for (uint32_t p = 0; p < plan->npieces; p++) {
        frame_put_u64(pieces + SPAN_BYTES * p, plan->pieces[p].dst);
        frame_put_u64(pieces + SPAN_BYTES * p + 8, plan->pieces[p].len);
    }
    *chunk_pieces_p = chunk_pieces;
    *pieces_p = pieces;
    *pieces_len_p = pieces_len;
    return B10_OK;
}

b10_status_t plan_encode_slots(const struct plan *plan, struct plan_slots *slots_p,
                               uint8_t **chunk_pieces_p, size_t *chunk_len_p)
{
    if (plan->npieces == 0)
        return B10_ERR_UNSUPPORTED;
    /* The unit: the shortest piece, which every length and offset must be a multiple of. */
    uint64_t unit = UINT64_MAX, base = UINT64_MAX, units = 0;
    for (uint32_t p = 0; p < plan->npieces; p++) {
        unit = plan->pieces[p].len < unit ? plan->pieces[p].len : unit;
        base = plan->pieces[p].dst < base ? plan->pieces[p].dst : base;
    }
    /* A KV block is a power of two: shifts and masks, where a division a piece cost 1 ms in 10^5. */
    bool pow2 = (unit & (unit - 1)) == 0;
    unsigned shift = (unsigned)__builtin_ctzll(unit);
    for (uint32_t p = 0; p < plan->npieces; p++) {
        uint64_t off = plan->pieces[p].dst - base, len = plan->pieces[p].len;
        bool whole = pow2 ? ((off | len) & (unit - 1)) == 0 : off % unit == 0 && len % unit == 0;
        if (!whole)
            return B10_ERR_UNSUPPORTED;
        uint64_t n = pow2 ? len >> shift : len / unit, slot = pow2 ? off >> shift : off / unit;
        /* Every slot of the piece below 2^32 (n bounded first, so that n - 1 cannot wrap the test). */
        if (n > (uint64_t)UINT32_MAX + 1 || slot > UINT32_MAX - (n - 1))
            return B10_ERR_UNSUPPORTED;
        units += n;
        /* Merged runs cost a slot a unit: past a quarter of the pieces the full form is smaller. */
        if (units >= 4 * (uint64_t)plan->npieces)
            return B10_ERR_UNSUPPORTED;
    }
    size_t chunk_len = (size_t)plan->nchunks * 4;
    uint8_t *slots = malloc((size_t)units * 4), *chunk_pieces = malloc(chunk_len ? chunk_len : 1);
    if (slots == NULL || chunk_pieces == NULL) {
        free(slots);
        free(chunk_pieces);
        return B10_ERR_NO_MEMORY;
    }
    size_t at = 0;
    for (uint32_t c = 0; c < plan->nchunks; c++) {
        const struct plan_chunk *chunk = &plan->chunks[c];
        size_t first = at;
        for (uint32_t p = chunk->first; p < chunk->first + chunk->count; p++) {
            uint64_t off = plan->pieces[p].dst - base, len = plan->pieces[p].len;
            uint32_t slot = (uint32_t)(pow2 ? off >> shift : off / unit);
            uint64_t n = pow2 ? len >> shift : len / unit;
            for (uint64_t k = 0; k < n; k++)
                frame_put_u32(slots + 4 * at++, slot + (uint32_t)k);
        }
        frame_put_u32(chunk_pieces + 4 * c, (uint32_t)(at - first));
    }
    *slots_p = (struct plan_slots){ base, unit, slots, (size_t)units * 4 };
    *chunk_pieces_p = chunk_pieces;
    *chunk_len_p = chunk_len;
    return B10_OK;
}

/* Where a CONTROL's pieces come from: the full table, or slots of one length. */
struct plan_source {
    const uint8_t *pieces;      /* SPAN_BYTES a piece; NULL: slots */
    const struct plan_slots *slots;
};

/* Piece p of src: false when it lies past the top of the address space. */
static inline bool plan_source_piece(const struct plan_source *src, size_t p, uint64_t *dst_p,
                                     uint64_t *len_p)
{
    if (src->pieces != NULL) {
        *dst_p = frame_get_u64(src->pieces + SPAN_BYTES * p);
        *len_p = frame_get_u64(src->pieces + SPAN_BYTES * p + 8);
        return true;
    }
    /* The length is below 2^32 (plan_decode_slots checked it), the slot too: no product wraps. */
    uint64_t off = (uint64_t)frame_get_u32(src->slots->slots + 4 * p) * src->slots->len;
    *dst_p = src->slots->base + off;
    *len_p = src->slots->len;
    return off <= UINT64_MAX - src->slots->base;
}

/* plan_decode's checks and the plan they make, for npieces pieces from src. */
static b10_status_t plan_decode_source(const uint8_t *chunk_pieces, const struct plan_source *src,
                                       size_t npieces, uint32_t nchunks, uint64_t total,
                                       uint64_t max_chunk, uint64_t max_pieces,
                                       struct plan **plan_p, char *detail, size_t detail_len)
{
    if (npieces > max_pieces || npieces > UINT32_MAX || npieces < nchunks) {
        snprintf(detail, detail_len, "control carries %zu pieces (limit %" PRIu64 ")", npieces,
                 max_pieces);
        return npieces > max_pieces ? B10_ERR_TOO_LARGE : B10_ERR_PEER_PROTOCOL;
    }
    struct plan *plan = plan_alloc(npieces, nchunks);
    if (plan == NULL)
        return B10_ERR_NO_MEMORY;

    uint64_t sum = 0;
    size_t p = 0, q = 0;         /* the next piece of src, and of the plan */
    for (uint32_t c = 0; c < nchunks; c++) {
        uint32_t count = frame_get_u32(chunk_pieces + 4 * c);
        struct plan_chunk *chunk = &plan->chunks[c];
        if (count == 0 || count > npieces - p) {
            snprintf(detail, detail_len, "chunk %u claims %u pieces", c, count);
            goto bad;
        }
        *chunk = (struct plan_chunk){ (uint32_t)q, 0, 0 };
        for (uint32_t k = 0; k < count; k++, p++) {
            uint64_t dst, len;
            bool in = plan_source_piece(src, p, &dst, &len);
            if (!in || len == 0 || dst + len < dst || len > max_chunk - chunk->bytes) {
                snprintf(detail, detail_len, "chunk %u piece %u: bad %s %" PRIu64, c, k,
                         in ? "length" : "slot", in ? len : dst);
                goto bad;
            }
            chunk->bytes += len;
            /* Slots side by side in a chunk are one run the sender merged: one piece again. */
            struct plan_piece *last = chunk->count > 0 ? &plan->pieces[q - 1] : NULL;
            if (src->pieces == NULL && last != NULL && last->dst + last->len == dst) {
                last->len += len;
                continue;
            }
            plan->pieces[q++] = (struct plan_piece){ 0, dst, len };
            chunk->count++;
        }
        sum += chunk->bytes;
    }
    if (p != npieces || sum != total) {
        snprintf(detail, detail_len, "control pieces add up to %" PRIu64 " bytes in %zu pieces, "
                 "not %" PRIu64 " in %zu", sum, p, total, npieces);
        goto bad;
    }
    /* Merged slots leave the tail unused: given back, so that what the plan holds is what a
     * CONTROL of its pieces in the full form would have been charged for (xfer-recv.c). */
    if (q < npieces) {
        struct plan_piece *pieces = realloc(plan->pieces, q * sizeof(*pieces));
        if (pieces != NULL)
            plan->pieces = pieces;
    }
    plan->npieces = (uint32_t)q;
    plan->nchunks = nchunks;
    plan->total = total;
    *plan_p = plan;
    return B10_OK;
bad:
    plan_free(plan);
    return B10_ERR_PEER_PROTOCOL;
}

b10_status_t plan_decode(const uint8_t *chunk_pieces, size_t chunk_len, const uint8_t *pieces,
                         size_t pieces_len, uint32_t nchunks, uint64_t total, uint64_t max_chunk,
                         uint64_t max_pieces, struct plan **plan_p, char *detail, size_t detail_len)
{
    if (nchunks == 0 || chunk_len != (size_t)nchunks * 4 || pieces_len % SPAN_BYTES != 0) {
        snprintf(detail, detail_len, "control tables malformed: %u chunks, %zu and %zu bytes",
                 nchunks, chunk_len, pieces_len);
        return B10_ERR_PEER_PROTOCOL;
    }
    const struct plan_source src = { pieces, NULL };
    return plan_decode_source(chunk_pieces, &src, pieces_len / SPAN_BYTES, nchunks, total,
                              max_chunk, max_pieces, plan_p, detail, detail_len);
}

b10_status_t plan_decode_slots(const uint8_t *chunk_pieces, size_t chunk_len,
                               const struct plan_slots *slots, uint32_t nchunks, uint64_t total,
                               uint64_t max_chunk, uint64_t max_pieces, struct plan **plan_p,
                               char *detail, size_t detail_len)
{
    if (nchunks == 0 || chunk_len != (size_t)nchunks * 4 || slots->slots_len % 4 != 0 ||
        slots->len == 0 || slots->len > max_chunk || slots->len > UINT32_MAX) {
        snprintf(detail, detail_len, "control slots malformed: %u chunks, %zu and %zu bytes, "
                 "pieces of %" PRIu64, nchunks, chunk_len, slots->slots_len, slots->len);
        return B10_ERR_PEER_PROTOCOL;
    }
    const struct plan_source src = { NULL, slots };
    return plan_decode_source(chunk_pieces, &src, slots->slots_len / 4, nchunks, total,
                              max_chunk, max_pieces, plan_p, detail, detail_len);
}
