/*
 * arena-input.h — the fuzzers' span arena: the input's bytes in a memfd,
 * sealed as libb10 seals it, opened and read as the daemon reads it.
 */
#ifndef B10_FUZZ_ARENA_INPUT_H
#define B10_FUZZ_ARENA_INPUT_H

#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arena.h"

/*
 * An arena of exactly length bytes of map (refused by arena_open for 0: then
 * arena_take must refuse whatever it is asked), taken of count entries of
 * unit bytes each way. The status of arena_take, or B10_ERR_IO when no
 * memfd could be made (the input is skipped).
 */
static inline b10_status_t arena_input_take(const uint8_t *map, size_t length, uint64_t count,
                                            size_t unit, uint8_t **tables_p)
{
    int fd = memfd_create("fuzz-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || (length > 0 && write(fd, map, length) != (ssize_t)length) ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
        if (fd >= 0)
            close(fd);
        return B10_ERR_IO;
    }
    struct arena arena;
    char detail[256];
    arena_init(&arena);
    arena_open(&arena, fd, length, UINT64_C(1) << 30, detail, sizeof(detail));
    close(fd);
    b10_status_t st = arena_take(&arena, count, unit, tables_p, detail, sizeof(detail));
    arena_close(&arena);
    return st;
}

#endif
