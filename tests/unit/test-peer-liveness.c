/*
 * test-peer-liveness.c — daemon/link/peer-liveness.c: silence and stalls.
 *
 * With --peer-timeout-ms T a tick runs every T/4: a peer that work waits on
 * is sent a heartbeat about each of its links, and one not heard from for T
 * is given up (its links retire, its work fails B10_ERR_PEER_LOST, its
 * endpoint stays). A tick 3T/4 late means this daemon itself stalled: then
 * no peer is blamed for the silence; the daemon fails its own open work,
 * since its peers may have given it up, and asks each whether its links
 * still stand. Ticks are driven by hand on the test's clock; the daemon is
 * peer-fixture.h's.
 */
#include "peer-fixture.h"

#define T_MS 1000

/* A peer whose link to us (generation gen) is up, with an endpoint to answer on. */
static struct peer *linked(const char *name, uint64_t daemon_id, uint64_t gen)
{
    struct peer *p = fx_peer(name, daemon_id, 100);

    assert_int_equal(peer_ensure_ep(p), 0);
    p->in_up = true;
    p->in.tags.sender_id = daemon_id;
    p->in.tags.receiver_id = fx_d.daemon_id;
    p->in.tags.gen = gen;
    return p;
}

static void tick_at(uint64_t ms)
{
    fx_clock_ms = ms;
    peer_liveness_tick(&fx_d);
}

/* ---------------------------------------------------------------- tests */

/*
 * Busy and silent for T: given up, its work failed, its endpoint kept. A
 * busy peer heard from meanwhile, and an idle one, are not, nor is the idle
 * one as soon as work starts.
 */
static void test_silent_peer_lost_after_timeout(void **state)
{
    struct peer *b = linked("node-b", 0xb1, 7);
    struct peer *c = linked("node-c", 0xc1, 8);
    struct peer *d = linked("node-d", 0xd1, 9);
    struct fx_work wb, wc;

    fx_work_start(&wb, b, 7);
    fx_work_start(&wc, c, 8);
    tick_at(1250);
    assert_int_equal(fx_sent_on(TAG_HEARTBEAT), 2);     /* b and c, which work waits on */
    tick_at(1500);
    fx_clock_ms = 1600;
    peer_heard(c);
    tick_at(1750);
    assert_int_equal(wb.lost + wc.lost, 0);

    tick_at(1000 + T_MS);
    assert_int_equal(wb.lost, 1);
    assert_int_equal(wb.status, B10_ERR_PEER_LOST);
    assert_non_null(strstr(wb.detail, "no word from the remote daemon"));
    assert_false(b->in_up);
    assert_non_null(b->ep);                             /* silence is no endpoint failure */
    assert_int_equal(fx_d.stats.peers_lost, 1);
    assert_int_equal(wc.lost, 0);
    assert_true(c->in_up);
    assert_true(d->in_up);                              /* nothing waits on it */

    tick_at(1600 + T_MS - 1);
    assert_int_equal(wc.lost, 0);
    tick_at(1600 + T_MS);
    assert_int_equal(wc.lost, 1);
    assert_int_equal(fx_d.stats.peers_lost, 2);
    assert_true(d->in_up);

    /* Idle, its silence counted for nothing: work that starts now waits T from the last tick. */
    struct fx_work wd;
    fx_work_start(&wd, d, 9);
    tick_at(1600 + T_MS + T_MS / 4);
    assert_int_equal(wd.lost, 0);
    assert_true(d->in_up);
    assert_int_equal(fx_d.stats.stalls, 0);
}

/*
 * A tick 3T/4 late: this daemon stalled. No peer is lost for the silence;
 * the work that waited fails as the stall's, the links it ran on retire,
 * and the idle peer's link stands and is asked about.
 */
static void test_late_tick_blames_no_peer(void **state)
{
    struct peer *b = linked("node-b", 0xb1, 7);
    struct peer *d = linked("node-d", 0xd1, 9);
    struct fx_work wb;

    fx_work_start(&wb, b, 7);
    tick_at(1250);
    unsigned beats = fx_sent_on(TAG_HEARTBEAT);

    tick_at(1250 + 5 * T_MS);
    assert_int_equal(fx_d.stats.stalls, 1);
    assert_int_equal(fx_d.stats.peers_lost, 0);
    assert_int_equal(wb.lost, 1);
    assert_int_equal(wb.status, B10_ERR_PEER_LOST);
    assert_non_null(strstr(wb.detail, "this daemon stalled"));
    assert_false(b->in_up);
    assert_true(d->in_up);
    assert_int_equal(d->heard_ms, fx_clock_ms);         /* its silence was ours */
    assert_int_equal(fx_sent_on(TAG_HEARTBEAT), beats + 1);   /* d: does its link still stand? */

    /* The next tick, on time, finds no one silent. */
    tick_at(fx_clock_ms + T_MS / 4);
    assert_int_equal(fx_d.stats.peers_lost, 0);
    assert_true(d->in_up);
    assert_int_equal(fx_d.stats.stalls, 1);
}

/* A completion asks first whether the daemon stalled: only a late tick says so, and runs. */
static void test_liveness_check_sees_stall(void **state)
{
    tick_at(1250);
    fx_clock_ms = 1250 + T_MS * 3 / 4 - 1;
    assert_false(peer_liveness_check(&fx_d));
    assert_int_equal(fx_d.stats.stalls, 0);
    fx_clock_ms = 1250 + T_MS * 3 / 4;
    assert_true(peer_liveness_check(&fx_d));
    assert_int_equal(fx_d.stats.stalls, 1);
    assert_int_equal(fx_d.liveness.tick_ms, fx_clock_ms);
    assert_false(peer_liveness_check(&fx_d));
}

int main(void)
{
    static const struct fx_settings timeout = { .peer_timeout_ms = T_MS };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_prestate_setup_teardown(test_silent_peer_lost_after_timeout, fx_setup,
                                                 fx_teardown, (void *)&timeout),
        cmocka_unit_test_prestate_setup_teardown(test_late_tick_blames_no_peer, fx_setup,
                                                 fx_teardown, (void *)&timeout),
        cmocka_unit_test_prestate_setup_teardown(test_liveness_check_sees_stall, fx_setup,
                                                 fx_teardown, (void *)&timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
