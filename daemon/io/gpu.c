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
#include "pace.h"

#ifdef B10_HAVE_CUDA

#include "gpu-copy.h"

_Static_assert(GPU_COPY_SUM_BLOCK == CHECKSUM_BLOCK, "the GPU sums checksum.h's blocks");

/*
 * Most pieces one submission carries; a chunk with more is cut into several.
 * The kernels take a chunk in one submission: one launch, its sums chained to it.
 * The copy engines take one cudaMemcpyBatchAsync call's worth, batched or one
 * cudaMemcpyAsync a piece (pace.h), each submission ending in its event and
 * host callback. Measured on the H200 without MPS (H200 runs 28-29,
 * tests/bench/notes/2026-12-01-h200-runs.md): a co-resident model's step queued behind
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
/* A grid job is one launch, whose table (gpu-copy.h) holds its rows and both sides' bases. */
_Static_assert(COPY_GRID_ROWS + 2 * COPY_GRID_BASES <= 3 * GPU_MAX_PIECES &&
               2 * COPY_GRID_BASES <= GPU_MAX_PIECES, "a grid job fits one launch's table");
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
 * GB/s where one submission a chunk moved 15 (H200 run 40). A stream runs
 * its submissions in order, so the callback of a later one says the earlier ones
 * are over too: each feed (a stream) keeps its parts in order (gpu_feed.fifo), and
 * a callback, or the loop's polling, ends every part at the head whose event is
 * complete. A part is called back where a later one may not come: the last of its
 * job on its feed, and the one that takes a feed's last slot (the parts behind it
 * wait for a slot that only its callback frees).
 */
struct gpu_part {
    struct list node;           /* gpu.pending, then its feed's queue; gpu.done once called back */
    struct list poll_node;      /* gpu.polling while the loop polls it */
    struct list fifo_node;      /* its feed's fifo from hand-over until finished */
    struct gpu *gpu;
    struct gpu_feed *feed;      /* every part of a job on a device goes to one */
    struct copy_job *job;
    int device;
    gpu_copy_piece_t *pieces;
    size_t npieces;
    gpu_copy_grid_t grid;       /* a grid job's part (count > 0): its rows, no pieces */
    gpu_copy_op_t *op;          /* the feed thread's: set before CUDA may call back */
    gpu_copy_req_t req;         /* what the feed thread submits */
    gpu_copy_sum_t sum;
    uint64_t seq;               /* its place in its feed: with CUDA once fed > seq */
    int submit_rc;              /* GPU_COPY_OK, or why CUDA refused it (set by the feed) */
    uint32_t sum_blocks;        /* > 0: the submission also sums the job's view */
    uint64_t submitted_ns;
    bool polled;                /* in gpu.polling */
    bool finished;              /* ended before its callback: only the callback is still due */
    bool last;                  /* its job's last part on its feed */
    bool flat_out;              /* its job's: batched under --gpu-copy-calls auto */
    bool notify;                /* submitted with a callback, which frees it */
    bool overdue;               /* gpu_on_watch logged it */
};

/*
 * A copy stream of a device, and the thread that submits to it.
 *
 * The loop does not call CUDA to submit: it hands each part to a feed, whose
 * thread does, in the order handed over (so the stream runs them in fifo
 * order). Submitting is most of the CPU work of a copy through the copy
 * engines, the driver's time a piece: a WRITE of 4 KiB spans into a GPU kept
 * the loop thread 80-90 % busy, most of it in the driver, where the same WRITE
 * into host memory left it at 10 %. On a feed thread it took that thread
 * 84-88 % and the loop 10-14 % (H200 run 43), and one thread's
 * submissions were the bound: b10-gpubench's hammer moved 4.0-4.8 GB/s of 4 KiB
 * pieces on one thread, 12.0 on two processes at once and 18.9 on four. So a
 * device may have --gpu-feeds of them with the copy engines (the kernels' few,
 * large submissions need one), each job going to its device's least busy:
 * with two (the default), a 4 KiB WRITE moved 0.90-1.00 of the wire's rate,
 * against 0.75-0.86 with one, and four added nothing. A job's parts stay on
 * one stream, but jobs on two streams end in either order.
 *
 * The thread touches a part only until it is submitted: from then on CUDA may
 * call it back and the loop free it. A part CUDA refused it hands back through
 * gpu.done, as a callback would.
 */
struct gpu_feed {
    struct gpu *gpu;
    int device;
    unsigned index;             /* in gpu.feeds: its bit in the passes' masks (past 64, none) */
    gpu_copier_t *copier;       /* its stream: made at its first part, with the thread */
    unsigned slots;             /* the copier's: parts in fifo at most */
    uint32_t inflight;          /* parts in fifo */
    uint32_t waiting;           /* its parts in gpu.pending */
    struct list fifo;           /* handed-over parts, oldest first, until finished */
    uint64_t handed;            /* parts handed over (the loop's) */
    uint64_t fed;               /* parts submitted or refused (__atomic: the thread's) */
    bool running;               /* its thread was started (the loop's) */
    pthread_t thread;
    pthread_mutex_t lock;       /* guards queue, holding, stop */
    pthread_cond_t wake;        /* parts queued, or stop */
    pthread_cond_t idle;        /* the queue empty, no part in hand */
    struct list queue;
    bool holding;               /* a part taken off the queue and not yet submitted */
    struct pace pace;           /* the thread's: single calls or batches (--gpu-copy-calls) */
    bool stop;
    bool left;                  /* gpu_stop left it behind: it submits nothing more */
};

struct gpu {
    struct b10d *d;
    int ndevices;
    unsigned per_device;        /* feeds a device has */
    unsigned nfeeds;
    struct gpu_feed *feeds;     /* device n's: [n * per_device, (n + 1) * per_device) */
    uv_async_t async;
    pthread_mutex_t lock;       /* guards done: the only gpu state other threads touch */
    struct list done;
    struct list pending;        /* parts waiting for a free slot of their feed */
    struct list polling;        /* parts submitted within GPU_POLL_NS, polled each loop turn */
    uv_timer_t orphan_timer;    /* sweeps while a feed's newest part has no callback */
    bool orphan_on;
    uv_timer_t watch_timer;     /* each second while parts are in flight: gpu_on_watch */
    bool watch_on;
    uv_idle_t idle;             /* runs while polling is not empty */
    bool idle_on;
    bool stopped;               /* gpu_stop ended the feeds: nothing more is handed over */
    bool left;                  /* under lock: gpu_stop left it behind (gpu_left_behind) */
    struct gpu *left_next;      /* the one left behind before it */
    uint32_t inflight;          /* handed over, not yet completed */
    uint32_t callbacks;         /* handed over, callback (or refusal) not yet handled */
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

/*
 * At exit, gpu_stop gives copies in flight GPU_STOP_COPIES_MS to end and then
 * the feed threads GPU_STOP_FEED_MS in all to come back from the driver. A
 * copy still running (or its callback not yet run), or a thread still inside
 * the driver's copy calls, past those is a wedged GPU: destroying its streams
 * would wait on it for ever, and the service manager would kill the daemon
 * mid-shutdown. So gpu_stop leaves the streams, the threads and the state
 * they may still touch as they are (never freed, reachable from here) and
 * says so: b10d then exits at once.
 */
#define GPU_STOP_COPIES_MS 10000
#define GPU_STOP_FEED_MS 2000
static struct gpu *gpu_left_behind;

/* On a CUDA driver thread, or a feed's for a refused part: hand the part to the loop. */
static void gpu_on_done(void *arg)
{
    struct gpu_part *part = arg;
    struct gpu *gpu = part->gpu;

    pthread_mutex_lock(&gpu->lock);
    list_insert_tail(&gpu->done, &part->node);
    /* Left behind: the loop's handle is closed, and the part stays on the list. Under the
     * lock, so that gpu_stop cannot leave it between the look and the send. */
    if (!gpu->left)
        uv_async_send(&gpu->async);
    pthread_mutex_unlock(&gpu->lock);
}

/*
 * How the copy engines get a part's pieces: one cudaMemcpyAsync each, or
 * batched (pace.h says why both); true when batched. On the feed's thread,
 * which owns the part until it is submitted.
 *
 * A job no wire paces (a local transfer through staging, down and up on the
 * copy engines) is batched: its rate is the engines', and single calls
 * lengthen each view's round trip, which no backlog shows. Measured on the
 * H200 with single calls whenever the feed's load allowed, a local 32 KiB
 * WRITE beside a model moved 6.4 GB/s, against 11.7 alone (H200 run 50).
 */
static bool gpu_feed_calls(struct gpu_feed *feed, struct gpu_part *part)
{
    if (part->req.engine != GPU_COPY_BATCH)
        return false;   /* the kernels' parts */
    bool batch;
    switch (feed->gpu->d->cfg.gpu_copy_calls) {
    case CONFIG_GPU_CALLS_SINGLE: batch = false; break;
    case CONFIG_GPU_CALLS_BATCH: batch = true; break;
    default: batch = part->flat_out || pace_batch(&feed->pace); break;
    }
    if (!batch)
        part->req.engine = GPU_COPY_MEMCPY;
    return batch;
}

static void *gpu_feed_main(void *arg)
{
    struct gpu_feed *feed = arg;

    pthread_mutex_lock(&feed->lock);
    for (;;) {
        while (list_empty(&feed->queue) && !feed->stop) {
            pthread_cond_broadcast(&feed->idle);
            pthread_cond_wait(&feed->wake, &feed->lock);
        }
        /* Left behind by gpu_stop, it submits nothing more: what is queued stays queued. */
        if (list_empty(&feed->queue) || feed->left)
            break;
        struct gpu_part *part = list_entry(feed->queue.next, struct gpu_part, node);
        list_remove(&part->node);
        feed->holding = true;
        pthread_mutex_unlock(&feed->lock);

        /* Read before the submission: once it is the driver's, the loop may free the part. */
        bool batched = gpu_feed_calls(feed, part);
        size_t npieces = part->npieces;
        uint64_t t0 = uv_hrtime();
        int rc = gpu_copy_submit(feed->copier, &part->req, &part->op);
        if (rc == GPU_COPY_OK && !feed->gpu->kernels)
            pace_note(&feed->pace, batched, npieces, t0, uv_hrtime());
        /* Refused: nothing was enqueued, so no callback will come and the part is still ours. */
        if (rc != GPU_COPY_OK)
            part->submit_rc = rc;
        __atomic_fetch_add(&feed->fed, 1, __ATOMIC_RELEASE);
        if (rc != GPU_COPY_OK)
            gpu_on_done(part);

        pthread_mutex_lock(&feed->lock);
        feed->holding = false;
    }
    pthread_cond_broadcast(&feed->idle);
    pthread_mutex_unlock(&feed->lock);
    return NULL;
}

/* Whether the feed thread is done with the part: its op (or refusal) can be read. */
static bool gpu_part_fed(const struct gpu_part *part)
{
    return part->seq < __atomic_load_n(&part->feed->fed, __ATOMIC_ACQUIRE);
}

/* Hand the part to its feed's thread, behind the parts before it. */
static void gpu_feed_push(struct gpu_feed *feed, struct gpu_part *part)
{
    part->seq = feed->handed++;
    pthread_mutex_lock(&feed->lock);
    /* The thread waits only on an empty queue. */
    bool wake = list_empty(&feed->queue);
    list_insert_tail(&feed->queue, &part->node);
    if (wake)
        pthread_cond_signal(&feed->wake);
    pthread_mutex_unlock(&feed->lock);
}

void gpu_drain(struct b10d *d)
{
    struct gpu *gpu = d->gpu;
    for (unsigned i = 0; gpu != NULL && i < gpu->nfeeds; i++) {
        struct gpu_feed *feed = &gpu->feeds[i];
        if (!feed->running)
            continue;
        pthread_mutex_lock(&feed->lock);
        while (!list_empty(&feed->queue) || feed->holding)
            pthread_cond_wait(&feed->idle, &feed->lock);
        pthread_mutex_unlock(&feed->lock);
    }
}

/* Ask the feed's thread to end once it has submitted what is queued. */
static void gpu_feed_stop(struct gpu_feed *feed)
{
    if (!feed->running)
        return;
    pthread_mutex_lock(&feed->lock);
    feed->stop = true;
    pthread_cond_signal(&feed->wake);
    pthread_mutex_unlock(&feed->lock);
}

/* Wait for the stopped feed's thread until by (CLOCK_REALTIME); false: it has not ended. */
static bool gpu_feed_join(struct gpu_feed *feed, const struct timespec *by)
{
    if (!feed->running)
        return true;
    int rc = pthread_timedjoin_np(feed->thread, NULL, by);
    if (rc == ETIMEDOUT) {
        /* Should it come back, it submits nothing more and ends on its own. */
        pthread_mutex_lock(&feed->lock);
        feed->left = true;
        pthread_mutex_unlock(&feed->lock);
        pthread_detach(feed->thread);
        return false;
    }
    feed->running = false;
    return true;
}

static void gpu_unpoll(struct gpu_part *part)
{
    if (part->polled) {
        list_remove(&part->poll_node);
        part->polled = false;
    }
}

/* What a part copies, for the logs: pieces, or a grid job's rows. */
static size_t gpu_part_count(const struct gpu_part *part)
{
    return part->grid.count > 0 ? part->grid.count : part->npieces;
}

static const char *gpu_part_units(const struct gpu_part *part)
{
    return part->grid.count > 0 ? "rows of two grids" : "pieces";
}

/* The part's copy ended (rc from its event, or its refusal): the job hears of it, the slot goes back. */
static void gpu_part_finish(struct gpu *gpu, struct gpu_part *part, int rc)
{
    struct gpu_feed *feed = part->feed;
    b10_status_t status = B10_OK;
    if (part->submit_rc != GPU_COPY_OK) {
        log_err("gpu: submitting a copy of %zu %s on device %d: %s: %s", gpu_part_count(part),
                gpu_part_units(part), part->device, gpu_copy_strstatus(rc),
                gpu_copy_last_error(feed->copier));
        status = B10_ERR_INTERNAL;
    } else if (rc != GPU_COPY_OK) {
        log_err("gpu: copy on device %d failed: %s: %s", part->device, gpu_copy_strstatus(rc),
                gpu_copy_last_error(feed->copier));
        status = B10_ERR_INTERNAL;
    }
    /* Fed (its submission or refusal happened before the loop heard of it): req is settled. */
    if (part->submit_rc == GPU_COPY_OK && part->npieces > 0 && part->req.engine == GPU_COPY_BATCH)
        gpu->d->stats.gpu_parts_batched++;
    else if (part->submit_rc == GPU_COPY_OK && part->npieces > 0 &&
             part->req.engine == GPU_COPY_MEMCPY)
        gpu->d->stats.gpu_parts_single++;
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
    feed->inflight--;
    if (part->op != NULL)               /* a refused part holds no slot */
        gpu_copy_op_release(part->op);
    part->op = NULL;
    part->finished = true;
    gpu->inflight--;
    gpu->d->gpu_hooks->part_done(part->job, status);
    part->job = NULL;
    free(part->pieces);
    part->pieces = NULL;
}

/* The part's state: its refusal, or its event's. A part its feed still holds is pending. */
static int gpu_part_poll(struct gpu_part *part)
{
    if (!gpu_part_fed(part))
        return GPU_COPY_PENDING;
    return part->submit_rc != GPU_COPY_OK ? part->submit_rc : gpu_copy_op_poll(part->op);
}

/*
 * End a feed's parts from the oldest while their events are complete: a
 * stream runs them in order. A part without a callback is freed here; one
 * with a callback, or refused (handed back as one), stays for it. Whether any ended.
 */
static bool gpu_sweep(struct gpu *gpu, struct gpu_feed *feed)
{
    bool ended = false;
    while (!list_empty(&feed->fifo)) {
        struct gpu_part *part = list_entry(feed->fifo.next, struct gpu_part, fifo_node);
        int rc = gpu_part_poll(part);
        if (rc == GPU_COPY_PENDING)
            break;
        gpu_part_finish(gpu, part, rc);
        if (!part->notify && part->submit_rc == GPU_COPY_OK)
            free(part);
        ended = true;
    }
    return ended;
}

/* Sweep every feed each millisecond while one has parts no callback will end. */
static void gpu_on_orphan_timer(uv_timer_t *handle)
{
    struct gpu *gpu = handle->data;
    bool ended = false;
    for (unsigned i = 0; i < gpu->nfeeds; i++)
        ended |= gpu_sweep(gpu, &gpu->feeds[i]);
    if (ended)
        gpu_submit_pending(gpu);
    gpu_orphans(gpu);
}

/*
 * Whether a feed's newest part lacks a callback. Not in the daemon's own
 * flow (a job's last part and a full copier's newest have one), but after a
 * job cut short (no memory for its next part) or a submission refused after
 * the parts before it, nothing would end those: a timer sweeps them, for as
 * long as that lasts.
 */
static void gpu_orphans(struct gpu *gpu)
{
    bool orphans = false;
    for (unsigned i = 0; i < gpu->nfeeds && !orphans; i++)
        orphans = !list_empty(&gpu->feeds[i].fifo) &&
                  !list_entry(gpu->feeds[i].fifo.prev, struct gpu_part, fifo_node)->notify;
    if (orphans == gpu->orphan_on)
        return;
    gpu->orphan_on = orphans;
    if (orphans)
        uv_timer_start(&gpu->orphan_timer, gpu_on_orphan_timer, 1, 1);
    else
        uv_timer_stop(&gpu->orphan_timer);
}

/* How long a part may stay in flight before gpu_on_watch says so. */
#define GPU_OVERDUE_NS (5ull * 1000 * 1000 * 1000)
/* A part the watch ends older than this: a completion lost, not one on its way. */
#define GPU_RESCUE_NS (1ull * 1000 * 1000 * 1000)

/*
 * Each second while parts are in flight: sweep every feed, and name the
 * oldest part of each that has been out longer than GPU_OVERDUE_NS, once,
 * with where it stands. A sweep that ends a part here means a completion
 * that reached nobody (a bug: logged); a part that stays is a copy that does
 * not end (a wedged GPU, or a feed thread stuck in the driver).
 */
static void gpu_on_watch(uv_timer_t *handle)
{
    struct gpu *gpu = handle->data;
    uint64_t now = uv_hrtime();
    bool ended = false;
    if (gpu->inflight == 0) {
        uv_timer_stop(&gpu->watch_timer);
        gpu->watch_on = false;
        return;
    }
    for (unsigned i = 0; i < gpu->nfeeds; i++) {
        struct gpu_feed *feed = &gpu->feeds[i];
        if (list_empty(&feed->fifo))
            continue;
        struct gpu_part *head = list_entry(feed->fifo.next, struct gpu_part, fifo_node);
        uint64_t age = now - head->submitted_ns;
        if (gpu_sweep(gpu, feed)) {
            ended = true;
            /* Younger ones may be between their end and the callback that says so. */
            if (age > GPU_RESCUE_NS) {
                gpu->d->stats.gpu_copies_rescued++;
                log_warning("gpu: copies on device %d, stream %u, ended %.1f s after they were "
                            "handed over, by the second's sweep: their completion reached "
                            "nothing", feed->device, i, (double)age / 1e9);
            }
            continue;
        }
        if (age <= GPU_OVERDUE_NS || head->overdue)
            continue;
        head->overdue = true;
        log_warning("gpu: a copy of %zu %s on device %d, stream %u, has run %.1f s: %s "
                    "(%u parts in flight there, %u waiting)", gpu_part_count(head),
                    gpu_part_units(head), feed->device, i,
                    (double)age / 1e9,
                    !gpu_part_fed(head) ? "its submitting thread still holds it"
                    : head->submit_rc != GPU_COPY_OK ? "refused, its news not yet handled"
                    : "submitted, its event not complete", feed->inflight, feed->waiting);
    }
    if (ended)
        gpu_submit_pending(gpu);
    gpu_orphans(gpu);
}

static void gpu_watch(struct gpu *gpu)
{
    if (gpu->watch_on)
        return;
    gpu->watch_on = true;
    uv_timer_start(&gpu->watch_timer, gpu_on_watch, 1000, 1000);
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
            gpu_sweep(gpu, part->feed);
        /*
         * One the loop ended already waited for this callback only, to be freed. One not
         * ended is over all the same: called back (its feed may not have counted it yet),
         * or refused.
         */
        if (!part->finished)
            gpu_part_finish(gpu, part, part->submit_rc != GPU_COPY_OK
                                           ? part->submit_rc : gpu_copy_op_poll(part->op));
        gpu->callbacks -= part->notify;
        free(part);
    }
    gpu_submit_pending(gpu);
    /* A refused part that was to be called back leaves the parts before it without one. */
    gpu_orphans(gpu);
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

/* A feed's bit in a pass's mask: past 64 feeds, none (each part is then tried). */
static uint64_t gpu_feed_bit(const struct gpu_feed *feed)
{
    return feed->index < 64 ? UINT64_C(1) << feed->index : 0;
}

/* Each loop turn while copies are young: their events, without waiting for the callback. */
static void gpu_on_idle(uv_idle_t *handle)
{
    struct gpu *gpu = handle->data;
    uint64_t now = uv_hrtime();
    bool ended = false;
    struct list *pos, *tmp;
    uint64_t sweep = 0;     /* feeds with a part complete; past 64, all of them */
    uint64_t busy = 0;      /* feeds whose oldest polled part is still running */

    list_for_each_safe(pos, tmp, &gpu->polling) {
        struct gpu_part *part = list_entry(pos, struct gpu_part, poll_node);
        uint64_t bit = gpu_feed_bit(part->feed);
        /* A stream runs its parts in order: behind a running one, no event is worth a query. */
        int rc = (busy & bit) != 0 ? GPU_COPY_PENDING : gpu_part_poll(part);
        if (rc == GPU_COPY_PENDING) {
            busy |= bit;
            /* Signed: a part submitted during this pass began after `now`. */
            if ((int64_t)(now - part->submitted_ns) > (int64_t)GPU_POLL_NS ||
                cpuload_oversubscribed())
                gpu_unpoll(part);       /* a callback at or after it ends it */
            continue;
        }
        sweep |= bit != 0 ? bit : UINT64_MAX;
    }
    /* After the walk: ending parts takes them off the polling list. */
    for (unsigned i = 0; sweep != 0 && i < gpu->nfeeds; i++)
        if (i >= 64 || (sweep & UINT64_C(1) << i) != 0)
            ended |= gpu_sweep(gpu, &gpu->feeds[i]);
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
 * (H200 run 38); room for eight moved no more.
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

/*
 * The device's feed with the least work (parts handed over or waiting for a
 * slot), the first of equals: one copy at a time keeps to one stream and one
 * thread, and more at once spread over them. NULL for a device we do not have.
 */
static struct gpu_feed *gpu_pick(struct gpu *gpu, int device)
{
    if (device < 0 || device >= gpu->ndevices)
        return NULL;
    struct gpu_feed *first = &gpu->feeds[(unsigned)device * gpu->per_device], *best = first;
    for (unsigned k = 1; k < gpu->per_device; k++) {
        struct gpu_feed *f = first + k;
        if (f->inflight + f->waiting < best->inflight + best->waiting)
            best = f;
    }
    return best;
}

/* The feed's copier and thread, made at its first part (not at start: a copier makes a context). */
static bool gpu_feed_ready(struct gpu *gpu, struct gpu_feed *feed)
{
    if (gpu->stopped)
        return false;
    if (feed->copier != NULL)
        return true;
    unsigned slots = gpu_slots(gpu);
    gpu_copy_params_t params = {
        .field_mask = GPU_COPY_PARAM_DEVICE | GPU_COPY_PARAM_MAX_CTAS |
                      GPU_COPY_PARAM_MAX_PIECES | GPU_COPY_PARAM_MAX_INFLIGHT |
                      GPU_COPY_PARAM_MAX_SUM_BLOCKS | GPU_COPY_PARAM_KERNELS,
        .device = feed->device,
        .kernels = gpu->kernels,
        .max_ctas = gpu->d->cfg.gpu_max_ctas,
        .max_pieces = GPU_MAX_PIECES,
        .max_inflight = slots,
        .max_sum_blocks = gpu->d->cfg.view_bytes / CHECKSUM_BLOCK + 1,
    };
    /* Tried again at the next part after a failure. */
    int rc = gpu_copy_create(&params, &feed->copier);
    if (rc != GPU_COPY_OK) {
        log_err("gpu: no copier for device %d: %s", feed->device, gpu_copy_strstatus(rc));
        feed->copier = NULL;
        return false;
    }
    feed->slots = slots;
    rc = pthread_create(&feed->thread, NULL, gpu_feed_main, feed);
    if (rc != 0) {
        log_err("gpu: no submitting thread for device %d: %s", feed->device, strerror(rc));
        gpu_copy_destroy(feed->copier);
        feed->copier = NULL;
        return false;
    }
    char name[16];
    snprintf(name, sizeof(name), "b10d-gpu%u", feed->index % 1000);
    pthread_setname_np(feed->thread, name);
    feed->running = true;
    log_debug("gpu: copy stream %u of device %d, %u slots, at most %u CTAs a copy",
              feed->index - (unsigned)feed->device * gpu->per_device, feed->device, slots,
              gpu->d->cfg.gpu_max_ctas);
    return true;
}

/*
 * Hand a part over: B10_OK, B10_ERR_BUSY when every slot of its feed is
 * taken (it waits in pending), B10_ERR_INTERNAL without a copier (logged).
 * CUDA's refusal comes later, through gpu.done.
 */
static b10_status_t gpu_submit(struct gpu *gpu, struct gpu_part *part)
{
    struct gpu_feed *feed = part->feed;
    if (!gpu_feed_ready(gpu, feed))
        return B10_ERR_INTERNAL;
    if (feed->inflight >= feed->slots)
        return B10_ERR_BUSY;
    /* A checked scatter: the trailer's table gates the copy (copy_check_gated). */
    part->sum = (gpu_copy_sum_t){ .bytes = part->job->view, .nblocks = part->sum_blocks,
                                  .seed = part->job->seed,
                                  .expect = part->job->gpu_gate_blocks > 0 && part->npieces > 0
                                                ? part->job->table : NULL };
    /* Called back where no later part of this feed may come to say it is over. */
    part->notify = part->last || feed->inflight + 1 >= feed->slots;
    part->req = (gpu_copy_req_t){
        .dir = part->job->gather ? GPU_COPY_GATHER : GPU_COPY_SCATTER,
        /* AUTO: the kernel for pieces below GPU_COPY_CE_MIN_PIECE, the copy engines above. */
        .engine = gpu->kernels ? GPU_COPY_AUTO : GPU_COPY_BATCH,
        .pieces = part->pieces,
        .npieces = part->npieces,
        .done_cb = part->notify ? gpu_on_done : NULL,
        .done_arg = part,
        .sum = part->sum_blocks > 0 ? &part->sum : NULL,
        /* Only the kernel takes rows of grids: without kernels no grid job is made. */
        .grid = part->grid.count > 0 ? &part->grid : NULL,
    };
    part->op = NULL;
    part->submit_rc = GPU_COPY_OK;
    list_insert_tail(&feed->fifo, &part->fifo_node);
    feed->inflight++;
    gpu->inflight++;
    gpu->callbacks += part->notify;
    part->submitted_ns = uv_hrtime();
    gpu_watch(gpu);
    if (gpu->d->cfg.progress_spin && !cpuload_oversubscribed()) {
        list_insert_tail(&gpu->polling, &part->poll_node);
        part->polled = true;
        gpu_poll_update(gpu);
    }
    gpu_feed_push(feed, part);
    return B10_OK;
}

/* A part that could not be handed over: its job hears why. */
static void gpu_part_drop(struct gpu *gpu, struct gpu_part *part, b10_status_t st)
{
    gpu->d->gpu_hooks->part_done(part->job, st);
    free(part->pieces);
    free(part);
}

static void gpu_submit_pending(struct gpu *gpu)
{
    struct list *pos, *tmp;
    /*
     * Feeds found full in this pass: their later parts are not tried (a chunk of
     * 4 KiB pieces is 8 parts). Past 64 feeds each part is tried.
     */
    uint64_t full = 0;
    list_for_each_safe(pos, tmp, &gpu->pending) {
        struct gpu_part *part = list_entry(pos, struct gpu_part, node);
        uint64_t bit = gpu_feed_bit(part->feed);
        if ((full & bit) != 0)
            continue;
        /* Off the list first: once handed over, a CUDA thread may link it into done. */
        list_remove(&part->node);
        b10_status_t st = gpu_submit(gpu, part);
        if (st == B10_ERR_BUSY) {
            list_insert_tail(tmp, &part->node);     /* back in its place, before tmp */
            full |= bit;
            continue;   /* this feed is still full; another may not be */
        }
        part->feed->waiting--;
        if (st != B10_OK)
            gpu_part_drop(gpu, part, st);
    }
}

static void gpu_queue(struct gpu *gpu, struct gpu_part *part)
{
    /* Behind its own feed's waiters only: another's backlog does not hold it. */
    b10_status_t st = part->feed->waiting > 0 ? B10_ERR_BUSY : gpu_submit(gpu, part);
    if (st == B10_ERR_BUSY) {
        list_insert_tail(&gpu->pending, &part->node);   /* in order behind earlier waiters */
        part->feed->waiting++;
        return;
    }
    if (st != B10_OK)
        gpu_part_drop(gpu, part, st);
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

/*
 * A grid job is one part: one launch of the grid kernel, which the rows'
 * indices and the bases are the whole table of (the caller sizes its jobs to
 * the copier's bound, gpu-copy.h).
 */
static void gpu_grid_job(struct b10d *d, struct copy_job *job)
{
    struct gpu *gpu = d->gpu;
    const struct copy_grid *g = job->grid;
    struct gpu_part *part = NULL;

    job->parts++;
    /* copy_direct_ok makes grid jobs only where the kernels may run: else our own bug. */
    if (gpu == NULL || !gpu->kernels || g->device < 0 || g->device >= gpu->ndevices) {
        log_err("gpu: a grid copy on device %d, which this daemon's kernels may not copy on",
                g->device);
        d->gpu_hooks->part_done(job, B10_ERR_INTERNAL);
        return;
    }
    if ((part = calloc(1, sizeof(*part))) == NULL) {
        d->gpu_hooks->part_done(job, B10_ERR_NO_MEMORY);
        return;
    }
    *part = (struct gpu_part){
        .gpu = gpu, .feed = gpu_pick(gpu, g->device), .job = job, .device = g->device,
        .last = true,
        .grid = {
            .src = { g->src_bases, g->src_nbases, g->src_per_base, g->src_stride },
            .dst = { g->dst_bases, g->dst_nbases, g->dst_per_base, g->dst_stride },
            .length = g->length,
            .pairs = g->pairs,
            .count = g->count,
        },
    };
    list_init(&part->node);
    gpu_queue(gpu, part);
    gpu_orphans(gpu);
}

void gpu_copy_job(struct b10d *d, struct copy_job *job)
{
    struct gpu *gpu = d->gpu;
    if (job->grid != NULL) {
        gpu_grid_job(d, job);
        return;
    }
    uint32_t chained = gpu_chained_sums(d, job);

    /* One pass per device the job touches (a rank's regions rarely span more than one). */
    for (int device = 0; device < (gpu != NULL ? gpu->ndevices : 0); device++) {
        struct gpu_part *part = NULL;
        struct gpu_feed *feed = NULL;   /* picked at the device's first piece */
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
                if (feed == NULL)
                    feed = gpu_pick(gpu, device);
                part = next;
                part_bytes = 0;
                *part = (struct gpu_part){ .gpu = gpu, .feed = feed, .job = job, .device = device,
                                           .pieces = pieces, .sum_blocks = chained,
                                           .flat_out = job->flat_out };
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
    struct gpu_feed *feed = gpu != NULL ? gpu_pick(gpu, device) : NULL;
    struct gpu_part *part = feed != NULL ? calloc(1, sizeof(*part)) : NULL;
    job->parts++;
    if (part == NULL) {
        d->gpu_hooks->part_done(job, feed == NULL ? B10_ERR_INTERNAL : B10_ERR_NO_MEMORY);
        return;
    }
    *part = (struct gpu_part){ .gpu = gpu, .feed = feed, .job = job, .device = device,
                               .sum_blocks = nblocks, .last = true };
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
    /*
     * auto is the copy engines, with MPS as without: measured on the H200, a model's
     * decode step beside the kernels took 1.9-2.4 x without MPS and, at p99, 1.4 x
     * with it, beside the copy engines 1.0 x and 1.04 x (tests/bench/README.md, "A
     * model's GPU"). Whether the devices share contexts through MPS is logged, for the
     * operator who weighs --gpu-copy kernel.
     */
    enum config_gpu_copy mode = d->cfg.gpu_copy;
    gpu->kernels = mode == CONFIG_GPU_COPY_KERNEL;
    /* The kernels' submissions are few and large: one stream a device takes them. */
    gpu->per_device = gpu->kernels || d->cfg.gpu_feeds < 1 ? 1 : d->cfg.gpu_feeds;
    gpu->nfeeds = (unsigned)gpu->ndevices * gpu->per_device;
    gpu->feeds = calloc(gpu->nfeeds, sizeof(*gpu->feeds));
    if (gpu->feeds == NULL) {
        free(gpu);
        return B10_ERR_NO_MEMORY;
    }
    for (unsigned i = 0; i < gpu->nfeeds; i++) {
        struct gpu_feed *feed = &gpu->feeds[i];
        feed->gpu = gpu;
        feed->index = i;
        feed->device = (int)(i / gpu->per_device);
        list_init(&feed->fifo);
        list_init(&feed->queue);
        pace_init(&feed->pace);
        pthread_mutex_init(&feed->lock, NULL);
        pthread_cond_init(&feed->wake, NULL);
        pthread_cond_init(&feed->idle, NULL);
    }
    pthread_mutex_init(&gpu->lock, NULL);
    uv_async_init(d->loop, &gpu->async, gpu_on_async);
    gpu->async.data = gpu;
    uv_idle_init(d->loop, &gpu->idle);
    uv_timer_init(d->loop, &gpu->orphan_timer);
    gpu->orphan_timer.data = gpu;
    uv_timer_init(d->loop, &gpu->watch_timer);
    gpu->watch_timer.data = gpu;
    gpu->idle.data = gpu;
    d->gpu = gpu;
    int mps = 0;
    for (int dev = 0; dev < gpu->ndevices; dev++)
        mps += gpu_copy_device_mps(dev);

    /*
     * No copier and no pinned staging yet: either makes a CUDA context, which holds
     * ~500 MiB of the GPU's memory (an empty one measured 518 MiB on the H200), and a
     * GPU where no rank of this node registered memory should lose none to the daemon.
     * A device's context comes with its first VRAM registration (cudaIpcOpenMemHandle,
     * off the loop); a feed's copier, a stream and events then, at its first copy.
     */
    log_info("gpu: %d CUDA device%s (%d under MPS); a device's context at its first VRAM "
             "registration, staging pinned at its first copy there; copies by %s "
             "(--gpu-copy %s), submitted on %u stream%s a device%s%s", gpu->ndevices,
             gpu->ndevices == 1 ? "" : "s", mps,
             gpu->kernels ? "SM kernels below 1 MiB pieces and the copy engines above, chunk sums "
                            "by a kernel"
                          : "the copy engines alone, chunk sums by the CPU",
             config_gpu_copy_name(mode), gpu->per_device, gpu->per_device == 1 ? "" : "s",
             gpu->kernels ? "" : ", calls ",
             gpu->kernels ? "" : config_gpu_calls_name(d->cfg.gpu_copy_calls));
    return B10_OK;
}

static void gpu_on_closed(uv_handle_t *handle)
{
    struct gpu *gpu = handle->data;
    if (--gpu->closing > 0 || gpu->left)     /* left: kept for its threads, as it is */
        return;
    for (unsigned i = 0; i < gpu->nfeeds; i++) {
        pthread_mutex_destroy(&gpu->feeds[i].lock);
        pthread_cond_destroy(&gpu->feeds[i].wake);
        pthread_cond_destroy(&gpu->feeds[i].idle);
    }
    pthread_mutex_destroy(&gpu->lock);
    free(gpu->feeds);
    free(gpu);
}

bool gpu_stop(struct b10d *d)
{
    struct gpu *gpu = d->gpu;

    if (gpu == NULL)
        return true;
    uint32_t copies_ms = d->test_gpu_stop_ms > 0 ? d->test_gpu_stop_ms : GPU_STOP_COPIES_MS;
    uint32_t feed_ms = d->test_gpu_stop_ms > 0 ? d->test_gpu_stop_ms : GPU_STOP_FEED_MS;
    /* Copies in flight finish first: they hold regions and views. */
    uint64_t until = uv_hrtime() + copies_ms * 1000000ull;
    while ((gpu->inflight > 0 || gpu->callbacks > 0 || !list_empty(&gpu->pending)) &&
           uv_hrtime() < until) {
        uv_run(d->loop, UV_RUN_NOWAIT);
        if (gpu->inflight > 0 || gpu->callbacks > 0)
            uv_sleep(1);
    }
    if (gpu->inflight > 0 || gpu->callbacks > 0)
        log_err("gpu: %u copies still running, %u callbacks not yet run %u ms into shutdown: "
                "a wedged GPU?", gpu->inflight, gpu->callbacks, copies_ms);
    /* Each feed submits what it holds, then ends; nothing is handed over after. */
    for (unsigned i = 0; i < gpu->nfeeds; i++)
        gpu_feed_stop(&gpu->feeds[i]);
    struct timespec by;     /* the wall clock, as pthread_timedjoin_np counts */
    clock_gettime(CLOCK_REALTIME, &by);
    by.tv_sec += feed_ms / 1000;
    by.tv_nsec += (long)(feed_ms % 1000) * 1000000L;
    if (by.tv_nsec >= 1000000000L) {
        by.tv_sec++;
        by.tv_nsec -= 1000000000L;
    }
    unsigned stuck = 0;
    bool left = false;
    for (unsigned i = 0; i < gpu->nfeeds; i++)
        if (!gpu_feed_join(&gpu->feeds[i], &by)) {
            log_err("gpu: device %d's copy stream %u: its thread is still inside the CUDA "
                    "driver %u ms after shutdown asked it to end: a wedged GPU?",
                    gpu->feeds[i].device, i % gpu->per_device, feed_ms);
            stuck++;
        }
    gpu->stopped = true;
    /* What the feeds refused at the last: ended and freed, while their copiers still exist. */
    gpu_on_async(&gpu->async);
    /* A copy still running, or its callback not yet run, would hold its stream's destruction. */
    if (stuck > 0 || gpu->inflight > 0 || gpu->callbacks > 0) {
        /* A copier would wait for its stream for ever: streams, threads and state stay. */
        log_err("gpu: leaving %u copy thread%s and the copy streams as they are",
                stuck, stuck == 1 ? "" : "s");
        pthread_mutex_lock(&gpu->lock);
        gpu->left = true;
        pthread_mutex_unlock(&gpu->lock);
        gpu->left_next = gpu_left_behind;
        gpu_left_behind = gpu;
        left = true;
    } else {
        /* A copier waits for its stream before it is freed: nothing runs on it now. */
        for (unsigned i = 0; i < gpu->nfeeds; i++)
            gpu_copy_destroy(gpu->feeds[i].copier);
    }
    d->gpu = NULL;
    /* All at once, so that no late completion runs after this; the last close frees gpu. */
    gpu->closing = 4;
    uv_close((uv_handle_t *)&gpu->idle, gpu_on_closed);
    uv_close((uv_handle_t *)&gpu->async, gpu_on_closed);
    uv_close((uv_handle_t *)&gpu->orphan_timer, gpu_on_closed);
    uv_close((uv_handle_t *)&gpu->watch_timer, gpu_on_closed);
    return !left;
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

b10_status_t gpu_vram_usable(char *detail, size_t detail_len)
{
    const char *why = "";

    if (gpu_copy_device_count(&why) == 0) {
        snprintf(detail, detail_len, "no usable CUDA device on this node: %s", why);
        return B10_ERR_UNSUPPORTED;
    }
    return B10_OK;
}

b10_status_t gpu_vram_map(const struct mem_request *req, void **map_p, int *device_p,
                          uint8_t **base_p, char *detail, size_t detail_len)
{
    char err[256] = "";
    gpu_copy_mapping_t *map = NULL;
    void *base;
    size_t holds = 0;
    int device, rc;

    if (gpu_copy_device_by_pci(req->pci_bus_id, &device, err, sizeof(err)) != GPU_COPY_OK) {
        snprintf(detail, detail_len, "no CUDA device at PCI %s on this node: %s", req->pci_bus_id, err);
        return B10_ERR_INVALID_ARG;
    }
    if (req->ipc_handle != NULL && req->ipc_handle_length == GPU_COPY_IPC_HANDLE_BYTES) {
        rc = gpu_copy_map_ipc(device, req->ipc_handle, &map, &base, &holds, err, sizeof(err));
    } else if (req->fd >= 0) {
        rc = gpu_copy_map_fd(device, req->fd, req->alloc_length, &map, &base, &holds, err,
                             sizeof(err));
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
        gpu_copy_unmap(map);
        map = NULL;
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
    *map_p = map;
    *device_p = device;
    *base_p = (uint8_t *)base + (req->addr - req->alloc_base);
    return B10_OK;
}

void gpu_vram_unmap(void *map)
{
    gpu_copy_unmap(map);
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

bool gpu_stop(struct b10d *d)
{
    return true;
}

void gpu_drain(struct b10d *d)
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

b10_status_t gpu_vram_usable(char *detail, size_t detail_len)
{
    snprintf(detail, detail_len, "this b10d was built without CUDA: it cannot map VRAM");
    return B10_ERR_UNSUPPORTED;
}

b10_status_t gpu_vram_map(const struct mem_request *req, void **map_p, int *device_p,
                          uint8_t **base_p, char *detail, size_t detail_len)
{
    return gpu_vram_usable(detail, detail_len);
}

void gpu_vram_unmap(void *map)
{
}

#endif
