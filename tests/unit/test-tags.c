/*
 * test-tags.c — daemon/mem/tags.c: SipHash-2-4, tag derivation, and the registry
 * (open addressing with backward-shift deletion).
 *
 * The hash is held to the SipHash authors' reference vectors. The registry
 * is driven through clusters that wrap past the end of the table and then by
 * thousands of random operations against a plain reference model, comparing
 * every lookup after every step.
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

#include "tags.h"

/* ---------------------------------------------------------------- SipHash */

/*
 * SipHash-2-4 with the key 00 01 .. 0f over the messages "", 00, 00 01, ...,
 * 00 .. 3e: the 64-bit tags of the reference implementation's vectors.h
 * (vectors_sip64), each written least significant octet first.
 */
static const uint8_t vectors_sip64[64][8] = {
    { 0x31, 0x0e, 0x0e, 0xdd, 0x47, 0xdb, 0x6f, 0x72 },
    { 0xfd, 0x67, 0xdc, 0x93, 0xc5, 0x39, 0xf8, 0x74 },
    { 0x5a, 0x4f, 0xa9, 0xd9, 0x09, 0x80, 0x6c, 0x0d },
    { 0x2d, 0x7e, 0xfb, 0xd7, 0x96, 0x66, 0x67, 0x85 },
    { 0xb7, 0x87, 0x71, 0x27, 0xe0, 0x94, 0x27, 0xcf },
    { 0x8d, 0xa6, 0x99, 0xcd, 0x64, 0x55, 0x76, 0x18 },
    { 0xce, 0xe3, 0xfe, 0x58, 0x6e, 0x46, 0xc9, 0xcb },
    { 0x37, 0xd1, 0x01, 0x8b, 0xf5, 0x00, 0x02, 0xab },
    { 0x62, 0x24, 0x93, 0x9a, 0x79, 0xf5, 0xf5, 0x93 },
    { 0xb0, 0xe4, 0xa9, 0x0b, 0xdf, 0x82, 0x00, 0x9e },
    { 0xf3, 0xb9, 0xdd, 0x94, 0xc5, 0xbb, 0x5d, 0x7a },
    { 0xa7, 0xad, 0x6b, 0x22, 0x46, 0x2f, 0xb3, 0xf4 },
    { 0xfb, 0xe5, 0x0e, 0x86, 0xbc, 0x8f, 0x1e, 0x75 },
    { 0x90, 0x3d, 0x84, 0xc0, 0x27, 0x56, 0xea, 0x14 },
    { 0xee, 0xf2, 0x7a, 0x8e, 0x90, 0xca, 0x23, 0xf7 },
    { 0xe5, 0x45, 0xbe, 0x49, 0x61, 0xca, 0x29, 0xa1 },
    { 0xdb, 0x9b, 0xc2, 0x57, 0x7f, 0xcc, 0x2a, 0x3f },
    { 0x94, 0x47, 0xbe, 0x2c, 0xf5, 0xe9, 0x9a, 0x69 },
    { 0x9c, 0xd3, 0x8d, 0x96, 0xf0, 0xb3, 0xc1, 0x4b },
    { 0xbd, 0x61, 0x79, 0xa7, 0x1d, 0xc9, 0x6d, 0xbb },
    { 0x98, 0xee, 0xa2, 0x1a, 0xf2, 0x5c, 0xd6, 0xbe },
    { 0xc7, 0x67, 0x3b, 0x2e, 0xb0, 0xcb, 0xf2, 0xd0 },
    { 0x88, 0x3e, 0xa3, 0xe3, 0x95, 0x67, 0x53, 0x93 },
    { 0xc8, 0xce, 0x5c, 0xcd, 0x8c, 0x03, 0x0c, 0xa8 },
    { 0x94, 0xaf, 0x49, 0xf6, 0xc6, 0x50, 0xad, 0xb8 },
    { 0xea, 0xb8, 0x85, 0x8a, 0xde, 0x92, 0xe1, 0xbc },
    { 0xf3, 0x15, 0xbb, 0x5b, 0xb8, 0x35, 0xd8, 0x17 },
    { 0xad, 0xcf, 0x6b, 0x07, 0x63, 0x61, 0x2e, 0x2f },
    { 0xa5, 0xc9, 0x1d, 0xa7, 0xac, 0xaa, 0x4d, 0xde },
    { 0x71, 0x65, 0x95, 0x87, 0x66, 0x50, 0xa2, 0xa6 },
    { 0x28, 0xef, 0x49, 0x5c, 0x53, 0xa3, 0x87, 0xad },
    { 0x42, 0xc3, 0x41, 0xd8, 0xfa, 0x92, 0xd8, 0x32 },
    { 0xce, 0x7c, 0xf2, 0x72, 0x2f, 0x51, 0x27, 0x71 },
    { 0xe3, 0x78, 0x59, 0xf9, 0x46, 0x23, 0xf3, 0xa7 },
    { 0x38, 0x12, 0x05, 0xbb, 0x1a, 0xb0, 0xe0, 0x12 },
    { 0xae, 0x97, 0xa1, 0x0f, 0xd4, 0x34, 0xe0, 0x15 },
    { 0xb4, 0xa3, 0x15, 0x08, 0xbe, 0xff, 0x4d, 0x31 },
    { 0x81, 0x39, 0x62, 0x29, 0xf0, 0x90, 0x79, 0x02 },
    { 0x4d, 0x0c, 0xf4, 0x9e, 0xe5, 0xd4, 0xdc, 0xca },
    { 0x5c, 0x73, 0x33, 0x6a, 0x76, 0xd8, 0xbf, 0x9a },
    { 0xd0, 0xa7, 0x04, 0x53, 0x6b, 0xa9, 0x3e, 0x0e },
    { 0x92, 0x59, 0x58, 0xfc, 0xd6, 0x42, 0x0c, 0xad },
    { 0xa9, 0x15, 0xc2, 0x9b, 0xc8, 0x06, 0x73, 0x18 },
    { 0x95, 0x2b, 0x79, 0xf3, 0xbc, 0x0a, 0xa6, 0xd4 },
    { 0xf2, 0x1d, 0xf2, 0xe4, 0x1d, 0x45, 0x35, 0xf9 },
    { 0x87, 0x57, 0x75, 0x19, 0x04, 0x8f, 0x53, 0xa9 },
    { 0x10, 0xa5, 0x6c, 0xf5, 0xdf, 0xcd, 0x9a, 0xdb },
    { 0xeb, 0x75, 0x09, 0x5c, 0xcd, 0x98, 0x6c, 0xd0 },
    { 0x51, 0xa9, 0xcb, 0x9e, 0xcb, 0xa3, 0x12, 0xe6 },
    { 0x96, 0xaf, 0xad, 0xfc, 0x2c, 0xe6, 0x66, 0xc7 },
    { 0x72, 0xfe, 0x52, 0x97, 0x5a, 0x43, 0x64, 0xee },
    { 0x5a, 0x16, 0x45, 0xb2, 0x76, 0xd5, 0x92, 0xa1 },
    { 0xb2, 0x74, 0xcb, 0x8e, 0xbf, 0x87, 0x87, 0x0a },
    { 0x6f, 0x9b, 0xb4, 0x20, 0x3d, 0xe7, 0xb3, 0x81 },
    { 0xea, 0xec, 0xb2, 0xa3, 0x0b, 0x22, 0xa8, 0x7f },
    { 0x99, 0x24, 0xa4, 0x3c, 0xc1, 0x31, 0x57, 0x24 },
    { 0xbd, 0x83, 0x8d, 0x3a, 0xaf, 0xbf, 0x8d, 0xb7 },
    { 0x0b, 0x1a, 0x2a, 0x32, 0x65, 0xd5, 0x1a, 0xea },
    { 0x13, 0x50, 0x79, 0xa3, 0x23, 0x1c, 0xe6, 0x60 },
    { 0x93, 0x2b, 0x28, 0x46, 0xe4, 0xd7, 0x06, 0x66 },
    { 0xe1, 0x91, 0x5f, 0x5c, 0xb1, 0xec, 0xa4, 0x6c },
    { 0xf3, 0x25, 0x96, 0x5c, 0xa1, 0x6d, 0x62, 0x9f },
    { 0x57, 0x5f, 0xf2, 0x8e, 0x60, 0x38, 0x1b, 0xe5 },
    { 0x72, 0x45, 0x06, 0xeb, 0x4c, 0x32, 0x8a, 0x95 },
};

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void reference_key(uint8_t key[16])
{
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)i;
}

static void test_siphash_first_vectors(void **state)
{
    uint8_t key[16], msg[64];
    reference_key(key);
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)i;

    /* Spelled out: "", 00, 00 01, 00 01 02, and the paper's 15-byte example. */
    assert_int_equal(tags_siphash(key, msg, 0), UINT64_C(0x726fdb47dd0e0e31));
    assert_int_equal(tags_siphash(key, msg, 1), UINT64_C(0x74f839c593dc67fd));
    assert_int_equal(tags_siphash(key, msg, 2), UINT64_C(0x0d6c8009d9a94f5a));
    assert_int_equal(tags_siphash(key, msg, 3), UINT64_C(0x85676696d7fb7e2d));
    assert_int_equal(tags_siphash(key, msg, 15), UINT64_C(0xa129ca6149be45e5));
}

static void test_siphash_all_vectors(void **state)
{
    uint8_t key[16], msg[64], shifted[64 + 3];
    reference_key(key);
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)i;

    /* Every length 0..63: each tail length 0..7 with 0..7 full blocks. */
    for (size_t len = 0; len < 64; len++) {
        uint64_t want = le64(vectors_sip64[len]);
        uint64_t got = tags_siphash(key, msg, len);
        if (got != want)
            fail_msg("siphash of %zu bytes: %#018llx, want %#018llx", len,
                     (unsigned long long)got, (unsigned long long)want);
        /* The input need not be aligned. */
        memcpy(shifted + 3, msg, len);
        assert_int_equal(tags_siphash(key, shifted + 3, len), want);
    }
}

static void test_siphash_key_matters(void **state)
{
    uint8_t key[16], msg[16];
    reference_key(key);
    memset(msg, 0x5a, sizeof(msg));
    uint64_t base = tags_siphash(key, msg, sizeof(msg));

    for (int i = 0; i < 16; i++) {
        key[i] ^= 0x01;
        assert_int_not_equal(tags_siphash(key, msg, sizeof(msg)), base);
        key[i] ^= 0x01;
    }
    assert_int_equal(tags_siphash(key, msg, sizeof(msg)), base);
}

/* ---------------------------------------------------------------- derivation */

static const enum tag_kind all_kinds[] = {
    TAG_KIND_HELLO_ACK, TAG_KIND_CONTROL, TAG_KIND_READY,
    TAG_KIND_DATA,      TAG_KIND_RESULT,  TAG_KIND_CANCEL,
};
#define NKINDS (sizeof(all_kinds) / sizeof(all_kinds[0]))

static struct tag_link base_link(void)
{
    struct tag_link link = {
        .sender_id = UINT64_C(0x1111222233334444),
        .receiver_id = UINT64_C(0x5555666677778888),
        .gen = UINT64_C(0x00000abc00000001),
    };
    for (int i = 0; i < 16; i++)
        link.key[i] = (uint8_t)(0xa0 + i);
    return link;
}

static void test_derive_deterministic(void **state)
{
    struct tag_link a = base_link(), b = base_link();

    for (size_t k = 0; k < NKINDS; k++)
        for (uint32_t chunk = 0; chunk < 50; chunk++) {
            uint64_t t1 = tags_derive(&a, 77, chunk, all_kinds[k]);
            uint64_t t2 = tags_derive(&b, 77, chunk, all_kinds[k]);
            assert_int_equal(t1, t2);
            assert_int_equal(tags_derive(&a, 77, chunk, all_kinds[k]), t1);
        }
}

static void test_derive_every_field_matters(void **state)
{
    const struct tag_link base = base_link();
    const uint64_t xfer = UINT64_C(0xdeadbeef00000007);
    const uint32_t chunk = 3;

    for (size_t k = 0; k < NKINDS; k++) {
        enum tag_kind kind = all_kinds[k];
        uint64_t t = tags_derive(&base, xfer, chunk, kind);
        struct tag_link l;

        l = base;
        l.gen++;
        assert_int_not_equal(tags_derive(&l, xfer, chunk, kind), t);
        l = base;
        l.gen ^= UINT64_C(1) << 63;
        assert_int_not_equal(tags_derive(&l, xfer, chunk, kind), t);
        l = base;
        l.sender_id++;
        assert_int_not_equal(tags_derive(&l, xfer, chunk, kind), t);
        l = base;
        l.receiver_id++;
        assert_int_not_equal(tags_derive(&l, xfer, chunk, kind), t);
        /* Direction matters: the reverse link derives other tags. */
        l = base;
        l.sender_id = base.receiver_id;
        l.receiver_id = base.sender_id;
        assert_int_not_equal(tags_derive(&l, xfer, chunk, kind), t);
        for (int i = 0; i < 16; i++) {
            l = base;
            l.key[i] ^= 0x80;
            assert_int_not_equal(tags_derive(&l, xfer, chunk, kind), t);
        }
        assert_int_not_equal(tags_derive(&base, xfer + 1, chunk, kind), t);
        assert_int_not_equal(tags_derive(&base, xfer ^ (UINT64_C(1) << 40), chunk, kind), t);
        assert_int_not_equal(tags_derive(&base, xfer, chunk + 1, kind), t);
        assert_int_not_equal(tags_derive(&base, xfer, chunk | 0x80000000u, kind), t);
        for (size_t j = 0; j < NKINDS; j++)
            if (j != k)
                assert_int_not_equal(tags_derive(&base, xfer, chunk, all_kinds[j]), t);
    }
}

/* Compare function for qsort of uint64_t. */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_derive_distinct_over_a_transfer(void **state)
{
    /* Every tag of 4 transfers of 2000 chunks, all kinds: no two alike. */
    const struct tag_link link = base_link();
    const size_t n = 4 * 2000 * NKINDS;
    uint64_t *tags = malloc(n * sizeof(*tags));
    size_t i = 0;
    assert_non_null(tags);

    for (uint64_t x = 0; x < 4; x++)
        for (uint32_t c = 0; c < 2000; c++)
            for (size_t k = 0; k < NKINDS; k++)
                tags[i++] = tags_derive(&link, x, c, all_kinds[k]);
    qsort(tags, n, sizeof(*tags), cmp_u64);
    for (i = 1; i < n; i++)
        assert_int_not_equal(tags[i - 1], tags[i]);
    free(tags);
}

static void test_derive_control_bit(void **state)
{
    struct tag_link link = base_link();
    unsigned set[NKINDS] = { 0 }, total = 0;

    for (uint64_t x = 0; x < 300; x++) {
        link.gen = x * UINT64_C(0x9e3779b97f4a7c15);
        link.key[x % 16] ^= (uint8_t)x;
        for (uint32_t c = 0; c < 8; c++) {
            for (size_t k = 0; k < NKINDS; k++) {
                uint64_t t = tags_derive(&link, x, c, all_kinds[k]);
                assert_int_not_equal(t, 0);   /* 0 is the registry's empty slot */
                if (t & TAG_CLASS_CONTROL)
                    set[k]++;
            }
            total++;
        }
    }
    for (size_t k = 0; k < NKINDS; k++) {
        if (all_kinds[k] == TAG_KIND_CONTROL)
            assert_int_equal(set[k], total);
        else
            assert_int_equal(set[k], 0);
    }
    assert_true(TAG_HELLO & TAG_CLASS_CONTROL);
}

/* ---------------------------------------------------------------- registry */

/*
 * A tag whose home slot is home in any table of up to 2^20 slots: the home
 * is (tag ^ tag >> 32) & mask, and the high half here has its low 20 bits
 * clear, so the low half alone decides. k tells tags of one home apart.
 */
static uint64_t tag_at(uint32_t home, uint32_t k)
{
    return ((uint64_t)(k + 1) << 52) | home;
}

static int owners[4096];
#define OWNER(i) ((void *)&owners[(i)])

static void test_register_lookup_unregister(void **state)
{
    struct tags *tags = tags_create(8, 0);
    assert_non_null(tags);
    uint64_t a = 0x1234567890abcdefu, b = TAG_HELLO, c = 0xfffffffffffffffeu;

    assert_null(tags_lookup(tags, a));
    assert_false(tags_is_quarantined(tags, a));
    assert_int_equal(tags_register(tags, a, OWNER(1)), 0);
    assert_int_equal(tags_register(tags, b, OWNER(2)), 0);
    assert_int_equal(tags_register(tags, c, OWNER(3)), 0);
    assert_int_equal(tags_live(tags), 3);
    assert_int_equal(tags_quarantined(tags), 0);
    assert_ptr_equal(tags_lookup(tags, a), OWNER(1));
    assert_ptr_equal(tags_lookup(tags, b), OWNER(2));
    assert_ptr_equal(tags_lookup(tags, c), OWNER(3));
    assert_false(tags_is_quarantined(tags, a));

    tags_unregister(tags, b);
    assert_null(tags_lookup(tags, b));
    assert_int_equal(tags_live(tags), 2);
    assert_ptr_equal(tags_lookup(tags, a), OWNER(1));
    assert_ptr_equal(tags_lookup(tags, c), OWNER(3));
    /* Unregistering what is not there changes nothing. */
    tags_unregister(tags, b);
    tags_unregister(tags, 0x42);
    assert_int_equal(tags_live(tags), 2);
    /* A finished transfer's tag may be used again. */
    assert_int_equal(tags_register(tags, b, OWNER(4)), 0);
    assert_ptr_equal(tags_lookup(tags, b), OWNER(4));

    /* Tag 0 marks empty slots, and a live tag needs an owner. */
    assert_int_equal(tags_register(tags, 0, OWNER(5)), B10_ERR_INTERNAL);
    assert_int_equal(tags_register(tags, 77, NULL), B10_ERR_INTERNAL);
    assert_null(tags_lookup(tags, 77));
    assert_int_equal(tags_live(tags), 3);
    tags_destroy(tags);
    tags_destroy(NULL);
}

static void test_collision_with_live_tag(void **state)
{
    struct tags *tags = tags_create(8, 0);
    uint64_t t = tag_at(5, 0);

    assert_int_equal(tags_register(tags, t, OWNER(1)), 0);
    assert_int_equal(tags_register(tags, t, OWNER(2)), B10_ERR_TAG_COLLISION);
    assert_int_equal(tags_register(tags, t, OWNER(1)), B10_ERR_TAG_COLLISION);
    /* The first owner keeps it. */
    assert_ptr_equal(tags_lookup(tags, t), OWNER(1));
    assert_int_equal(tags_live(tags), 1);
    tags_destroy(tags);
}

static void test_collision_with_quarantined_tag(void **state)
{
    struct tags *tags = tags_create(8, 0);
    uint64_t t = tag_at(5, 0), u = tag_at(5, 1);

    assert_int_equal(tags_register(tags, t, OWNER(1)), 0);
    assert_int_equal(tags_register(tags, u, OWNER(2)), 0);
    tags_quarantine(tags, t, 1000, 0xb1);
    assert_null(tags_lookup(tags, t));
    assert_true(tags_is_quarantined(tags, t));
    assert_false(tags_is_quarantined(tags, u));
    /* Whose messages it carried: the quarantine's, never a live tag's owner. */
    assert_int_equal(tags_quarantined_from(tags, t), 0xb1);
    assert_int_equal(tags_quarantined_from(tags, u), 0);
    assert_int_equal(tags_quarantined_from(tags, tag_at(9, 0)), 0);
    assert_int_equal(tags_live(tags), 1);
    assert_int_equal(tags_quarantined(tags), 1);

    assert_int_equal(tags_register(tags, t, OWNER(3)), B10_ERR_TAG_COLLISION);
    /* Unregister is for live tags: a quarantined one stays out of circulation. */
    tags_unregister(tags, t);
    assert_true(tags_is_quarantined(tags, t));
    assert_int_equal(tags_register(tags, t, OWNER(3)), B10_ERR_TAG_COLLISION);
    /* Quarantining again does not count twice nor move the expiry, nor change whose it was. */
    tags_quarantine(tags, t, 5000, 0xc1);
    assert_int_equal(tags_quarantined(tags), 1);
    assert_int_equal(tags_quarantined_from(tags, t), 0xb1);
    assert_int_equal(tags_sweep(tags, 1000), 1);
    assert_false(tags_is_quarantined(tags, t));
    assert_int_equal(tags_register(tags, t, OWNER(3)), 0);
    assert_ptr_equal(tags_lookup(tags, t), OWNER(3));
    /* Quarantining an unknown tag registers nothing. */
    tags_quarantine(tags, tag_at(9, 0), 10, 0);
    assert_false(tags_is_quarantined(tags, tag_at(9, 0)));
    assert_int_equal(tags_quarantined(tags), 0);
    assert_ptr_equal(tags_lookup(tags, u), OWNER(2));
    tags_destroy(tags);
}

static void test_sweep_only_expired(void **state)
{
    struct tags *tags = tags_create(16, 0);
    uint64_t q[4] = { tag_at(3, 0), tag_at(3, 1), tag_at(4, 0), tag_at(30, 0) };
    uint64_t live[2] = { tag_at(3, 2), tag_at(4, 1) };
    uint64_t expires[4] = { 100, 200, 300, 300 };

    for (int i = 0; i < 4; i++)
        assert_int_equal(tags_register(tags, q[i], OWNER(i)), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(tags_register(tags, live[i], OWNER(10 + i)), 0);
    for (int i = 0; i < 4; i++)
        tags_quarantine(tags, q[i], expires[i], 0);
    assert_int_equal(tags_quarantined(tags), 4);
    assert_int_equal(tags_live(tags), 2);

    assert_int_equal(tags_sweep(tags, 99), 0);
    assert_int_equal(tags_quarantined(tags), 4);
    assert_int_equal(tags_sweep(tags, 100), 1);   /* expiry is inclusive */
    assert_false(tags_is_quarantined(tags, q[0]));
    assert_true(tags_is_quarantined(tags, q[1]));
    assert_int_equal(tags_sweep(tags, 299), 1);
    assert_false(tags_is_quarantined(tags, q[1]));
    assert_true(tags_is_quarantined(tags, q[2]));
    assert_true(tags_is_quarantined(tags, q[3]));
    assert_int_equal(tags_sweep(tags, UINT64_MAX), 2);
    assert_int_equal(tags_quarantined(tags), 0);
    for (int i = 0; i < 4; i++)
        assert_false(tags_is_quarantined(tags, q[i]));
    /* Live tags are never swept. */
    assert_int_equal(tags_live(tags), 2);
    assert_ptr_equal(tags_lookup(tags, live[0]), OWNER(10));
    assert_ptr_equal(tags_lookup(tags, live[1]), OWNER(11));
    assert_int_equal(tags_sweep(tags, UINT64_MAX), 0);
    tags_destroy(tags);
}

static void test_full_registry(void **state)
{
    /* A power-of-two capacity holds exactly that many tags, quarantined ones included. */
    struct tags *tags = tags_create(8, 0);
    for (uint32_t i = 0; i < 8; i++)
        assert_int_equal(tags_register(tags, tag_at(i * 3 % 16, i), OWNER(i)), 0);
    assert_int_equal(tags_register(tags, tag_at(1, 100), OWNER(100)), B10_ERR_BUSY);
    assert_null(tags_lookup(tags, tag_at(1, 100)));
    /* A duplicate is still a collision, not "full". */
    assert_int_equal(tags_register(tags, tag_at(0, 0), OWNER(100)), B10_ERR_TAG_COLLISION);
    tags_quarantine(tags, tag_at(0, 0), 50, 0);
    assert_int_equal(tags_register(tags, tag_at(1, 100), OWNER(100)), B10_ERR_BUSY);
    tags_unregister(tags, tag_at(3, 1));
    assert_int_equal(tags_register(tags, tag_at(1, 100), OWNER(100)), 0);
    assert_int_equal(tags_register(tags, tag_at(1, 101), OWNER(101)), B10_ERR_BUSY);
    assert_int_equal(tags_sweep(tags, 50), 1);
    assert_int_equal(tags_register(tags, tag_at(1, 101), OWNER(101)), 0);
    assert_int_equal(tags_live(tags), 8);
    for (uint32_t i = 0; i < 8; i++)
        if (i != 0 && i != 1)
            assert_ptr_equal(tags_lookup(tags, tag_at(i * 3 % 16, i)), OWNER(i));
    tags_destroy(tags);

    /* Any capacity holds at least what was asked for. */
    tags = tags_create(1000, 0);
    uint32_t n = 0;
    while (n < 100000 && tags_register(tags, UINT64_C(0x9e3779b97f4a7c15) * (n + 1), OWNER(1)) == 0)
        n++;
    assert_true(n >= 1000);
    assert_int_equal(tags_register(tags, 0x777, OWNER(1)), B10_ERR_BUSY);
    assert_int_equal(tags_live(tags), n);
    tags_destroy(tags);
}

/* A cluster that wraps from the last slots to the first, then unwound. */
static void test_wrapping_cluster(void **state)
{
    struct tags *tags = tags_create(8, 0);   /* 16 slots, mask 15 */
    const uint64_t t[] = {
        tag_at(14, 0), tag_at(14, 1), tag_at(14, 2), tag_at(15, 0), tag_at(0, 0),
        tag_at(1, 0), tag_at(15, 1),
    };
    const size_t n = sizeof(t) / sizeof(t[0]);

    for (size_t i = 0; i < n; i++)
        assert_int_equal(tags_register(tags, t[i], OWNER(i)), 0);
    /* Delete from the front of the cluster, one at a time, checking all after each. */
    for (size_t d = 0; d < n; d++) {
        tags_unregister(tags, t[d]);
        assert_null(tags_lookup(tags, t[d]));
        for (size_t i = d + 1; i < n; i++)
            assert_ptr_equal(tags_lookup(tags, t[i]), OWNER(i));
        assert_int_equal(tags_live(tags), n - d - 1);
    }

    /* Again, deleting from the middle and quarantining across the wrap, then sweeping. */
    for (size_t i = 0; i < n; i++)
        assert_int_equal(tags_register(tags, t[i], OWNER(i)), 0);
    tags_quarantine(tags, t[1], 10, 0);
    tags_quarantine(tags, t[4], 10, 0);
    tags_unregister(tags, t[3]);
    assert_int_equal(tags_sweep(tags, 10), 2);
    const size_t kept[] = { 0, 2, 5, 6 };
    for (size_t i = 0; i < 4; i++)
        assert_ptr_equal(tags_lookup(tags, t[kept[i]]), OWNER(kept[i]));
    for (size_t i = 0; i < n; i++)
        assert_false(tags_is_quarantined(tags, t[i]));
    assert_int_equal(tags_live(tags), 4);
    /* The freed tags can come back, and still collide with themselves. */
    assert_int_equal(tags_register(tags, t[4], OWNER(40)), 0);
    assert_int_equal(tags_register(tags, t[4], OWNER(41)), B10_ERR_TAG_COLLISION);
    assert_int_equal(tags_register(tags, t[6], OWNER(41)), B10_ERR_TAG_COLLISION);
    tags_destroy(tags);
}

/* ---------------------------------------------------------------- stress */

enum model_state { M_ABSENT, M_LIVE, M_QUARANTINED };

struct model_entry {
    uint64_t tag;
    enum model_state state;
    void *owner;
    uint64_t expires;
};

static void model_check(const struct tags *tags, const struct model_entry *m, size_t n,
                        unsigned step)
{
    uint32_t live = 0, quarantined = 0;

    for (size_t i = 0; i < n; i++) {
        void *want = m[i].state == M_LIVE ? m[i].owner : NULL;
        void *got = tags_lookup(tags, m[i].tag);
        if (got != want)
            fail_msg("step %u: lookup of tag %#llx gave %p, the model says %p", step,
                     (unsigned long long)m[i].tag, got, want);
        if (tags_is_quarantined(tags, m[i].tag) != (m[i].state == M_QUARANTINED))
            fail_msg("step %u: tag %#llx quarantined disagrees with the model", step,
                     (unsigned long long)m[i].tag);
        live += m[i].state == M_LIVE;
        quarantined += m[i].state == M_QUARANTINED;
    }
    assert_int_equal(tags_live(tags), live);
    assert_int_equal(tags_quarantined(tags), quarantined);
}

/*
 * Random register/unregister/quarantine/sweep against the model. The pool's
 * homes crowd a few slots around the end of the table, so clusters are long
 * and wrap to the start, and every delete shifts entries across the wrap.
 */
static void stress(uint64_t seed, uint32_t capacity, uint32_t slots, bool crowded,
                   unsigned steps, uint32_t first_slots)
{
    enum { POOL = 300 };
    static struct model_entry m[POOL];
    struct tags *tags = tags_create(capacity, first_slots);
    uint64_t now = 0;
    uint32_t count = 0;

    assert_non_null(tags);
    rng_state = seed * UINT64_C(0x9e3779b97f4a7c15) + 7;
    for (size_t i = 0; i < POOL; i++) {
        uint32_t home;
        if (crowded)
            home = (slots - 4 + (uint32_t)(rng_next() % 8)) % slots;
        else
            home = (uint32_t)(rng_next() % slots);
        m[i] = (struct model_entry){ tag_at(home, (uint32_t)i), M_ABSENT, OWNER(i), 0 };
        if (!crowded && i % 2 == 0)
            m[i].tag = rng_next() | 1;   /* any tag, control class included */
    }

    for (unsigned step = 0; step < steps; step++) {
        size_t i = rng_next() % POOL;
        struct model_entry *e = &m[i];
        switch (rng_next() % 8) {
        case 0: case 1: case 2: {
            void *owner = OWNER(POOL + rng_next() % 1000);
            b10_status_t want = e->state != M_ABSENT ? B10_ERR_TAG_COLLISION
                                : count >= capacity  ? B10_ERR_BUSY
                                                     : B10_OK;
            b10_status_t got = tags_register(tags, e->tag, owner);
            if (got != want)
                fail_msg("step %u: register of %#llx gave %s, the model says %s", step,
                         (unsigned long long)e->tag, b10_status_name(got), b10_status_name(want));
            if (got == B10_OK) {
                e->state = M_LIVE;
                e->owner = owner;
                count++;
            }
            break;
        }
        case 3: case 4:
            tags_unregister(tags, e->tag);
            if (e->state == M_LIVE) {
                e->state = M_ABSENT;
                count--;
            }
            break;
        case 5: case 6: {
            uint64_t expires = now + rng_next() % 50;
            tags_quarantine(tags, e->tag, expires, 0);
            if (e->state == M_LIVE) {
                e->state = M_QUARANTINED;
                e->expires = expires;
            }
            break;
        }
        default: {
            now += rng_next() % 20;
            uint32_t want = 0;
            for (size_t j = 0; j < POOL; j++)
                if (m[j].state == M_QUARANTINED && m[j].expires <= now) {
                    m[j].state = M_ABSENT;
                    want++;
                    count--;
                }
            uint32_t got = tags_sweep(tags, now);
            if (got != want)
                fail_msg("step %u: sweep at %llu dropped %u, the model says %u", step,
                         (unsigned long long)now, got, want);
            break;
        }
        }
        model_check(tags, m, POOL, step);
    }
    tags_destroy(tags);
}

static void test_stress_wrapping_clusters(void **state)
{
    /* capacity 64: 128 slots, and all 64 entries may pile up around slot 127/0. */
    for (uint64_t seed = 1; seed <= 6; seed++)
        stress(seed, 64, 128, true, 5000, 0);
    /* A table that is small against the pool: mostly full, always wrapping. */
    for (uint64_t seed = 100; seed <= 104; seed++)
        stress(seed, 8, 16, true, 4000, 0);
}

static void test_stress_spread(void **state)
{
    for (uint64_t seed = 200; seed <= 204; seed++)
        stress(seed, 128, 256, false, 5000, 0);
}

/* The same, with tables that start at 16 slots and grow while the model runs. */
static void test_stress_growing(void **state)
{
    for (uint64_t seed = 300; seed <= 305; seed++)
        stress(seed, 64, 128, true, 5000, 16);
    for (uint64_t seed = 400; seed <= 404; seed++)
        stress(seed, 128, 256, false, 5000, 16);
}

/*
 * A registry allowed 65,536 tags starts at 16 slots and doubles thirteen
 * times on the way: every tag, live or quarantined, is found after each
 * growth, and the limit is the one the full-size table would have.
 */
static void test_growth_keeps_every_tag(void **state)
{
    enum { CAP = 1 << 16 };
    /* More owners than owners[] holds: the registry only keeps the pointers. */
#define BIG_OWNER(i) ((void *)(uintptr_t)(8 * ((uintptr_t)(i) + 1)))
    struct tags *tags = tags_create(CAP, 16);
    uint64_t *t = malloc(CAP * sizeof(*t));

    assert_non_null(tags);
    assert_non_null(t);
    for (uint32_t i = 0; i < CAP; i++) {
        t[i] = (UINT64_C(0x9e3779b97f4a7c15) * (i + 1)) | 1;
        assert_int_equal(tags_register(tags, t[i], BIG_OWNER(i)), 0);
        if (i % 3 == 0)
            tags_quarantine(tags, t[i], i, 0);
        /* At each doubling, everything so far is still there. */
        if ((i & (i + 1)) == 0)
            for (uint32_t j = 0; j <= i; j++) {
                assert_int_equal(tags_is_quarantined(tags, t[j]), j % 3 == 0);
                if (j % 3 != 0)
                    assert_ptr_equal(tags_lookup(tags, t[j]), BIG_OWNER(j));
            }
    }
    assert_int_equal(tags_register(tags, 0x777, BIG_OWNER(1)), B10_ERR_BUSY);
    assert_int_equal(tags_register(tags, t[5], BIG_OWNER(1)), B10_ERR_TAG_COLLISION);
    assert_int_equal(tags_live(tags) + tags_quarantined(tags), CAP);
    /* Expired quarantine leaves; live tags stay where lookups find them. */
    uint32_t expired = 0;
    for (uint32_t i = 0; i < CAP; i += 3)
        expired += i < CAP / 2;
    assert_int_equal(tags_sweep(tags, CAP / 2 - 1), expired);
    for (uint32_t i = 1; i < CAP; i += 2)
        tags_unregister(tags, t[i]);
    for (uint32_t i = 0; i < CAP; i++) {
        bool live = i % 3 != 0 && i % 2 == 0;
        bool quarantined = i % 3 == 0 && i >= CAP / 2;
        assert_ptr_equal(tags_lookup(tags, t[i]), live ? BIG_OWNER(i) : NULL);
        assert_int_equal(tags_is_quarantined(tags, t[i]), quarantined);
        if (!live && !quarantined)
            assert_int_equal(tags_register(tags, t[i], BIG_OWNER(i)), 0);
    }
    assert_int_equal(tags_register(tags, 0x777, BIG_OWNER(1)), B10_ERR_BUSY);
    free(t);
    tags_destroy(tags);
#undef BIG_OWNER
}

/* calloc, with a switch that makes it fail (linked with -Wl,--wrap=calloc). */
void *__real_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size);
static bool calloc_fails;

void *__wrap_calloc(size_t n, size_t size)
{
    return calloc_fails ? NULL : __real_calloc(n, size);
}

/* A table that cannot grow refuses the tag that needed the room, and loses nothing. */
static void test_growth_without_memory(void **state)
{
    struct tags *tags = tags_create(1024, 16);
    assert_non_null(tags);
    for (uint32_t i = 0; i < 8; i++)
        assert_int_equal(tags_register(tags, tag_at(i, i), OWNER(i)), 0);
    tags_quarantine(tags, tag_at(0, 0), 10, 0);

    calloc_fails = true;
    assert_int_equal(tags_register(tags, tag_at(8, 8), OWNER(8)), B10_ERR_NO_MEMORY);
    calloc_fails = false;
    assert_int_equal(tags_live(tags), 7);
    assert_int_equal(tags_quarantined(tags), 1);
    assert_null(tags_lookup(tags, tag_at(8, 8)));
    assert_true(tags_is_quarantined(tags, tag_at(0, 0)));
    for (uint32_t i = 1; i < 8; i++)
        assert_ptr_equal(tags_lookup(tags, tag_at(i, i)), OWNER(i));

    /* With memory back, the same tag goes in and everything is still found. */
    assert_int_equal(tags_register(tags, tag_at(8, 8), OWNER(8)), 0);
    for (uint32_t i = 1; i <= 8; i++)
        assert_ptr_equal(tags_lookup(tags, tag_at(i, i)), OWNER(i));
    assert_int_equal(tags_sweep(tags, 10), 1);
    tags_destroy(tags);
}

static void test_status_words(void **state)
{
    assert_string_equal(tags_strerror(B10_ERR_TAG_COLLISION), "already registered");
    assert_string_equal(tags_strerror(B10_ERR_BUSY), "the tag registry is full");
    assert_string_equal(tags_strerror(B10_ERR_NO_MEMORY), "no memory to grow the tag registry");
    assert_string_equal(tags_strerror(B10_ERR_INTERNAL), "invalid tag");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_siphash_first_vectors),
        cmocka_unit_test(test_siphash_all_vectors),
        cmocka_unit_test(test_siphash_key_matters),
        cmocka_unit_test(test_derive_deterministic),
        cmocka_unit_test(test_derive_every_field_matters),
        cmocka_unit_test(test_derive_distinct_over_a_transfer),
        cmocka_unit_test(test_derive_control_bit),
        cmocka_unit_test(test_register_lookup_unregister),
        cmocka_unit_test(test_collision_with_live_tag),
        cmocka_unit_test(test_collision_with_quarantined_tag),
        cmocka_unit_test(test_sweep_only_expired),
        cmocka_unit_test(test_full_registry),
        cmocka_unit_test(test_wrapping_cluster),
        cmocka_unit_test(test_stress_wrapping_clusters),
        cmocka_unit_test(test_stress_spread),
        cmocka_unit_test(test_stress_growing),
        cmocka_unit_test(test_growth_keeps_every_tag),
        cmocka_unit_test(test_growth_without_memory),
        cmocka_unit_test(test_status_words),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
