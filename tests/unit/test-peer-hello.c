/*
 * test-peer-hello.c — daemon/link/peer-hello.c: the handshakes this daemon
 * answers.
 *
 * A HELLO that opened under the cluster key is answered and held pending,
 * apart from the peer table, until a message under the new link's keys
 * confirms its opener is here now; unconfirmed, the sweep expires it after
 * --connect-timeout-ms. HELLOs beyond --max-hellos-per-s are dropped
 * unanswered; one answered with a refusal opens nothing. Every HELLO here
 * goes the wire's way in: peer_take_control, then peer_on_control. The
 * daemon is peer-fixture.h's.
 */
#include "peer-fixture.h"

#include "hello.h"

/* A remote daemon's side of one handshake. */
struct opener {
    uint64_t daemon_id;
    const char *name;
    uint64_t gen;
    uint8_t nonce[AUTH_NONCE_BYTES];
    struct hello_ack ack;               /* what this daemon answered */
};

/* Hand a message to the link rooms as the wire does; false when it was dropped unread. */
static bool deliver(uint64_t tag, uint8_t *buf, size_t length)
{
    void *cookie = peer_take_control(&fx_d, tag, length);

    if (cookie == NULL) {
        free(buf);
        return false;
    }
    peer_on_control(&fx_d, cookie, tag, buf, length);
    return true;
}

/* msg encoded after an envelope's header, with the envelope's room: *length_p is its payload's. */
static uint8_t *pack(const B10__Peer__Msg *msg, size_t *length_p)
{
    size_t length = b10__peer__msg__get_packed_size(msg);
    uint8_t *buf = malloc(AUTH_OVERHEAD + length);

    assert_non_null(buf);
    b10__peer__msg__pack(msg, buf + AUTH_HEADER_BYTES);
    *length_p = length;
    return buf;
}

/* o sends this daemon a HELLO under the cluster key. */
static void send_hello(struct opener *o)
{
    B10__Peer__Hello hello = B10__PEER__HELLO__INIT;
    B10__Peer__Msg msg = B10__PEER__MSG__INIT;

    auth_random(o->nonce, sizeof(o->nonce));
    hello.version = B10_PEER_PROTOCOL_VERSION;
    hello.daemon_id = o->daemon_id;
    hello.to_daemon_id = fx_d.daemon_id;
    hello.gen = o->gen;
    hello.nonce = (ProtobufCBinaryData){ sizeof(o->nonce), o->nonce };
    hello.worker_address = (ProtobufCBinaryData){ fx_worker_address_length, fx_worker_address };
    hello.name = (char *)o->name;
    hello.incarnation = 100;
    msg.body_case = B10__PEER__MSG__BODY_HELLO;
    msg.hello = &hello;
    size_t length;
    uint8_t *buf = pack(&msg, &length);
    auth_seal(&fx_d.keys.keys[0], AUTH_KIND_HELLO, o->daemon_id, fx_d.daemon_id, buf, length);
    assert_true(deliver(TAG_HELLO, buf, AUTH_OVERHEAD + length));
}

/* Did this daemon answer o's HELLO? If so, o->ack is the answer. */
static bool answered(struct opener *o)
{
    const struct auth_key *key = &fx_d.keys.keys[0];
    struct tag_link tags;
    struct auth_header hdr;
    const uint8_t *payload;
    size_t payload_length;
    char detail[256];

    auth_ack_tags(key, o->daemon_id, fx_d.daemon_id, o->gen, o->nonce, &tags);
    uint64_t tag = tags_derive(&tags, 0, 0, TAG_KIND_HELLO_ACK);
    for (unsigned i = 0; i < fx_nsent; i++) {
        if (fx_sent[i].tag != tag)
            continue;
        assert_int_equal(auth_open(key, AUTH_KIND_HELLO_ACK, fx_sent[i].buf, fx_sent[i].length,
                                   &payload, &payload_length), AUTH_OK);
        assert_int_equal(auth_peek(fx_sent[i].buf, fx_sent[i].length, &hdr), B10_OK);
        assert_int_equal(hello_decode_ack(payload, payload_length, &hdr, &o->ack, detail,
                                          sizeof(detail)), B10_OK);
        return true;
    }
    return false;
}

/*
 * o, having read the answer, confirms the link with its first message under
 * the link's keys; false when that was dropped unread.
 */
static bool confirm(struct opener *o)
{
    B10__Peer__Confirm body = B10__PEER__CONFIRM__INIT;
    B10__Peer__Msg msg = B10__PEER__MSG__INIT;
    struct auth_link link;

    assert_true(answered(o));
    assert_int_equal(o->ack.status, B10_OK);
    auth_link_derive(&fx_d.keys.keys[0], o->daemon_id, fx_d.daemon_id, o->gen, o->nonce,
                     o->ack.nonce, true, &link);
    body.gen = o->gen;
    msg.body_case = B10__PEER__MSG__BODY_CONFIRM;
    msg.confirm = &body;
    size_t length;
    uint8_t *buf = pack(&msg, &length);
    assert_int_equal(auth_link_seal(&link, buf, length), B10_OK);
    return deliver(tags_derive(&link.tags, 0, 0, TAG_KIND_CONTROL), buf, AUTH_OVERHEAD + length);
}

/* ---------------------------------------------------------------- tests */

/* Answered, pending apart from the table; confirmed, it joins the table with its link up. */
static void test_confirmed_handshake_joins_table(void **state)
{
    struct opener o = { .daemon_id = 0xb1, .name = "node-b", .gen = 5 };

    send_hello(&o);
    assert_true(answered(&o));
    assert_int_equal(fx_d.handshakes.npending, 1);
    assert_int_equal(fx_d.npeers, 0);
    assert_int_equal(fx_eps_open, 1);           /* made to answer: no peer had one */
    assert_int_equal(fx_d.dispatch.unbound_inflight, 0);

    assert_true(confirm(&o));
    assert_int_equal(fx_d.handshakes.npending, 0);
    struct peer *p = peer_find(&fx_d, 0xb1);
    assert_non_null(p);
    assert_ptr_equal(peer_find_name(&fx_d, "node-b"), p);
    assert_true(p->in_up);
    assert_int_equal(p->in.tags.gen, 5);
    assert_int_equal(fx_eps_open, 1);           /* the answering endpoint is the peer's now */
    assert_non_null(p->ep);
    assert_int_equal(fx_d.stats.links_up, 1);
}

/* Never confirmed: the sweep expires it at --connect-timeout-ms, with its endpoint. */
static void test_pending_expires_on_sweep(void **state)
{
    struct opener o = { .daemon_id = 0xb1, .name = "node-b", .gen = 5 };
    uint64_t answered_ms = fx_clock_ms;

    send_hello(&o);
    assert_true(answered(&o));
    assert_int_equal(fx_d.handshakes.npending, 1);

    fx_clock_ms = answered_ms + fx_d.cfg.connect_timeout_ms - 1;
    peer_hello_sweep(&fx_d);
    assert_int_equal(fx_d.handshakes.npending, 1);
    fx_clock_ms = answered_ms + fx_d.cfg.connect_timeout_ms;
    peer_hello_sweep(&fx_d);
    assert_int_equal(fx_d.handshakes.npending, 0);
    assert_true(list_empty(&fx_d.handshakes.pending));
    assert_int_equal(fx_eps_open, 0);
    assert_int_equal(fx_d.npeers, 0);

    /* Its confirmation, late, is dropped unread: a message on a tag of no live link. */
    uint64_t stale = fx_d.stats.stale_messages;
    assert_false(confirm(&o));
    assert_null(peer_find(&fx_d, 0xb1));
    assert_int_equal(fx_d.npeers, 0);
    assert_int_equal(fx_d.stats.stale_messages, stale + 1);
}

/* --max-hellos-per-s: a bucket of one second's worth; past it HELLOs are dropped unanswered. */
static void test_hello_budget_refuses_beyond_rate(void **state)
{
    struct opener o[5] = {
        { .daemon_id = 0xb1, .name = "node-b", .gen = 1 },
        { .daemon_id = 0xc1, .name = "node-c", .gen = 1 },
        { .daemon_id = 0xd1, .name = "node-d", .gen = 1 },
        { .daemon_id = 0xe1, .name = "node-e", .gen = 1 },
        { .daemon_id = 0xf1, .name = "node-f", .gen = 1 },
    };

    for (int i = 0; i < 3; i++)
        send_hello(&o[i]);
    assert_true(answered(&o[0]));
    assert_true(answered(&o[1]));
    assert_false(answered(&o[2]));
    assert_int_equal(fx_d.stats.hellos_refused, 1);
    assert_int_equal(fx_d.handshakes.npending, 2);
    assert_int_equal(fx_eps_open, 2);           /* none made for the one dropped */
    assert_int_equal(fx_d.npeers, 0);

    /* Half a second later, one HELLO's worth has come back, and no more. */
    fx_clock_ms += 500;
    send_hello(&o[3]);
    send_hello(&o[4]);
    assert_true(answered(&o[3]));
    assert_false(answered(&o[4]));
    assert_int_equal(fx_d.stats.hellos_refused, 2);
    assert_int_equal(fx_d.handshakes.npending, 3);
}

/* A HELLO refused for want of room is answered so, and leaves nothing in the table. */
static void test_refused_hello_leaves_no_entry(void **state)
{
    struct peer *a = fx_peer("node-a", 0xa1, 100);
    struct opener o = { .daemon_id = 0xb1, .name = "node-b", .gen = 5 };

    peer_ref(a);                                /* a rank names it: the table has no room */
    send_hello(&o);
    assert_true(answered(&o));
    assert_int_equal(o.ack.status, B10_ERR_TOO_LARGE);
    assert_non_null(strstr(o.ack.detail, "--max-peers"));
    assert_int_equal(fx_d.npeers, 1);
    assert_null(peer_find(&fx_d, 0xb1));
    assert_null(peer_find_name(&fx_d, "node-b"));
    assert_ptr_equal(peer_find_name(&fx_d, "node-a"), a);

    /* What waits of it is a refusal with nothing to confirm, and its endpoint, until the sweep. */
    struct peer_pending *pend = peer_hello_pending_of(&fx_d, 0xb1);
    assert_non_null(pend);
    assert_true(pend->refused);
    assert_int_equal(fx_eps_open, 1);
    fx_clock_ms += fx_d.cfg.connect_timeout_ms;
    peer_hello_sweep(&fx_d);
    assert_int_equal(fx_d.handshakes.npending, 0);
    assert_int_equal(fx_eps_open, 0);
    assert_int_equal(fx_d.npeers, 1);
    assert_null(peer_find(&fx_d, 0xb1));
}

int main(void)
{
    static const struct fx_settings two_a_second = { .max_hellos_per_s = 2 };
    static const struct fx_settings one_peer = { .max_peers = 1 };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_confirmed_handshake_joins_table, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_pending_expires_on_sweep, fx_setup, fx_teardown),
        cmocka_unit_test_prestate_setup_teardown(test_hello_budget_refuses_beyond_rate, fx_setup,
                                                 fx_teardown, (void *)&two_a_second),
        cmocka_unit_test_prestate_setup_teardown(test_refused_hello_leaves_no_entry, fx_setup,
                                                 fx_teardown, (void *)&one_peer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
