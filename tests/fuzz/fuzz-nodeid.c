/*
 * fuzz-nodeid — libFuzzer target for what a peer's HELLO or HELLO_ACK
 * hands daemon/io/nodeid.c: a certificate chain in DER and a signature,
 * parsed and checked against this node's trust anchors.
 *
 * At start it makes a CA and a node certificate ("a") in a temporary
 * folder, loads them and removes the folder. The input is used two ways:
 *  - split into up to five certificates and a signature (each a length
 *    byte pair and its bytes), the rest the signed message: whatever it
 *    holds, it is no proof (the fuzzer has no node key), so nodeid_verify
 *    must refuse it, without a crash or a leak;
 *  - XORed over the real chain and a real signature: the parser and the
 *    chain's checks see every near miss, and an input of zeros (nothing
 *    flipped) leaves the proof good.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "nodeid.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct nodeid *id;
static struct nodeid_chain chain;
static const uint8_t msg[] = "a handshake's transcript";
static uint8_t sig[NODEID_MAX_SIG];
static size_t sig_length;

static void setup(void)
{
    char dir[] = "/tmp/b10-fuzz-nodeid.XXXXXX", cert[128], key[128], ca[128], cakey[128];
    char detail[512];

    if (id != NULL)
        return;
    if (auth_init() != 0 || mkdtemp(dir) == NULL)
        abort();
    snprintf(cert, sizeof(cert), "%s/a.crt", dir);
    snprintf(key, sizeof(key), "%s/a.key", dir);
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    snprintf(cakey, sizeof(cakey), "%s/ca.key", dir);
    if (nodeid_make_ca(dir, 30, detail, sizeof(detail)) != B10_OK ||
        nodeid_issue(ca, cakey, "a", dir, -60, 86400, detail, sizeof(detail)) != B10_OK ||
        nodeid_load(cert, key, ca, "a", &id, detail, sizeof(detail)) != B10_OK) {
        fprintf(stderr, "fuzz-nodeid setup: %s\n", detail);
        abort();
    }
    unlink(cert);
    unlink(key);
    unlink(ca);
    unlink(cakey);
    rmdir(dir);
    nodeid_chain_of(id, &chain);
    if (nodeid_sign(id, msg, sizeof(msg), sig, &sig_length) != B10_OK)
        abort();
}

/* The input as a peer's chain and signature. */
static void as_proof(const uint8_t *data, size_t size)
{
    struct nodeid_chain c = { 0 };
    const uint8_t *s = NULL;
    size_t s_len = 0, at = 0;
    char detail[512];

    if (size < 1)
        return;
    unsigned n = data[at++] % (NODEID_MAX_CERTS + 2);
    for (unsigned i = 0; i <= n && at + 2 <= size; i++) {
        size_t len = (size_t)data[at] | (size_t)data[at + 1] << 8;
        at += 2;
        if (len > size - at)
            len = size - at;
        if (i == n) {
            s = data + at;
            s_len = len;
        } else {
            /* One past the room: only the count says so, and the count alone refuses it. */
            if (i < NODEID_MAX_CERTS) {
                c.der[i] = data + at;
                c.length[i] = len;
            }
            c.count = i + 1;
        }
        at += len;
    }
    if (s == NULL)
        return;
    if (nodeid_verify(id, &c, "a", data + at, size - at, s, s_len, detail, sizeof(detail)) == B10_OK)
        abort();
    if (memchr(detail, '\0', sizeof(detail)) == NULL)
        abort();
}

/* The input XORed over the real proof. */
static void over_proof(const uint8_t *data, size_t size)
{
    uint8_t der[NODEID_MAX_CHAIN_BYTES], s[NODEID_MAX_SIG];
    struct nodeid_chain c = chain;
    char detail[512];
    bool zero = true;

    memcpy(der, chain.der[0], chain.length[0]);
    memcpy(s, sig, sig_length);
    for (size_t i = 0; i < size; i++) {
        zero &= data[i] == 0;
        if (i < chain.length[0])
            der[i] ^= data[i];
        else if (i - chain.length[0] < sig_length)
            s[i - chain.length[0]] ^= data[i];
    }
    c.der[0] = der;
    b10_status_t st = nodeid_verify(id, &c, "a", msg, sizeof(msg), s, sig_length, detail,
                                    sizeof(detail));
    if (zero && st != B10_OK)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    as_proof(data, size);
    over_proof(data, size);
    return 0;
}
