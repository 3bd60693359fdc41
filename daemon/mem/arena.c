/* arena.c — see arena.h. */
#include "arena.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frame.h"

void arena_init(struct arena *a)
{
    a->fd = -1;
    a->length = 0;
}

b10_status_t arena_open(struct arena *a, int fd, uint64_t length, uint64_t max, char *detail,
                        size_t detail_len)
{
    struct stat st;

    if (length == 0 || length > max) {
        snprintf(detail, detail_len, "a span arena of %" PRIu64 " bytes: 1..%" PRIu64
                 " (--max-frame)", length, max);
        return B10_ERR_TOO_LARGE;
    }
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(detail, detail_len, "a span arena comes with the descriptor of a memfd");
        return B10_ERR_INVALID_ARG;
    }
    /* The seal first, then the size: sealed, it can no longer shrink under the check. */
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
        snprintf(detail, detail_len, "the memfd of a span arena must be sealed with F_SEAL_SHRINK");
        return B10_ERR_INVALID_ARG;
    }
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < length) {
        snprintf(detail, detail_len, "a span arena of %" PRIu64 " bytes in a memfd of %" PRIu64,
                 length, (uint64_t)st.st_size);
        return B10_ERR_INVALID_ARG;
    }
    int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0) {
        snprintf(detail, detail_len, "keeping the span arena's descriptor: %s", strerror(errno));
        return errno == EMFILE || errno == ENFILE ? B10_ERR_BUSY : B10_ERR_IO;
    }
    arena_close(a);
    a->fd = own;
    a->length = (size_t)length;
    return B10_OK;
}

b10_status_t arena_take(const struct arena *a, uint64_t count, size_t unit, uint8_t **tables_p,
                        char *detail, size_t detail_len)
{
    const char *what = unit == SPAN_BYTES ? "spans" : "entries";
    /* Bounded before the product, so that it cannot wrap. */
    if (count == 0 || unit == 0 || a->fd < 0 || count > a->length / (2 * unit)) {
        snprintf(detail, detail_len, "%" PRIu64 " %s each way do not lie inside the span "
                 "arena's %zu bytes", count, what, a->fd >= 0 ? a->length : 0);
        return B10_ERR_INVALID_ARG;
    }
    size_t bytes = (size_t)count * 2 * unit;
    uint8_t *tables = malloc(bytes);
    if (tables == NULL) {
        snprintf(detail, detail_len, "out of memory for %" PRIu64 " %s", count, what);
        return B10_ERR_NO_MEMORY;
    }
    /* One read of the shared bytes: the rank may rewrite them meanwhile, never after. */
    for (size_t got = 0; got < bytes;) {
        ssize_t n = pread(a->fd, tables + got, bytes - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            snprintf(detail, detail_len, "reading the span arena: %s",
                     n < 0 ? strerror(errno) : "it ends early");
            free(tables);
            return B10_ERR_IO;
        }
        got += (size_t)n;
    }
    *tables_p = tables;
    return B10_OK;
}

b10_status_t arena_dup(const struct arena *a, struct arena *copy)
{
    if (a->fd < 0)
        return B10_ERR_INVALID_ARG;
    int own = fcntl(a->fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0)
        return B10_ERR_BUSY;
    copy->fd = own;
    copy->length = a->length;
    return B10_OK;
}

void arena_close(struct arena *a)
{
    if (a->fd >= 0)
        close(a->fd);
    arena_init(a);
}
