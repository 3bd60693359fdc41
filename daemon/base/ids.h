/*
 * ids.h — transfer ids and endpoint generations of one boot.
 *
 * Each is the boot's epoch (random per boot) in the high half and a counter
 * in the low half, so that no two boots of any daemon hand out the same value
 * and none repeats within a boot for 2^32 uses. An id or a generation is
 * retired with what used it, never handed out again: the quarantine and the
 * peers' replay windows rely on that.
 */
#ifndef B10D_IDS_H
#define B10D_IDS_H

#include <stdint.h>

struct ids {
    uint64_t epoch;         /* random per boot, 32 bits: the high half of both */
    uint64_t next_xfer;     /* counter half of transfer ids */
    uint64_t next_gen;      /* counter half of endpoint generations */
};

/* Start a boot's ids from 32 random bits. */
void ids_init(struct ids *ids, uint64_t random_bits);
uint64_t ids_new_xfer(struct ids *ids);
uint64_t ids_new_generation(struct ids *ids);

#endif
