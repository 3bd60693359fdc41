/*
 * caps.h — the one capability b10d may hold, and only while it uses it.
 *
 * The gate (gate.h) attaches a socket filter to UCX's listeners. Linux lets
 * any process filter its own sockets, but some kernels keep SO_ATTACH_FILTER
 * to holders of CAP_NET_ADMIN (one such refused a daemon running as its own
 * user, while root's passed). On such nodes the unit's gate-caps drop-in
 * hands the daemon CAP_NET_ADMIN as an ambient capability, and the daemon
 * keeps it out of its effective set from its first line: it is raised
 * around the attach that the kernel refused without it, on the loop's
 * thread, and lowered again at once.
 *
 * Capabilities belong to threads: caps_settle runs before the daemon starts
 * any (UCX's, CUDA's, the staging pool's), which inherit what it left.
 * A daemon running as root keeps root's capabilities as they are: it is
 * root's choice, and its tests' (they read ranks of other users' memory).
 */
#ifndef B10D_CAPS_H
#define B10D_CAPS_H

#include <stdbool.h>

/* At start: no capability effective, inheritable or ambient; CAP_NET_ADMIN stays permitted
 * when it was given. Nothing for root. Logs what it kept. */
void caps_settle(void);

/* Raise CAP_NET_ADMIN into this thread's effective set: false when it is not permitted. */
bool caps_raise_net_admin(void);

/* Lower it again (after caps_raise_net_admin returned true). */
void caps_lower_net_admin(void);

#endif
