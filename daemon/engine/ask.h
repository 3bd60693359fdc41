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

/*
 * What those answer, decided apart from answering: ask_admit_check and
 * ask_admit_notify count, log, send and deliver nothing; ask_on_check and
 * ask_on_notify then do. The rule that refused, in the order asked:
 */
enum ask_why {
    ASK_ADMIT,
    ASK_MALFORMED,              /* Check: spans not whole, none or past --max-spans, or no
                                 * sending rank's name; Notify: past B10_SYNC_MSG_MAX, or a
                                 * sending rank's name of 256+ bytes */
    ASK_NO_RANK,                /* no rank of that name here */
    ASK_WRONG_UID,              /* its name held by another uid than the descriptor's */
    ASK_NOT_GRANTED,            /* the target's leave missing (access.h); a notice of no sender */
    ASK_OUTSIDE_MEM,            /* Check: a span outside the target's registrations */
    ASK_NOTICES_FULL,           /* Notify: the target's unread notices (--max-notice-bytes) */
};

struct ask_verdict {
    enum ask_why why;
    b10_status_t status;        /* the Result's status; B10_OK: yes (Check), delivered (Notify) */
    char detail[256];           /* the Result's detail: why, or "" */
    struct session *target;     /* admitted: the rank asked about or told */
};

b10_status_t ask_admit_check(struct peer *peer, const struct B10__Peer__Check *check,
                             struct ask_verdict *v);
b10_status_t ask_admit_notify(struct peer *peer, const struct B10__Peer__Notify *notify,
                              struct ask_verdict *v);

#endif
