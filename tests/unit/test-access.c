/*
 * test-access.c — daemon/engine/access.c: who may touch a rank's memory
 * (DESIGN.md §8, access.h).
 *
 * access.c only decides: each of its rules is a row of a table here. The
 * grant table runs access_grant over origins (a rank of this node of the
 * target's uid or another's, a rank of a remote daemon), --remote-access,
 * the target's pairings and grants, and the four operations; the span
 * table runs access_spans and access_plan_open over spans in regions open
 * to the node, closed ones, none, and a sync message beside them. Each
 * refusal's detail must name what is missing, as the one who asked reads it.
 *
 * Ranks and who holds a name are tests/unit/ranks.h (-Wl,--wrap=names_holder);
 * the peers are structs, this daemon's own among them.
 */
#include <inttypes.h>

#include "ranks.h"

#include "access.h"
#include "frame.h"
#include "log.h"
#include "plan.h"

#define REGION (64u << 10)          /* decode-0's closed region, then its open one */

static struct b10d d;
static struct peer remote;          /* "node-s", a daemon that authenticated */
static struct peer elsewhere;       /* "node-t", another */
static struct peer self;            /* this daemon's own entry: local ranks come by it */
static struct session target;       /* "decode-0", uid 1000 */
static uint8_t *mem;

static int setup(void **state)
{
    memset(&d, 0, sizeof(d));
    config_defaults(&d.cfg);
    snprintf(d.cfg.name, sizeof(d.cfg.name), "node-r");
    d.daemon_id = 0xd00d;
    d.rank_ops = &rk_ops;
    rk_reset();
    rk_peer_init(&remote, &d, "node-s", 0x5e, 7);
    rk_peer_init(&elsewhere, &d, "node-t", 0x5f, 8);
    rk_peer_init(&self, &d, "node-r", 0xd00d, 9);
    rk_init(&target, &d, "decode-0", 1000);
    rk_region(&target, 1, mem, REGION, false);
    rk_region(&target, 2, mem + REGION, REGION, true);
    rk_hold_name("mine-0", 1000);           /* a rank of this node, of the target's user */
    rk_hold_name("prefill-1", 1001);        /* ... of another user */
    return 0;
}

static int teardown(void **state)
{
    rk_free(&target);
    return 0;
}

/* ---------------------------------------------------------------- origins */

static void test_origin(void **state)
{
    struct access_origin o;

    access_origin(&o, &remote, "prefill-1");
    assert_false(o.local);
    assert_false(o.uid_known);                   /* a remote name's holder here means nothing */
    assert_ptr_equal(o.peer, &remote);
    assert_string_equal(o.agent, "prefill-1");
    access_origin(&o, &self, "prefill-1");
    assert_true(o.local);
    assert_true(o.uid_known);
    assert_int_equal(o.uid, 1001);
    access_origin(&o, &self, "nobody-holds-this");
    assert_true(o.local);
    assert_false(o.uid_known);
    /* A daemon of this one's name but another boot is not this daemon. */
    struct peer twin;
    rk_peer_init(&twin, &d, "node-r", 0xd00e, 10);
    access_origin(&o, &twin, "prefill-1");
    assert_false(o.local);
}

/* ---------------------------------------------------------------- the grant table */

enum pairing {
    UNPAIRED,
    PAIRED,                         /* the target loaded the origin's descriptor, from its daemon */
    PAIRED_ELSEWHERE,               /* ... a descriptor of that name, from another daemon */
    PAIRED_OTHER_UID,               /* ... when another uid held the name (local) */
    PAIRED_UID_UNKNOWN,             /* ... not knowing which uid held it (local) */
};

struct grant_row {
    const char *name;
    bool local;                     /* the origin is a rank of this node (by self) */
    const char *agent;
    bool paired_only;               /* --remote-access paired */
    enum pairing pairing;
    uint32_t grants;                /* the pairing's B10_GRANT_* */
    enum access_op op;
    enum access_grant want;
    const char *says;               /* refused: a piece of the detail */
};

static const struct grant_row grant_rows[] = {
    { "a local rank of the target's uid writes", true, "mine-0", false, UNPAIRED, 0,
      ACCESS_WRITE, ACCESS_FULL, NULL },
    { "a local rank of the target's uid notifies", true, "mine-0", true, UNPAIRED, 0,
      ACCESS_NOTIFY, ACCESS_FULL, NULL },
    { "a remote rank writes, --remote-access any", false, "prefill-0", false, UNPAIRED, 0,
      ACCESS_WRITE, ACCESS_FULL, NULL },
    { "a remote rank reads, --remote-access any", false, "prefill-0", false, UNPAIRED, 0,
      ACCESS_READ, ACCESS_FULL, NULL },
    { "a remote rank paired with no grant, --remote-access any", false, "prefill-0", false,
      PAIRED, 0, ACCESS_NOTIFY, ACCESS_FULL, NULL },
    { "a remote rank unpaired, --remote-access paired", false, "prefill-0", true, UNPAIRED, 0,
      ACCESS_WRITE, ACCESS_REFUSED,
      "rank 'decode-0' has not paired with 'prefill-0' of daemon node-s, and this daemon admits "
      "only remote ranks granted WRITE into its memory (B10_GRANT_WRITE) (--remote-access "
      "paired, b10_agent_pair)" },
    { "paired and granted WRITE, writes", false, "prefill-0", true, PAIRED, B10_GRANT_WRITE,
      ACCESS_WRITE, ACCESS_FULL, NULL },
    { "paired and granted WRITE, reads", false, "prefill-0", true, PAIRED, B10_GRANT_WRITE,
      ACCESS_READ, ACCESS_REFUSED,
      "rank 'decode-0' paired with 'prefill-0' of daemon node-s but did not grant it READ of "
      "its memory (B10_GRANT_READ)" },
    { "paired and granted READ, reads", false, "prefill-0", true, PAIRED, B10_GRANT_READ,
      ACCESS_READ, ACCESS_FULL, NULL },
    { "paired and granted READ, checks", false, "prefill-0", true, PAIRED, B10_GRANT_READ,
      ACCESS_CHECK, ACCESS_FULL, NULL },
    { "paired and granted WRITE, checks", false, "prefill-0", true, PAIRED, B10_GRANT_WRITE,
      ACCESS_CHECK, ACCESS_FULL, NULL },
    { "paired and granted WRITE, notifies", false, "prefill-0", true, PAIRED, B10_GRANT_WRITE,
      ACCESS_NOTIFY, ACCESS_FULL, NULL },
    { "paired and granted READ, notifies", false, "prefill-0", true, PAIRED, B10_GRANT_READ,
      ACCESS_NOTIFY, ACCESS_REFUSED, "did not grant it a notice (B10_GRANT_WRITE)" },
    { "paired and granted nothing: loading alone grants nothing", false, "prefill-0", true,
      PAIRED, 0, ACCESS_CHECK, ACCESS_REFUSED,
      "did not grant it a CHECK of its spans (B10_GRANT_WRITE or B10_GRANT_READ)" },
    { "the name paired, from another daemon", false, "prefill-0", true, PAIRED_ELSEWHERE,
      B10_GRANT_WRITE, ACCESS_WRITE, ACCESS_REFUSED, "has not paired with 'prefill-0' of daemon "
      "node-s" },
    { "a local rank of another uid, unpaired, writes", true, "prefill-1", true, UNPAIRED, 0,
      ACCESS_WRITE, ACCESS_OPEN_ONLY, NULL },
    { "... reads", true, "prefill-1", false, UNPAIRED, 0, ACCESS_READ, ACCESS_OPEN_ONLY, NULL },
    { "... checks", true, "prefill-1", false, UNPAIRED, 0, ACCESS_CHECK, ACCESS_OPEN_ONLY, NULL },
    { "... notifies: no open region admits a notice", true, "prefill-1", false, UNPAIRED, 0,
      ACCESS_NOTIFY, ACCESS_REFUSED,
      "rank 'decode-0' (uid 1000) has not paired with 'prefill-1' (uid 1001): a rank of another "
      "user needs its grant of a notice (B10_GRANT_WRITE) (b10_agent_pair)" },
    { "a local rank of another uid, paired and granted WRITE", true, "prefill-1", false, PAIRED,
      B10_GRANT_WRITE, ACCESS_NOTIFY, ACCESS_FULL, NULL },
    { "a local rank paired and granted READ, writes", true, "prefill-1", false, PAIRED,
      B10_GRANT_READ, ACCESS_WRITE, ACCESS_OPEN_ONLY, NULL },
    { "a local rank paired and granted READ, notifies", true, "prefill-1", false, PAIRED,
      B10_GRANT_READ, ACCESS_NOTIFY, ACCESS_REFUSED,
      "rank 'decode-0' paired with 'prefill-1' but did not grant it a notice" },
    { "paired when another uid held the name", true, "prefill-1", false, PAIRED_OTHER_UID,
      B10_GRANT_WRITE, ACCESS_NOTIFY, ACCESS_REFUSED, "has not paired with 'prefill-1' (uid 1001)" },
    { "paired not knowing whose the name was", true, "prefill-1", false, PAIRED_UID_UNKNOWN,
      B10_GRANT_WRITE, ACCESS_NOTIFY, ACCESS_REFUSED, "has not paired with 'prefill-1'" },
    { "a local name no one holds", true, "gone-0", false, UNPAIRED, 0, ACCESS_NOTIFY,
      ACCESS_REFUSED, "has not paired with 'gone-0' (no uid)" },
    { "a local name no one holds, paired", true, "gone-0", false, PAIRED, B10_GRANT_WRITE,
      ACCESS_WRITE, ACCESS_OPEN_ONLY, NULL },
};

/* The target's pairing of row's origin, as the row says. */
static void pair(const struct grant_row *row, struct peer *by)
{
    if (row->pairing == UNPAIRED)
        return;
    struct remote_agent *a = rk_pair(&target, row->agent,
                                     row->pairing == PAIRED_ELSEWHERE ? &elsewhere : by,
                                     row->grants);
    uid_t holder = 0;
    bool held = __wrap_names_holder(NULL, row->agent, &holder);
    a->uid_known = row->local && row->pairing != PAIRED_UID_UNKNOWN && held;
    a->uid = row->pairing == PAIRED_OTHER_UID ? holder + 1 : holder;
    if (row->local && !held && row->pairing == PAIRED)
        a->uid_known = false;
}

static void test_grant_table(void **state)
{
    for (size_t i = 0; i < sizeof(grant_rows) / sizeof(grant_rows[0]); i++) {
        const struct grant_row *row = &grant_rows[i];
        struct peer *by = row->local ? &self : &remote;
        struct access_origin o;
        char detail[512] = "";

        setup(state);
        d.cfg.remote_access = row->paired_only ? CONFIG_REMOTE_PAIRED : CONFIG_REMOTE_ANY;
        pair(row, by);
        access_origin(&o, by, row->agent);
        enum access_grant got = access_grant(&target, &o, row->op, detail, sizeof(detail));
        if (got != row->want || (row->says != NULL && strstr(detail, row->says) == NULL))
            fail_msg("%s: grant %d \"%s\"; expected %d \"%s\"", row->name, got, detail, row->want,
                     row->says != NULL ? row->says : "");
        teardown(state);
    }
}

/* ---------------------------------------------------------------- the span table */

enum origin_kind {
    MINE,                           /* a local rank of the target's uid: ACCESS_FULL */
    OTHER_UID,                      /* a local rank of another uid, unpaired: ACCESS_OPEN_ONLY */
    PAIRED_READ,                    /* remote, --remote-access paired, granted READ only */
    UNPAIRED_REMOTE,                /* remote, --remote-access paired, unpaired: ACCESS_REFUSED */
};

struct span { uint64_t off, len; };

struct span_row {
    const char *name;
    enum origin_kind origin;
    enum access_op op;
    bool notice;
    struct span spans[3];           /* offsets into the target's memory; len 0 ends (but for the first) */
    size_t count;
    b10_status_t want;
    enum access_grant grant;
    const char *says;
};

#define CLOSED_AT 0
#define OPEN_AT REGION
#define NONE_AT (2 * REGION)

static const struct span_row span_rows[] = {
    { "the target's own user, anywhere registered", MINE, ACCESS_WRITE, true,
      { { CLOSED_AT, 4096 }, { OPEN_AT, 4096 } }, 2, B10_OK, ACCESS_FULL, NULL },
    { "another uid, all in the open region", OTHER_UID, ACCESS_WRITE, false,
      { { OPEN_AT, 4096 }, { OPEN_AT + 8192, REGION - 8192 } }, 2, B10_OK, ACCESS_OPEN_ONLY,
      NULL },
    { "another uid, a span of no bytes", OTHER_UID, ACCESS_READ, false, { { NONE_AT, 0 } }, 1,
      B10_OK, ACCESS_OPEN_ONLY, NULL },
    { "another uid, the second span closed", OTHER_UID, ACCESS_READ, false,
      { { OPEN_AT, 4096 }, { CLOSED_AT + 4096, 4096 } }, 2, B10_ERR_PERMISSION, ACCESS_OPEN_ONLY,
      "+4096 of rank 'decode-0' (uid 1000) is not wholly in regions it opened to the node, and it "
      "has not granted 'prefill-1' (uid 1001) READ of its memory (B10_GRANT_READ) "
      "(b10_agent_pair)" },
    { "another uid, across from closed into open", OTHER_UID, ACCESS_WRITE, false,
      { { OPEN_AT - 100, 200 } }, 1, B10_ERR_PERMISSION, ACCESS_OPEN_ONLY,
      "is not wholly in regions it opened to the node" },
    { "another uid, past every region: no answer where memory lies", OTHER_UID, ACCESS_CHECK,
      false, { { NONE_AT, 4096 } }, 1, B10_ERR_PERMISSION, ACCESS_OPEN_ONLY,
      "is not wholly in regions it opened to the node" },
    { "another uid, with a notice", OTHER_UID, ACCESS_WRITE, true, { { OPEN_AT, 4096 } }, 1,
      B10_ERR_PERMISSION, ACCESS_OPEN_ONLY,
      "rank 'decode-0' (uid 1000) has not granted 'prefill-1' (uid 1001) B10_GRANT_WRITE: a sync "
      "message is a notice, which an open region does not admit" },
    { "granted READ, reads with a notice: the notice needs WRITE", PAIRED_READ, ACCESS_READ, true,
      { { CLOSED_AT, 4096 } }, 1, B10_ERR_PERMISSION, ACCESS_FULL,
      "did not grant it a notice (B10_GRANT_WRITE)" },
    { "granted READ, reads", PAIRED_READ, ACCESS_READ, false, { { NONE_AT, 4096 } }, 1, B10_OK,
      ACCESS_FULL, NULL },
    { "unpaired under --remote-access paired", UNPAIRED_REMOTE, ACCESS_WRITE, false,
      { { OPEN_AT, 4096 } }, 1, B10_ERR_PERMISSION, ACCESS_REFUSED,
      "has not paired with 'prefill-0' of daemon node-s" },
};

/* The origin a span row names, the target's pairing and the daemon's setting made for it. */
static void span_origin(enum origin_kind kind, struct access_origin *o)
{
    switch (kind) {
    case MINE:
        access_origin(o, &self, "mine-0");
        return;
    case OTHER_UID:
        access_origin(o, &self, "prefill-1");
        return;
    case PAIRED_READ:
        rk_pair(&target, "prefill-0", &remote, B10_GRANT_READ);
        /* fall through */
    case UNPAIRED_REMOTE:
        d.cfg.remote_access = CONFIG_REMOTE_PAIRED;
        access_origin(o, &remote, "prefill-0");
        return;
    }
}

static void test_span_table(void **state)
{
    for (size_t i = 0; i < sizeof(span_rows) / sizeof(span_rows[0]); i++) {
        const struct span_row *row = &span_rows[i];
        uint8_t spans[3 * SPAN_BYTES];
        struct access_origin o;
        char detail[512] = "";
        enum access_grant grant = (enum access_grant)-1;

        setup(state);
        span_origin(row->origin, &o);
        for (size_t k = 0; k < row->count; k++) {
            frame_put_u64(spans + k * SPAN_BYTES, (uintptr_t)mem + row->spans[k].off);
            frame_put_u64(spans + k * SPAN_BYTES + 8, row->spans[k].len);
        }
        b10_status_t st = access_spans(&target, &o, row->op, spans, row->count, row->notice,
                                       &grant, detail, sizeof(detail));
        if (st != row->want || grant != row->grant ||
            (row->says != NULL && strstr(detail, row->says) == NULL))
            fail_msg("%s: %s, grant %d, \"%s\"; expected %s, grant %d, \"%s\"", row->name,
                     b10_status_name(st), grant, detail, b10_status_name(row->want), row->grant,
                     row->says != NULL ? row->says : "");
        /* The grant is optional to ask for, and asking it changes nothing. */
        assert_int_equal(access_spans(&target, &o, row->op, spans, row->count, row->notice, NULL,
                                      detail, sizeof(detail)), row->want);
        teardown(state);
    }
}

/* A refused span is named by its address, so the one who asked knows which. */
static void test_span_named(void **state)
{
    uint8_t spans[2 * SPAN_BYTES];
    struct access_origin o;
    char detail[512], want[64];

    access_origin(&o, &self, "prefill-1");
    frame_put_u64(spans, (uintptr_t)mem + OPEN_AT);
    frame_put_u64(spans + 8, 16);
    frame_put_u64(spans + 16, (uintptr_t)mem + 32);
    frame_put_u64(spans + 24, 16);
    assert_int_equal(access_spans(&target, &o, ACCESS_WRITE, spans, 2, false, NULL, detail,
                                  sizeof(detail)), B10_ERR_PERMISSION);
    snprintf(want, sizeof(want), "span 0x%" PRIx64 "+16 ", (uint64_t)(uintptr_t)mem + 32);
    assert_non_null(strstr(detail, want));
}

/* ---------------------------------------------------------------- a plan's destinations */

static struct plan *plan_into(const struct span *dst, size_t count)
{
    uint8_t src[4 * SPAN_BYTES], dsts[4 * SPAN_BYTES];
    char detail[256];
    struct plan *plan = NULL;

    for (size_t i = 0; i < count; i++) {
        frame_put_u64(src + i * SPAN_BYTES, 0x10000000u + i * 0x100000u);
        frame_put_u64(src + i * SPAN_BYTES + 8, dst[i].len);
        frame_put_u64(dsts + i * SPAN_BYTES, (uintptr_t)mem + dst[i].off);
        frame_put_u64(dsts + i * SPAN_BYTES + 8, dst[i].len);
    }
    assert_int_equal(plan_build(src, dsts, count, 1u << 20, &plan, detail, sizeof(detail)), B10_OK);
    return plan;
}

static void test_plan_open(void **state)
{
    static const struct span open[2] = { { OPEN_AT, 4096 }, { OPEN_AT + 8192, 4096 } };
    static const struct span half[2] = { { OPEN_AT, 4096 }, { CLOSED_AT, 4096 } };
    struct access_origin o;
    char detail[512] = "";

    access_origin(&o, &self, "prefill-1");
    struct plan *plan = plan_into(open, 2);
    assert_int_equal(access_plan_open(&target, &o, plan, detail, sizeof(detail)), B10_OK);
    plan_free(plan);
    plan = plan_into(half, 2);
    assert_int_equal(access_plan_open(&target, &o, plan, detail, sizeof(detail)),
                     B10_ERR_PERMISSION);
    assert_non_null(strstr(detail, "WRITE into its memory (B10_GRANT_WRITE)"));
    assert_non_null(strstr(detail, "is not wholly in regions it opened to the node"));
    plan_free(plan);
}

/* The notice's refusal names both ranks and both uids. */
static void test_notice_refused(void **state)
{
    struct access_origin o;
    char detail[512];

    access_origin(&o, &self, "gone-0");
    assert_int_equal(access_notice_refused(&target, &o, detail, sizeof(detail)),
                     B10_ERR_PERMISSION);
    assert_string_equal(detail, "rank 'decode-0' (uid 1000) has not granted 'gone-0' (no uid) "
                        "B10_GRANT_WRITE: a sync message is a notice, which an open region does "
                        "not admit");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_origin, setup, teardown),
        cmocka_unit_test(test_grant_table),
        cmocka_unit_test(test_span_table),
        cmocka_unit_test_setup_teardown(test_span_named, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plan_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_notice_refused, setup, teardown),
    };
    log_setup(LOG_LEVEL_ERR, "test-access");
    mem = aligned_alloc(4096, 2 * REGION);
    assert_non_null(mem);
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    free(mem);
    return failed;
}
