/*
 * lane.h — the wire's data lanes, private to the wire room (wire.c, lane.c).
 *
 * One UCX worker copies on one thread: over shared memory the receiver's
 * CMA copy, over tcp the socket writes and reads. A lane is one more worker
 * with a thread of its own, so that bulk DATA moves on several cores at once.
 * While the thread runs, the loop thread never touches a lane's worker (it
 * creates it before and destroys it after): it posts commands (a send, a
 * receive, a cancel, an endpoint to open or close) and takes reports back
 * (an operation done, an endpoint failed or closed, a message nobody asked
 * for), both as struct wire_op through queues under the lane's mutex.
 *
 * An operation belongs to one thread at a time: the loop until it is posted,
 * the lane until it is reported, the loop again until delivered and freed.
 * The loop only reads, while the lane owns it, what the lane never writes
 * (op->lane and op->id, for a cancel).
 */
#ifndef B10D_LANE_H
#define B10D_LANE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ucp/api/ucp.h>
#include <uv.h>

#include "list.h"
#include "wire.h"
#include "wireop.h"

struct lane;
struct lane_ep;

struct lane_params {
    unsigned index;
    bool spin;                  /* poll while operations are in flight, else sleep on events */
    bool err_mode_peer;
    uv_async_t *wake;           /* sent when reports are waiting */
};

/* A worker on a thread of its own. B10_ERR_NO_MEMORY or B10_ERR_IO when not (logged). */
b10_status_t lane_create(ucp_context_h context, const struct lane_params *params,
                         struct lane **lane_p);
/*
 * Stop the thread and free the lane; the reports it still had, and every
 * operation still in flight (reported cancelled), are appended to reports
 * (NULL only from lane_create, for a lane that never started).
 * Returns false when UCX still held requests after a bounded wait (sends to
 * a stopped peer): the worker is then left undestroyed, and so must be the
 * context.
 */
bool lane_destroy(struct lane *lane, struct list *reports);

void lane_address(const struct lane *lane, const void **addr_p, size_t *length_p);

/*
 * An endpoint for this lane to a peer lane's address (copied). Its ops go
 * out with lane_post; the EP_CLOSE op is preallocated so that closing never
 * fails for want of memory. NULL when out of memory.
 */
struct lane_ep *lane_ep_new(struct lane *lane, struct wire_ep *wep, const void *addr,
                            size_t length);
/* Free one never opened (the loop's, until lane_ep_open hands it over). */
void lane_ep_free(struct lane_ep *lep);
void lane_ep_open(struct lane *lane, struct lane_ep *lep);
/* The lane closes and frees it, then reports LANE_EP_CLOSED for its wire_ep. */
void lane_ep_close(struct lane *lane, struct lane_ep *lep);

/* Hand op over to the lane thread. */
void lane_post(struct lane *lane, struct wire_op *op);
/* Take the reports waiting (in the order they came). */
void lane_take(struct lane *lane, struct list *reports);

uint64_t lane_progress_ns(const struct lane *lane);

#endif
