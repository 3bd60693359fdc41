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

/* Refuse a CONTROL without creating a transfer: a RESULT on the transfer's tag. */
static void xfer_recv_refuse(struct peer *peer, const B10__Peer__Control *control, b10_status_t status,
                        const char *detail)
{
    log_warning("refusing transfer %016" PRIx64 " from %s (%016" PRIx64 "): %s: %s",
                control->xfer_id, peer->name, peer->daemon_id, b10_status_name(status), detail);
    peer_send_result(peer, peer->in.tags.gen, control->xfer_id, status, detail);
}

void xfer_recv_admit(struct peer *peer, const B10__Peer__Control *control, size_t length)
{
    struct b10d *d = peer->d;
    struct plan *plan = NULL;
    char detail[256] = "";
    b10_status_t status;
    uint64_t arrived_ns = uv_hrtime();

    if (control->gen != peer->in.tags.gen || !xfer_name_ok(control->dst_agent) ||
        !xfer_name_ok(control->src_agent)) {
        d->stats.peer_protocol_errors++;
        xfer_recv_refuse(peer, control, B10_ERR_PEER_PROTOCOL, "CONTROL header malformed");
        return;
    }
    struct session *target = rank_find(d, control->dst_agent);
    if (target == NULL) {
        snprintf(detail, sizeof(detail), "no rank named '%.200s' on the remote node",
                 control->dst_agent);
        xfer_recv_refuse(peer, control, B10_ERR_UNKNOWN_AGENT, detail);
        return;
    }
    if (rank_uid_check(d, target, control->dst_agent, control->dst_uid_known, control->dst_uid,
                       detail, sizeof(detail)) != B10_OK) {
        log_info("peer %s: refusing a transfer into %s: %s", peer->name, control->dst_agent, detail);
        xfer_recv_refuse(peer, control, B10_ERR_UNKNOWN_AGENT, detail);
        return;
    }
    /* A write-back lands only for a READ of that rank still waiting for it from that peer. */
    struct xfer *parent = NULL;
    if (control->read_id != 0) {
        parent = xfer_read_waiting(d, peer, target, control->read_id);
        if (parent == NULL) {
            xfer_recv_refuse(peer, control, B10_ERR_CANCELLED, "no READ waits for this write-back");
            return;
        }
    }
    /* A write-back lands for the target's own READ; anything else needs the target's leave. */
    struct access_origin origin;
    enum access_grant grant = ACCESS_FULL;
    access_origin(&origin, peer, control->src_agent);
    if (parent == NULL &&
        ((grant = access_grant(target, &origin, ACCESS_WRITE, detail, sizeof(detail))) == ACCESS_REFUSED ||
         (grant == ACCESS_OPEN_ONLY && control->sync_msg.len > 0 &&
          access_notice_refused(target, &origin, detail, sizeof(detail)) != B10_OK))) {
        xfer_recv_refuse(peer, control, B10_ERR_PERMISSION, detail);
        return;
    }
    if (d->stopping) {
        xfer_recv_refuse(peer, control, B10_ERR_DRAINING,
                    "the remote daemon is draining: it admits no new transfers");
        return;
    }
    if (quarantine_bytes(d->quarantine) > d->cfg.quarantine_budget) {
        xfer_recv_refuse(peer, control, B10_ERR_STAGING_EXHAUSTED,
                    "the remote daemon's quarantined staging exceeds its budget");
        return;
    }
    if ((status = xfer_peer_limits(peer, control->deadline_ms, length, detail, sizeof(detail))) != B10_OK) {
        peer_refused(peer, "a transfer", detail);
        xfer_recv_refuse(peer, control, status, detail);
        return;
    }
    if (parent == NULL && control->sync_msg.len > 0 &&
        !rank_notice_room(d, target, control->sync_msg.len)) {
        snprintf(detail, sizeof(detail), "notices for '%.200s' wait unread (--max-notice-bytes)",
                 control->dst_agent);
        peer_refused(peer, "a transfer's sync message", detail);
        xfer_recv_refuse(peer, control, B10_ERR_BUSY, detail);
        return;
    }
    /* As many pieces (or slots) either way: a plan as large at most. */
    uint64_t max_pieces = d->cfg.max_control_bytes / SPAN_BYTES;
    if (control->slot_len != 0 && control->pieces.len != 0) {
        snprintf(detail, sizeof(detail), "control carries its pieces both whole and as slots");
        status = B10_ERR_PEER_PROTOCOL;
    } else if (control->slot_len != 0) {
        const struct plan_slots slots = { control->slot_base, control->slot_len,
                                          control->slots.data, control->slots.len };
        status = plan_decode_slots(control->chunk_pieces.data, control->chunk_pieces.len, &slots,
                                   control->nchunks, control->total_bytes,
                                   staging_view_bytes(d->staging), max_pieces, &plan, detail,
                                   sizeof(detail));
    } else {
        status = control->slots.len == 0
                     ? plan_decode(control->chunk_pieces.data, control->chunk_pieces.len,
                                   control->pieces.data, control->pieces.len, control->nchunks,
                                   control->total_bytes, staging_view_bytes(d->staging),
                                   max_pieces, &plan, detail, sizeof(detail))
                     : B10_ERR_PEER_PROTOCOL;
        if (control->slots.len != 0)
            snprintf(detail, sizeof(detail), "control carries slots of no length");
    }
    /*
     * What the transfer holds here is charged as the full form of its pieces would be: a
     * slot is 4 bytes on the wire but a piece of 24 in the plan, and charged by its wire
     * bytes a peer could make the daemon hold four times what --max-peer-control allows.
     */
    size_t held = length;
    if (status == B10_OK && control->slot_len != 0) {
        held = length - control->slots.len + (size_t)plan->npieces * SPAN_BYTES;
        if (held > length &&
            (status = xfer_peer_limits(peer, control->deadline_ms, held, detail, sizeof(detail))) != B10_OK) {
            plan_free(plan);
            peer_refused(peer, "a transfer", detail);
            xfer_recv_refuse(peer, control, status, detail);
            return;
        }
    }
    if (status != B10_OK) {
        if (status == B10_ERR_PEER_PROTOCOL)
            d->stats.peer_protocol_errors++;
        xfer_recv_refuse(peer, control, status, detail);
        return;
    }
    /* A write-back writes what its READ asked for, no more: the same bytes, into the READ's spans. */
    if (parent != NULL && !plan_covers(parent->plan, plan)) {
        plan_free(plan);
        d->stats.peer_protocol_errors++;
        xfer_recv_refuse(peer, control, B10_ERR_PEER_PROTOCOL,
                    "the write-back writes outside what its READ asked for");
        return;
    }
    /* Every destination byte inside the target's registrations (open ones, if that is all it may reach). */
    status = grant == ACCESS_OPEN_ONLY ? access_plan_open(target, &origin, plan, detail, sizeof(detail))
                                       : B10_OK;
    if (status == B10_OK)
        status = xfer_check_dst(plan, &target->mem, NULL, detail, sizeof(detail));
    if (status != B10_OK) {
        plan_free(plan);
        xfer_recv_refuse(peer, control, status, detail);
        return;
    }
    uint32_t budget = control->deadline_ms < d->cfg.max_deadline_ms ? control->deadline_ms
                                                                    : d->cfg.max_deadline_ms;
    /* Not silently: the sender's deadline was its daemon's to allow, the fence here is ours. */
    if (budget < control->deadline_ms)
        log_info("transfer %016" PRIx64 " from %s: its %u ms left are capped to this daemon's "
                 "--max-deadline-ms %u", control->xfer_id, peer->name, control->deadline_ms, budget);
    struct xfer *x = xfer_new(d, XFER_RECV, control->xfer_id, budget ? budget : 1);
    if (x != NULL)
        xfer_trace_begin(x, arrived_ns);
    if (x == NULL) {
        plan_free(plan);
        xfer_recv_refuse(peer, control, B10_ERR_NO_MEMORY, "no memory for the transfer");
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
    list_insert_tail(&peer->xfers, &x->peer_user.node);
    x->admitted = true;
    x->control_bytes = held;
    peer->in_xfers++;
    peer->control_held += held;
    d->control_held += held;
    x->reserve_bytes = (uint64_t)(plan->nchunks < x->nslots ? plan->nchunks : x->nslots) *
                       staging_view_bytes(d->staging);
    x->state = XFER_QUEUED;
    d->stats.xfers_received++;
    if (parent != NULL) {
        x->read.id = control->read_id;
        x->read.parent = parent;
        parent->read.child = x;
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
        rank_notice_reserve(d, target, x->notice_reserved);
    }

    /* Register every tag before posting any receive: a collision fails the transfer loudly. */
    uint64_t cancel_tag = tags_derive(&x->link, x->id, 0, TAG_KIND_CANCEL);
    b10_status_t st = tags_register(d->tags, cancel_tag, x);
    uint32_t registered = 0;
    while (st == B10_OK && registered < plan->nchunks) {
        st = tags_register(d->tags, tags_derive(&x->link, x->id, registered, TAG_KIND_DATA), x);
        if (st == B10_OK)
            registered++;
    }
    if (st != B10_OK) {
        /* Undo ours; the colliding tag is someone else's and stays. */
        for (uint32_t c = 0; c < registered; c++)
            tags_unregister(d->tags, tags_derive(&x->link, x->id, c, TAG_KIND_DATA));
        if (tags_lookup(d->tags, cancel_tag) == x)
            tags_unregister(d->tags, cancel_tag);
        xfer_fail(x, st, "registering the transfer's tags: %s", tags_strerror(st));
        return;
    }
    x->tags_registered = true;
    if (!xfer_post_reply(x, cancel_tag, x->cancel_buf, sizeof(x->cancel_buf), xfer_recv_on_cancel,
                         &x->cancel_op, "CANCEL"))
        return;
    log_debug("transfer %016" PRIx64 " from %s admitted into %s: %u chunks, %" PRIu64 " bytes",
              x->id, x->remote_agent, x->local_agent, plan->nchunks, plan->total);
    xfer_trace(x, XS_ADMITTED);
    xfer_recv_begin(x);
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

/* The CANCEL's, and one a chunk's DATA (xfer_recv_admit). */
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
