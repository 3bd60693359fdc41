/*
 * hole.h — whether the pages a copy is about to touch in the daemon's
 * mapping of a rank's memfd are the file's, or holes: asked before the copy
 * runs, for the mappings the guard could not take (guard.h).
 *
 * A page is the file's when the page cache holds it (mincore on the
 * mapping, whose cost follows the pages asked about, not the file) or when
 * it is swapped out, which mincore does not see and lseek's SEEK_DATA does
 * (a swap entry is data to shmem). SEEK_HOLE is never asked: it walks the
 * file from the offset to the next hole, 17 ms a GiB of data.
 *
 * Neither sees a page that was fallocated and never written: it counts as
 * a hole here, though filling it would cost the daemon nothing (the guard
 * lets it through). Nor a hole of a hugetlbfs memfd, whose lseek calls the
 * whole file data: only the guard refuses those.
 *
 * What this check cannot do is hold: a rank may punch a hole between the
 * check and the copy. That race is the guard's to close.
 */
#ifndef B10D_HOLE_H
#define B10D_HOLE_H

#include <stddef.h>
#include <stdint.h>

#include "b10/b10.h"

/*
 * Whether every page of [p, p + len) is one the file has, where p is the
 * daemon's address (in a mapping of fd, page-aligned to the file) of the
 * file's byte off: B10_OK, or B10_ERR_NOT_POPULATED with the address of the
 * first byte of [p, p + len) in a hole in *hole_p. fd's offset moves (its
 * own open file description, not the rank's); with fd -1, a page out of
 * the page cache counts as a hole. A range mincore cannot answer for (not
 * mapped) is the copy's to fail.
 */
b10_status_t hole_check(int fd, uint64_t off, const uint8_t *p, size_t len,
                        const uint8_t **hole_p);

/*
 * One mapping's pages as a copy is about to touch them, asked about at
 * once: hole_span_grow with each range the copy touches in it, then
 * hole_span_ask, then hole_span_check of each range again. Where the ranges
 * lie dense in their bounding pages (at most HOLE_SPREAD times the pages
 * they touch, and HOLE_SPAN_PAGES in all), one mincore answers for all of
 * them; else each range is asked about as hole_check does. A copy of 4 KiB
 * spans scattered over a GiB asked a mincore a span: 1.5 s a GiB on the
 * build machine, five times the copy's own time.
 */
#define HOLE_SPREAD 16
#define HOLE_SPAN_PAGES (1u << 20)      /* 4 GiB of 4 KiB pages: a vector of 1 MiB */

struct hole_span {
    int fd;
    uint64_t off;                       /* the file offset of base */
    const uint8_t *base;                /* in the mapping */
    const uint8_t *lo, *hi;             /* the ranges' bounding pages (lo NULL: none yet) */
    uint64_t bytes, ranges;             /* what the ranges touch */
    unsigned char *vec;                 /* mincore of [lo, hi), or NULL: range by range */
};

void hole_span_init(struct hole_span *s, int fd, uint64_t off, const uint8_t *base);
void hole_span_grow(struct hole_span *s, const uint8_t *p, size_t len);
/* Ask about the bounding pages at once, where they are dense (no memory: range by range). */
void hole_span_ask(struct hole_span *s);
/* As hole_check, for a range grown into s. */
b10_status_t hole_span_check(const struct hole_span *s, const uint8_t *p, size_t len,
                             const uint8_t **hole_p);
void hole_span_free(struct hole_span *s);

/*
 * Where in [p, p + len) a system call that failed EFAULT on a guarded
 * mapping met its hole: the first page the page cache does not hold (a
 * swapped-out one, which faults in, may come first), else p. The kernel
 * says only that the call failed, not where.
 */
const uint8_t *hole_first_absent(const uint8_t *p, size_t len);

#endif
