/* guard.c — see guard.h. */
#include "guard.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

/* The process's userfaultfd, or -1: no guard. Written once, under guard_once. */
static int guard_fd = -1;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

/* The SIGBUS action found before ours: a SIGBUS that is no guarded copy's goes there. */
static struct sigaction guard_chained;
static pthread_mutex_t guard_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool guard_refused_said;

/*
 * The running guard_call of this thread, and the address that faulted.
 * Initial-exec: the handler reads them, and a signal handler must not be
 * the first to reach a thread's TLS block through __tls_get_addr.
 */
static _Thread_local sigjmp_buf *guard_frame __attribute__((tls_model("initial-exec")));
static _Thread_local const void *guard_fault __attribute__((tls_model("initial-exec")));

static void guard_on_sigbus(int sig, siginfo_t *si, void *uc)
{
    sigjmp_buf *frame = guard_frame;
    /* A guarded hole faults BUS_ADRERR; a hardware memory error (BUS_MCEERR_*) is no hole. */
    if (frame != NULL && si->si_code == BUS_ADRERR) {
        guard_frame = NULL;
        guard_fault = si->si_addr;
        siglongjmp(*frame, 1);
    }
    if (guard_chained.sa_handler != SIG_DFL && guard_chained.sa_handler != SIG_IGN) {
        if (guard_chained.sa_flags & SA_SIGINFO)
            guard_chained.sa_sigaction(sig, si, uc);
        else
            guard_chained.sa_handler(sig);
        return;
    }
    /* The default (an ignored SIGBUS would fault forever): the fault repeats on return and
     * ends the process with its core. */
    struct sigaction dfl = { .sa_handler = SIG_DFL };
    sigaction(SIGBUS, &dfl, NULL);
}

/*
 * Ours first. SA_NODEFER: siglongjmp leaves the handler without restoring
 * the mask, and the next guarded copy's SIGBUS must not find it blocked
 * (a blocked synchronous SIGBUS kills the process).
 */
static void guard_take_sigbus(const struct sigaction *found)
{
    struct sigaction ours = { .sa_sigaction = guard_on_sigbus, .sa_flags = SA_SIGINFO | SA_NODEFER };
    sigemptyset(&ours.sa_mask);
    guard_chained = *found;
    sigaction(SIGBUS, &ours, NULL);
}

static void guard_init(void)
{
    const char *off = getenv("B10_TEST_NO_GUARD");
    if (off != NULL && strcmp(off, "1") == 0) {
        log_warning("test hook: ranks' memfds are not guarded: copies look for holes first, and "
                    "a rank punching holes meanwhile can race them (B10_TEST_NO_GUARD)");
        return;
    }
    /* User-mode faults are all the guard needs; before Linux 5.11 a privileged daemon goes without. */
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
    if (fd < 0 && errno == EINVAL)
        fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_SIGBUS |
                              UFFD_FEATURE_MISSING_SHMEM | UFFD_FEATURE_MISSING_HUGETLBFS };
    if (fd < 0 || ioctl(fd, UFFDIO_API, &api) != 0) {
        int err = errno;
        log_warning("no userfaultfd (%s): ranks' memfds are not guarded against holes: each copy "
                    "looks for holes first, but a rank that punches holes during a copy can have "
                    "this daemon allocate pages for it (allow userfaultfd: Linux 5.11, or "
                    "vm.unprivileged_userfaultfd=1, and no seccomp filter refusing it)",
                    strerror(err));
        if (fd >= 0)
            close(fd);
        return;
    }
    struct sigaction found;
    sigaction(SIGBUS, NULL, &found);
    guard_take_sigbus(&found);
    guard_fd = fd;
    log_info("ranks' memfds are guarded: a copy that meets a hole fails, allocating nothing "
             "(userfaultfd)");
}

/* Whoever took SIGBUS after us (a library's error handler) goes behind us again. */
static void guard_keep_sigbus(void)
{
    struct sigaction now;
    pthread_mutex_lock(&guard_lock);
    if (sigaction(SIGBUS, NULL, &now) == 0 &&
        (!(now.sa_flags & SA_SIGINFO) || now.sa_sigaction != guard_on_sigbus)) {
        log_notice("another SIGBUS handler was installed; the guard's goes first again");
        guard_take_sigbus(&now);
    }
    pthread_mutex_unlock(&guard_lock);
}

bool guard_add(void *addr, size_t length)
{
    pthread_once(&guard_once, guard_init);
    if (guard_fd < 0)
        return false;
    guard_keep_sigbus();
    struct uffdio_register reg = {
        .range = { .start = (uintptr_t)addr, .len = length },
        .mode = UFFDIO_REGISTER_MODE_MISSING,
    };
    if (ioctl(guard_fd, UFFDIO_REGISTER, &reg) == 0)
        return true;
    int err = errno;
    if (!atomic_exchange(&guard_refused_said, true))
        log_warning("guarding the mapping of a rank's memfd: %s: its copies look for holes "
                    "first instead (said once)", strerror(err));
    return false;
}

b10_status_t guard_call(b10_status_t (*fn)(void *arg), void *arg, const void **fault_p)
{
    sigjmp_buf frame;
    sigjmp_buf *outer = guard_frame;

    /* No mask saved: the handler leaves it as it was (SA_NODEFER). */
    if (sigsetjmp(frame, 0) != 0) {
        guard_frame = outer;
        *fault_p = guard_fault;
        return B10_ERR_NOT_POPULATED;
    }
    guard_frame = &frame;
    b10_status_t status = fn(arg);
    guard_frame = outer;
    return status;
}
