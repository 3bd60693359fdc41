/*
 * peer-liveness.c — heartbeats, silence and this daemon's own stalls
 * (peer.h tells how; the link rooms: peer-int.h).
 */
#include "peer-int.h"

#include <inttypes.h>
#include <stdio.h>

void peer_heard(struct peer *peer)
{
    peer->heard_ms = peer->d->now_ms(peer->d);
}

/* Work that needs the peer alive: transfers on its links, questions asked of it. */
static bool peer_liveness_busy(const struct peer *peer)
{
    return peer_has_link(peer) && (!list_empty(&peer->xfers) || !list_empty(&peer->asks));
}

static void peer_liveness_send_beat(struct peer *peer, uint64_t gen, bool reply, bool stale,
                                    uint64_t nonce)
{
    B10__Peer__Heartbeat hb = B10__PEER__HEARTBEAT__INIT;
    B10__Peer__Msg msg = B10__PEER__MSG__INIT;

    hb.gen = gen;
    hb.reply = reply;
    hb.stale = stale;
    hb.nonce = nonce;
    msg.body_case = B10__PEER__MSG__BODY_HEARTBEAT;
    msg.heartbeat = &hb;
    if (peer_ensure_ep(peer) != 0 || peer_send(peer, gen, TAG_HEARTBEAT, &msg.base) != 0)
        log_debug("peer %s: could not send a heartbeat", peer->name);
}

/* Ask about each of our links with the peer, under its own keys. */
static void peer_liveness_ping(struct peer *peer)
{
    peer->nonces[1] = peer->nonces[0];
    do
        auth_random(&peer->nonces[0], sizeof(peer->nonces[0]));
    while (peer->nonces[0] == 0);
    if (peer->state == PEER_UP)
        peer_liveness_send_beat(peer, peer->out.tags.gen, false, false, peer->nonces[0]);
    if (peer->in_up)
        peer_liveness_send_beat(peer, peer->in.tags.gen, false, false, peer->nonces[0]);
}

/*
 * The peer no longer holds a link of ours: it gave this daemon up while we
 * were stalled. Retire the stale link and fail what runs on it; a link the
 * peer opened since stays, and so does what runs on it. The endpoint stays
 * too: a peer gives up on silence without closing its own.
 */
static void peer_liveness_retire_stale(struct peer *peer, uint64_t gen)
{
    const char *detail = "the remote daemon no longer holds this link: it gave this daemon up";
    bool out = peer->state == PEER_UP && peer->out.tags.gen == gen;

    log_warning("peer %s: %s link retired: %s", peer->name, out ? "outbound" : "inbound", detail);
    if (out)
        peer_retire_out(peer, B10_ERR_PEER_LOST);
    else
        peer_retire_in(peer, B10_ERR_PEER_LOST);
    peer_fail_work(peer, gen, B10_ERR_PEER_LOST, detail);
}

/*
 * A heartbeat: under the keys of the link it names, live or the last one
 * retired (an ask about one is answered stale). One about a link of a
 * pending handshake confirms that link first.
 */
void peer_liveness_on_heartbeat(struct b10d *d, const uint8_t *buf, size_t length)
{
    struct auth_header hdr;
    B10__Peer__Msg *msg = NULL;
    bool live = false;

    if (auth_peek(buf, length, &hdr) != 0 || hdr.kind != AUTH_KIND_LINK ||
        hdr.receiver_id != d->daemon_id) {
        peer_hello_stranger(d, &d->stats.messages_unauthenticated, "dropping a heartbeat that is no "
                            "envelope for this daemon");
        return;
    }
    struct peer *peer = peer_find(d, hdr.sender_id);
    struct auth_link *link = peer != NULL ? peer_link_opening(peer, hdr.key_id, buf, length, &live)
                                          : NULL;
    if (link != NULL) {
        if (peer_open_with(d, peer, link, buf, length, &msg) != B10_OK)
            return;
    } else {
        struct peer_pending *pend = peer_hello_pending_of(d, hdr.sender_id);
        if (pend == NULL || pend->refused || pend->gen != hdr.key_id) {
            d->stats.stale_messages++;
            log_debug("dropping a heartbeat about a link this daemon never had or forgot");
            return;
        }
        if (peer_open_with(d, NULL, &pend->link, buf, length, &msg) != B10_OK ||
            (peer = peer_hello_adopt(pend)) == NULL)
            goto out;
        live = true;
    }
    if (msg->body_case != B10__PEER__MSG__BODY_HEARTBEAT || msg->heartbeat->gen != hdr.key_id) {
        d->stats.peer_protocol_errors++;
        log_warning("peer %s: a heartbeat that is none", peer->name);
        goto out;
    }
    const B10__Peer__Heartbeat *hb = msg->heartbeat;
    if (!hb->reply) {
        if (live)
            peer_heard(peer);
        /* An endpoint made only to answer: at most one a tick, whatever a peer sends. */
        uint64_t now = d->now_ms(d);
        if (peer->ep == NULL && now - peer->answer_ep_ms < d->cfg.peer_timeout_ms / 4 + 1)
            goto out;
        if (peer->ep == NULL)
            peer->answer_ep_ms = now;
        peer_liveness_send_beat(peer, hb->gen, true, !live, hb->nonce);
        goto out;
    }
    /* An answer to none of our last two asks is very late: it tells nothing. */
    if (hb->nonce == 0 || (hb->nonce != peer->nonces[0] && hb->nonce != peer->nonces[1])) {
        d->stats.stale_messages++;
        log_debug("peer %s: dropping a heartbeat answer to no ask of ours", peer->name);
        goto out;
    }
    if (!live)
        goto out;   /* about a link retired meanwhile */
    if (hb->stale)
        peer_liveness_retire_stale(peer, hb->gen);
    else
        peer_heard(peer);
out:
    if (msg != NULL)
        b10__peer__msg__free_unpacked(msg, NULL);
}

/*
 * This daemon was stalled past 3T/4: a peer may have declared it lost and
 * reported its transfers failed. Fail them here too, before any DATA that
 * waited across the stall can land, and ask whether the links still stand.
 */
static void peer_liveness_after_stall(struct peer *peer, uint64_t stalled_ms)
{
    char detail[160];

    if (!peer_has_link(peer))
        return;
    if (peer_liveness_busy(peer)) {
        snprintf(detail, sizeof(detail),
                 "this daemon stalled for %" PRIu64 " ms (--peer-timeout-ms %u): the remote "
                 "daemon may have given the transfer up", stalled_ms, peer->d->cfg.peer_timeout_ms);
        log_warning("peer %s: %s", peer->name, detail);
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
        peer_liveness_ping(peer);
}

/*
 * A tick this late means a stall. A peer gives this daemon up after T of
 * silence, which a stall shorter than 3T/4 (ticks are T/4 apart, plus the
 * delay of a heartbeat on its way) cannot cause.
 */
static uint64_t peer_liveness_stall_ms(const struct b10d *d)
{
    return (uint64_t)d->cfg.peer_timeout_ms * 3 / 4;
}

void peer_liveness_tick(struct b10d *d)
{
    uint64_t now = d->now_ms(d);
    uint64_t timeout = d->cfg.peer_timeout_ms;
    uint64_t since = now - d->liveness.tick_ms;
    bool stalled = since >= peer_liveness_stall_ms(d);
    struct list *pos, *tmp;
    char detail[128];

    d->liveness.tick_ms = now;
    if (stalled)
        d->stats.stalls++;
    list_for_each_safe(pos, tmp, &d->peers) {
        struct peer *p = list_entry(pos, struct peer, node);
        if (stalled) {
            peer_liveness_after_stall(p, since);
            continue;
        }
        if (!peer_liveness_busy(p)) {
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
        peer_liveness_ping(p);
    }
}

static void peer_liveness_on_tick(uv_timer_t *timer)
{
    peer_liveness_tick(timer->data);
}

bool peer_liveness_check(struct b10d *d)
{
    if (!d->liveness.on || d->now_ms(d) - d->liveness.tick_ms < peer_liveness_stall_ms(d))
        return false;
    peer_liveness_tick(d);
    return true;
}

void peer_liveness_start(struct b10d *d)
{
    uint64_t every = d->cfg.peer_timeout_ms / 4;

    if (d->cfg.peer_timeout_ms == 0)
        return;
    uv_timer_init(d->loop, &d->liveness.timer);
    d->liveness.timer.data = d;
    d->liveness.tick_ms = d->now_ms(d);
    uv_timer_start(&d->liveness.timer, peer_liveness_on_tick, every, every);
    d->liveness.on = true;
}

void peer_liveness_stop(struct b10d *d)
{
    if (!d->liveness.on)
        return;
    d->liveness.on = false;
    uv_close((uv_handle_t *)&d->liveness.timer, NULL);
}
