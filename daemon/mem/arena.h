/*
 * arena.h — a rank's span arena: a memfd that libb10 writes a large
 * request's span tables into and hands to the daemon once (SCM_RIGHTS), so
 * that a submit of 10^5 spans carries their count rather than 3.2 MB of
 * them through the socket (a frame read in 64 KiB turns, then decoded and
 * copied again). Everything in it is the client's to change at any moment:
 * arena_take reads a request's tables out, bounded, before anything looks
 * at them, and only that copy is checked and planned.
 *
 * Read with pread(2), never mapped: a mapping's read of a page the rank
 * never wrote (or punched out since) would make the page there and then,
 * charged to the daemon for as long as the rank keeps its memfd, and a
 * fault on a memfd of huge pages could raise SIGBUS; a read of a hole
 * copies zeros and makes nothing.
 */
#ifndef B10D_ARENA_H
#define B10D_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include "b10/b10.h"

struct arena {
    int fd;                         /* the rank's memfd, our own descriptor of it; -1: none */
    size_t length;                  /* bytes of it that are the arena: at most --max-frame */
};

/* No arena yet. */
void arena_init(struct arena *a);

/*
 * Take length bytes of the memfd fd (the caller keeps and closes fd; the
 * arena holds a descriptor of its own) as a's arena, in place of the one it
 * had. The memfd must be sealed against shrinking and hold length bytes;
 * length is 1..max. On failure a keeps its arena.
 */
b10_status_t arena_open(struct arena *a, int fd, uint64_t length, uint64_t max, char *detail,
                        size_t detail_len);

/*
 * Read a request's tables from the arena's first 2 * unit * count bytes
 * (count local entries, then count remote ones, unit bytes each: a span's
 * 16 as on the wire, or a picked row's u32 index) into *tables_p (malloc'd,
 * the caller's): B10_ERR_INVALID_ARG when count is 0 or they do not lie
 * inside the arena, B10_ERR_NO_MEMORY, B10_ERR_IO.
 */
b10_status_t arena_take(const struct arena *a, uint64_t count, size_t unit, uint8_t **tables_p,
                        char *detail, size_t detail_len);

/*
 * A second descriptor of a's arena in *copy (which holds none), so that
 * another thread may read it while a is replaced or closed: B10_OK, or
 * B10_ERR_INVALID_ARG when a has none, B10_ERR_BUSY out of descriptors.
 */
b10_status_t arena_dup(const struct arena *a, struct arena *copy);

/* Let it go; an arena that has none is accepted. */
void arena_close(struct arena *a);

#endif
