/*
 * test-ask.c — daemon/engine/ask.c: a rank's questions to a remote daemon
 * (Check, Notify) and the answers this daemon gives to another's.
 *
 * The answering side as a table: a row a rule of ask_admit_check and
 * ask_admit_notify (every refusal, and the cases they admit), each asked of
 * the decision and then of ask_on_check / ask_on_notify, whose Result on the
 * wire, counters and delivered notice are checked. The asking side from a
 * rank's request to the answer it gets: the question sent once the link is
 * up, the answer's tag registered before its receive, and every way an ask
 * ends (an answer, a forged or malformed one, the wire's error, the
 * timeout, the link lost, the rank gone), each answering the rank once.
 *
 * Ranks are tests/unit/ranks.h; below, the link and the wire are fakes
 * (-Wl,--wrap, the Makefile's): a message to the peer is recorded, a
 * receive posted is completed by the test, a message opens as plain
 * protobuf. Tags are real, on a real libuv loop.
 */
#include <time.h>

#include "ranks.h"

#include "ask.h"
#include "frame.h"
#include "log.h"
#include "peer.pb-c.h"
#include "tags.h"
#include "wire.h"

#define GEN 7                       /* the peer's link to us; ours to it is GEN + 1 */
#define REGION (64u << 10)          /* decode-0's memory, closed; then as much open */

static uv_loop_t loop;
static struct b10d d;
static struct peer peer;            /* the remote daemon, "node-s" */
static struct peer self;            /* this daemon's own entry: local ranks come by it */
static struct session rank;         /* "decode-0", uid 1000 */
static struct session asker;        /* "prefill-0", uid 1000: asks the remote daemon */
static uint8_t *mem;

/* ---------------------------------------------------------------- the link and the wire, faked */

struct result {
    struct peer *peer;
    uint64_t gen, id;
    b10_status_t status;
    char detail[256];
};
static struct result results[8];
static unsigned nresults;

void __wrap_peer_send_result(struct peer *p, uint64_t gen, uint64_t id, b10_status_t status,
                             const char *detail);
void __wrap_peer_send_result(struct peer *p, uint64_t gen, uint64_t id, b10_status_t status,
                             const char *detail)
{
    assert_true(nresults < 8);
    results[nresults] = (struct result){ p, gen, id, status, "" };
    snprintf(results[nresults].detail, sizeof(results[nresults].detail), "%s", detail);
    nresults++;
}

/* The questions sent: the last one, opened. */
static unsigned questions;
static uint64_t question_tag, question_gen;
static B10__Peer__Msg *question;
static b10_status_t send_status;     /* what peer_send_packed returns */

b10_status_t __wrap_peer_send_packed(struct peer *p, uint64_t gen, uint64_t tag,
                                     const uint8_t *payload, size_t length);
b10_status_t __wrap_peer_send_packed(struct peer *p, uint64_t gen, uint64_t tag,
                                     const uint8_t *payload, size_t length)
{
    assert_ptr_equal(p, &peer);
    questions++;
    question_tag = tag;
    question_gen = gen;
    if (question != NULL)
        b10__peer__msg__free_unpacked(question, NULL);
    question = b10__peer__msg__unpack(NULL, length, payload);
    assert_non_null(question);
    return send_status;
}

static b10_status_t link_status;     /* what peer_ensure_link returns */

b10_status_t __wrap_peer_ensure_link(struct peer *p);
b10_status_t __wrap_peer_ensure_link(struct peer *p)
{
    return link_status;
}

/* The link's keys are not this room's: a message opens as plain protobuf, one of 0xff as forged. */
b10_status_t __wrap_peer_open(struct peer *p, uint64_t gen, const uint8_t *buf, size_t length,
                              B10__Peer__Msg **msg_p);
b10_status_t __wrap_peer_open(struct peer *p, uint64_t gen, const uint8_t *buf, size_t length,
                              B10__Peer__Msg **msg_p)
{
    assert_int_equal(gen, peer.out.tags.gen);
    if (length > 0 && buf[0] == 0xff)
        return B10_ERR_UNAUTHENTICATED;
    *msg_p = b10__peer__msg__unpack(NULL, length, buf);
    return *msg_p != NULL ? B10_OK : B10_ERR_PEER_PROTOCOL;
}

/* The answer's receive: one at a time. */
static struct {
    bool live, cancelled;
    uint64_t tag;
    uint8_t *buf;
    size_t length;
    wire_done_cb *cb;
    void *arg;
} op;
static bool refuse_posts;

b10_status_t __wrap_wire_recv(struct wire *wire, const struct wire_ep *by, uint64_t tag, void *buf,
                              size_t length, void *memh, wire_done_cb *cb, void *arg,
                              struct wire_op **op_p);
b10_status_t __wrap_wire_recv(struct wire *wire, const struct wire_ep *by, uint64_t tag, void *buf,
                              size_t length, void *memh, wire_done_cb *cb, void *arg,
                              struct wire_op **op_p)
{
    if (refuse_posts)
        return B10_ERR_INTERNAL;
    assert_false(op.live);
    op.live = true;
    op.cancelled = false;
    op.tag = tag;
    op.buf = buf;
    op.length = length;
    op.cb = cb;
    op.arg = arg;
    *op_p = (struct wire_op *)&op;
    return B10_OK;
}

void __wrap_wire_cancel(struct wire *w, struct wire_op *o);
void __wrap_wire_cancel(struct wire *w, struct wire_op *o)
{
    if (o == NULL)
        return;
    assert_ptr_equal(o, &op);
    assert_true(op.live);
    op.cancelled = true;
}

static void complete(b10_status_t status, size_t length)
{
    assert_true(op.live);
    op.live = false;
    op.cb(op.arg, status, length);
}

/* The answering daemon's Result for id, into the posted receive (forged: one that does not open). */
static void answer(uint64_t id, b10_status_t status, const char *detail, bool forged)
{
    B10__Peer__Result result = B10__PEER__RESULT__INIT;
    B10__Peer__Msg msg = B10__PEER__MSG__INIT;
    result.xfer_id = id;
    result.status = (B10__Status)status;
    result.detail = (char *)detail;
    msg.body_case = B10__PEER__MSG__BODY_RESULT;
    msg.result = &result;
    size_t length = b10__peer__msg__get_packed_size(&msg);
    assert_true(op.live);
    assert_true(length <= op.length);
    b10__peer__msg__pack(&msg, op.buf);
    if (forged)
        op.buf[0] = 0xff;
    complete(B10_OK, length);
}

/* ---------------------------------------------------------------- fixture */

static uint64_t fake_now_ms(struct b10d *dd)
{
    return uv_now(&loop);
}

static int setup(void **state)
{
    assert_int_equal(uv_loop_init(&loop), 0);
    memset(&d, 0, sizeof(d));
    config_defaults(&d.cfg);
    snprintf(d.cfg.name, sizeof(d.cfg.name), "node-r");
    d.daemon_id = 0xd00d;
    d.loop = &loop;
    d.now_ms = fake_now_ms;
    d.rank_ops = &rk_ops;
    ids_init(&d.ids, (const uint64_t[IDS_SEED_WORDS]){ 0x1234, 1, 2 });
    assert_non_null(d.tags = tags_create(1024, 0));

    memset(results, 0, sizeof(results));
    nresults = questions = 0;
    question_tag = question_gen = 0;
    send_status = B10_OK;
    link_status = B10_OK;
    refuse_posts = false;
    memset(&op, 0, sizeof(op));

    rk_reset();
    rk_peer_init(&peer, &d, "node-s", 0x5e, GEN);
    rk_peer_init(&self, &d, "node-r", 0xd00d, GEN + 10);
    rk_init(&rank, &d, "decode-0", 1000);
    rk_region(&rank, 1, mem, REGION, false);
    rk_region(&rank, 2, mem + REGION, REGION, true);
    rk_init(&asker, &d, "prefill-0", 1000);
    rk_hold_name("prefill-1", 1001);       /* a rank of this node, of another user */
    return 0;
}

static int teardown(void **state)
{
    /* Asks still waiting end as the rank leaving ends them; the loop closes their timers. */
    while (!list_empty(&asker.asks))
        ask_detach(list_entry(asker.asks.next, struct ask, session_node));
    if (op.live && op.cancelled)
        complete(B10_ERR_CANCELLED, 0);
    assert_false(op.live);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
    assert_int_equal(peer.holds, 0);        /* every ask let its peer go */
    tags_destroy(d.tags);
    rk_free(&rank);
    rk_free(&asker);
    if (question != NULL)
        b10__peer__msg__free_unpacked(question, NULL);
    question = NULL;
    return 0;
}

/* ---------------------------------------------------------------- answering: the table */

/* A request as the remote daemon sends it: a Check or a Notify, and its spans. */
struct req {
    B10__Peer__Check check;
    B10__Peer__Notify notify;
    uint8_t spans[16 * 4];
};

static void req_init(struct req *r)
{
    b10__peer__check__init(&r->check);
    b10__peer__notify__init(&r->notify);
    /* One span of 4 KiB at the start of decode-0's closed region, from prefill-0 of node-s. */
    frame_put_u64(r->spans, (uintptr_t)mem);
    frame_put_u64(r->spans + 8, 4096);
    r->check.check_id = 0xc1;
    r->check.dst_agent = "decode-0";
    r->check.src_agent = "prefill-0";
    r->check.spans = (ProtobufCBinaryData){ 16, r->spans };
    r->notify.notify_id = 0xa1;
    r->notify.dst_agent = "decode-0";
    r->notify.src_agent = "prefill-0";
    r->notify.message = (ProtobufCBinaryData){ 5, (uint8_t *)"hello" };
}

struct row {
    const char *name;
    bool notify;                    /* a Notify; else a Check */
    void (*arrange)(struct req *r);
    enum ask_why why;
    b10_status_t status;
    const char *says;
    bool local;                     /* from a rank of this node (by self) */
};

static void as_is(struct req *r)
{
}

static void in_open_region(struct req *r)
{
    frame_put_u64(r->spans, (uintptr_t)mem + REGION);
    r->check.src_agent = "prefill-1";
    r->notify.src_agent = "prefill-1";
}

static void local_other_uid(struct req *r)
{
    r->check.src_agent = "prefill-1";
    r->notify.src_agent = "prefill-1";
}

/* decode-0 paired with prefill-1, of uid 1001, and granted it to write. */
static void local_paired(struct req *r)
{
    struct remote_agent *a = rk_pair(&rank, "prefill-1", &self, B10_GRANT_WRITE);
    a->uid_known = true;
    a->uid = 1001;
    local_other_uid(r);
}

static void unpaired(struct req *r)
{
    d.cfg.remote_access = CONFIG_REMOTE_PAIRED;
}

static void no_such_rank(struct req *r)
{
    r->check.dst_agent = "nobody";
    r->notify.dst_agent = "nobody";
}

static void other_uid(struct req *r)
{
    r->check.dst_uid_known = r->notify.dst_uid_known = true;
    r->check.dst_uid = r->notify.dst_uid = 1001;
}

static void same_uid(struct req *r)
{
    r->check.dst_uid_known = r->notify.dst_uid_known = true;
    r->check.dst_uid = r->notify.dst_uid = 1000;
}

static void spans_not_whole(struct req *r)
{
    r->check.spans.len = 15;
}

static void no_spans(struct req *r)
{
    r->check.spans.len = 0;
}

static void too_many_spans(struct req *r)
{
    d.cfg.max_spans = 3;
    r->check.spans.len = 64;
    for (int i = 1; i < 4; i++) {
        frame_put_u64(r->spans + 16 * i, (uintptr_t)mem + 4096 * i);
        frame_put_u64(r->spans + 16 * i + 8, 4096);
    }
}

static void no_sender(struct req *r)
{
    r->check.src_agent = "";
    r->notify.src_agent = "";
}

static void long_sender(struct req *r)
{
    static char name[300];
    memset(name, 'a', sizeof(name) - 1);
    r->check.src_agent = name;
    r->notify.src_agent = name;
}

static void outside(struct req *r)
{
    frame_put_u64(r->spans, (uintptr_t)mem + 2 * REGION);
}

static void empty_span(struct req *r)
{
    frame_put_u64(r->spans + 8, 0);
}

static void wrapping_span(struct req *r)
{
    frame_put_u64(r->spans, UINT64_MAX - 100);
}

static void second_span_outside(struct req *r)
{
    r->check.spans.len = 32;
    frame_put_u64(r->spans + 16, (uintptr_t)mem + 2 * REGION - 100);
    frame_put_u64(r->spans + 24, 200);
}

static void message_too_long(struct req *r)
{
    static uint8_t message[B10_SYNC_MSG_MAX + 1];
    r->notify.message = (ProtobufCBinaryData){ sizeof(message), message };
}

static void notices_full(struct req *r)
{
    rank.notice_reserved = d.cfg.max_notice_bytes - 4;
}

static const struct row rows[] = {
    /* Check */
    { "a span inside the registrations", false, as_is, ASK_ADMIT, B10_OK, "", false },
    { "the descriptor's uid, still the name's", false, same_uid, ASK_ADMIT, B10_OK, "", false },
    { "a local rank of another uid, an open region", false, in_open_region, ASK_ADMIT, B10_OK, "",
      true },
    { "no such rank", false, no_such_rank, ASK_NO_RANK, B10_ERR_UNKNOWN_AGENT,
      "no rank named 'nobody' on the remote node", false },
    { "the name held by another uid", false, other_uid, ASK_WRONG_UID, B10_ERR_UNKNOWN_AGENT,
      "is not of the user whose descriptor was loaded (uid 1001)", false },
    { "spans not whole", false, spans_not_whole, ASK_MALFORMED, B10_ERR_PEER_PROTOCOL,
      "malformed check", false },
    { "no spans", false, no_spans, ASK_MALFORMED, B10_ERR_PEER_PROTOCOL, "malformed check",
      false },
    { "more spans than --max-spans", false, too_many_spans, ASK_MALFORMED, B10_ERR_PEER_PROTOCOL,
      "malformed check", false },
    { "no asking rank", false, no_sender, ASK_MALFORMED, B10_ERR_PEER_PROTOCOL, "malformed check",
      false },
    { "an asking rank's name of 299 bytes", false, long_sender, ASK_MALFORMED,
      B10_ERR_PEER_PROTOCOL, "malformed check", false },
    { "unpaired, --remote-access paired", false, unpaired, ASK_NOT_GRANTED, B10_ERR_PERMISSION,
      "has not paired with 'prefill-0' of daemon node-s", false },
    { "a local rank of another uid, a closed region", false, local_other_uid, ASK_NOT_GRANTED,
      B10_ERR_PERMISSION, "is not wholly in regions it opened to the node", true },
    { "a span outside the registrations", false, outside, ASK_OUTSIDE_MEM, B10_ERR_REMOTE_REJECTED,
      "span 0 (0x", false },
    { "a span of no bytes", false, empty_span, ASK_OUTSIDE_MEM, B10_ERR_REMOTE_REJECTED,
      "+0) lies outside decode-0's registered memory", false },
    { "a span past the top of the address space", false, wrapping_span, ASK_OUTSIDE_MEM,
      B10_ERR_REMOTE_REJECTED, "lies outside decode-0's registered memory", false },
    { "the second span across the end", false, second_span_outside, ASK_OUTSIDE_MEM,
      B10_ERR_REMOTE_REJECTED, "span 1 (0x", false },
    /* Notify */
    { "a notice with room for it", true, as_is, ASK_ADMIT, B10_OK, "", false },
    { "a notice of a local rank that paired and granted", true, local_paired, ASK_ADMIT, B10_OK,
      "", true },
    { "a notice past B10_SYNC_MSG_MAX", true, message_too_long, ASK_MALFORMED,
      B10_ERR_PEER_PROTOCOL, "malformed notify", false },
    { "a sending rank's name of 299 bytes", true, long_sender, ASK_MALFORMED,
      B10_ERR_PEER_PROTOCOL, "malformed notify", false },
    { "a notice for no such rank", true, no_such_rank, ASK_NO_RANK, B10_ERR_UNKNOWN_AGENT,
      "no rank named 'nobody' on the remote node", false },
    { "a notice for a name another uid holds", true, other_uid, ASK_WRONG_UID,
      B10_ERR_UNKNOWN_AGENT, "is not of the user whose descriptor was loaded", false },
    { "a notice of no sending rank", true, no_sender, ASK_NOT_GRANTED, B10_ERR_PERMISSION,
      "a notice names no sending rank", false },
    { "a notice, unpaired, --remote-access paired", true, unpaired, ASK_NOT_GRANTED,
      B10_ERR_PERMISSION, "has not paired with 'prefill-0'", false },
    { "a notice of a local rank of another uid", true, local_other_uid, ASK_NOT_GRANTED,
      B10_ERR_PERMISSION, "needs its grant of a notice (B10_GRANT_WRITE)", true },
    { "the target's notices full", true, notices_full, ASK_NOTICES_FULL, B10_ERR_BUSY,
      "notices for 'decode-0' wait unread (--max-notice-bytes)", false },
};

static void check_row(const struct row *row)
{
    struct req r;
    struct ask_verdict v;
    struct peer *by = row->local ? &self : &peer;

    req_init(&r);
    row->arrange(&r);
    struct stats before = d.stats;
    struct peer_counters counted = by->counters;
    b10_status_t st = row->notify ? ask_admit_notify(by, &r.notify, &v)
                                  : ask_admit_check(by, &r.check, &v);
    if (st != row->status || v.status != st || v.why != row->why ||
        strstr(v.detail, row->says) == NULL)
        fail_msg("%s: status %s, rule %d, detail \"%s\"; expected %s, rule %d, \"%s\"", row->name,
                 b10_status_name(st), v.why, v.detail, b10_status_name(row->status), row->why,
                 row->says);
    if (st == B10_OK)
        assert_ptr_equal(v.target, &rank);
    /* Deciding answers no one and tells no rank. */
    assert_memory_equal(&d.stats, &before, sizeof(before));
    assert_memory_equal(&by->counters, &counted, sizeof(counted));
    assert_int_equal(nresults, 0);
    assert_int_equal(rk_told.notices, 0);
}

static void answer_row(const struct row *row)
{
    struct req r;
    struct peer *by = row->local ? &self : &peer;

    req_init(&r);
    row->arrange(&r);
    uint64_t protocol_errors = d.stats.peer_protocol_errors;
    uint64_t refused = by->counters.refused;
    if (row->notify)
        ask_on_notify(by, &r.notify);
    else
        ask_on_check(by, &r.check);
    assert_int_equal(nresults, 1);
    assert_ptr_equal(results[0].peer, by);
    assert_int_equal(results[0].gen, by->in.tags.gen);
    assert_int_equal(results[0].id, row->notify ? 0xa1 : 0xc1);
    if (results[0].status != row->status || strstr(results[0].detail, row->says) == NULL)
        fail_msg("%s: Result %s \"%s\"", row->name, b10_status_name(results[0].status),
                 results[0].detail);
    if (row->status == B10_OK)
        assert_string_equal(results[0].detail, "");
    assert_int_equal(d.stats.peer_protocol_errors,
                     protocol_errors + (row->status == B10_ERR_PEER_PROTOCOL));
    assert_int_equal(by->counters.refused, refused + (row->why == ASK_NOTICES_FULL));
    /* A notice is delivered when, and only when, it is answered OK. */
    if (row->notify && row->status == B10_OK) {
        assert_int_equal(rk_told.notices, 1);
        assert_ptr_equal(rk_told.notice_to, &rank);
        assert_string_equal(rk_told.notice_from, r.notify.src_agent);
        assert_int_equal(rk_told.notice_length, 5);
        assert_memory_equal(rk_told.notice, "hello", 5);
    } else {
        assert_int_equal(rk_told.notices, 0);
    }
}

static void test_answer_table(void **state)
{
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        setup(state);
        check_row(&rows[i]);
        teardown(state);
        setup(state);
        answer_row(&rows[i]);
        teardown(state);
    }
}

/* Every rule has a row of each kind it applies to. */
static void test_table_covers_every_rule(void **state)
{
    bool seen[2][ASK_NOTICES_FULL + 1] = { { false } };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        seen[rows[i].notify][rows[i].why] = true;
    for (int why = ASK_ADMIT; why <= ASK_NOTICES_FULL; why++) {
        if (why != ASK_NOTICES_FULL && !seen[0][why])
            fail_msg("no Check row for rule %d", why);
        if (why != ASK_OUTSIDE_MEM && !seen[1][why])
            fail_msg("no Notify row for rule %d", why);
    }
}

/* ---------------------------------------------------------------- asking */

static uint64_t asked_id;           /* the ask's id, from the question sent */

/* prefill-0 asks decode-0 of node-s (loaded, granted nothing: asking needs no grant). */
static void loaded(void)
{
    rk_pair(&asker, "decode-0", &peer, 0);
}

static b10_status_t ask_check_of(size_t nspans, uint64_t seq, char *detail, size_t detail_len)
{
    uint8_t spans[16 * 4];
    for (size_t i = 0; i < 4; i++) {
        frame_put_u64(spans + 16 * i, 0x1000 * (i + 1));
        frame_put_u64(spans + 16 * i + 8, 0x100);
    }
    return ask_check(&asker, seq, "decode-0", spans, nspans * 16, detail, detail_len);
}

/* The question went out on our link's control tag, its answer's receive posted first. */
static void question_sent(B10__Peer__Msg__BodyCase body)
{
    assert_int_equal(questions, 1);
    assert_int_equal(question_gen, peer.out.tags.gen);
    assert_int_equal(question_tag, tags_derive(&peer.out.tags, 0, 0, TAG_KIND_CONTROL));
    assert_int_equal(question->body_case, body);
    asked_id = body == B10__PEER__MSG__BODY_CHECK ? question->check->check_id
                                                  : question->notify->notify_id;
    uint64_t tag = tags_derive(&peer.out.tags, asked_id, 0, TAG_KIND_RESULT);
    assert_true(op.live);
    assert_int_equal(op.tag, tag);
    assert_non_null(tags_lookup(d.tags, tag));
}

/* The rank heard of its request seq, once: status and a piece of the detail. */
static void rank_heard(uint64_t seq, b10_status_t status, const char *says)
{
    assert_int_equal(rk_told.answers, 1);
    assert_int_equal(rk_told.answer_seq, seq);
    if (rk_told.answer_status != status || strstr(rk_told.answer_detail, says) == NULL)
        fail_msg("answered %s \"%s\", expected %s \"%s\"", b10_status_name(rk_told.answer_status),
                 rk_told.answer_detail, b10_status_name(status), says);
}

/* What a rank may ask is checked before anything is sent. */
static void test_asking_refused_at_once(void **state)
{
    char detail[256];
    static uint8_t message[B10_SYNC_MSG_MAX + 1];

    assert_int_equal(ask_check_of(1, 1, detail, sizeof(detail)), B10_ERR_UNKNOWN_AGENT);
    loaded();
    assert_int_equal(ask_check_of(0, 1, detail, sizeof(detail)), B10_ERR_INVALID_ARG);
    assert_string_equal(detail, "a check needs 1..1048576 spans of 16 bytes");
    assert_int_equal(ask_check(&asker, 1, "decode-0", message, 17, detail, sizeof(detail)),
                     B10_ERR_INVALID_ARG);
    d.cfg.max_spans = 3;
    assert_int_equal(ask_check_of(4, 1, detail, sizeof(detail)), B10_ERR_INVALID_ARG);
    assert_int_equal(ask_notify(&asker, 1, "decode-0", message, sizeof(message), detail,
                                sizeof(detail)), B10_ERR_TOO_LARGE);
    assert_string_equal(detail, "a sync message holds at most 65536 bytes");
    assert_int_equal(questions, 0);
    assert_int_equal(tags_live(d.tags), 0);
    /* The allowed case, on the same rank: asked, answered later. */
    assert_int_equal(ask_check_of(3, 1, detail, sizeof(detail)), B10_IN_PROGRESS);
    question_sent(B10__PEER__MSG__BODY_CHECK);
    assert_int_equal(question->check->spans.len, 48);
    assert_string_equal(question->check->src_agent, "prefill-0");
    assert_string_equal(question->check->dst_agent, "decode-0");
    assert_int_equal(rk_told.answers, 0);
}

/* A Check answered: the rank hears the remote daemon's answer, the answer's tag is let go. */
static void test_check_answered(void **state)
{
    char detail[256];
    loaded();
    assert_int_equal(ask_check_of(2, 41, detail, sizeof(detail)), B10_IN_PROGRESS);
    question_sent(B10__PEER__MSG__BODY_CHECK);
    answer(asked_id, B10_ERR_REMOTE_REJECTED, "span 1 lies outside", false);
    rank_heard(41, B10_ERR_REMOTE_REJECTED, "span 1 lies outside");
    assert_int_equal(tags_live(d.tags), 0);
    assert_int_equal(tags_quarantined(d.tags), 0);
}

/* A Notify delivered; an answer that does not open is dropped and the real one awaited. */
static void test_notify_answered_through_a_forgery(void **state)
{
    char detail[256];
    loaded();
    assert_int_equal(ask_notify(&asker, 42, "decode-0", (const uint8_t *)"hi", 2, detail,
                                sizeof(detail)), B10_IN_PROGRESS);
    question_sent(B10__PEER__MSG__BODY_NOTIFY);
    assert_int_equal(question->notify->message.len, 2);
    answer(asked_id, B10_ERR_PERMISSION, "forged", true);
    assert_int_equal(rk_told.answers, 0);
    assert_true(op.live);                   /* posted again */
    answer(asked_id, B10_OK, "", false);
    rank_heard(42, B10_OK, "");
    assert_int_equal(tags_live(d.tags), 0);
}

/* Answers the remote daemon may not give: another id, another message, a status of no name. */
static void test_malformed_answers(void **state)
{
    char detail[256];
    static const b10_status_t odd[] = { (b10_status_t)9999, B10_IN_PROGRESS };
    loaded();
    assert_int_equal(ask_check_of(1, 50, detail, sizeof(detail)), B10_IN_PROGRESS);
    question_sent(B10__PEER__MSG__BODY_CHECK);
    answer(asked_id + 1, B10_OK, "", false);
    rank_heard(50, B10_ERR_PEER_PROTOCOL, "malformed answer from the remote daemon");
    assert_int_equal(d.stats.peer_protocol_errors, 1);
    for (unsigned i = 0; i < 2; i++) {
        memset(&rk_told, 0, sizeof(rk_told));
        questions = 0;
        assert_int_equal(ask_check_of(1, 51 + i, detail, sizeof(detail)), B10_IN_PROGRESS);
        question_sent(B10__PEER__MSG__BODY_CHECK);
        answer(asked_id, odd[i], "", false);
        rank_heard(51 + i, B10_ERR_PEER_PROTOCOL, "answered with an unknown status");
    }
    /* Bytes that open and are no message at all. */
    memset(&rk_told, 0, sizeof(rk_told));
    questions = 0;
    assert_int_equal(ask_check_of(1, 53, detail, sizeof(detail)), B10_IN_PROGRESS);
    question_sent(B10__PEER__MSG__BODY_CHECK);
    memset(op.buf, 0x01, 8);
    complete(B10_OK, 8);
    rank_heard(53, B10_ERR_PEER_PROTOCOL, "malformed answer");
    assert_int_equal(d.stats.peer_protocol_errors, 2);
    assert_int_equal(tags_live(d.tags), 0);
}

/* The wire fails the answer's receive: the rank hears why. */
static void test_answer_lost_on_the_wire(void **state)
{
    char detail[256];
    loaded();
    assert_int_equal(ask_check_of(1, 60, detail, sizeof(detail)), B10_IN_PROGRESS);
    question_sent(B10__PEER__MSG__BODY_CHECK);
    complete(B10_ERR_PEER_LOST, 0);
    rank_heard(60, B10_ERR_PEER_LOST, "waiting for the answer");
}

static bool answered(void)
{
    return rk_told.answers > 0;
}

/* No answer within twice --connect-timeout-ms: unreachable; the answer's tag matches nothing again. */
static void test_no_answer_in_time(void **state)
{
    char detail[256];
    d.cfg.connect_timeout_ms = 1;
    loaded();
    assert_int_equal(ask_check_of(1, 70, detail, sizeof(detail)), B10_IN_PROGRESS);
    question_sent(B10__PEER__MSG__BODY_CHECK);
    uint64_t tag = tags_derive(&peer.out.tags, asked_id, 0, TAG_KIND_RESULT);
    for (uint64_t end = uv_hrtime() + UINT64_C(30000000000); !answered() && uv_hrtime() < end;)
        uv_run(&loop, UV_RUN_ONCE);
    rank_heard(70, B10_ERR_PEER_UNREACHABLE, "did not answer within 2 ms");
    /* Its receive may still complete: the tag is quarantined, not free. */
    assert_true(tags_is_quarantined(d.tags, tag));
    assert_true(op.cancelled);
    complete(B10_ERR_CANCELLED, 0);
    assert_int_equal(rk_told.answers, 1);
}

/* The link is still opening: the question waits for it, then goes. */
static void test_asked_once_the_link_is_up(void **state)
{
    char detail[256];
    loaded();
    link_status = B10_IN_PROGRESS;
    assert_int_equal(ask_check_of(1, 80, detail, sizeof(detail)), B10_IN_PROGRESS);
    assert_int_equal(questions, 0);
    assert_false(op.live);
    assert_false(list_empty(&peer.asks));
    struct link_user *u = list_entry(peer.asks.next, struct link_user, node);
    assert_true(u->unsent);
    u->ops->up(u);
    question_sent(B10__PEER__MSG__BODY_CHECK);
    assert_false(u->unsent);
    answer(asked_id, B10_OK, "", false);
    rank_heard(80, B10_OK, "");
}

/* The link is lost while the question waits for its answer: the rank hears the link's reason. */
static void test_link_lost(void **state)
{
    char detail[256];
    loaded();
    assert_int_equal(ask_check_of(1, 90, detail, sizeof(detail)), B10_IN_PROGRESS);
    question_sent(B10__PEER__MSG__BODY_CHECK);
    struct link_user *u = list_entry(peer.asks.next, struct link_user, node);
    u->ops->lost(u, B10_ERR_PEER_LOST, "the endpoint failed");
    rank_heard(90, B10_ERR_PEER_LOST, "the endpoint failed");
    assert_true(list_empty(&peer.asks));
}

/* The remote daemon cannot be reached at all. */
static void test_unreachable(void **state)
{
    char detail[256];
    loaded();
    link_status = B10_ERR_PEER_UNREACHABLE;
    assert_int_equal(ask_check_of(1, 91, detail, sizeof(detail)), B10_IN_PROGRESS);
    rank_heard(91, B10_ERR_PEER_UNREACHABLE, "cannot reach the remote daemon");
    assert_int_equal(questions, 0);
}

/* The rank leaves before the answer: nobody is answered, the tag sits out its quarantine. */
static void test_rank_leaves(void **state)
{
    char detail[256];
    loaded();
    assert_int_equal(ask_check_of(1, 92, detail, sizeof(detail)), B10_IN_PROGRESS);
    question_sent(B10__PEER__MSG__BODY_CHECK);
    ask_detach(list_entry(asker.asks.next, struct ask, session_node));
    assert_int_equal(rk_told.answers, 0);
    assert_true(tags_is_quarantined(d.tags, tags_derive(&peer.out.tags, asked_id, 0,
                                                        TAG_KIND_RESULT)));
}

/* The question cannot be sent, or its answer's receive not posted, or its tag not registered. */
static void test_cannot_ask(void **state)
{
    char detail[256];
    loaded();
    send_status = B10_ERR_PEER_LOST;
    assert_int_equal(ask_check_of(1, 93, detail, sizeof(detail)), B10_IN_PROGRESS);
    rank_heard(93, B10_ERR_PEER_LOST, "sending the question failed");
    complete(B10_ERR_CANCELLED, 0);

    memset(&rk_told, 0, sizeof(rk_told));
    send_status = B10_OK;
    refuse_posts = true;
    assert_int_equal(ask_check_of(1, 94, detail, sizeof(detail)), B10_IN_PROGRESS);
    rank_heard(94, B10_ERR_INTERNAL, "posting the answer's receive failed");

    /* A registry with no room left: the answer's tag cannot be registered. */
    memset(&rk_told, 0, sizeof(rk_told));
    refuse_posts = false;
    struct tags *full = tags_create(1, 0);
    int owner;
    assert_non_null(full);
    for (uint64_t t = 1; tags_register(full, t, &owner) == B10_OK; t++)
        ;
    struct tags *kept = d.tags;
    d.tags = full;
    assert_int_equal(ask_check_of(1, 95, detail, sizeof(detail)), B10_IN_PROGRESS);
    rank_heard(95, B10_ERR_BUSY, "the answer's tag");
    d.tags = kept;
    tags_destroy(full);
    assert_int_equal(questions, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_covers_every_rule),
        cmocka_unit_test(test_answer_table),
        cmocka_unit_test_setup_teardown(test_asking_refused_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_answered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_notify_answered_through_a_forgery, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answer_lost_on_the_wire, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_answer_in_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_asked_once_the_link_is_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_link_lost, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unreachable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rank_leaves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cannot_ask, setup, teardown),
    };
    log_setup(LOG_LEVEL_ERR, "test-ask");
    mem = aligned_alloc(4096, 2 * REGION);
    assert_non_null(mem);
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    free(mem);
    return failed;
}
