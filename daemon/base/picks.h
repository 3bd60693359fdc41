/*
 * picks.h — a request's spans as rows picked from two grids. Pure data, no I/O.
 *
 * A KV pool's blocks are a grid: a base per layer's K or V region, a row per
 * block at a fixed stride, one length. A rank that posts 10^5 blocks then
 * sends the two grids once and a u32 index a row (0.8 MB), not 10^5 spans
 * each way (3.2 MB), and libb10 and the daemon each make one pass over the
 * indices. Everything here is the rank's claim: each grid is checked whole
 * (no row past the top of the address space, fewer than 2^32 rows), then
 * each index against its grid, while the spans are written out.
 */
#ifndef B10D_PICKS_H
#define B10D_PICKS_H

#include <stddef.h>
#include <stdint.h>

#include "b10/b10.h"
#include "frame.h"

struct picks_grid {
    const uint8_t *bases;   /* nbases packed little-endian u64 */
    size_t nbases;
    uint64_t per_base;
    uint64_t stride;
    uint64_t length;
};

/* Rows a grid has: 0 when it is refused by picks_grid_check. */
uint64_t picks_grid_rows(const struct picks_grid *g);

/* A checked grid's row arithmetic: row k's base found by a multiply, not a divide. */
struct picks_side {
    const struct picks_grid *g;
    uint64_t rows;
    uint64_t magic;     /* floor(2^64 / per_base) + 1: k * magic >> 64 == k / per_base */
};

static inline void picks_side_init(struct picks_side *s, const struct picks_grid *g)
{
    s->g = g;
    s->rows = picks_grid_rows(g);
    s->magic = g->per_base > 1 ? UINT64_MAX / g->per_base + 1 : 0;
}

/* k / per_base, for k < rows (below 2^32: the product's high word is exact). */
static inline uint64_t picks_base_of(const struct picks_side *s, uint64_t k)
{
    return s->magic != 0 ? (uint64_t)(((unsigned __int128)s->magic * k) >> 64) : k;
}

/* Row k's address. */
static inline uint64_t picks_addr(const struct picks_side *s, uint64_t k)
{
    uint64_t b = picks_base_of(s, k);
    return frame_get_u64(s->g->bases + b * 8) + (k - b * s->g->per_base) * s->g->stride;
}

/*
 * B10_OK, or B10_ERR_INVALID_ARG with a detail naming side ("local",
 * "remote"): no bases, a count of bases that is not whole u64s, a zero per
 * base or length, 2^32 rows or more, a row that wraps the address space.
 * bases_len is the bytes of bases as received.
 */
b10_status_t picks_grid_check(const struct picks_grid *g, size_t bases_len, const char *side,
                              char *detail, size_t detail_len);

/*
 * Write count spans each way into tables (2 * count * SPAN_BYTES bytes: the
 * local table, then the remote one, as a request carries them) from picks:
 * count little-endian u32 local row indices, then count remote ones. Both
 * grids checked already. B10_ERR_INVALID_ARG, naming the first index outside
 * its grid, or for grids of different lengths.
 */
b10_status_t picks_spans(const struct picks_grid *local, const struct picks_grid *remote,
                         const uint8_t *picks, size_t count, uint8_t *tables, char *detail,
                         size_t detail_len);

#endif
