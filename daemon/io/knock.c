/* knock.c — see knock.h. */
#include "knock.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer.pb-c.h"

_Static_assert(KNOCK_MAX_BYTES == 10352, "daemon/SECURITY.md (Below the envelope) gives the door's bound");

/* The context strings of a node's signature at the door: distinct from a HELLO's ("b10d HELLO v11"). */
static void knock_signed(bool ack, const uint8_t hash[AUTH_HASH_BYTES],
                         uint8_t out[KNOCK_SIGNED_BYTES])
{
    static const char knock_label[24] = "b10d knock v1";
    static const char ack_label[24] = "b10d knock-ack v1";

    memcpy(out, ack ? ack_label : knock_label, 24);
    memcpy(out + 24, hash, AUTH_HASH_BYTES);
}

/*
 * Append id's proof of the body at out (length bytes) after it: its chain
 * and its signature, packed as a message of the same kind holding those two
 * fields alone, so that the concatenation decodes as one message whose
 * proof fields come last. The proof's bytes, or 0 when it does not fit in
 * room or the key would not sign.
 */
static size_t knock_prove(const struct nodeid *id, bool ack, uint8_t *out, size_t length,
                          size_t room)
{
    uint8_t hash[AUTH_HASH_BYTES], msg[KNOCK_SIGNED_BYTES], sig[NODEID_MAX_SIG];
    ProtobufCBinaryData certs[NODEID_MAX_CERTS];
    struct nodeid_chain chain;
    size_t sig_length, n;

    auth_hash(hash, out, length);
    knock_signed(ack, hash, msg);
    if (nodeid_sign(id, msg, sizeof(msg), sig, &sig_length) != B10_OK)
        return 0;
    nodeid_chain_of(id, &chain);
    for (unsigned i = 0; i < chain.count; i++)
        certs[i] = (ProtobufCBinaryData){ chain.length[i], (uint8_t *)chain.der[i] };
    if (!ack) {
        B10__Peer__Knock m = B10__PEER__KNOCK__INIT;
        m.n_node_chain = chain.count;
        m.node_chain = certs;
        m.node_sig = (ProtobufCBinaryData){ sig_length, sig };
        if ((n = b10__peer__knock__get_packed_size(&m)) > room)
            return 0;
        return b10__peer__knock__pack(&m, out + length);
    }
    B10__Peer__KnockAck m = B10__PEER__KNOCK_ACK__INIT;
    m.n_node_chain = chain.count;
    m.node_chain = certs;
    m.node_sig = (ProtobufCBinaryData){ sig_length, sig };
    if ((n = b10__peer__knock_ack__get_packed_size(&m)) > room)
        return 0;
    return b10__peer__knock_ack__pack(&m, out + length);
}

size_t knock_pack(const struct auth_key *key, const struct knock *k, const struct nodeid *id,
                  uint8_t *out, size_t cap)
{
    ProtobufCBinaryData addrs[KNOCK_MAX_ADDRS];
    unsigned n = k->naddrs < KNOCK_MAX_ADDRS ? k->naddrs : KNOCK_MAX_ADDRS;
    size_t max = k->ack ? KNOCK_ACK_MAX_BYTES : KNOCK_MAX_BYTES;
    size_t body;

    if (cap < max)
        max = cap;
    if (max < 4 + AUTH_OVERHEAD)
        return 0;
    uint8_t *at = out + 4 + AUTH_HEADER_BYTES;
    size_t room = max - 4 - AUTH_OVERHEAD;
    for (unsigned i = 0; i < n; i++)
        addrs[i] = (ProtobufCBinaryData){ k->addrs[i].family == 4 ? 4 : 16,
                                          (uint8_t *)k->addrs[i].bytes };
    if (!k->ack) {
        B10__Peer__Knock m = B10__PEER__KNOCK__INIT;
        m.version = KNOCK_VERSION;
        m.name = (char *)k->name;
        m.sent_ms = k->sent_ms;
        m.nonce = (ProtobufCBinaryData){ KNOCK_NONCE_BYTES, (uint8_t *)k->nonce };
        m.n_addresses = n;
        m.addresses = addrs;
        if ((body = b10__peer__knock__get_packed_size(&m)) > room)
            return 0;
        b10__peer__knock__pack(&m, at);
    } else {
        B10__Peer__KnockAck m = B10__PEER__KNOCK_ACK__INIT;
        m.version = KNOCK_VERSION;
        m.knock_nonce = (ProtobufCBinaryData){ KNOCK_NONCE_BYTES, (uint8_t *)k->nonce };
        m.status = (B10__Status)k->status;
        m.detail = (char *)k->detail;
        m.name = (char *)k->name;
        m.n_addresses = n;
        m.addresses = addrs;
        m.incarnation = k->incarnation;
        m.worker_address = (ProtobufCBinaryData){ k->address_length, (uint8_t *)k->address };
        if ((body = b10__peer__knock_ack__get_packed_size(&m)) > room)
            return 0;
        b10__peer__knock_ack__pack(&m, at);
    }
    if (id != NULL) {
        size_t proof = knock_prove(id, k->ack, at, body, room - body);
        if (proof == 0)
            return 0;
        body += proof;
    }
    auth_seal(key, k->ack ? AUTH_KIND_KNOCK_ACK : AUTH_KIND_KNOCK, k->sender_id, 0, out + 4, body);
    uint32_t len = (uint32_t)(AUTH_OVERHEAD + body);
    for (int b = 0; b < 4; b++)
        out[b] = (uint8_t)(len >> (8 * b));
    return 4 + len;
}

size_t knock_frame_length(const uint8_t *buf, size_t have, bool ack)
{
    if (have < 4)
        return 0;
    size_t len = (size_t)buf[0] | (size_t)buf[1] << 8 | (size_t)buf[2] << 16 | (size_t)buf[3] << 24;
    if (len < AUTH_OVERHEAD || 4 + len > (ack ? KNOCK_ACK_MAX_BYTES : KNOCK_MAX_BYTES))
        return SIZE_MAX;
    return 4 + len;
}


static b10_status_t knock_refuse(char *detail, size_t detail_len, const char *why)
{
    snprintf(detail, detail_len, "%s", why);
    return B10_ERR_PEER_PROTOCOL;
}

/* Addresses of 4 or 16 bytes, at least one and at most KNOCK_MAX_ADDRS. */
static bool knock_addrs(struct knock *out, size_t n, const ProtobufCBinaryData *a)
{
    if (n == 0 || n > KNOCK_MAX_ADDRS)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (a[i].len != 4 && a[i].len != 16)
            return false;
        memset(&out->addrs[i], 0, sizeof(out->addrs[i]));
        out->addrs[i].family = a[i].len == 4 ? 4 : 6;
        memcpy(out->addrs[i].bytes, a[i].data, a[i].len);
    }
    out->naddrs = (unsigned)n;
    return true;
}

/* A protobuf varint at *at, of at most 10 bytes, within len. */
static bool knock_varint(const uint8_t *p, size_t len, size_t *at, uint64_t *v)
{
    *v = 0;
    for (unsigned i = 0; i < 10 && *at < len; i++) {
        uint8_t b = p[(*at)++];
        *v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80))
            return true;
    }
    return false;
}

/*
 * Where the node proof begins in a payload: at its first field, after
 * which every field is one of the proof's, so that the bytes it signs are
 * all of the message but the proof (a field after it would be unsigned).
 * len when there is none. Walks the fields of the top level alone, each
 * bounded by len; NULL, or why not.
 */
static const char *knock_proof_start(bool ack, const uint8_t *p, size_t len, size_t *start_p)
{
    const uint64_t chain_field = ack ? 9 : 6, sig_field = ack ? 10 : 7;
    size_t at = 0, start = len;

    while (at < len) {
        size_t field_at = at;
        uint64_t tag, v;
        if (!knock_varint(p, len, &at, &tag))
            return "a malformed message";
        switch (tag & 7) {
        case 0:
            if (!knock_varint(p, len, &at, &v))
                return "a malformed message";
            break;
        case 1:
        case 5:
            v = (tag & 7) == 1 ? 8 : 4;
            if (v > len - at)
                return "a malformed message";
            at += v;
            break;
        case 2:
            if (!knock_varint(p, len, &at, &v) || v > len - at)
                return "a malformed message";
            at += (size_t)v;
            break;
        default:
            return "a malformed message";
        }
        bool proof = tag >> 3 == chain_field || tag >> 3 == sig_field;
        if (proof && start == len)
            start = field_at;
        else if (!proof && start != len)
            return "fields after the node proof";
    }
    *start_p = start;
    return NULL;
}

/*
 * A proof's fields, both or neither, held to the chain's bounds before any
 * of it is parsed (knock_verify parses the certificates), copied out of
 * the message about to be freed. signed_length: the payload's bytes before
 * the proof, which p points at.
 */
_Static_assert(NODEID_MAX_CERTS == 4 && NODEID_MAX_CHAIN_BYTES == 8192, "the refusals below say so");

static const char *knock_proof_decode(size_t ncerts, const ProtobufCBinaryData *certs,
                                      const ProtobufCBinaryData *sig, const uint8_t *p,
                                      size_t signed_length, struct knock_proof *out)
{
    size_t total = 0;

    memset(out, 0, sizeof(*out));
    if (ncerts == 0 && sig->len == 0)
        return NULL;
    if (ncerts == 0 || sig->len == 0 || sig->len > NODEID_MAX_SIG)
        return "a node proof without its chain or signature";
    if (ncerts > NODEID_MAX_CERTS)
        return "a certificate chain of more than 4 certificates";
    for (size_t i = 0; i < ncerts; i++) {
        if (certs[i].len == 0 || certs[i].len > NODEID_MAX_CHAIN_BYTES - total)
            return "a certificate chain of more than 8192 bytes";
        memcpy(out->chain_bytes + total, certs[i].data, certs[i].len);
        out->chain.der[i] = out->chain_bytes + total;
        out->chain.length[i] = certs[i].len;
        total += certs[i].len;
    }
    out->chain.count = (unsigned)ncerts;
    memcpy(out->sig, sig->data, sig->len);
    out->sig_length = sig->len;
    auth_hash(out->signed_hash, p, signed_length);
    out->present = true;
    return NULL;
}

static const char *knock_decode(bool ack, const uint8_t *p, size_t len, struct knock *out)
{
    const char *why = NULL;
    size_t signed_length;

    if ((why = knock_proof_start(ack, p, len, &signed_length)) != NULL)
        return why;
    if (!ack) {
        B10__Peer__Knock *m = b10__peer__knock__unpack(NULL, len, p);
        if (m == NULL)
            return "not a KNOCK";
        if (m->version != KNOCK_VERSION)
            why = "another knock version";
        else if (!config_name_ok(m->name))
            why = "bad daemon name";
        else if (m->nonce.len != KNOCK_NONCE_BYTES)
            why = "nonce of the wrong size";
        else if (!knock_addrs(out, m->n_addresses, m->addresses))
            why = "no addresses, too many, or one neither IPv4 nor IPv6";
        else
            why = knock_proof_decode(m->n_node_chain, m->node_chain, &m->node_sig, p,
                                     signed_length, &out->proof);
        if (why == NULL) {
            snprintf(out->name, sizeof(out->name), "%s", m->name);
            out->sent_ms = m->sent_ms;
            memcpy(out->nonce, m->nonce.data, KNOCK_NONCE_BYTES);
        }
        b10__peer__knock__free_unpacked(m, NULL);
        return why;
    }
    const uint8_t *lanes[1 + WIREADDR_MAX_LANES];
    size_t lengths[1 + WIREADDR_MAX_LANES];
    unsigned workers;
    B10__Peer__KnockAck *m = b10__peer__knock_ack__unpack(NULL, len, p);
    if (m == NULL)
        return "not a KNOCK_ACK";
    if (m->version != KNOCK_VERSION)
        why = "another knock version";
    else if (!config_name_ok(m->name))
        why = "bad daemon name";
    else if (m->knock_nonce.len != KNOCK_NONCE_BYTES)
        why = "nonce of the wrong size";
    else if (m->status == B10__STATUS__OK && !knock_addrs(out, m->n_addresses, m->addresses))
        why = "no addresses, too many, or one neither IPv4 nor IPv6";
    else if (m->status == B10__STATUS__OK &&
             (m->incarnation == 0 || m->worker_address.len == 0 ||
              m->worker_address.len > KNOCK_MAX_ADDRESS ||
              wireaddr_unpack(m->worker_address.data, m->worker_address.len, lanes, lengths,
                              &workers) != B10_OK))
        why = "no boot, or a malformed worker address";
    else
        why = knock_proof_decode(m->n_node_chain, m->node_chain, &m->node_sig, p, signed_length,
                                 &out->proof);
    if (why == NULL) {
        snprintf(out->name, sizeof(out->name), "%s", m->name);
        memcpy(out->nonce, m->knock_nonce.data, KNOCK_NONCE_BYTES);
        out->status = (b10_status_t)m->status;
        out->incarnation = m->incarnation;
        if (m->status == B10__STATUS__OK) {
            memcpy(out->address, m->worker_address.data, m->worker_address.len);
            out->address_length = m->worker_address.len;
        }
        snprintf(out->detail, sizeof(out->detail), "%s", m->detail != NULL ? m->detail : "");
        if (strcmp(b10_status_name(out->status), "B10_UNKNOWN") == 0 ||
            out->status == B10_IN_PROGRESS)
            why = "an unknown status";
    }
    b10__peer__knock_ack__free_unpacked(m, NULL);
    return why;
}

b10_status_t knock_open(const struct auth_keyring *ring, bool ack, const uint8_t *buf,
                        size_t length, struct knock *out, bool *authenticated, char *detail,
                        size_t detail_len)
{
    enum auth_kind kind = ack ? AUTH_KIND_KNOCK_ACK : AUTH_KIND_KNOCK;
    struct auth_header hdr;
    const uint8_t *payload;
    size_t payload_len;

    *authenticated = false;
    memset(out, 0, sizeof(*out));
    if (length < 4 || knock_frame_length(buf, length, ack) != length || auth_peek(buf + 4, length - 4, &hdr) != 0 ||
        hdr.kind != kind)
        return knock_refuse(detail, detail_len, "not a knock");
    const struct auth_key *key = auth_keyring_find(ring, hdr.key_id);
    if (key == NULL || key->kind == AUTH_KEY_LOCAL)
        return knock_refuse(detail, detail_len, "sealed under a key this daemon does not hold");
    if (auth_open(key, kind, buf + 4, length - 4, &payload, &payload_len) != AUTH_OK)
        return knock_refuse(detail, detail_len, "does not authenticate");
    *authenticated = true;
    if (hdr.sender_id == 0)
        return knock_refuse(detail, detail_len, "no daemon id");
    const char *why = knock_decode(ack, payload, payload_len, out);
    if (why != NULL)
        return knock_refuse(detail, detail_len, why);
    out->ack = ack;
    out->sender_id = hdr.sender_id;
    out->key_id = hdr.key_id;
    return B10_OK;
}

b10_status_t knock_verify(const struct nodeid *id, const struct knock *k, const char *name,
                          char *detail, size_t detail_len)
{
    uint8_t msg[KNOCK_SIGNED_BYTES];

    if (!k->proof.present) {
        snprintf(detail, detail_len, "no node certificate");
        return B10_ERR_PERMISSION;
    }
    knock_signed(k->ack, k->proof.signed_hash, msg);
    return nodeid_verify(id, &k->proof.chain, name, msg, sizeof(msg), k->proof.sig,
                         k->proof.sig_length, detail, detail_len);
}
