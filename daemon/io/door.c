/* door.c — see door.h. */
#include "door.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "knock.h"
#include "list.h"
#include "log.h"
#include "nodeid.h"

/*
 * Connections the kernel holds for a door before it accepts them: room for
 * a burst of a flood, so that a real knock's SYN among it is not dropped
 * (and retried by its TCP a second later). The door accepts them all at
 * each turn of the loop; door_admit sorts them out.
 */
#define DOOR_BACKLOG 512

struct door_listener {
    uv_tcp_t tcp;
    struct wireaddr_door where;
};

struct door {
    uv_loop_t *loop;
    const struct auth_keyring *keys;
    const struct nodeid *nodeid;    /* this node's certificate (b10d's), NULL when uncertified */
    struct gate *gate;
    struct door_config cfg;
    char name[CONFIG_NAME_MAX];
    struct door_listener *listeners[WIREADDR_MAX_DOORS];
    unsigned nlisteners;
    struct gate_addr own[KNOCK_MAX_ADDRS];      /* the addresses this daemon claims */
    unsigned nown;
    struct list conns;          /* struct door_conn.node: knocks being answered */
    unsigned nconns;
    struct list knocks;         /* struct door_knock.node: this daemon's knocks in flight */
    double tokens;              /* knocks answered: a token bucket of one second's worth */
    uint64_t tokens_ms;
    const uint8_t *address;     /* this boot's worker address and incarnation, for KNOCK_ACKs */
    size_t address_length;
    uint64_t incarnation;
    uint64_t log_ms;            /* when a dropped connection was last logged */
    uint64_t unlogged;
    struct stats_door *stats;   /* cfg.stats, or own_stats */
    struct stats_door own_stats;
};

/* One connection at a door: one KNOCK in, at most one KNOCK_ACK out. */
struct door_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t write;
    struct door *door;
    struct list node;
    struct gate_addr from;
    unsigned open_handles;
    bool done;                  /* its knock whole (being answered), or dropped: reads no more */
    size_t have;
    uint8_t in[KNOCK_MAX_BYTES];
    uint8_t *out;               /* the KNOCK_ACK, while it is written */
};

/* One try at one of the other daemon's doors. */
struct door_try {
    uv_tcp_t tcp;
    uv_connect_t connect;
    uv_write_t write;
    struct door_knock *k;       /* NULL once the knock ended */
    size_t have;
    uint8_t in[KNOCK_ACK_MAX_BYTES];
    uint8_t out[KNOCK_MAX_BYTES];
};

struct door_knock {
    struct door *door;
    struct list node;
    uv_timer_t timer;           /* the round's bound, the backoff before the next, or the end told */
    struct door_try *now;
    struct wireaddr_door targets[WIREADDR_MAX_DOORS];
    unsigned ntargets, next;
    uint8_t nonce[KNOCK_NONCE_BYTES];
    char name[CONFIG_NAME_MAX];     /* the daemon knocked at: a certified door's answer proves it */
    void *user;
    door_knock_cb cb;
    door_knock_again_cb again;
    uint64_t since_ms;          /* door_now_ms when the knock began */
    unsigned rounds;            /* rounds that ended with no door letting this daemon in */
    bool took;                  /* this round: a door took a connection (or the round ran out) */
    bool starting;              /* inside door_knock: an end now is told from the loop */
    b10_status_t status;        /* the end told from the loop */
    char detail[192];           /* why the last door tried did not let this daemon in */
    char why[192 + 96];         /* door_knock_why's answer: the detail and its words */
};

static uint64_t door_now_ms(const struct door *door)
{
    return uv_now(door->loop);
}

static uint64_t door_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void door_sockaddr(const struct wireaddr_door *w, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    if (w->family == 4) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        in->sin_family = AF_INET;
        memcpy(&in->sin_addr, w->addr, 4);
        in->sin_port = htons(w->port);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
        in6->sin6_family = AF_INET6;
        memcpy(&in6->sin6_addr, w->addr, 16);
        in6->sin6_port = htons(w->port);
    }
}

static const char *door_where(const struct wireaddr_door *w, char *buf, size_t size)
{
    char ip[INET6_ADDRSTRLEN];
    struct gate_addr a = { .family = w->family };
    memcpy(a.bytes, w->addr, 16);
    snprintf(buf, size, w->family == 6 ? "[%s]:%u" : "%s:%u", gate_addr_str(&a, ip, sizeof(ip)),
             w->port);
    return buf;
}

b10_status_t door_seal(struct door *door, char *detail, size_t detail_len)
{
    int fds[WIREADDR_MAX_DOORS];
    unsigned n = door_fds(door, fds, WIREADDR_MAX_DOORS);
    return gate_seal(door->gate, fds, n, detail, detail_len);
}

static const struct gate_addr door_loopback[2] = {
    { .family = 4, .bytes = { 127, 0, 0, 1 } },
    { .family = 6, .bytes = { [15] = 1 } },
};

static bool door_is_loopback(const struct gate_addr *a)
{
    static const uint8_t v6[16] = { [15] = 1 };
    return a->family == 4 ? a->bytes[0] == 127 : memcmp(a->bytes, v6, 16) == 0;
}

/*
 * Is an address this host's: a loopback one, or one of its devices'? A knock
 * from this host's own address comes from this host (no one off it can
 * complete a TCP handshake from there), so its loopback addresses, by which
 * a UCX of this host may connect, are let in too; from anywhere else they
 * would let in whatever runs on this node.
 */
static bool door_is_local(const struct door *door, const struct gate_addr *a)
{
    if (door_is_loopback(a))
        return true;
    for (unsigned i = 0; i < door->nown; i++)
        if (gate_addr_eq(&door->own[i], a))
            return true;
    return false;
}

/* Put addresses on the gate, and seal it again if that changed it. */
static b10_status_t door_let_in(struct door *door, const struct gate_addr *addrs, unsigned n,
                                char *detail, size_t detail_len)
{
    if (!gate_allow(door->gate, addrs, n))
        return B10_OK;
    return door_seal(door, detail, detail_len);
}

/* ---------------------------------------------------------------- answering */

static void door_conn_closed(uv_handle_t *h)
{
    struct door_conn *c = h->data;
    if (--c->open_handles == 0) {
        free(c->out);
        free(c);
    }
}

static void door_conn_close(struct door_conn *c)
{
    if (uv_is_closing((uv_handle_t *)&c->tcp))
        return;
    c->done = true;
    list_remove(&c->node);
    c->door->nconns--;
    uv_close((uv_handle_t *)&c->timer, door_conn_closed);
    uv_close((uv_handle_t *)&c->tcp, door_conn_closed);
}

/*
 * How long a connection has to deliver its whole knock: well within the
 * exchange's bound, as a real knock is one write right after connect.
 */
static uint64_t door_whole_ms(const struct door *door)
{
    uint64_t whole = door->cfg.whole_ms != 0 ? door->cfg.whole_ms : DOOR_WHOLE_KNOCK_MS;
    uint64_t half = door->cfg.timeout_ms / 2;
    return half < whole ? (half > 0 ? half : 1) : whole;
}

/* Unanswered: a stranger, a malformed or slow knock, one too many. Logged once a second. */
static void door_drop(struct door_conn *c, const char *why)
{
    struct door *door = c->door;
    char ip[INET6_ADDRSTRLEN];
    uint64_t now = door_now_ms(door);

    door->stats->door_dropped++;
    if (now - door->log_ms >= 1000) {
        log_notice("door: dropped a connection from %s: %s%s", gate_addr_str(&c->from, ip, sizeof(ip)),
                   why, door->unlogged ? " (and others since the last such line)" : "");
        door->log_ms = now;
        door->unlogged = 0;
    } else {
        door->unlogged++;
    }
    door_conn_close(c);
}

static void door_conn_timeout(uv_timer_t *t);

static void door_on_answered(uv_write_t *w, int status)
{
    (void)status;
    door_conn_close(w->data);
}

static void door_answer(struct door_conn *c, const struct knock *knock, b10_status_t status,
                        const char *detail)
{
    struct door *door = c->door;
    struct knock ack = { .ack = true, .sender_id = door->cfg.daemon_id, .status = status };

    snprintf(ack.name, sizeof(ack.name), "%s", door->name);
    snprintf(ack.detail, sizeof(ack.detail), "%s", detail);
    memcpy(ack.nonce, knock->nonce, KNOCK_NONCE_BYTES);
    if (status == B10_OK) {
        memcpy(ack.addrs, door->own, door->nown * sizeof(door->own[0]));
        ack.naddrs = door->nown;
        ack.incarnation = door->incarnation;
        if (door->address_length <= sizeof(ack.address)) {
            memcpy(ack.address, door->address, door->address_length);
            ack.address_length = door->address_length;
        }
    }
    size_t n = 0;
    if ((c->out = malloc(KNOCK_ACK_MAX_BYTES)) != NULL)
        n = knock_pack(&door->keys->keys[0], &ack, door->nodeid, c->out, KNOCK_ACK_MAX_BYTES);
    uv_buf_t buf = uv_buf_init((char *)c->out, (unsigned)n);
    c->done = true;
    uv_read_stop((uv_stream_t *)&c->tcp);
    /* Whole and judged: the answer has the rest of the exchange's bound to be taken. */
    uv_timer_start(&c->timer, door_conn_timeout, door->cfg.timeout_ms, 0);
    c->write.data = c;
    if (n == 0)
        log_err("door: cannot answer a knock of %s: no memory, or the node key would not sign",
                knock->name);
    if (n == 0 || uv_write(&c->write, (uv_stream_t *)&c->tcp, &buf, 1, door_on_answered) != 0)
        door_conn_close(c);
}

static bool door_budget(struct door *door)
{
    uint64_t now = door_now_ms(door);
    double rate = door->cfg.knocks_per_s;

    door->tokens += (double)(now - door->tokens_ms) * rate / 1000.0;
    if (door->tokens > rate)
        door->tokens = rate;
    door->tokens_ms = now;
    if (door->tokens < 1.0)
        return false;
    door->tokens -= 1.0;
    return true;
}

/*
 * Certified (door->nodeid): is the knock's proof good for the name it
 * claims? Uncertified: there is none, as a daemon without a certificate
 * cannot check one (and a mixed cluster is refused at the HELLO anyway).
 * B10_OK, or why not in detail.
 */
static b10_status_t door_check_proof(const struct door *door, const struct knock *k, char *detail,
                                     size_t detail_len)
{
    char why[400];

    if (door->nodeid == NULL && !k->proof.present)
        return B10_OK;
    if (door->nodeid == NULL) {
        snprintf(detail, detail_len, "it proves its node by a certificate, and this daemon has "
                 "none to check it by (--node-cert)");
        return B10_ERR_PERMISSION;
    }
    if (!k->proof.present) {
        snprintf(detail, detail_len, "this daemon takes knocks from certified nodes only "
                 "(--node-cert), and this knock proves none");
        return B10_ERR_PERMISSION;
    }
    if (knock_verify(door->nodeid, k, k->name, why, sizeof(why)) != B10_OK) {
        snprintf(detail, detail_len, "its node certificate is refused: %.120s", why);
        return B10_ERR_PERMISSION;
    }
    return B10_OK;
}

static void door_judge(struct door_conn *c, size_t length)
{
    struct door *door = c->door;
    struct knock k;
    bool authenticated;
    char detail[KNOCK_DETAIL_MAX], ip[INET6_ADDRSTRLEN];

    /*
     * The seal first: a stranger's bytes cost a MAC check (microseconds, at
     * most DOOR_MAX_CONNS at once) but no token, so that no one without the
     * key can use up the knocks a key holder is answered. A node proof is
     * checked only after a token is spent: a key holder cannot make this
     * daemon parse certificates and verify signatures faster than it
     * answers knocks.
     */
    b10_status_t st = knock_open(door->keys, false, c->in, length, &k, &authenticated, detail,
                                 sizeof(detail));
    if (!authenticated) {
        door_drop(c, detail);
        return;
    }
    if (!door_budget(door)) {
        door_drop(c, "more knocks than --max-hellos-per-s");
        return;
    }
    if (st == B10_OK) {
        uint64_t wall = door_wall_ms();
        uint64_t skew = wall > k.sent_ms ? wall - k.sent_ms : k.sent_ms - wall;
        bool claimed = false;
        for (unsigned i = 0; i < k.naddrs; i++)
            claimed |= gate_addr_eq(&k.addrs[i], &c->from);
        if (skew > KNOCK_FRESH_MS) {
            snprintf(detail, sizeof(detail), "the knock's clock is %" PRIu64 " ms from this "
                     "daemon's (a minute at most)", skew);
            st = B10_ERR_UNAUTHENTICATED;
        } else if (!claimed) {
            snprintf(detail, sizeof(detail), "it knocks from %s, which it does not list as its "
                     "own", gate_addr_str(&c->from, ip, sizeof(ip)));
            st = B10_ERR_UNAUTHENTICATED;
        } else if ((st = door_check_proof(door, &k, detail, sizeof(detail))) != B10_OK) {
            /* Refused before anything of it reaches the gate: the proof is the door's say. */
        } else {
            struct gate_addr in[KNOCK_MAX_ADDRS];
            unsigned n = 0;
            for (unsigned i = 0; i < k.naddrs; i++)
                if (!door_is_loopback(&k.addrs[i]) || door_is_local(door, &c->from))
                    in[n++] = k.addrs[i];
            st = door_let_in(door, in, n, detail, sizeof(detail));
        }
    }
    if (st != B10_OK) {
        door->stats->door_refused++;
        log_warning("door: refused a knock of %s from %s: %s", k.name[0] ? k.name : "?",
                    gate_addr_str(&c->from, ip, sizeof(ip)), detail);
        door_answer(c, &k, st, detail);
        return;
    }
    door->stats->door_let_in++;
    log_info("door: let %s in from %s (%u addresses; %u on the gate)", k.name,
             gate_addr_str(&c->from, ip, sizeof(ip)), k.naddrs, gate_count(door->gate));
    door_answer(c, &k, B10_OK, "");
}

static void door_conn_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct door_conn *c = h->data;
    (void)hint;
    *buf = uv_buf_init((char *)c->in + c->have, (unsigned)(sizeof(c->in) - c->have));
}

/*
 * nread more bytes in c->in (or a libuv error, UV_EOF at the end): judged
 * once the knock is whole, dropped when it cannot be one.
 */
static void door_conn_took(struct door_conn *c, ssize_t nread)
{
    if (nread < 0) {
        door_drop(c, nread == UV_EOF ? "it hung up before its knock was whole" : uv_strerror((int)nread));
        return;
    }
    c->have += (size_t)nread;
    size_t want = knock_frame_length(c->in, c->have, false);
    if (want == SIZE_MAX || (want != 0 && c->have > want)) {
        door_drop(c, "not a knock (its length, or bytes after it)");
        return;
    }
    if (want != 0 && c->have == want)
        door_judge(c, want);
    else if (c->have == sizeof(c->in))
        door_drop(c, "not a knock");
}

static void door_conn_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct door_conn *c = s->data;
    (void)buf;

    if (!c->done && nread != 0)
        door_conn_took(c, nread);
}

/*
 * What came with the connection, read at its accept. A real knock is
 * written right after connect, so it lies whole in the socket by the time
 * a flooded door accepts it: judged now, it is never among the slow ones
 * that newer connections of the same accept burst evict.
 */
static void door_conn_read_now(struct door_conn *c)
{
    uv_os_fd_t fd;

    if (uv_fileno((const uv_handle_t *)&c->tcp, &fd) != 0)
        return;
    while (!c->done && c->have < sizeof(c->in)) {
        ssize_t n = recv(fd, c->in + c->have, sizeof(c->in) - c->have, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        door_conn_took(c, n > 0 ? n : n == 0 ? UV_EOF : -errno);
    }
}

static void door_conn_timeout(uv_timer_t *t)
{
    struct door_conn *c = t->data;
    char why[96];

    if (c->done) {
        door_drop(c, "its answer was not taken within --connect-timeout-ms");
        return;
    }
    c->door->stats->door_dropped_slow++;
    snprintf(why, sizeof(why), "no whole knock within %" PRIu64 " ms", door_whole_ms(c->door));
    door_drop(c, why);
}

bool door_same_source(const struct gate_addr *a, const struct gate_addr *b)
{
    return a->family == b->family &&
           memcmp(a->bytes, b->bytes, a->family == 4 ? 4 : DOOR_SOURCE_V6_BYTES) == 0;
}

/* How many of the n slots are of a's source (source) or of its family (!source). */
static unsigned door_admit_count(const struct door_slot *slots, unsigned n,
                                 const struct gate_addr *a, bool source)
{
    unsigned count = 0;
    for (unsigned i = 0; i < n; i++)
        count += source ? door_same_source(&slots[i].from, a) : slots[i].from.family == a->family;
    return count;
}

/* The sources a full pool's slots come from, counted in one pass: open addressing, room to spare. */
#define DOOR_TALLY (4 * DOOR_POOL_CONNS)

static unsigned door_tally_hash(const struct gate_addr *a)
{
    uint32_t h = 2166136261u;   /* FNV-1a over the source's bytes */
    for (unsigned i = 0; i < (a->family == 4 ? 4u : DOOR_SOURCE_V6_BYTES); i++)
        h = (h ^ a->bytes[i]) * 16777619u;
    return h & (DOOR_TALLY - 1);
}

/*
 * The oldest slow slot of family `family` among slots[0..n) (n at most
 * 2 * DOOR_POOL_CONNS) whose source holds the most of them, or n. Linear:
 * a flood pays for each connection it opens, not the square of the pool.
 */
static unsigned door_admit_victim(const struct door_slot *slots, unsigned n, uint8_t family)
{
    uint16_t first[DOOR_TALLY] = { 0 };     /* 1 + the first slot of each source */
    uint16_t count[DOOR_TALLY];
    uint16_t bucket[2 * DOOR_POOL_CONNS];
    unsigned victim = n, most = 0;

    for (unsigned i = 0; i < n; i++) {
        if (slots[i].from.family != family)
            continue;
        unsigned b = door_tally_hash(&slots[i].from);
        while (first[b] != 0 && !door_same_source(&slots[first[b] - 1].from, &slots[i].from))
            b = (b + 1) & (DOOR_TALLY - 1);
        if (first[b] == 0) {
            first[b] = (uint16_t)(i + 1);
            count[b] = 0;
        }
        count[b]++;
        bucket[i] = (uint16_t)b;
    }
    for (unsigned i = 0; i < n; i++) {
        if (slots[i].whole || slots[i].from.family != family)
            continue;
        /* The source holding the most: a newcomer's own one slot never outweighs a flood's. */
        if (count[bucket[i]] > most) {
            most = count[bucket[i]];
            victim = i;
        }
    }
    return victim;
}

/*
 * Why the slow ones, oldest first, and never a whole one: a slot held by
 * a stranger is one that trickles, so the flood evicts itself, and the
 * knock that came whole at once is answered whatever the flood does. A
 * newcomer evicting (rather than being turned away at a full door) makes
 * the flood's connections the cheap ones to lose: to keep a real knock
 * out, a flood would have to open a pool's worth of connections between
 * that knock's accept and the read of the bytes that came with it
 * (door_conn_read_now). Turning newcomers away instead would let a
 * flood that merely keeps the pool full, a connection a slot, keep every
 * knock out.
 */
enum door_admit_verdict door_admit(const struct door_slot *slots, unsigned n,
                                   const struct gate_addr *from, unsigned *victim_p)
{
    bool source_full = door_admit_count(slots, n, from, true) >= DOOR_MAX_CONNS_PER_SOURCE;
    bool pool_full = door_admit_count(slots, n, from, false) >= DOOR_POOL_CONNS;
    unsigned victim = n;

    if (!source_full && !pool_full)
        return DOOR_ADMIT_TAKE;
    if (source_full) {
        for (unsigned i = 0; i < n && victim == n; i++)
            if (!slots[i].whole && door_same_source(&slots[i].from, from))
                victim = i;
    } else if (n <= 2 * DOOR_POOL_CONNS) {
        victim = door_admit_victim(slots, n, from->family);
    }
    if (victim == n)
        return DOOR_ADMIT_FULL;
    *victim_p = victim;
    return source_full ? DOOR_ADMIT_EVICT_SOURCE : DOOR_ADMIT_EVICT_POOL;
}

/*
 * Room for the newcomer c (the newest of door->conns): true, having closed
 * a slow one for it where needed; false, having dropped c.
 */
static bool door_make_room(struct door *door, struct door_conn *c)
{
    struct door_slot slots[2 * DOOR_POOL_CONNS];
    struct door_conn *held[2 * DOOR_POOL_CONNS];
    unsigned n = 0, victim;
    struct list *pos, *tmp;

    list_for_each_safe(pos, tmp, &door->conns) {
        struct door_conn *o = list_entry(pos, struct door_conn, node);
        if (o == c || n == 2 * DOOR_POOL_CONNS)
            continue;
        slots[n] = (struct door_slot){ .from = o->from, .whole = o->done };
        held[n++] = o;
    }
    switch (door_admit(slots, n, &c->from, &victim)) {
    case DOOR_ADMIT_TAKE:
        return true;
    case DOOR_ADMIT_EVICT_SOURCE:
        door->stats->door_evicted_source++;
        door_drop(held[victim], "a newer connection from its source took its place before its knock was whole");
        return true;
    case DOOR_ADMIT_EVICT_POOL:
        door->stats->door_evicted_pool++;
        door_drop(held[victim], "a newer connection took its place before its knock was whole (the door was full)");
        return true;
    case DOOR_ADMIT_FULL:
        break;
    }
    door->stats->door_dropped_full++;
    door_drop(c, "no room: every connection of its source or its pool is a knock being answered");
    return false;
}

static void door_on_connection(uv_stream_t *server, int status)
{
    struct door *door = server->data;
    struct door_conn *c;

    if (status != 0)
        return;
    if ((c = calloc(1, sizeof(*c))) == NULL) {
        uv_tcp_t *tmp = malloc(sizeof(*tmp));
        /* Accept and close at once, so the backlog does not hold it; without memory, leave it. */
        if (tmp != NULL && uv_tcp_init(door->loop, tmp) == 0) {
            if (uv_accept(server, (uv_stream_t *)tmp) == 0)
                door->stats->door_dropped++;
            uv_close((uv_handle_t *)tmp, (uv_close_cb)free);
        } else {
            free(tmp);
        }
        return;
    }
    c->door = door;
    uv_tcp_init(door->loop, &c->tcp);
    uv_timer_init(door->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->open_handles = 2;
    list_insert_tail(&door->conns, &c->node);
    door->nconns++;
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0 ||
        uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) != 0 ||
        !gate_addr_of((struct sockaddr *)&ss, &c->from)) {
        door->stats->door_dropped++;
        door_conn_close(c);
        return;
    }
    if (!door_make_room(door, c))
        return;
    uv_timer_start(&c->timer, door_conn_timeout, door_whole_ms(door), 0);
    door_conn_read_now(c);
    if (!c->done && uv_read_start((uv_stream_t *)&c->tcp, door_conn_alloc, door_conn_read) != 0)
        door_drop(c, "cannot read");
}

/* ---------------------------------------------------------------- knocking */

static void door_try_closed(uv_handle_t *h)
{
    free(h->data);
}

static void door_try_end(struct door_try *t)
{
    if (t->k != NULL && t->k->now == t)
        t->k->now = NULL;
    t->k = NULL;
    if (!uv_is_closing((uv_handle_t *)&t->tcp))
        uv_close((uv_handle_t *)&t->tcp, door_try_closed);
}

static void door_knock_closed(uv_handle_t *h)
{
    free(h->data);
}

static void door_knock_end(struct door_knock *k, b10_status_t status, const char *detail);

static void door_knock_told(uv_timer_t *timer)
{
    struct door_knock *k = timer->data;
    door_knock_end(k, k->status, k->detail);
}

/* The knock is over: its callback once (none when cancelled), then it goes. */
static void door_knock_end_ack(struct door_knock *k, b10_status_t status, const char *detail,
                               const struct knock *ack)
{
    door_knock_cb cb = k->cb;
    void *user = k->user;

    /*
     * Over before door_knock returned (every door refused by the kernel at
     * once: a multicast address in a peer's worker address, no route, no
     * descriptor left): the caller does not hold the handle yet, and would
     * keep it after a callback had ended it, to cancel it later. The end is
     * told from the loop instead, on the knock's timer.
     */
    if (k->starting) {
        k->status = status;
        if (detail != k->detail)
            snprintf(k->detail, sizeof(k->detail), "%s", detail);
        uv_timer_start(&k->timer, door_knock_told, 0, 0);
        return;
    }
    if (k->now != NULL)
        door_try_end(k->now);
    list_remove(&k->node);
    uv_close((uv_handle_t *)&k->timer, door_knock_closed);
    if (status == B10_OK)
        k->door->stats->knocks_let_in++;
    else
        k->door->stats->knocks_failed++;
    if (cb != NULL)
        cb(user, status, detail, ack);
}

static void door_knock_end(struct door_knock *k, b10_status_t status, const char *detail)
{
    door_knock_end_ack(k, status, detail, NULL);
}

static void door_knock_next(struct door_knock *k);

/* This door did not let us in: the next, or the end with its reason. */
static void door_try_failed(struct door_try *t, const char *fmt, const char *what)
{
    struct door_knock *k = t->k;
    char where[64];

    if (k == NULL)
        return;
    snprintf(k->detail, sizeof(k->detail), fmt, door_where(&k->targets[k->next - 1], where,
                                                           sizeof(where)), what);
    door_try_end(t);
    door_knock_next(k);
}

static void door_try_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct door_try *t = h->data;
    (void)hint;
    *buf = uv_buf_init((char *)t->in + t->have, (unsigned)(sizeof(t->in) - t->have));
}

static void door_try_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct door_try *t = s->data;
    struct door_knock *k = t->k;
    (void)buf;

    if (k == NULL || nread == 0)
        return;
    if (nread < 0) {
        door_try_failed(t, "the door at %s hung up: %s", nread == UV_EOF
                        ? "no answer (a key this daemon does not share, or too many knocks)"
                        : uv_strerror((int)nread));
        return;
    }
    t->have += (size_t)nread;
    size_t want = knock_frame_length(t->in, t->have, true);
    if (want == SIZE_MAX || (want != 0 && t->have > want)) {
        door_try_failed(t, "the door at %s answered %s", "what is no KNOCK_ACK");
        return;
    }
    if (want == 0 || t->have < want)
        return;
    struct knock ack;
    bool authenticated;
    char detail[KNOCK_DETAIL_MAX];
    b10_status_t st = knock_open(k->door->keys, true, t->in, want, &ack, &authenticated, detail,
                                 sizeof(detail));
    if (st != B10_OK) {
        door_try_failed(t, "the door at %s answered: %s", detail);
        return;
    }
    if (memcmp(ack.nonce, k->nonce, KNOCK_NONCE_BYTES) != 0) {
        door_try_failed(t, "the door at %s answered %s", "another knock");
        return;
    }
    if (ack.status != B10_OK) {
        char why[KNOCK_DETAIL_MAX + CONFIG_NAME_MAX + 16];
        snprintf(why, sizeof(why), "%s refused: %s", ack.name, ack.detail);
        door_knock_end(k, ack.status, why);
        return;
    }
    /*
     * A certified daemon lets in only a certified node, the one it knocked
     * for: a key holder without that node's certificate, answering at its
     * door's address, does not get onto this gate. An uncertified daemon
     * cannot check a proof, and says so.
     */
    if (k->door->nodeid != NULL || ack.proof.present) {
        char why[400], said[KNOCK_DETAIL_MAX + 480];
        if (k->door->nodeid == NULL)
            snprintf(said, sizeof(said), "%s proves its node by a certificate, and this daemon "
                     "has none to check it by (--node-cert)", ack.name);
        else if (!ack.proof.present)
            snprintf(said, sizeof(said), "%s answers without a node certificate, and this "
                     "daemon lets in certified nodes only", ack.name);
        else if (knock_verify(k->door->nodeid, &ack, k->name, why, sizeof(why)) != B10_OK)
            snprintf(said, sizeof(said), "the node certificate of its door's answer is refused "
                     "for %s: %s", k->name, why);
        else
            said[0] = '\0';
        if (said[0] != '\0') {
            door_knock_end(k, B10_ERR_UNAUTHENTICATED, said);
            return;
        }
    }
    /*
     * The door's own address may be one it does not list (a NAT'd view): it
     * is let in too; and where that door is on this host, the loopback ones
     * (as door_judge does). Loopback addresses the door lists are not taken
     * from a door elsewhere.
     */
    struct gate_addr theirs[KNOCK_MAX_ADDRS + 3];
    unsigned n = 0;
    struct gate_addr at = { .family = k->targets[k->next - 1].family };
    memcpy(at.bytes, k->targets[k->next - 1].addr, 16);
    bool local = door_is_local(k->door, &at);
    for (unsigned i = 0; i < ack.naddrs; i++)
        if (!door_is_loopback(&ack.addrs[i]) || local)
            theirs[n++] = ack.addrs[i];
    theirs[n++] = at;
    if (local) {
        theirs[n++] = door_loopback[0];
        theirs[n++] = door_loopback[1];
    }
    st = door_let_in(k->door, theirs, n, detail, sizeof(detail));
    door_knock_end_ack(k, st, st == B10_OK ? "" : detail, st == B10_OK ? &ack : NULL);
}

static void door_try_wrote(uv_write_t *w, int status)
{
    struct door_try *t = w->data;
    if (status != 0 && t->k != NULL)
        door_try_failed(t, "the door at %s: %s", uv_strerror(status));
}

static void door_try_connected(uv_connect_t *req, int status)
{
    struct door_try *t = req->data;
    struct door_knock *k = t->k;
    struct door *door;

    if (k == NULL)
        return;
    door = k->door;
    if (status != 0) {
        door_try_failed(t, "the door at %s: %s", uv_strerror(status));
        return;
    }
    /* Something listens there: a round that ends unanswered now is one to try again. */
    k->took = true;
    /* Claim this daemon's addresses and the one this connection comes from. */
    struct knock knock = { .sender_id = door->cfg.daemon_id, .sent_ms = door_wall_ms() };
    struct sockaddr_storage ss;
    struct gate_addr mine;
    int len = sizeof(ss);
    snprintf(knock.name, sizeof(knock.name), "%s", door->name);
    memcpy(knock.nonce, k->nonce, KNOCK_NONCE_BYTES);
    memcpy(knock.addrs, door->own, door->nown * sizeof(door->own[0]));
    knock.naddrs = door->nown;
    /* Loopback ones too: a door of this host lets those in (door_is_local), others drop them. */
    struct gate_addr claims[3] = { door_loopback[0], door_loopback[1] };
    unsigned nclaims = 2;
    if (uv_tcp_getsockname(&t->tcp, (struct sockaddr *)&ss, &len) == 0 &&
        gate_addr_of((struct sockaddr *)&ss, &mine))
        claims[nclaims++] = mine;
    for (unsigned c = 0; c < nclaims; c++) {
        bool listed = false;
        for (unsigned i = 0; i < knock.naddrs; i++)
            listed |= gate_addr_eq(&knock.addrs[i], &claims[c]);
        if (!listed && knock.naddrs < KNOCK_MAX_ADDRS)
            knock.addrs[knock.naddrs++] = claims[c];
    }
    size_t n = knock_pack(&door->keys->keys[0], &knock, door->nodeid, t->out, sizeof(t->out));
    uv_buf_t buf = uv_buf_init((char *)t->out, (unsigned)n);
    t->write.data = t;
    if (n == 0 || uv_write(&t->write, (uv_stream_t *)&t->tcp, &buf, 1, door_try_wrote) != 0 ||
        uv_read_start((uv_stream_t *)&t->tcp, door_try_alloc, door_try_read) != 0)
        door_try_failed(t, "the door at %s: %s", n == 0 ? "cannot pack the knock (the node key "
                        "would not sign)" : "cannot send the knock");
}

/*
 * The next backoff: doubling from DOOR_RETRY_FIRST_MS to DOOR_RETRY_MAX_MS,
 * half of it jitter, so that knockers a flood turned away together do not
 * come back together.
 */
static uint64_t door_knock_backoff(const struct door_knock *k)
{
    uint64_t ceiling = DOOR_RETRY_FIRST_MS;
    uint32_t r;

    for (unsigned i = 1; i < k->rounds && ceiling < DOOR_RETRY_MAX_MS; i++)
        ceiling *= 2;
    if (ceiling > DOOR_RETRY_MAX_MS)
        ceiling = DOOR_RETRY_MAX_MS;
    auth_random(&r, sizeof(r));
    return ceiling / 2 + r % (ceiling / 2 + 1);
}

static void door_knock_timeout(uv_timer_t *timer);

static void door_knock_round(struct door_knock *k)
{
    k->next = 0;
    k->took = false;
    uv_timer_start(&k->timer, door_knock_timeout, k->door->cfg.timeout_ms, 0);
    door_knock_next(k);
}

static void door_knock_retry(uv_timer_t *timer)
{
    door_knock_round(timer->data);
}

/*
 * Every door of the round tried (or its time out) and none let this daemon
 * in. Where one took the connection and then said nothing (dropped it at a
 * flood, past its rate, under a key it does not hold, or kept silent), the
 * next round may find room: again after a backoff while the caller says
 * something still waits. Where nothing listened at any (refused, no
 * route), the daemon is down: what waits fails now, as it would on a
 * round that ends so fast again.
 */
static void door_knock_round_over(struct door_knock *k)
{
    char why[sizeof(k->detail) + 64];

    k->rounds++;
    if (k->took && k->again != NULL && k->again(k->user)) {
        uint64_t backoff = door_knock_backoff(k);
        k->door->stats->knocks_retried++;
        log_debug("door: knock %u at the doors of %s: %s; again in %" PRIu64 " ms", k->rounds,
                  k->name, k->detail, backoff);
        uv_timer_start(&k->timer, door_knock_retry, backoff, 0);
        return;
    }
    if (k->rounds == 1) {
        door_knock_end(k, B10_ERR_PEER_UNREACHABLE, k->detail);
        return;
    }
    snprintf(why, sizeof(why), "no door let this daemon in after %u knocks; the last: %s", k->rounds,
             k->detail);
    door_knock_end(k, B10_ERR_PEER_UNREACHABLE, why);
}

static void door_knock_next(struct door_knock *k)
{
    struct door *door = k->door;

    if (k->next == k->ntargets) {
        door_knock_round_over(k);
        return;
    }
    struct door_try *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        door_knock_end(k, B10_ERR_NO_MEMORY, "no memory to knock");
        return;
    }
    struct sockaddr_storage ss;
    door_sockaddr(&k->targets[k->next++], &ss);
    uv_tcp_init(door->loop, &t->tcp);
    t->tcp.data = t->connect.data = t;
    t->k = k;
    k->now = t;
    int rc = uv_tcp_connect(&t->connect, &t->tcp, (struct sockaddr *)&ss, door_try_connected);
    if (rc != 0)
        door_try_failed(t, "the door at %s: %s", uv_strerror(rc));
}

/* The round's time is out: the door tried now kept silent (or its SYN went unanswered). */
static void door_knock_timeout(uv_timer_t *timer)
{
    struct door_knock *k = timer->data;
    char why[sizeof(k->detail) + 64];

    snprintf(why, sizeof(why), "no door let this daemon in within --connect-timeout-ms%s%s",
             k->detail[0] ? "; " : "", k->detail);
    snprintf(k->detail, sizeof(k->detail), "%.*s", (int)sizeof(k->detail) - 1, why);
    if (k->now != NULL)
        door_try_end(k->now);
    k->took = true;
    door_knock_round_over(k);
}

struct door_knock *door_knock(struct door *door, const struct wireaddr_door *doors, unsigned n,
                              const char *name, void *user, door_knock_cb cb,
                              door_knock_again_cb again)
{
    struct door_knock *k = calloc(1, sizeof(*k));

    if (k == NULL || n == 0) {
        free(k);
        return NULL;
    }
    k->door = door;
    k->user = user;
    k->cb = cb;
    k->again = again;
    k->since_ms = door_now_ms(door);
    snprintf(k->name, sizeof(k->name), "%s", name);
    k->ntargets = n < WIREADDR_MAX_DOORS ? n : WIREADDR_MAX_DOORS;
    memcpy(k->targets, doors, k->ntargets * sizeof(doors[0]));
    auth_random(k->nonce, sizeof(k->nonce));
    uv_timer_init(door->loop, &k->timer);
    k->timer.data = k;
    list_insert_tail(&door->knocks, &k->node);
    k->starting = true;
    door_knock_round(k);
    k->starting = false;
    return k;
}

const char *door_knock_why(struct door_knock *k)
{
    char where[64];

    if (k == NULL)
        return "";
    uint64_t ms = door_now_ms(k->door) - k->since_ms;
    if (k->detail[0] != '\0')
        snprintf(k->why, sizeof(k->why), "its door did not let this daemon in (knocking for %" PRIu64
                 " ms, %u round%s unanswered; the last: %s)", ms, k->rounds,
                 k->rounds == 1 ? "" : "s", k->detail);
    else if (k->next > 0)
        snprintf(k->why, sizeof(k->why), "its door did not answer (knocking at %s for %" PRIu64 " ms)",
                 door_where(&k->targets[k->next - 1], where, sizeof(where)), ms);
    else
        return "";
    return k->why;
}

void door_knock_cancel(struct door_knock *k)
{
    if (k == NULL)
        return;
    k->cb = NULL;
    door_knock_end(k, B10_ERR_CANCELLED, "cancelled");
}

/* ---------------------------------------------------------------- the doors themselves */

/* Is a device named in the list (commas; "" or "all": every device but loopback)? */
static bool door_device_named(const char *devices, const char *name, bool loopback)
{
    if (devices == NULL || devices[0] == '\0' || strcmp(devices, "all") == 0)
        return !loopback;
    size_t len = strlen(name);
    for (const char *p = devices; *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        if (n == len && strncmp(p, name, n) == 0)
            return true;
        p += n + (end != NULL);
    }
    return false;
}

static b10_status_t door_listen(struct door *door, const struct ifaddrs *ifa, char *detail,
                                size_t detail_len)
{
    struct door_listener *l = calloc(1, sizeof(*l));
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    char where[64];

    if (l == NULL)
        return B10_ERR_NO_MEMORY;
    memset(&ss, 0, sizeof(ss));
    memcpy(&ss, ifa->ifa_addr, ifa->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                                                    : sizeof(struct sockaddr_in6));
    if (ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&ss)->sin_port = htons(door->cfg.port);
    else
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons(door->cfg.port);
    uv_tcp_init(door->loop, &l->tcp);
    l->tcp.data = door;
    door->listeners[door->nlisteners++] = l;
    int rc = uv_tcp_bind(&l->tcp, (struct sockaddr *)&ss, ss.ss_family == AF_INET6 ? UV_TCP_IPV6ONLY : 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&l->tcp, DOOR_BACKLOG, door_on_connection);
    if (rc == 0)
        rc = uv_tcp_getsockname(&l->tcp, (struct sockaddr *)&ss, &len);
    struct gate_addr a;
    gate_addr_of((struct sockaddr *)&ss, &a);
    l->where.family = a.family;
    memcpy(l->where.addr, a.bytes, 16);
    l->where.port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                                  : ((struct sockaddr_in6 *)&ss)->sin6_port);
    if (rc != 0) {
        snprintf(detail, detail_len, "cannot open a door at %s (%s): %s",
                 door_where(&l->where, where, sizeof(where)), ifa->ifa_name, uv_strerror(rc));
        return B10_ERR_INTERNAL;
    }
    log_info("door at %s (%s)", door_where(&l->where, where, sizeof(where)), ifa->ifa_name);
    return B10_OK;
}

b10_status_t door_create(uv_loop_t *loop, const struct auth_keyring *keys,
                         const struct nodeid *nodeid, struct gate *gate,
                         const struct door_config *cfg, struct door **door_p, char *detail,
                         size_t detail_len)
{
    struct door *door = calloc(1, sizeof(*door));
    struct ifaddrs *ifs = NULL;
    b10_status_t st = B10_OK;

    if (door == NULL)
        return B10_ERR_NO_MEMORY;
    door->loop = loop;
    door->keys = keys;
    door->nodeid = nodeid;
    door->gate = gate;
    door->cfg = *cfg;
    snprintf(door->name, sizeof(door->name), "%s", cfg->name);
    door->cfg.name = door->name;
    door->cfg.devices = NULL;
    door->stats = cfg->stats != NULL ? cfg->stats : &door->own_stats;
    door->cfg.stats = NULL;
    door->tokens = cfg->knocks_per_s;
    door->tokens_ms = uv_now(loop);
    list_init(&door->conns);
    list_init(&door->knocks);
    *door_p = door;
    if (getifaddrs(&ifs) != 0) {
        snprintf(detail, detail_len, "cannot list the network devices: %s", strerror(errno));
        return B10_ERR_INTERNAL;
    }
    for (struct ifaddrs *i = ifs; i != NULL && st == B10_OK; i = i->ifa_next) {
        if (i->ifa_addr == NULL || (i->ifa_addr->sa_family != AF_INET &&
                                    i->ifa_addr->sa_family != AF_INET6) ||
            !(i->ifa_flags & IFF_UP) ||
            !door_device_named(cfg->devices, i->ifa_name, (i->ifa_flags & IFF_LOOPBACK) != 0))
            continue;
        /* A link-local IPv6 address needs its device's scope, which a door's address cannot carry. */
        if (i->ifa_addr->sa_family == AF_INET6 &&
            IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr))
            continue;
        if (door->nlisteners == WIREADDR_MAX_DOORS || door->nown == KNOCK_MAX_ADDRS) {
            log_notice("door: more than %u addresses on the network devices; the rest have no "
                       "door (--net-devices names fewer)", WIREADDR_MAX_DOORS);
            break;
        }
        gate_addr_of(i->ifa_addr, &door->own[door->nown++]);
        st = door_listen(door, i, detail, detail_len);
    }
    freeifaddrs(ifs);
    if (st == B10_OK && door->nlisteners == 0)
        log_notice("door: the network devices (%s) have no IP address: no door, and no TCP "
                   "listener of UCX's to guard", cfg->devices && cfg->devices[0] ? cfg->devices : "all");
    return st;
}

static void door_listener_closed(uv_handle_t *h)
{
    free(h);
}

void door_destroy(struct door *door)
{
    struct list *pos, *tmp;

    if (door == NULL)
        return;
    list_for_each_safe(pos, tmp, &door->knocks)
        door_knock_cancel(list_entry(pos, struct door_knock, node));
    list_for_each_safe(pos, tmp, &door->conns)
        door_conn_close(list_entry(pos, struct door_conn, node));
    for (unsigned i = 0; i < door->nlisteners; i++)
        uv_close((uv_handle_t *)&door->listeners[i]->tcp, door_listener_closed);
    free(door);
}

unsigned door_endpoints(const struct door *door, struct wireaddr_door *out)
{
    for (unsigned i = 0; i < door->nlisteners; i++)
        out[i] = door->listeners[i]->where;
    return door->nlisteners;
}

unsigned door_fds(const struct door *door, int *fds, unsigned max)
{
    unsigned n = 0;
    for (unsigned i = 0; i < door->nlisteners && n < max; i++) {
        uv_os_fd_t fd;
        if (uv_fileno((const uv_handle_t *)&door->listeners[i]->tcp, &fd) == 0)
            fds[n++] = fd;
    }
    return n;
}

void door_set_boot(struct door *door, const void *address, size_t length, uint64_t incarnation)
{
    door->address = address;
    door->address_length = length;
    door->incarnation = incarnation;
}

const struct stats_door *door_stats(const struct door *door)
{
    return door->stats;
}
