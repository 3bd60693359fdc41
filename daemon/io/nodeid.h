/*
 * nodeid.h — a node's own identity: its certificate, the private key it
 * proves it with, and the trust anchors that vouch for other nodes. The
 * only room that includes OpenSSL (libcrypto), as auth.c is the only one
 * that includes libsodium.
 *
 * With the cluster key alone, every holder of the key can claim any name;
 * a certificate makes a name something a node proves. A certificate names
 * its node by a subjectAltName: a dNSName equal to the daemon's --name, or
 * a URI whose last path segment is the name (a SPIFFE id such as
 * spiffe://cluster/b10d/NAME). The key is Ed25519 or ECDSA P-256; the chain
 * (the leaf, then its intermediates) must reach a trust anchor of
 * --node-ca, each certificate within its validity dates.
 *
 * The handshake (peer-hello.c) carries the sender's chain in DER and a
 * signature by the node key over a transcript (hello.h builds it); the
 * receiver checks both here before anything of the HELLO reaches a table.
 */
#ifndef B10D_NODEID_H
#define B10D_NODEID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "b10/b10.h"

/* A chain on the wire: at most this many certificates, of at most this many bytes together. */
#define NODEID_MAX_CERTS 4
#define NODEID_MAX_CHAIN_BYTES 8192
/* A signature: Ed25519's are 64 bytes, ECDSA P-256's at most 72 in DER. */
#define NODEID_MAX_SIG 80
/* A certificate this close to its end is warned about at start and on each reload. */
#define NODEID_WARN_S (7 * 86400)

struct nodeid;

/* A chain as it travels: the leaf first, each certificate's DER (pointers into someone's buffer). */
struct nodeid_chain {
    unsigned count;
    const uint8_t *der[NODEID_MAX_CERTS];
    size_t length[NODEID_MAX_CERTS];
};

/*
 * Load and check a node's identity: the chain of cert_path (PEM, leaf
 * first), the private key of key_path (PEM, unencrypted; the same file rules
 * as a cluster key: auth_secret_file_check), the trust anchors of ca_path
 * (PEM). Checked as a peer checks it: the chain reaches an anchor, every
 * certificate is within its dates now, the leaf names `name`; and the key
 * is the leaf's. On failure a one-line reason in detail: B10_ERR_NOT_FOUND,
 * B10_ERR_PERMISSION, B10_ERR_INVALID_ARG (what the files say is refused),
 * B10_ERR_NO_MEMORY.
 */
b10_status_t nodeid_load(const char *cert_path, const char *key_path, const char *ca_path,
                         const char *name, struct nodeid **id_p, char *detail, size_t detail_len);
void nodeid_free(struct nodeid *id);

/*
 * Rotation: when a file changed since it was read (its mtime, size or
 * inode), read all three again. 0: nothing changed; 1: the new identity
 * replaced the old; -1: a file changed but its identity is refused (why in
 * detail), the old one is kept and the same files are not tried again
 * until they change again.
 */
int nodeid_refresh(struct nodeid *id, char *detail, size_t detail_len);

const char *nodeid_name(const struct nodeid *id);
/* The leaf's notAfter, seconds since the epoch. */
int64_t nodeid_not_after(const struct nodeid *id);
/* The chain this node sends. */
void nodeid_chain_of(const struct nodeid *id, struct nodeid_chain *chain);

/* Sign msg with the node key: B10_OK and the signature, or B10_ERR_INTERNAL. */
b10_status_t nodeid_sign(const struct nodeid *id, const uint8_t *msg, size_t length,
                         uint8_t sig[NODEID_MAX_SIG], size_t *sig_length_p);

/*
 * A peer's proof: its chain reaches one of this node's trust anchors now,
 * its leaf names `name` and holds an Ed25519 or P-256 key, and sig is that
 * key's signature of msg. Every byte is the peer's: bounded and parsed
 * here, never trusted. B10_OK, or B10_ERR_PERMISSION with why in detail.
 */
b10_status_t nodeid_verify(const struct nodeid *id, const struct nodeid_chain *chain,
                           const char *name, const uint8_t *msg, size_t length, const uint8_t *sig,
                           size_t sig_length, char *detail, size_t detail_len);

/*
 * The small cluster's CA (b10d --make-ca, --issue-node-cert). make_ca writes
 * DIR/ca.key (0600, Ed25519) and DIR/ca.crt, valid for days; issue writes
 * DIR/NAME.key (0600, Ed25519) and DIR/NAME.crt, signed by the CA of
 * ca_cert/ca_key, naming NAME by a dNSName, valid from not_before_s to
 * not_after_s seconds from now (a test makes expired and future ones). An
 * existing file is never overwritten (B10_ERR_EXISTS).
 */
b10_status_t nodeid_make_ca(const char *dir, unsigned days, char *detail, size_t detail_len);
b10_status_t nodeid_issue(const char *ca_cert, const char *ca_key, const char *name,
                          const char *dir, int64_t not_before_s, int64_t not_after_s,
                          char *detail, size_t detail_len);

#endif
