/*
 * test-procmem.c — daemon/mem/procmem.c: the process-memory backend, a rank's
 * host memory reached through the /proc/self/mem descriptor it passed.
 *
 * This process plays the rank: it opens its own memory file as libb10
 * does, and registers through mem.c as the daemon would. Each descriptor
 * the backend must refuse (none, not of /proc, another file of /proc,
 * another process's memory, read-only) and each region whose ends are not
 * there is refused with a detail that says why, beside the one accepted;
 * a rank whose address space is gone is told apart from a bad address.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "mem.h"
#include "regions.h"

static struct mem_request proc_req(int fd, pid_t pid, const void *addr, uint64_t length)
{
    return (struct mem_request){ .kind = B10_MEM_DRAM, .process_mem = true, .fd = fd,
                                 .pid = pid, .addr = (uintptr_t)addr, .length = length };
}

static int group_setup(void **state)
{
    return regions_setup("test-procmem");
}

/* The rank's own memory file, read and write: accepted; the region keeps a descriptor of its own. */
static void test_own_memory(void **state)
{
    static uint8_t memory[3 * 4096];
    int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
    struct region *r = NULL;

    assert_true(fd >= 0);
    memset(memory, 0x5c, sizeof(memory));
    struct mem_request req = proc_req(fd, getpid(), memory + 10, sizeof(memory) - 20);
    assert_int_equal(open_region(&req, &r), B10_OK);
    assert_non_null(r);
    assert_string_equal(r->ops->name, "process");
    assert_true(r->proc_fd >= 0);
    assert_int_not_equal(r->proc_fd, fd);
    assert_true(fcntl(r->proc_fd, F_GETFD) & FD_CLOEXEC);
    /* No mapping of its own: the base is the rank's address, reached through the descriptor. */
    assert_ptr_equal(r->base, memory + 10);
    assert_null(r->map);
    /* The rank may close its descriptor: the region's still reaches the memory. */
    close(fd);
    uint8_t b = 0;
    assert_int_equal(pread(r->proc_fd, &b, 1, (off_t)(uintptr_t)(memory + 100)), 1);
    assert_int_equal(b, 0x5c);
    int kept = r->proc_fd;
    region_unref(r);
    /* Its descriptor is closed with it. */
    assert_int_equal(fcntl(kept, F_GETFD), -1);
    assert_int_equal(errno, EBADF);
}

static void test_descriptor_refusals(void **state)
{
    static uint8_t memory[4096];
    struct region *r = NULL;
    struct mem_request req = proc_req(-1, getpid(), memory, sizeof(memory));

    refused_because(open_region(&req, &r), B10_ERR_INVALID_ARG, "/proc/self/mem descriptor");

    /* Not a file of /proc at all. */
    int fd = memfd_create("test-procmem", MFD_CLOEXEC);
    assert_true(fd >= 0);
    req.fd = fd;
    refused_because(open_region(&req, &r), B10_ERR_INVALID_ARG, "not a file of /proc");
    close(fd);

    /* A file of /proc, but not a memory file. */
    fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    req.fd = fd;
    refused_because(open_region(&req, &r), B10_ERR_INVALID_ARG, ", not the rank's own");
    close(fd);

    /* The right file, but the rank says another pid: not its memory to grant. */
    fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
    assert_true(fd >= 0);
    req = proc_req(fd, getpid() + 1, memory, sizeof(memory));
    refused_because(open_region(&req, &r), B10_ERR_INVALID_ARG, "another process's memory");
    req.pid = getpid();
    assert_int_equal(open_region(&req, &r), B10_OK);
    region_unref(r);
    close(fd);

    /* Read-only: the daemon must also write. */
    fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    req.fd = fd;
    refused_because(open_region(&req, &r), B10_ERR_INVALID_ARG, "O_RDWR");
    close(fd);
}

/* Both ends of the region must be mapped in the rank; the refusal names the address. */
static void test_region_ends(void **state)
{
    int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
    uint8_t *map = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                        -1, 0);
    struct region *r = NULL;
    char where[32];

    assert_true(fd >= 0);
    assert_true(map != MAP_FAILED);
    assert_int_equal(munmap(map + 2 * page, page), 0);      /* the rank unmapped its third page */

    struct mem_request req = proc_req(fd, getpid(), map, 2 * page);
    assert_int_equal(open_region(&req, &r), B10_OK);
    region_unref(r);
    req.length = 2 * page + 1;                               /* its last byte in the hole */
    snprintf(where, sizeof(where), "0x%llx", (unsigned long long)(uintptr_t)(map + 2 * page));
    refused_because(open_region(&req, &r), B10_ERR_INVALID_ARG, where);
    req = proc_req(fd, getpid(), map + 2 * page, 16);       /* its first byte in the hole */
    refused_because(open_region(&req, &r), B10_ERR_INVALID_ARG, "cannot be read");
    /* Beyond what a file offset can say. */
    req = proc_req(fd, getpid(), (void *)(uintptr_t)UINT64_C(0x8000000000000000), 16);
    refused_because(open_region(&req, &r), B10_ERR_INVALID_ARG, "cannot be read");
    munmap(map, 2 * page);
    close(fd);
}

/* A rank that exited: its memory file reads nothing, and the refusal says it is gone. */
static void test_rank_gone(void **state)
{
    static uint8_t memory[4096];
    int go[2];
    char path[64];
    struct region *r = NULL;

    assert_int_equal(pipe(go), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char c;
        close(go[1]);
        while (read(go[0], &c, 1) < 0 && errno == EINTR)
            ;
        _exit(0);
    }
    close(go[0]);
    snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        close(go[1]);
        waitpid(pid, NULL, 0);
        skip();             /* no access to a child's memory file here */
    }
    /* Alive, the rank's memory is there. */
    struct mem_request req = proc_req(fd, pid, memory, sizeof(memory));
    assert_int_equal(open_region(&req, &r), B10_OK);
    region_unref(r);

    /* Exited, not yet reaped: its /proc entry stands, its address space is gone. */
    close(go[1]);
    siginfo_t info;
    assert_int_equal(waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT), 0);
    refused_because(open_region(&req, &r), B10_ERR_CLIENT_GONE, "address space is gone");
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_own_memory),
        cmocka_unit_test(test_descriptor_refusals),
        cmocka_unit_test(test_region_ends),
        cmocka_unit_test(test_rank_gone),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
