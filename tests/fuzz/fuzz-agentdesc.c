/*
 * fuzz-agentdesc — libFuzzer target for the agent descriptor, the opaque
 * bytes a rank hands to other ranks and libb10/b10d decode on load.
 *
 * Past the protobuf decode, the descriptor's worker_address goes through
 * wireaddr_unpack as when the daemon meets that peer (wire_ep_create);
 * whenever it is accepted, every worker address it hands out must be
 * non-empty and lie inside worker_address, or the target aborts.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "b10.pb-c.h"
#include "wireaddr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What wire_ep_create reads: each worker address, bounded by the packed one. */
static void check_worker_address(const ProtobufCBinaryData *packed)
{
    const uint8_t *addrs[1 + WIREADDR_MAX_LANES];
    size_t lengths[1 + WIREADDR_MAX_LANES];
    unsigned count;
    if (wireaddr_unpack(packed->data, packed->len, addrs, lengths, &count) != B10_OK)
        return;
    if (count > 1 + WIREADDR_MAX_LANES)
        abort();
    const uint8_t *begin = packed->data, *end = packed->data + packed->len;
    uint8_t sum = 0;
    for (unsigned i = 0; i < count; i++) {
        if (lengths[i] == 0 || addrs[i] < begin || addrs[i] >= end ||
            lengths[i] > (size_t)(end - addrs[i]))
            abort();
        /* Touch both ends, so ASan sees any read past worker_address too. */
        sum ^= addrs[i][0] ^ addrs[i][lengths[i] - 1];
    }
    (void)sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    B10__AgentDesc *d = b10__agent_desc__unpack(NULL, size, data);
    if (d == NULL)
        return 0;
    /* What session_on_load_agent reads. */
    (void)strnlen(d->name, 256);
    if (d->worker_address.len > 0)
        (void)d->worker_address.data[d->worker_address.len - 1];
    check_worker_address(&d->worker_address);
    uint8_t buf[4096];
    if (b10__agent_desc__get_packed_size(d) <= sizeof(buf))
        b10__agent_desc__pack(d, buf);
    b10__agent_desc__free_unpacked(d, NULL);
    return 0;
}
