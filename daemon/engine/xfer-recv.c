/*
 * xfer-recv.c — the receiving side: a CONTROL admitted (every destination
 * byte inside the target rank's registrations, the peer within its bounds),
 * a window of views reserved, READY, then for each DATA a scatter into the
 * rank's memory; RESULT after the last scatter completed (see xfer-int.h).
 */
#include "xfer-int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "checksum.h"
#include "peer.h"
#include "plan.h"
#include "quarantine.h"
#include "rank.h"
#include "session.h"

static bool xfer_recv_post(struct xfer *x, struct xfer_slot *slot, struct view *view);

static void xfer_recv_on_scattered(struct copy_job *job, b10_status_t status)
{
    struct xfer_slot *slot = job->arg;
    struct xfer *x = slot->x;

    if (!xfer_copy_ended(slot, job, status))
        return;
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

static void xfer_recv_on_data(void *arg, b10_status_t status, size_t length)
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
    if (length != checksum_message_bytes(want)) {
        x->d->stats.peer_protocol_errors++;
        xfer_fail(x, B10_ERR_PEER_PROTOCOL, "DATA chunk %u: %zu bytes, %" PRIu64 " announced "
                  "and its checksum trailer's %zu", slot->chunk, length, want,
                  checksum_message_bytes(want) - want);
        return;
    }
    if (checksum_trailer_get(slot->view->base, want, checksum_seed(x->id, slot->chunk),
                             &slot->sum, &slot->has_sum) != B10_OK) {
        xfer_chunk_corrupt(x, slot->chunk, "came with a damaged checksum trailer");
        return;
    }
    if (!slot->has_sum && x->d->cfg.verify_data == CONFIG_VERIFY_ON && !x->peer->unchecked_said) {
        x->peer->unchecked_said = true;
        log_notice("peer %s sends its chunks without checksums (--verify-data off there, or "
                   "auto, which sums only the chunks a GPU gathers): they land unchecked",
                   x->peer->name);
    }
    peer_heard(x->peer);
    /* Late DATA stays in its quarantined view, never scattered: past the
     * deadline, or after a stall during which the sender may have given up. */
    if (xfer_past_deadline(x) || (peer_liveness_check(x->d) && x->state == XFER_DONE))
        return;
    b10_status_t st = xfer_copy_chunk(slot, false, xfer_recv_on_scattered);
    if (st != B10_OK)
        xfer_fail_dst(x, st, slot->chunk, x->local_agent);   /* the view holds data for nowhere */
}

/* Post the receive of the next chunk into view, on slot; false when x failed. */
static bool xfer_recv_post(struct xfer *x, struct xfer_slot *slot, struct view *view)
{
    *slot = (struct xfer_slot){ .x = x, .busy = true, .chunk = x->next_chunk++, .view = view };
    /* xfer_data_post picks its worker as the sender does. */
    if (x->peer->ep == NULL) {
        xfer_slot_release(slot);
        xfer_fail(x, B10_ERR_PEER_LOST, "no endpoint to the sender for chunk %u", slot->chunk);
        return false;
    }
    if (xfer_data_post(slot, false, xfer_recv_on_data) != B10_OK) {
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
void xfer_recv_pump(struct xfer *x)
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
void xfer_recv_begin(struct xfer *x)
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
    xfer_tell_peer(x, TAG_KIND_READY, &msg);
    xfer_trace(x, XS_READY);
}

static void xfer_recv_on_cancel(void *arg, b10_status_t status, size_t length)
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
                        sizeof(x->cancel_buf), xfer_recv_on_cancel, &x->cancel_op, "CANCEL");
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

/* ---------------------------------------------------------------- admission: what it decides */

/* v refused for why, with status; the rule has written v->detail. */
static b10_status_t xfer_recv_no(struct xfer_recv_verdict *v, enum xfer_recv_why why,
                                 b10_status_t status)
{
    v->why = why;
    v->status = status;
    return status;
}

/*
 * Who sends, into whom, and whether this daemon and the peer's share have
 * room for one more: every rule but those of the pieces. Sets v's target,
 * parent, origin and grant as it goes.
 */
static b10_status_t xfer_recv_check_who(struct peer *peer, const B10__Peer__Control *control,
                                        size_t length, struct xfer_recv_verdict *v)
{
    struct b10d *d = peer->d;
    b10_status_t status;

    if (control->gen != peer->in.tags.gen || !xfer_name_ok(control->dst_agent) ||
        !xfer_name_ok(control->src_agent)) {
        snprintf(v->detail, sizeof(v->detail), "CONTROL header malformed");
        return xfer_recv_no(v, XR_MALFORMED, B10_ERR_PEER_PROTOCOL);
    }
    if ((v->target = rank_find(d, control->dst_agent)) == NULL) {
        snprintf(v->detail, sizeof(v->detail), "no rank named '%.200s' on the remote node",
                 control->dst_agent);
        return xfer_recv_no(v, XR_NO_RANK, B10_ERR_UNKNOWN_AGENT);
    }
    if (rank_uid_check(d, v->target, control->dst_agent, control->dst_uid_known, control->dst_uid,
                       v->detail, sizeof(v->detail)) != B10_OK)
        return xfer_recv_no(v, XR_WRONG_UID, B10_ERR_UNKNOWN_AGENT);
    /* A write-back lands only for a READ of that rank still waiting for it from that peer. */
    if (control->read_id != 0 &&
        (v->parent = xfer_read_waiting(d, peer, v->target, control->read_id)) == NULL) {
        snprintf(v->detail, sizeof(v->detail), "no READ waits for this write-back");
        return xfer_recv_no(v, XR_NO_READ, B10_ERR_CANCELLED);
    }
    /* A write-back lands for the target's own READ; anything else needs the target's leave. */
    access_origin(&v->origin, peer, control->src_agent);
    if (v->parent == NULL &&
        ((v->grant = access_grant(v->target, &v->origin, ACCESS_WRITE, v->detail,
                                  sizeof(v->detail))) == ACCESS_REFUSED ||
         (v->grant == ACCESS_OPEN_ONLY && control->sync_msg.len > 0 &&
          access_notice_refused(v->target, &v->origin, v->detail, sizeof(v->detail)) != B10_OK)))
        return xfer_recv_no(v, XR_NOT_GRANTED, B10_ERR_PERMISSION);
    if (d->stopping) {
        snprintf(v->detail, sizeof(v->detail),
                 "the remote daemon is draining: it admits no new transfers");
        return xfer_recv_no(v, XR_DRAINING, B10_ERR_DRAINING);
    }
    if (quarantine_bytes(d->quarantine) > d->cfg.quarantine_budget) {
        snprintf(v->detail, sizeof(v->detail),
                 "the remote daemon's quarantined staging exceeds its budget");
        return xfer_recv_no(v, XR_QUARANTINE_FULL, B10_ERR_STAGING_EXHAUSTED);
    }
    status = xfer_peer_limits(peer, control->deadline_ms, length, v->detail, sizeof(v->detail));
    if (status != B10_OK)
        return xfer_recv_no(v, XR_PEER_LIMITS, status);
    if (v->parent == NULL && control->sync_msg.len > 0 &&
        !rank_notice_room(d, v->target, control->sync_msg.len)) {
        snprintf(v->detail, sizeof(v->detail), "notices for '%.200s' wait unread "
                 "(--max-notice-bytes)", control->dst_agent);
        return xfer_recv_no(v, XR_NOTICES_FULL, B10_ERR_BUSY);
    }
    return B10_OK;
}

/* CONTROL's pieces into a plan: the full form or the compact one (slots), never both. */
static b10_status_t xfer_recv_decode(struct b10d *d, const B10__Peer__Control *control,
                                     struct plan **plan_p, char *detail, size_t detail_len)
{
    /* As many pieces (or slots) either way: a plan as large at most. */
    uint64_t max_pieces = d->cfg.max_control_bytes / SPAN_BYTES;

    if (control->slot_len != 0 && control->pieces.len != 0) {
        snprintf(detail, detail_len, "control carries its pieces both whole and as slots");
        return B10_ERR_PEER_PROTOCOL;
    }
    if (control->slot_len != 0) {
        const struct plan_slots slots = { control->slot_base, control->slot_len,
                                          control->slots.data, control->slots.len };
        return plan_decode_slots(control->chunk_pieces.data, control->chunk_pieces.len, &slots,
                                 control->nchunks, control->total_bytes,
                                 staging_view_bytes(d->staging), max_pieces, plan_p, detail,
                                 detail_len);
    }
    if (control->slots.len != 0) {
        snprintf(detail, detail_len, "control carries slots of no length");
        return B10_ERR_PEER_PROTOCOL;
    }
    return plan_decode(control->chunk_pieces.data, control->chunk_pieces.len,
                       control->pieces.data, control->pieces.len, control->nchunks,
                       control->total_bytes, staging_view_bytes(d->staging), max_pieces, plan_p,
                       detail, detail_len);
}

/*
 * The pieces: decoded, charged as held, inside what the READ a write-back
 * serves asked for, and inside the target's registrations (open ones, if
 * that is all the origin may reach). Sets v->plan and v->held when admitted.
 */
static b10_status_t xfer_recv_check_plan(struct peer *peer, const B10__Peer__Control *control,
                                         size_t length, struct xfer_recv_verdict *v)
{
    struct plan *plan = NULL;
    b10_status_t status = xfer_recv_decode(peer->d, control, &plan, v->detail, sizeof(v->detail));

    if (status != B10_OK)
        return xfer_recv_no(v, XR_BAD_PIECES, status);
    /*
     * What the transfer holds here is charged as the full form of its pieces would be: a
     * slot is 4 bytes on the wire but a piece of 24 in the plan, and charged by its wire
     * bytes a peer could make the daemon hold four times what --max-peer-control allows.
     */
    v->held = length;
    if (control->slot_len != 0) {
        v->held = length - control->slots.len + (size_t)plan->npieces * SPAN_BYTES;
        if (v->held > length &&
            (status = xfer_peer_limits(peer, control->deadline_ms, v->held, v->detail,
                                       sizeof(v->detail))) != B10_OK) {
            plan_free(plan);
            return xfer_recv_no(v, XR_HELD_LIMITS, status);
        }
    }
    /* A write-back writes what its READ asked for, no more: the same bytes, into the READ's spans. */
    if (v->parent != NULL && !plan_covers(v->parent->plan, plan)) {
        plan_free(plan);
        snprintf(v->detail, sizeof(v->detail),
                 "the write-back writes outside what its READ asked for");
        return xfer_recv_no(v, XR_OUTSIDE_READ, B10_ERR_PEER_PROTOCOL);
    }
    if (v->grant == ACCESS_OPEN_ONLY &&
        (status = access_plan_open(v->target, &v->origin, plan, v->detail,
                                   sizeof(v->detail))) != B10_OK) {
        plan_free(plan);
        return xfer_recv_no(v, XR_NOT_OPEN, status);
    }
    status = xfer_check_dst(plan, &v->target->mem, NULL, v->detail, sizeof(v->detail));
    if (status != B10_OK) {
        plan_free(plan);
        return xfer_recv_no(v, XR_OUTSIDE_DST, status);
    }
    v->plan = plan;
    return B10_OK;
}

b10_status_t xfer_recv_check(struct peer *peer, const B10__Peer__Control *control, size_t length,
                             struct xfer_recv_verdict *v)
{
    *v = (struct xfer_recv_verdict){ .why = XR_ADMIT, .status = B10_OK, .grant = ACCESS_FULL };
    b10_status_t status = xfer_recv_check_who(peer, control, length, v);
    return status != B10_OK ? status : xfer_recv_check_plan(peer, control, length, v);
}

/* ---------------------------------------------------------------- admission: what it does */

/* Refuse a CONTROL without creating a transfer: a RESULT on the transfer's tag. */
static void xfer_recv_refuse(struct peer *peer, const B10__Peer__Control *control, b10_status_t status,
                        const char *detail)
{
    log_warning("refusing transfer %016" PRIx64 " from %s (%016" PRIx64 "): %s: %s",
                control->xfer_id, peer->name, peer->daemon_id, b10_status_name(status), detail);
    peer_send_result(peer, peer->in.tags.gen, control->xfer_id, status, detail);
}

/* A refused CONTROL: what its rule counts and logs, then the RESULT that says why. */
static void xfer_recv_refused(struct peer *peer, const B10__Peer__Control *control,
                              const struct xfer_recv_verdict *v)
{
    if (v->status == B10_ERR_PEER_PROTOCOL)
        peer->d->stats.peer_protocol_errors++;
    if (v->why == XR_WRONG_UID)
        log_info("peer %s: refusing a transfer into %s: %s", peer->name, control->dst_agent,
                 v->detail);
    else if (v->why == XR_PEER_LIMITS || v->why == XR_HELD_LIMITS)
        peer_refused(peer, "a transfer", v->detail);
    else if (v->why == XR_NOTICES_FULL)
        peer_refused(peer, "a transfer's sync message", v->detail);
    xfer_recv_refuse(peer, control, v->status, v->detail);
}

/* Register every tag of x before posting any receive: a collision fails x loudly (false). */
static bool xfer_recv_register_tags(struct xfer *x)
{
    struct tags *tags = x->d->tags;
    uint64_t cancel_tag = tags_derive(&x->link, x->id, 0, TAG_KIND_CANCEL);
    b10_status_t st = tags_register(tags, cancel_tag, x);
    uint32_t registered = 0;

    while (st == B10_OK && registered < x->plan->nchunks) {
        st = tags_register(tags, tags_derive(&x->link, x->id, registered, TAG_KIND_DATA), x);
        if (st == B10_OK)
            registered++;
    }
    if (st != B10_OK) {
        /* Undo ours; the colliding tag is someone else's and stays. */
        for (uint32_t c = 0; c < registered; c++)
            tags_unregister(tags, tags_derive(&x->link, x->id, c, TAG_KIND_DATA));
        if (tags_lookup(tags, cancel_tag) == x)
            tags_unregister(tags, cancel_tag);
        xfer_fail(x, st, "registering the transfer's tags: %s", tags_strerror(st));
        return false;
    }
    x->tags_registered = true;
    return true;
}

/* The sync message a transfer delivers when it lands, reserved in its rank's notices; false: x failed. */
static bool xfer_recv_keep_sync(struct xfer *x, const B10__Peer__Control *control)
{
    if (control->sync_msg.len > B10_SYNC_MSG_MAX) {
        x->d->stats.peer_protocol_errors++;
        xfer_fail(x, B10_ERR_PEER_PROTOCOL, "sync message of %zu bytes", control->sync_msg.len);
        return false;
    }
    if (xfer_set_sync(x, control->sync_msg.data, control->sync_msg.len) != B10_OK) {
        xfer_fail(x, B10_ERR_NO_MEMORY, "no memory for the sync message");
        return false;
    }
    x->notice_reserved = control->sync_msg.len;
    rank_notice_reserve(x->d, x->session, x->notice_reserved);
    return true;
}

/*
 * An admitted CONTROL becomes a transfer, with v's plan: charged to its
 * peer, its tags registered, the CANCEL's receive posted; then its window
 * and READY (xfer_recv_begin).
 */
static void xfer_recv_start(struct peer *peer, const B10__Peer__Control *control,
                            const struct xfer_recv_verdict *v, uint64_t arrived_ns)
{
    struct b10d *d = peer->d;
    struct plan *plan = v->plan;
    uint32_t budget = control->deadline_ms < d->cfg.max_deadline_ms ? control->deadline_ms
                                                                    : d->cfg.max_deadline_ms;
    /* Not silently: the sender's deadline was its daemon's to allow, the fence here is ours. */
    if (budget < control->deadline_ms)
        log_info("transfer %016" PRIx64 " from %s: its %u ms left are capped to this daemon's "
                 "--max-deadline-ms %u", control->xfer_id, peer->name, control->deadline_ms, budget);
    struct xfer *x = xfer_new(d, XFER_RECV, control->xfer_id, budget ? budget : 1);
    if (x == NULL) {
        plan_free(plan);
        xfer_recv_refuse(peer, control, B10_ERR_NO_MEMORY, "no memory for the transfer");
        return;
    }
    xfer_trace_begin(x, arrived_ns);
    x->plan = plan;
    x->peer = peer;
    peer_hold(peer);
    x->link = peer->in.tags;
    x->session = v->target;
    x->uid = v->target->uid;
    x->open_only = v->grant == ACCESS_OPEN_ONLY;
    snprintf(x->local_agent, sizeof(x->local_agent), "%s", control->dst_agent);
    snprintf(x->remote_agent, sizeof(x->remote_agent), "%s", control->src_agent);
    list_insert_tail(&v->target->targets, &x->session_node);
    list_insert_tail(&peer->xfers, &x->peer_user.node);
    x->admitted = true;
    x->control_bytes = v->held;
    peer->in_xfers++;
    peer->control_held += v->held;
    d->control_held += v->held;
    x->reserve_bytes = (uint64_t)(plan->nchunks < x->nslots ? plan->nchunks : x->nslots) *
                       staging_view_bytes(d->staging);
    x->state = XFER_QUEUED;
    d->stats.xfers_received++;
    if (v->parent != NULL) {
        x->read.id = control->read_id;
        x->read.parent = v->parent;
        v->parent->read.child = x;
    } else if (control->sync_msg.len > 0 && !xfer_recv_keep_sync(x, control)) {
        return;
    }
    if (!xfer_recv_register_tags(x))
        return;
    if (!xfer_post_reply(x, tags_derive(&x->link, x->id, 0, TAG_KIND_CANCEL), x->cancel_buf,
                         sizeof(x->cancel_buf), xfer_recv_on_cancel, &x->cancel_op, "CANCEL"))
        return;
    log_debug("transfer %016" PRIx64 " from %s admitted into %s: %u chunks, %" PRIu64 " bytes",
              x->id, x->remote_agent, x->local_agent, plan->nchunks, plan->total);
    xfer_trace(x, XS_ADMITTED);
    xfer_recv_begin(x);
}

/* The peer hook of a CONTROL: decided (xfer_recv_check), then refused or started. */
void xfer_recv_admit(struct peer *peer, const B10__Peer__Control *control, size_t length)
{
    uint64_t arrived_ns = uv_hrtime();
    struct xfer_recv_verdict v;

    if (xfer_recv_check(peer, control, length, &v) != B10_OK)
        xfer_recv_refused(peer, control, &v);
    else
        xfer_recv_start(peer, control, &v, arrived_ns);
}

/* ---------------------------------------------------------------- its end (xfer_role_ops) */

/* The sender hears RESULT. */
static void xfer_recv_result(struct xfer *x, b10_status_t status, const char *detail)
{
    peer_send_result(x->peer, x->link.gen, x->id, status, detail);
}

/* Landed: the target hears the sync message before the sender hears RESULT. */
static void xfer_recv_landed(struct xfer *x)
{
    struct b10d *d = x->d;

    d->stats.xfers_received_landed++;
    stats_landed(&d->hists, x->role, (double)(d->now_ms(d) - x->started_ms) / 1e3, -1,
                 x->plan->total, x->plan->npieces);
    if (x->session != NULL && x->sync_length > 0)
        rank_notice(d, x->session, x->remote_agent, x->sync, x->sync_length);
    xfer_recv_result(x, B10_OK, "");
    xfer_trace(x, XS_RESULT);
    char pipe[256];
    xfer_pipe_describe(x, pipe, sizeof(pipe));
    log_debug("transfer %016" PRIx64 " from %s landed in %s: %" PRIu64 " bytes in %u chunks, "
              "%" PRIu64 " ms (%s)", x->id, x->remote_agent, x->local_agent,
              x->plan->total, x->plan->nchunks, d->now_ms(d) - x->started_ms, pipe);
    if (x->read.parent != NULL) {
        struct xfer *parent = x->read.parent;
        parent->read.child = NULL;
        x->read.parent = NULL;
        xfer_finish(parent);
    }
}

static void xfer_recv_failed(struct xfer *x, b10_status_t status, enum xfer_state was)
{
    x->d->stats.xfers_received_failed++;
    stats_failed(&x->d->hists, x->role, status);
}

static void xfer_recv_report(struct xfer *x, b10_status_t cause)
{
    /* A sender that broke the protocol can still hear why: it fails now, not at its deadline. */
    if ((!xfer_peer_silent(cause) || cause == B10_ERR_PEER_PROTOCOL) && !x->quiet)
        xfer_recv_result(x, x->status, x->detail);
    if (x->read.settle_parent != NULL) {
        struct xfer *parent = x->read.settle_parent;
        x->read.settle_parent = NULL;
        parent->read.settling--;
        parent->holds--;
        /* Its copy outlived the bound: so does the READ's news. */
        if (x->status == B10_ERR_UNSETTLED && parent->report_due)
            xfer_report(parent, B10_ERR_UNSETTLED);
        else
            xfer_settle_check(parent);
        xfer_maybe_free(parent);
    }
}

/* The CANCEL's, and one a chunk's DATA (xfer_recv_register_tags). */
static void xfer_recv_each_tag(struct xfer *x, void (*fn)(struct xfer *x, uint64_t tag))
{
    fn(x, tags_derive(&x->link, x->id, 0, TAG_KIND_CANCEL));
    for (uint32_t c = 0; c < x->plan->nchunks; c++)
        fn(x, tags_derive(&x->link, x->id, c, TAG_KIND_DATA));
}

static uint32_t xfer_recv_ntags(const struct xfer *x)
{
    return x->plan->nchunks + 1;
}

const struct xfer_role_ops xfer_recv_role = {
    .name = "recv",
    .landed = xfer_recv_landed,
    .failed = xfer_recv_failed,
    .report = xfer_recv_report,
    .each_tag = xfer_recv_each_tag,
    .ntags = xfer_recv_ntags,
};
