/*
 * hello.h — the two messages of a link's handshake, decoded and checked:
 * what a HELLO or a HELLO_ACK says once its envelope opened (auth.h), held
 * to the bounds of this daemon before peer.c uses any of it. Pure: no UCX,
 * no tables, so the fuzzer drives it (tests/fuzz/fuzz-hello.c).
 *
 * Nothing that fails here reaches UCX: a worker address is handed to
 * ucp_ep_create only after its HELLO opened under a cluster key and passed
 * these checks, since UCX reads an address without bounds and asserts on
 * what it does not expect.
 */
#ifndef B10D_HELLO_H
#define B10D_HELLO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "b10/b10.h"
#include "config.h"
#include "nodeid.h"
#include "wireaddr.h"

struct B10__Peer__Msg;

/*
 * Daemon ↔ daemon: HELLO, and the agent descriptors one daemon hands out and
 * another loads. 2: worker addresses carry data lanes (wireaddr.h); 3: every
 * message in an authenticated envelope, daemons known by name; 4: a CHECK
 * names its asking rank, which the target's daemon checks for access; 5:
 * one-chunk DATA on the main worker; 6: every DATA message ends in its
 * chunk's checksum (checksum.h); 7: chunks above 256 KiB summed by blocks,
 * and the trailer's word that says whether a sum is there; 8: blocks of
 * 16 KiB, which a GPU sums in parallel; 9: the trailer carries each
 * block's sum too, from an 8-aligned offset; 10: worker addresses name the
 * daemon's doors (door.h), where a daemon knocks before its first HELLO;
 * 11: with node certificates (nodeid.h) HELLO and HELLO_ACK carry the
 * sender's chain, an ephemeral X25519 key and a signature of the
 * handshake's transcript, and the link keys take in the X25519 secret;
 * 12: CONTROL may carry its pieces as slots of one length (plan.h).
 */
#define B10_PEER_PROTOCOL_VERSION 12

#define HELLO_NAME_MAX CONFIG_NAME_MAX
#define HELLO_MAX_ADDRESS ((1 + WIREADDR_MAX_LANES) * 4096)
/* A node's proof in a handshake message: its chain, X25519 key and signature, with their framing. */
#define HELLO_PROOF_MAX_BYTES (NODEID_MAX_CHAIN_BYTES + NODEID_MAX_CERTS * 4 + AUTH_KX_BYTES + \
                               NODEID_MAX_SIG + 16)
/* A HELLO envelope: the address, a name, the proof, the rest of the fields. */
#define HELLO_MAX_BYTES (HELLO_MAX_ADDRESS + HELLO_PROOF_MAX_BYTES + 1024)
#define HELLO_ACK_MAX_BYTES (HELLO_PROOF_MAX_BYTES + 1024)
/* What a HELLO_ACK may say of the receiver's limits. Below the chunk floor a
 * sender would cut a request into millions of chunks. */
#define HELLO_MIN_CHUNK (UINT64_C(64) << 10)
#define HELLO_MAX_CHUNK (UINT64_C(1) << 30)
#define HELLO_MIN_CONTROL (UINT64_C(4) << 10)
#define HELLO_MAX_CONTROL (UINT64_C(1) << 30)
#define HELLO_MAX_PIECES (UINT64_C(1) << 26)

/*
 * A sender's proof of its node (nodeid.h), as decoded: present or absent as
 * a whole. The chain's bytes are where the decoder says (struct hello:
 * into its message; struct hello_ack: its own copy).
 */
struct hello_proof {
    bool present;
    struct nodeid_chain chain;
    uint8_t kx_public[AUTH_KX_BYTES];
    uint8_t sig[NODEID_MAX_SIG];
    size_t sig_length;
};

struct hello {
    uint64_t daemon_id;
    uint64_t to_daemon_id;
    uint64_t gen;
    uint64_t incarnation;
    uint8_t nonce[AUTH_NONCE_BYTES];
    char name[HELLO_NAME_MAX];
    const uint8_t *address;     /* into the decoded message */
    size_t address_length;
    struct hello_proof proof;   /* its chain into the decoded message */
};

struct hello_ack {
    bool identified;            /* who answers which HELLO was read (even if the rest is refused) */
    uint64_t daemon_id;
    uint64_t gen;
    uint64_t incarnation;
    b10_status_t status;
    char detail[200];
    uint64_t max_chunk;
    uint64_t max_control;
    uint64_t max_pieces;
    uint8_t opener_nonce[AUTH_NONCE_BYTES];
    uint8_t nonce[AUTH_NONCE_BYTES];
    char name[HELLO_NAME_MAX];
    struct hello_proof proof;               /* an accepting answer's; its chain into chain_bytes */
    uint8_t chain_bytes[NODEID_MAX_CHAIN_BYTES];
};

/*
 * What a node signs in a handshake message, in a fixed layout: a context
 * string (which message, which protocol), the sender's and receiver's
 * daemon ids, the link's generation, the sender's incarnation and name,
 * the opener's nonce and X25519 key, and for a HELLO_ACK the receiver's
 * nonce and key, for a HELLO a hash of its worker address. So a signature
 * is good for one message of one handshake between two boots, and binds
 * the X25519 keys the link's keys come from to the certified nodes.
 */
#define HELLO_TRANSCRIPT_BYTES (24 + 32 + HELLO_NAME_MAX + 4 * AUTH_NONCE_BYTES + AUTH_HASH_BYTES)
struct hello_transcript {
    bool ack;
    uint64_t sender_id;
    uint64_t receiver_id;
    uint64_t gen;
    uint64_t incarnation;
    const char *name;                   /* the sender's */
    const uint8_t *opener_nonce;        /* AUTH_NONCE_BYTES */
    const uint8_t *opener_kx;           /* AUTH_KX_BYTES */
    const uint8_t *nonce;               /* HELLO_ACK: the receiver's; HELLO: NULL */
    const uint8_t *kx;                  /* HELLO_ACK: the receiver's; HELLO: NULL */
    const uint8_t *address;             /* HELLO: the opener's worker address */
    size_t address_length;
};
void hello_transcript(const struct hello_transcript *t, uint8_t out[HELLO_TRANSCRIPT_BYTES]);

/*
 * Decode a HELLO's payload and check it against its envelope's header. On
 * B10_OK *msg_p is the decoded message, which the caller frees
 * (b10__peer__msg__free_unpacked) once done with h->address; otherwise
 * B10_ERR_PEER_PROTOCOL and why, in detail.
 */
b10_status_t hello_decode(const uint8_t *payload, size_t length, const struct auth_header *hdr,
                          struct B10__Peer__Msg **msg_p, struct hello *h, char *detail,
                          size_t detail_len);
/*
 * The same for a HELLO_ACK: everything is copied out, nothing is left to
 * free. When it names its sender and the HELLO it answers well but says
 * what no daemon may (its limits out of range), a->identified is still set,
 * so that the opener can tell that answer from someone else's.
 */
b10_status_t hello_decode_ack(const uint8_t *payload, size_t length, const struct auth_header *hdr,
                              struct hello_ack *a, char *detail, size_t detail_len);

#endif
