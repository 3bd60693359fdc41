/*
 * test-peer-dispatch.c — daemon/link/peer-dispatch.c: stray messages, said
 * once a burst.
 *
 * After a cancel, the sender's chunks in flight keep landing on the
 * transfer's quarantined tags for a while. Each is dropped and counted as
 * before; the log says the first of a sender's burst as it comes, with what
 * it was, and then one line when the sender has been quiet for 2 s: how many,
 * from whom (the daemon the tags were quarantined for), over how long, of
 * which kinds. The sweep that ends bursts is the handshakes' (driven by hand
 * here, on the test's clock); the daemon is peer-fixture.h's.
 */
#include "peer-fixture.h"

#include "log.h"

/* ---------------------------------------------------------------- the log, captured */

static char log_text[16384];
static int log_saved = -1;
static FILE *log_file;

static void log_capture(void)
{
    log_setup(LOG_LEVEL_INFO, "t");
    fflush(stderr);
    log_file = tmpfile();
    assert_non_null(log_file);
    log_saved = dup(STDERR_FILENO);
    assert_true(log_saved >= 0);
    assert_true(dup2(fileno(log_file), STDERR_FILENO) >= 0);
}

/* What was logged since log_capture(); capturing goes on. */
static const char *log_so_far(void)
{
    /* The file's own offset is the log's, shared through dup2: read it without moving it. */
    fflush(stderr);
    off_t end = lseek(fileno(log_file), 0, SEEK_END);
    assert_true(end >= 0 && (size_t)end < sizeof(log_text));
    ssize_t n = pread(fileno(log_file), log_text, (size_t)end, 0);
    assert_int_equal(n, end);
    log_text[n] = '\0';
    return log_text;
}

static void log_release(void)
{
    if (log_file == NULL)
        return;
    fflush(stderr);
    assert_true(dup2(log_saved, STDERR_FILENO) >= 0);
    close(log_saved);
    fclose(log_file);
    log_file = NULL;
}

/* Lines of the log so far that hold what. */
static unsigned log_lines(const char *what)
{
    unsigned n = 0;
    for (const char *at = log_so_far(); (at = strstr(at, what)) != NULL; at += strlen(what))
        n++;
    return n;
}

static unsigned log_all_lines(void)
{
    unsigned n = 0;
    for (const char *c = log_so_far(); *c != '\0'; c++)
        n += *c == '\n';
    return n;
}

/* ---------------------------------------------------------------- helpers */

/* A transfer's data tag of sender from, failed: quarantined for it as xfer.c does. */
static uint64_t late_tag(uint64_t n, uint64_t from)
{
    uint64_t tag = (UINT64_C(0x5a5a0000) + n) & ~TAG_CLASS_CONTROL;

    assert_int_equal(tags_register(fx_d.tags, tag, &fx_d), 0);
    tags_quarantine(fx_d.tags, tag, fx_clock_ms + fx_d.cfg.quarantine_ttl_ms, from);
    return tag;
}

static void stray_at(uint64_t ms, uint64_t tag)
{
    fx_clock_ms = ms;
    assert_true(peer_on_data(&fx_d, tag, 4096));
}

static void sweep_at(uint64_t ms)
{
    fx_clock_ms = ms;
    peer_hello_sweep(&fx_d);
}

/* ---------------------------------------------------------------- tests */

/*
 * Forty late DATA after a cancel: the counter counts forty, the log has the
 * first as it came and one summary once the sender was quiet for 2 s, and
 * nothing more; a later burst starts over.
 */
static void test_burst_is_one_summary(void **state)
{
    uint64_t tags[5], late0 = fx_d.stats.late_completions;

    fx_peer("node-b", 0xb1, 100);
    for (unsigned i = 0; i < 5; i++)
        tags[i] = late_tag(i, 0xb1);
    log_capture();
    for (unsigned i = 0; i < 40; i++) {
        stray_at(2000 + 50 * i, tags[i % 5]);
        if (i % 20 == 19)
            sweep_at(fx_clock_ms);      /* the sweep runs meanwhile: the burst goes on */
    }
    assert_int_equal(fx_d.stats.late_completions - late0, 40);
    assert_int_equal(log_lines("dropping a stray 4096-byte message on the quarantined tag"), 1);
    assert_int_equal(log_lines("from peer node-b; more are summed up once they stop\n"), 1);
    sweep_at(3950 + 1999);
    assert_int_equal(log_all_lines(), 1);
    sweep_at(3950 + 2000);
    assert_int_equal(log_lines("40 stray messages from peer node-b over 1.9 s "
                               "(kinds: 40 on quarantined tags)\n"), 1);
    assert_int_equal(log_all_lines(), 2);
    sweep_at(20000);
    assert_int_equal(log_all_lines(), 2);

    /* The next burst is said anew: its first, then its summary. */
    stray_at(30000, tags[0]);
    stray_at(30100, tags[1]);
    sweep_at(33000);
    assert_int_equal(log_lines("dropping a stray"), 2);
    assert_int_equal(log_lines("2 stray messages from peer node-b over 0.1 s"), 1);
    assert_int_equal(log_all_lines(), 4);
    log_release();
}

/* One stray alone: its line says it all, and no summary follows. */
static void test_single_stray_no_summary(void **state)
{
    fx_peer("node-b", 0xb1, 100);
    uint64_t tag = late_tag(1, 0xb1);

    log_capture();
    stray_at(5000, tag);
    sweep_at(9000);
    assert_int_equal(log_lines("dropping a stray"), 1);
    assert_int_equal(log_lines("stray message"), 0);
    assert_int_equal(log_all_lines(), 1);
    log_release();
}

/*
 * Each sender's burst apart, by the daemon its tags were quarantined for:
 * its kinds counted (late DATA, control of a retired link), a tag nobody
 * quarantined put down to an unknown sender. At most one first line a
 * second, all senders together: a burst whose first went unsaid is summed
 * up even when it was one message.
 */
static void test_senders_and_kinds(void **state)
{
    uint64_t stale0 = fx_d.stats.stale_messages, late0 = fx_d.stats.late_completions;

    fx_peer("node-b", 0xb1, 100);
    fx_peer("node-c", 0xc1, 100);
    uint64_t b_data = late_tag(1, 0xb1);
    uint64_t c_control = TAG_CLASS_CONTROL | 0x77;
    assert_int_equal(tags_register(fx_d.tags, c_control, &fx_d), 0);
    tags_quarantine(fx_d.tags, c_control, fx_clock_ms + 1000000, 0xc1);

    log_capture();
    stray_at(5000, b_data);
    fx_clock_ms = 5100;
    assert_null(peer_take_control(&fx_d, c_control, 300));
    assert_null(peer_take_control(&fx_d, c_control, 300));
    stray_at(5200, 0x1234);            /* no one's */
    stray_at(5300, b_data);
    assert_int_equal(fx_d.stats.late_completions - late0, 2);
    assert_int_equal(fx_d.stats.stale_messages - stale0, 3);
    assert_int_equal(log_all_lines(), 1);      /* node-b's first; the others within its second */
    sweep_at(7400);
    assert_int_equal(log_lines("2 stray messages from peer node-b over 0.3 s "
                               "(kinds: 2 on quarantined tags)\n"), 1);
    assert_int_equal(log_lines("2 stray messages from peer node-c over 0.0 s "
                               "(kinds: 2 control of no live link)\n"), 1);
    assert_int_equal(log_lines("1 stray message from an unknown sender over 0.0 s "
                               "(kinds: 1 on unknown tags)\n"), 1);
    assert_int_equal(log_all_lines(), 4);
    log_release();
}

/* A burst that does not stop is summed up once a minute all the same, and at its end. */
static void test_endless_burst_once_a_minute(void **state)
{
    fx_peer("node-b", 0xb1, 100);
    uint64_t tag = late_tag(1, 0xb1);

    log_capture();
    for (uint64_t ms = 10000; ms < 10000 + 130000; ms += 250) {
        stray_at(ms, tag);
        if (ms % 1000 == 0)
            sweep_at(ms);
    }
    assert_int_equal(log_lines("; more still coming\n"), 2);
    sweep_at(10000 + 130000 + 2000);
    assert_int_equal(log_lines("stray messages from peer node-b"), 3);
    assert_int_equal(log_all_lines(), 4);
    log_release();
}

/* A burst still open when the daemon stops is summed up then. */
static void test_summed_up_at_stop(void **state)
{
    fx_peer("node-b", 0xb1, 100);
    uint64_t tag = late_tag(1, 0xb1);

    log_capture();
    stray_at(5000, tag);
    stray_at(5500, tag);
    peer_dispatch_stop(&fx_d);
    assert_int_equal(log_lines("2 stray messages from peer node-b over 0.5 s"), 1);
    assert_int_equal(log_all_lines(), 2);
    log_release();
}

/* A test that failed while the log was captured shows what it logged, on stderr again. */
static int teardown(void **state)
{
    if (log_file != NULL) {
        const char *text = log_so_far();
        log_release();
        fprintf(stderr, "the log so far:\n%s", text);
    }
    return fx_teardown(state);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_burst_is_one_summary),
        T(test_single_stray_no_summary),
        T(test_senders_and_kinds),
        T(test_endless_burst_once_a_minute),
        T(test_summed_up_at_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
