/* b10d.c — the daemon's life: start every room, run the loop, stop in order. */
#include "b10d.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "copy.h"
#include "door.h"
#include "gate.h"
#include "gpu.h"
#include "ipc.h"
#include "metrics.h"
#include "names.h"
#include "names-file.h"
#include "peer.h"
#include "quarantine.h"
#include "service.h"
#include "session.h"
#include "staging.h"
#include "tags.h"
#include "wire.h"
#include "xfer.h"
#include "ask.h"

void b10d_random(void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            /* No entropy source at all: a clock-seeded fallback beats refusing to start. */
            uint64_t t = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32) ^ (uintptr_t)p;
            for (size_t i = 0; i < len; i++, t = t * 6364136223846793005u + 1442695040888963407u)
                p[i] = (uint8_t)(t >> 56);
            return;
        }
        p += n;
        len -= (size_t)n;
    }
}

/* What a link brings for the transfer engine: the peer room opens it, these act on it. */
static const struct peer_hooks b10d_peer_hooks = {
    .on_control = xfer_recv_admit,
    .on_read = xfer_read_serve,
    .on_check = ask_on_check,
    .on_notify = ask_on_notify,
};

static uint64_t b10d_monotonic_ms(struct b10d *d)
{
    return uv_hrtime() / 1000000u;
}

static void b10d_on_signal(uv_signal_t *handle, int signum)
{
    struct b10d *d = handle->data;
    /* The first drains (bounded by --drain-timeout-ms) and then stops; a second stops at once. */
    if (d->service != NULL)
        service_on_signal(d->service, signum);
}

/*
 * A keyed daemon's UCX listeners take packets only from addresses that
 * proved the key at a door (gate.h, door.h): the doors open, their places
 * go into the worker address, and the gate closes on UCX's listeners,
 * which wire_create opened, before anything else can reach them.
 */
static b10_status_t b10d_open_doors(struct b10d *d)
{
    const char *env = getenv("UCX_NET_DEVICES");
    struct door_config dc = {
        .name = d->cfg.name, .daemon_id = d->daemon_id,
        .devices = d->cfg.net_devices[0] ? d->cfg.net_devices : env != NULL ? env : "",
        .port = (uint16_t)d->cfg.door_port, .timeout_ms = d->cfg.connect_timeout_ms,
        .knocks_per_s = d->cfg.max_hellos_per_s, .stats = &d->stats.door,
    };
    struct wireaddr_door doors[WIREADDR_MAX_DOORS];
    char detail[256];

    if ((d->gate = gate_create()) == NULL)
        return B10_ERR_NO_MEMORY;
    b10_status_t st = door_create(d->loop, &d->keys, d->nodeid, d->gate, &dc, &d->door, detail,
                                   sizeof(detail));
    if (st == B10_OK && wire_set_doors(d->wire, doors, door_endpoints(d->door, doors)) != B10_OK)
        return B10_ERR_NO_MEMORY;
    if (st == B10_OK) {
        const void *addr;
        size_t addr_len;
        wire_address(d->wire, &addr, &addr_len);
        door_set_boot(d->door, addr, addr_len, d->incarnation);
    }
    if (st == B10_OK)
        st = door_seal(d->door, detail, sizeof(detail));
    if (st != B10_OK) {
        log_err("%s", detail);
        return st;
    }
    log_notice("gate: %u UCX listener%s take packets only from daemons let in at a door",
               gate_listeners(d->gate), gate_listeners(d->gate) == 1 ? "" : "s");
    return B10_OK;
}

/*
 * A number from the environment for a hook of the tests: left alone when
 * unset, else in *n_p, or B10_ERR_INVALID_ARG (said) when it is not one of
 * min..max.
 */
static b10_status_t b10d_hook_count(const char *name, unsigned long min, unsigned long max,
                                    uint32_t *n_p)
{
    const char *v = getenv(name);
    if (v == NULL || *v == '\0')
        return B10_OK;
    char *end;
    unsigned long n = strtoul(v, &end, 10);
    if (*end != '\0' || n < min || n > max) {
        log_err("%s='%s' is not a number from %lu up to %lu", name, v, min, max);
        return B10_ERR_INVALID_ARG;
    }
    *n_p = (uint32_t)n;
    return B10_OK;
}

static const char *b10d_nth(uint32_t n)
{
    return n == 1 ? "" : n == 2 ? "nd" : n == 3 ? "rd" : "th";
}

/*
 * The fault hooks of the tests (b10d(8), ENVIRONMENT): each breaks the
 * daemon on purpose, so each is said loudly at start. The chaos checker
 * (tests/chaos) must catch those that break the failure doctrine.
 */
b10_status_t b10d_test_hooks(struct b10d *d)
{
    b10_status_t rc;
    uint32_t n = 0;

    /* Said loudly, for it slows every scatter. */
    if ((rc = b10d_hook_count("B10_TEST_COPY_DELAY_MS", 0, 600000, &n)) != B10_OK)
        return rc;
    if (n > 0) {
        d->test_copy_delay_ms = n;
        log_warning("test hook: every scatter into a rank's memory waits %u ms first "
                    "(B10_TEST_COPY_DELAY_MS)", n);
    }

    /* The staging path of local transfers, on memory that needs none. */
    const char *staged = getenv("B10_TEST_LOCAL_STAGED");
    if (staged != NULL && strcmp(staged, "1") == 0) {
        d->test_local_staged = true;
        log_warning("test hook: local transfers copy through staging views, never directly "
                    "(B10_TEST_LOCAL_STAGED)");
    }

    /* The integrity tests': bytes that change after their checksum. */
    if ((rc = b10d_hook_count("B10D_FAULT_FLIP_DATA", 1, UINT32_MAX, &d->fault_flip_every)) != B10_OK)
        return rc;
    if (d->fault_flip_every > 0)
        log_warning("fault hook: one byte of every %u%s chunk sent is flipped after its "
                    "checksum was computed (B10D_FAULT_FLIP_DATA)", d->fault_flip_every,
                    b10d_nth(d->fault_flip_every));

    /* The chaos checker's: a failure told before its copies ended (late writes), ... */
    const char *first = getenv("B10D_FAULT_NEWS_FIRST");
    if (first != NULL && strcmp(first, "1") == 0) {
        d->fault_news_first = true;
        log_warning("fault hook: a failed transfer is reported at once, while copies for it "
                    "may still write its destination (B10D_FAULT_NEWS_FIRST)");
    }
    /* ... a scatter that writes one byte past its piece, ... */
    if ((rc = b10d_hook_count("B10D_FAULT_SPILL_BYTE", 1, UINT32_MAX, &d->fault_spill_every)) != B10_OK)
        return rc;
    if (d->fault_spill_every > 0)
        log_warning("fault hook: every %u%s scatter into a rank's memory changes the byte just "
                    "past its piece (B10D_FAULT_SPILL_BYTE)", d->fault_spill_every,
                    b10d_nth(d->fault_spill_every));
    /* ... and a failure told without its reason. */
    if ((rc = b10d_hook_count("B10D_FAULT_DROP_REASON", 1, UINT32_MAX, &d->fault_drop_reason_every)) != B10_OK)
        return rc;
    if (d->fault_drop_reason_every > 0)
        log_warning("fault hook: every %u%s failure told to a rank goes without its reason "
                    "(B10D_FAULT_DROP_REASON)", d->fault_drop_reason_every,
                    b10d_nth(d->fault_drop_reason_every));
    return B10_OK;
}

/* This boot's state before any room starts: its lists, clock, ids and incarnation. */
static void b10d_init(struct b10d *d)
{
    uint64_t seed[IDS_SEED_WORDS];
    struct timespec now;

    list_init(&d->sessions);
    list_init(&d->peers);
    list_init(&d->xfers);
    list_init(&d->settling);
    list_init(&d->ahead_parked);
    list_init(&d->regs_waiting);
    list_init(&d->aheads_waiting);
    if (d->now_ms == NULL)
        d->now_ms = b10d_monotonic_ms;
    /* The transfer engine reaches the node's ranks through session.c's operations. */
    d->rank_ops = &session_rank_ops;
    do
        b10d_random(&d->daemon_id, sizeof(d->daemon_id));
    while (d->daemon_id == 0);
    b10d_random(seed, sizeof(seed));
    ids_init(&d->ids, seed);
    clock_gettime(CLOCK_REALTIME, &now);
    d->incarnation = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

/*
 * The ranks' socket: the one systemd passed (socket activation), else
 * --socket's. *activated_p says which, for the log.
 */
static b10_status_t b10d_open_socket(struct b10d *d, bool *activated_p)
{
    int listen_fd;
    b10_status_t rc;

    if ((rc = service_listen_fd(d->service, &listen_fd)) != B10_OK)
        return rc;
    if (listen_fd >= 0) {
        if ((rc = ipc_adopt(d, listen_fd, &session_ipc_hooks, &d->ipc)) != B10_OK) {
            close(listen_fd);
            return rc;
        }
        /* The activated socket is the one clients reach, whatever --socket said. */
        snprintf(d->cfg.socket_path, sizeof(d->cfg.socket_path), "%s", ipc_path(d->ipc));
    } else if ((rc = ipc_create(d, d->cfg.socket_path, &session_ipc_hooks, &d->ipc)) != B10_OK) {
        return rc;
    }
    *activated_p = listen_fd >= 0;
    return B10_OK;
}

/* The line an operator reads first: who this daemon is, where it listens, what it trusts. */
static void b10d_say_started(const struct b10d *d, bool activated)
{
    log_info("daemon %s %016" PRIx64 " (b10d %s) listening on %s%s, ucx error mode %s, %s; "
             "remote ranks: %s; chunk checksums %s", d->cfg.name, d->daemon_id, B10D_VERSION,
             d->cfg.socket_path, activated ? " (from systemd)" : "",
             d->cfg.err_mode == CONFIG_ERR_MODE_PEER ? "peer" : "none", auth_keyring_trust(&d->keys, d->cfg.insecure),
             d->cfg.remote_access == CONFIG_REMOTE_PAIRED ? "paired only" : "any",
             d->cfg.verify_data == CONFIG_VERIFY_ON ? "on"
             : d->cfg.verify_data == CONFIG_VERIFY_AUTO ? "auto (the chunks a GPU gathers; --verify-data on: every chunk)"
                                                        : "off (--verify-data on checks every chunk)");
}

b10_status_t b10d_start(struct b10d *d)
{
    struct wire_hooks hooks = {
        .arg = d,
        .take_control = peer_take_control,
        .on_control = peer_on_control,
        .on_ep_error = peer_on_ep_error,
        .on_data = peer_on_data,
    };
    b10_status_t rc;
    bool activated;

    b10d_init(d);
    /* The keys first: a daemon that cannot read its key must not start half trusted. */
    if ((rc = peer_start(d, &b10d_peer_hooks)) != B10_OK)
        return rc;

    if ((d->names = names_create()) == NULL)
        return B10_ERR_NO_MEMORY;
    names_set_hold(d->names, d->cfg.name_hold_ms);
    d->tags = tags_create(1u << 20, 0);
    if (d->tags == NULL)
        return B10_ERR_NO_MEMORY;
    if ((rc = tags_register(d->tags, TAG_HELLO, d)) != B10_OK ||
        (rc = tags_register(d->tags, TAG_HEARTBEAT, d)) != B10_OK)
        return rc;
    /* No key, no remote daemon: nothing on the network to listen for. */
    bool network = d->keys.keys[0].kind != AUTH_KEY_LOCAL;
    if ((rc = wire_create(d, &hooks, network, &d->wire)) != B10_OK)
        return rc;
    if (network && (rc = b10d_open_doors(d)) != B10_OK)
        return rc;
    copy_start(d);
    if ((rc = gpu_start(d, &copy_gpu_hooks)) != B10_OK)
        return rc;
    if ((rc = staging_create(d, d->cfg.staging_bytes, d->cfg.view_bytes, &d->staging)) != B10_OK)
        return rc;
    if ((rc = quarantine_create(d, &d->quarantine)) != B10_OK)
        return rc;
    if ((rc = service_create(d, &d->service)) != B10_OK)
        return rc;
    /* Before the socket is reachable: a SIGTERM sent as soon as a client could connect
     * (a unit stopped right after it started) is a clean stop, not death by signal. */
    uv_signal_init(d->loop, &d->sigterm);
    uv_signal_init(d->loop, &d->sigint);
    d->sigterm.data = d->sigint.data = d;
    uv_signal_start(&d->sigterm, b10d_on_signal, SIGTERM);
    uv_signal_start(&d->sigint, b10d_on_signal, SIGINT);
    if ((rc = b10d_open_socket(d, &activated)) != B10_OK)
        return rc;
    /* The socket is this daemon's now (not another's it lost to): the names' file is too. */
    if ((rc = names_file_open(d, &d->names_file)) != B10_OK)
        return rc;
    b10d_say_started(d, activated);
    if ((rc = metrics_start(d, &d->metrics)) != B10_OK)
        return rc;
    peer_liveness_start(d);
    service_ready(d->service);
    return B10_OK;
}

void b10d_stop(struct b10d *d)
{
    d->stopping = true;
    metrics_stop(d->metrics);
    d->metrics = NULL;
    peer_liveness_stop(d);
    peer_stop(d);
    service_destroy(d->service);
    d->service = NULL;
    /*
     * The first each time: one failure can end others (a READ and its
     * write-back), so a saved next node may be gone already.
     */
    while (!list_empty(&d->xfers))
        xfer_fail(list_entry(d->xfers.next, struct xfer, node), B10_ERR_DRAINING,
                  "the daemon is shutting down");
    /*
     * A failure goes to its rank only once nothing can still write for it:
     * its copies end, the receiver answers its CANCEL, or --settle-ms passes
     * (each waiting transfer's own timer bounds this). The ranks are still
     * connected to hear it, the links still up for the answers.
     */
    while (!list_empty(&d->settling))
        uv_run(d->loop, UV_RUN_ONCE);
    peer_close_all(d);
    door_destroy(d->door);          /* after the peers: none is knocking now */
    d->door = NULL;
    /* Let copies and UCX requests settle, bounded: nothing may be freed under them. */
    for (int i = 0; d->wire != NULL && i < 2000 && wire_outstanding(d->wire) > 0; i++)
        uv_run(d->loop, UV_RUN_NOWAIT);
    /* Gathers of failed sends, begun ahead of READY, give their views back as they end: 10 s. */
    for (int i = 0; i < 10000 && d->gathers_ahead_ending > 0; i++) {
        uv_run(d->loop, UV_RUN_NOWAIT);
        if (d->gathers_ahead_ending > 0)
            uv_sleep(1);
    }
    /* One still running would give its view back into a freed pool: the pool stays. */
    bool keep_pool = d->gathers_ahead_ending > 0;
    if (keep_pool)
        log_warning("%u gathers of failed sends still run after 10 s: the staging pool is left "
                    "to the process's exit", d->gathers_ahead_ending);
    /* Inline copies are over already: their completions end what waits for them. */
    copy_stop(d);
    xfer_settle_all(d);
    /*
     * Copies on the GPU hold regions and views: they finish before either goes.
     * On a wedged GPU one may still write into a rank's memory, and a rank
     * takes its socket's end to mean nothing of this daemon does: so the
     * process ends here, as the service manager's kill would end it (the
     * driver tears its contexts down), and closes no socket by hand before.
     */
    if (!gpu_stop(d)) {
        log_err("copies on a GPU did not end: exiting now, without closing ranks' sockets "
                "first");
        _exit(EXIT_FAILURE);
    }
    /*
     * Clients last: a rank that sees its socket end takes it that nothing of
     * this daemon writes its memory any more. What is queued for them (the
     * news above) goes out as far as the socket takes it; their regions close.
     */
    ipc_destroy(d->ipc);
    d->ipc = NULL;
    /* After the clients: every claim is idle from now on, as the next start will see it. */
    names_file_close(d->names_file);
    d->names_file = NULL;
    /*
     * What the lanes still carry is cancelled now, its completions delivered:
     * a send that finished before its DATA's completion gives its view back
     * into the pool, which must still be there.
     */
    wire_quiesce(d->wire);
    /* Views go before the wire: their UCX registrations must be released before UCX is. */
    quarantine_destroy(d->quarantine);
    if (!keep_pool)
        staging_destroy(d->staging);
    wire_destroy(d->wire);
    d->wire = NULL;
    gate_destroy(d->gate);
    d->gate = NULL;
    tags_destroy(d->tags);
    names_destroy(d->names);
    d->names = NULL;
    peer_free_all(d);
    if (uv_is_active((uv_handle_t *)&d->sigterm)) {
        uv_close((uv_handle_t *)&d->sigterm, NULL);
        uv_close((uv_handle_t *)&d->sigint, NULL);
    }
    uv_run(d->loop, UV_RUN_NOWAIT);
}
