/* picks.c — see picks.h. */
#include "picks.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>


uint64_t picks_grid_rows(const struct picks_grid *g)
{
    if (g->nbases == 0 || g->per_base == 0 || g->nbases > UINT32_MAX / g->per_base)
        return 0;
    return (uint64_t)g->nbases * g->per_base;
}

b10_status_t picks_grid_check(const struct picks_grid *g, size_t bases_len, const char *side,
                              char *detail, size_t detail_len)
{
    if (bases_len == 0 || bases_len % 8 != 0 || g->nbases != bases_len / 8 || g->per_base == 0 ||
        g->length == 0) {
        snprintf(detail, detail_len, "the %s grid needs whole u64 bases, rows per base and a "
                 "length, none of them 0", side);
        return B10_ERR_INVALID_ARG;
    }
    if (picks_grid_rows(g) == 0 || picks_grid_rows(g) > UINT32_MAX) {
        snprintf(detail, detail_len, "the %s grid has %zu bases of %" PRIu64 " rows: at most "
                 "2^32 - 1 rows", side, g->nbases, g->per_base);
        return B10_ERR_INVALID_ARG;
    }
    /* A base's last row ends at base + (per_base - 1) * stride + length: below 2^64. */
    uint64_t reach;
    if (__builtin_mul_overflow(g->per_base - 1, g->stride, &reach) ||
        __builtin_add_overflow(reach, g->length, &reach)) {
        snprintf(detail, detail_len, "the %s grid's rows reach past the address space", side);
        return B10_ERR_INVALID_ARG;
    }
    for (size_t b = 0; b < g->nbases; b++) {
        uint64_t base = frame_get_u64(g->bases + b * 8), end;
        if (__builtin_add_overflow(base, reach, &end)) {
            snprintf(detail, detail_len, "the %s grid's base %zu (0x%" PRIx64 ") has rows that "
                     "wrap around the address space", side, b, base);
            return B10_ERR_INVALID_ARG;
        }
    }
    return B10_OK;
}

b10_status_t picks_spans(const struct picks_grid *local, const struct picks_grid *remote,
                         const uint8_t *picks, size_t count, uint8_t *tables, char *detail,
                         size_t detail_len)
{
    if (local->length != remote->length) {
        snprintf(detail, detail_len, "the grids' rows are %" PRIu64 " and %" PRIu64 " bytes "
                 "long: a pair's spans must be as long", local->length, remote->length);
        return B10_ERR_INVALID_ARG;
    }
    struct picks_side l, r;
    picks_side_init(&l, local);
    picks_side_init(&r, remote);
    size_t table = count * SPAN_BYTES;
    const uint8_t *rpicks = picks + count * 4;
    for (size_t i = 0; i < count; i++) {
        uint32_t li = frame_get_u32(picks + i * 4), ri = frame_get_u32(rpicks + i * 4);
        if (li >= l.rows || ri >= r.rows) {
            bool bad_local = li >= l.rows;
            snprintf(detail, detail_len, "%s index %" PRIu32 " (at %zu) is outside its grid of "
                     "%" PRIu64 " rows", bad_local ? "local" : "remote", bad_local ? li : ri, i,
                     bad_local ? l.rows : r.rows);
            return B10_ERR_INVALID_ARG;
        }
        frame_put_u64(tables + i * SPAN_BYTES, picks_addr(&l, li));
        frame_put_u64(tables + i * SPAN_BYTES + 8, local->length);
        frame_put_u64(tables + table + i * SPAN_BYTES, picks_addr(&r, ri));
        frame_put_u64(tables + table + i * SPAN_BYTES + 8, remote->length);
    }
    return B10_OK;
}
