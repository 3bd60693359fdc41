/*
 * gpu-copy.h — gather/scatter between GPU memory and mapped pinned host staging.
 *
 * The one room of b10d that talks to the CUDA runtime is cuda/gpu-copy.cu; this
 * header is its whole surface. It needs no CUDA header, so plain C files (the
 * daemon, its unit tests) include it freely; they link gpu-copy.o and CUDA_LIBS.
 *
 * Object graph:
 *
 *   gpu_copier   one per (device, user): a non-blocking stream, and
 *     └── slots  max_inflight of them; each holds a descriptor table (pinned host
 *                copy and device copy) and two events. A submission takes one free
 *                slot and is handed out as a gpu_copy_op; the slot comes back with
 *                gpu_copy_op_release().
 *
 * A piece is one contiguous run of bytes: `dev` (device memory of the copier's
 * device, or anything the device can address: a cudaIpc mapping, VMM) and `host`
 * (staging from gpu_copy_host_alloc() or gpu_copy_host_register(): pinned and
 * mapped, so the kernel reads or writes host memory directly over PCIe).
 * GATHER copies dev → host, SCATTER host → dev. Any length and any alignment is
 * correct; 16-byte vector copies are used where dev ≡ host (mod 16), so a planner
 * that places each piece in staging at an offset congruent to its device address
 * modulo 16 gets the fast path for every piece.
 *
 * Threads: one thread submits to a copier (the daemon's feed thread of its
 * device); one other may poll, time, read and release the operations it was
 * given (the loop), once it knows them submitted: from *op_p, which is set
 * before anything is enqueued, or from their done callback. The last error's
 * text is either thread's. The done callback runs on a CUDA driver thread: it
 * must not call CUDA, nor this API; it hands the completion to the loop
 * (uv_async_send) and returns.
 */
#ifndef B10_GPU_COPY_H
#define B10_GPU_COPY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Statuses, grouped by what the caller must do. Negative values are errors. */
#define GPU_COPY_STATUS_MAP(X)                                                        \
    X(GPU_COPY_OK,        0, "ok")                                                    \
    X(GPU_COPY_PENDING,   1, "copy still in flight")                                  \
    X(GPU_COPY_E_NODEV,  -1, "no usable CUDA device")                                 \
    X(GPU_COPY_E_INVAL,  -2, "invalid argument")                                      \
    X(GPU_COPY_E_NOMEM,  -3, "out of host or device memory")                          \
    X(GPU_COPY_E_BUSY,   -4, "every in-flight slot of the copier is taken: retry later")\
    X(GPU_COPY_E_TOOBIG, -5, "more pieces than the copier was created for")           \
    X(GPU_COPY_E_CUDA,   -6, "CUDA runtime error (see gpu_copy_last_error)")        \
    X(GPU_COPY_E_RANGE,  -7, "the allocation is smaller than claimed")

typedef enum gpu_copy_status {
#define GPU_COPY_X_ENUM(name, val, str) name = (val),
    GPU_COPY_STATUS_MAP(GPU_COPY_X_ENUM)
#undef GPU_COPY_X_ENUM
} gpu_copy_status_t;

const char *gpu_copy_strstatus(int status);

typedef enum gpu_copy_dir {
    GPU_COPY_GATHER  = 0,   /* device spans → host staging */
    GPU_COPY_SCATTER = 1,   /* host staging → device spans */
} gpu_copy_dir_t;

typedef enum gpu_copy_engine {
    GPU_COPY_AUTO    = 0,   /* BATCH when every piece is ≥ the copier's ce_min_piece,
                               else KERNEL */
    GPU_COPY_KERNEL  = 1,   /* our gather/scatter kernel, at most max_ctas CTAs */
    GPU_COPY_MEMCPY  = 2,   /* one cudaMemcpyAsync per piece (copy engines, no SMs) */
    GPU_COPY_BATCH   = 3,   /* cudaMemcpyBatchAsync over all pieces, asking the driver
                               to leave the SMs to compute (copy engines) */
} gpu_copy_engine_t;

typedef struct gpu_copy_piece {
    void   *dev;            /* device-addressable span */
    void   *host;           /* mapped pinned host span */
    size_t  len;            /* bytes; 0 is a no-op */
} gpu_copy_piece_t;

/* Creation parameters. Zero a struct, set field_mask for the fields you set;
 * the others take the defaults named here. */
enum {
    GPU_COPY_PARAM_DEVICE       = 1u << 0,
    GPU_COPY_PARAM_MAX_CTAS     = 1u << 1,
    GPU_COPY_PARAM_THREADS      = 1u << 2,
    GPU_COPY_PARAM_MAX_PIECES   = 1u << 3,
    GPU_COPY_PARAM_MAX_INFLIGHT = 1u << 4,
    GPU_COPY_PARAM_CE_MIN_PIECE = 1u << 5,
    GPU_COPY_PARAM_MAX_SUM_BLOCKS = 1u << 6,
    GPU_COPY_PARAM_KERNELS      = 1u << 7,
};

typedef struct gpu_copy_params {
    uint64_t field_mask;
    int      device;        /* CUDA ordinal; default 0 */
    unsigned max_ctas;      /* CTA cap of one kernel launch, so a transfer leaves the
                               GPU to the model; default 32, at most 1024 */
    unsigned threads;       /* threads a CTA, multiple of 32, 32..512; default 512 */
    size_t   max_pieces;    /* most pieces one submission may carry; default 65536 */
    unsigned max_inflight;  /* submissions in flight at once (slots); default 4 */
    size_t   ce_min_piece;  /* GPU_COPY_AUTO uses the copy engines when every piece
                               is at least this long; default GPU_COPY_CE_MIN_PIECE */
    size_t   max_sum_blocks; /* most checksum blocks one submission may sum (each slot
                               keeps a table of their sums); default 4096 */
    int      kernels;       /* 0: the copy engines alone. No kernel is loaded and no
                               descriptor table or gate is allocated (tens of MiB of
                               device and pinned memory); KERNEL, AUTO and sums are
                               refused with GPU_COPY_E_INVAL. Default 1 */
} gpu_copy_params_t;

/* Measured on the H200 (cuda/BENCH.md): from 1 MiB pieces up cudaMemcpyBatchAsync
 * matches the kernel (within 2%, and beats it by 3-5% beyond 2 MiB) while leaving
 * the SMs to the model; below, it loses (by 10-25× at 4 KiB). */
#define GPU_COPY_CE_MIN_PIECE (1u << 20)

/* Pieces one cudaMemcpyBatchAsync call carries; a submission of more makes several.
 * A caller that shares the GPU with a model submits no more at a time (b10d's gpu.c). */
#define GPU_COPY_BATCH_PIECES 128u

typedef struct gpu_copier gpu_copier_t;
typedef struct gpu_copy_op gpu_copy_op_t;

typedef void gpu_copy_done_cb_t(void *arg);

/*
 * Checksums on the GPU: XXH3-64 (the xxHash spec, seeded) of whole blocks of
 * GPU_COPY_SUM_BLOCK bytes, block i with seed + i: the blocks of
 * daemon/base/checksum.h, whose last, shorter block (if any) the caller sums
 * itself. A kernel on the copier's stream sums them: after a gather's copy,
 * so that the sums are of the view it just wrote; before a scatter's, and
 * when the request gives the sums the blocks must have (`expect`), a block
 * whose sum differs stops the copy: the scatter kernel writes nothing. Four
 * threads follow each block, two of XXH3's eight accumulators each: the
 * algorithm is sequential inside a block, so the blocks give the parallelism.
 * The sums land in the operation's table (gpu_copy_op_sums). XXH3's secret is
 * libxxhash's own, and tests/gpu/test-gpu-copy.c holds the sums to the
 * library's.
 */
#define GPU_COPY_SUM_BLOCK 16384u

typedef struct gpu_copy_sum {
    const void *bytes;      /* device-addressable (mapped staging or device memory),
                               16-byte aligned */
    size_t      nblocks;    /* whole blocks from bytes; at most max_sum_blocks */
    uint64_t    seed;       /* block i is summed with seed + i */
    const void *expect;     /* optional, scatters only (nblocks > 0): nblocks little-endian u64 sums
                               (device-addressable, 8-aligned) the blocks must have, or
                               nothing is copied; the copy is then the kernel's (AUTO
                               or KERNEL) */
} gpu_copy_sum_t;

/*
 * Rows picked from two grids, device to device: row src_rows[i] of the source
 * grid is copied to row dst_rows[i] of the destination grid, length bytes each,
 * by a kernel that finds each row itself from the indices: no piece table is
 * planned on the CPU. A KV pool is such a grid (a base per layer's K or V, a
 * row per block), and the engines post a transfer as two index arrays into it.
 *
 * A grid's row k lies at bases[k / per_base] + (k % per_base) * stride; the
 * bases are addresses the copier's device can read (source) or write
 * (destination). Every index is checked against its grid at submission
 * (GPU_COPY_E_INVAL: nothing is enqueued). What rows overlap is the caller's
 * to refuse: two picks of overlapping destination rows race.
 */
typedef struct gpu_copy_grid_side {
    const uint64_t *bases;  /* nbases addresses; read during the call only */
    uint32_t        nbases;
    uint32_t        per_base;   /* rows a base, at least 1 */
    uint64_t        stride;     /* bytes from a row to the next of its base */
} gpu_copy_grid_side_t;

typedef struct gpu_copy_grid {
    gpu_copy_grid_side_t src, dst;
    uint64_t        length;     /* bytes a row, at least 1 */
    const uint32_t *pairs;      /* count (source row, destination row) pairs, 2 u32 each;
                                   read during the call only */
    size_t          count;      /* at least 1; count + both nbases at most 3 × max_pieces,
                                   both nbases at most max_pieces (else GPU_COPY_E_TOOBIG) */
} gpu_copy_grid_t;

typedef struct gpu_copy_req {
    gpu_copy_dir_t          dir;
    gpu_copy_engine_t       engine;
    const gpu_copy_piece_t *pieces; /* read during the call only */
    size_t                  npieces;
    gpu_copy_done_cb_t     *done_cb; /* optional: runs once on a CUDA thread when
                                        the copy has completed (cudaLaunchHostFunc) */
    void                   *done_arg;
    const gpu_copy_sum_t   *sum;     /* optional: sums to compute, after a gather's copy and
                                        before a scatter's; read during the call only */
    const gpu_copy_grid_t  *grid;    /* optional: rows of two grids instead of pieces (none),
                                        by the kernel (AUTO or KERNEL), no sum, dir ignored */
} gpu_copy_req_t;

/* Number of CUDA devices; 0 when there is no GPU or the runtime fails (no
 * driver, error 35 "insufficient driver"...). When 0 and why_p is not NULL,
 * *why_p is a static string saying why. Never aborts. */
int gpu_copy_device_count(const char **why_p);
/* 1 when contexts made on device are shared through MPS (cudaDevAttrMpsEnabled): a
 * kernel of this process then runs beside other clients' instead of taking their time
 * slice. 0 when not, or when the driver cannot say. */
int gpu_copy_device_mps(int device);
/* 1 when device's kernels may use the host pointer of registered memory as is
 * (cudaDevAttrCanUseHostPointerForRegisteredMem); 0 when not, or when unknown. */
int gpu_copy_device_host_pointers(int device);

int  gpu_copy_create(const gpu_copy_params_t *params, gpu_copier_t **copier_p);
/* Waits for everything in flight, then frees. Accepts NULL. */
void gpu_copy_destroy(gpu_copier_t *copier);

/* Enqueues the copy on the copier's stream and returns at once. The pieces may
 * be reused on return; the spans they name must stay valid until completion. A
 * failure returns only once nothing it enqueued can still run (it waits for the
 * stream), so the caller may report it as final. *op_p is the operation before
 * anything is enqueued (the done callback may run before the call returns), and
 * NULL again on failure. */
int gpu_copy_submit(gpu_copier_t *copier, const gpu_copy_req_t *req, gpu_copy_op_t **op_p);

/* GPU_COPY_OK when done, GPU_COPY_PENDING while in flight, < 0 when it failed. */
int gpu_copy_op_poll(gpu_copy_op_t *op);
/* Blocks until done. Not for the loop thread. */
int gpu_copy_op_wait(gpu_copy_op_t *op);
/* GPU time from submission start to completion, for statistics; op must be done. */
int gpu_copy_op_elapsed_ms(gpu_copy_op_t *op, float *ms_p);
/* The block sums a request's `sum` asked for (nblocks of them); op must be done. The
 * table is the slot's: read it before gpu_copy_op_release. NULL when none was asked. */
const uint64_t *gpu_copy_op_sums(gpu_copy_op_t *op);
/* Gives the slot back. Waits if still in flight (call it after completion). */
void gpu_copy_op_release(gpu_copy_op_t *op);

/* Text of the last CUDA error this copier saw (empty when none). */
const char *gpu_copy_last_error(const gpu_copier_t *copier);
int         gpu_copy_device(const gpu_copier_t *copier);

/* Staging: pinned, mapped into every device's address space (portable|mapped). */
int  gpu_copy_host_alloc(size_t len, void **host_p);
void gpu_copy_host_free(void *host);                 /* accepts NULL */
/* Pins and maps memory the caller allocated (page-aligned, e.g. mmap), from device's
 * context: a thread with no current device would make (and keep) device 0's. */
int  gpu_copy_host_register(int device, void *host, size_t len);
void gpu_copy_host_unregister(void *host);           /* accepts NULL */

/*
 * Client memory, imported into this process. A mapping is opened once, at
 * registration (opening an IPC handle costs ~130 ms), and closed only when
 * nothing can copy through it any more. On failure err gets the reason.
 */
typedef struct gpu_copy_mapping gpu_copy_mapping_t;

#define GPU_COPY_IPC_HANDLE_BYTES 64

/* The CUDA ordinal of the device at a PCI bus id ("0000:06:00.0"). */
int gpu_copy_device_by_pci(const char *bus_id, int *device_p, char *err, size_t errlen);
/*
 * Open a cudaIpcMemHandle (of an allocation's base) on device. Opening the
 * same handle again shares the first mapping: CUDA maps an allocation once
 * per process. *size_p: the allocation's size as the driver has it
 * (cuMemGetAddressRange of the mapping), whatever the client claimed.
 */
int gpu_copy_map_ipc(int device, const void *handle, gpu_copy_mapping_t **map_p, void **base_p,
                     size_t *size_p, char *err, size_t errlen);
/*
 * Import a VMM allocation (cuMemCreate, exported as a POSIX file descriptor)
 * of size bytes and map it read-write for device. The fd stays the caller's.
 * GPU_COPY_E_RANGE when the allocation holds fewer than size bytes (the
 * driver maps no more than it holds): *size_p then says how many it holds.
 */
int gpu_copy_map_fd(int device, int fd, size_t size, gpu_copy_mapping_t **map_p, void **base_p,
                    size_t *size_p, char *err, size_t errlen);
/* Close a mapping from either call. Accepts NULL. */
void gpu_copy_unmap(gpu_copy_mapping_t *map);

#ifdef __cplusplus
}
#endif

#endif /* B10_GPU_COPY_H */
