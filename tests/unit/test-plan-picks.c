/*
 * test-plan-picks.c — daemon/base/plan-picks.c: the plan of rows picked from
 * two grids, made without their spans.
 *
 * The oracle is plan_build over the spans picks_spans writes: wherever
 * plan_build_picks plans, its plan must be that one, piece for piece and
 * chunk for chunk, and wherever plan_build refuses, plan_build_picks must
 * leave the request to it (B10_ERR_UNSUPPORTED), never plan. Random grids of
 * shuffled bases, dense and sparse picks (the slot walk and the radix
 * sort), sources picked twice, picks already in order; then each shape the
 * planner leaves to the spans beside the one just inside it that it plans.
 * Each request goes through plan_picker too, in parts: the same refusals,
 * the same bytes to the same places, sealed chunks never changed.
 *
 * plan_grid_pairs, the checks of a GPU copy that takes the picks as they
 * are, has the same oracle one way: wherever it takes picks, plan_build
 * takes their spans, and a copy of its pairs writes the bytes that plan
 * does; then each refusal beside what it takes, its bounds at their edges.
 * plan_rows, that copy's chunks, is pinned chunk by chunk.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rng.h"

#include "frame.h"
#include "picks.h"
#include "plan.h"

#define MAX_BASES 16

struct grid_fixture {
    uint8_t bases[MAX_BASES * 8];
    struct picks_grid g;
};

/*
 * nbases bases of per_base rows, in shuffled order, each base's rows
 * ending gap bytes before the next base begins (gap 0: side by side).
 */
static void grid_init(struct grid_fixture *f, size_t nbases, uint64_t per_base, uint64_t stride,
                      uint64_t length, uint64_t gap, uint64_t start)
{
    assert_true(nbases <= MAX_BASES);
    uint64_t reach = (per_base - 1) * stride + length;
    size_t order[MAX_BASES];
    for (size_t b = 0; b < nbases; b++)
        order[b] = b;
    for (size_t b = nbases; b > 1; b--) {
        size_t j = rng_next() % b, t = order[b - 1];
        order[b - 1] = order[j];
        order[j] = t;
    }
    for (size_t b = 0; b < nbases; b++)
        frame_put_u64(f->bases + b * 8, start + order[b] * (reach + gap));
    f->g = (struct picks_grid){ f->bases, nbases, per_base, stride, length };
}

static bool plans_equal(const struct plan *a, const struct plan *b)
{
    return a->npieces == b->npieces && a->nchunks == b->nchunks && a->total == b->total &&
           memcmp(a->pieces, b->pieces, a->npieces * sizeof(*a->pieces)) == 0 &&
           memcmp(a->chunks, b->chunks, a->nchunks * sizeof(*a->chunks)) == 0;
}

/*
 * The same request through plan_picker, in parts of random sizes: it plans
 * exactly where plan_build_picks does (want_st), each part exactly the picks
 * asked for, every chunk full but the last, no chunk changed once it was
 * said sealed, and in the end plan_build_picks' plan (want), piece for piece.
 */
static void picker_check(const struct picks_grid *src, const struct picks_grid *dst,
                         const uint8_t *picks, size_t count, uint64_t max_chunk,
                         b10_status_t want_st, const struct plan *want)
{
    struct plan_picker *pp = NULL;
    struct plan *got = NULL;
    b10_status_t st = plan_picker_new(src, dst, picks, picks + count * 4, count, max_chunk, &pp,
                                      &got);
    assert_int_equal(st, want_st);
    if (st != B10_OK) {
        assert_null(pp);
        assert_null(got);
        return;
    }
    assert_int_equal(got->total, want->total);
    assert_int_equal(got->nchunks, 0);
    uint32_t chunks = plan_picker_chunks(pp);
    /* Each chunk and its pieces as they were when it was sealed. */
    struct plan_chunk *seen_c = NULL;
    struct plan_piece *seen_p = NULL;
    uint32_t nseen = 0, nseen_p = 0;
    size_t parts = 0, planned = 0;
    while (!plan_picker_done(pp)) {
        size_t part = rng_next() % 3 == 0 ? 1 : 1 + rng_next() % (count / 3 + 1);
        plan_picker_next(pp, part);
        assert_true(++parts <= count);
        /* Exactly the picks asked for, up to what is left: their bytes. */
        size_t m = part < count - planned ? part : count - planned;
        planned += m;
        uint64_t bytes = 0;
        for (uint32_t c = 0; c < got->nchunks; c++)
            bytes += got->chunks[c].bytes;
        assert_int_equal(bytes, (uint64_t)planned * src->length);
        uint32_t sealed = plan_picker_sealed(pp);
        assert_true(sealed >= nseen && sealed <= got->nchunks);
        for (uint32_t c = nseen; c < sealed; c++) {
            const struct plan_chunk *ch = &got->chunks[c];
            seen_c = realloc(seen_c, (c + 1) * sizeof(*seen_c));
            seen_p = realloc(seen_p, (nseen_p + ch->count) * sizeof(*seen_p));
            assert_non_null(seen_c);
            assert_non_null(seen_p);
            seen_c[c] = *ch;
            memcpy(seen_p + nseen_p, got->pieces + ch->first, ch->count * sizeof(*seen_p));
            nseen_p += ch->count;
        }
        nseen = sealed;
    }
    plan_picker_next(pp, 5);        /* nothing left: nothing changes */
    assert_int_equal(plan_picker_sealed(pp), got->nchunks);
    assert_int_equal(got->nchunks, chunks);        /* as said before a part was planned */
    plan_picker_free(pp);
    assert_int_equal(nseen, got->nchunks);
    assert_memory_equal(seen_c, got->chunks, nseen * sizeof(*seen_c));
    assert_memory_equal(seen_p, got->pieces, nseen_p * sizeof(*seen_p));
    assert_int_equal(nseen_p, got->npieces);
    uint64_t sum = 0;
    for (uint32_t c = 0; c < got->nchunks; c++) {
        const struct plan_chunk *ch = &got->chunks[c];
        uint64_t bytes = 0;
        for (uint32_t i = ch->first; i < ch->first + ch->count; i++)
            bytes += got->pieces[i].len;
        assert_int_equal(bytes, ch->bytes);
        assert_true(ch->bytes > 0 && ch->bytes <= max_chunk);
        if (c + 1 < got->nchunks)
            assert_int_equal(ch->bytes, max_chunk);
        sum += bytes;
    }
    assert_int_equal(sum, got->total);
    assert_true(plans_equal(got, want));
    free(seen_c);
    free(seen_p);
    plan_free(got);
}

/*
 * Plan count picks (src indices, then dst ones) both ways. Returns what
 * plan_build_picks said, having checked it against plan_build: the same
 * plan where it planned, and never a plan where plan_build refused.
 */
static b10_status_t plan_both(const struct picks_grid *src, const struct picks_grid *dst,
                              const uint8_t *picks, size_t count, uint64_t max_chunk)
{
    char detail[256];
    struct plan *want = NULL, *got = NULL;
    uint8_t *tables = malloc(count * 2 * SPAN_BYTES);
    assert_non_null(tables);
    b10_status_t spans = picks_spans(src, dst, picks, count, tables, detail, sizeof(detail));
    if (spans == B10_OK)
        spans = plan_build(tables, tables + count * SPAN_BYTES, count, max_chunk, &want, detail,
                           sizeof(detail));
    b10_status_t st = plan_build_picks(src, dst, picks, picks + count * 4, count, max_chunk, &got);
    picker_check(src, dst, picks, count, max_chunk, st, got);
    if (st == B10_OK) {
        assert_int_equal(spans, B10_OK);
        assert_true(plans_equal(got, want));
    } else {
        assert_int_equal(st, B10_ERR_UNSUPPORTED);
        assert_null(got);
    }
    plan_free(want);
    plan_free(got);
    free(tables);
    return st;
}

/* count picks: distinct destination rows; sources from rows, twice where dup_src. */
static uint8_t *random_picks(size_t count, uint64_t src_rows, uint64_t dst_rows, bool dup_src,
                             bool in_order)
{
    uint8_t *picks = malloc(count * 8);
    uint32_t *perm = malloc(dst_rows * sizeof(*perm));
    assert_non_null(picks);
    assert_non_null(perm);
    for (uint64_t i = 0; i < dst_rows; i++)
        perm[i] = (uint32_t)i;
    for (size_t i = 0; i < count; i++) {    /* the first count of a shuffle: distinct */
        size_t j = i + rng_next() % (dst_rows - i);
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
        frame_put_u32(picks + count * 4 + i * 4, perm[i]);
    }
    uint64_t step = src_rows / count;
    for (size_t i = 0; i < count; i++) {
        uint64_t s = in_order ? i * step : rng_next() % src_rows;
        if (dup_src && i > 0 && rng_next() % 4 == 0)
            s = frame_get_u32(picks + (rng_next() % i) * 4);
        frame_put_u32(picks + i * 4, (uint32_t)s);
    }
    free(perm);
    return picks;
}

/* Random requests of every kind the planner takes: its plan is plan_build's. */
static void test_same_plan_as_the_spans(void **state)
{
    (void)state;
    size_t planned = 0;
    for (uint64_t seed = 1; seed <= 300; seed++) {
        rng_seed(seed);
        uint64_t length = 1 + rng_next() % 8192;
        struct grid_fixture s, d;
        size_t sb = 1 + rng_next() % MAX_BASES, db = 1 + rng_next() % MAX_BASES;
        uint64_t sper = 1 + rng_next() % 600, dper = 1 + rng_next() % 600;
        /* Strides of the length itself (rows side by side: merges) and longer. */
        uint64_t sstride = seed % 2 ? length : length + rng_next() % 512;
        uint64_t dstride = seed % 3 ? length : length + rng_next() % 512;
        grid_init(&s, sb, sper, sstride, length, seed % 4 ? 0 : rng_next() % 4096,
                  0x7f0000000000ull);
        grid_init(&d, db, dper, dstride, length, seed % 5 ? 0 : rng_next() % 4096,
                  0x7e0000000000ull);
        uint64_t srows = picks_grid_rows(&s.g), drows = picks_grid_rows(&d.g);
        /* Dense (at most two source rows a pick: the slots) and sparse (the sort). */
        size_t most = drows < srows ? drows : srows;
        if (most < 2)
            continue;
        size_t count = seed % 2 ? most : 2 + rng_next() % (most - 1);
        uint8_t *picks = random_picks(count, srows, drows, seed % 7 == 0, seed % 11 == 0);
        /* Chunks of a few pieces to many. */
        uint64_t max_chunk = length * (1 + rng_next() % 64) + rng_next() % length;
        if (plan_both(&s.g, &d.g, picks, count, max_chunk) == B10_OK)
            planned++;
        free(picks);
    }
    /* Most of them: only those too sparse for the bitmap go to the spans. */
    print_message("planned %zu of 300\n", planned);
    assert_true(planned > 250);
}

/* The slots and the sort make one plan of one request: as dense, then spread out. */
static void test_slots_and_sort_agree(void **state)
{
    (void)state;
    rng_seed(3);
    struct grid_fixture s, d, s_wide;
    grid_init(&s, 4, 500, 4096, 4096, 0, 0x7f0000000000ull);
    grid_init(&d, 4, 500, 4096, 4096, 0, 0x7e0000000000ull);
    uint8_t *picks = random_picks(1000, 2000, 2000, false, false);
    assert_int_equal(plan_both(&s.g, &d.g, picks, 1000, 1 << 20), B10_OK);   /* 2000 slots */
    /* The same picks in a grid of 3 x 1000 rows: more than two a pick, sorted. */
    grid_init(&s_wide, 3, 1000, 4096, 4096, 0, 0x7f0000000000ull);
    assert_int_equal(plan_both(&s_wide.g, &d.g, picks, 1000, 1 << 20), B10_OK);
    /* A source row twice: the slots cannot hold it, the sort keeps both in request order. */
    frame_put_u32(picks + 5 * 4, frame_get_u32(picks + 9 * 4));
    assert_int_equal(plan_both(&s.g, &d.g, picks, 1000, 1 << 20), B10_OK);
    free(picks);
}

/* What the planner leaves to the spans, each beside the request just inside it. */
static void test_left_to_the_spans(void **state)
{
    (void)state;
    rng_seed(5);
    struct grid_fixture s, d;
    uint8_t *picks = random_picks(64, 64, 64, false, false);

    /* Bases whose rows meet: planned; one byte closer, one base's rows reach the next's. */
    grid_init(&s, 2, 32, 4096, 4096, 0, 0x7f0000000000ull);
    grid_init(&d, 2, 32, 4096, 4096, 0, 0x7e0000000000ull);
    assert_int_equal(plan_both(&s.g, &d.g, picks, 64, 1 << 20), B10_OK);
    uint64_t b0 = frame_get_u64(d.bases), b1 = frame_get_u64(d.bases + 8);
    if (b1 > b0)
        frame_put_u64(d.bases + 8, b1 - 1);
    else
        frame_put_u64(d.bases, b0 - 1);
    assert_int_equal(plan_both(&s.g, &d.g, picks, 64, 1 << 20), B10_ERR_UNSUPPORTED);
    grid_init(&d, 2, 32, 4096, 4096, 0, 0x7e0000000000ull);

    /* A stride of the length: planned; one byte shorter, rows overlap. */
    grid_init(&s, 2, 32, 4096, 4096, 4096, 0x7f0000000000ull);
    assert_int_equal(plan_both(&s.g, &d.g, picks, 64, 1 << 20), B10_OK);
    s.g.stride = 4095;
    assert_int_equal(plan_both(&s.g, &d.g, picks, 64, 1 << 20), B10_ERR_UNSUPPORTED);
    s.g.stride = 4096;

    /* A destination row twice, which plan_build refuses: left to it to name. */
    uint32_t keep = frame_get_u32(picks + 64 * 4 + 7 * 4);
    frame_put_u32(picks + 64 * 4 + 7 * 4, frame_get_u32(picks + 64 * 4 + 30 * 4));
    assert_int_equal(plan_both(&s.g, &d.g, picks, 64, 1 << 20), B10_ERR_UNSUPPORTED);
    frame_put_u32(picks + 64 * 4 + 7 * 4, keep);

    /* An index one past its grid, either side; the last row is planned. */
    frame_put_u32(picks + 3 * 4, 63);
    assert_int_equal(plan_both(&s.g, &d.g, picks, 64, 1 << 20), B10_OK);
    frame_put_u32(picks + 3 * 4, 64);
    assert_int_equal(plan_both(&s.g, &d.g, picks, 64, 1 << 20), B10_ERR_UNSUPPORTED);
    frame_put_u32(picks + 3 * 4, 63);
    keep = frame_get_u32(picks + 64 * 4 + 3 * 4);
    frame_put_u32(picks + 64 * 4 + 3 * 4, 64);
    assert_int_equal(plan_both(&s.g, &d.g, picks, 64, 1 << 20), B10_ERR_UNSUPPORTED);
    frame_put_u32(picks + 64 * 4 + 3 * 4, keep);

    /* Rows of other lengths, and a single pick. */
    d.g.length = 2048;
    assert_int_equal(plan_both(&s.g, &d.g, picks, 64, 1 << 20), B10_ERR_UNSUPPORTED);
    d.g.length = 4096;
    /* Two picks are planned; one is plan_build's alone. */
    uint8_t two[16];
    frame_put_u32(two, 5);
    frame_put_u32(two + 4, 6);
    frame_put_u32(two + 8, 40);
    frame_put_u32(two + 12, 41);
    assert_int_equal(plan_both(&s.g, &d.g, two, 2, 1 << 20), B10_OK);
    struct plan *p = NULL;
    frame_put_u32(two + 4, 40);
    assert_int_equal(plan_build_picks(&s.g, &d.g, two, two + 4, 1, 1 << 20, &p),
                     B10_ERR_UNSUPPORTED);
    assert_null(p);

    /* Grids of more bases than two a pick: left to the spans before their bases are sorted. */
    struct grid_fixture few, many;
    grid_init(&few, 8, 4, 4096, 4096, 0, 0x7f0000000000ull);
    grid_init(&many, 9, 4, 4096, 4096, 0, 0x7f0000000000ull);
    uint8_t four[32];
    for (uint32_t i = 0; i < 4; i++) {
        frame_put_u32(four + i * 4, 3 * i);
        frame_put_u32(four + 16 + i * 4, 5 * i);
    }
    assert_int_equal(plan_both(&few.g, &s.g, four, 4, 1 << 20), B10_OK);
    assert_int_equal(plan_both(&many.g, &s.g, four, 4, 1 << 20), B10_ERR_UNSUPPORTED);
    assert_int_equal(plan_both(&s.g, &few.g, four, 4, 1 << 20), B10_OK);
    assert_int_equal(plan_both(&s.g, &many.g, four, 4, 1 << 20), B10_ERR_UNSUPPORTED);

    /* Destinations too sparse for the bitmap (more than 64 rows a pick): left to the spans. */
    struct grid_fixture wide;
    grid_init(&wide, 1, 64 * 64 + 64, 4096, 4096, 0, 0x7e0000000000ull);
    assert_int_equal(plan_both(&s.g, &wide.g, picks, 64, 1 << 20), B10_ERR_UNSUPPORTED);
    wide.g.per_base = 64 * 64;
    assert_int_equal(plan_both(&s.g, &wide.g, picks, 64, 1 << 20), B10_OK);
    free(picks);
}

/* ---------------------------------------------------------------- plan_grid_pairs */

/* Row k's address by the grid's own definition (a divide), not picks.h's multiply. */
static uint64_t row_addr(const struct picks_grid *g, uint32_t k)
{
    return frame_get_u64(g->bases + (k / g->per_base) * 8) + (k % g->per_base) * g->stride;
}

static void put_src(uint8_t *picks, size_t i, uint32_t row)
{
    frame_put_u32(picks + i * 4, row);
}

static void put_dst(uint8_t *picks, size_t count, size_t i, uint32_t row)
{
    frame_put_u32(picks + count * 4 + i * 4, row);
}

static uint32_t get_dst(const uint8_t *picks, size_t count, size_t i)
{
    return frame_get_u32(picks + count * 4 + i * 4);
}

/*
 * plan_grid_pairs of count picks (src indices, then dst ones). Where it
 * takes them: the pairs are the picks, in order, each pair's rows the
 * spans picks_spans writes, and plan_build plans those spans (it refuses
 * overlapping destinations, an index outside its grid). So whatever
 * plan_build refuses, plan_grid_pairs must have refused too. The plan, if
 * plan_p, goes to the caller.
 */
static b10_status_t pairs_check(const struct picks_grid *src, const struct picks_grid *dst,
                                const uint8_t *picks, size_t count, struct plan **plan_p)
{
    uint32_t *pairs = malloc((2 * count + 1) * sizeof(*pairs));
    assert_non_null(pairs);
    memset(pairs, 0xa5, (2 * count + 1) * sizeof(*pairs));
    b10_status_t st = plan_grid_pairs(src, dst, picks, picks + count * 4, count, pairs);
    if (st != B10_OK) {
        assert_int_equal(st, B10_ERR_UNSUPPORTED);
        free(pairs);
        return st;
    }
    for (size_t i = 0; i < count; i++) {
        assert_int_equal(pairs[2 * i], frame_get_u32(picks + i * 4));
        assert_int_equal(pairs[2 * i + 1], get_dst(picks, count, i));
    }
    assert_int_equal(pairs[2 * count], 0xa5a5a5a5u);    /* nothing past the last pair */

    char detail[256] = "";
    uint8_t *tables = malloc(count * 2 * SPAN_BYTES);
    assert_non_null(tables);
    assert_int_equal(picks_spans(src, dst, picks, count, tables, detail, sizeof(detail)), B10_OK);
    for (size_t i = 0; i < count; i++) {
        const uint8_t *l = tables + i * SPAN_BYTES, *r = tables + (count + i) * SPAN_BYTES;
        assert_int_equal(frame_get_u64(l), row_addr(src, pairs[2 * i]));
        assert_int_equal(frame_get_u64(r), row_addr(dst, pairs[2 * i + 1]));
        assert_int_equal(frame_get_u64(l + 8), src->length);
        assert_int_equal(frame_get_u64(r + 8), src->length);
    }
    /* Chunks of a few rows to many: a chunk a byte would make a piece a byte. */
    uint64_t len = src->length, max_chunk = len * (1 + rng_next() % 64) + rng_next() % len;
    struct plan *plan = NULL;
    b10_status_t built = plan_build(tables, tables + count * SPAN_BYTES, count, max_chunk, &plan,
                                    detail, sizeof(detail));
    if (built != B10_OK)
        fail_msg("plan_grid_pairs took picks plan_build refuses: %s", detail);
    assert_int_equal(plan->total, (uint64_t)count * src->length);
    free(tables);
    free(pairs);
    if (plan_p != NULL)
        *plan_p = plan;
    else
        plan_free(plan);
    return st;
}

/* Copy len bytes from src to dst in map (map[a - lo]: byte a's source); false if any twice. */
static bool map_copy(uint64_t *map, uint64_t lo, uint64_t n, uint64_t src, uint64_t dst,
                     uint64_t len)
{
    assert_true(dst >= lo && dst - lo <= n && len <= n - (dst - lo));
    for (uint64_t j = 0; j < len; j++) {
        if (map[dst - lo + j] != 0)
            return false;
        map[dst - lo + j] = src + j;
    }
    return true;
}

/*
 * Random grids of shuffled bases, rows of one byte to a page, side by side
 * or apart, sources whose rows overlap (read twice is no harm) and picked
 * twice: every request is taken, as it is; and a copy of its pairs writes
 * each destination byte once, from the source byte plan_build's plan of the
 * spans copies there.
 */
static void test_grid_pairs_random(void **state)
{
    (void)state;
    static const uint64_t lengths[] = { 1, 3, 48, 64, 512, 4096 };
    size_t dup_seen = 0, overlap_seen = 0, spaced_seen = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        rng_seed(seed);
        uint64_t length = lengths[rng_next() % (sizeof(lengths) / sizeof(lengths[0]))];
        uint64_t most_per = length >= 512 ? 8 : 300;
        size_t sb = 1 + rng_next() % MAX_BASES, db = 1 + rng_next() % MAX_BASES;
        uint64_t sper = 1 + rng_next() % most_per, dper = 1 + rng_next() % most_per;
        uint64_t dstride = seed % 3 == 0 ? length : length + rng_next() % (length + 1);
        /* A source stride may be shorter than the length, even 0: its rows are only read. */
        uint64_t sstride = seed % 4 == 0 ? rng_next() % (length + 1)
                                         : length + rng_next() % (length + 1);
        struct grid_fixture s, d;
        grid_init(&s, sb, sper, sstride, length, seed % 2 ? 0 : rng_next() % 4096,
                  0x7f0000000000ull);
        grid_init(&d, db, dper, dstride, length, seed % 3 ? 0 : rng_next() % 4096,
                  0x7e0000000000ull);
        uint64_t srows = picks_grid_rows(&s.g), drows = picks_grid_rows(&d.g);
        size_t count = seed % 5 == 0 ? drows : 1 + rng_next() % drows;
        uint8_t *picks = random_picks(count, srows, drows, seed % 2 == 0, seed % 7 == 0);
        overlap_seen += sstride < length && sper > 1;
        spaced_seen += dstride > length;

        struct plan *plan = NULL;
        assert_int_equal(pairs_check(&s.g, &d.g, picks, count, &plan), B10_OK);

        /* Both copies byte by byte over the destination grid's extent. */
        uint64_t lo = UINT64_MAX, hi = 0, reach = (dper - 1) * dstride + length;
        for (size_t b = 0; b < db; b++) {
            uint64_t base = frame_get_u64(d.bases + b * 8);
            lo = base < lo ? base : lo;
            hi = base + reach > hi ? base + reach : hi;
        }
        uint64_t n = hi - lo;
        uint64_t *want = calloc(n, sizeof(*want)), *got = calloc(n, sizeof(*got));
        assert_non_null(want);
        assert_non_null(got);
        for (uint32_t i = 0; i < plan->npieces; i++) {
            const struct plan_piece *p = &plan->pieces[i];
            assert_true(map_copy(want, lo, n, p->src, p->dst, p->len));
        }
        bool seen[MAX_BASES * 300] = { false };
        bool dup = false;
        for (size_t i = 0; i < count; i++) {
            uint32_t sr = frame_get_u32(picks + i * 4);
            dup |= seen[sr];
            seen[sr] = true;
            /* No destination byte twice: the rows the pairs name do not overlap. */
            assert_true(map_copy(got, lo, n, row_addr(&s.g, sr),
                                 row_addr(&d.g, get_dst(picks, count, i)), length));
        }
        dup_seen += dup;
        assert_memory_equal(got, want, n * sizeof(*got));
        free(want);
        free(got);
        plan_free(plan);
        free(picks);
    }
    /* The kinds of request above all came up. */
    assert_true(dup_seen > 20);
    assert_true(overlap_seen > 10);
    assert_true(spaced_seen > 20);
}

/* Bases of 2 rows of 64 bytes each, shuffled, side by side: nbases may exceed MAX_BASES. */
static struct picks_grid wide_grid(size_t nbases, uint64_t start)
{
    uint8_t *bases = malloc(nbases * 8);
    uint32_t *order = malloc(nbases * sizeof(*order));
    assert_non_null(bases);
    assert_non_null(order);
    for (size_t b = 0; b < nbases; b++)
        order[b] = (uint32_t)b;
    for (size_t b = nbases; b > 1; b--) {
        size_t j = rng_next() % b;
        uint32_t t = order[b - 1];
        order[b - 1] = order[j];
        order[j] = t;
    }
    for (size_t b = 0; b < nbases; b++)
        frame_put_u64(bases + b * 8, start + order[b] * 128ull);
    free(order);
    return (struct picks_grid){ bases, nbases, 2, 64, 64 };
}

/* The base ranked k-th by address. */
static size_t base_ranked(const struct grid_fixture *f, size_t k)
{
    for (size_t b = 0; b < f->g.nbases; b++) {
        uint64_t mine = frame_get_u64(f->bases + b * 8);
        size_t below = 0;
        for (size_t c = 0; c < f->g.nbases; c++)
            below += frame_get_u64(f->bases + c * 8) < mine;
        if (below == k)
            return b;
    }
    fail_msg("no base ranked %zu", k);
    return 0;
}

/* Each request plan_grid_pairs refuses, beside the one just inside it that it takes. */
static void test_grid_pairs_refusals(void **state)
{
    (void)state;
    rng_seed(9);
    struct grid_fixture s, d;
    grid_init(&s, 3, 20, 4096, 4096, 0, 0x7f0000000000ull);   /* 60 rows */
    grid_init(&d, 4, 16, 4096, 4096, 0, 0x7e0000000000ull);   /* 64 rows */
    enum { N = 32 };
    uint8_t picks[N * 8];
    for (uint32_t i = 0; i < N; i++) {
        put_src(picks, i, i * 7 % 60);
        put_dst(picks, N, i, 2 * i + 1);     /* the odd rows, the last (63) at pick 31 */
    }
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_OK);
    /* One pick, and none. */
    uint8_t one[8];
    put_src(one, 0, 59);
    put_dst(one, 1, 0, 63);
    assert_int_equal(pairs_check(&s.g, &d.g, one, 1, NULL), B10_OK);
    uint32_t unused[2] = { 7, 7 };
    assert_int_equal(plan_grid_pairs(&s.g, &d.g, one, one + 4, 0, unused), B10_ERR_UNSUPPORTED);

    /* A source index: the last row taken, one past it not. */
    put_src(picks, 3, 59);
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_OK);
    put_src(picks, 3, 60);
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_ERR_UNSUPPORTED);
    put_src(picks, 3, UINT32_MAX);
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_ERR_UNSUPPORTED);
    put_src(picks, 3, 21);

    /* A destination index likewise (pick 31 holds the last row, 63). */
    put_dst(picks, N, 31, 64);
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_ERR_UNSUPPORTED);
    put_dst(picks, N, 31, UINT32_MAX);
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_ERR_UNSUPPORTED);
    put_dst(picks, N, 31, 0);                /* the first row, unpicked till now */
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_OK);
    put_dst(picks, N, 31, 63);

    /* A destination row twice is refused, a source row twice taken. */
    put_dst(picks, N, 4, get_dst(picks, N, 9));
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_ERR_UNSUPPORTED);
    put_dst(picks, N, 4, get_dst(picks, N, 31));        /* the last row, the bitmap's top bit */
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_ERR_UNSUPPORTED);
    put_dst(picks, N, 4, 9);
    put_src(picks, 4, frame_get_u32(picks + 9 * 4));
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_OK);
    for (uint32_t i = 0; i < N; i++)
        put_src(picks, i, 17);                          /* every pick the same row */
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_OK);
    for (uint32_t i = 0; i < N; i++)
        put_src(picks, i, i * 7 % 60);

    /* A destination stride shorter than the length is refused, one of the length taken. */
    d.g.stride = 4095;
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_ERR_UNSUPPORTED);
    d.g.stride = 0;
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_ERR_UNSUPPORTED);
    d.g.stride = 4096;
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_OK);
    /* A source's may be: its rows are only read. */
    s.g.stride = 4095;
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_OK);
    s.g.stride = 0;
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_OK);
    s.g.stride = 4096;

    /*
     * Destination bases whose rows touch exactly are taken; the top base
     * one byte lower (its first row over the last of the base below) is
     * refused, whichever rows are picked; so are two bases at one address.
     * A source's bases may do either.
     */
    size_t top = base_ranked(&d, 3), below = base_ranked(&d, 2);
    uint64_t top_addr = frame_get_u64(d.bases + top * 8);
    assert_int_equal(top_addr - frame_get_u64(d.bases + below * 8), 16 * 4096);
    frame_put_u64(d.bases + top * 8, top_addr - 1);
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_ERR_UNSUPPORTED);
    frame_put_u64(d.bases + top * 8, frame_get_u64(d.bases + below * 8));
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_ERR_UNSUPPORTED);
    frame_put_u64(d.bases + top * 8, top_addr + 1);
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_OK);
    frame_put_u64(d.bases + top * 8, top_addr);
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_OK);
    uint64_t s1 = frame_get_u64(s.bases + 8);
    frame_put_u64(s.bases + 8, frame_get_u64(s.bases) + 1);
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_OK);
    frame_put_u64(s.bases + 8, s1);

    /*
     * Rows of two bases that interleave, each in the other's gaps, overlap
     * nowhere (plan_build takes them) but are not in address order base by
     * base: refused all the same.
     */
    struct grid_fixture inter;
    grid_init(&inter, 2, 8, 8192, 4096, 0, 0x7e0000000000ull);
    frame_put_u64(inter.bases, 0x7e0000000000ull);
    frame_put_u64(inter.bases + 8, 0x7e0000000000ull + 4096);
    uint8_t four[32];
    for (uint32_t i = 0; i < 4; i++) {
        put_src(four, i, i);
        put_dst(four, 4, i, 4 * i + 1);
    }
    assert_int_equal(pairs_check(&s.g, &inter.g, four, 4, NULL), B10_ERR_UNSUPPORTED);
    char detail[256];
    uint8_t tables[4 * 2 * SPAN_BYTES];
    assert_int_equal(picks_spans(&s.g, &inter.g, four, 4, tables, detail, sizeof(detail)),
                     B10_OK);
    struct plan *p = NULL;
    assert_int_equal(plan_build(tables, tables + 4 * SPAN_BYTES, 4, 1 << 20, &p, detail,
                                sizeof(detail)), B10_OK);
    plan_free(p);
    frame_put_u64(inter.bases + 8, 0x7e0000000000ull + 7 * 8192 + 4096);    /* touching */
    assert_int_equal(pairs_check(&s.g, &inter.g, four, 4, NULL), B10_OK);

    /* Rows of other lengths, either way. */
    d.g.length = 2048;
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_ERR_UNSUPPORTED);
    d.g.length = 4096;
    s.g.length = 2048;
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_ERR_UNSUPPORTED);
    s.g.length = 4096;
    assert_int_equal(pairs_check(&s.g, &d.g, picks, N, NULL), B10_OK);
}

/* At most PLAN_GRID_BASES bases a side, whatever the picks. */
static void test_grid_pairs_bases_bound(void **state)
{
    (void)state;
    rng_seed(11);
    struct picks_grid at = wide_grid(PLAN_GRID_BASES, 0x7f0000000000ull);
    struct picks_grid over = wide_grid(PLAN_GRID_BASES + 1, 0x7e0000000000ull);
    struct grid_fixture small;
    grid_init(&small, 2, 32, 64, 64, 0, 0x7d0000000000ull);     /* 64 rows */
    enum { N = 8 };
    uint8_t fwd[N * 8], back[N * 8];
    for (uint32_t i = 0; i < N; i++) {
        /* The last rows of the big grids too: 2 * PLAN_GRID_BASES - 1, and the one beyond. */
        uint32_t big = i == N - 1 ? 2 * PLAN_GRID_BASES - 1 : i * 251;
        put_src(fwd, i, big);
        put_dst(fwd, N, i, i * 8);
        put_src(back, i, i * 8);
        put_dst(back, N, i, big);
    }
    assert_int_equal(pairs_check(&at, &small.g, fwd, N, NULL), B10_OK);
    assert_int_equal(pairs_check(&small.g, &at, back, N, NULL), B10_OK);
    assert_int_equal(pairs_check(&over, &small.g, fwd, N, NULL), B10_ERR_UNSUPPORTED);
    assert_int_equal(pairs_check(&small.g, &over, back, N, NULL), B10_ERR_UNSUPPORTED);
    free((void *)at.bases);
    free((void *)over.bases);
}

/*
 * Destination grids of many rows beside the picks: 2^24 rows are taken
 * whatever the picks, more only where they are at most 64 a pick. Source
 * grids are not bounded so: no memory is kept by their rows.
 */
static void test_grid_pairs_rows_bound(void **state)
{
    (void)state;
    rng_seed(13);
    const uint64_t grid_bits = UINT64_C(1) << 24;
    struct grid_fixture s, d;
    grid_init(&s, 2, 2, 64, 64, 0, 0x7f0000000000ull);          /* 4 rows */
    grid_init(&d, 1, grid_bits, 64, 64, 0, 0x7e0000000000ull);
    uint8_t two[16];
    put_src(two, 0, 1);
    put_src(two, 1, 3);
    put_dst(two, 2, 0, 0);
    put_dst(two, 2, 1, (uint32_t)grid_bits - 1);
    assert_int_equal(pairs_check(&s.g, &d.g, two, 2, NULL), B10_OK);
    put_dst(two, 2, 0, (uint32_t)grid_bits - 1);                /* the last row twice */
    assert_int_equal(pairs_check(&s.g, &d.g, two, 2, NULL), B10_ERR_UNSUPPORTED);
    put_dst(two, 2, 0, 0);
    d.g.per_base = grid_bits + 1;
    assert_int_equal(pairs_check(&s.g, &d.g, two, 2, NULL), B10_ERR_UNSUPPORTED);
    /* The same rows in many bases. */
    uint8_t *bases = malloc(PLAN_GRID_BASES * 8);
    assert_non_null(bases);
    for (uint64_t b = 0; b < PLAN_GRID_BASES; b++)
        frame_put_u64(bases + b * 8, 0x7e0000000000ull + (PLAN_GRID_BASES - 1 - b) * (1ull << 24));
    struct picks_grid many = { bases, PLAN_GRID_BASES, grid_bits / PLAN_GRID_BASES, 64, 64 };
    assert_int_equal(pairs_check(&s.g, &many, two, 2, NULL), B10_OK);
    many.per_base++;
    put_dst(two, 2, 1, (uint32_t)picks_grid_rows(&many) - 1);
    assert_int_equal(pairs_check(&s.g, &many, two, 2, NULL), B10_ERR_UNSUPPORTED);
    put_dst(two, 2, 1, (uint32_t)grid_bits - 1);
    free(bases);

    /* Past 2^24 rows: 64 a pick taken (the last row too), one pick's worth more refused. */
    const size_t count = (size_t)(grid_bits / 64) + 1;
    uint8_t *picks = malloc(count * 8);
    assert_non_null(picks);
    for (size_t i = 0; i < count; i++) {
        put_src(picks, i, (uint32_t)(i % 4));
        put_dst(picks, count, i, (uint32_t)(i * 64 + 63));
    }
    d.g.per_base = 64 * (uint64_t)count;
    assert_true(picks_grid_rows(&d.g) > grid_bits);
    assert_int_equal(pairs_check(&s.g, &d.g, picks, count, NULL), B10_OK);
    d.g.per_base = 64 * (uint64_t)(count + 1);
    assert_int_equal(pairs_check(&s.g, &d.g, picks, count, NULL), B10_ERR_UNSUPPORTED);
    free(picks);

    /* A source grid of 2^32 - 1 rows: its last row taken, the index past it not. */
    struct grid_fixture huge;
    grid_init(&huge, 1, UINT32_MAX, 64, 64, 0, 0x10000);
    d.g.per_base = grid_bits;
    put_src(two, 1, UINT32_MAX - 1);
    assert_int_equal(pairs_check(&huge.g, &d.g, two, 2, NULL), B10_OK);
    put_src(two, 1, UINT32_MAX);
    assert_int_equal(pairs_check(&huge.g, &d.g, two, 2, NULL), B10_ERR_UNSUPPORTED);
}

/* ---------------------------------------------------------------- plan_rows */

/* The plan of count rows of len bytes, per_chunk a chunk: no pieces, chunks in the picks' order. */
static void check_rows(size_t count, uint64_t len, uint32_t per_chunk)
{
    struct plan *p = plan_rows(count, len, per_chunk);
    assert_non_null(p);
    assert_null(p->pieces);
    assert_int_equal(p->npieces, count);
    assert_int_equal(p->total, (uint64_t)count * len);
    assert_int_equal(p->nchunks, (count + per_chunk - 1) / per_chunk);
    uint64_t next = 0;
    for (uint32_t c = 0; c < p->nchunks; c++) {
        const struct plan_chunk *ch = &p->chunks[c];
        assert_int_equal(ch->first, next);
        /* Full but the last, which holds the rest. */
        assert_int_equal(ch->count, c + 1 < p->nchunks ? per_chunk : count - next);
        assert_true(ch->count > 0 && ch->count <= per_chunk);
        assert_int_equal(ch->bytes, (uint64_t)ch->count * len);
        next += ch->count;
    }
    assert_int_equal(next, count);
    plan_free(p);
}

static void test_plan_rows(void **state)
{
    (void)state;
    struct plan *p = plan_rows(10, 4096, 4);
    assert_non_null(p);
    assert_null(p->pieces);
    assert_int_equal(p->npieces, 10);
    assert_int_equal(p->total, 10 * 4096);
    assert_int_equal(p->nchunks, 3);
    const struct plan_chunk want[3] = { { 0, 4, 4 * 4096 }, { 4, 4, 4 * 4096 },
                                        { 8, 2, 2 * 4096 } };
    for (int c = 0; c < 3; c++) {
        assert_int_equal(p->chunks[c].first, want[c].first);
        assert_int_equal(p->chunks[c].count, want[c].count);
        assert_int_equal(p->chunks[c].bytes, want[c].bytes);
    }
    plan_free(p);

    /* Chunks that come out even; per_chunk of the count and past it: one chunk. */
    check_rows(12, 100, 4);
    check_rows(10, 4096, 10);
    check_rows(10, 4096, 11);
    check_rows(10, 4096, UINT32_MAX);
    check_rows(10, 3, 1);
    check_rows(1, 1, 1);
    /* The largest: 2^32 - 1 rows whose bytes are 2^64 - 1, in one chunk. */
    check_rows(UINT32_MAX, (UINT64_C(1) << 32) + 1, UINT32_MAX);
    check_rows(2, UINT64_MAX / 2, 1);
    for (uint64_t seed = 1; seed <= 200; seed++) {
        rng_seed(seed);
        size_t count = 1 + rng_next() % 5000;
        uint32_t per_chunk = (uint32_t)(1 + rng_next() % (seed % 2 ? 64 : 6000));
        check_rows(count, 1 + rng_next() % (1 << 20), per_chunk);
    }

    /* None: no rows, 2^32 of them, no bytes, no picks a chunk, a total past 2^64. */
    assert_null(plan_rows(0, 4096, 4));
    assert_null(plan_rows((size_t)UINT32_MAX + 1, 1, UINT32_MAX));
    assert_null(plan_rows(10, 0, 4));
    assert_null(plan_rows(10, 4096, 0));
    assert_null(plan_rows(2, UINT64_C(1) << 63, 1));
    assert_null(plan_rows(UINT32_MAX, (UINT64_C(1) << 32) + 2, UINT32_MAX));
    assert_null(plan_rows(3, UINT64_MAX / 2, 4));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_plan_as_the_spans),
        cmocka_unit_test(test_slots_and_sort_agree),
        cmocka_unit_test(test_left_to_the_spans),
        cmocka_unit_test(test_grid_pairs_random),
        cmocka_unit_test(test_grid_pairs_refusals),
        cmocka_unit_test(test_grid_pairs_bases_bound),
        cmocka_unit_test(test_grid_pairs_rows_bound),
        cmocka_unit_test(test_plan_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
