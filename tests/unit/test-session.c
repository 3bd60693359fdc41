/*
 * test-session.c — daemon/node/session.c: a rank as the engine and the
 * socket see it.
 *
 * What the transfer engine asks of the node's ranks goes through the
 * rank_ops session.c installs (rank.h): find a rank by name, its uid, the
 * remote agents it loaded and the uid each was loaded for, its notices, the
 * news of its transfers. What a rank asks goes through the client socket's
 * hooks (ipc.h): Hello, registrations bounded per rank and per uid,
 * deregistrations that wait for the copies through their region, and a
 * hang-up that must settle everything the rank started.
 *
 * Real here: session.c, the region table (mem.c), agent names (names.c),
 * the descriptor's seal (auth.c) and a libuv loop with its thread pool.
 * Fakes, through -Wl,--wrap: the client socket (what session.c sends is
 * decoded and kept), the UCX address, the mapping of memory (a region of a
 * backend that maps nothing and counts its closes), remote daemons (peer
 * entries made here, links never opened) and the engine's entry points
 * (transfers and asks the rank started are recorded, not run).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ask.h"
#include "auth.h"
#include "b10.pb-c.h"
#include "b10d.h"
#include "frame.h"
#include "hello.h"
#include "ipc.h"
#include "mem.h"
#include "names.h"
#include "peer.h"
#include "rank.h"
#include "session.h"
#include "wire.h"
#include "wireaddr.h"
#include "xfer.h"

#define KiB 1024u
#define DAEMON_ID 0xa0a0a0a0a0a0a0a0ull
#define REMOTE_ID 0xb0b0b0b0b0b0b0b0ull

static uv_loop_t test_loop;
static struct b10d test_d;
static const struct rank_ops *ops = &session_rank_ops;

/* ---------------------------------------------------------------- the client socket */

/* A connection is only a handle to session.c: these bytes' addresses stand in for them. */
static char conn_handles[16];
#define CONN(i) ((struct ipc_conn *)&conn_handles[i])

/* What session.c sent down a connection, decoded. */
struct sent {
    struct ipc_conn *conn;
    B10__DaemonMsg__BodyCase kind;
    bool as_notice;                 /* through ipc_send_notice */
    uint64_t seq;                   /* a reply's */
    b10_status_t status;            /* a reply's or a done's */
    char detail[512];
    uint64_t region_id;             /* a registration's reply */
    uint64_t xfer_id;               /* a done's */
    char from[256];                 /* a notice's */
    uint8_t bytes[4096];            /* a Hello reply's descriptor, a notice's message */
    size_t nbytes;
};
static struct sent sent[256];
static unsigned nsent;
static size_t notice_queued;        /* what ipc_notice_bytes says is queued unread */
static int next_fd = -1;            /* the descriptor a registration's frame carries */
static unsigned resumes;            /* ipc_conn_resume calls */

static void keep(struct ipc_conn *conn, uint8_t *frame, size_t length, bool as_notice)
{
    assert_true(length >= FRAME_HEADER_BYTES);
    assert_int_equal(frame_get_u32(frame), length - FRAME_HEADER_BYTES);
    B10__DaemonMsg *msg = b10__daemon_msg__unpack(NULL, length - FRAME_HEADER_BYTES,
                                                  frame + FRAME_HEADER_BYTES);
    assert_non_null(msg);
    assert_true(nsent < sizeof(sent) / sizeof(sent[0]));
    struct sent *m = &sent[nsent++];
    memset(m, 0, sizeof(*m));
    m->conn = conn;
    m->kind = msg->body_case;
    m->as_notice = as_notice;
    switch (msg->body_case) {
    case B10__DAEMON_MSG__BODY_REPLY:
        m->seq = msg->reply->seq;
        m->status = (b10_status_t)msg->reply->status;
        snprintf(m->detail, sizeof(m->detail), "%s", msg->reply->detail);
        if (msg->reply->body_case == B10__REPLY__BODY_REGISTER_MEM)
            m->region_id = msg->reply->register_mem->region_id;
        if (msg->reply->body_case == B10__REPLY__BODY_HELLO) {
            assert_true(msg->reply->hello->agent_desc.len <= sizeof(m->bytes));
            m->nbytes = msg->reply->hello->agent_desc.len;
            memcpy(m->bytes, msg->reply->hello->agent_desc.data, m->nbytes);
        }
        break;
    case B10__DAEMON_MSG__BODY_DONE:
        m->xfer_id = msg->done->xfer_id;
        m->status = (b10_status_t)msg->done->status;
        snprintf(m->detail, sizeof(m->detail), "%s", msg->done->detail);
        break;
    case B10__DAEMON_MSG__BODY_NOTICE:
        snprintf(m->from, sizeof(m->from), "%s", msg->notice->from_agent);
        assert_true(msg->notice->message.len <= sizeof(m->bytes));
        m->nbytes = msg->notice->message.len;
        memcpy(m->bytes, msg->notice->message.data, m->nbytes);
        break;
    default:
        fail_msg("session.c sent a message of no known kind");
    }
    b10__daemon_msg__free_unpacked(msg, NULL);
    free(frame);
}

b10_status_t __wrap_ipc_send(struct ipc_conn *conn, uint8_t *frame, size_t length);
b10_status_t __wrap_ipc_send(struct ipc_conn *conn, uint8_t *frame, size_t length)
{
    keep(conn, frame, length, false);
    return B10_OK;
}

b10_status_t __wrap_ipc_send_notice(struct ipc_conn *conn, uint8_t *frame, size_t length);
b10_status_t __wrap_ipc_send_notice(struct ipc_conn *conn, uint8_t *frame, size_t length)
{
    keep(conn, frame, length, true);
    return B10_OK;
}

size_t __wrap_ipc_notice_bytes(const struct ipc_conn *conn);
size_t __wrap_ipc_notice_bytes(const struct ipc_conn *conn)
{
    return notice_queued;
}

int __wrap_ipc_conn_take_fd(struct ipc_conn *conn);
int __wrap_ipc_conn_take_fd(struct ipc_conn *conn)
{
    int fd = next_fd;
    next_fd = -1;
    return fd;
}

void __wrap_ipc_conn_resume(struct ipc_conn *conn);
void __wrap_ipc_conn_resume(struct ipc_conn *conn)
{
    resumes++;
}

/* The reply to request seq on conn, or NULL. */
static const struct sent *reply_to(struct ipc_conn *conn, uint64_t seq)
{
    for (unsigned i = nsent; i-- > 0;)
        if (sent[i].conn == conn && sent[i].kind == B10__DAEMON_MSG__BODY_REPLY &&
            sent[i].seq == seq)
            return &sent[i];
    return NULL;
}

static unsigned sent_to(struct ipc_conn *conn)
{
    unsigned n = 0;
    for (unsigned i = 0; i < nsent; i++)
        n += sent[i].conn == conn;
    return n;
}

/* ---------------------------------------------------------------- the UCX address */

static uint8_t worker_address[64];
static size_t worker_address_len;

void __wrap_wire_address(struct wire *wire, const void **addr_p, size_t *length_p);
void __wrap_wire_address(struct wire *wire, const void **addr_p, size_t *length_p)
{
    *addr_p = worker_address;
    *length_p = worker_address_len;
}

/* ---------------------------------------------------------------- mapping memory */

static unsigned regions_opened;     /* on the thread pool: atomics */
static unsigned regions_closed;

static b10_status_t fake_map(struct region *r, const struct mem_request *req, char *detail,
                             size_t detail_len)
{
    return B10_OK;
}

static void fake_unmap(struct region *r)
{
    regions_closed++;
}

static bool fake_serves(const struct mem_request *req)
{
    return true;
}

static bool fake_takes_fd(const struct mem_request *req)
{
    return true;
}

/*
 * Kinds of memory in name only, opened and closed without a byte mapped,
 * one for each way a copier reaches a region: a region reaches its bytes
 * the way the real kind of its request does, so that the session counts
 * it as host memory or not.
 */
#define FAKE_KIND(r) { .name = "fake", .kind_name = "fake", .reach = (r), .serves = fake_serves, \
                       .takes_fd = fake_takes_fd, .open = fake_map, .close = fake_unmap }
static const struct mem_kind_ops fake_kinds[] = {
    [MEM_REACH_MAPPED] = FAKE_KIND(MEM_REACH_MAPPED),
    [MEM_REACH_FILE] = FAKE_KIND(MEM_REACH_FILE),
    [MEM_REACH_DEVICE] = FAKE_KIND(MEM_REACH_DEVICE),
};

b10_status_t __wrap_mem_region_open(uint64_t id, const struct mem_request *req, char *detail,
                                    size_t detail_len, struct region **region_p);
b10_status_t __wrap_mem_region_open(uint64_t id, const struct mem_request *req, char *detail,
                                    size_t detail_len, struct region **region_p)
{
    struct region *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return B10_ERR_NO_MEMORY;
    *r = (struct region){ .id = id, .addr = req->addr, .length = req->length,
                          .ops = &fake_kinds[mem_kind_of(req)->reach], .open = req->open,
                          .refs = 1, .device = -1, .proc_fd = -1 };
    __atomic_add_fetch(&regions_opened, 1, __ATOMIC_SEQ_CST);
    *region_p = r;
    return B10_OK;
}

static unsigned opened(void)
{
    return __atomic_load_n(&regions_opened, __ATOMIC_SEQ_CST);
}

/* ---------------------------------------------------------------- remote daemons */

static struct peer *peers[8];
static unsigned npeers;
static unsigned links_asked;        /* peer_ensure_link calls */

b10_status_t __wrap_peer_get(struct b10d *d, const struct peer_desc *desc, struct peer **peer_p,
                             char *detail, size_t detail_len);
b10_status_t __wrap_peer_get(struct b10d *d, const struct peer_desc *desc, struct peer **peer_p,
                             char *detail, size_t detail_len)
{
    for (unsigned i = 0; i < npeers; i++)
        if (peers[i]->daemon_id == desc->daemon_id && strcmp(peers[i]->name, desc->name) == 0) {
            *peer_p = peers[i];
            return B10_OK;
        }
    assert_true(npeers < sizeof(peers) / sizeof(peers[0]));
    struct peer *p = calloc(1, sizeof(*p));
    assert_non_null(p);
    p->d = d;
    p->daemon_id = desc->daemon_id;
    p->incarnation = desc->incarnation;
    snprintf(p->name, sizeof(p->name), "%s", desc->name);
    peers[npeers++] = p;
    *peer_p = p;
    return B10_OK;
}

void __wrap_peer_ref(struct peer *peer);
void __wrap_peer_ref(struct peer *peer)
{
    peer->refs++;
}

void __wrap_peer_unref(struct peer *peer);
void __wrap_peer_unref(struct peer *peer)
{
    assert_true(peer->refs > 0);
    peer->refs--;
}

b10_status_t __wrap_peer_ensure_link(struct peer *peer);
b10_status_t __wrap_peer_ensure_link(struct peer *peer)
{
    links_asked++;
    return B10_IN_PROGRESS;
}

static struct peer *peer_named(const char *name)
{
    for (unsigned i = 0; i < npeers; i++)
        if (strcmp(peers[i]->name, name) == 0)
            return peers[i];
    return NULL;
}

/* ---------------------------------------------------------------- the engine below */

struct failed {
    struct xfer *x;
    b10_status_t status;
    char detail[256];
};
static struct failed failed[16];
static unsigned nfailed;
static struct xfer *cancelled;
static const struct session *forgotten_rank, *settle_forgotten;
static struct ask *detached;

void __wrap_xfer_fail(struct xfer *x, b10_status_t status, const char *fmt, ...);
void __wrap_xfer_fail(struct xfer *x, b10_status_t status, const char *fmt, ...)
{
    va_list ap;
    assert_true(nfailed < sizeof(failed) / sizeof(failed[0]));
    struct failed *f = &failed[nfailed++];
    f->x = x;
    f->status = status;
    va_start(ap, fmt);
    vsnprintf(f->detail, sizeof(f->detail), fmt, ap);
    va_end(ap);
}

void __wrap_xfer_cancel(struct xfer *x);
void __wrap_xfer_cancel(struct xfer *x)
{
    cancelled = x;
}

void __wrap_xfer_local_forget_rank(struct session *s);
void __wrap_xfer_local_forget_rank(struct session *s)
{
    forgotten_rank = s;
}

void __wrap_xfer_settle_forget(struct b10d *d, const struct session *s);
void __wrap_xfer_settle_forget(struct b10d *d, const struct session *s)
{
    settle_forgotten = s;
}

void __wrap_ask_detach(struct ask *a);
void __wrap_ask_detach(struct ask *a)
{
    a->session = NULL;
    detached = a;
}

/* A transfer of rank s in flight, as the engine lists it: submitted (xfers) or landing (targets). */
static struct xfer *xfer_of(struct session *s, struct list *list, uint64_t id)
{
    struct xfer *x = calloc(1, sizeof(*x));
    assert_non_null(x);
    x->d = &test_d;
    x->id = id;
    x->session = s;
    list_insert_tail(list, &x->session_node);
    return x;
}

static struct failed *failure_of(const struct xfer *x)
{
    for (unsigned i = 0; i < nfailed; i++)
        if (failed[i].x == x)
            return &failed[i];
    return NULL;
}

/* ---------------------------------------------------------------- a rank's requests */

static uint64_t next_seq = 100;

/* One frame through the client socket's hook: what it tells the socket to do. */
static b10_status_t feed(struct session *s, B10__ClientMsg *m)
{
    size_t n = b10__client_msg__get_packed_size(m);
    uint8_t *buf = malloc(n + 1);
    assert_non_null(buf);
    b10__client_msg__pack(m, buf);
    b10_status_t rc = session_ipc_hooks.on_frame(s, buf, n);
    free(buf);
    return rc;
}

static struct session *open_conn(unsigned i, uid_t uid)
{
    struct session *s = session_ipc_hooks.open(&test_d, CONN(i), 4000 + (pid_t)i, uid, uid + 7);
    assert_non_null(s);
    return s;
}

static const struct sent *hello(struct session *s, const char *name)
{
    B10__Hello h = B10__HELLO__INIT;
    B10__ClientMsg m = B10__CLIENT_MSG__INIT;
    h.version = B10_PROTOCOL_VERSION;
    h.agent_name = (char *)name;
    m.seq = next_seq++;
    m.body_case = B10__CLIENT_MSG__BODY_HELLO;
    m.hello = &h;
    b10_status_t rc = feed(s, &m);
    const struct sent *r = reply_to(s->conn, m.seq);
    assert_non_null(r);
    assert_int_equal(rc, r->status);     /* a refusal drops the connection, with its status */
    return r;
}

/* A rank of uid i connected under name: its Hello answered B10_OK. */
static struct session *rank_of(unsigned i, uid_t uid, const char *name)
{
    struct session *s = open_conn(i, uid);
    assert_int_equal(hello(s, name)->status, B10_OK);
    return s;
}

static void hang_up(struct session *s)
{
    session_ipc_hooks.close(s);
}

/* Ask to register host memory (or VRAM); returns the request's seq. *rc_p: on_frame's. */
static uint64_t register_start(struct session *s, b10_mem_kind_t kind, uint64_t addr,
                               uint64_t length, b10_status_t *rc_p)
{
    B10__RegisterMem r = B10__REGISTER_MEM__INIT;
    B10__ClientMsg m = B10__CLIENT_MSG__INIT;
    uint8_t handle[64] = { 1 };
    r.kind = (B10__MemKind)kind;
    r.addr = addr;
    r.length = length;
    if (kind == B10_MEM_VRAM) {
        r.pci_bus_id = "0000:3b:00.0";
        r.alloc_base = addr;
        r.alloc_length = length;
        r.cuda_ipc_handle = (ProtobufCBinaryData){ sizeof(handle), handle };
    }
    m.seq = next_seq++;
    m.body_case = B10__CLIENT_MSG__BODY_REGISTER_MEM;
    m.register_mem = &r;
    *rc_p = feed(s, &m);
    return m.seq;
}

/* The loop runs what is off it (registrations) and the timers until nothing is left. */
static void run_loop(void)
{
    uv_run(&test_loop, UV_RUN_DEFAULT);
}

/* Register and wait for the answer; returns it. */
static const struct sent *register_mem(struct session *s, b10_mem_kind_t kind, uint64_t addr,
                                       uint64_t length)
{
    b10_status_t rc;
    uint64_t seq = register_start(s, kind, addr, length, &rc);
    if (rc == B10_IN_PROGRESS) {
        assert_null(reply_to(s->conn, seq));    /* answered once the region is open */
        run_loop();
    } else {
        assert_int_equal(rc, B10_OK);
    }
    const struct sent *r = reply_to(s->conn, seq);
    assert_non_null(r);
    return r;
}

static uint64_t registered(struct session *s, uint64_t addr, uint64_t length)
{
    const struct sent *r = register_mem(s, B10_MEM_DRAM, addr, length);
    assert_int_equal(r->status, B10_OK);
    assert_true(r->region_id != 0);
    return r->region_id;
}

static const struct sent *deregister(struct session *s, uint64_t id)
{
    B10__DeregisterMem dr = B10__DEREGISTER_MEM__INIT;
    B10__ClientMsg m = B10__CLIENT_MSG__INIT;
    dr.region_id = id;
    m.seq = next_seq++;
    m.body_case = B10__CLIENT_MSG__BODY_DEREGISTER_MEM;
    m.deregister_mem = &dr;
    assert_int_equal(feed(s, &m), B10_OK);
    return reply_to(s->conn, m.seq);
}

static b10_status_t lookup_emit(void *arg, struct region *r, uint64_t offset, uint64_t n)
{
    *(struct region **)arg = r;
    return B10_OK;
}

/* The region of s's table that holds addr, as the engine finds it, or NULL. */
static struct region *region_at(struct session *s, uint64_t addr)
{
    struct region *r = NULL;
    if (mem_table_walk(&s->mem, addr, 1, lookup_emit, &r) != B10_OK)
        return NULL;
    return r;
}

/* An agent descriptor as daemon daemon_name (boot daemon_id) seals one, under this daemon's key. */
static size_t seal_desc(const char *agent, const char *daemon_name, uint64_t daemon_id,
                        uint64_t incarnation, bool uid_known, uint32_t uid, uint8_t *out,
                        size_t out_len)
{
    B10__AgentDesc desc = B10__AGENT_DESC__INIT;
    desc.version = B10_PEER_PROTOCOL_VERSION;
    desc.name = (char *)agent;
    desc.daemon_id = daemon_id;
    desc.worker_address = (ProtobufCBinaryData){ worker_address_len, worker_address };
    desc.daemon_name = (char *)daemon_name;
    desc.incarnation = incarnation;
    desc.uid = uid;
    desc.uid_known = uid_known;
    size_t body = protobuf_c_message_get_packed_size(&desc.base);
    assert_true(AUTH_OVERHEAD + body <= out_len);
    protobuf_c_message_pack(&desc.base, out + AUTH_HEADER_BYTES);
    auth_seal(&test_d.keys.keys[0], AUTH_KIND_DESC, daemon_id, 0, out, body);
    return AUTH_OVERHEAD + body;
}

static const struct sent *load_agent(struct session *s, const char *name, const uint8_t *desc,
                                     size_t len, bool reload)
{
    B10__LoadAgent la = B10__LOAD_AGENT__INIT;
    B10__ClientMsg m = B10__CLIENT_MSG__INIT;
    la.name = (char *)name;
    la.desc = (ProtobufCBinaryData){ len, (uint8_t *)desc };
    la.reload = reload;
    m.seq = next_seq++;
    m.body_case = B10__CLIENT_MSG__BODY_LOAD_AGENT;
    m.load_agent = &la;
    assert_int_equal(feed(s, &m), B10_OK);
    const struct sent *r = reply_to(s->conn, m.seq);
    assert_non_null(r);
    return r;
}

/* Load a remote node's agent (node-b) into s; uid_known and uid as its descriptor says. */
static void load_remote(struct session *s, const char *name, bool uid_known, uint32_t uid)
{
    uint8_t desc[1024];
    size_t len = seal_desc(name, "node-b", REMOTE_ID, 7, uid_known, uid, desc, sizeof(desc));
    assert_int_equal(load_agent(s, name, desc, len, false)->status, B10_OK);
}

/* Load a rank of this node into s as name, by the descriptor its Hello got. */
static void load_local(struct session *s, const struct sent *hello_reply, const char *name)
{
    assert_true(hello_reply->nbytes > 0);
    assert_int_equal(load_agent(s, name, hello_reply->bytes, hello_reply->nbytes, false)->status,
                     B10_OK);
}

/* ---------------------------------------------------------------- fixture */

static uint64_t clock_ms;

static uint64_t fake_now_ms(struct b10d *d)
{
    return clock_ms;
}

static int group_setup(void **state)
{
    const void *addrs[1] = { "a worker address of no UCX" };
    size_t lengths[1] = { strlen(addrs[0]) };

    log_setup(LOG_LEVEL_ERR, "test-session");
    if (auth_init() != 0)
        return -1;
    worker_address_len = wireaddr_size(1, lengths);
    if (worker_address_len > sizeof(worker_address))
        return -1;
    wireaddr_pack(worker_address, 1, addrs, lengths);
    return 0;
}

static int setup(void **state)
{
    struct auth_key key;

    assert_int_equal(uv_loop_init(&test_loop), 0);
    memset(&test_d, 0, sizeof(test_d));
    config_defaults(&test_d.cfg);
    snprintf(test_d.cfg.name, sizeof(test_d.cfg.name), "node-a");
    test_d.cfg.max_clients_per_uid = 64;
    test_d.cfg.max_host_bytes_uid = 1ull << 40;
    test_d.loop = &test_loop;
    test_d.now_ms = fake_now_ms;
    test_d.rank_ops = &session_rank_ops;
    test_d.daemon_id = DAEMON_ID;
    test_d.incarnation = 1000;
    list_init(&test_d.sessions);
    list_init(&test_d.peers);
    list_init(&test_d.xfers);
    list_init(&test_d.settling);
    list_init(&test_d.regs_waiting);
    auth_key_local(&key);
    assert_int_equal(auth_keyring_add(&test_d.keys, &key), 0);
    test_d.names = names_create();
    assert_non_null(test_d.names);

    clock_ms = 1000;
    nsent = 0;
    notice_queued = 0;
    next_fd = -1;
    resumes = 0;
    __atomic_store_n(&regions_opened, 0, __ATOMIC_SEQ_CST);
    regions_closed = 0;
    npeers = 0;
    links_asked = 0;
    nfailed = 0;
    cancelled = NULL;
    forgotten_rank = settle_forgotten = NULL;
    detached = NULL;
    return 0;
}

static int teardown(void **state)
{
    struct list *pos, *tmp;

    list_for_each_safe(pos, tmp, &test_d.sessions)
        hang_up(list_entry(pos, struct session, node));
    /* Every registration's work and every deregistration's timer ended; nothing left open. */
    run_loop();
    assert_int_equal(uv_loop_close(&test_loop), 0);
    assert_int_equal(test_d.nsessions, 0);
    assert_int_equal(test_d.nranks, 0);
    assert_int_equal(test_d.regs_running, 0);
    assert_int_equal(regions_closed, opened());
    for (unsigned i = 0; i < npeers; i++) {
        assert_int_equal(peers[i]->refs, 0);
        free(peers[i]);
    }
    names_destroy(test_d.names);
    auth_key_wipe(&test_d.keys.keys[0]);
    return 0;
}

/* ---------------------------------------------------------------- finding ranks, their uid */

/*
 * The engine finds a rank by the name it said Hello with, and only then: a
 * connection that has not said who it is has no name, so an empty name from
 * a peer finds nobody; a rank that left is found no more.
 */
static void test_find_names_introduced_ranks(void **state)
{
    struct session *fresh = open_conn(0, 1000);
    assert_null(ops->find(&test_d, ""));
    assert_null(ops->find(&test_d, "prefill-0"));

    struct session *p = rank_of(1, 1000, "prefill-0");
    struct session *q = rank_of(2, 1001, "decode-0");
    assert_ptr_equal(ops->find(&test_d, "prefill-0"), p);
    assert_ptr_equal(rank_find(&test_d, "decode-0"), q);
    assert_null(ops->find(&test_d, "decode-1"));
    assert_null(ops->find(&test_d, ""));
    assert_int_equal(test_d.nranks, 2);
    assert_int_equal(test_d.nsessions, 3);

    hang_up(p);
    assert_null(ops->find(&test_d, "prefill-0"));
    assert_ptr_equal(ops->find(&test_d, "decode-0"), q);
    assert_int_equal(test_d.nranks, 1);
    assert_int_equal(test_d.nsessions, 2);
    hang_up(fresh);
}

/*
 * A rank's uid is its socket's (SO_PEERCRED), not its gid or pid: what the
 * engine holds a remote daemon's request against (rank_uid_check).
 */
static void test_uid_is_the_sockets(void **state)
{
    char detail[256] = "";
    struct session *s = rank_of(0, 1234, "decode-0");

    assert_int_equal(ops->uid(s), 1234);
    assert_int_equal(rank_uid_check(&test_d, s, "decode-0", true, 1234, detail, sizeof(detail)),
                     B10_OK);
    assert_int_equal(rank_uid_check(&test_d, s, "decode-0", false, 99, detail, sizeof(detail)),
                     B10_OK);
    assert_int_equal(rank_uid_check(&test_d, s, "decode-0", true, 1241, detail, sizeof(detail)),
                     B10_ERR_UNKNOWN_AGENT);
    assert_non_null(strstr(detail, "uid 1241"));
}

/*
 * Hello is the only way in, and it is bounded: --max-clients ranks in all,
 * --max-clients-per-uid of one uid, a name once per connected rank and for
 * good its first uid's. Every refusal drops the connection (on_frame
 * answers the refusal's status) and leaves no rank behind.
 */
static void test_hello_bounded(void **state)
{
    B10__ClientMsg m = B10__CLIENT_MSG__INIT;
    B10__DeregisterMem dr = B10__DEREGISTER_MEM__INIT;
    B10__Hello h = B10__HELLO__INIT;
    test_d.cfg.max_clients = 3;
    test_d.cfg.max_clients_per_uid = 2;

    struct session *s = open_conn(0, 1000);
    m.seq = next_seq++;
    m.body_case = B10__CLIENT_MSG__BODY_DEREGISTER_MEM;
    m.deregister_mem = &dr;
    assert_int_equal(feed(s, &m), B10_ERR_PROTOCOL);
    assert_int_equal(reply_to(s->conn, m.seq)->status, B10_ERR_PROTOCOL);
    assert_int_equal(test_d.stats.client_protocol_errors, 1);
    hang_up(s);

    s = open_conn(0, 1000);
    m.seq = next_seq++;
    m.body_case = B10__CLIENT_MSG__BODY_HELLO;
    m.hello = &h;
    h.version = B10_PROTOCOL_VERSION + 1;
    h.agent_name = "prefill-0";
    assert_int_equal(feed(s, &m), B10_ERR_VERSION);
    assert_int_equal(reply_to(s->conn, m.seq)->status, B10_ERR_VERSION);
    assert_int_equal(hello(s, "two words")->status, B10_ERR_INVALID_ARG);
    assert_int_equal(hello(s, "")->status, B10_ERR_INVALID_ARG);
    assert_int_equal(test_d.nranks, 0);
    hang_up(s);

    struct session *a = rank_of(0, 1000, "prefill-0");
    assert_int_equal(hello(a, "prefill-0")->status, B10_ERR_PROTOCOL);     /* twice */
    rank_of(1, 1000, "prefill-1");
    s = open_conn(2, 1000);
    const struct sent *r = hello(s, "prefill-2");
    assert_int_equal(r->status, B10_ERR_TOO_LARGE);
    assert_non_null(strstr(r->detail, "--max-clients-per-uid"));
    hang_up(s);
    s = open_conn(2, 2000);
    r = hello(s, "prefill-0");              /* uid 1000's name */
    assert_int_equal(r->status, B10_ERR_PERMISSION);
    assert_non_null(strstr(r->detail, "held by uid 1000"));
    assert_int_equal(hello(s, "decode-0")->status, B10_OK);
    s = open_conn(3, 3000);
    r = hello(s, "decode-1");
    assert_int_equal(r->status, B10_ERR_TOO_LARGE);
    assert_non_null(strstr(r->detail, "--max-clients)"));
    hang_up(s);
    assert_int_equal(test_d.nranks, 3);

    hang_up(a);
    s = open_conn(0, 1000);
    assert_int_equal(hello(s, "prefill-1")->status, B10_ERR_EXISTS);    /* still connected */
    assert_int_equal(hello(s, "prefill-0")->status, B10_OK);
}

/* ---------------------------------------------------------------- registrations */

/*
 * Each rank's own table is bounded (--max-regions, --max-register-bytes):
 * past either, refused before anything is mapped; another rank of the same
 * uid has a table of its own. A registration pauses the connection and
 * resumes it once answered.
 */
static void test_register_bounded_per_rank(void **state)
{
    test_d.cfg.max_regions = 2;
    test_d.cfg.max_register_bytes = 256 * KiB;
    struct session *a = rank_of(0, 1000, "prefill-0");
    struct session *b = rank_of(1, 1000, "prefill-1");

    uint64_t r1 = registered(a, 0x100000, 64 * KiB);
    assert_int_equal(resumes, 1);
    uint64_t r2 = registered(a, 0x200000, 64 * KiB);
    assert_true(r1 != r2);
    assert_int_equal(opened(), 2);

    const struct sent *r = register_mem(a, B10_MEM_DRAM, 0x300000, 4 * KiB);
    assert_int_equal(r->status, B10_ERR_TOO_LARGE);
    assert_non_null(strstr(r->detail, "--max-regions"));
    assert_int_equal(opened(), 2);
    assert_int_equal(resumes, 2);           /* a refusal does not pause the connection */

    registered(b, 0x100000, 64 * KiB);      /* the same addresses: another rank's space */
    r = register_mem(b, B10_MEM_DRAM, 0x200000, 256 * KiB);
    assert_int_equal(r->status, B10_ERR_TOO_LARGE);
    assert_non_null(strstr(r->detail, "--max-register-bytes"));
    registered(b, 0x200000, 192 * KiB);     /* exactly the bound */
    assert_int_equal(opened(), 4);
    assert_int_equal(a->mem.count, 2);
    assert_int_equal(b->mem.bytes, 256 * KiB);
}

/*
 * One uid's ranks together map at most --max-host-bytes-per-uid of host
 * memory: counted over all its ranks, with registrations still being
 * opened off the loop, never wrapping; another uid's ranks and VRAM do not
 * count, and a rank that left gives its share back.
 */
static void test_register_bounded_per_uid(void **state)
{
    test_d.cfg.max_host_bytes_uid = 96 * KiB;
    test_d.cfg.max_register_bytes = UINT64_MAX;
    struct session *a = rank_of(0, 1000, "prefill-0");
    struct session *b = rank_of(1, 1000, "prefill-1");
    struct session *c = rank_of(2, 2000, "decode-0");
    struct session *d = rank_of(3, 3000, "decode-1");
    struct session *e = rank_of(4, 3000, "decode-2");

    registered(a, 0x100000, 64 * KiB);
    registered(b, 0x100000, 32 * KiB);      /* the two of them: exactly the bound */
    const struct sent *r = register_mem(b, B10_MEM_DRAM, 0x200000, 4 * KiB);
    assert_int_equal(r->status, B10_ERR_TOO_LARGE);
    assert_non_null(strstr(r->detail, "--max-host-bytes-per-uid"));
    assert_non_null(strstr(r->detail, "uid 1000"));
    /* So large that the uid's sum wraps (not the rank's own): refused all the same. */
    struct session *f = rank_of(5, 1000, "prefill-2");
    r = register_mem(f, B10_MEM_DRAM, 0x1000, UINT64_MAX - 64 * KiB);
    assert_int_equal(r->status, B10_ERR_TOO_LARGE);
    assert_non_null(strstr(r->detail, "--max-host-bytes-per-uid"));
    /* VRAM is bounded by the GPU, not by this. */
    assert_int_equal(register_mem(a, B10_MEM_VRAM, 0x7f0000000000, 1 << 20)->status, B10_OK);

    registered(c, 0x100000, 96 * KiB);      /* another uid: a share of its own */

    /* One of d's still being opened counts: e, of the same uid, is refused meanwhile. */
    b10_status_t rc;
    uint64_t seq = register_start(d, B10_MEM_DRAM, 0x100000, 64 * KiB, &rc);
    assert_int_equal(rc, B10_IN_PROGRESS);
    r = register_mem(e, B10_MEM_DRAM, 0x100000, 64 * KiB);
    assert_int_equal(r->status, B10_ERR_TOO_LARGE);
    run_loop();
    assert_int_equal(reply_to(d->conn, seq)->status, B10_OK);

    hang_up(a);                             /* gone, and its 64 KiB with it */
    registered(b, 0x200000, 64 * KiB);
    assert_int_equal(opened(), 6);
}

/*
 * The descriptor a registration's frame carries is taken off the socket
 * where its kind takes one (a memfd, the rank's /proc/self/mem, a VMM
 * allocation's fd), and closed once the registration is done with it; a
 * cudaIpcMemHandle's registration leaves it. One of no known kind that
 * says vmm_fd has its descriptor taken and closed with the refusal, so
 * that the next registration's descriptor is its own.
 */
static void test_register_takes_its_descriptor(void **state)
{
    static const struct {
        b10_mem_kind_t kind;
        bool process_mem, vmm_fd, taken;
        b10_status_t status;
    } cases[] = {
        { B10_MEM_DRAM, false, false, true, B10_OK },
        { B10_MEM_DRAM, true, false, true, B10_OK },
        { B10_MEM_VRAM, false, false, false, B10_OK },
        { B10_MEM_VRAM, false, true, true, B10_OK },
        { (b10_mem_kind_t)77, false, false, false, B10_ERR_INVALID_ARG },
        { (b10_mem_kind_t)77, false, true, true, B10_ERR_INVALID_ARG },
    };
    struct session *s = rank_of(0, 1000, "prefill-0");
    uint8_t handle[64] = { 1 };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        B10__RegisterMem r = B10__REGISTER_MEM__INIT;
        B10__ClientMsg m = B10__CLIENT_MSG__INIT;
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        r.kind = (B10__MemKind)cases[i].kind;
        r.addr = 0x100000 + i * 0x10000;
        r.length = 4 * KiB;
        r.process_mem = cases[i].process_mem;
        r.vmm_fd = cases[i].vmm_fd;
        r.pci_bus_id = "0000:3b:00.0";
        r.alloc_base = r.addr;
        r.alloc_length = r.length;
        if (!cases[i].vmm_fd)
            r.cuda_ipc_handle = (ProtobufCBinaryData){ sizeof(handle), handle };
        m.seq = next_seq++;
        m.body_case = B10__CLIENT_MSG__BODY_REGISTER_MEM;
        m.register_mem = &r;
        next_fd = fd;
        if (feed(s, &m) == B10_IN_PROGRESS)
            run_loop();
        const struct sent *reply = reply_to(s->conn, m.seq);
        assert_non_null(reply);
        if (reply->status != cases[i].status)
            fail_msg("case %zu: %s, not %s: %s", i, b10_status_name(reply->status),
                     b10_status_name(cases[i].status), reply->detail);
        if (cases[i].taken) {
            assert_int_equal(next_fd, -1);
            assert_int_equal(fcntl(fd, F_GETFD), -1);      /* the session closed it */
            assert_int_equal(errno, EBADF);
        } else {
            if (next_fd != fd)
                fail_msg("case %zu: the descriptor was taken", i);
            next_fd = -1;
            close(fd);
        }
    }
}

/*
 * A deregistration finds the region by its id in the asking rank's table
 * only: another rank's id, or one deregistered already, is not found. The
 * engine's walk finds a region between its registration and its
 * deregistration, under the id its reply said, and then no more.
 */
static void test_region_lookup_is_per_rank(void **state)
{
    struct session *a = rank_of(0, 1000, "prefill-0");
    struct session *b = rank_of(1, 1000, "prefill-1");
    uint64_t ra = registered(a, 0x100000, 64 * KiB);
    uint64_t rb = registered(b, 0x400000, 64 * KiB);

    struct region *found = region_at(ops->find(&test_d, "prefill-0"), 0x100000 + 100);
    assert_non_null(found);
    assert_int_equal(found->id, ra);
    assert_null(region_at(a, 0x400000));

    const struct sent *r = deregister(a, rb);
    assert_non_null(r);
    assert_int_equal(r->status, B10_ERR_NOT_FOUND);
    assert_non_null(region_at(b, 0x400000));
    assert_int_equal(regions_closed, 0);

    r = deregister(a, ra);
    assert_non_null(r);
    assert_int_equal(r->status, B10_OK);
    assert_null(region_at(a, 0x100000));
    assert_int_equal(a->mem.count, 0);
    assert_int_equal(regions_closed, 1);    /* no copy held it: unmapped at once */
    assert_int_equal(deregister(a, ra)->status, B10_ERR_NOT_FOUND);
    assert_int_equal(deregister(a, 0)->status, B10_ERR_NOT_FOUND);
}

/*
 * A copy still goes through the region: the deregistration takes it out of
 * the table at once (no new copy finds it) and answers when the copy lets
 * go; past --settle-ms it answers B10_ERR_UNSETTLED, and the region is
 * unmapped only once the late copy ended.
 */
static void test_deregister_waits_for_copies(void **state)
{
    test_d.cfg.settle_ms = 20;
    struct session *a = rank_of(0, 1000, "prefill-0");
    uint64_t id = registered(a, 0x100000, 64 * KiB);
    struct region *copy = region_at(a, 0x100000);
    region_ref(copy);                       /* a copy through it starts */

    uint64_t seq = next_seq;
    assert_null(deregister(a, id));
    assert_null(region_at(a, 0x100000));
    region_unref(copy);                     /* the copy ended */
    const struct sent *r = reply_to(a->conn, seq);
    assert_non_null(r);
    assert_int_equal(r->status, B10_OK);
    assert_int_equal(regions_closed, 1);
    run_loop();                             /* its timer closes; no second answer */
    assert_int_equal(sent_to(a->conn), 3);  /* Hello, register, deregister */

    id = registered(a, 0x100000, 64 * KiB);
    copy = region_at(a, 0x100000);
    region_ref(copy);
    seq = next_seq;
    assert_null(deregister(a, id));
    run_loop();                             /* the bound passes, the copy still runs */
    r = reply_to(a->conn, seq);
    assert_non_null(r);
    assert_int_equal(r->status, B10_ERR_UNSETTLED);
    assert_non_null(strstr(r->detail, "--settle-ms"));
    assert_int_equal(regions_closed, 1);
    unsigned before = sent_to(a->conn);
    region_unref(copy);
    assert_int_equal(regions_closed, 2);
    assert_int_equal(sent_to(a->conn), before);
}

/* ---------------------------------------------------------------- hang-up */

/*
 * A rank hangs up with everything in flight: transfers it submitted and
 * transfers landing in its memory fail B10_ERR_CLIENT_GONE and let go of
 * it; the engine forgets it (local transfers, news still settling); its
 * asks finish quietly; its remote agents let go of their daemons; a
 * deregistration waiting for a copy ends unanswered, its region unmapped
 * when the copy ends; a registration being opened is closed again when
 * done, unanswered. Nothing more goes to its connection, and its name stays
 * its uid's.
 */
static void test_hangup_settles_what_it_started(void **state)
{
    struct session *b = rank_of(1, 1000, "decode-0");
    const struct sent *b_hello = reply_to(b->conn, next_seq - 1);
    struct session *a = rank_of(0, 1000, "prefill-0");

    struct xfer *sending1 = xfer_of(a, &a->xfers, 11);
    struct xfer *sending2 = xfer_of(a, &a->xfers, 12);
    struct xfer *landing = xfer_of(a, &a->targets, 13);
    struct ask *ask = calloc(1, sizeof(*ask));
    assert_non_null(ask);
    ask->session = a;
    list_insert_tail(&a->asks, &ask->session_node);

    load_remote(a, "decode-7", true, 4242);
    load_local(a, b_hello, "decode-0");
    assert_int_equal(peer_named("node-b")->refs, 1);
    assert_int_equal(peer_named("node-a")->refs, 1);

    uint64_t id = registered(a, 0x100000, 64 * KiB);
    struct region *copy = region_at(a, 0x100000);
    region_ref(copy);
    assert_null(deregister(a, id));         /* waits for the copy */

    int fds[2];
    assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
    next_fd = fds[0];                       /* the memfd the registration carries */
    b10_status_t rc;
    register_start(a, B10_MEM_DRAM, 0x200000, 64 * KiB, &rc);
    assert_int_equal(rc, B10_IN_PROGRESS);
    unsigned to_a = sent_to(CONN(0));
    unsigned names = names_count(test_d.names);

    hang_up(a);
    assert_int_equal(nfailed, 3);
    assert_int_equal(failure_of(sending1)->status, B10_ERR_CLIENT_GONE);
    assert_non_null(strstr(failure_of(sending2)->detail, "submitting rank disconnected"));
    assert_int_equal(failure_of(landing)->status, B10_ERR_CLIENT_GONE);
    assert_non_null(strstr(failure_of(landing)->detail, "destination rank disconnected"));
    assert_null(sending1->session);
    assert_null(sending2->session);
    assert_null(landing->session);
    assert_ptr_equal(forgotten_rank, a);
    assert_ptr_equal(settle_forgotten, a);
    assert_ptr_equal(detached, ask);
    assert_null(ask->session);
    assert_int_equal(peer_named("node-b")->refs, 0);
    assert_int_equal(peer_named("node-a")->refs, 0);
    assert_null(ops->find(&test_d, "prefill-0"));
    assert_int_equal(test_d.nranks, 1);
    assert_int_equal(names_count(test_d.names), names);
    uid_t holder;
    assert_true(names_holder(test_d.names, "prefill-0", &holder));
    assert_int_equal(holder, 1000);

    run_loop();                             /* the registration's work ends; the timer closes */
    assert_int_equal(fcntl(fds[0], F_GETFD), -1);   /* the work closed the memfd */
    assert_int_equal(errno, EBADF);
    close(fds[1]);
    assert_int_equal(opened(), 2);
    assert_int_equal(regions_closed, 1);    /* the one being opened, closed again */
    assert_int_equal(test_d.regs_running, 0);
    region_unref(copy);                     /* the copy ends: the deregistered region goes */
    assert_int_equal(regions_closed, 2);
    assert_int_equal(sent_to(CONN(0)), to_a);

    /* Its uid's rank takes the name back. */
    rank_of(2, 1000, "prefill-0");
    free(sending1);
    free(sending2);
    free(landing);
    free(ask);
}

/*
 * Registrations take at most two threads of the pool at once; the rest
 * wait their turn. A rank that hangs up while its registration waits has
 * had nothing opened: the descriptor it sent is closed at once and its turn
 * never comes; the next one waiting has it.
 */
static void test_hangup_drops_a_waiting_registration(void **state)
{
    struct session *a = rank_of(0, 1000, "prefill-0");
    struct session *b = rank_of(1, 1000, "prefill-1");
    struct session *c = rank_of(2, 1000, "prefill-2");
    b10_status_t rc;
    int fds[2];

    uint64_t seq_a = register_start(a, B10_MEM_DRAM, 0x100000, 4 * KiB, &rc);
    assert_int_equal(rc, B10_IN_PROGRESS);
    uint64_t seq_b = register_start(b, B10_MEM_DRAM, 0x100000, 4 * KiB, &rc);
    assert_int_equal(rc, B10_IN_PROGRESS);
    assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
    next_fd = fds[0];
    register_start(c, B10_MEM_DRAM, 0x100000, 4 * KiB, &rc);
    assert_int_equal(rc, B10_IN_PROGRESS);
    assert_int_equal(test_d.regs_running, 2);
    assert_false(list_empty(&test_d.regs_waiting));

    hang_up(c);
    assert_true(list_empty(&test_d.regs_waiting));
    assert_int_equal(fcntl(fds[0], F_GETFD), -1);
    assert_int_equal(errno, EBADF);
    close(fds[1]);

    /* Another waits in c's place, and has its turn when one of the two ends. */
    struct session *d = rank_of(3, 1000, "prefill-3");
    uint64_t seq_d = register_start(d, B10_MEM_DRAM, 0x100000, 4 * KiB, &rc);
    assert_int_equal(rc, B10_IN_PROGRESS);
    assert_false(list_empty(&test_d.regs_waiting));

    run_loop();
    assert_int_equal(reply_to(a->conn, seq_a)->status, B10_OK);
    assert_int_equal(reply_to(b->conn, seq_b)->status, B10_OK);
    assert_int_equal(reply_to(d->conn, seq_d)->status, B10_OK);
    assert_int_equal(opened(), 3);          /* c's never was */
    assert_int_equal(resumes, 3);
    assert_int_equal(sent_to(CONN(2)), 1);  /* its Hello's answer only */
}

/* ---------------------------------------------------------------- remote agents */

/*
 * agent_uid: the uid a descriptor of another node named for the agent, when
 * it said one; never for an agent of this node (its name's holder decides
 * that, here) and never for a name not loaded, whose uid stays unwritten.
 */
static void test_agent_uid_of_remote_agents(void **state)
{
    struct session *b = rank_of(1, 1000, "decode-0");
    const struct sent *b_hello = reply_to(b->conn, next_seq - 1);
    struct session *a = rank_of(0, 1000, "prefill-0");
    uint32_t uid = 77;

    load_remote(a, "decode-7", true, 4242);
    load_remote(a, "decode-8", false, 4343);
    load_local(a, b_hello, "decode-0");

    assert_true(ops->agent_uid(a, "decode-7", &uid));
    assert_int_equal(uid, 4242);
    uid = 77;
    assert_true(rank_agent_uid(&test_d, a, "decode-7", &uid));
    assert_int_equal(uid, 4242);
    uid = 77;
    assert_false(ops->agent_uid(a, "decode-8", &uid));
    assert_false(ops->agent_uid(a, "decode-0", &uid));
    assert_false(ops->agent_uid(a, "decode-9", &uid));
    assert_false(rank_agent_uid(&test_d, NULL, "decode-7", &uid));
    assert_int_equal(uid, 77);

    /* The agent ops find each under its name, with its node. */
    assert_ptr_equal(ops->agent(a, "decode-7")->peer, peer_named("node-b"));
    assert_ptr_equal(rank_agent(&test_d, a, "decode-0")->peer, peer_named("node-a"));
    assert_null(ops->agent(a, "decode-9"));
    assert_null(ops->agent(b, "decode-7"));     /* another rank's loads are not b's */

    /* Loading a name again replaces it: a restarted remote rank's new descriptor. */
    load_remote(a, "decode-7", true, 4343);
    assert_true(ops->agent_uid(a, "decode-7", &uid));
    assert_int_equal(uid, 4343);
    assert_int_equal(a->nagents, 3);
}

/*
 * agent_use: a remote node's agent may be sent to once loaded; an agent of
 * this node only while its name is held by the uid it was loaded for. A
 * descriptor of an earlier boot of this daemon names that uid itself: after
 * a restart another user's rank may have taken the name first, and must
 * not receive what was meant for the owner.
 */
static void test_agent_use_holds_the_name_to_its_uid(void **state)
{
    struct session *b = rank_of(1, 1000, "decode-0");
    const struct sent *b_hello = reply_to(b->conn, next_seq - 1);
    struct session *z = rank_of(2, 2000, "decode-9");
    struct session *a = rank_of(0, 1000, "prefill-0");
    struct remote_agent *agent = NULL;
    char detail[256] = "";
    uint8_t desc[1024];

    load_remote(a, "decode-7", true, 4242);
    load_local(a, b_hello, "decode-0");
    /* decode-9's descriptor of this daemon's earlier boot, when uid 1000 held the name. */
    size_t len = seal_desc("decode-9", "node-a", DAEMON_ID ^ 1, 10, true, 1000, desc, sizeof(desc));
    assert_int_equal(load_agent(a, "decode-9", desc, len, false)->status, B10_OK);
    assert_ptr_equal(ops->agent(a, "decode-9")->peer, peer_named("node-a"));
    /* ... and one whose name nobody holds. */
    len = seal_desc("decode-5", "node-a", DAEMON_ID ^ 1, 10, true, 1000, desc, sizeof(desc));
    assert_int_equal(load_agent(a, "decode-5", desc, len, false)->status, B10_OK);

    assert_int_equal(ops->agent_use(a, "decode-7", &agent, detail, sizeof(detail)), B10_OK);
    assert_ptr_equal(agent, ops->agent(a, "decode-7"));
    assert_int_equal(rank_agent_use(&test_d, a, "decode-0", &agent, detail, sizeof(detail)),
                     B10_OK);
    assert_ptr_equal(agent, ops->agent(a, "decode-0"));

    agent = NULL;
    assert_int_equal(ops->agent_use(a, "decode-9", &agent, detail, sizeof(detail)),
                     B10_ERR_UNKNOWN_AGENT);
    assert_non_null(strstr(detail, "no longer held"));
    assert_int_equal(ops->agent_use(a, "decode-5", &agent, detail, sizeof(detail)),
                     B10_ERR_UNKNOWN_AGENT);
    assert_int_equal(ops->agent_use(a, "decode-3", &agent, detail, sizeof(detail)),
                     B10_ERR_UNKNOWN_AGENT);
    assert_non_null(strstr(detail, "not loaded"));
    assert_null(agent);

    /* decode-0's rank left: its uid keeps the name, the agent is still good. */
    hang_up(b);
    assert_int_equal(ops->agent_use(a, "decode-0", &agent, detail, sizeof(detail)), B10_OK);
    hang_up(z);
}

/*
 * A descriptor loads only when it opens under a key this daemon holds and
 * names the agent it is loaded as; a rank holds at most --max-agents of
 * them, a reload of one it holds not counting again, an invalidated one
 * making room.
 */
static void test_load_agent_refused_and_bounded(void **state)
{
    test_d.cfg.max_agents = 2;
    struct session *a = rank_of(0, 1000, "prefill-0");
    B10__ClientMsg m = B10__CLIENT_MSG__INIT;
    B10__InvalidateAgent inv = B10__INVALIDATE_AGENT__INIT;
    uint8_t desc[1024];
    size_t len = seal_desc("decode-7", "node-b", REMOTE_ID, 7, true, 4242, desc, sizeof(desc));

    desc[len - 1] ^= 1;                     /* its MAC */
    const struct sent *r = load_agent(a, "decode-7", desc, len, false);
    assert_int_equal(r->status, B10_ERR_UNAUTHENTICATED);
    assert_non_null(strstr(r->detail, "forged or damaged"));
    assert_int_equal(test_d.stats.descriptors_refused, 1);
    desc[len - 1] ^= 1;
    r = load_agent(a, "decode-8", desc, len, false);
    assert_int_equal(r->status, B10_ERR_INVALID_ARG);
    assert_non_null(strstr(r->detail, "names agent 'decode-7'"));
    assert_int_equal(load_agent(a, "decode 7", desc, len, false)->status, B10_ERR_INVALID_ARG);
    assert_int_equal(load_agent(a, "decode-7", desc, 0, false)->status, B10_ERR_INVALID_ARG);
    assert_null(ops->agent(a, "decode-7"));
    assert_int_equal(npeers, 0);            /* nothing refused reached a remote daemon */

    load_remote(a, "decode-7", true, 4242);
    load_remote(a, "decode-8", true, 4242);
    len = seal_desc("decode-9", "node-b", REMOTE_ID, 7, true, 4242, desc, sizeof(desc));
    r = load_agent(a, "decode-9", desc, len, false);
    assert_int_equal(r->status, B10_ERR_TOO_LARGE);
    assert_non_null(strstr(r->detail, "--max-agents"));
    load_remote(a, "decode-8", true, 4343); /* at the bound, a name held already */
    assert_int_equal(peer_named("node-b")->refs, 2);

    m.seq = next_seq++;
    m.body_case = B10__CLIENT_MSG__BODY_INVALIDATE_AGENT;
    m.invalidate_agent = &inv;
    inv.name = "decode-7";
    assert_int_equal(feed(a, &m), B10_OK);
    assert_int_equal(reply_to(a->conn, m.seq)->status, B10_OK);
    assert_null(ops->agent(a, "decode-7"));
    assert_int_equal(peer_named("node-b")->refs, 1);
    m.seq = next_seq++;
    assert_int_equal(feed(a, &m), B10_OK);
    assert_int_equal(reply_to(a->conn, m.seq)->status, B10_ERR_NOT_FOUND);
    assert_int_equal(load_agent(a, "decode-9", desc, len, false)->status, B10_OK);
}

/*
 * A reload after this daemon restarted asks for a link to the descriptor's
 * node, bounded: once per node per rank, and once a second per node over
 * all ranks; never a link to this daemon itself.
 */
static void test_reload_links_once(void **state)
{
    struct session *b = rank_of(1, 1000, "decode-0");
    const struct sent *b_hello = reply_to(b->conn, next_seq - 1);
    struct session *a = rank_of(0, 1000, "prefill-0");
    struct session *c = rank_of(2, 1000, "prefill-1");
    uint8_t desc[1024];
    size_t len;

    len = seal_desc("decode-7", "node-b", REMOTE_ID, 7, true, 4242, desc, sizeof(desc));
    assert_int_equal(load_agent(a, "decode-7", desc, len, true)->status, B10_OK);
    assert_int_equal(links_asked, 1);
    len = seal_desc("decode-8", "node-b", REMOTE_ID, 7, true, 4242, desc, sizeof(desc));
    assert_int_equal(load_agent(a, "decode-8", desc, len, true)->status, B10_OK);
    assert_int_equal(links_asked, 1);       /* the same node, the same rank */
    assert_int_equal(load_agent(c, "decode-8", desc, len, true)->status, B10_OK);
    assert_int_equal(links_asked, 1);       /* another rank, within the second */
    clock_ms += 1000;                       /* ... the second has passed */
    assert_int_equal(load_agent(c, "decode-8", desc, len, true)->status, B10_OK);
    assert_int_equal(links_asked, 1);       /* c asked for node-b already */
    len = seal_desc("decode-9", "node-b", REMOTE_ID, 7, true, 4242, desc, sizeof(desc));
    struct session *e = rank_of(3, 1000, "prefill-2");
    assert_int_equal(load_agent(e, "decode-9", desc, len, true)->status, B10_OK);
    assert_int_equal(links_asked, 2);
    assert_int_equal(load_agent(a, "decode-0", b_hello->bytes, b_hello->nbytes, true)->status,
                     B10_OK);
    assert_int_equal(links_asked, 2);       /* this daemon itself */
}

/* ---------------------------------------------------------------- news for the rank */

/*
 * A rank's notices are bounded (--max-notice-bytes): queued unread on its
 * socket and reserved by transfers that will land, together; a release
 * never takes more than was reserved. A notice goes out as a Notice, on the
 * socket's notice queue.
 */
static void test_notices_bounded(void **state)
{
    test_d.cfg.max_notice_bytes = 1000;
    struct session *s = rank_of(0, 1000, "decode-0");

    notice_queued = 300;
    rank_notice_reserve(&test_d, s, 500);
    assert_true(rank_notice_room(&test_d, s, 200));
    assert_false(ops->notice_room(s, 201));
    ops->notice_release(s, 500);
    assert_true(ops->notice_room(s, 700));
    assert_false(ops->notice_room(s, 701));
    ops->notice_reserve(s, 100);
    rank_notice_release(&test_d, s, 150);   /* more than reserved: down to nothing, not below */
    assert_int_equal(s->notice_reserved, 0);
    assert_true(ops->notice_room(s, 700));

    const uint8_t message[5] = "hello";
    rank_notice(&test_d, s, "prefill-0", message, sizeof(message));
    assert_int_equal(nsent, 2);
    assert_int_equal(sent[1].kind, B10__DAEMON_MSG__BODY_NOTICE);
    assert_true(sent[1].as_notice);
    assert_string_equal(sent[1].from, "prefill-0");
    assert_int_equal(sent[1].nbytes, 5);
    assert_memory_equal(sent[1].bytes, message, 5);
}

/*
 * A transfer's end reaches its rank as a Done with its id, status and
 * detail, unless the rank released it; an ask's answer as the Reply to its
 * request. Cancel and Release find a transfer among the rank's own only.
 */
static void test_done_answer_cancel_release(void **state)
{
    struct session *a = rank_of(0, 1000, "prefill-0");
    struct session *b = rank_of(1, 1000, "prefill-1");
    struct xfer *x = xfer_of(a, &a->xfers, 0x51);
    struct xfer *y = xfer_of(b, &b->xfers, 0x52);
    B10__ClientMsg m = B10__CLIENT_MSG__INIT;
    B10__CancelXfer cx = B10__CANCEL_XFER__INIT;
    B10__ReleaseXfer rx = B10__RELEASE_XFER__INIT;

    x->status = B10_ERR_DEADLINE;
    snprintf(x->detail, sizeof(x->detail), "deadline of 5 ms expired");
    rank_xfer_done(&test_d, a, x);
    const struct sent *done = &sent[nsent - 1];
    assert_int_equal(done->kind, B10__DAEMON_MSG__BODY_DONE);
    assert_ptr_equal(done->conn, a->conn);
    assert_int_equal(done->xfer_id, 0x51);
    assert_int_equal(done->status, B10_ERR_DEADLINE);
    assert_string_equal(done->detail, "deadline of 5 ms expired");

    rank_answer(&test_d, a, 77, B10_ERR_BUSY, "the remote rank's notices are full");
    assert_int_equal(reply_to(a->conn, 77)->status, B10_ERR_BUSY);
    assert_string_equal(reply_to(a->conn, 77)->detail, "the remote rank's notices are full");

    /* a cancels b's transfer: not found among its own, nothing cancelled. */
    m.seq = next_seq++;
    m.body_case = B10__CLIENT_MSG__BODY_CANCEL;
    m.cancel = &cx;
    cx.xfer_id = 0x52;
    assert_int_equal(feed(a, &m), B10_OK);
    assert_int_equal(reply_to(a->conn, m.seq)->status, B10_ERR_NOT_FOUND);
    assert_null(cancelled);
    m.seq = next_seq++;
    cx.xfer_id = 0x51;
    assert_int_equal(feed(a, &m), B10_OK);
    assert_int_equal(reply_to(a->conn, m.seq)->status, B10_OK);
    assert_ptr_equal(cancelled, x);

    m.seq = next_seq++;
    m.body_case = B10__CLIENT_MSG__BODY_RELEASE;
    m.release = &rx;
    rx.xfer_id = 0x52;
    assert_int_equal(feed(a, &m), B10_OK);
    assert_false(y->released);
    rx.xfer_id = 0x51;
    assert_int_equal(feed(a, &m), B10_OK);
    assert_true(x->released);
    unsigned before = nsent;
    ops->xfer_done(a, x);                   /* released: nobody to tell */
    assert_int_equal(nsent, before);

    list_remove(&x->session_node);
    list_remove(&y->session_node);
    free(x);
    free(y);
}

/*
 * A rank's Cancel and Release of another user's transfer are answered as for
 * an id no transfer has: the same status and words, nothing cancelled or
 * released, so that a rank cannot tell which ids are in flight; the owner's
 * Cancel works.
 */
static void test_cancel_of_others_answered_as_none(void **state)
{
    struct session *a = rank_of(0, 1000, "prefill-0");
    struct session *b = rank_of(1, 2000, "decode-0");
    struct xfer *y = xfer_of(b, &b->xfers, 0x5200000007);
    B10__ClientMsg m = B10__CLIENT_MSG__INIT;
    B10__CancelXfer cx = B10__CANCEL_XFER__INIT;
    B10__ReleaseXfer rx = B10__RELEASE_XFER__INIT;
    const uint64_t ids[2] = { 0x5200000007, 0x5200000008 };   /* b's, and none */
    struct sent answers[2][2];

    for (int i = 0; i < 2; i++) {
        m.seq = next_seq++;
        m.body_case = B10__CLIENT_MSG__BODY_CANCEL;
        m.cancel = &cx;
        cx.xfer_id = ids[i];
        assert_int_equal(feed(a, &m), B10_OK);
        answers[i][0] = *reply_to(a->conn, m.seq);
        m.seq = next_seq++;
        m.body_case = B10__CLIENT_MSG__BODY_RELEASE;
        m.release = &rx;
        rx.xfer_id = ids[i];
        assert_int_equal(feed(a, &m), B10_OK);
        answers[i][1] = *reply_to(a->conn, m.seq);
    }
    for (int k = 0; k < 2; k++) {
        assert_int_equal(answers[0][k].status, answers[1][k].status);
        assert_string_equal(answers[0][k].detail, answers[1][k].detail);
    }
    assert_int_equal(answers[0][0].status, B10_ERR_NOT_FOUND);
    assert_null(cancelled);
    assert_false(y->released);
    /* The owner's. */
    m.seq = next_seq++;
    m.body_case = B10__CLIENT_MSG__BODY_CANCEL;
    m.cancel = &cx;
    cx.xfer_id = ids[0];
    assert_int_equal(feed(b, &m), B10_OK);
    assert_int_equal(reply_to(b->conn, m.seq)->status, B10_OK);
    assert_ptr_equal(cancelled, y);

    list_remove(&y->session_node);
    free(y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_find_names_introduced_ranks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_uid_is_the_sockets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hello_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_register_bounded_per_rank, setup, teardown),
        cmocka_unit_test_setup_teardown(test_register_bounded_per_uid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_register_takes_its_descriptor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_region_lookup_is_per_rank, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deregister_waits_for_copies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hangup_settles_what_it_started, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hangup_drops_a_waiting_registration, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_uid_of_remote_agents, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_use_holds_the_name_to_its_uid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_agent_refused_and_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_links_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_notices_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_done_answer_cancel_release, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_of_others_answered_as_none, setup, teardown),
    };
    return cmocka_run_group_tests_name("session", tests, group_setup, NULL);
}
