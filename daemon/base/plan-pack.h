/*
 * plan-pack.h — the packing both planners share (plan.c from spans,
 * plan-picks.c from rows picked from grids): pieces walked in source
 * order, merged where contiguous on both sides, cut into chunks. Internal
 * to daemon/base.
 */
#ifndef B10D_PLAN_PACK_H
#define B10D_PLAN_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "plan.h"

/* A plan of room for max_pieces and max_chunks, none used; NULL without memory. */
struct plan *plan_alloc(size_t max_pieces, size_t max_chunks);

/* Give back much unused room of a plan made by plan_alloc with these bounds. */
void plan_trim(struct plan *plan, uint64_t max_pieces, uint64_t max_chunks);

/*
 * One stable pass of a least-significant-digit radix sort: n 64-bit records
 * from from to to by their digit at shift (mask wide). counts holds how many
 * records have each digit, counted beforehand; the pass uses it up.
 */
static inline void plan_radix_pass(const uint64_t *from, uint64_t *to, size_t n, unsigned shift,
                                   uint64_t mask, uint32_t *counts)
{
    uint32_t at = 0;
    for (uint64_t b = 0; b <= mask; b++) {
        uint32_t k = counts[b];
        counts[b] = at;
        at += k;
    }
    for (size_t i = 0; i < n; i++)
        to[counts[from[i] >> shift & mask]++] = from[i];
}

/* A plan being packed: chunk after chunk, piece after piece. */
struct plan_packer {
    struct plan *plan;
    struct plan_chunk *chunk;   /* the chunk being filled; NULL before the first */
    struct plan_piece *last;    /* its last piece */
    uint64_t max_chunk;
};

/*
 * Add len bytes from src to dst. Contiguous with the last piece on both
 * sides, they extend it; a piece is split where a chunk fills.
 */
static inline void plan_pack_add(struct plan_packer *pk, uint64_t src, uint64_t dst, uint64_t left)
{
    struct plan *plan = pk->plan;
    while (left > 0) {
        if (pk->chunk == NULL || pk->chunk->bytes == pk->max_chunk) {
            pk->chunk = &plan->chunks[plan->nchunks++];
            *pk->chunk = (struct plan_chunk){ plan->npieces, 0, 0 };
            pk->last = NULL;
        }
        uint64_t room = pk->max_chunk - pk->chunk->bytes;
        uint64_t take = left < room ? left : room;
        struct plan_piece *last = pk->last;
        if (last != NULL && last->src + last->len == src && last->dst + last->len == dst) {
            last->len += take;
        } else {
            pk->last = &plan->pieces[plan->npieces++];
            *pk->last = (struct plan_piece){ src, dst, take };
            pk->chunk->count++;
        }
        pk->chunk->bytes += take;
        src += take;
        dst += take;
        left -= take;
    }
}

#endif
