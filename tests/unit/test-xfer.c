/*
 * test-xfer.c — daemon/engine/xfer.c: the failure funnel and quiescence.
 *
 * The doctrine in one room: a transfer's failure is reported once, and only
 * once nothing can still write for it; past --settle-ms it is reported
 * B10_ERR_UNSETTLED instead; every failure retires its id into the
 * quarantine. The transfers here are a rank's READ and local transfers, on a
 * real libuv loop with real timers; what lies above the engine is the
 * rank_ops table the engine reaches ranks through (rank.h), here a recorder,
 * and below it the wire and the quarantine, seen through -Wl,--wrap. A
 * staging pool is real, its views registered with no UCX.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "b10d.h"
#include "frame.h"
#include "plan.h"
#include "quarantine.h"
#include "rank.h"
#include "session.h"
#include "staging.h"
#include "tags.h"
#include "xfer-int.h"

static uv_loop_t test_loop;
static struct b10d test_d;
static struct session rank;         /* the submitting rank: a handle, as the engine holds it */
static uint64_t clock_ms;

/* ---------------------------------------------------------------- what lies above: ranks */

struct told {
    unsigned calls;
    b10_status_t status;            /* the transfer's status when its rank heard of it */
    char detail[512];
};
static struct told told;

static void fake_xfer_done(struct session *s, const struct xfer *x)
{
    assert_ptr_equal(s, &rank);
    told.calls++;
    told.status = x->status;
    snprintf(told.detail, sizeof(told.detail), "%s", x->detail);
}

static const struct rank_ops recorder = {
    .xfer_done = fake_xfer_done,
};

/* ---------------------------------------------------------------- what lies below */

static unsigned retired_ids;        /* QUARANTINE_XFER_ID entries */
static unsigned tag_quarantines;        /* tags_quarantine calls */
static uint64_t quarantined_tag_count;  /* the QUARANTINE_TAGS entry's count */
static uint64_t quarantined_until_ms;
static unsigned quarantined_other;
static b10_status_t retired_status;

void __wrap_quarantine_add(struct quarantine *q, enum quarantine_kind kind, uint64_t id,
                           uint64_t bytes, b10_status_t status, uint64_t xfer_id,
                           uint64_t peer_id, struct view *view, uint64_t *charge);
void __wrap_quarantine_add(struct quarantine *q, enum quarantine_kind kind, uint64_t id,
                           uint64_t bytes, b10_status_t status, uint64_t xfer_id,
                           uint64_t peer_id, struct view *view, uint64_t *charge)
{
    if (kind == QUARANTINE_XFER_ID) {
        assert_int_equal(id, xfer_id);
        retired_ids++;
        retired_status = status;
    } else {
        if (kind == QUARANTINE_TAGS)
            quarantined_tag_count = bytes;
        quarantined_other++;
    }
}

void __wrap_tags_quarantine(struct tags *tags, uint64_t tag, uint64_t expires_ms, uint64_t from);
void __wrap_tags_quarantine(struct tags *tags, uint64_t tag, uint64_t expires_ms, uint64_t from)
{
    tag_quarantines++;
    quarantined_until_ms = expires_ms;
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

void __wrap_wire_cancel(struct wire *w, struct wire_op *op);
void __wrap_wire_cancel(struct wire *w, struct wire_op *op)
{
    assert_null(op);                /* these transfers posted nothing on the wire */
}

/* ---------------------------------------------------------------- fixture */

static uint64_t fake_now_ms(struct b10d *d)
{
    return clock_ms;
}

static int setup(void **state)
{
    assert_int_equal(uv_loop_init(&test_loop), 0);
    memset(&test_d, 0, sizeof(test_d));
    config_defaults(&test_d.cfg);
    test_d.loop = &test_loop;
    test_d.now_ms = fake_now_ms;
    test_d.rank_ops = &recorder;
    list_init(&test_d.xfers);
    list_init(&test_d.settling);
    list_init(&test_d.ahead_parked);
    ids_init(&test_d.ids, (const uint64_t[IDS_SEED_WORDS]){ 0x1234, 1, 2 });
    memset(&rank, 0, sizeof(rank));
    memset(&told, 0, sizeof(told));
    retired_ids = quarantined_other = tag_quarantines = 0;
    quarantined_tag_count = quarantined_until_ms = 0;
    clock_ms = 0;
    retired_status = B10_OK;
    return 0;
}

static int teardown(void **state)
{
    /* Every transfer freed: its timer closed, nothing left on the loop. */
    assert_int_equal(uv_run(&test_loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(test_d.nxfers, 0);
    assert_true(list_empty(&test_d.settling));
    assert_int_equal(uv_loop_close(&test_loop), 0);
    return 0;
}

/* A transfer of rank's, as xfer_new_submitted makes one, with a one-chunk plan. */
static struct xfer *new_xfer(enum xfer_role role, uint32_t budget_ms)
{
    struct xfer *x = xfer_new(&test_d, role, ids_new_xfer(&test_d.ids), budget_ms);
    assert_non_null(x);
    x->plan = calloc(1, sizeof(*x->plan));
    assert_non_null(x->plan);
    x->plan->nchunks = 1;
    x->plan->total = 4096;
    x->session = &rank;
    rank.nxfers++;
    x->state = XFER_RUNNING;
    snprintf(x->remote_agent, sizeof(x->remote_agent), "decode-0");
    snprintf(x->local_agent, sizeof(x->local_agent), "prefill-0");
    return x;
}

/* Turn the loop until the rank heard of its transfer, or bound_ms of real time passed. */
static void run_until_told(unsigned bound_ms)
{
    uint64_t end = uv_hrtime() + (uint64_t)bound_ms * 1000000u;
    while (told.calls == 0 && uv_hrtime() < end)
        uv_run(&test_loop, UV_RUN_ONCE);
}

/* ---------------------------------------------------------------- tests */

/* Nothing in flight: the failure is reported at once, once, and its id retired. */
static void test_fail_reports_once(void **state)
{
    struct xfer *x = new_xfer(XFER_READ, 60000);
    uint64_t id = x->id;

    xfer_fail(x, B10_ERR_PEER_LOST, "the link to %s went down", "node-b");
    assert_int_equal(told.calls, 1);
    assert_int_equal(told.status, B10_ERR_PEER_LOST);
    assert_string_equal(told.detail, "the link to node-b went down");
    assert_int_equal(retired_ids, 1);
    assert_int_equal(retired_status, B10_ERR_PEER_LOST);
    assert_int_equal(test_d.stats.xfers_failed, 1);
    assert_int_equal(rank.nxfers, 0);
    assert_true(id != 0);
    /* A second failure of a finished transfer changes nothing (x is not freed before the loop runs). */
    xfer_fail(x, B10_ERR_CANCELLED, "cancelled by the client");
    assert_int_equal(told.calls, 1);
    assert_int_equal(retired_ids, 1);
    assert_int_equal(test_d.stats.xfers_failed, 1);
}

/* A copy still writes: no news until it ended; then the first reason, not a later one. */
static void test_fail_waits_for_its_scatters(void **state)
{
    struct xfer *x = new_xfer(XFER_LOCAL, 60000);

    x->scatters = 1;                /* a scatter into the destination is still running */
    x->holds = 1;
    xfer_fail(x, B10_ERR_CANCELLED, "cancelled by the client");
    assert_int_equal(told.calls, 0);
    assert_int_equal(retired_ids, 1);       /* the id is retired at once: nothing reuses it */
    assert_false(list_empty(&test_d.settling));
    /* Still unsettled: a check reports nothing. */
    xfer_settle_check(x);
    assert_int_equal(told.calls, 0);

    x->scatters = 0;                /* the copy ended */
    x->holds = 0;
    xfer_settle_check(x);
    assert_int_equal(told.calls, 1);
    assert_int_equal(told.status, B10_ERR_CANCELLED);
    assert_true(list_empty(&test_d.settling));
    xfer_maybe_free(x);
}

/* The copy outlives --settle-ms: reported UNSETTLED, saying what it may still write. */
static void test_unsettled_past_the_bound(void **state)
{
    test_d.cfg.settle_ms = 20;
    struct xfer *x = new_xfer(XFER_LOCAL, 60000);

    x->scatters = 1;
    x->holds = 1;
    xfer_fail(x, B10_ERR_DEADLINE, "deadline of 5 ms expired");
    assert_int_equal(told.calls, 0);
    run_until_told(10000);
    assert_int_equal(told.calls, 1);
    assert_int_equal(told.status, B10_ERR_UNSETTLED);
    assert_non_null(strstr(told.detail, "B10_ERR_DEADLINE"));
    assert_non_null(strstr(told.detail, "--settle-ms"));
    assert_non_null(strstr(told.detail, "deadline of 5 ms expired"));
    /* The late copy ends after the news: no second report, and the transfer goes. */
    x->scatters = 0;
    x->holds = 0;
    xfer_settle_check(x);
    assert_int_equal(told.calls, 1);
    xfer_maybe_free(x);
}

/* The deadline timer fails the transfer with the stage it was waiting in. */
static void test_deadline_names_the_stage(void **state)
{
    clock_ms = 1000;
    struct xfer *x = new_xfer(XFER_READ, 15);
    (void)x;

    run_until_told(10000);
    assert_int_equal(told.calls, 1);
    assert_int_equal(told.status, B10_ERR_DEADLINE);
    assert_non_null(strstr(told.detail, "for the remote daemon to write back"));
    assert_int_equal(retired_ids, 1);
}

/* Landed: the rank hears B10_OK, once; nothing is quarantined. */
static void test_finish_tells_the_rank(void **state)
{
    struct xfer *x = new_xfer(XFER_READ, 60000);

    xfer_finish(x);
    assert_int_equal(told.calls, 1);
    assert_int_equal(told.status, B10_OK);
    assert_int_equal(test_d.stats.xfers_succeeded, 1);
    assert_int_equal(retired_ids, 0);
    assert_int_equal(quarantined_other, 0);
    /* A failure after landing is ignored: SUCCESS stands. */
    xfer_fail(x, B10_ERR_PEER_LOST, "too late");
    assert_int_equal(told.calls, 1);
    assert_int_equal(retired_ids, 0);
}

/* A rank that left while the copy ran hears nothing; the transfer still settles and goes. */
static void test_rank_gone_before_the_news(void **state)
{
    struct xfer *x = new_xfer(XFER_LOCAL, 60000);

    x->scatters = 1;
    x->holds = 1;
    xfer_fail(x, B10_ERR_CLIENT_GONE, "the rank left");
    xfer_settle_forget(&test_d, &rank);
    assert_null(x->session);
    x->scatters = 0;
    x->holds = 0;
    xfer_settle_check(x);
    assert_int_equal(told.calls, 0);
    assert_true(list_empty(&test_d.settling));
    xfer_maybe_free(x);
}

/*
 * A sender whose link never came up (no CONTROL went out): nothing to cancel
 * at the receiver, its two reply tags (READY, RESULT) quarantined for the TTL
 * with their count, its id retired, its rank told.
 */
static void test_send_fail_quarantines_its_tags(void **state)
{
    clock_ms = 5000;
    test_d.cfg.quarantine_ttl_ms = 700;
    struct xfer *x = new_xfer(XFER_SEND, 60000);
    x->state = XFER_WAIT_LINK;
    x->tags_registered = true;

    xfer_fail(x, B10_ERR_PEER_UNREACHABLE, "no link to %s", "node-b");
    assert_int_equal(tag_quarantines, 2);
    assert_int_equal(quarantined_until_ms, 5700);
    assert_int_equal(quarantined_tag_count, 2);
    assert_int_equal(retired_ids, 1);
    assert_int_equal(told.calls, 1);
    assert_int_equal(told.status, B10_ERR_PEER_UNREACHABLE);
    assert_int_equal(test_d.stats.xfers_failed, 1);
    assert_int_equal(test_d.stats.xfers_received_failed, 0);
}

/* The same failure before any tag was registered quarantines no tag, only the id. */
static void test_send_fail_without_tags(void **state)
{
    struct xfer *x = new_xfer(XFER_SEND, 60000);
    x->state = XFER_WAIT_LINK;

    xfer_fail(x, B10_ERR_PEER_UNREACHABLE, "no link");
    assert_int_equal(tag_quarantines, 0);
    assert_int_equal(quarantined_other, 0);
    assert_int_equal(retired_ids, 1);
    assert_int_equal(told.calls, 1);
}

/*
 * A view a send gathered ahead of READY idles until its receiver answers,
 * and that receiver may be waiting on the very transfers that wait for views
 * here. So a transfer that finds the pool empty takes the parked ones back:
 * the waiters are woken with one free, and the send gathers that chunk again
 * after READY. A send whose gather is still running keeps its view, and a
 * wait while the pool still has views (for a peer's share) takes none back.
 */
static void test_waiter_takes_back_views_gathered_ahead(void **state)
{
    struct staging *s = NULL;
    assert_int_equal(staging_create(&test_d, 4 * 65536, 65536, &s), B10_OK);
    test_d.staging = s;

    /* a: a send before READY, its first chunk gathered ahead and parked. */
    struct xfer *a = new_xfer(XFER_SEND, 60000);
    a->state = XFER_WAIT_READY;
    a->gather_ahead = true;
    a->next_chunk = 1;
    struct view *av = staging_get(s, VIEW_AHEAD);
    assert_non_null(av);
    a->slots[0] = (struct xfer_slot){ .x = a, .busy = true, .chunk = 0, .view = av,
                                      .parked = true };
    list_insert_tail(&test_d.ahead_parked, &a->ahead_node);
    /* c: another, its gather ahead still running: not parked, not taken back. */
    struct xfer *c = new_xfer(XFER_SEND, 60000);
    c->state = XFER_WAIT_READY;
    c->gather_ahead = true;
    c->next_chunk = 1;
    struct view *cv = staging_get(s, VIEW_AHEAD);
    assert_null(cv);                    /* a quarter of 4 views: one gathered ahead at a time */
    cv = staging_get(s, VIEW_SEND);
    c->slots[0] = (struct xfer_slot){ .x = c, .busy = true, .chunk = 0, .view = cv,
                                      .copying = true };
    /* A wait while the pool still has a view (for a peer's share, say) takes nothing back. */
    struct view *o[2];
    assert_non_null(o[0] = staging_get(s, VIEW_SEND));
    struct xfer *e = new_xfer(XFER_LOCAL, 60000);
    e->next_chunk = e->plan->nchunks;
    xfer_wait_for_view(e);
    assert_true(e->waiting);
    assert_true(a->slots[0].busy);
    assert_false(list_empty(&test_d.ahead_parked));
    /* The rest of the pool is out. */
    assert_non_null(o[1] = staging_get(s, VIEW_SEND));
    assert_int_equal(staging_free_views(s), 0);

    /* b, a local transfer with nothing left to copy (its pump is a no-op), waits for a view. */
    struct xfer *b = new_xfer(XFER_LOCAL, 60000);
    b->next_chunk = b->plan->nchunks;
    xfer_wait_for_view(b);
    assert_false(b->waiting);           /* woken: a's view came back */
    assert_false(e->waiting);           /* so was the earlier waiter, first */
    assert_int_equal(staging_free_views(s), 1);
    assert_false(a->slots[0].busy);
    assert_null(a->slots[0].view);
    assert_int_equal(a->next_chunk, 0); /* gathered again after READY */
    assert_false(a->gather_ahead);      /* and nothing more ahead of it */
    assert_true(list_empty(&test_d.ahead_parked));
    assert_true(c->slots[0].busy);      /* the running gather keeps its view */
    assert_ptr_equal(c->slots[0].view, cv);

    /* Taking back again finds nothing parked. */
    xfer_ahead_reclaim(&test_d);
    assert_int_equal(staging_free_views(s), 1);

    c->slots[0] = (struct xfer_slot){ 0 };
    staging_put(s, cv);
    for (int i = 0; i < 2; i++)
        staging_put(s, o[i]);
    assert_int_equal(staging_free_views(s), 4);
    xfer_fail(a, B10_ERR_CANCELLED, "test over");
    xfer_fail(b, B10_ERR_CANCELLED, "test over");
    xfer_fail(c, B10_ERR_CANCELLED, "test over");
    xfer_fail(e, B10_ERR_CANCELLED, "test over");
    test_d.staging = NULL;
    staging_destroy(s);
}

/* count spans a side of len bytes: sources from src, destinations from dst, step apart. */
static void plan_tables(uint8_t *t, size_t count, uint64_t src, uint64_t dst, uint64_t step,
                        uint64_t len)
{
    for (size_t i = 0; i < count; i++) {
        frame_put_u64(t + i * SPAN_BYTES, src + i * step);
        frame_put_u64(t + i * SPAN_BYTES + 8, len);
        frame_put_u64(t + (count + i) * SPAN_BYTES, dst + i * step);
        frame_put_u64(t + (count + i) * SPAN_BYTES + 8, len);
    }
}

/*
 * A plan made ahead (off the loop) is the one planning takes, where it was
 * made for the same direction and view; else planning makes its own and
 * leaves it; a refusal made ahead is the refusal planning says.
 */
static void test_plan_made_ahead(void **state)
{
    (void)state;
    struct staging *s = NULL;
    assert_int_equal(staging_create(&test_d, 4 * 65536, 65536, &s), B10_OK);
    test_d.staging = s;
    uint8_t t[2 * 8 * SPAN_BYTES];
    plan_tables(t, 8, 0x100000, 0x900000, 8192, 4096);
    struct xfer_planned ahead = { .remote_src = false, .max_chunk = 65536 };
    xfer_plan_ahead(t, t + 8 * SPAN_BYTES, 8, &ahead);
    assert_int_equal(ahead.status, B10_OK);
    struct plan *made = ahead.plan, *plan = NULL;
    assert_non_null(made);
    struct xfer_rows rows = { 8, t, t + 8 * SPAN_BYTES, NULL, &ahead };
    uint64_t ns;
    char detail[256] = "";

    /* Made for the other direction: planned here, the one made ahead left to its owner. */
    assert_int_equal(xfer_plan(&test_d, &rows, true, &plan, &ns, detail, sizeof(detail)), B10_OK);
    assert_ptr_not_equal(plan, made);
    assert_ptr_equal(ahead.plan, made);
    assert_int_equal(plan->pieces[0].src, 0x900000);
    plan_free(plan);
    /* Its own direction: taken as it is. */
    assert_int_equal(xfer_plan(&test_d, &rows, false, &plan, &ns, detail, sizeof(detail)), B10_OK);
    assert_ptr_equal(plan, made);
    assert_null(ahead.plan);
    assert_int_equal(plan->total, 8 * 4096);
    assert_int_equal(plan->pieces[0].src, 0x100000);
    plan_free(plan);

    /* Two destinations overlapping: the refusal made ahead, with its reason. */
    plan_tables(t, 8, 0x100000, 0x900000, 8192, 4096);
    frame_put_u64(t + (8 + 3) * SPAN_BYTES, 0x900000);
    ahead = (struct xfer_planned){ .remote_src = false, .max_chunk = 65536 };
    xfer_plan_ahead(t, t + 8 * SPAN_BYTES, 8, &ahead);
    assert_int_equal(ahead.status, B10_ERR_INVALID_ARG);
    plan = NULL;
    assert_int_equal(xfer_plan(&test_d, &rows, false, &plan, &ns, detail, sizeof(detail)),
                     B10_ERR_INVALID_ARG);
    assert_null(plan);
    assert_non_null(strstr(detail, "overlap"));
    test_d.staging = NULL;
    staging_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fail_reports_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fail_waits_for_its_scatters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unsettled_past_the_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deadline_names_the_stage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_finish_tells_the_rank, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rank_gone_before_the_news, setup, teardown),
        cmocka_unit_test_setup_teardown(test_send_fail_quarantines_its_tags, setup, teardown),
        cmocka_unit_test_setup_teardown(test_send_fail_without_tags, setup, teardown),
        cmocka_unit_test_setup_teardown(test_waiter_takes_back_views_gathered_ahead, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_plan_made_ahead, setup, teardown),
    };
    return cmocka_run_group_tests_name("xfer", tests, NULL, NULL);
}
