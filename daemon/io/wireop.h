/*
 * wireop.h — one operation of the wire room (wire.c, lane.c): a send, a
 * receive or a probed message on a worker, and the commands and reports that
 * cross between the loop and a data lane. Private to the room.
 */
#ifndef B10D_WIREOP_H
#define B10D_WIREOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ucp/api/ucp.h>

#include "list.h"
#include "wire.h"

struct lane;
struct lane_ep;

enum wire_op_kind {
    WIRE_OP_SEND,
    WIRE_OP_RECV,
    WIRE_OP_CONTROL,        /* a probed control message, for the hooks */
    WIRE_OP_STRAY,          /* a message taken only to be dropped */
    /* Commands to a lane. */
    LANE_EP_OPEN,
    LANE_EP_CLOSE,
    LANE_CANCEL,
    LANE_DROP,
    /* Reports from a lane (a SEND or RECV comes back as itself). */
    LANE_EP_ERROR,
    LANE_EP_CLOSED,
    LANE_UNEXPECTED,
};

struct wire_op {
    struct list node;           /* the queue or list that holds it now */
    enum wire_op_kind kind;
    struct wire *wire;
    struct lane *lane;          /* NULL on the loop's own worker */
    ucp_worker_h worker;        /* the loop's worker it was posted on (wire.c), to cancel it */
    uint64_t id;                /* lane operations: what a CANCEL names */
    void *req;                  /* the UCX request while in flight */
    bool done;
    ucs_status_t status;
    size_t length;              /* received, or reported (UNEXPECTED) */
    uint64_t tag;               /* to send, receive or drop; the sender's tag once received */
    void *buf;                  /* lane SEND and RECV: what the loop asked for */
    size_t size;
    void *memh;
    struct lane_ep *lep;        /* SEND, EP_OPEN, EP_CLOSE (set, unused, for RECV) */
    struct wire_ep *wep;        /* EP_ERROR, EP_CLOSED: whose */
    struct wire_op *target;     /* CANCEL: the operation, and its id (the pointer may be reused) */
    uint64_t target_id;
    wire_done_cb *cb;
    void *arg;
    void *owned;                /* freed after delivery */
    void *cookie;               /* CONTROL: what take_control answered, for on_control */
    size_t claimed;             /* CONTROL: the length the probe saw */
    uint64_t probed_tag;        /* CONTROL: the tag the probe saw (tag is set on success only) */
};

#endif
