/*
 * guard.h — copies that cannot fill a hole of a rank's memfd.
 *
 * A rank's memfd may have holes: pages it never wrote (ftruncate makes a
 * file of holes) or pages it punched out again (fallocate's PUNCH_HOLE,
 * MADV_REMOVE). The first touch of a hole through the daemon's shared
 * mapping, a store or a load alike, allocates the page and charges it to
 * the memory cgroup of the process that touched it: the daemon's. A rank
 * could so have the daemon pay for its memory until the daemon's cgroup
 * killed it (a WRITE of 4 KiB into each page of a 1 GiB hole grew the
 * daemon's cgroup by 1 GiB).
 *
 * The guard registers each such mapping with a userfaultfd in MISSING mode
 * with UFFD_FEATURE_SIGBUS: a fault on a page the file does not have then
 * allocates nothing. A copy's load or store raises SIGBUS in its thread,
 * which guard_call catches; a system call that touches such a page (a
 * pread or pwrite of a rank's /proc/<pid>/mem, madvise's populate) fails
 * EFAULT. Pages the file has fault in as before: written ones, swapped-out
 * ones, fallocated ones. What a rank does after a check (punching a hole
 * in the middle of a copy) cannot get past it: the check is the fault.
 *
 * Unprivileged, userfaultfd needs UFFD_USER_MODE_ONLY (Linux 5.11), which
 * is all the guard needs, or vm.unprivileged_userfaultfd = 1; a seccomp
 * filter may refuse the call (Docker's default one does, without
 * CAP_SYS_PTRACE). Without it guard_add says false, and copies look for
 * holes before they run (hole.h), which a rank punching holes during the
 * copy can race.
 *
 * Process-wide: one userfaultfd and one SIGBUS handler for the daemon,
 * made on the first guard_add. A SIGBUS that is not a guarded copy's goes
 * to the handler that was there before (UCX's, ASan's) or kills the
 * process as it would have. A forked child keeps neither the guard of its
 * mappings nor a guard of its own (the userfaultfd is its parent's).
 */
#ifndef B10D_GUARD_H
#define B10D_GUARD_H

#include <stdbool.h>
#include <stddef.h>

#include "b10/b10.h"

/*
 * Guard the mapping [addr, addr + length) (whole pages of it; length a
 * multiple of its page size): true when guarded, false without the guard
 * (said once in the log). Any thread.
 */
bool guard_add(void *addr, size_t length);

/*
 * fn(arg), ready for the guard's SIGBUS: B10_ERR_NOT_POPULATED when a load
 * or store of fn touched a hole of a guarded mapping, fn cut short there
 * and the address in *fault_p; else what fn returned. fn must hold no lock
 * and own nothing it would free after the fault (it is left by siglongjmp).
 * Any thread.
 */
b10_status_t guard_call(b10_status_t (*fn)(void *arg), void *arg, const void **fault_p);

#endif
