/* wireaddr.c — see wireaddr.h. */
#include "wireaddr.h"

#include <string.h>

#define WIREADDR_MAGIC "b10w"
#define WIREADDR_VERSION 1
#define WIREADDR_HEADER 8

size_t wireaddr_size(unsigned count, const size_t *lengths)
{
    size_t total = WIREADDR_HEADER;
    for (unsigned i = 0; i < count; i++)
        total += 4 + lengths[i];
    return total;
}

void wireaddr_pack(uint8_t *out, unsigned count, const void *const *addrs, const size_t *lengths)
{
    memcpy(out, WIREADDR_MAGIC, 4);
    out[4] = WIREADDR_VERSION;
    out[5] = (uint8_t)(count - 1);
    out[6] = out[7] = 0;
    out += WIREADDR_HEADER;
    for (unsigned i = 0; i < count; i++) {
        uint32_t n = (uint32_t)lengths[i];
        for (int b = 0; b < 4; b++)
            *out++ = (uint8_t)(n >> (8 * b));
        memcpy(out, addrs[i], lengths[i]);
        out += lengths[i];
    }
}

int wireaddr_unpack(const uint8_t *p, size_t length, const uint8_t **addrs, size_t *lengths)
{
    if (p == NULL || length < WIREADDR_HEADER || memcmp(p, WIREADDR_MAGIC, 4) != 0 ||
        p[4] != WIREADDR_VERSION || p[5] > WIREADDR_MAX_LANES || p[6] != 0 || p[7] != 0)
        return -1;
    int count = 1 + p[5];
    size_t at = WIREADDR_HEADER;
    const uint8_t *found[1 + WIREADDR_MAX_LANES];
    size_t found_lengths[1 + WIREADDR_MAX_LANES];
    for (int i = 0; i < count; i++) {
        if (length - at < 4)
            return -1;
        size_t n = (size_t)p[at] | (size_t)p[at + 1] << 8 | (size_t)p[at + 2] << 16 |
                   (size_t)p[at + 3] << 24;
        at += 4;
        if (n == 0 || n > length - at)
            return -1;
        found[i] = p + at;
        found_lengths[i] = n;
        at += n;
    }
    /* Nothing may trail the last address. */
    if (at != length)
        return -1;
    memcpy(addrs, found, count * sizeof(*found));
    memcpy(lengths, found_lengths, count * sizeof(*found_lengths));
    return count;
}
