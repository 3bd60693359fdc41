/*
 * xfer-send.c — the sending side of a WRITE (and of a write-back serving a
 * READ): checked and planned, CONTROL once the link is up, then for each
 * chunk gather into a view and send DATA as soon as the receiver said
 * READY; RESULT ends it (see xfer-int.h). The first chunk is gathered
 * while CONTROL is built, sent and answered: its DATA waits for READY
 * (parked), and a transfer that fails before READY gives its view back
 * clean, for no DATA of it went out.
 */
#include "xfer-int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "peer.h"
#include "plan.h"
#include "rank.h"
#include "session.h"

static void xfer_send_on_sent(void *arg, b10_status_t status, size_t length)
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

/* Send a gathered chunk's DATA: false when that failed the transfer. */
static bool xfer_send_data(struct xfer_slot *slot)
{
    struct xfer *x = slot->x;

    if (x->peer->ep == NULL || xfer_data_post(slot, true, xfer_send_on_sent) != B10_OK) {
        xfer_fail(x, B10_ERR_PEER_LOST, "sending DATA chunk %u failed", slot->chunk);
        return false;
    }
    x->holds++;
    slot->view->holds++;
    x->data_posted = true;
    xfer_pipe_wire_begin(slot);
    return true;
}

static void xfer_send_on_gathered(struct copy_job *job, b10_status_t status)
{
    struct xfer_slot *slot = job->arg;
    struct xfer *x = slot->x;

    if (!xfer_copy_ended(slot, job, status))
        return;
    xfer_chunk_seal(slot, job);
    if (x->state != XFER_RUNNING) {
        /* Gathered ahead of READY: xfer_send_on_ready sends it, unless views are short. */
        slot->parked = true;
        list_insert_tail(&x->d->ahead_parked, &x->ahead_node);
        if (staging_waited(x->d->staging) && staging_free_views(x->d->staging) == 0)
            xfer_ahead_reclaim(x->d);
        return;
    }
    xfer_send_data(slot);
}

/*
 * READY came: the views gathered ahead are a running send's now, and the
 * chunks gathered already go out, in chunk order.
 */
static void xfer_send_parked(struct xfer *x)
{
    list_remove(&x->ahead_node);
    for (uint32_t i = 0; i < x->nslots; i++)
        if (x->slots[i].busy && x->slots[i].view != NULL)
            staging_promote(x->d->staging, x->slots[i].view);
    for (;;) {
        struct xfer_slot *first = NULL;
        for (uint32_t i = 0; i < x->nslots; i++) {
            struct xfer_slot *slot = &x->slots[i];
            if (slot->busy && slot->parked && (first == NULL || slot->chunk < first->chunk))
                first = slot;
        }
        if (first == NULL)
            return;
        first->parked = false;
        if (!xfer_send_data(first))
            return;
    }
}

/*
 * A view gathered ahead of READY does nothing until the receiver answers, and
 * a receiver may queue a transfer until earlier ones of ours are through, which
 * need views to get there. So a transfer gathers only its first chunk ahead,
 * in a view of the pool's quarter for that (VIEW_AHEAD), and only while a
 * quarter of its peer's share is free: running sends keep the rest but the
 * quarantine's. Without room it goes on when READY comes.
 */
static bool xfer_send_ahead_room(const struct xfer *x)
{
    const struct b10d *d = x->d;
    return x->gather_ahead && x->state != XFER_DONE && x->next_chunk == 0 &&
           (x->peer == NULL || x->peer->views_bytes + x->peer->quarantined +
                                   staging_view_bytes(d->staging) <=
                               config_peer_staging(&d->cfg) / 4);
}

/*
 * Keep up to nslots chunks between gather and send completion once READY
 * came; before it, the first chunk where there is room (xfer_send_ahead_room).
 */
void xfer_send_pump(struct xfer *x)
{
    while ((x->state == XFER_RUNNING || xfer_send_ahead_room(x)) &&
           x->next_chunk < x->plan->nchunks) {
        struct xfer_slot *slot = xfer_free_slot(x);
        if (slot == NULL)
            return;
        bool ahead = x->state != XFER_RUNNING;
        struct view *view = xfer_view_room(x) ? staging_get(x->d->staging,
                                                            ahead ? VIEW_AHEAD : VIEW_SEND)
                                              : NULL;
        if (view == NULL) {
            if (!ahead)
                xfer_wait_for_view(x);
            return;
        }
        xfer_view_count(x, view);
        *slot = (struct xfer_slot){ .x = x, .busy = true, .chunk = x->next_chunk++, .view = view };
        b10_status_t status = xfer_copy_chunk(slot, true, xfer_send_on_gathered);
        if (status != B10_OK) {
            xfer_slot_release(slot);
            xfer_fail(x, status == B10_ERR_NOT_REGISTERED ? B10_ERR_NOT_REGISTERED : status,
                      "gathering chunk %u: %s", slot->chunk, b10_status_str(status));
            return;
        }
    }
}

static void xfer_send_on_ready(void *arg, b10_status_t status, size_t length)
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
                        sizeof(x->ready_buf), xfer_send_on_ready, &x->ready_op, "READY");
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
    xfer_trace(x, XS_READY);
    xfer_pipe_start(x);
    x->ready_ms = x->d->now_ms(x->d);
    xfer_send_parked(x);
    xfer_send_pump(x);
}

static void xfer_send_on_ack(struct xfer *x, b10_status_t status, size_t length);

void xfer_send_on_result(void *arg, b10_status_t status, size_t length)
{
    struct xfer *x = arg;
    B10__Peer__Msg *msg;

    x->result_op = NULL;
    x->holds--;
    if (x->state == XFER_DONE) {
        if (x->await_ack)
            xfer_send_on_ack(x, status, length);
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
                        sizeof(x->result_buf), xfer_send_on_result, &x->result_op, "RESULT");
        return;
    }
    if (decoded != B10_OK) {
        xfer_fail(x, B10_ERR_PEER_PROTOCOL, "malformed RESULT");
        return;
    }
    const B10__Peer__Result *result = msg->result;
    xfer_trace(x, XS_RESULT);
    b10_status_t remote = (b10_status_t)result->status;
    peer_heard(x->peer);
    if (result->xfer_id != x->id)
        xfer_fail(x, B10_ERR_PEER_PROTOCOL, "RESULT names another transfer");
    else if (remote == B10_OK && x->state != XFER_RUNNING)
        xfer_fail(x, B10_ERR_PEER_PROTOCOL, "RESULT success before READY");
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
static void xfer_send_on_ack(struct xfer *x, b10_status_t status, size_t length)
{
    B10__Peer__Msg *msg = NULL;

    if (status == B10_OK) {
        b10_status_t decoded = xfer_decode_reply(x, x->result_buf, length,
                                                 B10__PEER__MSG__BODY_RESULT, &msg);
        if (decoded == B10_ERR_UNAUTHENTICATED) {
            xfer_post_reply(x, tags_derive(&x->link, x->id, 0, TAG_KIND_RESULT), x->result_buf,
                            sizeof(x->result_buf), xfer_send_on_result, &x->result_op, "RESULT");
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

/*
 * CONTROL, encoded from the plan (re-chunked for the peer at link-up) and
 * sent on x's link; then the first chunk's gather ahead of READY. A failure
 * here fails x through the funnel.
 */
static void xfer_send_control(struct xfer *x)
{
    struct b10d *d = x->d;
    struct peer *peer = x->peer;
    uint8_t *chunk_pieces = NULL, *pieces = NULL;
    size_t chunk_len, pieces_len = 0;

    /* A KV request's pieces as slots (a quarter of the bytes to seal, send and open), else whole. */
    struct plan_slots slots = { 0 };
    b10_status_t st = plan_encode_slots(x->plan, &slots, &chunk_pieces, &chunk_len);
    /* The peer bounds slots as it bounds pieces: past its limit, the full form (see link-up). */
    if (st == B10_OK && slots.slots_len / 4 > peer->max_pieces) {
        free((uint8_t *)slots.slots);
        free(chunk_pieces);
        slots = (struct plan_slots){ 0 };
        st = B10_ERR_UNSUPPORTED;
    }
    if (st == B10_ERR_UNSUPPORTED)
        st = plan_encode(x->plan, &chunk_pieces, &chunk_len, &pieces, &pieces_len);
    if (st != B10_OK) {
        xfer_fail(x, st, "encoding CONTROL");
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
    control.slot_base = slots.base;
    control.slot_len = slots.len;
    control.slots = (ProtobufCBinaryData){ slots.slots_len, (uint8_t *)slots.slots };
    control.read_id = x->read.id;
    /* A write-back's destination is the asking daemon's own READ: its name is not checked. */
    if (x->read.id == 0)
        control.dst_uid_known = rank_agent_uid(d, x->session, x->remote_agent, &control.dst_uid);
    /* A write-back's sync message is for its own rank, after the read: not sent. */
    if (x->read.id == 0)
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
    xfer_trace(x, XS_CONTROL);
    x->state = XFER_WAIT_READY;
    log_debug("transfer %016" PRIx64 ": CONTROL sent, %u chunks, %u pieces%s, %" PRIu64 " bytes",
              x->id, x->plan->nchunks, x->plan->npieces, slots.len != 0 ? " as slots" : "",
              x->plan->total);
    xfer_send_pump(x);
out:
    free(chunk_pieces);
    free(pieces);
    free((uint8_t *)slots.slots);
}

/* The link is up: register the reply tags, post their receives, send CONTROL. */
void xfer_send_link_up(struct xfer *x)
{
    struct b10d *d = x->d;
    struct peer *peer = x->peer;

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
    b10_status_t st = tags_register(d->tags, ready_tag, x);
    if (st != B10_OK) {
        xfer_fail(x, st, "READY tag %016" PRIx64 ": %s", ready_tag, tags_strerror(st));
        return;
    }
    if ((st = tags_register(d->tags, result_tag, x)) != B10_OK) {
        tags_unregister(d->tags, ready_tag);
        xfer_fail(x, st, "RESULT tag %016" PRIx64 ": %s", result_tag, tags_strerror(st));
        return;
    }
    x->tags_registered = true;
    if (!xfer_post_reply(x, ready_tag, x->ready_buf, sizeof(x->ready_buf), xfer_send_on_ready,
                         &x->ready_op, "READY") ||
        !xfer_post_reply(x, result_tag, x->result_buf, sizeof(x->result_buf), xfer_send_on_result,
                         &x->result_op, "RESULT"))
        return;

    /*
     * The plan holds its chunks from here on (re-chunked for the peer above): the
     * first chunk may be gathered before READY, its DATA waiting for it. One the
     * copy threads or the GPU gather starts now, beside CONTROL's encoding; one
     * the loop would copy itself, once CONTROL is out and the loop only waits.
     */
    x->gather_ahead = true;
    if (x->plan->chunks[0].bytes > COPY_INLINE_BYTES) {
        xfer_send_pump(x);
        if (x->state == XFER_DONE)
            return;
    }
    xfer_send_control(x);
}

/*
 * A transfer rank s starts with remote_agent on peer: a WRITE (its local
 * spans are the sources), or a READ (its local spans are the destinations;
 * the plan then only checks the request, the write-back plans for real).
 * Checked, planned, created in the session's list; it moves once
 * xfer_start() is called.
 */
b10_status_t xfer_send_new(struct session *s, struct peer *peer, const char *remote_agent,
                           enum xfer_role role, struct xfer_rows *rows, uint32_t deadline_ms,
                           const uint8_t *sync, size_t sync_length, struct xfer **xfer_p,
                           char *detail, size_t detail_len)
{
    struct b10d *d = s->d;
    size_t count = rows->count;
    struct plan *plan = NULL;
    uint64_t plan_ns;
    b10_status_t status;

    uint64_t checked_from = uv_hrtime();
    if ((status = xfer_admit_limits(s, count, detail, detail_len)) != B10_OK ||
        (status = xfer_check_local(s, rows, false, detail, detail_len)) != B10_OK)
        return status;
    if (peer->quarantined > config_peer_quarantine(&d->cfg)) {
        snprintf(detail, detail_len, "transfers with daemon %s left %" PRIu64 " bytes of staging "
                 "in the quarantine (--peer-quarantine-bytes %" PRIu64 ")", peer->name,
                 peer->quarantined, config_peer_quarantine(&d->cfg));
        return B10_ERR_STAGING_EXHAUSTED;
    }
    status = xfer_plan(d, rows, role == XFER_READ, &plan, &plan_ns, detail, detail_len);
    if (status != B10_OK)
        return status;
    struct xfer *x = xfer_new_submitted(d, role, s, plan, deadline_ms, checked_from, plan_ns);
    if (x == NULL)
        return B10_ERR_NO_MEMORY;
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
    log_debug("transfer %016" PRIx64 ": %s %s %s, %zu spans, %" PRIu64 " bytes (%s), deadline "
              "%" PRIu64 " ms", x->id, s->agent, role == XFER_READ ? "←" : "→", x->remote_agent,
              count, plan->total, xfer_role_name(role), x->deadline_ms - x->started_ms);
    return B10_OK;
}

/* ---------------------------------------------------------------- its end (xfer_role_ops) */

static void xfer_send_landed(struct xfer *x)
{
    struct b10d *d = x->d;

    d->stats.xfers_succeeded++;
    uint64_t ms = d->now_ms(d) - x->started_ms;
    stats_landed(&d->hists, x->role, (double)ms / 1e3, x->plan_ms / 1e3, x->plan->total,
                 x->plan->npieces);
    char pipe[256];
    xfer_pipe_describe(x, pipe, sizeof(pipe));
    struct xfer_fields f;
    size_t nf = xfer_fields(x, B10_OK, LOG_MESSAGE_ID_XFER_LANDED, &f);
    log_fields_at(LOG_LEVEL_INFO, f.v, nf, "transfer %016" PRIx64 " to %s landed: %" PRIu64
                  " bytes in %u chunks, %" PRIu64 " ms of a %" PRIu64 " ms deadline (checked "
                  "and planned in %.1f ms before; READY after %" PRIu64 " ms; %s)", x->id,
                  x->remote_agent, x->plan->total, x->plan->nchunks, ms,
                  x->deadline_ms - x->started_ms, x->plan_ms, x->ready_ms - x->started_ms, pipe);
    /* A write-back serving a READ: its bytes were read, the holding rank hears of it. */
    if (x->session != NULL && x->read.id != 0 && x->sync_length > 0)
        rank_notice(d, x->session, x->remote_agent, x->sync, x->sync_length);
    else if (x->session != NULL)
        xfer_tell_rank(x);
}

/*
 * Tell the receiver at once, unless it is gone: a CANCEL only stops writes.
 * With await_ack, it answers once its own scatters completed.
 */
static void xfer_send_failed(struct xfer *x, b10_status_t status, enum xfer_state was)
{
    bool gone = status == B10_ERR_PEER_LOST || status == B10_ERR_PEER_UNREACHABLE;

    if (x->control_sent && !gone && was != XFER_WAIT_LINK) {
        B10__Peer__Cancel cancel = B10__PEER__CANCEL__INIT;
        B10__Peer__Msg msg = B10__PEER__MSG__INIT;
        cancel.xfer_id = x->id;
        cancel.reason = (B10__Status)status;
        cancel.want_result = x->await_ack;
        msg.body_case = B10__PEER__MSG__BODY_CANCEL;
        msg.cancel = &cancel;
        xfer_tell_peer(x, TAG_KIND_CANCEL, &msg);
    }
    xfer_role_failed(x, status, was);
}

static void xfer_send_report(struct xfer *x, b10_status_t cause)
{
    /* A write-back that failed tells the reading daemon, on the link the READ came by. */
    if (x->read.id != 0 && !xfer_peer_silent(cause))
        peer_send_result(x->peer, x->read.link.gen, x->read.id, x->status, x->detail);
    xfer_role_report(x, cause);
}

/* READY and RESULT: the receiver's answers (xfer_send_link_up). */
static void xfer_send_each_tag(struct xfer *x, void (*fn)(struct xfer *x, uint64_t tag))
{
    fn(x, tags_derive(&x->link, x->id, 0, TAG_KIND_READY));
    fn(x, tags_derive(&x->link, x->id, 0, TAG_KIND_RESULT));
}

static uint32_t xfer_send_ntags(const struct xfer *x)
{
    return 2;
}

const struct xfer_role_ops xfer_send_role = {
    .name = "send",
    .landed = xfer_send_landed,
    .failed = xfer_send_failed,
    .report = xfer_send_report,
    .each_tag = xfer_send_each_tag,
    .ntags = xfer_send_ntags,
};
