/*
 * xfer.h — transfers, both roles, and the failure funnel.
 *
 * Sender (S):   submit → (link up) → CONTROL → READY → for each chunk:
 *               gather into a view → send DATA → view back → … → RESULT.
 * Receiver (R): CONTROL → admit (every destination piece inside the target
 *               rank's registrations, tags registered) → post DATA receives
 *               into views → READY → for each DATA: scatter → view back →
 *               … → RESULT after the last scatter completed.
 *
 * Every failure on either side goes through xfer_fail(), the one funnel:
 * it cancels what it can, trusts nothing to have stopped, quarantines the
 * views, tags and id, tells the other side and the client, and lets the
 * daemon go on serving. A transfer object outlives its failure until every
 * UCX request and copy that refers to it has completed.
 */
#ifndef B10D_XFER_H
#define B10D_XFER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "auth.h"
#include "b10d.h"
#include "peer.h"
#include "picks.h"
#include "staging.h"
#include "tags.h"

struct peer;
struct plan;
struct session;
struct wire_op;
struct B10__SubmitXfer;
struct B10__Peer__Control;

struct xfer_role_ops;

enum xfer_role {
    XFER_SEND,
    XFER_RECV,
    XFER_READ,          /* a rank's READ: the remote daemon writes back (role SEND there) */
    XFER_LOCAL,         /* both ranks on this daemon: copies, no wire (xfer-local.c) */
};

enum xfer_state {
    XFER_WAIT_LINK,     /* S: the outbound link is being opened */
    XFER_WAIT_READY,    /* S: CONTROL sent */
    XFER_QUEUED,        /* R: admitted, waiting for room in its peer's staging share */
    XFER_RUNNING,
    XFER_DONE,          /* finished, successfully or not: status says */
};

/* One chunk between taking a view and giving it back. */
struct xfer_slot {
    struct xfer *x;
    bool busy;
    uint32_t chunk;
    uint32_t nchunks;               /* LOCAL: chunks from chunk on that its direct copy covers */
    struct view *view;
    struct wire_op *op;             /* S: DATA send; R: DATA receive */
    struct copy_job *job;           /* R: its scatter, while it runs */
    bool stuck;                     /* R: that scatter outlived --settle-ms (its regions stuck) */
    bool copying;                   /* its gather or scatter runs */
    bool parked;                    /* S: gathered before READY, its DATA not yet posted */
    bool release_at_end;            /* S: failed before READY while its gather ran: the
                                       view comes back clean when that gather ends well */
    bool has_sum;                   /* its chunk's checksum is known (checksum.h) */
    uint64_t sum;                   /* S: computed at the gather; R: from the DATA's trailer */
    uint64_t phase_ns;              /* when its current copy or wire phase began */
};

/*
 * A READ's part of a transfer. A READ is three transfers on two daemons:
 * the READ itself on the asking daemon, which sends the request and waits;
 * the write-back serving it on the holding daemon (a SEND); and the
 * receiver of that write-back back on the asking daemon (a RECV), which
 * lands the bytes for the READ. Each uses the fields its role names; the
 * others stay zero.
 */
struct xfer_read {
    uint8_t *spans;                 /* READ: the request's span tables (remote source, then local destination) */
    size_t spans_length;
    uint64_t id;                    /* write-back: the READ it serves; RECV: CONTROL's read_id */
    struct tag_link link;           /* write-back: the asking link, to report its failure on */
    struct xfer *parent;            /* RECV: the READ this write-back lands for */
    struct xfer *child;             /* READ: the write-back landing for it */
    /* Quiescence (xfer_fail): a failed READ's news waits for its write-back's copies. */
    uint32_t settling;              /* READ: its write-back's copies still run */
    struct xfer *settle_parent;     /* RECV: the READ whose news waits for it */
};

/*
 * Where a transfer's time went, for its "landed" log line: the summed
 * durations of its chunks' copies and DATA operations, and how long no DATA
 * operation of it was in flight while it ran (the wire waiting on the copies).
 */
struct xfer_pipe {
    uint64_t copy_ns, wire_ns;
    uint32_t copies, wire_ops;      /* completed, for the averages */
    uint32_t direct;                /* LOCAL: of copies, region to region with no view */
    double gpu_ms;                  /* of copy_ns, the copies' own time on the GPU */
    uint64_t progress_ns0;          /* the wire's progress time when the transfer began */
    uint64_t wire_idle_ns;
    uint64_t idle_since_ns;
    uint32_t on_wire;
};

struct xfer {
    struct list node;               /* b10d.xfers, while not DONE */
    struct list session_node;       /* session.xfers (S) or session.targets (R) */
    struct link_user peer_user;     /* on peer.xfers or peer.waiting */
    struct list other_node;         /* LOCAL: the other rank's session.locals */
    struct b10d *d;
    enum xfer_role role;
    const struct xfer_role_ops *ops;    /* the role's part of its end (xfer-int.h) */
    enum xfer_state state;
    uint64_t id;                    /* the sending daemon's id for it */
    struct session *session;        /* the local rank; NULL once detached */
    /*
     * LOCAL: the rank whose memory is read and the one written (one of them
     * is session, the other the rank it names); each NULL once it left.
     */
    struct session *from, *to;
    bool local_read;                /* LOCAL: a READ (from is the other rank) */
    bool staged;                    /* LOCAL: its memory needs staging between (no direct copy) */
    uid_t uid;                      /* the local rank's: whose transfer b10ctl says it is */
    bool open_only;                 /* admitted through open regions only: each copy checks again */
    struct peer *peer;
    struct tag_link link;           /* the link's identity when the transfer started */
    struct plan *plan;
    /* LOCAL, picks: the plan still being packed, a part at a time (NULL once whole), the next part's size. */
    struct plan_picker *picker;
    uint32_t picker_part;
    /* LOCAL, picks the GPU copies straight from their indices (xfer-local.c), else NULL. */
    struct xfer_grid *grid;
    uint32_t parts;                 /* ... planned so far, and their time */
    uint64_t parts_ns;
    char local_agent[256];
    char remote_agent[256];

    /*
     * What the rank hears of this transfer's own timings (XferTimes), in
     * uv_hrtime() ns: session.c sets when its request arrived, was decoded
     * and accepted, the engine when its first bytes began to move and when
     * it was over. 0: not reached.
     */
    struct xfer_times {
        uint64_t received_ns, decoded_ns, accepted_ns, first_ns, ended_ns;
        uint64_t plan_ns;           /* of decoded..accepted, plan_build's own */
        uint64_t spans;             /* as submitted, before any merging */
    } times;
    uint64_t started_ms;
    double plan_ms;                 /* S, READ: checking and planning the request (the rank waits) */
    uint64_t ready_ms;              /* S: when READY came (admission took ready_ms - started_ms) */
    uint64_t deadline_ms;           /* monotonic, b10d.now_ms */
    uv_timer_t timer;

    uint32_t next_chunk;            /* next chunk to gather (S) or to post (R) */
    uint32_t chunks_done;           /* sent (S) or landed (R) */
    struct xfer_slot *slots;
    uint32_t nslots;
    struct staging_waiter waiter;
    bool waiting;                   /* in the staging wait list */
    struct xfer_pipe pipe;

    struct wire_op *ready_op;       /* S: READY receive */
    struct wire_op *result_op;      /* S: RESULT receive */
    struct wire_op *cancel_op;      /* R: CANCEL receive */
    /* Replies in their envelopes (auth.h): a few fields, a RESULT's detail. */
    uint8_t ready_buf[64 + AUTH_OVERHEAD];
    uint8_t result_buf[512 + AUTH_OVERHEAD];
    uint8_t cancel_buf[64 + AUTH_OVERHEAD];
    bool tags_registered;
    bool gather_ahead;              /* S: its chunks may be gathered before READY */
    bool data_posted;               /* S: a DATA of it went out */
    struct list ahead_node;         /* S: in b10d.ahead_parked while a chunk is parked */
    bool control_sent;
    bool released;                  /* the client dropped its handle: no done notice */

    /*
     * The sync message: S rides it on CONTROL; R delivers it to the target
     * once landed; a write-back serving a READ delivers it to its own rank
     * once read; a READ carries it in its request.
     */
    uint8_t *sync;
    size_t sync_length;
    struct xfer_read read;          /* a READ, its write-back and their receiver (above) */

    /* What it holds of its peer's share (peer.h): admitted from the peer, with its CONTROL. */
    bool admitted;
    uint64_t control_bytes;
    uint64_t reserve_bytes;         /* R: its window of views, reserved before READY */
    bool reserve_held;
    /* R, or a write-back serving a READ: room kept for the sync message among its rank's notices. */
    size_t notice_reserved;

    /*
     * Quiescence (xfer_fail): a failure is reported once nothing can still
     * write for it, or past --settle-ms as B10_ERR_UNSETTLED.
     */
    uint32_t scatters;              /* R: copies into the rank's memory in flight */
    bool report_due;                /* failed, its news not given yet (in b10d.settling) */
    bool await_ack;                 /* S: waits for the receiver's RESULT: its copies are over */
    bool peer_settled;              /* S: failed by the receiver's RESULT: nothing runs there */
    bool quiet;                     /* R: the sender's CANCEL asked for no RESULT */

    struct xfer_trace *trace;       /* --trace: its steps so far (xfer-trace.c) */
    uint32_t holds;                 /* UCX requests and copies in flight that point here */
    b10_status_t status;
    char detail[256];
};

/*
 * A request that came as rows picked from two grids (SubmitXfer.arena_picks):
 * both grids checked, count indices a side (u32s, each still to be checked
 * against its grid). The checks and the plan take them as they are where
 * they can; the span tables are written only where something must read
 * spans, into spans, which the submitter frees.
 */
struct xfer_picks {
    struct picks_grid local, remote;
    const uint8_t *local_rows, *remote_rows;
    size_t count;
    uint8_t *spans;     /* NULL, or the local table then the remote one */
};

/*
 * A request's plan made ahead, off the loop (session.c does it for requests
 * of many spans, whose planning would hold every other rank, b10ctl and the
 * peers for tens of ms): plan_build of its span tables in the direction its
 * operation moves the bytes, into chunks of one staging view. xfer_submit
 * takes it where its own planning would make the same plan, and says its
 * refusal where planning would refuse; what it leaves, the submitter frees.
 */
struct xfer_planned {
    bool remote_src;                /* a READ's: the other side is the source */
    uint64_t max_chunk;             /* bytes: the staging view it was planned for */
    b10_status_t status;            /* plan_build's */
    struct plan *plan;              /* B10_OK: the plan, until xfer_submit takes it */
    uint64_t ns;                    /* how long planning took */
    char detail[256];               /* else why it refused */
};

/*
 * Plan count spans a side (local, remote: span tables as on the wire) into
 * *planned, whose remote_src and max_chunk the caller set. It reads only
 * the tables and writes only *planned: any thread may run it.
 */
void xfer_plan_ahead(const uint8_t *local, const uint8_t *remote, size_t count,
                     struct xfer_planned *planned);

/*
 * S: check a client's SubmitXfer and create the transfer. It does not move
 * until xfer_start(), which the session calls after its reply is queued, so
 * that the client learns the id before any news of the transfer. picks: the
 * request's rows as picks, its span tables unused (NULL: it came as spans).
 * planned: its plan made ahead from the request's span tables, or NULL.
 */
b10_status_t xfer_submit(struct session *s, const struct B10__SubmitXfer *req,
                         struct xfer_picks *picks, struct xfer_planned *planned,
                         struct xfer **xfer_p, char *detail, size_t detail_len);
void xfer_start(struct xfer *x);
/* The daemon that holds a READ's bytes: write them back to the asker. */
struct B10__Peer__ReadRequest;
void xfer_read_serve(struct peer *peer, const struct B10__Peer__ReadRequest *req, size_t length);
/* R: a CONTROL (of length bytes, its envelope included) arrived on an inbound link of peer. */
void xfer_recv_admit(struct peer *peer, const struct B10__Peer__Control *control, size_t length);

/*
 * The failure funnel (see above). Idempotent: a transfer fails once, and
 * later calls only log. fmt explains the cause for the client and the log.
 */
void xfer_fail(struct xfer *x, b10_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The client asked: cancel. */
void xfer_cancel(struct xfer *x);
/*
 * An operator asked (b10ctl cancel): B10_ERR_CANCELLED on either side. A
 * receiver tells the sender too, which would otherwise learn nothing before
 * its deadline (xfer_fail answers no CANCEL there: those come from the sender).
 */
void xfer_cancel_admin(struct xfer *x, const char *who);
/* Shutting down: give the news of every failed transfer still settling, as it stands. */
void xfer_settle_all(struct b10d *d);
/* Rank s is gone: the local transfers of others through its memory fail and let go of it. */
void xfer_local_forget_rank(struct session *s);
/* Rank s is gone: the news of transfers still settling no longer goes to it. */
void xfer_settle_forget(struct b10d *d, const struct session *s);

const char *xfer_role_name(enum xfer_role role);
/* The chunks its whole plan has (or, planned in parts, will have); 0 without one. */
uint32_t xfer_nchunks(const struct xfer *x);
const char *xfer_state_name(enum xfer_state state);

#endif
