/*
 * sock.h — real TCP sockets on the loopback, for the tests of the gate
 * (test-gate.c) and the door (test-door.c): a listener, and a connect from
 * a chosen source address that says whether the handshake finished in
 * time. A listener the gate keeps a stranger from never answers its SYN,
 * so a refused connect is one still pending when the time is up.
 */
#ifndef B10_TEST_SOCK_H
#define B10_TEST_SOCK_H

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* How long an allowed connect may take, and how long a refused one is watched. */
#define SOCK_ALLOWED_MS 2000
#define SOCK_REFUSED_MS 300

/* "127.0.0.1" or "::1" with a port, as a sockaddr; false when ip is neither. */
static inline bool sock_addr(const char *ip, uint16_t port, struct sockaddr_storage *ss,
                             socklen_t *len_p)
{
    memset(ss, 0, sizeof(*ss));
    if (strchr(ip, ':') == NULL) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        in->sin_family = AF_INET;
        in->sin_port = htons(port);
        *len_p = sizeof(*in);
        return inet_pton(AF_INET, ip, &in->sin_addr) == 1;
    }
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    *len_p = sizeof(*in6);
    return inet_pton(AF_INET6, ip, &in6->sin6_addr) == 1;
}

static inline uint16_t sock_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return 0;
    return ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                         : ((struct sockaddr_in6 *)&ss)->sin6_port);
}

/*
 * A socket of ip's family bound to ip (port 0: the kernel's pick), listening
 * when listening is true. An IPv6 one takes IPv4 too when dual is true. -1
 * when that fails (no such address on this host).
 */
static inline int sock_bound(const char *ip, bool listening, bool dual, uint16_t *port_p)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int v6only = !dual;

    if (!sock_addr(ip, 0, &ss, &len))
        return -1;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if ((ss.ss_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only)) != 0) ||
        bind(fd, (struct sockaddr *)&ss, len) != 0 || (listening && listen(fd, 16) != 0)) {
        close(fd);
        return -1;
    }
    *port_p = sock_port(fd);
    return fd;
}

/*
 * Connect from src (NULL: the kernel's choice) to dst:port, waiting up to
 * timeout_ms for the handshake: the connected socket, or -1 when it did
 * not finish in time or was refused.
 */
static inline int sock_connect(const char *src, const char *dst, uint16_t port, int timeout_ms)
{
    struct sockaddr_storage to, from;
    socklen_t to_len, from_len;

    if (!sock_addr(dst, port, &to, &to_len))
        return -1;
    int fd = socket(to.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (src != NULL && (!sock_addr(src, 0, &from, &from_len) ||
                        bind(fd, (struct sockaddr *)&from, from_len) != 0)) {
        close(fd);
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&to, to_len) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    struct pollfd p = { .fd = fd, .events = POLLOUT };
    int err = -1;
    socklen_t err_len = sizeof(err);
    if (poll(&p, 1, timeout_ms) != 1 ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) != 0 || err != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Does a connect from src to dst:port finish within timeout_ms? (The socket is closed.) */
static inline bool sock_reaches(const char *src, const char *dst, uint16_t port, int timeout_ms)
{
    int fd = sock_connect(src, dst, port, timeout_ms);
    if (fd < 0)
        return false;
    close(fd);
    return true;
}

/* A connection waiting on a listener, accepted within timeout_ms; -1 when none. */
static inline int sock_accept(int listener, int timeout_ms)
{
    struct pollfd p = { .fd = listener, .events = POLLIN };
    if (poll(&p, 1, timeout_ms) != 1)
        return -1;
    return accept4(listener, NULL, NULL, SOCK_CLOEXEC);
}

/* The instructions of the filter attached to fd: 0 when it has none. */
static inline unsigned sock_filter_length(int fd)
{
    socklen_t len = 0;
    if (getsockopt(fd, SOL_SOCKET, SO_GET_FILTER, NULL, &len) != 0)
        return 0;
    return (unsigned)len;
}

/*
 * Close every socket of the process: a test's teardown, so that a test that
 * failed halfway leaves no listener to the next one's first seal (a gate
 * takes every TCP listener of the process then).
 */
static inline void sock_close_all(void)
{
    DIR *dir = opendir("/proc/self/fd");
    struct dirent *e;
    struct stat st;

    if (dir == NULL)
        return;
    while ((e = readdir(dir)) != NULL) {
        int fd = atoi(e->d_name);
        if (fd > 2 && fd != dirfd(dir) && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode))
            close(fd);
    }
    closedir(dir);
}

#endif
