/*
 * xfer-read.c — READs: the asking side sends the request and waits for the
 * write-back (a transfer into its spans, admitted by xfer-recv.c); the
 * holding side checks the request and serves it as a WRITE of its own
 * (xfer-send.c) (see xfer-int.h).
 */
#include "xfer-int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "peer.h"
#include "plan.h"
#include "rank.h"
#include "session.h"

/*
 * READ: ask the daemon holding the bytes to write them back. Its refusal or
 * failure comes as a Result on (link, id); success as the write-back itself,
 * a CONTROL whose read_id names this transfer (xfer_recv_admit).
 */
void xfer_read_link_up(struct xfer *x)
{
    struct b10d *d = x->d;
    size_t table = x->read.spans_length / 2;

    x->link = x->peer->out.tags;
    uint64_t result_tag = tags_derive(&x->link, x->id, 0, TAG_KIND_RESULT);
    b10_status_t st = tags_register(d->tags, result_tag, x);
    if (st != B10_OK) {
        xfer_fail(x, st, "RESULT tag %016" PRIx64 ": %s", result_tag, tags_strerror(st));
        return;
    }
    x->tags_registered = true;
    if (!xfer_post_reply(x, result_tag, x->result_buf, sizeof(x->result_buf), xfer_send_on_result,
                         &x->result_op, "RESULT"))
        return;
    uint64_t now = d->now_ms(d);
    B10__Peer__ReadRequest rr = B10__PEER__READ_REQUEST__INIT;
    rr.read_id = x->id;
    rr.src_agent = x->remote_agent;
    rr.dst_agent = x->local_agent;
    rr.deadline_ms = (uint32_t)(x->deadline_ms > now ? x->deadline_ms - now : 1);
    rr.src_spans = (ProtobufCBinaryData){ table, x->read.spans };
    rr.dst_spans = (ProtobufCBinaryData){ table, x->read.spans + table };
    rr.sync_msg = (ProtobufCBinaryData){ x->sync_length, x->sync };
    rr.src_uid_known = rank_agent_uid(d, x->session, x->remote_agent, &rr.src_uid);
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
    xfer_trace(x, XS_CONTROL);
    x->state = XFER_WAIT_READY;
}

/* A READ of rank s: remote_spans of remote_agent into its own local_spans. */
b10_status_t xfer_read_new(struct session *s, struct peer *peer, const char *remote_agent,
                           const B10__SubmitXfer *req, struct xfer_rows *rows,
                           struct xfer **xfer_p, char *detail, size_t detail_len)
{
    struct xfer *x;
    size_t table = rows->count * SPAN_BYTES;
    b10_status_t status = xfer_send_new(s, peer, remote_agent, XFER_READ, rows, req->deadline_ms,
                                         req->sync_msg.data, req->sync_msg.len, &x, detail,
                                         detail_len);
    if (status != B10_OK)
        return status;
    /* A request of picks whose checks and plan needed no spans: written for the holder now. */
    if ((status = xfer_rows_spans(rows, detail, detail_len)) != B10_OK) {
        xfer_discard(x);
        return status;
    }
    /* The request carries both tables to the daemon that holds the bytes. */
    if ((x->read.spans = malloc(2 * table)) == NULL) {
        xfer_discard(x);
        return B10_ERR_NO_MEMORY;
    }
    memcpy(x->read.spans, rows->remote, table);
    memcpy(x->read.spans + table, rows->local, table);
    x->read.spans_length = 2 * table;
    *xfer_p = x;
    return B10_OK;
}

struct xfer *xfer_read_waiting(struct b10d *d, struct peer *peer, struct session *s,
                                      uint64_t read_id)
{
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &s->xfers) {
        struct xfer *x = list_entry(pos, struct xfer, session_node);
        if (x->role == XFER_READ && x->id == read_id && x->peer == peer &&
            x->state == XFER_WAIT_READY && x->read.child == NULL)
            return x;
    }
    return NULL;
}

/* Refuse a READ request without starting anything: a Result on the asking link. */
static void xfer_read_refuse(struct peer *peer, uint64_t read_id, b10_status_t status,
                             const char *detail)
{
    log_warning("refusing READ %016" PRIx64 " from peer %s (%016" PRIx64 "): %s: %s", read_id,
                peer->name, peer->daemon_id, b10_status_name(status), detail);
    peer_send_result(peer, peer->in.tags.gen, read_id, status, detail);
}

void xfer_read_serve(struct peer *peer, const B10__Peer__ReadRequest *req, size_t length)
{
    struct b10d *d = peer->d;
    char detail[256] = "";
    struct xfer *x;

    size_t count = req->src_spans.len / SPAN_BYTES;
    if (!xfer_name_ok(req->src_agent) || !xfer_name_ok(req->dst_agent) || count == 0 ||
        req->src_spans.len % SPAN_BYTES != 0 || req->dst_spans.len != req->src_spans.len ||
        req->sync_msg.len > B10_SYNC_MSG_MAX || req->read_id == 0) {
        d->stats.peer_protocol_errors++;
        xfer_read_refuse(peer, req->read_id, B10_ERR_PEER_PROTOCOL, "READ request malformed");
        return;
    }
    struct session *holder = rank_find(d, req->src_agent);
    if (holder == NULL) {
        snprintf(detail, sizeof(detail), "no rank named '%.200s' on the remote node", req->src_agent);
        xfer_read_refuse(peer, req->read_id, B10_ERR_UNKNOWN_AGENT, detail);
        return;
    }
    if (rank_uid_check(d, holder, req->src_agent, req->src_uid_known, req->src_uid, detail,
                       sizeof(detail)) != B10_OK) {
        log_info("peer %s: refusing a READ of %s: %s", peer->name, req->src_agent, detail);
        xfer_read_refuse(peer, req->read_id, B10_ERR_UNKNOWN_AGENT, detail);
        return;
    }
    struct access_origin origin;
    access_origin(&origin, peer, req->dst_agent);
    enum access_grant grant;
    if (access_spans(holder, &origin, ACCESS_READ, req->src_spans.data, count,
                     req->sync_msg.len > 0, &grant, detail, sizeof(detail)) != B10_OK) {
        xfer_read_refuse(peer, req->read_id, B10_ERR_PERMISSION, detail);
        return;
    }
    b10_status_t limit = xfer_peer_limits(peer, req->deadline_ms, length, detail, sizeof(detail));
    if (limit == B10_OK && req->sync_msg.len > 0 && !rank_notice_room(d, holder, req->sync_msg.len)) {
        snprintf(detail, sizeof(detail), "notices for '%.200s' wait unread (--max-notice-bytes)",
                 req->src_agent);
        limit = B10_ERR_BUSY;
    }
    if (limit != B10_OK) {
        peer_refused(peer, "a READ", detail);
        xfer_read_refuse(peer, req->read_id, limit, detail);
        return;
    }
    /*
     * The holding rank's spans are checked against its registrations as any
     * WRITE's sources are; to the reader, a source outside them is the remote
     * side refusing.
     */
    struct xfer_rows rows = { count, req->src_spans.data, req->dst_spans.data, NULL, NULL };
    b10_status_t status = xfer_send_new(holder, peer, req->dst_agent, XFER_SEND, &rows,
                                         req->deadline_ms, req->sync_msg.data, req->sync_msg.len,
                                         &x, detail, sizeof(detail));
    if (status != B10_OK) {
        char why[512];
        snprintf(why, sizeof(why), "reading from %.64s: %.400s", req->src_agent, detail);
        xfer_read_refuse(peer, req->read_id,
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
    rank_notice_reserve(d, holder, x->notice_reserved);
    x->read.id = req->read_id;
    x->read.link = peer->in.tags;
    log_debug("READ %016" PRIx64 " served by write-back %016" PRIx64 " from %s", req->read_id, x->id,
              req->src_agent);
    xfer_start(x);
}

/* ---------------------------------------------------------------- its end (xfer_role_ops) */

static void xfer_read_landed(struct xfer *x)
{
    struct b10d *d = x->d;

    d->stats.xfers_succeeded++;
    stats_landed(&d->hists, x->role, (double)(d->now_ms(d) - x->started_ms) / 1e3, x->plan_ms / 1e3,
                 x->plan != NULL ? x->plan->total : 0, x->plan != NULL ? x->plan->npieces : 0);
    log_info("read %016" PRIx64 " from %s landed: %" PRIu64 " ms of a %" PRIu64 " ms deadline",
             x->id, x->remote_agent, d->now_ms(d) - x->started_ms, x->deadline_ms - x->started_ms);
    if (x->session != NULL)
        xfer_tell_rank(x);
}

/* RESULT: the write-back's end, or the refusal (xfer_read_link_up). */
static void xfer_read_each_tag(struct xfer *x, void (*fn)(struct xfer *x, uint64_t tag))
{
    fn(x, tags_derive(&x->link, x->id, 0, TAG_KIND_RESULT));
}

static uint32_t xfer_read_ntags(const struct xfer *x)
{
    return 1;
}

const struct xfer_role_ops xfer_read_role = {
    .name = "read",
    .landed = xfer_read_landed,
    .failed = xfer_role_failed,
    .report = xfer_role_report,
    .each_tag = xfer_read_each_tag,
    .ntags = xfer_read_ntags,
};
