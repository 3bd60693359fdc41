/* xfer.c — see xfer.h and xfer-int.h: the transfer object and its funnel. */
#include "xfer-int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "auth.h"
#include "checksum.h"
#include "frame.h"
#include "peer.h"
#include "plan.h"
#include "quarantine.h"
#include "rank.h"
#include "session.h"
#include "stats.h"

static const struct xfer_role_ops *const xfer_roles[] = {
    [XFER_SEND] = &xfer_send_role,
    [XFER_RECV] = &xfer_recv_role,
    [XFER_READ] = &xfer_read_role,
    [XFER_LOCAL] = &xfer_local_role,
};

const char *xfer_role_name(enum xfer_role role)
{
    return (unsigned)role < sizeof(xfer_roles) / sizeof(xfer_roles[0]) ? xfer_roles[role]->name : "?";
}

const char *xfer_state_name(enum xfer_state state)
{
    switch (state) {
    case XFER_WAIT_LINK: return "wait-link";
    case XFER_WAIT_READY: return "wait-ready";
    case XFER_QUEUED: return "queued";
    case XFER_RUNNING: return "running";
    case XFER_DONE: return "done";
    }
    return "?";
}

/* ---------------------------------------------------------------- pipeline accounting */

void xfer_pipe_start(struct xfer *x)
{
    x->pipe.idle_since_ns = uv_hrtime();
    x->pipe.progress_ns0 = wire_progress_ns(x->d->wire);
}

void xfer_pipe_copy_done(struct xfer_slot *slot, const struct copy_job *job)
{
    slot->x->pipe.copy_ns += uv_hrtime() - slot->phase_ns;
    slot->x->pipe.gpu_ms += job->gpu_ms;
    slot->x->pipe.copies++;
    xfer_trace_step(slot->x, slot->view == NULL ? XS_COPIED : job->gather ? XS_GATHERED
                                                                          : XS_SCATTERED,
                    slot->chunk);
}

void xfer_pipe_wire_begin(struct xfer_slot *slot)
{
    struct xfer_pipe *p = &slot->x->pipe;
    slot->phase_ns = uv_hrtime();
    if (slot->x->role == XFER_RECV)
        xfer_trace_step(slot->x, XS_POSTED, slot->chunk);
    if (p->on_wire++ == 0)
        p->wire_idle_ns += slot->phase_ns - p->idle_since_ns;
}

void xfer_pipe_wire_end(struct xfer_slot *slot)
{
    struct xfer_pipe *p = &slot->x->pipe;
    uint64_t now = uv_hrtime();
    p->wire_ns += now - slot->phase_ns;
    p->wire_ops++;
    xfer_trace_step(slot->x, slot->x->role == XFER_RECV ? XS_ARRIVED : XS_SENT, slot->chunk);
    if (--p->on_wire == 0)
        p->idle_since_ns = now;
}

/*
 * "gather 0.30 ms (GPU 0.085), send 1.70 ms a chunk on average; no DATA in
 * flight for 0.5 ms; UCX progress 35 ms": copies far longer than their GPU
 * time mean completions waited for the loop; UCX progress near the whole
 * transfer means this daemon's thread was the wire (shared-memory copies,
 * socket writes).
 */
void xfer_pipe_describe(const struct xfer *x, char *out, size_t size)
{
    const struct xfer_pipe *p = &x->pipe;
    uint32_t nc = p->copies > 0 ? p->copies : 1, nw = p->wire_ops > 0 ? p->wire_ops : 1;
    if (x->role == XFER_LOCAL) {
        snprintf(out, size, "%.2f ms (GPU %.3f) a copy on average, %u copies, %u of them direct",
                 p->copy_ns / 1e6 / nc, p->gpu_ms / nc, p->copies, p->direct);
        return;
    }
    snprintf(out, size, "%s %.2f ms (GPU %.3f), %s %.2f ms a chunk on average; no DATA %s for "
             "%.1f ms; UCX progress %.0f ms",
             x->role == XFER_SEND ? "gather" : "scatter", p->copy_ns / 1e6 / nc,
             p->gpu_ms / nc, x->role == XFER_SEND ? "send" : "receive",
             p->wire_ns / 1e6 / nw, x->role == XFER_SEND ? "in flight" : "receive posted",
             p->wire_idle_ns / 1e6, (wire_progress_ns(x->d->wire) - p->progress_ns0) / 1e6);
}

/* ---------------------------------------------------------------- life cycle */

static void xfer_on_timer_closed(uv_handle_t *handle)
{
    struct xfer *x = handle->data;
    if (x->peer != NULL)
        peer_release(x->peer);
    xfer_trace_log(x);          /* ended without news (discarded): still a line */
    plan_picker_free(x->picker);
    xfer_local_grid_free(x->grid);
    plan_free(x->plan);
    free(x->slots);
    free(x->sync);
    free(x->read.spans);
    free(x);
}

/* Free a finished transfer once nothing in flight can call back into it. */
void xfer_maybe_free(struct xfer *x)
{
    if (x->state != XFER_DONE || x->holds > 0 || x->report_due)
        return;
    if (uv_is_closing((uv_handle_t *)&x->timer))
        return;
    uv_close((uv_handle_t *)&x->timer, xfer_on_timer_closed);
}

uint32_t xfer_nchunks(const struct xfer *x)
{
    if (x->picker != NULL)
        return plan_picker_chunks(x->picker);
    return x->plan != NULL ? x->plan->nchunks : 0;
}

static void xfer_on_deadline(uv_timer_t *timer)
{
    struct xfer *x = timer->data;
    const char *where = x->role == XFER_LOCAL         ? "for its copies"
                        : x->state == XFER_WAIT_LINK  ? "for the link to the remote daemon"
                        : x->role == XFER_READ        ? "for the remote daemon to write back"
                        : x->state == XFER_WAIT_READY ? "for READY"
                        : x->state == XFER_QUEUED     ? "in the queue for its peer's staging share"
                        : x->role == XFER_SEND        ? "for DATA to be sent and RESULT"
                                                      : "for DATA";
    /* Waiting for the link, it says what the knocks at the peer's door met. */
    const char *why = x->state == XFER_WAIT_LINK && x->peer != NULL ? peer_link_why(x->peer) : "";
    xfer_fail(x, B10_ERR_DEADLINE, "deadline of %" PRIu64 " ms expired waiting %s (%u of %u chunks %s)%s%s",
              x->deadline_ms - x->started_ms, where, x->chunks_done, xfer_nchunks(x),
              x->role == XFER_SEND ? "sent" : "landed", why[0] ? ": " : "", why);
}

/*
 * A completion can be delivered after the deadline passed but before the
 * deadline timer ran (a stopped process resumes with both pending; libuv
 * polls before it runs timers). Acting on it would move bytes for a
 * transfer the other side already reported failed: fail it here instead.
 */
bool xfer_past_deadline(struct xfer *x)
{
    if (x->d->now_ms(x->d) < x->deadline_ms)
        return false;
    xfer_on_deadline(&x->timer);
    return true;
}

/* The peer's news of a sending transfer's link: it came up, or the transfer fails. */
static void xfer_on_link_up(struct link_user *u)
{
    xfer_send_link_up(list_entry(u, struct xfer, peer_user));
}

static void xfer_on_link_lost(struct link_user *u, b10_status_t status, const char *detail)
{
    xfer_fail(list_entry(u, struct xfer, peer_user), status, "%s", detail);
}

static const struct link_user_ops xfer_link_ops = {
    .up = xfer_on_link_up,
    .lost = xfer_on_link_lost,
};

struct xfer *xfer_new(struct b10d *d, enum xfer_role role, uint64_t id, uint32_t budget_ms)
{
    struct xfer *x = calloc(1, sizeof(*x));
    if (x == NULL)
        return NULL;
    x->nslots = d->cfg.max_in_flight;
    x->slots = calloc(x->nslots, sizeof(*x->slots));
    if (x->slots == NULL) {
        free(x);
        return NULL;
    }
    x->d = d;
    x->role = role;
    x->ops = xfer_roles[role];
    x->id = id;
    x->status = B10_IN_PROGRESS;
    list_init(&x->node);
    list_init(&x->session_node);
    list_init(&x->peer_user.node);
    x->peer_user.ops = &xfer_link_ops;
    x->peer_user.link = &x->link;
    list_init(&x->other_node);
    list_init(&x->waiter.node);
    list_init(&x->ahead_node);
    x->started_ms = d->now_ms(d);
    x->deadline_ms = x->started_ms + budget_ms;
    uv_timer_init(d->loop, &x->timer);
    x->timer.data = x;
    uv_timer_start(&x->timer, xfer_on_deadline, budget_ms, 0);
    list_insert_tail(&d->xfers, &x->node);
    d->nxfers++;
    return x;
}

b10_status_t xfer_rows_spans(struct xfer_rows *rows, char *detail, size_t detail_len)
{
    struct xfer_picks *p = rows->picks;
    if (rows->local != NULL)
        return B10_OK;
    size_t table = rows->count * SPAN_BYTES;
    if ((p->spans = malloc(2 * table)) == NULL) {
        snprintf(detail, detail_len, "out of memory for %zu spans", rows->count);
        return B10_ERR_NO_MEMORY;
    }
    /* The picks lie as the request carried them: count local indices, then count remote. */
    b10_status_t status = picks_spans(&p->local, &p->remote, p->local_rows, rows->count,
                                      p->spans, detail, detail_len);
    if (status != B10_OK) {
        free(p->spans);
        p->spans = NULL;
        return status;
    }
    rows->local = p->spans;
    rows->remote = p->spans + table;
    return B10_OK;
}

b10_status_t xfer_plan(struct b10d *d, struct xfer_rows *rows, bool remote_src,
                       struct plan **plan_p, uint64_t *ns_p, char *detail, size_t detail_len)
{
    uint64_t t0 = uv_hrtime();
    uint64_t view = staging_view_bytes(d->staging);
    const struct xfer_picks *p = rows->picks;
    size_t count = rows->count;
    b10_status_t status = B10_ERR_UNSUPPORTED;
    struct xfer_planned *ahead = rows->planned;

    if (p == NULL && ahead != NULL && ahead->remote_src == remote_src && ahead->max_chunk == view &&
        (ahead->status != B10_OK || ahead->plan != NULL)) {
        *ns_p = ahead->ns;
        if (ahead->status != B10_OK) {
            snprintf(detail, detail_len, "%s", ahead->detail);
            return ahead->status;
        }
        *plan_p = ahead->plan;
        ahead->plan = NULL;
        return B10_OK;
    }
    if (p != NULL)
        status = remote_src ? plan_build_picks(&p->remote, &p->local, p->remote_rows,
                                               p->local_rows, count, view, plan_p)
                            : plan_build_picks(&p->local, &p->remote, p->local_rows,
                                               p->remote_rows, count, view, plan_p);
    if (status == B10_ERR_NO_MEMORY)
        snprintf(detail, detail_len, "out of memory for the plan of %zu spans", count);
    /* Any other shape, and every refusal, the spans' planner decides and names. */
    if (status == B10_ERR_UNSUPPORTED) {
        status = xfer_rows_spans(rows, detail, detail_len);
        if (status == B10_OK)
            status = plan_build(remote_src ? rows->remote : rows->local,
                                remote_src ? rows->local : rows->remote, count, view, plan_p,
                                detail, detail_len);
    }
    *ns_p = uv_hrtime() - t0;
    return status;
}

void xfer_plan_ahead(const uint8_t *local, const uint8_t *remote, size_t count,
                     struct xfer_planned *planned)
{
    uint64_t t0 = uv_hrtime();
    planned->plan = NULL;
    planned->detail[0] = '\0';
    planned->status = plan_build(planned->remote_src ? remote : local,
                                 planned->remote_src ? local : remote, count, planned->max_chunk,
                                 &planned->plan, planned->detail, sizeof(planned->detail));
    planned->ns = uv_hrtime() - t0;
}

struct xfer *xfer_new_submitted(struct b10d *d, enum xfer_role role, struct session *s,
                                struct plan *plan, uint32_t deadline_ms, uint64_t checked_from,
                                uint64_t plan_ns)
{
    struct xfer *x = xfer_new(d, role, ids_new_xfer(&d->ids), xfer_budget(d, deadline_ms));
    if (x == NULL) {
        plan_free(plan);
        return NULL;
    }
    x->plan = plan;
    x->plan_ms = (double)(uv_hrtime() - checked_from) / 1e6;
    x->times.plan_ns = plan_ns;
    xfer_trace_begin(x, checked_from);
    xfer_trace(x, XS_PLANNED);
    x->session = s;
    x->uid = s->uid;
    return x;
}

/* Tags this transfer registered, in one place so that finish and fail agree. */
static void xfer_for_each_tag(struct xfer *x, void (*fn)(struct xfer *x, uint64_t tag))
{
    if (x->tags_registered)
        x->ops->each_tag(x, fn);
}

static void xfer_tag_unregister(struct xfer *x, uint64_t tag)
{
    tags_unregister(x->d->tags, tag);
}

static void xfer_tag_quarantine(struct xfer *x, uint64_t tag)
{
    tags_quarantine(x->d->tags, tag, x->d->now_ms(x->d) + x->d->cfg.quarantine_ttl_ms,
                    x->peer != NULL ? x->peer->daemon_id : 0);
}

/* The rank its sync message goes to: the other one of a local transfer, else its own. */
struct session *xfer_noticed(const struct xfer *x)
{
    if (x->role == XFER_LOCAL)
        return x->local_read ? x->from : x->to;
    return x->session;
}

/* Leave the lists of live things: the session's, the peer's, the daemon's. */
static void xfer_detach(struct xfer *x)
{
    uv_timer_stop(&x->timer);
    if (x->waiting) {
        staging_unwait(&x->waiter);
        x->waiting = false;
    }
    list_remove(&x->session_node);
    list_remove(&x->peer_user.node);
    list_remove(&x->other_node);
    list_remove(&x->node);
    list_remove(&x->ahead_node);
    x->d->nxfers--;
    if (x->session != NULL && x->role != XFER_RECV)
        x->session->nxfers--;
    if (x->admitted) {
        x->peer->in_xfers--;
        x->peer->control_held -= x->control_bytes;
        x->d->control_held -= x->control_bytes;
        x->admitted = false;
    }
    if (x->reserve_held) {
        /* Room in the peer's share: a transfer queued behind this one may begin. */
        x->peer->reserved -= x->reserve_bytes;
        x->reserve_held = false;
        staging_wake_waiters(x->d->staging);
    }
    struct session *noticed = xfer_noticed(x);
    if (x->notice_reserved > 0 && noticed != NULL)
        rank_notice_release(x->d, noticed, x->notice_reserved);
    x->notice_reserved = 0;
}

static void xfer_cancel_posted(struct xfer *x)
{
    wire_cancel(x->d->wire, x->ready_op);
    wire_cancel(x->d->wire, x->result_op);
    wire_cancel(x->d->wire, x->cancel_op);
}

void xfer_tell_peer(struct xfer *x, enum tag_kind kind, B10__Peer__Msg *msg)
{
    if (peer_send(x->peer, x->link.gen, tags_derive(&x->link, x->id, 0, kind), &msg->base) != 0)
        log_debug("transfer %016" PRIx64 ": could not send a message to peer %s", x->id,
                  x->peer != NULL ? x->peer->name : "(gone)");
}

/*
 * The views a transfer holds count against its peer's staging share
 * (--max-peer-staging), with what the peer's failed transfers left in the
 * quarantine: one peer whose transfers stall or keep failing runs out of
 * views of its own, and the others go on. A sender counts views as it takes
 * them (and waits past the share); a receiver reserves its whole window
 * before it begins (xfer_recv_begin).
 */
bool xfer_view_room(const struct xfer *x)
{
    const struct b10d *d = x->d;
    return x->role != XFER_SEND || x->peer == NULL ||
           x->peer->views_bytes + x->peer->quarantined + staging_view_bytes(d->staging) <=
               config_peer_staging(&d->cfg);
}

/* A sender's views count against its peer as it takes them; a receiver's were reserved. */
void xfer_view_count(struct xfer *x, const struct view *view)
{
    if (x->role == XFER_SEND && x->peer != NULL)
        x->peer->views_bytes += view->bytes;
}

static void xfer_view_uncount(struct xfer *x, const struct view *view)
{
    if (x->role == XFER_SEND && x->peer != NULL)
        x->peer->views_bytes -= view->bytes;
}

void xfer_role_failed(struct xfer *x, b10_status_t status, enum xfer_state was)
{
    x->d->stats.xfers_failed++;
    stats_failed(&x->d->hists, x->role, status);
}

void xfer_role_report(struct xfer *x, b10_status_t cause)
{
    if (x->session != NULL)
        xfer_tell_rank(x);
}

size_t xfer_fields(const struct xfer *x, b10_status_t status, const char *message_id,
                   struct xfer_fields *f)
{
    size_t n = 0;
    snprintf(f->xfer, sizeof(f->xfer), "TRANSFER=%016" PRIx64, x->id);
    snprintf(f->role, sizeof(f->role), "ROLE=%s", xfer_role_name(x->role));
    snprintf(f->peer, sizeof(f->peer), "PEER=%s", x->peer != NULL ? x->peer->name : "(this node)");
    snprintf(f->status, sizeof(f->status), "STATUS=%s", b10_status_name(status));
    snprintf(f->rank, sizeof(f->rank), "RANK=%s", x->local_agent);
    f->v[n++] = message_id;
    f->v[n++] = f->xfer;
    f->v[n++] = f->role;
    f->v[n++] = f->peer;
    f->v[n++] = f->status;
    f->v[n++] = f->rank;
    return n;
}

void xfer_times_first(struct xfer *x)
{
    uint64_t now = uv_hrtime();
    if (x->times.first_ns == 0)
        x->times.first_ns = now;
    struct xfer *read = x->read.parent;
    if (x->role == XFER_RECV && read != NULL && read->times.first_ns == 0)
        read->times.first_ns = now;
}

void xfer_tell_rank(struct xfer *x)
{
    /* Told only once over (quiescence before news): its end as the rank should count it. */
    x->times.ended_ns = uv_hrtime();
    xfer_trace(x, XS_TOLD);
    rank_xfer_done(x->d, x->session, x);
}

/* Success: every byte landed (R), or the receiver said so (S). */
void xfer_finish(struct xfer *x)
{
    x->state = XFER_DONE;
    x->status = B10_OK;
    xfer_detach(x);
    xfer_cancel_posted(x);
    xfer_for_each_tag(x, xfer_tag_unregister);
    x->ops->landed(x);
    xfer_trace_log(x);
    xfer_maybe_free(x);
}

bool xfer_peer_silent(b10_status_t status)
{
    return status == B10_ERR_PEER_LOST || status == B10_ERR_PEER_UNREACHABLE ||
           status == B10_ERR_PEER_PROTOCOL;
}

/*
 * Quiescence before news. A failed transfer is reported (to its rank, to
 * the other daemon, to the READ it lands for) only once nothing can still
 * write for it:
 *   R     its scatters into the rank's memory have completed;
 *   S     the receiver answered the CANCEL (it answers once its own scatters
 *         completed), when DATA had gone out and the receiver can hear;
 *   READ  the write-back landing for it has settled as R.
 * Past --settle-ms it is reported B10_ERR_UNSETTLED instead, and (R) the
 * regions its late scatters still hold are quarantined: nothing new may
 * read or write them until those copies are over.
 */
static bool xfer_unsettled(const struct xfer *x)
{
    /* B10D_FAULT_NEWS_FIRST (tests): the doctrine broken on purpose, for the chaos checker. */
    if (x->d->fault_news_first)
        return false;
    return x->scatters > 0 || x->await_ack || x->read.settling > 0;
}

void xfer_report(struct xfer *x, b10_status_t status)
{
    struct b10d *d = x->d;
    b10_status_t cause = x->status;

    x->report_due = false;
    uv_timer_stop(&x->timer);
    list_remove(&x->node);      /* from b10d.settling */
    if (x->await_ack) {
        /* No answer came within the bound: none is waited for any more. */
        x->await_ack = false;
        wire_cancel(d->wire, x->result_op);
    }
    if (status != cause) {
        char was[sizeof(x->detail)];
        snprintf(was, sizeof(was), "%s", x->detail);
        snprintf(x->detail, sizeof(x->detail), "%s, and after %u ms (--settle-ms) a copy for it "
                 "may still write its destination: %.160s", b10_status_name(cause),
                 d->cfg.settle_ms, was);
        x->status = status;
        log_warning("transfer %016" PRIx64 " (%s%s%s): %s", x->id, xfer_role_name(x->role),
                    x->peer != NULL ? ", peer " : "", x->peer != NULL ? x->peer->name : "",
                    x->detail);
    }
    x->ops->report(x, cause);
    xfer_trace_log(x);
}

void xfer_settle_check(struct xfer *x)
{
    if (x->report_due && !xfer_unsettled(x))
        xfer_report(x, x->status);
}

/* R: the regions the late scatters of x still hold take no new work until those end. */
static void xfer_stick(struct xfer *x, int by)
{
    for (uint32_t i = 0; i < x->nslots; i++) {
        struct xfer_slot *slot = &x->slots[i];
        if (slot->job == NULL || slot->stuck == (by > 0))
            continue;
        for (uint32_t r = 0; r < slot->job->refs.n; r++)
            slot->job->refs.r[r]->stuck += by;
        slot->stuck = by > 0;
    }
}

static void xfer_on_settle_bound(uv_timer_t *timer)
{
    struct xfer *x = timer->data;

    if (!x->report_due)
        return;
    xfer_stick(x, 1);
    xfer_report(x, B10_ERR_UNSETTLED);
    xfer_maybe_free(x);
}

void xfer_settle_forget(struct b10d *d, const struct session *s)
{
    struct list *pos;
    for (pos = d->settling.next; pos != &d->settling; pos = pos->next) {
        struct xfer *x = list_entry(pos, struct xfer, node);
        if (x->session == s)
            x->session = NULL;
    }
}

void xfer_settle_all(struct b10d *d)
{
    while (!list_empty(&d->settling)) {
        struct xfer *x = list_entry(d->settling.next, struct xfer, node);
        xfer_report(x, xfer_unsettled(x) ? B10_ERR_UNSETTLED : x->status);
        xfer_maybe_free(x);
    }
}

/* A READ and its write-back fail together; the READ's news waits for the write-back's copies. */
static void xfer_settle_link(struct xfer *write_back, struct xfer *read)
{
    write_back->read.settle_parent = read;
    read->read.settling++;
    read->holds++;
}

/*
 * A failed transfer's chunks in flight: their wire operations cancelled, and
 * each view that UCX or a copy may still touch quarantined, not reused;
 * views a send gathered before READY, no DATA of which went out, come back
 * clean instead.
 */
static void xfer_fail_slots(struct xfer *x, b10_status_t status, enum xfer_state was)
{
    struct b10d *d = x->d;

    for (uint32_t i = 0; i < x->nslots; i++) {
        struct xfer_slot *slot = &x->slots[i];
        if (!slot->busy)
            continue;
        if (slot->op != NULL)
            wire_cancel(d->wire, slot->op);
        /* A direct copy (local) has no view: its regions hold it, its settling waits for it. */
        if (slot->view == NULL)
            continue;
        /*
         * Gathered ahead of READY: no DATA of this transfer went out, so nothing
         * but our own gather wrote its views. One that ended is clean; one still
         * running gives its view back when it ends well (xfer_copy_ended).
         */
        if (x->role == XFER_SEND && was != XFER_RUNNING && (slot->parked || slot->copying)) {
            if (slot->parked) {
                slot->parked = false;
                xfer_slot_release(slot);
            } else {
                slot->release_at_end = true;
                d->gathers_ahead_ending++;
            }
            continue;
        }
        /*
         * The view may still be written by UCX or read by a copy: it sits out
         * its TTL. The slot keeps pointing at it so that the completion still
         * to come can release its hold.
         */
        quarantine_add(d->quarantine, QUARANTINE_VIEW, slot->view->id, slot->view->bytes, status,
                       x->id, x->peer ? x->peer->daemon_id : 0, slot->view,
                       x->peer ? &x->peer->quarantined : NULL);
        xfer_view_uncount(x, slot->view);
    }
}

void xfer_fail(struct xfer *x, b10_status_t status, const char *fmt, ...)
{
    struct b10d *d = x->d;
    va_list ap;

    if (x->state == XFER_DONE) {
        log_debug("transfer %016" PRIx64 ": already finished, ignoring %s", x->id,
                  b10_status_name(status));
        return;
    }
    va_start(ap, fmt);
    vsnprintf(x->detail, sizeof(x->detail), fmt, ap);
    va_end(ap);
    x->status = status;
    enum xfer_state was = x->state;
    x->state = XFER_DONE;
    xfer_detach(x);
    x->report_due = true;
    struct xfer_fields f;
    size_t nf = xfer_fields(x, status, LOG_MESSAGE_ID_XFER_FAILED, &f);
    log_fields_at(LOG_LEVEL_WARNING, f.v, nf, "transfer %016" PRIx64 " (%s, %s %s) failed: %s: %s",
                  x->id, xfer_role_name(x->role), x->role == XFER_SEND ? "to" : "from",
                  x->remote_agent, b10_status_name(status), x->detail);

    /*
     * A sender whose DATA went out waits for the receiver to say its copies
     * are over: its RESULT, answering the CANCEL below (or its own failure).
     */
    bool peer_silent = xfer_peer_silent(status);
    x->await_ack = x->role == XFER_SEND && x->control_sent && !peer_silent && !x->peer_settled &&
                   was == XFER_RUNNING && x->data_posted && x->result_op != NULL;

    /* Cancel what can be cancelled; trust nothing to have stopped. */
    wire_cancel(d->wire, x->ready_op);
    wire_cancel(d->wire, x->cancel_op);
    if (!x->await_ack)
        wire_cancel(d->wire, x->result_op);
    xfer_fail_slots(x, status, was);
    if (x->tags_registered) {
        xfer_for_each_tag(x, xfer_tag_quarantine);
        quarantine_add(d->quarantine, QUARANTINE_TAGS, x->id, x->ops->ntags(x), status, x->id,
                       x->peer ? x->peer->daemon_id : 0, NULL, NULL);
    }
    quarantine_add(d->quarantine, QUARANTINE_XFER_ID, x->id, 0, status, x->id,
                   x->peer ? x->peer->daemon_id : 0, NULL, NULL);

    x->ops->failed(x, status, was);
    /* A READ and its write-back fail together: whichever failed first, with its reason. */
    if (x->read.child != NULL) {
        struct xfer *child = x->read.child;
        x->read.child = NULL;
        child->read.parent = NULL;
        xfer_settle_link(child, x);
        xfer_fail(child, B10_ERR_CANCELLED, "the READ it served failed: %s", x->detail);
    }
    if (x->read.parent != NULL) {
        struct xfer *parent = x->read.parent;
        x->read.parent = NULL;
        parent->read.child = NULL;
        xfer_settle_link(x, parent);
        xfer_fail(parent, status, "%s", x->detail);
    }
    /* The news now, or once nothing can still write for it (bounded). */
    if (x->report_due && xfer_unsettled(x)) {
        list_insert_tail(&d->settling, &x->node);
        uv_timer_start(&x->timer, xfer_on_settle_bound, d->cfg.settle_ms, 0);
    } else if (x->report_due) {
        xfer_report(x, status);
    }
    xfer_maybe_free(x);
}

void xfer_cancel(struct xfer *x)
{
    xfer_fail(x, B10_ERR_CANCELLED, "cancelled by the client");
}

void xfer_cancel_admin(struct xfer *x, const char *who)
{
    xfer_fail(x, B10_ERR_CANCELLED, "cancelled by %s", who);
}

struct xfer_slot *xfer_free_slot(struct xfer *x)
{
    for (uint32_t i = 0; i < x->nslots; i++)
        if (!x->slots[i].busy)
            return &x->slots[i];
    return NULL;
}

/* A slot's chunk is over and its view clean: give both back. */
void xfer_slot_release(struct xfer_slot *slot)
{
    struct view *view = slot->view;
    slot->busy = false;
    slot->view = NULL;
    if (view == NULL)
        return;     /* a direct copy's slot (local): no view */
    xfer_view_uncount(slot->x, view);
    staging_put(slot->x->d->staging, view);
}

/*
 * An operation on a slot completed (a copy, a DATA send or receive): release
 * its holds. Returns true when the transfer still runs and the completion is
 * to be acted upon; a completion after the funnel only counts as late.
 */
bool xfer_slot_op_done(struct xfer_slot *slot)
{
    struct xfer *x = slot->x;

    slot->op = NULL;
    x->holds--;
    if (slot->view != NULL)
        slot->view->holds--;
    if (x->state != XFER_DONE)
        return true;
    if (x->status == B10_OK)
        xfer_slot_release(slot);    /* a send completing after RESULT: its view is clean */
    else
        x->d->stats.late_completions++;
    xfer_maybe_free(x);
    return false;
}

/* ---------------------------------------------------------------- copies */

struct xfer_copy_ctx {
    struct copy_job *job;
    uint8_t *view_pos;      /* next byte of the view */
    bool gather;
    bool open_only;         /* admitted only through regions open to the node */
};

static b10_status_t xfer_copy_emit(void *arg, struct region *r, uint64_t offset, uint64_t n)
{
    struct xfer_copy_ctx *ctx = arg;
    /* Checked again at each copy: the rank may have put a closed region where an open one was. */
    if (ctx->open_only && !r->open)
        return B10_ERR_PERMISSION;
    uint8_t *mem = r->base + offset;
    b10_status_t status = ctx->gather ? copy_job_add(ctx->job, r, ctx->view_pos, mem, n)
                                      : copy_job_add(ctx->job, r, mem, ctx->view_pos, n);
    ctx->view_pos += n;
    return status;
}

/*
 * Copy one chunk between its view and the local rank's memory (gather on
 * the sender, scatter on the receiver), translating the rank's addresses
 * through its registrations as they are now.
 */
b10_status_t xfer_copy_chunk(struct xfer_slot *slot, bool gather, copy_done_fn *done)
{
    struct xfer *x = slot->x;
    const struct plan_chunk *chunk = &x->plan->chunks[slot->chunk];
    /* Whose memory: the rank's own, or for a local transfer the side of the copy. */
    struct session *s = x->role != XFER_LOCAL ? x->session : gather ? x->from : x->to;
    /* The other rank's side is the one admitted through open regions only, if so. */
    bool others = x->role == XFER_RECV ? !gather
                  : x->role == XFER_LOCAL ? gather == x->local_read : gather;

    if (s == NULL)
        return B10_ERR_CLIENT_GONE;
    struct xfer_copy_ctx ctx = { copy_job_new(x->d, gather, done, slot, slot->chunk),
                                 slot->view->base, gather, x->open_only && others };
    if (ctx.job == NULL)
        return B10_ERR_NO_MEMORY;
    ctx.job->flat_out = x->role == XFER_LOCAL;
    for (uint32_t p = chunk->first; p < chunk->first + chunk->count; p++) {
        const struct plan_piece *piece = &x->plan->pieces[p];
        b10_status_t status = mem_table_walk(&s->mem, gather ? piece->src : piece->dst,
                                             piece->len, xfer_copy_emit, &ctx);
        if (status != B10_OK) {
            copy_job_free(ctx.job);
            return status;
        }
    }
    /* A view that meets a GPU is pinned first, once (a daemon without VRAM pins none). */
    b10_status_t status = B10_OK;
    for (uint32_t i = 0; i < ctx.job->nsegs && ctx.job->host_segs < ctx.job->nsegs; i++)
        if (ctx.job->segs[i].device >= 0) {
            status = staging_pin(x->d->staging, slot->view, ctx.job->segs[i].device);
            break;
        }
    if (status != B10_OK) {
        copy_job_free(ctx.job);
        return status;
    }
    /* The chunk's checksum: made where its bytes were gathered, checked before they land. */
    size_t len = (size_t)(ctx.view_pos - slot->view->base);
    enum config_verify verify = x->d->cfg.verify_data;
    if (gather && (verify == CONFIG_VERIFY_ON ||
                   (verify == CONFIG_VERIFY_AUTO && copy_sums_device(ctx.job, len))))
        status = copy_job_sum(ctx.job, COPY_SUM_MAKE, slot->view->base, len,
                              checksum_seed(x->id, slot->chunk), 0, NULL);
    else if (!gather && verify != CONFIG_VERIFY_OFF && slot->has_sum)
        status = copy_job_sum(ctx.job, COPY_SUM_CHECK, slot->view->base, len,
                              checksum_seed(x->id, slot->chunk), slot->sum,
                              checksum_trailer_table(slot->view->base, len));
    if (status != B10_OK) {
        copy_job_free(ctx.job);
        return status;
    }
    x->holds++;
    slot->view->holds++;
    slot->copying = true;
    slot->phase_ns = uv_hrtime();
    xfer_times_first(x);
    xfer_trace_step(x, gather ? XS_GATHER : XS_SCATTER, slot->chunk);
    if (!gather) {
        x->scatters++;
        slot->job = ctx.job;
    }
    copy_job_submit(ctx.job);
    return B10_OK;
}

static void xfer_on_view_free(struct staging_waiter *w)
{
    struct xfer *x = list_entry(w, struct xfer, waiter);
    x->waiting = false;
    if (x->state == XFER_QUEUED)
        xfer_recv_begin(x);
    else if (x->role == XFER_SEND)
        xfer_send_pump(x);
    else if (x->role == XFER_LOCAL)
        xfer_local_pump(x);
    else
        xfer_recv_pump(x);
}

/*
 * Give back every view a send gathered ahead of READY and holds parked: a
 * transfer waits for a view and the pool has none, and none may idle for a
 * receiver's answer meanwhile (that receiver may be waiting on the very
 * transfers that wait here). Their transfers gather those chunks again after READY. The views
 * are taken from their slots first and put back after, so that the waiters
 * woken by each put find every transfer already as it will stay.
 */
void xfer_ahead_reclaim(struct b10d *d)
{
    struct list views;
    list_init(&views);
    while (!list_empty(&d->ahead_parked)) {
        struct xfer *x = list_entry(d->ahead_parked.next, struct xfer, ahead_node);
        list_remove(&x->ahead_node);
        for (uint32_t i = 0; i < x->nslots; i++) {
            struct xfer_slot *slot = &x->slots[i];
            if (!slot->busy || !slot->parked)
                continue;
            struct view *view = slot->view;
            slot->parked = false;
            slot->busy = false;
            slot->view = NULL;
            xfer_view_uncount(x, view);
            list_insert_tail(&views, &view->node);
        }
        x->next_chunk = 0;
        x->gather_ahead = false;
    }
    while (!list_empty(&views)) {
        struct view *view = list_entry(views.next, struct view, node);
        list_remove(&view->node);
        staging_put(d->staging, view);
    }
}

void xfer_wait_for_view(struct xfer *x)
{
    if (x->waiting)
        return;
    x->waiter.wake = xfer_on_view_free;
    x->waiting = true;
    staging_wait(x->d->staging, &x->waiter);
    /* Only when the pool has none: a wait for a peer's share or the receive cap
     * gains nothing from them, and their sends would gather twice. */
    if (staging_free_views(x->d->staging) == 0)
        xfer_ahead_reclaim(x->d);
}

/*
 * Open a reply (READY, RESULT, CANCEL) under the transfer's link: B10_OK;
 * B10_ERR_UNAUTHENTICATED when it did not open (dropped and counted; the
 * caller posts its receive again, for the real one); B10_ERR_PEER_PROTOCOL
 * when it opened and is not what was awaited.
 */
b10_status_t xfer_decode_reply(struct xfer *x, const uint8_t *buf, size_t length,
                                      B10__Peer__Msg__BodyCase want, B10__Peer__Msg **msg_p)
{
    B10__Peer__Msg *msg;
    b10_status_t status = peer_open(x->peer, x->link.gen, buf, length, &msg);

    if (status != B10_OK)
        return status;
    if (msg->body_case != want) {
        b10__peer__msg__free_unpacked(msg, NULL);
        x->d->stats.peer_protocol_errors++;
        return B10_ERR_PEER_PROTOCOL;
    }
    *msg_p = msg;
    return B10_OK;
}

/* Post the receive of a small message of the peer's for x (its tag registered); false: x failed. */
bool xfer_post_reply(struct xfer *x, uint64_t tag, uint8_t *buf, size_t length,
                            wire_done_cb *cb, struct wire_op **op_p, const char *what)
{
    if (wire_recv(x->d->wire, x->peer->ep, tag, buf, length, NULL, cb, x, op_p) != B10_OK) {
        xfer_fail(x, B10_ERR_INTERNAL, "posting the %s receive failed", what);
        return false;
    }
    x->holds++;
    return true;
}

/* A region that a failed transfer's late scatter may still write takes no new work. */
static b10_status_t xfer_check_emit(void *arg, struct region *r, uint64_t offset, uint64_t n)
{
    return r->stuck > 0 ? B10_ERR_UNSETTLED : B10_OK;
}

#define XFER_STUCK_WHY "lies in a region that a failed transfer's copy may still write (--settle-ms passed)"

bool xfer_grid_inside(struct mem_table *mem, const struct picks_grid *grid, size_t count)
{
    if (grid->nbases > count)
        return false;
    /* A checked grid's rows end below 2^64 (picks_grid_check). */
    uint64_t reach = (grid->per_base - 1) * grid->stride + grid->length;
    for (size_t b = 0; b < grid->nbases; b++)
        if (mem_table_walk(mem, frame_get_u64(grid->bases + b * 8), reach, xfer_check_emit,
                           NULL) != B10_OK)
            return false;
    return true;
}

/* R: every destination byte of the plan must lie in the target rank's regions. */
b10_status_t xfer_check_dst(const struct plan *plan, struct mem_table *mem,
                            const struct picks_grid *grid, char *detail, size_t detail_len)
{
    if (grid != NULL && xfer_grid_inside(mem, grid, plan->npieces))
        return B10_OK;
    for (uint32_t i = 0; i < plan->npieces; i++) {
        const struct plan_piece *p = &plan->pieces[i];
        struct region *r = mem_table_hinted(mem, p->dst, p->len);
        b10_status_t st = r != NULL ? xfer_check_emit(NULL, r, 0, 0)
                                    : mem_table_walk(mem, p->dst, p->len, xfer_check_emit, NULL);
        if (st == B10_ERR_UNSETTLED) {
            snprintf(detail, detail_len, "span 0x%" PRIx64 "+%" PRIu64 " " XFER_STUCK_WHY, p->dst,
                     p->len);
            return st;
        }
        if (st != B10_OK) {
            snprintf(detail, detail_len, "span 0x%" PRIx64 "+%" PRIu64 " lies outside the "
                     "destination rank's registered memory", p->dst, p->len);
            return B10_ERR_REMOTE_REJECTED;
        }
    }
    return B10_OK;
}

/* Admission limits shared by every transfer a rank starts. */
b10_status_t xfer_admit_limits(struct session *s, size_t count, char *detail,
                                      size_t detail_len)
{
    struct b10d *d = s->d;

    if (d->stopping) {
        snprintf(detail, detail_len, "the daemon is draining: it admits no new transfers");
        return B10_ERR_DRAINING;
    }
    if (count > d->cfg.max_spans) {
        snprintf(detail, detail_len, "%zu spans exceed --max-spans %u", count, d->cfg.max_spans);
        return B10_ERR_TOO_LARGE;
    }
    if (s->nxfers >= d->cfg.max_xfers) {
        snprintf(detail, detail_len, "%u transfers already in flight (--max-xfers)", s->nxfers);
        return B10_ERR_BUSY;
    }
    if (quarantine_bytes(d->quarantine) > d->cfg.quarantine_budget) {
        snprintf(detail, detail_len, "%" PRIu64 " bytes of staging are quarantined (budget %" PRIu64 ")",
                 quarantine_bytes(d->quarantine), d->cfg.quarantine_budget);
        return B10_ERR_STAGING_EXHAUSTED;
    }
    return B10_OK;
}

/*
 * The rank's own side of a request against its registrations, and the
 * total against its limit: before planning, since the plan's size follows
 * the lengths, which are only the client's claim until checked.
 */
b10_status_t xfer_check_local(struct session *s, struct xfer_rows *rows, bool remote_side,
                              char *detail, size_t detail_len)
{
    const struct picks_grid *grid = rows->picks == NULL ? NULL
                                    : remote_side ? &rows->picks->remote : &rows->picks->local;
    size_t count = rows->count;
    uint64_t total = 0;

    if (grid != NULL && !__builtin_mul_overflow((uint64_t)count, grid->length, &total) &&
        total <= s->d->cfg.max_xfer_bytes && xfer_grid_inside(&s->mem, grid, count))
        return B10_OK;
    b10_status_t status = xfer_rows_spans(rows, detail, detail_len);
    if (status != B10_OK)
        return status;
    const uint8_t *spans = remote_side ? rows->remote : rows->local;
    total = 0;

    for (size_t i = 0; i < count; i++) {
        uint64_t addr = frame_get_u64(spans + i * SPAN_BYTES);
        uint64_t len = frame_get_u64(spans + i * SPAN_BYTES + 8);
        if (total + len < total || total + len > s->d->cfg.max_xfer_bytes) {
            snprintf(detail, detail_len, "the request exceeds --max-xfer-bytes %" PRIu64,
                     s->d->cfg.max_xfer_bytes);
            return B10_ERR_TOO_LARGE;
        }
        total += len;
        struct region *r = len != 0 ? mem_table_hinted(&s->mem, addr, len) : NULL;
        b10_status_t st = len == 0 ? B10_OK
                          : r != NULL ? xfer_check_emit(NULL, r, 0, 0)
                          : mem_table_walk(&s->mem, addr, len, xfer_check_emit, NULL);
        if (st == B10_ERR_UNSETTLED) {
            snprintf(detail, detail_len, "local span %zu (0x%" PRIx64 "+%" PRIu64 ") " XFER_STUCK_WHY,
                     i, addr, len);
            return st;
        }
        if (st != B10_OK) {
            snprintf(detail, detail_len, "local span %zu (0x%" PRIx64 "+%" PRIu64 ") lies outside "
                     "this rank's registered memory", i, addr, len);
            return B10_ERR_NOT_REGISTERED;
        }
    }
    return B10_OK;
}

b10_status_t xfer_set_sync(struct xfer *x, const uint8_t *sync, size_t length)
{
    if (length == 0)
        return B10_OK;
    x->sync = malloc(length);
    if (x->sync == NULL)
        return B10_ERR_NO_MEMORY;
    memcpy(x->sync, sync, length);
    x->sync_length = length;
    return B10_OK;
}

uint32_t xfer_budget(struct b10d *d, uint32_t deadline_ms)
{
    uint32_t budget = deadline_ms != 0 ? deadline_ms : d->cfg.deadline_ms;
    return budget < d->cfg.max_deadline_ms ? budget : d->cfg.max_deadline_ms;
}

/* Undo a transfer made here that never started: nothing posted, nothing sent. */
void xfer_discard(struct xfer *x)
{
    x->state = XFER_DONE;
    xfer_detach(x);
    x->d->stats.xfers_submitted--;
    xfer_maybe_free(x);
}

b10_status_t xfer_submit(struct session *s, const B10__SubmitXfer *req,
                         struct xfer_picks *picks, struct xfer_planned *planned,
                         struct xfer **xfer_p, char *detail, size_t detail_len)
{
    struct xfer_rows rows = { req->local_spans.len / SPAN_BYTES, req->local_spans.data,
                              req->remote_spans.data, NULL, planned };
    if (picks != NULL)
        rows = (struct xfer_rows){ picks->count, NULL, NULL, picks, NULL };

    if (req->op != B10__OP__OP_WRITE && req->op != B10__OP__OP_READ) {
        snprintf(detail, detail_len, "unknown operation %d", (int)req->op);
        return B10_ERR_UNSUPPORTED;
    }
    if (picks == NULL && (req->local_spans.len % SPAN_BYTES != 0 ||
                          req->remote_spans.len != req->local_spans.len || rows.count == 0)) {
        snprintf(detail, detail_len, "span tables must be equal, non-empty lists of 16-byte spans");
        return B10_ERR_INVALID_ARG;
    }
    /* Capped without a word, a deadline would change under the caller: refuse it instead. */
    if (req->deadline_ms > s->d->cfg.max_deadline_ms) {
        snprintf(detail, detail_len, "deadline_ms %u exceeds this daemon's --max-deadline-ms %u "
                 "(0: its default, %u ms)", req->deadline_ms, s->d->cfg.max_deadline_ms,
                 s->d->cfg.deadline_ms);
        return B10_ERR_INVALID_ARG;
    }
    if (req->sync_msg.len > B10_SYNC_MSG_MAX) {
        snprintf(detail, detail_len, "a sync message holds at most %d bytes", B10_SYNC_MSG_MAX);
        return B10_ERR_TOO_LARGE;
    }
    struct remote_agent *agent;
    b10_status_t status = rank_agent_use(s->d, s, req->remote_agent, &agent, detail, detail_len);
    if (status != B10_OK)
        return status;
    /* Both ranks here: the bytes go from one mapping to the other, not over the wire. */
    if (peer_is_self(agent->peer))
        return xfer_local_new(s, agent->peer, req, &rows, xfer_p, detail, detail_len);
    if (req->op == B10__OP__OP_READ)
        return xfer_read_new(s, agent->peer, req->remote_agent, req, &rows, xfer_p, detail,
                             detail_len);
    return xfer_send_new(s, agent->peer, req->remote_agent, XFER_SEND, &rows, req->deadline_ms,
                         req->sync_msg.data, req->sync_msg.len, xfer_p, detail, detail_len);
}

void xfer_start(struct xfer *x)
{
    if (x->role == XFER_LOCAL) {
        x->state = XFER_RUNNING;
        xfer_pipe_start(x);
        xfer_local_pump(x);
        return;
    }
    b10_status_t status = peer_use(x->peer, &x->peer_user);
    if (status == B10_OK)
        xfer_send_link_up(x);
    else if (status != B10_IN_PROGRESS)
        xfer_fail(x, status, "cannot reach the remote daemon of '%.200s'", x->remote_agent);
}

b10_status_t xfer_data_post(struct xfer_slot *slot, bool send, wire_done_cb *cb)
{
    struct xfer *x = slot->x;
    struct view *view = slot->view;
    uint64_t tag = tags_derive(&x->link, x->id, slot->chunk, TAG_KIND_DATA);
    /* The chunk's bytes and, after them in the view, its checksum trailer: one message. */
    size_t length = checksum_message_bytes(x->plan->chunks[slot->chunk].bytes);

    if (x->plan->nchunks == 1)
        return send ? wire_send(x->peer->ep, tag, view->base, length, view->memh, cb, slot,
                                &slot->op)
                    : wire_recv(x->d->wire, x->peer->ep, tag, view->base, length, view->memh, cb,
                                slot, &slot->op);
    return send ? wire_send_bulk(x->peer->ep, slot->chunk, tag, view->base, length, view->memh, cb,
                                 slot, &slot->op)
                : wire_recv_bulk(x->peer->ep, slot->chunk, tag, view->base, length, view->memh,
                                 cb, slot, &slot->op);
}

static void xfer_copy_failed(struct xfer *x, struct xfer_slot *slot, const struct copy_job *job,
                             b10_status_t status);

/*
 * A gather ahead of READY that ended after its transfer failed: its view
 * back to staging when it ended well, else into quarantine, where any
 * other failed copy's view goes.
 */
static void xfer_ahead_ended(struct xfer_slot *slot, b10_status_t status)
{
    struct xfer *x = slot->x;
    struct view *view = slot->view;

    slot->release_at_end = false;
    x->d->gathers_ahead_ending--;
    x->holds--;
    view->holds--;
    if (status == B10_OK) {
        xfer_slot_release(slot);
    } else {
        x->d->stats.late_completions++;
        quarantine_add(x->d->quarantine, QUARANTINE_VIEW, view->id, view->bytes, status, x->id,
                       x->peer ? x->peer->daemon_id : 0, view,
                       x->peer ? &x->peer->quarantined : NULL);
        xfer_view_uncount(x, view);
    }
    xfer_maybe_free(x);
}

bool xfer_copy_ended(struct xfer_slot *slot, struct copy_job *job, b10_status_t status)
{
    struct xfer *x = slot->x;
    bool writes = !job->gather;

    slot->copying = false;
    if (slot->release_at_end) {
        xfer_ahead_ended(slot, status);
        return false;
    }
    if (writes)
        xfer_scatter_over(x, slot, job);
    if (!xfer_slot_op_done(slot)) {
        /* Failed already: its news may have waited for this copy. */
        if (writes) {
            xfer_settle_check(x);
            xfer_maybe_free(x);
        }
        return false;
    }
    if (status != B10_OK) {
        xfer_copy_failed(x, slot, job, status);
        return false;
    }
    xfer_pipe_copy_done(slot, job);
    return true;
}

/* Seal a gathered chunk: its checksum into the trailer after it (and the fault hook's flip). */
void xfer_chunk_seal(struct xfer_slot *slot, const struct copy_job *job)
{
    struct xfer *x = slot->x;
    struct b10d *d = x->d;
    size_t len = x->plan->chunks[slot->chunk].bytes;

    slot->has_sum = job->sum_mode == COPY_SUM_MAKE && job->sum_done;
    slot->sum = job->sum;
    checksum_trailer_put(slot->view->base, len, job->block_sums, slot->sum, slot->has_sum);
    if (d->fault_flip_every > 0 && ++d->fault_flip_seen % d->fault_flip_every == 0 && len > 0) {
        slot->view->base[len / 2] ^= 0x20;
        log_warning("fault hook: flipped byte %zu of chunk %u of transfer %016" PRIx64
                    " after its checksum", len / 2, slot->chunk, x->id);
    }
}

void xfer_chunk_corrupt(struct xfer *x, uint32_t chunk, const char *what)
{
    const char *from = x->peer != NULL ? x->peer->name : "this daemon's own staging";
    x->d->stats.chunks_corrupt++;
    if (x->peer != NULL)
        x->peer->counters.corrupt++;
    log_warning("transfer %016" PRIx64 ": chunk %u from %s %s: not scattered, its view "
                "quarantined", x->id, chunk, from, what);
    xfer_fail(x, B10_ERR_DATA_CORRUPT, "chunk %u from %.200s %s: none of its bytes was written",
              chunk, from, what);
}

/*
 * A copy met a hole of a rank's memfd and stopped there (copy.h): a page
 * nobody allocated, which this daemon will not allocate for the rank, for
 * its own memory cgroup would pay. The rank hears whose memory, where, and
 * what to do: the detail reaches a remote sender too (in RESULT, 200
 * bytes of it), so the advice comes first.
 */
static void xfer_copy_hole(struct xfer *x, struct xfer_slot *slot, const struct copy_job *job)
{
    const struct region *r = NULL;
    uint64_t addr = 0;
    bool written = !job->gather;
    bool known = copy_job_hole(job, &r, &addr, &written);
    const struct session *whose = x->role != XFER_LOCAL ? NULL : written ? x->to : x->from;
    const char *rank = whose != NULL ? whose->agent : x->local_agent;

    x->d->stats.xfers_not_populated++;
    xfer_fail(x, B10_ERR_NOT_POPULATED, "write every page of the region first (touch it, "
              "MAP_POPULATE, MADV_POPULATE_WRITE; fallocate alone is not enough): chunk %u met a "
              "hole of '%.40s' at 0x%" PRIx64 " (region %" PRIu64 ")", slot->chunk, rank,
              known ? addr : 0, known ? r->id : 0);
}

/*
 * A copy failed: how the transfer fails. A chunk that failed its checksum
 * was not scattered (copy_job_sum); a rank's memory reached through /proc
 * may be gone; a memfd's may have a hole; anything else is this daemon's
 * fault.
 */
static void xfer_copy_failed(struct xfer *x, struct xfer_slot *slot, const struct copy_job *job,
                             b10_status_t status)
{
    const char *what = !job->gather ? "scatter" : "gather";
    switch (status) {
    case B10_ERR_DATA_CORRUPT:
        xfer_chunk_corrupt(x, slot->chunk, "failed its checksum");
        return;
    case B10_ERR_NOT_POPULATED:
        xfer_copy_hole(x, slot, job);
        return;
    case B10_ERR_CLIENT_GONE:
    case B10_ERR_IO:
        xfer_fail(x, status, "%s of chunk %u: %s", what, slot->chunk,
                  status == B10_ERR_IO ? "the rank's memory is no longer mapped"
                                       : "the rank's address space is gone");
        return;
    default:
        xfer_fail(x, B10_ERR_INTERNAL, "%s of chunk %u failed", what, slot->chunk);
    }
}

void xfer_fail_dst(struct xfer *x, b10_status_t st, uint32_t chunk, const char *rank)
{
    /* The target deregistered or left mid-transfer: to the sender, the remote side refusing. */
    xfer_fail(x, st == B10_ERR_NOT_REGISTERED ? B10_ERR_REMOTE_REJECTED : st,
              "copying chunk %u into %s: %s", chunk, rank,
              st == B10_ERR_NOT_REGISTERED ? "destination no longer registered"
              : st == B10_ERR_PERMISSION   ? "destination no longer in a region open to the node"
                                           : b10_status_str(st));
}

/* A scatter ended: one fewer that can write for x; regions it held stuck take work again. */
void xfer_scatter_over(struct xfer *x, struct xfer_slot *slot, struct copy_job *job)
{
    x->scatters--;
    if (slot->stuck) {
        for (uint32_t r = 0; r < job->refs.n; r++)
            job->refs.r[r]->stuck--;
        slot->stuck = false;
        log_notice("transfer %016" PRIx64 ": its late scatter of chunk %u ended; its regions "
                   "take work again", x->id, slot->chunk);
    }
    slot->job = NULL;
}

bool xfer_name_ok(const char *name)
{
    size_t n = strnlen(name, 256);
    return n > 0 && n < 256;
}

/*
 * What one peer may have this daemon hold for it (--max-peer-xfers,
 * --max-peer-control, --min-deadline-ms, --peer-quarantine-bytes): B10_OK,
 * or the refusal and why.
 */
b10_status_t xfer_peer_limits(struct peer *peer, uint32_t deadline_ms, size_t control_bytes,
                                     char *detail, size_t detail_len)
{
    const struct config *cfg = &peer->d->cfg;

    if (peer->in_xfers >= cfg->max_peer_xfers) {
        snprintf(detail, detail_len, "%u of its transfers are in flight here (--max-peer-xfers)",
                 peer->in_xfers);
        return B10_ERR_BUSY;
    }
    if (peer->control_held + control_bytes > cfg->max_peer_control) {
        snprintf(detail, detail_len, "its transfers here hold %" PRIu64 " bytes of CONTROL "
                 "(--max-peer-control %" PRIu64 ")", peer->control_held, cfg->max_peer_control);
        return B10_ERR_BUSY;
    }
    /* A name is only a claim any key holder can make: all peers together are bounded too. */
    if (peer->d->control_held + control_bytes > XFER_CONTROL_HELD_PEERS * cfg->max_peer_control) {
        snprintf(detail, detail_len, "the transfers of all remote daemons hold %" PRIu64 " bytes of "
                 "CONTROL here (%d x --max-peer-control)", peer->d->control_held,
                 XFER_CONTROL_HELD_PEERS);
        return B10_ERR_BUSY;
    }
    if (deadline_ms < cfg->min_deadline_ms) {
        snprintf(detail, detail_len, "%u ms left is below --min-deadline-ms %u", deadline_ms,
                 cfg->min_deadline_ms);
        return B10_ERR_DEADLINE;
    }
    if (peer->quarantined > config_peer_quarantine(cfg)) {
        snprintf(detail, detail_len, "its failed transfers left %" PRIu64 " bytes of staging in "
                 "the quarantine (--peer-quarantine-bytes %" PRIu64 ")", peer->quarantined,
                 config_peer_quarantine(cfg));
        return B10_ERR_STAGING_EXHAUSTED;
    }
    return B10_OK;
}
