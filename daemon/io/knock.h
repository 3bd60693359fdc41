/*
 * knock.h — the two messages at the door (door.h), framed, sealed and
 * checked. A KNOCK says who knocks, when, and from which addresses; a
 * KNOCK_ACK answers that knock (it echoes its nonce) with the answering
 * daemon's addresses. Both travel in the envelope of auth.h under a
 * cluster key, as HELLO does, after a 32-bit little-endian length.
 *
 * Pure: no sockets, no tables, so that the fuzzer drives it
 * (tests/fuzz/fuzz-knock.c). What passes here is bounded: at most
 * KNOCK_MAX_ADDRS addresses, each IPv4 or IPv6, a valid name.
 *
 * A certified node (nodeid.h) proves itself at the door too, so that a
 * holder of the cluster key without a certificate never reaches UCX: its
 * KNOCK or KNOCK_ACK ends in a node proof, the sender's chain and its node
 * key's signature of everything in the payload before the proof (by way of
 * its hash, so that the decoded message stays bounded), prefixed by a
 * context string of its own kind: a signature of a HELLO, a KNOCK or a
 * KNOCK_ACK is good for nothing else. What a KNOCK signs holds its nonce,
 * clock and addresses, and a KNOCK_ACK echoes the knock's nonce, so a
 * proof is good for one knock. knock_open bounds the proof; knock_verify
 * checks it against the node's trust anchors.
 */
#ifndef B10D_KNOCK_H
#define B10D_KNOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "b10/b10.h"
#include "config.h"
#include "gate.h"
#include "nodeid.h"
#include "wireaddr.h"

#define KNOCK_VERSION 1
#define KNOCK_NONCE_BYTES 16
#define KNOCK_MAX_ADDRS 16
/*
 * A node proof on the wire, at most: the chain's certificates (each with
 * its field tag and a length of up to 3 bytes), the signature with its
 * framing, and room to spare.
 */
#define KNOCK_PROOF_MAX_BYTES (NODEID_MAX_CHAIN_BYTES + NODEID_MAX_CERTS * 4 + NODEID_MAX_SIG + 16)
/* A framed KNOCK, at most: its length word and envelope, the fields (2 KiB) and a proof. */
#define KNOCK_MAX_BYTES (2048 + KNOCK_PROOF_MAX_BYTES)
/* A KNOCK_ACK's worker address, at most (hello.h's bound), and the framed ACK. */
#define KNOCK_MAX_ADDRESS ((1 + WIREADDR_MAX_LANES) * 4096)
#define KNOCK_ACK_MAX_BYTES (KNOCK_MAX_BYTES + KNOCK_MAX_ADDRESS)
/* A knock's clock may be this far from the answering daemon's, either way. */
#define KNOCK_FRESH_MS 60000
#define KNOCK_DETAIL_MAX 160

/* What a node key signs: a context string zero-padded to 24 bytes, then the hash of the payload. */
#define KNOCK_SIGNED_BYTES (24 + AUTH_HASH_BYTES)

/* A sender's node proof, as decoded: present or absent as a whole. */
struct knock_proof {
    bool present;
    struct nodeid_chain chain;          /* into chain_bytes: good while this struct does not move */
    uint8_t chain_bytes[NODEID_MAX_CHAIN_BYTES];
    uint8_t sig[NODEID_MAX_SIG];
    size_t sig_length;
    uint8_t signed_hash[AUTH_HASH_BYTES];   /* the hash of the payload before the proof */
};

struct knock {
    bool ack;                   /* KNOCK_ACK, not KNOCK */
    uint64_t sender_id;         /* the sending daemon's boot (the envelope's sender) */
    uint64_t key_id;            /* the cluster key it is sealed under */
    char name[CONFIG_NAME_MAX];
    uint64_t sent_ms;           /* KNOCK: the knocker's wall clock */
    uint8_t nonce[KNOCK_NONCE_BYTES];   /* KNOCK: its nonce; KNOCK_ACK: the knock's, echoed */
    b10_status_t status;        /* KNOCK_ACK */
    char detail[KNOCK_DETAIL_MAX];
    struct gate_addr addrs[KNOCK_MAX_ADDRS];
    unsigned naddrs;
    uint64_t incarnation;       /* KNOCK_ACK: the answering boot's */
    size_t address_length;      /* KNOCK_ACK: its worker address (wireaddr.h) */
    uint8_t address[KNOCK_MAX_ADDRESS];
    struct knock_proof proof;   /* received: the sender's; knock_pack ignores it */
};

/*
 * The message, sealed under key and framed, in out; with id, it ends in
 * that node's proof. Its bytes, or 0 when it does not fit or the node key
 * would not sign (the caller says so: this room does not log).
 */
size_t knock_pack(const struct auth_key *key, const struct knock *k, const struct nodeid *id,
                  uint8_t *out, size_t cap);

/*
 * How long the framed message that buf begins is, once its length word is
 * in (have >= 4): 0 before that; a length outside the bounds reads as
 * SIZE_MAX, and the connection is dropped.
 */
size_t knock_frame_length(const uint8_t *buf, size_t have, bool ack);

/*
 * Open a whole framed message of the kind expected (ack or not) under the
 * keys of ring and decode it into out. B10_OK, or why not in detail:
 * *authenticated says whether it opened under a key (a refusal is answered
 * then, and only then: a stranger learns nothing).
 */
b10_status_t knock_open(const struct auth_keyring *ring, bool ack, const uint8_t *buf,
                        size_t length, struct knock *out, bool *authenticated, char *detail,
                        size_t detail_len);

/*
 * Is k's proof good for the node `name`: its chain reaches the trust
 * anchors of id, its leaf names `name`, and its key signed k's payload for
 * k's kind. B10_OK; B10_ERR_PERMISSION with why in detail (no proof
 * counts as a bad one: the caller decides whether it asks for one).
 */
b10_status_t knock_verify(const struct nodeid *id, const struct knock *k, const char *name,
                          char *detail, size_t detail_len);

#endif
