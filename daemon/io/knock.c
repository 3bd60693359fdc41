/* knock.c — see knock.h. */
#include "knock.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer.pb-c.h"

size_t knock_pack(const struct auth_key *key, const struct knock *k, uint8_t *out, size_t cap)
{
    ProtobufCBinaryData addrs[KNOCK_MAX_ADDRS];
    unsigned n = k->naddrs < KNOCK_MAX_ADDRS ? k->naddrs : KNOCK_MAX_ADDRS;
    size_t body;

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
        body = b10__peer__knock__get_packed_size(&m);
        if (4 + AUTH_OVERHEAD + body > cap || 4 + AUTH_OVERHEAD + body > KNOCK_MAX_BYTES)
            return 0;
        b10__peer__knock__pack(&m, out + 4 + AUTH_HEADER_BYTES);
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
        body = b10__peer__knock_ack__get_packed_size(&m);
        if (4 + AUTH_OVERHEAD + body > cap || 4 + AUTH_OVERHEAD + body > KNOCK_ACK_MAX_BYTES)
            return 0;
        b10__peer__knock_ack__pack(&m, out + 4 + AUTH_HEADER_BYTES);
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

static const char *knock_decode(bool ack, const uint8_t *p, size_t len, struct knock *out)
{
    const char *why = NULL;

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
