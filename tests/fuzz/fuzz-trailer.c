/*
 * fuzz-trailer — libFuzzer target for the checksum trailer of a DATA chunk
 * (daemon/base/checksum.c), the part of a peer's DATA message that b10d parses.
 *
 * The first 4 input bytes choose the chunk's length and 8 more the seed;
 * the rest is the message, cut to exactly checksum_message_bytes(length)
 * in a buffer of its own, as xfer-recv.c accepts only a message of that
 * length. checksum_trailer_get must read nothing outside it, and what it
 * lets through must hold: a trailer that says "sum" carries blocks' sums
 * whose sum is the chunk's, each of them readable; one that says "none"
 * carries a zero sum.
 *
 * With the top bit of byte 3 set the trailer is sealed here instead, over
 * the chunk's bytes as a daemon seals it, and then one byte of it (offset
 * and mask from the input) is flipped: a flip in the zero bytes before the
 * trailer is harmless; in a one-block chunk's sum it passes here and fails
 * the check of the bytes; any other makes the trailer damaged (B10_ERR_DATA_CORRUPT).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 12)
        return 0;
    uint32_t want = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
                    (uint32_t)(data[3] & 0x03) << 24;  /* up to 64 MiB: many blocks, few bytes */
    uint64_t seed = 0;
    memcpy(&seed, data + 4, 8);
    data += 12;
    size -= 12;
    /* A chunk the input cannot fill is as long as the input allows. */
    size_t len = want;
    while (len > 0 && checksum_message_bytes(len) > size)
        len = len > size ? size : len - 1;
    size_t msg_len = checksum_message_bytes(len);
    if (msg_len > size)
        return 0;
    uint8_t *msg = malloc(msg_len);
    if (msg == NULL)
        return 0;
    memcpy(msg, data, msg_len);

    uint64_t sum = 0;
    if (data[-9] & 0x80 && msg_len >= len + 16) {
        /* Sealed, then one byte flipped: where it lands decides the verdict. */
        uint32_t n = checksum_blocks(len);
        uint64_t *blocks = malloc(n * sizeof(*blocks));
        if (blocks == NULL) {
            free(msg);
            return 0;
        }
        checksum_block_sums(msg, len, seed, 0, n, blocks);
        uint64_t whole = checksum_combine(blocks, n, len, seed);
        checksum_trailer_put(msg, len, blocks, whole, true);
        free(blocks);
        size_t span = msg_len - len, at = len + (size_t)data[-8] % span;
        size_t trailer = checksum_trailer_at(len);
        msg[at] ^= data[-7] | 1;
        bool present = false;
        b10_status_t verdict = checksum_trailer_get(msg, len, seed, &sum, &present);
        bool ok;
        if (at < trailer)
            ok = verdict == B10_OK && present && sum == whole;  /* the zero bytes: not read */
        else if (len <= CHECKSUM_BLOCK && at < trailer + 8)
            ok = verdict == B10_OK && present && sum != whole;  /* one block's sum: the data check's */
        else
            ok = verdict == B10_ERR_DATA_CORRUPT;               /* table, sum of a table, flag */
        if (!ok)
            abort();
        free(msg);
        return 0;
    }
    bool present = false;
    b10_status_t got = checksum_trailer_get(msg, len, seed, &sum, &present);
    if (got != B10_OK && got != B10_ERR_DATA_CORRUPT)
        abort();
    if (got == B10_OK && !present && sum != 0)
        abort();
    if (got == B10_OK && present && len > CHECKSUM_BLOCK) {
        uint32_t n = checksum_blocks(len);
        uint64_t *blocks = malloc(n * sizeof(*blocks));
        if (blocks != NULL) {
            for (uint32_t i = 0; i < n; i++)
                blocks[i] = checksum_trailer_block(msg, len, i);
            if (checksum_combine(blocks, n, len, seed) != sum)
                abort();        /* a table that does not give the sum got through */
            free(blocks);
        }
    }
    free(msg);
    return 0;
}
