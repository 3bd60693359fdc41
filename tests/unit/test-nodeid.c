/*
 * test-nodeid.c — daemon/io/nodeid.c: a node's certificate, key and trust
 * anchors loaded and checked, each refusal (another CA, expired, not yet
 * valid, another name, a key that is not the certificate's, a key file
 * others may read, a certificate that could issue others), a chain
 * through an intermediate, the handshake's signature checked and a flipped
 * byte refused, a peer's chain held to its bounds, and rotation: a good new
 * file replaces the identity, a bad one leaves the old in place.
 *
 * Every CA and certificate is made here (nodeid_make_ca, nodeid_issue) in a
 * temporary folder, removed at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "auth.h"
#include "hello.h"
#include "nodeid.h"

#define DAY 86400

static char dir[64];
static char detail[512];

static const char *in(const char *sub, const char *file)
{
    static char paths[4][256];
    static unsigned next;
    char *p = paths[next++ % 4];
    snprintf(p, sizeof(paths[0]), "%s/%s/%s", dir, sub, file);
    return p;
}

static void mkdir_in(const char *sub)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", dir, sub);
    assert_int_equal(mkdir(path, 0700), 0);
}

/* NAME's files from the CA of folder ca, into folder out, valid from..to seconds from now. */
static void issue(const char *ca, const char *name, const char *out, int64_t from, int64_t to)
{
    char cert[256], key[256], outdir[128];
    snprintf(cert, sizeof(cert), "%s", in(ca, "ca.crt"));
    snprintf(key, sizeof(key), "%s", in(ca, "ca.key"));
    snprintf(outdir, sizeof(outdir), "%s/%s", dir, out);
    if (nodeid_issue(cert, key, name, outdir, from, to, detail, sizeof(detail)) != B10_OK)
        fail_msg("issue %s: %s", name, detail);
}

static int setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/b10-test-nodeid.XXXXXX");
    if (mkdtemp(dir) == NULL || auth_init() != B10_OK)
        return -1;
    const char *subs[] = { "ca", "other", "good", "expired", "future", "x", "next" };
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
        mkdir_in(subs[i]);
    char path[128];
    snprintf(path, sizeof(path), "%s/ca", dir);
    if (nodeid_make_ca(path, 30, detail, sizeof(detail)) != B10_OK)
        return -1;
    snprintf(path, sizeof(path), "%s/other", dir);
    if (nodeid_make_ca(path, 30, detail, sizeof(detail)) != B10_OK)
        return -1;
    issue("ca", "a", "good", -60, 30 * DAY);
    issue("ca", "b", "good", -60, 30 * DAY);
    issue("ca", "a", "expired", -10 * DAY, -DAY);
    issue("ca", "a", "future", DAY, 10 * DAY);
    issue("other", "a", "x", -60, 30 * DAY);
    issue("ca", "a", "next", -60, 60 * DAY);
    snprintf(path, sizeof(path), "%s/good/junk.key", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0 || write(fd, "junk\n", 5) != 5)
        return -1;
    close(fd);
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static b10_status_t load(const char *cert, const char *key, const char *ca, const char *name,
                         struct nodeid **id_p)
{
    detail[0] = '\0';
    return nodeid_load(cert, key, ca, name, id_p, detail, sizeof(detail));
}

static void test_load_good(void **state)
{
    struct nodeid *id = NULL;

    assert_int_equal(load(in("good", "a.crt"), in("good", "a.key"), in("ca", "ca.crt"), "a", &id),
                     B10_OK);
    assert_string_equal(nodeid_name(id), "a");
    int64_t left = nodeid_not_after(id) - (int64_t)time(NULL);
    assert_true(left > 29 * DAY && left <= 30 * DAY);
    struct nodeid_chain chain;
    nodeid_chain_of(id, &chain);
    assert_int_equal(chain.count, 1);
    assert_true(chain.length[0] > 100 && chain.length[0] < 1024);
    nodeid_free(id);
    nodeid_free(NULL);
}

/* Each refusal, with the words the start logs. */
static void test_refusals(void **state)
{
    static const struct {
        const char *cert, *key, *ca, *name;
        b10_status_t status;
        const char *words;
    } cases[] = {
        { "x/a.crt", "x/a.key", "ca/ca.crt", "a", B10_ERR_PERMISSION, "unable to get local issuer" },
        { "expired/a.crt", "expired/a.key", "ca/ca.crt", "a", B10_ERR_PERMISSION, "certificate has expired" },
        { "future/a.crt", "future/a.key", "ca/ca.crt", "a", B10_ERR_PERMISSION, "not yet valid" },
        { "good/b.crt", "good/b.key", "ca/ca.crt", "a", B10_ERR_PERMISSION, "does not name 'a'" },
        { "good/a.crt", "good/b.key", "ca/ca.crt", "a", B10_ERR_INVALID_ARG, "is not the key of certificate" },
        { "good/a.crt", "good/a.key", "good/a.key", "a", B10_ERR_INVALID_ARG, "no PEM certificate" },
        { "good/a.key", "good/a.key", "ca/ca.crt", "a", B10_ERR_INVALID_ARG, "no PEM certificate" },
        { "good/a.crt", "good/junk.key", "ca/ca.crt", "a", B10_ERR_INVALID_ARG, "not an unencrypted PEM private key" },
        { "good/none.crt", "good/a.key", "ca/ca.crt", "a", B10_ERR_NOT_FOUND, "No such file" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct nodeid *id = NULL;
        char cert[256], key[256], ca[256];
        snprintf(cert, sizeof(cert), "%s/%s", dir, cases[i].cert);
        snprintf(key, sizeof(key), "%s/%s", dir, cases[i].key);
        snprintf(ca, sizeof(ca), "%s/%s", dir, cases[i].ca);
        b10_status_t st = load(cert, key, ca, cases[i].name, &id);
        if (st != cases[i].status || strstr(detail, cases[i].words) == NULL)
            fail_msg("case %zu: %s, '%s'; expected %s, '%s'", i, b10_status_name(st), detail,
                     b10_status_name(cases[i].status), cases[i].words);
        assert_null(id);
    }
}

/* The key file's rules are a cluster key's: no bits for group or others. */
static void test_key_mode(void **state)
{
    struct nodeid *id = NULL;

    assert_int_equal(chmod(in("good", "a.key"), 0640), 0);
    assert_int_equal(load(in("good", "a.crt"), in("good", "a.key"), in("ca", "ca.crt"), "a", &id),
                     B10_ERR_PERMISSION);
    assert_non_null(strstr(detail, "mode 0640 lets group or others at it"));
    assert_int_equal(chmod(in("good", "a.key"), 0400), 0);
    assert_int_equal(load(in("good", "a.crt"), in("good", "a.key"), in("ca", "ca.crt"), "a", &id),
                     B10_OK);
    nodeid_free(id);
    assert_int_equal(chmod(in("good", "a.key"), 0600), 0);
}

static void load_ok(const char *sub, const char *name, struct nodeid **id_p)
{
    char cert[16], key[16];
    snprintf(cert, sizeof(cert), "%s.crt", name);
    snprintf(key, sizeof(key), "%s.key", name);
    if (load(in(sub, cert), in(sub, key), in("ca", "ca.crt"), name, id_p) != B10_OK)
        fail_msg("load %s/%s: %s", sub, name, detail);
}

/* a signs, b checks against a's chain and name; a flipped byte anywhere is refused. */
static void test_signature(void **state)
{
    struct nodeid *a = NULL, *b = NULL;
    uint8_t msg[300], sig[NODEID_MAX_SIG];
    size_t sig_length = 0;
    struct nodeid_chain chain;

    load_ok("good", "a", &a);
    load_ok("good", "b", &b);
    auth_random(msg, sizeof(msg));
    assert_int_equal(nodeid_sign(a, msg, sizeof(msg), sig, &sig_length), B10_OK);
    assert_int_equal(sig_length, 64);   /* Ed25519 */
    nodeid_chain_of(a, &chain);
    assert_int_equal(nodeid_verify(b, &chain, "a", msg, sizeof(msg), sig, sig_length, detail,
                                   sizeof(detail)), B10_OK);
    /* Claiming another name with a's chain. */
    assert_int_equal(nodeid_verify(b, &chain, "b", msg, sizeof(msg), sig, sig_length, detail,
                                   sizeof(detail)), B10_ERR_PERMISSION);
    assert_non_null(strstr(detail, "does not name 'b'"));
    for (size_t i = 0; i < sizeof(msg); i += 37) {
        msg[i] ^= 1;
        assert_int_equal(nodeid_verify(b, &chain, "a", msg, sizeof(msg), sig, sig_length, detail,
                                       sizeof(detail)), B10_ERR_PERMISSION);
        msg[i] ^= 1;
    }
    for (size_t i = 0; i < sig_length; i++) {
        sig[i] ^= 0x80;
        assert_int_equal(nodeid_verify(b, &chain, "a", msg, sizeof(msg), sig, sig_length, detail,
                                       sizeof(detail)), B10_ERR_PERMISSION);
        sig[i] ^= 0x80;
    }
    /* b's signature offered with a's chain. */
    uint8_t bsig[NODEID_MAX_SIG];
    size_t bsig_length;
    assert_int_equal(nodeid_sign(b, msg, sizeof(msg), bsig, &bsig_length), B10_OK);
    assert_int_equal(nodeid_verify(b, &chain, "a", msg, sizeof(msg), bsig, bsig_length, detail,
                                   sizeof(detail)), B10_ERR_PERMISSION);
    assert_non_null(strstr(detail, "signature"));
    nodeid_free(a);
    nodeid_free(b);
}

/* A peer's chain: bounded, exact DER, of our anchors. */
static void test_peer_chain_bounds(void **state)
{
    struct nodeid *a = NULL, *b = NULL, *x = NULL;
    uint8_t msg[32] = { 1 }, sig[NODEID_MAX_SIG], der[2048];
    size_t sig_length;
    struct nodeid_chain chain, bad;

    load_ok("good", "a", &a);
    load_ok("good", "b", &b);
    assert_int_equal(nodeid_sign(a, msg, sizeof(msg), sig, &sig_length), B10_OK);
    nodeid_chain_of(a, &chain);

    /* Trailing bytes after the certificate. */
    bad = chain;
    memcpy(der, chain.der[0], chain.length[0]);
    der[chain.length[0]] = 0;
    bad.der[0] = der;
    bad.length[0] = chain.length[0] + 1;
    assert_int_equal(nodeid_verify(b, &bad, "a", msg, sizeof(msg), sig, sig_length, detail,
                                   sizeof(detail)), B10_ERR_PERMISSION);
    assert_non_null(strstr(detail, "not DER"));
    /* Cut short, and garbage. */
    bad.length[0] = chain.length[0] - 1;
    assert_int_equal(nodeid_verify(b, &bad, "a", msg, sizeof(msg), sig, sig_length, detail,
                                   sizeof(detail)), B10_ERR_PERMISSION);
    memset(der, 0x30, sizeof(der));
    bad.length[0] = sizeof(der);
    assert_int_equal(nodeid_verify(b, &bad, "a", msg, sizeof(msg), sig, sig_length, detail,
                                   sizeof(detail)), B10_ERR_PERMISSION);
    /* No chain, too many certificates, too many bytes, no signature, too long a one. */
    bad = chain;
    bad.count = 0;
    assert_int_equal(nodeid_verify(b, &bad, "a", msg, sizeof(msg), sig, sig_length, detail,
                                   sizeof(detail)), B10_ERR_PERMISSION);
    bad.count = NODEID_MAX_CERTS + 1;
    assert_int_equal(nodeid_verify(b, &bad, "a", msg, sizeof(msg), sig, sig_length, detail,
                                   sizeof(detail)), B10_ERR_PERMISSION);
    bad = chain;
    bad.length[0] = NODEID_MAX_CHAIN_BYTES + 1;
    assert_int_equal(nodeid_verify(b, &bad, "a", msg, sizeof(msg), sig, sig_length, detail,
                                   sizeof(detail)), B10_ERR_PERMISSION);
    assert_int_equal(nodeid_verify(b, &chain, "a", msg, sizeof(msg), sig, 0, detail,
                                   sizeof(detail)), B10_ERR_PERMISSION);
    assert_int_equal(nodeid_verify(b, &chain, "a", msg, sizeof(msg), sig, NODEID_MAX_SIG + 1,
                                   detail, sizeof(detail)), B10_ERR_PERMISSION);
    /* A chain of another CA, its signature good: refused by b's anchors. */
    assert_int_equal(load(in("x", "a.crt"), in("x", "a.key"), in("other", "ca.crt"), "a", &x),
                     B10_OK);
    assert_int_equal(nodeid_sign(x, msg, sizeof(msg), sig, &sig_length), B10_OK);
    nodeid_chain_of(x, &bad);
    assert_int_equal(nodeid_verify(b, &bad, "a", msg, sizeof(msg), sig, sig_length, detail,
                                   sizeof(detail)), B10_ERR_PERMISSION);
    assert_non_null(strstr(detail, "unable to get local issuer"));
    /* The chain and signature as they were: accepted. */
    assert_int_equal(nodeid_sign(a, msg, sizeof(msg), sig, &sig_length), B10_OK);
    assert_int_equal(nodeid_verify(b, &chain, "a", msg, sizeof(msg), sig, sig_length, detail,
                                   sizeof(detail)), B10_OK);
    nodeid_free(a);
    nodeid_free(b);
    nodeid_free(x);
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
    char buf[8192];
    int in_fd = open(from, O_RDONLY);
    assert_true(in_fd >= 0);
    ssize_t n = read(in_fd, buf, sizeof(buf));
    close(in_fd);
    assert_true(n > 0);
    char tmp[300];
    snprintf(tmp, sizeof(tmp), "%s.new", to);
    int out_fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, mode);
    assert_true(out_fd >= 0);
    assert_int_equal(write(out_fd, buf, (size_t)n), n);
    close(out_fd);
    assert_int_equal(rename(tmp, to), 0);  /* a new inode: seen as changed whatever the clock */
}

/* Rotation: unchanged files are not read again; a bad new file keeps the old identity. */
static void test_rotation(void **state)
{
    struct nodeid *id = NULL;
    char cert[256], key[256];

    mkdir_in("live");
    snprintf(cert, sizeof(cert), "%s", in("live", "a.crt"));
    snprintf(key, sizeof(key), "%s", in("live", "a.key"));
    copy_file(in("good", "a.crt"), cert, 0644);
    copy_file(in("good", "a.key"), key, 0600);
    assert_int_equal(load(cert, key, in("ca", "ca.crt"), "a", &id), B10_OK);
    int64_t first = nodeid_not_after(id);
    assert_int_equal(nodeid_refresh(id, detail, sizeof(detail)), 0);

    /* An expired certificate (with its key) arrives: refused once, the old identity kept. */
    copy_file(in("expired", "a.crt"), cert, 0644);
    copy_file(in("expired", "a.key"), key, 0600);
    assert_int_equal(nodeid_refresh(id, detail, sizeof(detail)), -1);
    assert_non_null(strstr(detail, "certificate has expired"));
    assert_int_equal(nodeid_not_after(id), first);
    assert_int_equal(nodeid_refresh(id, detail, sizeof(detail)), 0);   /* not tried again */
    uint8_t msg[16] = { 7 }, sig[NODEID_MAX_SIG];
    size_t sig_length;
    struct nodeid_chain chain;
    assert_int_equal(nodeid_sign(id, msg, sizeof(msg), sig, &sig_length), B10_OK);
    nodeid_chain_of(id, &chain);
    assert_int_equal(nodeid_verify(id, &chain, "a", msg, sizeof(msg), sig, sig_length, detail,
                                   sizeof(detail)), B10_OK);

    /* The new certificate before its key: a mismatch, kept; then the key: taken. */
    copy_file(in("next", "a.crt"), cert, 0644);
    assert_int_equal(nodeid_refresh(id, detail, sizeof(detail)), -1);
    assert_non_null(strstr(detail, "is not the key of certificate"));
    assert_int_equal(nodeid_not_after(id), first);
    copy_file(in("next", "a.key"), key, 0600);
    assert_int_equal(nodeid_refresh(id, detail, sizeof(detail)), 1);
    assert_true(nodeid_not_after(id) > first + 20 * DAY);
    assert_int_equal(nodeid_sign(id, msg, sizeof(msg), sig, &sig_length), B10_OK);
    nodeid_chain_of(id, &chain);
    assert_int_equal(nodeid_verify(id, &chain, "a", msg, sizeof(msg), sig, sig_length, detail,
                                   sizeof(detail)), B10_OK);

    /* A file gone: refused, kept. */
    assert_int_equal(unlink(key), 0);
    assert_int_equal(nodeid_refresh(id, detail, sizeof(detail)), -1);
    assert_true(nodeid_not_after(id) > first + 20 * DAY);
    nodeid_free(id);
}

static void run(const char *cmd)
{
    if (system(cmd) != 0)
        fail_msg("%s failed", cmd);
}

/*
 * A chain: the leaf and an intermediate (made with the openssl tool) reach
 * the root; the leaf alone does not; more than 4 certificates are refused.
 */
static void test_intermediate(void **state)
{
    struct nodeid *id = NULL, *peer = NULL;
    char cmd[1024], cert[256], key[256];

    mkdir_in("int");
    snprintf(cmd, sizeof(cmd),
             "cd %s && openssl genpkey -algorithm ed25519 -out int/ca.key 2>/dev/null && "
             "openssl req -new -key int/ca.key -subj /CN=b10d-intermediate -out int/ca.csr && "
             "printf 'basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign\n' "
             ">int/ext && openssl x509 -req -in int/ca.csr -CA ca/ca.crt -CAkey ca/ca.key -days 5 "
             "-extfile int/ext -out int/ca.crt 2>/dev/null", dir);
    run(cmd);
    issue("int", "c", "int", -60, DAY);
    snprintf(cmd, sizeof(cmd), "cd %s/int && cat c.crt ca.crt >chain.crt && "
             "cat c.crt ca.crt ca.crt ca.crt ca.crt >long.crt", dir);
    run(cmd);
    snprintf(key, sizeof(key), "%s", in("int", "c.key"));
    snprintf(cert, sizeof(cert), "%s", in("int", "chain.crt"));
    if (load(cert, key, in("ca", "ca.crt"), "c", &id) != B10_OK)
        fail_msg("leaf and intermediate: %s", detail);
    struct nodeid_chain chain;
    nodeid_chain_of(id, &chain);
    assert_int_equal(chain.count, 2);
    /* A peer checks the same chain, sent as it travels. */
    uint8_t msg[8] = { 5 }, sig[NODEID_MAX_SIG];
    size_t sig_length;
    load_ok("good", "a", &peer);
    assert_int_equal(nodeid_sign(id, msg, sizeof(msg), sig, &sig_length), B10_OK);
    assert_int_equal(nodeid_verify(peer, &chain, "c", msg, sizeof(msg), sig, sig_length, detail,
                                   sizeof(detail)), B10_OK);
    chain.count = 1;    /* the leaf alone */
    assert_int_equal(nodeid_verify(peer, &chain, "c", msg, sizeof(msg), sig, sig_length, detail,
                                   sizeof(detail)), B10_ERR_PERMISSION);
    nodeid_free(id);
    nodeid_free(peer);
    assert_int_equal(load(in("int", "c.crt"), key, in("ca", "ca.crt"), "c", &id),
                     B10_ERR_PERMISSION);
    assert_non_null(strstr(detail, "unable to get local issuer"));
    snprintf(cert, sizeof(cert), "%s", in("int", "long.crt"));
    assert_int_equal(load(cert, key, in("ca", "ca.crt"), "c", &id), B10_ERR_INVALID_ARG);
    assert_non_null(strstr(detail, "more than 4 certificates"));
    /* The intermediate itself, given a name: a CA's certificate is never a node's. */
    snprintf(cmd, sizeof(cmd),
             "cd %s && openssl req -new -key int/ca.key -subj /CN=cax -out int/cax.csr && "
             "printf 'basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,"
             "digitalSignature\nsubjectAltName=DNS:cax\n' >int/extx && openssl x509 -req -in "
             "int/cax.csr -CA ca/ca.crt -CAkey ca/ca.key -days 5 -extfile int/extx "
             "-out int/cax.crt 2>/dev/null", dir);
    run(cmd);
    assert_int_equal(load(in("int", "cax.crt"), in("int", "ca.key"), in("ca", "ca.crt"), "cax",
                          &id), B10_ERR_PERMISSION);
    assert_non_null(strstr(detail, "is a CA's (basicConstraints CA:TRUE)"));
}

/* Read a whole small file into buf; its length. */
static size_t slurp(const char *path, uint8_t *buf, size_t size)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    ssize_t n = read(fd, buf, size);
    close(fd);
    assert_true(n > 0 && (size_t)n < size);
    return (size_t)n;
}

/*
 * Certificates that could issue others, each named, within its dates and
 * of the right CA, made with the openssl tool as a careless or hostile CA
 * would: refused at load, and refused as a peer's proof though its
 * signature is good (the peer's key signs with the openssl tool here, as
 * b10d would never load it). A leaf beside them, CA:FALSE with
 * digitalSignature alone, loads and is taken from a peer.
 */
static void test_leaf_may_not_issue(void **state)
{
    static const struct {
        const char *name, *ext, *words;
    } cases[] = {
        /* OpenSSL's X509_check_ca reads CA:FALSE as "no CA" whatever keyUsage says. */
        { "ku", "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,"
                "keyCertSign", "keyUsage keyCertSign" },
        /* ...and a keyUsage without keyCertSign as "no CA" whatever basicConstraints says. */
        { "bc", "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,digitalSignature",
                "basicConstraints CA:TRUE" },
        { "nobc", "keyUsage=critical,digitalSignature,keyCertSign", "keyUsage keyCertSign" },
        { "leaf", "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature",
                  NULL },
    };
    struct nodeid *peer = NULL, *id = NULL;
    char cmd[1536], cert[256], key[256], name[16];
    uint8_t msg[48], sig[NODEID_MAX_SIG], der[4096];

    mkdir_in("iss");
    load_ok("good", "a", &peer);
    auth_random(msg, sizeof(msg));
    snprintf(cmd, sizeof(cmd), "%s/iss/msg", dir);
    int fd = open(cmd, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0 && write(fd, msg, sizeof(msg)) == (ssize_t)sizeof(msg));
    close(fd);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *n = cases[i].name;
        snprintf(cmd, sizeof(cmd),
                 "cd %s/iss && openssl genpkey -algorithm ed25519 -out %s.key 2>/dev/null && "
                 "chmod 600 %s.key && openssl req -new -key %s.key -subj /CN=%s -out %s.csr && "
                 "printf '%s\nsubjectAltName=DNS:%s\n' >%s.ext && openssl x509 -req -in %s.csr "
                 "-CA ../ca/ca.crt -CAkey ../ca/ca.key -days 2 -extfile %s.ext -out %s.crt "
                 "2>/dev/null && openssl x509 -in %s.crt -outform DER -out %s.der && "
                 "openssl pkeyutl -sign -rawin -inkey %s.key -in msg -out %s.sig",
                 dir, n, n, n, n, n, cases[i].ext, n, n, n, n, n, n, n, n, n);
        run(cmd);
        snprintf(cert, sizeof(cert), "%s/iss/%s.crt", dir, n);
        snprintf(key, sizeof(key), "%s/iss/%s.key", dir, n);
        b10_status_t st = load(cert, key, in("ca", "ca.crt"), n, &id);
        snprintf(name, sizeof(name), "%s.sig", n);
        size_t sig_length = slurp(in("iss", name), sig, sizeof(sig));
        snprintf(name, sizeof(name), "%s.der", n);
        struct nodeid_chain chain = { .count = 1, .der = { der } };
        chain.length[0] = slurp(in("iss", name), der, sizeof(der));
        char vdetail[512];
        b10_status_t vst = nodeid_verify(peer, &chain, n, msg, sizeof(msg), sig, sig_length,
                                         vdetail, sizeof(vdetail));
        if (cases[i].words == NULL) {
            if (st != B10_OK || vst != B10_OK)
                fail_msg("the leaf: load %s (%s), from a peer %s (%s)", b10_status_name(st),
                         detail, b10_status_name(vst), vdetail);
            nodeid_free(id);
            id = NULL;
            continue;
        }
        if (st != B10_ERR_PERMISSION || strstr(detail, cases[i].words) == NULL)
            fail_msg("case %s: load %s, '%s'; expected a refusal for '%s'", n,
                     b10_status_name(st), detail, cases[i].words);
        assert_null(id);
        if (vst != B10_ERR_PERMISSION || strstr(vdetail, cases[i].words) == NULL)
            fail_msg("case %s: from a peer %s, '%s'; expected a refusal for '%s'", n,
                     b10_status_name(vst), vdetail, cases[i].words);
    }
    nodeid_free(peer);
}

/*
 * An ECDSA P-256 key named by a SPIFFE-style URI (made with the openssl
 * tool) signs and is checked; a P-384 key is refused.
 */
static void test_p256_and_uri(void **state)
{
    struct nodeid *id = NULL, *peer = NULL;
    char cmd[1536], cert[256], key[256];

    mkdir_in("ec");
    static const char *const curves[] = { "P-256", "P-384" };
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof(cmd),
                 "cd %s && openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:%s "
                 "-out ec/d%d.key 2>/dev/null && chmod 600 ec/d%d.key && "
                 "openssl req -new -key ec/d%d.key -subj /CN=d -out ec/d%d.csr && "
                 "printf 'subjectAltName=URI:spiffe://test.cluster/b10d/d\n' >ec/ext && "
                 "openssl x509 -req -in ec/d%d.csr -CA ca/ca.crt -CAkey ca/ca.key -days 2 "
                 "-extfile ec/ext -out ec/d%d.crt 2>/dev/null", dir, curves[i], i, i, i, i, i, i);
        run(cmd);
    }
    snprintf(cert, sizeof(cert), "%s", in("ec", "d0.crt"));
    snprintf(key, sizeof(key), "%s", in("ec", "d0.key"));
    if (load(cert, key, in("ca", "ca.crt"), "d", &id) != B10_OK)
        fail_msg("P-256: %s", detail);
    uint8_t msg[64] = { 9 }, sig[NODEID_MAX_SIG];
    size_t sig_length;
    struct nodeid_chain chain;
    assert_int_equal(nodeid_sign(id, msg, sizeof(msg), sig, &sig_length), B10_OK);
    assert_true(sig_length > 60 && sig_length <= 72);  /* DER of two 32-byte integers */
    nodeid_chain_of(id, &chain);
    load_ok("good", "a", &peer);
    assert_int_equal(nodeid_verify(peer, &chain, "d", msg, sizeof(msg), sig, sig_length, detail,
                                   sizeof(detail)), B10_OK);
    msg[0] ^= 1;
    assert_int_equal(nodeid_verify(peer, &chain, "d", msg, sizeof(msg), sig, sig_length, detail,
                                   sizeof(detail)), B10_ERR_PERMISSION);
    /* The URI names its last segment alone: not another segment of it. */
    msg[0] ^= 1;
    assert_int_equal(nodeid_verify(peer, &chain, "b10d", msg, sizeof(msg), sig, sig_length,
                                   detail, sizeof(detail)), B10_ERR_PERMISSION);
    assert_non_null(strstr(detail, "does not name 'b10d'"));
    nodeid_free(id);
    nodeid_free(peer);
    snprintf(cert, sizeof(cert), "%s", in("ec", "d1.crt"));
    snprintf(key, sizeof(key), "%s", in("ec", "d1.key"));
    assert_int_equal(load(cert, key, in("ca", "ca.crt"), "d", &id), B10_ERR_INVALID_ARG);
    assert_non_null(strstr(detail, "neither Ed25519 nor ECDSA P-256"));
}

/* The small cluster's tools never overwrite, and refuse what is no name. */
static void test_issue(void **state)
{
    char outdir[128], cert[256], key[256];
    snprintf(outdir, sizeof(outdir), "%s/good", dir);
    snprintf(cert, sizeof(cert), "%s", in("ca", "ca.crt"));
    snprintf(key, sizeof(key), "%s", in("ca", "ca.key"));
    assert_int_equal(nodeid_issue(cert, key, "a", outdir, 0, DAY, detail, sizeof(detail)),
                     B10_ERR_EXISTS);
    assert_int_equal(nodeid_issue(cert, key, "bad name", outdir, 0, DAY, detail, sizeof(detail)),
                     B10_ERR_INVALID_ARG);
    assert_int_equal(nodeid_issue(cert, cert, "c", outdir, 0, DAY, detail, sizeof(detail)),
                     B10_ERR_PERMISSION);  /* ca.crt is 0644: no key file */
    snprintf(outdir, sizeof(outdir), "%s/ca", dir);
    assert_int_equal(nodeid_make_ca(outdir, 1, detail, sizeof(detail)), B10_ERR_EXISTS);
    struct stat st;
    assert_int_equal(stat(in("good", "a.key"), &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
}

/* A transcript names each field: a change of any changes it. */
static void test_transcript(void **state)
{
    uint8_t nonce[AUTH_NONCE_BYTES] = { 1 }, kx[AUTH_KX_BYTES] = { 2 }, addr[40] = { 3 };
    uint8_t t1[HELLO_TRANSCRIPT_BYTES], t2[HELLO_TRANSCRIPT_BYTES];
    struct hello_transcript t = {
        .sender_id = 1, .receiver_id = 2, .gen = 3, .incarnation = 4, .name = "a",
        .opener_nonce = nonce, .opener_kx = kx, .address = addr, .address_length = sizeof(addr),
    };

    hello_transcript(&t, t1);
    hello_transcript(&t, t2);
    assert_memory_equal(t1, t2, sizeof(t1));
    t.name = "b";
    hello_transcript(&t, t2);
    assert_memory_not_equal(t1, t2, sizeof(t1));
    t.name = "a";
    addr[39] ^= 1;
    hello_transcript(&t, t2);
    assert_memory_not_equal(t1, t2, sizeof(t1));
    addr[39] ^= 1;
    t.ack = true;
    t.nonce = nonce;
    t.kx = kx;
    hello_transcript(&t, t2);
    assert_memory_not_equal(t1, t2, sizeof(t1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_good),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_key_mode),
        cmocka_unit_test(test_signature),
        cmocka_unit_test(test_peer_chain_bounds),
        cmocka_unit_test(test_rotation),
        cmocka_unit_test(test_intermediate),
        cmocka_unit_test(test_leaf_may_not_issue),
        cmocka_unit_test(test_p256_and_uri),
        cmocka_unit_test(test_issue),
        cmocka_unit_test(test_transcript),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
