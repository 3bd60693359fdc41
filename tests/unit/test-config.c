/*
 * test-config.c — daemon/base/config.c: the daemon's options, their bounds and
 * the relations between them.
 *
 * Every refusal is checked twice: config_parse returns B10_ERR_INVALID_ARG and says on
 * stderr which option was wrong, and the nearest value that is allowed
 * parses. The bounds come from a table written from --help's text, so the
 * help, the parser and this table must agree; values are read back through
 * config_print, which also proves each option lands in its own field.
 */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config-table.h"
#include "config.h"
#include "log.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

/* ---------------------------------------------------------------- capturing output */

static char out_text[64 << 10], err_text[16 << 10];

struct capture {
    int fd, saved;
    FILE *file;
};

static void capture_begin(struct capture *c, int fd)
{
    fflush(stdout);
    fflush(stderr);
    c->fd = fd;
    c->file = tmpfile();
    assert_non_null(c->file);
    c->saved = dup(fd);
    assert_true(c->saved >= 0);
    assert_true(dup2(fileno(c->file), fd) >= 0);
}

static void capture_end(struct capture *c, char *buf, size_t size)
{
    fflush(stdout);
    fflush(stderr);
    assert_true(dup2(c->saved, c->fd) >= 0);
    close(c->saved);
    rewind(c->file);
    size_t n = fread(buf, 1, size - 1, c->file);
    buf[n] = '\0';
    fclose(c->file);
}

/* config_parse of "b10d" and the words up to NULL; stdout and stderr kept in out_text, err_text. */
static b10_status_t parse_argv(struct config *cfg, const char *const *words)
{
    char *argv[64];
    int argc = 0;
    struct capture out, err;

    argv[argc++] = "b10d";
    for (; *words != NULL; words++) {
        assert_true(argc < 63);
        argv[argc++] = (char *)*words;
    }
    argv[argc] = NULL;
    capture_begin(&out, STDOUT_FILENO);
    capture_begin(&err, STDERR_FILENO);
    b10_status_t rc = config_parse(cfg, argc, argv);
    capture_end(&err, err_text, sizeof(err_text));
    capture_end(&out, out_text, sizeof(out_text));
    return rc;
}

#define PARSE(cfg, ...) parse_argv((cfg), (const char *const[]){ __VA_ARGS__, NULL })

/* Defaults, then the words: the outcome. */
#define FRESH(...) fresh_parse((const char *const[]){ __VA_ARGS__, NULL })

static struct config cfg;

static b10_status_t fresh_parse(const char *const *words)
{
    config_defaults(&cfg);
    return parse_argv(&cfg, words);
}

/* A refusal: B10_ERR_INVALID_ARG, nothing on stdout, and a line on stderr that names what was wrong. */
static void refused(b10_status_t rc, const char *names)
{
    assert_int_equal(rc, B10_ERR_INVALID_ARG);
    if (strstr(err_text, "b10d: ") == NULL || strstr(err_text, names) == NULL)
        fail_msg("the refusal says \"%s\", which does not name \"%s\"", err_text, names);
    assert_string_equal(out_text, "");
}

static void allowed(b10_status_t rc)
{
    if (rc != B10_OK || cfg.info_only)
        fail_msg("refused (%d): %s", rc, err_text);
    assert_string_equal(err_text, "");
}

/* The value config_print shows for key. */
static uint64_t printed(const struct config *c, const char *key)
{
    struct capture out;
    char line[128];

    capture_begin(&out, STDOUT_FILENO);
    config_print(c, "", 0);
    capture_end(&out, out_text, sizeof(out_text));
    snprintf(line, sizeof(line), "\n%s ", key);
    const char *at = strstr(out_text, line);
    if (at == NULL)
        fail_msg("config_print shows no %s", key);
    return strtoull(at + strlen(line), NULL, 10);
}

/* ---------------------------------------------------------------- sizes */

static void size_ok(const char *text, uint64_t want)
{
    uint64_t v = 12345;
    if (config_parse_size(text, &v) != 0)
        fail_msg("'%s' refused", text);
    assert_int_equal(v, want);
}

static void size_bad(const char *text)
{
    uint64_t v = 12345;
    if (config_parse_size(text, &v) == 0)
        fail_msg("'%s' accepted as %llu", text, (unsigned long long)v);
    assert_int_equal(v, 12345);     /* written only on success */
}

static void test_parse_size(void **state)
{
    size_ok("0", 0);
    size_ok("4096", 4096);
    size_ok("1k", KiB);
    size_ok("1K", KiB);
    size_ok("3m", 3 * MiB);
    size_ok("8M", 8 * MiB);
    size_ok("8MiB", 8 * MiB);
    size_ok("8MB", 8 * MiB);
    size_ok("2g", 2 * GiB);
    size_ok("2GiB", 2 * GiB);
    size_ok("18446744073709551615", UINT64_MAX);
    size_ok("17179869183G", 17179869183ull * GiB);

    size_bad("");
    size_bad("-1");
    size_bad("-0");
    size_bad("M");
    size_bad("1T");          /* no unit past G */
    size_bad("1x");
    size_bad("1.5M");
    size_bad("1 M");
    size_bad("1MiBs");
    size_bad("1MBB");
    size_bad("1B");          /* B only after a unit */
    size_bad("18446744073709551616");      /* past 64 bits */
    size_bad("17179869184G");              /* 2^64 bytes */
    size_bad("18014398509481984K");
    /* strtoull takes a sign after blanks: a negative size must not come back as 2^64 - 1. */
    size_bad(" -1");
    size_bad("\t-1M");
    size_bad(" 8M");
    size_bad("+8M");
}

/* ---------------------------------------------------------------- names */

static void test_names(void **state)
{
    char name[CONFIG_NAME_MAX + 1];

    assert_true(config_name_ok("a"));
    assert_true(config_name_ok("node-1.rack_2"));
    memset(name, 'x', sizeof(name));
    name[CONFIG_NAME_MAX - 1] = '\0';
    assert_true(config_name_ok(name));          /* 63 characters */
    name[CONFIG_NAME_MAX - 1] = 'x';
    name[CONFIG_NAME_MAX] = '\0';
    assert_false(config_name_ok(name));         /* 64 */
    assert_false(config_name_ok(""));
    assert_false(config_name_ok("a b"));
    assert_false(config_name_ok("a/b"));
    assert_false(config_name_ok("a:b"));
    assert_false(config_name_ok("n\xc3\xa9"));

    assert_string_equal(config_verify_name(CONFIG_VERIFY_ON), "on");
    assert_string_equal(config_verify_name(CONFIG_VERIFY_AUTO), "auto");
    assert_string_equal(config_verify_name(CONFIG_VERIFY_OFF), "off");
    assert_string_equal(config_gpu_copy_name(CONFIG_GPU_COPY_ENGINE), "engine");
    assert_string_equal(config_gpu_copy_name(CONFIG_GPU_COPY_KERNEL), "kernel");
    assert_string_equal(config_gpu_copy_name(CONFIG_GPU_COPY_AUTO), "auto");
    assert_string_equal(config_gpu_calls_name(CONFIG_GPU_CALLS_AUTO), "auto");
    assert_string_equal(config_gpu_calls_name(CONFIG_GPU_CALLS_SINGLE), "single");
    assert_string_equal(config_gpu_calls_name(CONFIG_GPU_CALLS_BATCH), "batch");
}

/* ---------------------------------------------------------------- defaults */

static void test_defaults(void **state)
{
    setenv("B10_SOCKET", "/tmp/b10-test.sock", 1);
    config_defaults(&cfg);
    assert_string_equal(cfg.socket_path, "/tmp/b10-test.sock");
    setenv("B10_SOCKET", "", 1);
    config_defaults(&cfg);
    assert_string_equal(cfg.socket_path, B10D_SOCKET_DEFAULT);
    unsetenv("B10_SOCKET");
    config_defaults(&cfg);
    assert_string_equal(cfg.socket_path, B10D_SOCKET_DEFAULT);
    /* The host's name, made a name other daemons accept. */
    assert_true(config_name_ok(cfg.name));
    assert_int_equal(cfg.quarantine_ttl_ms, 120000);
    assert_int_equal(cfg.view_bytes, 4 * MiB);
    assert_int_equal(cfg.staging_bytes, 512 * MiB);

    /* Names are kept where systemd's RuntimeDirectory= is, the first of its list; else nowhere. */
    setenv("RUNTIME_DIRECTORY", "/run/b10d/state:/run/other", 1);
    config_defaults(&cfg);
    assert_string_equal(cfg.runtime_dir, "/run/b10d/state");
    unsetenv("RUNTIME_DIRECTORY");
    config_defaults(&cfg);
    assert_string_equal(cfg.runtime_dir, "");
    assert_int_equal(cfg.name_hold_ms, 86400000);

    /* The defaults pass their own checks, and say so with nothing on stderr. */
    allowed(FRESH("--name", "n1"));
    assert_int_equal(cfg.max_clients_per_uid, 192);    /* three quarters of 256 */
    assert_int_equal(cfg.max_in_flight, 4);
}

/* ---------------------------------------------------------------- numeric bounds */

struct bound {
    const char *name;
    bool size;
    uint64_t min, max;
};

/* From --help. */
static const struct bound bounds[] = {
    { "staging-bytes", true, 4 * MiB, 1024 * GiB },
    { "view-bytes", true, 64 * KiB, GiB },
    { "eager-bytes", true, 0, GiB },
    { "max-in-flight", false, 1, 64 },
    { "wire-lanes", false, 0, 8 },
    { "deadline-ms", false, 1, 3600000 },
    { "max-deadline-ms", false, 1, 3600000 },
    { "connect-timeout-ms", false, 1, 600000 },
    { "peer-timeout-ms", false, 0, 600000 },
    { "drain-timeout-ms", false, 0, 600000 },
    { "max-admin-rows", false, 1, 1048576 },
    { "quarantine-ttl-ms", false, 1, 86400000 },
    { "quarantine-budget", true, 0, 1024 * GiB },
    { "max-clients", false, 1, 65536 },
    { "max-clients-per-uid", false, 1, 65536 },
    { "max-regions", false, 1, 1048576 },
    { "max-agents", false, 1, 1048576 },
    { "max-xfers", false, 1, 65536 },
    { "max-spans", false, 1, 16777216 },
    { "max-xfer-bytes", true, MiB, 16384 * GiB },
    { "max-frame", true, 64 * KiB, GiB },
    { "max-peers", false, 1, 65536 },
    { "max-control-bytes", true, 4 * KiB, GiB },
    { "gpu-max-ctas", false, 1, 1024 },
    { "gpu-feeds", false, 1, 8 },
    { "max-peer-xfers", false, 1, 65536 },
    { "max-peer-staging", true, 0, 1024 * GiB },
    { "max-peer-control", true, 4 * KiB, 16 * GiB },
    { "min-deadline-ms", false, 1, 60000 },
    { "peer-quarantine-bytes", true, 0, 1024 * GiB },
    { "peer-idle-ms", false, 1000, 86400000 },
    { "max-hellos-per-s", false, 1, 100000 },
    { "max-notice-bytes", true, 64 * KiB, 128 * MiB },
    { "settle-ms", false, 10, 600000 },
    { "max-register-bytes", true, MiB, 1024 * 1024 * GiB },
    { "hello-timeout-ms", false, 100, 600000 },
    { "days", false, 1, 36500 },
    { "name-hold-ms", false, 1000, 2592000000u },
};

/*
 * One option alone, its relations to the others left out: --gen-key makes
 * config_parse stop before config_check (main makes a key and exits).
 */
static b10_status_t one_option(const char *name, const char *value)
{
    char opt[64];
    snprintf(opt, sizeof(opt), "--%s", name);
    return FRESH("--gen-key", "/nonexistent/key", "--max-clients", "65536", opt, value);
}

/*
 * The value b's option took. config_print shows what the daemon will use, and
 * for two options that is derived from others (config_peer_staging,
 * config_peer_quarantine): for those, the option as set, once the printed
 * value is checked to be the derived one.
 */
static uint64_t cfg_value_shown(const struct bound *b)
{
    uint64_t shown = printed(&cfg, b->name);
    if (strcmp(b->name, "max-peer-staging") == 0) {
        assert_int_equal(shown, config_peer_staging(&cfg));
        return cfg.max_peer_staging;
    }
    if (strcmp(b->name, "peer-quarantine-bytes") == 0) {
        assert_int_equal(shown, config_peer_quarantine(&cfg));
        return cfg.peer_quarantine_bytes;
    }
    return shown;
}

static void test_numeric_bounds(void **state)
{
    char text[32], opt[64];

    for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
        const struct bound *b = &bounds[i];
        snprintf(opt, sizeof(opt), "--%s", b->name);

        snprintf(text, sizeof(text), "%llu", (unsigned long long)b->min);
        allowed(one_option(b->name, text));
        assert_int_equal(cfg_value_shown(b), b->min);
        snprintf(text, sizeof(text), "%llu", (unsigned long long)b->max);
        allowed(one_option(b->name, text));
        assert_int_equal(cfg_value_shown(b), b->max);

        snprintf(text, sizeof(text), "%llu", (unsigned long long)b->max + 1);
        refused(one_option(b->name, text), opt);
        assert_non_null(strstr(err_text, "out of range"));
        if (b->min > 0) {
            snprintf(text, sizeof(text), "%llu", (unsigned long long)b->min - 1);
            refused(one_option(b->name, text), opt);
            assert_non_null(strstr(err_text, "out of range"));
        }
        refused(one_option(b->name, "-1"), opt);
        refused(one_option(b->name, ""), opt);
        refused(one_option(b->name, "ten"), opt);
        refused(one_option(b->name, "99999999999999999999999"), opt);
        /* A negative behind a blank is not a number either, and is not called one out of range. */
        refused(one_option(b->name, " -1"), opt);
        assert_null(strstr(err_text, "out of range"));
        /* Units only where sizes are meant, and then they count. */
        if (b->size) {
            assert_non_null(strstr(err_text, "size"));
            snprintf(text, sizeof(text), "%lluK", (unsigned long long)(b->min + KiB - 1) / KiB);
            allowed(one_option(b->name, text));
            assert_int_equal(cfg_value_shown(b), (b->min + KiB - 1) / KiB * KiB);
        } else {
            assert_non_null(strstr(err_text, "number"));
            refused(one_option(b->name, "1K"), opt);
            refused(one_option(b->name, "5 "), opt);
        }
    }
}

/* --help lists every option of the table, with the same bounds the parser applies. */
static void test_help(void **state)
{
    char opt[64];

    config_defaults(&cfg);
    assert_int_equal(PARSE(&cfg, "--help"), B10_OK);
    assert_true(cfg.info_only);
    assert_non_null(strstr(out_text, "usage: b10d"));
    for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
        snprintf(opt, sizeof(opt), "--%s ", bounds[i].name);
        if (strstr(out_text, opt) == NULL)
            fail_msg("--help does not mention %s", opt);
    }
    assert_string_equal(err_text, "");
    assert_int_equal(FRESH("-h"), B10_OK);
    assert_true(cfg.info_only);
    assert_non_null(strstr(out_text, "usage: b10d"));
    assert_int_equal(FRESH("--version"), B10_OK);
    assert_true(cfg.info_only);
    assert_non_null(strstr(out_text, "b10d "));
    assert_non_null(strstr(out_text, "(protocol "));
}

/*
 * A number in the help's words, "512M", "4T", "30000", at text: its value
 * into *v_p and where it ends; NULL when text holds no number.
 */
static const char *help_number(const char *text, uint64_t *v_p)
{
    char *end;
    uint64_t v = strtoull(text, &end, 10);

    if (end == text || text[0] < '0' || text[0] > '9')
        return NULL;
    switch (*end) {
    case 'K': v <<= 10; end++; break;
    case 'M': v <<= 20; end++; break;
    case 'G': v <<= 30; end++; break;
    case 'T': v <<= 40; end++; break;
    case 'P': v <<= 50; end++; break;
    }
    *v_p = v;
    return end;
}

/*
 * What --help says of a number is what the daemon does: the default it
 * names is config_defaults()'s (a default in words, "a quarter of
 * --staging-bytes", is one the start derives from a 0), and the bounds it
 * names ("at most 1T", "4M..1T") are the parser's.
 */
static void test_help_says_defaults_and_bounds(void **state)
{
    unsigned checked = 0;

    config_defaults(&cfg);
    for (size_t i = 0; i < config_table_count; i++) {
        const struct config_opt *o = &config_table[i];
        const char *help = o->doc.help, *at;
        uint64_t v, lo, hi;

        if (!o->num)
            continue;
        uint64_t dflt = o->width == 8 ? *(const uint64_t *)((const char *)&cfg + o->offset)
                                      : *(const uint32_t *)((const char *)&cfg + o->offset);
        if ((at = strstr(help, "default")) == NULL)
            fail_msg("--%s: its help names no default", o->doc.name);
        at += strlen("default");
        at += strspn(at, " :\n");
        if (help_number(at, &v) != NULL) {
            if (v != dflt)
                fail_msg("--%s: the help says default %llu, config_defaults %llu", o->doc.name,
                         (unsigned long long)v, (unsigned long long)dflt);
        } else if (dflt != 0) {
            fail_msg("--%s: a default in words, but config_defaults sets %llu", o->doc.name,
                     (unsigned long long)dflt);
        }
        if ((at = strstr(help, "at most ")) != NULL && help_number(at + 8, &hi) != NULL &&
            hi != o->max)
            fail_msg("--%s: the help says at most %llu, the parser %llu", o->doc.name,
                     (unsigned long long)hi, (unsigned long long)o->max);
        for (at = help; (at = strstr(at, "..")) != NULL; at += 2) {
            const char *from = at;
            while (from > help && (isalnum((unsigned char)from[-1])))
                from--;
            if (help_number(from, &lo) != at || help_number(at + 2, &hi) == NULL)
                continue;
            /* "200..600000; 0: off": 0 stands apart from the range (config_check). */
            bool off = strstr(help, "0: off") != NULL;
            if (hi != o->max || (lo != o->min && !(off && o->min == 0)))
                fail_msg("--%s: the help says %llu..%llu, the parser %llu..%llu", o->doc.name,
                         (unsigned long long)lo, (unsigned long long)hi,
                         (unsigned long long)o->min, (unsigned long long)o->max);
        }
        checked++;
    }
    /* Every number: those of bounds[], and --max-host-bytes-per-uid and --door-port. */
    assert_int_equal(checked, sizeof(bounds) / sizeof(bounds[0]) + 2);
}

/* --man=options: an entry for each option --help lists; another section is refused. */
static void test_man_entries(void **state)
{
    char opt[80];

    config_defaults(&cfg);
    assert_int_equal(PARSE(&cfg, "--man=options"), B10_OK);
    assert_true(cfg.info_only);
    assert_string_equal(err_text, "");
    for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
        snprintf(opt, sizeof(opt), ".BI \\-\\-");
        for (const char *c = bounds[i].name; *c != '\0'; c++)
            snprintf(opt + strlen(opt), sizeof(opt) - strlen(opt), *c == '-' ? "\\-" : "%c", *c);
        if (strstr(out_text, opt) == NULL)
            fail_msg("--man=options has no entry %s", opt);
    }
    assert_non_null(strstr(out_text, ".BR \\-s \", \" \\-\\-socket \" \\fIPATH\\fR\"\n"));
    assert_non_null(strstr(out_text, ".B \\-\\-check\\-config\n"));
    assert_non_null(strstr(out_text, ".SS \"Trust between daemons\"\n"));
    assert_null(strstr(out_text, "\\-\\-man"));        /* it documents no one */
    refused(FRESH("--man=everything"), "--man");
}

/* ---------------------------------------------------------------- words */

static void test_word_options(void **state)
{
    static const struct {
        const char *opt, *bad;
        const char *good[3];
    } words[] = {
        { "--log-level", "loud", { "err", "warning", "debug" } },
        { "--ucx-err-mode", "all", { "peer", "none", NULL } },
        { "--progress", "busy", { "spin", "event", "auto" } },
        { "--verify-data", "yes", { "on", "auto", "off" } },
        { "--gpu-copy", "dma", { "engine", "kernel", "auto" } },
        { "--gpu-copy-calls", "many", { "auto", "single", "batch" } },
        { "--remote-access", "none", { "any", "paired", NULL } },
    };

    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        refused(FRESH(words[i].opt, words[i].bad), words[i].opt);
        assert_non_null(strstr(err_text, words[i].bad));
        refused(FRESH(words[i].opt, ""), words[i].opt);
        for (int k = 0; k < 3 && words[i].good[k] != NULL; k++)
            allowed(FRESH(words[i].opt, words[i].good[k]));
    }
    allowed(FRESH("--log-level", "DEBUG", "--ucx-err-mode", "none", "--progress", "spin",
                  "--verify-data", "on", "--gpu-copy", "kernel", "--remote-access", "paired",
                  "--gpu-copy-calls", "batch"));
    assert_int_equal(cfg.gpu_copy_calls, CONFIG_GPU_CALLS_BATCH);
    assert_int_equal(cfg.log_level, LOG_LEVEL_DEBUG);
    assert_int_equal(cfg.err_mode, CONFIG_ERR_MODE_NONE);
    assert_true(cfg.progress_spin);
    assert_int_equal(cfg.verify_data, CONFIG_VERIFY_ON);
    assert_int_equal(cfg.gpu_copy, CONFIG_GPU_COPY_KERNEL);
    assert_int_equal(cfg.remote_access, CONFIG_REMOTE_PAIRED);
    allowed(FRESH("--progress", "event", "--verify-data", "off", "--gpu-copy", "engine",
                  "--insecure", "--trace"));
    assert_int_equal(cfg.gpu_copy_calls, CONFIG_GPU_CALLS_AUTO);
    assert_false(cfg.progress_spin);
    assert_int_equal(cfg.verify_data, CONFIG_VERIFY_OFF);
    assert_int_equal(cfg.gpu_copy, CONFIG_GPU_COPY_ENGINE);
    assert_true(cfg.insecure);
    assert_true(cfg.trace);
}

/* ---------------------------------------------------------------- strings */

static void test_string_options(void **state)
{
    char s[300];

    memset(s, 'a', sizeof(s));
    s[0] = '/';
    s[107] = '\0';                              /* sun_path holds 107 and its NUL */
    allowed(FRESH("--socket", s));
    assert_string_equal(cfg.socket_path, s);
    s[107] = 'a';
    s[108] = '\0';
    refused(FRESH("--socket", s), "--socket");
    refused(FRESH("-s", ""), "--socket");
    allowed(FRESH("-s", "/tmp/x.sock"));
    assert_string_equal(cfg.socket_path, "/tmp/x.sock");

    memset(s, 'k', sizeof(s));
    s[0] = '/';
    s[255] = '\0';
    allowed(FRESH("--cluster-key", s, "--cluster-key-next", "/k2"));
    assert_string_equal(cfg.cluster_key, s);
    assert_string_equal(cfg.cluster_key_next, "/k2");
    s[255] = 'a';
    s[256] = '\0';
    refused(FRESH("--cluster-key", s), "--cluster-key");
    refused(FRESH("--cluster-key-next", s), "--cluster-key-next");
    refused(FRESH("--gen-key", s), "--gen-key");
    refused(FRESH("--cluster-key", ""), "--cluster-key");
    /* A rotation names two keys, not one twice. */
    refused(FRESH("--cluster-key", "/k", "--cluster-key-next", "/k"), "--cluster-key-next");

    /* --name: its length first, then its characters. */
    memset(s, 'n', sizeof(s));
    s[CONFIG_NAME_MAX - 1] = '\0';
    allowed(FRESH("--name", s));
    assert_string_equal(cfg.name, s);
    s[CONFIG_NAME_MAX - 1] = 'n';
    s[CONFIG_NAME_MAX] = '\0';
    refused(FRESH("--name", s), "--name");
    refused(FRESH("--name", ""), "--name");
    refused(FRESH("--name", "a/b"), "--name 'a/b'");
    allowed(FRESH("--name", "node-7.rack_2"));
    assert_string_equal(cfg.name, "node-7.rack_2");

    /* --runtime-dir: a path, or empty for names not kept whatever systemd says. */
    memset(s, 'r', sizeof(s));
    s[0] = '/';
    s[255] = '\0';
    allowed(FRESH("--runtime-dir", s));
    assert_string_equal(cfg.runtime_dir, s);
    s[255] = 'r';
    s[256] = '\0';
    refused(FRESH("--runtime-dir", s), "--runtime-dir");
    setenv("RUNTIME_DIRECTORY", "/run/b10d/state", 1);
    allowed(FRESH("--runtime-dir", ""));
    assert_string_equal(cfg.runtime_dir, "");
    unsetenv("RUNTIME_DIRECTORY");
}

static void test_net_devices(void **state)
{
    static const char *const good[] = { "all", "lo", "eth0,mlx5_0:1", "ib0.8001,enp1s0-1" };
    static const char *const bad[] = { "", ",eth0", "eth0,", "eth0,,lo", "eth 0", "eth0;lo",
                                       "eth0/1" };
    char s[300];

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        allowed(FRESH("--net-devices", good[i]));
        assert_string_equal(cfg.net_devices, good[i]);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        refused(FRESH("--net-devices", bad[i]), "--net-devices");
    memset(s, 'e', sizeof(s));
    s[255] = '\0';
    allowed(FRESH("--net-devices", s));
    s[255] = 'e';
    s[256] = '\0';
    refused(FRESH("--net-devices", s), "--net-devices");
}

static void test_admin_group(void **state)
{
    allowed(FRESH("--admin-group", "4242"));
    assert_true(cfg.admin_group_set);
    assert_int_equal(cfg.admin_gid, 4242);
    assert_int_equal(printed(&cfg, "admin-group"), 4242);
    allowed(FRESH("--admin-group", "0"));
    assert_int_equal(cfg.admin_gid, 0);
    allowed(FRESH("--name", "n1"));
    assert_false(cfg.admin_group_set);

    refused(FRESH("--admin-group", "no-such-group-b10"), "--admin-group");
    assert_false(cfg.admin_group_set);
    refused(FRESH("--admin-group", "-1"), "--admin-group");
    refused(FRESH("--admin-group", "4294967295"), "--admin-group");
    refused(FRESH("--admin-group", ""), "--admin-group");
}

/* ---------------------------------------------------------------- the command line */

static void test_command_line(void **state)
{
    refused(FRESH("--name", "n1", "stray"), "'stray'");
    assert_int_equal(FRESH("--no-such-option"), B10_ERR_INVALID_ARG);
    assert_non_null(strstr(err_text, "no-such-option"));
    assert_non_null(strstr(err_text, "--help"));
    assert_int_equal(FRESH("--deadline-ms"), B10_ERR_INVALID_ARG);   /* its value missing */
    assert_non_null(strstr(err_text, "deadline-ms"));
    /* --opt=value and the last of two settings. */
    allowed(FRESH("--deadline-ms=2000", "--deadline-ms", "3000"));
    assert_int_equal(cfg.deadline_ms, 3000);

    /* --check-config parses as a start would and asks for the start's checks (main runs them
     * and config_print); a bad option is refused here already. */
    allowed(FRESH("--check-config", "--quarantine-ttl-ms", "777"));
    assert_true(cfg.check_only);
    assert_int_equal(printed(&cfg, "quarantine-ttl-ms"), 777);
    refused(FRESH("--check-config", "--deadline-ms", "0"), "--deadline-ms");

    /* A key to make: nothing else is checked (main writes the key and exits). */
    allowed(FRESH("--gen-key", "/tmp/k", "--deadline-ms", "9000", "--max-deadline-ms", "10"));
    assert_string_equal(cfg.gen_key, "/tmp/k");
}

/* ---------------------------------------------------------------- relations */

static void test_relations(void **state)
{
    /* A pool needs a view for sending and one for receiving. */
    refused(FRESH("--staging-bytes", "8M", "--view-bytes", "8M"), "--view-bytes");
    allowed(FRESH("--staging-bytes", "8M", "--view-bytes", "4M", "--max-in-flight", "2"));
    /* Views of whole pages. */
    refused(FRESH("--view-bytes", "65537"), "multiple of 4096");
    allowed(FRESH("--view-bytes", "69632"));
    assert_int_equal(cfg.view_bytes, 69632);
    /* Liveness: off, or slow enough not to lose a busy peer. */
    refused(FRESH("--peer-timeout-ms", "199"), "--peer-timeout-ms");
    allowed(FRESH("--peer-timeout-ms", "200"));
    allowed(FRESH("--peer-timeout-ms", "0"));
    /* Deadlines in order: min ≤ default ≤ cap. */
    refused(FRESH("--deadline-ms", "5000", "--max-deadline-ms", "4999"), "--max-deadline-ms");
    allowed(FRESH("--deadline-ms", "5000", "--max-deadline-ms", "5000"));
    refused(FRESH("--deadline-ms", "100", "--min-deadline-ms", "101"), "--min-deadline-ms");
    allowed(FRESH("--deadline-ms", "100", "--min-deadline-ms", "100"));
    /* One peer can always send a CONTROL of the largest size. */
    refused(FRESH("--max-control-bytes", "256M"), "--max-peer-control");
    allowed(FRESH("--max-control-bytes", "256M", "--max-peer-control", "256M"));
    /* A peer's share of staging holds one transfer's window, and no more than the pool. */
    refused(FRESH("--max-peer-staging", "16M", "--max-in-flight", "5"), "--max-peer-staging");
    allowed(FRESH("--max-peer-staging", "16M", "--max-in-flight", "4"));
    refused(FRESH("--max-peer-staging", "513M"), "--max-peer-staging");
    allowed(FRESH("--max-peer-staging", "512M"));
}

/* ---------------------------------------------------------------- derived settings */

static void test_derived(void **state)
{
    /* Three quarters of the rank slots to one uid, unless said; never more than all. */
    allowed(FRESH("--max-clients", "8"));
    assert_int_equal(cfg.max_clients_per_uid, 6);
    allowed(FRESH("--max-clients", "1"));
    assert_int_equal(cfg.max_clients_per_uid, 1);
    allowed(FRESH("--max-clients", "8", "--max-clients-per-uid", "3"));
    assert_int_equal(cfg.max_clients_per_uid, 3);
    allowed(FRESH("--max-clients", "8", "--max-clients-per-uid", "100"));
    assert_int_equal(cfg.max_clients_per_uid, 8);

    /* Chunks in flight follow the data lanes, as far as a peer's share holds the window... */
    allowed(FRESH("--wire-lanes", "8"));
    assert_int_equal(cfg.max_in_flight, 8);
    allowed(FRESH("--wire-lanes", "8", "--staging-bytes", "24M", "--view-bytes", "4M"));
    assert_int_equal(cfg.max_in_flight, 6);
    allowed(FRESH("--wire-lanes", "8", "--staging-bytes", "16M", "--view-bytes", "4M"));
    assert_int_equal(cfg.max_in_flight, 4);
    /* ...never below what a transfer had before, and not when the count was given. */
    allowed(FRESH("--wire-lanes", "0"));
    assert_int_equal(cfg.max_in_flight, 4);
    allowed(FRESH("--wire-lanes", "8", "--max-in-flight", "3"));
    assert_int_equal(cfg.max_in_flight, 3);
}

static void test_peer_shares(void **state)
{
    config_defaults(&cfg);
    /* A quarter of the pool... */
    assert_int_equal(config_peer_staging(&cfg), 128 * MiB);
    /* ...at least two windows... */
    cfg.staging_bytes = 64 * MiB;
    assert_int_equal(config_peer_staging(&cfg), 2 * 4 * 4 * MiB);
    /* ...but never past the pool; or what was said. */
    cfg.staging_bytes = 16 * MiB;
    assert_int_equal(config_peer_staging(&cfg), 16 * MiB);
    cfg.max_peer_staging = 5 * MiB;
    assert_int_equal(config_peer_staging(&cfg), 5 * MiB);

    /* A peer's quarantine share, within the whole budget. */
    config_defaults(&cfg);
    assert_int_equal(config_peer_quarantine(&cfg), 64 * MiB);
    cfg.quarantine_budget = 10 * MiB;
    assert_int_equal(config_peer_quarantine(&cfg), 10 * MiB);
    cfg.quarantine_budget = 0;
    assert_int_equal(config_peer_quarantine(&cfg), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_numeric_bounds),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_help_says_defaults_and_bounds),
        cmocka_unit_test(test_man_entries),
        cmocka_unit_test(test_word_options),
        cmocka_unit_test(test_string_options),
        cmocka_unit_test(test_net_devices),
        cmocka_unit_test(test_admin_group),
        cmocka_unit_test(test_command_line),
        cmocka_unit_test(test_relations),
        cmocka_unit_test(test_derived),
        cmocka_unit_test(test_peer_shares),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
