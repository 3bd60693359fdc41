/*
 * test-plan.c — daemon/base/plan.c: how a WRITE's spans become DATA chunks.
 *
 * Fixed cases pin the rules (sorted by source, merged only when contiguous on
 * both sides, chunks filled to exactly max_chunk, pieces split at chunk
 * boundaries); random span sets over many seeds check the one invariant that
 * matters on the wire: the plan moves exactly the input's bytes, each source
 * byte to its destination byte, once; and more random requests, up to 100000
 * spans, must give exactly the plans (or the refusals) of a qsort reference.
 * The decoder gets hostile tables.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rng.h"

#include "frame.h"
#include "plan.h"

#define MAX_SPANS 512

struct span {
    uint64_t src, dst, len;
};

/* A plan_p that must stay untouched when a call fails. */
static struct plan sentinel_plan;

/* ---------------------------------------------------------------- helpers */

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

/* ---------------------------------------------------------------- against a reference */

/*
 * plan_build sorts with a radix sort that takes shortcuts (an input already
 * in order is left alone, and its digits cover only the bits where the keys
 * differ, in as few passes of at most 11 bits as those need, a segment at a
 * time when they differ in more bits than fit beside the index) and merges
 * contiguous spans while it packs them. None of that may show:
 * its plans must be exactly those of the obvious implementation below, which
 * is how plan_build was written before, with qsort. The random requests are
 * shaped so that every pass and every shortcut of the radix sort runs, and
 * test_reference_plans checks at the end that each one did.
 */
struct ref_span {
    uint64_t src, dst, len;
    uint32_t index;  /* position in the request */
};

static int ref_cmp_dst(const void *a, const void *b)
{
    const struct ref_span *x = a, *y = b;
    if (x->dst != y->dst)
        return x->dst < y->dst ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int ref_cmp_src(const void *a, const void *b)
{
    const struct ref_span *x = a, *y = b;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* What the reference saw on the way, for the coverage check. */
struct ref_seen {
    bool equal_src;   /* two spans read from the same source address */
    bool merged;      /* some spans were merged */
};

static void ref_free(struct plan *plan)
{
    free(plan->pieces);
    free(plan->chunks);
    free(plan);
}

/* plan_build's contract, written the slow and obvious way. */
static b10_status_t ref_build(const uint8_t *src_spans, const uint8_t *dst_spans, size_t count,
                              uint64_t max_chunk, struct plan **plan_p, char *detail,
                              size_t detail_len, struct ref_seen *seen)
{
    struct ref_span *spans = malloc(count * sizeof(*spans));
    b10_status_t status = B10_ERR_INVALID_ARG;
    size_t n = 0;

    assert_non_null(spans);
    *seen = (struct ref_seen){ false, false };
    for (size_t i = 0; i < count; i++) {
        uint64_t len = frame_get_u64(src_spans + i * SPAN_BYTES + 8);
        uint64_t dlen = frame_get_u64(dst_spans + i * SPAN_BYTES + 8);
        spans[i] = (struct ref_span){ frame_get_u64(src_spans + i * SPAN_BYTES),
                                      frame_get_u64(dst_spans + i * SPAN_BYTES), len,
                                      (uint32_t)i };
        if (len == 0 || len != dlen) {
            snprintf(detail, detail_len, "span %zu: lengths %" PRIu64 " and %" PRIu64
                     " must be equal and non-zero", i, len, dlen);
            goto out;
        }
        /* The end, one past the last byte, must fit in 64 bits on both sides. */
        if (spans[i].src > UINT64_MAX - len || spans[i].dst > UINT64_MAX - len) {
            snprintf(detail, detail_len, "span %zu wraps the address space", i);
            goto out;
        }
    }

    qsort(spans, count, sizeof(*spans), ref_cmp_dst);
    for (size_t i = 1; i < count; i++) {
        if (spans[i].dst < spans[i - 1].dst + spans[i - 1].len) {
            snprintf(detail, detail_len, "destination spans %u and %u overlap",
                     spans[i - 1].index, spans[i].index);
            goto out;
        }
    }

    qsort(spans, count, sizeof(*spans), ref_cmp_src);
    for (size_t i = 0; i < count; i++) {
        if (i > 0 && spans[i].src == spans[i - 1].src)
            seen->equal_src = true;
        if (n > 0 && spans[n - 1].src + spans[n - 1].len == spans[i].src &&
            spans[n - 1].dst + spans[n - 1].len == spans[i].dst) {
            spans[n - 1].len += spans[i].len;
            seen->merged = true;
        } else {
            spans[n++] = spans[i];
        }
    }

    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (spans[i].len > UINT64_MAX - total) {
            snprintf(detail, detail_len, "transfer length overflows 64 bits");
            status = B10_ERR_TOO_LARGE;
            goto out;
        }
        total += spans[i].len;
    }
    /* Room for a chunk per max_chunk bytes plus one per span, and a piece more per chunk. */
    uint64_t full = total / max_chunk;
    if (full > UINT32_MAX || full + 2 * (uint64_t)n > UINT32_MAX) {
        snprintf(detail, detail_len, "transfer of %" PRIu64 " bytes needs too many chunks", total);
        status = B10_ERR_TOO_LARGE;
        goto out;
    }

    /*
     * Lay the merged spans end to end and cut at every multiple of max_chunk
     * of the running offset: chunk c holds the bytes [c, c + 1) * max_chunk.
     */
    struct plan *plan = calloc(1, sizeof(*plan));
    assert_non_null(plan);
    plan->pieces = malloc((n + full + 1) * sizeof(*plan->pieces));
    plan->chunks = malloc((full + 1) * sizeof(*plan->chunks));
    assert_non_null(plan->pieces);
    assert_non_null(plan->chunks);
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        for (uint64_t done = 0; done < spans[i].len;) {
            uint64_t c = at / max_chunk;
            uint64_t room = max_chunk - at % max_chunk;
            uint64_t take = spans[i].len - done < room ? spans[i].len - done : room;
            if (c == plan->nchunks)
                plan->chunks[plan->nchunks++] = (struct plan_chunk){ plan->npieces, 0, 0 };
            assert_true(c + 1 == plan->nchunks);
            plan->pieces[plan->npieces++] = (struct plan_piece){ spans[i].src + done,
                                                                 spans[i].dst + done, take };
            plan->chunks[c].count++;
            plan->chunks[c].bytes += take;
            done += take;
            at += take;
        }
    }
    plan->total = at;
    *plan_p = plan;
    status = B10_OK;
out:
    free(spans);
    return status;
}

/*
 * How a side's runs are laid out in the address space. Each keeps the runs
 * disjoint and in the order given (a run may end where the next begins).
 */
enum ref_layout {
    LAYOUT_DENSE,    /* small gaps from a random base: the low bytes differ */
    LAYOUT_LOW,      /* a few bytes from an aligned base: only byte 0 differs */
    LAYOUT_HIGH,     /* one run per 2^shift, maybe with a little jitter: the high bytes differ */
    LAYOUT_SPREAD,   /* random gaps over the whole address space: every byte differs */
    LAYOUT_COUNT
};

static const char *const ref_layout_names[] = { "dense", "low", "high", "spread" };

static void ref_layout_runs(const uint64_t *len, const size_t *order, size_t m,
                            enum ref_layout how, uint64_t *start)
{
    uint64_t sum = 0, longest = 0;
    for (size_t q = 0; q < m; q++) {
        sum += len[q];
        longest = len[q] > longest ? len[q] : longest;
    }
    if (how == LAYOUT_HIGH) {
        /* The largest shift that leaves room for m slots, or a smaller one. */
        unsigned top = 56;
        while (top > 16 && ((uint64_t)m >> (64 - top)) != 0)
            top -= 8;
        unsigned shift = top - 8 * (unsigned)rng_below(top / 8 - 1);
        uint64_t jitter = rng_below(2) == 0 ? 0 : 1 + rng_below(16);
        uint64_t low = rng_below(UINT64_C(1) << (shift - 2));
        uint64_t slots = UINT64_MAX >> shift;   /* the last slot's number; m of them must fit */
        uint64_t first = slots == m ? 0 : rng_below(slots - m);
        if (longest + jitter + low < (UINT64_C(1) << shift)) {
            for (size_t q = 0; q < m; q++)
                start[order[q]] = ((first + q) << shift) + low + (jitter ? rng_below(jitter) : 0);
            return;
        }
        how = LAYOUT_DENSE;   /* a run too long for its slot */
    }
    if (how == LAYOUT_SPREAD) {
        uint64_t per = (UINT64_MAX - sum) / (m + 1);
        uint64_t at = 0;
        for (size_t q = 0; q < m; q++) {
            at += rng_below(4) == 0 ? 0 : rng_below(per);
            start[order[q]] = at;
            at += len[order[q]];
        }
        return;
    }
    uint64_t gap_max = how == LAYOUT_LOW ? 2 : rng_below(2) == 0 ? 16 : 4096;
    uint64_t span = sum + m * gap_max;
    uint64_t at = how == LAYOUT_LOW ? rng_next() & ~UINT64_C(0xffff) & (UINT64_MAX >> 1)
                                    : rng_below(UINT64_MAX - span);
    for (size_t q = 0; q < m; q++) {
        at += rng_below(3) == 0 ? 0 : rng_below(gap_max + 1);
        start[order[q]] = at;
        at += len[order[q]];
    }
}

static void ref_shuffle(size_t *order, size_t m)
{
    for (size_t i = m; i > 1; i--) {
        size_t j = rng_below(i), t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
}

/* The order of the runs along a side: as made, reversed, or shuffled. */
static const char *ref_order(size_t *order, size_t m)
{
    for (size_t q = 0; q < m; q++)
        order[q] = q;
    switch (rng_below(3)) {
    case 0:
        return "in order";
    case 1:
        for (size_t q = 0; q < m; q++)
            order[q] = m - 1 - q;
        return "reversed";
    default:
        ref_shuffle(order, m);
        return "shuffled";
    }
}

/*
 * A random request of n spans into spans[]: runs of one to many spans
 * contiguous on both sides (plan_build must merge them again), each side laid
 * out on its own, sources sometimes shared, the spans then in run order or
 * shuffled; sometimes with destinations made to overlap. what says how.
 */
static void ref_request(struct span *spans, size_t n, bool low, char *what, size_t what_len)
{
    uint64_t maxlen = low ? 4 : (uint64_t[]){ 1, 16, 4096, 65536 }[rng_below(4)];
    unsigned cont = low ? 0 : (unsigned)rng_below(4);   /* in 4: a span continues the run */
    size_t *run_of = malloc(n * sizeof(*run_of));
    uint64_t *run_len = malloc(n * sizeof(*run_len));
    uint64_t *run_src = malloc(n * sizeof(*run_src));
    uint64_t *run_dst = malloc(n * sizeof(*run_dst));
    size_t *order = malloc(n * sizeof(*order));
    size_t m = 0;

    assert_non_null(run_of);
    assert_non_null(run_len);
    assert_non_null(run_src);
    assert_non_null(run_dst);
    assert_non_null(order);
    for (size_t i = 0; i < n; i++) {
        spans[i].len = 1 + rng_below(maxlen);
        if (i == 0 || rng_below(4) >= cont)
            run_len[m++] = 0;
        run_of[i] = m - 1;
        spans[i].src = run_len[m - 1];   /* the offset in the run, for now */
        run_len[m - 1] += spans[i].len;
    }

    enum ref_layout dst_how = low ? LAYOUT_LOW : (enum ref_layout)rng_below(LAYOUT_COUNT);
    const char *dst_order = ref_order(order, m);
    ref_layout_runs(run_len, order, m, dst_how, run_dst);

    const char *src_how;
    const char *src_order = "";
    switch (low ? 0 : rng_below(6)) {
    case 0:
    case 1:
    case 2: {
        enum ref_layout how = low ? LAYOUT_LOW : (enum ref_layout)rng_below(LAYOUT_COUNT);
        src_how = ref_layout_names[how];
        src_order = ref_order(order, m);
        ref_layout_runs(run_len, order, m, how, run_src);
        break;
    }
    case 3: {
        /* A few source places shared by all runs: the same bytes read many times. */
        uint64_t pool[8];
        size_t npool = 1 + rng_below(rng_below(2) == 0 ? 2 : 8);
        uint64_t longest = 0;
        for (size_t r = 0; r < m; r++)
            longest = run_len[r] > longest ? run_len[r] : longest;
        for (size_t k = 0; k < npool; k++)
            pool[k] = rng_below(UINT64_MAX - longest);
        for (size_t r = 0; r < m; r++)
            run_src[r] = pool[rng_below(npool)];
        src_how = "shared";
        break;
    }
    case 4:
        /* The destinations themselves: every run one merged piece, sorted alike. */
        memcpy(run_src, run_dst, m * sizeof(*run_src));
        src_how = "same as dst";
        break;
    default: {
        /* Each run at a random place, overlapping or not. */
        for (size_t r = 0; r < m; r++)
            run_src[r] = rng_below(UINT64_MAX - run_len[r]);
        src_how = "anywhere";
        break;
    }
    }

    for (size_t i = 0; i < n; i++) {
        uint64_t off = spans[i].src;
        spans[i].src = run_src[run_of[i]] + off;
        spans[i].dst = run_dst[run_of[i]] + off;
    }

    /* The request's order: as built, reversed, shuffled, or nearly in order. */
    const char *request_order;
    switch (rng_below(5)) {
    case 0:
    case 1:
        request_order = "as built";
        break;
    case 2:
        for (size_t i = 0; i < n / 2; i++) {
            struct span t = spans[i];
            spans[i] = spans[n - 1 - i];
            spans[n - 1 - i] = t;
        }
        request_order = "reversed";
        break;
    case 3:
        for (size_t i = n; i > 1; i--) {
            size_t j = rng_below(i);
            struct span t = spans[i - 1];
            spans[i - 1] = spans[j];
            spans[j] = t;
        }
        request_order = "shuffled";
        break;
    default:
        for (size_t k = 1 + rng_below(3); k > 0; k--) {
            size_t i = rng_below(n), j = rng_below(n);
            struct span t = spans[i];
            spans[i] = spans[j];
            spans[j] = t;
        }
        request_order = "a few swapped";
        break;
    }

    /* Sometimes destinations that overlap: a span moved into another, or onto its start. */
    size_t overlaps = rng_below(5) == 0 ? 1 + rng_below(3) : 0;
    for (size_t k = 0; k < overlaps; k++) {
        size_t i = rng_below(n), j = rng_below(n);
        uint64_t dst = spans[j].dst + (rng_below(2) == 0 ? 0 : rng_below(spans[j].len));
        if (dst <= UINT64_MAX - spans[i].len)
            spans[i].dst = dst;
    }

    snprintf(what, what_len, "%zu spans in %zu runs (max %llu bytes, %u/4 continue); dst %s, "
             "runs %s; src %s%s%s; request %s; %zu overlaps made", n, m,
             (unsigned long long)maxlen, cont, ref_layout_names[dst_how], dst_order, src_how,
             *src_order ? ", runs " : "", src_order, request_order, overlaps);
    free(run_of);
    free(run_len);
    free(run_src);
    free(run_dst);
    free(order);
}

/* The bits in which the keys differ: the lowest and how many up to the highest. */
static unsigned key_bits(const struct span *spans, size_t n, bool dst, unsigned *low_p,
                         bool *sorted_p)
{
    uint64_t all_or = 0, all_and = UINT64_MAX;
    bool sorted = true;
    for (size_t i = 0; i < n; i++) {
        uint64_t k = dst ? spans[i].dst : spans[i].src;
        if (i > 0 && k < (dst ? spans[i - 1].dst : spans[i - 1].src))
            sorted = false;
        all_or |= k;
        all_and &= k;
    }
    uint64_t differ = all_or ^ all_and;
    *sorted_p = sorted;
    if (differ == 0)
        return 0;
    *low_p = (unsigned)__builtin_ctzll(differ);
    return 64 - (unsigned)__builtin_clzll(differ) - *low_p;
}

/* Which paths of the sort and the plan the random requests reached. */
struct ref_coverage {
    unsigned sorted[2];        /* dst, src: in order already, more than one key */
    unsigned one_pass[2];      /* unsorted, keys differ in 11 bits or fewer */
    unsigned narrow[2];        /* unsorted, several passes of digits under 11 bits */
    unsigned segments[2];      /* unsorted, more differing bits than fit beside the index */
    unsigned above_0[2];       /* unsorted, bit 0 shared: the digits start higher */
    unsigned top_bit[2];       /* unsorted, bit 63 differs */
    unsigned odd[2], even[2];  /* unsorted, an odd (result in the scratch) or even pass count */
    unsigned equal_src;        /* unsorted sources, two of them equal, and a plan */
    unsigned merged, overlap, bad_span, too_large, one_byte_chunks, large;
};

/* How a request ended: which of plan_build's sorts it reached. */
enum ref_outcome {
    REF_PLANNED,    /* both sorts */
    REF_OVERLAP,    /* the destination sort, then refused */
    REF_REFUSED,    /* refused before sorting */
};

/* Count the paths of the sorts this request took (as its outcome says it reached them). */
static void ref_cover(struct ref_coverage *cov, const struct span *spans, size_t n,
                      enum ref_outcome outcome)
{
    for (int side = 0; side < 2; side++) {
        bool sorted;
        unsigned low = 0, bits = key_bits(spans, n, side == 0, &low, &sorted);
        bool reached = side == 0 ? outcome != REF_REFUSED : outcome == REF_PLANNED;
        if (!reached || n < 2 || bits == 0)
            continue;
        if (sorted) {
            cov->sorted[side]++;
            continue;
        }
        /* The sort's layout: records hold the key's bits above the index. */
        unsigned room = 64 - (64 - (unsigned)__builtin_clzll((uint64_t)(n - 1)));
        unsigned passes = 0;
        for (unsigned left = bits; left > 0;) {
            unsigned seg = left < room ? left : room, p = (seg + 10) / 11;
            cov->narrow[side] += p > 1 && seg % p != 0 && (seg + p - 1) / p < 11;
            passes += p;
            left -= seg;
        }
        cov->one_pass[side] += passes == 1;
        cov->segments[side] += bits > room;
        cov->above_0[side] += low > 0;
        cov->top_bit[side] += low + bits == 64;
        if (passes % 2)
            cov->odd[side]++;
        else
            cov->even[side]++;
    }
}

/* Build with plan_build and with the reference; they must agree to the byte. */
static enum ref_outcome ref_compare(const uint8_t *src, const uint8_t *dst, size_t n,
                                    uint64_t max_chunk, uint64_t seed, const char *what,
                                    struct ref_coverage *cov, bool src_sorted)
{
    struct plan *got = &sentinel_plan, *want = NULL;
    char got_detail[256] = "", want_detail[256] = "";
    struct ref_seen seen;

    b10_status_t want_status = ref_build(src, dst, n, max_chunk, &want, want_detail,
                                         sizeof(want_detail), &seen);
    b10_status_t got_status = plan_build(src, dst, n, max_chunk, &got, got_detail,
                                         sizeof(got_detail));
    if (got_status != want_status)
        fail_msg("seed %llu (%s): plan_build says %s (%s), the reference %s (%s)",
                 (unsigned long long)seed, what, b10_status_name(got_status), got_detail,
                 b10_status_name(want_status), want_detail);
    if (want_status != B10_OK) {
        if (strcmp(got_detail, want_detail) != 0)
            fail_msg("seed %llu (%s): plan_build says \"%s\", the reference \"%s\"",
                     (unsigned long long)seed, what, got_detail, want_detail);
        assert_ptr_equal(got, &sentinel_plan);
        if (strstr(want_detail, "overlap") != NULL) {
            cov->overlap++;
            return REF_OVERLAP;
        }
        /* Too large is found while packing, after both sorts. */
        if (want_status == B10_ERR_TOO_LARGE) {
            cov->too_large++;
            return REF_PLANNED;
        }
        cov->bad_span++;
        return REF_REFUSED;
    }

    if (got->total != want->total || got->nchunks != want->nchunks ||
        got->npieces != want->npieces)
        fail_msg("seed %llu (%s): plan_build made %llu bytes in %u chunks of %u pieces, the "
                 "reference %llu in %u of %u", (unsigned long long)seed, what,
                 (unsigned long long)got->total, got->nchunks, got->npieces,
                 (unsigned long long)want->total, want->nchunks, want->npieces);
    for (uint32_t c = 0; c < want->nchunks; c++) {
        const struct plan_chunk *g = &got->chunks[c], *w = &want->chunks[c];
        if (g->first != w->first || g->count != w->count || g->bytes != w->bytes)
            fail_msg("seed %llu (%s): chunk %u is (first %u, count %u, %llu bytes), the "
                     "reference's (%u, %u, %llu)", (unsigned long long)seed, what, c, g->first,
                     g->count, (unsigned long long)g->bytes, w->first, w->count,
                     (unsigned long long)w->bytes);
    }
    for (uint32_t i = 0; i < want->npieces; i++) {
        const struct plan_piece *g = &got->pieces[i], *w = &want->pieces[i];
        if (g->src != w->src || g->dst != w->dst || g->len != w->len)
            fail_msg("seed %llu (%s): piece %u is (src %#llx, dst %#llx, len %llu), the "
                     "reference's (%#llx, %#llx, %llu)", (unsigned long long)seed, what, i,
                     (unsigned long long)g->src, (unsigned long long)g->dst,
                     (unsigned long long)g->len, (unsigned long long)w->src,
                     (unsigned long long)w->dst, (unsigned long long)w->len);
    }
    cov->merged += seen.merged;
    cov->equal_src += seen.equal_src && !src_sorted;
    cov->one_byte_chunks += max_chunk == 1;
    plan_free(got);
    ref_free(want);
    return REF_PLANNED;
}

#define REF_SEEDS 3000
#define REF_MAX_CHUNKS (UINT64_C(1) << 12)   /* per plan, unless it is meant to be refused */

static void test_reference_plans(void **state)
{
    struct ref_coverage cov = { 0 };
    char what[320];

    for (uint64_t seed = 1; seed <= REF_SEEDS; seed++) {
        rng_seed(seed);
        bool low = rng_below(10) == 0;
        size_t n;
        if (seed % 500 == 0)
            n = 100000 - rng_below(1000);
        else if (seed % 50 == 0)
            n = 2000 + rng_below(20000);
        else if (low)
            n = 1 + rng_below(40);
        else
            n = 1 + rng_below(rng_below(4) == 0 ? 8 : rng_below(8) == 0 ? 3000 : 300);
        cov.large += n >= 50000;

        struct span *spans = malloc(n * sizeof(*spans));
        assert_non_null(spans);
        ref_request(spans, n, low, what, sizeof(what));

        /* Rarely a few giant spans, for plans refused as too many chunks. */
        if (!low && n <= 64 && rng_below(30) == 0) {
            for (size_t i = 0; i < n; i++) {
                spans[i].dst = (uint64_t)i << 48;
                spans[i].len = 1 + rng_below(UINT64_C(1) << 40);
                spans[i].src = rng_below(UINT64_MAX - spans[i].len);
            }
            snprintf(what, sizeof(what), "%zu giant spans", n);
        }

        /* Tiny, a power of two, anything up to 1 MiB or 1 TiB, or no limit at all. */
        uint64_t max_chunk;
        switch (rng_below(5)) {
        case 0: max_chunk = 1 + rng_below(rng_below(2) == 0 ? 2 : 16); break;
        case 1: max_chunk = UINT64_C(1) << rng_below(24); break;
        case 2: max_chunk = 1 + rng_below(1 << 20); break;
        case 3: max_chunk = 1 + rng_below(UINT64_C(1) << 40); break;
        default: max_chunk = rng_below(2) == 0 ? UINT64_MAX : 1 + rng_below(5000); break;
        }
        /*
         * Keep the plans small enough to build quickly: a larger max_chunk,
         * unless the plan is far past the chunk limit (refused before any
         * allocation). Overlapping destinations overstate the total: no harm.
         */
        uint64_t total = 0;
        bool sum_wraps = false;
        for (size_t i = 0; i < n; i++) {
            sum_wraps |= total + spans[i].len < total;
            total += spans[i].len;
        }
        if (!sum_wraps && total / max_chunk > REF_MAX_CHUNKS && total / max_chunk <= UINT32_MAX)
            max_chunk = total / REF_MAX_CHUNKS + 1;

        uint8_t *src, *dst;
        spans_encode(spans, n, &src, &dst);
        /* Rarely a span the checks before sorting refuse. */
        if (rng_below(100) == 0) {
            uint8_t *src_i = src + rng_below(n) * SPAN_BYTES;
            uint8_t *dst_i = dst + (src_i - src);
            uint64_t len = frame_get_u64(src_i + 8);
            switch (rng_below(4)) {
            case 0:
                frame_put_u64(src_i + 8, 0);
                frame_put_u64(dst_i + 8, 0);
                break;
            case 1:
                frame_put_u64(dst_i + 8, len + 1);
                break;
            case 2:
                frame_put_u64(src_i, UINT64_MAX - rng_below(len));
                break;
            default:
                frame_put_u64(dst_i, UINT64_MAX - rng_below(len));
                break;
            }
        }
        size_t said = strlen(what);
        snprintf(what + said, sizeof(what) - said, "; max_chunk %llu",
                 (unsigned long long)max_chunk);
        unsigned first_bit;
        bool src_sorted;
        key_bits(spans, n, false, &first_bit, &src_sorted);
        enum ref_outcome outcome = ref_compare(src, dst, n, max_chunk, seed, what, &cov,
                                               src_sorted);
        ref_cover(&cov, spans, n, outcome);
        free(src);
        free(dst);
        free(spans);
    }

    /* Every path of the sort was taken, on both keys, and every outcome of the plan. */
    for (int side = 0; side < 2; side++) {
        const char *key = side == 0 ? "dst" : "src";
        if (cov.sorted[side] == 0 || cov.one_pass[side] == 0 || cov.narrow[side] == 0 ||
            cov.segments[side] == 0 || cov.above_0[side] == 0 || cov.top_bit[side] == 0 ||
            cov.odd[side] == 0 || cov.even[side] == 0)
            fail_msg("%s keys: sorted %u, one pass %u, narrow digits %u, segments %u, "
                     "bit 0 shared %u, bit 63 differs %u, odd passes %u, even %u", key,
                     cov.sorted[side], cov.one_pass[side], cov.narrow[side],
                     cov.segments[side], cov.above_0[side], cov.top_bit[side],
                     cov.odd[side], cov.even[side]);
    }
    if (cov.equal_src == 0 || cov.merged == 0 || cov.overlap == 0 || cov.bad_span == 0 ||
        cov.too_large == 0 || cov.one_byte_chunks == 0 || cov.large == 0)
        fail_msg("equal sources %u, merged %u, overlaps %u, bad spans %u, too large %u, "
                 "one-byte chunks %u, large %u", cov.equal_src, cov.merged, cov.overlap,
                 cov.bad_span, cov.too_large, cov.one_byte_chunks, cov.large);
}

/*
 * Keys that differ in exactly the bits [low, low + bits), for each digit
 * layout of the sort: one pass, a pass of 11 and one of 1, digits of 11, 11
 * and 1 bits, all 64 bits, the top nibble alone, and (3000 spans: a 12-bit
 * index, 52 key bits a record) the most one segment holds and one bit more,
 * which takes a second segment of a single bit. Unique
 * destinations (a multiplicative walk through the range, then shuffled)
 * with sources of another layout, shared by all, or the destinations
 * themselves; plan_build must agree with the reference on each.
 */
static void width_keys(uint64_t *keys, size_t n, unsigned low, unsigned bits, uint64_t base)
{
    uint64_t mask = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
    uint64_t step = rng_next() | 1;     /* odd: i * step is a permutation of the range */
    for (size_t i = 0; i < n; i++)
        keys[i] = (base & ~(mask << low)) | ((i * step & mask) << low);
    /* The lowest and the highest bit of the range must both differ somewhere. */
    keys[n - 1] = (base & ~(mask << low)) | (mask << low);
    for (size_t i = n; i > 1; i--) {
        size_t j = rng_below(i);
        uint64_t t = keys[i - 1];
        keys[i - 1] = keys[j];
        keys[j] = t;
    }
}

static void test_sort_digit_widths(void **state)
{
    static const unsigned layouts[][2] = {   /* { low, bits } */
        { 0, 1 }, { 7, 11 }, { 0, 12 }, { 5, 22 }, { 3, 23 }, { 12, 33 }, { 0, 64 }, { 60, 4 },
        { 3, 52 }, { 3, 53 },
    };
    (void)state;
    for (size_t l = 0; l < sizeof(layouts) / sizeof(layouts[0]); l++) {
        for (unsigned how = 0; how < 3; how++) {
            rng_seed(100 * l + how);
            unsigned low = layouts[l][0], bits = layouts[l][1];
            size_t n = bits >= 12 ? 3000 : (size_t)1 << bits;
            struct span *spans = malloc(n * sizeof(*spans));
            uint64_t *keys = malloc(n * sizeof(*keys));
            assert_non_null(spans);
            assert_non_null(keys);
            /* Keep the last key's end inside 64 bits: one-byte spans, a base below the top. */
            width_keys(keys, n, low, bits, rng_next() >> 1);
            for (size_t i = 0; i < n; i++)
                spans[i] = (struct span){ .dst = keys[i] == UINT64_MAX ? keys[i] - 1 : keys[i],
                                          .len = 1 };
            if (how == 0)
                width_keys(keys, n, (low + 9) % 40, bits > 40 ? 40 : bits, rng_next());
            for (size_t i = 0; i < n; i++)
                spans[i].src = how == 0 ? keys[i] : how == 1 ? UINT64_C(0x5000) : spans[i].dst;
            unsigned got_low = 0;
            bool sorted;
            key_bits(spans, n, true, &got_low, &sorted);
            if (sorted) {
                /* A shuffle of a few left them in order: reversed, they are not. */
                for (size_t i = 0; i < n / 2; i++) {
                    struct span t = spans[i];
                    spans[i] = spans[n - 1 - i];
                    spans[n - 1 - i] = t;
                }
            }
            assert_int_equal(key_bits(spans, n, true, &got_low, &sorted), bits);
            assert_int_equal(got_low, low);
            assert_false(sorted);

            uint8_t *src, *dst;
            char what[96];
            struct ref_coverage cov = { 0 };
            snprintf(what, sizeof(what), "dst bits [%u, %u), src %s", low, low + bits,
                     how == 0 ? "another layout" : how == 1 ? "all equal" : "the destinations");
            spans_encode(spans, n, &src, &dst);
            ref_compare(src, dst, n, 1 + rng_below(64), 100 * l + how, what, &cov, false);
            free(src);
            free(dst);
            free(keys);
            free(spans);
        }
    }
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

/* ---------------------------------------------------------------- the compact form */

/* The destination runs of a chunk, neighbours merged: what its scatter writes, in view order. */
static size_t chunk_runs(const struct plan *plan, uint32_t c, uint64_t (*runs)[2])
{
    size_t n = 0;
    const struct plan_chunk *ch = &plan->chunks[c];
    for (uint32_t p = ch->first; p < ch->first + ch->count; p++) {
        if (n > 0 && runs[n - 1][0] + runs[n - 1][1] == plan->pieces[p].dst) {
            runs[n - 1][1] += plan->pieces[p].len;
            continue;
        }
        runs[n][0] = plan->pieces[p].dst;
        runs[n][1] = plan->pieces[p].len;
        n++;
    }
    return n;
}

/* The slots round trip: the receiver's plan writes each chunk's view where the sender's says. */
static void check_slots_roundtrip(const struct plan *plan, uint64_t max_chunk)
{
    struct plan_slots slots;
    uint8_t *chunk_pieces;
    size_t chunk_len;
    struct plan *decoded = &sentinel_plan;
    char detail[256] = "";

    assert_int_equal(plan_encode_slots(plan, &slots, &chunk_pieces, &chunk_len), B10_OK);
    assert_true(slots.slots_len < (size_t)plan->npieces * SPAN_BYTES);
    b10_status_t status = plan_decode_slots(chunk_pieces, chunk_len, &slots, plan->nchunks,
                                            plan->total, max_chunk, slots.slots_len / 4,
                                            &decoded, detail, sizeof(detail));
    if (status != B10_OK)
        fail_msg("plan_decode_slots of an encoded plan: %s (%s)", b10_status_name(status), detail);
    assert_int_equal(decoded->nchunks, plan->nchunks);
    assert_int_equal(decoded->total, plan->total);
    uint64_t (*want)[2] = calloc(plan->npieces, sizeof(*want));
    uint64_t (*got)[2] = calloc(decoded->npieces, sizeof(*got));
    assert_non_null(want);
    assert_non_null(got);
    for (uint32_t c = 0; c < plan->nchunks; c++) {
        assert_int_equal(decoded->chunks[c].bytes, plan->chunks[c].bytes);
        size_t nw = chunk_runs(plan, c, want), ng = chunk_runs(decoded, c, got);
        /* Already merged: the decoder left no neighbours apart. */
        assert_int_equal(ng, decoded->chunks[c].count);
        assert_int_equal(nw, ng);
        assert_memory_equal(want, got, nw * sizeof(*want));
    }
    free(want);
    free(got);
    free(chunk_pieces);
    free((uint8_t *)slots.slots);
    plan_free(decoded);
}

/* KV requests: one block size at random slots on both sides, some neighbours on both. */
static void test_slots_roundtrip_random(void **state)
{
    static struct span spans[4096];
    for (int round = 0; round < 200; round++) {
        uint64_t unit = UINT64_C(1) << (4 + rng_below(12));
        size_t n = 1 + rng_below(4096);
        uint64_t nslots = n + rng_below(2 * n + 1);
        uint64_t *perm = malloc(nslots * sizeof(*perm));
        assert_non_null(perm);
        for (uint64_t i = 0; i < nslots; i++)
            perm[i] = i;
        for (uint64_t i = nslots - 1; i > 0; i--) {
            uint64_t j = rng_below(i + 1), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (size_t i = 0; i < n; i++) {
            spans[i].src = 0x100000000ull + i * unit;
            spans[i].dst = 0x900000000ull + perm[i] * unit;
            spans[i].len = unit;
        }
        for (size_t i = 1; i < n; i++)
            if (rng_below(5) == 0) {
                /* A fifth of the blocks follow their source neighbour on the destination too:
                 * span i takes the slot after span i-1's, from whichever span had it. */
                uint64_t want = spans[i - 1].dst + unit;
                size_t k = 0;
                while (k < n && spans[k].dst != want)
                    k++;
                if (k < n) {
                    spans[k].dst = spans[i].dst;
                    spans[i].dst = want;
                }
            }
        /* Chunks of whole units, so that no piece is split into parts of other lengths. */
        uint64_t max_chunk = unit * (1 + rng_below(64));
        struct plan *plan = build_ok(spans, n, max_chunk);
        check_slots_roundtrip(plan, max_chunk);
        plan_free(plan);
        free(perm);
    }
}

/* Plans of other shapes keep the full form; the slots' bounds. */
static void test_slots_unsupported(void **state)
{
    struct plan_slots slots;
    uint8_t *chunk_pieces;
    size_t chunk_len;

    /* Two blocks of 4 KiB: slots. */
    static const struct span kv[] = { { 0x10000, 0x80000, 4096 }, { 0x30000, 0x70000, 4096 } };
    struct plan *plan = build_ok(kv, 2, 1 << 20);
    check_slots_roundtrip(plan, 1 << 20);
    plan_free(plan);
    /* Blocks of 3000 bytes, no power of two: slots too, by division. */
    static const struct span odd_unit[] = { { 0x10000, 0x80000, 3000 }, { 0x30000, 0x80000 + 3 * 3000, 3000 },
                                            { 0x50000, 0x80000 + 3000, 6000 } };
    plan = build_ok(odd_unit, 3, 1 << 20);
    check_slots_roundtrip(plan, 1 << 20);
    plan_free(plan);
    /* A length that is no multiple of the shortest. */
    static const struct span odd[] = { { 0x10000, 0x80000, 4096 }, { 0x30000, 0x70000, 6144 } };
    plan = build_ok(odd, 2, 1 << 20);
    assert_int_equal(plan_encode_slots(plan, &slots, &chunk_pieces, &chunk_len), B10_ERR_UNSUPPORTED);
    plan_free(plan);
    /* A destination off the grid of the lowest. */
    static const struct span off[] = { { 0x10000, 0x80000, 4096 }, { 0x30000, 0x70800, 4096 } };
    plan = build_ok(off, 2, 1 << 20);
    assert_int_equal(plan_encode_slots(plan, &slots, &chunk_pieces, &chunk_len), B10_ERR_UNSUPPORTED);
    plan_free(plan);
    /* A slot past 2^32. */
    static const struct span far[] = { { 0x10000, 0x1000, 16 }, { 0x30000, 0x1000 + (UINT64_C(1) << 36), 16 } };
    plan = build_ok(far, 2, 1 << 20);
    assert_int_equal(plan_encode_slots(plan, &slots, &chunk_pieces, &chunk_len), B10_ERR_UNSUPPORTED);
    plan_free(plan);
    /* A run of 7 units and a piece of one: 8 slots for 2 pieces is no smaller than the full form... */
    static const struct span run[] = { { 0x10000, 0x80000, 16 * 7 }, { 0x90000, 0x10000, 16 } };
    plan = build_ok(run, 2, 1 << 20);
    assert_int_equal(plan_encode_slots(plan, &slots, &chunk_pieces, &chunk_len), B10_ERR_UNSUPPORTED);
    plan_free(plan);
    /* ... while 7 slots for 2 pieces is. */
    static const struct span shorter[] = { { 0x10000, 0x80000, 16 * 6 }, { 0x90000, 0x10000, 16 } };
    plan = build_ok(shorter, 2, 1 << 20);
    check_slots_roundtrip(plan, 1 << 20);
    plan_free(plan);
}

/* Hostile slot tables: each refused with its reason, the plan pointer untouched. */
static void test_decode_slots_refusals(void **state)
{
    uint8_t chunks[8], table[16];
    struct plan *plan = &sentinel_plan;
    char detail[256];
    /* Two chunks: slots 5, 6, 7 (one run of 3 units), then slot 1. */
    frame_put_u32(chunks, 3);
    frame_put_u32(chunks + 4, 1);
    frame_put_u32(table, 5);
    frame_put_u32(table + 4, 6);
    frame_put_u32(table + 8, 7);
    frame_put_u32(table + 12, 1);
    struct plan_slots good = { 0x10000, 256, table, 16 };

    assert_int_equal(plan_decode_slots(chunks, 8, &good, 2, 1024, 1024, 4, &plan, detail,
                                       sizeof(detail)), B10_OK);
    assert_int_equal(plan->npieces, 2);
    assert_int_equal(plan->pieces[0].dst, 0x10000 + 5 * 256);
    assert_int_equal(plan->pieces[0].len, 3 * 256);
    assert_int_equal(plan->pieces[1].dst, 0x10000 + 256);
    assert_chunk(plan, 0, 0, 1, 768);
    assert_chunk(plan, 1, 1, 1, 256);
    plan_free(plan);

    struct {
        const char *what;
        struct plan_slots slots;
        uint32_t nchunks;
        uint64_t total, max_chunk, max_pieces;
        b10_status_t want;
    } bad[] = {
        { "a unit of 0", { 0x10000, 0, table, 16 }, 2, 1024, 1024, 4, B10_ERR_PEER_PROTOCOL },
        { "a unit above a chunk", { 0x10000, 2048, table, 16 }, 2, 8192, 1024, 4, B10_ERR_PEER_PROTOCOL },
        { "a table of 15 bytes", { 0x10000, 256, table, 15 }, 2, 1024, 1024, 4, B10_ERR_PEER_PROTOCOL },
        { "a slot past the address space", { UINT64_MAX - 1000, 256, table, 16 }, 2, 1024, 1024, 4,
          B10_ERR_PEER_PROTOCOL },
        { "bytes that do not add up", { 0x10000, 256, table, 16 }, 2, 1280, 1024, 4, B10_ERR_PEER_PROTOCOL },
        { "a chunk over its bound", { 0x10000, 256, table, 16 }, 2, 1024, 512, 4, B10_ERR_PEER_PROTOCOL },
        { "another chunk count", { 0x10000, 256, table, 16 }, 1, 1024, 1024, 4, B10_ERR_PEER_PROTOCOL },
        { "more slots than allowed", { 0x10000, 256, table, 16 }, 2, 1024, 1024, 3, B10_ERR_TOO_LARGE },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        plan = &sentinel_plan;
        detail[0] = '\0';
        b10_status_t st = plan_decode_slots(chunks, bad[i].nchunks == 1 ? 4 : 8, &bad[i].slots,
                                            bad[i].nchunks, bad[i].total, bad[i].max_chunk,
                                            bad[i].max_pieces, &plan, detail, sizeof(detail));
        if (st != bad[i].want || plan != &sentinel_plan || detail[0] == '\0')
            fail_msg("%s: %s (%s), want %s", bad[i].what, b10_status_name(st), detail,
                     b10_status_name(bad[i].want));
    }
}

/* ---------------------------------------------------------------- plan_covers */

/* A receiver's plan of pieces (dst, len), as plan_decode would make it. */
static struct plan *dst_plan(const uint64_t (*pieces)[2], uint32_t n)
{
    struct plan *p = calloc(1, sizeof(*p));
    assert_non_null(p);
    p->pieces = calloc(n ? n : 1, sizeof(*p->pieces));
    assert_non_null(p->pieces);
    p->npieces = n;
    for (uint32_t i = 0; i < n; i++) {
        p->pieces[i].dst = pieces[i][0];
        p->pieces[i].len = pieces[i][1];
        p->total += pieces[i][1];
    }
    return p;
}

static bool covers(const uint64_t (*outer)[2], uint32_t no, const uint64_t (*inner)[2], uint32_t ni)
{
    struct plan *o = dst_plan(outer, no), *i = dst_plan(inner, ni);
    bool r = plan_covers(o, i);
    plan_free(o);
    plan_free(i);
    return r;
}

/* A write-back must write what its READ asked for: its bytes, inside the READ's spans. */
static void test_covers(void **state)
{
    static const uint64_t read[][2] = { { 0x3000, 0x1000 }, { 0x1000, 0x1000 }, { 0x2000, 0x1000 },
                                        { 0x9000, 0x100 } };
    /* The same pieces in another order, split, and merged across neighbours. */
    static const uint64_t same[][2] = { { 0x9000, 0x100 }, { 0x1000, 0x3000 } };
    static const uint64_t split[][2] = { { 0x1000, 0x800 }, { 0x1800, 0x2800 }, { 0x9000, 0x80 },
                                         { 0x9080, 0x80 } };
    assert_true(covers(read, 4, read, 4));
    assert_true(covers(read, 4, same, 2));
    assert_true(covers(read, 4, split, 4));
    /* As many bytes, some outside; fewer bytes; more bytes. */
    static const uint64_t outside[][2] = { { 0x1000, 0x3000 }, { 0x9080, 0x100 } };
    static const uint64_t before[][2] = { { 0x0fff, 0x3001 }, { 0x9000, 0xff } };
    static const uint64_t gap[][2] = { { 0x1000, 0x3000 }, { 0x8f00, 0x100 } };
    static const uint64_t fewer[][2] = { { 0x1000, 0x3000 } };
    static const uint64_t more[][2] = { { 0x1000, 0x3000 }, { 0x9000, 0x100 }, { 0x9100, 1 } };
    assert_false(covers(read, 4, outside, 2));
    assert_false(covers(read, 4, before, 2));
    assert_false(covers(read, 4, gap, 2));
    assert_false(covers(read, 4, fewer, 1));
    assert_false(covers(read, 4, more, 3));
    /* A piece that wraps the address space. */
    static const uint64_t wrap[][2] = { { UINT64_MAX - 0x80, 0x4100 } };
    assert_false(covers(read, 4, wrap, 1));
}

/* Against a byte map: covered exactly when every inner byte is an outer byte and totals agree. */
/*
 * A KV pool's requests: spans of one power-of-two size at whole slots of a
 * pool, which plan_build checks for overlap with a bitmap of the slots and
 * orders by source with a walk of the source slots rather than sorts. The
 * same plans and the same refusals, word for word, as the reference; and the
 * shapes the slots do not take (a span off its slot, a size not a power of
 * two, slots too sparse, a source read twice, which keeps request order)
 * still decided right by the sorts.
 */
static void test_reference_pool_slots(void **state)
{
    struct ref_coverage cov = { 0 };
    unsigned outcomes[3] = { 0 };       /* planned, overlap, other refusal */
    char what[128];

    for (uint64_t seed = 1; seed <= 600; seed++) {
        rng_seed(seed * 7919);
        size_t n = 1 + rng_below(seed % 60 == 0 ? 50000 : 400);
        uint64_t len = UINT64_C(1) << (rng_below(17) + 1);
        uint64_t slots = n * (1 + rng_below(rng_below(8) == 0 ? 200 : 4));
        struct span *spans = malloc(n * sizeof(*spans));
        uint64_t *perm = malloc(slots * sizeof(*perm));
        assert_non_null(spans);
        assert_non_null(perm);
        for (uint64_t i = 0; i < slots; i++)
            perm[i] = i;
        for (uint64_t i = slots - 1; i > 0; i--) {
            uint64_t j = rng_below(i + 1), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (size_t i = 0; i < n; i++)
            spans[i] = (struct span){ 0x7f0000000000ull + perm[(i * 31 + 5) % slots] * len,
                                      0x100000000ull + perm[i] * len, len };
        const char *shape = "slots";
        switch (rng_below(6)) {
        case 0:                         /* the same slot twice (or more) */
            for (unsigned k = 1 + rng_below(3); n > 1 && k > 0; k--)
                spans[rng_below(n)].dst = spans[rng_below(n)].dst;
            shape = "a slot twice";
            break;
        case 1:                         /* one span off its slot: overlaps a neighbour, maybe */
            spans[rng_below(n)].dst += 1 + rng_below(len - 1 ? len - 1 : 1);
            shape = "one off its slot";
            break;
        case 2:                         /* a size not a power of two */
            for (size_t i = 0; i < n; i++)
                spans[i].len = len + 1;
            shape = "odd size";
            break;
        default:
            break;
        }
        if (rng_below(4) == 0) {        /* destinations follow the sources: runs to merge */
            for (size_t i = 0; i < n; i++)
                spans[i].dst = 0x100000000ull + (spans[i].src - 0x7f0000000000ull);
            shape = "destinations as the sources";
        }
        const char *src_shape = "sources in slots";
        switch (rng_below(5)) {
        case 0:                         /* a block read twice: its spans stay in request order */
            for (unsigned k = 1 + rng_below(3); n > 1 && k > 0; k--)
                spans[rng_below(n)].src = spans[rng_below(n)].src;
            src_shape = "a source twice";
            break;
        case 1:                         /* one source off its slot */
            spans[rng_below(n)].src += 1 + rng_below(len - 1 ? len - 1 : 1);
            src_shape = "a source off its slot";
            break;
        default:
            break;
        }
        /* Chunks that split pieces (and merged runs) now and then, else a staging view's. */
        uint64_t max_chunk = rng_below(3) == 0 ? len * (1 + rng_below(5)) + 1 + rng_below(len)
                                               : 4u << 20;
        snprintf(what, sizeof(what), "%zu spans of %llu bytes in %llu slots, %s, %s, chunks of "
                 "%llu", n, (unsigned long long)len, (unsigned long long)slots, shape, src_shape,
                 (unsigned long long)max_chunk);
        uint8_t *src, *dst;
        spans_encode(spans, n, &src, &dst);
        enum ref_outcome o = ref_compare(src, dst, n, max_chunk, seed, what, &cov, false);
        outcomes[o == REF_PLANNED ? 0 : o == REF_OVERLAP ? 1 : 2]++;
        free(src);
        free(dst);
        free(spans);
        free(perm);
    }
    /* Both sides of the bitmap's decision were taken. */
    assert_true(outcomes[0] > 100);
    assert_true(outcomes[1] > 50);
}

static void test_covers_random(void **state)
{
    enum { COVER_SPACE = 4096 };
    uint64_t outer[8][2], inner[8][2];

    for (int round = 0; round < 2000; round++) {
        uint8_t in_outer[COVER_SPACE] = { 0 };
        uint32_t no = 0, ni = 1 + (uint32_t)rng_below(8);
        uint64_t to = 0, ti = 0, at = rng_below(64);
        /* Disjoint outer pieces, as a READ's destinations are, sometimes side by side. */
        while (no < 8) {
            uint64_t len = 1 + rng_below(200);
            if (at + len > COVER_SPACE)
                break;
            outer[no][0] = at;
            outer[no][1] = len;
            memset(in_outer + at, 1, len);
            to += len;
            no++;
            at += len + rng_below(3) * rng_below(50);
        }
        for (uint32_t k = 0; k < ni; k++) {
            uint64_t start = rng_below(COVER_SPACE - 1), len = 1 + rng_below(300);
            if (rng_below(2)) {     /* often a piece of an outer one */
                uint32_t j = (uint32_t)rng_below(no);
                start = outer[j][0] + rng_below(outer[j][1]);
                len = 1 + rng_below(outer[j][0] + outer[j][1] - start);
            }
            inner[k][0] = start;
            inner[k][1] = start + len > COVER_SPACE ? COVER_SPACE - start : len;
            ti += inner[k][1];
        }
        /* Equal totals half of the time, so that containment decides. */
        if (rng_below(2) && to > ti && inner[0][0] + inner[0][1] + (to - ti) <= COVER_SPACE)
            inner[0][1] += to - ti;
        bool inside = true;
        ti = 0;
        for (uint32_t k = 0; k < ni; k++) {
            ti += inner[k][1];
            for (uint64_t b = inner[k][0]; b < inner[k][0] + inner[k][1]; b++)
                inside &= in_outer[b] != 0;
        }
        assert_int_equal(covers((const uint64_t (*)[2])outer, no, (const uint64_t (*)[2])inner, ni),
                         inside && ti == to);
    }
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
        cmocka_unit_test(test_reference_plans),
        cmocka_unit_test(test_sort_digit_widths),
        cmocka_unit_test(test_reject_zero_length),
        cmocka_unit_test(test_reject_unequal_lengths),
        cmocka_unit_test(test_reject_wraparound),
        cmocka_unit_test(test_reject_overlapping_destinations),
        cmocka_unit_test(test_reference_pool_slots),
        cmocka_unit_test(test_reject_empty_request),
        cmocka_unit_test(test_decode_valid),
        cmocka_unit_test(test_decode_wrong_lengths),
        cmocka_unit_test(test_decode_chunk_counts),
        cmocka_unit_test(test_decode_bad_pieces),
        cmocka_unit_test(test_decode_total_mismatch),
        cmocka_unit_test(test_decode_too_many_pieces),
        cmocka_unit_test(test_decode_huge_claims),
        cmocka_unit_test(test_rechunk_smaller),
        cmocka_unit_test(test_slots_roundtrip_random),
        cmocka_unit_test(test_slots_unsupported),
        cmocka_unit_test(test_decode_slots_refusals),
        cmocka_unit_test(test_covers),
        cmocka_unit_test(test_covers_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
