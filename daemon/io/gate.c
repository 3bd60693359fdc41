/* gate.c — see gate.h. */
#include "gate.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "caps.h"

struct gate_entry {
    struct gate_addr addr;
    uint64_t seq;               /* when it was last allowed: the lowest goes first */
};

struct gate_listener {
    int fd;
    int family;
    ino_t ino;
};

struct gate {
    struct gate_entry entries[GATE_MAX_ADDRS];
    unsigned n;
    uint64_t seq;
    struct gate_listener listeners[GATE_MAX_LISTENERS];
    unsigned nlisteners;
    bool found;                 /* the first seal found the listeners */
};

struct gate *gate_create(void)
{
    return calloc(1, sizeof(struct gate));
}

void gate_destroy(struct gate *g)
{
    free(g);
}

bool gate_addr_eq(const struct gate_addr *a, const struct gate_addr *b)
{
    return a->family == b->family && memcmp(a->bytes, b->bytes, a->family == 4 ? 4 : 16) == 0;
}

static struct gate_entry *gate_find(const struct gate *g, const struct gate_addr *a)
{
    for (unsigned i = 0; i < g->n; i++)
        if (gate_addr_eq(&g->entries[i].addr, a))
            return (struct gate_entry *)&g->entries[i];
    return NULL;
}

bool gate_allow(struct gate *g, const struct gate_addr *addrs, unsigned n)
{
    bool changed = false;

    for (unsigned i = 0; i < n; i++) {
        if (addrs[i].family != 4 && addrs[i].family != 6)
            continue;
        struct gate_entry *e = gate_find(g, &addrs[i]);
        if (e == NULL) {
            if (g->n < GATE_MAX_ADDRS) {
                e = &g->entries[g->n++];
            } else {
                e = &g->entries[0];
                for (unsigned j = 1; j < g->n; j++)
                    if (g->entries[j].seq < e->seq)
                        e = &g->entries[j];
            }
            memset(&e->addr, 0, sizeof(e->addr));
            e->addr.family = addrs[i].family;
            memcpy(e->addr.bytes, addrs[i].bytes, addrs[i].family == 4 ? 4 : 16);
            changed = true;
        }
        e->seq = ++g->seq;
    }
    return changed;
}

bool gate_allows(const struct gate *g, const struct gate_addr *addr)
{
    return gate_find(g, addr) != NULL;
}

unsigned gate_count(const struct gate *g)
{
    return g->n;
}

unsigned gate_listeners(const struct gate *g)
{
    return g->nlisteners;
}

bool gate_addr_of(const struct sockaddr *sa, struct gate_addr *out)
{
    memset(out, 0, sizeof(*out));
    if (sa->sa_family == AF_INET) {
        out->family = 4;
        memcpy(out->bytes, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return true;
    }
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        /* An IPv4 peer of a dual-stack socket is that IPv4 address. */
        if (IN6_IS_ADDR_V4MAPPED(a6)) {
            out->family = 4;
            memcpy(out->bytes, a6->s6_addr + 12, 4);
        } else {
            out->family = 6;
            memcpy(out->bytes, a6->s6_addr, 16);
        }
        return true;
    }
    return false;
}

const char *gate_addr_str(const struct gate_addr *a, char *buf, size_t size)
{
    if (inet_ntop(a->family == 4 ? AF_INET : AF_INET6, a->bytes, buf, (socklen_t)size) == NULL)
        snprintf(buf, size, "?");
    return buf;
}

/* ---------------------------------------------------------------- the filter */

static uint32_t gate_word(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

#define GATE_PUT(...)                                       \
    do {                                                    \
        if (n == max)                                       \
            return 0;                                       \
        out[n++] = (struct sock_filter)__VA_ARGS__;         \
    } while (0)

/* IPv4 sources: load the source address once, then one test and one accept a listed address. */
static size_t gate_program_v4(const struct gate *g, struct sock_filter *out, size_t n, size_t max)
{
    GATE_PUT(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)(SKF_NET_OFF + 12)));
    for (unsigned i = 0; i < g->n; i++) {
        if (g->entries[i].addr.family != 4)
            continue;
        GATE_PUT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, gate_word(g->entries[i].addr.bytes), 0, 1));
        GATE_PUT(BPF_STMT(BPF_RET | BPF_K, 0xffffffffu));
    }
    GATE_PUT(BPF_STMT(BPF_RET | BPF_K, 0));
    return n;
}

/* IPv6 sources: the four words of each listed address in turn, accepting after the last. */
static size_t gate_program_v6(const struct gate *g, struct sock_filter *out, size_t n, size_t max)
{
    for (unsigned i = 0; i < g->n; i++) {
        if (g->entries[i].addr.family != 6)
            continue;
        for (unsigned w = 0; w < 4; w++) {
            GATE_PUT(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)(SKF_NET_OFF + 8 + 4 * w)));
            /* A mismatch skips to the next address: past this word's rest and the accept. */
            GATE_PUT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, gate_word(g->entries[i].addr.bytes + 4 * w),
                              0, (uint8_t)(2 * (3 - w) + 1)));
        }
        GATE_PUT(BPF_STMT(BPF_RET | BPF_K, 0xffffffffu));
    }
    GATE_PUT(BPF_STMT(BPF_RET | BPF_K, 0));
    return n;
}

size_t gate_program(const struct gate *g, int family, struct sock_filter *out, size_t max)
{
    size_t n = 0;

    if (family == AF_INET)
        return gate_program_v4(g, out, 0, max);
    if (family != AF_INET6)
        return 0;
    /* A dual-stack listener sees IPv4 packets too: the version nibble picks the block. */
    GATE_PUT(BPF_STMT(BPF_LD | BPF_B | BPF_ABS, (uint32_t)SKF_NET_OFF));
    GATE_PUT(BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xf0));
    GATE_PUT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x40, 0, 1));
    size_t jump = n;
    GATE_PUT(BPF_STMT(BPF_JMP | BPF_JA, 0));            /* to the IPv4 block, set below */
    n = gate_program_v6(g, out, n, max);
    if (n == 0)
        return 0;
    out[jump].k = (uint32_t)(n - jump - 1);
    return gate_program_v4(g, out, n, max);
}

/* ---------------------------------------------------------------- the listeners */

static int gate_sockopt(int fd, int opt)
{
    int v = -1;
    socklen_t len = sizeof(v);
    return getsockopt(fd, SOL_SOCKET, opt, &v, &len) == 0 ? v : -1;
}

static bool gate_kept(int fd, const int *keep, unsigned nkeep)
{
    for (unsigned i = 0; i < nkeep; i++)
        if (keep[i] == fd)
            return true;
    return false;
}

/* The process's TCP listeners, but those kept: UCX's, when its workers are all open. */
static b10_status_t gate_find_listeners(struct gate *g, const int *keep, unsigned nkeep,
                                        char *detail, size_t detail_len)
{
    DIR *dir = opendir("/proc/self/fd");
    struct dirent *e;

    if (dir == NULL) {
        snprintf(detail, detail_len, "cannot list /proc/self/fd: %s", strerror(errno));
        return B10_ERR_INTERNAL;
    }
    while ((e = readdir(dir)) != NULL) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        struct stat st;
        if (*end != '\0' || end == e->d_name || fd == dirfd(dir) || gate_kept((int)fd, keep, nkeep))
            continue;
        if (gate_sockopt((int)fd, SO_ACCEPTCONN) != 1 ||
            gate_sockopt((int)fd, SO_PROTOCOL) != IPPROTO_TCP || fstat((int)fd, &st) != 0)
            continue;
        int family = gate_sockopt((int)fd, SO_DOMAIN);
        if (family != AF_INET && family != AF_INET6)
            continue;
        if (g->nlisteners == GATE_MAX_LISTENERS) {
            closedir(dir);
            snprintf(detail, detail_len, "more than %u TCP listeners in this process",
                     GATE_MAX_LISTENERS);
            return B10_ERR_TOO_LARGE;
        }
        g->listeners[g->nlisteners++] = (struct gate_listener){ (int)fd, family, st.st_ino };
    }
    closedir(dir);
    return B10_OK;
}

b10_status_t gate_seal(struct gate *g, const int *keep, unsigned nkeep, char *detail,
                       size_t detail_len)
{
    static struct sock_filter prog[BPF_MAXINSNS];

    if (!g->found) {
        b10_status_t st = gate_find_listeners(g, keep, nkeep, detail, detail_len);
        if (st != B10_OK)
            return st;
        g->found = true;
    }
    for (unsigned i = 0; i < g->nlisteners; i++) {
        struct gate_listener *l = &g->listeners[i];
        struct stat st;
        /* Closed since (the wire went first at a stop), or its number reused: not ours now. */
        if (l->fd < 0 || fstat(l->fd, &st) != 0 || st.st_ino != l->ino) {
            l->fd = -1;
            continue;
        }
        size_t n = gate_program(g, l->family, prog, BPF_MAXINSNS);
        if (n == 0) {
            snprintf(detail, detail_len, "the filter of %u addresses does not fit in %u "
                     "instructions", g->n, BPF_MAXINSNS);
            return B10_ERR_TOO_LARGE;
        }
        struct sock_fprog fprog = { .len = (unsigned short)n, .filter = prog };
        int rc = setsockopt(l->fd, SOL_SOCKET, SO_ATTACH_FILTER, &fprog, sizeof(fprog));
        /* Some kernels keep socket filters to CAP_NET_ADMIN (caps.h): raised for this alone. */
        if (rc != 0 && errno == EPERM && caps_raise_net_admin()) {
            rc = setsockopt(l->fd, SOL_SOCKET, SO_ATTACH_FILTER, &fprog, sizeof(fprog));
            int err = errno;
            caps_lower_net_admin();
            errno = err;
        }
        if (rc != 0 && errno == EPERM) {
            snprintf(detail, detail_len, "cannot filter listening socket %d: %s: this kernel "
                     "lets only holders of CAP_NET_ADMIN attach socket filters; give the daemon "
                     "that capability (systemd/b10d-gate-caps.conf, a drop-in of the unit) or "
                     "run it as root", l->fd, strerror(errno));
            return B10_ERR_PERMISSION;
        }
        if (rc != 0) {
            snprintf(detail, detail_len, "cannot filter listening socket %d: %s", l->fd,
                     strerror(errno));
            return B10_ERR_INTERNAL;
        }
    }
    return B10_OK;
}
