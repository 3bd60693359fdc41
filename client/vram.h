/*
 * vram.h — libb10's view of CUDA memory: how to export a VRAM region so that
 * the daemon can open it. Inside libb10 only; the CUDA driver is loaded at
 * run time (dlopen), so libb10 builds and runs where there is no CUDA at all.
 */
#ifndef B10_CLIENT_VRAM_H
#define B10_CLIENT_VRAM_H

#include <stddef.h>
#include <stdint.h>

#include <b10/b10.h>

#define VRAM_IPC_HANDLE_BYTES 64

struct vram_export {
    char pci_bus_id[32];
    uint64_t alloc_base;        /* the allocation holding the region */
    uint64_t alloc_length;
    uint8_t ipc_handle[VRAM_IPC_HANDLE_BYTES];
    int has_ipc_handle;
    int fd;                     /* a VMM allocation's export, owned by the caller; else -1 */
};

/*
 * Describe the allocation holding addr for the daemon: its base and size,
 * its device's PCI bus id, and either a cudaIpcMemHandle of the base or (VMM
 * allocations) a POSIX file descriptor. *piece_p gets how much of [addr,
 * addr + length) lies inside it. On failure detail says why.
 */
b10_status_t vram_export(const void *addr, size_t length, struct vram_export *out,
                         size_t *piece_p, char *detail, size_t detail_len);

#endif
