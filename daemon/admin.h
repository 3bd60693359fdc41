/*
 * admin.h — b10ctl's requests (proto/admin.proto), answered from the live
 * state of the daemon on the loop thread.
 *
 * Who may ask: root, the daemon's own user, and members of the group that
 * owns the socket's file (the unit's SocketGroup=), by the credentials the
 * kernel recorded at connect (SO_PEERCRED, SO_PEERGROUPS). Anyone else is
 * answered B10_ERR_PERMISSION and dropped: the socket's mode already keeps
 * strangers out, this keeps out ranks of other users let in to transfer.
 *
 * Reads are snapshots; lists are cut at --max-admin-rows and say how many
 * rows they left out. The two actions go through the daemon's own paths:
 * cancel through the failure funnel (B10_ERR_CANCELLED), drain through
 * service.c. Releasing quarantine early is not offered.
 */
#ifndef B10D_ADMIN_H
#define B10D_ADMIN_H

#include <stdint.h>

struct session;
struct B10__AdminRequest;

/*
 * One admin request on s's connection. Returns 0, or -1 to drop the
 * connection (a refused one that is not a rank's).
 */
int admin_on_request(struct session *s, uint64_t seq, const struct B10__AdminRequest *req);

#endif
