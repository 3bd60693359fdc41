/*
 * access.h — who may touch a rank's memory (DESIGN.md §8).
 *
 * A request that reaches a rank's memory or inbox (a WRITE into it, a READ
 * from it, a CHECK of its spans, a NOTIFY) comes from an origin: a rank of
 * this node (the request came by this daemon's link to itself) or of a
 * remote daemon that authenticated. It is allowed when
 *
 *   - the origin is a rank of this node and of the target's uid;
 *   - the origin is remote and --remote-access is "any" (the default: a
 *     key holder's ranks are the cluster's, and that is the job);
 *   - the target paired with the origin and granted what the request does:
 *     it loaded the origin's descriptor with b10_agent_pair (so the name
 *     resolves to that daemon) and B10_GRANT_WRITE (a WRITE into it, a
 *     NOTIFY, a CHECK) or B10_GRANT_READ (a READ of it, a CHECK); loading
 *     alone grants nothing;
 *   - for memory only, and only for ranks of this node: every byte the
 *     request touches lies in regions the target opened to the node
 *     (B10_MEM_OPEN_TO_NODE).
 *
 * Anything else is refused with B10_ERR_PERMISSION and a reason that names
 * both ranks, so the one who asked knows which pairing is missing.
 */
#ifndef B10D_ACCESS_H
#define B10D_ACCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "b10/b10.h"

struct peer;
struct plan;
struct session;

struct access_origin {
    struct peer *peer;          /* the daemon it came from (this one, for a local rank) */
    const char *agent;          /* the asking rank's name there */
    bool local;                 /* a rank of this node: uid says whose */
    bool uid_known;             /* local: the name is held (names.h) */
    uid_t uid;
};

/* What a request does to the target. */
enum access_op {
    ACCESS_WRITE,               /* into its memory */
    ACCESS_READ,                /* of its memory */
    ACCESS_CHECK,               /* a sum of its spans */
    ACCESS_NOTIFY,              /* a notice for it */
};

enum access_grant {
    ACCESS_REFUSED,
    ACCESS_OPEN_ONLY,           /* only through regions open to the node */
    ACCESS_FULL,
};

/* Fill o for a request of agent that came by peer (peer_is_self: a local rank). */
void access_origin(struct access_origin *o, struct peer *peer, const char *agent);

/*
 * How far origin o may reach target's memory for op; on ACCESS_REFUSED,
 * detail says why. A notice no open region admits.
 */
enum access_grant access_grant(const struct session *target, const struct access_origin *o,
                               enum access_op op, char *detail, size_t detail_len);

/*
 * May origin o do op to target's memory at spans (packed u64 addr, u64
 * len), with a sync message for it (notice, which needs the notice's grant
 * too)? B10_OK, or B10_ERR_PERMISSION and
 * why: refused outright, a notice without pairing, or (under
 * ACCESS_OPEN_ONLY) the first span not wholly in regions open to the node,
 * registered elsewhere or not at all. Asked before the registration check,
 * so that an unpaired rank learns nothing of where memory lies. *grant_p
 * (if not NULL): the grant, which the transfer keeps for its copies.
 */
b10_status_t access_spans(struct session *target, const struct access_origin *o,
                          enum access_op op, const uint8_t *spans, size_t count, bool notice,
                          enum access_grant *grant_p, char *detail, size_t detail_len);
/* Under ACCESS_OPEN_ONLY, a notice (a sync message) is refused: B10_ERR_PERMISSION and why. */
b10_status_t access_notice_refused(const struct session *target, const struct access_origin *o,
                                   char *detail, size_t detail_len);
/* Under ACCESS_OPEN_ONLY, the same for the destination pieces of a plan. */
b10_status_t access_plan_open(struct session *target, const struct access_origin *o,
                              const struct plan *plan, char *detail, size_t detail_len);

#endif
