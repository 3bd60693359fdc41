/* frame.c — see frame.h. */
#include "frame.h"

#include <errno.h>
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
