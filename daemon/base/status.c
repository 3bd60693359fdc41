/* status.c — see status.h. */
#include "status.h"

#include <errno.h>

b10_status_t status_from_errno(int err)
{
    switch (err) {
    case ENOMEM:
    case EMFILE:
    case ENFILE:
        return B10_ERR_NO_MEMORY;
    case EACCES:
    case EPERM:
    case EROFS:
        return B10_ERR_PERMISSION;
    case ENOENT:
    case ENOTDIR:
        return B10_ERR_NOT_FOUND;
    case EEXIST:
    case EADDRINUSE:
        return B10_ERR_EXISTS;
    case EINVAL:
    case ENAMETOOLONG:
    case EADDRNOTAVAIL:
        return B10_ERR_INVALID_ARG;
    case ENOTSUP:
        return B10_ERR_UNSUPPORTED;
    default:
        return B10_ERR_IO;
    }
}
