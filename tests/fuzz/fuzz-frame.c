/*
 * fuzz-frame — libFuzzer target for the client socket's decoders: the
 * frame reader (proto/frame.c) fed in pieces of fuzzer-chosen sizes, and
 * every completed payload decoded as the daemon decodes a ClientMsg (and as
 * libb10 decodes a DaemonMsg), then checked the way session.c checks it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "b10.pb-c.h"
#include "frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_client_msg(const uint8_t *buf, size_t len)
{
    B10__ClientMsg *m = b10__client_msg__unpack(NULL, len, buf);
    if (m == NULL)
        return;
    /* What session_on_frame reads of each body. */
    switch (m->body_case) {
    case B10__CLIENT_MSG__BODY_HELLO:
        (void)strnlen(m->hello->agent_name, 256);
        break;
    case B10__CLIENT_MSG__BODY_REGISTER_MEM:
        (void)(m->register_mem->addr + m->register_mem->length);
        break;
    case B10__CLIENT_MSG__BODY_LOAD_AGENT: {
        B10__AgentDesc *d = b10__agent_desc__unpack(NULL, m->load_agent->desc.len,
                                                    m->load_agent->desc.data);
        if (d != NULL)
            b10__agent_desc__free_unpacked(d, NULL);
        break;
    }
    case B10__CLIENT_MSG__BODY_SUBMIT: {
        const B10__SubmitXfer *s = m->submit;
        uint64_t sum = 0;
        for (size_t i = 0; i + 16 <= s->local_spans.len; i += 16)
            sum += frame_get_u64(s->local_spans.data + i + 8);
        (void)sum;
        break;
    }
    default:
        break;
    }
    b10__client_msg__free_unpacked(m, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct frame_reader rd;

    if (size < 1)
        return 0;
    /* The first byte picks the piece size, so that frames straddle reads. */
    size_t piece = 1 + data[0] % 64;
    data++;
    size--;
    frame_reader_init(&rd, 1u << 16);
    size_t off = 0;
    while (off < size) {
        size_t n = size - off < piece ? size - off : piece, used;
        enum frame_result r = frame_reader_feed(&rd, data + off, n, &used);
        if (used > n)
            abort();
        off += used;
        if (r == FRAME_READY) {
            uint32_t len;
            uint8_t *body = frame_reader_take(&rd, &len);
            fuzz_client_msg(body, len);
            B10__DaemonMsg *dm = b10__daemon_msg__unpack(NULL, len, body);
            if (dm != NULL)
                b10__daemon_msg__free_unpacked(dm, NULL);
            free(body);
        } else if (r != FRAME_MORE) {
            break;   /* the daemon drops the connection here */
        } else if (used != n) {
            abort();   /* FRAME_MORE consumes everything it was given */
        }
    }
    frame_reader_free(&rd);
    return 0;
}
