/* frame.c — see frame.h. */
#include "frame.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

void frame_reader_init(struct frame_reader *reader, uint32_t max)
{
    memset(reader, 0, sizeof(*reader));
    reader->max = max;
}

enum frame_result frame_reader_feed(struct frame_reader *reader, const uint8_t *data,
                                    size_t n, size_t *used_p)
{
    size_t used = 0;

    while (reader->header_got < FRAME_HEADER_BYTES && used < n)
        reader->header[reader->header_got++] = data[used++];
    if (reader->header_got < FRAME_HEADER_BYTES) {
        *used_p = used;
        return FRAME_MORE;
    }
    if (reader->body == NULL) {
        reader->length = frame_get_u32(reader->header);
        if (reader->length > reader->max) {
            *used_p = used;
            return FRAME_TOO_LARGE;
        }
        /* One spare byte so that an empty payload still has a buffer. */
        reader->body = malloc((size_t)reader->length + 1);
        if (reader->body == NULL) {
            *used_p = used;
            return FRAME_NO_MEMORY;
        }
        reader->got = 0;
    }
    size_t want = reader->length - reader->got;
    size_t take = n - used < want ? n - used : want;
    memcpy(reader->body + reader->got, data + used, take);
    reader->got += (uint32_t)take;
    used += take;
    *used_p = used;
    return reader->got == reader->length ? FRAME_READY : FRAME_MORE;
}

uint8_t *frame_reader_take(struct frame_reader *reader, uint32_t *length_p)
{
    uint8_t *body = reader->body;

    *length_p = reader->length;
    reader->body = NULL;
    reader->header_got = 0;
    reader->length = 0;
    reader->got = 0;
    return body;
}

void frame_reader_free(struct frame_reader *reader)
{
    free(reader->body);
    reader->body = NULL;
    reader->header_got = 0;
}

int frame_encode(const ProtobufCMessage *msg, uint32_t max, uint8_t **frame_p,
                 size_t *length_p)
{
    size_t payload = protobuf_c_message_get_packed_size(msg);

    if (payload > max)
        return -EMSGSIZE;
    uint8_t *frame = malloc(FRAME_HEADER_BYTES + payload);
    if (frame == NULL)
        return -ENOMEM;
    frame_put_u32(frame, (uint32_t)payload);
    protobuf_c_message_pack(msg, frame + FRAME_HEADER_BYTES);
    *frame_p = frame;
    *length_p = FRAME_HEADER_BYTES + payload;
    return 0;
}

/*
 * protobuf-c's pack_to_buffer hands each bytes field's data to append()
 * as the caller's own pointer: large ones become iovecs of their own, the
 * rest is copied. Parts are kept as offsets into small until the end,
 * where small stops moving.
 */
struct frame_iov_buf {
    ProtobufCBuffer base;
    struct frame_iov *f;
    size_t small_len, small_cap;
    struct {
        const uint8_t *ref;             /* NULL: small[off .. off + len) */
        size_t off, len;
    } part[FRAME_IOV_MAX];
    int nparts;
    bool failed;
};

static void frame_iov_append(ProtobufCBuffer *buffer, size_t len, const uint8_t *data)
{
    struct frame_iov_buf *b = (struct frame_iov_buf *)buffer;
    if (b->failed || len == 0)
        return;
    /* The last part is kept for the copy that follows a reference. */
    if (len >= FRAME_IOV_REF_BYTES && b->nparts < FRAME_IOV_MAX - 1) {
        b->part[b->nparts].ref = data;
        b->part[b->nparts].len = len;
        b->nparts++;
        return;
    }
    if (b->small_len + len > b->small_cap) {
        size_t cap = b->small_cap * 2 > b->small_len + len ? b->small_cap * 2 : b->small_len + len;
        uint8_t *small = realloc(b->f->small, cap);
        if (small == NULL) {
            b->failed = true;
            return;
        }
        b->f->small = small;
        b->small_cap = cap;
    }
    memcpy(b->f->small + b->small_len, data, len);
    if (b->nparts > 0 && b->part[b->nparts - 1].ref == NULL) {
        b->part[b->nparts - 1].len += len;
    } else {
        b->part[b->nparts].ref = NULL;
        b->part[b->nparts].off = b->small_len;
        b->part[b->nparts].len = len;
        b->nparts++;
    }
    b->small_len += len;
}

int frame_encode_iov(const ProtobufCMessage *msg, uint32_t max, struct frame_iov *f)
{
    size_t payload = protobuf_c_message_get_packed_size(msg);

    memset(f, 0, sizeof(*f));
    if (payload > max)
        return -EMSGSIZE;
    struct frame_iov_buf b = { .base.append = frame_iov_append, .f = f };
    uint8_t header[FRAME_HEADER_BYTES];
    frame_put_u32(header, (uint32_t)payload);
    frame_iov_append(&b.base, sizeof(header), header);
    protobuf_c_message_pack_to_buffer(msg, &b.base);
    if (b.failed) {
        frame_iov_free(f);
        return -ENOMEM;
    }
    for (int i = 0; i < b.nparts; i++)
        f->iov[i] = (struct iovec){ .iov_base = b.part[i].ref != NULL ? (void *)b.part[i].ref
                                                                      : f->small + b.part[i].off,
                                    .iov_len = b.part[i].len };
    f->niov = b.nparts;
    f->length = FRAME_HEADER_BYTES + payload;
    return 0;
}

void frame_iov_free(struct frame_iov *f)
{
    free(f->small);
    f->small = NULL;
    f->niov = 0;
}
