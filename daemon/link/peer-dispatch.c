/*
 * peer-dispatch.c — what arrives on a control-class tag (the hooks wire.c
 * calls, peer.h): charged to its sender or to no one yet, bounded, opened
 * under its link's keys and handed on, to the handshake, to liveness, or
 * through the peer_hooks b10d.c installed up to the transfer engine.
 */
#include "peer-int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

/* A heartbeat in its envelope: a few fields and the envelope's 72 bytes. */
#define PEER_BEAT_MAX_BYTES 256
/* HELLOs and heartbeats (no peer to charge them to yet) being received at once, bytes. */
#define PEER_UNBOUND_INFLIGHT (UINT64_C(4) << 20)

void peer_dispatch_start(struct b10d *d, const struct peer_hooks *hooks)
{
    d->dispatch.hooks = hooks;
}

/* ---------------------------------------------------------------- stray messages */

/* A sender's burst of strays ends when none came from it for this long, ms. */
#define PEER_STRAY_QUIET_MS 2000
/* A burst that does not end is summed up this often all the same, ms. */
#define PEER_STRAY_LONGEST_MS 60000

static const char *const peer_stray_words[PEER_STRAY_KINDS] = {
    [PEER_STRAY_LATE] = "on quarantined tags",
    [PEER_STRAY_UNKNOWN] = "on unknown tags",
    [PEER_STRAY_CONTROL] = "control of no live link",
};

/* The burst from's strays go to: its open one, else a free one, else the one of the rest. */
static struct peer_stray_burst *peer_dispatch_burst(struct b10d *d, uint64_t from)
{
    struct peer_stray_burst *free_one = NULL;

    for (size_t i = 0; i < PEER_STRAY_SENDERS; i++) {
        struct peer_stray_burst *b = &d->dispatch.strays[i];
        if (b->open && b->from == from)
            return b;
        if (!b->open && free_one == NULL)
            free_one = b;
    }
    return free_one != NULL ? free_one : &d->dispatch.strays_more;
}

/* Who sent it, as far as the tag tells: the daemon its quarantine names, by name while known. */
static void peer_dispatch_who(struct b10d *d, uint64_t from, char *who, size_t size)
{
    struct peer *p = from != 0 ? peer_find(d, from) : NULL;

    if (p != NULL)
        snprintf(who, size, "peer %s", p->name);
    else if (from != 0)
        snprintf(who, size, "daemon %016" PRIx64, from);
    else
        snprintf(who, size, "an unknown sender");
}

/*
 * A message of no live link or transfer was dropped: one that came late
 * (after a cancel or a failure, the sender's chunks in flight keep landing
 * on quarantined tags for a while), or someone's guess. Counted in *counter
 * as ever; in the log, the first of a sender's burst with what it was, and
 * the rest only when the burst is over (peer_dispatch_sweep): a flood of
 * them is two lines, not one a second for as long as it lasts.
 */
static void peer_dispatch_stray(struct b10d *d, uint64_t *counter, enum peer_stray_kind kind,
                                uint64_t tag, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void peer_dispatch_stray(struct b10d *d, uint64_t *counter, enum peer_stray_kind kind,
                                uint64_t tag, const char *fmt, ...)
{
    uint64_t now = d->now_ms(d), from = tags_quarantined_from(d->tags, tag);
    struct peer_stray_burst *b = peer_dispatch_burst(d, from);
    char what[192];
    va_list ap;

    (*counter)++;
    b->count[kind]++;
    b->last_ms = now;
    if (b->open)
        return;
    b->open = true;
    b->from = from;
    b->first_ms = b->since_ms = now;
    if (b == &d->dispatch.strays_more)
        snprintf(b->who, sizeof(b->who), "more peers than %d", PEER_STRAY_SENDERS);
    else
        peer_dispatch_who(d, from, b->who, sizeof(b->who));
    /* One first line a second, all senders together; a burst unsaid is summed up all the same. */
    b->said = LOG_LEVEL_INFO <= log_max_level &&
              (d->dispatch.stray_said_ms == 0 || now - d->dispatch.stray_said_ms >= 1000);
    if (!b->said)
        return;
    d->dispatch.stray_said_ms = now;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    log_info("%s from %s; more are summed up once they stop", what, b->who);
}

/* One line for the burst's strays since it began or was last summed up; still: it goes on. */
static void peer_dispatch_sum_up(struct peer_stray_burst *b, bool still)
{
    uint64_t total = 0;
    char kinds[160];
    size_t n = 0;

    kinds[0] = '\0';
    for (int k = 0; k < PEER_STRAY_KINDS; k++) {
        total += b->count[k];
        if (b->count[k] != 0 && n < sizeof(kinds))
            n += (size_t)snprintf(kinds + n, sizeof(kinds) - n, "%s%" PRIu64 " %s", n ? ", " : "",
                                  b->count[k], peer_stray_words[k]);
    }
    /* A burst of one that was logged as it came has nothing more to say. */
    if (total != 0 && (total > 1 || b->since_ms != b->first_ms || !b->said))
        log_info("%" PRIu64 " stray message%s from %s over %.1f s (kinds: %s)%s", total,
                 total == 1 ? "" : "s", b->who, (double)(b->last_ms - b->since_ms) / 1000.0, kinds,
                 still ? "; more still coming" : "");
    memset(b->count, 0, sizeof(b->count));
}

void peer_dispatch_sweep(struct b10d *d, uint64_t now)
{
    for (size_t i = 0; i <= PEER_STRAY_SENDERS; i++) {
        struct peer_stray_burst *b = i < PEER_STRAY_SENDERS ? &d->dispatch.strays[i]
                                                             : &d->dispatch.strays_more;
        if (!b->open)
            continue;
        if (now - b->last_ms >= PEER_STRAY_QUIET_MS) {
            peer_dispatch_sum_up(b, false);
            b->open = false;
        } else if (now - b->since_ms >= PEER_STRAY_LONGEST_MS) {
            peer_dispatch_sum_up(b, true);
            b->since_ms = now;
        }
    }
}

void peer_dispatch_stop(struct b10d *d)
{
    peer_dispatch_sweep(d, UINT64_MAX);
}

/* ---------------------------------------------------------------- control-class messages */

static bool peer_dispatch_refusal_budget(struct peer *peer)
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
            peer_hello_stranger(d, &d->stats.peer_protocol_errors, "dropping a %zu-byte %s unread",
                                length, tag == TAG_HELLO ? "HELLO" : "heartbeat");
            return NULL;
        }
        if (d->dispatch.unbound_inflight + length > PEER_UNBOUND_INFLIGHT) {
            peer_hello_stranger(d, &d->stats.hellos_refused, "dropping a %s unread: %" PRIu64 " bytes of "
                                "HELLOs and heartbeats are being received already",
                                tag == TAG_HELLO ? "HELLO" : "heartbeat", d->dispatch.unbound_inflight);
            return NULL;
        }
        d->dispatch.unbound_inflight += length;
        return &d->dispatch.unbound_inflight;
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
            (over && !peer_dispatch_refusal_budget(peer))) {
            snprintf(why, sizeof(why), "%" PRIu64 " bytes of its control messages are being "
                     "received and %" PRIu64 " held (--max-peer-control %" PRIu64 ")",
                     peer->control_inflight, peer->control_held, d->cfg.max_peer_control);
            peer_refused(peer, "a control message (dropped unread)", why);
            return NULL;
        }
        peer->control_inflight += length;
        return peer;
    }
    if (peer_hello_pending_by_tag(d, tag) != NULL && length <= d->cfg.max_control_bytes &&
        d->dispatch.unbound_inflight + length <= PEER_UNBOUND_INFLIGHT + d->cfg.max_control_bytes) {
        d->dispatch.unbound_inflight += length;
        return &d->dispatch.unbound_inflight;
    }
    peer_dispatch_stray(d, &d->stats.stale_messages, PEER_STRAY_CONTROL, tag,
                        "dropping a %zu-byte control message on a tag of no live link", length);
    return NULL;
}

/* On a link's control tag: CONTROL, READ, CHECK, NOTIFY, CONFIRM, under the link's keys. */
static void peer_dispatch_link_control(struct b10d *d, uint64_t tag, const uint8_t *buf,
                                       size_t length)
{
    B10__Peer__Msg *msg = NULL;
    struct peer *peer = tags_lookup(d->tags, tag);

    if (peer != NULL && (void *)peer != (void *)d && peer->in_up && peer->in_control_tag == tag) {
        if (peer_open_with(d, peer, &peer->in, buf, length, &msg) != B10_OK)
            return;
    } else {
        struct peer_pending *pend = peer_hello_pending_by_tag(d, tag);
        if (pend == NULL) {
            peer_dispatch_stray(d, &d->stats.stale_messages, PEER_STRAY_CONTROL, tag,
                                "dropping a control message on a tag of no live link");
            return;
        }
        if (peer_open_with(d, NULL, &pend->link, buf, length, &msg) != B10_OK ||
            (peer = peer_hello_adopt(pend)) == NULL)
            goto out;
    }
    peer_heard(peer);
    switch (msg->body_case) {
    case B10__PEER__MSG__BODY_CONTROL:
        d->dispatch.hooks->on_control(peer, msg->control, length);
        break;
    case B10__PEER__MSG__BODY_READ:
        d->dispatch.hooks->on_read(peer, msg->read, length);
        break;
    case B10__PEER__MSG__BODY_CHECK:
        d->dispatch.hooks->on_check(peer, msg->check);
        break;
    case B10__PEER__MSG__BODY_NOTIFY:
        d->dispatch.hooks->on_notify(peer, msg->notify);
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

    if (cookie == (void *)&d->dispatch.unbound_inflight) {
        d->dispatch.unbound_inflight -= length;
    } else if (cookie != NULL && cookie != (void *)d) {
        struct peer *charged = cookie;
        charged->control_inflight -= length;
    }
    if (buf == NULL)
        return;   /* the receive failed: only the charge to give back */
    if (tag == TAG_HELLO)
        peer_hello_on_hello(d, buf, length);
    else if (tag == TAG_HEARTBEAT)
        peer_liveness_on_heartbeat(d, buf, length);
    else
        peer_dispatch_link_control(d, tag, buf, length);
    free(buf);
}

void peer_on_ep_error(void *arg, void *ep_user, b10_status_t status)
{
    struct b10d *d = arg;
    struct peer_pending *pend = peer_hello_pending_by_user(d, ep_user);

    if (pend != NULL) {
        /* The endpoint made to answer a HELLO failed: that opener is gone. */
        log_info("peer %s: the endpoint to answer its HELLO failed", pend->name);
        peer_hello_pending_free(pend);
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
    peer_dispatch_stray(d, late ? &d->stats.late_completions : &d->stats.stale_messages,
                        late ? PEER_STRAY_LATE : PEER_STRAY_UNKNOWN, tag,
                        "dropping a stray %zu-byte message on %s tag %016" PRIx64, length,
                        late ? "the quarantined" : "an unknown", tag);
    return true;
}
