/*
 * test-peer.c — daemon/link/peer.c: the table of remote daemons.
 *
 * An entry is found by its boot's id and by its name; a newer boot of a
 * name takes the entry over (the old boot's links retire, its work fails),
 * a descriptor of an older one never rolls it back; a full table makes room
 * by evicting the unused entry idle longest, and refuses when every entry is
 * used; what a rank names (ref) or a transfer points at (hold) is neither
 * evicted for room nor by the idle sweep. A link's failure fails each
 * transfer and question on it once, in order, even where one's failure
 * takes others with it. The daemon is peer-fixture.h's.
 */
#include "peer-fixture.h"

/* ---------------------------------------------------------------- tests */

/* Each entry is found by id and by name; a descriptor met again finds the same entry. */
static void test_add_and_find(void **state)
{
    struct peer *a = fx_peer("node-a", 0xa1, 100);
    struct peer *b = fx_peer("node-b", 0xb1, 100);

    assert_ptr_not_equal(a, b);
    assert_int_equal(fx_d.npeers, 2);
    assert_ptr_equal(peer_find(&fx_d, 0xa1), a);
    assert_ptr_equal(peer_find(&fx_d, 0xb1), b);
    assert_null(peer_find(&fx_d, 0xc1));
    assert_ptr_equal(peer_find_name(&fx_d, "node-a"), a);
    assert_ptr_equal(peer_find_name(&fx_d, "node-b"), b);
    assert_null(peer_find_name(&fx_d, "node-c"));
    assert_string_equal(a->name, "node-a");
    assert_int_equal(a->state, PEER_DOWN);
    assert_null(a->ep);                 /* no endpoint until a link is needed */

    assert_ptr_equal(fx_peer("node-a", 0xa1, 100), a);
    assert_int_equal(fx_d.npeers, 2);
}

/*
 * A newer boot of a known name takes its entry: the old boot's link retires
 * and its work fails B10_ERR_PEER_LOST. A descriptor of the older boot then
 * names the newer one; one from a day ahead of this clock is refused.
 */
static void test_newer_boot_replaces(void **state)
{
    struct peer *a = fx_peer("node-a", 0xa1, 100);
    struct fx_work w;
    struct peer *p = NULL;
    char detail[256];

    assert_int_equal(peer_ensure_ep(a), 0);
    a->in_up = true;                    /* its link to us is up, a transfer runs on it */
    a->in.tags.gen = 7;
    a->hello_gen_seen = 7;
    fx_work_start(&w, a, 7);

    assert_ptr_equal(fx_peer("node-a", 0xa2, 200), a);
    assert_int_equal(fx_d.npeers, 1);
    assert_int_equal(a->daemon_id, 0xa2);
    assert_int_equal(a->incarnation, 200);
    assert_null(peer_find(&fx_d, 0xa1));
    assert_ptr_equal(peer_find(&fx_d, 0xa2), a);
    assert_int_equal(w.lost, 1);
    assert_int_equal(w.status, B10_ERR_PEER_LOST);
    assert_non_null(strstr(w.detail, "restarted"));
    assert_false(a->in_up);
    assert_int_equal(fx_generations_retired, 1);
    assert_int_equal(fx_d.stats.peers_lost, 1);
    assert_null(a->ep);                 /* the old boot's endpoint is closed */
    assert_int_equal(fx_eps_open, 0);
    assert_int_equal(a->hello_gen_seen, 0);   /* the new boot's generations start over */

    /* An older boot's descriptor: the later boot known, not rolled back. */
    assert_int_equal(fx_get("node-a", 0xa1, 100, &p, detail, sizeof(detail)), B10_OK);
    assert_ptr_equal(p, a);
    assert_int_equal(a->daemon_id, 0xa2);
    assert_int_equal(fx_d.stats.descriptors_resolved, 1);

    /* A boot claimed a day ahead of this clock would outrank every real one. */
    assert_int_equal(fx_get("node-a", 0xa3, peer_incarnation_bound(&fx_d) + 1, &p, detail,
                            sizeof(detail)),
                     B10_ERR_INVALID_ARG);
    assert_int_equal(a->daemon_id, 0xa2);
    assert_int_equal(fx_d.npeers, 1);
}

/* A full table makes room: the unused entry idle longest goes, the others stay. */
static void test_full_table_evicts_idle_longest(void **state)
{
    struct peer *b, *c;

    fx_peer("node-a", 0xa1, 100);       /* idle since 1000 */
    fx_clock_ms = 2000;
    b = fx_peer("node-b", 0xb1, 100);   /* idle since 2000 */
    fx_clock_ms = 3000;
    c = fx_peer("node-c", 0xc1, 100);
    assert_int_equal(fx_d.npeers, 2);
    assert_int_equal(fx_d.stats.peers_evicted, 1);
    assert_null(peer_find_name(&fx_d, "node-a"));
    assert_ptr_equal(peer_find_name(&fx_d, "node-b"), b);
    assert_ptr_equal(peer_find_name(&fx_d, "node-c"), c);
}

/* A rank's name for it (ref) and a transfer's pointer (hold) keep an entry from eviction. */
static void test_full_table_of_used_entries_refuses(void **state)
{
    struct peer *a = fx_peer("node-a", 0xa1, 100);
    struct peer *b = fx_peer("node-b", 0xb1, 100);
    struct peer *p = NULL;
    char detail[256];

    peer_ref(a);
    peer_hold(b);
    assert_int_equal(fx_get("node-c", 0xc1, 100, &p, detail, sizeof(detail)), B10_ERR_TOO_LARGE);
    assert_null(p);
    assert_non_null(strstr(detail, "--max-peers"));
    assert_int_equal(fx_d.npeers, 2);
    assert_int_equal(fx_d.stats.peers_evicted, 0);

    /* The transfer freed: its entry may go now, the one a rank names may not. */
    peer_release(b);
    assert_int_equal(fx_get("node-c", 0xc1, 100, &p, detail, sizeof(detail)), B10_OK);
    assert_ptr_equal(peer_find_name(&fx_d, "node-a"), a);
    assert_null(peer_find_name(&fx_d, "node-b"));
    assert_int_equal(fx_d.npeers, 2);
}

/*
 * The idle sweep forgets an entry --peer-idle-ms after its last use, and
 * not while a rank names it or a transfer holds it; unref and release
 * below zero change nothing.
 */
static void test_idle_sweep_spares_ref_and_hold(void **state)
{
    struct peer *a = fx_peer("node-a", 0xa1, 100);
    struct peer *b = fx_peer("node-b", 0xb1, 100);

    fx_peer("node-c", 0xc1, 100);
    peer_ref(a);
    peer_hold(b);
    fx_clock_ms = 1999;
    peer_hello_sweep(&fx_d);
    assert_int_equal(fx_d.npeers, 3);
    fx_clock_ms = 2000;
    peer_hello_sweep(&fx_d);
    assert_int_equal(fx_d.npeers, 2);   /* node-c: 1000 ms unused */
    assert_null(peer_find_name(&fx_d, "node-c"));
    assert_int_equal(fx_d.stats.peers_evicted, 1);

    peer_unref(a);
    peer_unref(a);
    assert_int_equal(a->refs, 0);
    peer_release(b);
    peer_release(b);
    assert_int_equal(b->holds, 0);
    /* Idle from the last sweep that saw them used, not from when they were made. */
    fx_clock_ms = 2999;
    peer_hello_sweep(&fx_d);
    assert_int_equal(fx_d.npeers, 2);
    fx_clock_ms = 3000;
    peer_hello_sweep(&fx_d);
    assert_int_equal(fx_d.npeers, 0);
    assert_int_equal(fx_d.stats.peers_evicted, 3);
}

/* A question on the peer's asks, on link generation gen; unsent: not asked yet. */
static void ask_start(struct fx_work *w, struct peer *p, uint64_t gen, bool unsent)
{
    fx_work_start(w, p, gen);
    list_remove(&w->u.node);
    w->u.unsent = unsent;
    list_insert_tail(&p->asks, &w->u.node);
}

/*
 * A failure hook may fail other work (a READ its write-back): the very
 * next node of the peer's list, one further on, one on the other list.
 * Each piece of the generation's work is told once, in list order, the
 * questions first; what runs on another generation, and a question not
 * sent yet, stay until the peer itself is lost. A walk of the peer's lists
 * that goes on from a node a hook took off tells that node twice.
 */
static void test_fail_work_survives_hooks_that_fail_others(void **state)
{
    struct peer *a = fx_peer("node-a", 0xa1, 100);
    struct fx_work w[6], k[3];

    for (unsigned i = 0; i < 6; i++)
        fx_work_start(&w[i], a, i == 2 ? 9 : 7);
    ask_start(&k[0], a, 7, false);
    ask_start(&k[1], a, 7, true);
    ask_start(&k[2], a, 7, false);
    w[0].takes = &w[1];                 /* the next node */
    w[3].takes = &w[4];
    k[2].takes = &w[5];                 /* across the lists, ahead of the walk */

    peer_fail_work(a, 7, B10_ERR_PEER_LOST, "generation 7 ended");
    struct fx_work *want[] = { &k[0], &k[2], &w[5], &w[0], &w[1], &w[3], &w[4] };
    assert_int_equal(fx_nlost, sizeof(want) / sizeof(want[0]));
    for (unsigned i = 0; i < fx_nlost; i++)
        if (fx_lost[i] != want[i])
            fail_msg("failure %u told the wrong work", i);
    for (unsigned i = 0; i < fx_nlost; i++) {
        assert_int_equal(fx_lost[i]->status, B10_ERR_PEER_LOST);
        assert_string_equal(fx_lost[i]->detail, "generation 7 ended");
    }
    /* Another generation's transfer and an unsent question are still the peer's. */
    assert_int_equal(w[2].lost, 0);
    assert_int_equal(k[1].lost, 0);
    assert_ptr_equal(a->xfers.next, &w[2].u.node);
    assert_ptr_equal(a->xfers.next->next, &a->xfers);
    assert_ptr_equal(a->asks.next, &k[1].u.node);
    assert_ptr_equal(a->asks.next->next, &a->asks);

    /* The peer lost: everything on it, once. */
    peer_lost(a, B10_ERR_PEER_UNREACHABLE, "gone");
    assert_int_equal(fx_nlost, 9);
    assert_int_equal(w[2].lost, 1);
    assert_int_equal(k[1].lost, 1);
    assert_int_equal(w[2].status, B10_ERR_PEER_UNREACHABLE);
    assert_true(list_empty(&a->xfers));
    assert_true(list_empty(&a->asks));
}

int main(void)
{
    static const struct fx_settings two_peers = { .max_peers = 2 };
    static const struct fx_settings idle_1s = { .peer_idle_ms = 1000 };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_add_and_find, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_newer_boot_replaces, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_fail_work_survives_hooks_that_fail_others, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_prestate_setup_teardown(test_full_table_evicts_idle_longest, fx_setup,
                                                 fx_teardown, (void *)&two_peers),
        cmocka_unit_test_prestate_setup_teardown(test_full_table_of_used_entries_refuses, fx_setup,
                                                 fx_teardown, (void *)&two_peers),
        cmocka_unit_test_prestate_setup_teardown(test_idle_sweep_spares_ref_and_hold, fx_setup,
                                                 fx_teardown, (void *)&idle_1s),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
