/*
 * test-hello.c — daemon/io/hello.c: what a HELLO and a HELLO_ACK must say
 * before peer.c uses any of it. Each field out of line is refused (and the
 * reason says which); the ACK's limits, which shape every plan sent on the
 * link, are held to their bounds; a refusal carries only its reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frame.h"
#include "hello.h"
#include "peer.pb-c.h"

static uint8_t addr[64];
static size_t addr_len;
static uint8_t nonce[AUTH_NONCE_BYTES];

static int group_setup(void **state)
{
    static uint8_t worker[40];
    const void *addrs[1] = { worker };
    size_t lengths[1] = { sizeof(worker) };

    memset(worker, 0x5c, sizeof(worker));
    memset(nonce, 0x3d, sizeof(nonce));
    addr_len = wireaddr_size(1, lengths);
    if (addr_len > sizeof(addr))
        return -1;
    wireaddr_pack(addr, 1, addrs, lengths);
    return 0;
}

static const struct auth_header hdr = {
    .kind = AUTH_KIND_HELLO, .key_id = 9, .sender_id = 0x1111, .receiver_id = 0x2222,
};

static void good_hello(B10__Peer__Hello *h)
{
    b10__peer__hello__init(h);
    h->version = B10_PEER_PROTOCOL_VERSION;
    h->daemon_id = 0x1111;
    h->to_daemon_id = 0x2222;
    h->gen = 0x3333;
    h->nonce = (ProtobufCBinaryData){ sizeof(nonce), nonce };
    h->worker_address = (ProtobufCBinaryData){ addr_len, addr };
    h->name = "node-a.example";
    h->incarnation = 42;
}

/* Pack h as a Msg and decode it against hdr. */
static b10_status_t decode(const B10__Peer__Hello *h, struct hello *out, char *detail)
{
    B10__Peer__Msg m = B10__PEER__MSG__INIT;
    static uint8_t buf[HELLO_MAX_BYTES];
    B10__Peer__Msg *msg = NULL;

    m.body_case = B10__PEER__MSG__BODY_HELLO;
    m.hello = (B10__Peer__Hello *)h;
    size_t n = b10__peer__msg__pack(&m, buf);
    detail[0] = '\0';
    b10_status_t st = hello_decode(buf, n, &hdr, &msg, out, detail, 200);
    if (st == B10_OK) {
        assert_non_null(msg);
        b10__peer__msg__free_unpacked(msg, NULL);
    }
    return st;
}

static void test_hello_good(void **state)
{
    B10__Peer__Hello h;
    struct hello out;
    char detail[200];

    good_hello(&h);
    assert_int_equal(decode(&h, &out, detail), B10_OK);
    assert_int_equal(out.daemon_id, 0x1111);
    assert_int_equal(out.to_daemon_id, 0x2222);
    assert_int_equal(out.gen, 0x3333);
    assert_int_equal(out.incarnation, 42);
    assert_string_equal(out.name, "node-a.example");
    assert_memory_equal(out.nonce, nonce, sizeof(nonce));
    assert_int_equal(out.address_length, addr_len);
}

static void test_hello_refusals(void **state)
{
    B10__Peer__Hello h;
    struct hello out;
    char detail[200];
    char long_name[80];

    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    struct {
        const char *why;    /* in the detail */
        void (*bend)(B10__Peer__Hello *h);
    } cases[] = {
        { "version", NULL }, { "envelope", NULL }, { "envelope", NULL }, { "envelope", NULL },
        { "nonce", NULL }, { "name", NULL }, { "name", NULL }, { "name", NULL },
        { "incarnation", NULL }, { "address", NULL }, { "address", NULL }, { "address", NULL },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        good_hello(&h);
        uint8_t bad_addr[8] = { 'b', '1', '0', 'w', 9, 0, 0, 0 };
        switch (i) {
        case 0: h.version = 2; break;
        case 1: h.daemon_id = 0x1112; break;            /* not the envelope's sender */
        case 2: h.to_daemon_id = 0; break;
        case 3: h.gen = 0; break;
        case 4: h.nonce.len = 16; break;
        case 5: h.name = ""; break;
        case 6: h.name = "has space"; break;
        case 7: h.name = long_name; break;
        case 8: h.incarnation = 0; break;
        case 9: h.worker_address.len = 0; break;
        case 10: h.worker_address = (ProtobufCBinaryData){ sizeof(bad_addr), bad_addr }; break;
        case 11: h.worker_address.len = addr_len - 1; break;
        }
        assert_int_equal(decode(&h, &out, detail), B10_ERR_PEER_PROTOCOL);
        assert_non_null(strstr(detail, cases[i].why));
    }
    /* Not a HELLO at all, and garbage. */
    B10__Peer__Msg m = B10__PEER__MSG__INIT;
    B10__Peer__Ready rd = B10__PEER__READY__INIT;
    B10__Peer__Msg *msg = NULL;
    uint8_t buf[64];
    m.body_case = B10__PEER__MSG__BODY_READY;
    m.ready = &rd;
    size_t n = b10__peer__msg__pack(&m, buf);
    assert_int_equal(hello_decode(buf, n, &hdr, &msg, &out, detail, sizeof(detail)),
                     B10_ERR_PEER_PROTOCOL);
    memset(buf, 0xff, sizeof(buf));
    assert_int_equal(hello_decode(buf, sizeof(buf), &hdr, &msg, &out, detail, sizeof(detail)),
                     B10_ERR_PEER_PROTOCOL);
    assert_null(msg);
}

/* ---------------------------------------------------------------- HELLO_ACK */

static const struct auth_header ack_hdr = {
    .kind = AUTH_KIND_HELLO_ACK, .key_id = 9, .sender_id = 0x2222, .receiver_id = 0x1111,
};

static void good_ack(B10__Peer__HelloAck *a)
{
    b10__peer__hello_ack__init(a);
    a->version = B10_PEER_PROTOCOL_VERSION;
    a->daemon_id = 0x2222;
    a->gen = 0x3333;
    a->status = B10__STATUS__OK;
    a->detail = "";
    a->max_chunk_bytes = 4 << 20;
    a->max_control_bytes = 64 << 20;
    a->max_pieces = (64 << 20) / SPAN_BYTES;
    a->opener_nonce = (ProtobufCBinaryData){ sizeof(nonce), nonce };
    a->nonce = (ProtobufCBinaryData){ sizeof(nonce), nonce };
    a->name = "node-b";
    a->incarnation = 43;
}

static b10_status_t decode_ack(const B10__Peer__HelloAck *a, struct hello_ack *out, char *detail)
{
    B10__Peer__Msg m = B10__PEER__MSG__INIT;
    static uint8_t buf[HELLO_ACK_MAX_BYTES];

    m.body_case = B10__PEER__MSG__BODY_HELLO_ACK;
    m.hello_ack = (B10__Peer__HelloAck *)a;
    size_t n = b10__peer__msg__pack(&m, buf);
    detail[0] = '\0';
    return hello_decode_ack(buf, n, &ack_hdr, out, detail, 200);
}

static void test_ack_good_and_refusal(void **state)
{
    B10__Peer__HelloAck a;
    struct hello_ack out;
    char detail[200];

    good_ack(&a);
    assert_int_equal(decode_ack(&a, &out, detail), B10_OK);
    assert_int_equal(out.status, B10_OK);
    assert_int_equal(out.max_chunk, 4 << 20);
    assert_int_equal(out.incarnation, 43);
    assert_string_equal(out.name, "node-b");
    /* A refusal: its reason, no limits needed, no nonce of its own. */
    good_ack(&a);
    a.status = B10__STATUS__ERR_TOO_LARGE;
    a.detail = "no room for another peer";
    a.max_chunk_bytes = a.max_control_bytes = a.max_pieces = 0;
    a.nonce.len = 0;
    assert_int_equal(decode_ack(&a, &out, detail), B10_OK);
    assert_int_equal(out.status, B10_ERR_TOO_LARGE);
    assert_string_equal(out.detail, "no room for another peer");
    assert_string_equal(out.name, "node-b");   /* who refuses is part of a refusal */
    a.name = "";
    assert_int_equal(decode_ack(&a, &out, detail), B10_ERR_PEER_PROTOCOL);
}

static void test_ack_limits(void **state)
{
    B10__Peer__HelloAck a;
    struct hello_ack out;
    char detail[200];

    for (int i = 0; i < 11; i++) {
        good_ack(&a);
        const char *why = "range";
        switch (i) {
        case 0: a.max_chunk_bytes = 1; break;                   /* millions of chunks */
        case 1: a.max_chunk_bytes = HELLO_MIN_CHUNK - 1; break;
        case 2: a.max_chunk_bytes = HELLO_MAX_CHUNK + 1; break;
        case 3: a.max_control_bytes = 0; break;
        case 4: a.max_control_bytes = HELLO_MAX_CONTROL + 1; break;
        case 5: a.max_pieces = 0; break;
        case 6: a.max_pieces = HELLO_MAX_PIECES + 1; break;
        case 7: a.status = 1000; why = "status"; break;
        case 8: a.status = B10__STATUS__IN_PROGRESS; why = "status"; break;
        case 9: a.opener_nonce.len = 31; why = "nonce"; break;
        case 10: a.daemon_id = 0x2223; why = "envelope"; break;
        }
        assert_int_equal(decode_ack(&a, &out, detail), B10_ERR_PEER_PROTOCOL);
        assert_non_null(strstr(detail, why));
    }
    /* The bounds themselves are taken. */
    good_ack(&a);
    a.max_chunk_bytes = HELLO_MIN_CHUNK;
    a.max_control_bytes = HELLO_MIN_CONTROL;
    a.max_pieces = 1;
    assert_int_equal(decode_ack(&a, &out, detail), B10_OK);
}

/*
 * A node's proof (nodeid.h): all of chain, X25519 key and signature, or
 * none; at most 4 certificates of 8 KiB in all, a signature of at most
 * NODEID_MAX_SIG bytes. What passes is copied out of a HELLO_ACK whole.
 */
static void test_proof_bounds(void **state)
{
    static uint8_t der[5][4200], kx[AUTH_KX_BYTES + 1], sig[NODEID_MAX_SIG + 1];
    ProtobufCBinaryData certs[5];
    B10__Peer__Hello h;
    B10__Peer__HelloAck a;
    struct hello out;
    struct hello_ack ack;
    char detail[200];

    for (int i = 0; i < 5; i++) {
        memset(der[i], 0x30 + i, sizeof(der[i]));
        certs[i] = (ProtobufCBinaryData){ 100, der[i] };
    }
    memset(kx, 0x4b, sizeof(kx));
    memset(sig, 0x53, sizeof(sig));
    const struct {
        size_t ncerts, len0, kx, sig;
        const char *why;            /* NULL: accepted */
    } cases[] = {
        { 0, 0, 0, 0, NULL },
        { 2, 100, AUTH_KX_BYTES, 64, NULL },
        { 4, 2048, AUTH_KX_BYTES, NODEID_MAX_SIG, NULL },
        { 1, 100, 0, 64, "without its chain, X25519 key or signature" },
        { 1, 100, AUTH_KX_BYTES, 0, "without its chain, X25519 key or signature" },
        { 0, 0, AUTH_KX_BYTES, 64, "without its chain, X25519 key or signature" },
        { 1, 100, AUTH_KX_BYTES - 1, 64, "without its chain, X25519 key or signature" },
        { 1, 100, AUTH_KX_BYTES, NODEID_MAX_SIG + 1, "without its chain, X25519 key or signature" },
        { 5, 100, AUTH_KX_BYTES, 64, "more than 4 certificates" },
        { 2, 4100, AUTH_KX_BYTES, 64, "more than 8192 bytes" },
        { 1, 0, AUTH_KX_BYTES, 64, "more than 8192 bytes" },    /* an empty certificate */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        certs[0].len = certs[1].len = cases[i].len0;
        good_hello(&h);
        h.n_node_chain = cases[i].ncerts;
        h.node_chain = certs;
        h.kx_public = (ProtobufCBinaryData){ cases[i].kx, kx };
        h.node_sig = (ProtobufCBinaryData){ cases[i].sig, sig };
        b10_status_t st = decode(&h, &out, detail);
        if (cases[i].why == NULL) {
            if (st != B10_OK)
                fail_msg("case %zu: refused: %s", i, detail);
            assert_int_equal(out.proof.present, cases[i].ncerts > 0);
            assert_int_equal(out.proof.chain.count, cases[i].ncerts);
            assert_int_equal(out.proof.sig_length, cases[i].sig);
        } else if (st != B10_ERR_PEER_PROTOCOL || strstr(detail, cases[i].why) == NULL) {
            fail_msg("case %zu: %s, '%s'; expected '%s'", i, b10_status_name(st), detail,
                     cases[i].why);
        }
    }
    /* A HELLO_ACK's proof is copied out: the chain lies in the answer's own room. */
    certs[0].len = 300;
    certs[1].len = 200;
    good_ack(&a);
    a.n_node_chain = 2;
    a.node_chain = certs;
    a.kx_public = (ProtobufCBinaryData){ AUTH_KX_BYTES, kx };
    a.node_sig = (ProtobufCBinaryData){ 64, sig };
    assert_int_equal(decode_ack(&a, &ack, detail), B10_OK);
    assert_true(ack.proof.present);
    assert_int_equal(ack.proof.chain.count, 2);
    assert_ptr_equal(ack.proof.chain.der[0], ack.chain_bytes);
    assert_ptr_equal(ack.proof.chain.der[1], ack.chain_bytes + 300);
    assert_memory_equal(ack.proof.chain.der[1], der[1], 200);
    assert_memory_equal(ack.proof.kx_public, kx, AUTH_KX_BYTES);
    a.n_node_chain = 5;
    assert_int_equal(decode_ack(&a, &ack, detail), B10_ERR_PEER_PROTOCOL);
    assert_non_null(strstr(detail, "more than 4 certificates"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hello_good),
        cmocka_unit_test(test_hello_refusals),
        cmocka_unit_test(test_ack_good_and_refusal),
        cmocka_unit_test(test_ack_limits),
        cmocka_unit_test(test_proof_bounds),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
