/*
 * b10-bench — what b10d's WRITEs achieve and the ceilings to judge them by,
 * measured by one tool. scripts/bench.sh (`make bench`) starts the daemons,
 * drives this tool and ucx_perftest, and writes tests/bench/RESULTS.md.
 *
 *   b10-bench write -a SOCKET -b SOCKET [options]   WRITEs between ranks of two daemons
 *                                                    (the same socket twice: one daemon)
 *   b10-bench memcpy --threads N [options]           memcpy of cold buffers
 *   b10-bench tcp --streams N [options]              the kernel's TCP over loopback
 *   b10-bench cuda [options]                         pinned cudaMemcpy H2D, D2H, D2D
 *
 * write: --pairs rank pairs, each in a thread of its own with its own two
 * connections. Rank a<i> on daemon A writes its pool into rank b<i>'s pool
 * on daemon B as one WRITE of --size bytes in spans of --span bytes. The
 * spans lie on randomly permuted slots of both pools, as a KV block table
 * puts them, so that no two of them are contiguous on both sides and the
 * daemon cannot merge them into fewer, larger pieces than a real request
 * has. Each WRITE is timed from b10_xfer_submit to the return of
 * b10_xfer_wait. Then every destination byte is compared with its source:
 * the destination was poisoned before the first WRITE, so a byte that
 * matches is one the daemon wrote.
 *
 * Output: a line per pair, a "stages" line per pair (where each WRITE's
 * time went, from b10_xfer_times: the first byte's time after the submit is
 * what a request of many spans waits before anything moves), and one
 * "result KEY VALUE ..." line for the script. Exit 0: every WRITE landed and every byte verified; 1: a WRITE
 * failed, a byte differs or a resource could not be had; 2: usage; 3: what
 * was asked for is not available here (CUDA).
 */
#include <b10/b10.h>

#include "../../client/examples/kv-cuda.h"

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)

/* Bounds of what one run may ask for: beyond them the run is refused before
 * anything is allocated, with the bound in the message. */
#define MAX_SIZE      (64 * GIB)
#define MIN_SPAN      UINT64_C(256)
#define MAX_SPANS     (UINT64_C(16) << 20)     /* b10d's own cap on --max-spans */
#define MAX_PAIRS     64u
#define MAX_ITERS     10000000u
#define MAX_WARMUP    1000000u
#define MAX_THREADS   256u
#define MAX_DEADLINE  3600000u           /* b10d's cap on --max-deadline-ms */

/* Poison for destinations: a byte of the source stream equals it by chance
 * once in 256, a whole span never does. */
#define POISON 0xa5

static const char *prog = "b10-bench";

static void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warn(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/*
 * A size: digits, an optional fraction, an optional K, M, G or T (powers of
 * 1024): "320K", "2.5G". The fraction must come out as whole bytes, so that
 * "2.5G" is exactly 2,684,354,560 and never a rounded neighbour.
 */
static bool parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *size_p)
{
    uint64_t whole = 0, frac = 0, scale = 1, mult = 1;
    const char *p = s;

    if (*p < '0' || *p > '9')
        return false;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (whole > (UINT64_MAX - 9) / 10)
            return false;
        whole = whole * 10 + (uint64_t)(*p - '0');
    }
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return false;
        for (; *p >= '0' && *p <= '9'; p++) {
            if (scale >= 1000000000ull)
                return false;      /* more than 9 decimals says nothing a size needs */
            frac = frac * 10 + (uint64_t)(*p - '0');
            scale *= 10;
        }
    }
    switch (*p) {
    case 'k': case 'K': mult = KIB; p++; break;
    case 'm': case 'M': mult = MIB; p++; break;
    case 'g': case 'G': mult = GIB; p++; break;
    case 't': case 'T': mult = 1024 * GIB; p++; break;
    default: break;
    }
    if (*p == 'i' && p[1] == 'B')
        p += 2;
    else if (*p == 'B')
        p++;
    if (*p != '\0' || whole > max / mult)
        return false;
    if ((frac * mult) % scale != 0)
        return false;
    uint64_t v = whole * mult + frac * mult / scale;
    if (v < min || v > max)
        return false;
    *size_p = v;
    return true;
}

static bool parse_uint(const char *s, unsigned min, unsigned max, unsigned *v_p)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < min || v > max)
        return false;
    *v_p = (unsigned)v;
    return true;
}

/* The long name of option val in lo, for messages. */
static const char *opt_name(const struct option *lo, int val)
{
    for (; lo->name != NULL; lo++)
        if (lo->val == val)
            return lo->name;
    return "?";
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* The nearest-rank percentile q (0..1] of n sorted values. */
static double percentile(const double *sorted, size_t n, double q)
{
    size_t k = (size_t)ceil(q * (double)n);

    if (n == 0)
        return 0;
    if (k < 1)
        k = 1;
    if (k > n)
        k = n;
    return sorted[k - 1];
}

/* MemAvailable in bytes, 0 when /proc/meminfo does not say. */
static uint64_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "re");
    char line[256];
    uint64_t kib = 0;

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "MemAvailable: %" SCNu64 " kB", &kib) == 1)
            break;
    fclose(f);
    return kib * KIB;
}

/* Refuse a run whose buffers would not fit: one that runs the machine out of
 * memory is killed, or takes down whatever else runs there. */
static bool memory_fits(uint64_t need, const char *what)
{
    uint64_t avail = mem_available();

    if (avail != 0 && need > avail / 10 * 9) {
        warn("%s would take %" PRIu64 " MiB of memory, and MemAvailable is %" PRIu64
             " MiB: ask for less", what, need / MIB, avail / MIB);
        return false;
    }
    return true;
}

/* The source stream: every 8-byte word a function of its pool's key and its
 * offset (splitmix64's finaliser), so that every span's bytes differ. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static void pattern_fill(uint8_t *p, uint64_t len, uint64_t key)
{
    uint64_t words = len / 8;

    for (uint64_t i = 0; i < words; i++) {
        uint64_t w = mix64(key ^ (i * 0x100000001b3ull));
        memcpy(p + i * 8, &w, 8);
    }
    for (uint64_t i = words * 8; i < len; i++)
        p[i] = (uint8_t)mix64(key ^ i);
}

/* A random permutation of 0..n-1 (Fisher-Yates over xorshift64). */
static void permute(uint32_t *v, uint32_t n, uint64_t seed)
{
    uint64_t r = seed | 1;

    for (uint32_t i = 0; i < n; i++)
        v[i] = i;
    for (uint32_t i = n; i > 1; i--) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        uint32_t j = (uint32_t)(r % i), t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

/*
 * kv-cuda.h's kvcuda_init, with this tool's words where the build had no
 * CUDA headers (the header's own name the rank program it was written for).
 */
static int bench_cuda_init(char *err, size_t errlen)
{
#ifdef B10_HAVE_CUDA
    return kvcuda_init(err, errlen);
#else
    (void)kvcuda_init(err, errlen);
    snprintf(err, errlen, "b10-bench was built without CUDA headers (no nvcc at build time)");
    return -1;
#endif
}

/* ================================================================ write */

/* heap: malloc'd host memory, which the daemons reach through /proc/self/mem. */
enum bench_mem { MEM_DRAM, MEM_HEAP, MEM_VRAM };
static const char *const mem_names[] = { "dram", "heap", "vram" };

static struct {
    const char *sock_a, *sock_b;
    uint64_t size;              /* bytes of one WRITE, the whole pool of each rank */
    uint64_t span;              /* bytes of one span */
    unsigned iters, warmup, pairs;
    unsigned deadline_ms;
    enum bench_mem mem;
    bool picks;                 /* post as NIXL's lists do: two grids and the rows' indices */
    bool read;                  /* --op read: rank a READs b's pool into its own */
    const char *times_out;      /* --times-out: each timed request's times, a line each */
} wo = {
    .size = 32 * MIB, .span = 32 * KIB, .iters = 20, .warmup = 2, .pairs = 1,
    .deadline_ms = 120000, .mem = MEM_DRAM,
};

struct pair {
    unsigned idx;
    b10_conn_t *a, *b;          /* a: the rank that asks, on daemon A; b: its peer, on B */
    b10_mem_t *ma, *mb;
    uint8_t *src, *dst;         /* DRAM: the pools (b10_dram_alloc); VRAM: their host mirrors */
    struct kvcuda_alloc dsrc, ddst;  /* VRAM: the pools, device memory */
    b10_span_t *local, *remote; /* the WRITE's spans, nspans each */
    uint32_t nspans;
    uint32_t *perm_src, *perm_dst;   /* slot of span i in the source and the destination pool */
    int64_t *index_src, *index_dst;  /* --picks: the same slots, as the rows of two grids */
    uint64_t base_src, base_dst;     /* --picks: each grid's one base, its pool's */
    b10_span_grid_t grid_src, grid_dst;
    char name_a[64], name_b[64];
    double *us;                 /* each timed WRITE, µs */
    b10_xfer_times_t *times;    /* each timed WRITE's stages (b10_xfer_times) */
    uint64_t *ids;              /* ... and its transfer id, to find it in the daemons' traces */
    double *back_us;            /* ... and when its wait returned, µs */
    double t_start, t_end;      /* the timed window, µs of CLOCK_MONOTONIC */
    b10_status_t st;            /* the first failure; B10_OK */
    char why[512];
    pthread_t thread;
};

static pthread_barrier_t start_line;
static atomic_uint pairs_timed;  /* pairs whose timed WRITEs are all done */
static atomic_bool any_failed;

static void pair_fail(struct pair *p, b10_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void pair_fail(struct pair *p, b10_status_t st, const char *fmt, ...)
{
    va_list ap;

    if (p->st != B10_OK)
        return;
    p->st = st;
    va_start(ap, fmt);
    vsnprintf(p->why, sizeof(p->why), fmt, ap);
    va_end(ap);
    atomic_store(&any_failed, true);
}

/*
 * Where a pair's timed WRITEs spent their time, medians in ms: the client's
 * encoding and its write to the socket, the request's way to the daemon and
 * its decoding there, the daemon's checks and its plan, its start of the
 * first copy or gather, the bytes moving until the last landed, and the
 * result's way back to the waiting caller; then the first byte's time after
 * the submit. Printed only where the daemon sent every WRITE's timings.
 */
static void pair_stages(const struct pair *p)
{
    enum { ENCODE, SEND, REACH, DECODE, CHECK, PLAN, START, MOVE, BACK, FIRST, NSTAGE };
    static const char *const names[NSTAGE] = { "encode", "send", "reach", "decode", "checks",
                                               "plan", "start", "moving", "back", "first" };
    const uint64_t all = B10_XFER_TIMES_CLIENT | B10_XFER_TIMES_DAEMON | B10_XFER_TIMES_FIRST;
    double *v = calloc((size_t)NSTAGE * wo.iters, sizeof(*v));
    if (v == NULL)
        return;
    for (unsigned i = 0; i < wo.iters; i++) {
        const b10_xfer_times_t *t = &p->times[i];
        if ((t->field_mask & all) != all) {
            free(v);
            return;
        }
        double ms[NSTAGE] = {
            [ENCODE] = (double)(t->encoded_ns - t->submit_ns),
            [SEND] = (double)(t->sent_ns - t->encoded_ns),
            [REACH] = (double)t->received_ns - (double)t->sent_ns,
            [DECODE] = (double)(t->decoded_ns - t->received_ns),
            [CHECK] = (double)(t->accepted_ns - t->decoded_ns) - (double)t->plan_ns,
            [PLAN] = (double)t->plan_ns,
            [START] = (double)t->first_ns - (double)t->accepted_ns,
            [MOVE] = (double)(t->ended_ns - t->first_ns),
            [BACK] = p->back_us[i] * 1e3 - (double)t->ended_ns,
            [FIRST] = (double)(t->first_ns - t->submit_ns),
        };
        for (int k = 0; k < NSTAGE; k++)
            v[(size_t)k * wo.iters + i] = ms[k] / 1e6;
    }
    printf("stages pair %u, ms, medians of %u:", p->idx, wo.iters);
    for (int k = 0; k < NSTAGE; k++) {
        double *col = v + (size_t)k * wo.iters;
        qsort(col, wo.iters, sizeof(*col), cmp_double);
        printf("%s %s %.3f", k == 0 ? "" : (k == FIRST ? ";" : ","), names[k],
               percentile(col, wo.iters, 0.5));
    }
    printf(" after the submit\n");
    free(v);
}

/* Every pair's timed requests, a line each: "pair I id HEX submit NS ... back NS". */
static int times_write(const char *path, const struct pair *pairs)
{
    FILE *f = fopen(path, "w");

    if (f == NULL) {
        warn("--times-out %s: %s", path, strerror(errno));
        return -1;
    }
    for (unsigned i = 0; i < wo.pairs; i++) {
        const struct pair *p = &pairs[i];
        for (unsigned k = 0; k < wo.iters; k++) {
            const b10_xfer_times_t *t = &p->times[k];
            fprintf(f, "pair %u id %016" PRIx64 " mask %" PRIu64 " submit %" PRIu64
                    " encoded %" PRIu64 " sent %" PRIu64 " received %" PRIu64 " decoded %" PRIu64
                    " accepted %" PRIu64 " replied %" PRIu64 " first %" PRIu64 " ended %" PRIu64
                    " plan %" PRIu64 " back %.0f\n", i, p->ids[k], t->field_mask, t->submit_ns,
                    t->encoded_ns, t->sent_ns, t->received_ns, t->decoded_ns, t->accepted_ns,
                    t->replied_ns, t->first_ns, t->ended_ns, t->plan_ns, p->back_us[k] * 1e3);
        }
    }
    if (fclose(f) != 0) {
        warn("--times-out %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* One WRITE of the pair's whole request, waited for; its time in *us_p, its stages in the
 * pair's tables at timed (-1: untimed). */
static b10_status_t pair_write(struct pair *p, double *us_p, int timed)
{
    b10_xfer_params_t xp = {
        .field_mask = B10_XFER_FIELD_DEADLINE,
        .op = wo.read ? B10_OP_READ : B10_OP_WRITE,
        .local = p->local,
        .remote = p->remote,
        .count = p->nspans,
        .remote_agent = p->name_b,
        .deadline_ms = wo.deadline_ms,
    };
    if (wo.picks) {
        /* Each pool a grid of nspans rows; pair i is row perm_src[i] → row perm_dst[i]. */
        xp.field_mask |= B10_XFER_FIELD_INDICES;
        xp.local = xp.remote = NULL;
        xp.local_index = wo.read ? p->index_dst : p->index_src;
        xp.remote_index = wo.read ? p->index_src : p->index_dst;
        xp.local_grid = wo.read ? &p->grid_dst : &p->grid_src;
        xp.remote_grid = wo.read ? &p->grid_src : &p->grid_dst;
    }
    b10_xfer_t *x;
    double t0 = now_us();
    b10_status_t st = b10_xfer_submit(p->a, &xp, &x);

    if (st != B10_OK) {
        pair_fail(p, st, "b10_xfer_submit: %s: %s (%s)", b10_status_name(st), b10_status_str(st),
                  b10_conn_detail(p->a));
        return st;
    }
    /* The daemon fails a WRITE at its deadline; the wait gives it 10 s more to
     * say so before calling the daemon stuck. */
    st = b10_xfer_wait(x, (int)wo.deadline_ms + 10000);
    double back = now_us();
    *us_p = back - t0;
    if (timed >= 0 && st == B10_OK && b10_xfer_times(x, &p->times[timed]) == B10_OK) {
        p->back_us[timed] = back;
        p->ids[timed] = b10_xfer_id(x);
    }
    if (st == B10_IN_PROGRESS) {
        pair_fail(p, B10_ERR_DEADLINE, "WRITE %" PRIx64 " not ended %u ms after its deadline",
                  b10_xfer_id(x), 10000u);
        b10_xfer_cancel(x);
        b10_xfer_wait(x, 5000);
    } else if (st != B10_OK) {
        pair_fail(p, st, "WRITE %" PRIx64 ": %s: %s (%s)", b10_xfer_id(x), b10_status_name(st),
                  b10_status_str(st), b10_xfer_detail(x));
    }
    b10_xfer_release(x);
    return st == B10_IN_PROGRESS ? B10_ERR_DEADLINE : st;
}

/*
 * A pair's thread: warm-up, the start line, the timed WRITEs. Then it goes
 * on writing, untimed, until every pair's timed WRITEs are done: a pair
 * that finished early and stopped would leave the others a less loaded
 * machine, and their rates (and the fastest/slowest ratio) would flatter.
 */
static void *pair_run(void *arg)
{
    struct pair *p = arg;
    double us;

    for (unsigned i = 0; i < wo.warmup && p->st == B10_OK; i++)
        pair_write(p, &us, -1);
    pthread_barrier_wait(&start_line);
    p->t_start = now_us();
    for (unsigned i = 0; i < wo.iters && p->st == B10_OK && !atomic_load(&any_failed); i++)
        if (pair_write(p, &p->us[i], (int)i) != B10_OK)
            break;
    p->t_end = now_us();
    atomic_fetch_add(&pairs_timed, 1);
    while (p->st == B10_OK && !atomic_load(&any_failed) && atomic_load(&pairs_timed) < wo.pairs)
        pair_write(p, &us, -1);
    return NULL;
}

static b10_status_t conn_open(const char *sock, const char *name, b10_conn_t **conn_p)
{
    b10_conn_params_t cp = {
        .field_mask = B10_CONN_FIELD_SOCKET_PATH | B10_CONN_FIELD_REQUEST_TIMEOUT,
        .agent_name = name,
        .socket_path = sock,
        /* Registering GiBs maps and populates them in the daemon: seconds. */
        .request_timeout_ms = 300000,
    };
    b10_status_t st = b10_conn_open(&cp, conn_p);

    if (st != B10_OK)
        warn("connect to %s as %s: %s: %s", sock, name, b10_status_name(st), b10_status_str(st));
    return st;
}

/* Allocate and fill one side's pool: the source stream, or poison. */
static int pool_make(struct pair *p, bool source, uint8_t **host_p, struct kvcuda_alloc *dev)
{
    char err[256];

    if (wo.mem == MEM_HEAP) {
        void *addr;
        if (posix_memalign(&addr, 4096, wo.size) != 0) {
            warn("pair %u: malloc(%" PRIu64 ") failed", p->idx, wo.size);
            return -1;
        }
        *host_p = addr;
    } else if (wo.mem == MEM_DRAM) {
        void *addr;
        b10_status_t st = b10_dram_alloc(wo.size, &addr);

        if (st != B10_OK) {
            warn("pair %u: b10_dram_alloc(%" PRIu64 "): %s", p->idx, wo.size, b10_status_name(st));
            return -1;
        }
        *host_p = addr;
    } else {
        *host_p = malloc(wo.size);
        if (*host_p == NULL) {
            warn("pair %u: no memory for a host mirror of %" PRIu64 " bytes", p->idx, wo.size);
            return -1;
        }
        if (kvcuda_alloc(false, wo.size, dev, err, sizeof(err)) != 0) {
            warn("pair %u: %s", p->idx, err);
            return -1;
        }
    }
    if (source)
        pattern_fill(*host_p, wo.size, 0x6b76u + ((uint64_t)p->idx << 32));
    else
        memset(*host_p, POISON, wo.size);
    if (wo.mem == MEM_VRAM && kvcuda_upload(dev->ptr, *host_p, wo.size) != 0) {
        warn("pair %u: copying %" PRIu64 " bytes to the device failed", p->idx, wo.size);
        return -1;
    }
    return 0;
}

static int pool_register(struct pair *p, b10_conn_t *conn, uint8_t *host,
                         const struct kvcuda_alloc *dev, b10_mem_t **mem_p)
{
    b10_mem_params_t mp = {
        .kind = wo.mem == MEM_VRAM ? B10_MEM_VRAM : B10_MEM_DRAM,
        .addr = wo.mem == MEM_VRAM ? (void *)(uintptr_t)dev->ptr : host,
        .length = wo.size,
    };
    b10_status_t st = b10_mem_register(conn, &mp, mem_p);

    if (st != B10_OK) {
        warn("pair %u: register %" PRIu64 " bytes: %s: %s (%s)", p->idx, wo.size,
             b10_status_name(st), b10_status_str(st), b10_conn_detail(conn));
        return -1;
    }
    return 0;
}

static uint64_t pool_base(const uint8_t *host, const struct kvcuda_alloc *dev)
{
    return wo.mem == MEM_VRAM ? dev->ptr : (uint64_t)(uintptr_t)host;
}

/* Connections, pools, registrations, the descriptor, the spans of one pair. */
static int pair_setup(struct pair *p)
{
    const void *desc;
    size_t desc_len;
    b10_status_t st;

    p->st = B10_OK;
    snprintf(p->name_a, sizeof(p->name_a), "bench-%ld-a%u", (long)getpid(), p->idx);
    snprintf(p->name_b, sizeof(p->name_b), "bench-%ld-b%u", (long)getpid(), p->idx);
    if (conn_open(wo.sock_a, p->name_a, &p->a) != B10_OK ||
        conn_open(wo.sock_b, p->name_b, &p->b) != B10_OK)
        return -1;
    if (pool_make(p, true, &p->src, &p->dsrc) != 0 || pool_make(p, false, &p->dst, &p->ddst) != 0)
        return -1;
    /* A WRITE's source is rank a's pool; a READ's is rank b's, read into a's. */
    if (pool_register(p, p->a, wo.read ? p->dst : p->src, wo.read ? &p->ddst : &p->dsrc,
                      &p->ma) != 0 ||
        pool_register(p, p->b, wo.read ? p->src : p->dst, wo.read ? &p->dsrc : &p->ddst,
                      &p->mb) != 0)
        return -1;
    if ((st = b10_agent_desc(p->b, &desc, &desc_len)) != B10_OK ||
        (st = b10_agent_load(p->a, p->name_b, desc, desc_len)) != B10_OK) {
        warn("pair %u: hand %s's descriptor to %s: %s: %s", p->idx, p->name_b, p->name_a,
             b10_status_name(st), b10_conn_detail(p->a));
        return -1;
    }
    p->nspans = (uint32_t)(wo.size / wo.span);
    p->local = calloc(p->nspans, sizeof(*p->local));
    p->remote = calloc(p->nspans, sizeof(*p->remote));
    p->perm_src = calloc(p->nspans, sizeof(*p->perm_src));
    p->perm_dst = calloc(p->nspans, sizeof(*p->perm_dst));
    p->index_src = calloc(p->nspans, sizeof(*p->index_src));
    p->index_dst = calloc(p->nspans, sizeof(*p->index_dst));
    p->us = calloc(wo.iters, sizeof(*p->us));
    p->times = calloc(wo.iters, sizeof(*p->times));
    p->back_us = calloc(wo.iters, sizeof(*p->back_us));
    p->ids = calloc(wo.iters, sizeof(*p->ids));
    if (!p->local || !p->remote || !p->perm_src || !p->perm_dst || !p->index_src ||
        !p->index_dst || !p->us || !p->times || !p->back_us || !p->ids) {
        warn("pair %u: no memory for %u spans", p->idx, p->nspans);
        return -1;
    }
    permute(p->perm_src, p->nspans, 0x9e3779b9u * (p->idx + 1));
    permute(p->perm_dst, p->nspans, 0x85ebca6bu * (p->idx + 7));
    uint64_t sbase = pool_base(p->src, &p->dsrc), dbase = pool_base(p->dst, &p->ddst);
    for (uint32_t i = 0; i < p->nspans; i++) {
        b10_span_t from = { sbase + (uint64_t)p->perm_src[i] * wo.span, wo.span };
        b10_span_t to = { dbase + (uint64_t)p->perm_dst[i] * wo.span, wo.span };
        /* local: rank a's spans, the destination of a READ */
        p->local[i] = wo.read ? to : from;
        p->remote[i] = wo.read ? from : to;
        p->index_src[i] = p->perm_src[i];
        p->index_dst[i] = p->perm_dst[i];
    }
    p->base_src = sbase;
    p->base_dst = dbase;
    p->grid_src = (b10_span_grid_t){ &p->base_src, 1, p->nspans, wo.span, wo.span };
    p->grid_dst = (b10_span_grid_t){ &p->base_dst, 1, p->nspans, wo.span, wo.span };
    return 0;
}

/* Every destination byte against its source; the number of spans that differ. */
static uint64_t pair_verify(struct pair *p)
{
    uint64_t bad = 0;

    if (wo.mem == MEM_VRAM && kvcuda_download(p->dst, p->ddst.ptr, wo.size) != 0) {
        warn("pair %u: copying the destination back from the device failed", p->idx);
        return p->nspans;
    }
    for (uint32_t i = 0; i < p->nspans; i++) {
        const uint8_t *s = p->src + (uint64_t)p->perm_src[i] * wo.span;
        const uint8_t *d = p->dst + (uint64_t)p->perm_dst[i] * wo.span;

        if (memcmp(s, d, wo.span) == 0)
            continue;
        if (bad++ < 3) {
            uint64_t k = 0;
            while (s[k] == d[k])
                k++;
            printf("MISMATCH pair %u span %u: destination byte %" PRIu64 " of the span is 0x%02x,"
                   " its source 0x%02x%s\n", p->idx, i, k, d[k], s[k],
                   d[k] == POISON ? " (the poison: never written)" : "");
        }
    }
    return bad;
}

static void pair_teardown(struct pair *p)
{
    if (p->ma != NULL)
        b10_mem_deregister(p->a, p->ma);
    if (p->mb != NULL)
        b10_mem_deregister(p->b, p->mb);
    b10_conn_close(p->a);
    b10_conn_close(p->b);
    if (wo.mem == MEM_VRAM) {
        kvcuda_free(&p->dsrc);
        kvcuda_free(&p->ddst);
        free(p->src);
        free(p->dst);
    } else if (wo.mem == MEM_HEAP) {
        free(p->src);
        free(p->dst);
    } else {
        if (p->src != NULL)
            b10_dram_free(p->src);
        if (p->dst != NULL)
            b10_dram_free(p->dst);
    }
    free(p->local);
    free(p->remote);
    free(p->perm_src);
    free(p->perm_dst);
    free(p->index_src);
    free(p->index_dst);
    free(p->us);
    free(p->times);
    free(p->back_us);
    free(p->ids);
}

static void write_usage(FILE *f)
{
    fprintf(f,
        "usage: b10-bench write -a SOCKET -b SOCKET [options]\n"
        "  -a, --sock-a PATH     daemon of the writing ranks\n"
        "  -b, --sock-b PATH     daemon of the written ranks (the same as -a: a local transfer)\n"
        "      --size SIZE       bytes of one WRITE, each rank's whole pool (32M; 1K..64G)\n"
        "      --span SIZE       bytes of one span; divides --size (32K; 256..--size,\n"
        "                        at most %llu spans)\n"
        "      --iters N         timed WRITEs per pair (20; 1..%u)\n"
        "      --warmup N        untimed WRITEs first (2; 0..%u)\n"
        "      --pairs N         rank pairs writing at once, a thread each (1; 1..%u)\n"
        "      --mem KIND        where the pools live: dram (b10_dram_alloc), heap (malloc,\n"
        "                        reached through /proc/self/mem) or vram (CUDA device 0)\n"
        "      --deadline-ms MS  of each WRITE (120000; 1..%u)\n"
        "      --picks           post each WRITE as NIXL's prepared lists do: both pools as\n"
        "                        grids of --span rows and the picked rows' indices\n"
        "      --op OP           write (a writes its pool into b's) or read (a reads b's\n"
        "                        pool into its own); the same spans, verified the same way\n"
        "      --times-out FILE  each timed request's transfer id and times (b10_xfer_times,\n"
        "                        CLOCK_MONOTONIC ns; back: when its wait returned), a line\n"
        "                        each, to find it in the daemons' --trace lines\n",
        (unsigned long long)MAX_SPANS, MAX_ITERS, MAX_WARMUP, MAX_PAIRS, MAX_DEADLINE);
}

static int cmd_write(int argc, char **argv)
{
    enum { O_SIZE = 256, O_SPAN, O_ITERS, O_WARMUP, O_PAIRS, O_MEM, O_DEADLINE, O_PICKS, O_OP,
           O_TIMES };
    static const struct option lo[] = {
        { "sock-a", required_argument, NULL, 'a' },
        { "sock-b", required_argument, NULL, 'b' },
        { "size", required_argument, NULL, O_SIZE },
        { "span", required_argument, NULL, O_SPAN },
        { "iters", required_argument, NULL, O_ITERS },
        { "warmup", required_argument, NULL, O_WARMUP },
        { "pairs", required_argument, NULL, O_PAIRS },
        { "mem", required_argument, NULL, O_MEM },
        { "deadline-ms", required_argument, NULL, O_DEADLINE },
        { "picks", no_argument, NULL, O_PICKS },
        { "op", required_argument, NULL, O_OP },
        { "times-out", required_argument, NULL, O_TIMES },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c;

    while ((c = getopt_long(argc, argv, "a:b:h", lo, NULL)) != -1) {
        bool ok = true;

        switch (c) {
        case 'a': wo.sock_a = optarg; break;
        case 'b': wo.sock_b = optarg; break;
        case O_SIZE: ok = parse_size(optarg, KIB, MAX_SIZE, &wo.size); break;
        case O_SPAN: ok = parse_size(optarg, MIN_SPAN, MAX_SIZE, &wo.span); break;
        case O_ITERS: ok = parse_uint(optarg, 1, MAX_ITERS, &wo.iters); break;
        case O_WARMUP: ok = parse_uint(optarg, 0, MAX_WARMUP, &wo.warmup); break;
        case O_PAIRS: ok = parse_uint(optarg, 1, MAX_PAIRS, &wo.pairs); break;
        case O_DEADLINE: ok = parse_uint(optarg, 1, MAX_DEADLINE, &wo.deadline_ms); break;
        case O_PICKS: wo.picks = true; break;
        case O_OP:
            ok = strcmp(optarg, "write") == 0 || strcmp(optarg, "read") == 0;
            wo.read = strcmp(optarg, "read") == 0;
            break;
        case O_TIMES: wo.times_out = optarg; break;
        case O_MEM:
            if (strcmp(optarg, "dram") == 0)
                wo.mem = MEM_DRAM;
            else if (strcmp(optarg, "heap") == 0)
                wo.mem = MEM_HEAP;
            else if (strcmp(optarg, "vram") == 0)
                wo.mem = MEM_VRAM;
            else
                ok = false;
            break;
        case 'h': write_usage(stdout); return 0;
        default: write_usage(stderr); return 2;
        }
        if (!ok) {
            warn("bad value for --%s: '%s' (see b10-bench write --help for the bounds)",
                 opt_name(lo, c), optarg);
            return 2;
        }
    }
    if (optind != argc || wo.sock_a == NULL || wo.sock_b == NULL) {
        write_usage(stderr);
        return 2;
    }
    if (wo.span > wo.size || wo.size % wo.span != 0 || wo.size / wo.span > MAX_SPANS) {
        warn("--span %" PRIu64 " must divide --size %" PRIu64 " into at most %llu spans",
             wo.span, wo.size, (unsigned long long)MAX_SPANS);
        return 2;
    }
    /* Both pools of every pair; with VRAM their host mirrors, for filling and verifying. */
    if (!memory_fits(2 * wo.size * wo.pairs, "the pools"))
        return 1;
    if (wo.mem == MEM_VRAM) {
        char err[256];
        if (bench_cuda_init(err, sizeof(err)) != 0) {
            warn("--mem vram: %s", err);
            return 3;
        }
    }

    struct pair *pairs = calloc(wo.pairs, sizeof(*pairs));
    int rc = 1;
    double t_fill = now_us();

    if (pairs == NULL) {
        warn("no memory for %u pairs", wo.pairs);
        return 1;
    }
    /* Everything that touches CUDA happens on this thread: kv-cuda.h makes
     * the device's context current on the thread that calls kvcuda_init. */
    for (unsigned i = 0; i < wo.pairs; i++) {
        pairs[i].idx = i;
        if (pair_setup(&pairs[i]) != 0)
            goto out;
    }
    fprintf(stderr, "%s: %u pair%s of %s pools of %" PRIu64 " bytes ready in %.1f s\n", prog,
            wo.pairs, wo.pairs == 1 ? "" : "s", mem_names[wo.mem], wo.size,
            (now_us() - t_fill) / 1e6);

    pthread_barrier_init(&start_line, NULL, wo.pairs);
    for (unsigned i = 0; i < wo.pairs; i++) {
        if (pthread_create(&pairs[i].thread, NULL, pair_run, &pairs[i]) != 0) {
            /* The barrier waits for every pair: without this one, none can start. */
            warn("pthread_create for pair %u failed", i);
            exit(1);
        }
    }
    for (unsigned i = 0; i < wo.pairs; i++)
        pthread_join(pairs[i].thread, NULL);
    pthread_barrier_destroy(&start_line);

    bool failed = false;
    for (unsigned i = 0; i < wo.pairs; i++) {
        if (pairs[i].st != B10_OK) {
            printf("FAIL pair %u: %s\n", i, pairs[i].why);
            failed = true;
        }
    }
    if (failed)
        goto out;

    /* Per pair: its rate over its own timed window (under the full load, see
     * pair_run); the aggregate is their sum. */
    double *all = calloc((size_t)wo.pairs * wo.iters, sizeof(*all));
    double sum = 0, lo_rate = INFINITY, hi_rate = 0;
    uint64_t bad = 0;
    if (all == NULL) {
        warn("no memory for the times");
        goto out;
    }
    for (unsigned i = 0; i < wo.pairs; i++) {
        struct pair *p = &pairs[i];
        double rate = (double)wo.size * wo.iters / (p->t_end - p->t_start) / 1e3;  /* GB/s */

        memcpy(all + (size_t)i * wo.iters, p->us, wo.iters * sizeof(*p->us));
        qsort(p->us, wo.iters, sizeof(*p->us), cmp_double);
        printf("pair %u: %u %ss of %" PRIu64 " bytes in %u spans%s: %.3f GB/s, p50 %.0f us,"
               " p99 %.0f us, max %.0f us\n", i, wo.iters, wo.read ? "READ" : "WRITE", wo.size,
               p->nspans,
               wo.picks ? " (picked rows of two grids)" : "", rate,
               percentile(p->us, wo.iters, 0.5), percentile(p->us, wo.iters, 0.99),
               p->us[wo.iters - 1]);
        pair_stages(p);
        sum += rate;
        lo_rate = rate < lo_rate ? rate : lo_rate;
        hi_rate = rate > hi_rate ? rate : hi_rate;
        uint64_t b = pair_verify(p);
        if (b != 0)
            printf("MISMATCH pair %u: %" PRIu64 " of %u spans differ from their source\n", i, b,
                   p->nspans);
        bad += b;
    }
    size_t n = (size_t)wo.pairs * wo.iters;
    qsort(all, n, sizeof(*all), cmp_double);
    printf("result write op %s mem %s pairs %u bytes %" PRIu64 " spans %u iters %u gbps %.4f"
           " p50_us %.1f p99_us %.1f max_us %.1f pair_min_gbps %.4f pair_max_gbps %.4f"
           " fast_slow %.3f verified %s\n",
           wo.read ? "read" : "write", mem_names[wo.mem], wo.pairs, wo.size, pairs[0].nspans, wo.iters,
           sum, percentile(all, n, 0.5), percentile(all, n, 0.99), all[n - 1], lo_rate, hi_rate,
           hi_rate / lo_rate, bad == 0 ? "yes" : "no");
    free(all);
    rc = bad == 0 ? 0 : 1;
    if (wo.times_out != NULL && times_write(wo.times_out, pairs) != 0)
        rc = 1;
out:
    for (unsigned i = 0; i < wo.pairs; i++)
        pair_teardown(&pairs[i]);
    free(pairs);
    return rc;
}

/* One numeric option of a command whose options are all numeric: --name VALUE, bounded. */
struct num_opt {
    int val;                    /* its getopt value */
    bool size;                  /* a SIZE (with K, M, G) into a uint64_t, else a count into an unsigned */
    uint64_t min, max;
    void *dst;
};

/*
 * Parse such a command's options (cmd names it in messages): -1 to go on,
 * else the status to exit with (0 after --help, 2 on a bad option or value).
 */
static int parse_num_opts(int argc, char **argv, const char *cmd, const struct option *lo,
                          const struct num_opt *nums, size_t n, void (*usage)(FILE *))
{
    int c;

    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        const struct num_opt *o = NULL;
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        for (size_t i = 0; i < n && o == NULL; i++)
            o = nums[i].val == c ? &nums[i] : NULL;
        if (o == NULL) {
            usage(stderr);
            return 2;
        }
        bool ok = o->size ? parse_size(optarg, o->min, o->max, o->dst)
                          : parse_uint(optarg, (unsigned)o->min, (unsigned)o->max, o->dst);
        if (!ok) {
            warn("bad value for --%s: '%s' (see b10-bench %s --help)", opt_name(lo, c), optarg, cmd);
            return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    return -1;
}

/* ================================================================ memcpy */

/*
 * The ceiling of the host copies b10d makes (the gathers and scatters, and
 * UCX's copies over shared memory or a socket): memcpy on N threads, 4 MiB
 * at a time, of buffers whose bytes are not in any cache. Every thread
 * copies its source buffer into its destination buffer, one block after the
 * other, pass after pass. With all the threads' buffers together at least
 * twice the last-level cache, a block has long been evicted by the time its
 * pass comes back to it: each copy reads from and writes to DRAM, as the
 * daemon's copies of a KV cache do.
 */
static struct {
    unsigned threads;
    uint64_t buffer;            /* bytes of each thread's source and of its destination; 0: auto */
    uint64_t block;
    unsigned ms;
} mo = { .threads = 1, .buffer = 0, .block = 4 * MIB, .ms = 2000 };

struct copier {
    uint8_t *src, *dst;
    uint64_t bytes;             /* copied in the window */
    double t0, t1;
    pthread_t thread;
};

static pthread_barrier_t copy_line;
static atomic_bool copy_stop;

static void *copier_run(void *arg)
{
    struct copier *c = arg;

    pthread_barrier_wait(&copy_line);
    c->t0 = now_us();
    while (!atomic_load_explicit(&copy_stop, memory_order_relaxed)) {
        for (uint64_t off = 0; off + mo.block <= mo.buffer; off += mo.block) {
            memcpy(c->dst + off, c->src + off, mo.block);
            c->bytes += mo.block;
            if (atomic_load_explicit(&copy_stop, memory_order_relaxed))
                break;
        }
    }
    c->t1 = now_us();
    return NULL;
}

/* The last-level cache in bytes, 0 when the machine does not say. */
static uint64_t llc_bytes(void)
{
    long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
    FILE *f;
    char buf[64];
    unsigned long kib;

    if (v > 0)
        return (uint64_t)v;
    for (int idx = 4; idx >= 2; idx--) {
        char path[128];
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/size", idx);
        if ((f = fopen(path, "re")) == NULL)
            continue;
        bool ok = fgets(buf, sizeof(buf), f) != NULL && sscanf(buf, "%luK", &kib) == 1;
        fclose(f);
        if (ok)
            return (uint64_t)kib * KIB;
    }
    return 0;
}

static void memcpy_usage(FILE *f)
{
    fprintf(f,
        "usage: b10-bench memcpy [options]\n"
        "      --threads N       copying threads at once (1; 1..%u)\n"
        "      --buffer SIZE     each thread's source and destination (default: the larger of\n"
        "                        256M and the last-level cache, shared out among the threads,\n"
        "                        at least 64M each)\n"
        "      --block SIZE      bytes of one memcpy (4M; 4K..--buffer)\n"
        "      --ms MS           how long to copy (2000; 100..60000)\n", MAX_THREADS);
}

static int cmd_memcpy(int argc, char **argv)
{
    enum { O_THREADS = 256, O_BUFFER, O_BLOCK, O_MS };
    static const struct option lo[] = {
        { "threads", required_argument, NULL, O_THREADS },
        { "buffer", required_argument, NULL, O_BUFFER },
        { "block", required_argument, NULL, O_BLOCK },
        { "ms", required_argument, NULL, O_MS },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const struct num_opt nums[] = {
        { O_THREADS, false, 1, MAX_THREADS, &mo.threads },
        { O_BUFFER, true, 4 * KIB, 16 * GIB, &mo.buffer },
        { O_BLOCK, true, 4 * KIB, 1 * GIB, &mo.block },
        { O_MS, false, 100, 60000, &mo.ms },
    };
    int rc = parse_num_opts(argc, argv, "memcpy", lo, nums, sizeof(nums) / sizeof(nums[0]),
                            memcpy_usage);
    if (rc >= 0)
        return rc;
    uint64_t llc = llc_bytes();
    if (mo.buffer == 0) {
        uint64_t total = llc > 256 * MIB ? llc : 256 * MIB;
        mo.buffer = (total + mo.threads - 1) / mo.threads;
        if (mo.buffer < 64 * MIB)
            mo.buffer = 64 * MIB;
    }
    mo.buffer = (mo.buffer + mo.block - 1) / mo.block * mo.block;
    if (mo.block > mo.buffer) {
        warn("--block %" PRIu64 " is larger than --buffer %" PRIu64, mo.block, mo.buffer);
        return 2;
    }
    if (!memory_fits(2 * mo.buffer * mo.threads, "the buffers"))
        return 1;
    if (llc != 0 && 2 * mo.buffer * mo.threads < 2 * llc)
        warn("note: %" PRIu64 " MiB of buffers in all, under twice the %" PRIu64
             " MiB last-level cache: the copies may hit it", 2 * mo.buffer * mo.threads / MIB,
             llc / MIB);

    struct copier *cs = calloc(mo.threads, sizeof(*cs));
    rc = 1;
    if (cs == NULL)
        return 1;
    for (unsigned i = 0; i < mo.threads; i++) {
        cs[i].src = malloc(mo.buffer);
        cs[i].dst = malloc(mo.buffer);
        if (cs[i].src == NULL || cs[i].dst == NULL) {
            warn("no memory for thread %u's buffers of %" PRIu64 " bytes", i, mo.buffer);
            goto out;
        }
        /* Fault every page in now: the kernel zeroing pages is no part of a copy. */
        pattern_fill(cs[i].src, mo.buffer, i);
        memset(cs[i].dst, 0, mo.buffer);
    }
    pthread_barrier_init(&copy_line, NULL, mo.threads + 1);
    for (unsigned i = 0; i < mo.threads; i++) {
        if (pthread_create(&cs[i].thread, NULL, copier_run, &cs[i]) != 0) {
            warn("pthread_create for thread %u failed", i);
            exit(1);
        }
    }
    pthread_barrier_wait(&copy_line);
    usleep(mo.ms * 1000u);
    atomic_store(&copy_stop, true);
    double sum = 0, lo_rate = INFINITY, hi_rate = 0;
    for (unsigned i = 0; i < mo.threads; i++) {
        pthread_join(cs[i].thread, NULL);
        double rate = (double)cs[i].bytes / (cs[i].t1 - cs[i].t0) / 1e3;
        sum += rate;
        lo_rate = rate < lo_rate ? rate : lo_rate;
        hi_rate = rate > hi_rate ? rate : hi_rate;
        /* What was copied is read back, so no compiler may drop the copies. */
        if (memcmp(cs[i].dst, cs[i].src, mo.block) != 0) {
            warn("thread %u: the copy differs from its source", i);
            goto out;
        }
    }
    pthread_barrier_destroy(&copy_line);
    printf("result memcpy threads %u buffer %" PRIu64 " block %" PRIu64 " llc %" PRIu64
           " gbps %.4f thread_min_gbps %.4f thread_max_gbps %.4f\n", mo.threads, mo.buffer,
           mo.block, llc, sum, lo_rate, hi_rate);
    rc = 0;
out:
    for (unsigned i = 0; i < mo.threads; i++) {
        free(cs[i].src);
        free(cs[i].dst);
    }
    free(cs);
    return rc;
}

/* ================================================================ tcp */

/*
 * The wire under two daemons on one host: the kernel's TCP over loopback,
 * N connections at once, each with a sending and a receiving thread, every
 * send() a --block of one source buffer (UCX's tcp transport carries a DATA
 * chunk so). No UCX in it: what UCX moves below this is UCX's own cost, and
 * no daemon over TCP can move more. The bytes received are checked against
 * the source at the start of every recv(), a sample that costs no pass.
 */
static struct {
    unsigned streams;
    uint64_t block;
    unsigned ms;
} to = { .streams = 1, .block = 4 * MIB, .ms = 2000 };

struct tcp_stream {
    int tx_fd, rx_fd;
    const uint8_t *src;         /* to.block bytes, shared by every sender */
    uint8_t *rx_buf;
    uint64_t received;
    double t0, t1;
    bool differs;
    pthread_t tx, rx;
};

static pthread_barrier_t tcp_line;
static atomic_bool tcp_stop;

static void *tcp_send_run(void *arg)
{
    struct tcp_stream *s = arg;

    pthread_barrier_wait(&tcp_line);
    while (!atomic_load_explicit(&tcp_stop, memory_order_relaxed)) {
        for (uint64_t off = 0; off < to.block;) {
            ssize_t n = send(s->tx_fd, s->src + off, to.block - off, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                goto out;
            off += (uint64_t)n;
        }
    }
out:
    shutdown(s->tx_fd, SHUT_WR);    /* the receiver drains what is in flight, then ends */
    return NULL;
}

static void *tcp_recv_run(void *arg)
{
    struct tcp_stream *s = arg;

    pthread_barrier_wait(&tcp_line);
    s->t0 = now_us();
    for (;;) {
        ssize_t n = recv(s->rx_fd, s->rx_buf, to.block, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        uint64_t at = s->received % to.block, k = (uint64_t)n < 64 ? (uint64_t)n : 64;
        if (k > to.block - at)
            k = to.block - at;
        s->differs |= memcmp(s->rx_buf, s->src + at, k) != 0;
        s->received += (uint64_t)n;
    }
    s->t1 = now_us();
    return NULL;
}

/* A connected pair of loopback TCP sockets: *tx_fd sends to *rx_fd. */
static bool tcp_pair(int *tx_fd, int *rx_fd)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t alen = sizeof(a);
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool ok = false;

    *tx_fd = *rx_fd = -1;
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(ls, 1) != 0 ||
        getsockname(ls, (struct sockaddr *)&a, &alen) != 0)
        goto out;
    *tx_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*tx_fd < 0 || connect(*tx_fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        goto out;
    *rx_fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
    ok = *rx_fd >= 0;
out:
    if (!ok)
        warn("a loopback TCP connection: %s", strerror(errno));
    if (ls >= 0)
        close(ls);
    return ok;
}

static void tcp_usage(FILE *f)
{
    fprintf(f,
        "usage: b10-bench tcp [options]\n"
        "      --streams N       connections at once, two threads each (1; 1..%u)\n"
        "      --block SIZE      bytes of one send() (4M; 4K..1G)\n"
        "      --ms MS           how long to send (2000; 100..60000)\n", MAX_THREADS / 2);
}

static int cmd_tcp(int argc, char **argv)
{
    enum { O_STREAMS = 256, O_BLOCK, O_MS };
    static const struct option lo[] = {
        { "streams", required_argument, NULL, O_STREAMS },
        { "block", required_argument, NULL, O_BLOCK },
        { "ms", required_argument, NULL, O_MS },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const struct num_opt nums[] = {
        { O_STREAMS, false, 1, MAX_THREADS / 2, &to.streams },
        { O_BLOCK, true, 4 * KIB, 1 * GIB, &to.block },
        { O_MS, false, 100, 60000, &to.ms },
    };
    int rc = parse_num_opts(argc, argv, "tcp", lo, nums, sizeof(nums) / sizeof(nums[0]),
                            tcp_usage);
    if (rc >= 0)
        return rc;
    if (!memory_fits((to.streams + 1) * to.block, "the buffers"))
        return 1;
    uint8_t *src = malloc(to.block);
    struct tcp_stream *ss = calloc(to.streams, sizeof(*ss));
    unsigned made = 0;
    rc = 1;
    if (src == NULL || ss == NULL)
        goto out;
    pattern_fill(src, to.block, 7);
    for (; made < to.streams; made++) {
        struct tcp_stream *s = &ss[made];
        s->src = src;
        if ((s->rx_buf = malloc(to.block)) == NULL || !tcp_pair(&s->tx_fd, &s->rx_fd)) {
            free(s->rx_buf);
            goto out;
        }
        memset(s->rx_buf, 0, to.block);
    }
    pthread_barrier_init(&tcp_line, NULL, 2 * to.streams + 1);
    for (unsigned i = 0; i < to.streams; i++) {
        if (pthread_create(&ss[i].tx, NULL, tcp_send_run, &ss[i]) != 0 ||
            pthread_create(&ss[i].rx, NULL, tcp_recv_run, &ss[i]) != 0) {
            warn("pthread_create for stream %u failed", i);
            exit(1);
        }
    }
    pthread_barrier_wait(&tcp_line);
    usleep(to.ms * 1000u);
    atomic_store(&tcp_stop, true);
    double sum = 0, lo_rate = INFINITY, hi_rate = 0;
    bool differs = false;
    for (unsigned i = 0; i < to.streams; i++) {
        pthread_join(ss[i].tx, NULL);
        pthread_join(ss[i].rx, NULL);
        double rate = (double)ss[i].received / (ss[i].t1 - ss[i].t0) / 1e3;
        sum += rate;
        lo_rate = rate < lo_rate ? rate : lo_rate;
        hi_rate = rate > hi_rate ? rate : hi_rate;
        if (ss[i].differs || ss[i].received < to.block) {
            warn("stream %u: %s", i, ss[i].differs ? "received bytes differ from those sent"
                                                     : "less than one block arrived");
            differs = true;
        }
    }
    pthread_barrier_destroy(&tcp_line);
    if (differs)
        goto out;
    printf("result tcp streams %u block %" PRIu64 " gbps %.4f stream_min_gbps %.4f "
           "stream_max_gbps %.4f\n", to.streams, to.block, sum, lo_rate, hi_rate);
    rc = 0;
out:
    for (unsigned i = 0; i < made; i++) {
        close(ss[i].tx_fd);
        close(ss[i].rx_fd);
        free(ss[i].rx_buf);
    }
    free(ss);
    free(src);
    return rc;
}

/* ================================================================ cuda */

static void cuda_usage(FILE *f)
{
    fprintf(f,
        "usage: b10-bench cuda [options]     pinned cudaMemcpy on device 0 (driver API)\n"
        "      --size SIZE       bytes of one copy (1G; 1M..64G)\n"
        "      --reps N          copies of each direction, the median reported (5; 1..100)\n");
}

#ifdef B10_HAVE_CUDA
/* What kv-cuda.h does not load: pinned host memory, device-to-device copies. */
static struct {
    CUresult (*host_alloc)(void **, size_t);
    CUresult (*host_free)(void *);
    CUresult (*dtod)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*sync)(void);
} cux;

static int cux_load(char *err, size_t errlen)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

    if (lib == NULL) {
        snprintf(err, errlen, "no CUDA driver (libcuda.so.1)");
        return -1;
    }
    void *f[4] = { dlsym(lib, "cuMemAllocHost_v2"), dlsym(lib, "cuMemFreeHost"),
                   dlsym(lib, "cuMemcpyDtoD_v2"), dlsym(lib, "cuCtxSynchronize") };

    /* memcpy: ISO C has no cast between object and function pointers. */
    memcpy(&cux.host_alloc, &f[0], sizeof(f[0]));
    memcpy(&cux.host_free, &f[1], sizeof(f[1]));
    memcpy(&cux.dtod, &f[2], sizeof(f[2]));
    memcpy(&cux.sync, &f[3], sizeof(f[3]));
    if (!f[0] || !f[1] || !f[2] || !f[3]) {
        snprintf(err, errlen, "the CUDA driver lacks a pinned-memory or copy entry point");
        return -1;
    }
    return 0;
}

/* GB/s of one direction: the median of reps copies after one untimed. */
static double cuda_time(int dir, uint64_t size, unsigned reps, void *host,
                        const struct kvcuda_alloc *d1, const struct kvcuda_alloc *d2)
{
    double v[100];

    for (unsigned r = 0; r <= reps; r++) {
        double t0 = now_us();
        int ok;

        switch (dir) {
        case 0: ok = kvcuda_upload(d1->ptr, host, size) == 0; break;
        case 1: ok = kvcuda_download(host, d1->ptr, size) == 0; break;
        default: ok = cux.dtod(d2->ptr, d1->ptr, size) == CUDA_SUCCESS; break;
        }
        ok = ok && cux.sync() == CUDA_SUCCESS;
        if (!ok)
            return -1;
        if (r > 0)
            v[r - 1] = (double)size / (now_us() - t0) / 1e3;
    }
    qsort(v, reps, sizeof(v[0]), cmp_double);
    return reps % 2 ? v[reps / 2] : (v[reps / 2 - 1] + v[reps / 2]) / 2;
}
#endif

static int cmd_cuda(int argc, char **argv)
{
    enum { O_SIZE = 256, O_REPS };
    static const struct option lo[] = {
        { "size", required_argument, NULL, O_SIZE },
        { "reps", required_argument, NULL, O_REPS },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    uint64_t size = GIB;
    unsigned reps = 5;
    int c;

    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        bool ok = true;

        switch (c) {
        case O_SIZE: ok = parse_size(optarg, MIB, MAX_SIZE, &size); break;
        case O_REPS: ok = parse_uint(optarg, 1, 100, &reps); break;
        case 'h': cuda_usage(stdout); return 0;
        default: cuda_usage(stderr); return 2;
        }
        if (!ok) {
            warn("bad value for --%s: '%s' (see b10-bench cuda --help)", opt_name(lo, c), optarg);
            return 2;
        }
    }
    if (optind != argc) {
        cuda_usage(stderr);
        return 2;
    }
    char err[256];

    if (bench_cuda_init(err, sizeof(err)) != 0) {
        warn("cuda: %s", err);
        return 3;
    }
#ifdef B10_HAVE_CUDA
    struct kvcuda_alloc d1 = { 0 }, d2 = { 0 };
    void *host = NULL;
    int rc = 1;

    if (cux_load(err, sizeof(err)) != 0) {
        warn("cuda: %s", err);
        return 3;
    }
    if (!memory_fits(size, "the pinned buffer"))
        return 1;
    if (cux.host_alloc(&host, size) != CUDA_SUCCESS) {
        warn("cuMemAllocHost(%" PRIu64 ") failed", size);
        return 1;
    }
    if (kvcuda_alloc(false, size, &d1, err, sizeof(err)) != 0 ||
        kvcuda_alloc(false, size, &d2, err, sizeof(err)) != 0) {
        warn("cuda: %s", err);
        goto out;
    }
    memset(host, POISON, size);
    double h2d = cuda_time(0, size, reps, host, &d1, &d2);
    double d2h = cuda_time(1, size, reps, host, &d1, &d2);
    double d2d = cuda_time(2, size, reps, host, &d1, &d2);
    if (h2d < 0 || d2h < 0 || d2d < 0) {
        warn("cuda: a copy failed");
        goto out;
    }
    printf("result cuda bytes %" PRIu64 " reps %u h2d_gbps %.4f d2h_gbps %.4f d2d_gbps %.4f\n",
           size, reps, h2d, d2h, d2d);
    rc = 0;
out:
    kvcuda_free(&d1);
    kvcuda_free(&d2);
    cux.host_free(host);
    return rc;
#else
    return 3;
#endif
}

/* ================================================================ main */

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "write") == 0)
        return cmd_write(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "memcpy") == 0)
        return cmd_memcpy(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "tcp") == 0)
        return cmd_tcp(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "cuda") == 0)
        return cmd_cuda(argc - 1, argv + 1);
    fprintf(argc >= 2 && strcmp(argv[1], "--help") == 0 ? stdout : stderr,
            "usage: b10-bench write|memcpy|tcp|cuda [options]   (b10-bench COMMAND --help)\n");
    return argc >= 2 && strcmp(argv[1], "--help") == 0 ? 0 : 2;
}
