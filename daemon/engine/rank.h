/*
 * rank.h — what the transfer engine asks of the node's ranks.
 *
 * The engine (xfer*, ask, access) sits below the room of the node's clients
 * (session.c): it finds a rank by name, tells it a transfer ended, answers
 * its requests and hands it notices, but never calls session.c. session.c
 * installs these operations (session_rank_ops) in struct b10d at start, the
 * way wire.c's users install wire_hooks; a unit test of the engine installs
 * its own. The engine still reads a session's fields (its registrations,
 * its name, its lists): scripts/layers.py checks calls, not that.
 */
#ifndef B10D_RANK_H
#define B10D_RANK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "b10d.h"

struct session;
struct remote_agent;
struct xfer;

struct rank_ops {
    /* The rank of this node holding agent name, or NULL. */
    struct session *(*find)(struct b10d *d, const char *agent);
    /* The remote agent rank s loaded under name, or NULL. */
    struct remote_agent *(*agent)(struct session *s, const char *name);
    /*
     * The uid that held name's name in the descriptor of a rank of another
     * node that rank s loaded, when that descriptor said; false otherwise.
     */
    bool (*agent_uid)(struct session *s, const char *name, uint32_t *uid_p);
    /* The uid of rank s's process. */
    uint32_t (*uid)(struct session *s);
    /* The remote agent rank s may send to (see session_agent_use). */
    b10_status_t (*agent_use)(struct session *s, const char *name, struct remote_agent **agent_p,
                              char *detail, size_t detail_len);
    /* Transfer x of rank s reached its end: its status is final. */
    void (*xfer_done)(struct session *s, const struct xfer *x);
    /* Answer rank s's request seq (an ask finished). */
    void (*answer)(struct session *s, uint64_t seq, b10_status_t status, const char *detail);
    /* A message for rank s from agent from; room for it checked, reserved, released. */
    void (*notice)(struct session *s, const char *from, const uint8_t *data, size_t length);
    bool (*notice_room)(struct session *s, size_t length);
    void (*notice_reserve)(struct session *s, size_t length);
    void (*notice_release)(struct session *s, size_t length);
};

static inline struct session *rank_find(struct b10d *d, const char *agent)
{
    return d->rank_ops->find(d, agent);
}

static inline struct remote_agent *rank_agent(struct b10d *d, struct session *s, const char *name)
{
    return d->rank_ops->agent(s, name);
}

static inline b10_status_t rank_agent_use(struct b10d *d, struct session *s, const char *name,
                                          struct remote_agent **agent_p, char *detail,
                                          size_t detail_len)
{
    return d->rank_ops->agent_use(s, name, agent_p, detail, detail_len);
}

static inline bool rank_agent_uid(struct b10d *d, struct session *s, const char *name,
                                  uint32_t *uid_p)
{
    return s != NULL && d->rank_ops->agent_uid(s, name, uid_p);
}

/*
 * A remote daemon asks something of rank `target`, holding name here, on
 * behalf of a rank that loaded name's descriptor naming uid (uid_known):
 * B10_OK while target is of that uid, else B10_ERR_UNKNOWN_AGENT, said in
 * detail. After this daemon restarted, another user's rank may have taken
 * the name before its owner reconnected; it gets nothing meant for the owner.
 */
static inline b10_status_t rank_uid_check(struct b10d *d, struct session *target, const char *name,
                                          bool uid_known, uint32_t uid, char *detail,
                                          size_t detail_len)
{
    if (!uid_known || d->rank_ops->uid(target) == uid)
        return B10_OK;
    snprintf(detail, detail_len, "the rank named '%.100s' here is not of the user whose "
             "descriptor was loaded (uid %u): load its descriptor again", name, uid);
    return B10_ERR_UNKNOWN_AGENT;
}

static inline void rank_xfer_done(struct b10d *d, struct session *s, const struct xfer *x)
{
    d->rank_ops->xfer_done(s, x);
}

static inline void rank_answer(struct b10d *d, struct session *s, uint64_t seq,
                               b10_status_t status, const char *detail)
{
    d->rank_ops->answer(s, seq, status, detail);
}

static inline void rank_notice(struct b10d *d, struct session *s, const char *from,
                               const uint8_t *data, size_t length)
{
    d->rank_ops->notice(s, from, data, length);
}

static inline bool rank_notice_room(struct b10d *d, struct session *s, size_t length)
{
    return d->rank_ops->notice_room(s, length);
}

static inline void rank_notice_reserve(struct b10d *d, struct session *s, size_t length)
{
    d->rank_ops->notice_reserve(s, length);
}

static inline void rank_notice_release(struct b10d *d, struct session *s, size_t length)
{
    d->rank_ops->notice_release(s, length);
}

#endif
