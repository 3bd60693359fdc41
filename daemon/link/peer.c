/* peer.c — the peer table and its links (peer.h; the link rooms: peer-int.h). */
#include "peer-int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "door.h"
#include "quarantine.h"
#include "wire.h"

/* ---------------------------------------------------------------- the table */

struct peer *peer_find(struct b10d *d, uint64_t daemon_id)
{
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &d->peers) {
        struct peer *p = list_entry(pos, struct peer, node);
        if (p->daemon_id == daemon_id)
            return p;
    }
    return NULL;
}

struct peer *peer_find_name(struct b10d *d, const char *name)
{
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &d->peers) {
        struct peer *p = list_entry(pos, struct peer, node);
        if (strcmp(p->name, name) == 0)
            return p;
    }
    return NULL;
}

uint64_t peer_incarnation_bound(const struct b10d *d)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return ((uint64_t)now.tv_sec + 86400) * 1000000000u;
}

bool peer_in_use(const struct peer *p)
{
    return p->state != PEER_DOWN || p->in_up || p->refs > 0 || p->acks_out > 0 ||
           !list_empty(&p->xfers) || !list_empty(&p->waiting) || !list_empty(&p->asks) ||
           p->quarantined > 0 || p->control_inflight > 0 || p->control_held > 0 || p->holds > 0;
}

bool peer_has_link(const struct peer *peer)
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

void peer_evict_idle(struct b10d *d, uint64_t now)
{
    struct list *pos, *tmp;

    list_for_each_safe(pos, tmp, &d->peers) {
        struct peer *p = list_entry(pos, struct peer, node);
        if (peer_in_use(p))
            p->idle_since_ms = now;
        else if (now - p->idle_since_ms >= d->cfg.peer_idle_ms)
            peer_evict(p);
    }
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

b10_status_t peer_new(struct b10d *d, const char *name, uint64_t daemon_id,
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

b10_status_t peer_replace(struct peer *p, uint64_t daemon_id, uint64_t incarnation,
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
    /*
     * With node certificates a descriptor, sealed by the cluster key alone,
     * proves no node: it may not move a linked node's entry to another
     * boot and address (a key holder's descriptor naming node b would cut
     * b's links). Only a HELLO certified for the name does that; until
     * then the descriptor is taken for the boot linked, as an earlier one
     * is, and a real restart of the node shows when its link falls.
     */
    if (d->nodeid != NULL && peer_has_link(p)) {
        *peer_p = p;
        d->stats.descriptors_resolved++;
        log_info("peer %s: a descriptor of boot %016" PRIx64 " taken for the certified boot %016"
                 PRIx64 " linked now", p->name, desc->daemon_id, p->daemon_id);
        return B10_OK;
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

void peer_count_unopened(struct peer *peer, enum auth_result r)
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

void peer_say_dropped(struct b10d *d, int level, uint64_t *said_ms, uint64_t *counter,
                      const char *fmt, va_list ap)
{
    uint64_t now = d->now_ms(d);
    char text[256];

    (*counter)++;
    if (level > log_max_level || (now - *said_ms < 1000 && *said_ms != 0))
        return;
    *said_ms = now;
    vsnprintf(text, sizeof(text), fmt, ap);
    log_at(level, "%s (%" PRIu64 " so far)", text, *counter);
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

struct auth_link *peer_link(struct peer *peer, uint64_t gen, bool *live_p)
{
    return peer_link_dir(peer, gen, -1, live_p);
}

struct auth_link *peer_link_opening(struct peer *peer, uint64_t gen, const uint8_t *buf,
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
static b10_status_t peer_send_sealed(struct peer *peer, struct auth_link *link, uint64_t tag,
                                     uint8_t *buf, size_t payload_length)
{
    if (peer->ep == NULL) {
        free(buf);
        return B10_ERR_PEER_LOST;
    }
    b10_status_t st = auth_link_seal(link, buf, payload_length);
    if (st != B10_OK) {
        free(buf);
        return st;
    }
    return wire_send_owned(peer->ep, tag, buf, AUTH_OVERHEAD + payload_length);
}

b10_status_t peer_send(struct peer *peer, uint64_t gen, uint64_t tag,
                       const struct ProtobufCMessage *msg)
{
    struct auth_link *link = peer_link(peer, gen, NULL);
    size_t length = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf;

    if (link == NULL || peer->ep == NULL)
        return B10_ERR_PEER_LOST;
    if ((buf = malloc(AUTH_OVERHEAD + length)) == NULL)
        return B10_ERR_NO_MEMORY;
    protobuf_c_message_pack(msg, buf + AUTH_HEADER_BYTES);
    return peer_send_sealed(peer, link, tag, buf, length);
}

b10_status_t peer_send_packed(struct peer *peer, uint64_t gen, uint64_t tag,
                              const uint8_t *payload, size_t length)
{
    struct auth_link *link = peer_link(peer, gen, NULL);
    uint8_t *buf;

    if (link == NULL || peer->ep == NULL)
        return B10_ERR_PEER_LOST;
    if ((buf = malloc(AUTH_OVERHEAD + length)) == NULL)
        return B10_ERR_NO_MEMORY;
    memcpy(buf + AUTH_HEADER_BYTES, payload, length);
    return peer_send_sealed(peer, link, tag, buf, length);
}

b10_status_t peer_open_with(struct b10d *d, struct peer *count, struct auth_link *link,
                            const uint8_t *buf, size_t length, B10__Peer__Msg **msg_p)
{
    const uint8_t *payload;
    size_t payload_length;
    enum auth_result r = auth_link_open(link, buf, length, &payload, &payload_length);

    if (r != AUTH_OK) {
        if (count != NULL)
            peer_count_unopened(count, r);
        else
            peer_hello_stranger(d, r == AUTH_REPLAYED ? &d->stats.messages_replayed
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

b10_status_t peer_ensure_ep(struct peer *peer)
{
    if (peer->ep != NULL)
        return B10_OK;
    b10_status_t st = wire_ep_create(peer->d->wire, peer->address, peer->address_length, peer,
                                     &peer->ep);
    if (st != B10_OK)
        return st;
    log_info("peer %s: endpoint open, transport %s, %u data lanes", peer->name,
             wire_ep_transports(peer->ep), wire_ep_lanes(peer->ep));
    return B10_OK;
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
 * Fail the work on the peer's links of generation gen (0: all of it).
 * Collect, then call: the work to fail moves to a list of this walk's own
 * first, and only then is each told, from that list's head. A failure may
 * fail others with it (a READ takes its write-back, maybe the very next
 * node), and each leaves whatever list it is on: telling them while
 * walking the peer's lists would step from a node a hook took off (or
 * freed) and tell it twice; starting the walk over after each failure
 * holds, but costs a pass over the peer's work per failure.
 */
void peer_fail_work(struct peer *peer, uint64_t gen, b10_status_t status, const char *detail)
{
    struct list doomed, *pos, *tmp;

    list_init(&doomed);
    list_for_each_safe(pos, tmp, &peer->asks) {
        struct link_user *u = list_entry(pos, struct link_user, node);
        if (gen == 0 || (!u->unsent && u->link->gen == gen)) {
            list_remove(&u->node);
            list_insert_tail(&doomed, &u->node);
        }
    }
    list_for_each_safe(pos, tmp, &peer->xfers) {
        struct link_user *u = list_entry(pos, struct link_user, node);
        if (gen == 0 || u->link->gen == gen) {
            list_remove(&u->node);
            list_insert_tail(&doomed, &u->node);
        }
    }
    /* Off the list before its hook: what the hook does to the list cannot hold the loop. */
    while (!list_empty(&doomed)) {
        struct link_user *u = list_entry(doomed.next, struct link_user, node);
        list_remove(&u->node);
        u->ops->lost(u, status, detail);
    }
}

void peer_retire_out(struct peer *peer, b10_status_t why)
{
    struct b10d *d = peer->d;

    if (peer->state == PEER_DOWN)
        return;
    uv_timer_stop(&peer->connect_timer);
    if (peer->state == PEER_KNOCKING) {
        /* Nothing of a link yet: no generation or tag to quarantine. */
        door_knock_cancel(peer->knock);
        peer->knock = NULL;
        peer->state = PEER_DOWN;
        return;
    }
    if (peer->ack != NULL)
        peer_hello_drop_ack(peer);   /* the peer stays while its receive is out (acks_out) */
    if (peer->state == PEER_CONNECTING) {
        tags_quarantine(d->tags, peer->ack_tag, d->now_ms(d) + d->cfg.quarantine_ttl_ms,
                        peer->daemon_id);
    } else {
        peer->out_old = peer->out;
        peer->out_old_valid = true;
    }
    quarantine_add(d->quarantine, QUARANTINE_GENERATION, peer->out.tags.gen, 0, why, 0,
                   peer->daemon_id, NULL, NULL);
    peer->state = PEER_DOWN;
}

void peer_retire_in(struct peer *peer, b10_status_t why)
{
    struct b10d *d = peer->d;

    if (!peer->in_up)
        return;
    tags_quarantine(d->tags, peer->in_control_tag, d->now_ms(d) + d->cfg.quarantine_ttl_ms,
                    peer->daemon_id);
    quarantine_add(d->quarantine, QUARANTINE_GENERATION, peer->in.tags.gen, 0, why, 0,
                   peer->daemon_id, NULL, NULL);
    peer->in_old = peer->in;
    peer->in_old_valid = true;
    peer->in_up = false;
}

void peer_give_up(struct peer *peer, b10_status_t status, const char *detail, bool close_ep)
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

/* ---------------------------------------------------------------- using the outbound link */

b10_status_t peer_ensure_link(struct peer *peer)
{
    if (peer->state == PEER_UP)
        return B10_OK;
    if (peer->state == PEER_DOWN) {
        b10_status_t status = peer_hello_connect(peer);
        if (status != B10_OK)
            return status;
    }
    return B10_IN_PROGRESS;
}

const char *peer_link_why(struct peer *peer)
{
    return peer->state == PEER_KNOCKING ? door_knock_why(peer->knock) : "";
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


/* ---------------------------------------------------------------- start, stop */

b10_status_t peer_start(struct b10d *d, const struct peer_hooks *hooks)
{
    peer_dispatch_start(d, hooks);
    return peer_hello_start(d);
}

void peer_stop(struct b10d *d)
{
    peer_hello_stop(d);
    peer_dispatch_stop(d);
}

void peer_close_all(struct b10d *d)
{
    struct list *pos, *tmp;

    peer_hello_close(d);
    list_for_each_safe(pos, tmp, &d->peers) {
        struct peer *p = list_entry(pos, struct peer, node);
        uv_timer_stop(&p->connect_timer);
        if (p->state == PEER_KNOCKING) {
            door_knock_cancel(p->knock);
            p->knock = NULL;
            p->state = PEER_DOWN;
        }
        if (p->ack != NULL)
            peer_hello_drop_ack(p);
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
    peer_hello_free(d);
}
