/*
 * b10-names — a rank's name outlives a crash of its daemon: another user's
 * rank cannot take it on the restarted daemon before its own rank is back.
 *
 *   b10-names DIR SOCKET UID_A UID_B SLOW
 *
 * Run as root. It forks one process per rank, each dropped to its uid, and
 * drives them over a pipe, one request at a time: a (UID_A) under the name
 * N = names-a-PID, w (UID_A, N-w) that writes into a, b and a2 (UID_B and
 * UID_A) that try N. The runner (tests/ops/run.sh, names_restart) owns the
 * daemon and is told through files in DIR:
 *
 *   1. a holds N and registers a region; w loads a's descriptor and writes
 *      into it; the bytes land. a is stopped (SIGSTOP: its libb10 cannot
 *      reconnect); DIR/held. The runner sees N in the daemon's file of
 *      names, kills the daemon (-9) and starts it again: DIR/restarted.
 *   2. b says Hello as N: refused B10_ERR_PERMISSION, the reason naming
 *      UID_A. (Without the file, b took N, and a's reconnection was refused
 *      for good.)
 *   3. a continues, its libb10 reconnects on its own and takes N back; w
 *      (reconnected too) writes new bytes into a by the descriptor of the
 *      old boot: they land, compared byte for byte.
 *   4. a and w leave (their claims go idle); DIR/left. The runner stops the
 *      daemon (SIGTERM: its last write) and starts it with a short
 *      --name-hold-ms: DIR/restarted2.
 *   5. The allowed case: once the hold ran out, b takes N (tried until it
 *      does, bounded); a2, of a's uid, is then refused, naming UID_B.
 *
 * Prints "ok …" per check, "FAIL …" on the first failure; exits 0 or 1.
 */
#include <b10/b10.h>

#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REGION (1u << 20)
#define PIECE (256u << 10)

enum op { OP_OPEN = 1, OP_REG, OP_DESC, OP_LOAD, OP_WRITE, OP_VERIFY, OP_RECONNECT, OP_CLOSE, OP_QUIT };

struct req {
    enum op op;
    char name[256];
    uint64_t a, b;
    uint32_t len;
    uint8_t data[8192];
};

struct resp {
    int status;
    char detail[512];
    uint64_t v;
    uint32_t len;
    uint8_t data[8192];
};

static int slow = 1;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int io_full(int fd, void *buf, size_t n, bool out)
{
    for (size_t done = 0; done < n;) {
        ssize_t r = out ? write(fd, (const char *)buf + done, n - done)
                        : read(fd, (char *)buf + done, n - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        done += (size_t)r;
    }
    return 0;
}

/* The same bytes on both sides for a seed. */
static void pattern(uint8_t *p, size_t n, uint64_t seed)
{
    uint32_t x = (uint32_t)seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = (uint8_t)(x >> 24);
    }
}

/* ---------------------------------------------------------------- a rank's process */

struct rank_state {
    const char *socket;
    b10_conn_t *conn;
    uint8_t *mem;
    b10_mem_t *reg;
    char why[512];              /* libb10's last error line: a refused open has no other */
};

static void rank_log(void *arg, int level, const char *line)
{
    struct rank_state *s = arg;
    if (level <= B10_LOG_ERR)
        snprintf(s->why, sizeof(s->why), "%s", line);
}

static b10_status_t rank_reconnect(struct rank_state *s, struct resp *r)
{
    double end = now_s() + 60.0 * slow;
    b10_status_t st;
    while ((st = b10_conn_progress(s->conn)) == B10_ERR_DAEMON_EXITED && now_s() < end) {
        struct pollfd pfd = { .fd = b10_conn_fd(s->conn), .events = POLLIN };
        poll(&pfd, 1, 100);
    }
    snprintf(r->detail, sizeof(r->detail), "%s", st == B10_OK ? "" : b10_conn_detail(s->conn));
    return st;
}

static b10_status_t rank_write(struct rank_state *s, const struct req *q, struct resp *r)
{
    /* name: the target, a: its address, b: the seed of the bytes sent */
    b10_span_t local = { (uint64_t)(uintptr_t)s->mem, PIECE }, remote = { q->a, PIECE };
    b10_xfer_params_t xp = { .field_mask = B10_XFER_FIELD_DEADLINE, .op = B10_OP_WRITE,
                             .local = &local, .remote = &remote, .count = 1,
                             .remote_agent = q->name, .deadline_ms = 30000 * slow };
    b10_xfer_t *x;
    pattern(s->mem, PIECE, q->b);
    b10_status_t st = b10_xfer_submit(s->conn, &xp, &x);
    if (st != B10_OK) {
        snprintf(r->detail, sizeof(r->detail), "%s", b10_conn_detail(s->conn));
        return st;
    }
    st = b10_xfer_wait(x, 30000 * slow);
    snprintf(r->detail, sizeof(r->detail), "%s", b10_xfer_detail(x));
    b10_xfer_release(x);
    return st;
}

static b10_status_t rank_do(struct rank_state *s, const struct req *q, struct resp *r)
{
    b10_status_t st;
    switch (q->op) {
    case OP_OPEN: {
        b10_conn_params_t cp = { .field_mask = B10_CONN_FIELD_SOCKET_PATH | B10_CONN_FIELD_LOG,
                                 .agent_name = q->name, .socket_path = s->socket,
                                 .log_cb = rank_log, .log_arg = s };
        s->why[0] = '\0';
        st = b10_conn_open(&cp, &s->conn);
        snprintf(r->detail, sizeof(r->detail), "%s", st == B10_OK ? "" : s->why);
        return st;
    }
    case OP_REG: {
        void *p;
        if ((st = b10_dram_alloc(REGION, &p)) != B10_OK)
            return st;
        s->mem = p;
        pattern(s->mem, REGION, q->a);
        b10_mem_params_t mp = { .kind = B10_MEM_DRAM, .addr = p, .length = REGION };
        st = b10_mem_register(s->conn, &mp, &s->reg);
        r->v = (uint64_t)(uintptr_t)p;
        snprintf(r->detail, sizeof(r->detail), "%s", st == B10_OK ? "" : b10_conn_detail(s->conn));
        return st;
    }
    case OP_DESC: {
        const void *desc;
        size_t len;
        if ((st = b10_agent_desc(s->conn, &desc, &len)) == B10_OK && len <= sizeof(r->data)) {
            memcpy(r->data, desc, len);
            r->len = (uint32_t)len;
        }
        return st == B10_OK && r->len == 0 ? B10_ERR_TOO_LARGE : st;
    }
    case OP_LOAD:
        st = b10_agent_load(s->conn, q->name, q->data, q->len);
        snprintf(r->detail, sizeof(r->detail), "%s", st == B10_OK ? "" : b10_conn_detail(s->conn));
        return st;
    case OP_WRITE:
        return rank_write(s, q, r);
    case OP_VERIFY: {
        /* a: the seed the first PIECE bytes must hold */
        uint8_t *want = malloc(PIECE);
        if (want == NULL)
            return B10_ERR_NO_MEMORY;
        pattern(want, PIECE, q->a);
        st = memcmp(s->mem, want, PIECE) == 0 ? B10_OK : B10_ERR_INTERNAL;
        for (size_t i = 0; st != B10_OK && i < PIECE; i++)
            if (s->mem[i] != want[i]) {
                snprintf(r->detail, sizeof(r->detail), "byte %zu is 0x%02x, not 0x%02x", i,
                         s->mem[i], want[i]);
                break;
            }
        free(want);
        return st;
    }
    case OP_RECONNECT:
        return rank_reconnect(s, r);
    case OP_CLOSE:
        b10_conn_close(s->conn);
        s->conn = NULL;
        return B10_OK;
    default:
        return B10_ERR_INVALID_ARG;
    }
}

static void rank_serve(int fd, const char *socket)
{
    struct rank_state s = { .socket = socket };
    struct req *q = malloc(sizeof(*q));
    struct resp *r = malloc(sizeof(*r));
    while (q != NULL && r != NULL && io_full(fd, q, sizeof(*q), false) == 0 && q->op != OP_QUIT) {
        memset(r, 0, offsetof(struct resp, data));
        r->status = rank_do(&s, q, r);
        if (io_full(fd, r, sizeof(*r), true) != 0)
            break;
    }
    b10_conn_close(s.conn);
    _exit(0);
}

/* ---------------------------------------------------------------- the driver */

struct rank {
    const char *what;
    int fd;
    pid_t pid;
};

static struct req Q;
static struct resp R;

static int rank_start(struct rank *k, const char *what, uid_t uid, const char *socket)
{
    int sv[2];
    struct passwd *pw = getpwuid(uid);
    gid_t gid = pw != NULL ? pw->pw_gid : (gid_t)uid;

    k->what = what;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return -1;
    fflush(stdout);
    if ((k->pid = fork()) == 0) {
        close(sv[0]);
        if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0) {
            printf("FAIL rank %s: cannot become uid %u: %s\n", what, (unsigned)uid, strerror(errno));
            _exit(1);
        }
        rank_serve(sv[1], socket);
    }
    close(sv[1]);
    k->fd = sv[0];
    return k->pid > 0 ? 0 : -1;
}

static b10_status_t call(struct rank *k, enum op op, const char *name, uint64_t a, uint64_t b)
{
    Q.op = op;
    snprintf(Q.name, sizeof(Q.name), "%s", name != NULL ? name : "");
    Q.a = a;
    Q.b = b;
    if (io_full(k->fd, &Q, sizeof(Q), true) != 0 || io_full(k->fd, &R, sizeof(R), false) != 0) {
        printf("FAIL rank %s: its process is gone\n", k->what);
        exit(1);
    }
    Q.len = 0;
    return (b10_status_t)R.status;
}

static void expect(const char *what, b10_status_t got, b10_status_t want)
{
    if (got == want) {
        printf("ok %s: %s%s%s\n", what, b10_status_name(got), R.detail[0] ? ": " : "", R.detail);
        return;
    }
    printf("FAIL %s: %s, not %s%s%s\n", what, b10_status_name(got), b10_status_name(want),
           R.detail[0] ? ": " : "", R.detail);
    exit(1);
}

static void expect_said(const char *what, const char *words)
{
    if (strstr(R.detail, words) == NULL) {
        printf("FAIL %s: the reason '%s' does not say '%s'\n", what, R.detail, words);
        exit(1);
    }
}

static void touch(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f == NULL || fclose(f) != 0) {
        printf("FAIL touch %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

static void wait_file(const char *dir, const char *name, int seconds)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    for (double end = now_s() + seconds * slow; stat(path, &st) != 0; usleep(50000))
        if (now_s() > end) {
            printf("FAIL no %s from the runner after %d s\n", path, seconds * slow);
            exit(1);
        }
}

/* Steps 1 to 3: the name survives the daemon's crash; its own rank takes it back. */
static void crash(const char *dir, const char *name, uid_t uid_a, struct rank *a, struct rank *w,
                  struct rank *b)
{
    char wname[300], said[64];
    snprintf(wname, sizeof(wname), "%s-w", name);
    expect("a says hello as N", call(a, OP_OPEN, name, 0, 0), B10_OK);
    expect("a registers its region", call(a, OP_REG, NULL, 1, 0), B10_OK);
    uint64_t addr = R.v;
    expect("a's descriptor", call(a, OP_DESC, NULL, 0, 0), B10_OK);
    memcpy(Q.data, R.data, R.len);
    uint32_t desc_len = R.len;
    expect("w says hello", call(w, OP_OPEN, wname, 0, 0), B10_OK);
    expect("w registers its region", call(w, OP_REG, NULL, 2, 0), B10_OK);
    Q.len = desc_len;
    expect("w loads a's descriptor", call(w, OP_LOAD, name, 0, 0), B10_OK);
    expect("w writes into a", call(w, OP_WRITE, name, addr, 3), B10_OK);
    expect("w's bytes landed in a", call(a, OP_VERIFY, NULL, 3, 0), B10_OK);

    /* a cannot reconnect while the daemon is away and back: b comes first. */
    kill(a->pid, SIGSTOP);
    touch(dir, "held");
    wait_file(dir, "restarted", 60);
    expect("b says hello as N on the restarted daemon", call(b, OP_OPEN, name, 0, 0),
           B10_ERR_PERMISSION);
    snprintf(said, sizeof(said), "held by uid %u", (unsigned)uid_a);
    expect_said("b's refusal", said);

    kill(a->pid, SIGCONT);
    expect("a reconnects to the restarted daemon on its own", call(a, OP_RECONNECT, NULL, 0, 0),
           B10_OK);
    expect("w reconnects too", call(w, OP_RECONNECT, NULL, 0, 0), B10_OK);
    expect("w writes into a again, by the old boot's descriptor", call(w, OP_WRITE, name, addr, 4),
           B10_OK);
    expect("w's new bytes landed in a", call(a, OP_VERIFY, NULL, 4, 0), B10_OK);
    expect("a leaves", call(a, OP_CLOSE, NULL, 0, 0), B10_OK);
    expect("w leaves", call(w, OP_CLOSE, NULL, 0, 0), B10_OK);
}

/* Step 5: past the hold, the other user may take the name; then it is theirs. */
static void expiry(const char *dir, const char *name, uid_t uid_b, struct rank *b, struct rank *a2)
{
    char said[64];
    unsigned refused = 0;
    b10_status_t st;

    touch(dir, "left");
    wait_file(dir, "restarted2", 60);
    for (double end = now_s() + 30.0 * slow;
         (st = call(b, OP_OPEN, name, 0, 0)) == B10_ERR_PERMISSION && now_s() < end; refused++)
        usleep(100000);
    printf("ok b was refused %u times before the hold ran out\n", refused);
    expect("b says hello as N once the hold ran out", st, B10_OK);
    expect("a2 (a's uid) says hello as N, now b's", call(a2, OP_OPEN, name, 0, 0),
           B10_ERR_PERMISSION);
    snprintf(said, sizeof(said), "held by uid %u", (unsigned)uid_b);
    expect_said("a2's refusal", said);
}

int main(int argc, char **argv)
{
    struct rank a = { 0 }, w = { 0 }, b = { 0 }, a2 = { 0 };
    char name[64];

    if (argc != 6) {
        fprintf(stderr, "usage: b10-names DIR SOCKET UID_A UID_B SLOW\n");
        return 2;
    }
    const char *dir = argv[1], *sock = argv[2];
    uid_t uid_a = (uid_t)strtoul(argv[3], NULL, 10), uid_b = (uid_t)strtoul(argv[4], NULL, 10);
    slow = atoi(argv[5]) > 0 ? atoi(argv[5]) : 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    snprintf(name, sizeof(name), "names-a-%d", (int)getpid());
    if (rank_start(&a, "a", uid_a, sock) != 0 || rank_start(&w, "w", uid_a, sock) != 0 ||
        rank_start(&b, "b", uid_b, sock) != 0 || rank_start(&a2, "a2", uid_a, sock) != 0) {
        printf("FAIL could not start the rank processes\n");
        return 1;
    }
    printf("ok N is %s\n", name);
    crash(dir, name, uid_a, &a, &w, &b);
    expiry(dir, name, uid_b, &b, &a2);
    struct rank *all[] = { &a, &w, &b, &a2 };
    for (int i = 0; i < 4; i++) {
        Q.op = OP_QUIT;
        io_full(all[i]->fd, &Q, sizeof(Q), true);
        close(all[i]->fd);
        waitpid(all[i]->pid, NULL, 0);
    }
    printf("ok all\n");
    return 0;
}
