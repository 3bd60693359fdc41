/* quarantine.c — see quarantine.h. */
#include "quarantine.h"

#include <inttypes.h>
#include <stdlib.h>

#include "staging.h"
#include "tags.h"

struct quarantine {
    struct b10d *d;
    struct list entries;        /* oldest first: TTLs are equal, so expiry order too */
    uint32_t count;
    uint64_t view_bytes;
    uv_timer_t sweep;
};

const char *quarantine_kind_name(enum quarantine_kind kind)
{
    switch (kind) {
    case QUARANTINE_VIEW: return "view";
    case QUARANTINE_TAGS: return "tags";
    case QUARANTINE_XFER_ID: return "xfer-id";
    case QUARANTINE_GENERATION: return "generation";
    }
    return "?";
}

static void quarantine_on_timer(uv_timer_t *timer)
{
    quarantine_sweep(timer->data);
}

b10_status_t quarantine_create(struct b10d *d, struct quarantine **q_p)
{
    struct quarantine *q = calloc(1, sizeof(*q));
    if (q == NULL)
        return B10_ERR_NO_MEMORY;
    q->d = d;
    list_init(&q->entries);
    uv_timer_init(d->loop, &q->sweep);
    q->sweep.data = q;
    /* Sweep a few times per TTL, at most once a second and at least every 50 ms. */
    uint64_t every = d->cfg.quarantine_ttl_ms / 4;
    every = every < 50 ? 50 : every > 1000 ? 1000 : every;
    uv_timer_start(&q->sweep, quarantine_on_timer, every, every);
    uv_unref((uv_handle_t *)&q->sweep);
    *q_p = q;
    return B10_OK;
}

static void quarantine_on_close(uv_handle_t *handle)
{
    free(handle->data);
}

void quarantine_destroy(struct quarantine *q)
{
    struct list *pos, *tmp;

    if (q == NULL)
        return;
    list_for_each_safe(pos, tmp, &q->entries) {
        struct quarantine_entry *e = list_entry(pos, struct quarantine_entry, node);
        list_remove(pos);
        if (e->view != NULL && e->view->holds == 0)
            staging_drop(q->d->staging, e->view);
        free(e);
    }
    uv_close((uv_handle_t *)&q->sweep, quarantine_on_close);
}

void quarantine_add(struct quarantine *q, enum quarantine_kind kind, uint64_t value,
                    uint64_t size, b10_status_t reason, uint64_t xfer_id, uint64_t peer_id,
                    struct view *view, uint64_t *charge)
{
    struct quarantine_entry *e = calloc(1, sizeof(*e));
    uint64_t now = q->d->now_ms(q->d);

    if (view != NULL)
        staging_quarantine(q->d->staging, view);
    q->d->stats.quarantine_events++;
    if (e == NULL) {
        /* Without an entry a view would never leave; losing it from the pool is the safe side. */
        log_err("quarantine: no memory for an entry; %s %" PRIu64 " stays out for good",
                quarantine_kind_name(kind), value);
        return;
    }
    *e = (struct quarantine_entry){
        .kind = kind, .size = size, .reason = reason, .xfer_id = xfer_id, .peer_id = peer_id,
        .value = value, .since_ms = now, .expires_ms = now + q->d->cfg.quarantine_ttl_ms,
        .view = view, .charge = kind == QUARANTINE_VIEW ? charge : NULL,
    };
    list_insert_tail(&q->entries, &e->node);
    q->count++;
    if (kind == QUARANTINE_VIEW)
        q->view_bytes += size;
    if (e->charge != NULL)
        *e->charge += size;
    log_debug("quarantine: %s %" PRIu64 " of transfer %016" PRIx64 " (%s)",
              quarantine_kind_name(kind), value, xfer_id, b10_status_name(reason));
}

void quarantine_sweep(struct quarantine *q)
{
    uint64_t now = q->d->now_ms(q->d);
    struct list *pos, *tmp;

    tags_sweep(q->d->tags, now);
    list_for_each_safe(pos, tmp, &q->entries) {
        struct quarantine_entry *e = list_entry(pos, struct quarantine_entry, node);
        if (e->expires_ms > now)
            continue;
        /* Never free memory under an outstanding request: wait for it, however long. */
        if (e->view != NULL && e->view->holds > 0)
            continue;
        list_remove(pos);
        q->count--;
        if (e->charge != NULL)
            *e->charge -= e->size;
        if (e->view != NULL) {
            q->view_bytes -= e->size;
            log_debug("quarantine: dropped view %" PRIu64 " of transfer %016" PRIx64
                      " after %" PRIu64 " ms; the pool allocates a fresh one",
                      e->value, e->xfer_id, now - e->since_ms);
            staging_drop(q->d->staging, e->view);
        }
        free(e);
    }
}

uint64_t quarantine_bytes(const struct quarantine *q)
{
    return q->view_bytes;
}

uint32_t quarantine_count(const struct quarantine *q)
{
    return q->count;
}

const struct list *quarantine_entries(const struct quarantine *q)
{
    return &q->entries;
}
