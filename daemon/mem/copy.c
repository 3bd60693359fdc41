/* copy.c — see copy.h. */
#include "copy.h"

#include "gpu.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checksum.h"
#include "guard.h"
#include "hole.h"
#include "log.h"

static void copy_job_part_done(struct copy_job *job, b10_status_t status);

struct copy_job *copy_job_new(struct b10d *d, bool gather, copy_done_fn *done, void *arg,
                              uint32_t index)
{
    struct copy_job *job = calloc(1, sizeof(*job));
    if (job == NULL)
        return NULL;
    job->d = d;
    job->gather = gather;
    job->status = B10_OK;
    job->done = done;
    job->arg = arg;
    job->index = index;
    job->work.data = job;
    return job;
}

static void copy_grid_free(struct copy_grid *grid)
{
    if (grid == NULL)
        return;
    free(grid->src_bases);
    free(grid->dst_bases);
    free(grid);
}

void copy_job_free(struct copy_job *job)
{
    if (job == NULL)
        return;
    struct region_refs *lists[] = { &job->refs, &job->reads };
    for (size_t l = 0; l < 2; l++) {
        for (uint32_t i = 0; i < lists[l]->n; i++)
            region_unref(lists[l]->r[i]);
        free(lists[l]->r);
    }
    free(job->segs);
    free(job->block_sums);
    copy_grid_free(job->grid);
    free(job);
}

/* A reference on r in list, once per run of segments in r. */
static b10_status_t copy_job_ref(struct region_refs *list, struct region *r)
{
    if (list->n > 0 && list->r[list->n - 1] == r)
        return B10_OK;
    if (list->n == list->cap) {
        uint32_t cap = list->cap ? list->cap * 2 : 4;
        struct region **refs = realloc(list->r, cap * sizeof(*refs));
        if (refs == NULL)
            return B10_ERR_NO_MEMORY;
        list->r = refs;
        list->cap = cap;
    }
    region_ref(r);
    list->r[list->n++] = r;
    return B10_OK;
}

b10_status_t copy_job_reserve(struct copy_job *job, uint32_t nsegs)
{
    if (nsegs <= job->cap)
        return B10_OK;
    struct copy_seg *segs = realloc(job->segs, nsegs * sizeof(*segs));
    if (segs == NULL)
        return B10_ERR_NO_MEMORY;
    job->segs = segs;
    job->cap = nsegs;
    return B10_OK;
}

static b10_status_t copy_job_seg(struct copy_job *job, void *dst, const void *src, size_t len,
                                 int device, int src_fd, int dst_fd)
{
    if (job->nsegs == job->cap) {
        uint32_t cap = job->cap ? job->cap * 2 : 8;
        struct copy_seg *segs = realloc(job->segs, cap * sizeof(*segs));
        if (segs == NULL)
            return B10_ERR_NO_MEMORY;
        job->segs = segs;
        job->cap = cap;
    }
    job->segs[job->nsegs++] = (struct copy_seg){ dst, src, len, device, src_fd, dst_fd };
    job->host_segs += device < 0;
    job->bytes += len;
    return B10_OK;
}

b10_status_t copy_job_add(struct copy_job *job, struct region *r, void *dst, const void *src,
                          size_t len)
{
    b10_status_t status = copy_job_ref(&job->refs, r);
    if (status != B10_OK)
        return status;
    return copy_job_seg(job, dst, src, len, mem_region_device(r),
                        job->gather ? r->proc_fd : -1, job->gather ? -1 : r->proc_fd);
}

bool copy_direct_ok(const struct b10d *d, const struct region *from, const struct region *to)
{
    /*
     * Device to device on one GPU is the one copy the copy engines do not take: the
     * driver runs it on the SMs, whatever the API (measured on the H200 beside a
     * model: its decode step 2.3-4.0 × as long, at every span size and for one
     * contiguous copy). Without kernels, such a pair goes through a staging view:
     * down and up again through the copy engines, which cost the model nothing and
     * moved 32 KiB spans faster than the driver's device-to-device copy did.
     */
    if (mem_region_on_device(from) || mem_region_on_device(to))
        return mem_region_on_device(from) && mem_region_on_device(to) &&
               from->device == to->device && gpu_kernels(d);
    /* Two ranks' process memory: one copy cannot read one and write the other. */
    return from->proc_fd < 0 || to->proc_fd < 0;
}

b10_status_t copy_job_hold(struct copy_job *job, struct region *r, bool written)
{
    return copy_job_ref(written ? &job->refs : &job->reads, r);
}

b10_status_t copy_job_add_grid(struct copy_job *job, struct copy_grid *grid)
{
    if (job->nsegs > 0 || job->grid != NULL || job->gather || grid->count == 0 ||
        grid->count > COPY_GRID_ROWS || grid->src_nbases > COPY_GRID_BASES ||
        grid->dst_nbases > COPY_GRID_BASES) {
        copy_grid_free(grid);
        return B10_ERR_INVALID_ARG;
    }
    job->grid = grid;
    job->bytes = (uint64_t)grid->count * grid->length;
    return B10_OK;
}

b10_status_t copy_job_add_direct(struct copy_job *job, struct region *from, struct region *to,
                                 void *dst, const void *src, size_t len)
{
    /* The last pair again: allowed, and both already the last of their lists. */
    if (job->nsegs == 0 || from != job->pair_from || to != job->pair_to) {
        if (!copy_direct_ok(job->d, from, to))
            return B10_ERR_UNSUPPORTED;
        /* Apart: a copy past --settle-ms leaves stuck only what it writes (xfer_stick). */
        b10_status_t status = copy_job_ref(&job->reads, from);
        if (status == B10_OK)
            status = copy_job_ref(&job->refs, to);
        if (status != B10_OK)
            return status;
        job->pair_from = from;
        job->pair_to = to;
    }
    return copy_job_seg(job, dst, src, len, mem_region_device(to), from->proc_fd, to->proc_fd);
}

/*
 * One host segment. Process memory goes through pread/pwrite of the rank's
 * memory file, which may copy less than asked (page by page), and returns 0
 * once the rank's address space is gone. EFAULT is the daemon's side: a
 * hole of a guarded memfd mapping (guard.h), at *hole_p.
 */
static b10_status_t copy_host_seg(const struct copy_seg *seg, const void **hole_p)
{
    if (seg->src_fd < 0 && seg->dst_fd < 0) {
        memcpy(seg->dst, seg->src, seg->len);
        return B10_OK;
    }
    bool reading = seg->src_fd >= 0;
    uintptr_t rank_addr = reading ? (uintptr_t)seg->src : (uintptr_t)seg->dst;
    for (size_t done = 0; done < seg->len;) {
        ssize_t n = reading ? pread(seg->src_fd, (uint8_t *)seg->dst + done, seg->len - done,
                                    (off_t)(rank_addr + done))
                            : pwrite(seg->dst_fd, (const uint8_t *)seg->src + done,
                                     seg->len - done, (off_t)(rank_addr + done));
        if (n > 0) {
            done += (size_t)n;
        } else if (n == 0) {
            return B10_ERR_CLIENT_GONE;
        } else if (errno == EFAULT) {
            /* The kernel drops the count of what it copied before the fault: the hole is found. */
            *hole_p = hole_first_absent(reading ? (const uint8_t *)seg->dst + done
                                                : (const uint8_t *)seg->src + done,
                                        seg->len - done);
            return B10_ERR_NOT_POPULATED;
        } else if (errno != EINTR) {
            int err = errno;
            log_warning("%s the rank's memory at 0x%" PRIxPTR " through /proc: %s",
                        reading ? "reading" : "writing", rank_addr + done, strerror(err));
            return err == ESRCH ? B10_ERR_CLIENT_GONE : B10_ERR_IO;
        }
    }
    return B10_OK;
}

static bool copy_region_holds(const struct region *r, const void *p);

/*
 * B10D_FAULT_SPILL_BYTE (tests): every Nth scatter into a rank's mapped
 * memory changes the byte just past its piece, where that byte is still the
 * rank's, so that the chaos checker is seen to catch a byte outside a span.
 */
static void copy_spill(struct copy_job *job, const struct copy_seg *seg)
{
    struct b10d *d = job->d;
    if (d->fault_spill_every == 0 || job->gather || seg->dst_fd >= 0 ||
        __atomic_add_fetch(&d->fault_spill_seen, 1, __ATOMIC_RELAXED) % d->fault_spill_every != 0)
        return;
    uint8_t *past = (uint8_t *)seg->dst + seg->len;
    for (uint32_t r = 0; r < job->refs.n; r++)
        if (copy_region_holds(job->refs.r[r], past)) {
            *past ^= 0x5a;
            return;
        }
}

/*
 * The job's host segments, on whichever thread runs them; the first failure
 * stops them. Run by guard_call: a load or store of a guarded hole ends it.
 */
static b10_status_t copy_host_segs(void *arg)
{
    struct copy_job *job = arg;
    for (uint32_t i = 0; i < job->nsegs; i++) {
        if (job->segs[i].device >= 0)
            continue;
        b10_status_t status = copy_host_seg(&job->segs[i], &job->hole);
        if (status != B10_OK)
            return status;
        copy_spill(job, &job->segs[i]);
    }
    return B10_OK;
}

/* ---------------------------------------------------------------- holes */

static bool copy_region_holds(const struct region *r, const void *p)
{
    /* A process-memory region's base is the rank's address, a VRAM one's the device's. */
    return mem_region_mapped(r) && (const uint8_t *)p >= r->base &&
           (uintptr_t)((const uint8_t *)p - r->base) < r->length;
}

bool copy_job_hole(const struct copy_job *job, const struct region **region_p, uint64_t *addr_p,
                   bool *written_p)
{
    const struct region_refs *lists[] = { &job->refs, &job->reads };
    for (size_t l = 0; l < 2 && job->hole != NULL; l++)
        for (uint32_t i = 0; i < lists[l]->n; i++) {
            const struct region *r = lists[l]->r[i];
            if (!copy_region_holds(r, job->hole))
                continue;
            *region_p = r;
            *addr_p = r->addr + (uint64_t)((const uint8_t *)job->hole - r->base);
            *written_p = l == 0 && !job->gather;
            return true;
        }
    return false;
}

/* The regions of a job the guard could not take: each one's pages asked about at once. */
struct copy_holes {
    const struct region **r;
    struct hole_span *span;
    uint32_t n;
    uint32_t last;                      /* the entry the last lookup found */
};

/* The entry of the region holding p, or NULL (a view, a region with no file of its own). */
static struct hole_span *copy_holes_find(struct copy_holes *h, const void *p)
{
    if (h->n > 0 && copy_region_holds(h->r[h->last], p))
        return &h->span[h->last];
    for (uint32_t i = 0; i < h->n; i++)
        if (copy_region_holds(h->r[i], p)) {
            h->last = i;
            return &h->span[i];
        }
    return NULL;
}

/* An entry for each region of the job's the guard could not take, once each: how many. */
static uint32_t copy_holes_init(struct copy_holes *h, const struct copy_job *job)
{
    const struct region_refs *lists[] = { &job->refs, &job->reads };
    uint32_t most = job->refs.n + job->reads.n;
    *h = (struct copy_holes){ 0 };
    for (size_t l = 0; l < 2; l++)
        for (uint32_t i = 0; i < lists[l]->n; i++) {
            const struct region *r = lists[l]->r[i];
            if (r->holes != REGION_HOLES_CHECKED || copy_holes_find(h, r->base) != NULL)
                continue;
            if (h->r == NULL && ((h->r = calloc(most, sizeof(*h->r))) == NULL ||
                                 (h->span = calloc(most, sizeof(*h->span))) == NULL))
                return UINT32_MAX;
            h->r[h->n] = r;
            hole_span_init(&h->span[h->n++], r->hole_fd, r->hole_offset, r->base);
        }
    return h->n;
}

static void copy_holes_free(struct copy_holes *h)
{
    for (uint32_t i = 0; i < h->n; i++)
        hole_span_free(&h->span[i]);
    free(h->span);
    free(h->r);
}

/*
 * The job's segments, each side that is a daemon address and may lie in a
 * region: the source of a gather or a direct copy, the destination of all
 * but a gather. grow: note each in its region's span; else check each.
 */
static b10_status_t copy_holes_walk(struct copy_job *job, struct copy_holes *h, bool grow)
{
    bool src = job->gather || job->reads.n > 0, dst = !job->gather;
    for (uint32_t i = 0; i < job->nsegs; i++) {
        const struct copy_seg *seg = &job->segs[i];
        const void *sides[2] = { src && seg->src_fd < 0 ? seg->src : NULL,
                                 dst && seg->dst_fd < 0 ? seg->dst : NULL };
        for (int k = 0; k < 2 && seg->device < 0; k++) {
            struct hole_span *span = sides[k] != NULL ? copy_holes_find(h, sides[k]) : NULL;
            const uint8_t *hole;
            if (span == NULL)
                continue;
            if (grow)
                hole_span_grow(span, sides[k], seg->len);
            else if (hole_span_check(span, sides[k], seg->len, &hole) != B10_OK) {
                job->hole = hole;
                return B10_ERR_NOT_POPULATED;
            }
        }
    }
    return B10_OK;
}

/*
 * Regions the guard could not take (REGION_HOLES_CHECKED): every page the
 * job's segments touch in them must be the file's (hole.h) before it copies
 * a byte. Jobs without such a region ask nothing.
 */
static b10_status_t copy_holes(struct copy_job *job)
{
    struct copy_holes h;
    uint32_t n = copy_holes_init(&h, job);
    if (n == 0)
        return B10_OK;
    b10_status_t status = B10_ERR_NO_MEMORY;
    if (n != UINT32_MAX) {
        copy_holes_walk(job, &h, true);
        for (uint32_t i = 0; i < n; i++)
            hole_span_ask(&h.span[i]);
        status = copy_holes_walk(job, &h, false);
    }
    copy_holes_free(&h);
    return status;
}

static void copy_on_idle(uv_idle_t *idle);

b10_status_t copy_job_sum(struct copy_job *job, enum copy_sum mode, const void *view, size_t len,
                          uint64_t seed, uint64_t want, const uint8_t *table)
{
    job->sum_mode = mode;
    job->view = view;
    job->view_len = len;
    job->seed = seed;
    job->sum = want;
    job->table = len > CHECKSUM_BLOCK ? table : NULL;
    job->sum_done = false;
    /* Every way of summing keeps the blocks' sums (the trailer carries them), even of one. */
    free(job->block_sums);
    job->block_sums = calloc(checksum_blocks(len), sizeof(*job->block_sums));
    return job->block_sums != NULL ? B10_OK : B10_ERR_NO_MEMORY;
}

/* The chunk's sum is known: a check compares it, a gather keeps it. */
static b10_status_t copy_sum_finish(struct copy_job *job, uint64_t sum)
{
    if (job->sum_mode == COPY_SUM_CHECK && sum != job->sum)
        return B10_ERR_DATA_CORRUPT;
    job->sum = sum;
    job->sum_done = true;
    return B10_OK;
}

/* End the job with st on the next loop turn, never inside the call that found it. */
static void copy_end_next_turn(struct copy_job *job, b10_status_t st)
{
    job->host_status = st;
    job->parts = 1;
    if (!job->d->copies_inline_on) {
        copy_job_part_done(job, st);    /* the loop is stopping: no next turn */
        return;
    }
    list_insert_tail(&job->d->copies_inline, &job->node);
    uv_idle_start(&job->d->copies_idle, copy_on_idle);
}

/* The checksum step, on whichever thread: B10_ERR_DATA_CORRUPT when a check fails. */
static b10_status_t copy_sum_step(struct copy_job *job)
{
    uint32_t n = checksum_blocks(job->view_len);
    checksum_block_sums(job->view, job->view_len, job->seed, 0, n, job->block_sums);
    return copy_sum_finish(job, checksum_combine(job->block_sums, n, job->view_len, job->seed));
}

static bool copy_sum_due(const struct copy_job *job, enum copy_sum mode)
{
    return job->sum_mode == mode && !job->sum_done;
}

/*
 * The host part, on a pool thread or inline. A job of host memory only
 * checks its view first and makes its sum last, in the same task (a 4 MiB
 * view is still in the cache: summing it a block at a time inside the copy
 * measured no faster); with device parts the GPU writes or reads the view
 * too, and the sum is the loop's business (copy_job_submit,
 * copy_job_part_done). Then it looks for holes where the guard could not
 * (copy_holes), and copies under the guard. The test hook's delay
 * (B10_TEST_COPY_DELAY_MS, never inline) comes after every check, just
 * before the first byte is written: where a rank may race the checks.
 */
static b10_status_t copy_host_part(struct copy_job *job)
{
    bool host_only = job->host_segs == job->nsegs;
    b10_status_t status = B10_OK;
    if (host_only && copy_sum_due(job, COPY_SUM_CHECK))
        status = copy_sum_step(job);
    if (status == B10_OK)
        status = copy_holes(job);
    if (status == B10_OK && !job->gather && job->d->test_copy_delay_ms > 0)
        usleep(job->d->test_copy_delay_ms * 1000u);
    if (status == B10_OK)
        status = guard_call(copy_host_segs, job, &job->hole);
    if (status == B10_OK && host_only && copy_sum_due(job, COPY_SUM_MAKE))
        status = copy_sum_step(job);
    return status;
}

/* On a pool thread: touches only the job's own host segments and view. */
static void copy_run(uv_work_t *work)
{
    struct copy_job *job = work->data;
    job->host_status = copy_host_part(job);
}

/*
 * A device job's checksum, off the loop: one pool task sums the whole view.
 * Four tasks a view summed a 4 MiB chunk in a quarter of the time, but they
 * woke four threads at once in each daemon, and beside a model sharing the
 * cores that burst cost its step: with one task, `--verify-data on` WRITEs
 * into the model's GPU held its decode p99 at 1.14-1.17 x alone where four
 * gave 1.16-1.28, moved 0.92-0.95 of the wire's rate where four moved
 * 0.79-0.99, on 12 % less CPU a GB; READs kept their rate (H200 run 45,
 * tests/bench/notes/2026-12-01-h200-runs.md). A chunk's sum (a fraction of a millisecond) hides behind the
 * other chunks in flight.
 */
static void copy_sum_run(uv_work_t *work)
{
    struct copy_job *job = work->data;
    checksum_block_sums(job->view, job->view_len, job->seed, 0, checksum_blocks(job->view_len),
                        job->block_sums);
}

/* The step is over (st): a checked scatter goes on to its copy, anything else ends the job. */
static void copy_sum_ended(struct copy_job *job, b10_status_t st)
{
    if (job->sum_mode == COPY_SUM_CHECK && st == B10_OK) {
        copy_job_submit(job);       /* checked: now the copy */
        return;
    }
    job->parts = 1;
    copy_job_part_done(job, st);
}

static void copy_sum_after(uv_work_t *work, int status)
{
    struct copy_job *job = work->data;
    b10_status_t st = B10_ERR_CANCELLED;        /* status != 0: the loop is torn down */
    if (status == 0)
        st = copy_sum_finish(job, checksum_combine(job->block_sums, checksum_blocks(job->view_len),
                                                   job->view_len, job->seed));
    copy_sum_ended(job, st);
}

static void copy_sum_queue(struct copy_job *job)
{
    job->sum_work.data = job;
    uv_queue_work(job->d->loop, &job->sum_work, copy_sum_run, copy_sum_after);
}

bool copy_sums_device(const struct copy_job *job, size_t len)
{
    /*
     * Views the loop would sum inline stay on the host: the kernel's steps
     * through a block are sequential PCIe round trips, 37 µs for a 320 KiB
     * view on the H200, where the loop takes about as long.
     */
    return gpu_present(job->d) && job->host_segs < job->nsegs && len > COPY_INLINE_BYTES;
}

bool copy_sums_on_gpu(const struct copy_job *job, size_t len)
{
    return copy_sums_device(job, len) && gpu_kernels(job->d);
}

/*
 * The GPU's part in a device job's sum. copy_job_gpu_blocks: how many whole
 * CHECKSUM_BLOCK blocks the GPU sums for it, with block_sums ready for them;
 * 0 when the host sums the view (a chunk of one block, a view the kernel
 * cannot read, no memory). copy_job_gpu_sums: the GPU's sums, handed over
 * just before the part that made them completes: for a checked scatter
 * (gpu_gate_blocks), B10_ERR_DATA_CORRUPT when a block differed from the
 * trailer's and the GPU therefore copied nothing.
 */
static uint32_t copy_job_gpu_blocks(struct copy_job *job)
{
    /* The kernel reads 16-byte vectors; staging views are page-aligned (mmap). */
    if (!copy_sums_on_gpu(job, job->view_len) || ((uintptr_t)job->view & 15) ||
        job->block_sums == NULL)
        return 0;
    return (uint32_t)(job->view_len / CHECKSUM_BLOCK);
}

static b10_status_t copy_job_gpu_sums(struct copy_job *job, const uint64_t *sums, uint32_t n)
{
    memcpy(job->block_sums, sums, n * sizeof(*sums));
    if (job->gpu_gate_blocks == 0) {
        job->gpu_sums_ready = true;
        return B10_OK;
    }
    /* A checked scatter: the GPU copied nothing if a block differed; the same test here. */
    for (uint32_t i = 0; i < n; i++)
        if (sums[i] != checksum_trailer_block(job->view, job->view_len, i))
            return B10_ERR_DATA_CORRUPT;
    job->sum_done = true;
    return B10_OK;
}

/*
 * A scatter that is one GPU submission is checked inside it: the kernel
 * sums the view's whole blocks against the trailer's table, and the
 * scatter kernel behind it copies nothing if one differed. The last,
 * shorter block is checked here first. False: the job goes the long way
 * (a submission that sums, then one that copies).
 */
static bool copy_check_gated(struct copy_job *job, b10_status_t *st)
{
    uint32_t full = copy_job_gpu_blocks(job);
    if (full == 0 || job->table == NULL || !gpu_one_submission(job->d, job))
        return false;
    uint32_t n = checksum_blocks(job->view_len);
    *st = B10_OK;
    if (full < n) {
        checksum_block_sums(job->view, job->view_len, job->seed, full, 1, job->block_sums);
        if (job->block_sums[full] != checksum_trailer_block(job->view, job->view_len, full))
            *st = B10_ERR_DATA_CORRUPT;
    }
    job->gpu_gate_blocks = full;
    return true;
}

/* The chunk's sum from the GPU's block sums, and the last, shorter block's from here. */
static b10_status_t copy_sum_from_gpu(struct copy_job *job)
{
    uint32_t n = checksum_blocks(job->view_len), full = (uint32_t)(job->view_len / CHECKSUM_BLOCK);
    if (full < n)
        checksum_block_sums(job->view, job->view_len, job->seed, full, n - full, job->block_sums);
    job->gpu_sums_ready = false;
    job->gpu_sum_asked = false;
    return copy_sum_finish(job, checksum_combine(job->block_sums, n, job->view_len, job->seed));
}

/*
 * A device job's checksum step. With a GPU the kernel sums the view's whole
 * blocks (the CPU would read every byte of it cold, a third of a copy
 * thread's time); else inline when the view is small (a few µs), or on a
 * pool task. A check that fails inside a submission completes on the next
 * loop turn, never inside it.
 */
static void copy_sum_phase(struct copy_job *job)
{
    if (job->gpu_sums_ready) {
        copy_sum_ended(job, copy_sum_from_gpu(job));
        return;
    }
    uint32_t full = copy_job_gpu_blocks(job);
    if (full > 0) {
        job->parts = 0;
        job->gpu_sum_asked = true;
        gpu_sum_job(job->d, job, full);     /* its part's end comes back to copy_job_part_done */
        return;
    }
    if (job->view_len > COPY_INLINE_BYTES || !job->d->copies_inline_on) {
        copy_sum_queue(job);
        return;
    }
    b10_status_t st = copy_sum_step(job);
    if (job->sum_mode == COPY_SUM_CHECK && st != B10_OK) {
        copy_end_next_turn(job, st);
        return;
    }
    copy_sum_ended(job, st);
}

static void copy_after(uv_work_t *work, int status)
{
    struct copy_job *job = work->data;
    /* UV_ECANCELED only when the loop is torn down before the job ran. */
    copy_job_part_done(job, status == 0 ? job->host_status : B10_ERR_CANCELLED);
}

/* One part of the job finished (the GPU room, through copy_gpu_hooks, and the thread pool). */
static void copy_job_part_done(struct copy_job *job, b10_status_t status)
{
    if (status != B10_OK && job->status == B10_OK)
        job->status = status;
    if (--job->parts > 0)
        return;
    /* A gather with device parts: its view is whole only now. Or the GPU summed the view. */
    if (job->status == B10_OK && (copy_sum_due(job, COPY_SUM_MAKE) || job->gpu_sum_asked)) {
        copy_sum_phase(job);
        return;
    }
    job->done(job, job->status);
    copy_job_free(job);
}

/* Completions of inline copies, one loop turn after their submission. */
static void copy_on_idle(uv_idle_t *idle)
{
    struct b10d *d = idle->data;
    struct list due;

    /* Only those due now: a completion may submit the next inline copy. */
    list_init(&due);
    list_splice_tail(&due, &d->copies_inline);
    while (!list_empty(&due)) {
        struct copy_job *job = list_entry(due.next, struct copy_job, node);
        list_remove(&job->node);
        copy_job_part_done(job, job->host_status);
    }
    if (list_empty(&d->copies_inline))
        uv_idle_stop(idle);
}

void copy_start(struct b10d *d)
{
    list_init(&d->copies_inline);
    uv_idle_init(d->loop, &d->copies_idle);
    d->copies_idle.data = d;
    d->copies_inline_on = true;
}

void copy_stop(struct b10d *d)
{
    if (!d->copies_inline_on)
        return;
    copy_on_idle(&d->copies_idle);
    uv_close((uv_handle_t *)&d->copies_idle, NULL);
    d->copies_inline_on = false;
}

static bool copy_inline(const struct copy_job *job)
{
    /* The test hook's delay must not stall the loop: those go to the pool. */
    return job->d->copies_inline_on && job->host_segs == job->nsegs && job->nsegs > 0 &&
           job->bytes <= COPY_INLINE_BYTES && job->d->test_copy_delay_ms == 0;
}

void copy_job_submit(struct copy_job *job)
{
    /* A scatter with device parts: the view is checked before the GPU writes a byte of it. */
    if (copy_sum_due(job, COPY_SUM_CHECK) && job->host_segs < job->nsegs) {
        b10_status_t st;
        if (!copy_check_gated(job, &st)) {
            copy_sum_phase(job);
            return;
        }
        if (st != B10_OK) {
            copy_end_next_turn(job, st);    /* its last block failed */
            return;
        }
    }
    /* One part for this call itself, so that no part finishing early ends the job. */
    job->parts = 1;
    if (copy_inline(job)) {
        job->host_status = copy_host_part(job);
        list_insert_tail(&job->d->copies_inline, &job->node);
        uv_idle_start(&job->d->copies_idle, copy_on_idle);
        return;     /* the call's part completes from copy_on_idle */
    }
    if (job->host_segs > 0) {
        job->parts++;
        uv_queue_work(job->d->loop, &job->work, copy_run, copy_after);
    }
    if (job->host_segs < job->nsegs || job->grid != NULL)
        gpu_copy_job(job->d, job);
    copy_job_part_done(job, B10_OK);
}

const struct gpu_hooks copy_gpu_hooks = {
    .sum_blocks = copy_job_gpu_blocks,
    .sums = copy_job_gpu_sums,
    .part_done = copy_job_part_done,
};
