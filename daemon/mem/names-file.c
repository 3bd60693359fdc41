/* names-file.c — see names-file.h. */
#include "names-file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b10d.h"
#include "checksum.h"
#include "log.h"

#define NAMES_FILE_MAGIC "b10names"
#define NAMES_FILE_VERSION 1u
#define NAMES_FILE_SEED 0x62313073656d616eull       /* "names01b" */
#define NAMES_FILE_TMP NAMES_FILE_NAME ".tmp"
#define NAMES_FILE_REFUSED NAMES_FILE_NAME ".refused"

struct names_file {
    struct b10d *d;
    int dirfd;                  /* the runtime folder, flock()ed while this daemon runs */
    uint8_t boot_id[16];
    uv_timer_t timer;           /* the next write, no sooner than NAMES_FILE_SYNC_MS after the last */
    uv_work_t work;
    /* While in_flight these are the thread pool's: the loop leaves them alone. */
    uint8_t *buf;
    size_t len;
    int work_errno;
    uint64_t spacing_ms;        /* from the last write's start to the next's: NAMES_FILE_SYNC_MS,
                                   or 100 times what encoding the table took the loop */
    uint64_t last_ms;           /* uv_now when the last write began */
    int failed_errno;           /* a failure said already; said again only after a success */
    uint64_t writes;
    bool dirty;                 /* the table changed since the last write began */
    bool in_flight;
    bool closing;
};

/* ---------------------------------------------------------------- encoding */

static void names_file_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void names_file_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t names_file_get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t names_file_get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

struct names_file_out {
    uint8_t *p;
    size_t len;
    uint32_t count;
};

static void names_file_put_record(void *arg, const char *name, size_t len, uid_t uid,
                                  uint64_t idle_ms)
{
    struct names_file_out *o = arg;
    uint8_t *r = o->p + o->len;
    names_file_put32(r, (uint32_t)uid);
    names_file_put64(r + 4, idle_ms);
    r[12] = (uint8_t)len;
    memcpy(r + 13, name, len);
    o->len += 13 + len;
    o->count++;
}

b10_status_t names_file_encode(const struct names *n, const uint8_t boot_id[16], uint64_t now_ms,
                               uint8_t **buf_p, size_t *len_p)
{
    /*
     * Room for the longest names, filled in one walk: the walk (a cache miss
     * a claim) is what costs the loop, pages never written are never touched.
     */
    size_t room = NAMES_FILE_HEAD + (size_t)names_count(n) * (13 + NAMES_NAME_MAX) + NAMES_FILE_TAIL;
    struct names_file_out o = { malloc(room), NAMES_FILE_HEAD, 0 };

    if (o.p == NULL)
        return B10_ERR_NO_MEMORY;
    names_walk(n, names_file_put_record, &o);
    memcpy(o.p, NAMES_FILE_MAGIC, 8);
    names_file_put32(o.p + 8, NAMES_FILE_VERSION);
    names_file_put32(o.p + 12, o.count);
    memcpy(o.p + 16, boot_id, 16);
    names_file_put64(o.p + 32, now_ms);
    names_file_put64(o.p + o.len, checksum(o.p, o.len, NAMES_FILE_SEED));
    *buf_p = o.p;
    *len_p = o.len + NAMES_FILE_TAIL;
    return B10_OK;
}

/* ---------------------------------------------------------------- decoding */

static b10_status_t names_file_bad(char *detail, size_t detail_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static b10_status_t names_file_bad(char *detail, size_t detail_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, detail_len, fmt, ap);
    va_end(ap);
    return B10_ERR_INVALID_ARG;
}

/* The header: everything but the records. */
static b10_status_t names_file_head(const uint8_t *buf, size_t len, const uint8_t boot_id[16],
                                    uint64_t now_ms, uint32_t *count_p, char *detail,
                                    size_t detail_len)
{
    if (len < NAMES_FILE_HEAD + NAMES_FILE_TAIL || len > NAMES_FILE_MAX)
        return names_file_bad(detail, detail_len, "%zu bytes: a file of names has %d to %zu", len,
                              NAMES_FILE_HEAD + NAMES_FILE_TAIL, NAMES_FILE_MAX);
    if (memcmp(buf, NAMES_FILE_MAGIC, 8) != 0)
        return names_file_bad(detail, detail_len, "not a file of names (no \"%s\" at its start)",
                              NAMES_FILE_MAGIC);
    uint32_t version = names_file_get32(buf + 8);
    if (version != NAMES_FILE_VERSION)
        return names_file_bad(detail, detail_len, "version %" PRIu32 ", this daemon reads %u",
                              version, NAMES_FILE_VERSION);
    size_t body = len - NAMES_FILE_TAIL;
    if (names_file_get64(buf + body) != checksum(buf, body, NAMES_FILE_SEED))
        return names_file_bad(detail, detail_len, "its checksum does not match its bytes");
    uint32_t count = names_file_get32(buf + 12);
    if (count > NAMES_MAX || count > (body - NAMES_FILE_HEAD) / NAMES_FILE_RECORD_MIN)
        return names_file_bad(detail, detail_len, "%" PRIu32 " names in %zu bytes (at most %u)",
                              count, len, NAMES_MAX);
    if (memcmp(buf + 16, boot_id, 16) != 0) {
        snprintf(detail, detail_len, "written in another boot of this machine");
        return B10_ERR_NOT_FOUND;
    }
    uint64_t written = names_file_get64(buf + 32);
    if (written > now_ms)
        return names_file_bad(detail, detail_len, "written at %" PRIu64 " ms of this boot, after "
                              "now (%" PRIu64 ")", written, now_ms);
    *count_p = count;
    return B10_OK;
}

b10_status_t names_file_decode(const uint8_t *buf, size_t len, const uint8_t boot_id[16],
                               uint64_t now_ms, struct names_record **records_p, uint32_t *count_p,
                               char *detail, size_t detail_len)
{
    uint32_t count = 0;
    b10_status_t st = names_file_head(buf, len, boot_id, now_ms, &count, detail, detail_len);
    if (st != B10_OK)
        return st;
    uint64_t written = names_file_get64(buf + 32);
    size_t at = NAMES_FILE_HEAD, body = len - NAMES_FILE_TAIL;
    struct names_record *r = malloc((count ? count : 1) * sizeof(*r));
    if (r == NULL)
        return B10_ERR_NO_MEMORY;
    for (uint32_t i = 0; i < count; i++) {
        if (body - at < 13 || body - at - 13 < buf[at + 12] || buf[at + 12] == 0) {
            st = names_file_bad(detail, detail_len, "record %" PRIu32 " at byte %zu: %s", i, at,
                                body - at < 13 || buf[at + 12] != 0 ? "past the end"
                                                                    : "an empty name");
            goto bad;
        }
        r[i] = (struct names_record){ .uid = (uid_t)names_file_get32(buf + at),
                                      .idle_ms = names_file_get64(buf + at + 4),
                                      .len = buf[at + 12],
                                      .name = (const char *)buf + at + 13 };
        /* What session.c lets a Hello name be: printable ASCII, no space. */
        for (uint8_t k = 0; k < r[i].len; k++) {
            uint8_t c = (uint8_t)r[i].name[k];
            if (c <= ' ' || c > '~') {
                st = names_file_bad(detail, detail_len, "record %" PRIu32 ": byte %u of its name "
                                    "is 0x%02x, not printable", i, k, c);
                goto bad;
            }
        }
        if (r[i].idle_ms > written) {
            st = names_file_bad(detail, detail_len, "record %" PRIu32 ": idle since %" PRIu64
                                " ms, after the file was written (%" PRIu64 ")", i, r[i].idle_ms,
                                written);
            goto bad;
        }
        at += 13 + r[i].len;
    }
    if (at != body) {
        st = names_file_bad(detail, detail_len, "%zu bytes after its %" PRIu32 " records",
                            body - at, count);
        goto bad;
    }
    *records_p = r;
    *count_p = count;
    return B10_OK;
bad:
    free(r);
    return st;
}

static int names_file_by_uid(const void *a, const void *b)
{
    const struct names_record *x = a, *y = b;
    return x->uid < y->uid ? -1 : x->uid > y->uid;
}

b10_status_t names_file_restore(struct names *n, struct names_record *records, uint32_t count,
                                uint32_t *expired_p, char *detail, size_t detail_len)
{
    uint64_t now_ms = names_now(n);
    b10_status_t st = B10_OK;

    /* In uid order, the table's per-uid counts only grow at their end. */
    qsort(records, count, sizeof(*records), names_file_by_uid);
    for (uint32_t i = 0; i < count && st == B10_OK; i++) {
        const struct names_record *r = &records[i];
        st = names_restore(n, r->name, r->len, r->uid, r->idle_ms != 0 ? r->idle_ms : now_ms);
        if (st != B10_OK)
            snprintf(detail, detail_len, "the name '%.*s' of uid %u: %s", (int)r->len, r->name,
                     (unsigned)r->uid,
                     st == B10_ERR_EXISTS ? "named twice"
                     : st == B10_ERR_TOO_LARGE ? "past the bounds of the table"
                                               : b10_status_name(st));
    }
    if (st == B10_OK && (st = names_restore_done(n)) != B10_OK)
        snprintf(detail, detail_len, "no memory to order the claims");
    if (st != B10_OK) {
        names_clear(n);
        return st == B10_ERR_NO_MEMORY ? st : B10_ERR_INVALID_ARG;
    }
    uint32_t before = names_count(n);
    names_expire(n);
    *expired_p = before - names_count(n);
    return B10_OK;
}

/* ---------------------------------------------------------------- the folder and the file */

b10_status_t names_file_dir(const char *path, int *fd_p, char *detail, size_t detail_len)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd < 0) {
        snprintf(detail, detail_len, "--runtime-dir %s: %s", path, strerror(errno));
        return B10_ERR_IO;
    }
    if (fstat(fd, &st) != 0) {
        snprintf(detail, detail_len, "--runtime-dir %s: fstat: %s", path, strerror(errno));
        close(fd);
        return B10_ERR_IO;
    }
    /* Whoever may write the folder may replace the file: the daemon's user alone. */
    if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        snprintf(detail, detail_len, "--runtime-dir %s is owned by uid %u with mode %04o: it must "
                 "be the daemon's (uid %u) and not writable by group or others", path,
                 (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
        close(fd);
        return B10_ERR_INVALID_ARG;
    }
    *fd_p = fd;
    return B10_OK;
}

b10_status_t names_file_read(int dirfd, uint8_t **buf_p, size_t *len_p, char *detail,
                             size_t detail_len)
{
    struct stat st;
    b10_status_t status = B10_ERR_INVALID_ARG;
    /* No link followed, and a FIFO put in its place does not block the open. */
    int fd = openat(dirfd, NAMES_FILE_NAME, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
    uint8_t *buf = NULL;
    size_t len = 0;

    if (fd < 0 && errno == ENOENT)
        return B10_ERR_NOT_FOUND;
    if (fd < 0) {
        snprintf(detail, detail_len, "%s", errno == ELOOP ? "a symbolic link" : strerror(errno));
        return errno == ELOOP ? B10_ERR_INVALID_ARG : B10_ERR_IO;
    }
    if (fstat(fd, &st) != 0) {
        snprintf(detail, detail_len, "fstat: %s", strerror(errno));
        status = B10_ERR_IO;
    } else if (!S_ISREG(st.st_mode)) {
        snprintf(detail, detail_len, "not a regular file");
    } else if (st.st_uid != geteuid()) {
        snprintf(detail, detail_len, "owned by uid %u, not the daemon's (%u)", (unsigned)st.st_uid,
                 (unsigned)geteuid());
    } else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        snprintf(detail, detail_len, "mode %04o: writable by group or others",
                 (unsigned)(st.st_mode & 07777));
    } else if ((uint64_t)st.st_size > NAMES_FILE_MAX) {
        snprintf(detail, detail_len, "%jd bytes, more than the table's bounds make (%zu)",
                 (intmax_t)st.st_size, NAMES_FILE_MAX);
    } else if ((buf = malloc((size_t)st.st_size + 1)) == NULL) {
        snprintf(detail, detail_len, "no memory for %jd bytes", (intmax_t)st.st_size);
        status = B10_ERR_NO_MEMORY;
    } else {
        /* Up to one byte more than fstat said: a file that grew meanwhile is refused, not cut. */
        status = B10_OK;
        while (len <= (size_t)st.st_size) {
            ssize_t got = read(fd, buf + len, (size_t)st.st_size + 1 - len);
            if (got < 0 && errno == EINTR)
                continue;
            if (got < 0) {
                snprintf(detail, detail_len, "read: %s", strerror(errno));
                status = B10_ERR_IO;
                break;
            }
            if (got == 0)
                break;
            len += (size_t)got;
        }
        if (status == B10_OK && len != (size_t)st.st_size) {
            snprintf(detail, detail_len, "it changed while it was read");
            status = B10_ERR_INVALID_ARG;
        }
    }
    close(fd);
    if (status != B10_OK) {
        free(buf);
        return status;
    }
    *buf_p = buf;
    *len_p = len;
    return B10_OK;
}

int names_file_write(int dirfd, const uint8_t *buf, size_t len)
{
    int err = 0;

    /* A temporary file a crash left behind, or anything put there: never written through. */
    if (unlinkat(dirfd, NAMES_FILE_TMP, 0) != 0 && errno != ENOENT)
        return errno;
    int fd = openat(dirfd, NAMES_FILE_TMP, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                    0600);
    if (fd < 0)
        return errno;
    /* Exactly 0600 whatever the umask left. */
    if (fchmod(fd, 0600) != 0)
        err = errno;
    for (size_t done = 0; err == 0 && done < len;) {
        ssize_t n = write(fd, buf + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            err = n < 0 ? errno : EIO;
        else
            done += (size_t)n;
    }
    if (close(fd) != 0 && err == 0)
        err = errno;
    if (err == 0 && renameat(dirfd, NAMES_FILE_TMP, dirfd, NAMES_FILE_NAME) != 0)
        err = errno;
    if (err != 0)
        unlinkat(dirfd, NAMES_FILE_TMP, 0);
    return err;
}

void names_file_boot_id(uint8_t id[16])
{
    char text[64] = "";
    unsigned k = 0;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

    memset(id, 0, 16);
    if (f == NULL)
        return;
    if (fgets(text, sizeof(text), f) == NULL)
        text[0] = '\0';
    fclose(f);
    for (const char *c = text; *c != '\0' && k < 32; c++) {
        int v = *c >= '0' && *c <= '9' ? *c - '0' : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10 : -1;
        if (v < 0)
            continue;
        id[k / 2] = (uint8_t)(id[k / 2] << 4 | v);
        k++;
    }
}

/* ---------------------------------------------------------------- keeping the table */

/* A failure once, until a write succeeds again; that is said once too. */
static void names_file_said(struct names_file *nf, int err)
{
    if (err != 0 && err != nf->failed_errno)
        log_err("names: writing %s/%s: %s; until a write succeeds, a restart of the daemon "
                "forgets the names that ranks hold", nf->d->cfg.runtime_dir, NAMES_FILE_NAME,
                strerror(err));
    else if (err == 0 && nf->failed_errno != 0)
        log_notice("names: %s/%s written again", nf->d->cfg.runtime_dir, NAMES_FILE_NAME);
    nf->failed_errno = err;
}

static void names_file_tick(uv_timer_t *t);

static void names_file_schedule(struct names_file *nf)
{
    if (!nf->dirty || nf->in_flight || nf->closing || uv_is_active((uv_handle_t *)&nf->timer))
        return;
    uint64_t now = uv_now(nf->d->loop), due = nf->last_ms + nf->spacing_ms;
    uv_timer_start(&nf->timer, names_file_tick, due > now ? due - now : 0, 0);
}

static void names_file_changed(void *arg)
{
    struct names_file *nf = arg;
    nf->dirty = true;
    names_file_schedule(nf);
}

static void names_file_work(uv_work_t *w)
{
    struct names_file *nf = w->data;
    nf->work_errno = names_file_write(nf->dirfd, nf->buf, nf->len);
}

static void names_file_work_done(uv_work_t *w, int status)
{
    struct names_file *nf = w->data;

    free(nf->buf);
    nf->buf = NULL;
    nf->in_flight = false;
    if (status == UV_ECANCELED) {
        nf->dirty = true;           /* never written: the shutdown's write has it */
        return;
    }
    names_file_said(nf, nf->work_errno);
    nf->dirty |= nf->work_errno != 0;
    nf->writes += nf->work_errno == 0;
    names_file_schedule(nf);
}

static void names_file_tick(uv_timer_t *t)
{
    struct names_file *nf = t->data;
    b10_status_t st;

    if (!nf->dirty || nf->in_flight || nf->closing)
        return;
    /* Marked first: what the expiry forgets belongs to this write, not the next. */
    nf->in_flight = true;
    names_expire(nf->d->names);
    nf->dirty = false;
    nf->last_ms = uv_now(nf->d->loop);
    uint64_t t0 = uv_hrtime();
    st = names_file_encode(nf->d->names, nf->boot_id, names_now(nf->d->names), &nf->buf, &nf->len);
    /* The walk is the loop's time: a table that takes long to encode is written less often. */
    uint64_t spent_ms = (uv_hrtime() - t0) / 1000000u;
    nf->spacing_ms = spent_ms * 100 > NAMES_FILE_SYNC_MS ? spent_ms * 100 : NAMES_FILE_SYNC_MS;
    if (st == B10_OK) {
        if (uv_queue_work(nf->d->loop, &nf->work, names_file_work, names_file_work_done) == 0)
            return;
        free(nf->buf);
        nf->buf = NULL;
    }
    nf->in_flight = false;
    nf->dirty = true;
    names_file_said(nf, ENOMEM);
    names_file_schedule(nf);
}

/* What the last run left, into the empty table; refused, it is moved aside. */
static void names_file_load(struct names_file *nf)
{
    struct names *n = nf->d->names;
    const char *dir = nf->d->cfg.runtime_dir;
    struct names_record *records = NULL;
    uint32_t count = 0, expired = 0;
    uint8_t *buf = NULL;
    size_t len = 0;
    char why[384];

    b10_status_t st = names_file_read(nf->dirfd, &buf, &len, why, sizeof(why));
    if (st == B10_ERR_NOT_FOUND) {
        log_info("names: no %s/%s: no names held from an earlier run", dir, NAMES_FILE_NAME);
        return;
    }
    if (st == B10_OK)
        st = names_file_decode(buf, len, nf->boot_id, names_now(n), &records, &count, why,
                               sizeof(why));
    if (st == B10_OK)
        st = names_file_restore(n, records, count, &expired, why, sizeof(why));
    free(records);
    free(buf);
    if (st == B10_OK) {
        log_notice("names: %u names held before this start are kept for their users (%s/%s); "
                   "%u past --name-hold-ms forgotten", names_count(n), dir, NAMES_FILE_NAME,
                   expired);
        nf->dirty = expired > 0;
    } else if (st == B10_ERR_NOT_FOUND) {
        log_info("names: %s/%s was %s: no names held from it", dir, NAMES_FILE_NAME, why);
        nf->dirty = true;
    } else if (st == B10_ERR_NO_MEMORY) {
        /* Nothing wrong with the file: it stays for the next start, until a write replaces it. */
        log_err("names: no memory to read %s/%s back: starting with no names held", dir,
                NAMES_FILE_NAME);
    } else {
        bool aside = renameat(nf->dirfd, NAMES_FILE_NAME, nf->dirfd, NAMES_FILE_REFUSED) == 0;
        log_err("names: refusing %s/%s: %s; %s; starting with no names held, so a rank of any "
                "user may take a name held before this start", dir, NAMES_FILE_NAME, why,
                aside ? "moved aside to " NAMES_FILE_REFUSED : "left where it is");
        nf->dirty = true;
    }
}

b10_status_t names_file_open(struct b10d *d, struct names_file **nf_p)
{
    char why[512];
    int dirfd;

    *nf_p = NULL;
    if (d->cfg.runtime_dir[0] == '\0') {
        log_notice("names: no --runtime-dir: a restart of the daemon forgets which user holds "
                   "which rank name");
        return B10_OK;
    }
    b10_status_t st = names_file_dir(d->cfg.runtime_dir, &dirfd, why, sizeof(why));
    if (st != B10_OK) {
        log_err("%s", why);
        return st;
    }
    /* Two daemons writing one file would each forget the other's names. */
    if (flock(dirfd, LOCK_EX | LOCK_NB) != 0) {
        log_err("--runtime-dir %s: %s", d->cfg.runtime_dir, errno == EWOULDBLOCK ?
                "another b10d keeps its names there" : strerror(errno));
        close(dirfd);
        return B10_ERR_EXISTS;
    }
    struct names_file *nf = calloc(1, sizeof(*nf));
    if (nf == NULL) {
        close(dirfd);
        return B10_ERR_NO_MEMORY;
    }
    nf->d = d;
    nf->dirfd = dirfd;
    nf->spacing_ms = NAMES_FILE_SYNC_MS;
    names_file_boot_id(nf->boot_id);
    uv_timer_init(d->loop, &nf->timer);
    nf->timer.data = nf;
    nf->work.data = nf;
    names_file_load(nf);
    names_on_change(d->names, names_file_changed, nf);
    names_file_schedule(nf);
    *nf_p = nf;
    return B10_OK;
}

static void names_file_closed(uv_handle_t *h)
{
    struct names_file *nf = h->data;
    /* A write stuck on the thread pool still holds nf: the process's exit takes it. */
    if (nf->in_flight)
        return;
    close(nf->dirfd);
    free(nf);
}

void names_file_close(struct names_file *nf)
{
    if (nf == NULL)
        return;
    nf->closing = true;
    uv_timer_stop(&nf->timer);
    names_on_change(nf->d->names, NULL, NULL);
    if (nf->in_flight)
        uv_cancel((uv_req_t *)&nf->work);
    for (int i = 0; nf->in_flight && i < 1000; i++) {
        uv_run(nf->d->loop, UV_RUN_NOWAIT);
        if (nf->in_flight)
            uv_sleep(10);
    }
    if (nf->in_flight) {
        log_warning("names: a write of %s/%s did not end in 10 s: no last write",
                    nf->d->cfg.runtime_dir, NAMES_FILE_NAME);
    } else {
        /* Every rank is gone by now: each claim is idle from this moment. */
        names_expire(nf->d->names);
        b10_status_t st = names_file_encode(nf->d->names, nf->boot_id, names_now(nf->d->names),
                                            &nf->buf, &nf->len);
        int err = st == B10_OK ? names_file_write(nf->dirfd, nf->buf, nf->len) : ENOMEM;
        names_file_said(nf, err);
        if (err == 0)
            log_info("names: %u names held, written to %s/%s for the next start",
                     names_count(nf->d->names), nf->d->cfg.runtime_dir, NAMES_FILE_NAME);
        nf->writes += err == 0;
        free(nf->buf);
        nf->buf = NULL;
    }
    uv_close((uv_handle_t *)&nf->timer, names_file_closed);
}

uint64_t names_file_writes(const struct names_file *nf)
{
    return nf != NULL ? nf->writes : 0;
}
