/*
 * test-vram.c — daemon/mem/vram.c: the VRAM kind of memory, and the GPU
 * room's mapping it asks for (gpu.c: gpu_vram_usable, gpu_vram_map).
 *
 * No GPU is needed: the CUDA library (cuda/gpu-copy.cu) is the seam, linked
 * with -Wl,--wrap for the gpu_copy_* calls a registration makes: a fake
 * node with one device at one PCI bus id, whose mappings the test makes
 * succeed or fail, and counts. Each refusal a rank can meet comes back with
 * its status and the detail that says why, in the order the checks run,
 * and nothing mapped is left behind; the registration that names all it
 * must is opened on its device, at the device pointer of its address, and
 * unmapped with its last reference. A daemon built without the CUDA backend
 * refuses every VRAM registration, saying so.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gpu.h"
#include "log.h"
#include "mem.h"

#define BUS "0000:3b:00.0"          /* the fake node's one device, ordinal FAKE_DEVICE */
#define FAKE_DEVICE 1
#define ALLOC_BASE 0x7f0000000000ull
#define ALLOC_LENGTH (8ull << 20)

static char detail[256];

static b10_status_t open_vram(const struct mem_request *req, struct region **r_p)
{
    detail[0] = '\0';
    *r_p = NULL;
    return mem_region_open(1, req, detail, sizeof(detail), r_p);
}

static void refused_because(b10_status_t st, b10_status_t want, const char *why)
{
    if (st != want)
        fail_msg("%s, not %s (%s)", b10_status_name(st), b10_status_name(want), detail);
    if (strstr(detail, why) == NULL)
        fail_msg("the detail \"%s\" does not say \"%s\"", detail, why);
}

#ifdef B10_HAVE_CUDA

#include "gpu-copy.h"

/* ---------------------------------------------------------------- the fake node */

static int ndevices;
static uint8_t handle[GPU_COPY_IPC_HANDLE_BYTES] = { 7 };
static struct fake_map {
    int rc;                         /* what the next map returns */
    size_t holds;                   /* the allocation's size as the driver has it */
    int device, fd;                 /* the last map's */
    size_t fd_size;
    unsigned ipc, vmm, unmapped;    /* maps through a handle, through an fd; unmaps */
    const gpu_copy_mapping_t *last_unmapped;
} fake;
static uint8_t device_memory[8192]; /* where the fake driver maps every allocation */
#define MAPPING ((gpu_copy_mapping_t *)&fake)

int __wrap_gpu_copy_device_count(const char **why_p);
int __wrap_gpu_copy_device_count(const char **why_p)
{
    if (ndevices == 0)
        *why_p = "fake: no device";
    return ndevices;
}

int __wrap_gpu_copy_device_by_pci(const char *bus_id, int *device_p, char *err, size_t errlen);
int __wrap_gpu_copy_device_by_pci(const char *bus_id, int *device_p, char *err, size_t errlen)
{
    if (strcmp(bus_id, BUS) != 0) {
        snprintf(err, errlen, "fake: no device at %s", bus_id);
        return GPU_COPY_E_NODEV;
    }
    *device_p = FAKE_DEVICE;
    return GPU_COPY_OK;
}

static int fake_map(int device, gpu_copy_mapping_t **map_p, void **base_p, size_t *size_p,
                    char *err, size_t errlen)
{
    fake.device = device;
    *size_p = fake.holds;
    if (fake.rc == GPU_COPY_OK || fake.rc == GPU_COPY_E_RANGE) {
        if (fake.rc == GPU_COPY_OK) {
            *map_p = MAPPING;
            *base_p = device_memory;
        }
        return fake.rc;
    }
    snprintf(err, errlen, "fake: %s", gpu_copy_strstatus(fake.rc));
    return fake.rc;
}

int __wrap_gpu_copy_map_ipc(int device, const void *h, gpu_copy_mapping_t **map_p, void **base_p,
                            size_t *size_p, char *err, size_t errlen);
int __wrap_gpu_copy_map_ipc(int device, const void *h, gpu_copy_mapping_t **map_p, void **base_p,
                            size_t *size_p, char *err, size_t errlen)
{
    assert_memory_equal(h, handle, sizeof(handle));
    fake.ipc++;
    return fake_map(device, map_p, base_p, size_p, err, errlen);
}

int __wrap_gpu_copy_map_fd(int device, int fd, size_t size, gpu_copy_mapping_t **map_p,
                           void **base_p, size_t *size_p, char *err, size_t errlen);
int __wrap_gpu_copy_map_fd(int device, int fd, size_t size, gpu_copy_mapping_t **map_p,
                           void **base_p, size_t *size_p, char *err, size_t errlen)
{
    fake.vmm++;
    fake.fd = fd;
    fake.fd_size = size;
    return fake_map(device, map_p, base_p, size_p, err, errlen);
}

void __wrap_gpu_copy_unmap(gpu_copy_mapping_t *map);
void __wrap_gpu_copy_unmap(gpu_copy_mapping_t *map)
{
    fake.unmapped++;
    fake.last_unmapped = map;
}

static int setup(void **state)
{
    ndevices = 1;
    memset(&fake, 0, sizeof(fake));
    fake.holds = ALLOC_LENGTH;
    fake.fd = -1;
    return 0;
}

/* A registration that names everything, through the allocation's IPC handle. */
static struct mem_request vram_request(void)
{
    return (struct mem_request){ .kind = B10_MEM_VRAM, .addr = ALLOC_BASE + 4096, .length = 65536,
                                 .fd = -1, .pci_bus_id = BUS, .alloc_base = ALLOC_BASE,
                                 .alloc_length = ALLOC_LENGTH, .ipc_handle = handle,
                                 .ipc_handle_length = sizeof(handle) };
}

/* ---------------------------------------------------------------- the tests */

/* Opened on its device, at the device pointer of its address; unmapped with its last reference. */
static void test_opened_on_its_device(void **state)
{
    struct mem_request req = vram_request();
    struct region *r;

    assert_int_equal(open_vram(&req, &r), B10_OK);
    assert_int_equal(fake.ipc, 1);
    assert_int_equal(fake.vmm, 0);                      /* the handle first, where there is one */
    assert_int_equal(fake.device, FAKE_DEVICE);
    assert_ptr_equal(r->ops, &vram_kind);
    assert_string_equal(r->ops->name, "vram");
    assert_string_equal(r->ops->kind_name, "vram");
    assert_int_equal(r->device, FAKE_DEVICE);
    assert_ptr_equal(r->base, device_memory + 4096);
    assert_true(mem_region_on_device(r));
    assert_int_equal(mem_region_device(r), FAKE_DEVICE);
    assert_false(mem_region_mapped(r));
    assert_int_equal(r->proc_fd, -1);
    assert_int_equal(fake.unmapped, 0);
    region_unref(r);
    assert_int_equal(fake.unmapped, 1);
    assert_ptr_equal(fake.last_unmapped, MAPPING);

    /* A VMM allocation's fd, where there is no handle of the right size: the allocation's length. */
    req.ipc_handle_length = sizeof(handle) - 1;
    req.fd = 42;
    assert_int_equal(open_vram(&req, &r), B10_OK);
    assert_int_equal(fake.vmm, 1);
    assert_int_equal(fake.fd, 42);
    assert_int_equal(fake.fd_size, ALLOC_LENGTH);
    assert_ptr_equal(r->base, device_memory + 4096);
    region_unref(r);
    assert_int_equal(fake.unmapped, 2);
}

/* In a table, VRAM counts toward the rank's bytes, never its host bytes. */
static void test_not_host_memory(void **state)
{
    struct mem_table t;
    struct mem_request req = vram_request();
    struct region *r;

    mem_table_init(&t, 4, 1ull << 30);
    assert_int_equal(mem_table_add(&t, 1, &req, detail, sizeof(detail), &r), B10_OK);
    assert_int_equal(t.bytes, req.length);
    assert_int_equal(t.host_bytes, 0);
    assert_false(mem_request_host(&req));
    assert_false(mem_request_takes_fd(&req));           /* a handle: no descriptor comes */
    req.vmm_fd = true;
    assert_true(mem_request_takes_fd(&req));
    assert_int_equal(mem_table_remove(&t, 1), B10_OK);
    assert_int_equal(t.bytes, 0);
    assert_int_equal(fake.unmapped, 1);
    mem_table_clear(&t);
}

/* Each refusal, in the order the checks run; nothing is asked of the driver before its turn. */
static void test_refusals_in_order(void **state)
{
    struct mem_request req = vram_request();
    char long_bus[40];
    struct region *r;

    ndevices = 0;
    refused_because(open_vram(&req, &r), B10_ERR_UNSUPPORTED,
                    "no usable CUDA device on this node: fake: no device");
    req.pci_bus_id = NULL;                              /* no device comes before the bus id */
    refused_because(open_vram(&req, &r), B10_ERR_UNSUPPORTED, "no usable CUDA device");
    ndevices = 1;

    const char *buses[] = { NULL, "", long_bus };
    memset(long_bus, '0', 33);
    long_bus[33] = '\0';
    for (size_t i = 0; i < 3; i++) {
        req.pci_bus_id = buses[i];
        req.alloc_length = 0;                           /* the bus id is checked first */
        refused_because(open_vram(&req, &r), B10_ERR_INVALID_ARG,
                        "a VRAM region needs its device's PCI bus id");
    }
    long_bus[32] = '\0';                                /* 32 characters: its length is fine */
    req = vram_request();
    req.pci_bus_id = long_bus;
    refused_because(open_vram(&req, &r), B10_ERR_INVALID_ARG,
                    "no CUDA device at PCI 00000000000000000000000000000000 on this node: "
                    "fake: no device at");

    /* Wholly inside one allocation: checked before the device is looked up. */
    const struct { uint64_t addr, length, alloc_base, alloc_length; } outside[] = {
        { ALLOC_BASE, 4096, ALLOC_BASE, 0 },                            /* no allocation */
        { ALLOC_BASE - 1, 4096, ALLOC_BASE, ALLOC_LENGTH },             /* before it */
        { ALLOC_BASE + ALLOC_LENGTH - 4095, 4096, ALLOC_BASE, ALLOC_LENGTH },   /* past it */
        { UINT64_MAX - 4096, 4096, UINT64_MAX - 4096, 8192 },           /* it wraps */
    };
    for (size_t i = 0; i < sizeof(outside) / sizeof(outside[0]); i++) {
        req = vram_request();
        req.pci_bus_id = "0000:99:00.0";
        req.addr = outside[i].addr;
        req.length = outside[i].length;
        req.alloc_base = outside[i].alloc_base;
        req.alloc_length = outside[i].alloc_length;
        refused_because(open_vram(&req, &r), B10_ERR_INVALID_ARG,
                        "the region must lie inside one allocation");
    }
    req = vram_request();
    req.pci_bus_id = "0000:99:00.0";
    refused_because(open_vram(&req, &r), B10_ERR_INVALID_ARG,
                    "no CUDA device at PCI 0000:99:00.0 on this node: fake: no device at "
                    "0000:99:00.0");

    /* Neither a handle of the right size nor a descriptor. */
    req = vram_request();
    req.ipc_handle_length = sizeof(handle) + 1;
    refused_because(open_vram(&req, &r), B10_ERR_INVALID_ARG,
                    "a VRAM region needs a 64-byte cudaIpcMemHandle or the file descriptor of "
                    "a VMM allocation");
    req.ipc_handle = NULL;
    req.ipc_handle_length = 0;
    refused_because(open_vram(&req, &r), B10_ERR_INVALID_ARG, "64-byte cudaIpcMemHandle");
    assert_int_equal(fake.ipc + fake.vmm, 0);
    assert_null(r);
}

/* The driver's refusals, and an allocation smaller than claimed: nothing is left mapped. */
static void test_driver_refusals(void **state)
{
    struct mem_request req = vram_request();
    struct region *r;

    /* Mapped, then found smaller than claimed: unmapped again. */
    fake.holds = ALLOC_LENGTH - 1;
    refused_because(open_vram(&req, &r), B10_ERR_INVALID_ARG,
                    "the registration claims an allocation of 8388608 bytes at 0x7f0000000000; "
                    "the driver's holds 8388607");
    assert_int_equal(fake.unmapped, 1);
    assert_ptr_equal(fake.last_unmapped, MAPPING);
    /* A VMM import the driver refuses as too small: nothing was mapped, nothing to undo. */
    fake.rc = GPU_COPY_E_RANGE;
    fake.holds = 2u << 20;
    req.ipc_handle = NULL;
    req.fd = 42;
    refused_because(open_vram(&req, &r), B10_ERR_INVALID_ARG, "the driver's holds 2097152");
    assert_int_equal(fake.unmapped, 1);

    const struct { int rc; b10_status_t status; } driver[] = {
        { GPU_COPY_E_NOMEM, B10_ERR_NO_MEMORY },
        { GPU_COPY_E_CUDA, B10_ERR_INVALID_ARG },
        { GPU_COPY_E_INVAL, B10_ERR_INVALID_ARG },
    };
    for (size_t i = 0; i < sizeof(driver) / sizeof(driver[0]); i++) {
        char why[160];
        fake.rc = driver[i].rc;
        snprintf(why, sizeof(why), "opening the allocation on device %d failed: fake: %s",
                 FAKE_DEVICE, gpu_copy_strstatus(driver[i].rc));
        refused_because(open_vram(&req, &r), driver[i].status, why);
        assert_null(r);
    }
    assert_int_equal(fake.unmapped, 1);
    /* And the same registration, once the driver takes it. */
    fake.rc = GPU_COPY_OK;
    fake.holds = ALLOC_LENGTH;
    assert_int_equal(open_vram(&req, &r), B10_OK);
    region_unref(r);
    assert_int_equal(fake.unmapped, 2);
}

int main(void)
{
    log_setup(LOG_LEVEL_ERR, "test-vram");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_opened_on_its_device, setup),
        cmocka_unit_test_setup(test_not_host_memory, setup),
        cmocka_unit_test_setup(test_refusals_in_order, setup),
        cmocka_unit_test_setup(test_driver_refusals, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* !B10_HAVE_CUDA */

/* Every VRAM registration refused, saying why, and nothing counted. */
static void test_refused_without_cuda(void **state)
{
    struct mem_request req = { .kind = B10_MEM_VRAM, .addr = ALLOC_BASE, .length = 65536,
                               .fd = -1, .pci_bus_id = BUS, .alloc_base = ALLOC_BASE,
                               .alloc_length = ALLOC_LENGTH };
    struct region *r;

    refused_because(open_vram(&req, &r), B10_ERR_UNSUPPORTED,
                    "this b10d was built without CUDA: it cannot map VRAM");
    assert_null(r);
    assert_false(mem_request_host(&req));
    /* Whatever else the registration lacks: that is not what the rank must hear first. */
    req.pci_bus_id = NULL;
    req.alloc_length = 0;
    refused_because(open_vram(&req, &r), B10_ERR_UNSUPPORTED,
                    "this b10d was built without CUDA: it cannot map VRAM");
}

int main(void)
{
    log_setup(LOG_LEVEL_ERR, "test-vram");
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_refused_without_cuda) };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
