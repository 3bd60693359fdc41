/*
 * kv-cuda.h — device memory for b10-kvrank's --mem vram and --mem vmm: the
 * CUDA driver API, loaded at run time so that the rank builds and runs
 * without CUDA (the types come from cuda.h where the build has it).
 *
 * vram: cuMemAlloc, which libb10 exports as a cudaIpcMemHandle.
 * vmm:  cuMemCreate with a POSIX-fd handle type, mapped into a reserved range,
 *       as PyTorch's expandable segments allocate; libb10 exports the fd.
 */
#ifndef B10_KV_CUDA_H
#define B10_KV_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct kvcuda_alloc {
    uint64_t ptr;
    size_t size;                /* bytes reserved and mapped (vmm: rounded to the granularity) */
    unsigned long long handle;  /* vmm: the physical allocation */
    bool vmm;
};

#ifdef B10_HAVE_CUDA

#include <cuda.h>
#include <dlfcn.h>

static struct {
    CUresult (*init)(unsigned);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*primary_ctx_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
    CUresult (*htod)(CUdeviceptr, const void *, size_t);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t);
    CUresult (*granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                       unsigned long long);
    CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*address_free)(CUdeviceptr, size_t);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUdevice dev;
} kvcu;

/* Load the driver, make device 0's primary context current. 0, or -1 with err. */
static int kvcuda_init(char *err, size_t errlen)
{
    static const struct {
        const char *name;
        size_t offset;
    } syms[] = {
#define KVSYM(name, field) { name, offsetof(__typeof__(kvcu), field) }
        KVSYM("cuInit", init), KVSYM("cuDeviceGet", device_get),
        KVSYM("cuDevicePrimaryCtxRetain", primary_ctx_retain), KVSYM("cuCtxSetCurrent", ctx_set_current),
        KVSYM("cuMemAlloc_v2", mem_alloc), KVSYM("cuMemFree_v2", mem_free),
        KVSYM("cuMemcpyHtoD_v2", htod), KVSYM("cuMemcpyDtoH_v2", dtoh),
        KVSYM("cuMemGetAllocationGranularity", granularity), KVSYM("cuMemCreate", create),
        KVSYM("cuMemAddressReserve", reserve), KVSYM("cuMemMap", map),
        KVSYM("cuMemSetAccess", set_access), KVSYM("cuMemUnmap", unmap),
        KVSYM("cuMemAddressFree", address_free), KVSYM("cuMemRelease", release),
#undef KVSYM
    };
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CUcontext ctx;

    if (lib == NULL) {
        snprintf(err, errlen, "no CUDA driver (libcuda.so.1): %s", dlerror());
        return -1;
    }
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        void *fn = dlsym(lib, syms[i].name);
        if (fn == NULL) {
            snprintf(err, errlen, "the CUDA driver lacks %s", syms[i].name);
            return -1;
        }
        *(void **)((char *)&kvcu + syms[i].offset) = fn;
    }
    if (kvcu.init(0) != CUDA_SUCCESS || kvcu.device_get(&kvcu.dev, 0) != CUDA_SUCCESS ||
        kvcu.primary_ctx_retain(&ctx, kvcu.dev) != CUDA_SUCCESS ||
        kvcu.ctx_set_current(ctx) != CUDA_SUCCESS) {
        snprintf(err, errlen, "no usable CUDA device");
        return -1;
    }
    return 0;
}

static int kvcuda_alloc(bool vmm, size_t len, struct kvcuda_alloc *a, char *err, size_t errlen)
{
    CUresult r;

    a->vmm = vmm;
    a->size = len;
    if (!vmm) {
        CUdeviceptr p;
        if ((r = kvcu.mem_alloc(&p, len)) != CUDA_SUCCESS) {
            snprintf(err, errlen, "cuMemAlloc(%zu): error %d", len, (int)r);
            return -1;
        }
        a->ptr = p;
        return 0;
    }
    CUmemAllocationProp prop = { 0 };
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = kvcu.dev;
    size_t gran = 0;
    if ((r = kvcu.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM)) != CUDA_SUCCESS ||
        gran == 0) {
        snprintf(err, errlen, "cuMemGetAllocationGranularity: error %d", (int)r);
        return -1;
    }
    a->size = (len + gran - 1) / gran * gran;
    CUmemGenericAllocationHandle h;
    CUdeviceptr p = 0;
    CUmemAccessDesc access = { { CU_MEM_LOCATION_TYPE_DEVICE, kvcu.dev },
                               CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    if ((r = kvcu.create(&h, a->size, &prop, 0)) != CUDA_SUCCESS) {
        snprintf(err, errlen, "cuMemCreate(%zu): error %d", a->size, (int)r);
        return -1;
    }
    if ((r = kvcu.reserve(&p, a->size, 0, 0, 0)) != CUDA_SUCCESS ||
        (r = kvcu.map(p, a->size, 0, h, 0)) != CUDA_SUCCESS ||
        (r = kvcu.set_access(p, a->size, &access, 1)) != CUDA_SUCCESS) {
        snprintf(err, errlen, "mapping a VMM allocation: error %d", (int)r);
        kvcu.release(h);
        return -1;
    }
    a->ptr = p;
    a->handle = h;
    return 0;
}

static void kvcuda_free(struct kvcuda_alloc *a)
{
    if (a->ptr == 0)
        return;
    if (a->vmm) {
        kvcu.unmap(a->ptr, a->size);
        kvcu.address_free(a->ptr, a->size);
        kvcu.release(a->handle);
    } else {
        kvcu.mem_free(a->ptr);
    }
    a->ptr = 0;
}

static int kvcuda_upload(uint64_t dst, const void *src, size_t len)
{
    return kvcu.htod(dst, src, len) == CUDA_SUCCESS ? 0 : -1;
}

static int kvcuda_download(void *dst, uint64_t src, size_t len)
{
    return kvcu.dtoh(dst, src, len) == CUDA_SUCCESS ? 0 : -1;
}

#else /* !B10_HAVE_CUDA */

static int kvcuda_init(char *err, size_t errlen)
{
    snprintf(err, errlen, "b10-kvrank was built without CUDA headers");
    return -1;
}

static int kvcuda_alloc(bool vmm, size_t len, struct kvcuda_alloc *a, char *err, size_t errlen)
{
    snprintf(err, errlen, "b10-kvrank was built without CUDA headers");
    return -1;
}

static void kvcuda_free(struct kvcuda_alloc *a)
{
}

static int kvcuda_upload(uint64_t dst, const void *src, size_t len)
{
    return -1;
}

static int kvcuda_download(void *dst, uint64_t src, size_t len)
{
    return -1;
}

#endif

#endif
