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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_plan_as_the_spans),
        cmocka_unit_test(test_slots_and_sort_agree),
        cmocka_unit_test(test_left_to_the_spans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
