/*
 * fuzz-knock — libFuzzer target for what a door reads from anyone who
 * reaches it (daemon/io/knock.c), and what a knocker reads back.
 *
 * The input is used three ways:
 *  - as a framed message off the wire, opened as a KNOCK and a KNOCK_ACK
 *    under a keyring it cannot know (it must never open), and its length
 *    word read as the door reads it;
 *  - as the payload of an envelope sealed here under the fuzzer's key, so
 *    that the protobuf decoder and the checks behind it see every shape a
 *    key holder could send: what passes must hold the bounds;
 *  - as the fields of a KNOCK built from it (a name, addresses of its bytes),
 *    packed and opened again: the same fields must come out.
 * Any framed message also opens at most once per kind: never both.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "knock.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct auth_keyring ring, strangers;

static void setup(void)
{
    static int done;
    struct auth_key key, other;

    if (done)
        return;
    done = 1;
    if (auth_init() != 0)
        abort();
    auth_key_insecure(&key);
    key.kind = AUTH_KEY_CLUSTER;    /* a door opens only under a cluster key */
    auth_key_local(&other);
    other.kind = AUTH_KEY_CLUSTER;
    other.id ^= 1;
    if (auth_keyring_add(&ring, &key) != 0 || auth_keyring_add(&strangers, &other) != 0)
        abort();
}

static void check(const struct knock *k, bool ack)
{
    if (k->ack != ack || k->sender_id == 0 || !config_name_ok(k->name) ||
        k->naddrs > KNOCK_MAX_ADDRS || (!ack && k->naddrs == 0) ||
        (ack && k->status == B10_OK && k->naddrs == 0) || (ack && k->status == B10_IN_PROGRESS))
        abort();
    for (unsigned i = 0; i < k->naddrs; i++)
        if (k->addrs[i].family != 4 && k->addrs[i].family != 6)
            abort();
    if (memchr(k->detail, '\0', sizeof(k->detail)) == NULL)
        abort();
    /* An answer that lets in names the boot that answers, with a worker address that unpacks. */
    const uint8_t *lanes[1 + WIREADDR_MAX_LANES];
    size_t lengths[1 + WIREADDR_MAX_LANES];
    unsigned workers;
    if (ack && k->status == B10_OK &&
        (k->incarnation == 0 || k->address_length == 0 ||
         k->address_length > KNOCK_MAX_ADDRESS ||
         wireaddr_unpack(k->address, k->address_length, lanes, lengths, &workers) != B10_OK))
        abort();
    if (!(ack && k->status == B10_OK) && k->address_length != 0)
        abort();
}

/* The input as it arrives: a stranger's bytes open under no key. */
static void as_wire(const uint8_t *data, size_t size)
{
    struct knock k;
    bool authenticated;
    char detail[KNOCK_DETAIL_MAX];

    for (int ack = 0; ack < 2; ack++) {
        size_t want = knock_frame_length(data, size, ack);
        if (want != 0 && want != SIZE_MAX &&
            (want < 4 + AUTH_OVERHEAD || want > (ack ? KNOCK_ACK_MAX_BYTES : KNOCK_MAX_BYTES)))
            abort();
    }
    for (int ack = 0; ack < 2; ack++) {
        if (knock_open(&strangers, ack, data, size, &k, &authenticated, detail, sizeof(detail)) == B10_OK)
            abort();
        if (knock_open(&ring, ack, data, size, &k, &authenticated, detail, sizeof(detail)) == B10_OK)
            abort();    /* the fuzzer cannot forge the key's MAC */
    }
}

/* The input as a key holder's payload, sealed as a KNOCK and as a KNOCK_ACK. */
static void as_payload(const uint8_t *data, size_t size)
{
    static uint8_t buf[KNOCK_ACK_MAX_BYTES];
    struct knock k;
    bool authenticated;
    char detail[KNOCK_DETAIL_MAX];

    if (4 + AUTH_OVERHEAD + size > KNOCK_MAX_BYTES)
        return;
    for (int ack = 0; ack < 2; ack++) {
        uint32_t len = (uint32_t)(AUTH_OVERHEAD + size);
        memcpy(buf + 4 + AUTH_HEADER_BYTES, data, size);
        auth_seal(&ring.keys[0], ack ? AUTH_KIND_KNOCK_ACK : AUTH_KIND_KNOCK, 0x1111, 0, buf + 4, size);
        for (int b = 0; b < 4; b++)
            buf[b] = (uint8_t)(len >> (8 * b));
        b10_status_t st = knock_open(&ring, ack, buf, 4 + len, &k, &authenticated, detail,
                                     sizeof(detail));
        if (!authenticated)
            abort();
        if (st == B10_OK)
            check(&k, ack);
        /* Sealed as one kind, it never opens as the other. */
        if (knock_open(&ring, !ack, buf, 4 + len, &k, &authenticated, detail, sizeof(detail)) == B10_OK)
            abort();
    }
}

/* A knock of the input's fields survives packing and opening unchanged. */
static void as_fields(const uint8_t *data, size_t size)
{
    struct knock k = { .sender_id = 0x2222, .sent_ms = 12345 }, out;
    uint8_t buf[KNOCK_MAX_BYTES];
    bool authenticated;
    char detail[KNOCK_DETAIL_MAX];

    if (size < 2 + KNOCK_NONCE_BYTES)
        return;
    size_t name_len = 1 + data[0] % 40;
    k.naddrs = 1 + data[1] % KNOCK_MAX_ADDRS;
    memcpy(k.nonce, data + 2, KNOCK_NONCE_BYTES);
    for (size_t i = 0; i < name_len; i++)
        k.name[i] = "abcdefghijklmnopqrstuvwxyz0123456789-._"[data[(2 + i) % size] % 39];
    for (unsigned i = 0; i < k.naddrs; i++) {
        k.addrs[i].family = data[(i * 7) % size] & 1 ? 6 : 4;
        for (int b = 0; b < 16; b++)
            k.addrs[i].bytes[b] = k.addrs[i].family == 4 && b >= 4 ? 0 : data[(i * 16 + b) % size];
    }
    size_t n = knock_pack(&ring.keys[0], &k, NULL, buf, sizeof(buf));
    if (n == 0)
        abort();
    b10_status_t st = knock_open(&ring, false, buf, n, &out, &authenticated, detail, sizeof(detail));
    if (!config_name_ok(k.name)) {
        if (st == B10_OK)
            abort();
        return;
    }
    if (st != B10_OK || out.naddrs != k.naddrs || out.sent_ms != k.sent_ms ||
        memcmp(out.nonce, k.nonce, KNOCK_NONCE_BYTES) != 0 || strcmp(out.name, k.name) != 0 ||
        memcmp(out.addrs, k.addrs, k.naddrs * sizeof(k.addrs[0])) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    as_wire(data, size);
    as_payload(data, size);
    as_fields(data, size);
    return 0;
}
