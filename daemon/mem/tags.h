/*
 * tags.h — UCX tags of the peer protocol, and the registry that keeps two
 * receives from ever sharing one.
 *
 * A tag is a keyed 64-bit hash (SipHash-2-4) over (pair domain, endpoint
 * generation, transfer id, chunk index, kind). The key is derived for each
 * link from the cluster key and both daemons' fresh nonces (auth.h) and is
 * never sent, so both ends derive the same tags and nothing outside the
 * link can predict them. Bit 63 splits the space: set for the control class (HELLO and
 * CONTROL, which the receiver probes for), clear for everything else.
 *
 * Every tag is registered before a receive is posted for it. A tag already
 * present — live, or quarantined after a failure — is a collision: the
 * transfer that asked fails with B10_ERR_TAG_COLLISION.
 */
#ifndef B10D_TAGS_H
#define B10D_TAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "b10/b10.h"
#include "auth.h"   /* struct tag_link: a link's identity and tag key */
#include "wire.h"   /* TAG_CLASS_CONTROL: the class the wire probes for */

/* HELLO and HEARTBEAT are the tags known before, or without, a link. */
#define TAG_HELLO (TAG_CLASS_CONTROL | UINT64_C(0x6231306468656c6f))       /* "b10dhelo" */
#define TAG_HEARTBEAT (TAG_CLASS_CONTROL | UINT64_C(0x6231306462656174))   /* "b10dbeat" */

enum tag_kind {
    TAG_KIND_HELLO_ACK = 1,
    TAG_KIND_CONTROL,
    TAG_KIND_READY,
    TAG_KIND_DATA,
    TAG_KIND_RESULT,
    TAG_KIND_CANCEL,
};

uint64_t tags_derive(const struct tag_link *link, uint64_t xfer_id, uint32_t chunk,
                     enum tag_kind kind);

/* SipHash-2-4 of len bytes under a 16-byte key (libsodium's crypto_shorthash). */
uint64_t tags_siphash(const uint8_t key[16], const void *data, size_t len);

struct tags;

/*
 * A registry for at least capacity tags. Its table starts at first_slots
 * (0: TAGS_FIRST_SLOTS) and doubles as entries come, up to the size that
 * capacity needs: a daemon allowed a million tags that holds a few thousand
 * touches a few pages, not the whole table (48 MiB of first-touch faults,
 * several microseconds a tag, when one transfer registers 640).
 */
#define TAGS_FIRST_SLOTS 4096u
struct tags *tags_create(uint32_t capacity, uint32_t first_slots);
void tags_destroy(struct tags *tags);

/*
 * Register tag as live, owned by owner. B10_OK; B10_ERR_TAG_COLLISION when
 * it is present (live or quarantined); B10_ERR_BUSY when the registry is
 * full; B10_ERR_NO_MEMORY when its table could not grow; B10_ERR_INTERNAL
 * for tag 0 or no owner (the caller's bug). What each means for the
 * transfer that asked is its own status.
 */
b10_status_t tags_register(struct tags *tags, uint64_t tag, void *owner);
/* A tags_register failure in words, for the log and a transfer's detail. */
const char *tags_strerror(b10_status_t status);
/*
 * The status of a tags_register failure: the status itself. Kept only for
 * daemon/link/peer-hello.c, which still calls it; it goes once that file
 * uses tags_register's status as it is.
 */
static inline b10_status_t tags_status(b10_status_t status)
{
    return status;
}
/* Forget a live tag (its transfer finished cleanly). */
void tags_unregister(struct tags *tags, uint64_t tag);
/*
 * Keep tag out of circulation until expires_ms (a failed transfer's tags).
 * from: the remote daemon (its id) whose messages the tag carried, 0 for
 * none, so that what still arrives on it can be put down to that daemon.
 */
void tags_quarantine(struct tags *tags, uint64_t tag, uint64_t expires_ms, uint64_t from);
/* The owner of a live tag; NULL for an unknown or quarantined one. */
void *tags_lookup(const struct tags *tags, uint64_t tag);
bool tags_is_quarantined(const struct tags *tags, uint64_t tag);
/* The daemon a quarantined tag's messages came from (tags_quarantine's from); else 0. */
uint64_t tags_quarantined_from(const struct tags *tags, uint64_t tag);
/* Drop quarantined tags whose time has come; returns how many. */
uint32_t tags_sweep(struct tags *tags, uint64_t now_ms);

uint32_t tags_live(const struct tags *tags);
uint32_t tags_quarantined(const struct tags *tags);

#endif
