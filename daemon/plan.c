/* plan.c — see plan.h. */
#include "plan.h"

#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"

#define SPAN_BYTES 16

struct plan_span {
    uint64_t src, dst, len;
    uint32_t index;  /* position in the request, for error messages */
};

/*
 * Sort spans by the 64-bit field at key (src or dst), stably: spans of equal
 * keys stay in request order. A request of KV blocks holds up to a million
 * spans, and planning runs on the loop thread at both ends of every transfer,
 * so this is a radix sort (byte digits; a digit every key shares is skipped,
 * as are requests already in order), not qsort's callbacks: 82k spans took
 * 27 ms that way, several percent of a 2.5 GiB transfer.
 */
static uint64_t plan_key(const struct plan_span *s, size_t key)
{
    return *(const uint64_t *)((const char *)s + key);
}

/* Returns false when the spans were in order already (and were left alone). */
static bool plan_sort(struct plan_span *spans, struct plan_span *tmp, size_t n, size_t key)
{
    bool sorted = true;
    uint64_t all_or = 0, all_and = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        uint64_t k = plan_key(&spans[i], key);
        if (i > 0 && k < plan_key(&spans[i - 1], key))
            sorted = false;
        all_or |= k;
        all_and &= k;
    }
    if (sorted)
        return false;
    struct plan_span *from = spans, *to = tmp;
    for (unsigned shift = 0; shift < 64; shift += 8) {
        /* Every key has the same byte here: this pass would keep the order. */
        if (((all_or ^ all_and) >> shift & 0xff) == 0)
            continue;
        size_t count[256] = { 0 };
        for (size_t i = 0; i < n; i++)
            count[plan_key(&from[i], key) >> shift & 0xff]++;
        size_t at = 0;
        for (unsigned b = 0; b < 256; b++) {
            size_t c = count[b];
            count[b] = at;
            at += c;
        }
        for (size_t i = 0; i < n; i++)
            to[count[plan_key(&from[i], key) >> shift & 0xff]++] = from[i];
        struct plan_span *swap = from;
        from = to;
        to = swap;
    }
    if (from != spans)
        memcpy(spans, from, n * sizeof(*spans));
    return true;
}

void plan_free(struct plan *plan)
{
    if (plan == NULL)
        return;
    free(plan->pieces);
    free(plan->chunks);
    free(plan);
}

static struct plan *plan_alloc(size_t max_pieces, size_t max_chunks)
{
    struct plan *plan = calloc(1, sizeof(*plan));
    if (plan == NULL)
        return NULL;
    plan->pieces = malloc(max_pieces * sizeof(*plan->pieces));
    plan->chunks = malloc(max_chunks * sizeof(*plan->chunks));
    if (plan->pieces == NULL || plan->chunks == NULL) {
        plan_free(plan);
        return NULL;
    }
    return plan;
}

/*
 * Check the request's spans and sort them by source, merged where contiguous
 * on both sides. tmp holds count spans of scratch.
 */
static b10_status_t plan_read_spans(const uint8_t *src_spans, const uint8_t *dst_spans,
                                    size_t count, struct plan_span *spans, struct plan_span *tmp,
                                    size_t *nmerged_p, char *detail, size_t detail_len)
{
    for (size_t i = 0; i < count; i++) {
        struct plan_span *s = &spans[i];
        uint64_t dlen = frame_get_u64(dst_spans + i * SPAN_BYTES + 8);

        s->src = frame_get_u64(src_spans + i * SPAN_BYTES);
        s->len = frame_get_u64(src_spans + i * SPAN_BYTES + 8);
        s->dst = frame_get_u64(dst_spans + i * SPAN_BYTES);
        s->index = (uint32_t)i;
        if (s->len == 0 || s->len != dlen) {
            snprintf(detail, detail_len, "span %zu: lengths %" PRIu64 " and %" PRIu64
                     " must be equal and non-zero", i, s->len, dlen);
            return B10_ERR_INVALID_ARG;
        }
        if (s->src + s->len < s->src || s->dst + s->len < s->dst) {
            snprintf(detail, detail_len, "span %zu wraps the address space", i);
            return B10_ERR_INVALID_ARG;
        }
    }

    /* Two spans writing the same destination byte make the result depend on order. */
    bool moved = plan_sort(spans, tmp, count, offsetof(struct plan_span, dst));
    for (size_t i = 1; i < count; i++) {
        if (spans[i].dst < spans[i - 1].dst + spans[i - 1].len) {
            snprintf(detail, detail_len, "destination spans %u and %u overlap",
                     spans[i - 1].index, spans[i].index);
            return B10_ERR_INVALID_ARG;
        }
    }

    /* Back to request order, then by source: equal sources keep request order. */
    if (moved) {
        for (size_t i = 0; i < count; i++)
            tmp[spans[i].index] = spans[i];
        memcpy(spans, tmp, count * sizeof(*spans));
    }
    plan_sort(spans, tmp, count, offsetof(struct plan_span, src));
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        if (n > 0) {
            struct plan_span *last = &spans[n - 1];
            if (last->src + last->len == spans[i].src && last->dst + last->len == spans[i].dst) {
                last->len += spans[i].len;
                continue;
            }
        }
        spans[n++] = spans[i];
    }
    *nmerged_p = n;
    return B10_OK;
}

/* Pack spans, in order, into chunks of at most max_chunk bytes, splitting where a chunk fills. */
static b10_status_t plan_pack(const struct plan_span *spans, size_t n, uint64_t max_chunk,
                              struct plan **plan_p, char *detail, size_t detail_len)
{
    struct plan *plan;
    b10_status_t status;

    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (total + spans[i].len < total) {
            snprintf(detail, detail_len, "transfer length overflows 64 bits");
            status = B10_ERR_TOO_LARGE;
            return status;
        }
        total += spans[i].len;
    }
    /* Each split adds at most one chunk. Both terms are bounded first, so no sum wraps. */
    uint64_t full = total / max_chunk;
    if (full > UINT32_MAX || n > UINT32_MAX || full + 2 * (uint64_t)n > UINT32_MAX) {
        snprintf(detail, detail_len, "transfer of %" PRIu64 " bytes needs too many chunks", total);
        return B10_ERR_TOO_LARGE;
    }
    uint64_t max_chunks = full + n;
    /* A piece is split once per chunk boundary it crosses: at most one extra piece per chunk. */
    plan = plan_alloc(n + max_chunks, max_chunks);
    if (plan == NULL)
        return B10_ERR_NO_MEMORY;

    struct plan_chunk *chunk = NULL;
    for (size_t i = 0; i < n; i++) {
        uint64_t src = spans[i].src, dst = spans[i].dst, left = spans[i].len;
        while (left > 0) {
            if (chunk == NULL || chunk->bytes == max_chunk) {
                chunk = &plan->chunks[plan->nchunks++];
                chunk->first = plan->npieces;
                chunk->count = 0;
                chunk->bytes = 0;
            }
            uint64_t room = max_chunk - chunk->bytes;
            uint64_t take = left < room ? left : room;
            plan->pieces[plan->npieces++] = (struct plan_piece){ src, dst, take };
            chunk->count++;
            chunk->bytes += take;
            src += take;
            dst += take;
            left -= take;
        }
    }
    plan->total = total;
    *plan_p = plan;
    return B10_OK;
}

b10_status_t plan_build(const uint8_t *src_spans, const uint8_t *dst_spans, size_t count,
                        uint64_t max_chunk, struct plan **plan_p, char *detail, size_t detail_len)
{
    struct plan_span *spans = NULL;
    struct plan *plan = NULL;
    b10_status_t status;
    size_t n;

    if (count == 0 || count > UINT32_MAX / 2) {
        snprintf(detail, detail_len, "a transfer needs 1..%u spans", UINT32_MAX / 2);
        return B10_ERR_INVALID_ARG;
    }
    if (max_chunk == 0) {
        snprintf(detail, detail_len, "chunks of 0 bytes");
        return B10_ERR_INVALID_ARG;
    }
    /* The spans, then as many of scratch for sorting them. */
    spans = malloc(2 * count * sizeof(*spans));
    if (spans == NULL)
        return B10_ERR_NO_MEMORY;
    status = plan_read_spans(src_spans, dst_spans, count, spans, spans + count, &n, detail,
                             detail_len);
    if (status != B10_OK)
        goto out;

    status = plan_pack(spans, n, max_chunk, &plan, detail, detail_len);
    if (status != B10_OK)
        goto out;
    *plan_p = plan;
    plan = NULL;
out:
    plan_free(plan);
    free(spans);
    return status;
}

b10_status_t plan_rechunk(struct plan *plan, uint64_t max_chunk)
{
    struct plan_span *spans = malloc((plan->npieces ? plan->npieces : 1) * sizeof(*spans));
    struct plan *packed = NULL;
    char detail[128];
    size_t n = 0;

    if (spans == NULL)
        return B10_ERR_NO_MEMORY;
    /* Undo the splits at the old chunk boundaries, then pack again. */
    for (uint32_t i = 0; i < plan->npieces; i++) {
        const struct plan_piece *p = &plan->pieces[i];
        if (n > 0 && spans[n - 1].src + spans[n - 1].len == p->src &&
            spans[n - 1].dst + spans[n - 1].len == p->dst) {
            spans[n - 1].len += p->len;
            continue;
        }
        spans[n++] = (struct plan_span){ p->src, p->dst, p->len, i };
    }
    b10_status_t status = plan_pack(spans, n, max_chunk, &packed, detail, sizeof(detail));
    free(spans);
    if (status != B10_OK)
        return status;
    free(plan->pieces);
    free(plan->chunks);
    *plan = *packed;
    free(packed);
    return B10_OK;
}

int plan_encode(const struct plan *plan, uint8_t **chunk_pieces_p, size_t *chunk_len_p,
                uint8_t **pieces_p, size_t *pieces_len_p)
{
    size_t chunk_len = (size_t)plan->nchunks * 4;
    size_t pieces_len = (size_t)plan->npieces * SPAN_BYTES;
    uint8_t *chunk_pieces = malloc(chunk_len ? chunk_len : 1);
    uint8_t *pieces = malloc(pieces_len ? pieces_len : 1);

    if (chunk_pieces == NULL || pieces == NULL) {
        free(chunk_pieces);
        free(pieces);
        return -ENOMEM;
    }
    for (uint32_t c = 0; c < plan->nchunks; c++)
        frame_put_u32(chunk_pieces + 4 * c, plan->chunks[c].count);
    for (uint32_t p = 0; p < plan->npieces; p++) {
        frame_put_u64(pieces + SPAN_BYTES * p, plan->pieces[p].dst);
        frame_put_u64(pieces + SPAN_BYTES * p + 8, plan->pieces[p].len);
    }
    *chunk_pieces_p = chunk_pieces;
    *chunk_len_p = chunk_len;
    *pieces_p = pieces;
    *pieces_len_p = pieces_len;
    return 0;
}

b10_status_t plan_decode(const uint8_t *chunk_pieces, size_t chunk_len, const uint8_t *pieces,
                         size_t pieces_len, uint32_t nchunks, uint64_t total, uint64_t max_chunk,
                         uint64_t max_pieces, struct plan **plan_p, char *detail, size_t detail_len)
{
    if (nchunks == 0 || chunk_len != (size_t)nchunks * 4 || pieces_len % SPAN_BYTES != 0) {
        snprintf(detail, detail_len, "control tables malformed: %u chunks, %zu and %zu bytes",
                 nchunks, chunk_len, pieces_len);
        return B10_ERR_PEER_PROTOCOL;
    }
    size_t npieces = pieces_len / SPAN_BYTES;
    if (npieces > max_pieces || npieces > UINT32_MAX || npieces < nchunks) {
        snprintf(detail, detail_len, "control carries %zu pieces (limit %" PRIu64 ")", npieces,
                 max_pieces);
        return npieces > max_pieces ? B10_ERR_TOO_LARGE : B10_ERR_PEER_PROTOCOL;
    }
    struct plan *plan = plan_alloc(npieces, nchunks);
    if (plan == NULL)
        return B10_ERR_NO_MEMORY;

    uint64_t sum = 0;
    size_t p = 0;
    for (uint32_t c = 0; c < nchunks; c++) {
        uint32_t count = frame_get_u32(chunk_pieces + 4 * c);
        struct plan_chunk *chunk = &plan->chunks[c];
        if (count == 0 || count > npieces - p) {
            snprintf(detail, detail_len, "chunk %u claims %u pieces", c, count);
            goto bad;
        }
        *chunk = (struct plan_chunk){ (uint32_t)p, count, 0 };
        for (uint32_t k = 0; k < count; k++, p++) {
            uint64_t dst = frame_get_u64(pieces + SPAN_BYTES * p);
            uint64_t len = frame_get_u64(pieces + SPAN_BYTES * p + 8);
            if (len == 0 || dst + len < dst || len > max_chunk - chunk->bytes) {
                snprintf(detail, detail_len, "chunk %u piece %u: bad length %" PRIu64, c, k, len);
                goto bad;
            }
            plan->pieces[p] = (struct plan_piece){ 0, dst, len };
            chunk->bytes += len;
        }
        sum += chunk->bytes;
    }
    if (p != npieces || sum != total) {
        snprintf(detail, detail_len, "control pieces add up to %" PRIu64 " bytes in %zu pieces, "
                 "not %" PRIu64 " in %zu", sum, p, total, npieces);
        goto bad;
    }
    plan->npieces = (uint32_t)npieces;
    plan->nchunks = nchunks;
    plan->total = total;
    *plan_p = plan;
    return B10_OK;
bad:
    plan_free(plan);
    return B10_ERR_PEER_PROTOCOL;
}
