/*
 * fuzz-control — libFuzzer target for what a remote daemon sends: the peer
 * Msg unpack (HELLO, HELLO_ACK, CONTROL, READY, RESULT, CANCEL), and for a
 * CONTROL the receiver's plan_decode (or plan_decode_slots, for the compact
 * form) of its packed tables with the limits b10d uses (one staging view per
 * chunk, --max-control-bytes / SPAN_BYTES pieces). Raw tables are decoded
 * directly too, in both forms, so the fuzzer needs no protobuf.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "frame.h"
#include "peer.pb-c.h"
#include "plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_plan(const struct plan *p, uint64_t max_chunk, uint64_t total)
{
    uint64_t sum = 0;
    for (uint32_t c = 0; c < p->nchunks; c++) {
        const struct plan_chunk *ch = &p->chunks[c];
        uint64_t bytes = 0;
        if (ch->count == 0 || ch->first + ch->count > p->npieces || ch->bytes > max_chunk)
            abort();
        for (uint32_t k = ch->first; k < ch->first + ch->count; k++) {
            if (p->pieces[k].len == 0 || p->pieces[k].dst + p->pieces[k].len < p->pieces[k].dst)
                abort();
            bytes += p->pieces[k].len;
        }
        if (bytes != ch->bytes)
            abort();
        sum += bytes;
    }
    if (sum != total || p->total != total)
        abort();
}

static const uint64_t max_chunk = 4u << 20, max_pieces = (64u << 20) / SPAN_BYTES;

static void decode(const uint8_t *cp, size_t cl, const uint8_t *ps, size_t pl, uint32_t nchunks,
                   uint64_t total)
{
    struct plan *plan = NULL;
    char detail[256];

    if (plan_decode(cp, cl, ps, pl, nchunks, total, max_chunk, max_pieces, &plan, detail,
                    sizeof(detail)) == B10_OK) {
        check_plan(plan, max_chunk, total);
        plan_free(plan);
    }
}

static void decode_slots(const uint8_t *cp, size_t cl, const struct plan_slots *slots,
                         uint32_t nchunks, uint64_t total)
{
    struct plan *plan = NULL;
    char detail[256];

    if (plan_decode_slots(cp, cl, slots, nchunks, total, max_chunk, max_pieces, &plan, detail,
                          sizeof(detail)) == B10_OK) {
        check_plan(plan, max_chunk, total);
        /* No two pieces of a chunk left side by side: the decoder merges them. */
        for (uint32_t c = 0; c < plan->nchunks; c++)
            for (uint32_t k = plan->chunks[c].first + 1;
                 k < plan->chunks[c].first + plan->chunks[c].count; k++)
                if (plan->pieces[k - 1].dst + plan->pieces[k - 1].len == plan->pieces[k].dst)
                    abort();
        plan_free(plan);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    B10__Peer__Msg *m = b10__peer__msg__unpack(NULL, size, data);
    if (m != NULL) {
        if (m->body_case == B10__PEER__MSG__BODY_CONTROL) {
            const B10__Peer__Control *c = m->control;
            const struct plan_slots slots = { c->slot_base, c->slot_len, c->slots.data,
                                              c->slots.len };
            if (c->slot_len != 0)
                decode_slots(c->chunk_pieces.data, c->chunk_pieces.len, &slots, c->nchunks,
                             c->total_bytes);
            else
                decode(c->chunk_pieces.data, c->chunk_pieces.len, c->pieces.data, c->pieces.len,
                       c->nchunks, c->total_bytes);
        }
        b10__peer__msg__free_unpacked(m, NULL);
    }
    /* Raw: u32 nchunks, u64 total, u32 chunk table length, then the tables. */
    if (size >= 16) {
        uint32_t nchunks = frame_get_u32(data) % 4096;
        uint64_t total = frame_get_u64(data + 4) % (1u << 24);
        size_t cl = frame_get_u32(data + 12) % (size - 16 + 1);
        decode(data + 16, cl, data + 16 + cl, size - 16 - cl, nchunks, total);
    }
    /* Raw slots: the same header, then u64 base and u32 unit before the tables. */
    if (size >= 28) {
        uint32_t nchunks = frame_get_u32(data) % 4096;
        uint64_t total = frame_get_u64(data + 4) % (1u << 24);
        size_t cl = frame_get_u32(data + 12) % (size - 28 + 1);
        const struct plan_slots slots = { frame_get_u64(data + 16), frame_get_u32(data + 24),
                                          data + 28 + cl, size - 28 - cl };
        decode_slots(data + 28, cl, &slots, nchunks, total);
    }
    return 0;
}
