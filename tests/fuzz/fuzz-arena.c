/*
 * fuzz-arena — libFuzzer target for a submit whose spans lie in the rank's
 * span arena (daemon/mem/arena.c): the count from the frame and the arena's
 * bytes are both the rank's. The first 8 input bytes are the count, 4 more
 * the chunk size the plan packs into (a view: a multiple of 64 KiB, the
 * least --view-bytes, up to the default 4 MiB); the rest is the arena.
 *
 * arena_take must read nothing outside the arena, whatever the count, and
 * hand over exactly 32 bytes a span; plan_build then reads those tables as
 * session.c gives them to the engine, once the engine's own bound on a
 * request's bytes held (--max-xfer-bytes, 256 GiB by default: plan_build
 * sizes its chunk table by it), and what it plans must add up: every chunk
 * within its size, the pieces' bytes the chunks', the total theirs.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arena-input.h"
#include "frame.h"
#include "plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 12)
        return 0;
    uint64_t count = frame_get_u64(data);
    uint64_t max_chunk = ((uint64_t)frame_get_u32(data + 8) % 64 + 1) * (64u << 10);
    size_t length = size - 12;
    const uint8_t *map = data + 12;
    uint8_t *tables = NULL;
    char detail[256];
    b10_status_t st = arena_input_take(map, length, count, SPAN_BYTES, &tables);
    if (st == B10_OK) {
        if (count == 0 || count * 2 * SPAN_BYTES > length ||
            memcmp(tables, map, count * 2 * SPAN_BYTES) != 0)
            abort();
        /* xfer_check_local's bound on the local spans' bytes, which comes first there. */
        uint64_t bytes = 0;
        bool bounded = true;
        for (uint64_t i = 0; i < count && bounded; i++) {
            uint64_t len = frame_get_u64(tables + i * SPAN_BYTES + 8);
            bounded = len <= (UINT64_C(256) << 30) - bytes;
            bytes += bounded ? len : 0;
        }
        struct plan *plan = NULL;
        if (bounded && plan_build(tables, tables + count * SPAN_BYTES, count, max_chunk, &plan,
                                  detail, sizeof(detail)) == B10_OK) {
            uint64_t total = 0;
            for (uint32_t c = 0; c < plan->nchunks; c++) {
                const struct plan_chunk *ch = &plan->chunks[c];
                uint64_t bytes = 0;
                if (ch->bytes == 0 || ch->bytes > max_chunk || ch->count == 0 ||
                    ch->first + ch->count > plan->npieces)
                    abort();
                for (uint32_t p = ch->first; p < ch->first + ch->count; p++)
                    bytes += plan->pieces[p].len;
                if (bytes != ch->bytes)
                    abort();
                total += bytes;
            }
            if (total != plan->total)
                abort();
            plan_free(plan);
        }
        free(tables);
    } else if (tables != NULL) {
        abort();
    }
    return 0;
}
