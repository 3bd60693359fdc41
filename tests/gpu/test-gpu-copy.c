/*
 * test-gpu-copy — cuda/gpu-copy.cu against a CPU reference.
 *
 * Random span sets (1 B to 10 MiB, odd alignments, dev and host congruent or not
 * modulo 16) are gathered and scattered by every engine and several CTA caps. The
 * whole destination pool is poisoned first with a position-dependent pattern and
 * compared in full afterwards, so the gaps between spans are canaries: a byte
 * written one past a span, or into the wrong span, is a mismatch. The source pool
 * is compared too (a copy must not write its source). A negative control corrupts
 * one byte inside a span and one in a canary and requires the checker to see both.
 *
 * The checksum kernel's block sums are held to libxxhash's XXH3_64bits_withSeed
 * over host staging and device memory, seeds that wrap, a grid smaller than
 * the blocks, and behind a gather in the same submission.
 *
 * Grid copies (rows picked between two grids of device memory) are held to the
 * same standard: every byte of both grids' area is compared, the rows left
 * alone and the gaps between rows and bases included; each refusal sits beside
 * the allowed request next to it, and leaves the destination as it was.
 *
 * Without a GPU (CI has nvcc but none) it prints "SKIP: no GPU (reason)" and
 * exits 0. Any mismatch exits 1.
 */
#include "gpu-copy.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#define POOL (80u << 20)     /* bytes of device pool and of host staging */
#define MAX_PIECES 65536

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static int failures;
static int cases;

static uint64_t
rnd(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545f4914f6cdd1dull;
}

static void
fill_random(uint8_t *p, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = rnd();
        memcpy(p + i, &v, 8);
    }
    for (; i < n; i++)
        p[i] = (uint8_t)rnd();
}

/* Poison that names its position, so a shifted copy cannot match it. */
static void
fill_poison(uint8_t *p, size_t n, uint8_t salt)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(salt ^ (i * 131u) ^ (i >> 8));
}

#define CK(call)                                                                     \
    do {                                                                             \
        cudaError_t e_ = (call);                                                     \
        if (e_ != cudaSuccess) {                                                     \
            fprintf(stderr, "FAIL: %s:%d %s: %s\n", __FILE__, __LINE__, #call,       \
                    cudaGetErrorString(e_));                                         \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

/* Number of differing bytes; prints the first few. */
static size_t
check(const uint8_t *got, const uint8_t *exp, size_t n, const char *what, int quiet)
{
    size_t bad = 0;

    if (memcmp(got, exp, n) == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (got[i] != exp[i]) {
            if (!quiet && bad < 4)
                fprintf(stderr, "  %s: byte %zu is 0x%02x, expected 0x%02x\n", what, i,
                        got[i], exp[i]);
            bad++;
        }
    }
    return bad;
}

struct set {
    const char *name;
    size_t n;
    size_t *dev_off;
    size_t *host_off;
    size_t *len;
    size_t dev_end;   /* extent used in each pool (compared in full) */
    size_t host_end;
};

enum align { ALIGN_ANY, ALIGN_SAME16, ALIGN_DELTA8, ALIGN_DELTA4, ALIGN_DELTA2, ALIGN_DELTA1 };

static size_t
len_loguniform(size_t lo, size_t hi)
{
    double u = (double)(rnd() >> 11) / 9007199254740992.0;
    double l = exp(log((double)lo) + u * (log((double)hi) - log((double)lo)));
    size_t v = (size_t)l;
    return v < lo ? lo : v > hi ? hi : v;
}

/* Pieces placed in order in host staging and in a shuffled order in the device
 * pool, each after a gap of 1..64 bytes, with the residue mod 16 set by `al`. */
static void
set_make(struct set *s, const char *name, size_t n, size_t lo, size_t hi, size_t budget,
         enum align al)
{
    size_t *perm = malloc(n * sizeof(*perm));
    size_t hcur = rnd() % 64, dcur = rnd() % 64, total = 0, k = 0;

    s->name = name;
    s->dev_off = malloc(n * sizeof(size_t));
    s->host_off = malloc(n * sizeof(size_t));
    s->len = malloc(n * sizeof(size_t));
    if (!perm || !s->dev_off || !s->host_off || !s->len) {
        fprintf(stderr, "FAIL: out of memory\n");
        exit(1);
    }
    for (; k < n; k++) {
        size_t l = lo == hi ? lo : len_loguniform(lo, hi);
        if (total + l > budget)
            break;
        total += l;
        s->len[k] = l;
        s->host_off[k] = hcur + 1 + rnd() % 64;
        hcur = s->host_off[k] + l;
    }
    s->n = k;
    for (size_t i = 0; i < k; i++)
        perm[i] = i;
    for (size_t i = k; i > 1; i--) {
        size_t j = rnd() % i, t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
    for (size_t j = 0; j < k; j++) {
        size_t i = perm[j];
        size_t d = dcur + 1 + rnd() % 64;
        size_t want;

        switch (al) {
        case ALIGN_SAME16: want = s->host_off[i] % 16; break;
        case ALIGN_DELTA8: want = (s->host_off[i] + 8) % 16; break;
        case ALIGN_DELTA4: want = (s->host_off[i] + 4) % 16; break;
        case ALIGN_DELTA2: want = (s->host_off[i] + 2) % 16; break;
        case ALIGN_DELTA1: want = (s->host_off[i] + 1) % 16; break;
        default: want = d % 16; break;
        }
        d += (want + 16 - d % 16) % 16;
        s->dev_off[i] = d;
        dcur = d + s->len[i];
    }
    s->host_end = hcur + 64;
    s->dev_end = dcur + 64;
    free(perm);
    if (s->host_end > POOL || s->dev_end > POOL) {
        fprintf(stderr, "FAIL: test set %s does not fit the pools\n", name);
        exit(1);
    }
}

static void
set_free(struct set *s)
{
    free(s->dev_off);
    free(s->host_off);
    free(s->len);
}

struct pools {
    uint8_t *dev;        /* device pool */
    uint8_t *host;       /* mapped pinned staging */
    uint8_t *dev_exp;    /* what the device pool must hold */
    uint8_t *host_exp;   /* what staging must hold */
    uint8_t *readback;
    gpu_copy_piece_t *pieces;
};

struct engine_cfg {
    const char *name;
    gpu_copy_engine_t engine;
    unsigned ctas;
    unsigned threads;
};

/* Runs one direction of one set on one engine and checks both pools in full. */
static void
run_case(struct pools *p, const struct set *s, gpu_copy_dir_t dir, const struct engine_cfg *ec)
{
    gpu_copy_params_t prm = {
        .field_mask = GPU_COPY_PARAM_MAX_CTAS | GPU_COPY_PARAM_THREADS |
                      GPU_COPY_PARAM_MAX_PIECES | GPU_COPY_PARAM_MAX_INFLIGHT,
        .max_ctas = ec->ctas, .threads = ec->threads, .max_pieces = MAX_PIECES,
        .max_inflight = 2,
    };
    gpu_copier_t *c = NULL;
    gpu_copy_op_t *op = NULL;
    gpu_copy_req_t req;
    size_t bad = 0, bytes = 0;
    int rc;

    cases++;
    /* Source random, destination poisoned; the reference is computed on the CPU. */
    if (dir == GPU_COPY_GATHER) {
        fill_random(p->dev_exp, s->dev_end);
        fill_poison(p->host, s->host_end, (uint8_t)rnd());
        memcpy(p->host_exp, p->host, s->host_end);
        CK(cudaMemcpy(p->dev, p->dev_exp, s->dev_end, cudaMemcpyHostToDevice));
        for (size_t i = 0; i < s->n; i++)
            memcpy(p->host_exp + s->host_off[i], p->dev_exp + s->dev_off[i], s->len[i]);
    } else {
        fill_random(p->host, s->host_end);
        memcpy(p->host_exp, p->host, s->host_end);
        fill_poison(p->dev_exp, s->dev_end, (uint8_t)rnd());
        CK(cudaMemcpy(p->dev, p->dev_exp, s->dev_end, cudaMemcpyHostToDevice));
        for (size_t i = 0; i < s->n; i++)
            memcpy(p->dev_exp + s->dev_off[i], p->host_exp + s->host_off[i], s->len[i]);
    }
    for (size_t i = 0; i < s->n; i++) {
        p->pieces[i].dev = p->dev + s->dev_off[i];
        p->pieces[i].host = p->host + s->host_off[i];
        p->pieces[i].len = s->len[i];
        bytes += s->len[i];
    }

    rc = gpu_copy_create(&prm, &c);
    if (rc == GPU_COPY_OK) {
        req = (gpu_copy_req_t){ .dir = dir, .engine = ec->engine, .pieces = p->pieces,
                                .npieces = s->n };
        rc = gpu_copy_submit(c, &req, &op);
        if (rc == GPU_COPY_OK)
            rc = gpu_copy_op_wait(op);
        gpu_copy_op_release(op);
    }
    if (rc != GPU_COPY_OK) {
        fprintf(stderr, "FAIL: %s %s %s: %s %s\n", s->name,
                dir == GPU_COPY_GATHER ? "gather" : "scatter", ec->name, gpu_copy_strstatus(rc),
                gpu_copy_last_error(c));
        failures++;
        gpu_copy_destroy(c);
        return;
    }
    gpu_copy_destroy(c);

    CK(cudaMemcpy(p->readback, p->dev, s->dev_end, cudaMemcpyDeviceToHost));
    bad += check(p->readback, p->dev_exp, s->dev_end, "device pool", 0);
    bad += check(p->host, p->host_exp, s->host_end, "host staging", 0);
    printf("%s %-7s %-8s %-14s pieces %6zu bytes %9zu\n", bad ? "FAIL" : "ok  ",
           dir == GPU_COPY_GATHER ? "gather" : "scatter", s->name, ec->name, s->n, bytes);
    if (bad)
        failures++;
}

/* The checker must see one corrupted byte inside a span and one in a canary. */
static void
negative_control(struct pools *p, const struct set *s)
{
    static const struct engine_cfg k = { "kernel/32", GPU_COPY_KERNEL, 32, 512 };
    size_t i = s->n / 2, in, gap;
    size_t before = (size_t)failures;

    run_case(p, s, GPU_COPY_GATHER, &k);
    if ((size_t)failures != before)
        return;
    in = s->host_off[i] + s->len[i] / 2;
    gap = s->host_off[i] + s->len[i];      /* first canary byte after span i */
    p->host[in] ^= 0x01;
    if (check(p->host, p->host_exp, s->host_end, "negative control", 1) != 1) {
        fprintf(stderr, "FAIL: negative control: a corrupted span byte went unseen\n");
        failures++;
    }
    p->host[in] ^= 0x01;
    p->host[gap] ^= 0x80;
    if (check(p->host, p->host_exp, s->host_end, "negative control", 1) != 1) {
        fprintf(stderr, "FAIL: negative control: a written canary went unseen\n");
        failures++;
    }
    p->host[gap] ^= 0x80;
    printf("ok   negative control: corrupted span byte and canary both detected\n");
}

static atomic_int cb_count;

static void
count_cb(void *arg)
{
    (void)arg;
    atomic_fetch_add(&cb_count, 1);
}

/* A gather of the set's pieces to come: random device bytes, poisoned staging, the
 * staging it must leave (host_exp), and the pieces. */
static void
gather_setup(struct pools *p, const struct set *s, uint8_t salt)
{
    fill_random(p->dev_exp, s->dev_end);
    fill_poison(p->host, s->host_end, salt);
    memcpy(p->host_exp, p->host, s->host_end);
    CK(cudaMemcpy(p->dev, p->dev_exp, s->dev_end, cudaMemcpyHostToDevice));
    for (size_t i = 0; i < s->n; i++) {
        memcpy(p->host_exp + s->host_off[i], p->dev_exp + s->dev_off[i], s->len[i]);
        p->pieces[i] = (gpu_copy_piece_t){ p->dev + s->dev_off[i], p->host + s->host_off[i], s->len[i] };
    }
}

/* Several submissions in flight at once, host callbacks, and the API's refusals. */
static void
api_cases(struct pools *p, const struct set *s)
{
    gpu_copy_params_t prm = {
        .field_mask = GPU_COPY_PARAM_MAX_PIECES | GPU_COPY_PARAM_MAX_INFLIGHT,
        .max_pieces = MAX_PIECES, .max_inflight = 3,
    };
    gpu_copier_t *c = NULL;
    gpu_copy_op_t *op[4] = { 0 };
    gpu_copy_req_t req = { 0 };
    size_t third = s->n / 3, bad;
    int rc, ok = 1;
    struct timespec t0, t;

    cases++;
    gather_setup(p, s, 0x5a);
    if (gpu_copy_create(&prm, &c) != GPU_COPY_OK) {
        fprintf(stderr, "FAIL: api: gpu_copy_create\n");
        failures++;
        return;
    }
    atomic_store(&cb_count, 0);
    static const gpu_copy_engine_t eng[3] = { GPU_COPY_KERNEL, GPU_COPY_BATCH, GPU_COPY_MEMCPY };
    for (int j = 0; j < 3; j++) {
        size_t from = third * (size_t)j, to = j == 2 ? s->n : third * (size_t)(j + 1);
        req = (gpu_copy_req_t){ .dir = GPU_COPY_GATHER, .engine = eng[j],
                                .pieces = p->pieces + from, .npieces = to - from,
                                .done_cb = count_cb };
        if ((rc = gpu_copy_submit(c, &req, &op[j])) != GPU_COPY_OK) {
            fprintf(stderr, "FAIL: api: submit %d: %s %s\n", j, gpu_copy_strstatus(rc),
                    gpu_copy_last_error(c));
            ok = 0;
        }
    }
    /* Every slot is owned now, done or not: a fourth submission must be refused. */
    rc = gpu_copy_submit(c, &req, &op[3]);
    if (rc != GPU_COPY_E_BUSY) {
        fprintf(stderr, "FAIL: api: fourth submit gave %s, not busy\n", gpu_copy_strstatus(rc));
        ok = 0;
    }
    for (int j = 0; j < 3; j++) {
        if (!op[j])
            continue;
        while ((rc = gpu_copy_op_poll(op[j])) == GPU_COPY_PENDING)
            ;
        if (rc != GPU_COPY_OK) {
            fprintf(stderr, "FAIL: api: poll %d: %s\n", j, gpu_copy_strstatus(rc));
            ok = 0;
        }
        float ms = -1;
        if (gpu_copy_op_elapsed_ms(op[j], &ms) != GPU_COPY_OK || ms < 0) {
            fprintf(stderr, "FAIL: api: elapsed %d\n", j);
            ok = 0;
        }
        gpu_copy_op_release(op[j]);
    }
    /* The callbacks run on a CUDA thread after the copies: give them 5 s. */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (atomic_load(&cb_count) < 3 && t.tv_sec - t0.tv_sec < 5);
    if (atomic_load(&cb_count) != 3) {
        fprintf(stderr, "FAIL: api: %d of 3 done callbacks ran\n", atomic_load(&cb_count));
        ok = 0;
    }
    bad = check(p->host, p->host_exp, s->host_end, "api host staging", 0);
    if (bad)
        ok = 0;

    /* Refusals: too many pieces, a NULL span, a bad direction; zero pieces is fine. */
    req = (gpu_copy_req_t){ .dir = GPU_COPY_GATHER, .pieces = p->pieces, .npieces = MAX_PIECES + 1 };
    if (gpu_copy_submit(c, &req, &op[0]) != GPU_COPY_E_TOOBIG)
        ok = 0, fprintf(stderr, "FAIL: api: too many pieces accepted\n");
    gpu_copy_piece_t nul = { .dev = NULL, .host = p->host, .len = 8 };
    req = (gpu_copy_req_t){ .dir = GPU_COPY_SCATTER, .pieces = &nul, .npieces = 1 };
    if (gpu_copy_submit(c, &req, &op[0]) != GPU_COPY_E_INVAL)
        ok = 0, fprintf(stderr, "FAIL: api: NULL span accepted\n");
    req = (gpu_copy_req_t){ .dir = (gpu_copy_dir_t)7, .pieces = p->pieces, .npieces = 1 };
    if (gpu_copy_submit(c, &req, &op[0]) != GPU_COPY_E_INVAL)
        ok = 0, fprintf(stderr, "FAIL: api: bad direction accepted\n");
    nul.dev = p->dev;
    nul.len = 0;
    req = (gpu_copy_req_t){ .dir = GPU_COPY_SCATTER, .pieces = &nul, .npieces = 1 };
    if (gpu_copy_submit(c, &req, &op[0]) != GPU_COPY_OK || gpu_copy_op_wait(op[0]) != GPU_COPY_OK)
        ok = 0, fprintf(stderr, "FAIL: api: an empty submission failed\n");
    else
        gpu_copy_op_release(op[0]);
    gpu_copy_destroy(c);
    printf("%s api: 3 submissions in flight (kernel, batch, memcpy), callbacks, busy, refusals\n",
           ok ? "ok  " : "FAIL");
    if (!ok)
        failures++;
}

/*
 * A copier of the copy engines alone (kernels = 0, what b10d makes without MPS):
 * a gather and a scatter by batch land byte for byte; the kernel, AUTO (which may
 * pick it) and sums are refused, so no kernel of this copier can take a co-resident
 * model's time slice.
 */
static void
engines_only_cases(struct pools *p, const struct set *s)
{
    gpu_copy_params_t prm = {
        .field_mask = GPU_COPY_PARAM_MAX_PIECES | GPU_COPY_PARAM_MAX_INFLIGHT |
                      GPU_COPY_PARAM_KERNELS,
        .max_pieces = MAX_PIECES, .max_inflight = 2, .kernels = 0,
    };
    gpu_copier_t *c = NULL;
    gpu_copy_op_t *op = NULL;
    gpu_copy_req_t req;
    int rc, ok = 1;

    cases++;
    if (gpu_copy_create(&prm, &c) != GPU_COPY_OK) {
        fprintf(stderr, "FAIL: engines only: gpu_copy_create\n");
        failures++;
        return;
    }
    /* Gather: device → staging. */
    gather_setup(p, s, 0x3c);
    req = (gpu_copy_req_t){ .dir = GPU_COPY_GATHER, .engine = GPU_COPY_BATCH,
                            .pieces = p->pieces, .npieces = s->n };
    if ((rc = gpu_copy_submit(c, &req, &op)) != GPU_COPY_OK || (rc = gpu_copy_op_wait(op)) != GPU_COPY_OK) {
        fprintf(stderr, "FAIL: engines only: gather: %s %s\n", gpu_copy_strstatus(rc),
                gpu_copy_last_error(c));
        ok = 0;
    } else {
        gpu_copy_op_release(op);
    }
    if (check(p->host, p->host_exp, s->host_end, "engines-only gather", 0))
        ok = 0;
    /* Scatter: staging → device. */
    fill_random(p->host, s->host_end);
    fill_poison(p->dev_exp, s->dev_end, 0x7e);
    CK(cudaMemcpy(p->dev, p->dev_exp, s->dev_end, cudaMemcpyHostToDevice));
    for (size_t i = 0; i < s->n; i++)
        memcpy(p->dev_exp + s->dev_off[i], p->host + s->host_off[i], s->len[i]);
    req.dir = GPU_COPY_SCATTER;
    if ((rc = gpu_copy_submit(c, &req, &op)) != GPU_COPY_OK || (rc = gpu_copy_op_wait(op)) != GPU_COPY_OK) {
        fprintf(stderr, "FAIL: engines only: scatter: %s %s\n", gpu_copy_strstatus(rc),
                gpu_copy_last_error(c));
        ok = 0;
    } else {
        gpu_copy_op_release(op);
    }
    uint8_t *got = malloc(s->dev_end);
    if (got == NULL) {
        fprintf(stderr, "FAIL: engines only: no memory\n");
        exit(1);
    }
    CK(cudaMemcpy(got, p->dev, s->dev_end, cudaMemcpyDeviceToHost));
    if (check(got, p->dev_exp, s->dev_end, "engines-only scatter", 0))
        ok = 0;
    free(got);
    /* What would run a kernel is refused. */
    static const gpu_copy_engine_t refused[2] = { GPU_COPY_KERNEL, GPU_COPY_AUTO };
    for (int j = 0; j < 2; j++) {
        req = (gpu_copy_req_t){ .dir = GPU_COPY_GATHER, .engine = refused[j], .pieces = p->pieces,
                                .npieces = s->n };
        if ((rc = gpu_copy_submit(c, &req, &op)) != GPU_COPY_E_INVAL) {
            fprintf(stderr, "FAIL: engines only: engine %d gave %s, not refused\n", (int)refused[j],
                    gpu_copy_strstatus(rc));
            ok = 0;
            if (rc == GPU_COPY_OK)
                gpu_copy_op_wait(op), gpu_copy_op_release(op);
        }
    }
    gpu_copy_sum_t sum = { .bytes = p->host, .nblocks = 1, .seed = 1 };
    req = (gpu_copy_req_t){ .dir = GPU_COPY_GATHER, .engine = GPU_COPY_BATCH, .pieces = p->pieces,
                            .npieces = s->n, .sum = &sum };
    if ((rc = gpu_copy_submit(c, &req, &op)) != GPU_COPY_E_INVAL) {
        fprintf(stderr, "FAIL: engines only: a sum gave %s, not refused\n", gpu_copy_strstatus(rc));
        ok = 0;
        if (rc == GPU_COPY_OK)
            gpu_copy_op_wait(op), gpu_copy_op_release(op);
    }
    gpu_copy_destroy(c);
    printf("%s engines only: batch gather and scatter exact; kernel, auto and sums refused\n",
           ok ? "ok  " : "FAIL");
    if (!ok)
        failures++;
}

/* Block i of bytes (GPU_COPY_SUM_BLOCK each) as libxxhash sums it, against the GPU's. */
static int
sums_match(const char *what, const uint8_t *ref, size_t nblocks, uint64_t seed,
           const uint64_t *got)
{
    size_t bad = 0;
    for (size_t i = 0; i < nblocks; i++) {
        uint64_t want = XXH3_64bits_withSeed(ref + i * GPU_COPY_SUM_BLOCK, GPU_COPY_SUM_BLOCK,
                                             seed + i);
        if (got[i] != want && bad++ < 3)
            fprintf(stderr, "FAIL: %s: block %zu of %zu: 0x%016llx, libxxhash 0x%016llx\n",
                    what, i, nblocks, (unsigned long long)got[i], (unsigned long long)want);
    }
    return bad == 0;
}

/* Submit req (sum set), wait, compare; on success *got holds the sums (caller's copy). */
static int
sum_run(gpu_copier_t *c, const gpu_copy_req_t *req, uint64_t *got)
{
    gpu_copy_op_t *op = NULL;
    int rc = gpu_copy_submit(c, req, &op);
    if (rc != GPU_COPY_OK) {
        fprintf(stderr, "FAIL: sums: submit: %s %s\n", gpu_copy_strstatus(rc), gpu_copy_last_error(c));
        return 0;
    }
    rc = gpu_copy_op_wait(op);
    const uint64_t *sums = gpu_copy_op_sums(op);
    if (rc == GPU_COPY_OK && sums)
        memcpy(got, sums, req->sum->nblocks * sizeof(*got));
    gpu_copy_op_release(op);
    if (rc != GPU_COPY_OK || !sums) {
        fprintf(stderr, "FAIL: sums: wait: %s, table %p\n", gpu_copy_strstatus(rc), (const void *)sums);
        return 0;
    }
    return 1;
}

static void
sum_cases(struct pools *p, const struct set *s)
{
    enum { MAX_BLOCKS = 4096 };
    gpu_copy_params_t prm = {
        .field_mask = GPU_COPY_PARAM_MAX_PIECES | GPU_COPY_PARAM_MAX_CTAS |
                      GPU_COPY_PARAM_MAX_SUM_BLOCKS,
        .max_pieces = MAX_PIECES, .max_ctas = 3, .max_sum_blocks = MAX_BLOCKS,
    };
    gpu_copier_t *c = NULL;
    uint64_t *got = malloc(MAX_BLOCKS * sizeof(*got));
    int ok = 1, n = 0;

    cases++;
    if (!got || gpu_copy_create(&prm, &c) != GPU_COPY_OK) {
        fprintf(stderr, "FAIL: sums: gpu_copy_create\n");
        failures++;
        free(got);
        return;
    }
    /* Blocks in staging and in device memory; 3 CTAs of 16 groups: 4096 blocks loop 85 times. */
    size_t span = (size_t)MAX_BLOCKS * GPU_COPY_SUM_BLOCK + 16;
    fill_random(p->host, span);
    memcpy(p->host_exp, p->host, span);
    CK(cudaMemcpy(p->dev, p->host_exp, span, cudaMemcpyHostToDevice));
    static const size_t counts[] = { 1, 3, 17, 48, 300, MAX_BLOCKS };
    const uint64_t seeds[] = { 0, rnd(), UINT64_MAX - 2 };    /* the last wraps past zero */
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
        for (size_t si = 0; si < sizeof(seeds) / sizeof(seeds[0]); si++)
            for (int where = 0; where < 3; where++) {
                /* staging at 0, staging at 16 (aligned, not to a page), device memory */
                size_t off = where == 1 ? 16 : 0;
                const void *bytes = where == 2 ? (const void *)p->dev : (const void *)(p->host + off);
                gpu_copy_sum_t sum = { .bytes = bytes, .nblocks = counts[k], .seed = seeds[si] };
                gpu_copy_req_t req = { .dir = GPU_COPY_SCATTER, .sum = &sum };
                char what[96];
                snprintf(what, sizeof(what), "sums of %zu blocks, %s, seed %zu", counts[k],
                         where == 2 ? "device" : off ? "staging+16" : "staging", si);
                if (!sum_run(c, &req, got) || !sums_match(what, p->host_exp + off, counts[k],
                                                            seeds[si], got))
                    ok = 0;
                n++;
            }

    /* Behind a gather in one submission: the sums are of the view the copy wrote. */
    fill_random(p->dev_exp, s->dev_end);
    fill_poison(p->host, s->host_end, 0x3c);
    memcpy(p->host_exp, p->host, s->host_end);
    CK(cudaMemcpy(p->dev, p->dev_exp, s->dev_end, cudaMemcpyHostToDevice));
    for (size_t i = 0; i < s->n; i++) {
        memcpy(p->host_exp + s->host_off[i], p->dev_exp + s->dev_off[i], s->len[i]);
        p->pieces[i] = (gpu_copy_piece_t){ p->dev + s->dev_off[i], p->host + s->host_off[i],
                                           s->len[i] };
    }
    size_t nb = s->host_end / GPU_COPY_SUM_BLOCK < MAX_BLOCKS ? s->host_end / GPU_COPY_SUM_BLOCK
                                                              : MAX_BLOCKS;
    uint64_t seed = rnd();
    gpu_copy_sum_t gsum = { .bytes = p->host, .nblocks = nb, .seed = seed };
    static const gpu_copy_engine_t eng[2] = { GPU_COPY_KERNEL, GPU_COPY_BATCH };
    for (int e = 0; e < 2; e++) {
        gpu_copy_req_t req = { .dir = GPU_COPY_GATHER, .engine = eng[e], .pieces = p->pieces,
                               .npieces = s->n, .sum = &gsum };
        if (!sum_run(c, &req, got) || !sums_match("gather then sums", p->host_exp, nb, seed, got))
            ok = 0;
        n++;
    }

    /* A flipped byte changes its block's sum and no other (the control that the check can fail). */
    p->host[5 * GPU_COPY_SUM_BLOCK + 77] ^= 0x10;
    gpu_copy_sum_t fsum = { .bytes = p->host, .nblocks = 8, .seed = seed };
    gpu_copy_req_t freq = { .dir = GPU_COPY_SCATTER, .sum = &fsum };
    if (sum_run(c, &freq, got)) {
        for (size_t i = 0; i < 8; i++) {
            uint64_t want = XXH3_64bits_withSeed(p->host_exp + i * GPU_COPY_SUM_BLOCK,
                                                 GPU_COPY_SUM_BLOCK, seed + i);
            if ((got[i] != want) != (i == 5)) {
                fprintf(stderr, "FAIL: sums: flipped byte in block 5, block %zu %s\n", i,
                        i == 5 ? "unchanged" : "changed");
                ok = 0;
            }
        }
    } else {
        ok = 0;
    }
    p->host[5 * GPU_COPY_SUM_BLOCK + 77] ^= 0x10;

    /* A checked scatter: the view's sums against the ones it must have, then the gated copy. */
    const size_t table_at = 64u << 20;      /* past every set's staging, inside the pool */
    uint64_t *expect = (uint64_t *)(p->host + table_at);
    for (size_t i = 0; i < nb; i++)
        expect[i] = XXH3_64bits_withSeed(p->host + i * GPU_COPY_SUM_BLOCK, GPU_COPY_SUM_BLOCK,
                                         seed + i);
    for (int flip = 0; flip < 2; flip++) {
        /* The device pool poisoned; the view holds the pieces' bytes (host_exp from the gather). */
        fill_poison(p->dev_exp, s->dev_end, 0x6d);
        CK(cudaMemcpy(p->dev, p->dev_exp, s->dev_end, cudaMemcpyHostToDevice));
        if (!flip)
            for (size_t i = 0; i < s->n; i++)
                memcpy(p->dev_exp + s->dev_off[i], p->host + s->host_off[i], s->len[i]);
        size_t at = (nb / 2) * GPU_COPY_SUM_BLOCK + 100;
        if (flip)
            p->host[at] ^= 0x01;        /* after the sums it must have were taken */
        gpu_copy_sum_t csum = { .bytes = p->host, .nblocks = nb, .seed = seed, .expect = expect };
        gpu_copy_req_t req = { .dir = GPU_COPY_SCATTER, .pieces = p->pieces, .npieces = s->n,
                               .sum = &csum };
        if (!sum_run(c, &req, got)) {
            ok = 0;
        } else {
            size_t differ = 0;
            for (size_t i = 0; i < nb; i++)
                differ += got[i] != expect[i];
            CK(cudaMemcpy(p->readback, p->dev, s->dev_end, cudaMemcpyDeviceToHost));
            size_t bad = check(p->readback, p->dev_exp, s->dev_end,
                               flip ? "checked scatter, one byte flipped" : "checked scatter", 0);
            if (differ != (size_t)flip || bad) {
                fprintf(stderr, "FAIL: sums: checked scatter%s: %zu blocks differ, %zu bytes wrong "
                        "in the device pool\n", flip ? " (flipped)" : "", differ, bad);
                ok = 0;
            }
        }
        if (flip)
            p->host[at] ^= 0x01;
        n++;
    }

    /* Refusals beside the accepted cases above: misaligned, too many blocks, no bytes; a gate on
     * a gather, on the copy engines, misaligned, or over no block. */
    gpu_copy_op_t *op = NULL;
    gpu_copy_sum_t bad[7] = {
        { .bytes = p->host + 8, .nblocks = 1 },
        { .bytes = p->host, .nblocks = MAX_BLOCKS + 1 },
        { .bytes = NULL, .nblocks = 1 },
        { .bytes = p->host, .nblocks = 1, .expect = expect },
        { .bytes = p->host, .nblocks = 1, .expect = expect },
        { .bytes = p->host, .nblocks = 1, .expect = (const uint8_t *)expect + 4 },
        { .bytes = p->host, .nblocks = 0, .expect = expect },   /* a check of nothing */
    };
    for (int b = 0; b < 7; b++) {
        gpu_copy_req_t req = { .dir = b == 3 ? GPU_COPY_GATHER : GPU_COPY_SCATTER,
                               .engine = b == 4 ? GPU_COPY_BATCH : GPU_COPY_AUTO, .sum = &bad[b] };
        if (gpu_copy_submit(c, &req, &op) != GPU_COPY_E_INVAL) {
            fprintf(stderr, "FAIL: sums: refusal %d accepted\n", b);
            ok = 0;
            gpu_copy_op_wait(op);
            gpu_copy_op_release(op);
        }
    }
    /* No sums asked, no table. */
    gpu_copy_req_t plain = { .dir = GPU_COPY_SCATTER };
    if (gpu_copy_submit(c, &plain, &op) == GPU_COPY_OK) {
        gpu_copy_op_wait(op);
        if (gpu_copy_op_sums(op) != NULL)
            ok = 0, fprintf(stderr, "FAIL: sums: a table where none was asked\n");
        gpu_copy_op_release(op);
    } else {
        ok = 0;
    }
    gpu_copy_destroy(c);
    free(got);
    printf("%s sums: %d submissions against libxxhash, behind gathers, checked scatters, flips, "
           "7 refusals\n",
           ok ? "ok  " : "FAIL", n);
    if (!ok)
        failures++;
}

/* ---------------------------------------------------------------- grid copies */

#define GRID_MAX_BASES 32

/* One side of a grid copy: its bases as offsets in the device pool and as addresses. */
struct gside {
    uint32_t nbases, per_base;
    uint64_t stride;
    size_t   off[GRID_MAX_BASES];
    uint64_t bases[GRID_MAX_BASES];
};

/* Where row k of g lies in the device pool (gpu-copy.h's formula, on offsets). */
static size_t
grid_row(const struct gside *g, uint32_t k)
{
    return g->off[k / g->per_base] + (size_t)(k % g->per_base) * g->stride;
}

/*
 * Places g's bases in the device pool from *cur on, in a shuffled order, each
 * after a gap of 1..64 bytes, at `residue` mod 16 (-1: any, drawn per base);
 * *cur ends past the last row. The gaps and the bytes between rows are canaries.
 */
static void
grid_place(struct gside *g, uint8_t *dev, size_t *cur, uint64_t length, int residue)
{
    uint32_t perm[GRID_MAX_BASES];

    for (uint32_t b = 0; b < g->nbases; b++)
        perm[b] = b;
    for (uint32_t b = g->nbases; b > 1; b--) {
        uint32_t j = (uint32_t)(rnd() % b), t = perm[b - 1];
        perm[b - 1] = perm[j];
        perm[j] = t;
    }
    for (uint32_t j = 0; j < g->nbases; j++) {
        size_t at = *cur + 1 + rnd() % 64;
        size_t want = residue < 0 ? rnd() % 16 : (size_t)residue;

        at += (want + 16 - at % 16) % 16;
        g->off[perm[j]] = at;
        g->bases[perm[j]] = (uint64_t)(uintptr_t)(dev + at);
        *cur = at + (size_t)(g->per_base - 1) * g->stride + length;
    }
    if (*cur + 64 > POOL) {
        fprintf(stderr, "FAIL: a grid of %u bases does not fit the pool\n", g->nbases);
        exit(1);
    }
}

/*
 * count picks onto distinct destination rows (a shuffle of them), from source
 * rows drawn at random, so that sources repeat: the second and third picks
 * read one row. The first pick is of each grid's last row.
 */
static void
grid_picks(uint32_t *pairs, size_t count, uint32_t src_rows, uint32_t dst_rows)
{
    uint32_t *perm = malloc(dst_rows * sizeof(*perm));

    if (!perm || count > dst_rows) {
        fprintf(stderr, "FAIL: grid picks: no memory, or more picks than rows\n");
        exit(1);
    }
    for (uint32_t i = 0; i < dst_rows; i++)
        perm[i] = dst_rows - 1 - i;     /* the last row first, the rest shuffled behind it */
    for (uint32_t i = dst_rows - 1; i > 1; i--) {
        uint32_t j = 1 + (uint32_t)(rnd() % i), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < count; i++) {
        pairs[2 * i] = (uint32_t)(rnd() % src_rows);
        pairs[2 * i + 1] = perm[i];
    }
    pairs[0] = src_rows - 1;
    if (count >= 3)
        pairs[2] = pairs[4];
    free(perm);
}

/* What the picks leave in the pool's image: each destination row a copy of its source row. */
static void
grid_expect(uint8_t *img, const struct gside *s, const struct gside *d, uint64_t length,
            const uint32_t *pairs, size_t count)
{
    for (size_t i = 0; i < count; i++)
        memcpy(img + grid_row(d, pairs[2 * i + 1]), img + grid_row(s, pairs[2 * i]), length);
}

static gpu_copy_grid_t
grid_of(const struct gside *s, const struct gside *d, uint64_t length, const uint32_t *pairs,
        size_t count)
{
    return (gpu_copy_grid_t){
        .src = { .bases = s->bases, .nbases = s->nbases, .per_base = s->per_base,
                 .stride = s->stride },
        .dst = { .bases = d->bases, .nbases = d->nbases, .per_base = d->per_base,
                 .stride = d->stride },
        .length = length, .pairs = pairs, .count = count,
    };
}

/* The grids' area of the pool, [0, end): sources random below dst_at, destinations poisoned. */
static void
grid_fill(struct pools *p, size_t dst_at, size_t end, uint8_t salt)
{
    fill_random(p->dev_exp, dst_at);
    fill_poison(p->dev_exp + dst_at, end - dst_at, salt);
    CK(cudaMemcpy(p->dev, p->dev_exp, end, cudaMemcpyHostToDevice));
}

/* Bytes of the area that differ from its image. */
static size_t
grid_compare(struct pools *p, size_t end, const char *what)
{
    CK(cudaMemcpy(p->readback, p->dev, end, cudaMemcpyDeviceToHost));
    return check(p->readback, p->dev_exp, end, what, 0);
}

static gpu_copier_t *
grid_copier(unsigned ctas, unsigned threads, size_t max_pieces, int kernels)
{
    gpu_copy_params_t prm = {
        .field_mask = GPU_COPY_PARAM_MAX_CTAS | GPU_COPY_PARAM_THREADS |
                      GPU_COPY_PARAM_MAX_PIECES | GPU_COPY_PARAM_MAX_INFLIGHT |
                      GPU_COPY_PARAM_KERNELS,
        .max_ctas = ctas, .threads = threads, .max_pieces = max_pieces, .max_inflight = 2,
        .kernels = kernels,
    };
    gpu_copier_t *c = NULL;

    return gpu_copy_create(&prm, &c) == GPU_COPY_OK ? c : NULL;
}

/* Submits req and waits for it: its status. */
static int
grid_run(gpu_copier_t *c, const gpu_copy_req_t *req)
{
    gpu_copy_op_t *op = NULL;
    int rc = gpu_copy_submit(c, req, &op);

    if (rc == GPU_COPY_OK) {
        rc = gpu_copy_op_wait(op);
        gpu_copy_op_release(op);
    }
    return rc;
}

struct grid_cfg {
    const char *name;
    gpu_copy_engine_t engine;
    unsigned ctas, threads;
    int residue;        /* the destination bases' residue mod 16 (-1: any) */
};

/*
 * One grid copy between s and d, placed afresh in the pool, and the whole
 * area compared: picked rows, rows left alone, the gaps, and the sources
 * (which must not change). Returns 1 when every byte is as expected.
 */
static int
grid_case(struct pools *p, const char *what, const struct grid_cfg *cfg, struct gside *s,
          struct gside *d, uint64_t length, int src_residue, const uint32_t *pairs, size_t count)
{
    size_t cur = rnd() % 64, dst_at, end, bad = 0;
    gpu_copier_t *c;
    int rc = GPU_COPY_E_NOMEM;

    cases++;
    grid_place(s, p->dev, &cur, length, src_residue);
    dst_at = cur + 64;
    cur = dst_at;
    grid_place(d, p->dev, &cur, length, cfg->residue);
    end = cur + 64;
    grid_fill(p, dst_at, end, (uint8_t)rnd());

    c = grid_copier(cfg->ctas, cfg->threads, MAX_PIECES, 1);
    if (c != NULL) {
        gpu_copy_grid_t g = grid_of(s, d, length, pairs, count);
        gpu_copy_req_t req = { .engine = cfg->engine, .grid = &g };
        rc = grid_run(c, &req);
    }
    if (rc != GPU_COPY_OK) {
        fprintf(stderr, "FAIL: grid %s %s: %s %s\n", what, cfg->name, gpu_copy_strstatus(rc),
                c ? gpu_copy_last_error(c) : "no copier");
        failures++;
        gpu_copy_destroy(c);
        return 0;
    }
    gpu_copy_destroy(c);
    grid_expect(p->dev_exp, s, d, length, pairs, count);
    bad = grid_compare(p, end, "grid area");
    printf("%s grid %-9s %-14s rows %8llu B, %3zu picks, %ux%u -> %ux%u rows, strides %llu/%llu\n",
           bad ? "FAIL" : "ok  ", what, cfg->name, (unsigned long long)length, count, s->nbases,
           s->per_base, d->nbases, d->per_base, (unsigned long long)s->stride,
           (unsigned long long)d->stride);
    if (bad)
        failures++;
    return bad == 0;
}

/*
 * Rows picked at random between grids of several bases each, shuffled through
 * the pool, each side with a stride of its own: rows of 32 KiB and 4 KiB on
 * 16-byte aligned bases and strides, and of 777 bytes on bases and odd
 * strides of any residue, where the vector width falls back row by row.
 */
static void
grid_pick_cases(struct pools *p, int quick)
{
    enum { SRC_BASES = 6, SRC_PER = 16, DST_BASES = 5, DST_PER = 20, PICKS = 75 };
    static const struct { const char *name; uint64_t length; int odd; } rows[] = {
        { "32KiB", 32768, 0 }, { "4KiB", 4096, 0 }, { "777B-odd", 777, 1 },
    };
    static const struct grid_cfg cfgs[] = {
        { "kernel/1x32", GPU_COPY_KERNEL, 1, 32, 0 },
        { "auto/3x256", GPU_COPY_AUTO, 3, 256, 0 },
        { "kernel/32x512", GPU_COPY_KERNEL, 32, 512, 0 },
    };
    uint32_t pairs[2 * PICKS];

    for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++)
        for (size_t e = 0; e < sizeof(cfgs) / sizeof(cfgs[0]); e++) {
            if (quick && e != 1)
                continue;
            uint64_t len = rows[r].length;
            struct gside s = { .nbases = SRC_BASES, .per_base = SRC_PER };
            struct gside d = { .nbases = DST_BASES, .per_base = DST_PER };
            struct grid_cfg cfg = cfgs[e];

            /* Strides that differ: the source's at most the destination's less 2 (16). */
            if (rows[r].odd) {
                s.stride = len + 2 * (rnd() % 32) + 1;
                d.stride = len + 2 * (rnd() % 32) + 65;
                cfg.residue = -1;
            } else {
                s.stride = len + 16 * (1 + rnd() % 8);
                d.stride = len + 16 * (9 + rnd() % 8);
            }
            grid_picks(pairs, PICKS, SRC_BASES * SRC_PER, DST_BASES * DST_PER);
            grid_case(p, rows[r].name, &cfg, &s, &d, len, rows[r].odd ? -1 : 0, pairs, PICKS);
        }
}

/*
 * A few rows of 8 MiB and a bit: submission cuts each into slices (a warp
 * each), the last slice shorter, and the slices keep the residues: on
 * aligned bases, on bases 8 apart mod 16, and on any.
 */
static void
grid_long_rows(struct pools *p, int quick)
{
    static const struct grid_cfg cfgs[] = {
        { "kernel/32x512", GPU_COPY_KERNEL, 32, 512, 0 },
        { "auto/1x32", GPU_COPY_AUTO, 1, 32, -1 },
        { "kernel/3x256", GPU_COPY_KERNEL, 3, 256, 8 },
    };
    /* Source row 3 twice; every destination row once. */
    static const uint32_t pairs[6] = { 3, 1, 0, 2, 3, 0 };
    const uint64_t len = (8u << 20) + 333;

    for (size_t e = 0; e < sizeof(cfgs) / sizeof(cfgs[0]); e++) {
        if (quick && e != 1)
            continue;
        struct gside s = { .nbases = 2, .per_base = 2, .stride = len + 4096 + 48 };
        struct gside d = { .nbases = 3, .per_base = 1, .stride = 0 };
        grid_case(p, "long-rows", &cfgs[e], &s, &d, len, 0, pairs, 3);
    }
}

/*
 * Submits req on c, which must answer want; then the whole area must match
 * its image: with the request's rows copied when it was to succeed, and as it
 * was when it was to be refused. A mismatch is reported and taken as the
 * image, so that the steps after it are judged on their own.
 */
static void
grid_step(struct pools *p, gpu_copier_t *c, const gpu_copy_req_t *req, int want,
          const struct gside *s, const struct gside *d, size_t end, const char *what, int *ok)
{
    int rc = grid_run(c, req);

    if (rc != want) {
        fprintf(stderr, "FAIL: grid refusals: %s gave %s, not %s %s\n", what,
                gpu_copy_strstatus(rc), gpu_copy_strstatus(want), gpu_copy_last_error(c));
        *ok = 0;
    }
    if (rc == GPU_COPY_OK && want == GPU_COPY_OK)
        grid_expect(p->dev_exp, s, d, req->grid->length, req->grid->pairs, req->grid->count);
    if (grid_compare(p, end, what)) {
        fprintf(stderr, "FAIL: grid refusals: %s: the grids' bytes are not as expected\n", what);
        *ok = 0;
        memcpy(p->dev_exp, p->readback, end);
    }
}

/* Four picks onto destination rows no step named before, from *next on. */
static void
grid_fresh(uint32_t *pairs, uint32_t *next, uint32_t src_rows)
{
    for (int i = 0; i < 4; i++) {
        pairs[2 * i] = (uint32_t)(rnd() % src_rows);
        pairs[2 * i + 1] = (*next)++;
    }
}

/*
 * Each refusal beside the same request made right, which succeeds: an index
 * equal to its grid's rows on either side, the copy engines, a sum, pieces, a
 * zero base, a base whose last row would wrap 2^64, a copier without kernels,
 * more bases than max_pieces, and picks and bases past 3 x max_pieces. Every
 * refused request names rows still poisoned, which must stay so.
 */
static void
grid_refusals(struct pools *p)
{
    enum { MAXP = 16, LEN = 256, SRC_ROWS = 8, DST_ROWS = 96 };
    struct gside s = { .nbases = 2, .per_base = 4, .stride = 320 };
    struct gside d = { .nbases = 2, .per_base = 48, .stride = 272 };
    uint32_t pairs[2 * 3 * MAXP];
    uint32_t next = 0;      /* the first destination row no step has named */
    size_t cur = 0, dst_at, end;
    gpu_copy_grid_t g;
    gpu_copy_req_t req;
    int ok = 1;

    cases++;
    grid_place(&s, p->dev, &cur, LEN, 0);
    dst_at = cur + 64;
    cur = dst_at;
    grid_place(&d, p->dev, &cur, LEN, 0);
    end = cur + 64;
    grid_fill(p, dst_at, end, 0x47);
    gpu_copier_t *c = grid_copier(32, 512, MAXP, 1);
    gpu_copier_t *engines_only = grid_copier(32, 512, MAXP, 0);
    if (!c || !engines_only) {
        fprintf(stderr, "FAIL: grid refusals: gpu_copy_create\n");
        failures++;
        gpu_copy_destroy(c);
        gpu_copy_destroy(engines_only);
        return;
    }

    /* Picks and bases at most 3 x max_pieces: 45 picks and 4 bases are refused, 44 go. */
    for (uint32_t i = 0; i < 3 * MAXP - 3; i++) {
        pairs[2 * i] = (uint32_t)(rnd() % SRC_ROWS);
        pairs[2 * i + 1] = i;
    }
    g = grid_of(&s, &d, LEN, pairs, 3 * MAXP - 3);
    req = (gpu_copy_req_t){ .grid = &g };
    grid_step(p, c, &req, GPU_COPY_E_TOOBIG, &s, &d, end, "45 picks + 4 bases", &ok);
    g.count = 3 * MAXP - 4;
    grid_step(p, c, &req, GPU_COPY_OK, &s, &d, end, "44 picks + 4 bases", &ok);
    next = 3 * MAXP - 4;

    /* An index equal to its grid's rows, in the third pick; one less is the last row. */
    grid_fresh(pairs, &next, SRC_ROWS);
    g = grid_of(&s, &d, LEN, pairs, 4);
    pairs[4] = SRC_ROWS;
    grid_step(p, c, &req, GPU_COPY_E_INVAL, &s, &d, end, "source index == rows", &ok);
    pairs[4] = SRC_ROWS - 1;
    grid_step(p, c, &req, GPU_COPY_OK, &s, &d, end, "source index == rows - 1", &ok);
    grid_fresh(pairs, &next, SRC_ROWS);
    pairs[5] = DST_ROWS;
    grid_step(p, c, &req, GPU_COPY_E_INVAL, &s, &d, end, "destination index == rows", &ok);
    pairs[5] = DST_ROWS - 1;    /* no fresh pick reaches it: checked below */
    grid_step(p, c, &req, GPU_COPY_OK, &s, &d, end, "destination index == rows - 1", &ok);

    /* Only the kernel finds rows: the copy engines are refused. */
    grid_fresh(pairs, &next, SRC_ROWS);
    req.engine = GPU_COPY_MEMCPY;
    grid_step(p, c, &req, GPU_COPY_E_INVAL, &s, &d, end, "engine memcpy", &ok);
    req.engine = GPU_COPY_BATCH;
    grid_step(p, c, &req, GPU_COPY_E_INVAL, &s, &d, end, "engine batch", &ok);
    req.engine = GPU_COPY_KERNEL;
    grid_step(p, c, &req, GPU_COPY_OK, &s, &d, end, "engine kernel", &ok);
    req.engine = GPU_COPY_AUTO;

    /* No sum, and no pieces, beside a grid. */
    gpu_copy_sum_t sum = { .bytes = p->host, .nblocks = 1, .seed = 1 };
    grid_fresh(pairs, &next, SRC_ROWS);
    req.sum = &sum;
    grid_step(p, c, &req, GPU_COPY_E_INVAL, &s, &d, end, "a sum given", &ok);
    req.sum = NULL;
    grid_step(p, c, &req, GPU_COPY_OK, &s, &d, end, "no sum", &ok);
    gpu_copy_piece_t piece = { .dev = p->dev + end, .host = p->host, .len = 64 };
    grid_fresh(pairs, &next, SRC_ROWS);
    req.pieces = &piece;
    req.npieces = 1;
    grid_step(p, c, &req, GPU_COPY_E_INVAL, &s, &d, end, "a piece given", &ok);
    req.pieces = NULL;
    req.npieces = 0;
    grid_step(p, c, &req, GPU_COPY_OK, &s, &d, end, "no piece", &ok);

    /* A zero base; a base whose last row would end past 2^64. */
    struct gside bad = s;
    grid_fresh(pairs, &next, SRC_ROWS);
    bad.bases[1] = 0;
    g = grid_of(&bad, &d, LEN, pairs, 4);
    grid_step(p, c, &req, GPU_COPY_E_INVAL, &s, &d, end, "a zero base", &ok);
    g = grid_of(&s, &d, LEN, pairs, 4);
    grid_step(p, c, &req, GPU_COPY_OK, &s, &d, end, "the base restored", &ok);
    bad = d;
    grid_fresh(pairs, &next, SRC_ROWS);
    bad.bases[0] = UINT64_MAX - ((uint64_t)(d.per_base - 1) * d.stride + LEN) + 2;
    g = grid_of(&s, &bad, LEN, pairs, 4);
    grid_step(p, c, &req, GPU_COPY_E_INVAL, &s, &d, end, "a base that wraps", &ok);
    g = grid_of(&s, &d, LEN, pairs, 4);
    grid_step(p, c, &req, GPU_COPY_OK, &s, &d, end, "the base restored", &ok);

    /* A copier without kernels has no grid kernel. */
    grid_fresh(pairs, &next, SRC_ROWS);
    grid_step(p, engines_only, &req, GPU_COPY_E_INVAL, &s, &d, end, "a copier without kernels", &ok);
    grid_step(p, c, &req, GPU_COPY_OK, &s, &d, end, "a copier with kernels", &ok);

    /* Bases at most max_pieces in all: 9 + 8 are refused, 8 + 8 go (the extra ones alias base 0). */
    struct gside wide_s = s, wide_d = d;
    wide_s.nbases = MAXP / 2 + 1;
    wide_d.nbases = MAXP / 2;
    for (uint32_t b = 2; b < wide_s.nbases; b++) {
        wide_s.off[b] = s.off[0];
        wide_s.bases[b] = s.bases[0];
    }
    for (uint32_t b = 2; b < wide_d.nbases; b++) {
        wide_d.off[b] = d.off[0];
        wide_d.bases[b] = d.bases[0];
    }
    pairs[0] = 0;
    pairs[1] = next++;
    g = grid_of(&wide_s, &wide_d, LEN, pairs, 1);
    grid_step(p, c, &req, GPU_COPY_E_TOOBIG, &wide_s, &wide_d, end, "17 bases", &ok);
    wide_s.nbases = MAXP / 2;
    g = grid_of(&wide_s, &wide_d, LEN, pairs, 1);
    grid_step(p, c, &req, GPU_COPY_OK, &wide_s, &wide_d, end, "16 bases", &ok);

    if (next > DST_ROWS - 1) {
        fprintf(stderr, "FAIL: grid refusals: %u fresh rows reach the one kept for the last\n", next);
        ok = 0;
    }
    gpu_copy_destroy(engines_only);
    gpu_copy_destroy(c);
    printf("%s grid refusals: index == rows either side, memcpy, batch, sum, pieces, zero and "
           "wrapping bases, no kernels, 17 bases, 45 + 4 over 48; each beside its allowed case\n",
           ok ? "ok  " : "FAIL");
    if (!ok)
        failures++;
}

int
main(int argc, char **argv)
{
    const char *why = NULL;
    struct pools p;
    int ndev = gpu_copy_device_count(&why);

    if (ndev == 0) {
        printf("SKIP: no GPU (%s)\n", why ? why : "unknown");
        return 0;
    }
    /* test-gpu-copy [seed [quick]]: quick runs a few sets and engines (for
     * compute-sanitizer, which is slow). */
    int quick = argc > 2 && strcmp(argv[2], "quick") == 0;
    if (argc > 1)
        rng_state = strtoull(argv[1], NULL, 0) | 1;
    {
        struct cudaDeviceProp prop;
        CK(cudaGetDeviceProperties(&prop, 0));
        printf("device 0: %s, %d SMs; seed 0x%llx\n", prop.name, prop.multiProcessorCount,
               (unsigned long long)rng_state);
    }

    CK(cudaSetDevice(0));
    CK(cudaMalloc((void **)&p.dev, POOL));
    if (gpu_copy_host_alloc(POOL, (void **)&p.host) != GPU_COPY_OK) {
        fprintf(stderr, "FAIL: gpu_copy_host_alloc\n");
        return 1;
    }
    p.dev_exp = malloc(POOL);
    p.host_exp = malloc(POOL);
    p.readback = malloc(POOL);
    p.pieces = calloc(MAX_PIECES, sizeof(*p.pieces));
    if (!p.dev_exp || !p.host_exp || !p.readback || !p.pieces) {
        fprintf(stderr, "FAIL: out of memory\n");
        return 1;
    }

    static const struct engine_cfg engines[] = {
        { "kernel/1x512", GPU_COPY_KERNEL, 1, 512 },
        { "kernel/3x256", GPU_COPY_KERNEL, 3, 256 },
        { "kernel/8x512", GPU_COPY_KERNEL, 8, 512 },
        { "kernel/32x512", GPU_COPY_KERNEL, 32, 512 },
        { "kernel/32x128", GPU_COPY_KERNEL, 32, 128 },
        { "memcpy", GPU_COPY_MEMCPY, 32, 512 },
        { "batch", GPU_COPY_BATCH, 32, 512 },
        { "auto", GPU_COPY_AUTO, 32, 512 },
    };
    struct set sets[9];
    set_make(&sets[0], "mixed", 4000, 1, 10u << 20, 30u << 20, ALIGN_ANY);
    set_make(&sets[1], "small", 20000, 1, 4096, 30u << 20, ALIGN_ANY);
    set_make(&sets[2], "kv16", 6000, 4096, 4096, 30u << 20, ALIGN_SAME16);
    set_make(&sets[3], "huge", 3, 10u << 20, 10u << 20, 31u << 20, ALIGN_SAME16);
    set_make(&sets[4], "delta8", 300, 1, 1u << 20, 30u << 20, ALIGN_DELTA8);
    set_make(&sets[5], "delta4", 300, 1, 1u << 20, 30u << 20, ALIGN_DELTA4);
    set_make(&sets[6], "delta2", 300, 1, 1u << 20, 30u << 20, ALIGN_DELTA2);
    set_make(&sets[7], "delta1", 300, 1, 1u << 20, 30u << 20, ALIGN_DELTA1);
    set_make(&sets[8], "one-byte", 1, 1, 1, 1, ALIGN_ANY);

    for (size_t si = 0; si < sizeof(sets) / sizeof(sets[0]); si++)
        for (size_t ei = 0; ei < sizeof(engines) / sizeof(engines[0]); ei++) {
            if (quick && !((si == 1 || si == 4 || si == 7 || si == 8) && (ei == 1 || ei == 6)))
                continue;
            run_case(&p, &sets[si], GPU_COPY_GATHER, &engines[ei]);
            run_case(&p, &sets[si], GPU_COPY_SCATTER, &engines[ei]);
        }
    if (!quick) {
        negative_control(&p, &sets[0]);
        api_cases(&p, &sets[0]);
    }
    engines_only_cases(&p, &sets[0]);
    sum_cases(&p, &sets[2]);
    grid_pick_cases(&p, quick);
    grid_long_rows(&p, quick);
    grid_refusals(&p);

    for (size_t si = 0; si < sizeof(sets) / sizeof(sets[0]); si++)
        set_free(&sets[si]);
    gpu_copy_host_free(p.host);
    CK(cudaFree(p.dev));
    free(p.dev_exp);
    free(p.host_exp);
    free(p.readback);
    free(p.pieces);
    printf("%s: %d cases, %d failed\n", failures ? "FAIL" : "PASS", cases, failures);
    return failures ? 1 : 0;
}
