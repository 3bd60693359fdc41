/*
 * ranks.h — the node's ranks as the engine's unit tests see them
 * (test-xfer-recv, test-ask, test-access): sessions the test makes, with a
 * name, a uid, regions over its own buffers and the remote agents they
 * loaded, reached through a rank_ops table of fakes (rank.h) that records
 * what the engine tells ranks. Who holds a name on this node (names.h) is
 * the test's table too: __wrap_names_holder, for binaries linked with
 * -Wl,--wrap=names_holder. A peer here is a struct the test fills, not a
 * link: the tests wrap what would reach the wire.
 */
#ifndef B10_TEST_RANKS_H
#define B10_TEST_RANKS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "b10d.h"
#include "mem.h"
#include "names.h"
#include "peer.h"
#include "rank.h"
#include "session.h"

#define RK_MAX 4

static struct session *rk_ranks[RK_MAX];
static unsigned rk_nranks;

/* What ranks were told: the last notice and answer, and how many of each. */
struct rk_told {
    unsigned notices;
    struct session *notice_to;
    char notice_from[256];
    uint8_t notice[B10_SYNC_MSG_MAX + 1];
    size_t notice_length;
    unsigned answers;
    uint64_t answer_seq;
    b10_status_t answer_status;
    char answer_detail[512];
    unsigned xfers_done;
};
static struct rk_told rk_told;

/* ---------------------------------------------------------------- rank_ops */

static struct session *rk_find(struct b10d *d, const char *agent)
{
    for (unsigned i = 0; i < rk_nranks; i++)
        if (strcmp(rk_ranks[i]->agent, agent) == 0)
            return rk_ranks[i];
    return NULL;
}

static struct remote_agent *rk_agent(struct session *s, const char *name)
{
    struct list *pos;
    for (pos = s->agents.next; pos != &s->agents; pos = pos->next) {
        struct remote_agent *a = list_entry(pos, struct remote_agent, node);
        if (strcmp(a->name, name) == 0)
            return a;
    }
    return NULL;
}

static bool rk_agent_uid(struct session *s, const char *name, uint32_t *uid_p)
{
    struct remote_agent *a = rk_agent(s, name);
    if (a == NULL || !a->uid_known)
        return false;
    *uid_p = a->uid;
    return true;
}

static uint32_t rk_uid(struct session *s)
{
    return s->uid;
}

static b10_status_t rk_agent_use(struct session *s, const char *name, struct remote_agent **agent_p,
                                 char *detail, size_t detail_len)
{
    struct remote_agent *a = rk_agent(s, name);
    if (a == NULL) {
        snprintf(detail, detail_len, "no agent '%s' loaded", name);
        return B10_ERR_UNKNOWN_AGENT;
    }
    *agent_p = a;
    return B10_OK;
}

static void rk_xfer_done(struct session *s, const struct xfer *x)
{
    rk_told.xfers_done++;
}

static void rk_answer(struct session *s, uint64_t seq, b10_status_t status, const char *detail)
{
    rk_told.answers++;
    rk_told.answer_seq = seq;
    rk_told.answer_status = status;
    snprintf(rk_told.answer_detail, sizeof(rk_told.answer_detail), "%s", detail);
}

static void rk_notice(struct session *s, const char *from, const uint8_t *data, size_t length)
{
    assert_true(length <= sizeof(rk_told.notice));
    rk_told.notices++;
    rk_told.notice_to = s;
    snprintf(rk_told.notice_from, sizeof(rk_told.notice_from), "%s", from);
    memcpy(rk_told.notice, data, length);
    rk_told.notice_length = length;
}

/* As session_notice_room, with no client socket holding notices unread. */
static bool rk_notice_room(struct session *s, size_t length)
{
    return s->notice_reserved + length <= s->d->cfg.max_notice_bytes;
}

static void rk_notice_reserve(struct session *s, size_t length)
{
    s->notice_reserved += length;
}

static void rk_notice_release(struct session *s, size_t length)
{
    assert_true(s->notice_reserved >= length);
    s->notice_reserved -= length;
}

static const struct rank_ops rk_ops = {
    .find = rk_find,
    .agent = rk_agent,
    .agent_uid = rk_agent_uid,
    .uid = rk_uid,
    .agent_use = rk_agent_use,
    .xfer_done = rk_xfer_done,
    .answer = rk_answer,
    .notice = rk_notice,
    .notice_room = rk_notice_room,
    .notice_reserve = rk_notice_reserve,
    .notice_release = rk_notice_release,
};

/* ---------------------------------------------------------------- who holds a name here */

struct rk_name {
    const char *name;
    uid_t uid;
};
static struct rk_name rk_names[8];
static unsigned rk_nnames;

bool __wrap_names_holder(const struct names *n, const char *name, uid_t *uid_p);
bool __wrap_names_holder(const struct names *n, const char *name, uid_t *uid_p)
{
    for (unsigned i = 0; i < rk_nnames; i++)
        if (strcmp(rk_names[i].name, name) == 0) {
            *uid_p = rk_names[i].uid;
            return true;
        }
    return false;
}

static inline void rk_hold_name(const char *name, uid_t uid)
{
    assert_true(rk_nnames < sizeof(rk_names) / sizeof(rk_names[0]));
    rk_names[rk_nnames++] = (struct rk_name){ name, uid };
}

/* ---------------------------------------------------------------- making them */

/* Forget every rank, name and record (each test's setup). */
static inline void rk_reset(void)
{
    rk_nranks = 0;
    rk_nnames = 0;
    memset(&rk_told, 0, sizeof(rk_told));
}

/* A rank of the node named agent, of uid, with no regions yet; d reaches it through rk_ops. */
static inline void rk_init(struct session *s, struct b10d *d, const char *agent, uid_t uid)
{
    assert_true(rk_nranks < RK_MAX);
    memset(s, 0, sizeof(*s));
    s->d = d;
    s->uid = uid;
    snprintf(s->agent, sizeof(s->agent), "%s", agent);
    mem_table_init(&s->mem, 16, UINT64_C(1) << 40);
    list_init(&s->agents);
    list_init(&s->xfers);
    list_init(&s->targets);
    list_init(&s->locals);
    list_init(&s->asks);
    list_init(&s->deregs);
    rk_ranks[rk_nranks++] = s;
    rk_hold_name(s->agent, uid);
}

/* The test's buffers are the test's: closing such a region releases nothing. */
static inline void rk_close_nothing(struct region *r)
{
    (void)r;
}

/* DRAM's operations, but for its close: the kind of rk_region's regions. */
static inline const struct mem_kind_ops *rk_dram_ops(void)
{
    static struct mem_kind_ops ops;
    ops = dram_kind;
    ops.close = rk_close_nothing;
    return &ops;
}

/* A DRAM region of s over the test's buffer base (the rank's address is the buffer's). */
static inline struct region *rk_region(struct session *s, uint64_t id, void *base, uint64_t length,
                                       bool open)
{
    char detail[256];
    struct region *r = calloc(1, sizeof(*r));
    assert_non_null(r);
    *r = (struct region){ .id = id, .addr = (uintptr_t)base, .length = length,
                          .ops = rk_dram_ops(), .open = open, .base = base, .proc_fd = -1,
                          .device = -1, .hole_fd = -1, .refs = 1 };
    assert_int_equal(mem_table_insert(&s->mem, r, detail, sizeof(detail)), B10_OK);
    return r;
}

/* s loaded the descriptor of agent name of peer's daemon, and granted it grants (B10_GRANT_*). */
static inline struct remote_agent *rk_pair(struct session *s, const char *name, struct peer *peer,
                                           uint32_t grants)
{
    struct remote_agent *a = calloc(1, sizeof(*a));
    assert_non_null(a);
    snprintf(a->name, sizeof(a->name), "%s", name);
    a->peer = peer;
    a->grants = grants;
    list_insert_tail(&s->agents, &a->node);
    s->nagents++;
    return a;
}

/* s's regions (the test's buffers stay) and remote agents go. */
static inline void rk_free(struct session *s)
{
    for (uint32_t i = 0; i < s->mem.count; i++) {
        assert_int_equal(s->mem.regions[i]->refs, 1);     /* no copy still holds it */
        free(s->mem.regions[i]);
    }
    free(s->mem.regions);
    memset(&s->mem, 0, sizeof(s->mem));
    while (!list_empty(&s->agents)) {
        struct remote_agent *a = list_entry(s->agents.next, struct remote_agent, node);
        list_remove(&a->node);
        free(a);
    }
}

/* A remote daemon's entry as the engine reads it: named, of its boot, its inbound link of gen up. */
static inline void rk_peer_init(struct peer *p, struct b10d *d, const char *name, uint64_t daemon_id,
                                uint64_t gen)
{
    memset(p, 0, sizeof(*p));
    p->d = d;
    snprintf(p->name, sizeof(p->name), "%s", name);
    p->daemon_id = daemon_id;
    p->in.tags.gen = gen;
    p->in_up = true;
    p->out.tags.gen = gen + 1;
    p->state = PEER_UP;
    list_init(&p->node);
    list_init(&p->waiting);
    list_init(&p->xfers);
    list_init(&p->asks);
}

#endif
