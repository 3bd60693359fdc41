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
 * Where in [p, p + len) a system call that failed EFAULT on a guarded
 * mapping met its hole: the first page the page cache does not hold (a
 * swapped-out one, which faults in, may come first), else p. The kernel
 * says only that the call failed, not where.
 */
const uint8_t *hole_first_absent(const uint8_t *p, size_t len);

#endif
