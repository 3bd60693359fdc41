/*
 * test-hole.c — daemon/mem/hole.c: which pages of a mapping of a memfd the
 * file has, asked before a copy where the guard could not be set.
 *
 * Real memfds with data in some pages and holes in others, mapped shared
 * (unguarded, as on a daemon without userfaultfd): ranges wholly in data
 * pass, one that reaches a hole is refused at the first byte of it inside
 * the range, whatever the alignment, the mapping's file offset, or a range
 * longer than one mincore vector; and asking allocates nothing. A page
 * fallocated and never written counts as a hole (hole.h says why). The
 * ranges of one copy, asked about together, are answered the same.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "hole.h"

static size_t page;

struct file {
    int fd;
    uint8_t *map;       /* the file from map_off on */
    size_t pages;       /* of the file */
    size_t map_off;     /* the file offset of map, whole pages */
};

/* A sparse memfd of pages pages, written where data[k] is set, mapped from page first on. */
static void file_open(struct file *f, size_t pages, const bool *data, size_t first)
{
    uint8_t *bytes = malloc(page);
    assert_non_null(bytes);
    memset(bytes, 0x33, page);
    f->fd = memfd_create("test-hole", MFD_CLOEXEC);
    assert_true(f->fd >= 0);
    f->pages = pages;
    f->map_off = first * page;
    assert_int_equal(ftruncate(f->fd, (off_t)(pages * page)), 0);
    for (size_t k = 0; k < pages; k++)
        if (data[k])
            assert_int_equal(pwrite(f->fd, bytes, page, (off_t)(k * page)), (ssize_t)page);
    f->map = mmap(NULL, (pages - first) * page, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd,
                  (off_t)f->map_off);
    assert_true(f->map != MAP_FAILED);
    free(bytes);
}

static void file_close(struct file *f)
{
    munmap(f->map, (f->pages - f->map_off / page) * page);
    close(f->fd);
}

/* hole_check of [at, at + len) of the mapping, as copy.c asks it. */
static b10_status_t check(const struct file *f, size_t at, size_t len, const uint8_t **hole_p)
{
    *hole_p = NULL;
    return hole_check(f->fd, f->map_off + at, f->map + at, len, hole_p);
}

static size_t file_pages_held(const struct file *f)
{
    size_t n = 0;
    for (off_t at = 0;; at += (off_t)page) {
        at = lseek(f->fd, at, SEEK_DATA);
        if (at < 0)
            return n;
        n++;
    }
}

/* Data in pages 0..7 and 16, holes elsewhere of 32. */
static void data_pages(bool *data)
{
    memset(data, 0, 32 * sizeof(*data));
    for (int k = 0; k < 8; k++)
        data[k] = true;
    data[16] = true;
}

static void test_data_passes_holes_refused(void **state)
{
    bool data[32];
    struct file f;
    const uint8_t *hole;
    data_pages(data);
    file_open(&f, 32, data, 0);

    assert_int_equal(check(&f, 0, 8 * page, &hole), B10_OK);
    assert_int_equal(check(&f, 3 * page + 100, 4000, &hole), B10_OK);   /* across a boundary */
    assert_int_equal(check(&f, 16 * page + 1, page - 1, &hole), B10_OK);
    /* One byte into the hole after the data: refused at the hole's first byte. */
    assert_int_equal(check(&f, 0, 8 * page + 1, &hole), B10_ERR_NOT_POPULATED);
    assert_ptr_equal(hole, f.map + 8 * page);
    assert_int_equal(check(&f, 7 * page + 10, page, &hole), B10_ERR_NOT_POPULATED);
    assert_ptr_equal(hole, f.map + 8 * page);
    /* A range that begins inside a hole: its own first byte. */
    assert_int_equal(check(&f, 9 * page + 123, 10, &hole), B10_ERR_NOT_POPULATED);
    assert_ptr_equal(hole, f.map + 9 * page + 123);
    /* Data on both sides of holes: the first hole. */
    assert_int_equal(check(&f, 6 * page, 11 * page, &hole), B10_ERR_NOT_POPULATED);
    assert_ptr_equal(hole, f.map + 8 * page);
    /* Asking allocated nothing. */
    assert_int_equal(file_pages_held(&f), 9);
    file_close(&f);
}

/* A mapping from a file offset other than 0: offsets and addresses stay paired. */
static void test_mapping_at_an_offset(void **state)
{
    bool data[32];
    struct file f;
    const uint8_t *hole;
    data_pages(data);
    file_open(&f, 32, data, 4);     /* map[0] is file page 4 */

    assert_int_equal(check(&f, 0, 4 * page, &hole), B10_OK);            /* file pages 4..7 */
    assert_int_equal(check(&f, 2 * page, 3 * page, &hole), B10_ERR_NOT_POPULATED);
    assert_ptr_equal(hole, f.map + 4 * page);                           /* file page 8 */
    assert_int_equal(check(&f, 12 * page, page, &hole), B10_OK);        /* file page 16 */
    file_close(&f);
}

/* Ranges longer than one mincore vector (512 pages) are asked about whole. */
static void test_long_ranges(void **state)
{
    const size_t pages = 1500;
    bool *data = calloc(pages, sizeof(*data));
    struct file f;
    const uint8_t *hole;
    assert_non_null(data);
    for (size_t k = 0; k < pages; k++)
        data[k] = k != 1300;
    file_open(&f, pages, data, 0);

    assert_int_equal(check(&f, 0, 1300 * page, &hole), B10_OK);
    assert_int_equal(check(&f, 5, pages * page - 5, &hole), B10_ERR_NOT_POPULATED);
    assert_ptr_equal(hole, f.map + 1300 * page);
    assert_int_equal(check(&f, 1301 * page, 199 * page, &hole), B10_OK);
    file_close(&f);
    free(data);
}

/* Pages the daemon faulted in count too, and fallocated, never-written ones do not. */
static void test_mapped_and_fallocated(void **state)
{
    bool data[32];
    struct file f;
    const uint8_t *hole;
    data_pages(data);
    file_open(&f, 32, data, 0);

    volatile uint8_t sum = f.map[3 * page];     /* mapped here too: still the file's */
    (void)sum;
    assert_int_equal(check(&f, 3 * page, page, &hole), B10_OK);
    assert_int_equal(fallocate(f.fd, 0, (off_t)(20 * page), (off_t)page), 0);
    assert_int_equal(check(&f, 20 * page, page, &hole), B10_ERR_NOT_POPULATED);
    /* Written, it is data. */
    assert_int_equal(pwrite(f.fd, "x", 1, (off_t)(20 * page)), 1);
    assert_int_equal(check(&f, 20 * page, page, &hole), B10_OK);
    file_close(&f);
}

/* hole_span over ranges of the mapping: what hole_check says of each, dense or not. */
static b10_status_t span_check(const struct file *f, const size_t (*ranges)[2], size_t n,
                               bool *asked_p, const uint8_t **hole_p)
{
    struct hole_span span;
    hole_span_init(&span, f->fd, f->map_off, f->map);
    for (size_t i = 0; i < n; i++)
        hole_span_grow(&span, f->map + ranges[i][0], ranges[i][1]);
    hole_span_ask(&span);
    *asked_p = span.vec != NULL;
    b10_status_t st = B10_OK;
    for (size_t i = 0; i < n && st == B10_OK; i++)
        st = hole_span_check(&span, f->map + ranges[i][0], ranges[i][1], hole_p);
    hole_span_free(&span);
    return st;
}

/*
 * Ranges dense in their bounding pages are asked about with one mincore, and
 * answered as hole_check would; ranges spread far apart are asked one by one.
 */
static void test_span_dense_and_spread(void **state)
{
    const size_t pages = 4096;
    bool *data = calloc(pages, sizeof(*data)), asked;
    struct file f;
    const uint8_t *hole;
    assert_non_null(data);
    for (size_t k = 0; k < 64; k++)
        data[k] = k != 40;
    data[4000] = true;
    file_open(&f, pages, data, 0);

    const size_t dense[][2] = { { 3 * page, 100 }, { 10 * page + 5, 2 * page }, { 0, page } };
    assert_int_equal(span_check(&f, dense, 3, &asked, &hole), B10_OK);
    assert_true(asked);
    const size_t dense_hole[][2] = { { 3 * page, 100 }, { 39 * page + 7, 2 * page }, { 0, 1 } };
    assert_int_equal(span_check(&f, dense_hole, 3, &asked, &hole), B10_ERR_NOT_POPULATED);
    assert_true(asked);
    assert_ptr_equal(hole, f.map + 40 * page);
    /* Two pages 4000 apart: asked one by one, the same answers. */
    const size_t spread[][2] = { { 2 * page, page }, { 4000 * page + 9, 100 } };
    assert_int_equal(span_check(&f, spread, 2, &asked, &hole), B10_OK);
    assert_false(asked);
    const size_t spread_hole[][2] = { { 2 * page, page }, { 3000 * page, 1 } };
    assert_int_equal(span_check(&f, spread_hole, 2, &asked, &hole), B10_ERR_NOT_POPULATED);
    assert_false(asked);
    assert_ptr_equal(hole, f.map + 3000 * page);
    assert_int_equal(file_pages_held(&f), 64);
    file_close(&f);
    free(data);
}

static int group_setup(void **state)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_data_passes_holes_refused),
        cmocka_unit_test(test_mapping_at_an_offset),
        cmocka_unit_test(test_long_ranges),
        cmocka_unit_test(test_mapped_and_fallocated),
        cmocka_unit_test(test_span_dense_and_spread),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
