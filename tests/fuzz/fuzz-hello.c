/*
 * fuzz-hello — libFuzzer target for what reaches a daemon before it trusts
 * anyone: the authenticated envelope (daemon/io/auth.c) and the HELLO path
 * behind it (daemon/io/hello.c), the embedded worker address included.
 *
 * The input is used three ways:
 *  - as an envelope off the wire: its header read, and opened as a HELLO,
 *    HELLO_ACK, descriptor and link message under keys it cannot know
 *    (it must never open);
 *  - as the payload of an envelope that does open (sealed here with the
 *    fuzzer's key): decoded as a HELLO and a HELLO_ACK, whose checks must
 *    hold for whatever passes them;
 *  - as the fields of a HELLO built from it (a name, a nonce, ids and a
 *    worker address of its bytes), so that the checks behind the protobuf
 *    decoder see every shape of address, as a cluster member that holds the
 *    key could send it.
 * What hello_decode lets through is what b10d hands to UCX: its worker
 * address must then unpack into bounded workers, each inside the message.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "hello.h"
#include "peer.pb-c.h"
#include "wireaddr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct auth_key key, stranger;
static struct auth_link opener, receiver;

static void setup(void)
{
    static int done;
    uint8_t n1[AUTH_NONCE_BYTES] = { 1 }, n2[AUTH_NONCE_BYTES] = { 2 };

    if (done)
        return;
    done = 1;
    if (auth_init() != 0)
        abort();
    auth_key_insecure(&key);
    auth_key_local(&stranger);
    auth_link_derive(&key, 0x1111, 0x2222, 0x3333, n1, n2, true, &opener);
    auth_link_derive(&key, 0x1111, 0x2222, 0x3333, n1, n2, false, &receiver);
}

/* What hello_decode passed must be what peer.c may use: bounded, and inside the message. */
static void check_hello(const struct hello *h, const B10__Peer__Msg *msg, const struct auth_header *hdr)
{
    const uint8_t *addrs[1 + WIREADDR_MAX_LANES];
    size_t lengths[1 + WIREADDR_MAX_LANES];

    if (h->daemon_id != hdr->sender_id || h->to_daemon_id != hdr->receiver_id || h->gen == 0 ||
        h->incarnation == 0 || !config_name_ok(h->name) || h->address_length == 0 ||
        h->address_length > HELLO_MAX_ADDRESS || h->address != msg->hello->worker_address.data)
        abort();
    unsigned n;
    if (wireaddr_unpack(h->address, h->address_length, addrs, lengths, &n) != B10_OK || n < 1 ||
        n > 1 + WIREADDR_MAX_LANES)
        abort();
    for (unsigned i = 0; i < n; i++)
        if (lengths[i] == 0 || addrs[i] < h->address ||
            addrs[i] + lengths[i] > h->address + h->address_length)
            abort();
}

/* A proof that decoded is within the bounds nodeid_verify is handed, its chain inside base..end. */
static void check_proof(const struct hello_proof *p, const uint8_t *base, size_t length)
{
    size_t total = 0;

    if (!p->present)
        return;
    if (p->chain.count == 0 || p->chain.count > NODEID_MAX_CERTS || p->sig_length == 0 ||
        p->sig_length > NODEID_MAX_SIG)
        abort();
    for (unsigned i = 0; i < p->chain.count; i++) {
        total += p->chain.length[i];
        if (p->chain.length[i] == 0 || p->chain.der[i] < base ||
            p->chain.der[i] + p->chain.length[i] > base + length)
            abort();
    }
    if (total > NODEID_MAX_CHAIN_BYTES)
        abort();
}

static void check_ack(const struct hello_ack *a)
{
    check_proof(&a->proof, a->chain_bytes, sizeof(a->chain_bytes));
    if (a->status == B10_OK &&
        (a->max_chunk < HELLO_MIN_CHUNK || a->max_chunk > HELLO_MAX_CHUNK ||
         a->max_control < HELLO_MIN_CONTROL || a->max_control > HELLO_MAX_CONTROL ||
         a->max_pieces < 1 || a->max_pieces > HELLO_MAX_PIECES || !config_name_ok(a->name)))
        abort();
    if (a->status == B10_IN_PROGRESS)
        abort();
}

/* Seal payload as kind under the fuzzer's key, open it again, and decode what is inside. */
static void through_envelope(const uint8_t *payload, size_t len)
{
    uint8_t *buf = malloc(AUTH_OVERHEAD + len);
    const uint8_t *in;
    size_t in_len;
    struct auth_header hdr;
    char detail[256];

    if (buf == NULL)
        return;
    memcpy(buf + AUTH_HEADER_BYTES, payload, len);
    auth_seal(&key, AUTH_KIND_HELLO, 0x1111, 0x2222, buf, len);
    if (auth_open(&key, AUTH_KIND_HELLO, buf, AUTH_OVERHEAD + len, &in, &in_len) != AUTH_OK ||
        auth_peek(buf, AUTH_OVERHEAD + len, &hdr) != 0 || in_len != len)
        abort();
    B10__Peer__Msg *msg = NULL;
    struct hello h;
    if (hello_decode(in, in_len, &hdr, &msg, &h, detail, sizeof(detail)) == B10_OK) {
        check_hello(&h, msg, &hdr);
        check_proof(&h.proof, in, in_len);
        b10__peer__msg__free_unpacked(msg, NULL);
    }
    struct hello_ack a;
    struct auth_header ack_hdr = hdr;
    ack_hdr.kind = AUTH_KIND_HELLO_ACK;
    if (hello_decode_ack(in, in_len, &ack_hdr, &a, detail, sizeof(detail)) == B10_OK)
        check_ack(&a);
    /* The same bytes on a link: they open on the other end, once. */
    memcpy(buf + AUTH_HEADER_BYTES, payload, len);
    if (auth_link_seal(&opener, buf, len) != 0 ||
        auth_link_open(&receiver, buf, AUTH_OVERHEAD + len, &in, &in_len) != AUTH_OK ||
        auth_link_open(&receiver, buf, AUTH_OVERHEAD + len, &in, &in_len) != AUTH_REPLAYED)
        abort();
    free(buf);
}

/* A HELLO whose fields come from the input, its worker address the input's tail. */
static void built_hello(const uint8_t *data, size_t size)
{
    uint8_t nonce[64];
    char name[80];
    B10__Peer__Hello hello = B10__PEER__HELLO__INIT;
    B10__Peer__Msg m = B10__PEER__MSG__INIT;

    if (size < 16)
        return;
    size_t nonce_len = data[1] % 40, name_len = data[2] % 70;
    memset(nonce, data[3], sizeof(nonce));
    for (size_t i = 0; i < name_len; i++)
        name[i] = (char)(data[4 + i % 8] ? data[4 + i % 8] : 'x');
    name[name_len] = '\0';
    hello.version = data[0] % 5;
    hello.daemon_id = data[12] & 1 ? 0x1111 : data[12];
    hello.to_daemon_id = data[13] & 1 ? 0x2222 : data[13];
    hello.gen = data[14];
    hello.incarnation = data[15];
    hello.nonce = (ProtobufCBinaryData){ nonce_len, nonce };
    hello.name = name;
    hello.worker_address = (ProtobufCBinaryData){ size - 16, (uint8_t *)data + 16 };
    m.body_case = B10__PEER__MSG__BODY_HELLO;
    m.hello = &hello;
    size_t len = b10__peer__msg__get_packed_size(&m);
    uint8_t *packed = malloc(len ? len : 1);
    if (packed == NULL)
        return;
    b10__peer__msg__pack(&m, packed);
    through_envelope(packed, len);
    free(packed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct auth_header hdr;
    const uint8_t *in;
    size_t in_len;

    setup();
    /* Off the wire: whatever it is, nothing opens without the key. */
    if (auth_peek(data, size, &hdr) == 0 && hdr.kind != AUTH_KIND_LINK && hdr.dir != 0)
        abort();
    static const enum auth_kind kinds[] = { AUTH_KIND_HELLO, AUTH_KIND_HELLO_ACK, AUTH_KIND_DESC };
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (auth_open(&stranger, kinds[i], data, size, &in, &in_len) == AUTH_OK)
            abort();
    struct auth_link probe = receiver;
    if (auth_link_open(&probe, data, size, &in, &in_len) == AUTH_OK)
        abort();
    /* Behind an envelope that opens. */
    through_envelope(data, size);
    built_hello(data, size);
    return 0;
}
