/*
 * test-wireaddr.c — daemon/base/wireaddr.c: the packed worker address a daemon
 * gives out, and the decoder a peer's copy of it goes through.
 *
 * One packing is spelled out byte by byte against the format in wireaddr.h.
 * Round trips of one and of 1 + WIREADDR_MAX_LANES addresses compare the
 * bytes and check that each pointer lies inside the packed buffer; the size
 * is held to what pack writes, every byte of it and not one past. Then every
 * way the format can be wrong, and every prefix of a valid packing, must be
 * refused with -1; the prefixes sit in buffers of exactly their size, so an
 * over-read shows under ASan. Last, random packings over many seeds round
 * trip, and random single-byte mutations of them never make unpack hand out
 * an address outside the buffer.
 *
 * The doors after the workers (a daemon's door.c listeners): spelled out,
 * round trips of none to WIREADDR_MAX_DOORS of both families, the workers
 * still found behind them, and every way a door section can be wrong
 * refused by both decoders, with their outputs untouched.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rng.h"

#include "wireaddr.h"

#define MAX_COUNT (1 + WIREADDR_MAX_LANES)
#define HEADER 8
/*
 * Output arrays for unpack in tests of malformed input: far more entries
 * than a valid address can have, so that a decoder that wrongly accepts a
 * lane count of 255 fails an assertion here instead of overrunning the stack.
 */
#define ROOMY 300
#define POISON 0xa5
#define SLACK 16

/* ---------------------------------------------------------------- helpers */

/* count addresses of the given lengths, address i filled with bytes derived from i. */
struct addrs {
    unsigned count;
    size_t lengths[ROOMY];
    uint8_t *bytes[ROOMY];
};

static void addrs_make(struct addrs *a, unsigned count, const size_t *lengths)
{
    assert_true(count <= ROOMY);
    a->count = count;
    for (unsigned i = 0; i < count; i++) {
        a->lengths[i] = lengths[i];
        a->bytes[i] = malloc(lengths[i] ? lengths[i] : 1);
        assert_non_null(a->bytes[i]);
        for (size_t j = 0; j < lengths[i]; j++)
            a->bytes[i][j] = (uint8_t)(j * 31 + i * 7 + 1);
    }
}

static void addrs_free(struct addrs *a)
{
    for (unsigned i = 0; i < a->count; i++)
        free(a->bytes[i]);
    a->count = 0;
}

/* Pack a into a fresh buffer of exactly wireaddr_size() bytes. */
static uint8_t *addrs_pack(const struct addrs *a, size_t *length_p)
{
    size_t n = wireaddr_size(a->count, a->lengths);
    uint8_t *p = malloc(n);
    assert_non_null(p);
    wireaddr_pack(p, a->count, (const void *const *)a->bytes, a->lengths);
    *length_p = n;
    return p;
}

/* A copy of p in a buffer of exactly n bytes (at least one, so malloc(0) is not asked). */
static uint8_t *dup_exact(const uint8_t *p, size_t n)
{
    uint8_t *q = malloc(n ? n : 1);
    assert_non_null(q);
    if (n > 0)
        memcpy(q, p, n);
    return q;
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int b = 0; b < 4; b++)
        p[b] = (uint8_t)(v >> (8 * b));
}

/*
 * What unpack returned for p (n bytes) must describe p: a count of 1 to
 * 1 + WIREADDR_MAX_LANES, non-empty addresses inside p, laid out in order
 * each after its 4-byte length, the last ending at the end of p.
 */
static void check_inside(const uint8_t *p, size_t n, unsigned count, const uint8_t *const *addrs,
                         const size_t *lengths, const char *what)
{
    if (count < 1 || count > MAX_COUNT)
        fail_msg("%s: unpack counted %u", what, count);
    size_t at = HEADER;
    for (unsigned i = 0; i < count; i++) {
        if (lengths[i] == 0)
            fail_msg("%s: address %u is empty", what, i);
        if (addrs[i] < p || addrs[i] > p + n || lengths[i] > (size_t)(p + n - addrs[i]))
            fail_msg("%s: address %u (%zu bytes at offset %td) is outside the %zu-byte buffer",
                     what, i, lengths[i], addrs[i] - p, n);
        if ((size_t)(addrs[i] - p) != at + 4)
            fail_msg("%s: address %u at offset %td, want %zu", what, i, addrs[i] - p, at + 4);
        if (get_le32(p + at) != lengths[i])
            fail_msg("%s: address %u is %zu bytes, its length field says %u", what, i,
                     lengths[i], get_le32(p + at));
        at += 4 + lengths[i];
    }
    if (at != n)
        fail_msg("%s: the addresses end at %zu of %zu bytes", what, at, n);
}

/* Unpack p and compare with a, byte for byte. */
static void check_round_trip(const uint8_t *p, size_t n, const struct addrs *a)
{
    const uint8_t *out[MAX_COUNT];
    size_t out_lengths[MAX_COUNT];
    unsigned count = 0;
    assert_int_equal(wireaddr_unpack(p, n, out, out_lengths, &count), B10_OK);
    assert_int_equal(count, a->count);
    check_inside(p, n, count, out, out_lengths, "round trip");
    for (unsigned i = 0; i < a->count; i++) {
        assert_int_equal(out_lengths[i], a->lengths[i]);
        assert_memory_equal(out[i], a->bytes[i], a->lengths[i]);
    }
}

/* unpack must refuse p (n bytes), read from a buffer of exactly n bytes. */
static void refuse(const uint8_t *p, size_t n, const char *what)
{
    const uint8_t *out[ROOMY];
    size_t out_lengths[ROOMY];
    uint8_t *q = dup_exact(p, n);
    unsigned count = 12345;
    b10_status_t st = wireaddr_unpack(q, n, out, out_lengths, &count);
    if (st != B10_ERR_INVALID_ARG)
        fail_msg("%s: unpack of %zu bytes returned %s, want B10_ERR_INVALID_ARG", what, n,
                 b10_status_name(st));
    assert_int_equal(count, 12345);     /* written only on success */
    free(q);
}

/* Three addresses (two lanes): a short one, a one-byte one, one whose length needs two bytes. */
static const size_t three_lengths[3] = { 5, 1, 260 };

/* ---------------------------------------------------------------- the format */

static void test_format_spelled_out(void **state)
{
    const uint8_t a0[3] = { 0xaa, 0xbb, 0xcc };
    const uint8_t a1[1] = { 0x42 };
    const void *addrs[2] = { a0, a1 };
    const size_t lengths[2] = { 3, 1 };
    const uint8_t want[] = {
        'b', '1', '0', 'w', 1, 1, 0, 0,
        3, 0, 0, 0, 0xaa, 0xbb, 0xcc,
        1, 0, 0, 0, 0x42,
    };
    uint8_t out[sizeof(want)];

    assert_int_equal(wireaddr_size(2, lengths), sizeof(want));
    wireaddr_pack(out, 2, addrs, lengths);
    assert_memory_equal(out, want, sizeof(want));

    /* The length is little-endian in all four bytes. */
    uint8_t *big = calloc(1, 0x01020304);
    assert_non_null(big);
    const void *big_addrs[1] = { big };
    const size_t big_length[1] = { 0x01020304 };
    size_t n = wireaddr_size(1, big_length);
    assert_int_equal(n, HEADER + 4 + 0x01020304);
    uint8_t *packed = malloc(n);
    assert_non_null(packed);
    wireaddr_pack(packed, 1, big_addrs, big_length);
    const uint8_t big_header[12] = { 'b', '1', '0', 'w', 1, 0, 0, 0, 0x04, 0x03, 0x02, 0x01 };
    assert_memory_equal(packed, big_header, sizeof(big_header));
    const uint8_t *out_addrs[MAX_COUNT];
    size_t out_lengths[MAX_COUNT];
    unsigned count = 0;
    assert_int_equal(wireaddr_unpack(packed, n, out_addrs, out_lengths, &count), B10_OK);
    assert_int_equal(count, 1);
    assert_ptr_equal(out_addrs[0], packed + 12);
    assert_int_equal(out_lengths[0], 0x01020304);
    free(packed);
    free(big);
}

/* ---------------------------------------------------------------- round trips */

static void test_round_trip_one(void **state)
{
    const size_t lengths[] = { 1, 2, 3, 4, 5, 255, 256, 300, 4096, 70000 };
    for (size_t k = 0; k < sizeof(lengths) / sizeof(lengths[0]); k++) {
        struct addrs a;
        size_t n;
        addrs_make(&a, 1, &lengths[k]);
        uint8_t *p = addrs_pack(&a, &n);
        assert_int_equal(n, HEADER + 4 + lengths[k]);
        assert_int_equal(p[5], 0);   /* no lanes */
        check_round_trip(p, n, &a);
        free(p);
        addrs_free(&a);
    }
}

static void test_round_trip_all_lanes(void **state)
{
    /* The loop worker's address and eight lanes', no two the same length. */
    const size_t lengths[MAX_COUNT] = { 173, 1, 2, 3, 4, 255, 256, 1000, 70000 };
    struct addrs a;
    size_t n;
    addrs_make(&a, MAX_COUNT, lengths);
    uint8_t *p = addrs_pack(&a, &n);
    assert_int_equal(p[5], WIREADDR_MAX_LANES);
    check_round_trip(p, n, &a);
    free(p);
    addrs_free(&a);

    /* And every count in between, the lengths rotated so each lane sees several. */
    for (unsigned count = 1; count <= MAX_COUNT; count++) {
        for (unsigned r = 0; r < MAX_COUNT; r++) {
            size_t rotated[MAX_COUNT];
            for (unsigned i = 0; i < count; i++)
                rotated[i] = lengths[(i + r) % MAX_COUNT];
            addrs_make(&a, count, rotated);
            p = addrs_pack(&a, &n);
            assert_int_equal(p[5], count - 1);
            check_round_trip(p, n, &a);
            free(p);
            addrs_free(&a);
        }
    }
}

/* wireaddr_size is what pack writes: every byte below it, and none past it. */
static void test_size_matches_pack(void **state)
{
    const size_t lengths[MAX_COUNT] = { 173, 1, 2, 3, 4, 255, 256, 1000, 7 };
    for (unsigned count = 1; count <= MAX_COUNT; count++) {
        struct addrs a;
        addrs_make(&a, count, lengths);
        size_t n = wireaddr_size(count, lengths);
        size_t want = HEADER;
        for (unsigned i = 0; i < count; i++)
            want += 4 + lengths[i];
        assert_int_equal(n, want);

        /* Packed over two different fillers, the first n bytes agree: all were written. */
        uint8_t *x = malloc(n + SLACK), *y = malloc(n + SLACK);
        assert_non_null(x);
        assert_non_null(y);
        memset(x, POISON, n + SLACK);
        memset(y, (uint8_t)~POISON, n + SLACK);
        wireaddr_pack(x, count, (const void *const *)a.bytes, lengths);
        wireaddr_pack(y, count, (const void *const *)a.bytes, lengths);
        assert_memory_equal(x, y, n);
        for (size_t i = n; i < n + SLACK; i++) {
            if (x[i] != POISON || y[i] != (uint8_t)~POISON)
                fail_msg("count %u: pack wrote byte %zu, past its size %zu", count, i, n);
        }
        free(x);
        free(y);
        addrs_free(&a);
    }
}

/* ---------------------------------------------------------------- malformed */

static void test_refuse_null_and_short(void **state)
{
    const uint8_t *out[ROOMY];
    size_t out_lengths[ROOMY];
    unsigned count;
    assert_int_equal(wireaddr_unpack(NULL, 0, out, out_lengths, &count), B10_ERR_INVALID_ARG);
    assert_int_equal(wireaddr_unpack(NULL, 64, out, out_lengths, &count), B10_ERR_INVALID_ARG);

    struct addrs a;
    size_t n;
    addrs_make(&a, 3, three_lengths);
    uint8_t *p = addrs_pack(&a, &n);
    for (size_t k = 0; k < HEADER; k++)
        refuse(p, k, "shorter than the header");
    /* The header alone says one address follows, and none does. */
    refuse(p, HEADER, "the header alone");
    free(p);
    addrs_free(&a);
}

static void test_refuse_bad_header(void **state)
{
    struct addrs a;
    size_t n;
    addrs_make(&a, 3, three_lengths);
    uint8_t *p = addrs_pack(&a, &n);
    check_round_trip(p, n, &a);

    /* Wrong magic: each byte changed, and the magic in another case. */
    for (int i = 0; i < 4; i++) {
        uint8_t *q = dup_exact(p, n);
        q[i] ^= 0x01;
        refuse(q, n, "wrong magic");
        q[i] ^= 0x01 ^ 0x20;
        refuse(q, n, "wrong magic");
        free(q);
    }
    /* Wrong version. */
    const uint8_t versions[] = { 0, 2, 3, 0x81, 0xff };
    for (size_t k = 0; k < sizeof(versions); k++) {
        uint8_t *q = dup_exact(p, n);
        q[4] = versions[k];
        refuse(q, n, "wrong version");
        free(q);
    }
    /* Nonzero reserved bytes, each alone and both. */
    const uint8_t reserved[][2] = { { 1, 0 }, { 0, 1 }, { 0x80, 0 }, { 0, 0x80 }, { 0xff, 0xff } };
    for (size_t k = 0; k < sizeof(reserved) / sizeof(reserved[0]); k++) {
        uint8_t *q = dup_exact(p, n);
        q[6] = reserved[k][0];
        q[7] = reserved[k][1];
        refuse(q, n, "nonzero reserved bytes");
        free(q);
    }
    /* A lane count that disagrees with the addresses that follow. */
    for (int lanes = 0; lanes <= 255; lanes++) {
        if (lanes == 2)
            continue;
        uint8_t *q = dup_exact(p, n);
        q[5] = (uint8_t)lanes;
        refuse(q, n, "lane count not matching the addresses");
        free(q);
    }
    free(p);
    addrs_free(&a);
}

/*
 * Too many lanes, with exactly that many addresses behind the header: the
 * count alone is what is wrong. pack writes count - 1 without checking, so
 * it builds these too.
 */
static void test_refuse_too_many_lanes(void **state)
{
    const unsigned counts[] = { 1 + 9, 1 + 10, 1 + 127, 1 + 255 };
    size_t lengths[ROOMY];
    for (size_t i = 0; i < ROOMY; i++)
        lengths[i] = 1 + i % 17;

    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        struct addrs a;
        size_t n;
        addrs_make(&a, counts[k], lengths);
        uint8_t *p = addrs_pack(&a, &n);
        assert_int_equal(p[5], counts[k] - 1);
        refuse(p, n, "more than WIREADDR_MAX_LANES lanes");
        free(p);
        addrs_free(&a);
    }
}

static void test_refuse_zero_length(void **state)
{
    /* An empty address first, in the middle, last: pack writes it, unpack refuses it. */
    for (unsigned which = 0; which < 3; which++) {
        size_t lengths[3] = { three_lengths[0], three_lengths[1], three_lengths[2] };
        lengths[which] = 0;
        struct addrs a;
        size_t n;
        addrs_make(&a, 3, lengths);
        uint8_t *p = addrs_pack(&a, &n);
        refuse(p, n, "a zero length");
        free(p);
        addrs_free(&a);
    }
    /* The only address, empty. */
    const uint8_t empty[12] = { 'b', '1', '0', 'w', 1, 0, 0, 0, 0, 0, 0, 0 };
    refuse(empty, sizeof(empty), "a lone zero length");
}

static void test_refuse_length_past_end(void **state)
{
    struct addrs a;
    size_t n;
    addrs_make(&a, 3, three_lengths);
    uint8_t *p = addrs_pack(&a, &n);

    /* Offsets of the three length fields. */
    size_t field[3];
    field[0] = HEADER;
    for (int i = 1; i < 3; i++)
        field[i] = field[i - 1] + 4 + three_lengths[i - 1];

    for (int i = 0; i < 3; i++) {
        size_t left = n - field[i] - 4;   /* bytes after this length field */
        const uint32_t bad[] = {
            (uint32_t)left + 1, (uint32_t)left + 2, (uint32_t)left + 4096,
            0x7fffffff, 0x80000000, 0xfffffff0, 0xfffffffc, 0xffffffff,
        };
        for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
            uint8_t *q = dup_exact(p, n);
            put_le32(q + field[i], bad[k]);
            refuse(q, n, "a length past the end");
            free(q);
        }
        /* One more than it is: the rest no longer lines up. */
        uint8_t *q = dup_exact(p, n);
        put_le32(q + field[i], (uint32_t)three_lengths[i] + 1);
        refuse(q, n, "a length one too long");
        free(q);
    }
    free(p);
    addrs_free(&a);
}

static void test_refuse_truncated_length_field(void **state)
{
    struct addrs a;
    size_t n;
    addrs_make(&a, 3, three_lengths);
    uint8_t *p = addrs_pack(&a, &n);

    /* Cut inside the second and third length fields: 0 to 3 of its 4 bytes left. */
    size_t field = HEADER;
    for (int i = 0; i < 3; i++) {
        for (size_t left = 0; left < 4; left++)
            refuse(p, field + left, "a truncated length field");
        field += 4 + three_lengths[i];
    }
    free(p);
    addrs_free(&a);
}

static void test_refuse_trailing_bytes(void **state)
{
    struct addrs a;
    size_t n;
    addrs_make(&a, 3, three_lengths);
    uint8_t *p = addrs_pack(&a, &n);

    uint8_t *longer = malloc(n + 64);
    assert_non_null(longer);
    memcpy(longer, p, n);
    /* Zeros, a stray byte, and a whole well-formed fourth address the count leaves out. */
    for (size_t extra = 1; extra <= 8; extra++) {
        memset(longer + n, 0, extra);
        refuse(longer, n + extra, "trailing zeros");
        memset(longer + n, 0xff, extra);
        refuse(longer, n + extra, "trailing bytes");
    }
    put_le32(longer + n, 3);
    memcpy(longer + n + 4, "abc", 3);
    refuse(longer, n + 7, "an address beyond the count");
    free(longer);
    free(p);
    addrs_free(&a);
}

/* Every prefix shorter than the whole is refused, in a buffer of exactly its size. */
static void test_refuse_every_truncation(void **state)
{
    const size_t one[1] = { 97 };
    const size_t all[MAX_COUNT] = { 173, 1, 2, 3, 4, 255, 256, 9, 5 };
    struct {
        unsigned count;
        const size_t *lengths;
    } cases[] = { { 1, one }, { 3, three_lengths }, { MAX_COUNT, all } };

    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct addrs a;
        size_t n;
        addrs_make(&a, cases[c].count, cases[c].lengths);
        uint8_t *p = addrs_pack(&a, &n);
        check_round_trip(p, n, &a);
        for (size_t k = 0; k < n; k++)
            refuse(p, k, "a truncated address");
        free(p);
        addrs_free(&a);
    }
}

/* ---------------------------------------------------------------- random */

static bool in_content(const size_t *content, const size_t *lengths, unsigned count, size_t at)
{
    for (unsigned i = 0; i < count; i++)
        if (at >= content[i] && at < content[i] + lengths[i])
            return true;
    return false;
}

/* Random packings round trip; random single-byte mutations never point outside. */
static void test_random(void **state)
{
    unsigned accepted = 0, refused = 0;

    for (uint64_t seed = 1; seed <= 300; seed++) {
        rng_seed(seed);
        unsigned count = 1 + (unsigned)(rng_next() % MAX_COUNT);
        size_t lengths[MAX_COUNT];
        for (unsigned i = 0; i < count; i++) {
            switch (rng_next() % 4) {
            case 0: lengths[i] = 1 + rng_next() % 4; break;           /* tiny */
            case 1: lengths[i] = 250 + rng_next() % 12; break;        /* around 256 */
            default: lengths[i] = 1 + rng_next() % 700; break;        /* a UCX address */
            }
        }
        struct addrs a;
        size_t n;
        addrs_make(&a, count, lengths);
        for (unsigned i = 0; i < count; i++)
            for (size_t j = 0; j < lengths[i]; j++)
                a.bytes[i][j] = (uint8_t)rng_next();
        uint8_t *p = addrs_pack(&a, &n);
        check_round_trip(p, n, &a);
        size_t content[MAX_COUNT];   /* where each address's bytes start */
        content[0] = HEADER + 4;
        for (unsigned i = 1; i < count; i++)
            content[i] = content[i - 1] + lengths[i - 1] + 4;

        /* Mutations: anywhere, and more often in the header and the length fields. */
        uint8_t *q = malloc(n);
        assert_non_null(q);
        for (int m = 0; m < 400; m++) {
            size_t at;
            switch (rng_next() % 3) {
            case 0: at = rng_next() % HEADER; break;
            case 1: {
                unsigned i = (unsigned)(rng_next() % count);
                at = HEADER + 4 * i + rng_next() % 4;
                for (unsigned k = 0; k < i; k++)
                    at += lengths[k];
                break;
            }
            default: at = rng_next() % n; break;
            }
            memcpy(q, p, n);
            if (rng_next() % 2)
                q[at] = (uint8_t)rng_next();
            else
                q[at] ^= (uint8_t)(1u << (rng_next() % 8));

            const uint8_t *out[ROOMY];
            size_t out_lengths[ROOMY];
            unsigned got = 0;
            b10_status_t st = wireaddr_unpack(q, n, out, out_lengths, &got);
            if (st == B10_OK) {
                check_inside(q, n, got, out, out_lengths, "a mutated address");
                accepted++;
            } else if (st == B10_ERR_INVALID_ARG) {
                refused++;
            } else {
                fail_msg("seed %llu: unpack of a mutated address returned %s",
                         (unsigned long long)seed, b10_status_name(st));
            }
            /*
             * A byte inside an address changes only that address: the
             * layout, and so every pointer, stays what it was.
             */
            if (in_content(content, lengths, count, at)) {
                if (st != B10_OK || got != count)
                    fail_msg("seed %llu: a changed address byte at %zu: unpack returned %s, "
                             "%u addresses", (unsigned long long)seed, at, b10_status_name(st), got);
                for (unsigned i = 0; i < count; i++) {
                    assert_ptr_equal(out[i], q + content[i]);
                    assert_int_equal(out_lengths[i], lengths[i]);
                }
            }
        }
        free(q);
        free(p);
        addrs_free(&a);
    }
    /* Both outcomes must have been seen, or the mutations tested little. */
    assert_true(accepted > 0);
    assert_true(refused > 0);
}

/* ---------------------------------------------------------------- doors */

static const struct wireaddr_door some_doors[WIREADDR_MAX_DOORS + 1] = {
    { 4, { 127, 0, 0, 1 }, 7001 },
    { 6, { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 }, 65535 },
    { 4, { 192, 0, 2, 9 }, 1 },
    { 6, { [15] = 1 }, 0x1234 },
    { 4, { 10, 0, 0, 2 }, 443 },
    { 6, { 0xfd, [7] = 0x77, [15] = 0xff }, 0x8001 },
    { 4, { 255, 255, 255, 255 }, 65535 },
    { 6, { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
           0xff, 0xff }, 2 },
    { 4, { 198, 51, 100, 1 }, 9 },      /* one more than a daemon may name */
};

/* The three addresses of three_lengths packed, and n of some_doors after them. */
static uint8_t *pack_doors(struct addrs *a, unsigned n, size_t *length_p)
{
    size_t plain;
    addrs_make(a, 3, three_lengths);
    uint8_t *p = addrs_pack(a, &plain);
    p = realloc(p, plain + n * WIREADDR_DOOR_BYTES);
    assert_non_null(p);
    *length_p = wireaddr_add_doors(p, plain, some_doors, n);
    assert_int_equal(*length_p, plain + n * WIREADDR_DOOR_BYTES);
    return p;
}

/* Both decoders refuse p (n bytes, from a buffer of exactly n), and write nothing. */
static void refuse_doors(const uint8_t *p, size_t n, const char *what)
{
    struct wireaddr_door doors[WIREADDR_MAX_DOORS + 8];
    uint8_t *q = dup_exact(p, n);
    memset(doors, POISON, sizeof(doors));
    int got = wireaddr_doors(q, n, doors);
    if (got != -1)
        fail_msg("%s: wireaddr_doors of %zu bytes returned %d, want -1", what, n, got);
    for (size_t i = 0; i < sizeof(doors); i++)
        if (((uint8_t *)doors)[i] != POISON)
            fail_msg("%s: wireaddr_doors wrote its output on a refusal", what);
    free(q);
    refuse(p, n, what);
}

static void test_doors_spelled_out(void **state)
{
    const uint8_t a0[1] = { 0x42 };
    const void *addrs[1] = { a0 };
    const size_t lengths[1] = { 1 };
    const struct wireaddr_door doors[2] = {
        { 4, { 192, 0, 2, 1 }, 0x1234 },
        { 6, { 0x20, 0x01, 0x0d, 0xb8, [15] = 0x0a }, 0xfe01 },
    };
    const uint8_t want[] = {
        'b', '1', '0', 'w', 1, 0, 2, 0,
        1, 0, 0, 0, 0x42,
        4, 192, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x34, 0x12,
        6, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a, 0x01, 0xfe,
    };
    uint8_t out[sizeof(want) + SLACK];

    memset(out, POISON, sizeof(out));
    wireaddr_pack(out, 1, addrs, lengths);
    assert_int_equal(wireaddr_add_doors(out, 13, doors, 2), sizeof(want));
    assert_memory_equal(out, want, sizeof(want));
    for (size_t i = sizeof(want); i < sizeof(out); i++)
        assert_int_equal(out[i], POISON);

    /* An IPv4 door's 12 bytes behind its address are written as zeros, whatever it held there. */
    struct wireaddr_door dirty = doors[0];
    memset(dirty.addr + 4, 0xee, 12);
    wireaddr_pack(out, 1, addrs, lengths);
    wireaddr_add_doors(out, 13, &dirty, 1);
    assert_memory_equal(out + 13, want + 13, WIREADDR_DOOR_BYTES);
}

static void test_doors_round_trip(void **state)
{
    for (unsigned n = 0; n <= WIREADDR_MAX_DOORS; n++) {
        struct addrs a;
        size_t len;
        uint8_t *p = pack_doors(&a, n, &len);
        uint8_t *q = dup_exact(p, len);

        struct wireaddr_door doors[WIREADDR_MAX_DOORS];
        assert_int_equal(wireaddr_doors(q, len, doors), n);
        for (unsigned i = 0; i < n; i++) {
            assert_int_equal(doors[i].family, some_doors[i].family);
            assert_memory_equal(doors[i].addr, some_doors[i].addr, 16);
            assert_int_equal(doors[i].port, some_doors[i].port);
        }

        /* The workers are where they were, and end where the doors begin. */
        const uint8_t *out[MAX_COUNT];
        size_t out_lengths[MAX_COUNT];
        unsigned count = 0;
        assert_int_equal(wireaddr_unpack(q, len, out, out_lengths, &count), B10_OK);
        assert_int_equal(count, 3);
        check_inside(q, len - n * WIREADDR_DOOR_BYTES, 3, out, out_lengths, "before the doors");
        for (unsigned i = 0; i < 3; i++)
            assert_memory_equal(out[i], a.bytes[i], a.lengths[i]);
        free(q);
        free(p);
        addrs_free(&a);
    }
}

static void test_doors_refused(void **state)
{
    struct addrs a;
    size_t len;
    uint8_t *p = pack_doors(&a, 2, &len);
    size_t at = len - 2 * WIREADDR_DOOR_BYTES;      /* the first door */

    /* A door count above the most, each door there: add_doors writes what it is given. */
    struct addrs more;
    size_t more_len;
    uint8_t *many = pack_doors(&more, WIREADDR_MAX_DOORS + 1, &more_len);
    assert_int_equal(many[6], WIREADDR_MAX_DOORS + 1);
    refuse_doors(many, more_len, "more than WIREADDR_MAX_DOORS doors");
    many[6] = 0xff;
    refuse_doors(many, more_len, "255 doors");
    free(many);
    addrs_free(&more);

    /* A door count that disagrees with the bytes: one more, one fewer. */
    uint8_t *q = dup_exact(p, len);
    q[6] = 3;
    refuse_doors(q, len, "a door count one above the doors");
    q[6] = 1;
    refuse_doors(q, len, "a door count one below the doors");
    free(q);

    /* A trailing byte (zero or not), and every length short of the whole. */
    q = malloc(len + 1);
    assert_non_null(q);
    memcpy(q, p, len);
    q[len] = 0;
    refuse_doors(q, len + 1, "a byte after the doors");
    q[len] = 4;
    refuse_doors(q, len + 1, "a byte after the doors");
    free(q);
    for (size_t n = at; n < len; n++)
        refuse_doors(p, n, "a door cut short");

    /* A family neither 4 nor 6, on either door. */
    const uint8_t families[] = { 0, 2, 5, 10, 0x44, 0xff };
    for (size_t f = 0; f < sizeof(families); f++) {
        for (unsigned d = 0; d < 2; d++) {
            q = dup_exact(p, len);
            q[at + d * WIREADDR_DOOR_BYTES] = families[f];
            refuse_doors(q, len, "a family neither 4 nor 6");
            free(q);
        }
    }
    /* Port 0. */
    for (unsigned d = 0; d < 2; d++) {
        q = dup_exact(p, len);
        q[at + d * WIREADDR_DOOR_BYTES + 17] = 0;
        q[at + d * WIREADDR_DOOR_BYTES + 18] = 0;
        refuse_doors(q, len, "port 0");
        free(q);
    }
    /* The first door is IPv4: each of the 12 bytes behind its address must be zero. */
    assert_int_equal(p[at], 4);
    for (size_t b = 5; b < 17; b++) {
        q = dup_exact(p, len);
        q[at + b] = 0x01;
        refuse_doors(q, len, "nonzero padding after an IPv4 address");
        free(q);
    }
    /* (The same bytes of an IPv6 door are its address: the round trips hold all 0xff.) */
    /* A door with only one of its port bytes set is a port. */
    struct wireaddr_door doors[WIREADDR_MAX_DOORS];
    q = dup_exact(p, len);
    q[at + 17] = 0;
    q[at + 18] = 1;
    assert_int_equal(wireaddr_doors(q, len, doors), 2);
    assert_int_equal(doors[0].port, 256);
    free(q);
    free(p);
    addrs_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_spelled_out),
        cmocka_unit_test(test_round_trip_one),
        cmocka_unit_test(test_round_trip_all_lanes),
        cmocka_unit_test(test_size_matches_pack),
        cmocka_unit_test(test_refuse_null_and_short),
        cmocka_unit_test(test_refuse_bad_header),
        cmocka_unit_test(test_refuse_too_many_lanes),
        cmocka_unit_test(test_refuse_zero_length),
        cmocka_unit_test(test_refuse_length_past_end),
        cmocka_unit_test(test_refuse_truncated_length_field),
        cmocka_unit_test(test_refuse_trailing_bytes),
        cmocka_unit_test(test_refuse_every_truncation),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_doors_spelled_out),
        cmocka_unit_test(test_doors_round_trip),
        cmocka_unit_test(test_doors_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
