/*
 * wire.h — the UCX room: context, workers, endpoints, tag messages, memory
 * registration. The only room that includes UCX headers (wire.c, and lane.c
 * for its data lanes); everything else speaks b10 statuses and these opaque
 * types.
 *
 * The loop thread's worker carries everything but bulk data. With
 * --wire-lanes N, bulk data (wire_send_bulk / wire_recv_bulk) moves on N
 * more workers, each on a thread of its own, so that several cores copy at
 * once; a peer is reached on as many lanes as both ends have.
 *
 * Completion always arrives through a callback run on the loop thread, after
 * the worker's progress, never from inside the call that posted the
 * operation: callers may post from anywhere, even from a callback.
 */
#ifndef B10D_WIRE_H
#define B10D_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "b10d.h"
#include "wireaddr.h"

/*
 * Bit 63 of a peer tag: set for the control class (HELLO and CONTROL, which
 * a receiver probes for), clear for everything else (mem/tags.h derives them).
 */
#define TAG_CLASS_CONTROL (UINT64_C(1) << 63)

/* Data lanes a wire may have; its address (wireaddr.h) grows by one worker address for each. */
#define WIRE_MAX_LANES WIREADDR_MAX_LANES

struct wire;
struct wire_ep;
struct wire_op;

/*
 * An operation finished: B10_OK, B10_ERR_CANCELLED after wire_cancel() or a
 * closed endpoint, B10_ERR_PEER_PROTOCOL for a message larger than the
 * buffer, B10_ERR_PEER_LOST for a transport failure. length is the bytes
 * received (receives only).
 */
typedef void wire_done_cb(void *arg, b10_status_t status, size_t length);

struct wire_hooks {
    void *arg;
    /*
     * A control-class message waits (its tag has TAG_CLASS_CONTROL) and
     * claims length bytes: return a cookie to take it, NULL to have it
     * dropped unread. Nothing is allocated for it before this says yes, so
     * the callee bounds what a peer can make this daemon hold.
     */
    void *(*take_control)(void *arg, uint64_t tag, size_t length);
    /*
     * A message take_control took, with its cookie: buf is the callee's to
     * free, or NULL when the receive failed (length is then the claimed one,
     * so that whatever take_control charged can be given back).
     */
    void (*on_control)(void *arg, void *cookie, uint64_t tag, void *buf, size_t length);
    /* UCX reported an endpoint failed; close it with wire_ep_close(). */
    void (*on_ep_error)(void *arg, void *ep_user, b10_status_t status);
    /*
     * A data-class message waits that no posted receive took. Return true if
     * no receive ever will (its tag is unknown or quarantined): it is then
     * taken into a small scratch buffer and dropped, so that a late or
     * stray message neither lands anywhere nor sits in UCX for good. May be NULL.
     */
    bool (*on_data)(void *arg, uint64_t tag, size_t length);
};

/*
 * network false: the worker gets UCX's self transport alone, whatever UCX_TLS
 * says, and no data lanes. A daemon that serves only its own node's ranks then
 * opens no socket for anyone to reach: UCX parses a connection request before
 * b10d can check anything, so a listener nobody may use is attack surface only.
 * B10_ERR_NO_MEMORY, or B10_ERR_IO when UCX would not start (logged with its reason).
 */
b10_status_t wire_create(struct b10d *d, const struct wire_hooks *hooks, bool network, struct wire **wire_p);
/*
 * Destroy the data lanes, cancel what is posted on them and deliver every
 * completion, waiting (bounded) for them to settle; endpoints and memory
 * registrations stay usable. Before the owners' buffers go: a cancelled
 * send's completion gives its staging view back.
 */
void wire_quiesce(struct wire *wire);
/* Close every endpoint, cancel what is posted, and wait (bounded) for it to settle. */
void wire_destroy(struct wire *wire);

/* Name this daemon's doors (door.h) in its address: once, at the start. B10_ERR_NO_MEMORY. */
struct wireaddr_door;
b10_status_t wire_set_doors(struct wire *wire, const struct wireaddr_door *doors, unsigned n);
/* This worker's address, for the agent descriptor. */
void wire_address(struct wire *wire, const void **addr_p, size_t *length_p);

/*
 * An endpoint to the worker address a peer gave out (wireaddr.h).
 * B10_ERR_INVALID_ARG: the address is malformed; B10_ERR_PEER_UNREACHABLE:
 * UCX could not make an endpoint of it (logged); B10_ERR_NO_MEMORY.
 */
b10_status_t wire_ep_create(struct wire *wire, const void *addr, size_t length, void *user,
                            struct wire_ep **ep_p);
/*
 * Close an endpoint. Outstanding operations on it complete with an error;
 * the memory they touch stays the caller's problem until they do.
 */
void wire_ep_close(struct wire_ep *ep);
/* The owner that on_ep_error names changes (an endpoint made for a handshake joins its peer). */
void wire_ep_set_user(struct wire_ep *ep, void *user);
/* The transports of the endpoint's lanes, e.g. "tcp/lo" or "sysv/memory cma/memory". */
const char *wire_ep_transports(struct wire_ep *ep);
/* Data lanes shared with the peer (0: bulk data goes with everything else). */
unsigned wire_ep_lanes(const struct wire_ep *ep);

/* Register memory with UCX. B10_ERR_NO_MEMORY or B10_ERR_IO when it refused (logged). */
b10_status_t wire_mem_map(struct wire *wire, void *addr, size_t length, void **memh_p);
void wire_mem_unmap(struct wire *wire, void *memh);

/*
 * Posting an operation: B10_OK, after which the callback runs once; or why
 * it was not posted, and no callback comes: B10_ERR_NO_MEMORY, what UCX's
 * refusal means (as wire_done_cb's statuses, logged), or B10_ERR_CANCELLED
 * once the wire is being destroyed.
 *
 * memh may be NULL. The buffer must stay untouched until the callback ran.
 */
b10_status_t wire_send(struct wire_ep *ep, uint64_t tag, const void *buf, size_t length,
                       void *memh, wire_done_cb *cb, void *arg, struct wire_op **op_p);
/* Send buf and free() it on completion: the caller hands it over (freed now when refused). */
b10_status_t wire_send_owned(struct wire_ep *ep, uint64_t tag, void *buf, size_t length);
/*
 * Receive the message with exactly this tag, which comes by the endpoint
 * `by` (its worker receives it: the link to itself has one of its own), or
 * NULL: by any endpoint of the loop's worker.
 */
b10_status_t wire_recv(struct wire *wire, const struct wire_ep *by, uint64_t tag, void *buf,
                       size_t length, void *memh, wire_done_cb *cb, void *arg,
                       struct wire_op **op_p);
/*
 * Bulk data, spread over the data lanes shared with the endpoint's peer: the
 * same key at both ends (a chunk's index, say) picks the same lane. Without
 * lanes, wire_send and wire_recv. Unlike those, a refusal by UCX arrives
 * through the callback, as the lane thread posts later.
 */
b10_status_t wire_send_bulk(struct wire_ep *ep, uint32_t key, uint64_t tag, const void *buf,
                            size_t length, void *memh, wire_done_cb *cb, void *arg,
                            struct wire_op **op_p);
b10_status_t wire_recv_bulk(struct wire_ep *ep, uint32_t key, uint64_t tag, void *buf,
                            size_t length, void *memh, wire_done_cb *cb, void *arg,
                            struct wire_op **op_p);
/*
 * Ask UCX to cancel op. Its callback still runs, later, with whatever
 * status it ends with: the caller must keep the buffer until then.
 */
void wire_cancel(struct wire *wire, struct wire_op *op);

/* Operations posted and not yet completed, over all endpoints. */
uint32_t wire_outstanding(const struct wire *wire);
/* Time spent inside ucp_worker_progress since the wire was made, all workers together. */
uint64_t wire_progress_ns(const struct wire *wire);

#endif
