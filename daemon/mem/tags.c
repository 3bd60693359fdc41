/* tags.c — see tags.h. */
#include "tags.h"

#include <stdlib.h>
#include <string.h>

#include "auth.h"

/* libsodium's crypto_shorthash is SipHash-2-4 (auth.c holds the one call into libsodium). */
uint64_t tags_siphash(const uint8_t key[16], const void *data, size_t len)
{
    return auth_shorthash(key, data, len);
}

uint64_t tags_derive(const struct tag_link *link, uint64_t xfer_id, uint32_t chunk,
                     enum tag_kind kind)
{
    uint8_t msg[8 * 4 + 4 + 1];
    uint64_t words[4] = { link->sender_id, link->receiver_id, link->gen, xfer_id };

    for (int w = 0; w < 4; w++)
        for (int i = 0; i < 8; i++)
            msg[8 * w + i] = (uint8_t)(words[w] >> (8 * i));
    for (int i = 0; i < 4; i++)
        msg[32 + i] = (uint8_t)(chunk >> (8 * i));
    msg[36] = (uint8_t)kind;

    uint64_t h = tags_siphash(link->key, msg, sizeof(msg));
    if (kind == TAG_KIND_CONTROL)
        return h | TAG_CLASS_CONTROL;
    h &= ~TAG_CLASS_CONTROL;
    /* 0 marks an empty registry slot; a derived 0 is moved aside. */
    return h != 0 ? h : 1;
}

/*
 * The registry: open addressing with linear probing and backward-shift
 * deletion (no tombstones, so lookups stay short however long it runs).
 * Capacity is a power of two kept at least twice the entries.
 */
struct tag_entry {
    uint64_t tag;          /* 0: empty slot */
    union {
        void *owner;       /* live: the transfer or link */
        uint64_t from;     /* quarantined: the daemon whose messages it carried, 0: none */
    };
    /*
     * 0: live. Quarantined: when it may leave, plus one, so that a quarantine
     * until 0 is told from a live tag without a field more in every slot.
     */
    uint64_t leaves_ms;
};

struct tags {
    struct tag_entry *slots;
    uint32_t mask;
    uint32_t max_slots;    /* the table's final size */
    uint32_t limit;        /* most entries allowed: half of max_slots */
    uint32_t live;
    uint32_t quarantined;
};

struct tags *tags_create(uint32_t capacity, uint32_t first_slots)
{
    uint32_t max_slots = 16;
    while (max_slots / 2 < capacity && max_slots < (UINT32_C(1) << 30))
        max_slots <<= 1;
    uint32_t slots = 16;
    while (slots < (first_slots ? first_slots : TAGS_FIRST_SLOTS) && slots < max_slots)
        slots <<= 1;
    struct tags *tags = calloc(1, sizeof(*tags));
    if (tags == NULL)
        return NULL;
    tags->slots = calloc(slots, sizeof(*tags->slots));
    if (tags->slots == NULL) {
        free(tags);
        return NULL;
    }
    tags->mask = slots - 1;
    tags->max_slots = max_slots;
    tags->limit = max_slots / 2;
    return tags;
}

void tags_destroy(struct tags *tags)
{
    if (tags == NULL)
        return;
    free(tags->slots);
    free(tags);
}

static inline uint32_t tags_home(const struct tags *tags, uint64_t tag)
{
    /* Tags are already uniform hashes; fold the top half in for the control class. */
    return (uint32_t)(tag ^ (tag >> 32)) & tags->mask;
}

static struct tag_entry *tags_find(const struct tags *tags, uint64_t tag)
{
    for (uint32_t i = tags_home(tags, tag);; i = (i + 1) & tags->mask) {
        struct tag_entry *e = &tags->slots[i];
        if (e->tag == tag)
            return e;
        if (e->tag == 0)
            return NULL;
    }
}

static void tags_place(struct tags *tags, const struct tag_entry *e)
{
    uint32_t i = tags_home(tags, e->tag);
    while (tags->slots[i].tag != 0)
        i = (i + 1) & tags->mask;
    tags->slots[i] = *e;
}

/*
 * Double the table, placing every entry anew: entries stay at most half the
 * slots. The last doublings of a full-size registry move hundreds of
 * thousands of entries in one call (tens of milliseconds on the loop), once
 * in the daemon's life.
 */
static b10_status_t tags_grow(struct tags *tags)
{
    uint32_t old_slots = tags->mask + 1;
    struct tag_entry *old = tags->slots;
    struct tag_entry *slots = calloc((size_t)old_slots * 2, sizeof(*slots));
    if (slots == NULL)
        return B10_ERR_NO_MEMORY;
    tags->slots = slots;
    tags->mask = old_slots * 2 - 1;
    for (uint32_t i = 0; i < old_slots; i++)
        if (old[i].tag != 0)
            tags_place(tags, &old[i]);
    free(old);
    return B10_OK;
}

b10_status_t tags_register(struct tags *tags, uint64_t tag, void *owner)
{
    if (tag == 0 || owner == NULL)
        return B10_ERR_INTERNAL;
    if (tags_find(tags, tag) != NULL)
        return B10_ERR_TAG_COLLISION;
    uint32_t entries = tags->live + tags->quarantined;
    if (entries >= tags->limit)
        return B10_ERR_BUSY;
    if (entries + 1 > (tags->mask + 1) / 2 && tags->mask + 1 < tags->max_slots &&
        tags_grow(tags) != B10_OK)
        return B10_ERR_NO_MEMORY;
    tags_place(tags, &(struct tag_entry){ .tag = tag, .owner = owner });
    tags->live++;
    return B10_OK;
}

const char *tags_strerror(b10_status_t status)
{
    switch (status) {
    case B10_ERR_TAG_COLLISION: return "already registered";
    case B10_ERR_BUSY: return "the tag registry is full";
    case B10_ERR_NO_MEMORY: return "no memory to grow the tag registry";
    default: return "invalid tag";
    }
}

static void tags_delete(struct tags *tags, struct tag_entry *e)
{
    uint32_t hole = (uint32_t)(e - tags->slots);

    /* Backward shift: pull later entries of the cluster into the hole when their home allows. */
    for (uint32_t j = (hole + 1) & tags->mask; tags->slots[j].tag != 0; j = (j + 1) & tags->mask) {
        uint32_t home = tags_home(tags, tags->slots[j].tag);
        bool movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
        if (movable) {
            tags->slots[hole] = tags->slots[j];
            hole = j;
        }
    }
    tags->slots[hole] = (struct tag_entry){ .tag = 0 };
}

void tags_unregister(struct tags *tags, uint64_t tag)
{
    struct tag_entry *e = tags_find(tags, tag);
    if (e == NULL || e->leaves_ms != 0)
        return;
    tags->live--;
    tags_delete(tags, e);
}

void tags_quarantine(struct tags *tags, uint64_t tag, uint64_t expires_ms, uint64_t from)
{
    struct tag_entry *e = tags_find(tags, tag);
    if (e == NULL || e->leaves_ms != 0)
        return;
    e->from = from;
    e->leaves_ms = expires_ms < UINT64_MAX ? expires_ms + 1 : UINT64_MAX;
    tags->live--;
    tags->quarantined++;
}

void *tags_lookup(const struct tags *tags, uint64_t tag)
{
    struct tag_entry *e = tags_find(tags, tag);
    return e != NULL && e->leaves_ms == 0 ? e->owner : NULL;
}

bool tags_is_quarantined(const struct tags *tags, uint64_t tag)
{
    struct tag_entry *e = tags_find(tags, tag);
    return e != NULL && e->leaves_ms != 0;
}

uint64_t tags_quarantined_from(const struct tags *tags, uint64_t tag)
{
    struct tag_entry *e = tags_find(tags, tag);
    return e != NULL && e->leaves_ms != 0 ? e->from : 0;
}

uint32_t tags_sweep(struct tags *tags, uint64_t now_ms)
{
    uint32_t dropped = 0;

    if (tags->quarantined == 0)
        return 0;
    for (uint32_t i = 0; i <= tags->mask;) {
        struct tag_entry *e = &tags->slots[i];
        if (e->tag != 0 && e->leaves_ms != 0 && e->leaves_ms - 1 <= now_ms) {
            tags->quarantined--;
            dropped++;
            tags_delete(tags, e);
            continue;   /* the shift may have moved another entry into slot i */
        }
        i++;
    }
    return dropped;
}

uint32_t tags_live(const struct tags *tags)
{
    return tags->live;
}

uint32_t tags_quarantined(const struct tags *tags)
{
    return tags->quarantined;
}
