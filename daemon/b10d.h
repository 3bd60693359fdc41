/*
 * b10d.h — the daemon's top object and who owns whom.
 *
 *   struct b10d                         one per process, passed everywhere (no globals)
 *    ├── struct config                  settings, read-only after start
 *    ├── uv_loop_t                      the one loop thread that owns all state below
 *    ├── struct names                   agent names and the uids that hold them (names.c)
 *    ├── struct names_file              ... kept across restarts in --runtime-dir (names-file.c)
 *    ├── struct ipc                     client socket: listener and connections (ipc.c)
 *    │     └── struct session ×N        one per connected rank (session.c)
 *    │           ├── struct mem_table   its registered regions (mem.c; kinds dram.c, …)
 *    │           ├── remote agents      name → struct peer
 *    │           └── struct xfer ×N     transfers it submitted (sender side)
 *    ├── struct wire                    UCX context, worker, endpoints (wire.c and, for
 *    │     │                            its data lanes, lane.c: the only rooms that
 *    │     │                            include UCX headers)
 *    │     └── struct lane ×N           a worker on a thread of its own, for DATA
 *    ├── struct peer ×N                 remote daemons by name: endpoint, links and their
 *    │                                  keys, their share of this daemon (peer.c)
 *    ├── struct peer_handshakes         HELLOs answered, waiting; their budget (peer-hello.c)
 *    ├── struct peer_dispatch           where a link's messages go up; strays, by sender
 *    │                                  and burst (peer-dispatch.c)
 *    ├── struct peer_liveness           heartbeats, the stall clock (peer-liveness.c)
 *    ├── struct auth_keyring            the cluster keys held (auth.c: libsodium's room)
 *    ├── struct nodeid                  this node's certificate, key, trust anchors
 *    │                                  (nodeid.c: OpenSSL's room)
 *    ├── struct xfer ×N                 every transfer, both roles (xfer.c), each holding
 *    │                                  a struct plan (plan.c) and staging views
 *    ├── struct staging                 pinned host views registered with UCX (staging.c)
 *    ├── struct tags                    tag registry: live and quarantined tags (tags.c)
 *    ├── struct quarantine              what failed transfers left behind (quarantine.c)
 *    ├── struct service                 systemd: activation, notify, watchdog; the drain
 *    │                                  (service.c); admin requests are answered by admin.c
 *    ├── struct gpu                     CUDA copiers per device, VRAM mappings (gpu.c)
 *    ├── struct metrics                 GET /metrics on --metrics-listen (metrics.c)
 *    ├── struct stats                   counters (stats.h: one list, each exported)
 *    └── struct stats_hists             how transfers ended, by role (stats.c)
 *
 * Other threads (the DRAM copy workers of copy.c, CUDA's host callbacks in
 * gpu.c, the data lanes of lane.c) never touch this state: they hand their
 * results back to the loop through libuv.
 */
#ifndef B10D_B10D_H
#define B10D_B10D_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "auth.h"
#include "config.h"
#include "door.h"
#include "ids.h"
#include "list.h"
#include "log.h"
#include "peer-dispatch.h"
#include "peer-hello.h"
#include "peer-liveness.h"
#include "stats.h"
#include "b10/b10.h"

/* B10D_VERSION and B10_PROTOCOL_VERSION: config.h, where --version prints them. */

struct ipc;
struct wire;
struct staging;
struct tags;
struct quarantine;
struct service;
struct gpu;
struct names;
struct names_file;

struct metrics;
struct rank_ops;
struct gpu_hooks;

struct b10d {
    struct config cfg;
    uv_loop_t *loop;
    uint64_t daemon_id;             /* random per boot: names this incarnation to peers */
    uint64_t incarnation;           /* when this boot started, ns since the epoch: orders boots */
    struct ids ids;                 /* transfer ids and endpoint generations of this boot */
    uint64_t next_region;

    struct ipc *ipc;
    struct wire *wire;
    struct gate *gate;              /* a keyed daemon's: who may reach UCX (gate.h) */
    struct door *door;              /* and where they prove the key (and node: nodeid) first (door.h) */
    struct staging *staging;
    struct tags *tags;
    struct quarantine *quarantine;
    struct service *service;
    struct gpu *gpu;                /* NULL without a CUDA device */

    struct names *names;            /* agent names and the uids holding them (names.c) */
    struct names_file *names_file;  /* ... kept in --runtime-dir (names-file.c); NULL without */
    struct list sessions;           /* struct session.node */
    uint32_t nsessions;             /* connections: ranks, b10ctl, not yet introduced */
    uint32_t nranks;                /* sessions past Hello, counted against --max-clients */
    uint32_t admin_connections;     /* b10ctl connections of non-operators (admin.h) */
    uint32_t regs_running;          /* registrations being opened on the thread pool (session.c) */
    struct list regs_waiting;       /* ... and those waiting for a turn */
    uint32_t aheads_running;        /* submits of many spans planned on the thread pool (session.c) */
    struct list aheads_waiting;     /* ... and those waiting for a turn */
    struct list peers;              /* struct peer.node */
    uint32_t npeers;
    /*
     * Trust between daemons (auth.h): the keys this daemon holds (the first
     * seals its HELLOs and descriptors; peer-hello.c loads them).
     */
    struct auth_keyring keys;
    struct nodeid *nodeid;              /* --node-cert: this node's certificate and key (nodeid.c); NULL without */
    uint64_t control_held;          /* CONTROL bytes admitted transfers hold, all peers together */
    /* The link rooms' own state (peer-int.h tells the rooms). */
    struct peer_handshakes handshakes;  /* peer-hello.c: handshakes answered, HELLO budget, sweep */
    struct peer_dispatch dispatch;      /* peer-dispatch.c: where a link's messages go up */
    struct peer_liveness liveness;      /* peer-liveness.c: heartbeats, silence, stalls */
    const struct rank_ops *rank_ops;        /* session.c's: what the engine asks of ranks */
    const struct gpu_hooks *gpu_hooks;      /* copy.c's: where the GPU room hands parts back */
    struct list xfers;              /* struct xfer.node: every live transfer */
    uint32_t nxfers;
    struct list settling;           /* struct xfer.node: failed, news waiting for copies to end */
    uint32_t gathers_ahead_ending;  /* gathers ahead of READY still running for failed sends */
    struct list ahead_parked;       /* struct xfer.ahead_node: sends holding a view gathered ahead */
    uint32_t test_copy_delay_ms;    /* B10_TEST_COPY_DELAY_MS: scatters wait this long (tests) */
    bool test_local_staged;         /* B10_TEST_LOCAL_STAGED: local copies through views (tests) */
    uint32_t test_gpu_stop_ms;      /* gpu_stop's waits, each (unit tests); 0: gpu.c's bounds */
    uint32_t fault_flip_every;      /* B10D_FAULT_FLIP_DATA: flip a byte of every Nth chunk sent */
    uint64_t fault_flip_seen;       /* chunks sealed since start, for that count */
    bool fault_news_first;          /* B10D_FAULT_NEWS_FIRST: failures told before their copies end */
    uint32_t fault_spill_every;     /* B10D_FAULT_SPILL_BYTE: every Nth scatter spills one byte */
    uint64_t fault_spill_seen;      /* scatters since start, for that count (pool threads: atomic) */
    uint32_t fault_drop_reason_every;  /* B10D_FAULT_DROP_REASON: every Nth failure told bare */
    uint64_t fault_drop_reason_seen;   /* failures told since start, for that count */
    /* Small host copies done on the loop thread, their completions due next turn (copy.c). */
    struct list copies_inline;
    uv_idle_t copies_idle;
    bool copies_inline_on;

    struct stats stats;
    struct stats_hists hists;       /* fed where transfers end (xfer-*.c), read by admin.c */
    struct metrics *metrics;        /* --metrics-listen's server, or NULL */
    uv_signal_t sigterm, sigint;
    bool stopping;                  /* draining or shutting down: no new transfers admitted */

    /* The clock of deadlines, in ms; tests may replace it. */
    uint64_t (*now_ms)(struct b10d *d);
};

/*
 * The tests' fault hooks, from the environment (b10d(8), ENVIRONMENT), into
 * d's test_ and fault_ fields. main.c reads them once, beside the options
 * and before b10d_start: they are settings of the process, not a room's
 * start, and b10d_start stays the rooms in order. B10_ERR_INVALID_ARG
 * (said) for a value out of range.
 */
b10_status_t b10d_test_hooks(struct b10d *d);
/*
 * Start every room. On failure the room that failed said why in the log,
 * the status says what kind of failure it was, and the caller still calls
 * b10d_stop().
 */
b10_status_t b10d_start(struct b10d *d);
/* Fail what is in flight, close everything, free everything (accepts a half-started daemon). */
void b10d_stop(struct b10d *d);

/* Fill buf with random bytes from the kernel. */
void b10d_random(void *buf, size_t len);

#endif
