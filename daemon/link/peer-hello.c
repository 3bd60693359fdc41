/*
 * peer-hello.c — the handshake (peer.h tells it; the link rooms: peer-int.h):
 * opening a link with HELLO, answering one with HELLO_ACK, the handshakes
 * answered and waiting for their confirmation, their sweep, the HELLO
 * budget and its refusals, and the keys it all goes under.
 */
#include "peer-int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "door.h"
#include "frame.h"
#include "knock.h"
#include "nodeid.h"
#include "staging.h"
#include "wire.h"

/* Handshakes answered and waiting for their confirmation, all openers together. */
#define PEER_MAX_PENDING 256
/*
 * Of those, one certified node's: a holder of one node's key who makes up
 * daemon ids has this many handshakes waiting at most, its newest, and the
 * other nodes' room stays theirs.
 */
#define PEER_PENDING_PER_NODE 4

static void peer_hello_on_ack(void *arg, b10_status_t status, size_t length);

/* ---------------------------------------------------------------- strangers */

void peer_hello_stranger(struct b10d *d, uint64_t *counter, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    peer_say_dropped(d, LOG_LEVEL_WARNING, &d->handshakes.stranger_log_ms, counter, fmt, ap);
    va_end(ap);
}

/* ---------------------------------------------------------------- pending handshakes */

void peer_hello_pending_free(struct peer_pending *p)
{
    if (p->ep != NULL)
        wire_ep_close(p->ep);
    list_remove(&p->node);
    p->d->handshakes.npending--;
    free(p->address);
    free(p);
}

/* peer_hello_on_hello keeps one a sender boot. */
struct peer_pending *peer_hello_pending_of(struct b10d *d, uint64_t daemon_id)
{
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &d->handshakes.pending) {
        struct peer_pending *p = list_entry(pos, struct peer_pending, node);
        if (p->daemon_id == daemon_id)
            return p;
    }
    return NULL;
}

struct peer_pending *peer_hello_pending_by_tag(struct b10d *d, uint64_t tag)
{
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &d->handshakes.pending) {
        struct peer_pending *p = list_entry(pos, struct peer_pending, node);
        if (!p->refused && p->control_tag == tag)
            return p;
    }
    return NULL;
}

struct peer_pending *peer_hello_pending_by_user(struct b10d *d, const void *user)
{
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &d->handshakes.pending) {
        struct peer_pending *p = list_entry(pos, struct peer_pending, node);
        if (p == user)
            return p;
    }
    return NULL;
}

struct peer *peer_hello_adopt(struct peer_pending *pend)
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
        peer_hello_pending_free(pend);
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
        peer_hello_pending_free(pend);
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
    peer_hello_pending_free(pend);
    return peer;
}

/* ---------------------------------------------------------------- node certificates */

static void peer_hello_say_expiry(struct b10d *d, const char *what)
{
    int64_t until = nodeid_not_after(d->nodeid);
    int64_t left = until - (int64_t)time(NULL);
    char when[64];
    struct tm tm;
    time_t t = (time_t)until;

    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&t, &tm));
    if (left < NODEID_WARN_S)
        log_warning("%s for %s expires %s, in %" PRId64 " hours: renew it (the files are read "
                    "again when they change)", what, nodeid_name(d->nodeid), when, left / 3600);
    else
        log_info("%s for %s, valid until %s", what, nodeid_name(d->nodeid), when);
}

/*
 * Before each handshake, and once a minute from the sweep: the certificate
 * files read again if they changed (rotation). A certificate close to its
 * end is warned of once a day, so that a daemon that opens no link hears
 * of it too.
 */
static void peer_hello_identity(struct b10d *d)
{
    struct peer_handshakes *hs = &d->handshakes;
    uint64_t now = d->now_ms(d);
    char why[512];

    if (d->nodeid == NULL)
        return;
    hs->identity_ms = now;
    int rc = nodeid_refresh(d->nodeid, why, sizeof(why));
    if (rc > 0) {
        peer_hello_say_expiry(d, "node certificate reloaded");
        hs->expiry_said_ms = now;
    } else if (rc < 0) {
        log_err("%s: keeping the node certificate in use", why);
    }
    if (nodeid_not_after(d->nodeid) - (int64_t)time(NULL) < NODEID_WARN_S &&
        now - hs->expiry_said_ms >= UINT64_C(86400000)) {
        peer_hello_say_expiry(d, "node certificate");
        hs->expiry_said_ms = now;
    }
}

/*
 * This node's proof for a handshake message: its chain into certs and its
 * signature of t into sig. B10_OK, or B10_ERR_INTERNAL when the key would
 * not sign (logged).
 */
static b10_status_t peer_hello_prove(struct b10d *d, const struct hello_transcript *t,
                                     ProtobufCBinaryData certs[NODEID_MAX_CERTS], size_t *ncerts_p,
                                     uint8_t sig[NODEID_MAX_SIG], size_t *sig_length_p)
{
    uint8_t transcript[HELLO_TRANSCRIPT_BYTES];
    struct nodeid_chain chain;

    hello_transcript(t, transcript);
    if (nodeid_sign(d->nodeid, transcript, sizeof(transcript), sig, sig_length_p) != B10_OK) {
        log_err("the node key would not sign a handshake");
        return B10_ERR_INTERNAL;
    }
    nodeid_chain_of(d->nodeid, &chain);
    for (unsigned i = 0; i < chain.count; i++)
        certs[i] = (ProtobufCBinaryData){ chain.length[i], (uint8_t *)chain.der[i] };
    *ncerts_p = chain.count;
    return B10_OK;
}

/*
 * Is the other end's proof good, where this daemon asks for one: its
 * chain reaches our anchors and names `name`, its key signed t. A daemon
 * with certificates refuses one without, and the other way round: a
 * certified HELLO asks for a certified answer this daemon cannot give.
 * NULL, or why in detail.
 */
static const char *peer_hello_check_proof(struct b10d *d, const struct hello_proof *proof,
                                          const char *name, const struct hello_transcript *t,
                                          char *detail, size_t detail_len)
{
    uint8_t transcript[HELLO_TRANSCRIPT_BYTES];

    if (d->nodeid == NULL && !proof->present)
        return NULL;
    if (d->nodeid == NULL) {
        snprintf(detail, detail_len, "daemon %s proves its name by a node certificate, and this "
                 "daemon has none to prove its own (--node-cert)", name);
        return detail;
    }
    if (!proof->present) {
        snprintf(detail, detail_len, "daemon %s has no node certificate, and this daemon accepts "
                 "only certified nodes (--node-cert)", name);
        return detail;
    }
    char why[400];
    hello_transcript(t, transcript);
    if (nodeid_verify(d->nodeid, &proof->chain, name, transcript, sizeof(transcript), proof->sig,
                      proof->sig_length, why, sizeof(why)) != B10_OK) {
        snprintf(detail, detail_len, "daemon %s's node certificate is refused: %s", name, why);
        return detail;
    }
    return NULL;
}

/* ---------------------------------------------------------------- the handshake: opening */

static void peer_hello_on_connect_timeout(uv_timer_t *timer)
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

static int peer_hello_post_ack(struct peer *peer)
{
    if (wire_recv(peer->d->wire, peer->ep, peer->ack_tag, peer->ack->buf, sizeof(peer->ack->buf),
                  NULL, peer_hello_on_ack, peer->ack, &peer->ack_op) != 0)
        return -1;
    peer->acks_out++;
    return 0;
}

/* The attempt's receive is done with: its buffer goes (a later completion of it finds no peer->ack). */
void peer_hello_drop_ack(struct peer *peer)
{
    if (peer->ack_op != NULL)
        wire_cancel(peer->d->wire, peer->ack_op);
    else
        free(peer->ack);
    peer->ack = NULL;
}

/* The link is up at both ends once a message under its keys reached the other: say so now. */
static void peer_hello_send_confirm(struct peer *peer)
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

/*
 * Is this the answer to our HELLO, from the daemon we asked? What is not
 * changes nothing: dropped, counted, and the real answer still awaited.
 * That covers what does not open, and what a holder of the key sends that
 * answers another HELLO or comes from another daemon (one that saw our
 * HELLO go by could answer it, or reflect it to us, which we refuse). An
 * answer of ours is in *ack; *decoded_p says whether all of it is what a
 * daemon may say (detail: why not).
 */
static bool peer_hello_ack_ours(struct peer *peer, const uint8_t *buf, size_t length,
                                struct hello_ack *ack, b10_status_t *decoded_p, char *detail,
                                size_t detail_len)
{
    struct b10d *d = peer->d;
    struct auth_header hdr;
    const uint8_t *payload;
    size_t payload_length;

    enum auth_result r = auth_open(peer->out_key, AUTH_KIND_HELLO_ACK, buf, length, &payload,
                                   &payload_length);
    b10_status_t decoded = B10_ERR_PEER_PROTOCOL;
    ack->identified = false;
    if (r == AUTH_OK && auth_peek(buf, length, &hdr) == 0 && hdr.receiver_id == d->daemon_id)
        decoded = hello_decode_ack(payload, payload_length, &hdr, ack, detail, detail_len);
    bool ours = r == AUTH_OK && ack->identified &&
                ack->gen == peer->out.tags.gen &&
                auth_equal(ack->opener_nonce, peer->out_nonce, AUTH_NONCE_BYTES) &&
                ack->daemon_id == peer->daemon_id && strcmp(ack->name, peer->name) == 0;
    if (!ours) {
        if (r == AUTH_OK)
            log_warning("peer %s: dropping a HELLO_ACK that is not the answer to its HELLO%s%s",
                        peer->name, decoded != B10_OK ? ": " : "", decoded != B10_OK ? detail : "");
        peer_count_unopened(peer, r == AUTH_OK ? AUTH_MALFORMED : r);
        return false;
    }
    *decoded_p = decoded;
    return true;
}

/*
 * Our answer, and still the end of this attempt: beyond what a daemon may
 * say, a refusal, from another boot than the descriptor names, or without
 * the proof of the name we asked for. The peer is lost with why, and false;
 * else true, and a certified link's X25519 secret is in shared.
 */
static bool peer_hello_ack_accepts(struct peer *peer, const struct hello_ack *ack,
                                   b10_status_t decoded, uint8_t shared[AUTH_KX_BYTES],
                                   char *detail, size_t detail_len)
{
    struct b10d *d = peer->d;

    if (decoded != B10_OK) {
        /* The daemon asked, answering our HELLO with what no daemon may say (its limits). */
        d->stats.peer_protocol_errors++;
        peer_lost(peer, B10_ERR_PEER_PROTOCOL, detail);
        return false;
    }
    if (ack->status != B10_OK) {
        b10_status_t why = ack->status;
        snprintf(detail, detail_len, "remote daemon refused the link: %.200s", ack->detail);
        if (b10_status_action(why) == B10_ACTION_NONE)
            why = B10_ERR_PEER_PROTOCOL;
        peer_lost(peer, why, detail);
        return false;
    }
    if (ack->incarnation != peer->incarnation) {
        snprintf(detail, detail_len, "HELLO_ACK from boot %" PRIu64 " of daemon %s, not boot %"
                 PRIu64 " that the descriptor names", ack->incarnation, peer->name, peer->incarnation);
        d->stats.peer_protocol_errors++;
        peer_lost(peer, B10_ERR_PEER_PROTOCOL, detail);
        return false;
    }
    /* Certified: the answer proves the name we asked for, and the X25519 secret joins the keys. */
    struct hello_transcript t = {
        .ack = true, .sender_id = ack->daemon_id, .receiver_id = d->daemon_id,
        .gen = peer->out.tags.gen, .incarnation = ack->incarnation, .name = ack->name,
        .opener_nonce = peer->out_nonce, .opener_kx = peer->out_kx, .nonce = ack->nonce,
        .kx = ack->proof.kx_public,
    };
    const char *unproven = peer_hello_check_proof(d, &ack->proof, peer->name, &t, detail,
                                                  detail_len);
    if (unproven == NULL && d->nodeid != NULL &&
        auth_kx_shared(peer->out_kx_secret, peer->out_kx, ack->proof.kx_public,
                       ack->proof.kx_public, shared) != B10_OK)
        unproven = "its HELLO_ACK's X25519 key is of small order";
    auth_wipe(peer->out_kx_secret, sizeof(peer->out_kx_secret));
    if (unproven != NULL) {
        d->stats.peer_protocol_errors++;
        log_warning("peer %s: refusing its HELLO_ACK: %s", peer->name, unproven);
        peer_lost(peer, B10_ERR_PERMISSION, unproven);
        return false;
    }
    return true;
}

/* The answer holds: the link's keys and the other end's limits; what waited for the link goes. */
static void peer_hello_link_up(struct peer *peer, const struct hello_ack *ack,
                               uint8_t shared[AUTH_KX_BYTES])
{
    struct b10d *d = peer->d;
    struct list *pos, *tmp;

    uv_timer_stop(&peer->connect_timer);
    tags_unregister(d->tags, peer->ack_tag);
    auth_link_derive_kx(peer->out_key, d->daemon_id, peer->daemon_id, peer->out.tags.gen,
                        peer->out_nonce, ack->nonce, d->nodeid != NULL ? shared : NULL, true,
                        &peer->out);
    auth_wipe(shared, AUTH_KX_BYTES);
    peer->max_chunk = ack->max_chunk;
    peer->max_control = ack->max_control;
    peer->max_pieces = ack->max_pieces;
    peer->state = PEER_UP;
    peer->counters.links++;
    d->stats.links_up++;
    peer_heard(peer);
    peer_hello_send_confirm(peer);
    log_info("peer %s: link up, generation %016" PRIx64 ", transport %s", peer->name,
             peer->out.tags.gen, wire_ep_transports(peer->ep));

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

/* A HELLO_ACK receive ended: the answer to our HELLO (read, checked, the link up), or not yet. */
static void peer_hello_on_ack(void *arg, b10_status_t status, size_t length)
{
    struct peer_ack *pa = arg;
    struct peer *peer = pa->peer;
    struct hello_ack ack;
    b10_status_t decoded;
    uint8_t shared[AUTH_KX_BYTES];
    char detail[256];

    peer->acks_out--;
    if (pa != peer->ack) {
        free(pa);   /* an attempt given up: whoever gave it up failed what waited */
        return;
    }
    peer->ack_op = NULL;
    if (status == B10_ERR_CANCELLED || peer->state != PEER_CONNECTING) {
        peer_hello_drop_ack(peer);
        return;
    }
    if (status != B10_OK) {
        snprintf(detail, sizeof(detail), "HELLO_ACK failed: %s", b10_status_str(status));
        peer_lost(peer, status == B10_ERR_PEER_PROTOCOL ? status : B10_ERR_PEER_UNREACHABLE, detail);
        return;
    }
    if (!peer_hello_ack_ours(peer, pa->buf, length, &ack, &decoded, detail, sizeof(detail))) {
        if (peer_hello_post_ack(peer) != 0)
            peer_lost(peer, B10_ERR_PEER_UNREACHABLE, "cannot post the HELLO_ACK receive again");
        return;
    }
    peer_hello_drop_ack(peer);      /* pa goes: ack is a copy of what it held */
    if (!peer_hello_ack_accepts(peer, &ack, decoded, shared, detail, sizeof(detail)))
        return;
    peer_hello_link_up(peer, &ack, shared);
}

/* Seal and send a handshake message (HELLO or HELLO_ACK) under key. */
static int peer_hello_send_msg(struct b10d *d, struct wire_ep *ep, const struct auth_key *key,
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

/*
 * The door answers for the boot of its node that runs now. Where that is a
 * later boot than the entry's (a descriptor outlives its daemon's restart),
 * the link goes to it: what waits for the link was sent nowhere yet, and
 * waits on; what the earlier boot had fails as at any restart.
 */
static b10_status_t peer_hello_take_boot(struct peer *peer, const struct knock *ack, char *why,
                                         size_t why_len)
{
    struct list waiting;

    if (strcmp(ack->name, peer->name) != 0) {
        snprintf(why, why_len, "its door answers as daemon %s", ack->name);
        return B10_ERR_PEER_PROTOCOL;
    }
    if (ack->sender_id == peer->daemon_id)
        return B10_OK;
    if (ack->incarnation <= peer->incarnation || ack->incarnation > peer_incarnation_bound(peer->d)) {
        snprintf(why, why_len, "its door answers for boot %016" PRIx64 ", which did not start "
                 "after boot %016" PRIx64 " (or starts a day ahead of this daemon's clock)",
                 ack->sender_id, peer->daemon_id);
        return B10_ERR_PEER_PROTOCOL;
    }
    log_info("peer %s: its door answers for boot %016" PRIx64 ", later than boot %016" PRIx64
             " that this daemon knew: the link goes to the later", peer->name, ack->sender_id,
             peer->daemon_id);
    list_init(&waiting);
    list_splice_tail(&waiting, &peer->waiting);
    b10_status_t st = peer_replace(peer, ack->sender_id, ack->incarnation, ack->address,
                                   ack->address_length);
    list_splice_tail(&peer->waiting, &waiting);
    peer->d->stats.descriptors_resolved++;
    if (st != B10_OK)
        snprintf(why, why_len, "no memory for its new boot's address");
    return st;
}

static void peer_hello_on_knocked(void *user, b10_status_t status, const char *detail,
                                  const struct knock *ack)
{
    struct peer *peer = user;
    char why[320], took[256];

    peer->knock = NULL;
    peer->state = PEER_DOWN;
    if (status == B10_OK && (status = peer_hello_take_boot(peer, ack, took, sizeof(took))) != B10_OK)
        detail = took;
    else if (status == B10_OK) {
        peer->knocked = true;
        if ((status = peer_hello_connect(peer)) == B10_OK)
            return;
        detail = "the HELLO after its door let this daemon in could not be sent";
    }
    snprintf(why, sizeof(why), "at its door: %s", detail);
    peer_give_up(peer, status, why, true);
}

/*
 * A round of knocks at the peer's door went unanswered (dropped, silent):
 * knock again while a transfer or a question waits for the link (each
 * gives up at its own deadline, and with the last the knocking ends), and
 * for --connect-timeout-ms from the first knock in any case, the bound a
 * link opened with nothing waiting (a rank's reload) had before.
 */
static bool peer_hello_knock_again(void *user)
{
    struct peer *peer = user;
    struct b10d *d = peer->d;
    struct list *pos, *tmp;

    if (d->now_ms(d) - peer->knock_since_ms < d->cfg.connect_timeout_ms ||
        !list_empty(&peer->waiting))
        return true;
    list_for_each_safe(pos, tmp, &peer->asks)
        if (list_entry(pos, struct link_user, node)->unsent)
            return true;
    return false;
}

b10_status_t peer_hello_connect(struct peer *peer)
{
    struct b10d *d = peer->d;
    const struct auth_key *key = &d->keys.keys[0];
    struct wireaddr_door doors[WIREADDR_MAX_DOORS];
    struct tag_link ack;
    const void *addr;
    size_t addr_len;
    int ndoors;

    /*
     * Its UCX drops this daemon's packets until its door let this daemon
     * in (gate.h): knock first, then HELLO. Once a link, once a knock.
     */
    if (d->door != NULL && !peer->knocked && !peer_is_self(peer) &&
        (ndoors = wireaddr_doors(peer->address, peer->address_length, doors)) > 0) {
        peer->knock_since_ms = d->now_ms(d);
        if ((peer->knock = door_knock(d->door, doors, (unsigned)ndoors, peer->name, peer,
                                      peer_hello_on_knocked, peer_hello_knock_again)) == NULL)
            return B10_ERR_NO_MEMORY;
        peer->state = PEER_KNOCKING;
        log_debug("peer %s: knocking at its door", peer->name);
        return B10_OK;
    }
    peer->knocked = false;
    if (peer_ensure_ep(peer) != 0)
        return B10_ERR_PEER_UNREACHABLE;
    memset(&peer->out, 0, sizeof(peer->out));
    peer->out.tags.sender_id = d->daemon_id;
    peer->out.tags.receiver_id = peer->daemon_id;
    peer->out.tags.gen = ids_new_generation(&d->ids);
    peer->out_key = key;
    auth_random(peer->out_nonce, sizeof(peer->out_nonce));
    peer_hello_identity(d);
    if (d->nodeid != NULL)
        auth_kx_keypair(peer->out_kx, peer->out_kx_secret);
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
    if (peer_hello_post_ack(peer) != 0) {
        peer_hello_drop_ack(peer);
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
    ProtobufCBinaryData certs[NODEID_MAX_CERTS];
    uint8_t sig[NODEID_MAX_SIG];
    size_t sig_length = 0;
    if (d->nodeid != NULL) {
        struct hello_transcript t = {
            .sender_id = d->daemon_id, .receiver_id = peer->daemon_id, .gen = hello.gen,
            .incarnation = d->incarnation, .name = d->cfg.name, .opener_nonce = peer->out_nonce,
            .opener_kx = peer->out_kx, .address = addr, .address_length = addr_len,
        };
        if (peer_hello_prove(d, &t, certs, &hello.n_node_chain, sig, &sig_length) != B10_OK) {
            peer_retire_out(peer, B10_ERR_INTERNAL);
            return B10_ERR_INTERNAL;
        }
        hello.node_chain = certs;
        hello.kx_public = (ProtobufCBinaryData){ AUTH_KX_BYTES, peer->out_kx };
        hello.node_sig = (ProtobufCBinaryData){ sig_length, sig };
    }
    B10__Peer__Msg msg = B10__PEER__MSG__INIT;
    msg.body_case = B10__PEER__MSG__BODY_HELLO;
    msg.hello = &hello;
    if (peer_hello_send_msg(d, peer->ep, key, AUTH_KIND_HELLO, peer->daemon_id, TAG_HELLO, &msg) != 0) {
        peer_retire_out(peer, B10_ERR_PEER_UNREACHABLE);
        return B10_ERR_PEER_UNREACHABLE;
    }
    uv_timer_start(&peer->connect_timer, peer_hello_on_connect_timeout, d->cfg.connect_timeout_ms, 0);
    log_debug("peer %s: HELLO sent, generation %016" PRIx64 ", key %016" PRIx64, peer->name,
              peer->out.tags.gen, key->id);
    return B10_OK;
}


/* ---------------------------------------------------------------- the handshake: answering */

/* A token bucket of one second's worth of times --max-hellos-per-s: true when it had one to spend. */
static bool peer_hello_spend(struct b10d *d, double *tokens, uint64_t *tokens_ms, unsigned times)
{
    uint64_t now = d->now_ms(d);
    double rate = (double)d->cfg.max_hellos_per_s * times;

    *tokens += (double)(now - *tokens_ms) * rate / 1000.0;
    if (*tokens > rate)
        *tokens = rate;
    *tokens_ms = now;
    if (*tokens < 1.0)
        return false;
    *tokens -= 1.0;
    return true;
}

/*
 * HELLOs answered: per certified node (node: its certified name), so that
 * one node's key, however many daemon ids it makes up, spends its own
 * bucket and no other node's; else all openers together, since a name
 * without a certificate is anyone's to claim.
 */
static bool peer_hello_budget(struct b10d *d, const char *node)
{
    struct peer_handshakes *hs = &d->handshakes;
    struct peer_hello_bucket *b = NULL, *oldest = &hs->nodes[0];

    if (node == NULL)
        return peer_hello_spend(d, &hs->tokens, &hs->tokens_ms, 1);
    for (unsigned i = 0; i < PEER_HELLO_NODES && b == NULL; i++)
        if (strcmp(hs->nodes[i].name, node) == 0)
            b = &hs->nodes[i];
    /* A node not budgeted now takes an unused bucket, else the least recently used. */
    for (unsigned i = 1; i < PEER_HELLO_NODES && b == NULL && oldest->name[0] != '\0'; i++)
        if (hs->nodes[i].name[0] == '\0' || hs->nodes[i].tokens_ms < oldest->tokens_ms)
            oldest = &hs->nodes[i];
    if (b == NULL) {
        b = oldest;
        snprintf(b->name, sizeof(b->name), "%s", node);
        b->tokens = d->cfg.max_hellos_per_s;
        b->tokens_ms = d->now_ms(d);
    }
    return peer_hello_spend(d, &b->tokens, &b->tokens_ms, 1);
}

/* Certified: one node's handshakes waiting past its share make room, its oldest first. */
static void peer_hello_pending_share(struct b10d *d, const char *node)
{
    struct peer_pending *first = NULL;
    unsigned n = 0;
    struct list *pos, *tmp;

    list_for_each_safe(pos, tmp, &d->handshakes.pending) {
        struct peer_pending *p = list_entry(pos, struct peer_pending, node);
        if (strcmp(p->name, node) == 0 && n++ == 0)
            first = p;
    }
    if (n >= PEER_PENDING_PER_NODE) {
        log_info("peer %s: %u of its handshakes wait already: its oldest, generation %016" PRIx64
                 ", gives way", node, n, first->gen);
        peer_hello_pending_free(first);
    }
}

/* Answer a HELLO on ep: acceptance (nonce is ours for the link) or a refusal (nonce NULL). */
static void peer_hello_send_ack(struct b10d *d, struct wire_ep *ep, const struct auth_key *key,
                                const struct hello *h, const uint8_t *nonce, const uint8_t *kx,
                                b10_status_t status, const char *detail)
{
    B10__Peer__HelloAck ack = B10__PEER__HELLO_ACK__INIT;
    B10__Peer__Msg msg = B10__PEER__MSG__INIT;
    ProtobufCBinaryData certs[NODEID_MAX_CERTS];
    uint8_t sig[NODEID_MAX_SIG];
    size_t sig_length = 0;
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
        ack.max_pieces = d->cfg.max_control_bytes / SPAN_BYTES;   /* a piece: one span, at least */
    }
    if (nonce != NULL && kx != NULL) {
        struct hello_transcript t = {
            .ack = true, .sender_id = d->daemon_id, .receiver_id = h->daemon_id, .gen = h->gen,
            .incarnation = d->incarnation, .name = d->cfg.name, .opener_nonce = h->nonce,
            .opener_kx = h->proof.kx_public, .nonce = nonce, .kx = kx,
        };
        if (peer_hello_prove(d, &t, certs, &ack.n_node_chain, sig, &sig_length) != B10_OK)
            return;     /* unanswered: the opener's timeout says so */
        ack.node_chain = certs;
        ack.kx_public = (ProtobufCBinaryData){ AUTH_KX_BYTES, (uint8_t *)kx };
        ack.node_sig = (ProtobufCBinaryData){ sig_length, sig };
    }
    msg.body_case = B10__PEER__MSG__BODY_HELLO_ACK;
    msg.hello_ack = &ack;
    auth_ack_tags(key, h->daemon_id, d->daemon_id, h->gen, h->nonce, &tags);
    if (peer_hello_send_msg(d, ep, key, AUTH_KIND_HELLO_ACK, h->daemon_id,
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
 * A HELLO's envelope: nothing of it is read before it opened under a key
 * this daemon holds; it must be for this boot of this daemon (a HELLO
 * recorded on its way elsewhere, or reflected back to its opener, is not)
 * and not one seen before. True with its key and payload; false when
 * dropped (said and counted).
 */
static bool peer_hello_open(struct b10d *d, const uint8_t *buf, size_t length,
                            struct auth_header *hdr_p, const struct auth_key **key_p,
                            const uint8_t **payload_p, size_t *payload_length_p)
{
    struct auth_header hdr;
    const struct auth_key *key;

    if (auth_peek(buf, length, &hdr) != 0 || hdr.kind != AUTH_KIND_HELLO) {
        peer_hello_stranger(d, &d->stats.hellos_unauthenticated, "dropping a HELLO that is no envelope");
        return false;
    }
    if ((key = auth_keyring_find(&d->keys, hdr.key_id)) == NULL) {
        peer_hello_stranger(d, &d->stats.hellos_unauthenticated,
                            "dropping a HELLO from %016" PRIx64 " under key %016" PRIx64 ", which this "
                            "daemon does not hold%s", hdr.sender_id, hdr.key_id,
                            d->keys.keys[0].kind == AUTH_KEY_LOCAL ? " (it has no --cluster-key)" : "");
        return false;
    }
    if (auth_open(key, AUTH_KIND_HELLO, buf, length, payload_p, payload_length_p) != AUTH_OK) {
        peer_hello_stranger(d, &d->stats.hellos_unauthenticated, "dropping a HELLO from %016" PRIx64
                            " that does not authenticate under key %016" PRIx64, hdr.sender_id, key->id);
        return false;
    }
    if (hdr.receiver_id != d->daemon_id) {
        peer_hello_stranger(d, &d->stats.hellos_refused, "dropping a HELLO from %016" PRIx64 " for daemon "
                            "%016" PRIx64 ": not this boot (a stale descriptor, or a HELLO sent elsewhere "
                            "and replayed here)", hdr.sender_id, hdr.receiver_id);
        return false;
    }
    if (auth_seen_check(d->handshakes.seen, buf, length)) {
        peer_hello_stranger(d, &d->stats.hellos_replayed, "dropping a replayed HELLO from %016" PRIx64,
                            hdr.sender_id);
        return false;
    }
    *hdr_p = hdr;
    *key_p = key;
    return true;
}

/*
 * Newer than any link its opener's boot opened here or has pending:
 * generations only grow within a boot, so a replay, however old, is
 * dropped before it costs the HELLO budget, an endpoint or a slot. False
 * when dropped.
 */
static bool peer_hello_is_new(struct b10d *d, const struct hello *h, const struct peer *of_boot,
                              const struct peer_pending *earlier)
{
    if ((of_boot != NULL && h->gen <= of_boot->hello_gen_seen) ||
        (earlier != NULL && h->gen <= earlier->gen)) {
        peer_hello_stranger(d, &d->stats.hellos_replayed, "dropping a HELLO from %s for generation %016"
                            PRIx64 ": not newer than its last (a replay)", h->name, h->gen);
        return false;
    }
    /*
     * This daemon's own boot id opens a link here only in the HELLO this
     * daemon sent itself, whose nonce never left the process: a key holder
     * that claims it is refused, so a message on the link to itself is a
     * local rank's (access.h), never a remote one posing as local.
     */
    if (h->daemon_id == d->daemon_id &&
        (of_boot == NULL || !peer_is_self(of_boot) || of_boot->state != PEER_CONNECTING ||
         h->gen != of_boot->out.tags.gen || !auth_equal(h->nonce, of_boot->out_nonce, AUTH_NONCE_BYTES))) {
        peer_hello_stranger(d, &d->stats.hellos_refused, "dropping a HELLO that claims this daemon's own "
                            "boot %016" PRIx64 " but is not the one it sent itself", h->daemon_id);
        return false;
    }
    return true;
}

/*
 * Certified: the HELLO proves its name by its node's key before it costs
 * anything that is charged by name, and before any table sees it; an
 * X25519 key of its own answers the opener's. False when dropped; else
 * *unproven_p is why it does not prove its name (answered with that, from
 * the shared budget: the operator of the other end reads it there) or
 * NULL, and certified, kx and shared hold the answer's key and the secret.
 */
static bool peer_hello_verify(struct b10d *d, const struct hello *h, const struct peer *of_boot,
                              const struct peer_pending *earlier, uint8_t kx[AUTH_KX_BYTES],
                              uint8_t shared[AUTH_KX_BYTES], const char **unproven_p,
                              char *detail, size_t detail_len)
{
    uint8_t kx_secret[AUTH_KX_BYTES];

    peer_hello_identity(d);
    /*
     * Checking a chain costs the loop a fraction of a millisecond: all
     * openers together get 8 times the HELLO budget of checks a second, so
     * that a key holder's flood of made-up certificates costs a bounded
     * share of the loop (the opener of a HELLO dropped here tries again).
     */
    if (d->nodeid != NULL && h->proof.present &&
        !peer_hello_spend(d, &d->handshakes.proofs, &d->handshakes.proofs_ms, 8)) {
        peer_hello_stranger(d, &d->stats.hellos_refused, "dropping a HELLO from %s: past 8 x "
                            "--max-hellos-per-s %u certificate checks a second", h->name,
                            d->cfg.max_hellos_per_s);
        return false;
    }
    struct hello_transcript t = {
        .sender_id = h->daemon_id, .receiver_id = d->daemon_id, .gen = h->gen,
        .incarnation = h->incarnation, .name = h->name, .opener_nonce = h->nonce,
        .opener_kx = h->proof.kx_public, .address = h->address, .address_length = h->address_length,
    };
    const char *unproven = peer_hello_check_proof(d, &h->proof, h->name, &t, detail, detail_len);
    if (unproven == NULL && d->nodeid != NULL) {
        auth_kx_keypair(kx, kx_secret);
        if (auth_kx_shared(kx_secret, h->proof.kx_public, kx, h->proof.kx_public, shared) != B10_OK)
            unproven = "its X25519 key is of small order";
        auth_wipe(kx_secret, sizeof(kx_secret));
    }
    /*
     * Certified: a proof shows a HELLO's name, not the boot id it claims. A boot this
     * daemon knows (linked, or waiting for its confirmation) under another name is that
     * node's: a HELLO that claims it is dropped, or one node could move another's
     * generations past its next HELLO, or cancel its handshake while it waits.
     */
    const char *owner = of_boot != NULL ? of_boot->name : earlier != NULL ? earlier->name : NULL;
    if (d->nodeid != NULL && owner != NULL && strcmp(owner, h->name) != 0) {
        peer_hello_stranger(d, &d->stats.hellos_refused, "dropping a HELLO from %s: it claims "
                            "boot %016" PRIx64 ", which is %s's", h->name, h->daemon_id, owner);
        return false;
    }
    *unproven_p = unproven;
    return true;
}

/*
 * What answering costs, charged before anything is made for it: the HELLO
 * budget (per certified node, else shared), and a slot among the
 * handshakes waiting. False when dropped. earlier may be freed here.
 */
static bool peer_hello_charge(struct b10d *d, const struct hello *h, struct peer_pending *earlier,
                              bool certified)
{
    if (!peer_hello_budget(d, certified ? h->name : NULL)) {
        peer_hello_stranger(d, &d->stats.hellos_refused, "dropping a HELLO from %s: past "
                            "--max-hellos-per-s %u%s", h->name, d->cfg.max_hellos_per_s,
                            certified ? " for that node" : "");
        return false;
    }
    /* Its opener moved on to a newer generation; certified, only a HELLO that proved the
     * name may say so (one without a proof is refused below and must not cancel it). */
    if (earlier != NULL && (d->nodeid == NULL || certified))
        peer_hello_pending_free(earlier);
    if (certified)
        peer_hello_pending_share(d, h->name);
    if (d->handshakes.npending >= PEER_MAX_PENDING) {
        peer_hello_stranger(d, &d->stats.hellos_refused, "dropping a HELLO from %s: %u handshakes are "
                            "waiting already", h->name, d->handshakes.npending);
        return false;
    }
    return true;
}

/* The handshake h asks for, waiting for its confirmation until --connect-timeout-ms. */
static struct peer_pending *peer_hello_pending_new(struct b10d *d, const struct hello *h)
{
    struct peer_pending *pend = calloc(1, sizeof(*pend));

    if (pend == NULL || (pend->address = malloc(h->address_length)) == NULL) {
        free(pend);
        log_err("no memory to answer a HELLO");
        return NULL;
    }
    pend->d = d;
    snprintf(pend->name, sizeof(pend->name), "%s", h->name);
    pend->daemon_id = h->daemon_id;
    pend->incarnation = h->incarnation;
    pend->gen = h->gen;
    memcpy(pend->address, h->address, h->address_length);
    pend->address_length = h->address_length;
    pend->expires_ms = d->now_ms(d) + d->cfg.connect_timeout_ms;
    list_insert_tail(&d->handshakes.pending, &pend->node);
    d->handshakes.npending++;
    return pend;
}

/*
 * Answer a HELLO that got this far: a refusal (unproven, or
 * peer_hello_refusal's why), or the link's keys, with this daemon's X25519
 * key kx and the secret shared where certified (else both NULL). Either
 * way the handshake waits as pending, so that its generation is known.
 */
static void peer_hello_answer(struct b10d *d, const struct auth_key *key, const struct hello *h,
                              struct peer *of_boot, const char *unproven, const uint8_t *kx,
                              const uint8_t *shared)
{
    char detail[256];
    struct peer_pending *pend = peer_hello_pending_new(d, h);

    if (pend == NULL)
        return;
    /* The endpoint to answer on: the known peer's of this boot, or one made for the answer. */
    struct peer *known = peer_find_name(d, h->name);
    struct wire_ep *ep = NULL;
    if (known != NULL && known->daemon_id == h->daemon_id && peer_ensure_ep(known) == 0)
        ep = known->ep;
    else if (wire_ep_create(d->wire, pend->address, pend->address_length, pend, &pend->ep) == 0)
        ep = pend->ep;
    if (ep == NULL) {
        log_warning("peer %s: no endpoint to answer its HELLO", h->name);
        peer_hello_pending_free(pend);
        return;
    }
    b10_status_t status = B10_ERR_PERMISSION;
    const char *why = unproven;
    if (why == NULL)
        why = peer_hello_refusal(d, h, known, &status, detail, sizeof(detail));
    if (why != NULL) {
        pend->refused = true;
        if (unproven != NULL)
            d->stats.peer_protocol_errors++;
        log_warning("peer %s: refusing its link: %s", h->name, why);
        peer_hello_send_ack(d, ep, key, h, NULL, NULL, status, why);
        return;
    }
    uint8_t nonce[AUTH_NONCE_BYTES];
    auth_random(nonce, sizeof(nonce));
    auth_link_derive_kx(key, h->daemon_id, d->daemon_id, h->gen, h->nonce, nonce, shared, false,
                        &pend->link);
    pend->control_tag = tags_derive(&pend->link.tags, 0, 0, TAG_KIND_CONTROL);
    peer_hello_send_ack(d, ep, key, h, nonce, kx, B10_OK, "");
    /* Answered: a replay of it, even once its handshake expired unconfirmed, is dropped. */
    if (of_boot != NULL && h->gen > of_boot->hello_gen_seen)
        of_boot->hello_gen_seen = h->gen;
    log_debug("peer %s: HELLO for generation %016" PRIx64 " answered, key %016" PRIx64, h->name,
              h->gen, key->id);
}

/*
 * A HELLO, step by step, each step dropping what fails it before the next
 * costs more: the envelope, the message, its generation, its proof, the
 * budget; only then is an endpoint made to its address, to answer. The
 * link it asks for waits as pending (above).
 */
void peer_hello_on_hello(struct b10d *d, const uint8_t *buf, size_t length)
{
    struct auth_header hdr;
    const struct auth_key *key;
    const uint8_t *payload;
    size_t payload_length;
    B10__Peer__Msg *msg = NULL;
    struct hello h;
    uint8_t kx[AUTH_KX_BYTES], shared[AUTH_KX_BYTES];
    const char *unproven = NULL;
    char detail[256], proof_detail[512];

    if (!peer_hello_open(d, buf, length, &hdr, &key, &payload, &payload_length))
        return;
    if (hello_decode(payload, payload_length, &hdr, &msg, &h, detail, sizeof(detail)) != B10_OK) {
        d->stats.peer_protocol_errors++;
        peer_hello_stranger(d, &d->stats.hellos_refused, "dropping a HELLO from %016" PRIx64 ": %s",
                            hdr.sender_id, detail);
        return;
    }
    struct peer *of_boot = peer_find(d, h.daemon_id);
    struct peer_pending *earlier = peer_hello_pending_of(d, h.daemon_id);
    if (peer_hello_is_new(d, &h, of_boot, earlier) &&
        peer_hello_verify(d, &h, of_boot, earlier, kx, shared, &unproven, proof_detail,
                          sizeof(proof_detail))) {
        bool certified = unproven == NULL && d->nodeid != NULL;
        if (peer_hello_charge(d, &h, earlier, certified))
            peer_hello_answer(d, key, &h, of_boot, unproven, certified ? kx : NULL,
                              certified ? shared : NULL);
    }
    auth_wipe(shared, sizeof(shared));
    b10__peer__msg__free_unpacked(msg, NULL);
}

/* ---------------------------------------------------------------- the sweep, start, stop */

void peer_hello_sweep(struct b10d *d)
{
    uint64_t now = d->now_ms(d);
    struct list *pos, *tmp;

    list_for_each_safe(pos, tmp, &d->handshakes.pending) {
        struct peer_pending *p = list_entry(pos, struct peer_pending, node);
        if (p->expires_ms <= now) {
            if (!p->refused)
                log_info("peer %s: its handshake for generation %016" PRIx64 " was never confirmed "
                         "(a replayed HELLO, or an opener that left)", p->name, p->gen);
            peer_hello_pending_free(p);
        }
    }
    if (d->nodeid != NULL && now - d->handshakes.identity_ms >= 60000)
        peer_hello_identity(d);
    peer_evict_idle(d, now);
    peer_dispatch_sweep(d, now);
}

static void peer_hello_on_sweep(uv_timer_t *timer)
{
    peer_hello_sweep(timer->data);
}

/* The keys: --cluster-key, else systemd's credential, else the default file, else none. */
static b10_status_t peer_hello_load_keys(struct b10d *d)
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
    /* Only a file that is not there means no key: one there but out of reach (a credential
     * directory this user cannot search, say) is an error, not a keyless daemon. */
    if (named || access(path, F_OK) == 0 || errno != ENOENT) {
        b10_status_t st = auth_key_load(path, &key, err, sizeof(err));
        if (st != B10_OK) {
            log_err("%s", err);
            return st;
        }
        auth_keyring_add(&d->keys, &key);
        log_info("cluster key %016" PRIx64 " from %s", key.id, path);
    }
    if (cfg->cluster_key_next[0] != '\0') {
        b10_status_t st = auth_key_load(cfg->cluster_key_next, &key, err, sizeof(err));
        if (st != B10_OK) {
            log_err("%s", err);
            return st;
        }
        if (d->keys.count == 0) {
            log_err("--cluster-key-next needs a --cluster-key beside it");
            return B10_ERR_INVALID_ARG;
        }
        if (auth_keyring_add(&d->keys, &key) != B10_OK) {
            log_err("--cluster-key-next holds the same key as the cluster key");
            return B10_ERR_INVALID_ARG;
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
    if (cfg->node_cert[0] != '\0') {
        /*
         * Certificates prove names; the cluster key still seals the door,
         * the knocks and every envelope, so a daemon without it is refused
         * before its certificate is read.
         */
        if (d->keys.keys[0].kind != AUTH_KEY_CLUSTER) {
            log_err("--node-cert needs a cluster key beside it (--cluster-key): the key seals "
                    "the doors and the envelopes, the certificate proves the node's name");
            return B10_ERR_INVALID_ARG;
        }
        b10_status_t st = nodeid_load(cfg->node_cert, cfg->node_key, cfg->node_ca, cfg->name,
                                      &d->nodeid, err, sizeof(err));
        if (st != B10_OK) {
            log_err("%s", err);
            return st;
        }
        peer_hello_say_expiry(d, "node certificate");
        d->handshakes.identity_ms = d->handshakes.expiry_said_ms = d->now_ms(d);
    }
    if (auth_keyring_lock(&d->keys) != 0)
        log_notice("the keys could not be locked in memory (RLIMIT_MEMLOCK): they may reach swap");
    return B10_OK;
}

b10_status_t peer_hello_start(struct b10d *d)
{
    struct peer_handshakes *hs = &d->handshakes;

    list_init(&hs->pending);
    if (auth_init() != B10_OK) {
        log_err("libsodium could not start");
        return B10_ERR_INTERNAL;
    }
    b10_status_t st = peer_hello_load_keys(d);
    if (st != B10_OK)
        return st;
    if ((hs->seen = calloc(1, sizeof(*hs->seen))) == NULL)
        return B10_ERR_NO_MEMORY;
    hs->tokens = d->cfg.max_hellos_per_s;
    hs->tokens_ms = d->now_ms(d);
    hs->proofs = 8.0 * d->cfg.max_hellos_per_s;
    hs->proofs_ms = hs->tokens_ms;
    uint64_t every = d->cfg.connect_timeout_ms / 4;
    every = every < 50 ? 50 : every > 1000 ? 1000 : every;
    uv_timer_init(d->loop, &hs->sweep);
    hs->sweep.data = d;
    uv_timer_start(&hs->sweep, peer_hello_on_sweep, every, every);
    uv_unref((uv_handle_t *)&hs->sweep);
    hs->sweep_on = true;
    return B10_OK;
}

void peer_hello_stop(struct b10d *d)
{
    if (d->handshakes.sweep_on) {
        d->handshakes.sweep_on = false;
        uv_close((uv_handle_t *)&d->handshakes.sweep, NULL);
    }
}

void peer_hello_close(struct b10d *d)
{
    struct list *pending = &d->handshakes.pending;

    if (pending->next != NULL)
        while (!list_empty(pending))
            peer_hello_pending_free(list_entry(pending->next, struct peer_pending, node));
}

void peer_hello_free(struct b10d *d)
{
    nodeid_free(d->nodeid);
    d->nodeid = NULL;
    free(d->handshakes.seen);
    d->handshakes.seen = NULL;
}
