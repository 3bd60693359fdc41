/* auth.c — see auth.h. */
#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "status.h"

#define AUTH_VERSION 1
#define AUTH_KEY_HEX (2 * AUTH_KEY_BYTES)

_Static_assert(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES == 24, "the envelope's nonce is 24 bytes");
_Static_assert(crypto_aead_xchacha20poly1305_ietf_ABYTES == AUTH_MAC_BYTES, "the envelope's MAC");
_Static_assert(crypto_aead_xchacha20poly1305_ietf_KEYBYTES == AUTH_KEY_BYTES, "MAC keys");
_Static_assert(crypto_kdf_KEYBYTES == AUTH_KEY_BYTES, "KDF master keys");
_Static_assert(crypto_shorthash_KEYBYTES == 16 && crypto_shorthash_BYTES == 8, "SipHash-2-4");
_Static_assert(AUTH_WINDOW % 64 == 0, "the replay window is whole words");

static void auth_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t auth_get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

b10_status_t auth_init(void)
{
    return sodium_init() < 0 ? B10_ERR_INTERNAL : B10_OK;
}

void auth_random(void *buf, size_t length)
{
    randombytes_buf(buf, length);
}

uint64_t auth_shorthash(const uint8_t key[16], const void *data, size_t length)
{
    uint8_t out[crypto_shorthash_BYTES];
    crypto_shorthash(out, data, length, key);
    return auth_get64(out);
}

bool auth_equal(const void *a, const void *b, size_t length)
{
    return sodium_memcmp(a, b, length) == 0;
}

/* ---------------------------------------------------------------- keys */

const char *auth_key_kind_name(enum auth_key_kind kind)
{
    switch (kind) {
    case AUTH_KEY_CLUSTER: return "cluster";
    case AUTH_KEY_LOCAL: return "local";
    case AUTH_KEY_INSECURE: return "insecure";
    }
    return "?";
}

void auth_key_wipe(struct auth_key *key)
{
    sodium_memzero(key, sizeof(*key));
}

/* Everything a key is known by comes from its 32 secret bytes. */
static void auth_key_from(const uint8_t secret[AUTH_KEY_BYTES], enum auth_key_kind kind,
                          struct auth_key *key)
{
    static const char label[] = "b10d key id v1";
    uint8_t id[crypto_generichash_BYTES_MIN];

    memset(key, 0, sizeof(*key));
    key->kind = kind;
    crypto_generichash(id, sizeof(id), (const uint8_t *)label, sizeof(label) - 1, secret,
                       AUTH_KEY_BYTES);
    key->id = auth_get64(id);
    crypto_kdf_derive_from_key(key->hello, sizeof(key->hello), 1, "b10dkey1", secret);
    crypto_kdf_derive_from_key(key->desc, sizeof(key->desc), 2, "b10dkey1", secret);
    crypto_kdf_derive_from_key(key->link, sizeof(key->link), 3, "b10dkey1", secret);
}

void auth_key_local(struct auth_key *key)
{
    uint8_t secret[AUTH_KEY_BYTES];
    randombytes_buf(secret, sizeof(secret));
    auth_key_from(secret, AUTH_KEY_LOCAL, key);
    sodium_memzero(secret, sizeof(secret));
}

void auth_key_insecure(struct auth_key *key)
{
    static const uint8_t everyones[AUTH_KEY_BYTES];
    auth_key_from(everyones, AUTH_KEY_INSECURE, key);
}

b10_status_t auth_secret_file_check(int fd, const char *what, const char *path, char *detail,
                                    size_t detail_len)
{
    struct stat st;

    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(detail, detail_len, "%s %s: not a regular file", what, path);
        return B10_ERR_INVALID_ARG;
    }
    if ((st.st_mode & 077) != 0) {
        snprintf(detail, detail_len, "%s %s: mode %04o lets group or others at it "
                 "(chmod 600 it)", what, path, (unsigned)(st.st_mode & 07777));
        return B10_ERR_PERMISSION;
    }
    if (st.st_uid != geteuid() && st.st_uid != 0) {
        snprintf(detail, detail_len, "%s %s: owned by uid %u, not by this user or root",
                 what, path, (unsigned)st.st_uid);
        return B10_ERR_PERMISSION;
    }
    return B10_OK;
}

b10_status_t auth_key_load(const char *path, struct auth_key *key, char *detail,
                           size_t detail_len)
{
    char text[AUTH_KEY_HEX + 8];
    uint8_t secret[AUTH_KEY_BYTES];
    size_t bin_len = 0;
    const char *end = NULL;
    b10_status_t status = B10_ERR_INVALID_ARG;

    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        snprintf(detail, detail_len, "cluster key %s: %s", path, strerror(err));
        return status_from_errno(err);
    }
    if ((status = auth_secret_file_check(fd, "cluster key", path, detail, detail_len)) != B10_OK)
        goto out;
    status = B10_ERR_INVALID_ARG;
    ssize_t n = read(fd, text, sizeof(text));
    while (n > AUTH_KEY_HEX && (text[n - 1] == '\n' || text[n - 1] == '\r'))
        n--;
    if (n != AUTH_KEY_HEX ||
        sodium_hex2bin(secret, sizeof(secret), text, AUTH_KEY_HEX, NULL, &bin_len, &end) != 0 ||
        bin_len != AUTH_KEY_BYTES || end != text + AUTH_KEY_HEX) {
        snprintf(detail, detail_len, "cluster key %s: not %d hex digits (b10d --gen-key makes one)",
                 path, AUTH_KEY_HEX);
        goto out;
    }
    auth_key_from(secret, AUTH_KEY_CLUSTER, key);
    status = B10_OK;
out:
    sodium_memzero(text, sizeof(text));
    sodium_memzero(secret, sizeof(secret));
    close(fd);
    return status;
}

b10_status_t auth_key_generate(const char *path, uint64_t *id_p, char *detail, size_t detail_len)
{
    uint8_t secret[AUTH_KEY_BYTES];
    char text[AUTH_KEY_HEX + 2];
    struct auth_key key;

    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        int err = errno;
        snprintf(detail, detail_len, "%s: %s", path,
                 err == EEXIST ? "exists already: a key is never overwritten" : strerror(err));
        return status_from_errno(err);
    }
    randombytes_buf(secret, sizeof(secret));
    sodium_bin2hex(text, sizeof(text), secret, sizeof(secret));
    text[AUTH_KEY_HEX] = '\n';
    b10_status_t status = B10_OK;
    /* A short write sets no errno: an i/o error then, as status_from_errno(0) says. */
    errno = 0;
    if (fchmod(fd, 0600) != 0 || write(fd, text, AUTH_KEY_HEX + 1) != AUTH_KEY_HEX + 1 ||
        fsync(fd) != 0) {
        int err = errno;
        snprintf(detail, detail_len, "%s: %s", path, err != 0 ? strerror(err) : "short write");
        status = status_from_errno(err);
    }
    if (close(fd) != 0 && status == B10_OK) {
        int err = errno;
        snprintf(detail, detail_len, "%s: %s", path, strerror(err));
        status = status_from_errno(err);
    }
    if (status != B10_OK) {
        unlink(path);
    } else {
        auth_key_from(secret, AUTH_KEY_CLUSTER, &key);
        *id_p = key.id;
        sodium_memzero(&key, sizeof(key));
    }
    sodium_memzero(secret, sizeof(secret));
    sodium_memzero(text, sizeof(text));
    return status;
}

b10_status_t auth_keyring_add(struct auth_keyring *ring, const struct auth_key *key)
{
    if (auth_keyring_find(ring, key->id) != NULL)
        return B10_ERR_EXISTS;
    if (ring->count == AUTH_MAX_KEYS)
        return B10_ERR_TOO_LARGE;
    ring->keys[ring->count++] = *key;
    return B10_OK;
}

b10_status_t auth_keyring_lock(struct auth_keyring *ring)
{
    return sodium_mlock(ring, sizeof(*ring)) == 0 ? B10_OK : status_from_errno(errno);
}

const struct auth_key *auth_keyring_find(const struct auth_keyring *ring, uint64_t id)
{
    for (unsigned i = 0; i < ring->count; i++)
        if (ring->keys[i].id == id)
            return &ring->keys[i];
    return NULL;
}

/* ---------------------------------------------------------------- the envelope */

const char *auth_result_name(enum auth_result r)
{
    switch (r) {
    case AUTH_OK: return "ok";
    case AUTH_MALFORMED: return "not an envelope for this key or link";
    case AUTH_BAD_MAC: return "bad MAC";
    case AUTH_REPLAYED: return "replayed";
    }
    return "?";
}

b10_status_t auth_peek(const uint8_t *buf, size_t length, struct auth_header *h_p)
{
    struct auth_header h;

    if (length < AUTH_OVERHEAD || buf[0] != AUTH_VERSION || buf[1] < AUTH_KIND_HELLO ||
        buf[1] > AUTH_KIND_KNOCK_ACK || buf[3] != 0 || buf[4] | buf[5] | buf[6] | buf[7])
        return B10_ERR_PEER_PROTOCOL;
    h.kind = (enum auth_kind)buf[1];
    h.dir = buf[2];
    h.key_id = auth_get64(buf + 8);
    h.sender_id = auth_get64(buf + 16);
    h.receiver_id = auth_get64(buf + 24);
    h.counter = 0;
    if (h.kind == AUTH_KIND_LINK) {
        /* A link's nonce is its direction and counter, nothing else. */
        if (h.dir > 1 || buf[32] != h.dir)
            return B10_ERR_PEER_PROTOCOL;
        for (int i = 33; i < 48; i++)
            if (buf[i] != 0)
                return B10_ERR_PEER_PROTOCOL;
        h.counter = auth_get64(buf + 48);
    } else if (h.dir != 0) {
        return B10_ERR_PEER_PROTOCOL;
    }
    *h_p = h;
    return B10_OK;
}

static void auth_put_header(uint8_t *buf, enum auth_kind kind, uint8_t dir, uint64_t key_id,
                            uint64_t sender_id, uint64_t receiver_id)
{
    memset(buf, 0, 32);
    buf[0] = AUTH_VERSION;
    buf[1] = (uint8_t)kind;
    buf[2] = dir;
    auth_put64(buf + 8, key_id);
    auth_put64(buf + 16, sender_id);
    auth_put64(buf + 24, receiver_id);
}

/*
 * The MAC: AEAD of no plaintext, the whole envelope before the MAC as
 * associated data (a zero-length buffer stands for the absent text).
 */
static unsigned char auth_no_text[1];

static void auth_mac(const uint8_t key[AUTH_KEY_BYTES], uint8_t *buf, size_t payload_length)
{
    size_t ad = AUTH_HEADER_BYTES + payload_length;
    unsigned long long mac_len;
    crypto_aead_xchacha20poly1305_ietf_encrypt_detached(auth_no_text, buf + ad, &mac_len,
                                                        auth_no_text, 0, buf, ad, NULL, buf + 32,
                                                        key);
}

static bool auth_mac_ok(const uint8_t key[AUTH_KEY_BYTES], const uint8_t *buf, size_t length)
{
    size_t ad = length - AUTH_MAC_BYTES;
    return crypto_aead_xchacha20poly1305_ietf_decrypt_detached(auth_no_text, NULL, auth_no_text, 0,
                                                               buf + ad, buf, ad, buf + 32,
                                                               key) == 0;
}

static const uint8_t *auth_static_key(const struct auth_key *key, enum auth_kind kind)
{
    return kind == AUTH_KIND_DESC ? key->desc : key->hello;
}

void auth_seal(const struct auth_key *key, enum auth_kind kind, uint64_t sender_id,
               uint64_t receiver_id, uint8_t *buf, size_t payload_length)
{
    auth_put_header(buf, kind, 0, key->id, sender_id, receiver_id);
    randombytes_buf(buf + 32, 24);
    auth_mac(auth_static_key(key, kind), buf, payload_length);
}

enum auth_result auth_open(const struct auth_key *key, enum auth_kind kind, const uint8_t *buf,
                           size_t length, const uint8_t **payload_p, size_t *payload_length_p)
{
    struct auth_header h;

    if (kind == AUTH_KIND_LINK || auth_peek(buf, length, &h) != B10_OK || h.kind != kind ||
        h.key_id != key->id)
        return AUTH_MALFORMED;
    if (!auth_mac_ok(auth_static_key(key, kind), buf, length))
        return AUTH_BAD_MAC;
    *payload_p = buf + AUTH_HEADER_BYTES;
    *payload_length_p = length - AUTH_OVERHEAD;
    return AUTH_OK;
}

/* ---------------------------------------------------------------- links */

void auth_link_derive(const struct auth_key *key, uint64_t sender_id, uint64_t receiver_id,
                      uint64_t gen, const uint8_t sender_nonce[AUTH_NONCE_BYTES],
                      const uint8_t receiver_nonce[AUTH_NONCE_BYTES], bool opener,
                      struct auth_link *link)
{
    auth_link_derive_kx(key, sender_id, receiver_id, gen, sender_nonce, receiver_nonce, NULL,
                        opener, link);
}

void auth_link_derive_kx(const struct auth_key *key, uint64_t sender_id, uint64_t receiver_id,
                         uint64_t gen, const uint8_t sender_nonce[AUTH_NONCE_BYTES],
                         const uint8_t receiver_nonce[AUTH_NONCE_BYTES],
                         const uint8_t kx_secret[AUTH_KX_BYTES], bool opener,
                         struct auth_link *link)
{
    static const char label[] = "b10d link v1";
    uint8_t master_key[AUTH_KEY_BYTES];
    uint8_t transcript[sizeof(label) - 1 + 24 + 2 * AUTH_NONCE_BYTES];
    uint8_t master[crypto_kdf_KEYBYTES], to_receiver[AUTH_KEY_BYTES], to_sender[AUTH_KEY_BYTES];
    uint8_t *p = transcript;

    memcpy(p, label, sizeof(label) - 1);
    p += sizeof(label) - 1;
    auth_put64(p, sender_id);
    auth_put64(p + 8, receiver_id);
    auth_put64(p + 16, gen);
    memcpy(p + 24, sender_nonce, AUTH_NONCE_BYTES);
    memcpy(p + 24 + AUTH_NONCE_BYTES, receiver_nonce, AUTH_NONCE_BYTES);
    /*
     * With node certificates the link master is keyed by the cluster's link
     * key and the handshake's X25519 secret together: a holder of the
     * cluster key who saw the handshake go by lacks the ephemeral secrets
     * (and could not have made them: each side signed its public key with
     * its node key), so it cannot derive this link's keys.
     */
    memcpy(master_key, key->link, sizeof(master_key));
    if (kx_secret != NULL) {
        crypto_generichash_state st;
        crypto_generichash_init(&st, key->link, sizeof(key->link), sizeof(master_key));
        crypto_generichash_update(&st, (const uint8_t *)"b10d kx v1", 10);
        crypto_generichash_update(&st, kx_secret, AUTH_KX_BYTES);
        crypto_generichash_final(&st, master_key, sizeof(master_key));
        sodium_memzero(&st, sizeof(st));
    }
    crypto_generichash(master, sizeof(master), transcript, sizeof(transcript), master_key,
                       sizeof(master_key));
    sodium_memzero(master_key, sizeof(master_key));

    memset(link, 0, sizeof(*link));
    crypto_kdf_derive_from_key(link->tags.key, sizeof(link->tags.key), 1, "b10dtags", master);
    crypto_kdf_derive_from_key(to_receiver, sizeof(to_receiver), 2, "b10dlink", master);
    crypto_kdf_derive_from_key(to_sender, sizeof(to_sender), 3, "b10dlink", master);
    link->tags.sender_id = sender_id;
    link->tags.receiver_id = receiver_id;
    link->tags.gen = gen;
    link->send_dir = opener ? 0 : 1;
    memcpy(link->send_key, opener ? to_receiver : to_sender, AUTH_KEY_BYTES);
    memcpy(link->recv_key, opener ? to_sender : to_receiver, AUTH_KEY_BYTES);
    sodium_memzero(master, sizeof(master));
    sodium_memzero(to_receiver, sizeof(to_receiver));
    sodium_memzero(to_sender, sizeof(to_sender));
}

/* Who sends in a direction: the opener in 0, the receiver in 1. */
static uint64_t auth_link_from(const struct auth_link *link, uint8_t dir)
{
    return dir == 0 ? link->tags.sender_id : link->tags.receiver_id;
}

b10_status_t auth_link_seal(struct auth_link *link, uint8_t *buf, size_t payload_length)
{
    uint8_t dir = link->send_dir;

    if (link->send_counter == UINT64_MAX)
        return B10_ERR_PEER_LOST;
    uint64_t counter = ++link->send_counter;
    auth_put_header(buf, AUTH_KIND_LINK, dir, link->tags.gen, auth_link_from(link, dir),
                    auth_link_from(link, dir ^ 1));
    memset(buf + 32, 0, 16);
    buf[32] = dir;
    auth_put64(buf + 48, counter);
    auth_mac(link->send_key, buf, payload_length);
    return B10_OK;
}

static bool auth_window_seen(const struct auth_link *link, uint64_t c)
{
    uint64_t bit = c % AUTH_WINDOW;
    return (link->recv_seen[bit / 64] >> (bit % 64)) & 1;
}

static void auth_window_mark(struct auth_link *link, uint64_t c)
{
    if (c > link->recv_top) {
        /* Slide: the slots between the old top and c now stand for counters not seen yet. */
        if (c - link->recv_top >= AUTH_WINDOW) {
            memset(link->recv_seen, 0, sizeof(link->recv_seen));
        } else {
            for (uint64_t t = link->recv_top + 1; t < c; t++) {
                uint64_t bit = t % AUTH_WINDOW;
                link->recv_seen[bit / 64] &= ~(UINT64_C(1) << (bit % 64));
            }
        }
        link->recv_top = c;
    }
    uint64_t bit = c % AUTH_WINDOW;
    link->recv_seen[bit / 64] |= UINT64_C(1) << (bit % 64);
}

enum auth_result auth_link_open(struct auth_link *link, const uint8_t *buf, size_t length,
                                const uint8_t **payload_p, size_t *payload_length_p)
{
    struct auth_header h;
    uint8_t dir = link->send_dir ^ 1;

    if (auth_peek(buf, length, &h) != B10_OK || h.kind != AUTH_KIND_LINK || h.dir != dir ||
        h.key_id != link->tags.gen || h.sender_id != auth_link_from(link, dir) ||
        h.receiver_id != auth_link_from(link, dir ^ 1) || h.counter == 0)
        return AUTH_MALFORMED;
    /* Older than the window, or seen within it: a replay (checked again once the MAC holds). */
    if (h.counter <= link->recv_top &&
        (link->recv_top - h.counter >= AUTH_WINDOW || auth_window_seen(link, h.counter)))
        return AUTH_REPLAYED;
    if (!auth_mac_ok(link->recv_key, buf, length))
        return AUTH_BAD_MAC;
    auth_window_mark(link, h.counter);
    *payload_p = buf + AUTH_HEADER_BYTES;
    *payload_length_p = length - AUTH_OVERHEAD;
    return AUTH_OK;
}

void auth_ack_tags(const struct auth_key *key, uint64_t sender_id, uint64_t receiver_id,
                   uint64_t gen, const uint8_t sender_nonce[AUTH_NONCE_BYTES],
                   struct tag_link *tags)
{
    static const char label[] = "b10d ack v1";
    uint8_t in[sizeof(label) - 1 + AUTH_NONCE_BYTES];

    memcpy(in, label, sizeof(label) - 1);
    memcpy(in + sizeof(label) - 1, sender_nonce, AUTH_NONCE_BYTES);
    memset(tags, 0, sizeof(*tags));
    crypto_generichash(tags->key, sizeof(tags->key), in, sizeof(in), key->hello, sizeof(key->hello));
    tags->sender_id = sender_id;
    tags->receiver_id = receiver_id;
    tags->gen = gen;
}

bool auth_seen_check(struct auth_seen *seen, const uint8_t *buf, size_t length)
{
    if (length < AUTH_MAC_BYTES)
        return false;
    const uint8_t *mac = buf + length - AUTH_MAC_BYTES;
    uint32_t set = (uint32_t)(auth_get64(mac) % AUTH_SEEN_SETS);
    for (int w = 0; w < AUTH_SEEN_WAYS; w++)
        if (memcmp(seen->macs[set][w], mac, AUTH_MAC_BYTES) == 0)
            return true;
    memcpy(seen->macs[set][seen->next[set]], mac, AUTH_MAC_BYTES);
    seen->next[set] = (uint8_t)((seen->next[set] + 1) % AUTH_SEEN_WAYS);
    return false;
}

const char *auth_keyring_trust(const struct auth_keyring *ring, bool insecure)
{
    switch (ring->keys[0].kind) {
    case AUTH_KEY_CLUSTER:
        return insecure ? "cluster key, and insecure peers" : "cluster key";
    case AUTH_KEY_INSECURE:
        return "insecure: peers prove nothing";
    case AUTH_KEY_LOCAL:
        return "no cluster key: local ranks only, no network transport";
    }
    return "?";
}

/* ---------------------------------------------------------------- a handshake's X25519 */

void auth_kx_keypair(uint8_t public_key[AUTH_KX_BYTES], uint8_t secret_key[AUTH_KX_BYTES])
{
    randombytes_buf(secret_key, AUTH_KX_BYTES);
    crypto_scalarmult_base(public_key, secret_key);
}

b10_status_t auth_kx_shared(const uint8_t secret_key[AUTH_KX_BYTES],
                            const uint8_t opener_public[AUTH_KX_BYTES],
                            const uint8_t receiver_public[AUTH_KX_BYTES],
                            const uint8_t peer_public[AUTH_KX_BYTES], uint8_t shared[AUTH_KX_BYTES])
{
    uint8_t point[crypto_scalarmult_BYTES];
    crypto_generichash_state st;

    /* libsodium refuses a point of small order (the result would be all zeros). */
    if (crypto_scalarmult(point, secret_key, peer_public) != 0)
        return B10_ERR_PEER_PROTOCOL;
    /* Both public keys in the hash: the secret names this exchange, not just the point. */
    crypto_generichash_init(&st, NULL, 0, AUTH_KX_BYTES);
    crypto_generichash_update(&st, point, sizeof(point));
    crypto_generichash_update(&st, opener_public, AUTH_KX_BYTES);
    crypto_generichash_update(&st, receiver_public, AUTH_KX_BYTES);
    crypto_generichash_final(&st, shared, AUTH_KX_BYTES);
    sodium_memzero(point, sizeof(point));
    sodium_memzero(&st, sizeof(st));
    return B10_OK;
}

void auth_wipe(void *buf, size_t length)
{
    sodium_memzero(buf, length);
}

void auth_hash(uint8_t out[AUTH_HASH_BYTES], const void *data, size_t length)
{
    crypto_generichash(out, AUTH_HASH_BYTES, data, length, NULL, 0);
}
