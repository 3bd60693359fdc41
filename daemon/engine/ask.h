/*
 * ask.h — small questions from one daemon to another on behalf of a rank:
 * "would your rank accept these spans?" (Check) and "deliver this message to
 * your rank" (Notify). Each is one message on the link's control tag and one
 * Result back on a tag derived from the link and the ask's id, registered
 * before its receive is posted, fenced by a timeout. The client's request is
 * answered when the Result comes (or the ask fails), not before.
 */
#ifndef B10D_ASK_H
#define B10D_ASK_H

#include <stdint.h>

#include "auth.h"
#include "b10d.h"
#include "peer.h"
#include "tags.h"

struct peer;
struct session;
struct wire_op;
struct B10__Peer__Check;
struct B10__Peer__Notify;

struct ask {
    struct link_user peer_user;     /* on peer.asks; unsent until the link is up */
    struct list session_node;       /* session.asks */
    struct b10d *d;
    struct session *session;        /* NULL once the client left: nobody to answer */
    uint64_t seq;                   /* the client's request */
    struct peer *peer;
    uint64_t id;
    const char *what;               /* "check" or "notify", for logs */
    uint8_t *out;                   /* the packed peer message, sent once the link is up */
    size_t out_length;
    struct tag_link link;
    bool registered;
    bool done;
    struct wire_op *op;
    uint8_t buf[512 + AUTH_OVERHEAD];   /* the answer, in its envelope */
    uint32_t holds;                 /* the Result receive in flight */
    uv_timer_t timer;
};

/* Ask the daemon of remote_agent whether spans lie in its registrations. */
b10_status_t ask_check(struct session *s, uint64_t seq, const char *remote_agent,
                       const uint8_t *spans, size_t spans_length, char *detail, size_t detail_len);
/* Deliver message to remote_agent through its daemon. */
b10_status_t ask_notify(struct session *s, uint64_t seq, const char *remote_agent,
                        const uint8_t *message, size_t length, char *detail, size_t detail_len);

/* The peer's outbound link came up, or failed. */
void ask_link_up(struct ask *a);
void ask_fail(struct ask *a, b10_status_t status, const char *detail);
/* The client left: finish quietly. */
void ask_detach(struct ask *a);

/* The receiving side: answer a Check, deliver a Notify. */
void ask_on_check(struct peer *peer, const struct B10__Peer__Check *check);
void ask_on_notify(struct peer *peer, const struct B10__Peer__Notify *notify);

#endif
