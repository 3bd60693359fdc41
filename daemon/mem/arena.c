/* arena.c — see arena.h. */
#include "arena.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frame.h"
#include "log.h"

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
    if ((uint64_t)st.st_size < length) {
        snprintf(detail, detail_len, "a span arena of %" PRIu64 " bytes in a memfd of %" PRIu64,
                 length, (uint64_t)st.st_size);
        return B10_ERR_INVALID_ARG;
    }
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
        snprintf(detail, detail_len, "the memfd of a span arena must be sealed with F_SEAL_SHRINK");
        return B10_ERR_INVALID_ARG;
    }
    void *map = mmap(NULL, (size_t)length, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        int err = errno;
        log_warning("mmap of a %" PRIu64 "-byte span arena: %s", length, strerror(err));
        snprintf(detail, detail_len, "mapping the span arena failed: %s", strerror(err));
        return err == ENOMEM ? B10_ERR_NO_MEMORY : B10_ERR_IO;
    }
    arena_close(a);
    a->map = map;
    a->length = (size_t)length;
    return B10_OK;
}

b10_status_t arena_take(const uint8_t *map, size_t length, uint64_t count, uint8_t **tables_p,
                        char *detail, size_t detail_len)
{
    /* Bounded before the product, so that it cannot wrap. */
    if (count == 0 || map == NULL || count > length / (2 * SPAN_BYTES)) {
        snprintf(detail, detail_len, "%" PRIu64 " spans each way do not lie inside the span "
                 "arena's %zu bytes", count, map != NULL ? length : 0);
        return B10_ERR_INVALID_ARG;
    }
    size_t bytes = (size_t)count * 2 * SPAN_BYTES;
    uint8_t *tables = malloc(bytes);
    if (tables == NULL) {
        snprintf(detail, detail_len, "out of memory for %" PRIu64 " spans", count);
        return B10_ERR_NO_MEMORY;
    }
    /* One read of the shared bytes: the rank may rewrite them meanwhile, never after. */
    memcpy(tables, map, bytes);
    *tables_p = tables;
    return B10_OK;
}

b10_status_t arena_check_written(const uint8_t *map, size_t length, uint64_t count, char *detail,
                                 size_t detail_len)
{
    if (count == 0 || map == NULL || count > length / (2 * SPAN_BYTES))
        return B10_OK;      /* arena_take refuses it, with its reason */
    size_t bytes = (size_t)count * 2 * SPAN_BYTES;
    /*
     * Reading a page of the memfd that the rank never wrote would make it here, charged to
     * the daemon for as long as the rank keeps its memfd: a sparse arena and a large count
     * would be memory the rank never paid for. libb10 writes the tables just before it
     * submits, so they are in the memfd's pages; a count that reaches past what was written
     * is refused. (mincore: whether each page is in the memfd's page cache.)
     */
    size_t page = (size_t)sysconf(_SC_PAGESIZE), npages = (bytes + page - 1) / page;
    unsigned char *vec = malloc(npages);
    if (vec == NULL) {
        snprintf(detail, detail_len, "out of memory for %" PRIu64 " spans", count);
        return B10_ERR_NO_MEMORY;
    }
    if (mincore((void *)map, bytes, vec) != 0) {
        snprintf(detail, detail_len, "the span arena's pages cannot be looked at: %s",
                 strerror(errno));
        free(vec);
        return B10_ERR_INTERNAL;
    }
    for (size_t i = 0; i < npages; i++)
        if (!(vec[i] & 1)) {
            snprintf(detail, detail_len, "%" PRIu64 " spans each way reach page %zu of the span "
                     "arena, which the rank never wrote", count, i);
            free(vec);
            return B10_ERR_INVALID_ARG;
        }
    free(vec);
    return B10_OK;
}

void arena_close(struct arena *a)
{
    if (a->map != NULL)
        munmap((void *)a->map, a->length);
    a->map = NULL;
    a->length = 0;
}
