/*
 * test-picks.c — daemon/base/picks.c: a request's spans as rows picked from
 * two grids.
 *
 * Random grids and picks, many seeds, against a reference that divides:
 * every span written is the row its index names, on both sides. Then the
 * refusals, each beside the case one step inside the bound that passes: a
 * grid's rows reaching 2^64, 2^32 rows, bases that are not whole u64s, a
 * zero per base or length, an index one past its grid, grids of different
 * lengths.
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

struct grid_fixture {
    uint8_t bases[64 * 8];
    struct picks_grid g;
};

static void grid_init(struct grid_fixture *f, size_t nbases, uint64_t per_base, uint64_t stride,
                      uint64_t length)
{
    assert_true(nbases <= 64);
    for (size_t b = 0; b < nbases; b++)
        frame_put_u64(f->bases + b * 8, 0x7f0000000000ull + (rng_next() % (1u << 30)) * 64);
    f->g = (struct picks_grid){ f->bases, nbases, per_base, stride, length };
}

static uint64_t ref_row(const struct picks_grid *g, uint64_t k)
{
    return frame_get_u64(g->bases + (k / g->per_base) * 8) + (k % g->per_base) * g->stride;
}

static b10_status_t check(const struct picks_grid *g)
{
    char detail[256];
    return picks_grid_check(g, g->nbases * 8, "local", detail, sizeof(detail));
}

/* Random grids, random picks: every span is its row, on both sides. */
static void test_spans_are_the_picked_rows(void **state)
{
    (void)state;
    char detail[256];
    for (uint64_t seed = 1; seed <= 200; seed++) {
        rng_seed(seed);
        struct grid_fixture l, r;
        uint64_t length = 1 + rng_next() % 65536;
        /* per_base of 1 (no division), powers of two and odd ones (the multiply's cases). */
        uint64_t lper = seed % 3 == 0 ? 1 : 1 + rng_next() % 5000;
        uint64_t rper = seed % 5 == 0 ? 4096 : 1 + rng_next() % 5000;
        grid_init(&l, 1 + rng_next() % 64, lper, length + rng_next() % 4096, length);
        grid_init(&r, 1 + rng_next() % 64, rper, length * (1 + rng_next() % 4), length);
        assert_int_equal(check(&l.g), B10_OK);
        assert_int_equal(check(&r.g), B10_OK);
        size_t count = 1 + rng_next() % 3000;
        uint64_t lrows = picks_grid_rows(&l.g), rrows = picks_grid_rows(&r.g);
        uint8_t *picks = malloc(count * 8);
        uint8_t *tables = malloc(count * 2 * SPAN_BYTES);
        assert_non_null(picks);
        assert_non_null(tables);
        for (size_t i = 0; i < count; i++) {
            /* The grids' last rows among them. */
            uint64_t li = i == 0 ? lrows - 1 : rng_next() % lrows;
            uint64_t ri = i == 0 ? rrows - 1 : rng_next() % rrows;
            frame_put_u32(picks + i * 4, (uint32_t)li);
            frame_put_u32(picks + count * 4 + i * 4, (uint32_t)ri);
        }
        assert_int_equal(picks_spans(&l.g, &r.g, picks, count, tables, detail, sizeof(detail)),
                         B10_OK);
        for (size_t i = 0; i < count; i++) {
            const uint8_t *ls = tables + i * SPAN_BYTES;
            const uint8_t *rs = tables + count * SPAN_BYTES + i * SPAN_BYTES;
            assert_int_equal(frame_get_u64(ls), ref_row(&l.g, frame_get_u32(picks + i * 4)));
            assert_int_equal(frame_get_u64(ls + 8), length);
            assert_int_equal(frame_get_u64(rs),
                             ref_row(&r.g, frame_get_u32(picks + count * 4 + i * 4)));
            assert_int_equal(frame_get_u64(rs + 8), length);
        }
        free(picks);
        free(tables);
    }
}

/* The multiply that finds a row's base, at the largest indices a u32 holds. */
static void test_largest_rows(void **state)
{
    (void)state;
    char detail[256];
    struct grid_fixture l, r;
    rng_seed(17);
    /* One base of 2^32 - 1 rows, and two of 2^31 - 1 (no power of two, the last base's rows). */
    grid_init(&l, 1, UINT32_MAX, 1, 1);
    grid_init(&r, 2, (UINT64_C(1) << 31) - 1, 1, 1);
    assert_int_equal(check(&l.g), B10_OK);
    assert_int_equal(check(&r.g), B10_OK);
    static const uint32_t lk[] = { 0, 1, UINT32_MAX / 2, UINT32_MAX - 1 };
    static const uint32_t rk[] = { 0, (1u << 31) - 2, (1u << 31) - 1, UINT32_MAX - 2 };
    uint8_t picks[4 * 8], tables[4 * 2 * SPAN_BYTES];
    for (int i = 0; i < 4; i++) {
        frame_put_u32(picks + i * 4, lk[i]);
        frame_put_u32(picks + 16 + i * 4, rk[i]);
    }
    assert_int_equal(picks_spans(&l.g, &r.g, picks, 4, tables, detail, sizeof(detail)), B10_OK);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(frame_get_u64(tables + i * SPAN_BYTES), ref_row(&l.g, lk[i]));
        assert_int_equal(frame_get_u64(tables + (4 + i) * SPAN_BYTES), ref_row(&r.g, rk[i]));
    }
    /* One past each grid's last row. */
    frame_put_u32(picks + 16 + 3 * 4, UINT32_MAX - 1);
    assert_int_equal(picks_spans(&l.g, &r.g, picks, 4, tables, detail, sizeof(detail)),
                     B10_ERR_INVALID_ARG);
}

/* A grid's shape: each refusal beside the case just inside it. */
static void test_grid_checks(void **state)
{
    (void)state;
    char detail[256];
    struct grid_fixture f;
    rng_seed(7);
    grid_init(&f, 2, 16, 4096, 4096);
    assert_int_equal(check(&f.g), B10_OK);

    /* Bases that are not whole u64s, or do not match their count. */
    assert_int_equal(picks_grid_check(&f.g, 15, "local", detail, sizeof(detail)),
                     B10_ERR_INVALID_ARG);
    assert_int_equal(picks_grid_check(&f.g, 0, "local", detail, sizeof(detail)),
                     B10_ERR_INVALID_ARG);
    assert_int_equal(picks_grid_check(&f.g, 24, "local", detail, sizeof(detail)),
                     B10_ERR_INVALID_ARG);

    /* Zero rows per base, or a zero length. */
    f.g.per_base = 0;
    assert_int_equal(check(&f.g), B10_ERR_INVALID_ARG);
    f.g.per_base = 16;
    f.g.length = 0;
    assert_int_equal(check(&f.g), B10_ERR_INVALID_ARG);
    assert_non_null(strstr(detail, "local"));
    f.g.length = 4096;

    /* 2^32 - 1 rows are indexable by a u32; 2^32 are not. */
    f.g.nbases = 1;
    f.g.per_base = UINT32_MAX;
    f.g.stride = 1;
    f.g.length = 1;
    assert_int_equal(check(&f.g), B10_OK);
    assert_int_equal(picks_grid_rows(&f.g), UINT32_MAX);
    f.g.per_base = (uint64_t)UINT32_MAX + 1;
    assert_int_equal(check(&f.g), B10_ERR_INVALID_ARG);
    f.g.nbases = 2;
    f.g.per_base = UINT32_MAX / 2 + 1;      /* 2^32 rows in two bases */
    assert_int_equal(check(&f.g), B10_ERR_INVALID_ARG);

    /* The last row of the highest base ends at 2^64 - 1; one byte more wraps. */
    f.g.nbases = 1;
    f.g.per_base = 4;
    f.g.stride = 4096;
    f.g.length = 4096;
    frame_put_u64(f.bases, UINT64_MAX - 4 * 4096);
    assert_int_equal(check(&f.g), B10_OK);
    frame_put_u64(f.bases, UINT64_MAX - 4 * 4096 + 1);
    assert_int_equal(picks_grid_check(&f.g, 8, "remote", detail, sizeof(detail)),
                     B10_ERR_INVALID_ARG);
    assert_non_null(strstr(detail, "remote"));
    /* A stride whose product with the rows overflows, from base 0. */
    frame_put_u64(f.bases, 0);
    f.g.stride = UINT64_MAX / 2;
    assert_int_equal(check(&f.g), B10_ERR_INVALID_ARG);
}

/* An index one past its grid is refused, naming the side and the place; the last row passes. */
static void test_index_past_its_grid(void **state)
{
    (void)state;
    char detail[256];
    struct grid_fixture l, r;
    rng_seed(11);
    grid_init(&l, 3, 10, 8192, 4096);      /* 30 rows */
    grid_init(&r, 1, 7, 4096, 4096);       /* 7 rows */
    uint8_t picks[4 * 8], tables[4 * 2 * SPAN_BYTES];
    uint32_t lidx[4] = { 0, 29, 5, 12 }, ridx[4] = { 6, 0, 3, 1 };
    for (int i = 0; i < 4; i++) {
        frame_put_u32(picks + i * 4, lidx[i]);
        frame_put_u32(picks + 16 + i * 4, ridx[i]);
    }
    assert_int_equal(picks_spans(&l.g, &r.g, picks, 4, tables, detail, sizeof(detail)), B10_OK);

    frame_put_u32(picks + 2 * 4, 30);
    assert_int_equal(picks_spans(&l.g, &r.g, picks, 4, tables, detail, sizeof(detail)),
                     B10_ERR_INVALID_ARG);
    assert_non_null(strstr(detail, "local index 30 (at 2)"));
    frame_put_u32(picks + 2 * 4, 5);
    frame_put_u32(picks + 16 + 3 * 4, 7);
    assert_int_equal(picks_spans(&l.g, &r.g, picks, 4, tables, detail, sizeof(detail)),
                     B10_ERR_INVALID_ARG);
    assert_non_null(strstr(detail, "remote index 7 (at 3)"));
    /* The largest u32 is no row of a small grid either. */
    frame_put_u32(picks + 16 + 3 * 4, UINT32_MAX);
    assert_int_equal(picks_spans(&l.g, &r.g, picks, 4, tables, detail, sizeof(detail)),
                     B10_ERR_INVALID_ARG);
}

/* A pair's spans are as long as each other: grids of different lengths are refused. */
static void test_lengths_differ(void **state)
{
    (void)state;
    char detail[256];
    struct grid_fixture l, r;
    rng_seed(13);
    grid_init(&l, 1, 4, 8192, 4096);
    grid_init(&r, 1, 4, 8192, 4096);
    uint8_t picks[8] = { 0 }, tables[2 * SPAN_BYTES];
    assert_int_equal(picks_spans(&l.g, &r.g, picks, 1, tables, detail, sizeof(detail)), B10_OK);
    r.g.length = 2048;
    assert_int_equal(picks_spans(&l.g, &r.g, picks, 1, tables, detail, sizeof(detail)),
                     B10_ERR_INVALID_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spans_are_the_picked_rows),
        cmocka_unit_test(test_largest_rows),
        cmocka_unit_test(test_grid_checks),
        cmocka_unit_test(test_index_past_its_grid),
        cmocka_unit_test(test_lengths_differ),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
