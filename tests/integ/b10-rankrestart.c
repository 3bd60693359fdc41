/*
 * b10-rankrestart — ranks outlive their daemon: one daemon of a pair is
 * killed (-9) and started again on its socket under two ranks that keep
 * running, with a transfer in flight each way.
 *
 *   b10-rankrestart DIR SOCKET_A SOCKET_B PID_A PID_B A|B|Bdata|Bterm|takeover|dropped SLOW
 *
 * One process plays both ranks: "ra" on A, "rb" on B, each with one DRAM
 * region (a source half, a destination half) and the other's descriptor
 * loaded. X is the daemon named by the sixth argument (its rank x), Y the
 * other (rank y). Killing A kills the initiator's daemon of the pair's
 * ra → rb WRITE, killing B its target's daemon. Steps:
 *
 *   1. x → y and y → x land (the links stand).
 *   2. Y stopped, x submits W1 x → y (waits for Y's READY); X stopped, Y
 *      continued, y submits W2 y → x (waits for X's READY); X killed (-9).
 *      DIR/killed tells the runner, which starts X again on its socket.
 *   3. W1 fails B10_ERR_DAEMON_EXITED at x, at once; W2 fails at y (the
 *      peer daemon lost). Neither lands: both destinations keep their
 *      bytes, checked again after x connected to X's new boot on its own
 *      (b10_conn_progress, bounded) and registered its region again, and
 *      once more after the runner saw Y learn X's new boot (DIR/go): the
 *      peer daemon never delivers the old boot's transfer into the new
 *      boot's registrations.
 *   4. y → x (y still holds x's descriptor of the old boot) and x → y land
 *      byte for byte, the ranks never restarted; so does x → z, where z is
 *      a third rank on X, each of x and z holding the other's descriptor
 *      of X's old boot, which the new boot takes as naming itself.
 *
 * Bdata: B is killed with DATA of ra → rb under way: B runs with
 * B10_TEST_COPY_DELAY_MS (a chunk that arrived waits to be scattered), ra
 * submits W2 alone (DIR/submitted), and the runner kills B once A's send
 * of W2's chunk completed: B holds it, or it is lost with B. W2 fails at
 * ra; rb's destination never changes, neither from the old boot nor from
 * A's side into the new one's registrations.
 *
 * Prints "ok …" per check, "FAIL …" on the first failure; exits 0 or 1.
 */
#include <b10/b10.h>

#include "rank.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define REGION (4u << 20)
#define HALF (REGION / 2)       /* [0, HALF): source; [HALF, REGION): destination */
#define DEADLINE_MS 60000       /* far past every bound below: no failure here is a deadline */

static int slow = 1;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = (uint8_t)(x >> 24);
    }
}

static b10_xfer_t *submit(struct rank *from, struct rank *to)
{
    b10_span_t local = { (uint64_t)(uintptr_t)from->mem, HALF };
    b10_span_t remote = { (uint64_t)(uintptr_t)to->mem + HALF, HALF };
    b10_xfer_params_t xp = { .field_mask = B10_XFER_FIELD_DEADLINE, .op = B10_OP_WRITE,
                             .local = &local, .remote = &remote, .count = 1,
                             .remote_agent = to->name, .deadline_ms = DEADLINE_MS };
    b10_xfer_t *x = NULL;
    b10_status_t st = b10_xfer_submit(from->conn, &xp, &x);
    if (st != B10_OK) {
        char what[64];
        snprintf(what, sizeof(what), "submit %s -> %s", from->name, to->name);
        fail(what, st, b10_conn_detail(from->conn));
        return NULL;
    }
    return x;
}

/* from → to lands, and to's destination holds from's source byte for byte. */
static int write_lands(struct rank *from, struct rank *to)
{
    b10_xfer_t *x = submit(from, to);
    if (x == NULL)
        return 1;
    b10_status_t st = b10_xfer_wait(x, 30000 * slow);
    if (st != B10_OK) {
        char what[64];
        snprintf(what, sizeof(what), "write %s -> %s", from->name, to->name);
        fail(what, st, b10_xfer_detail(x));
        b10_xfer_release(x);
        return 1;
    }
    b10_xfer_release(x);
    if (memcmp(from->mem, to->mem + HALF, HALF) != 0) {
        printf("FAIL write %s -> %s landed, but the bytes differ\n", from->name, to->name);
        return 1;
    }
    printf("ok %s -> %s landed byte for byte\n", from->name, to->name);
    return 0;
}

/*
 * from → to lands, from's caller waiting in an epoll set that has held
 * b10_conn_fd() since before the restart: the set must wake for the news.
 */
static int epoll_lands(int ep, struct rank *from, struct rank *to)
{
    b10_xfer_t *x = submit(from, to);
    if (x == NULL)
        return 1;
    double end = now_s() + 30.0 * slow;
    int wakes = 0;
    b10_status_t st;
    while ((st = b10_xfer_status(x)) == B10_IN_PROGRESS) {
        struct epoll_event ev;
        int left = (int)((end - now_s()) * 1000);
        int n = left > 0 ? epoll_wait(ep, &ev, 1, left) : 0;
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            printf("FAIL %s -> %s: the epoll set of the connection's fd never woke (%s)\n",
                   from->name, to->name, n < 0 ? strerror(errno) : "30 s");
            return 1;
        }
        wakes++;
        b10_conn_progress(from->conn);
    }
    if (st != B10_OK) {
        fail("write waited for through epoll", st, b10_xfer_detail(x));
        b10_xfer_release(x);
        return 1;
    }
    b10_xfer_release(x);
    if (memcmp(from->mem, to->mem + HALF, HALF) != 0) {
        printf("FAIL write %s -> %s landed, but the bytes differ\n", from->name, to->name);
        return 1;
    }
    printf("ok %s -> %s landed, its news woke an epoll set of before the restart (%d wakes)\n",
           from->name, to->name, wakes);
    return 0;
}

static int signal_daemon(pid_t pid, int sig, const char *what)
{
    if (kill(pid, sig) == 0)
        return 0;
    printf("FAIL %s (pid %d): %s\n", what, (int)pid, strerror(errno));
    return 1;
}

static int touch(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        printf("FAIL creating %s: %s\n", path, strerror(errno));
        return 1;
    }
    fclose(f);
    return 0;
}

/* Wait for DIR/name, bounded; polling a file the runner creates. */
static int wait_file(const char *dir, const char *name, int seconds)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    double end = now_s() + seconds * slow;
    while (access(path, F_OK) != 0) {
        if (now_s() > end) {
            printf("FAIL no %s after %d s\n", path, seconds * slow);
            return 1;
        }
        poll(NULL, 0, 50);
    }
    return 0;
}

/*
 * The connection comes back by itself: progress until it is usable, waiting
 * on its fd (a timer while no socket stands) between the calls. Bounded.
 */
static int wait_reconnected(struct rank *r, int seconds)
{
    double end = now_s() + seconds * slow;
    b10_status_t st;
    while ((st = b10_conn_progress(r->conn)) != B10_OK) {
        if (st != B10_ERR_DAEMON_EXITED)
            return fail("progress while the daemon restarts", st, b10_conn_detail(r->conn));
        if (now_s() > end)
            return fail("reconnecting", st, b10_conn_detail(r->conn));
        struct pollfd pfd = { .fd = b10_conn_fd(r->conn), .events = POLLIN };
        poll(&pfd, 1, 100);
    }
    printf("ok %s connected to the restarted daemon on its own\n", r->name);
    return 0;
}

static int unchanged(struct rank *r, const uint8_t *before, const char *when)
{
    if (memcmp(r->mem + HALF, before, HALF) != 0) {
        printf("FAIL %s: bytes landed in %s's destination after its transfer failed\n", when,
               r->name);
        return 1;
    }
    printf("ok %s: nothing landed in %s's destination\n", when, r->name);
    return 0;
}

/* Bdata: y's transfer to x, whose chunk the runner lets reach X, then kills X. */
static int kill_with_data(const char *dir, struct rank *x, struct rank *y)
{
    b10_xfer_t *w = submit(y, x);
    if (w == NULL || touch(dir, "submitted") || wait_file(dir, "killed", 60))
        return 1;
    b10_status_t st = b10_xfer_wait(w, 30000 * slow);
    if (st == B10_OK || st == B10_IN_PROGRESS)
        return fail("the transfer into the killed daemon did not fail", st, b10_xfer_detail(w));
    printf("ok %s's transfer with DATA in the killed daemon failed %s (%s)\n", y->name,
           b10_status_name(st), b10_xfer_detail(w));
    b10_xfer_release(w);
    return 0;
}

/*
 * Bterm: rb reads ra's source while B delays every scatter, and the runner
 * stops B (SIGTERM, a short drain) once A's send of the READ's chunk
 * completed: B holds it, its copy into rb's memory under way. rb hears the
 * READ's end only once that copy ended (never before the delay passed),
 * and nothing writes rb's destination after that news; a READ that says
 * B10_OK holds ra's bytes.
 */
static int term_with_copy(const char *dir, struct rank *a, struct rank *b)
{
    double delay_s = 3.0 * slow;     /* the runner's B10_TEST_COPY_DELAY_MS */
    fill(a->mem, HALF, 8);
    fill(b->mem + HALF, HALF, 9);
    b10_span_t local = { (uint64_t)(uintptr_t)b->mem + HALF, HALF };
    b10_span_t remote = { (uint64_t)(uintptr_t)a->mem, HALF };
    b10_xfer_params_t xp = { .field_mask = B10_XFER_FIELD_DEADLINE, .op = B10_OP_READ,
                             .local = &local, .remote = &remote, .count = 1,
                             .remote_agent = a->name, .deadline_ms = DEADLINE_MS };
    b10_xfer_t *r = NULL;
    double t0 = now_s();
    b10_status_t st = b10_xfer_submit(b->conn, &xp, &r);
    if (st != B10_OK)
        return fail("submit rb reads ra", st, b10_conn_detail(b->conn));
    if (touch(dir, "submitted"))
        return 1;
    st = b10_xfer_wait(r, 60000 * slow);
    double took = now_s() - t0;
    if (st == B10_IN_PROGRESS || st == B10_ERR_DAEMON_EXITED || st == B10_ERR_DAEMON_LOST)
        return fail("the READ under B's stop, expected its daemon's own news", st,
                    b10_xfer_detail(r));
    if (took < delay_s) {
        printf("FAIL the READ ended %s after %.2f s, before its copy (%.2f s) could end: %s\n",
               b10_status_name(st), took, delay_s, b10_xfer_detail(r));
        return 1;
    }
    printf("ok rb's READ ended %s after %.2f s, once its copy ended (%s)\n", b10_status_name(st),
           took, b10_xfer_detail(r));
    if (st == B10_OK && memcmp(a->mem, b->mem + HALF, HALF) != 0) {
        printf("FAIL the READ said B10_OK, but the bytes differ\n");
        return 1;
    }
    uint8_t *seen = malloc(HALF);
    if (seen == NULL)
        return fail("malloc", B10_ERR_NO_MEMORY, NULL);
    memcpy(seen, b->mem + HALF, HALF);
    b10_xfer_release(r);
    if (wait_file(dir, "exited", 60))
        return 1;
    int rc = unchanged(b, seen, "after the READ's news and B's exit");
    free(seen);
    return rc;
}

/*
 * takeover: rx and ry on B, ra on A holding both descriptors (uid 0, this
 * process's). B is killed and started again; before rx reconnects, a rank
 * of another user (uid 65534: this process connects with that effective
 * uid) says hello to B as "rx". Whatever ra sends "rx" by the descriptor of
 * B's old boot is refused at B, UNKNOWN_AGENT, saying why: a check, a WRITE,
 * a READ, a notice (the impostor never gets it); beside it ra → ry, whose
 * owner reconnected, lands byte for byte. rx's own connection, reconnecting
 * to its name held by another user, ends B10_ERR_PERMISSION for good.
 */
#define OTHER_UID 65534

static int refused_for_owner(const char *what, b10_status_t st, const char *detail)
{
    if (st != B10_ERR_UNKNOWN_AGENT || detail == NULL || strstr(detail, "not of the user") == NULL)
        return fail(what, st, detail);
    printf("ok %s refused: %s\n", what, detail);
    return 0;
}

static int takeover(const char *dir, const char *sock_b, struct rank *a, struct rank *x,
                    struct rank *y)
{
    if (touch(dir, "ready") || wait_file(dir, "restarted", 60))
        return 1;
    /* The impostor: another uid's rank under x's name, before x reconnects. */
    b10_conn_t *imp = NULL;
    b10_conn_params_t cp = { .field_mask = B10_CONN_FIELD_SOCKET_PATH, .agent_name = x->name,
                             .socket_path = sock_b };
    if (seteuid(OTHER_UID) != 0)
        return fail("seteuid", B10_ERR_INTERNAL, strerror(errno));
    b10_status_t st = b10_conn_open(&cp, &imp);
    if (seteuid(0) != 0)
        return fail("seteuid back", B10_ERR_INTERNAL, strerror(errno));
    if (st != B10_OK)
        return fail("the other user's hello as rx", st, NULL);
    printf("ok a rank of uid %d took the name %s on B's new boot\n", OTHER_UID, x->name);
    if (wait_reconnected(y, 60) || touch(dir, "reconnected") || wait_file(dir, "go", 60))
        return 1;

    b10_span_t span = { (uint64_t)(uintptr_t)x->mem + HALF, HALF };
    st = b10_agent_check(a->conn, x->name, &span, 1);
    if (refused_for_owner("ra's check of rx", st, b10_conn_detail(a->conn)))
        return 1;
    st = b10_agent_notify(a->conn, x->name, "hi", 2);
    if (refused_for_owner("ra's notice for rx", st, b10_conn_detail(a->conn)))
        return 1;
    /* Had the notice been delivered, it would be at the impostor before its refusal came back. */
    b10_notification_t *list = NULL;
    size_t count = 0;
    if ((st = b10_agent_notifications(imp, &list, &count)) != B10_OK)
        return fail("the impostor's notifications", st, b10_conn_detail(imp));
    b10_notifications_free(list, count);
    if (count != 0) {
        printf("FAIL the other user's rank got %zu notices meant for rx\n", count);
        return 1;
    }
    printf("ok the other user's rank got no notice meant for rx\n");

    b10_xfer_t *w = submit(a, x);
    if (w == NULL)
        return 1;
    st = b10_xfer_wait(w, 30000 * slow);
    if (refused_for_owner("ra's WRITE into rx", st, b10_xfer_detail(w)))
        return 1;
    b10_xfer_release(w);
    b10_span_t local = { (uint64_t)(uintptr_t)a->mem + HALF, HALF };
    b10_span_t remote = { (uint64_t)(uintptr_t)x->mem, HALF };
    b10_xfer_params_t xp = { .field_mask = B10_XFER_FIELD_DEADLINE, .op = B10_OP_READ,
                             .local = &local, .remote = &remote, .count = 1,
                             .remote_agent = x->name, .deadline_ms = DEADLINE_MS };
    if ((st = b10_xfer_submit(a->conn, &xp, &w)) != B10_OK)
        return fail("submit ra reads rx", st, b10_conn_detail(a->conn));
    st = b10_xfer_wait(w, 30000 * slow);
    if (refused_for_owner("ra's READ of rx", st, b10_xfer_detail(w)))
        return 1;
    b10_xfer_release(w);

    /* Beside it: ry's owner took its name again, and ra's descriptor of it still works. */
    fill(a->mem, HALF, 10);
    if (write_lands(a, y))
        return 1;
    span.addr = (uint64_t)(uintptr_t)y->mem + HALF;
    if ((st = b10_agent_check(a->conn, y->name, &span, 1)) != B10_OK)
        return fail("ra's check of ry", st, b10_conn_detail(a->conn));
    printf("ok ra's check of ry passed\n");

    /* rx's owner comes back to its name held by another user: refused for good, no retrying. */
    for (int i = 0; i < 2; i++) {
        st = b10_conn_progress(x->conn);
        if (st != B10_ERR_PERMISSION)
            return fail("rx reconnecting to its name held by another user", st,
                        b10_conn_detail(x->conn));
    }
    printf("ok rx's reconnection was refused for good: %s\n", b10_conn_detail(x->conn));
    b10_conn_close(imp);
    return 0;
}

/* This process's socket connected to path (the one connection to that daemon), or -1. */
static int socket_to(const char *path)
{
    for (int fd = 3; fd < 4096; fd++) {
        struct stat st;
        struct sockaddr_un sa;
        socklen_t len = sizeof(sa);
        if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) ||
            getpeername(fd, (struct sockaddr *)&sa, &len) != 0 || sa.sun_family != AF_UNIX)
            continue;
        if (strncmp(sa.sun_path, path, sizeof(sa.sun_path)) == 0)
            return fd;
    }
    return -1;
}

/*
 * dropped: B, which delays every scatter, drops rb (a frame of garbage
 * written into rb's socket, as from a broken client) while rb's READ from
 * ra is in flight, and keeps running. The READ fails B10_ERR_DAEMON_LOST,
 * which claims nothing about the bytes, not B10_ERR_DAEMON_EXITED ("that
 * daemon no longer writes"): B's copy may still write them. rb then
 * connects again to the same daemon by itself, and rb → ra lands.
 */
static int dropped(const char *sock_b, struct rank *a, struct rank *b)
{
    fill(a->mem, HALF, 11);
    b10_span_t local = { (uint64_t)(uintptr_t)b->mem + HALF, HALF };
    b10_span_t remote = { (uint64_t)(uintptr_t)a->mem, HALF };
    b10_xfer_params_t xp = { .field_mask = B10_XFER_FIELD_DEADLINE, .op = B10_OP_READ,
                             .local = &local, .remote = &remote, .count = 1,
                             .remote_agent = a->name, .deadline_ms = DEADLINE_MS };
    b10_xfer_t *r = NULL;
    b10_status_t st = b10_xfer_submit(b->conn, &xp, &r);
    if (st != B10_OK)
        return fail("submit rb reads ra", st, b10_conn_detail(b->conn));
    int fd = socket_to(sock_b);
    static const uint8_t junk[8] = { 0xf0, 0xff, 0xff, 0xff, 1, 2, 3, 4 };  /* a 4 GiB frame */
    if (fd < 0 || write(fd, junk, sizeof(junk)) != (ssize_t)sizeof(junk))
        return fail("writing garbage to rb's socket", B10_ERR_INTERNAL,
                    fd < 0 ? "no socket to B found" : strerror(errno));
    st = b10_xfer_wait(r, 30000 * slow);
    if (st != B10_ERR_DAEMON_LOST || strstr(b10_xfer_detail(r), "still runs") == NULL)
        return fail("the READ of a rank its running daemon dropped, expected B10_ERR_DAEMON_LOST",
                    st, b10_xfer_detail(r));
    printf("ok rb's READ failed %s: %s\n", b10_status_name(st), b10_xfer_detail(r));
    b10_xfer_release(r);
    if (wait_reconnected(b, 60))
        return 1;
    fill(b->mem, HALF, 12);
    return write_lands(b, a);
}

/* Steps 2 and 3 up to X's restart: a transfer in flight each way, X killed, both fail. */
static int kill_each_way(const char *dir, struct rank *x, struct rank *y, pid_t pid_x, pid_t pid_y,
                         const uint8_t *y_before)
{
    if (signal_daemon(pid_y, SIGSTOP, "stopping Y"))
        return 1;
    b10_xfer_t *w1 = submit(x, y);
    if (w1 == NULL || signal_daemon(pid_x, SIGSTOP, "stopping X") ||
        signal_daemon(pid_y, SIGCONT, "continuing Y"))
        return 1;
    b10_xfer_t *w2 = submit(y, x);
    if (w2 == NULL)
        return 1;
    if (b10_xfer_status(w1) != B10_IN_PROGRESS || b10_xfer_status(w2) != B10_IN_PROGRESS) {
        printf("FAIL the transfers ended before the kill: %s, %s\n",
               b10_status_name(b10_xfer_status(w1)), b10_status_name(b10_xfer_status(w2)));
        return 1;
    }
    printf("ok %s -> %s and %s -> %s in flight\n", x->name, y->name, y->name, x->name);
    if (signal_daemon(pid_x, SIGKILL, "killing X") || touch(dir, "killed"))
        return 1;

    /* 3. Both fail, W1 with the new status; nothing lands, before or after X is back. */
    b10_status_t st = b10_xfer_wait(w1, 10000 * slow);
    if (st != B10_ERR_DAEMON_EXITED)
        return fail("x's transfer in flight at the kill, expected B10_ERR_DAEMON_EXITED", st,
                    b10_xfer_detail(w1));
    printf("ok %s's transfer failed %s (%s), action %s\n", x->name, b10_status_name(st),
           b10_xfer_detail(w1), b10_status_action(st) == B10_ACTION_REOPEN ? "REOPEN" : "other");
    if (b10_status_action(st) != B10_ACTION_REOPEN)
        return fail("the new status's action", st, "not REOPEN");
    st = b10_xfer_wait(w2, 30000 * slow);
    if (st == B10_OK || st == B10_IN_PROGRESS)
        return fail("y's transfer to the killed daemon did not fail", st, b10_xfer_detail(w2));
    printf("ok %s's transfer failed %s (%s)\n", y->name, b10_status_name(st), b10_xfer_detail(w2));
    b10_xfer_release(w1);
    b10_xfer_release(w2);
    return unchanged(y, y_before, "after both failed");
}

int main(int argc, char **argv)
{
    if (argc != 8 || (strcmp(argv[6], "A") != 0 && strcmp(argv[6], "B") != 0 &&
                      strcmp(argv[6], "Bdata") != 0 && strcmp(argv[6], "Bterm") != 0 &&
                      strcmp(argv[6], "takeover") != 0 && strcmp(argv[6], "dropped") != 0)) {
        fprintf(stderr, "usage: %s DIR SOCKET_A SOCKET_B PID_A PID_B "
                "A|B|Bdata|Bterm|takeover|dropped SLOW\n",
                argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    pid_t pid_a = (pid_t)atoi(argv[4]), pid_b = (pid_t)atoi(argv[5]);
    bool kill_a = strcmp(argv[6], "A") == 0, data = strcmp(argv[6], "Bdata") == 0;
    slow = atoi(argv[7]) > 0 ? atoi(argv[7]) : 1;
    struct rank a = { 0 }, b = { 0 }, z = { 0 };

    if (strcmp(argv[6], "dropped") == 0) {
        if (rank_open(&a, argv[2], "ra", REGION, 0) || rank_open(&b, argv[3], "rb", REGION, 0) ||
            rank_load(&a, &b) || rank_load(&b, &a) || dropped(argv[3], &a, &b))
            return 1;
        b10_conn_close(a.conn);
        b10_conn_close(b.conn);
        b10_dram_free(a.mem);
        b10_dram_free(b.mem);
        printf("ok all\n");
        return 0;
    }
    if (strcmp(argv[6], "takeover") == 0) {
        struct rank y = { 0 };
        if (rank_open(&a, argv[2], "ra", REGION, 0) || rank_open(&b, argv[3], "rx", REGION, 0) ||
            rank_open(&y, argv[3], "ry", REGION, 0) || rank_load(&a, &b) || rank_load(&a, &y) ||
            rank_load(&y, &a) || takeover(dir, argv[3], &a, &b, &y))
            return 1;
        b10_conn_close(a.conn);
        b10_conn_close(b.conn);
        b10_conn_close(y.conn);
        b10_dram_free(a.mem);
        b10_dram_free(b.mem);
        b10_dram_free(y.mem);
        printf("ok all\n");
        return 0;
    }
    if (strcmp(argv[6], "Bterm") == 0) {
        if (rank_open(&a, argv[2], "ra", REGION, 0) || rank_open(&b, argv[3], "rb", REGION, 0) ||
            rank_load(&a, &b) || rank_load(&b, &a) || term_with_copy(dir, &a, &b))
            return 1;
        b10_conn_close(a.conn);
        b10_conn_close(b.conn);
        b10_dram_free(a.mem);
        b10_dram_free(b.mem);
        printf("ok all\n");
        return 0;
    }

    /* z: a third rank, on X beside x: their descriptors name X's old boot after the restart. */
    if (rank_open(&a, argv[2], "ra", REGION, 0) || rank_open(&b, argv[3], "rb", REGION, 0) ||
        rank_open(&z, kill_a ? argv[2] : argv[3], "rz", REGION, 0) ||
        rank_load(&a, &b) || rank_load(&b, &a))
        return 1;
    struct rank *x = kill_a ? &a : &b, *y = kill_a ? &b : &a;
    if (rank_load(x, &z) || rank_load(&z, x))
        return 1;
    pid_t pid_x = kill_a ? pid_a : pid_b, pid_y = kill_a ? pid_b : pid_a;
    const void *old_desc;
    size_t old_len;
    if (b10_agent_desc(x->conn, &old_desc, &old_len) != B10_OK)
        return fail("agent desc", B10_ERR_INTERNAL, b10_conn_detail(x->conn));
    uint8_t *old_copy = malloc(old_len);
    uint8_t *x_before = malloc(HALF), *y_before = malloc(HALF);
    if (old_copy == NULL || x_before == NULL || y_before == NULL)
        return fail("malloc", B10_ERR_NO_MEMORY, NULL);
    memcpy(old_copy, old_desc, old_len);
    int fd = b10_conn_fd(x->conn);
    /* An event loop's epoll set, holding x's fd across the restart. */
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event eev = { .events = EPOLLIN };
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &eev) != 0)
        return fail("epoll", B10_ERR_INTERNAL, strerror(errno));
    /* A second region of x's, after z's: in X's old boot its id is above z's. */
    void *extra_mem;
    b10_mem_t *extra = NULL;
    b10_mem_params_t mp = { .kind = B10_MEM_DRAM, .length = REGION };
    if (b10_dram_alloc(REGION, &extra_mem) != B10_OK)
        return fail("dram alloc", B10_ERR_NO_MEMORY, NULL);
    mp.addr = extra_mem;
    b10_status_t rst = b10_mem_register(x->conn, &mp, &extra);
    if (rst != B10_OK)
        return fail("register x's second region", rst, b10_conn_detail(x->conn));

    /* 1. The links stand. */
    fill(x->mem, HALF, 1);
    fill(y->mem, HALF, 2);
    if (write_lands(x, y) || write_lands(y, x) || write_lands(x, &z))
        return 1;

    /* 2. A transfer in flight each way, then X killed. */
    fill(x->mem, HALF, 3);
    fill(y->mem, HALF, 4);
    memcpy(x_before, x->mem + HALF, HALF);
    memcpy(y_before, y->mem + HALF, HALF);
    if (data ? kill_with_data(dir, x, y) : kill_each_way(dir, x, y, pid_x, pid_y, y_before))
        return 1;
    /*
     * X is back (DIR/restarted): x's first call deregisters its second
     * region. It reconnects first (the new boot numbers x's regions anew),
     * then names the region by its new id; step 4 then writes x's first.
     */
    if (wait_file(dir, "restarted", 60))
        return 1;
    rst = b10_mem_deregister(x->conn, extra);
    if (rst != B10_OK)
        return fail("deregistering as the first call after the restart", rst,
                    b10_conn_detail(x->conn));
    printf("ok %s deregistered its second region as its first call after the restart\n",
           x->name);
    b10_dram_free(extra_mem);
    if (wait_reconnected(x, 60) || wait_reconnected(&z, 60))
        return 1;
    const void *new_desc;
    size_t new_len;
    b10_status_t st = b10_agent_desc(x->conn, &new_desc, &new_len);
    if (st != B10_OK)
        return fail("agent desc after the restart", st, b10_conn_detail(x->conn));
    if (new_len == old_len && memcmp(new_desc, old_copy, old_len) == 0)
        return fail("agent desc after the restart", B10_ERR_INTERNAL, "still the old boot's");
    if (memcmp(old_desc, old_copy, old_len) != 0)
        return fail("agent desc of the old boot", B10_ERR_INTERNAL, "its bytes changed");
    printf("ok %s has its daemon's new descriptor; the old one's bytes stay valid\n", x->name);
    if (b10_conn_fd(x->conn) != fd) {
        printf("FAIL %s's connection fd was %d, is %d after the restart\n", x->name, fd,
               b10_conn_fd(x->conn));
        return 1;
    }
    printf("ok %s's connection fd kept its number (%d)\n", x->name, fd);
    if (unchanged(x, x_before, "after x reconnected") || unchanged(y, y_before, "after x reconnected"))
        return 1;
    if (touch(dir, "reconnected") || wait_file(dir, "go", 60))
        return 1;
    if (unchanged(x, x_before, "after Y learnt X's new boot") ||
        unchanged(y, y_before, "after Y learnt X's new boot"))
        return 1;

    /* 4. The next transfers land, both ways, the survivor's first. */
    fill(x->mem, HALF, 5);
    fill(y->mem, HALF, 6);
    if (write_lands(y, x) || epoll_lands(ep, x, y))
        return 1;
    close(ep);
    /* Beside it on its node, by descriptors of the old boot that both reloaded: no wire. */
    fill(x->mem, HALF, 7);
    if (write_lands(x, &z))
        return 1;
    b10_conn_close(z.conn);
    b10_dram_free(z.mem);
    b10_conn_close(a.conn);
    b10_conn_close(b.conn);
    b10_dram_free(a.mem);
    b10_dram_free(b.mem);
    free(old_copy);
    free(x_before);
    free(y_before);
    printf("ok all\n");
    return 0;
}
