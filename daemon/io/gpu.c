/* gpu.c — see gpu.h. */
#include "gpu.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"
#include "copy.h"
#include "cpuload.h"

#ifdef B10_HAVE_CUDA

#include "gpu-copy.h"

_Static_assert(GPU_COPY_SUM_BLOCK == CHECKSUM_BLOCK, "the GPU sums checksum.h's blocks");

/*
 * Most pieces one submission carries; a chunk with more is cut into several.
 * The kernels take a chunk in one submission: one launch, its sums chained to it.
 * The copy engines take one cudaMemcpyBatchAsync call's worth, each submission
 * ending in its event and host callback. Measured on the H200 without MPS
 * (tests/bench/RESULTS.md, runs 28-29): a co-resident model's step queued behind
 * a submission of 1024 pieces of 4 KiB waited up to 0.3 ms before its first
 * kernel ran (decode p99 1.76-1.84 x alone, its GPU time unchanged); behind
 * submissions of 256, 11 us at p99 (1.04 x); of 128, 5 us (1.03 x).
 * It is the submission's bytes too: 128 pieces of 32 KiB (a whole 4 MiB view)
 * took the step's p99 to 1.16 x; cut at 1 MiB, 1.08 x; at 512 KiB, 1.02 x, the
 * rate unchanged (runs 31-35). At 256 KiB the rate fell to 0.6-0.7 x the wire. A
 * single piece beyond the cap stays whole: a contiguous 4 MiB copy cost a model
 * nothing measurable (1.02 x).
 */
#define GPU_MAX_PIECES 65536
#define GPU_ENGINE_PIECES GPU_COPY_BATCH_PIECES
#define GPU_ENGINE_BYTES (512u * 1024u)
#define GPU_SLOTS      16

/*
 * How long the loop polls a copy's event after submitting it, when spinning
 * is allowed (--progress, and cores to spare). A small copy's GPU work takes
 * a few µs; its completion callback reaches the loop through a CUDA driver
 * thread and a uv_async, two thread wake-ups that cost 45 µs on one GPU and
 * 90-250 µs when two daemons share it. Past the window the callback does.
 */
#define GPU_POLL_NS (200u * 1000u)

/*
 * Up to gpu_part_pieces of one device's share of a copy job: one gpu-copy operation.
 *
 * Not every part is called back. A callback is a host function in the copier's
 * stream, and the stream runs nothing after it until a driver thread has run it:
 * a 4 MiB chunk of 32 KiB pieces cut into eight submissions each way stalled the
 * stream sixteen times, and a local VRAM -> VRAM copy through staging moved 3.9-4.1
 * GB/s where one submission a chunk moved 15 (H200, RESULTS run 40). A stream runs
 * its submissions in order, so the callback of a later one says the earlier ones
 * are over too: each device keeps its submitted parts in order (gpu.fifo), and a
 * callback, or the loop's polling, ends every part at the head whose event is
 * complete. A part is called back where a later one may not come: the last of its
 * job on its device, and the one that takes a device's last slot (the parts behind
 * it wait for a slot that only its callback frees).
 */
struct gpu_part {
    struct list node;           /* gpu.pending until submitted; gpu.done once called back */
    struct list poll_node;      /* gpu.polling while the loop polls it */
    struct list fifo_node;      /* gpu.fifo[device] from submission until finished */
    struct gpu *gpu;
    struct copy_job *job;
    int device;
    gpu_copy_piece_t *pieces;
    size_t npieces;
    gpu_copy_op_t *op;
    uint32_t sum_blocks;        /* > 0: the submission also sums the job's view */
    uint64_t submitted_ns;
    bool polled;                /* in gpu.polling */
    bool finished;              /* ended before its callback: only the callback is still due */
    bool last;                  /* its job's last part on its device */
    bool notify;                /* submitted with a callback, which frees it */
};

struct gpu {
    struct b10d *d;
    int ndevices;
    gpu_copier_t **copiers;     /* per device, made on first use */
    uv_async_t async;
    pthread_mutex_t lock;       /* guards done: the only state CUDA threads touch */
    struct list done;
    struct list pending;        /* parts waiting for a free slot of their copier */
    struct list polling;        /* parts submitted within GPU_POLL_NS, polled each loop turn */
    struct list *fifo;          /* per device: its submitted parts, oldest first */
    uint32_t *dev_inflight;     /* per device: parts in fifo (its copier's slots taken) */
    uv_timer_t orphan_timer;    /* sweeps while a device's newest part has no callback */
    bool orphan_on;
    uv_idle_t idle;             /* runs while polling is not empty */
    bool idle_on;
    uint32_t inflight;          /* submitted, not yet completed */
    uint32_t callbacks;         /* submitted, callback not yet handled (holds the part) */
    int closing;                /* handles still closing in gpu_stop */
    bool kernels;               /* gpu_kernels: --gpu-copy, resolved at start */
};

bool gpu_present(const struct b10d *d)
{
    return d->gpu != NULL && d->gpu->ndevices > 0;
}

bool gpu_kernels(const struct b10d *d)
{
    return gpu_present(d) && d->gpu->kernels;
}

static void gpu_submit_pending(struct gpu *gpu);
static void gpu_on_idle(uv_idle_t *handle);
static void gpu_orphans(struct gpu *gpu);

/* On a CUDA driver thread: hand the part to the loop and return. */
static void gpu_on_done(void *arg)
{
    struct gpu_part *part = arg;
    struct gpu *gpu = part->gpu;

    pthread_mutex_lock(&gpu->lock);
    list_insert_tail(&gpu->done, &part->node);
    pthread_mutex_unlock(&gpu->lock);
    uv_async_send(&gpu->async);
}

static void gpu_unpoll(struct gpu_part *part)
{
    if (part->polled) {
        list_remove(&part->poll_node);
        part->polled = false;
    }
}

/* The part's copy ended (rc from its event): the job hears of it, the slot goes back. */
static void gpu_part_finish(struct gpu *gpu, struct gpu_part *part, int rc)
{
    b10_status_t status = B10_OK;
    if (rc != GPU_COPY_OK) {
        log_err("gpu: copy on device %d failed: %s: %s", part->device, gpu_copy_strstatus(rc),
                gpu_copy_last_error(gpu->copiers[part->device]));
        status = B10_ERR_INTERNAL;
    }
    float ms = 0;
    if (rc == GPU_COPY_OK && gpu_copy_op_elapsed_ms(part->op, &ms) == GPU_COPY_OK)
        part->job->gpu_ms += ms;
    if (rc == GPU_COPY_OK && part->sum_blocks > 0) {
        const uint64_t *sums = gpu_copy_op_sums(part->op);
        status = sums != NULL ? gpu->d->gpu_hooks->sums(part->job, sums, part->sum_blocks)
                              : B10_ERR_INTERNAL;
    }
    gpu_unpoll(part);
    list_remove(&part->fifo_node);
    gpu->dev_inflight[part->device]--;
    gpu_copy_op_release(part->op);
    part->op = NULL;
    part->finished = true;
    gpu->inflight--;
    gpu->d->gpu_hooks->part_done(part->job, status);
    part->job = NULL;
    free(part->pieces);
    part->pieces = NULL;
}

/*
 * End device's parts from the oldest while their events are complete: a
 * stream runs them in order. A part without a callback is freed here; one
 * with a callback stays for it. Whether any ended.
 */
static bool gpu_sweep(struct gpu *gpu, int device)
{
    bool ended = false;
    while (!list_empty(&gpu->fifo[device])) {
        struct gpu_part *part = list_entry(gpu->fifo[device].next, struct gpu_part, fifo_node);
        int rc = gpu_copy_op_poll(part->op);
        if (rc == GPU_COPY_PENDING)
            break;
        gpu_part_finish(gpu, part, rc);
        if (!part->notify)
            free(part);
        ended = true;
    }
    return ended;
}

/* Sweep every device each millisecond while one has parts no callback will end. */
static void gpu_on_orphan_timer(uv_timer_t *handle)
{
    struct gpu *gpu = handle->data;
    bool ended = false;
    for (int device = 0; device < gpu->ndevices; device++)
        ended |= gpu_sweep(gpu, device);
    if (ended)
        gpu_submit_pending(gpu);
    gpu_orphans(gpu);
}

/*
 * Whether a device's newest submitted part lacks a callback. Not in the
 * daemon's own flow (a job's last part and a full copier's newest have one),
 * but after a job cut short (no memory for its next part) or a submission
 * refused before its stream drained, nothing would end the parts before it:
 * a timer sweeps them, for as long as that lasts.
 */
static void gpu_orphans(struct gpu *gpu)
{
    bool orphans = false;
    for (int device = 0; device < gpu->ndevices && !orphans; device++)
        orphans = !list_empty(&gpu->fifo[device]) &&
                  !list_entry(gpu->fifo[device].prev, struct gpu_part, fifo_node)->notify;
    if (orphans == gpu->orphan_on)
        return;
    gpu->orphan_on = orphans;
    if (orphans)
        uv_timer_start(&gpu->orphan_timer, gpu_on_orphan_timer, 1, 1);
    else
        uv_timer_stop(&gpu->orphan_timer);
}

static void gpu_on_async(uv_async_t *handle)
{
    struct gpu *gpu = handle->data;
    struct list done;

    list_init(&done);
    pthread_mutex_lock(&gpu->lock);
    if (!list_empty(&gpu->done)) {
        done = gpu->done;
        done.next->prev = &done;
        done.prev->next = &done;
        list_init(&gpu->done);
    }
    pthread_mutex_unlock(&gpu->lock);

    while (!list_empty(&done)) {
        struct gpu_part *part = list_entry(done.next, struct gpu_part, node);
        list_remove(&part->node);
        /* Its callback ran: it and every part before it on its stream are over. */
        if (!part->finished)
            gpu_sweep(gpu, part->device);
        /* One the loop ended already waited for this callback only, to be freed. */
        if (!part->finished)
            gpu_part_finish(gpu, part, gpu_copy_op_poll(part->op));
        gpu->callbacks--;
        free(part);
    }
    gpu_submit_pending(gpu);
}

static void gpu_poll_update(struct gpu *gpu)
{
    bool want = !list_empty(&gpu->polling);
    if (want == gpu->idle_on)
        return;
    gpu->idle_on = want;
    if (want)
        uv_idle_start(&gpu->idle, gpu_on_idle);
    else
        uv_idle_stop(&gpu->idle);
}

/* Each loop turn while copies are young: their events, without waiting for the callback. */
static void gpu_on_idle(uv_idle_t *handle)
{
    struct gpu *gpu = handle->data;
    uint64_t now = uv_hrtime();
    bool ended = false;
    struct list *pos, *tmp;
    uint64_t sweep = 0;     /* devices with a part complete; past 64, all of them */
    uint64_t busy = 0;      /* devices whose oldest polled part is still running */

    list_for_each_safe(pos, tmp, &gpu->polling) {
        struct gpu_part *part = list_entry(pos, struct gpu_part, poll_node);
        uint64_t bit = part->device < 64 ? UINT64_C(1) << part->device : 0;
        /* A stream runs its parts in order: behind a running one, no event is worth a query. */
        int rc = (busy & bit) != 0 ? GPU_COPY_PENDING : gpu_copy_op_poll(part->op);
        if (rc == GPU_COPY_PENDING) {
            busy |= bit;
            /* Signed: a part submitted during this pass began after `now`. */
            if ((int64_t)(now - part->submitted_ns) > (int64_t)GPU_POLL_NS ||
                cpuload_oversubscribed())
                gpu_unpoll(part);       /* a callback at or after it ends it */
            continue;
        }
        sweep |= part->device < 64 ? UINT64_C(1) << part->device : UINT64_MAX;
    }
    /* After the walk: ending parts takes them off the polling list. */
    for (int device = 0; sweep != 0 && device < gpu->ndevices; device++)
        if (device >= 64 || (sweep & UINT64_C(1) << device) != 0)
            ended |= gpu_sweep(gpu, device);
    if (ended)
        gpu_submit_pending(gpu);
    gpu_poll_update(gpu);
}

/*
 * Slots a copier has. The kernels' each hold descriptor tables: GPU_SLOTS.
 * The copy engines' hold two events each, so they get room for four views'
 * submissions at the byte cut. 4 KiB pieces need it: a view of them is eight
 * submissions, and with room for only two views a WRITE into the GPU moved
 * 3.8-4.2 GB/s where room for four moved 5.1-5.5 against a wire of 6.5-7.0
 * (H200, tests/bench/RESULTS.md, run 38); room for eight moved no more.
 * At least GPU_SLOTS, at most 64, gpu-copy's bound.
 */
static unsigned gpu_slots(const struct gpu *gpu)
{
    if (gpu->kernels)
        return GPU_SLOTS;
    uint64_t want = 4 * ((gpu->d->cfg.view_bytes + GPU_ENGINE_BYTES - 1) / GPU_ENGINE_BYTES);
    return want < GPU_SLOTS ? GPU_SLOTS : want > 64 ? 64 : (unsigned)want;
}

static uint32_t gpu_part_pieces(const struct gpu *gpu)
{
    return gpu->kernels ? GPU_MAX_PIECES : GPU_ENGINE_PIECES;
}

/* A part of npieces and bytes so far is full before one more piece of len. */
static bool gpu_part_full(const struct gpu *gpu, uint32_t npieces, size_t bytes, size_t len)
{
    if (npieces == 0)
        return false;
    if (npieces >= gpu_part_pieces(gpu))
        return true;
    return !gpu->kernels && bytes + len > GPU_ENGINE_BYTES;
}

static gpu_copier_t *gpu_copier(struct gpu *gpu, int device)
{
    if (device < 0 || device >= gpu->ndevices)
        return NULL;
    /* Made at the device's first copy (not at start: it makes a context); tried again after a failure. */
    if (gpu->copiers[device] == NULL) {
        gpu_copy_params_t params = {
            .field_mask = GPU_COPY_PARAM_DEVICE | GPU_COPY_PARAM_MAX_CTAS |
                          GPU_COPY_PARAM_MAX_PIECES | GPU_COPY_PARAM_MAX_INFLIGHT |
                          GPU_COPY_PARAM_MAX_SUM_BLOCKS | GPU_COPY_PARAM_KERNELS,
            .device = device,
            .kernels = gpu->kernels,
            .max_ctas = gpu->d->cfg.gpu_max_ctas,
            .max_pieces = GPU_MAX_PIECES,
            .max_inflight = gpu_slots(gpu),
            .max_sum_blocks = gpu->d->cfg.view_bytes / CHECKSUM_BLOCK + 1,
        };
        int rc = gpu_copy_create(&params, &gpu->copiers[device]);
        if (rc != GPU_COPY_OK) {
            log_err("gpu: no copier for device %d: %s", device, gpu_copy_strstatus(rc));
            return NULL;
        }
        log_debug("gpu: copier on device %d, at most %u CTAs a copy", device,
                 gpu->d->cfg.gpu_max_ctas);
    }
    return gpu->copiers[device];
}

/*
 * Submit a part: B10_OK, B10_ERR_BUSY when every slot is taken (it waits in
 * pending), B10_ERR_INTERNAL when CUDA refused it (logged).
 */
static b10_status_t gpu_submit(struct gpu *gpu, struct gpu_part *part)
{
    gpu_copier_t *copier = gpu_copier(gpu, part->device);
    if (copier == NULL)
        return B10_ERR_INTERNAL;
    /* A checked scatter: the trailer's table gates the copy (copy_check_gated). */
    gpu_copy_sum_t sum = { .bytes = part->job->view, .nblocks = part->sum_blocks,
                           .seed = part->job->seed,
                           .expect = part->job->gpu_gate_blocks > 0 && part->npieces > 0
                                         ? part->job->table : NULL };
    /* Called back where no later part of this device may come to say it is over. */
    part->notify = part->last || gpu->dev_inflight[part->device] + 1 >= gpu_slots(gpu);
    gpu_copy_req_t req = {
        .dir = part->job->gather ? GPU_COPY_GATHER : GPU_COPY_SCATTER,
        /* AUTO: the kernel for pieces below GPU_COPY_CE_MIN_PIECE, the copy engines above. */
        .engine = gpu->kernels ? GPU_COPY_AUTO : GPU_COPY_BATCH,
        .pieces = part->pieces,
        .npieces = part->npieces,
        .done_cb = part->notify ? gpu_on_done : NULL,
        .done_arg = part,
        .sum = part->sum_blocks > 0 ? &sum : NULL,
    };
    int rc = gpu_copy_submit(copier, &req, &part->op);
    if (rc == GPU_COPY_E_BUSY)
        return B10_ERR_BUSY;
    if (rc != GPU_COPY_OK) {
        log_err("gpu: submitting a copy of %zu pieces on device %d: %s: %s", part->npieces,
                part->device, gpu_copy_strstatus(rc), gpu_copy_last_error(copier));
        /* The parts before it may have waited for its callback: swept from a timer now. */
        gpu_orphans(gpu);
        return B10_ERR_INTERNAL;
    }
    list_insert_tail(&gpu->fifo[part->device], &part->fifo_node);
    gpu->dev_inflight[part->device]++;
    gpu->inflight++;
    gpu->callbacks += part->notify;
    part->submitted_ns = uv_hrtime();
    if (gpu->d->cfg.progress_spin && !cpuload_oversubscribed()) {
        list_insert_tail(&gpu->polling, &part->poll_node);
        part->polled = true;
        gpu_poll_update(gpu);
    }
    return B10_OK;
}

/* Whether an earlier part for device waits in pending: a new one queues behind it. */
static bool gpu_device_waits(struct gpu *gpu, int device)
{
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &gpu->pending)
        if (list_entry(pos, struct gpu_part, node)->device == device)
            return true;
    return false;
}

static void gpu_submit_pending(struct gpu *gpu)
{
    struct list *pos, *tmp;
    /*
     * Devices found full in this pass: their later parts are not tried (a try checks
     * every piece before it finds no slot, and a chunk of 4 KiB pieces is 8 parts).
     * Past 64 devices each part is tried.
     */
    uint64_t full = 0;
    list_for_each_safe(pos, tmp, &gpu->pending) {
        struct gpu_part *part = list_entry(pos, struct gpu_part, node);
        uint64_t bit = part->device < 64 ? UINT64_C(1) << part->device : 0;
        if ((full & bit) != 0)
            continue;
        /* Off the list first: once submitted, a CUDA thread may link it into done. */
        list_remove(&part->node);
        b10_status_t st = gpu_submit(gpu, part);
        if (st == B10_ERR_BUSY) {
            list_insert_tail(tmp, &part->node);     /* back in its place, before tmp */
            full |= bit;
            continue;   /* this device is still full; another may not be */
        }
        if (st != B10_OK) {
            gpu->d->gpu_hooks->part_done(part->job, st);
            free(part->pieces);
            free(part);
        }
    }
}

static void gpu_queue(struct gpu *gpu, struct gpu_part *part)
{
    /* Behind its own device's waiters only: another device's backlog does not hold it. */
    b10_status_t st = gpu_device_waits(gpu, part->device) ? B10_ERR_BUSY : gpu_submit(gpu, part);
    if (st == B10_ERR_BUSY) {
        list_insert_tail(&gpu->pending, &part->node);   /* in order behind earlier waiters */
        return;
    }
    if (st != B10_OK) {
        gpu->d->gpu_hooks->part_done(part->job, st);
        free(part->pieces);
        free(part);
    }
}

bool gpu_one_submission(const struct b10d *d, const struct copy_job *job)
{
    if (!gpu_present(d) || job->host_segs > 0 || job->nsegs == 0)
        return false;
    size_t bytes = 0;
    for (uint32_t i = 0; i < job->nsegs; i++) {
        if (job->segs[i].device != job->segs[0].device ||
            gpu_part_full(d->gpu, i, bytes, job->segs[i].len))
            return false;
        bytes += job->segs[i].len;
    }
    return true;
}

/*
 * A job that is one GPU submission has its sums computed in it: a
 * gather's right after its copy, a checked scatter's right before, gating
 * it. No second trip to the GPU and back.
 */
static uint32_t gpu_chained_sums(struct b10d *d, struct copy_job *job)
{
    if (job->gpu_gate_blocks > 0)
        return job->gpu_gate_blocks;    /* copy_check_gated made sure it is one submission */
    bool make = job->sum_mode == COPY_SUM_MAKE && !job->sum_done;
    return make && gpu_one_submission(d, job) ? d->gpu_hooks->sum_blocks(job) : 0;
}

void gpu_copy_job(struct b10d *d, struct copy_job *job)
{
    struct gpu *gpu = d->gpu;
    uint32_t chained = gpu_chained_sums(d, job);

    /* One pass per device the job touches (a rank's regions rarely span more than one). */
    for (int device = 0; device < (gpu != NULL ? gpu->ndevices : 0); device++) {
        struct gpu_part *part = NULL;
        size_t part_bytes = 0;
        /* Piece tables sized to the job: a chunk's few hundred pieces need KiB, not 1.5 MiB. */
        uint32_t left = 0, most = gpu_part_pieces(gpu);
        if (gpu->ndevices == 1)
            left = job->nsegs - job->host_segs;
        else
            for (uint32_t i = 0; i < job->nsegs; i++)
                left += job->segs[i].device == device;
        for (uint32_t i = 0; i < job->nsegs; i++) {
            const struct copy_seg *seg = &job->segs[i];
            if (seg->device != device)
                continue;
            if (part == NULL || gpu_part_full(gpu, (uint32_t)part->npieces, part_bytes, seg->len)) {
                /* The next part first: without it, the full one is the last and is called back. */
                struct gpu_part *next = calloc(1, sizeof(*next));
                gpu_copy_piece_t *pieces = malloc((left < most ? left : most) * sizeof(*pieces));
                if (next == NULL || pieces == NULL) {
                    free(next);
                    free(pieces);
                    if (part != NULL) {
                        part->last = true;
                        gpu_queue(gpu, part);
                    }
                    job->parts++;
                    d->gpu_hooks->part_done(job, B10_ERR_NO_MEMORY);
                    gpu_orphans(gpu);
                    return;
                }
                if (part != NULL)
                    gpu_queue(gpu, part);
                part = next;
                part_bytes = 0;
                *part = (struct gpu_part){ .gpu = gpu, .job = job, .device = device,
                                           .pieces = pieces, .sum_blocks = chained };
                list_init(&part->node);
                job->parts++;
            }
            part->pieces[part->npieces++] = job->gather
                ? (gpu_copy_piece_t){ (void *)seg->src, seg->dst, seg->len }
                : (gpu_copy_piece_t){ seg->dst, (void *)seg->src, seg->len };
            left--;
            part_bytes += seg->len;
        }
        if (part != NULL) {
            part->last = true;
            gpu_queue(gpu, part);
        }
    }
    /* Segments of a device this daemon does not have cannot exist: regions are opened on one. */
    if (gpu != NULL)
        gpu_orphans(gpu);
}

void gpu_sum_job(struct b10d *d, struct copy_job *job, uint32_t nblocks)
{
    struct gpu *gpu = d->gpu;
    int device = -1;
    for (uint32_t i = 0; i < job->nsegs && device < 0; i++)
        device = job->segs[i].device;
    struct gpu_part *part = device >= 0 && gpu != NULL ? calloc(1, sizeof(*part)) : NULL;
    job->parts++;
    if (part == NULL) {
        d->gpu_hooks->part_done(job, device < 0 ? B10_ERR_INTERNAL : B10_ERR_NO_MEMORY);
        return;
    }
    *part = (struct gpu_part){ .gpu = gpu, .job = job, .device = device, .sum_blocks = nblocks,
                               .last = true };
    list_init(&part->node);
    gpu_queue(gpu, part);
}

b10_status_t gpu_start(struct b10d *d, const struct gpu_hooks *hooks)
{
    const char *why = "";
    struct gpu *gpu = calloc(1, sizeof(*gpu));

    d->gpu_hooks = hooks;
    if (gpu == NULL)
        return B10_ERR_NO_MEMORY;
    gpu->d = d;
    list_init(&gpu->done);
    list_init(&gpu->pending);
    list_init(&gpu->polling);
    gpu->ndevices = gpu_copy_device_count(&why);
    if (gpu->ndevices == 0) {
        log_info("gpu: no CUDA device (%s): DRAM regions only", why);
        free(gpu);
        return B10_OK;
    }
    /* The kernels read and write staging views by their host pointers (registered memory). */
    for (int dev = 0; d->cfg.gpu_copy == CONFIG_GPU_COPY_KERNEL && dev < gpu->ndevices; dev++)
        if (!gpu_copy_device_host_pointers(dev)) {
            log_err("gpu: device %d cannot use host pointers of registered memory "
                    "(cudaDevAttrCanUseHostPointerForRegisteredMem): --gpu-copy kernel is not "
                    "possible here; use engine", dev);
            free(gpu);
            return B10_ERR_UNSUPPORTED;
        }
    gpu->copiers = calloc((size_t)gpu->ndevices, sizeof(*gpu->copiers));
    gpu->fifo = calloc((size_t)gpu->ndevices, sizeof(*gpu->fifo));
    gpu->dev_inflight = calloc((size_t)gpu->ndevices, sizeof(*gpu->dev_inflight));
    if (gpu->copiers == NULL || gpu->fifo == NULL || gpu->dev_inflight == NULL) {
        free(gpu->copiers);
        free(gpu->fifo);
        free(gpu->dev_inflight);
        free(gpu);
        return B10_ERR_NO_MEMORY;
    }
    for (int dev = 0; dev < gpu->ndevices; dev++)
        list_init(&gpu->fifo[dev]);
    pthread_mutex_init(&gpu->lock, NULL);
    uv_async_init(d->loop, &gpu->async, gpu_on_async);
    gpu->async.data = gpu;
    uv_idle_init(d->loop, &gpu->idle);
    uv_timer_init(d->loop, &gpu->orphan_timer);
    gpu->orphan_timer.data = gpu;
    gpu->idle.data = gpu;
    d->gpu = gpu;
    /*
     * auto is the copy engines, with MPS as without: measured on the H200, a model's
     * decode step beside the kernels took 1.9-2.4 x without MPS and, at p99, 1.4 x
     * with it, beside the copy engines 1.0 x and 1.04 x (README "GPU"). Whether the
     * devices share contexts through MPS is logged, for the operator who weighs
     * --gpu-copy kernel.
     */
    int mps = 0;
    for (int dev = 0; dev < gpu->ndevices; dev++)
        mps += gpu_copy_device_mps(dev);
    enum config_gpu_copy mode = d->cfg.gpu_copy;
    gpu->kernels = mode == CONFIG_GPU_COPY_KERNEL;

    /*
     * No copier and no pinned staging yet: either makes a CUDA context, which holds
     * ~500 MiB of the GPU's memory (an empty one measured 518 MiB on the H200), and a
     * GPU where no rank of this node registered memory should lose none to the daemon.
     * A device's context comes with its first VRAM registration (cudaIpcOpenMemHandle,
     * off the loop); its copier, a stream and events then, at its first copy.
     */
    log_info("gpu: %d CUDA device%s (%d under MPS); a device's context at its first VRAM "
             "registration, staging pinned at its first copy there; copies by %s "
             "(--gpu-copy %s)", gpu->ndevices, gpu->ndevices == 1 ? "" : "s", mps,
             gpu->kernels ? "SM kernels below 1 MiB pieces and the copy engines above, chunk sums "
                            "by a kernel"
                          : "the copy engines alone, chunk sums by the CPU",
             config_gpu_copy_name(mode));
    return B10_OK;
}

static void gpu_on_closed(uv_handle_t *handle)
{
    struct gpu *gpu = handle->data;
    if (--gpu->closing > 0)
        return;
    pthread_mutex_destroy(&gpu->lock);
    free(gpu->copiers);
    free(gpu->fifo);
    free(gpu->dev_inflight);
    free(gpu);
}


void gpu_stop(struct b10d *d)
{
    struct gpu *gpu = d->gpu;

    if (gpu == NULL)
        return;
    /* Copies in flight finish first: they hold regions and views. Bounded: 10 s. */
    for (int i = 0; i < 10000 && (gpu->inflight > 0 || gpu->callbacks > 0 ||
                                  !list_empty(&gpu->pending)); i++) {
        uv_run(d->loop, UV_RUN_NOWAIT);
        if (gpu->inflight > 0 || gpu->callbacks > 0)
            uv_sleep(1);
    }
    if (gpu->inflight > 0)
        log_warning("gpu: %u copies still in flight at exit", gpu->inflight);
    for (int dev = 0; dev < gpu->ndevices; dev++)
        gpu_copy_destroy(gpu->copiers[dev]);
    d->gpu = NULL;
    /* Both at once, so that no late completion runs after this; the second close frees gpu. */
    gpu->closing = 3;
    uv_close((uv_handle_t *)&gpu->idle, gpu_on_closed);
    uv_close((uv_handle_t *)&gpu->async, gpu_on_closed);
    uv_close((uv_handle_t *)&gpu->orphan_timer, gpu_on_closed);
}

b10_status_t gpu_host_register(struct b10d *d, int device, void *addr, size_t length)
{
    if (!gpu_present(d) || device < 0 || device >= d->gpu->ndevices)
        return B10_ERR_UNSUPPORTED;
    int rc = gpu_copy_host_register(device, addr, length);
    if (rc != GPU_COPY_OK) {
        log_err("gpu: cudaHostRegister of %zu bytes: %s", length, gpu_copy_strstatus(rc));
        return B10_ERR_NO_MEMORY;
    }
    return B10_OK;
}

void gpu_host_unregister(struct b10d *d, void *addr)
{
    gpu_copy_host_unregister(addr);
}

static b10_status_t vram_open(struct region *r, const struct mem_request *req, char *detail,
                              size_t detail_len)
{
    const char *why = "";
    char err[256] = "";
    void *base;
    size_t holds = 0;
    int device, rc;

    if (gpu_copy_device_count(&why) == 0) {
        snprintf(detail, detail_len, "no usable CUDA device on this node: %s", why);
        return B10_ERR_UNSUPPORTED;
    }
    if (req->pci_bus_id == NULL || req->pci_bus_id[0] == '\0' || strlen(req->pci_bus_id) > 32) {
        snprintf(detail, detail_len, "a VRAM region needs its device's PCI bus id");
        return B10_ERR_INVALID_ARG;
    }
    if (req->alloc_length == 0 || req->addr < req->alloc_base ||
        req->alloc_base + req->alloc_length < req->alloc_base ||
        req->addr + req->length > req->alloc_base + req->alloc_length) {
        snprintf(detail, detail_len, "the region must lie inside one allocation "
                 "(0x%" PRIx64 "+%" PRIu64 ")", req->alloc_base, req->alloc_length);
        return B10_ERR_INVALID_ARG;
    }
    if (gpu_copy_device_by_pci(req->pci_bus_id, &device, err, sizeof(err)) != GPU_COPY_OK) {
        snprintf(detail, detail_len, "no CUDA device at PCI %s on this node: %s", req->pci_bus_id, err);
        return B10_ERR_INVALID_ARG;
    }
    if (req->ipc_handle != NULL && req->ipc_handle_length == GPU_COPY_IPC_HANDLE_BYTES) {
        rc = gpu_copy_map_ipc(device, req->ipc_handle, (gpu_copy_mapping_t **)&r->map, &base,
                              &holds, err, sizeof(err));
    } else if (req->fd >= 0) {
        rc = gpu_copy_map_fd(device, req->fd, req->alloc_length, (gpu_copy_mapping_t **)&r->map,
                             &base, &holds, err, sizeof(err));
    } else {
        snprintf(detail, detail_len, "a VRAM region needs a %d-byte cudaIpcMemHandle or the file "
                 "descriptor of a VMM allocation", GPU_COPY_IPC_HANDLE_BYTES);
        return B10_ERR_INVALID_ARG;
    }
    /*
     * The bounds are the driver's: a region that claims more than the
     * allocation holds would have the kernels copy past it, through other
     * ranks' mappings or into a fault that breaks the context for everyone.
     */
    if (rc == GPU_COPY_OK && holds < req->alloc_length) {
        gpu_copy_unmap(r->map);
        r->map = NULL;
        rc = GPU_COPY_E_RANGE;
    }
    if (rc == GPU_COPY_E_RANGE) {
        log_warning("gpu: refusing a client's VRAM on device %d: it claims an allocation of %" PRIu64
                    " bytes, the driver's holds %zu", device, req->alloc_length, holds);
        snprintf(detail, detail_len, "the registration claims an allocation of %" PRIu64 " bytes at "
                 "0x%" PRIx64 "; the driver's holds %zu", req->alloc_length, req->alloc_base, holds);
        return B10_ERR_INVALID_ARG;
    }
    if (rc != GPU_COPY_OK) {
        log_warning("gpu: opening a client's VRAM on device %d: %s", device, err);
        snprintf(detail, detail_len, "opening the allocation on device %d failed: %s", device, err);
        return rc == GPU_COPY_E_NOMEM ? B10_ERR_NO_MEMORY : B10_ERR_INVALID_ARG;
    }
    r->device = device;
    r->base = (uint8_t *)base + (req->addr - req->alloc_base);
    return B10_OK;
}

static void vram_close(struct region *r)
{
    gpu_copy_unmap(r->map);
}

#else /* !B10_HAVE_CUDA */

bool gpu_present(const struct b10d *d)
{
    return false;
}

bool gpu_one_submission(const struct b10d *d, const struct copy_job *job)
{
    return false;
}

bool gpu_kernels(const struct b10d *d)
{
    return false;
}

b10_status_t gpu_start(struct b10d *d, const struct gpu_hooks *hooks)
{
    d->gpu_hooks = hooks;
    log_info("gpu: this b10d was built without CUDA: DRAM regions only");
    return B10_OK;
}

void gpu_stop(struct b10d *d)
{
}

b10_status_t gpu_host_register(struct b10d *d, int device, void *addr, size_t length)
{
    return B10_ERR_UNSUPPORTED;
}

void gpu_host_unregister(struct b10d *d, void *addr)
{
}

void gpu_copy_job(struct b10d *d, struct copy_job *job)
{
    /* No VRAM region can exist without CUDA: a device segment here is our own bug. */
    log_err("gpu: a copy touches VRAM in a daemon built without CUDA");
    job->parts++;
    d->gpu_hooks->part_done(job, B10_ERR_INTERNAL);
}

void gpu_sum_job(struct b10d *d, struct copy_job *job, uint32_t nblocks)
{
    log_err("gpu: a checksum on the GPU in a daemon built without CUDA");
    job->parts++;
    d->gpu_hooks->part_done(job, B10_ERR_INTERNAL);
}

static b10_status_t vram_open(struct region *r, const struct mem_request *req, char *detail,
                              size_t detail_len)
{
    snprintf(detail, detail_len, "this b10d was built without CUDA: it cannot map VRAM");
    return B10_ERR_UNSUPPORTED;
}

static void vram_close(struct region *r)
{
}

#endif

const struct mem_backend vram_backend = {
    .name = "vram",
    .open = vram_open,
    .close = vram_close,
};
