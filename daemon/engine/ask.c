/* ask.c — see ask.h. */
#include "ask.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "b10.pb-c.h"
#include "frame.h"
#include "mem.h"
#include "peer.h"
#include "peer.pb-c.h"
#include "rank.h"
#include "session.h"
#include "wire.h"


static void ask_post_answer(struct ask *a);

static void ask_on_timer_closed(uv_handle_t *handle)
{
    struct ask *a = handle->data;
    peer_release(a->peer);
    free(a->out);
    free(a);
}

static void ask_maybe_free(struct ask *a)
{
    if (!a->done || a->holds > 0 || uv_is_closing((uv_handle_t *)&a->timer))
        return;
    uv_close((uv_handle_t *)&a->timer, ask_on_timer_closed);
}

/* Answer the client (if still there) and end: the one exit of every ask. */
static void ask_finish(struct ask *a, b10_status_t status, const char *detail)
{
    if (a->done)
        return;
    a->done = true;
    uv_timer_stop(&a->timer);
    list_remove(&a->peer_user.node);
    list_remove(&a->session_node);
    if (a->op != NULL)
        wire_cancel(a->d->wire, a->op);
    if (a->registered) {
        uint64_t tag = tags_derive(&a->link, a->id, 0, TAG_KIND_RESULT);
        /* A Result that may still come must match nothing that is handed out again. */
        if (status == B10_OK || a->op == NULL)
            tags_unregister(a->d->tags, tag);
        else
            tags_quarantine(a->d->tags, tag, a->d->now_ms(a->d) + a->d->cfg.quarantine_ttl_ms,
                            a->peer->daemon_id);
    }
    if (status != B10_OK)
        log_info("%s %016" PRIx64 " to peer %s (%016" PRIx64 "): %s: %s", a->what, a->id,
                 a->peer->name, a->peer->daemon_id, b10_status_name(status), detail);
    if (a->session != NULL)
        rank_answer(a->d, a->session, a->seq, status, detail);
    ask_maybe_free(a);
}

void ask_fail(struct ask *a, b10_status_t status, const char *detail)
{
    ask_finish(a, status, detail);
}

void ask_detach(struct ask *a)
{
    a->session = NULL;
    ask_finish(a, B10_ERR_CLIENT_GONE, "the asking rank disconnected");
}

static void ask_on_timeout(uv_timer_t *timer)
{
    struct ask *a = timer->data;
    char detail[128];
    snprintf(detail, sizeof(detail), "the remote daemon did not answer within %u ms",
             a->d->cfg.connect_timeout_ms * 2);
    ask_finish(a, B10_ERR_PEER_UNREACHABLE, detail);
}

static void ask_on_result(void *arg, b10_status_t status, size_t length)
{
    struct ask *a = arg;
    char detail[256];

    a->op = NULL;
    a->holds--;
    if (a->done) {
        ask_maybe_free(a);
        return;
    }
    if (status != B10_OK) {
        snprintf(detail, sizeof(detail), "waiting for the answer: %s", b10_status_str(status));
        ask_finish(a, status, detail);
        return;
    }
    B10__Peer__Msg *msg = NULL;
    b10_status_t opened = peer_open(a->peer, a->link.gen, a->buf, length, &msg);
    if (opened == B10_ERR_UNAUTHENTICATED) {
        /* Not under the link's keys: dropped, and the real answer still awaited. */
        ask_post_answer(a);
        return;
    }
    if (opened != B10_OK || msg->body_case != B10__PEER__MSG__BODY_RESULT ||
        msg->result->xfer_id != a->id) {
        a->d->stats.peer_protocol_errors++;
        ask_finish(a, B10_ERR_PEER_PROTOCOL, "malformed answer from the remote daemon");
    } else {
        b10_status_t remote = (b10_status_t)msg->result->status;
        peer_heard(a->peer);
        if (strcmp(b10_status_name(remote), "B10_UNKNOWN") == 0 || remote == B10_IN_PROGRESS)
            ask_finish(a, B10_ERR_PEER_PROTOCOL, "the remote daemon answered with an unknown status");
        else
            ask_finish(a, remote, msg->result->detail);
    }
    if (msg != NULL)
        b10__peer__msg__free_unpacked(msg, NULL);
}

/* Post the receive of the answer (its tag registered); on failure the ask is finished. */
static void ask_post_answer(struct ask *a)
{
    uint64_t tag = tags_derive(&a->link, a->id, 0, TAG_KIND_RESULT);

    if (wire_recv(a->d->wire, a->peer->ep, tag, a->buf, sizeof(a->buf), NULL, ask_on_result, a,
                  &a->op) != B10_OK) {
        ask_finish(a, B10_ERR_INTERNAL, "posting the answer's receive failed");
        return;
    }
    a->holds++;
}

void ask_link_up(struct ask *a)
{
    struct b10d *d = a->d;
    struct peer *peer = a->peer;

    a->link = peer->out.tags;
    uint64_t tag = tags_derive(&a->link, a->id, 0, TAG_KIND_RESULT);
    b10_status_t st = tags_register(d->tags, tag, a);
    if (st != B10_OK) {
        char detail[96];
        snprintf(detail, sizeof(detail), "the answer's tag: %s", tags_strerror(st));
        ask_finish(a, st, detail);
        return;
    }
    a->registered = true;
    ask_post_answer(a);
    if (a->done)
        return;
    uint8_t *out = a->out;
    a->out = NULL;
    a->peer_user.unsent = false;
    int rc = peer_send_packed(peer, a->link.gen, tags_derive(&a->link, 0, 0, TAG_KIND_CONTROL), out,
                          a->out_length);
    free(out);
    if (rc != 0)
        ask_finish(a, B10_ERR_PEER_LOST, "sending the question failed");
}

/* The peer's news of an ask's link: it came up (send the ask), or the ask fails. */
static void ask_on_link_up(struct link_user *u)
{
    ask_link_up(list_entry(u, struct ask, peer_user));
}

static void ask_on_link_lost(struct link_user *u, b10_status_t status, const char *detail)
{
    ask_fail(list_entry(u, struct ask, peer_user), status, detail);
}

static const struct link_user_ops ask_link_ops = {
    .up = ask_on_link_up,
    .lost = ask_on_link_lost,
};

/* Make an ask for the agent's daemon, holding msg (its id filled in by fill_id). */
static b10_status_t ask_start(struct session *s, uint64_t seq, const char *remote_agent,
                              const char *what, B10__Peer__Msg *msg, uint64_t *id_field,
                              char *detail, size_t detail_len)
{
    struct b10d *d = s->d;
    struct remote_agent *agent;
    b10_status_t status = rank_agent_use(d, s, remote_agent, &agent, detail, detail_len);

    if (status != B10_OK)
        return status;
    struct ask *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return B10_ERR_NO_MEMORY;
    a->d = d;
    a->session = s;
    a->seq = seq;
    a->peer = agent->peer;
    peer_hold(a->peer);
    a->what = what;
    a->id = ids_new_xfer(&d->ids);
    *id_field = a->id;
    a->out_length = protobuf_c_message_get_packed_size(&msg->base);
    a->out = malloc(a->out_length ? a->out_length : 1);
    if (a->out == NULL) {
        peer_release(a->peer);
        free(a);
        return B10_ERR_NO_MEMORY;
    }
    protobuf_c_message_pack(&msg->base, a->out);
    list_init(&a->peer_user.node);
    a->peer_user.ops = &ask_link_ops;
    a->peer_user.link = &a->link;
    a->peer_user.unsent = true;
    list_init(&a->session_node);
    uv_timer_init(d->loop, &a->timer);
    a->timer.data = a;
    uv_timer_start(&a->timer, ask_on_timeout, (uint64_t)d->cfg.connect_timeout_ms * 2, 0);
    list_insert_tail(&s->asks, &a->session_node);
    list_insert_tail(&a->peer->asks, &a->peer_user.node);

    status = peer_ensure_link(a->peer);
    if (status == B10_OK)
        ask_link_up(a);
    else if (status != B10_IN_PROGRESS)
        ask_finish(a, status, "cannot reach the remote daemon");
    /* Answered later, by ask_finish. */
    return B10_IN_PROGRESS;
}

b10_status_t ask_check(struct session *s, uint64_t seq, const char *remote_agent,
                       const uint8_t *spans, size_t spans_length, char *detail, size_t detail_len)
{
    if (spans_length == 0 || spans_length % SPAN_BYTES != 0 ||
        spans_length / SPAN_BYTES > s->d->cfg.max_spans) {
        snprintf(detail, detail_len, "a check needs 1..%u spans of 16 bytes", s->d->cfg.max_spans);
        return B10_ERR_INVALID_ARG;
    }
    B10__Peer__Check check = B10__PEER__CHECK__INIT;
    check.dst_agent = (char *)remote_agent;
    check.src_agent = s->agent;
    check.spans = (ProtobufCBinaryData){ spans_length, (uint8_t *)spans };
    check.dst_uid_known = rank_agent_uid(s->d, s, remote_agent, &check.dst_uid);
    B10__Peer__Msg msg = B10__PEER__MSG__INIT;
    msg.body_case = B10__PEER__MSG__BODY_CHECK;
    msg.check = &check;
    return ask_start(s, seq, remote_agent, "check", &msg, &check.check_id, detail, detail_len);
}

b10_status_t ask_notify(struct session *s, uint64_t seq, const char *remote_agent,
                        const uint8_t *message, size_t length, char *detail, size_t detail_len)
{
    if (length > B10_SYNC_MSG_MAX) {
        snprintf(detail, detail_len, "a sync message holds at most %d bytes", B10_SYNC_MSG_MAX);
        return B10_ERR_TOO_LARGE;
    }
    B10__Peer__Notify notify = B10__PEER__NOTIFY__INIT;
    notify.src_agent = s->agent;
    notify.dst_agent = (char *)remote_agent;
    notify.message = (ProtobufCBinaryData){ length, (uint8_t *)message };
    notify.dst_uid_known = rank_agent_uid(s->d, s, remote_agent, &notify.dst_uid);
    B10__Peer__Msg msg = B10__PEER__MSG__INIT;
    msg.body_case = B10__PEER__MSG__BODY_NOTIFY;
    msg.notify = &notify;
    return ask_start(s, seq, remote_agent, "notify", &msg, &notify.notify_id, detail, detail_len);
}

/* The answer to an ask of the peer: a Result on its inbound link. */
static void ask_answer(struct peer *peer, uint64_t id, b10_status_t status, const char *detail)
{
    peer_send_result(peer, peer->in.tags.gen, id, status, detail);
}

static b10_status_t ask_check_emit(void *arg, struct region *r, uint64_t offset, uint64_t n)
{
    return B10_OK;
}

/* v refused for why, with status; the rule has written v->detail. */
static b10_status_t ask_no(struct ask_verdict *v, enum ask_why why, b10_status_t status)
{
    v->why = why;
    v->status = status;
    return status;
}

/* The rank a Check or Notify names, still of the uid its descriptor said (rank_uid_check). */
static b10_status_t ask_target(struct peer *peer, const char *name, bool uid_known, uint32_t uid,
                               struct ask_verdict *v)
{
    if ((v->target = rank_find(peer->d, name)) == NULL) {
        snprintf(v->detail, sizeof(v->detail), "no rank named '%.200s' on the remote node", name);
        return ask_no(v, ASK_NO_RANK, B10_ERR_UNKNOWN_AGENT);
    }
    if (rank_uid_check(peer->d, v->target, name, uid_known, uid, v->detail,
                       sizeof(v->detail)) != B10_OK)
        return ask_no(v, ASK_WRONG_UID, B10_ERR_UNKNOWN_AGENT);
    return B10_OK;
}

b10_status_t ask_admit_check(struct peer *peer, const B10__Peer__Check *check,
                             struct ask_verdict *v)
{
    *v = (struct ask_verdict){ .why = ASK_ADMIT, .status = B10_OK };
    b10_status_t status = ask_target(peer, check->dst_agent, check->dst_uid_known, check->dst_uid,
                                     v);
    if (status != B10_OK)
        return status;
    size_t count = check->spans.len / SPAN_BYTES;
    size_t src_len = strnlen(check->src_agent, 256);
    if (check->spans.len % SPAN_BYTES != 0 || count == 0 || count > peer->d->cfg.max_spans ||
        src_len == 0 || src_len >= 256) {
        snprintf(v->detail, sizeof(v->detail), "malformed check");
        return ask_no(v, ASK_MALFORMED, B10_ERR_PEER_PROTOCOL);
    }
    /* Even whether memory is registered is the target's to tell only to ranks it admits. */
    struct access_origin origin;
    access_origin(&origin, peer, check->src_agent);
    if (access_spans(v->target, &origin, ACCESS_CHECK, check->spans.data, count, false, NULL,
                     v->detail, sizeof(v->detail)) != B10_OK)
        return ask_no(v, ASK_NOT_GRANTED, B10_ERR_PERMISSION);
    for (size_t i = 0; i < count; i++) {
        uint64_t addr = frame_get_u64(check->spans.data + i * SPAN_BYTES);
        uint64_t len = frame_get_u64(check->spans.data + i * SPAN_BYTES + 8);
        if (len == 0 || addr + len < addr ||
            mem_table_walk(&v->target->mem, addr, len, ask_check_emit, NULL) != B10_OK) {
            snprintf(v->detail, sizeof(v->detail), "span %zu (0x%" PRIx64 "+%" PRIu64 ") lies "
                     "outside %.100s's registered memory", i, addr, len, v->target->agent);
            return ask_no(v, ASK_OUTSIDE_MEM, B10_ERR_REMOTE_REJECTED);
        }
    }
    return B10_OK;
}

void ask_on_check(struct peer *peer, const B10__Peer__Check *check)
{
    struct ask_verdict v;
    b10_status_t status = ask_admit_check(peer, check, &v);

    if (status == B10_ERR_PEER_PROTOCOL)
        peer->d->stats.peer_protocol_errors++;
    ask_answer(peer, check->check_id, status, v.detail);
}

b10_status_t ask_admit_notify(struct peer *peer, const B10__Peer__Notify *notify,
                              struct ask_verdict *v)
{
    *v = (struct ask_verdict){ .why = ASK_ADMIT, .status = B10_OK };
    if (notify->message.len > B10_SYNC_MSG_MAX || strnlen(notify->src_agent, 256) >= 256) {
        snprintf(v->detail, sizeof(v->detail), "malformed notify");
        return ask_no(v, ASK_MALFORMED, B10_ERR_PEER_PROTOCOL);
    }
    b10_status_t status = ask_target(peer, notify->dst_agent, notify->dst_uid_known,
                                     notify->dst_uid, v);
    if (status != B10_OK)
        return status;
    if (notify->src_agent[0] == '\0') {
        snprintf(v->detail, sizeof(v->detail), "a notice names no sending rank");
        return ask_no(v, ASK_NOT_GRANTED, B10_ERR_PERMISSION);
    }
    struct access_origin origin;
    access_origin(&origin, peer, notify->src_agent);
    if (access_grant(v->target, &origin, ACCESS_NOTIFY, v->detail, sizeof(v->detail)) ==
        ACCESS_REFUSED)
        return ask_no(v, ASK_NOT_GRANTED, B10_ERR_PERMISSION);
    if (!rank_notice_room(peer->d, v->target, notify->message.len)) {
        snprintf(v->detail, sizeof(v->detail), "notices for '%.200s' wait unread "
                 "(--max-notice-bytes)", notify->dst_agent);
        return ask_no(v, ASK_NOTICES_FULL, B10_ERR_BUSY);
    }
    return B10_OK;
}

void ask_on_notify(struct peer *peer, const B10__Peer__Notify *notify)
{
    struct ask_verdict v;
    b10_status_t status = ask_admit_notify(peer, notify, &v);

    if (status == B10_ERR_PEER_PROTOCOL)
        peer->d->stats.peer_protocol_errors++;
    else if (v.why == ASK_WRONG_UID)
        log_info("peer %s: refusing a notice for %s: %s", peer->name, notify->dst_agent, v.detail);
    else if (v.why == ASK_NOTICES_FULL)
        peer_refused(peer, "a notice", v.detail);
    else if (status == B10_OK)
        rank_notice(peer->d, v.target, notify->src_agent, notify->message.data,
                    notify->message.len);
    ask_answer(peer, notify->notify_id, status, v.detail);
}
