/*
 * test-gate.c — daemon/io/gate.c: the list of addresses that may reach UCX's
 * listeners, the classic BPF program made of it, and that program on real
 * sockets.
 *
 * The list: a new address changes it, a refreshed one does not; beyond
 * GATE_MAX_ADDRS the least recently allowed goes; other families are
 * ignored. The program runs in a small interpreter of the instructions it
 * uses, over hand-built IPv4 and IPv6 headers, against the list as the
 * oracle (every word of an IPv6 address counts; a dual-stack listener's IPv4
 * packets take the IPv4 block), and stays inside BPF_MAXINSNS at a full
 * list. Then the kernel runs it: a listener on 127.0.0.1 sealed with
 * {127.0.0.1} takes a connection from 127.0.0.1 and carries its bytes, while
 * one from 127.0.0.2 never completes its handshake until 127.0.0.2 is let in
 * and the gate sealed again; a kept listener is left open; IPv6 and
 * dual-stack listeners likewise; a descriptor closed and reused since the
 * first seal is left alone.
 *
 * Every test closes its sockets: the first seal of a gate takes every TCP
 * listener of the process.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <linux/filter.h>

#include "rng.h"
#include "sock.h"

#include "gate.h"

/* ---------------------------------------------------------------- addresses */

static struct gate_addr ip(const char *text)
{
    struct gate_addr a = { 0 };
    if (strchr(text, ':') == NULL) {
        a.family = 4;
        assert_int_equal(inet_pton(AF_INET, text, a.bytes), 1);
    } else {
        a.family = 6;
        assert_int_equal(inet_pton(AF_INET6, text, a.bytes), 1);
    }
    return a;
}

static struct gate_addr v4n(uint32_t n)
{
    struct gate_addr a = { .family = 4 };
    a.bytes[0] = 10;
    a.bytes[1] = (uint8_t)(n >> 16);
    a.bytes[2] = (uint8_t)(n >> 8);
    a.bytes[3] = (uint8_t)n;
    return a;
}

static bool allow1(struct gate *g, const char *text)
{
    struct gate_addr a = ip(text);
    return gate_allow(g, &a, 1);
}

static bool allows(const struct gate *g, const char *text)
{
    struct gate_addr a = ip(text);
    return gate_allows(g, &a);
}

/* ---------------------------------------------------------------- the list */

static void test_allow_new_and_refreshed(void **state)
{
    struct gate *g = gate_create();
    assert_non_null(g);
    assert_int_equal(gate_count(g), 0);
    assert_false(allows(g, "127.0.0.1"));

    assert_true(allow1(g, "127.0.0.1"));
    assert_int_equal(gate_count(g), 1);
    assert_true(allows(g, "127.0.0.1"));
    assert_false(allows(g, "127.0.0.2"));
    assert_false(allows(g, "::ffff:127.0.0.1"));    /* another family: another address */

    /* Again: nothing changed, so nothing to seal. */
    assert_false(allow1(g, "127.0.0.1"));
    assert_int_equal(gate_count(g), 1);

    /* A batch of one old, one new and a repeat of the new: changed, one more. */
    struct gate_addr batch[3] = { ip("127.0.0.1"), ip("2001:db8::7"), ip("2001:db8::7") };
    assert_true(gate_allow(g, batch, 3));
    assert_int_equal(gate_count(g), 2);
    assert_true(allows(g, "2001:db8::7"));
    assert_false(allows(g, "2001:db8::8"));
    assert_false(gate_allow(g, batch, 3));
    assert_false(gate_allow(g, batch, 0));

    /* An IPv4 address is its first 4 bytes: what lies behind them does not count. */
    struct gate_addr dirty = ip("192.0.2.1");
    memset(dirty.bytes + 4, 0xee, 12);
    assert_true(gate_allow(g, &dirty, 1));
    assert_true(allows(g, "192.0.2.1"));
    assert_false(gate_allow(g, &dirty, 1));
    gate_destroy(g);
    gate_destroy(NULL);
}

static void test_allow_ignores_other_families(void **state)
{
    struct gate *g = gate_create();
    struct gate_addr bad[4] = { ip("127.0.0.1"), ip("::1"), ip("127.0.0.1"), ip("::1") };
    bad[0].family = 0;
    bad[1].family = 5;
    bad[2].family = AF_INET;        /* the socket constant, not the 4 of a gate address */
    bad[3].family = AF_INET6;

    assert_false(gate_allow(g, bad, 4));
    assert_int_equal(gate_count(g), 0);
    assert_false(gate_allows(g, &bad[0]));

    /* Beside a good one, only the good one goes on. */
    struct gate_addr mixed[2] = { bad[1], ip("198.51.100.9") };
    assert_true(gate_allow(g, mixed, 2));
    assert_int_equal(gate_count(g), 1);
    assert_true(allows(g, "198.51.100.9"));
    gate_destroy(g);
}

/* Beyond GATE_MAX_ADDRS the least recently allowed goes: not the oldest added. */
static void test_allow_evicts_least_recent(void **state)
{
    struct gate *g = gate_create();

    for (uint32_t i = 0; i < GATE_MAX_ADDRS; i++) {
        struct gate_addr a = v4n(i);
        assert_true(gate_allow(g, &a, 1));
    }
    assert_int_equal(gate_count(g), GATE_MAX_ADDRS);

    /* 0 is refreshed, so 1 is now the least recent. */
    struct gate_addr a0 = v4n(0), a1 = v4n(1), a2 = v4n(2), fresh = v4n(1000);
    assert_false(gate_allow(g, &a0, 1));
    assert_true(gate_allow(g, &fresh, 1));
    assert_int_equal(gate_count(g), GATE_MAX_ADDRS);
    assert_true(gate_allows(g, &a0));
    assert_false(gate_allows(g, &a1));
    assert_true(gate_allows(g, &a2));
    assert_true(gate_allows(g, &fresh));

    /* The next goes in place of 2, the one after in place of 3. */
    struct gate_addr f2 = v4n(1001), f3 = v4n(1002), a3 = v4n(3);
    assert_true(gate_allow(g, &f2, 1));
    assert_false(gate_allows(g, &a2));
    assert_true(gate_allows(g, &a3));
    assert_true(gate_allow(g, &f3, 1));
    assert_false(gate_allows(g, &a3));
    assert_true(gate_allows(g, &a0));

    /* One batch longer than the list: its last GATE_MAX_ADDRS remain, all of them. */
    struct gate_addr many[GATE_MAX_ADDRS + 40];
    for (uint32_t i = 0; i < GATE_MAX_ADDRS + 40; i++)
        many[i] = v4n(5000 + i);
    assert_true(gate_allow(g, many, GATE_MAX_ADDRS + 40));
    assert_int_equal(gate_count(g), GATE_MAX_ADDRS);
    for (uint32_t i = 0; i < GATE_MAX_ADDRS + 40; i++)
        assert_int_equal(gate_allows(g, &many[i]), i >= 40);
    assert_false(gate_allows(g, &a0));
    gate_destroy(g);
}

static void test_addr_of_and_str(void **state)
{
    struct sockaddr_storage ss;
    socklen_t len;
    struct gate_addr a;
    char buf[INET6_ADDRSTRLEN];

    assert_true(sock_addr("192.0.2.1", 80, &ss, &len));
    assert_true(gate_addr_of((struct sockaddr *)&ss, &a));
    assert_true(gate_addr_eq(&a, &(struct gate_addr){ .family = 4, .bytes = { 192, 0, 2, 1 } }));
    assert_string_equal(gate_addr_str(&a, buf, sizeof(buf)), "192.0.2.1");

    assert_true(sock_addr("2001:db8::1", 80, &ss, &len));
    assert_true(gate_addr_of((struct sockaddr *)&ss, &a));
    assert_int_equal(a.family, 6);
    assert_string_equal(gate_addr_str(&a, buf, sizeof(buf)), "2001:db8::1");

    /* An IPv4 peer of a dual-stack socket is that IPv4 address. */
    assert_true(sock_addr("::ffff:127.0.0.2", 80, &ss, &len));
    assert_true(gate_addr_of((struct sockaddr *)&ss, &a));
    assert_int_equal(a.family, 4);
    assert_string_equal(gate_addr_str(&a, buf, sizeof(buf)), "127.0.0.2");

    ss.ss_family = AF_UNIX;
    assert_false(gate_addr_of((struct sockaddr *)&ss, &a));
}

/* ---------------------------------------------------------------- the program */

/*
 * The classic BPF the gate writes, run as the kernel would: loads relative to
 * the network header (SKF_NET_OFF), a load past the packet drops it. An
 * instruction it does not know, or a jump out of the program, fails the test.
 */
static uint32_t bpf_run(const struct sock_filter *prog, size_t n, const uint8_t *pkt, size_t len)
{
    uint32_t acc = 0;

    for (size_t pc = 0; pc < n; pc++) {
        const struct sock_filter *f = &prog[pc];
        switch (f->code) {
        case BPF_LD | BPF_W | BPF_ABS:
        case BPF_LD | BPF_B | BPF_ABS: {
            size_t size = BPF_SIZE(f->code) == BPF_W ? 4 : 1;
            int64_t off = (int64_t)(int32_t)f->k - SKF_NET_OFF;
            if (off < 0 || off > 0xffff)
                fail_msg("instruction %zu loads at %d, not from the network header", pc, (int)f->k);
            if ((size_t)off + size > len)
                return 0;
            acc = size == 1 ? pkt[off]
                            : (uint32_t)pkt[off] << 24 | (uint32_t)pkt[off + 1] << 16 |
                                  (uint32_t)pkt[off + 2] << 8 | pkt[off + 3];
            break;
        }
        case BPF_ALU | BPF_AND | BPF_K:
            acc &= f->k;
            break;
        case BPF_JMP | BPF_JA:
            if (f->k >= n - pc - 1)
                fail_msg("instruction %zu jumps past the end", pc);
            pc += f->k;
            break;
        case BPF_JMP | BPF_JEQ | BPF_K: {
            unsigned skip = acc == f->k ? f->jt : f->jf;
            if (skip >= n - pc - 1)
                fail_msg("instruction %zu jumps past the end", pc);
            pc += skip;
            break;
        }
        case BPF_RET | BPF_K:
            return f->k;
        default:
            fail_msg("instruction %zu: opcode %#x", pc, f->code);
        }
    }
    fail_msg("the program runs off its end");
    return 0;
}

/* A bare IPv4 or IPv6 header from src (all the filter reads). */
static size_t packet(const struct gate_addr *src, uint8_t *pkt)
{
    if (src->family == 4) {
        memset(pkt, 0, 20);
        pkt[0] = 0x45;
        pkt[9] = IPPROTO_TCP;
        memcpy(pkt + 12, src->bytes, 4);
        memcpy(pkt + 16, (uint8_t[]){ 127, 0, 0, 1 }, 4);
        return 20;
    }
    memset(pkt, 0, 40);
    pkt[0] = 0x60;
    pkt[6] = IPPROTO_TCP;
    memcpy(pkt + 8, src->bytes, 16);
    pkt[39] = 1;
    return 40;
}

/* Does a listener of this family, sealed with g's list, take a packet from src? */
static bool passes(const struct gate *g, int family, const struct gate_addr *src)
{
    static struct sock_filter prog[BPF_MAXINSNS];
    uint8_t pkt[40];
    size_t n = gate_program(g, family, prog, BPF_MAXINSNS);
    assert_true(n > 0);
    assert_int_equal(BPF_CLASS(prog[n - 1].code), BPF_RET);
    uint32_t verdict = bpf_run(prog, n, pkt, packet(src, pkt));
    if (verdict != 0 && verdict != 0xffffffffu)
        fail_msg("verdict %#x: a packet is kept whole or dropped", verdict);
    return verdict != 0;
}

static void test_program_v4(void **state)
{
    struct gate *g = gate_create();
    const struct gate_addr a = ip("192.0.2.1"), b = ip("10.1.2.3"), near = ip("192.0.2.2"),
                           zero = ip("0.0.0.0");

    assert_false(passes(g, AF_INET, &a));       /* an empty list takes nothing */
    assert_false(passes(g, AF_INET, &zero));
    struct gate_addr list[3] = { a, b, ip("2001:db8::1") };
    gate_allow(g, list, 3);
    assert_true(passes(g, AF_INET, &a));
    assert_true(passes(g, AF_INET, &b));
    assert_false(passes(g, AF_INET, &near));
    assert_false(passes(g, AF_INET, &zero));
    /* Each byte of the address counts. */
    for (int i = 0; i < 4; i++) {
        struct gate_addr x = a;
        x.bytes[i] ^= 0x01;
        assert_false(passes(g, AF_INET, &x));
    }
    /* A header cut short of its source address is dropped. */
    struct sock_filter prog[BPF_MAXINSNS];
    uint8_t pkt[40];
    size_t n = gate_program(g, AF_INET, prog, BPF_MAXINSNS);
    packet(&a, pkt);
    assert_int_equal(bpf_run(prog, n, pkt, 15), 0);
    assert_int_not_equal(bpf_run(prog, n, pkt, 16), 0);
    /* No program for a family the gate does not guard. */
    assert_int_equal(gate_program(g, AF_UNIX, prog, BPF_MAXINSNS), 0);
    gate_destroy(g);
}

static void test_program_v6(void **state)
{
    struct gate *g = gate_create();
    const struct gate_addr a = ip("2001:db8:1:2:3:4:5:6"), b = ip("::1"), v4 = ip("192.0.2.1");

    assert_false(passes(g, AF_INET6, &a));
    assert_false(passes(g, AF_INET6, &v4));
    struct gate_addr list[3] = { a, b, v4 };
    gate_allow(g, list, 3);
    assert_true(passes(g, AF_INET6, &a));
    assert_true(passes(g, AF_INET6, &b));
    /* A dual-stack listener's IPv4 packets: the IPv4 block decides. */
    assert_true(passes(g, AF_INET6, &v4));
    struct gate_addr v4near = ip("192.0.2.2");
    assert_false(passes(g, AF_INET6, &v4near));
    /* Each byte of each of the four words counts, for the first address and the last. */
    for (int i = 0; i < 16; i++) {
        struct gate_addr x = a, y = b;
        x.bytes[i] ^= 0x80;
        y.bytes[i] ^= 0x01;
        assert_false(passes(g, AF_INET6, &x));
        assert_false(passes(g, AF_INET6, &y));
    }
    /* An IPv6 address whose first word is an IPv4 one on the list is still IPv6. */
    struct gate_addr lookalike = { .family = 6 };
    memcpy(lookalike.bytes + 8, v4.bytes, 4);
    assert_false(passes(g, AF_INET6, &lookalike));

    /* IPv4 addresses alone: no IPv6 packet passes; IPv6 alone: no IPv4 one. */
    struct gate *only4 = gate_create(), *only6 = gate_create();
    gate_allow(only4, &v4, 1);
    gate_allow(only6, &b, 1);
    assert_false(passes(only4, AF_INET6, &b));
    assert_true(passes(only4, AF_INET6, &v4));
    assert_true(passes(only6, AF_INET6, &b));
    assert_false(passes(only6, AF_INET6, &v4));
    gate_destroy(only4);
    gate_destroy(only6);
    gate_destroy(g);
}

/*
 * Random lists of addresses that share most of their bytes (so that one
 * word alone tells two apart), probed with all of them: a packet passes
 * exactly when its source is on the list.
 */
static void test_program_random(void **state)
{
    for (uint64_t seed = 1; seed <= 200; seed++) {
        rng_seed(seed);
        struct gate_addr pool[48];
        for (int i = 0; i < 48; i++) {
            pool[i] = i % 2 ? ip("2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff") : ip("10.20.30.40");
            unsigned at = (unsigned)(rng_next() % (pool[i].family == 4 ? 4 : 16));
            pool[i].bytes[at] = (uint8_t)rng_next();
        }
        struct gate *g = gate_create();
        unsigned n = (unsigned)(rng_next() % 30);
        for (unsigned i = 0; i < n; i++)
            gate_allow(g, &pool[rng_next() % 48], 1);
        for (int i = 0; i < 48; i++) {
            bool want = gate_allows(g, &pool[i]);
            if (passes(g, AF_INET6, &pool[i]) != want)
                fail_msg("seed %llu: an IPv6 listener %s address %d", (unsigned long long)seed,
                         want ? "refuses listed" : "takes unlisted", i);
            if (pool[i].family == 4 && passes(g, AF_INET, &pool[i]) != want)
                fail_msg("seed %llu: an IPv4 listener %s address %d", (unsigned long long)seed,
                         want ? "refuses listed" : "takes unlisted", i);
        }
        gate_destroy(g);
    }
}

/* A full list of either family fits BPF_MAXINSNS, and the program needs all its room. */
static void test_program_size(void **state)
{
    static struct sock_filter prog[BPF_MAXINSNS];
    struct gate *g = gate_create();

    for (uint32_t i = 0; i < GATE_MAX_ADDRS; i++) {
        struct gate_addr a = ip("2001:db8::");
        a.bytes[14] = (uint8_t)(i >> 8);
        a.bytes[15] = (uint8_t)i;
        gate_allow(g, &a, 1);
    }
    size_t n6 = gate_program(g, AF_INET6, prog, BPF_MAXINSNS);
    assert_true(n6 > 9 * GATE_MAX_ADDRS);
    assert_true(n6 <= BPF_MAXINSNS);
    struct gate_addr last = ip("2001:db8::ff");
    assert_true(passes(g, AF_INET6, &last));
    size_t n4 = gate_program(g, AF_INET, prog, BPF_MAXINSNS);
    assert_int_equal(n4, 2);                    /* load, drop */

    /* One instruction short of what it needs: 0, never a cut program. */
    for (size_t max = 0; max < n6; max += (max < 16 || n6 - max < 16) ? 1 : 97)
        assert_int_equal(gate_program(g, AF_INET6, prog, max), 0);
    assert_int_equal(gate_program(g, AF_INET6, prog, n6), n6);
    for (size_t max = 0; max < n4; max++)
        assert_int_equal(gate_program(g, AF_INET, prog, max), 0);

    /* The kernel takes the largest program too. */
    uint16_t port;
    int fd = sock_bound("127.0.0.1", true, false, &port);
    assert_true(fd >= 0);
    n6 = gate_program(g, AF_INET6, prog, BPF_MAXINSNS);
    struct sock_fprog fprog = { .len = (unsigned short)n6, .filter = prog };
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &fprog, sizeof(fprog)), 0);
    assert_int_equal(sock_filter_length(fd), n6);
    close(fd);
    gate_destroy(g);
}

/* ---------------------------------------------------------------- real listeners */

/* Bytes both ways between a connection's ends. */
static void check_flows(int client, int server)
{
    char buf[16] = { 0 };
    assert_int_equal(write(client, "knock", 5), 5);
    struct pollfd p = { .fd = server, .events = POLLIN };
    assert_int_equal(poll(&p, 1, SOCK_ALLOWED_MS), 1);
    assert_int_equal(read(server, buf, sizeof(buf)), 5);
    assert_memory_equal(buf, "knock", 5);
    assert_int_equal(write(server, "ack", 3), 3);
    p.fd = client;
    assert_int_equal(poll(&p, 1, SOCK_ALLOWED_MS), 1);
    assert_int_equal(read(client, buf, sizeof(buf)), 3);
    assert_memory_equal(buf, "ack", 3);
}

/* A connection from src to the listener l at dst:port is taken, and carries bytes. */
static void check_taken(int l, const char *src, const char *dst, uint16_t port)
{
    int c = sock_connect(src, dst, port, SOCK_ALLOWED_MS);
    if (c < 0)
        fail_msg("a connect from %s to %s port %u was not taken", src, dst, port);
    int s = sock_accept(l, SOCK_ALLOWED_MS);
    assert_true(s >= 0);
    check_flows(c, s);
    close(c);
    close(s);
}

/* A connection from src is refused: its handshake does not finish, the listener has none. */
static void check_refused(int listener, const char *src, const char *dst, uint16_t port)
{
    if (sock_reaches(src, dst, port, SOCK_REFUSED_MS))
        fail_msg("a connect from %s to %s port %u was taken", src, dst, port);
    assert_int_equal(sock_accept(listener, 0), -1);
}

/* After a test of real listeners: its sockets, closed even when it failed halfway. */
static int close_sockets(void **state)
{
    sock_close_all();
    return 0;
}

static void seal(struct gate *g, const int *keep, unsigned nkeep)
{
    char detail[256] = "";
    b10_status_t st = gate_seal(g, keep, nkeep, detail, sizeof(detail));
    if (st != B10_OK)
        fail_msg("gate_seal: %s: %s", b10_status_name(st), detail);
}

static void test_seal_v4(void **state)
{
    struct gate *g = gate_create();
    uint16_t port;
    int l = sock_bound("127.0.0.1", true, false, &port);
    assert_true(l >= 0);

    /* Before a seal: anyone. */
    assert_true(sock_reaches("127.0.0.2", "127.0.0.1", port, SOCK_ALLOWED_MS));
    int gone = sock_accept(l, SOCK_ALLOWED_MS);
    assert_true(gone >= 0);
    close(gone);

    assert_true(allow1(g, "127.0.0.1"));
    seal(g, NULL, 0);
    assert_int_equal(gate_listeners(g), 1);
    assert_true(sock_filter_length(l) > 0);

    check_taken(l, "127.0.0.1", "127.0.0.1", port);

    check_refused(l, "127.0.0.2", "127.0.0.1", port);

    /* Let in, sealed again: taken, and the sockets it accepts carry bytes. */
    assert_true(allow1(g, "127.0.0.2"));
    seal(g, NULL, 0);
    assert_int_equal(gate_listeners(g), 1);
    check_taken(l, "127.0.0.2", "127.0.0.1", port);
    check_refused(l, "127.0.0.3", "127.0.0.1", port);
    close(l);
    gate_destroy(g);
}

/* A kept listener (the door's own) is not filtered, now or at a later seal. */
static void test_seal_keeps(void **state)
{
    struct gate *g = gate_create();
    uint16_t guarded_port, kept_port;
    int guarded = sock_bound("127.0.0.1", true, false, &guarded_port);
    int kept = sock_bound("127.0.0.1", true, false, &kept_port);
    int quiet = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);   /* no listener: not sealed */
    assert_true(guarded >= 0 && kept >= 0 && quiet >= 0);

    allow1(g, "127.0.0.1");
    seal(g, &kept, 1);
    assert_int_equal(gate_listeners(g), 1);
    assert_int_equal(sock_filter_length(kept), 0);
    assert_int_equal(sock_filter_length(quiet), 0);
    check_refused(guarded, "127.0.0.2", "127.0.0.1", guarded_port);
    assert_true(sock_reaches("127.0.0.2", "127.0.0.1", kept_port, SOCK_ALLOWED_MS));

    /* A later seal seals the same ones, whatever it is told to keep. */
    allow1(g, "127.0.0.3");
    seal(g, NULL, 0);
    assert_int_equal(gate_listeners(g), 1);
    assert_int_equal(sock_filter_length(kept), 0);
    close(guarded);
    close(kept);
    close(quiet);
    gate_destroy(g);
}

/*
 * A listener closed after the first seal, its number taken by a socket that
 * does not listen: the next seal leaves that socket alone, and seals the rest.
 */
static void test_seal_reused_fd(void **state)
{
    struct gate *g = gate_create();
    uint16_t port, other_port, reuse_port;
    int l = sock_bound("127.0.0.1", true, false, &port);
    int other = sock_bound("127.0.0.1", true, false, &other_port);
    assert_true(l >= 0 && other >= 0);

    allow1(g, "127.0.0.1");
    seal(g, NULL, 0);
    assert_int_equal(gate_listeners(g), 2);
    unsigned before = sock_filter_length(other);
    assert_true(before > 0);

    close(l);
    int reused = sock_bound("127.0.0.1", false, false, &reuse_port);
    assert_int_equal(reused, l);
    allow1(g, "127.0.0.2");
    seal(g, NULL, 0);
    assert_int_equal(sock_filter_length(reused), 0);
    assert_true(sock_filter_length(other) > before);     /* one more address */
    assert_true(sock_reaches("127.0.0.2", "127.0.0.1", other_port, SOCK_ALLOWED_MS));

    /* Closed and not reused: left alone as well. */
    close(reused);
    allow1(g, "127.0.0.3");
    seal(g, NULL, 0);
    close(other);
    gate_destroy(g);
}

/* More listeners than GATE_MAX_LISTENERS: refused, and said. */
static void test_seal_too_many_listeners(void **state)
{
    struct gate *g = gate_create();
    int fds[GATE_MAX_LISTENERS + 1];
    uint16_t port;
    char detail[256] = "";

    for (int i = 0; i <= GATE_MAX_LISTENERS; i++) {
        fds[i] = sock_bound("127.0.0.1", true, false, &port);
        assert_true(fds[i] >= 0);
    }
    assert_int_equal(gate_seal(g, NULL, 0, detail, sizeof(detail)), B10_ERR_TOO_LARGE);
    assert_non_null(strstr(detail, "listeners"));
    for (int i = 0; i <= GATE_MAX_LISTENERS; i++)
        close(fds[i]);
    gate_destroy(g);
}

/* Is there an IPv6 loopback to test on? cmocka's skip, with the reason printed. */
static void need_v6(void)
{
    uint16_t port;
    int fd = sock_bound("::1", true, false, &port);
    if (fd < 0) {
        print_message("no IPv6 loopback (::1) on this host: %s\n", strerror(errno));
        skip();
    }
    close(fd);
}

static void test_seal_v6(void **state)
{
    need_v6();
    struct gate *g = gate_create();
    uint16_t port;
    int l = sock_bound("::1", true, false, &port);
    assert_true(l >= 0);

    /* ::1's last word differs from the one listed, every other word is the same. */
    allow1(g, "::2");
    seal(g, NULL, 0);
    assert_int_equal(gate_listeners(g), 1);
    check_refused(l, "::1", "::1", port);

    assert_true(allow1(g, "::1"));
    seal(g, NULL, 0);
    check_taken(l, "::1", "::1", port);
    close(l);
    gate_destroy(g);
}

/* A dual-stack listener: its IPv4 connections pass the IPv4 list, its IPv6 ones the IPv6. */
static void test_seal_dual_stack(void **state)
{
    need_v6();
    struct gate *g = gate_create();
    uint16_t port;
    int l = sock_bound("::", true, true, &port);
    assert_true(l >= 0);

    allow1(g, "127.0.0.1");
    seal(g, NULL, 0);
    assert_int_equal(gate_listeners(g), 1);
    check_taken(l, "127.0.0.1", "127.0.0.1", port);
    check_refused(l, "127.0.0.2", "127.0.0.1", port);
    check_refused(l, "::1", "::1", port);

    allow1(g, "::1");
    seal(g, NULL, 0);
    check_taken(l, "::1", "::1", port);
    close(l);
    gate_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allow_new_and_refreshed),
        cmocka_unit_test(test_allow_ignores_other_families),
        cmocka_unit_test(test_allow_evicts_least_recent),
        cmocka_unit_test(test_addr_of_and_str),
        cmocka_unit_test(test_program_v4),
        cmocka_unit_test(test_program_v6),
        cmocka_unit_test(test_program_random),
        cmocka_unit_test_teardown(test_program_size, close_sockets),
        cmocka_unit_test_teardown(test_seal_v4, close_sockets),
        cmocka_unit_test_teardown(test_seal_keeps, close_sockets),
        cmocka_unit_test_teardown(test_seal_reused_fd, close_sockets),
        cmocka_unit_test_teardown(test_seal_too_many_listeners, close_sockets),
        cmocka_unit_test_teardown(test_seal_v6, close_sockets),
        cmocka_unit_test_teardown(test_seal_dual_stack, close_sockets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
