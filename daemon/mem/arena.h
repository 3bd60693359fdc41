/*
 * arena.h — a rank's span arena: a memfd that libb10 writes a large
 * request's span tables into and hands to the daemon once (SCM_RIGHTS), so
 * that a submit of 10^5 spans carries their count rather than 3.2 MB of
 * them through the socket (a frame read in 64 KiB turns, then decoded and
 * copied again). Everything in it is the client's to change at any moment:
 * arena_take copies a request's tables out, bounded, before anything reads
 * them, and only that copy is checked and planned.
 */
#ifndef B10D_ARENA_H
#define B10D_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include "b10/b10.h"

struct arena {
    const uint8_t *map;             /* read-only, shared with the rank; NULL: none */
    size_t length;                  /* bytes mapped: at most the rank's --max-frame */
};

/*
 * Map length bytes of the memfd fd (the caller keeps and closes fd) as a's
 * arena, in place of the one it had. The memfd must be sealed against
 * shrinking (else the rank could cut it under the daemon's reads: SIGBUS)
 * and hold length bytes; length is 1..max. On failure a keeps its arena.
 */
b10_status_t arena_open(struct arena *a, int fd, uint64_t length, uint64_t max, char *detail,
                        size_t detail_len);

/*
 * Copy a request's tables out of the arena's first 32 * count bytes (count
 * local spans, then count remote ones, 16 bytes a span as on the wire) into
 * *tables_p (malloc'd, the caller's): B10_ERR_INVALID_ARG when count is 0
 * or they do not lie inside length bytes, B10_ERR_NO_MEMORY.
 */
b10_status_t arena_take(const uint8_t *map, size_t length, uint64_t count, uint8_t **tables_p,
                        char *detail, size_t detail_len);

/*
 * Before arena_take, on the memfd's mapping: B10_ERR_INVALID_ARG when the
 * tables of count spans reach a page of the memfd that the rank never
 * wrote. Reading it would make that page, charged to the daemon for as
 * long as the rank keeps its memfd: memory the rank never paid for. (A page
 * swapped out reads as not written too; libb10 writes the tables just
 * before it submits them.)
 */
b10_status_t arena_check_written(const uint8_t *map, size_t length, uint64_t count, char *detail,
                                 size_t detail_len);

/* Unmap it; a zeroed or closed arena is accepted. */
void arena_close(struct arena *a);

#endif
