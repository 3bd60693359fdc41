/* hello.c — see hello.h. */
#include "hello.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "peer.pb-c.h"

/*
 * A proof's fields, all or none, held to the chain's bounds before any of
 * it is parsed (nodeid_verify parses the certificates). The chain's bytes
 * stay where they are unless copy (HELLO_ACK: out of a message about to be
 * freed) holds NODEID_MAX_CHAIN_BYTES of room.
 */
_Static_assert(NODEID_MAX_CERTS == 4 && NODEID_MAX_CHAIN_BYTES == 8192, "the refusals below say so");

static const char *hello_proof_decode(size_t ncerts, const ProtobufCBinaryData *certs,
                                      const ProtobufCBinaryData *kx, const ProtobufCBinaryData *sig,
                                      struct hello_proof *p, uint8_t *copy)
{
    size_t total = 0;

    memset(p, 0, sizeof(*p));
    if (ncerts == 0 && kx->len == 0 && sig->len == 0)
        return NULL;
    if (ncerts == 0 || kx->len != AUTH_KX_BYTES || sig->len == 0 || sig->len > NODEID_MAX_SIG)
        return "a node proof without its chain, X25519 key or signature";
    if (ncerts > NODEID_MAX_CERTS)
        return "a certificate chain of more than 4 certificates";
    for (size_t i = 0; i < ncerts; i++) {
        if (certs[i].len == 0 || certs[i].len > NODEID_MAX_CHAIN_BYTES - total)
            return "a certificate chain of more than 8192 bytes";
        if (copy != NULL) {
            memcpy(copy + total, certs[i].data, certs[i].len);
            p->chain.der[i] = copy + total;
        } else {
            p->chain.der[i] = certs[i].data;
        }
        p->chain.length[i] = certs[i].len;
        total += certs[i].len;
    }
    p->chain.count = (unsigned)ncerts;
    memcpy(p->kx_public, kx->data, AUTH_KX_BYTES);
    memcpy(p->sig, sig->data, sig->len);
    p->sig_length = sig->len;
    p->present = true;
    return NULL;
}

static void hello_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

void hello_transcript(const struct hello_transcript *t, uint8_t out[HELLO_TRANSCRIPT_BYTES])
{
    static const char hello_label[24] = "b10d HELLO v11";
    static const char ack_label[24] = "b10d HELLO_ACK v11";
    uint8_t *p = out;

    memset(out, 0, HELLO_TRANSCRIPT_BYTES);
    memcpy(p, t->ack ? ack_label : hello_label, 24);
    p += 24;
    hello_put64(p, t->sender_id);
    hello_put64(p + 8, t->receiver_id);
    hello_put64(p + 16, t->gen);
    hello_put64(p + 24, t->incarnation);
    p += 32;
    /* The name zero-padded to its fixed room: a name cannot run into the next field. */
    memcpy(p, t->name, strnlen(t->name, HELLO_NAME_MAX - 1));
    p += HELLO_NAME_MAX;
    memcpy(p, t->opener_nonce, AUTH_NONCE_BYTES);
    memcpy(p + AUTH_NONCE_BYTES, t->opener_kx, AUTH_KX_BYTES);
    p += AUTH_NONCE_BYTES + AUTH_KX_BYTES;
    if (t->ack) {
        memcpy(p, t->nonce, AUTH_NONCE_BYTES);
        memcpy(p + AUTH_NONCE_BYTES, t->kx, AUTH_KX_BYTES);
    }
    p += AUTH_NONCE_BYTES + AUTH_KX_BYTES;
    if (!t->ack)
        auth_hash(p, t->address, t->address_length);
}

static b10_status_t hello_refuse(char *detail, size_t detail_len, const char *why)
{
    snprintf(detail, detail_len, "%s", why);
    return B10_ERR_PEER_PROTOCOL;
}

b10_status_t hello_decode(const uint8_t *payload, size_t length, const struct auth_header *hdr,
                          struct B10__Peer__Msg **msg_p, struct hello *h, char *detail,
                          size_t detail_len)
{
    const uint8_t *addrs[1 + WIREADDR_MAX_LANES];
    size_t lengths[1 + WIREADDR_MAX_LANES];
    unsigned workers;
    B10__Peer__Msg *msg = b10__peer__msg__unpack(NULL, length, payload);
    const char *why = NULL;

    if (msg == NULL || msg->body_case != B10__PEER__MSG__BODY_HELLO) {
        why = "not a HELLO";
        goto bad;
    }
    const B10__Peer__Hello *m = msg->hello;
    if (m->version != B10_PEER_PROTOCOL_VERSION)
        why = "another protocol version";
    else if (m->daemon_id == 0 || m->daemon_id != hdr->sender_id ||
             m->to_daemon_id != hdr->receiver_id || m->gen == 0)
        why = "daemon ids or generation do not match the envelope";
    else if (m->nonce.len != AUTH_NONCE_BYTES)
        why = "nonce of the wrong size";
    else if (!config_name_ok(m->name))
        why = "bad daemon name";
    else if (m->incarnation == 0)
        why = "no incarnation";
    else if (m->worker_address.len == 0 || m->worker_address.len > HELLO_MAX_ADDRESS ||
             wireaddr_unpack(m->worker_address.data, m->worker_address.len, addrs, lengths,
                             &workers) != B10_OK)
        why = "malformed worker address";
    else
        why = hello_proof_decode(m->n_node_chain, m->node_chain, &m->kx_public, &m->node_sig,
                                 &h->proof, NULL);
    if (why != NULL)
        goto bad;
    h->daemon_id = m->daemon_id;
    h->to_daemon_id = m->to_daemon_id;
    h->gen = m->gen;
    h->incarnation = m->incarnation;
    memcpy(h->nonce, m->nonce.data, AUTH_NONCE_BYTES);
    snprintf(h->name, sizeof(h->name), "%s", m->name);
    h->address = m->worker_address.data;
    h->address_length = m->worker_address.len;
    *msg_p = msg;
    return B10_OK;
bad:
    if (msg != NULL)
        b10__peer__msg__free_unpacked(msg, NULL);
    return hello_refuse(detail, detail_len, why);
}

static bool hello_in(uint64_t v, uint64_t lo, uint64_t hi)
{
    return v >= lo && v <= hi;
}

b10_status_t hello_decode_ack(const uint8_t *payload, size_t length, const struct auth_header *hdr,
                              struct hello_ack *a, char *detail, size_t detail_len)
{
    B10__Peer__Msg *msg = b10__peer__msg__unpack(NULL, length, payload);
    const char *why = NULL;

    a->identified = false;
    a->proof.present = false;
    if (msg == NULL || msg->body_case != B10__PEER__MSG__BODY_HELLO_ACK) {
        why = "not a HELLO_ACK";
        goto out;
    }
    const B10__Peer__HelloAck *m = msg->hello_ack;
    b10_status_t status = (b10_status_t)m->status;
    if (m->version != B10_PEER_PROTOCOL_VERSION)
        why = "another protocol version";
    else if (m->daemon_id == 0 || m->daemon_id != hdr->sender_id || m->gen == 0)
        why = "daemon id or generation do not match the envelope";
    else if (m->opener_nonce.len != AUTH_NONCE_BYTES)
        why = "no echo of the HELLO's nonce";
    else if (strcmp(b10_status_name(status), "B10_UNKNOWN") == 0 || status == B10_IN_PROGRESS)
        why = "unknown status";
    else if (!config_name_ok(m->name) || m->incarnation == 0)
        why = "bad daemon name or incarnation";
    if (why != NULL)
        goto out;
    a->daemon_id = m->daemon_id;
    a->gen = m->gen;
    a->status = status;
    snprintf(a->detail, sizeof(a->detail), "%s", m->detail);
    snprintf(a->name, sizeof(a->name), "%s", m->name);
    a->incarnation = m->incarnation;
    memcpy(a->opener_nonce, m->opener_nonce.data, AUTH_NONCE_BYTES);
    a->identified = true;
    if (status != B10_OK)
        goto out;   /* a refusal: who refuses, and why, is all it has to say */
    /* An accepted link: the receiver's limits shape every plan sent on it, so they are held to bounds. */
    if (m->nonce.len != AUTH_NONCE_BYTES)
        why = "nonce of the wrong size";
    else if (!hello_in(m->max_chunk_bytes, HELLO_MIN_CHUNK, HELLO_MAX_CHUNK))
        why = "chunk limit out of range";
    else if (!hello_in(m->max_control_bytes, HELLO_MIN_CONTROL, HELLO_MAX_CONTROL))
        why = "control-message limit out of range";
    else if (!hello_in(m->max_pieces, 1, HELLO_MAX_PIECES))
        why = "piece limit out of range";
    else
        why = hello_proof_decode(m->n_node_chain, m->node_chain, &m->kx_public, &m->node_sig,
                                 &a->proof, a->chain_bytes);
    if (why != NULL)
        goto out;
    memcpy(a->nonce, m->nonce.data, AUTH_NONCE_BYTES);
    a->max_chunk = m->max_chunk_bytes;
    a->max_control = m->max_control_bytes;
    a->max_pieces = m->max_pieces;
out:
    if (msg != NULL)
        b10__peer__msg__free_unpacked(msg, NULL);
    if (why != NULL) {
        char what[160];
        snprintf(what, sizeof(what), "HELLO_ACK: %s", why);
        return hello_refuse(detail, detail_len, what);
    }
    return B10_OK;
}
