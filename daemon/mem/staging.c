/* staging.c — see staging.h. */
#include "staging.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "checksum.h"
#include "gpu.h"
#include "wire.h"

struct staging {
    struct b10d *d;
    uint64_t view_bytes;
    uint32_t nviews;            /* views that exist: free, busy or quarantined */
    uint32_t target;            /* views the pool should hold */
    uint32_t nfree;
    uint32_t recv_busy, recv_cap;
    /*
     * Views gathered ahead of READY idle until their receiver answers, and a
     * receiver may hold that answer until our earlier sends to it are through,
     * which need views to get there. Receives take at most half the pool and
     * these at most a quarter, so running sends always have the rest but the
     * quarantine's.
     */
    uint32_t ahead_busy, ahead_cap;
    uint32_t quarantined;
    uint32_t next_id;
    bool lock_warned;
    struct list free_views;
    struct list waiters;
};

static void staging_view_release_memory(struct staging *s, struct view *v)
{
    if (v->cuda)
        gpu_host_unregister(s->d, v->base);
    munmap(v->base, checksum_message_bytes(s->view_bytes));
}

static struct view *staging_view_alloc(struct staging *s)
{
    struct view *v = calloc(1, sizeof(*v));
    if (v == NULL)
        return NULL;
    /* Room after the chunk for its checksum trailer: DATA carries both in one message. */
    size_t bytes = checksum_message_bytes(s->view_bytes);
    void *base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        log_err("staging: mmap of a %lu-byte view: %s", (unsigned long)s->view_bytes,
                strerror(errno));
        free(v);
        return NULL;
    }
    /* Locked so that the pages a transport DMAs into never move; best effort. */
    if (mlock(base, bytes) != 0 && !s->lock_warned) {
        s->lock_warned = true;
        log_warning("staging: mlock failed (%s); raise LimitMEMLOCK for pinned staging",
                    strerror(errno));
    }
    v->base = base;
    if (wire_mem_map(s->d->wire, base, bytes, &v->memh) != B10_OK) {
        staging_view_release_memory(s, v);
        free(v);
        return NULL;
    }
    v->bytes = s->view_bytes;
    v->id = s->next_id++;
    v->use = VIEW_FREE;
    list_init(&v->node);
    s->nviews++;
    return v;
}

b10_status_t staging_pin(struct staging *s, struct view *v, int device)
{
    if (v->cuda)
        return B10_OK;
    if (gpu_host_register(s->d, device, v->base, checksum_message_bytes(s->view_bytes)) != B10_OK)
        return B10_ERR_INTERNAL;        /* logged with CUDA's reason by gpu.c */
    v->cuda = true;
    return B10_OK;
}

static void staging_view_free(struct staging *s, struct view *v)
{
    wire_mem_unmap(s->d->wire, v->memh);
    staging_view_release_memory(s, v);
    s->nviews--;
    free(v);
}

b10_status_t staging_create(struct b10d *d, uint64_t total_bytes, uint64_t view_bytes,
                            struct staging **staging_p)
{
    struct staging *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return B10_ERR_NO_MEMORY;
    s->d = d;
    s->view_bytes = view_bytes;
    s->target = (uint32_t)(total_bytes / view_bytes);
    s->recv_cap = s->target / 2 > 0 ? s->target / 2 : 1;
    s->ahead_cap = s->target / 4;
    list_init(&s->free_views);
    list_init(&s->waiters);
    for (uint32_t i = 0; i < s->target; i++) {
        struct view *v = staging_view_alloc(s);
        if (v == NULL) {
            staging_destroy(s);
            return B10_ERR_NO_MEMORY;
        }
        list_insert_tail(&s->free_views, &v->node);
        s->nfree++;
    }
    log_info("staging: %u views of %lu KiB", s->target, (unsigned long)(view_bytes >> 10));
    *staging_p = s;
    return B10_OK;
}

void staging_destroy(struct staging *s)
{
    struct list *pos, *tmp;

    if (s == NULL)
        return;
    list_for_each_safe(pos, tmp, &s->free_views) {
        list_remove(pos);
        staging_view_free(s, list_entry(pos, struct view, node));
    }
    /* Views still out belong to transfers and quarantine, which free them through staging_drop. */
    free(s);
}

struct view *staging_get(struct staging *s, enum view_use use)
{
    if (list_empty(&s->free_views))
        return NULL;
    if ((use == VIEW_RECV && s->recv_busy >= s->recv_cap) ||
        (use == VIEW_AHEAD && s->ahead_busy >= s->ahead_cap))
        return NULL;
    struct view *v = list_entry(s->free_views.next, struct view, node);
    list_remove(&v->node);
    s->nfree--;
    v->use = use;
    if (use == VIEW_RECV)
        s->recv_busy++;
    if (use == VIEW_AHEAD)
        s->ahead_busy++;
    return v;
}

static void staging_release_use(struct staging *s, struct view *v)
{
    if (v->use == VIEW_RECV)
        s->recv_busy--;
    if (v->use == VIEW_AHEAD)
        s->ahead_busy--;
}

bool staging_waited(const struct staging *s)
{
    return !list_empty(&s->waiters);
}

void staging_promote(struct staging *s, struct view *v)
{
    if (v->use == VIEW_AHEAD) {
        s->ahead_busy--;
        v->use = VIEW_SEND;
    }
}

/*
 * Give waiting transfers a chance, each at most once: a waiter that still
 * finds nothing (the receive cap, say) queues again behind the others.
 */
static void staging_wake_all(struct staging *s, bool views_only)
{
    uint32_t n = 0;
    struct list *pos, *tmp;

    list_for_each_safe(pos, tmp, &s->waiters)
        n++;
    while (n-- > 0 && (s->nfree > 0 || !views_only) && !list_empty(&s->waiters)) {
        struct staging_waiter *w = list_entry(s->waiters.next, struct staging_waiter, node);
        list_remove(&w->node);
        w->wake(w);
    }
}

static void staging_wake(struct staging *s)
{
    staging_wake_all(s, true);
}

/*
 * Free views are handed out last in, first out: a transfer then cycles through
 * the few views it keeps in flight, which stay warm in the CPU caches (and in
 * the TLB) for UCX's copies, instead of sweeping the whole pool.
 */
void staging_put(struct staging *s, struct view *v)
{
    staging_release_use(s, v);
    v->use = VIEW_FREE;
    list_insert_head(&s->free_views, &v->node);
    s->nfree++;
    staging_wake(s);
}

void staging_quarantine(struct staging *s, struct view *v)
{
    staging_release_use(s, v);
    v->use = VIEW_QUARANTINED;
    s->quarantined++;
    /* A receive view leaving frees room under the receive cap. */
    staging_wake(s);
}

void staging_drop(struct staging *s, struct view *v)
{
    s->quarantined--;
    staging_view_free(s, v);
    struct view *fresh = staging_view_alloc(s);
    if (fresh == NULL) {
        log_err("staging: could not refill the pool; %u of %u views remain", s->nviews, s->target);
        return;
    }
    list_insert_tail(&s->free_views, &fresh->node);
    s->nfree++;
    staging_wake(s);
}

void staging_wake_waiters(struct staging *s)
{
    staging_wake_all(s, false);
}

bool staging_recv_room(const struct staging *s, uint32_t n)
{
    return s->nfree >= n && s->recv_busy + n <= s->recv_cap;
}

void staging_wait(struct staging *s, struct staging_waiter *w)
{
    list_insert_tail(&s->waiters, &w->node);
}

void staging_unwait(struct staging_waiter *w)
{
    list_remove(&w->node);
}

uint64_t staging_view_bytes(const struct staging *s)
{
    return s->view_bytes;
}

uint32_t staging_views(const struct staging *s)
{
    return s->nviews;
}

uint32_t staging_free_views(const struct staging *s)
{
    return s->nfree;
}

uint32_t staging_quarantined_views(const struct staging *s)
{
    return s->quarantined;
}
