/*
 * frame.h — length-prefixed frames on the client socket.
 *
 * A frame is a 4-byte little-endian payload length, then the payload (one
 * encoded protobuf message). The reader checks the length against its
 * maximum before it allocates anything, so a hostile length costs nothing.
 * Shared by libb10 and b10d; pure code, no I/O.
 */
#ifndef B10_FRAME_H
#define B10_FRAME_H

#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include <protobuf-c/protobuf-c.h>

#define FRAME_HEADER_BYTES 4
/*
 * A span on the wire, in a request or a peer message: u64 address, u64 length,
 * little-endian, packed (the client's b10_span_t, the daemon's spans tables).
 */
#define SPAN_BYTES 16
#define FRAME_MAX_DEFAULT  (64u << 20)   /* 64 MiB: a million spans each way, and room */
#define FRAME_MAX_LIMIT    (1u << 30)

enum frame_result {
    FRAME_MORE,       /* consumed everything given; the frame is not complete */
    FRAME_READY,      /* a frame is complete: take it with frame_reader_take() */
    FRAME_TOO_LARGE,  /* the announced length exceeds the maximum: drop the connection */
    FRAME_NO_MEMORY,
};

struct frame_reader {
    uint32_t max;                       /* largest payload accepted, bytes */
    uint8_t header[FRAME_HEADER_BYTES];
    size_t header_got;
    uint8_t *body;                      /* owned; NULL until the header is complete */
    uint32_t length;                    /* payload bytes announced */
    uint32_t got;                       /* payload bytes received */
};

void frame_reader_init(struct frame_reader *reader, uint32_t max);
/*
 * Feed n bytes. Sets *used_p to the bytes consumed, which is less than n
 * only when a frame completed (FRAME_READY): take it, then feed the rest.
 */
enum frame_result frame_reader_feed(struct frame_reader *reader, const uint8_t *data,
                                    size_t n, size_t *used_p);
/* Hand over the completed payload (caller frees) and start the next frame. */
uint8_t *frame_reader_take(struct frame_reader *reader, uint32_t *length_p);
void frame_reader_free(struct frame_reader *reader);

/* Encode msg as a frame: header and payload in one malloc'd buffer. */
int frame_encode(const ProtobufCMessage *msg, uint32_t max, uint8_t **frame_p,
                 size_t *length_p);

/*
 * Little-endian helpers for the packed span tables of the protocol: one
 * unaligned load or store each (a request's tables are millions of them).
 */
/*
 * A frame to write with sendmsg(): the header and the message's small parts
 * copied into one buffer, bytes fields of at least FRAME_IOV_REF_BYTES
 * pointed at where the caller keeps them (a request's span tables: 3.2 MB
 * for 100,000 spans, which frame_encode copied into a fresh buffer whose
 * pages faulted in at every request). The message must stay unchanged
 * until the frame is written.
 */
#define FRAME_IOV_MAX        8
#define FRAME_IOV_REF_BYTES  (64u << 10)

struct frame_iov {
    struct iovec iov[FRAME_IOV_MAX];
    int niov;
    size_t length;                      /* bytes in all: header and payload */
    uint8_t *small;                     /* owned: the copied parts */
};

/* 0, -EMSGSIZE when the payload exceeds max, -ENOMEM. */
int frame_encode_iov(const ProtobufCMessage *msg, uint32_t max, struct frame_iov *f);
void frame_iov_free(struct frame_iov *f);

static inline void frame_put_u64(uint8_t *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, sizeof(v));
}

static inline uint64_t frame_get_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return le64toh(v);
}

static inline void frame_put_u32(uint8_t *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, sizeof(v));
}

static inline uint32_t frame_get_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return le32toh(v);
}

#endif
