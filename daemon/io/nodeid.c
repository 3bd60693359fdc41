/* nodeid.c — see nodeid.h. */
#include "nodeid.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "auth.h"
#include "config.h"
#include "status.h"

/* A PEM file larger than this is no certificate, key or bundle of anchors this daemon reads. */
#define NODEID_FILE_MAX (1 << 20)

/* What a file was when it was read: a change to any of it means read it again. */
struct nodeid_stamp {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
};

enum { NODEID_CERT, NODEID_KEY, NODEID_CA, NODEID_FILES };

struct nodeid {
    char path[NODEID_FILES][256];
    char name[CONFIG_NAME_MAX];
    struct nodeid_stamp stamp[NODEID_FILES];    /* of the files last tried, good or not */
    X509_STORE *anchors;
    EVP_PKEY *key;
    unsigned ncerts;
    uint8_t *der[NODEID_MAX_CERTS];             /* the chain, leaf first, as it travels */
    size_t der_length[NODEID_MAX_CERTS];
    int64_t not_after;
};

static const char *const nodeid_what[NODEID_FILES] = { "node certificate", "node key", "node CA" };

/* The first error OpenSSL queued, in words, and the queue emptied (it is per thread and grows). */
static const char *nodeid_ssl_error(char *buf, size_t length)
{
    unsigned long e = ERR_get_error();

    if (e == 0)
        snprintf(buf, length, "no detail");
    else
        ERR_error_string_n(e, buf, length);
    ERR_clear_error();
    return buf;
}

/* ---------------------------------------------------------------- the files */

/* Read a whole PEM file into a memory BIO; secret: the rules of a key file. */
static b10_status_t nodeid_read(const char *path, const char *what, bool secret, BIO **bio_p,
                                struct nodeid_stamp *stamp, char *detail, size_t detail_len)
{
    struct stat st;
    b10_status_t status = B10_ERR_INVALID_ARG;
    char *text = NULL;

    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        snprintf(detail, detail_len, "%s %s: %s", what, path, strerror(err));
        return status_from_errno(err);
    }
    if (secret && (status = auth_secret_file_check(fd, what, path, detail, detail_len)) != B10_OK)
        goto out;
    status = B10_ERR_INVALID_ARG;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > NODEID_FILE_MAX) {
        snprintf(detail, detail_len, "%s %s: not a regular file of at most %d bytes", what, path,
                 NODEID_FILE_MAX);
        goto out;
    }
    if ((text = malloc((size_t)st.st_size + 1)) == NULL) {
        status = B10_ERR_NO_MEMORY;
        goto out;
    }
    ssize_t n = read(fd, text, (size_t)st.st_size);
    if (n != st.st_size) {
        snprintf(detail, detail_len, "%s %s: short read", what, path);
        status = B10_ERR_IO;
        goto out;
    }
    /* The BIO keeps a copy; the text, a key's maybe, is wiped below. */
    BIO *bio = BIO_new(BIO_s_mem());
    if (bio == NULL || BIO_write(bio, text, (int)n) != (int)n) {
        BIO_free(bio);
        status = B10_ERR_NO_MEMORY;
        goto out;
    }
    stamp->dev = st.st_dev;
    stamp->ino = st.st_ino;
    stamp->size = st.st_size;
    stamp->mtime = st.st_mtim;
    *bio_p = bio;
    status = B10_OK;
out:
    if (text != NULL) {
        auth_wipe(text, (size_t)st.st_size);
        free(text);
    }
    close(fd);
    return status;
}

static bool nodeid_key_kind_ok(EVP_PKEY *key)
{
    char group[64];
    size_t glen = 0;

    if (EVP_PKEY_get_base_id(key) == EVP_PKEY_ED25519)
        return true;
    return EVP_PKEY_get_base_id(key) == EVP_PKEY_EC &&
           EVP_PKEY_get_group_name(key, group, sizeof(group), &glen) == 1 &&
           (strcmp(group, "prime256v1") == 0 || strcmp(group, "P-256") == 0);
}

/* A key file is never asked for a passphrase: an encrypted one is refused. */
static int nodeid_no_passphrase(char *buf, int size, int rwflag, void *u)
{
    return 0;
}

/* ---------------------------------------------------------------- checking a chain */

/* Does the leaf name this node: a dNSName equal to name, or a URI whose last segment is name? */
static bool nodeid_names(X509 *leaf, const char *name)
{
    GENERAL_NAMES *names = X509_get_ext_d2i(leaf, NID_subject_alt_name, NULL, NULL);
    size_t n = strlen(name);
    bool ok = false;

    for (int i = 0; names != NULL && i < sk_GENERAL_NAME_num(names) && !ok; i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
        const ASN1_STRING *s = g->type == GEN_DNS ? g->d.dNSName
                             : g->type == GEN_URI ? g->d.uniformResourceIdentifier : NULL;
        if (s == NULL)
            continue;
        const unsigned char *data = ASN1_STRING_get0_data(s);
        size_t len = (size_t)ASN1_STRING_length(s);
        if (g->type == GEN_DNS)
            ok = len == n && memcmp(data, name, n) == 0;
        else
            ok = len > n + 1 && data[len - n - 1] == '/' && memcmp(data + len - n, name, n) == 0;
    }
    GENERAL_NAMES_free(names);
    return ok;
}

/*
 * May this certificate issue others? X509_check_ca answers no for
 * basicConstraints CA:FALSE whatever the keyUsage says, so a leaf with
 * keyCertSign passed it; yet a verifier that reads keyUsage alone (or
 * a CA's policy that issues by it) takes keyCertSign as leave to sign
 * certificates. A node's certificate has neither, whichever one a
 * reader believes.
 */
static const char *nodeid_may_issue(X509 *x)
{
    uint32_t flags = X509_get_extension_flags(x);

    if ((flags & EXFLAG_BCONS) != 0 && (flags & EXFLAG_CA) != 0)
        return "basicConstraints CA:TRUE";
    if ((flags & EXFLAG_KUSAGE) != 0 && (X509_get_key_usage(x) & KU_KEY_CERT_SIGN) != 0)
        return "keyUsage keyCertSign";
    /* A version 1 root or a Netscape CA type: OpenSSL takes it for a CA's too. */
    return X509_check_ca(x) != 0 ? "a CA's by OpenSSL's reading" : NULL;
}

/*
 * The checks a chain passes, ours at load and a peer's in its HELLO or
 * KNOCK alike: it reaches an anchor, every certificate is within its dates
 * now, the leaf may not issue others, names `name`, and its key is of a
 * kind this daemon signs and checks with.
 */
static b10_status_t nodeid_check_chain(X509_STORE *anchors, X509 *leaf, STACK_OF(X509) *rest,
                                       const char *name, char *detail, size_t detail_len)
{
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    b10_status_t status = B10_ERR_PERMISSION;
    const char *issuer;

    if (ctx == NULL || X509_STORE_CTX_init(ctx, anchors, leaf, rest) != 1) {
        X509_STORE_CTX_free(ctx);
        snprintf(detail, detail_len, "no memory to check a certificate chain");
        return B10_ERR_NO_MEMORY;
    }
    /* The leaf, its intermediates and an anchor: a longer path is not one this daemon takes. */
    X509_VERIFY_PARAM_set_depth(X509_STORE_CTX_get0_param(ctx), NODEID_MAX_CERTS);
    if (X509_verify_cert(ctx) != 1) {
        int e = X509_STORE_CTX_get_error(ctx);
        snprintf(detail, detail_len, "certificate chain refused: %s (at depth %d)",
                 X509_verify_cert_error_string(e), X509_STORE_CTX_get_error_depth(ctx));
    } else if ((issuer = nodeid_may_issue(leaf)) != NULL) {
        /* A CA's certificate names whoever it likes in what it signs: never a node's own. */
        snprintf(detail, detail_len, "the node certificate is a CA's (%s): a node's must not "
                 "issue others", issuer);
    } else if (!nodeid_names(leaf, name)) {
        snprintf(detail, detail_len, "the certificate does not name '%s' (no subjectAltName "
                 "DNS:%s, nor a URI ending in /%s)", name, name, name);
    } else if (X509_get0_pubkey(leaf) == NULL || !nodeid_key_kind_ok(X509_get0_pubkey(leaf))) {
        snprintf(detail, detail_len, "the certificate's key is neither Ed25519 nor ECDSA P-256");
    } else {
        status = B10_OK;
    }
    X509_STORE_CTX_free(ctx);
    ERR_clear_error();
    return status;
}

/* ---------------------------------------------------------------- loading */

static void nodeid_clear(struct nodeid *id)
{
    X509_STORE_free(id->anchors);
    EVP_PKEY_free(id->key);
    for (unsigned i = 0; i < id->ncerts; i++)
        OPENSSL_free(id->der[i]);
    id->anchors = NULL;
    id->key = NULL;
    id->ncerts = 0;
}

static b10_status_t nodeid_load_anchors(struct nodeid *id, BIO *bio, char *detail,
                                        size_t detail_len)
{
    X509 *x;
    unsigned n = 0;

    if ((id->anchors = X509_STORE_new()) == NULL)
        return B10_ERR_NO_MEMORY;
    while ((x = PEM_read_bio_X509(bio, NULL, nodeid_no_passphrase, NULL)) != NULL) {
        int ok = X509_STORE_add_cert(id->anchors, x);
        X509_free(x);
        if (ok != 1) {
            char why[160];
            snprintf(detail, detail_len, "node CA %s: %s", id->path[NODEID_CA],
                     nodeid_ssl_error(why, sizeof(why)));
            return B10_ERR_INVALID_ARG;
        }
        n++;
    }
    ERR_clear_error();  /* the end of the file reads as "no start line" */
    if (n == 0) {
        snprintf(detail, detail_len, "node CA %s: no PEM certificate in it", id->path[NODEID_CA]);
        return B10_ERR_INVALID_ARG;
    }
    return B10_OK;
}

/* The chain of the certificate file, leaf first, into id->der; *leaf_p and *rest_p for the checks. */
static b10_status_t nodeid_load_chain(struct nodeid *id, BIO *bio, X509 **leaf_p,
                                      STACK_OF(X509) **rest_p, char *detail, size_t detail_len)
{
    const char *path = id->path[NODEID_CERT];
    STACK_OF(X509) *rest = sk_X509_new_null();
    X509 *leaf = NULL, *x;
    size_t total = 0;

    if (rest == NULL)
        return B10_ERR_NO_MEMORY;
    while ((x = PEM_read_bio_X509(bio, NULL, nodeid_no_passphrase, NULL)) != NULL) {
        if (id->ncerts == NODEID_MAX_CERTS) {
            X509_free(x);
            snprintf(detail, detail_len, "node certificate %s: more than %d certificates (the "
                     "leaf and its intermediates; the anchor goes in --node-ca)", path,
                     NODEID_MAX_CERTS);
            goto bad;
        }
        int len = i2d_X509(x, &id->der[id->ncerts]);
        if (len <= 0) {
            X509_free(x);
            snprintf(detail, detail_len, "node certificate %s: cannot encode it", path);
            goto bad;
        }
        id->der_length[id->ncerts++] = (size_t)len;
        total += (size_t)len;
        if (leaf == NULL) {
            leaf = x;
        } else if (sk_X509_push(rest, x) <= 0) {
            X509_free(x);
            snprintf(detail, detail_len, "no memory for node certificate %s", path);
            goto bad;
        }
    }
    ERR_clear_error();
    if (leaf == NULL) {
        snprintf(detail, detail_len, "node certificate %s: no PEM certificate in it", path);
        goto bad;
    }
    if (total > NODEID_MAX_CHAIN_BYTES) {
        snprintf(detail, detail_len, "node certificate %s: the chain is %zu bytes in DER, more "
                 "than the %d a HELLO carries", path, total, NODEID_MAX_CHAIN_BYTES);
        goto bad;
    }
    *leaf_p = leaf;
    *rest_p = rest;
    return B10_OK;
bad:
    X509_free(leaf);
    sk_X509_pop_free(rest, X509_free);
    return B10_ERR_INVALID_ARG;
}

static int64_t nodeid_time(const ASN1_TIME *t)
{
    struct tm tm;

    if (t == NULL || ASN1_TIME_to_tm(t, &tm) != 1)
        return 0;
    return (int64_t)timegm(&tm);
}

/* Read and check the three files of id->path into id (empty before); stamps in stamp. */
static b10_status_t nodeid_build(struct nodeid *id, struct nodeid_stamp stamp[NODEID_FILES],
                                 char *detail, size_t detail_len)
{
    BIO *bio[NODEID_FILES] = { NULL, NULL, NULL };
    X509 *leaf = NULL;
    STACK_OF(X509) *rest = NULL;
    b10_status_t status = B10_OK;
    char why[160];

    for (int f = 0; f < NODEID_FILES && status == B10_OK; f++)
        status = nodeid_read(id->path[f], nodeid_what[f], f == NODEID_KEY, &bio[f], &stamp[f],
                             detail, detail_len);
    if (status != B10_OK)
        goto out;
    if ((status = nodeid_load_anchors(id, bio[NODEID_CA], detail, detail_len)) != B10_OK ||
        (status = nodeid_load_chain(id, bio[NODEID_CERT], &leaf, &rest, detail, detail_len)) != B10_OK)
        goto out;
    status = B10_ERR_INVALID_ARG;
    id->key = PEM_read_bio_PrivateKey(bio[NODEID_KEY], NULL, nodeid_no_passphrase, NULL);
    if (id->key == NULL) {
        snprintf(detail, detail_len, "node key %s: not an unencrypted PEM private key (%s)",
                 id->path[NODEID_KEY], nodeid_ssl_error(why, sizeof(why)));
        goto out;
    }
    if (!nodeid_key_kind_ok(id->key)) {
        snprintf(detail, detail_len, "node key %s: neither Ed25519 nor ECDSA P-256",
                 id->path[NODEID_KEY]);
        goto out;
    }
    if (EVP_PKEY_eq(X509_get0_pubkey(leaf), id->key) != 1) {
        snprintf(detail, detail_len, "node key %s is not the key of certificate %s",
                 id->path[NODEID_KEY], id->path[NODEID_CERT]);
        goto out;
    }
    char chain_why[400];
    if ((status = nodeid_check_chain(id->anchors, leaf, rest, id->name, chain_why,
                                     sizeof(chain_why))) != B10_OK) {
        snprintf(detail, detail_len, "node certificate %s: %s", id->path[NODEID_CERT], chain_why);
        goto out;
    }
    id->not_after = nodeid_time(X509_get0_notAfter(leaf));
out:
    ERR_clear_error();
    X509_free(leaf);
    sk_X509_pop_free(rest, X509_free);
    for (int f = 0; f < NODEID_FILES; f++)
        BIO_free(bio[f]);
    if (status != B10_OK)
        nodeid_clear(id);
    return status;
}

b10_status_t nodeid_load(const char *cert_path, const char *key_path, const char *ca_path,
                         const char *name, struct nodeid **id_p, char *detail, size_t detail_len)
{
    struct nodeid *id = calloc(1, sizeof(*id));

    if (id == NULL) {
        snprintf(detail, detail_len, "no memory for the node identity");
        return B10_ERR_NO_MEMORY;
    }
    snprintf(id->path[NODEID_CERT], sizeof(id->path[0]), "%s", cert_path);
    snprintf(id->path[NODEID_KEY], sizeof(id->path[0]), "%s", key_path);
    snprintf(id->path[NODEID_CA], sizeof(id->path[0]), "%s", ca_path);
    snprintf(id->name, sizeof(id->name), "%s", name);
    b10_status_t status = nodeid_build(id, id->stamp, detail, detail_len);
    if (status != B10_OK) {
        free(id);
        return status;
    }
    *id_p = id;
    return B10_OK;
}

void nodeid_free(struct nodeid *id)
{
    if (id == NULL)
        return;
    nodeid_clear(id);
    free(id);
}

static bool nodeid_changed(const struct nodeid *id)
{
    struct stat st;

    for (int f = 0; f < NODEID_FILES; f++) {
        const struct nodeid_stamp *s = &id->stamp[f];
        /* A file gone is a change too: the reload then says what is missing. */
        if (stat(id->path[f], &st) != 0 || st.st_dev != s->dev || st.st_ino != s->ino ||
            st.st_size != s->size || st.st_mtim.tv_sec != s->mtime.tv_sec ||
            st.st_mtim.tv_nsec != s->mtime.tv_nsec)
            return true;
    }
    return false;
}

int nodeid_refresh(struct nodeid *id, char *detail, size_t detail_len)
{
    struct nodeid fresh;

    if (!nodeid_changed(id))
        return 0;
    memset(&fresh, 0, sizeof(fresh));
    memcpy(fresh.path, id->path, sizeof(id->path));
    memcpy(fresh.name, id->name, sizeof(id->name));
    memcpy(fresh.stamp, id->stamp, sizeof(id->stamp));
    b10_status_t status = nodeid_build(&fresh, fresh.stamp, detail, detail_len);
    /* Tried: these files are not read again until they change again, good or not. */
    memcpy(id->stamp, fresh.stamp, sizeof(id->stamp));
    if (status != B10_OK)
        return -1;
    nodeid_clear(id);
    *id = fresh;
    return 1;
}

const char *nodeid_name(const struct nodeid *id)
{
    return id->name;
}

int64_t nodeid_not_after(const struct nodeid *id)
{
    return id->not_after;
}

void nodeid_chain_of(const struct nodeid *id, struct nodeid_chain *chain)
{
    chain->count = id->ncerts;
    for (unsigned i = 0; i < id->ncerts; i++) {
        chain->der[i] = id->der[i];
        chain->length[i] = id->der_length[i];
    }
}

/* ---------------------------------------------------------------- signatures */

/* Ed25519 signs the message itself; ECDSA signs its SHA-256. */
static const EVP_MD *nodeid_md(EVP_PKEY *key)
{
    return EVP_PKEY_get_base_id(key) == EVP_PKEY_ED25519 ? NULL : EVP_sha256();
}

b10_status_t nodeid_sign(const struct nodeid *id, const uint8_t *msg, size_t length,
                         uint8_t sig[NODEID_MAX_SIG], size_t *sig_length_p)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    size_t n = NODEID_MAX_SIG;
    b10_status_t status = B10_ERR_INTERNAL;

    if (ctx != NULL && EVP_DigestSignInit(ctx, NULL, nodeid_md(id->key), NULL, id->key) == 1 &&
        EVP_DigestSign(ctx, sig, &n, msg, length) == 1) {
        *sig_length_p = n;
        status = B10_OK;
    }
    EVP_MD_CTX_free(ctx);
    ERR_clear_error();
    return status;
}

b10_status_t nodeid_verify(const struct nodeid *id, const struct nodeid_chain *chain,
                           const char *name, const uint8_t *msg, size_t length, const uint8_t *sig,
                           size_t sig_length, char *detail, size_t detail_len)
{
    STACK_OF(X509) *rest = sk_X509_new_null();
    X509 *leaf = NULL;
    b10_status_t status = B10_ERR_PERMISSION;
    size_t total = 0;

    if (rest == NULL) {
        snprintf(detail, detail_len, "no memory to check a certificate chain");
        return B10_ERR_NO_MEMORY;
    }
    if (chain->count == 0 || chain->count > NODEID_MAX_CERTS || sig_length == 0 ||
        sig_length > NODEID_MAX_SIG) {
        snprintf(detail, detail_len, "no certificate chain or signature, or too long a one");
        goto out;
    }
    for (unsigned i = 0; i < chain->count; i++) {
        const unsigned char *p = chain->der[i];
        total += chain->length[i];
        if (chain->length[i] == 0 || total > NODEID_MAX_CHAIN_BYTES || chain->length[i] > LONG_MAX) {
            snprintf(detail, detail_len, "certificate chain of more than %d bytes",
                     NODEID_MAX_CHAIN_BYTES);
            goto out;
        }
        X509 *x = d2i_X509(NULL, &p, (long)chain->length[i]);
        /* Exactly one certificate per entry: trailing bytes are not ignored. */
        if (x == NULL || p != chain->der[i] + chain->length[i]) {
            X509_free(x);
            snprintf(detail, detail_len, "certificate %u of the chain is not DER", i);
            goto out;
        }
        if (leaf == NULL)
            leaf = x;
        else if (sk_X509_push(rest, x) <= 0) {
            X509_free(x);
            status = B10_ERR_NO_MEMORY;
            snprintf(detail, detail_len, "no memory to check a certificate chain");
            goto out;
        }
    }
    if ((status = nodeid_check_chain(id->anchors, leaf, rest, name, detail, detail_len)) != B10_OK)
        goto out;
    EVP_PKEY *key = X509_get0_pubkey(leaf);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL || EVP_DigestVerifyInit(ctx, NULL, nodeid_md(key), NULL, key) != 1 ||
        EVP_DigestVerify(ctx, sig, sig_length, msg, length) != 1) {
        status = B10_ERR_PERMISSION;
        snprintf(detail, detail_len, "the handshake's signature is not by the key of the "
                 "certificate for '%s'", name);
    }
    EVP_MD_CTX_free(ctx);
out:
    ERR_clear_error();
    X509_free(leaf);
    sk_X509_pop_free(rest, X509_free);
    return status;
}

/* ---------------------------------------------------------------- the small cluster's CA */

/* Write PEM bytes to a new file of this mode; never over an existing one. */
static b10_status_t nodeid_write(const char *path, mode_t mode, BIO *bio, char *detail,
                                 size_t detail_len)
{
    char *data;
    long n = BIO_get_mem_data(bio, &data);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);

    if (fd < 0) {
        int err = errno;
        snprintf(detail, detail_len, "%s: %s", path, strerror(err));
        return err == EEXIST ? B10_ERR_EXISTS : status_from_errno(err);
    }
    ssize_t w = n > 0 ? write(fd, data, (size_t)n) : -1;
    int err = errno;
    if (close(fd) != 0 || w != n) {
        snprintf(detail, detail_len, "%s: %s", path, strerror(err));
        unlink(path);
        return B10_ERR_IO;
    }
    return B10_OK;
}

static b10_status_t nodeid_write_pair(const char *dir, const char *stem, EVP_PKEY *key, X509 *cert,
                                      char *detail, size_t detail_len)
{
    char path[512];
    BIO *kb = BIO_new(BIO_s_mem()), *cb = BIO_new(BIO_s_mem());
    b10_status_t status = B10_ERR_NO_MEMORY;

    if (kb == NULL || cb == NULL || PEM_write_bio_PrivateKey(kb, key, NULL, NULL, 0, NULL, NULL) != 1 ||
        PEM_write_bio_X509(cb, cert) != 1) {
        snprintf(detail, detail_len, "cannot encode %s's key and certificate", stem);
        goto out;
    }
    snprintf(path, sizeof(path), "%s/%s.key", dir, stem);
    if ((status = nodeid_write(path, 0600, kb, detail, detail_len)) != B10_OK)
        goto out;
    snprintf(path, sizeof(path), "%s/%s.crt", dir, stem);
    if ((status = nodeid_write(path, 0644, cb, detail, detail_len)) != B10_OK) {
        snprintf(path, sizeof(path), "%s/%s.key", dir, stem);
        unlink(path);
    }
out:
    BIO_free(kb);
    BIO_free(cb);
    return status;
}

/* A fresh Ed25519 key and a certificate of it for cn, valid from..to seconds from now. */
static X509 *nodeid_new_cert(EVP_PKEY **key_p, const char *cn, int64_t from, int64_t to)
{
    EVP_PKEY *key = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    X509 *x = X509_new();
    BIGNUM *serial = BN_new();
    X509_NAME *subject = X509_NAME_new();

    if (key == NULL || x == NULL || serial == NULL || subject == NULL ||
        BN_rand(serial, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
        BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x)) == NULL ||
        X509_set_version(x, X509_VERSION_3) != 1 ||
        X509_gmtime_adj(X509_getm_notBefore(x), (long)from) == NULL ||
        X509_gmtime_adj(X509_getm_notAfter(x), (long)to) == NULL ||
        X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1,
                                   -1, 0) != 1 ||
        X509_set_subject_name(x, subject) != 1 || X509_set_pubkey(x, key) != 1) {
        EVP_PKEY_free(key);
        X509_free(x);
        x = NULL;
        key = NULL;
    }
    BN_free(serial);
    X509_NAME_free(subject);
    *key_p = key;
    return x;
}

static bool nodeid_ext(X509 *issuer, X509 *x, int nid, const char *value)
{
    X509V3_CTX ctx;

    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    bool ok = ext != NULL && X509_add_ext(x, ext, -1) == 1;
    X509_EXTENSION_free(ext);
    return ok;
}

b10_status_t nodeid_make_ca(const char *dir, unsigned days, char *detail, size_t detail_len)
{
    EVP_PKEY *key = NULL;
    uint8_t tag[4];
    char cn[64];

    /* Two clusters' CAs never share a name: a chain is matched to its anchor by name first. */
    if (RAND_bytes(tag, sizeof(tag)) != 1) {
        snprintf(detail, detail_len, "no random bytes for a CA");
        return B10_ERR_INTERNAL;
    }
    snprintf(cn, sizeof(cn), "b10d node CA %02x%02x%02x%02x", tag[0], tag[1], tag[2], tag[3]);
    X509 *x = nodeid_new_cert(&key, cn, -300, (int64_t)days * 86400);
    b10_status_t status = B10_ERR_INTERNAL;

    if (x == NULL || X509_set_issuer_name(x, X509_get_subject_name(x)) != 1 ||
        !nodeid_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:1") ||
        !nodeid_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") ||
        !nodeid_ext(x, x, NID_subject_key_identifier, "hash") || X509_sign(x, key, NULL) <= 0) {
        snprintf(detail, detail_len, "cannot make a CA certificate");
        goto out;
    }
    status = nodeid_write_pair(dir, "ca", key, x, detail, detail_len);
out:
    ERR_clear_error();
    EVP_PKEY_free(key);
    X509_free(x);
    return status;
}

b10_status_t nodeid_issue(const char *ca_cert, const char *ca_key, const char *name,
                          const char *dir, int64_t not_before_s, int64_t not_after_s,
                          char *detail, size_t detail_len)
{
    struct nodeid_stamp stamp;
    BIO *cb = NULL, *kb = NULL;
    X509 *ca = NULL, *x = NULL;
    EVP_PKEY *cakey = NULL, *key = NULL;
    char san[CONFIG_NAME_MAX + 8];
    b10_status_t status;

    if (!config_name_ok(name)) {
        snprintf(detail, detail_len, "'%s' is no daemon name (1 to 63 letters, digits, '.', '_' "
                 "or '-')", name);
        return B10_ERR_INVALID_ARG;
    }
    if ((status = nodeid_read(ca_cert, "CA certificate", false, &cb, &stamp, detail,
                              detail_len)) != B10_OK ||
        (status = nodeid_read(ca_key, "CA key", true, &kb, &stamp, detail, detail_len)) != B10_OK)
        goto out;
    status = B10_ERR_INVALID_ARG;
    if ((ca = PEM_read_bio_X509(cb, NULL, nodeid_no_passphrase, NULL)) == NULL ||
        (cakey = PEM_read_bio_PrivateKey(kb, NULL, nodeid_no_passphrase, NULL)) == NULL ||
        EVP_PKEY_eq(X509_get0_pubkey(ca), cakey) != 1) {
        snprintf(detail, detail_len, "%s and %s are no CA certificate and its unencrypted key",
                 ca_cert, ca_key);
        goto out;
    }
    snprintf(san, sizeof(san), "DNS:%s", name);
    status = B10_ERR_INTERNAL;
    if ((x = nodeid_new_cert(&key, name, not_before_s, not_after_s)) == NULL ||
        X509_set_issuer_name(x, X509_get_subject_name(ca)) != 1 ||
        !nodeid_ext(ca, x, NID_basic_constraints, "critical,CA:FALSE") ||
        !nodeid_ext(ca, x, NID_key_usage, "critical,digitalSignature") ||
        !nodeid_ext(ca, x, NID_subject_alt_name, san) ||
        !nodeid_ext(ca, x, NID_authority_key_identifier, "keyid:always") ||
        X509_sign(x, cakey, nodeid_md(cakey)) <= 0) {
        snprintf(detail, detail_len, "cannot make a certificate for %s", name);
        goto out;
    }
    status = nodeid_write_pair(dir, name, key, x, detail, detail_len);
out:
    ERR_clear_error();
    BIO_free(cb);
    BIO_free(kb);
    X509_free(ca);
    X509_free(x);
    EVP_PKEY_free(cakey);
    EVP_PKEY_free(key);
    return status;
}
