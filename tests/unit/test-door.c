/*
 * test-door.c — daemon/io/door.c: doors on a real libuv loop, on 127.0.0.1
 * (and ::1 where the host has it), knocking at each other.
 *
 * Two doors of one cluster key: a knock lets the knocker in (its addresses
 * on the other's gate, and a listener that gate guards takes it from then
 * on) and the answer lets the other in on the knocker's gate. A door of
 * another key drops the knock unanswered: the knock fails
 * B10_ERR_PEER_UNREACHABLE after every endpoint, both gates stay empty. A
 * door where nothing listens is passed for the next; one that never answers
 * ends the knock at its timeout. A cancelled knock, and a door destroyed at
 * each step of a knock on either side, never call back after and leave
 * nothing behind (the SAN=1 build checks).
 *
 * Then each side played by hand. As a door: the knocker believes only an
 * answer to its own knock under its key, and a refusal ends the knock with
 * the door's status. As a knocker: the door answers a key holder's refusals
 * (a source it does not list, a clock a minute off), drops a stranger's, a
 * malformed, a cut or a slow knock (at once, or at the whole knock's
 * bound), and what comes above its rate. A knock no door answered is
 * knocked again while its caller says so; a refusal, or doors where
 * nothing listens, end it without asking.
 *
 * The door's slots: its admission from tables (a source at its bound, a
 * full pool, whole knocks never evicted, IPv4 and IPv6 apart), then on
 * real sockets, the IPv4 pool flooded with slow connections from many
 * addresses of 127.0.0.0/8 while a daemon's knock is let in.
 *
 * Certified doors (node certificates, nodeid.h): a certified knock for
 * the right name is let in both ways; a key holder's knock without a
 * certificate is refused (answered, with the reason) and its addresses
 * stay off the gate; so is a certified node's knock under another name,
 * and a proof at an uncertified door. Proofs are checked within the knock
 * rate. A certified knocker lets in only an answer proven for the node it
 * knocked for: not an unsigned one, not another node's.
 *
 * Each gate's first seal is made keeping every door: all doors live in this
 * one process, and a gate seals every TCP listener of the process it does
 * not keep at its first seal.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "keys.h"
#include "sock.h"

#include "door.h"
#include "wireaddr.h"
#include "knock.h"
#include "nodeid.h"

static uv_loop_t loop;
static uv_timer_t deadline;
static bool deadline_passed;
static struct auth_key key, other_key;
static struct auth_keyring ring, other_ring;    /* the cluster's key; another cluster's */
/* Certified nodes of one CA, by name. */
static char cert_dir[64];
static struct nodeid *id_a, *id_b, *id_x;

/* ---------------------------------------------------------------- the loop */

static void on_deadline(uv_timer_t *t)
{
    deadline_passed = true;
}

/* Run the loop until done(arg), or for ms at most; whether done came. */
static bool run_until(bool (*done)(const void *arg), const void *arg, uint64_t ms)
{
    deadline_passed = false;
    uv_timer_start(&deadline, on_deadline, ms, 0);
    while ((done == NULL || !done(arg)) && !deadline_passed)
        uv_run(&loop, UV_RUN_ONCE);
    uv_timer_stop(&deadline);
    return done != NULL && done(arg);
}

static void run_for(uint64_t ms)
{
    run_until(NULL, NULL, ms);
}

static int group_setup(void **state)
{
    if (keys_setup() != 0 || keys_make("cluster.key", &key) != 0 ||
        keys_make("other.key", &other_key) != 0 || auth_keyring_add(&ring, &key) != 0 ||
        auth_keyring_add(&other_ring, &other_key) != 0 || uv_loop_init(&loop) != 0 ||
        uv_timer_init(&loop, &deadline) != 0)
        return -1;
    char why[512];
    snprintf(cert_dir, sizeof(cert_dir), "/tmp/b10-test-door.XXXXXX");
    if (mkdtemp(cert_dir) == NULL || nodeid_make_ca(cert_dir, 1, why, sizeof(why)) != B10_OK)
        return -1;
    const char *names[3] = { "node-a", "node-b", "node-x" };
    struct nodeid **ids[3] = { &id_a, &id_b, &id_x };
    for (int i = 0; i < 3; i++) {
        char cert[128], nkey[128], ca[128], cakey[128];
        snprintf(ca, sizeof(ca), "%s/ca.crt", cert_dir);
        snprintf(cakey, sizeof(cakey), "%s/ca.key", cert_dir);
        snprintf(cert, sizeof(cert), "%s/%s.crt", cert_dir, names[i]);
        snprintf(nkey, sizeof(nkey), "%s/%s.key", cert_dir, names[i]);
        if (nodeid_issue(ca, cakey, names[i], cert_dir, -60, 86400, why, sizeof(why)) != B10_OK ||
            nodeid_load(cert, nkey, ca, names[i], ids[i], why, sizeof(why)) != B10_OK) {
            fprintf(stderr, "%s: %s\n", names[i], why);
            return -1;
        }
    }
    return 0;
}

static int group_teardown(void **state)
{
    uv_close((uv_handle_t *)&deadline, NULL);
    for (int i = 0; i < 100 && uv_loop_alive(&loop); i++)
        uv_run(&loop, UV_RUN_NOWAIT);
    /* Every handle of every door closed: the loop closes. */
    if (uv_loop_close(&loop) != 0) {
        fprintf(stderr, "the loop still has handles\n");
        return -1;
    }
    nodeid_free(id_a);
    nodeid_free(id_b);
    nodeid_free(id_x);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", cert_dir);
    if (system(cmd) != 0)
        return -1;
    return keys_teardown();
}

/* ---------------------------------------------------------------- doors */

struct side {
    struct gate *gate;
    struct door *door;
    struct wireaddr_door at[WIREADDR_MAX_DOORS];
    unsigned nat;
    uint8_t address[64];        /* the worker address its door answers with */
    size_t address_length;
};

struct knocked {
    int calls;
    b10_status_t status;
    char detail[256];
};

static void on_knocked(void *user, b10_status_t status, const char *detail,
                       const struct knock *ack)
{
    struct knocked *r = user;
    /* Let in: the answer names the door's boot, with a worker address. */
    if (status == B10_OK && (ack == NULL || ack->incarnation == 0 || ack->address_length == 0))
        fail_msg("a knock let in without the answering boot");
    r->calls++;
    r->status = status;
    snprintf(r->detail, sizeof(r->detail), "%s", detail);
}

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static bool called(const void *arg)
{
    return ((const struct knocked *)arg)->calls > 0;
}

/* The doors a test opened and has not closed: a failed test leaves them to its teardown. */
static struct {
    struct door *door;
    struct gate *gate;
} open_doors[4];

/*
 * A door on the loopback's addresses, knocks answered at rate a second,
 * taking timeout_ms; certified as nodeid's node, or not (NULL).
 */
static void side_open_cfg(struct side *s, const char *name, uint64_t id,
                          const struct auth_keyring *keys, double rate, uint32_t timeout_ms,
                          uint32_t whole_ms, const struct nodeid *nodeid)
{
    struct door_config cfg = {
        .name = name, .daemon_id = id, .devices = "lo", .port = 0, .timeout_ms = timeout_ms,
        .whole_ms = whole_ms, .knocks_per_s = rate,
    };
    char detail[256] = "";
    unsigned slot = 0;

    while (slot < 4 && open_doors[slot].gate != NULL)
        slot++;
    assert_true(slot < 4);
    memset(s, 0, sizeof(*s));
    s->gate = gate_create();
    assert_non_null(s->gate);
    b10_status_t st = door_create(&loop, keys, nodeid, s->gate, &cfg, &s->door, detail, sizeof(detail));
    open_doors[slot].door = s->door;
    open_doors[slot].gate = s->gate;
    if (st != B10_OK)
        fail_msg("door_create: %s: %s", b10_status_name(st), detail);
    /* What its answers name: a boot and a worker address of one worker. */
    const void *w[1] = { name };
    size_t wl[1] = { strlen(name) };
    s->address_length = wireaddr_size(1, wl);
    wireaddr_pack(s->address, 1, w, wl);
    door_set_boot(s->door, s->address, s->address_length, id);
    s->nat = door_endpoints(s->door, s->at);
    assert_true(s->nat >= 1);
    assert_int_equal(s->at[0].family, 4);       /* 127.0.0.1 first: getifaddrs lists IPv4 first */
    assert_memory_equal(s->at[0].addr, ((uint8_t[]){ 127, 0, 0, 1 }), 4);
    assert_int_not_equal(s->at[0].port, 0);
}

static void side_open_as(struct side *s, const char *name, uint64_t id,
                         const struct auth_keyring *keys, double rate, uint32_t timeout_ms,
                         const struct nodeid *nodeid)
{
    side_open_cfg(s, name, id, keys, rate, timeout_ms, 0, nodeid);
}

static void side_open_at(struct side *s, const char *name, uint64_t id,
                         const struct auth_keyring *keys, double rate, uint32_t timeout_ms)
{
    side_open_as(s, name, id, keys, rate, timeout_ms, NULL);
}

static void side_open(struct side *s, const char *name, uint64_t id, const struct auth_keyring *keys)
{
    side_open_at(s, name, id, keys, 1000, 2000);
}

/*
 * The first seal of s's gate, keeping every door of sides: what it seals is
 * what listens in this process now but the doors. How many.
 */
static unsigned first_seal(struct side *s, struct side *sides, unsigned n)
{
    int fds[4 * WIREADDR_MAX_DOORS];
    unsigned nfds = 0;
    char detail[256] = "";

    for (unsigned i = 0; i < n; i++)
        nfds += door_fds(sides[i].door, fds + nfds, WIREADDR_MAX_DOORS);
    assert_true(nfds >= n);
    b10_status_t st = gate_seal(s->gate, fds, nfds, detail, sizeof(detail));
    if (st != B10_OK)
        fail_msg("gate_seal: %s: %s", b10_status_name(st), detail);
    return gate_listeners(s->gate);
}

/* Two doors of the cluster's key, their gates sealing nothing yet. */
static void open_pair(struct side sides[2])
{
    side_open(&sides[0], "node-a", 0xa1, &ring);
    side_open(&sides[1], "node-b", 0xb1, &ring);
    assert_int_equal(first_seal(&sides[0], sides, 2), 0);
    assert_int_equal(first_seal(&sides[1], sides, 2), 0);
}

/* Close the door, let its handles close, and free its gate. */
static void side_close(struct side *s)
{
    for (unsigned i = 0; i < 4; i++)
        if (open_doors[i].gate == s->gate)
            open_doors[i].door = NULL, open_doors[i].gate = NULL;
    door_destroy(s->door);
    s->door = NULL;
    run_for(20);
    gate_destroy(s->gate);
    s->gate = NULL;
}

/* After each test: what a failed one left open, so that the next starts as bare. */
static int close_leftovers(void **state)
{
    for (unsigned i = 0; i < 4; i++) {
        if (open_doors[i].gate != NULL) {
            door_destroy(open_doors[i].door);
            gate_destroy(open_doors[i].gate);
            open_doors[i].door = NULL, open_doors[i].gate = NULL;
        }
    }
    run_for(20);
    sock_close_all();
    return 0;
}

static bool gate_has(const struct gate *g, const struct wireaddr_door *w)
{
    struct gate_addr a = { .family = w->family };
    memcpy(a.bytes, w->addr, 16);
    return gate_allows(g, &a);
}

static bool gate_has_ip(const struct gate *g, const char *text)
{
    struct wireaddr_door w = { .family = strchr(text, ':') ? 6 : 4 };
    assert_int_equal(inet_pton(w.family == 4 ? AF_INET : AF_INET6, text, w.addr), 1);
    return gate_has(g, &w);
}

/* Knock from a at these doors and wait for the end: it calls back once. */
static void knock_for_and_wait(struct side *a, const struct wireaddr_door *at, unsigned n,
                               const char *name, struct knocked *r)
{
    memset(r, 0, sizeof(*r));
    assert_non_null(door_knock(a->door, at, n, name, r, on_knocked, NULL));
    if (!run_until(called, r, 5000))
        fail_msg("the knock did not end within 5 s");
    run_for(20);                                /* and never again */
    assert_int_equal(r->calls, 1);
}

/* Knock at the doors of node-b (the name a certified knocker checks the answer for). */
static void knock_and_wait(struct side *a, const struct wireaddr_door *at, unsigned n,
                           struct knocked *r)
{
    knock_for_and_wait(a, at, n, "node-b", r);
}

/* ---------------------------------------------------------------- knocks */

/*
 * A knocks at B: B's gate takes A's addresses, and the listener it guards
 * (B's UCX) takes A's connections from then on; A's gate takes B's.
 */
static void test_knock_lets_in(void **state)
{
    struct side sides[2];
    struct side *a = &sides[0], *b = &sides[1];
    struct knocked r;

    side_open(a, "node-a", 0xa1, &ring);
    side_open(b, "node-b", 0xb1, &ring);
    assert_int_equal(first_seal(a, sides, 2), 0);
    uint16_t ucx_port;
    int ucx = sock_bound("127.0.0.1", true, false, &ucx_port);
    assert_true(ucx >= 0);
    assert_int_equal(first_seal(b, sides, 2), 1);
    assert_false(sock_reaches("127.0.0.1", "127.0.0.1", ucx_port, SOCK_REFUSED_MS));

    knock_and_wait(a, b->at, b->nat, &r);
    if (r.status != B10_OK)
        fail_msg("the knock: %s: %s", b10_status_name(r.status), r.detail);
    for (unsigned i = 0; i < a->nat; i++)
        assert_true(gate_has(b->gate, &a->at[i]));
    for (unsigned i = 0; i < b->nat; i++)
        assert_true(gate_has(a->gate, &b->at[i]));
    assert_true(gate_has_ip(b->gate, "127.0.0.1"));
    assert_false(gate_has_ip(b->gate, "127.0.0.2"));
    assert_int_equal(door_stats(b->door)->door_let_in, 1);
    assert_int_equal(door_stats(b->door)->door_refused, 0);
    assert_int_equal(door_stats(b->door)->door_dropped, 0);
    assert_int_equal(door_stats(a->door)->knocks_let_in, 1);
    assert_int_equal(door_stats(a->door)->knocks_failed, 0);

    /* B's UCX takes A now, and still no one else. */
    assert_true(sock_reaches("127.0.0.1", "127.0.0.1", ucx_port, SOCK_ALLOWED_MS));
    int s = sock_accept(ucx, SOCK_ALLOWED_MS);
    assert_true(s >= 0);
    close(s);
    assert_false(sock_reaches("127.0.0.2", "127.0.0.1", ucx_port, SOCK_REFUSED_MS));

    /* Knocking again changes no gate, and is let in again. */
    knock_and_wait(a, b->at, b->nat, &r);
    assert_int_equal(r.status, B10_OK);
    assert_int_equal(door_stats(b->door)->door_let_in, 2);
    close(ucx);
    side_close(a);
    side_close(b);
}

/* A door of another cluster drops the knock at each of its endpoints; no gate changes. */
static void test_knock_other_key(void **state)
{
    struct side sides[2];
    struct side *a = &sides[0], *c = &sides[1];
    struct knocked r;

    side_open(a, "node-a", 0xa1, &ring);
    side_open(c, "node-c", 0xc1, &other_ring);
    assert_int_equal(first_seal(a, sides, 2), 0);
    assert_int_equal(first_seal(c, sides, 2), 0);

    knock_and_wait(a, c->at, c->nat, &r);
    assert_int_equal(r.status, B10_ERR_PEER_UNREACHABLE);
    assert_non_null(strstr(r.detail, "hung up"));
    assert_int_equal(door_stats(c->door)->door_dropped, c->nat);
    assert_int_equal(door_stats(c->door)->door_let_in, 0);
    assert_int_equal(door_stats(c->door)->door_refused, 0);
    assert_int_equal(gate_count(c->gate), 0);
    assert_int_equal(gate_count(a->gate), 0);
    assert_int_equal(door_stats(a->door)->knocks_failed, 1);
    assert_int_equal(door_stats(a->door)->knocks_let_in, 0);
    side_close(a);
    side_close(c);
}

/* Where nothing listens, the knock says so and goes on to the next door. */
static void test_knock_dead_door(void **state)
{
    struct side sides[2];
    struct side *a = &sides[0], *b = &sides[1];
    struct knocked r;
    char want[64];

    open_pair(sides);
    uint16_t dead_port;
    int dead = sock_bound("127.0.0.1", false, false, &dead_port);   /* bound, never listening */
    assert_true(dead >= 0);
    struct wireaddr_door at[1 + WIREADDR_MAX_DOORS] = { { 4, { 127, 0, 0, 1 }, dead_port } };

    knock_and_wait(a, at, 1, &r);
    assert_int_equal(r.status, B10_ERR_PEER_UNREACHABLE);
    snprintf(want, sizeof(want), "127.0.0.1:%u", dead_port);
    if (strstr(r.detail, want) == NULL || strstr(r.detail, "refused") == NULL)
        fail_msg("the reason names neither the door nor its refusal: %s", r.detail);

    memcpy(at + 1, b->at, b->nat * sizeof(b->at[0]));
    knock_and_wait(a, at, 1 + b->nat, &r);
    assert_int_equal(r.status, B10_OK);
    assert_int_equal(door_stats(b->door)->door_let_in, 1);
    assert_true(gate_has_ip(a->gate, "127.0.0.1"));
    close(dead);
    side_close(a);
    side_close(b);
}

/* A door that takes the connection and never answers: the knock ends at its timeout. */
static void test_knock_times_out(void **state)
{
    struct side sides[1];
    struct knocked r;

    side_open_at(&sides[0], "node-a", 0xa1, &ring, 1000, 300);
    assert_int_equal(first_seal(&sides[0], sides, 1), 0);
    uint16_t port;
    int mute = sock_bound("127.0.0.1", true, false, &port);    /* listens, never reads */
    assert_true(mute >= 0);
    const struct wireaddr_door at = { 4, { 127, 0, 0, 1 }, port };

    uint64_t start = wall_ms();
    knock_and_wait(&sides[0], &at, 1, &r);
    assert_int_equal(r.status, B10_ERR_PEER_UNREACHABLE);
    assert_non_null(strstr(r.detail, "within --connect-timeout-ms"));
    assert_true(wall_ms() - start >= 300);
    close(mute);
    side_close(&sides[0]);
}

/*
 * Doors no connect can even start to (multicast addresses, which a peer's
 * worker address may name: the kernel refuses them at once). The knock
 * still ends from the loop, after door_knock returned: its handle is the
 * caller's until then, to keep or to cancel.
 */
static void test_knock_fails_later(void **state)
{
    struct side sides[2];
    struct side *a = &sides[0], *b = &sides[1];
    const struct wireaddr_door nowhere[2] = {
        { 4, { 224, 0, 0, 1 }, 9 },
        { 6, { 0xff, 0x02, [15] = 1 }, 9 },
    };
    struct knocked r = { 0 };

    open_pair(sides);
    struct door_knock *k = door_knock(a->door, nowhere, 2, "b", &r, on_knocked, NULL);
    assert_non_null(k);
    assert_int_equal(r.calls, 0);
    assert_true(run_until(called, &r, 5000));
    assert_int_equal(r.status, B10_ERR_PEER_UNREACHABLE);
    assert_non_null(strstr(r.detail, "[ff02::1]:9"));
    run_for(20);
    assert_int_equal(r.calls, 1);

    /* Cancelled before the loop ran: no call at all. */
    memset(&r, 0, sizeof(r));
    k = door_knock(a->door, nowhere, 2, "b", &r, on_knocked, NULL);
    assert_int_equal(r.calls, 0);
    door_knock_cancel(k);
    run_for(20);
    assert_int_equal(r.calls, 0);

    /* An unreachable door, then a good one: let in. */
    struct wireaddr_door at[1 + WIREADDR_MAX_DOORS] = { nowhere[0] };
    memcpy(at + 1, b->at, b->nat * sizeof(b->at[0]));
    struct knocked ok;
    knock_and_wait(a, at, 1 + b->nat, &ok);
    assert_int_equal(ok.status, B10_OK);

    /* The door destroyed before the loop ran: no call either. */
    memset(&r, 0, sizeof(r));
    assert_non_null(door_knock(a->door, nowhere, 2, "b", &r, on_knocked, NULL));
    side_close(a);
    assert_int_equal(r.calls, 0);
    side_close(b);
}

/* Cancelled at any step before it ends, a knock never calls back. */
static void test_knock_cancel(void **state)
{
    struct side sides[2];
    struct side *a = &sides[0];
    int cancelled = 0;

    open_pair(sides);
    for (int steps = 0; steps < 16; steps++) {
        struct knocked r = { 0 };
        struct door_knock *k = door_knock(a->door, sides[1].at, sides[1].nat, "b", &r, on_knocked, NULL);
        assert_non_null(k);
        for (int i = 0; i < steps && r.calls == 0; i++)
            uv_run(&loop, UV_RUN_ONCE);
        if (r.calls > 0)
            break;                      /* it ended first: so will every later step */
        door_knock_cancel(k);
        cancelled++;
        run_for(50);
        assert_int_equal(r.calls, 0);
    }
    print_message("cancelled %d times\n", cancelled);
    assert_true(cancelled >= 2);        /* before it connected, and after */
    door_knock_cancel(NULL);
    side_close(&sides[0]);
    side_close(&sides[1]);
}

/*
 * Either door destroyed at any step of a knock: the knocker's never calls
 * back after, the knocked-at one's end fails the knock (or it was let in
 * already), and nothing is left (the SAN=1 build's leak check).
 */
static void test_destroy_in_flight(void **state)
{
    int before_end = 0;

    for (int steps = 0; steps < 6; steps++) {
        for (int which = 0; which < 2; which++) {
            struct side sides[2];
            struct knocked r = { 0 };

            open_pair(sides);
            assert_non_null(door_knock(sides[0].door, sides[1].at, sides[1].nat, "b", &r, on_knocked, NULL));
            for (int i = 0; i < steps && r.calls == 0; i++)
                uv_run(&loop, UV_RUN_ONCE);
            int calls = r.calls;
            before_end += calls == 0;
            side_close(&sides[which]);
            if (which == 0) {
                run_for(50);
                assert_int_equal(r.calls, calls);
            } else {
                assert_true(run_until(called, &r, 5000));
                if (r.status != B10_OK && r.status != B10_ERR_PEER_UNREACHABLE)
                    fail_msg("the knock: %s", b10_status_name(r.status));
                assert_int_equal(r.calls, 1);
            }
            side_close(&sides[!which]);
        }
    }
    print_message("destroyed before the end %d of 12 times\n", before_end);
    assert_true(before_end >= 2);
    door_destroy(NULL);
}

/* ---------------------------------------------------------------- knocks by hand */

/* A framed KNOCK of node-x under key k, listing addr, its clock skew_ms off, proven by id or not. */
static size_t knock_msg_by(const struct auth_key *k, const char *addr, int64_t skew_ms,
                           const struct nodeid *id, struct knock *kn, uint8_t *out)
{
    memset(kn, 0, sizeof(*kn));
    kn->sender_id = 0x77;
    snprintf(kn->name, sizeof(kn->name), "node-x");
    kn->sent_ms = (uint64_t)((int64_t)wall_ms() + skew_ms);
    auth_random(kn->nonce, sizeof(kn->nonce));
    kn->addrs[0].family = strchr(addr, ':') ? 6 : 4;
    assert_int_equal(inet_pton(kn->addrs[0].family == 4 ? AF_INET : AF_INET6, addr,
                               kn->addrs[0].bytes), 1);
    kn->naddrs = 1;
    size_t n = knock_pack(k, kn, id, out, KNOCK_MAX_BYTES);
    assert_true(n > 0);
    return n;
}

static size_t knock_msg(const struct auth_key *k, const char *addr, int64_t skew_ms,
                        struct knock *kn, uint8_t *out)
{
    return knock_msg_by(k, addr, skew_ms, NULL, kn, out);
}

/* How long the last exchange took, from connect to the door's hanging up. */
static uint64_t exchange_ms;

/*
 * Send n bytes from src to the door at 127.0.0.1:port (then shut this side
 * when hang_up) and read what comes back until the door hangs up, running
 * the loop meanwhile: how many bytes.
 */
static size_t exchange_then(const char *src, uint16_t port, const uint8_t *msg, size_t n,
                            bool hang_up, uint8_t *answer)
{
    uint64_t start = wall_ms();
    int fd = sock_connect(src, "127.0.0.1", port, SOCK_ALLOWED_MS);
    size_t have = 0;

    assert_true(fd >= 0);
    if (n > 0)
        assert_int_equal(write(fd, msg, n), (ssize_t)n);
    if (hang_up)
        assert_int_equal(shutdown(fd, SHUT_WR), 0);
    for (int i = 0; i < 500; i++) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        uv_run(&loop, UV_RUN_NOWAIT);
        if (poll(&p, 1, 10) != 1)
            continue;
        ssize_t got = read(fd, answer + have, KNOCK_MAX_BYTES - have);
        if (got <= 0)
            break;
        have += (size_t)got;
    }
    close(fd);
    exchange_ms = wall_ms() - start;
    return have;
}

static size_t exchange(const char *src, uint16_t port, const uint8_t *msg, size_t n,
                       uint8_t *answer)
{
    return exchange_then(src, port, msg, n, false, answer);
}

/* The door's answer to kn: its status (and the answer in ack). */
static b10_status_t answer_of(const uint8_t *answer, size_t n, const struct knock *kn,
                              struct knock *ack)
{
    bool authenticated;
    char detail[KNOCK_DETAIL_MAX];

    assert_true(n > 0);
    assert_int_equal(knock_open(&ring, true, answer, n, ack, &authenticated, detail,
                                sizeof(detail)), B10_OK);
    assert_memory_equal(ack->nonce, kn->nonce, KNOCK_NONCE_BYTES);
    assert_string_equal(ack->name, "node-b");
    assert_int_equal(ack->sender_id, 0xb1);
    return ack->status;
}

/* A key holder's knock is answered: let in from where it lists, else refused and told why. */
static void test_door_answers(void **state)
{
    struct side sides[2];
    struct side *b = &sides[1];
    uint8_t msg[KNOCK_MAX_BYTES], answer[KNOCK_MAX_BYTES];
    struct knock kn, ack;

    open_pair(sides);
    uint16_t port = b->at[0].port;

    /* From 127.0.0.2, listing it: let in, and told B's addresses. */
    size_t n = knock_msg(&key, "127.0.0.2", 0, &kn, msg);
    size_t got = exchange("127.0.0.2", port, msg, n, answer);
    assert_int_equal(answer_of(answer, got, &kn, &ack), B10_OK);
    assert_int_equal(ack.naddrs, b->nat);
    assert_true(gate_has_ip(b->gate, "127.0.0.2"));
    assert_int_equal(gate_count(b->gate), 1);
    assert_int_equal(door_stats(b->door)->door_let_in, 1);

    /* From 127.0.0.1, listing another: refused, the source named. */
    n = knock_msg(&key, "192.0.2.1", 0, &kn, msg);
    got = exchange("127.0.0.1", port, msg, n, answer);
    assert_int_equal(answer_of(answer, got, &kn, &ack), B10_ERR_UNAUTHENTICATED);
    assert_non_null(strstr(ack.detail, "127.0.0.1"));
    assert_int_equal(ack.naddrs, 0);
    assert_false(gate_has_ip(b->gate, "192.0.2.1"));
    assert_false(gate_has_ip(b->gate, "127.0.0.1"));

    /* A clock a minute and more off, either way: refused. Within it: let in. */
    const int64_t skews[] = { -KNOCK_FRESH_MS - 1000, KNOCK_FRESH_MS + 1000 };
    for (size_t i = 0; i < 2; i++) {
        n = knock_msg(&key, "127.0.0.3", skews[i], &kn, msg);
        got = exchange("127.0.0.3", port, msg, n, answer);
        assert_int_equal(answer_of(answer, got, &kn, &ack), B10_ERR_UNAUTHENTICATED);
        assert_non_null(strstr(ack.detail, "clock"));
        assert_false(gate_has_ip(b->gate, "127.0.0.3"));
    }
    assert_int_equal(door_stats(b->door)->door_refused, 3);
    n = knock_msg(&key, "127.0.0.3", -KNOCK_FRESH_MS + 5000, &kn, msg);
    got = exchange("127.0.0.3", port, msg, n, answer);
    assert_int_equal(answer_of(answer, got, &kn, &ack), B10_OK);
    assert_true(gate_has_ip(b->gate, "127.0.0.3"));
    assert_int_equal(door_stats(b->door)->door_dropped, 0);
    side_close(&sides[0]);
    side_close(b);
}

/* The door at b drops these bytes unanswered: at once, or at the whole knock's bound (1 s). */
static void dropped(struct side *b, const uint8_t *msg, size_t n, bool hang_up, bool at_once)
{
    uint8_t answer[KNOCK_MAX_BYTES];
    uint64_t before = door_stats(b->door)->door_dropped;

    assert_int_equal(exchange_then("127.0.0.1", b->at[0].port, msg, n, hang_up, answer), 0);
    assert_int_equal(door_stats(b->door)->door_dropped, before + 1);
    if (at_once ? exchange_ms >= 500 : exchange_ms < 900)
        fail_msg("dropped after %llu ms, not %s", (unsigned long long)exchange_ms,
                 at_once ? "at once" : "at the door's timeout");
}

/* What does not open under the key, or is no whole knock, goes unanswered. */
static void test_door_drops(void **state)
{
    struct side sides[2];
    struct side *b = &sides[1];
    uint8_t msg[KNOCK_MAX_BYTES + 1];
    struct knock kn;

    side_open(&sides[0], "node-a", 0xa1, &ring);
    side_open_at(b, "node-b", 0xb1, &ring, 1000, 4000);     /* a whole knock within 1 s */
    assert_int_equal(first_seal(&sides[0], sides, 2), 0);
    assert_int_equal(first_seal(b, sides, 2), 0);

    /* Another cluster's key. */
    size_t n = knock_msg(&other_key, "127.0.0.1", 0, &kn, msg);
    dropped(b, msg, n, false, true);

    /* A KNOCK_ACK at a door. */
    kn.ack = true;
    kn.status = B10_OK;
    n = knock_pack(&key, &kn, NULL, msg, sizeof(msg));
    dropped(b, msg, n, false, true);

    /* A length word past KNOCK_MAX_BYTES, and one below an envelope. */
    const uint32_t over = KNOCK_MAX_BYTES - 4 + 1;
    const uint8_t too_long[4] = { (uint8_t)over, (uint8_t)(over >> 8), (uint8_t)(over >> 16), 0 };
    const uint8_t too_short[4] = { 8, 0, 0, 0 };
    dropped(b, too_long, 4, false, true);
    dropped(b, too_short, 4, false, true);

    /* A good knock and a byte after it. */
    n = knock_msg(&key, "127.0.0.1", 0, &kn, msg);
    msg[n] = 0;
    dropped(b, msg, n + 1, false, true);

    /* Half a knock, or none, and the knocker hangs up. */
    dropped(b, msg, n / 2, true, true);
    dropped(b, msg, 0, true, true);

    /* Half a knock, or none, and silence: dropped at the whole knock's bound. */
    dropped(b, msg, n / 2, false, false);
    dropped(b, msg, 0, false, false);
    assert_int_equal(door_stats(b->door)->door_dropped_slow, 2);

    assert_int_equal(door_stats(b->door)->door_let_in, 0);
    assert_int_equal(door_stats(b->door)->door_refused, 0);
    assert_int_equal(gate_count(b->gate), 0);
    side_close(&sides[0]);
    side_close(b);
}

/*
 * Knocks beyond the door's rate go unanswered, until the rate allows again;
 * knocks that do not open under a key spend none of it.
 */
static void test_door_rate(void **state)
{
    struct side sides[2];
    struct side *b = &sides[1];
    uint8_t msg[KNOCK_MAX_BYTES], answer[KNOCK_MAX_BYTES];
    struct knock kn, ack;

    side_open(&sides[0], "node-a", 0xa1, &ring);
    side_open_at(b, "node-b", 0xb1, &ring, 2, 2000);
    assert_int_equal(first_seal(&sides[0], sides, 2), 0);
    assert_int_equal(first_seal(b, sides, 2), 0);
    uint16_t port = b->at[0].port;

    /* A stranger's knocks, under a key the door does not hold, spend none of the rate. */
    for (int i = 0; i < 5; i++) {
        size_t n = knock_msg(&other_key, "127.0.0.3", 0, &kn, msg);
        assert_int_equal(exchange("127.0.0.3", port, msg, n, answer), 0);
    }
    assert_int_equal(door_stats(b->door)->door_dropped, 5);
    for (int i = 0; i < 2; i++) {
        size_t n = knock_msg(&key, "127.0.0.2", 0, &kn, msg);
        size_t got = exchange("127.0.0.2", port, msg, n, answer);
        assert_int_equal(answer_of(answer, got, &kn, &ack), B10_OK);
    }
    size_t n = knock_msg(&key, "127.0.0.2", 0, &kn, msg);
    assert_int_equal(exchange("127.0.0.2", port, msg, n, answer), 0);
    assert_int_equal(door_stats(b->door)->door_dropped, 6);
    run_for(600);
    n = knock_msg(&key, "127.0.0.2", 0, &kn, msg);
    size_t got = exchange("127.0.0.2", port, msg, n, answer);
    assert_int_equal(answer_of(answer, got, &kn, &ack), B10_OK);
    assert_int_equal(door_stats(b->door)->door_let_in, 3);
    side_close(&sides[0]);
    side_close(b);
}

/* ---------------------------------------------------------------- the door's slots */

/* A slot of the admission's tables: from ip, its knock whole or not. */
static struct door_slot slot_at(const char *ip, bool whole)
{
    struct door_slot sl = { .whole = whole };
    sl.from.family = strchr(ip, ':') ? 6 : 4;
    assert_int_equal(inet_pton(sl.from.family == 4 ? AF_INET : AF_INET6, ip, sl.from.bytes), 1);
    return sl;
}

/* door_admit's verdict for a newcomer from ip, and its victim (n when none). */
static enum door_admit_verdict admit(const struct door_slot *slots, unsigned n, const char *ip,
                                     unsigned *victim_p)
{
    struct door_slot newcomer = slot_at(ip, false);
    *victim_p = n;
    return door_admit(slots, n, &newcomer.from, victim_p);
}

/* n slow slots from "PREFIX.<first + i>" (IPv4) or "PREFIX<first + i>" (IPv6), appended. */
static unsigned slots_from(struct door_slot *slots, unsigned at, const char *prefix, unsigned first,
                           unsigned n, bool whole)
{
    char ip[64];
    for (unsigned i = 0; i < n; i++) {
        snprintf(ip, sizeof(ip), strchr(prefix, ':') ? "%s%x" : "%s.%u", prefix, first + i);
        slots[at + i] = slot_at(ip, whole);
    }
    return at + n;
}

/* n slots from ip, appended. */
static unsigned slots_same(struct door_slot *slots, unsigned at, const char *ip, unsigned n, bool whole)
{
    for (unsigned i = 0; i < n; i++)
        slots[at + i] = slot_at(ip, whole);
    return at + n;
}

/*
 * The admission, from tables: a source (an IPv4 address, an IPv6 /64) at
 * its bound gives up its oldest slow connection; a full pool gives up the
 * oldest slow one of the source holding the most; whole knocks are never
 * given up, and when only those are left the newcomer is turned away.
 * IPv4 and IPv6 fill pools of their own; an IPv4 /24 is not one source.
 */
static void test_admit(void **state)
{
    struct door_slot slots[2 * DOOR_POOL_CONNS] = { 0 };
    unsigned n, victim;

    /* Room: taken. */
    assert_int_equal(admit(slots, 0, "127.0.0.2", &victim), DOOR_ADMIT_TAKE);
    n = slots_same(slots, 0, "127.0.0.4", DOOR_MAX_CONNS_PER_SOURCE - 1, false);
    assert_int_equal(admit(slots, n, "127.0.0.4", &victim), DOOR_ADMIT_TAKE);

    /* A source at its bound: its oldest slow one goes, not another source's older one. */
    n = slots_same(slots, 0, "127.0.0.9", 1, false);
    n = slots_same(slots, n, "127.0.0.4", 1, true);
    n = slots_same(slots, n, "127.0.0.4", DOOR_MAX_CONNS_PER_SOURCE - 1, false);
    assert_int_equal(admit(slots, n, "127.0.0.4", &victim), DOOR_ADMIT_EVICT_SOURCE);
    assert_int_equal(victim, 2);
    /* Its neighbour in the /24 is a source of its own. */
    assert_int_equal(admit(slots, n, "127.0.0.5", &victim), DOOR_ADMIT_TAKE);
    /* Every one of the source's whole (being answered): turned away. */
    n = slots_same(slots, 0, "127.0.0.4", DOOR_MAX_CONNS_PER_SOURCE, true);
    assert_int_equal(admit(slots, n, "127.0.0.4", &victim), DOOR_ADMIT_FULL);
    assert_int_equal(victim, n);

    /* IPv6: a /64 is one source, whatever its addresses; the next /64 is another. */
    n = slots_from(slots, 0, "2001:db8:0:1::", 1, DOOR_MAX_CONNS_PER_SOURCE, false);
    assert_int_equal(admit(slots, n, "2001:db8:0:1:ffff::9", &victim), DOOR_ADMIT_EVICT_SOURCE);
    assert_int_equal(victim, 0);
    assert_int_equal(admit(slots, n, "2001:db8:0:2::1", &victim), DOOR_ADMIT_TAKE);
    /* ... and an IPv4 address is not one with an IPv6 one of the same first bytes. */
    assert_int_equal(admit(slots, n, "32.1.13.184", &victim), DOOR_ADMIT_TAKE);

    /* A full IPv4 pool of one connection a source: the oldest goes. */
    n = slots_from(slots, 0, "127.0.1", 1, DOOR_POOL_CONNS, false);
    assert_int_equal(admit(slots, n, "127.0.2.1", &victim), DOOR_ADMIT_EVICT_POOL);
    assert_int_equal(victim, 0);
    /* Whole ones first in line are passed over for the oldest slow one. */
    slots[0].whole = slots[1].whole = true;
    assert_int_equal(admit(slots, n, "127.0.2.1", &victim), DOOR_ADMIT_EVICT_POOL);
    assert_int_equal(victim, 2);
    /* The IPv6 pool is another: an IPv6 newcomer beside a full IPv4 pool is taken. */
    assert_int_equal(admit(slots, n, "2001:db8::1", &victim), DOOR_ADMIT_TAKE);
    /* A source holding several, however new, gives up one before a source of one does. */
    n = slots_from(slots, 0, "127.0.1", 1, DOOR_POOL_CONNS - 3, false);
    n = slots_same(slots, n, "127.0.3.7", 3, false);
    assert_int_equal(admit(slots, n, "127.0.2.1", &victim), DOOR_ADMIT_EVICT_POOL);
    assert_int_equal(victim, DOOR_POOL_CONNS - 3);
    /* All whole: turned away; the IPv6 pool still takes its own. */
    n = slots_from(slots, 0, "127.0.1", 1, DOOR_POOL_CONNS, true);
    assert_int_equal(admit(slots, n, "127.0.2.1", &victim), DOOR_ADMIT_FULL);
    assert_int_equal(admit(slots, n, "::1", &victim), DOOR_ADMIT_TAKE);

    /* A full IPv6 pool of many /64s beside a full IPv4 one: each family evicts its own. */
    n = slots_from(slots, 0, "127.0.1", 1, DOOR_POOL_CONNS, false);
    for (unsigned i = 0; i < DOOR_POOL_CONNS; i++) {
        char ip[64];
        snprintf(ip, sizeof(ip), "2001:db8:%x::1", i + 1);
        slots[n++] = slot_at(ip, false);
    }
    assert_int_equal(admit(slots, n, "2001:db8:ffff::1", &victim), DOOR_ADMIT_EVICT_POOL);
    assert_int_equal(victim, DOOR_POOL_CONNS);
    assert_int_equal(admit(slots, n, "127.0.2.1", &victim), DOOR_ADMIT_EVICT_POOL);
    assert_int_equal(victim, 0);
}

/* Has the door closed fd (an end to read), running the loop meanwhile, within 5 s? */
static bool door_hung_up(int fd)
{
    for (int i = 0; i < 500; i++) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        char c;
        uv_run(&loop, UV_RUN_NOWAIT);
        if (poll(&p, 1, 10) == 1)
            return read(fd, &c, 1) <= 0;
    }
    return false;
}

/* Is fd still open at the door's end: nothing to read, after the loop ran? */
static bool door_holds(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    run_for(20);
    return poll(&p, 1, 0) == 0;
}

/* A slow connection from src to the door at dst:port, accepted by the door before it returns. */
static int slow_conn(const char *src, const char *dst, uint16_t port)
{
    int fd = sock_connect(src, dst, port, SOCK_ALLOWED_MS);
    assert_true(fd >= 0);
    run_for(5);
    return fd;
}

/*
 * One source holds at most DOOR_MAX_CONNS_PER_SOURCE connections: the next
 * from it takes the place of its oldest slow one, while another address
 * still knocks. A connection that came with a whole knock is judged at
 * once and never given up.
 */
static void test_door_per_source(void **state)
{
    struct side sides[2];
    struct side *b = &sides[1];
    uint8_t msg[KNOCK_MAX_BYTES], answer[KNOCK_MAX_BYTES];
    struct knock kn, ack;
    int held[DOOR_MAX_CONNS_PER_SOURCE + 1];

    side_open(&sides[0], "node-a", 0xa1, &ring);
    side_open_cfg(b, "node-b", 0xb1, &ring, 1000, 60000, 30000, NULL);
    assert_int_equal(first_seal(&sides[0], sides, 2), 0);
    assert_int_equal(first_seal(b, sides, 2), 0);
    uint16_t port = b->at[0].port;

    for (int i = 0; i <= DOOR_MAX_CONNS_PER_SOURCE; i++)
        held[i] = slow_conn("127.0.0.4", "127.0.0.1", port);
    if (!door_hung_up(held[0]))
        fail_msg("the connection past %d from one address took no one's place", DOOR_MAX_CONNS_PER_SOURCE);
    for (int i = 1; i <= DOOR_MAX_CONNS_PER_SOURCE; i++)
        assert_true(door_holds(held[i]));
    assert_int_equal(door_stats(b->door)->door_evicted_source, 1);
    assert_int_equal(door_stats(b->door)->door_dropped, 1);
    /* Its neighbour 127.0.0.5 is another source: it takes nobody's place. */
    int next = slow_conn("127.0.0.5", "127.0.0.1", port);
    assert_true(door_holds(next));
    assert_int_equal(door_stats(b->door)->door_evicted_source, 1);
    /* A knock from the full source is answered, and takes the place of a slow one. */
    size_t n = knock_msg(&key, "127.0.0.4", 0, &kn, msg);
    size_t got = exchange("127.0.0.4", port, msg, n, answer);
    assert_int_equal(answer_of(answer, got, &kn, &ack), B10_OK);
    assert_int_equal(door_stats(b->door)->door_evicted_source, 2);
    assert_true(door_hung_up(held[1]));
    for (int i = 0; i <= DOOR_MAX_CONNS_PER_SOURCE; i++)
        close(held[i]);
    close(next);
    side_close(&sides[0]);
    side_close(b);
}

/* IPv4 sources 127.0.(1 + i / 200).(1 + i % 200), apart from the knockers' 127.0.0.x. */
static void flood_ip(unsigned i, char *ip, size_t size)
{
    snprintf(ip, size, "127.0.%u.%u", 1 + i / 200, 1 + i % 200);
}

/*
 * The IPv4 pool full of slow connections, a source each: a newcomer takes
 * the oldest one's place, a source holding several gives up one first, and
 * a real knock (a daemon's, whole at once) is let in all the same. IPv6,
 * where this host has ::1, has a pool of its own that the IPv4 flood does
 * not touch.
 */
static void test_door_flood(void **state)
{
    struct side sides[2];
    struct side *a = &sides[0], *b = &sides[1];
    int held[DOOR_POOL_CONNS + 8];
    unsigned nheld = 0;
    char ip[32];
    struct knocked r;

    side_open(a, "node-a", 0xa1, &ring);
    side_open_cfg(b, "node-b", 0xb1, &ring, 1000, 60000, 30000, NULL);
    assert_int_equal(first_seal(a, sides, 2), 0);
    assert_int_equal(first_seal(b, sides, 2), 0);
    uint16_t port = b->at[0].port;

    for (; nheld < DOOR_POOL_CONNS; nheld++) {
        flood_ip(nheld, ip, sizeof(ip));
        held[nheld] = slow_conn(ip, "127.0.0.1", port);
    }
    assert_true(door_holds(held[0]));
    assert_int_equal(door_stats(b->door)->door_dropped, 0);
    /* One more: the oldest goes. */
    flood_ip(nheld, ip, sizeof(ip));
    held[nheld++] = slow_conn(ip, "127.0.0.1", port);
    assert_true(door_hung_up(held[0]));
    assert_true(door_holds(held[1]));
    assert_int_equal(door_stats(b->door)->door_evicted_pool, 1);
    /*
     * Three from one new source: the first two take the oldest places; the
     * third, its source now holding the most, its own first one's. The next
     * newcomer takes the second's, not the oldest of the sources of one.
     */
    for (int i = 0; i < 3; i++)
        held[nheld++] = slow_conn("127.0.9.9", "127.0.0.1", port);
    unsigned three = nheld - 3;
    assert_true(door_hung_up(held[1]));
    assert_true(door_hung_up(held[2]));
    assert_true(door_hung_up(held[three]));
    held[nheld++] = slow_conn("127.0.9.10", "127.0.0.1", port);
    assert_true(door_hung_up(held[three + 1]));
    assert_true(door_holds(held[3]));
    assert_true(door_holds(held[three + 2]));
    assert_int_equal(door_stats(b->door)->door_evicted_pool, 5);

    /* A daemon's knock, through the full pool: let in. */
    knock_and_wait(a, b->at, b->nat, &r);
    if (r.status != B10_OK)
        fail_msg("a knock at a flooded door: %s: %s", b10_status_name(r.status), r.detail);
    assert_int_equal(door_stats(b->door)->door_let_in, 1);
    assert_int_equal(door_stats(b->door)->door_evicted_pool, 6);
    assert_int_equal(door_stats(b->door)->door_dropped_full, 0);

    /* The IPv6 pool is untouched: a knock at [::1] from ::1 is answered. */
    if (b->nat >= 2 && b->at[1].family == 6) {
        memset(&r, 0, sizeof(r));
        knock_and_wait(a, &b->at[1], 1, &r);
        assert_int_equal(r.status, B10_OK);
        assert_int_equal(door_stats(b->door)->door_evicted_pool, 6);
    } else {
        print_message("no ::1 on this host: the IPv6 pool is left to the table of test_admit\n");
    }
    for (unsigned i = 0; i < nheld; i++)
        close(held[i]);
    side_close(a);
    side_close(b);
}

/* ---------------------------------------------------------------- a door played by hand */

/* Run the loop until fd is readable: a connection on a listener, bytes or an end on a socket. */
static void wait_readable(int fd)
{
    for (int i = 0; i < 500; i++) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        uv_run(&loop, UV_RUN_NOWAIT);
        if (poll(&p, 1, 10) == 1)
            return;
    }
    fail_msg("nothing came within 5 s");
}

/* The door played on listener fake takes node-a's next KNOCK (in kn): its connection. */
static int fake_take(int fake, struct knock *kn)
{
    uint8_t in[KNOCK_MAX_BYTES];
    size_t have = 0, want = 0;
    bool authenticated;
    char detail[KNOCK_DETAIL_MAX];

    wait_readable(fake);
    int c = accept4(fake, NULL, NULL, SOCK_CLOEXEC);
    assert_true(c >= 0);
    while (want == 0 || have < want) {
        wait_readable(c);
        ssize_t got = read(c, in + have, sizeof(in) - have);
        assert_true(got > 0);
        have += (size_t)got;
        want = knock_frame_length(in, have, false);
        assert_true(want != SIZE_MAX && (want == 0 || have <= want));
    }
    assert_int_equal(knock_open(&ring, false, in, have, kn, &authenticated, detail,
                                sizeof(detail)), B10_OK);
    assert_int_equal(kn->sender_id, 0xa1);
    assert_string_equal(kn->name, "node-a");
    return c;
}

/* Answer kn on c with ack sealed under k (its nonce kn's when echo), or none (NULL); hang up. */
static void fake_reply(int c, const struct auth_key *k, struct knock *ack, bool echo,
                       const struct nodeid *signer, const struct knock *kn)
{
    uint8_t out[KNOCK_MAX_BYTES];

    if (ack != NULL) {
        if (echo)
            memcpy(ack->nonce, kn->nonce, KNOCK_NONCE_BYTES);
        size_t n = knock_pack(k, ack, signer, out, sizeof(out));
        assert_true(n > 0);
        assert_int_equal(write(c, out, n), (ssize_t)n);
    }
    close(c);
}

/*
 * Knock from a at the door played on listener fake (127.0.0.1:port): take
 * the KNOCK, and answer it with ack sealed under k (its nonce the knock's
 * when echo), or hang up unanswered when ack is NULL. The knock's end in r.
 */
static void fake_answer_as(struct side *a, int fake, uint16_t port, const struct auth_key *k,
                           struct knock *ack, bool echo, const struct nodeid *signer,
                           const char *name, struct knocked *r)
{
    const struct wireaddr_door at = { 4, { 127, 0, 0, 1 }, port };
    struct knock kn;

    memset(r, 0, sizeof(*r));
    assert_non_null(door_knock(a->door, &at, 1, name, r, on_knocked, NULL));
    int c = fake_take(fake, &kn);
    fake_reply(c, k, ack, echo, signer, &kn);
    if (!run_until(called, r, 5000))
        fail_msg("the knock did not end within 5 s");
    assert_int_equal(r->calls, 1);
}

static void fake_answer(struct side *a, int fake, uint16_t port, const struct auth_key *k,
                        struct knock *ack, bool echo, struct knocked *r)
{
    fake_answer_as(a, fake, port, k, ack, echo, NULL, "node-f", r);
}

/*
 * The knocker believes only an answer to its own knock under its key: let
 * in, it lets in the door's addresses and the door's own; a refusal ends
 * the knock with the door's status and words; another knock's answer,
 * another key's, or none, fail it.
 */
static void test_knocker_checks_answer(void **state)
{
    struct side sides[1];
    struct side *a = &sides[0];
    struct knocked r;
    struct knock ack = { .ack = true, .sender_id = 0xf1, .status = B10_OK, .naddrs = 1 };

    side_open(a, "node-a", 0xa1, &ring);
    assert_int_equal(first_seal(a, sides, 1), 0);
    uint16_t port;
    int fake = sock_bound("127.0.0.1", true, false, &port);
    assert_true(fake >= 0);
    snprintf(ack.name, sizeof(ack.name), "node-f");
    ack.addrs[0] = (struct gate_addr){ .family = 4, .bytes = { 127, 0, 0, 9 } };
    ack.incarnation = 1;
    const void *w[1] = { "node-f" };
    size_t wl[1] = { 6 };
    ack.address_length = wireaddr_size(1, wl);
    wireaddr_pack(ack.address, 1, w, wl);

    fake_answer(a, fake, port, &key, &ack, true, &r);
    assert_int_equal(r.status, B10_OK);
    assert_true(gate_has_ip(a->gate, "127.0.0.9"));
    assert_true(gate_has_ip(a->gate, "127.0.0.1"));
    /* A door of this host: its loopback addresses are let in too (door_is_local). */
    assert_true(gate_has_ip(a->gate, "::1"));
    assert_int_equal(gate_count(a->gate), 3);

    /* From here on each answer names 127.0.0.10, which must never get on the gate. */
    ack.addrs[0].bytes[3] = 10;
    fake_answer(a, fake, port, &key, &ack, false, &r);
    assert_int_equal(r.status, B10_ERR_PEER_UNREACHABLE);
    assert_non_null(strstr(r.detail, "another knock"));

    fake_answer(a, fake, port, &other_key, &ack, true, &r);
    assert_int_equal(r.status, B10_ERR_PEER_UNREACHABLE);
    assert_non_null(strstr(r.detail, "does not hold"));

    fake_answer(a, fake, port, &key, NULL, true, &r);
    assert_int_equal(r.status, B10_ERR_PEER_UNREACHABLE);
    assert_non_null(strstr(r.detail, "hung up"));

    ack.status = B10_ERR_UNAUTHENTICATED;
    snprintf(ack.detail, sizeof(ack.detail), "your clock is off");
    fake_answer(a, fake, port, &key, &ack, true, &r);
    assert_int_equal(r.status, B10_ERR_UNAUTHENTICATED);
    assert_non_null(strstr(r.detail, "node-f refused: your clock is off"));

    assert_false(gate_has_ip(a->gate, "127.0.0.10"));
    assert_int_equal(door_stats(a->door)->knocks_let_in, 1);
    assert_int_equal(door_stats(a->door)->knocks_failed, 4);
    close(fake);
    side_close(a);
}

static int again_calls, again_yes;

/* The knock's caller: yes again_yes times, then no. */
static bool knock_again(void *user)
{
    again_calls++;
    return again_yes-- > 0;
}

static bool asked_again(const void *arg)
{
    return again_calls >= *(const int *)arg;
}

/* An answer of node-f letting the knocker in, or refusing it (status). */
static void fake_ack(struct knock *ack, b10_status_t status)
{
    const void *w[1] = { "node-f" };
    size_t wl[1] = { 6 };

    memset(ack, 0, sizeof(*ack));
    ack->ack = true;
    ack->sender_id = 0xf1;
    ack->status = status;
    snprintf(ack->name, sizeof(ack->name), "node-f");
    if (status != B10_OK) {
        snprintf(ack->detail, sizeof(ack->detail), "your clock is off");
        return;
    }
    ack->naddrs = 1;
    ack->addrs[0] = (struct gate_addr){ .family = 4, .bytes = { 127, 0, 0, 9 } };
    ack->incarnation = 1;
    ack->address_length = wireaddr_size(1, wl);
    wireaddr_pack(ack->address, 1, w, wl);
}

/*
 * A round no door answered is knocked again, after a backoff, while the
 * caller says something waits: a door that hung up on the first knock lets
 * the second in. Told to stop, the knock ends with the last door's reason.
 * A refusal answered under the key, and doors where nothing listens (the
 * daemon is down), end it without asking. A door of another key drops each
 * round, and door_knock_why says so meanwhile.
 */
static void test_knock_again(void **state)
{
    struct side sides[2];
    struct side *a = &sides[0], *c = &sides[1];
    struct knocked r = { 0 };
    struct knock kn, ack;

    side_open(a, "node-a", 0xa1, &ring);
    side_open(c, "node-c", 0xc1, &other_ring);
    assert_int_equal(first_seal(a, sides, 2), 0);
    assert_int_equal(first_seal(c, sides, 2), 0);
    uint16_t port, dead_port;
    int fake = sock_bound("127.0.0.1", true, false, &port);
    int dead = sock_bound("127.0.0.1", false, false, &dead_port);
    assert_true(fake >= 0 && dead >= 0);
    const struct wireaddr_door at = { 4, { 127, 0, 0, 1 }, port };
    const struct wireaddr_door nobody = { 4, { 127, 0, 0, 1 }, dead_port };

    /* Hung up on, then answered: let in at the second round. */
    again_calls = 0, again_yes = 1;
    assert_non_null(door_knock(a->door, &at, 1, "node-f", &r, on_knocked, knock_again));
    close(fake_take(fake, &kn));
    int fd = fake_take(fake, &kn);
    fake_ack(&ack, B10_OK);
    fake_reply(fd, &key, &ack, true, NULL, &kn);
    assert_true(run_until(called, &r, 5000));
    if (r.status != B10_OK)
        fail_msg("knocked again: %s: %s", b10_status_name(r.status), r.detail);
    assert_int_equal(again_calls, 1);
    assert_int_equal(door_stats(a->door)->knocks_retried, 1);
    assert_true(gate_has_ip(a->gate, "127.0.0.9"));

    /* Hung up on and told to stop: the door's reason, after asking once. */
    memset(&r, 0, sizeof(r));
    again_calls = 0, again_yes = 0;
    assert_non_null(door_knock(a->door, &at, 1, "node-f", &r, on_knocked, knock_again));
    close(fake_take(fake, &kn));
    assert_true(run_until(called, &r, 5000));
    assert_int_equal(r.status, B10_ERR_PEER_UNREACHABLE);
    assert_non_null(strstr(r.detail, "hung up"));
    assert_int_equal(again_calls, 1);

    /* Refused under the key: the door's say; never asked. */
    memset(&r, 0, sizeof(r));
    again_calls = 0, again_yes = 100;
    assert_non_null(door_knock(a->door, &at, 1, "node-f", &r, on_knocked, knock_again));
    fd = fake_take(fake, &kn);
    fake_ack(&ack, B10_ERR_UNAUTHENTICATED);
    fake_reply(fd, &key, &ack, true, NULL, &kn);
    assert_true(run_until(called, &r, 5000));
    assert_int_equal(r.status, B10_ERR_UNAUTHENTICATED);
    assert_non_null(strstr(r.detail, "your clock is off"));
    assert_int_equal(again_calls, 0);

    /* Nothing listens: the daemon is down; never asked. */
    memset(&r, 0, sizeof(r));
    assert_non_null(door_knock(a->door, &nobody, 1, "node-f", &r, on_knocked, knock_again));
    assert_true(run_until(called, &r, 5000));
    assert_int_equal(r.status, B10_ERR_PEER_UNREACHABLE);
    assert_non_null(strstr(r.detail, "refused"));
    assert_int_equal(again_calls, 0);

    /* Another key's door drops each knock: three rounds, then told to stop. */
    memset(&r, 0, sizeof(r));
    again_calls = 0, again_yes = 2;
    uint64_t retried = door_stats(a->door)->knocks_retried;
    struct door_knock *k = door_knock(a->door, c->at, 1, "node-c", &r, on_knocked, knock_again);
    assert_non_null(k);
    if (strstr(door_knock_why(k), "did not answer") == NULL)
        fail_msg("door_knock_why before an answer: %s", door_knock_why(k));
    const int once = 1;
    assert_true(run_until(asked_again, &once, 5000));
    const char *why = door_knock_why(k);
    if (strstr(why, "did not let this daemon in") == NULL || strstr(why, "1 round unanswered") == NULL ||
        strstr(why, "hung up") == NULL)
        fail_msg("door_knock_why after a round: %s", why);
    assert_true(run_until(called, &r, 5000));
    assert_int_equal(r.status, B10_ERR_PEER_UNREACHABLE);
    if (strstr(r.detail, "after 3 knocks") == NULL || strstr(r.detail, "hung up") == NULL)
        fail_msg("the end after three rounds: %s", r.detail);
    assert_int_equal(again_calls, 3);
    assert_int_equal(door_stats(a->door)->knocks_retried, retried + 2);
    assert_int_equal(door_stats(c->door)->door_dropped, 3);
    close(fake);
    close(dead);
    side_close(a);
    side_close(c);
}

/* ---------------------------------------------------------------- certified doors */

/*
 * Two certified doors: a knock for the right name lets each in on the
 * other's gate; a knocker that expects another node at that door refuses
 * the answer, and the door's addresses stay off its gate.
 */
static void test_certified_knock(void **state)
{
    struct side sides[2];
    struct side *a = &sides[0], *b = &sides[1];
    struct knocked r;

    side_open_as(a, "node-a", 0xa1, &ring, 1000, 2000, id_a);
    side_open_as(b, "node-b", 0xb1, &ring, 1000, 2000, id_b);
    assert_int_equal(first_seal(a, sides, 2), 0);
    assert_int_equal(first_seal(b, sides, 2), 0);

    knock_for_and_wait(a, b->at, b->nat, "node-x", &r);
    assert_int_equal(r.status, B10_ERR_UNAUTHENTICATED);
    assert_non_null(strstr(r.detail, "node certificate"));
    assert_non_null(strstr(r.detail, "node-x"));
    for (unsigned i = 0; i < b->nat; i++)
        assert_false(gate_has(a->gate, &b->at[i]));
    assert_int_equal(door_stats(a->door)->knocks_failed, 1);

    knock_and_wait(a, b->at, b->nat, &r);
    if (r.status != B10_OK)
        fail_msg("the certified knock: %s: %s", b10_status_name(r.status), r.detail);
    for (unsigned i = 0; i < a->nat; i++)
        assert_true(gate_has(b->gate, &a->at[i]));
    for (unsigned i = 0; i < b->nat; i++)
        assert_true(gate_has(a->gate, &b->at[i]));
    assert_int_equal(door_stats(b->door)->door_let_in, 2);
    assert_int_equal(door_stats(b->door)->door_refused, 0);
    assert_int_equal(door_stats(a->door)->knocks_let_in, 1);
    side_close(a);
    side_close(b);
}

/* The answer of a certified door: proven for node-b. */
static void certified_answer(const uint8_t *answer, size_t n, const struct knock *kn,
                             struct knock *ack, b10_status_t want)
{
    char why[400];
    assert_int_equal(answer_of(answer, n, kn, ack), want);
    assert_true(ack->proof.present);
    assert_int_equal(knock_verify(id_a, ack, "node-b", why, sizeof(why)), B10_OK);
}

/*
 * A certified door: a certified node's knock is let in; a key holder's
 * without a certificate is refused, told why, and its addresses are not on
 * the gate; a certified node's knock under another node's name, the same.
 */
static void test_certified_door_refuses(void **state)
{
    struct side sides[2];
    struct side *a = &sides[0], *b = &sides[1];
    static uint8_t msg[KNOCK_MAX_BYTES], answer[KNOCK_MAX_BYTES];
    static struct knock kn, ack;
    struct knocked r;

    side_open(a, "node-a", 0xa1, &ring);
    side_open_as(b, "node-b", 0xb1, &ring, 1000, 2000, id_b);
    assert_int_equal(first_seal(a, sides, 2), 0);
    assert_int_equal(first_seal(b, sides, 2), 0);
    uint16_t port = b->at[0].port;

    /* A certified node-x from 127.0.0.2: let in. */
    size_t n = knock_msg_by(&key, "127.0.0.2", 0, id_x, &kn, msg);
    size_t got = exchange("127.0.0.2", port, msg, n, answer);
    certified_answer(answer, got, &kn, &ack, B10_OK);
    assert_true(gate_has_ip(b->gate, "127.0.0.2"));

    /* The key alone, from 127.0.0.3: refused, and not on the gate. */
    n = knock_msg(&key, "127.0.0.3", 0, &kn, msg);
    got = exchange("127.0.0.3", port, msg, n, answer);
    certified_answer(answer, got, &kn, &ack, B10_ERR_PERMISSION);
    assert_non_null(strstr(ack.detail, "certified nodes only"));
    assert_int_equal(ack.naddrs, 0);
    assert_false(gate_has_ip(b->gate, "127.0.0.3"));

    /* node-a's certificate on a knock that says node-x: refused, not on the gate. */
    n = knock_msg_by(&key, "127.0.0.4", 0, id_a, &kn, msg);
    got = exchange("127.0.0.4", port, msg, n, answer);
    certified_answer(answer, got, &kn, &ack, B10_ERR_PERMISSION);
    assert_non_null(strstr(ack.detail, "node certificate is refused"));
    assert_false(gate_has_ip(b->gate, "127.0.0.4"));

    /* An uncertified daemon's door_knock: refused with the door's reason, neither gate opened. */
    knock_and_wait(a, b->at, b->nat, &r);
    assert_int_equal(r.status, B10_ERR_PERMISSION);
    assert_non_null(strstr(r.detail, "certified nodes only"));
    for (unsigned i = 0; i < a->nat; i++)
        assert_false(gate_has(b->gate, &a->at[i]));
    for (unsigned i = 0; i < b->nat; i++)
        assert_false(gate_has(a->gate, &b->at[i]));

    assert_int_equal(gate_count(b->gate), 1);
    assert_int_equal(door_stats(b->door)->door_let_in, 1);
    assert_int_equal(door_stats(b->door)->door_refused, 3);
    assert_int_equal(door_stats(b->door)->door_dropped, 0);
    side_close(a);
    side_close(b);
}

/* An uncertified door refuses a proof it cannot check (answered, not on the gate). */
static void test_uncertified_door_refuses_proof(void **state)
{
    struct side sides[2];
    struct side *b = &sides[1];
    static uint8_t msg[KNOCK_MAX_BYTES], answer[KNOCK_MAX_BYTES];
    static struct knock kn, ack;

    open_pair(sides);
    uint16_t port = b->at[0].port;
    size_t n = knock_msg_by(&key, "127.0.0.2", 0, id_x, &kn, msg);
    size_t got = exchange("127.0.0.2", port, msg, n, answer);
    assert_int_equal(answer_of(answer, got, &kn, &ack), B10_ERR_PERMISSION);
    assert_non_null(strstr(ack.detail, "none to check it by"));
    assert_false(ack.proof.present);
    assert_false(gate_has_ip(b->gate, "127.0.0.2"));

    /* The same knock without its proof: let in, as before certificates. */
    n = knock_msg(&key, "127.0.0.2", 0, &kn, msg);
    got = exchange("127.0.0.2", port, msg, n, answer);
    assert_int_equal(answer_of(answer, got, &kn, &ack), B10_OK);
    assert_true(gate_has_ip(b->gate, "127.0.0.2"));
    side_close(&sides[0]);
    side_close(b);
}

/*
 * Proofs are checked within the knock rate: at 2 a second, two knocks
 * without a proof spend it, and a third, with a good one, goes unanswered.
 */
static void test_certified_door_rate(void **state)
{
    struct side sides[2];
    struct side *b = &sides[1];
    static uint8_t msg[KNOCK_MAX_BYTES], answer[KNOCK_MAX_BYTES];
    static struct knock kn, ack;

    side_open(&sides[0], "node-a", 0xa1, &ring);
    side_open_as(b, "node-b", 0xb1, &ring, 2, 2000, id_b);
    assert_int_equal(first_seal(&sides[0], sides, 2), 0);
    assert_int_equal(first_seal(b, sides, 2), 0);
    uint16_t port = b->at[0].port;
    for (int i = 0; i < 2; i++) {
        size_t n = knock_msg(&key, "127.0.0.2", 0, &kn, msg);
        size_t got = exchange("127.0.0.2", port, msg, n, answer);
        assert_int_equal(answer_of(answer, got, &kn, &ack), B10_ERR_PERMISSION);
    }
    size_t n = knock_msg_by(&key, "127.0.0.2", 0, id_x, &kn, msg);
    assert_int_equal(exchange("127.0.0.2", port, msg, n, answer), 0);
    assert_int_equal(door_stats(b->door)->door_dropped, 1);
    assert_false(gate_has_ip(b->gate, "127.0.0.2"));
    side_close(&sides[0]);
    side_close(b);
}

/*
 * A certified knocker lets in only an answer proven for the node it
 * knocked for: an unsigned one, or one of another node, fails the knock
 * and its addresses stay off the gate; node-b's own is let in.
 */
static void test_certified_knocker_checks_answer(void **state)
{
    struct side sides[1];
    struct side *a = &sides[0];
    struct knocked r;
    static struct knock ack = { .ack = true, .sender_id = 0xf1, .status = B10_OK, .naddrs = 1 };

    side_open_as(a, "node-a", 0xa1, &ring, 1000, 2000, id_a);
    assert_int_equal(first_seal(a, sides, 1), 0);
    uint16_t port;
    int fake = sock_bound("127.0.0.1", true, false, &port);
    assert_true(fake >= 0);
    snprintf(ack.name, sizeof(ack.name), "node-b");
    ack.addrs[0] = (struct gate_addr){ .family = 4, .bytes = { 127, 0, 0, 9 } };
    ack.incarnation = 1;
    const void *w[1] = { "node-b" };
    size_t wl[1] = { 6 };
    ack.address_length = wireaddr_size(1, wl);
    wireaddr_pack(ack.address, 1, w, wl);

    fake_answer_as(a, fake, port, &key, &ack, true, NULL, "node-b", &r);
    assert_int_equal(r.status, B10_ERR_UNAUTHENTICATED);
    assert_non_null(strstr(r.detail, "without a node certificate"));
    assert_false(gate_has_ip(a->gate, "127.0.0.9"));

    fake_answer_as(a, fake, port, &key, &ack, true, id_x, "node-b", &r);
    assert_int_equal(r.status, B10_ERR_UNAUTHENTICATED);
    assert_non_null(strstr(r.detail, "is refused for node-b"));
    assert_false(gate_has_ip(a->gate, "127.0.0.9"));
    assert_int_equal(gate_count(a->gate), 0);

    fake_answer_as(a, fake, port, &key, &ack, true, id_b, "node-b", &r);
    if (r.status != B10_OK)
        fail_msg("node-b's answer: %s: %s", b10_status_name(r.status), r.detail);
    assert_true(gate_has_ip(a->gate, "127.0.0.9"));
    close(fake);
    side_close(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_knock_lets_in, close_leftovers),
        cmocka_unit_test_teardown(test_knock_other_key, close_leftovers),
        cmocka_unit_test_teardown(test_knock_dead_door, close_leftovers),
        cmocka_unit_test_teardown(test_knock_times_out, close_leftovers),
        cmocka_unit_test_teardown(test_knock_fails_later, close_leftovers),
        cmocka_unit_test_teardown(test_knock_cancel, close_leftovers),
        cmocka_unit_test_teardown(test_destroy_in_flight, close_leftovers),
        cmocka_unit_test_teardown(test_knocker_checks_answer, close_leftovers),
        cmocka_unit_test_teardown(test_knock_again, close_leftovers),
        cmocka_unit_test_teardown(test_door_answers, close_leftovers),
        cmocka_unit_test_teardown(test_door_drops, close_leftovers),
        cmocka_unit_test_teardown(test_door_rate, close_leftovers),
        cmocka_unit_test_teardown(test_admit, close_leftovers),
        cmocka_unit_test_teardown(test_door_per_source, close_leftovers),
        cmocka_unit_test_teardown(test_door_flood, close_leftovers),
        cmocka_unit_test_teardown(test_certified_knock, close_leftovers),
        cmocka_unit_test_teardown(test_certified_door_refuses, close_leftovers),
        cmocka_unit_test_teardown(test_uncertified_door_refuses_proof, close_leftovers),
        cmocka_unit_test_teardown(test_certified_door_rate, close_leftovers),
        cmocka_unit_test_teardown(test_certified_knocker_checks_answer, close_leftovers),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
