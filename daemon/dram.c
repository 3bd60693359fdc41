/*
 * dram.c — the DRAM memory backend: the client passes a memfd holding its
 * region, and the daemon maps the same pages shared.
 *
 * The memfd must be sealed against shrinking: a client that truncated the
 * file under the daemon's mapping would turn every copy into a SIGBUS.
 * b10_dram_alloc() creates its memfds sealed.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"

/*
 * Fault the region in now, at registration, so that no transfer pays the
 * page faults. A piece at a time: MAP_POPULATE (or one madvise of it all)
 * holds the process's mmap lock for the whole of a GiB region, and every
 * other thread's mmap, munmap or brk (the loop's allocations, UCX's
 * registrations) would wait seconds behind it. A kernel without
 * MADV_POPULATE_WRITE (before 5.14) leaves the faults to the first copies.
 */
#define DRAM_POPULATE_STEP (64u << 20)

static void dram_populate(uint8_t *map, size_t length)
{
    for (size_t off = 0; off < length; off += DRAM_POPULATE_STEP) {
        size_t n = length - off < DRAM_POPULATE_STEP ? length - off : DRAM_POPULATE_STEP;
        if (madvise(map + off, n, MADV_POPULATE_WRITE) != 0) {
            if (errno == EINVAL)
                log_info("this kernel has no MADV_POPULATE_WRITE: a region's pages are faulted "
                         "in by its first copies");
            else
                log_warning("populating a client region: %s", strerror(errno));
            return;
        }
    }
}

static b10_status_t dram_open(struct region *r, const struct mem_request *req, char *detail,
                              size_t detail_len)
{
    struct stat st;
    long page = sysconf(_SC_PAGESIZE);

    if (req->fd < 0) {
        snprintf(detail, detail_len, "a DRAM region needs its file descriptor");
        return B10_ERR_INVALID_ARG;
    }
    if (fstat(req->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(detail, detail_len, "the descriptor of a DRAM region must be a memfd");
        return B10_ERR_INVALID_ARG;
    }
    uint64_t end = req->fd_offset + req->length;
    if (end < req->fd_offset || end > (uint64_t)st.st_size) {
        snprintf(detail, detail_len, "region of %" PRIu64 " bytes at file offset %" PRIu64
                 " runs past the memfd's %" PRIu64 " bytes", req->length, req->fd_offset,
                 (uint64_t)st.st_size);
        return B10_ERR_INVALID_ARG;
    }
    int seals = fcntl(req->fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
        snprintf(detail, detail_len, "the memfd of a DRAM region must be sealed with "
                 "F_SEAL_SHRINK (b10_dram_alloc does this)");
        return B10_ERR_INVALID_ARG;
    }
    uint64_t lead = req->fd_offset % (uint64_t)page;
    size_t map_length = (size_t)(req->length + lead);
    void *map = mmap(NULL, map_length, PROT_READ | PROT_WRITE, MAP_SHARED, req->fd,
                     (off_t)(req->fd_offset - lead));
    if (map == MAP_FAILED) {
        int err = errno;
        log_warning("mmap of a %zu-byte client region: %s", map_length, strerror(err));
        snprintf(detail, detail_len, "mapping the region failed: %s", strerror(err));
        return err == ENOMEM ? B10_ERR_NO_MEMORY : B10_ERR_IO;
    }
    dram_populate(map, map_length);
    r->map = map;
    r->map_length = map_length;
    r->base = (uint8_t *)map + lead;
    return B10_OK;
}

static void dram_close(struct region *r)
{
    if (r->map != NULL)
        munmap(r->map, r->map_length);
}

const struct mem_backend dram_backend = {
    .name = "dram",
    .open = dram_open,
    .close = dram_close,
};
