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
#include "nodeid.h"

/* A remote daemon's side of one handshake. */
struct opener {
    uint64_t daemon_id;
    const char *name;
    uint64_t gen;
    uint8_t nonce[AUTH_NONCE_BYTES];
    struct hello_ack ack;               /* what this daemon answered */
    struct nodeid *id;                  /* certified: the node certificate it proves with */
    uint8_t kx[AUTH_KX_BYTES], kx_secret[AUTH_KX_BYTES];
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
    ProtobufCBinaryData certs[NODEID_MAX_CERTS];
    uint8_t sig[NODEID_MAX_SIG], transcript[HELLO_TRANSCRIPT_BYTES];
    size_t sig_length;
    if (o->id != NULL) {
        struct nodeid_chain chain;
        auth_kx_keypair(o->kx, o->kx_secret);
        struct hello_transcript t = {
            .sender_id = o->daemon_id, .receiver_id = fx_d.daemon_id, .gen = o->gen,
            .incarnation = 100, .name = o->name, .opener_nonce = o->nonce, .opener_kx = o->kx,
            .address = fx_worker_address, .address_length = fx_worker_address_length,
        };
        hello_transcript(&t, transcript);
        assert_int_equal(nodeid_sign(o->id, transcript, sizeof(transcript), sig, &sig_length), B10_OK);
        nodeid_chain_of(o->id, &chain);
        for (unsigned i = 0; i < chain.count; i++)
            certs[i] = (ProtobufCBinaryData){ chain.length[i], (uint8_t *)chain.der[i] };
        hello.n_node_chain = chain.count;
        hello.node_chain = certs;
        hello.kx_public = (ProtobufCBinaryData){ AUTH_KX_BYTES, o->kx };
        hello.node_sig = (ProtobufCBinaryData){ sig_length, sig };
    }
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
    if (o->id != NULL) {
        /* The answer proves this daemon's name; the X25519 secret joins the keys. */
        uint8_t shared[AUTH_KX_BYTES], transcript[HELLO_TRANSCRIPT_BYTES];
        char detail[512];
        struct hello_transcript t = {
            .ack = true, .sender_id = fx_d.daemon_id, .receiver_id = o->daemon_id, .gen = o->gen,
            .incarnation = o->ack.incarnation, .name = o->ack.name, .opener_nonce = o->nonce,
            .opener_kx = o->kx, .nonce = o->ack.nonce, .kx = o->ack.proof.kx_public,
        };
        assert_true(o->ack.proof.present);
        hello_transcript(&t, transcript);
        assert_int_equal(nodeid_verify(o->id, &o->ack.proof.chain, fx_d.cfg.name, transcript,
                                       sizeof(transcript), o->ack.proof.sig,
                                       o->ack.proof.sig_length, detail, sizeof(detail)), B10_OK);
        assert_int_equal(auth_kx_shared(o->kx_secret, o->kx, o->ack.proof.kx_public,
                                        o->ack.proof.kx_public, shared), B10_OK);
        auth_link_derive_kx(&fx_d.keys.keys[0], o->daemon_id, fx_d.daemon_id, o->gen, o->nonce,
                            o->ack.nonce, shared, true, &link);
    } else {
        auth_link_derive(&fx_d.keys.keys[0], o->daemon_id, fx_d.daemon_id, o->gen, o->nonce,
                         o->ack.nonce, true, &link);
    }
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

/* ---------------------------------------------------------------- node certificates */

static char cert_dir[64];

/* A CA, certificates for this daemon and the nodes named, this daemon certified. */
static void certify(const char *const *names, struct nodeid **ids)
{
    char cert[256], key[256], ca[128], cakey[128], detail[512];

    snprintf(cert_dir, sizeof(cert_dir), "/tmp/b10-test-peer-hello.XXXXXX");
    assert_non_null(mkdtemp(cert_dir));
    snprintf(ca, sizeof(ca), "%s/ca.crt", cert_dir);
    snprintf(cakey, sizeof(cakey), "%s/ca.key", cert_dir);
    assert_int_equal(nodeid_make_ca(cert_dir, 1, detail, sizeof(detail)), B10_OK);
    for (int i = -1; i < 0 || names[i] != NULL; i++) {
        const char *name = i < 0 ? fx_d.cfg.name : names[i];
        snprintf(cert, sizeof(cert), "%s/%s.crt", cert_dir, name);
        snprintf(key, sizeof(key), "%s/%s.key", cert_dir, name);
        if (nodeid_issue(ca, cakey, name, cert_dir, -60, 86400, detail, sizeof(detail)) != B10_OK ||
            nodeid_load(cert, key, ca, name, i < 0 ? &fx_d.nodeid : &ids[i], detail,
                        sizeof(detail)) != B10_OK)
            fail_msg("%s: %s", name, detail);
    }
}

static void uncertify(struct nodeid **ids, unsigned n)
{
    char cmd[128];

    for (unsigned i = 0; i < n; i++)
        nodeid_free(ids[i]);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", cert_dir);
    assert_int_equal(system(cmd), 0);
}

/*
 * A certified daemon links a HELLO that proves its name (and its answer
 * proves this daemon's, the X25519 secret in the link's keys); it refuses,
 * saying why, a HELLO without a certificate and one whose certificate is
 * another node's, and neither reaches the table.
 */
static void test_certified_handshake(void **state)
{
    static const char *const names[] = { "node-x", NULL };
    struct nodeid *ids[1];

    certify(names, ids);
    struct opener x = { .daemon_id = 0xa1, .name = "node-x", .gen = 1, .id = ids[0] };
    send_hello(&x);
    assert_true(confirm(&x));
    assert_non_null(peer_find_name(&fx_d, "node-x"));

    struct opener bare = { .daemon_id = 0xb1, .name = "node-b", .gen = 1 };
    send_hello(&bare);
    assert_true(answered(&bare));
    assert_int_equal(bare.ack.status, B10_ERR_PERMISSION);
    assert_non_null(strstr(bare.ack.detail, "has no node certificate"));

    /* node-x's key, claiming node-b as a later boot: refused, node-b has no entry. */
    struct opener claim = { .daemon_id = 0xb2, .name = "node-b", .gen = 1, .id = ids[0] };
    send_hello(&claim);
    assert_true(answered(&claim));
    assert_int_equal(claim.ack.status, B10_ERR_PERMISSION);
    assert_non_null(strstr(claim.ack.detail, "does not name 'node-b'"));
    assert_null(peer_find_name(&fx_d, "node-b"));
    assert_int_equal(fx_d.npeers, 1);
    uncertify(ids, 1);
}

/*
 * HELLOs are budgeted per certified node: one node's key, under many
 * daemon ids, spends its own bucket, and another node is still answered;
 * one node keeps at most 4 handshakes waiting.
 */
static void test_certified_budget_per_node(void **state)
{
    static const char *const names[] = { "node-x", "node-b", NULL };
    struct nodeid *ids[2];
    struct opener x[8];

    certify(names, ids);
    for (int i = 0; i < 3; i++) {
        x[i] = (struct opener){ .daemon_id = 0xa1 + (uint64_t)i, .name = "node-x", .gen = 1,
                                .id = ids[0] };
        send_hello(&x[i]);
    }
    assert_true(answered(&x[0]));
    assert_true(answered(&x[1]));
    assert_false(answered(&x[2]));      /* node-x's bucket is spent */
    struct opener b = { .daemon_id = 0xb1, .name = "node-b", .gen = 1, .id = ids[1] };
    send_hello(&b);
    assert_true(answered(&b));          /* node-b's is its own */
    assert_int_equal(b.ack.status, B10_OK);

    /* Many seconds of HELLOs from node-x under new ids: 4 of them wait, its newest. */
    for (int i = 3; i < 8; i++) {
        fx_clock_ms += 1000;
        x[i] = (struct opener){ .daemon_id = 0xa1 + (uint64_t)i, .name = "node-x", .gen = 1,
                                .id = ids[0] };
        send_hello(&x[i]);
        assert_true(answered(&x[i]));
    }
    unsigned of_x = 0;
    for (int i = 0; i < 8; i++)
        of_x += peer_hello_pending_of(&fx_d, x[i].daemon_id) != NULL;
    assert_int_equal(of_x, 4);
    assert_non_null(peer_hello_pending_of(&fx_d, 0xa8));
    assert_non_null(peer_hello_pending_of(&fx_d, 0xb1));
    assert_true(confirm(&b));
    assert_non_null(peer_find_name(&fx_d, "node-b"));
    uncertify(ids, 2);
}

/*
 * A proof shows a HELLO's name, not the boot id it claims. node-b, certified, claims the
 * boot of linked node-x at a far generation: dropped unanswered, and node-x's own next
 * HELLO is answered, not taken for a replay. Then a HELLO without a proof claiming
 * node-x's boot while node-x's next handshake waits: refused, and node-x still confirms.
 */
static void test_certified_boot_is_its_names(void **state)
{
    static const char *const names[] = { "node-x", "node-b", NULL };
    struct nodeid *ids[2];

    certify(names, ids);
    struct opener x = { .daemon_id = 0xa1, .name = "node-x", .gen = 1, .id = ids[0] };
    send_hello(&x);
    assert_true(confirm(&x));
    struct opener b = { .daemon_id = 0xa1, .name = "node-b", .gen = 1000000, .id = ids[1] };
    send_hello(&b);
    assert_false(answered(&b));
    struct peer *px = peer_find_name(&fx_d, "node-x");
    assert_non_null(px);
    assert_true(px->hello_gen_seen < 1000000);
    struct opener x2 = { .daemon_id = 0xa1, .name = "node-x", .gen = 2, .id = ids[0] };
    send_hello(&x2);
    assert_true(answered(&x2));
    assert_int_equal(x2.ack.status, B10_OK);
    /* The same name without a proof: answered with a refusal, node-x's handshake kept. */
    struct opener bare = { .daemon_id = 0xa1, .name = "node-x", .gen = 3 };
    send_hello(&bare);
    assert_true(answered(&bare));
    assert_int_not_equal(bare.ack.status, B10_OK);
    assert_true(confirm(&x2));
    uncertify(ids, 2);
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
        cmocka_unit_test_setup_teardown(test_certified_handshake, fx_setup, fx_teardown),
        cmocka_unit_test_prestate_setup_teardown(test_certified_budget_per_node, fx_setup,
                                                 fx_teardown, (void *)&two_a_second),
        cmocka_unit_test_setup_teardown(test_certified_boot_is_its_names, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
