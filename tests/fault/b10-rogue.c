/*
 * b10-rogue — a hostile remote daemon, for the fault tests of b10d.
 *
 * It speaks the peer protocol (proto/peer.proto, daemon/io/auth.h, daemon/mem/tags.h)
 * over UCX to a victim b10d, and is at the same time a rank of that daemon:
 * it connects with libb10, registers a region of its own (host memory shared
 * with the daemon) and gets its agent descriptor, which carries the daemon's
 * id, name and UCX worker address (readable by anyone: only its seal needs
 * the key). Its transfers target that region, so it sees every byte the
 * daemon writes there and can tell what must not have changed.
 *
 *   b10-rogue [-t TIMEOUT_MS] [-k KEYFILE] [-i ID -n NAME] [-c STEM -a CA [-f STEM]] [-b ADDR]
 *             SOCKET CASE...
 *
 * Without -k it is a stranger: it holds no cluster key (the "stranger" and
 * "mangled" cases; -i and -n name a legitimate peer of the victim it poses
 * as). With -k it holds the cluster's key, as a compromised or buggy
 * cluster member would, and its cases test what such a peer can still not
 * do: replays, forged messages on a real link, lies in its messages, floods.
 * With -c it also holds a node certificate (STEM.crt and STEM.key, named
 * for STEM's last segment, checked against the anchors of -a) as a
 * compromised certified node would: its HELLOs prove that name, and its
 * cases test that the name is all it can be (cert_claim, cert_ids).
 * With -f STEM as well, the cert_forged case presents STEM.crt's chain and
 * a signature by STEM.key in its HELLO and KNOCK instead, read with
 * OpenSSL unchecked, as a node whose own daemon never checked them would:
 * certificates b10d refuses to load, which a victim must refuse as a
 * peer's proof too.
 * The knock case knocks at the victim's door from -b ADDR (an IPv4 address
 * of this host other than 127.0.0.1, which a door of this host lets in as
 * its own): a certified victim lets in only a certified node.
 *
 * Each case prints "ok CASE: what happened" or "FAIL CASE: why"; after every
 * case the region must hold exactly what the successful transfers wrote.
 * Exit status: 0 pass, 1 fail, 2 setup.
 */
#include <b10/b10.h>

#include "auth.h"
#include "b10.pb-c.h"
#include "checksum.h"
#include "frame.h"
#include "hello.h"
#include "knock.h"
#include "nodeid.h"
#include "peer.pb-c.h"
#include "tags.h"
#include "wireaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <ucp/api/ucp.h>

#include "../testout.h"

#define REG_BYTES (1u << 20)
#define CHUNK 8192

static int timeout_ms = 5000;

/* ---------------------------------------------------------------- output */

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static uint64_t rnd64(void)
{
    uint64_t v = 0;

    while (getrandom(&v, sizeof(v), 0) != sizeof(v) || v == 0)
        ;
    return v;
}

/* ---------------------------------------------------------------- state */

static struct {
    b10_conn_t *conn;
    char agent[64];
    uint8_t *reg;                   /* our registered region, shared with the daemon */
    uint8_t *want;                  /* what it must hold */
    uint64_t victim_id;
    char victim_name[64];           /* its daemon name, from the descriptor */
    uint64_t victim_key_id;         /* from its descriptor's envelope: public */
    uint8_t *victim_addr;
    size_t victim_addr_len;
    const uint8_t *lane_addr;   /* the victim's first data lane (in victim_addr), or NULL */
    uint64_t self_id;
    char self_name[64];
    uint64_t self_incarnation;
    bool have_key;
    struct auth_key key;        /* -k: the cluster's */
    struct auth_key wrong;      /* a key nobody else holds */
    uint64_t pose_id;           /* -i, -n: a legitimate peer of the victim we pretend to be */
    char pose_name[64];
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_address_t *addr;
    uint8_t *packed;            /* addr as a daemon gives it out (wireaddr.h) */
    size_t packed_len;
    size_t addr_len;
    ucp_ep_h ep;
    bool ep_failed;
    uint64_t next_xfer;
    uint64_t next_gen;          /* generations grow within a boot, as a daemon's do (b10d.c) */
    struct nodeid *cert;        /* -c: the node certificate held, or NULL */
    uint8_t kx[AUTH_KX_BYTES];  /* the last HELLO's X25519 key pair, with -c */
    uint8_t kx_secret[AUTH_KX_BYTES];
    const char *knock_from;     /* -b: the address the knock case knocks from */
    /* The victim's door refused this rogue for want of a certificate: its HELLO will be too. */
    bool door_refused;
    /* -f: a proof b10d would not load, presented instead of -c's while forging is set. */
    struct {
        bool loaded, on;
        EVP_PKEY *key;
        unsigned count;
        uint8_t *der[NODEID_MAX_CERTS];
        size_t length[NODEID_MAX_CERTS];
    } forged;
} g;

static uint8_t pat(uint64_t key, uint64_t i)
{
    uint64_t x = (key + i) * 0x9e3779b97f4a7c15ull;
    return (uint8_t)((x >> 29) ^ (x >> 47) ^ key);
}

/* ---------------------------------------------------------------- UCX */

struct req_state {
    bool done;
    ucs_status_t status;
    size_t length;
};

static void on_send(void *req, ucs_status_t st, void *user)
{
    struct req_state *rs = user;
    rs->done = true;
    rs->status = st;
}

static void on_recv(void *req, ucs_status_t st, const ucp_tag_recv_info_t *info, void *user)
{
    struct req_state *rs = user;
    rs->done = true;
    rs->status = st;
    rs->length = st == UCS_OK ? info->length : 0;
}

static void on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t st)
{
    g.ep_failed = true;
}

static void progress_for(double ms)
{
    double end = now_ms() + ms;
    while (now_ms() < end) {
        if (ucp_worker_progress(g.worker) == 0)
            usleep(200);
    }
}

/* Wait for a request; returns its status (UCS_ERR_TIMED_OUT after the bound, cancelled). */
static ucs_status_t req_wait(void *req, struct req_state *rs, bool cancel_on_timeout, double wait)
{
    double end = now_ms() + wait;

    if (req == NULL)
        return UCS_OK;
    if (UCS_PTR_IS_ERR(req))
        return UCS_PTR_STATUS(req);
    while (!rs->done && now_ms() < end) {
        if (ucp_worker_progress(g.worker) == 0)
            usleep(100);
    }
    if (!rs->done) {
        if (!cancel_on_timeout)
            return UCS_ERR_TIMED_OUT;   /* a send: left to finish on its own */
        ucp_request_cancel(g.worker, req);
        while (!rs->done)
            ucp_worker_progress(g.worker);
        ucp_request_free(req);
        return UCS_ERR_TIMED_OUT;
    }
    ucp_request_free(req);
    return rs->status;
}

static int send_bytes(uint64_t tag, const void *buf, size_t len)
{
    static struct req_state rs;     /* sends may outlive a timeout: keep their state alive */
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = on_send,
        .user_data = &rs,
    };

    rs = (struct req_state){ 0 };
    void *req = ucp_tag_send_nbx(g.ep, buf, len, tag, &p);
    ucs_status_t st = req_wait(req, &rs, false, timeout_ms);
    return st == UCS_OK || st == UCS_ERR_TIMED_OUT ? 0 : -1;
}

/*
 * DATA as a daemon sends it: the chunk's bytes, then their checksum trailer
 * (checksum.h), seeded with the transfer and the chunk; sum_delta != 0
 * sends a wrong sum, and present false none at all. summed, when not NULL:
 * the bytes the trailer's sums are of (a forger's table and sum that agree
 * with each other, not with the chunk).
 */
static int send_chunk_of(uint64_t tag, uint64_t xid, uint32_t chunk, const uint8_t *bytes,
                         size_t len, uint64_t sum_delta, bool present, uint8_t word_flip,
                         const uint8_t *summed)
{
    static uint8_t msg[4 * CHUNK + 256];    /* may outlive a timeout */
    uint64_t blocks[4 * CHUNK / CHECKSUM_BLOCK + 1], seed = checksum_seed(xid, chunk);
    if (len > 4 * CHUNK)
        return -1;
    memcpy(msg, bytes, len);
    uint32_t n = checksum_blocks(len);
    checksum_block_sums(summed != NULL ? summed : bytes, len, seed, 0, n, blocks);
    uint64_t sum = checksum_combine(blocks, n, len, seed) ^ sum_delta;
    checksum_trailer_put(msg, len, blocks, sum, present);
    size_t flag = checksum_message_bytes(len) - 8;      /* the word that says whether a sum is there */
    msg[flag] ^= word_flip;
    return send_bytes(tag, msg, checksum_message_bytes(len));
}

static int send_chunk(uint64_t tag, uint64_t xid, uint32_t chunk, const uint8_t *bytes, size_t len,
                      uint64_t sum_delta, bool present, uint8_t word_flip)
{
    return send_chunk_of(tag, xid, chunk, bytes, len, sum_delta, present, word_flip, NULL);
}

static int send_data(uint64_t tag, uint64_t xid, uint32_t chunk, const uint8_t *bytes, size_t len)
{
    return send_chunk(tag, xid, chunk, bytes, len, 0, true, 0);
}

/* Send without waiting (DATA into a peer that may not want it); the buffer must stay valid. */
static void send_nowait(uint64_t tag, const void *buf, size_t len)
{
    ucp_request_param_t p = { .op_attr_mask = 0 };
    void *req = ucp_tag_send_nbx(g.ep, buf, len, tag, &p);
    if (UCS_PTR_IS_PTR(req))
        ucp_request_free(req);
}

/* Receive the message with this tag within wait ms: its length, -1 on timeout or error. */
static long recv_bytes(uint64_t tag, void *buf, size_t len, double wait)
{
    struct req_state rs = { 0 };
    /* No immediate completion: UCX 1.13 then tells neither the length nor calls back. */
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
        .cb.recv = on_recv,
        .user_data = &rs,
    };
    void *req = ucp_tag_recv_nbx(g.worker, buf, len, tag, UINT64_MAX, &p);
    ucs_status_t st = req_wait(req, &rs, true, wait);
    return st == UCS_OK ? (long)rs.length : -1;
}

/* How many messages of any tag reach our worker within ms: each is taken and dropped. */
static int arrivals(double ms)
{
    double end = now_ms() + ms;
    int n = 0;
    ucp_tag_recv_info_t info;
    static uint8_t sink[1 << 16];

    while (now_ms() < end) {
        ucp_tag_message_h msg = ucp_tag_probe_nb(g.worker, 0, 0, 1, &info);
        if (msg == NULL) {
            if (ucp_worker_progress(g.worker) == 0)
                usleep(200);
            continue;
        }
        struct req_state rs = { 0 };
        ucp_request_param_t p = {
            .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
            .cb.recv = on_recv,
            .user_data = &rs,
        };
        void *req = ucp_tag_msg_recv_nbx(g.worker, sink, sizeof(sink), msg, &p);
        req_wait(req, &rs, false, 1000);
        n++;
    }
    return n;
}

static int ucx_setup(void)
{
    ucp_config_t *cfg;
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES,
        .features = UCP_FEATURE_TAG,
    };
    ucp_worker_params_t wp = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE,
    };

    if (ucp_config_read(NULL, NULL, &cfg) != UCS_OK)
        return -1;
    ucs_status_t st = ucp_init(&params, cfg, &g.ctx);
    ucp_config_release(cfg);
    if (st != UCS_OK || ucp_worker_create(g.ctx, &wp, &g.worker) != UCS_OK ||
        ucp_worker_get_address(g.worker, &g.addr, &g.addr_len) != UCS_OK)
        return -1;
    /* Ours goes out as a daemon's would, with no data lanes: everything then comes to g.worker. */
    const void *mine[1] = { g.addr };
    size_t mine_len[1] = { g.addr_len };
    g.packed_len = wireaddr_size(1, mine_len);
    if ((g.packed = malloc(g.packed_len)) == NULL)
        return -1;
    wireaddr_pack(g.packed, 1, mine, mine_len);
    /* The victim's loop worker: the first of its address. */
    const uint8_t *theirs[1 + WIREADDR_MAX_LANES];
    size_t theirs_len[1 + WIREADDR_MAX_LANES];
    unsigned workers;
    if (wireaddr_unpack(g.victim_addr, g.victim_addr_len, theirs, theirs_len, &workers) != B10_OK)
        return -1;
    g.lane_addr = workers > 1 ? theirs[1] : NULL;
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = (const ucp_address_t *)theirs[0],
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = { .cb = on_ep_error, .arg = NULL },
    };
    return ucp_ep_create(g.worker, &ep, &g.ep) == UCS_OK ? 0 : -1;
}

/* Force-close an endpoint, waiting for it at most 2 s. */
static void ep_close(ucp_ep_h ep)
{
    ucp_request_param_t p = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                              .flags = UCP_EP_CLOSE_FLAG_FORCE };
    void *req = ucp_ep_close_nbx(ep, &p);
    double end = now_ms() + 2000;
    if (UCS_PTR_IS_PTR(req)) {
        while (ucp_request_check_status(req) == UCS_INPROGRESS && now_ms() < end)
            ucp_worker_progress(g.worker);
        ucp_request_free(req);
    }
}

static void ucx_teardown(void)
{
    if (g.ep != NULL)
        ep_close(g.ep);
    free(g.packed);
    if (g.addr != NULL)
        ucp_worker_release_address(g.worker, g.addr);
    if (g.worker != NULL)
        ucp_worker_destroy(g.worker);
    if (g.ctx != NULL)
        ucp_cleanup(g.ctx);
}

/* ---------------------------------------------------------------- envelopes */

/* A message's bytes, packed at an envelope's payload offset: the caller seals and frees. */
static uint8_t *pack_enveloped(const B10__Peer__Msg *m, size_t *payload_len_p)
{
    size_t len = b10__peer__msg__get_packed_size(m);
    uint8_t *buf = malloc(AUTH_OVERHEAD + len);
    if (buf != NULL)
        b10__peer__msg__pack(m, buf + AUTH_HEADER_BYTES);
    *payload_len_p = len;
    return buf;
}

/* Send buf (freed), keeping a copy in *copy_p when asked (a capture to replay). */
static int send_kept(uint64_t tag, uint8_t *buf, size_t len, uint8_t **copy_p, size_t *copy_len_p)
{
    int rc = send_bytes(tag, buf, len);
    if (copy_p != NULL) {
        *copy_p = buf;
        *copy_len_p = len;
    } else {
        free(buf);
    }
    return rc;
}

/* A message sealed under link keys l (our side of the link: its opener): the envelope, or NULL. */
static uint8_t *build_link(struct auth_link *l, const B10__Peer__Msg *m, size_t *len_p)
{
    size_t len;
    uint8_t *buf = pack_enveloped(m, &len);
    if (buf == NULL || auth_link_seal(l, buf, len) != 0) {
        free(buf);
        return NULL;
    }
    *len_p = AUTH_OVERHEAD + len;
    return buf;
}

/* The same, sent on tag. */
static int send_link(struct auth_link *l, uint64_t tag, const B10__Peer__Msg *m, uint8_t **copy_p,
                     size_t *copy_len_p)
{
    size_t len;
    uint8_t *buf = build_link(l, m, &len);
    return buf != NULL ? send_kept(tag, buf, len, copy_p, copy_len_p) : -1;
}

/* A handshake message under key k, as sender claiming to be from. */
static int send_static(const struct auth_key *k, enum auth_kind kind, uint64_t from, uint64_t tag,
                       const B10__Peer__Msg *m, uint8_t **copy_p, size_t *copy_len_p)
{
    size_t len;
    uint8_t *buf = pack_enveloped(m, &len);
    if (buf == NULL)
        return -1;
    auth_seal(k, kind, from, g.victim_id, buf, len);
    return send_kept(tag, buf, AUTH_OVERHEAD + len, copy_p, copy_len_p);
}

/* Wait for a message on tag that opens under link l: decoded, or NULL. */
static B10__Peer__Msg *recv_link(struct auth_link *l, uint64_t tag, double wait)
{
    uint8_t buf[4096];
    const uint8_t *payload;
    size_t payload_len;
    long n = recv_bytes(tag, buf, sizeof(buf), wait);

    if (n < 0 || auth_link_open(l, buf, (size_t)n, &payload, &payload_len) != AUTH_OK)
        return NULL;
    return b10__peer__msg__unpack(NULL, payload_len, payload);
}

/* ---------------------------------------------------------------- links */

static uint64_t new_gen(void)
{
    return (g.self_id << 32) | ++g.next_gen;
}

/* A link as we open it. */
struct rlink {
    struct auth_link a;             /* its keys, ours to seal and open with */
    uint64_t gen;
    uint8_t nonce[AUTH_NONCE_BYTES];
    uint8_t *hello;                 /* the HELLO as sent, to replay */
    size_t hello_len;
};

static void rlink_free(struct rlink *l)
{
    free(l->hello);
    l->hello = NULL;
}

static void make_hello(B10__Peer__Hello *h, uint64_t from, const char *name, uint64_t gen,
                       uint8_t *nonce)
{
    b10__peer__hello__init(h);
    h->version = B10_PEER_PROTOCOL_VERSION;
    h->daemon_id = from;
    h->to_daemon_id = g.victim_id;
    h->gen = gen;
    h->nonce = (ProtobufCBinaryData){ AUTH_NONCE_BYTES, nonce };
    h->worker_address = (ProtobufCBinaryData){ g.packed_len, g.packed };
    h->name = (char *)name;
    h->incarnation = g.self_incarnation;
    if (g.cert != NULL) {
        /* Proved by the node key held, whatever name it claims: the victim must check the name. */
        static ProtobufCBinaryData certs[NODEID_MAX_CERTS];
        static uint8_t sig[NODEID_MAX_SIG];
        uint8_t transcript[HELLO_TRANSCRIPT_BYTES];
        struct nodeid_chain chain;
        size_t sig_length = 0;
        auth_kx_keypair(g.kx, g.kx_secret);
        struct hello_transcript t = {
            .sender_id = from, .receiver_id = g.victim_id, .gen = gen,
            .incarnation = g.self_incarnation, .name = name, .opener_nonce = nonce,
            .opener_kx = g.kx, .address = g.packed, .address_length = g.packed_len,
        };
        hello_transcript(&t, transcript);
        if (nodeid_sign(g.cert, transcript, sizeof(transcript), sig, &sig_length) != B10_OK)
            abort();
        nodeid_chain_of(g.cert, &chain);
        for (unsigned i = 0; i < chain.count; i++)
            certs[i] = (ProtobufCBinaryData){ chain.length[i], (uint8_t *)chain.der[i] };
        h->n_node_chain = chain.count;
        h->node_chain = certs;
        h->kx_public = (ProtobufCBinaryData){ AUTH_KX_BYTES, g.kx };
        h->node_sig = (ProtobufCBinaryData){ sig_length, sig };
    }
}

/* The HELLO_ACK the victim sends for gen and nonce, opened under key k; status, or -1 for none. */
static int await_ack(const struct auth_key *k, uint64_t gen, const uint8_t *nonce, double wait,
                     struct hello_ack *ack_p)
{
    struct tag_link t;
    uint8_t buf[HELLO_ACK_MAX_BYTES];
    const uint8_t *payload;
    size_t payload_len;
    struct auth_header hdr;
    char detail[200];

    auth_ack_tags(k, g.self_id, g.victim_id, gen, nonce, &t);
    long n = recv_bytes(tags_derive(&t, 0, 0, TAG_KIND_HELLO_ACK), buf, sizeof(buf), wait);
    if (n < 0 || auth_open(k, AUTH_KIND_HELLO_ACK, buf, (size_t)n, &payload, &payload_len) != AUTH_OK ||
        auth_peek(buf, (size_t)n, &hdr) != 0 ||
        hello_decode_ack(payload, payload_len, &hdr, ack_p, detail, sizeof(detail)) != B10_OK)
        return -1;
    return (int)ack_p->status;
}

/* Send a fresh HELLO under the cluster key (kept for replay); its ACK's nonce in ack_p. */
static int hello_round(struct rlink *l, const char *c, struct hello_ack *ack_p)
{
    B10__Peer__Hello h;
    B10__Peer__Msg m = B10__PEER__MSG__INIT;

    memset(l, 0, sizeof(*l));
    l->gen = new_gen();
    auth_random(l->nonce, sizeof(l->nonce));
    make_hello(&h, g.self_id, g.self_name, l->gen, l->nonce);
    m.body_case = B10__PEER__MSG__BODY_HELLO;
    m.hello = &h;
    if (send_static(&g.key, AUTH_KIND_HELLO, g.self_id, TAG_HELLO, &m, &l->hello, &l->hello_len) != 0)
        return fail(c, "sending HELLO failed");
    int st = await_ack(&g.key, l->gen, l->nonce, timeout_ms, ack_p);
    if (st != B10_OK)
        return fail(c, "HELLO for generation %016" PRIx64 " got %s", l->gen,
                    st < 0 ? "no HELLO_ACK that opens" : b10_status_name((b10_status_t)st));
    if (!auth_equal(ack_p->opener_nonce, l->nonce, AUTH_NONCE_BYTES))
        return fail(c, "HELLO_ACK echoes another nonce");
    return 0;
}

static void confirm(struct rlink *l)
{
    B10__Peer__Confirm cf = B10__PEER__CONFIRM__INIT;
    B10__Peer__Msg m = B10__PEER__MSG__INIT;
    cf.gen = l->gen;
    m.body_case = B10__PEER__MSG__BODY_CONFIRM;
    m.confirm = &cf;
    send_link(&l->a, tags_derive(&l->a.tags, 0, 0, TAG_KIND_CONTROL), &m, NULL, NULL);
}

/* Open a link with a fresh generation: HELLO, HELLO_ACK, keys, CONFIRM. */
static int link_open(struct rlink *l, const char *c)
{
    struct hello_ack ack;

    if (hello_round(l, c, &ack) != 0)
        return 1;
    if (g.cert != NULL) {
        uint8_t shared[AUTH_KX_BYTES];
        if (!ack.proof.present ||
            auth_kx_shared(g.kx_secret, g.kx, ack.proof.kx_public, ack.proof.kx_public,
                           shared) != B10_OK)
            return fail(c, "the HELLO_ACK to a certified HELLO carries no X25519 key");
        auth_link_derive_kx(&g.key, g.self_id, g.victim_id, l->gen, l->nonce, ack.nonce, shared,
                            true, &l->a);
    } else {
        auth_link_derive(&g.key, g.self_id, g.victim_id, l->gen, l->nonce, ack.nonce, true, &l->a);
    }
    confirm(l);
    return 0;
}

/* A link of made-up keys: what a stranger would have to guess. */
static void link_made_up(struct rlink *l, uint64_t from)
{
    uint8_t n1[AUTH_NONCE_BYTES], n2[AUTH_NONCE_BYTES];

    memset(l, 0, sizeof(*l));
    l->gen = rnd64();
    auth_random(n1, sizeof(n1));
    auth_random(n2, sizeof(n2));
    auth_link_derive(&g.wrong, from, g.victim_id, l->gen, n1, n2, true, &l->a);
}

struct piece {
    uint64_t off;   /* in our region, or an absolute address when abs */
    uint64_t len;
    bool abs;
};

/* A CONTROL with its tables and limits, for send_control. */
struct ctl {
    uint64_t xid;
    uint64_t gen;                   /* 0: the link's */
    const char *dst;                /* NULL: our own agent */
    const uint32_t *chunks;
    uint32_t nchunks;
    const struct piece *pieces;
    uint32_t npieces;
    uint64_t total;                 /* 0: the sum */
    uint32_t deadline_ms;           /* 0: 3000 */
    const uint8_t *sync;
    size_t sync_len;
    const uint8_t *tables[2];       /* chunk and piece tables packed already (a flood's), or NULL */
    /* The compact form (plan.h): slots of slot_len bytes from our region's byte slot_off. */
    const uint32_t *slots;
    uint32_t nslots;
    size_t slots_bytes;             /* 0: 4 a slot */
    uint64_t slot_len, slot_off;
};

/* A CONTROL sealed under l: the envelope, or NULL. */
static uint8_t *build_control(struct rlink *l, const struct ctl *c, size_t *len_p)
{
    uint8_t *cp = malloc(c->tables[0] ? 1 : 4 * (size_t)c->nchunks + 1);
    uint8_t *ps = malloc(c->tables[1] ? 1 : SPAN_BYTES * (size_t)c->npieces + 1);
    /* Room for a table that claims more bytes than its slots (the bytes past them zero). */
    size_t slots_bytes = c->slots_bytes > 4 * (size_t)c->nslots ? c->slots_bytes : 4 * (size_t)c->nslots;
    uint8_t *ss = calloc(1, slots_bytes + 1);
    uint64_t total = 0;
    B10__Peer__Control ctl = B10__PEER__CONTROL__INIT;
    B10__Peer__Msg m = B10__PEER__MSG__INIT;
    uint8_t *out = NULL;

    if (cp == NULL || ps == NULL || ss == NULL)
        goto out;
    for (uint32_t i = 0; i < c->nslots; i++) {
        frame_put_u32(ss + 4 * i, c->slots[i]);
        total += c->slot_len;
    }
    for (uint32_t i = 0; i < c->nchunks && c->tables[0] == NULL; i++)
        frame_put_u32(cp + 4 * i, c->chunks[i]);
    for (uint32_t i = 0; i < c->npieces && c->tables[1] == NULL; i++) {
        const struct piece *p = &c->pieces[i];
        uint64_t a = p->abs ? p->off : (uint64_t)(uintptr_t)g.reg + p->off;
        frame_put_u64(ps + SPAN_BYTES * i, a);
        frame_put_u64(ps + SPAN_BYTES * i + 8, p->len);
        total += p->len;
    }
    ctl.xfer_id = c->xid;
    ctl.gen = c->gen ? c->gen : l->gen;
    ctl.dst_agent = (char *)(c->dst ? c->dst : g.agent);
    ctl.src_agent = "rogue-src";
    ctl.deadline_ms = c->deadline_ms ? c->deadline_ms : 3000;
    ctl.nchunks = c->nchunks;
    ctl.total_bytes = c->total ? c->total : total;
    if (c->tables[1] != NULL)
        total = c->total;
    ctl.chunk_pieces = (ProtobufCBinaryData){ 4 * (size_t)c->nchunks,
                                              c->tables[0] ? (uint8_t *)c->tables[0] : cp };
    ctl.pieces = (ProtobufCBinaryData){ SPAN_BYTES * (size_t)c->npieces,
                                        c->tables[1] ? (uint8_t *)c->tables[1] : ps };
    ctl.sync_msg = (ProtobufCBinaryData){ c->sync_len, (uint8_t *)c->sync };
    ctl.slot_base = (uint64_t)(uintptr_t)g.reg + c->slot_off;
    ctl.slot_len = c->slot_len;
    ctl.slots = (ProtobufCBinaryData){ c->slots_bytes ? c->slots_bytes : 4 * (size_t)c->nslots, ss };
    m.body_case = B10__PEER__MSG__BODY_CONTROL;
    m.control = &ctl;
    out = build_link(&l->a, &m, len_p);
out:
    free(cp);
    free(ps);
    free(ss);
    return out;
}

static int send_control(struct rlink *l, const struct ctl *c, uint8_t **copy_p, size_t *copy_len_p)
{
    size_t len;
    uint8_t *buf = build_control(l, c, &len);
    if (buf == NULL)
        return -1;
    return send_kept(tags_derive(&l->a.tags, 0, 0, TAG_KIND_CONTROL), buf, len, copy_p, copy_len_p);
}

/* READY (0), RESULT with its status (>0: status + 1000), or nothing within wait (-1). */
static int await_ready_or_result(struct rlink *l, uint64_t xid, double wait, char *detail,
                                 size_t detail_len)
{
    uint8_t rbuf[1024], tbuf[1024];
    struct req_state rr = { 0 }, rt = { 0 };
    ucp_request_param_t pr = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                                               UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
                               .cb.recv = on_recv, .user_data = &rr };
    ucp_request_param_t pt = pr;
    pt.user_data = &rt;
    void *qr = ucp_tag_recv_nbx(g.worker, rbuf, sizeof(rbuf), tags_derive(&l->a.tags, xid, 0, TAG_KIND_READY),
                                UINT64_MAX, &pr);
    void *qt = ucp_tag_recv_nbx(g.worker, tbuf, sizeof(tbuf), tags_derive(&l->a.tags, xid, 0, TAG_KIND_RESULT),
                                UINT64_MAX, &pt);
    double end = now_ms() + wait;
    const uint8_t *payload;
    size_t payload_len;
    int out = -1;

    if (detail_len)
        detail[0] = '\0';
    while (!rr.done && !rt.done && now_ms() < end)
        if (ucp_worker_progress(g.worker) == 0)
            usleep(100);
    if (rt.done && rt.status == UCS_OK &&
        auth_link_open(&l->a, tbuf, rt.length, &payload, &payload_len) == AUTH_OK) {
        B10__Peer__Msg *m = b10__peer__msg__unpack(NULL, payload_len, payload);
        if (m != NULL && m->body_case == B10__PEER__MSG__BODY_RESULT) {
            out = 1000 + (int)m->result->status;
            snprintf(detail, detail_len, "%s", m->result->detail);
        }
        if (m != NULL)
            b10__peer__msg__free_unpacked(m, NULL);
    } else if (rr.done && rr.status == UCS_OK &&
               auth_link_open(&l->a, rbuf, rr.length, &payload, &payload_len) == AUTH_OK) {
        out = 0;
    }
    void *qs[2] = { qr, qt };
    struct req_state *rs[2] = { &rr, &rt };
    for (int i = 0; i < 2; i++) {
        if (!UCS_PTR_IS_PTR(qs[i]))
            continue;
        if (!rs[i]->done)
            ucp_request_cancel(g.worker, qs[i]);
        while (!rs[i]->done)
            ucp_worker_progress(g.worker);
        ucp_request_free(qs[i]);
    }
    return out;
}

/* The RESULT of a transfer or ask: its status, or -1. */
static int await_result(struct rlink *l, uint64_t xid, double wait, char *detail, size_t detail_len)
{
    B10__Peer__Msg *m = recv_link(&l->a, tags_derive(&l->a.tags, xid, 0, TAG_KIND_RESULT), wait);
    int st = -1;

    if (detail_len)
        detail[0] = '\0';
    if (m != NULL && m->body_case == B10__PEER__MSG__BODY_RESULT) {
        st = (int)m->result->status;
        snprintf(detail, detail_len, "%s", m->result->detail);
    }
    if (m != NULL)
        b10__peer__msg__free_unpacked(m, NULL);
    return st;
}

static uint64_t new_xid(void)
{
    return (g.self_id << 32) | ++g.next_xfer;
}

/* Does the region hold exactly what it must? */
static int region_check(const char *c, const char *when)
{
    for (uint32_t i = 0; i < REG_BYTES; i++)
        if (g.reg[i] != g.want[i])
            return fail(c, "%s: region byte %u is 0x%02x, must be 0x%02x", when, i, g.reg[i],
                        g.want[i]);
    return 0;
}

/* The victim still answers its rank, and delivered it no notice. */
static int victim_serves(const char *c, const char *when, size_t notices_allowed)
{
    b10_notification_t *list = NULL;
    size_t n = 0;

    b10_status_t st = b10_agent_invalidate(g.conn, "no-such-agent");
    if (st != B10_ERR_NOT_FOUND)
        return fail(c, "%s: the victim answered its rank %s, not B10_ERR_NOT_FOUND", when,
                    b10_status_name(st));
    if ((st = b10_agent_notifications(g.conn, &list, &n)) != B10_OK)
        return fail(c, "%s: b10_agent_notifications: %s", when, b10_status_name(st));
    b10_notifications_free(list, n);
    if (n > notices_allowed)
        return fail(c, "%s: %zu notices were delivered to the rank", when, n);
    return 0;
}

static const char *sname(int st)
{
    return b10_status_name((b10_status_t)st);
}

/*
 * A flood begins: the runner starts its measured rounds on this line. After
 * a flood the victim owes this peer nothing (its share may be spent): no
 * good-after transfer then.
 */
static bool flooded;

static void started(const char *c)
{
    flooded = true;
    printf("info %s: started\n", c);
    fflush(stdout);
}

/* ---------------------------------------------------------------- cases with the key */

static struct rlink L;          /* the current link */
static bool L_up;

static int ensure_link(const char *c)
{
    if (!g.have_key)
        return fail(c, "this case needs the cluster key (-k)");
    if (L_up)
        return 0;
    rlink_free(&L);
    if (link_open(&L, c) != 0)
        return 1;
    L_up = true;
    return 0;
}

static uint64_t key_seq = 100;
static uint8_t *last_control;       /* the CONTROL of the last good transfer, as sent */
static size_t last_control_len;
static uint64_t last_good_xid;

/* A correct transfer: two chunks of pieces in our region; it must land exactly. */
static int case_good(const char *c)
{
    static uint8_t data[2][CHUNK];
    uint64_t key = ++key_seq, xid = new_xid();
    uint64_t base = (key % 32) * 16384;
    struct piece pc[] = { { base, 4096, false }, { base + 8192, 4096, false },
                          { base + 4096, 4096, false }, { base + 12288, 4096, false } };
    uint32_t chunks[] = { 2, 2 };
    char detail[256];

    if (ensure_link(c) != 0)
        return 1;
    free(last_control);
    last_control = NULL;
    struct ctl ctl = { .xid = xid, .chunks = chunks, .nchunks = 2, .pieces = pc, .npieces = 4 };
    if (send_control(&L, &ctl, &last_control, &last_control_len) != 0)
        return fail(c, "sending CONTROL failed");
    int r = await_ready_or_result(&L, xid, timeout_ms, detail, sizeof(detail));
    if (r != 0)
        return fail(c, "a correct CONTROL got %s (%s)", r < 0 ? "no answer" : sname(r - 1000), detail);
    /* Chunk 0 is pieces 0 and 1, chunk 1 pieces 2 and 3, each in order. */
    for (uint32_t i = 0; i < CHUNK; i++) {
        data[0][i] = pat(key, i);
        data[1][i] = pat(key, CHUNK + i);
    }
    memcpy(g.want + base, data[0], 4096);
    memcpy(g.want + base + 8192, data[0] + 4096, 4096);
    memcpy(g.want + base + 4096, data[1], 4096);
    memcpy(g.want + base + 12288, data[1] + 4096, 4096);
    send_data(tags_derive(&L.a.tags, xid, 0, TAG_KIND_DATA), xid, 0, data[0], CHUNK);
    send_data(tags_derive(&L.a.tags, xid, 1, TAG_KIND_DATA), xid, 1, data[1], CHUNK);
    int st = await_result(&L, xid, timeout_ms, detail, sizeof(detail));
    if (st != 0)
        return fail(c, "RESULT %s (%s), expected OK", st < 0 ? "missing" : sname(st), detail);
    if (region_check(c, "after a correct transfer") != 0)
        return 1;
    last_good_xid = xid;
    return pass(c, "a correct transfer of 2 chunks landed exactly (RESULT OK)");
}

/* Start a transfer of one CHUNK-byte chunk into a fresh area; returns its id, 0 on failure. */
/* A transfer of one chunk of len bytes into the region, announced and READY; 0 on failure. */
static uint64_t start_len(const char *c, struct rlink *l, uint64_t *off_p, uint32_t len)
{
    uint64_t xid = new_xid(), off = 512 * 1024 + (xid % 16) * 16384;
    struct piece pc[] = { { off, len, false } };
    uint32_t chunks[] = { 1 };
    char detail[256];
    struct ctl ctl = { .xid = xid, .chunks = chunks, .nchunks = 1, .pieces = pc, .npieces = 1 };

    if (send_control(l, &ctl, NULL, NULL) != 0) {
        fail(c, "sending CONTROL failed");
        return 0;
    }
    int r = await_ready_or_result(l, xid, timeout_ms, detail, sizeof(detail));
    if (r != 0) {
        fail(c, "CONTROL got %s (%s), expected READY", r < 0 ? "no answer" : sname(r - 1000), detail);
        return 0;
    }
    *off_p = off;
    return xid;
}

static uint64_t start_one(const char *c, struct rlink *l, uint64_t *off_p)
{
    return start_len(c, l, off_p, CHUNK);
}

static uint8_t junk[4 * CHUNK];

/*
 * CONTROL's compact form (protocol 12): a correct one lands exactly, with
 * the slots of a run merged again on the way; slots that lie are refused
 * and write nothing.
 */
static int case_slots(const char *c)
{
    static uint8_t data[2][CHUNK];
    uint64_t key = ++key_seq, xid = new_xid(), base = 768 * 1024 + (key % 8) * 16384;
    /* Chunk 0: slots 0 and 2; chunk 1: slots 1 and 3... as 4 KiB units from base. */
    const uint32_t slots[] = { 0, 2, 1, 3 }, chunks[] = { 2, 2 };
    char detail[256];
    int bad = 0;

    if (ensure_link(c) != 0)
        return 1;
    struct ctl ctl = { .xid = xid, .chunks = chunks, .nchunks = 2, .slots = slots, .nslots = 4,
                       .slot_len = 4096, .slot_off = base };
    if (send_control(&L, &ctl, NULL, NULL) != 0)
        return fail(c, "sending CONTROL failed");
    int r = await_ready_or_result(&L, xid, timeout_ms, detail, sizeof(detail));
    if (r != 0)
        return fail(c, "a correct CONTROL of slots got %s (%s)", r < 0 ? "no answer" : sname(r - 1000),
                    detail);
    for (uint32_t i = 0; i < CHUNK; i++) {
        data[0][i] = pat(key, i);
        data[1][i] = pat(key, CHUNK + i);
    }
    memcpy(g.want + base, data[0], 4096);
    memcpy(g.want + base + 8192, data[0] + 4096, 4096);
    memcpy(g.want + base + 4096, data[1], 4096);
    memcpy(g.want + base + 12288, data[1] + 4096, 4096);
    send_data(tags_derive(&L.a.tags, xid, 0, TAG_KIND_DATA), xid, 0, data[0], CHUNK);
    send_data(tags_derive(&L.a.tags, xid, 1, TAG_KIND_DATA), xid, 1, data[1], CHUNK);
    int st = await_result(&L, xid, timeout_ms, detail, sizeof(detail));
    if (st != 0)
        return fail(c, "RESULT %s (%s), expected OK", st < 0 ? "missing" : sname(st), detail);
    if (region_check(c, "after a correct transfer of slots") != 0)
        return 1;
    pass(c, "a correct transfer of 2 chunks as slots landed exactly (RESULT OK)");

    const struct piece whole[] = { { base, 4096, false } };
    const uint32_t one[] = { 1 }, far[] = { REG_BYTES / 4096 + 4 }, near[] = { 2 };
    struct {
        const char *what;
        struct ctl ctl;
    } lies[] = {
        /* Each form alone would be admitted: only having both is the lie. */
        { "pieces both whole and as slots",
          { .chunks = one, .nchunks = 1, .pieces = whole, .npieces = 1, .slots = near, .nslots = 1,
            .slot_len = 4096, .slot_off = base, .total = 4096 } },
        { "slots of no length beside whole pieces",
          { .chunks = one, .nchunks = 1, .pieces = whole, .npieces = 1, .slots = near, .nslots = 1,
            .slot_off = base, .total = 4096 } },
        { "a slot table of 6 bytes", { .chunks = one, .nchunks = 1, .slots = near, .nslots = 1,
                                       .slots_bytes = 6, .slot_len = 4096, .slot_off = base } },
        { "a slot past the region", { .chunks = one, .nchunks = 1, .slots = far, .nslots = 1,
                                      .slot_len = 4096, .slot_off = 0 } },
        { "a unit larger than a staging view", { .chunks = one, .nchunks = 1, .slots = near,
                                                 .nslots = 1, .slot_len = (uint64_t)1 << 40,
                                                 .slot_off = base } },
    };
    for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
        struct ctl *lc = &lies[i].ctl;
        lc->xid = new_xid();
        send_control(&L, lc, NULL, NULL);
        r = await_ready_or_result(&L, lc->xid, timeout_ms, detail, sizeof(detail));
        if (r == 0) {
            memset(junk, 0x13, sizeof(junk));
            send_data(tags_derive(&L.a.tags, lc->xid, 0, TAG_KIND_DATA), lc->xid, 0, junk, 4096);
            bad |= fail(c, "%s: admitted", lies[i].what);
        } else if (r < 0) {
            bad |= fail(c, "%s: no answer", lies[i].what);
        } else {
            pass(c, "%s: refused, %s: %s", lies[i].what, sname(r - 1000), detail);
        }
    }
    progress_for(200);
    bad |= region_check(c, "after slots that lie");
    return bad;
}

static int case_size(const char *c, size_t len, const char *what)
{
    uint64_t off, xid;
    char detail[256];

    if (ensure_link(c) != 0 || (xid = start_one(c, &L, &off)) == 0)
        return 1;
    memset(junk, 0x5a, sizeof(junk));
    send_bytes(tags_derive(&L.a.tags, xid, 0, TAG_KIND_DATA), junk, len);
    int st = await_result(&L, xid, timeout_ms, detail, sizeof(detail));
    progress_for(200);
    if (region_check(c, what) != 0)
        return 1;
    if (st != B10_ERR_PEER_PROTOCOL)
        return fail(c, "%s: RESULT %s (%s), expected B10_ERR_PEER_PROTOCOL", what,
                    st < 0 ? "missing" : sname(st), detail);
    return pass(c, "%s: refused with %s (%s), nothing scattered", what, sname(st), detail);
}

static int case_oversize(const char *c)
{
    return case_size(c, 2 * CHUNK, "DATA twice the announced size");
}

static int case_undersize(const char *c)
{
    return case_size(c, CHUNK / 2, "DATA half the announced size");
}

/*
 * DATA whose checksum does not match its bytes, or whose trailer's word is
 * damaged: the transfer fails B10_ERR_DATA_CORRUPT and not a byte lands. The controls: the same chunk
 * with its right sum lands, and so does one that carries no sum (a sender
 * running --verify-data off).
 */
static int case_bad_sum(const char *c)
{
    uint64_t off, xid;
    char detail[256];

    if (ensure_link(c) != 0 || (xid = start_one(c, &L, &off)) == 0)
        return 1;
    for (uint32_t i = 0; i < CHUNK; i++)
        junk[i] = pat(0xc5c5, i);
    static const struct { const char *what; uint64_t sum_delta; uint8_t word_flip; } bad[] = {
        { "DATA with a wrong checksum", 1, 0 },
        { "DATA whose trailer says \"sum\" with one bit flipped", 0, 0x10 },
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        if (k > 0 && (xid = start_one(c, &L, &off)) == 0)
            return 1;
        send_chunk(tags_derive(&L.a.tags, xid, 0, TAG_KIND_DATA), xid, 0, junk, CHUNK,
                   bad[k].sum_delta, true, bad[k].word_flip);
        int st = await_result(&L, xid, timeout_ms, detail, sizeof(detail));
        progress_for(200);
        if (region_check(c, bad[k].what) != 0)
            return 1;
        if (st != B10_ERR_DATA_CORRUPT)
            return fail(c, "%s: RESULT %s (%s), expected B10_ERR_DATA_CORRUPT", bad[k].what,
                        st < 0 ? "missing" : sname(st), detail);
        pass(c, "%s: RESULT %s (%s), nothing landed", bad[k].what, sname(st), detail);
    }
    int st;

    static const struct { const char *what; bool present; } ok[] = {
        { "the same chunk with its right checksum", true },
        { "a chunk that carries no checksum", false },
    };
    for (size_t k = 0; k < sizeof(ok) / sizeof(ok[0]); k++) {
        if ((xid = start_one(c, &L, &off)) == 0)
            return 1;
        for (uint32_t i = 0; i < CHUNK; i++)
            junk[i] = pat(0xc5c6 + k, i);
        memcpy(g.want + off, junk, CHUNK);
        send_chunk(tags_derive(&L.a.tags, xid, 0, TAG_KIND_DATA), xid, 0, junk, CHUNK, 0,
                   ok[k].present, 0);
        st = await_result(&L, xid, timeout_ms, detail, sizeof(detail));
        if (st != 0)
            return fail(c, "%s: RESULT %s (%s), expected OK", ok[k].what,
                        st < 0 ? "missing" : sname(st), detail);
        if (region_check(c, ok[k].what) != 0)
            return 1;
        pass(c, "%s landed exactly", ok[k].what);
    }
    return 0;
}

/*
 * A chunk of two blocks whose trailer's table and sum agree with each other
 * but are of other bytes (one flipped): B10_ERR_DATA_CORRUPT, nothing lands.
 * The control: with the sums of its own bytes it lands. (Its own case, last:
 * the failed transfer's view stays in quarantine, out of the peer's share.)
 */
static int case_bad_table(const char *c)
{
    uint64_t off, xid;
    char detail[256];
    int st;
    static uint8_t other[4 * CHUNK];

    if (ensure_link(c) != 0)
        return 1;
    for (int own = 0; own < 2; own++) {
        if ((xid = start_len(c, &L, &off, 4 * CHUNK)) == 0)
            return 1;
        for (uint32_t i = 0; i < 4 * CHUNK; i++)
            junk[i] = pat(0xc5d0 + own, i);
        memcpy(other, junk, sizeof(other));
        other[3 * CHUNK + 5] ^= 0x40;       /* in the second block */
        if (own)
            memcpy(g.want + off, junk, 4 * CHUNK);
        send_chunk_of(tags_derive(&L.a.tags, xid, 0, TAG_KIND_DATA), xid, 0, junk, 4 * CHUNK, 0,
                      true, 0, own ? NULL : other);
        st = await_result(&L, xid, timeout_ms, detail, sizeof(detail));
        progress_for(200);
        if (region_check(c, own ? "a two-block chunk with its own sums" : "a forged table") != 0)
            return 1;
        if (st != (own ? 0 : B10_ERR_DATA_CORRUPT))
            return fail(c, "a two-block chunk with the sums of %s bytes: RESULT %s (%s)",
                        own ? "its own" : "other", st < 0 ? "missing" : sname(st), detail);
        pass(c, "a two-block chunk with the sums of %s bytes: %s", own ? "its own" : "other",
             own ? "landed exactly" : "B10_ERR_DATA_CORRUPT, nothing landed");
    }
    return 0;
}

/* DATA for transfers that were never announced, on derived and random tags. */
static int case_unknown(const char *c)
{
    if (ensure_link(c) != 0)
        return 1;
    memset(junk, 0x66, sizeof(junk));
    for (int i = 0; i < 8; i++) {
        send_nowait(tags_derive(&L.a.tags, new_xid(), 0, TAG_KIND_DATA), junk, CHUNK);
        send_nowait(rnd64() & ~TAG_CLASS_CONTROL, junk, 64);
    }
    progress_for(500);
    if (region_check(c, "after DATA for unknown transfers") != 0)
        return 1;
    return pass(c, "16 DATA messages for unknown transfers changed nothing");
}

/* Destination pieces outside our registration, and for ranks that do not exist. */
static int case_oob(const char *c)
{
    struct {
        const char *what;
        struct piece pc;
        const char *dst;
        int want;
    } tries[] = {
        { "a piece running past the end of the region", { REG_BYTES - 100, 4096, false }, NULL,
          B10_ERR_REMOTE_REJECTED },
        { "a piece before the region", { (uint64_t)-4096, 8192, false }, NULL, B10_ERR_REMOTE_REJECTED },
        { "a piece at address 4096", { 4096, 4096, true }, NULL, B10_ERR_REMOTE_REJECTED },
        { "a rank that does not exist", { 0, 4096, false }, "no-such-rank", B10_ERR_UNKNOWN_AGENT },
    };
    int bad = 0;

    if (ensure_link(c) != 0)
        return 1;
    for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
        uint64_t xid = new_xid();
        uint32_t chunks[] = { 1 };
        char detail[256];
        struct ctl ctl = { .xid = xid, .dst = tries[i].dst, .chunks = chunks, .nchunks = 1,
                           .pieces = &tries[i].pc, .npieces = 1 };

        send_control(&L, &ctl, NULL, NULL);
        int r = await_ready_or_result(&L, xid, timeout_ms, detail, sizeof(detail));
        if (r == 0) {
            /* Admitted: the worst case. Push the bytes so that the check below sees them. */
            memset(junk, 0x77, sizeof(junk));
            send_data(tags_derive(&L.a.tags, xid, 0, TAG_KIND_DATA), xid, 0, junk, tries[i].pc.len);
            bad |= fail(c, "%s: admitted", tries[i].what);
        } else if (r - 1000 != tries[i].want) {
            bad |= fail(c, "%s: got %s (%s), expected %s", tries[i].what,
                        r < 0 ? "no answer" : sname(r - 1000), detail, sname(tries[i].want));
        } else {
            pass(c, "%s: refused, %s: %s", tries[i].what, sname(r - 1000), detail);
        }
    }
    progress_for(200);
    bad |= region_check(c, "after out-of-bounds CONTROLs");
    return bad;
}

/* A CONTROL that names another generation than its link's. */
static int case_badgen(const char *c)
{
    uint64_t xid = new_xid();
    uint32_t chunks[] = { 1 };
    struct piece pc = { 0, 4096, false };
    char detail[256];

    if (ensure_link(c) != 0)
        return 1;
    struct ctl ctl = { .xid = xid, .gen = L.gen ^ 1, .chunks = chunks, .nchunks = 1, .pieces = &pc,
                       .npieces = 1 };
    send_control(&L, &ctl, NULL, NULL);
    int r = await_ready_or_result(&L, xid, timeout_ms, detail, sizeof(detail));
    if (r == 0)
        return fail(c, "a CONTROL naming another generation was admitted");
    if (r - 1000 != B10_ERR_PEER_PROTOCOL)
        return fail(c, "a CONTROL naming another generation got %s (%s)",
                    r < 0 ? "no answer" : sname(r - 1000), detail);
    return pass(c, "a CONTROL naming another generation: %s (%s)", sname(r - 1000), detail);
}

/*
 * A new link retires the old: DATA on the old generation's tags must land
 * nowhere, and a CONTROL on the old link's control tag, under its keys,
 * must not be admitted.
 */
static int case_oldgen(const char *c)
{
    uint64_t off, xid;
    struct rlink old;

    if (ensure_link(c) != 0 || (xid = start_one(c, &L, &off)) == 0)
        return 1;
    old = L;
    L.hello = NULL;
    L_up = false;
    if (ensure_link(c) != 0)
        return 1;
    progress_for(200);   /* the victim sees the new link's CONFIRM, and retires the old */
    memset(junk, 0x99, sizeof(junk));
    send_data(tags_derive(&old.a.tags, xid, 0, TAG_KIND_DATA), xid, 0, junk, CHUNK);
    uint64_t x2 = new_xid();
    uint32_t chunks[] = { 1 };
    struct piece pc = { off, CHUNK, false };
    char detail[256];
    struct ctl ctl = { .xid = x2, .chunks = chunks, .nchunks = 1, .pieces = &pc, .npieces = 1 };
    send_control(&old, &ctl, NULL, NULL);
    int r = await_ready_or_result(&old, x2, 1000, detail, sizeof(detail));
    rlink_free(&old);
    if (r == 0) {
        send_data(tags_derive(&old.a.tags, x2, 0, TAG_KIND_DATA), x2, 0, junk, CHUNK);
        progress_for(200);
        region_check(c, "after DATA on an old generation");
        return fail(c, "a CONTROL on the retired generation was admitted");
    }
    progress_for(300);
    if (region_check(c, "after DATA and CONTROL on a retired generation") != 0)
        return 1;
    return pass(c, "DATA and CONTROL on a retired generation changed nothing (CONTROL: %s)",
                r < 0 ? "no answer" : sname(r - 1000));
}

/*
 * Replays: the DATA of a finished transfer, and the whole of a failed one
 * (its CONTROL again, under a fresh counter, then its DATA): nothing may land.
 */
static int case_replay(const char *c)
{
    uint64_t off, xid;
    char detail[256];
    uint32_t chunks[] = { 1 };

    if (ensure_link(c) != 0 || (xid = start_one(c, &L, &off)) == 0)
        return 1;
    /* Fail it with undersize DATA, then replay CONTROL and a full DATA. */
    memset(junk, 0x42, sizeof(junk));
    send_bytes(tags_derive(&L.a.tags, xid, 0, TAG_KIND_DATA), junk, 100);
    int st = await_result(&L, xid, timeout_ms, detail, sizeof(detail));
    if (st != B10_ERR_PEER_PROTOCOL)
        return fail(c, "setup: undersize DATA got %s", st < 0 ? "no RESULT" : sname(st));
    struct piece pc = { off, CHUNK, false };
    struct ctl ctl = { .xid = xid, .chunks = chunks, .nchunks = 1, .pieces = &pc, .npieces = 1 };
    send_control(&L, &ctl, NULL, NULL);
    int r = await_ready_or_result(&L, xid, timeout_ms, detail, sizeof(detail));
    send_data(tags_derive(&L.a.tags, xid, 0, TAG_KIND_DATA), xid, 0, junk, CHUNK);
    progress_for(300);
    if (region_check(c, "after replaying a failed transfer") != 0)
        return 1;
    if (r == 0)
        return fail(c, "the replayed CONTROL of a failed transfer was admitted");
    pass(c, "replayed CONTROL of a failed transfer: %s (%s); its DATA changed nothing",
         r < 0 ? "no answer" : sname(r - 1000), detail);

    /* A finished transfer's DATA again, with other bytes. */
    if (case_good(c) != 0)
        return 1;
    memset(junk, 0x24, sizeof(junk));
    send_data(tags_derive(&L.a.tags, last_good_xid, 0, TAG_KIND_DATA), last_good_xid, 0, junk, CHUNK);
    send_data(tags_derive(&L.a.tags, last_good_xid, 1, TAG_KIND_DATA), last_good_xid, 1, junk, CHUNK);
    progress_for(300);
    if (region_check(c, "after replaying a finished transfer's DATA") != 0)
        return 1;
    return pass(c, "the DATA of a finished transfer, replayed, changed nothing");
}

/*
 * A valid message replayed byte for byte on its link: the CONTROL of a
 * transfer that landed (whose tags are free again: without the counter,
 * it would be admitted and its DATA would overwrite the KV with stale
 * bytes), and a heartbeat.
 */
static int case_replay_msg(const char *c)
{
    char detail[256];

    if (case_good(c) != 0)
        return 1;
    uint8_t *copy = last_control;
    size_t len = last_control_len;
    last_control = NULL;
    send_bytes(tags_derive(&L.a.tags, 0, 0, TAG_KIND_CONTROL), copy, len);
    free(copy);
    int r = await_ready_or_result(&L, last_good_xid, 1000, detail, sizeof(detail));
    memset(junk, 0x3c, sizeof(junk));
    send_data(tags_derive(&L.a.tags, last_good_xid, 0, TAG_KIND_DATA), last_good_xid, 0, junk, CHUNK);
    send_data(tags_derive(&L.a.tags, last_good_xid, 1, TAG_KIND_DATA), last_good_xid, 1, junk, CHUNK);
    progress_for(300);
    if (region_check(c, "after a replayed CONTROL and new DATA for it") != 0)
        return 1;
    if (r >= 0)
        return fail(c, "a replayed CONTROL was answered %s (%s)", r == 0 ? "READY" : sname(r - 1000),
                    detail);
    /* A heartbeat, answered once: its replay is not. */
    B10__Peer__Heartbeat hb = B10__PEER__HEARTBEAT__INIT;
    B10__Peer__Msg m = B10__PEER__MSG__INIT;
    uint8_t *beat;
    size_t beat_len;
    hb.gen = L.gen;
    hb.nonce = rnd64();
    m.body_case = B10__PEER__MSG__BODY_HEARTBEAT;
    m.heartbeat = &hb;
    send_link(&L.a, TAG_HEARTBEAT, &m, &beat, &beat_len);
    int answers = 0;
    for (int round = 0; round < 2; round++) {
        if (round == 1)
            send_bytes(TAG_HEARTBEAT, beat, beat_len);
        double end = now_ms() + (round == 0 ? timeout_ms : 500);
        while (now_ms() < end) {
            B10__Peer__Msg *a = recv_link(&L.a, TAG_HEARTBEAT, end - now_ms());
            if (a == NULL)
                break;
            bool ours = a->body_case == B10__PEER__MSG__BODY_HEARTBEAT && a->heartbeat->reply &&
                        a->heartbeat->nonce == hb.nonce;
            b10__peer__msg__free_unpacked(a, NULL);
            if (ours) {
                answers++;
                break;
            }
        }
    }
    free(beat);
    if (answers != 1)
        return fail(c, "a heartbeat and its replay got %d answers, not 1", answers);
    if (case_good(c) != 0)
        return fail(c, "the link no longer carries a transfer after the replays");
    return pass(c, "a replayed CONTROL (of a landed transfer) and a replayed heartbeat were "
                   "dropped; their DATA changed nothing; the link still serves");
}

/*
 * Messages on the live link's control tag that do not open under its keys,
 * as someone who watched the tags go by (but has no key) would send them:
 * a byte of a sealed CONTROL flipped, its MAC flipped, one sealed under
 * other keys. Dropped unread and counted: the link and its transfers stand.
 */
static int case_forged(const char *c)
{
    uint64_t control_tag;
    char detail[256];
    struct rlink other;

    if (ensure_link(c) != 0)
        return 1;
    control_tag = tags_derive(&L.a.tags, 0, 0, TAG_KIND_CONTROL);
    for (int kind = 0; kind < 3; kind++) {
        uint64_t xid = new_xid();
        uint32_t chunks[] = { 1 };
        struct piece pc = { 768 * 1024, 4096, false };
        struct ctl ctl = { .xid = xid, .chunks = chunks, .nchunks = 1, .pieces = &pc, .npieces = 1 };
        uint8_t *copy;
        size_t len;
        /* Seal under keys the victim will not take, then send what we mean to. */
        link_made_up(&other, g.self_id);
        other.gen = L.gen;
        other.a.tags = L.a.tags;
        copy = build_control(kind == 2 ? &other : &L, &ctl, &len);
        if (copy == NULL)
            return fail(c, "building a CONTROL failed");
        if (kind == 0)
            copy[AUTH_HEADER_BYTES + 3] ^= 0x40;
        else if (kind == 1)
            copy[len - 1] ^= 0x01;
        send_bytes(control_tag, copy, len);
        free(copy);
        int r = await_ready_or_result(&L, xid, 700, detail, sizeof(detail));
        if (r >= 0)
            return fail(c, "a forged CONTROL (%s) was answered %s",
                        kind == 0 ? "payload flipped" : kind == 1 ? "MAC flipped" : "other keys",
                        r == 0 ? "READY" : sname(r - 1000));
    }
    if (region_check(c, "after forged CONTROLs") != 0)
        return 1;
    if (case_good(c) != 0)
        return fail(c, "the link no longer carries a transfer after forged messages");
    return pass(c, "CONTROLs with a payload byte flipped, the MAC flipped, or under other keys, "
                   "on the live control tag: dropped unanswered; the link still serves");
}

/* Garbage and lies from a key holder: on the control tag, in HELLOs, in CONTROL's tables. */
static int case_malformed(const char *c)
{
    uint8_t bytes[256];
    int bad = 0;

    for (size_t i = 0; i < sizeof(bytes); i++)
        bytes[i] = (uint8_t)(i * 37 + 11);
    if (ensure_link(c) != 0)
        return 1;
    /* Authenticated HELLOs that say the wrong things: no link may come of them. */
    struct {
        const char *what;
        uint32_t version;
        size_t nonce_len;
        const char *name;
        size_t addr_len;
    } hellos[] = {
        { "a HELLO of version 99", 99, AUTH_NONCE_BYTES, NULL, 0 },
        { "a HELLO with a 3-byte nonce", B10_PEER_PROTOCOL_VERSION, 3, NULL, 0 },
        { "a HELLO with a bad name", B10_PEER_PROTOCOL_VERSION, AUTH_NONCE_BYTES, "bad name!", 0 },
        { "a HELLO with a 3-byte worker address", B10_PEER_PROTOCOL_VERSION, AUTH_NONCE_BYTES, NULL, 3 },
    };
    for (size_t i = 0; i < sizeof(hellos) / sizeof(hellos[0]); i++) {
        B10__Peer__Hello h;
        B10__Peer__Msg m = B10__PEER__MSG__INIT;
        uint8_t nonce[AUTH_NONCE_BYTES];
        struct hello_ack ack;
        uint64_t gen = new_gen();
        auth_random(nonce, sizeof(nonce));
        make_hello(&h, g.self_id, hellos[i].name ? hellos[i].name : g.self_name, gen, nonce);
        h.version = hellos[i].version;
        h.nonce.len = hellos[i].nonce_len;
        if (hellos[i].addr_len)
            h.worker_address.len = hellos[i].addr_len;
        m.body_case = B10__PEER__MSG__BODY_HELLO;
        m.hello = &h;
        send_static(&g.key, AUTH_KIND_HELLO, g.self_id, TAG_HELLO, &m, NULL, NULL);
        int st = await_ack(&g.key, gen, nonce, 500, &ack);
        if (st >= 0)
            bad |= fail(c, "%s was answered %s", hellos[i].what, sname(st));
    }
    /* Garbage, and a READY, on the control tag, sealed. */
    uint64_t control_tag = tags_derive(&L.a.tags, 0, 0, TAG_KIND_CONTROL);
    send_bytes(control_tag, bytes, sizeof(bytes));
    B10__Peer__Ready rd = B10__PEER__READY__INIT;
    B10__Peer__Msg mr = B10__PEER__MSG__INIT;
    mr.body_case = B10__PEER__MSG__BODY_READY;
    mr.ready = &rd;
    send_link(&L.a, control_tag, &mr, NULL, NULL);

    /* CONTROLs whose tables lie: counts, totals, empty pieces, empty names. */
    struct {
        const char *what;
        uint32_t chunks[2];
        uint32_t nchunks;
        struct piece pc[2];
        uint32_t npieces;
        uint64_t total;
        const char *dst;
    } lies[] = {
        { "a chunk table naming 3 pieces of 1", { 3 }, 1, { { 0, 4096, false } }, 1, 0, NULL },
        { "a total of 1 byte for 4096", { 1 }, 1, { { 0, 4096, false } }, 1, 1, NULL },
        { "a zero-length piece", { 1 }, 1, { { 0, 0, false } }, 1, 0, NULL },
        { "a chunk larger than a staging view", { 1 }, 1, { { 0, (uint64_t)1 << 40, false } }, 1, 0, NULL },
        { "a piece that wraps around", { 1 }, 1, { { UINT64_MAX - 10, 4096, true } }, 1, 0, NULL },
        { "an empty destination name", { 1 }, 1, { { 0, 4096, false } }, 1, 0, "" },
        { "no chunks", { 0 }, 0, { { 0, 4096, false } }, 1, 0, NULL },
    };
    for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
        uint64_t xid = new_xid();
        char detail[256];
        struct ctl ctl = { .xid = xid, .dst = lies[i].dst, .chunks = lies[i].chunks,
                           .nchunks = lies[i].nchunks, .pieces = lies[i].pc,
                           .npieces = lies[i].npieces, .total = lies[i].total };

        send_control(&L, &ctl, NULL, NULL);
        int r = await_ready_or_result(&L, xid, timeout_ms, detail, sizeof(detail));
        if (r == 0) {
            memset(junk, 0x13, sizeof(junk));
            send_data(tags_derive(&L.a.tags, xid, 0, TAG_KIND_DATA), xid, 0, junk, 4096);
            bad |= fail(c, "%s: admitted", lies[i].what);
        } else if (r < 0) {
            bad |= fail(c, "%s: no answer", lies[i].what);
        } else {
            pass(c, "%s: refused, %s: %s", lies[i].what, sname(r - 1000), detail);
        }
    }
    progress_for(200);
    bad |= region_check(c, "after malformed messages");
    if (!bad)
        pass(c, "garbage HELLOs and CONTROLs changed nothing");
    return bad;
}

/* Send a heartbeat under link l about gen l->gen. */
static void send_beat(struct rlink *l, bool reply, bool stale, uint64_t nonce)
{
    B10__Peer__Heartbeat hb = B10__PEER__HEARTBEAT__INIT;
    B10__Peer__Msg m = B10__PEER__MSG__INIT;

    hb.gen = l->gen;
    hb.reply = reply;
    hb.stale = stale;
    hb.nonce = nonce;
    m.body_case = B10__PEER__MSG__BODY_HEARTBEAT;
    m.heartbeat = &hb;
    send_link(&l->a, TAG_HEARTBEAT, &m, NULL, NULL);
}

/* The victim's answer under l to our heartbeat with this nonce: 1 stale, 0 held, -1 none. */
static int beat_answer(struct rlink *l, uint64_t nonce, double wait)
{
    double end = now_ms() + wait;
    int r = -1;

    while (r < 0 && now_ms() < end) {
        B10__Peer__Msg *m = recv_link(&l->a, TAG_HEARTBEAT, end - now_ms());
        if (m == NULL)
            break;
        /* The victim's own heartbeats (it is busy with us) are not answers: skip them. */
        if (m->body_case == B10__PEER__MSG__BODY_HEARTBEAT && m->heartbeat->reply &&
            m->heartbeat->nonce == nonce)
            r = m->heartbeat->stale ? 1 : 0;
        b10__peer__msg__free_unpacked(m, NULL);
    }
    return r;
}

/*
 * Heartbeats: ours on the live link is answered as held; on a link the
 * victim retired, stale; on a link it never had, or from a daemon it does
 * not know, not at all (it cannot tell them from forgeries). Forged
 * answers (to no heartbeat of the victim's) calling our link stale change
 * nothing: a correct transfer on the link still lands.
 */
static int case_heartbeat(const char *c)
{
    uint64_t nonce = rnd64();
    struct rlink made_up;

    if (ensure_link(c) != 0)
        return 1;
    send_beat(&L, false, false, nonce);
    int r = beat_answer(&L, nonce, timeout_ms);
    if (r != 0)
        return fail(c, "a heartbeat on the live link was answered %s", r < 0 ? "not at all" : "stale");
    /* A second link retires the first: asked about it, the victim says stale. */
    struct rlink first = L;
    L.hello = NULL;
    L_up = false;
    if (ensure_link(c) != 0)
        return 1;
    progress_for(200);
    send_beat(&first, false, false, ++nonce);
    r = beat_answer(&first, nonce, timeout_ms);
    rlink_free(&first);
    if (r != 1)
        return fail(c, "a heartbeat about the retired link was answered %s",
                    r < 0 ? "not at all" : "held");
    link_made_up(&made_up, g.self_id);
    send_beat(&made_up, false, false, ++nonce);
    if ((r = beat_answer(&made_up, nonce, 300)) != -1)
        return fail(c, "a heartbeat about a link the victim never had was answered");
    /* Forged answers: to no ask of the victim's. */
    send_beat(&L, true, true, 0);
    send_beat(&L, true, true, rnd64());
    progress_for(200);
    if (case_good(c) != 0)
        return fail(c, "forged heartbeat answers broke the link");
    return pass(c, "heartbeats answered held / stale / not at all as they should; forged answers "
                   "calling the live link stale changed nothing");
}

/*
 * A data lane carries only DATA: a control-class message sent straight to
 * one (its address is in the agent descriptor) is dropped there. Sent with a
 * registered tag (TAG_HEARTBEAT) and large enough for a rendezvous, it
 * completes at our end only once the lane has taken it; asked about instead,
 * as DATA is, it would wait at the head of the lane's queue for good.
 */
static int case_lane(const char *c)
{
    static uint8_t big[16 << 20];
    static struct req_state rs;     /* the send may outlive the case */
    ucp_ep_h ep;

    if (g.lane_addr == NULL)
        return pass(c, "the victim has no data lanes: nothing to test");
    ucp_ep_params_t params = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
        .address = (const ucp_address_t *)g.lane_addr,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
    };
    if (ucp_ep_create(g.worker, &params, &ep) != UCS_OK)
        return fail(c, "no endpoint to the victim's first data lane");
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = on_send,
        .user_data = &rs,
    };
    rs = (struct req_state){ 0 };
    void *req = ucp_tag_send_nbx(ep, big, sizeof(big), TAG_HEARTBEAT, &p);
    ucs_status_t st = req_wait(req, &rs, false, timeout_ms);
    ep_close(ep);
    if (st == UCS_ERR_TIMED_OUT)
        return fail(c, "a control-class message to a data lane was never taken off it");
    if (g.have_key && case_good(c) != 0)
        return fail(c, "a control-class message to a data lane broke the link");
    return pass(c, "a control-class message to a data lane was dropped there (%s)",
                ucs_status_string(st));
}

/*
 * A HELLO replayed: byte for byte, it is dropped before it costs anything.
 * A HELLO the victim answers but whose opener never confirms (a replay of
 * one it has not seen, or an opener without the key) opens nothing: a
 * CONTROL on its control tag under other keys is dropped, and once the
 * handshake expired, even one under its keys.
 */
static int case_replay_hello(const char *c)
{
    struct hello_ack ack;
    struct rlink pend;
    char detail[256];

    if (ensure_link(c) != 0)
        return 1;
    send_bytes(TAG_HELLO, L.hello, L.hello_len);
    if (await_ack(&g.key, L.gen, L.nonce, 700, &ack) >= 0)
        return fail(c, "a replayed HELLO was answered");
    if (hello_round(&pend, c, &ack) != 0)
        return 1;
    /* Not confirmed: a CONTROL under made-up keys on the would-be control tag. */
    struct rlink fake;
    link_made_up(&fake, g.self_id);
    auth_link_derive(&g.key, g.self_id, g.victim_id, pend.gen, pend.nonce, ack.nonce, true, &pend.a);
    fake.gen = pend.gen;
    fake.a.tags = pend.a.tags;
    uint64_t xid = new_xid();
    uint32_t chunks[] = { 1 };
    struct piece pc = { 896 * 1024, 4096, false };
    struct ctl ctl = { .xid = xid, .chunks = chunks, .nchunks = 1, .pieces = &pc, .npieces = 1 };
    send_control(&fake, &ctl, NULL, NULL);
    int r = await_ready_or_result(&pend, xid, 700, detail, sizeof(detail));
    if (r >= 0) {
        rlink_free(&pend);
        return fail(c, "a CONTROL under other keys on an unconfirmed link was answered");
    }
    /*
     * Past the handshake's bound (--connect-timeout-ms), the link is gone for good.
     * The victim expires handshakes on a sweep every quarter of that bound, so the
     * handshake may live up to 1.25 of it: wait half as long again, not the bound.
     */
    progress_for(timeout_ms + timeout_ms / 2);
    ctl.xid = xid = new_xid();
    send_control(&pend, &ctl, NULL, NULL);
    r = await_ready_or_result(&pend, xid, 700, detail, sizeof(detail));
    if (r >= 0) {
        rlink_free(&pend);
        return fail(c, "a CONTROL on a handshake left unconfirmed past its bound was answered %s",
                    r == 0 ? "READY" : sname(r - 1000));
    }
    /*
     * That HELLO, replayed once its handshake expired: not answered again;
     * nor sealed anew (as if its MAC had left the cache of those seen): its
     * generation is not newer than the one answered.
     */
    send_bytes(TAG_HELLO, pend.hello, pend.hello_len);
    int again = await_ack(&g.key, pend.gen, pend.nonce, 700, &ack);
    B10__Peer__Hello h;
    B10__Peer__Msg m = B10__PEER__MSG__INIT;
    make_hello(&h, g.self_id, g.self_name, pend.gen, pend.nonce);
    m.body_case = B10__PEER__MSG__BODY_HELLO;
    m.hello = &h;
    send_static(&g.key, AUTH_KIND_HELLO, g.self_id, TAG_HELLO, &m, NULL, NULL);
    int resealed = await_ack(&g.key, pend.gen, pend.nonce, 700, &ack);
    rlink_free(&pend);
    if (again >= 0 || resealed >= 0)
        return fail(c, "a HELLO replayed after its handshake expired was answered again (%s)",
                    again >= 0 ? "byte for byte" : "sealed anew");
    if (region_check(c, "after replayed and unconfirmed HELLOs") != 0)
        return 1;
    return pass(c, "a HELLO replayed byte for byte got no answer; an answered HELLO never "
                   "confirmed opened nothing, and replayed once it expired got no answer either");
}

/* ---------------------------------------------------------------- cases of a stranger */

/* What a stranger sends, in every form it can: the victim must answer none of it. */
static int stranger_burst(uint64_t as_id, const char *as_name)
{
    struct rlink S;
    uint8_t nonce[AUTH_NONCE_BYTES];
    uint8_t garbage[512];
    B10__Peer__Hello h;
    B10__Peer__Msg m = B10__PEER__MSG__INIT;
    size_t len;

    for (size_t i = 0; i < sizeof(garbage); i++)
        garbage[i] = (uint8_t)rnd64();
    auth_random(nonce, sizeof(nonce));
    /* HELLO: garbage, a bare message (no envelope), under another key, under the victim's key id. */
    send_bytes(TAG_HELLO, garbage, sizeof(garbage));
    make_hello(&h, as_id, as_name, rnd64(), nonce);
    m.body_case = B10__PEER__MSG__BODY_HELLO;
    m.hello = &h;
    uint8_t *bare = pack_enveloped(&m, &len);
    if (bare == NULL)
        return -1;
    send_bytes(TAG_HELLO, bare + AUTH_HEADER_BYTES, len);
    auth_seal(&g.wrong, AUTH_KIND_HELLO, as_id, g.victim_id, bare, len);
    send_bytes(TAG_HELLO, bare, AUTH_OVERHEAD + len);
    /* The right key's id (it is public) with a MAC made under another key. */
    for (int i = 0; i < 8; i++)
        bare[8 + i] = (uint8_t)(g.victim_key_id >> (8 * i));
    send_bytes(TAG_HELLO, bare, AUTH_OVERHEAD + len);
    free(bare);

    /* Every link message, on a link of made-up keys: CONTROL, READ, CHECK, NOTIFY, CONFIRM. */
    link_made_up(&S, as_id);
    uint64_t control_tag = tags_derive(&S.a.tags, 0, 0, TAG_KIND_CONTROL);
    uint32_t chunks[] = { 1 };
    struct piece pc = { 0, 4096, false };
    struct ctl ctl = { .xid = new_xid(), .chunks = chunks, .nchunks = 1, .pieces = &pc, .npieces = 1 };
    send_control(&S, &ctl, NULL, NULL);
    uint8_t spans[2 * SPAN_BYTES];
    frame_put_u64(spans, (uint64_t)(uintptr_t)g.reg);
    frame_put_u64(spans + 8, 4096);
    frame_put_u64(spans + SPAN_BYTES, 0x10000);
    frame_put_u64(spans + SPAN_BYTES + 8, 4096);
    B10__Peer__ReadRequest rr = B10__PEER__READ_REQUEST__INIT;
    rr.read_id = new_xid();
    rr.src_agent = g.agent;
    rr.dst_agent = "thief";
    rr.deadline_ms = 3000;
    rr.src_spans = (ProtobufCBinaryData){ SPAN_BYTES, spans };
    rr.dst_spans = (ProtobufCBinaryData){ SPAN_BYTES, spans + SPAN_BYTES };
    B10__Peer__Msg mm = B10__PEER__MSG__INIT;
    mm.body_case = B10__PEER__MSG__BODY_READ;
    mm.read = &rr;
    send_link(&S.a, control_tag, &mm, NULL, NULL);
    B10__Peer__Check ck = B10__PEER__CHECK__INIT;
    ck.check_id = new_xid();
    ck.dst_agent = g.agent;
    ck.spans = (ProtobufCBinaryData){ SPAN_BYTES, spans };
    mm.body_case = B10__PEER__MSG__BODY_CHECK;
    mm.check = &ck;
    send_link(&S.a, control_tag, &mm, NULL, NULL);
    B10__Peer__Notify nt = B10__PEER__NOTIFY__INIT;
    nt.notify_id = new_xid();
    nt.src_agent = "prefill-0";
    nt.dst_agent = g.agent;
    nt.message = (ProtobufCBinaryData){ 12, (uint8_t *)"req-42 landed" };
    mm.body_case = B10__PEER__MSG__BODY_NOTIFY;
    mm.notify = &nt;
    send_link(&S.a, control_tag, &mm, NULL, NULL);
    confirm(&S);
    /* Heartbeats, asks and answers, about the made-up link. */
    send_beat(&S, false, false, rnd64());
    send_beat(&S, true, true, rnd64());
    /* READY, RESULT, CANCEL and DATA on tags of no transfer of the victim's. */
    B10__Peer__Result res = B10__PEER__RESULT__INIT;
    res.xfer_id = ctl.xid;
    mm.body_case = B10__PEER__MSG__BODY_RESULT;
    mm.result = &res;
    send_link(&S.a, tags_derive(&S.a.tags, ctl.xid, 0, TAG_KIND_RESULT), &mm, NULL, NULL);
    memset(junk, 0x71, sizeof(junk));
    for (int i = 0; i < 4; i++)
        send_nowait(rnd64() & ~TAG_CLASS_CONTROL, junk, CHUNK);
    send_nowait(tags_derive(&S.a.tags, ctl.xid, 0, TAG_KIND_DATA), junk, 4096);
    return 0;
}

/*
 * A stranger (no key), as itself and posing as a legitimate peer (-i, -n):
 * every message type. Nothing may come back (the victim makes no endpoint
 * for a stranger), nothing may land, no notice reach the rank, no READ
 * write anything back.
 */
/*
 * A KNOCK at the victim's IPv4 door from the address `at_from`, listing
 * that address, under the cluster key and with our node proof when we hold
 * a certificate (-c). 0 with the door's answer in *ack (which may be a
 * refusal), or -1 with why not in why.
 */
static int knock_door(const char *at_from, struct knock *ack, char *why, size_t why_len)
{
    static struct knock k;
    static uint8_t out[KNOCK_MAX_BYTES], in[KNOCK_ACK_MAX_BYTES];
    struct wireaddr_door doors[WIREADDR_MAX_DOORS];
    struct auth_keyring ring = { 0 };
    struct sockaddr_in from = { .sin_family = AF_INET }, to = { .sin_family = AF_INET };
    char detail[KNOCK_DETAIL_MAX];
    bool authenticated;
    int n = wireaddr_doors(g.victim_addr, g.victim_addr_len, doors), at = -1;

    for (int i = 0; i < n && at < 0; i++)
        if (doors[i].family == 4)
            at = i;
    if (at < 0)
        return snprintf(why, why_len, "the victim's worker address names no IPv4 door"), -1;
    if (auth_keyring_add(&ring, &g.key) != 0)
        return snprintf(why, why_len, "no keyring"), -1;
    if (inet_pton(AF_INET, at_from, &from.sin_addr) != 1)
        return snprintf(why, why_len, "%s is no IPv4 address", at_from), -1;
    memcpy(&to.sin_addr, doors[at].addr, 4);
    to.sin_port = htons(doors[at].port);

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    memset(&k, 0, sizeof(k));
    k.sender_id = g.self_id;
    k.sent_ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
    snprintf(k.name, sizeof(k.name), "%s", g.self_name);
    auth_random(k.nonce, sizeof(k.nonce));
    k.addrs[0].family = 4;
    memcpy(k.addrs[0].bytes, &from.sin_addr, 4);
    k.naddrs = 1;
    size_t len = knock_pack(&g.key, &k, g.cert, out, sizeof(out));
    if (len == 0)
        return snprintf(why, why_len, "the knock does not pack"), -1;

    /* Each step bounded by the case's timeout: a door that keeps silent fails the case. */
    struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
        bind(fd, (struct sockaddr *)&from, sizeof(from)) != 0 ||
        connect(fd, (struct sockaddr *)&to, sizeof(to)) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return snprintf(why, why_len, "connecting to the door from %s: %s", at_from,
                        strerror(e)), -1;
    }
    size_t have = 0, want = 0;
    bool sent = write(fd, out, len) == (ssize_t)len;
    while (sent && (want == 0 || have < want)) {
        ssize_t got = read(fd, in + have, sizeof(in) - have);
        if (got <= 0)
            break;
        have += (size_t)got;
        want = knock_frame_length(in, have, true);
        if (want == SIZE_MAX || (want != 0 && have > want))
            break;
    }
    close(fd);
    if (!sent || want == 0 || want == SIZE_MAX || have != want)
        return snprintf(why, why_len, "the door gave no whole answer (%zu bytes)", have), -1;
    if (knock_open(&ring, true, in, have, ack, &authenticated, detail, sizeof(detail)) != B10_OK)
        return snprintf(why, why_len, "the door's answer: %s", detail), -1;
    if (memcmp(ack->nonce, k.nonce, KNOCK_NONCE_BYTES) != 0)
        return snprintf(why, why_len, "the door answered another knock"), -1;
    return 0;
}

/*
 * A KNOCK from g.knock_from (-b). The victim, certified, lets in only a
 * certified node: with -c this knock is let in (and the address it lists
 * is on its gate), without one it is refused, answered with the reason,
 * and that address stays off the gate (the runner checks what reaches UCX
 * from it).
 */
static int case_knock(const char *c)
{
    static struct knock ack;
    char why[KNOCK_DETAIL_MAX + 64];

    if (knock_door(g.knock_from, &ack, why, sizeof(why)) != 0)
        return fail(c, "%s", why);
    if (g.cert != NULL) {
        if (ack.status != B10_OK)
            return fail(c, "a certified node's knock was refused: %s", ack.detail);
        return pass(c, "a certified node's knock from %s let in by %s", g.knock_from, ack.name);
    }
    if (ack.status == B10_OK)
        return fail(c, "a key holder without a certificate was let in at the door");
    if (strstr(ack.detail, "certified nodes only") == NULL)
        return fail(c, "refused, but for '%s'", ack.detail);
    g.door_refused = true;
    return pass(c, "a key holder without a certificate, knocking from %s, refused: %s (%s)",
                g.knock_from, sname(ack.status), ack.detail);
}

static int case_stranger(const char *c)
{
    if (stranger_burst(g.self_id, g.self_name) != 0)
        return fail(c, "building messages failed");
    if (g.pose_id != 0 && stranger_burst(g.pose_id, g.pose_name) != 0)
        return fail(c, "building messages failed");
    int n = arrivals(1000);
    if (n != 0)
        return fail(c, "the victim sent a stranger %d messages", n);
    if (region_check(c, "after a stranger's messages") != 0 ||
        victim_serves(c, "after a stranger's messages", 0) != 0)
        return 1;
    return pass(c, "HELLO, CONTROL, READ, CHECK, NOTIFY, CONFIRM, heartbeats, RESULT and DATA "
                   "from a stranger%s%s: none answered, nothing landed, no notice delivered",
                g.pose_id ? " and from one posing as " : "", g.pose_id ? g.pose_name : "");
}

/*
 * A key holder posing as the victim itself: a HELLO under the victim's own
 * boot id and name. What comes by a daemon's link to itself is its own
 * ranks' (their uid decides what they may touch), so only the HELLO it
 * sent itself may open one: this one gets no answer.
 */
static int case_self_claim(const char *c)
{
    struct tag_link t;
    uint8_t nonce[AUTH_NONCE_BYTES], buf[HELLO_ACK_MAX_BYTES];
    uint64_t gen = new_gen();
    B10__Peer__Hello h;
    B10__Peer__Msg m = B10__PEER__MSG__INIT;

    auth_random(nonce, sizeof(nonce));
    make_hello(&h, g.victim_id, g.victim_name, gen, nonce);
    m.body_case = B10__PEER__MSG__BODY_HELLO;
    m.hello = &h;
    started(c);
    if (send_static(&g.key, AUTH_KIND_HELLO, g.victim_id, TAG_HELLO, &m, NULL, NULL) != 0)
        return fail(c, "sending HELLO failed");
    auth_ack_tags(&g.key, g.victim_id, g.victim_id, gen, nonce, &t);
    long n = recv_bytes(tags_derive(&t, 0, 0, TAG_KIND_HELLO_ACK), buf, sizeof(buf), 1000);
    if (n >= 0)
        return fail(c, "the victim answered a HELLO that claims its own boot (%ld bytes)", n);
    if (victim_serves(c, "after a HELLO claiming its own boot", 0) != 0)
        return 1;
    return pass(c, "a HELLO under the victim's own boot id and name (%s) got no answer",
                g.victim_name);
}

/* Our packed address with the UCX address in it mangled by how (0..): its length. */
static size_t mangle(uint8_t *out, size_t cap, int how, uint64_t seed)
{
    size_t len = g.packed_len < cap ? g.packed_len : cap;
    memcpy(out, g.packed, len);
    size_t ucx = 12;   /* the first worker address, past "b10w", version, count and its length */
    switch (how) {
    case 0: out[ucx] ^= 0xff; break;                                /* the address version */
    case 1: return ucx + 1 + seed % (len > ucx + 1 ? len - ucx - 1 : 1);  /* truncated */
    default:
        for (int i = 0; i < 4; i++)
            out[ucx + (seed >> (8 * i)) % (len - ucx)] ^= (uint8_t)(1 << (seed % 8));
        break;
    }
    return len;
}

/*
 * HELLOs whose UCX address is mangled (its first byte, truncations, random
 * flips), bare and under keys the victim does not hold: UCX, which asserts
 * on a bad address, never sees one, and the victim stays up.
 */
static int case_mangled(const char *c)
{
    uint8_t addr[65536];
    int sent = 0;

    for (int i = 0; i < 300; i++) {
        uint64_t seed = rnd64();
        int how = i % 3;
        size_t alen = mangle(addr, sizeof(addr), how, seed);
        B10__Peer__Hello h;
        B10__Peer__Msg m = B10__PEER__MSG__INIT;
        uint8_t nonce[AUTH_NONCE_BYTES];
        size_t len;
        auth_random(nonce, sizeof(nonce));
        make_hello(&h, g.self_id, g.self_name, rnd64(), nonce);
        h.worker_address = (ProtobufCBinaryData){ alen, addr };
        m.body_case = B10__PEER__MSG__BODY_HELLO;
        m.hello = &h;
        uint8_t *buf = pack_enveloped(&m, &len);
        if (buf == NULL)
            return fail(c, "no memory");
        if (i % 2 == 0) {
            send_bytes(TAG_HELLO, buf + AUTH_HEADER_BYTES, len);
        } else {
            auth_seal(&g.wrong, AUTH_KIND_HELLO, g.self_id, g.victim_id, buf, len);
            if (i % 4 == 1)
                for (int b = 0; b < 8; b++)
                    buf[8 + b] = (uint8_t)(g.victim_key_id >> (8 * b));
            send_bytes(TAG_HELLO, buf, AUTH_OVERHEAD + len);
        }
        free(buf);
        sent++;
    }
    int n = arrivals(500);
    if (n != 0)
        return fail(c, "the victim answered mangled HELLOs %d times", n);
    if (victim_serves(c, "after mangled HELLOs", 0) != 0)
        return 1;
    return pass(c, "%d HELLOs with mangled UCX addresses (first byte, truncated, flipped), bare "
                   "or under other keys: none answered, the victim serves", sent);
}

/* ---------------------------------------------------------------- floods, from a key holder */

/*
 * 1030 authenticated HELLOs under made-up names, never confirmed: at most
 * --max-hellos-per-s of them are answered, none takes a slot in the peer
 * table (run.sh counts the victim's peers), and the victim still serves.
 */
static int case_flood_hello(const char *c)
{
    int answered = 0;
    double t0 = now_ms();

    if (!g.have_key)
        return fail(c, "this case needs the cluster key (-k)");
    started(c);
    for (int i = 0; i < 1030; i++) {
        B10__Peer__Hello h;
        B10__Peer__Msg m = B10__PEER__MSG__INIT;
        uint8_t nonce[AUTH_NONCE_BYTES];
        char name[64];
        auth_random(nonce, sizeof(nonce));
        snprintf(name, sizeof(name), "flood-%d-%d", (int)getpid(), i);
        make_hello(&h, rnd64(), name, rnd64(), nonce);
        m.body_case = B10__PEER__MSG__BODY_HELLO;
        m.hello = &h;
        send_static(&g.key, AUTH_KIND_HELLO, h.daemon_id, TAG_HELLO, &m, NULL, NULL);
    }
    double sent_ms = now_ms() - t0;
    /* Whatever comes back are HELLO_ACKs to made-up names (the victim has no other business with us). */
    answered = arrivals(1500);
    if (victim_serves(c, "after a HELLO flood", 0) != 0)
        return 1;
    int allowed = 64 + (int)((sent_ms + 1500) / 1000.0 * 64) + 8;
    if (answered > allowed)
        return fail(c, "%d of 1030 HELLOs were answered in %.0f ms: more than --max-hellos-per-s "
                    "allows", answered, sent_ms);
    return pass(c, "1030 authenticated HELLOs under made-up names in %.0f ms: %d answered, the "
                   "rest dropped past --max-hellos-per-s", sent_ms, answered);
}

/* CONTROLs with deadlines below the victim's floor: each refused, nothing posted. */
static int case_flood_deadline(const char *c)
{
    int refused = 0;
    char detail[256];

    if (ensure_link(c) != 0)
        return 1;
    started(c);
    for (int i = 0; i < 20; i++) {
        uint64_t xid = new_xid();
        uint32_t chunks[] = { 1 };
        struct piece pc = { 256 * 1024, CHUNK, false };
        struct ctl ctl = { .xid = xid, .chunks = chunks, .nchunks = 1, .pieces = &pc, .npieces = 1,
                           .deadline_ms = 1 };
        send_control(&L, &ctl, NULL, NULL);
        int r = await_ready_or_result(&L, xid, timeout_ms, detail, sizeof(detail));
        if (r - 1000 == B10_ERR_DEADLINE)
            refused++;
        else
            return fail(c, "a CONTROL with 1 ms left got %s (%s)", r < 0 ? "no answer" :
                        r == 0 ? "READY" : sname(r - 1000), detail);
    }
    return pass(c, "20 CONTROLs with 1 ms left: all %d refused (%s)", refused, detail);
}

/*
 * CONTROLs that are admitted and then never sent a byte, at the lowest
 * deadline accepted, until the views they held fill this peer's share of
 * the quarantine: later ones are refused B10_ERR_STAGING_EXHAUSTED, fast.
 */
static int case_flood_quarantine(const char *c)
{
    int admitted = 0, refused = 0;
    char detail[256] = "";
    uint64_t xids[16];

    if (ensure_link(c) != 0)
        return 1;
    started(c);
    for (int round = 0; round < 16 && refused == 0; round++) {
        /* Sixteen at once, so that their views sit out together. */
        for (int i = 0; i < 16; i++) {
            uint32_t chunks[] = { 1 };
            struct piece pc = { 256 * 1024, CHUNK, false };
            struct ctl ctl = { .xid = xids[i] = new_xid(), .chunks = chunks, .nchunks = 1,
                               .pieces = &pc, .npieces = 1, .deadline_ms = 150 };
            send_control(&L, &ctl, NULL, NULL);
        }
        for (int i = 0; i < 16; i++) {
            int r = await_ready_or_result(&L, xids[i], timeout_ms, detail, sizeof(detail));
            if (r == 0) {
                admitted++;
                /* Its deadline passes with the receive posted: the view goes to the quarantine. */
                await_result(&L, xids[i], 2000, detail, sizeof(detail));
            } else if (r - 1000 == B10_ERR_DEADLINE) {
                admitted++;   /* its RESULT came before we looked: admitted, and abandoned */
            } else if (r - 1000 == B10_ERR_STAGING_EXHAUSTED) {
                refused++;
            } else {
                return fail(c, "CONTROL %d of round %d got %s (%s)", i, round,
                            r < 0 ? "no answer" : sname(r - 1000), detail);
            }
        }
    }
    if (refused == 0)
        return fail(c, "%d abandoned transfers and still no refusal", admitted);
    if (region_check(c, "after abandoned transfers") != 0)
        return 1;
    return pass(c, "%d transfers abandoned at their deadline filled this peer's share; %d more "
                   "were refused: %s", admitted, refused, detail);
}

/*
 * CONTROLs of a million one-byte pieces each (16 MB of tables), never
 * finished: past --max-peer-control, those in flight are dropped unread and
 * those held refused; the victim's memory stays bounded (run.sh reads its RSS).
 */
static int case_flood_pieces(const char *c)
{
    const uint32_t npieces = 1u << 20;
    uint8_t *cp = malloc(4), *ps = malloc(SPAN_BYTES * (size_t)npieces);
    int admitted = 0, refused = 0, silent = 0;
    char detail[256] = "";

    if (cp == NULL || ps == NULL) {
        free(cp);
        free(ps);
        return fail(c, "no memory");
    }
    if (ensure_link(c) != 0) {
        free(cp);
        free(ps);
        return 1;
    }
    /* The tables once: the flood is the victim's to bear, not the flooder's to build. */
    frame_put_u32(cp, npieces);
    for (uint32_t i = 0; i < npieces; i++) {
        frame_put_u64(ps + SPAN_BYTES * (size_t)i, (uint64_t)(uintptr_t)g.reg + 2 * (uint64_t)(i % (REG_BYTES / 2)));
        frame_put_u64(ps + SPAN_BYTES * (size_t)i + 8, 1);
    }
    started(c);
    uint64_t xids[40];
    for (int i = 0; i < 40; i++) {
        struct ctl ctl = { .xid = xids[i] = new_xid(), .nchunks = 1, .npieces = npieces,
                           .total = npieces, .deadline_ms = 20000, .tables = { cp, ps } };
        send_control(&L, &ctl, NULL, NULL);
    }
    for (int i = 0; i < 40; i++) {
        char why[256] = "";
        int r = await_ready_or_result(&L, xids[i], i < 8 ? 2000 : 100, why, sizeof(why));
        if (r == 0)
            admitted++;
        else if (r > 0) {
            refused++;
            if (detail[0] == '\0') /* the first refusal's reason speaks for them */
                snprintf(detail, sizeof(detail), "%s", why);
        } else
            silent++;
    }
    free(cp);
    free(ps);
    if (refused + silent == 0)
        return fail(c, "40 CONTROLs of a million pieces were all admitted");
    return pass(c, "40 CONTROLs of a million one-byte pieces: %d admitted, %d refused (%s), %d "
                   "dropped unread", admitted, refused, detail, silent);
}

/*
 * Notices from a peer to a rank that does not read them: past the rank's
 * bound they are refused B10_ERR_BUSY to the sender, and the rank is never
 * dropped; what was accepted is all delivered.
 */
/*
 * The same flood in CONTROL's compact form: two chunks of one-byte slots,
 * 8 MB a CONTROL where the full form of its pieces would be 32 MB, and a
 * plan of 48 MB either way. The victim charges each as the full form of its
 * pieces would be, so it admits no more of them than --max-peer-control
 * holds of those (read back from its refusal): charged by their wire bytes,
 * it would have admitted four times as many.
 */
static int case_flood_slots(const char *c)
{
    const uint32_t per_chunk = (1u << 20) - 2048, nslots = 2 * per_chunk;
    uint32_t *slots = malloc(sizeof(*slots) * (size_t)nslots);
    const uint32_t chunks[] = { per_chunk, per_chunk };
    int admitted = 0, refused = 0, silent = 0;
    char detail[256] = "";

    if (slots == NULL)
        return fail(c, "no memory");
    if (ensure_link(c) != 0) {
        free(slots);
        return 1;
    }
    /* Every other byte of the region, so that no two slots of a chunk merge. */
    for (uint32_t i = 0; i < nslots; i++)
        slots[i] = 2 * (i % (REG_BYTES / 2));
    started(c);
    uint64_t xids[40];
    for (int i = 0; i < 40; i++) {
        struct ctl ctl = { .xid = xids[i] = new_xid(), .chunks = chunks, .nchunks = 2,
                           .slots = slots, .nslots = nslots, .slot_len = 1, .deadline_ms = 20000 };
        send_control(&L, &ctl, NULL, NULL);
    }
    for (int i = 0; i < 40; i++) {
        char why[256] = "";
        int r = await_ready_or_result(&L, xids[i], i < 8 ? 2000 : 100, why, sizeof(why));
        if (r == 0)
            admitted++;
        else if (r > 0) {
            refused++;
            if (detail[0] == '\0')
                snprintf(detail, sizeof(detail), "%s", why);
        } else
            silent++;
    }
    free(slots);
    const char *at = strstr(detail, "--max-peer-control ");
    uint64_t limit = at != NULL ? strtoull(at + strlen("--max-peer-control "), NULL, 10) : 0;
    if (admitted == 0)
        return fail(c, "not one CONTROL of %u slots was admitted (%s)", nslots, detail);
    if (limit == 0)
        return fail(c, "no refusal named the victim's --max-peer-control (%s)", detail);
    if ((uint64_t)admitted * nslots * SPAN_BYTES > limit)
        return fail(c, "%d CONTROLs of %u slots admitted: %" PRIu64 " bytes of pieces held, past "
                    "--max-peer-control %" PRIu64, admitted, nslots,
                    (uint64_t)admitted * nslots * SPAN_BYTES, limit);
    return pass(c, "40 CONTROLs of %u one-byte slots: %d admitted (within --max-peer-control %"
                PRIu64 " as pieces), %d refused (%s), %d dropped unread", nslots, admitted, limit,
                refused, detail, silent);
}

static int case_flood_notice(const char *c)
{
    static uint8_t msg[B10_SYNC_MSG_MAX];
    int ok = 0, busy = 0, other = 0;
    char detail[256] = "";

    if (ensure_link(c) != 0)
        return 1;
    memset(msg, 0x6e, sizeof(msg));
    started(c);
    uint64_t control_tag = tags_derive(&L.a.tags, 0, 0, TAG_KIND_CONTROL);
    for (int i = 0; i < 1000; i++) {
        B10__Peer__Notify nt = B10__PEER__NOTIFY__INIT;
        B10__Peer__Msg m = B10__PEER__MSG__INIT;
        nt.notify_id = new_xid();
        nt.src_agent = "rogue-src";
        nt.dst_agent = g.agent;
        nt.message = (ProtobufCBinaryData){ sizeof(msg), msg };
        m.body_case = B10__PEER__MSG__BODY_NOTIFY;
        m.notify = &nt;
        send_link(&L.a, control_tag, &m, NULL, NULL);
        int st = await_result(&L, nt.notify_id, timeout_ms, detail, sizeof(detail));
        if (st == B10_OK)
            ok++;
        else if (st == B10_ERR_BUSY)
            busy++;
        else
            other++;
    }
    if (busy == 0 || other != 0)
        return fail(c, "1000 notices of 64 KiB: %d delivered, %d refused busy, %d otherwise",
                    ok, busy, other);
    /* The rank was never dropped: it reads every accepted notice now. */
    size_t got = 0;
    double end = now_ms() + timeout_ms;
    while ((int)got < ok && now_ms() < end) {
        b10_notification_t *list = NULL;
        size_t n = 0;
        b10_status_t st = b10_agent_notifications(g.conn, &list, &n);
        if (st != B10_OK)
            return fail(c, "the rank lost its connection: %s", b10_status_name(st));
        b10_notifications_free(list, n);
        got += n;
        if (n == 0)
            usleep(10000);
    }
    if ((int)got != ok)
        return fail(c, "%d notices were accepted, the rank read %zu", ok, got);
    return pass(c, "1000 notices of 64 KiB to a rank that read none: %d delivered, %d refused "
                   "B10_ERR_BUSY (%s); the rank stayed and read all it was sent", ok, busy, detail);
}

/* A descriptor of agent on daemon dname (boot id) at our address, sealed under our key. */
static b10_status_t load_desc(const char *agent, const char *dname, uint64_t id)
{
    B10__AgentDesc desc = B10__AGENT_DESC__INIT;
    desc.version = B10_PEER_PROTOCOL_VERSION;
    desc.name = (char *)agent;
    desc.daemon_id = id;
    desc.worker_address = (ProtobufCBinaryData){ g.packed_len, g.packed };
    desc.daemon_name = (char *)dname;
    desc.incarnation = g.self_incarnation;
    size_t body = b10__agent_desc__get_packed_size(&desc);
    uint8_t *sealed = malloc(AUTH_OVERHEAD + body);
    if (sealed == NULL)
        return B10_ERR_NO_MEMORY;
    b10__agent_desc__pack(&desc, sealed + AUTH_HEADER_BYTES);
    auth_seal(&g.key, AUTH_KIND_DESC, id, 0, sealed, body);
    b10_status_t st = b10_agent_load(g.conn, agent, sealed, AUTH_OVERHEAD + body);
    free(sealed);
    return st;
}

/* Our agent descriptor under daemon name dname, sealed as a daemon of the cluster would. */
static b10_status_t load_ours(const char *agent, const char *dname)
{
    return load_desc(agent, dname, g.self_id);
}

/*
 * Our rank writes length bytes to agent, one of ours on a daemon named
 * dname (this rogue), so that the victim opens a link to us: the transfer,
 * or NULL with why in the failure line of case c.
 */
static b10_xfer_t *write_to_ours(const char *c, const char *agent, const char *dname,
                                 uint64_t length, uint32_t deadline_ms)
{
    static b10_span_t src, dst;
    b10_xfer_t *x;

    b10_status_t st = load_ours(agent, dname);
    if (st != B10_OK) {
        fail(c, "the victim would not load our descriptor: %s", b10_status_name(st));
        return NULL;
    }
    src = (b10_span_t){ .addr = (uint64_t)(uintptr_t)g.reg, .length = length };
    dst = (b10_span_t){ .addr = 0x100000, .length = length };
    b10_xfer_params_t xp = { .field_mask = B10_XFER_FIELD_DEADLINE, .op = B10_OP_WRITE,
                             .local = &src, .remote = &dst, .count = 1, .remote_agent = agent,
                             .deadline_ms = deadline_ms };
    if ((st = b10_xfer_submit(g.conn, &xp, &x)) != B10_OK) {
        fail(c, "submit: %s", b10_status_name(st));
        return NULL;
    }
    return x;
}

/*
 * The victim's HELLO to us: answer it with max_chunk as our chunk limit and
 * dname as our name; the link's keys (we are its receiver) in *in. 0, or -1.
 */
static uint8_t hello_buf[HELLO_MAX_BYTES];
static long hello_len;
static uint8_t *last_ack;           /* the last HELLO_ACK we sent, and its tag: to replay */
static size_t last_ack_len;
static uint64_t last_ack_tag;

/* The victim's next HELLO to us, into hello_buf: its length, or -1. */
static long await_hello(void)
{
    return hello_len = recv_bytes(TAG_HELLO, hello_buf, sizeof(hello_buf), timeout_ms);
}

/* Answer the HELLO in hello_buf (await_hello). */
static int answer_held_hello(const char *dname, uint64_t max_chunk, struct auth_link *in)
{
    const uint8_t *buf = hello_buf;
    long n = hello_len;
    struct auth_header hdr;
    const uint8_t *payload;
    size_t payload_len;
    B10__Peer__Msg *hm = NULL;
    struct hello h;
    char detail[256];

    if (n < 0 || auth_open(&g.key, AUTH_KIND_HELLO, buf, (size_t)n, &payload, &payload_len) != AUTH_OK ||
        auth_peek(buf, (size_t)n, &hdr) != 0 ||
        hello_decode(payload, payload_len, &hdr, &hm, &h, detail, sizeof(detail)) != B10_OK)
        return -1;
    b10__peer__msg__free_unpacked(hm, NULL);
    uint8_t mine[AUTH_NONCE_BYTES];
    auth_random(mine, sizeof(mine));
    B10__Peer__HelloAck ack = B10__PEER__HELLO_ACK__INIT;
    ack.version = B10_PEER_PROTOCOL_VERSION;
    ack.daemon_id = g.self_id;
    ack.gen = h.gen;
    ack.status = B10__STATUS__OK;
    ack.detail = "";
    ack.max_chunk_bytes = max_chunk;
    ack.max_control_bytes = 1 << 20;
    ack.max_pieces = 1 << 16;
    ack.opener_nonce = (ProtobufCBinaryData){ AUTH_NONCE_BYTES, h.nonce };
    ack.nonce = (ProtobufCBinaryData){ AUTH_NONCE_BYTES, mine };
    ack.name = (char *)dname;
    ack.incarnation = g.self_incarnation;
    B10__Peer__Msg am = B10__PEER__MSG__INIT;
    am.body_case = B10__PEER__MSG__BODY_HELLO_ACK;
    am.hello_ack = &ack;
    struct tag_link t;
    auth_ack_tags(&g.key, h.daemon_id, h.to_daemon_id, h.gen, h.nonce, &t);
    size_t alen;
    uint8_t *abuf = pack_enveloped(&am, &alen);
    if (abuf == NULL)
        return -1;
    auth_seal(&g.key, AUTH_KIND_HELLO_ACK, g.self_id, h.daemon_id, abuf, alen);
    last_ack_tag = tags_derive(&t, 0, 0, TAG_KIND_HELLO_ACK);
    send_bytes(last_ack_tag, abuf, AUTH_OVERHEAD + alen);
    free(last_ack);
    last_ack = abuf;
    last_ack_len = AUTH_OVERHEAD + alen;
    auth_link_derive(&g.key, h.daemon_id, g.self_id, h.gen, h.nonce, mine, false, in);
    return 0;
}

static int answer_hello(const char *dname, uint64_t max_chunk, struct auth_link *in)
{
    return await_hello() < 0 ? -1 : answer_held_hello(dname, max_chunk, in);
}

/*
 * The victim opens a link to us (its rank, we, load a descriptor of ours and
 * write to it); we answer its HELLO with limits no daemon may have (a chunk
 * of 1 byte would cut a request into millions of chunks): it must refuse the
 * link and fail the transfer at once, not re-plan.
 */
static int case_bad_ack(const char *c)
{
    char detail[256];
    struct auth_link in;

    if (!g.have_key)
        return fail(c, "this case needs the cluster key (-k)");
    char dname[64], agent[64];
    snprintf(dname, sizeof(dname), "rogue-d%d", (int)getpid());
    snprintf(agent, sizeof(agent), "rogue-dst-%d", (int)getpid());
    double t0 = now_ms();
    b10_xfer_t *x = write_to_ours(c, agent, dname, 65536, 20000);
    if (x == NULL)
        return 1;
    if (answer_hello(dname, 1, &in) != 0) {
        b10_xfer_release(x);
        return fail(c, "the victim sent us no HELLO that opens");
    }
    b10_status_t st = b10_xfer_wait(x, timeout_ms);
    double ms = now_ms() - t0;
    snprintf(detail, sizeof(detail), "%s", b10_xfer_detail(x));
    b10_xfer_release(x);
    b10_agent_invalidate(g.conn, agent);
    if (st != B10_ERR_PEER_PROTOCOL)
        return fail(c, "a HELLO_ACK with a 1-byte chunk limit: the transfer ended %s (%s)",
                    b10_status_name(st), detail);
    return pass(c, "a HELLO_ACK with a 1-byte chunk limit: the link refused, the transfer failed "
                   "%s in %.0f ms (%s)", b10_status_name(st), ms, detail);
}

/*
 * Our rank (on the victim) READs from an agent of ours: the victim sends us
 * the READ on its link to us, and we write back on ours to it. A write-back
 * that writes elsewhere in the rank's registered memory than the READ asked
 * (as many bytes) is refused before anything lands; one into exactly the
 * READ's spans lands, and the READ succeeds.
 */
static int case_bad_writeback(const char *c)
{
    char agent[64], detail[256];
    struct auth_link in;
    static uint8_t data[CHUNK];

    if (ensure_link(c) != 0)
        return 1;
    snprintf(agent, sizeof(agent), "rogue-src-%d", (int)getpid());
    b10_status_t st = load_ours(agent, g.self_name);
    if (st != B10_OK)
        return fail(c, "the victim would not load our descriptor: %s", b10_status_name(st));
    bool first_read = true;
    for (int round = 0; round < 2; round++) {
        uint64_t want_off = 640 * 1024 + (uint64_t)round * 16384, bad_off = want_off + 4096;
        b10_span_t src = { .addr = 0x100000, .length = CHUNK };
        b10_span_t dst = { .addr = (uint64_t)(uintptr_t)g.reg + want_off, .length = CHUNK };
        b10_xfer_params_t xp = { .field_mask = B10_XFER_FIELD_DEADLINE, .op = B10_OP_READ,
                                 .local = &dst, .remote = &src, .count = 1, .remote_agent = agent,
                                 .deadline_ms = 3000 };
        b10_xfer_t *x;
        if ((st = b10_xfer_submit(g.conn, &xp, &x)) != B10_OK)
            return fail(c, "submit READ: %s", b10_status_name(st));
        /* The first READ opens the victim's link to us; later ones ride on it. */
        if (first_read && answer_hello(g.self_name, 4 << 20, &in) != 0) {
            b10_xfer_release(x);
            return fail(c, "the victim sent us no HELLO that opens");
        }
        first_read = false;
        B10__Peer__Msg *m = NULL;
        uint64_t read_id = 0;
        for (int k = 0; k < 3 && read_id == 0; k++) {
            m = recv_link(&in, tags_derive(&in.tags, 0, 0, TAG_KIND_CONTROL), timeout_ms);
            if (m == NULL)
                break;
            if (m->body_case == B10__PEER__MSG__BODY_READ)
                read_id = m->read->read_id;
            b10__peer__msg__free_unpacked(m, NULL);
        }
        if (read_id == 0) {
            b10_xfer_release(x);
            return fail(c, "no READ came on the victim's link to us");
        }
        /* Round 0 writes 4 KiB past the READ's span, round 1 into it. */
        uint64_t xid = new_xid();
        uint8_t cp[4], ps[SPAN_BYTES];
        frame_put_u32(cp, 1);
        frame_put_u64(ps, (uint64_t)(uintptr_t)g.reg + (round == 0 ? bad_off : want_off));
        frame_put_u64(ps + 8, CHUNK);
        B10__Peer__Control ctl = B10__PEER__CONTROL__INIT;
        B10__Peer__Msg mc = B10__PEER__MSG__INIT;
        ctl.xfer_id = xid;
        ctl.gen = L.gen;
        ctl.dst_agent = g.agent;
        ctl.src_agent = agent;
        ctl.deadline_ms = 3000;
        ctl.nchunks = 1;
        ctl.total_bytes = CHUNK;
        ctl.chunk_pieces = (ProtobufCBinaryData){ 4, cp };
        ctl.pieces = (ProtobufCBinaryData){ SPAN_BYTES, ps };
        ctl.read_id = read_id;
        mc.body_case = B10__PEER__MSG__BODY_CONTROL;
        mc.control = &ctl;
        send_link(&L.a, tags_derive(&L.a.tags, 0, 0, TAG_KIND_CONTROL), &mc, NULL, NULL);
        int r = await_ready_or_result(&L, xid, timeout_ms, detail, sizeof(detail));
        if (round == 0) {
            if (r == 0) {
                b10_xfer_release(x);
                return fail(c, "a write-back outside the READ's span was admitted");
            }
            if (r - 1000 != B10_ERR_PEER_PROTOCOL) {
                b10_xfer_release(x);
                return fail(c, "a write-back outside the READ's span got %s (%s)",
                            r < 0 ? "no answer" : sname(r - 1000), detail);
            }
            pass(c, "a write-back 4 KiB past its READ's span: refused, %s (%s)", sname(r - 1000),
                 detail);
            b10_xfer_cancel(x);
            b10_xfer_wait(x, timeout_ms);
            b10_xfer_release(x);
            if (region_check(c, "after a write-back outside its READ") != 0)
                return 1;
            continue;
        }
        if (r != 0) {
            b10_xfer_release(x);
            return fail(c, "the write-back of exactly the READ's span got %s (%s)",
                        r < 0 ? "no answer" : sname(r - 1000), detail);
        }
        for (uint32_t i = 0; i < CHUNK; i++)
            data[i] = pat(++key_seq, i);
        memcpy(g.want + want_off, data, CHUNK);
        send_data(tags_derive(&L.a.tags, xid, 0, TAG_KIND_DATA), xid, 0, data, CHUNK);
        int res = await_result(&L, xid, timeout_ms, detail, sizeof(detail));
        st = b10_xfer_wait(x, timeout_ms);
        b10_xfer_release(x);
        if (res != 0 || st != B10_OK)
            return fail(c, "the write-back of the READ's span: RESULT %s, READ %s", sname(res),
                        b10_status_name(st));
    }
    b10_agent_invalidate(g.conn, agent);
    if (region_check(c, "after the READs") != 0)
        return 1;
    return pass(c, "a write-back of exactly its READ's span landed and the READ succeeded");
}

/*
 * A HELLO reflected back to the daemon that sent it (anyone on the path can,
 * without the key): the victim opens a link to us, we send its HELLO back to
 * it before we answer, and its link must come up all the same. (Once it
 * answered such a HELLO with a refusal sealed under the key, on the very tag
 * its own HELLO_ACK was awaited, and failed its own link.)
 */
static int case_reflect(const char *c)
{
    char dname[64], agent[64], detail[256];
    struct auth_link in;

    if (!g.have_key)
        return fail(c, "this case needs the cluster key (-k)");
    snprintf(dname, sizeof(dname), "rogue-r%d", (int)getpid());
    snprintf(agent, sizeof(agent), "rogue-rdst-%d", (int)getpid());
    b10_status_t st;
    b10_xfer_t *x = write_to_ours(c, agent, dname, 4096, 10000);
    if (x == NULL)
        return 1;
    if (await_hello() < 0) {
        b10_xfer_release(x);
        return fail(c, "the victim sent us no HELLO");
    }
    send_bytes(TAG_HELLO, hello_buf, (size_t)hello_len);
    progress_for(300);
    if (b10_xfer_status(x) != B10_IN_PROGRESS) {
        st = b10_xfer_status(x);
        snprintf(detail, sizeof(detail), "%s", b10_xfer_detail(x));
        b10_xfer_release(x);
        return fail(c, "its HELLO, reflected to it, ended the transfer %s (%s)", b10_status_name(st),
                    detail);
    }
    /* Now the real answer: the link comes up, and its CONTROL reaches us; we refuse it. */
    if (answer_held_hello(dname, 4 << 20, &in) != 0) {
        b10_xfer_release(x);
        return fail(c, "the victim's HELLO did not open");
    }
    /* The same HELLO_ACK again, once the link is up: it opens nothing more, changes nothing. */
    progress_for(100);
    send_bytes(last_ack_tag, last_ack, last_ack_len);
    B10__Peer__Msg *m = NULL;
    uint64_t xid = 0;
    for (int k = 0; k < 3 && xid == 0; k++) {
        if ((m = recv_link(&in, tags_derive(&in.tags, 0, 0, TAG_KIND_CONTROL), timeout_ms)) == NULL)
            break;
        if (m->body_case == B10__PEER__MSG__BODY_CONTROL)
            xid = m->control->xfer_id;
        b10__peer__msg__free_unpacked(m, NULL);
    }
    if (xid == 0) {
        b10_xfer_release(x);
        return fail(c, "no CONTROL came on the victim's link to us");
    }
    B10__Peer__Result res = B10__PEER__RESULT__INIT;
    B10__Peer__Msg mr = B10__PEER__MSG__INIT;
    res.xfer_id = xid;
    res.status = B10__STATUS__ERR_REMOTE_REJECTED;
    res.detail = "refused by the rogue, as planned";
    mr.body_case = B10__PEER__MSG__BODY_RESULT;
    mr.result = &res;
    send_link(&in, tags_derive(&in.tags, xid, 0, TAG_KIND_RESULT), &mr, NULL, NULL);
    st = b10_xfer_wait(x, timeout_ms);
    snprintf(detail, sizeof(detail), "%s", b10_xfer_detail(x));
    b10_xfer_release(x);
    b10_agent_invalidate(g.conn, agent);
    if (st != B10_ERR_REMOTE_REJECTED)
        return fail(c, "after a reflected HELLO the transfer ended %s (%s), not with our refusal",
                    b10_status_name(st), detail);
    return pass(c, "its own HELLO reflected to the victim, and our HELLO_ACK replayed once the "
                   "link was up, changed nothing: its transfer ended with our answer (%s)", detail);
}

/* The victim's next CONTROL on its link to us: its transfer's id, or 0. */
static uint64_t await_control(struct auth_link *in)
{
    uint64_t xid = 0;
    for (int k = 0; k < 3 && xid == 0; k++) {
        B10__Peer__Msg *m = recv_link(in, tags_derive(&in->tags, 0, 0, TAG_KIND_CONTROL), timeout_ms);
        if (m == NULL)
            break;
        if (m->body_case == B10__PEER__MSG__BODY_CONTROL)
            xid = m->control->xfer_id;
        b10__peer__msg__free_unpacked(m, NULL);
    }
    return xid;
}

/* Answer the victim's transfer xid on its link to us: READY, or RESULT with status. */
static void answer_xfer(struct auth_link *in, uint64_t xid, bool ready, B10__Status status)
{
    B10__Peer__Ready rd = B10__PEER__READY__INIT;
    B10__Peer__Result res = B10__PEER__RESULT__INIT;
    B10__Peer__Msg m = B10__PEER__MSG__INIT;
    if (ready) {
        rd.xfer_id = xid;
        m.body_case = B10__PEER__MSG__BODY_READY;
        m.ready = &rd;
    } else {
        res.xfer_id = xid;
        res.status = status;
        res.detail = status == B10__STATUS__OK ? "" : "refused by the rogue, as planned";
        m.body_case = B10__PEER__MSG__BODY_RESULT;
        m.result = &res;
    }
    send_link(in, tags_derive(&in->tags, xid, 0, ready ? TAG_KIND_READY : TAG_KIND_RESULT), &m,
              NULL, NULL);
}

/*
 * The victim gathers a transfer's first chunk while its CONTROL is on the
 * way (its DATA waits for READY). Our rank writes to an agent of ours:
 * a RESULT of success before any READY fails the transfer, for none of its
 * DATA went out; refusals before READY, more than the victim's staging
 * share for one peer holds views, each end the transfer with our refusal
 * (run.sh then finds no view of them in its quarantine: the views gathered
 * ahead came back clean); and a transfer answered as a daemon would (READY,
 * its DATA taken, RESULT) succeeds with its source's bytes. Transfers that
 * never heard READY say their first byte moved: their gathers ran ahead (not
 * every one on a loaded machine, where earlier gathers still hold views).
 */
static int case_early_result(const char *c)
{
    enum { LEN = 65536, REFUSALS = 40 };
    static uint8_t got[LEN + 4096];
    char dname[64], agent[64], detail[256];
    struct auth_link in;
    b10_status_t st;
    int ahead = 0;      /* transfers that heard no READY and moved their first byte */

    if (!g.have_key)
        return fail(c, "this case needs the cluster key (-k)");
    snprintf(dname, sizeof(dname), "rogue-e%d", (int)getpid());
    snprintf(agent, sizeof(agent), "rogue-edst-%d", (int)getpid());
    b10_xfer_t *x = write_to_ours(c, agent, dname, LEN, 10000);
    if (x == NULL)
        return 1;
    if (answer_hello(dname, 4 << 20, &in) != 0) {
        b10_xfer_release(x);
        return fail(c, "the victim sent us no HELLO that opens");
    }
    for (int round = 0; round < 2 + REFUSALS; round++) {
        /* Every other refusal a whole MiB: a gather the copy threads run, begun before
         * CONTROL, and still running when the refusal comes (or not: either way clean). */
        uint64_t len = round > 0 && round <= REFUSALS && round % 2 == 0 ? REG_BYTES : LEN;
        if (round > 0 && (x = write_to_ours(c, agent, dname, len, 10000)) == NULL)
            return 1;
        uint64_t xid = await_control(&in);
        if (xid == 0) {
            b10_xfer_release(x);
            return fail(c, "round %d: no CONTROL came on the victim's link to us", round);
        }
        bool early = round == 0, good = round == 1 + REFUSALS;
        if (good) {
            answer_xfer(&in, xid, true, B10__STATUS__OK);
            long n = recv_bytes(tags_derive(&in.tags, xid, 0, TAG_KIND_DATA), got, sizeof(got),
                                timeout_ms);
            if (n < LEN || memcmp(got, g.reg, LEN) != 0) {
                b10_xfer_release(x);
                return fail(c, "after READY, DATA of %ld bytes came, %s the source's", n,
                            n < LEN ? "short of" : "unlike");
            }
        }
        answer_xfer(&in, xid, false, early || good ? B10__STATUS__OK
                                                   : B10__STATUS__ERR_REMOTE_REJECTED);
        st = b10_xfer_wait(x, timeout_ms);
        snprintf(detail, sizeof(detail), "%s", b10_xfer_detail(x));
        /* Its first byte moved before any READY: the gather ahead ran, whatever came after. */
        b10_xfer_times_t times;
        bool moved = b10_xfer_times(x, &times) == B10_OK &&
                     (times.field_mask & B10_XFER_TIMES_FIRST) != 0;
        b10_xfer_release(x);
        /* Not every one: a gather ahead waits where earlier ones still hold their views. */
        ahead += !good && moved;
        b10_status_t want = early ? B10_ERR_PEER_PROTOCOL : good ? B10_OK : B10_ERR_REMOTE_REJECTED;
        if (st != want)
            return fail(c, "%s: the transfer ended %s (%s), not %s",
                        early ? "a RESULT of success before READY"
                              : good ? "READY, DATA, RESULT" : "a refusal before READY",
                        b10_status_name(st), detail, b10_status_name(want));
        if (early)
            pass(c, "a RESULT of success before READY: the transfer failed %s (%s)",
                 b10_status_name(st), detail);
    }
    b10_agent_invalidate(g.conn, agent);
    if (region_check(c, "after the transfers to us") != 0 ||
        victim_serves(c, "after the transfers to us", 0) != 0)
        return 1;
    if (ahead == 0)
        return fail(c, "none of the %d transfers that heard no READY gathered before it",
                    1 + REFUSALS);
    return pass(c, "%d refusals before READY each ended the transfer with ours (%d of %d such "
                   "transfers had gathered ahead); then READY, its DATA (the source's bytes) and "
                   "a RESULT of success: it succeeded", REFUSALS, ahead, 1 + REFUSALS);
}

/*
 * A descriptor that names the victim's own boot and name but our address:
 * the victim's link to itself carries its ranks' requests to each other,
 * so its entry for itself must keep its own address. Our rank loads it
 * and writes to itself through it: the transfer lands, and no HELLO of the
 * victim's comes to us.
 */
static int case_self_desc(const char *c)
{
    b10_span_t span = { .addr = (uint64_t)(uintptr_t)g.reg, .length = 4096 };
    b10_xfer_t *x;
    b10_status_t st;

    started(c);
    if ((st = load_desc(g.agent, g.victim_name, g.victim_id)) != B10_OK)
        return fail(c, "the victim would not load a descriptor of its own boot: %s (%s)",
                    b10_status_name(st), b10_conn_detail(g.conn));
    /* The same bytes onto themselves: the region holds what it held. */
    b10_xfer_params_t xp = { .field_mask = B10_XFER_FIELD_DEADLINE, .op = B10_OP_WRITE,
                             .local = &span, .remote = &span, .count = 1, .remote_agent = g.agent,
                             .deadline_ms = 20000 };
    if ((st = b10_xfer_submit(g.conn, &xp, &x)) != B10_OK)
        return fail(c, "submit: %s (%s)", b10_status_name(st), b10_conn_detail(g.conn));
    long n = await_hello();
    st = b10_xfer_wait(x, 20000);
    const char *detail = b10_xfer_detail(x);
    char why[256];
    snprintf(why, sizeof(why), "%s", detail);
    b10_xfer_release(x);
    b10_agent_invalidate(g.conn, g.agent);
    if (n >= 0)
        return fail(c, "the victim sent its HELLO to itself to our address (%ld bytes)", n);
    if (st != B10_OK)
        return fail(c, "the victim's write to itself ended %s (%s)", b10_status_name(st), why);
    if (region_check(c, "after a write through a forged self descriptor") != 0)
        return 1;
    return pass(c, "a descriptor of the victim's own boot at our address: its link to itself "
                   "stayed its own (no HELLO came to us), and the write landed");
}

/* ---------------------------------------------------------------- a certified node (-c) */

/*
 * A holder of the cluster key and of node x's certificate claims to be
 * another node (-n NAME), as a later boot of it: refused, since x's
 * certificate does not name it, and nothing of the other node's changes
 * (the runner shows its transfers landing).
 */
static int case_cert_claim(const char *c)
{
    B10__Peer__Hello h;
    B10__Peer__Msg m = B10__PEER__MSG__INIT;
    struct hello_ack ack;
    uint8_t nonce[AUTH_NONCE_BYTES];

    if (g.cert == NULL || g.pose_name[0] == '\0')
        return fail(c, "this case needs a node certificate (-c) and a name to claim (-n)");
    uint64_t id = rnd64() & 0x7fffffffffffffffull, saved = g.self_incarnation;
    g.self_incarnation += 1000000000ull;    /* a boot after the real one's */
    auth_random(nonce, sizeof(nonce));
    uint64_t gen = new_gen();
    make_hello(&h, id, g.pose_name, gen, nonce);
    g.self_incarnation = saved;
    m.body_case = B10__PEER__MSG__BODY_HELLO;
    m.hello = &h;
    uint64_t self = g.self_id;
    g.self_id = id;     /* await_ack derives the answer's tag from the claimed sender */
    if (send_static(&g.key, AUTH_KIND_HELLO, id, TAG_HELLO, &m, NULL, NULL) != 0) {
        g.self_id = self;
        return fail(c, "sending HELLO failed");
    }
    int st = await_ack(&g.key, gen, nonce, timeout_ms, &ack);
    g.self_id = self;
    if (st != B10_ERR_PERMISSION || strstr(ack.detail, "does not name") == NULL)
        return fail(c, "a HELLO certified for %s claiming %s got %s (%s), not a refusal",
                    nodeid_name(g.cert), g.pose_name, st < 0 ? "no answer" : sname(st),
                    st < 0 ? "" : ack.detail);
    if (victim_serves(c, "after the claim", 0) != 0)
        return 1;
    return pass(c, "a HELLO certified for %s that claims %s is refused: %s", nodeid_name(g.cert),
                g.pose_name, ack.detail);
}

/*
 * One certified node, many daemon ids: each link it opens is node x's,
 * a later boot of it each time, so that however many ids it makes up they
 * share one peer entry and one share (the runner counts the entries).
 */
static int case_cert_ids(const char *c)
{
    int up = 0;

    if (g.cert == NULL)
        return fail(c, "this case needs a node certificate (-c)");
    for (int i = 0; i < 8; i++) {
        struct rlink l;
        g.self_id = rnd64() & 0x7fffffffffffffffull;
        g.self_incarnation += 1000;
        if (link_open(&l, c) == 0)
            up++;
        rlink_free(&l);
    }
    L_up = false;   /* the current link's boot was replaced */
    if (victim_serves(c, "after 8 daemon ids", 0) != 0)
        return 1;
    printf("info %s: %d of 8 links opened under node %s's certificate\n", c, up,
           nodeid_name(g.cert));
    return pass(c, "8 daemon ids under one node certificate: %d links opened", up);
}

/*
 * The same holder hands the victim, as its rank, a descriptor it sealed
 * with the cluster key that names node -n NAME at a later boot and at our
 * address: taken for the node's certified boot linked now, it moves
 * nothing (the runner shows that node's entry and transfers unchanged).
 */
static int case_cert_desc(const char *c)
{
    if (g.cert == NULL || g.pose_name[0] == '\0')
        return fail(c, "this case needs a node certificate (-c) and a name to claim (-n)");
    b10_status_t st = load_desc("forged-agent", g.pose_name, rnd64() & 0x7fffffffffffffffull);
    if (st != B10_OK)
        return fail(c, "the victim would not load a descriptor naming %s: %s (%s)", g.pose_name,
                    b10_status_name(st), b10_conn_detail(g.conn));
    b10_agent_invalidate(g.conn, "forged-agent");
    if (victim_serves(c, "after the descriptor", 0) != 0)
        return 1;
    return pass(c, "a descriptor naming %s at a later boot and our address was loaded and moved "
                   "nothing", g.pose_name);
}

/* ---------------------------------------------------------------- a forged proof (-f) */

/*
 * The proof a node presents comes from nodeid_chain_of and nodeid_sign,
 * here and inside knock_pack: this program is linked with both wrapped
 * (the Makefile), so that while g.forged.on they give STEM's chain and
 * signature, which nodeid_load would refuse to hold.
 */
void __real_nodeid_chain_of(const struct nodeid *id, struct nodeid_chain *chain);
void __wrap_nodeid_chain_of(const struct nodeid *id, struct nodeid_chain *chain);
b10_status_t __real_nodeid_sign(const struct nodeid *id, const uint8_t *msg, size_t length,
                                uint8_t sig[NODEID_MAX_SIG], size_t *sig_length_p);
b10_status_t __wrap_nodeid_sign(const struct nodeid *id, const uint8_t *msg, size_t length,
                                uint8_t sig[NODEID_MAX_SIG], size_t *sig_length_p);

void __wrap_nodeid_chain_of(const struct nodeid *id, struct nodeid_chain *chain)
{
    if (!g.forged.on) {
        __real_nodeid_chain_of(id, chain);
        return;
    }
    chain->count = g.forged.count;
    for (unsigned i = 0; i < g.forged.count; i++) {
        chain->der[i] = g.forged.der[i];
        chain->length[i] = g.forged.length[i];
    }
}

b10_status_t __wrap_nodeid_sign(const struct nodeid *id, const uint8_t *msg, size_t length,
                                uint8_t sig[NODEID_MAX_SIG], size_t *sig_length_p)
{
    if (!g.forged.on)
        return __real_nodeid_sign(id, msg, length, sig, sig_length_p);
    size_t n = NODEID_MAX_SIG;
    bool ed = EVP_PKEY_get_base_id(g.forged.key) == EVP_PKEY_ED25519;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx != NULL &&
             EVP_DigestSignInit(ctx, NULL, ed ? NULL : EVP_sha256(), NULL, g.forged.key) == 1 &&
             EVP_DigestSign(ctx, sig, &n, msg, length) == 1;
    EVP_MD_CTX_free(ctx);
    if (!ok)
        return B10_ERR_INTERNAL;
    *sig_length_p = n;
    return B10_OK;
}

/* STEM.crt (PEM, leaf first) and STEM.key, read as they are: no check of any kind. */
static int forged_load(const char *stem)
{
    char path[512];
    X509 *x;

    snprintf(path, sizeof(path), "%s.crt", stem);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return fail("setup", "-f: %s: %s", path, strerror(errno));
    while (g.forged.count < NODEID_MAX_CERTS && (x = PEM_read_X509(f, NULL, NULL, NULL)) != NULL) {
        uint8_t *der = NULL;
        int len = i2d_X509(x, &der);
        X509_free(x);
        if (len <= 0)
            break;
        g.forged.der[g.forged.count] = der;
        g.forged.length[g.forged.count++] = (size_t)len;
    }
    fclose(f);
    snprintf(path, sizeof(path), "%s.key", stem);
    if ((f = fopen(path, "r")) != NULL) {
        g.forged.key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
        fclose(f);
    }
    ERR_clear_error();
    if (g.forged.count == 0 || g.forged.key == NULL)
        return fail("setup", "-f %s: no PEM certificate in %s.crt or no key in %s.key", stem,
                    stem, stem);
    g.forged.loaded = true;
    return 0;
}

static void forged_free(void)
{
    for (unsigned i = 0; i < g.forged.count; i++)
        OPENSSL_free(g.forged.der[i]);
    EVP_PKEY_free(g.forged.key);
}

/*
 * The holder of node x's good certificate (-c) presents the forged proof
 * (-f: a chain for its own name, of the victim's CA, signed by its key)
 * in a HELLO as itself and in a KNOCK from -b: both refused for what the
 * proof is, the victim serves on; the runner shows -c's own proof
 * accepted beside it (the good and knock cases).
 */
static int case_cert_forged(const char *c)
{
    static struct knock ack;
    B10__Peer__Hello h;
    B10__Peer__Msg m = B10__PEER__MSG__INIT;
    struct hello_ack hack;
    uint8_t nonce[AUTH_NONCE_BYTES];

    if (g.cert == NULL || !g.forged.loaded || !g.have_key)
        return fail(c, "this case needs the key (-k), a certificate (-c) and a forged one (-f)");
    uint64_t id = rnd64() & 0x7fffffffffffffffull, self = g.self_id;
    auth_random(nonce, sizeof(nonce));
    uint64_t gen = new_gen();
    g.forged.on = true;
    g.self_id = id;     /* a boot of ours that never linked: nothing of the real link moves */
    make_hello(&h, id, g.self_name, gen, nonce);
    m.body_case = B10__PEER__MSG__BODY_HELLO;
    m.hello = &h;
    int sent = send_static(&g.key, AUTH_KIND_HELLO, id, TAG_HELLO, &m, NULL, NULL);
    int st = sent != 0 ? -1 : await_ack(&g.key, gen, nonce, timeout_ms, &hack);
    char why[KNOCK_DETAIL_MAX + 64];
    int knocked = knock_door(g.knock_from, &ack, why, sizeof(why));
    g.self_id = self;
    g.forged.on = false;
    if (sent != 0)
        return fail(c, "sending HELLO failed");
    if (st != B10_ERR_PERMISSION || strstr(hack.detail, "is a CA's") == NULL)
        return fail(c, "a HELLO with the forged proof got %s (%s), not a refusal for what the "
                    "certificate is", st < 0 ? "no answer" : sname(st), st < 0 ? "" : hack.detail);
    if (knocked != 0)
        return fail(c, "%s", why);
    if (ack.status == B10_OK || strstr(ack.detail, "is a CA's") == NULL)
        return fail(c, "a KNOCK with the forged proof got %s (%s), not a refusal for what the "
                    "certificate is", sname(ack.status), ack.detail);
    if (victim_serves(c, "after the forged proofs", 0) != 0)
        return 1;
    return pass(c, "the forged proof of %s refused in a HELLO (%s) and at the door (%s)",
                g.self_name, hack.detail, ack.detail);
}

static const struct testout_case cases[] = {
    { "good", case_good },
    { "knock", case_knock },
    { "cert_claim", case_cert_claim },
    { "cert_ids", case_cert_ids },
    { "cert_desc", case_cert_desc },
    { "cert_forged", case_cert_forged },
    { "unknown", case_unknown },
    { "oversize", case_oversize },
    { "undersize", case_undersize },
    { "bad_sum", case_bad_sum },
    { "bad_table", case_bad_table },
    { "oob", case_oob },
    { "badgen", case_badgen },
    { "oldgen", case_oldgen },
    { "replay", case_replay },
    { "replay_msg", case_replay_msg },
    { "replay_hello", case_replay_hello },
    { "forged", case_forged },
    { "malformed", case_malformed },
    { "slots", case_slots },
    { "heartbeat", case_heartbeat },
    { "lane", case_lane },
    { "stranger", case_stranger },
    { "self_claim", case_self_claim },
    { "self_desc", case_self_desc },
    { "mangled", case_mangled },
    { "flood_hello", case_flood_hello },
    { "flood_deadline", case_flood_deadline },
    { "flood_quarantine", case_flood_quarantine },
    { "flood_pieces", case_flood_pieces },
    { "flood_slots", case_flood_slots },
    { "flood_notice", case_flood_notice },
    { "bad_ack", case_bad_ack },
    { "bad_writeback", case_bad_writeback },
    { "early_result", case_early_result },
    { "reflect", case_reflect },
};

/* ---------------------------------------------------------------- setup */

static const char *key_path;
static const char *cert_stem, *cert_ca, *forged_stem;

static int rogue_opt(int c, const char *arg)
{
    switch (c) {
    case 'k':
        key_path = arg;
        return 0;
    case 'i':
        g.pose_id = strtoull(arg, NULL, 16);
        return g.pose_id != 0 ? 0 : -1;
    case 'n':
        snprintf(g.pose_name, sizeof(g.pose_name), "%s", arg);
        return 0;
    case 'c':
        cert_stem = arg;
        return 0;
    case 'a':
        cert_ca = arg;
        return 0;
    case 'b':
        g.knock_from = arg;
        return 0;
    case 'f':
        forged_stem = arg;
        return 0;
    }
    return -1;
}

static int setup(const char *sock)
{
    b10_conn_params_t cp = { .field_mask = B10_CONN_FIELD_SOCKET_PATH, .socket_path = sock };
    const void *desc;
    size_t len;
    b10_mem_t *mem;
    b10_status_t st;
    struct auth_header hdr;
    char err[512];

    if (auth_init() != 0)
        return fail("setup", "libsodium could not start");
    auth_key_local(&g.wrong);
    if (key_path != NULL) {
        if (auth_key_load(key_path, &g.key, err, sizeof(err)) != 0)
            return fail("setup", "%s", err);
        g.have_key = true;
    }
    snprintf(g.agent, sizeof(g.agent), "rogue-%ld", (long)getpid());
    cp.agent_name = g.agent;
    if ((st = b10_conn_open(&cp, &g.conn)) != B10_OK)
        return fail("setup", "b10_conn_open: %s", b10_status_name(st));
    if ((st = b10_dram_alloc(REG_BYTES, (void **)&g.reg)) != B10_OK)
        return fail("setup", "b10_dram_alloc: %s", b10_status_name(st));
    g.want = malloc(REG_BYTES);
    if (g.want == NULL)
        return fail("setup", "out of memory");
    for (uint32_t i = 0; i < REG_BYTES; i++)
        g.reg[i] = g.want[i] = pat(7, i);
    b10_mem_params_t mp = { .kind = B10_MEM_DRAM, .addr = g.reg, .length = REG_BYTES };
    if ((st = b10_mem_register(g.conn, &mp, &mem)) != B10_OK)
        return fail("setup", "b10_mem_register: %s", b10_status_name(st));
    if ((st = b10_agent_desc(g.conn, &desc, &len)) != B10_OK)
        return fail("setup", "b10_agent_desc: %s", b10_status_name(st));
    /* A descriptor is sealed, not secret: anyone reads it, as an attacker would. */
    if (auth_peek(desc, len, &hdr) != 0 || hdr.kind != AUTH_KIND_DESC)
        return fail("setup", "the agent descriptor is no envelope");
    if (g.have_key) {
        const uint8_t *p;
        size_t pl;
        if (auth_open(&g.key, AUTH_KIND_DESC, desc, len, &p, &pl) != AUTH_OK)
            return fail("setup", "the victim's descriptor does not open under our key");
    }
    B10__AgentDesc *ad = b10__agent_desc__unpack(NULL, len - AUTH_OVERHEAD,
                                                 (const uint8_t *)desc + AUTH_HEADER_BYTES);
    if (ad == NULL || ad->daemon_id == 0 || ad->worker_address.len == 0)
        return fail("setup", "the agent descriptor does not decode");
    g.victim_id = ad->daemon_id;
    snprintf(g.victim_name, sizeof(g.victim_name), "%s", ad->daemon_name);
    g.victim_key_id = hdr.key_id;
    g.victim_addr_len = ad->worker_address.len;
    g.victim_addr = malloc(g.victim_addr_len);
    if (g.victim_addr == NULL)
        return fail("setup", "out of memory");
    memcpy(g.victim_addr, ad->worker_address.data, g.victim_addr_len);
    b10__agent_desc__free_unpacked(ad, NULL);
    g.self_id = rnd64() & 0x7fffffffffffffffull;
    snprintf(g.self_name, sizeof(g.self_name), "rogue-%d", (int)getpid());
    if (cert_stem != NULL) {
        char cert[512], key[512];
        const char *name = strrchr(cert_stem, '/') != NULL ? strrchr(cert_stem, '/') + 1 : cert_stem;
        snprintf(cert, sizeof(cert), "%s.crt", cert_stem);
        snprintf(key, sizeof(key), "%s.key", cert_stem);
        if (cert_ca == NULL || nodeid_load(cert, key, cert_ca, name, &g.cert, err,
                                           sizeof(err)) != B10_OK)
            return fail("setup", "-c: %s", cert_ca == NULL ? "needs -a CA" : err);
        snprintf(g.self_name, sizeof(g.self_name), "%s", name);
    }
    if (forged_stem != NULL && forged_load(forged_stem) != 0)
        return 1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    g.self_incarnation = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    /*
     * The victim's UCX takes packets only from addresses knocked for at its
     * door, this host's included (gate.h): a key holder knocks from the
     * address its UCX connects from, as a daemon would. A refusal (a
     * certified victim, no certificate here) leaves the cases to show it.
     */
    if (g.have_key) {
        static struct knock ack;
        char why[KNOCK_DETAIL_MAX + 64];
        if (knock_door("127.0.0.1", &ack, why, sizeof(why)) != 0)
            return fail("setup", "knocking from 127.0.0.1: %s", why);
        if (ack.status != B10_OK) {
            printf("info setup: the victim's door refused us from 127.0.0.1: %s\n", ack.detail);
            g.door_refused = true;
        }
    }
    if (ucx_setup() != 0)
        return fail("setup", "UCX setup failed");
    return 0;
}

/*
 * After each case: a daemon that dropped our endpoint ends the run. After
 * a flood of CONTROLs dropped unread that may be the flood's own doing (UCX
 * gives up on the rendezvous sends the victim never took): then the case
 * stands, and the run ends.
 */
static int after_case(const char *name)
{
    if (!g.ep_failed)
        return 0;
    if (strcmp(name, "flood_pieces") == 0) {
        printf("info %s: the victim's endpoint to us failed after the flood\n", name);
        return 0;
    }
    return -fail(name, "the daemon dropped our endpoint");
}

int main(int argc, char **argv)
{
    size_t ncases = sizeof(cases) / sizeof(cases[0]);

    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    g.knock_from = "127.0.0.2";
    int sock = testout_args_more(argc, argv, cases, ncases, &timeout_ms, "k:i:n:c:a:b:f:", rogue_opt);
    if (sock < 0 || setup(argv[sock]) != 0)
        return 2;
    int bad = testout_run(argv + sock + 1, argc - sock - 1, cases, ncases, after_case);
    /* Whatever came before, a key holder's correct transfer still lands. */
    if (!g.ep_failed && g.have_key && !flooded && !g.door_refused)
        bad |= case_good("good-after") != 0;
    rlink_free(&L);
    free(last_control);
    free(last_ack);
    ucx_teardown();
    b10_conn_close(g.conn);
    b10_dram_free(g.reg);
    free(g.want);
    free(g.victim_addr);
    forged_free();
    nodeid_free(g.cert);
    return bad ? 1 : 0;
}
