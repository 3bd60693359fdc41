/* hello.c — see hello.h. */
#include "hello.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "peer.pb-c.h"

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
