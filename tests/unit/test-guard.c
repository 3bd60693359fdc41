/*
 * test-guard.c — daemon/mem/guard.c: a guarded mapping of a memfd faults
 * on a hole instead of allocating it, and guard_call turns that fault into
 * B10_ERR_NOT_POPULATED.
 *
 * Real memfds, mapped shared as the daemon maps a rank's: stores and loads
 * into holes are refused and leave them holes (SEEK_DATA says so), pages the
 * file has (written, fallocated) take them, a hole punched after the
 * guard was set is refused the same, a system call that touches a hole
 * fails EFAULT, and a SIGBUS outside guard_call still reaches the handler
 * that was there before (or kills, as it would have). Where the kernel or
 * a seccomp filter refuses userfaultfd, every test skips, saying so.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "guard.h"
#include "log.h"

#define PAGES 16

static long page;

struct file {
    int fd;
    uint8_t *map;
};

/* A sparse memfd of PAGES pages, page 2 written (0x11), mapped shared and guarded. */
static bool guarded_file(struct file *f)
{
    uint8_t data[4096];
    f->fd = memfd_create("test-guard", MFD_CLOEXEC);
    assert_true(f->fd >= 0);
    assert_int_equal(ftruncate(f->fd, PAGES * page), 0);
    memset(data, 0x11, sizeof(data));
    assert_int_equal(pwrite(f->fd, data, (size_t)page, 2 * page), page);
    f->map = mmap(NULL, PAGES * (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, 0);
    assert_true(f->map != MAP_FAILED);
    if (guard_add(f->map, PAGES * (size_t)page))
        return true;
    munmap(f->map, PAGES * (size_t)page);
    close(f->fd);
    return false;
}

#define GUARDED_OR_SKIP(f)                                                              \
    do {                                                                                \
        if (!guarded_file(f)) {                                                         \
            print_message("no userfaultfd here: the guard is off, nothing to test\n");  \
            skip();                                                                     \
        }                                                                               \
    } while (0)

static void file_close(struct file *f)
{
    munmap(f->map, PAGES * (size_t)page);
    close(f->fd);
}

/* Does the file have page k (SEEK_DATA lands on it)? */
static bool has_page(const struct file *f, int k)
{
    return lseek(f->fd, k * page, SEEK_DATA) == k * page;
}

struct access {
    uint8_t *at;
    size_t len;
    bool load;
    uint8_t sum;
};

static b10_status_t touch(void *arg)
{
    struct access *a = arg;
    if (!a->load) {
        memset(a->at, 0x5a, a->len);
        return B10_OK;
    }
    for (size_t i = 0; i < a->len; i++)
        a->sum += ((volatile uint8_t *)a->at)[i];
    return B10_OK;
}

static b10_status_t guarded(uint8_t *at, size_t len, bool load, const void **fault_p)
{
    struct access a = { at, len, load, 0 };
    *fault_p = NULL;
    return guard_call(touch, &a, fault_p);
}

/* A store or a load of a hole ends the call there; the page stays a hole. */
static void test_hole_refused(void **state)
{
    struct file f;
    const void *fault;
    GUARDED_OR_SKIP(&f);

    assert_int_equal(guarded(f.map + 5 * page + 100, 64, false, &fault), B10_ERR_NOT_POPULATED);
    assert_true((const uint8_t *)fault >= f.map + 5 * page &&
                (const uint8_t *)fault < f.map + 6 * page);
    assert_false(has_page(&f, 5));
    assert_int_equal(guarded(f.map + 7 * page, 1, true, &fault), B10_ERR_NOT_POPULATED);
    assert_ptr_equal(fault, f.map + 7 * page);
    assert_false(has_page(&f, 7));
    /* A store running from a page the file has into a hole writes up to it, no further. */
    assert_int_equal(guarded(f.map + 2 * page, 2 * (size_t)page, false, &fault),
                     B10_ERR_NOT_POPULATED);
    assert_true((const uint8_t *)fault >= f.map + 3 * page);
    assert_false(has_page(&f, 3));
    /* Again and again: the handler is ready each time (SA_NODEFER). */
    for (int i = 0; i < 100; i++)
        assert_int_equal(guarded(f.map + 9 * page, 8, i & 1, &fault), B10_ERR_NOT_POPULATED);
    assert_int_equal(lseek(f.fd, 3 * page, SEEK_DATA), -1);
    assert_int_equal(errno, ENXIO);
    file_close(&f);
}

/* Pages the file has take stores and loads: written ones, and fallocated ones. */
static void test_file_pages_taken(void **state)
{
    struct file f;
    const void *fault;
    uint8_t back[64];
    GUARDED_OR_SKIP(&f);

    assert_int_equal(guarded(f.map + 2 * page + 8, 64, false, &fault), B10_OK);
    assert_int_equal(pread(f.fd, back, sizeof(back), 2 * page + 8), sizeof(back));
    for (size_t i = 0; i < sizeof(back); i++)
        assert_int_equal(back[i], 0x5a);
    assert_int_equal(guarded(f.map + 2 * page, (size_t)page, true, &fault), B10_OK);
    /* fallocate gives the file the page (unwritten): it takes a store, allocating nothing new. */
    assert_int_equal(fallocate(f.fd, 0, 11 * page, page), 0);
    assert_int_equal(guarded(f.map + 11 * page, (size_t)page, false, &fault), B10_OK);
    assert_true(has_page(&f, 11));
    file_close(&f);
}

/* A page punched out after the guard was set is a hole like any other. */
static void test_punched_refused(void **state)
{
    struct file f;
    const void *fault;
    GUARDED_OR_SKIP(&f);

    assert_int_equal(guarded(f.map + 2 * page, 16, false, &fault), B10_OK);
    assert_int_equal(fallocate(f.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 2 * page, page), 0);
    assert_int_equal(guarded(f.map + 2 * page, 16, false, &fault), B10_ERR_NOT_POPULATED);
    assert_false(has_page(&f, 2));
    file_close(&f);
}

/* The kernel's own accesses (a read into a hole, a write from one) fail EFAULT. */
static void test_system_calls_fail(void **state)
{
    struct file f;
    int p[2];
    GUARDED_OR_SKIP(&f);

    assert_int_equal(pipe(p), 0);
    assert_int_equal(write(p[1], "abcd", 4), 4);
    assert_int_equal(read(p[0], f.map + 4 * page, 4), -1);
    assert_int_equal(errno, EFAULT);
    assert_int_equal(write(p[1], f.map + 6 * page, 4), -1);
    assert_int_equal(errno, EFAULT);
    assert_int_equal(madvise(f.map + 8 * page, (size_t)page, MADV_POPULATE_WRITE), -1);
    assert_int_equal(errno, EFAULT);
    assert_false(has_page(&f, 4) || has_page(&f, 6) || has_page(&f, 8));
    /* What fn returns passes through when nothing faults. */
    close(p[0]);
    close(p[1]);
    file_close(&f);
}

static sigjmp_buf caught_env;
static volatile sig_atomic_t caught;
static void *volatile caught_addr;

static void catch_bus(int sig, siginfo_t *si, void *uc)
{
    caught = sig;
    caught_addr = si->si_addr;
    siglongjmp(caught_env, 1);
}

/*
 * A SIGBUS outside guard_call is not the guard's: it reaches the handler
 * installed before (here one taking SIGBUS after the guard, which the next
 * guard_add puts behind it again), and the page stays a hole.
 */
static void test_other_sigbus_passed_on(void **state)
{
    struct file f;
    struct sigaction mine = { .sa_sigaction = catch_bus, .sa_flags = SA_SIGINFO | SA_NODEFER };
    GUARDED_OR_SKIP(&f);

    sigemptyset(&mine.sa_mask);
    assert_int_equal(sigaction(SIGBUS, &mine, NULL), 0);
    file_close(&f);
    GUARDED_OR_SKIP(&f);            /* guard_add: ours goes first again, mine behind it */
    caught = 0;
    if (sigsetjmp(caught_env, 0) == 0)
        f.map[3 * page] = 1;
    assert_int_equal(caught, SIGBUS);
    assert_ptr_equal(caught_addr, f.map + 3 * page);
    assert_false(has_page(&f, 3));
    /* And guard_call still catches its own. */
    const void *fault;
    assert_int_equal(guarded(f.map + 3 * page, 1, false, &fault), B10_ERR_NOT_POPULATED);
    file_close(&f);
}

/*
 * With no handler before it, a SIGBUS outside guard_call kills, as it
 * would have: in a child (a guard is its parent's, not a child's to add
 * to), whose guard_add puts the guard's handler before SIG_DFL, a store
 * past the end of a file's mapping.
 */
static void test_other_sigbus_kills(void **state)
{
    struct file f;
    GUARDED_OR_SKIP(&f);
    file_close(&f);

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGBUS, SIG_DFL);
        int fd = memfd_create("test-guard-eof", MFD_CLOEXEC);
        uint8_t *map = fd < 0 || ftruncate(fd, page) != 0 ? MAP_FAILED
                       : mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (map == MAP_FAILED)
            _exit(3);
        guard_add(map, (size_t)page);
        struct sigaction now;
        if (sigaction(SIGBUS, NULL, &now) != 0 || now.sa_handler == SIG_DFL)
            _exit(4);
        map[page] = 1;
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFSIGNALED(status))
        fail_msg("the child exited %d", WEXITSTATUS(status));
    assert_int_equal(WTERMSIG(status), SIGBUS);
}

static b10_status_t returns_io(void *arg)
{
    return B10_ERR_IO;
}

/* guard_call hands back fn's own status, and runs fn on any memory. */
static void test_call_returns_status(void **state)
{
    const void *fault = NULL;
    assert_int_equal(guard_call(returns_io, NULL, &fault), B10_ERR_IO);
    assert_null(fault);
}

static int group_setup(void **state)
{
    log_setup(LOG_LEVEL_ERR, "test-guard");
    page = sysconf(_SC_PAGESIZE);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hole_refused),
        cmocka_unit_test(test_file_pages_taken),
        cmocka_unit_test(test_punched_refused),
        cmocka_unit_test(test_system_calls_fail),
        cmocka_unit_test(test_other_sigbus_passed_on),
        cmocka_unit_test(test_other_sigbus_kills),
        cmocka_unit_test(test_call_returns_status),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
