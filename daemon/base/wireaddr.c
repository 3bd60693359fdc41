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

/* Where the doors begin, or 0 when anything about the address is malformed. */
static size_t wireaddr_walk(const uint8_t *p, size_t length, const uint8_t **addrs, size_t *lengths)
{
    if (p == NULL || length < WIREADDR_HEADER || memcmp(p, WIREADDR_MAGIC, 4) != 0 ||
        p[4] != WIREADDR_VERSION || p[5] > WIREADDR_MAX_LANES || p[6] > WIREADDR_MAX_DOORS ||
        p[7] != 0)
        return 0;
    int count = 1 + p[5];
    size_t at = WIREADDR_HEADER;
    const uint8_t *found[1 + WIREADDR_MAX_LANES];
    size_t found_lengths[1 + WIREADDR_MAX_LANES];
    for (int i = 0; i < count; i++) {
        if (length - at < 4)
            return 0;
        size_t n = (size_t)p[at] | (size_t)p[at + 1] << 8 | (size_t)p[at + 2] << 16 |
                   (size_t)p[at + 3] << 24;
        at += 4;
        if (n == 0 || n > length - at)
            return 0;
        found[i] = p + at;
        found_lengths[i] = n;
        at += n;
    }
    /* Nothing may trail the doors. */
    if (length - at != (size_t)p[6] * WIREADDR_DOOR_BYTES)
        return 0;
    for (unsigned i = 0; i < p[6]; i++) {
        const uint8_t *door = p + at + i * WIREADDR_DOOR_BYTES;
        if ((door[0] != 4 && door[0] != 6) || (door[17] == 0 && door[18] == 0))
            return 0;
        for (int b = 1 + (door[0] == 4 ? 4 : 16); b < 17; b++)
            if (door[b] != 0)
                return 0;
    }
    if (addrs != NULL) {
        memcpy(addrs, found, count * sizeof(*found));
        memcpy(lengths, found_lengths, count * sizeof(*found_lengths));
    }
    return at;
}

b10_status_t wireaddr_unpack(const uint8_t *p, size_t length, const uint8_t **addrs,
                             size_t *lengths, unsigned *count_p)
{
    if (wireaddr_walk(p, length, addrs, lengths) == 0)
        return B10_ERR_INVALID_ARG;
    *count_p = 1u + p[5];
    return B10_OK;
}

size_t wireaddr_add_doors(uint8_t *packed, size_t packed_length, const struct wireaddr_door *doors,
                          unsigned n)
{
    packed[6] = (uint8_t)n;
    for (unsigned i = 0; i < n; i++) {
        uint8_t *out = packed + packed_length + i * WIREADDR_DOOR_BYTES;
        memset(out, 0, WIREADDR_DOOR_BYTES);
        out[0] = doors[i].family;
        memcpy(out + 1, doors[i].addr, doors[i].family == 4 ? 4 : 16);
        out[17] = (uint8_t)doors[i].port;
        out[18] = (uint8_t)(doors[i].port >> 8);
    }
    return packed_length + n * WIREADDR_DOOR_BYTES;
}

int wireaddr_doors(const uint8_t *p, size_t length, struct wireaddr_door *doors)
{
    size_t at = wireaddr_walk(p, length, NULL, NULL);
    if (at == 0)
        return -1;
    for (unsigned i = 0; i < p[6]; i++) {
        const uint8_t *d = p + at + i * WIREADDR_DOOR_BYTES;
        memset(&doors[i], 0, sizeof(doors[i]));
        doors[i].family = d[0];
        memcpy(doors[i].addr, d + 1, 16);
        doors[i].port = (uint16_t)(d[17] | d[18] << 8);
    }
    return p[6];
}
