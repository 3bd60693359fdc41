/*
 * staging.h — the pool of host staging views that DATA chunks travel through.
 *
 * Each view is its own page-aligned buffer registered once with UCX: pinned
 * and mapped by CUDA when the daemon has a GPU (the copy kernels then read
 * and write it directly), locked pages otherwise,
 * so that one view can be dropped (freed) on its own when it leaves the
 * quarantine and be replaced by a fresh allocation: a view that a failed
 * transfer touched is never recycled.
 *
 * At most half the views serve receives: the other half stays for sends, so
 * two daemons sending to each other cannot each fill their pool with
 * receives waiting on the other's sends.
 */
#ifndef B10D_STAGING_H
#define B10D_STAGING_H

#include <stdbool.h>
#include <stdint.h>

#include "b10d.h"

enum view_use {
    VIEW_FREE,
    VIEW_SEND,
    VIEW_RECV,
    VIEW_AHEAD,         /* a sender's, gathered before its receiver's READY */
    VIEW_QUARANTINED,
};

struct view {
    struct list node;           /* in the free list while VIEW_FREE */
    uint8_t *base;
    uint64_t bytes;
    void *memh;                 /* UCX registration */
    uint32_t id;
    enum view_use use;
    uint32_t holds;             /* UCX requests and copies that may still touch it */
    bool cuda;                  /* pinned and mapped by CUDA (else locked pages): staging_pin */
};

/* A transfer waiting for a view: wake() runs once one may be free. */
struct staging_waiter {
    struct list node;
    void (*wake)(struct staging_waiter *w);
};

struct staging;

/*
 * A pool of total_bytes / view_bytes views, each mapped, locked (best effort)
 * and registered with the wire. B10_ERR_NO_MEMORY when one cannot be had.
 */
b10_status_t staging_create(struct b10d *d, uint64_t total_bytes, uint64_t view_bytes,
                            struct staging **staging_p);
void staging_destroy(struct staging *s);

struct view *staging_get(struct staging *s, enum view_use use);
/* Whether a transfer waits for a view. */
bool staging_waited(const struct staging *s);
/* A view taken VIEW_AHEAD becomes a running sender's (VIEW_SEND): READY came. */
void staging_promote(struct staging *s, struct view *v);
/* A view whose last use ended cleanly goes back to the pool. */
void staging_put(struct staging *s, struct view *v);
/*
 * Pin and map view v for every GPU (gpu_host_register), once, before its
 * first copy with device: views are plain locked pages until a GPU needs
 * them, so a daemon whose ranks register no VRAM makes no CUDA context, and
 * the registration is made from device's context, which its region's
 * opening made already (from no device's, CUDA would make device 0's).
 */
b10_status_t staging_pin(struct staging *s, struct view *v, int device);
/* A view of a failed transfer: out of circulation until staging_drop(). */
void staging_quarantine(struct staging *s, struct view *v);
/* Free a quarantined view and allocate a fresh one in its place. */
void staging_drop(struct staging *s, struct view *v);

void staging_wait(struct staging *s, struct staging_waiter *w);
/* Wake the waiters: room came back that no view's return tells of (a peer's share). */
void staging_wake_waiters(struct staging *s);
/* Are n receive views free at once (within the receive half of the pool)? */
bool staging_recv_room(const struct staging *s, uint32_t n);
void staging_unwait(struct staging_waiter *w);

uint64_t staging_view_bytes(const struct staging *s);
uint32_t staging_views(const struct staging *s);
uint32_t staging_free_views(const struct staging *s);
uint32_t staging_quarantined_views(const struct staging *s);

#endif
