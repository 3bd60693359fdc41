/*
 * names.h — agent names and the uids that hold them.
 *
 * A rank's name is how other ranks address its memory, so it must not pass
 * to another user: the first uid to say Hello with a name holds it while a
 * rank of it is connected, and for the hold (--name-hold-ms) after the last
 * one left. The same uid takes it back (a restarted rank), any other uid is
 * refused with B10_ERR_PERMISSION. The claims outlive the daemon's own
 * restart: names-file.c keeps them in the runtime folder and puts them back
 * (names_restore), so that a user who crashes the daemon cannot take a
 * name whose rank had no time to reconnect.
 *
 * The table is bounded: a uid holds at most NAMES_PER_UID names, and the
 * daemon at most NAMES_MAX. Past either, the claim that has gone longest
 * without a connected rank is forgotten (first of that uid's own, then of
 * anyone's): a uid churning names forgets its own first, and only a node
 * with more than NAMES_MAX / NAMES_PER_UID such uids can make another's
 * idle name free. A claim of a connected rank is never forgotten.
 *
 * Idle time is measured on CLOCK_BOOTTIME in ms: it does not jump with the
 * wall clock, and it is the same clock in the daemon's next process, so a
 * claim kept across a restart goes when it would have gone without one.
 *
 * Lookups hash the name under a per-boot key (SipHash), so no client can
 * choose names that pile into one bucket.
 */
#ifndef B10D_NAMES_H
#define B10D_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "b10/b10.h"

#define NAMES_PER_UID 1024u
#define NAMES_MAX 65536u
#define NAMES_NAME_MAX 255u     /* bytes of a name, without its NUL */

struct names;

struct names *names_create(void);
void names_destroy(struct names *n);

/* How long an idle claim holds, in ms; 0 (the default): for the table's life. */
void names_set_hold(struct names *n, uint64_t hold_ms);
/* The clock of idle times (CLOCK_BOOTTIME ms by default); tests give their own. */
void names_set_clock(struct names *n, uint64_t (*now_ms)(void *arg), void *arg);
uint64_t names_now(const struct names *n);
/*
 * changed(arg) after every change a restart should see: a claim made,
 * taken back, left idle or forgotten. Called on the loop, inside the
 * change: it must not call back into the table.
 */
void names_on_change(struct names *n, void (*changed)(void *arg), void *arg);

/*
 * A rank of uid says Hello as name. B10_OK: it holds the name now
 * (connected). B10_ERR_PERMISSION: another uid holds it (*holder_p says
 * which). B10_ERR_EXISTS: a rank of this uid is connected under it already.
 * B10_ERR_TOO_LARGE: every claim that could go is of a connected rank.
 * B10_ERR_INVALID_ARG: an empty name or one too long; B10_ERR_NO_MEMORY.
 */
b10_status_t names_claim(struct names *n, const char *name, uid_t uid, uid_t *holder_p);
/* The rank that held name disconnected: its uid keeps the name for the hold. */
void names_release(struct names *n, const char *name);
/* The uid holding name, connected or not; false if nobody does. */
bool names_holder(const struct names *n, const char *name, uid_t *uid_p);
uint32_t names_count(const struct names *n);
/* Forget the idle claims past their hold (a claim does that lazily too). */
void names_expire(struct names *n);

/*
 * Every claim, for names-file.c: fn(arg, name, len, uid, idle_ms), idle_ms
 * the clock's time its last rank left, 0 while one is connected.
 */
void names_walk(const struct names *n,
                void (*fn)(void *arg, const char *name, size_t len, uid_t uid, uint64_t idle_ms),
                void *arg);
/*
 * Put back an idle claim of an earlier run of the daemon: name (len bytes,
 * no NUL needed), idle since idle_ms. No claim is forgotten for it: past
 * the bounds B10_ERR_TOO_LARGE, a name held already B10_ERR_EXISTS,
 * B10_ERR_INVALID_ARG for a bad length. After the last, names_restore_done
 * puts the idle claims in the order they go.
 */
b10_status_t names_restore(struct names *n, const char *name, size_t len, uid_t uid,
                           uint64_t idle_ms);
b10_status_t names_restore_done(struct names *n);
/* Forget every claim (a restore that failed half way). */
void names_clear(struct names *n);

#endif
