/*
 * dram.c — the DRAM kind of memory: the client passes a memfd holding its
 * region, and the daemon maps the same pages shared.
 *
 * The memfd must be sealed against shrinking: a client that truncated the
 * file under the daemon's mapping would turn every copy into a SIGBUS.
 * b10_dram_alloc() creates its memfds sealed.
 *
 * The file's holes stay the rank's business: the daemon never fills one
 * (guard.h, hole.h), and b10_dram_alloc() writes every page it allocates.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guard.h"
#include "log.h"
#include "mem.h"

/*
 * Fault the region in now, at registration, so that no transfer pays the
 * page faults. A piece at a time: MAP_POPULATE (or one madvise of it all)
 * holds the process's mmap lock for the whole of a GiB region, and every
 * other thread's mmap, munmap or brk (the loop's allocations, UCX's
 * registrations) would wait seconds behind it. A kernel without
 * MADV_POPULATE_WRITE (before 5.14) leaves the faults to the first copies.
 *
 * Only the pages the rank has: the file's data extents (SEEK_DATA and
 * SEEK_HOLE), never its holes. Populating a hole allocates a page, charged
 * to the daemon, so a rank that registered an untouched sparse memfd of
 * terabytes would have had the daemon fill the node's memory for it. No
 * copy fills a hole either: it fails B10_ERR_NOT_POPULATED (guard.h). A
 * guarded range punched meanwhile fails the populate EFAULT, allocating
 * nothing: the rest of it is left to the copies.
 */
#define DRAM_POPULATE_STEP (64u << 20)

static int dram_populate_range(uint8_t *map, size_t length)
{
    for (size_t off = 0; off < length; off += DRAM_POPULATE_STEP) {
        size_t n = length - off < DRAM_POPULATE_STEP ? length - off : DRAM_POPULATE_STEP;
        if (madvise(map + off, n, MADV_POPULATE_WRITE) != 0) {
            if (errno == EFAULT)
                return 0;       /* a hole of a guarded mapping: punched since the walk saw data */
            if (errno == EINVAL)
                log_info("this kernel has no MADV_POPULATE_WRITE: a region's pages are faulted "
                         "in by its first copies");
            else
                log_warning("populating a client region: %s", strerror(errno));
            return -1;
        }
    }
    return 0;
}

/*
 * map holds the file's bytes [file_off, file_off + length), file_off page-aligned.
 * The walk moves the file offset, which the rank shares (the descriptor came over
 * SCM_RIGHTS): it is put back where it was.
 */
static void dram_populate(int fd, off_t file_off, uint8_t *map, size_t length)
{
    long page = sysconf(_SC_PAGESIZE);
    off_t end = file_off + (off_t)length;
    off_t was = lseek(fd, 0, SEEK_CUR);

    for (off_t pos = file_off; pos < end;) {
        off_t data = lseek(fd, pos, SEEK_DATA);
        if (data < 0 || data >= end)
            break;      /* ENXIO: no data past pos; or a file that cannot say: fault lazily */
        off_t hole = lseek(fd, data, SEEK_HOLE);
        if (hole < 0 || hole > end)
            hole = end;
        data -= data % page;
        if (dram_populate_range(map + (data - file_off), (size_t)(hole - data)) != 0)
            break;
        pos = hole;
    }
    if (was >= 0)
        lseek(fd, was, SEEK_SET);
}

/*
 * The daemon's own open file description of the memfd, for hole.c's lseek:
 * opened again through /proc (a memfd's mode lets any user), else a
 * duplicate, whose offset is the rank's too (b10_dram_alloc's memfds are
 * never read through theirs).
 */
static int dram_own_fd(int fd, const struct stat *st)
{
    char path[64];
    struct stat again;
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    int own = open(path, O_RDONLY | O_CLOEXEC);
    if (own >= 0 && fstat(own, &again) == 0 && again.st_dev == st->st_dev &&
        again.st_ino == st->st_ino)
        return own;
    if (own >= 0)
        close(own);
    return fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

/*
 * Guard the mapping against holes (guard.h), whole pages of the file's
 * size (a hugetlbfs memfd's are huge); else keep a descriptor for each
 * copy to look for them first (hole.h).
 */
static b10_status_t dram_holes(struct region *r, const struct mem_request *req,
                               const struct stat *st, char *detail, size_t detail_len)
{
    size_t unit = st->st_blksize > 0 ? (size_t)st->st_blksize : (size_t)sysconf(_SC_PAGESIZE);
    size_t span = (r->map_length + unit - 1) / unit * unit;
    if (guard_add(r->map, span)) {
        r->holes = REGION_HOLES_GUARDED;
        return B10_OK;
    }
    int fd = dram_own_fd(req->fd, st);
    if (fd < 0) {
        int err = errno;
        snprintf(detail, detail_len, "keeping the memfd to look for its holes: %s", strerror(err));
        return err == EMFILE || err == ENFILE ? B10_ERR_NO_MEMORY : B10_ERR_IO;
    }
    r->holes = REGION_HOLES_CHECKED;
    r->hole_fd = fd;
    r->hole_offset = req->fd_offset;
    return B10_OK;
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
    r->map = map;
    r->map_length = map_length;
    r->base = (uint8_t *)map + lead;
    /* The guard first: the populate after open then cannot fill a hole punched meanwhile either. */
    b10_status_t status = dram_holes(r, req, &st, detail, detail_len);
    if (status != B10_OK) {
        munmap(map, map_length);
        r->map = NULL;
        return status;
    }
    return B10_OK;
}

/* Off the loop like dram_open, while the request's fd is still open. */
static void dram_populate_region(struct region *r, const struct mem_request *req)
{
    uint64_t lead = (uint64_t)(r->base - (uint8_t *)r->map);
    dram_populate(req->fd, (off_t)(req->fd_offset - lead), r->map, r->map_length);
}

static void dram_close(struct region *r)
{
    if (r->map != NULL)
        munmap(r->map, r->map_length);
    if (r->hole_fd >= 0)
        close(r->hole_fd);
    r->hole_fd = -1;
}

/* Of DRAM's requests, those of a memfd: the rest are process memory (procmem.c). */
static bool dram_serves(const struct mem_request *req)
{
    return !req->process_mem;
}

/* The memfd, always. */
static bool dram_takes_fd(const struct mem_request *req)
{
    return true;
}

const struct mem_kind_ops dram_kind = {
    .name = "dram",
    .kind_name = "dram",
    .kind = B10_MEM_DRAM,
    .reach = MEM_REACH_MAPPED,
    .serves = dram_serves,
    .takes_fd = dram_takes_fd,
    .open = dram_open,
    .populate = dram_populate_region,
    .close = dram_close,
};
