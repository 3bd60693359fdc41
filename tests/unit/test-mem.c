/*
 * test-mem.c — daemon/mem/mem.c: mem_table_walk, the translation of a rank's
 * addresses through its registrations that every check and copy goes through.
 *
 * The walk starts from the region the previous walk began in when that one
 * holds the address, and searches otherwise. Fixed cases pin what it emits
 * (one run per region, in address order) and where it refuses (a gap, before
 * the first region, past the last). Then long random sequences of walks over
 * random region layouts, with regions dropped and added between walks so
 * the remembered index goes stale, must emit exactly what a linear scan of
 * the regions emits, and fail exactly where it fails; mem_table_hinted's
 * inline answer, where it gives one, must be the scan's single run.
 *
 * And the table of kinds of memory: every row has every operation, each
 * client kind finds its row (DRAM two: memfds and process memory), what the
 * rooms above ask of a request or a region is the kind's answer, and a kind
 * the table has not is refused with a detail that names it.
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

#include "rng.h"

#include "mem.h"

#define MAX_REGIONS 16
#define MAX_RUNS 64

struct run {
    const struct region *r;
    uint64_t offset, n;
};

struct runs {
    struct run run[MAX_RUNS];
    unsigned count;
};

static b10_status_t record(void *arg, struct region *r, uint64_t offset, uint64_t n)
{
    struct runs *out = arg;
    assert_true(out->count < MAX_RUNS);
    out->run[out->count++] = (struct run){ r, offset, n };
    return B10_OK;
}

/* A table over the caller's regions, which must be sorted and apart. */
struct fixture {
    struct region regions[MAX_REGIONS];
    struct region *sorted[MAX_REGIONS];
    struct mem_table table;
};

static void fixture_set(struct fixture *f, const uint64_t (*spans)[2], unsigned count)
{
    uint32_t hint = f->table.hint;
    memset(f->regions, 0, sizeof(f->regions));
    for (unsigned i = 0; i < count; i++) {
        f->regions[i] = (struct region){ .id = i + 1, .addr = spans[i][0], .length = spans[i][1] };
        f->sorted[i] = &f->regions[i];
    }
    /* The remembered index survives, as it does in the daemon when regions come and go. */
    f->table = (struct mem_table){ .regions = f->sorted, .count = count, .capacity = MAX_REGIONS,
                                   .limit = MAX_REGIONS, .hint = hint };
}

/* What the walk must do: find each byte's region by a scan of them all. */
static b10_status_t reference_walk(const struct fixture *f, uint64_t addr, uint64_t length,
                                   struct runs *out)
{
    while (length > 0) {
        const struct region *hit = NULL;
        for (uint32_t i = 0; i < f->table.count; i++) {
            const struct region *r = f->sorted[i];
            if (addr >= r->addr && addr - r->addr < r->length)
                hit = r;
        }
        if (hit == NULL)
            return B10_ERR_NOT_REGISTERED;
        uint64_t offset = addr - hit->addr;
        uint64_t n = hit->length - offset < length ? hit->length - offset : length;
        out->run[out->count++] = (struct run){ hit, offset, n };
        addr += n;
        length -= n;
    }
    return B10_OK;
}

static void expect_walk(struct fixture *f, uint64_t addr, uint64_t length, b10_status_t status,
                        unsigned nruns)
{
    struct runs got = { .count = 0 };
    assert_int_equal(mem_table_walk(&f->table, addr, length, record, &got), status);
    assert_int_equal(got.count, nruns);
}

/* ---------------------------------------------------------------- fixed cases */

static const uint64_t layout[][2] = {
    { 0x1000, 0x1000 },     /* [0x1000, 0x2000) */
    { 0x3000, 0x1000 },     /* [0x3000, 0x4000), a gap before it */
    { 0x4000, 0x2000 },     /* [0x4000, 0x6000), touching the one before */
};

static void test_runs_per_region(void **state)
{
    (void)state;
    struct fixture f = { 0 };
    fixture_set(&f, layout, 3);

    struct runs got = { .count = 0 };
    assert_int_equal(mem_table_walk(&f.table, 0x3800, 0x1000, record, &got), B10_OK);
    assert_int_equal(got.count, 2);
    assert_ptr_equal(got.run[0].r, &f.regions[1]);
    assert_int_equal(got.run[0].offset, 0x800);
    assert_int_equal(got.run[0].n, 0x800);
    assert_ptr_equal(got.run[1].r, &f.regions[2]);
    assert_int_equal(got.run[1].offset, 0);
    assert_int_equal(got.run[1].n, 0x800);

    expect_walk(&f, 0x1000, 0x1000, B10_OK, 1);         /* a whole region */
    expect_walk(&f, 0x5fff, 1, B10_OK, 1);              /* the last byte */
    expect_walk(&f, 0x3000, 0x3000, B10_OK, 2);         /* across the touching pair */
}

static void test_refusals(void **state)
{
    (void)state;
    struct fixture f = { 0 };
    fixture_set(&f, layout, 3);

    expect_walk(&f, 0x0fff, 2, B10_ERR_NOT_REGISTERED, 0);      /* starts before the first */
    expect_walk(&f, 0x1800, 0x1000, B10_ERR_NOT_REGISTERED, 1); /* runs into the gap */
    expect_walk(&f, 0x2000, 1, B10_ERR_NOT_REGISTERED, 0);      /* in the gap */
    expect_walk(&f, 0x5800, 0x1000, B10_ERR_NOT_REGISTERED, 1); /* runs past the last */
    expect_walk(&f, 0x6000, 1, B10_ERR_NOT_REGISTERED, 0);      /* past the last */

    /* A walk after one that began in the last region, once that region is gone. */
    expect_walk(&f, 0x4000, 1, B10_OK, 1);
    fixture_set(&f, layout, 2);
    expect_walk(&f, 0x4000, 1, B10_ERR_NOT_REGISTERED, 0);
    expect_walk(&f, 0x3000, 1, B10_OK, 1);
}

/* mem_table_hinted: the last walk's region when it alone holds the span, else NULL. */
static void test_hinted(void **state)
{
    (void)state;
    struct fixture f = { 0 };
    fixture_set(&f, layout, 3);
    f.table.hint = UINT32_MAX;
    assert_null(mem_table_hinted(&f.table, 0x3000, 1));         /* no walk yet */
    expect_walk(&f, 0x3100, 0x10, B10_OK, 1);                   /* now it is region 2 */
    assert_ptr_equal(mem_table_hinted(&f.table, 0x3000, 0x1000), &f.regions[1]);
    assert_ptr_equal(mem_table_hinted(&f.table, 0x3fff, 1), &f.regions[1]);
    assert_null(mem_table_hinted(&f.table, 0x3fff, 2));         /* into the touching one */
    assert_null(mem_table_hinted(&f.table, 0x2fff, 2));         /* from the gap */
    assert_null(mem_table_hinted(&f.table, 0x4000, 1));         /* another region's */
    assert_null(mem_table_hinted(&f.table, 0x1000, 1));
    assert_null(mem_table_hinted(&f.table, 0x3800, UINT64_MAX)); /* no wrap past the end */
    fixture_set(&f, layout, 1);                                 /* region 2 is gone */
    assert_null(mem_table_hinted(&f.table, 0x3000, 1));
}

/* ---------------------------------------------------------------- against the scan */

/* Up to MAX_REGIONS regions, sorted, apart or touching, in [0, 1 << 20). */
static unsigned random_layout(uint64_t (*spans)[2])
{
    unsigned count = 1 + (unsigned)(rng_next() % MAX_REGIONS);
    uint64_t at = rng_next() % 0x4000;
    for (unsigned i = 0; i < count; i++) {
        spans[i][0] = at;
        spans[i][1] = 1 + rng_next() % 0x8000;
        at += spans[i][1] + (rng_next() % 3 == 0 ? 0 : rng_next() % 0x4000);
    }
    return count;
}

static void test_matches_a_scan(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        rng_seed(seed);
        struct fixture f = { 0 };
        uint64_t spans[MAX_REGIONS][2];
        fixture_set(&f, spans, random_layout(spans));
        for (unsigned k = 0; k < 500; k++) {
            /* Now and then the registrations change under the remembered index. */
            if (rng_next() % 50 == 0)
                fixture_set(&f, spans, random_layout(spans));
            const struct region *near = f.sorted[rng_next() % f.table.count];
            uint64_t addr = near->addr + rng_next() % (near->length + 0x100) - 0x80 * (rng_next() % 2);
            uint64_t length = 1 + rng_next() % (rng_next() % 4 == 0 ? 0x20000 : 0x400);
            struct runs want = { .count = 0 }, got = { .count = 0 };
            b10_status_t want_status = reference_walk(&f, addr, length, &want);
            /* The inline answer, where it gives one, is the scan's single run. */
            const struct region *hinted = mem_table_hinted(&f.table, addr, length);
            if (hinted != NULL && (want_status != B10_OK || want.count != 1 ||
                                   want.run[0].r != hinted))
                fail_msg("seed %llu walk %u (0x%llx+%llu): hinted region %llu, the scan %d "
                         "with %u runs", (unsigned long long)seed, k, (unsigned long long)addr,
                         (unsigned long long)length, (unsigned long long)hinted->id,
                         want_status, want.count);
            b10_status_t got_status = mem_table_walk(&f.table, addr, length, record, &got);
            if (got_status != want_status || got.count != want.count)
                fail_msg("seed %llu walk %u (0x%llx+%llu): status %d with %u runs, the scan %d "
                         "with %u", (unsigned long long)seed, k, (unsigned long long)addr,
                         (unsigned long long)length, got_status, got.count, want_status,
                         want.count);
            for (unsigned i = 0; i < got.count; i++) {
                if (got.run[i].r != want.run[i].r || got.run[i].offset != want.run[i].offset ||
                    got.run[i].n != want.run[i].n)
                    fail_msg("seed %llu walk %u: run %u differs from the scan's",
                             (unsigned long long)seed, k, i);
            }
        }
    }
}

/* ---------------------------------------------------------------- kinds */

/* Every kind mem.h declares, and what b10ctl and the copiers see of it. */
static const struct {
    const struct mem_kind_ops *ops;
    const char *name, *kind_name;
    b10_mem_kind_t kind;
    enum mem_reach reach;
} kinds[] = {
    { &dram_kind, "dram", "dram", B10_MEM_DRAM, MEM_REACH_MAPPED },
    { &procmem_kind, "process", "dram", B10_MEM_DRAM, MEM_REACH_FILE },
    { &vram_kind, "vram", "vram", B10_MEM_VRAM, MEM_REACH_DEVICE },
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

static void test_kinds_complete(void **state)
{
    size_t rows = 0;
    for (const struct mem_kind_ops *k; (k = mem_kind_at(rows)) != NULL; rows++) {
        if (k->name == NULL || k->kind_name == NULL || k->serves == NULL ||
            k->takes_fd == NULL || k->open == NULL || k->close == NULL)
            fail_msg("row %zu (%s) of the table lacks an operation", rows,
                     k->name != NULL ? k->name : "unnamed");
        assert_true(k->reach == MEM_REACH_MAPPED || k->reach == MEM_REACH_FILE ||
                    k->reach == MEM_REACH_DEVICE);
    }
    /* Each declared kind is a row, once. */
    assert_int_equal(rows, NKINDS);
    for (size_t i = 0; i < NKINDS; i++) {
        unsigned seen = 0;
        for (size_t r = 0; r < rows; r++)
            seen += mem_kind_at(r) == kinds[i].ops;
        if (seen != 1)
            fail_msg("kind %s is %u rows of the table, not one", kinds[i].name, seen);
    }
}

static void test_kind_lookup(void **state)
{
    for (size_t i = 0; i < NKINDS; i++) {
        const struct mem_kind_ops *k = kinds[i].ops;
        assert_string_equal(k->name, kinds[i].name);
        assert_string_equal(k->kind_name, kinds[i].kind_name);
        assert_int_equal(k->kind, kinds[i].kind);
        assert_int_equal(k->reach, kinds[i].reach);
    }
    /* Each request finds one row: the first that serves it, and no other would. */
    const struct { struct mem_request req; const struct mem_kind_ops *want; } cases[] = {
        { { .kind = B10_MEM_DRAM }, &dram_kind },
        { { .kind = B10_MEM_DRAM, .process_mem = true }, &procmem_kind },
        { { .kind = B10_MEM_VRAM }, &vram_kind },
        { { .kind = B10_MEM_VRAM, .process_mem = true }, &vram_kind },     /* DRAM's flag alone */
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const struct mem_kind_ops *got = mem_kind_of(&cases[c].req);
        if (got != cases[c].want)
            fail_msg("case %zu: kind %d%s found %s, not %s", c, (int)cases[c].req.kind,
                     cases[c].req.process_mem ? " (process memory)" : "",
                     got != NULL ? got->name : "no row", cases[c].want->name);
        unsigned serving = 0;
        for (size_t r = 0; mem_kind_at(r) != NULL; r++)
            serving += mem_kind_at(r)->kind == cases[c].req.kind &&
                       mem_kind_at(r)->serves(&cases[c].req);
        assert_int_equal(serving, 1);
    }
}

/* What session.c asks of a request: the descriptor to take, the host bytes to count. */
static void test_kind_request_questions(void **state)
{
    struct mem_request dram = { .kind = B10_MEM_DRAM };
    struct mem_request proc = { .kind = B10_MEM_DRAM, .process_mem = true };
    struct mem_request ipc = { .kind = B10_MEM_VRAM };
    struct mem_request vmm = { .kind = B10_MEM_VRAM, .vmm_fd = true };

    assert_true(mem_request_takes_fd(&dram));
    assert_true(mem_request_takes_fd(&proc));
    assert_false(mem_request_takes_fd(&ipc));           /* the handle is in the message */
    assert_true(mem_request_takes_fd(&vmm));
    assert_true(mem_request_host(&dram));
    assert_true(mem_request_host(&proc));
    assert_false(mem_request_host(&ipc));
    assert_false(mem_request_host(&vmm));
}

/* What the copiers ask of a region: their device, and whether base is the daemon's pointer. */
static void test_kind_region_questions(void **state)
{
    struct region r = { .device = 3, .proc_fd = -1 };

    r.ops = &dram_kind;
    assert_false(mem_region_on_device(&r));
    assert_int_equal(mem_region_device(&r), -1);    /* host memory, whatever the field says */
    assert_true(mem_region_mapped(&r));
    r.ops = &procmem_kind;
    assert_false(mem_region_on_device(&r));
    assert_int_equal(mem_region_device(&r), -1);
    assert_false(mem_region_mapped(&r));            /* base is the rank's address */
    r.ops = &vram_kind;
    assert_true(mem_region_on_device(&r));
    assert_int_equal(mem_region_device(&r), 3);
    assert_false(mem_region_mapped(&r));
}

/* A kind the table has not: refused, saying which, before anything is opened. */
static void test_kind_unknown(void **state)
{
    struct mem_table t;
    struct region *r = NULL;
    char detail[128];
    const b10_mem_kind_t unknown[] = { (b10_mem_kind_t)0, (b10_mem_kind_t)3, (b10_mem_kind_t)77 };

    mem_table_init(&t, 4, 1 << 20);
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        struct mem_request req = { .kind = unknown[i], .addr = 0x10000, .length = 4096,
                                   .fd = -1 };
        char want[64];
        snprintf(want, sizeof(want), "unknown memory kind %d", (int)unknown[i]);
        assert_null(mem_kind_of(&req));
        detail[0] = '\0';
        assert_int_equal(mem_table_check(&t, &req, detail, sizeof(detail)), B10_ERR_INVALID_ARG);
        assert_string_equal(detail, want);
        detail[0] = '\0';
        assert_int_equal(mem_region_open(1, &req, detail, sizeof(detail), &r),
                         B10_ERR_INVALID_ARG);
        assert_string_equal(detail, want);
        assert_null(r);
        assert_false(mem_request_host(&req));
        assert_false(mem_request_takes_fd(&req));
        /* One that says it carries a descriptor has it taken, to be closed with the refusal. */
        req.vmm_fd = true;
        assert_true(mem_request_takes_fd(&req));
        /* The same request of a kind the table has passes the check. */
        req.kind = B10_MEM_DRAM;
        assert_int_equal(mem_table_check(&t, &req, detail, sizeof(detail)), B10_OK);
    }
    mem_table_clear(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runs_per_region),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_hinted),
        cmocka_unit_test(test_matches_a_scan),
        cmocka_unit_test(test_kinds_complete),
        cmocka_unit_test(test_kind_lookup),
        cmocka_unit_test(test_kind_request_questions),
        cmocka_unit_test(test_kind_region_questions),
        cmocka_unit_test(test_kind_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
