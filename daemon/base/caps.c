/* caps.c — see caps.h. capget(2)/capset(2) directly: two calls do not need libcap. */
#include "caps.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"

/* CAP_NET_ADMIN is 12: in the first of the two 32-bit words. */
#define CAPS_NET_ADMIN_BIT (UINT32_C(1) << CAP_NET_ADMIN)

static bool caps_get(struct __user_cap_data_struct data[2])
{
    struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
    memset(data, 0, 2 * sizeof(*data));
    return syscall(SYS_capget, &hdr, data) == 0;
}

static bool caps_set(struct __user_cap_data_struct data[2])
{
    struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
    return syscall(SYS_capset, &hdr, data) == 0;
}

void caps_settle(void)
{
    struct __user_cap_data_struct data[2];

    if (geteuid() == 0 || !caps_get(data))
        return;
    /* Ambient first: it is kept only while the bit is permitted and inheritable. */
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    bool net_admin = (data[0].permitted & CAPS_NET_ADMIN_BIT) != 0;
    data[0].permitted &= CAPS_NET_ADMIN_BIT;
    data[1].permitted = 0;
    data[0].effective = data[1].effective = 0;
    data[0].inheritable = data[1].inheritable = 0;
    if (!caps_set(data)) {
        log_warning("capabilities: cannot lower them: %s", strerror(errno));
        return;
    }
    if (net_admin)
        log_info("capabilities: CAP_NET_ADMIN kept permitted, not effective: raised only where "
                 "the kernel refuses the gate's socket filter without it");
}

bool caps_raise_net_admin(void)
{
    struct __user_cap_data_struct data[2];

    if (!caps_get(data) || (data[0].permitted & CAPS_NET_ADMIN_BIT) == 0)
        return false;
    data[0].effective |= CAPS_NET_ADMIN_BIT;
    return caps_set(data);
}

void caps_lower_net_admin(void)
{
    struct __user_cap_data_struct data[2];

    if (!caps_get(data))
        return;
    data[0].effective &= ~CAPS_NET_ADMIN_BIT;
    if (!caps_set(data))
        log_warning("capabilities: cannot lower CAP_NET_ADMIN: %s", strerror(errno));
}
