/*
 * quarantine.h — what failed transfers leave behind, out of circulation.
 *
 * On any uncertainty a transfer's staging views, tags, id and (when the
 * endpoint is suspect) its endpoint generation come here for a TTL. A view
 * leaves only when its TTL passed and no UCX request or copy still holds it;
 * it is then dropped and the pool allocates a fresh one. Tags leave the
 * registry at the same time. Ids and generations are never reused anyway:
 * their entries are the record of what happened, for b10ctl and the logs.
 */
#ifndef B10D_QUARANTINE_H
#define B10D_QUARANTINE_H

#include <stdint.h>

#include "b10d.h"

struct view;

enum quarantine_kind {
    QUARANTINE_VIEW,
    QUARANTINE_TAGS,
    QUARANTINE_XFER_ID,
    QUARANTINE_GENERATION,
};

struct quarantine_entry {
    struct list node;
    enum quarantine_kind kind;
    uint64_t size;              /* view: bytes; tags: how many */
    b10_status_t reason;
    uint64_t xfer_id;
    uint64_t peer_id;           /* the remote daemon */
    uint64_t value;             /* the id or generation itself */
    uint64_t since_ms;
    uint64_t expires_ms;
    struct view *view;          /* QUARANTINE_VIEW */
    uint64_t *charge;           /* a view's bytes count here while it sits out (a peer's share) */
};

struct quarantine;

/* B10_OK, or B10_ERR_NO_MEMORY. */
b10_status_t quarantine_create(struct b10d *d, struct quarantine **q_p);
/* Frees entries; views go back to staging through staging_drop. */
void quarantine_destroy(struct quarantine *q);

/*
 * charge, when not NULL, is a counter a view's size is added to now and
 * taken from when it leaves: how a peer's share of the quarantine is kept
 * (peer.h). Its owner outlives the entry (a peer with bytes charged is not
 * evicted).
 */
void quarantine_add(struct quarantine *q, enum quarantine_kind kind, uint64_t value,
                    uint64_t size, b10_status_t reason, uint64_t xfer_id, uint64_t peer_id,
                    struct view *view, uint64_t *charge);

/* Quarantined staging bytes, against the budget. */
uint64_t quarantine_bytes(const struct quarantine *q);
uint32_t quarantine_count(const struct quarantine *q);
const struct list *quarantine_entries(const struct quarantine *q);

/* Expire what is due (the sweep timer calls it; tests may too). */
void quarantine_sweep(struct quarantine *q);

const char *quarantine_kind_name(enum quarantine_kind kind);

#endif
