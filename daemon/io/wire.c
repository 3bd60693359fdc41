/* wire.c — see wire.h. */
#include "wire.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ucp/api/ucp.h>

#include "cpuload.h"
#include "lane.h"
#include "wireaddr.h"

/*
 * Operations (struct wire_op, in wireop.h) are ours; the UCX request is only
 * borrowed. UCX may call a callback inline from the posting call (a probed
 * message already here, say), so callbacks only record the outcome and queue
 * the op; the loop delivers queued completions after progress. A caller
 * therefore always has its op handle before its callback runs, and never sees
 * a callback from inside a wire_* call. Lanes report the same way, through
 * wire.lane_wake.
 */

struct wire_ep {
    struct wire *wire;
    ucp_ep_h ep;
    void *user;
    unsigned nlanes;            /* data lanes shared with the peer: the fewer of both ends' */
    struct lane_ep *lanes[WIRE_MAX_LANES];
    unsigned lanes_open;        /* lane endpoints not yet reported closed */
    bool closed;                /* by its owner: freed once lanes_open is 0 */
    bool self;                  /* this daemon's link to itself, on wire.self_worker */
    char transports[128];
};

struct wire {
    struct b10d *d;
    struct wire_hooks hooks;
    ucp_context_h context;
    ucp_worker_h worker;
    ucp_address_t *address;
    size_t address_length;
    int efd;
    uv_poll_t poll;
    uv_prepare_t prepare;
    uv_idle_t idle;
    uv_timer_t tick;
    bool tick_on;
    uint32_t outstanding;           /* posted operations not yet delivered */
    uint32_t outstanding_main;      /* ... of them on the loop's worker */
    struct list completed;          /* struct wire_op, waiting for delivery */
    struct list strays;             /* struct wire_op: stray messages still being dropped */
    uint32_t closing;               /* endpoint close requests in flight */
    bool idle_on;
    uint64_t progress_ns;           /* inside ucp_worker_progress, in all */
    unsigned nlanes;
    struct lane *lanes[WIRE_MAX_LANES];
    bool lanes_gone;                /* destroyed: nothing is posted to them any more */
    bool lanes_settled;             /* and nothing of theirs is left in flight */
    uv_async_t lane_wake;           /* a lane has reports */
    uint64_t next_op_id;
    uint8_t *packed;                /* this wire's address: every worker's */
    size_t packed_length;
    /*
     * This daemon's link to itself (the checks and notices between its own
     * ranks) runs on a worker of its own, in a context of UCX's self
     * transport alone: an endpoint to the loop's worker would reach it
     * through its own TCP listener, and so the gate would have to let this
     * host's addresses in, and with them every local user (gate.h).
     */
    ucp_context_h self_context;
    ucp_worker_h self_worker;
    ucp_address_t *self_address;
    size_t self_address_length;
};

/* What an operation's UCX status means for its transfer (wire_done_cb). */
static b10_status_t wire_status(ucs_status_t st)
{
    switch (st) {
    case UCS_OK: return B10_OK;
    case UCS_ERR_CANCELED: return B10_ERR_CANCELLED;
    case UCS_ERR_MESSAGE_TRUNCATED: return B10_ERR_PEER_PROTOCOL;
    case UCS_ERR_NO_MEMORY: return B10_ERR_NO_MEMORY;
    default: return B10_ERR_PEER_LOST;
    }
}

/* ... and what it means for this daemon's own setup: a context, a worker, a registration. */
static b10_status_t wire_local_status(ucs_status_t st)
{
    switch (st) {
    case UCS_ERR_NO_MEMORY: return B10_ERR_NO_MEMORY;
    case UCS_ERR_INVALID_PARAM: return B10_ERR_INVALID_ARG;
    default: return B10_ERR_IO;
    }
}

/* UCX's callbacks: record, free the request, queue for delivery. */
static void wire_op_finish(struct wire_op *op, void *request, ucs_status_t st, size_t length,
                           uint64_t sender_tag)
{
    op->done = true;
    op->status = st;
    op->length = length;
    op->tag = sender_tag;
    op->req = NULL;
    if (request != NULL)
        ucp_request_free(request);
    if (op->kind == WIRE_OP_STRAY)
        list_remove(&op->node);
    list_insert_tail(&op->wire->completed, &op->node);
}

static void wire_send_done(void *request, ucs_status_t st, void *user_data)
{
    wire_op_finish(user_data, request, st, 0, 0);
}

static void wire_recv_done(void *request, ucs_status_t st, const ucp_tag_recv_info_t *info,
                           void *user_data)
{
    wire_op_finish(user_data, request, st, st == UCS_OK ? info->length : 0,
                   st == UCS_OK ? info->sender_tag : 0);
}

/* Hand every completed operation to its owner, in completion order. */
static void wire_deliver(struct wire *wire)
{
    while (!list_empty(&wire->completed)) {
        struct wire_op *op = list_entry(wire->completed.next, struct wire_op, node);
        list_remove(&op->node);
        wire->outstanding--;
        if (op->lane == NULL)
            wire->outstanding_main--;
        if (op->status != UCS_OK && op->status != UCS_ERR_CANCELED)
            log_debug("ucx operation failed: %s", ucs_status_string(op->status));
        if (op->kind == WIRE_OP_CONTROL) {
            if (op->status == UCS_OK && op->length == op->claimed) {
                wire->hooks.on_control(wire->hooks.arg, op->cookie, op->tag, op->owned, op->length);
                op->owned = NULL;
            } else {
                log_warning("control message lost: %s", ucs_status_string(op->status));
                wire->hooks.on_control(wire->hooks.arg, op->cookie, op->probed_tag, NULL,
                                       op->claimed);
            }
        } else if (op->cb != NULL) {
            op->cb(op->arg, wire_status(op->status), op->length);
        }
        free(op->owned);
        free(op);
    }
}

static void wire_on_idle(uv_idle_t *handle);

/*
 * Finish posting: UCS_OK means done at once (no callback comes), a pointer
 * means in flight unless the callback already ran inline, an error means
 * refused.
 */
static b10_status_t wire_posted(struct wire *wire, struct wire_op *op, ucs_status_ptr_t sp,
                                size_t immediate_length, uint64_t immediate_tag,
                                struct wire_op **op_p)
{
    if (UCS_PTR_IS_ERR(sp)) {
        log_warning("ucx refused an operation: %s", ucs_status_string(UCS_PTR_STATUS(sp)));
        if (op->done)
            list_remove(&op->node);
        free(op);
        return wire_status(UCS_PTR_STATUS(sp));
    }
    if (sp == NULL)
        wire_op_finish(op, NULL, UCS_OK, immediate_length, immediate_tag);
    else if (!op->done)
        op->req = sp;
    wire->outstanding++;
    wire->outstanding_main++;
    /* Nothing will signal the loop about the link to itself: it comes back on its own. */
    if (op->worker == wire->self_worker && !wire->idle_on) {
        wire->idle_on = true;
        uv_idle_start(&wire->idle, wire_on_idle);
    }
    if (op_p != NULL)
        *op_p = op;
    return B10_OK;
}

static struct wire_op *wire_op_new(struct wire *wire, enum wire_op_kind kind, wire_done_cb *cb,
                                   void *arg, void *owned)
{
    struct wire_op *op = calloc(1, sizeof(*op));
    if (op == NULL)
        return NULL;
    op->kind = kind;
    op->wire = wire;
    op->id = ++wire->next_op_id;
    op->cb = cb;
    op->arg = arg;
    op->owned = owned;
    list_init(&op->node);
    return op;
}

/* Receive a probed message into buf (take bytes: less truncates it) for op. */
static ucs_status_ptr_t wire_msg_recv(ucp_worker_h worker, ucp_tag_message_h msg, void *buf,
                                      size_t take, struct wire_op *op, ucp_tag_recv_info_t *info)
{
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        UCP_OP_ATTR_FIELD_RECV_INFO,
        .cb.recv = wire_recv_done,
        .user_data = op,
        .recv_info.tag_info = info,
    };
    op->worker = worker;
    return ucp_tag_msg_recv_nbx(worker, buf, take, msg, &param);
}

/* Take a probed message into 64 bytes of scratch, which UCX truncates: dropped unread. */
static void wire_drop(struct wire *wire, ucp_worker_h worker, ucp_tag_message_h msg, uint64_t tag)
{
    ucp_tag_recv_info_t info;
    void *buf = malloc(64);
    struct wire_op *op = buf != NULL ? wire_op_new(wire, WIRE_OP_STRAY, NULL, NULL, buf) : NULL;

    if (op == NULL) {
        /* Received nowhere it stays in UCX; the next probe sees it again. */
        log_err("no memory to drop a message");
        free(buf);
        return;
    }
    list_insert_tail(&wire->strays, &op->node);
    ucs_status_ptr_t sp = wire_msg_recv(worker, msg, buf, 64, op, &info);
    if (UCS_PTR_IS_ERR(sp)) {
        /* Truncated at once (an eager message): dropped, which is the point. */
        list_remove(&op->node);
        free(buf);
        free(op);
        return;
    }
    wire_posted(wire, op, sp, 0, tag, NULL);
}

/*
 * Take every control-class message waiting in the worker. Its size and tag
 * are the sender's claims: the hooks say whether to take it at all, before
 * anything is allocated for it.
 */
static void wire_probe(struct wire *wire, ucp_worker_h worker)
{
    ucp_tag_recv_info_t info;
    ucp_tag_message_h msg;

    while ((msg = ucp_tag_probe_nb(worker, TAG_CLASS_CONTROL, TAG_CLASS_CONTROL, 1,
                                   &info)) != NULL) {
        uint64_t tag = info.sender_tag;
        size_t length = info.length;
        void *cookie = wire->hooks.take_control(wire->hooks.arg, tag, length);
        if (cookie == NULL) {
            wire_drop(wire, worker, msg, tag);
            continue;
        }
        void *buf = malloc(length ? length : 1);
        struct wire_op *op = buf != NULL ? wire_op_new(wire, WIRE_OP_CONTROL, NULL, NULL, buf) : NULL;
        if (op == NULL) {
            log_err("no memory for a %zu-byte control message: dropped", length);
            free(buf);
            wire->hooks.on_control(wire->hooks.arg, cookie, tag, NULL, length);
            wire_drop(wire, worker, msg, tag);
            continue;
        }
        op->cookie = cookie;
        op->claimed = length;
        op->probed_tag = tag;
        ucs_status_ptr_t sp = wire_msg_recv(worker, msg, buf, length, op, &info);
        if (wire_posted(wire, op, sp, length, tag, NULL) != B10_OK) {
            free(buf);
            wire->hooks.on_control(wire->hooks.arg, cookie, tag, NULL, length);
        }
    }
}

/*
 * Drop the data-class messages that wait in the worker for a receive that
 * will never be posted. UCX shows only the first waiting message: when that
 * one is still expected (its receive comes soon), the rest waits for a later
 * round.
 */
static void wire_probe_stray(struct wire *wire, ucp_worker_h worker)
{
    ucp_tag_recv_info_t info;
    ucp_tag_message_h msg;

    if (wire->hooks.on_data == NULL)
        return;
    for (int n = 0; n < 64; n++) {
        if (ucp_tag_probe_nb(worker, 0, TAG_CLASS_CONTROL, 0, &info) == NULL)
            return;
        if (!wire->hooks.on_data(wire->hooks.arg, info.sender_tag, info.length))
            return;
        msg = ucp_tag_probe_nb(worker, info.sender_tag, UINT64_MAX, 1, &info);
        if (msg == NULL)
            return;
        /* Truncated into 64 bytes: UCX completes it (and a rendezvous sender) with an error. */
        wire_drop(wire, worker, msg, info.sender_tag);
    }
}

static void wire_on_idle(uv_idle_t *handle)
{
    (void)handle;
    /* Nothing here: an active idle handle only keeps the loop from blocking; prepare drains. */
}

/*
 * A bounded amount of progress, then back to the loop: a large message makes
 * progress report work for milliseconds on end, and meanwhile copy
 * completions (uv_async) and timers must be served, or the pipeline stalls
 * behind the wire. When the worker is idle, arm its event fd so that the loop
 * may sleep until UCX has news; UCS_ERR_BUSY from arm means news came in
 * meanwhile, so the loop comes straight back.
 */
#define WIRE_PROGRESS_BATCH 32

static void wire_on_tick(uv_timer_t *handle);

static void wire_drain(struct wire *wire)
{
    /*
     * The worker of the link to itself has no event fd (UCX's self transport
     * gives none): what is sent on it was posted from this thread, which
     * then asks the loop to come back (wire_posted), and it is progressed
     * here on every turn, beside the loop's worker.
     */
    bool self_busy = false;
    for (int i = 0; i < WIRE_PROGRESS_BATCH; i++) {
        uint64_t t = uv_hrtime();
        unsigned self_n = ucp_worker_progress(wire->self_worker);
        unsigned n = ucp_worker_progress(wire->worker) + self_n;
        wire->progress_ns += uv_hrtime() - t;
        self_busy = self_n > 0;
        /* Deliver at once: a completed receive's scatter then starts while
         * the next progress call copies the next chunk, not after the batch. */
        if (!list_empty(&wire->completed))
            wire_deliver(wire);
        if (n == 0)
            break;
    }
    wire_probe(wire, wire->worker);
    wire_probe(wire, wire->self_worker);
    wire_probe_stray(wire, wire->worker);
    wire_probe_stray(wire, wire->self_worker);
    wire_deliver(wire);
    /*
     * Arm even when the batch ran out with work left: UCS_ERR_BUSY then brings
     * the loop straight back, while a worker whose fd will signal lets it sleep.
     */
    ucs_status_t st = ucp_worker_arm(wire->worker);
    bool busy = st == UCS_ERR_BUSY;
    if (st != UCS_OK && !busy)
        log_err("ucp_worker_arm: %s", ucs_status_string(st));
    /*
     * Completions already queued are delivered on the next turn without
     * sleeping. While operations are outstanding, --progress spin keeps the
     * loop polling the worker (the data path's best latency, one core busy);
     * --progress event sleeps on the event fd, with a 1 ms tick standing
     * guard for transports that progress without signalling it. Spinning
     * starves the copy threads of a small machine (two cores: 1.3 against
     * 1.9 GB/s over tcp), hence auto: spin from 8 CPUs up, and never while
     * more threads want to run than the host has CPUs (cpuload.h).
     */
    bool want_idle = busy || self_busy || !list_empty(&wire->completed) ||
                     (wire->d->cfg.progress_spin && wire->outstanding_main > 0 &&
                      !cpuload_oversubscribed());
    if (want_idle != wire->idle_on) {
        wire->idle_on = want_idle;
        if (want_idle)
            uv_idle_start(&wire->idle, wire_on_idle);
        else
            uv_idle_stop(&wire->idle);
    }
    bool want_tick = wire->outstanding_main > 0 || wire->closing > 0;
    if (want_tick != wire->tick_on) {
        wire->tick_on = want_tick;
        if (want_tick)
            uv_timer_start(&wire->tick, wire_on_tick, 1, 1);
        else
            uv_timer_stop(&wire->tick);
    }
}

static void wire_on_tick(uv_timer_t *handle)
{
    wire_drain(handle->data);
}

static void wire_on_poll(uv_poll_t *handle, int status, int events)
{
    wire_drain(handle->data);
}

static void wire_on_prepare(uv_prepare_t *handle)
{
    wire_drain(handle->data);
}


/* What a lane reported: finished operations join the queue; the rest is handled here. */
static void wire_on_report(struct wire *wire, struct wire_op *op)
{
    switch (op->kind) {
    case WIRE_OP_SEND:
    case WIRE_OP_RECV:
        list_insert_tail(&wire->completed, &op->node);
        return;
    case LANE_EP_ERROR:
        /* While the lanes go, their endpoints' closes follow in this batch: no hook then. */
        if (!op->wep->closed && !wire->lanes_gone)
            wire->hooks.on_ep_error(wire->hooks.arg, op->wep->user, wire_status(op->status));
        break;
    case LANE_EP_CLOSED:
        if (--op->wep->lanes_open == 0 && op->wep->closed)
            free(op->wep);
        break;
    case LANE_UNEXPECTED:
        if (!wire->lanes_gone && wire->hooks.on_data != NULL &&
            wire->hooks.on_data(wire->hooks.arg, op->tag, op->length)) {
            op->kind = LANE_DROP;
            lane_post(op->lane, op);
            return;
        }
        break;
    default:
        log_err("a lane reported operation kind %d", (int)op->kind);
        break;
    }
    free(op);
}

static void wire_take_reports(struct wire *wire, struct list *reports)
{
    while (!list_empty(reports)) {
        struct wire_op *op = list_entry(reports->next, struct wire_op, node);
        list_remove(&op->node);
        wire_on_report(wire, op);
    }
}

static void wire_on_lane_wake(uv_async_t *handle)
{
    struct wire *wire = handle->data;
    struct list reports;

    list_init(&reports);
    for (unsigned i = 0; i < wire->nlanes; i++)
        lane_take(wire->lanes[i], &reports);
    wire_take_reports(wire, &reports);
    wire_deliver(wire);
}

/*
 * The worker of this daemon's link to itself: UCX's self transport alone,
 * whatever UCX_TLS says, so that it opens no socket. Its endpoint cannot
 * fail apart from this process, so it asks no peer error handling, which
 * the self transport does not offer.
 */
static b10_status_t wire_self_create(struct wire *wire)
{
    ucp_config_t *config = NULL;
    ucs_status_t st = ucp_config_read(NULL, NULL, &config);
    const char *what = "ucp_config_read";

    if (st == UCS_OK) {
        what = "ucp_config_modify TLS=self";
        st = ucp_config_modify(config, "TLS", "self");
    }
    if (st == UCS_OK) {
        ucp_params_t params = {
            .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME,
            .features = UCP_FEATURE_TAG,
            .name = "b10d-self",
        };
        what = "ucp_init of the link to itself";
        st = ucp_init(&params, config, &wire->self_context);
    }
    if (config != NULL)
        ucp_config_release(config);
    if (st != UCS_OK) {
        log_err("%s: %s", what, ucs_status_string(st));
        return wire_local_status(st);
    }
    ucp_worker_params_t wparams = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE,
    };
    st = ucp_worker_create(wire->self_context, &wparams, &wire->self_worker);
    if (st == UCS_OK) {
        st = ucp_worker_get_address(wire->self_worker, &wire->self_address,
                                    &wire->self_address_length);
        if (st != UCS_OK)
            ucp_worker_destroy(wire->self_worker);
    }
    if (st != UCS_OK) {
        log_err("the worker of the link to itself: %s", ucs_status_string(st));
        ucp_cleanup(wire->self_context);
        return wire_local_status(st);
    }
    return B10_OK;
}

static void wire_self_destroy(struct wire *wire)
{
    ucp_worker_release_address(wire->self_worker, wire->self_address);
    ucp_worker_destroy(wire->self_worker);
    ucp_cleanup(wire->self_context);
}

/* The address a peer gets: every worker's, the loop's first (wireaddr.h). */
static b10_status_t wire_pack_address(struct wire *wire)
{
    const void *addrs[1 + WIRE_MAX_LANES];
    size_t lengths[1 + WIRE_MAX_LANES];

    addrs[0] = wire->address;
    lengths[0] = wire->address_length;
    for (unsigned i = 0; i < wire->nlanes; i++)
        lane_address(wire->lanes[i], &addrs[1 + i], &lengths[1 + i]);
    wire->packed_length = wireaddr_size(1 + wire->nlanes, lengths);
    wire->packed = malloc(wire->packed_length);
    if (wire->packed == NULL)
        return B10_ERR_NO_MEMORY;
    wireaddr_pack(wire->packed, 1 + wire->nlanes, addrs, lengths);
    return B10_OK;
}

/*
 * The UCX context: UCX_* settings from the environment, narrowed by
 * --net-devices; a daemon with no network (no key) gets UCX's self
 * transport alone, so that it opens no socket.
 */
/*
 * --eager-bytes as UCX's rendezvous threshold. A small DATA message in
 * rendezvous waits for its own handshake (the receiver's worker woken to
 * answer the sender's, then the sender's to send): on TCP that was more
 * than the message itself. DATA only follows READY, so its receive is
 * always posted: an eager message lands in it as it streams in.
 */
static ucs_status_t wire_eager(struct b10d *d, ucp_config_t *config)
{
    const char *env = getenv("UCX_RNDV_THRESH");
    char value[32];

    if (d->cfg.eager_bytes == 0 || (env != NULL && env[0] != '\0'))
        return UCS_OK;
    snprintf(value, sizeof(value), "%" PRIu64, d->cfg.eager_bytes);
    ucs_status_t st = ucp_config_modify(config, "RNDV_THRESH", value);
    if (st != UCS_OK)
        log_err("--eager-bytes %s: UCX's RNDV_THRESH: %s", value, ucs_status_string(st));
    return st;
}

static b10_status_t wire_context_create(struct b10d *d, bool network, ucp_context_h *context_p)
{
    ucp_config_t *config = NULL;
    ucs_status_t st;

    st = ucp_config_read(NULL, NULL, &config);
    if (st != UCS_OK) {
        log_err("ucp_config_read: %s", ucs_status_string(st));
        return wire_local_status(st);
    }
    if (!network && (st = ucp_config_modify(config, "TLS", "self")) != UCS_OK) {
        log_err("ucp_config_modify TLS=self: %s", ucs_status_string(st));
        ucp_config_release(config);
        return wire_local_status(st);
    }
    if (network && d->cfg.net_devices[0] != '\0' &&
        (st = ucp_config_modify(config, "NET_DEVICES", d->cfg.net_devices)) != UCS_OK) {
        log_err("--net-devices %s: %s", d->cfg.net_devices, ucs_status_string(st));
        ucp_config_release(config);
        return wire_local_status(st);
    }
    if (network && (st = wire_eager(d, config)) != UCS_OK) {
        ucp_config_release(config);
        return wire_local_status(st);
    }
    if (network) {
        const char *env = getenv("UCX_NET_DEVICES");
        const char *devices = d->cfg.net_devices[0] ? d->cfg.net_devices
                              : env != NULL && env[0] ? env : "all";
        log_info("network devices: %s", devices);
        if (strcmp(devices, "all") == 0)
            log_notice("UCX listens on every network device: --net-devices names the cluster's");
    }
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                      UCP_PARAM_FIELD_NAME,
        .features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP,
        /* Lanes use the context's registrations from their own threads. */
        .mt_workers_shared = network && d->cfg.wire_lanes > 0,
        .name = "b10d",
    };
    st = ucp_init(&params, config, context_p);
    ucp_config_release(config);
    if (st != UCS_OK) {
        log_err("ucp_init: %s", ucs_status_string(st));
        return wire_local_status(st);
    }
    return B10_OK;
}

/* The loop's worker, its address and the fd the loop polls; on failure none of them is left. */
static b10_status_t wire_worker_create(struct wire *wire)
{
    ucp_worker_params_t wparams = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE,
    };
    ucs_status_t st = ucp_worker_create(wire->context, &wparams, &wire->worker);

    if (st != UCS_OK) {
        log_err("ucp_worker_create: %s", ucs_status_string(st));
        return wire_local_status(st);
    }
    st = ucp_worker_get_address(wire->worker, &wire->address, &wire->address_length);
    if (st != UCS_OK) {
        log_err("ucp_worker_get_address: %s", ucs_status_string(st));
        goto err_worker;
    }
    st = ucp_worker_get_efd(wire->worker, &wire->efd);
    if (st != UCS_OK) {
        log_err("ucp_worker_get_efd: %s", ucs_status_string(st));
        goto err_address;
    }
    return B10_OK;

err_address:
    ucp_worker_release_address(wire->worker, wire->address);
err_worker:
    ucp_worker_destroy(wire->worker);
    return wire_local_status(st);
}

/*
 * The data lanes (--wire-lanes, on a network only) and the wake-up they
 * report through. The wake-up is there whatever happens; on failure the
 * lanes made so far are in wire->nlanes, for the caller to undo.
 */
static b10_status_t wire_lanes_create(struct wire *wire, bool network)
{
    struct b10d *d = wire->d;
    b10_status_t status;

    /* Lanes share the context's registrations across threads: only a thread-safe one will do. */
    unsigned lanes = network ? d->cfg.wire_lanes : 0;
    ucp_context_attr_t attr = { .field_mask = UCP_ATTR_FIELD_THREAD_MODE };
    if (lanes > 0 && (ucp_context_query(wire->context, &attr) != UCS_OK ||
                      attr.thread_mode != UCS_THREAD_MODE_MULTI)) {
        log_warning("this UCX gives no thread-safe context: no data lanes, DATA on the loop's worker");
        lanes = 0;
    }
    uv_async_init(d->loop, &wire->lane_wake, wire_on_lane_wake);
    wire->lane_wake.data = wire;
    for (unsigned i = 0; i < lanes; i++) {
        struct lane_params lp = {
            .index = i,
            .spin = d->cfg.progress_spin,
            .err_mode_peer = d->cfg.err_mode == CONFIG_ERR_MODE_PEER,
            .wake = &wire->lane_wake,
        };
        if ((status = lane_create(wire->context, &lp, &wire->lanes[i])) != B10_OK)
            return status;
        wire->nlanes++;
    }
    return B10_OK;
}

b10_status_t wire_create(struct b10d *d, const struct wire_hooks *hooks, bool network,
                         struct wire **wire_p)
{
    b10_status_t status;
    struct wire *wire = calloc(1, sizeof(*wire));

    if (wire == NULL)
        return B10_ERR_NO_MEMORY;
    wire->d = d;
    wire->hooks = *hooks;
    list_init(&wire->completed);
    list_init(&wire->strays);

    if ((status = wire_context_create(d, network, &wire->context)) != B10_OK)
        goto err_free;
    if ((status = wire_worker_create(wire)) != B10_OK)
        goto err_cleanup;
    if ((status = wire_lanes_create(wire, network)) != B10_OK)
        goto err_lanes;
    if ((status = wire_pack_address(wire)) != B10_OK)
        goto err_lanes;
    if ((status = wire_self_create(wire)) != B10_OK)
        goto err_packed;
    uv_poll_init(d->loop, &wire->poll, wire->efd);
    uv_prepare_init(d->loop, &wire->prepare);
    uv_idle_init(d->loop, &wire->idle);
    uv_timer_init(d->loop, &wire->tick);
    wire->poll.data = wire->prepare.data = wire->idle.data = wire->tick.data = wire;
    uv_poll_start(&wire->poll, UV_READABLE, wire_on_poll);
    uv_prepare_start(&wire->prepare, wire_on_prepare);
    *wire_p = wire;
    return B10_OK;

err_packed:
    free(wire->packed);
err_lanes:
    while (wire->nlanes > 0)
        lane_destroy(wire->lanes[--wire->nlanes], NULL);
    uv_close((uv_handle_t *)&wire->lane_wake, NULL);
    uv_run(d->loop, UV_RUN_NOWAIT);
    ucp_worker_release_address(wire->worker, wire->address);
    ucp_worker_destroy(wire->worker);
err_cleanup:
    ucp_cleanup(wire->context);
err_free:
    free(wire);
    return status;
}

static void wire_close_handle_done(uv_handle_t *handle)
{
    /* The wire is freed after the loop ran these callbacks (see wire_destroy). */
}

void wire_quiesce(struct wire *wire)
{
    if (wire == NULL || wire->lanes_gone)
        return;
    /*
     * Lanes first: what they still hold is reported cancelled and delivered;
     * an owner that reacts by cancelling or closing more finds them gone.
     */
    struct list reports;
    bool settled = true;
    list_init(&reports);
    wire->lanes_gone = true;
    while (wire->nlanes > 0)
        settled &= lane_destroy(wire->lanes[--wire->nlanes], &reports);
    wire->lanes_settled = settled;
    wire_take_reports(wire, &reports);
    wire_deliver(wire);
    /* Let closes and cancellations settle, bounded: a dead peer must not hang shutdown. */
    for (int i = 0; i < 1000 && (wire->outstanding > 0 || wire->closing > 0); i++) {
        ucp_worker_progress(wire->worker);
        ucp_worker_progress(wire->self_worker);
        wire_deliver(wire);
        if (i % 100 == 99)
            uv_sleep(1);
    }
    if (wire->outstanding > 0)
        log_warning("%u ucx operations still outstanding at exit", wire->outstanding);
}

void wire_destroy(struct wire *wire)
{
    if (wire == NULL)
        return;
    wire_quiesce(wire);
    uv_poll_stop(&wire->poll);
    uv_close((uv_handle_t *)&wire->poll, wire_close_handle_done);
    uv_close((uv_handle_t *)&wire->prepare, wire_close_handle_done);
    uv_close((uv_handle_t *)&wire->idle, wire_close_handle_done);
    uv_close((uv_handle_t *)&wire->tick, wire_close_handle_done);
    uv_close((uv_handle_t *)&wire->lane_wake, wire_close_handle_done);
    uv_run(wire->d->loop, UV_RUN_NOWAIT);
    ucp_worker_release_address(wire->worker, wire->address);
    ucp_worker_destroy(wire->worker);
    wire_self_destroy(wire);
    /* A dropped rendezvous whose sender went quiet never completes; only scratch is left. */
    while (!list_empty(&wire->strays)) {
        struct wire_op *op = list_entry(wire->strays.next, struct wire_op, node);
        list_remove(&op->node);
        free(op->owned);
        free(op);
    }
    /* A lane left with requests in flight keeps its worker, and so the context. */
    if (wire->lanes_settled)
        ucp_cleanup(wire->context);
    free(wire->packed);
    free(wire);
}

b10_status_t wire_set_doors(struct wire *wire, const struct wireaddr_door *doors, unsigned n)
{
    uint8_t *packed = realloc(wire->packed, wire->packed_length + n * WIREADDR_DOOR_BYTES);
    if (packed == NULL)
        return B10_ERR_NO_MEMORY;
    wire->packed = packed;
    wire->packed_length = wireaddr_add_doors(packed, wire->packed_length, doors, n);
    return B10_OK;
}

void wire_address(struct wire *wire, const void **addr_p, size_t *length_p)
{
    *addr_p = wire->packed;
    *length_p = wire->packed_length;
}

static void wire_on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t st)
{
    struct wire_ep *wep = arg;

    log_warning("endpoint error: %s", ucs_status_string(st));
    /* Its owner closed it already and may be gone: nobody to tell. */
    if (!wep->closed)
        wep->wire->hooks.on_ep_error(wep->wire->hooks.arg, wep->user, wire_status(st));
}

void wire_ep_set_user(struct wire_ep *wep, void *user)
{
    wep->user = user;
}

/* Read the lanes' transports from UCX's own description of the endpoint. */
static void wire_ep_describe(struct wire_ep *wep)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);

    snprintf(wep->transports, sizeof(wep->transports), "unknown");
    if (f == NULL)
        return;
    ucp_ep_print_info(wep->ep, f);
    fclose(f);

    size_t used = 0;
    wep->transports[0] = '\0';
    /* Lines look like "#   lane[0]:  2:tcp/lo.0 md[1] ... tag am". */
    for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char *lane = strstr(line, "lane[");
        if (lane == NULL)
            continue;
        char *colon = strchr(lane, ':');
        if (colon == NULL)
            continue;
        char name[64];
        if (sscanf(colon + 1, " %*d:%63s", name) != 1)
            continue;
        char *dot = strrchr(name, '.');
        if (dot != NULL && strchr(name, '/') != NULL && dot > strchr(name, '/'))
            *dot = '\0';
        if (strstr(wep->transports, name) != NULL)
            continue;
        int n = snprintf(wep->transports + used, sizeof(wep->transports) - used, "%s%s",
                         used ? " " : "", name);
        if (n < 0 || (size_t)n >= sizeof(wep->transports) - used)
            break;
        used += (size_t)n;
    }
    if (used == 0)
        snprintf(wep->transports, sizeof(wep->transports), "unknown");
    free(text);
}

b10_status_t wire_ep_create(struct wire *wire, const void *addr, size_t length, void *user,
                            struct wire_ep **ep_p)
{
    const uint8_t *addrs[1 + WIRE_MAX_LANES];
    size_t lengths[1 + WIRE_MAX_LANES];
    unsigned count;
    if (wireaddr_unpack(addr, length, addrs, lengths, &count) != B10_OK) {
        log_warning("a peer's worker address is malformed (%zu bytes)", length);
        return B10_ERR_INVALID_ARG;
    }
    struct wire_ep *wep = calloc(1, sizeof(*wep));
    if (wep == NULL)
        return B10_ERR_NO_MEMORY;
    wep->wire = wire;
    wep->user = user;
    /* This daemon's own address: its link to itself, which no listener carries (struct wire). */
    wep->self = length == wire->packed_length && memcmp(addr, wire->packed, length) == 0;

    /* Each UCX address is still a peer's claim; UCX unpacks it, and fails cleanly on garbage. */
    ucp_ep_params_t params = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = wep->self ? wire->self_address : (const ucp_address_t *)addrs[0],
        .err_mode = wire->d->cfg.err_mode == CONFIG_ERR_MODE_PEER && !wep->self
                    ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE,
        .err_handler = { .cb = wire_on_ep_error, .arg = wep },
    };
    ucs_status_t st = ucp_ep_create(wep->self ? wire->self_worker : wire->worker, &params,
                                    &wep->ep);
    if (st != UCS_OK) {
        log_warning("ucp_ep_create: %s", ucs_status_string(st));
        free(wep);
        return st == UCS_ERR_NO_MEMORY ? B10_ERR_NO_MEMORY : B10_ERR_PEER_UNREACHABLE;
    }
    /* The link to itself carries no bulk data: the ranks' bytes never go by the wire here. */
    if (wep->self)
        count = 1;
    /* Lane i talks to the peer's lane i; both ends use the lanes they both have. */
    unsigned nlanes = count - 1 < wire->nlanes ? count - 1 : wire->nlanes;
    for (unsigned i = 0; i < nlanes; i++) {
        wep->lanes[i] = lane_ep_new(wire->lanes[i], wep, addrs[1 + i], lengths[1 + i]);
        if (wep->lanes[i] == NULL) {
            log_err("no memory for a lane endpoint");
            while (i > 0)
                lane_ep_free(wep->lanes[--i]);
            wire_ep_close(wep);
            return B10_ERR_NO_MEMORY;
        }
    }
    wep->nlanes = wep->lanes_open = nlanes;
    for (unsigned i = 0; i < nlanes; i++)
        lane_ep_open(wire->lanes[i], wep->lanes[i]);
    wire_ep_describe(wep);
    *ep_p = wep;
    return B10_OK;
}

static void wire_close_done(void *request, ucs_status_t st, void *user_data)
{
    struct wire *wire = user_data;
    wire->closing--;
    ucp_request_free(request);
}

void wire_ep_close(struct wire_ep *wep)
{
    if (wep == NULL)
        return;
    struct wire *wire = wep->wire;
    /* Force needs peer error handling on both sides; without it, flush and close. */
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK |
                        UCP_OP_ATTR_FIELD_USER_DATA,
        .flags = wire->d->cfg.err_mode == CONFIG_ERR_MODE_PEER && !wep->self
                 ? UCP_EP_CLOSE_FLAG_FORCE : 0,
        .cb.send = wire_close_done,
        .user_data = wire,
    };
    ucs_status_ptr_t sp = ucp_ep_close_nbx(wep->ep, &param);
    if (UCS_PTR_IS_PTR(sp))
        wire->closing++;
    else if (UCS_PTR_IS_ERR(sp))
        log_debug("ucp_ep_close_nbx: %s", ucs_status_string(UCS_PTR_STATUS(sp)));
    /* Lane endpoints close on their threads; the last one's report frees wep. */
    wep->closed = true;
    if (wire->lanes_gone)
        wep->lanes_open = 0;   /* the lanes closed every endpoint as they went */
    for (unsigned i = 0; i < wep->nlanes && !wire->lanes_gone; i++)
        lane_ep_close(wire->lanes[i], wep->lanes[i]);
    if (wep->lanes_open == 0)
        free(wep);
}

const char *wire_ep_transports(struct wire_ep *wep)
{
    return wep->transports;
}

unsigned wire_ep_lanes(const struct wire_ep *wep)
{
    return wep->nlanes;
}

b10_status_t wire_mem_map(struct wire *wire, void *addr, size_t length, void **memh_p)
{
    ucp_mem_map_params_t params = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
        .address = addr,
        .length = length,
    };
    ucp_mem_h memh;
    ucs_status_t st = ucp_mem_map(wire->context, &params, &memh);
    if (st != UCS_OK) {
        log_err("ucp_mem_map of %zu bytes: %s", length, ucs_status_string(st));
        return wire_local_status(st);
    }
    *memh_p = memh;
    return B10_OK;
}

void wire_mem_unmap(struct wire *wire, void *memh)
{
    if (memh != NULL)
        ucp_mem_unmap(wire->context, memh);
}

static b10_status_t wire_send_full(struct wire_ep *wep, uint64_t tag, const void *buf,
                                   size_t length, void *memh, wire_done_cb *cb, void *arg,
                                   void *owned, struct wire_op **op_p)
{
    struct wire_op *op = wire_op_new(wep->wire, WIRE_OP_SEND, cb, arg, owned);
    if (op == NULL)
        return B10_ERR_NO_MEMORY;
    op->worker = wep->self ? wep->wire->self_worker : wep->wire->worker;
    /* A registration is of the loop's context: the link to itself's copies from the buffer. */
    if (wep->self)
        memh = NULL;
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        (memh != NULL ? UCP_OP_ATTR_FIELD_MEMH : 0),
        .cb.send = wire_send_done,
        .user_data = op,
        .memh = memh,
    };
    ucs_status_ptr_t sp = ucp_tag_send_nbx(wep->ep, buf, length, tag, &param);
    return wire_posted(wep->wire, op, sp, 0, 0, op_p);
}

b10_status_t wire_send(struct wire_ep *wep, uint64_t tag, const void *buf, size_t length,
                       void *memh, wire_done_cb *cb, void *arg, struct wire_op **op_p)
{
    return wire_send_full(wep, tag, buf, length, memh, cb, arg, NULL, op_p);
}

b10_status_t wire_send_owned(struct wire_ep *wep, uint64_t tag, void *buf, size_t length)
{
    b10_status_t status = wire_send_full(wep, tag, buf, length, NULL, NULL, NULL, buf, NULL);
    if (status != B10_OK)
        free(buf);
    return status;
}

b10_status_t wire_recv(struct wire *wire, const struct wire_ep *by, uint64_t tag, void *buf,
                       size_t length, void *memh, wire_done_cb *cb, void *arg,
                       struct wire_op **op_p)
{
    struct wire_op *op = wire_op_new(wire, WIRE_OP_RECV, cb, arg, NULL);

    if (op == NULL)
        return B10_ERR_NO_MEMORY;
    op->worker = by != NULL && by->self ? wire->self_worker : wire->worker;
    if (by != NULL && by->self)
        memh = NULL;
    /*
     * Immediate completion is denied: UCX 1.13 does not fill recv_info when
     * a receive completes at once, and the length is what a receiver checks.
     * The callback then always runs, possibly inline (see struct wire_op).
     */
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        UCP_OP_ATTR_FLAG_NO_IMM_CMPL | (memh != NULL ? UCP_OP_ATTR_FIELD_MEMH : 0),
        .cb.recv = wire_recv_done,
        .user_data = op,
        .memh = memh,
    };
    ucs_status_ptr_t sp = ucp_tag_recv_nbx(op->worker, buf, length, tag, UINT64_MAX, &param);
    return wire_posted(wire, op, sp, 0, 0, op_p);
}

/* Hand a bulk operation to lane key % nlanes: the same key picks the same lane at both ends. */
static b10_status_t wire_post_bulk(struct wire_ep *wep, uint32_t key, enum wire_op_kind kind,
                                   uint64_t tag, void *buf, size_t length, void *memh,
                                   wire_done_cb *cb, void *arg, struct wire_op **op_p)
{
    struct wire *wire = wep->wire;
    unsigned i = key % wep->nlanes;

    if (wire->lanes_gone)
        return B10_ERR_CANCELLED;
    struct wire_op *op = wire_op_new(wire, kind, cb, arg, NULL);
    if (op == NULL)
        return B10_ERR_NO_MEMORY;
    op->tag = tag;
    op->buf = buf;
    op->size = length;
    op->memh = memh;
    op->lep = wep->lanes[i];
    wire->outstanding++;
    lane_post(wire->lanes[i], op);
    if (op_p != NULL)
        *op_p = op;
    return B10_OK;
}

b10_status_t wire_send_bulk(struct wire_ep *wep, uint32_t key, uint64_t tag, const void *buf,
                            size_t length, void *memh, wire_done_cb *cb, void *arg,
                            struct wire_op **op_p)
{
    if (wep->nlanes == 0)
        return wire_send(wep, tag, buf, length, memh, cb, arg, op_p);
    return wire_post_bulk(wep, key, WIRE_OP_SEND, tag, (void *)buf, length, memh, cb, arg, op_p);
}

b10_status_t wire_recv_bulk(struct wire_ep *wep, uint32_t key, uint64_t tag, void *buf,
                            size_t length, void *memh, wire_done_cb *cb, void *arg,
                            struct wire_op **op_p)
{
    if (wep->nlanes == 0)
        return wire_recv(wep->wire, wep, tag, buf, length, memh, cb, arg, op_p);
    return wire_post_bulk(wep, key, WIRE_OP_RECV, tag, buf, length, memh, cb, arg, op_p);
}

void wire_cancel(struct wire *wire, struct wire_op *op)
{
    if (op == NULL)
        return;
    if (op->lane != NULL) {
        /* The lane owns op until it reports: it cancels only what it still has in flight. */
        if (wire->lanes_gone)
            return;   /* every lane operation was reported when the lanes went */
        struct wire_op *cancel = wire_op_new(wire, LANE_CANCEL, NULL, NULL, NULL);
        if (cancel == NULL) {
            log_err("no memory to cancel a lane operation");
            return;
        }
        cancel->target = op;
        cancel->target_id = op->id;
        lane_post(op->lane, cancel);
        return;
    }
    /* Once done, the outcome is queued and delivery will tell it; nothing to cancel. */
    if (!op->done && op->req != NULL)
        ucp_request_cancel(op->worker, op->req);
}

uint32_t wire_outstanding(const struct wire *wire)
{
    return wire->outstanding;
}

uint64_t wire_progress_ns(const struct wire *wire)
{
    uint64_t ns = wire->progress_ns;
    for (unsigned i = 0; i < wire->nlanes; i++)
        ns += lane_progress_ns(wire->lanes[i]);
    return ns;
}
