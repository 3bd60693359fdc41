/*
 * test-knock.c — daemon/io/knock.c: the KNOCK and KNOCK_ACK a door reads from
 * anyone who reaches it, and a knocker reads back.
 *
 * Both round trip field for field. What does not open under a cluster key
 * the ring holds is refused unauthenticated (the door then answers nothing):
 * another key, a key of another secret under a held key's id, a key of this
 * boot alone, the other kind, a length word that disagrees with the bytes,
 * every truncation, every flipped byte. What opens but says something out
 * of bounds is refused authenticated: no addresses or 17, an address of
 * neither 4 nor 16 bytes, a bad name, another version or nonce size, no
 * sender, an answer with a status outside the map. The frame's length word
 * is held to its bounds, and knock_pack to its buffer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>

#include "keys.h"

#include "knock.h"
#include "wireaddr.h"
#include "peer.pb-c.h"

static struct auth_key key_a, key_b;
static struct auth_keyring ring;        /* key_a */

static int group_setup(void **state)
{
    if (keys_setup() != 0 || keys_make("a.key", &key_a) != 0 || keys_make("b.key", &key_b) != 0 ||
        auth_keyring_add(&ring, &key_a) != 0)
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    return keys_teardown();
}

/* ---------------------------------------------------------------- helpers */

static struct gate_addr addr(const char *text)
{
    struct gate_addr a = { .family = strchr(text, ':') ? 6 : 4 };
    assert_int_equal(inet_pton(a.family == 4 ? AF_INET : AF_INET6, text, a.bytes), 1);
    return a;
}

static void good_knock(struct knock *k)
{
    memset(k, 0, sizeof(*k));
    k->sender_id = 0x1111222233334444;
    snprintf(k->name, sizeof(k->name), "node-a.example");
    k->sent_ms = 1764640000123;
    for (int i = 0; i < KNOCK_NONCE_BYTES; i++)
        k->nonce[i] = (uint8_t)(0xa0 + i);
    k->addrs[0] = addr("127.0.0.1");
    k->addrs[1] = addr("::1");
    k->addrs[2] = addr("2001:db8::42");
    k->addrs[3] = addr("192.0.2.77");
    k->naddrs = 4;
}

static void good_ack(struct knock *k)
{
    good_knock(k);
    k->ack = true;
    k->sender_id = 0x5555666677778888;
    k->sent_ms = 0;                     /* an answer carries no clock */
    snprintf(k->name, sizeof(k->name), "node-b");
    k->status = B10_OK;
    /* The answering boot and its worker address: one worker of three bytes. */
    k->incarnation = 1764640000000000000;
    const void *w[1] = { "ucx" };
    size_t wl[1] = { 3 };
    k->address_length = wireaddr_size(1, wl);
    wireaddr_pack(k->address, 1, w, wl);
}

static char detail[KNOCK_DETAIL_MAX];

/* Open a framed message (a copy in a buffer of exactly n bytes, so that an over-read shows). */
static b10_status_t open_as(const struct auth_keyring *r, bool ack, const uint8_t *buf, size_t n,
                            struct knock *out, bool *authenticated)
{
    uint8_t *copy = malloc(n ? n : 1);
    assert_non_null(copy);
    if (n > 0)
        memcpy(copy, buf, n);
    detail[0] = '\0';
    *authenticated = true;              /* knock_open must say */
    b10_status_t st = knock_open(r, ack, copy, n, out, authenticated, detail, sizeof(detail));
    free(copy);
    if (st != B10_OK && detail[0] == '\0')
        fail_msg("a refusal without its reason");
    return st;
}

static size_t pack(const struct auth_key *key, const struct knock *k, uint8_t *buf)
{
    size_t n = knock_pack(key, k, NULL, buf, KNOCK_MAX_BYTES);
    assert_true(n > 4 + AUTH_OVERHEAD);
    return n;
}

/* Refused, and authenticated or not as said. */
static void refused(const struct auth_keyring *r, bool ack, const uint8_t *buf, size_t n,
                    bool want_auth, const char *what)
{
    struct knock out;
    bool authenticated;
    b10_status_t st = open_as(r, ack, buf, n, &out, &authenticated);
    if (st == B10_OK)
        fail_msg("%s: opened", what);
    if (st != B10_ERR_PEER_PROTOCOL)
        fail_msg("%s: %s, not B10_ERR_PEER_PROTOCOL", what, b10_status_name(st));
    if (authenticated != want_auth)
        fail_msg("%s: refused %s (%s)", what, authenticated ? "authenticated" : "unauthenticated",
                 detail);
}

/* A payload sealed and framed as knock_pack does, whatever it says. */
static size_t seal_raw(const struct auth_key *key, enum auth_kind kind, uint64_t sender,
                       const uint8_t *payload, size_t len, uint8_t *buf)
{
    assert_true(4 + AUTH_OVERHEAD + len <= KNOCK_MAX_BYTES);
    memcpy(buf + 4 + AUTH_HEADER_BYTES, payload, len);
    auth_seal(key, kind, sender, 0, buf + 4, len);
    uint32_t word = (uint32_t)(AUTH_OVERHEAD + len);
    for (int b = 0; b < 4; b++)
        buf[b] = (uint8_t)(word >> (8 * b));
    return 4 + word;
}

/* The fields of a KNOCK as protobuf, every one as good_knock has it. */
struct raw_knock {
    B10__Peer__Knock m;
    uint8_t nonce[KNOCK_NONCE_BYTES];
    uint8_t bytes[KNOCK_MAX_ADDRS + 2][16];
    ProtobufCBinaryData addrs[KNOCK_MAX_ADDRS + 2];
};

static void raw_knock_init(struct raw_knock *r)
{
    b10__peer__knock__init(&r->m);
    r->m.version = KNOCK_VERSION;
    r->m.name = "node-a";
    r->m.sent_ms = 99;
    memset(r->nonce, 0x5a, sizeof(r->nonce));
    r->m.nonce = (ProtobufCBinaryData){ KNOCK_NONCE_BYTES, r->nonce };
    for (int i = 0; i < KNOCK_MAX_ADDRS + 2; i++) {
        memset(r->bytes[i], 0, 16);
        r->bytes[i][0] = 10;
        r->bytes[i][3] = (uint8_t)(i + 1);
        r->addrs[i] = (ProtobufCBinaryData){ 4, r->bytes[i] };
    }
    r->m.n_addresses = 2;
    r->m.addresses = r->addrs;
}

static size_t raw_knock_seal(const struct raw_knock *r, uint64_t sender, uint8_t *buf)
{
    uint8_t payload[KNOCK_MAX_BYTES];
    size_t len = b10__peer__knock__get_packed_size(&r->m);
    assert_true(len <= sizeof(payload));
    b10__peer__knock__pack(&r->m, payload);
    return seal_raw(&key_a, AUTH_KIND_KNOCK, sender, payload, len, buf);
}

/* ---------------------------------------------------------------- round trips */

static void check_same(const struct knock *in, const struct knock *out, uint64_t key_id)
{
    assert_int_equal(out->ack, in->ack);
    assert_int_equal(out->sender_id, in->sender_id);
    assert_int_equal(out->key_id, key_id);
    assert_string_equal(out->name, in->name);
    assert_int_equal(out->sent_ms, in->sent_ms);
    assert_memory_equal(out->nonce, in->nonce, KNOCK_NONCE_BYTES);
    assert_int_equal(out->status, in->status);
    assert_string_equal(out->detail, in->detail);
    assert_int_equal(out->naddrs, in->naddrs);
    for (unsigned i = 0; i < in->naddrs; i++)
        assert_true(gate_addr_eq(&out->addrs[i], &in->addrs[i]));
}

static void test_knock_round_trip(void **state)
{
    struct knock k, out;
    uint8_t buf[KNOCK_MAX_BYTES];
    bool authenticated;

    good_knock(&k);
    size_t n = pack(&key_a, &k, buf);
    assert_int_equal(knock_frame_length(buf, n, false), n);
    assert_int_equal(open_as(&ring, false, buf, n, &out, &authenticated), B10_OK);
    assert_true(authenticated);
    check_same(&k, &out, key_a.id);

    /* The most addresses a knock may list, of both families. */
    for (unsigned i = 0; i < KNOCK_MAX_ADDRS; i++) {
        k.addrs[i] = addr(i % 2 ? "2001:db8::" : "198.51.100.0");
        k.addrs[i].bytes[k.addrs[i].family == 4 ? 3 : 15] = (uint8_t)i;
    }
    k.naddrs = KNOCK_MAX_ADDRS;
    n = pack(&key_a, &k, buf);
    assert_int_equal(open_as(&ring, false, buf, n, &out, &authenticated), B10_OK);
    check_same(&k, &out, key_a.id);

    /* Told of more, knock_pack sends the most a door takes. */
    k.naddrs = KNOCK_MAX_ADDRS + 5;
    n = pack(&key_a, &k, buf);
    assert_int_equal(open_as(&ring, false, buf, n, &out, &authenticated), B10_OK);
    assert_int_equal(out.naddrs, KNOCK_MAX_ADDRS);

    /* A keyring of several keys opens what any one of them sealed. */
    struct auth_keyring two = { 0 };
    assert_int_equal(auth_keyring_add(&two, &key_b), 0);
    assert_int_equal(auth_keyring_add(&two, &key_a), 0);
    good_knock(&k);
    n = pack(&key_a, &k, buf);
    assert_int_equal(open_as(&two, false, buf, n, &out, &authenticated), B10_OK);
    assert_int_equal(out.key_id, key_a.id);
    n = pack(&key_b, &k, buf);
    assert_int_equal(open_as(&two, false, buf, n, &out, &authenticated), B10_OK);
    assert_int_equal(out.key_id, key_b.id);
}

static void test_ack_round_trip(void **state)
{
    struct knock k, out;
    uint8_t buf[KNOCK_MAX_BYTES];
    bool authenticated;

    good_ack(&k);
    size_t n = pack(&key_a, &k, buf);
    assert_int_equal(open_as(&ring, true, buf, n, &out, &authenticated), B10_OK);
    assert_true(authenticated);
    check_same(&k, &out, key_a.id);

    /* A refusal lists no addresses, and says why. */
    good_ack(&k);
    k.status = B10_ERR_UNAUTHENTICATED;
    k.naddrs = 0;
    snprintf(k.detail, sizeof(k.detail), "the knock's clock is 61000 ms from this daemon's");
    n = pack(&key_a, &k, buf);
    assert_int_equal(open_as(&ring, true, buf, n, &out, &authenticated), B10_OK);
    check_same(&k, &out, key_a.id);

    /* A detail as long as the field holds. */
    memset(k.detail, 'x', sizeof(k.detail) - 1);
    k.detail[sizeof(k.detail) - 1] = '\0';
    n = pack(&key_a, &k, buf);
    assert_int_equal(open_as(&ring, true, buf, n, &out, &authenticated), B10_OK);
    check_same(&k, &out, key_a.id);
}

/* ---------------------------------------------------------------- unauthenticated */

static void test_refuse_keys(void **state)
{
    struct knock k;
    uint8_t buf[KNOCK_MAX_BYTES];

    good_knock(&k);
    /* Another cluster key. */
    size_t n = pack(&key_b, &k, buf);
    refused(&ring, false, buf, n, false, "another key");

    /* Another secret under the id of a key held: the MAC does not open. */
    struct auth_key forged = key_b;
    forged.id = key_a.id;
    n = pack(&forged, &k, buf);
    refused(&ring, false, buf, n, false, "another secret under a held id");

    /* A key of this boot alone proves nothing to a door, even one that holds it. */
    struct auth_key local;
    struct auth_keyring locals = { 0 };
    auth_key_local(&local);
    assert_int_equal(auth_keyring_add(&locals, &local), 0);
    n = pack(&local, &k, buf);
    refused(&locals, false, buf, n, false, "a local key");
    good_ack(&k);
    n = pack(&local, &k, buf);
    refused(&locals, true, buf, n, false, "a local key's answer");

    /* An empty keyring opens nothing. */
    struct auth_keyring none = { 0 };
    n = pack(&key_a, &k, buf);
    refused(&none, true, buf, n, false, "no keys");
}

static void test_refuse_other_kind(void **state)
{
    struct knock k;
    uint8_t buf[KNOCK_MAX_BYTES];

    good_knock(&k);
    size_t n = pack(&key_a, &k, buf);
    refused(&ring, true, buf, n, false, "a KNOCK opened as a KNOCK_ACK");
    good_ack(&k);
    n = pack(&key_a, &k, buf);
    refused(&ring, false, buf, n, false, "a KNOCK_ACK opened as a KNOCK");

    /* A KNOCK's bytes sealed as another kind of the same key (a HELLO, a descriptor). */
    const enum auth_kind kinds[] = { AUTH_KIND_HELLO, AUTH_KIND_HELLO_ACK, AUTH_KIND_DESC };
    good_knock(&k);
    n = pack(&key_a, &k, buf);
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        uint8_t again[KNOCK_MAX_BYTES];
        size_t m = seal_raw(&key_a, kinds[i], k.sender_id, buf + 4 + AUTH_HEADER_BYTES,
                            n - 4 - AUTH_OVERHEAD, again);
        assert_int_equal(m, n);
        refused(&ring, false, again, m, false, "another kind");
        refused(&ring, true, again, m, false, "another kind");
    }
}

static void test_refuse_length_word(void **state)
{
    struct knock k;
    uint8_t buf[KNOCK_MAX_BYTES + 8];

    good_knock(&k);
    size_t n = pack(&key_a, &k, buf);
    uint32_t word = (uint32_t)(n - 4);
    const uint32_t bad[] = { word - 1, word + 1, word + 100, 0, AUTH_OVERHEAD, 0xffffffff };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint8_t copy[KNOCK_MAX_BYTES];
        memcpy(copy, buf, n);
        for (int b = 0; b < 4; b++)
            copy[b] = (uint8_t)(bad[i] >> (8 * b));
        refused(&ring, false, copy, n, false, "a length word that disagrees");
    }
    /* The bytes given are more than the word says: a byte after the message. */
    buf[n] = 0;
    refused(&ring, false, buf, n + 1, false, "a byte after the message");
}

/* Every prefix of a knock and of an answer, each in a buffer of exactly its size. */
static void test_refuse_truncations(void **state)
{
    struct knock k;
    uint8_t buf[KNOCK_MAX_BYTES];

    for (int ack = 0; ack < 2; ack++) {
        ack ? good_ack(&k) : good_knock(&k);
        size_t n = pack(&key_a, &k, buf);
        for (size_t len = 0; len < n; len++)
            refused(&ring, ack, buf, len, false, "a truncated message");
    }
}

/* One byte changed anywhere, by one bit or all of them: never opens, never authenticates. */
static void test_refuse_flipped_bytes(void **state)
{
    struct knock k;
    uint8_t buf[KNOCK_MAX_BYTES];
    const uint8_t flips[] = { 0x01, 0x80, 0xff };

    for (int ack = 0; ack < 2; ack++) {
        ack ? good_ack(&k) : good_knock(&k);
        size_t n = pack(&key_a, &k, buf);
        for (size_t i = 0; i < n; i++) {
            for (size_t f = 0; f < sizeof(flips); f++) {
                buf[i] ^= flips[f];
                refused(&ring, ack, buf, n, false, "a flipped byte");
                buf[i] ^= flips[f];
            }
        }
        struct knock out;
        bool authenticated;
        assert_int_equal(open_as(&ring, ack, buf, n, &out, &authenticated), B10_OK);
    }
}

/* ---------------------------------------------------------------- authenticated, out of bounds */

static void test_refuse_addresses(void **state)
{
    struct raw_knock r;
    uint8_t buf[KNOCK_MAX_BYTES];
    struct knock out;
    bool authenticated;

    raw_knock_init(&r);
    size_t n = raw_knock_seal(&r, 7, buf);
    assert_int_equal(open_as(&ring, false, buf, n, &out, &authenticated), B10_OK);
    assert_int_equal(out.naddrs, 2);

    r.m.n_addresses = 0;
    n = raw_knock_seal(&r, 7, buf);
    refused(&ring, false, buf, n, true, "no addresses");

    r.m.n_addresses = KNOCK_MAX_ADDRS;
    n = raw_knock_seal(&r, 7, buf);
    assert_int_equal(open_as(&ring, false, buf, n, &out, &authenticated), B10_OK);
    assert_int_equal(out.naddrs, KNOCK_MAX_ADDRS);
    r.m.n_addresses = KNOCK_MAX_ADDRS + 1;
    n = raw_knock_seal(&r, 7, buf);
    refused(&ring, false, buf, n, true, "17 addresses");

    /* Each length but 4 and 16, first, in the middle and last. */
    const size_t lengths[] = { 0, 1, 3, 5, 8, 15, 17 };
    for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
        for (unsigned at = 0; at < 3; at++) {
            raw_knock_init(&r);
            r.m.n_addresses = 3;
            r.addrs[at].len = lengths[i];
            n = raw_knock_seal(&r, 7, buf);
            refused(&ring, false, buf, n, true, "an address of neither 4 nor 16 bytes");
        }
    }
    raw_knock_init(&r);
    r.addrs[1].len = 16;
    n = raw_knock_seal(&r, 7, buf);
    assert_int_equal(open_as(&ring, false, buf, n, &out, &authenticated), B10_OK);
    assert_int_equal(out.addrs[1].family, 6);

    /* A KNOCK_ACK that lets the knocker in must list where it may connect. */
    struct knock k;
    good_ack(&k);
    k.naddrs = 0;
    n = pack(&key_a, &k, buf);
    refused(&ring, true, buf, n, true, "an answer of B10_OK without addresses");
}

static void test_refuse_fields(void **state)
{
    struct raw_knock r;
    uint8_t buf[KNOCK_MAX_BYTES];
    char long_name[CONFIG_NAME_MAX + 1];

    memset(long_name, 'a', CONFIG_NAME_MAX);
    long_name[CONFIG_NAME_MAX] = '\0';
    const char *names[] = { "", "has space", "semi;colon", "new\nline", long_name };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        raw_knock_init(&r);
        r.m.name = (char *)names[i];
        size_t n = raw_knock_seal(&r, 7, buf);
        refused(&ring, false, buf, n, true, "a bad name");
    }
    /* One shorter than CONFIG_NAME_MAX is a name. */
    long_name[CONFIG_NAME_MAX - 1] = '\0';
    raw_knock_init(&r);
    r.m.name = long_name;
    size_t n = raw_knock_seal(&r, 7, buf);
    struct knock out;
    bool authenticated;
    assert_int_equal(open_as(&ring, false, buf, n, &out, &authenticated), B10_OK);
    assert_string_equal(out.name, long_name);

    raw_knock_init(&r);
    r.m.version = KNOCK_VERSION + 1;
    n = raw_knock_seal(&r, 7, buf);
    refused(&ring, false, buf, n, true, "another version");

    for (size_t len = 0; len <= KNOCK_NONCE_BYTES + 1; len++) {
        if (len == KNOCK_NONCE_BYTES)
            continue;
        raw_knock_init(&r);
        r.m.nonce.len = len;
        n = raw_knock_seal(&r, 7, buf);
        refused(&ring, false, buf, n, true, "a nonce of the wrong size");
    }

    /* Sealed by no daemon. */
    raw_knock_init(&r);
    n = raw_knock_seal(&r, 0, buf);
    refused(&ring, false, buf, n, true, "no sender");

    /* Not a protobuf message at all, under the key. */
    const uint8_t junk[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
    n = seal_raw(&key_a, AUTH_KIND_KNOCK, 7, junk, sizeof(junk), buf);
    refused(&ring, false, buf, n, true, "junk under the key");
    n = seal_raw(&key_a, AUTH_KIND_KNOCK_ACK, 7, junk, sizeof(junk), buf);
    refused(&ring, true, buf, n, true, "junk under the key");
}

/* An answer's status must be one of the map, and a final one. */
static void test_refuse_ack_status(void **state)
{
    struct knock k, out;
    uint8_t buf[KNOCK_MAX_BYTES];
    bool authenticated;

    const int bad[] = { B10_IN_PROGRESS, 2, 9, 20, 49, 93, 9999, -1 };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        good_ack(&k);
        k.status = (b10_status_t)bad[i];
        size_t n = pack(&key_a, &k, buf);
        refused(&ring, true, buf, n, true, "an unknown status");
    }
    const b10_status_t good[] = { B10_ERR_UNAUTHENTICATED, B10_ERR_PEER_PROTOCOL,
                                  B10_ERR_TOO_LARGE, B10_ERR_INTERNAL };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        good_ack(&k);
        k.status = good[i];
        size_t n = pack(&key_a, &k, buf);
        assert_int_equal(open_as(&ring, true, buf, n, &out, &authenticated), B10_OK);
        assert_int_equal(out.status, good[i]);
    }
}

/* ---------------------------------------------------------------- bounds */

static void test_frame_length(void **state)
{
    uint8_t w[4];
    const struct {
        uint32_t word;
        size_t want;
    } cases[] = {
        { 0, SIZE_MAX },
        { AUTH_OVERHEAD - 1, SIZE_MAX },
        { AUTH_OVERHEAD, 4 + AUTH_OVERHEAD },
        { 100, 104 },
        { KNOCK_MAX_BYTES - 4, KNOCK_MAX_BYTES },
        { KNOCK_MAX_BYTES - 3, SIZE_MAX },
        { 0x00010000, SIZE_MAX },
        { 0x7fffffff, SIZE_MAX },
        { 0xfffffffc, SIZE_MAX },
        { 0xffffffff, SIZE_MAX },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        for (int b = 0; b < 4; b++)
            w[b] = (uint8_t)(cases[i].word >> (8 * b));
        /* Fewer than 4 bytes in: not known yet. */
        for (size_t have = 0; have < 4; have++)
            assert_int_equal(knock_frame_length(w, have, false), 0);
        if (knock_frame_length(w, 4, false) != cases[i].want)
            fail_msg("length word %#x: %zu, want %zu", cases[i].word, knock_frame_length(w, 4, false),
                     cases[i].want);
    }
}

/* knock_pack writes nothing past cap, and refuses a buffer one byte short. */
static void test_pack_bounds(void **state)
{
    struct knock k, out;
    uint8_t buf[KNOCK_MAX_BYTES + 16];
    bool authenticated;

    for (int ack = 0; ack < 2; ack++) {
        ack ? good_ack(&k) : good_knock(&k);
        size_t n = knock_pack(&key_a, &k, NULL, buf, sizeof(buf));
        assert_true(n > 0 && n <= KNOCK_MAX_BYTES);
        memset(buf, 0xa5, sizeof(buf));
        assert_int_equal(knock_pack(&key_a, &k, NULL, buf, n - 1), 0);
        assert_int_equal(knock_pack(&key_a, &k, NULL, buf, 0), 0);
        assert_int_equal(knock_pack(&key_a, &k, NULL, buf, n), n);
        for (size_t i = n; i < sizeof(buf); i++)
            assert_int_equal(buf[i], 0xa5);
        assert_int_equal(open_as(&ring, ack, buf, n, &out, &authenticated), B10_OK);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_knock_round_trip),
        cmocka_unit_test(test_ack_round_trip),
        cmocka_unit_test(test_refuse_keys),
        cmocka_unit_test(test_refuse_other_kind),
        cmocka_unit_test(test_refuse_length_word),
        cmocka_unit_test(test_refuse_truncations),
        cmocka_unit_test(test_refuse_flipped_bytes),
        cmocka_unit_test(test_refuse_addresses),
        cmocka_unit_test(test_refuse_fields),
        cmocka_unit_test(test_refuse_ack_status),
        cmocka_unit_test(test_frame_length),
        cmocka_unit_test(test_pack_bounds),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
