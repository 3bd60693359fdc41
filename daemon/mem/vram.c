/*
 * vram.c — the VRAM kind of memory: a rank's GPU memory, which the GPU room
 * (gpu.c) maps into the daemon's CUDA context from the cudaIpcMemHandle of
 * the allocation the region lies in, or from a VMM allocation's file
 * descriptor. Its copies are the GPU's: the copy engines, or the daemon's
 * kernels (gpu.h). It is no host memory: no uid's --max-host-bytes-per-uid
 * counts it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "gpu.h"
#include "mem.h"

/*
 * What a registration must name, checked once the daemon is known to have a
 * GPU: the device, and an allocation that holds the whole region (gpu.c
 * then holds the allocation to the driver's size of it).
 */
static b10_status_t vram_open(struct region *r, const struct mem_request *req, char *detail,
                              size_t detail_len)
{
    b10_status_t status = gpu_vram_usable(detail, detail_len);
    if (status != B10_OK)
        return status;
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
    return gpu_vram_map(req, &r->map, &r->device, &r->base, detail, detail_len);
}

static void vram_close(struct region *r)
{
    gpu_vram_unmap(r->map);
}

/* Every request of VRAM: process memory is DRAM's alone. */
static bool vram_serves(const struct mem_request *req)
{
    return true;
}

/* A VMM allocation's fd comes with the registration; a cudaIpcMemHandle is in it. */
static bool vram_takes_fd(const struct mem_request *req)
{
    return req->vmm_fd;
}

/* No populate: device memory is the driver's, resident once mapped. */
const struct mem_kind_ops vram_kind = {
    .name = "vram",
    .kind_name = "vram",
    .kind = B10_MEM_VRAM,
    .reach = MEM_REACH_DEVICE,
    .serves = vram_serves,
    .takes_fd = vram_takes_fd,
    .open = vram_open,
    .close = vram_close,
};
