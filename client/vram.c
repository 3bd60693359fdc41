/* vram.c — see vram.h. */
#include "vram.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* The few driver API types and values used here; the driver ABI keeps them stable. */
typedef int curesult_t;
typedef unsigned long long cudeviceptr_t;
typedef unsigned long long cuhandle_t;
typedef struct {
    char reserved[VRAM_IPC_HANDLE_BYTES];
} cuipc_handle_t;

#define CU_SUCCESS                               0
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL      9
#define CU_POINTER_ATTRIBUTE_IS_LEGACY_IPC_CAPABLE 10
#define CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR 1

static struct {
    curesult_t (*init)(unsigned flags);
    curesult_t (*pointer_get_attribute)(void *data, int attr, cudeviceptr_t ptr);
    curesult_t (*mem_get_address_range)(cudeviceptr_t *base, size_t *size, cudeviceptr_t ptr);
    curesult_t (*device_get)(int *dev, int ordinal);
    curesult_t (*device_get_pci_bus_id)(char *bus, int len, int dev);
    curesult_t (*primary_ctx_retain)(void **ctx, int dev);
    curesult_t (*primary_ctx_release)(int dev);
    curesult_t (*ctx_push)(void *ctx);
    curesult_t (*ctx_pop)(void **ctx);
    curesult_t (*ipc_get_mem_handle)(cuipc_handle_t *handle, cudeviceptr_t ptr);
    curesult_t (*retain_allocation_handle)(cuhandle_t *handle, void *addr);
    curesult_t (*export_to_shareable_handle)(void *shareable, cuhandle_t handle, int type,
                                             unsigned long long flags);
    curesult_t (*release)(cuhandle_t handle);
    const char *why;            /* set when the driver could not be loaded */
} cu;

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

static void cu_load(void)
{
    static const struct {
        const char *name;
        void **slot;
    } syms[] = {
        { "cuInit", (void **)&cu.init },
        { "cuPointerGetAttribute", (void **)&cu.pointer_get_attribute },
        { "cuMemGetAddressRange_v2", (void **)&cu.mem_get_address_range },
        { "cuDeviceGet", (void **)&cu.device_get },
        { "cuDeviceGetPCIBusId", (void **)&cu.device_get_pci_bus_id },
        { "cuDevicePrimaryCtxRetain", (void **)&cu.primary_ctx_retain },
        { "cuDevicePrimaryCtxRelease_v2", (void **)&cu.primary_ctx_release },
        { "cuCtxPushCurrent_v2", (void **)&cu.ctx_push },
        { "cuCtxPopCurrent_v2", (void **)&cu.ctx_pop },
        { "cuIpcGetMemHandle", (void **)&cu.ipc_get_mem_handle },
        { "cuMemRetainAllocationHandle", (void **)&cu.retain_allocation_handle },
        { "cuMemExportToShareableHandle", (void **)&cu.export_to_shareable_handle },
        { "cuMemRelease", (void **)&cu.release },
    };
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

    if (lib == NULL) {
        cu.why = "the CUDA driver (libcuda.so.1) is not installed";
        return;
    }
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        *syms[i].slot = dlsym(lib, syms[i].name);
        if (*syms[i].slot == NULL) {
            cu.why = "the CUDA driver is too old for b10 (a symbol is missing)";
            return;
        }
    }
    if (cu.init(0) != CU_SUCCESS)
        cu.why = "the CUDA driver failed to initialise (no GPU?)";
}

b10_status_t vram_export(const void *addr, size_t length, struct vram_export *out,
                         size_t *piece_p, char *detail, size_t detail_len)
{
    cudeviceptr_t ptr = (cudeviceptr_t)(uintptr_t)addr;
    cudeviceptr_t base;
    size_t size;
    void *ctx, *popped;
    int ordinal, dev, capable = 0;
    b10_status_t status = B10_OK;

    pthread_once(&cu_once, cu_load);
    if (cu.why != NULL) {
        snprintf(detail, detail_len, "%s", cu.why);
        return B10_ERR_UNSUPPORTED;
    }
    if (cu.pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr) != CU_SUCCESS ||
        cu.device_get(&dev, ordinal) != CU_SUCCESS) {
        snprintf(detail, detail_len, "%p is not CUDA device memory", addr);
        return B10_ERR_INVALID_ARG;
    }
    /* The calls below need a context: the device's primary one, as the runtime uses. */
    if (cu.primary_ctx_retain(&ctx, dev) != CU_SUCCESS || cu.ctx_push(ctx) != CU_SUCCESS) {
        snprintf(detail, detail_len, "no CUDA context on device %d", ordinal);
        return B10_ERR_INVALID_ARG;
    }
    memset(out, 0, sizeof(*out));
    out->fd = -1;
    if (cu.mem_get_address_range(&base, &size, ptr) != CU_SUCCESS) {
        snprintf(detail, detail_len, "no allocation holds %p", addr);
        status = B10_ERR_INVALID_ARG;
        goto out;
    }
    if (ptr + length < ptr) {
        snprintf(detail, detail_len, "the region at %p wraps around the address space", addr);
        status = B10_ERR_INVALID_ARG;
        goto out;
    }
    /* The part of the range inside this allocation; the caller goes on with the rest. */
    *piece_p = ptr + length <= base + size ? length : (size_t)(base + size - ptr);
    out->alloc_base = base;
    out->alloc_length = size;
    if (cu.device_get_pci_bus_id(out->pci_bus_id, sizeof(out->pci_bus_id), dev) != CU_SUCCESS) {
        snprintf(detail, detail_len, "no PCI bus id for device %d", ordinal);
        status = B10_ERR_INVALID_ARG;
        goto out;
    }
    /*
     * cudaMalloc memory exports as an IPC handle of its base; VMM memory
     * (cuMemCreate, PyTorch's expandable segments) as a POSIX fd, if it was
     * created exportable. Anything else is refused: never a silent slow path.
     */
    cu.pointer_get_attribute(&capable, CU_POINTER_ATTRIBUTE_IS_LEGACY_IPC_CAPABLE, ptr);
    if (capable) {
        cuipc_handle_t handle;
        if (cu.ipc_get_mem_handle(&handle, base) == CU_SUCCESS) {
            memcpy(out->ipc_handle, &handle, sizeof(out->ipc_handle));
            out->has_ipc_handle = 1;
            goto out;
        }
    }
    cuhandle_t h;
    int fd = -1;
    if (cu.retain_allocation_handle(&h, (void *)(uintptr_t)base) == CU_SUCCESS) {
        if (cu.export_to_shareable_handle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) !=
            CU_SUCCESS)
            fd = -1;
        cu.release(h);
    }
    if (fd < 0) {
        snprintf(detail, detail_len, "the allocation at 0x%llx can be exported neither as a "
                 "cudaIpcMemHandle nor as a POSIX file descriptor (create VMM memory with "
                 "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)", base);
        status = B10_ERR_UNSUPPORTED;
        goto out;
    }
    out->fd = fd;
out:
    cu.ctx_pop(&popped);
    cu.primary_ctx_release(dev);
    return status;
}
