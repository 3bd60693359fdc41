/* session.c — see session.h. */
#include "session.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin.h"
#include "auth.h"
#include "b10.pb-c.h"
#include "frame.h"
#include "hello.h"
#include "ipc.h"
#include "names.h"
#include "peer.h"
#include "picks.h"
#include "plan.h"
#include "rank.h"
#include "wire.h"
#include "ask.h"
#include "xfer.h"

#define SESSION_MAX_DESC 65536   /* an agent descriptor: worker addresses (peer.c bounds them) and a name */

/* A registration being opened off the loop (session_on_register). */
struct session_reg {
    uv_work_t work;
    struct list node;               /* b10d.regs_waiting, until its turn */
    bool started;
    struct session *s;              /* NULL once the rank left */
    struct b10d *d;
    uint64_t seq, id;
    struct mem_request req;         /* its strings point into the copies below */
    char pci_bus_id[40];
    uint8_t ipc_handle[64];
    struct region *r;
    b10_status_t status;
    char detail[256];
};

/* When a request frame arrived whole and was decoded: a transfer's first two times. */
struct session_arrival {
    uint64_t received_ns, decoded_ns;
};

/*
 * A submit of many spans in the span arena, its tables read out and planned
 * off the loop (session_ahead_begin). It holds the request until answered.
 */
struct session_ahead {
    uv_work_t work;
    struct list node;               /* b10d.aheads_waiting, until its turn */
    bool started;
    struct session *s;              /* NULL once the rank left: the work is thrown away */
    struct b10d *d;
    B10__ClientMsg *msg;            /* the request: its submit */
    struct session_arrival at;
    struct arena arena;             /* a descriptor of the rank's arena of its own */
    uint8_t *tables;                /* read out: the local table, then the remote one */
    b10_status_t status;            /* of the read */
    char detail[256];
    struct xfer_planned planned;
};

static void session_ahead_free(struct session_ahead *a)
{
    plan_free(a->planned.plan);
    free(a->tables);
    arena_close(&a->arena);
    b10__client_msg__free_unpacked(a->msg, NULL);
    free(a);
}

/* A registration not yet started whose rank left: nothing was opened. */
static void session_reg_drop(struct session_reg *g)
{
    list_remove(&g->node);
    if (g->req.fd >= 0)
        close(g->req.fd);
    free(g);
}

static struct session *session_create(struct b10d *d, struct ipc_conn *conn, pid_t pid, uid_t uid,
                                      gid_t gid)
{
    struct session *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->d = d;
    s->conn = conn;
    s->pid = pid;
    s->uid = uid;
    s->gid = gid;
    arena_init(&s->arena);
    mem_table_init(&s->mem, d->cfg.max_regions, d->cfg.max_register_bytes);
    list_init(&s->agents);
    list_init(&s->xfers);
    list_init(&s->targets);
    list_init(&s->locals);
    list_init(&s->asks);
    list_init(&s->deregs);
    list_insert_tail(&d->sessions, &s->node);
    d->nsessions++;
    log_debug("client pid %d uid %u connected", (int)pid, (unsigned)uid);
    return s;
}

/*
 * A deregistration is answered once no copy goes through its region any
 * more (b10.h: transfers using it finish first): out of the table at once,
 * so no new copy starts, and the answer when its last copy lets go of it,
 * or past --settle-ms, B10_ERR_UNSETTLED: a copy may still write it.
 */
struct session_dereg {
    struct list node;               /* session.deregs */
    struct session *s;
    uint64_t seq;
    uint64_t id;
    struct region *r;               /* the table's reference, ours now */
    uv_timer_t timer;
};

static b10_status_t session_reply(struct session *s, uint64_t seq, b10_status_t status,
                                  const char *detail, struct B10__Reply *reply);

static void session_dereg_closed(uv_handle_t *handle)
{
    free(handle->data);
}

/* Answer (unless the rank is gone: s NULL), drop our reference, free. */
static void session_dereg_end(struct session_dereg *g, b10_status_t status, const char *detail)
{
    list_remove(&g->node);
    g->r->on_idle = NULL;
    if (status != B10_ERR_CLIENT_GONE)
        session_reply(g->s, g->seq, status, detail != NULL ? detail : "", NULL);
    region_unref(g->r);
    uv_timer_stop(&g->timer);
    uv_close((uv_handle_t *)&g->timer, session_dereg_closed);
}

static void session_dereg_idle(void *arg)
{
    struct session_dereg *g = arg;
    log_debug("client %s: region %" PRIu64 " deregistered once its copies ended", g->s->agent, g->id);
    session_dereg_end(g, B10_OK, NULL);
}

static void session_dereg_bound(uv_timer_t *timer)
{
    struct session_dereg *g = timer->data;
    char detail[160];
    snprintf(detail, sizeof(detail), "region %" PRIu64 " is deregistered, but a copy through it "
             "has not ended after %u ms (--settle-ms): it may still write the memory", g->id,
             g->s->d->cfg.settle_ms);
    log_warning("client %s: %s", g->s->agent, detail);
    session_dereg_end(g, B10_ERR_UNSETTLED, detail);
}

static void session_on_deregister(struct session *s, uint64_t seq, uint64_t id)
{
    struct region *r = mem_table_take(&s->mem, id);
    struct session_dereg *g;

    if (r == NULL) {
        session_reply(s, seq, B10_ERR_NOT_FOUND, "no such region", NULL);
        return;
    }
    if (r->refs == 1 || (g = calloc(1, sizeof(*g))) == NULL) {
        /* No copy holds it (or no memory to wait: its copies still keep it mapped). */
        region_unref(r);
        session_reply(s, seq, B10_OK, "", NULL);
        return;
    }
    *g = (struct session_dereg){ .s = s, .seq = seq, .id = id, .r = r };
    list_insert_tail(&s->deregs, &g->node);
    uv_timer_init(s->d->loop, &g->timer);
    g->timer.data = g;
    uv_timer_start(&g->timer, session_dereg_bound, s->d->cfg.settle_ms, 0);
    r->on_idle = session_dereg_idle;
    r->idle_arg = g;
}

static void session_fail_list(struct list *head, const char *why)
{
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, head) {
        struct xfer *x = list_entry(pos, struct xfer, session_node);
        xfer_fail(x, B10_ERR_CLIENT_GONE, "%s", why);
        x->session = NULL;
    }
}

/* The connection is gone: fail its transfers, drop its registrations. */
static void session_destroy(struct session *s)
{
    struct list *pos, *tmp;

    if (s == NULL)
        return;
    s->conn = NULL;
    if (s->hello_done) {
        log_info("client %s (pid %d) disconnected", s->agent, (int)s->pid);
        s->d->nranks--;
        names_release(s->d->names, s->agent);
    }
    if (s->admin_counted)
        s->d->admin_connections--;
    if (s->reg != NULL && !s->reg->started)
        session_reg_drop(s->reg);
    else if (s->reg != NULL)
        s->reg->s = NULL;           /* its work closes what it opens */
    if (s->ahead != NULL && !s->ahead->started) {
        list_remove(&s->ahead->node);
        session_ahead_free(s->ahead);
    } else if (s->ahead != NULL) {
        s->ahead->s = NULL;         /* its work frees what it made */
    }
    session_fail_list(&s->xfers, "the submitting rank disconnected");
    session_fail_list(&s->targets, "the destination rank disconnected");
    xfer_local_forget_rank(s);
    xfer_settle_forget(s->d, s);
    list_for_each_safe(pos, tmp, &s->asks)
        ask_detach(list_entry(pos, struct ask, session_node));
    list_for_each_safe(pos, tmp, &s->agents) {
        struct remote_agent *a = list_entry(pos, struct remote_agent, node);
        list_remove(pos);
        peer_unref(a->peer);
        free(a);
    }
    list_for_each_safe(pos, tmp, &s->deregs)
        session_dereg_end(list_entry(pos, struct session_dereg, node), B10_ERR_CLIENT_GONE, NULL);
    /* Regions stay mapped while copies that touch them finish: they hold references. */
    mem_table_clear(&s->mem);
    arena_close(&s->arena);
    list_remove(&s->node);
    s->d->nsessions--;
    free(s);
}

/* Has it said who it is: Hello, or a b10ctl request? */
static bool session_introduced(const struct session *s)
{
    return s->hello_done || s->admin;
}

struct session *session_find(struct b10d *d, const char *agent)
{
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &d->sessions) {
        struct session *s = list_entry(pos, struct session, node);
        if (s->hello_done && strcmp(s->agent, agent) == 0)
            return s;
    }
    return NULL;
}

/* B10_ERR_CLIENT_GONE when the rank is (being) disconnected: nothing was sent. */
static b10_status_t session_send(struct session *s, B10__DaemonMsg *msg)
{
    uint8_t *frame;
    size_t length;

    if (s->conn == NULL)
        return B10_ERR_CLIENT_GONE;
    int rc = frame_encode(&msg->base, s->d->cfg.max_frame, &frame, &length);
    if (rc != 0) {
        log_err("client %s: could not encode a reply: %s", s->agent, strerror(-rc));
        return rc == -EMSGSIZE ? B10_ERR_TOO_LARGE : B10_ERR_NO_MEMORY;
    }
    return ipc_send(s->conn, frame, length);
}

static b10_status_t session_reply(struct session *s, uint64_t seq, b10_status_t status,
                                  const char *detail, struct B10__Reply *reply)
{
    B10__Reply plain = B10__REPLY__INIT;
    B10__DaemonMsg msg = B10__DAEMON_MSG__INIT;

    if (reply == NULL)
        reply = &plain;
    reply->seq = seq;
    reply->status = (B10__Status)status;
    reply->detail = (char *)(detail != NULL ? detail : "");
    msg.body_case = B10__DAEMON_MSG__BODY_REPLY;
    msg.reply = reply;
    return session_send(s, &msg);
}

void session_answer(struct session *s, uint64_t seq, b10_status_t status, const char *detail)
{
    session_reply(s, seq, status, detail, NULL);
}

void session_notice(struct session *s, const char *from, const uint8_t *data, size_t length)
{
    B10__Notice notice = B10__NOTICE__INIT;
    B10__DaemonMsg msg = B10__DAEMON_MSG__INIT;
    uint8_t *frame;
    size_t frame_len;

    notice.from_agent = (char *)from;
    notice.message = (ProtobufCBinaryData){ length, (uint8_t *)data };
    msg.body_case = B10__DAEMON_MSG__BODY_NOTICE;
    msg.notice = &notice;
    if (s->conn == NULL)
        return;
    if (frame_encode(&msg.base, s->d->cfg.max_frame, &frame, &frame_len) != 0) {
        log_err("client %s: could not encode a notice", s->agent);
        return;
    }
    ipc_send_notice(s->conn, frame, frame_len);
}

/*
 * A rank's notices are bounded (--max-notice-bytes): those queued unread on
 * its socket and those promised to transfers that will land. Past it a new
 * one is refused to its sender (B10_ERR_BUSY); the rank itself is never
 * dropped for notices it has not read yet.
 */
bool session_notice_room(struct session *s, size_t length)
{
    size_t queued = s->conn != NULL ? ipc_notice_bytes(s->conn) : 0;
    return queued + s->notice_reserved + length <= s->d->cfg.max_notice_bytes;
}

void session_notice_reserve(struct session *s, size_t length)
{
    s->notice_reserved += length;
}

void session_notice_release(struct session *s, size_t length)
{
    s->notice_reserved -= length < s->notice_reserved ? length : s->notice_reserved;
}

struct remote_agent *session_agent(struct session *s, const char *name)
{
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &s->agents) {
        struct remote_agent *a = list_entry(pos, struct remote_agent, node);
        if (strcmp(a->name, name) == 0)
            return a;
    }
    return NULL;
}

b10_status_t session_agent_use(struct session *s, const char *name, struct remote_agent **agent_p,
                               char *detail, size_t detail_len)
{
    struct remote_agent *a = session_agent(s, name);
    uid_t now;

    if (a == NULL) {
        snprintf(detail, detail_len, "remote agent '%.200s' is not loaded", name);
        return B10_ERR_UNKNOWN_AGENT;
    }
    if (peer_is_self(a->peer) &&
        (!a->uid_known || !names_holder(s->d->names, name, &now) || now != a->uid)) {
        snprintf(detail, detail_len, "the name '%.200s' is no longer held by the user whose rank "
                 "this rank loaded: load the descriptor again", name);
        return B10_ERR_UNKNOWN_AGENT;
    }
    *agent_p = a;
    return B10_OK;
}

/* Fill in, for a rank of this node, the uid that holds the name it is loaded under. */
static void session_agent_owner(struct session *s, struct remote_agent *a)
{
    a->uid_known = peer_is_self(a->peer) && names_holder(s->d->names, a->name, &a->uid);
}

void session_xfer_done(struct session *s, const struct xfer *x)
{
    B10__XferDone done = B10__XFER_DONE__INIT;
    B10__DaemonMsg msg = B10__DAEMON_MSG__INIT;

    if (x->released)
        return;
    done.xfer_id = x->id;
    done.status = (B10__Status)x->status;
    done.detail = (char *)x->detail;
    /* B10D_FAULT_DROP_REASON (tests): a failure told bare, for the chaos checker to catch. */
    struct b10d *d = s->d;
    if (x->status != B10_OK && d->fault_drop_reason_every > 0 &&
        ++d->fault_drop_reason_seen % d->fault_drop_reason_every == 0)
        done.detail = (char *)"";
    B10__XferTimes times = B10__XFER_TIMES__INIT;
    times.received_ns = x->times.received_ns;
    times.decoded_ns = x->times.decoded_ns;
    times.accepted_ns = x->times.accepted_ns;
    times.first_ns = x->times.first_ns;
    times.ended_ns = x->times.ended_ns;
    times.bytes = x->plan != NULL ? x->plan->total : 0;
    times.spans = x->times.spans;
    times.plan_ns = x->times.plan_ns;
    done.times = &times;
    msg.body_case = B10__DAEMON_MSG__BODY_DONE;
    msg.done = &done;
    session_send(s, &msg);
}

/* Agent names: 1..255 bytes of printable ASCII without spaces. */
static bool session_name_ok(const char *name)
{
    size_t n = strnlen(name, 256);
    if (n == 0 || n > 255)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isgraph((unsigned char)name[i]))
            return false;
    return true;
}

/*
 * A rank says who it is. B10_OK once it is connected under its name; a
 * refusal (its status, already replied) drops the connection.
 */
static b10_status_t session_on_hello(struct session *s, uint64_t seq, const B10__Hello *hello)
{
    struct b10d *d = s->d;
    char detail[256];
    const void *addr;
    size_t addr_len;

    if (hello->version != B10_PROTOCOL_VERSION) {
        snprintf(detail, sizeof(detail), "client speaks protocol %u, daemon %d", hello->version,
                 B10_PROTOCOL_VERSION);
        session_reply(s, seq, B10_ERR_VERSION, detail, NULL);
        return B10_ERR_VERSION;
    }
    if (!session_name_ok(hello->agent_name)) {
        session_reply(s, seq, B10_ERR_INVALID_ARG,
                      "agent name must be 1..255 bytes of printable ASCII without spaces", NULL);
        return B10_ERR_INVALID_ARG;
    }
    if (d->nranks >= d->cfg.max_clients) {
        snprintf(detail, sizeof(detail), "%u ranks are connected to this daemon (--max-clients)",
                 d->nranks);
        log_warning("refusing rank %.64s (pid %d): %s", hello->agent_name, (int)s->pid, detail);
        session_reply(s, seq, B10_ERR_TOO_LARGE, detail, NULL);
        return B10_ERR_TOO_LARGE;
    }
    uint32_t own = 0;
    for (struct list *pos = d->sessions.next; pos != &d->sessions; pos = pos->next) {
        struct session *o = list_entry(pos, struct session, node);
        own += o->hello_done && o->uid == s->uid;
    }
    if (own >= d->cfg.max_clients_per_uid) {
        snprintf(detail, sizeof(detail), "uid %u has %u ranks connected to this daemon "
                 "(--max-clients-per-uid)", (unsigned)s->uid, own);
        log_warning("refusing rank %.64s (pid %d): %s", hello->agent_name, (int)s->pid, detail);
        session_reply(s, seq, B10_ERR_TOO_LARGE, detail, NULL);
        return B10_ERR_TOO_LARGE;
    }
    /* A name is its first uid's for --name-hold-ms after its rank left, restarts included. */
    uid_t holder = 0;
    b10_status_t status = names_claim(d->names, hello->agent_name, s->uid, &holder);
    if (status != B10_OK) {
        if (status == B10_ERR_PERMISSION) {
            snprintf(detail, sizeof(detail), "agent name '%s' is held by uid %u: another user's "
                     "rank took it first", hello->agent_name, (unsigned)holder);
            log_warning("refusing rank %.64s of uid %u (pid %d): the name is held by uid %u",
                        hello->agent_name, (unsigned)s->uid, (int)s->pid, (unsigned)holder);
        } else if (status == B10_ERR_EXISTS) {
            snprintf(detail, sizeof(detail), "agent '%s' is already connected to this daemon",
                     hello->agent_name);
        } else if (status == B10_ERR_TOO_LARGE) {
            snprintf(detail, sizeof(detail), "%u agent names are held by connected ranks",
                     names_count(d->names));
        } else {
            /* session_name_ok let only names through that the registry takes. */
            status = B10_ERR_NO_MEMORY;
            snprintf(detail, sizeof(detail), "no memory for the agent name");
        }
        session_reply(s, seq, status, detail, NULL);
        return status;
    }
    snprintf(s->agent, sizeof(s->agent), "%s", hello->agent_name);
    s->hello_done = true;
    d->nranks++;

    /* The descriptor, sealed under this daemon's first key: only a key holder can forge one. */
    wire_address(d->wire, &addr, &addr_len);
    B10__AgentDesc desc = B10__AGENT_DESC__INIT;
    desc.version = B10_PEER_PROTOCOL_VERSION;
    desc.name = s->agent;
    desc.daemon_id = d->daemon_id;
    desc.worker_address = (ProtobufCBinaryData){ addr_len, (uint8_t *)addr };
    desc.daemon_name = d->cfg.name;
    desc.incarnation = d->incarnation;
    desc.uid = (uint32_t)s->uid;
    desc.uid_known = true;
    size_t body_len = protobuf_c_message_get_packed_size(&desc.base);
    size_t desc_len = AUTH_OVERHEAD + body_len;
    uint8_t *packed = malloc(desc_len);
    if (packed == NULL)
        return B10_ERR_NO_MEMORY;
    protobuf_c_message_pack(&desc.base, packed + AUTH_HEADER_BYTES);
    auth_seal(&d->keys.keys[0], AUTH_KIND_DESC, d->daemon_id, 0, packed, body_len);

    B10__HelloReply hr = B10__HELLO_REPLY__INIT;
    hr.version = B10_PROTOCOL_VERSION;
    hr.daemon_id = d->daemon_id;
    hr.agent_desc = (ProtobufCBinaryData){ desc_len, packed };
    hr.max_frame = d->cfg.max_frame;
    hr.span_arena = true;
    hr.span_grids = true;
    hr.pid = (uint32_t)getpid();
    B10__Reply reply = B10__REPLY__INIT;
    reply.body_case = B10__REPLY__BODY_HELLO;
    reply.hello = &hr;
    status = session_reply(s, seq, B10_OK, "", &reply);
    free(packed);
    log_info("client %s (pid %d, uid %u) connected", s->agent, (int)s->pid, (unsigned)s->uid);
    return status;
}

/*
 * A registration, opened off the loop: mapping and populating a memfd, or
 * opening an IPC handle, takes seconds for GiBs (about 130 ms for a handle)
 * and would stall every other rank and peer. The connection feeds no more
 * frames meanwhile, so the rank's next requests, which may name the
 * region, see it registered. A rank that leaves meanwhile orphans the work:
 * the region it opened is closed again when it is done.
 */

/*
 * The thread pool also runs the DRAM copies of every transfer: at most this
 * many registrations take threads of it at once, the rest wait their turn,
 * so that ranks registering GiBs together do not stop every copy.
 */
#define SESSION_REGS_AT_ONCE 2u

static void session_reg_run(uv_work_t *work);
static void session_reg_done(uv_work_t *work, int status);

static void session_reg_start(struct b10d *d, struct session_reg *g)
{
    if (d->regs_running >= SESSION_REGS_AT_ONCE) {
        list_insert_tail(&d->regs_waiting, &g->node);
        return;
    }
    d->regs_running++;
    g->started = true;
    uv_queue_work(d->loop, &g->work, session_reg_run, session_reg_done);
}

static void session_reg_run(uv_work_t *work)
{
    struct session_reg *g = work->data;
    g->status = mem_region_open(g->id, &g->req, g->detail, sizeof(g->detail), &g->r);
}

static void session_reg_done(uv_work_t *work, int status)
{
    struct session_reg *g = work->data;
    struct session *s = g->s;
    struct b10d *d = g->d;

    d->regs_running--;
    if (!list_empty(&d->regs_waiting)) {
        struct session_reg *next = list_entry(d->regs_waiting.next, struct session_reg, node);
        list_remove(&next->node);
        session_reg_start(d, next);
    }
    if (g->req.fd >= 0)
        close(g->req.fd);
    if (status != 0 && g->status == B10_OK) {
        region_unref(g->r);
        g->status = B10_ERR_CANCELLED;
        snprintf(g->detail, sizeof(g->detail), "the daemon is shutting down");
    }
    if (s == NULL) {
        if (g->status == B10_OK)
            region_unref(g->r);
        free(g);
        return;
    }
    s->reg = NULL;
    if (g->status == B10_OK &&
        (g->status = mem_table_insert(&s->mem, g->r, g->detail, sizeof(g->detail))) != B10_OK)
        region_unref(g->r);
    if (g->status != B10_OK) {
        session_reply(s, g->seq, g->status, g->detail, NULL);
    } else {
        B10__RegisterReply rr = B10__REGISTER_REPLY__INIT;
        rr.region_id = g->id;
        B10__Reply reply = B10__REPLY__INIT;
        reply.body_case = B10__REPLY__BODY_REGISTER_MEM;
        reply.register_mem = &rr;
        session_reply(s, g->seq, B10_OK, "", &reply);
        log_debug("client %s: region %" PRIu64 " registered, %s, %" PRIu64 " bytes at 0x%" PRIx64 "%s",
                  s->agent, g->id, g->r->ops->name, g->r->length, g->r->addr,
                  g->r->open ? ", open to the node" : "");
    }
    if (s->conn != NULL)
        ipc_conn_resume(s->conn);
    free(g);
}

/* Host memory the ranks of uid registered, and are registering off the loop now. */
static uint64_t session_uid_host_bytes(struct b10d *d, uid_t uid)
{
    uint64_t bytes = 0;
    for (struct list *pos = d->sessions.next; pos != &d->sessions; pos = pos->next) {
        const struct session *o = list_entry(pos, struct session, node);
        if (!o->hello_done || o->uid != uid)
            continue;
        bytes += o->mem.host_bytes;
        if (o->reg != NULL && mem_request_host(&o->reg->req))
            bytes += o->reg->req.length;
    }
    return bytes;
}

/*
 * B10_IN_PROGRESS when the registration went off the loop (the connection
 * waits for it), else B10_OK: it was answered. The descriptor that came
 * with it, where its kind takes one, goes to *fd_p: the caller's to close
 * unless the registration took it.
 */
static b10_status_t session_on_register(struct session *s, uint64_t seq,
                                        const B10__RegisterMem *req, int *fd_p)
{
    char detail[256] = "";
    struct mem_request mr = {
        .kind = (b10_mem_kind_t)req->kind, .addr = req->addr, .length = req->length, .fd = -1,
        .fd_offset = req->fd_offset, .pci_bus_id = req->pci_bus_id, .alloc_base = req->alloc_base,
        .alloc_length = req->alloc_length, .ipc_handle = req->cuda_ipc_handle.data,
        .ipc_handle_length = req->cuda_ipc_handle.len, .vmm_fd = req->vmm_fd,
        .open = req->open_to_node, .process_mem = req->process_mem, .pid = s->pid,
    };
    if (mem_request_takes_fd(&mr))
        mr.fd = *fd_p = ipc_conn_take_fd(s->conn);
    b10_status_t status = mem_table_check(&s->mem, &mr, detail, sizeof(detail));
    struct session_reg *g = NULL;

    /* One user's ranks together: what they make the daemon map leaves room for the others'. */
    if (status == B10_OK && mem_request_host(&mr)) {
        uint64_t held = session_uid_host_bytes(s->d, s->uid);
        if (held + mr.length < held || held + mr.length > s->d->cfg.max_host_bytes_uid) {
            status = B10_ERR_TOO_LARGE;
            snprintf(detail, sizeof(detail), "uid %u's ranks have %" PRIu64 " bytes of host memory "
                     "registered: %" PRIu64 " more exceed --max-host-bytes-per-uid %" PRIu64,
                     (unsigned)s->uid, held, mr.length, s->d->cfg.max_host_bytes_uid);
            log_warning("refusing a registration of rank %s: %s", s->agent, detail);
        }
    }

    if (status == B10_OK && (strlen(req->pci_bus_id) >= sizeof(g->pci_bus_id) ||
                             req->cuda_ipc_handle.len > sizeof(g->ipc_handle))) {
        status = B10_ERR_INVALID_ARG;
        snprintf(detail, sizeof(detail), "a PCI bus id or an IPC handle too long");
    }
    if (status == B10_OK && (g = calloc(1, sizeof(*g))) == NULL)
        status = B10_ERR_NO_MEMORY;
    if (status != B10_OK) {
        session_reply(s, seq, status, detail, NULL);
        return B10_OK;
    }
    g->s = s;
    g->d = s->d;
    list_init(&g->node);
    g->seq = seq;
    g->id = ++s->d->next_region;
    g->req = mr;
    snprintf(g->pci_bus_id, sizeof(g->pci_bus_id), "%s", req->pci_bus_id);
    g->req.pci_bus_id = g->pci_bus_id;
    if (req->cuda_ipc_handle.len > 0) {
        memcpy(g->ipc_handle, req->cuda_ipc_handle.data, req->cuda_ipc_handle.len);
        g->req.ipc_handle = g->ipc_handle;
    }
    g->work.data = g;
    *fd_p = -1;                     /* the work's now: closed when it is done */
    s->reg = g;
    session_reg_start(s->d, g);
    return B10_IN_PROGRESS;
}

/*
 * Open an agent descriptor a rank hands us: it must open under a key this
 * daemon holds before a byte of it is read, for its worker address goes to
 * UCX. B10_OK and *desc_p (the caller frees it), or the refusal and why.
 */
static b10_status_t session_open_desc(struct session *s, const uint8_t *bytes, size_t length,
                                      B10__AgentDesc **desc_p, char *detail, size_t detail_len)
{
    struct b10d *d = s->d;
    struct auth_header hdr;
    const struct auth_key *key;
    const uint8_t *body;
    size_t body_len;
    const uint8_t *addrs[1 + WIREADDR_MAX_LANES];
    size_t lengths[1 + WIREADDR_MAX_LANES];
    unsigned workers;

    if (auth_peek(bytes, length, &hdr) != B10_OK || hdr.kind != AUTH_KIND_DESC) {
        snprintf(detail, detail_len, "not a b10 agent descriptor of this version");
        return B10_ERR_INVALID_ARG;
    }
    if ((key = auth_keyring_find(&d->keys, hdr.key_id)) == NULL) {
        d->stats.descriptors_refused++;
        if (d->keys.keys[0].kind == AUTH_KEY_LOCAL)
            snprintf(detail, detail_len, "the descriptor is from another daemon, and this one has "
                     "no cluster key (--cluster-key): it serves only its own ranks");
        else
            snprintf(detail, detail_len, "the descriptor is sealed under key %016" PRIx64 ", which "
                     "this daemon does not hold", hdr.key_id);
        return B10_ERR_UNAUTHENTICATED;
    }
    if (auth_open(key, AUTH_KIND_DESC, bytes, length, &body, &body_len) != AUTH_OK) {
        d->stats.descriptors_refused++;
        snprintf(detail, detail_len, "the descriptor does not authenticate under key %016" PRIx64
                 " (forged or damaged)", key->id);
        return B10_ERR_UNAUTHENTICATED;
    }
    B10__AgentDesc *desc = b10__agent_desc__unpack(NULL, body_len, body);
    if (desc == NULL || desc->version != B10_PEER_PROTOCOL_VERSION || desc->daemon_id == 0 ||
        desc->daemon_id != hdr.sender_id || !config_name_ok(desc->daemon_name) ||
        desc->incarnation == 0 || desc->worker_address.len == 0 ||
        desc->worker_address.len > HELLO_MAX_ADDRESS ||
        wireaddr_unpack(desc->worker_address.data, desc->worker_address.len, addrs, lengths,
                        &workers) != B10_OK) {
        if (desc != NULL)
            b10__agent_desc__free_unpacked(desc, NULL);
        snprintf(detail, detail_len, "an authenticated descriptor that is malformed");
        return B10_ERR_INVALID_ARG;
    }
    *desc_p = desc;
    return B10_OK;
}

/*
 * A descriptor of an earlier boot of this daemon binds the agent to the uid
 * its rank had then, not to whoever holds the name now: after a restart the
 * rank may not have reconnected yet, and another user's rank may claim the
 * name first. session_agent_use() then checks the holder against it.
 */
static void session_load_owner(struct remote_agent *a, const B10__AgentDesc *desc,
                               bool earlier_self)
{
    /* A rank of another node: its daemon checks the holder (rank_uid_check) by this uid. */
    if ((earlier_self || !peer_is_self(a->peer)) && desc->uid_known) {
        a->uid = (uid_t)desc->uid;
        a->uid_known = true;
    }
}

/*
 * A rank reloaded a (now loaded) descriptor after this daemon restarted:
 * the remote node still knows this daemon's old boot, whose address is
 * dead. Linking now tells it this boot (its handshake replaces the entry),
 * so that its ranks' next transfers here find this boot without a new
 * descriptor. Bounded, since any rank may send reloads: once per node per
 * session, and once per node per SESSION_RELOAD_LINK_MS of all sessions.
 */
#define SESSION_RELOAD_LINK_MS 1000

static void session_reload_link(struct session *s, struct remote_agent *a)
{
    struct peer *peer = a->peer;
    struct list *pos;
    uint64_t now = s->d->now_ms(s->d);

    if (peer_is_self(peer))
        return;
    for (pos = s->agents.next; pos != &s->agents; pos = pos->next) {
        struct remote_agent *o = list_entry(pos, struct remote_agent, node);
        if (o->peer == peer && o->reload_linked)
            return;
    }
    a->reload_linked = true;
    if (peer->reload_link_ms != 0 && now < peer->reload_link_ms + SESSION_RELOAD_LINK_MS)
        return;
    peer->reload_link_ms = now;
    b10_status_t linked = peer_ensure_link(peer);
    if (linked != B10_OK && linked != B10_IN_PROGRESS)
        log_info("client %s: could not link to daemon %s for agent %s: %s", s->agent, peer->name,
                 a->name, b10_status_str(linked));
}

/* What a LOAD_AGENT says of itself, before its descriptor is opened: false once refused. */
static bool session_load_ok(struct session *s, uint64_t seq, const B10__LoadAgent *req)
{
    if (!session_name_ok(req->name)) {
        session_reply(s, seq, B10_ERR_INVALID_ARG, "bad agent name", NULL);
        return false;
    }
    if (req->desc.len == 0 || req->desc.len > SESSION_MAX_DESC) {
        session_reply(s, seq, B10_ERR_INVALID_ARG, "agent descriptor empty or too large", NULL);
        return false;
    }
    if (req->grants & ~(uint32_t)(B10_GRANT_WRITE | B10_GRANT_READ)) {
        session_reply(s, seq, B10_ERR_INVALID_ARG, "unknown grants: only B10_GRANT_WRITE and "
                      "B10_GRANT_READ are", NULL);
        return false;
    }
    return true;
}

/*
 * The daemon a descriptor names, from this daemon's table (peer_get); in
 * *earlier_self_p whether the descriptor is of an earlier boot of this one.
 */
static b10_status_t session_desc_peer(struct session *s, const B10__AgentDesc *desc,
                                      struct peer **peer_p, bool *earlier_self_p, char *detail,
                                      size_t detail_len)
{
    struct peer_desc pd = {
        .name = desc->daemon_name, .daemon_id = desc->daemon_id, .incarnation = desc->incarnation,
        .address = desc->worker_address.data, .address_length = desc->worker_address.len,
    };
    /*
     * The descriptor names its node by the daemon's name; its boot is the
     * one that issued it. Another boot of this very daemon (a rank of this
     * node that reloads after this daemon restarted) is this node: while
     * this boot runs, no other is current. Boot ids decide, not the boots'
     * wall-clock times, which a clock stepped back would turn around.
     */
    bool earlier_self = strcmp(desc->daemon_name, s->d->cfg.name) == 0 &&
                        desc->daemon_id != s->d->daemon_id;
    if (earlier_self && desc->incarnation >= s->d->incarnation)
        log_warning("client %s: a descriptor of this daemon's boot %016" PRIx64 " started after "
                    "this boot by the clock: the clock stepped back, or another daemon runs "
                    "under --name %s; taken as an earlier boot of this one", s->agent,
                    desc->daemon_id, s->d->cfg.name);
    if (earlier_self) {
        pd.daemon_id = s->d->daemon_id;
        pd.incarnation = s->d->incarnation;
    }
    detail[0] = '\0';
    b10_status_t status = peer_get(s->d, &pd, peer_p, detail, detail_len);
    if (status == B10_OK)
        *earlier_self_p = earlier_self;
    return status;
}

/*
 * The agent req names, on peer: loading a name again replaces it (a
 * restarted remote rank brings a new descriptor), else it is added, up to
 * --max-agents. Answered either way.
 */
static void session_agent_load(struct session *s, uint64_t seq, const B10__LoadAgent *req,
                               const B10__AgentDesc *desc, struct peer *peer, bool earlier_self)
{
    struct remote_agent *a = NULL;
    struct list *pos;

    for (pos = s->agents.next; pos != &s->agents && a == NULL; pos = pos->next)
        if (strcmp(list_entry(pos, struct remote_agent, node)->name, req->name) == 0)
            a = list_entry(pos, struct remote_agent, node);
    bool added = a == NULL;
    if (added && s->nagents >= s->d->cfg.max_agents) {
        session_reply(s, seq, B10_ERR_TOO_LARGE, "too many remote agents (--max-agents)", NULL);
        return;
    }
    if (added && (a = calloc(1, sizeof(*a))) == NULL) {
        session_reply(s, seq, B10_ERR_NO_MEMORY, "", NULL);
        return;
    }
    if (added) {
        snprintf(a->name, sizeof(a->name), "%s", req->name);
        list_insert_tail(&s->agents, &a->node);
        s->nagents++;
    } else {
        peer_unref(a->peer);
    }
    a->peer = peer;
    peer_ref(peer);
    session_agent_owner(s, a);
    session_load_owner(a, desc, earlier_self);
    a->grants = req->grants;
    session_reply(s, seq, B10_OK, "", NULL);
    if (req->reload)
        session_reload_link(s, a);
    if (added)
        log_debug("client %s: remote agent %s on daemon %s (%016" PRIx64 ")", s->agent, a->name,
                  peer->name, peer->daemon_id);
}

/* LOAD_AGENT: the request checked, its descriptor opened and its daemon found, the agent kept. */
static void session_on_load_agent(struct session *s, uint64_t seq, const B10__LoadAgent *req)
{
    char detail[256];
    struct peer *peer;
    bool earlier_self;
    B10__AgentDesc *desc = NULL;

    if (!session_load_ok(s, seq, req))
        return;
    b10_status_t status = session_open_desc(s, req->desc.data, req->desc.len, &desc, detail,
                                            sizeof(detail));
    if (status != B10_OK) {
        log_info("client %s: refused a descriptor for '%.64s': %s", s->agent, req->name, detail);
        session_reply(s, seq, status, detail, NULL);
        return;
    }
    if (strcmp(desc->name, req->name) != 0) {
        snprintf(detail, sizeof(detail), "descriptor names agent '%.100s', not '%.100s'", desc->name,
                 req->name);
        session_reply(s, seq, B10_ERR_INVALID_ARG, detail, NULL);
    } else if ((status = session_desc_peer(s, desc, &peer, &earlier_self, detail,
                                           sizeof(detail))) != B10_OK) {
        session_reply(s, seq, status, detail[0] ? detail : b10_status_str(status), NULL);
    } else {
        session_agent_load(s, seq, req, desc, peer, earlier_self);
    }
    b10__agent_desc__free_unpacked(desc, NULL);
}

static void session_on_invalidate(struct session *s, uint64_t seq, const B10__InvalidateAgent *req)
{
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &s->agents) {
        struct remote_agent *a = list_entry(pos, struct remote_agent, node);
        if (strcmp(a->name, req->name) == 0) {
            list_remove(pos);
            peer_unref(a->peer);
            free(a);
            s->nagents--;
            session_reply(s, seq, B10_OK, "", NULL);
            return;
        }
    }
    session_reply(s, seq, B10_ERR_NOT_FOUND, "no such remote agent", NULL);
}

static struct xfer *session_xfer(struct session *s, uint64_t id)
{
    struct list *pos, *tmp;
    list_for_each_safe(pos, tmp, &s->xfers) {
        struct xfer *x = list_entry(pos, struct xfer, session_node);
        if (x->id == id)
            return x;
    }
    return NULL;
}

/* A grid from the request, checked whole (picks.h); side names it in a refusal. */
static b10_status_t session_grid(const B10__SpanGrid *msg, const char *side, struct picks_grid *g,
                                 char *detail, size_t detail_len)
{
    *g = (struct picks_grid){ .bases = msg->bases.data, .nbases = msg->bases.len / 8,
                              .per_base = msg->per_base, .stride = msg->stride,
                              .length = msg->length };
    return picks_grid_check(g, msg->bases.len, side, detail, detail_len);
}

/*
 * A request whose spans lie in the span arena: their tables, copied out
 * (the rank may rewrite the arena from here on), in *tables_p, and
 * *from_arena the request with them in place. Two forms: the spans as they
 * are (arena_spans), or u32 row indices into two grids (arena_picks): then
 * *picks_p holds the grids and the indices (xfer_picks: the engine checks
 * each index where it reads it, and writes spans only where it needs them),
 * the indices' copy in *rows_p, and the request's tables stay empty.
 */
static b10_status_t session_arena_tables(struct session *s, const B10__SubmitXfer *req,
                                         B10__SubmitXfer *from_arena, uint8_t **tables_p,
                                         struct xfer_picks *picks_p, uint8_t **rows_p,
                                         char *detail, size_t detail_len)
{
    bool grids = req->local_grid != NULL || req->remote_grid != NULL;
    uint64_t count = req->arena_spans != 0 ? req->arena_spans : req->arena_picks;

    if (req->local_spans.len != 0 || req->remote_spans.len != 0) {
        snprintf(detail, detail_len, "spans both in the arena and in the request");
        return B10_ERR_INVALID_ARG;
    }
    if (req->arena_spans != 0 && (req->arena_picks != 0 || grids)) {
        snprintf(detail, detail_len, "spans in the arena both as spans and as picked rows");
        return B10_ERR_INVALID_ARG;
    }
    if (req->arena_picks != 0 && (req->local_grid == NULL || req->remote_grid == NULL)) {
        snprintf(detail, detail_len, "picked rows need both sides' grids");
        return B10_ERR_INVALID_ARG;
    }
    b10_status_t status;
    uint8_t *tables = NULL;
    size_t table = (size_t)count * SPAN_BYTES;
    if (req->arena_spans != 0) {
        if ((status = arena_take(&s->arena, count, SPAN_BYTES, &tables, detail,
                                 detail_len)) != B10_OK)
            return status;
    } else {
        struct picks_grid local, remote;
        uint8_t *picks = NULL;
        if ((status = session_grid(req->local_grid, "local", &local, detail, detail_len)) != B10_OK ||
            (status = session_grid(req->remote_grid, "remote", &remote, detail,
                                   detail_len)) != B10_OK ||
            (status = arena_take(&s->arena, count, 4, &picks, detail, detail_len)) != B10_OK)
            return status;
        /* Before the tables are sized by it: 32 bytes a pick, from 8 in the arena. */
        if (count > s->d->cfg.max_spans) {
            snprintf(detail, detail_len, "%" PRIu64 " spans exceed --max-spans %u", count,
                     s->d->cfg.max_spans);
            free(picks);
            return B10_ERR_TOO_LARGE;
        }
        *picks_p = (struct xfer_picks){ local, remote, picks, picks + count * 4, count, NULL };
        *rows_p = picks;
    }
    *from_arena = *req;
    from_arena->local_spans = (ProtobufCBinaryData){ tables != NULL ? table : 0, tables };
    from_arena->remote_spans = (ProtobufCBinaryData){ tables != NULL ? table : 0,
                                                      tables != NULL ? tables + table : NULL };
    from_arena->arena_spans = 0;
    from_arena->arena_picks = 0;
    from_arena->local_grid = from_arena->remote_grid = NULL;
    *tables_p = tables;
    return B10_OK;
}

/* Submit seq's answer: x admitted and started (status B10_OK), or the refusal and why. */
static void session_submit_answer(struct session *s, uint64_t seq, b10_status_t status,
                                  struct xfer *x, size_t count, bool picked,
                                  const struct session_arrival *at, const char *detail)
{
    if (status != B10_OK) {
        log_info("client %s: transfer refused: %s: %s", s->agent, b10_status_name(status), detail);
        session_reply(s, seq, status, detail, NULL);
        return;
    }
    if (picked)
        s->d->stats.xfers_picked++;
    x->times.received_ns = at->received_ns;
    x->times.decoded_ns = at->decoded_ns;
    x->times.spans = count;
    x->times.accepted_ns = uv_hrtime();
    B10__SubmitReply sr = B10__SUBMIT_REPLY__INIT;
    sr.xfer_id = x->id;
    B10__Reply reply = B10__REPLY__INIT;
    reply.body_case = B10__REPLY__BODY_SUBMIT;
    reply.submit = &sr;
    session_reply(s, seq, B10_OK, "", &reply);
    xfer_start(x);
}

/*
 * A submit of this many spans or more (in the span arena or in the frame)
 * has its tables read out and planned off the loop. On it, a million spans
 * that do not merge held every other rank, b10ctl and the peers for 60 to
 * 200 ms a request (on 2 cores): the read of 32 MB of tables, the sort, the
 * pages both touch first; 16,384 of them take 1 to 2 ms. The rank's
 * connection feeds no more frames meanwhile, so its requests keep their
 * order; the checks against the ranks' registrations, which read loop
 * state, run on the loop once the plan is made. A rank that leaves
 * meanwhile orphans the work, which frees what it made.
 */
#define SESSION_AHEAD_SPANS 16384u
/*
 * What a span costs the connection's turn (ipc_conn_charge), in the bytes a
 * turn allows (IPC_BYTES_PER_TURN, 4 MiB): its 32 bytes of tables, read,
 * and as much again three times for checking, planning and copying it on
 * the loop (about 100 ns a span there, where reading 32 bytes takes some
 * 25). A turn then takes some 32,768 spans of one rank's requests.
 */
#define SESSION_SPAN_WORK (4u * 2u * SPAN_BYTES)
/* Like registrations, plans share the thread pool with the copies: this many at once. */
#define SESSION_AHEADS_AT_ONCE 2u

static void session_ahead_run(uv_work_t *work);
static void session_ahead_done(uv_work_t *work, int status);

static void session_ahead_drop_run(uv_work_t *work)
{
    struct session_ahead *a = work->data;
    free(a->tables);
    a->tables = NULL;
}

static void session_ahead_dropped(uv_work_t *work, int status)
{
    (void)status;
    session_ahead_free(work->data);
}

static void session_ahead_start(struct b10d *d, struct session_ahead *a)
{
    if (d->aheads_running >= SESSION_AHEADS_AT_ONCE) {
        list_insert_tail(&d->aheads_waiting, &a->node);
        return;
    }
    d->aheads_running++;
    a->started = true;
    uv_queue_work(d->loop, &a->work, session_ahead_run, session_ahead_done);
}

/*
 * On a thread of the pool: it touches the request, its own arena descriptor
 * and itself only. The frame's tables are equal lists (xfer_submit refuses
 * others, and plan_build reads only count spans of each).
 */
static void session_ahead_run(uv_work_t *work)
{
    struct session_ahead *a = work->data;
    const B10__SubmitXfer *req = a->msg->submit;
    size_t count = (size_t)(req->arena_spans != 0 ? req->arena_spans
                                                  : req->local_spans.len / SPAN_BYTES);

    if (req->arena_spans != 0) {
        a->status = arena_take(&a->arena, count, SPAN_BYTES, &a->tables, a->detail,
                               sizeof(a->detail));
        if (a->status != B10_OK)
            return;
        a->at.decoded_ns = uv_hrtime();
        xfer_plan_ahead(a->tables, a->tables + count * SPAN_BYTES, count, &a->planned);
    } else if (req->remote_spans.len == req->local_spans.len) {
        xfer_plan_ahead(req->local_spans.data, req->remote_spans.data, count, &a->planned);
    }
}

/* Back on the loop: admit it as a submit of its tables would be, the plan made. */
static void session_ahead_submit(struct session *s, struct session_ahead *a, int status)
{
    const B10__SubmitXfer *req = a->msg->submit;
    size_t count = (size_t)(req->arena_spans != 0 ? req->arena_spans
                                                  : req->local_spans.len / SPAN_BYTES);
    size_t table = count * SPAN_BYTES;
    b10_status_t st = a->status;
    struct xfer *x = NULL;
    char detail[256];

    snprintf(detail, sizeof(detail), "%s", a->detail);
    if (status != 0 && st == B10_OK) {
        st = B10_ERR_CANCELLED;
        snprintf(detail, sizeof(detail), "the daemon is shutting down");
    }
    if (st == B10_OK) {
        B10__SubmitXfer with = *req;
        if (req->arena_spans != 0) {
            with.local_spans = (ProtobufCBinaryData){ table, a->tables };
            with.remote_spans = (ProtobufCBinaryData){ table, a->tables + table };
            with.arena_spans = 0;
        }
        /* A plan made of other tables than these could not be: none was (session_ahead_run). */
        st = xfer_submit(s, &with, NULL, &a->planned, &x, detail, sizeof(detail));
    }
    session_submit_answer(s, a->msg->seq, st, x, count, false, &a->at, detail);
}

static void session_ahead_done(uv_work_t *work, int status)
{
    struct session_ahead *a = work->data;
    struct session *s = a->s;
    struct b10d *d = a->d;

    d->aheads_running--;
    if (!list_empty(&d->aheads_waiting)) {
        struct session_ahead *next = list_entry(d->aheads_waiting.next, struct session_ahead, node);
        list_remove(&next->node);
        session_ahead_start(d, next);
    }
    if (s != NULL) {
        s->ahead = NULL;
        session_ahead_submit(s, a, status);
        if (s->conn != NULL)
            ipc_conn_resume(s->conn);
    }
    /* Its tables go off the loop too: unmapping 32 MB of them took the loop 3 to 27 ms. */
    uv_queue_work(d->loop, &a->work, session_ahead_drop_run, session_ahead_dropped);
}

/*
 * Take submit msg off the loop where it is of that size and of a plain form
 * (spans in the arena and nothing else, or spans in the frame and no
 * arena): B10_IN_PROGRESS, msg now the work's. Else B10_ERR_UNSUPPORTED,
 * and the loop serves it, which also refuses every other form with its
 * reason.
 */
static b10_status_t session_ahead_begin(struct session *s, B10__ClientMsg *msg,
                                        const struct session_arrival *at)
{
    const B10__SubmitXfer *req = msg->submit;
    bool arena = req->arena_spans != 0;
    uint64_t count = arena ? req->arena_spans : req->local_spans.len / SPAN_BYTES;
    if (count < SESSION_AHEAD_SPANS || count > s->d->cfg.max_spans || req->arena_picks != 0 ||
        (arena && (req->local_spans.len != 0 || req->remote_spans.len != 0)) ||
        req->local_grid != NULL || req->remote_grid != NULL || s->conn == NULL)
        return B10_ERR_UNSUPPORTED;
    struct session_ahead *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return B10_ERR_UNSUPPORTED;
    a->work.data = a;
    arena_init(&a->arena);
    if (arena && arena_dup(&s->arena, &a->arena) != B10_OK) {
        free(a);
        return B10_ERR_UNSUPPORTED;
    }
    a->s = s;
    a->d = s->d;
    a->msg = msg;
    a->at = *at;
    a->planned.remote_src = req->op == B10__OP__OP_READ;
    a->planned.max_chunk = staging_view_bytes(s->d->staging);
    list_init(&a->node);
    s->ahead = a;
    session_ahead_start(s->d, a);
    return B10_IN_PROGRESS;
}

/*
 * A submit: B10_OK once answered, or B10_IN_PROGRESS when it went off the
 * loop (session_ahead_begin), msg now the work's.
 */
static b10_status_t session_on_submit(struct session *s, B10__ClientMsg *msg,
                                      struct session_arrival *at)
{
    const B10__SubmitXfer *req = msg->submit;
    char detail[256] = "";
    struct xfer *x = NULL;
    B10__SubmitXfer from_arena;
    struct xfer_picks picks;
    uint8_t *tables = NULL, *rows = NULL;
    b10_status_t status = B10_OK;

    /*
     * What its spans cost the loop counts in this connection's turn (ipc.h),
     * beyond the frame's bytes, which count already: a frame of a few bytes
     * may name a million spans in the arena. A turn then takes few such
     * requests, and those that go off the loop pause it.
     */
    uint64_t spans = req->arena_spans != 0   ? req->arena_spans
                     : req->arena_picks != 0 ? req->arena_picks
                                             : req->local_spans.len / SPAN_BYTES;
    uint64_t framed = req->local_spans.len + req->remote_spans.len;
    ipc_conn_charge(s->conn, spans < SIZE_MAX / SESSION_SPAN_WORK
                                 ? (size_t)(spans * SESSION_SPAN_WORK -
                                            (framed < spans * SESSION_SPAN_WORK
                                                 ? framed : spans * SESSION_SPAN_WORK))
                                 : SIZE_MAX);
    if (session_ahead_begin(s, msg, at) == B10_IN_PROGRESS)
        return B10_IN_PROGRESS;
    if (req->arena_spans != 0 || req->arena_picks != 0) {
        status = session_arena_tables(s, req, &from_arena, &tables, &picks, &rows, detail,
                                      sizeof(detail));
        if (status == B10_OK) {
            req = &from_arena;
            at->decoded_ns = uv_hrtime();
        }
    } else if (req->local_grid != NULL || req->remote_grid != NULL) {
        snprintf(detail, sizeof(detail), "grids come with picked rows in the span arena");
        status = B10_ERR_INVALID_ARG;
    }
    bool picked = rows != NULL;
    if (status == B10_OK)
        status = xfer_submit(s, req, picked ? &picks : NULL, NULL, &x, detail, sizeof(detail));
    size_t count = picked ? picks.count : req->local_spans.len / SPAN_BYTES;
    free(tables);
    if (picked)
        free(picks.spans);
    free(rows);
    session_submit_answer(s, msg->seq, status, x, count, picked, at, detail);
    return B10_OK;
}

/* SPAN_ARENA: the memory the rank passes its span tables through from now on (fd: its file). */
static void session_on_span_arena(struct session *s, uint64_t seq, const B10__SpanArena *req, int fd)
{
    char detail[256] = "";
    b10_status_t st = arena_open(&s->arena, fd, req->length, s->d->cfg.max_frame, detail,
                                 sizeof(detail));

    if (st != B10_OK)
        log_info("client %s: span arena refused: %s: %s", s->agent, b10_status_name(st), detail);
    session_reply(s, seq, st, detail, NULL);
}

/* CHECK_AGENT, NOTIFY_AGENT: a question to a remote agent's daemon; its answer comes later. */
static void session_on_ask(struct session *s, const B10__ClientMsg *msg)
{
    char detail[256] = "";
    b10_status_t st = msg->body_case == B10__CLIENT_MSG__BODY_CHECK_AGENT
        ? ask_check(s, msg->seq, msg->check_agent->remote_agent, msg->check_agent->spans.data,
                    msg->check_agent->spans.len, detail, sizeof(detail))
        : ask_notify(s, msg->seq, msg->notify_agent->remote_agent,
                     msg->notify_agent->message.data, msg->notify_agent->message.len, detail,
                     sizeof(detail));

    if (st != B10_IN_PROGRESS)
        session_reply(s, msg->seq, st, detail, NULL);
}

static void session_on_cancel(struct session *s, uint64_t seq, const B10__CancelXfer *req)
{
    struct xfer *x = session_xfer(s, req->xfer_id);

    if (x != NULL)
        xfer_cancel(x);
    session_reply(s, seq, x != NULL ? B10_OK : B10_ERR_NOT_FOUND,
                  x != NULL ? "" : "no transfer of this client in flight with this id", NULL);
}

/* RELEASE: the rank wants no XferDone for this transfer. */
static void session_on_release(struct session *s, uint64_t seq, const B10__ReleaseXfer *req)
{
    struct xfer *x = session_xfer(s, req->xfer_id);

    if (x != NULL)
        x->released = true;
    session_reply(s, seq, B10_OK, "", NULL);
}

/*
 * One frame from the client (ipc_hooks.on_frame). B10_OK; B10_IN_PROGRESS
 * when the connection must feed no more frames until ipc_conn_resume() (a
 * registration is being opened off the loop, and the rank's next requests
 * may name it; a submit of many spans is being planned off the loop); any
 * other status drops it.
 */
static b10_status_t session_on_frame(struct session *s, const uint8_t *buf, size_t length)
{
    struct session_arrival at = { .received_ns = uv_hrtime() };
    B10__ClientMsg *msg = b10__client_msg__unpack(NULL, length, buf);
    int fd = -1;
    b10_status_t rc = B10_OK;

    at.decoded_ns = uv_hrtime();

    if (msg == NULL) {
        s->d->stats.client_protocol_errors++;
        log_warning("client pid %d: undecodable frame of %zu bytes; dropping it", (int)s->pid, length);
        session_reply(s, 0, B10_ERR_PROTOCOL, "undecodable frame", NULL);
        rc = B10_ERR_PROTOCOL;
        goto out;
    }
    /* b10ctl's requests need no Hello; admin.c checks who asks. */
    if (msg->body_case == B10__CLIENT_MSG__BODY_ADMIN) {
        rc = admin_on_request(s, msg->seq, msg->admin);
        goto out;
    }
    if (!s->hello_done && msg->body_case != B10__CLIENT_MSG__BODY_HELLO) {
        s->d->stats.client_protocol_errors++;
        session_reply(s, msg->seq, B10_ERR_PROTOCOL, "the first message must be Hello", NULL);
        rc = B10_ERR_PROTOCOL;
        goto out;
    }
    switch (msg->body_case) {
    case B10__CLIENT_MSG__BODY_HELLO:
        if (s->hello_done) {
            session_reply(s, msg->seq, B10_ERR_PROTOCOL, "Hello sent twice", NULL);
            rc = B10_ERR_PROTOCOL;
        } else {
            rc = session_on_hello(s, msg->seq, msg->hello);
        }
        break;
    case B10__CLIENT_MSG__BODY_REGISTER_MEM:
        rc = session_on_register(s, msg->seq, msg->register_mem, &fd);
        break;
    case B10__CLIENT_MSG__BODY_DEREGISTER_MEM:
        session_on_deregister(s, msg->seq, msg->deregister_mem->region_id);
        break;
    case B10__CLIENT_MSG__BODY_LOAD_AGENT:
        session_on_load_agent(s, msg->seq, msg->load_agent);
        break;
    case B10__CLIENT_MSG__BODY_INVALIDATE_AGENT:
        session_on_invalidate(s, msg->seq, msg->invalidate_agent);
        break;
    case B10__CLIENT_MSG__BODY_SUBMIT:
        rc = session_on_submit(s, msg, &at);
        if (rc == B10_IN_PROGRESS)
            msg = NULL;                 /* the work off the loop answers it, then frees it */
        break;
    case B10__CLIENT_MSG__BODY_SPAN_ARENA:
        fd = ipc_conn_take_fd(s->conn);
        session_on_span_arena(s, msg->seq, msg->span_arena, fd);
        break;
    case B10__CLIENT_MSG__BODY_CHECK_AGENT:
    case B10__CLIENT_MSG__BODY_NOTIFY_AGENT:
        session_on_ask(s, msg);
        break;
    case B10__CLIENT_MSG__BODY_CANCEL:
        session_on_cancel(s, msg->seq, msg->cancel);
        break;
    case B10__CLIENT_MSG__BODY_RELEASE:
        session_on_release(s, msg->seq, msg->release);
        break;
    default:
        s->d->stats.client_protocol_errors++;
        session_reply(s, msg->seq, B10_ERR_PROTOCOL, "unknown message", NULL);
        rc = B10_ERR_PROTOCOL;
        break;
    }
out:
    if (fd >= 0)
        close(fd);
    if (msg != NULL)
        b10__client_msg__free_unpacked(msg, NULL);
    return rc;
}

/* ---------------------------------------------------------------- the client socket's hooks */

static void *session_ipc_open(struct b10d *d, struct ipc_conn *conn, pid_t pid, uid_t uid, gid_t gid)
{
    return session_create(d, conn, pid, uid, gid);
}

static void session_ipc_close(void *user)
{
    session_destroy(user);
}

static b10_status_t session_ipc_frame(void *user, const uint8_t *buf, size_t length)
{
    return session_on_frame(user, buf, length);
}

static bool session_ipc_introduced(const void *user)
{
    return session_introduced(user);
}

static const char *session_ipc_name(const void *user)
{
    const struct session *s = user;
    return s->hello_done ? s->agent : "?";
}

const struct ipc_hooks session_ipc_hooks = {
    .open = session_ipc_open,
    .close = session_ipc_close,
    .on_frame = session_ipc_frame,
    .introduced = session_ipc_introduced,
    .name = session_ipc_name,
};

static bool session_agent_uid(struct session *s, const char *name, uint32_t *uid_p)
{
    struct remote_agent *a = session_agent(s, name);
    if (a == NULL || peer_is_self(a->peer) || !a->uid_known)
        return false;
    *uid_p = (uint32_t)a->uid;
    return true;
}

static uint32_t session_uid(struct session *s)
{
    return (uint32_t)s->uid;
}

const struct rank_ops session_rank_ops = {
    .find = session_find,
    .agent = session_agent,
    .agent_uid = session_agent_uid,
    .uid = session_uid,
    .agent_use = session_agent_use,
    .xfer_done = session_xfer_done,
    .answer = session_answer,
    .notice = session_notice,
    .notice_room = session_notice_room,
    .notice_reserve = session_notice_reserve,
    .notice_release = session_notice_release,
};
