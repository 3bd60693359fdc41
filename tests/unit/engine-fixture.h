/*
 * engine-fixture.h — the daemon the transfer engine's unit tests run
 * (test-xfer-send.c, test-xfer-read.c, test-xfer-local.c).
 *
 * A struct b10d on a real libuv loop with a clock of the test's; real tags,
 * staging views (registered with no UCX), quarantine and copies (copy.c:
 * inline and on the thread pool); ranks whose memory is a real memfd,
 * registered through mem.c as a rank's is, which the test reads and writes
 * through a mapping of its own. Above the engine the rank_ops table
 * (rank.h) is a recorder. Below it the wire and the link rooms are fakes
 * (-Wl,--wrap, the Makefile's ENGINE_WRAPS): an operation posted on the
 * wire is kept until the test completes it, as UCX would; a message sealed
 * for a peer is kept packed for the test to decode; a reply the engine
 * opens is plain protobuf, so the test writes the peer's answers itself.
 * The log is kept too (its last lines), so a test can read what it said.
 */
#ifndef B10_TEST_ENGINE_FIXTURE_H
#define B10_TEST_ENGINE_FIXTURE_H

#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "b10d.h"
#include "copy.h"
#include "frame.h"
#include "names.h"
#include "peer.h"
#include "plan.h"
#include "quarantine.h"
#include "rank.h"
#include "session.h"
#include "staging.h"
#include "tags.h"
#include "xfer-int.h"

#define EX_VIEW (64u << 10)         /* a staging view: the largest chunk */
#define EX_VIEWS 8
#define EX_RANK_ADDR UINT64_C(0x7f0000000000)   /* where rank k says its memory is: + k << 32 */

static uv_loop_t ex_loop;
static struct b10d ex_d;
static uint64_t ex_clock_ms;

static uint64_t ex_now_ms(struct b10d *d)
{
    return ex_clock_ms;
}

/* Real time a test waits for a condition at most: 10 s, times $SLOW (tests/lib.sh). */
static inline unsigned ex_bound_ms(void)
{
    const char *slow = getenv("SLOW");
    unsigned k = slow != NULL && atoi(slow) > 0 ? (unsigned)atoi(slow) : 1;
    return 10000u * k;
}

static uv_timer_t ex_tick;

static void ex_on_tick(uv_timer_t *t)
{
}

/*
 * Turn the loop until done(arg) holds, or the bound passed; whether it
 * holds. A turn of libuv's runs its due timers and then waits for I/O: a
 * tick each millisecond ends that wait, so that the test looks at the
 * state soon after what it waits for, not once a later event came.
 */
static inline bool ex_run_until(bool (*done)(const void *arg), const void *arg)
{
    uint64_t end = uv_hrtime() + (uint64_t)ex_bound_ms() * 1000000u;
    uv_timer_start(&ex_tick, ex_on_tick, 1, 1);
    while (!done(arg) && uv_hrtime() < end)
        uv_run(&ex_loop, UV_RUN_ONCE);
    uv_timer_stop(&ex_tick);
    return done(arg);
}

/* ---------------------------------------------------------------- the log, kept */

#define EX_LOG_LINES 64
static char ex_log[EX_LOG_LINES][1024];
static unsigned ex_nlog;
static pthread_mutex_t ex_log_lock = PTHREAD_MUTEX_INITIALIZER;   /* copy threads log too */

static inline void ex_log_keep(const char *fields, const char *fmt, va_list ap)
{
    pthread_mutex_lock(&ex_log_lock);
    char *line = ex_log[ex_nlog++ % EX_LOG_LINES];
    size_t n = (size_t)snprintf(line, sizeof(ex_log[0]), "%.500s", fields);
    vsnprintf(line + n, sizeof(ex_log[0]) - n, fmt, ap);
    pthread_mutex_unlock(&ex_log_lock);
}

void __wrap_log_write(int level, const char *fmt, ...);
void __wrap_log_write(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ex_log_keep("", fmt, ap);
    va_end(ap);
}

void __wrap_log_write_fields(int level, const char *const *fields, size_t nfields,
                             const char *fmt, ...);
void __wrap_log_write_fields(int level, const char *const *fields, size_t nfields,
                             const char *fmt, ...)
{
    char head[512] = "";
    size_t n = 0;
    for (size_t i = 0; i < nfields && n < sizeof(head) - 1; i++)
        n += (size_t)snprintf(head + n, sizeof(head) - n, "%s ", fields[i]);
    va_list ap;
    va_start(ap, fmt);
    ex_log_keep(head, fmt, ap);
    va_end(ap);
}

/* The latest kept line holding what, or NULL. */
static inline const char *ex_logged(const char *what)
{
    unsigned first = ex_nlog > EX_LOG_LINES ? ex_nlog - EX_LOG_LINES : 0;
    for (unsigned i = ex_nlog; i-- > first;)
        if (strstr(ex_log[i % EX_LOG_LINES], what) != NULL)
            return ex_log[i % EX_LOG_LINES];
    return NULL;
}

/*
 * x's deadline comes now: its timer, restarted to fire in a millisecond
 * (the clock of the test's past it too), whatever real time its budget had.
 */
static inline void ex_deadline_now(struct xfer *x)
{
    ex_clock_ms = x->deadline_ms;
    uv_timer_set_repeat(&x->timer, 1);
    assert_int_equal(uv_timer_again(&x->timer), 0);
}

/* ---------------------------------------------------------------- ranks: real memory, a recorder */

struct ex_rank {
    struct session s;
    int fd;
    uint8_t *mem;                   /* the rank's own mapping of its memfd */
    size_t len;
    uint64_t addr;                  /* where the rank says the memfd's byte 0 is */
    struct remote_agent agents[4];
    /* What it heard: its transfers' ends, and notices. */
    unsigned told;
    b10_status_t status;
    uint64_t told_id;
    char detail[512];
    unsigned released_ends;         /* ends of transfers of its whose handle it dropped */
    unsigned notices;
    char notice_from[256];
    uint8_t notice[64];
    size_t notice_length;
};

#define EX_RANKS 3
static struct ex_rank ex_ranks[EX_RANKS];
static unsigned ex_nranks;
static size_t ex_notice_max;        /* notices a rank may have queued and promised, bytes */
static void (*ex_told_hook)(struct ex_rank *k);    /* the test's look at the moment of the news */

static inline struct ex_rank *ex_rank_of(struct session *s)
{
    return (struct ex_rank *)s;     /* the session is its first member */
}

/*
 * Rank name of uid with a memfd of len bytes, every page written (a pattern
 * of seed), its name held by uid; no region registered (ex_register).
 */
static inline struct ex_rank *ex_rank_new(const char *name, uid_t uid, size_t len, unsigned seed)
{
    assert_true(ex_nranks < EX_RANKS);
    struct ex_rank *k = &ex_ranks[ex_nranks];
    memset(k, 0, sizeof(*k));
    k->s.d = &ex_d;
    snprintf(k->s.agent, sizeof(k->s.agent), "%s", name);
    k->s.uid = uid;
    k->s.hello_done = true;
    mem_table_init(&k->s.mem, 64, UINT64_MAX);
    list_init(&k->s.agents);
    list_init(&k->s.xfers);
    list_init(&k->s.targets);
    list_init(&k->s.locals);
    list_init(&k->s.asks);
    list_init(&k->s.deregs);
    k->addr = EX_RANK_ADDR + ((uint64_t)ex_nranks << 32);
    k->len = len;
    k->fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    assert_true(k->fd >= 0);
    assert_int_equal(ftruncate(k->fd, (off_t)len), 0);
    assert_int_equal(fcntl(k->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    k->mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, k->fd, 0);
    assert_true(k->mem != MAP_FAILED);
    for (size_t i = 0; i < len; i++)
        k->mem[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 12));
    uid_t holder;
    assert_int_equal(names_claim(ex_d.names, name, uid, &holder), B10_OK);
    list_insert_tail(&ex_d.sessions, &k->s.node);
    ex_nranks++;
    return k;
}

/* Register bytes [off, off + len) of k's memfd as a region (open to the node if open). */
static inline struct region *ex_register(struct ex_rank *k, uint64_t off, uint64_t len, bool open)
{
    char detail[256];
    struct region *r = NULL;
    struct mem_request req = { .kind = B10_MEM_DRAM, .addr = k->addr + off, .length = len,
                               .fd = k->fd, .fd_offset = off, .open = open };
    assert_int_equal(mem_table_add(&k->s.mem, ++ex_d.next_region, &req, detail, sizeof(detail),
                                   &r), B10_OK);
    return r;
}

/* A rank of uid with one region over its len bytes. */
static inline struct ex_rank *ex_rank(const char *name, uid_t uid, size_t len, unsigned seed)
{
    struct ex_rank *k = ex_rank_new(name, uid, len, seed);
    ex_register(k, 0, len, false);
    return k;
}

/* k loads the descriptor of name, a rank behind peer (uid_known: of uid), granting grants. */
static inline struct remote_agent *ex_load(struct ex_rank *k, const char *name, struct peer *peer,
                                    bool uid_known, uid_t uid, uint32_t grants)
{
    assert_true(k->s.nagents < 4);
    struct remote_agent *a = &k->agents[k->s.nagents++];
    memset(a, 0, sizeof(*a));
    snprintf(a->name, sizeof(a->name), "%s", name);
    a->peer = peer;
    a->uid_known = uid_known;
    a->uid = uid;
    a->grants = grants;
    list_insert_tail(&k->s.agents, &a->node);
    return a;
}

static inline struct session *ex_find(struct b10d *d, const char *agent)
{
    for (unsigned i = 0; i < ex_nranks; i++)
        if (strcmp(ex_ranks[i].s.agent, agent) == 0)
            return &ex_ranks[i].s;
    return NULL;
}

static inline struct remote_agent *ex_agent(struct session *s, const char *name)
{
    struct list *pos;
    for (pos = s->agents.next; pos != &s->agents; pos = pos->next) {
        struct remote_agent *a = list_entry(pos, struct remote_agent, node);
        if (strcmp(a->name, name) == 0)
            return a;
    }
    return NULL;
}

static inline bool ex_agent_uid(struct session *s, const char *name, uint32_t *uid_p)
{
    struct remote_agent *a = ex_agent(s, name);
    if (a == NULL || !a->uid_known)
        return false;
    *uid_p = a->uid;
    return true;
}

static uint32_t ex_uid(struct session *s)
{
    return s->uid;
}

static b10_status_t ex_agent_use(struct session *s, const char *name, struct remote_agent **agent_p,
                                 char *detail, size_t detail_len)
{
    struct remote_agent *a = ex_agent(s, name);
    if (a == NULL) {
        snprintf(detail, detail_len, "no agent '%s' loaded", name);
        return B10_ERR_UNKNOWN_AGENT;
    }
    *agent_p = a;
    return B10_OK;
}

static inline void ex_xfer_done(struct session *s, const struct xfer *x)
{
    struct ex_rank *k = ex_rank_of(s);
    assert_ptr_equal(x->session, s);
    /* A handle the rank dropped (a write-back's is never its own) is told nothing: session.c. */
    if (x->released) {
        k->released_ends++;
        return;
    }
    k->told++;
    if (ex_told_hook != NULL)
        ex_told_hook(k);
    k->status = x->status;
    k->told_id = x->id;
    snprintf(k->detail, sizeof(k->detail), "%s", x->detail);
}

static inline void ex_answer(struct session *s, uint64_t seq, b10_status_t status, const char *detail)
{
    fail_msg("the engine answered a request of '%s'", s->agent);
}

static inline void ex_notice(struct session *s, const char *from, const uint8_t *data, size_t length)
{
    struct ex_rank *k = ex_rank_of(s);
    k->notices++;
    snprintf(k->notice_from, sizeof(k->notice_from), "%s", from);
    assert_true(length <= sizeof(k->notice));
    memcpy(k->notice, data, length);
    k->notice_length = length;
}

static inline bool ex_notice_room(struct session *s, size_t length)
{
    return s->notice_reserved + length <= ex_notice_max;
}

static inline void ex_notice_reserve(struct session *s, size_t length)
{
    s->notice_reserved += length;
}

static inline void ex_notice_release(struct session *s, size_t length)
{
    assert_true(s->notice_reserved >= length);
    s->notice_reserved -= length;
}

static const struct rank_ops ex_rank_ops = {
    .find = ex_find,
    .agent = ex_agent,
    .agent_uid = ex_agent_uid,
    .uid = ex_uid,
    .agent_use = ex_agent_use,
    .xfer_done = ex_xfer_done,
    .answer = ex_answer,
    .notice = ex_notice,
    .notice_room = ex_notice_room,
    .notice_reserve = ex_notice_reserve,
    .notice_release = ex_notice_release,
};

static inline bool ex_told(const void *arg)
{
    return ((const struct ex_rank *)arg)->told > 0;
}

/* Turn the loop until k heard of its transfer: that it did, once. */
static inline void ex_wait_told(struct ex_rank *k)
{
    assert_true(ex_run_until(ex_told, k));
    assert_int_equal(k->told, 1);
}

/* count spans of len bytes step apart from k's byte off on, into t (as a request carries them). */
static inline void ex_spans(uint8_t *t, size_t count, const struct ex_rank *k, uint64_t off,
                     uint64_t step, uint64_t len)
{
    for (size_t i = 0; i < count; i++) {
        frame_put_u64(t + i * SPAN_BYTES, k->addr + off + i * step);
        frame_put_u64(t + i * SPAN_BYTES + 8, len);
    }
}

/* ---------------------------------------------------------------- peers: this node, and node-b */

struct wire_ep {
    int unused;
};
static struct wire_ep ex_ep;
static struct peer ex_self, ex_node_b;

static inline void ex_peer_init(struct peer *p, const char *name, uint64_t daemon_id)
{
    memset(p, 0, sizeof(*p));
    p->d = &ex_d;
    snprintf(p->name, sizeof(p->name), "%s", name);
    p->daemon_id = daemon_id;
    p->ep = &ex_ep;
    p->state = PEER_UP;
    p->in_up = true;
    p->out.tags = (struct tag_link){ .key = { 1, 2, 3 }, .sender_id = ex_d.daemon_id,
                                     .receiver_id = daemon_id, .gen = 7 };
    p->in.tags = (struct tag_link){ .key = { 4, 5, 6 }, .sender_id = daemon_id,
                                    .receiver_id = ex_d.daemon_id, .gen = 9 };
    p->max_chunk = EX_VIEW;
    p->max_control = ex_d.cfg.max_control_bytes;
    p->max_pieces = 1u << 16;
    list_init(&p->waiting);
    list_init(&p->xfers);
    list_init(&p->asks);
    list_insert_tail(&ex_d.peers, &p->node);
    ex_d.npeers++;
}

/* What the link rooms were asked: peer_* below are their fakes. */
static b10_status_t ex_use_status;  /* peer_use's answer: B10_OK, B10_IN_PROGRESS or a refusal */
static bool ex_send_fails;          /* peer_send finds no link */
static unsigned ex_unauthentic;     /* replies that do not open, before the next that does */
static bool ex_stalls;              /* peer_liveness_check finds this daemon stalled */
static unsigned ex_heard, ex_refused;

struct ex_sent {
    struct peer *peer;
    uint64_t gen, tag;
    uint8_t *buf;
    size_t length;
};
#define EX_SENT_MAX 64
static struct ex_sent ex_sent[EX_SENT_MAX];
static unsigned ex_nsent;

struct ex_result {
    struct peer *peer;
    uint64_t gen, id;
    b10_status_t status;
    char detail[512];
};
#define EX_RESULTS_MAX 16
static struct ex_result ex_results[EX_RESULTS_MAX];
static unsigned ex_nresults;

b10_status_t __wrap_peer_send(struct peer *peer, uint64_t gen, uint64_t tag,
                              const struct ProtobufCMessage *msg);
b10_status_t __wrap_peer_send(struct peer *peer, uint64_t gen, uint64_t tag,
                              const struct ProtobufCMessage *msg)
{
    if (ex_send_fails)
        return (b10_status_t)-1;
    assert_true(ex_nsent < EX_SENT_MAX);
    size_t length = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(length + 1);
    assert_non_null(buf);
    protobuf_c_message_pack(msg, buf);
    ex_sent[ex_nsent++] = (struct ex_sent){ peer, gen, tag, buf, length };
    return B10_OK;
}

/* The latest message sent of body case want, decoded (the caller frees it), or NULL. */
static inline B10__Peer__Msg *ex_sent_msg(B10__Peer__Msg__BodyCase want, struct ex_sent **sent_p)
{
    for (unsigned i = ex_nsent; i-- > 0;) {
        B10__Peer__Msg *m = b10__peer__msg__unpack(NULL, ex_sent[i].length, ex_sent[i].buf);
        assert_non_null(m);
        if (m->body_case == want) {
            if (sent_p != NULL)
                *sent_p = &ex_sent[i];
            return m;
        }
        b10__peer__msg__free_unpacked(m, NULL);
    }
    return NULL;
}

static inline unsigned ex_sent_count(B10__Peer__Msg__BodyCase want)
{
    unsigned n = 0;
    for (unsigned i = 0; i < ex_nsent; i++) {
        B10__Peer__Msg *m = b10__peer__msg__unpack(NULL, ex_sent[i].length, ex_sent[i].buf);
        assert_non_null(m);
        n += m->body_case == want;
        b10__peer__msg__free_unpacked(m, NULL);
    }
    return n;
}

b10_status_t __wrap_peer_open(struct peer *peer, uint64_t gen, const uint8_t *buf, size_t length,
                              B10__Peer__Msg **msg_p);
b10_status_t __wrap_peer_open(struct peer *peer, uint64_t gen, const uint8_t *buf, size_t length,
                              B10__Peer__Msg **msg_p)
{
    if (ex_unauthentic > 0) {
        ex_unauthentic--;
        return B10_ERR_UNAUTHENTICATED;
    }
    B10__Peer__Msg *m = b10__peer__msg__unpack(NULL, length, buf);
    if (m == NULL)
        return B10_ERR_PEER_PROTOCOL;
    *msg_p = m;
    return B10_OK;
}

b10_status_t __wrap_peer_use(struct peer *peer, struct link_user *u);
b10_status_t __wrap_peer_use(struct peer *peer, struct link_user *u)
{
    if (ex_use_status == B10_OK)
        list_insert_tail(&peer->xfers, &u->node);
    else if (ex_use_status == B10_IN_PROGRESS)
        list_insert_tail(&peer->waiting, &u->node);
    return ex_use_status;
}

/* The outbound link came up: what peer.c does for the work that waited. */
static inline void ex_link_up(struct peer *peer)
{
    while (!list_empty(&peer->waiting)) {
        struct link_user *u = list_entry(peer->waiting.next, struct link_user, node);
        list_remove(&u->node);
        list_insert_tail(&peer->xfers, &u->node);
        u->ops->up(u);
    }
}

void __wrap_peer_hold(struct peer *peer);
void __wrap_peer_hold(struct peer *peer)
{
    peer->holds++;
}

void __wrap_peer_release(struct peer *peer);
void __wrap_peer_release(struct peer *peer)
{
    assert_true(peer->holds > 0);
    peer->holds--;
}

void __wrap_peer_heard(struct peer *peer);
void __wrap_peer_heard(struct peer *peer)
{
    ex_heard++;
}

/* A stall fails the work on every link, as peer-liveness.c does. */
bool __wrap_peer_liveness_check(struct b10d *d);
bool __wrap_peer_liveness_check(struct b10d *d)
{
    if (!ex_stalls)
        return false;
    ex_stalls = false;
    while (!list_empty(&ex_node_b.xfers)) {
        struct link_user *u = list_entry(ex_node_b.xfers.next, struct link_user, node);
        list_remove(&u->node);
        u->ops->lost(u, B10_ERR_PEER_LOST, "this daemon stalled");
    }
    return true;
}

void __wrap_peer_send_result(struct peer *peer, uint64_t gen, uint64_t id, b10_status_t status,
                             const char *detail);
void __wrap_peer_send_result(struct peer *peer, uint64_t gen, uint64_t id, b10_status_t status,
                             const char *detail)
{
    assert_true(ex_nresults < EX_RESULTS_MAX);
    struct ex_result *r = &ex_results[ex_nresults++];
    *r = (struct ex_result){ peer, gen, id, status, "" };
    snprintf(r->detail, sizeof(r->detail), "%s", detail);
}

const char *__wrap_peer_link_why(struct peer *peer);
const char *__wrap_peer_link_why(struct peer *peer)
{
    return "its door did not answer";
}

void __wrap_peer_refused(struct peer *peer, const char *what, const char *why);
void __wrap_peer_refused(struct peer *peer, const char *what, const char *why)
{
    ex_refused++;
    peer->counters.refused++;
}

bool __wrap_peer_is_self(const struct peer *peer);
bool __wrap_peer_is_self(const struct peer *peer)
{
    return peer == &ex_self;
}

/* ---------------------------------------------------------------- the wire, faked */

struct wire_op {
    bool send, bulk;
    uint64_t tag;
    uint8_t *buf;
    size_t length;
    wire_done_cb *cb;
    void *arg;
    bool cancelled, done;
};
#define EX_OPS_MAX 256
static struct wire_op ex_ops[EX_OPS_MAX];
static unsigned ex_nops;
static unsigned ex_post_fails;      /* posts still to refuse (B10_ERR_PEER_LOST), from the next */

static b10_status_t ex_post(bool send, bool bulk, uint64_t tag, const void *buf, size_t length,
                            wire_done_cb *cb, void *arg, struct wire_op **op_p)
{
    if (ex_post_fails > 0) {
        ex_post_fails--;
        return B10_ERR_PEER_LOST;
    }
    assert_true(ex_nops < EX_OPS_MAX);
    struct wire_op *op = &ex_ops[ex_nops++];
    *op = (struct wire_op){ .send = send, .bulk = bulk, .tag = tag, .buf = (uint8_t *)buf,
                            .length = length, .cb = cb, .arg = arg };
    *op_p = op;
    return B10_OK;
}

b10_status_t __wrap_wire_send(struct wire_ep *ep, uint64_t tag, const void *buf, size_t length,
                              void *memh, wire_done_cb *cb, void *arg, struct wire_op **op_p);
b10_status_t __wrap_wire_send(struct wire_ep *ep, uint64_t tag, const void *buf, size_t length,
                              void *memh, wire_done_cb *cb, void *arg, struct wire_op **op_p)
{
    assert_ptr_equal(ep, &ex_ep);
    return ex_post(true, false, tag, buf, length, cb, arg, op_p);
}

b10_status_t __wrap_wire_recv(struct wire *wire, const struct wire_ep *by, uint64_t tag, void *buf,
                              size_t length, void *memh, wire_done_cb *cb, void *arg,
                              struct wire_op **op_p);
b10_status_t __wrap_wire_recv(struct wire *wire, const struct wire_ep *by, uint64_t tag, void *buf,
                              size_t length, void *memh, wire_done_cb *cb, void *arg,
                              struct wire_op **op_p)
{
    return ex_post(false, false, tag, buf, length, cb, arg, op_p);
}

b10_status_t __wrap_wire_send_bulk(struct wire_ep *ep, uint32_t key, uint64_t tag, const void *buf,
                                   size_t length, void *memh, wire_done_cb *cb, void *arg,
                                   struct wire_op **op_p);
b10_status_t __wrap_wire_send_bulk(struct wire_ep *ep, uint32_t key, uint64_t tag, const void *buf,
                                   size_t length, void *memh, wire_done_cb *cb, void *arg,
                                   struct wire_op **op_p)
{
    assert_ptr_equal(ep, &ex_ep);
    return ex_post(true, true, tag, buf, length, cb, arg, op_p);
}

b10_status_t __wrap_wire_recv_bulk(struct wire_ep *ep, uint32_t key, uint64_t tag, void *buf,
                                   size_t length, void *memh, wire_done_cb *cb, void *arg,
                                   struct wire_op **op_p);
b10_status_t __wrap_wire_recv_bulk(struct wire_ep *ep, uint32_t key, uint64_t tag, void *buf,
                                   size_t length, void *memh, wire_done_cb *cb, void *arg,
                                   struct wire_op **op_p)
{
    return ex_post(false, true, tag, buf, length, cb, arg, op_p);
}

/* UCX completes a cancelled operation later, B10_ERR_CANCELLED: ex_flush does. */
void __wrap_wire_cancel(struct wire *w, struct wire_op *op);
void __wrap_wire_cancel(struct wire *w, struct wire_op *op)
{
    if (op != NULL && !op->done)
        op->cancelled = true;
}

uint64_t __wrap_wire_progress_ns(const struct wire *wire);
uint64_t __wrap_wire_progress_ns(const struct wire *wire)
{
    return 0;
}

b10_status_t __wrap_wire_mem_map(struct wire *wire, void *addr, size_t length, void **memh_p);
b10_status_t __wrap_wire_mem_map(struct wire *wire, void *addr, size_t length, void **memh_p)
{
    *memh_p = NULL;
    return B10_OK;
}

void __wrap_wire_mem_unmap(struct wire *wire, void *memh);
void __wrap_wire_mem_unmap(struct wire *wire, void *memh)
{
}

/* The latest operation posted on tag and not yet completed, or NULL. */
static inline struct wire_op *ex_op_on(uint64_t tag)
{
    for (unsigned i = ex_nops; i-- > 0;)
        if (ex_ops[i].tag == tag && !ex_ops[i].done)
            return &ex_ops[i];
    return NULL;
}

static inline unsigned ex_ops_open(void)
{
    unsigned n = 0;
    for (unsigned i = 0; i < ex_nops; i++)
        n += !ex_ops[i].done;
    return n;
}

static inline void ex_complete(struct wire_op *op, b10_status_t status, size_t length)
{
    assert_non_null(op);
    assert_false(op->done);
    op->done = true;
    op->cb(op->arg, status, length);
}

/* The peer's answer msg into the receive posted on tag, which completes. */
static inline void ex_reply(uint64_t tag, const B10__Peer__Msg *msg)
{
    struct wire_op *op = ex_op_on(tag);
    assert_non_null(op);
    assert_false(op->send);
    size_t length = protobuf_c_message_get_packed_size(&msg->base);
    assert_true(length <= op->length);
    protobuf_c_message_pack(&msg->base, op->buf);
    ex_complete(op, B10_OK, length);
}

static inline void ex_reply_ready(uint64_t tag, uint64_t xfer_id)
{
    B10__Peer__Ready ready = B10__PEER__READY__INIT;
    B10__Peer__Msg msg = B10__PEER__MSG__INIT;
    ready.xfer_id = xfer_id;
    msg.body_case = B10__PEER__MSG__BODY_READY;
    msg.ready = &ready;
    ex_reply(tag, &msg);
}

static inline void ex_reply_result(uint64_t tag, uint64_t xfer_id, int status, const char *detail)
{
    B10__Peer__Result result = B10__PEER__RESULT__INIT;
    B10__Peer__Msg msg = B10__PEER__MSG__INIT;
    result.xfer_id = xfer_id;
    result.status = (B10__Status)status;
    result.detail = (char *)detail;
    msg.body_case = B10__PEER__MSG__BODY_RESULT;
    msg.result = &result;
    ex_reply(tag, &msg);
}

/* Cancelled operations complete, as UCX completes them after wire_cancel. */
static inline void ex_flush(void)
{
    for (unsigned i = 0; i < ex_nops; i++)
        if (ex_ops[i].cancelled && !ex_ops[i].done)
            ex_complete(&ex_ops[i], B10_ERR_CANCELLED, 0);
}

/* ---------------------------------------------------------------- the daemon */

/* What the quarantine holds of kind (QUARANTINE_*). */
static inline unsigned ex_quarantined(enum quarantine_kind kind)
{
    unsigned n = 0;
    const struct list *l = quarantine_entries(ex_d.quarantine), *pos;
    for (pos = l->next; pos != l; pos = pos->next)
        n += list_entry(pos, struct quarantine_entry, node)->kind == kind;
    return n;
}

static inline int ex_setup(void **state)
{
    assert_int_equal(uv_loop_init(&ex_loop), 0);
    uv_timer_init(&ex_loop, &ex_tick);
    uv_unref((uv_handle_t *)&ex_tick);
    memset(&ex_d, 0, sizeof(ex_d));
    config_defaults(&ex_d.cfg);
    snprintf(ex_d.cfg.name, sizeof(ex_d.cfg.name), "node-a");
    ex_d.cfg.view_bytes = EX_VIEW;
    ex_d.cfg.staging_bytes = EX_VIEWS * EX_VIEW;
    ex_d.loop = &ex_loop;
    ex_d.now_ms = ex_now_ms;
    ex_d.daemon_id = 0xa0a0;
    ex_d.rank_ops = &ex_rank_ops;
    list_init(&ex_d.xfers);
    list_init(&ex_d.settling);
    list_init(&ex_d.ahead_parked);
    list_init(&ex_d.sessions);
    list_init(&ex_d.peers);
    list_init(&ex_d.regs_waiting);
    list_init(&ex_d.aheads_waiting);
    ids_init(&ex_d.ids, (const uint64_t[IDS_SEED_WORDS]){ 0x5eed, 3, 4 });
    assert_non_null(ex_d.tags = tags_create(4096, 0));
    assert_non_null(ex_d.names = names_create());
    assert_int_equal(staging_create(&ex_d, EX_VIEWS * EX_VIEW, EX_VIEW, &ex_d.staging), B10_OK);
    assert_int_equal(quarantine_create(&ex_d, &ex_d.quarantine), B10_OK);
    copy_start(&ex_d);
    ex_clock_ms = 1000;
    ex_nranks = 0;
    ex_notice_max = 1024;
    ex_told_hook = NULL;
    ex_peer_init(&ex_self, "node-a", ex_d.daemon_id);
    ex_peer_init(&ex_node_b, "node-b", 0xb0b0);
    ex_use_status = B10_OK;
    ex_send_fails = ex_stalls = false;
    ex_unauthentic = ex_heard = ex_refused = 0;
    ex_nsent = ex_nresults = ex_nops = ex_post_fails = 0;
    ex_nlog = 0;
    return 0;
}

static inline bool ex_all_gone(const void *arg)
{
    return ex_d.nxfers == 0 && list_empty(&ex_d.settling);
}

/*
 * Every operation still posted completes cancelled (as at a worker's close),
 * every transfer is freed, nothing is left on the loop, and every view
 * that was not quarantined came back.
 */
static inline int ex_teardown(void **state)
{
    for (unsigned i = 0; i < ex_nops; i++)
        if (!ex_ops[i].done)
            ex_complete(&ex_ops[i], B10_ERR_CANCELLED, 0);
    assert_true(ex_run_until(ex_all_gone, NULL));
    assert_int_equal(uv_run(&ex_loop, UV_RUN_NOWAIT) >= 0, 1);
    assert_int_equal(staging_free_views(ex_d.staging) + staging_quarantined_views(ex_d.staging),
                     staging_views(ex_d.staging));
    assert_int_equal(ex_self.holds + ex_node_b.holds, 0);
    quarantine_destroy(ex_d.quarantine);
    copy_stop(&ex_d);
    uv_close((uv_handle_t *)&ex_tick, NULL);
    for (unsigned i = 0; i < ex_nranks; i++) {
        mem_table_clear(&ex_ranks[i].s.mem);
        munmap(ex_ranks[i].mem, ex_ranks[i].len);
        close(ex_ranks[i].fd);
    }
    assert_int_equal(uv_run(&ex_loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&ex_loop), 0);
    staging_destroy(ex_d.staging);
    tags_destroy(ex_d.tags);
    names_destroy(ex_d.names);
    for (unsigned i = 0; i < ex_nsent; i++)
        free(ex_sent[i].buf);
    return 0;
}

#endif
