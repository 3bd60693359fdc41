/*
 * config-table.h — b10d's options, one entry each (config-table.c), in the
 * order --help lists them: what getopt_long is given, what --help and the
 * man page's OPTIONS say (optdoc.h), and for a number its bounds and the
 * field of struct config it lands in. config.c parses and prints with it;
 * nothing else about an option is written anywhere else.
 */
#ifndef B10D_CONFIG_TABLE_H
#define B10D_CONFIG_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "optdoc.h"

/* getopt_long's values of the options that have no letter. */
enum {
    OPT_NAME = 256, OPT_LOG_LEVEL, OPT_STAGING, OPT_VIEW, OPT_IN_FLIGHT, OPT_DEADLINE,
    OPT_MAX_DEADLINE, OPT_CONNECT_TIMEOUT, OPT_PEER_TIMEOUT, OPT_TTL, OPT_BUDGET, OPT_ERR_MODE,
    OPT_MAX_CLIENTS, OPT_MAX_CLIENTS_UID, OPT_MAX_HOST_UID, OPT_DRAIN_TIMEOUT, OPT_MAX_ADMIN_ROWS,
    OPT_MAX_REGIONS, OPT_MAX_AGENTS, OPT_MAX_XFERS, OPT_MAX_SPANS, OPT_MAX_FRAME, OPT_MAX_PEERS,
    OPT_MAX_CONTROL, OPT_MAX_XFER_BYTES, OPT_GPU_MAX_CTAS, OPT_GPU_FEEDS, OPT_WIRE_LANES, OPT_PROGRESS, OPT_CHECK,
    OPT_VERSION, OPT_CLUSTER_KEY, OPT_CLUSTER_KEY_NEXT, OPT_GEN_KEY, OPT_INSECURE, OPT_TRACE,
    OPT_VERIFY_DATA, OPT_GPU_COPY, OPT_GPU_COPY_CALLS, OPT_NET_DEVICES, OPT_DOOR_PORT, OPT_MAX_PEER_XFERS,
    OPT_MAX_PEER_STAGING, OPT_MAX_PEER_CONTROL, OPT_MIN_DEADLINE, OPT_PEER_QUARANTINE,
    OPT_PEER_IDLE, OPT_MAX_HELLOS, OPT_MAX_NOTICE, OPT_REMOTE_ACCESS, OPT_ADMIN_GROUP, OPT_SETTLE,
    OPT_MAX_REGISTER, OPT_HELLO_TIMEOUT, OPT_METRICS_LISTEN, OPT_MAN,
    OPT_NODE_CERT, OPT_NODE_KEY, OPT_NODE_CA, OPT_MAKE_CA, OPT_ISSUE_CERT, OPT_CA_CERT, OPT_CA_KEY,
    OPT_CERT_OUT, OPT_CERT_DAYS, OPT_NAME_HOLD, OPT_RUNTIME_DIR, OPT_EAGER,
};

struct config_opt {
    struct optdoc doc;
    /* A number, parsed and bounded by these (config_set_num); the rest have code of their own. */
    bool num;
    bool size;          /* accepts K/M/G suffixes */
    uint64_t min, max;
    size_t offset;      /* its field in struct config */
    size_t width;       /* the field's bytes: 4 or 8 */
};

extern const struct config_opt config_table[];
extern const size_t config_table_count;

/* The entry getopt_long returns id for; NULL for none (a heading has none). */
const struct config_opt *config_table_find(int id);

#endif
