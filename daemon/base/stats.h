/*
 * stats.h — the daemon's counters, and histograms of how transfers ended,
 * by role: how long they took, how long their planning took, how large they
 * were, how many pieces they moved, and their failures by status.
 *
 * Counters: one list (STATS_COUNTERS, STATS_DOOR_COUNTERS) gives each its C
 * name, which is also its `b10ctl stats` name, and its help text; struct
 * stats and the table admin.c exports (stats_counters) are made from it, so
 * a counter cannot be counted and left unexported. Its metric name comes from
 * the C name by one rule (stats_metric_name). The rooms that count reach the
 * struct in struct b10d; door.c counts in a struct stats_door the daemon lends it.
 *
 * Histograms: fed by the transfer engine where a transfer ends (each role's
 * landed and failed operations, xfer-*.c), read by admin.c's renderer for
 * `b10ctl metrics` and GET /metrics. Loop thread only. Buckets are fixed at
 * build time (STATS_*_BOUNDS in stats.c), in base units: seconds, bytes, pieces.
 */
#ifndef B10D_STATS_H
#define B10D_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "b10/b10.h"

/*
 * The counters: monotonic, C name and help text. The help is the metric's
 * HELP line and `b10ctl stats`'s; a new counter is one line here and the
 * code that counts it.
 */
#define STATS_COUNTERS(X)                                                                       \
    X(xfers_submitted, "transfers submitted by this node's ranks")                              \
    X(xfers_succeeded, "submitted transfers that landed")                                       \
    X(xfers_failed, "submitted transfers that failed, for any reason")                          \
    X(xfers_received, "transfers admitted as receiver")                                         \
    X(xfers_received_landed, "received transfers whose bytes all landed")                       \
    X(xfers_received_failed, "received transfers that failed, for any reason")                  \
    X(bytes_sent, "bytes sent in DATA chunks")                                                  \
    X(bytes_landed, "bytes scattered into destination memory")                                  \
    X(late_completions, "completions of operations of finished transfers")                      \
    X(quarantine_events, "resources put in quarantine")                                         \
    X(stale_messages, "control messages of no live link, dropped")                              \
    X(peer_protocol_errors, "protocol violations by remote daemons")                            \
    X(chunks_corrupt, "chunks that failed their checksum, not scattered (--verify-data)")      \
    X(xfers_not_populated, "transfers failed B10_ERR_NOT_POPULATED: a copy met a hole of a rank's memfd") \
    X(client_protocol_errors, "protocol violations by local clients")                           \
    X(xfers_picked, "submitted transfers whose spans came as rows picked from two grids")    \
    X(xfers_planned_in_parts, "local transfers of picks planned a part at a time")              \
    X(xfers_grid_copied, "local transfers of picks the GPU copied straight from their indices") \
    X(gpu_parts_single, "copy-engine submissions made one cudaMemcpyAsync a piece (--gpu-copy-calls)") \
    X(gpu_parts_batched, "copy-engine submissions made as batches, which a model's step may wait behind") \
    X(peers_lost, "remote daemons given up: endpoint errors, silence past --peer-timeout-ms")   \
    X(stalls, "times this daemon found itself stalled past 3/4 of --peer-timeout-ms")         \
    X(hellos_unauthenticated, "HELLOs dropped: they opened under no key this daemon holds")    \
    X(hellos_replayed, "HELLOs dropped as replays of ones seen")                               \
    X(hellos_refused, "HELLOs dropped: malformed, past --max-hellos-per-s, or no room")        \
    X(links_up, "links opened with remote daemons, either direction")                          \
    X(messages_unauthenticated, "link messages dropped: they did not open under the link's keys") \
    X(messages_replayed, "link messages dropped as replays")                                   \
    X(peer_refusals, "work of one remote daemon refused for its limits (--max-peer-*, ...)")   \
    X(peers_evicted, "unused remote daemons forgotten (--peer-idle-ms)")                       \
    X(descriptors_resolved, "descriptors of an earlier boot of a node taken for its later boot known") \
    X(descriptors_refused, "agent descriptors refused: they opened under no key held here")   \
    X(gpu_copies_rescued, "GPU copies found complete a second late: their completion reached nothing (a bug)") \
    X(metrics_dropped_slow, "GET /metrics connections closed without a whole request 2 s after they opened") \
    X(metrics_dropped_evicted, "GET /metrics connections not being answered, closed to make room for a newcomer") \
    X(metrics_refused, "GET /metrics connections closed unanswered: every one open was being answered") \
    X(cpu_us, "CPU time of the daemon, all threads, in us: over bytes_sent + bytes_landed, what moving them cost")

/* The door's counters (door.c): at this daemon's doors, and its knocks at others'. */
#define STATS_DOOR_COUNTERS(X)                                                                  \
    X(door_let_in, "knocks let in at this daemon's doors, their addresses on the gate")        \
    X(door_refused, "key holders' knocks refused at the doors, answered with the reason")     \
    X(door_dropped, "door connections closed unanswered: no key, malformed, slow, no room")   \
    X(door_dropped_slow, "door connections with no whole knock within 1 s (less where --connect-timeout-ms is under 2 s)") \
    X(door_evicted_source, "slow door connections closed for a newer one of their source (an IPv4 address, an IPv6 /64)") \
    X(door_evicted_pool, "slow door connections closed for a newer one: their family's pool was full") \
    X(door_dropped_full, "door connections closed at once: their source or pool held only knocks being answered") \
    X(knocks_let_in, "knocks of this daemon let in at other daemons' doors")                   \
    X(knocks_failed, "knocks of this daemon that ended without being let in")                 \
    X(knocks_retried, "rounds of this daemon's knocks tried again after no door answered")

#define STATS_FIELD(name, help) uint64_t name;
struct stats_door {
    STATS_DOOR_COUNTERS(STATS_FIELD)
};

struct stats {
    STATS_COUNTERS(STATS_FIELD)
    /* The door's, as door.c counts them (door_config.stats) and by name for the table. */
    union {
        struct stats_door door;
        struct {
            STATS_DOOR_COUNTERS(STATS_FIELD)
        };
    };
};
#undef STATS_FIELD

#define STATS_ONE(name, help) +1
enum { STATS_NCOUNTERS = 0 STATS_COUNTERS(STATS_ONE) STATS_DOOR_COUNTERS(STATS_ONE) };
#undef STATS_ONE
_Static_assert(sizeof(struct stats) == STATS_NCOUNTERS * sizeof(uint64_t),
               "every member of struct stats comes from the lists, so is exported");

/* A counter as exported: its name (the C name), its help, where it lies in struct stats. */
struct stats_counter {
    const char *name;
    const char *help;
    size_t offset;
};

/* Every counter, in the lists' order: STATS_NCOUNTERS of them. */
extern const struct stats_counter stats_counters[STATS_NCOUNTERS];

static inline uint64_t stats_value(const struct stats *s, const struct stats_counter *c)
{
    return *(const uint64_t *)((const char *)s + c->offset);
}

/*
 * Counter c's metric name into buf: b10d_NAME_total, a name's xfers_ read
 * transfers_. False for cpu_us, which is exported as Prometheus's
 * process_cpu_seconds_total instead, and for a buf too short.
 */
bool stats_metric_name(const struct stats_counter *c, char *buf, size_t len);

#define STATS_ROLES 4            /* enum xfer_role's roles (admin.c asserts it); named by xfer_role_name */
#define STATS_MAX_BUCKETS 20
#define STATS_MAX_STATUS 128     /* b10_status_t codes counted; others count as the last */

enum stats_kind {
    STATS_DURATION,              /* seconds from submission (or admission) to landed */
    STATS_PLANNING,              /* seconds from submission to planned (the rank waits) */
    STATS_SIZE,                  /* bytes */
    STATS_PIECES,                /* pieces moved: spans after contiguous runs merged */
    STATS_KINDS,
};

/* One histogram: per-bucket counts (not cumulative), the sum and the count of all. */
struct stats_hist {
    uint64_t buckets[STATS_MAX_BUCKETS];
    uint64_t count;
    double sum;
};

struct stats_hists {
    struct stats_hist hist[STATS_KINDS][STATS_ROLES];
    uint64_t failed[STATS_ROLES][STATS_MAX_STATUS];
};

/*
 * A transfer of role landed after seconds, planned in plan_seconds (< 0:
 * not one planned here, the receiver's), of bytes in pieces.
 */
void stats_landed(struct stats_hists *h, unsigned role, double seconds, double plan_seconds,
                  uint64_t bytes, uint32_t pieces);
/* A transfer of role failed with status. */
void stats_failed(struct stats_hists *h, unsigned role, b10_status_t status);

/* The upper bounds of kind's buckets (the +Inf one not among them), and how many. */
const double *stats_bounds(enum stats_kind kind, size_t *n_p);

#endif
