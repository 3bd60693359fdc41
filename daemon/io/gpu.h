/*
 * gpu.h — the daemon's GPU room: VRAM mappings and the copies that touch them.
 *
 * It stands between the daemon and cuda/gpu-copy.h (the CUDA code). Built
 * without CUDA, or run without a GPU, every call says so: VRAM registrations
 * fail with B10_ERR_UNSUPPORTED and a reason, staging stays plain locked
 * pages (with a GPU too, until a view's first copy with one: gpu_host_register),
 * and nothing else changes.
 *
 * Threads: the loop cuts copy jobs into parts and hands each to its device's
 * feed thread, which submits it to CUDA (the driver's time a piece is the
 * biggest CPU cost of a copy). Copies complete on a CUDA driver thread, which
 * only queues the completion and wakes the loop (uv_async); the loop thread
 * does the rest.
 */
#ifndef B10D_GPU_H
#define B10D_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "b10d.h"
#include "mem.h"

struct copy_job;

/*
 * How the GPU room hands a copy job's parts back to the copy room above it,
 * which installs these (copy_gpu_hooks): the room that runs CUDA never calls
 * into the one that plans the copies.
 */
struct gpu_hooks {
    /* The blocks of job's view a gather's kernel sums after its copy (0: none). */
    uint32_t (*sum_blocks)(struct copy_job *job);
    /* A part's n block sums, read back from the GPU: their check's status. */
    b10_status_t (*sums)(struct copy_job *job, const uint64_t *sums, uint32_t n);
    /* One part of job ended with status (each part that job->parts counted). */
    void (*part_done)(struct copy_job *job, b10_status_t status);
};

/*
 * Find the devices; a daemon without any goes on without the GPU room.
 * B10_ERR_UNSUPPORTED: --gpu-copy kernel on a device that cannot run it
 * (logged); B10_ERR_NO_MEMORY.
 */
b10_status_t gpu_start(struct b10d *d, const struct gpu_hooks *hooks);
/*
 * Wait (bounded) for copies in flight, then free everything: true. false:
 * copies still ran or a feed thread stayed in the driver past the bounds (a
 * wedged GPU), and the streams, threads and their state were left as they
 * are; a copy may still write.
 */
bool gpu_stop(struct b10d *d);
/*
 * Wait until every part handed to a feed thread is with CUDA: submitted, or
 * refused and queued back to the loop (which hears of it at its next turn).
 */
void gpu_drain(struct b10d *d);
bool gpu_present(const struct b10d *d);
/*
 * Whether the daemon's own kernels may run on its GPUs (--gpu-copy): they copy
 * small pieces faster than the copy engines and sum chunks, but without MPS a
 * kernel of this process takes the whole GPU's time slice from a co-resident
 * model while it runs. False: every copy goes to the copy engines and every
 * chunk's sum to the CPU.
 */
bool gpu_kernels(const struct b10d *d);

/*
 * The VRAM kind's mapping (mem/vram.c decides what a registration of it
 * must carry). gpu_vram_usable: B10_OK where this daemon has a CUDA device;
 * else B10_ERR_UNSUPPORTED and why. gpu_vram_map: open the allocation
 * req->addr lies in on the device at req->pci_bus_id, through its
 * cudaIpcMemHandle or else its VMM allocation's fd, refused where the
 * driver's allocation holds less than req->alloc_length: B10_OK, the mapping
 * (for gpu_vram_unmap), its device and the device pointer of req->addr; or
 * the refusal and why. Any thread.
 */
b10_status_t gpu_vram_usable(char *detail, size_t detail_len);
b10_status_t gpu_vram_map(const struct mem_request *req, void **map_p, int *device_p,
                          uint8_t **base_p, char *detail, size_t detail_len);
void gpu_vram_unmap(void *map);

/*
 * Pin and map host memory the daemon allocated (cudaHostRegister), so that
 * the copy engines and kernels of every device read and write it directly: a
 * staging view, at its first copy with device, whose context registers it. Done then, not at start, because
 * it makes a CUDA context, and a context on a GPU where no rank registered
 * memory is memory the model on it never gets back. B10_ERR_UNSUPPORTED
 * without that GPU; B10_ERR_NO_MEMORY when CUDA refuses (logged with its reason).
 */
b10_status_t gpu_host_register(struct b10d *d, int device, void *addr, size_t length);
void gpu_host_unregister(struct b10d *d, void *addr);

/*
 * Run the device part of a copy job: its segments that touch VRAM, grouped
 * by device. Calls d->gpu_hooks->part_done(job, status) once for each part.
 */
void gpu_copy_job(struct b10d *d, struct copy_job *job);

/*
 * Sum the first nblocks whole checksum blocks of the job's view on the GPU
 * of its first device segment, as a part of its own: d->gpu_hooks->sums,
 * then ->part_done, once. (A gather whose copy is one part gets its
 * sums in that part's submission instead: gpu_copy_job asks.)
 */
void gpu_sum_job(struct b10d *d, struct copy_job *job, uint32_t nblocks);
/* Whether gpu_copy_job makes the job one submission: every segment on one device, no host one. */
bool gpu_one_submission(const struct b10d *d, const struct copy_job *job);

#endif
