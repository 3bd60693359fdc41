/*
 * fuzz-agentdesc — libFuzzer target for the agent descriptor, the opaque
 * bytes a rank hands to other ranks and libb10/b10d decode on load.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "b10.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    B10__AgentDesc *d = b10__agent_desc__unpack(NULL, size, data);
    if (d == NULL)
        return 0;
    /* What session_on_load_agent reads. */
    (void)strnlen(d->name, 256);
    if (d->worker_address.len > 0)
        (void)d->worker_address.data[d->worker_address.len - 1];
    uint8_t buf[4096];
    if (b10__agent_desc__get_packed_size(d) <= sizeof(buf))
        b10__agent_desc__pack(d, buf);
    b10__agent_desc__free_unpacked(d, NULL);
    return 0;
}
