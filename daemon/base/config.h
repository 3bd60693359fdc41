/*
 * config.h — the daemon's settings: every limit has a default and a maximum,
 * and every value from the command line is checked against both.
 */
#ifndef B10D_CONFIG_H
#define B10D_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "b10/b10.h"

#define B10D_VERSION "0.1.0"
/* Client ↔ daemon (libb10's B10_API_VERSION must match). */
#define B10_PROTOCOL_VERSION 1
/* Daemon ↔ daemon: B10_PEER_PROTOCOL_VERSION, in hello.h. */

#define B10D_SOCKET_DEFAULT "/run/b10d/b10d.sock"
#define CONFIG_KEY_FILE_DEFAULT "/etc/b10d/cluster.key"
#define CONFIG_KEY_CREDENTIAL "cluster-key"     /* its name under $CREDENTIALS_DIRECTORY */
#define CONFIG_NAME_MAX 64                      /* a daemon's name, with its NUL */

/* Which remote ranks may reach this node's ranks' memory (access.h). */
enum config_remote_access {
    CONFIG_REMOTE_ANY,    /* any rank of a daemon that authenticated */
    CONFIG_REMOTE_PAIRED, /* only those whose descriptor the target rank loaded */
};

enum config_err_mode {
    CONFIG_ERR_MODE_PEER, /* UCX detects peer failure; same-host peers then use tcp */
    CONFIG_ERR_MODE_NONE, /* shared memory on one host; liveness from deadlines alone */
};

struct config {
    char socket_path[108];          /* sun_path's size */
    char name[CONFIG_NAME_MAX];     /* in log lines and to other daemons; default: the host name */
    int log_level;
    uint64_t staging_bytes;         /* host staging pool, bytes */
    uint64_t view_bytes;            /* one staging view = the largest DATA chunk, bytes */
    uint64_t eager_bytes;           /* DATA up to this size goes eagerly (UCX's RNDV_THRESH); 0: UCX's */
    uint32_t max_in_flight;         /* chunks per transfer between gather and send completion */
    uint32_t deadline_ms;           /* default transfer deadline */
    uint32_t max_deadline_ms;       /* cap on any deadline, the client's or the peer's */
    uint32_t connect_timeout_ms;    /* a peer handshake that takes longer fails */
    uint32_t peer_timeout_ms;       /* a busy peer silent this long is lost; 0: deadlines only */
    uint32_t drain_timeout_ms;      /* SIGTERM's drain: in-flight transfers fail after it */
    uint32_t max_admin_rows;        /* rows of one admin list (b10ctl transfers, quarantine, ...) */
    uint32_t quarantine_ttl_ms;
    uint64_t quarantine_budget;     /* quarantined staging bytes past which new transfers fail fast */
    enum config_err_mode err_mode;
    uint32_t wire_lanes;            /* UCX workers on threads of their own for bulk data */
    bool progress_spin;             /* poll the UCX worker while operations are outstanding */
    uint32_t max_clients;
    uint32_t max_clients_per_uid;   /* ranks of one uid; 0 in the flags: three quarters of max_clients */
    uint32_t max_regions;           /* per client */
    uint32_t max_agents;            /* remote agents per client */
    uint32_t max_xfers;             /* transfers in flight per client */
    uint32_t max_spans;             /* spans in one request */
    uint64_t max_xfer_bytes;        /* bytes in one request */
    uint32_t max_frame;             /* client frame payload, bytes */
    uint32_t max_peers;
    uint64_t max_control_bytes;     /* a peer CONTROL message, bytes */
    uint32_t gpu_max_ctas;          /* CTAs of one gather or scatter launch: the GPU stays the model's */
    uint32_t gpu_feeds;             /* copy streams a device, each with a submitting thread (gpu.c) */
    /* --gpu-copy (gpu.h): what moves bytes on a rank's GPU, and sums them there. */
    enum config_gpu_copy {
        CONFIG_GPU_COPY_AUTO,       /* engine, with MPS as without: tests/bench/README.md */
        CONFIG_GPU_COPY_ENGINE,     /* copy engines only; the chunk sums on the CPU */
        CONFIG_GPU_COPY_KERNEL,     /* SM kernels for small pieces and for the sums */
    } gpu_copy;
    /* --gpu-copy-calls (pace.h): how the copy engines are handed scattered pieces. */
    enum config_gpu_calls {
        CONFIG_GPU_CALLS_AUTO,      /* one call a piece while that keeps up, else batches */
        CONFIG_GPU_CALLS_SINGLE,    /* one cudaMemcpyAsync a piece, always */
        CONFIG_GPU_CALLS_BATCH,     /* cudaMemcpyBatchAsync, always */
    } gpu_copy_calls;

    /* Trust between daemons (auth.h, peer.h). */
    char cluster_key[256];          /* --cluster-key; "": the credential or /etc/b10d's, if there */
    char cluster_key_next[256];     /* --cluster-key-next, accepted besides during a rotation */
    char gen_key[256];              /* --gen-key: write a fresh key here and exit */
    bool insecure;                  /* --insecure: accept peers that prove nothing (a lab) */
    /* Node certificates (nodeid.h): all three or none. */
    char node_cert[256];            /* --node-cert: PEM, the leaf then its intermediates */
    char node_key[256];             /* --node-key: PEM, the leaf's private key */
    char node_ca[256];              /* --node-ca: PEM, the trust anchors of every node's chain */
    /* The small cluster's CA: make one, or issue a node's certificate, and exit. */
    char make_ca[256];              /* --make-ca DIR */
    char issue_name[CONFIG_NAME_MAX];   /* --issue-node-cert NAME */
    char ca_cert[256];              /* --ca-cert, --ca-key: the CA that signs it */
    char ca_key[256];
    char cert_out[256];             /* --out DIR */
    uint32_t cert_days;             /* --days: how long a certificate made here is valid */
    char net_devices[256];          /* --net-devices: UCX's NET_DEVICES; "": UCX_NET_DEVICES or all */
    uint32_t door_port;             /* --door-port: the doors' TCP port; 0: the kernel picks (door.h) */
    bool trace;                     /* --trace: log every step of every transfer, in µs */
    bool check_only;                /* --check-config: run the start's checks, print, exit */
    bool info_only;                 /* --help, --version or --man: printed, nothing to run */
    /* --metrics-listen (metrics.h): GET /metrics over HTTP. */
    bool metrics_on;
    char metrics_host[48];          /* a numeric IPv4 or IPv6 address; default 127.0.0.1 */
    uint16_t metrics_port;          /* 0: one the kernel picks, logged */
    /* --verify-data (checksum.h): which DATA chunks are summed where they are gathered. */
    enum config_verify {
        CONFIG_VERIFY_OFF,          /* none, and sums that come are not checked */
        CONFIG_VERIFY_AUTO,         /* those a GPU gathers, whose kernel sums them; all that come */
        CONFIG_VERIFY_ON,           /* every chunk */
    } verify_data;
    uint32_t max_peer_xfers;        /* transfers one peer sends us at once */
    uint64_t max_peer_staging;      /* views held with one peer, and its quarantine; 0: default */
    uint64_t max_peer_control;      /* CONTROL bytes one peer has in flight and held */
    uint32_t min_deadline_ms;       /* a peer's transfer with less time left is refused */
    uint64_t peer_quarantine_bytes; /* quarantined staging one peer's transfers may leave */
    uint32_t peer_idle_ms;          /* an unused peer entry goes after this long */
    uint32_t max_hellos_per_s;      /* handshakes answered, all peers together */
    uint64_t max_notice_bytes;      /* notices queued for one rank, unread */

    uint32_t settle_ms;             /* a failure's news waits this long for its copies to end */
    uint64_t max_register_bytes;    /* memory one rank may register, all regions together */
    uint64_t max_host_bytes_uid;    /* host memory one uid's ranks may register, together; 0 in
                                       the flags: the machine's memory */
    uint32_t hello_timeout_ms;      /* a connection that says neither Hello nor an admin request goes */

    /* Trust on the node (access.h, admin.h). */
    enum config_remote_access remote_access;
    uint32_t name_hold_ms;          /* an agent name stays its uid's this long after its rank left */
    char runtime_dir[256];          /* --runtime-dir: names-file.c keeps the names' claims there; "":
                                       not kept (default: systemd's $RUNTIME_DIRECTORY) */
    bool admin_group_set;           /* --admin-group: its members are operators */
    uint32_t admin_gid;
};

/* A daemon's name: 1..63 of letters, digits, '.', '_' and '-'. */
bool config_name_ok(const char *name);

/* --peer-quarantine-bytes, within --quarantine-budget. */
uint64_t config_peer_quarantine(const struct config *cfg);
/* --max-peer-staging, or its default (config.c says which). */
uint64_t config_peer_staging(const struct config *cfg);

void config_defaults(struct config *cfg);

/*
 * Parse argv into cfg. B10_OK to run (or, with cfg->check_only, to run the
 * start's own checks and config_print; with cfg->info_only, --help,
 * --version or --man was printed and the caller exits 0), B10_ERR_INVALID_ARG on
 * bad input (a message was printed to stderr: the log is not set up yet).
 */
b10_status_t config_parse(struct config *cfg, int argc, char **argv);

/*
 * Print the effective configuration, one "key value" per line: computed
 * values where an option's 0 means "derived" (max-peer-staging), and the
 * cluster key file the start reads (key_path, "" for none) with its id.
 */
void config_print(const struct config *cfg, const char *key_path, uint64_t key_id);

/* "512M", "8MiB", "4096": bytes into *bytes_p; B10_ERR_INVALID_ARG for anything else. */
b10_status_t config_parse_size(const char *text, uint64_t *bytes_p);

/* "on", "auto" or "off". */
const char *config_verify_name(enum config_verify v);
const char *config_gpu_copy_name(enum config_gpu_copy c);
const char *config_gpu_calls_name(enum config_gpu_calls c);

#endif
