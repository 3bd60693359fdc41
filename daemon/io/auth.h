/*
 * auth.h — trust between daemons: the cluster key, the keys derived from it,
 * and the authenticated envelope every message between daemons travels in.
 * The only room that includes libsodium; nothing here is hand-written
 * cryptography: keyed hashes and key derivation are BLAKE2b
 * (crypto_generichash, crypto_kdf), the envelope's MAC is
 * XChaCha20-Poly1305 with the whole envelope as associated data and no
 * plaintext, tags are SipHash-2-4 (crypto_shorthash), random bytes come
 * from randombytes_buf.
 *
 * A cluster key is 32 secret bytes every daemon of a cluster holds, in a
 * file of 64 hex digits readable by the daemon's user alone. Its id (a
 * keyed hash of a constant, 8 bytes) names it on the wire without telling
 * anything about it. From it come three subkeys: one seals HELLO and
 * HELLO_ACK, one seals agent descriptors, one is the master of every link's
 * keys. A link's keys (its tag key, and a MAC key for each direction) are
 * derived from the link master, both daemon ids, the link's generation and
 * both sides' fresh nonces, and never sent.
 *
 * The envelope, little-endian:
 *
 *   0   u8   version (1)
 *   1   u8   kind: HELLO, HELLO_ACK, LINK, DESC, KNOCK, KNOCK_ACK
 *   2   u8   LINK: direction (0: from the daemon that opened the link)
 *   3   u8   0
 *   4   u32  0
 *   8   u64  LINK: the link's generation; the others: the cluster key's id
 *   16  u64  sender daemon id
 *   24  u64  receiver daemon id (0 in a descriptor)
 *   32  24B  nonce: random for HELLO, HELLO_ACK, DESC; for LINK the direction
 *            and a 64-bit counter, so that a link never uses a nonce twice
 *   56  ...  payload (an encoded peer.proto message, or an agent descriptor)
 *   end 16B  MAC over everything before it
 *
 * A receiver reads the fixed header to pick the key (auth_peek), checks the
 * MAC before anything else reads a byte of the payload, and for LINK
 * messages checks the counter against the link's replay window.
 */
#ifndef B10D_AUTH_H
#define B10D_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "b10/b10.h"

/*
 * What both ends know of a link: the tags of its transfers derive from it
 * (tags_derive, mem/tags.h). Made here, where the link's keys are agreed.
 */
struct tag_link {
    uint8_t key[16];
    uint64_t sender_id;    /* daemon that opened the link and sends its transfers */
    uint64_t receiver_id;
    uint64_t gen;          /* endpoint generation of the link */
};

#define AUTH_KEY_BYTES 32
#define AUTH_NONCE_BYTES 32             /* a handshake's fresh nonce (not the envelope's) */
#define AUTH_HEADER_BYTES 56
#define AUTH_MAC_BYTES 16
#define AUTH_KX_BYTES 32                /* an X25519 key, public or secret, and a handshake's shared secret */
#define AUTH_HASH_BYTES 32
#define AUTH_OVERHEAD (AUTH_HEADER_BYTES + AUTH_MAC_BYTES)
/*
 * LINK counters accepted below the highest seen. Messages of one direction
 * complete out of order (a large CONTROL behind many small ones, hundreds
 * of transfers in flight): the window is far wider than they reorder.
 */
#define AUTH_WINDOW 8192

enum auth_kind {
    AUTH_KIND_HELLO = 1,
    AUTH_KIND_HELLO_ACK = 2,
    AUTH_KIND_LINK = 3,
    AUTH_KIND_DESC = 4,
    AUTH_KIND_KNOCK = 5,        /* at the door (door.h), sealed as HELLO is */
    AUTH_KIND_KNOCK_ACK = 6,
};

enum auth_key_kind {
    AUTH_KEY_CLUSTER,       /* from --cluster-key or --cluster-key-next */
    AUTH_KEY_LOCAL,         /* random for this boot: without a cluster key, only this daemon holds it */
    AUTH_KEY_INSECURE,      /* --insecure: a key everyone knows, so it proves nothing */
};

struct auth_key {
    enum auth_key_kind kind;
    uint64_t id;
    uint8_t hello[AUTH_KEY_BYTES];      /* seals HELLO and HELLO_ACK */
    uint8_t desc[AUTH_KEY_BYTES];       /* seals agent descriptors */
    uint8_t link[AUTH_KEY_BYTES];       /* the master of link keys */
};

/* The keys a daemon holds; the first seals what it starts (HELLOs, descriptors). */
#define AUTH_MAX_KEYS 3
struct auth_keyring {
    struct auth_key keys[AUTH_MAX_KEYS];
    unsigned count;
};

/* B10_OK, or B10_ERR_INTERNAL when libsodium cannot start (no entropy source, say). */
b10_status_t auth_init(void);

/* What the keyring trusts, in words (b10ctl status, the metrics, the start line). insecure:
 * --insecure beside a cluster key. */
const char *auth_keyring_trust(const struct auth_keyring *ring, bool insecure);

/*
 * Read a cluster key file: a regular file of 64 hex digits (a newline may
 * follow), owned by this user or root, with no permission for group or
 * others. On failure detail says why, with the path, for the caller to log
 * or print: B10_ERR_NOT_FOUND, B10_ERR_PERMISSION (the file's mode or
 * owner, or ours), B10_ERR_INVALID_ARG (not a key), B10_ERR_IO.
 */
b10_status_t auth_key_load(const char *path, struct auth_key *key, char *detail,
                           size_t detail_len);
/*
 * The rules for a file that holds a secret (a cluster key, a node's private
 * key), on its open fd: a regular file, owned by this user or root, with no
 * permission for group or others. B10_OK, or why in detail ("WHAT PATH: ...").
 */
b10_status_t auth_secret_file_check(int fd, const char *what, const char *path, char *detail,
                                    size_t detail_len);
/*
 * Write a fresh key to path, mode 0600; its id in *id_p. B10_ERR_EXISTS
 * when path exists (a key is never overwritten); others as open(2) says.
 */
b10_status_t auth_key_generate(const char *path, uint64_t *id_p, char *detail, size_t detail_len);
/* The key of this boot alone, and the well-known key of --insecure. */
void auth_key_local(struct auth_key *key);
void auth_key_insecure(struct auth_key *key);
const char *auth_key_kind_name(enum auth_key_kind kind);
/* Zero a key that is done with (a copy on the stack, say). */
void auth_key_wipe(struct auth_key *key);

/* B10_ERR_EXISTS: a key of that id is held already; B10_ERR_TOO_LARGE: AUTH_MAX_KEYS are. */
b10_status_t auth_keyring_add(struct auth_keyring *ring, const struct auth_key *key);
/*
 * Keep the keyring out of swap and core dumps. Best effort: the status of
 * the refusal (B10_ERR_NO_MEMORY past RLIMIT_MEMLOCK) for the caller to say.
 */
b10_status_t auth_keyring_lock(struct auth_keyring *ring);
/* The key with this id, or NULL: what a receiver uses to open a HELLO or a descriptor. */
const struct auth_key *auth_keyring_find(const struct auth_keyring *ring, uint64_t id);

/* ---------------------------------------------------------------- the envelope */

struct auth_header {
    enum auth_kind kind;
    uint8_t dir;                /* LINK */
    uint64_t key_id;            /* HELLO, HELLO_ACK, DESC: the key's id; LINK: the generation */
    uint64_t sender_id;
    uint64_t receiver_id;
    uint64_t counter;           /* LINK */
};

/*
 * The fixed header of an envelope, read without a key: B10_OK, or
 * B10_ERR_PEER_PROTOCOL when buf is no envelope (what a caller tells its
 * sender is its own to say: a rank's descriptor is its invalid argument).
 */
b10_status_t auth_peek(const uint8_t *buf, size_t length, struct auth_header *h_p);

enum auth_result {
    AUTH_OK,
    AUTH_MALFORMED,         /* too short, unknown version or kind, the wrong key's id */
    AUTH_BAD_MAC,
    AUTH_REPLAYED,          /* LINK: a counter seen already, or older than the window */
};
const char *auth_result_name(enum auth_result r);

/*
 * Sealing works in place: buf holds AUTH_HEADER_BYTES of room, then the
 * payload, then AUTH_MAC_BYTES of room; the sealed envelope is
 * AUTH_OVERHEAD + payload_length bytes. Opening leaves the payload where
 * it is and points at it.
 */
void auth_seal(const struct auth_key *key, enum auth_kind kind, uint64_t sender_id,
               uint64_t receiver_id, uint8_t *buf, size_t payload_length);
enum auth_result auth_open(const struct auth_key *key, enum auth_kind kind, const uint8_t *buf,
                           size_t length, const uint8_t **payload_p, size_t *payload_length_p);

/*
 * One link's keys, both ends. The daemon that opened it (with a HELLO)
 * sends its transfers on it in direction 0; the other answers in
 * direction 1. Each end seals with its direction's key and counter, and
 * opens the other's against a window of the last AUTH_WINDOW counters.
 */
struct auth_link {
    struct tag_link tags;               /* identity and tag key: tags_derive() of the link */
    uint8_t send_key[AUTH_KEY_BYTES];
    uint8_t recv_key[AUTH_KEY_BYTES];
    uint8_t send_dir;
    uint64_t send_counter;              /* the last one used */
    uint64_t recv_top;                  /* the highest one accepted */
    uint64_t recv_seen[AUTH_WINDOW / 64];
};

/*
 * Derive a link's keys from both nonces. opener: this daemon sent the
 * HELLO (it is the link's sender_id).
 */
void auth_link_derive(const struct auth_key *key, uint64_t sender_id, uint64_t receiver_id,
                      uint64_t gen, const uint8_t sender_nonce[AUTH_NONCE_BYTES],
                      const uint8_t receiver_nonce[AUTH_NONCE_BYTES], bool opener,
                      struct auth_link *link);
/*
 * The same, with a handshake's X25519 secret (auth_kx_shared) folded into
 * the link master: what certified daemons derive (nodeid.h).
 */
void auth_link_derive_kx(const struct auth_key *key, uint64_t sender_id, uint64_t receiver_id,
                         uint64_t gen, const uint8_t sender_nonce[AUTH_NONCE_BYTES],
                         const uint8_t receiver_nonce[AUTH_NONCE_BYTES],
                         const uint8_t kx_secret[AUTH_KX_BYTES], bool opener,
                         struct auth_link *link);
/*
 * Seal in place (as auth_seal) with the next counter. B10_ERR_PEER_LOST once
 * 2^64 are spent: nothing more goes on this link, the peer needs a new one.
 */
b10_status_t auth_link_seal(struct auth_link *link, uint8_t *buf, size_t payload_length);
/* Open a LINK envelope of the other direction; on success its counter counts as seen. */
enum auth_result auth_link_open(struct auth_link *link, const uint8_t *buf, size_t length,
                                const uint8_t **payload_p, size_t *payload_length_p);

/*
 * The tags of a handshake's HELLO_ACK: keyed by the HELLO key and the
 * opener's nonce, so that the opener can post its receive before sending
 * and nobody without the key can aim at it.
 */
void auth_ack_tags(const struct auth_key *key, uint64_t sender_id, uint64_t receiver_id,
                   uint64_t gen, const uint8_t sender_nonce[AUTH_NONCE_BYTES],
                   struct tag_link *tags);

/*
 * The MACs of recent handshake messages, to drop an exact replay before it
 * costs an endpoint: 1024 sets of 4, the oldest of a set making room. Fixed
 * size: an old replay may pass here (peer-hello.c drops those of a known
 * daemon's boot by their generation), and then opens nothing (the
 * handshake needs the key to finish).
 */
#define AUTH_SEEN_SETS 1024
#define AUTH_SEEN_WAYS 4
struct auth_seen {
    uint8_t macs[AUTH_SEEN_SETS][AUTH_SEEN_WAYS][AUTH_MAC_BYTES];
    uint8_t next[AUTH_SEEN_SETS];
};
/* True when this envelope's MAC was seen already; else it is remembered. */
bool auth_seen_check(struct auth_seen *seen, const uint8_t *buf, size_t length);

/* ---------------------------------------------------------------- primitives for other rooms */

void auth_random(void *buf, size_t length);
/* SipHash-2-4 under a 16-byte key: the tag hash (tags.c). */
uint64_t auth_shorthash(const uint8_t key[16], const void *data, size_t length);
/*
 * A handshake's ephemeral X25519 key pair (certified daemons, nodeid.h),
 * and the secret both ends reach from it: the X25519 point hashed with both
 * public keys. B10_ERR_PEER_PROTOCOL when the peer's key is a point of
 * small order (no secret at all).
 */
void auth_kx_keypair(uint8_t public_key[AUTH_KX_BYTES], uint8_t secret_key[AUTH_KX_BYTES]);
b10_status_t auth_kx_shared(const uint8_t secret_key[AUTH_KX_BYTES],
                            const uint8_t opener_public[AUTH_KX_BYTES],
                            const uint8_t receiver_public[AUTH_KX_BYTES],
                            const uint8_t peer_public[AUTH_KX_BYTES], uint8_t shared[AUTH_KX_BYTES]);
/* Zero a secret in a way the compiler keeps. */
void auth_wipe(void *buf, size_t length);
/* BLAKE2b-256 of data, unkeyed: what a transcript says of a long field (a worker address). */
void auth_hash(uint8_t out[AUTH_HASH_BYTES], const void *data, size_t length);
/* Constant-time comparison of secrets: true when equal. */
bool auth_equal(const void *a, const void *b, size_t length);

#endif
