/* xfer.c — see xfer.h. */
#include "xfer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "auth.h"
#include "b10.pb-c.h"
#include "copy.h"
#include "frame.h"
#include "peer.h"
#include "peer.pb-c.h"
#include "plan.h"
#include "quarantine.h"
#include "session.h"
#include "wire.h"

#define SPAN_BYTES 16
/* CONTROL bytes all peers' admitted transfers may hold, in --max-peer-control. */
#define XFER_CONTROL_HELD_PEERS 4

const char *xfer_role_name(enum xfer_role role)
{
    return role == XFER_SEND ? "send" : role == XFER_RECV ? "recv" : role == XFER_READ ? "read" : "local";
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

static void xfer_pipe_start(struct xfer *x)
{
    x->pipe.idle_since_ns = uv_hrtime();
    x->pipe.progress_ns0 = wire_progress_ns(x->d->wire);
}

static void xfer_pipe_copy_done(struct xfer_slot *slot, const struct copy_job *job)
{
    slot->x->pipe.copy_ns += uv_hrtime() - slot->phase_ns;
    slot->x->pipe.gpu_ms += job->gpu_ms;
    slot->x->pipe.copies++;
}

static void xfer_pipe_wire_begin(struct xfer_slot *slot)
{
    struct xfer_pipe *p = &slot->x->pipe;
    slot->phase_ns = uv_hrtime();
    if (p->on_wire++ == 0)
        p->wire_idle_ns += slot->phase_ns - p->idle_since_ns;
}

static void xfer_pipe_wire_end(struct xfer_slot *slot)
{
    struct xfer_pipe *p = &slot->x->pipe;
    uint64_t now = uv_hrtime();
    p->wire_ns += now - slot->phase_ns;
    p->wire_ops++;
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
static void xfer_pipe_describe(const struct xfer *x, char *out, size_t size)
{
    const struct xfer_pipe *p = &x->pipe;
    uint32_t nc = p->copies > 0 ? p->copies : 1, nw = p->wire_ops > 0 ? p->wire_ops : 1;
    if (x->role == XFER_LOCAL) {
        snprintf(out, size, "gather and scatter %.2f ms (GPU %.3f) a copy on average, %u copies",
                 p->copy_ns / 1e6 / nc, p->gpu_ms / nc, p->copies);
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
    plan_free(x->plan);
    free(x->slots);
    free(x->sync);
    free(x->read_spans);
    free(x);
}

/* Free a finished transfer once nothing in flight can call back into it. */
static void xfer_maybe_free(struct xfer *x)
{
    if (x->state != XFER_DONE || x->holds > 0 || x->report_due)
        return;
    if (uv_is_closing((uv_handle_t *)&x->timer))
        return;
    uv_close((uv_handle_t *)&x->timer, xfer_on_timer_closed);
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
    xfer_fail(x, B10_ERR_DEADLINE, "deadline of %" PRIu64 " ms expired waiting %s (%u of %u chunks %s)",
              x->deadline_ms - x->started_ms, where, x->chunks_done, x->plan ? x->plan->nchunks : 0,
              x->role == XFER_SEND ? "sent" : "landed");
}

/*
 * A completion can be delivered after the deadline passed but before the
 * deadline timer ran (a stopped process resumes with both pending; libuv
 * polls before it runs timers). Acting on it would move bytes for a
 * transfer the other side already reported failed: fail it here instead.
 */
static bool xfer_past_deadline(struct xfer *x)
{
    if (x->d->now_ms(x->d) < x->deadline_ms)
        return false;
    xfer_on_deadline(&x->timer);
    return true;
}

static struct xfer *xfer_new(struct b10d *d, enum xfer_role role, uint64_t id, uint32_t budget_ms)
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
    x->id = id;
    x->status = B10_IN_PROGRESS;
    list_init(&x->node);
    list_init(&x->session_node);
    list_init(&x->peer_node);
    list_init(&x->other_node);
    list_init(&x->waiter.node);
    x->started_ms = d->now_ms(d);
    x->deadline_ms = x->started_ms + budget_ms;
    uv_timer_init(d->loop, &x->timer);
    x->timer.data = x;
    uv_timer_start(&x->timer, xfer_on_deadline, budget_ms, 0);
    list_insert_tail(&d->xfers, &x->node);
    d->nxfers++;
    return x;
}

/* Tags this transfer registered, in one place so that finish and fail agree. */
static void xfer_for_each_tag(struct xfer *x, void (*fn)(struct xfer *x, uint64_t tag))
{
    if (!x->tags_registered)
        return;
    if (x->role == XFER_READ) {
        fn(x, tags_derive(&x->link, x->id, 0, TAG_KIND_RESULT));
    } else if (x->role == XFER_SEND) {
        fn(x, tags_derive(&x->link, x->id, 0, TAG_KIND_READY));
        fn(x, tags_derive(&x->link, x->id, 0, TAG_KIND_RESULT));
    } else {
        fn(x, tags_derive(&x->link, x->id, 0, TAG_KIND_CANCEL));
        for (uint32_t c = 0; c < x->plan->nchunks; c++)
            fn(x, tags_derive(&x->link, x->id, c, TAG_KIND_DATA));
    }
}

static void xfer_tag_unregister(struct xfer *x, uint64_t tag)
{
    tags_unregister(x->d->tags, tag);
}

static void xfer_tag_quarantine(struct xfer *x, uint64_t tag)
{
    tags_quarantine(x->d->tags, tag, x->d->now_ms(x->d) + x->d->cfg.quarantine_ttl_ms);
}

/* The rank its sync message goes to: the other one of a local transfer, else its own. */
static struct session *xfer_noticed(const struct xfer *x)
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
    list_remove(&x->peer_node);
    list_remove(&x->other_node);
    list_remove(&x->node);
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
        session_notice_release(noticed, x->notice_reserved);
    x->notice_reserved = 0;
}

static void xfer_cancel_posted(struct xfer *x)
{
    wire_cancel(x->d->wire, x->ready_op);
    wire_cancel(x->d->wire, x->result_op);
    wire_cancel(x->d->wire, x->cancel_op);
}

static void xfer_send_peer(struct xfer *x, enum tag_kind kind, B10__Peer__Msg *msg)
{
    if (peer_send(x->peer, x->link.gen, tags_derive(&x->link, x->id, 0, kind), &msg->base) != 0)
        log_debug("transfer %016" PRIx64 ": could not send a message to the peer", x->id);
}

static void xfer_send_result(struct xfer *x, b10_status_t status, const char *detail)
{
    peer_send_result(x->peer, x->link.gen, x->id, status, detail);
}

/*
 * The views a transfer holds count against its peer's staging share
 * (--max-peer-staging), with what the peer's failed transfers left in the
 * quarantine: one peer whose transfers stall or keep failing runs out of
 * views of its own, and the others go on. A sender counts views as it takes
 * them (and waits past the share); a receiver reserves its whole window
 * before it begins (xfer_recv_begin).
 */
static bool xfer_view_room(const struct xfer *x)
{
    const struct b10d *d = x->d;
    return x->role != XFER_SEND || x->peer == NULL ||
           x->peer->views_bytes + x->peer->quarantined + staging_view_bytes(d->staging) <=
               config_peer_staging(&d->cfg);
}

/* A sender's views count against its peer as it takes them; a receiver's were reserved. */
static void xfer_view_count(struct xfer *x, const struct view *view)
{
    if (x->role == XFER_SEND && x->peer != NULL)
        x->peer->views_bytes += view->bytes;
}

static void xfer_view_uncount(struct xfer *x, const struct view *view)
{
    if (x->role == XFER_SEND && x->peer != NULL)
        x->peer->views_bytes -= view->bytes;
}

/* Success: every byte landed (R), or the receiver said so (S). */
static void xfer_finish(struct xfer *x)
{
    struct b10d *d = x->d;

    x->state = XFER_DONE;
    x->status = B10_OK;
    xfer_detach(x);
    xfer_cancel_posted(x);
    xfer_for_each_tag(x, xfer_tag_unregister);
    if (x->role == XFER_LOCAL) {
        d->stats.xfers_succeeded++;
        char pipe[256];
        xfer_pipe_describe(x, pipe, sizeof(pipe));
        log_info("local %s %016" PRIx64 " %s %s landed: %" PRIu64 " bytes in %u chunks, %" PRIu64
                 " ms (checked and planned in %.1f ms before; %s)", x->local_read ? "read" : "write",
                 x->id, x->local_read ? "from" : "to", x->remote_agent, x->plan->total,
                 x->plan->nchunks, d->now_ms(d) - x->started_ms, x->plan_ms, pipe);
        /* The other rank hears the sync message once its bytes landed (or were read) first. */
        struct session *noticed = xfer_noticed(x);
        if (noticed != NULL && x->sync_length > 0)
            session_notice(noticed, x->local_agent, x->sync, x->sync_length);
        if (x->session != NULL)
            session_xfer_done(x->session, x);
    } else if (x->role == XFER_READ) {
        d->stats.xfers_succeeded++;
        log_info("read %016" PRIx64 " from %s landed: %" PRIu64 " ms", x->id, x->remote_agent,
                 d->now_ms(d) - x->started_ms);
        if (x->session != NULL)
            session_xfer_done(x->session, x);
    } else if (x->role == XFER_SEND) {
        d->stats.xfers_succeeded++;
        uint64_t ms = d->now_ms(d) - x->started_ms;
        char pipe[256];
        xfer_pipe_describe(x, pipe, sizeof(pipe));
        log_info("transfer %016" PRIx64 " to %s landed: %" PRIu64 " bytes in %u chunks, %" PRIu64
                 " ms (checked and planned in %.1f ms before; READY after %" PRIu64 " ms; %s)",
                 x->id, x->remote_agent, x->plan->total, x->plan->nchunks, ms, x->plan_ms,
                 x->ready_ms - x->started_ms, pipe);
        /* A write-back serving a READ: its bytes were read, the holding rank hears of it. */
        if (x->session != NULL && x->read_id != 0 && x->sync_length > 0)
            session_notice(x->session, x->remote_agent, x->sync, x->sync_length);
        else if (x->session != NULL)
            session_xfer_done(x->session, x);
    } else {
        /* Landed: the target hears the sync message before the sender hears RESULT. */
        d->stats.xfers_received_landed++;
        if (x->session != NULL && x->sync_length > 0)
            session_notice(x->session, x->remote_agent, x->sync, x->sync_length);
        xfer_send_result(x, B10_OK, "");
        char pipe[256];
        xfer_pipe_describe(x, pipe, sizeof(pipe));
        log_debug("transfer %016" PRIx64 " from %s landed in %s: %" PRIu64 " bytes in %u chunks, "
                  "%" PRIu64 " ms (%s)", x->id, x->remote_agent, x->local_agent,
                  x->plan->total, x->plan->nchunks, d->now_ms(d) - x->started_ms, pipe);
        if (x->read_parent != NULL) {
            struct xfer *parent = x->read_parent;
            parent->read_child = NULL;
            x->read_parent = NULL;
            xfer_finish(parent);
        }
    }
    xfer_maybe_free(x);
}

/* A write-back that failed tells the reading daemon, on the link the READ came by. */
static void xfer_tell_reader(struct xfer *x, b10_status_t status, const char *detail)
{
    peer_send_result(x->peer, x->read_link.gen, x->read_id, status, detail);
}

/* A failure the other daemon cannot hear of, or that it caused by falling silent. */
static bool xfer_peer_silent(b10_status_t status)
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
    return x->scatters > 0 || x->await_ack || x->settling > 0;
}

static void xfer_settle_check(struct xfer *x);

static void xfer_report(struct xfer *x, b10_status_t status)
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
        log_warning("transfer %016" PRIx64 " (%s): %s", x->id, xfer_role_name(x->role), x->detail);
    }
    if (x->role == XFER_SEND) {
        if (x->read_id != 0 && !xfer_peer_silent(cause))
            xfer_tell_reader(x, x->status, x->detail);
        if (x->session != NULL)
            session_xfer_done(x->session, x);
    } else if (x->role == XFER_READ || x->role == XFER_LOCAL) {
        if (x->session != NULL)
            session_xfer_done(x->session, x);
    } else {
        /* A sender that broke the protocol can still hear why: it fails now, not at its deadline. */
        if ((!xfer_peer_silent(cause) || cause == B10_ERR_PEER_PROTOCOL) && !x->quiet)
            xfer_send_result(x, x->status, x->detail);
        if (x->settle_parent != NULL) {
            struct xfer *parent = x->settle_parent;
            x->settle_parent = NULL;
            parent->settling--;
            parent->holds--;
            /* Its copy outlived the bound: so does the READ's news. */
            if (x->status == B10_ERR_UNSETTLED && parent->report_due)
                xfer_report(parent, B10_ERR_UNSETTLED);
            else
                xfer_settle_check(parent);
            xfer_maybe_free(parent);
        }
    }
}

static void xfer_settle_check(struct xfer *x)
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
        for (uint32_t r = 0; r < slot->job->nrefs; r++)
            slot->job->refs[r]->stuck += by;
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
    write_back->settle_parent = read;
    read->settling++;
    read->holds++;
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
    log_warning("transfer %016" PRIx64 " (%s, %s %s) failed: %s: %s", x->id, xfer_role_name(x->role),
                x->role == XFER_SEND ? "to" : "from", x->remote_agent, b10_status_name(status),
                x->detail);

    /*
     * A sender whose DATA went out waits for the receiver to say its copies
     * are over: its RESULT, answering the CANCEL below (or its own failure).
     */
    bool peer_silent = xfer_peer_silent(status);
    x->await_ack = x->role == XFER_SEND && x->control_sent && !peer_silent && !x->peer_settled &&
                   was == XFER_RUNNING && x->next_chunk > 0 && x->result_op != NULL;

    /* Cancel what can be cancelled; trust nothing to have stopped. */
    wire_cancel(d->wire, x->ready_op);
    wire_cancel(d->wire, x->cancel_op);
    if (!x->await_ack)
        wire_cancel(d->wire, x->result_op);
    for (uint32_t i = 0; i < x->nslots; i++) {
        struct xfer_slot *slot = &x->slots[i];
        if (!slot->busy)
            continue;
        if (slot->op != NULL)
            wire_cancel(d->wire, slot->op);
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
    if (x->tags_registered) {
        uint32_t ntags = x->role == XFER_READ ? 1 : x->role == XFER_SEND ? 2 : x->plan->nchunks + 1;
        xfer_for_each_tag(x, xfer_tag_quarantine);
        quarantine_add(d->quarantine, QUARANTINE_TAGS, x->id, ntags, status, x->id,
                       x->peer ? x->peer->daemon_id : 0, NULL, NULL);
    }
    quarantine_add(d->quarantine, QUARANTINE_XFER_ID, x->id, 0, status, x->id,
                   x->peer ? x->peer->daemon_id : 0, NULL, NULL);

    /*
     * Tell the other side at once, unless it is gone: a CANCEL only stops
     * writes. One that broke the protocol hears it too, and is not waited for.
     */
    if (x->role == XFER_SEND) {
        bool gone = status == B10_ERR_PEER_LOST || status == B10_ERR_PEER_UNREACHABLE;
        if (x->control_sent && !gone && was != XFER_WAIT_LINK) {
            B10__Peer__Cancel cancel = B10__PEER__CANCEL__INIT;
            B10__Peer__Msg msg = B10__PEER__MSG__INIT;
            cancel.xfer_id = x->id;
            cancel.reason = (B10__Status)status;
            cancel.want_result = x->await_ack;
            msg.body_case = B10__PEER__MSG__BODY_CANCEL;
            msg.cancel = &cancel;
            xfer_send_peer(x, TAG_KIND_CANCEL, &msg);
        }
        d->stats.xfers_failed++;
    } else if (x->role == XFER_READ || x->role == XFER_LOCAL) {
        d->stats.xfers_failed++;
    } else {
        d->stats.xfers_received_failed++;
    }
    /* A READ and its write-back fail together: whichever failed first, with its reason. */
    if (x->read_child != NULL) {
        struct xfer *child = x->read_child;
        x->read_child = NULL;
        child->read_parent = NULL;
        xfer_settle_link(child, x);
        xfer_fail(child, B10_ERR_CANCELLED, "the READ it served failed: %s", x->detail);
    }
    if (x->read_parent != NULL) {
        struct xfer *parent = x->read_parent;
        x->read_parent = NULL;
        parent->read_child = NULL;
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

static struct xfer_slot *xfer_free_slot(struct xfer *x)
{
    for (uint32_t i = 0; i < x->nslots; i++)
        if (!x->slots[i].busy)
            return &x->slots[i];
    return NULL;
}

/* A slot's chunk is over and its view clean: give both back. */
static void xfer_slot_release(struct xfer_slot *slot)
{
    struct view *view = slot->view;
    slot->busy = false;
    slot->view = NULL;
    xfer_view_uncount(slot->x, view);
    staging_put(slot->x->d->staging, view);
}

/*
 * An operation on a slot completed (a copy, a DATA send or receive): release
 * its holds. Returns true when the transfer still runs and the completion is
 * to be acted upon; a completion after the funnel only counts as late.
 */
static bool xfer_slot_op_done(struct xfer_slot *slot)
{
    struct xfer *x = slot->x;

    slot->op = NULL;
    x->holds--;
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
static b10_status_t xfer_copy_chunk(struct xfer_slot *slot, bool gather, copy_done_fn *done)
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
    for (uint32_t p = chunk->first; p < chunk->first + chunk->count; p++) {
        const struct plan_piece *piece = &x->plan->pieces[p];
        b10_status_t status = mem_table_walk(&s->mem, gather ? piece->src : piece->dst,
                                             piece->len, xfer_copy_emit, &ctx);
        if (status != B10_OK) {
            copy_job_free(ctx.job);
            return status;
        }
    }
    x->holds++;
    slot->view->holds++;
    slot->phase_ns = uv_hrtime();
    if (!gather) {
        x->scatters++;
        slot->job = ctx.job;
    }
    copy_job_submit(ctx.job);
    return B10_OK;
}

/* ---------------------------------------------------------------- sender */

static void xfer_send_pump(struct xfer *x);
static void xfer_recv_pump(struct xfer *x);
static bool xfer_recv_post(struct xfer *x, struct xfer_slot *slot, struct view *view);
static void xfer_recv_begin(struct xfer *x);

static void xfer_on_view_free(struct staging_waiter *w)
{
    struct xfer *x = list_entry(w, struct xfer, waiter);
    x->waiting = false;
    if (x->state == XFER_QUEUED)
        xfer_recv_begin(x);
    else if (x->role == XFER_SEND)
        xfer_send_pump(x);
    else
        xfer_recv_pump(x);
}

static void xfer_wait_for_view(struct xfer *x)
{
    if (x->waiting)
        return;
    x->waiter.wake = xfer_on_view_free;
    x->waiting = true;
    staging_wait(x->d->staging, &x->waiter);
}

static void xfer_on_sent(void *arg, b10_status_t status, size_t length)
{
    struct xfer_slot *slot = arg;
    struct xfer *x = slot->x;

    if (!xfer_slot_op_done(slot))
        return;
    xfer_pipe_wire_end(slot);
    if (status != B10_OK) {
        xfer_fail(x, status == B10_ERR_CANCELLED ? B10_ERR_PEER_LOST : status,
                  "DATA chunk %u was not delivered: %s", slot->chunk, b10_status_str(status));
        return;
    }
    x->d->stats.bytes_sent += x->plan->chunks[slot->chunk].bytes;
    x->chunks_done++;
    xfer_slot_release(slot);
    xfer_send_pump(x);
}

static void xfer_on_gathered(struct copy_job *job, b10_status_t status)
{
    struct xfer_slot *slot = job->arg;
    struct xfer *x = slot->x;

    if (!xfer_slot_op_done(slot))
        return;
    if (status != B10_OK) {
        xfer_fail(x, B10_ERR_INTERNAL, "gather of chunk %u failed", slot->chunk);
        return;
    }
    xfer_pipe_copy_done(slot, job);
    uint64_t tag = tags_derive(&x->link, x->id, slot->chunk, TAG_KIND_DATA);
    if (x->peer->ep == NULL ||
        wire_send_bulk(x->peer->ep, slot->chunk, tag, slot->view->base,
                       x->plan->chunks[slot->chunk].bytes, slot->view->memh, xfer_on_sent, slot,
                       &slot->op) != 0) {
        xfer_fail(x, B10_ERR_PEER_LOST, "sending DATA chunk %u failed", slot->chunk);
        return;
    }
    x->holds++;
    slot->view->holds++;
    xfer_pipe_wire_begin(slot);
}

/* Keep up to nslots chunks between gather and send completion. */
static void xfer_send_pump(struct xfer *x)
{
    while (x->state == XFER_RUNNING && x->next_chunk < x->plan->nchunks) {
        struct xfer_slot *slot = xfer_free_slot(x);
        if (slot == NULL)
            return;
        struct view *view = xfer_view_room(x) ? staging_get(x->d->staging, VIEW_SEND) : NULL;
        if (view == NULL) {
            xfer_wait_for_view(x);
            return;
        }
        xfer_view_count(x, view);
        *slot = (struct xfer_slot){ .x = x, .busy = true, .chunk = x->next_chunk++, .view = view };
        b10_status_t status = xfer_copy_chunk(slot, true, xfer_on_gathered);
        if (status != B10_OK) {
            xfer_slot_release(slot);
            xfer_fail(x, status == B10_ERR_NOT_REGISTERED ? B10_ERR_NOT_REGISTERED : status,
                      "gathering chunk %u: %s", slot->chunk, b10_status_str(status));
            return;
        }
    }
}

/*
 * Open a reply (READY, RESULT, CANCEL) under the transfer's link: B10_OK;
 * B10_ERR_UNAUTHENTICATED when it did not open (dropped and counted; the
 * caller posts its receive again, for the real one); B10_ERR_PEER_PROTOCOL
 * when it opened and is not what was awaited.
 */
static b10_status_t xfer_decode_reply(struct xfer *x, const uint8_t *buf, size_t length,
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

static bool xfer_post_reply(struct xfer *x, uint64_t tag, uint8_t *buf, size_t length,
                            wire_done_cb *cb, struct wire_op **op_p, const char *what);

static void xfer_on_ready(void *arg, b10_status_t status, size_t length)
{
    struct xfer *x = arg;
    B10__Peer__Msg *msg;

    x->ready_op = NULL;
    x->holds--;
    if (x->state == XFER_DONE) {
        if (status == B10_OK)
            x->d->stats.late_completions++;
        xfer_maybe_free(x);
        return;
    }
    if (status != B10_OK) {
        xfer_fail(x, status, "waiting for READY: %s", b10_status_str(status));
        return;
    }
    b10_status_t decoded = xfer_decode_reply(x, x->ready_buf, length, B10__PEER__MSG__BODY_READY, &msg);
    if (decoded == B10_ERR_UNAUTHENTICATED) {
        xfer_post_reply(x, tags_derive(&x->link, x->id, 0, TAG_KIND_READY), x->ready_buf,
                        sizeof(x->ready_buf), xfer_on_ready, &x->ready_op, "READY");
        return;
    }
    if (decoded != B10_OK) {
        xfer_fail(x, B10_ERR_PEER_PROTOCOL, "malformed READY");
        return;
    }
    bool ours = msg->ready->xfer_id == x->id;
    b10__peer__msg__free_unpacked(msg, NULL);
    if (!ours) {
        xfer_fail(x, B10_ERR_PEER_PROTOCOL, "READY names another transfer");
        return;
    }
    peer_heard(x->peer);
    /* After a stall the receiver may have given the transfer up: send no DATA into it. */
    if (xfer_past_deadline(x) || (peer_liveness_check(x->d) && x->state == XFER_DONE))
        return;
    x->state = XFER_RUNNING;
    xfer_pipe_start(x);
    x->ready_ms = x->d->now_ms(x->d);
    xfer_send_pump(x);
}

static void xfer_on_ack(struct xfer *x, b10_status_t status, size_t length);

static void xfer_on_result(void *arg, b10_status_t status, size_t length)
{
    struct xfer *x = arg;
    B10__Peer__Msg *msg;

    x->result_op = NULL;
    x->holds--;
    if (x->state == XFER_DONE) {
        if (x->await_ack)
            xfer_on_ack(x, status, length);
        else if (status == B10_OK)
            x->d->stats.late_completions++;
        xfer_maybe_free(x);
        return;
    }
    if (status != B10_OK) {
        xfer_fail(x, status, "waiting for RESULT: %s", b10_status_str(status));
        return;
    }
    b10_status_t decoded = xfer_decode_reply(x, x->result_buf, length, B10__PEER__MSG__BODY_RESULT,
                                             &msg);
    if (decoded == B10_ERR_UNAUTHENTICATED) {
        xfer_post_reply(x, tags_derive(&x->link, x->id, 0, TAG_KIND_RESULT), x->result_buf,
                        sizeof(x->result_buf), xfer_on_result, &x->result_op, "RESULT");
        return;
    }
    if (decoded != B10_OK) {
        xfer_fail(x, B10_ERR_PEER_PROTOCOL, "malformed RESULT");
        return;
    }
    const B10__Peer__Result *result = msg->result;
    b10_status_t remote = (b10_status_t)result->status;
    peer_heard(x->peer);
    if (result->xfer_id != x->id)
        xfer_fail(x, B10_ERR_PEER_PROTOCOL, "RESULT names another transfer");
    else if (remote == B10_OK && x->next_chunk == x->plan->nchunks)
        xfer_finish(x);   /* sends still completing release their views cleanly */
    else if (remote == B10_OK)
        xfer_fail(x, B10_ERR_PEER_PROTOCOL, "RESULT success before every chunk was sent");
    else if (b10_status_action(remote) == B10_ACTION_NONE ||
             strcmp(b10_status_name(remote), "B10_UNKNOWN") == 0)
        xfer_fail(x, B10_ERR_PEER_PROTOCOL, "RESULT carries status %d", (int)result->status);
    else {
        x->peer_settled = true;     /* the receiver reports only once its copies are over */
        xfer_fail(x, remote, "remote daemon: %.200s", result->detail);
    }
    b10__peer__msg__free_unpacked(msg, NULL);
}

/*
 * S, failed while its DATA was out: the receiver's RESULT (to the CANCEL,
 * or of its own failure), which it sends once its copies are over, lets
 * the news go. A receive that ended without one (the endpoint failed): the
 * receiver's copies are not known to be over, and the news says so.
 */
static void xfer_on_ack(struct xfer *x, b10_status_t status, size_t length)
{
    B10__Peer__Msg *msg = NULL;

    if (status == B10_OK) {
        b10_status_t decoded = xfer_decode_reply(x, x->result_buf, length,
                                                 B10__PEER__MSG__BODY_RESULT, &msg);
        if (decoded == B10_ERR_UNAUTHENTICATED) {
            xfer_post_reply(x, tags_derive(&x->link, x->id, 0, TAG_KIND_RESULT), x->result_buf,
                            sizeof(x->result_buf), xfer_on_result, &x->result_op, "RESULT");
            if (x->result_op != NULL)
                return;
        } else if (decoded == B10_OK && msg->result->xfer_id == x->id) {
            /* The receiver gave up waiting for its own copies: that is the news here too. */
            bool unsettled = msg->result->status == B10__STATUS__ERR_UNSETTLED;
            if (unsettled)
                snprintf(x->detail, sizeof(x->detail), "remote daemon: %.200s", msg->result->detail);
            x->await_ack = false;
            b10__peer__msg__free_unpacked(msg, NULL);
            if (unsettled && x->report_due) {
                x->status = B10_ERR_UNSETTLED;      /* in the receiver's words, its bound */
                xfer_report(x, B10_ERR_UNSETTLED);
            }
            else
                xfer_settle_check(x);
            return;
        } else if (msg != NULL) {
            b10__peer__msg__free_unpacked(msg, NULL);
        }
    }
    if (x->report_due) {
        x->await_ack = false;
        xfer_report(x, B10_ERR_UNSETTLED);
    }
}

/* The link is up: register the reply tags, post their receives, send CONTROL. */
/* Post the receive of a small message of the peer's for x (its tag registered); false: x failed. */
static bool xfer_post_reply(struct xfer *x, uint64_t tag, uint8_t *buf, size_t length,
                            wire_done_cb *cb, struct wire_op **op_p, const char *what)
{
    if (wire_recv(x->d->wire, tag, buf, length, NULL, cb, x, op_p) != 0) {
        xfer_fail(x, B10_ERR_INTERNAL, "posting the %s receive failed", what);
        return false;
    }
    x->holds++;
    return true;
}

/*
 * READ: ask the daemon holding the bytes to write them back. Its refusal or
 * failure comes as a Result on (link, id); success as the write-back itself,
 * a CONTROL whose read_id names this transfer (xfer_admit).
 */
static void xfer_read_link_up(struct xfer *x)
{
    struct b10d *d = x->d;
    size_t table = x->read_spans_length / 2;

    x->link = x->peer->out.tags;
    uint64_t result_tag = tags_derive(&x->link, x->id, 0, TAG_KIND_RESULT);
    int rc = tags_register(d->tags, result_tag, x);
    if (rc != 0) {
        xfer_fail(x, tags_status(rc), "RESULT tag %016" PRIx64 ": %s", result_tag, tags_strerror(rc));
        return;
    }
    x->tags_registered = true;
    if (!xfer_post_reply(x, result_tag, x->result_buf, sizeof(x->result_buf), xfer_on_result,
                         &x->result_op, "RESULT"))
        return;
    uint64_t now = d->now_ms(d);
    B10__Peer__ReadRequest rr = B10__PEER__READ_REQUEST__INIT;
    rr.read_id = x->id;
    rr.src_agent = x->remote_agent;
    rr.dst_agent = x->local_agent;
    rr.deadline_ms = (uint32_t)(x->deadline_ms > now ? x->deadline_ms - now : 1);
    rr.src_spans = (ProtobufCBinaryData){ table, x->read_spans };
    rr.dst_spans = (ProtobufCBinaryData){ table, x->read_spans + table };
    rr.sync_msg = (ProtobufCBinaryData){ x->sync_length, x->sync };
    B10__Peer__Msg msg = B10__PEER__MSG__INIT;
    msg.body_case = B10__PEER__MSG__BODY_READ;
    msg.read = &rr;
    if (AUTH_OVERHEAD + protobuf_c_message_get_packed_size(&msg.base) > x->peer->max_control) {
        xfer_fail(x, B10_ERR_TOO_LARGE, "the READ request exceeds the remote daemon's limit");
        return;
    }
    if (peer_send(x->peer, x->link.gen, tags_derive(&x->link, 0, 0, TAG_KIND_CONTROL), &msg.base) != 0) {
        xfer_fail(x, B10_ERR_PEER_LOST, "sending the READ request failed");
        return;
    }
    x->control_sent = true;
    x->state = XFER_WAIT_READY;
}

void xfer_link_up(struct xfer *x)
{
    struct b10d *d = x->d;
    struct peer *peer = x->peer;
    uint8_t *chunk_pieces = NULL, *pieces = NULL;
    size_t chunk_len, pieces_len;

    if (x->role == XFER_READ) {
        xfer_read_link_up(x);
        return;
    }
    x->link = peer->out.tags;
    if (peer->max_chunk < x->plan->chunks[0].bytes || peer->max_chunk < staging_view_bytes(d->staging)) {
        if (peer->max_chunk == 0 || plan_rechunk(x->plan, peer->max_chunk) != B10_OK) {
            xfer_fail(x, B10_ERR_NO_MEMORY, "cannot re-chunk for the peer's %" PRIu64 "-byte views",
                      peer->max_chunk);
            return;
        }
    }
    if (x->plan->npieces > peer->max_pieces) {
        xfer_fail(x, B10_ERR_TOO_LARGE, "%u pieces exceed the remote daemon's limit of %" PRIu64,
                  x->plan->npieces, peer->max_pieces);
        return;
    }
    uint64_t ready_tag = tags_derive(&x->link, x->id, 0, TAG_KIND_READY);
    uint64_t result_tag = tags_derive(&x->link, x->id, 0, TAG_KIND_RESULT);
    int rc = tags_register(d->tags, ready_tag, x);
    if (rc != 0) {
        xfer_fail(x, tags_status(rc), "READY tag %016" PRIx64 ": %s", ready_tag, tags_strerror(rc));
        return;
    }
    if ((rc = tags_register(d->tags, result_tag, x)) != 0) {
        tags_unregister(d->tags, ready_tag);
        xfer_fail(x, tags_status(rc), "RESULT tag %016" PRIx64 ": %s", result_tag, tags_strerror(rc));
        return;
    }
    x->tags_registered = true;
    if (!xfer_post_reply(x, ready_tag, x->ready_buf, sizeof(x->ready_buf), xfer_on_ready,
                         &x->ready_op, "READY") ||
        !xfer_post_reply(x, result_tag, x->result_buf, sizeof(x->result_buf), xfer_on_result,
                         &x->result_op, "RESULT"))
        return;

    if (plan_encode(x->plan, &chunk_pieces, &chunk_len, &pieces, &pieces_len) != 0) {
        xfer_fail(x, B10_ERR_NO_MEMORY, "encoding CONTROL");
        return;
    }
    uint64_t now = d->now_ms(d);
    B10__Peer__Control control = B10__PEER__CONTROL__INIT;
    control.xfer_id = x->id;
    control.gen = x->link.gen;
    control.dst_agent = x->remote_agent;
    control.src_agent = x->local_agent;
    control.deadline_ms = (uint32_t)(x->deadline_ms > now ? x->deadline_ms - now : 1);
    control.nchunks = x->plan->nchunks;
    control.total_bytes = x->plan->total;
    control.chunk_pieces = (ProtobufCBinaryData){ chunk_len, chunk_pieces };
    control.pieces = (ProtobufCBinaryData){ pieces_len, pieces };
    control.read_id = x->read_id;
    /* A write-back's sync message is for its own rank, after the read: not sent. */
    if (x->read_id == 0)
        control.sync_msg = (ProtobufCBinaryData){ x->sync_length, x->sync };
    B10__Peer__Msg msg = B10__PEER__MSG__INIT;
    msg.body_case = B10__PEER__MSG__BODY_CONTROL;
    msg.control = &control;
    size_t length = AUTH_OVERHEAD + protobuf_c_message_get_packed_size(&msg.base);
    if (length > peer->max_control) {
        xfer_fail(x, B10_ERR_TOO_LARGE, "CONTROL of %zu bytes exceeds the remote daemon's limit "
                  "of %" PRIu64, length, peer->max_control);
        goto out;
    }
    if (peer_send(peer, x->link.gen, tags_derive(&x->link, 0, 0, TAG_KIND_CONTROL), &msg.base) != 0) {
        xfer_fail(x, B10_ERR_PEER_LOST, "sending CONTROL failed");
        goto out;
    }
    x->control_sent = true;
    x->state = XFER_WAIT_READY;
    log_debug("transfer %016" PRIx64 ": CONTROL sent, %u chunks, %u pieces, %" PRIu64 " bytes",
              x->id, x->plan->nchunks, x->plan->npieces, x->plan->total);
out:
    free(chunk_pieces);
    free(pieces);
}

/* A region that a failed transfer's late scatter may still write takes no new work. */
static b10_status_t xfer_check_emit(void *arg, struct region *r, uint64_t offset, uint64_t n)
{
    return r->stuck > 0 ? B10_ERR_UNSETTLED : B10_OK;
}

#define XFER_STUCK_WHY "lies in a region that a failed transfer's copy may still write (--settle-ms passed)"

/* R: every destination byte of the plan must lie in the target rank's regions. */
static b10_status_t xfer_check_dst(const struct plan *plan, struct mem_table *mem,
                                   char *detail, size_t detail_len)
{
    for (uint32_t i = 0; i < plan->npieces; i++) {
        const struct plan_piece *p = &plan->pieces[i];
        b10_status_t st = mem_table_walk(mem, p->dst, p->len, xfer_check_emit, NULL);
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
static b10_status_t xfer_admit_limits(struct session *s, size_t count, char *detail,
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
static b10_status_t xfer_check_local(struct session *s, const uint8_t *spans, size_t count,
                                     char *detail, size_t detail_len)
{
    uint64_t total = 0;

    for (size_t i = 0; i < count; i++) {
        uint64_t addr = frame_get_u64(spans + i * SPAN_BYTES);
        uint64_t len = frame_get_u64(spans + i * SPAN_BYTES + 8);
        if (total + len < total || total + len > s->d->cfg.max_xfer_bytes) {
            snprintf(detail, detail_len, "the request exceeds --max-xfer-bytes %" PRIu64,
                     s->d->cfg.max_xfer_bytes);
            return B10_ERR_TOO_LARGE;
        }
        total += len;
        b10_status_t st = len != 0 ? mem_table_walk(&s->mem, addr, len, xfer_check_emit, NULL)
                                   : B10_OK;
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

static b10_status_t xfer_set_sync(struct xfer *x, const uint8_t *sync, size_t length)
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

static uint32_t xfer_budget(struct b10d *d, uint32_t deadline_ms)
{
    uint32_t budget = deadline_ms != 0 ? deadline_ms : d->cfg.deadline_ms;
    return budget < d->cfg.max_deadline_ms ? budget : d->cfg.max_deadline_ms;
}

/* Undo a transfer made here that never started: nothing posted, nothing sent. */
static void xfer_discard(struct xfer *x)
{
    x->state = XFER_DONE;
    xfer_detach(x);
    x->d->stats.xfers_submitted--;
    xfer_maybe_free(x);
}

/*
 * A transfer rank s starts with remote_agent on peer: a WRITE (its local
 * spans are the sources), or a READ (its local spans are the destinations;
 * the plan then only checks the request, the write-back plans for real).
 * Checked, planned, created in the session's list; it moves once
 * xfer_start() is called.
 */
static b10_status_t xfer_new_local(struct session *s, struct peer *peer, const char *remote_agent,
                                   enum xfer_role role, const uint8_t *src_spans,
                                   const uint8_t *dst_spans, size_t count, uint32_t deadline_ms,
                                   const uint8_t *sync, size_t sync_length, struct xfer **xfer_p,
                                   char *detail, size_t detail_len)
{
    struct b10d *d = s->d;
    const uint8_t *local = role == XFER_READ ? dst_spans : src_spans;
    struct plan *plan = NULL;
    b10_status_t status;

    uint64_t checked_from = uv_hrtime();
    if ((status = xfer_admit_limits(s, count, detail, detail_len)) != B10_OK ||
        (status = xfer_check_local(s, local, count, detail, detail_len)) != B10_OK)
        return status;
    if (peer->quarantined > config_peer_quarantine(&d->cfg)) {
        snprintf(detail, detail_len, "transfers with daemon %s left %" PRIu64 " bytes of staging "
                 "in the quarantine (--peer-quarantine-bytes %" PRIu64 ")", peer->name,
                 peer->quarantined, config_peer_quarantine(&d->cfg));
        return B10_ERR_STAGING_EXHAUSTED;
    }
    status = plan_build(src_spans, dst_spans, count, staging_view_bytes(d->staging), &plan, detail,
                        detail_len);
    if (status != B10_OK)
        return status;
    struct xfer *x = xfer_new(d, role, b10d_new_xfer_id(d), xfer_budget(d, deadline_ms));
    if (x == NULL) {
        plan_free(plan);
        return B10_ERR_NO_MEMORY;
    }
    x->plan = plan;
    x->plan_ms = (double)(uv_hrtime() - checked_from) / 1e6;
    x->session = s;
    x->uid = s->uid;
    x->peer = peer;
    peer_hold(peer);
    x->state = XFER_WAIT_LINK;
    snprintf(x->local_agent, sizeof(x->local_agent), "%s", s->agent);
    snprintf(x->remote_agent, sizeof(x->remote_agent), "%s", remote_agent);
    list_insert_tail(&s->xfers, &x->session_node);
    s->nxfers++;
    d->stats.xfers_submitted++;
    if (xfer_set_sync(x, sync, sync_length) != B10_OK) {
        xfer_discard(x);
        return B10_ERR_NO_MEMORY;
    }
    *xfer_p = x;
    log_debug("transfer %016" PRIx64 ": %s %s %s, %zu spans, %" PRIu64 " bytes (%s)", x->id,
              s->agent, role == XFER_READ ? "←" : "→", x->remote_agent, count, plan->total,
              xfer_role_name(role));
    return B10_OK;
}

/* A READ of rank s: remote_spans of remote_agent into its own local_spans. */
static b10_status_t xfer_new_read(struct session *s, struct peer *peer, const char *remote_agent,
                                  const B10__SubmitXfer *req, size_t count, struct xfer **xfer_p,
                                  char *detail, size_t detail_len)
{
    struct xfer *x;
    size_t table = count * SPAN_BYTES;
    b10_status_t status = xfer_new_local(s, peer, remote_agent, XFER_READ, req->remote_spans.data,
                                         req->local_spans.data, count, req->deadline_ms,
                                         req->sync_msg.data, req->sync_msg.len, &x, detail,
                                         detail_len);
    if (status != B10_OK)
        return status;
    /* The request carries both tables to the daemon that holds the bytes. */
    if ((x->read_spans = malloc(2 * table)) == NULL) {
        xfer_discard(x);
        return B10_ERR_NO_MEMORY;
    }
    memcpy(x->read_spans, req->remote_spans.data, table);
    memcpy(x->read_spans + table, req->local_spans.data, table);
    x->read_spans_length = 2 * table;
    *xfer_p = x;
    return B10_OK;
}

static b10_status_t xfer_new_here(struct session *s, struct peer *self, const B10__SubmitXfer *req,
                                  size_t count, struct xfer **xfer_p, char *detail,
                                  size_t detail_len);

b10_status_t xfer_submit(struct session *s, const B10__SubmitXfer *req, struct xfer **xfer_p,
                         char *detail, size_t detail_len)
{
    size_t count = req->local_spans.len / SPAN_BYTES;

    if (req->op != B10__OP__OP_WRITE && req->op != B10__OP__OP_READ) {
        snprintf(detail, detail_len, "unknown operation %d", (int)req->op);
        return B10_ERR_UNSUPPORTED;
    }
    if (req->local_spans.len % SPAN_BYTES != 0 || req->remote_spans.len != req->local_spans.len ||
        count == 0) {
        snprintf(detail, detail_len, "span tables must be equal, non-empty lists of 16-byte spans");
        return B10_ERR_INVALID_ARG;
    }
    if (req->sync_msg.len > B10_SYNC_MSG_MAX) {
        snprintf(detail, detail_len, "a sync message holds at most %d bytes", B10_SYNC_MSG_MAX);
        return B10_ERR_TOO_LARGE;
    }
    struct remote_agent *agent;
    b10_status_t status = session_agent_use(s, req->remote_agent, &agent, detail, detail_len);
    if (status != B10_OK)
        return status;
    /* Both ranks here: the bytes go from one mapping to the other, not over the wire. */
    if (peer_is_self(agent->peer))
        return xfer_new_here(s, agent->peer, req, count, xfer_p, detail, detail_len);
    if (req->op == B10__OP__OP_READ)
        return xfer_new_read(s, agent->peer, req->remote_agent, req, count, xfer_p, detail,
                             detail_len);
    return xfer_new_local(s, agent->peer, req->remote_agent, XFER_SEND, req->local_spans.data,
                          req->remote_spans.data, count, req->deadline_ms, req->sync_msg.data,
                          req->sync_msg.len, xfer_p, detail, detail_len);
}

static void xfer_local_pump(struct xfer *x);

void xfer_start(struct xfer *x)
{
    if (x->role == XFER_LOCAL) {
        x->state = XFER_RUNNING;
        xfer_pipe_start(x);
        xfer_local_pump(x);
        return;
    }
    b10_status_t status = peer_use(x->peer, x);
    if (status == B10_OK)
        xfer_link_up(x);
    else if (status != B10_IN_PROGRESS)
        xfer_fail(x, status, "cannot reach the remote daemon of '%.200s'", x->remote_agent);
}

/* A scatter ended: one fewer that can write for x; regions it held stuck take work again. */
static void xfer_scatter_over(struct xfer *x, struct xfer_slot *slot, struct copy_job *job)
{
    x->scatters--;
    if (slot->stuck) {
        for (uint32_t r = 0; r < job->nrefs; r++)
            job->refs[r]->stuck--;
        slot->stuck = false;
        log_notice("transfer %016" PRIx64 ": its late scatter of chunk %u ended; its regions "
                   "take work again", x->id, slot->chunk);
    }
    slot->job = NULL;
}

/* ---------------------------------------------------------------- local */

/*
 * Both ranks on this daemon: each chunk is gathered from one rank's
 * mapping into a staging view and scattered from it into the other's, on
 * the copy workers and the GPU, with no UCX and no second daemon. It keeps
 * every contract of a transfer between daemons: admitted only as the
 * target would admit it (access.h, its registrations, its notices), fenced
 * by its deadline, failed through the funnel, reported only once its
 * scatters ended, landed only once every chunk did, the sync message after.
 * Nothing but this daemon's own copies can write for it, so its failure
 * waits for nothing else.
 */
static void xfer_on_local_scattered(struct copy_job *job, b10_status_t status);

static void xfer_on_local_gathered(struct copy_job *job, b10_status_t status)
{
    struct xfer_slot *slot = job->arg;
    struct xfer *x = slot->x;

    if (!xfer_slot_op_done(slot))
        return;
    if (status != B10_OK) {
        xfer_fail(x, B10_ERR_INTERNAL, "gather of chunk %u failed", slot->chunk);
        return;
    }
    xfer_pipe_copy_done(slot, job);
    if (xfer_past_deadline(x))
        return;
    b10_status_t st = xfer_copy_chunk(slot, false, xfer_on_local_scattered);
    if (st != B10_OK)
        xfer_fail(x, st == B10_ERR_NOT_REGISTERED ? B10_ERR_REMOTE_REJECTED : st,
                  "scattering chunk %u into %s: %s", slot->chunk, x->to ? x->to->agent : "?",
                  st == B10_ERR_NOT_REGISTERED ? "destination no longer registered"
                  : st == B10_ERR_PERMISSION ? "destination no longer in a region open to the node"
                                             : b10_status_str(st));
}

static void xfer_on_local_scattered(struct copy_job *job, b10_status_t status)
{
    struct xfer_slot *slot = job->arg;
    struct xfer *x = slot->x;

    xfer_scatter_over(x, slot, job);
    if (!xfer_slot_op_done(slot)) {
        xfer_settle_check(x);
        xfer_maybe_free(x);
        return;
    }
    if (status != B10_OK) {
        xfer_fail(x, B10_ERR_INTERNAL, "scatter of chunk %u failed", slot->chunk);
        return;
    }
    xfer_pipe_copy_done(slot, job);
    x->d->stats.bytes_landed += x->plan->chunks[slot->chunk].bytes;
    x->chunks_done++;
    xfer_slot_release(slot);
    if (x->chunks_done == x->plan->nchunks)
        xfer_finish(x);
    else
        xfer_local_pump(x);
}

/* Keep up to nslots chunks between gather and scatter. */
static void xfer_local_pump(struct xfer *x)
{
    while (x->state == XFER_RUNNING && x->next_chunk < x->plan->nchunks) {
        struct xfer_slot *slot = xfer_free_slot(x);
        if (slot == NULL)
            return;
        struct view *view = staging_get(x->d->staging, VIEW_SEND);
        if (view == NULL) {
            xfer_wait_for_view(x);
            return;
        }
        *slot = (struct xfer_slot){ .x = x, .busy = true, .chunk = x->next_chunk++, .view = view };
        b10_status_t status = xfer_copy_chunk(slot, true, xfer_on_local_gathered);
        if (status != B10_OK) {
            xfer_slot_release(slot);
            xfer_fail(x, status, "gathering chunk %u from %s: %s", slot->chunk,
                      x->from ? x->from->agent : "?", b10_status_str(status));
            return;
        }
    }
}

/*
 * A WRITE or READ of rank s with a rank of this daemon: checked as the
 * other rank's daemon would check it, planned, listed with both ranks.
 */
static b10_status_t xfer_new_here(struct session *s, struct peer *self, const B10__SubmitXfer *req,
                                  size_t count, struct xfer **xfer_p, char *detail,
                                  size_t detail_len)
{
    struct b10d *d = s->d;
    bool read = req->op == B10__OP__OP_READ;
    struct session *other = session_find(d, req->remote_agent);
    const uint8_t *src = read ? req->remote_spans.data : req->local_spans.data;
    const uint8_t *dst = read ? req->local_spans.data : req->remote_spans.data;
    const uint8_t *theirs = req->remote_spans.data;
    struct access_origin origin;
    enum access_grant grant;
    struct plan *plan = NULL;
    b10_status_t status;

    if (other == NULL) {
        snprintf(detail, detail_len, "no rank named '%.200s' is connected to this daemon",
                 req->remote_agent);
        return B10_ERR_UNKNOWN_AGENT;
    }
    uint64_t checked_from = uv_hrtime();
    if ((status = xfer_admit_limits(s, count, detail, detail_len)) != B10_OK ||
        (status = xfer_check_local(s, req->local_spans.data, count, detail, detail_len)) != B10_OK)
        return status;
    /* The other rank's leave, as its daemon would ask it of a rank of another node. */
    access_origin(&origin, self, s->agent);
    status = access_spans(other, &origin, theirs, count, req->sync_msg.len > 0, &grant, detail,
                          detail_len);
    if (status != B10_OK)
        return status;
    if (req->sync_msg.len > 0 && !session_notice_room(other, req->sync_msg.len)) {
        snprintf(detail, detail_len, "notices for '%.200s' wait unread (--max-notice-bytes)",
                 req->remote_agent);
        return B10_ERR_BUSY;
    }
    status = plan_build(src, dst, count, staging_view_bytes(d->staging), &plan, detail, detail_len);
    if (status != B10_OK)
        return status;
    /* Its side inside its registrations, as for a transfer from another node. */
    status = read ? xfer_check_local(other, theirs, count, detail, detail_len)
                  : xfer_check_dst(plan, &other->mem, detail, detail_len);
    if (status != B10_OK) {
        plan_free(plan);
        return status == B10_ERR_NOT_REGISTERED ? B10_ERR_REMOTE_REJECTED : status;
    }
    struct xfer *x = xfer_new(d, XFER_LOCAL, b10d_new_xfer_id(d), xfer_budget(d, req->deadline_ms));
    if (x == NULL) {
        plan_free(plan);
        return B10_ERR_NO_MEMORY;
    }
    x->plan = plan;
    x->plan_ms = (double)(uv_hrtime() - checked_from) / 1e6;
    x->session = s;
    x->uid = s->uid;
    x->local_read = read;
    x->from = read ? other : s;
    x->to = read ? s : other;
    x->open_only = grant == ACCESS_OPEN_ONLY;
    snprintf(x->local_agent, sizeof(x->local_agent), "%s", s->agent);
    snprintf(x->remote_agent, sizeof(x->remote_agent), "%s", other->agent);
    list_insert_tail(&s->xfers, &x->session_node);
    list_insert_tail(&other->locals, &x->other_node);
    s->nxfers++;
    d->stats.xfers_submitted++;
    if (xfer_set_sync(x, req->sync_msg.data, req->sync_msg.len) != B10_OK) {
        xfer_discard(x);
        return B10_ERR_NO_MEMORY;
    }
    x->notice_reserved = req->sync_msg.len;
    session_notice_reserve(other, x->notice_reserved);
    *xfer_p = x;
    log_debug("transfer %016" PRIx64 ": %s %s %s here, %zu spans, %" PRIu64 " bytes", x->id, s->agent,
              read ? "←" : "→", other->agent, count, plan->total);
    return B10_OK;
}

void xfer_forget_rank(struct session *s)
{
    while (!list_empty(&s->locals)) {
        struct xfer *x = list_entry(s->locals.next, struct xfer, other_node);
        xfer_fail(x, B10_ERR_CLIENT_GONE, "rank '%.200s', whose memory it %s, disconnected",
                  s->agent, x->local_read ? "read" : "wrote");
        if (x->from == s)
            x->from = NULL;
        if (x->to == s)
            x->to = NULL;
    }
}

/* ---------------------------------------------------------------- receiver */

static void xfer_on_scattered(struct copy_job *job, b10_status_t status)
{
    struct xfer_slot *slot = job->arg;
    struct xfer *x = slot->x;

    xfer_scatter_over(x, slot, job);
    if (!xfer_slot_op_done(slot)) {
        /* Failed already: its news may have waited for this copy. */
        xfer_settle_check(x);
        xfer_maybe_free(x);
        return;
    }
    if (status != B10_OK) {
        xfer_fail(x, B10_ERR_INTERNAL, "scatter of chunk %u failed", slot->chunk);
        return;
    }
    xfer_pipe_copy_done(slot, job);
    /* After a stall the sender may have reported failure: report no success here. */
    if (peer_liveness_check(x->d) && x->state == XFER_DONE)
        return;
    x->d->stats.bytes_landed += x->plan->chunks[slot->chunk].bytes;
    x->chunks_done++;
    /* Its view takes the next chunk at once: the window reserved before READY stays whole. */
    if (x->next_chunk < x->plan->nchunks) {
        xfer_recv_post(x, slot, slot->view);
        return;
    }
    xfer_slot_release(slot);
    if (x->chunks_done == x->plan->nchunks)
        xfer_finish(x);
}

static void xfer_on_data(void *arg, b10_status_t status, size_t length)
{
    struct xfer_slot *slot = arg;
    struct xfer *x = slot->x;
    uint64_t want = x->plan->chunks[slot->chunk].bytes;

    if (!xfer_slot_op_done(slot))
        return;
    xfer_pipe_wire_end(slot);
    if (status != B10_OK) {
        if (status == B10_ERR_PEER_PROTOCOL)
            x->d->stats.peer_protocol_errors++;
        xfer_fail(x, status == B10_ERR_CANCELLED ? B10_ERR_PEER_LOST : status,
                  "DATA chunk %u: %s", slot->chunk,
                  status == B10_ERR_PEER_PROTOCOL ? "larger than announced" : b10_status_str(status));
        return;
    }
    if (length != want) {
        x->d->stats.peer_protocol_errors++;
        xfer_fail(x, B10_ERR_PEER_PROTOCOL, "DATA chunk %u: %zu bytes, %" PRIu64 " announced",
                  slot->chunk, length, want);
        return;
    }
    peer_heard(x->peer);
    /* Late DATA stays in its quarantined view, never scattered: past the
     * deadline, or after a stall during which the sender may have given up. */
    if (xfer_past_deadline(x) || (peer_liveness_check(x->d) && x->state == XFER_DONE))
        return;
    b10_status_t st = xfer_copy_chunk(slot, false, xfer_on_scattered);
    if (st != B10_OK) {
        /* The target deregistered or left mid-transfer: the view holds data for nowhere. */
        xfer_fail(x, st == B10_ERR_NOT_REGISTERED ? B10_ERR_REMOTE_REJECTED : st,
                  "scattering chunk %u: %s", slot->chunk,
                  st == B10_ERR_NOT_REGISTERED ? "destination no longer registered"
                  : st == B10_ERR_PERMISSION ? "destination no longer in a region open to the node"
                                             : b10_status_str(st));
    }
}

/* Post the receive of the next chunk into view, on slot; false when x failed. */
static bool xfer_recv_post(struct xfer *x, struct xfer_slot *slot, struct view *view)
{
    *slot = (struct xfer_slot){ .x = x, .busy = true, .chunk = x->next_chunk++, .view = view };
    uint64_t tag = tags_derive(&x->link, x->id, slot->chunk, TAG_KIND_DATA);
    /* The chunk index picks the data lane, as it does at the sender. */
    if (x->peer->ep == NULL) {
        xfer_slot_release(slot);
        xfer_fail(x, B10_ERR_PEER_LOST, "no endpoint to the sender for chunk %u", slot->chunk);
        return false;
    }
    if (wire_recv_bulk(x->peer->ep, slot->chunk, tag, view->base,
                       x->plan->chunks[slot->chunk].bytes, view->memh, xfer_on_data, slot,
                       &slot->op) != 0) {
        xfer_slot_release(slot);
        xfer_fail(x, B10_ERR_INTERNAL, "posting the receive of chunk %u failed", slot->chunk);
        return false;
    }
    x->holds++;
    view->holds++;
    xfer_pipe_wire_begin(slot);
    return true;
}

/* Keep up to nslots DATA receives posted into views. */
static void xfer_recv_pump(struct xfer *x)
{
    while (x->state == XFER_RUNNING && x->next_chunk < x->plan->nchunks) {
        struct xfer_slot *slot = xfer_free_slot(x);
        if (slot == NULL)
            return;
        struct view *view = staging_get(x->d->staging, VIEW_RECV);
        if (view == NULL) {
            xfer_wait_for_view(x);
            return;
        }
        if (!xfer_recv_post(x, slot, view))
            return;
    }
}

/*
 * R: a transfer's window of views (--max-in-flight of them, or as many as
 * it has chunks) must fit its peer's share (--max-peer-staging) and be free
 * in the pool before it posts a receive or says READY; it takes them all at
 * once, and each view takes the next chunk as soon as its scatter is done,
 * so the window stays whole until the last chunk. One that does not fit
 * waits, queued, for the peer's earlier transfers (or the pool) to give
 * room back. A sender therefore sends DATA only for transfers whose
 * receives are posted, or reposted as soon as a chunk lands.
 */
static void xfer_recv_begin(struct xfer *x)
{
    struct peer *peer = x->peer;
    uint64_t share = config_peer_staging(&x->d->cfg);
    uint32_t window = (uint32_t)(x->reserve_bytes / staging_view_bytes(x->d->staging));

    /* Woken while its peer is being given up: its failure is on its way, it says no READY. */
    if (!peer_link_live(peer, x->link.gen))
        return;
    if (peer->quarantined + x->reserve_bytes > share) {
        /* Its own transfers' return cannot make room, only the quarantine's TTL: fail fast. */
        peer_refused(peer, "a transfer", "the staging its failed transfers left in the quarantine "
                     "leaves no room in its share (--max-peer-staging)");
        xfer_fail(x, B10_ERR_STAGING_EXHAUSTED, "%" PRIu64 " bytes of staging are quarantined for "
                  "the sending daemon's failed transfers: no room for a window of %" PRIu64
                  " in its share of %" PRIu64 " (--max-peer-staging)", peer->quarantined,
                  x->reserve_bytes, share);
        return;
    }
    if (peer->reserved + peer->quarantined + x->reserve_bytes > share ||
        !staging_recv_room(x->d->staging, window)) {
        x->state = XFER_QUEUED;
        xfer_wait_for_view(x);
        return;
    }
    peer->reserved += x->reserve_bytes;
    x->reserve_held = true;
    x->state = XFER_RUNNING;
    xfer_pipe_start(x);
    xfer_recv_pump(x);
    if (x->state == XFER_DONE)
        return;

    B10__Peer__Ready ready = B10__PEER__READY__INIT;
    B10__Peer__Msg msg = B10__PEER__MSG__INIT;
    ready.xfer_id = x->id;
    msg.body_case = B10__PEER__MSG__BODY_READY;
    msg.ready = &ready;
    xfer_send_peer(x, TAG_KIND_READY, &msg);
}

static void xfer_on_cancel(void *arg, b10_status_t status, size_t length)
{
    struct xfer *x = arg;
    B10__Peer__Msg *msg;

    x->cancel_op = NULL;
    x->holds--;
    if (x->state == XFER_DONE || status != B10_OK) {
        xfer_maybe_free(x);
        return;
    }
    b10_status_t decoded = xfer_decode_reply(x, x->cancel_buf, length, B10__PEER__MSG__BODY_CANCEL,
                                             &msg);
    if (decoded == B10_ERR_UNAUTHENTICATED) {
        xfer_post_reply(x, tags_derive(&x->link, x->id, 0, TAG_KIND_CANCEL), x->cancel_buf,
                        sizeof(x->cancel_buf), xfer_on_cancel, &x->cancel_op, "CANCEL");
        return;
    }
    if (decoded != B10_OK) {
        xfer_fail(x, B10_ERR_PEER_PROTOCOL, "malformed CANCEL");
        return;
    }
    b10_status_t reason = (b10_status_t)msg->cancel->reason;
    x->quiet = !msg->cancel->want_result;
    b10__peer__msg__free_unpacked(msg, NULL);
    /* The sender gave up: fail here too; it hears a RESULT (once our copies ended) if it waits for one. */
    xfer_fail(x, B10_ERR_CANCELLED, "the sending daemon cancelled the transfer (%s)",
              b10_status_name(reason));
}

/* Refuse a CONTROL without creating a transfer: a RESULT on the transfer's tag. */
static void xfer_refuse(struct peer *peer, const B10__Peer__Control *control, b10_status_t status,
                        const char *detail)
{
    log_warning("refusing transfer %016" PRIx64 " from %016" PRIx64 ": %s: %s", control->xfer_id,
                peer->daemon_id, b10_status_name(status), detail);
    peer_send_result(peer, peer->in.tags.gen, control->xfer_id, status, detail);
}

static bool xfer_name_ok(const char *name)
{
    size_t n = strnlen(name, 256);
    return n > 0 && n < 256;
}

static struct xfer *xfer_waiting_read(struct b10d *d, struct peer *peer, struct session *s,
                                      uint64_t read_id)
{
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &s->xfers) {
        struct xfer *x = list_entry(pos, struct xfer, session_node);
        if (x->role == XFER_READ && x->id == read_id && x->peer == peer &&
            x->state == XFER_WAIT_READY && x->read_child == NULL)
            return x;
    }
    return NULL;
}

/*
 * What one peer may have this daemon hold for it (--max-peer-xfers,
 * --max-peer-control, --min-deadline-ms, --peer-quarantine-bytes): B10_OK,
 * or the refusal and why.
 */
static b10_status_t xfer_peer_limits(struct peer *peer, uint32_t deadline_ms, size_t control_bytes,
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

void xfer_admit(struct peer *peer, const B10__Peer__Control *control, size_t length)
{
    struct b10d *d = peer->d;
    struct plan *plan = NULL;
    char detail[256] = "";
    b10_status_t status;

    if (control->gen != peer->in.tags.gen || !xfer_name_ok(control->dst_agent) ||
        !xfer_name_ok(control->src_agent)) {
        d->stats.peer_protocol_errors++;
        xfer_refuse(peer, control, B10_ERR_PEER_PROTOCOL, "CONTROL header malformed");
        return;
    }
    struct session *target = session_find(d, control->dst_agent);
    if (target == NULL) {
        snprintf(detail, sizeof(detail), "no rank named '%.200s' on the remote node",
                 control->dst_agent);
        xfer_refuse(peer, control, B10_ERR_UNKNOWN_AGENT, detail);
        return;
    }
    /* A write-back lands only for a READ of that rank still waiting for it from that peer. */
    struct xfer *parent = NULL;
    if (control->read_id != 0) {
        parent = xfer_waiting_read(d, peer, target, control->read_id);
        if (parent == NULL) {
            xfer_refuse(peer, control, B10_ERR_CANCELLED, "no READ waits for this write-back");
            return;
        }
    }
    /* A write-back lands for the target's own READ; anything else needs the target's leave. */
    struct access_origin origin;
    enum access_grant grant = ACCESS_FULL;
    access_origin(&origin, peer, control->src_agent);
    if (parent == NULL &&
        ((grant = access_grant(target, &origin, true, detail, sizeof(detail))) == ACCESS_REFUSED ||
         (grant == ACCESS_OPEN_ONLY && control->sync_msg.len > 0 &&
          access_notice_refused(target, &origin, detail, sizeof(detail)) != B10_OK))) {
        xfer_refuse(peer, control, B10_ERR_PERMISSION, detail);
        return;
    }
    if (d->stopping) {
        xfer_refuse(peer, control, B10_ERR_DRAINING,
                    "the remote daemon is draining: it admits no new transfers");
        return;
    }
    if (quarantine_bytes(d->quarantine) > d->cfg.quarantine_budget) {
        xfer_refuse(peer, control, B10_ERR_STAGING_EXHAUSTED,
                    "the remote daemon's quarantined staging exceeds its budget");
        return;
    }
    if ((status = xfer_peer_limits(peer, control->deadline_ms, length, detail, sizeof(detail))) != B10_OK) {
        peer_refused(peer, "a transfer", detail);
        xfer_refuse(peer, control, status, detail);
        return;
    }
    if (parent == NULL && control->sync_msg.len > 0 &&
        !session_notice_room(target, control->sync_msg.len)) {
        snprintf(detail, sizeof(detail), "notices for '%.200s' wait unread (--max-notice-bytes)",
                 control->dst_agent);
        peer_refused(peer, "a transfer's sync message", detail);
        xfer_refuse(peer, control, B10_ERR_BUSY, detail);
        return;
    }
    status = plan_decode(control->chunk_pieces.data, control->chunk_pieces.len,
                         control->pieces.data, control->pieces.len, control->nchunks,
                         control->total_bytes, staging_view_bytes(d->staging),
                         d->cfg.max_control_bytes / SPAN_BYTES, &plan, detail, sizeof(detail));
    if (status != B10_OK) {
        if (status == B10_ERR_PEER_PROTOCOL)
            d->stats.peer_protocol_errors++;
        xfer_refuse(peer, control, status, detail);
        return;
    }
    /* A write-back writes what its READ asked for, no more: the same bytes, into the READ's spans. */
    if (parent != NULL && !plan_covers(parent->plan, plan)) {
        plan_free(plan);
        d->stats.peer_protocol_errors++;
        xfer_refuse(peer, control, B10_ERR_PEER_PROTOCOL,
                    "the write-back writes outside what its READ asked for");
        return;
    }
    /* Every destination byte inside the target's registrations (open ones, if that is all it may reach). */
    status = grant == ACCESS_OPEN_ONLY ? access_plan_open(target, &origin, plan, detail, sizeof(detail))
                                       : B10_OK;
    if (status == B10_OK)
        status = xfer_check_dst(plan, &target->mem, detail, sizeof(detail));
    if (status != B10_OK) {
        plan_free(plan);
        xfer_refuse(peer, control, status, detail);
        return;
    }
    uint32_t budget = control->deadline_ms < d->cfg.max_deadline_ms ? control->deadline_ms
                                                                    : d->cfg.max_deadline_ms;
    struct xfer *x = xfer_new(d, XFER_RECV, control->xfer_id, budget ? budget : 1);
    if (x == NULL) {
        plan_free(plan);
        xfer_refuse(peer, control, B10_ERR_NO_MEMORY, "no memory for the transfer");
        return;
    }
    x->plan = plan;
    x->peer = peer;
    peer_hold(peer);
    x->link = peer->in.tags;
    x->session = target;
    x->uid = target->uid;
    x->open_only = grant == ACCESS_OPEN_ONLY;
    snprintf(x->local_agent, sizeof(x->local_agent), "%s", control->dst_agent);
    snprintf(x->remote_agent, sizeof(x->remote_agent), "%s", control->src_agent);
    list_insert_tail(&target->targets, &x->session_node);
    list_insert_tail(&peer->xfers, &x->peer_node);
    x->admitted = true;
    x->control_bytes = length;
    peer->in_xfers++;
    peer->control_held += length;
    d->control_held += length;
    x->reserve_bytes = (uint64_t)(plan->nchunks < x->nslots ? plan->nchunks : x->nslots) *
                       staging_view_bytes(d->staging);
    x->state = XFER_QUEUED;
    d->stats.xfers_received++;
    if (parent != NULL) {
        x->read_id = control->read_id;
        x->read_parent = parent;
        parent->read_child = x;
    } else if (control->sync_msg.len > 0) {
        if (control->sync_msg.len > B10_SYNC_MSG_MAX) {
            d->stats.peer_protocol_errors++;
            xfer_fail(x, B10_ERR_PEER_PROTOCOL, "sync message of %zu bytes", control->sync_msg.len);
            return;
        }
        if (xfer_set_sync(x, control->sync_msg.data, control->sync_msg.len) != B10_OK) {
            xfer_fail(x, B10_ERR_NO_MEMORY, "no memory for the sync message");
            return;
        }
        x->notice_reserved = control->sync_msg.len;
        session_notice_reserve(target, x->notice_reserved);
    }

    /* Register every tag before posting any receive: a collision fails the transfer loudly. */
    uint64_t cancel_tag = tags_derive(&x->link, x->id, 0, TAG_KIND_CANCEL);
    int rc = tags_register(d->tags, cancel_tag, x);
    uint32_t registered = 0;
    while (rc == 0 && registered < plan->nchunks) {
        rc = tags_register(d->tags, tags_derive(&x->link, x->id, registered, TAG_KIND_DATA), x);
        if (rc == 0)
            registered++;
    }
    if (rc != 0) {
        /* Undo ours; the colliding tag is someone else's and stays. */
        for (uint32_t c = 0; c < registered; c++)
            tags_unregister(d->tags, tags_derive(&x->link, x->id, c, TAG_KIND_DATA));
        if (tags_lookup(d->tags, cancel_tag) == x)
            tags_unregister(d->tags, cancel_tag);
        xfer_fail(x, tags_status(rc), "registering the transfer's tags: %s", tags_strerror(rc));
        return;
    }
    x->tags_registered = true;
    if (!xfer_post_reply(x, cancel_tag, x->cancel_buf, sizeof(x->cancel_buf), xfer_on_cancel,
                         &x->cancel_op, "CANCEL"))
        return;
    log_debug("transfer %016" PRIx64 " from %s admitted into %s: %u chunks, %" PRIu64 " bytes",
              x->id, x->remote_agent, x->local_agent, plan->nchunks, plan->total);
    xfer_recv_begin(x);
}

/* Refuse a READ request without starting anything: a Result on the asking link. */
static void xfer_refuse_read(struct peer *peer, uint64_t read_id, b10_status_t status,
                             const char *detail)
{
    log_warning("refusing READ %016" PRIx64 " from %016" PRIx64 ": %s: %s", read_id,
                peer->daemon_id, b10_status_name(status), detail);
    peer_send_result(peer, peer->in.tags.gen, read_id, status, detail);
}

void xfer_serve_read(struct peer *peer, const B10__Peer__ReadRequest *req, size_t length)
{
    struct b10d *d = peer->d;
    char detail[256] = "";
    struct xfer *x;

    size_t count = req->src_spans.len / SPAN_BYTES;
    if (!xfer_name_ok(req->src_agent) || !xfer_name_ok(req->dst_agent) || count == 0 ||
        req->src_spans.len % SPAN_BYTES != 0 || req->dst_spans.len != req->src_spans.len ||
        req->sync_msg.len > B10_SYNC_MSG_MAX || req->read_id == 0) {
        d->stats.peer_protocol_errors++;
        xfer_refuse_read(peer, req->read_id, B10_ERR_PEER_PROTOCOL, "READ request malformed");
        return;
    }
    struct session *holder = session_find(d, req->src_agent);
    if (holder == NULL) {
        snprintf(detail, sizeof(detail), "no rank named '%.200s' on the remote node", req->src_agent);
        xfer_refuse_read(peer, req->read_id, B10_ERR_UNKNOWN_AGENT, detail);
        return;
    }
    struct access_origin origin;
    access_origin(&origin, peer, req->dst_agent);
    enum access_grant grant;
    if (access_spans(holder, &origin, req->src_spans.data, count, req->sync_msg.len > 0, &grant,
                     detail, sizeof(detail)) != B10_OK) {
        xfer_refuse_read(peer, req->read_id, B10_ERR_PERMISSION, detail);
        return;
    }
    b10_status_t limit = xfer_peer_limits(peer, req->deadline_ms, length, detail, sizeof(detail));
    if (limit == B10_OK && req->sync_msg.len > 0 && !session_notice_room(holder, req->sync_msg.len)) {
        snprintf(detail, sizeof(detail), "notices for '%.200s' wait unread (--max-notice-bytes)",
                 req->src_agent);
        limit = B10_ERR_BUSY;
    }
    if (limit != B10_OK) {
        peer_refused(peer, "a READ", detail);
        xfer_refuse_read(peer, req->read_id, limit, detail);
        return;
    }
    /*
     * The holding rank's spans are checked against its registrations as any
     * WRITE's sources are; to the reader, a source outside them is the remote
     * side refusing.
     */
    b10_status_t status = xfer_new_local(holder, peer, req->dst_agent, XFER_SEND,
                                         req->src_spans.data, req->dst_spans.data, count,
                                         req->deadline_ms, req->sync_msg.data, req->sync_msg.len,
                                         &x, detail, sizeof(detail));
    if (status != B10_OK) {
        char why[512];
        snprintf(why, sizeof(why), "reading from %.64s: %.400s", req->src_agent, detail);
        xfer_refuse_read(peer, req->read_id,
                         status == B10_ERR_NOT_REGISTERED ? B10_ERR_REMOTE_REJECTED : status, why);
        return;
    }
    /* Not the holding rank's transfer: it hears only the sync message, once read. */
    x->released = true;
    x->open_only = grant == ACCESS_OPEN_ONLY;
    x->admitted = true;
    x->control_bytes = length;
    peer->in_xfers++;
    peer->control_held += length;
    d->control_held += length;
    x->notice_reserved = req->sync_msg.len;
    session_notice_reserve(holder, x->notice_reserved);
    x->read_id = req->read_id;
    x->read_link = peer->in.tags;
    log_debug("READ %016" PRIx64 " served by write-back %016" PRIx64 " from %s", req->read_id, x->id,
              req->src_agent);
    xfer_start(x);
}
