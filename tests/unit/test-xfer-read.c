/*
 * test-xfer-read.c — daemon/engine/xfer-read.c: a READ, on both daemons.
 *
 * On the asking daemon a READ is a request and a wait: rank-a asks node-b
 * for rank-b's bytes, and the test reads the request the engine sealed and
 * answers its RESULT (engine-fixture.h). On the holding daemon the request
 * comes from node-b for rank-h of this node: each refusal of the table
 * goes back to the asking link as a Result naming it, beside the request
 * served; a served one is a write-back (a WRITE of the holder's bytes,
 * xfer-send.c), whose DATA carries rank-h's bytes, whose landing gives
 * rank-h its sync message, and whose failure is told to the asking daemon.
 */
#include "engine-fixture.h"

#include "checksum.h"

#define MiB (1u << 20)
#define B_ADDR UINT64_C(0x9000000000)     /* rank-b's memory on node-b */
#define READ_ID UINT64_C(0x7700000000000077)

static struct ex_rank *a, *h;       /* a reads from node-b; node-b reads from h */

static int setup(void **state)
{
    ex_setup(state);
    a = ex_rank("rank-a", 1000, MiB, 1);
    h = ex_rank("rank-h", 1000, MiB, 3);
    ex_load(a, "rank-b", &ex_node_b, true, 1001, 0);
    return 0;
}

static int teardown(void **state)
{
    return ex_teardown(state);
}

/* ---------------------------------------------------------------- the asking side */

struct rreq {
    B10__SubmitXfer m;
    uint8_t local[8 * SPAN_BYTES], remote[8 * SPAN_BYTES];
};

/* count spans of len bytes of rank-b's into a's, from a's byte 4096 on, 512 bytes apart. */
static void rreq_init(struct rreq *r, size_t count, uint64_t len, const char *sync)
{
    memset(r, 0, sizeof(*r));
    B10__SubmitXfer init = B10__SUBMIT_XFER__INIT;
    r->m = init;
    r->m.op = B10__OP__OP_READ;
    r->m.remote_agent = "rank-b";
    ex_spans(r->local, count, a, 4096, len + 512, len);
    for (size_t i = 0; i < count; i++) {
        frame_put_u64(r->remote + i * SPAN_BYTES, B_ADDR + i * (len + 512));
        frame_put_u64(r->remote + i * SPAN_BYTES + 8, len);
    }
    r->m.local_spans = (ProtobufCBinaryData){ count * SPAN_BYTES, r->local };
    r->m.remote_spans = (ProtobufCBinaryData){ count * SPAN_BYTES, r->remote };
    r->m.sync_msg = (ProtobufCBinaryData){ strlen(sync), (uint8_t *)sync };
}

static struct xfer *submitted(struct rreq *r)
{
    struct xfer *x = NULL;
    char detail[256] = "";
    b10_status_t st = xfer_submit(&a->s, &r->m, NULL, NULL, &x, detail, sizeof(detail));
    if (st != B10_OK)
        fail_msg("refused: %s: %s", b10_status_name(st), detail);
    assert_int_equal(x->role, XFER_READ);
    return x;
}

static uint64_t result_tag(const struct xfer *x)
{
    return tags_derive(&ex_node_b.out.tags, x->id, 0, TAG_KIND_RESULT);
}

/* The request sent for x: both tables, the names, the uid, the sync message. */
static void assert_request(const struct xfer *x, const uint8_t *remote, const uint8_t *local,
                           size_t count, const char *sync)
{
    struct ex_sent *sent;
    B10__Peer__Msg *m = ex_sent_msg(B10__PEER__MSG__BODY_READ, &sent);
    assert_non_null(m);
    const B10__Peer__ReadRequest *rr = m->read;
    assert_int_equal(sent->tag, tags_derive(&ex_node_b.out.tags, 0, 0, TAG_KIND_CONTROL));
    assert_int_equal(sent->gen, ex_node_b.out.tags.gen);
    assert_int_equal(rr->read_id, x->id);
    assert_string_equal(rr->src_agent, "rank-b");
    assert_string_equal(rr->dst_agent, "rank-a");
    assert_true(rr->deadline_ms > 0 && rr->deadline_ms <= ex_d.cfg.deadline_ms);
    assert_int_equal(rr->src_spans.len, count * SPAN_BYTES);
    assert_memory_equal(rr->src_spans.data, remote, count * SPAN_BYTES);
    assert_int_equal(rr->dst_spans.len, count * SPAN_BYTES);
    assert_memory_equal(rr->dst_spans.data, local, count * SPAN_BYTES);
    assert_int_equal(rr->sync_msg.len, strlen(sync));
    assert_memory_equal(rr->sync_msg.data, sync, strlen(sync));
    assert_true(rr->src_uid_known);
    assert_int_equal(rr->src_uid, 1001);
    b10__peer__msg__free_unpacked(m, NULL);
}

/*
 * The READ asks node-b with both span tables and waits for its write-back:
 * found by its id, its peer and its rank only, and only while it waits.
 * The write-back's landing (xfer_finish) is its end: the rank hears B10_OK.
 */
static void test_read_asks_and_waits(void **state)
{
    struct rreq r;
    rreq_init(&r, 3, 3000, "sum it");
    struct xfer *x = submitted(&r);
    assert_int_equal(x->state, XFER_WAIT_LINK);
    assert_null(xfer_read_waiting(&ex_d, &ex_node_b, &a->s, x->id));
    xfer_start(x);
    assert_int_equal(x->state, XFER_WAIT_READY);
    assert_request(x, r.remote, r.local, 3, "sum it");
    assert_non_null(ex_op_on(result_tag(x)));
    assert_ptr_equal(tags_lookup(ex_d.tags, result_tag(x)), x);
    assert_ptr_equal(xfer_read_waiting(&ex_d, &ex_node_b, &a->s, x->id), x);
    assert_null(xfer_read_waiting(&ex_d, &ex_self, &a->s, x->id));
    assert_null(xfer_read_waiting(&ex_d, &ex_node_b, &h->s, x->id));
    assert_null(xfer_read_waiting(&ex_d, &ex_node_b, &a->s, x->id + 1));

    xfer_finish(x);
    ex_wait_told(a);
    assert_int_equal(a->status, B10_OK);
    assert_int_equal(tags_live(ex_d.tags), 0);
    assert_int_equal(ex_d.stats.xfers_succeeded, 1);
    assert_non_null(ex_logged("from rank-b landed"));
    ex_flush();
}

/* A READ of picks whose checks needed no spans: the request carries them, written now. */
static void test_read_of_picks_sends_spans(void **state)
{
    static uint8_t rows[2 * 4 * 4];
    uint8_t abase[8], bbase[8];
    frame_put_u64(abase, a->addr);
    frame_put_u64(bbase, B_ADDR);
    for (uint32_t i = 0; i < 4; i++) {
        frame_put_u32(rows + 4 * i, 3 - i);
        frame_put_u32(rows + 4 * (4 + i), i * 2);
    }
    struct xfer_picks picks = {
        .local = { abase, 1, 8, 1024, 512 },
        .remote = { bbase, 1, 8, 4096, 512 },
        .local_rows = rows, .remote_rows = rows + 16, .count = 4,
    };
    B10__SubmitXfer req = B10__SUBMIT_XFER__INIT;
    req.op = B10__OP__OP_READ;
    req.remote_agent = "rank-b";
    struct xfer *x = NULL;
    char detail[256];
    assert_int_equal(xfer_submit(&a->s, &req, &picks, NULL, &x, detail, sizeof(detail)), B10_OK);
    uint8_t local[4 * SPAN_BYTES], remote[4 * SPAN_BYTES];
    for (uint32_t i = 0; i < 4; i++) {
        frame_put_u64(local + i * SPAN_BYTES, a->addr + (3 - i) * 1024);
        frame_put_u64(local + i * SPAN_BYTES + 8, 512);
        frame_put_u64(remote + i * SPAN_BYTES, B_ADDR + i * 2 * 4096);
        frame_put_u64(remote + i * SPAN_BYTES + 8, 512);
    }
    free(picks.spans);
    xfer_start(x);
    assert_request(x, remote, local, 4, "");
    xfer_cancel(x);
    ex_wait_told(a);
    assert_int_equal(a->status, B10_ERR_CANCELLED);
    ex_flush();
}

/* What node-b answers the READ: a refusal, in its words; a success is no answer. */
struct answer_case {
    const char *name;
    int status;
    const char *detail;
    b10_status_t want;
    const char *why;
};

static const struct answer_case answer_cases[] = {
    { "the holder refused", B10_ERR_PERMISSION, "rank 'rank-b' has not paired", B10_ERR_PERMISSION,
      "remote daemon: rank 'rank-b' has not paired" },
    { "the holder has no such rank", B10_ERR_UNKNOWN_AGENT, "no rank named 'rank-b'",
      B10_ERR_UNKNOWN_AGENT, "no rank named" },
    { "success instead of the write-back", B10_OK, "", B10_ERR_PEER_PROTOCOL,
      "RESULT success before READY" },
};

static void test_read_answered(void **state)
{
    const struct answer_case *c = *state;
    struct rreq r;
    rreq_init(&r, 3, 3000, "");
    struct xfer *x = submitted(&r);
    xfer_start(x);
    uint64_t rt = result_tag(x), id = x->id;
    ex_reply_result(rt, id, c->status, c->detail);
    ex_wait_told(a);
    assert_int_equal(a->status, c->want);
    assert_non_null(strstr(a->detail, c->why));
    assert_true(tags_is_quarantined(ex_d.tags, rt));
    assert_int_equal(ex_quarantined(QUARANTINE_TAGS), 1);
    assert_int_equal(ex_quarantined(QUARANTINE_XFER_ID), 1);
    /* A READ sends no CANCEL: the write-back's own deadline ends it there. */
    assert_int_equal(ex_sent_count(B10__PEER__MSG__BODY_CANCEL), 0);
}

static uint64_t taken_tag;

static void request_too_large(void) { ex_node_b.max_control = 64; }
static void no_link(void) { ex_send_fails = true; }
static void result_not_posted(void) { ex_post_fails = 1; }
static void tag_taken(void)
{
    assert_int_equal(tags_register(ex_d.tags, taken_tag, &taken_tag), B10_OK);
}

struct ask_case {
    const char *name;
    void (*breaks)(void);
    b10_status_t want;
    const char *why;
    bool tags;                  /* its RESULT tag was registered, and so is quarantined */
};

static const struct ask_case ask_cases[] = {
    { "the request larger than the peer takes", request_too_large, B10_ERR_TOO_LARGE,
      "exceeds the remote daemon's limit", true },
    { "no link to send it on", no_link, B10_ERR_PEER_LOST, "sending the READ request failed",
      true },
    { "its RESULT receive not posted", result_not_posted, B10_ERR_INTERNAL,
      "posting the RESULT receive failed", true },
    { "its RESULT tag taken", tag_taken, B10_ERR_TAG_COLLISION, "RESULT tag", false },
};

/* What can stop a READ before node-b has it: the rank hears why, and nothing was asked. */
static void test_read_not_asked(void **state)
{
    const struct ask_case *c = *state;
    struct rreq r;
    rreq_init(&r, 3, 3000, "");
    struct xfer *x = submitted(&r);
    uint64_t rt = result_tag(x);
    taken_tag = rt;
    c->breaks();
    xfer_start(x);
    ex_wait_told(a);
    assert_int_equal(a->status, c->want);
    assert_non_null(strstr(a->detail, c->why));
    assert_int_equal(ex_sent_count(B10__PEER__MSG__BODY_READ), 0);
    assert_int_equal(tags_is_quarantined(ex_d.tags, rt), c->tags);
    if (!c->tags) {
        assert_ptr_equal(tags_lookup(ex_d.tags, rt), &taken_tag);
        tags_unregister(ex_d.tags, rt);
    }
    ex_flush();
}

/* No write-back within the deadline: the READ fails saying what it waited for. */
static void test_read_deadline(void **state)
{
    struct rreq r;
    rreq_init(&r, 3, 3000, "");
    struct xfer *x = submitted(&r);
    xfer_start(x);
    ex_deadline_now(x);
    ex_wait_told(a);
    assert_int_equal(a->status, B10_ERR_DEADLINE);
    assert_non_null(strstr(a->detail, "waiting for the remote daemon to write back (0 of 1 chunks "
                           "landed)"));
    ex_flush();
}

/* The READ's own side is checked as a WRITE's is: a destination outside a's memory is refused. */
static void test_read_destination_checked(void **state)
{
    struct rreq r;
    struct xfer *x = NULL;
    char detail[256];
    rreq_init(&r, 3, 3000, "");
    frame_put_u64(r.local + 2 * SPAN_BYTES, a->addr + a->len);
    assert_int_equal(xfer_submit(&a->s, &r.m, NULL, NULL, &x, detail, sizeof(detail)),
                     B10_ERR_NOT_REGISTERED);
    assert_null(x);
    assert_non_null(strstr(detail, "local span 2"));
    rreq_init(&r, 3, 3000, "");
    assert_int_equal(xfer_submit(&a->s, &r.m, NULL, NULL, &x, detail, sizeof(detail)), B10_OK);
    xfer_discard(x);
    assert_int_equal(ex_d.nxfers, 0);
    assert_int_equal(ex_d.stats.xfers_submitted, 0);
}

/* ---------------------------------------------------------------- the holding side */

struct serve {
    B10__Peer__ReadRequest m;
    uint8_t src[4 * SPAN_BYTES], dst[4 * SPAN_BYTES];
    size_t length;              /* of the request as it came, its envelope included */
};

#define SERVE_LEN 5000u

/* node-b's rank-r reads 3 spans of rank-h's, of SERVE_LEN bytes, with a sync message for h. */
static void serve_init(struct serve *q)
{
    memset(q, 0, sizeof(*q));
    B10__Peer__ReadRequest init = B10__PEER__READ_REQUEST__INIT;
    q->m = init;
    q->m.read_id = READ_ID;
    q->m.src_agent = "rank-h";
    q->m.dst_agent = "rank-r";
    q->m.deadline_ms = 10000;
    ex_spans(q->src, 3, h, 8192, SERVE_LEN + 1000, SERVE_LEN);
    for (size_t i = 0; i < 3; i++) {
        frame_put_u64(q->dst + i * SPAN_BYTES, B_ADDR + i * SERVE_LEN);
        frame_put_u64(q->dst + i * SPAN_BYTES + 8, SERVE_LEN);
    }
    q->m.src_spans = (ProtobufCBinaryData){ 3 * SPAN_BYTES, q->src };
    q->m.dst_spans = (ProtobufCBinaryData){ 3 * SPAN_BYTES, q->dst };
    q->m.sync_msg = (ProtobufCBinaryData){ 9, (uint8_t *)"read done" };
    q->m.src_uid_known = true;
    q->m.src_uid = 1000;
    q->length = 400;
}

/* The write-back serving a READ: the one transfer there is. */
static struct xfer *write_back(void)
{
    assert_int_equal(ex_d.nxfers, 1);
    struct xfer *x = list_entry(ex_d.xfers.next, struct xfer, node);
    assert_int_equal(x->role, XFER_SEND);
    assert_int_equal(x->read.id, READ_ID);
    return x;
}

static uint64_t wb_tag(const struct xfer *x, enum tag_kind kind, uint32_t chunk)
{
    return tags_derive(&ex_node_b.out.tags, x->id, chunk, kind);
}

static bool parked(const void *arg)
{
    const struct xfer *x = arg;
    return x->slots[0].busy && x->slots[0].parked;
}

static void malformed_no_spans(struct serve *q) { q->m.src_spans.len = q->m.dst_spans.len = 0; }
static void malformed_unequal(struct serve *q) { q->m.dst_spans.len -= SPAN_BYTES; }
static void malformed_ragged(struct serve *q) { q->m.src_spans.len = q->m.dst_spans.len = 20; }
static void malformed_no_id(struct serve *q) { q->m.read_id = 0; }
static void malformed_no_name(struct serve *q) { q->m.dst_agent = ""; }
static void malformed_sync(struct serve *q) { q->m.sync_msg.len = B10_SYNC_MSG_MAX + 1; }
static void holder_unknown(struct serve *q) { q->m.src_agent = "rank-x"; }
static void holder_other_uid(struct serve *q) { q->m.src_uid = 4242; }
static void unpaired(struct serve *q) { ex_d.cfg.remote_access = CONFIG_REMOTE_PAIRED; }
static void peer_xfers_full(struct serve *q) { ex_d.cfg.max_peer_xfers = 0; }
static void peer_control_full(struct serve *q) { ex_d.cfg.max_peer_control = q->length - 1; }
static void all_control_full(struct serve *q) { ex_d.control_held = 4 * ex_d.cfg.max_peer_control; }
static void deadline_short(struct serve *q) { q->m.deadline_ms = ex_d.cfg.min_deadline_ms - 1; }
static void peer_quarantined(struct serve *q)
{
    ex_node_b.quarantined = config_peer_quarantine(&ex_d.cfg) + 1;
}
static void notices_full(struct serve *q) { ex_notice_max = 8; }
static void source_unregistered(struct serve *q)
{
    frame_put_u64(q->src + SPAN_BYTES, h->addr + h->len - 10);
}
static void draining(struct serve *q) { ex_d.stopping = true; }

struct refusal {
    const char *name;
    void (*breaks)(struct serve *q);
    b10_status_t want;
    const char *why;
    bool refused;               /* counted against the peer's limits */
};

static const struct refusal refusals[] = {
    { "no spans", malformed_no_spans, B10_ERR_PEER_PROTOCOL, "READ request malformed", false },
    { "tables unequal", malformed_unequal, B10_ERR_PEER_PROTOCOL, "READ request malformed", false },
    { "tables of part spans", malformed_ragged, B10_ERR_PEER_PROTOCOL, "READ request malformed",
      false },
    { "no READ id", malformed_no_id, B10_ERR_PEER_PROTOCOL, "READ request malformed", false },
    { "no reader's name", malformed_no_name, B10_ERR_PEER_PROTOCOL, "READ request malformed",
      false },
    { "sync too large", malformed_sync, B10_ERR_PEER_PROTOCOL, "READ request malformed", false },
    { "no such holder", holder_unknown, B10_ERR_UNKNOWN_AGENT, "no rank named 'rank-x'", false },
    { "the holder of another uid", holder_other_uid, B10_ERR_UNKNOWN_AGENT,
      "not of the user whose descriptor was loaded (uid 4242)", false },
    { "unpaired, --remote-access paired", unpaired, B10_ERR_PERMISSION,
      "has not paired with 'rank-r' of daemon node-b", false },
    { "the peer's transfers at their bound", peer_xfers_full, B10_ERR_BUSY, "--max-peer-xfers",
      true },
    { "the peer's CONTROL at its bound", peer_control_full, B10_ERR_BUSY, "--max-peer-control",
      true },
    { "all peers' CONTROL at the bound", all_control_full, B10_ERR_BUSY, "all remote daemons",
      true },
    { "too little time left", deadline_short, B10_ERR_DEADLINE, "--min-deadline-ms", true },
    { "the peer's quarantine past its bound", peer_quarantined, B10_ERR_STAGING_EXHAUSTED,
      "--peer-quarantine-bytes", true },
    { "the holder's notices full", notices_full, B10_ERR_BUSY, "--max-notice-bytes", true },
    { "a source outside the holder's memory", source_unregistered, B10_ERR_REMOTE_REJECTED,
      "reading from rank-h: local span 1", false },
    { "draining", draining, B10_ERR_DRAINING, "reading from rank-h: the daemon is draining",
      false },
};

/*
 * The request as it comes is served (a write-back starts); with the case's
 * one thing wrong it is refused on the asking link, naming why, and
 * nothing starts, holds the peer's share or promises the holder a notice.
 */
static void test_serve_refused(void **state)
{
    const struct refusal *c = *state;
    struct serve q;
    serve_init(&q);
    xfer_read_serve(&ex_node_b, &q.m, q.length);
    struct xfer *x = write_back();
    xfer_cancel_admin(x, "the test");
    assert_int_equal(ex_nresults, 1);           /* the reader hears the write-back ended */
    assert_int_equal(ex_results[0].status, B10_ERR_CANCELLED);
    ex_flush();
    assert_int_equal(ex_node_b.in_xfers, 0);
    assert_int_equal(ex_node_b.control_held, 0);
    ex_nresults = 0;

    c->breaks(&q);
    xfer_read_serve(&ex_node_b, &q.m, q.length);
    assert_int_equal(ex_d.nxfers, 0);
    assert_int_equal(ex_nresults, 1);
    struct ex_result *res = &ex_results[0];
    assert_ptr_equal(res->peer, &ex_node_b);
    assert_int_equal(res->gen, ex_node_b.in.tags.gen);
    assert_int_equal(res->id, q.m.read_id);
    assert_int_equal(res->status, c->want);
    if (strstr(res->detail, c->why) == NULL)
        fail_msg("%s: the detail \"%s\" does not say \"%s\"", c->name, res->detail, c->why);
    assert_int_equal(ex_refused, c->refused);
    assert_int_equal(ex_node_b.in_xfers, 0);
    assert_int_equal(h->s.notice_reserved, 0);
    assert_int_equal(ex_d.stats.peer_protocol_errors, c->want == B10_ERR_PEER_PROTOCOL);
    ex_node_b.quarantined = 0;
    ex_d.control_held = 0;
}

/*
 * Served: a write-back of rank-h's bytes that holds the peer's share while
 * it runs; its CONTROL names the READ and carries no sync message (that is
 * rank-h's, once read); its DATA is h's bytes; landed, h hears its sync
 * message and nothing else, and the share is given back.
 */
static void test_serve_writes_back(void **state)
{
    struct serve q;
    serve_init(&q);
    xfer_read_serve(&ex_node_b, &q.m, q.length);
    struct xfer *x = write_back();
    assert_true(x->released);
    assert_true(x->admitted);
    assert_ptr_equal(x->session, &h->s);
    assert_int_equal(ex_node_b.in_xfers, 1);
    assert_int_equal(ex_node_b.control_held, q.length);
    assert_int_equal(ex_d.control_held, q.length);
    assert_int_equal(h->s.notice_reserved, 9);
    assert_int_equal(x->state, XFER_WAIT_READY);
    B10__Peer__Msg *m = ex_sent_msg(B10__PEER__MSG__BODY_CONTROL, NULL);
    assert_non_null(m);
    assert_int_equal(m->control->read_id, READ_ID);
    assert_int_equal(m->control->sync_msg.len, 0);
    assert_false(m->control->dst_uid_known);
    assert_string_equal(m->control->dst_agent, "rank-r");
    assert_string_equal(m->control->src_agent, "rank-h");
    assert_int_equal(m->control->total_bytes, 3 * SERVE_LEN);
    b10__peer__msg__free_unpacked(m, NULL);

    assert_true(ex_run_until(parked, x));
    ex_reply_ready(wb_tag(x, TAG_KIND_READY, 0), x->id);
    struct wire_op *data = ex_op_on(wb_tag(x, TAG_KIND_DATA, 0));
    assert_non_null(data);
    for (size_t i = 0; i < 3; i++)
        assert_memory_equal(data->buf + i * SERVE_LEN, h->mem + 8192 + i * (SERVE_LEN + 1000),
                            SERVE_LEN);
    ex_complete(data, B10_OK, 0);
    ex_reply_result(wb_tag(x, TAG_KIND_RESULT, 0), x->id, B10_OK, "");
    assert_int_equal(h->notices, 1);
    assert_string_equal(h->notice_from, "rank-r");
    assert_memory_equal(h->notice, "read done", 9);
    assert_int_equal(h->told, 0);
    assert_int_equal(h->s.notice_reserved, 0);
    assert_int_equal(ex_node_b.in_xfers, 0);
    assert_int_equal(ex_node_b.control_held, 0);
    assert_int_equal(ex_d.control_held, 0);
    assert_int_equal(ex_nresults, 0);
    assert_int_equal(ex_d.stats.bytes_sent, 3 * SERVE_LEN);
}

struct wb_fail {
    const char *name;
    bool silent;                /* the failure leaves the reader's daemon nothing to hear */
    b10_status_t want;
};

static const struct wb_fail wb_fail_cases[] = {
    { "the reader's daemon refused the write-back", false, B10_ERR_REMOTE_REJECTED },
    { "the link to the reader's daemon went", true, B10_ERR_PEER_LOST },
};

/*
 * A write-back that fails tells the reading daemon, on the link the READ
 * came by and under the READ's id, unless that daemon cannot hear; the
 * holder hears nothing, its promised notice is released.
 */
static void test_write_back_fails(void **state)
{
    const struct wb_fail *c = *state;
    struct serve q;
    serve_init(&q);
    xfer_read_serve(&ex_node_b, &q.m, q.length);
    struct xfer *x = write_back();
    if (c->silent)
        ex_complete(ex_op_on(wb_tag(x, TAG_KIND_READY, 0)), B10_ERR_PEER_LOST, 0);
    else
        ex_reply_result(wb_tag(x, TAG_KIND_RESULT, 0), x->id, B10_ERR_REMOTE_REJECTED,
                        "span outside rank-r's memory");
    assert_int_equal(ex_nresults, !c->silent);
    if (!c->silent) {
        assert_int_equal(ex_results[0].gen, ex_node_b.in.tags.gen);
        assert_int_equal(ex_results[0].id, READ_ID);
        assert_int_equal(ex_results[0].status, c->want);
        assert_non_null(strstr(ex_results[0].detail, "span outside rank-r's memory"));
    }
    assert_int_equal(ex_d.stats.xfers_failed, 1);
    assert_int_equal(h->told, 0);
    assert_int_equal(h->released_ends, 1);
    assert_int_equal(h->notices, 0);
    assert_int_equal(h->s.notice_reserved, 0);
    assert_int_equal(ex_node_b.in_xfers, 0);
    ex_flush();
}

#define CASES(fn, table)                                                              \
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)                     \
        tests[n++] = (struct CMUnitTest){ table[i].name, fn, setup, teardown,          \
                                          (void *)&table[i] }
#define ONE(fn) tests[n++] = (struct CMUnitTest)cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    struct CMUnitTest tests[64];
    size_t n = 0;
    log_setup(LOG_LEVEL_INFO, "test-xfer-read");
    ONE(test_read_asks_and_waits);
    ONE(test_read_of_picks_sends_spans);
    CASES(test_read_answered, answer_cases);
    CASES(test_read_not_asked, ask_cases);
    ONE(test_read_deadline);
    ONE(test_read_destination_checked);
    CASES(test_serve_refused, refusals);
    ONE(test_serve_writes_back);
    CASES(test_write_back_fails, wb_fail_cases);
    assert_true(n <= sizeof(tests) / sizeof(tests[0]));
    return _cmocka_run_group_tests("xfer-read", tests, n, NULL, NULL);
}
