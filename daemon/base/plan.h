/*
 * plan.h — how a WRITE's spans become DATA chunks. Pure data, no I/O.
 *
 * The sender sorts the request's pieces by source address, merges runs that
 * are contiguous on both sides, and packs them in order into chunks of at
 * most one staging view; a piece larger than the room left is split. The
 * receiver rebuilds the same chunk table (destination side only) from the
 * CONTROL message, checking every count and bound on the way.
 */
#ifndef B10D_PLAN_H
#define B10D_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "b10/b10.h"

struct plan_piece {
    uint64_t src;   /* address in the sending rank (0 on the receiver) */
    uint64_t dst;   /* address in the receiving rank */
    uint64_t len;   /* bytes */
};

struct plan_chunk {
    uint32_t first;  /* index of its first piece */
    uint32_t count;  /* pieces */
    uint64_t bytes;  /* sum of their lengths: the DATA message size */
};

struct plan {
    struct plan_piece *pieces;
    uint32_t npieces;
    struct plan_chunk *chunks;
    uint32_t nchunks;
    uint64_t total;  /* bytes */
};

/*
 * Build the sender's plan from count (src, dst, len) triples given as two
 * packed little-endian span tables (16 bytes a span, as on the client wire).
 * Rejects zero lengths, mismatched lengths, address overflow and overlapping
 * destinations with B10_ERR_INVALID_ARG and a detail naming the span.
 */
b10_status_t plan_build(const uint8_t *src_spans, const uint8_t *dst_spans, size_t count,
                        uint64_t max_chunk, struct plan **plan_p, char *detail, size_t detail_len);

struct picks_grid;

/*
 * plan_build of the spans picks_spans (picks.h) would write from count
 * source and destination row indices (little-endian u32s) into two checked
 * grids, made from the indices themselves: the same plan, for grids whose
 * rows lie in address order once their bases are sorted (no row overlaps
 * another, as a KV pool's blocks). B10_ERR_UNSUPPORTED for any other
 * request, whether grids of another shape or one plan_build refuses (an
 * index outside its grid, a destination picked twice): make the spans and
 * plan_build them, which names the reason. B10_ERR_NO_MEMORY.
 */
b10_status_t plan_build_picks(const struct picks_grid *src, const struct picks_grid *dst,
                              const uint8_t *src_picks, const uint8_t *dst_picks, size_t count,
                              uint64_t max_chunk, struct plan **plan_p);

/*
 * The checks a copy of rows picked from two checked grids needs where it
 * takes the picks as they are, with no plan (the GPU's grid copy, gpu-copy.h):
 * grids of one length, every index inside its grid, no two destination rows
 * overlapping, none picked twice. The picks go out as count (source row,
 * destination row) pairs into pairs (2 * count u32s). B10_ERR_UNSUPPORTED
 * for anything else, as plan_build_picks: the planners decide, and name
 * what is wrong; and for grids of more than PLAN_GRID_BASES bases, or whose
 * destination rows are many beside the picks (more than 64 a pick and 2^24
 * in all). B10_ERR_NO_MEMORY.
 */
#define PLAN_GRID_BASES 1024
b10_status_t plan_grid_pairs(const struct picks_grid *src, const struct picks_grid *dst,
                             const uint8_t *src_picks, const uint8_t *dst_picks, size_t count,
                             uint32_t *pairs);

/*
 * The plan of such a copy: count rows of len bytes, in chunks of at most
 * per_chunk rows in the picks' order. It holds no pieces: chunk c's first
 * and count are picks, and npieces counts them. NULL without memory or for
 * counts out of bounds (none, 2^32 or more, a total past 2^64).
 */
struct plan *plan_rows(size_t count, uint64_t len, uint32_t per_chunk);

/*
 * plan_build_picks' plan, packed a part at a time, so that a transfer's
 * first copies can start while the rest is packed. plan_picker_new does
 * all plan_build_picks does but the packing: every check (B10_ERR_UNSUPPORTED
 * for all it leaves to the spans, B10_ERR_NO_MEMORY) and the picks' source
 * order; it hands back the plan the picker fills, its total set, no chunk
 * yet. It keeps what it needs of the grids and the picks: the caller's
 * may go. plan_picker_next packs the next picks, at most n, in that order,
 * and cannot fail: the whole plan is plan_build_picks' piece for piece. The chunks before plan_picker_sealed are final; the last may
 * still grow until plan_picker_done. Freeing the picker leaves the plan to
 * its owner.
 */
struct plan_picker;
b10_status_t plan_picker_new(const struct picks_grid *src, const struct picks_grid *dst,
                             const uint8_t *src_picks, const uint8_t *dst_picks, size_t count,
                             uint64_t max_chunk, struct plan_picker **picker_p,
                             struct plan **plan_p);
void plan_picker_next(struct plan_picker *pp, size_t n);
bool plan_picker_done(const struct plan_picker *pp);
/* The chunks the whole plan will have: every one full but the last. */
uint32_t plan_picker_chunks(const struct plan_picker *pp);
uint32_t plan_picker_sealed(const struct plan_picker *pp);
void plan_picker_free(struct plan_picker *pp);

/*
 * Encode the destination side for CONTROL: chunk_pieces (u32 per chunk) and
 * pieces (u64 dst, u64 len per piece), both malloc'd. B10_ERR_NO_MEMORY
 * without them.
 */
b10_status_t plan_encode(const struct plan *plan, uint8_t **chunk_pieces_p, size_t *chunk_len_p,
                         uint8_t **pieces_p, size_t *pieces_len_p);

/*
 * CONTROL's compact form of the destination side, for a plan whose pieces
 * are whole units (the shortest piece's length) at whole units from the
 * lowest destination, as a KV request's blocks are: each unit of each
 * piece is 4 bytes, its slot (below 2^32), where the full form
 * (plan_encode) takes 16 a piece, so a request of 100,000 blocks seals,
 * sends and opens 0.4 MB, not 1.6. A piece of k units (a run the sender
 * merged) is k slots in a row, which the receiver merges again; the chunk
 * table counts slots.
 */
struct plan_slots {
    uint64_t base;              /* the lowest destination: slot 0's */
    uint64_t len;               /* the unit: every slot's bytes */
    const uint8_t *slots;       /* u32 a unit, its slot */
    size_t slots_len;           /* bytes of slots */
};

/*
 * Encode the plan in the compact form, with its chunk table (both malloc'd:
 * slots_p->slots and *chunk_pieces_p). B10_ERR_UNSUPPORTED: the plan is not
 * of that shape, or its merged runs make it no smaller than the full form
 * (plan_encode it); B10_ERR_NO_MEMORY.
 */
b10_status_t plan_encode_slots(const struct plan *plan, struct plan_slots *slots_p,
                               uint8_t **chunk_pieces_p, size_t *chunk_len_p);

/*
 * Rebuild the receiver's plan from CONTROL's tables, trusting nothing:
 * counts must agree, no chunk may exceed max_chunk, pieces must be
 * non-empty and not wrap, and the bytes must add up to total.
 */
b10_status_t plan_decode(const uint8_t *chunk_pieces, size_t chunk_len, const uint8_t *pieces,
                         size_t pieces_len, uint32_t nchunks, uint64_t total, uint64_t max_chunk,
                         uint64_t max_pieces, struct plan **plan_p, char *detail, size_t detail_len);

/*
 * plan_decode of the compact form: the same checks, a unit of 1..max_chunk
 * bytes (below 2^32), no slot's piece past the top of the address space;
 * slots side by side in one chunk become one piece, so the plan may hold
 * fewer pieces than the slots.
 */
b10_status_t plan_decode_slots(const uint8_t *chunk_pieces, size_t chunk_len,
                               const struct plan_slots *slots, uint32_t nchunks, uint64_t total,
                               uint64_t max_chunk, uint64_t max_pieces, struct plan **plan_p,
                               char *detail, size_t detail_len);

/* Pack the plan again into chunks of at most max_chunk bytes (the peer's views may be smaller). */
b10_status_t plan_rechunk(struct plan *plan, uint64_t max_chunk);

/*
 * Does inner write only what outer's destinations hold: the same number of
 * bytes, each piece inside outer's destination pieces? A write-back that
 * serves a READ must, or it writes where the reading rank did not ask.
 */
bool plan_covers(const struct plan *outer, const struct plan *inner);

void plan_free(struct plan *plan);

#endif
