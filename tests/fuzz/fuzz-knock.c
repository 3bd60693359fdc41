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
 *    packed and opened again: the same fields must come out;
 *  - as a node proof (knock.h) after a good KNOCK and a good KNOCK_ACK:
 *    its bytes cut into certificates and a signature, encoded as the proof's
 *    fields, or appended raw; what opens holds the proof's bounds, and a
 *    proof that opens is checked by knock_verify against a CA of its own,
 *    which the fuzzer cannot sign for: it must never pass.
 * Any framed message also opens at most once per kind: never both.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "knock.h"
#include "nodeid.h"
#include "peer.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct auth_keyring ring, strangers;
static struct nodeid *id;      /* a node of the fuzzer's own CA: the anchors proofs are checked by */

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
    char dir[] = "/tmp/b10-fuzz-knock.XXXXXX", ca[64], cakey[64], cert[64], nkey[64], why[512];
    if (mkdtemp(dir) == NULL || nodeid_make_ca(dir, 1, why, sizeof(why)) != B10_OK)
        abort();
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    snprintf(cakey, sizeof(cakey), "%s/ca.key", dir);
    snprintf(cert, sizeof(cert), "%s/node-a.crt", dir);
    snprintf(nkey, sizeof(nkey), "%s/node-a.key", dir);
    if (nodeid_issue(ca, cakey, "node-a", dir, -60, 86400, why, sizeof(why)) != B10_OK ||
        nodeid_load(cert, nkey, ca, "node-a", &id, why, sizeof(why)) != B10_OK)
        abort();
    /* Loaded: the files are not read again (nodeid_refresh is never called here). */
    unlink(ca), unlink(cakey), unlink(cert), unlink(nkey), rmdir(dir);
}

/* A proof that opened holds the bounds of knock.h. */
static void check_proof(const struct knock_proof *p)
{
    size_t total = 0;

    if (!p->present) {
        if (p->chain.count != 0 || p->sig_length != 0)
            abort();
        return;
    }
    if (p->chain.count == 0 || p->chain.count > NODEID_MAX_CERTS || p->sig_length == 0 ||
        p->sig_length > NODEID_MAX_SIG)
        abort();
    for (unsigned i = 0; i < p->chain.count; i++) {
        if (p->chain.length[i] == 0 || p->chain.der[i] != p->chain_bytes + total)
            abort();
        total += p->chain.length[i];
    }
    if (total > NODEID_MAX_CHAIN_BYTES)
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
    check_proof(&k->proof);
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

/* Seal payload (length bytes) as kind and open it: what opens holds the bounds, and no proof passes. */
static void open_proof(bool ack, const uint8_t *payload, size_t length)
{
    static uint8_t buf[KNOCK_ACK_MAX_BYTES];
    static struct knock k;
    bool authenticated;
    char detail[KNOCK_DETAIL_MAX], why[400];

    if (4 + AUTH_OVERHEAD + length > (ack ? KNOCK_ACK_MAX_BYTES : KNOCK_MAX_BYTES))
        return;
    uint32_t len = (uint32_t)(AUTH_OVERHEAD + length);
    memcpy(buf + 4 + AUTH_HEADER_BYTES, payload, length);
    auth_seal(&ring.keys[0], ack ? AUTH_KIND_KNOCK_ACK : AUTH_KIND_KNOCK, 0x1111, 0, buf + 4, length);
    for (int b = 0; b < 4; b++)
        buf[b] = (uint8_t)(len >> (8 * b));
    if (knock_open(&ring, ack, buf, 4 + len, &k, &authenticated, detail, sizeof(detail)) != B10_OK)
        return;
    check(&k, ack);
    /* The fuzzer holds no key of the CA's: whatever it says, it proves no node. */
    if (k.proof.present && knock_verify(id, &k, k.name, why, sizeof(why)) == B10_OK)
        abort();
}

/*
 * The input as a node proof after a good KNOCK and a good KNOCK_ACK: its
 * first byte says how many certificates (up to one more than allowed) and
 * where the input is cut, the rest are their bytes and the signature's;
 * then the input appended raw, as fields of its own.
 */
static void as_proof(const uint8_t *data, size_t size)
{
    static uint8_t payload[KNOCK_ACK_MAX_BYTES];
    ProtobufCBinaryData certs[NODEID_MAX_CERTS + 1], addrs[1], sig = { 0, NULL };
    uint8_t nonce[KNOCK_NONCE_BYTES] = { 1 }, ip[4] = { 127, 0, 0, 1 };
    uint8_t worker[64];
    const void *w[1] = { "ucx" };
    size_t wl[1] = { 3 };

    if (size < 1)
        return;
    size_t ncerts = data[0] % (NODEID_MAX_CERTS + 2), rest = size - 1, at = 1;
    for (size_t i = 0; i < ncerts; i++) {
        size_t piece = rest / (ncerts + 1 - i);
        certs[i] = (ProtobufCBinaryData){ piece, (uint8_t *)data + at };
        at += piece;
        rest -= piece;
    }
    sig = (ProtobufCBinaryData){ rest, (uint8_t *)data + at };
    addrs[0] = (ProtobufCBinaryData){ 4, ip };
    size_t wlen = wireaddr_size(1, wl);
    wireaddr_pack(worker, 1, w, wl);
    for (int ack = 0; ack < 2; ack++) {
        size_t n;
        if (!ack) {
            B10__Peer__Knock m = B10__PEER__KNOCK__INIT;
            m.version = KNOCK_VERSION;
            m.name = "node-a";
            m.nonce = (ProtobufCBinaryData){ KNOCK_NONCE_BYTES, nonce };
            m.n_addresses = 1;
            m.addresses = addrs;
            m.n_node_chain = ncerts;
            m.node_chain = certs;
            m.node_sig = sig;
            if (b10__peer__knock__get_packed_size(&m) + size > sizeof(payload))
                continue;
            n = b10__peer__knock__pack(&m, payload);
            open_proof(false, payload, n);
            m.n_node_chain = 0;
            m.node_sig = (ProtobufCBinaryData){ 0, NULL };
            n = b10__peer__knock__pack(&m, payload);
        } else {
            B10__Peer__KnockAck m = B10__PEER__KNOCK_ACK__INIT;
            m.version = KNOCK_VERSION;
            m.name = "node-a";
            m.detail = "";
            m.knock_nonce = (ProtobufCBinaryData){ KNOCK_NONCE_BYTES, nonce };
            m.n_addresses = 1;
            m.addresses = addrs;
            m.incarnation = 1;
            m.worker_address = (ProtobufCBinaryData){ wlen, worker };
            m.n_node_chain = ncerts;
            m.node_chain = certs;
            m.node_sig = sig;
            if (b10__peer__knock_ack__get_packed_size(&m) + size > sizeof(payload))
                continue;
            n = b10__peer__knock_ack__pack(&m, payload);
            open_proof(true, payload, n);
            m.n_node_chain = 0;
            m.node_sig = (ProtobufCBinaryData){ 0, NULL };
            n = b10__peer__knock_ack__pack(&m, payload);
        }
        memcpy(payload + n, data, size);
        open_proof(ack, payload, n + size);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    as_wire(data, size);
    as_payload(data, size);
    as_fields(data, size);
    as_proof(data, size);
    return 0;
}
