/*
 * rank.h — what the transfer engine asks of the node's ranks.
 *
 * The engine (xfer*, ask, access) sits below the room of the node's clients
 * (session.c): it finds a rank by name, tells it a transfer ended, answers
 * its requests and hands it notices, but never calls session.c. session.c
 * installs these operations (session_rank_ops) in struct b10d at start, the
 * way wire.c's users install wire_hooks; a unit test of the engine installs
 * its own. The engine holds a struct session only as a handle.
 */
#ifndef B10D_RANK_H
#define B10D_RANK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "b10d.h"

struct session;
struct remote_agent;
struct xfer;

struct rank_ops {
    /* The rank of this node holding agent name, or NULL. */
    struct session *(*find)(struct b10d *d, const char *agent);
    /* The remote agent rank s loaded under name, or NULL. */
    struct remote_agent *(*agent)(struct session *s, const char *name);
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
