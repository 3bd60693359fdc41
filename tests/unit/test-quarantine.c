/*
 * test-quarantine.c — daemon/mem/quarantine.c: what failed transfers leave
 * behind, held out of circulation for a TTL.
 *
 * Real components below it: a libuv loop, a real UCX wire (self and tcp on
 * loopback) that registers the staging views, the real staging pool and the
 * real tag registry. Time is the test's: the daemon's clock hook returns
 * what the test says, and sweeps are called directly, so no test waits.
 * Each test returns every view before the pool goes, so ASan's leak check
 * sees any view the quarantine loses.
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
#include "quarantine.h"
#include "staging.h"
#include "tags.h"
#include "wire.h"
#include "wireloop.h"

#define VIEW_BYTES (64u << 10)
#define VIEWS 4u
#define TTL_MS 1000u
#define T0 5000u

static uv_loop_t test_loop;
static struct b10d test_d;
static uint64_t clock_ms;
static bool left_out;           /* a test failed with views out: leave the wire alone */

static uint64_t test_now(struct b10d *d)
{
    return clock_ms;
}

/* calloc, with a switch that makes it fail (linked with -Wl,--wrap=calloc). */
void *__real_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size);
static bool calloc_fails;

void *__wrap_calloc(size_t n, size_t size)
{
    return calloc_fails ? NULL : __real_calloc(n, size);
}

static int group_setup(void **state)
{
    if (wireloop_start(&test_d, &test_loop, "test-quarantine") != 0)
        return -1;
    test_d.cfg.quarantine_ttl_ms = TTL_MS;
    test_d.now_ms = test_now;
    return 0;
}

static int group_teardown(void **state)
{
    return left_out ? 0 : wireloop_stop(&test_d, &test_loop);
}

/* Each test: a pool of VIEWS views, a registry, a quarantine, the clock at T0. */
static int test_setup(void **state)
{
    clock_ms = T0;
    calloc_fails = false;
    memset(&test_d.stats, 0, sizeof(test_d.stats));
    if (staging_create(&test_d, (uint64_t)VIEWS * VIEW_BYTES, VIEW_BYTES, &test_d.staging) != B10_OK)
        return -1;
    test_d.tags = tags_create(1024, 16);
    if (test_d.tags == NULL)
        return -1;
    return quarantine_create(&test_d, &test_d.quarantine) == B10_OK ? 0 : -1;
}

/* The quarantine's timer closes on the loop: run it once so its memory goes. */
static void quarantine_gone(void)
{
    quarantine_destroy(test_d.quarantine);
    test_d.quarantine = NULL;
    uv_run(&test_loop, UV_RUN_NOWAIT);
}

static int test_teardown(void **state)
{
    if (test_d.quarantine != NULL)
        quarantine_gone();
    if (test_d.staging != NULL && staging_free_views(test_d.staging) != VIEWS)
        left_out = true;
    if (!left_out)
        staging_destroy(test_d.staging);
    test_d.staging = NULL;
    tags_destroy(test_d.tags);
    test_d.tags = NULL;
    return 0;
}

static struct quarantine_entry *entry_at(unsigned i)
{
    const struct list *head = quarantine_entries(test_d.quarantine);
    const struct list *pos = head->next;
    for (unsigned k = 0; k < i && pos != head; k++)
        pos = pos->next;
    assert_ptr_not_equal(pos, head);
    return list_entry(pos, struct quarantine_entry, node);
}

static unsigned entries_listed(void)
{
    const struct list *head = quarantine_entries(test_d.quarantine);
    unsigned n = 0;
    for (const struct list *pos = head->next; pos != head; pos = pos->next)
        n++;
    return n;
}

static struct view *take_view(enum view_use use)
{
    struct view *v = staging_get(test_d.staging, use);
    assert_non_null(v);
    return v;
}

/* ---------------------------------------------------------------- names */

static void test_kind_names(void **state)
{
    assert_string_equal(quarantine_kind_name(QUARANTINE_VIEW), "view");
    assert_string_equal(quarantine_kind_name(QUARANTINE_TAGS), "tags");
    assert_string_equal(quarantine_kind_name(QUARANTINE_XFER_ID), "xfer-id");
    assert_string_equal(quarantine_kind_name(QUARANTINE_GENERATION), "generation");
    assert_string_equal(quarantine_kind_name((enum quarantine_kind)99), "?");
}

/* ---------------------------------------------------------------- adding */

/* What a failed transfer leaves: each entry recorded as given, in order, views counted. */
static void test_add_records_each_kind(void **state)
{
    struct quarantine *q = test_d.quarantine;
    struct view *v = take_view(VIEW_RECV);
    uint32_t free_before = staging_free_views(test_d.staging);

    assert_int_equal(quarantine_count(q), 0);
    assert_int_equal(quarantine_bytes(q), 0);
    assert_int_equal(entries_listed(), 0);

    quarantine_add(q, QUARANTINE_VIEW, v->id, v->bytes, B10_ERR_DEADLINE, 0xabc, 7, v, NULL);
    clock_ms += 10;
    quarantine_add(q, QUARANTINE_TAGS, 0xabc, 5, B10_ERR_DEADLINE, 0xabc, 7, NULL, NULL);
    quarantine_add(q, QUARANTINE_XFER_ID, 0xabc, 0, B10_ERR_PEER_LOST, 0xabc, 7, NULL, NULL);
    quarantine_add(q, QUARANTINE_GENERATION, 42, 0, B10_ERR_PEER_LOST, 0, 7, NULL, NULL);

    assert_int_equal(quarantine_count(q), 4);
    assert_int_equal(entries_listed(), 4);
    assert_int_equal(test_d.stats.quarantine_events, 4);
    /* Only the view's bytes count against the budget; the tags' "size" is a count. */
    assert_int_equal(quarantine_bytes(q), VIEW_BYTES);
    /* The view left circulation: it is neither free nor handed out again. */
    assert_int_equal(v->use, VIEW_QUARANTINED);
    assert_int_equal(staging_quarantined_views(test_d.staging), 1);
    assert_int_equal(staging_free_views(test_d.staging), free_before);

    struct quarantine_entry *e = entry_at(0);
    assert_int_equal(e->kind, QUARANTINE_VIEW);
    assert_int_equal(e->value, v->id);
    assert_int_equal(e->size, VIEW_BYTES);
    assert_int_equal(e->reason, B10_ERR_DEADLINE);
    assert_int_equal(e->xfer_id, 0xabc);
    assert_int_equal(e->peer_id, 7);
    assert_ptr_equal(e->view, v);
    assert_int_equal(e->since_ms, T0);
    assert_int_equal(e->expires_ms, T0 + TTL_MS);

    e = entry_at(1);
    assert_int_equal(e->kind, QUARANTINE_TAGS);
    assert_int_equal(e->size, 5);
    assert_null(e->view);
    assert_int_equal(e->since_ms, T0 + 10);
    assert_int_equal(e->expires_ms, T0 + 10 + TTL_MS);
    e = entry_at(2);
    assert_int_equal(e->kind, QUARANTINE_XFER_ID);
    assert_int_equal(e->reason, B10_ERR_PEER_LOST);
    e = entry_at(3);
    assert_int_equal(e->kind, QUARANTINE_GENERATION);
    assert_int_equal(e->value, 42);
    assert_int_equal(e->xfer_id, 0);

    /* All of it leaves at the TTL, and the view is replaced by a fresh one. */
    clock_ms = T0 + 10 + TTL_MS;
    quarantine_sweep(q);
    assert_int_equal(quarantine_count(q), 0);
    assert_int_equal(entries_listed(), 0);
    assert_int_equal(quarantine_bytes(q), 0);
    assert_int_equal(staging_quarantined_views(test_d.staging), 0);
    assert_int_equal(staging_free_views(test_d.staging), VIEWS);
}

/* ---------------------------------------------------------------- expiry */

/* Nothing leaves a millisecond early; everything due leaves at its TTL, the rest stays. */
static void test_sweep_at_the_ttl(void **state)
{
    struct quarantine *q = test_d.quarantine;
    struct view *a = take_view(VIEW_SEND), *b = take_view(VIEW_SEND);
    uint32_t b_id = b->id;

    quarantine_add(q, QUARANTINE_VIEW, a->id, a->bytes, B10_ERR_CANCELLED, 1, 1, a, NULL);
    clock_ms = T0 + 300;
    quarantine_add(q, QUARANTINE_VIEW, b->id, b->bytes, B10_ERR_CANCELLED, 2, 1, b, NULL);
    assert_int_equal(quarantine_bytes(q), 2 * VIEW_BYTES);

    clock_ms = T0 + TTL_MS - 1;
    quarantine_sweep(q);
    assert_int_equal(quarantine_count(q), 2);
    assert_int_equal(quarantine_bytes(q), 2 * VIEW_BYTES);
    assert_int_equal(staging_quarantined_views(test_d.staging), 2);

    clock_ms = T0 + TTL_MS;
    quarantine_sweep(q);
    assert_int_equal(quarantine_count(q), 1);
    assert_int_equal(quarantine_bytes(q), VIEW_BYTES);
    assert_int_equal(staging_quarantined_views(test_d.staging), 1);
    assert_int_equal(entry_at(0)->value, b_id);
    assert_int_equal(staging_free_views(test_d.staging), VIEWS - 1);

    /* A sweep with nothing due changes nothing; the later one is due 300 ms on. */
    quarantine_sweep(q);
    assert_int_equal(quarantine_count(q), 1);
    clock_ms = T0 + 300 + TTL_MS;
    quarantine_sweep(q);
    assert_int_equal(quarantine_count(q), 0);
    assert_int_equal(quarantine_bytes(q), 0);
    assert_int_equal(staging_free_views(test_d.staging), VIEWS);
}

/* A view leaves as a fresh buffer: no view of a failed transfer is handed out again. */
static void test_expired_view_is_replaced(void **state)
{
    struct quarantine *q = test_d.quarantine;
    struct view *v[VIEWS];
    uint32_t old[VIEWS];

    for (unsigned i = 0; i < VIEWS; i++) {
        v[i] = take_view(VIEW_SEND);
        old[i] = v[i]->id;
        quarantine_add(q, QUARANTINE_VIEW, v[i]->id, v[i]->bytes, B10_ERR_DEADLINE, 9, 1, v[i],
                       NULL);
    }
    /* The whole pool sits out: nothing to hand to a new transfer until the TTL. */
    assert_null(staging_get(test_d.staging, VIEW_SEND));
    assert_int_equal(quarantine_bytes(q), (uint64_t)VIEWS * VIEW_BYTES);
    clock_ms += TTL_MS;
    quarantine_sweep(q);
    assert_int_equal(staging_free_views(test_d.staging), VIEWS);
    for (unsigned i = 0; i < VIEWS; i++) {
        v[i] = take_view(VIEW_SEND);
        for (unsigned j = 0; j < VIEWS; j++)
            assert_int_not_equal(v[i]->id, old[j]);
        memset(v[i]->base, 0x5a, v[i]->bytes);     /* a real, writable buffer */
    }
    for (unsigned i = 0; i < VIEWS; i++)
        staging_put(test_d.staging, v[i]);
}

/* ---------------------------------------------------------------- holds */

/*
 * A view that a UCX request or a copy may still write stays out past its
 * TTL, however long; entries behind it still leave on time; once the last
 * hold goes, the next sweep drops it.
 */
static void test_held_view_outlives_its_ttl(void **state)
{
    struct quarantine *q = test_d.quarantine;
    struct view *held = take_view(VIEW_RECV), *other = take_view(VIEW_RECV);

    quarantine_add(q, QUARANTINE_VIEW, held->id, held->bytes, B10_ERR_PEER_LOST, 1, 3, held,
                   NULL);
    quarantine_add(q, QUARANTINE_VIEW, other->id, other->bytes, B10_ERR_PEER_LOST, 1, 3, other,
                   NULL);
    held->holds = 1;

    clock_ms = T0 + 100 * TTL_MS;
    quarantine_sweep(q);
    assert_int_equal(quarantine_count(q), 1);
    assert_ptr_equal(entry_at(0)->view, held);
    assert_int_equal(quarantine_bytes(q), VIEW_BYTES);
    assert_int_equal(held->use, VIEW_QUARANTINED);
    assert_int_equal(staging_quarantined_views(test_d.staging), 1);
    /* Still writable memory: nothing freed it. */
    memset(held->base, 0xa5, held->bytes);

    held->holds = 0;
    quarantine_sweep(q);
    assert_int_equal(quarantine_count(q), 0);
    assert_int_equal(quarantine_bytes(q), 0);
    assert_int_equal(staging_quarantined_views(test_d.staging), 0);
    assert_int_equal(staging_free_views(test_d.staging), VIEWS);
}

/* ---------------------------------------------------------------- charges */

/* A peer's share: a view's bytes are charged while it sits out, other kinds charge nothing. */
static void test_charge_follows_the_view(void **state)
{
    struct quarantine *q = test_d.quarantine;
    struct view *a = take_view(VIEW_RECV), *b = take_view(VIEW_RECV);
    uint64_t peer_a = 100, peer_b = 0;

    quarantine_add(q, QUARANTINE_VIEW, a->id, a->bytes, B10_ERR_DEADLINE, 1, 1, a, &peer_a);
    assert_int_equal(peer_a, 100 + VIEW_BYTES);
    quarantine_add(q, QUARANTINE_TAGS, 1, 3, B10_ERR_DEADLINE, 1, 1, NULL, &peer_a);
    quarantine_add(q, QUARANTINE_XFER_ID, 1, 0, B10_ERR_DEADLINE, 1, 1, NULL, &peer_a);
    assert_int_equal(peer_a, 100 + VIEW_BYTES);
    assert_null(entry_at(1)->charge);
    clock_ms += 1;
    quarantine_add(q, QUARANTINE_VIEW, b->id, b->bytes, B10_ERR_DEADLINE, 2, 2, b, &peer_b);
    assert_int_equal(peer_b, VIEW_BYTES);

    b->holds = 1;
    clock_ms += TTL_MS;
    quarantine_sweep(q);
    /* a left: its charge is given back exactly; b is held, its peer still pays. */
    assert_int_equal(peer_a, 100);
    assert_int_equal(peer_b, VIEW_BYTES);
    b->holds = 0;
    quarantine_sweep(q);
    assert_int_equal(peer_b, 0);
    assert_int_equal(quarantine_count(q), 0);
}

/* ---------------------------------------------------------------- tags */

/* The sweep also ends the TTL of the registry's quarantined tags, by the same clock. */
static void test_sweep_expires_tags(void **state)
{
    struct tags *tags = test_d.tags;
    int owner;

    assert_int_equal(tags_register(tags, 0x1111, &owner), 0);
    assert_int_equal(tags_register(tags, 0x2222, &owner), 0);
    assert_int_equal(tags_register(tags, 0x3333, &owner), 0);
    tags_quarantine(tags, 0x1111, T0 + TTL_MS, 0);
    tags_quarantine(tags, 0x2222, T0 + 2 * TTL_MS, 0);
    quarantine_add(test_d.quarantine, QUARANTINE_TAGS, 9, 2, B10_ERR_DEADLINE, 9, 1, NULL, NULL);
    assert_int_equal(tags_quarantined(tags), 2);

    clock_ms = T0 + TTL_MS - 1;
    quarantine_sweep(test_d.quarantine);
    assert_int_equal(tags_quarantined(tags), 2);
    /* A quarantined tag is still a collision for a new transfer. */
    assert_int_equal(tags_register(tags, 0x1111, &owner), B10_ERR_TAG_COLLISION);

    clock_ms = T0 + TTL_MS;
    quarantine_sweep(test_d.quarantine);
    assert_int_equal(tags_quarantined(tags), 1);
    assert_false(tags_is_quarantined(tags, 0x1111));
    assert_true(tags_is_quarantined(tags, 0x2222));
    assert_int_equal(quarantine_count(test_d.quarantine), 0);
    /* Gone from the registry: the tag may be registered again; the live one was never touched. */
    assert_int_equal(tags_register(tags, 0x1111, &owner), 0);
    assert_ptr_equal(tags_lookup(tags, 0x3333), &owner);
    assert_int_equal(tags_live(tags), 2);
}

/* ---------------------------------------------------------------- no memory */

/* Without memory for an entry the view stays out for good: never back into the pool. */
static void test_add_without_memory(void **state)
{
    struct quarantine *q = test_d.quarantine;
    struct view *lost = take_view(VIEW_SEND), *kept = take_view(VIEW_SEND);
    uint64_t charge = 0;

    calloc_fails = true;
    quarantine_add(q, QUARANTINE_VIEW, lost->id, lost->bytes, B10_ERR_DEADLINE, 1, 1, lost,
                   &charge);
    calloc_fails = false;
    assert_int_equal(test_d.stats.quarantine_events, 1);
    assert_int_equal(quarantine_count(q), 0);
    assert_int_equal(quarantine_bytes(q), 0);
    assert_int_equal(charge, 0);
    assert_int_equal(lost->use, VIEW_QUARANTINED);

    /* With memory back the same call records its entry. */
    quarantine_add(q, QUARANTINE_VIEW, kept->id, kept->bytes, B10_ERR_DEADLINE, 1, 1, kept,
                   &charge);
    assert_int_equal(quarantine_count(q), 1);
    assert_int_equal(charge, VIEW_BYTES);

    clock_ms += 1000 * TTL_MS;
    quarantine_sweep(q);
    assert_int_equal(quarantine_count(q), 0);
    assert_int_equal(charge, 0);
    /* The entryless view never came back: the pool is one short, the view still quarantined. */
    assert_int_equal(staging_quarantined_views(test_d.staging), 1);
    assert_int_equal(staging_free_views(test_d.staging), VIEWS - 1);
    assert_int_equal(lost->use, VIEW_QUARANTINED);
    /* The test gives it back itself, so that the pool ends whole. */
    staging_drop(test_d.staging, lost);
}

/* ---------------------------------------------------------------- destroy */

/*
 * At shutdown the quarantine drops the views nothing holds and leaves a held
 * one alone (a request may still write it); destroy accepts NULL.
 */
static void test_destroy_drops_unheld_views(void **state)
{
    struct quarantine *q = test_d.quarantine;
    struct view *a = take_view(VIEW_SEND), *held = take_view(VIEW_RECV);

    quarantine_add(q, QUARANTINE_VIEW, a->id, a->bytes, B10_ERR_DRAINING, 1, 1, a, NULL);
    quarantine_add(q, QUARANTINE_VIEW, held->id, held->bytes, B10_ERR_DRAINING, 1, 1, held,
                   NULL);
    quarantine_add(q, QUARANTINE_XFER_ID, 1, 0, B10_ERR_DRAINING, 1, 1, NULL, NULL);
    held->holds = 1;
    quarantine_gone();
    quarantine_destroy(NULL);

    assert_int_equal(staging_quarantined_views(test_d.staging), 1);
    assert_int_equal(held->use, VIEW_QUARANTINED);
    memset(held->base, 0x3c, held->bytes);     /* not freed */
    held->holds = 0;
    staging_drop(test_d.staging, held);
    assert_int_equal(staging_free_views(test_d.staging), VIEWS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kind_names),
#define T(name) cmocka_unit_test_setup_teardown(name, test_setup, test_teardown)
        T(test_add_records_each_kind),
        T(test_sweep_at_the_ttl),
        T(test_expired_view_is_replaced),
        T(test_held_view_outlives_its_ttl),
        T(test_charge_follows_the_view),
        T(test_sweep_expires_tags),
        T(test_add_without_memory),
        T(test_destroy_drops_unheld_views),
#undef T
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
