/*
 * procmem.c — the process-memory kind of DRAM: host memory a rank did not
 * allocate as a memfd (malloc, numpy arrays, torch CPU tensors, pinned host
 * memory), reached through the rank's own /proc/<pid>/mem.
 *
 * The rank opens /proc/self/mem and passes the descriptor. The kernel
 * checks access to that file when it is opened, against the opener, and a
 * process may always open its own: so the rank grants exactly its own
 * memory, and the daemon needs no ptrace right of its own (no
 * CAP_SYS_PTRACE, no PR_SET_PTRACER for Yama, nothing for the unit's
 * hardening to allow).
 *
 * The descriptor holds the rank's address space, not its pid. Once the rank
 * exits (or execs) that address space is gone, and every read and write
 * through the descriptor returns nothing: a process that is later given the
 * same pid is never reached. copy.c turns those empty reads into
 * B10_ERR_CLIENT_GONE.
 *
 * There is no mapping in the daemon: a region's base is its address in the
 * rank, and copy.c reads and writes it with pread/pwrite on proc_fd. The
 * kernel copies a page at a time through a buffer of its own, about half of
 * a memcpy per thread: the fd-backed path (dram.c) stays the zero-copy one.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"

#ifndef PROC_SUPER_MAGIC
#define PROC_SUPER_MAGIC 0x9fa0
#endif

/* The descriptor must be /proc/<the rank's pid>/mem, open for reading and writing. */
static b10_status_t procmem_check_fd(int fd, pid_t pid, char *detail, size_t detail_len)
{
    struct statfs sfs;
    struct stat st;
    char link[64], path[PATH_MAX], want[64];
    ssize_t n;

    if (fd < 0) {
        snprintf(detail, detail_len, "a process-memory region needs the rank's /proc/self/mem "
                 "descriptor");
        return B10_ERR_INVALID_ARG;
    }
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    snprintf(want, sizeof(want), "/proc/%ld/mem", (long)pid);
    if (fstatfs(fd, &sfs) != 0 || sfs.f_type != PROC_SUPER_MAGIC || fstat(fd, &st) != 0 ||
        !S_ISREG(st.st_mode) || (n = readlink(link, path, sizeof(path) - 1)) < 0) {
        snprintf(detail, detail_len, "the descriptor of a process-memory region is not a file of "
                 "/proc: it must be the rank's own /proc/self/mem");
        return B10_ERR_INVALID_ARG;
    }
    path[n] = '\0';
    /* The rank's own: another process's memory file is not this rank's to grant. */
    if (strcmp(path, want) != 0) {
        size_t len = strlen(path);
        bool mem_file = len > 4 && strcmp(path + len - 4, "/mem") == 0;
        snprintf(detail, detail_len, "the descriptor of a process-memory region is %.100s, %s "
                 "the rank's own %s%s", path, mem_file ? "another process's memory, not" : "not",
                 want, mem_file ? " (the rank and the daemon must share a pid namespace)" : "");
        return B10_ERR_INVALID_ARG;
    }
    if ((fcntl(fd, F_GETFL) & O_ACCMODE) != O_RDWR) {
        snprintf(detail, detail_len, "the rank's /proc/self/mem must be opened for reading and "
                 "writing (O_RDWR)");
        return B10_ERR_INVALID_ARG;
    }
    return B10_OK;
}

/* The region's first and last bytes must be there: a clear refusal now, not a failed copy later. */
static b10_status_t procmem_probe(int fd, uint64_t addr, uint64_t length, char *detail,
                                  size_t detail_len)
{
    uint64_t at[2] = { addr, addr + length - 1 };
    for (int i = 0; i < 2; i++) {
        uint8_t byte;
        ssize_t n = -1;
        int err = ERANGE;
        if (at[i] <= (uint64_t)INT64_MAX && (n = pread(fd, &byte, 1, (off_t)at[i])) < 0)
            err = errno;
        if (n == 1)
            continue;
        if (n == 0) {
            snprintf(detail, detail_len, "the rank's address space is gone");
            return B10_ERR_CLIENT_GONE;
        }
        snprintf(detail, detail_len, "the rank's memory at 0x%" PRIx64 " cannot be read through "
                 "/proc/self/mem: %s (not mapped, or memory the kernel does not let a debugger "
                 "reach)", at[i], strerror(err));
        return B10_ERR_INVALID_ARG;
    }
    return B10_OK;
}

static b10_status_t procmem_open(struct region *r, const struct mem_request *req, char *detail,
                                 size_t detail_len)
{
    b10_status_t status = procmem_check_fd(req->fd, req->pid, detail, detail_len);
    if (status == B10_OK)
        status = procmem_probe(req->fd, req->addr, req->length, detail, detail_len);
    if (status != B10_OK)
        return status;
    int fd = fcntl(req->fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(detail, detail_len, "keeping the rank's /proc/self/mem: %s", strerror(errno));
        return errno == EMFILE || errno == ENFILE ? B10_ERR_NO_MEMORY : B10_ERR_IO;
    }
    r->proc_fd = fd;
    r->base = (uint8_t *)(uintptr_t)r->addr;
    return B10_OK;
}

static void procmem_close(struct region *r)
{
    if (r->proc_fd >= 0)
        close(r->proc_fd);
    r->proc_fd = -1;
}

static bool procmem_serves(const struct mem_request *req)
{
    return req->process_mem;
}

/* The rank's /proc/self/mem, always. */
static bool procmem_takes_fd(const struct mem_request *req)
{
    return true;
}

/* No populate: nothing of the rank's is mapped in the daemon to fault in. */
const struct mem_kind_ops procmem_kind = {
    .name = "process",
    .kind_name = "dram",
    .kind = B10_MEM_DRAM,
    .reach = MEM_REACH_FILE,
    .serves = procmem_serves,
    .takes_fd = procmem_takes_fd,
    .open = procmem_open,
    .close = procmem_close,
};
