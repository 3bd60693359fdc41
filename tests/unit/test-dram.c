/*
 * test-dram.c — daemon/mem/dram.c: the DRAM backend that maps a rank's memfd,
 * reached as the daemon reaches it, through mem.c's registration calls.
 *
 * Real memfds: the daemon's mapping must show the rank's bytes and the
 * rank must see what the daemon writes; every descriptor the backend must
 * refuse (none, not a memfd, not sealed against shrinking, a range past
 * the file) is refused with a detail that says why, beside one it accepts;
 * a sparse memfd's holes stay unpopulated; the rank's file offset is left
 * where it was. The registration table's own refusals (limits, overlaps)
 * and its reference counting are walked with the same real regions.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "regions.h"
#include "rng.h"

#include "log.h"
#include "mem.h"

#define MiB (UINT64_C(1) << 20)
#define RANK_ADDR UINT64_C(0x7f0000000000)   /* where the rank says its memory is */

static int memfd(uint64_t size, unsigned seals)
{
    int fd = memfd_create("test-dram", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)size), 0);
    if (seals != 0)
        assert_int_equal(fcntl(fd, F_ADD_SEALS, seals), 0);
    return fd;
}

static struct mem_request dram_req(int fd, uint64_t addr, uint64_t length, uint64_t fd_offset)
{
    return (struct mem_request){ .kind = B10_MEM_DRAM, .addr = addr, .length = length, .fd = fd,
                                 .fd_offset = fd_offset };
}

static int group_setup(void **state)
{
    return regions_setup("test-dram");
}

/* ---------------------------------------------------------------- the mapping */

/* The daemon's view is the rank's memory: bytes both ways, from any file offset. */
static void test_maps_the_rank_bytes(void **state)
{
    static const uint64_t offsets[] = { 0, 4096, 100, 3 * 4096 + 17 };
    int fd = memfd(MiB, F_SEAL_SHRINK | F_SEAL_GROW);
    uint8_t *bytes = malloc(MiB), back[512];

    rng_seed(1);
    for (size_t i = 0; i < MiB; i++)
        bytes[i] = (uint8_t)rng_next();
    assert_int_equal(pwrite(fd, bytes, MiB, 0), (ssize_t)MiB);

    for (size_t k = 0; k < sizeof(offsets) / sizeof(offsets[0]); k++) {
        uint64_t off = offsets[k], len = 64 * 1024 + 5;
        struct mem_request req = dram_req(fd, RANK_ADDR, len, off);
        struct region *r = NULL;

        assert_int_equal(open_region(&req, &r), B10_OK);
        assert_non_null(r);
        assert_int_equal(r->refs, 1);
        assert_int_equal(r->proc_fd, -1);
        assert_int_equal(r->device, -1);
        assert_int_equal(r->addr, RANK_ADDR);
        assert_int_equal(r->length, len);
        assert_string_equal(r->ops->name, "dram");
        assert_memory_equal(r->base, bytes + off, len);
        /* What the daemon writes, the rank reads from its file. */
        memset(r->base + 1000, 0xa5, sizeof(back));
        assert_int_equal(pread(fd, back, sizeof(back), (off_t)(off + 1000)), sizeof(back));
        for (size_t i = 0; i < sizeof(back); i++)
            assert_int_equal(back[i], 0xa5);
        memcpy(bytes + off + 1000, back, sizeof(back));
        region_unref(r);            /* the last reference: unmapped */
    }
    close(fd);
    free(bytes);
}

/* The region may end exactly at the end of the file, not a byte beyond it. */
static void test_range_within_the_file(void **state)
{
    int fd = memfd(8 * 4096, F_SEAL_SHRINK);
    struct region *r = NULL;

    struct mem_request req = dram_req(fd, RANK_ADDR, 4 * 4096, 4 * 4096);
    assert_int_equal(open_region(&req, &r), B10_OK);
    region_unref(r);
    req.length++;
    refused_because(open_region(&req, &r), B10_ERR_INVALID_ARG, "runs past the memfd");
    req = dram_req(fd, RANK_ADDR, 100, UINT64_MAX - 10);    /* offset + length wraps */
    refused_because(open_region(&req, &r), B10_ERR_INVALID_ARG, "runs past the memfd");
    req = dram_req(fd, RANK_ADDR, 8 * 4096 + 1, 0);
    refused_because(open_region(&req, &r), B10_ERR_INVALID_ARG, "runs past the memfd");
    close(fd);
}

/* ---------------------------------------------------------------- descriptors refused */

static void test_descriptor_refusals(void **state)
{
    struct region *r = NULL;
    struct mem_request req = dram_req(-1, RANK_ADDR, 4096, 0);

    refused_because(open_region(&req, &r), B10_ERR_INVALID_ARG, "needs its file descriptor");

    /* Not a regular file: a pipe. */
    int p[2];
    assert_int_equal(pipe(p), 0);
    req.fd = p[0];
    refused_because(open_region(&req, &r), B10_ERR_INVALID_ARG, "must be a memfd");
    close(p[0]);
    close(p[1]);

    /* A regular file that cannot be sealed. */
    char path[] = "/tmp/test-dram.XXXXXX";
    int tf = mkstemp(path);
    assert_true(tf >= 0);
    unlink(path);
    assert_int_equal(ftruncate(tf, 4096), 0);
    req.fd = tf;
    refused_because(open_region(&req, &r), B10_ERR_INVALID_ARG, "F_SEAL_SHRINK");
    close(tf);

    /* A memfd the rank could still shrink under the mapping; then the same, sealed. */
    int fd = memfd(4096, 0);
    req.fd = fd;
    refused_because(open_region(&req, &r), B10_ERR_INVALID_ARG, "F_SEAL_SHRINK");
    assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
    r = NULL;
    assert_int_equal(open_region(&req, &r), B10_OK);
    assert_non_null(r);
    region_unref(r);
    close(fd);

    /* A memfd sealed against writes cannot be mapped writable: the mapping fails, said so. */
    fd = memfd(4096, F_SEAL_SHRINK | F_SEAL_WRITE);
    req.fd = fd;
    refused_because(open_region(&req, &r), B10_ERR_IO, "mapping the region failed");
    close(fd);
}

/* ---------------------------------------------------------------- population */

/*
 * The daemon faults in the pages the rank has and never a hole's: a sparse
 * memfd of 64 MiB with data in two pages leaves every other page of the
 * mapping unallocated. And the rank's file offset is where it was.
 */
static void test_sparse_holes_stay_holes(void **state)
{
    const uint64_t size = 64 * MiB;
    int fd = memfd(size, F_SEAL_SHRINK);
    uint8_t one = 1;
    struct region *r = NULL;

    assert_int_equal(pwrite(fd, &one, 1, (off_t)(5 * page)), 1);
    assert_int_equal(pwrite(fd, &one, 1, (off_t)(size - 1)), 1);
    assert_int_equal(lseek(fd, 123, SEEK_SET), 123);

    struct mem_request req = dram_req(fd, RANK_ADDR, size, 0);
    assert_int_equal(open_region(&req, &r), B10_OK);
    assert_int_equal(lseek(fd, 0, SEEK_CUR), 123);

    size_t pages = (size_t)(size / (uint64_t)page);
    unsigned char *vec = malloc(pages);
    assert_int_equal(mincore(r->map, r->map_length, vec), 0);
    size_t resident = 0;
    for (size_t i = 0; i < pages; i++)
        resident += vec[i] & 1;
    assert_true(vec[5] & 1);
    assert_true(vec[pages - 1] & 1);
    assert_int_equal(resident, 2);
    assert_int_equal(r->base[5 * page], 1);
    free(vec);
    region_unref(r);
    close(fd);
}

/* ---------------------------------------------------------------- the table */

struct table {
    struct mem_table t;
    int fd;
};

/* The table's memfd is written whole, as b10_dram_alloc's are: no copy may fill a hole. */
static void table_init(struct table *tb, uint32_t limit, uint64_t max_bytes)
{
    static uint8_t zeros[MiB];
    mem_table_init(&tb->t, limit, max_bytes);
    tb->fd = memfd(MiB, F_SEAL_SHRINK);
    assert_int_equal(pwrite(tb->fd, zeros, MiB, 0), (ssize_t)MiB);
}

static void table_clear(struct table *tb)
{
    mem_table_clear(&tb->t);
    assert_int_equal(tb->t.count, 0);
    assert_int_equal(tb->t.bytes, 0);
    close(tb->fd);
}

/* Register [addr, addr + len) of the table's memfd (file offset addr's page offset). */
static b10_status_t add(struct table *tb, uint64_t id, uint64_t addr, uint64_t len,
                        struct region **r_p)
{
    struct region *r = NULL;
    struct mem_request req = dram_req(tb->fd, RANK_ADDR + addr, len, addr % (MiB / 2));
    detail[0] = '\0';
    b10_status_t st = mem_table_add(&tb->t, id, &req, detail, sizeof(detail), &r);
    if (r_p != NULL)
        *r_p = st == B10_OK ? r : NULL;
    return st;
}

static b10_status_t emit_none(void *arg, struct region *r, uint64_t offset, uint64_t n)
{
    (*(unsigned *)arg)++;
    return B10_OK;
}

/* Regions never overlap: one byte of overlap at either end is refused, touching is allowed. */
static void test_table_overlaps(void **state)
{
    struct table tb;

    table_init(&tb, 16, MiB * 16);
    assert_int_equal(add(&tb, 1, 0x10000, 0x1000, NULL), B10_OK);
    refused_because(add(&tb, 2, 0xffff, 2, NULL), B10_ERR_EXISTS, "overlaps region 1");
    refused_because(add(&tb, 2, 0x10fff, 2, NULL), B10_ERR_EXISTS, "overlaps region 1");
    refused_because(add(&tb, 2, 0x8000, 0x10000, NULL), B10_ERR_EXISTS, "overlaps");
    refused_because(add(&tb, 2, 0x10800, 16, NULL), B10_ERR_EXISTS, "overlaps");
    assert_int_equal(tb.t.count, 1);
    /* Touching on both sides, added out of order: the table stays sorted. */
    assert_int_equal(add(&tb, 3, 0x11000, 0x1000, NULL), B10_OK);
    assert_int_equal(add(&tb, 2, 0xf000, 0x1000, NULL), B10_OK);
    assert_int_equal(tb.t.count, 3);
    assert_int_equal(tb.t.bytes, 0x3000);
    for (uint32_t i = 1; i < tb.t.count; i++)
        assert_true(tb.t.regions[i - 1]->addr + tb.t.regions[i - 1]->length <=
                    tb.t.regions[i]->addr);
    /* One walk covers all three, contiguous in the rank. */
    unsigned runs = 0;
    assert_int_equal(mem_table_walk(&tb.t, RANK_ADDR + 0xf000, 0x3000, emit_none, &runs), B10_OK);
    assert_int_equal(runs, 3);
    table_clear(&tb);
}

/* Empty, wrapping or of no known kind: refused before anything is mapped. */
static void test_table_bad_requests(void **state)
{
    struct table tb;
    struct region *r = NULL;

    table_init(&tb, 16, UINT64_MAX);
    refused_because(add(&tb, 1, 0x1000, 0, NULL), B10_ERR_INVALID_ARG, "empty or wraps");
    struct mem_request req = dram_req(tb.fd, UINT64_MAX - 100, 4096, 0);
    refused_because(mem_table_add(&tb.t, 1, &req, detail, sizeof(detail), &r),
                    B10_ERR_INVALID_ARG, "empty or wraps");
    req = dram_req(tb.fd, RANK_ADDR, 4096, 0);
    req.kind = (b10_mem_kind_t)77;
    refused_because(mem_table_add(&tb.t, 1, &req, detail, sizeof(detail), &r),
                    B10_ERR_INVALID_ARG, "unknown memory kind 77");
    assert_int_equal(mem_region_open(1, &req, detail, sizeof(detail), &r), B10_ERR_INVALID_ARG);
    /* The backend's refusal comes back through the table untouched. */
    req = dram_req(-1, RANK_ADDR, 4096, 0);
    refused_because(mem_table_add(&tb.t, 1, &req, detail, sizeof(detail), &r),
                    B10_ERR_INVALID_ARG, "file descriptor");
    assert_int_equal(tb.t.count, 0);
    assert_int_equal(add(&tb, 1, 0x1000, 4096, NULL), B10_OK);
    table_clear(&tb);
}

/* --max-regions and --max-register-bytes: at the limit allowed, past it refused. */
static void test_table_limits(void **state)
{
    struct table tb;

    table_init(&tb, 2, 3 * 4096);
    assert_int_equal(add(&tb, 1, 0x1000, 4096, NULL), B10_OK);
    refused_because(add(&tb, 2, 0x3000, 2 * 4096 + 1, NULL), B10_ERR_TOO_LARGE,
                    "--max-register-bytes");
    assert_int_equal(add(&tb, 2, 0x3000, 2 * 4096, NULL), B10_OK);
    assert_int_equal(tb.t.bytes, 3 * 4096);
    refused_because(add(&tb, 3, 0x9000, 1, NULL), B10_ERR_TOO_LARGE, "--max-regions");
    /* A region gone makes room again. */
    assert_int_equal(mem_table_remove(&tb.t, 1), B10_OK);
    assert_int_equal(tb.t.bytes, 2 * 4096);
    assert_int_equal(add(&tb, 3, 0x9000, 4096, NULL), B10_OK);
    table_clear(&tb);
}

/* Open off the table, insert later: the insert checks again (a twin may have come in between). */
static void test_table_three_steps(void **state)
{
    struct table tb;
    struct region *a = NULL, *b = NULL;

    table_init(&tb, 16, MiB);
    struct mem_request req = dram_req(tb.fd, RANK_ADDR, 8192, 0);
    assert_int_equal(mem_table_check(&tb.t, &req, detail, sizeof(detail)), B10_OK);
    assert_int_equal(mem_region_open(1, &req, detail, sizeof(detail), &a), B10_OK);
    assert_int_equal(mem_region_open(2, &req, detail, sizeof(detail), &b), B10_OK);
    assert_int_equal(mem_table_insert(&tb.t, a, detail, sizeof(detail)), B10_OK);
    refused_because(mem_table_insert(&tb.t, b, detail, sizeof(detail)), B10_ERR_EXISTS,
                    "overlaps region 1");
    assert_int_equal(tb.t.count, 1);
    region_unref(b);                /* opened, never inserted: the caller's to drop */
    table_clear(&tb);
}

/* A deregistration waits for the copies: the mapping lives while a copy holds it. */
static int idle_calls;

static void on_idle(void *arg)
{
    idle_calls++;
}

static void test_table_remove_waits_for_copies(void **state)
{
    struct table tb;
    struct region *r = NULL;

    table_init(&tb, 16, MiB);
    assert_int_equal(add(&tb, 7, 0x2000, 4096, &r), B10_OK);
    assert_int_equal(mem_table_remove(&tb.t, 8), B10_ERR_NOT_FOUND);
    assert_null(mem_table_take(&tb.t, 8));

    region_ref(r);                  /* a copy in flight */
    region_ref(r);                  /* and another */
    assert_int_equal(r->refs, 3);
    struct region *taken = mem_table_take(&tb.t, 7);
    assert_ptr_equal(taken, r);
    assert_int_equal(tb.t.count, 0);
    assert_int_equal(tb.t.bytes, 0);
    r->on_idle = on_idle;
    idle_calls = 0;
    region_unref(r);                /* one copy ends */
    assert_int_equal(idle_calls, 0);
    region_unref(r);                /* the last: only the taker's reference is left */
    assert_int_equal(idle_calls, 1);
    assert_null(r->on_idle);
    /* Still mapped: the rank's bytes still read and write. */
    r->base[0] = 0x42;
    uint8_t b = 0;
    assert_int_equal(pread(tb.fd, &b, 1, 0x2000 % (MiB / 2)), 1);
    assert_int_equal(b, 0x42);
    region_unref(r);                /* now unmapped and freed: the leak check would see else */
    region_unref(NULL);
    table_clear(&tb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_maps_the_rank_bytes),
        cmocka_unit_test(test_range_within_the_file),
        cmocka_unit_test(test_descriptor_refusals),
        cmocka_unit_test(test_sparse_holes_stay_holes),
        cmocka_unit_test(test_table_overlaps),
        cmocka_unit_test(test_table_bad_requests),
        cmocka_unit_test(test_table_limits),
        cmocka_unit_test(test_table_three_steps),
        cmocka_unit_test(test_table_remove_waits_for_copies),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
