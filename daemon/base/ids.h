/*
 * ids.h — transfer ids and endpoint generations of one boot.
 *
 * Each is the boot's epoch (random per boot, never 0) in the high half and a
 * counter in the low half, so that no two boots of any daemon hand out the
 * same value and none repeats within a boot for 2^32 uses. An id or a
 * generation is retired with what used it, never handed out again: the
 * quarantine and the peers' replay windows rely on that.
 *
 * A transfer id's low half is its counter put through a permutation keyed
 * per boot, so that ids still never repeat but do not tell how many came
 * before: a rank sees its own transfers' ids, and consecutive ones would
 * count every other user's transfers in between and make the ids of theirs
 * easy to name. Generations stay in order: only daemons see them, and a
 * peer compares them.
 */
#ifndef B10D_IDS_H
#define B10D_IDS_H

#include <stdint.h>

/* Random words a boot's ids start from: the epoch's, and the key's two. */
#define IDS_SEED_WORDS 3

struct ids {
    uint64_t epoch;         /* 32 random bits, not 0: the high half of both */
    uint64_t key[2];        /* of the transfer ids' permutation, random per boot */
    uint64_t next_xfer;     /* counter half of transfer ids, before the permutation */
    uint64_t next_gen;      /* counter half of endpoint generations */
};

/* Start a boot's ids from random words (the epoch from seed[0]'s low 32 bits). */
void ids_init(struct ids *ids, const uint64_t seed[IDS_SEED_WORDS]);
uint64_t ids_new_xfer(struct ids *ids);
uint64_t ids_new_generation(struct ids *ids);

#endif
