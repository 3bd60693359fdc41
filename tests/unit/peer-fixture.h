/*
 * peer-fixture.h — the daemon the link rooms' unit tests run (test-peer*.c):
 * a struct b10d on a real libuv loop, with a clock of the test's, real tags
 * and a real cluster key, started and stopped by peer_start() and
 * peer_stop() as b10d.c does. Below it the wire is fakes (-Wl,--wrap, the
 * Makefile's PEER_WRAPS): an endpoint is a counted allocation, and a send
 * is kept for the test to open; the quarantine only counts what it is given.
 */
#ifndef B10_TEST_PEER_FIXTURE_H
#define B10_TEST_PEER_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "b10d.h"
#include "peer-int.h"
#include "quarantine.h"
#include "tags.h"
#include "wireaddr.h"

static uv_loop_t fx_loop;
static struct b10d fx_d;
static uint64_t fx_clock_ms;
static char fx_dir[64];

/* ---------------------------------------------------------------- the wire, faked */

struct wire_ep {
    void *user;
};
static int fx_eps_open;                 /* made and not yet closed */

struct fx_sent {
    struct wire_ep *ep;
    uint64_t tag;
    uint8_t *buf;
    size_t length;
};
#define FX_SENT_MAX 64
static struct fx_sent fx_sent[FX_SENT_MAX];
static unsigned fx_nsent;

static uint8_t fx_worker_address[64];  /* a well-formed worker address, one lane */
static size_t fx_worker_address_length;

b10_status_t __wrap_wire_ep_create(struct wire *wire, const void *addr, size_t length,
                                   void *user, struct wire_ep **ep_p);
b10_status_t __wrap_wire_ep_create(struct wire *wire, const void *addr, size_t length,
                                   void *user, struct wire_ep **ep_p)
{
    struct wire_ep *ep = calloc(1, sizeof(*ep));
    assert_non_null(ep);
    ep->user = user;
    fx_eps_open++;
    *ep_p = ep;
    return B10_OK;
}

void __wrap_wire_ep_close(struct wire_ep *ep);
void __wrap_wire_ep_close(struct wire_ep *ep)
{
    fx_eps_open--;
    free(ep);
}

void __wrap_wire_ep_set_user(struct wire_ep *ep, void *user);
void __wrap_wire_ep_set_user(struct wire_ep *ep, void *user)
{
    ep->user = user;
}

const char *__wrap_wire_ep_transports(struct wire_ep *ep);
const char *__wrap_wire_ep_transports(struct wire_ep *ep)
{
    return "fake";
}

unsigned __wrap_wire_ep_lanes(const struct wire_ep *ep);
unsigned __wrap_wire_ep_lanes(const struct wire_ep *ep)
{
    return 0;
}

void __wrap_wire_address(struct wire *wire, const void **addr_p, size_t *length_p);
void __wrap_wire_address(struct wire *wire, const void **addr_p, size_t *length_p)
{
    *addr_p = fx_worker_address;
    *length_p = fx_worker_address_length;
}

b10_status_t __wrap_wire_send_owned(struct wire_ep *ep, uint64_t tag, void *buf, size_t length);
b10_status_t __wrap_wire_send_owned(struct wire_ep *ep, uint64_t tag, void *buf, size_t length)
{
    assert_non_null(ep);
    assert_true(fx_nsent < FX_SENT_MAX);
    fx_sent[fx_nsent++] = (struct fx_sent){ ep, tag, buf, length };
    return B10_OK;
}

/* Sends on tag since the test began. */
static inline unsigned fx_sent_on(uint64_t tag)
{
    unsigned n = 0;
    for (unsigned i = 0; i < fx_nsent; i++)
        n += fx_sent[i].tag == tag;
    return n;
}

/* ---------------------------------------------------------------- below: quarantine, staging */

static unsigned fx_generations_retired; /* QUARANTINE_GENERATION entries */

void __wrap_quarantine_add(struct quarantine *q, enum quarantine_kind kind, uint64_t id,
                           uint64_t bytes, b10_status_t status, uint64_t xfer_id,
                           uint64_t peer_id, struct view *view, uint64_t *charge);
void __wrap_quarantine_add(struct quarantine *q, enum quarantine_kind kind, uint64_t id,
                           uint64_t bytes, b10_status_t status, uint64_t xfer_id,
                           uint64_t peer_id, struct view *view, uint64_t *charge)
{
    if (kind == QUARANTINE_GENERATION)
        fx_generations_retired++;
}

uint64_t __wrap_staging_view_bytes(const struct staging *s);
uint64_t __wrap_staging_view_bytes(const struct staging *s)
{
    return UINT64_C(1) << 20;
}

/* ---------------------------------------------------------------- above: the work on a link */

/* A transfer as the link rooms see it: a link_user that records how it ended. */
struct fx_work {
    struct link_user u;
    struct tag_link link;
    unsigned lost;
    b10_status_t status;
    char detail[256];
    struct fx_work *takes;      /* failed by this one's failure, as a READ takes its write-back */
};

/* The work failed since the test began, in the order it was told. */
#define FX_LOST_MAX 32
static struct fx_work *fx_lost[FX_LOST_MAX];
static unsigned fx_nlost;

/*
 * It leaves the peer's list, as link_user_ops.lost must, and takes what it
 * takes with it. Told twice, it fails the test: the peer room then called
 * a hook on a node that had left its list (and, in the daemon, may be freed).
 */
static inline void fx_work_lost(struct link_user *u, b10_status_t status, const char *detail)
{
    struct fx_work *w = (struct fx_work *)u;
    if (w->lost > 0)
        fail_msg("work %p told it was lost twice (\"%s\", then \"%s\")", (void *)w, w->detail,
                 detail);
    list_remove(&u->node);
    w->lost++;
    w->status = status;
    snprintf(w->detail, sizeof(w->detail), "%s", detail);
    if (fx_nlost < FX_LOST_MAX)
        fx_lost[fx_nlost++] = w;
    if (w->takes != NULL && w->takes->lost == 0)
        fx_work_lost(&w->takes->u, status, detail);
}

static inline void fx_work_up(struct link_user *u)
{
}

static const struct link_user_ops fx_work_ops = { .up = fx_work_up, .lost = fx_work_lost };

/* Put w on the peer's transfers, running on link generation gen. */
static inline void fx_work_start(struct fx_work *w, struct peer *p, uint64_t gen)
{
    memset(w, 0, sizeof(*w));
    w->u.ops = &fx_work_ops;
    w->link.gen = gen;
    w->u.link = &w->link;
    list_insert_tail(&p->xfers, &w->u.node);
}

/* None of the link's messages may reach the engine in these tests. */
static const struct peer_hooks fx_hooks;

/* ---------------------------------------------------------------- the daemon */

static uint64_t fx_now_ms(struct b10d *d)
{
    return fx_clock_ms;
}

/*
 * What a test sets apart from the defaults, before the daemon starts: its
 * initial state (cmocka_unit_test_prestate_setup_teardown); 0 keeps one.
 */
struct fx_settings {
    uint32_t max_peers;
    uint32_t peer_idle_ms;
    uint32_t max_hellos_per_s;
    uint32_t peer_timeout_ms;
};

/* Start the link rooms as b10d_start does, liveness included. */
static inline int fx_setup(void **state)
{
    const struct fx_settings *set = *state;
    char err[256], key[128];
    uint64_t key_id;
    const void *addrs[1] = { fx_worker_address + 32 };
    size_t lengths[1] = { 16 };

    assert_int_equal(uv_loop_init(&fx_loop), 0);
    memset(&fx_d, 0, sizeof(fx_d));
    config_defaults(&fx_d.cfg);
    snprintf(fx_d.cfg.name, sizeof(fx_d.cfg.name), "node-self");
    fx_d.loop = &fx_loop;
    fx_d.now_ms = fx_now_ms;
    fx_d.daemon_id = 0x5e1f;
    fx_d.incarnation = 1000;
    list_init(&fx_d.peers);
    assert_non_null(fx_d.tags = tags_create(1024, 0));
    fx_clock_ms = 1000;
    fx_eps_open = 0;
    fx_nsent = 0;
    fx_generations_retired = 0;
    fx_nlost = 0;
    fx_worker_address_length = wireaddr_size(1, lengths);
    assert_true(fx_worker_address_length <= 32);
    wireaddr_pack(fx_worker_address, 1, addrs, lengths);

    snprintf(fx_dir, sizeof(fx_dir), "/tmp/b10-test-peer.XXXXXX");
    assert_non_null(mkdtemp(fx_dir));
    snprintf(key, sizeof(key), "%s/cluster.key", fx_dir);
    assert_int_equal(auth_init(), B10_OK);
    assert_int_equal(auth_key_generate(key, &key_id, err, sizeof(err)), B10_OK);
    snprintf(fx_d.cfg.cluster_key, sizeof(fx_d.cfg.cluster_key), "%s", key);
    if (set != NULL) {
        fx_d.cfg.max_peers = set->max_peers ? set->max_peers : fx_d.cfg.max_peers;
        fx_d.cfg.peer_idle_ms = set->peer_idle_ms ? set->peer_idle_ms : fx_d.cfg.peer_idle_ms;
        fx_d.cfg.max_hellos_per_s = set->max_hellos_per_s ? set->max_hellos_per_s
                                                          : fx_d.cfg.max_hellos_per_s;
        fx_d.cfg.peer_timeout_ms = set->peer_timeout_ms ? set->peer_timeout_ms
                                                        : fx_d.cfg.peer_timeout_ms;
    }
    assert_int_equal(peer_start(&fx_d, &fx_hooks), 0);
    assert_int_equal(fx_d.keys.keys[0].kind, AUTH_KEY_CLUSTER);
    peer_liveness_start(&fx_d);
    return 0;
}

/* Stop as b10d_stop does; every handle closed, every endpoint closed, nothing left on the loop. */
static inline int fx_teardown(void **state)
{
    char key[128];

    peer_liveness_stop(&fx_d);
    peer_close_all(&fx_d);
    peer_stop(&fx_d);
    peer_free_all(&fx_d);
    assert_int_equal(uv_run(&fx_loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&fx_loop), 0);
    assert_int_equal(fx_eps_open, 0);
    tags_destroy(fx_d.tags);
    for (unsigned i = 0; i < fx_nsent; i++)
        free(fx_sent[i].buf);
    snprintf(key, sizeof(key), "%s/cluster.key", fx_dir);
    unlink(key);
    rmdir(fx_dir);
    return 0;
}

/* The entry an agent descriptor of (name, daemon_id, incarnation) names. */
static inline b10_status_t fx_get(const char *name, uint64_t daemon_id, uint64_t incarnation,
                                  struct peer **peer_p, char *detail, size_t detail_len)
{
    struct peer_desc desc = {
        .name = name, .daemon_id = daemon_id, .incarnation = incarnation,
        .address = fx_worker_address, .address_length = fx_worker_address_length,
    };
    return peer_get(&fx_d, &desc, peer_p, detail, detail_len);
}

static inline struct peer *fx_peer(const char *name, uint64_t daemon_id, uint64_t incarnation)
{
    struct peer *p = NULL;
    char detail[256];

    assert_int_equal(fx_get(name, daemon_id, incarnation, &p, detail, sizeof(detail)), B10_OK);
    assert_non_null(p);
    return p;
}

#endif
