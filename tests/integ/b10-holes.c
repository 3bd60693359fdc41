/*
 * b10-holes — who pays for the pages the daemon writes into a rank's
 * memory: the memory cgroup of the process whose fault allocates them. A
 * fault through the daemon's mapping of a rank's memfd would be the
 * daemon's, so the daemon fills no hole of one (B10_ERR_NOT_POPULATED); a
 * write through the rank's /proc/<pid>/mem faults in the rank, its own.
 *
 *   b10-holes write   SOCKET DAEMON_CG
 *   b10-holes procmem SOCKET DAEMON_CG RANK_CG
 *   b10-holes paths   SOCKET_A SOCKET_B DAEMON_CG
 *   b10-holes punch   SOCKET DAEMON_CG WAIT_MS
 *
 * DAEMON_CG is the directory of the daemon's memory cgroup, RANK_CG this
 * process's (cgroup v2's memory.current or v1's memory.usage_in_bytes is
 * read). One process plays the ranks: a source and a destination of the
 * daemon at SOCKET, whose transfers are local ones (direct copies), or for
 * paths two of each daemon's.
 *
 *   write    the destination registers a sparse memfd of 1 GiB (ftruncate,
 *            never written) and the source WRITEs 4 KiB into each of its
 *            pages: the WRITE fails B10_ERR_NOT_POPULATED with advice in
 *            its detail, the file is as sparse as before and the daemon's
 *            cgroup grew by less than 64 MiB. Then the allowed case: the
 *            destination writes its memory and the same WRITE lands, every
 *            page compared.
 *   procmem  the destination registers 256 MiB of untouched anonymous
 *            memory, reached through its /proc/self/mem; a WRITE into all
 *            of it lands, and the rank's cgroup paid for it (at least 3/4),
 *            not the daemon's (less than 64 MiB).
 *   paths    the other ways into a rank's memory, between a rank of the
 *            daemon at SOCKET_A and one of SOCKET_B's (the same daemon: local
 *            transfers): a WRITE into a sparse memfd, a READ into one, a
 *            WRITE from one (whose loads would fill holes too), each
 *            refused; then each lands into or from the memfd written first.
 *   punch    the race: the daemon waits between its checks and each copy
 *            into a rank (B10_TEST_COPY_DELAY_MS, longer than WAIT_MS),
 *            and the destination, which wrote a slice of its memfd, punches
 *            it out again (fallocate's PUNCH_HOLE) WAIT_MS after the
 *            daemon took a WRITE into it: the WRITE fails
 *            B10_ERR_NOT_POPULATED, the slice stays holes, the daemon's
 *            cgroup grew by less than 64 MiB. The control first: a WRITE
 *            into a slice left alone lands.
 *
 * Prints "ok …" per check, "FAIL …" on the first failure; exits 0 or 1.
 */
#include <b10/b10.h>

#include "rank.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MiB (UINT64_C(1) << 20)
#define PAGE 4096u
#define SRC_PAGES 16u               /* the source: 16 distinct pages, used in turn */
#define ALLOWED_GROWTH (64 * MiB)   /* the daemon's cgroup, over a whole case */
#define WAIT_MS 300000

static char src_name[64], dst_name[64];

/* The cgroup's memory in use, bytes; -1 (said) when neither file reads. */
static int64_t cg_usage(const char *dir)
{
    static const char *const files[] = { "memory.current", "memory.usage_in_bytes" };
    for (size_t i = 0; i < 2; i++) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        long long v = -1;
        int n = fscanf(f, "%lld", &v);
        fclose(f);
        if (n == 1)
            return v;
    }
    printf("FAIL no memory usage readable in %s\n", dir);
    return -1;
}

/* The cgroup's shared memory (memfd and tmpfs pages) charged to it, bytes; -1 if unread. */
static int64_t cg_shmem(const char *dir)
{
    char path[512], key[64];
    long long v;
    int64_t found = -1;
    snprintf(path, sizeof(path), "%s/memory.stat", dir);
    FILE *f = fopen(path, "r");
    while (f != NULL && found < 0 && fscanf(f, "%63s %lld", key, &v) == 2)
        if (strcmp(key, "shmem") == 0)
            found = v;
    if (f != NULL)
        fclose(f);
    return found;
}

static int open_conn(const char *socket, const char *name, b10_conn_t **conn_p)
{
    b10_conn_params_t cp = { .field_mask = B10_CONN_FIELD_SOCKET_PATH, .agent_name = name,
                             .socket_path = socket };
    b10_status_t st = b10_conn_open(&cp, conn_p);
    return st == B10_OK ? 0 : fail("open", st, NULL);
}

/* The source rank: SRC_PAGES pages of b10_dram_alloc, page k filled with k + 1. */
static int open_src(struct rank *src, const char *socket)
{
    if (rank_open(src, socket, src_name, SRC_PAGES * PAGE, 0) != 0)
        return 1;
    for (uint32_t k = 0; k < SRC_PAGES; k++)
        memset(src->mem + k * PAGE, (int)(k + 1), PAGE);
    return 0;
}

/* The destination: conn registers [mem, mem + len), of memfd fd (or -1: process memory). */
static int register_dst(struct rank *dst, const char *socket, uint8_t *mem, size_t len, int fd)
{
    if (open_conn(socket, dst_name, &dst->conn) != 0)
        return 1;
    dst->name = dst_name;
    dst->mem = mem;
    b10_mem_params_t mp = { .kind = B10_MEM_DRAM, .addr = mem, .length = len };
    if (fd >= 0) {
        mp.field_mask = B10_MEM_FIELD_FD | B10_MEM_FIELD_FD_OFFSET;
        mp.fd = fd;
    }
    b10_status_t st = b10_mem_register(dst->conn, &mp, &dst->reg);
    return st == B10_OK ? 0 : fail("register the destination", st, b10_conn_detail(dst->conn));
}

/* A sparse memfd of len bytes, sealed as the daemon asks, mapped: its fd, or -1 (said). */
static int sparse_memfd(size_t len, uint8_t **map_p)
{
    int fd = memfd_create("b10-holes", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0 ||
        (*map_p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        printf("FAIL a sparse memfd of %zu bytes: %s\n", len, strerror(errno));
        return -1;
    }
    return fd;
}

/*
 * src WRITEs 4 KiB into each page of [at, at + len) of dst: the final
 * status, the detail into why. Source page k % SRC_PAGES goes to page k.
 * submitted(arg), if not NULL, once the daemon accepted it.
 */
static b10_status_t write_pages_then(struct rank *src, struct rank *dst, const uint8_t *at,
                                     size_t len, char *why, size_t why_len,
                                     void (*submitted)(void *arg), void *arg)
{
    size_t n = len / PAGE;
    b10_span_t *local = calloc(n, sizeof(*local)), *remote = calloc(n, sizeof(*remote));
    b10_status_t st = B10_ERR_NO_MEMORY;
    b10_xfer_t *x = NULL;
    snprintf(why, why_len, "out of memory");
    if (local != NULL && remote != NULL) {
        for (size_t k = 0; k < n; k++) {
            local[k] = (b10_span_t){ (uintptr_t)(src->mem + (k % SRC_PAGES) * PAGE), PAGE };
            remote[k] = (b10_span_t){ (uintptr_t)(at + k * PAGE), PAGE };
        }
        b10_xfer_params_t xp = { .field_mask = B10_XFER_FIELD_DEADLINE, .op = B10_OP_WRITE,
                                 .local = local, .remote = remote, .count = n,
                                 .remote_agent = dst->name, .deadline_ms = WAIT_MS };
        st = b10_xfer_submit(src->conn, &xp, &x);
        snprintf(why, why_len, "%s", b10_conn_detail(src->conn));
    }
    if (x != NULL) {
        if (submitted != NULL)
            submitted(arg);
        st = b10_xfer_wait(x, WAIT_MS + 10000);
        snprintf(why, why_len, "%s", b10_xfer_detail(x));
        b10_xfer_release(x);
    }
    free(local);
    free(remote);
    return st;
}

static b10_status_t write_pages(struct rank *src, struct rank *dst, const uint8_t *at, size_t len,
                                char *why, size_t why_len)
{
    return write_pages_then(src, dst, at, len, why, why_len, NULL, NULL);
}

/* Does page k of [at, at + len) hold source page k % SRC_PAGES, every page? */
static bool pages_landed(const uint8_t *at, size_t len)
{
    for (size_t k = 0; k < len / PAGE; k++)
        for (size_t i = 0; i < PAGE; i += 512)
            if (at[k * PAGE + i] != (uint8_t)(k % SRC_PAGES + 1))
                return false;
    return true;
}

/* What the daemon's cgroup holds: all its memory, and of it the shared (memfd) pages. */
struct cg_mark {
    int64_t usage, shmem;
};

static int cg_mark(const char *cg, struct cg_mark *m)
{
    m->usage = cg_usage(cg);
    m->shmem = cg_shmem(cg);
    return m->usage < 0 ? 1 : 0;
}

/*
 * The daemon's cgroup has grown by less than ALLOWED_GROWTH since before,
 * and so have its shared pages (what filling a rank's holes would charge
 * it): 0, else 1 (said).
 */
static int daemon_paid_nothing(const char *cg, const struct cg_mark *before, const char *what)
{
    struct cg_mark now;
    if (cg_mark(cg, &now) != 0)
        return 1;
    int64_t grew = now.usage - before->usage;
    int64_t shmem = now.shmem >= 0 && before->shmem >= 0 ? now.shmem - before->shmem : 0;
    if (grew >= (int64_t)ALLOWED_GROWTH || shmem >= (int64_t)ALLOWED_GROWTH) {
        printf("FAIL %s: the daemon's memory cgroup grew by %" PRId64 " MiB (from %" PRId64
               " MiB), its shared memory by %" PRId64 " MiB\n", what, grew >> 20,
               before->usage >> 20, shmem >> 20);
        return 1;
    }
    printf("ok %s: the daemon's memory cgroup grew by %" PRId64 " KiB (%" PRId64 " MiB in use), "
           "its shared memory by %" PRId64 " KiB\n", what, grew >> 10, now.usage >> 20,
           shmem >> 10);
    return 0;
}

/* The hole-filling WRITE, refused; then the same WRITE into the region written, landed. */
static int case_write(const char *socket, const char *daemon_cg)
{
    const size_t len = 1024 * MiB;
    struct rank src = { 0 }, dst = { 0 };
    uint8_t *map;
    char why[512];
    int fd = sparse_memfd(len, &map);
    if (fd < 0 || open_src(&src, socket) != 0 || register_dst(&dst, socket, map, len, fd) != 0 ||
        rank_load(&src, &dst) != 0)
        return 1;
    struct cg_mark before;
    if (cg_mark(daemon_cg, &before) != 0)
        return 1;

    b10_status_t st = write_pages(&src, &dst, map, len, why, sizeof(why));
    if (st != B10_ERR_NOT_POPULATED || strstr(why, "write every page") == NULL ||
        strstr(why, "hole") == NULL)
        return fail("a WRITE into every page of a sparse 1 GiB memfd", st,
                    st == B10_OK ? "it landed: the daemon filled the holes" : why);
    errno = 0;
    if (lseek(fd, 0, SEEK_DATA) >= 0 || errno != ENXIO)
        return printf("FAIL the refused WRITE left pages in the rank's memfd\n"), 1;
    printf("ok a WRITE into every page of a sparse 1 GiB memfd: %s (%s); the file is as sparse "
           "as before\n", b10_status_name(st), why);
    if (daemon_paid_nothing(daemon_cg, &before, "after the refused WRITE") != 0)
        return 1;

    /* Allowed: the rank writes its memory (its own cgroup pays), and the same WRITE lands. */
    memset(map, 0xee, len);
    st = write_pages(&src, &dst, map, len, why, sizeof(why));
    if (st != B10_OK || !pages_landed(map, len))
        return fail("the same WRITE into the memfd, written first", st,
                    st == B10_OK ? "its bytes did not land" : why);
    printf("ok the same WRITE into the memfd, written first, landed: every page compared\n");
    if (daemon_paid_nothing(daemon_cg, &before, "after the WRITE that landed") != 0)
        return 1;
    b10_conn_close(dst.conn);
    b10_conn_close(src.conn);
    return 0;
}

/* A WRITE into untouched process memory: the rank's cgroup pays, not the daemon's. */
static int case_procmem(const char *socket, const char *daemon_cg, const char *rank_cg)
{
    const size_t len = 256 * MiB;
    struct rank src = { 0 }, dst = { 0 };
    char why[512];
    uint8_t *heap = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (heap == MAP_FAILED)
        return printf("FAIL mmap: %s\n", strerror(errno)), 1;
    if (open_src(&src, socket) != 0 || register_dst(&dst, socket, heap, len, -1) != 0 ||
        rank_load(&src, &dst) != 0)
        return 1;
    struct cg_mark daemon0;
    int64_t rank0 = cg_usage(rank_cg);
    if (cg_mark(daemon_cg, &daemon0) != 0 || rank0 < 0)
        return 1;
    b10_status_t st = write_pages(&src, &dst, heap, len, why, sizeof(why));
    int64_t rank1 = cg_usage(rank_cg);
    if (st != B10_OK || !pages_landed(heap, len))
        return fail("a WRITE into untouched process memory", st,
                    st == B10_OK ? "its bytes did not land" : why);
    if (rank1 - rank0 < (int64_t)(len / 4 * 3))
        return printf("FAIL a WRITE of %zu MiB into untouched process memory: the rank's "
                      "cgroup grew by only %" PRId64 " MiB\n", len >> 20, (rank1 - rank0) >> 20), 1;
    printf("ok a WRITE of %zu MiB into untouched process memory landed; the rank's cgroup paid "
           "%" PRId64 " MiB for it\n", len >> 20, (rank1 - rank0) >> 20);
    if (daemon_paid_nothing(daemon_cg, &daemon0, "after the WRITE into process memory") != 0)
        return 1;
    b10_conn_close(dst.conn);
    b10_conn_close(src.conn);
    return 0;
}

/* ---------------------------------------------------------------- the other paths */

/* Does the file hold no page of [off, off + len)? */
static bool no_data(int fd, uint64_t off, uint64_t len)
{
    errno = 0;
    off_t data = lseek(fd, (off_t)off, SEEK_DATA);
    return data < 0 ? errno == ENXIO : (uint64_t)data >= off + len;
}


/*
 * from's op of len bytes between its own [local, + len) and to's [remote, +
 * len): the final status, the detail into why.
 */
static b10_status_t xfer_span(struct rank *from, b10_op_t op, const uint8_t *local,
                              const struct rank *to, const uint8_t *remote, size_t len, char *why,
                              size_t why_len)
{
    b10_span_t l = { (uintptr_t)local, len }, r = { (uintptr_t)remote, len };
    b10_xfer_params_t xp = { .field_mask = B10_XFER_FIELD_DEADLINE, .op = op, .local = &l,
                             .remote = &r, .count = 1, .remote_agent = to->name,
                             .deadline_ms = WAIT_MS };
    b10_xfer_t *x = NULL;
    b10_status_t st = b10_xfer_submit(from->conn, &xp, &x);
    snprintf(why, why_len, "%s", b10_conn_detail(from->conn));
    if (x == NULL)
        return st;
    st = b10_xfer_wait(x, WAIT_MS + 10000);
    snprintf(why, why_len, "%s", b10_xfer_detail(x));
    b10_xfer_release(x);
    return st;
}

static bool all_are(const uint8_t *p, size_t n, uint8_t byte)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != byte)
            return false;
    return true;
}

/* The ranks of case_paths: on A a source and a sparse memfd, on B a sparse memfd and a full one. */
struct paths {
    struct rank a_src, a_sparse, b_sparse, b_full;
    char names[4][64];
    int a_fd, b_fd;
};

#define PATHS_BYTES (8 * MiB)     /* a failed transfer quarantines its views: few of them */

static int paths_open(struct paths *p, const char *sock_a, const char *sock_b)
{
    uint8_t *a_map, *b_map;
    static const char *const what[] = { "a-src", "a-sparse", "b-sparse", "b-full" };
    for (int i = 0; i < 4; i++)
        snprintf(p->names[i], sizeof(p->names[i]), "holes-%s-%ld", what[i], (long)getpid());
    if ((p->a_fd = sparse_memfd(PATHS_BYTES, &a_map)) < 0 ||
        (p->b_fd = sparse_memfd(PATHS_BYTES, &b_map)) < 0 ||
        rank_open(&p->a_src, sock_a, p->names[0], PATHS_BYTES, 0x5a) != 0 ||
        rank_open(&p->b_full, sock_b, p->names[3], PATHS_BYTES, 0x77) != 0)
        return 1;
    snprintf(dst_name, sizeof(dst_name), "%s", p->names[1]);
    if (register_dst(&p->a_sparse, sock_a, a_map, PATHS_BYTES, p->a_fd) != 0)
        return 1;
    snprintf(dst_name, sizeof(dst_name), "%s", p->names[2]);
    if (register_dst(&p->b_sparse, sock_b, b_map, PATHS_BYTES, p->b_fd) != 0)
        return 1;
    return rank_load(&p->a_src, &p->b_sparse) || rank_load(&p->a_sparse, &p->b_full);
}

/* One path, refused: B10_ERR_NOT_POPULATED with advice, and the sparse file still without a page. */
static int path_refused(const char *what, b10_status_t st, const char *why, int sparse_fd)
{
    if (st != B10_ERR_NOT_POPULATED || strstr(why, "write every page") == NULL)
        return fail(what, st, st == B10_OK ? "it landed: holes were filled" : why);
    if (!no_data(sparse_fd, 0, PATHS_BYTES))
        return printf("FAIL %s: the sparse memfd has pages now\n", what), 1;
    printf("ok %s: %s (%s)\n", what, b10_status_name(st), why);
    return 0;
}

/*
 * The paths into a rank's memory besides a local direct WRITE, each refused
 * where it meets a hole and landing once the memory is written: a WRITE
 * into a sparse memfd (B's scatter, or a local one's), a READ into one
 * (the scatter of its write-back, on A), a WRITE from one (A's gather,
 * whose loads would fill holes as well as stores). With both sockets one
 * daemon's, local transfers.
 */
static int case_paths(const char *sock_a, const char *sock_b, const char *daemon_cg)
{
    struct paths p;
    struct cg_mark before;
    char why[512];
    if (paths_open(&p, sock_a, sock_b) != 0 || cg_mark(daemon_cg, &before) != 0)
        return 1;
    const size_t n = PATHS_BYTES;
    if (path_refused("a WRITE into a sparse memfd",
                     xfer_span(&p.a_src, B10_OP_WRITE, p.a_src.mem, &p.b_sparse, p.b_sparse.mem,
                               n, why, sizeof(why)), why, p.b_fd) ||
        path_refused("a READ into a sparse memfd",
                     xfer_span(&p.a_sparse, B10_OP_READ, p.a_sparse.mem, &p.b_full, p.b_full.mem,
                               n, why, sizeof(why)), why, p.a_fd) ||
        path_refused("a WRITE from a sparse memfd",
                     xfer_span(&p.a_sparse, B10_OP_WRITE, p.a_sparse.mem, &p.b_full,
                               p.b_full.mem, n, why, sizeof(why)), why, p.a_fd))
        return 1;
    if (!all_are(p.b_full.mem, n, 0x77))
        return printf("FAIL the refused WRITE from a sparse memfd changed its destination\n"), 1;

    /* Allowed: the same paths once the ranks wrote their memfds. */
    memset(p.b_sparse.mem, 0xee, n);
    memset(p.a_sparse.mem, 0x11, n);
    b10_status_t st = xfer_span(&p.a_src, B10_OP_WRITE, p.a_src.mem, &p.b_sparse, p.b_sparse.mem,
                                n, why, sizeof(why));
    if (st != B10_OK || !all_are(p.b_sparse.mem, n, 0x5a))
        return fail("a WRITE into the memfd, written first", st, why);
    st = xfer_span(&p.a_sparse, B10_OP_WRITE, p.a_sparse.mem, &p.b_full, p.b_full.mem, n, why,
                   sizeof(why));
    if (st != B10_OK || !all_are(p.b_full.mem, n, 0x11))
        return fail("a WRITE from the memfd, written first", st, why);
    memset(p.b_full.mem, 0x77, n);
    st = xfer_span(&p.a_sparse, B10_OP_READ, p.a_sparse.mem, &p.b_full, p.b_full.mem, n, why,
                   sizeof(why));
    if (st != B10_OK || !all_are(p.a_sparse.mem, n, 0x77))
        return fail("a READ into the memfd, written first", st, why);
    printf("ok the same WRITE into, WRITE from and READ into the memfds, written first, landed: "
           "every byte compared\n");
    if (daemon_paid_nothing(daemon_cg, &before, "after the paths") != 0)
        return 1;
    b10_conn_close(p.a_src.conn);
    b10_conn_close(p.a_sparse.conn);
    b10_conn_close(p.b_sparse.conn);
    b10_conn_close(p.b_full.conn);
    return 0;
}

/* ---------------------------------------------------------------- the race */

struct punch {
    int fd;
    uint64_t off, len;          /* the slice to punch out */
    uint32_t wait_ms;           /* after the daemon took the WRITE */
};

static void punch_now(void *arg)
{
    struct punch *p = arg;
    usleep(p->wait_ms * 1000u);
    if (fallocate(p->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)p->off,
                  (off_t)p->len) != 0)
        printf("FAIL punching a hole: %s\n", strerror(errno));
}

/*
 * The race: the daemon delays every scatter by more than wait_ms after its
 * checks (B10_TEST_COPY_DELAY_MS), and the rank punches the slice out in
 * between, wait_ms after the daemon took the WRITE. A check before the copy
 * has passed; the copy must still fill nothing. The control first: the
 * same WRITE, unpunched, lands.
 */
static int case_punch(const char *socket, const char *daemon_cg, uint32_t wait_ms)
{
    const uint64_t len = 256 * MiB, slice = 64 * MiB;
    struct rank src = { 0 }, dst = { 0 };
    uint8_t *map;
    char why[512];
    int fd = sparse_memfd(len, &map);
    if (fd < 0 || open_src(&src, socket) != 0 || register_dst(&dst, socket, map, len, fd) != 0 ||
        rank_load(&src, &dst) != 0)
        return 1;
    struct cg_mark before;
    if (cg_mark(daemon_cg, &before) != 0)
        return 1;
    memset(map, 0xee, slice);
    b10_status_t st = write_pages(&src, &dst, map, slice, why, sizeof(why));
    if (st != B10_OK || !pages_landed(map, slice))
        return fail("a WRITE into a slice written and left alone", st,
                    st == B10_OK ? "its bytes did not land" : why);
    printf("ok a WRITE into a slice written and left alone landed: every page compared\n");
    for (uint64_t off = 0; off < len; off += slice) {
        struct punch p = { .fd = fd, .off = off, .len = slice, .wait_ms = wait_ms };
        memset(map + off, 0xee, slice);
        st = write_pages_then(&src, &dst, map + off, slice, why, sizeof(why), punch_now, &p);
        if (st != B10_ERR_NOT_POPULATED)
            return fail("a WRITE into a slice punched out between its checks and its copy", st,
                        st == B10_OK ? "it landed: the daemon filled the holes" : why);
        if (!no_data(fd, off, slice))
            return printf("FAIL the WRITE into the slice at %" PRIu64 " MiB, punched out between "
                          "its checks and its copy, filled holes (%s)\n", off >> 20, why), 1;
    }
    printf("ok %" PRIu64 " WRITEs into slices punched out between their checks and their copies: "
           "each %s, the slices left holes (%s)\n", len / slice, b10_status_name(st), why);
    if (daemon_paid_nothing(daemon_cg, &before, "after the punched WRITEs") != 0)
        return 1;
    b10_conn_close(dst.conn);
    b10_conn_close(src.conn);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(src_name, sizeof(src_name), "holes-src-%ld", (long)getpid());
    snprintf(dst_name, sizeof(dst_name), "holes-dst-%ld", (long)getpid());
    if (argc == 4 && strcmp(argv[1], "write") == 0)
        return case_write(argv[2], argv[3]);
    if (argc == 5 && strcmp(argv[1], "procmem") == 0)
        return case_procmem(argv[2], argv[3], argv[4]);
    if (argc == 5 && strcmp(argv[1], "paths") == 0)
        return case_paths(argv[2], argv[3], argv[4]);
    if (argc == 5 && strcmp(argv[1], "punch") == 0)
        return case_punch(argv[2], argv[3], (uint32_t)strtoul(argv[4], NULL, 10));
    fprintf(stderr, "usage: b10-holes write SOCKET DAEMON_CG\n"
                    "       b10-holes procmem SOCKET DAEMON_CG RANK_CG\n"
                    "       b10-holes paths SOCKET_A SOCKET_B DAEMON_CG\n"
                    "       b10-holes punch SOCKET DAEMON_CG WAIT_MS\n");
    return 2;
}
