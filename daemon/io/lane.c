/*
 * lane.c — see lane.h. lane_create, lane_destroy and the queue functions run
 * on the loop thread; everything else on the lane's own thread.
 */
#include "lane.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "cpuload.h"
#include "log.h"
#include "status.h"

struct lane_ep {
    struct list node;           /* lane.eps while open */
    struct lane *lane;
    ucp_ep_h ep;                /* NULL until opened, or when opening failed */
    struct wire_ep *wep;        /* carried in reports, never dereferenced here */
    void *address;              /* the peer lane's, until opened */
    size_t address_length;
    struct wire_op *open;       /* the commands and the error report, made up front */
    struct wire_op *close;      /* ... the close comes back as LANE_EP_CLOSED */
    struct wire_op *error;      /* NULL once reported */
};

struct lane {
    unsigned index;
    bool spin;
    bool err_mode_peer;
    uv_async_t *wake;
    ucp_worker_h worker;        /* the lane thread's alone while it runs */
    ucp_address_t *address;
    size_t address_length;
    int worker_fd;
    int cmd_fd;                 /* eventfd: commands wait */
    bool arm_failed;            /* logged once */
    pthread_t thread;
    bool started;
    bool settled;               /* nothing left in UCX after the thread quit */
    struct list left_node;      /* lanes_left, when not settled */

    pthread_mutex_t mutex;      /* guards cmds, reports, quit */
    struct list cmds;
    struct list reports;
    bool quit;
    bool pending;               /* cmds is not empty; read without the mutex */

    /* The lane thread's own. */
    struct list inflight;       /* SEND and RECV ops in UCX */
    struct list strays;         /* STRAY ops: messages being dropped */
    struct list eps;            /* struct lane_ep, open */
    struct list done;           /* reports of this round, not yet handed over */
    uint32_t closing;           /* endpoint closes in flight */
    uint64_t asked_tag;         /* the unexpected message last reported, and when (0: none waits) */
    uint64_t asked_ns;
    uint64_t progress_ns;       /* written atomically here, read by the loop */
};

/* Lanes whose workers UCX would not let go of: kept, reachable, until exit. */
static struct list lanes_left = LIST_INIT(lanes_left);

/* ---- the lane thread ---- */

/* Hand this round's reports to the loop. */
static void lane_flush(struct lane *lane)
{
    if (list_empty(&lane->done))
        return;
    pthread_mutex_lock(&lane->mutex);
    list_splice_tail(&lane->reports, &lane->done);
    pthread_mutex_unlock(&lane->mutex);
    uv_async_send(lane->wake);
}

static void lane_finish(struct wire_op *op, void *request, ucs_status_t st, size_t length,
                        uint64_t tag)
{
    struct lane *lane = op->lane;

    op->req = NULL;
    if (request != NULL)
        ucp_request_free(request);
    list_remove(&op->node);
    if (op->kind == WIRE_OP_STRAY) {
        free(op->owned);
        free(op);
        return;
    }
    op->done = true;
    op->status = st;
    op->length = length;
    op->tag = tag;
    list_insert_tail(&lane->done, &op->node);
}

static void lane_send_done(void *request, ucs_status_t st, void *user_data)
{
    struct wire_op *op = user_data;
    lane_finish(op, request, st, 0, op->tag);
}

static void lane_recv_done(void *request, ucs_status_t st, const ucp_tag_recv_info_t *info,
                           void *user_data)
{
    struct wire_op *op = user_data;
    lane_finish(op, request, st, st == UCS_OK ? info->length : 0,
                st == UCS_OK ? info->sender_tag : op->tag);
}

/* As wire.c's: UCS_OK at once, an error, or a request whose callback may already have run. */
static void lane_posted(struct wire_op *op, ucs_status_ptr_t sp)
{
    if (UCS_PTR_IS_ERR(sp)) {
        log_warning("lane %u: ucx refused an operation: %s", op->lane->index,
                    ucs_status_string(UCS_PTR_STATUS(sp)));
        lane_finish(op, NULL, UCS_PTR_STATUS(sp), 0, op->tag);
    } else if (sp == NULL) {
        lane_finish(op, NULL, UCS_OK, 0, op->tag);
    } else if (!op->done) {
        op->req = sp;
    }
}

static void lane_send(struct lane *lane, struct wire_op *op)
{
    list_insert_tail(&lane->inflight, &op->node);
    if (op->lep->ep == NULL) {
        lane_finish(op, NULL, UCS_ERR_UNREACHABLE, 0, op->tag);
        return;
    }
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        (op->memh != NULL ? UCP_OP_ATTR_FIELD_MEMH : 0),
        .cb.send = lane_send_done,
        .user_data = op,
        .memh = op->memh,
    };
    lane_posted(op, ucp_tag_send_nbx(op->lep->ep, op->buf, op->size, op->tag, &param));
}

static void lane_recv(struct lane *lane, struct wire_op *op)
{
    list_insert_tail(&lane->inflight, &op->node);
    /* NO_IMM_CMPL for the same reason as wire_recv: recv_info must be filled. */
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        UCP_OP_ATTR_FLAG_NO_IMM_CMPL |
                        (op->memh != NULL ? UCP_OP_ATTR_FIELD_MEMH : 0),
        .cb.recv = lane_recv_done,
        .user_data = op,
        .memh = op->memh,
    };
    lane_posted(op, ucp_tag_recv_nbx(lane->worker, op->buf, op->size, op->tag, UINT64_MAX, &param));
}

/* Only an operation still in flight is cancelled: the id tells a reused pointer apart. */
static void lane_cancel(struct lane *lane, struct wire_op *target, uint64_t id)
{
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &lane->inflight) {
        struct wire_op *op = list_entry(pos, struct wire_op, node);
        if (op == target && op->id == id) {
            if (op->req != NULL)
                ucp_request_cancel(lane->worker, op->req);
            return;
        }
    }
}

/*
 * Take the waiting message with this tag into 64 bytes of scratch: UCX
 * truncates and drops it. True when it left the queue (false: no memory, or
 * no such message).
 */
static bool lane_drop(struct lane *lane, uint64_t tag)
{
    ucp_tag_recv_info_t info;
    void *buf = malloc(64);
    struct wire_op *op = calloc(1, sizeof(*op));
    bool taken = false;

    if (buf == NULL || op == NULL)
        goto out;
    ucp_tag_message_h msg = ucp_tag_probe_nb(lane->worker, tag, UINT64_MAX, 1, &info);
    if (msg == NULL)
        goto out;
    taken = true;
    op->kind = WIRE_OP_STRAY;
    op->lane = lane;
    op->owned = buf;
    list_insert_tail(&lane->strays, &op->node);
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.recv = lane_recv_done,
        .user_data = op,
    };
    ucs_status_ptr_t sp = ucp_tag_msg_recv_nbx(lane->worker, buf, 64, msg, &param);
    /* A request finishes in lane_recv_done, which frees the op; otherwise no callback comes. */
    if (UCS_PTR_IS_PTR(sp))
        return true;
    list_remove(&op->node);
out:
    free(buf);
    free(op);
    return taken;
}

static void lane_report_error(struct lane_ep *lep, ucs_status_t st)
{
    struct wire_op *op = lep->error;

    if (op == NULL)
        return;
    lep->error = NULL;
    op->status = st;
    list_insert_tail(&lep->lane->done, &op->node);
}

static void lane_on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t st)
{
    struct lane_ep *lep = arg;
    log_warning("lane %u: endpoint error: %s", lep->lane->index, ucs_status_string(st));
    lane_report_error(lep, st);
}

static void lane_open(struct lane *lane, struct lane_ep *lep)
{
    ucp_ep_params_t params = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = lep->address,
        .err_mode = lane->err_mode_peer ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE,
        .err_handler = { .cb = lane_on_ep_error, .arg = lep },
    };
    ucs_status_t st = ucp_ep_create(lane->worker, &params, &lep->ep);
    if (st != UCS_OK) {
        log_warning("lane %u: ucp_ep_create: %s", lane->index, ucs_status_string(st));
        lep->ep = NULL;
        lane_report_error(lep, st);
    }
    free(lep->address);
    lep->address = NULL;
    list_insert_tail(&lane->eps, &lep->node);
}

/* The endpoint is gone: report it, with the close command turned into the report. */
static void lane_closed(struct lane *lane, struct lane_ep *lep)
{
    struct wire_op *op = lep->close;

    op->kind = LANE_EP_CLOSED;
    list_insert_tail(&lane->done, &op->node);
    lep->close = NULL;
    lane_ep_free(lep);
}

static void lane_close_done(void *request, ucs_status_t st, void *user_data)
{
    struct lane_ep *lep = user_data;

    lep->lane->closing--;
    ucp_request_free(request);
    lane_closed(lep->lane, lep);
}

static void lane_close(struct lane *lane, struct lane_ep *lep)
{
    list_remove(&lep->node);
    if (lep->ep == NULL) {
        lane_closed(lane, lep);
        return;
    }
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK |
                        UCP_OP_ATTR_FIELD_USER_DATA,
        .flags = lane->err_mode_peer ? UCP_EP_CLOSE_FLAG_FORCE : 0,
        .cb.send = lane_close_done,
        .user_data = lep,
    };
    ucs_status_ptr_t sp = ucp_ep_close_nbx(lep->ep, &param);
    if (UCS_PTR_IS_PTR(sp)) {
        lane->closing++;
        return;
    }
    if (UCS_PTR_IS_ERR(sp))
        log_debug("lane %u: ucp_ep_close_nbx: %s", lane->index, ucs_status_string(UCS_PTR_STATUS(sp)));
    lane_closed(lane, lep);
}

static void lane_run(struct lane *lane, struct wire_op *op)
{
    switch (op->kind) {
    case WIRE_OP_SEND:
        lane_send(lane, op);
        return;
    case WIRE_OP_RECV:
        lane_recv(lane, op);
        return;
    case LANE_CANCEL:
        lane_cancel(lane, op->target, op->target_id);
        break;
    case LANE_DROP:
        lane_drop(lane, op->tag);
        break;
    case LANE_EP_OPEN:
        op->lep->open = NULL;
        lane_open(lane, op->lep);
        break;
    case LANE_EP_CLOSE:
        lane_close(lane, op->lep);
        return;
    default:
        log_err("lane %u: unknown command %d", lane->index, (int)op->kind);
        break;
    }
    free(op);
}

/* Run the commands posted since the last round; false once told to quit. */
static bool lane_take_cmds(struct lane *lane)
{
    struct list cmds;
    bool quit;

    if (!__atomic_load_n(&lane->pending, __ATOMIC_ACQUIRE))
        return true;
    list_init(&cmds);
    pthread_mutex_lock(&lane->mutex);
    list_splice_tail(&cmds, &lane->cmds);
    __atomic_store_n(&lane->pending, false, __ATOMIC_RELEASE);
    quit = lane->quit;
    pthread_mutex_unlock(&lane->mutex);
    while (!list_empty(&cmds)) {
        struct wire_op *op = list_entry(cmds.next, struct wire_op, node);
        list_remove(&op->node);
        lane_run(lane, op);
    }
    return !quit;
}

static unsigned lane_progress(struct lane *lane)
{
    uint64_t t = uv_hrtime();
    unsigned n = ucp_worker_progress(lane->worker);
    __atomic_fetch_add(&lane->progress_ns, uv_hrtime() - t, __ATOMIC_RELAXED);
    return n;
}

/*
 * A message no receive took: ask the loop whether one ever will (LANE_DROP
 * comes back if not). UCX shows only the first; the same one is asked about
 * again after a millisecond, when its transfer may have failed meanwhile.
 * Lanes carry only DATA: a control-class message (anyone may send one to a
 * lane's public address) is dropped without asking, or it would sit at the
 * head for good, its tag being a registered one. True when one was taken
 * off the queue: the message behind it is already here and no event will
 * tell of it, so the lane looks again before it sleeps.
 */
static bool lane_probe_unexpected(struct lane *lane)
{
    ucp_tag_recv_info_t info;

    if (ucp_tag_probe_nb(lane->worker, 0, 0, 0, &info) == NULL) {
        lane->asked_ns = 0;
        return false;
    }
    if (info.sender_tag & TAG_CLASS_CONTROL) {
        log_debug("lane %u: dropping a control-class message of %zu bytes", lane->index,
                  info.length);
        return lane_drop(lane, info.sender_tag);
    }
    uint64_t now = uv_hrtime();
    if (lane->asked_ns != 0 && info.sender_tag == lane->asked_tag &&
        now - lane->asked_ns < 1000000)
        return false;
    struct wire_op *op = calloc(1, sizeof(*op));
    if (op == NULL)
        return false;
    op->kind = LANE_UNEXPECTED;
    op->lane = lane;
    op->tag = info.sender_tag;
    op->length = info.length;
    list_insert_tail(&lane->done, &op->node);
    lane->asked_tag = info.sender_tag;
    lane->asked_ns = now;
    return false;
}

/* Sleep until UCX or the loop has news; a millisecond at most while something is pending. */
static void lane_wait(struct lane *lane)
{
    ucs_status_t st = ucp_worker_arm(lane->worker);
    if (st == UCS_ERR_BUSY)
        return;
    if (st != UCS_OK && !lane->arm_failed) {
        lane->arm_failed = true;
        log_err("lane %u: ucp_worker_arm: %s (polling every millisecond instead)", lane->index,
                ucs_status_string(st));
    }
    if (__atomic_load_n(&lane->pending, __ATOMIC_ACQUIRE))
        return;
    bool pending = !list_empty(&lane->inflight) || !list_empty(&lane->strays) ||
                   lane->closing > 0 || lane->asked_ns != 0 || st != UCS_OK;
    struct pollfd fds[2] = {
        { .fd = lane->worker_fd, .events = POLLIN },
        { .fd = lane->cmd_fd, .events = POLLIN },
    };
    if (poll(fds, 2, pending ? 1 : -1) > 0 && (fds[1].revents & POLLIN)) {
        uint64_t v;
        if (read(lane->cmd_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
            log_err("lane %u: reading its eventfd: %s", lane->index, strerror(errno));
    }
}

/*
 * Quit: cancel what is posted, close every endpoint, and let it settle
 * (bounded). UCX 1.13 cancels receives, not sends: a send ends when it is
 * delivered or its endpoint's (forced) close fails it, and with flush closes
 * (--ucx-err-mode none) a stopped receiver leaves it in flight.
 */
static void lane_shutdown(struct lane *lane)
{
    struct list *pos, *tmp;

    list_for_each_safe(pos, tmp, &lane->inflight) {
        struct wire_op *op = list_entry(pos, struct wire_op, node);
        if (op->req != NULL)
            ucp_request_cancel(lane->worker, op->req);
    }
    list_for_each_safe(pos, tmp, &lane->eps)
        lane_close(lane, list_entry(pos, struct lane_ep, node));
    for (int i = 0; i < 1000 && (!list_empty(&lane->inflight) || lane->closing > 0); i++) {
        lane_progress(lane);
        if (i % 100 == 99)
            usleep(1000);
    }
    lane->settled = list_empty(&lane->inflight) && lane->closing == 0;
    if (!lane->settled)
        log_warning("lane %u: operations still in flight at exit: its worker is left as it is",
                    lane->index);
    lane_flush(lane);
}

static void *lane_main(void *arg)
{
    struct lane *lane = arg;

    for (;;) {
        if (!lane_take_cmds(lane))
            break;
        unsigned n = lane_progress(lane);
        /* Report at once: the loop starts a chunk's scatter while the next one copies. */
        lane_flush(lane);
        if (n > 0)
            continue;
        bool dropped = lane_probe_unexpected(lane);
        lane_flush(lane);
        if (dropped)
            continue;
        /* Spin only for work in flight, and not on cores others are waiting for. */
        if (lane->spin && (!list_empty(&lane->inflight) || lane->closing > 0) &&
            !cpuload_oversubscribed())
            continue;
        lane_wait(lane);
    }
    lane_shutdown(lane);
    return NULL;
}

/* ---- the loop thread ---- */

b10_status_t lane_create(ucp_context_h context, const struct lane_params *params,
                         struct lane **lane_p)
{
    struct lane *lane = calloc(1, sizeof(*lane));
    b10_status_t status = B10_ERR_IO;
    ucs_status_t st;

    if (lane == NULL)
        return B10_ERR_NO_MEMORY;
    lane->index = params->index;
    lane->spin = params->spin;
    lane->err_mode_peer = params->err_mode_peer;
    lane->wake = params->wake;
    lane->cmd_fd = -1;
    list_init(&lane->cmds);
    list_init(&lane->reports);
    list_init(&lane->inflight);
    list_init(&lane->strays);
    list_init(&lane->eps);
    list_init(&lane->done);
    pthread_mutex_init(&lane->mutex, NULL);

    ucp_worker_params_t wparams = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE,
    };
    st = ucp_worker_create(context, &wparams, &lane->worker);
    if (st != UCS_OK) {
        log_err("lane %u: ucp_worker_create: %s", lane->index, ucs_status_string(st));
        lane->worker = NULL;
        goto err_ucx;
    }
    if ((st = ucp_worker_get_address(lane->worker, &lane->address, &lane->address_length)) != UCS_OK ||
        (st = ucp_worker_get_efd(lane->worker, &lane->worker_fd)) != UCS_OK) {
        log_err("lane %u: worker address or event fd: %s", lane->index, ucs_status_string(st));
        goto err_ucx;
    }
    lane->cmd_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (lane->cmd_fd < 0) {
        int err = errno;
        log_err("lane %u: eventfd: %s", lane->index, strerror(err));
        status = status_from_errno(err);
        goto err;
    }
    int rc = pthread_create(&lane->thread, NULL, lane_main, lane);
    if (rc != 0) {
        log_err("lane %u: pthread_create: %s", lane->index, strerror(rc));
        status = status_from_errno(rc);
        goto err;
    }
    char name[16];
    snprintf(name, sizeof(name), "b10d-lane%u", lane->index);
    pthread_setname_np(lane->thread, name);
    lane->started = true;
    *lane_p = lane;
    return B10_OK;

err_ucx:
    status = st == UCS_ERR_NO_MEMORY ? B10_ERR_NO_MEMORY : B10_ERR_IO;
err:
    lane_destroy(lane, NULL);
    return status;
}

bool lane_destroy(struct lane *lane, struct list *reports)
{
    if (lane == NULL)
        return true;
    if (lane->started) {
        pthread_mutex_lock(&lane->mutex);
        lane->quit = true;
        __atomic_store_n(&lane->pending, true, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&lane->mutex);
        uint64_t one = 1;
        if (write(lane->cmd_fd, &one, sizeof(one)) < 0)
            log_err("lane %u: waking it: %s", lane->index, strerror(errno));
        pthread_join(lane->thread, NULL);
    }
    /*
     * The thread is gone, and with it any chance for what is still in flight:
     * those operations are reported cancelled, so that their owners let go.
     */
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &lane->inflight) {
        struct wire_op *op = list_entry(pos, struct wire_op, node);
        op->req = NULL;
        op->done = true;
        op->status = UCS_ERR_CANCELED;
    }
    list_splice_tail(&lane->reports, &lane->inflight);
    /* Only a lane that never started comes without a list, and it has nothing to report. */
    if (reports != NULL)
        list_splice_tail(reports, &lane->reports);
    /*
     * UCX 1.13 aborts when a worker is destroyed under a request still in
     * flight (a send to a stopped peer): such a worker, and its context, are
     * left to the exiting process.
     */
    bool settled = !lane->started || lane->settled;
    if (lane->address != NULL)
        ucp_worker_release_address(lane->worker, lane->address);
    if (lane->worker != NULL && settled)
        ucp_worker_destroy(lane->worker);
    /* A dropped rendezvous whose sender went quiet never completes; only scratch is left. */
    while (settled && !list_empty(&lane->strays)) {
        struct wire_op *op = list_entry(lane->strays.next, struct wire_op, node);
        list_remove(&op->node);
        free(op->owned);
        free(op);
    }
    if (lane->cmd_fd >= 0)
        close(lane->cmd_fd);
    pthread_mutex_destroy(&lane->mutex);
    if (settled)
        free(lane);
    else
        list_insert_tail(&lanes_left, &lane->left_node);
    return settled;
}

void lane_address(const struct lane *lane, const void **addr_p, size_t *length_p)
{
    *addr_p = lane->address;
    *length_p = lane->address_length;
}

struct lane_ep *lane_ep_new(struct lane *lane, struct wire_ep *wep, const void *addr,
                            size_t length)
{
    struct lane_ep *lep = calloc(1, sizeof(*lep));
    if (lep == NULL)
        return NULL;
    lep->lane = lane;
    lep->wep = wep;
    list_init(&lep->node);
    lep->address = malloc(length);
    lep->open = calloc(1, sizeof(struct wire_op));
    lep->close = calloc(1, sizeof(struct wire_op));
    lep->error = calloc(1, sizeof(struct wire_op));
    if (lep->address == NULL || lep->open == NULL || lep->close == NULL || lep->error == NULL) {
        lane_ep_free(lep);
        return NULL;
    }
    memcpy(lep->address, addr, length);
    lep->address_length = length;
    lep->open->kind = LANE_EP_OPEN;
    lep->close->kind = LANE_EP_CLOSE;
    lep->error->kind = LANE_EP_ERROR;
    lep->open->lep = lep->close->lep = lep;
    lep->close->wep = lep->error->wep = wep;
    lep->open->lane = lep->close->lane = lep->error->lane = lane;
    return lep;
}

void lane_ep_free(struct lane_ep *lep)
{
    if (lep == NULL)
        return;
    free(lep->open);
    free(lep->close);
    free(lep->error);
    free(lep->address);
    free(lep);
}

void lane_ep_open(struct lane *lane, struct lane_ep *lep)
{
    lane_post(lane, lep->open);
}

void lane_ep_close(struct lane *lane, struct lane_ep *lep)
{
    lane_post(lane, lep->close);
}

void lane_post(struct lane *lane, struct wire_op *op)
{
    uint64_t one = 1;

    op->lane = lane;
    pthread_mutex_lock(&lane->mutex);
    list_insert_tail(&lane->cmds, &op->node);
    __atomic_store_n(&lane->pending, true, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&lane->mutex);
    /* Wakes a sleeping lane; a spinning one sees pending first and drains this later. */
    if (write(lane->cmd_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        log_err("lane %u: waking it: %s", lane->index, strerror(errno));
}

void lane_take(struct lane *lane, struct list *reports)
{
    pthread_mutex_lock(&lane->mutex);
    list_splice_tail(reports, &lane->reports);
    pthread_mutex_unlock(&lane->mutex);
}

uint64_t lane_progress_ns(const struct lane *lane)
{
    return __atomic_load_n(&lane->progress_ns, __ATOMIC_RELAXED);
}
