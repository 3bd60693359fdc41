/*
 * test-plan.c — daemon/plan.c: how a WRITE's spans become DATA chunks.
 *
 * Fixed cases pin the rules (sorted by source, merged only when contiguous on
 * both sides, chunks filled to exactly max_chunk, pieces split at chunk
 * boundaries); random span sets over many seeds check the one invariant that
 * matters on the wire: the plan moves exactly the input's bytes, each source
 * byte to its destination byte, once. The decoder gets hostile tables.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frame.h"
#include "plan.h"

#define SPAN_BYTES 16
#define MAX_SPANS 512

struct span {
    uint64_t src, dst, len;
};

/* A plan_p that must stay untouched when a call fails. */
static struct plan sentinel_plan;

/* ---------------------------------------------------------------- helpers */

static uint64_t rng_state;

static void rng_seed(uint64_t seed)
{
    rng_state = seed * UINT64_C(0x9e3779b97f4a7c15) + 1;
}

/* xorshift64*: deterministic per seed, so a failing seed can be replayed. */
static uint64_t rng_next(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * UINT64_C(0x2545f4914f6cdd1d);
}

static uint64_t rng_below(uint64_t n)
{
    return rng_next() % n;
}

/* Encode spans as the two packed client tables (addr, len) each side. */
static void spans_encode(const struct span *spans, size_t n, uint8_t **src_p, uint8_t **dst_p)
{
    uint8_t *src = malloc(n * SPAN_BYTES + 1);
    uint8_t *dst = malloc(n * SPAN_BYTES + 1);
    assert_non_null(src);
    assert_non_null(dst);
    for (size_t i = 0; i < n; i++) {
        frame_put_u64(src + i * SPAN_BYTES, spans[i].src);
        frame_put_u64(src + i * SPAN_BYTES + 8, spans[i].len);
        frame_put_u64(dst + i * SPAN_BYTES, spans[i].dst);
        frame_put_u64(dst + i * SPAN_BYTES + 8, spans[i].len);
    }
    *src_p = src;
    *dst_p = dst;
}

static b10_status_t build(const struct span *spans, size_t n, uint64_t max_chunk,
                          struct plan **plan_p, char *detail, size_t detail_len)
{
    uint8_t *src, *dst;
    spans_encode(spans, n, &src, &dst);
    b10_status_t status = plan_build(src, dst, n, max_chunk, plan_p, detail, detail_len);
    free(src);
    free(dst);
    return status;
}

static struct plan *build_ok(const struct span *spans, size_t n, uint64_t max_chunk)
{
    struct plan *plan = NULL;
    char detail[256] = "";
    b10_status_t status = build(spans, n, max_chunk, &plan, detail, sizeof(detail));
    if (status != B10_OK)
        fail_msg("plan_build: %s (%s)", b10_status_name(status), detail);
    assert_non_null(plan);
    return plan;
}

/* Build must fail with B10_ERR_INVALID_ARG, say why, and leave plan_p alone. */
static void build_rejects(const struct span *spans, size_t n, uint64_t max_chunk)
{
    struct plan *plan = &sentinel_plan;
    char detail[256] = "";
    b10_status_t status = build(spans, n, max_chunk, &plan, detail, sizeof(detail));
    assert_int_equal(status, B10_ERR_INVALID_ARG);
    assert_ptr_equal(plan, &sentinel_plan);
    assert_true(strlen(detail) > 0);
}

static void assert_piece(const struct plan *plan, uint32_t i, uint64_t src, uint64_t dst,
                         uint64_t len)
{
    assert_true(i < plan->npieces);
    if (plan->pieces[i].src != src || plan->pieces[i].dst != dst || plan->pieces[i].len != len)
        fail_msg("piece %u is (src %#llx, dst %#llx, len %llu), want (%#llx, %#llx, %llu)", i,
                 (unsigned long long)plan->pieces[i].src, (unsigned long long)plan->pieces[i].dst,
                 (unsigned long long)plan->pieces[i].len, (unsigned long long)src,
                 (unsigned long long)dst, (unsigned long long)len);
}

static void assert_chunk(const struct plan *plan, uint32_t c, uint32_t first, uint32_t count,
                         uint64_t bytes)
{
    assert_true(c < plan->nchunks);
    assert_int_equal(plan->chunks[c].first, first);
    assert_int_equal(plan->chunks[c].count, count);
    assert_int_equal(plan->chunks[c].bytes, bytes);
}

/*
 * The structural rules every packed plan keeps: chunks take the pieces in
 * order without gaps, each chunk's bytes are its pieces' sum, no chunk is
 * empty or over max_chunk, every chunk but the last is full, and the totals
 * agree.
 */
static void check_structure(const struct plan *plan, uint64_t max_chunk)
{
    uint32_t next = 0;
    uint64_t total = 0;

    assert_true(plan->nchunks > 0);
    for (uint32_t c = 0; c < plan->nchunks; c++) {
        const struct plan_chunk *chunk = &plan->chunks[c];
        uint64_t bytes = 0;
        assert_int_equal(chunk->first, next);
        assert_true(chunk->count > 0);
        assert_true((uint64_t)chunk->first + chunk->count <= plan->npieces);
        for (uint32_t k = 0; k < chunk->count; k++) {
            assert_true(plan->pieces[chunk->first + k].len > 0);
            bytes += plan->pieces[chunk->first + k].len;
        }
        assert_int_equal(chunk->bytes, bytes);
        assert_true(chunk->bytes <= max_chunk);
        if (c + 1 < plan->nchunks)
            assert_int_equal(chunk->bytes, max_chunk);
        next += chunk->count;
        total += bytes;
    }
    assert_int_equal(next, plan->npieces);
    assert_int_equal(total, plan->total);
    assert_int_equal(plan->nchunks, (plan->total + max_chunk - 1) / max_chunk);
}

/*
 * What a sender's plan promises beyond the structure: the merged spans (the
 * pieces once the chunk-boundary splits are undone) in source order, and no
 * two neighbours in one chunk that could have been one piece (contiguous on
 * both sides: plan_build should have merged them). With disjoint sources the
 * pieces themselves are in source order too; with overlapping ones the tail
 * of a split span may lie past the start of the next.
 */
static void check_sender_order(const struct plan *plan, bool disjoint_src)
{
    uint64_t segment_start = 0;

    for (uint32_t c = 0; c < plan->nchunks; c++) {
        const struct plan_chunk *chunk = &plan->chunks[c];
        for (uint32_t k = 1; k < chunk->count; k++) {
            const struct plan_piece *a = &plan->pieces[chunk->first + k - 1];
            const struct plan_piece *b = &plan->pieces[chunk->first + k];
            if (a->src + a->len == b->src && a->dst + a->len == b->dst)
                fail_msg("chunk %u: pieces (%#llx, %#llx, %llu) and (%#llx, %#llx, %llu) should "
                         "have been merged", c, (unsigned long long)a->src,
                         (unsigned long long)a->dst, (unsigned long long)a->len,
                         (unsigned long long)b->src, (unsigned long long)b->dst,
                         (unsigned long long)b->len);
        }
    }
    for (uint32_t i = 0; i < plan->npieces; i++) {
        const struct plan_piece *p = &plan->pieces[i];
        bool continues = i > 0 && plan->pieces[i - 1].src + plan->pieces[i - 1].len == p->src &&
                         plan->pieces[i - 1].dst + plan->pieces[i - 1].len == p->dst;
        if (!continues) {
            if (p->src < segment_start)
                fail_msg("span at source %#llx comes after one at %#llx",
                         (unsigned long long)p->src, (unsigned long long)segment_start);
            segment_start = p->src;
        }
        if (disjoint_src && i > 0)
            assert_true(plan->pieces[i - 1].src < p->src);
    }
}

/* ---------------------------------------------------------------- coalescing */

static void test_merge_contiguous_both_sides(void **state)
{
    /* Given backwards and out of order; one run on both sides. */
    const struct span spans[] = {
        { 0x10300, 0x90300, 0x100 },
        { 0x10100, 0x90100, 0x100 },
        { 0x10200, 0x90200, 0x100 },
        { 0x10000, 0x90000, 0x100 },
    };
    struct plan *plan = build_ok(spans, 4, 1 << 20);

    assert_int_equal(plan->npieces, 1);
    assert_int_equal(plan->nchunks, 1);
    assert_piece(plan, 0, 0x10000, 0x90000, 0x400);
    assert_chunk(plan, 0, 0, 1, 0x400);
    assert_int_equal(plan->total, 0x400);
    plan_free(plan);
}

static void test_no_merge_source_contiguous_only(void **state)
{
    /* Sources touch, destinations do not: two pieces, in source order. */
    const struct span spans[] = {
        { 0x2000, 0x9000, 0x1000 },
        { 0x1000, 0x5000, 0x1000 },
    };
    struct plan *plan = build_ok(spans, 2, 1 << 20);

    assert_int_equal(plan->npieces, 2);
    assert_piece(plan, 0, 0x1000, 0x5000, 0x1000);
    assert_piece(plan, 1, 0x2000, 0x9000, 0x1000);
    assert_chunk(plan, 0, 0, 2, 0x2000);
    plan_free(plan);
}

static void test_no_merge_destination_contiguous_only(void **state)
{
    /* Destinations touch (in both orders of the sources), sources do not. */
    const struct span forward[] = {
        { 0x1000, 0x5000, 0x800 },
        { 0x3000, 0x5800, 0x800 },
    };
    struct plan *plan = build_ok(forward, 2, 1 << 20);
    assert_int_equal(plan->npieces, 2);
    assert_piece(plan, 0, 0x1000, 0x5000, 0x800);
    assert_piece(plan, 1, 0x3000, 0x5800, 0x800);
    plan_free(plan);

    /* Sources contiguous but in the reverse order of the destinations. */
    const struct span crossed[] = {
        { 0x1800, 0x5000, 0x800 },
        { 0x1000, 0x5800, 0x800 },
    };
    plan = build_ok(crossed, 2, 1 << 20);
    assert_int_equal(plan->npieces, 2);
    assert_piece(plan, 0, 0x1000, 0x5800, 0x800);
    assert_piece(plan, 1, 0x1800, 0x5000, 0x800);
    plan_free(plan);
}

static void test_sorted_by_source(void **state)
{
    const struct span spans[] = {
        { 0x7000, 0x100, 0x10 },
        { 0x3000, 0x200, 0x10 },
        { 0x9000, 0x300, 0x10 },
        { 0x1000, 0x400, 0x10 },
        { 0x5000, 0x500, 0x10 },
    };
    struct plan *plan = build_ok(spans, 5, 1 << 20);

    assert_int_equal(plan->npieces, 5);
    assert_piece(plan, 0, 0x1000, 0x400, 0x10);
    assert_piece(plan, 1, 0x3000, 0x200, 0x10);
    assert_piece(plan, 2, 0x5000, 0x500, 0x10);
    assert_piece(plan, 3, 0x7000, 0x100, 0x10);
    assert_piece(plan, 4, 0x9000, 0x300, 0x10);
    assert_int_equal(plan->total, 0x50);
    plan_free(plan);
}

static void test_merge_chain_with_a_break(void **state)
{
    /* a-b merge, b-c only source-contiguous, c-d merge: two pieces. */
    const struct span chain[] = {
        { 0x0c0, 0x5000, 0x40 },    /* c: source follows b, destination does not */
        { 0x000, 0x1000, 0x80 },    /* a */
        { 0x100, 0x5040, 0x20 },    /* d: follows c on both sides */
        { 0x080, 0x1080, 0x40 },    /* b: follows a on both sides */
    };
    struct plan *plan = build_ok(chain, 4, 1 << 20);

    assert_int_equal(plan->npieces, 2);
    assert_piece(plan, 0, 0x000, 0x1000, 0xc0);
    assert_piece(plan, 1, 0x0c0, 0x5000, 0x60);
    assert_chunk(plan, 0, 0, 2, 0x120);
    plan_free(plan);
}

/* ---------------------------------------------------------------- packing */

static void test_pack_exactly_max_chunk(void **state)
{
    const uint64_t max = 4096;
    /* 1000 + 3096 fill chunk 0 exactly; the next span opens chunk 1. */
    const struct span spans[] = {
        { 0x10000, 0x80000, 1000 },
        { 0x20000, 0x90000, 3096 },
        { 0x30000, 0xa0000, 4096 },
    };
    struct plan *plan = build_ok(spans, 3, max);

    assert_int_equal(plan->nchunks, 2);
    assert_int_equal(plan->npieces, 3);
    assert_chunk(plan, 0, 0, 2, 4096);
    assert_chunk(plan, 1, 2, 1, 4096);
    assert_piece(plan, 2, 0x30000, 0xa0000, 4096);
    assert_int_equal(plan->total, 8192);
    check_structure(plan, max);
    plan_free(plan);

    /* One span of exactly max_chunk: one chunk, no empty second one. */
    const struct span one[] = { { 0x1000, 0x2000, max } };
    plan = build_ok(one, 1, max);
    assert_int_equal(plan->nchunks, 1);
    assert_chunk(plan, 0, 0, 1, max);
    plan_free(plan);

    /* One byte more: a second chunk of one byte. */
    const struct span more[] = { { 0x1000, 0x2000, max + 1 } };
    plan = build_ok(more, 1, max);
    assert_int_equal(plan->nchunks, 2);
    assert_piece(plan, 0, 0x1000, 0x2000, max);
    assert_piece(plan, 1, 0x1000 + max, 0x2000 + max, 1);
    assert_chunk(plan, 1, 1, 1, 1);
    plan_free(plan);
}

static void test_split_piece_across_chunks(void **state)
{
    const uint64_t max = 1000;
    /* 300 bytes first, so the big piece starts mid-chunk and splits off-grid. */
    const struct span spans[] = {
        { 0x5003, 0x70007, 3 * max + 17 },
        { 0x1001, 0x60001, 300 },
    };
    struct plan *plan = build_ok(spans, 2, max);

    assert_int_equal(plan->total, 300 + 3 * max + 17);
    assert_int_equal(plan->nchunks, 4);
    assert_int_equal(plan->npieces, 5);
    assert_piece(plan, 0, 0x1001, 0x60001, 300);
    assert_piece(plan, 1, 0x5003, 0x70007, 700);
    assert_piece(plan, 2, 0x5003 + 700, 0x70007 + 700, 1000);
    assert_piece(plan, 3, 0x5003 + 1700, 0x70007 + 1700, 1000);
    assert_piece(plan, 4, 0x5003 + 2700, 0x70007 + 2700, 317);
    assert_chunk(plan, 0, 0, 2, 1000);
    assert_chunk(plan, 1, 2, 1, 1000);
    assert_chunk(plan, 2, 3, 1, 1000);
    assert_chunk(plan, 3, 4, 1, 317);
    check_structure(plan, max);
    plan_free(plan);
}

static void test_odd_sizes_unaligned(void **state)
{
    const uint64_t max = 7;
    const struct span spans[] = {
        { 0x3, 0xfff1, 1 },
        { 0x11, 0xabc5, 13 },
        { 0x101, 0x1, 5 },
    };
    struct plan *plan = build_ok(spans, 3, max);

    /* 1 + 13 + 5 = 19 bytes in chunks of 7, 7, 5. */
    assert_int_equal(plan->total, 19);
    assert_int_equal(plan->nchunks, 3);
    assert_piece(plan, 0, 0x3, 0xfff1, 1);
    assert_piece(plan, 1, 0x11, 0xabc5, 6);
    assert_piece(plan, 2, 0x17, 0xabcb, 7);
    assert_piece(plan, 3, 0x101, 0x1, 5);
    assert_chunk(plan, 0, 0, 2, 7);
    assert_chunk(plan, 1, 2, 1, 7);
    assert_chunk(plan, 2, 3, 1, 5);
    plan_free(plan);

    /* max_chunk of one byte: every byte its own chunk. */
    const struct span tiny[] = { { 0x7, 0x9, 3 } };
    plan = build_ok(tiny, 1, 1);
    assert_int_equal(plan->nchunks, 3);
    for (uint32_t i = 0; i < 3; i++) {
        assert_piece(plan, i, 0x7 + i, 0x9 + i, 1);
        assert_chunk(plan, i, i, 1, 1);
    }
    plan_free(plan);

    /* Near the top of the address space, ending at UINT64_MAX exactly. */
    const struct span top[] = { { UINT64_MAX - 100, UINT64_MAX - 200, 100 } };
    plan = build_ok(top, 1, 64);
    assert_int_equal(plan->nchunks, 2);
    assert_piece(plan, 1, UINT64_MAX - 36, UINT64_MAX - 136, 36);
    plan_free(plan);
}

/* ---------------------------------------------------------------- the byte map */

#define SPACE (1u << 14)          /* the destination side's test address range, bytes */
#define SRC_SPACE (2 * SPACE)     /* the source side's: disjoint sources add their own gaps */

/*
 * A random request: runs laid out on the destination side with random gaps
 * (sometimes none), sources either anywhere (overlapping allowed) or a
 * permutation of disjoint places; each run cut into pieces contiguous on
 * both sides (plan_build must merge them again), all shuffled.
 */
static size_t random_spans(struct span *spans, uint64_t src_base, uint64_t dst_base,
                           bool disjoint_src)
{
    struct span runs[64];
    size_t nruns = 0, n = 0;
    uint64_t cursor = 0;
    uint64_t maxlen = 1 + rng_below(3000);

    while (nruns < 64) {
        uint64_t gap = rng_below(4) == 0 ? 0 : rng_below(100);
        uint64_t len = 1 + rng_below(maxlen);
        if (cursor + gap + len > SPACE)
            break;
        runs[nruns++] = (struct span){ 0, cursor + gap, len };
        cursor += gap + len;
    }
    if (nruns == 0)
        runs[nruns++] = (struct span){ 0, 0, 1 };

    if (disjoint_src) {
        /* Sources: the same lengths in a shuffled order, with their own gaps. */
        size_t order[64];
        for (size_t i = 0; i < nruns; i++)
            order[i] = i;
        for (size_t i = nruns; i > 1; i--) {
            size_t j = rng_below(i), t = order[i - 1];
            order[i - 1] = order[j];
            order[j] = t;
        }
        uint64_t at = 0;
        for (size_t i = 0; i < nruns; i++) {
            at += rng_below(3) == 0 ? 0 : rng_below(50);
            runs[order[i]].src = at;
            at += runs[order[i]].len;
        }
    } else {
        for (size_t i = 0; i < nruns; i++)
            runs[i].src = rng_below(SPACE - runs[i].len + 1);
    }

    for (size_t r = 0; r < nruns && n < MAX_SPANS; r++) {
        uint64_t off = 0;
        while (off < runs[r].len && n < MAX_SPANS) {
            uint64_t left = runs[r].len - off;
            uint64_t take = rng_below(3) == 0 ? 1 + rng_below(left) : left;
            spans[n++] = (struct span){ src_base + runs[r].src + off, dst_base + runs[r].dst + off,
                                        take };
            off += take;
        }
        /* A run cut short by MAX_SPANS simply ends there. */
    }
    for (size_t i = n; i > 1; i--) {
        size_t j = rng_below(i);
        struct span t = spans[i - 1];
        spans[i - 1] = spans[j];
        spans[j] = t;
    }
    return n;
}

/* dst offset -> src offset + 1 (0: unwritten), from the request. */
static void map_from_spans(const struct span *spans, size_t n, uint64_t src_base,
                           uint64_t dst_base, uint32_t *map)
{
    memset(map, 0, SPACE * sizeof(*map));
    for (size_t i = 0; i < n; i++)
        for (uint64_t k = 0; k < spans[i].len; k++)
            map[spans[i].dst - dst_base + k] = (uint32_t)(spans[i].src - src_base + k + 1);
}

/* The same map from the plan, failing if the plan writes a byte twice or out of range. */
static void map_from_plan(const struct plan *plan, uint64_t src_base, uint64_t dst_base,
                          bool with_src, uint32_t *map)
{
    memset(map, 0, SPACE * sizeof(*map));
    for (uint32_t c = 0; c < plan->nchunks; c++) {
        for (uint32_t i = plan->chunks[c].first;
             i < plan->chunks[c].first + plan->chunks[c].count; i++) {
            const struct plan_piece *p = &plan->pieces[i];
            assert_true(p->dst >= dst_base && p->dst - dst_base + p->len <= SPACE);
            if (with_src)
                assert_true(p->src >= src_base && p->src - src_base + p->len <= SRC_SPACE);
            for (uint64_t k = 0; k < p->len; k++) {
                uint32_t *slot = &map[p->dst - dst_base + k];
                if (*slot != 0)
                    fail_msg("destination byte %#llx written twice",
                             (unsigned long long)(p->dst + k));
                *slot = with_src ? (uint32_t)(p->src - src_base + k + 1) : 1;
            }
        }
    }
}

/* The number of pieces a maximal merge of the request gives, for disjoint sources. */
static uint32_t reference_merged(const struct span *spans, size_t n)
{
    struct span sorted[MAX_SPANS];
    uint32_t count = 0;

    memcpy(sorted, spans, n * sizeof(*spans));
    /* Insertion sort by source: sources are disjoint, so the order is unique. */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && sorted[j - 1].src > sorted[j].src; j--) {
            struct span t = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t;
        }
    for (size_t i = 0; i < n; i++)
        if (i == 0 || sorted[i - 1].src + sorted[i - 1].len != sorted[i].src ||
            sorted[i - 1].dst + sorted[i - 1].len != sorted[i].dst)
            count++;
    return count;
}

/* Pieces of the plan once the chunk-boundary splits are undone. */
static uint32_t plan_segments(const struct plan *plan)
{
    uint32_t count = 0;
    for (uint32_t i = 0; i < plan->npieces; i++)
        if (i == 0 || plan->pieces[i - 1].src + plan->pieces[i - 1].len != plan->pieces[i].src ||
            plan->pieces[i - 1].dst + plan->pieces[i - 1].len != plan->pieces[i].dst)
            count++;
    return count;
}

static uint64_t random_max_chunk(void)
{
    switch (rng_below(4)) {
    case 0: return 1 + rng_below(16);
    case 1: return UINT64_C(1) << rng_below(13);
    default: return 1 + rng_below(5000);
    }
}

static void check_roundtrip(const struct plan *plan, uint64_t max_chunk)
{
    uint8_t *chunk_pieces, *pieces;
    size_t chunk_len, pieces_len;
    struct plan *decoded = &sentinel_plan;
    char detail[256] = "";

    assert_int_equal(plan_encode(plan, &chunk_pieces, &chunk_len, &pieces, &pieces_len), 0);
    assert_int_equal(chunk_len, (size_t)plan->nchunks * 4);
    assert_int_equal(pieces_len, (size_t)plan->npieces * SPAN_BYTES);
    b10_status_t status = plan_decode(chunk_pieces, chunk_len, pieces, pieces_len, plan->nchunks,
                                      plan->total, max_chunk, plan->npieces, &decoded, detail,
                                      sizeof(detail));
    if (status != B10_OK)
        fail_msg("plan_decode of an encoded plan: %s (%s)", b10_status_name(status), detail);
    assert_int_equal(decoded->nchunks, plan->nchunks);
    assert_int_equal(decoded->npieces, plan->npieces);
    assert_int_equal(decoded->total, plan->total);
    for (uint32_t c = 0; c < plan->nchunks; c++)
        assert_chunk(decoded, c, plan->chunks[c].first, plan->chunks[c].count,
                     plan->chunks[c].bytes);
    for (uint32_t i = 0; i < plan->npieces; i++)
        assert_piece(decoded, i, 0, plan->pieces[i].dst, plan->pieces[i].len);
    plan_free(decoded);
    free(chunk_pieces);
    free(pieces);
}

static void test_random_byte_map(void **state)
{
    static struct span spans[MAX_SPANS];
    uint32_t *want = malloc(SPACE * sizeof(*want));
    uint32_t *got = malloc(SPACE * sizeof(*got));
    assert_non_null(want);
    assert_non_null(got);

    for (uint64_t seed = 1; seed <= 1500; seed++) {
        rng_seed(seed);
        /* Odd bases: nothing here may assume alignment. */
        uint64_t src_base = UINT64_C(0x7f1200000003) + rng_below(4096);
        uint64_t dst_base = UINT64_C(0x55aa00000001) + rng_below(4096);
        bool disjoint = seed % 2 == 0;
        size_t n = random_spans(spans, src_base, dst_base, disjoint);
        uint64_t max_chunk = random_max_chunk();
        uint64_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += spans[i].len;

        struct plan *plan = build_ok(spans, n, max_chunk);
        assert_int_equal(plan->total, total);
        check_structure(plan, max_chunk);
        check_sender_order(plan, disjoint);
        map_from_spans(spans, n, src_base, dst_base, want);
        map_from_plan(plan, src_base, dst_base, true, got);
        if (memcmp(want, got, SPACE * sizeof(*want)) != 0)
            fail_msg("seed %llu: the plan's byte map differs from the request's",
                     (unsigned long long)seed);
        if (disjoint)
            assert_int_equal(plan_segments(plan), reference_merged(spans, n));

        check_roundtrip(plan, max_chunk);

        /* Re-chunk for a peer with smaller views: the same bytes, repacked. */
        uint64_t smaller = max_chunk > 1 ? 1 + rng_below(max_chunk - 1) : 1;
        uint32_t segments = plan_segments(plan);
        assert_int_equal(plan_rechunk(plan, smaller), B10_OK);
        assert_int_equal(plan->total, total);
        check_structure(plan, smaller);
        check_sender_order(plan, disjoint);
        map_from_plan(plan, src_base, dst_base, true, got);
        if (memcmp(want, got, SPACE * sizeof(*want)) != 0)
            fail_msg("seed %llu: rechunk to %llu changed the byte map", (unsigned long long)seed,
                     (unsigned long long)smaller);
        assert_int_equal(plan_segments(plan), segments);
        check_roundtrip(plan, smaller);
        plan_free(plan);
    }
    free(want);
    free(got);
}

/* ---------------------------------------------------------------- rejections */

static void test_reject_zero_length(void **state)
{
    const struct span spans[] = {
        { 0x1000, 0x2000, 16 },
        { 0x3000, 0x4000, 0 },
    };
    build_rejects(spans, 2, 4096);
    build_rejects(&spans[1], 1, 4096);
}

static void test_reject_unequal_lengths(void **state)
{
    uint8_t src[2 * SPAN_BYTES], dst[2 * SPAN_BYTES];
    struct plan *plan = &sentinel_plan;
    char detail[256] = "";

    frame_put_u64(src, 0x1000);
    frame_put_u64(src + 8, 64);
    frame_put_u64(dst, 0x8000);
    frame_put_u64(dst + 8, 64);
    frame_put_u64(src + 16, 0x2000);
    frame_put_u64(src + 24, 64);
    frame_put_u64(dst + 16, 0x9000);
    frame_put_u64(dst + 24, 65);
    assert_int_equal(plan_build(src, dst, 2, 4096, &plan, detail, sizeof(detail)),
                     B10_ERR_INVALID_ARG);
    assert_ptr_equal(plan, &sentinel_plan);
    assert_non_null(strstr(detail, "span 1"));

    /* A zero on one side only is also unequal. */
    frame_put_u64(dst + 24, 0);
    detail[0] = '\0';
    assert_int_equal(plan_build(src, dst, 2, 4096, &plan, detail, sizeof(detail)),
                     B10_ERR_INVALID_ARG);
    assert_ptr_equal(plan, &sentinel_plan);
    assert_true(strlen(detail) > 0);
}

static void test_reject_wraparound(void **state)
{
    const struct span src_wraps[] = {
        { 0x1000, 0x2000, 16 },
        { UINT64_MAX - 10, 0x8000, 100 },
    };
    const struct span dst_wraps[] = { { 0x1000, UINT64_MAX - 99, 200 } };
    const struct span both_wrap[] = { { UINT64_MAX, UINT64_MAX, 2 } };
    build_rejects(src_wraps, 2, 4096);
    build_rejects(dst_wraps, 1, 4096);
    build_rejects(both_wrap, 1, 4096);
}

static void test_reject_overlapping_destinations(void **state)
{
    const struct span partial[] = {
        { 0x1000, 0x8000, 0x100 },
        { 0x5000, 0x80ff, 0x100 },   /* one byte shared */
    };
    const struct span same[] = {
        { 0x1000, 0x8000, 0x10 },
        { 0x2000, 0x8000, 0x10 },
    };
    const struct span inside[] = {
        { 0x3000, 0x8800, 0x10 },
        { 0x1000, 0x8000, 0x1000 },  /* contains the first */
        { 0x7000, 0x20000, 0x10 },
    };
    /* Not neighbours in the request order, only after sorting by destination. */
    const struct span far[] = {
        { 0x1000, 0x30000, 0x10 },
        { 0x2000, 0x10000, 0x10 },
        { 0x3000, 0x20000, 0x10 },
        { 0x4000, 0x1000f, 0x10 },
    };
    build_rejects(partial, 2, 4096);
    build_rejects(same, 2, 4096);
    build_rejects(inside, 3, 4096);
    build_rejects(far, 4, 4096);

    /* Touching is not overlapping; overlapping sources are allowed (read twice). */
    const struct span touching[] = {
        { 0x1000, 0x8000, 0x100 },
        { 0x1000, 0x8100, 0x100 },
    };
    struct plan *plan = build_ok(touching, 2, 4096);
    assert_int_equal(plan->total, 0x200);
    assert_int_equal(plan->npieces, 2);
    plan_free(plan);
}

static void test_reject_empty_request(void **state)
{
    const struct span one[] = { { 0x1000, 0x2000, 16 } };
    build_rejects(one, 0, 4096);
    /* A zero max_chunk would divide by zero: refused up front. */
    build_rejects(one, 1, 0);
}

/* ---------------------------------------------------------------- decode */

struct tables {
    uint8_t *chunk_pieces;
    size_t chunk_len;
    uint8_t *pieces;
    size_t pieces_len;
    uint32_t nchunks;
    uint64_t total;
};

/* A valid CONTROL table: 3 chunks of max 100 bytes holding 5 pieces. */
static void tables_make(struct tables *t)
{
    const struct span spans[] = {
        { 0x1000, 0x9000, 60 },
        { 0x2000, 0xa000, 110 },
        { 0x3000, 0xb000, 80 },
    };
    struct plan *plan = build_ok(spans, 3, 100);
    assert_int_equal(plan->nchunks, 3);
    assert_int_equal(plan->npieces, 5);
    assert_int_equal(plan_encode(plan, &t->chunk_pieces, &t->chunk_len, &t->pieces,
                                 &t->pieces_len), 0);
    t->nchunks = plan->nchunks;
    t->total = plan->total;
    plan_free(plan);
}

static void tables_free(struct tables *t)
{
    free(t->chunk_pieces);
    free(t->pieces);
}

static b10_status_t decode(const struct tables *t, uint64_t max_chunk, uint64_t max_pieces,
                           struct plan **plan_p, char *detail, size_t detail_len)
{
    return plan_decode(t->chunk_pieces, t->chunk_len, t->pieces, t->pieces_len, t->nchunks,
                       t->total, max_chunk, max_pieces, plan_p, detail, detail_len);
}

/* Decode must fail with want, say why, and leave plan_p alone. */
static void decode_rejects(const struct tables *t, uint64_t max_chunk, uint64_t max_pieces,
                           b10_status_t want)
{
    struct plan *plan = &sentinel_plan;
    char detail[256] = "";
    b10_status_t status = decode(t, max_chunk, max_pieces, &plan, detail, sizeof(detail));
    if (status != want)
        fail_msg("plan_decode gave %s, want %s (%s)", b10_status_name(status),
                 b10_status_name(want), detail);
    assert_ptr_equal(plan, &sentinel_plan);
    assert_true(strlen(detail) > 0);
}

static void test_decode_valid(void **state)
{
    struct tables t;
    struct plan *plan = NULL;
    char detail[256] = "";

    tables_make(&t);
    assert_int_equal(decode(&t, 100, 5, &plan, detail, sizeof(detail)), B10_OK);
    assert_int_equal(plan->total, 250);
    assert_int_equal(plan->nchunks, 3);
    assert_int_equal(plan->npieces, 5);
    assert_piece(plan, 0, 0, 0x9000, 60);
    assert_piece(plan, 1, 0, 0xa000, 40);
    assert_piece(plan, 2, 0, 0xa000 + 40, 70);
    assert_piece(plan, 3, 0, 0xb000, 30);
    assert_piece(plan, 4, 0, 0xb000 + 30, 50);
    assert_chunk(plan, 0, 0, 2, 100);
    assert_chunk(plan, 1, 2, 2, 100);
    assert_chunk(plan, 2, 4, 1, 50);
    plan_free(plan);
    tables_free(&t);
}

static void test_decode_wrong_lengths(void **state)
{
    struct tables t;
    tables_make(&t);

    struct tables bad = t;
    bad.chunk_len = t.chunk_len - 1;
    decode_rejects(&bad, 100, 1000, B10_ERR_PEER_PROTOCOL);
    bad = t;
    bad.nchunks = t.nchunks + 1;      /* the table is one u32 short of that */
    decode_rejects(&bad, 100, 1000, B10_ERR_PEER_PROTOCOL);
    bad = t;
    bad.pieces_len = t.pieces_len - 1;
    decode_rejects(&bad, 100, 1000, B10_ERR_PEER_PROTOCOL);
    bad = t;
    bad.pieces_len = t.pieces_len - SPAN_BYTES;   /* a whole piece missing */
    decode_rejects(&bad, 100, 1000, B10_ERR_PEER_PROTOCOL);
    bad = t;
    bad.nchunks = 0;
    bad.chunk_len = 0;
    decode_rejects(&bad, 100, 1000, B10_ERR_PEER_PROTOCOL);
    /* More chunks than pieces. */
    bad = t;
    bad.pieces_len = 2 * SPAN_BYTES;
    decode_rejects(&bad, 100, 1000, B10_ERR_PEER_PROTOCOL);
    tables_free(&t);
}

static void test_decode_chunk_counts(void **state)
{
    struct tables t;
    tables_make(&t);
    uint8_t saved[12];
    memcpy(saved, t.chunk_pieces, 12);

    /* The last chunk claims one piece more than exist. */
    frame_put_u32(t.chunk_pieces + 8, 2);
    decode_rejects(&t, 100, 1000, B10_ERR_PEER_PROTOCOL);
    /* A count near 2^32 must not overflow the bound check. */
    frame_put_u32(t.chunk_pieces + 8, UINT32_MAX);
    decode_rejects(&t, 100, 1000, B10_ERR_PEER_PROTOCOL);
    memcpy(t.chunk_pieces, saved, 12);
    frame_put_u32(t.chunk_pieces, UINT32_MAX);
    decode_rejects(&t, UINT64_MAX, 1000, B10_ERR_PEER_PROTOCOL);
    /* An empty chunk. */
    memcpy(t.chunk_pieces, saved, 12);
    frame_put_u32(t.chunk_pieces + 4, 0);
    decode_rejects(&t, 100, 1000, B10_ERR_PEER_PROTOCOL);
    /* Counts that leave a piece unclaimed: 2, 1, 1 of 5. */
    memcpy(t.chunk_pieces, saved, 12);
    frame_put_u32(t.chunk_pieces + 4, 1);
    decode_rejects(&t, UINT64_MAX, 1000, B10_ERR_PEER_PROTOCOL);
    /* Counts that move a piece to another chunk: 1, 3, 1 overfills chunk 1. */
    memcpy(t.chunk_pieces, saved, 12);
    frame_put_u32(t.chunk_pieces, 1);
    frame_put_u32(t.chunk_pieces + 4, 3);
    decode_rejects(&t, 100, 1000, B10_ERR_PEER_PROTOCOL);
    tables_free(&t);
}

static void test_decode_bad_pieces(void **state)
{
    struct tables t;
    tables_make(&t);
    uint8_t *saved = malloc(t.pieces_len);
    assert_non_null(saved);
    memcpy(saved, t.pieces, t.pieces_len);

    /* A zero-length piece (total adjusted so only the zero is wrong). */
    uint64_t len3 = frame_get_u64(t.pieces + 3 * SPAN_BYTES + 8);
    frame_put_u64(t.pieces + 3 * SPAN_BYTES + 8, 0);
    struct tables bad = t;
    bad.total = t.total - len3;
    decode_rejects(&bad, 100, 1000, B10_ERR_PEER_PROTOCOL);

    /* A piece that wraps the address space. */
    memcpy(t.pieces, saved, t.pieces_len);
    frame_put_u64(t.pieces + 4 * SPAN_BYTES, UINT64_MAX - 10);
    decode_rejects(&t, 100, 1000, B10_ERR_PEER_PROTOCOL);

    /* A chunk over max_chunk: chunk 2 grows from 50 to 101 bytes, total to match. */
    memcpy(t.pieces, saved, t.pieces_len);
    frame_put_u64(t.pieces + 4 * SPAN_BYTES + 8, 101);
    bad = t;
    bad.total = t.total + 51;
    decode_rejects(&bad, 100, 1000, B10_ERR_PEER_PROTOCOL);
    /* The same tables are fine for a receiver with larger views. */
    struct plan *plan = NULL;
    char detail[256];
    assert_int_equal(decode(&bad, 101, 1000, &plan, detail, sizeof(detail)), B10_OK);
    assert_int_equal(plan->total, bad.total);
    plan_free(plan);
    /* The valid tables against a receiver whose views are smaller than a chunk. */
    memcpy(t.pieces, saved, t.pieces_len);
    decode_rejects(&t, 99, 1000, B10_ERR_PEER_PROTOCOL);

    /* A single piece larger than max_chunk on its own. */
    frame_put_u64(t.pieces + 8, 1000);
    bad = t;
    bad.total = t.total + 940;
    decode_rejects(&bad, 100, 1000, B10_ERR_PEER_PROTOCOL);
    free(saved);
    tables_free(&t);
}

static void test_decode_total_mismatch(void **state)
{
    struct tables t;
    tables_make(&t);
    struct tables bad = t;

    bad.total = t.total + 1;
    decode_rejects(&bad, 100, 1000, B10_ERR_PEER_PROTOCOL);
    bad.total = t.total - 1;
    decode_rejects(&bad, 100, 1000, B10_ERR_PEER_PROTOCOL);
    bad.total = 0;
    decode_rejects(&bad, 100, 1000, B10_ERR_PEER_PROTOCOL);
    bad.total = UINT64_MAX;
    decode_rejects(&bad, 100, 1000, B10_ERR_PEER_PROTOCOL);
    tables_free(&t);
}

static void test_decode_too_many_pieces(void **state)
{
    struct tables t;
    tables_make(&t);
    struct plan *plan = NULL;
    char detail[256];

    decode_rejects(&t, 100, 4, B10_ERR_TOO_LARGE);
    decode_rejects(&t, 100, 0, B10_ERR_TOO_LARGE);
    /* Exactly at the limit is fine. */
    assert_int_equal(decode(&t, 100, 5, &plan, detail, sizeof(detail)), B10_OK);
    plan_free(plan);
    tables_free(&t);
}

/* A table claiming huge sizes is rejected by its lengths before any allocation. */
static void test_decode_huge_claims(void **state)
{
    uint8_t chunk_pieces[4];
    uint8_t pieces[SPAN_BYTES];
    struct plan *plan = &sentinel_plan;
    char detail[256] = "";

    frame_put_u32(chunk_pieces, 1);
    frame_put_u64(pieces, 0x1000);
    frame_put_u64(pieces + 8, 10);
    /* nchunks of 2^32-1 against a 4-byte table. */
    assert_int_equal(plan_decode(chunk_pieces, 4, pieces, SPAN_BYTES, UINT32_MAX, 10, 100, 1000,
                                 &plan, detail, sizeof(detail)), B10_ERR_PEER_PROTOCOL);
    assert_ptr_equal(plan, &sentinel_plan);
    /* pieces_len claiming 2^40 pieces is over max_pieces. */
    assert_int_equal(plan_decode(chunk_pieces, 4, pieces, (size_t)SPAN_BYTES << 40, 1, 10, 100,
                                 1000, &plan, detail, sizeof(detail)), B10_ERR_TOO_LARGE);
    assert_ptr_equal(plan, &sentinel_plan);
    /* And the minimal valid one decodes. */
    assert_int_equal(plan_decode(chunk_pieces, 4, pieces, SPAN_BYTES, 1, 10, 100, 1000, &plan,
                                 detail, sizeof(detail)), B10_OK);
    assert_int_equal(plan->npieces, 1);
    assert_piece(plan, 0, 0, 0x1000, 10);
    plan_free(plan);
}

/* ---------------------------------------------------------------- rechunk */

static void test_rechunk_smaller(void **state)
{
    const struct span spans[] = {
        { 0x1000, 0x8000, 250 },
        { 0x5000, 0x6000, 130 },
    };
    struct plan *plan = build_ok(spans, 2, 1000);

    assert_int_equal(plan->nchunks, 1);
    assert_int_equal(plan_rechunk(plan, 100), B10_OK);
    check_structure(plan, 100);
    assert_int_equal(plan->total, 380);
    assert_int_equal(plan->nchunks, 4);
    assert_int_equal(plan->npieces, 5);
    assert_piece(plan, 0, 0x1000, 0x8000, 100);
    assert_piece(plan, 1, 0x1000 + 100, 0x8000 + 100, 100);
    assert_piece(plan, 2, 0x1000 + 200, 0x8000 + 200, 50);
    assert_piece(plan, 3, 0x5000, 0x6000, 50);
    assert_piece(plan, 4, 0x5000 + 50, 0x6000 + 50, 80);
    assert_chunk(plan, 2, 2, 2, 100);
    assert_chunk(plan, 3, 4, 1, 80);

    /* Back to large views: the splits are undone, not accumulated. */
    assert_int_equal(plan_rechunk(plan, 1000), B10_OK);
    assert_int_equal(plan->nchunks, 1);
    assert_int_equal(plan->npieces, 2);
    assert_piece(plan, 0, 0x1000, 0x8000, 250);
    assert_piece(plan, 1, 0x5000, 0x6000, 130);
    plan_free(plan);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_contiguous_both_sides),
        cmocka_unit_test(test_no_merge_source_contiguous_only),
        cmocka_unit_test(test_no_merge_destination_contiguous_only),
        cmocka_unit_test(test_sorted_by_source),
        cmocka_unit_test(test_merge_chain_with_a_break),
        cmocka_unit_test(test_pack_exactly_max_chunk),
        cmocka_unit_test(test_split_piece_across_chunks),
        cmocka_unit_test(test_odd_sizes_unaligned),
        cmocka_unit_test(test_random_byte_map),
        cmocka_unit_test(test_reject_zero_length),
        cmocka_unit_test(test_reject_unequal_lengths),
        cmocka_unit_test(test_reject_wraparound),
        cmocka_unit_test(test_reject_overlapping_destinations),
        cmocka_unit_test(test_reject_empty_request),
        cmocka_unit_test(test_decode_valid),
        cmocka_unit_test(test_decode_wrong_lengths),
        cmocka_unit_test(test_decode_chunk_counts),
        cmocka_unit_test(test_decode_bad_pieces),
        cmocka_unit_test(test_decode_total_mismatch),
        cmocka_unit_test(test_decode_too_many_pieces),
        cmocka_unit_test(test_decode_huge_claims),
        cmocka_unit_test(test_rechunk_smaller),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
