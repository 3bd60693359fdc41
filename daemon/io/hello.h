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
 * daemon's doors (door.h), where a daemon knocks before its first HELLO.
 */
#define B10_PEER_PROTOCOL_VERSION 10

#define HELLO_NAME_MAX CONFIG_NAME_MAX
#define HELLO_MAX_ADDRESS ((1 + WIREADDR_MAX_LANES) * 4096)
/* A HELLO envelope: the address, a name, the rest of the fields. */
#define HELLO_MAX_BYTES (HELLO_MAX_ADDRESS + 1024)
#define HELLO_ACK_MAX_BYTES 1024
/* What a HELLO_ACK may say of the receiver's limits. Below the chunk floor a
 * sender would cut a request into millions of chunks. */
#define HELLO_MIN_CHUNK (UINT64_C(64) << 10)
#define HELLO_MAX_CHUNK (UINT64_C(1) << 30)
#define HELLO_MIN_CONTROL (UINT64_C(4) << 10)
#define HELLO_MAX_CONTROL (UINT64_C(1) << 30)
#define HELLO_MAX_PIECES (UINT64_C(1) << 26)

struct hello {
    uint64_t daemon_id;
    uint64_t to_daemon_id;
    uint64_t gen;
    uint64_t incarnation;
    uint8_t nonce[AUTH_NONCE_BYTES];
    char name[HELLO_NAME_MAX];
    const uint8_t *address;     /* into the decoded message */
    size_t address_length;
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
};

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
