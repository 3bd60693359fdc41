/*
 * test-frame.c — proto/frame.c: length-prefixed frames on the client socket.
 *
 * Real protobuf messages go through frame_encode and come back out of the
 * reader however the bytes are cut: whole, one byte at a time, several
 * frames in one read. A hostile length is refused from the header alone.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "b10.pb-c.h"
#include "frame.h"

/* ---------------------------------------------------------------- messages */

static const uint8_t spans_a[32] = { 1, 2, 3, 4, 5, 6, 7, 8, 0x10, 0, 0, 0, 0, 0, 0, 0,
                                     9, 9, 9, 9, 0, 0, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 0 };
static const uint8_t spans_b[32] = { 0xff, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0,
                                     0xaa, 0, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 0 };

/* Frame a Hello (seq) and return the frame; length in *length_p. */
static uint8_t *frame_hello(uint64_t seq, const char *agent, size_t *length_p)
{
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;
    B10__Hello hello = B10__HELLO__INIT;
    uint8_t *frame = NULL;

    hello.version = 1;
    hello.agent_name = (char *)agent;
    msg.seq = seq;
    msg.body_case = B10__CLIENT_MSG__BODY_HELLO;
    msg.hello = &hello;
    assert_int_equal(frame_encode(&msg.base, FRAME_MAX_DEFAULT, &frame, length_p), 0);
    assert_non_null(frame);
    return frame;
}

/* Frame a SubmitXfer with binary span tables. */
static uint8_t *frame_submit(uint64_t seq, size_t *length_p)
{
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;
    B10__SubmitXfer submit = B10__SUBMIT_XFER__INIT;
    uint8_t *frame = NULL;

    submit.op = B10__OP__OP_WRITE;
    submit.remote_agent = (char *)"rank-7";
    submit.local_spans = (ProtobufCBinaryData){ sizeof(spans_a), (uint8_t *)spans_a };
    submit.remote_spans = (ProtobufCBinaryData){ sizeof(spans_b), (uint8_t *)spans_b };
    submit.deadline_ms = 2500;
    msg.seq = seq;
    msg.body_case = B10__CLIENT_MSG__BODY_SUBMIT;
    msg.submit = &submit;
    assert_int_equal(frame_encode(&msg.base, FRAME_MAX_DEFAULT, &frame, length_p), 0);
    return frame;
}

static void check_hello(const uint8_t *payload, uint32_t length, uint64_t seq, const char *agent)
{
    B10__ClientMsg *msg = b10__client_msg__unpack(NULL, length, payload);
    assert_non_null(msg);
    assert_int_equal(msg->seq, seq);
    assert_int_equal(msg->body_case, B10__CLIENT_MSG__BODY_HELLO);
    assert_int_equal(msg->hello->version, 1);
    assert_string_equal(msg->hello->agent_name, agent);
    b10__client_msg__free_unpacked(msg, NULL);
}

static void check_submit(const uint8_t *payload, uint32_t length, uint64_t seq)
{
    B10__ClientMsg *msg = b10__client_msg__unpack(NULL, length, payload);
    assert_non_null(msg);
    assert_int_equal(msg->seq, seq);
    assert_int_equal(msg->body_case, B10__CLIENT_MSG__BODY_SUBMIT);
    assert_int_equal(msg->submit->op, B10__OP__OP_WRITE);
    assert_string_equal(msg->submit->remote_agent, "rank-7");
    assert_int_equal(msg->submit->deadline_ms, 2500);
    assert_int_equal(msg->submit->local_spans.len, sizeof(spans_a));
    assert_memory_equal(msg->submit->local_spans.data, spans_a, sizeof(spans_a));
    assert_int_equal(msg->submit->remote_spans.len, sizeof(spans_b));
    assert_memory_equal(msg->submit->remote_spans.data, spans_b, sizeof(spans_b));
    b10__client_msg__free_unpacked(msg, NULL);
}

/* ---------------------------------------------------------------- tests */

static void test_encode_layout(void **state)
{
    size_t length;
    uint8_t *frame = frame_hello(42, "rank-0", &length);
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;
    B10__Hello hello = B10__HELLO__INIT;

    hello.version = 1;
    hello.agent_name = (char *)"rank-0";
    msg.seq = 42;
    msg.body_case = B10__CLIENT_MSG__BODY_HELLO;
    msg.hello = &hello;
    size_t packed = b10__client_msg__get_packed_size(&msg);
    uint8_t *direct = malloc(packed);
    assert_non_null(direct);
    b10__client_msg__pack(&msg, direct);

    /* A 4-byte little-endian length, then exactly the packed message. */
    assert_int_equal(length, FRAME_HEADER_BYTES + packed);
    assert_int_equal(frame_get_u32(frame), packed);
    assert_int_equal(frame[0], packed & 0xff);
    assert_int_equal(frame[3], 0);
    assert_memory_equal(frame + FRAME_HEADER_BYTES, direct, packed);
    free(direct);
    free(frame);
}

static void test_roundtrip_whole(void **state)
{
    struct frame_reader reader;
    size_t length, used = 0;
    uint32_t plen = 0;
    uint8_t *frame = frame_submit(0x1122334455667788u, &length);

    frame_reader_init(&reader, FRAME_MAX_DEFAULT);
    assert_int_equal(frame_reader_feed(&reader, frame, length, &used), FRAME_READY);
    assert_int_equal(used, length);
    uint8_t *payload = frame_reader_take(&reader, &plen);
    assert_non_null(payload);
    assert_int_equal(plen, length - FRAME_HEADER_BYTES);
    assert_memory_equal(payload, frame + FRAME_HEADER_BYTES, plen);
    check_submit(payload, plen, 0x1122334455667788u);
    free(payload);
    /* The reader starts the next frame clean. */
    assert_null(reader.body);
    assert_int_equal(reader.header_got, 0);
    frame_reader_free(&reader);
    free(frame);
}

static void test_byte_at_a_time(void **state)
{
    struct frame_reader reader;
    size_t length, used;
    uint32_t plen = 0;
    uint8_t *frame = frame_hello(7, "a-rather-longer-agent-name-for-this-test", &length);

    frame_reader_init(&reader, FRAME_MAX_DEFAULT);
    for (size_t i = 0; i < length; i++) {
        used = 99;
        enum frame_result r = frame_reader_feed(&reader, frame + i, 1, &used);
        assert_int_equal(used, 1);
        if (i + 1 < length)
            assert_int_equal(r, FRAME_MORE);
        else
            assert_int_equal(r, FRAME_READY);
    }
    uint8_t *payload = frame_reader_take(&reader, &plen);
    assert_int_equal(plen, length - FRAME_HEADER_BYTES);
    check_hello(payload, plen, 7, "a-rather-longer-agent-name-for-this-test");
    free(payload);
    frame_reader_free(&reader);
    free(frame);
}

static void test_several_frames_in_one_buffer(void **state)
{
    size_t l1, l2, l3, l4;
    uint8_t *f1 = frame_hello(1, "one", &l1);
    uint8_t *f2 = frame_submit(2, &l2);
    uint8_t *f3 = frame_hello(3, "three", &l3);
    uint8_t *f4 = frame_submit(4, &l4);
    const size_t partial = 5;   /* the 4th frame's header and one payload byte */
    size_t n = l1 + l2 + l3 + partial;
    uint8_t *buf = malloc(n);
    assert_non_null(buf);
    memcpy(buf, f1, l1);
    memcpy(buf + l1, f2, l2);
    memcpy(buf + l1 + l2, f3, l3);
    memcpy(buf + l1 + l2 + l3, f4, partial);

    struct frame_reader reader;
    size_t off = 0, used;
    uint32_t plen;
    uint8_t *payload;
    frame_reader_init(&reader, FRAME_MAX_DEFAULT);

    assert_int_equal(frame_reader_feed(&reader, buf + off, n - off, &used), FRAME_READY);
    assert_int_equal(used, l1);
    off += used;
    payload = frame_reader_take(&reader, &plen);
    check_hello(payload, plen, 1, "one");
    free(payload);

    assert_int_equal(frame_reader_feed(&reader, buf + off, n - off, &used), FRAME_READY);
    assert_int_equal(used, l2);
    off += used;
    payload = frame_reader_take(&reader, &plen);
    check_submit(payload, plen, 2);
    free(payload);

    assert_int_equal(frame_reader_feed(&reader, buf + off, n - off, &used), FRAME_READY);
    assert_int_equal(used, l3);
    off += used;
    payload = frame_reader_take(&reader, &plen);
    check_hello(payload, plen, 3, "three");
    free(payload);

    /* The partial frame is consumed and waits for its rest. */
    assert_int_equal(frame_reader_feed(&reader, buf + off, n - off, &used), FRAME_MORE);
    assert_int_equal(used, partial);
    assert_int_equal(frame_reader_feed(&reader, f4 + partial, l4 - partial, &used), FRAME_READY);
    assert_int_equal(used, l4 - partial);
    payload = frame_reader_take(&reader, &plen);
    check_submit(payload, plen, 4);
    free(payload);

    frame_reader_free(&reader);
    free(buf);
    free(f1);
    free(f2);
    free(f3);
    free(f4);
}

static void test_split_header(void **state)
{
    size_t length, used;
    uint32_t plen;
    uint8_t *frame = frame_hello(9, "split", &length);
    struct frame_reader reader;

    frame_reader_init(&reader, FRAME_MAX_DEFAULT);
    assert_int_equal(frame_reader_feed(&reader, frame, 3, &used), FRAME_MORE);
    assert_int_equal(used, 3);
    assert_null(reader.body);   /* nothing allocated before the length is known */
    assert_int_equal(frame_reader_feed(&reader, frame + 3, 0, &used), FRAME_MORE);
    assert_int_equal(used, 0);
    assert_int_equal(frame_reader_feed(&reader, frame + 3, length - 3, &used), FRAME_READY);
    assert_int_equal(used, length - 3);
    uint8_t *payload = frame_reader_take(&reader, &plen);
    check_hello(payload, plen, 9, "split");
    free(payload);
    frame_reader_free(&reader);
    free(frame);
}

static void test_too_large(void **state)
{
    struct frame_reader reader;
    uint8_t buf[FRAME_HEADER_BYTES + 8] = { 0 };
    size_t used;

    /* One byte over the maximum: refused from the header, nothing allocated. */
    frame_reader_init(&reader, 1000);
    frame_put_u32(buf, 1001);
    assert_int_equal(frame_reader_feed(&reader, buf, sizeof(buf), &used), FRAME_TOO_LARGE);
    assert_int_equal(used, FRAME_HEADER_BYTES);
    assert_null(reader.body);
    frame_reader_free(&reader);

    /* 4 GiB - 1 announced against the default: the same, never a 4 GiB malloc. */
    frame_reader_init(&reader, FRAME_MAX_DEFAULT);
    frame_put_u32(buf, UINT32_MAX);
    assert_int_equal(frame_reader_feed(&reader, buf, FRAME_HEADER_BYTES, &used), FRAME_TOO_LARGE);
    assert_int_equal(used, FRAME_HEADER_BYTES);
    assert_null(reader.body);
    frame_reader_free(&reader);

    /* Header arriving a byte at a time: refused when its last byte lands. */
    frame_reader_init(&reader, 1000);
    frame_put_u32(buf, 1u << 20);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(frame_reader_feed(&reader, buf + i, 1, &used), FRAME_MORE);
        assert_null(reader.body);
    }
    assert_int_equal(frame_reader_feed(&reader, buf + 3, 1, &used), FRAME_TOO_LARGE);
    assert_null(reader.body);
    frame_reader_free(&reader);

    /* Exactly the maximum is accepted. */
    uint8_t *big = calloc(1, FRAME_HEADER_BYTES + 1000);
    uint32_t plen;
    assert_non_null(big);
    frame_put_u32(big, 1000);
    big[FRAME_HEADER_BYTES + 999] = 0x5c;
    frame_reader_init(&reader, 1000);
    assert_int_equal(frame_reader_feed(&reader, big, FRAME_HEADER_BYTES + 1000, &used), FRAME_READY);
    uint8_t *payload = frame_reader_take(&reader, &plen);
    assert_int_equal(plen, 1000);
    assert_int_equal(payload[999], 0x5c);
    free(payload);
    free(big);
    frame_reader_free(&reader);
}

static void test_encode_over_max(void **state)
{
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;
    B10__Hello hello = B10__HELLO__INIT;
    uint8_t *frame = (uint8_t *)&msg;   /* must stay untouched */
    size_t length = 12345;

    hello.agent_name = (char *)"0123456789012345678901234567890123456789";
    msg.seq = 1;
    msg.body_case = B10__CLIENT_MSG__BODY_HELLO;
    msg.hello = &hello;
    size_t packed = b10__client_msg__get_packed_size(&msg);
    assert_int_equal(frame_encode(&msg.base, (uint32_t)packed - 1, &frame, &length), -EMSGSIZE);
    assert_ptr_equal(frame, (uint8_t *)&msg);
    assert_int_equal(length, 12345);
    assert_int_equal(frame_encode(&msg.base, (uint32_t)packed, &frame, &length), 0);
    assert_int_equal(length, FRAME_HEADER_BYTES + packed);
    free(frame);
}

/* The iovecs of frame_encode_iov, joined: they must be frame_encode's bytes exactly. */
static void assert_iov_is_frame(const ProtobufCMessage *msg)
{
    struct frame_iov f;
    uint8_t *want;
    size_t want_len;

    assert_int_equal(frame_encode(msg, FRAME_MAX_LIMIT, &want, &want_len), 0);
    assert_int_equal(frame_encode_iov(msg, FRAME_MAX_LIMIT, &f), 0);
    assert_int_equal(f.length, want_len);
    assert_true(f.niov >= 1 && f.niov <= FRAME_IOV_MAX);
    size_t at = 0;
    for (int i = 0; i < f.niov; i++) {
        assert_true(at + f.iov[i].iov_len <= want_len);
        assert_memory_equal(f.iov[i].iov_base, want + at, f.iov[i].iov_len);
        at += f.iov[i].iov_len;
    }
    assert_int_equal(at, want_len);
    frame_iov_free(&f);
    free(want);
}

/*
 * A submit's span tables go out where the caller keeps them, not copied;
 * the small fields around them are copied; more large fields than iovecs
 * are copied too, and the bytes are frame_encode's every time.
 */
static void test_encode_iov(void **state)
{
    size_t table = 100000 * SPAN_BYTES;
    uint8_t *local = malloc(table), *remote = malloc(table);
    assert_non_null(local);
    assert_non_null(remote);
    for (size_t i = 0; i < table; i++) {
        local[i] = (uint8_t)(i * 7);
        remote[i] = (uint8_t)(i * 13 + 1);
    }
    B10__ClientMsg msg = B10__CLIENT_MSG__INIT;
    B10__SubmitXfer sx = B10__SUBMIT_XFER__INIT;
    sx.op = B10__OP__OP_WRITE;
    sx.remote_agent = (char *)"decode-0";
    sx.local_spans = (ProtobufCBinaryData){ table, local };
    sx.remote_spans = (ProtobufCBinaryData){ table, remote };
    sx.deadline_ms = 5000;
    sx.sync_msg = (ProtobufCBinaryData){ 5, (uint8_t *)"hello" };
    msg.seq = 77;
    msg.body_case = B10__CLIENT_MSG__BODY_SUBMIT;
    msg.submit = &sx;
    assert_iov_is_frame(&msg.base);

    struct frame_iov f;
    assert_int_equal(frame_encode_iov(&msg.base, FRAME_MAX_LIMIT, &f), 0);
    int refs = 0;
    for (int i = 0; i < f.niov; i++)
        refs += f.iov[i].iov_base == local || f.iov[i].iov_base == remote;
    assert_int_equal(refs, 2);
    frame_iov_free(&f);

    /* Small only: one copied part. */
    sx.local_spans.len = sx.remote_spans.len = 32;
    assert_iov_is_frame(&msg.base);
    assert_int_equal(frame_encode_iov(&msg.base, FRAME_MAX_LIMIT, &f), 0);
    assert_int_equal(f.niov, 1);
    frame_iov_free(&f);

    /* Over the maximum: refused, nothing to free. */
    size_t packed = b10__client_msg__get_packed_size(&msg);
    assert_int_equal(frame_encode_iov(&msg.base, (uint32_t)packed - 1, &f), -EMSGSIZE);
    frame_iov_free(&f);

    /* Four large fields (name and sync message too): more than the iovecs, the last copied. */
    char *name = malloc(table + 1);
    assert_non_null(name);
    memset(name, 'n', table);
    name[table] = '\0';
    sx.remote_agent = name;
    sx.local_spans.len = sx.remote_spans.len = table;
    sx.sync_msg = (ProtobufCBinaryData){ table, remote };
    assert_iov_is_frame(&msg.base);
    assert_int_equal(frame_encode_iov(&msg.base, FRAME_MAX_LIMIT, &f), 0);
    assert_int_equal(f.niov, FRAME_IOV_MAX - 1);    /* name, local and remote referenced */
    frame_iov_free(&f);
    free(name);
    free(local);
    free(remote);
}

static void test_zero_length_frame(void **state)
{
    struct frame_reader reader;
    size_t used, l2;
    uint32_t plen = 99;
    uint8_t *second = frame_hello(5, "after-empty", &l2);
    uint8_t *buf = malloc(FRAME_HEADER_BYTES + l2);
    assert_non_null(buf);
    frame_put_u32(buf, 0);
    memcpy(buf + FRAME_HEADER_BYTES, second, l2);

    frame_reader_init(&reader, FRAME_MAX_DEFAULT);
    assert_int_equal(frame_reader_feed(&reader, buf, FRAME_HEADER_BYTES + l2, &used), FRAME_READY);
    assert_int_equal(used, FRAME_HEADER_BYTES);
    uint8_t *payload = frame_reader_take(&reader, &plen);
    assert_non_null(payload);   /* an empty payload still has a buffer */
    assert_int_equal(plen, 0);
    /* An empty payload is a valid, all-default ClientMsg. */
    B10__ClientMsg *msg = b10__client_msg__unpack(NULL, 0, payload);
    assert_non_null(msg);
    assert_int_equal(msg->seq, 0);
    assert_int_equal(msg->body_case, B10__CLIENT_MSG__BODY__NOT_SET);
    b10__client_msg__free_unpacked(msg, NULL);
    free(payload);

    /* The frame after it is read normally. */
    assert_int_equal(frame_reader_feed(&reader, buf + used, l2, &used), FRAME_READY);
    assert_int_equal(used, l2);
    payload = frame_reader_take(&reader, &plen);
    check_hello(payload, plen, 5, "after-empty");
    free(payload);

    /* An empty message encodes to a zero-length frame. */
    B10__ClientMsg empty = B10__CLIENT_MSG__INIT;
    uint8_t *frame;
    size_t length;
    assert_int_equal(frame_encode(&empty.base, FRAME_MAX_DEFAULT, &frame, &length), 0);
    assert_int_equal(length, FRAME_HEADER_BYTES);
    assert_int_equal(frame_get_u32(frame), 0);
    free(frame);

    frame_reader_free(&reader);
    free(second);
    free(buf);
}

static void test_free_mid_frame(void **state)
{
    struct frame_reader reader;
    size_t length, used;
    uint8_t *frame = frame_submit(3, &length);

    /* A connection dropped mid-frame: free releases the partial body (ASan checks). */
    frame_reader_init(&reader, FRAME_MAX_DEFAULT);
    assert_int_equal(frame_reader_feed(&reader, frame, length - 1, &used), FRAME_MORE);
    assert_non_null(reader.body);
    frame_reader_free(&reader);
    assert_null(reader.body);
    frame_reader_free(&reader);   /* twice is harmless */
    free(frame);
}

static void test_put_get_helpers(void **state)
{
    uint8_t b[8];

    frame_put_u64(b, UINT64_C(0x0102030405060708));
    const uint8_t le64[8] = { 8, 7, 6, 5, 4, 3, 2, 1 };
    assert_memory_equal(b, le64, 8);
    assert_int_equal(frame_get_u64(b), UINT64_C(0x0102030405060708));

    frame_put_u32(b, 0xa1b2c3d4u);
    const uint8_t le32[4] = { 0xd4, 0xc3, 0xb2, 0xa1 };
    assert_memory_equal(b, le32, 4);
    assert_int_equal(frame_get_u32(b), 0xa1b2c3d4u);

    const uint64_t v64[] = { 0, 1, 0x80, 0xff, UINT64_C(1) << 63, UINT64_MAX,
                             UINT64_C(0x8000000000000001), UINT64_C(0x00ff00ff00ff00ff) };
    for (size_t i = 0; i < sizeof(v64) / sizeof(v64[0]); i++) {
        frame_put_u64(b, v64[i]);
        assert_int_equal(frame_get_u64(b), v64[i]);
        assert_int_equal(b[7], (uint8_t)(v64[i] >> 56));
    }
    const uint32_t v32[] = { 0, 1, 0x80, 0x80000000u, UINT32_MAX, 0x00ff00ffu };
    for (size_t i = 0; i < sizeof(v32) / sizeof(v32[0]); i++) {
        frame_put_u32(b, v32[i]);
        assert_int_equal(frame_get_u32(b), v32[i]);
        assert_int_equal(b[3], (uint8_t)(v32[i] >> 24));
    }
    /* Unaligned access. */
    uint8_t wide[16] = { 0 };
    frame_put_u64(wide + 3, UINT64_C(0xfedcba9876543210));
    assert_int_equal(wide[3], 0x10);
    assert_int_equal(wide[10], 0xfe);
    assert_int_equal(frame_get_u64(wide + 3), UINT64_C(0xfedcba9876543210));
    frame_put_u32(wide + 1, 0x01020304u);
    assert_int_equal(frame_get_u32(wide + 1), 0x01020304u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_layout),
        cmocka_unit_test(test_roundtrip_whole),
        cmocka_unit_test(test_byte_at_a_time),
        cmocka_unit_test(test_several_frames_in_one_buffer),
        cmocka_unit_test(test_split_header),
        cmocka_unit_test(test_too_large),
        cmocka_unit_test(test_encode_over_max),
        cmocka_unit_test(test_encode_iov),
        cmocka_unit_test(test_zero_length_frame),
        cmocka_unit_test(test_free_mid_frame),
        cmocka_unit_test(test_put_get_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
