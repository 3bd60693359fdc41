/*
 * fuzz-names — libFuzzer target for daemon/mem/names-file.c's decoder: the
 * file of names' claims a restarted daemon reads back from its runtime
 * folder, which another process of its user or a bad disk may have changed.
 *
 * The first byte of the input says how the rest is taken, so that the
 * fuzzer reaches past the checks a random file fails at once:
 *  - bit 0: the checksum at its end is made good first (a writer that sums
 *    its own bytes), so the records' checks are what refuse;
 *  - bit 1: the file's boot id is taken for this boot's;
 *  - bit 2: "now" is the file's own time of writing, else far after it.
 * Whatever decodes is put back into a table under a hold (its bounds, the
 * same name twice), then encoded again: that must decode to as many claims
 * as the table holds. Nothing may crash, leak or read out of bounds.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"
#include "names-file.h"
#include "names.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t fuzz_now;

static uint64_t fuzz_clock(void *arg)
{
    (void)arg;
    return fuzz_now;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* What the table holds, encoded and decoded again: every claim comes back. */
static void round_trip(struct names *n, const uint8_t boot[16])
{
    struct names_record *records = NULL;
    uint32_t count = 0;
    uint8_t *buf = NULL;
    size_t len = 0;
    char detail[256];

    if (names_file_encode(n, boot, fuzz_now, &buf, &len) != B10_OK)
        return;
    if (names_file_decode(buf, len, boot, fuzz_now, &records, &count, detail, sizeof(detail)) !=
            B10_OK || count != names_count(n))
        abort();
    free(records);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t boot[16] = { 0 };
    struct names_record *records = NULL;
    uint32_t count = 0, expired = 0;
    char detail[512] = "";

    if (size < 1 || size > NAMES_FILE_MAX + 1)
        return 0;
    uint8_t mode = data[0];
    size_t len = size - 1;
    uint8_t *buf = malloc(len ? len : 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data + 1, len);
    if ((mode & 1) && len >= NAMES_FILE_HEAD + NAMES_FILE_TAIL) {
        uint64_t sum = checksum(buf, len - NAMES_FILE_TAIL, 0x62313073656d616eull);
        for (int i = 0; i < 8; i++)
            buf[len - NAMES_FILE_TAIL + i] = (uint8_t)(sum >> (8 * i));
    }
    if ((mode & 2) && len >= 32)
        memcpy(boot, buf + 16, 16);
    fuzz_now = (mode & 4) && len >= 40 ? get64(buf + 32) : UINT64_MAX / 2;

    b10_status_t st = names_file_decode(buf, len, boot, fuzz_now, &records, &count, detail,
                                        sizeof(detail));
    if (st == B10_OK) {
        struct names *n = names_create();
        if (n == NULL)
            abort();
        names_set_clock(n, fuzz_clock, NULL);
        names_set_hold(n, 1 + (mode >> 3));
        st = names_file_restore(n, records, count, &expired, detail, sizeof(detail));
        if (st == B10_OK && names_count(n) + expired != count)
            abort();
        if (st != B10_OK && names_count(n) != 0)
            abort();
        round_trip(n, boot);
        names_destroy(n);
    } else if (records != NULL || (st != B10_ERR_NO_MEMORY && detail[0] == '\0')) {
        abort();                /* a refusal lists nothing, and says why */
    }
    free(records);
    free(buf);
    return 0;
}
