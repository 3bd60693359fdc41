/*
 * test-copy.c — daemon/mem/copy.c: gathers and scatters between a rank's
 * regions and a staging view, and the chunk checksum they make or check.
 *
 * Host memory is real: plain buffers as DRAM regions, this process's own
 * /proc/self/mem as a rank's process memory, and a child process whose
 * memory goes away for a rank that died. Jobs run as in the daemon, inline
 * on the loop or on libuv's thread pool, and the test runs the loop until
 * their completions come.
 *
 * The GPU room is the one seam (linked with -Wl,--wrap for gpu_*): a fake
 * device part that the test completes by hand, so that a job with device
 * segments can be walked part by part without a GPU, and a fake GPU sum of
 * a view's whole blocks, so that the pieces of a chunk's checksum (GPU
 * blocks, the host's last block) must add up to the one checksum().
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "rng.h"

#include "b10d.h"
#include "checksum.h"
#include "copy.h"
#include "gpu.h"
#include "mem.h"

static uv_loop_t test_loop;
static struct b10d test_d;

/* ---------------------------------------------------------------- the GPU seam */

static bool fake_gpu;               /* gpu_present */
static bool fake_kernels;           /* gpu_kernels */
static bool fake_one_submission;    /* gpu_one_submission */
static struct copy_job *gpu_job;    /* the job whose device part is out, until the test ends it */
static unsigned gpu_copies, gpu_sums;

bool __wrap_gpu_present(const struct b10d *d);
bool __wrap_gpu_kernels(const struct b10d *d);
bool __wrap_gpu_one_submission(const struct b10d *d, const struct copy_job *job);
void __wrap_gpu_copy_job(struct b10d *d, struct copy_job *job);
void __wrap_gpu_sum_job(struct b10d *d, struct copy_job *job, uint32_t nblocks);

bool __wrap_gpu_present(const struct b10d *d)
{
    return fake_gpu;
}

bool __wrap_gpu_kernels(const struct b10d *d)
{
    return fake_gpu && fake_kernels;
}

bool __wrap_gpu_one_submission(const struct b10d *d, const struct copy_job *job)
{
    return fake_one_submission;
}

/* The device part is taken: the test copies its segments and ends it (gpu_part_end). */
void __wrap_gpu_copy_job(struct b10d *d, struct copy_job *job)
{
    assert_true(fake_gpu);
    assert_null(gpu_job);
    gpu_copies++;
    gpu_job = job;
    job->parts++;
}

/* The GPU sums blocks [0, nblocks) of the view: here, on the spot, as its part. */
void __wrap_gpu_sum_job(struct b10d *d, struct copy_job *job, uint32_t nblocks)
{
    uint64_t *sums = calloc(nblocks, sizeof(*sums));
    assert_non_null(sums);
    gpu_sums++;
    checksum_block_sums(job->view, job->view_len, job->seed, 0, nblocks, sums);
    job->parts++;
    b10_status_t st = copy_gpu_hooks.sums(job, sums, nblocks);
    free(sums);
    copy_gpu_hooks.part_done(job, st);
}

/* The device part ends: its segments copied (unless failing), then its part done. */
static void gpu_part_end(b10_status_t status)
{
    struct copy_job *job = gpu_job;
    assert_non_null(job);
    gpu_job = NULL;
    if (status == B10_OK)
        for (uint32_t i = 0; i < job->nsegs; i++)
            if (job->segs[i].device >= 0)
                memcpy(job->segs[i].dst, job->segs[i].src, job->segs[i].len);
    copy_gpu_hooks.part_done(job, status);
}

/* ---------------------------------------------------------------- fixture */

struct outcome {
    unsigned calls;
    b10_status_t status;
    uint64_t sum;
    bool sum_done;
    uint32_t index;
};

static bool submitting;         /* inside copy_job_submit: no completion may come now */

static void on_done(struct copy_job *job, b10_status_t status)
{
    struct outcome *o = job->arg;
    assert_false(submitting);
    o->calls++;
    o->status = status;
    o->sum = job->sum;
    o->sum_done = job->sum_done;
    o->index = job->index;
}

static void submit(struct copy_job *job)
{
    submitting = true;
    copy_job_submit(job);
    submitting = false;
}

/* Run the loop until the outcome is in (the pool's threads and the idle handle keep it alive). */
static void wait_for(struct outcome *o)
{
    while (o->calls == 0)
        assert_int_equal(uv_run(&test_loop, UV_RUN_ONCE) >= 0, 1);
    assert_int_equal(o->calls, 1);
}

static int group_setup(void **state)
{
    log_setup(LOG_LEVEL_ERR, "test-copy");
    if (uv_loop_init(&test_loop) != 0)
        return -1;
    memset(&test_d, 0, sizeof(test_d));
    config_defaults(&test_d.cfg);
    test_d.loop = &test_loop;
    return 0;
}

static int group_teardown(void **state)
{
    uv_run(&test_loop, UV_RUN_NOWAIT);
    return uv_loop_close(&test_loop) == 0 ? 0 : -1;
}

static int test_setup(void **state)
{
    fake_gpu = fake_kernels = fake_one_submission = false;
    gpu_job = NULL;
    gpu_copies = gpu_sums = 0;
    copy_start(&test_d);
    return 0;
}

static int test_teardown(void **state)
{
    copy_stop(&test_d);
    uv_run(&test_loop, UV_RUN_NOWAIT);  /* the idle handle's close */
    return 0;
}

static void region_init(struct region *r, const struct mem_kind_ops *kind, int device, void *base,
                        uint64_t length)
{
    *r = (struct region){ .id = 1, .addr = (uintptr_t)base, .length = length, .ops = kind,
                          .base = base, .proc_fd = -1, .device = device, .refs = 1 };
}

static uint8_t *buffer(size_t len)
{
    uint8_t *p = aligned_alloc(4096, (len + 4096 + 4095) / 4096 * 4096);
    assert_non_null(p);
    return p;
}

static void fill(uint8_t *p, size_t len, uint64_t seed)
{
    rng_seed(seed);
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)rng_next();
}

/* ---------------------------------------------------------------- host gathers */

/*
 * A small host gather is copied inline, but done() comes one loop turn
 * later, never inside the submission; the regions stay referenced until
 * then, once per run of segments in one region.
 */
static void test_inline_gather(void **state)
{
    uint8_t *a = buffer(4096), *b = buffer(4096), *view = buffer(4096);
    struct region ra, rb;
    struct outcome o = { 0 };

    fill(a, 4096, 1);
    fill(b, 4096, 2);
    memset(view, 0, 4096);
    region_init(&ra, &dram_kind, -1, a, 4096);
    region_init(&rb, &dram_kind, -1, b, 4096);
    struct copy_job *job = copy_job_new(&test_d, true, on_done, &o, 17);
    assert_non_null(job);
    assert_int_equal(copy_job_add(job, &ra, view, a + 100, 1000), B10_OK);
    assert_int_equal(copy_job_add(job, &ra, view + 1000, a + 3000, 500), B10_OK);
    assert_int_equal(copy_job_add(job, &rb, view + 1500, b, 2000), B10_OK);
    assert_int_equal(copy_job_add(job, &ra, view + 3500, a, 596), B10_OK);
    assert_int_equal(job->nsegs, 4);
    assert_int_equal(job->host_segs, 4);
    assert_int_equal(job->bytes, 4096);
    /* a, b, a again: three runs, three references. */
    assert_int_equal(job->refs.n, 3);
    assert_int_equal(ra.refs, 3);
    assert_int_equal(rb.refs, 2);

    submit(job);
    assert_int_equal(o.calls, 0);
    uv_run(&test_loop, UV_RUN_NOWAIT);
    assert_int_equal(o.calls, 1);
    assert_int_equal(o.status, B10_OK);
    assert_int_equal(o.index, 17);
    assert_int_equal(ra.refs, 1);
    assert_int_equal(rb.refs, 1);
    assert_memory_equal(view, a + 100, 1000);
    assert_memory_equal(view + 1000, a + 3000, 500);
    assert_memory_equal(view + 1500, b, 2000);
    assert_memory_equal(view + 3500, a, 596);
    free(a);
    free(b);
    free(view);
}

/* A gather makes its chunk's sum: the one checksum() of the view, one block or many. */
static void test_gather_makes_sum(void **state)
{
    static const size_t lens[] = { 1, 4096, CHECKSUM_BLOCK, CHECKSUM_BLOCK + 1,
                                   5 * CHECKSUM_BLOCK + 333, COPY_INLINE_BYTES,
                                   COPY_INLINE_BYTES + 8, (2u << 20) + 5 };

    for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
        size_t len = lens[k];
        uint8_t *src = buffer(len), *view = buffer(len);
        struct region r;
        struct outcome o = { 0 };
        uint64_t seed = checksum_seed(0x1234 + k, (uint32_t)k);

        fill(src, len, 10 + k);
        memset(view, 0, len);
        region_init(&r, &dram_kind, -1, src, len);
        struct copy_job *job = copy_job_new(&test_d, true, on_done, &o, 0);
        assert_int_equal(copy_job_add(job, &r, view, src, len), B10_OK);
        assert_int_equal(copy_job_sum(job, COPY_SUM_MAKE, view, len, seed, 0, NULL), B10_OK);
        submit(job);
        assert_int_equal(o.calls, 0);
        wait_for(&o);
        assert_int_equal(o.status, B10_OK);
        assert_true(o.sum_done);
        assert_memory_equal(view, src, len);
        assert_int_equal(o.sum, checksum(src, len, seed));
        /* And not the sum under another seed: the seed is in it. */
        assert_int_not_equal(o.sum, checksum(src, len, seed + 1));
        assert_int_equal(r.refs, 1);
        free(src);
        free(view);
    }
}

/* ---------------------------------------------------------------- host scatters */

/*
 * A scatter checks the view before a byte is written: the sender's sum lets
 * it through; any other sum, or one flipped bit of the view, ends the job
 * B10_ERR_DATA_CORRUPT with the destination untouched. Inline and on the pool.
 */
static void test_scatter_checked(void **state)
{
    static const size_t lens[] = { 777, 3 * CHECKSUM_BLOCK + 5, COPY_INLINE_BYTES + 4096 };

    for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
        size_t len = lens[k];
        uint8_t *view = buffer(len), *dst = buffer(len);
        struct region r;
        uint64_t seed = checksum_seed(77, (uint32_t)k);

        fill(view, len, 20 + k);
        region_init(&r, &dram_kind, -1, dst, len);
        uint64_t good = checksum(view, len, seed);

        for (int round = 0; round < 3; round++) {
            struct outcome o = { 0 };
            memset(dst, 0xee, len);
            uint64_t want = round == 1 ? good ^ 1 : good;
            if (round == 2)
                view[len / 2] ^= 0x10;
            struct copy_job *job = copy_job_new(&test_d, false, on_done, &o, 0);
            assert_int_equal(copy_job_add(job, &r, dst, view, len), B10_OK);
            assert_int_equal(copy_job_sum(job, COPY_SUM_CHECK, view, len, seed, want, NULL),
                             B10_OK);
            submit(job);
            assert_int_equal(o.calls, 0);
            wait_for(&o);
            assert_int_equal(r.refs, 1);
            if (round == 0) {
                assert_int_equal(o.status, B10_OK);
                assert_true(o.sum_done);
                assert_memory_equal(dst, view, len);
                continue;
            }
            assert_int_equal(o.status, B10_ERR_DATA_CORRUPT);
            assert_false(o.sum_done);
            for (size_t i = 0; i < len; i++)
                if (dst[i] != 0xee)
                    fail_msg("len %zu round %d: byte %zu written", len, round, i);
        }
        free(view);
        free(dst);
    }
}

/* A scatter that does not check writes what it is given; a job with no sum has none. */
static void test_scatter_unchecked(void **state)
{
    uint8_t *view = buffer(8192), *dst = buffer(8192);
    struct region r;
    struct outcome o = { 0 };

    fill(view, 8192, 3);
    memset(dst, 0, 8192);
    region_init(&r, &dram_kind, -1, dst, 8192);
    struct copy_job *job = copy_job_new(&test_d, false, on_done, &o, 0);
    assert_int_equal(copy_job_add(job, &r, dst + 4096, view, 4096), B10_OK);
    assert_int_equal(copy_job_add(job, &r, dst, view + 4096, 4096), B10_OK);
    assert_int_equal(job->refs.n, 1);
    submit(job);
    wait_for(&o);
    assert_int_equal(o.status, B10_OK);
    assert_false(o.sum_done);
    assert_memory_equal(dst + 4096, view, 4096);
    assert_memory_equal(dst, view + 4096, 4096);
    free(view);
    free(dst);
}

/* ---------------------------------------------------------------- loop turns */

/* A completion that submits the next inline copy sees it complete a turn later, not in its own. */
static struct outcome chained;
static struct region chain_region;
static uint8_t chain_src[64], chain_dst[64];

static void on_done_then_submit(struct copy_job *job, b10_status_t status)
{
    on_done(job, status);
    struct copy_job *next = copy_job_new(&test_d, true, on_done, &chained, 2);
    assert_non_null(next);
    assert_int_equal(copy_job_add(next, &chain_region, chain_dst, chain_src, 64), B10_OK);
    copy_job_submit(next);
    assert_int_equal(chained.calls, 0);
}

static void test_completion_submits_next(void **state)
{
    struct outcome first = { 0 };
    uint8_t dst[64];

    memset(&chained, 0, sizeof(chained));
    fill(chain_src, 64, 4);
    region_init(&chain_region, &dram_kind, -1, chain_src, 64);
    struct copy_job *job = copy_job_new(&test_d, true, on_done_then_submit, &first, 1);
    assert_int_equal(copy_job_add(job, &chain_region, dst, chain_src, 64), B10_OK);
    submit(job);
    uv_run(&test_loop, UV_RUN_NOWAIT);
    assert_int_equal(first.calls, 1);
    assert_int_equal(chained.calls, 0);
    assert_int_equal(chain_region.refs, 2);
    uv_run(&test_loop, UV_RUN_NOWAIT);
    assert_int_equal(chained.calls, 1);
    assert_int_equal(chained.index, 2);
    assert_int_equal(chain_region.refs, 1);
    assert_memory_equal(chain_dst, chain_src, 64);
    assert_memory_equal(dst, chain_src, 64);
}

/* copy_stop completes the inline copies still due: no job is lost at shutdown. */
static void test_stop_completes_due(void **state)
{
    uint8_t src[256], dst[256];
    struct region r;
    struct outcome o = { 0 };

    fill(src, sizeof(src), 5);
    region_init(&r, &dram_kind, -1, src, sizeof(src));
    struct copy_job *job = copy_job_new(&test_d, true, on_done, &o, 0);
    assert_int_equal(copy_job_add(job, &r, dst, src, sizeof(src)), B10_OK);
    submit(job);
    assert_int_equal(o.calls, 0);
    copy_stop(&test_d);
    assert_int_equal(o.calls, 1);
    assert_int_equal(o.status, B10_OK);
    assert_int_equal(r.refs, 1);
    assert_memory_equal(dst, src, sizeof(src));
    copy_stop(&test_d);             /* twice: nothing more */
    assert_int_equal(o.calls, 1);

    /* With the loop's part stopped, a host job goes to the pool and still completes. */
    struct outcome later = { 0 };
    memset(dst, 0, sizeof(dst));
    job = copy_job_new(&test_d, true, on_done, &later, 0);
    assert_int_equal(copy_job_add(job, &r, dst, src, sizeof(src)), B10_OK);
    submit(job);
    wait_for(&later);
    assert_int_equal(later.status, B10_OK);
    assert_memory_equal(dst, src, sizeof(src));
}

/* ---------------------------------------------------------------- references */

/* A deregistration waiting on copies hears when the last one lets go; never before. */
static int idle_calls;

static void on_region_idle(void *arg)
{
    idle_calls++;
    assert_int_equal(((struct region *)arg)->refs, 1);
}

static void test_region_idle_after_last_copy(void **state)
{
    uint8_t src[128], d1[128], d2[128];
    struct region r;
    struct outcome o1 = { 0 }, o2 = { 0 };

    idle_calls = 0;
    fill(src, sizeof(src), 6);
    region_init(&r, &dram_kind, -1, src, sizeof(src));
    struct copy_job *j1 = copy_job_new(&test_d, true, on_done, &o1, 0);
    struct copy_job *j2 = copy_job_new(&test_d, true, on_done, &o2, 0);
    assert_int_equal(copy_job_add(j1, &r, d1, src, 128), B10_OK);
    assert_int_equal(copy_job_add(j2, &r, d2, src, 128), B10_OK);
    assert_int_equal(r.refs, 3);
    r.on_idle = on_region_idle;
    r.idle_arg = &r;
    submit(j1);
    wait_for(&o1);
    assert_int_equal(idle_calls, 0);
    assert_int_equal(r.refs, 2);
    /* A job never submitted gives its references back when freed. */
    copy_job_free(j2);
    copy_job_free(NULL);
    assert_int_equal(idle_calls, 1);
    assert_int_equal(r.refs, 1);
    assert_int_equal(o2.calls, 0);
}

/* ---------------------------------------------------------------- direct jobs */

static void test_direct_ok(void **state)
{
    static uint8_t mem[16];
    struct region dram, dram2, vram0, vram0b, vram1, proc_a, proc_b;

    region_init(&dram, &dram_kind, -1, mem, 16);
    region_init(&dram2, &dram_kind, -1, mem, 16);
    region_init(&vram0, &vram_kind, 0, mem, 16);
    region_init(&vram0b, &vram_kind, 0, mem, 16);
    region_init(&vram1, &vram_kind, 1, mem, 16);
    region_init(&proc_a, &procmem_kind, -1, mem, 16);
    region_init(&proc_b, &procmem_kind, -1, mem, 16);
    proc_a.proc_fd = 100;
    proc_b.proc_fd = 101;

    /* Device to device on one GPU runs on its SMs: direct only where kernels may run. */
    fake_gpu = true;
    fake_kernels = false;
    assert_false(copy_direct_ok(&test_d, &vram0, &vram0b));
    fake_kernels = true;
    assert_true(copy_direct_ok(&test_d, &dram, &dram2));
    assert_true(copy_direct_ok(&test_d, &vram0, &vram0b));
    assert_true(copy_direct_ok(&test_d, &proc_a, &dram));
    assert_true(copy_direct_ok(&test_d, &dram, &proc_b));
    assert_false(copy_direct_ok(&test_d, &vram0, &vram1));
    assert_false(copy_direct_ok(&test_d, &dram, &vram0));
    assert_false(copy_direct_ok(&test_d, &vram0, &dram));
    assert_false(copy_direct_ok(&test_d, &proc_a, &proc_b));
    assert_false(copy_direct_ok(&test_d, &proc_a, &vram0));

    /* A refused pair takes no reference and adds nothing. */
    struct outcome o = { 0 };
    struct copy_job *job = copy_job_new(&test_d, false, on_done, &o, 0);
    assert_int_equal(copy_job_add_direct(job, &dram, &vram0, mem, mem, 16), B10_ERR_UNSUPPORTED);
    assert_int_equal(copy_job_add_direct(job, &proc_a, &proc_b, mem, mem, 16),
                     B10_ERR_UNSUPPORTED);
    assert_int_equal(job->nsegs, 0);
    assert_int_equal(dram.refs, 1);
    assert_int_equal(vram0.refs, 1);
    assert_int_equal(proc_a.refs, 1);
    /* An allowed one references both sides: the one it reads and the one it writes. */
    assert_int_equal(copy_job_add_direct(job, &vram0, &vram0b, mem, mem, 16), B10_OK);
    assert_int_equal(job->nsegs, 1);
    assert_int_equal(job->segs[0].device, 0);
    assert_int_equal(job->reads.n, 1);
    assert_int_equal(job->refs.n, 1);
    assert_int_equal(vram0.refs, 2);
    assert_int_equal(vram0b.refs, 2);
    /* The same pair again: a segment, no second reference. */
    assert_int_equal(copy_job_add_direct(job, &vram0, &vram0b, mem, mem, 16), B10_OK);
    assert_int_equal(job->nsegs, 2);
    assert_int_equal(vram0.refs, 2);
    assert_int_equal(vram0b.refs, 2);
    /* After it, a refused pair is still refused, and another allowed one referenced. */
    assert_int_equal(copy_job_add_direct(job, &vram0, &vram1, mem, mem, 16), B10_ERR_UNSUPPORTED);
    assert_int_equal(job->nsegs, 2);
    assert_int_equal(vram1.refs, 1);
    assert_int_equal(copy_job_add_direct(job, &vram0b, &vram0, mem, mem, 16), B10_OK);
    assert_int_equal(copy_job_add_direct(job, &vram0, &vram0b, mem, mem, 16), B10_OK);
    assert_int_equal(job->nsegs, 4);
    assert_int_equal(job->reads.n, 3);     /* vram0, vram0b, vram0: a reference a run */
    assert_int_equal(job->refs.n, 3);
    assert_int_equal(vram0.refs, 4);
    assert_int_equal(vram0b.refs, 4);
    copy_job_free(job);
    assert_int_equal(vram0.refs, 1);
    assert_int_equal(vram0b.refs, 1);
}

/* Region to region in host memory: the bytes land, both regions referenced until done. */
static void test_direct_host_copy(void **state)
{
    uint8_t *a = buffer(65536), *b = buffer(65536);
    struct region ra, rb;
    struct outcome o = { 0 };

    fill(a, 65536, 7);
    memset(b, 0, 65536);
    region_init(&ra, &dram_kind, -1, a, 65536);
    region_init(&rb, &dram_kind, -1, b, 65536);
    struct copy_job *job = copy_job_new(&test_d, false, on_done, &o, 0);
    assert_int_equal(copy_job_add_direct(job, &ra, &rb, b + 1, a + 2, 40000), B10_OK);
    assert_int_equal(copy_job_add_direct(job, &ra, &rb, b + 50000, a, 1000), B10_OK);
    assert_int_equal(ra.refs, 2);
    assert_int_equal(rb.refs, 2);
    submit(job);
    wait_for(&o);
    assert_int_equal(o.status, B10_OK);
    assert_int_equal(ra.refs, 1);
    assert_int_equal(rb.refs, 1);
    assert_memory_equal(b + 1, a + 2, 40000);
    assert_memory_equal(b + 50000, a, 1000);
    assert_int_equal(b[0], 0);
    assert_int_equal(b[40001], 0);
    free(a);
    free(b);
}

/* ---------------------------------------------------------------- process memory */

/*
 * A rank's process memory is reached through its /proc/<pid>/mem: here this
 * process's own, read into a view by a gather and written by a scatter; an
 * address the rank unmapped fails the job B10_ERR_IO.
 */
static void test_process_memory(void **state)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uint8_t *rank = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                         -1, 0);
    uint8_t *view = buffer(2 * page);
    int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
    struct region r;

    assert_true(rank != MAP_FAILED);
    assert_true(fd >= 0);
    fill(rank, 3 * page, 8);
    region_init(&r, &procmem_kind, -1, NULL, 3 * page);
    r.addr = (uintptr_t)rank;
    r.proc_fd = fd;

    /* Gather: the rank's bytes into the view, across a page boundary. */
    struct outcome o = { 0 };
    memset(view, 0, 2 * page);
    struct copy_job *job = copy_job_new(&test_d, true, on_done, &o, 0);
    assert_int_equal(copy_job_add(job, &r, view, rank + page - 100, page + 200), B10_OK);
    assert_int_equal(job->segs[0].src_fd, fd);
    assert_int_equal(job->segs[0].dst_fd, -1);
    submit(job);
    wait_for(&o);
    assert_int_equal(o.status, B10_OK);
    assert_memory_equal(view, rank + page - 100, page + 200);

    /* Scatter: the view's bytes into the rank. */
    memset(&o, 0, sizeof(o));
    fill(view, 2 * page, 9);
    job = copy_job_new(&test_d, false, on_done, &o, 0);
    assert_int_equal(copy_job_add(job, &r, rank + 10, view, 2 * page), B10_OK);
    assert_int_equal(job->segs[0].src_fd, -1);
    assert_int_equal(job->segs[0].dst_fd, fd);
    submit(job);
    wait_for(&o);
    assert_int_equal(o.status, B10_OK);
    assert_memory_equal(rank + 10, view, 2 * page);

    /* The rank unmaps its last page: the copy that reaches into it fails, loudly. */
    assert_int_equal(munmap(rank + 2 * page, page), 0);
    memset(&o, 0, sizeof(o));
    job = copy_job_new(&test_d, true, on_done, &o, 0);
    assert_int_equal(copy_job_add(job, &r, view, rank + page, 2 * page), B10_OK);
    submit(job);
    wait_for(&o);
    assert_int_equal(o.status, B10_ERR_IO);
    assert_int_equal(r.refs, 1);

    close(fd);
    munmap(rank, 2 * page);
    free(view);
}

/* A rank that died: its memory file reads nothing, and the job ends B10_ERR_CLIENT_GONE. */
static uint8_t child_bytes[4096];

static void test_process_gone(void **state)
{
    int pipefd[2];
    uint8_t view[4096];
    char path[64];

    fill(child_bytes, sizeof(child_bytes), 11);
    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char c;
        close(pipefd[1]);
        while (read(pipefd[0], &c, 1) < 0 && errno == EINTR)
            ;
        _exit(0);
    }
    close(pipefd[0]);
    snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        close(pipefd[1]);
        waitpid(pid, NULL, 0);
        skip();             /* no ptrace access to a child here */
    }
    struct region r;
    region_init(&r, &procmem_kind, -1, NULL, sizeof(child_bytes));
    r.proc_fd = fd;

    /* While the rank lives its bytes (the same as ours, after fork) come through. */
    struct outcome o = { 0 };
    memset(view, 0, sizeof(view));
    struct copy_job *job = copy_job_new(&test_d, true, on_done, &o, 0);
    assert_int_equal(copy_job_add(job, &r, view, child_bytes, sizeof(view)), B10_OK);
    submit(job);
    wait_for(&o);
    assert_int_equal(o.status, B10_OK);
    assert_memory_equal(view, child_bytes, sizeof(view));

    close(pipefd[1]);           /* the child exits */
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    memset(&o, 0, sizeof(o));
    job = copy_job_new(&test_d, true, on_done, &o, 0);
    assert_int_equal(copy_job_add(job, &r, view, child_bytes, sizeof(view)), B10_OK);
    submit(job);
    wait_for(&o);
    assert_int_equal(o.status, B10_ERR_CLIENT_GONE);
    close(fd);
}

/* ---------------------------------------------------------------- device parts */

/*
 * A gather of host and device segments completes only when both parts did,
 * in either order; its sum is made once the view is whole.
 */
static void test_device_gather_parts(void **state)
{
    uint8_t *host = buffer(3000), *dev = buffer(5000), *view = buffer(8000);
    struct region rh, rd;
    struct outcome o = { 0 };
    uint64_t seed = 99;

    fake_gpu = true;
    fill(host, 3000, 12);
    fill(dev, 5000, 13);
    memset(view, 0, 8000);
    region_init(&rh, &dram_kind, -1, host, 3000);
    region_init(&rd, &vram_kind, 0, dev, 5000);
    struct copy_job *job = copy_job_new(&test_d, true, on_done, &o, 0);
    assert_int_equal(copy_job_add(job, &rd, view, dev, 5000), B10_OK);
    assert_int_equal(copy_job_add(job, &rh, view + 5000, host, 3000), B10_OK);
    assert_int_equal(job->host_segs, 1);
    assert_int_equal(copy_job_sum(job, COPY_SUM_MAKE, view, 8000, seed, 0, NULL), B10_OK);
    /* Small views are summed on the host, even with a GPU. */
    assert_false(copy_sums_device(job, 8000));
    submit(job);
    assert_int_equal(gpu_copies, 1);
    /* The host part runs on the pool; the device part is still out: no completion. */
    for (int i = 0; i < 1000 && job->parts > 1; i++)
        uv_run(&test_loop, UV_RUN_ONCE);
    assert_int_equal(job->parts, 1);
    assert_int_equal(o.calls, 0);
    gpu_part_end(B10_OK);
    assert_int_equal(o.calls, 1);
    assert_int_equal(o.status, B10_OK);
    assert_true(o.sum_done);
    assert_int_equal(o.sum, checksum(view, 8000, seed));
    assert_memory_equal(view, dev, 5000);
    assert_memory_equal(view + 5000, host, 3000);
    assert_int_equal(rh.refs, 1);
    assert_int_equal(rd.refs, 1);

    /* A device part that fails ends the job with its status, and no sum is made. */
    memset(&o, 0, sizeof(o));
    job = copy_job_new(&test_d, true, on_done, &o, 0);
    assert_int_equal(copy_job_add(job, &rd, view, dev, 5000), B10_OK);
    assert_int_equal(copy_job_sum(job, COPY_SUM_MAKE, view, 5000, seed, 0, NULL), B10_OK);
    submit(job);
    assert_int_equal(o.calls, 0);
    gpu_part_end(B10_ERR_IO);
    assert_int_equal(o.calls, 1);
    assert_int_equal(o.status, B10_ERR_IO);
    assert_false(o.sum_done);
    assert_int_equal(rd.refs, 1);
    free(host);
    free(dev);
    free(view);
}

/* A device scatter is checked before the GPU is asked to write: a bad view never reaches it. */
static void test_device_scatter_checked_first(void **state)
{
    uint8_t *view = buffer(20000), *dev = buffer(20000);
    struct region rd;
    uint64_t seed = 5;

    fake_gpu = true;
    fill(view, 20000, 14);
    region_init(&rd, &vram_kind, 0, dev, 20000);
    uint64_t good = checksum(view, 20000, seed);

    struct outcome o = { 0 };
    memset(dev, 0, 20000);
    struct copy_job *job = copy_job_new(&test_d, false, on_done, &o, 0);
    assert_int_equal(copy_job_add(job, &rd, dev, view, 20000), B10_OK);
    assert_int_equal(copy_job_sum(job, COPY_SUM_CHECK, view, 20000, seed, good ^ 4, NULL),
                     B10_OK);
    submit(job);
    assert_int_equal(gpu_copies, 0);
    assert_int_equal(o.calls, 0);       /* the failure comes on the next turn */
    uv_run(&test_loop, UV_RUN_NOWAIT);
    assert_int_equal(o.calls, 1);
    assert_int_equal(o.status, B10_ERR_DATA_CORRUPT);
    assert_int_equal(gpu_copies, 0);
    assert_int_equal(rd.refs, 1);

    memset(&o, 0, sizeof(o));
    job = copy_job_new(&test_d, false, on_done, &o, 0);
    assert_int_equal(copy_job_add(job, &rd, dev, view, 20000), B10_OK);
    assert_int_equal(copy_job_sum(job, COPY_SUM_CHECK, view, 20000, seed, good, NULL), B10_OK);
    submit(job);
    assert_int_equal(gpu_copies, 1);
    gpu_part_end(B10_OK);
    assert_int_equal(o.calls, 1);
    assert_int_equal(o.status, B10_OK);
    assert_memory_equal(dev, view, 20000);
    free(view);
    free(dev);
}

/*
 * A large device gather with the daemon's kernels: the GPU sums the view's
 * whole blocks, the host the last, shorter one; the pieces make the one
 * checksum() of the view. Without kernels a pool task sums it, to the
 * same value.
 */
static void test_device_sum_in_pieces(void **state)
{
    size_t len = COPY_INLINE_BYTES + 3 * CHECKSUM_BLOCK + 1234;
    uint8_t *dev = buffer(len), *view = buffer(len);
    struct region rd;
    uint64_t seed = checksum_seed(0xfeed, 3);

    fake_gpu = true;
    fill(dev, len, 15);
    region_init(&rd, &vram_kind, 0, dev, len);
    for (int kernels = 1; kernels >= 0; kernels--) {
        struct outcome o = { 0 };
        fake_kernels = kernels;
        gpu_sums = 0;
        memset(view, 0, len);
        struct copy_job *job = copy_job_new(&test_d, true, on_done, &o, 0);
        assert_int_equal(copy_job_add(job, &rd, view, dev, len), B10_OK);
        assert_int_equal(copy_job_sum(job, COPY_SUM_MAKE, view, len, seed, 0, NULL), B10_OK);
        assert_true(copy_sums_device(job, len));
        assert_int_equal(copy_sums_on_gpu(job, len), kernels);
        assert_int_equal(copy_gpu_hooks.sum_blocks(job), kernels ? len / CHECKSUM_BLOCK : 0);
        submit(job);
        gpu_part_end(B10_OK);
        wait_for(&o);
        assert_int_equal(gpu_sums, kernels ? 1 : 0);
        assert_int_equal(o.status, B10_OK);
        assert_true(o.sum_done);
        assert_int_equal(o.sum, checksum(dev, len, seed));
        assert_memory_equal(view, dev, len);
    }
    free(dev);
    free(view);
}

/*
 * A scatter that is one GPU submission is gated on the trailer's block
 * sums: a damaged whole block fails it in the GPU's part, a damaged last
 * block on the host before the GPU is asked; an intact view lands.
 */
static void test_device_scatter_gated(void **state)
{
    size_t len = COPY_INLINE_BYTES + 2 * CHECKSUM_BLOCK + 100;
    uint32_t n = checksum_blocks(len);
    uint8_t *view = buffer(checksum_message_bytes(len)), *dev = buffer(len);
    uint64_t *sums = calloc(n, sizeof(*sums));
    struct region rd;
    uint64_t seed = 1;

    fake_gpu = fake_kernels = fake_one_submission = true;
    fill(view, len, 16);
    checksum_block_sums(view, len, seed, 0, n, sums);
    uint64_t sum = checksum_combine(sums, n, len, seed);
    checksum_trailer_put(view, len, sums, sum, true);
    region_init(&rd, &vram_kind, 0, dev, len);

    /* 0: intact; 1: a whole block damaged; 2: the last, shorter block damaged. */
    for (int round = 0; round < 3; round++) {
        struct outcome o = { 0 };
        size_t at = round == 1 ? CHECKSUM_BLOCK + 7 : len - 3;
        memset(dev, 0, len);
        if (round > 0)
            view[at] ^= 0x80;
        gpu_copies = 0;
        struct copy_job *job = copy_job_new(&test_d, false, on_done, &o, 0);
        assert_int_equal(copy_job_add(job, &rd, dev, view, len), B10_OK);
        assert_int_equal(copy_job_sum(job, COPY_SUM_CHECK, view, len, seed, sum,
                                      checksum_trailer_table(view, len)), B10_OK);
        submit(job);
        if (round == 2) {
            assert_int_equal(gpu_copies, 0);
            uv_run(&test_loop, UV_RUN_NOWAIT);
            assert_int_equal(o.calls, 1);
            assert_int_equal(o.status, B10_ERR_DATA_CORRUPT);
        } else {
            assert_int_equal(gpu_copies, 1);
            assert_int_equal(job->gpu_gate_blocks, len / CHECKSUM_BLOCK);
            /* The GPU's part: its block sums, checked against the trailer, then the copy. */
            uint64_t *got = calloc(n, sizeof(*got));
            checksum_block_sums(view, len, seed, 0, n - 1, got);
            b10_status_t st = copy_gpu_hooks.sums(job, got, n - 1);
            free(got);
            assert_int_equal(st, round == 0 ? B10_OK : B10_ERR_DATA_CORRUPT);
            gpu_part_end(st);
            assert_int_equal(o.calls, 1);
            assert_int_equal(o.status, st);
        }
        if (round == 0) {
            assert_memory_equal(dev, view, len);
        } else {
            for (size_t i = 0; i < len; i++)
                if (dev[i] != 0)
                    fail_msg("round %d: byte %zu written", round, i);
            view[at] ^= 0x80;
        }
        assert_int_equal(rd.refs, 1);
    }
    free(sums);
    free(view);
    free(dev);
}

/* ---------------------------------------------------------------- holes of a rank's memfd */

#define RANK_ADDR UINT64_C(0x7f0000000000)

/*
 * A memfd of pages pages written (0xee) but for page hole, sealed as a
 * rank's, and a region over it: guarded, as the daemon's DRAM backend makes
 * it (skipped without userfaultfd), or checked, made by hand as that
 * backend makes it on a daemon without userfaultfd.
 */
struct memfd_region {
    int fd;
    struct region *r, own;
    uint8_t *map;
    size_t len;
    bool guarded;
};

static void memfd_region(struct memfd_region *m, size_t pages, size_t hole, bool guarded)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uint8_t *bytes = buffer(page);
    memset(bytes, 0xee, page);
    *m = (struct memfd_region){ .len = pages * page, .guarded = guarded };
    m->fd = memfd_create("test-copy", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    assert_true(m->fd >= 0);
    assert_int_equal(ftruncate(m->fd, (off_t)m->len), 0);
    for (size_t k = 0; k < pages; k++)
        if (k != hole)
            assert_int_equal(pwrite(m->fd, bytes, page, (off_t)(k * page)), (ssize_t)page);
    assert_int_equal(fcntl(m->fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
    free(bytes);
    if (guarded) {
        struct mem_request req = { .kind = B10_MEM_DRAM, .addr = RANK_ADDR, .length = m->len,
                                   .fd = m->fd };
        char detail[256];
        assert_int_equal(mem_region_open(9, &req, detail, sizeof(detail), &m->r), B10_OK);
        if (m->r->holes != REGION_HOLES_GUARDED) {
            region_unref(m->r);
            close(m->fd);
            print_message("no userfaultfd here: no guarded region to test\n");
            skip();
        }
        m->map = m->r->base;
        return;
    }
    m->map = mmap(NULL, m->len, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
    assert_true(m->map != MAP_FAILED);
    region_init(&m->own, &dram_kind, -1, m->map, m->len);
    m->own.addr = RANK_ADDR;
    m->own.holes = REGION_HOLES_CHECKED;
    m->own.hole_fd = m->fd;
    m->r = &m->own;
}

static void memfd_region_close(struct memfd_region *m)
{
    assert_int_equal(m->r->refs, 1);
    if (m->guarded)
        region_unref(m->r);
    else
        munmap(m->map, m->len);
    close(m->fd);
}

static bool file_has(const struct memfd_region *m, size_t at)
{
    return lseek(m->fd, (off_t)at, SEEK_DATA) == (off_t)at;
}

/* What copy_job_hole said of the last job done through on_hole_done. */
static const struct region *hole_region;
static uint64_t hole_addr;
static bool hole_written, hole_known;

/* The hole met lies in m's region, page hole, on the side said. */
static void hole_named(const struct memfd_region *m, size_t hole, bool written)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    assert_true(hole_known);
    assert_ptr_equal(hole_region, m->r);
    assert_true(hole_addr >= RANK_ADDR + hole * page && hole_addr < RANK_ADDR + (hole + 1) * page);
    assert_int_equal(hole_written, written);
}

static void on_hole_done(struct copy_job *job, b10_status_t status)
{
    hole_known = copy_job_hole(job, &hole_region, &hole_addr, &hole_written);
    on_done(job, status);
}

/*
 * A scatter into a memfd with a hole under its third segment, small
 * (inline) and large (on the pool): B10_ERR_NOT_POPULATED, the hole still a
 * hole, copy_job_hole naming it. A checked region's job wrote nothing; a
 * guarded one's stopped at the hole, its segments before it written.
 */
static void test_scatter_into_hole(void **state)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (int guarded = 0; guarded < 2; guarded++)
        for (size_t per = 1; per <= 64; per *= 64) {    /* pages a segment: 4 KiB, 256 KiB */
            struct memfd_region m;
            size_t hole = 2 * per + per / 2;
            memfd_region(&m, 4 * per, hole, guarded);
            uint8_t *view = buffer(4 * per * page);
            struct outcome o = { 0 };
            fill(view, 4 * per * page, 40 + per);
            struct copy_job *job = copy_job_new(&test_d, false, on_hole_done, &o, 0);
            for (size_t s = 0; s < 4; s++)
                assert_int_equal(copy_job_add(job, m.r, m.map + s * per * page,
                                              view + s * per * page, per * page), B10_OK);
            submit(job);
            wait_for(&o);
            assert_int_equal(o.status, B10_ERR_NOT_POPULATED);
            hole_named(&m, hole, true);
            assert_false(file_has(&m, hole * page));
            for (size_t i = 0; i < 2 * per * page; i += 512)
                assert_int_equal(m.map[i], guarded ? view[i] : 0xee);
            memfd_region_close(&m);
            free(view);
        }
}

/* A gather reading a hole: the same, the region named as read. */
static void test_gather_from_hole(void **state)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (int guarded = 0; guarded < 2; guarded++) {
        struct memfd_region m;
        memfd_region(&m, 8, 5, guarded);
        uint8_t *view = buffer(8 * page);
        struct outcome o = { 0 };
        struct copy_job *job = copy_job_new(&test_d, true, on_hole_done, &o, 0);
        assert_int_equal(copy_job_add(job, m.r, view, m.map + 100, 8 * page - 100), B10_OK);
        submit(job);
        wait_for(&o);
        assert_int_equal(o.status, B10_ERR_NOT_POPULATED);
        hole_named(&m, 5, false);
        assert_false(file_has(&m, 5 * page));
        memfd_region_close(&m);
        free(view);
    }
}

/*
 * A direct copy from a memfd with a hole into a rank's process memory (this
 * process's /proc/self/mem): guarded, the pwrite from the hole fails EFAULT
 * and the job B10_ERR_NOT_POPULATED, the memfd named as read; checked, the
 * job refuses first. Without the hole, the same copy lands.
 */
static void test_direct_hole_to_process(void **state)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
    uint8_t *rank = buffer(8 * page);
    struct region rp;
    assert_true(fd >= 0);
    region_init(&rp, &procmem_kind, -1, NULL, 8 * page);
    rp.addr = (uintptr_t)rank;
    rp.proc_fd = fd;
    for (int guarded = 0; guarded < 2; guarded++)
        for (size_t hole = 3; hole <= 8; hole += 5) {       /* 8: no hole in the range */
            struct memfd_region m;
            struct outcome o = { 0 };
            memfd_region(&m, 9, hole, guarded);
            memset(rank, 0, 8 * page);
            struct copy_job *job = copy_job_new(&test_d, false, on_hole_done, &o, 0);
            assert_int_equal(copy_job_add_direct(job, m.r, &rp, rank, m.map, 8 * page), B10_OK);
            submit(job);
            wait_for(&o);
            if (hole == 8) {
                assert_int_equal(o.status, B10_OK);
                assert_memory_equal(rank, m.map, 8 * page);
            } else {
                assert_int_equal(o.status, B10_ERR_NOT_POPULATED);
                hole_named(&m, hole, false);
                assert_false(file_has(&m, hole * page));
            }
            assert_int_equal(rp.refs, 1);
            memfd_region_close(&m);
        }
    close(fd);
    free(rank);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, test_setup, test_teardown)
    const struct CMUnitTest tests[] = {
        T(test_inline_gather),
        T(test_gather_makes_sum),
        T(test_scatter_checked),
        T(test_scatter_unchecked),
        T(test_completion_submits_next),
        T(test_stop_completes_due),
        T(test_region_idle_after_last_copy),
        T(test_direct_ok),
        T(test_direct_host_copy),
        T(test_process_memory),
        T(test_process_gone),
        T(test_device_gather_parts),
        T(test_device_scatter_checked_first),
        T(test_device_sum_in_pieces),
        T(test_device_scatter_gated),
        T(test_scatter_into_hole),
        T(test_gather_from_hole),
        T(test_direct_hole_to_process),
    };
#undef T
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
