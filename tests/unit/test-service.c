/*
 * test-service.c — daemon/node/service.c: what systemd hears, socket activation,
 * and the drain's state machine.
 *
 * Real components: a libuv loop, a real quarantine, and a datagram socket
 * standing in for systemd's NOTIFY_SOCKET. Transfers are none: the drain is
 * seen from its edges (admits nothing, done at once, stops the loop or not);
 * tests/ops/run.sh drains real transfers between real daemons.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "b10d.h"
#include "quarantine.h"
#include "service.h"
#include "tags.h"

static uv_loop_t test_loop;
static struct b10d test_d;
static uint64_t fake_now;
static char dir[64];
static int notify_fd = -1;

static uint64_t fake_clock(struct b10d *d)
{
    return fake_now;
}

static int group_setup(void **state)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };

    log_setup(LOG_LEVEL_WARNING, "test-service");
    snprintf(dir, sizeof(dir), "/tmp/test-service.XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/notify", dir);
    /* Away from fd 3, which the activation test borrows. */
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        return -1;
    notify_fd = fcntl(fd, F_DUPFD_CLOEXEC, 20);
    close(fd);
    setenv("NOTIFY_SOCKET", sa.sun_path, 1);
    if (uv_loop_init(&test_loop) != 0)
        return -1;
    memset(&test_d, 0, sizeof(test_d));
    config_defaults(&test_d.cfg);
    test_d.loop = &test_loop;
    test_d.now_ms = fake_clock;
    list_init(&test_d.sessions);
    list_init(&test_d.peers);
    list_init(&test_d.xfers);
    /* The quarantine's sweep reads the tag registry, should it run. */
    test_d.tags = tags_create(1024, 0);
    if (test_d.tags == NULL)
        return -1;
    return quarantine_create(&test_d, &test_d.quarantine) == B10_OK ? 0 : -1;
}

static int group_teardown(void **state)
{
    char path[128];

    quarantine_destroy(test_d.quarantine);
    tags_destroy(test_d.tags);
    uv_run(&test_loop, UV_RUN_NOWAIT);
    close(notify_fd);
    snprintf(path, sizeof(path), "%s/notify", dir);
    unlink(path);
    rmdir(dir);
    return uv_loop_close(&test_loop) == 0 ? 0 : -1;
}

/* The next message systemd would have read, or "" when none comes within ms. */
static const char *notified(int ms)
{
    static char buf[1024];
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

    setsockopt(notify_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ssize_t n = recv(notify_fd, buf, sizeof(buf) - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

static bool starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void drain_notifications(void)
{
    while (notified(1)[0] != '\0')
        ;
}

static void on_wait(uv_timer_t *t)
{
}

/* Run the loop for about ms: the service's own timers do not keep it alive. */
static void run_for(uint64_t ms)
{
    uv_timer_t t;
    uv_timer_init(&test_loop, &t);
    uv_timer_start(&t, on_wait, ms, 0);
    uv_run(&test_loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&test_loop, UV_RUN_NOWAIT);
}

static struct service *service_new(void)
{
    struct service *svc = NULL;
    assert_int_equal(service_create(&test_d, &svc), B10_OK);
    assert_non_null(svc);
    test_d.service = svc;
    test_d.stopping = false;
    return svc;
}

static void service_end(struct service *svc)
{
    service_destroy(svc);
    test_d.service = NULL;
    uv_run(&test_loop, UV_RUN_NOWAIT);
    drain_notifications();
}

/* ---------------------------------------------------------------- notify */

static void test_notify_order(void **state)
{
    struct service_info info;

    setenv("WATCHDOG_USEC", "20000", 1);
    struct service *svc = service_new();
    unsetenv("WATCHDOG_USEC");
    service_info(svc, &info);
    assert_int_equal(info.watchdog_usec, 20000);
    assert_string_equal(info.state, "serving");

    service_ready(svc);
    const char *m = notified(1000);
    assert_true(starts(m, "READY=1\nSTATUS=serving: 0 clients"));
    run_for(50);   /* pings every 10 ms */
    assert_string_equal(notified(1000), "WATCHDOG=1");

    drain_notifications();
    service_on_signal(svc, SIGTERM);
    assert_string_equal(notified(1000), "STOPPING=1");
    assert_true(starts(notified(1000), "STATUS=stopping:"));
    assert_true(test_d.stopping);
    service_info(svc, &info);
    assert_string_equal(info.state, "stopping");
    /* Nothing was in flight: drained at once, and the loop was told to stop. */
    assert_int_equal(info.drain_in_flight, 0);
    assert_int_equal(info.drain_forced, 0);
    uv_run(&test_loop, UV_RUN_NOWAIT);   /* consumes the stop */
    /* A second signal stops at once, and says STOPPING no more. */
    service_on_signal(svc, SIGTERM);
    service_end(svc);
}

static void test_no_notify_socket(void **state)
{
    char *saved = strdup(getenv("NOTIFY_SOCKET"));

    unsetenv("NOTIFY_SOCKET");
    struct service *svc = service_new();
    service_ready(svc);
    service_drain(svc, 100, true);
    service_end(svc);
    setenv("NOTIFY_SOCKET", saved, 1);
    free(saved);
    assert_string_equal(notified(50), "");
}

/* ---------------------------------------------------------------- drain */

static void test_operator_drain_keeps_running(void **state)
{
    struct service_info info;
    struct service *svc = service_new();

    service_ready(svc);
    drain_notifications();
    fake_now = 5000;
    service_drain(svc, 1000, false);
    assert_true(test_d.stopping);
    service_info(svc, &info);
    assert_string_equal(info.state, "drained");
    assert_int_equal(info.drain_ms, 0);
    assert_int_equal(info.drain_left_ms, 0);
    /* Not a stop: STATUS says drained, STOPPING is never said. */
    const char *m = notified(1000);
    assert_true(starts(m, "STATUS=drained:"));
    assert_string_equal(notified(50), "");
    /* A signal afterwards turns it into a stop. */
    service_on_signal(svc, SIGTERM);
    assert_string_equal(notified(1000), "STOPPING=1");
    service_info(svc, &info);
    assert_string_equal(info.state, "stopping");
    service_end(svc);
}

/* An operator's drain ends on resume; with none running there is nothing to end; a stop stays. */
static void test_resume(void **state)
{
    struct service_info info;
    struct service *svc = service_new();
    bool ended = true;

    service_ready(svc);
    assert_int_equal(service_resume(svc, &ended), B10_OK);
    assert_false(ended);
    service_drain(svc, 1000, false);
    assert_true(test_d.stopping);
    assert_int_equal(service_resume(svc, &ended), B10_OK);
    assert_true(ended);
    assert_false(test_d.stopping);
    service_info(svc, &info);
    assert_string_equal(info.state, "serving");
    /* A signal's drain is not undone, and the answer says so. */
    service_on_signal(svc, SIGTERM);
    ended = false;
    assert_int_equal(service_resume(svc, &ended), B10_ERR_DRAINING);
    assert_false(ended);
    assert_true(test_d.stopping);
    uv_run(&test_loop, UV_RUN_NOWAIT);   /* consumes the stop */
    service_end(svc);
}

/* ---------------------------------------------------------------- activation */

static void test_not_activated(void **state)
{
    struct service_info info;
    int fd = 7;
    struct service *svc = service_new();

    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_PID");
    assert_int_equal(service_listen_fd(svc, &fd), B10_OK);
    assert_int_equal(fd, -1);
    service_info(svc, &info);
    assert_false(info.activated);
    service_end(svc);
}

/* Put sock at fd 3 as systemd would, call service_listen_fd, give fd 3 back. */
static b10_status_t activate_with(struct service *svc, int sock, int *fd_p)
{
    char pid[32];
    int saved = fcntl(3, F_DUPFD_CLOEXEC, 20);   /* the loop's own fd 3, if any */

    assert_int_equal(dup2(sock, 3), 3);
    close(sock);
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    setenv("LISTEN_FDS", "1", 1);
    setenv("LISTEN_PID", pid, 1);
    b10_status_t rc = service_listen_fd(svc, fd_p);
    /* sd_listen_fds(1) unsets them: nothing the daemon starts inherits them. */
    assert_null(getenv("LISTEN_FDS"));
    if (rc == B10_OK)
        assert_int_equal(*fd_p, 3);
    else
        assert_int_equal(fcntl(3, F_GETFD), -1);   /* closed */
    if (saved >= 0) {
        dup2(saved, 3);
        close(saved);
    } else {
        close(3);
    }
    return rc;
}

static void test_activated(void **state)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    struct service_info info;
    int fd = -1;
    struct service *svc = service_new();

    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/act.sock", dir);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(s, 4), 0);
    assert_int_equal(activate_with(svc, s, &fd), B10_OK);
    service_info(svc, &info);
    assert_true(info.activated);
    unlink(sa.sun_path);
    service_end(svc);
}

static void test_activated_with_garbage(void **state)
{
    struct service_info info;
    int fd = -1;
    struct service *svc = service_new();

    /* A socket that does not listen is not a client socket. */
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_int_equal(activate_with(svc, s, &fd), B10_ERR_INVALID_ARG);
    service_info(svc, &info);
    assert_false(info.activated);
    service_end(svc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_notify_order),
        cmocka_unit_test(test_no_notify_socket),
        cmocka_unit_test(test_operator_drain_keeps_running),
        cmocka_unit_test(test_resume),
        cmocka_unit_test(test_not_activated),
        cmocka_unit_test(test_activated),
        cmocka_unit_test(test_activated_with_garbage),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
