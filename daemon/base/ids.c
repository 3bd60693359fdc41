/* ids.c — see ids.h. */
#include "ids.h"

void ids_init(struct ids *ids, uint64_t random_bits)
{
    *ids = (struct ids){ .epoch = random_bits & 0xffffffffu };
}

uint64_t ids_new_xfer(struct ids *ids)
{
    return (ids->epoch << 32) | (++ids->next_xfer & 0xffffffffu);
}

uint64_t ids_new_generation(struct ids *ids)
{
    return (ids->epoch << 32) | (++ids->next_gen & 0xffffffffu);
}
