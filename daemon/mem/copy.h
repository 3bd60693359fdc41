/*
 * copy.h — gathers (regions → staging view) and scatters (view → regions),
 * off the loop thread.
 *
 * A job is a list of segments plus a reference on every region they touch,
 * so the regions stay mapped until the copy is over. DRAM jobs run on the
 * libuv thread pool; the completion callback runs on the loop thread.
 *
 * A direct job (local transfers) copies region to region with no view
 * between: host memory to host memory on the pool, or VRAM to VRAM of one
 * device as a device-to-device copy on the GPU. A job writes into regions
 * unless it is a gather.
 *
 * A job may make or check its chunk's checksum (copy_job_sum).
 *
 * A host segment of process memory is read or written through the rank's
 * /proc/<pid>/mem; a rank whose address space is gone fails its job with
 * B10_ERR_CLIENT_GONE, an address it unmapped with B10_ERR_IO.
 *
 * No job fills a hole of a rank's memfd (a page the file does not have,
 * which the daemon would allocate and pay for): one that meets a hole ends
 * B10_ERR_NOT_POPULATED (copy_job_hole says where). In a guarded region
 * (guard.h) the copy stops at the hole's page, the segments before it
 * copied; in one the guard could not take, the job looks for holes in all
 * its pages there first (hole.h) and then copies nothing.
 */
#ifndef B10D_COPY_H
#define B10D_COPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "b10d.h"
#include "mem.h"

struct copy_seg {
    void *dst;
    const void *src;
    size_t len;
    int device;                 /* the CUDA device of the region side; -1: host memory */
    /* Process memory (procmem.c): src or dst is an address in a rank, reached through this fd. */
    int src_fd, dst_fd;         /* -1: a pointer of the daemon's */
};

/*
 * A direct job's rows picked from two grids, all on one GPU: the GPU room
 * hands them to the grid kernel (gpu-copy.h), which finds each row from its
 * indices, so the job has no segments. Bases are the daemon's addresses.
 */
struct copy_grid {
    int device;
    uint64_t *src_bases, *dst_bases;    /* the job's own */
    uint32_t src_nbases, dst_nbases;
    uint32_t src_per_base, dst_per_base;
    uint64_t src_stride, dst_stride, length;
    const uint32_t *pairs;              /* count (source row, destination row): the
                                           caller's, kept until the job is done */
    uint32_t count;
};

/* The most rows and bases a grid job carries: one launch's table (gpu.c sizes its copiers). */
#define COPY_GRID_ROWS 131072u
#define COPY_GRID_BASES 1024u

/* Regions a job holds, one reference each (once per run of segments in one). */
struct region_refs {
    struct region **r;
    uint32_t n, cap;
};

struct copy_job;
typedef void copy_done_fn(struct copy_job *job, b10_status_t status);

/* A job's part in its chunk's checksum (checksum.h), over the bytes of its view. */
enum copy_sum {
    COPY_SUM_NONE,
    COPY_SUM_MAKE,              /* a gather: computed once every byte is in the view */
    COPY_SUM_CHECK,             /* a scatter: checked before a byte is written */
};

struct copy_job {
    uv_work_t work;
    struct list node;           /* b10d.copies_inline, once copied inline */
    struct b10d *d;
    bool gather;                /* regions → view; else view → regions */
    struct copy_seg *segs;
    uint32_t nsegs, cap;
    uint32_t host_segs;         /* segments with device -1 */
    struct region_refs refs;    /* the regions it reads (gather) or writes (else) */
    struct region_refs reads;   /* a direct job: the regions it reads */
    /* A direct job's last pair of regions, checked and referenced: most pieces repeat it. */
    const struct region *pair_from, *pair_to;
    uint64_t bytes;
    uint32_t parts;             /* parts (host, each GPU submission) still running */
    b10_status_t status;        /* the first failure of a part */
    b10_status_t host_status;   /* the host part's, set on the pool thread */
    copy_done_fn *done;
    void *arg;
    uint32_t index;             /* the caller's: e.g. the chunk */
    float gpu_ms;               /* the device parts' time on the GPU (CUDA events) */
    enum copy_sum sum_mode;
    const uint8_t *view;        /* the view bytes the job fills (gather) or empties */
    size_t view_len;
    uint64_t seed;
    uint64_t sum;               /* MAKE: the result; CHECK: what the sender computed */
    bool sum_done;              /* MAKE: computed; CHECK: passed */
    /* A device job's sum, by blocks: computed by a pool task, or on the GPU. */
    uint64_t *block_sums;
    uv_work_t sum_work;
    const uint8_t *table;       /* CHECK of several blocks: the sender's sums of them (trailer) */
    bool gpu_sum_asked;         /* a GPU operation sums the view, on its own */
    bool gpu_sums_ready;        /* block_sums holds the GPU's sums of the whole blocks */
    uint32_t gpu_gate_blocks;   /* CHECK: the whole blocks the GPU checks inside the scatter's
                                   submission, gating it (0: not so) */
    bool flat_out;              /* no wire sets its pace (a local transfer): the copy engines
                                   take it as fast as they can (gpu.c, --gpu-copy-calls) */
    struct copy_grid *grid;     /* a grid job's rows (copy_job_add_grid), else NULL */
    const void *hole;           /* ended B10_ERR_NOT_POPULATED: the daemon's address of the
                                   hole met (set by the part that met it) */
};

/*
 * A job of host memory only, of at most this many bytes, is copied on the
 * loop thread when it is submitted: a trip through the thread pool and back
 * costs more than the memcpy (tens of µs each way on a small host). Its
 * completion still comes later, from the loop, never inside the submission.
 */
#define COPY_INLINE_BYTES (512u << 10)

/* The loop's part of inline copies; copy_stop completes any still due. */
void copy_start(struct b10d *d);
void copy_stop(struct b10d *d);

struct copy_job *copy_job_new(struct b10d *d, bool gather, copy_done_fn *done, void *arg,
                              uint32_t index);
/* Room for nsegs segments in all, so that a job of known size grows its table once. */
b10_status_t copy_job_reserve(struct copy_job *job, uint32_t nsegs);
/* Add a segment; takes a reference on r (once per run of segments in r). */
b10_status_t copy_job_add(struct copy_job *job, struct region *r, void *dst, const void *src,
                          size_t len);
/*
 * Region to region (a direct job, gather false): B10_ERR_UNSUPPORTED when
 * the pair needs staging between (host and device memory, two devices, or
 * one device whose copies may not use its SMs: gpu_kernels).
 * References both regions.
 */
bool copy_direct_ok(const struct b10d *d, const struct region *from, const struct region *to);
b10_status_t copy_job_add_direct(struct copy_job *job, struct region *from, struct region *to,
                                 void *dst, const void *src, size_t len);
/*
 * Reference r for a job that copies otherwise than by segments (a grid
 * job): among the regions it writes (a copy past --settle-ms leaves those
 * stuck), or those it reads. Whether the copy may be direct is the
 * caller's to ask first (copy_direct_ok).
 */
b10_status_t copy_job_hold(struct copy_job *job, struct region *r, bool written);
/*
 * Make a direct job, with no segment, a grid job: grid (calloc'd, its bases
 * too) is the job's from here on, freed with it, even on failure. Every
 * region its rows lie in held first (copy_job_hold). B10_ERR_INVALID_ARG
 * for a job with segments, an empty grid, or one past COPY_GRID_ROWS or
 * COPY_GRID_BASES a side.
 */
b10_status_t copy_job_add_grid(struct copy_job *job, struct copy_grid *grid);
/*
 * Make (a gather) or check (a scatter) the checksum of the view's first len
 * bytes with seed; want is the sum to check, table the sender's block sums
 * (checksum_trailer_table; for a chunk of several blocks). A scatter whose
 * view fails its check writes nothing and ends B10_ERR_DATA_CORRUPT.
 * Host-only jobs do it in the same pool task as the copy, on the view the
 * copy just touched. With device parts the GPU sums the view's whole
 * blocks: after a gather's copy, in its submission when it is one; before
 * a scatter's, in its submission too, whose copy then writes nothing if a
 * block differs from the trailer's (else in a submission of their own
 * first); the host sums the last, shorter block.
 */
b10_status_t copy_job_sum(struct copy_job *job, enum copy_sum mode, const void *view, size_t len,
                          uint64_t seed, uint64_t want, const uint8_t *table);
/*
 * Run the job: host segments on the thread pool, device segments on the GPU.
 * done() runs on the loop thread once every part finished; then the job is freed.
 */
void copy_job_submit(struct copy_job *job);
/*
 * What the GPU room hands back of a job's parts (gpu.h): installed by
 * b10d_start through gpu_start, so gpu.c never calls this room.
 */
extern const struct gpu_hooks copy_gpu_hooks;
/*
 * Whether the job's view of len bytes (its segments added) is a device
 * chunk's that --verify-data auto sums: a GPU gathered it and it is too
 * large to sum inline. copy_sums_on_gpu: and a kernel sums it (gpu_kernels);
 * else the CPU does, on the thread pool.
 */
bool copy_sums_device(const struct copy_job *job, size_t len);
bool copy_sums_on_gpu(const struct copy_job *job, size_t len);
/*
 * A job that ended B10_ERR_NOT_POPULATED: the region of the hole it met,
 * the rank's address of it, and whether the job writes that region (else
 * it reads it). False when none of its regions holds the hole.
 */
bool copy_job_hole(const struct copy_job *job, const struct region **region_p, uint64_t *addr_p,
                   bool *written_p);
/* Free a job never submitted. */
void copy_job_free(struct copy_job *job);

#endif
