/*
 * config-table.c — see config-table.h. Each entry: the option, its getopt
 * value, its argument, --help's words (their line breaks are --help's), the
 * man page's words where they say more than --help's (optdoc.h's markup),
 * and for a number its bounds and field. A default is said in the words;
 * test-config holds every number's words to config_defaults() and to its
 * maximum here.
 */
#include "config-table.h"

#include "config.h"
#include "frame.h"
#include "wireaddr.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

#define NUM(field, sz, lo, hi)                                                   \
    .num = true, .size = (sz), .min = (lo), .max = (hi),                         \
    .offset = offsetof(struct config, field), .width = sizeof(((struct config *)0)->field)

#define REQ required_argument
#define NONE no_argument

const struct config_opt config_table[] = {
    { .doc = { "socket", 's', REQ, "PATH",
        "client socket (env B10_SOCKET; default " B10D_SOCKET_DEFAULT ")",
        "The client socket (default: `$B10_SOCKET`, else <" B10D_SOCKET_DEFAULT ">), created "
        "with mode 0660. Ignored when the socket comes from systemd." } },
    { .doc = { "name", OPT_NAME, REQ, "NAME",
        "name in log lines (default: the host name)",
        "This daemon's stable name: other daemons know it by it, and it is in every log line "
        "(default: the host name; 1 to 63 letters, digits, '.', '_' or '-'). Every node's daemon "
        "needs a name of its own." } },
    { .doc = { "log-level", OPT_LOG_LEVEL, REQ, "LEVEL",
        "err, warning, notice, info or debug (default info)",
        "err, warning, notice, info or debug (default info)." } },
    { .doc = { "staging-bytes", OPT_STAGING, REQ, "SIZE",
        "host staging pool, K/M/G suffixes (default 512M, 4M..1T)",
        "The host staging pool (default 512M, 4M to 1T). Sizes take K, M and G suffixes." },
      NUM(staging_bytes, true, 4 * MiB, 1024 * GiB) },
    { .doc = { "view-bytes", OPT_VIEW, REQ, "SIZE",
        "one staging view, the largest DATA chunk (default 4M, 64K..1G)",
        "One staging view, the largest DATA chunk (default 4M, 64K to 1G)." },
      NUM(view_bytes, true, 64 * KiB, GiB) },
    { .doc = { "eager-bytes", OPT_EAGER, REQ, "SIZE",
        "DATA of this size or less is sent eagerly: UCX streams it\n"
        "into the receive the peer posted before its READY, with no\n"
        "rendezvous round trip of its own (default 512K, at most 1G;\n"
        "0: UCX's threshold; UCX_RNDV_THRESH in the environment wins)",
        "DATA messages of this size or less are sent eagerly: UCX streams them into the "
        "receive the peer posted before its READY, without a rendezvous round trip of their "
        "own, which is most of a small transfer's time on the wire; larger ones keep UCX's "
        "rendezvous, which moves them without a copy. A message is only sent after READY, so "
        "it is always expected; one that comes after its receive was cancelled is dropped "
        "from UCX's own buffer and reaches no view. Default 512K, at most 1G; 0 leaves UCX's "
        "own threshold, and `UCX_RNDV_THRESH` in the environment wins over this option." },
      NUM(eager_bytes, true, 0, GiB) },
    { .doc = { "max-in-flight", OPT_IN_FLIGHT, REQ, "N",
        "chunks per transfer between gather and send completion\n"
        "(default 4, or --wire-lanes where that is more; 1..64)" },
      NUM(max_in_flight, false, 1, 64) },
    { .doc = { "deadline-ms", OPT_DEADLINE, REQ, "MS",
        "deadline of a transfer that names none (default 30000, at most 3600000)",
        "The deadline of a transfer that names none, or names 0 (default 30000, at most "
        "3600000)." },
      NUM(deadline_ms, false, 1, 3600000) },
    { .doc = { "max-deadline-ms", OPT_MAX_DEADLINE, REQ, "MS",
        "cap on every deadline (default 600000, at most 3600000)",
        "The cap on every deadline (default 600000, at most 3600000)." },
      NUM(max_deadline_ms, false, 1, 3600000) },
    { .doc = { "connect-timeout-ms", OPT_CONNECT_TIMEOUT, REQ, "MS",
        "peer handshake bound (default 10000, at most 600000)",
        "How long a peer handshake may take (default 10000, at most 600000)." },
      NUM(connect_timeout_ms, false, 1, 600000) },
    { .doc = { "peer-timeout-ms", OPT_PEER_TIMEOUT, REQ, "MS",
        "while transfers are open with a remote daemon, heartbeats go\n"
        "both ways; one not heard from this long (no heartbeat, DATA\n"
        "or reply) is lost: its transfers fail B10_ERR_PEER_LOST and\n"
        "its links retire. The same on every daemon, and above the\n"
        "time one chunk takes on the slowest link (default 10000,\n"
        "200..600000; 0: off)",
        "While transfers are open with a remote daemon, the two exchange heartbeats every "
        "quarter of this; one not heard from (no heartbeat, DATA or reply) for all of it is "
        "lost: its transfers fail B10_ERR_PEER_LOST and its links retire. A daemon stalled for "
        "3/4 of it fails its own open transfers before late DATA can land. Give every daemon "
        "the same value, and keep it above the time one chunk takes on the slowest link "
        "(default 10000, 200 to 600000; 0: off, deadlines only)." },
      NUM(peer_timeout_ms, false, 0, 600000) },
    { .doc = { "drain-timeout-ms", OPT_DRAIN_TIMEOUT, REQ, "MS",
        "on SIGTERM, admit nothing new and give transfers in flight\n"
        "this long to finish before failing them (default 10000,\n"
        "at most 600000; keep it below the unit's TimeoutStopSec)",
        "On SIGTERM or SIGINT, or a `b10ctl drain` without its own bound: how long transfers "
        "in flight may take to finish before they fail with B10_ERR_DRAINING (default 10000, "
        "0 to 600000). Keep it below the unit's `TimeoutStopSec=`." },
      NUM(drain_timeout_ms, false, 0, 600000) },
    { .doc = { "settle-ms", OPT_SETTLE, REQ, "MS",
        "a failed transfer is reported once no copy for it can still\n"
        "write (its scatters, the receiver's): past this long it is\n"
        "reported B10_ERR_UNSETTLED and the regions such a copy holds\n"
        "take no new work until it ends; a deregistration waits as\n"
        "long for the copies through its region (default 5000,\n"
        "10..600000)",
        "A failed transfer is reported only once no copy for it can still write (its scatters "
        "here, the receiver's there); past <MS> (default 5000, 10 to 600000) it is reported "
        "B10_ERR_UNSETTLED, and the regions a late copy holds refuse new transfers until it "
        "ends. A deregistration waits as long for the copies through its region." },
      NUM(settle_ms, false, 10, 600000) },
    { .doc = { "max-admin-rows", OPT_MAX_ADMIN_ROWS, REQ, "N",
        "rows of one b10ctl list (default 4096, at most 1048576)",
        "Rows of one `b10ctl` list (default 4096, at most 1048576)." },
      NUM(max_admin_rows, false, 1, 1u << 20) },
    { .doc = { "quarantine-ttl-ms", OPT_TTL, REQ, "MS",
        "how long quarantined resources sit out\n"
        "(default 120000, at most 86400000)" },
      NUM(quarantine_ttl_ms, false, 1, 86400000) },
    { .doc = { "quarantine-budget", OPT_BUDGET, REQ, "SIZE",
        "quarantined staging past which new transfers fail fast\n"
        "with \"staging exhausted\" (default 256M, at most 1T)",
        "Quarantined staging past which new transfers fail fast with "
        "B10_ERR_STAGING_EXHAUSTED (default 256M, at most 1T)." },
      NUM(quarantine_budget, true, 0, 1024 * GiB) },
    { .doc = { "ucx-err-mode", OPT_ERR_MODE, REQ, "MODE",
        "peer: UCX detects a dead peer (same-host peers use tcp);\n"
        "none: shared memory on one host, a dead peer is noticed\n"
        "only by heartbeats and deadlines (default peer, the safe one)",
        "`peer` (the default, the safe one): UCX detects a dead peer, and same-host peers use "
        "tcp. `none`: shared memory on one host, but a dead peer is noticed only by the "
        "heartbeats (--peer-timeout-ms) and transfer deadlines." } },
    { .doc = { "max-clients", OPT_MAX_CLIENTS, REQ, "N",
        "ranks connected (default 256, at most 65536); b10ctl\n"
        "connections are counted apart: 32 of users who are no\n"
        "operators, operators' always admitted",
        "Ranks connected, connections that said Hello (default 256, at most 65536). `b10ctl` "
        "connections are counted apart: at most 32 of users who are no operators, and "
        "operators' always, so a daemon full of ranks still answers its operator." },
      NUM(max_clients, false, 1, 65536) },
    { .doc = { "max-clients-per-uid", OPT_MAX_CLIENTS_UID, REQ, "N",
        "ranks of one uid (default three quarters of\n"
        "--max-clients), so that one user cannot take every slot" },
      NUM(max_clients_per_uid, false, 1, 65536) },
    { .doc = { "max-regions", OPT_MAX_REGIONS, REQ, "N",
        "registrations per client (default 4096, at most 1048576)" },
      NUM(max_regions, false, 1, 1u << 20) },
    { .doc = { "max-register-bytes", OPT_MAX_REGISTER, REQ, "SIZE",
        "memory one client may register, its regions together\n"
        "(default 4T, 1M..1P)" },
      NUM(max_register_bytes, true, MiB, 1024 * 1024 * GiB) },
    { .doc = { "max-host-bytes-per-uid", OPT_MAX_HOST_UID, REQ, "SIZE",
        "host memory (not VRAM) the ranks of one uid may\n"
        "register, together (default: the machine's memory), so\n"
        "that one user cannot make the daemon map it all" },
      NUM(max_host_bytes_uid, true, MiB, 1024 * 1024 * GiB) },
    { .doc = { "hello-timeout-ms", OPT_HELLO_TIMEOUT, REQ, "MS",
        "a connection that sends neither Hello nor a b10ctl request\n"
        "within MS is dropped (default 10000, 100..600000); at most\n"
        "64 such wait at once, the oldest dropped for a new one",
        "A connection that sends neither Hello nor a `b10ctl` request within <MS> is dropped "
        "(default 10000, 100 to 600000); at most 64 such connections wait at once, the oldest "
        "dropped for a new one, so idle connections lock out neither ranks nor `b10ctl`." },
      NUM(hello_timeout_ms, false, 100, 600000) },
    { .doc = { "max-agents", OPT_MAX_AGENTS, REQ, "N",
        "remote agents per client (default 4096, at most 1048576)" },
      NUM(max_agents, false, 1, 1u << 20) },
    { .doc = { "max-xfers", OPT_MAX_XFERS, REQ, "N",
        "transfers in flight per client (default 1024, at most 65536)" },
      NUM(max_xfers, false, 1, 65536) },
    { .doc = { "max-spans", OPT_MAX_SPANS, REQ, "N",
        "spans in one request (default 1048576, at most 16777216)" },
      NUM(max_spans, false, 1, 1u << 24) },
    { .doc = { "max-xfer-bytes", OPT_MAX_XFER_BYTES, REQ, "SIZE",
        "bytes in one request (default 256G, at most 16T)" },
      NUM(max_xfer_bytes, true, MiB, 16384 * GiB) },
    { .doc = { "max-frame", OPT_MAX_FRAME, REQ, "SIZE",
        "largest client message (default 64M, at most 1G)" },
      NUM(max_frame, true, 64 * KiB, FRAME_MAX_LIMIT) },
    { .doc = { "max-peers", OPT_MAX_PEERS, REQ, "N",
        "remote daemons (default 1024, at most 65536)" },
      NUM(max_peers, false, 1, 65536) },
    { .doc = { "max-control-bytes", OPT_MAX_CONTROL, REQ, "SIZE",
        "largest peer CONTROL message (default 64M, at most 1G)" },
      NUM(max_control_bytes, true, 4 * KiB, GiB) },
    { .doc = { "progress", OPT_PROGRESS, REQ, "MODE",
        "spin: poll the UCX workers while transfers run (a core\n"
        "each), unless more threads want to run than the host has\n"
        "CPUs; event: sleep on their event fds; auto: spin from 8\n"
        "CPUs up",
        "`spin`: poll the UCX workers while transfers run (a core each), unless more threads "
        "want to run than the host has CPUs; `event`: sleep on their event fds; `auto` (the "
        "default): spin from 8 CPUs up." } },
    { .doc = { "wire-lanes", OPT_WIRE_LANES, REQ, "N",
        "UCX workers, each on a thread of its own, that carry bulk\n"
        "data so that several cores copy at once; a peer is used\n"
        "on as many as both ends have (default 2, 0..8; 0: all\n"
        "on the loop thread's worker)" },
      NUM(wire_lanes, false, 0, WIREADDR_MAX_LANES) },
    { .doc = { "gpu-copy", OPT_GPU_COPY, REQ, "engine|kernel|auto",
        "engine: the GPU's copy engines move every piece\n"
        "(--gpu-copy-calls) and the CPU sums the chunks, so\n"
        "no kernel of the daemon takes a time slice from a model\n"
        "on that GPU; kernel: SM kernels copy small pieces and sum,\n"
        "which costs a model without MPS its GPU while they run,\n"
        "and its p99 step with MPS. auto (default): engine, with\n"
        "MPS as without (tests/bench/README.md)",
        "What moves bytes on a rank's GPU. `engine`: the copy engines move every piece "
        "(`--gpu-copy-calls`) and the CPU sums the chunks, so no kernel of the daemon takes "
        "a time slice from a model on that GPU; no kernel is loaded. `kernel`: SM kernels copy "
        "pieces under 1 MiB and sum the chunks, faster at 4 KiB pieces, but without MPS a "
        "model's step waits for them (about twice its time measured) and with MPS its p99 "
        "step grows (1.4 times). `auto`, the default, is `engine` with MPS as without "
        "(tests/bench/README.md, \"A model's GPU\"). The start line says which runs and how "
        "many devices share their contexts through MPS." } },
    { .doc = { "gpu-copy-calls", OPT_GPU_COPY_CALLS, REQ, "auto|single|batch",
        "how the copy engines are handed scattered pieces. single:\n"
        "one cudaMemcpyAsync a piece, which never cost a model a\n"
        "time slice but takes the driver 2-3 us a piece (4 KiB\n"
        "pieces at 1.5 GB/s); batch: cudaMemcpyBatchAsync, a third\n"
        "of the CPU, but a model's step can wait up to 0.3 ms\n"
        "behind it; auto (default): single while it keeps up\n"
        "(local transfers: batch)",
        "How the copy engines are handed scattered pieces (`--gpu-copy engine`). `single`: one "
        "`cudaMemcpyAsync` a piece. Measured on the H200, it never cost a co-resident model a "
        "time slice, but the driver takes 2-3 us of a CPU a call, one call of a process at a "
        "time however many streams submit: 4 KiB pieces move at 1.5 GB/s, 32 KiB ones at 10. "
        "`batch`: `cudaMemcpyBatchAsync` of up to 128 pieces, about a third of the CPU a "
        "piece, but in about half the runs a model's decode step waited up to 0.3 ms behind "
        "such batches (p99 1.24-1.92 times its time alone). `auto`, the default: single calls "
        "while they keep up, batches while the pieces come faster than single calls could "
        "take them, judged over windows of at least 2 ms on each copy stream; a local "
        "transfer, which no wire paces, is batched (tests/bench/README.md, \"A model's GPU\")." } },
    { .doc = { "gpu-max-ctas", OPT_GPU_MAX_CTAS, REQ, "N",
        "CTAs of one gather or scatter kernel, so a transfer leaves\n"
        "the GPU to the model (default 32, 1..1024)" },
      NUM(gpu_max_ctas, false, 1, 1024) },
    { .doc = { "gpu-feeds", OPT_GPU_FEEDS, REQ, "N",
        "copy streams of each GPU with the copy engines, each\n"
        "with a thread that submits to it (default 2, 1..8)",
        "Copy streams the daemon keeps on each GPU it copies with (`--gpu-copy engine`, the "
        "default), each with a thread of its own that submits the copy engines' work: the "
        "driver takes about a microsecond of a CPU a piece, so one thread moves 4 KiB pieces "
        "at 4-5 GB/s and several at once add up. With 2, a WRITE of 4 KiB spans into a GPU "
        "moved 0.90-1.00 of the wire's rate where one stream moved 0.75-0.86, and four "
        "added nothing (tests/bench/README.md, \"A model's GPU\"). A copy goes to the device's "
        "least busy stream; the threads and streams are made as copies first need them. With "
        "`--gpu-copy kernel`, one." },
      NUM(gpu_feeds, false, 1, 8) },
    { .doc = { "verify-data", OPT_VERIFY_DATA, REQ, "on|auto|off",
        "on: checksum every DATA chunk where it is gathered and\n"
        "check it before a byte of it is scattered; a chunk that\n"
        "fails fails its transfer with B10_ERR_DATA_CORRUPT. auto\n"
        "(default): the chunks a GPU gathers (the CPU sums them off\n"
        "the GPU; a kernel with --gpu-copy kernel), and every sum\n"
        "that comes is checked;\n"
        "host memory's sums cost ~11% on few CPUs (daemon/README.md)",
        "Which DATA chunks are checksummed (XXH3-64, seeded with the transfer and the chunk) "
        "where their bytes were gathered; the sums travel with the chunk and are checked "
        "before a byte of it is scattered into a rank's memory. A chunk that fails fails its "
        "transfer with `B10_ERR_DATA_CORRUPT`, its view quarantined, and is counted against "
        "its peer (`b10ctl peers`). `on` sums every chunk. `auto`, the default, sums the "
        "chunks a GPU gathers (VRAM chunks above 512 KiB), on the CPU (by a kernel with "
        "`--gpu-copy kernel`); host memory's sums cost about 11% on a host of few CPUs "
        "(daemon/README.md, \"Integrity\"). Both check every sum that comes. `off` sums none "
        "and checks none." } },

    { .doc = { NULL, 0, NONE, NULL, "Trust between daemons (daemon/SECURITY.md):",
        "Trust between daemons\nWhich daemons this one accepts, and where their packets may "
        "reach it (daemon/SECURITY.md)." } },
    { .doc = { "cluster-key", OPT_CLUSTER_KEY, REQ, "PATH",
        "the cluster's secret key, 64 hex digits readable by this user\n"
        "alone (default: $CREDENTIALS_DIRECTORY/" CONFIG_KEY_CREDENTIAL " from systemd's\n"
        "LoadCredential=, else " CONFIG_KEY_FILE_DEFAULT ", if either exists).\n"
        "Without one, remote daemons are refused: only this node's\n"
        "ranks are served",
        "The cluster's secret key: a file of 64 hex digits, readable by this user alone (a key "
        "readable by the group or others is refused, and the daemon does not start). Default: "
        "<$CREDENTIALS_DIRECTORY/" CONFIG_KEY_CREDENTIAL "> when systemd hands it over "
        "(`LoadCredential=`), else <" CONFIG_KEY_FILE_DEFAULT ">, if either exists. Without a "
        "key the daemon refuses every remote daemon and serves its own ranks only, and opens no "
        "network socket (UCX gets its <self> transport alone, whatever `UCX_TLS` says); it says "
        "so at start, in `b10ctl status` and in the metrics." } },
    { .doc = { "cluster-key-next", OPT_CLUSTER_KEY_NEXT, REQ, "PATH",
        "a second key, accepted besides the first while a cluster is\n"
        "re-keyed node by node",
        "A second key, accepted besides the first while a cluster is re-keyed node by node "
        "(daemon/README.md, \"Rotating the key\")." } },
    { .doc = { "node-cert", OPT_NODE_CERT, REQ, "PATH",
        "this node's certificate (PEM: the leaf, then intermediates),\n"
        "naming --name; with --node-key and --node-ca. Remote daemons\n"
        "must then prove their own name by a certificate too",
        "This node's certificate, PEM: the leaf, then its intermediates (at most 4 certificates, "
        "8 KiB in DER). It must name the daemon: a subjectAltName dNSName equal to `--name`, or "
        "a URI whose last segment is the name (<spiffe://cluster/b10d/NAME>). Needs "
        "`--node-key`, `--node-ca` and a cluster key beside it. Each handshake then proves both "
        "nodes' names by their keys, and a name is charged as one principal "
        "(daemon/README.md, \"Node certificates\"). The files are read again when they "
        "change; a bad new file is logged and the identity in use kept." } },
    { .doc = { "node-key", OPT_NODE_KEY, REQ, "PATH",
        "the private key of --node-cert (PEM, Ed25519 or ECDSA P-256,\n"
        "unencrypted; owned by this user or root, no group/other bits)",
        "The private key of `--node-cert`: PEM, Ed25519 or ECDSA P-256, unencrypted, under the "
        "rules of a cluster key file (owned by this user or root, no permission for group or "
        "others)." } },
    { .doc = { "node-ca", OPT_NODE_CA, REQ, "PATH",
        "the trust anchors (PEM) every node's chain must reach",
        "The trust anchors (PEM, one or more certificates) every node's chain must reach, this "
        "node's own included." } },
    { .doc = { "make-ca", OPT_MAKE_CA, REQ, "DIR",
        "write a small cluster's CA, DIR/ca.key (0600) and DIR/ca.crt,\n"
        "valid --days (default 3650), and exit",
        "Write a small cluster's CA, <DIR>/ca.key (mode 0600, Ed25519) and <DIR>/ca.crt, valid "
        "for `--days` (default 3650), and exit. An existing file is never overwritten." } },
    { .doc = { "issue-node-cert", OPT_ISSUE_CERT, REQ, "NAME",
        "with --ca-cert, --ca-key and --out DIR: write DIR/NAME.key\n"
        "(0600) and DIR/NAME.crt, signed by that CA, valid --days\n"
        "(default 365), and exit",
        "With `--ca-cert`, `--ca-key` and `--out` <DIR>: write <DIR>/<NAME>.key (mode 0600, "
        "Ed25519) and <DIR>/<NAME>.crt naming <NAME> (a dNSName), signed by that CA and valid "
        "for `--days` (default 365), and exit. An existing file is never overwritten." } },
    { .doc = { "ca-cert", OPT_CA_CERT, REQ, "PATH", "the CA certificate --issue-node-cert signs with",
        NULL } },
    { .doc = { "ca-key", OPT_CA_KEY, REQ, "PATH", "the CA's private key, for --issue-node-cert",
        NULL } },
    { .doc = { "out", OPT_CERT_OUT, REQ, "DIR", "where --issue-node-cert writes", NULL } },
    { .doc = { "days", OPT_CERT_DAYS, REQ, "N",
        "how long a certificate --make-ca or --issue-node-cert makes\n"
        "is valid (1..36500; by default a CA's 3650, a node's 365)",
        "How long a certificate `--make-ca` or `--issue-node-cert` makes is valid, in days "
        "(1 to 36500; by default a CA's 3650, a node's 365)." },
      NUM(cert_days, false, 1, 36500) },
    { .doc = { "gen-key", OPT_GEN_KEY, REQ, "PATH",
        "write a fresh cluster key to PATH (mode 0600, never over an\n"
        "existing file) and exit",
        "Write a fresh key to <PATH> (mode 0600; an existing file is never overwritten), print "
        "its id, and exit." } },
    { .doc = { "net-devices", OPT_NET_DEVICES, REQ, "LIST",
        "the network devices UCX may listen and send on, as UCX names\n"
        "them (eth0,mlx5_0:1; \"all\"); default: UCX_NET_DEVICES, else\n"
        "all. Logged at start. A daemon without a key opens none",
        "The network devices UCX may listen and send on, as UCX names them (<eth1,mlx5_0:1>), "
        "or <all>; it overrides `UCX_NET_DEVICES`. Default: `UCX_NET_DEVICES`, else all. "
        "Logged at start, at notice level when UCX listens on every device. UCX parses "
        "connection requests before the daemon checks a key: name the cluster's devices, and "
        "filter addresses with the drop-in <b10d.service.d/network.conf.example> "
        "(daemon/SECURITY.md, \"Beyond the gate\"). A daemon without a key opens no network "
        "socket at all." } },
    { .doc = { "door-port", OPT_DOOR_PORT, REQ, "PORT",
        "the TCP port of this daemon's doors, where another daemon\n"
        "proves it holds the cluster key before its packets may reach\n"
        "UCX (default 0: one the kernel picks, named in descriptors)" },
      NUM(door_port, false, 0, 65535) },
    { .doc = { "insecure", OPT_INSECURE, NONE, NULL,
        "also accept daemons that prove nothing (a well-known key):\n"
        "for a lab only, logged at warning",
        "Also accept daemons that prove nothing (a key everyone knows). For a lab only: anyone "
        "who reaches the daemon over the network can then read and write every rank's "
        "registered memory. Logged at warning, shown by `b10ctl status`." } },
    { .doc = { NULL, 0, NONE, NULL, NULL, "Tracing" } },
    { .doc = { "trace", OPT_TRACE, NONE, NULL,
        "log every step of every transfer (plan, CONTROL, READY, each\n"
        "copy and DATA of its first chunks, RESULT, the rank told)\n"
        "with its µs, one line when it ends: where a request's time goes",
        "Log every step of every transfer with its microseconds, one line when the transfer "
        "ends: planned, CONTROL, READY, each copy and DATA of its first eight chunks, RESULT, "
        "the rank told. For finding where a request's time goes; off by default." } },
    { .doc = { NULL, 0, NONE, NULL, NULL,
        "Limits on remote daemons\n"
        "What one remote daemon may take of this one: its transfers at once, staging, CONTROL "
        "bytes, the shortest deadline, its share of the quarantine; how long an unused peer "
        "entry stays, how many handshakes are answered a second, and how many bytes of "
        "notices may wait for a rank. Each refusal says why, is counted, and is logged at most "
        "once a second." } },
    { .doc = { "max-peer-xfers", OPT_MAX_PEER_XFERS, REQ, "N",
        "transfers one remote daemon sends us at once (default 512,\n"
        "1..65536)" },
      NUM(max_peer_xfers, false, 1, 65536) },
    { .doc = { "max-peer-staging", OPT_MAX_PEER_STAGING, REQ, "SIZE",
        "staging views held by transfers with one remote daemon, with\n"
        "what its failed ones left in the quarantine; past it they wait\n"
        "for their own views (default a quarter of --staging-bytes, at\n"
        "least two windows of --view-bytes x --max-in-flight)" },
      NUM(max_peer_staging, true, 0, 1024 * GiB) },
    { .doc = { "max-peer-control", OPT_MAX_PEER_CONTROL, REQ, "SIZE",
        "CONTROL bytes one remote daemon has in flight and held\n"
        "(default 128M, at least --max-control-bytes)" },
      NUM(max_peer_control, true, 4 * KiB, 16 * GiB) },
    { .doc = { "min-deadline-ms", OPT_MIN_DEADLINE, REQ, "MS",
        "a remote daemon's transfer or READ with less time left is\n"
        "refused (default 100, 1..60000)" },
      NUM(min_deadline_ms, false, 1, 60000) },
    { .doc = { "peer-quarantine-bytes", OPT_PEER_QUARANTINE, REQ, "SIZE",
        "quarantined staging the failed transfers of one remote\n"
        "daemon may leave before its new ones are refused (default\n"
        "64M; never more than --quarantine-budget)" },
      NUM(peer_quarantine_bytes, true, 0, 1024 * GiB) },
    { .doc = { "peer-idle-ms", OPT_PEER_IDLE, REQ, "MS",
        "a remote daemon with no link, transfer or rank naming it is\n"
        "forgotten after this long (default 300000, 1000..86400000)" },
      NUM(peer_idle_ms, false, 1000, 86400000) },
    { .doc = { "max-hellos-per-s", OPT_MAX_HELLOS, REQ, "N",
        "handshakes answered per second, all daemons together\n"
        "(default 64, 1..100000)" },
      NUM(max_hellos_per_s, false, 1, 100000) },
    { .doc = { "max-notice-bytes", OPT_MAX_NOTICE, REQ, "SIZE",
        "notices queued unread for one rank; past it their senders\n"
        "get B10_ERR_BUSY (default 16M, 64K..128M)" },
      NUM(max_notice_bytes, true, 64 * KiB, 128 * MiB) },

    { .doc = { NULL, 0, NONE, NULL, "Trust on the node (daemon/SECURITY.md):",
        "Trust on the node\nWhich ranks and users of this node may reach what "
        "(daemon/SECURITY.md, \"Ranks of one node\")." } },
    { .doc = { "remote-access", OPT_REMOTE_ACCESS, REQ, "MODE",
        "any: ranks of every authenticated daemon may write and read\n"
        "the memory this node's ranks registered (the default);\n"
        "paired: only those whose descriptor the target rank loaded",
        "`any` (the default): a rank of any daemon that authenticated may write into, read, "
        "check and notify the ranks of this node. `paired`: only a rank whose descriptor the "
        "target rank loaded. Between ranks of this node of different users, that pairing (or "
        "a region registered open to the node) is always needed; ranks of one user need "
        "nothing. Refusals are B10_ERR_PERMISSION, naming both ranks." } },
    { .doc = { "admin-group", OPT_ADMIN_GROUP, REQ, "GROUP",
        "members of GROUP (a name or a gid) are operators: they see\n"
        "every rank's registrations and transfers, cancel any, drain.\n"
        "Root and the daemon's own user always are (default: none more)",
        "Members of <GROUP> (a name or a gid) are operators besides root and the daemon's own "
        "user: they see every rank's registrations and transfers, cancel any and drain. "
        "Default: none besides those two." } },
    { .doc = { "name-hold-ms", OPT_NAME_HOLD, REQ, "MS",
        "an agent name is the first uid's to say Hello with it while\n"
        "its rank is connected and this long after it left, across\n"
        "restarts of the daemon (default 86400000, 1000..2592000000)",
        "An agent name belongs to the first user whose rank said Hello with it: while that rank "
        "is connected, and for <MS> after it left (default 86400000, a day; 1000 to 2592000000). "
        "Meanwhile a rank of that user takes it back and any other user's is refused "
        "B10_ERR_PERMISSION, naming the holder's uid; a restart of the daemon changes nothing "
        "of that while `--runtime-dir` keeps the names." },
      NUM(name_hold_ms, false, 1000, 2592000000u) },
    { .doc = { "runtime-dir", OPT_RUNTIME_DIR, REQ, "DIR",
        "where the daemon keeps which user holds which rank name, so\n"
        "that its restart gives no name to another user: a folder of\n"
        "its own, not writable by group or others (default: systemd's\n"
        "$RUNTIME_DIRECTORY; without one, a restart forgets them)",
        "Where the daemon keeps which user holds which agent name (the file <DIR/names>, mode "
        "0600), so that a restart of the daemon, a crash included, gives no rank's name to "
        "another user before that rank reconnects. It must be a folder of the daemon's own "
        "user that group and others cannot write, one daemon a folder (else the start fails). "
        "A file there that is not the daemon's, is writable by others, or does not decode is "
        "refused: logged, moved aside to <DIR/names.refused>, and the daemon starts with no "
        "names held. Written at most every 100 ms and at shutdown: a crash forgets a name "
        "claimed in its last 100 ms or so. Default: systemd's `$RUNTIME_DIRECTORY` (the unit's "
        "`RuntimeDirectory=b10d/state`, which a restart keeps and a stop removes); without "
        "either, or given an empty <DIR>, a restart forgets the names." } },
    { .doc = { NULL, 0, NONE, NULL, NULL, "Metrics and checks" } },
    { .doc = { "metrics-listen", OPT_METRICS_LISTEN, REQ, "[ADDR:]PORT",
        "serve GET /metrics (Prometheus text) over HTTP on\n"
        "ADDR:PORT ([ADDR6]:PORT); a bare PORT listens on 127.0.0.1\n"
        "only: name 0.0.0.0 or an interface's address to expose it\n"
        "(default: off). Unauthenticated: what b10ctl metrics shows",
        "Serve `GET /metrics` (Prometheus text, the same `b10ctl metrics` prints) over HTTP on "
        "<ADDR>:<PORT> (`[`<ADDR6>`]:`<PORT> for IPv6; port 0: one the kernel picks, logged). "
        "A bare <PORT> listens on 127.0.0.1 only: name an interface's address or 0.0.0.0 to "
        "expose it. Unauthenticated; bounded (8 KiB and 64 lines of request head, arriving "
        "whole within 2 s; 16 connections, 10 s each; when they are all open, a new one takes "
        "the place of the oldest not being answered, of the address holding the most). "
        "Default: off. Under systemd, the `metrics.conf` drop-in "
        "(`systemd/b10d-metrics.conf`)." } },
    { .doc = { "check-config", OPT_CHECK, NONE, NULL,
        "run every check the start runs (options, the cluster keys:\n"
        "present, mode 0600 or 0400, owned by this user or root,\n"
        "64 hex digits; node certificates; the --metrics-listen\n"
        "address binds; the --runtime-dir folder), print the effective\n"
        "configuration, exit (0: it would start; 1: a key, a\n"
        "certificate, the metrics address or the folder stops it;\n"
        "2: an option)",
        "Run every check the start runs \xe2\x80\x94 the options, and the cluster keys with "
        "the very code the start reads them with (present, a regular file of mode 0600 or "
        "0400, owned by this user or root, 64 hex digits), the node certificate, key and "
        "anchors (`--node-cert`: the chain, the dates, the name, the key) as the start checks "
        "them, that the --metrics-listen address binds, and the `--runtime-dir` folder "
        "(the daemon's own, not writable by group or others) \xe2\x80\x94 then print the "
        "effective configuration one \"key value\" per line (derived values as the daemon "
        "will use them: --max-peer-staging computed, the key file read and its id) and exit: "
        "0 when the daemon would start, 1 when a key, a certificate, the metrics address or "
        "the runtime folder stops it (with the start's own message), 2 for a bad option. "
        "The unit runs it as `ExecStartPre=`." } },
    { .doc = { "help", 'h', NONE, NULL, "this text",
        "Print the options with their defaults and bounds, and exit." } },
    { .doc = { "version", OPT_VERSION, NONE, NULL, "the version",
        "Print the version and the protocol version, and exit." } },
    /* `make man` asks for the man page's entries of this table (scripts/man-sections.py). */
    { .doc = { "man", OPT_MAN, REQ, "SECTION", NULL, NULL } },
};

const size_t config_table_count = sizeof(config_table) / sizeof(config_table[0]);

const struct config_opt *config_table_find(int id)
{
    for (size_t i = 0; i < config_table_count; i++)
        if (config_table[i].doc.name != NULL && config_table[i].doc.id == id)
            return &config_table[i];
    return NULL;
}
