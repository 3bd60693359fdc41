/* access.c — see access.h. */
#include "access.h"

#include <inttypes.h>
#include <stdio.h>

#include "frame.h"
#include "names.h"
#include "peer.h"
#include "plan.h"
#include "rank.h"
#include "session.h"


void access_origin(struct access_origin *o, struct peer *peer, const char *agent)
{
    o->peer = peer;
    o->agent = agent;
    o->local = peer_is_self(peer);
    o->uid_known = o->local && names_holder(peer->d->names, agent, &o->uid);
}

/* "uid N" of a local origin, in words; "no uid" when its name is held by none. */
static const char *access_uid(const struct access_origin *o, char *buf, size_t n)
{
    if (o->uid_known)
        snprintf(buf, n, "uid %u", (unsigned)o->uid);
    else
        snprintf(buf, n, "no uid");
    return buf;
}

/* The grant op needs (B10_GRANT_*): a CHECK is either's, a notice goes with writing. */
static uint32_t access_needs(enum access_op op)
{
    switch (op) {
    case ACCESS_READ: return B10_GRANT_READ;
    case ACCESS_CHECK: return B10_GRANT_WRITE | B10_GRANT_READ;
    case ACCESS_WRITE:
    case ACCESS_NOTIFY: break;
    }
    return B10_GRANT_WRITE;
}

static const char *access_op_name(enum access_op op)
{
    switch (op) {
    case ACCESS_READ: return "READ of its memory (B10_GRANT_READ)";
    case ACCESS_CHECK: return "a CHECK of its spans (B10_GRANT_WRITE or B10_GRANT_READ)";
    case ACCESS_NOTIFY: return "a notice (B10_GRANT_WRITE)";
    case ACCESS_WRITE: break;
    }
    return "WRITE into its memory (B10_GRANT_WRITE)";
}

/*
 * The remote agent of target that o's request names, loaded from o's
 * daemon and (a rank of this node) while the uid that asks now held its
 * name; NULL when none. A name another uid took after its first holder's
 * claim was forgotten is not the rank target paired with.
 */
static const struct remote_agent *access_pairing(const struct session *target,
                                                 const struct access_origin *o)
{
    struct remote_agent *a = rank_agent(o->peer->d, (struct session *)target, o->agent);
    if (a == NULL || a->peer != o->peer)
        return NULL;
    if (o->local && !(a->uid_known && o->uid_known && a->uid == o->uid))
        return NULL;
    return a;
}

enum access_grant access_grant(const struct session *target, const struct access_origin *o,
                               enum access_op op, char *detail, size_t detail_len)
{
    const struct config *cfg = &target->d->cfg;

    if (o->local && o->uid_known && o->uid == target->uid)
        return ACCESS_FULL;
    if (!o->local && cfg->remote_access == CONFIG_REMOTE_ANY)
        return ACCESS_FULL;
    const struct remote_agent *a = access_pairing(target, o);
    if (a != NULL && (a->grants & access_needs(op)) != 0)
        return ACCESS_FULL;
    if (o->local && op != ACCESS_NOTIFY)
        return ACCESS_OPEN_ONLY;
    char uid[24];
    if (a != NULL)
        snprintf(detail, detail_len, "rank '%.100s' paired with '%.100s'%s%.64s but did not grant it "
                 "%s", target->agent, o->agent, o->local ? "" : " of daemon ",
                 o->local ? "" : o->peer->name, access_op_name(op));
    else if (o->local)
        snprintf(detail, detail_len, "rank '%.100s' (uid %u) has not paired with '%.100s' (%s): "
                 "a rank of another user needs its grant of %s (b10_agent_pair)", target->agent,
                 (unsigned)target->uid, o->agent, access_uid(o, uid, sizeof(uid)), access_op_name(op));
    else
        snprintf(detail, detail_len, "rank '%.100s' has not paired with '%.100s' of daemon %.64s, "
                 "and this daemon admits only remote ranks granted %s (--remote-access paired, "
                 "b10_agent_pair)", target->agent, o->agent, o->peer->name, access_op_name(op));
    return ACCESS_REFUSED;
}

static b10_status_t access_open_emit(void *arg, struct region *r, uint64_t offset, uint64_t n)
{
    return r->open ? B10_OK : B10_ERR_PERMISSION;
}

/* One span under ACCESS_OPEN_ONLY; detail names it and both ranks when refused. */
static b10_status_t access_span_open(struct session *target, const struct access_origin *o,
                                     enum access_op op, uint64_t addr, uint64_t len, char *detail,
                                     size_t detail_len)
{
    /* Outside any region is refused the same: to an unpaired rank, where memory lies is no answer. */
    if (len == 0 || mem_table_walk(&target->mem, addr, len, access_open_emit, NULL) == B10_OK)
        return B10_OK;
    char uid[24];
    snprintf(detail, detail_len, "span 0x%" PRIx64 "+%" PRIu64 " of rank '%.80s' (uid %u) is not "
             "wholly in regions it opened to the node, and it has not granted '%.80s' (%s) %s "
             "(b10_agent_pair)", addr, len, target->agent, (unsigned)target->uid, o->agent,
             access_uid(o, uid, sizeof(uid)), access_op_name(op));
    return B10_ERR_PERMISSION;
}

static b10_status_t access_spans_open(struct session *target, const struct access_origin *o,
                                      enum access_op op, const uint8_t *spans, size_t count,
                                      char *detail, size_t detail_len)
{
    for (size_t i = 0; i < count; i++) {
        b10_status_t st = access_span_open(target, o, op, frame_get_u64(spans + i * SPAN_BYTES),
                                           frame_get_u64(spans + i * SPAN_BYTES + 8), detail,
                                           detail_len);
        if (st != B10_OK)
            return st;
    }
    return B10_OK;
}

b10_status_t access_spans(struct session *target, const struct access_origin *o,
                          enum access_op op, const uint8_t *spans, size_t count, bool notice,
                          enum access_grant *grant_p, char *detail, size_t detail_len)
{
    enum access_grant grant = access_grant(target, o, op, detail, detail_len);
    b10_status_t st = B10_OK;

    if (grant == ACCESS_REFUSED)
        st = B10_ERR_PERMISSION;
    else if (grant == ACCESS_OPEN_ONLY && notice)
        st = access_notice_refused(target, o, detail, detail_len);
    else if (notice && access_grant(target, o, ACCESS_NOTIFY, detail, detail_len) != ACCESS_FULL)
        st = B10_ERR_PERMISSION;
    else if (grant == ACCESS_OPEN_ONLY)
        st = access_spans_open(target, o, op, spans, count, detail, detail_len);
    if (grant_p != NULL)
        *grant_p = grant;
    return st;
}

b10_status_t access_notice_refused(const struct session *target, const struct access_origin *o,
                                   char *detail, size_t detail_len)
{
    char uid[24];
    snprintf(detail, detail_len, "rank '%.100s' (uid %u) has not granted '%.100s' (%s) "
             "B10_GRANT_WRITE: a sync message is a notice, which an open region does not admit",
             target->agent, (unsigned)target->uid, o->agent, access_uid(o, uid, sizeof(uid)));
    return B10_ERR_PERMISSION;
}

b10_status_t access_plan_open(struct session *target, const struct access_origin *o,
                              const struct plan *plan, char *detail, size_t detail_len)
{
    for (uint32_t i = 0; i < plan->npieces; i++) {
        b10_status_t st = access_span_open(target, o, ACCESS_WRITE, plan->pieces[i].dst,
                                           plan->pieces[i].len, detail, detail_len);
        if (st != B10_OK)
            return st;
    }
    return B10_OK;
}
