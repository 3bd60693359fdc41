/*
 * status.h — the daemon's side of b10_status_t: a system call's errno in
 * the status a room returns.
 *
 * Every room returns b10_status_t across its boundary (b10/b10.h). An errno
 * is logged once where the call failed, with strerror's words, and the
 * status carries on what the caller must do about it: retry when memory or
 * descriptors ran out, fix the path or the permissions, and so on.
 */
#ifndef B10D_STATUS_H
#define B10D_STATUS_H

#include "b10/b10.h"

/*
 * ENOMEM, EMFILE, ENFILE: B10_ERR_NO_MEMORY; EACCES, EPERM, EROFS:
 * B10_ERR_PERMISSION; ENOENT, ENOTDIR: B10_ERR_NOT_FOUND; EEXIST,
 * EADDRINUSE: B10_ERR_EXISTS; EINVAL, ENAMETOOLONG, EADDRNOTAVAIL:
 * B10_ERR_INVALID_ARG; ENOTSUP: B10_ERR_UNSUPPORTED; anything else
 * (0 included: a call that failed without saying why) B10_ERR_IO.
 */
b10_status_t status_from_errno(int err);

#endif
