/*
 * b10-procmem — a rank whose host memory the daemon reaches through its
 * /proc/self/mem (not a memfd) exits while a WRITE into that memory is in
 * flight: the WRITE fails, nothing is written after the exit, and the
 * daemon goes on serving.
 *
 *   b10-procmem SOCKET_SRC SOCKET_DST DELAY_MS
 *
 * The destination daemon delays every scatter by DELAY_MS
 * (B10_TEST_COPY_DELAY_MS). The destination rank is a child process: its
 * region is an anonymous shared mapping made by the parent before the fork,
 * so that the parent sees what lands in it, while the child registers it as
 * plain host memory (no descriptor of it exists to pass). The parent plays
 * the source rank. First the control: the child stays, and the WRITE lands
 * in the shared pages. Then the child is killed while the delayed scatter
 * waits: the scatter runs into an address space that is gone, and the
 * pages keep their poison. Then a rank that unmapped the memory it
 * registered: the WRITE into it fails B10_ERR_IO. Last, a new destination
 * rank takes a WRITE.
 *
 * Prints "ok …" per check, "FAIL …" on the first failure; exits 0 or 1.
 */
#include <b10/b10.h>

#include "rank.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REGION (4u << 20)
#define PIECE (1u << 20)        /* one chunk */
#define POISON 0xee

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static bool all_are(const uint8_t *p, size_t n, uint8_t byte)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != byte)
            return false;
    return true;
}

/* Register mem as plain host memory on socket, as name: the connection, or NULL (said). */
static b10_conn_t *open_heap_rank(const char *socket, const char *name, void *mem, size_t n)
{
    b10_conn_params_t cp = { .field_mask = B10_CONN_FIELD_SOCKET_PATH, .agent_name = name,
                             .socket_path = socket };
    b10_conn_t *conn;
    b10_mem_t *reg;
    b10_status_t st = b10_conn_open(&cp, &conn);
    if (st != B10_OK) {
        fail("open", st, NULL);
        return NULL;
    }
    b10_mem_params_t mp = { .kind = B10_MEM_DRAM, .addr = mem, .length = n };
    if ((st = b10_mem_register(conn, &mp, &reg)) != B10_OK) {
        fail("register plain host memory", st, b10_conn_detail(conn));
        b10_conn_close(conn);
        return NULL;
    }
    return conn;
}

/*
 * The destination rank, in a child: registers shared (the parent's pages),
 * writes its descriptor to out, then waits until killed or told to go.
 */
static void dst_child(const char *socket, const char *name, uint8_t *shared, int out, int in)
{
    b10_conn_t *conn = open_heap_rank(socket, name, shared, REGION);
    const void *desc = NULL;
    size_t len = 0;
    if (conn == NULL || b10_agent_desc(conn, &desc, &len) != B10_OK)
        _exit(1);
    uint32_t n = (uint32_t)len;
    if (write(out, &n, sizeof(n)) != sizeof(n) || write(out, desc, len) != (ssize_t)len)
        _exit(1);
    char go;
    ssize_t r = read(in, &go, 1);
    (void)r;
    b10_conn_close(conn);
    _exit(0);
}

struct child {
    pid_t pid;
    int to;         /* write a byte: it leaves */
};

/* Start a destination rank named name and load its descriptor into src. */
static int start_dst(struct child *c, const char *socket, const char *name, uint8_t *shared,
                     struct rank *src)
{
    int up[2], down[2];
    if (pipe(up) != 0 || pipe(down) != 0)
        return printf("FAIL pipe: %s\n", strerror(errno)), 1;
    fflush(stdout);
    c->pid = fork();
    if (c->pid < 0)
        return printf("FAIL fork: %s\n", strerror(errno)), 1;
    if (c->pid == 0) {
        close(up[0]);
        close(down[1]);
        dst_child(socket, name, shared, up[1], down[0]);
    }
    close(up[1]);
    close(down[0]);
    c->to = down[1];
    uint32_t n;
    uint8_t desc[65536];
    if (read(up[0], &n, sizeof(n)) != sizeof(n) || n > sizeof(desc) ||
        read(up[0], desc, n) != (ssize_t)n) {
        close(up[0]);
        return printf("FAIL the destination rank %s did not start\n", name), 1;
    }
    close(up[0]);
    b10_status_t st = b10_agent_load(src->conn, name, desc, n);
    return st == B10_OK ? 0 : fail("load the destination's descriptor", st,
                                   b10_conn_detail(src->conn));
}

static b10_xfer_t *write_piece(struct rank *src, const char *to, uint8_t *shared)
{
    static b10_span_t local, remote;
    local = (b10_span_t){ (uint64_t)(uintptr_t)src->mem, PIECE };
    remote = (b10_span_t){ (uint64_t)(uintptr_t)shared, PIECE };
    b10_xfer_params_t xp = { .field_mask = B10_XFER_FIELD_DEADLINE, .op = B10_OP_WRITE,
                             .local = &local, .remote = &remote, .count = 1, .remote_agent = to,
                             .deadline_ms = 60000 };
    b10_xfer_t *x = NULL;
    b10_status_t st = b10_xfer_submit(src->conn, &xp, &x);
    if (st != B10_OK) {
        fail("submit", st, b10_conn_detail(src->conn));
        return NULL;
    }
    return x;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: b10-procmem SOCKET_SRC SOCKET_DST DELAY_MS\n");
        return 2;
    }
    const char *sock_src = argv[1], *sock_dst = argv[2];
    uint32_t delay = (uint32_t)strtoul(argv[3], NULL, 10);
    struct rank src = { .name = "procmem-src" };
    struct child c;
    char why[256];

    setvbuf(stdout, NULL, _IOLBF, 0);
    uint8_t *shared = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    src.mem = malloc(REGION);
    if (shared == MAP_FAILED || src.mem == NULL)
        return printf("FAIL memory: %s\n", strerror(errno)), 1;
    memset(src.mem, 0x5a, REGION);
    if ((src.conn = open_heap_rank(sock_src, src.name, src.mem, REGION)) == NULL)
        return 1;

    /* The control: the child stays, and the WRITE lands in its (our shared) pages. */
    memset(shared, POISON, REGION);
    if (start_dst(&c, sock_dst, "procmem-dst", shared, &src) != 0)
        return 1;
    b10_xfer_t *x = write_piece(&src, "procmem-dst", shared);
    if (x == NULL)
        return 1;
    b10_status_t st = b10_xfer_wait(x, 60000);
    snprintf(why, sizeof(why), "%s", b10_xfer_detail(x));
    b10_xfer_release(x);
    if (st != B10_OK || !all_are(shared, PIECE, 0x5a) || !all_are(shared + PIECE, PIECE, POISON))
        return fail("a WRITE into a rank's plain host memory", st,
                    st == B10_OK ? "the bytes did not land" : why);
    printf("ok a WRITE into a rank's plain host memory landed byte for byte\n");
    if (write(c.to, "x", 1) != 1 || waitpid(c.pid, NULL, 0) != c.pid)
        return printf("FAIL the destination rank did not leave\n"), 1;
    close(c.to);

    /* The rank dies while the scatter into it waits. */
    memset(shared, POISON, REGION);
    if (start_dst(&c, sock_dst, "procmem-dst", shared, &src) != 0)
        return 1;
    double t0 = now_ms();
    if ((x = write_piece(&src, "procmem-dst", shared)) == NULL)
        return 1;
    usleep(300000);     /* DATA is in, its scatter waits */
    kill(c.pid, SIGKILL);
    waitpid(c.pid, NULL, 0);
    close(c.to);
    double t_exit = now_ms() - t0;
    st = b10_xfer_wait(x, 60000);
    double took = now_ms() - t0;
    snprintf(why, sizeof(why), "%s", b10_xfer_detail(x));
    b10_xfer_release(x);
    if (st == B10_OK || st == B10_IN_PROGRESS)
        return fail("a WRITE whose destination rank was killed", st, "not a failure");
    if (took < t_exit)
        return printf("FAIL the failure came before the rank's exit\n"), 1;
    usleep((delay + 300) * 1000u);
    if (!all_are(shared, REGION, POISON))
        return printf("FAIL the rank's pages changed after it exited\n"), 1;
    printf("ok the rank was killed at %.0f ms; its WRITE failed %s after %.0f ms (%s); nothing was "
           "written into its pages after its exit\n", t_exit, b10_status_name(st), took, why);

    /*
     * A rank that unmaps memory it registered: the scatter into it finds no
     * page and the WRITE fails B10_ERR_IO, saying so; the daemons serve on.
     */
    {
        uint8_t *gone = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                             -1, 0);
        if (gone == MAP_FAILED)
            return printf("FAIL mmap: %s\n", strerror(errno)), 1;
        memset(gone, POISON, REGION);
        b10_conn_t *hole = open_heap_rank(sock_dst, "procmem-hole", gone, REGION);
        const void *desc;
        size_t len;
        if (hole == NULL || b10_agent_desc(hole, &desc, &len) != B10_OK ||
            b10_agent_load(src.conn, "procmem-hole", desc, len) != B10_OK)
            return printf("FAIL the rank that unmaps its memory did not start\n"), 1;
        munmap(gone, REGION);
        if ((x = write_piece(&src, "procmem-hole", gone)) == NULL)
            return 1;
        st = b10_xfer_wait(x, 60000);
        snprintf(why, sizeof(why), "%s", b10_xfer_detail(x));
        b10_xfer_release(x);
        if (st != B10_ERR_IO || strstr(why, "no longer mapped") == NULL)
            return fail("a WRITE into memory its rank unmapped", st, why);
        printf("ok a WRITE into memory its rank unmapped: %s (%s)\n", b10_status_name(st), why);
        b10_conn_close(hole);
    }

    /* The daemons go on serving: a new destination rank takes a WRITE. */
    if (start_dst(&c, sock_dst, "procmem-dst2", shared, &src) != 0)
        return 1;
    if ((x = write_piece(&src, "procmem-dst2", shared)) == NULL)
        return 1;
    st = b10_xfer_wait(x, 60000);
    b10_xfer_release(x);
    if (st != B10_OK || !all_are(shared, PIECE, 0x5a))
        return fail("a WRITE after the rank's death", st, "the bytes did not land");
    if (write(c.to, "x", 1) != 1 || waitpid(c.pid, NULL, 0) != c.pid)
        return printf("FAIL the last destination rank did not leave\n"), 1;
    printf("ok after it a new rank took a WRITE: the daemons serve\n");
    b10_conn_close(src.conn);
    return 0;
}
