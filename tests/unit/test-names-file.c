/*
 * test-names-file.c — daemon/mem/names-file.c: the names' claims written and
 * read back across a restart (a round trip), the table's bounds and hold
 * kept, and every file that is not the daemon's own or does not decode
 * refused whole; the keeper writes a burst of changes once, and at close.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b10d.h"
#include "checksum.h"
#include "names-file.h"
#include "names.h"

static const uint8_t boot[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
static uint64_t clock_ms;
static char dir[128];
static char why[512];

static uint64_t test_clock(void *arg)
{
    (void)arg;
    return clock_ms;
}

static struct names *table(uint64_t hold_ms)
{
    struct names *n = names_create();
    assert_non_null(n);
    names_set_clock(n, test_clock, NULL);
    names_set_hold(n, hold_ms);
    return n;
}

static int setup(void **state)
{
    (void)state;
    clock_ms = 10000;
    snprintf(dir, sizeof(dir), "%s/test-names-file.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    return mkdtemp(dir) != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[256];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* The checksum made good again after a test changed the bytes. */
static void reseal(uint8_t *buf, size_t len)
{
    uint64_t sum = checksum(buf, len - 8, 0x62313073656d616eull);
    for (int i = 0; i < 8; i++)
        buf[len - 8 + i] = (uint8_t)(sum >> (8 * i));
}

/* Decode and put back into a fresh table; the status of the first step that refused. */
static b10_status_t load(const uint8_t *buf, size_t len, struct names **n_p, uint32_t *expired_p)
{
    struct names_record *records = NULL;
    uint32_t count = 0, expired = 0;
    struct names *n = table(1000);
    b10_status_t st = names_file_decode(buf, len, boot, clock_ms, &records, &count, why,
                                        sizeof(why));
    if (st == B10_OK)
        st = names_file_restore(n, records, count, &expired, why, sizeof(why));
    free(records);
    if (st != B10_OK)
        assert_int_equal(names_count(n), 0);
    if (n_p != NULL && st == B10_OK)
        *n_p = n;
    else
        names_destroy(n);
    if (expired_p != NULL)
        *expired_p = expired;
    return st;
}

/* A table of three claims: one connected, two idle (since 9500 and 9800), of two uids. */
static void encode_three(uint8_t **buf_p, size_t *len_p)
{
    struct names *n = table(1000);
    uid_t holder;
    clock_ms = 9000;
    assert_int_equal(names_claim(n, "prefill-0", 1000, &holder), 0);
    assert_int_equal(names_claim(n, "decode-0", 1000, &holder), 0);
    assert_int_equal(names_claim(n, "other", 2000, &holder), 0);
    clock_ms = 9500;
    names_release(n, "decode-0");
    clock_ms = 9800;
    names_release(n, "other");
    clock_ms = 10000;
    assert_int_equal(names_file_encode(n, boot, clock_ms, buf_p, len_p), 0);
    names_destroy(n);
}

/* ---------------------------------------------------------------- round trip */

static void test_round_trip(void **state)
{
    struct names *n = NULL;
    uint8_t *buf;
    size_t len;
    uint32_t expired;
    uid_t holder, uid;
    (void)state;

    encode_three(&buf, &len);
    assert_int_equal(len, NAMES_FILE_HEAD + 3 * 13 + 9 + 8 + 5 + NAMES_FILE_TAIL);
    /* Read back at once, under a hold of 1000: all three held, by their uids. */
    assert_int_equal(load(buf, len, &n, &expired), 0);
    assert_int_equal(expired, 0);
    assert_int_equal(names_count(n), 3);
    assert_true(names_holder(n, "prefill-0", &uid));
    assert_int_equal(uid, 1000);
    assert_true(names_holder(n, "decode-0", &uid));
    assert_int_equal(uid, 1000);
    assert_true(names_holder(n, "other", &uid));
    assert_int_equal(uid, 2000);
    /* Another uid is refused each, told the holder; the holder takes its own back. */
    assert_int_equal(names_claim(n, "prefill-0", 2000, &holder), B10_ERR_PERMISSION);
    assert_int_equal(holder, 1000);
    assert_int_equal(names_claim(n, "other", 1000, &holder), B10_ERR_PERMISSION);
    assert_int_equal(holder, 2000);
    assert_int_equal(names_claim(n, "prefill-0", 1000, &holder), 0);
    assert_int_equal(names_claim(n, "other", 2000, &holder), 0);
    names_destroy(n);

    /*
     * The hold runs from when each went idle: at 10600 decode-0 (idle since 9500) is
     * past a hold of 1000, other (9800) is not until 10800, and prefill-0 (connected
     * when written) is idle from the restart on.
     */
    clock_ms = 10600;
    assert_int_equal(load(buf, len, &n, &expired), 0);
    assert_int_equal(expired, 1);
    assert_false(names_holder(n, "decode-0", &uid));
    assert_int_equal(names_claim(n, "decode-0", 2000, &holder), 0);
    clock_ms = 10799;
    assert_int_equal(names_claim(n, "other", 1000, &holder), B10_ERR_PERMISSION);
    clock_ms = 10800;
    assert_int_equal(names_claim(n, "other", 1000, &holder), 0);
    clock_ms = 11599;
    assert_int_equal(names_claim(n, "prefill-0", 2000, &holder), B10_ERR_PERMISSION);
    clock_ms = 11600;
    assert_int_equal(names_claim(n, "prefill-0", 2000, &holder), 0);
    names_destroy(n);

    /* An empty table makes a file of none, which reads back as none. */
    struct names *empty = table(1000);
    free(buf);
    assert_int_equal(names_file_encode(empty, boot, clock_ms, &buf, &len), 0);
    assert_int_equal(len, NAMES_FILE_HEAD + NAMES_FILE_TAIL);
    assert_int_equal(load(buf, len, &n, NULL), 0);
    assert_int_equal(names_count(n), 0);
    names_destroy(n);
    names_destroy(empty);
    free(buf);
}

/* ---------------------------------------------------------------- refusals */

static void test_corrupt_refused(void **state)
{
    uint8_t *buf, *copy;
    size_t len;
    (void)state;

    encode_three(&buf, &len);
    copy = malloc(len + 16);
    /* Every prefix, and one byte more. */
    for (size_t cut = 0; cut < len; cut++)
        assert_int_equal(load(buf, cut, NULL, NULL), B10_ERR_INVALID_ARG);
    memcpy(copy, buf, len);
    copy[len] = 0;
    assert_int_equal(load(copy, len + 1, NULL, NULL), B10_ERR_INVALID_ARG);
    /* Every bit of every byte flipped: the sum, or the check of what the sum covers. */
    for (size_t i = 0; i < len; i++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(copy, buf, len);
            copy[i] ^= (uint8_t)(1u << bit);
            assert_int_equal(load(copy, len, NULL, NULL), B10_ERR_INVALID_ARG);
        }
    free(copy);
    free(buf);
}

/* What the sum does not catch (a writer that sums its own bytes): each field's bounds. */
static void test_fields_refused(void **state)
{
    uint8_t *buf, *c;
    size_t len;
    (void)state;

    encode_three(&buf, &len);
    c = malloc(len + 300);
    const size_t rec0 = NAMES_FILE_HEAD;
#define RESEALED(edit, want, word)                                  \
    do {                                                            \
        memcpy(c, buf, len);                                        \
        size_t l = len;                                             \
        edit;                                                       \
        reseal(c, l);                                               \
        assert_int_equal(load(c, l, NULL, NULL), want);             \
        if ((word) != NULL && strstr(why, (word)) == NULL)          \
            fail_msg("'%s' does not say '%s'", why, (word));        \
    } while (0)

    RESEALED(c[0] = 'x', B10_ERR_INVALID_ARG, "not a file of names");
    RESEALED(c[8] = 2, B10_ERR_INVALID_ARG, "version 2");
    /* A count past what the bytes hold, past NAMES_MAX, and one short. */
    RESEALED(c[12] = 4, B10_ERR_INVALID_ARG, "past the end");
    RESEALED((c[12] = 0, c[13] = 0, c[14] = 1), B10_ERR_INVALID_ARG, "names in");
    RESEALED(c[12] = 2, B10_ERR_INVALID_ARG, "bytes after");
    /* Written after now, by this boot's clock. */
    RESEALED(c[32 + 5] = 1, B10_ERR_INVALID_ARG, "after now");
    /* Another boot: nothing restored, and no refusal either. */
    RESEALED(c[16] ^= 1, B10_ERR_NOT_FOUND, "another boot");
    /* An empty name; a name longer than the bytes; a space, a control byte, a high byte. */
    RESEALED(c[rec0 + 12] = 0, B10_ERR_INVALID_ARG, "an empty name");
    RESEALED(c[rec0 + 12] = 200, B10_ERR_INVALID_ARG, "past the end");
    RESEALED(c[rec0 + 13] = ' ', B10_ERR_INVALID_ARG, "not printable");
    RESEALED(c[rec0 + 13] = '\n', B10_ERR_INVALID_ARG, "not printable");
    RESEALED(c[rec0 + 13] = 0xc3, B10_ERR_INVALID_ARG, "not printable");
    RESEALED(c[rec0 + 13] = 0, B10_ERR_INVALID_ARG, "not printable");
    /* Idle since after the file was written. */
    RESEALED(c[rec0 + 4 + 6] = 1, B10_ERR_INVALID_ARG, "after the file was written");
    /* The same name twice: the first record's name put into the second. */
    size_t rec1 = rec0 + 13 + c[rec0 + 12];
    RESEALED((c[rec1 + 12] = buf[rec0 + 12], memcpy(c + rec1 + 13, buf + rec0 + 13, buf[rec0 + 12]),
              memmove(c + rec1 + 13 + buf[rec0 + 12], buf + rec1 + 13 + buf[rec1 + 12],
                      len - (rec1 + 13 + buf[rec1 + 12])),
              l = len - buf[rec1 + 12] + buf[rec0 + 12]),
             B10_ERR_INVALID_ARG, "named twice");
#undef RESEALED
    free(c);
    free(buf);
}

/* A file of one uid's names past NAMES_PER_UID, made by hand: refused whole, none kept. */
static void test_bounds_refused(void **state)
{
    const uint32_t count = NAMES_PER_UID + 1;
    size_t len = NAMES_FILE_HEAD + count * (13 + 12) + NAMES_FILE_TAIL;
    uint8_t *b = calloc(1, len);
    (void)state;

    memcpy(b, "b10names", 8);
    b[8] = 1;
    memcpy(b + 12, &count, 4);          /* the tests run little-endian, as the file is */
    memcpy(b + 16, boot, 16);
    size_t at = NAMES_FILE_HEAD;
    for (uint32_t i = 0; i < count; i++, at += 13 + 12) {
        uint32_t uid = 1000;
        memcpy(b + at, &uid, 4);
        b[at + 12] = 12;
        char name[16];                  /* room for any u32: -O0 cannot bound i */
        snprintf(name, sizeof name, "rank-%07u", (unsigned)i);
        memcpy(b + at + 13, name, 12);
    }
    reseal(b, len);
    assert_int_equal(load(b, len, NULL, NULL), B10_ERR_INVALID_ARG);
    assert_non_null(strstr(why, "past the bounds"));
    /* One fewer, and the allowed case restores them all. */
    struct names *n = NULL;
    uint32_t fewer = count - 1;
    memcpy(b + 12, &fewer, 4);
    len -= 13 + 12;
    memmove(b + len - NAMES_FILE_TAIL, b + len + 13 + 12 - NAMES_FILE_TAIL, NAMES_FILE_TAIL);
    reseal(b, len);
    assert_int_equal(load(b, len, &n, NULL), 0);
    assert_int_equal(names_count(n), NAMES_PER_UID);
    names_destroy(n);
    free(b);
}

/* ---------------------------------------------------------------- the file */

static int dir_fd(void)
{
    int fd = -1;
    assert_int_equal(names_file_dir(dir, &fd, why, sizeof(why)), 0);
    return fd;
}

static void path_of(char *p, size_t len, const char *name)
{
    snprintf(p, len, "%s/%s", dir, name);
}

static void test_file_read_write(void **state)
{
    uint8_t *buf, *got;
    size_t len, got_len;
    char p[256], q[256];
    struct stat st;
    (void)state;

    int fd = dir_fd();
    assert_int_equal(names_file_read(fd, &got, &got_len, why, sizeof(why)), B10_ERR_NOT_FOUND);
    encode_three(&buf, &len);
    /* Written 0600 whatever the umask, and read back the same bytes. */
    mode_t old = umask(0);
    assert_int_equal(names_file_write(fd, buf, len), 0);
    umask(old);
    path_of(p, sizeof(p), "names");
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(st.st_uid, geteuid());
    assert_int_equal(names_file_read(fd, &got, &got_len, why, sizeof(why)), 0);
    assert_int_equal(got_len, len);
    assert_memory_equal(got, buf, len);
    free(got);
    /* A names.tmp a crash left, or a link put there, is replaced, never written through. */
    path_of(p, sizeof(p), "names.tmp");
    path_of(q, sizeof(q), "elsewhere");
    int other = open(q, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(other >= 0);
    close(other);
    assert_int_equal(symlink(q, p), 0);
    assert_int_equal(names_file_write(fd, buf, len), 0);
    assert_int_equal(stat(q, &st), 0);
    assert_int_equal(st.st_size, 0);
    assert_int_equal(lstat(p, &st), -1);

    /* Writable by group or others: refused, saying so. */
    path_of(p, sizeof(p), "names");
    assert_int_equal(chmod(p, 0620), 0);
    assert_int_equal(names_file_read(fd, &got, &got_len, why, sizeof(why)), B10_ERR_INVALID_ARG);
    assert_non_null(strstr(why, "writable by group or others"));
    assert_int_equal(chmod(p, 0602), 0);
    assert_int_equal(names_file_read(fd, &got, &got_len, why, sizeof(why)), B10_ERR_INVALID_ARG);
    assert_int_equal(chmod(p, 0600), 0);
    /* Owned by another uid (root can make one). */
    if (geteuid() == 0) {
        assert_int_equal(chown(p, 65534, 65534), 0);
        assert_int_equal(names_file_read(fd, &got, &got_len, why, sizeof(why)),
                         B10_ERR_INVALID_ARG);
        assert_non_null(strstr(why, "owned by uid 65534"));
        assert_int_equal(chown(p, 0, 0), 0);
    } else {
        printf("# not root: the file of another owner is not tried here\n");
    }
    /* A link in its place, a FIFO (the open must not wait for a writer), a directory. */
    assert_int_equal(unlink(p), 0);
    assert_int_equal(symlink(q, p), 0);
    assert_int_equal(names_file_read(fd, &got, &got_len, why, sizeof(why)), B10_ERR_INVALID_ARG);
    assert_non_null(strstr(why, "symbolic link"));
    assert_int_equal(unlink(p), 0);
    assert_int_equal(mkfifo(p, 0600), 0);
    assert_int_equal(names_file_read(fd, &got, &got_len, why, sizeof(why)), B10_ERR_INVALID_ARG);
    assert_non_null(strstr(why, "not a regular file"));
    assert_int_equal(unlink(p), 0);
    /* Larger than any table makes (sparse: no bytes stored). */
    int big = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(big >= 0);
    assert_int_equal(ftruncate(big, (off_t)NAMES_FILE_MAX + 1), 0);
    close(big);
    assert_int_equal(names_file_read(fd, &got, &got_len, why, sizeof(why)), B10_ERR_INVALID_ARG);
    assert_non_null(strstr(why, "more than the table's bounds"));
    close(fd);
    free(buf);
}

static void test_dir_refused(void **state)
{
    int fd = -1;
    char p[256];
    (void)state;

    assert_int_equal(chmod(dir, 0770), 0);
    assert_int_equal(names_file_dir(dir, &fd, why, sizeof(why)), B10_ERR_INVALID_ARG);
    assert_non_null(strstr(why, "not writable by group or others"));
    assert_int_equal(chmod(dir, 0757), 0);
    assert_int_equal(names_file_dir(dir, &fd, why, sizeof(why)), B10_ERR_INVALID_ARG);
    assert_int_equal(chmod(dir, 0755), 0);
    assert_int_equal(names_file_dir(dir, &fd, why, sizeof(why)), 0);
    close(fd);
    path_of(p, sizeof(p), "missing");
    assert_int_equal(names_file_dir(p, &fd, why, sizeof(why)), B10_ERR_IO);
    if (geteuid() == 0) {
        assert_int_equal(chown(dir, 65534, 65534), 0);
        assert_int_equal(names_file_dir(dir, &fd, why, sizeof(why)), B10_ERR_INVALID_ARG);
        assert_non_null(strstr(why, "owned by uid 65534"));
        assert_int_equal(chown(dir, 0, 0), 0);
    }
}

/* ---------------------------------------------------------------- the keeper */

static struct b10d d;
static uv_loop_t loop;

static void daemon_up(uint64_t hold_ms)
{
    memset(&d, 0, sizeof(d));
    assert_int_equal(uv_loop_init(&loop), 0);
    d.loop = &loop;
    snprintf(d.cfg.runtime_dir, sizeof(d.cfg.runtime_dir), "%s", dir);
    d.names = names_create();
    names_set_hold(d.names, hold_ms);
}

static void daemon_down(void)
{
    names_file_close(d.names_file);
    d.names_file = NULL;
    uv_run(&loop, UV_RUN_NOWAIT);
    assert_int_equal(uv_loop_close(&loop), 0);
    names_destroy(d.names);
    d.names = NULL;
}

/* Run the loop until the keeper wrote `writes` files (bounded: 10 s). */
static void until_written(uint64_t writes)
{
    for (int i = 0; i < 1000 && names_file_writes(d.names_file) < writes; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        if (names_file_writes(d.names_file) < writes)
            usleep(10000);
    }
    assert_int_equal(names_file_writes(d.names_file), writes);
}

static void test_keeper(void **state)
{
    char name[64], p[256];
    uid_t holder, uid;
    struct names_file *second = NULL;
    struct stat st;
    (void)state;

    daemon_up(60000);
    assert_int_equal(names_file_open(&d, &d.names_file), 0);
    assert_non_null(d.names_file);
    /* One daemon a folder. */
    assert_int_equal(names_file_open(&d, &second), B10_ERR_EXISTS);
    assert_null(second);
    /* Nothing to write until something changes; a burst of claims is one write. */
    uv_run(&loop, UV_RUN_NOWAIT);
    assert_int_equal(names_file_writes(d.names_file), 0);
    for (unsigned i = 0; i < 50; i++) {
        snprintf(name, sizeof(name), "rank-%u", i);
        assert_int_equal(names_claim(d.names, name, 1000 + i % 2, &holder), 0);
    }
    until_written(1);
    names_release(d.names, "rank-0");
    names_release(d.names, "rank-1");
    until_written(2);
    path_of(p, sizeof(p), "names");
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    path_of(p, sizeof(p), "names.tmp");
    assert_int_equal(stat(p, &st), -1);
    /* Closed, it writes once more; the next start has every claim back, idle. */
    names_claim(d.names, "last-one", 1002, &holder);
    daemon_down();

    daemon_up(60000);
    assert_int_equal(names_file_open(&d, &d.names_file), 0);
    assert_int_equal(names_count(d.names), 51);
    assert_true(names_holder(d.names, "last-one", &uid));
    assert_int_equal(uid, 1002);
    assert_int_equal(names_claim(d.names, "rank-3", 1000, &holder), B10_ERR_PERMISSION);
    assert_int_equal(holder, 1001);
    assert_int_equal(names_claim(d.names, "rank-3", 1001, &holder), 0);
    daemon_down();

    /*
     * Started two minutes later (the table's clock says so) under a hold of one: every
     * claim that was idle when written is past it; rank-3's rank was connected then
     * (nothing released it here), so its hold runs from this start.
     */
    daemon_up(60000);
    clock_ms = names_now(d.names) + 120000;
    names_set_clock(d.names, test_clock, NULL);
    assert_int_equal(names_file_open(&d, &d.names_file), 0);
    assert_int_equal(names_count(d.names), 1);
    assert_true(names_holder(d.names, "rank-3", &uid));
    until_written(1);
    daemon_down();
}

/* A refused file: the start goes on with no names, and the file is moved aside. */
static void test_keeper_refuses(void **state)
{
    char p[256], q[256];
    struct stat st;
    uid_t holder;
    (void)state;

    path_of(p, sizeof(p), "names");
    path_of(q, sizeof(q), "names.refused");
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "b10names garbage", 16), 16);
    close(fd);
    daemon_up(60000);
    assert_int_equal(names_file_open(&d, &d.names_file), 0);
    assert_int_equal(names_count(d.names), 0);
    assert_int_equal(stat(q, &st), 0);
    assert_int_equal(st.st_size, 16);
    /* And it serves: a name is taken, and written in a file of its own. */
    assert_int_equal(names_claim(d.names, "fresh", 1000, &holder), 0);
    until_written(1);
    daemon_down();
    uint8_t *got;
    size_t len;
    fd = dir_fd();
    assert_int_equal(names_file_read(fd, &got, &len, why, sizeof(why)), 0);
    close(fd);
    free(got);
    /* Without a folder, nothing is kept and nothing fails. */
    daemon_up(60000);
    d.cfg.runtime_dir[0] = '\0';
    assert_int_equal(names_file_open(&d, &d.names_file), 0);
    assert_null(d.names_file);
    daemon_down();
    /* A folder others may write: the start fails. */
    assert_int_equal(chmod(dir, 0777), 0);
    daemon_up(60000);
    assert_int_equal(names_file_open(&d, &d.names_file), B10_ERR_INVALID_ARG);
    assert_null(d.names_file);
    daemon_down();
    assert_int_equal(chmod(dir, 0700), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fields_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounds_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_read_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dir_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keeper, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keeper_refuses, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
