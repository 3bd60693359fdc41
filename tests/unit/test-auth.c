/*
 * test-auth.c — daemon/io/auth.c: the cluster key file, the keys derived from
 * it, the authenticated envelope, a link's keys and its replay window.
 *
 * The derivations are held to values computed outside libsodium (Python's
 * hashlib.blake2b with the same keys, salts and personalization), so that a
 * change of construction cannot pass unnoticed; the envelope is held to
 * round trips, and to refusing every byte changed, every truncation, the
 * wrong key, kind, direction and counter.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "auth.h"

static char dir[64];

static const char *path_in(const char *name)
{
    static char path[128];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return path;
}

static void write_file(const char *name, const char *text, mode_t mode)
{
    const char *path = path_in(name);
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
}

/* The key of 32 bytes of 0x01, as a key file holds it. */
#define ONES "0101010101010101010101010101010101010101010101010101010101010101"

static void hex(uint8_t *out, const char *text, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(text + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
}

static void load_ones(struct auth_key *key)
{
    char err[256];
    write_file("ones.key", ONES "\n", 0600);
    assert_int_equal(auth_key_load(path_in("ones.key"), key, err, sizeof(err)), 0);
}

static int group_setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/test-auth.XXXXXX");
    if (mkdtemp(dir) == NULL || auth_init() != 0)
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ---------------------------------------------------------------- keys */

static void test_key_known_answers(void **state)
{
    struct auth_key key;
    uint8_t want[32];

    load_ones(&key);
    assert_int_equal(key.kind, AUTH_KEY_CLUSTER);
    assert_int_equal(key.id, UINT64_C(0x7ebc688134d01847));
    hex(want, "c121314fc106a687b3d956924796faa7797aad0b8f9de0dffc1ee5a400029079", 32);
    assert_memory_equal(key.hello, want, 32);
    hex(want, "e371e88088b04487e46b5a14193039f5e9b2c73f0c4f3f4f4016c92ca428c408", 32);
    assert_memory_equal(key.desc, want, 32);
    hex(want, "927743fd47d33403470e0359dc91025bb549910d9a268f65ecafa12e24ebc716", 32);
    assert_memory_equal(key.link, want, 32);
}

static void test_key_file_refusals(void **state)
{
    struct auth_key key;
    char err[256];

    /* Readable by the group or others: refused, and the mode said. */
    write_file("open.key", ONES "\n", 0640);
    assert_int_equal(auth_key_load(path_in("open.key"), &key, err, sizeof(err)), B10_ERR_PERMISSION);
    assert_non_null(strstr(err, "0640"));
    write_file("world.key", ONES, 0604);
    assert_int_equal(auth_key_load(path_in("world.key"), &key, err, sizeof(err)), B10_ERR_PERMISSION);
    /* Not 64 hex digits. */
    write_file("short.key", "0101", 0600);
    assert_int_equal(auth_key_load(path_in("short.key"), &key, err, sizeof(err)), B10_ERR_INVALID_ARG);
    assert_non_null(strstr(err, "hex digits"));
    write_file("long.key", ONES "01\n", 0600);
    assert_int_equal(auth_key_load(path_in("long.key"), &key, err, sizeof(err)), B10_ERR_INVALID_ARG);
    char nothex[] = ONES;
    nothex[10] = 'g';
    write_file("nothex.key", nothex, 0600);
    assert_int_equal(auth_key_load(path_in("nothex.key"), &key, err, sizeof(err)), B10_ERR_INVALID_ARG);
    /* Missing, and a folder. */
    assert_int_equal(auth_key_load(path_in("none.key"), &key, err, sizeof(err)), B10_ERR_NOT_FOUND);
    assert_non_null(strstr(err, strerror(ENOENT)));
    assert_int_equal(auth_key_load(dir, &key, err, sizeof(err)), B10_ERR_INVALID_ARG);
    assert_non_null(strstr(err, "not a regular file"));
    /* Without a newline, and with CRLF: taken. */
    write_file("bare.key", ONES, 0600);
    assert_int_equal(auth_key_load(path_in("bare.key"), &key, err, sizeof(err)), 0);
    assert_int_equal(key.id, UINT64_C(0x7ebc688134d01847));
    write_file("crlf.key", ONES "\r\n", 0400);
    assert_int_equal(auth_key_load(path_in("crlf.key"), &key, err, sizeof(err)), 0);
}

static void test_key_generate(void **state)
{
    struct auth_key key, again;
    uint64_t id;
    char err[256];
    struct stat st;
    const char *path = path_in("fresh.key");

    unlink(path);
    assert_int_equal(auth_key_generate(path, &id, err, sizeof(err)), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(st.st_size, 65);
    assert_int_equal(auth_key_load(path, &key, err, sizeof(err)), 0);
    assert_int_equal(key.id, id);
    /* Never over an existing file; and a second key is another key. */
    assert_int_equal(auth_key_generate(path, &id, err, sizeof(err)), B10_ERR_EXISTS);
    assert_non_null(strstr(err, "never overwritten"));
    unlink(path_in("other.key"));
    assert_int_equal(auth_key_generate(path_in("other.key"), &id, err, sizeof(err)), 0);
    assert_int_equal(auth_key_load(path_in("other.key"), &again, err, sizeof(err)), 0);
    assert_int_not_equal(again.id, key.id);
}

static void test_keyring(void **state)
{
    struct auth_keyring ring = { .count = 0 };
    struct auth_key a, b, c, d;

    load_ones(&a);
    auth_key_local(&b);
    auth_key_insecure(&c);
    assert_int_equal(auth_keyring_add(&ring, &a), 0);
    assert_int_equal(auth_keyring_add(&ring, &a), B10_ERR_EXISTS);   /* the same key twice */
    assert_int_equal(auth_keyring_add(&ring, &b), 0);
    assert_int_equal(auth_keyring_add(&ring, &c), 0);
    auth_key_local(&d);
    assert_int_equal(auth_keyring_add(&ring, &d), B10_ERR_TOO_LARGE);   /* full */
    assert_ptr_equal(auth_keyring_find(&ring, a.id), &ring.keys[0]);
    assert_ptr_equal(auth_keyring_find(&ring, c.id), &ring.keys[2]);
    assert_null(auth_keyring_find(&ring, d.id));
    /* The insecure key is everyone's: the same on every daemon; a local one is nobody else's. */
    auth_key_insecure(&d);
    assert_int_equal(d.id, c.id);
    auth_key_local(&d);
    assert_int_not_equal(d.id, b.id);
}

/* ---------------------------------------------------------------- the envelope */

static size_t seal_hello(const struct auth_key *key, uint8_t *buf, const char *payload)
{
    size_t n = strlen(payload);
    memcpy(buf + AUTH_HEADER_BYTES, payload, n);
    auth_seal(key, AUTH_KIND_HELLO, 0x1111, 0x2222, buf, n);
    return AUTH_OVERHEAD + n;
}

static void test_envelope_round_trip(void **state)
{
    struct auth_key key;
    uint8_t buf[256];
    const uint8_t *payload;
    size_t len, n;
    struct auth_header h;

    load_ones(&key);
    n = seal_hello(&key, buf, "a hello");
    assert_int_equal(auth_peek(buf, n, &h), B10_OK);
    assert_int_equal(h.kind, AUTH_KIND_HELLO);
    assert_int_equal(h.key_id, key.id);
    assert_int_equal(h.sender_id, 0x1111);
    assert_int_equal(h.receiver_id, 0x2222);
    assert_int_equal(auth_open(&key, AUTH_KIND_HELLO, buf, n, &payload, &len), AUTH_OK);
    assert_int_equal(len, 7);
    assert_memory_equal(payload, "a hello", 7);
    /* The payload stays readable in place, and an empty one is an envelope too. */
    assert_ptr_equal(payload, buf + AUTH_HEADER_BYTES);
    n = seal_hello(&key, buf, "");
    assert_int_equal(n, AUTH_OVERHEAD);
    assert_int_equal(auth_open(&key, AUTH_KIND_HELLO, buf, n, &payload, &len), AUTH_OK);
    assert_int_equal(len, 0);
    /* One byte short of an envelope: no header to read, and the header left as it was. */
    h.kind = AUTH_KIND_DESC;
    assert_int_equal(auth_peek(buf, n - 1, &h), B10_ERR_PEER_PROTOCOL);
    assert_int_equal(h.kind, AUTH_KIND_DESC);
    /* Nonces are fresh: the same message sealed twice differs. */
    uint8_t other[256];
    n = seal_hello(&key, buf, "same");
    seal_hello(&key, other, "same");
    assert_memory_not_equal(buf, other, n);
}

static void test_envelope_refusals(void **state)
{
    struct auth_key key, wrong;
    uint8_t buf[256], bent[256];
    const uint8_t *payload;
    size_t len;

    load_ones(&key);
    auth_key_local(&wrong);
    size_t n = seal_hello(&key, buf, "payload of a HELLO");
    /* Every byte flipped: never opens. */
    for (size_t i = 0; i < n; i++) {
        memcpy(bent, buf, n);
        bent[i] ^= 0x20;
        enum auth_result r = auth_open(&key, AUTH_KIND_HELLO, bent, n, &payload, &len);
        assert_true(r == AUTH_BAD_MAC || r == AUTH_MALFORMED);
    }
    /* Every truncation, and one byte more. */
    for (size_t i = 0; i < n; i++)
        assert_int_not_equal(auth_open(&key, AUTH_KIND_HELLO, buf, i, &payload, &len), AUTH_OK);
    memcpy(bent, buf, n);
    bent[n] = 0;
    assert_int_not_equal(auth_open(&key, AUTH_KIND_HELLO, bent, n + 1, &payload, &len), AUTH_OK);
    /* Another key, another kind, a descriptor's key for a HELLO. */
    assert_int_equal(auth_open(&wrong, AUTH_KIND_HELLO, buf, n, &payload, &len), AUTH_MALFORMED);
    assert_int_equal(auth_open(&key, AUTH_KIND_HELLO_ACK, buf, n, &payload, &len), AUTH_MALFORMED);
    assert_int_equal(auth_open(&key, AUTH_KIND_DESC, buf, n, &payload, &len), AUTH_MALFORMED);
    /* The wrong key's id written in: the MAC still fails. */
    memcpy(bent, buf, n);
    auth_seal(&wrong, AUTH_KIND_HELLO, 1, 2, bent, n - AUTH_OVERHEAD);
    for (int i = 0; i < 8; i++)
        bent[8 + i] = (uint8_t)(key.id >> (8 * i));
    assert_int_equal(auth_open(&key, AUTH_KIND_HELLO, bent, n, &payload, &len), AUTH_BAD_MAC);
    /* A descriptor sealed under the same key does not open as a HELLO: its own subkey. */
    memcpy(bent + AUTH_HEADER_BYTES, "payload of a HELLO", n - AUTH_OVERHEAD);
    auth_seal(&key, AUTH_KIND_DESC, 0x1111, 0, bent, n - AUTH_OVERHEAD);
    bent[1] = AUTH_KIND_HELLO;
    assert_int_equal(auth_open(&key, AUTH_KIND_HELLO, bent, n, &payload, &len), AUTH_BAD_MAC);
}

/* ---------------------------------------------------------------- links */

static void link_pair(struct auth_link *opener, struct auth_link *receiver)
{
    struct auth_key key;
    uint8_t n1[AUTH_NONCE_BYTES], n2[AUTH_NONCE_BYTES];

    load_ones(&key);
    memset(n1, 0xaa, sizeof(n1));
    memset(n2, 0xbb, sizeof(n2));
    auth_link_derive(&key, 0x1111, 0x2222, 0x3333, n1, n2, true, opener);
    auth_link_derive(&key, 0x1111, 0x2222, 0x3333, n1, n2, false, receiver);
}

static size_t link_seal(struct auth_link *l, uint8_t *buf, uint32_t v)
{
    memcpy(buf + AUTH_HEADER_BYTES, &v, sizeof(v));
    assert_int_equal(auth_link_seal(l, buf, sizeof(v)), 0);
    return AUTH_OVERHEAD + sizeof(v);
}

static enum auth_result link_open(struct auth_link *l, const uint8_t *buf, size_t n)
{
    const uint8_t *payload;
    size_t len;
    return auth_link_open(l, buf, n, &payload, &len);
}

static void test_link_known_answers(void **state)
{
    struct auth_link o, r;
    uint8_t want[32];

    link_pair(&o, &r);
    hex(want, "d22b623fda1e86c92d057f180bff9cdb", 16);
    assert_memory_equal(o.tags.key, want, 16);
    assert_memory_equal(r.tags.key, want, 16);
    hex(want, "b2d8f85f37331c1bb8f2db33c5bc0201de9d46c0bba28b77513d7745124a3871", 32);
    assert_memory_equal(o.send_key, want, 32);
    assert_memory_equal(r.recv_key, want, 32);
    hex(want, "19050e801145f4d5c363ad332ba76143e53b01e0f7dbf56c22ead974c5e6d8b6", 32);
    assert_memory_equal(o.recv_key, want, 32);
    assert_memory_equal(r.send_key, want, 32);
    assert_int_equal(o.tags.sender_id, 0x1111);
    assert_int_equal(o.tags.receiver_id, 0x2222);
    assert_int_equal(o.tags.gen, 0x3333);

    struct auth_key key;
    struct tag_link ack;
    uint8_t nonce[AUTH_NONCE_BYTES];
    load_ones(&key);
    memset(nonce, 0xaa, sizeof(nonce));
    auth_ack_tags(&key, 0x1111, 0x2222, 0x3333, nonce, &ack);
    hex(want, "95676e355b7fa35486eda197b5e728ef", 16);
    assert_memory_equal(ack.key, want, 16);
}

static void test_link_both_ways(void **state)
{
    struct auth_link o, r;
    uint8_t buf[128];
    const uint8_t *payload;
    size_t len;
    struct auth_header h;

    link_pair(&o, &r);
    size_t n = link_seal(&o, buf, 7);
    assert_int_equal(auth_peek(buf, n, &h), B10_OK);
    assert_int_equal(h.kind, AUTH_KIND_LINK);
    assert_int_equal(h.dir, 0);
    assert_int_equal(h.key_id, 0x3333);
    assert_int_equal(h.counter, 1);
    assert_int_equal(h.sender_id, 0x1111);
    /* Its own direction does not open at the sender: a message cannot be reflected. */
    assert_int_equal(link_open(&o, buf, n), AUTH_MALFORMED);
    assert_int_equal(auth_link_open(&r, buf, n, &payload, &len), AUTH_OK);
    assert_int_equal(len, 4);
    assert_int_equal(*(const uint32_t *)payload, 7);
    n = link_seal(&r, buf, 9);
    assert_int_equal(auth_peek(buf, n, &h), B10_OK);
    assert_int_equal(h.dir, 1);
    assert_int_equal(h.sender_id, 0x2222);
    assert_int_equal(link_open(&o, buf, n), AUTH_OK);
    /* Another link (another generation, other nonces) does not open it. */
    struct auth_link other;
    struct auth_key key;
    uint8_t n1[AUTH_NONCE_BYTES] = { 1 }, n2[AUTH_NONCE_BYTES] = { 2 };
    load_ones(&key);
    auth_link_derive(&key, 0x1111, 0x2222, 0x3333, n1, n2, false, &other);
    n = link_seal(&o, buf, 11);
    assert_int_equal(link_open(&other, buf, n), AUTH_BAD_MAC);
    /* Every byte flipped. */
    n = link_seal(&o, buf, 12);
    for (size_t i = 0; i < n; i++) {
        uint8_t bent[128];
        memcpy(bent, buf, n);
        bent[i] ^= 1;
        assert_int_not_equal(link_open(&r, bent, n), AUTH_OK);
    }
    assert_int_equal(link_open(&r, buf, n), AUTH_OK);
}

static void test_link_replay_window(void **state)
{
    struct auth_link o, r;
    static uint8_t msgs[AUTH_WINDOW + 40][AUTH_OVERHEAD + 4];   /* 8232 of them */
    size_t n = 0;

    link_pair(&o, &r);
    for (unsigned i = 0; i < AUTH_WINDOW + 40; i++)
        n = link_seal(&o, msgs[i], i);
    /* Out of order within the window: each once. */
    assert_int_equal(link_open(&r, msgs[5], n), AUTH_OK);
    assert_int_equal(link_open(&r, msgs[2], n), AUTH_OK);
    assert_int_equal(link_open(&r, msgs[5], n), AUTH_REPLAYED);
    assert_int_equal(link_open(&r, msgs[2], n), AUTH_REPLAYED);
    assert_int_equal(link_open(&r, msgs[0], n), AUTH_OK);
    assert_int_equal(link_open(&r, msgs[1], n), AUTH_OK);
    /* A jump ahead: everything still in the window opens once, older is refused. */
    assert_int_equal(link_open(&r, msgs[AUTH_WINDOW + 10], n), AUTH_OK);
    /* msgs[i] carries counter i + 1: the window now holds counters 12 .. AUTH_WINDOW + 11. */
    assert_int_equal(link_open(&r, msgs[3], n), AUTH_REPLAYED);        /* out of the window */
    assert_int_equal(link_open(&r, msgs[10], n), AUTH_REPLAYED);       /* just out of it */
    assert_int_equal(link_open(&r, msgs[11], n), AUTH_OK);             /* the oldest in it */
    assert_int_equal(link_open(&r, msgs[AUTH_WINDOW + 9], n), AUTH_OK);
    assert_int_equal(link_open(&r, msgs[AUTH_WINDOW + 10], n), AUTH_REPLAYED);
    for (unsigned i = AUTH_WINDOW + 11; i < AUTH_WINDOW + 40; i++)
        assert_int_equal(link_open(&r, msgs[i], n), AUTH_OK);
    for (unsigned i = AUTH_WINDOW + 11; i < AUTH_WINDOW + 40; i++)
        assert_int_equal(link_open(&r, msgs[i], n), AUTH_REPLAYED);
}

/* A forged message claiming a far counter must not move the window: it did not open. */
static void test_link_forgery_moves_nothing(void **state)
{
    struct auth_link o, r;
    uint8_t good[AUTH_OVERHEAD + 4], forged[AUTH_OVERHEAD + 4];

    link_pair(&o, &r);
    size_t n = link_seal(&o, good, 1);
    memcpy(forged, good, n);
    for (int i = 0; i < 8; i++)
        forged[48 + i] = (uint8_t)(UINT64_C(1000000) >> (8 * i));
    assert_int_equal(link_open(&r, forged, n), AUTH_BAD_MAC);
    assert_int_equal(r.recv_top, 0);
    assert_int_equal(link_open(&r, good, n), AUTH_OK);
    /* A zero counter, and a nonce whose padding is not zero: not an envelope of a link. */
    memcpy(forged, good, n);
    memset(forged + 48, 0, 8);
    assert_int_equal(link_open(&r, forged, n), AUTH_MALFORMED);
    memcpy(forged, good, n);
    forged[40] = 1;
    assert_int_equal(link_open(&r, forged, n), AUTH_MALFORMED);
}

static void test_link_counter_spent(void **state)
{
    struct auth_link o, r;
    uint8_t buf[AUTH_OVERHEAD + 4];

    link_pair(&o, &r);
    o.send_counter = UINT64_MAX - 1;
    link_seal(&o, buf, 1);
    assert_int_equal(link_open(&r, buf, sizeof(buf)), AUTH_OK);
    assert_int_equal(auth_link_seal(&o, buf, 4), B10_ERR_PEER_LOST);   /* a nonce is never used twice */
}

static void test_seen(void **state)
{
    static struct auth_seen seen;
    struct auth_key key;
    uint8_t a[128], b[128];

    load_ones(&key);
    size_t na = seal_hello(&key, a, "first");
    size_t nb = seal_hello(&key, b, "second");
    assert_false(auth_seen_check(&seen, a, na));
    assert_false(auth_seen_check(&seen, b, nb));
    assert_true(auth_seen_check(&seen, a, na));
    assert_true(auth_seen_check(&seen, b, nb));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_known_answers),
        cmocka_unit_test(test_key_file_refusals),
        cmocka_unit_test(test_key_generate),
        cmocka_unit_test(test_keyring),
        cmocka_unit_test(test_envelope_round_trip),
        cmocka_unit_test(test_envelope_refusals),
        cmocka_unit_test(test_link_known_answers),
        cmocka_unit_test(test_link_both_ways),
        cmocka_unit_test(test_link_replay_window),
        cmocka_unit_test(test_link_forgery_moves_nothing),
        cmocka_unit_test(test_link_counter_spent),
        cmocka_unit_test(test_seen),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
