/*
 * b10-tenant — ranks of two users on one daemon, and a rank of another
 * node, tried against each other as DESIGN.md §8 says they may and may not.
 *
 *   b10-tenant [--paired] SOCKET SOCKET_REMOTE REMOTE_PID UID_A UID_B B10CTL
 *
 * Run as root. It forks one process per rank, each dropped to its uid
 * (ranks a and a2 of UID_A, b of UID_B on SOCKET; r on SOCKET_REMOTE), and
 * drives them over a pipe, one request at a time. What it shows:
 *
 *   - b (another uid) is refused READ, WRITE, CHECK and NOTIFY against a
 *     with B10_ERR_PERMISSION, and a's bytes stay as they were; through a
 *     region a opened to the node, b's WRITE, READ and CHECK succeed (a
 *     NOTIFY still needs pairing); loading b's descriptor grants b nothing;
 *     granted WRITE (b10_agent_pair), b WRITEs, CHECKs and NOTIFYs but does
 *     not READ; granted READ, the other way round; granted both, all four
 *     succeed. a2, of a's uid, needs no pairing.
 *   - b cannot take a's name, neither while a is connected nor after it
 *     left; a2 (a's uid) takes it back.
 *   - b's b10ctl lists only b's uid's ranks and transfers, cannot cancel a
 *     transfer of a's (held in flight by stopping the remote daemon) and is
 *     answered as for an id of no transfer (status and words alike), and
 *     cannot drain; the operator's b10ctl (root) is told that an id of none
 *     is in flight nowhere; a's b10ctl sees and cancels it.
 *   - r, on the other daemon: without --paired (the daemon admits any
 *     authenticated remote rank) its WRITE lands unpaired; with --paired
 *     (the daemon runs --remote-access paired) all four are refused, an
 *     open region does not help, loading r grants it nothing, granted WRITE
 *     it WRITEs but does not READ, and granted both all four succeed.
 *
 * Prints "ok …" per check, "FAIL …" on the first failure; exits 0 or 1.
 */
#include <b10/b10.h>

#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define REGION (1u << 20)
#define PIECE (64u << 10)
#define WAIT_MS 20000
#define DATA_MAX 65536

/* ---------------------------------------------------------------- requests to a rank */

enum op {
    OP_OPEN = 1, OP_CLOSE, OP_REG, OP_DESC, OP_LOAD, OP_XFER, OP_WAITX, OP_XFER_ID, OP_CHECK,
    OP_NOTIFY, OP_NOTICES, OP_VERIFY, OP_CTL, OP_QUIT,
};

struct req {
    enum op op;
    char name[256];
    uint64_t a, b, c, d, e;
    uint32_t len;
    uint8_t data[DATA_MAX];
};

struct resp {
    int status;
    char detail[512];
    uint64_t v;
    uint32_t len;
    uint8_t data[DATA_MAX];
};

static int read_full(int fd, void *buf, size_t n)
{
    for (size_t done = 0; done < n;) {
        ssize_t r = read(fd, (char *)buf + done, n - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        done += (size_t)r;
    }
    return 0;
}

static int write_full(int fd, const void *buf, size_t n)
{
    for (size_t done = 0; done < n;) {
        ssize_t r = write(fd, (const char *)buf + done, n - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        done += (size_t)r;
    }
    return 0;
}

/* ---------------------------------------------------------------- the rank's side */

struct rank_state {
    const char *socket;
    const char *b10ctl;
    b10_conn_t *conn;
    uint8_t *mem[2];
    b10_mem_t *reg[2];
    b10_xfer_t *held;
    uint64_t notices;
};

static void say(struct resp *r, b10_status_t st, const char *fmt, ...)
{
    va_list ap;
    r->status = st;
    va_start(ap, fmt);
    vsnprintf(r->detail, sizeof(r->detail), fmt, ap);
    va_end(ap);
}

static void rank_notices(struct rank_state *s)
{
    b10_notification_t *list;
    size_t n;
    if (s->conn != NULL && b10_agent_notifications(s->conn, &list, &n) == B10_OK && list != NULL) {
        s->notices += n;
        b10_notifications_free(list, n);
    }
}

/* b10ctl ARGS... as this rank's uid: its exit status in v, its stdout in data. */
static void rank_ctl(struct rank_state *s, const struct req *q, struct resp *r)
{
    char *argv[16];
    int argc = 0, out[2];
    argv[argc++] = (char *)s->b10ctl;
    argv[argc++] = "-s";
    argv[argc++] = (char *)s->socket;
    for (uint32_t off = 0; off < q->len && argc < 15; off += strlen((const char *)q->data + off) + 1)
        argv[argc++] = (char *)q->data + off;
    argv[argc] = NULL;
    if (pipe(out) != 0) {
        say(r, B10_ERR_IO, "pipe: %s", strerror(errno));
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(out[1]);
    size_t n = 0;
    ssize_t got;
    while (n < sizeof(r->data) - 1 && (got = read(out[0], r->data + n, sizeof(r->data) - 1 - n)) > 0)
        n += (size_t)got;
    close(out[0]);
    int wst = 0;
    waitpid(pid, &wst, 0);
    r->data[n] = '\0';
    r->len = (uint32_t)n;
    r->v = WIFEXITED(wst) ? (uint64_t)WEXITSTATUS(wst) : 128;
    say(r, B10_OK, "");
}

static void rank_xfer(struct rank_state *s, const struct req *q, struct resp *r)
{
    /* a: op, b: local region, c: local offset, d: remote address, e: wait (0: hold it) */
    b10_span_t local = { (uint64_t)(uintptr_t)s->mem[q->b] + q->c, PIECE };
    b10_span_t remote = { q->d, PIECE };
    /* data: a sync message to ride on it, when any */
    b10_xfer_params_t xp = { .field_mask = B10_XFER_FIELD_DEADLINE | (q->len ? B10_XFER_FIELD_SYNC : 0),
                             .op = (b10_op_t)q->a, .local = &local, .remote = &remote, .count = 1,
                             .remote_agent = q->name, .deadline_ms = 60000, .sync_msg = q->data,
                             .sync_length = q->len };
    b10_xfer_t *x;
    b10_status_t st = b10_xfer_submit(s->conn, &xp, &x);
    if (st != B10_OK) {
        say(r, st, "%s", b10_conn_detail(s->conn));
        return;
    }
    r->v = b10_xfer_id(x);
    if (!q->e) {
        s->held = x;
        say(r, B10_IN_PROGRESS, "");
        return;
    }
    st = b10_xfer_wait(x, WAIT_MS);
    say(r, st, "%s", b10_xfer_detail(x));
    b10_xfer_release(x);
}

static void rank_do(struct rank_state *s, const struct req *q, struct resp *r)
{
    b10_status_t st;
    memset(r, 0, offsetof(struct resp, data));
    rank_notices(s);
    switch (q->op) {
    case OP_OPEN: {
        b10_conn_params_t cp = { .field_mask = B10_CONN_FIELD_SOCKET_PATH, .agent_name = q->name,
                                 .socket_path = s->socket };
        b10_conn_t *c;
        st = b10_conn_open(&cp, &c);
        if (st == B10_OK)
            s->conn = c;
        /* A refused open leaves no connection to ask for the detail: libb10 logs it; say the status. */
        say(r, st, "");
        break;
    }
    case OP_CLOSE:
        b10_conn_close(s->conn);
        s->conn = NULL;
        s->reg[0] = s->reg[1] = NULL;
        say(r, B10_OK, "");
        break;
    case OP_REG: {
        void *p;
        if (s->mem[q->a] == NULL && (st = b10_dram_alloc(REGION, &p)) != B10_OK) {
            say(r, st, "dram alloc");
            break;
        }
        if (s->mem[q->a] == NULL)
            s->mem[q->a] = p;
        memset(s->mem[q->a], (int)q->b, REGION);
        b10_mem_params_t mp = { .field_mask = B10_MEM_FIELD_FLAGS, .kind = B10_MEM_DRAM,
                                .addr = s->mem[q->a], .length = REGION,
                                .flags = q->c ? B10_MEM_OPEN_TO_NODE : 0 };
        st = b10_mem_register(s->conn, &mp, &s->reg[q->a]);
        r->v = (uint64_t)(uintptr_t)s->mem[q->a];
        say(r, st, "%s", st == B10_OK ? "" : b10_conn_detail(s->conn));
        break;
    }
    case OP_DESC: {
        const void *desc;
        size_t len;
        st = b10_agent_desc(s->conn, &desc, &len);
        if (st == B10_OK && len <= sizeof(r->data)) {
            memcpy(r->data, desc, len);
            r->len = (uint32_t)len;
        }
        say(r, st, "");
        break;
    }
    case OP_LOAD:
        /* a: the grants (B10_GRANT_*); none is b10_agent_load. */
        st = q->a == 0 ? b10_agent_load(s->conn, q->name, q->data, q->len)
                       : b10_agent_pair(s->conn, q->name, q->data, q->len, (uint32_t)q->a);
        say(r, st, "%s", st == B10_OK ? "" : b10_conn_detail(s->conn));
        break;
    case OP_XFER:
        rank_xfer(s, q, r);
        break;
    case OP_WAITX:
        st = b10_xfer_wait(s->held, WAIT_MS);
        say(r, st, "%s", b10_xfer_detail(s->held));
        b10_xfer_release(s->held);
        s->held = NULL;
        break;
    case OP_CHECK: {
        b10_span_t span = { q->a, q->b };
        st = b10_agent_check(s->conn, q->name, &span, 1);
        say(r, st, "%s", st == B10_OK ? "" : b10_conn_detail(s->conn));
        break;
    }
    case OP_NOTIFY:
        st = b10_agent_notify(s->conn, q->name, "hello", 5);
        say(r, st, "%s", st == B10_OK ? "" : b10_conn_detail(s->conn));
        break;
    case OP_NOTICES:
        for (int i = 0; i < 50 && s->notices < q->a; i++) {
            usleep(20000);
            rank_notices(s);
        }
        r->v = s->notices;
        say(r, B10_OK, "");
        break;
    case OP_VERIFY: {
        /* a: region, b: offset, c: length, d: the byte every one of them must be */
        const uint8_t *m = s->mem[q->a] + q->b;
        for (uint64_t i = 0; i < q->c; i++)
            if (m[i] != (uint8_t)q->d) {
                say(r, B10_ERR_INTERNAL, "byte %" PRIu64 " is 0x%02x, not 0x%02x", q->b + i, m[i],
                    (unsigned)(uint8_t)q->d);
                return;
            }
        say(r, B10_OK, "");
        break;
    }
    case OP_CTL:
        rank_ctl(s, q, r);
        break;
    default:
        say(r, B10_ERR_INVALID_ARG, "unknown request");
    }
}

static void rank_serve(int fd, const char *socket, const char *b10ctl)
{
    struct rank_state s = { .socket = socket, .b10ctl = b10ctl };
    struct req *q = malloc(sizeof(*q));
    struct resp *r = malloc(sizeof(*r));
    while (q != NULL && r != NULL && read_full(fd, q, sizeof(*q)) == 0 && q->op != OP_QUIT) {
        rank_do(&s, q, r);
        if (write_full(fd, r, sizeof(*r)) != 0)
            break;
    }
    b10_conn_close(s.conn);
    _exit(0);
}

/* ---------------------------------------------------------------- the driver's side */

struct rank {
    const char *name;
    int fd;
    pid_t pid;
    uint64_t addr[2];
    uint8_t desc[DATA_MAX];
    uint32_t desc_len;
};

static struct req Q;
static struct resp R;

static int rank_start(struct rank *k, const char *name, uid_t uid, const char *socket,
                      const char *b10ctl)
{
    int sv[2];
    struct passwd *pw = getpwuid(uid);
    gid_t gid = pw != NULL ? pw->pw_gid : (gid_t)uid;

    k->name = name;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return -1;
    fflush(stdout);
    if ((k->pid = fork()) == 0) {
        close(sv[0]);
        if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0) {
            printf("FAIL rank %s: cannot become uid %u: %s\n", name, (unsigned)uid, strerror(errno));
            _exit(1);
        }
        rank_serve(sv[1], socket, b10ctl);
    }
    close(sv[1]);
    k->fd = sv[0];
    return k->pid > 0 ? 0 : -1;
}

static void rank_stop(struct rank *k)
{
    Q.op = OP_QUIT;
    write_full(k->fd, &Q, sizeof(Q));
    close(k->fd);
    waitpid(k->pid, NULL, 0);
}

/* One request to rank k; the answer in R. */
static b10_status_t call(struct rank *k, enum op op, const char *name, uint64_t a, uint64_t b,
                         uint64_t c, uint64_t d, uint64_t e)
{
    Q.op = op;
    snprintf(Q.name, sizeof(Q.name), "%s", name != NULL ? name : "");
    Q.a = a;
    Q.b = b;
    Q.c = c;
    Q.d = d;
    Q.e = e;
    if (write_full(k->fd, &Q, sizeof(Q)) != 0 || read_full(k->fd, &R, sizeof(R)) != 0) {
        printf("FAIL rank %s: its process is gone\n", k->name);
        exit(1);
    }
    Q.len = 0;
    return (b10_status_t)R.status;
}

static int failures;

static void expect(const char *what, b10_status_t got, b10_status_t want)
{
    if (got == want) {
        printf("ok %s: %s%s%s\n", what, b10_status_name(got), R.detail[0] ? ": " : "", R.detail);
        return;
    }
    printf("FAIL %s: %s, not %s%s%s\n", what, b10_status_name(got), b10_status_name(want),
           R.detail[0] ? ": " : "", R.detail);
    failures++;
    exit(1);
}

static void expect_word(const char *what, const char *word)
{
    if (R.detail[0] == '\0' || strstr(R.detail, word) == NULL) {
        printf("FAIL %s: the reason '%s' does not say '%s'\n", what, R.detail, word);
        exit(1);
    }
}

static void open_rank(struct rank *k)
{
    char what[300];
    snprintf(what, sizeof(what), "%s connects", k->name);
    expect(what, call(k, OP_OPEN, k->name, 0, 0, 0, 0, 0), B10_OK);
}

static void reg(struct rank *k, int idx, int fill, bool open)
{
    char what[300];
    snprintf(what, sizeof(what), "%s registers region %d%s", k->name, idx, open ? " open to the node" : "");
    expect(what, call(k, OP_REG, NULL, (uint64_t)idx, (uint64_t)fill, open, 0, 0), B10_OK);
    k->addr[idx] = R.v;
}

static void desc(struct rank *k)
{
    expect("descriptor", call(k, OP_DESC, NULL, 0, 0, 0, 0, 0), B10_OK);
    memcpy(k->desc, R.data, R.len);
    k->desc_len = R.len;
}

static void pair(struct rank *k, const struct rank *of, uint32_t grants)
{
    char what[300];
    memcpy(Q.data, of->desc, of->desc_len);
    Q.len = of->desc_len;
    snprintf(what, sizeof(what), "%s loads %s's descriptor", k->name, of->name);
    expect(what, call(k, OP_LOAD, of->name, grants, 0, 0, 0, 0), B10_OK);
}

/* k learns of (to send to it or read from it): that grants of nothing. */
static void load(struct rank *k, const struct rank *of)
{
    pair(k, of, 0);
}

/*
 * k writes PIECE bytes of its region 0 at 0 into to's address addr; or
 * reads them into its region 0 at 2 x PIECE, so that what it writes stays
 * its own fill.
 */
static b10_status_t xfer(struct rank *k, const struct rank *to, bool read, uint64_t addr)
{
    return call(k, OP_XFER, to->name, read ? B10_OP_READ : B10_OP_WRITE, 0, read ? 2 * PIECE : 0,
                addr, 1);
}

static b10_status_t verify(struct rank *k, int idx, uint64_t off, int fill)
{
    return call(k, OP_VERIFY, NULL, (uint64_t)idx, off, PIECE, (uint64_t)fill, 0);
}

/* b10ctl as rank k's uid, ARGS... NULL-ended: its exit status; its output in R.data. */
static int ctl(struct rank *k, ...)
{
    va_list ap;
    const char *arg;
    uint32_t off = 0;
    va_start(ap, k);
    while ((arg = va_arg(ap, const char *)) != NULL) {
        size_t n = strlen(arg) + 1;
        memcpy(Q.data + off, arg, n);
        off += (uint32_t)n;
    }
    va_end(ap);
    Q.len = off;
    call(k, OP_CTL, NULL, 0, 0, 0, 0, 0);
    return (int)R.v;
}

/* The string value of "key" in b10ctl's one-line JSON answer, unescaped as far as ids go. */
static void json_str(const char *json, const char *key, char *out, size_t size)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":\"", key);
    const char *p = strstr(json, pat);
    size_t n = 0;
    for (p = p != NULL ? p + strlen(pat) : ""; *p != '\0' && *p != '"' && n + 1 < size; p++)
        out[n++] = *p == '\\' && p[1] != '\0' ? *++p : *p;
    out[n] = '\0';
}

/* s with each occurrence of id written "ID": two answers compared but for the id they name. */
static void without_id(const char *s, const char *id, char *out, size_t size)
{
    size_t n = 0, k = strlen(id);
    while (*s != '\0' && n + 3 < size) {
        if (strncmp(s, id, k) == 0) {
            memcpy(out + n, "ID", 2);
            n += 2;
            s += k;
        } else {
            out[n++] = *s++;
        }
    }
    out[n] = '\0';
}

/*
 * b10ctl cancel, as b (another uid, no operator), of a's transfer `held`
 * and of an id no transfer has: one answer, status and words alike but for
 * the id, since any difference would tell b which ids are in flight. The
 * operator (root: this program) is told the truth about the id of none.
 */
static int cancel_answers_alike(struct rank *b, uint64_t held, const char *sock,
                                const char *b10ctl)
{
    char id[32], none[32], st[2][64], words[2][512];
    /* Another boot's epoch in the high half: no transfer of this daemon's has it. */
    uint64_t nobody = held ^ (UINT64_C(0x5a5a5a5a) << 32);

    snprintf(id, sizeof(id), "%016" PRIx64, held);
    snprintf(none, sizeof(none), "%016" PRIx64, nobody);
    for (int i = 0; i < 2; i++) {
        char detail[512];
        int rc = ctl(b, "--json", "cancel", i == 0 ? id : none, NULL);
        json_str((char *)R.data, "status", st[i], sizeof(st[i]));
        json_str((char *)R.data, "detail", detail, sizeof(detail));
        without_id(detail, i == 0 ? id : none, words[i], sizeof(words[i]));
        if (rc != 4 || strcmp(st[i], "B10_ERR_NOT_FOUND") != 0) {
            printf("FAIL b's b10ctl cancel of %s (%s) exited %d with %s, not 4 with "
                   "B10_ERR_NOT_FOUND: %s\n", i == 0 ? id : none,
                   i == 0 ? "a's transfer" : "an id of none", rc, st[i], (char *)R.data);
            return 1;
        }
    }
    if (strcmp(words[0], words[1]) != 0 || strstr(words[0], "no transfer ID") == NULL) {
        printf("FAIL b's b10ctl cancel tells a's transfer from an id of none: '%s' and '%s'\n",
               words[0], words[1]);
        return 1;
    }
    printf("ok b's b10ctl cancel of a's transfer and of an id of none: one answer (exit 4, "
           "B10_ERR_NOT_FOUND, '%s')\n", words[0]);
    /* The operator, root: not found means in flight nowhere on this daemon. */
    struct rank_state root = { .socket = sock, .b10ctl = b10ctl };
    size_t off = 0;
    const char *args[] = { "--json", "cancel", none };
    for (size_t i = 0; i < 3; i++) {
        memcpy(Q.data + off, args[i], strlen(args[i]) + 1);
        off += strlen(args[i]) + 1;
    }
    Q.len = (uint32_t)off;
    rank_ctl(&root, &Q, &R);
    char detail[512], want[96];
    json_str((char *)R.data, "detail", detail, sizeof(detail));
    snprintf(want, sizeof(want), "no transfer %s is in flight", none);
    if (R.v != 4 || strcmp(detail, want) != 0) {
        printf("FAIL the operator's b10ctl cancel of an id of none exited %d: '%s', not 4: '%s'\n",
               (int)R.v, detail, want);
        return 1;
    }
    printf("ok the operator's b10ctl cancel of an id of none: exit 4, '%s'\n", detail);
    return 0;
}

/* The four requests of one rank against another, each expected to end in want. */
static void four(struct rank *from, struct rank *to, uint64_t addr, b10_status_t want,
                 const char *why)
{
    char what[300];
    snprintf(what, sizeof(what), "%s WRITEs into %s (%s)", from->name, to->name, why);
    expect(what, xfer(from, to, false, addr), want);
    if (want == B10_ERR_PERMISSION)
        expect_word(what, to->name);
    snprintf(what, sizeof(what), "%s READs from %s (%s)", from->name, to->name, why);
    expect(what, xfer(from, to, true, addr + PIECE), want);
    snprintf(what, sizeof(what), "%s CHECKs %s's span (%s)", from->name, to->name, why);
    expect(what, call(from, OP_CHECK, to->name, addr, PIECE, 0, 0, 0), want);
    snprintf(what, sizeof(what), "%s NOTIFYs %s (%s)", from->name, to->name, why);
    expect(what, call(from, OP_NOTIFY, to->name, 0, 0, 0, 0, 0), want);
}

int main(int argc, char **argv)
{
    bool paired = argc > 1 && strcmp(argv[1], "--paired") == 0;
    if (paired) {
        argv++;
        argc--;
    }
    if (argc != 7) {
        fprintf(stderr, "usage: b10-tenant [--paired] SOCKET SOCKET_REMOTE REMOTE_PID UID_A UID_B B10CTL\n");
        return 2;
    }
    const char *sock = argv[1], *sock_r = argv[2], *b10ctl = argv[6];
    pid_t remote_pid = (pid_t)atoi(argv[3]);
    uid_t uid_a = (uid_t)strtoul(argv[4], NULL, 10), uid_b = (uid_t)strtoul(argv[5], NULL, 10);
    struct rank a = { 0 }, a2 = { 0 }, b = { 0 }, r = { 0 }, b2 = { 0 };

    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    if (rank_start(&a, "tenant-a", uid_a, sock, b10ctl) != 0 ||
        rank_start(&a2, "tenant-a2", uid_a, sock, b10ctl) != 0 ||
        rank_start(&b, "tenant-b", uid_b, sock, b10ctl) != 0 ||
        rank_start(&b2, "tenant-a", uid_b, sock, b10ctl) != 0 ||
        rank_start(&r, "tenant-r", uid_a, sock_r, b10ctl) != 0) {
        printf("FAIL could not start the rank processes\n");
        return 1;
    }
    open_rank(&a);
    reg(&a, 0, 0xa1, false);
    reg(&a, 1, 0xa2, true);
    open_rank(&b);
    reg(&b, 0, 0xb1, false);
    open_rank(&r);
    reg(&r, 0, 0xc1, false);
    desc(&a);
    desc(&b);
    desc(&r);
    load(&b, &a);
    load(&r, &a);

    if (!paired) {
        /* Another user's rank, not paired: nothing reaches a's own memory. */
        four(&b, &a, a.addr[0], B10_ERR_PERMISSION, "another uid, not paired");
        expect("a's region 0 is as it was", verify(&a, 0, 0, 0xa1), B10_OK);
        expect("a heard no notice", call(&a, OP_NOTICES, NULL, 0, 0, 0, 0, 0), B10_OK);
        if (R.v != 0) {
            printf("FAIL a was notified %" PRIu64 " times by a rank it did not pair with\n", R.v);
            return 1;
        }
        /* Its region open to the node admits b's WRITE, READ and CHECK; a NOTIFY is no memory. */
        expect("b WRITEs into a's open region", xfer(&b, &a, false, a.addr[1]), B10_OK);
        expect("b's bytes landed in a's open region", verify(&a, 1, 0, 0xb1), B10_OK);
        expect("b READs from a's open region", xfer(&b, &a, true, a.addr[1] + PIECE), B10_OK);
        expect("a's open bytes landed in b", verify(&b, 0, 2 * PIECE, 0xa2), B10_OK);
        expect("b CHECKs a's open region", call(&b, OP_CHECK, a.name, a.addr[1], PIECE, 0, 0, 0), B10_OK);
        expect("b NOTIFYs a through nothing open", call(&b, OP_NOTIFY, a.name, 0, 0, 0, 0, 0),
               B10_ERR_PERMISSION);
        /* A sync message is a notice too, open region or not. */
        memcpy(Q.data, "sync", 4);
        Q.len = 4;
        expect("b WRITEs into a's open region with a sync message",
               call(&b, OP_XFER, a.name, B10_OP_WRITE, 0, 0, a.addr[1], 1), B10_ERR_PERMISSION);
        expect_word("a sync message through an open region", "notice");
        /* Where a's memory is not registered at all is no answer to b either. */
        expect("b WRITEs where a registered nothing",
               call(&b, OP_XFER, a.name, B10_OP_WRITE, 0, 0, a.addr[1] + 64 * REGION, 1),
               B10_ERR_PERMISSION);
        expect("b CHECKs where a registered nothing",
               call(&b, OP_CHECK, a.name, a.addr[1] + 64 * REGION, PIECE, 0, 0, 0), B10_ERR_PERMISSION);

        /* A rank of a's own uid needs no pairing. */
        open_rank(&a2);
        reg(&a2, 0, 0xd1, false);
        desc(&a2);
        load(&a2, &a);
        four(&a2, &a, a.addr[0], B10_OK, "the same uid");
        expect("a2's bytes landed in a", verify(&a, 0, 0, 0xd1), B10_OK);

        /* Loading b's descriptor (to send to b) grants b nothing. */
        load(&a, &b);
        four(&b, &a, a.addr[0], B10_ERR_PERMISSION, "another uid, loaded but granted nothing");
        expect("a's region 0 is as a2 left it after b's refused WRITE", verify(&a, 0, 0, 0xd1),
               B10_OK);
        /* Granted WRITE: b WRITEs, CHECKs and NOTIFYs, but does not READ. */
        pair(&a, &b, B10_GRANT_WRITE);
        expect("b READs from a (granted WRITE only)", xfer(&b, &a, true, a.addr[0] + PIECE),
               B10_ERR_PERMISSION);
        expect_word("b READs from a (granted WRITE only)", "B10_GRANT_READ");
        expect("b WRITEs into a (granted WRITE)", xfer(&b, &a, false, a.addr[0]), B10_OK);
        expect("b NOTIFYs a (granted WRITE)", call(&b, OP_NOTIFY, a.name, 0, 0, 0, 0, 0), B10_OK);
        /* Granted READ alone: b READs and CHECKs, no longer WRITEs or NOTIFYs. */
        pair(&a, &b, B10_GRANT_READ);
        expect("b WRITEs into a (granted READ only)", xfer(&b, &a, false, a.addr[0]),
               B10_ERR_PERMISSION);
        expect("b NOTIFYs a (granted READ only)", call(&b, OP_NOTIFY, a.name, 0, 0, 0, 0, 0),
               B10_ERR_PERMISSION);
        expect("b READs from a (granted READ)", xfer(&b, &a, true, a.addr[0] + PIECE), B10_OK);
        expect("b CHECKs a's span (granted READ)", call(&b, OP_CHECK, a.name, a.addr[0], PIECE, 0, 0, 0),
               B10_OK);
        /* Paired with both: all four. */
        pair(&a, &b, B10_GRANT_WRITE | B10_GRANT_READ);
        four(&b, &a, a.addr[0], B10_OK, "another uid, paired");
        expect("b's bytes landed in a once paired", verify(&a, 0, 0, 0xb1), B10_OK);
        expect("a heard b's notice", call(&a, OP_NOTICES, NULL, 1, 0, 0, 0, 0), B10_OK);
        if (R.v < 1) {
            printf("FAIL a did not hear the notice of the rank it paired with\n");
            return 1;
        }

        /* A remote rank, under the default --remote-access any: no pairing needed. */
        four(&r, &a, a.addr[0] + 4 * PIECE, B10_OK, "a remote rank, --remote-access any");

        /* b10ctl: a transfer of a's held in flight (the remote daemon stopped). */
        load(&a, &r);
        kill(remote_pid, SIGSTOP);
        expect("a starts a WRITE to r that stays in flight",
               call(&a, OP_XFER, r.name, B10_OP_WRITE, 0, 0, r.addr[0], 0), B10_IN_PROGRESS);
        uint64_t held = R.v;
        char id[32];
        snprintf(id, sizeof(id), "%016" PRIx64, held);
        int rc = ctl(&b, "--json", "transfers", NULL);
        if (rc != 0 || strstr((char *)R.data, id) != NULL || strstr((char *)R.data, "\"operator\":false") == NULL) {
            printf("FAIL b's b10ctl transfers (exit %d) shows a's transfer %s or claims an operator: %s\n",
                   rc, id, (char *)R.data);
            return 1;
        }
        printf("ok b's b10ctl transfers leaves out a's transfer %s and says it is no operator\n", id);
        rc = ctl(&b, "--json", "clients", NULL);
        if (rc != 0 || strstr((char *)R.data, "\"tenant-b\"") == NULL ||
            strstr((char *)R.data, "\"tenant-a\"") != NULL || strstr((char *)R.data, "\"tenant-a2\"") != NULL) {
            printf("FAIL b's b10ctl clients (exit %d) does not show b alone: %s\n", rc, (char *)R.data);
            return 1;
        }
        printf("ok b's b10ctl clients shows b's uid's rank alone\n");
        if (cancel_answers_alike(&b, held, sock, b10ctl) != 0)
            return 1;
        rc = ctl(&b, "drain", "--no-wait", NULL);
        if (rc != 5) {
            printf("FAIL b's b10ctl drain exited %d, not 5 (not permitted)\n", rc);
            return 1;
        }
        printf("ok b's b10ctl cannot drain (exit 5)\n");
        rc = ctl(&a, "--json", "transfers", NULL);
        if (rc != 0 || strstr((char *)R.data, id) == NULL) {
            printf("FAIL a's b10ctl transfers (exit %d) does not show its transfer %s: %s\n", rc, id,
                   (char *)R.data);
            return 1;
        }
        printf("ok a's b10ctl transfers shows its own transfer\n");
        rc = ctl(&a, "cancel", id, NULL);
        if (rc != 0) {
            printf("FAIL a's b10ctl cancel of its own transfer exited %d\n", rc);
            return 1;
        }
        expect("a's held transfer ends cancelled", call(&a, OP_WAITX, NULL, 0, 0, 0, 0, 0),
               B10_ERR_CANCELLED);
        kill(remote_pid, SIGCONT);
        expect("the daemon still serves after the refusals: b WRITEs into a, paired",
               xfer(&b, &a, false, a.addr[0]), B10_OK);

        /* Names: a's is a's uid's, connected or not. */
        expect("b takes a's name while a is connected", call(&b2, OP_OPEN, a.name, 0, 0, 0, 0, 0),
               B10_ERR_PERMISSION);
        expect("a leaves", call(&a, OP_CLOSE, NULL, 0, 0, 0, 0, 0), B10_OK);
        expect("b takes a's name after a left", call(&b2, OP_OPEN, a.name, 0, 0, 0, 0, 0),
               B10_ERR_PERMISSION);
        expect("a2 closes", call(&a2, OP_CLOSE, NULL, 0, 0, 0, 0, 0), B10_OK);
        expect("a's uid takes its name back", call(&a2, OP_OPEN, a.name, 0, 0, 0, 0, 0), B10_OK);
    } else {
        /* --remote-access paired: a remote rank a did not load is refused, open region or not. */
        four(&r, &a, a.addr[0], B10_ERR_PERMISSION, "a remote rank, not paired");
        expect("r WRITEs into a's open region", xfer(&r, &a, false, a.addr[1]), B10_ERR_PERMISSION);
        expect("a's region 0 is as it was", verify(&a, 0, 0, 0xa1), B10_OK);
        expect("a's open region is as it was", verify(&a, 1, 0, 0xa2), B10_OK);
        /* The local rule is the same as ever: a rank of a's uid needs nothing. */
        open_rank(&a2);
        reg(&a2, 0, 0xd1, false);
        desc(&a2);
        load(&a2, &a);
        expect("a2 (a's uid) WRITEs into a", xfer(&a2, &a, false, a.addr[0] + 8 * PIECE), B10_OK);
        load(&a, &r);
        four(&r, &a, a.addr[0], B10_ERR_PERMISSION, "a remote rank, loaded but granted nothing");
        pair(&a, &r, B10_GRANT_WRITE);
        expect("r READs from a (granted WRITE only)", xfer(&r, &a, true, a.addr[0] + PIECE),
               B10_ERR_PERMISSION);
        expect("r WRITEs into a (granted WRITE)", xfer(&r, &a, false, a.addr[0]), B10_OK);
        pair(&a, &r, B10_GRANT_WRITE | B10_GRANT_READ);
        four(&r, &a, a.addr[0], B10_OK, "a remote rank, paired");
        expect("r's bytes landed in a once paired", verify(&a, 0, 0, 0xc1), B10_OK);
    }
    rank_stop(&a);
    rank_stop(&a2);
    rank_stop(&b);
    rank_stop(&b2);
    rank_stop(&r);
    printf("ok all\n");
    return failures != 0;
}
