/* peer.c — see peer.h. */
#include "peer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer.pb-c.h"
#include "quarantine.h"
#include "staging.h"
#include "wire.h"
#include "ask.h"
#include "xfer.h"

/* A UCX worker address is a few hundred bytes, up to a few KiB with many NICs; one per worker. */
#define PEER_MAX_ADDRESS ((1 + WIREADDR_MAX_LANES) * 4096)

static struct peer *peer_find(struct b10d *d, uint64_t daemon_id)
{
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &d->peers) {
        struct peer *p = list_entry(pos, struct peer, node);
        if (p->daemon_id == daemon_id)
            return p;
    }
    return NULL;
}

b10_status_t peer_get(struct b10d *d, uint64_t daemon_id, const void *address, size_t length,
                      struct peer **peer_p)
{
    struct peer *p = peer_find(d, daemon_id);

    if (p != NULL) {
        *peer_p = p;
        return B10_OK;
    }
    if (daemon_id == 0 || length == 0 || length > PEER_MAX_ADDRESS)
        return B10_ERR_INVALID_ARG;
    if (d->npeers >= d->cfg.max_peers)
        return B10_ERR_TOO_LARGE;
    p = calloc(1, sizeof(*p));
    if (p == NULL || (p->address = malloc(length)) == NULL) {
        free(p);
        return B10_ERR_NO_MEMORY;
    }
    memcpy(p->address, address, length);
    p->address_length = length;
    p->d = d;
    p->daemon_id = daemon_id;
    p->state = PEER_DOWN;
    p->heard_ms = d->now_ms(d);
    list_init(&p->waiting);
    list_init(&p->xfers);
    list_init(&p->asks);
    uv_timer_init(d->loop, &p->connect_timer);
    p->connect_timer.data = p;
    list_insert_tail(&d->peers, &p->node);
    d->npeers++;
    *peer_p = p;
    return B10_OK;
}

int peer_send_msg(struct peer *peer, uint64_t tag, const void *msg)
{
    const ProtobufCMessage *m = msg;
    size_t length = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(length ? length : 1);

    if (peer->ep == NULL || buf == NULL) {
        free(buf);
        return -1;
    }
    protobuf_c_message_pack(m, buf);
    return wire_send_owned(peer->ep, tag, buf, length);
}

void peer_send_result(struct peer *peer, const struct tag_link *link, uint64_t id,
                      b10_status_t status, const char *detail)
{
    B10__Peer__Result result = B10__PEER__RESULT__INIT;
    B10__Peer__Msg msg = B10__PEER__MSG__INIT;
    char clipped[200];

    snprintf(clipped, sizeof(clipped), "%.199s", detail);
    result.xfer_id = id;
    result.status = (B10__Status)status;
    result.detail = clipped;
    msg.body_case = B10__PEER__MSG__BODY_RESULT;
    msg.result = &result;
    if (peer->ep == NULL || peer_send_msg(peer, tags_derive(link, id, 0, TAG_KIND_RESULT), &msg) != 0)
        log_debug("peer %016" PRIx64 ": could not send a RESULT for %016" PRIx64, peer->daemon_id, id);
}

static int peer_ensure_ep(struct peer *peer)
{
    if (peer->ep != NULL)
        return 0;
    if (wire_ep_create(peer->d->wire, peer->address, peer->address_length, peer, &peer->ep) != 0)
        return -1;
    log_info("peer %016" PRIx64 ": endpoint open, transport %s, %u data lanes", peer->daemon_id,
             wire_ep_transports(peer->ep), wire_ep_lanes(peer->ep));
    return 0;
}

/* Fail every transfer that waits for the outbound link. */
static void peer_fail_waiting(struct peer *peer, b10_status_t status, const char *detail)
{
    /* From the head each time: failing a READ fails its write-back too, maybe the next node. */
    while (!list_empty(&peer->waiting))
        xfer_fail(list_entry(peer->waiting.next, struct xfer, peer_node), status, "%s", detail);
}

/*
 * Fail the transfers and questions under way with the peer: those on link
 * generation gen, or all of them when gen is 0. The walk starts over after
 * each failure, which may take others with it (a READ and its write-back).
 */
static void peer_fail_work(struct peer *peer, uint64_t gen, b10_status_t status, const char *detail)
{
    struct list *pos, *tmp;

again:
    list_for_each_safe(pos, tmp, &peer->asks) {
        struct ask *a = list_entry(pos, struct ask, peer_node);
        if (gen == 0 || (a->out == NULL && a->link.gen == gen)) {
            ask_fail(a, status, detail);
            goto again;
        }
    }
    list_for_each_safe(pos, tmp, &peer->xfers) {
        struct xfer *x = list_entry(pos, struct xfer, peer_node);
        if (gen == 0 || x->link.gen == gen) {
            xfer_fail(x, status, "%s", detail);
            goto again;
        }
    }
}

static void peer_retire_out(struct peer *peer, b10_status_t why)
{
    if (peer->state == PEER_DOWN)
        return;
    uv_timer_stop(&peer->connect_timer);
    if (peer->ack_op != NULL) {
        wire_cancel(peer->d->wire, peer->ack_op);
        /* ack_buf lives in the peer, which is never freed before shutdown: safe to leave posted. */
    }
    tags_quarantine(peer->d->tags, tags_derive(&peer->out, 0, 0, TAG_KIND_HELLO_ACK),
                    peer->d->now_ms(peer->d) + peer->d->cfg.quarantine_ttl_ms);
    quarantine_add(peer->d->quarantine, QUARANTINE_GENERATION, peer->out.gen, 0, why, 0,
                   peer->daemon_id, NULL);
    peer->state = PEER_DOWN;
}

static void peer_retire_in(struct peer *peer, b10_status_t why)
{
    if (!peer->in_up)
        return;
    tags_quarantine(peer->d->tags, peer->in_control_tag,
                    peer->d->now_ms(peer->d) + peer->d->cfg.quarantine_ttl_ms);
    quarantine_add(peer->d->quarantine, QUARANTINE_GENERATION, peer->in.gen, 0, why, 0,
                   peer->daemon_id, NULL);
    peer->in_up = false;
}

/* Retire both links and fail everything with the peer; close_ep: the endpoint too. */
static void peer_give_up(struct peer *peer, b10_status_t status, const char *detail, bool close_ep)
{
    if (peer->state == PEER_UP || peer->in_up)
        peer->d->stats.peers_lost++;
    log_warning("peer %016" PRIx64 ": lost (%s): %s", peer->daemon_id, b10_status_name(status),
                detail);
    peer_retire_out(peer, status);
    peer_retire_in(peer, status);
    if (close_ep && peer->ep != NULL) {
        wire_ep_close(peer->ep);
        peer->ep = NULL;
    }
    peer_fail_waiting(peer, status, detail);
    peer_fail_work(peer, 0, status, detail);
}

void peer_lost(struct peer *peer, b10_status_t status, const char *detail)
{
    peer_give_up(peer, status, detail, true);
}

void peer_on_ep_error(void *arg, void *ep_user, b10_status_t status)
{
    struct peer *peer = ep_user;
    peer_lost(peer, B10_ERR_PEER_LOST, "the endpoint to the remote daemon failed");
}

static void peer_on_connect_timeout(uv_timer_t *timer)
{
    struct peer *peer = timer->data;
    char detail[128];

    snprintf(detail, sizeof(detail), "remote daemon %016" PRIx64 " did not answer HELLO within %u ms",
             peer->daemon_id, peer->d->cfg.connect_timeout_ms);
    peer_lost(peer, B10_ERR_PEER_UNREACHABLE, detail);
}

static void peer_on_hello_ack(void *arg, b10_status_t status, size_t length)
{
    struct peer *peer = arg;
    B10__Peer__Msg *msg = NULL;
    char detail[256];

    peer->ack_op = NULL;
    if (status == B10_ERR_CANCELLED || peer->state != PEER_CONNECTING)
        return;   /* retired meanwhile: whoever retired it failed the waiting transfers */
    if (status != B10_OK) {
        snprintf(detail, sizeof(detail), "HELLO_ACK failed: %s", b10_status_str(status));
        peer_lost(peer, status == B10_ERR_PEER_PROTOCOL ? status : B10_ERR_PEER_UNREACHABLE, detail);
        return;
    }
    msg = b10__peer__msg__unpack(NULL, length, peer->ack_buf);
    if (msg == NULL || msg->body_case != B10__PEER__MSG__BODY_HELLO_ACK ||
        msg->hello_ack->gen != peer->out.gen || msg->hello_ack->daemon_id != peer->daemon_id) {
        peer->d->stats.peer_protocol_errors++;
        peer_lost(peer, B10_ERR_PEER_PROTOCOL, "malformed HELLO_ACK");
        goto out;
    }
    const B10__Peer__HelloAck *ack = msg->hello_ack;
    if (ack->status != B10__STATUS__OK) {
        b10_status_t why = (b10_status_t)ack->status;
        snprintf(detail, sizeof(detail), "remote daemon refused the link: %.200s", ack->detail);
        if (b10_status_action(why) == B10_ACTION_NONE)
            why = B10_ERR_PEER_PROTOCOL;
        peer_lost(peer, why, detail);
        goto out;
    }
    uv_timer_stop(&peer->connect_timer);
    tags_unregister(peer->d->tags, tags_derive(&peer->out, 0, 0, TAG_KIND_HELLO_ACK));
    peer->max_chunk = ack->max_chunk_bytes;
    peer->max_control = ack->max_control_bytes;
    peer->max_pieces = ack->max_pieces;
    peer->state = PEER_UP;
    peer_heard(peer);
    log_info("peer %016" PRIx64 ": link up, generation %016" PRIx64 ", transport %s",
             peer->daemon_id, peer->out.gen, wire_ep_transports(peer->ep));

    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &peer->waiting) {
        struct xfer *x = list_entry(pos, struct xfer, peer_node);
        list_remove(&x->peer_node);
        list_insert_tail(&peer->xfers, &x->peer_node);
        xfer_link_up(x);
    }
    list_for_each_safe(pos, tmp, &peer->asks) {
        struct ask *a = list_entry(pos, struct ask, peer_node);
        if (a->out != NULL)
            ask_link_up(a);
    }
out:
    if (msg != NULL)
        b10__peer__msg__free_unpacked(msg, NULL);
}

/* Open the outbound link: a new generation, a new key, HELLO, then wait for HELLO_ACK. */
static b10_status_t peer_connect(struct peer *peer)
{
    struct b10d *d = peer->d;
    const void *addr;
    size_t addr_len;

    if (peer_ensure_ep(peer) != 0)
        return B10_ERR_PEER_UNREACHABLE;
    peer->out.sender_id = d->daemon_id;
    peer->out.receiver_id = peer->daemon_id;
    peer->out.gen = b10d_new_generation(d);
    b10d_random(peer->out.key, sizeof(peer->out.key));

    uint64_t ack_tag = tags_derive(&peer->out, 0, 0, TAG_KIND_HELLO_ACK);
    int rc = tags_register(d->tags, ack_tag, peer);
    if (rc != 0) {
        log_warning("peer %016" PRIx64 ": HELLO_ACK tag: %s", peer->daemon_id, tags_strerror(rc));
        return tags_status(rc);
    }
    if (wire_recv(d->wire, ack_tag, peer->ack_buf, sizeof(peer->ack_buf), NULL,
                  peer_on_hello_ack, peer, &peer->ack_op) != 0) {
        tags_unregister(d->tags, ack_tag);
        return B10_ERR_PEER_UNREACHABLE;
    }
    peer->state = PEER_CONNECTING;

    wire_address(d->wire, &addr, &addr_len);
    B10__Peer__Hello hello = B10__PEER__HELLO__INIT;
    hello.version = B10_PEER_PROTOCOL_VERSION;
    hello.daemon_id = d->daemon_id;
    hello.to_daemon_id = peer->daemon_id;
    hello.gen = peer->out.gen;
    hello.tag_key = (ProtobufCBinaryData){ sizeof(peer->out.key), peer->out.key };
    hello.worker_address = (ProtobufCBinaryData){ addr_len, (uint8_t *)addr };
    B10__Peer__Msg msg = B10__PEER__MSG__INIT;
    msg.body_case = B10__PEER__MSG__BODY_HELLO;
    msg.hello = &hello;
    if (peer_send_msg(peer, TAG_HELLO, &msg) != 0) {
        peer_retire_out(peer, B10_ERR_PEER_UNREACHABLE);
        return B10_ERR_PEER_UNREACHABLE;
    }
    uv_timer_start(&peer->connect_timer, peer_on_connect_timeout, d->cfg.connect_timeout_ms, 0);
    log_debug("peer %016" PRIx64 ": HELLO sent, generation %016" PRIx64, peer->daemon_id,
              peer->out.gen);
    return B10_OK;
}

b10_status_t peer_ensure_link(struct peer *peer)
{
    if (peer->state == PEER_UP)
        return B10_OK;
    if (peer->state == PEER_DOWN) {
        b10_status_t status = peer_connect(peer);
        if (status != B10_OK)
            return status;
    }
    return B10_IN_PROGRESS;
}

b10_status_t peer_use(struct peer *peer, struct xfer *x)
{
    b10_status_t status = peer_ensure_link(peer);
    if (status == B10_OK)
        list_insert_tail(&peer->xfers, &x->peer_node);
    else if (status == B10_IN_PROGRESS)
        list_insert_tail(&peer->waiting, &x->peer_node);
    return status;
}

/* Answer a HELLO: the ack, or a refusal the sender can report. */
static void peer_send_ack(struct peer *peer, const struct tag_link *link, b10_status_t status,
                          const char *detail)
{
    struct b10d *d = peer->d;
    B10__Peer__HelloAck ack = B10__PEER__HELLO_ACK__INIT;

    ack.version = B10_PEER_PROTOCOL_VERSION;
    ack.daemon_id = d->daemon_id;
    ack.gen = link->gen;
    ack.status = (B10__Status)status;
    ack.detail = (char *)detail;
    ack.max_chunk_bytes = staging_view_bytes(d->staging);
    ack.max_control_bytes = d->cfg.max_control_bytes;
    ack.max_pieces = d->cfg.max_control_bytes / 16;
    B10__Peer__Msg msg = B10__PEER__MSG__INIT;
    msg.body_case = B10__PEER__MSG__BODY_HELLO_ACK;
    msg.hello_ack = &ack;
    if (peer_send_msg(peer, tags_derive(link, 0, 0, TAG_KIND_HELLO_ACK), &msg) != 0)
        log_warning("peer %016" PRIx64 ": could not send HELLO_ACK", peer->daemon_id);
}

static void peer_on_hello(struct b10d *d, const B10__Peer__Hello *hello)
{
    struct peer *peer;
    struct tag_link link;

    if (hello->version != B10_PEER_PROTOCOL_VERSION || hello->daemon_id == 0 ||
        hello->tag_key.len != sizeof(link.key) || hello->worker_address.len == 0 ||
        hello->worker_address.len > PEER_MAX_ADDRESS) {
        d->stats.peer_protocol_errors++;
        log_warning("dropping a malformed HELLO (version %u)", hello->version);
        return;
    }
    if (peer_get(d, hello->daemon_id, hello->worker_address.data, hello->worker_address.len,
                 &peer) != B10_OK) {
        log_warning("dropping HELLO from %016" PRIx64 ": no room for another peer (--max-peers)",
                    hello->daemon_id);
        return;
    }
    memcpy(link.key, hello->tag_key.data, sizeof(link.key));
    link.sender_id = hello->daemon_id;
    link.receiver_id = d->daemon_id;
    link.gen = hello->gen;
    if (peer_ensure_ep(peer) != 0)
        return;
    if (hello->to_daemon_id != d->daemon_id) {
        /* Meant for an earlier incarnation at this address: its descriptor is stale. */
        peer_send_ack(peer, &link, B10_ERR_PEER_LOST,
                      "the remote daemon restarted since its agent descriptor was made: reload the agent");
        return;
    }
    if (peer->in_up && peer->in.gen == hello->gen)
        return;   /* a duplicate: the link stands */
    if (peer->in_up) {
        /* A new generation from the same daemon retires the old link and its transfers. */
        struct list *pos, *tmp;
        peer_retire_in(peer, B10_ERR_PEER_LOST);
        list_for_each_safe(pos, tmp, &peer->xfers) {
            struct xfer *x = list_entry(pos, struct xfer, peer_node);
            if (x->role == XFER_RECV)
                xfer_fail(x, B10_ERR_PEER_LOST, "the sending daemon reconnected with a new generation");
        }
    }
    uint64_t control_tag = tags_derive(&link, 0, 0, TAG_KIND_CONTROL);
    int rc = tags_register(d->tags, control_tag, peer);
    if (rc != 0) {
        char detail[96];
        snprintf(detail, sizeof(detail), "control tag: %s", tags_strerror(rc));
        peer_send_ack(peer, &link, tags_status(rc), detail);
        return;
    }
    peer->in = link;
    peer->in_control_tag = control_tag;
    peer->in_up = true;
    peer_heard(peer);
    log_info("peer %016" PRIx64 ": inbound link, generation %016" PRIx64, peer->daemon_id, link.gen);
    peer_send_ack(peer, &link, B10_OK, "");
}

/* ---------------------------------------------------------------- liveness */

void peer_heard(struct peer *peer)
{
    peer->heard_ms = peer->d->now_ms(peer->d);
}

static bool peer_has_link(const struct peer *peer)
{
    return peer->state == PEER_UP || peer->in_up;
}

/* Work that needs the peer alive: transfers on its links, questions asked of it. */
static bool peer_busy(const struct peer *peer)
{
    return peer_has_link(peer) && (!list_empty(&peer->xfers) || !list_empty(&peer->asks));
}

static void peer_send_heartbeat(struct peer *peer, const B10__Peer__Heartbeat *hb)
{
    B10__Peer__Msg msg = B10__PEER__MSG__INIT;
    msg.body_case = B10__PEER__MSG__BODY_HEARTBEAT;
    msg.heartbeat = (B10__Peer__Heartbeat *)hb;
    if (peer_ensure_ep(peer) != 0 || peer_send_msg(peer, TAG_HEARTBEAT, &msg) != 0)
        log_debug("peer %016" PRIx64 ": could not send a heartbeat", peer->daemon_id);
}

/* Our links with the peer, for it to confirm: the outbound one only once it is up. */
static void peer_ping(struct peer *peer)
{
    B10__Peer__Heartbeat hb = B10__PEER__HEARTBEAT__INIT;
    hb.daemon_id = peer->d->daemon_id;
    hb.to_daemon_id = peer->daemon_id;
    hb.out_gen = peer->state == PEER_UP ? peer->out.gen : 0;
    hb.in_gen = peer->in_up ? peer->in.gen : 0;
    peer->nonces[1] = peer->nonces[0];
    do
        b10d_random(&peer->nonces[0], sizeof(peer->nonces[0]));
    while (peer->nonces[0] == 0);
    hb.nonce = peer->nonces[0];
    peer_send_heartbeat(peer, &hb);
}

/*
 * The peer no longer holds a link of ours: it gave this daemon up while we
 * were stalled. Retire the stale links and fail what runs on them; a link
 * the peer opened since stays, and so does what runs on it. The endpoint
 * stays too: a peer gives up on silence without closing its own.
 */
static void peer_retire_stale(struct peer *peer, bool out, bool in)
{
    const char *detail = "the remote daemon no longer holds this link: it gave this daemon up";
    uint64_t out_gen = out ? peer->out.gen : 0, in_gen = in ? peer->in.gen : 0;

    log_warning("peer %016" PRIx64 ": %s%s%s retired: %s", peer->daemon_id,
                out ? "outbound link" : "", out && in ? " and " : "", in ? "inbound link" : "", detail);
    if (out)
        peer_retire_out(peer, B10_ERR_PEER_LOST);
    if (in)
        peer_retire_in(peer, B10_ERR_PEER_LOST);
    if (out_gen != 0)
        peer_fail_work(peer, out_gen, B10_ERR_PEER_LOST, detail);
    if (in_gen != 0)
        peer_fail_work(peer, in_gen, B10_ERR_PEER_LOST, detail);
}

static void peer_on_heartbeat(struct b10d *d, const B10__Peer__Heartbeat *hb)
{
    struct peer *peer = peer_find(d, hb->daemon_id);

    if (peer == NULL || hb->to_daemon_id != d->daemon_id) {
        d->stats.stale_messages++;
        log_debug("dropping a heartbeat of no known peer");
        return;
    }
    if (!hb->reply) {
        /*
         * Its outbound link is our inbound one and the reverse. Our outbound
         * link counts from the HELLO on: the peer may answer it before its
         * HELLO_ACK reaches us.
         */
        bool out_held = hb->out_gen != 0 && peer->in_up && peer->in.gen == hb->out_gen;
        bool in_held = hb->in_gen != 0 && peer->state != PEER_DOWN && peer->out.gen == hb->in_gen;
        if (out_held || in_held)
            peer_heard(peer);
        B10__Peer__Heartbeat answer = B10__PEER__HEARTBEAT__INIT;
        answer.daemon_id = d->daemon_id;
        answer.to_daemon_id = peer->daemon_id;
        answer.out_gen = hb->out_gen;
        answer.in_gen = hb->in_gen;
        answer.reply = true;
        answer.out_stale = hb->out_gen != 0 && !out_held;
        answer.in_stale = hb->in_gen != 0 && !in_held;
        answer.nonce = hb->nonce;
        /* An endpoint made only to answer: at most one a tick, whatever a peer sends. */
        uint64_t now = d->now_ms(d);
        if (peer->ep == NULL && now - peer->answer_ep_ms < d->cfg.peer_timeout_ms / 4 + 1)
            return;
        if (peer->ep == NULL)
            peer->answer_ep_ms = now;
        peer_send_heartbeat(peer, &answer);
        return;
    }
    /* An answer to none of our last two asks is forged or very late: it tells nothing. */
    if (hb->nonce == 0 || (hb->nonce != peer->nonces[0] && hb->nonce != peer->nonces[1])) {
        d->stats.stale_messages++;
        log_debug("peer %016" PRIx64 ": dropping a heartbeat answer to no ask of ours", peer->daemon_id);
        return;
    }
    /* It echoes our generations; one that is not current any more tells nothing. */
    bool out_current = hb->out_gen != 0 && peer->state == PEER_UP && peer->out.gen == hb->out_gen;
    bool in_current = hb->in_gen != 0 && peer->in_up && peer->in.gen == hb->in_gen;
    bool out_stale = out_current && hb->out_stale, in_stale = in_current && hb->in_stale;
    if (out_stale || in_stale)
        peer_retire_stale(peer, out_stale, in_stale);
    if ((out_current && !out_stale) || (in_current && !in_stale))
        peer_heard(peer);
}

/*
 * This daemon was stalled past 3T/4: a peer may have declared it lost and
 * reported its transfers failed. Fail them here too, before any DATA that
 * waited across the stall can land, and ask whether the links still stand.
 */
static void peer_after_stall(struct peer *peer, uint64_t stalled_ms)
{
    char detail[160];

    if (!peer_has_link(peer))
        return;
    if (peer_busy(peer)) {
        snprintf(detail, sizeof(detail),
                 "this daemon stalled for %" PRIu64 " ms (--peer-timeout-ms %u): the remote "
                 "daemon may have given the transfer up", stalled_ms, peer->d->cfg.peer_timeout_ms);
        log_warning("peer %016" PRIx64 ": %s", peer->daemon_id, detail);
        /*
         * Retire the links as well: a peer that did not give us up would
         * otherwise wait for what we failed without a word (no CANCEL or
         * RESULT goes to a peer deemed lost) until its deadlines. Its next
         * heartbeat names them, is answered stale, and it fails them too.
         */
        peer_retire_out(peer, B10_ERR_PEER_LOST);
        peer_retire_in(peer, B10_ERR_PEER_LOST);
        peer_fail_work(peer, 0, B10_ERR_PEER_LOST, detail);
    }
    peer_heard(peer);
    if (peer_has_link(peer))
        peer_ping(peer);
}

/*
 * A tick this late means a stall. A peer gives this daemon up after T of
 * silence, which a stall shorter than 3T/4 (ticks are T/4 apart, plus the
 * delay of a heartbeat on its way) cannot cause.
 */
static uint64_t peer_stall_ms(const struct b10d *d)
{
    return (uint64_t)d->cfg.peer_timeout_ms * 3 / 4;
}

static void peer_liveness_run(struct b10d *d)
{
    uint64_t now = d->now_ms(d);
    uint64_t timeout = d->cfg.peer_timeout_ms;
    uint64_t since = now - d->liveness_tick_ms;
    bool stalled = since >= peer_stall_ms(d);
    struct list *pos, *tmp;
    char detail[128];

    d->liveness_tick_ms = now;
    if (stalled)
        d->stats.stalls++;
    list_for_each_safe(pos, tmp, &d->peers) {
        struct peer *p = list_entry(pos, struct peer, node);
        if (stalled) {
            peer_after_stall(p, since);
            continue;
        }
        if (!peer_busy(p)) {
            p->heard_ms = now;   /* silence is only counted while something waits on it */
            continue;
        }
        if (now >= p->heard_ms && now - p->heard_ms >= timeout) {
            snprintf(detail, sizeof(detail), "no word from the remote daemon for %" PRIu64
                     " ms (--peer-timeout-ms %u)", now - p->heard_ms, d->cfg.peer_timeout_ms);
            /*
             * The endpoint stays: silence is no endpoint failure, its requests
             * complete or fail on their own (the views they hold wait in the
             * quarantine), and a link that comes back serves again. Closing it
             * by force under a stalled connection is what UCX 1.13 handles worst.
             */
            peer_give_up(p, B10_ERR_PEER_LOST, detail, false);
            continue;
        }
        peer_ping(p);
    }
}

static void peer_on_liveness_tick(uv_timer_t *timer)
{
    peer_liveness_run(timer->data);
}

bool peer_liveness_check(struct b10d *d)
{
    if (!d->liveness_on || d->now_ms(d) - d->liveness_tick_ms < peer_stall_ms(d))
        return false;
    peer_liveness_run(d);
    return true;
}

void peer_liveness_start(struct b10d *d)
{
    uint64_t every = d->cfg.peer_timeout_ms / 4;

    if (d->cfg.peer_timeout_ms == 0)
        return;
    uv_timer_init(d->loop, &d->liveness);
    d->liveness.data = d;
    d->liveness_tick_ms = d->now_ms(d);
    uv_timer_start(&d->liveness, peer_on_liveness_tick, every, every);
    d->liveness_on = true;
}

void peer_liveness_stop(struct b10d *d)
{
    if (!d->liveness_on)
        return;
    d->liveness_on = false;
    uv_close((uv_handle_t *)&d->liveness, NULL);
}

void peer_on_oversize(void *arg, uint64_t tag, size_t length)
{
    struct b10d *d = arg;
    d->stats.peer_protocol_errors++;
    log_warning("dropping a %zu-byte control message (--max-control-bytes %" PRIu64 ")", length,
                d->cfg.max_control_bytes);
}

void peer_on_control(void *arg, uint64_t tag, void *buf, size_t length)
{
    struct b10d *d = arg;
    B10__Peer__Msg *msg = b10__peer__msg__unpack(NULL, length, buf);

    free(buf);
    if (msg == NULL) {
        d->stats.peer_protocol_errors++;
        log_warning("dropping an undecodable control message of %zu bytes", length);
        return;
    }
    if (tag == TAG_HELLO || tag == TAG_HEARTBEAT) {
        if (tag == TAG_HELLO && msg->body_case == B10__PEER__MSG__BODY_HELLO)
            peer_on_hello(d, msg->hello);
        else if (tag == TAG_HEARTBEAT && msg->body_case == B10__PEER__MSG__BODY_HEARTBEAT)
            peer_on_heartbeat(d, msg->heartbeat);
        else
            d->stats.peer_protocol_errors++;
        goto out;
    }
    /* A CONTROL must come on the control tag of a live inbound link: anything else is stale. */
    struct peer *peer = tags_lookup(d->tags, tag);
    if (peer == NULL || !peer->in_up || peer->in_control_tag != tag) {
        d->stats.stale_messages++;
        log_info("dropping a control message on a tag of no live link");
        goto out;
    }
    peer_heard(peer);
    switch (msg->body_case) {
    case B10__PEER__MSG__BODY_CONTROL:
        xfer_admit(peer, msg->control);
        break;
    case B10__PEER__MSG__BODY_READ:
        xfer_serve_read(peer, msg->read);
        break;
    case B10__PEER__MSG__BODY_CHECK:
        ask_on_check(peer, msg->check);
        break;
    case B10__PEER__MSG__BODY_NOTIFY:
        ask_on_notify(peer, msg->notify);
        break;
    default:
        d->stats.peer_protocol_errors++;
        log_warning("peer %016" PRIx64 ": unexpected message kind %d on the control tag",
                    peer->daemon_id, (int)msg->body_case);
        break;
    }
out:
    b10__peer__msg__free_unpacked(msg, NULL);
}

/*
 * A data-class message no receive took. Every tag a peer may legitimately
 * use is registered before it can be sent (READY and RESULT before CONTROL,
 * DATA and CANCEL before READY), so one that is unknown or quarantined is
 * stray: a late message of a failed transfer, a replay, an old generation.
 * It is dropped unread and counted; nothing of it is ever scattered.
 */
bool peer_on_data(void *arg, uint64_t tag, size_t length)
{
    struct b10d *d = arg;

    if (tags_lookup(d->tags, tag) != NULL)
        return false;   /* its receive is posted or about to be */
    bool late = tags_is_quarantined(d->tags, tag);
    if (late)
        d->stats.late_completions++;
    else
        d->stats.stale_messages++;
    log_info("dropping a stray %zu-byte message on %s tag %016" PRIx64, length,
             late ? "the quarantined" : "an unknown", tag);
    return true;
}

void peer_close_all(struct b10d *d)
{
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &d->peers) {
        struct peer *p = list_entry(pos, struct peer, node);
        uv_timer_stop(&p->connect_timer);
        if (p->ack_op != NULL)
            wire_cancel(d->wire, p->ack_op);
        if (p->ep != NULL) {
            wire_ep_close(p->ep);
            p->ep = NULL;
        }
    }
}

static void peer_on_closed(uv_handle_t *handle)
{
    struct peer *p = handle->data;
    free(p->address);
    free(p);
}

void peer_free_all(struct b10d *d)
{
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &d->peers) {
        struct peer *p = list_entry(pos, struct peer, node);
        list_remove(pos);
        d->npeers--;
        uv_close((uv_handle_t *)&p->connect_timer, peer_on_closed);
    }
}
