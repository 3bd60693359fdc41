/*
 * test-xfer-send.c — daemon/engine/xfer-send.c: the sending side of a WRITE,
 * and what of xfer.c's funnel it runs.
 *
 * A rank of real memory sends to rank-b on node-b, a remote daemon that
 * is the test (engine-fixture.h): the test reads each CONTROL and CANCEL the
 * engine seals, answers READY and RESULT into the receives it posted,
 * completes its DATA sends and compares their bytes with the rank's. Each
 * decision at link-up, at READY, at RESULT and while DATA is out is a row
 * of a table: what the peer says or fails to say, what the rank hears,
 * what is cancelled, quarantined and given back clean.
 */
#include "engine-fixture.h"

#include "checksum.h"

#define MiB (1u << 20)
#define B_ADDR UINT64_C(0x9000000000)     /* rank-b's memory, as node-b's rank says */

static struct ex_rank *a;

static int setup(void **state)
{
    ex_setup(state);
    a = ex_rank("rank-a", 1000, MiB, 1);
    ex_load(a, "rank-b", &ex_node_b, true, 1001, 0);
    return 0;
}

static int teardown(void **state)
{
    return ex_teardown(state);
}

/* ---------------------------------------------------------------- requests and the peer's part */

struct wreq {
    B10__SubmitXfer m;
    uint8_t local[8 * SPAN_BYTES], remote[8 * SPAN_BYTES];
    size_t count;
    uint64_t len;
};

/* count spans of len bytes from a's byte 4096 on, to rank-b's, 512 bytes apart. */
static void wreq_init(struct wreq *r, size_t count, uint64_t len, const char *sync)
{
    memset(r, 0, sizeof(*r));
    B10__SubmitXfer init = B10__SUBMIT_XFER__INIT;
    r->m = init;
    r->m.op = B10__OP__OP_WRITE;
    r->m.remote_agent = "rank-b";
    r->count = count;
    r->len = len;
    ex_spans(r->local, count, a, 4096, len + 512, len);
    for (size_t i = 0; i < count; i++) {
        frame_put_u64(r->remote + i * SPAN_BYTES, B_ADDR + i * (len + 512));
        frame_put_u64(r->remote + i * SPAN_BYTES + 8, len);
    }
    r->m.local_spans = (ProtobufCBinaryData){ count * SPAN_BYTES, r->local };
    r->m.remote_spans = (ProtobufCBinaryData){ count * SPAN_BYTES, r->remote };
    r->m.sync_msg = (ProtobufCBinaryData){ strlen(sync), (uint8_t *)sync };
}

static struct xfer *submitted(struct wreq *r)
{
    struct xfer *x = NULL;
    char detail[256] = "";
    b10_status_t st = xfer_submit(&a->s, &r->m, NULL, NULL, &x, detail, sizeof(detail));
    if (st != B10_OK)
        fail_msg("refused: %s: %s", b10_status_name(st), detail);
    assert_int_equal(x->role, XFER_SEND);
    assert_int_equal(x->state, XFER_WAIT_LINK);
    return x;
}

static uint64_t tag(const struct xfer *x, enum tag_kind kind, uint32_t chunk)
{
    return tags_derive(&ex_node_b.out.tags, x->id, chunk, kind);
}

static bool posted(const void *arg)
{
    return ex_op_on(*(const uint64_t *)arg) != NULL;
}

static bool parked(const void *arg)
{
    const struct xfer *x = arg;
    return x->slots[0].busy && x->slots[0].parked;
}

/* Started, CONTROL out, and its first chunk gathered ahead of READY (parked). */
static struct xfer *started(struct wreq *r)
{
    struct xfer *x = submitted(r);
    xfer_start(x);
    assert_int_equal(x->state, XFER_WAIT_READY);
    assert_true(ex_run_until(parked, x));
    assert_null(ex_op_on(tag(x, TAG_KIND_DATA, 0)));    /* no DATA before READY */
    return x;
}

/* DATA of chunk c: the rank's bytes of its pieces, in order, then its trailer. */
static void assert_data(const struct xfer *x, const struct wire_op *op, uint32_t c)
{
    const struct plan_chunk *ch = &x->plan->chunks[c];
    assert_true(op->send);
    assert_int_equal(op->bulk, x->plan->nchunks > 1);
    assert_int_equal(op->length, checksum_message_bytes(ch->bytes));
    size_t at = 0;
    for (uint32_t p = ch->first; p < ch->first + ch->count; p++) {
        const struct plan_piece *piece = &x->plan->pieces[p];
        assert_memory_equal(op->buf + at, a->mem + (piece->src - a->addr), piece->len);
        at += piece->len;
    }
    assert_int_equal(at, ch->bytes);
}

/* Each chunk's DATA, checked and delivered, in order. */
static void deliver_all(struct xfer *x)
{
    for (uint32_t c = 0; c < x->plan->nchunks; c++) {
        uint64_t t = tag(x, TAG_KIND_DATA, c);
        assert_true(ex_run_until(posted, &t));
        struct wire_op *op = ex_op_on(t);
        assert_data(x, op, c);
        ex_complete(op, B10_OK, 0);
    }
}

/* The DATA of chunk 0 posted (READY came): it, not completed. */
static struct wire_op *data_out(struct xfer *x)
{
    uint64_t t = tag(x, TAG_KIND_DATA, 0);
    assert_true(ex_run_until(posted, &t));
    return ex_op_on(t);
}

/* What a test still knows of a transfer once it may be freed. */
struct xfer_snapshot {
    uint64_t id;
    uint64_t ready_tag, result_tag;
};

static struct xfer_snapshot snap(const struct xfer *x)
{
    return (struct xfer_snapshot){ x->id, tag(x, TAG_KIND_READY, 0), tag(x, TAG_KIND_RESULT, 0) };
}

/* The CANCEL the engine sent for x: its reason and whether it waits for a RESULT. */
static void assert_cancel(const struct xfer_snapshot *s, b10_status_t reason, bool want_result)
{
    struct ex_sent *sent;
    B10__Peer__Msg *m = ex_sent_msg(B10__PEER__MSG__BODY_CANCEL, &sent);
    assert_non_null(m);
    assert_int_equal(m->cancel->xfer_id, s->id);
    assert_int_equal(m->cancel->reason, reason);
    assert_int_equal(m->cancel->want_result, want_result);
    assert_int_equal(sent->gen, ex_node_b.out.tags.gen);
    assert_int_equal(sent->tag, tags_derive(&ex_node_b.out.tags, s->id, 0, TAG_KIND_CANCEL));
    b10__peer__msg__free_unpacked(m, NULL);
}

/* A failure's leavings: the id retired, the reply tags quarantined, their count recorded. */
static void assert_retired(const struct xfer_snapshot *s, bool tags)
{
    assert_int_equal(ex_quarantined(QUARANTINE_XFER_ID), 1);
    assert_int_equal(ex_quarantined(QUARANTINE_TAGS), tags);
    assert_int_equal(tags_is_quarantined(ex_d.tags, s->ready_tag), tags);
    assert_int_equal(tags_is_quarantined(ex_d.tags, s->result_tag), tags);
    assert_int_equal(tags_live(ex_d.tags), 0);
}

/* ---------------------------------------------------------------- a WRITE that lands */

struct lands {
    const char *name;
    size_t count;
    uint64_t len;
    uint32_t nchunks;
    bool verify;
    uint64_t peer_chunk;        /* the peer's largest chunk (0: a view) */
};

static const struct lands lands_cases[] = {
    { "one chunk", 3, 3000, 1, false, 0 },
    { "four chunks, summed", 4, 60000, 4, true, 0 },
    { "re-chunked for the peer's smaller views", 3, 20000, 2, false, EX_VIEW / 2 },
};

/*
 * CONTROL says what the receiver needs; the first chunk is gathered while
 * it travels and waits for READY; each DATA carries the rank's bytes; the
 * receiver's RESULT lands it: the rank hears B10_OK once, the tags go, the
 * views come back, nothing is quarantined.
 */
static void test_write_lands(void **state)
{
    const struct lands *c = *state;
    struct wreq r;
    ex_d.cfg.verify_data = c->verify ? CONFIG_VERIFY_ON : CONFIG_VERIFY_OFF;
    if (c->peer_chunk != 0)
        ex_node_b.max_chunk = c->peer_chunk;
    wreq_init(&r, c->count, c->len, "kv");
    struct xfer *x = started(&r);
    struct ex_sent *sent;
    B10__Peer__Msg *m = ex_sent_msg(B10__PEER__MSG__BODY_CONTROL, &sent);
    assert_non_null(m);
    const B10__Peer__Control *ctl = m->control;
    assert_int_equal(sent->tag, tags_derive(&ex_node_b.out.tags, 0, 0, TAG_KIND_CONTROL));
    assert_int_equal(sent->gen, ex_node_b.out.tags.gen);
    assert_int_equal(ctl->xfer_id, x->id);
    assert_int_equal(ctl->gen, ex_node_b.out.tags.gen);
    assert_string_equal(ctl->dst_agent, "rank-b");
    assert_string_equal(ctl->src_agent, "rank-a");
    assert_int_equal(ctl->nchunks, c->nchunks);
    assert_int_equal(ctl->total_bytes, c->count * c->len);
    assert_true(ctl->deadline_ms > 0 && ctl->deadline_ms <= ex_d.cfg.deadline_ms);
    assert_int_equal(ctl->sync_msg.len, 2);
    assert_memory_equal(ctl->sync_msg.data, "kv", 2);
    assert_true(ctl->dst_uid_known);
    assert_int_equal(ctl->dst_uid, 1001);
    assert_int_equal(ctl->read_id, 0);
    b10__peer__msg__free_unpacked(m, NULL);
    assert_int_equal(ex_node_b.holds, 1);

    ex_reply_ready(tag(x, TAG_KIND_READY, 0), x->id);
    assert_int_equal(x->state, XFER_RUNNING);
    deliver_all(x);
    assert_int_equal(a->told, 0);
    ex_reply_result(tag(x, TAG_KIND_RESULT, 0), x->id, B10_OK, "");
    ex_wait_told(a);
    assert_int_equal(a->status, B10_OK);
    assert_int_equal(ex_d.stats.xfers_succeeded, 1);
    assert_int_equal(ex_d.stats.bytes_sent, c->count * c->len);
    assert_int_equal(tags_live(ex_d.tags), 0);
    assert_int_equal(quarantine_count(ex_d.quarantine), 0);
    assert_int_equal(ex_sent_count(B10__PEER__MSG__BODY_CANCEL), 0);
    assert_true(ex_heard >= 2);
    const char *landed = ex_logged("to rank-b landed");
    assert_non_null(landed);
    assert_non_null(strstr(landed, "STATUS=B10_OK"));
    assert_non_null(strstr(landed, "PEER=node-b"));
    assert_int_equal(ex_ops_open(), 0);
}

/* ---------------------------------------------------------------- READY */

static void ready_other_id(struct xfer *x)
{
    ex_reply_ready(tag(x, TAG_KIND_READY, 0), x->id + 1);
}
static void ready_is_a_result(struct xfer *x)
{
    ex_reply_result(tag(x, TAG_KIND_READY, 0), x->id, B10_OK, "");
}
static void ready_garbage(struct xfer *x)
{
    struct wire_op *op = ex_op_on(tag(x, TAG_KIND_READY, 0));
    memset(op->buf, 0xff, 16);
    ex_complete(op, B10_OK, 16);
}
static void ready_lost(struct xfer *x)
{
    ex_complete(ex_op_on(tag(x, TAG_KIND_READY, 0)), B10_ERR_PEER_LOST, 0);
}
static void ready_late(struct xfer *x)
{
    ex_clock_ms = x->deadline_ms;
    ex_reply_ready(tag(x, TAG_KIND_READY, 0), x->id);
}
static void ready_after_a_stall(struct xfer *x)
{
    ex_stalls = true;
    ex_reply_ready(tag(x, TAG_KIND_READY, 0), x->id);
}

struct ready_case {
    const char *name;
    void (*answer)(struct xfer *x);
    b10_status_t want;
    const char *why;
    bool cancel;                /* the receiver is told: it can hear */
    uint64_t protocol_errors;
};

static const struct ready_case ready_cases[] = {
    { "READY of another transfer", ready_other_id, B10_ERR_PEER_PROTOCOL, "READY names another",
      true, 0 },
    { "a RESULT where READY was awaited", ready_is_a_result, B10_ERR_PEER_PROTOCOL,
      "malformed READY", true, 1 },
    { "a READY that does not decode", ready_garbage, B10_ERR_PEER_PROTOCOL, "malformed READY",
      true, 0 },
    { "the READY receive failed", ready_lost, B10_ERR_PEER_LOST, "waiting for READY", false, 0 },
    { "READY after the deadline", ready_late, B10_ERR_DEADLINE, "expired waiting for READY", true,
      0 },
    { "READY after this daemon stalled", ready_after_a_stall, B10_ERR_PEER_LOST,
      "this daemon stalled", false, 0 },
};

/*
 * A READY that is not a go fails the transfer before any DATA: the rank
 * hears why, the receiver a CANCEL where it can hear one, the tags and id
 * are quarantined, and the view gathered ahead comes back clean (no DATA
 * of it went out), not into the quarantine.
 */
static void test_ready_refused(void **state)
{
    const struct ready_case *c = *state;
    struct wreq r;
    wreq_init(&r, 3, 3000, "");
    struct xfer *x = started(&r);
    struct xfer_snapshot s = snap(x);
    c->answer(x);
    ex_wait_told(a);
    assert_int_equal(a->status, c->want);
    assert_non_null(strstr(a->detail, c->why));
    assert_int_equal(ex_sent_count(B10__PEER__MSG__BODY_CANCEL), c->cancel);
    if (c->cancel)
        assert_cancel(&s, c->want, false);
    assert_retired(&s, true);
    assert_int_equal(ex_quarantined(QUARANTINE_VIEW), 0);
    assert_int_equal(staging_free_views(ex_d.staging), EX_VIEWS);
    assert_int_equal(ex_d.stats.peer_protocol_errors, c->protocol_errors);
    assert_int_equal(ex_d.stats.xfers_failed, 1);
    ex_flush();
    assert_int_equal(ex_ops_open(), 0);
}

/* A READY that does not open is dropped and its receive posted again; the real one goes on. */
static void test_ready_that_does_not_open(void **state)
{
    struct wreq r;
    wreq_init(&r, 3, 3000, "");
    struct xfer *x = started(&r);
    struct wire_op *first = ex_op_on(tag(x, TAG_KIND_READY, 0));
    ex_unauthentic = 1;
    ex_reply_ready(tag(x, TAG_KIND_READY, 0), x->id);
    struct wire_op *again = ex_op_on(tag(x, TAG_KIND_READY, 0));
    assert_non_null(again);
    assert_ptr_not_equal(again, first);
    assert_int_equal(x->state, XFER_WAIT_READY);
    ex_reply_ready(tag(x, TAG_KIND_READY, 0), x->id);
    deliver_all(x);
    ex_reply_result(tag(x, TAG_KIND_RESULT, 0), x->id, B10_OK, "");
    ex_wait_told(a);
    assert_int_equal(a->status, B10_OK);
}

/* A READY that arrives after the client cancelled moves nothing: counted late. */
static void test_ready_after_cancel(void **state)
{
    struct wreq r;
    wreq_init(&r, 3, 3000, "");
    struct xfer *x = started(&r);
    struct xfer_snapshot s = snap(x);
    xfer_cancel(x);
    ex_wait_told(a);
    assert_int_equal(a->status, B10_ERR_CANCELLED);
    assert_cancel(&s, B10_ERR_CANCELLED, false);
    ex_reply_ready(s.ready_tag, s.id);         /* the cancel had not reached UCX yet */
    assert_int_equal(ex_d.stats.late_completions, 1);
    assert_null(ex_op_on(tag(x, TAG_KIND_DATA, 0)));
    ex_flush();
}

/* ---------------------------------------------------------------- RESULT */

struct result_case {
    const char *name;
    bool ready;                 /* READY came first */
    bool all_sent;              /* ... and every chunk's DATA was delivered */
    bool other_id;
    int status;
    const char *detail;
    b10_status_t want;
    const char *why;
};

static const struct result_case result_cases[] = {
    { "RESULT of another transfer", true, true, true, B10_OK, "", B10_ERR_PEER_PROTOCOL,
      "RESULT names another transfer" },
    { "success before READY", false, false, false, B10_OK, "", B10_ERR_PEER_PROTOCOL,
      "RESULT success before READY" },
    { "success before every chunk was sent", true, false, false, B10_OK, "",
      B10_ERR_PEER_PROTOCOL, "before every chunk was sent" },
    { "a status no daemon sends", true, true, false, 12345, "", B10_ERR_PEER_PROTOCOL,
      "RESULT carries status 12345" },
    { "the receiver refused", false, false, false, B10_ERR_REMOTE_REJECTED, "span outside",
      B10_ERR_REMOTE_REJECTED, "remote daemon: span outside" },
    { "the receiver failed after READY", true, true, false, B10_ERR_DATA_CORRUPT,
      "chunk 0 failed its checksum", B10_ERR_DATA_CORRUPT, "chunk 0 failed its checksum" },
};

/*
 * RESULT decides how a send ends: success only once READY came and every
 * chunk went out; a failure in the receiver's words; anything else a
 * protocol error. The rank hears it once, the tags and id are retired.
 */
static void test_result(void **state)
{
    const struct result_case *c = *state;
    struct wreq r;
    ex_d.cfg.max_in_flight = 2;
    wreq_init(&r, 4, 60000, "");
    struct xfer *x = started(&r);
    struct xfer_snapshot s = snap(x);
    if (c->ready) {
        ex_reply_ready(s.ready_tag, s.id);
        if (c->all_sent)
            deliver_all(x);
        else
            ex_complete(data_out(x), B10_OK, 0);
    }
    ex_reply_result(s.result_tag, c->other_id ? s.id + 1 : s.id, c->status, c->detail);
    ex_wait_told(a);
    assert_int_equal(a->status, c->want);
    assert_non_null(strstr(a->detail, c->why));
    assert_retired(&s, true);
    ex_flush();
    assert_int_equal(ex_ops_open(), 0);
}

/* A RESULT that does not open is dropped, its receive posted again; the real one lands it. */
static void test_result_that_does_not_open(void **state)
{
    struct wreq r;
    wreq_init(&r, 3, 3000, "");
    struct xfer *x = started(&r);
    ex_reply_ready(tag(x, TAG_KIND_READY, 0), x->id);
    deliver_all(x);
    ex_unauthentic = 1;
    ex_reply_result(tag(x, TAG_KIND_RESULT, 0), x->id, B10_OK, "");
    assert_int_equal(a->told, 0);
    assert_non_null(ex_op_on(tag(x, TAG_KIND_RESULT, 0)));
    ex_reply_result(tag(x, TAG_KIND_RESULT, 0), x->id, B10_OK, "");
    ex_wait_told(a);
    assert_int_equal(a->status, B10_OK);
}

/* The RESULT receive itself failed (the endpoint): the rank hears the wire's status. */
static void test_result_receive_failed(void **state)
{
    struct wreq r;
    wreq_init(&r, 3, 3000, "");
    struct xfer *x = started(&r);
    ex_complete(ex_op_on(tag(x, TAG_KIND_RESULT, 0)), B10_ERR_PEER_LOST, 0);
    ex_wait_told(a);
    assert_int_equal(a->status, B10_ERR_PEER_LOST);
    assert_non_null(strstr(a->detail, "waiting for RESULT"));
    assert_int_equal(ex_sent_count(B10__PEER__MSG__BODY_CANCEL), 0);
    ex_flush();
}

/* ---------------------------------------------------------------- failed while DATA is out */

enum answer { ANSWER_RESULT, ANSWER_UNSETTLED, ANSWER_LOST, ANSWER_NONE, ANSWER_UNOPENED,
              ANSWER_STOP };

struct out_case {
    const char *name;
    enum answer answer;
    b10_status_t want;
    const char *why;
};

static const struct out_case out_cases[] = {
    { "the receiver answers the CANCEL", ANSWER_RESULT, B10_ERR_CANCELLED,
      "cancelled by the client" },
    { "the receiver's copies outlived its bound", ANSWER_UNSETTLED, B10_ERR_UNSETTLED,
      "remote daemon: its scatter still runs" },
    { "the answer's receive failed", ANSWER_LOST, B10_ERR_UNSETTLED, "--settle-ms" },
    { "no answer within --settle-ms", ANSWER_NONE, B10_ERR_UNSETTLED, "--settle-ms" },
    { "an answer that does not open, then the real one", ANSWER_UNOPENED, B10_ERR_CANCELLED,
      "cancelled by the client" },
    { "the daemon stops", ANSWER_STOP, B10_ERR_UNSETTLED, "--settle-ms" },
};

/*
 * Cancelled while a DATA of it is out: the receiver may still be writing
 * the rank's destination, so the CANCEL asks for a RESULT and the news waits
 * for it; the DATA's view is quarantined, not reused. Past the bound, or
 * with no answer to come, the rank hears B10_ERR_UNSETTLED. A DATA send
 * that completes afterwards is a late completion, its view still out.
 */
static void test_failed_with_data_out(void **state)
{
    const struct out_case *c = *state;
    struct wreq r;
    ex_d.cfg.settle_ms = 20;
    wreq_init(&r, 3, 3000, "");
    struct xfer *x = started(&r);
    struct xfer_snapshot s = snap(x);
    ex_reply_ready(s.ready_tag, s.id);
    struct wire_op *data = data_out(x);
    xfer_cancel(x);
    assert_int_equal(a->told, 0);
    assert_cancel(&s, B10_ERR_CANCELLED, true);
    assert_int_equal(ex_quarantined(QUARANTINE_VIEW), 1);
    assert_true(data->cancelled);
    assert_non_null(ex_op_on(s.result_tag));    /* still posted, for the answer */

    switch (c->answer) {
    case ANSWER_RESULT:
        ex_reply_result(s.result_tag, s.id, B10_ERR_CANCELLED, "cancelled by the sender");
        break;
    case ANSWER_UNSETTLED:
        ex_reply_result(s.result_tag, s.id, B10_ERR_UNSETTLED, "its scatter still runs");
        break;
    case ANSWER_LOST:
        ex_complete(ex_op_on(s.result_tag), B10_ERR_PEER_LOST, 0);
        break;
    case ANSWER_NONE:
        break;
    case ANSWER_UNOPENED:
        ex_unauthentic = 1;
        ex_reply_result(s.result_tag, s.id, B10_ERR_CANCELLED, "cancelled by the sender");
        assert_int_equal(a->told, 0);
        ex_reply_result(s.result_tag, s.id, B10_ERR_CANCELLED, "cancelled by the sender");
        break;
    case ANSWER_STOP:
        xfer_settle_all(&ex_d);
        break;
    }
    ex_wait_told(a);
    assert_int_equal(a->status, c->want);
    assert_non_null(strstr(a->detail, c->why));
    assert_retired(&s, true);
    ex_complete(data, B10_OK, 0);
    assert_int_equal(ex_d.stats.late_completions, 1);
    assert_int_equal(ex_quarantined(QUARANTINE_VIEW), 1);
    ex_flush();
    assert_int_equal(ex_ops_open(), 0);
}

/* ---------------------------------------------------------------- DATA */

static void data_fails(struct xfer *x) { ex_complete(data_out(x), B10_ERR_PEER_LOST, 0); }
static void data_cancelled(struct xfer *x) { ex_complete(data_out(x), B10_ERR_CANCELLED, 0); }
static void data_not_posted(struct xfer *x)
{
    ex_post_fails = 1;
    ex_reply_ready(tag(x, TAG_KIND_READY, 0), x->id);
}
static void data_no_endpoint(struct xfer *x)
{
    ex_node_b.ep = NULL;
    ex_reply_ready(tag(x, TAG_KIND_READY, 0), x->id);
}

struct data_case {
    const char *name;
    bool ready;                 /* the test answers READY first */
    void (*fails)(struct xfer *x);
    const char *why;
};

static const struct data_case data_cases[] = {
    { "a DATA send failed", true, data_fails, "DATA chunk 0 was not delivered" },
    { "a DATA send cancelled under it", true, data_cancelled, "DATA chunk 0 was not delivered" },
    { "a DATA send not posted", false, data_not_posted, "sending DATA chunk 0 failed" },
    { "no endpoint for DATA", false, data_no_endpoint, "sending DATA chunk 0 failed" },
};

/* DATA that cannot go: the peer is lost to this transfer, the rank hears so, no CANCEL is sent. */
static void test_data_fails(void **state)
{
    const struct data_case *c = *state;
    struct wreq r;
    wreq_init(&r, 3, 3000, "");
    struct xfer *x = started(&r);
    struct xfer_snapshot s = snap(x);
    if (c->ready)
        ex_reply_ready(s.ready_tag, s.id);
    c->fails(x);
    ex_wait_told(a);
    assert_int_equal(a->status, B10_ERR_PEER_LOST);
    assert_non_null(strstr(a->detail, c->why));
    assert_int_equal(ex_sent_count(B10__PEER__MSG__BODY_CANCEL), 0);
    assert_retired(&s, true);
    ex_node_b.ep = &ex_ep;
    ex_flush();
}

/* ---------------------------------------------------------------- link-up */

static uint64_t taken_tag;

static void pieces_past_limit(struct xfer *x) { ex_node_b.max_pieces = 2; }
static void no_chunk_size(struct xfer *x) { ex_node_b.max_chunk = 0; }
static void control_past_limit(struct xfer *x) { ex_node_b.max_control = 64; }
static void no_link_for_control(struct xfer *x) { ex_send_fails = true; }
static void ready_tag_taken(struct xfer *x)
{
    taken_tag = tag(x, TAG_KIND_READY, 0);
    assert_int_equal(tags_register(ex_d.tags, taken_tag, &taken_tag), B10_OK);
}
static void result_tag_taken(struct xfer *x)
{
    taken_tag = tag(x, TAG_KIND_RESULT, 0);
    assert_int_equal(tags_register(ex_d.tags, taken_tag, &taken_tag), B10_OK);
}
static void ready_not_posted(struct xfer *x) { ex_post_fails = 1; }
static void link_refused(struct xfer *x) { ex_use_status = B10_ERR_PEER_UNREACHABLE; }
static void gather_unregistered(struct xfer *x)
{
    assert_int_equal(mem_table_remove(&a->s.mem, a->s.mem.regions[0]->id), B10_OK);
}

struct link_case {
    const char *name;
    void (*breaks)(struct xfer *x);
    b10_status_t want;
    const char *why;
    bool control;               /* CONTROL went out (and so a CANCEL after it) */
    bool tags;                  /* the reply tags were registered (and so quarantined) */
};

static const struct link_case link_cases[] = {
    { "more pieces than the peer takes", pieces_past_limit, B10_ERR_TOO_LARGE,
      "3 pieces exceed the remote daemon's limit of 2", false, false },
    { "the peer said no chunk size", no_chunk_size, B10_ERR_NO_MEMORY, "cannot re-chunk", false,
      false },
    { "CONTROL larger than the peer takes", control_past_limit, B10_ERR_TOO_LARGE,
      "exceeds the remote daemon's limit of 64", false, true },
    { "no link to send CONTROL on", no_link_for_control, B10_ERR_PEER_LOST,
      "sending CONTROL failed", false, true },
    { "READY tag taken", ready_tag_taken, B10_ERR_TAG_COLLISION, "READY tag", false, false },
    { "RESULT tag taken", result_tag_taken, B10_ERR_TAG_COLLISION, "RESULT tag", false, false },
    { "READY receive not posted", ready_not_posted, B10_ERR_INTERNAL,
      "posting the READY receive failed", false, true },
    { "link refused", link_refused, B10_ERR_PEER_UNREACHABLE,
      "cannot reach the remote daemon of 'rank-b'", false, false },
    { "its memory gone before the gather", gather_unregistered, B10_ERR_NOT_REGISTERED,
      "gathering chunk 0", true, true },
};

/*
 * What can stop a send at link-up, each before its DATA: the rank hears
 * why, the receiver a CANCEL only if CONTROL reached it, the reply tags
 * quarantined only if they were registered (a tag that collided stays its
 * owner's), and no view is left out.
 */
static void test_link_up_refused(void **state)
{
    const struct link_case *c = *state;
    struct wreq r;
    taken_tag = 0;
    wreq_init(&r, 3, 3000, "");
    struct xfer *x = submitted(&r);
    struct xfer_snapshot s = snap(x);
    c->breaks(x);
    xfer_start(x);
    ex_wait_told(a);
    assert_int_equal(a->status, c->want);
    if (strstr(a->detail, c->why) == NULL)
        fail_msg("%s: the detail \"%s\" does not say \"%s\"", c->name, a->detail, c->why);
    assert_int_equal(ex_sent_count(B10__PEER__MSG__BODY_CONTROL), c->control);
    assert_int_equal(ex_sent_count(B10__PEER__MSG__BODY_CANCEL), c->control);
    assert_int_equal(ex_quarantined(QUARANTINE_TAGS), c->tags);
    assert_int_equal(tags_is_quarantined(ex_d.tags, s.ready_tag), c->tags);
    if (taken_tag != 0) {
        assert_ptr_equal(tags_lookup(ex_d.tags, taken_tag), &taken_tag);
        tags_unregister(ex_d.tags, taken_tag);
    }
    assert_int_equal(tags_live(ex_d.tags), 0);
    assert_int_equal(ex_quarantined(QUARANTINE_VIEW), 0);
    ex_flush();
}

/* The link opens after the submit: CONTROL goes when it is up, and the WRITE lands. */
static void test_link_comes_up_later(void **state)
{
    struct wreq r;
    ex_use_status = B10_IN_PROGRESS;
    wreq_init(&r, 3, 3000, "");
    struct xfer *x = submitted(&r);
    xfer_start(x);
    assert_int_equal(x->state, XFER_WAIT_LINK);
    assert_int_equal(ex_nsent, 0);
    ex_link_up(&ex_node_b);
    assert_int_equal(x->state, XFER_WAIT_READY);
    assert_int_equal(ex_sent_count(B10__PEER__MSG__BODY_CONTROL), 1);
    assert_true(ex_run_until(parked, x));
    ex_reply_ready(tag(x, TAG_KIND_READY, 0), x->id);
    deliver_all(x);
    ex_reply_result(tag(x, TAG_KIND_RESULT, 0), x->id, B10_OK, "");
    ex_wait_told(a);
    assert_int_equal(a->status, B10_OK);
}

/* ---------------------------------------------------------------- deadlines */

enum stage { STAGE_LINK, STAGE_READY, STAGE_DATA };

struct deadline_case {
    const char *name;
    enum stage stage;
    const char *where;
};

static const struct deadline_case deadline_cases[] = {
    { "deadline waiting for the link", STAGE_LINK,
      "waiting for the link to the remote daemon (0 of 1 chunks sent): its door did not answer" },
    { "deadline waiting for READY", STAGE_READY, "waiting for READY" },
    { "deadline waiting for RESULT", STAGE_DATA, "waiting for DATA to be sent and RESULT (1 of 1" },
};

static bool cancel_sent(const void *arg)
{
    return ex_sent_count(B10__PEER__MSG__BODY_CANCEL) > 0;
}

/* The deadline's timer fails the transfer naming the stage it waited in. */
static void test_deadline(void **state)
{
    const struct deadline_case *c = *state;
    struct wreq r;
    wreq_init(&r, 3, 3000, "");
    if (c->stage == STAGE_LINK)
        ex_use_status = B10_IN_PROGRESS;
    struct xfer *x = submitted(&r);
    xfer_start(x);
    if (c->stage != STAGE_LINK)
        assert_true(ex_run_until(parked, x));
    struct xfer_snapshot s = snap(x);
    if (c->stage == STAGE_DATA) {
        ex_reply_ready(s.ready_tag, s.id);
        deliver_all(x);
    }
    ex_deadline_now(x);
    if (c->stage == STAGE_DATA) {
        /* DATA went out: the CANCEL asks for the receiver's RESULT, which the news waits for. */
        assert_true(ex_run_until(cancel_sent, NULL));
        assert_cancel(&s, B10_ERR_DEADLINE, true);
        assert_int_equal(a->told, 0);
        ex_reply_result(s.result_tag, s.id, B10_ERR_CANCELLED, "cancelled by the sender");
    }
    ex_wait_told(a);
    assert_int_equal(a->status, B10_ERR_DEADLINE);
    if (strstr(a->detail, c->where) == NULL)
        fail_msg("%s: the detail \"%s\" does not say \"%s\"", c->name, a->detail, c->where);
    ex_flush();
}

/* ---------------------------------------------------------------- admission, views */

/*
 * A peer whose failed transfers left more than --peer-quarantine-bytes in
 * the quarantine takes no new send; within it, it does.
 */
static void test_peer_quarantine_bound(void **state)
{
    struct wreq r;
    struct xfer *x = NULL;
    char detail[256];
    wreq_init(&r, 3, 3000, "");
    ex_node_b.quarantined = config_peer_quarantine(&ex_d.cfg) + 1;
    assert_int_equal(xfer_submit(&a->s, &r.m, NULL, NULL, &x, detail, sizeof(detail)),
                     B10_ERR_STAGING_EXHAUSTED);
    assert_null(x);
    assert_non_null(strstr(detail, "--peer-quarantine-bytes"));
    assert_int_equal(ex_d.nxfers, 0);
    ex_node_b.quarantined = config_peer_quarantine(&ex_d.cfg);
    assert_int_equal(xfer_submit(&a->s, &r.m, NULL, NULL, &x, detail, sizeof(detail)), B10_OK);
    xfer_cancel(x);
    ex_wait_told(a);
    assert_int_equal(a->status, B10_ERR_CANCELLED);
    ex_node_b.quarantined = 0;
}

static bool data_ops_out(const void *arg)
{
    unsigned n = 0;
    for (unsigned i = 0; i < ex_nops; i++)
        n += ex_ops[i].send && !ex_ops[i].done;
    return n > 0;
}

/*
 * A peer's share of the views (--max-peer-staging) bounds what its sends
 * hold: with room for one view, one chunk at a time is out, and the
 * transfer still lands, waiting for its own view to come back.
 */
static void test_peer_share_of_views(void **state)
{
    struct wreq r;
    ex_d.cfg.max_peer_staging = EX_VIEW;
    wreq_init(&r, 4, 60000, "");
    struct xfer *x = submitted(&r);
    xfer_start(x);
    ex_reply_ready(tag(x, TAG_KIND_READY, 0), x->id);
    for (uint32_t c = 0; c < 4; c++) {
        assert_true(ex_run_until(data_ops_out, NULL));
        assert_int_equal(ex_node_b.views_bytes, EX_VIEW);
        struct wire_op *op = ex_op_on(tag(x, TAG_KIND_DATA, c));
        assert_non_null(op);
        assert_data(x, op, c);
        assert_int_equal(c < 3, x->waiting);
        ex_complete(op, B10_OK, 0);
    }
    assert_int_equal(ex_node_b.views_bytes, 0);
    ex_reply_result(tag(x, TAG_KIND_RESULT, 0), x->id, B10_OK, "");
    ex_wait_told(a);
    assert_int_equal(a->status, B10_OK);
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
    log_setup(LOG_LEVEL_INFO, "test-xfer-send");
    CASES(test_write_lands, lands_cases);
    CASES(test_ready_refused, ready_cases);
    CASES(test_result, result_cases);
    CASES(test_failed_with_data_out, out_cases);
    CASES(test_data_fails, data_cases);
    CASES(test_link_up_refused, link_cases);
    CASES(test_deadline, deadline_cases);
    ONE(test_ready_that_does_not_open);
    ONE(test_ready_after_cancel);
    ONE(test_result_that_does_not_open);
    ONE(test_result_receive_failed);
    ONE(test_link_comes_up_later);
    ONE(test_peer_quarantine_bound);
    ONE(test_peer_share_of_views);
    assert_true(n <= sizeof(tests) / sizeof(tests[0]));
    return _cmocka_run_group_tests("xfer-send", tests, n, NULL, NULL);
}
