/*
 * b10-kvrank — a rank process with a synthetic paged KV cache, for the demo
 * and the integration tests of b10d.
 *
 * The pool looks like a Llama-70B rank's: L layers, each one region holding
 * a K pool and a V pool of N blocks; a block holds B tokens of T bytes each
 * (16 tokens × 8 KV heads × 128 dims × 2 bytes = 32 KiB per block per layer
 * per K/V). Memory comes from b10_dram_alloc() and is registered with the
 * local b10d, one region per layer.
 *
 *   --role decode   the destination. Fills its pool with a poison pattern,
 *                   registers it, writes its agent descriptor and pool layout
 *                   to DIR/decode.desc, then for each round waits for
 *                   DIR/done.R, recomputes that round's plan from what the
 *                   prefill wrote there, and verifies the whole pool.
 *   --role prefill  the source. Fills its pool with a pattern derived from
 *                   (seed, byte offset), reads DIR/decode.desc, builds the
 *                   request's spans from random block tables derived from
 *                   --seed, submits them as one or more WRITEs, waits, prints
 *                   throughput and writes DIR/done.R with every outcome.
 *
 * A round r uses the r-th slice of a random permutation of the blocks on
 * each side, so rounds never touch the same destination blocks and the
 * decode can check the whole pool after every round: bytes of transfers
 * that succeeded equal their source, bytes of rejected ones and bytes
 * outside every span still hold the poison, and bytes of transfers that
 * failed midway (deadline, cancel) hold either the poison or their source,
 * never anything else.
 *
 * Exit status: 0 pass, 1 verification or expectation failure, 2 usage or
 * setup error.
 */
#include <b10/b10.h>

#include "kv-cuda.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXIT_PASS  0
#define EXIT_FAIL  1
#define EXIT_SETUP 2

#define DESC_MAGIC "b10-kvrank-desc 1"
#define DONE_MAGIC "b10-kvrank-done 1"
#define MAX_LAYERS 4096
#define MAX_XFERS  4096
#define DETAIL_MAX 512

/* ---------------------------------------------------------------- options */

enum role { ROLE_NONE, ROLE_DECODE, ROLE_PREFILL };

/* What both sides must agree on to recompute a round's plan. */
struct plan_params {
    uint64_t seed;          /* block tables and source pattern */
    uint32_t round;
    uint32_t req_blocks;    /* blocks of the request, per layer and K/V */
    uint32_t span_offset;   /* first byte copied inside each block */
    uint32_t span_bytes;    /* piece size inside a block; 0: the whole rest */
    uint32_t span_gap;      /* bytes skipped between pieces (left untouched) */
    uint32_t dst_shift;     /* destination pieces sit this much later in their block */
    uint32_t span_rand;     /* piece sizes random in [1, 2*span_bytes) */
    uint32_t xfers;         /* WRITEs the request is split into */
    uint32_t oob;           /* one destination piece straddles the end of the registrations */
};

struct geom {
    uint32_t layers;
    uint32_t blocks;        /* per pool (K or V) */
    uint32_t block_tokens;
    uint32_t token_bytes;
};

struct opts {
    enum role role;
    const char *socket_path;
    const char *name;
    const char *dir;
    struct geom geom;
    struct plan_params plan;
    uint64_t poison_seed;
    uint32_t rounds;        /* decode: rounds to verify */
    uint32_t concurrent;    /* prefill: WRITEs in flight at once; 0: all */
    uint32_t deadline_ms;   /* 0: the daemon's default */
    int cancel_after_ms;    /* < 0: never */
    int wait_ms;            /* bound of every wait on files and transfers */
    bool have_expect;
    b10_status_t expect;
    bool expect_detail;     /* failures must carry a non-empty detail */
    bool corrupt_one;
    bool strict;            /* decode: failed transfers must not have written a byte */
    bool hold;              /* prefill: write DIR/ready.R, wait for DIR/go.R before submitting */
    bool orphan;            /* decode: keep verifying after the daemon went away (fault tests) */
    bool verbose;
};

static const char *prog = "b10-kvrank";

/*
 * Where the pool lives: --mem dram (default: b10_dram_alloc), heap (plain
 * malloc'd memory, which the daemon reaches through /proc/self/mem), vram
 * (cuMemAlloc) or vmm (cuMemCreate).
 */
enum kvmem { KVMEM_DRAM, KVMEM_HEAP, KVMEM_VRAM, KVMEM_VMM };
static enum kvmem kvmem = KVMEM_DRAM;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    printf("%s: ", prog);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
    fflush(stdout);
}

static void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warn(const char *fmt, ...)
{
    va_list ap;

    fflush(stdout);
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* b10_status_t from "B10_ERR_DEADLINE" or "ERR_DEADLINE"; false if unknown. */
static bool status_parse(const char *s, b10_status_t *status_p)
{
    static const struct { const char *name; b10_status_t value; } table[] = {
#define B10_STATUS_ROW(name, value, action, text) { #name, B10_##name },
        B10_STATUS_MAP(B10_STATUS_ROW)
#undef B10_STATUS_ROW
    };

    if (strncmp(s, "B10_", 4) == 0)
        s += 4;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (strcmp(s, table[i].name) == 0) {
            *status_p = table[i].value;
            return true;
        }
    }
    return false;
}

static bool parse_u32(const char *s, uint32_t *v_p)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 0);
    if (errno != 0 || end == s || *end != '\0' || v > UINT32_MAX || s[0] == '-')
        return false;
    *v_p = (uint32_t)v;
    return true;
}

static bool parse_u64(const char *s, uint64_t *v_p)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 0);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-')
        return false;
    *v_p = v;
    return true;
}

static void usage(FILE *f)
{
    fprintf(f,
        "usage: %s --role decode|prefill --dir DIR [options]\n"
        "\n"
        "common:\n"
        "  -s, --socket PATH       b10d socket (default $B10_SOCKET, else libb10's)\n"
        "      --mem KIND          where the pool lives: dram (default, b10_dram_alloc), heap\n"
        "                          (malloc: reached through /proc/self/mem), vram (cuMemAlloc)\n"
        "                          or vmm (cuMemCreate, exported as a file descriptor)\n"
        "      --name NAME         agent name (default decode / prefill)\n"
        "      --dir DIR           where the two ranks exchange files (required)\n"
        "      --layers N          layers (80)\n"
        "      --blocks N          blocks per K or V pool per layer (64)\n"
        "      --block-tokens N    tokens per block (16)\n"
        "      --token-bytes N     bytes per token per layer per K/V (2048 = 8 heads x 128 x 2)\n"
        "      --seed N            prefill: block tables and source pattern; decode: poison (1)\n"
        "      --round R           prefill: which round this is (0)\n"
        "      --wait-ms MS        bound of every wait (120000)\n"
        "  -v, --verbose           print libb10's log lines\n"
        "decode:\n"
        "      --rounds N          rounds to verify before exiting (1)\n"
        "      --corrupt-one       flip one destination byte before the last verification\n"
        "      --strict            a failed transfer must have left its destination untouched\n"
        "      --orphan            go on verifying if the daemon goes away (kill -9 tests)\n"
        "                          (default: untouched or its source bytes, as after a partial landing)\n"
        "prefill (the decode reads these from DIR/done.R):\n"
        "      --req-blocks N      blocks of the request (48: 240 MiB with the defaults)\n"
        "      --span-bytes N      split each block into pieces of N bytes (0: whole block)\n"
        "      --span-offset N     skip N bytes at the start of each block\n"
        "      --span-gap N        leave N bytes between pieces\n"
        "      --span-rand         random piece sizes in [1, 2*span-bytes)\n"
        "      --dst-shift N       destination pieces N bytes later in their block than the source\n"
        "      --xfers N           split the request into N WRITEs (1, or --concurrent)\n"
        "      --out-of-bounds     one destination piece straddles the end of the decode's memory\n"
        "prefill only:\n"
        "      --concurrent N      WRITEs in flight at once (default: all)\n"
        "      --deadline-ms MS    per-transfer deadline (default: the daemon's)\n"
        "      --cancel-after-ms MS  cancel every transfer still in flight after MS\n"
        "      --expect STATUS     every transfer must end with STATUS (e.g. B10_ERR_DEADLINE)\n"
        "      --expect-detail     every failure must come with a non-empty detail\n"
        "      --hold              write DIR/ready.R, then wait for DIR/go.R before submitting\n",
        prog);
}

static int opts_parse(int argc, char **argv, struct opts *o)
{
    enum {
        O_NAME = 256, O_DIR, O_ROLE, O_LAYERS, O_BLOCKS, O_BTOK, O_TBYTES, O_SEED, O_ROUND,
        O_ROUNDS, O_WAIT, O_CORRUPT, O_REQ, O_SBYTES, O_SOFF, O_SGAP, O_SRAND, O_SHIFT,
        O_XFERS, O_OOB, O_CONC, O_DEADLINE, O_CANCEL, O_EXPECT, O_EXPECT_DETAIL, O_HOLD,
        O_STRICT, O_ORPHAN, O_MEM,
    };
    static const struct option longopts[] = {
        { "socket", required_argument, NULL, 's' },
        { "name", required_argument, NULL, O_NAME },
        { "dir", required_argument, NULL, O_DIR },
        { "role", required_argument, NULL, O_ROLE },
        { "layers", required_argument, NULL, O_LAYERS },
        { "blocks", required_argument, NULL, O_BLOCKS },
        { "block-tokens", required_argument, NULL, O_BTOK },
        { "token-bytes", required_argument, NULL, O_TBYTES },
        { "seed", required_argument, NULL, O_SEED },
        { "round", required_argument, NULL, O_ROUND },
        { "rounds", required_argument, NULL, O_ROUNDS },
        { "wait-ms", required_argument, NULL, O_WAIT },
        { "corrupt-one", no_argument, NULL, O_CORRUPT },
        { "req-blocks", required_argument, NULL, O_REQ },
        { "span-bytes", required_argument, NULL, O_SBYTES },
        { "span-offset", required_argument, NULL, O_SOFF },
        { "span-gap", required_argument, NULL, O_SGAP },
        { "span-rand", no_argument, NULL, O_SRAND },
        { "dst-shift", required_argument, NULL, O_SHIFT },
        { "xfers", required_argument, NULL, O_XFERS },
        { "out-of-bounds", no_argument, NULL, O_OOB },
        { "concurrent", required_argument, NULL, O_CONC },
        { "deadline-ms", required_argument, NULL, O_DEADLINE },
        { "cancel-after-ms", required_argument, NULL, O_CANCEL },
        { "expect", required_argument, NULL, O_EXPECT },
        { "expect-detail", no_argument, NULL, O_EXPECT_DETAIL },
        { "hold", no_argument, NULL, O_HOLD },
        { "strict", no_argument, NULL, O_STRICT },
        { "mem", required_argument, NULL, O_MEM },
        { "orphan", no_argument, NULL, O_ORPHAN },
        { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    bool xfers_set = false;
    uint32_t u;
    int c;

    memset(o, 0, sizeof(*o));
    o->geom = (struct geom){ .layers = 80, .blocks = 64, .block_tokens = 16, .token_bytes = 2048 };
    o->plan.seed = 1;
    o->plan.req_blocks = 48;
    o->plan.xfers = 1;
    o->poison_seed = 1;
    o->rounds = 1;
    o->cancel_after_ms = -1;
    o->wait_ms = 120000;

    while ((c = getopt_long(argc, argv, "s:vh", longopts, NULL)) != -1) {
        bool ok = true;

        switch (c) {
        case 's': o->socket_path = optarg; break;
        case O_NAME: o->name = optarg; break;
        case O_DIR: o->dir = optarg; break;
        case O_ROLE:
            if (strcmp(optarg, "decode") == 0)
                o->role = ROLE_DECODE;
            else if (strcmp(optarg, "prefill") == 0)
                o->role = ROLE_PREFILL;
            else
                ok = false;
            break;
        case O_LAYERS: ok = parse_u32(optarg, &o->geom.layers); break;
        case O_BLOCKS: ok = parse_u32(optarg, &o->geom.blocks); break;
        case O_BTOK: ok = parse_u32(optarg, &o->geom.block_tokens); break;
        case O_TBYTES: ok = parse_u32(optarg, &o->geom.token_bytes); break;
        case O_SEED:
            ok = parse_u64(optarg, &o->plan.seed);
            o->poison_seed = o->plan.seed;
            break;
        case O_ROUND: ok = parse_u32(optarg, &o->plan.round); break;
        case O_ROUNDS: ok = parse_u32(optarg, &o->rounds) && o->rounds > 0; break;
        case O_WAIT: ok = parse_u32(optarg, &u) && u > 0 && u <= INT32_MAX; o->wait_ms = (int)u; break;
        case O_CORRUPT: o->corrupt_one = true; break;
        case O_REQ: ok = parse_u32(optarg, &o->plan.req_blocks) && o->plan.req_blocks > 0; break;
        case O_SBYTES: ok = parse_u32(optarg, &o->plan.span_bytes); break;
        case O_SOFF: ok = parse_u32(optarg, &o->plan.span_offset); break;
        case O_SGAP: ok = parse_u32(optarg, &o->plan.span_gap); break;
        case O_SRAND: o->plan.span_rand = 1; break;
        case O_SHIFT: ok = parse_u32(optarg, &o->plan.dst_shift); break;
        case O_XFERS:
            ok = parse_u32(optarg, &o->plan.xfers) && o->plan.xfers > 0 && o->plan.xfers <= MAX_XFERS;
            xfers_set = true;
            break;
        case O_OOB: o->plan.oob = 1; break;
        case O_CONC: ok = parse_u32(optarg, &o->concurrent) && o->concurrent > 0; break;
        case O_DEADLINE: ok = parse_u32(optarg, &o->deadline_ms) && o->deadline_ms > 0; break;
        case O_CANCEL: ok = parse_u32(optarg, &u) && u <= INT32_MAX; o->cancel_after_ms = (int)u; break;
        case O_EXPECT: ok = status_parse(optarg, &o->expect); o->have_expect = true; break;
        case O_EXPECT_DETAIL: o->expect_detail = true; break;
        case O_HOLD: o->hold = true; break;
        case O_STRICT: o->strict = true; break;
        case O_MEM:
            if (strcmp(optarg, "dram") == 0)
                kvmem = KVMEM_DRAM;
            else if (strcmp(optarg, "heap") == 0)
                kvmem = KVMEM_HEAP;
            else if (strcmp(optarg, "vram") == 0)
                kvmem = KVMEM_VRAM;
            else if (strcmp(optarg, "vmm") == 0)
                kvmem = KVMEM_VMM;
            else {
                warn("--mem: '%s' is not dram, heap, vram or vmm", optarg);
                return -1;
            }
            break;
        case O_ORPHAN: o->orphan = true; break;
        case 'v': o->verbose = true; break;
        case 'h': usage(stdout); exit(EXIT_PASS);
        default: usage(stderr); return -1;
        }
        if (!ok) {
            warn("bad value for option %s: %s", argv[optind - 1], optarg ? optarg : "");
            return -1;
        }
    }
    if (optind != argc) {
        warn("unexpected argument %s", argv[optind]);
        return -1;
    }
    if (o->role == ROLE_NONE || o->dir == NULL) {
        warn("--role and --dir are required");
        usage(stderr);
        return -1;
    }
    /* --concurrent N alone: N WRITEs, all in flight at once. */
    if (o->concurrent && !xfers_set)
        o->plan.xfers = o->concurrent > MAX_XFERS ? MAX_XFERS : o->concurrent;
    if (o->name == NULL)
        o->name = o->role == ROLE_DECODE ? "decode" : "prefill";
    if (o->socket_path == NULL)
        o->socket_path = getenv("B10_SOCKET");
    return 0;
}

/* ---------------------------------------------------------------- patterns */

static inline uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t src_key(uint64_t seed) { return mix64(seed ^ 0x534f555243450000ull); }   /* "SOURCE" */
static uint64_t poison_key(uint64_t seed) { return mix64(seed ^ 0x504f49534f4e0000ull); } /* "POISON" */

/* The byte at logical offset off of the stream keyed by key. */
static inline uint8_t pattern_byte(uint64_t key, uint64_t off)
{
    return (uint8_t)(mix64(key ^ ((off >> 3) * 0xd6e8feb86659fd93ull)) >> (8 * (off & 7)));
}

static void pattern_fill(uint8_t *dst, uint64_t key, uint64_t off, size_t len)
{
    while (len > 0) {
        uint64_t w = mix64(key ^ ((off >> 3) * 0xd6e8feb86659fd93ull));
        unsigned k = (unsigned)(off & 7);

        if (k == 0 && len >= 8) {
            /* A whole word: on a little-endian machine, the same bytes in one store. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            memcpy(dst, &w, 8);
#else
            for (unsigned i = 0; i < 8; i++)
                dst[i] = (uint8_t)(w >> (8 * i));
#endif
            dst += 8;
            off += 8;
            len -= 8;
            continue;
        }
        size_t n = 8 - k < len ? 8 - k : len;

        for (size_t i = 0; i < n; i++)
            dst[i] = (uint8_t)(w >> (8 * (k + i)));
        dst += n;
        off += n;
        len -= n;
    }
}

/* ---------------------------------------------------------------- the pool */

struct pool {
    struct geom g;
    uint64_t block_bytes;
    uint64_t layer_bytes;   /* K pool then V pool */
    uint64_t bytes;         /* all layers */
    uint8_t **base;         /* per layer, from b10_dram_alloc; with --mem vram/vmm a host mirror */
    struct kvcuda_alloc *dev; /* per layer with --mem vram/vmm: the device memory registered */
    b10_mem_t **mem;        /* per layer, once registered */
};


static int geom_check(const struct geom *g)
{
    if (g->layers == 0 || g->layers > MAX_LAYERS || g->blocks == 0 || g->block_tokens == 0 ||
        g->token_bytes == 0) {
        warn("bad geometry: layers %u blocks %u block-tokens %u token-bytes %u",
             g->layers, g->blocks, g->block_tokens, g->token_bytes);
        return -1;
    }
    if ((uint64_t)g->block_tokens * g->token_bytes > UINT32_MAX ||
        (uint64_t)g->block_tokens * g->token_bytes * 2 * g->blocks * g->layers > (1ull << 40)) {
        warn("geometry too large");
        return -1;
    }
    return 0;
}

static void pool_free(struct pool *p, b10_conn_t *conn)
{
    if (p->base == NULL)
        return;
    for (uint32_t l = 0; l < p->g.layers; l++) {
        if (p->mem != NULL && p->mem[l] != NULL && conn != NULL) {
            b10_status_t st = b10_mem_deregister(conn, p->mem[l]);

            if (st != B10_OK)
                warn("deregister layer %u: %s: %s", l, b10_status_name(st), b10_status_str(st));
        }
        if (p->dev != NULL) {
            kvcuda_free(&p->dev[l]);
            free(p->base[l]);
        } else if (p->base[l] != NULL) {
            if (kvmem == KVMEM_HEAP)
                free(p->base[l]);
            else
                b10_dram_free(p->base[l]);
        }
    }
    free(p->dev);
    p->dev = NULL;
    free(p->mem);
    free(p->base);
    p->mem = NULL;
    p->base = NULL;
}

/* --mem vram/vmm: device memory per layer, filled through a host mirror. */
static int pool_alloc_device(struct pool *p, const struct geom *g, uint64_t key)
{
    char err[256];

    p->dev = calloc(g->layers, sizeof(*p->dev));
    if (p->dev == NULL || kvcuda_init(err, sizeof(err)) != 0) {
        warn("device memory: %s", p->dev == NULL ? "out of memory" : err);
        goto fail;
    }
    for (uint32_t l = 0; l < g->layers; l++) {
        p->base[l] = malloc(p->layer_bytes);
        if (p->base[l] == NULL ||
            kvcuda_alloc(kvmem == KVMEM_VMM, p->layer_bytes, &p->dev[l], err, sizeof(err)) != 0) {
            warn("layer %u: %s", l, p->base[l] == NULL ? "out of memory" : err);
            goto fail;
        }
        pattern_fill(p->base[l], key, l * p->layer_bytes, p->layer_bytes);
        if (kvcuda_upload(p->dev[l].ptr, p->base[l], p->layer_bytes) != 0) {
            warn("layer %u: copying the pattern to the device failed", l);
            goto fail;
        }
    }
    return 0;
fail:
    pool_free(p, NULL);
    return -1;
}

/* --mem vram/vmm: bring the device's bytes into the host mirror, for verifying. */
static int pool_sync(struct pool *p)
{
    for (uint32_t l = 0; p->dev != NULL && l < p->g.layers; l++) {
        if (kvcuda_download(p->base[l], p->dev[l].ptr, p->layer_bytes) != 0) {
            warn("layer %u: copying the device's bytes back failed", l);
            return -1;
        }
    }
    return 0;
}

/* The address of pool offset off as this rank's daemon sees it: device memory when there is some. */
static uint64_t pool_addr(const struct pool *p, uint64_t off)
{
    uint32_t l = (uint32_t)(off / p->layer_bytes);
    return (p->dev != NULL ? p->dev[l].ptr : (uint64_t)(uintptr_t)p->base[l]) + off % p->layer_bytes;
}

/* Allocate the pool and fill every layer with the stream keyed by key. */
static int pool_alloc(struct pool *p, const struct geom *g, uint64_t key)
{
    memset(p, 0, sizeof(*p));
    p->g = *g;
    p->block_bytes = (uint64_t)g->block_tokens * g->token_bytes;
    p->layer_bytes = 2 * (uint64_t)g->blocks * p->block_bytes;
    p->bytes = p->layer_bytes * g->layers;
    p->base = calloc(g->layers, sizeof(*p->base));
    p->mem = calloc(g->layers, sizeof(*p->mem));
    if (p->base == NULL || p->mem == NULL) {
        warn("out of memory");
        goto fail;
    }
    if (kvmem == KVMEM_VRAM || kvmem == KVMEM_VMM)
        return pool_alloc_device(p, g, key);
    for (uint32_t l = 0; l < g->layers; l++) {
        void *addr = NULL;
        b10_status_t st = B10_OK;

        if (kvmem == KVMEM_HEAP) {
            if (posix_memalign(&addr, 64, p->layer_bytes) != 0) {
                warn("malloc(%" PRIu64 ") for layer %u failed", p->layer_bytes, l);
                goto fail;
            }
        } else {
            st = b10_dram_alloc(p->layer_bytes, &addr);
        }
        if (st != B10_OK) {
            warn("b10_dram_alloc(%" PRIu64 ") for layer %u: %s: %s", p->layer_bytes, l,
                 b10_status_name(st), b10_status_str(st));
            goto fail;
        }
        p->base[l] = addr;
        pattern_fill(p->base[l], key, l * p->layer_bytes, p->layer_bytes);
    }
    return 0;
fail:
    pool_free(p, NULL);
    return -1;
}

static int pool_register(struct pool *p, b10_conn_t *conn)
{
    for (uint32_t l = 0; l < p->g.layers; l++) {
        b10_mem_params_t mp = {
            .field_mask = 0,
            .kind = p->dev != NULL ? B10_MEM_VRAM : B10_MEM_DRAM,
            .addr = p->dev != NULL ? (void *)(uintptr_t)p->dev[l].ptr : p->base[l],
            .length = p->layer_bytes,
        };
        b10_status_t st = b10_mem_register(conn, &mp, &p->mem[l]);

        if (st != B10_OK) {
            warn("register layer %u (%" PRIu64 " bytes): %s: %s: %s", l, p->layer_bytes,
                 b10_status_name(st), b10_status_str(st), b10_conn_detail(conn));
            return -1;
        }
    }
    return 0;
}

static uint8_t *pool_at(const struct pool *p, uint64_t off)
{
    return p->base[off / p->layer_bytes] + off % p->layer_bytes;
}

/* ---------------------------------------------------------------- the plan */

/* One copy: logical offsets into each side's pool. */
struct piece {
    uint64_t src;
    uint64_t dst;
    uint64_t len;
    uint32_t xfer;
    uint32_t oob;   /* destination deliberately outside the decode's registrations */
};

struct plan {
    struct piece *v;
    size_t n, cap;
};

static int plan_push(struct plan *pl, const struct piece *pc)
{
    if (pl->n == pl->cap) {
        size_t cap = pl->cap ? pl->cap * 2 : 1024;
        struct piece *v = realloc(pl->v, cap * sizeof(*v));

        if (v == NULL)
            return -1;
        pl->v = v;
        pl->cap = cap;
    }
    pl->v[pl->n++] = *pc;
    return 0;
}

static void plan_free(struct plan *pl)
{
    free(pl->v);
    memset(pl, 0, sizeof(*pl));
}

static void permute(uint32_t *perm, uint32_t n, uint64_t key)
{
    uint64_t s = key;

    for (uint32_t i = 0; i < n; i++)
        perm[i] = i;
    for (uint32_t i = n - 1; i > 0; i--) {
        uint32_t j = (uint32_t)((s = mix64(s)) % (i + 1));
        uint32_t t = perm[i];

        perm[i] = perm[j];
        perm[j] = t;
    }
}

/*
 * The round's pieces, ordered by layer, K/V, request block, then offset in
 * the block; xfer k takes the k-th contiguous share of them (layer groups).
 * Deterministic in (pp, g): both ranks compute the same plan.
 */
static int plan_build(const struct plan_params *pp, const struct geom *g, struct plan *pl)
{
    uint64_t block_bytes = (uint64_t)g->block_tokens * g->token_bytes;
    uint32_t *sperm = NULL, *dperm = NULL;
    uint64_t rnd = mix64(pp->seed ^ 0x5350414e00000000ull ^ pp->round);
    uint64_t first = (uint64_t)pp->round * pp->req_blocks;

    memset(pl, 0, sizeof(*pl));
    if (first + pp->req_blocks > g->blocks) {
        warn("round %u of %u blocks does not fit in %u blocks per pool", pp->round,
             pp->req_blocks, g->blocks);
        return -1;
    }
    if ((uint64_t)pp->span_offset + pp->dst_shift >= block_bytes) {
        warn("span offset %u + dst shift %u leave nothing of a %" PRIu64 "-byte block",
             pp->span_offset, pp->dst_shift, block_bytes);
        return -1;
    }
    if (pp->span_rand && pp->span_bytes == 0) {
        warn("--span-rand needs --span-bytes");
        return -1;
    }
    sperm = malloc(g->blocks * sizeof(*sperm));
    dperm = malloc(g->blocks * sizeof(*dperm));
    if (sperm == NULL || dperm == NULL)
        goto nomem;
    permute(sperm, g->blocks, mix64(pp->seed ^ 1));
    permute(dperm, g->blocks, mix64(pp->seed ^ 2));

    for (uint32_t l = 0; l < g->layers; l++) {
        for (uint32_t kv = 0; kv < 2; kv++) {
            for (uint32_t i = 0; i < pp->req_blocks; i++) {
                uint64_t pool_off = l * 2 * (uint64_t)g->blocks * block_bytes +
                                    kv * (uint64_t)g->blocks * block_bytes;
                uint64_t sb = pool_off + sperm[first + i] * block_bytes;
                uint64_t db = pool_off + dperm[first + i] * block_bytes;
                uint64_t end = block_bytes - pp->dst_shift;

                for (uint64_t o = pp->span_offset; o < end;) {
                    uint64_t len = end - o;

                    if (pp->span_rand)
                        len = 1 + (rnd = mix64(rnd)) % (2 * (uint64_t)pp->span_bytes - 1);
                    else if (pp->span_bytes)
                        len = pp->span_bytes;
                    if (len > end - o)
                        len = end - o;
                    struct piece pc = { .src = sb + o, .dst = db + o + pp->dst_shift, .len = len };
                    if (plan_push(pl, &pc) != 0)
                        goto nomem;
                    o += len + pp->span_gap;
                }
            }
        }
    }
    for (size_t i = 0; i < pl->n; i++)
        pl->v[i].xfer = (uint32_t)(i * pp->xfers / pl->n);
    if (pp->xfers > pl->n) {
        warn("%u xfers but only %zu pieces", pp->xfers, pl->n);
        goto fail;
    }
    if (pp->oob)
        pl->v[pl->n / 2].oob = 1;
    free(sperm);
    free(dperm);
    return 0;
nomem:
    warn("out of memory building the plan");
fail:
    free(sperm);
    free(dperm);
    plan_free(pl);
    return -1;
}

/* ---------------------------------------------------------------- files */

static int wait_file(const char *path, int wait_ms, b10_conn_t *conn)
{
    double deadline = now_s() + wait_ms / 1000.0;
    struct stat st;

    while (stat(path, &st) != 0) {
        if (now_s() > deadline) {
            warn("gave up after %d ms waiting for %s", wait_ms, path);
            return -1;
        }
        if (conn != NULL) {
            /* Keep the daemon connection drained; notice if it goes away. */
            b10_status_t s = b10_conn_progress(conn);

            if (s != B10_OK) {
                warn("daemon connection: %s: %s", b10_status_name(s), b10_status_str(s));
                return -1;
            }
        }
        sleep_ms(20);
    }
    return 0;
}

/* Write path atomically: a reader never sees half of it. */
static int write_file(const char *path, const void *head, size_t head_len, const void *body,
                      size_t body_len)
{
    char tmp[4096];
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    f = fopen(tmp, "we");
    if (f == NULL) {
        warn("create %s: %s", tmp, strerror(errno));
        return -1;
    }
    if (fwrite(head, 1, head_len, f) != head_len ||
        (body_len > 0 && fwrite(body, 1, body_len, f) != body_len) || fclose(f) != 0) {
        warn("write %s: %s", tmp, strerror(errno));
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, path) != 0) {
        warn("rename %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

static char *read_file(const char *path, size_t *len_p)
{
    FILE *f = fopen(path, "re");
    char *buf = NULL;
    size_t len = 0, cap = 0;

    if (f == NULL) {
        warn("open %s: %s", path, strerror(errno));
        return NULL;
    }
    for (;;) {
        if (cap - len < 4096) {
            cap = cap ? cap * 2 : 65536;
            if (cap > (64u << 20)) {
                warn("%s is too large", path);
                goto fail;
            }
            char *b = realloc(buf, cap + 1);
            if (b == NULL)
                goto fail;
            buf = b;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
    }
    if (ferror(f))
        goto fail;
    fclose(f);
    buf[len] = '\0';
    *len_p = len;
    return buf;
fail:
    warn("read %s failed", path);
    free(buf);
    fclose(f);
    return NULL;
}

static void dir_path(char *out, size_t size, const char *dir, const char *name, int round)
{
    if (round < 0)
        snprintf(out, size, "%s/%s", dir, name);
    else
        snprintf(out, size, "%s/%s.%d", dir, name, round);
}

/*
 * DIR/decode.desc: text lines with the decode's name, geometry and layer
 * base addresses, then "desc_len N" and the N bytes of its agent descriptor.
 */
struct remote {
    char name[256];
    struct geom g;
    uint64_t *base;
    uint8_t *desc;
    size_t desc_len;
};

static void remote_free(struct remote *r)
{
    free(r->base);
    free(r->desc);
    memset(r, 0, sizeof(*r));
}

static int desc_write(const char *path, const char *name, const struct pool *p, const void *desc,
                      size_t desc_len)
{
    size_t cap = 512 + (size_t)p->g.layers * 40, n;
    char *head = malloc(cap);
    int rc;

    if (head == NULL)
        return -1;
    n = (size_t)snprintf(head, cap, "%s\nname %s\nlayers %u\nblocks %u\nblock_tokens %u\n"
                         "token_bytes %u\n", DESC_MAGIC, name, p->g.layers, p->g.blocks,
                         p->g.block_tokens, p->g.token_bytes);
    for (uint32_t l = 0; l < p->g.layers; l++)
        n += (size_t)snprintf(head + n, cap - n, "base %u 0x%" PRIx64 "\n", l,
                              pool_addr(p, (uint64_t)l * p->layer_bytes));
    n += (size_t)snprintf(head + n, cap - n, "desc_len %zu\n", desc_len);
    rc = write_file(path, head, n, desc, desc_len);
    free(head);
    return rc;
}

static int desc_read(const char *path, struct remote *r)
{
    size_t len, off = 0;
    char *buf = read_file(path, &len);
    uint32_t got_base = 0;

    memset(r, 0, sizeof(*r));
    if (buf == NULL)
        return -1;
    while (off < len) {
        char *line = buf + off, *nl = memchr(line, '\n', len - off);
        unsigned l;
        uint64_t v;
        size_t dl;

        if (nl == NULL)
            goto bad;
        *nl = '\0';
        off = (size_t)(nl - buf) + 1;
        if (line == buf) {
            if (strcmp(line, DESC_MAGIC) != 0)
                goto bad;
        } else if (sscanf(line, "name %255s", r->name) == 1) {
        } else if (sscanf(line, "layers %u", &r->g.layers) == 1) {
            if (r->g.layers == 0 || r->g.layers > MAX_LAYERS)
                goto bad;
            r->base = calloc(r->g.layers, sizeof(*r->base));
            if (r->base == NULL)
                goto bad;
        } else if (sscanf(line, "blocks %u", &r->g.blocks) == 1) {
        } else if (sscanf(line, "block_tokens %u", &r->g.block_tokens) == 1) {
        } else if (sscanf(line, "token_bytes %u", &r->g.token_bytes) == 1) {
        } else if (sscanf(line, "base %u 0x%" SCNx64, &l, &v) == 2) {
            if (r->base == NULL || l >= r->g.layers)
                goto bad;
            r->base[l] = v;
            got_base++;
        } else if (sscanf(line, "desc_len %zu", &dl) == 1) {
            if (dl != len - off || dl == 0)
                goto bad;
            r->desc = malloc(dl);
            if (r->desc == NULL)
                goto bad;
            memcpy(r->desc, buf + off, dl);
            r->desc_len = dl;
            break;
        } else {
            goto bad;
        }
    }
    if (r->desc == NULL || r->name[0] == '\0' || got_base != r->g.layers)
        goto bad;
    free(buf);
    return 0;
bad:
    warn("%s: malformed descriptor file", path);
    free(buf);
    remote_free(r);
    return -1;
}

/* The outcome of one WRITE, as the prefill saw it. */
struct outcome {
    b10_status_t status;
    uint64_t bytes;
    char detail[DETAIL_MAX];
};

static int done_write(const char *path, const struct plan_params *pp, const struct outcome *out)
{
    size_t cap = 1024 + (size_t)pp->xfers * (DETAIL_MAX + 64), n;
    char *buf = malloc(cap);
    int rc;

    if (buf == NULL)
        return -1;
    n = (size_t)snprintf(buf, cap,
                         "%s\nround %u\nseed %" PRIu64 "\nreq_blocks %u\nspan_offset %u\n"
                         "span_bytes %u\nspan_gap %u\ndst_shift %u\nspan_rand %u\nxfers %u\n"
                         "oob %u\n", DONE_MAGIC, pp->round, pp->seed, pp->req_blocks,
                         pp->span_offset, pp->span_bytes, pp->span_gap, pp->dst_shift,
                         pp->span_rand, pp->xfers, pp->oob);
    for (uint32_t i = 0; i < pp->xfers; i++) {
        char detail[DETAIL_MAX];

        /* One line per outcome: flatten the detail. */
        snprintf(detail, sizeof(detail), "%s", out[i].detail);
        for (char *c = detail; *c; c++)
            if (*c == '\n' || *c == '\r')
                *c = ' ';
        n += (size_t)snprintf(buf + n, cap - n, "status %u %s %s\n", i,
                              b10_status_name(out[i].status), detail);
    }
    rc = write_file(path, buf, n, NULL, 0);
    free(buf);
    return rc;
}

static int done_read(const char *path, struct plan_params *pp, b10_status_t **status_p)
{
    size_t len, off = 0;
    char *buf = read_file(path, &len);
    b10_status_t *st = NULL;
    uint32_t got = 0;

    memset(pp, 0, sizeof(*pp));
    if (buf == NULL)
        return -1;
    while (off < len) {
        char *line = buf + off, *nl = memchr(line, '\n', len - off);
        char name[64];
        unsigned i;

        if (nl == NULL)
            goto bad;
        *nl = '\0';
        off = (size_t)(nl - buf) + 1;
        if (line == buf) {
            if (strcmp(line, DONE_MAGIC) != 0)
                goto bad;
        } else if (sscanf(line, "round %u", &pp->round) == 1 ||
                   sscanf(line, "seed %" SCNu64, &pp->seed) == 1 ||
                   sscanf(line, "req_blocks %u", &pp->req_blocks) == 1 ||
                   sscanf(line, "span_offset %u", &pp->span_offset) == 1 ||
                   sscanf(line, "span_bytes %u", &pp->span_bytes) == 1 ||
                   sscanf(line, "span_gap %u", &pp->span_gap) == 1 ||
                   sscanf(line, "dst_shift %u", &pp->dst_shift) == 1 ||
                   sscanf(line, "span_rand %u", &pp->span_rand) == 1 ||
                   sscanf(line, "oob %u", &pp->oob) == 1) {
        } else if (sscanf(line, "xfers %u", &pp->xfers) == 1) {
            if (pp->xfers == 0 || pp->xfers > MAX_XFERS || st != NULL)
                goto bad;
            st = calloc(pp->xfers, sizeof(*st));
            if (st == NULL)
                goto bad;
        } else if (sscanf(line, "status %u %63s", &i, name) == 2) {
            if (st == NULL || i >= pp->xfers || !status_parse(name, &st[i]))
                goto bad;
            got++;
        } else {
            goto bad;
        }
    }
    if (st == NULL || got != pp->xfers)
        goto bad;
    free(buf);
    *status_p = st;
    return 0;
bad:
    warn("%s: malformed done file", path);
    free(buf);
    free(st);
    return -1;
}

/* ---------------------------------------------------------------- libb10 glue */

static void log_cb(void *arg, int level, const char *line)
{
    fprintf(stderr, "%s: libb10 <%d> %s\n", (const char *)arg, level, line);
}

static b10_conn_t *conn_open(const struct opts *o)
{
    b10_conn_params_t cp = {
        .field_mask = 0,
        .agent_name = o->name,
    };
    b10_conn_t *conn;
    b10_status_t st;

    if (o->socket_path != NULL) {
        cp.field_mask |= B10_CONN_FIELD_SOCKET_PATH;
        cp.socket_path = o->socket_path;
    }
    if (o->verbose) {
        cp.field_mask |= B10_CONN_FIELD_LOG;
        cp.log_cb = log_cb;
        cp.log_arg = (void *)prog;
    }
    st = b10_conn_open(&cp, &conn);
    if (st != B10_OK) {
        warn("connect to b10d at %s as %s: %s: %s", o->socket_path ? o->socket_path : "(default)",
             o->name, b10_status_name(st), b10_status_str(st));
        return NULL;
    }
    return conn;
}

/* ---------------------------------------------------------------- decode */

/* What the decode may find in a destination byte of a piece. */
enum expect_kind {
    EXP_SOURCE,     /* the transfer succeeded: exactly the source byte */
    EXP_POISON,     /* the transfer was rejected: untouched */
    EXP_EITHER,     /* the transfer failed midway: untouched or the source byte */
};

struct vpiece {
    uint64_t dst, src, len;
    uint64_t src_key;
    enum expect_kind kind;
    uint32_t round, xfer;
};

struct verify {
    struct vpiece *v;
    size_t n, cap;
    uint64_t landed_failed;     /* bytes of failed transfers that hold their source */
};

static int vpiece_cmp(const void *a, const void *b)
{
    const struct vpiece *x = a, *y = b;

    return x->dst < y->dst ? -1 : x->dst > y->dst;
}

static enum expect_kind expect_of(b10_status_t st, bool strict)
{
    if (strict)
        return st == B10_OK ? EXP_SOURCE : EXP_POISON;
    switch (st) {
    case B10_OK:
        return EXP_SOURCE;
    /* Refused before anything moved: not a byte may have landed. */
    case B10_ERR_REMOTE_REJECTED:
    case B10_ERR_NOT_REGISTERED:
    case B10_ERR_INVALID_ARG:
    case B10_ERR_UNKNOWN_AGENT:
    case B10_ERR_TOO_LARGE:
    case B10_ERR_UNSUPPORTED:
    case B10_ERR_NOT_FOUND:
        return EXP_POISON;
    default:
        return EXP_EITHER;
    }
}

static int verify_add_round(struct verify *vf, const struct plan_params *pp, const struct geom *g,
                            const b10_status_t *status, bool strict)
{
    struct plan pl;

    if (plan_build(pp, g, &pl) != 0)
        return -1;
    for (size_t i = 0; i < pl.n; i++) {
        const struct piece *pc = &pl.v[i];

        /* The out-of-bounds piece's destination is not ours to check. */
        if (pc->oob)
            continue;
        if (vf->n == vf->cap) {
            size_t cap = vf->cap ? vf->cap * 2 : 4096;
            struct vpiece *v = realloc(vf->v, cap * sizeof(*v));

            if (v == NULL) {
                plan_free(&pl);
                return -1;
            }
            vf->v = v;
            vf->cap = cap;
        }
        vf->v[vf->n++] = (struct vpiece){
            .dst = pc->dst, .src = pc->src, .len = pc->len, .src_key = src_key(pp->seed),
            .kind = expect_of(status[pc->xfer], strict), .round = pp->round, .xfer = pc->xfer,
        };
    }
    plan_free(&pl);
    qsort(vf->v, vf->n, sizeof(*vf->v), vpiece_cmp);
    for (size_t i = 1; i < vf->n; i++) {
        if (vf->v[i - 1].dst + vf->v[i - 1].len > vf->v[i].dst) {
            warn("plan bug: destination pieces overlap at offset %" PRIu64, vf->v[i].dst);
            return -1;
        }
    }
    return 0;
}

struct bad {
    bool found;
    uint64_t off;
    uint8_t got, want, alt;
    const char *what;
    const struct vpiece *vp;
};

/* Compare pool bytes [off, off+len) against the stream keyed by key at koff. */
static void check_stream(const struct pool *p, uint64_t off, uint64_t len, uint64_t key,
                         uint64_t koff, const char *what, const struct vpiece *vp, struct bad *bad,
                         uint8_t *scratch, size_t scratch_len)
{
    while (len > 0 && !bad->found) {
        uint64_t in_layer = p->layer_bytes - off % p->layer_bytes;
        size_t n = (size_t)(len < in_layer ? len : in_layer);
        const uint8_t *mem = pool_at(p, off);

        if (n > scratch_len)
            n = scratch_len;
        pattern_fill(scratch, key, koff, n);
        if (memcmp(mem, scratch, n) != 0) {
            for (size_t i = 0; i < n; i++) {
                if (mem[i] != scratch[i]) {
                    *bad = (struct bad){ true, off + i, mem[i], scratch[i], scratch[i], what, vp };
                    return;
                }
            }
        }
        off += n;
        koff += n;
        len -= n;
    }
}

static void check_either(const struct pool *p, const struct vpiece *vp, uint64_t poison,
                         struct bad *bad, uint64_t *landed_p)
{
    for (uint64_t i = 0; i < vp->len; i++) {
        uint8_t got = *pool_at(p, vp->dst + i);
        uint8_t src = pattern_byte(vp->src_key, vp->src + i);
        uint8_t psn = pattern_byte(poison, vp->dst + i);

        if (got == src && got != psn)
            (*landed_p)++;
        else if (got != psn) {
            *bad = (struct bad){ true, vp->dst + i, got, src, psn, "failed-transfer byte", vp };
            return;
        }
    }
}

static void describe_offset(const struct pool *p, uint64_t off, char *out, size_t size)
{
    uint64_t l = off / p->layer_bytes, r = off % p->layer_bytes;
    uint64_t kv = r / (p->layer_bytes / 2), b = (r % (p->layer_bytes / 2)) / p->block_bytes;

    snprintf(out, size, "layer %" PRIu64 " %s block %" PRIu64 " byte %" PRIu64 ", address %p",
             l, kv ? "V" : "K", b, r % p->block_bytes, (void *)pool_at(p, off));
}

/* Check the whole pool. 0: every byte as expected. */
static int verify_pool(const struct pool *p, struct verify *vf, uint64_t poison, uint32_t round)
{
    size_t scratch_len = 1u << 20;
    uint8_t *scratch = malloc(scratch_len);
    struct bad bad = { 0 };
    uint64_t cursor = 0, checked_src = 0;
    double t0 = now_s();

    if (scratch == NULL) {
        warn("out of memory");
        return -1;
    }
    vf->landed_failed = 0;
    for (size_t i = 0; i < vf->n && !bad.found; i++) {
        const struct vpiece *vp = &vf->v[i];

        check_stream(p, cursor, vp->dst - cursor, poison, cursor, "byte outside every span",
                     NULL, &bad, scratch, scratch_len);
        if (bad.found)
            break;
        switch (vp->kind) {
        case EXP_SOURCE:
            check_stream(p, vp->dst, vp->len, vp->src_key, vp->src, "transferred byte", vp,
                         &bad, scratch, scratch_len);
            checked_src += vp->len;
            break;
        case EXP_POISON:
            check_stream(p, vp->dst, vp->len, poison, vp->dst, "byte of a failed transfer",
                         vp, &bad, scratch, scratch_len);
            break;
        case EXP_EITHER:
            check_either(p, vp, poison, &bad, &vf->landed_failed);
            break;
        }
        cursor = vp->dst + vp->len;
    }
    if (!bad.found)
        check_stream(p, cursor, p->bytes - cursor, poison, cursor, "byte outside every span",
                     NULL, &bad, scratch, scratch_len);
    free(scratch);
    if (bad.found) {
        char where[256];

        describe_offset(p, bad.off, where, sizeof(where));
        say("round %u: MISMATCH at destination offset %" PRIu64 " (%s): %s is 0x%02x, want 0x%02x%s",
            round, bad.off, where, bad.what, bad.got, bad.want,
            bad.vp && bad.vp->kind == EXP_EITHER ? " (source) or the poison" : "");
        if (bad.vp != NULL)
            say("round %u: the byte belongs to round %u xfer %u: piece dst %" PRIu64 " src %" PRIu64
                " len %" PRIu64 ", source offset %" PRIu64, round, bad.vp->round, bad.vp->xfer,
                bad.vp->dst, bad.vp->src, bad.vp->len, bad.vp->src + (bad.off - bad.vp->dst));
        return -1;
    }
    say("round %u: verify PASS: %" PRIu64 " bytes of %zu pieces equal their source, "
        "%" PRIu64 " bytes of failed transfers landed, the other %" PRIu64 " bytes of the pool "
        "hold the poison (%.2f s)", round, checked_src, vf->n, vf->landed_failed,
        p->bytes - checked_src - vf->landed_failed, now_s() - t0);
    return 0;
}

/* Flip one byte the verification must notice: inside a landed piece if any. */
static void corrupt_one(struct pool *p, const struct verify *vf, uint32_t round)
{
    uint64_t off = p->bytes / 2 + 1;

    for (size_t i = 0; i < vf->n; i++) {
        if (vf->v[(i + vf->n / 2) % vf->n].kind == EXP_SOURCE) {
            const struct vpiece *vp = &vf->v[(i + vf->n / 2) % vf->n];

            off = vp->dst + vp->len / 2;
            break;
        }
    }
    *pool_at(p, off) ^= 0x40;
    say("round %u: corrupting destination offset %" PRIu64 " on purpose", round, off);
}

static int run_decode(const struct opts *o)
{
    struct pool pool = { 0 };
    struct verify vf = { 0 };
    b10_conn_t *conn = NULL;
    const void *desc;
    size_t desc_len;
    char path[4096];
    b10_status_t st;
    int rc = EXIT_SETUP;
    double t0;

    if (geom_check(&o->geom) != 0)
        return EXIT_SETUP;
    t0 = now_s();
    if (pool_alloc(&pool, &o->geom, poison_key(o->poison_seed)) != 0)
        return EXIT_SETUP;
    say("pool: %u layers x K/V x %u blocks x %" PRIu64 " bytes = %" PRIu64 " bytes, poisoned "
        "in %.2f s", o->geom.layers, o->geom.blocks, pool.block_bytes, pool.bytes, now_s() - t0);
    conn = conn_open(o);
    if (conn == NULL)
        goto out;
    if (pool_register(&pool, conn) != 0)
        goto out;
    st = b10_agent_desc(conn, &desc, &desc_len);
    if (st != B10_OK) {
        warn("b10_agent_desc: %s: %s: %s", b10_status_name(st), b10_status_str(st),
             b10_conn_detail(conn));
        goto out;
    }
    dir_path(path, sizeof(path), o->dir, "decode.desc", -1);
    if (desc_write(path, o->name, &pool, desc, desc_len) != 0)
        goto out;
    say("registered %u regions as %s, descriptor (%zu bytes) in %s", o->geom.layers, o->name,
        desc_len, path);

    rc = EXIT_PASS;
    for (uint32_t r = 0; r < o->rounds; r++) {
        struct plan_params pp;
        b10_status_t *status;
        char vpath[4096], line[128];

        dir_path(path, sizeof(path), o->dir, "done", (int)r);
        if (wait_file(path, o->wait_ms, o->orphan ? NULL : conn) != 0 ||
            done_read(path, &pp, &status) != 0) {
            rc = EXIT_SETUP;
            break;
        }
        if (pp.round != r) {
            warn("%s is for round %u", path, pp.round);
            free(status);
            rc = EXIT_SETUP;
            break;
        }
        if (verify_add_round(&vf, &pp, &o->geom, status, o->strict) != 0) {
            free(status);
            rc = EXIT_SETUP;
            break;
        }
        for (uint32_t x = 0; x < pp.xfers; x++)
            say("round %u: xfer %u ended %s", r, x, b10_status_name(status[x]));
        free(status);
        if (pool_sync(&pool) != 0) {
            rc = EXIT_SETUP;
            break;
        }
        if (o->corrupt_one && r + 1 == o->rounds)
            corrupt_one(&pool, &vf, r);
        int v = verify_pool(&pool, &vf, poison_key(o->poison_seed), r);
        snprintf(line, sizeof(line), "%s\n", v == 0 ? "pass" : "mismatch");
        dir_path(vpath, sizeof(vpath), o->dir, "verified", (int)r);
        write_file(vpath, line, strlen(line), NULL, 0);
        if (v != 0)
            rc = EXIT_FAIL;
    }
out:
    pool_free(&pool, conn);
    b10_conn_close(conn);
    free(vf.v);
    return rc;
}

/* ---------------------------------------------------------------- prefill */

struct xfer {
    size_t first, count;    /* pieces of the plan */
    uint64_t bytes;
    b10_xfer_t *h;
    bool submitted, done;
    double t_submit, t_submitted, t_done;   /* b10_xfer_submit called, returned; seen done */
};

static bool xfer_finish(struct xfer *x, struct outcome *out, b10_status_t st, uint32_t i)
{
    if (st == B10_IN_PROGRESS)
        return false;
    out->status = st;
    out->bytes = x->bytes;
    snprintf(out->detail, sizeof(out->detail), "%s", x->h ? b10_xfer_detail(x->h) : "");
    x->done = true;
    x->t_done = now_s();
    if (st != B10_OK)
        say("xfer %u (id %" PRIu64 ") ended %s: %s: %s", i, x->h ? b10_xfer_id(x->h) : 0,
            b10_status_name(st), b10_status_str(st), out->detail[0] ? out->detail : "(no detail)");
    b10_xfer_release(x->h);
    x->h = NULL;
    return true;
}

static int run_prefill(const struct opts *o)
{
    struct pool pool = { 0 };
    struct remote rem = { 0 };
    struct plan pl = { 0 };
    struct xfer *xs = NULL;
    struct outcome *outs = NULL;
    b10_span_t *local = NULL, *remote = NULL;
    b10_conn_t *conn = NULL;
    char path[4096];
    b10_status_t st;
    int rc = EXIT_SETUP;
    uint32_t nx = o->plan.xfers, ndone = 0, inflight = 0, next = 0;
    uint32_t conc = o->concurrent ? o->concurrent : nx;
    double t0, t_cancel = -1, t_limit;
    bool cancelled = false;

    dir_path(path, sizeof(path), o->dir, "decode.desc", -1);
    if (wait_file(path, o->wait_ms, NULL) != 0 || desc_read(path, &rem) != 0)
        goto out;
    if (geom_check(&rem.g) != 0)
        goto out;
    t0 = now_s();
    if (pool_alloc(&pool, &rem.g, src_key(o->plan.seed)) != 0)
        goto out;
    say("pool: %u layers x K/V x %u blocks x %" PRIu64 " bytes = %" PRIu64 " bytes, filled "
        "in %.2f s", rem.g.layers, rem.g.blocks, pool.block_bytes, pool.bytes, now_s() - t0);
    if (plan_build(&o->plan, &rem.g, &pl) != 0)
        goto out;
    conn = conn_open(o);
    if (conn == NULL)
        goto out;
    if (pool_register(&pool, conn) != 0)
        goto out;
    st = b10_agent_load(conn, rem.name, rem.desc, rem.desc_len);
    if (st != B10_OK) {
        warn("b10_agent_load(%s): %s: %s: %s", rem.name, b10_status_name(st), b10_status_str(st),
             b10_conn_detail(conn));
        goto out;
    }

    /* Spans: logical offsets to each side's addresses. */
    local = calloc(pl.n, sizeof(*local));
    remote = calloc(pl.n, sizeof(*remote));
    xs = calloc(nx, sizeof(*xs));
    outs = calloc(nx, sizeof(*outs));
    if (local == NULL || remote == NULL || xs == NULL || outs == NULL) {
        warn("out of memory");
        goto out;
    }
    uint64_t reg_end = 0;
    for (uint32_t l = 0; l < rem.g.layers; l++)
        if (rem.base[l] + pool.layer_bytes > reg_end)
            reg_end = rem.base[l] + pool.layer_bytes;
    for (size_t i = 0; i < pl.n; i++) {
        const struct piece *pc = &pl.v[i];

        local[i].addr = pool_addr(&pool, pc->src);
        local[i].length = pc->len;
        remote[i].length = pc->len;
        if (pc->oob) {
            /* Starts inside the highest registration and runs past its end. */
            remote[i].addr = reg_end - pc->len / 2;
            say("piece %zu: destination 0x%" PRIx64 "+%" PRIu64 " runs %" PRIu64 " bytes past "
                "the decode's registrations (xfer %u)", i, remote[i].addr, pc->len,
                pc->len - pc->len / 2, pc->xfer);
        } else {
            remote[i].addr = rem.base[pc->dst / pool.layer_bytes] + pc->dst % pool.layer_bytes;
        }
        if (xs[pc->xfer].count == 0)
            xs[pc->xfer].first = i;
        xs[pc->xfer].count++;
        xs[pc->xfer].bytes += pc->len;
    }

    if (o->hold) {
        char go[4096];

        dir_path(path, sizeof(path), o->dir, "ready", (int)o->plan.round);
        dir_path(go, sizeof(go), o->dir, "go", (int)o->plan.round);
        if (write_file(path, "ready\n", 6, NULL, 0) != 0 || wait_file(go, o->wait_ms, conn) != 0)
            goto out;
    }

    /* Submit, keeping at most conc in flight; wait; cancel if asked. */
    t0 = now_s();
    t_limit = t0 + o->wait_ms / 1000.0;
    if (o->cancel_after_ms >= 0)
        t_cancel = t0 + o->cancel_after_ms / 1000.0;
    while (ndone < nx) {
        while (next < nx && inflight < conc && !cancelled) {
            struct xfer *x = &xs[next];
            b10_xfer_params_t xp = {
                .field_mask = 0,
                .op = B10_OP_WRITE,
                .local = local + x->first,
                .remote = remote + x->first,
                .count = x->count,
                .remote_agent = rem.name,
            };

            if (o->deadline_ms) {
                xp.field_mask |= B10_XFER_FIELD_DEADLINE;
                xp.deadline_ms = o->deadline_ms;
            }
            x->t_submit = now_s();
            x->submitted = true;
            st = b10_xfer_submit(conn, &xp, &x->h);
            x->t_submitted = now_s();
            if (st != B10_OK) {
                /* Refused outright: that is this transfer's outcome. */
                outs[next] = (struct outcome){ .status = st, .bytes = x->bytes };
                snprintf(outs[next].detail, sizeof(outs[next].detail), "%s", b10_conn_detail(conn));
                x->h = NULL;
                x->done = true;
                x->t_done = now_s();
                say("xfer %u refused at submit: %s: %s: %s", next, b10_status_name(st),
                    b10_status_str(st), outs[next].detail[0] ? outs[next].detail : "(no detail)");
                ndone++;
            } else {
                if (o->verbose)
                    say("xfer %u submitted: id %" PRIu64 ", %zu spans, %" PRIu64 " bytes", next,
                        b10_xfer_id(x->h), x->count, x->bytes);
                inflight++;
            }
            next++;
        }
        if (ndone == nx)
            break;
        if (cancelled && inflight == 0) {
            /* Cancelled before submitting the rest: those never ran. */
            for (; next < nx; next++) {
                outs[next] = (struct outcome){ .status = B10_ERR_CANCELLED, .bytes = xs[next].bytes };
                snprintf(outs[next].detail, sizeof(outs[next].detail), "never submitted");
                xs[next].done = true;
                ndone++;
            }
            break;
        }

        double now = now_s();
        if (now > t_limit) {
            warn("gave up after %d ms with %u transfers in flight", o->wait_ms, inflight);
            for (uint32_t i = 0; i < nx; i++) {
                if (!xs[i].done) {
                    outs[i].status = B10_IN_PROGRESS;
                    snprintf(outs[i].detail, sizeof(outs[i].detail), "still in flight after %d ms",
                             o->wait_ms);
                    if (xs[i].h != NULL) {
                        b10_xfer_cancel(xs[i].h);
                        b10_xfer_release(xs[i].h);
                        xs[i].h = NULL;
                    }
                }
            }
            rc = EXIT_FAIL;
            goto report;
        }
        if (t_cancel >= 0 && now >= t_cancel && !cancelled) {
            cancelled = true;
            for (uint32_t i = 0; i < nx; i++) {
                if (xs[i].h != NULL && !xs[i].done) {
                    st = b10_xfer_cancel(xs[i].h);
                    say("xfer %u: cancel after %.0f ms: %s", i, (now - xs[i].t_submit) * 1000,
                        b10_status_name(st));
                }
            }
        }
        int slice = 100;
        if (t_cancel >= 0 && !cancelled) {
            int to_cancel = (int)((t_cancel - now) * 1000) + 1;
            if (to_cancel < slice)
                slice = to_cancel;
        }
        if (inflight == 1) {
            /* One in flight: block in b10_xfer_wait, as a simple caller would. */
            for (uint32_t i = 0; i < nx; i++) {
                if (xs[i].h != NULL && !xs[i].done) {
                    if (xfer_finish(&xs[i], &outs[i], b10_xfer_wait(xs[i].h, slice), i)) {
                        inflight--;
                        ndone++;
                    }
                    break;
                }
            }
        } else {
            /* Several: poll the connection's fd, progress, then ask each. */
            struct pollfd pfd = { .fd = b10_conn_fd(conn), .events = POLLIN };

            if (poll(&pfd, 1, slice) < 0 && errno != EINTR) {
                warn("poll: %s", strerror(errno));
                goto out;
            }
            st = b10_conn_progress(conn);
            if (st != B10_OK)
                say("b10_conn_progress: %s: %s", b10_status_name(st), b10_status_str(st));
            for (uint32_t i = 0; i < nx; i++) {
                if (xs[i].h != NULL && !xs[i].done &&
                    xfer_finish(&xs[i], &outs[i], b10_xfer_status(xs[i].h), i)) {
                    inflight--;
                    ndone++;
                }
            }
        }
    }

    rc = EXIT_PASS;
report:;
    /* Throughput: the bytes of the transfers that landed, first submit to last done. */
    uint64_t ok_bytes = 0;
    double t_end = t0;
    uint32_t nok = 0;
    for (uint32_t i = 0; i < nx; i++) {
        if (xs[i].done && xs[i].t_done > t_end)
            t_end = xs[i].t_done;
        if (outs[i].status == B10_OK) {
            ok_bytes += outs[i].bytes;
            nok++;
        }
    }
    double secs = t_end - t0, submit_s = 0;
    for (uint32_t i = 0; i < nx; i++)
        if (xs[i].submitted)
            submit_s += xs[i].t_submitted - xs[i].t_submit;
    say("round %u: %u of %u WRITEs landed: %" PRIu64 " bytes in %zu spans in %.3f s: %.2f GB/s "
        "(%.2f GiB/s); b10_xfer_submit took %.1f ms of it", o->plan.round, nok, nx, ok_bytes, pl.n,
        secs, secs > 0 ? ok_bytes / secs / 1e9 : 0.0, secs > 0 ? ok_bytes / secs / (1u << 30) : 0.0,
        submit_s * 1e3);

    for (uint32_t i = 0; i < nx; i++) {
        b10_status_t want = o->have_expect ? o->expect : B10_OK;

        if (outs[i].status != want) {
            say("xfer %u: FAIL: ended %s, expected %s", i, b10_status_name(outs[i].status),
                b10_status_name(want));
            rc = EXIT_FAIL;
        } else if (want != B10_OK && o->expect_detail && outs[i].detail[0] == '\0') {
            say("xfer %u: FAIL: ended %s as expected but without a detail", i,
                b10_status_name(outs[i].status));
            rc = EXIT_FAIL;
        }
    }
    if (rc == EXIT_PASS && o->have_expect)
        say("round %u: every transfer ended %s as expected", o->plan.round,
            b10_status_name(o->expect));
    dir_path(path, sizeof(path), o->dir, "done", (int)o->plan.round);
    if (done_write(path, &o->plan, outs) != 0 && rc == EXIT_PASS)
        rc = EXIT_SETUP;
out:
    if (xs != NULL)
        for (uint32_t i = 0; i < nx; i++)
            b10_xfer_release(xs[i].h);
    pool_free(&pool, conn);
    b10_conn_close(conn);
    free(xs);
    free(outs);
    free(local);
    free(remote);
    plan_free(&pl);
    remote_free(&rem);
    return rc;
}

int main(int argc, char **argv)
{
    struct opts o;

    signal(SIGPIPE, SIG_IGN);
    if (opts_parse(argc, argv, &o) != 0)
        return EXIT_SETUP;
    prog = o.role == ROLE_DECODE ? "b10-kvrank[decode]" : "b10-kvrank[prefill]";
    return o.role == ROLE_DECODE ? run_decode(&o) : run_prefill(&o);
}
