/*
 * xfer-int.h — what the rooms of a transfer share: the object and its
 * funnel (xfer.c) and the four roles around it.
 *
 *   xfer.c        the object, its life cycle, the failure funnel and
 *                 quiescence, slots, copies, the checks every role makes
 *   xfer-send.c   S: plan a WRITE, CONTROL, READY, gather, DATA, RESULT
 *   xfer-recv.c   R: admit a CONTROL, reserve views, receive DATA, scatter
 *   xfer-read.c   a READ: the request, and the write-back that serves one
 *   xfer-local.c  both ranks on this daemon: copies, no wire
 *
 * Only these files include it; the rest of the daemon sees xfer.h.
 */
#ifndef B10D_XFER_INT_H
#define B10D_XFER_INT_H

#include "xfer.h"

#include "access.h"
#include "b10.pb-c.h"
#include "copy.h"
#include "frame.h"
#include "peer.pb-c.h"
#include "wire.h"

struct mem_table;

/* CONTROL bytes all peers' admitted transfers may hold, in --max-peer-control. */
#define XFER_CONTROL_HELD_PEERS 4
#define XFER_STUCK_WHY "lies in a region that a failed transfer's copy may still write (--settle-ms passed)"

/*
 * What differs by role at a transfer's end, one table a role, defined in the
 * role's file: xfer_finish and xfer_fail do what every transfer does and
 * hand the rest to x->ops.
 */
struct xfer_role_ops {
    const char *name;               /* send, recv, read, local: logs and b10ctl */
    /* Landed (xfer_finish): count and log it, tell whom it concerns. */
    void (*landed)(struct xfer *x);
    /* Failed (xfer_fail, state already DONE): count it; tell the other daemon what must stop. */
    void (*failed)(struct xfer *x, b10_status_t status, enum xfer_state was);
    /* The failure's news, once nothing can still write for it (xfer_report). */
    void (*report)(struct xfer *x, b10_status_t cause);
    /* The tags it registered (tags_registered): each one to fn, and how many. */
    void (*each_tag)(struct xfer *x, void (*fn)(struct xfer *x, uint64_t tag));
    uint32_t (*ntags)(const struct xfer *x);
};

extern const struct xfer_role_ops xfer_send_role;     /* xfer-send.c */
extern const struct xfer_role_ops xfer_recv_role;     /* xfer-recv.c */
extern const struct xfer_role_ops xfer_read_role;     /* xfer-read.c */
extern const struct xfer_role_ops xfer_local_role;    /* xfer-local.c */

/* xfer-local.c: a transfer's grid copy (x->grid), with the transfer. Accepts NULL. */
void xfer_local_grid_free(struct xfer_grid *grid);

/* ---------------------------------------------------------------- xfer.c */

/* The "landed" log line's account of where the time went. */
void xfer_pipe_describe(const struct xfer *x, char *out, size_t size);
/* The rank hears how its transfer ended. */
void xfer_tell_rank(struct xfer *x);
/*
 * Parts the role tables share, for a transfer a rank of this node submitted
 * (send, read, local): its failure counted, and its news told to that rank
 * if it is still connected.
 */
void xfer_role_failed(struct xfer *x, b10_status_t status, enum xfer_state was);
void xfer_role_report(struct xfer *x, b10_status_t cause);
/*
 * The journal fields of x's entries (log.h): MESSAGE_ID, TRANSFER, ROLE, PEER
 * (the remote daemon's name), STATUS and RANK, into f; returns how many.
 */
struct xfer_fields {
    char xfer[32], role[16], peer[80], status[64], rank[272];
    const char *v[6];
};
size_t xfer_fields(const struct xfer *x, b10_status_t status, const char *message_id,
                   struct xfer_fields *f);
/* The rank of this node a transfer's sync message is for (LOCAL: the other one), or NULL. */
struct session *xfer_noticed(const struct xfer *x);
/* A failure the other daemon cannot hear of, or that it caused by falling silent. */
bool xfer_peer_silent(b10_status_t status);

/* Pipeline accounting, for the "landed" log line. */
void xfer_pipe_start(struct xfer *x);
void xfer_pipe_copy_done(struct xfer_slot *slot, const struct copy_job *job);
/* A gathered chunk's checksum into its trailer (and B10D_FAULT_FLIP_DATA's flip). */
void xfer_chunk_seal(struct xfer_slot *slot, const struct copy_job *job);
/* A chunk's bytes or its trailer changed on the way: counted, logged, x fails DATA_CORRUPT. */
void xfer_chunk_corrupt(struct xfer *x, uint32_t chunk, const char *what);
void xfer_pipe_wire_begin(struct xfer_slot *slot);
void xfer_pipe_wire_end(struct xfer_slot *slot);

struct xfer *xfer_new(struct b10d *d, enum xfer_role role, uint64_t id, uint32_t budget_ms);
/*
 * A transfer rank s submitted, over plan (now the transfer's), planned since
 * checked_from: a fresh id, its deadline's budget, its trace begun. NULL
 * without memory, the plan freed.
 */
struct xfer *xfer_new_submitted(struct b10d *d, enum xfer_role role, struct session *s,
                                struct plan *plan, uint32_t deadline_ms, uint64_t checked_from,
                                uint64_t plan_ns);
/*
 * A request's two sides, the rank's own (local) and the other's: span
 * tables, or picks (not NULL) whose tables are written on first need.
 */
struct xfer_rows {
    size_t count;
    const uint8_t *local, *remote;      /* count spans each; NULL until written, with picks */
    struct xfer_picks *picks;
    struct xfer_planned *planned;       /* the spans' plan made ahead, or NULL (xfer.h) */
};

/*
 * The rows' span tables, written from the picks where they are not yet:
 * B10_OK, B10_ERR_INVALID_ARG for an index outside its grid or grids of
 * other lengths (named in detail), B10_ERR_NO_MEMORY.
 */
b10_status_t xfer_rows_spans(struct xfer_rows *rows, char *detail, size_t detail_len);

/*
 * Every row of grid in mem's regions, none of them stuck: a walk a base,
 * each over all its rows (a KV pool's layer is one region), where a check
 * a span walked 10^5 times. Only for grids of no more bases than picks
 * (count): a walk a base must cost no more than a check a span. False
 * says nothing: the spans decide.
 */
bool xfer_grid_inside(struct mem_table *mem, const struct picks_grid *grid, size_t count);

/*
 * plan_build of a rank's request into chunks of one staging view, and how
 * long it took (*ns_p, for XferTimes): the planner's own cost, apart from
 * the checks around it. The remote side is the source when remote_src.
 * From picks where plan_build_picks can; the plan made ahead where there is
 * one of this direction and view (taken from rows->planned).
 */
b10_status_t xfer_plan(struct b10d *d, struct xfer_rows *rows, bool remote_src,
                       struct plan **plan_p, uint64_t *ns_p, char *detail, size_t detail_len);
/* Free a finished transfer once nothing in flight can call back into it. */
void xfer_maybe_free(struct xfer *x);
/* Past its deadline: failed now (true), or still in time. */
bool xfer_past_deadline(struct xfer *x);
/* Undo a transfer made here that never started: nothing posted, nothing sent. */
void xfer_discard(struct xfer *x);
/* Success: every byte landed (R, LOCAL), or the receiver said so (S). */
void xfer_finish(struct xfer *x);
/* A failed transfer whose copies just ended: its news, if nothing else still writes. */
void xfer_settle_check(struct xfer *x);
void xfer_report(struct xfer *x, b10_status_t status);

/* A message of x's for the other daemon, on x's link (READY, CANCEL); best effort. */
void xfer_tell_peer(struct xfer *x, enum tag_kind kind, B10__Peer__Msg *msg);
b10_status_t xfer_decode_reply(struct xfer *x, const uint8_t *buf, size_t length,
                               B10__Peer__Msg__BodyCase want, B10__Peer__Msg **msg_p);
/* Post the receive of a small message of the peer's for x (its tag registered); false: x failed. */
bool xfer_post_reply(struct xfer *x, uint64_t tag, uint8_t *buf, size_t length, wire_done_cb *cb,
                     struct wire_op **op_p, const char *what);

/* Views and slots. */
bool xfer_view_room(const struct xfer *x);
void xfer_view_count(struct xfer *x, const struct view *view);
/* Wait for a free view; the role's pump runs again when one is given back. */
void xfer_wait_for_view(struct xfer *x);
void xfer_ahead_reclaim(struct b10d *d);
struct xfer_slot *xfer_free_slot(struct xfer *x);
void xfer_slot_release(struct xfer_slot *slot);
bool xfer_slot_op_done(struct xfer_slot *slot);

/*
 * Post slot's DATA (send or receive) into its view. A transfer of one
 * chunk goes on the main worker: a lane gains it nothing and costs a
 * thread handoff each way at each end (60 of 280 us of a small WRITE on
 * two cores). Others go on lane chunk mod lanes. Both ends decide alike,
 * from the chunk count CONTROL carries (peer protocol 5). The wire's status:
 * when not B10_OK nothing was posted, and the caller fails x with the
 * status its role reports for it.
 */
b10_status_t xfer_data_post(struct xfer_slot *slot, bool send, wire_done_cb *cb);

/* Copies between a slot's view and a rank's memory. */
b10_status_t xfer_copy_chunk(struct xfer_slot *slot, bool gather, copy_done_fn *done);
void xfer_scatter_over(struct xfer *x, struct xfer_slot *slot, struct copy_job *job);
/*
 * A copy of slot's ended (job: gather, scatter or direct). True when the
 * transfer still runs and the copy succeeded, its time counted; else all is
 * done here: a late completion released (a write's may let settled news go),
 * a failed copy through the funnel.
 */
bool xfer_copy_ended(struct xfer_slot *slot, struct copy_job *job, b10_status_t status);
/* Copying into the destination rank's memory was refused (st) for chunk: fail x saying why. */
void xfer_fail_dst(struct xfer *x, b10_status_t st, uint32_t chunk, const char *rank);

/*
 * Checks every role makes. xfer_check_local checks one side of rows (the
 * remote one when remote_side) against s's registrations. Where the side
 * checked came as rows of a grid (for check_dst: grid not NULL), a grid
 * whose every base's rows lie in regions, none stuck, passes whole; any
 * other is checked span by span, which names what is wrong.
 */
b10_status_t xfer_admit_limits(struct session *s, size_t count, char *detail, size_t detail_len);
b10_status_t xfer_check_local(struct session *s, struct xfer_rows *rows, bool remote_side,
                              char *detail, size_t detail_len);
b10_status_t xfer_check_dst(const struct plan *plan, struct mem_table *mem,
                            const struct picks_grid *grid, char *detail, size_t detail_len);
b10_status_t xfer_peer_limits(struct peer *peer, uint32_t deadline_ms, size_t control_bytes,
                              char *detail, size_t detail_len);
bool xfer_name_ok(const char *name);
b10_status_t xfer_set_sync(struct xfer *x, const uint8_t *sync, size_t length);
uint32_t xfer_budget(struct b10d *d, uint32_t deadline_ms);

/* ---------------------------------------------------------------- xfer-trace.c */

enum xfer_step {
    XS_PLANNED,         /* S, READ, LOCAL: checked and planned */
    XS_CONTROL,         /* S: CONTROL sent; READ: its request */
    XS_ADMITTED,        /* R: CONTROL checked, tags registered */
    XS_READY,           /* S: READY heard; R: READY sent */
    XS_GATHER,          /* a chunk's gather submitted ... */
    XS_GATHERED,        /* ... and done */
    XS_SENT,            /* S: its DATA sent */
    XS_POSTED,          /* R: its DATA receive posted ... */
    XS_ARRIVED,         /* ... and the DATA in */
    XS_SCATTER,         /* its scatter submitted ... */
    XS_SCATTERED,       /* ... and done */
    XS_COPY,            /* LOCAL: a direct copy submitted ... */
    XS_COPIED,          /* ... and done */
    XS_RESULT,          /* S, READ: RESULT heard; R: RESULT sent */
    XS_TOLD,            /* the rank's done notice queued */
};
/* x's first bytes begin to move now, unless some did before (a write-back's: its READ's too). */
void xfer_times_first(struct xfer *x);

#define XFER_TRACE_NO_CHUNK UINT32_MAX

/* With --trace: start x's trace at t0_ns (uv_hrtime), record steps, log it once. */
void xfer_trace_begin(struct xfer *x, uint64_t t0_ns);
void xfer_trace_step(struct xfer *x, enum xfer_step step, int64_t chunk);
void xfer_trace_log(struct xfer *x);
#define xfer_trace(x, step) xfer_trace_step((x), (step), XFER_TRACE_NO_CHUNK)

/* ---------------------------------------------------------------- xfer-send.c */

/* rows: s's side local, the source but for XFER_READ. */
b10_status_t xfer_send_new(struct session *s, struct peer *peer, const char *remote_agent,
                           enum xfer_role role, struct xfer_rows *rows, uint32_t deadline_ms,
                           const uint8_t *sync, size_t sync_length, struct xfer **xfer_p,
                           char *detail, size_t detail_len);
void xfer_send_pump(struct xfer *x);
/* The outbound link of x's peer is up (now, or once peer_use's wait ended): CONTROL goes. */
void xfer_send_link_up(struct xfer *x);
/* The RESULT of a WRITE or a READ (wire_done_cb). */
void xfer_send_on_result(void *arg, b10_status_t status, size_t length);

/* ---------------------------------------------------------------- xfer-recv.c */

void xfer_recv_begin(struct xfer *x);
void xfer_recv_pump(struct xfer *x);

/*
 * The admission of a CONTROL (xfer_recv_admit) in two: xfer_recv_check
 * decides, and counts, logs, sends and holds nothing but the plan it
 * decoded; xfer_recv_admit then refuses (counts, logs, sends the RESULT) or
 * makes the transfer. The rule that refused, in the order they are asked:
 */
enum xfer_recv_why {
    XR_ADMIT,
    XR_MALFORMED,               /* another link's generation, or a rank name of 0 or 256+ bytes */
    XR_NO_RANK,                 /* no rank of that name here */
    XR_WRONG_UID,               /* its name held by another uid than the descriptor's */
    XR_NO_READ,                 /* a write-back no READ of the rank waits for */
    XR_NOT_GRANTED,             /* the target's leave missing (access.h), or a notice unpaired */
    XR_DRAINING,                /* this daemon is stopping */
    XR_QUARANTINE_FULL,         /* this daemon's quarantine past --quarantine-budget */
    XR_PEER_LIMITS,             /* the peer's share (xfer_peer_limits) */
    XR_NOTICES_FULL,            /* the target's unread notices (--max-notice-bytes) */
    XR_BAD_PIECES,              /* the pieces do not decode (plan_decode*) */
    XR_HELD_LIMITS,             /* the peer's share, slots charged as full pieces */
    XR_OUTSIDE_READ,            /* a write-back beyond what its READ asked for */
    XR_NOT_OPEN,                /* open regions only, and a piece beyond them */
    XR_OUTSIDE_DST,             /* a piece outside the target's regions, or in a stuck one */
};

struct xfer_recv_verdict {
    enum xfer_recv_why why;
    b10_status_t status;        /* the RESULT's status when refused; B10_OK: admit */
    char detail[256];           /* refused: why, for the log and the RESULT */
    /* Admitted: */
    struct session *target;     /* the rank written into */
    struct xfer *parent;        /* the READ a write-back serves, or NULL */
    struct access_origin origin;
    enum access_grant grant;
    struct plan *plan;          /* decoded: the caller's to keep or free */
    size_t held;                /* CONTROL bytes charged to the peer (xfer_recv_check_plan) */
};

/*
 * Decide whether peer's CONTROL of length bytes may become a transfer:
 * B10_OK with v's plan (the caller's), or the status a refusal sends and
 * v's why and detail; a refusal leaves no plan.
 */
b10_status_t xfer_recv_check(struct peer *peer, const B10__Peer__Control *control, size_t length,
                             struct xfer_recv_verdict *v);

/* ---------------------------------------------------------------- xfer-read.c */

b10_status_t xfer_read_new(struct session *s, struct peer *peer, const char *remote_agent,
                           const B10__SubmitXfer *req, struct xfer_rows *rows,
                           struct xfer **xfer_p, char *detail, size_t detail_len);
void xfer_read_link_up(struct xfer *x);
/* The READ of rank s from peer that a write-back named read_id lands for, if one waits. */
struct xfer *xfer_read_waiting(struct b10d *d, struct peer *peer, struct session *s,
                               uint64_t read_id);

/* ---------------------------------------------------------------- xfer-local.c */

b10_status_t xfer_local_new(struct session *s, struct peer *self, const B10__SubmitXfer *req,
                            struct xfer_rows *rows, struct xfer **xfer_p, char *detail,
                            size_t detail_len);
void xfer_local_pump(struct xfer *x);

#endif
