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

#include "b10d.h"
#include "frame.h"
#include "log.h"
#include "wireaddr.h"

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
     * more in flight slower again (the sweeps in README, "GPU memory, and
     * what it measures"). Tuned on one host; across hosts it is not measured.
     */
    cfg->view_bytes = 4 * MiB;
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

int config_parse_size(const char *text, uint64_t *bytes_p)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    uint64_t unit = 1;

    /* Digits first: strtoull would take blanks and a sign, and turn "-1" into 2^64 - 1. */
    if (errno != 0 || end == text || !isdigit((unsigned char)text[0]))
        return -1;
    switch (*end) {
    case 'k': case 'K': unit = KiB; end++; break;
    case 'm': case 'M': unit = MiB; end++; break;
    case 'g': case 'G': unit = GiB; end++; break;
    case '\0': break;
    default: return -1;
    }
    if (*end == 'i' || *end == 'B')   /* accept "8MiB", "8MB" */
        end += (end[0] == 'i' && end[1] == 'B') ? 2 : 1;
    if (*end != '\0' || v > UINT64_MAX / unit)
        return -1;
    *bytes_p = v * unit;
    return 0;
}

static void config_usage(FILE *out)
{
    fprintf(out,
"usage: b10d [OPTIONS]\n"
"\n"
"b10d moves KV-cache bytes between inference ranks on different nodes. Ranks on\n"
"this node connect to its socket with libb10; b10d reaches other nodes' b10d over UCX.\n"
"\n"
"  -s, --socket PATH          client socket (env B10_SOCKET; default " B10D_SOCKET_DEFAULT ")\n"
"      --name NAME            name in log lines (default: the host name)\n"
"      --log-level LEVEL      err, warning, notice, info or debug (default info)\n"
"      --staging-bytes SIZE   host staging pool, K/M/G suffixes (default 512M, 4M..1T)\n"
"      --view-bytes SIZE      one staging view, the largest DATA chunk (default 4M, 64K..1G)\n"
"      --max-in-flight N      chunks per transfer between gather and send completion\n"
"                             (default 4, or --wire-lanes where that is more; 1..64)\n"
"      --deadline-ms MS       deadline of a transfer that names none (default 30000, at most 3600000)\n"
"      --max-deadline-ms MS   cap on every deadline (default 600000, at most 3600000)\n"
"      --connect-timeout-ms MS  peer handshake bound (default 10000, at most 600000)\n"
"      --peer-timeout-ms MS   while transfers are open with a remote daemon, heartbeats go\n"
"                             both ways; one not heard from this long (no heartbeat, DATA\n"
"                             or reply) is lost: its transfers fail B10_ERR_PEER_LOST and\n"
"                             its links retire. The same on every daemon, and above the\n"
"                             time one chunk takes on the slowest link (default 10000,\n"
"                             200..600000; 0: off)\n"
"      --drain-timeout-ms MS  on SIGTERM, admit nothing new and give transfers in flight\n"
"                             this long to finish before failing them (default 10000,\n"
"                             at most 600000; keep it below the unit's TimeoutStopSec)\n"
"      --settle-ms MS         a failed transfer is reported once no copy for it can still\n"
"                             write (its scatters, the receiver's): past this long it is\n"
"                             reported B10_ERR_UNSETTLED and the regions such a copy holds\n"
"                             take no new work until it ends; a deregistration waits as\n"
"                             long for the copies through its region (default 5000,\n"
"                             10..600000)\n"
"      --max-admin-rows N     rows of one b10ctl list (default 4096, at most 1048576)\n"
"      --quarantine-ttl-ms MS how long quarantined resources sit out\n"
"                             (default 120000, at most 86400000)\n"
"      --quarantine-budget SIZE  quarantined staging past which new transfers fail fast\n"
"                             with \"staging exhausted\" (default 256M, at most 1T)\n"
"      --ucx-err-mode MODE    peer: UCX detects a dead peer (same-host peers use tcp);\n"
"                             none: shared memory on one host, a dead peer is noticed\n"
"                             only by heartbeats and deadlines (default peer, the safe one)\n"
"      --max-clients N        ranks connected (default 256, at most 65536); b10ctl\n"
"                             connections are counted apart: 32 of users who are no\n"
"                             operators, operators' always admitted\n"
"      --max-clients-per-uid N  ranks of one uid (default three quarters of\n"
"                             --max-clients), so that one user cannot take every slot\n"
"      --max-regions N        registrations per client (default 4096, at most 1048576)\n"
"      --max-register-bytes SIZE  memory one client may register, its regions together\n"
"                             (default 4T, 1M..1P)\n"
"      --max-host-bytes-per-uid SIZE  host memory (not VRAM) the ranks of one uid may\n"
"                             register, together (default: the machine's memory), so\n"
"                             that one user cannot make the daemon map it all\n"
"      --hello-timeout-ms MS  a connection that sends neither Hello nor a b10ctl request\n"
"                             within MS is dropped (default 10000, 100..600000); at most\n"
"                             64 such wait at once, the oldest dropped for a new one\n"
"      --max-agents N         remote agents per client (default 4096, at most 1048576)\n"
"      --max-xfers N          transfers in flight per client (default 1024, at most 65536)\n"
"      --max-spans N          spans in one request (default 1048576, at most 16777216)\n"
"      --max-xfer-bytes SIZE  bytes in one request (default 256G, at most 16T)\n"
"      --max-frame SIZE       largest client message (default 64M, at most 1G)\n"
"      --max-peers N          remote daemons (default 1024, at most 65536)\n"
"      --max-control-bytes SIZE  largest peer CONTROL message (default 64M, at most 1G)\n"
"      --progress MODE        spin: poll the UCX workers while transfers run (a core\n"
"                             each), unless more threads want to run than the host has\n"
"                             CPUs; event: sleep on their event fds; auto: spin from 8\n"
"                             CPUs up\n"
"      --wire-lanes N         UCX workers, each on a thread of its own, that carry bulk\n"
"                             data so that several cores copy at once; a peer is used\n"
"                             on as many as both ends have (default 2, 0..8; 0: all\n"
"                             on the loop thread's worker)\n"
"      --gpu-copy engine|kernel|auto  engine: the GPU's copy engines move every piece\n"
"                             (cudaMemcpyBatchAsync) and the CPU sums the chunks, so\n"
"                             no kernel of the daemon takes a time slice from a model\n"
"                             on that GPU; kernel: SM kernels copy small pieces and sum,\n"
"                             which costs a model without MPS its GPU while they run,\n"
"                             and its p99 step with MPS. auto (default): engine, with\n"
"                             MPS as without (README \"GPU\")\n"
"      --gpu-max-ctas N       CTAs of one gather or scatter kernel, so a transfer leaves\n"
"                             the GPU to the model (default 32, 1..1024)\n"
"      --verify-data on|auto|off  on: checksum every DATA chunk where it is gathered and\n"
"                             check it before a byte of it is scattered; a chunk that\n"
"                             fails fails its transfer with B10_ERR_DATA_CORRUPT. auto\n"
"                             (default): the chunks a GPU gathers (the CPU sums them off\n"
"                             the GPU; a kernel with --gpu-copy kernel), and every sum\n"
"                             that comes is checked;\n"
"                             host memory's sums cost ~11%% on few CPUs (README \"Integrity\")\n"
"\n"
"Trust between daemons (README, \"Security model\"):\n"
"      --cluster-key PATH     the cluster's secret key, 64 hex digits readable by this user\n"
"                             alone (default: $CREDENTIALS_DIRECTORY/" CONFIG_KEY_CREDENTIAL " from systemd's\n"
"                             LoadCredential=, else " CONFIG_KEY_FILE_DEFAULT ", if either exists).\n"
"                             Without one, remote daemons are refused: only this node's\n"
"                             ranks are served\n"
"      --cluster-key-next PATH  a second key, accepted besides the first while a cluster is\n"
"                             re-keyed node by node\n"
"      --gen-key PATH         write a fresh cluster key to PATH (mode 0600, never over an\n"
"                             existing file) and exit\n"
"      --net-devices LIST     the network devices UCX may listen and send on, as UCX names\n"
"                             them (eth0,mlx5_0:1; \"all\"); default: UCX_NET_DEVICES, else\n"
"                             all. Logged at start. A daemon without a key opens none\n"
"      --door-port PORT       the TCP port of this daemon's doors, where another daemon\n"
"                             proves it holds the cluster key before its packets may reach\n"
"                             UCX (default 0: one the kernel picks, named in descriptors)\n"
"      --insecure             also accept daemons that prove nothing (a well-known key):\n"
"                             for a lab only, logged at warning\n"
"      --trace                log every step of every transfer (plan, CONTROL, READY, each\n"
"                             copy and DATA of its first chunks, RESULT, the rank told)\n"
"                             with its µs, one line when it ends: where a request's time goes\n"
"      --max-peer-xfers N     transfers one remote daemon sends us at once (default 512,\n"
"                             1..65536)\n"
"      --max-peer-staging SIZE  staging views held by transfers with one remote daemon, with\n"
"                             what its failed ones left in the quarantine; past it they wait\n"
"                             for their own views (default a quarter of --staging-bytes, at\n"
"                             least two windows of --view-bytes x --max-in-flight)\n"
"      --max-peer-control SIZE  CONTROL bytes one remote daemon has in flight and held\n"
"                             (default 128M, at least --max-control-bytes)\n"
"      --min-deadline-ms MS   a remote daemon's transfer or READ with less time left is\n"
"                             refused (default 100, 1..60000)\n"
"      --peer-quarantine-bytes SIZE  quarantined staging the failed transfers of one remote\n"
"                             daemon may leave before its new ones are refused (default\n"
"                             64M; never more than --quarantine-budget)\n"
"      --peer-idle-ms MS      a remote daemon with no link, transfer or rank naming it is\n"
"                             forgotten after this long (default 300000, 1000..86400000)\n"
"      --max-hellos-per-s N   handshakes answered per second, all daemons together\n"
"                             (default 64, 1..100000)\n"
"      --max-notice-bytes SIZE  notices queued unread for one rank; past it their senders\n"
"                             get B10_ERR_BUSY (default 16M, 64K..128M)\n"
"\n"
"Trust on the node (README, \"Security model\"):\n"
"      --remote-access MODE   any: ranks of every authenticated daemon may write and read\n"
"                             the memory this node's ranks registered (the default);\n"
"                             paired: only those whose descriptor the target rank loaded\n"
"      --admin-group GROUP    members of GROUP (a name or a gid) are operators: they see\n"
"                             every rank's registrations and transfers, cancel any, drain.\n"
"                             Root and the daemon's own user always are (default: none more)\n"
"      --metrics-listen [ADDR:]PORT  serve GET /metrics (Prometheus text) over HTTP on\n"
"                             ADDR:PORT ([ADDR6]:PORT); a bare PORT listens on 127.0.0.1\n"
"                             only: name 0.0.0.0 or an interface's address to expose it\n"
"                             (default: off). Unauthenticated: what b10ctl metrics shows\n"
"      --check-config         run every check the start runs (options, the cluster keys:\n"
"                             present, mode 0600 or 0400, owned by this user or root,\n"
"                             64 hex digits; the --metrics-listen address binds), print\n"
"                             the effective configuration, exit (0: it would start;\n"
"                             1: a key or the metrics address stops it; 2: an option)\n"
"  -h, --help                 this text\n"
"      --version              the version\n"
"\n"
"UCX settings come from UCX_* environment variables (UCX_TLS, UCX_NET_DEVICES, ...).\n");
}

enum {
    OPT_NAME = 256, OPT_LOG_LEVEL, OPT_STAGING, OPT_VIEW, OPT_IN_FLIGHT, OPT_DEADLINE,
    OPT_MAX_DEADLINE, OPT_CONNECT_TIMEOUT, OPT_PEER_TIMEOUT, OPT_TTL, OPT_BUDGET, OPT_ERR_MODE, OPT_MAX_CLIENTS, OPT_MAX_CLIENTS_UID, OPT_MAX_HOST_UID,
    OPT_DRAIN_TIMEOUT, OPT_MAX_ADMIN_ROWS,
    OPT_MAX_REGIONS, OPT_MAX_AGENTS, OPT_MAX_XFERS, OPT_MAX_SPANS, OPT_MAX_FRAME, OPT_MAX_PEERS,
    OPT_MAX_CONTROL, OPT_MAX_XFER_BYTES, OPT_GPU_MAX_CTAS, OPT_WIRE_LANES, OPT_PROGRESS, OPT_CHECK, OPT_VERSION,
    OPT_CLUSTER_KEY, OPT_CLUSTER_KEY_NEXT, OPT_GEN_KEY, OPT_INSECURE, OPT_TRACE, OPT_VERIFY_DATA, OPT_GPU_COPY,
    OPT_NET_DEVICES, OPT_DOOR_PORT,
    OPT_MAX_PEER_XFERS,
    OPT_MAX_PEER_STAGING, OPT_MAX_PEER_CONTROL, OPT_MIN_DEADLINE, OPT_PEER_QUARANTINE,
    OPT_PEER_IDLE, OPT_MAX_HELLOS, OPT_MAX_NOTICE, OPT_REMOTE_ACCESS, OPT_ADMIN_GROUP, OPT_SETTLE,
    OPT_MAX_REGISTER, OPT_HELLO_TIMEOUT, OPT_METRICS_LISTEN,
};

/* A numeric option with its bounds: one table, so that help, parsing and checks agree. */
struct config_num {
    int opt;
    const char *name;
    bool size;          /* accepts K/M/G suffixes */
    uint64_t min, max;
    size_t offset;
    size_t width;       /* 4 or 8 bytes */
};

#define NUM(o, n, sz, lo, hi, field) \
    { o, n, sz, lo, hi, offsetof(struct config, field), sizeof(((struct config *)0)->field) }

static const struct config_num config_nums[] = {
    NUM(OPT_STAGING, "staging-bytes", true, 4 * MiB, 1024 * GiB, staging_bytes),
    NUM(OPT_VIEW, "view-bytes", true, 64 * KiB, GiB, view_bytes),
    NUM(OPT_IN_FLIGHT, "max-in-flight", false, 1, 64, max_in_flight),
    NUM(OPT_WIRE_LANES, "wire-lanes", false, 0, WIREADDR_MAX_LANES, wire_lanes),
    NUM(OPT_DEADLINE, "deadline-ms", false, 1, 3600000, deadline_ms),
    NUM(OPT_MAX_DEADLINE, "max-deadline-ms", false, 1, 3600000, max_deadline_ms),
    NUM(OPT_CONNECT_TIMEOUT, "connect-timeout-ms", false, 1, 600000, connect_timeout_ms),
    NUM(OPT_PEER_TIMEOUT, "peer-timeout-ms", false, 0, 600000, peer_timeout_ms),
    NUM(OPT_DRAIN_TIMEOUT, "drain-timeout-ms", false, 0, 600000, drain_timeout_ms),
    NUM(OPT_MAX_ADMIN_ROWS, "max-admin-rows", false, 1, 1u << 20, max_admin_rows),
    NUM(OPT_TTL, "quarantine-ttl-ms", false, 1, 86400000, quarantine_ttl_ms),
    NUM(OPT_BUDGET, "quarantine-budget", true, 0, 1024 * GiB, quarantine_budget),
    NUM(OPT_MAX_CLIENTS, "max-clients", false, 1, 65536, max_clients),
    NUM(OPT_MAX_CLIENTS_UID, "max-clients-per-uid", false, 1, 65536, max_clients_per_uid),
    NUM(OPT_MAX_HOST_UID, "max-host-bytes-per-uid", true, MiB, 1024 * 1024 * GiB, max_host_bytes_uid),
    NUM(OPT_MAX_REGIONS, "max-regions", false, 1, 1u << 20, max_regions),
    NUM(OPT_MAX_AGENTS, "max-agents", false, 1, 1u << 20, max_agents),
    NUM(OPT_MAX_XFERS, "max-xfers", false, 1, 65536, max_xfers),
    NUM(OPT_MAX_SPANS, "max-spans", false, 1, 1u << 24, max_spans),
    NUM(OPT_MAX_XFER_BYTES, "max-xfer-bytes", true, MiB, 16384 * GiB, max_xfer_bytes),
    NUM(OPT_MAX_FRAME, "max-frame", true, 64 * KiB, FRAME_MAX_LIMIT, max_frame),
    NUM(OPT_MAX_PEERS, "max-peers", false, 1, 65536, max_peers),
    NUM(OPT_MAX_CONTROL, "max-control-bytes", true, 4 * KiB, GiB, max_control_bytes),
    NUM(OPT_GPU_MAX_CTAS, "gpu-max-ctas", false, 1, 1024, gpu_max_ctas),
    NUM(OPT_MAX_PEER_XFERS, "max-peer-xfers", false, 1, 65536, max_peer_xfers),
    NUM(OPT_MAX_PEER_STAGING, "max-peer-staging", true, 0, 1024 * GiB, max_peer_staging),
    NUM(OPT_MAX_PEER_CONTROL, "max-peer-control", true, 4 * KiB, 16 * GiB, max_peer_control),
    NUM(OPT_MIN_DEADLINE, "min-deadline-ms", false, 1, 60000, min_deadline_ms),
    NUM(OPT_PEER_QUARANTINE, "peer-quarantine-bytes", true, 0, 1024 * GiB, peer_quarantine_bytes),
    NUM(OPT_PEER_IDLE, "peer-idle-ms", false, 1000, 86400000, peer_idle_ms),
    NUM(OPT_MAX_HELLOS, "max-hellos-per-s", false, 1, 100000, max_hellos_per_s),
    NUM(OPT_MAX_NOTICE, "max-notice-bytes", true, 64 * KiB, 128 * MiB, max_notice_bytes),
    NUM(OPT_SETTLE, "settle-ms", false, 10, 600000, settle_ms),
    NUM(OPT_MAX_REGISTER, "max-register-bytes", true, MiB, 1024 * 1024 * GiB, max_register_bytes),
    NUM(OPT_HELLO_TIMEOUT, "hello-timeout-ms", false, 100, 600000, hello_timeout_ms),
    NUM(OPT_DOOR_PORT, "door-port", false, 0, 65535, door_port),
};

static int config_set_num(struct config *cfg, const struct config_num *num, const char *text)
{
    uint64_t v;
    char *end;

    if (num->size) {
        if (config_parse_size(text, &v) != 0)
            goto bad;
    } else {
        errno = 0;
        v = strtoull(text, &end, 10);
        if (errno != 0 || end == text || *end != '\0' || !isdigit((unsigned char)text[0]))
            goto bad;
    }
    if (v < num->min || v > num->max) {
        fprintf(stderr, "b10d: --%s %s is out of range [%" PRIu64 ", %" PRIu64 "]\n", num->name,
                text, num->min, num->max);
        return -1;
    }
    if (num->width == 8)
        *(uint64_t *)((char *)cfg + num->offset) = v;
    else
        *(uint32_t *)((char *)cfg + num->offset) = (uint32_t)v;
    return 0;
bad:
    fprintf(stderr, "b10d: --%s: '%s' is not a %s\n", num->name, text,
            num->size ? "size (like 512M)" : "number");
    return -1;
}

/* Relations between settings that no single bound expresses. */
static int config_check(const struct config *cfg)
{
    if (cfg->view_bytes > cfg->staging_bytes / 2) {
        fprintf(stderr, "b10d: --view-bytes must be at most half of --staging-bytes "
                        "(a pool needs views for sending and for receiving)\n");
        return -1;
    }
    if (cfg->view_bytes % 4096 != 0) {
        fprintf(stderr, "b10d: --view-bytes must be a multiple of 4096\n");
        return -1;
    }
    if (cfg->peer_timeout_ms != 0 && cfg->peer_timeout_ms < 200) {
        fprintf(stderr, "b10d: --peer-timeout-ms must be 0 (off) or at least 200\n");
        return -1;
    }
    if (cfg->deadline_ms > cfg->max_deadline_ms) {
        fprintf(stderr, "b10d: --deadline-ms exceeds --max-deadline-ms\n");
        return -1;
    }
    if (cfg->min_deadline_ms > cfg->deadline_ms) {
        fprintf(stderr, "b10d: --min-deadline-ms exceeds --deadline-ms\n");
        return -1;
    }
    if (cfg->max_peer_control < cfg->max_control_bytes) {
        fprintf(stderr, "b10d: --max-peer-control must be at least --max-control-bytes "
                        "(one peer could send no CONTROL of the largest size)\n");
        return -1;
    }
    if (config_peer_staging(cfg) < cfg->view_bytes * cfg->max_in_flight ||
        config_peer_staging(cfg) > cfg->staging_bytes) {
        fprintf(stderr, "b10d: --max-peer-staging must lie between one transfer's window "
                        "(--view-bytes x --max-in-flight) and --staging-bytes\n");
        return -1;
    }
    if (cfg->cluster_key_next[0] != '\0' && strcmp(cfg->cluster_key_next, cfg->cluster_key) == 0) {
        fprintf(stderr, "b10d: --cluster-key-next names the same file as --cluster-key\n");
        return -1;
    }
    if (!config_name_ok(cfg->name)) {
        fprintf(stderr, "b10d: --name '%s': 1..%d letters, digits, '.', '_' or '-' (other daemons "
                        "know this daemon by it)\n", cfg->name, CONFIG_NAME_MAX - 1);
        return -1;
    }
    return 0;
}

/* --admin-group: a group name, or a gid; a name must resolve now, at start. */
static int config_set_group(struct config *cfg, const char *text)
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
            return -1;
        }
        cfg->admin_gid = (uint32_t)gr->gr_gid;
    }
    cfg->admin_group_set = true;
    return 0;
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
static int config_set_metrics(struct config *cfg, const char *text)
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
    return 0;
bad:
    fprintf(stderr, "b10d: --metrics-listen '%s': PORT (on 127.0.0.1), ADDR:PORT or [ADDR6]:PORT, "
            "a numeric address and a port 0..65535 (0: any free one, logged)\n", text);
    return -1;
}

/* A path option: 1..255 bytes. */
static int config_set_path(char *dst, size_t size, const char *opt, const char *text)
{
    if (strlen(text) == 0 || strlen(text) >= size) {
        fprintf(stderr, "b10d: --%s must be 1..%zu bytes\n", opt, size - 1);
        return -1;
    }
    snprintf(dst, size, "%s", text);
    return 0;
}

int config_parse(struct config *cfg, int argc, char **argv)
{
    static const struct option longopts[] = {
        { "socket", required_argument, NULL, 's' },
        { "name", required_argument, NULL, OPT_NAME },
        { "log-level", required_argument, NULL, OPT_LOG_LEVEL },
        { "staging-bytes", required_argument, NULL, OPT_STAGING },
        { "view-bytes", required_argument, NULL, OPT_VIEW },
        { "max-in-flight", required_argument, NULL, OPT_IN_FLIGHT },
        { "deadline-ms", required_argument, NULL, OPT_DEADLINE },
        { "max-deadline-ms", required_argument, NULL, OPT_MAX_DEADLINE },
        { "connect-timeout-ms", required_argument, NULL, OPT_CONNECT_TIMEOUT },
        { "peer-timeout-ms", required_argument, NULL, OPT_PEER_TIMEOUT },
        { "drain-timeout-ms", required_argument, NULL, OPT_DRAIN_TIMEOUT },
        { "max-admin-rows", required_argument, NULL, OPT_MAX_ADMIN_ROWS },
        { "quarantine-ttl-ms", required_argument, NULL, OPT_TTL },
        { "quarantine-budget", required_argument, NULL, OPT_BUDGET },
        { "ucx-err-mode", required_argument, NULL, OPT_ERR_MODE },
        { "max-clients", required_argument, NULL, OPT_MAX_CLIENTS },
        { "max-clients-per-uid", required_argument, NULL, OPT_MAX_CLIENTS_UID },
        { "max-host-bytes-per-uid", required_argument, NULL, OPT_MAX_HOST_UID },
        { "max-regions", required_argument, NULL, OPT_MAX_REGIONS },
        { "max-agents", required_argument, NULL, OPT_MAX_AGENTS },
        { "max-xfers", required_argument, NULL, OPT_MAX_XFERS },
        { "max-spans", required_argument, NULL, OPT_MAX_SPANS },
        { "max-xfer-bytes", required_argument, NULL, OPT_MAX_XFER_BYTES },
        { "max-frame", required_argument, NULL, OPT_MAX_FRAME },
        { "max-peers", required_argument, NULL, OPT_MAX_PEERS },
        { "max-control-bytes", required_argument, NULL, OPT_MAX_CONTROL },
        { "gpu-max-ctas", required_argument, NULL, OPT_GPU_MAX_CTAS },
        { "wire-lanes", required_argument, NULL, OPT_WIRE_LANES },
        { "progress", required_argument, NULL, OPT_PROGRESS },
        { "check-config", no_argument, NULL, OPT_CHECK },
        { "cluster-key", required_argument, NULL, OPT_CLUSTER_KEY },
        { "cluster-key-next", required_argument, NULL, OPT_CLUSTER_KEY_NEXT },
        { "gen-key", required_argument, NULL, OPT_GEN_KEY },
        { "insecure", no_argument, NULL, OPT_INSECURE },
        { "trace", no_argument, NULL, OPT_TRACE },
        { "verify-data", required_argument, NULL, OPT_VERIFY_DATA },
        { "gpu-copy", required_argument, NULL, OPT_GPU_COPY },
        { "net-devices", required_argument, NULL, OPT_NET_DEVICES },
        { "door-port", required_argument, NULL, OPT_DOOR_PORT },
        { "max-peer-xfers", required_argument, NULL, OPT_MAX_PEER_XFERS },
        { "max-peer-staging", required_argument, NULL, OPT_MAX_PEER_STAGING },
        { "max-peer-control", required_argument, NULL, OPT_MAX_PEER_CONTROL },
        { "min-deadline-ms", required_argument, NULL, OPT_MIN_DEADLINE },
        { "peer-quarantine-bytes", required_argument, NULL, OPT_PEER_QUARANTINE },
        { "peer-idle-ms", required_argument, NULL, OPT_PEER_IDLE },
        { "max-hellos-per-s", required_argument, NULL, OPT_MAX_HELLOS },
        { "max-notice-bytes", required_argument, NULL, OPT_MAX_NOTICE },
        { "remote-access", required_argument, NULL, OPT_REMOTE_ACCESS },
        { "admin-group", required_argument, NULL, OPT_ADMIN_GROUP },
        { "settle-ms", required_argument, NULL, OPT_SETTLE },
        { "max-register-bytes", required_argument, NULL, OPT_MAX_REGISTER },
        { "hello-timeout-ms", required_argument, NULL, OPT_HELLO_TIMEOUT },
        { "metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, OPT_VERSION },
        { NULL, 0, NULL, 0 },
    };
    bool in_flight_set = false;
    int c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "s:h", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (strlen(optarg) == 0 || strlen(optarg) >= sizeof(cfg->socket_path)) {
                fprintf(stderr, "b10d: --socket must be 1..%zu bytes\n", sizeof(cfg->socket_path) - 1);
                return -1;
            }
            snprintf(cfg->socket_path, sizeof(cfg->socket_path), "%s", optarg);
            break;
        case OPT_NAME:
            if (strlen(optarg) == 0 || strlen(optarg) >= sizeof(cfg->name)) {
                fprintf(stderr, "b10d: --name must be 1..%zu bytes\n", sizeof(cfg->name) - 1);
                return -1;
            }
            snprintf(cfg->name, sizeof(cfg->name), "%s", optarg);
            break;
        case OPT_LOG_LEVEL:
            if ((cfg->log_level = log_level_parse(optarg)) < 0) {
                fprintf(stderr, "b10d: --log-level: '%s' is not err, warning, notice, info or debug\n", optarg);
                return -1;
            }
            break;
        case OPT_ERR_MODE:
            if (strcmp(optarg, "peer") == 0)
                cfg->err_mode = CONFIG_ERR_MODE_PEER;
            else if (strcmp(optarg, "none") == 0)
                cfg->err_mode = CONFIG_ERR_MODE_NONE;
            else {
                fprintf(stderr, "b10d: --ucx-err-mode: '%s' is not peer or none\n", optarg);
                return -1;
            }
            break;
        case OPT_PROGRESS:
            if (strcmp(optarg, "spin") == 0 || strcmp(optarg, "event") == 0)
                cfg->progress_spin = optarg[0] == 's';
            else if (strcmp(optarg, "auto") == 0)
                cfg->progress_spin = sysconf(_SC_NPROCESSORS_ONLN) >= 8;
            else {
                fprintf(stderr, "b10d: --progress: '%s' is not auto, spin or event\n", optarg);
                return -1;
            }
            break;
        case OPT_CHECK:
            cfg->check_only = true;
            break;
        case OPT_CLUSTER_KEY:
            if (config_set_path(cfg->cluster_key, sizeof(cfg->cluster_key), "cluster-key", optarg) != 0)
                return -1;
            break;
        case OPT_CLUSTER_KEY_NEXT:
            if (config_set_path(cfg->cluster_key_next, sizeof(cfg->cluster_key_next),
                                "cluster-key-next", optarg) != 0)
                return -1;
            break;
        case OPT_GEN_KEY:
            if (config_set_path(cfg->gen_key, sizeof(cfg->gen_key), "gen-key", optarg) != 0)
                return -1;
            break;
        case OPT_INSECURE:
            cfg->insecure = true;
            break;
        case OPT_TRACE:
            cfg->trace = true;
            break;
        case OPT_VERIFY_DATA:
            if (strcmp(optarg, "on") == 0) {
                cfg->verify_data = CONFIG_VERIFY_ON;
            } else if (strcmp(optarg, "auto") == 0) {
                cfg->verify_data = CONFIG_VERIFY_AUTO;
            } else if (strcmp(optarg, "off") == 0) {
                cfg->verify_data = CONFIG_VERIFY_OFF;
            } else {
                fprintf(stderr, "b10d: --verify-data: '%s' is not on, auto or off\n", optarg);
                return -1;
            }
            break;
        case OPT_NET_DEVICES:
            if (!config_net_devices_ok(optarg)) {
                fprintf(stderr, "b10d: --net-devices '%s': a comma-separated list of device names "
                        "(letters, digits, '_', '-', '.', ':'), or all; at most %zu bytes\n", optarg,
                        sizeof(cfg->net_devices) - 1);
                return -1;
            }
            snprintf(cfg->net_devices, sizeof(cfg->net_devices), "%s", optarg);
            break;
        case OPT_GPU_COPY:
            if (strcmp(optarg, "engine") == 0) {
                cfg->gpu_copy = CONFIG_GPU_COPY_ENGINE;
            } else if (strcmp(optarg, "kernel") == 0) {
                cfg->gpu_copy = CONFIG_GPU_COPY_KERNEL;
            } else if (strcmp(optarg, "auto") == 0) {
                cfg->gpu_copy = CONFIG_GPU_COPY_AUTO;
            } else {
                fprintf(stderr, "b10d: --gpu-copy: '%s' is not engine, kernel or auto\n", optarg);
                return -1;
            }
            break;
        case OPT_REMOTE_ACCESS:
            if (strcmp(optarg, "any") == 0)
                cfg->remote_access = CONFIG_REMOTE_ANY;
            else if (strcmp(optarg, "paired") == 0)
                cfg->remote_access = CONFIG_REMOTE_PAIRED;
            else {
                fprintf(stderr, "b10d: --remote-access: '%s' is not any or paired\n", optarg);
                return -1;
            }
            break;
        case OPT_ADMIN_GROUP:
            if (config_set_group(cfg, optarg) != 0)
                return -1;
            break;
        case OPT_METRICS_LISTEN:
            if (config_set_metrics(cfg, optarg) != 0)
                return -1;
            break;
        case 'h':
            config_usage(stdout);
            return 1;
        case OPT_VERSION:
            printf("b10d %s (protocol %d)\n", B10D_VERSION, B10_PROTOCOL_VERSION);
            return 1;
        default: {
            size_t i;
            for (i = 0; i < sizeof(config_nums) / sizeof(config_nums[0]); i++)
                if (config_nums[i].opt == c)
                    break;
            if (i == sizeof(config_nums) / sizeof(config_nums[0])) {
                fprintf(stderr, "b10d: try --help\n");
                return -1;
            }
            if (config_set_num(cfg, &config_nums[i], optarg) != 0)
                return -1;
            in_flight_set |= c == OPT_IN_FLIGHT;
        }
        }
    }
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
    if (optind < argc) {
        fprintf(stderr, "b10d: unexpected argument '%s'; try --help\n", argv[optind]);
        return -1;
    }
    if (cfg->gen_key[0] != '\0')
        return 0;   /* main makes the key; the other settings do not matter */
    return config_check(cfg);
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
    printf("trace %s\n", cfg->trace ? "yes" : "no");
    printf("verify-data %s\n", config_verify_name(cfg->verify_data));
    printf("gpu-copy %s\n", config_gpu_copy_name(cfg->gpu_copy));
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
    for (size_t i = 0; i < sizeof(config_nums) / sizeof(config_nums[0]); i++) {
        const struct config_num *num = &config_nums[i];
        uint64_t v = num->width == 8 ? *(const uint64_t *)((const char *)cfg + num->offset)
                                     : *(const uint32_t *)((const char *)cfg + num->offset);
        /* What the daemon will use, not the flag's "derive it" 0. */
        if (num->opt == OPT_MAX_PEER_STAGING)
            v = config_peer_staging(cfg);
        else if (num->opt == OPT_PEER_QUARANTINE)
            v = config_peer_quarantine(cfg);
        printf("%s %" PRIu64 "\n", num->name, v);
    }
}
