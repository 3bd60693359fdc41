/* mem.c — see mem.h. */
#include "mem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    r->ops->close(r);
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

/*
 * The kinds of memory, searched in order: a kind is its file and a line
 * here (and its declaration in mem.h). Two rows may serve one client kind,
 * each its own requests of it (serves).
 */
static const struct mem_kind_ops *const mem_kinds[] = {
    &dram_kind,
    &procmem_kind,
    &vram_kind,
};

const struct mem_kind_ops *mem_kind_at(size_t i)
{
    return i < sizeof(mem_kinds) / sizeof(mem_kinds[0]) ? mem_kinds[i] : NULL;
}

const struct mem_kind_ops *mem_kind_of(const struct mem_request *req)
{
    for (size_t i = 0; i < sizeof(mem_kinds) / sizeof(mem_kinds[0]); i++)
        if (mem_kinds[i]->kind == req->kind && mem_kinds[i]->serves(req))
            return mem_kinds[i];
    return NULL;
}

/* req's kind, or NULL and why in detail. */
static const struct mem_kind_ops *mem_kind_or_say(const struct mem_request *req, char *detail,
                                                  size_t detail_len)
{
    const struct mem_kind_ops *ops = mem_kind_of(req);
    if (ops == NULL)
        snprintf(detail, detail_len, "unknown memory kind %d", (int)req->kind);
    return ops;
}

bool mem_request_takes_fd(const struct mem_request *req)
{
    const struct mem_kind_ops *ops = mem_kind_of(req);
    /*
     * A kind of no row whose registration says it carries one: taken, and
     * closed with the refusal, so that the next registration's descriptor
     * is its own and not this one.
     */
    return ops != NULL ? ops->takes_fd(req) : req->vmm_fd;
}

bool mem_request_host(const struct mem_request *req)
{
    const struct mem_kind_ops *ops = mem_kind_of(req);
    return ops != NULL && ops->reach != MEM_REACH_DEVICE;
}

static b10_status_t mem_span_check(uint64_t addr, uint64_t length, char *detail, size_t detail_len)
{
    if (length == 0 || addr + length < addr) {
        snprintf(detail, detail_len, "region length %" PRIu64 " at 0x%" PRIx64 " is empty or wraps",
                 length, addr);
        return B10_ERR_INVALID_ARG;
    }
    return B10_OK;
}

/* Whether [addr, addr + length) fits the table: its limits, and no region it overlaps. */
static b10_status_t mem_table_fits(const struct mem_table *t, uint64_t addr, uint64_t length,
                                   char *detail, size_t detail_len)
{
    if (t->count >= t->limit) {
        snprintf(detail, detail_len, "client already has %u regions (--max-regions)", t->count);
        return B10_ERR_TOO_LARGE;
    }
    if (t->bytes + length < t->bytes || t->bytes + length > t->max_bytes) {
        snprintf(detail, detail_len, "client has %" PRIu64 " bytes registered; %" PRIu64 " more "
                 "exceed --max-register-bytes %" PRIu64, t->bytes, length, t->max_bytes);
        return B10_ERR_TOO_LARGE;
    }
    uint32_t at = mem_table_search(t, addr);
    if (at < t->count && t->regions[at]->addr < addr + length) {
        snprintf(detail, detail_len, "region 0x%" PRIx64 "+%" PRIu64 " overlaps region %" PRIu64,
                 addr, length, t->regions[at]->id);
        return B10_ERR_EXISTS;
    }
    return B10_OK;
}

b10_status_t mem_table_check(const struct mem_table *t, const struct mem_request *req, char *detail,
                             size_t detail_len)
{
    b10_status_t status = mem_span_check(req->addr, req->length, detail, detail_len);
    if (status != B10_OK)
        return status;
    if (mem_kind_or_say(req, detail, detail_len) == NULL)
        return B10_ERR_INVALID_ARG;
    return mem_table_fits(t, req->addr, req->length, detail, detail_len);
}

b10_status_t mem_region_open(uint64_t id, const struct mem_request *req, char *detail,
                             size_t detail_len, struct region **region_p)
{
    const struct mem_kind_ops *ops = mem_kind_or_say(req, detail, detail_len);
    struct region *r;

    if (ops == NULL || (r = calloc(1, sizeof(*r))) == NULL)
        return ops == NULL ? B10_ERR_INVALID_ARG : B10_ERR_NO_MEMORY;
    *r = (struct region){ .id = id, .addr = req->addr, .length = req->length, .ops = ops,
                          .open = req->open, .refs = 1, .device = -1, .proc_fd = -1,
                          .hole_fd = -1 };
    b10_status_t status = ops->open(r, req, detail, detail_len);
    if (status != B10_OK) {
        free(r);
        return status;
    }
    if (ops->populate != NULL)
        ops->populate(r, req);
    *region_p = r;
    return B10_OK;
}

b10_status_t mem_table_insert(struct mem_table *t, struct region *r, char *detail,
                              size_t detail_len)
{
    /* Checked again: the table may have changed while the region was opened. */
    b10_status_t status = mem_span_check(r->addr, r->length, detail, detail_len);
    if (status == B10_OK)
        status = mem_table_fits(t, r->addr, r->length, detail, detail_len);
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
    t->host_bytes += !mem_region_on_device(r) ? r->length : 0;
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
        t->host_bytes -= !mem_region_on_device(r) ? r->length : 0;
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
