/*
 * names.h — agent names and the uids that hold them.
 *
 * A rank's name is how other ranks address its memory, so it must not pass
 * to another user: the first uid to say Hello with a name holds it for the
 * daemon's lifetime, connected or not. The same uid takes it back (a
 * restarted rank), any other uid is refused with B10_ERR_PERMISSION.
 *
 * The table is bounded: a uid holds at most NAMES_PER_UID names, and the
 * daemon at most NAMES_MAX. Past either, the claim that has gone longest
 * without a connected rank is forgotten (first of that uid's own, then of
 * anyone's): a uid churning names forgets its own first, and only a node
 * with more than NAMES_MAX / NAMES_PER_UID such uids can make another's
 * idle name free. A claim of a connected rank is never forgotten.
 *
 * Lookups hash the name under a per-boot key (SipHash), so no client can
 * choose names that pile into one bucket.
 */
#ifndef B10D_NAMES_H
#define B10D_NAMES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "b10/b10.h"

#define NAMES_PER_UID 1024u
#define NAMES_MAX 65536u

struct names;

struct names *names_create(void);
void names_destroy(struct names *n);

/*
 * A rank of uid says Hello as name. B10_OK: it holds the name now
 * (connected). B10_ERR_PERMISSION: another uid holds it (*holder_p says
 * which). B10_ERR_EXISTS: a rank of this uid is connected under it already.
 * B10_ERR_TOO_LARGE: every claim that could go is of a connected rank.
 * B10_ERR_INVALID_ARG: an empty name or one too long; B10_ERR_NO_MEMORY.
 */
b10_status_t names_claim(struct names *n, const char *name, uid_t uid, uid_t *holder_p);
/* The rank that held name disconnected: its uid keeps the name. */
void names_release(struct names *n, const char *name);
/* The uid holding name, connected or not; false if nobody does. */
bool names_holder(const struct names *n, const char *name, uid_t *uid_p);
uint32_t names_count(const struct names *n);

#endif
