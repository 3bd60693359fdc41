/* hole.c — see hole.h. */
#include "hole.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

/* Pages one mincore call asks about: 2 MiB of 4 KiB pages, its vector on the stack. */
#define HOLE_VECTOR 512

/* Is the page at file offset off one the file has, though not in the page cache? */
static int hole_swapped(int fd, uint64_t off)
{
    if (fd < 0)
        return 0;
    off_t data = lseek(fd, (off_t)off, SEEK_DATA);
    /* ENXIO: no data from off on. Another error: a file that cannot say; the copy decides. */
    return data == (off_t)off || (data < 0 && errno != ENXIO);
}

b10_status_t hole_check(int fd, uint64_t off, const uint8_t *p, size_t len,
                        const uint8_t **hole_p)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t first = (uintptr_t)p & ~(page - 1), end = (uintptr_t)p + len;
    /* The file offset of the first page: the mapping and the file share page boundaries. */
    const uint64_t first_off = off - ((uintptr_t)p - first);
    unsigned char vec[HOLE_VECTOR];

    for (uintptr_t at = first; at < end;) {
        size_t n = (end - at + page - 1) / page;
        n = n < HOLE_VECTOR ? n : HOLE_VECTOR;
        if (mincore((void *)at, n * page, vec) != 0)
            return B10_OK;
        for (size_t i = 0; i < n; i++) {
            uintptr_t pg = at + i * page;
            if ((vec[i] & 1) || hole_swapped(fd, first_off + (pg - first)))
                continue;
            *hole_p = pg < (uintptr_t)p ? p : (const uint8_t *)pg;
            return B10_ERR_NOT_POPULATED;
        }
        at += n * page;
    }
    return B10_OK;
}

const uint8_t *hole_first_absent(const uint8_t *p, size_t len)
{
    const uint8_t *hole = p;
    hole_check(-1, 0, p, len, &hole);
    return hole;
}
