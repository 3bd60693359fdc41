/*
 * admin.h — b10ctl's requests (proto/admin.proto), answered from the live
 * state of the daemon on the loop thread.
 *
 * Who may ask what, by the credentials the kernel recorded at connect
 * (SO_PEERCRED, SO_PEERGROUPS). Operators (root, the daemon's own user and
 * members of --admin-group) see and act on everything. Anyone else the
 * socket lets in (its group holds every rank, of every user) sees only the
 * transfers and ranks of its own uid, cancels only those (another user's
 * transfer is answered as an id of none, B10_ERR_NOT_FOUND in the same
 * words: no answer tells which ids are in flight), and is answered
 * B10_ERR_PERMISSION for drain and for what tells of other users' work
 * (quarantine, peers, stats, metrics); every answer says which it got.
 *
 * Reads are snapshots; lists are cut at --max-admin-rows and say how many
 * rows they left out. The two actions go through the daemon's own paths:
 * cancel through the failure funnel (B10_ERR_CANCELLED), drain through
 * service.c. Releasing quarantine early is not offered.
 */
#ifndef B10D_ADMIN_H
#define B10D_ADMIN_H

#include <stddef.h>
#include <stdint.h>

#include "b10/b10.h"

struct session;
struct B10__AdminRequest;

struct b10d;

/*
 * The metrics as Prometheus text (format 0.0.4), malloc'd into *text_p:
 * what `b10ctl metrics` prints and GET /metrics serves. B10_ERR_NO_MEMORY
 * without memory for it.
 */
b10_status_t admin_metrics_text(struct b10d *d, char **text_p, size_t *length_p);

/*
 * One admin request on s's connection, answered. B10_OK; the refusal's
 * status (B10_ERR_BUSY: too many b10ctl connections) when the connection
 * must be dropped.
 */
b10_status_t admin_on_request(struct session *s, uint64_t seq, const struct B10__AdminRequest *req);

#endif
