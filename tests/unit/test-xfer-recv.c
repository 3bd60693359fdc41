/*
 * test-xfer-recv.c — daemon/engine/xfer-recv.c: the receiving side.
 *
 * The admission of a CONTROL first as a table: one row a rule of
 * xfer_recv_check (every refusal, and the cases it admits), each row asking
 * the check what it decides and then xfer_recv_admit what it does (the
 * RESULT on the wire, what it counts, the transfer it makes or not). Then
 * admitted transfers run to their end: DATA lands in the rank's memory and
 * is compared byte for byte, or a chunk that changed on the way, a CANCEL,
 * a full share or a tag collision fails the transfer with the RESULT the
 * sender must hear.
 *
 * Above the engine, the node's ranks are tests/unit/ranks.h. Below it the
 * wire is fakes (-Wl,--wrap, the Makefile's): a receive posted is kept for
 * the test to complete as the sending daemon would, a cancel completes it
 * later with B10_ERR_CANCELLED, as UCX does; a message for the peer is
 * recorded, not sealed; the quarantine takes views as quarantine.c does
 * and reports the bytes the test says. Tags, the staging pool, plans and
 * copies are real, on a real libuv loop.
 */
#include <time.h>

#include "ranks.h"
#include "rng.h"

#include "checksum.h"
#include "copy.h"
#include "frame.h"
#include "log.h"
#include "plan.h"
#include "quarantine.h"
#include "staging.h"
#include "tags.h"
#include "xfer-int.h"

#define GEN 7                       /* the sender's link to us */
#define VIEW (64u << 10)            /* a staging view: a chunk at most */
#define CLOSED (256u << 10)         /* the target's region, open to no one */
#define OPEN (64u << 10)            /* ... and the one after it, open to the node */
#define READ_ID 0x77

static uv_loop_t loop;
static struct b10d d;
static struct peer sender;          /* the remote daemon that sends, "node-s" */
static struct peer self;            /* this daemon's own entry: local ranks come by it */
static struct session rank;         /* "decode-0", uid 1000: written into */
static struct session other;        /* "other-0", uid 1001 */
static uint8_t *mem;                /* rank's memory: CLOSED then OPEN bytes */
static struct region *closed_region, *open_region;
static uint64_t next_id = 0x1000;
static uint64_t clock_ms;           /* the daemon's clock (b10d.now_ms), the test's to move */

/* ---------------------------------------------------------------- the wire, faked */

struct fake_op {
    bool live, cancelled;
    uint64_t tag;
    uint8_t *buf;
    size_t length;
    wire_done_cb *cb;
    void *arg;
};
#define OPS_MAX 16
static struct fake_op ops[OPS_MAX];
static bool refuse_posts;           /* the wire refuses every receive */
static int fake_ep;                 /* what sender.ep points at */

static b10_status_t post(uint64_t tag, void *buf, size_t length, wire_done_cb *cb, void *arg,
                         struct wire_op **op_p)
{
    if (refuse_posts)
        return B10_ERR_INTERNAL;
    for (unsigned i = 0; i < OPS_MAX; i++)
        if (!ops[i].live) {
            ops[i] = (struct fake_op){ true, false, tag, buf, length, cb, arg };
            *op_p = (struct wire_op *)&ops[i];
            return B10_OK;
        }
    fail_msg("more than %d receives posted", OPS_MAX);
    return B10_ERR_INTERNAL;
}

b10_status_t __wrap_wire_recv(struct wire *wire, const struct wire_ep *by, uint64_t tag, void *buf,
                              size_t length, void *memh, wire_done_cb *cb, void *arg,
                              struct wire_op **op_p);
b10_status_t __wrap_wire_recv(struct wire *wire, const struct wire_ep *by, uint64_t tag, void *buf,
                              size_t length, void *memh, wire_done_cb *cb, void *arg,
                              struct wire_op **op_p)
{
    assert_true(by == NULL || by == (const struct wire_ep *)&fake_ep);
    return post(tag, buf, length, cb, arg, op_p);
}

b10_status_t __wrap_wire_recv_bulk(struct wire_ep *ep, uint32_t key, uint64_t tag, void *buf,
                                   size_t length, void *memh, wire_done_cb *cb, void *arg,
                                   struct wire_op **op_p);
b10_status_t __wrap_wire_recv_bulk(struct wire_ep *ep, uint32_t key, uint64_t tag, void *buf,
                                   size_t length, void *memh, wire_done_cb *cb, void *arg,
                                   struct wire_op **op_p)
{
    assert_ptr_equal(ep, &fake_ep);
    return post(tag, buf, length, cb, arg, op_p);
}

void __wrap_wire_cancel(struct wire *w, struct wire_op *op);
void __wrap_wire_cancel(struct wire *w, struct wire_op *op)
{
    if (op == NULL)
        return;
    struct fake_op *o = (struct fake_op *)op;
    assert_true(o->live);
    o->cancelled = true;
}

uint64_t __wrap_wire_progress_ns(const struct wire *wire);
uint64_t __wrap_wire_progress_ns(const struct wire *wire)
{
    return 0;
}

b10_status_t __wrap_wire_mem_map(struct wire *wire, void *addr, size_t length, void **memh_p);
void __wrap_wire_mem_unmap(struct wire *wire, void *memh);
b10_status_t __wrap_wire_mem_map(struct wire *wire, void *addr, size_t length, void **memh_p)
{
    *memh_p = NULL;
    return B10_OK;
}

void __wrap_wire_mem_unmap(struct wire *wire, void *memh)
{
}

/* The live receive posted on tag, or NULL. */
static struct fake_op *posted(uint64_t tag)
{
    for (unsigned i = 0; i < OPS_MAX; i++)
        if (ops[i].live && ops[i].tag == tag)
            return &ops[i];
    return NULL;
}

static unsigned posted_count(void)
{
    unsigned n = 0;
    for (unsigned i = 0; i < OPS_MAX; i++)
        n += ops[i].live;
    return n;
}

static void complete(struct fake_op *op, b10_status_t status, size_t length)
{
    assert_true(op->live);
    op->live = false;
    op->cancelled = false;
    op->cb(op->arg, status, length);
}

/* Complete the receives cancelled so far, as UCX does after wire_cancel; true if there were any. */
static bool deliver_cancels(void)
{
    bool any = false;
    for (unsigned i = 0; i < OPS_MAX; i++)
        if (ops[i].live && ops[i].cancelled) {
            complete(&ops[i], B10_ERR_CANCELLED, 0);
            any = true;
        }
    return any;
}

/* ---------------------------------------------------------------- the link, recorded */

struct result {
    struct peer *peer;
    uint64_t gen, id;
    b10_status_t status;
    char detail[256];
};
static struct result results[8];
static unsigned nresults;
static unsigned readies;            /* READY messages, and the last one's transfer */
static uint64_t ready_id, ready_tag;
static unsigned other_msgs;         /* anything else (a READ's CANCEL) */

void __wrap_peer_send_result(struct peer *peer, uint64_t gen, uint64_t id, b10_status_t status,
                             const char *detail);
void __wrap_peer_send_result(struct peer *peer, uint64_t gen, uint64_t id, b10_status_t status,
                             const char *detail)
{
    assert_true(nresults < 8);
    results[nresults] = (struct result){ peer, gen, id, status, "" };
    snprintf(results[nresults].detail, sizeof(results[nresults].detail), "%s", detail);
    nresults++;
}

b10_status_t __wrap_peer_send(struct peer *peer, uint64_t gen, uint64_t tag,
                              const ProtobufCMessage *msg);
b10_status_t __wrap_peer_send(struct peer *peer, uint64_t gen, uint64_t tag,
                              const ProtobufCMessage *msg)
{
    const B10__Peer__Msg *m = (const B10__Peer__Msg *)msg;
    if (m->body_case != B10__PEER__MSG__BODY_READY) {
        other_msgs++;
        return B10_OK;
    }
    assert_int_equal(gen, peer->in.tags.gen);
    readies++;
    ready_id = m->ready->xfer_id;
    ready_tag = tag;
    return B10_OK;
}

/* The link's keys are not this room's: a message opens as plain protobuf, one of 0xff as forged. */
b10_status_t __wrap_peer_open(struct peer *peer, uint64_t gen, const uint8_t *buf, size_t length,
                              B10__Peer__Msg **msg_p);
b10_status_t __wrap_peer_open(struct peer *peer, uint64_t gen, const uint8_t *buf, size_t length,
                              B10__Peer__Msg **msg_p)
{
    if (length > 0 && buf[0] == 0xff)
        return B10_ERR_UNAUTHENTICATED;
    *msg_p = b10__peer__msg__unpack(NULL, length, buf);
    return *msg_p != NULL ? B10_OK : B10_ERR_PEER_PROTOCOL;
}

/* ---------------------------------------------------------------- the quarantine, faked */

static uint64_t quarantined_bytes;  /* what quarantine_bytes says */
static struct view *views_held[8];  /* views it took: dropped at teardown */
static unsigned nviews_held, ids_retired;

void __wrap_quarantine_add(struct quarantine *q, enum quarantine_kind kind, uint64_t id,
                           uint64_t bytes, b10_status_t status, uint64_t xfer_id,
                           uint64_t peer_id, struct view *view, uint64_t *charge);
void __wrap_quarantine_add(struct quarantine *q, enum quarantine_kind kind, uint64_t id,
                           uint64_t bytes, b10_status_t status, uint64_t xfer_id,
                           uint64_t peer_id, struct view *view, uint64_t *charge)
{
    if (kind == QUARANTINE_XFER_ID)
        ids_retired++;
    if (kind != QUARANTINE_VIEW)
        return;
    assert_true(nviews_held < 8);
    staging_quarantine(d.staging, view);
    views_held[nviews_held++] = view;
}

uint64_t __wrap_quarantine_bytes(const struct quarantine *q);
uint64_t __wrap_quarantine_bytes(const struct quarantine *q)
{
    return quarantined_bytes;
}

/* ---------------------------------------------------------------- fixture */

static uint64_t fake_now_ms(struct b10d *dd)
{
    return clock_ms;
}

static int setup(void **state)
{
    assert_int_equal(uv_loop_init(&loop), 0);
    clock_ms = 1000;
    memset(&d, 0, sizeof(d));
    config_defaults(&d.cfg);
    snprintf(d.cfg.name, sizeof(d.cfg.name), "node-r");
    d.cfg.view_bytes = VIEW;
    d.cfg.staging_bytes = 4 * VIEW;
    d.cfg.max_peer_staging = 4 * VIEW;
    d.daemon_id = 0xd00d;
    d.loop = &loop;
    d.now_ms = fake_now_ms;
    d.rank_ops = &rk_ops;
    list_init(&d.xfers);
    list_init(&d.settling);
    list_init(&d.ahead_parked);
    assert_non_null(d.tags = tags_create(1024, 0));
    assert_int_equal(staging_create(&d, 4 * VIEW, VIEW, &d.staging), B10_OK);
    copy_start(&d);

    memset(ops, 0, sizeof(ops));
    memset(results, 0, sizeof(results));
    nresults = readies = other_msgs = 0;
    ready_id = ready_tag = 0;
    refuse_posts = false;
    quarantined_bytes = 0;
    nviews_held = ids_retired = 0;

    rk_reset();
    rk_peer_init(&sender, &d, "node-s", 0x5e, GEN);
    sender.ep = (struct wire_ep *)&fake_ep;
    rk_peer_init(&self, &d, "node-r", 0xd00d, GEN + 10);
    self.ep = (struct wire_ep *)&fake_ep;
    memset(mem, 0, CLOSED + OPEN);
    rk_init(&rank, &d, "decode-0", 1000);
    closed_region = rk_region(&rank, 1, mem, CLOSED, false);
    open_region = rk_region(&rank, 2, mem + CLOSED, OPEN, true);
    rk_init(&other, &d, "other-0", 1001);
    rk_hold_name("prefill-1", 1001);       /* a rank of this node, of another user */
    return 0;
}

/* Turn the loop (and complete what was cancelled) until done() or a generous bound passed. */
static void run_until(bool (*done)(void))
{
    uint64_t end = uv_hrtime() + UINT64_C(30) * 1000000000u;
    while (!done() && uv_hrtime() < end) {
        bool delivered = deliver_cancels();
        uv_run(&loop, UV_RUN_NOWAIT);
        if (!delivered && !done())
            nanosleep(&(struct timespec){ 0, 200000 }, NULL);
    }
}

/* Nothing posted still to complete, no failure's news still waiting for its copies. */
static bool quiet(void)
{
    return posted_count() == 0 && list_empty(&d.settling);
}

/* The transfers on the daemon's list, newest last: n at most. */
static unsigned live_xfers(struct xfer **out, unsigned n)
{
    unsigned k = 0;
    for (struct list *pos = d.xfers.next; pos != &d.xfers && k < n; pos = pos->next)
        out[k++] = list_entry(pos, struct xfer, node);
    return k;
}

static int teardown(void **state)
{
    /* What a test left running fails now; then everything settles and is freed. */
    struct xfer *left[8];
    unsigned n = live_xfers(left, 8);
    for (unsigned i = 0; i < n; i++)
        if (left[i]->state != XFER_DONE)
            xfer_fail(left[i], B10_ERR_CANCELLED, "the test ends");
    run_until(quiet);
    assert_int_equal(d.nxfers, 0);
    assert_true(quiet());
    copy_stop(&d);
    uv_run(&loop, UV_RUN_NOWAIT);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
    for (unsigned i = 0; i < nviews_held; i++)
        staging_drop(d.staging, views_held[i]);
    staging_destroy(d.staging);
    tags_destroy(d.tags);
    rk_free(&rank);
    rk_free(&other);
    return 0;
}

/* ---------------------------------------------------------------- CONTROL, as the sender makes it */

struct ctl {
    B10__Peer__Control c;
    struct plan *plan;              /* the sender's */
    uint8_t *chunk_pieces, *pieces, *slots;
    size_t length;                  /* CONTROL's bytes, as the peer room hands them over */
};

/*
 * A WRITE from prefill-0 of node-s into decode-0: count pieces of len bytes
 * at offsets off[] of rank's memory, in chunks of a view; slots: the compact
 * form. Its source: anywhere on the sender, piece i at SRC + i * len.
 */
static void ctl_make(struct ctl *k, size_t count, const uint64_t *off, uint64_t len, bool slots)
{
    uint8_t src[16 * 8], dst[16 * 8];
    char detail[256];
    size_t chunk_len = 0, pieces_len = 0;

    assert_true(count <= 8);
    memset(k, 0, sizeof(*k));
    for (size_t i = 0; i < count; i++) {
        frame_put_u64(src + 16 * i, UINT64_C(0x7f0000000000) + i * len);
        frame_put_u64(src + 16 * i + 8, len);
        frame_put_u64(dst + 16 * i, (uintptr_t)mem + off[i]);
        frame_put_u64(dst + 16 * i + 8, len);
    }
    assert_int_equal(plan_build(src, dst, count, VIEW, &k->plan, detail, sizeof(detail)), B10_OK);
    b10__peer__control__init(&k->c);
    k->c.xfer_id = next_id++;
    k->c.gen = GEN;
    k->c.dst_agent = "decode-0";
    k->c.src_agent = "prefill-0";
    k->c.deadline_ms = 20000;
    k->c.nchunks = k->plan->nchunks;
    k->c.total_bytes = k->plan->total;
    if (slots) {
        struct plan_slots sl;
        assert_int_equal(plan_encode_slots(k->plan, &sl, &k->chunk_pieces, &chunk_len), B10_OK);
        k->slots = (uint8_t *)sl.slots;
        k->c.slot_base = sl.base;
        k->c.slot_len = sl.len;
        k->c.slots = (ProtobufCBinaryData){ sl.slots_len, k->slots };
    } else {
        assert_int_equal(plan_encode(k->plan, &k->chunk_pieces, &chunk_len, &k->pieces,
                                     &pieces_len), B10_OK);
        k->c.pieces = (ProtobufCBinaryData){ pieces_len, k->pieces };
    }
    k->c.chunk_pieces = (ProtobufCBinaryData){ chunk_len, k->chunk_pieces };
    k->length = b10__peer__control__get_packed_size(&k->c);
}

static void ctl_one(struct ctl *k, uint64_t off, uint64_t len)
{
    ctl_make(k, 1, &off, len, false);
}

static void ctl_free(struct ctl *k)
{
    plan_free(k->plan);
    free(k->chunk_pieces);
    free(k->pieces);
    free(k->slots);
}

/* rank's READ of 16 KiB at offset 0 from node-s, waiting for its write-back: a real transfer. */
static struct xfer *read_waiting(void)
{
    struct ctl r;
    ctl_one(&r, 0, 16384);
    struct xfer *x = xfer_new(&d, XFER_READ, READ_ID, 60000);
    assert_non_null(x);
    x->plan = r.plan;
    r.plan = NULL;
    ctl_free(&r);
    x->peer = &sender;
    peer_hold(&sender);
    x->session = &rank;
    rank.nxfers++;
    x->state = XFER_WAIT_READY;
    snprintf(x->local_agent, sizeof(x->local_agent), "decode-0");
    snprintf(x->remote_agent, sizeof(x->remote_agent), "prefill-0");
    list_insert_tail(&rank.xfers, &x->session_node);
    return x;
}

/* ---------------------------------------------------------------- the table of admissions */

/*
 * A row: what it arranges beyond the default CONTROL (a WRITE of 4 KiB at
 * offset 0 of the closed region, from a remote rank under --remote-access
 * any), the rule expected to speak, the status and a piece of the detail.
 */
struct row {
    const char *name;
    void (*arrange)(struct ctl *k);
    enum xfer_recv_why why;
    b10_status_t status;
    const char *says;
    bool local;                     /* from a rank of this node (by self), not by sender */
};

static void as_is(struct ctl *k)
{
}

static void as_slots(struct ctl *k)
{
    static const uint64_t off[3] = { 0, 8192, 16384 };
    ctl_free(k);
    ctl_make(k, 3, off, 4096, true);
}

static void as_write_back(struct ctl *k)
{
    read_waiting();
    ctl_free(k);
    ctl_one(k, 0, 16384);       /* the same bytes as the READ asked for */
    k->c.read_id = READ_ID;
}

static void as_write_back_beyond(struct ctl *k)
{
    read_waiting();
    ctl_free(k);
    ctl_one(k, 16384, 4096);
    k->c.read_id = READ_ID;
}

static void as_local_other_uid(struct ctl *k)
{
    ctl_free(k);
    ctl_one(k, CLOSED, 4096);
    k->c.gen = self.in.tags.gen;
    k->c.src_agent = "prefill-1";
}

static void as_local_other_uid_closed(struct ctl *k)
{
    k->c.gen = self.in.tags.gen;
    k->c.src_agent = "prefill-1";
}

static void as_local_other_uid_notice(struct ctl *k)
{
    as_local_other_uid(k);
    k->c.sync_msg = (ProtobufCBinaryData){ 5, (uint8_t *)"hello" };
}

static void as_paired(struct ctl *k)
{
    d.cfg.remote_access = CONFIG_REMOTE_PAIRED;
    rk_pair(&rank, "prefill-0", &sender, B10_GRANT_WRITE);
}

static void as_paired_no_grant(struct ctl *k)
{
    d.cfg.remote_access = CONFIG_REMOTE_PAIRED;
    rk_pair(&rank, "prefill-0", &sender, B10_GRANT_READ);
}

static void as_unpaired(struct ctl *k)
{
    d.cfg.remote_access = CONFIG_REMOTE_PAIRED;
}

static void with_sync(struct ctl *k)
{
    k->c.sync_msg = (ProtobufCBinaryData){ 5, (uint8_t *)"hello" };
}

static void other_gen(struct ctl *k)
{
    k->c.gen = GEN + 1;
}

static void no_dst_name(struct ctl *k)
{
    k->c.dst_agent = "";
}

static void long_src_name(struct ctl *k)
{
    static char name[300];
    memset(name, 'a', sizeof(name) - 1);
    k->c.src_agent = name;
}

static void no_such_rank(struct ctl *k)
{
    k->c.dst_agent = "nobody";
}

static void other_uid(struct ctl *k)
{
    k->c.dst_uid_known = true;
    k->c.dst_uid = 1001;
}

static void same_uid(struct ctl *k)
{
    k->c.dst_uid_known = true;
    k->c.dst_uid = 1000;
}

static void no_read(struct ctl *k)
{
    k->c.read_id = READ_ID;
}

static void draining(struct ctl *k)
{
    d.stopping = true;
}

static void quarantine_over(struct ctl *k)
{
    quarantined_bytes = d.cfg.quarantine_budget + 1;
}

static void peer_xfers_full(struct ctl *k)
{
    sender.in_xfers = d.cfg.max_peer_xfers;
}

static void short_deadline(struct ctl *k)
{
    k->c.deadline_ms = d.cfg.min_deadline_ms - 1;
}

static void notices_full(struct ctl *k)
{
    with_sync(k);
    rank.notice_reserved = d.cfg.max_notice_bytes - 4;
}

static void both_forms(struct ctl *k)
{
    as_slots(k);
    k->c.pieces = (ProtobufCBinaryData){ 16, k->chunk_pieces };
}

static void slots_no_len(struct ctl *k)
{
    k->c.slots = (ProtobufCBinaryData){ 4, k->chunk_pieces };
}

static void total_off(struct ctl *k)
{
    k->c.total_bytes++;
}

static void too_many_pieces(struct ctl *k)
{
    static const uint64_t off[2] = { 0, 8192 };
    ctl_free(k);
    ctl_make(k, 2, off, 4096, false);
    d.cfg.max_control_bytes = SPAN_BYTES;
}

/* The slots' wire bytes fit the peer's CONTROL share; the full form they are charged as does not. */
static void held_over(struct ctl *k)
{
    as_slots(k);
    sender.control_held = d.cfg.max_peer_control - k->length;
}

static void outside(struct ctl *k)
{
    ctl_free(k);
    ctl_one(k, CLOSED + OPEN, 4096);
}

static void across_end(struct ctl *k)
{
    ctl_free(k);
    ctl_one(k, CLOSED + OPEN - 2048, 4096);
}

static void stuck(struct ctl *k)
{
    closed_region->stuck = 1;
}

static const struct row rows[] = {
    { "a WRITE of one chunk", as_is, XR_ADMIT, B10_OK, "", false },
    { "the compact form (slots)", as_slots, XR_ADMIT, B10_OK, "", false },
    { "a sync message with room for it", with_sync, XR_ADMIT, B10_OK, "", false },
    { "the descriptor's uid, still the name's", same_uid, XR_ADMIT, B10_OK, "", false },
    { "a write-back its READ waits for", as_write_back, XR_ADMIT, B10_OK, "", false },
    { "paired and granted, --remote-access paired", as_paired, XR_ADMIT, B10_OK, "", false },
    { "a local rank of another uid, into an open region", as_local_other_uid, XR_ADMIT, B10_OK,
      "", true },

    { "another link's generation", other_gen, XR_MALFORMED, B10_ERR_PEER_PROTOCOL,
      "CONTROL header malformed", false },
    { "a target of no name", no_dst_name, XR_MALFORMED, B10_ERR_PEER_PROTOCOL,
      "CONTROL header malformed", false },
    { "a source name of 299 bytes", long_src_name, XR_MALFORMED, B10_ERR_PEER_PROTOCOL,
      "CONTROL header malformed", false },
    { "no such rank", no_such_rank, XR_NO_RANK, B10_ERR_UNKNOWN_AGENT,
      "no rank named 'nobody' on the remote node", false },
    { "the name held by another uid", other_uid, XR_WRONG_UID, B10_ERR_UNKNOWN_AGENT,
      "is not of the user whose descriptor was loaded (uid 1001)", false },
    { "a write-back no READ waits for", no_read, XR_NO_READ, B10_ERR_CANCELLED,
      "no READ waits for this write-back", false },
    { "unpaired, --remote-access paired", as_unpaired, XR_NOT_GRANTED, B10_ERR_PERMISSION,
      "has not paired with 'prefill-0' of daemon node-s", false },
    { "paired without B10_GRANT_WRITE", as_paired_no_grant, XR_NOT_GRANTED, B10_ERR_PERMISSION,
      "did not grant it WRITE into its memory", false },
    { "a notice from a local rank of another uid", as_local_other_uid_notice, XR_NOT_GRANTED,
      B10_ERR_PERMISSION, "a sync message is a notice", true },
    { "the daemon draining", draining, XR_DRAINING, B10_ERR_DRAINING, "draining", false },
    { "the quarantine past its budget", quarantine_over, XR_QUARANTINE_FULL,
      B10_ERR_STAGING_EXHAUSTED, "quarantined staging exceeds its budget", false },
    { "the peer's transfers at --max-peer-xfers", peer_xfers_full, XR_PEER_LIMITS, B10_ERR_BUSY,
      "(--max-peer-xfers)", false },
    { "less time left than --min-deadline-ms", short_deadline, XR_PEER_LIMITS, B10_ERR_DEADLINE,
      "below --min-deadline-ms", false },
    { "the target's notices full", notices_full, XR_NOTICES_FULL, B10_ERR_BUSY,
      "notices for 'decode-0' wait unread (--max-notice-bytes)", false },
    { "pieces both whole and as slots", both_forms, XR_BAD_PIECES, B10_ERR_PEER_PROTOCOL,
      "both whole and as slots", false },
    { "slots of no length", slots_no_len, XR_BAD_PIECES, B10_ERR_PEER_PROTOCOL,
      "slots of no length", false },
    { "pieces that do not add up", total_off, XR_BAD_PIECES, B10_ERR_PEER_PROTOCOL,
      "control pieces add up to 4096 bytes", false },
    { "more pieces than --max-control-bytes holds", too_many_pieces, XR_BAD_PIECES,
      B10_ERR_TOO_LARGE, "control carries 2 pieces (limit 1)", false },
    { "slots charged as pieces past --max-peer-control", held_over, XR_HELD_LIMITS, B10_ERR_BUSY,
      "(--max-peer-control", false },
    { "a write-back beyond its READ", as_write_back_beyond, XR_OUTSIDE_READ, B10_ERR_PEER_PROTOCOL,
      "writes outside what its READ asked for", false },
    { "a local rank of another uid, into a closed region", as_local_other_uid_closed, XR_NOT_OPEN,
      B10_ERR_PERMISSION, "is not wholly in regions it opened to the node", true },
    { "outside every region", outside, XR_OUTSIDE_DST, B10_ERR_REMOTE_REJECTED,
      "lies outside the destination rank's registered memory", false },
    { "across the end of the last region", across_end, XR_OUTSIDE_DST, B10_ERR_REMOTE_REJECTED,
      "lies outside the destination rank's registered memory", false },
    { "into a region a failed copy may still write", stuck, XR_OUTSIDE_DST, B10_ERR_UNSETTLED,
      "--settle-ms passed", false },
};

/* A rule that counts its refusals against the peer's limits (peer_refused). */
static bool counts_against_peer(enum xfer_recv_why why)
{
    return why == XR_PEER_LIMITS || why == XR_HELD_LIMITS || why == XR_NOTICES_FULL;
}

/* What xfer_recv_check decides for row, and that deciding changed nothing. */
static void check_row(const struct row *row)
{
    struct ctl k;
    struct xfer_recv_verdict v;
    struct peer *by = row->local ? &self : &sender;

    ctl_one(&k, 0, 4096);
    row->arrange(&k);
    struct stats before = d.stats;
    struct peer_counters counted = by->counters;
    unsigned xfers = d.nxfers;

    b10_status_t st = xfer_recv_check(by, &k.c, k.length, &v);
    if (st != row->status || v.why != row->why || strstr(v.detail, row->says) == NULL)
        fail_msg("%s: status %s, rule %d, detail \"%s\"; expected %s, rule %d, \"%s\"", row->name,
                 b10_status_name(st), v.why, v.detail, b10_status_name(row->status), row->why,
                 row->says);
    assert_int_equal(v.status, st);
    assert_memory_equal(&d.stats, &before, sizeof(before));
    assert_memory_equal(&by->counters, &counted, sizeof(counted));
    assert_int_equal(nresults, 0);
    assert_int_equal(readies, 0);
    assert_int_equal(posted_count(), 0);
    assert_int_equal(d.nxfers, xfers);
    assert_int_equal(tags_live(d.tags), 0);
    if (st == B10_OK) {
        assert_non_null(v.plan);
        assert_ptr_equal(v.target, &rank);
        assert_int_equal(v.plan->total, k.plan->total);
        assert_true(v.held >= k.length);
        assert_int_equal(v.grant, by == &self ? ACCESS_OPEN_ONLY : ACCESS_FULL);
        assert_true((v.parent != NULL) == (k.c.read_id != 0));
        plan_free(v.plan);
    } else {
        assert_null(v.plan);
    }
    ctl_free(&k);
}

/* What xfer_recv_admit does for row: the RESULT on the wire and what it counts, or the transfer. */
static void admit_row(const struct row *row)
{
    struct ctl k;
    struct peer *by = row->local ? &self : &sender;

    ctl_one(&k, 0, 4096);
    row->arrange(&k);
    uint64_t protocol_errors = d.stats.peer_protocol_errors;
    uint64_t refused = by->counters.refused;
    uint32_t in_xfers = by->in_xfers;
    unsigned xfers = d.nxfers;

    xfer_recv_admit(by, &k.c, k.length);
    if (row->status != B10_OK) {
        assert_int_equal(nresults, 1);
        assert_ptr_equal(results[0].peer, by);
        assert_int_equal(results[0].gen, by->in.tags.gen);
        assert_int_equal(results[0].id, k.c.xfer_id);
        if (results[0].status != row->status || strstr(results[0].detail, row->says) == NULL)
            fail_msg("%s: RESULT %s \"%s\"", row->name, b10_status_name(results[0].status),
                     results[0].detail);
        assert_int_equal(d.stats.peer_protocol_errors,
                         protocol_errors + (row->status == B10_ERR_PEER_PROTOCOL));
        assert_int_equal(by->counters.refused, refused + counts_against_peer(row->why));
        assert_int_equal(d.nxfers, xfers);
        assert_int_equal(d.stats.xfers_received, 0);
        assert_int_equal(tags_live(d.tags), 0);
        assert_int_equal(posted_count(), 0);
        assert_int_equal(by->in_xfers, in_xfers);
    } else {
        /* Admitted: charged, its tags registered, the CANCEL's receive and DATA's posted, READY. */
        assert_int_equal(nresults, 0);
        assert_int_equal(d.nxfers, xfers + 1);
        assert_int_equal(d.stats.xfers_received, 1);
        assert_int_equal(by->in_xfers, 1);
        assert_true(by->control_held >= k.length);
        assert_int_equal(d.control_held, by->control_held);
        assert_int_equal(tags_live(d.tags), k.c.nchunks + 1);
        assert_int_equal(readies, 1);
        assert_int_equal(ready_id, k.c.xfer_id);
        assert_non_null(posted(tags_derive(&by->in.tags, k.c.xfer_id, 0, TAG_KIND_CANCEL)));
        assert_non_null(posted(tags_derive(&by->in.tags, k.c.xfer_id, 0, TAG_KIND_DATA)));
        assert_int_equal(rank.notice_reserved, k.c.read_id == 0 ? k.c.sync_msg.len : 0);
    }
    ctl_free(&k);
}

static void test_admission_table(void **state)
{
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        setup(state);
        check_row(&rows[i]);
        teardown(state);
        setup(state);
        admit_row(&rows[i]);
        teardown(state);
    }
}

/* Every rule has a row, and every row a rule in the order the check asks them. */
static void test_table_covers_every_rule(void **state)
{
    bool seen[XR_OUTSIDE_DST + 1] = { false };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        seen[rows[i].why] = true;
    for (int why = XR_ADMIT; why <= XR_OUTSIDE_DST; why++)
        if (!seen[why])
            fail_msg("no row for rule %d", why);
}

/* ---------------------------------------------------------------- admitted transfers, to their end */

/* Admit k from sender; the transfer it made. */
static struct xfer *admit(struct ctl *k)
{
    xfer_recv_admit(&sender, &k->c, k->length);
    struct xfer *x = tags_lookup(d.tags, tags_derive(&sender.in.tags, k->c.xfer_id, 0,
                                                     TAG_KIND_CANCEL));
    assert_non_null(x);
    assert_int_equal(x->id, k->c.xfer_id);
    return x;
}

/* Chunk c's bytes as the sender gathered them: the same for the same transfer and chunk. */
static void chunk_bytes(const struct ctl *k, uint32_t c, uint8_t *out)
{
    rng_seed(k->c.xfer_id * 131 + c);
    for (uint64_t i = 0; i < k->plan->chunks[c].bytes; i++)
        out[i] = (uint8_t)rng_next();
}

/*
 * Play the sending daemon for chunk c of k: its bytes and their checksum
 * trailer into the receive posted for it, then complete it as the wire
 * does. flip: a bit of the chunk changes after it was summed.
 */
static void send_chunk(const struct ctl *k, uint32_t c, bool flip)
{
    struct fake_op *op = posted(tags_derive(&sender.in.tags, k->c.xfer_id, c, TAG_KIND_DATA));
    uint64_t len = k->plan->chunks[c].bytes, seed = checksum_seed(k->c.xfer_id, c);
    uint32_t nblocks = checksum_blocks(len);
    uint64_t sums[nblocks];

    assert_non_null(op);
    assert_int_equal(op->length, checksum_message_bytes(len));
    chunk_bytes(k, c, op->buf);
    memset(op->buf + len, 0, checksum_message_bytes(len) - len);
    checksum_block_sums(op->buf, len, seed, 0, nblocks, sums);
    checksum_trailer_put(op->buf, len, sums, checksum_combine(sums, nblocks, len, seed), true);
    if (flip)
        op->buf[len / 2] ^= 0x10;
    complete(op, B10_OK, checksum_message_bytes(len));
}

/* Did chunk c land: each of its pieces' bytes where the plan says, as sent? */
static bool chunk_landed(const struct ctl *k, uint32_t c)
{
    uint8_t *bytes = malloc(k->plan->chunks[c].bytes);
    const struct plan_chunk *chunk = &k->plan->chunks[c];
    uint64_t at = 0;
    bool same = true;

    assert_non_null(bytes);
    chunk_bytes(k, c, bytes);
    for (uint32_t p = chunk->first; p < chunk->first + chunk->count; p++) {
        const struct plan_piece *piece = &k->plan->pieces[p];
        same = same && memcmp((void *)(uintptr_t)piece->dst, bytes + at, piece->len) == 0;
        at += piece->len;
    }
    free(bytes);
    return same;
}

/* Is all of the rank's memory still as the fixture left it (zeros)? */
static bool rank_memory_untouched(void)
{
    for (size_t i = 0; i < CLOSED + OPEN; i++)
        if (mem[i] != 0)
            return false;
    return true;
}

static bool one_result(void)
{
    return nresults > 0;
}

/* The RESULT the sender heard, once: status and a piece of its detail. */
static void sender_heard(uint64_t id, b10_status_t status, const char *says)
{
    run_until(one_result);
    assert_int_equal(nresults, 1);
    assert_int_equal(results[0].id, id);
    assert_int_equal(results[0].gen, GEN);
    if (results[0].status != status || strstr(results[0].detail, says) == NULL)
        fail_msg("RESULT %s \"%s\", expected %s \"%s\"", b10_status_name(results[0].status),
                 results[0].detail, b10_status_name(status), says);
}

/* Every charge the transfer made to its peer and its rank is given back. */
static void charges_returned(void)
{
    assert_int_equal(sender.in_xfers, 0);
    assert_int_equal(sender.control_held, 0);
    assert_int_equal(sender.reserved, 0);
    assert_int_equal(d.control_held, 0);
    assert_int_equal(rank.notice_reserved, 0);
}

/* One chunk and a sync message: the bytes land, the rank hears the message, then the sender OK. */
static void test_lands_then_tells(void **state)
{
    struct ctl k;
    ctl_one(&k, 4096, 4096);
    k.c.sync_msg = (ProtobufCBinaryData){ 5, (uint8_t *)"hello" };
    struct xfer *x = admit(&k);
    assert_int_equal(x->state, XFER_RUNNING);
    assert_int_equal(readies, 1);
    assert_int_equal(ready_tag, tags_derive(&sender.in.tags, k.c.xfer_id, 0, TAG_KIND_READY));
    assert_int_equal(rank.notice_reserved, 5);
    assert_int_equal(sender.reserved, VIEW);

    send_chunk(&k, 0, false);
    sender_heard(k.c.xfer_id, B10_OK, "");
    assert_true(chunk_landed(&k, 0));
    assert_int_equal(rk_told.notices, 1);
    assert_ptr_equal(rk_told.notice_to, &rank);
    assert_string_equal(rk_told.notice_from, "prefill-0");
    assert_int_equal(rk_told.notice_length, 5);
    assert_memory_equal(rk_told.notice, "hello", 5);
    assert_int_equal(d.stats.xfers_received_landed, 1);
    assert_int_equal(d.stats.bytes_landed, 4096);
    assert_int_equal(tags_live(d.tags), 0);
    charges_returned();
    ctl_free(&k);
}

static uint64_t awaited_tag;

static bool awaited_posted(void)
{
    return posted(awaited_tag) != NULL;
}

/* A window of two views takes three chunks: each view takes the next chunk once its own landed. */
static void test_window_takes_every_chunk(void **state)
{
    static const uint64_t off[3] = { 0, VIEW, 2 * VIEW };
    struct ctl k;

    d.cfg.max_in_flight = 2;
    ctl_make(&k, 3, off, VIEW, false);
    assert_int_equal(k.plan->nchunks, 3);
    admit(&k);
    assert_int_equal(sender.reserved, 2 * VIEW);
    /* Chunks 0 and 1 posted, 2 waits for a view; the CANCEL's receive too. */
    assert_non_null(posted(tags_derive(&sender.in.tags, k.c.xfer_id, 1, TAG_KIND_DATA)));
    assert_null(posted(tags_derive(&sender.in.tags, k.c.xfer_id, 2, TAG_KIND_DATA)));
    assert_int_equal(posted_count(), 3);
    send_chunk(&k, 1, false);
    send_chunk(&k, 0, false);
    /* The third is posted into the first view whose scatter ended. */
    awaited_tag = tags_derive(&sender.in.tags, k.c.xfer_id, 2, TAG_KIND_DATA);
    run_until(awaited_posted);
    send_chunk(&k, 2, false);
    sender_heard(k.c.xfer_id, B10_OK, "");
    for (uint32_t c = 0; c < 3; c++)
        assert_true(chunk_landed(&k, c));
    assert_int_equal(d.stats.bytes_landed, 3 * VIEW);
    charges_returned();
    ctl_free(&k);
}

/* A chunk changed on the way fails its transfer loudly, and not a byte of it lands. */
static void test_changed_chunk_never_lands(void **state)
{
    struct ctl k;
    ctl_one(&k, 0, VIEW);
    admit(&k);
    send_chunk(&k, 0, true);
    sender_heard(k.c.xfer_id, B10_ERR_DATA_CORRUPT, "");
    assert_true(rank_memory_untouched());
    assert_int_equal(d.stats.xfers_received_failed, 1);
    assert_int_equal(sender.counters.corrupt, 1);
    charges_returned();
    ctl_free(&k);
}

/* So does one whose trailer changed. */
static void test_damaged_trailer(void **state)
{
    struct ctl k;
    ctl_one(&k, 0, 4096);
    admit(&k);
    struct fake_op *op = posted(tags_derive(&sender.in.tags, k.c.xfer_id, 0, TAG_KIND_DATA));
    assert_non_null(op);
    memset(op->buf, 0x5a, op->length);          /* no trailer a sender would write */
    complete(op, B10_OK, op->length);
    sender_heard(k.c.xfer_id, B10_ERR_DATA_CORRUPT, "damaged checksum trailer");
    assert_true(rank_memory_untouched());
    ctl_free(&k);
}

/* DATA of another length than announced: the sender broke the protocol, and hears so. */
static void test_data_of_other_length(void **state)
{
    struct ctl k;
    ctl_one(&k, 0, 4096);
    admit(&k);
    struct fake_op *op = posted(tags_derive(&sender.in.tags, k.c.xfer_id, 0, TAG_KIND_DATA));
    assert_non_null(op);
    complete(op, B10_OK, 100);
    sender_heard(k.c.xfer_id, B10_ERR_PEER_PROTOCOL, "100 bytes, 4096 announced");
    assert_int_equal(d.stats.peer_protocol_errors, 1);
    assert_true(rank_memory_untouched());
    charges_returned();
    ctl_free(&k);
}

/* DATA larger than its receive (the wire says PEER_PROTOCOL): failed, counted, the sender told. */
static void test_data_larger_than_posted(void **state)
{
    struct ctl k;
    ctl_one(&k, 0, 4096);
    admit(&k);
    struct fake_op *op = posted(tags_derive(&sender.in.tags, k.c.xfer_id, 0, TAG_KIND_DATA));
    assert_non_null(op);
    complete(op, B10_ERR_PEER_PROTOCOL, 0);
    sender_heard(k.c.xfer_id, B10_ERR_PEER_PROTOCOL, "DATA chunk 0: larger than announced");
    assert_int_equal(d.stats.peer_protocol_errors, 1);
    ctl_free(&k);
}

/* DATA that arrives past the deadline stays in its view: the transfer fails, no byte lands. */
static void test_late_data_never_lands(void **state)
{
    struct ctl k;
    ctl_one(&k, 0, 4096);
    struct xfer *x = admit(&k);
    clock_ms = x->deadline_ms;
    send_chunk(&k, 0, false);
    sender_heard(k.c.xfer_id, B10_ERR_DEADLINE, "deadline of 20000 ms expired waiting for DATA");
    assert_true(rank_memory_untouched());
    ctl_free(&k);
}

/* A deadline longer than this daemon allows is fenced by --max-deadline-ms. */
static void test_deadline_capped(void **state)
{
    struct ctl k;
    d.cfg.max_deadline_ms = 3000;
    ctl_one(&k, 0, 4096);
    struct xfer *x = admit(&k);
    assert_int_equal(x->deadline_ms - x->started_ms, 3000);
    ctl_free(&k);
}

/* Send the sender's CANCEL into the transfer's posted receive (0xff: one that does not open). */
static void cancel_from_sender(const struct ctl *k, bool want_result, bool forged)
{
    struct fake_op *op = posted(tags_derive(&sender.in.tags, k->c.xfer_id, 0, TAG_KIND_CANCEL));
    B10__Peer__Cancel cancel = B10__PEER__CANCEL__INIT;
    B10__Peer__Msg msg = B10__PEER__MSG__INIT;

    assert_non_null(op);
    cancel.xfer_id = k->c.xfer_id;
    cancel.reason = (B10__Status)B10_ERR_DEADLINE;
    cancel.want_result = want_result;
    msg.body_case = B10__PEER__MSG__BODY_CANCEL;
    msg.cancel = &cancel;
    size_t length = b10__peer__msg__get_packed_size(&msg);
    assert_true(length <= op->length);
    b10__peer__msg__pack(&msg, op->buf);
    if (forged)
        op->buf[0] = 0xff;
    complete(op, B10_OK, length);
}

/* The sender gave up and waits for the RESULT: it hears CANCELLED once no copy runs. */
static void test_sender_cancels(void **state)
{
    struct ctl k;
    ctl_one(&k, 0, 4096);
    struct xfer *x = admit(&k);
    /* A CANCEL that does not open under the link's keys is dropped and the real one awaited. */
    cancel_from_sender(&k, true, true);
    assert_int_equal(x->state, XFER_RUNNING);
    cancel_from_sender(&k, true, false);
    sender_heard(k.c.xfer_id, B10_ERR_CANCELLED, "the sending daemon cancelled the transfer "
                 "(B10_ERR_DEADLINE)");
    charges_returned();
    ctl_free(&k);
}

/* ... and one that does not wait hears nothing. */
static void test_sender_cancels_quietly(void **state)
{
    struct ctl k;
    ctl_one(&k, 0, 4096);
    admit(&k);
    cancel_from_sender(&k, false, false);
    run_until(quiet);
    assert_int_equal(nresults, 0);
    assert_int_equal(d.stats.xfers_received_failed, 1);
    ctl_free(&k);
}

/* A CANCEL that opens and is no CANCEL: the sender broke the protocol. */
static void test_malformed_cancel(void **state)
{
    struct ctl k;
    ctl_one(&k, 0, 4096);
    admit(&k);
    struct fake_op *op = posted(tags_derive(&sender.in.tags, k.c.xfer_id, 0, TAG_KIND_CANCEL));
    assert_non_null(op);
    memset(op->buf, 0x01, 8);
    complete(op, B10_OK, 8);
    sender_heard(k.c.xfer_id, B10_ERR_PEER_PROTOCOL, "malformed CANCEL");
    ctl_free(&k);
}

/* The peer's share taken by its earlier transfers: queued, no READY, until room comes back. */
static void test_queued_until_share_frees(void **state)
{
    struct ctl k;
    ctl_one(&k, 0, 4096);
    sender.reserved = 4 * VIEW;
    struct xfer *x = admit(&k);
    assert_int_equal(x->state, XFER_QUEUED);
    assert_int_equal(readies, 0);
    assert_null(posted(tags_derive(&sender.in.tags, k.c.xfer_id, 0, TAG_KIND_DATA)));
    sender.reserved = 0;
    staging_wake_waiters(d.staging);
    assert_int_equal(x->state, XFER_RUNNING);
    assert_int_equal(readies, 1);
    send_chunk(&k, 0, false);
    sender_heard(k.c.xfer_id, B10_OK, "");
    assert_true(chunk_landed(&k, 0));
    ctl_free(&k);
}

/* The share held by the quarantine's views: only their TTL frees it, so fail now. */
static void test_quarantined_share_fails_fast(void **state)
{
    struct ctl k;
    ctl_one(&k, 0, 4096);
    sender.quarantined = 4 * VIEW;
    xfer_recv_admit(&sender, &k.c, k.length);
    sender_heard(k.c.xfer_id, B10_ERR_STAGING_EXHAUSTED, "(--max-peer-staging)");
    assert_int_equal(sender.counters.refused, 1);
    assert_int_equal(readies, 0);
    sender.quarantined = 0;
    charges_returned();
    ctl_free(&k);
}

/* The link the CONTROL came by is given up before READY: no READY, the failure is on its way. */
static void test_link_gone_before_ready(void **state)
{
    struct ctl k;
    ctl_one(&k, 0, 4096);
    sender.in_up = false;
    sender.state = PEER_DOWN;
    struct xfer *x = admit(&k);
    assert_int_equal(x->state, XFER_QUEUED);
    assert_int_equal(readies, 0);
    ctl_free(&k);
}

/* A DATA tag already registered: the transfer fails loudly and undoes its own, not the other's. */
static void test_tag_collision(void **state)
{
    struct ctl k;
    static const uint64_t off[3] = { 0, VIEW, 2 * VIEW };
    int owner;

    ctl_make(&k, 3, off, VIEW, false);
    uint64_t taken = tags_derive(&sender.in.tags, k.c.xfer_id, 2, TAG_KIND_DATA);
    assert_int_equal(tags_register(d.tags, taken, &owner), B10_OK);
    xfer_recv_admit(&sender, &k.c, k.length);
    sender_heard(k.c.xfer_id, B10_ERR_TAG_COLLISION, "registering the transfer's tags");
    assert_ptr_equal(tags_lookup(d.tags, taken), &owner);
    assert_int_equal(tags_live(d.tags), 1);
    assert_int_equal(readies, 0);
    assert_int_equal(posted_count(), 0);
    charges_returned();
    tags_unregister(d.tags, taken);
    ctl_free(&k);
}

/* A sync message longer than any may be: a protocol error, after admission. */
static void test_sync_message_too_long(void **state)
{
    struct ctl k;
    static uint8_t sync[B10_SYNC_MSG_MAX + 1];
    ctl_one(&k, 0, 4096);
    k.c.sync_msg = (ProtobufCBinaryData){ sizeof(sync), sync };
    xfer_recv_admit(&sender, &k.c, k.length);
    sender_heard(k.c.xfer_id, B10_ERR_PEER_PROTOCOL, "sync message of 65537 bytes");
    assert_int_equal(d.stats.peer_protocol_errors, 1);
    charges_returned();
    ctl_free(&k);
}

/* The wire refuses the CANCEL's receive: the transfer fails, saying so. */
static void test_wire_refuses_receive(void **state)
{
    struct ctl k;
    ctl_one(&k, 0, 4096);
    refuse_posts = true;
    xfer_recv_admit(&sender, &k.c, k.length);
    sender_heard(k.c.xfer_id, B10_ERR_INTERNAL, "posting the CANCEL receive failed");
    assert_int_equal(tags_live(d.tags), 0);
    charges_returned();
    ctl_free(&k);
}

/* A write-back lands for the READ that waits: the sender hears OK, the reading rank its READ done. */
static void test_write_back_lands_for_its_read(void **state)
{
    struct ctl k;
    struct xfer *read = read_waiting();
    ctl_one(&k, 0, 16384);
    k.c.read_id = READ_ID;
    struct xfer *x = admit(&k);
    assert_ptr_equal(read->read.child, x);
    send_chunk(&k, 0, false);
    sender_heard(k.c.xfer_id, B10_OK, "");
    assert_true(chunk_landed(&k, 0));
    assert_int_equal(rk_told.xfers_done, 1);
    assert_int_equal(d.stats.xfers_succeeded, 1);
    run_until(quiet);
    ctl_free(&k);
}

/* The rank deregistered the destination while DATA was on its way: the sender hears it refused. */
static void test_destination_gone_before_data(void **state)
{
    struct ctl k;
    ctl_one(&k, 0, 4096);
    admit(&k);
    struct region *r = mem_table_take(&rank.mem, 1);
    assert_ptr_equal(r, closed_region);
    send_chunk(&k, 0, false);
    sender_heard(k.c.xfer_id, B10_ERR_REMOTE_REJECTED,
                 "copying chunk 0 into decode-0: destination no longer registered");
    assert_true(rank_memory_untouched());
    char detail[128];
    assert_int_equal(mem_table_insert(&rank.mem, r, detail, sizeof(detail)), B10_OK);
    ctl_free(&k);
}

/* A sender that sums nothing: its chunks land unchecked, and that is said once per peer. */
static void test_unsummed_chunks_land_unchecked(void **state)
{
    static const uint64_t off[2] = { 0, VIEW };
    struct ctl k;

    d.cfg.verify_data = CONFIG_VERIFY_ON;
    ctl_make(&k, 2, off, VIEW, false);
    admit(&k);
    for (uint32_t c = 0; c < 2; c++) {
        struct fake_op *op = posted(tags_derive(&sender.in.tags, k.c.xfer_id, c, TAG_KIND_DATA));
        uint64_t len = k.plan->chunks[c].bytes;
        uint64_t zeros[4] = { 0 };
        assert_non_null(op);
        chunk_bytes(&k, c, op->buf);
        memset(op->buf + len, 0, checksum_message_bytes(len) - len);
        checksum_trailer_put(op->buf, len, zeros, 0, false);
        complete(op, B10_OK, checksum_message_bytes(len));
        assert_true(sender.unchecked_said);
    }
    sender_heard(k.c.xfer_id, B10_OK, "");
    assert_true(chunk_landed(&k, 0));
    assert_true(chunk_landed(&k, 1));
    ctl_free(&k);
}

/* No endpoint to the sender when a chunk's receive is due: the link is lost, the sender hears nothing. */
static void test_no_endpoint_for_data(void **state)
{
    struct ctl k;
    ctl_one(&k, 0, 4096);
    sender.ep = NULL;
    xfer_recv_admit(&sender, &k.c, k.length);
    run_until(quiet);
    assert_int_equal(nresults, 0);
    assert_int_equal(readies, 0);
    assert_int_equal(d.stats.xfers_received_failed, 1);
    charges_returned();
    ctl_free(&k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_covers_every_rule),
        cmocka_unit_test(test_admission_table),
        cmocka_unit_test_setup_teardown(test_lands_then_tells, setup, teardown),
        cmocka_unit_test_setup_teardown(test_window_takes_every_chunk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_changed_chunk_never_lands, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_trailer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_data_of_other_length, setup, teardown),
        cmocka_unit_test_setup_teardown(test_data_larger_than_posted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_late_data_never_lands, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deadline_capped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sender_cancels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sender_cancels_quietly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queued_until_share_frees, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quarantined_share_fails_fast, setup, teardown),
        cmocka_unit_test_setup_teardown(test_link_gone_before_ready, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tag_collision, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sync_message_too_long, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wire_refuses_receive, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_back_lands_for_its_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destination_gone_before_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unsummed_chunks_land_unchecked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_endpoint_for_data, setup, teardown),
    };
    log_setup(LOG_LEVEL_ERR, "test-xfer-recv");
    mem = aligned_alloc(4096, CLOSED + OPEN);
    assert_non_null(mem);
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    free(mem);
    return failed;
}
