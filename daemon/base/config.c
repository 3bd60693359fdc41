/* config.c — see config.h. */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config-table.h"
#include "frame.h"
#include "log.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

static bool config_name_char(char c);

void config_defaults(struct config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    const char *env = getenv("B10_SOCKET");
    snprintf(cfg->socket_path, sizeof(cfg->socket_path), "%s",
             env != NULL && env[0] != '\0' ? env : B10D_SOCKET_DEFAULT);
    if (gethostname(cfg->name, sizeof(cfg->name)) != 0 || cfg->name[0] == '\0')
        snprintf(cfg->name, sizeof(cfg->name), "b10d");
    cfg->name[sizeof(cfg->name) - 1] = '\0';
    /* Other daemons know this one by its name: keep to the characters a name may have. */
    for (char *c = cfg->name; *c != '\0'; c++)
        if (!config_name_char(*c))
            *c = '-';
    cfg->log_level = LOG_LEVEL_INFO;
    cfg->staging_bytes = 512 * MiB;
    /*
     * Four chunks of 4 MiB in flight per transfer: each UCX worker's copy
     * (CMA, or loopback TCP) runs fastest while the chunks the GPU just wrote
     * are still in the CPU caches. Over shared memory eight chunks of 8 MiB
     * reached about half of ucx_perftest's speed, these about 0.86, with
     * more in flight slower again (the sweeps in tests/bench/README.md, "The
     * defaults"). Tuned on one host; across hosts it is not measured.
     */
    cfg->view_bytes = 4 * MiB;
    cfg->eager_bytes = 512 * KiB;
    cfg->max_in_flight = 4;
    cfg->deadline_ms = 30000;
    cfg->max_deadline_ms = 600000;
    cfg->connect_timeout_ms = 10000;
    cfg->peer_timeout_ms = 10000;
    cfg->drain_timeout_ms = 10000;
    cfg->max_admin_rows = 4096;
    cfg->quarantine_ttl_ms = 120000;
    cfg->quarantine_budget = 256 * MiB;
    cfg->err_mode = CONFIG_ERR_MODE_PEER;
    cfg->progress_spin = sysconf(_SC_NPROCESSORS_ONLN) >= 8;
    cfg->verify_data = CONFIG_VERIFY_AUTO;
    /*
     * Two data lanes: each UCX worker copies on one thread (the CMA copy, or
     * the loopback socket), and with two, two cores copy at once.
     */
    cfg->wire_lanes = 2;
    cfg->max_clients = 256;
    cfg->max_regions = 4096;
    cfg->max_agents = 4096;
    cfg->max_xfers = 1024;
    cfg->max_spans = 1u << 20;
    cfg->max_xfer_bytes = 256 * GiB;
    cfg->max_frame = FRAME_MAX_DEFAULT;
    cfg->max_peers = 1024;
    cfg->max_control_bytes = 64 * MiB;
    cfg->gpu_max_ctas = 32;
    cfg->gpu_feeds = 2;
    /*
     * One peer may hold a share of what is shared (a quarter of the staging
     * views and of the quarantine's budget, config_peer_staging) so that a
     * peer whose transfers misbehave or keep failing spends its own share
     * and the others go on.
     */
    cfg->max_peer_xfers = 512;
    cfg->max_peer_staging = 0;
    cfg->max_peer_control = 128 * MiB;
    cfg->min_deadline_ms = 100;
    cfg->peer_quarantine_bytes = 64 * MiB;
    cfg->peer_idle_ms = 300000;
    cfg->max_hellos_per_s = 64;
    cfg->max_notice_bytes = 16 * MiB;
    cfg->settle_ms = 5000;
    cfg->max_register_bytes = 4096 * GiB;
    cfg->hello_timeout_ms = 10000;
    /*
     * A day: a rank that restarts, or whose job pauses overnight, finds its
     * name its own; a user whose job ended frees it for others by then.
     */
    cfg->name_hold_ms = 86400000;
    /* systemd's RuntimeDirectory= (a list, ':' between; the unit names one). */
    const char *rt = getenv("RUNTIME_DIRECTORY");
    size_t rt_len = rt != NULL ? strcspn(rt, ":") : 0;
    if (rt_len > 0 && rt_len < sizeof(cfg->runtime_dir))
        snprintf(cfg->runtime_dir, sizeof(cfg->runtime_dir), "%.*s", (int)rt_len, rt);
}

/*
 * A quarter of the pool: a peer's views and what its failed transfers left
 * in the quarantine together stay below the receive half of the pool, so
 * one peer never holds every receive view. In a small pool, at least two
 * transfers' windows, so that one failure does not stop the next transfer.
 */
uint64_t config_peer_quarantine(const struct config *cfg)
{
    return cfg->peer_quarantine_bytes < cfg->quarantine_budget ? cfg->peer_quarantine_bytes
                                                               : cfg->quarantine_budget;
}

uint64_t config_peer_staging(const struct config *cfg)
{
    uint64_t windows = 2 * cfg->view_bytes * cfg->max_in_flight;
    uint64_t quarter = cfg->staging_bytes / 4;
    if (cfg->max_peer_staging != 0)
        return cfg->max_peer_staging;
    return quarter > windows ? quarter : windows > cfg->staging_bytes ? cfg->staging_bytes : windows;
}

static bool config_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
}

bool config_name_ok(const char *name)
{
    size_t n = strnlen(name, CONFIG_NAME_MAX);

    if (n == 0 || n >= CONFIG_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!config_name_char(name[i]))
            return false;
    return true;
}

const char *config_verify_name(enum config_verify v)
{
    return v == CONFIG_VERIFY_ON ? "on" : v == CONFIG_VERIFY_AUTO ? "auto" : "off";
}

const char *config_gpu_copy_name(enum config_gpu_copy c)
{
    return c == CONFIG_GPU_COPY_ENGINE ? "engine" : c == CONFIG_GPU_COPY_KERNEL ? "kernel" : "auto";
}

const char *config_gpu_calls_name(enum config_gpu_calls c)
{
    return c == CONFIG_GPU_CALLS_SINGLE ? "single" : c == CONFIG_GPU_CALLS_BATCH ? "batch" : "auto";
}

b10_status_t config_parse_size(const char *text, uint64_t *bytes_p)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    uint64_t unit = 1;

    /* Digits first: strtoull would take blanks and a sign, and turn "-1" into 2^64 - 1. */
    if (errno != 0 || end == text || !isdigit((unsigned char)text[0]))
        return B10_ERR_INVALID_ARG;
    switch (*end) {
    case 'k': case 'K': unit = KiB; end++; break;
    case 'm': case 'M': unit = MiB; end++; break;
    case 'g': case 'G': unit = GiB; end++; break;
    case '\0': break;
    default: return B10_ERR_INVALID_ARG;
    }
    if (*end == 'i' || *end == 'B')   /* accept "8MiB", "8MB" */
        end += (end[0] == 'i' && end[1] == 'B') ? 2 : 1;
    if (*end != '\0' || v > UINT64_MAX / unit)
        return B10_ERR_INVALID_ARG;
    *bytes_p = v * unit;
    return B10_OK;
}

static void config_usage(FILE *out)
{
    fprintf(out,
"usage: b10d [OPTIONS]\n"
"\n"
"b10d moves KV-cache bytes between inference ranks on different nodes. Ranks on\n"
"this node connect to its socket with libb10; b10d reaches other nodes' b10d over UCX.\n"
"\n");
    for (size_t i = 0; i < config_table_count; i++)
        optdoc_help(out, &config_table[i].doc, 29);
    fprintf(out,
"\n"
"UCX settings come from UCX_* environment variables (UCX_TLS, UCX_NET_DEVICES, ...).\n");
}

/* --man=options: the entries of b10d(8)'s OPTIONS, as troff (make man). */
static b10_status_t config_man(const char *section)
{
    if (strcmp(section, "options") != 0) {
        fprintf(stderr, "b10d: --man: '%s' is not options\n", section);
        return B10_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < config_table_count; i++)
        optdoc_man(stdout, &config_table[i].doc);
    return B10_OK;
}

static b10_status_t config_set_num(struct config *cfg, const struct config_opt *num, const char *text)
{
    uint64_t v;
    char *end;

    if (num->size) {
        if (config_parse_size(text, &v) != B10_OK)
            goto bad;
    } else {
        errno = 0;
        v = strtoull(text, &end, 10);
        if (errno != 0 || end == text || *end != '\0' || !isdigit((unsigned char)text[0]))
            goto bad;
    }
    if (v < num->min || v > num->max) {
        fprintf(stderr, "b10d: --%s %s is out of range [%" PRIu64 ", %" PRIu64 "]\n", num->doc.name,
                text, num->min, num->max);
        return B10_ERR_INVALID_ARG;
    }
    if (num->width == 8)
        *(uint64_t *)((char *)cfg + num->offset) = v;
    else
        *(uint32_t *)((char *)cfg + num->offset) = (uint32_t)v;
    return B10_OK;
bad:
    fprintf(stderr, "b10d: --%s: '%s' is not a %s\n", num->doc.name, text,
            num->size ? "size (like 512M)" : "number");
    return B10_ERR_INVALID_ARG;
}

/* Relations between settings that no single bound expresses. */
static b10_status_t config_check(const struct config *cfg)
{
    if (cfg->view_bytes > cfg->staging_bytes / 2) {
        fprintf(stderr, "b10d: --view-bytes must be at most half of --staging-bytes "
                        "(a pool needs views for sending and for receiving)\n");
        return B10_ERR_INVALID_ARG;
    }
    if (cfg->view_bytes % 4096 != 0) {
        fprintf(stderr, "b10d: --view-bytes must be a multiple of 4096\n");
        return B10_ERR_INVALID_ARG;
    }
    if (cfg->peer_timeout_ms != 0 && cfg->peer_timeout_ms < 200) {
        fprintf(stderr, "b10d: --peer-timeout-ms must be 0 (off) or at least 200\n");
        return B10_ERR_INVALID_ARG;
    }
    if (cfg->deadline_ms > cfg->max_deadline_ms) {
        fprintf(stderr, "b10d: --deadline-ms exceeds --max-deadline-ms\n");
        return B10_ERR_INVALID_ARG;
    }
    if (cfg->min_deadline_ms > cfg->deadline_ms) {
        fprintf(stderr, "b10d: --min-deadline-ms exceeds --deadline-ms\n");
        return B10_ERR_INVALID_ARG;
    }
    if (cfg->max_peer_control < cfg->max_control_bytes) {
        fprintf(stderr, "b10d: --max-peer-control must be at least --max-control-bytes "
                        "(one peer could send no CONTROL of the largest size)\n");
        return B10_ERR_INVALID_ARG;
    }
    if (config_peer_staging(cfg) < cfg->view_bytes * cfg->max_in_flight ||
        config_peer_staging(cfg) > cfg->staging_bytes) {
        fprintf(stderr, "b10d: --max-peer-staging must lie between one transfer's window "
                        "(--view-bytes x --max-in-flight) and --staging-bytes\n");
        return B10_ERR_INVALID_ARG;
    }
    if (cfg->cluster_key_next[0] != '\0' && strcmp(cfg->cluster_key_next, cfg->cluster_key) == 0) {
        fprintf(stderr, "b10d: --cluster-key-next names the same file as --cluster-key\n");
        return B10_ERR_INVALID_ARG;
    }
    if (!config_name_ok(cfg->name)) {
        fprintf(stderr, "b10d: --name '%s': 1..%d letters, digits, '.', '_' or '-' (other daemons "
                        "know this daemon by it)\n", cfg->name, CONFIG_NAME_MAX - 1);
        return B10_ERR_INVALID_ARG;
    }
    return B10_OK;
}

/* --admin-group: a group name, or a gid; a name must resolve now, at start. */
static b10_status_t config_set_group(struct config *cfg, const char *text)
{
    char *end;
    errno = 0;
    unsigned long gid = strtoul(text, &end, 10);

    if (text[0] != '\0' && text[0] != '-' && *end == '\0' && errno == 0 && gid < UINT32_MAX) {
        cfg->admin_gid = (uint32_t)gid;
    } else {
        struct group *gr = getgrnam(text);
        if (gr == NULL) {
            fprintf(stderr, "b10d: --admin-group: no group '%s'\n", text);
            return B10_ERR_INVALID_ARG;
        }
        cfg->admin_gid = (uint32_t)gr->gr_gid;
    }
    cfg->admin_group_set = true;
    return B10_OK;
}

/* UCX's device list: names of letters, digits and _-.: between commas, none empty. */
static bool config_net_devices_ok(const char *text)
{
    size_t n = strlen(text);
    if (n == 0 || n >= sizeof(((struct config *)0)->net_devices) || text[0] == ',' ||
        text[n - 1] == ',' || strstr(text, ",,") != NULL)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)text[i]) && strchr("_-.:,", text[i]) == NULL)
            return false;
    return true;
}

/*
 * --metrics-listen: PORT, ADDR:PORT or [ADDR6]:PORT, numeric. A bare port
 * listens on 127.0.0.1 only: exposing the metrics is a choice one writes out.
 */
static b10_status_t config_set_metrics(struct config *cfg, const char *text)
{
    char host[sizeof(cfg->metrics_host)] = "127.0.0.1";
    const char *port = text, *colon = strrchr(text, ':');
    unsigned char addr[16];
    char *end;

    if (colon != NULL) {
        const char *h = text;
        size_t n = (size_t)(colon - text);
        if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
            h++;
            n -= 2;
        }
        if (n == 0 || n >= sizeof(host))
            goto bad;
        memcpy(host, h, n);
        host[n] = '\0';
        port = colon + 1;
        if (inet_pton(AF_INET, host, addr) != 1 && inet_pton(AF_INET6, host, addr) != 1)
            goto bad;
    }
    errno = 0;
    unsigned long p = strtoul(port, &end, 10);
    if (port[0] == '\0' || port[0] == '-' || *end != '\0' || errno != 0 || p > 65535)
        goto bad;
    snprintf(cfg->metrics_host, sizeof(cfg->metrics_host), "%s", host);
    cfg->metrics_port = (uint16_t)p;
    cfg->metrics_on = true;
    return B10_OK;
bad:
    fprintf(stderr, "b10d: --metrics-listen '%s': PORT (on 127.0.0.1), ADDR:PORT or [ADDR6]:PORT, "
            "a numeric address and a port 0..65535 (0: any free one, logged)\n", text);
    return B10_ERR_INVALID_ARG;
}

/* A path option: 1..255 bytes. */
static b10_status_t config_set_path(char *dst, size_t size, const char *opt, const char *text)
{
    if (strlen(text) == 0 || strlen(text) >= size) {
        fprintf(stderr, "b10d: --%s must be 1..%zu bytes\n", opt, size - 1);
        return B10_ERR_INVALID_ARG;
    }
    snprintf(dst, size, "%s", text);
    return B10_OK;
}

/* The paths of node certificates and of the small cluster's CA. */
static b10_status_t config_set_cert_path(struct config *cfg, int opt, const char *text)
{
    const struct { int opt; char *dst; size_t size; } paths[] = {
        { OPT_NODE_CERT, cfg->node_cert, sizeof(cfg->node_cert) },
        { OPT_NODE_KEY, cfg->node_key, sizeof(cfg->node_key) },
        { OPT_NODE_CA, cfg->node_ca, sizeof(cfg->node_ca) },
        { OPT_MAKE_CA, cfg->make_ca, sizeof(cfg->make_ca) },
        { OPT_ISSUE_CERT, cfg->issue_name, sizeof(cfg->issue_name) },
        { OPT_CA_CERT, cfg->ca_cert, sizeof(cfg->ca_cert) },
        { OPT_CA_KEY, cfg->ca_key, sizeof(cfg->ca_key) },
        { OPT_CERT_OUT, cfg->cert_out, sizeof(cfg->cert_out) },
    };
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
        if (paths[i].opt == opt)
            return config_set_path(paths[i].dst, paths[i].size, config_table_find(opt)->doc.name,
                                   text);
    return B10_ERR_INTERNAL;
}

/*
 * An option whose value is text kept as given (a path, a name, a device
 * list), bounded by its field. Each keeps the message it always gave.
 */
static b10_status_t config_set_text(struct config *cfg, int opt, const char *text)
{
    switch (opt) {
    case 's':
        if (strlen(text) == 0 || strlen(text) >= sizeof(cfg->socket_path)) {
            fprintf(stderr, "b10d: --socket must be 1..%zu bytes\n", sizeof(cfg->socket_path) - 1);
            return B10_ERR_INVALID_ARG;
        }
        snprintf(cfg->socket_path, sizeof(cfg->socket_path), "%s", text);
        return B10_OK;
    case OPT_NAME:
        if (strlen(text) == 0 || strlen(text) >= sizeof(cfg->name)) {
            fprintf(stderr, "b10d: --name must be 1..%zu bytes\n", sizeof(cfg->name) - 1);
            return B10_ERR_INVALID_ARG;
        }
        snprintf(cfg->name, sizeof(cfg->name), "%s", text);
        return B10_OK;
    case OPT_CLUSTER_KEY:
        return config_set_path(cfg->cluster_key, sizeof(cfg->cluster_key), "cluster-key", text);
    case OPT_CLUSTER_KEY_NEXT:
        return config_set_path(cfg->cluster_key_next, sizeof(cfg->cluster_key_next),
                               "cluster-key-next", text);
    case OPT_GEN_KEY:
        return config_set_path(cfg->gen_key, sizeof(cfg->gen_key), "gen-key", text);
    case OPT_RUNTIME_DIR:
        /* Empty: names are not kept, whatever systemd says. */
        if (text[0] == '\0') {
            cfg->runtime_dir[0] = '\0';
            return B10_OK;
        }
        return config_set_path(cfg->runtime_dir, sizeof(cfg->runtime_dir), "runtime-dir", text);
    case OPT_NET_DEVICES:
        if (!config_net_devices_ok(text)) {
            fprintf(stderr, "b10d: --net-devices '%s': a comma-separated list of device names "
                    "(letters, digits, '_', '-', '.', ':'), or all; at most %zu bytes\n", text,
                    sizeof(cfg->net_devices) - 1);
            return B10_ERR_INVALID_ARG;
        }
        snprintf(cfg->net_devices, sizeof(cfg->net_devices), "%s", text);
        return B10_OK;
    default:
        return config_set_cert_path(cfg, opt, text);
    }
}

static b10_status_t config_bad_word(const char *opt, const char *text, const char *words)
{
    fprintf(stderr, "b10d: --%s: '%s' is not %s\n", opt, text, words);
    return B10_ERR_INVALID_ARG;
}

/* An option whose value is one of a few words, each a setting of an enum or a flag. */
static b10_status_t config_set_word(struct config *cfg, int opt, const char *text)
{
    switch (opt) {
    case OPT_LOG_LEVEL:
        if (log_level_parse(text, &cfg->log_level) == B10_OK)
            return B10_OK;
        fprintf(stderr, "b10d: --log-level: '%s' is not err, warning, notice, info or debug\n", text);
        return B10_ERR_INVALID_ARG;
    case OPT_ERR_MODE:
        if (strcmp(text, "peer") == 0)
            cfg->err_mode = CONFIG_ERR_MODE_PEER;
        else if (strcmp(text, "none") == 0)
            cfg->err_mode = CONFIG_ERR_MODE_NONE;
        else
            return config_bad_word("ucx-err-mode", text, "peer or none");
        return B10_OK;
    case OPT_PROGRESS:
        if (strcmp(text, "spin") == 0 || strcmp(text, "event") == 0)
            cfg->progress_spin = text[0] == 's';
        else if (strcmp(text, "auto") == 0)
            cfg->progress_spin = sysconf(_SC_NPROCESSORS_ONLN) >= 8;
        else
            return config_bad_word("progress", text, "auto, spin or event");
        return B10_OK;
    case OPT_VERIFY_DATA:
        if (strcmp(text, "on") == 0)
            cfg->verify_data = CONFIG_VERIFY_ON;
        else if (strcmp(text, "auto") == 0)
            cfg->verify_data = CONFIG_VERIFY_AUTO;
        else if (strcmp(text, "off") == 0)
            cfg->verify_data = CONFIG_VERIFY_OFF;
        else
            return config_bad_word("verify-data", text, "on, auto or off");
        return B10_OK;
    case OPT_GPU_COPY:
        if (strcmp(text, "engine") == 0)
            cfg->gpu_copy = CONFIG_GPU_COPY_ENGINE;
        else if (strcmp(text, "kernel") == 0)
            cfg->gpu_copy = CONFIG_GPU_COPY_KERNEL;
        else if (strcmp(text, "auto") == 0)
            cfg->gpu_copy = CONFIG_GPU_COPY_AUTO;
        else
            return config_bad_word("gpu-copy", text, "engine, kernel or auto");
        return B10_OK;
    case OPT_GPU_COPY_CALLS:
        if (strcmp(text, "single") == 0)
            cfg->gpu_copy_calls = CONFIG_GPU_CALLS_SINGLE;
        else if (strcmp(text, "batch") == 0)
            cfg->gpu_copy_calls = CONFIG_GPU_CALLS_BATCH;
        else if (strcmp(text, "auto") == 0)
            cfg->gpu_copy_calls = CONFIG_GPU_CALLS_AUTO;
        else
            return config_bad_word("gpu-copy-calls", text, "auto, single or batch");
        return B10_OK;
    case OPT_REMOTE_ACCESS:
        if (strcmp(text, "any") == 0)
            cfg->remote_access = CONFIG_REMOTE_ANY;
        else if (strcmp(text, "paired") == 0)
            cfg->remote_access = CONFIG_REMOTE_PAIRED;
        else
            return config_bad_word("remote-access", text, "any or paired");
        return B10_OK;
    default:
        return B10_ERR_INTERNAL;
    }
}

/* One option of the command line other than those that only print (config_info). */
static b10_status_t config_set_option(struct config *cfg, int opt, const char *text)
{
    switch (opt) {
    case OPT_CHECK:
        cfg->check_only = true;
        return B10_OK;
    case OPT_INSECURE:
        cfg->insecure = true;
        return B10_OK;
    case OPT_TRACE:
        cfg->trace = true;
        return B10_OK;
    case OPT_ADMIN_GROUP:
        return config_set_group(cfg, text);
    case OPT_METRICS_LISTEN:
        return config_set_metrics(cfg, text);
    case 's': case OPT_NAME: case OPT_CLUSTER_KEY: case OPT_CLUSTER_KEY_NEXT: case OPT_GEN_KEY:
    case OPT_RUNTIME_DIR: case OPT_NET_DEVICES:
    case OPT_NODE_CERT: case OPT_NODE_KEY: case OPT_NODE_CA: case OPT_MAKE_CA:
    case OPT_ISSUE_CERT: case OPT_CA_CERT: case OPT_CA_KEY: case OPT_CERT_OUT:
        return config_set_text(cfg, opt, text);
    case OPT_LOG_LEVEL: case OPT_ERR_MODE: case OPT_PROGRESS: case OPT_VERIFY_DATA:
    case OPT_GPU_COPY: case OPT_GPU_COPY_CALLS: case OPT_REMOTE_ACCESS:
        return config_set_word(cfg, opt, text);
    }
    const struct config_opt *num = config_table_find(opt);
    if (num == NULL || !num->num) {
        fprintf(stderr, "b10d: try --help\n");
        return B10_ERR_INVALID_ARG;
    }
    return config_set_num(cfg, num, text);
}

/* --help, --version, --man=options: each prints, and the parse ends there (main starts nothing). */
static b10_status_t config_info(struct config *cfg, int opt, const char *text)
{
    if (opt == OPT_MAN && config_man(text) != B10_OK)
        return B10_ERR_INVALID_ARG;
    if (opt == 'h')
        config_usage(stdout);
    else if (opt == OPT_VERSION)
        printf("b10d %s (protocol %d)\n", B10D_VERSION, B10_PROTOCOL_VERSION);
    cfg->info_only = true;
    return B10_OK;
}

/* The settings whose defaults follow from others, once every option is read. */
static void config_derive(struct config *cfg, bool in_flight_set)
{
    /*
     * A transfer's chunks in flight pick its data lanes (chunk mod lanes):
     * with more lanes than chunks, the others would idle. Unless said.
     */
    if (!in_flight_set && cfg->wire_lanes > cfg->max_in_flight) {
        cfg->max_in_flight = cfg->wire_lanes;
        /* As far as one peer's share of staging holds a window: what started before still does. */
        while (cfg->max_in_flight > 4 &&
               config_peer_staging(cfg) < cfg->view_bytes * cfg->max_in_flight)
            cfg->max_in_flight--;
    }
    /* One uid's share of the rank slots: the rest stay for the node's other users. */
    if (cfg->max_clients_per_uid == 0)
        cfg->max_clients_per_uid = cfg->max_clients - cfg->max_clients / 4;
    if (cfg->max_clients_per_uid > cfg->max_clients)
        cfg->max_clients_per_uid = cfg->max_clients;
    /*
     * One uid's host memory: the daemon maps (and populates where written) what ranks
     * register, so the default is what the machine has; VRAM is bounded by the GPU.
     */
    if (cfg->max_host_bytes_uid == 0) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        cfg->max_host_bytes_uid = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page
                                                        : 1024 * 1024 * GiB;
    }
}

/*
 * What the settings are for decides what they must hold: making a key or a
 * certificate needs only its own options; running needs all of them right.
 */
static b10_status_t config_validate(const struct config *cfg)
{
    if (cfg->gen_key[0] != '\0')
        return B10_OK;   /* main makes the key; the other settings do not matter */
    if (cfg->make_ca[0] != '\0' || cfg->issue_name[0] != '\0') {
        /* main makes the CA or the certificate, the same way */
        if (cfg->issue_name[0] != '\0' &&
            (cfg->ca_cert[0] == '\0' || cfg->ca_key[0] == '\0' || cfg->cert_out[0] == '\0')) {
            fprintf(stderr, "b10d: --issue-node-cert needs --ca-cert, --ca-key and --out\n");
            return B10_ERR_INVALID_ARG;
        }
        return B10_OK;
    }
    if ((cfg->node_cert[0] != '\0') != (cfg->node_key[0] != '\0') ||
        (cfg->node_cert[0] != '\0') != (cfg->node_ca[0] != '\0')) {
        fprintf(stderr, "b10d: --node-cert, --node-key and --node-ca go together\n");
        return B10_ERR_INVALID_ARG;
    }
    return config_check(cfg);
}

/* Parse every option, then derive the settings that follow from others, then validate. */
b10_status_t config_parse(struct config *cfg, int argc, char **argv)
{
    struct option longopts[config_table_count + 1];
    char shorts[3 * config_table_count + 1];
    bool in_flight_set = false;
    size_t n = 0;
    int c;

    /* getopt_long's view of the table that --help and the man page print. */
    shorts[0] = '\0';
    for (size_t i = 0; i < config_table_count; i++)
        n += optdoc_getopt(&config_table[i].doc, &longopts[n], shorts);
    longopts[n] = (struct option){ NULL, 0, NULL, 0 };
    optind = 1;
    while ((c = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
        if (c == 'h' || c == OPT_VERSION || c == OPT_MAN)
            return config_info(cfg, c, optarg);
        /* Every refusal was said where it was found. */
        if (config_set_option(cfg, c, optarg) != B10_OK)
            return B10_ERR_INVALID_ARG;
        in_flight_set |= c == OPT_IN_FLIGHT;
    }
    config_derive(cfg, in_flight_set);
    if (optind < argc) {
        fprintf(stderr, "b10d: unexpected argument '%s'; try --help\n", argv[optind]);
        return B10_ERR_INVALID_ARG;
    }
    return config_validate(cfg);
}

void config_print(const struct config *cfg, const char *key_path, uint64_t key_id)
{
    printf("socket %s\nname %s\nucx-err-mode %s\nprogress %s\n", cfg->socket_path, cfg->name,
           cfg->err_mode == CONFIG_ERR_MODE_PEER ? "peer" : "none",
           cfg->progress_spin ? "spin" : "event");
    if (key_path != NULL && key_path[0] != '\0')
        printf("cluster-key %s (key %016" PRIx64 ")\n", key_path, key_id);
    else
        printf("cluster-key (none: remote daemons are refused, only this node's ranks served)\n");
    printf("cluster-key-next %s\ninsecure %s\n",
           cfg->cluster_key_next[0] ? cfg->cluster_key_next : "(none)", cfg->insecure ? "yes" : "no");
    if (cfg->node_cert[0] != '\0')
        printf("node-cert %s\nnode-key %s\nnode-ca %s\n", cfg->node_cert, cfg->node_key,
               cfg->node_ca);
    else
        printf("node-cert (none: remote daemons are known by the cluster key alone)\n");
    printf("trace %s\n", cfg->trace ? "yes" : "no");
    printf("verify-data %s\n", config_verify_name(cfg->verify_data));
    printf("gpu-copy %s\n", config_gpu_copy_name(cfg->gpu_copy));
    printf("gpu-copy-calls %s\n", config_gpu_calls_name(cfg->gpu_copy_calls));
    printf("net-devices %s\n", cfg->net_devices[0] ? cfg->net_devices : "(UCX_NET_DEVICES, else all)");
    printf("remote-access %s\n", cfg->remote_access == CONFIG_REMOTE_PAIRED ? "paired" : "any");
    if (cfg->metrics_on)
        printf("metrics-listen %s%s%s:%u\n", strchr(cfg->metrics_host, ':') ? "[" : "",
               cfg->metrics_host, strchr(cfg->metrics_host, ':') ? "]" : "",
               (unsigned)cfg->metrics_port);
    else
        printf("metrics-listen (off)\n");
    if (cfg->admin_group_set)
        printf("admin-group %u\n", (unsigned)cfg->admin_gid);
    else
        printf("admin-group (none)\n");
    if (cfg->runtime_dir[0] != '\0')
        printf("runtime-dir %s\n", cfg->runtime_dir);
    else
        printf("runtime-dir (none: a restart forgets which user holds which rank name)\n");
    for (size_t i = 0; i < config_table_count; i++) {
        const struct config_opt *num = &config_table[i];
        if (!num->num)
            continue;
        uint64_t v = num->width == 8 ? *(const uint64_t *)((const char *)cfg + num->offset)
                                     : *(const uint32_t *)((const char *)cfg + num->offset);
        /* What the daemon will use, not the flag's "derive it" 0. */
        if (num->doc.id == OPT_MAX_PEER_STAGING)
            v = config_peer_staging(cfg);
        else if (num->doc.id == OPT_PEER_QUARANTINE)
            v = config_peer_quarantine(cfg);
        printf("%s %" PRIu64 "\n", num->doc.name, v);
    }
}
