/* peer.c — see peer.h. */
#include "peer.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "peer.pb-c.h"
#include "quarantine.h"
#include "staging.h"
#include "wire.h"

/* A heartbeat in its envelope: a few fields and the envelope's 72 bytes. */
#define PEER_BEAT_MAX_BYTES 256
/* Handshakes answered and waiting for their confirmation, all openers together. */
#define PEER_MAX_PENDING 256
/* Control messages read only to be refused: a few a second per peer (a token bucket). */
#define PEER_REFUSED_READS_PER_S 8
/* HELLOs and heartbeats (no peer to charge them to yet) being received at once, bytes. */
#define PEER_UNBOUND_INFLIGHT (UINT64_C(4) << 20)

/*
 * A handshake this daemon answered. The opener proved the cluster key in
 * its HELLO, but a HELLO can be replayed: only a message under the link's
 * keys, which come from this daemon's fresh nonce too, shows the opener is
 * here now. Until one comes the link waits here, apart from the peer table
 * and the tag registry, and expires after --connect-timeout-ms.
 */
struct peer_pending {
    struct list node;               /* b10d.pending */
    struct b10d *d;
    char name[HELLO_NAME_MAX];
    uint64_t daemon_id;
    uint64_t incarnation;
    uint64_t gen;
    uint8_t *address;
    size_t address_length;
    struct auth_link link;
    uint64_t control_tag;
    bool refused;                   /* answered with a refusal: nothing to confirm */
    struct wire_ep *ep;             /* made to answer, when no peer had one to lend */
    uint64_t expires_ms;
};

static void peer_give_up(struct peer *peer, b10_status_t status, const char *detail, bool close_ep);
static void peer_on_hello_ack(void *arg, b10_status_t status, size_t length);
static void peer_drop_ack(struct peer *peer);

/* ---------------------------------------------------------------- the table */

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

static struct peer *peer_find_name(struct b10d *d, const char *name)
{
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &d->peers) {
        struct peer *p = list_entry(pos, struct peer, node);
        if (strcmp(p->name, name) == 0)
            return p;
    }
    return NULL;
}

/*
 * The latest boot a daemon may claim: a day past this daemon's clock. A
 * boot claimed further ahead would outrank every real one for good.
 */
static uint64_t peer_incarnation_bound(const struct b10d *d)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return ((uint64_t)now.tv_sec + 86400) * 1000000000u;
}

/* Links, work, or something that still points here: not to be evicted. */
static bool peer_in_use(const struct peer *p)
{
    return p->state != PEER_DOWN || p->in_up || p->refs > 0 || p->acks_out > 0 ||
           !list_empty(&p->xfers) || !list_empty(&p->waiting) || !list_empty(&p->asks) ||
           p->quarantined > 0 || p->control_inflight > 0 || p->control_held > 0 || p->holds > 0;
}

/* Work under way with it, or a link standing. */
static bool peer_has_link(const struct peer *peer)
{
    return peer->state == PEER_UP || peer->in_up;
}

static void peer_on_closed(uv_handle_t *handle)
{
    struct peer *p = handle->data;
    free(p->address);
    free(p);
}

static void peer_evict(struct peer *p)
{
    struct b10d *d = p->d;

    log_info("peer %s: forgotten after %u ms unused (--peer-idle-ms)", p->name, d->cfg.peer_idle_ms);
    if (p->ep != NULL) {
        wire_ep_close(p->ep);
        p->ep = NULL;
    }
    list_remove(&p->node);
    d->npeers--;
    d->stats.peers_evicted++;
    uv_close((uv_handle_t *)&p->connect_timer, peer_on_closed);
}

/* Make room for one more: the unused entry idle longest goes. */
static bool peer_evict_one(struct b10d *d)
{
    struct peer *victim = NULL;
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &d->peers) {
        struct peer *p = list_entry(pos, struct peer, node);
        if (!peer_in_use(p) && (victim == NULL || p->idle_since_ms < victim->idle_since_ms))
            victim = p;
    }
    if (victim != NULL)
        peer_evict(victim);
    return victim != NULL;
}

static int peer_set_address(struct peer *p, const uint8_t *address, size_t length)
{
    uint8_t *copy = malloc(length);
    if (copy == NULL)
        return -1;
    memcpy(copy, address, length);
    free(p->address);
    p->address = copy;
    p->address_length = length;
    return 0;
}

static b10_status_t peer_new(struct b10d *d, const char *name, uint64_t daemon_id,
                             uint64_t incarnation, const uint8_t *address, size_t length,
                             struct peer **peer_p)
{
    if (d->npeers >= d->cfg.max_peers && !peer_evict_one(d))
        return B10_ERR_TOO_LARGE;
    struct peer *p = calloc(1, sizeof(*p));
    if (p == NULL || peer_set_address(p, address, length) != 0) {
        free(p);
        return B10_ERR_NO_MEMORY;
    }
    snprintf(p->name, sizeof(p->name), "%s", name);
    p->d = d;
    p->daemon_id = daemon_id;
    p->incarnation = incarnation;
    p->state = PEER_DOWN;
    p->heard_ms = p->idle_since_ms = p->refusal_tokens_ms = d->now_ms(d);
    p->refusal_tokens = PEER_REFUSED_READS_PER_S;
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

/* A newer boot of the peer's node: the old boot's links and work end, the entry stays. */
static b10_status_t peer_replace(struct peer *p, uint64_t daemon_id, uint64_t incarnation,
                                 const uint8_t *address, size_t length)
{
    char detail[200];

    snprintf(detail, sizeof(detail), "daemon %s restarted: its boot %016" PRIx64 " gave way to %016"
             PRIx64, p->name, p->daemon_id, daemon_id);
    if (peer_has_link(p) || !list_empty(&p->xfers) || !list_empty(&p->waiting))
        peer_give_up(p, B10_ERR_PEER_LOST, detail, true);
    else
        log_info("peer %s: %s", p->name, detail);
    if (p->ep != NULL) {
        wire_ep_close(p->ep);
        p->ep = NULL;
    }
    p->out_old_valid = p->in_old_valid = false;
    p->hello_gen_seen = 0;
    if (peer_set_address(p, address, length) != 0)
        return B10_ERR_NO_MEMORY;
    p->daemon_id = daemon_id;
    p->incarnation = incarnation;
    return B10_OK;
}

b10_status_t peer_get(struct b10d *d, const struct peer_desc *desc, struct peer **peer_p,
                      char *detail, size_t detail_len)
{
    struct peer *p = peer_find_name(d, desc->name);
    b10_status_t status;

    if (strcmp(desc->name, d->cfg.name) == 0 && desc->daemon_id != d->daemon_id) {
        snprintf(detail, detail_len, "the descriptor's daemon is named '%s', as this one is: every "
                 "node's b10d needs a name of its own (--name)", desc->name);
        return B10_ERR_INVALID_ARG;
    }
    if (desc->daemon_id == d->daemon_id && strcmp(desc->name, d->cfg.name) != 0) {
        snprintf(detail, detail_len, "the descriptor claims this daemon's own boot under another "
                 "name, '%s'", desc->name);
        return B10_ERR_INVALID_ARG;
    }
    /*
     * This daemon's own entry takes nothing from a descriptor but the name:
     * a key holder could seal one with this boot's id and its own address,
     * and so sit in the link by which this node's ranks reach each other.
     */
    struct peer_desc own;
    if (desc->daemon_id == d->daemon_id) {
        const void *addr;
        size_t addr_len;
        wire_address(d->wire, &addr, &addr_len);
        own = (struct peer_desc){ .name = d->cfg.name, .daemon_id = d->daemon_id,
                                  .incarnation = d->incarnation, .address = addr,
                                  .address_length = addr_len };
        desc = &own;
        if (p != NULL && p->daemon_id == d->daemon_id &&
            (p->address_length != addr_len || memcmp(p->address, addr, addr_len) != 0)) {
            snprintf(detail, detail_len, "this daemon's own entry holds another address");
            return B10_ERR_INTERNAL;
        }
    }
    if (p != NULL && p->daemon_id == desc->daemon_id) {
        *peer_p = p;
        return B10_OK;
    }
    if (p == NULL) {
        status = peer_new(d, desc->name, desc->daemon_id, desc->incarnation, desc->address,
                          desc->address_length, peer_p);
        if (status == B10_ERR_TOO_LARGE)
            snprintf(detail, detail_len, "%u remote daemons are in use (--max-peers)", d->cfg.max_peers);
        return status;
    }
    /*
     * A descriptor proves no freshness: one of an earlier boot never takes the
     * entry (a rank with an old one could roll a peer back to a dead boot), and
     * none from further ahead than a clock may be.
     */
    if (desc->incarnation < p->incarnation) {
        *peer_p = p;   /* the node it names, at the later boot known: descriptors outlive boots */
        d->stats.descriptors_resolved++;
        log_info("peer %s: a descriptor of its boot %016" PRIx64 " taken for its later boot %016"
                 PRIx64, p->name, desc->daemon_id, p->daemon_id);
        return B10_OK;
    }
    if (desc->incarnation > peer_incarnation_bound(d)) {
        snprintf(detail, detail_len, "the descriptor's daemon %s claims a boot a day ahead of this "
                 "daemon's clock", desc->name);
        return B10_ERR_INVALID_ARG;
    }
    status = peer_replace(p, desc->daemon_id, desc->incarnation, desc->address, desc->address_length);
    if (status == B10_OK)
        *peer_p = p;
    return status;
}

void peer_ref(struct peer *peer)
{
    peer->refs++;
}

void peer_unref(struct peer *peer)
{
    if (peer->refs > 0)
        peer->refs--;
}

void peer_hold(struct peer *peer)
{
    peer->holds++;
}

void peer_release(struct peer *peer)
{
    if (peer->holds > 0)
        peer->holds--;
}

/* ---------------------------------------------------------------- refusals and their logs */

void peer_refused(struct peer *peer, const char *what, const char *why)
{
    struct b10d *d = peer->d;
    uint64_t now = d->now_ms(d);

    peer->counters.refused++;
    d->stats.peer_refusals++;
    if (now - peer->refused_log_ms < 1000 && peer->refused_log_ms != 0)
        return;
    peer->refused_log_ms = now;
    log_warning("peer %s: refused %s: %s (%" PRIu64 " refusals so far)", peer->name, what, why,
                peer->counters.refused);
}

/* Something of nobody we know was dropped: count it, and say so at most once a second. */
static void peer_stranger(struct b10d *d, uint64_t *counter, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void peer_stranger(struct b10d *d, uint64_t *counter, const char *fmt, ...)
{
    uint64_t now = d->now_ms(d);
    char text[256];
    va_list ap;

    (*counter)++;
    if (now - d->unauth_log_ms < 1000 && d->unauth_log_ms != 0)
        return;
    d->unauth_log_ms = now;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    log_warning("%s (%" PRIu64 " so far)", text, *counter);
}

/*
 * A message of no live link or transfer (late, or someone's guess) was
 * dropped: counted, and said at info level at most once a second, so that
 * neither a flood of them nor a busy shutdown floods the log.
 */
static void peer_stale(struct b10d *d, uint64_t *counter, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void peer_stale(struct b10d *d, uint64_t *counter, const char *fmt, ...)
{
    uint64_t now = d->now_ms(d);
    char text[256];
    va_list ap;

    (*counter)++;
    if (log_max_level < LOG_LEVEL_INFO || (now - d->stale_log_ms < 1000 && d->stale_log_ms != 0))
        return;
    d->stale_log_ms = now;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    log_info("%s (%" PRIu64 " so far)", text, *counter);
}

/* A message on a link of the peer's that did not open: dropped unread, counted. */
static void peer_count_unopened(struct peer *peer, enum auth_result r)
{
    struct b10d *d = peer->d;
    uint64_t now = d->now_ms(d);
    uint64_t *count = r == AUTH_REPLAYED ? &peer->counters.replayed : &peer->counters.unauthenticated;

    (*count)++;
    if (r == AUTH_REPLAYED)
        d->stats.messages_replayed++;
    else
        d->stats.messages_unauthenticated++;
    if (now - peer->refused_log_ms < 1000 && peer->refused_log_ms != 0)
        return;
    peer->refused_log_ms = now;
    log_warning("peer %s: dropped a message on its link: %s (%" PRIu64 " so far)", peer->name,
                auth_result_name(r), *count);
}

/* ---------------------------------------------------------------- sealed messages */

/*
 * The link of generation gen to seal with: ours or theirs while up, or the
 * last one retired in either direction (its keys answer heartbeats about
 * it). With dir >= 0, the one that opens envelopes sealed in direction dir:
 * a daemon's link to itself is ours and theirs at once, under one
 * generation, and the envelope's direction says which end it is for.
 */
static struct auth_link *peer_link_dir(struct peer *peer, uint64_t gen, int dir, bool *live_p)
{
    struct { struct auth_link *link; bool valid, live; } links[] = {
        { &peer->out, peer->state == PEER_UP, true },
        { &peer->in, peer->in_up, true },
        { &peer->out_old, peer->out_old_valid, false },
        { &peer->in_old, peer->in_old_valid, false },
    };

    if (gen == 0)
        return NULL;
    for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
        if (!links[i].valid || links[i].link->tags.gen != gen ||
            (dir >= 0 && (links[i].link->send_dir ^ 1) != dir))
            continue;
        if (live_p != NULL)
            *live_p = links[i].live;
        return links[i].link;
    }
    return NULL;
}

static struct auth_link *peer_link(struct peer *peer, uint64_t gen, bool *live_p)
{
    return peer_link_dir(peer, gen, -1, live_p);
}

/* The link that opens the envelope in buf, of generation gen. */
static struct auth_link *peer_link_opening(struct peer *peer, uint64_t gen, const uint8_t *buf,
                                           size_t length, bool *live_p)
{
    struct auth_header h;
    if (auth_peek(buf, length, &h) != 0)
        return peer_link(peer, gen, live_p);
    return peer_link_dir(peer, gen, h.dir, live_p);
}

bool peer_is_self(const struct peer *peer)
{
    return peer->daemon_id == peer->d->daemon_id && strcmp(peer->name, peer->d->cfg.name) == 0;
}

bool peer_link_live(const struct peer *peer, uint64_t gen)
{
    return gen != 0 && ((peer->state == PEER_UP && peer->out.tags.gen == gen) ||
                        (peer->in_up && peer->in.tags.gen == gen));
}

/* Seal an envelope whose payload is in place (buf has the envelope's room) and send it. */
static int peer_send_sealed(struct peer *peer, struct auth_link *link, uint64_t tag, uint8_t *buf,
                            size_t payload_length)
{
    if (peer->ep == NULL || auth_link_seal(link, buf, payload_length) != 0) {
        free(buf);
        return -1;
    }
    return wire_send_owned(peer->ep, tag, buf, AUTH_OVERHEAD + payload_length);
}

int peer_send(struct peer *peer, uint64_t gen, uint64_t tag, const struct ProtobufCMessage *msg)
{
    struct auth_link *link = peer_link(peer, gen, NULL);
    size_t length = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf;

    if (link == NULL || peer->ep == NULL || (buf = malloc(AUTH_OVERHEAD + length)) == NULL)
        return -1;
    protobuf_c_message_pack(msg, buf + AUTH_HEADER_BYTES);
    return peer_send_sealed(peer, link, tag, buf, length);
}

int peer_send_packed(struct peer *peer, uint64_t gen, uint64_t tag, const uint8_t *payload,
                     size_t length)
{
    struct auth_link *link = peer_link(peer, gen, NULL);
    uint8_t *buf;

    if (link == NULL || peer->ep == NULL || (buf = malloc(AUTH_OVERHEAD + length)) == NULL)
        return -1;
    memcpy(buf + AUTH_HEADER_BYTES, payload, length);
    return peer_send_sealed(peer, link, tag, buf, length);
}

/* Open under link (which may be a pending handshake's; count then goes to no peer). */
static b10_status_t peer_open_with(struct b10d *d, struct peer *count, struct auth_link *link,
                                   const uint8_t *buf, size_t length, B10__Peer__Msg **msg_p)
{
    const uint8_t *payload;
    size_t payload_length;
    enum auth_result r = auth_link_open(link, buf, length, &payload, &payload_length);

    if (r != AUTH_OK) {
        if (count != NULL)
            peer_count_unopened(count, r);
        else
            peer_stranger(d, r == AUTH_REPLAYED ? &d->stats.messages_replayed
                                                : &d->stats.messages_unauthenticated,
                          "dropped a message for a handshake in progress: %s", auth_result_name(r));
        return B10_ERR_UNAUTHENTICATED;
    }
    B10__Peer__Msg *msg = b10__peer__msg__unpack(NULL, payload_length, payload);
    if (msg == NULL) {
        d->stats.peer_protocol_errors++;
        log_warning("peer %s: an authenticated message of %zu bytes does not decode",
                    count != NULL ? count->name : "?", payload_length);
        return B10_ERR_PEER_PROTOCOL;
    }
    *msg_p = msg;
    return B10_OK;
}

b10_status_t peer_open(struct peer *peer, uint64_t gen, const uint8_t *buf, size_t length,
                       B10__Peer__Msg **msg_p)
{
    struct auth_link *link = peer_link_opening(peer, gen, buf, length, NULL);

    if (link == NULL) {
        peer_count_unopened(peer, AUTH_MALFORMED);
        return B10_ERR_UNAUTHENTICATED;
    }
    return peer_open_with(peer->d, peer, link, buf, length, msg_p);
}

void peer_send_result(struct peer *peer, uint64_t gen, uint64_t id, b10_status_t status,
                      const char *detail)
{
    B10__Peer__Result result = B10__PEER__RESULT__INIT;
    B10__Peer__Msg msg = B10__PEER__MSG__INIT;
    struct auth_link *link = peer_link(peer, gen, NULL);
    char clipped[200];

    snprintf(clipped, sizeof(clipped), "%.199s", detail);
    result.xfer_id = id;
    result.status = (B10__Status)status;
    result.detail = clipped;
    msg.body_case = B10__PEER__MSG__BODY_RESULT;
    msg.result = &result;
    if (link == NULL ||
        peer_send(peer, gen, tags_derive(&link->tags, id, 0, TAG_KIND_RESULT), &msg.base) != 0)
        log_debug("peer %s: could not send a RESULT for %016" PRIx64, peer->name, id);
}

static int peer_ensure_ep(struct peer *peer)
{
    if (peer->ep != NULL)
        return 0;
    if (wire_ep_create(peer->d->wire, peer->address, peer->address_length, peer, &peer->ep) != 0)
        return -1;
    log_info("peer %s: endpoint open, transport %s, %u data lanes", peer->name,
             wire_ep_transports(peer->ep), wire_ep_lanes(peer->ep));
    return 0;
}

/* ---------------------------------------------------------------- retiring links, failing work */

/* Fail every transfer that waits for the outbound link. */
static void peer_fail_waiting(struct peer *peer, b10_status_t status, const char *detail)
{
    /* From the head each time: failing a READ fails its write-back too, maybe the next node. */
    while (!list_empty(&peer->waiting)) {
        struct link_user *u = list_entry(peer->waiting.next, struct link_user, node);
        u->ops->lost(u, status, detail);
    }
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
        struct link_user *u = list_entry(pos, struct link_user, node);
        if (gen == 0 || (!u->unsent && u->link->gen == gen)) {
            u->ops->lost(u, status, detail);
            goto again;
        }
    }
    list_for_each_safe(pos, tmp, &peer->xfers) {
        struct link_user *u = list_entry(pos, struct link_user, node);
        if (gen == 0 || u->link->gen == gen) {
            u->ops->lost(u, status, detail);
            goto again;
        }
    }
}

static void peer_retire_out(struct peer *peer, b10_status_t why)
{
    struct b10d *d = peer->d;

    if (peer->state == PEER_DOWN)
        return;
    uv_timer_stop(&peer->connect_timer);
    if (peer->ack != NULL)
        peer_drop_ack(peer);   /* the peer stays while its receive is out (acks_out) */
    if (peer->state == PEER_CONNECTING) {
        tags_quarantine(d->tags, peer->ack_tag, d->now_ms(d) + d->cfg.quarantine_ttl_ms);
    } else {
        peer->out_old = peer->out;
        peer->out_old_valid = true;
    }
    quarantine_add(d->quarantine, QUARANTINE_GENERATION, peer->out.tags.gen, 0, why, 0,
                   peer->daemon_id, NULL, NULL);
    peer->state = PEER_DOWN;
}

static void peer_retire_in(struct peer *peer, b10_status_t why)
{
    struct b10d *d = peer->d;

    if (!peer->in_up)
        return;
    tags_quarantine(d->tags, peer->in_control_tag, d->now_ms(d) + d->cfg.quarantine_ttl_ms);
    quarantine_add(d->quarantine, QUARANTINE_GENERATION, peer->in.tags.gen, 0, why, 0,
                   peer->daemon_id, NULL, NULL);
    peer->in_old = peer->in;
    peer->in_old_valid = true;
    peer->in_up = false;
}

/* Retire both links and fail everything with the peer; close_ep: the endpoint too. */
static void peer_give_up(struct peer *peer, b10_status_t status, const char *detail, bool close_ep)
{
    if (peer->state == PEER_UP || peer->in_up)
        peer->d->stats.peers_lost++;
    log_warning("peer %s: lost (%s): %s", peer->name, b10_status_name(status), detail);
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

/* ---------------------------------------------------------------- pending handshakes */

static void peer_pending_free(struct peer_pending *p)
{
    if (p->ep != NULL)
        wire_ep_close(p->ep);
    list_remove(&p->node);
    p->d->npending--;
    free(p->address);
    free(p);
}

/* The one handshake answered for a sender boot and not yet confirmed (peer_on_hello keeps one), or NULL. */
static struct peer_pending *peer_pending_of(struct b10d *d, uint64_t daemon_id)
{
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &d->pending) {
        struct peer_pending *p = list_entry(pos, struct peer_pending, node);
        if (p->daemon_id == daemon_id)
            return p;
    }
    return NULL;
}

static struct peer_pending *peer_pending_by_tag(struct b10d *d, uint64_t tag)
{
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &d->pending) {
        struct peer_pending *p = list_entry(pos, struct peer_pending, node);
        if (!p->refused && p->control_tag == tag)
            return p;
    }
    return NULL;
}

static struct peer_pending *peer_pending_by_user(struct b10d *d, const void *user)
{
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &d->pending) {
        struct peer_pending *p = list_entry(pos, struct peer_pending, node);
        if (p == user)
            return p;
    }
    return NULL;
}

/*
 * A message opened under a pending handshake's keys: the opener was fresh.
 * Its link joins the peer of its name (made, or moved on to this boot of
 * it), and the pending entry is freed. NULL when there is no room.
 */
static struct peer *peer_adopt(struct peer_pending *pend)
{
    struct b10d *d = pend->d;
    struct peer *peer = peer_find_name(d, pend->name);
    b10_status_t status = B10_OK;

    if (peer != NULL && peer->daemon_id != pend->daemon_id)
        status = peer_replace(peer, pend->daemon_id, pend->incarnation, pend->address,
                              pend->address_length);
    else if (peer == NULL)
        status = peer_new(d, pend->name, pend->daemon_id, pend->incarnation, pend->address,
                          pend->address_length, &peer);
    if (status != B10_OK) {
        log_warning("peer %s: its inbound link is dropped: %s", pend->name,
                    status == B10_ERR_TOO_LARGE ? "no room for another peer (--max-peers)"
                                                : b10_status_str(status));
        peer_pending_free(pend);
        return NULL;
    }
    if (pend->ep != NULL) {
        if (peer->ep == NULL) {
            wire_ep_set_user(pend->ep, peer);
            peer->ep = pend->ep;
            log_info("peer %s: endpoint open, transport %s, %u data lanes", peer->name,
                     wire_ep_transports(peer->ep), wire_ep_lanes(peer->ep));
        } else {
            wire_ep_close(pend->ep);
        }
        pend->ep = NULL;
    }
    if (peer->in_up) {
        /* A new generation from the same daemon retires the old link and its transfers. */
        uint64_t old = peer->in.tags.gen;
        peer_retire_in(peer, B10_ERR_PEER_LOST);
        peer_fail_work(peer, old, B10_ERR_PEER_LOST,
                       "the sending daemon reconnected with a new generation");
    }
    int rc = tags_register(d->tags, pend->control_tag, peer);
    if (rc != 0) {
        log_warning("peer %s: inbound link's control tag %016" PRIx64 ": %s", peer->name,
                    pend->control_tag, tags_strerror(rc));
        peer_pending_free(pend);
        return NULL;
    }
    peer->in = pend->link;
    peer->in_control_tag = pend->control_tag;
    peer->in_up = true;
    if (pend->gen > peer->hello_gen_seen)
        peer->hello_gen_seen = pend->gen;
    peer->counters.links++;
    d->stats.links_up++;
    peer_heard(peer);
    log_info("peer %s: inbound link, generation %016" PRIx64, peer->name, peer->in.tags.gen);
    peer_pending_free(pend);
    return peer;
}

/* ---------------------------------------------------------------- the handshake: opening */

static void peer_on_connect_timeout(uv_timer_t *timer)
{
    struct peer *peer = timer->data;
    char detail[160];

    snprintf(detail, sizeof(detail), "remote daemon %s did not answer HELLO within %u ms (does it "
             "hold this cluster's key?)", peer->name, peer->d->cfg.connect_timeout_ms);
    peer_lost(peer, B10_ERR_PEER_UNREACHABLE, detail);
}

/*
 * One handshake's HELLO_ACK receive and its buffer. Each attempt has its own:
 * a receive of an attempt given up may still complete (cancelled, or with
 * what raced the cancel) after the next attempt posted, and must neither
 * write into the next one's buffer nor be taken for its answer.
 */
struct peer_ack {
    struct peer *peer;
    uint8_t buf[HELLO_ACK_MAX_BYTES];
};

static int peer_post_ack(struct peer *peer)
{
    if (wire_recv(peer->d->wire, peer->ack_tag, peer->ack->buf, sizeof(peer->ack->buf), NULL,
                  peer_on_hello_ack, peer->ack, &peer->ack_op) != 0)
        return -1;
    peer->acks_out++;
    return 0;
}

/* The attempt's receive is done with: its buffer goes (a later completion of it finds no peer->ack). */
static void peer_drop_ack(struct peer *peer)
{
    if (peer->ack_op != NULL)
        wire_cancel(peer->d->wire, peer->ack_op);
    else
        free(peer->ack);
    peer->ack = NULL;
}

/* The link is up at both ends once a message under its keys reached the other: say so now. */
static void peer_send_confirm(struct peer *peer)
{
    B10__Peer__Confirm confirm = B10__PEER__CONFIRM__INIT;
    B10__Peer__Msg msg = B10__PEER__MSG__INIT;

    confirm.gen = peer->out.tags.gen;
    msg.body_case = B10__PEER__MSG__BODY_CONFIRM;
    msg.confirm = &confirm;
    if (peer_send(peer, peer->out.tags.gen, tags_derive(&peer->out.tags, 0, 0, TAG_KIND_CONTROL),
                  &msg.base) != 0)
        log_debug("peer %s: could not send CONFIRM", peer->name);
}

static void peer_on_hello_ack(void *arg, b10_status_t status, size_t length)
{
    struct peer_ack *pa = arg;
    struct peer *peer = pa->peer;
    struct b10d *d = peer->d;
    struct auth_header hdr;
    struct hello_ack ack;
    const uint8_t *payload;
    size_t payload_length;
    char detail[256];

    peer->acks_out--;
    if (pa != peer->ack) {
        free(pa);   /* an attempt given up: whoever gave it up failed what waited */
        return;
    }
    peer->ack_op = NULL;
    if (status == B10_ERR_CANCELLED || peer->state != PEER_CONNECTING) {
        peer_drop_ack(peer);
        return;
    }
    if (status != B10_OK) {
        snprintf(detail, sizeof(detail), "HELLO_ACK failed: %s", b10_status_str(status));
        peer_lost(peer, status == B10_ERR_PEER_PROTOCOL ? status : B10_ERR_PEER_UNREACHABLE, detail);
        return;
    }
    /*
     * What is not the answer to our HELLO, from the daemon we asked, changes
     * nothing: dropped, counted, and the real answer still awaited. That
     * covers what does not open, and what a holder of the key sends that
     * answers another HELLO or comes from another daemon (one that saw our
     * HELLO go by could answer it, or reflect it to us, which we refuse).
     */
    enum auth_result r = auth_open(peer->out_key, AUTH_KIND_HELLO_ACK, pa->buf, length, &payload,
                                   &payload_length);
    b10_status_t decoded = B10_ERR_PEER_PROTOCOL;
    ack.identified = false;
    if (r == AUTH_OK && auth_peek(pa->buf, length, &hdr) == 0 && hdr.receiver_id == d->daemon_id)
        decoded = hello_decode_ack(payload, payload_length, &hdr, &ack, detail, sizeof(detail));
    bool ours = r == AUTH_OK && ack.identified &&
                ack.gen == peer->out.tags.gen &&
                auth_equal(ack.opener_nonce, peer->out_nonce, AUTH_NONCE_BYTES) &&
                ack.daemon_id == peer->daemon_id && strcmp(ack.name, peer->name) == 0;
    if (!ours) {
        if (r == AUTH_OK)
            log_warning("peer %s: dropping a HELLO_ACK that is not the answer to its HELLO%s%s",
                        peer->name, decoded != B10_OK ? ": " : "", decoded != B10_OK ? detail : "");
        peer_count_unopened(peer, r == AUTH_OK ? AUTH_MALFORMED : r);
        if (peer_post_ack(peer) != 0)
            peer_lost(peer, B10_ERR_PEER_UNREACHABLE, "cannot post the HELLO_ACK receive again");
        return;
    }
    peer_drop_ack(peer);
    if (decoded != B10_OK) {
        /* The daemon asked, answering our HELLO with what no daemon may say (its limits). */
        d->stats.peer_protocol_errors++;
        peer_lost(peer, B10_ERR_PEER_PROTOCOL, detail);
        return;
    }
    if (ack.status != B10_OK) {
        b10_status_t why = ack.status;
        snprintf(detail, sizeof(detail), "remote daemon refused the link: %.200s", ack.detail);
        if (b10_status_action(why) == B10_ACTION_NONE)
            why = B10_ERR_PEER_PROTOCOL;
        peer_lost(peer, why, detail);
        return;
    }
    if (ack.incarnation != peer->incarnation) {
        snprintf(detail, sizeof(detail), "HELLO_ACK from boot %" PRIu64 " of daemon %s, not boot %"
                 PRIu64 " that the descriptor names", ack.incarnation, peer->name, peer->incarnation);
        d->stats.peer_protocol_errors++;
        peer_lost(peer, B10_ERR_PEER_PROTOCOL, detail);
        return;
    }
    uv_timer_stop(&peer->connect_timer);
    tags_unregister(d->tags, peer->ack_tag);
    auth_link_derive(peer->out_key, d->daemon_id, peer->daemon_id, peer->out.tags.gen,
                     peer->out_nonce, ack.nonce, true, &peer->out);
    peer->max_chunk = ack.max_chunk;
    peer->max_control = ack.max_control;
    peer->max_pieces = ack.max_pieces;
    peer->state = PEER_UP;
    peer->counters.links++;
    d->stats.links_up++;
    peer_heard(peer);
    peer_send_confirm(peer);
    log_info("peer %s: link up, generation %016" PRIx64 ", transport %s", peer->name,
             peer->out.tags.gen, wire_ep_transports(peer->ep));

    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &peer->waiting) {
        struct link_user *u = list_entry(pos, struct link_user, node);
        list_remove(&u->node);
        list_insert_tail(&peer->xfers, &u->node);
        u->ops->up(u);
    }
    list_for_each_safe(pos, tmp, &peer->asks) {
        struct link_user *u = list_entry(pos, struct link_user, node);
        if (u->unsent)
            u->ops->up(u);
    }
}

/* Seal and send a handshake message (HELLO or HELLO_ACK) under key. */
static int peer_send_hello_msg(struct b10d *d, struct wire_ep *ep, const struct auth_key *key,
                               enum auth_kind kind, uint64_t receiver_id, uint64_t tag,
                               const B10__Peer__Msg *msg)
{
    size_t length = b10__peer__msg__get_packed_size(msg);
    uint8_t *buf = malloc(AUTH_OVERHEAD + length);

    if (ep == NULL || buf == NULL) {
        free(buf);
        return -1;
    }
    b10__peer__msg__pack(msg, buf + AUTH_HEADER_BYTES);
    auth_seal(key, kind, d->daemon_id, receiver_id, buf, length);
    return wire_send_owned(ep, tag, buf, AUTH_OVERHEAD + length);
}

/* Open the outbound link: a new generation and nonce, HELLO, then wait for HELLO_ACK. */
static b10_status_t peer_connect(struct peer *peer)
{
    struct b10d *d = peer->d;
    const struct auth_key *key = &d->keys.keys[0];
    struct tag_link ack;
    const void *addr;
    size_t addr_len;

    if (peer_ensure_ep(peer) != 0)
        return B10_ERR_PEER_UNREACHABLE;
    memset(&peer->out, 0, sizeof(peer->out));
    peer->out.tags.sender_id = d->daemon_id;
    peer->out.tags.receiver_id = peer->daemon_id;
    peer->out.tags.gen = ids_new_generation(&d->ids);
    peer->out_key = key;
    auth_random(peer->out_nonce, sizeof(peer->out_nonce));
    auth_ack_tags(key, d->daemon_id, peer->daemon_id, peer->out.tags.gen, peer->out_nonce, &ack);
    peer->ack_tag = tags_derive(&ack, 0, 0, TAG_KIND_HELLO_ACK);
    int rc = tags_register(d->tags, peer->ack_tag, peer);
    if (rc != 0) {
        log_warning("peer %s: HELLO_ACK tag: %s", peer->name, tags_strerror(rc));
        return tags_status(rc);
    }
    if ((peer->ack = calloc(1, sizeof(*peer->ack))) == NULL) {
        tags_unregister(d->tags, peer->ack_tag);
        return B10_ERR_NO_MEMORY;
    }
    peer->ack->peer = peer;
    if (peer_post_ack(peer) != 0) {
        peer_drop_ack(peer);
        tags_unregister(d->tags, peer->ack_tag);
        return B10_ERR_PEER_UNREACHABLE;
    }
    peer->state = PEER_CONNECTING;

    wire_address(d->wire, &addr, &addr_len);
    B10__Peer__Hello hello = B10__PEER__HELLO__INIT;
    hello.version = B10_PEER_PROTOCOL_VERSION;
    hello.daemon_id = d->daemon_id;
    hello.to_daemon_id = peer->daemon_id;
    hello.gen = peer->out.tags.gen;
    hello.nonce = (ProtobufCBinaryData){ sizeof(peer->out_nonce), peer->out_nonce };
    hello.worker_address = (ProtobufCBinaryData){ addr_len, (uint8_t *)addr };
    hello.name = d->cfg.name;
    hello.incarnation = d->incarnation;
    B10__Peer__Msg msg = B10__PEER__MSG__INIT;
    msg.body_case = B10__PEER__MSG__BODY_HELLO;
    msg.hello = &hello;
    if (peer_send_hello_msg(d, peer->ep, key, AUTH_KIND_HELLO, peer->daemon_id, TAG_HELLO, &msg) != 0) {
        peer_retire_out(peer, B10_ERR_PEER_UNREACHABLE);
        return B10_ERR_PEER_UNREACHABLE;
    }
    uv_timer_start(&peer->connect_timer, peer_on_connect_timeout, d->cfg.connect_timeout_ms, 0);
    log_debug("peer %s: HELLO sent, generation %016" PRIx64 ", key %016" PRIx64, peer->name,
              peer->out.tags.gen, key->id);
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

b10_status_t peer_use(struct peer *peer, struct link_user *u)
{
    b10_status_t status = peer_ensure_link(peer);
    if (status == B10_OK)
        list_insert_tail(&peer->xfers, &u->node);
    else if (status == B10_IN_PROGRESS)
        list_insert_tail(&peer->waiting, &u->node);
    return status;
}

/* ---------------------------------------------------------------- the handshake: answering */

/* HELLOs answered, all openers together: a token bucket of one second's worth. */
static bool peer_hello_budget(struct b10d *d)
{
    uint64_t now = d->now_ms(d);
    double rate = d->cfg.max_hellos_per_s;

    d->hello_tokens += (double)(now - d->hello_tokens_ms) * rate / 1000.0;
    if (d->hello_tokens > rate)
        d->hello_tokens = rate;
    d->hello_tokens_ms = now;
    if (d->hello_tokens < 1.0)
        return false;
    d->hello_tokens -= 1.0;
    return true;
}

/* Answer a HELLO on ep: acceptance (nonce is ours for the link) or a refusal (nonce NULL). */
static void peer_send_ack(struct b10d *d, struct wire_ep *ep, const struct auth_key *key,
                          const struct hello *h, const uint8_t *nonce, b10_status_t status,
                          const char *detail)
{
    B10__Peer__HelloAck ack = B10__PEER__HELLO_ACK__INIT;
    B10__Peer__Msg msg = B10__PEER__MSG__INIT;
    struct tag_link tags;

    ack.version = B10_PEER_PROTOCOL_VERSION;
    ack.daemon_id = d->daemon_id;
    ack.gen = h->gen;
    ack.status = (B10__Status)status;
    ack.detail = (char *)detail;
    ack.opener_nonce = (ProtobufCBinaryData){ AUTH_NONCE_BYTES, (uint8_t *)h->nonce };
    ack.name = d->cfg.name;
    ack.incarnation = d->incarnation;
    if (nonce != NULL) {
        ack.nonce = (ProtobufCBinaryData){ AUTH_NONCE_BYTES, (uint8_t *)nonce };
        ack.max_chunk_bytes = staging_view_bytes(d->staging);
        ack.max_control_bytes = d->cfg.max_control_bytes;
        ack.max_pieces = d->cfg.max_control_bytes / 16;
    }
    msg.body_case = B10__PEER__MSG__BODY_HELLO_ACK;
    msg.hello_ack = &ack;
    auth_ack_tags(key, h->daemon_id, d->daemon_id, h->gen, h->nonce, &tags);
    if (peer_send_hello_msg(d, ep, key, AUTH_KIND_HELLO_ACK, h->daemon_id,
                            tags_derive(&tags, 0, 0, TAG_KIND_HELLO_ACK), &msg) != 0)
        log_warning("peer %s: could not send HELLO_ACK", h->name);
}

/* Why a HELLO that authenticated is still refused, or NULL. */
static const char *peer_hello_refusal(struct b10d *d, const struct hello *h, const struct peer *known,
                                      b10_status_t *status_p, char *detail, size_t detail_len)
{
    if (h->incarnation > peer_incarnation_bound(d)) {
        *status_p = B10_ERR_PEER_PROTOCOL;
        snprintf(detail, detail_len, "its boot %" PRIu64 " lies more than a day ahead of this "
                 "daemon's clock", h->incarnation);
        return detail;
    }
    if (strcmp(h->name, d->cfg.name) == 0 && h->daemon_id != d->daemon_id) {
        *status_p = B10_ERR_PEER_PROTOCOL;
        snprintf(detail, detail_len, "daemon %016" PRIx64 " is named '%s' as this one is: every "
                 "node's b10d needs a name of its own (--name)", h->daemon_id, h->name);
        return detail;
    }
    if (known == NULL && d->npeers >= d->cfg.max_peers) {
        struct list *pos, *tmp;
        bool room = false;
        list_for_each_safe(pos, tmp, &d->peers)
            room |= !peer_in_use(list_entry(pos, struct peer, node));
        if (!room) {
            *status_p = B10_ERR_TOO_LARGE;
            snprintf(detail, detail_len, "no room for another peer (--max-peers %u)", d->cfg.max_peers);
            return detail;
        }
    }
    if (known != NULL && known->daemon_id != h->daemon_id && h->incarnation < known->incarnation &&
        peer_has_link(known)) {
        *status_p = B10_ERR_PEER_LOST;
        snprintf(detail, detail_len, "a later boot of daemon %s is linked already", h->name);
        return detail;
    }
    return NULL;
}


/*
 * A HELLO: nothing of it is read before its envelope opened under a key
 * this daemon holds; it must be for this boot of this daemon (a HELLO
 * recorded on its way elsewhere, or reflected back to its opener, is not),
 * and newer than any link its opener's boot opened here or has pending:
 * generations only grow within a boot, so a replay, however old, is
 * dropped before it costs the HELLO budget, an endpoint or a slot. Only
 * then is an endpoint made to its address, to answer. The link it asks for
 * waits as pending (above).
 */
static void peer_on_hello(struct b10d *d, const uint8_t *buf, size_t length)
{
    struct auth_header hdr;
    const struct auth_key *key;
    const uint8_t *payload;
    size_t payload_length;
    B10__Peer__Msg *msg = NULL;
    struct hello h;
    char detail[256];

    if (auth_peek(buf, length, &hdr) != 0 || hdr.kind != AUTH_KIND_HELLO) {
        peer_stranger(d, &d->stats.hellos_unauthenticated, "dropping a HELLO that is no envelope");
        return;
    }
    if ((key = auth_keyring_find(&d->keys, hdr.key_id)) == NULL) {
        peer_stranger(d, &d->stats.hellos_unauthenticated,
                      "dropping a HELLO from %016" PRIx64 " under key %016" PRIx64 ", which this "
                      "daemon does not hold%s", hdr.sender_id, hdr.key_id,
                      d->keys.keys[0].kind == AUTH_KEY_LOCAL ? " (it has no --cluster-key)" : "");
        return;
    }
    if (auth_open(key, AUTH_KIND_HELLO, buf, length, &payload, &payload_length) != AUTH_OK) {
        peer_stranger(d, &d->stats.hellos_unauthenticated, "dropping a HELLO from %016" PRIx64
                      " that does not authenticate under key %016" PRIx64, hdr.sender_id, key->id);
        return;
    }
    if (hdr.receiver_id != d->daemon_id) {
        peer_stranger(d, &d->stats.hellos_refused, "dropping a HELLO from %016" PRIx64 " for daemon "
                      "%016" PRIx64 ": not this boot (a stale descriptor, or a HELLO sent elsewhere "
                      "and replayed here)", hdr.sender_id, hdr.receiver_id);
        return;
    }
    if (auth_seen_check(d->seen, buf, length)) {
        peer_stranger(d, &d->stats.hellos_replayed, "dropping a replayed HELLO from %016" PRIx64,
                      hdr.sender_id);
        return;
    }
    if (hello_decode(payload, payload_length, &hdr, &msg, &h, detail, sizeof(detail)) != B10_OK) {
        d->stats.peer_protocol_errors++;
        peer_stranger(d, &d->stats.hellos_refused, "dropping a HELLO from %016" PRIx64 ": %s",
                      hdr.sender_id, detail);
        return;
    }
    struct peer *of_boot = peer_find(d, h.daemon_id);
    struct peer_pending *earlier = peer_pending_of(d, h.daemon_id);
    if ((of_boot != NULL && h.gen <= of_boot->hello_gen_seen) || (earlier != NULL && h.gen <= earlier->gen)) {
        peer_stranger(d, &d->stats.hellos_replayed, "dropping a HELLO from %s for generation %016"
                      PRIx64 ": not newer than its last (a replay)", h.name, h.gen);
        goto out;
    }
    /*
     * This daemon's own boot id opens a link here only in the HELLO this
     * daemon sent itself, whose nonce never left the process: a key holder
     * that claims it is refused, so a message on the link to itself is a
     * local rank's (access.h), never a remote one posing as local.
     */
    if (h.daemon_id == d->daemon_id &&
        (of_boot == NULL || !peer_is_self(of_boot) || of_boot->state != PEER_CONNECTING ||
         h.gen != of_boot->out.tags.gen || !auth_equal(h.nonce, of_boot->out_nonce, AUTH_NONCE_BYTES))) {
        peer_stranger(d, &d->stats.hellos_refused, "dropping a HELLO that claims this daemon's own "
                      "boot %016" PRIx64 " but is not the one it sent itself", h.daemon_id);
        goto out;
    }
    if (!peer_hello_budget(d)) {
        peer_stranger(d, &d->stats.hellos_refused, "dropping a HELLO from %s: past "
                      "--max-hellos-per-s %u", h.name, d->cfg.max_hellos_per_s);
        goto out;
    }
    if (earlier != NULL)
        peer_pending_free(earlier);   /* its opener moved on to a newer generation */
    if (d->npending >= PEER_MAX_PENDING) {
        peer_stranger(d, &d->stats.hellos_refused, "dropping a HELLO from %s: %u handshakes are "
                      "waiting already", h.name, d->npending);
        goto out;
    }
    struct peer_pending *pend = calloc(1, sizeof(*pend));
    if (pend == NULL || (pend->address = malloc(h.address_length)) == NULL) {
        free(pend);
        log_err("no memory to answer a HELLO");
        goto out;
    }
    pend->d = d;
    snprintf(pend->name, sizeof(pend->name), "%s", h.name);
    pend->daemon_id = h.daemon_id;
    pend->incarnation = h.incarnation;
    pend->gen = h.gen;
    memcpy(pend->address, h.address, h.address_length);
    pend->address_length = h.address_length;
    pend->expires_ms = d->now_ms(d) + d->cfg.connect_timeout_ms;
    list_insert_tail(&d->pending, &pend->node);
    d->npending++;

    /* The endpoint to answer on: the known peer's of this boot, or one made for the answer. */
    struct peer *known = peer_find_name(d, h.name);
    struct wire_ep *ep = NULL;
    if (known != NULL && known->daemon_id == h.daemon_id && peer_ensure_ep(known) == 0)
        ep = known->ep;
    else if (wire_ep_create(d->wire, pend->address, pend->address_length, pend, &pend->ep) == 0)
        ep = pend->ep;
    if (ep == NULL) {
        log_warning("peer %s: no endpoint to answer its HELLO", h.name);
        peer_pending_free(pend);
        goto out;
    }
    b10_status_t status = B10_OK;
    const char *why = peer_hello_refusal(d, &h, known, &status, detail, sizeof(detail));
    if (why != NULL) {
        pend->refused = true;
        log_warning("peer %s: refusing its link: %s", h.name, why);
        peer_send_ack(d, ep, key, &h, NULL, status, why);
        goto out;
    }
    uint8_t nonce[AUTH_NONCE_BYTES];
    auth_random(nonce, sizeof(nonce));
    auth_link_derive(key, h.daemon_id, d->daemon_id, h.gen, h.nonce, nonce, false, &pend->link);
    pend->control_tag = tags_derive(&pend->link.tags, 0, 0, TAG_KIND_CONTROL);
    peer_send_ack(d, ep, key, &h, nonce, B10_OK, "");
    /* Answered: a replay of it, even once its handshake expired unconfirmed, is dropped. */
    if (of_boot != NULL && h.gen > of_boot->hello_gen_seen)
        of_boot->hello_gen_seen = h.gen;
    log_debug("peer %s: HELLO for generation %016" PRIx64 " answered, key %016" PRIx64, h.name,
              h.gen, key->id);
out:
    b10__peer__msg__free_unpacked(msg, NULL);
}

/* ---------------------------------------------------------------- liveness */

void peer_heard(struct peer *peer)
{
    peer->heard_ms = peer->d->now_ms(peer->d);
}

/* Work that needs the peer alive: transfers on its links, questions asked of it. */
static bool peer_busy(const struct peer *peer)
{
    return peer_has_link(peer) && (!list_empty(&peer->xfers) || !list_empty(&peer->asks));
}

static void peer_send_beat(struct peer *peer, uint64_t gen, bool reply, bool stale, uint64_t nonce)
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
static void peer_ping(struct peer *peer)
{
    peer->nonces[1] = peer->nonces[0];
    do
        auth_random(&peer->nonces[0], sizeof(peer->nonces[0]));
    while (peer->nonces[0] == 0);
    if (peer->state == PEER_UP)
        peer_send_beat(peer, peer->out.tags.gen, false, false, peer->nonces[0]);
    if (peer->in_up)
        peer_send_beat(peer, peer->in.tags.gen, false, false, peer->nonces[0]);
}

/*
 * The peer no longer holds a link of ours: it gave this daemon up while we
 * were stalled. Retire the stale link and fail what runs on it; a link the
 * peer opened since stays, and so does what runs on it. The endpoint stays
 * too: a peer gives up on silence without closing its own.
 */
static void peer_retire_stale(struct peer *peer, uint64_t gen)
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
static void peer_on_heartbeat(struct b10d *d, const uint8_t *buf, size_t length)
{
    struct auth_header hdr;
    B10__Peer__Msg *msg = NULL;
    bool live = false;

    if (auth_peek(buf, length, &hdr) != 0 || hdr.kind != AUTH_KIND_LINK ||
        hdr.receiver_id != d->daemon_id) {
        peer_stranger(d, &d->stats.messages_unauthenticated, "dropping a heartbeat that is no "
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
        struct peer_pending *pend = peer_pending_of(d, hdr.sender_id);
        if (pend == NULL || pend->refused || pend->gen != hdr.key_id) {
            d->stats.stale_messages++;
            log_debug("dropping a heartbeat about a link this daemon never had or forgot");
            return;
        }
        if (peer_open_with(d, NULL, &pend->link, buf, length, &msg) != B10_OK ||
            (peer = peer_adopt(pend)) == NULL)
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
        peer_send_beat(peer, hb->gen, true, !live, hb->nonce);
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
        peer_retire_stale(peer, hb->gen);
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
static void peer_after_stall(struct peer *peer, uint64_t stalled_ms)
{
    char detail[160];

    if (!peer_has_link(peer))
        return;
    if (peer_busy(peer)) {
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

/* ---------------------------------------------------------------- control-class messages */


static bool peer_refusal_budget(struct peer *peer)
{
    uint64_t now = peer->d->now_ms(peer->d);

    peer->refusal_tokens += (double)(now - peer->refusal_tokens_ms) * PEER_REFUSED_READS_PER_S / 1000.0;
    if (peer->refusal_tokens > PEER_REFUSED_READS_PER_S)
        peer->refusal_tokens = PEER_REFUSED_READS_PER_S;
    peer->refusal_tokens_ms = now;
    if (peer->refusal_tokens < 1.0)
        return false;
    peer->refusal_tokens -= 1.0;
    return true;
}

void *peer_take_control(void *arg, uint64_t tag, size_t length)
{
    struct b10d *d = arg;

    /*
     * HELLOs, heartbeats and the first messages of handshakes in progress
     * are charged to no peer (none is known yet, or one's name is only a
     * claim): they share one bound of bytes being received at once.
     */
    if (tag == TAG_HELLO || tag == TAG_HEARTBEAT) {
        if (length > (tag == TAG_HELLO ? HELLO_MAX_BYTES : PEER_BEAT_MAX_BYTES)) {
            peer_stranger(d, &d->stats.peer_protocol_errors, "dropping a %zu-byte %s unread",
                          length, tag == TAG_HELLO ? "HELLO" : "heartbeat");
            return NULL;
        }
        if (d->unbound_inflight + length > PEER_UNBOUND_INFLIGHT) {
            peer_stranger(d, &d->stats.hellos_refused, "dropping a %s unread: %" PRIu64 " bytes of "
                          "HELLOs and heartbeats are being received already",
                          tag == TAG_HELLO ? "HELLO" : "heartbeat", d->unbound_inflight);
            return NULL;
        }
        d->unbound_inflight += length;
        return &d->unbound_inflight;
    }
    /* A control-class tag in the registry is HELLO's, HEARTBEAT's or a peer's control tag. */
    struct peer *peer = tags_lookup(d->tags, tag);
    if (peer != NULL && (void *)peer != (void *)d && peer->in_up && peer->in_control_tag == tag) {
        char why[128];
        if (length > d->cfg.max_control_bytes) {
            snprintf(why, sizeof(why), "%zu bytes exceed --max-control-bytes %" PRIu64, length,
                     d->cfg.max_control_bytes);
            peer_refused(peer, "a control message (dropped unread)", why);
            return NULL;
        }
        /*
         * Past its share a peer's control messages are not even read: those
         * being received fill it, or with the CONTROLs it holds here they
         * would (admission could only refuse it, after its receive, MAC and
         * decode). A few a second are read all the same and refused
         * B10_ERR_BUSY, so that a busy but honest sender learns why at once;
         * a flood of them costs little more than the UCX truncations.
         */
        bool over = peer->control_held + peer->control_inflight + length > d->cfg.max_peer_control;
        if (peer->control_inflight + length > d->cfg.max_peer_control ||
            (over && !peer_refusal_budget(peer))) {
            snprintf(why, sizeof(why), "%" PRIu64 " bytes of its control messages are being "
                     "received and %" PRIu64 " held (--max-peer-control %" PRIu64 ")",
                     peer->control_inflight, peer->control_held, d->cfg.max_peer_control);
            peer_refused(peer, "a control message (dropped unread)", why);
            return NULL;
        }
        peer->control_inflight += length;
        return peer;
    }
    if (peer_pending_by_tag(d, tag) != NULL && length <= d->cfg.max_control_bytes &&
        d->unbound_inflight + length <= PEER_UNBOUND_INFLIGHT + d->cfg.max_control_bytes) {
        d->unbound_inflight += length;
        return &d->unbound_inflight;
    }
    peer_stale(d, &d->stats.stale_messages, "dropping a %zu-byte control message on a tag of no "
               "live link", length);
    return NULL;
}

/* On a link's control tag: CONTROL, READ, CHECK, NOTIFY, CONFIRM, under the link's keys. */
static void peer_on_link_control(struct b10d *d, uint64_t tag, const uint8_t *buf, size_t length)
{
    B10__Peer__Msg *msg = NULL;
    struct peer *peer = tags_lookup(d->tags, tag);

    if (peer != NULL && (void *)peer != (void *)d && peer->in_up && peer->in_control_tag == tag) {
        if (peer_open_with(d, peer, &peer->in, buf, length, &msg) != B10_OK)
            return;
    } else {
        struct peer_pending *pend = peer_pending_by_tag(d, tag);
        if (pend == NULL) {
            peer_stale(d, &d->stats.stale_messages, "dropping a control message on a tag of no live link");
            return;
        }
        if (peer_open_with(d, NULL, &pend->link, buf, length, &msg) != B10_OK ||
            (peer = peer_adopt(pend)) == NULL)
            goto out;
    }
    peer_heard(peer);
    switch (msg->body_case) {
    case B10__PEER__MSG__BODY_CONTROL:
        d->peer_hooks->on_control(peer, msg->control, length);
        break;
    case B10__PEER__MSG__BODY_READ:
        d->peer_hooks->on_read(peer, msg->read, length);
        break;
    case B10__PEER__MSG__BODY_CHECK:
        d->peer_hooks->on_check(peer, msg->check);
        break;
    case B10__PEER__MSG__BODY_NOTIFY:
        d->peer_hooks->on_notify(peer, msg->notify);
        break;
    case B10__PEER__MSG__BODY_CONFIRM:
        break;   /* it opened: the link is up, which is all it says */
    default:
        d->stats.peer_protocol_errors++;
        log_warning("peer %s: unexpected message kind %d on the control tag", peer->name,
                    (int)msg->body_case);
        break;
    }
out:
    if (msg != NULL)
        b10__peer__msg__free_unpacked(msg, NULL);
}

void peer_on_control(void *arg, void *cookie, uint64_t tag, void *buf, size_t length)
{
    struct b10d *d = arg;

    if (cookie == (void *)&d->unbound_inflight) {
        d->unbound_inflight -= length;
    } else if (cookie != NULL && cookie != (void *)d) {
        struct peer *charged = cookie;
        charged->control_inflight -= length;
    }
    if (buf == NULL)
        return;   /* the receive failed: only the charge to give back */
    if (tag == TAG_HELLO)
        peer_on_hello(d, buf, length);
    else if (tag == TAG_HEARTBEAT)
        peer_on_heartbeat(d, buf, length);
    else
        peer_on_link_control(d, tag, buf, length);
    free(buf);
}

void peer_on_ep_error(void *arg, void *ep_user, b10_status_t status)
{
    struct b10d *d = arg;
    struct peer_pending *pend = peer_pending_by_user(d, ep_user);

    if (pend != NULL) {
        /* The endpoint made to answer a HELLO failed: that opener is gone. */
        log_info("peer %s: the endpoint to answer its HELLO failed", pend->name);
        peer_pending_free(pend);
        return;
    }
    peer_lost(ep_user, B10_ERR_PEER_LOST, "the endpoint to the remote daemon failed");
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
    peer_stale(d, late ? &d->stats.late_completions : &d->stats.stale_messages,
               "dropping a stray %zu-byte message on %s tag %016" PRIx64, length,
               late ? "the quarantined" : "an unknown", tag);
    return true;
}

/* ---------------------------------------------------------------- start, sweep, stop */

static void peer_on_sweep(uv_timer_t *timer)
{
    struct b10d *d = timer->data;
    uint64_t now = d->now_ms(d);
    struct list *pos, *tmp;

    list_for_each_safe(pos, tmp, &d->pending) {
        struct peer_pending *p = list_entry(pos, struct peer_pending, node);
        if (p->expires_ms <= now) {
            if (!p->refused)
                log_info("peer %s: its handshake for generation %016" PRIx64 " was never confirmed "
                         "(a replayed HELLO, or an opener that left)", p->name, p->gen);
            peer_pending_free(p);
        }
    }
    list_for_each_safe(pos, tmp, &d->peers) {
        struct peer *p = list_entry(pos, struct peer, node);
        if (peer_in_use(p))
            p->idle_since_ms = now;
        else if (now - p->idle_since_ms >= d->cfg.peer_idle_ms)
            peer_evict(p);
    }
}

/* The keys: --cluster-key, else systemd's credential, else the default file, else none. */
static int peer_load_keys(struct b10d *d)
{
    struct config *cfg = &d->cfg;
    struct auth_key key;
    char path[512], err[512];
    const char *creds = getenv("CREDENTIALS_DIRECTORY");
    bool named = cfg->cluster_key[0] != '\0';

    if (named)
        snprintf(path, sizeof(path), "%s", cfg->cluster_key);
    else if (creds != NULL && creds[0] != '\0')
        snprintf(path, sizeof(path), "%s/%s", creds, CONFIG_KEY_CREDENTIAL);
    else
        snprintf(path, sizeof(path), "%s", CONFIG_KEY_FILE_DEFAULT);
    if (named || access(path, F_OK) == 0) {
        if (auth_key_load(path, &key, err, sizeof(err)) != 0) {
            log_err("%s", err);
            return -1;
        }
        auth_keyring_add(&d->keys, &key);
        log_info("cluster key %016" PRIx64 " from %s", key.id, path);
    }
    if (cfg->cluster_key_next[0] != '\0') {
        if (auth_key_load(cfg->cluster_key_next, &key, err, sizeof(err)) != 0) {
            log_err("%s", err);
            return -1;
        }
        if (d->keys.count == 0) {
            log_err("--cluster-key-next needs a --cluster-key beside it");
            return -1;
        }
        if (auth_keyring_add(&d->keys, &key) != 0) {
            log_err("--cluster-key-next holds the same key as the cluster key");
            return -1;
        }
        log_info("next cluster key %016" PRIx64 " from %s, accepted too", key.id, cfg->cluster_key_next);
    }
    if (cfg->insecure) {
        auth_key_insecure(&key);
        auth_keyring_add(&d->keys, &key);
        log_warning("--insecure: daemons that prove nothing are accepted; anyone who reaches this "
                    "daemon over the network can read and write every rank's registered memory");
    }
    if (d->keys.count == 0) {
        auth_key_local(&key);
        auth_keyring_add(&d->keys, &key);
        log_warning("no cluster key (--cluster-key, or %s): remote daemons are refused, only this "
                    "node's ranks are served", CONFIG_KEY_FILE_DEFAULT);
    }
    auth_key_wipe(&key);
    if (auth_keyring_lock(&d->keys) != 0)
        log_notice("the keys could not be locked in memory (RLIMIT_MEMLOCK): they may reach swap");
    return 0;
}

int peer_start(struct b10d *d, const struct peer_hooks *hooks)
{
    d->peer_hooks = hooks;
    list_init(&d->pending);
    if (auth_init() != 0) {
        log_err("libsodium could not start");
        return -1;
    }
    if (peer_load_keys(d) != 0)
        return -1;
    if ((d->seen = calloc(1, sizeof(*d->seen))) == NULL)
        return -1;
    d->hello_tokens = d->cfg.max_hellos_per_s;
    d->hello_tokens_ms = d->now_ms(d);
    uint64_t every = d->cfg.connect_timeout_ms / 4;
    every = every < 50 ? 50 : every > 1000 ? 1000 : every;
    uv_timer_init(d->loop, &d->peer_sweep);
    d->peer_sweep.data = d;
    uv_timer_start(&d->peer_sweep, peer_on_sweep, every, every);
    uv_unref((uv_handle_t *)&d->peer_sweep);
    d->peer_sweep_on = true;
    return 0;
}

void peer_stop(struct b10d *d)
{
    if (d->peer_sweep_on) {
        d->peer_sweep_on = false;
        uv_close((uv_handle_t *)&d->peer_sweep, NULL);
    }
}

void peer_close_all(struct b10d *d)
{
    struct list *pos, *tmp;

    if (d->pending.next != NULL)
        while (!list_empty(&d->pending))
            peer_pending_free(list_entry(d->pending.next, struct peer_pending, node));
    list_for_each_safe(pos, tmp, &d->peers) {
        struct peer *p = list_entry(pos, struct peer, node);
        uv_timer_stop(&p->connect_timer);
        if (p->ack != NULL)
            peer_drop_ack(p);
        if (p->ep != NULL) {
            wire_ep_close(p->ep);
            p->ep = NULL;
        }
    }
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
    free(d->seen);
    d->seen = NULL;
}
