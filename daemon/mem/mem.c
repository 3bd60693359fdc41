/* mem.c — see mem.h. */
#include "mem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "log.h"

void mem_table_init(struct mem_table *t, uint32_t limit, uint64_t max_bytes)
{
    memset(t, 0, sizeof(*t));
    t->limit = limit;
    t->max_bytes = max_bytes;
}

void region_ref(struct region *r)
{
    r->refs++;
}

void region_unref(struct region *r)
{
    if (r == NULL)
        return;
    if (--r->refs == 1 && r->on_idle != NULL) {
        void (*idle)(void *) = r->on_idle;
        r->on_idle = NULL;
        idle(r->idle_arg);
        return;
    }
    if (r->refs > 0)
        return;
    log_debug("region %" PRIu64 " unmapped (%" PRIu64 " bytes)", r->id, r->length);
    r->backend->close(r);
    free(r);
}

void mem_table_clear(struct mem_table *t)
{
    for (uint32_t i = 0; i < t->count; i++)
        region_unref(t->regions[i]);
    free(t->regions);
    memset(t, 0, sizeof(*t));
}

/* Index of the first region whose end lies beyond addr. */
static uint32_t mem_table_search(const struct mem_table *t, uint64_t addr)
{
    uint32_t lo = 0, hi = t->count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const struct region *r = t->regions[mid];
        if (r->addr + r->length <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static const struct mem_backend *mem_backend_of(const struct mem_request *req)
{
    if (req->kind == B10_MEM_DRAM)
        return req->process_mem ? &procmem_backend : &dram_backend;
    return req->kind == B10_MEM_VRAM ? &vram_backend : NULL;
}

b10_status_t mem_table_check(const struct mem_table *t, const struct mem_request *req, char *detail,
                             size_t detail_len)
{
    if (req->length == 0 || req->addr + req->length < req->addr) {
        snprintf(detail, detail_len, "region length %" PRIu64 " at 0x%" PRIx64 " is empty or wraps",
                 req->length, req->addr);
        return B10_ERR_INVALID_ARG;
    }
    if (mem_backend_of(req) == NULL) {
        snprintf(detail, detail_len, "unknown memory kind %d", (int)req->kind);
        return B10_ERR_INVALID_ARG;
    }
    if (t->count >= t->limit) {
        snprintf(detail, detail_len, "client already has %u regions (--max-regions)", t->count);
        return B10_ERR_TOO_LARGE;
    }
    if (t->bytes + req->length < t->bytes || t->bytes + req->length > t->max_bytes) {
        snprintf(detail, detail_len, "client has %" PRIu64 " bytes registered; %" PRIu64 " more "
                 "exceed --max-register-bytes %" PRIu64, t->bytes, req->length, t->max_bytes);
        return B10_ERR_TOO_LARGE;
    }
    uint32_t at = mem_table_search(t, req->addr);
    if (at < t->count && t->regions[at]->addr < req->addr + req->length) {
        snprintf(detail, detail_len, "region 0x%" PRIx64 "+%" PRIu64 " overlaps region %" PRIu64,
                 req->addr, req->length, t->regions[at]->id);
        return B10_ERR_EXISTS;
    }
    return B10_OK;
}

b10_status_t mem_region_open(uint64_t id, const struct mem_request *req, char *detail,
                             size_t detail_len, struct region **region_p)
{
    const struct mem_backend *backend = mem_backend_of(req);
    struct region *r;

    if (backend == NULL || (r = calloc(1, sizeof(*r))) == NULL)
        return backend == NULL ? B10_ERR_INVALID_ARG : B10_ERR_NO_MEMORY;
    *r = (struct region){ .id = id, .addr = req->addr, .length = req->length, .kind = req->kind,
                          .open = req->open, .backend = backend, .refs = 1, .device = -1,
                          .proc_fd = -1, .hole_fd = -1 };
    b10_status_t status = backend->open(r, req, detail, detail_len);
    if (status != B10_OK) {
        free(r);
        return status;
    }
    *region_p = r;
    return B10_OK;
}

b10_status_t mem_table_insert(struct mem_table *t, struct region *r, char *detail,
                              size_t detail_len)
{
    struct mem_request again = { .kind = r->kind, .addr = r->addr, .length = r->length };
    b10_status_t status = mem_table_check(t, &again, detail, detail_len);
    if (status != B10_OK)
        return status;
    if (t->count == t->capacity) {
        uint32_t cap = t->capacity ? t->capacity * 2 : 16;
        struct region **grown = realloc(t->regions, cap * sizeof(*grown));
        if (grown == NULL)
            return B10_ERR_NO_MEMORY;
        t->regions = grown;
        t->capacity = cap;
    }
    uint32_t at = mem_table_search(t, r->addr);
    memmove(&t->regions[at + 1], &t->regions[at], (t->count - at) * sizeof(*t->regions));
    t->regions[at] = r;
    t->count++;
    t->bytes += r->length;
    t->host_bytes += r->kind != B10_MEM_VRAM ? r->length : 0;
    return B10_OK;
}

b10_status_t mem_table_add(struct mem_table *t, uint64_t id, const struct mem_request *req,
                           char *detail, size_t detail_len, struct region **region_p)
{
    struct region *r;
    b10_status_t status = mem_table_check(t, req, detail, detail_len);

    if (status == B10_OK)
        status = mem_region_open(id, req, detail, detail_len, &r);
    if (status != B10_OK)
        return status;
    if ((status = mem_table_insert(t, r, detail, detail_len)) != B10_OK) {
        region_unref(r);
        return status;
    }
    *region_p = r;
    return B10_OK;
}

struct region *mem_table_take(struct mem_table *t, uint64_t id)
{
    for (uint32_t i = 0; i < t->count; i++) {
        struct region *r = t->regions[i];
        if (r->id != id)
            continue;
        memmove(&t->regions[i], &t->regions[i + 1], (t->count - i - 1) * sizeof(*t->regions));
        t->count--;
        t->bytes -= r->length;
        t->host_bytes -= r->kind != B10_MEM_VRAM ? r->length : 0;
        t->hint = 0;
        return r;
    }
    return NULL;
}

b10_status_t mem_table_remove(struct mem_table *t, uint64_t id)
{
    struct region *r = mem_table_take(t, id);
    if (r == NULL)
        return B10_ERR_NOT_FOUND;
    region_unref(r);
    return B10_OK;
}

b10_status_t mem_table_walk(struct mem_table *t, uint64_t addr, uint64_t length,
                            mem_emit_fn *emit, void *arg)
{
    /* The region the last walk began in, if it holds addr (below it, the
     * unsigned offset wraps past its length); else a search. */
    uint32_t i = t->hint;
    if (i >= t->count || addr - t->regions[i]->addr >= t->regions[i]->length)
        i = mem_table_search(t, addr);
    t->hint = i;

    while (length > 0) {
        if (i >= t->count || t->regions[i]->addr > addr)
            return B10_ERR_NOT_REGISTERED;
        struct region *r = t->regions[i];
        uint64_t offset = addr - r->addr;
        uint64_t n = r->length - offset < length ? r->length - offset : length;
        b10_status_t status = emit(arg, r, offset, n);
        if (status != B10_OK)
            return status;
        addr += n;
        length -= n;
        i++;
    }
    return B10_OK;
}
