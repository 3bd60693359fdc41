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
 *
 * A node proof (certified mode): a KNOCK and a KNOCK_ACK packed with a node
 * identity open with the chain and a signature knock_verify accepts for
 * that node's name alone, and for that kind alone; without one they open
 * with none, which knock_verify refuses. A flipped signature byte opens
 * (knock_open does not verify) but is refused by knock_verify. Every bound
 * of the proof: at most 4 certificates, 8192 bytes of them, none empty, a
 * signature of 1 to 80 bytes, both or neither, nothing after them; and a
 * proof of every bound at once fits KNOCK_MAX_BYTES.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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
/* Node identities of one CA: good_knock's sender and good_ack's. */
static char cert_dir[64];
static struct nodeid *id_a, *id_b;

static int certify(const char *name, struct nodeid **id_p)
{
    char cert[128], key[128], ca[128], cakey[128], why[512];

    snprintf(ca, sizeof(ca), "%s/ca.crt", cert_dir);
    snprintf(cakey, sizeof(cakey), "%s/ca.key", cert_dir);
    snprintf(cert, sizeof(cert), "%s/%s.crt", cert_dir, name);
    snprintf(key, sizeof(key), "%s/%s.key", cert_dir, name);
    if (nodeid_issue(ca, cakey, name, cert_dir, -60, 86400, why, sizeof(why)) != B10_OK ||
        nodeid_load(cert, key, ca, name, id_p, why, sizeof(why)) != B10_OK) {
        fprintf(stderr, "%s: %s\n", name, why);
        return -1;
    }
    return 0;
}

static int group_setup(void **state)
{
    char why[512];

    snprintf(cert_dir, sizeof(cert_dir), "/tmp/b10-test-knock.XXXXXX");
    if (keys_setup() != 0 || keys_make("a.key", &key_a) != 0 || keys_make("b.key", &key_b) != 0 ||
        auth_keyring_add(&ring, &key_a) != 0 || mkdtemp(cert_dir) == NULL ||
        nodeid_make_ca(cert_dir, 1, why, sizeof(why)) != B10_OK ||
        certify("node-a.example", &id_a) != 0 || certify("node-b", &id_b) != 0)
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    char cmd[128];

    nodeid_free(id_a);
    nodeid_free(id_b);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", cert_dir);
    if (system(cmd) != 0)
        return -1;
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

    const int bad[] = { B10_IN_PROGRESS, 2, 9, 21, 49, 93, 9999, -1 };
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

/* ---------------------------------------------------------------- node proofs */

static char why[512];

static b10_status_t verify(const struct nodeid *id, const struct knock *k, const char *name)
{
    why[0] = '\0';
    b10_status_t st = knock_verify(id, k, name, why, sizeof(why));
    if (st != B10_OK && why[0] == '\0')
        fail_msg("a refused proof without its reason");
    return st;
}

static void test_proof_round_trip(void **state)
{
    static struct knock k, out;
    uint8_t buf[KNOCK_ACK_MAX_BYTES];
    bool authenticated;

    for (int ack = 0; ack < 2; ack++) {
        struct nodeid *id = ack ? id_b : id_a;
        const char *name = ack ? "node-b" : "node-a.example";
        ack ? good_ack(&k) : good_knock(&k);
        size_t n = knock_pack(&key_a, &k, id, buf, sizeof(buf));
        assert_true(n > 0 && n <= (ack ? KNOCK_ACK_MAX_BYTES : KNOCK_MAX_BYTES));
        assert_int_equal(knock_frame_length(buf, n, ack), n);
        assert_int_equal(open_as(&ring, ack, buf, n, &out, &authenticated), B10_OK);
        check_same(&k, &out, key_a.id);
        assert_true(out.proof.present);
        struct nodeid_chain chain;
        nodeid_chain_of(id, &chain);
        assert_int_equal(out.proof.chain.count, chain.count);
        assert_int_equal(out.proof.chain.length[0], chain.length[0]);
        assert_memory_equal(out.proof.chain.der[0], chain.der[0], chain.length[0]);

        /* Good for its sender's name, checked by either node's anchors. */
        assert_int_equal(verify(id_a, &out, name), B10_OK);
        assert_int_equal(verify(id_b, &out, name), B10_OK);
        /* Not for another name: a certified node cannot knock as another. */
        assert_int_equal(verify(id_a, &out, ack ? "node-a.example" : "node-b"), B10_ERR_PERMISSION);
        /* Not for the other kind: its context string is its own. */
        out.ack = !out.ack;
        assert_int_equal(verify(id_a, &out, name), B10_ERR_PERMISSION);

        /* Without an identity: no proof, which knock_verify refuses. */
        n = knock_pack(&key_a, &k, NULL, buf, sizeof(buf));
        assert_int_equal(open_as(&ring, ack, buf, n, &out, &authenticated), B10_OK);
        assert_false(out.proof.present);
        assert_int_equal(verify(id_a, &out, name), B10_ERR_PERMISSION);
    }
}

/* The payload of a framed message sealed under key_a, copied out. */
static size_t payload_of(const uint8_t *buf, size_t n, bool ack, uint8_t *payload)
{
    const uint8_t *p;
    size_t len;
    assert_int_equal(auth_open(&key_a, ack ? AUTH_KIND_KNOCK_ACK : AUTH_KIND_KNOCK, buf + 4, n - 4,
                               &p, &len), AUTH_OK);
    memcpy(payload, p, len);
    return len;
}

/* A signature byte flipped (and the envelope sealed again): it opens, and its proof is refused. */
static void test_proof_flipped_signature(void **state)
{
    static struct knock k, out;
    uint8_t buf[KNOCK_ACK_MAX_BYTES], payload[KNOCK_ACK_MAX_BYTES];
    bool authenticated;

    for (int ack = 0; ack < 2; ack++) {
        ack ? good_ack(&k) : good_knock(&k);
        size_t n = knock_pack(&key_a, &k, ack ? id_b : id_a, buf, sizeof(buf));
        size_t len = payload_of(buf, n, ack, payload);
        /* The signature is the payload's last field, so its last byte is the payload's. */
        payload[len - 1] ^= 0x01;
        memcpy(buf + 4 + AUTH_HEADER_BYTES, payload, len);
        auth_seal(&key_a, ack ? AUTH_KIND_KNOCK_ACK : AUTH_KIND_KNOCK, k.sender_id, 0, buf + 4, len);
        assert_int_equal(open_as(&ring, ack, buf, n, &out, &authenticated), B10_OK);
        assert_true(out.proof.present);
        assert_int_equal(verify(id_a, &out, ack ? "node-b" : "node-a.example"), B10_ERR_PERMISSION);

        /* A signed field changed (the name), sealed again: it opens, and its proof is refused. */
        n = knock_pack(&key_a, &k, ack ? id_b : id_a, buf, sizeof(buf));
        len = payload_of(buf, n, ack, payload);
        uint8_t *name = memmem(payload, len, k.name, strlen(k.name));
        assert_non_null(name);
        name[0] = 'x';
        memcpy(buf + 4 + AUTH_HEADER_BYTES, payload, len);
        auth_seal(&key_a, ack ? AUTH_KIND_KNOCK_ACK : AUTH_KIND_KNOCK, k.sender_id, 0, buf + 4, len);
        assert_int_equal(open_as(&ring, ack, buf, n, &out, &authenticated), B10_OK);
        assert_int_equal(verify(id_a, &out, ack ? "node-b" : "node-a.example"), B10_ERR_PERMISSION);
    }
}

/* A KNOCK of raw_knock_init's fields with a proof of ncerts certificates of these lengths. */
static size_t proof_knock(size_t ncerts, const size_t *lengths, size_t sig_length, bool trailer,
                          uint8_t *buf)
{
    static uint8_t der[NODEID_MAX_CHAIN_BYTES + 1], sig[NODEID_MAX_SIG + 1];
    static uint8_t payload[KNOCK_MAX_BYTES];
    ProtobufCBinaryData certs[NODEID_MAX_CERTS + 1];
    struct raw_knock r;

    memset(der, 0x30, sizeof(der));
    memset(sig, 0x5b, sizeof(sig));
    raw_knock_init(&r);
    r.m.n_addresses = KNOCK_MAX_ADDRS;
    for (size_t i = 0; i < ncerts; i++)
        certs[i] = (ProtobufCBinaryData){ lengths[i], der };
    r.m.n_node_chain = ncerts;
    r.m.node_chain = certs;
    r.m.node_sig = (ProtobufCBinaryData){ sig_length, sig };
    size_t len = b10__peer__knock__get_packed_size(&r.m);
    assert_true(len + 8 <= sizeof(payload));
    b10__peer__knock__pack(&r.m, payload);
    if (trailer) {
        /* A field after the proof: sent_ms again (field 3, fixed64), which it would not sign. */
        payload[len++] = 3 << 3 | 1;
        memset(payload + len, 0x77, 8);
        len += 8;
    }
    return seal_raw(&key_a, AUTH_KIND_KNOCK, 0x1234, payload, len, buf);
}

static void proof_refused(size_t ncerts, const size_t *lengths, size_t sig_length, bool trailer,
                          const char *what)
{
    static uint8_t buf[KNOCK_MAX_BYTES];
    static struct knock out;
    bool authenticated;

    size_t n = proof_knock(ncerts, lengths, sig_length, trailer, buf);
    if (open_as(&ring, false, buf, n, &out, &authenticated) == B10_OK)
        fail_msg("%s: opened", what);
    assert_true(authenticated);
    if (strstr(detail, what) == NULL)
        fail_msg("refused for '%s', not '%s'", detail, what);
}

static void proof_opens(size_t ncerts, const size_t *lengths, size_t sig_length)
{
    static uint8_t buf[KNOCK_MAX_BYTES];
    static struct knock out;
    bool authenticated;
    size_t total = 0;

    size_t n = proof_knock(ncerts, lengths, sig_length, false, buf);
    assert_true(n <= KNOCK_MAX_BYTES);
    assert_int_equal(open_as(&ring, false, buf, n, &out, &authenticated), B10_OK);
    assert_true(out.proof.present);
    assert_int_equal(out.proof.chain.count, ncerts);
    for (size_t i = 0; i < ncerts; i++) {
        assert_int_equal(out.proof.chain.length[i], lengths[i]);
        total += lengths[i];
    }
    assert_true(total <= NODEID_MAX_CHAIN_BYTES);
    assert_int_equal(out.proof.sig_length, sig_length);
    /* Opened is not proven: the bytes are no certificate. */
    assert_int_equal(verify(id_a, &out, "node-a"), B10_ERR_PERMISSION);
}

static void test_proof_bounds(void **state)
{
    const size_t one[1] = { 300 }, empty[2] = { 300, 0 };
    const size_t four_full[4] = { 2048, 2048, 2048, 2048 };
    const size_t four_over[4] = { 2048, 2048, 2048, 2049 };
    const size_t five[5] = { 10, 10, 10, 10, 10 };
    const size_t big_one[1] = { NODEID_MAX_CHAIN_BYTES }, too_big[1] = { NODEID_MAX_CHAIN_BYTES + 1 };

    /* Every bound at once, 16 addresses beside: it opens, within KNOCK_MAX_BYTES. */
    proof_opens(4, four_full, NODEID_MAX_SIG);
    proof_opens(1, big_one, 1);
    proof_opens(1, one, 64);

    proof_refused(5, five, 64, false, "more than 4 certificates");
    proof_refused(4, four_over, 64, false, "more than 8192 bytes");
    proof_refused(1, too_big, 64, false, "more than 8192 bytes");
    proof_refused(2, empty, 64, false, "more than 8192 bytes");
    proof_refused(1, one, NODEID_MAX_SIG + 1, false, "without its chain or signature");
    proof_refused(1, one, 0, false, "without its chain or signature");
    proof_refused(0, one, 64, false, "without its chain or signature");
    proof_refused(1, one, 64, true, "fields after the node proof");
}

/* An ACK's proof, bounded as a KNOCK's: a field after it is refused, over the bounds too. */
static void test_proof_ack_bounds(void **state)
{
    static struct knock k, out;
    static uint8_t buf[KNOCK_ACK_MAX_BYTES], payload[KNOCK_ACK_MAX_BYTES];
    bool authenticated;

    good_ack(&k);
    size_t n = knock_pack(&key_a, &k, id_b, buf, sizeof(buf));
    size_t len = payload_of(buf, n, true, payload);
    /* incarnation (field 7, fixed64) again, after the proof. */
    payload[len++] = 7 << 3 | 1;
    memset(payload + len, 0x42, 8);
    len += 8;
    n = seal_raw(&key_a, AUTH_KIND_KNOCK_ACK, k.sender_id, payload, len, buf);
    assert_int_not_equal(open_as(&ring, true, buf, n, &out, &authenticated), B10_OK);
    assert_true(authenticated);
    assert_non_null(strstr(detail, "fields after the node proof"));

    /* A proof of 5 certificates is refused; of 4, it opens. */
    B10__Peer__KnockAck m = B10__PEER__KNOCK_ACK__INIT;
    uint8_t der[16] = { 0x30 }, sig[64] = { 1 };
    ProtobufCBinaryData certs[5];
    for (int i = 0; i < 5; i++)
        certs[i] = (ProtobufCBinaryData){ sizeof(der), der };
    m.node_chain = certs;
    m.node_sig = (ProtobufCBinaryData){ sizeof(sig), sig };
    for (size_t ncerts = 5; ncerts >= 4; ncerts--) {
        m.n_node_chain = ncerts;
        n = knock_pack(&key_a, &k, NULL, buf, sizeof(buf));
        len = payload_of(buf, n, true, payload);
        len += b10__peer__knock_ack__pack(&m, payload + len);
        n = seal_raw(&key_a, AUTH_KIND_KNOCK_ACK, k.sender_id, payload, len, buf);
        b10_status_t st = open_as(&ring, true, buf, n, &out, &authenticated);
        if (ncerts == 5) {
            assert_int_not_equal(st, B10_OK);
            assert_non_null(strstr(detail, "more than 4 certificates"));
        } else {
            /* The same with 4 opens. */
            assert_int_equal(st, B10_OK);
            assert_true(out.proof.present);
            assert_int_equal(out.proof.chain.count, 4);
        }
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
        cmocka_unit_test(test_proof_round_trip),
        cmocka_unit_test(test_proof_flipped_signature),
        cmocka_unit_test(test_proof_bounds),
        cmocka_unit_test(test_proof_ack_bounds),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
