/*
 * gpu-copy.cu — the gather/scatter kernels and the copier (see gpu-copy.h).
 *
 * The kernel reads a table of work items from device memory. An item is a piece,
 * or a slice of a big piece: submission cuts pieces longer than a chunk into
 * chunk-sized items, the chunk chosen so that there are a few items for every
 * warp of the launch. Each warp copies one item at a time, its items taken
 * grid-stride. So 10^5 pieces of 4 KiB and ten pieces of 100 MiB both spread
 * over every warp of the (capped) grid.
 *
 * Inside an item a warp moves 32 lanes × U vectors per step, all U loads issued
 * before the first store: mapped host memory is a PCIe round trip away (~1-2 µs),
 * and a scatter needs about 100 KB of reads in flight to fill the link, which
 * one load per thread at 32 CTAs barely reaches. Vectors are 16 bytes when
 * dst ≡ src (mod 16), else the widest width both sides share (8, 4, 2, 1);
 * the unaligned head and the tail are copied byte by byte by the first lanes.
 */
#include "gpu-copy.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY     /* XXH3_generateSecret_fromSeed: the library's secret */
#include <xxhash.h>

/* One work item. Pointers are generic addresses (UVA): mapped pinned host memory
 * is addressed by its host pointer. */
struct gpu_copy_item {
    uint64_t dev;
    uint64_t host;
    uint64_t len;
};

enum { UNROLL = 8 };

/*
 * Pieces of one cudaMemcpyBatchAsync call (GPU_COPY_BATCH_PIECES); a submission of
 * more makes several calls on its stream. Measured on the H200 without MPS: a model's
 * decode step beside scatters of 1024 pieces of 4 KiB a call kept its p50 but took
 * its p99 to 1.8-2.4 x alone (three runs); in calls of 128 pieces, 1.14 x, and the
 * scatters ran faster. A 4 MiB view of 32 KiB pieces is one call either way.
 */
static const size_t BATCH_CALL_PIECES = GPU_COPY_BATCH_PIECES;

enum slot_state { SLOT_FREE, SLOT_OWNED };

struct gpu_copy_op {
    struct gpu_copier    *copier;
    enum slot_state       state;
    struct gpu_copy_item *h_items;  /* pinned, mapped host table, cap_items entries */
    struct gpu_copy_item *d_items;  /* device copy of the table, for scatters */
    cudaEvent_t           ev_start;
    cudaEvent_t           ev_done;
    uint64_t             *h_sums;   /* pinned, mapped: the sum kernel's results */
    unsigned             *d_gate;   /* nonzero once a block's sum differed from `expect` */
    bool                  summed;   /* this submission asked for sums */
};

struct gpu_copier {
    int            device;
    unsigned       max_ctas;
    unsigned       threads;
    unsigned       max_inflight;
    size_t         max_pieces;
    size_t         ce_min_piece;
    size_t         max_sum_blocks;
    size_t         cap_items;     /* 2 × max_pieces + 64: room to split big pieces */
    bool           kernels;       /* gpu_copy_params_t.kernels */
    cudaStream_t   stream;
    struct gpu_copy_op *ops;      /* max_inflight slots */
    void         **b_dsts;        /* cudaMemcpyBatchAsync argument arrays, max_pieces */
    const void   **b_srcs;
    size_t        *b_sizes;
    char           err[256];
};

/* ---------------------------------------------------------------- kernels */

template <typename T> __device__ __forceinline__ T ld_cs(const T *p) { return __ldcs(p); }
template <typename T> __device__ __forceinline__ void st_cs(T *p, T v) { __stcs(p, v); }

/* One warp copies len bytes; T is the vector type, dst ≡ src (mod sizeof(T)). */
template <typename T, int U>
__device__ __forceinline__ void
warp_copy(char *dst, const char *src, size_t len, unsigned lane)
{
    const size_t W = sizeof(T);
    size_t head = (size_t)(0 - (uintptr_t)dst) & (W - 1);

    if (head > len)
        head = len;
    if (lane < head)
        dst[lane] = src[lane];
    dst += head;
    src += head;
    len -= head;

    const size_t nv = len / W;
    T *d = (T *)dst;
    const T *s = (const T *)src;
    const size_t step = 32 * U;
    size_t v = 0;

    for (; v + step <= nv; v += step) {
        T r[U];
#pragma unroll
        for (int k = 0; k < U; k++)
            r[k] = ld_cs(s + v + k * 32 + lane);
#pragma unroll
        for (int k = 0; k < U; k++)
            st_cs(d + v + k * 32 + lane, r[k]);
    }
    if (v < nv) {
        T r[U];
#pragma unroll
        for (int k = 0; k < U; k++) {
            size_t j = v + k * 32 + lane;
            if (j < nv)
                r[k] = ld_cs(s + j);
        }
#pragma unroll
        for (int k = 0; k < U; k++) {
            size_t j = v + k * 32 + lane;
            if (j < nv)
                st_cs(d + j, r[k]);
        }
    }

    const size_t done = nv * W;
    if (lane < len - done)
        dst[done + lane] = src[done + lane];
}

/* One warp copies len bytes, in the widest vectors dst and src share. */
__device__ __forceinline__ void
warp_copy_any(char *dst, const char *src, size_t len, unsigned lane)
{
    const uintptr_t mis = (uintptr_t)dst ^ (uintptr_t)src;

    if (!(mis & 15))
        warp_copy<uint4, UNROLL>(dst, src, len, lane);
    else if (!(mis & 7))
        warp_copy<uint2, UNROLL>(dst, src, len, lane);
    else if (!(mis & 3))
        warp_copy<unsigned int, UNROLL>(dst, src, len, lane);
    else if (!(mis & 1))
        warp_copy<unsigned short, UNROLL>(dst, src, len, lane);
    else
        warp_copy<unsigned char, UNROLL>(dst, src, len, lane);
}

template <int SCATTER>
__global__ void __launch_bounds__(512)
gpu_copy_kernel(const struct gpu_copy_item *__restrict__ items, size_t n,
                const unsigned *__restrict__ gate)
{
    /* 512 threads at most: with 8 × 16-byte vectors a lane in registers, a
     * 1024-thread bound would cap registers at 64 and spill. */
    const unsigned lane = threadIdx.x & 31;
    const size_t warp = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const size_t nwarps = ((size_t)gridDim.x * blockDim.x) >> 5;

    size_t i = warp;

    /* A checked scatter: the sum kernel before it found a block that differs. */
    if (i >= n || (gate != nullptr && *(volatile const unsigned *)gate != 0))
        return;
    struct gpu_copy_item it = items[i];
    for (;;) {
        /* The next descriptor is fetched before this item is copied: for a gather
         * the table is read over PCIe, a round trip worth hiding. */
        const size_t next = i + nwarps;
        const bool more = next < n;
        struct gpu_copy_item nit = { 0, 0, 0 };
        if (more)
            nit = items[next];

        warp_copy_any((char *)(SCATTER ? it.dev : it.host),
                      (const char *)(SCATTER ? it.host : it.dev), it.len, lane);
        if (!more)
            break;
        it = nit;
        i = next;
    }
}

/*
 * Rows picked from two grids (gpu_copy_grid_t). A work item is a slice of a
 * pick's row: rows long beside the picks are cut so that every warp of the
 * launch gets a few items, as pieces are. Each warp finds its item's two rows
 * from the pick's indices (a divide a side) and copies the slice.
 */
struct grid_shape {
    const uint2    *pairs;          /* (source row, destination row) a pick */
    const uint64_t *src_bases, *dst_bases;
    uint64_t        src_stride, dst_stride, length;
    uint64_t        slice;          /* bytes an item: the row's, or a multiple of 4 KiB */
    uint64_t        nitems;         /* picks × slices */
    uint32_t        src_per_base, dst_per_base, slices;
};

struct grid_item {
    const char *src;
    char       *dst;
    uint64_t    len;
};

/* Item i's two spans: its pick's indices, then each side's base, read from the table. */
__device__ __forceinline__ struct grid_item
grid_item_at(const struct grid_shape &g, uint64_t i)
{
    uint64_t pick = i, off = 0;
    if (g.slices > 1) {
        pick = i / g.slices;
        off = (i - pick * g.slices) * g.slice;
    }
    const uint2 p = g.pairs[pick];
    const uint32_t sb = p.x / g.src_per_base, db = p.y / g.dst_per_base;
    const uint64_t left = g.length - off;
    struct grid_item it;
    it.src = (const char *)(uintptr_t)(g.src_bases[sb] +
                                       (uint64_t)(p.x - sb * g.src_per_base) * g.src_stride + off);
    it.dst = (char *)(uintptr_t)(g.dst_bases[db] +
                                 (uint64_t)(p.y - db * g.dst_per_base) * g.dst_stride + off);
    it.len = left < g.slice ? left : g.slice;
    return it;
}

__global__ void __launch_bounds__(512)
gpu_grid_kernel(const struct grid_shape g)
{
    const unsigned lane = threadIdx.x & 31;
    const uint64_t nwarps = ((uint64_t)gridDim.x * blockDim.x) >> 5;
    uint64_t i = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;

    if (i >= g.nitems)
        return;
    struct grid_item it = grid_item_at(g, i);
    for (;;) {
        /* The next item's indices and bases are read before this one is copied: two
         * dependent reads a row, worth hiding behind its copy. */
        const uint64_t next = i + nwarps;
        const bool more = next < g.nitems;
        struct grid_item nit = { nullptr, nullptr, 0 };
        if (more)
            nit = grid_item_at(g, next);
        warp_copy_any(it.dst, it.src, it.len, lane);
        if (!more)
            break;
        it = nit;
        i = next;
    }
}

/* ---------------------------------------------------------------- checksums
 *
 * XXH3-64 with a seed, of inputs longer than 240 bytes, as the xxHash spec
 * defines it, for blocks of exactly GPU_COPY_SUM_BLOCK bytes: 8 accumulators
 * take a 64-byte stripe at a time, the secret's words sliding by one each
 * stripe; after 16 stripes (1 KiB) they are scrambled; the last stripe is
 * the block's last 64 bytes with the secret at byte 121; the accumulators
 * merge with the secret at byte 11 and are avalanched. The secret is the
 * library's default, derived for the seed: its even words plus the seed,
 * its odd words minus it.
 *
 * Accumulator i takes stripe word i's product and word i^1 itself, so the
 * pair (2j, 2j+1) needs exactly the stripe's 16 bytes at 16j: thread j of a
 * group of four loads them as one vector, and the four threads' vectors make
 * one 64-byte stripe. The merge's four terms are added, so a shuffle sums them.
 */
enum { SUM_THREADS = 64, SUM_GROUPS = SUM_THREADS / 4, SECRET_WORDS = 24,
       SUM_STRIPES = GPU_COPY_SUM_BLOCK / 64 };

#define XXH_P32_1 0x9E3779B1ull
#define XXH_P32_2 0x85EBCA77ull
#define XXH_P32_3 0xC2B2AE3Dull
#define XXH_P64_1 0x9E3779B185EBCA87ull
#define XXH_P64_2 0xC2B2AE3D27D4EB4Full
#define XXH_P64_3 0x165667B19E3779F9ull
#define XXH_P64_4 0x85EBCA77C2B2AE63ull
#define XXH_P64_5 0x27D4EB2F165667C5ull

__constant__ uint64_t xxh3_secret[SECRET_WORDS];    /* libxxhash's default, little-endian words */

__device__ __forceinline__ uint64_t sum_mul32(uint64_t x)
{
    return (uint64_t)(uint32_t)x * (x >> 32);
}

/* The secret's 8 bytes at any offset: the last stripe's and the merge's are not 8-aligned. */
__device__ __forceinline__ uint64_t sum_key(const uint64_t *sec, unsigned off)
{
    const unsigned w = off >> 3, sh = (off & 7) * 8;
    return sh ? (sec[w] >> sh) | (sec[w + 1] << (64 - sh)) : sec[w];
}

/* One stripe, accumulators 2j (a0) and 2j+1 (a1): data words d0, d1, their keys k0, k1. */
__device__ __forceinline__ void sum_stripe(uint64_t &a0, uint64_t &a1, uint4 v, uint64_t k0,
                                           uint64_t k1)
{
    const uint64_t d0 = (uint64_t)v.x | ((uint64_t)v.y << 32);
    const uint64_t d1 = (uint64_t)v.z | ((uint64_t)v.w << 32);
    a0 += d1 + sum_mul32(d0 ^ k0);
    a1 += d0 + sum_mul32(d1 ^ k1);
}

__device__ __forceinline__ uint64_t sum_scramble(uint64_t a, uint64_t key)
{
    a ^= a >> 47;
    a ^= key;
    return a * XXH_P32_1;
}

__global__ void __launch_bounds__(SUM_THREADS)
gpu_sum_kernel(const uint4 *__restrict__ bytes, size_t nblocks, uint64_t seed, uint64_t *sums,
               const uint64_t *__restrict__ expect, unsigned *gate)
{
    __shared__ uint64_t secrets[SUM_GROUPS][SECRET_WORDS];
    const unsigned g = threadIdx.x >> 2, j = threadIdx.x & 3;
    uint64_t *sec = secrets[g];
    const uint64_t init[8] = { XXH_P32_3, XXH_P64_1, XXH_P64_2, XXH_P64_3,
                               XXH_P64_4, XXH_P32_2, XXH_P64_5, XXH_P32_1 };

    /* The same trip count for every thread of the CTA: the warp syncs and shuffles need all. */
    for (size_t base = (size_t)blockIdx.x * SUM_GROUPS; base < nblocks;
         base += (size_t)gridDim.x * SUM_GROUPS) {
        const size_t b = base + g;
        const uint64_t s = seed + b;
        uint64_t m = 0;

        __syncwarp();       /* the group's last block no longer reads its secret */
        for (unsigned w = 6 * j; w < 6 * j + 6; w++)
            sec[w] = xxh3_secret[w] + ((w & 1) ? 0 - s : s);
        __syncwarp();
        if (b < nblocks) {
            const uint4 *p = bytes + b * (GPU_COPY_SUM_BLOCK / 16) + j;    /* stripe t: p[4t] */
            uint64_t a0 = init[2 * j], a1 = init[2 * j + 1];
            /* 1 KiB (16 stripes) at a time, the next one's loads issued before this one is
             * summed: the view is a PCIe round trip away, and a block's steps are sequential. */
            uint4 cur[16], nxt[16];
#pragma unroll
            for (unsigned t = 0; t < 16; t++)
                cur[t] = __ldcs(p + 4 * t);
            for (unsigned blk = 0; blk + 1 < SUM_STRIPES / 16; blk++) {
#pragma unroll
                for (unsigned t = 0; t < 16; t++)
                    nxt[t] = __ldcs(p + 4 * (16 * (blk + 1) + t));
#pragma unroll
                for (unsigned t = 0; t < 16; t++)
                    sum_stripe(a0, a1, cur[t], sec[t + 2 * j], sec[t + 2 * j + 1]);
                a0 = sum_scramble(a0, sec[16 + 2 * j]);
                a1 = sum_scramble(a1, sec[17 + 2 * j]);
#pragma unroll
                for (unsigned t = 0; t < 16; t++)
                    cur[t] = nxt[t];
            }
            /* The last 1 KiB: 15 stripes, no scramble, then the block's last stripe (its 16th)
             * with the secret at byte 121. */
#pragma unroll
            for (unsigned t = 0; t < 15; t++)
                sum_stripe(a0, a1, cur[t], sec[t + 2 * j], sec[t + 2 * j + 1]);
            sum_stripe(a0, a1, cur[15], sum_key(sec, 121 + 16 * j), sum_key(sec, 129 + 16 * j));
            const uint64_t x = a0 ^ sum_key(sec, 11 + 16 * j), y = a1 ^ sum_key(sec, 19 + 16 * j);
            m = (x * y) ^ __umul64hi(x, y);
        }
        m += __shfl_xor_sync(0xffffffffu, m, 1);
        m += __shfl_xor_sync(0xffffffffu, m, 2);
        if (b < nblocks && j == 0) {
            uint64_t h = (uint64_t)GPU_COPY_SUM_BLOCK * XXH_P64_1 + m;
            h ^= h >> 37;
            h *= 0x165667919E3779F9ull;
            h ^= h >> 32;
            sums[b] = h;
            if (expect != nullptr && h != expect[b])
                atomicOr(gate, 1u);
        }
    }
}

/* ---------------------------------------------------------------- errors */

const char *
gpu_copy_strstatus(int status)
{
    switch (status) {
#define GPU_COPY_X_STR(name, val, str) case (val): return str;
    GPU_COPY_STATUS_MAP(GPU_COPY_X_STR)
#undef GPU_COPY_X_STR
    }
    return "unknown gpu-copy status";
}

/* Records the CUDA error once, clears it if it is not sticky, and converts it. */
static int
copier_fail(struct gpu_copier *c, cudaError_t e, const char *what)
{
    if (c)
        snprintf(c->err, sizeof(c->err), "%s: %s (%s)", what, cudaGetErrorString(e),
                 cudaGetErrorName(e));
    (void)cudaGetLastError();
    if (e == cudaErrorMemoryAllocation)
        return GPU_COPY_E_NOMEM;
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInvalidDevice)
        return GPU_COPY_E_NODEV;
    return GPU_COPY_E_CUDA;
}

const char *
gpu_copy_last_error(const gpu_copier_t *c)
{
    return c ? c->err : "";
}

int
gpu_copy_device(const gpu_copier_t *c)
{
    return c ? c->device : -1;
}

/* ---------------------------------------------------------------- devices, staging */

int
gpu_copy_device_count(const char **why_p)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);

    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (why_p)
            *why_p = cudaGetErrorString(e);
        return 0;
    }
    if (n <= 0) {
        if (why_p)
            *why_p = "the CUDA runtime sees no device";
        return 0;
    }
    return n;
}

int
gpu_copy_device_host_pointers(int device)
{
    int v = 0;

    if (cudaDeviceGetAttribute(&v, cudaDevAttrCanUseHostPointerForRegisteredMem, device) !=
        cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return v != 0;
}

int
gpu_copy_device_mps(int device)
{
    int v = 0;

    if (cudaDeviceGetAttribute(&v, cudaDevAttrMpsEnabled, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return v != 0;
}

int
gpu_copy_host_alloc(size_t len, void **host_p)
{
    void *p = NULL;
    cudaError_t e;

    if (len == 0 || !host_p)
        return GPU_COPY_E_INVAL;
    e = cudaHostAlloc(&p, len, cudaHostAllocPortable | cudaHostAllocMapped);
    if (e != cudaSuccess)
        return copier_fail(NULL, e, "cudaHostAlloc");
    *host_p = p;
    return GPU_COPY_OK;
}

void
gpu_copy_host_free(void *host)
{
    if (host)
        (void)cudaFreeHost(host);
}

int
gpu_copy_host_register(int device, void *host, size_t len)
{
    cudaError_t e;

    if (!host || len == 0)
        return GPU_COPY_E_INVAL;
    if ((e = cudaSetDevice(device)) != cudaSuccess)
        return copier_fail(NULL, e, "cudaSetDevice");
    e = cudaHostRegister(host, len, cudaHostRegisterPortable | cudaHostRegisterMapped);
    if (e != cudaSuccess)
        return copier_fail(NULL, e, "cudaHostRegister");
    return GPU_COPY_OK;
}

void
gpu_copy_host_unregister(void *host)
{
    if (host)
        (void)cudaHostUnregister(host);
}

/* ---------------------------------------------------------------- copier */

void
gpu_copy_destroy(gpu_copier_t *c)
{
    if (!c)
        return;
    (void)cudaSetDevice(c->device);
    if (c->stream)
        (void)cudaStreamSynchronize(c->stream);
    if (c->ops) {
        for (unsigned i = 0; i < c->max_inflight; i++) {
            struct gpu_copy_op *op = &c->ops[i];
            if (op->ev_done)
                (void)cudaEventDestroy(op->ev_done);
            if (op->ev_start)
                (void)cudaEventDestroy(op->ev_start);
            if (op->d_items)
                (void)cudaFree(op->d_items);
            if (op->h_items)
                (void)cudaFreeHost(op->h_items);
            if (op->h_sums)
                (void)cudaFreeHost(op->h_sums);
            if (op->d_gate)
                (void)cudaFree(op->d_gate);
        }
        free(c->ops);
    }
    if (c->stream)
        (void)cudaStreamDestroy(c->stream);
    free(c->b_sizes);
    free(c->b_srcs);
    free(c->b_dsts);
    (void)cudaGetLastError();
    free(c);
}

/* A slot's tables for the kernels: descriptors (host and device), sums, the gate.
 * What fails is left NULL; gpu_copy_destroy frees the rest. */
static int
slot_tables_alloc(struct gpu_copier *c, struct gpu_copy_op *op)
{
    size_t bytes = c->cap_items * sizeof(struct gpu_copy_item);
    cudaError_t e;

    if ((e = cudaHostAlloc((void **)&op->h_items, bytes,
                           cudaHostAllocPortable | cudaHostAllocMapped)) != cudaSuccess) {
        op->h_items = NULL;
        return copier_fail(c, e, "cudaHostAlloc(descriptors)");
    }
    if ((e = cudaMalloc((void **)&op->d_items, bytes)) != cudaSuccess) {
        op->d_items = NULL;
        return copier_fail(c, e, "cudaMalloc(descriptors)");
    }
    if ((e = cudaHostAlloc((void **)&op->h_sums, c->max_sum_blocks * sizeof(uint64_t),
                           cudaHostAllocPortable | cudaHostAllocMapped)) != cudaSuccess) {
        op->h_sums = NULL;
        return copier_fail(c, e, "cudaHostAlloc(sums)");
    }
    if ((e = cudaMalloc((void **)&op->d_gate, sizeof(*op->d_gate))) != cudaSuccess) {
        op->d_gate = NULL;
        return copier_fail(c, e, "cudaMalloc(gate)");
    }
    return GPU_COPY_OK;
}

int
gpu_copy_create(const gpu_copy_params_t *p, gpu_copier_t **copier_p)
{
    struct gpu_copier *c;
    uint64_t m = p ? p->field_mask : 0;
    cudaError_t e;
    int rc;

    if (!copier_p)
        return GPU_COPY_E_INVAL;
    c = (struct gpu_copier *)calloc(1, sizeof(*c));
    if (!c)
        return GPU_COPY_E_NOMEM;
    c->device       = (m & GPU_COPY_PARAM_DEVICE) ? p->device : 0;
    c->max_ctas     = (m & GPU_COPY_PARAM_MAX_CTAS) ? p->max_ctas : 32;
    c->threads      = (m & GPU_COPY_PARAM_THREADS) ? p->threads : 512;
    c->max_pieces   = (m & GPU_COPY_PARAM_MAX_PIECES) ? p->max_pieces : 65536;
    c->max_inflight = (m & GPU_COPY_PARAM_MAX_INFLIGHT) ? p->max_inflight : 4;
    c->ce_min_piece = (m & GPU_COPY_PARAM_CE_MIN_PIECE) ? p->ce_min_piece : GPU_COPY_CE_MIN_PIECE;
    c->max_sum_blocks = (m & GPU_COPY_PARAM_MAX_SUM_BLOCKS) ? p->max_sum_blocks : 4096;
    c->kernels      = (m & GPU_COPY_PARAM_KERNELS) ? p->kernels != 0 : true;
    if (c->max_sum_blocks < 1 || c->max_sum_blocks > ((size_t)1 << 24) || c->device < 0 || c->max_ctas < 1 || c->max_ctas > 1024 || c->threads < 32 ||
        c->threads > 512 || c->threads % 32 || c->max_pieces < 1 ||
        c->max_pieces > ((size_t)1 << 26) || c->max_inflight < 1 || c->max_inflight > 64) {
        free(c);
        return GPU_COPY_E_INVAL;
    }
    c->cap_items = 2 * c->max_pieces + 64;

    if (gpu_copy_device_count(NULL) <= c->device) {
        rc = GPU_COPY_E_NODEV;
        goto fail;
    }
    if ((e = cudaSetDevice(c->device)) != cudaSuccess) {
        rc = copier_fail(c, e, "cudaSetDevice");
        goto fail;
    }
    if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        c->stream = NULL;
        rc = copier_fail(c, e, "cudaStreamCreateWithFlags");
        goto fail;
    }
    if (c->kernels) {
        /* The sum kernel's secret: the library's own, so that both compute one XXH3.
         * Writing it loads the module (CUDA loads modules lazily): only for kernels. */
        uint8_t secret[SECRET_WORDS * 8];
        XXH3_generateSecret_fromSeed(secret, 0);
        if ((e = cudaMemcpyToSymbol(xxh3_secret, secret, sizeof(secret))) != cudaSuccess) {
            rc = copier_fail(c, e, "cudaMemcpyToSymbol(secret)");
            goto fail;
        }
    }
    c->b_dsts  = (void **)calloc(c->max_pieces, sizeof(*c->b_dsts));
    c->b_srcs  = (const void **)calloc(c->max_pieces, sizeof(*c->b_srcs));
    c->b_sizes = (size_t *)calloc(c->max_pieces, sizeof(*c->b_sizes));
    c->ops     = (struct gpu_copy_op *)calloc(c->max_inflight, sizeof(*c->ops));
    if (!c->b_dsts || !c->b_srcs || !c->b_sizes || !c->ops) {
        rc = GPU_COPY_E_NOMEM;
        goto fail;
    }
    for (unsigned i = 0; i < c->max_inflight; i++) {
        struct gpu_copy_op *op = &c->ops[i];

        op->copier = c;
        op->state = SLOT_FREE;
        /* The copy engines need no table of ours. */
        if (c->kernels && (rc = slot_tables_alloc(c, op)) != GPU_COPY_OK)
            goto fail;
        if ((e = cudaEventCreate(&op->ev_start)) != cudaSuccess) {
            op->ev_start = NULL;
            rc = copier_fail(c, e, "cudaEventCreate");
            goto fail;
        }
        if ((e = cudaEventCreate(&op->ev_done)) != cudaSuccess) {
            op->ev_done = NULL;
            rc = copier_fail(c, e, "cudaEventCreate");
            goto fail;
        }
    }
    *copier_p = c;
    return GPU_COPY_OK;

fail:
    gpu_copy_destroy(c);
    return rc;
}

/* A free slot. */
static struct gpu_copy_op *
copier_take_slot(struct gpu_copier *c)
{
    for (unsigned i = 0; i < c->max_inflight; i++) {
        struct gpu_copy_op *op = &c->ops[i];
        /* Freed by gpu_copy_op_release, perhaps on another thread than this one. */
        if (__atomic_load_n(&op->state, __ATOMIC_ACQUIRE) == SLOT_FREE)
            return op;
    }
    return NULL;
}

/* Fills op->h_items from the pieces, cutting big ones so that every warp of the
 * launch gets a few items. Returns the item count. */
static size_t
copier_plan_items(const struct gpu_copier *c, struct gpu_copy_op *op, const gpu_copy_piece_t *pc,
                  size_t n, size_t total, size_t nonempty, size_t nwarps)
{
    size_t chunk = total / (4 * nwarps);
    size_t room = c->cap_items - nonempty;  /* > max_pieces */
    size_t min_for_room = total / room + 1;
    size_t k = 0;

    if (chunk < 32768)
        chunk = 32768;
    if (chunk < min_for_room)
        chunk = min_for_room;
    chunk = (chunk + 4095) & ~(size_t)4095;  /* keeps dev and host congruent mod 16 */

    for (size_t i = 0; i < n; i++) {
        uint64_t dev = (uint64_t)(uintptr_t)pc[i].dev;
        uint64_t host = (uint64_t)(uintptr_t)pc[i].host;
        size_t len = pc[i].len;

        for (size_t off = 0; off < len; off += chunk) {
            size_t l = len - off < chunk ? len - off : chunk;
            op->h_items[k].dev = dev + off;
            op->h_items[k].host = host + off;
            op->h_items[k].len = l;
            k++;
        }
    }
    return k;
}

/* A grid request's shape, before a slot is taken: GPU_COPY_OK, E_INVAL or E_TOOBIG. */
static int
grid_check(const struct gpu_copier *c, const gpu_copy_req_t *req)
{
    const gpu_copy_grid_t *g = req->grid;
    const gpu_copy_grid_side_t *sides[2] = { &g->src, &g->dst };

    if (req->npieces || req->sum || !c->kernels ||
        (req->engine != GPU_COPY_AUTO && req->engine != GPU_COPY_KERNEL) ||
        g->count == 0 || g->length == 0 || !g->pairs)
        return GPU_COPY_E_INVAL;
    for (int k = 0; k < 2; k++) {
        const gpu_copy_grid_side_t *sd = sides[k];
        if (!sd->bases || sd->nbases == 0 || sd->per_base == 0)
            return GPU_COPY_E_INVAL;
        /* A base's last row ends below 2^64. */
        uint64_t reach;
        if (__builtin_mul_overflow((uint64_t)(sd->per_base - 1), sd->stride, &reach) ||
            __builtin_add_overflow(reach, g->length, &reach))
            return GPU_COPY_E_INVAL;
        for (uint32_t b = 0; b < sd->nbases; b++)
            if (sd->bases[b] == 0 || sd->bases[b] + reach < sd->bases[b])
                return GPU_COPY_E_INVAL;
    }
    if (g->src.nbases + (size_t)g->dst.nbases > c->max_pieces ||
        g->count > 3 * c->max_pieces - g->src.nbases - g->dst.nbases)
        return GPU_COPY_E_TOOBIG;
    return GPU_COPY_OK;
}

/*
 * A grid request's table in op's descriptors: the pairs, each checked against
 * its grids, then both sides' bases; its kernel's shape in *g. false for an
 * index outside its grid.
 */
static bool
grid_plan(const struct gpu_copier *c, struct gpu_copy_op *op, const gpu_copy_grid_t *grid,
          struct grid_shape *g, size_t *bytes_p)
{
    uint32_t *pairs = (uint32_t *)op->h_items;
    const uint64_t src_rows = (uint64_t)grid->src.nbases * grid->src.per_base;
    const uint64_t dst_rows = (uint64_t)grid->dst.nbases * grid->dst.per_base;
    uint32_t top_src = 0, top_dst = 0;

    for (size_t i = 0; i < 2 * grid->count; i += 2) {
        uint32_t s = grid->pairs[i], d = grid->pairs[i + 1];
        top_src = s > top_src ? s : top_src;
        top_dst = d > top_dst ? d : top_dst;
        pairs[i] = s;
        pairs[i + 1] = d;
    }
    if (top_src >= src_rows || top_dst >= dst_rows)
        return false;
    uint64_t *src_bases = (uint64_t *)(pairs + 2 * grid->count);
    uint64_t *dst_bases = src_bases + grid->src.nbases;
    memcpy(src_bases, grid->src.bases, grid->src.nbases * sizeof(uint64_t));
    memcpy(dst_bases, grid->dst.bases, grid->dst.nbases * sizeof(uint64_t));
    *bytes_p = (size_t)((char *)(dst_bases + grid->dst.nbases) - (char *)op->h_items);

    /* Long rows beside the picks are cut in slices, a few for every warp of the launch. */
    const uint64_t nwarps = (uint64_t)c->max_ctas * (c->threads / 32);
    uint64_t slice = grid->length;
    if (grid->count < 4 * nwarps && grid->length > 32768) {
        uint64_t want = (4 * nwarps + grid->count - 1) / grid->count;
        slice = (grid->length + want - 1) / want;
        if (slice < 32768)
            slice = 32768;
        slice = (slice + 4095) & ~(uint64_t)4095;   /* keeps the sides congruent mod 16 */
    }
    *g = (struct grid_shape){};
    g->src_stride = grid->src.stride;
    g->dst_stride = grid->dst.stride;
    g->length = grid->length;
    g->slice = slice;
    g->slices = (uint32_t)(1 + (grid->length - 1) / slice);
    g->nitems = (uint64_t)grid->count * g->slices;
    g->src_per_base = grid->src.per_base;
    g->dst_per_base = grid->dst.per_base;
    return true;
}

/* The sum kernel on the copier's stream, into op's table; with `expect`, the gate cleared first. */
static cudaError_t
launch_sums(struct gpu_copier *c, struct gpu_copy_op *op, const gpu_copy_sum_t *sum,
            const char **what)
{
    cudaError_t e = cudaSuccess;
    if (sum->expect) {
        *what = "cudaMemsetAsync(gate)";
        e = cudaMemsetAsync(op->d_gate, 0, sizeof(*op->d_gate), c->stream);
    }
    if (e != cudaSuccess || sum->nblocks == 0)
        return e;
    size_t grid = (sum->nblocks + SUM_GROUPS - 1) / SUM_GROUPS;
    if (grid > c->max_ctas)
        grid = c->max_ctas;
    *what = "checksum kernel launch";
    gpu_sum_kernel<<<(unsigned)grid, SUM_THREADS, 0, c->stream>>>(
        (const uint4 *)sum->bytes, sum->nblocks, sum->seed, op->h_sums,
        (const uint64_t *)sum->expect, op->d_gate);
    return cudaGetLastError();
}

/*
 * A submission's end, whatever it enqueued before (e: how that went): its
 * done event and callback, or, on a failure, the slot given back once the
 * stream ran what got enqueued.
 */
static int
submit_end(struct gpu_copier *c, struct gpu_copy_op *op, const gpu_copy_req_t *req, cudaError_t e,
           const char *what, gpu_copy_op_t **op_p)
{
    if (e == cudaSuccess) {
        what = "cudaEventRecord";
        e = cudaEventRecord(op->ev_done, c->stream);
    }
    if (e == cudaSuccess && req->done_cb) {
        what = "cudaLaunchHostFunc";
        e = cudaLaunchHostFunc(c->stream, req->done_cb, req->done_arg);
    }
    if (e != cudaSuccess) {
        int rc = copier_fail(c, e, what);
        /* Whatever got enqueued may still run, and a caller told of a failure takes it
         * that nothing of the submission can still write: wait for the stream (a rare
         * path; its other submissions end too, their callbacks on the driver's thread).
         * A context whose error is sticky runs nothing more. */
        (void)cudaStreamSynchronize(c->stream);
        (void)cudaGetLastError();
        *op_p = NULL;
        __atomic_store_n(&op->state, SLOT_FREE, __ATOMIC_RELEASE);
        return rc;
    }
    return GPU_COPY_OK;
}

/* gpu_copy_submit of rows picked from two grids: one upload of the table, one launch. */
static int
submit_grid(struct gpu_copier *c, const gpu_copy_req_t *req, gpu_copy_op_t **op_p)
{
    struct grid_shape g;
    size_t bytes;
    cudaError_t e;
    int rc = grid_check(c, req);

    if (rc != GPU_COPY_OK)
        return rc;
    struct gpu_copy_op *op = copier_take_slot(c);
    if (!op)
        return GPU_COPY_E_BUSY;
    if ((e = cudaSetDevice(c->device)) != cudaSuccess)
        return copier_fail(c, e, "cudaSetDevice");
    /* The slot is free (nothing reads its table) until it is marked taken. */
    if (!grid_plan(c, op, req->grid, &g, &bytes))
        return GPU_COPY_E_INVAL;
    __atomic_store_n(&op->state, SLOT_OWNED, __ATOMIC_RELAXED);
    *op_p = op;
    op->summed = false;
    if ((e = cudaEventRecord(op->ev_start, c->stream)) != cudaSuccess)
        return submit_end(c, op, req, e, "cudaEventRecord", op_p);
    const char *what = "cudaMemcpyAsync(grid table)";
    e = cudaMemcpyAsync(op->d_items, op->h_items, bytes, cudaMemcpyHostToDevice, c->stream);
    if (e == cudaSuccess) {
        const size_t per_cta = c->threads / 32;
        uint64_t grid = (g.nitems + per_cta - 1) / per_cta;
        if (grid > c->max_ctas)
            grid = c->max_ctas;
        g.pairs = (const uint2 *)op->d_items;
        g.src_bases = (const uint64_t *)((const char *)op->d_items + 8 * req->grid->count);
        g.dst_bases = g.src_bases + req->grid->src.nbases;
        what = "grid copy kernel launch";
        gpu_grid_kernel<<<(unsigned)grid, c->threads, 0, c->stream>>>(g);
        e = cudaGetLastError();
    }
    return submit_end(c, op, req, e, what, op_p);
}

int
gpu_copy_submit(gpu_copier_t *c, const gpu_copy_req_t *req, gpu_copy_op_t **op_p)
{
    struct gpu_copy_op *op;
    gpu_copy_engine_t engine;
    size_t total = 0, nonempty = 0, minlen = SIZE_MAX, nitems = 0, per_cta = 1;
    cudaError_t e = cudaSuccess;
    const char *what = "";
    int scatter;
    bool gated;

    if (!op_p)
        return GPU_COPY_E_INVAL;
    *op_p = NULL;
    if (!c || !req || (req->npieces && !req->pieces))
        return GPU_COPY_E_INVAL;
    if (req->grid)
        return submit_grid(c, req, op_p);
    if (req->dir != GPU_COPY_GATHER && req->dir != GPU_COPY_SCATTER)
        return GPU_COPY_E_INVAL;
    if (req->npieces > c->max_pieces)
        return GPU_COPY_E_TOOBIG;
    for (size_t i = 0; i < req->npieces; i++) {
        const gpu_copy_piece_t *pc = &req->pieces[i];
        if (pc->len == 0)
            continue;
        if (!pc->dev || !pc->host || total + pc->len < total)
            return GPU_COPY_E_INVAL;
        total += pc->len;
        nonempty++;
        if (pc->len < minlen)
            minlen = pc->len;
    }
    if (req->sum && (!req->sum->bytes || ((uintptr_t)req->sum->bytes & 15) ||
                     req->sum->nblocks > c->max_sum_blocks))
        return GPU_COPY_E_INVAL;
    gated = req->sum && req->sum->expect;
    if (gated && (req->dir != GPU_COPY_SCATTER || ((uintptr_t)req->sum->expect & 7) ||
                  req->sum->nblocks == 0 ||
                  (req->engine != GPU_COPY_AUTO && req->engine != GPU_COPY_KERNEL)))
        return GPU_COPY_E_INVAL;
    if (!c->kernels && (req->sum || (req->engine != GPU_COPY_MEMCPY && req->engine != GPU_COPY_BATCH)))
        return GPU_COPY_E_INVAL;
    engine = req->engine;
    if (engine == GPU_COPY_AUTO)    /* only the kernel reads the gate */
        engine = nonempty && minlen >= c->ce_min_piece && !gated ? GPU_COPY_BATCH : GPU_COPY_KERNEL;
    if (engine != GPU_COPY_KERNEL && engine != GPU_COPY_MEMCPY && engine != GPU_COPY_BATCH)
        return GPU_COPY_E_INVAL;

    op = copier_take_slot(c);
    if (!op)
        return GPU_COPY_E_BUSY;
    if ((e = cudaSetDevice(c->device)) != cudaSuccess)
        return copier_fail(c, e, "cudaSetDevice");
    /* Taken, and the caller's before anything is enqueued: the done callback may run
     * (on another thread) before this call returns, and its owner reads *op_p. */
    __atomic_store_n(&op->state, SLOT_OWNED, __ATOMIC_RELAXED);
    *op_p = op;
    scatter = req->dir == GPU_COPY_SCATTER;
    /* The kernel's table is planned before the start event, so that the elapsed
     * time is the GPU's; a pipelined caller overlaps planning with earlier copies. */
    if (engine == GPU_COPY_KERNEL && nonempty) {
        per_cta = c->threads / 32;
        nitems = copier_plan_items(c, op, req->pieces, req->npieces, total, nonempty,
                                   (size_t)c->max_ctas * per_cta);
    }
    if ((e = cudaEventRecord(op->ev_start, c->stream)) != cudaSuccess)
        return submit_end(c, op, req, e, "cudaEventRecord", op_p);
    /* From here on work may be enqueued: a failure waits for the stream before it returns. */

    /* A scatter's view is summed before it is copied; with `expect`, the gate stops the copy. */
    if (scatter && req->sum)
        e = launch_sums(c, op, req->sum, &what);

    if (e != cudaSuccess || nonempty == 0) {
        /* nothing to copy: the events alone make the completion */
    } else if (engine == GPU_COPY_KERNEL) {
        size_t grid = (nitems + per_cta - 1) / per_cta;

        if (grid > c->max_ctas)
            grid = c->max_ctas;
        /* A gather reads its table straight from mapped host memory: the read
         * completions travel host → GPU, the direction a gather leaves idle, and no
         * upload precedes the kernel. A scatter needs that direction for its data,
         * so its table is uploaded first (the same bytes, packed densely). */
        if (scatter) {
            what = "cudaMemcpyAsync(descriptors)";
            e = cudaMemcpyAsync(op->d_items, op->h_items, nitems * sizeof(struct gpu_copy_item),
                                cudaMemcpyHostToDevice, c->stream);
        }
        if (e == cudaSuccess) {
            what = "gather/scatter kernel launch";
            if (scatter)
                gpu_copy_kernel<1><<<(unsigned)grid, c->threads, 0, c->stream>>>(
                    op->d_items, nitems, gated ? op->d_gate : nullptr);
            else
                gpu_copy_kernel<0><<<(unsigned)grid, c->threads, 0, c->stream>>>(
                    op->h_items, nitems, nullptr);
            e = cudaGetLastError();
        }
    } else if (engine == GPU_COPY_MEMCPY) {
        what = "cudaMemcpyAsync";
        for (size_t i = 0; i < req->npieces && e == cudaSuccess; i++) {
            const gpu_copy_piece_t *pc = &req->pieces[i];
            if (pc->len)
                e = cudaMemcpyAsync(scatter ? pc->dev : pc->host, scatter ? pc->host : pc->dev,
                                    pc->len, cudaMemcpyDefault, c->stream);
        }
    } else {
        struct cudaMemcpyAttributes attr;
        size_t attr_idx = 0, k = 0;

        memset(&attr, 0, sizeof(attr));
        attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
        /* The driver may run a batch of small copies as a kernel of its own; this asks it
         * for the copy engines, which leave a co-resident model its time slices. */
        attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
        for (size_t i = 0; i < req->npieces; i++) {
            const gpu_copy_piece_t *pc = &req->pieces[i];
            if (!pc->len)
                continue;
            c->b_dsts[k] = scatter ? pc->dev : pc->host;
            c->b_srcs[k] = scatter ? pc->host : pc->dev;
            c->b_sizes[k] = pc->len;
            k++;
        }
        what = "cudaMemcpyBatchAsync";
        for (size_t o = 0; o < k && e == cudaSuccess; o += BATCH_CALL_PIECES)
            e = cudaMemcpyBatchAsync(c->b_dsts + o, c->b_srcs + o, c->b_sizes + o,
                                     k - o < BATCH_CALL_PIECES ? k - o : BATCH_CALL_PIECES,
                                     &attr, &attr_idx, 1, c->stream);
    }

    op->summed = req->sum != NULL;
    /* After the copy on the same stream: a gather's view is whole by then. */
    if (e == cudaSuccess && !scatter && req->sum)
        e = launch_sums(c, op, req->sum, &what);
    return submit_end(c, op, req, e, what, op_p);
}

int
gpu_copy_op_poll(gpu_copy_op_t *op)
{
    cudaError_t e;

    if (!op || op->state != SLOT_OWNED)
        return GPU_COPY_E_INVAL;
    e = cudaEventQuery(op->ev_done);
    if (e == cudaSuccess)
        return GPU_COPY_OK;
    if (e == cudaErrorNotReady)
        return GPU_COPY_PENDING;
    return copier_fail(op->copier, e, "cudaEventQuery");
}

int
gpu_copy_op_wait(gpu_copy_op_t *op)
{
    cudaError_t e;

    if (!op || op->state != SLOT_OWNED)
        return GPU_COPY_E_INVAL;
    e = cudaEventSynchronize(op->ev_done);
    if (e != cudaSuccess)
        return copier_fail(op->copier, e, "cudaEventSynchronize");
    return GPU_COPY_OK;
}

int
gpu_copy_op_elapsed_ms(gpu_copy_op_t *op, float *ms_p)
{
    float ms = 0;
    cudaError_t e;

    if (!op || op->state != SLOT_OWNED || !ms_p)
        return GPU_COPY_E_INVAL;
    e = cudaEventElapsedTime(&ms, op->ev_start, op->ev_done);
    if (e == cudaErrorNotReady)
        return GPU_COPY_PENDING;
    if (e != cudaSuccess)
        return copier_fail(op->copier, e, "cudaEventElapsedTime");
    *ms_p = ms;
    return GPU_COPY_OK;
}

const uint64_t *
gpu_copy_op_sums(gpu_copy_op_t *op)
{
    if (!op || op->state != SLOT_OWNED || !op->summed)
        return NULL;
    return op->h_sums;
}

void
gpu_copy_op_release(gpu_copy_op_t *op)
{
    if (!op || op->state != SLOT_OWNED)
        return;
    if (cudaEventSynchronize(op->ev_done) != cudaSuccess)
        (void)cudaGetLastError();
    __atomic_store_n(&op->state, SLOT_FREE, __ATOMIC_RELEASE);
}

/* ---------------------------------------------------------------- client memory */

struct gpu_copy_mapping {
    struct gpu_copy_mapping *next;     /* in mappings, while an IPC mapping is open */
    int                      device;
    bool                     vmm;
    unsigned char            handle[GPU_COPY_IPC_HANDLE_BYTES];
    unsigned                 refs;     /* IPC: registrations sharing it */
    void                    *base;
    size_t                   size;     /* IPC: the allocation's; VMM: the reserved and mapped range */
    CUmemGenericAllocationHandle vmm_handle;
};

/* Open IPC mappings, shared by handle: the daemon's regions may come from one allocation. */
static struct gpu_copy_mapping *mappings;
static pthread_mutex_t mappings_lock = PTHREAD_MUTEX_INITIALIZER;

static int
map_fail(cudaError_t e, const char *what, char *err, size_t errlen)
{
    if (err)
        snprintf(err, errlen, "%s: %s", what, cudaGetErrorString(e));
    (void)cudaGetLastError();
    return e == cudaErrorMemoryAllocation ? GPU_COPY_E_NOMEM : GPU_COPY_E_CUDA;
}

int
gpu_copy_device_by_pci(const char *bus_id, int *device_p, char *err, size_t errlen)
{
    int dev = -1;
    cudaError_t e = cudaDeviceGetByPCIBusId(&dev, bus_id);

    if (e != cudaSuccess)
        return map_fail(e, "no device at that PCI bus id", err, errlen);
    *device_p = dev;
    return GPU_COPY_OK;
}

/* The range of the allocation holding ptr, as the driver knows it. */
static int
alloc_range(void *ptr, size_t *size_p, char *err, size_t errlen)
{
    static PFN_cuMemGetAddressRange_v3020 get_range;
    enum cudaDriverEntryPointQueryResult q;
    CUdeviceptr base = 0;
    size_t size = 0;

    if (get_range == NULL &&
        (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", (void **)&get_range, 12000,
                                          cudaEnableDefault, &q) != cudaSuccess ||
         q != cudaDriverEntryPointSuccess || get_range == NULL)) {
        get_range = NULL;
        snprintf(err, errlen, "the driver lacks cuMemGetAddressRange");
        return GPU_COPY_E_NODEV;
    }
    CUresult r = get_range(&base, &size, (CUdeviceptr)(uintptr_t)ptr);
    if (r != CUDA_SUCCESS || base != (CUdeviceptr)(uintptr_t)ptr) {
        snprintf(err, errlen, "cuMemGetAddressRange of the mapping: CUDA driver error %d", (int)r);
        return GPU_COPY_E_CUDA;
    }
    *size_p = size;
    return GPU_COPY_OK;
}

int
gpu_copy_map_ipc(int device, const void *handle, gpu_copy_mapping_t **map_p, void **base_p,
                 size_t *size_p, char *err, size_t errlen)
{
    struct gpu_copy_mapping *m;
    int rc = GPU_COPY_OK;

    pthread_mutex_lock(&mappings_lock);
    for (m = mappings; m; m = m->next)
        if (m->device == device && memcmp(m->handle, handle, sizeof(m->handle)) == 0)
            break;
    if (m) {
        m->refs++;
        goto out;
    }
    cudaIpcMemHandle_t h;
    cudaError_t e;
    m = (struct gpu_copy_mapping *)calloc(1, sizeof(*m));
    if (!m) {
        rc = GPU_COPY_E_NOMEM;
        goto out;
    }
    memcpy(&h, handle, sizeof(h));
    e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaIpcOpenMemHandle(&m->base, h, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
        free(m);
        m = NULL;
        rc = map_fail(e, "cudaIpcOpenMemHandle", err, errlen);
        goto out;
    }
    if ((rc = alloc_range(m->base, &m->size, err, errlen)) != GPU_COPY_OK) {
        (void)cudaIpcCloseMemHandle(m->base);
        free(m);
        m = NULL;
        goto out;
    }
    m->device = device;
    memcpy(m->handle, handle, sizeof(m->handle));
    m->refs = 1;
    m->next = mappings;
    mappings = m;
out:
    pthread_mutex_unlock(&mappings_lock);
    if (rc == GPU_COPY_OK) {
        *map_p = m;
        *base_p = m->base;
        *size_p = m->size;
    }
    return rc;
}

/* The driver's VMM calls, through the runtime: no link against libcuda. */
struct vmm_api {
    PFN_cuMemImportFromShareableHandle_v10020 import;
    PFN_cuMemAddressReserve_v10020 reserve;
    PFN_cuMemMap_v10020 map;
    PFN_cuMemSetAccess_v10020 set_access;
    PFN_cuMemUnmap_v10020 unmap;
    PFN_cuMemAddressFree_v10020 address_free;
    PFN_cuMemRelease_v10020 release;
    PFN_cuMemGetAllocationPropertiesFromHandle_v10020 properties;
    PFN_cuMemGetAllocationGranularity_v10020 granularity;
};

static int
vmm_api_get(struct vmm_api *api, char *err, size_t errlen)
{
    static const struct {
        const char *name;
        size_t offset;
    } syms[] = {
        { "cuMemImportFromShareableHandle", offsetof(struct vmm_api, import) },
        { "cuMemAddressReserve", offsetof(struct vmm_api, reserve) },
        { "cuMemMap", offsetof(struct vmm_api, map) },
        { "cuMemSetAccess", offsetof(struct vmm_api, set_access) },
        { "cuMemUnmap", offsetof(struct vmm_api, unmap) },
        { "cuMemAddressFree", offsetof(struct vmm_api, address_free) },
        { "cuMemRelease", offsetof(struct vmm_api, release) },
        { "cuMemGetAllocationPropertiesFromHandle", offsetof(struct vmm_api, properties) },
        { "cuMemGetAllocationGranularity", offsetof(struct vmm_api, granularity) },
    };
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        enum cudaDriverEntryPointQueryResult q;
        void **slot = (void **)((char *)api + syms[i].offset);
        cudaError_t e = cudaGetDriverEntryPointByVersion(syms[i].name, slot, 12000,
                                                         cudaEnableDefault, &q);
        if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || *slot == NULL) {
            snprintf(err, errlen, "the driver lacks %s", syms[i].name);
            return GPU_COPY_E_NODEV;
        }
    }
    return GPU_COPY_OK;
}

/*
 * How many bytes an imported VMM allocation holds, when mapping size of it
 * failed: the driver has no call that says, but maps no more than that (the
 * mapped length is a multiple of the allocation's granularity), so the
 * largest length it maps into the reservation at ptr is found by bisection.
 * Only a refused registration pays for it.
 */
static size_t
vmm_true_size(const struct vmm_api *api, CUmemGenericAllocationHandle h, CUdeviceptr ptr, size_t size)
{
    CUmemAllocationProp prop;
    size_t g = 0;

    memset(&prop, 0, sizeof(prop));
    if (api->properties(&prop, h) != CUDA_SUCCESS ||
        api->granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || g == 0)
        return 0;
    size_t lo = 0, hi = size / g + 1;   /* in granules: lo maps (or is 0), hi does not */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (api->map(ptr, mid * g, 0, h, 0) == CUDA_SUCCESS) {
            api->unmap(ptr, mid * g);
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return lo * g;
}

int
gpu_copy_map_fd(int device, int fd, size_t size, gpu_copy_mapping_t **map_p, void **base_p,
                size_t *size_p, char *err, size_t errlen)
{
    struct vmm_api api;
    CUdeviceptr ptr = 0;
    CUresult r;
    CUmemAccessDesc access;
    cudaError_t e;
    struct gpu_copy_mapping *m;
    const char *what;
    int rc;

    if (fd < 0 || size == 0)
        return GPU_COPY_E_INVAL;
    if ((rc = vmm_api_get(&api, err, errlen)) != GPU_COPY_OK)
        return rc;
    e = cudaSetDevice(device);
    if (e != cudaSuccess)
        return map_fail(e, "cudaSetDevice", err, errlen);
    (void)cudaFree(0);   /* make sure the primary context exists for the driver calls */

    m = (struct gpu_copy_mapping *)calloc(1, sizeof(*m));
    if (!m)
        return GPU_COPY_E_NOMEM;
    what = "cuMemImportFromShareableHandle";
    r = api.import(&m->vmm_handle, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (r != CUDA_SUCCESS)
        goto err_free;
    what = "cuMemAddressReserve";
    if ((r = api.reserve(&ptr, size, 0, 0, 0)) != CUDA_SUCCESS)
        goto err_release;
    what = "cuMemMap";
    if ((r = api.map(ptr, size, 0, m->vmm_handle, 0)) != CUDA_SUCCESS) {
        /* The driver says INVALID_VALUE or NOT_SUPPORTED for a length past the allocation. */
        size_t holds = vmm_true_size(&api, m->vmm_handle, ptr, size);
        if (holds > 0 && holds < size) {
            api.address_free(ptr, size);
            api.release(m->vmm_handle);
            free(m);
            *size_p = holds;
            snprintf(err, errlen, "the allocation holds %zu bytes, not the %zu claimed", holds, size);
            return GPU_COPY_E_RANGE;
        }
        goto err_reserve;
    }
    memset(&access, 0, sizeof(access));
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    what = "cuMemSetAccess";
    if ((r = api.set_access(ptr, size, &access, 1)) != CUDA_SUCCESS)
        goto err_unmap;
    m->device = device;
    m->vmm = true;
    m->base = (void *)(uintptr_t)ptr;
    m->size = size;
    *map_p = m;
    *base_p = m->base;
    *size_p = size;
    return GPU_COPY_OK;

err_unmap:
    api.unmap(ptr, size);
err_reserve:
    api.address_free(ptr, size);
err_release:
    api.release(m->vmm_handle);
err_free:
    free(m);
    snprintf(err, errlen, "%s failed: CUDA driver error %d", what, (int)r);
    return GPU_COPY_E_CUDA;
}

void
gpu_copy_unmap(gpu_copy_mapping_t *m)
{
    if (!m)
        return;
    if (m->vmm) {
        struct vmm_api api;
        char err[128];
        if (vmm_api_get(&api, err, sizeof(err)) == GPU_COPY_OK) {
            (void)cudaSetDevice(m->device);
            api.unmap((CUdeviceptr)(uintptr_t)m->base, m->size);
            api.address_free((CUdeviceptr)(uintptr_t)m->base, m->size);
            api.release(m->vmm_handle);
        }
        free(m);
        return;
    }
    pthread_mutex_lock(&mappings_lock);
    if (--m->refs == 0) {
        struct gpu_copy_mapping **pp = &mappings;
        while (*pp && *pp != m)
            pp = &(*pp)->next;
        if (*pp)
            *pp = m->next;
        (void)cudaSetDevice(m->device);
        (void)cudaIpcCloseMemHandle(m->base);
        free(m);
    }
    pthread_mutex_unlock(&mappings_lock);
}
