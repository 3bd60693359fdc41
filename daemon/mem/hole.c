/* hole.c — see hole.h. */
#include "hole.h"

#include <errno.h>
#include <stdlib.h>
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

void hole_span_init(struct hole_span *s, int fd, uint64_t off, const uint8_t *base)
{
    *s = (struct hole_span){ .fd = fd, .off = off, .base = base };
}

void hole_span_grow(struct hole_span *s, const uint8_t *p, size_t len)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uint8_t *lo = (const uint8_t *)((uintptr_t)p & ~(page - 1));
    const uint8_t *hi = (const uint8_t *)(((uintptr_t)p + len + page - 1) & ~(page - 1));
    if (s->lo == NULL || lo < s->lo)
        s->lo = lo;
    if (hi > s->hi)
        s->hi = hi;
    s->bytes += len;
    s->ranges++;
}

void hole_span_ask(struct hole_span *s)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (s->lo == NULL)
        return;
    size_t pages = (size_t)(s->hi - s->lo) / page;
    uint64_t touched = s->bytes / page + s->ranges;
    if (pages > HOLE_SPAN_PAGES || pages > HOLE_SPREAD * touched)
        return;
    s->vec = malloc(pages);
    if (s->vec != NULL && mincore((void *)s->lo, pages * page, s->vec) != 0) {
        free(s->vec);
        s->vec = NULL;
    }
}

b10_status_t hole_span_check(const struct hole_span *s, const uint8_t *p, size_t len,
                             const uint8_t **hole_p)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    if (s->vec == NULL)
        return hole_check(s->fd, s->off + (uint64_t)(p - s->base), p, len, hole_p);
    for (uintptr_t pg = (uintptr_t)p & ~(page - 1); pg < (uintptr_t)p + len; pg += page) {
        if ((s->vec[(pg - (uintptr_t)s->lo) / page] & 1) ||
            hole_swapped(s->fd, s->off + (uint64_t)((const uint8_t *)pg - s->base)))
            continue;
        *hole_p = pg < (uintptr_t)p ? p : (const uint8_t *)pg;
        return B10_ERR_NOT_POPULATED;
    }
    return B10_OK;
}

void hole_span_free(struct hole_span *s)
{
    free(s->vec);
    s->vec = NULL;
}
