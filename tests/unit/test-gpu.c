/*
 * test-gpu.c — daemon/io/gpu.c: a copy job's device pieces cut into
 * submissions, submissions that find their copier full waiting in order,
 * and every part's end reaching its job.
 *
 * The CUDA library (cuda/gpu-copy.cu) is the seam, linked with -Wl,--wrap
 * for gpu_copy_*: a fake copier of a few slots per device that records
 * each submission and whose copies the test ends by hand, calling the done
 * callback as a CUDA driver thread would, then running the loop. Submissions
 * come from each device's feed thread: the test reads them once gpu_drain
 * says the feeds hold none. A b10d
 * built without the CUDA backend has no submissions to cut: the test says
 * so and skips.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "b10d.h"
#include "copy.h"
#include "gpu.h"

#ifdef B10_HAVE_CUDA

#include "gpu-copy.h"

/* ---------------------------------------------------------------- the fake copier */

#define FAKE_SLOTS 16       /* gpu.c's GPU_SLOTS: what a copier gets at a view of SMALL_VIEW */
#define SMALL_VIEW (1u << 20)
#define FAKE_OPS 4096

struct gpu_copier {
    int device;
    unsigned slots;         /* max_inflight: BUSY past it, as the real copier */
    unsigned inflight;
};

struct gpu_copy_op {
    struct gpu_copier *copier;
    gpu_copy_done_cb_t *cb;
    void *arg;
    gpu_copy_piece_t *pieces;
    size_t npieces;
    int engine;
    /*
     * A grid request as it reached the driver: NULL when it had none, else
     * grid_req, whose pairs and bases point into copies of the op's own (the
     * caller's arrays are valid during the call only).
     */
    const gpu_copy_grid_t *grid;
    gpu_copy_grid_t grid_req;
    uint32_t *grid_pairs;
    uint64_t *grid_src_bases, *grid_dst_bases;
    pthread_t thread;       /* the one that submitted it */
    bool ended;             /* the test ended it: its callback ran */
    int rc;
};

static struct gpu_copier copiers[16];   /* in the order gpu.c made them */
static unsigned ncopiers;
static struct gpu_copy_op ops[FAKE_OPS];
static size_t nops;                 /* submissions made, in order (by the feed threads) */
static size_t busy_answers;         /* GPU_COPY_E_BUSY answered */
static int fail_submission = -1;    /* the index of a submission to refuse with E_CUDA */
static uint64_t single_piece_ns;    /* what one cudaMemcpyAsync a piece costs the submitter */
static int ndevices = 1;
static pthread_t loop_thread;       /* the test's: no submission may come from it */

/*
 * The stress test's GPU (async_gpu): each copier is a stream whose
 * submissions a thread of the test ends in order, a few microseconds
 * apart, running each one's callback as the driver's thread would before
 * it ends the next of that stream. Its operations are allocated one by one.
 */
#define STREAM_DEPTH 128
struct fake_stream {
    struct gpu_copy_op *q[STREAM_DEPTH];
    unsigned head, tail;
};
static bool async_gpu;
static struct fake_stream streams[16];      /* one a copier, by its index in copiers */
static pthread_mutex_t gpu_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gpu_cv = PTHREAD_COND_INITIALIZER;
static bool gpu_quit;
static size_t loop_submissions;

int __wrap_gpu_copy_device_count(const char **why_p);
int __wrap_gpu_copy_device_mps(int device);
int __wrap_gpu_copy_device_host_pointers(int device);
int __wrap_gpu_copy_create(const gpu_copy_params_t *params, gpu_copier_t **copier_p);
void __wrap_gpu_copy_destroy(gpu_copier_t *copier);
int __wrap_gpu_copy_submit(gpu_copier_t *copier, const gpu_copy_req_t *req, gpu_copy_op_t **op_p);
int __wrap_gpu_copy_op_poll(gpu_copy_op_t *op);
int __wrap_gpu_copy_op_elapsed_ms(gpu_copy_op_t *op, float *ms_p);
const uint64_t *__wrap_gpu_copy_op_sums(gpu_copy_op_t *op);
void __wrap_gpu_copy_op_release(gpu_copy_op_t *op);
const char *__wrap_gpu_copy_last_error(const gpu_copier_t *copier);

int __wrap_gpu_copy_device_count(const char **why_p)
{
    return ndevices;
}

int __wrap_gpu_copy_device_mps(int device)
{
    return 0;
}

int __wrap_gpu_copy_device_host_pointers(int device)
{
    return 1;
}

static unsigned asked_slots;         /* max_inflight of the last copier made */

int __wrap_gpu_copy_create(const gpu_copy_params_t *params, gpu_copier_t **copier_p)
{
    assert_true(params->device >= 0 && params->device < ndevices);
    assert_true(ncopiers < sizeof(copiers) / sizeof(copiers[0]));
    asked_slots = params->max_inflight;
    /* Under the stress test's lock: its GPU thread walks the copiers made. */
    pthread_mutex_lock(&gpu_mu);
    copiers[ncopiers] = (struct gpu_copier){ .device = params->device,
                                             .slots = params->max_inflight };
    *copier_p = &copiers[ncopiers++];
    pthread_mutex_unlock(&gpu_mu);
    return GPU_COPY_OK;
}

static unsigned copiers_destroyed;

void __wrap_gpu_copy_destroy(gpu_copier_t *copier)
{
    copiers_destroyed++;
}

/* The loop's wake-ups: one on a closed handle would be a write into a freed loop's eventfd. */
int __real_uv_async_send(uv_async_t *async);
int __wrap_uv_async_send(uv_async_t *async);
static unsigned sends_on_closed;

int __wrap_uv_async_send(uv_async_t *async)
{
    if (uv_is_closing((uv_handle_t *)async)) {
        __atomic_fetch_add(&sends_on_closed, 1, __ATOMIC_RELAXED);
        return 0;
    }
    return __real_uv_async_send(async);
}

/* A wedged GPU: while wedge is set, a submission stays inside the "driver". */
static pthread_mutex_t wedge_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wedge_cv = PTHREAD_COND_INITIALIZER;
static bool wedge;
static unsigned wedged_in;          /* submissions that found the GPU wedged */

static void wedge_hold(void)
{
    pthread_mutex_lock(&wedge_mu);
    if (wedge) {
        wedged_in++;
        pthread_cond_broadcast(&wedge_cv);
        while (wedge)
            pthread_cond_wait(&wedge_cv, &wedge_mu);
    }
    pthread_mutex_unlock(&wedge_mu);
}

static int async_submit(gpu_copier_t *copier, const gpu_copy_req_t *req, gpu_copy_op_t **op_p)
{
    struct gpu_copy_op *op = calloc(1, sizeof(*op));
    assert_non_null(op);
    *op = (struct gpu_copy_op){ .copier = copier, .cb = req->done_cb, .arg = req->done_arg,
                                .npieces = req->npieces, .engine = req->engine,
                                .thread = pthread_self() };
    /* As the real copier: the caller's before anything can call back. */
    *op_p = op;
    __atomic_fetch_add(&copier->inflight, 1, __ATOMIC_RELEASE);
    struct fake_stream *s = &streams[copier - copiers];
    pthread_mutex_lock(&gpu_mu);
    assert_true(s->tail - s->head < STREAM_DEPTH);
    s->q[s->tail++ % STREAM_DEPTH] = op;
    pthread_cond_signal(&gpu_cv);
    pthread_mutex_unlock(&gpu_mu);
    __atomic_fetch_add(&nops, 1, __ATOMIC_RELAXED);
    return GPU_COPY_OK;
}

/* The stress test's GPU thread: a stream with work, at random; its oldest submission ends. */
static void *fake_gpu_main(void *arg)
{
    unsigned seed = 7;
    pthread_mutex_lock(&gpu_mu);
    for (;;) {
        unsigned busy[16], n = 0;
        for (unsigned i = 0; i < ncopiers; i++)
            if (streams[i].tail != streams[i].head)
                busy[n++] = i;
        if (n == 0) {
            if (gpu_quit)
                break;
            pthread_cond_wait(&gpu_cv, &gpu_mu);
            continue;
        }
        struct fake_stream *s = &streams[busy[rand_r(&seed) % n]];
        struct gpu_copy_op *op = s->q[s->head++ % STREAM_DEPTH];
        pthread_mutex_unlock(&gpu_mu);
        usleep(rand_r(&seed) % 40);
        /* Read before the end is seen: the loop may release and free the op at once. */
        gpu_copy_done_cb_t *cb = op->cb;
        void *cb_arg = op->arg;
        __atomic_store_n(&op->ended, true, __ATOMIC_RELEASE);
        if (cb != NULL)
            cb(cb_arg);
        pthread_mutex_lock(&gpu_mu);
    }
    pthread_mutex_unlock(&gpu_mu);
    return NULL;
}

/* Keeps what a grid request says, its arrays too: they are the caller's during the call only. */
static void record_grid(struct gpu_copy_op *op, const gpu_copy_grid_t *g)
{
    assert_true(g->pairs != NULL && g->src.bases != NULL && g->dst.bases != NULL);
    op->grid_req = *g;
    op->grid_pairs = malloc(2 * g->count * sizeof(*op->grid_pairs));
    op->grid_src_bases = malloc(g->src.nbases * sizeof(*op->grid_src_bases));
    op->grid_dst_bases = malloc(g->dst.nbases * sizeof(*op->grid_dst_bases));
    assert_true(op->grid_pairs != NULL && op->grid_src_bases != NULL &&
                op->grid_dst_bases != NULL);
    memcpy(op->grid_pairs, g->pairs, 2 * g->count * sizeof(*op->grid_pairs));
    memcpy(op->grid_src_bases, g->src.bases, g->src.nbases * sizeof(*op->grid_src_bases));
    memcpy(op->grid_dst_bases, g->dst.bases, g->dst.nbases * sizeof(*op->grid_dst_bases));
    op->grid_req.pairs = op->grid_pairs;
    op->grid_req.src.bases = op->grid_src_bases;
    op->grid_req.dst.bases = op->grid_dst_bases;
    op->grid = &op->grid_req;
}

/* What a recorded submission holds of its own. */
static void op_free(struct gpu_copy_op *op)
{
    free(op->pieces);
    free(op->grid_pairs);
    free(op->grid_src_bases);
    free(op->grid_dst_bases);
    op->pieces = NULL;
    op->grid_pairs = NULL;
    op->grid_src_bases = op->grid_dst_bases = NULL;
    op->grid = NULL;
}

int __wrap_gpu_copy_submit(gpu_copier_t *copier, const gpu_copy_req_t *req, gpu_copy_op_t **op_p)
{
    if (pthread_equal(pthread_self(), loop_thread))
        loop_submissions++;
    wedge_hold();
    if (req->engine == GPU_COPY_MEMCPY && single_piece_ns > 0) {
        uint64_t until = uv_hrtime() + single_piece_ns * req->npieces;
        while (uv_hrtime() < until)
            ;   /* the driver's time: the submitting thread is busy, not asleep */
    }
    if (async_gpu)
        return async_submit(copier, req, op_p);
    if (__atomic_load_n(&copier->inflight, __ATOMIC_ACQUIRE) == copier->slots) {
        busy_answers++;
        return GPU_COPY_E_BUSY;
    }
    /* Feeds of several streams submit at once: each takes its index whole. */
    size_t i = __atomic_load_n(&nops, __ATOMIC_ACQUIRE);
    assert_true(i < FAKE_OPS);
    if ((int)i == fail_submission) {
        fail_submission = -1;
        return GPU_COPY_E_CUDA;
    }
    struct gpu_copy_op *op = &ops[__atomic_fetch_add(&nops, 1, __ATOMIC_ACQ_REL)];
    *op = (struct gpu_copy_op){ .copier = copier, .cb = req->done_cb, .arg = req->done_arg,
                                .npieces = req->npieces, .engine = req->engine,
                                .thread = pthread_self() };
    /* A grid request has no pieces (and may have no piece array at all). */
    if (req->npieces > 0) {
        op->pieces = malloc(req->npieces * sizeof(*op->pieces));
        assert_non_null(op->pieces);
        memcpy(op->pieces, req->pieces, req->npieces * sizeof(*op->pieces));
    }
    if (req->grid != NULL)
        record_grid(op, req->grid);
    __atomic_fetch_add(&copier->inflight, 1, __ATOMIC_RELEASE);
    *op_p = op;
    return GPU_COPY_OK;
}

int __wrap_gpu_copy_op_poll(gpu_copy_op_t *op)
{
    return __atomic_load_n(&op->ended, __ATOMIC_ACQUIRE) ? op->rc : GPU_COPY_PENDING;
}

int __wrap_gpu_copy_op_elapsed_ms(gpu_copy_op_t *op, float *ms_p)
{
    *ms_p = 0.25f;
    return GPU_COPY_OK;
}

const uint64_t *__wrap_gpu_copy_op_sums(gpu_copy_op_t *op)
{
    return NULL;
}

void __wrap_gpu_copy_op_release(gpu_copy_op_t *op)
{
    assert_true(__atomic_load_n(&op->ended, __ATOMIC_ACQUIRE));
    __atomic_fetch_sub(&op->copier->inflight, 1, __ATOMIC_RELEASE);
    if (async_gpu)
        free(op);
}

const char *__wrap_gpu_copy_last_error(const gpu_copier_t *copier)
{
    return "the fake copier's error";
}

/* ---------------------------------------------------------------- fixture */

static uv_loop_t test_loop;
static struct b10d test_d;

/* What the copy room hears of a job's parts. */
static unsigned parts_done;
static b10_status_t first_failure;

static uint32_t hook_sum_blocks(struct copy_job *job)
{
    return 0;
}

static b10_status_t hook_sums(struct copy_job *job, const uint64_t *sums, uint32_t n)
{
    fail_msg("no part of these jobs sums");
    return B10_ERR_INTERNAL;
}

static void hook_part_done(struct copy_job *job, b10_status_t status)
{
    assert_true(job->parts > 0);
    job->parts--;
    parts_done++;
    if (status != B10_OK && first_failure == B10_OK)
        first_failure = status;
}

static const struct gpu_hooks hooks = { hook_sum_blocks, hook_sums, hook_part_done };

/*
 * The loop's turn, then the feeds' until they hold nothing, then the loop's
 * again for what they handed back (a refusal).
 */
static void settle(void)
{
    uv_run(&test_loop, UV_RUN_NOWAIT);
    gpu_drain(&test_d);
    uv_run(&test_loop, UV_RUN_NOWAIT);
}

/* Submissions made, once the feeds are through with what they were handed. */
static size_t submitted(void)
{
    settle();
    return nops;
}

/*
 * End submission i as its copy would: its event complete, its callback (where
 * it has one) on "a driver thread", then the loop's turn. A stream ends its
 * submissions in order: the tests end one device's in order too.
 */
static void end_op(size_t i, int rc)
{
    assert_true(i < submitted());
    assert_false(ops[i].ended);
    ops[i].ended = true;
    ops[i].rc = rc;
    if (ops[i].cb != NULL)
        ops[i].cb(ops[i].arg);
    settle();
}

/* A GPU room whose parts' ends reach h: the test's counters, or the copy room's own. */
static int start_hooked(enum config_gpu_copy mode, int devices, uint32_t feeds,
                        const struct gpu_hooks *h)
{
    memset(&test_d, 0, sizeof(test_d));
    config_defaults(&test_d.cfg);
    test_d.cfg.gpu_copy = mode;
    test_d.cfg.gpu_feeds = feeds;
    /* One call a piece, whatever the feed threads' timing: the pacing tests say auto. */
    test_d.cfg.gpu_copy_calls = CONFIG_GPU_CALLS_SINGLE;
    ncopiers = 0;
    test_d.cfg.progress_spin = false;   /* completions by callback alone */
    test_d.loop = &test_loop;
    ndevices = devices;
    nops = busy_answers = loop_submissions = 0;
    loop_thread = pthread_self();
    fail_submission = -1;
    single_piece_ns = 0;
    parts_done = 0;
    first_failure = B10_OK;
    return gpu_start(&test_d, h) == B10_OK && gpu_present(&test_d) ? 0 : -1;
}

static int start_feeds(enum config_gpu_copy mode, int devices, uint32_t feeds)
{
    return start_hooked(mode, devices, feeds, &hooks);
}

/* One copy stream a device: its submissions in one order, what most tests look at. */
static int start(enum config_gpu_copy mode, int devices)
{
    return start_feeds(mode, devices, 1);
}

/* Whether gpu_stop found no copy in flight and no callback due. */
static bool stop(void)
{
    /* Every submission came from a feed thread, and none found its copier full. */
    assert_int_equal(loop_submissions, 0);
    assert_int_equal(busy_answers, 0);
    bool stopped = gpu_stop(&test_d);
    uv_run(&test_loop, UV_RUN_NOWAIT);
    /* The stress test's operations are its own (freed at release), not in ops. */
    for (size_t i = 0; !async_gpu && i < nops; i++)
        op_free(&ops[i]);
    return stopped;
}

/* A scatter job of n pieces of 4 KiB from a view onto device memory (fake addresses). */
struct job_fixture {
    struct copy_job job;
    struct copy_seg *segs;
};

static void job_init(struct job_fixture *f, uint32_t n, int device_of_odd)
{
    memset(f, 0, sizeof(*f));
    f->segs = calloc(n, sizeof(*f->segs));
    assert_non_null(f->segs);
    for (uint32_t i = 0; i < n; i++)
        f->segs[i] = (struct copy_seg){ .dst = (void *)(uintptr_t)(0x7000000000ull + i * 8192ull),
                                        .src = (void *)(uintptr_t)(0x100000ull + i * 4096ull),
                                        .len = 4096, .device = (i & 1) ? device_of_odd : 0,
                                        .src_fd = -1, .dst_fd = -1 };
    f->job.segs = f->segs;
    f->job.nsegs = n;
    f->job.gather = false;
    f->job.parts = 1;       /* the caller's own part, as copy_job_submit holds it */
}

/* The submissions [from, to) carry exactly the job's pieces of device dev, in order. */
static void assert_pieces(const struct job_fixture *f, size_t from, size_t to, int dev)
{
    uint32_t seg = 0;
    for (size_t i = from; i < to; i++)
        for (size_t p = 0; p < ops[i].npieces; p++) {
            while (seg < f->job.nsegs && f->segs[seg].device != dev)
                seg++;
            assert_true(seg < f->job.nsegs);
            assert_ptr_equal(ops[i].pieces[p].dev, f->segs[seg].dst);
            assert_ptr_equal(ops[i].pieces[p].host, f->segs[seg].src);
            assert_int_equal(ops[i].pieces[p].len, f->segs[seg].len);
            seg++;
        }
    while (seg < f->job.nsegs && f->segs[seg].device != dev)
        seg++;
    assert_int_equal(seg, f->job.nsegs);
}

/* ---------------------------------------------------------------- tests */

/*
 * The copy engines take a chunk of 1000 pieces in submissions of at most 128
 * (GPU_COPY_BATCH_PIECES), each its own calls, event and callback: a model's
 * step waits on the GPU behind one submission, not behind a chunk. The job
 * hears of each part; only the last brings its parts to zero.
 */
static void test_engine_cuts_a_chunk_into_submissions(void **state)
{
    struct job_fixture f;
    assert_int_equal(start(CONFIG_GPU_COPY_ENGINE, 1), 0);
    job_init(&f, 1000, 0);
    gpu_copy_job(&test_d, &f.job);
    assert_int_equal(submitted(), 8);              /* 7 x 128 + 104 */
    for (size_t i = 0; i < nops; i++) {
        assert_int_equal(ops[i].npieces, i < 7 ? 128 : 104);
        assert_int_equal(ops[i].engine, GPU_COPY_MEMCPY);
    }
    assert_pieces(&f, 0, nops, 0);
    assert_int_equal(f.job.parts, 1 + 8);
    for (size_t i = 0; i < nops; i++)
        end_op(i, GPU_COPY_OK);
    assert_int_equal(parts_done, 8);
    assert_int_equal(test_d.stats.gpu_parts_single, 8);
    assert_int_equal(test_d.stats.gpu_parts_batched, 0);
    assert_int_equal(f.job.parts, 1);
    assert_int_equal(first_failure, B10_OK);
    stop();
    free(f.segs);
}

/* Ends every submission so far, in order, and frees the job's segments. */
static void end_all(struct job_fixture *f, size_t from)
{
    for (size_t i = from; i < submitted(); i++)
        end_op(i, GPU_COPY_OK);
    assert_int_equal(first_failure, B10_OK);
    free(f->segs);
}

/*
 * --gpu-copy-calls auto (pace.h): one call a piece while the feed keeps up at
 * what that costs, batches once it cannot, single calls again once the
 * pieces come slowly enough. The fake driver takes 20 us of the feed's thread
 * a single piece, so a part of 128 keeps it busy for a whole window, however
 * the thread is scheduled: the chunk's next part is batched. (The parts after
 * it depend on the thread's timing.) Then the chunks come one piece at a
 * time, with pauses: the feed goes back to single calls (waited for with a
 * bound).
 */
static void test_calls_single_while_they_keep_up(void **state)
{
    struct job_fixture f;
    assert_int_equal(start(CONFIG_GPU_COPY_ENGINE, 1), 0);
    test_d.cfg.gpu_copy_calls = CONFIG_GPU_CALLS_AUTO;
    single_piece_ns = 20 * 1000;
    job_init(&f, 1000, 0);
    gpu_copy_job(&test_d, &f.job);
    assert_int_equal(submitted(), 8);
    assert_int_equal(ops[0].engine, GPU_COPY_MEMCPY);
    assert_int_equal(ops[1].engine, GPU_COPY_BATCH);
    unsigned batched = 0;
    for (size_t i = 0; i < nops; i++)
        batched += ops[i].engine == GPU_COPY_BATCH;
    end_all(&f, 0);
    assert_int_equal(test_d.stats.gpu_parts_batched, batched);
    assert_int_equal(test_d.stats.gpu_parts_single, 8 - batched);

    /* A trickle: one piece every 10 ms, until a submission is single again (or 10 s). */
    bool single = false;
    for (int tries = 0; tries < 1000 && !single; tries++) {
        size_t at = submitted();
        job_init(&f, 1, 0);
        gpu_copy_job(&test_d, &f.job);
        assert_int_equal(submitted(), at + 1);
        single = ops[at].engine == GPU_COPY_MEMCPY;
        end_all(&f, at);
        if (!single)
            usleep(10 * 1000);
    }
    assert_true(single);
    stop();
}

/*
 * A job no wire paces (a local transfer) is batched under auto from its first
 * part, the driver idle or not; the wire's jobs beside it go singly.
 */
static void test_calls_flat_out_batched(void **state)
{
    struct job_fixture f, g;
    assert_int_equal(start(CONFIG_GPU_COPY_ENGINE, 1), 0);
    test_d.cfg.gpu_copy_calls = CONFIG_GPU_CALLS_AUTO;
    job_init(&f, 300, 0);
    f.job.flat_out = true;
    gpu_copy_job(&test_d, &f.job);
    job_init(&g, 10, 0);
    gpu_copy_job(&test_d, &g.job);
    assert_int_equal(submitted(), 4);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(ops[i].engine, GPU_COPY_BATCH);
    assert_int_equal(ops[3].engine, GPU_COPY_MEMCPY);
    end_all(&f, 0);
    free(g.segs);
    assert_int_equal(test_d.stats.gpu_parts_batched, 3);
    assert_int_equal(test_d.stats.gpu_parts_single, 1);
    stop();
}

/* --gpu-copy-calls single and batch hold to their way whatever the load. */
static void test_calls_forced(void **state)
{
    static const enum config_gpu_calls modes[] = { CONFIG_GPU_CALLS_SINGLE, CONFIG_GPU_CALLS_BATCH };
    for (size_t m = 0; m < 2; m++) {
        struct job_fixture f;
        assert_int_equal(start(CONFIG_GPU_COPY_ENGINE, 1), 0);
        test_d.cfg.gpu_copy_calls = modes[m];
        single_piece_ns = 20 * 1000;
        job_init(&f, 1000, 0);
        gpu_copy_job(&test_d, &f.job);
        assert_int_equal(submitted(), 8);
        for (size_t i = 0; i < nops; i++)
            assert_int_equal(ops[i].engine, m == 0 ? GPU_COPY_MEMCPY : GPU_COPY_BATCH);
        end_all(&f, 0);
        assert_int_equal(m == 0 ? test_d.stats.gpu_parts_single : test_d.stats.gpu_parts_batched, 8);
        stop();
    }
}

/*
 * The copy engines also cut a submission at GPU_ENGINE_BYTES (512 KiB): 128
 * pieces of 32 KiB, a whole 4 MiB view, held a model's step behind them. A
 * single piece beyond the cap stays whole (a contiguous copy costs a model
 * nothing), and the pieces after it start the next submission. (128 pieces
 * of 4 KiB are exactly 512 KiB: the count cuts those, as above.)
 */
static void test_engine_cuts_at_half_a_mib(void **state)
{
    struct job_fixture f;
    assert_int_equal(start(CONFIG_GPU_COPY_ENGINE, 1), 0);
    job_init(&f, 100, 0);
    for (uint32_t i = 0; i < 100; i++)
        f.segs[i].len = 32768;
    f.segs[20].len = 4u << 20;              /* one contiguous run, alone in its submission */
    gpu_copy_job(&test_d, &f.job);
    /* 16 pieces of 32 KiB; then 4; the 4 MiB one; 79 more: 4 x 16 + 15. */
    static const size_t want[] = { 16, 4, 1, 16, 16, 16, 16, 15 };
    assert_int_equal(submitted(), sizeof(want) / sizeof(want[0]));
    for (size_t i = 0; i < nops; i++) {
        size_t bytes = 0;
        for (size_t p = 0; p < ops[i].npieces; p++)
            bytes += ops[i].pieces[p].len;
        assert_int_equal(ops[i].npieces, want[i]);
        assert_true(bytes <= 512 * 1024 || ops[i].npieces == 1);
    }
    assert_int_equal(ops[2].pieces[0].len, 4u << 20);
    assert_pieces(&f, 0, nops, 0);
    assert_int_equal(f.job.parts, 1 + nops);
    for (size_t i = 0; i < nops; i++)
        end_op(i, GPU_COPY_OK);
    assert_int_equal(f.job.parts, 1);
    assert_int_equal(first_failure, B10_OK);
    stop();
    free(f.segs);
}

/*
 * A copier's slots: GPU_SLOTS with the kernels; with the copy engines, four
 * views' submissions of 512 KiB, at least GPU_SLOTS and at most 64.
 */
static void test_slots_follow_the_view(void **state)
{
    static const struct { enum config_gpu_copy mode; uint64_t view; unsigned slots; } cases[] = {
        { CONFIG_GPU_COPY_ENGINE, 4u << 20, 32 },
        { CONFIG_GPU_COPY_ENGINE, SMALL_VIEW, FAKE_SLOTS },
        { CONFIG_GPU_COPY_ENGINE, (2u << 20) + 1, 20 },
        { CONFIG_GPU_COPY_ENGINE, 8u << 20, 64 },
        { CONFIG_GPU_COPY_ENGINE, 64u << 20, 64 },
        { CONFIG_GPU_COPY_KERNEL, 64u << 20, FAKE_SLOTS },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct job_fixture f;
        assert_int_equal(start(cases[i].mode, 1), 0);
        test_d.cfg.view_bytes = cases[i].view;     /* read when the copier is made */
        asked_slots = 0;
        job_init(&f, 1, 0);
        gpu_copy_job(&test_d, &f.job);
        assert_int_equal(asked_slots, cases[i].slots);
        end_op(0, GPU_COPY_OK);
        stop();
        free(f.segs);
    }
}

/* With the kernels, a chunk is one submission: one launch, its sums chained to it. */
static void test_kernels_take_a_chunk_whole(void **state)
{
    struct job_fixture f;
    assert_int_equal(start(CONFIG_GPU_COPY_KERNEL, 1), 0);
    job_init(&f, 1000, 0);
    gpu_copy_job(&test_d, &f.job);
    assert_int_equal(submitted(), 1);
    assert_int_equal(ops[0].npieces, 1000);
    assert_pieces(&f, 0, 1, 0);
    end_op(0, GPU_COPY_OK);
    assert_int_equal(f.job.parts, 1);
    stop();
    free(f.segs);
}

/*
 * More submissions than the copier has slots: the rest wait in order and go
 * out as slots come back, each at most once; the copier is never asked past
 * its slots (the loop counts them); every piece is submitted exactly once,
 * in order.
 */
static void test_full_copier_queues_in_order(void **state)
{
    struct job_fixture a, b;
    assert_int_equal(start(CONFIG_GPU_COPY_ENGINE, 1), 0);
    test_d.cfg.view_bytes = SMALL_VIEW;     /* FAKE_SLOTS slots */
    job_init(&a, 128 * 20, 0);              /* 20 submissions */
    job_init(&b, 128 * 6 + 1, 0);           /* 7 more */
    gpu_copy_job(&test_d, &a.job);
    gpu_copy_job(&test_d, &b.job);
    assert_int_equal(submitted(), FAKE_SLOTS);
    size_t ended = 0;
    while (ended < nops) {
        end_op(ended++, GPU_COPY_OK);
        /* The loop counts the slots: a full copier is never asked (stop() checks). */
        assert_int_equal(busy_answers, 0);
    }
    assert_int_equal(submitted(), 27);
    assert_pieces(&a, 0, 20, 0);
    assert_pieces(&b, 20, 27, 0);
    assert_int_equal(a.job.parts, 1);
    assert_int_equal(b.job.parts, 1);
    assert_int_equal(parts_done, 27);
    stop();
    free(a.segs);
    free(b.segs);
}

/*
 * Device 0's backlog does not hold device 1 back: a job whose pieces are on
 * device 1 goes out at once while device 0's waiters wait; each device's
 * submissions carry only its own pieces.
 */
static void test_one_devices_backlog_holds_no_other(void **state)
{
    struct job_fixture a, b;
    assert_int_equal(start(CONFIG_GPU_COPY_ENGINE, 2), 0);
    test_d.cfg.view_bytes = SMALL_VIEW;     /* FAKE_SLOTS slots */
    job_init(&a, 128 * 20, 0);              /* device 0 only: 20 submissions */
    gpu_copy_job(&test_d, &a.job);
    assert_int_equal(submitted(), FAKE_SLOTS);
    job_init(&b, 256, 1);                   /* half of it on device 1 */
    gpu_copy_job(&test_d, &b.job);
    /* Device 0 is full: b's device-0 half waits; its device-1 half went out. */
    assert_int_equal(submitted(), FAKE_SLOTS + 1);
    assert_ptr_equal(ops[FAKE_SLOTS].copier, &copiers[1]);
    assert_int_equal(ops[FAKE_SLOTS].npieces, 128);
    for (size_t i = 0; i < nops; i++)
        if (!ops[i].ended)
            end_op(i, GPU_COPY_OK);
    /* Those ended let the waiters out; end them too. */
    for (size_t i = 0; i < nops; i++)
        if (!ops[i].ended)
            end_op(i, GPU_COPY_OK);
    assert_int_equal(a.job.parts, 1);
    assert_int_equal(b.job.parts, 1);
    stop();
    free(a.segs);
    free(b.segs);
}

/*
 * A submission refused by CUDA mid-chunk fails its part at once; the parts
 * before and after it still run and end; the job's parts come to zero only
 * when the last has, and it has heard the failure.
 */
/*
 * A callback stalls the stream until a driver thread has run it, so only the
 * parts that need one have one: a job's last part, and the part that takes
 * the copier's last slot. The parts before a callback end with it, in order;
 * without one, nothing ends them early (no polling in these tests).
 */
static void test_callbacks_where_no_later_part_may_come(void **state)
{
    struct job_fixture f;
    assert_int_equal(start(CONFIG_GPU_COPY_ENGINE, 1), 0);
    job_init(&f, 128 * 5, 0);
    gpu_copy_job(&test_d, &f.job);
    assert_int_equal(submitted(), 5);
    for (size_t i = 0; i < 4; i++)
        assert_null(ops[i].cb);
    assert_non_null(ops[4].cb);
    for (size_t i = 0; i < 4; i++)
        end_op(i, GPU_COPY_OK);
    assert_int_equal(parts_done, 0);
    end_op(4, GPU_COPY_OK);
    assert_int_equal(parts_done, 5);
    assert_int_equal(f.job.parts, 1);
    stop();
    free(f.segs);

    /* 20 parts, 16 slots: the 16th is called back, or the four behind it would wait forever. */
    assert_int_equal(start(CONFIG_GPU_COPY_ENGINE, 1), 0);
    test_d.cfg.view_bytes = SMALL_VIEW;     /* FAKE_SLOTS slots */
    job_init(&f, 128 * 20, 0);
    gpu_copy_job(&test_d, &f.job);
    assert_int_equal(submitted(), FAKE_SLOTS);
    for (size_t i = 0; i + 1 < FAKE_SLOTS; i++)
        assert_null(ops[i].cb);
    assert_non_null(ops[FAKE_SLOTS - 1].cb);
    for (size_t i = 0; i + 1 < FAKE_SLOTS; i++)
        end_op(i, GPU_COPY_OK);
    assert_int_equal(submitted(), FAKE_SLOTS);
    assert_int_equal(parts_done, 0);
    end_op(FAKE_SLOTS - 1, GPU_COPY_OK);
    assert_int_equal(parts_done, FAKE_SLOTS);
    assert_int_equal(submitted(), 20);             /* the slots came back: the rest went out */
    assert_null(ops[FAKE_SLOTS].cb);
    assert_non_null(ops[19].cb);            /* the job's last */
    for (size_t i = FAKE_SLOTS; i < 20; i++)
        end_op(i, GPU_COPY_OK);
    assert_int_equal(parts_done, 20);
    assert_int_equal(f.job.parts, 1);
    stop();
    free(f.segs);
}

/*
 * The job's last part, the one with the callback, refused before its stream
 * drained (the fake never drains it): the parts before it have no callback
 * to come, and a timer sweeps them once their copies end.
 */
static void test_parts_left_without_a_callback_end(void **state)
{
    struct job_fixture f;
    assert_int_equal(start(CONFIG_GPU_COPY_ENGINE, 1), 0);
    job_init(&f, 128 * 4, 0);
    fail_submission = 3;
    gpu_copy_job(&test_d, &f.job);
    assert_int_equal(submitted(), 3);
    for (size_t i = 0; i < 3; i++)
        assert_null(ops[i].cb);
    assert_int_equal(parts_done, 1);        /* the refused one */
    for (size_t i = 0; i < 3; i++)
        end_op(i, GPU_COPY_OK);
    /* Bounded: the sweep is due within a millisecond of the loop's clock. */
    for (int turn = 0; turn < 10000 && parts_done < 4; turn++)
        uv_run(&test_loop, UV_RUN_ONCE);
    assert_int_equal(parts_done, 4);
    assert_int_equal(f.job.parts, 1);
    assert_int_equal(first_failure, B10_ERR_INTERNAL);
    stop();
    free(f.segs);
}

static void test_refused_submission_midway(void **state)
{
    struct job_fixture f;
    assert_int_equal(start(CONFIG_GPU_COPY_ENGINE, 1), 0);
    job_init(&f, 128 * 4, 0);
    fail_submission = 2;
    gpu_copy_job(&test_d, &f.job);
    assert_int_equal(submitted(), 3);              /* the third try was refused, the fourth went out */
    assert_int_equal(parts_done, 1);
    assert_int_equal(first_failure, B10_ERR_INTERNAL);
    assert_int_equal(f.job.parts, 1 + 3);
    for (size_t i = 0; i < nops; i++)
        end_op(i, GPU_COPY_OK);
    assert_int_equal(f.job.parts, 1);
    assert_int_equal(parts_done, 4);
    /* The refused one counts as neither way of calling the driver. */
    assert_int_equal(test_d.stats.gpu_parts_single, 3);
    assert_int_equal(test_d.stats.gpu_parts_batched, 0);
    /* A copy that ends badly is its part's failure too. */
    first_failure = B10_OK;
    size_t base = nops;
    gpu_copy_job(&test_d, &f.job);
    assert_int_equal(submitted(), base + 4);
    end_op(base, GPU_COPY_E_CUDA);
    for (size_t i = base + 1; i < nops; i++)
        end_op(i, GPU_COPY_OK);
    assert_int_equal(first_failure, B10_ERR_INTERNAL);
    assert_int_equal(f.job.parts, 1);
    stop();
    free(f.segs);
}

/*
 * A grid job as the local engine makes one: rows picked between two grids of
 * one GPU, no segment and no region (the fake driver reads no address). The
 * source grid has 3 bases of 4 rows, the destination 2 of 5; the picks reach
 * each grid's last row.
 */
#define GRID_PICKS 5
#define GRID_LENGTH 20480u
static const uint32_t grid_pairs[2 * GRID_PICKS] = { 0, 5, 11, 9, 3, 3, 7, 0, 2, 8 };
static const uint64_t grid_src[3] = { 0x7100000000ull, 0x7180000000ull, 0x7140000000ull };
static const uint64_t grid_dst[2] = { 0x7210000000ull, 0x7200000000ull };

/* What the job's owner hears: done runs once per job, with its status. */
static unsigned grid_jobs_done;
static b10_status_t grid_job_status;

static void grid_job_done(struct copy_job *job, b10_status_t status)
{
    grid_jobs_done++;
    grid_job_status = status;
}

static struct copy_job *grid_job_new(void)
{
    struct copy_job *job = copy_job_new(&test_d, false, grid_job_done, NULL, 0);
    struct copy_grid *g = calloc(1, sizeof(*g));
    assert_non_null(job);
    assert_non_null(g);
    *g = (struct copy_grid){ .device = 0, .src_nbases = 3, .dst_nbases = 2,
                             .src_per_base = 4, .dst_per_base = 5,
                             .src_stride = 0x10000, .dst_stride = 0x6000,
                             .length = GRID_LENGTH, .pairs = grid_pairs, .count = GRID_PICKS };
    g->src_bases = calloc(3, sizeof(*g->src_bases));
    g->dst_bases = calloc(2, sizeof(*g->dst_bases));
    assert_true(g->src_bases != NULL && g->dst_bases != NULL);
    memcpy(g->src_bases, grid_src, sizeof(grid_src));
    memcpy(g->dst_bases, grid_dst, sizeof(grid_dst));
    assert_int_equal(copy_job_add_grid(job, g), B10_OK);
    assert_int_equal(job->bytes, (uint64_t)GRID_PICKS * GRID_LENGTH);
    return job;
}

/*
 * A grid job is one submission of the grid kernel: no pieces, the rows'
 * indices and both grids' shapes exactly as the job has them, by the kernel
 * (AUTO or KERNEL: the copy engines cannot take it), called back (nothing
 * later on the stream would end it). Its owner hears of it once, when the
 * copy has ended, and it counts as neither way of calling the copy engines.
 */
static void test_grid_job_is_one_kernel_submission(void **state)
{
    assert_int_equal(start_hooked(CONFIG_GPU_COPY_KERNEL, 1, 1, &copy_gpu_hooks), 0);
    grid_jobs_done = 0;
    copy_job_submit(grid_job_new());
    assert_int_equal(submitted(), 1);
    const struct gpu_copy_op *op = &ops[0];
    assert_true(op->engine == GPU_COPY_AUTO || op->engine == GPU_COPY_KERNEL);
    assert_int_equal(op->npieces, 0);
    assert_non_null(op->cb);
    const gpu_copy_grid_t *g = op->grid;
    assert_non_null(g);
    assert_int_equal(g->count, GRID_PICKS);
    assert_int_equal(g->length, GRID_LENGTH);
    assert_memory_equal(g->pairs, grid_pairs, sizeof(grid_pairs));
    assert_int_equal(g->src.nbases, 3);
    assert_int_equal(g->src.per_base, 4);
    assert_int_equal(g->src.stride, 0x10000);
    assert_memory_equal(g->src.bases, grid_src, sizeof(grid_src));
    assert_int_equal(g->dst.nbases, 2);
    assert_int_equal(g->dst.per_base, 5);
    assert_int_equal(g->dst.stride, 0x6000);
    assert_memory_equal(g->dst.bases, grid_dst, sizeof(grid_dst));
    /* In flight until its copy ends. */
    settle();
    assert_int_equal(grid_jobs_done, 0);
    end_op(0, GPU_COPY_OK);
    assert_int_equal(grid_jobs_done, 1);
    assert_int_equal(grid_job_status, B10_OK);
    settle();
    assert_int_equal(grid_jobs_done, 1);
    assert_int_equal(test_d.stats.gpu_parts_single, 0);
    assert_int_equal(test_d.stats.gpu_parts_batched, 0);
    assert_true(stop());
}

/*
 * A grid submission the driver refuses ends its job with a failure, and
 * nothing of it stays in flight: the copier holds no slot for it and the
 * GPU room stops with no copy and no callback due. The same job submitted
 * next goes out and ends well.
 */
static void test_grid_job_refused(void **state)
{
    assert_int_equal(start_hooked(CONFIG_GPU_COPY_KERNEL, 1, 1, &copy_gpu_hooks), 0);
    test_d.test_gpu_stop_ms = 20;     /* a part left in flight: stop says so at once */
    grid_jobs_done = 0;
    fail_submission = 0;
    copy_job_submit(grid_job_new());
    assert_int_equal(submitted(), 0);
    assert_int_equal(grid_jobs_done, 1);
    assert_int_equal(grid_job_status, B10_ERR_INTERNAL);
    assert_int_equal(__atomic_load_n(&copiers[0].inflight, __ATOMIC_ACQUIRE), 0);

    copy_job_submit(grid_job_new());
    assert_int_equal(submitted(), 1);
    assert_non_null(ops[0].grid);
    end_op(0, GPU_COPY_OK);
    assert_int_equal(grid_jobs_done, 2);
    assert_int_equal(grid_job_status, B10_OK);
    assert_int_equal(__atomic_load_n(&copiers[0].inflight, __ATOMIC_ACQUIRE), 0);
    assert_int_equal(test_d.stats.gpu_parts_single, 0);
    assert_int_equal(test_d.stats.gpu_parts_batched, 0);
    assert_true(stop());
}

/* The submissions of copier c, in the order its feed made them: their indices in ops. */
static size_t ops_of(const struct gpu_copier *c, size_t *idx, size_t most)
{
    size_t n = 0;
    for (size_t i = 0; i < submitted(); i++)
        if (ops[i].copier == c && n < most)
            idx[n++] = i;
    return n;
}

/*
 * With two copy streams a device, a job goes to the least busy one (the
 * first of equals), every part of it there: a job's last part is called
 * back for the parts before it, on its own stream. Each stream has a
 * thread of its own, and one stream's copies end without the other's.
 */
static void test_jobs_spread_over_feeds(void **state)
{
    struct job_fixture a, b, c;
    size_t ia[8], ib[8];
    assert_int_equal(start_feeds(CONFIG_GPU_COPY_ENGINE, 1, 2), 0);
    job_init(&a, 128 * 3, 0);
    job_init(&b, 128 * 2, 0);
    job_init(&c, 128, 0);
    gpu_copy_job(&test_d, &a.job);          /* both idle: the first stream */
    gpu_copy_job(&test_d, &b.job);          /* the second: 0 parts against 3 */
    gpu_copy_job(&test_d, &c.job);          /* the second again: 2 against 3 */
    assert_int_equal(submitted(), 6);
    assert_int_equal(ncopiers, 2);
    assert_int_equal(ops_of(&copiers[0], ia, 8), 3);
    assert_int_equal(ops_of(&copiers[1], ib, 8), 3);
    for (size_t k = 0; k < 3; k++) {
        assert_int_equal(ops[ia[k]].npieces, 128);
        assert_ptr_equal(ops[ia[k]].pieces[0].dev, a.segs[128 * k].dst);
        assert_true(pthread_equal(ops[ia[k]].thread, ops[ia[0]].thread));
        assert_true(pthread_equal(ops[ib[k]].thread, ops[ib[0]].thread));
    }
    assert_false(pthread_equal(ops[ia[0]].thread, ops[ib[0]].thread));
    /* The second stream: b's two parts, then c's one, each job's last called back. */
    assert_ptr_equal(ops[ib[0]].pieces[0].dev, b.segs[0].dst);
    assert_ptr_equal(ops[ib[1]].pieces[0].dev, b.segs[128].dst);
    assert_ptr_equal(ops[ib[2]].pieces[0].dev, c.segs[0].dst);
    assert_null(ops[ia[0]].cb);
    assert_non_null(ops[ia[2]].cb);
    assert_null(ops[ib[0]].cb);
    assert_non_null(ops[ib[1]].cb);
    assert_non_null(ops[ib[2]].cb);
    /* The second stream's copies end while the first's still run. */
    for (size_t k = 0; k < 3; k++)
        end_op(ib[k], GPU_COPY_OK);
    assert_int_equal(b.job.parts, 1);
    assert_int_equal(c.job.parts, 1);
    assert_int_equal(a.job.parts, 1 + 3);
    for (size_t k = 0; k < 3; k++)
        end_op(ia[k], GPU_COPY_OK);
    assert_int_equal(a.job.parts, 1);
    assert_int_equal(parts_done, 6);
    assert_int_equal(first_failure, B10_OK);
    stop();

    /* The kernels take one stream a device whatever --gpu-feeds says. */
    assert_int_equal(start_feeds(CONFIG_GPU_COPY_KERNEL, 1, 2), 0);
    gpu_copy_job(&test_d, &a.job);
    gpu_copy_job(&test_d, &b.job);
    assert_int_equal(submitted(), 2);
    assert_int_equal(ncopiers, 1);
    end_op(0, GPU_COPY_OK);
    end_op(1, GPU_COPY_OK);
    assert_int_equal(a.job.parts, 1);
    assert_int_equal(b.job.parts, 1);
    stop();
    free(a.segs);
    free(b.segs);
    free(c.segs);
}

/*
 * Many jobs through three streams whose copies end on another thread, in
 * each stream's order, with callbacks from that thread and feeds submitting
 * from theirs: every part of every job ends, none by the watch's sweep (a
 * completion that reached nothing), with and without the loop's polling,
 * and with copiers small enough that parts wait for slots.
 */
static void test_stress_threads_and_streams(void **state)
{
    enum { ACTIVE = 6, JOBS = 300 };
    for (int spin = 0; spin < 2; spin++) {
        struct job_fixture f[ACTIVE];
        unsigned seed = 11 + spin, started = 0, ended = 0;
        pthread_t gpu_thread;
        memset(streams, 0, sizeof(streams));
        gpu_quit = false;
        async_gpu = true;
        assert_int_equal(start_feeds(CONFIG_GPU_COPY_ENGINE, 1, 3), 0);
        test_d.cfg.view_bytes = SMALL_VIEW;         /* 16 slots a stream */
        test_d.cfg.progress_spin = spin;
        assert_int_equal(pthread_create(&gpu_thread, NULL, fake_gpu_main, NULL), 0);
        for (int k = 0; k < ACTIVE; k++) {
            job_init(&f[k], 1 + rand_r(&seed) % (128 * 12), 0);
            gpu_copy_job(&test_d, &f[k].job);
            started++;
        }
        /* Bounded: a minute for what takes well under a second. */
        uint64_t until = uv_hrtime() + 60ull * 1000 * 1000 * 1000;
        while (ended < JOBS && uv_hrtime() < until) {
            uv_run(&test_loop, UV_RUN_ONCE);
            for (int k = 0; k < ACTIVE; k++) {
                if (f[k].segs == NULL || f[k].job.parts != 1)
                    continue;
                ended++;
                free(f[k].segs);
                f[k].segs = NULL;
                if (started < JOBS) {
                    job_init(&f[k], 1 + rand_r(&seed) % (128 * 12), 0);
                    gpu_copy_job(&test_d, &f[k].job);
                    started++;
                }
            }
        }
        assert_int_equal(ended, JOBS);
        assert_int_equal(first_failure, B10_OK);
        assert_int_equal(test_d.stats.gpu_copies_rescued, 0);
        assert_true(ncopiers >= 2);                 /* the load spread */
        stop();
        pthread_mutex_lock(&gpu_mu);
        gpu_quit = true;
        pthread_cond_signal(&gpu_cv);
        pthread_mutex_unlock(&gpu_mu);
        pthread_join(gpu_thread, NULL);
        async_gpu = false;
        nops = 0;       /* stop() freed none of these: they were never in ops */
    }
}

/*
 * The one copy of a GPU left behind ends late, its callback on "a driver
 * thread": it wakes no closed handle, and its part stays with that state.
 */
static void end_left_behind(struct job_fixture *f)
{
    sends_on_closed = 0;
    assert_non_null(ops[0].cb);             /* the job's last part: called back */
    ops[0].ended = true;
    ops[0].cb(ops[0].arg);
    uv_run(&test_loop, UV_RUN_NOWAIT);
    assert_int_equal(sends_on_closed, 0);
    assert_int_equal(f->job.parts, 2);
    op_free(&ops[0]);
    nops = 0;
    free(f->segs);
}

/*
 * Shutdown on a wedged GPU: a feed thread stays inside the driver with its
 * copy, which never ends. gpu_stop waits its bounds (short here), says the
 * copies did not end, and leaves the thread, the streams and their state as
 * they are, destroying no copier (its stream would be waited for for ever).
 * When the driver lets the thread go, it submits, finds the stop and ends on
 * state still there, and the copy's late callback wakes no closed handle. A
 * copy submitted that never ends is left behind the same way. A GPU whose
 * copies end stops whole, its copiers destroyed.
 */
static void test_stop_leaves_a_wedged_gpu(void **state)
{
    struct job_fixture f;

    assert_int_equal(start(CONFIG_GPU_COPY_ENGINE, 1), 0);
    job_init(&f, 10, 0);
    gpu_copy_job(&test_d, &f.job);
    assert_int_equal(submitted(), 1);
    end_op(0, GPU_COPY_OK);
    copiers_destroyed = 0;
    assert_true(gpu_stop(&test_d));
    uv_run(&test_loop, UV_RUN_NOWAIT);
    assert_int_equal(copiers_destroyed, ncopiers);
    op_free(&ops[0]);
    free(f.segs);

    assert_int_equal(start(CONFIG_GPU_COPY_ENGINE, 1), 0);
    test_d.test_gpu_stop_ms = 20;
    pthread_mutex_lock(&wedge_mu);
    wedge = true;
    wedged_in = 0;
    pthread_mutex_unlock(&wedge_mu);
    job_init(&f, 10, 0);
    gpu_copy_job(&test_d, &f.job);
    pthread_mutex_lock(&wedge_mu);
    while (wedged_in == 0)
        pthread_cond_wait(&wedge_cv, &wedge_mu);
    pthread_mutex_unlock(&wedge_mu);
    copiers_destroyed = 0;
    assert_false(gpu_stop(&test_d));
    uv_run(&test_loop, UV_RUN_NOWAIT);
    assert_null(test_d.gpu);
    assert_int_equal(copiers_destroyed, 0);
    assert_int_equal(f.job.parts, 2);       /* its part never ended */

    pthread_mutex_lock(&wedge_mu);
    wedge = false;
    pthread_cond_broadcast(&wedge_cv);
    pthread_mutex_unlock(&wedge_mu);
    /* Bounded: a minute for the thread's one submission (the copier counts it last). */
    uint64_t until = uv_hrtime() + 60ull * 1000 * 1000 * 1000;
    while (__atomic_load_n(&copiers[0].inflight, __ATOMIC_ACQUIRE) == 0 && uv_hrtime() < until)
        uv_sleep(1);
    assert_int_equal(__atomic_load_n(&copiers[0].inflight, __ATOMIC_ACQUIRE), 1);
    assert_int_equal(nops, 1);
    end_left_behind(&f);

    /* Submitted, the thread back, but the copy never ends: left behind all the same. */
    assert_int_equal(start(CONFIG_GPU_COPY_ENGINE, 1), 0);
    test_d.test_gpu_stop_ms = 20;
    job_init(&f, 10, 0);
    gpu_copy_job(&test_d, &f.job);
    assert_int_equal(submitted(), 1);
    copiers_destroyed = 0;
    assert_false(gpu_stop(&test_d));
    uv_run(&test_loop, UV_RUN_NOWAIT);
    assert_int_equal(copiers_destroyed, 0);
    end_left_behind(&f);
}

static int group_setup(void **state)
{
    log_setup(LOG_LEVEL_ERR, "test-gpu");
    return uv_loop_init(&test_loop);
}

static int group_teardown(void **state)
{
    uv_run(&test_loop, UV_RUN_NOWAIT);
    return uv_loop_close(&test_loop) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_cuts_a_chunk_into_submissions),
        cmocka_unit_test(test_calls_single_while_they_keep_up),
        cmocka_unit_test(test_calls_flat_out_batched),
        cmocka_unit_test(test_calls_forced),
        cmocka_unit_test(test_engine_cuts_at_half_a_mib),
        cmocka_unit_test(test_slots_follow_the_view),
        cmocka_unit_test(test_kernels_take_a_chunk_whole),
        cmocka_unit_test(test_full_copier_queues_in_order),
        cmocka_unit_test(test_one_devices_backlog_holds_no_other),
        cmocka_unit_test(test_callbacks_where_no_later_part_may_come),
        cmocka_unit_test(test_parts_left_without_a_callback_end),
        cmocka_unit_test(test_refused_submission_midway),
        cmocka_unit_test(test_grid_job_is_one_kernel_submission),
        cmocka_unit_test(test_grid_job_refused),
        cmocka_unit_test(test_jobs_spread_over_feeds),
        cmocka_unit_test(test_stress_threads_and_streams),
        cmocka_unit_test(test_stop_leaves_a_wedged_gpu),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

#else /* !B10_HAVE_CUDA */

static void test_without_cuda(void **state)
{
    skip();
}

int main(void)
{
    printf("test-gpu: built without the CUDA backend (no nvcc): gpu.c has no submissions "
           "to cut, skipped\n");
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_without_cuda) };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
