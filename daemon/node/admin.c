/* admin.c — see admin.h. */
#include "admin.h"

#include <dirent.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "b10.pb-c.h"
#include "frame.h"
#include "ipc.h"
#include "names.h"
#include "nodeid.h"
#include "peer.h"
#include "plan.h"
#include "quarantine.h"
#include "service.h"
#include "session.h"
#include "staging.h"
#include "tags.h"
#include "wire.h"
#include "xfer.h"

#define ADMIN_MAX_DRAIN_MS 600000u

/* The name of the daemon whose current boot is id, or "" when none known is. */
static const char *admin_peer_name(const struct b10d *d, uint64_t id)
{
    for (const struct list *pos = d->peers.next; id != 0 && pos != &d->peers; pos = pos->next) {
        const struct peer *p = list_entry(pos, struct peer, node);
        if (p->daemon_id == id)
            return p->name;
    }
    return "";
}


/*
 * One answer under construction. Strings point into the daemon's live
 * state, which does not change before the answer is encoded; only the
 * arrays are ours, kept in one list to free.
 */
struct admin_answer {
    struct b10d *d;
    uint64_t now;
    uint32_t rows;                  /* left for list rows */
    B10__AdminReply reply;
    B10__AdminDaemon daemon;
    B10__AdminStaging staging;
    void **allocs;
    size_t nallocs, cap;
    bool failed;                    /* out of memory somewhere */
    bool scoped;                    /* no operator asks: only the ranks of uid */
    uid_t uid;
};

/* Is what belongs to uid in this answer? */
static bool admin_sees(const struct admin_answer *a, uid_t uid)
{
    return !a->scoped || uid == a->uid;
}

/* p (malloc'd, or NULL) freed with the answer; NULL and a failed answer when there is no room. */
static void *admin_keep(struct admin_answer *a, void *p)
{
    if (p != NULL && !a->failed && a->nallocs == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        void **allocs = realloc(a->allocs, cap * sizeof(*allocs));
        if (allocs != NULL) {
            a->allocs = allocs;
            a->cap = cap;
        }
    }
    if (p == NULL || a->failed || a->nallocs == a->cap) {
        free(p);
        a->failed = true;
        return NULL;
    }
    a->allocs[a->nallocs++] = p;
    return p;
}

static void *admin_alloc(struct admin_answer *a, size_t n, size_t size)
{
    if (a->failed || n == 0)
        return NULL;
    return admin_keep(a, calloc(n, size));
}

static void admin_answer_free(struct admin_answer *a)
{
    for (size_t i = 0; i < a->nallocs; i++)
        free(a->allocs[i]);
    free(a->allocs);
}

/* How many of want rows fit; the rest count as omitted. */
static size_t admin_take_rows(struct admin_answer *a, size_t want)
{
    size_t n = want < a->rows ? want : a->rows;
    a->rows -= (uint32_t)n;
    a->reply.omitted += (uint32_t)(want - n);
    return n;
}

static size_t admin_list_length(const struct list *head)
{
    size_t n = 0;
    for (const struct list *p = head->next; p != head; p = p->next)
        n++;
    return n;
}

static void admin_fill_daemon(struct admin_answer *a)
{
    struct b10d *d = a->d;
    B10__AdminDaemon *m = &a->daemon;
    struct service_info si;
    struct list *pos, *tmp;

    service_info(d->service, &si);
    m->version = (char *)B10D_VERSION;
    m->name = d->cfg.name;
    m->daemon_id = d->daemon_id;
    m->pid = (uint32_t)getpid();
    m->uptime_ms = a->now - si.started_ms;
    m->state = (char *)si.state;
    m->socket = d->cfg.socket_path;
    m->socket_activated = si.activated;
    m->ucx_err_mode = (char *)(d->cfg.err_mode == CONFIG_ERR_MODE_PEER ? "peer" : "none");
    m->watchdog_usec = si.watchdog_usec;
    m->connections = d->nsessions;
    list_for_each_safe(pos, tmp, &d->sessions)
        if (list_entry(pos, struct session, node)->hello_done)
            m->clients++;
    m->peers = d->npeers;
    list_for_each_safe(pos, tmp, &d->xfers) {
        enum xfer_role role = list_entry(pos, struct xfer, node)->role;
        if (role == XFER_SEND || role == XFER_LOCAL)
            m->xfers_send++;
        else
            m->xfers_recv++;
    }
    m->quarantine_entries = quarantine_count(d->quarantine);
    m->quarantine_bytes = quarantine_bytes(d->quarantine);
    m->quarantine_budget = d->cfg.quarantine_budget;
    m->quarantine_ttl_ms = d->cfg.quarantine_ttl_ms;
    m->trust = (char *)auth_keyring_trust(&d->keys, d->cfg.insecure);
    m->insecure = d->cfg.insecure;
    m->remote_access = (char *)(d->cfg.remote_access == CONFIG_REMOTE_PAIRED ? "paired" : "any");
    m->names_held = names_count(d->names);
    if (d->nodeid != NULL) {
        m->node_cert = (char *)nodeid_name(d->nodeid);
        m->node_cert_not_after = nodeid_not_after(d->nodeid);
    }
    for (unsigned i = 0; i < d->keys.count; i++) {
        if (d->keys.keys[i].kind != AUTH_KEY_CLUSTER)
            continue;
        if (m->key_id == 0)
            m->key_id = d->keys.keys[i].id;
        else
            m->next_key_id = d->keys.keys[i].id;
    }
    m->tags_live = tags_live(d->tags);
    m->tags_quarantined = tags_quarantined(d->tags);
    m->drain_left_ms = si.drain_left_ms;
    m->drain_in_flight = si.drain_in_flight;
    m->drain_forced = si.drain_forced;
    m->drain_ms = si.drain_ms;
    m->drain_succeeded = si.drain_succeeded;
    m->drain_failed = si.drain_failed;
    a->reply.daemon = m;
}

static void admin_fill_xfers(struct admin_answer *a)
{
    struct b10d *d = a->d;
    struct list *pos, *tmp;
    size_t visible = 0, i = 0;

    list_for_each_safe(pos, tmp, &d->xfers)
        visible += admin_sees(a, list_entry(pos, struct xfer, node)->uid);
    size_t n = admin_take_rows(a, visible);
    B10__AdminXfer *rows = admin_alloc(a, n, sizeof(*rows));
    B10__AdminXfer **ptrs = admin_alloc(a, n, sizeof(*ptrs));

    if (rows == NULL || ptrs == NULL)
        return;
    list_for_each_safe(pos, tmp, &d->xfers) {
        struct xfer *x = list_entry(pos, struct xfer, node);
        if (!admin_sees(a, x->uid))
            continue;
        if (i == n)
            break;
        B10__AdminXfer *r = &rows[i];
        b10__admin_xfer__init(r);
        r->id = x->id;
        r->role = (char *)xfer_role_name(x->role);
        r->state = (char *)xfer_state_name(x->state);
        r->peer = x->peer != NULL ? x->peer->daemon_id : 0;
        r->peer_name = x->peer != NULL ? (char *)x->peer->name : "";
        r->local_agent = x->local_agent;
        r->remote_agent = x->remote_agent;
        r->bytes = x->plan != NULL ? x->plan->total : 0;
        r->chunks = xfer_nchunks(x);
        r->chunks_done = x->chunks_done;
        r->age_ms = a->now - x->started_ms;
        r->deadline_in_ms = (int64_t)x->deadline_ms - (int64_t)a->now;
        ptrs[i++] = r;
    }
    a->reply.xfers = ptrs;
    a->reply.n_xfers = i;
}

static void admin_fill_quarantine(struct admin_answer *a)
{
    struct b10d *d = a->d;
    const struct list *head = quarantine_entries(d->quarantine);
    size_t n = admin_take_rows(a, admin_list_length(head)), i = 0;
    B10__AdminQuarantine *rows = admin_alloc(a, n, sizeof(*rows));
    B10__AdminQuarantine **ptrs = admin_alloc(a, n, sizeof(*ptrs));

    if (rows == NULL || ptrs == NULL)
        return;
    for (const struct list *p = head->next; p != head && i < n; p = p->next) {
        const struct quarantine_entry *e = list_entry(p, struct quarantine_entry, node);
        B10__AdminQuarantine *r = &rows[i];
        b10__admin_quarantine__init(r);
        r->kind = (char *)quarantine_kind_name(e->kind);
        r->value = e->value;
        r->size = e->size;
        r->reason = (char *)b10_status_name(e->reason);
        r->reason_code = (uint32_t)e->reason;
        r->xfer_id = e->xfer_id;
        r->peer = e->peer_id;
        r->peer_name = (char *)admin_peer_name(a->d, e->peer_id);
        r->age_ms = a->now - e->since_ms;
        r->expires_in_ms = (int64_t)e->expires_ms - (int64_t)a->now;
        ptrs[i++] = r;
    }
    a->reply.quarantine = ptrs;
    a->reply.n_quarantine = i;
}

static void admin_fill_staging(struct admin_answer *a)
{
    struct b10d *d = a->d;
    B10__AdminStaging *m = &a->staging;
    uint32_t views = staging_views(d->staging);
    uint32_t idle = staging_free_views(d->staging) + staging_quarantined_views(d->staging);

    m->view_bytes = staging_view_bytes(d->staging);
    m->views = views;
    m->free = staging_free_views(d->staging);
    m->quarantined = staging_quarantined_views(d->staging);
    m->busy = views > idle ? views - idle : 0;
    m->configured_bytes = d->cfg.staging_bytes;
    a->reply.staging = m;
}

static const char *admin_peer_state(enum peer_state state)
{
    switch (state) {
    case PEER_DOWN: return "down";
    case PEER_KNOCKING: return "knocking";
    case PEER_CONNECTING: return "connecting";
    case PEER_UP: return "up";
    }
    return "?";
}

static void admin_fill_peers(struct admin_answer *a)
{
    struct b10d *d = a->d;
    struct list *pos, *tmp;
    size_t n = admin_take_rows(a, d->npeers), i = 0;
    B10__AdminPeer *rows = admin_alloc(a, n, sizeof(*rows));
    B10__AdminPeer **ptrs = admin_alloc(a, n, sizeof(*ptrs));

    if (rows == NULL || ptrs == NULL)
        return;
    list_for_each_safe(pos, tmp, &d->peers) {
        struct peer *p = list_entry(pos, struct peer, node);
        if (i == n)
            break;
        B10__AdminPeer *r = &rows[i];
        b10__admin_peer__init(r);
        r->daemon_id = p->daemon_id;
        r->name = p->name;
        r->incarnation = p->incarnation;
        r->state = (char *)admin_peer_state(p->state);
        r->out_gen = p->state != PEER_DOWN ? p->out.tags.gen : 0;
        r->in_up = p->in_up;
        r->in_gen = p->in_up ? p->in.tags.gen : 0;
        r->unauthenticated = p->counters.unauthenticated;
        r->replayed = p->counters.replayed;
        r->refused = p->counters.refused;
        r->links = p->counters.links;
        r->corrupt = p->counters.corrupt;
        r->in_xfers = p->in_xfers;
        r->staging_bytes = p->views_bytes + p->reserved;
        r->quarantined_bytes = p->quarantined;
        r->control_bytes = p->control_held + p->control_inflight;
        r->refs = p->refs;
        r->transports = (char *)(p->ep != NULL ? wire_ep_transports(p->ep) : "");
        r->xfers = (uint32_t)admin_list_length(&p->xfers);
        r->waiting = (uint32_t)admin_list_length(&p->waiting);
        ptrs[i++] = r;
    }
    a->reply.peers = ptrs;
    a->reply.n_peers = i;
}

static void admin_fill_regions(struct admin_answer *a, B10__AdminClient *c, const struct mem_table *t)
{
    size_t n = admin_take_rows(a, t->count);
    B10__AdminRegion *rows = admin_alloc(a, n, sizeof(*rows));
    B10__AdminRegion **ptrs = admin_alloc(a, n, sizeof(*ptrs));

    if (rows == NULL || ptrs == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        const struct region *reg = t->regions[i];
        B10__AdminRegion *r = &rows[i];
        b10__admin_region__init(r);
        r->id = reg->id;
        r->kind = (char *)(reg->ops != NULL ? reg->ops->kind_name : "");
        r->backend = (char *)(reg->ops != NULL ? reg->ops->name : "");
        r->addr = reg->addr;
        r->length = reg->length;
        r->open_to_node = reg->open;
        ptrs[i] = r;
    }
    c->regions = ptrs;
    c->n_regions = n;
}

static void admin_fill_clients(struct admin_answer *a)
{
    struct b10d *d = a->d;
    struct list *pos, *tmp;
    size_t ranks = 0, i = 0;

    list_for_each_safe(pos, tmp, &d->sessions) {
        struct session *s = list_entry(pos, struct session, node);
        ranks += s->hello_done && admin_sees(a, s->uid);
    }
    size_t n = admin_take_rows(a, ranks);
    B10__AdminClient *rows = admin_alloc(a, n, sizeof(*rows));
    B10__AdminClient **ptrs = admin_alloc(a, n, sizeof(*ptrs));
    if (rows == NULL || ptrs == NULL)
        return;
    list_for_each_safe(pos, tmp, &d->sessions) {
        struct session *s = list_entry(pos, struct session, node);
        if (!s->hello_done || !admin_sees(a, s->uid))
            continue;   /* admin connections, ranks before their Hello, other users' ranks */
        if (i == n)
            break;
        B10__AdminClient *r = &rows[i];
        b10__admin_client__init(r);
        r->agent = s->agent;
        r->pid = (uint32_t)s->pid;
        r->uid = (uint32_t)s->uid;
        r->gid = (uint32_t)s->gid;
        r->registered_bytes = s->mem.bytes;
        r->remote_agents = s->nagents;
        r->xfers = s->nxfers;
        r->targets = (uint32_t)admin_list_length(&s->targets);
        admin_fill_regions(a, r, &s->mem);
        ptrs[i++] = r;
    }
    a->reply.clients = ptrs;
    a->reply.n_clients = i;
}

static void admin_fill_counters(struct admin_answer *a)
{
    B10__AdminCounter *rows = admin_alloc(a, STATS_NCOUNTERS, sizeof(*rows));
    B10__AdminCounter **ptrs = admin_alloc(a, STATS_NCOUNTERS, sizeof(*ptrs));

    if (rows == NULL || ptrs == NULL)
        return;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        a->d->stats.cpu_us = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
                             (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    for (size_t i = 0; i < STATS_NCOUNTERS; i++) {
        b10__admin_counter__init(&rows[i]);
        rows[i].name = (char *)stats_counters[i].name;
        rows[i].help = (char *)stats_counters[i].help;
        rows[i].value = stats_value(&a->d->stats, &stats_counters[i]);
        ptrs[i] = &rows[i];
    }
    a->reply.counters = ptrs;
    a->reply.n_counters = STATS_NCOUNTERS;
}

/* ---------------------------------------------------------------- Prometheus text */

/*
 * The one renderer of the metrics: `b10ctl metrics` prints what it makes
 * (AdminReply.metrics_text), and GET /metrics (metrics.c) serves it. Names
 * in base units (seconds, bytes), counters end in _total, the process_*
 * family as Prometheus's client libraries write it.
 */
static void admin_prom_family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void admin_prom_label(FILE *f, const char *v)
{
    fputc('"', f);
    for (; *v != '\0'; v++) {
        if (*v == '\\' || *v == '"')
            fputc('\\', f);
        if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
    fputc('"', f);
}

static void admin_prom_gauge(FILE *f, const char *name, const char *help, uint64_t v)
{
    admin_prom_family(f, name, "gauge", help);
    fprintf(f, "%s %" PRIu64 "\n", name, v);
}

/* A gauge of one sample per label value. */
static void admin_prom_split(FILE *f, const char *name, const char *help, const char *label,
                             size_t n, const char *const *values, const uint64_t *v)
{
    admin_prom_family(f, name, "gauge", help);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s{%s=\"%s\"} %" PRIu64 "\n", name, label, values[i], v[i]);
}

/* The process_* family, from the kernel's account of this process. */
static void admin_prom_process(FILE *f, const struct b10d *d)
{
    struct rusage ru;
    struct rlimit rl;
    unsigned long long vm = 0, rss = 0;
    uint64_t fds = 0;
    long page = sysconf(_SC_PAGESIZE);

    admin_prom_family(f, "process_start_time_seconds", "gauge",
                      "Start time of the process since unix epoch in seconds.");
    fprintf(f, "process_start_time_seconds %.3f\n", (double)d->incarnation / 1e9);
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        admin_prom_family(f, "process_cpu_seconds_total", "counter",
                          "Total user and system CPU time spent in seconds, all threads.");
        fprintf(f, "process_cpu_seconds_total %.6f\n",
                (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
    }
    FILE *statm = fopen("/proc/self/statm", "re");
    if (statm != NULL) {
        if (fscanf(statm, "%llu %llu", &vm, &rss) == 2 && page > 0) {
            admin_prom_gauge(f, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
                             (uint64_t)vm * (uint64_t)page);
            admin_prom_gauge(f, "process_resident_memory_bytes", "Resident memory size in bytes.",
                             (uint64_t)rss * (uint64_t)page);
        }
        fclose(statm);
    }
    DIR *dir = opendir("/proc/self/fd");
    if (dir != NULL) {
        struct dirent *e;
        while ((e = readdir(dir)) != NULL)
            fds += e->d_name[0] != '.';
        closedir(dir);
        admin_prom_gauge(f, "process_open_fds", "Number of open file descriptors.",
                         fds > 0 ? fds - 1 : 0);   /* not the one reading them */
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        admin_prom_gauge(f, "process_max_fds", "Maximum number of open file descriptors.",
                         rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur);
}

/* Transfers in flight with one remote daemon: gathered once, looked up per peer. */
struct admin_peer_load {
    const struct peer *peer;
    uint64_t xfers, bytes;
};

static int admin_peer_load_cmp(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const struct admin_peer_load *)a)->peer;
    uintptr_t y = (uintptr_t)((const struct admin_peer_load *)b)->peer;
    return x < y ? -1 : x > y;
}

static void admin_prom_peers(FILE *f, struct b10d *d)
{
    static const struct {
        const char *why;
        size_t off;
    } kinds[] = {
        { "unauthenticated", offsetof(struct peer_counters, unauthenticated) },
        { "replayed", offsetof(struct peer_counters, replayed) },
        { "refused", offsetof(struct peer_counters, refused) },
        { "corrupt", offsetof(struct peer_counters, corrupt) },
    };
    struct list *pos;
    size_t n = 0, used = 0;

    admin_prom_family(f, "b10d_peer_dropped_total", "counter",
                      "Messages and work of a remote daemon dropped or refused, by why (corrupt: "
                      "DATA chunks that failed their checksum).");
    for (pos = d->peers.next; pos != &d->peers; pos = pos->next) {
        const struct peer *p = list_entry(pos, struct peer, node);
        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
            fputs("b10d_peer_dropped_total{peer=", f);
            admin_prom_label(f, p->name);
            fprintf(f, ",why=\"%s\"} %" PRIu64 "\n", kinds[k].why,
                    *(const uint64_t *)((const char *)&p->counters + kinds[k].off));
        }
    }

    for (pos = d->xfers.next; pos != &d->xfers; pos = pos->next)
        n += list_entry(pos, struct xfer, node)->peer != NULL;
    struct admin_peer_load *load = n > 0 ? calloc(n, sizeof(*load)) : NULL;
    for (pos = d->xfers.next; load != NULL && pos != &d->xfers; pos = pos->next) {
        const struct xfer *x = list_entry(pos, struct xfer, node);
        if (x->peer == NULL)
            continue;
        load[used].peer = x->peer;
        load[used].xfers = 1;
        load[used++].bytes = x->plan != NULL ? x->plan->total : 0;
    }
    if (used > 0)
        qsort(load, used, sizeof(*load), admin_peer_load_cmp);
    /* Runs of one peer summed into their first entry. */
    size_t runs = 0;
    for (size_t i = 0; i < used; i++) {
        if (runs > 0 && load[runs - 1].peer == load[i].peer) {
            load[runs - 1].xfers++;
            load[runs - 1].bytes += load[i].bytes;
        } else {
            load[runs++] = load[i];
        }
    }
    static const char *const names[2] = { "b10d_peer_transfers_in_flight",
                                          "b10d_peer_transfer_bytes_in_flight" };
    static const char *const helps[2] = {
        "Transfers in flight with a remote daemon (either direction), by its name.",
        "Bytes of the transfers in flight with a remote daemon, by its name.",
    };
    for (int g = 0; g < 2; g++) {
        admin_prom_family(f, names[g], "gauge", helps[g]);
        for (pos = d->peers.next; pos != &d->peers; pos = pos->next) {
            const struct peer *p = list_entry(pos, struct peer, node);
            struct admin_peer_load key = { .peer = p }, *hit = NULL;
            if (runs > 0)
                hit = bsearch(&key, load, runs, sizeof(*load), admin_peer_load_cmp);
            fprintf(f, "%s{peer=", names[g]);
            admin_prom_label(f, p->name);
            fprintf(f, "} %" PRIu64 "\n", hit == NULL ? 0 : g == 0 ? hit->xfers : hit->bytes);
        }
    }
    free(load);
}

/* stats.c counts by enum xfer_role, which it does not know: the two must agree. */
_Static_assert(XFER_LOCAL + 1 == STATS_ROLES, "STATS_ROLES is not the number of transfer roles");

/* The histograms of stats.c, by role, cumulative as Prometheus counts them. */
static void admin_prom_histograms(FILE *f, const struct b10d *d)
{
    static const struct {
        enum stats_kind kind;
        const char *name, *help;
    } hists[] = {
        { STATS_DURATION, "b10d_transfers_duration_seconds",
          "Transfers that landed, by role: seconds from submission (recv: admission) to landed." },
        { STATS_PLANNING, "b10d_transfers_planning_seconds",
          "Transfers that landed, by role: seconds from submission to planned (checked, coalesced)." },
        { STATS_SIZE, "b10d_transfers_size_bytes", "Transfers that landed, by role: their bytes." },
        { STATS_PIECES, "b10d_transfers_pieces",
          "Transfers that landed, by role: pieces moved (spans, contiguous runs merged)." },
    };

    for (size_t h = 0; h < sizeof(hists) / sizeof(hists[0]); h++) {
        size_t nb;
        const double *bounds = stats_bounds(hists[h].kind, &nb);
        admin_prom_family(f, hists[h].name, "histogram", hists[h].help);
        for (unsigned r = 0; r < STATS_ROLES; r++) {
            const struct stats_hist *hist = &d->hists.hist[hists[h].kind][r];
            const char *role = xfer_role_name((enum xfer_role)r);
            uint64_t below = 0;
            if (hists[h].kind == STATS_PLANNING && r == XFER_RECV)
                continue;   /* a receiver plans nothing: the sender did */
            for (size_t b = 0; b < nb; b++) {
                below += hist->buckets[b];
                fprintf(f, "%s_bucket{role=\"%s\",le=\"%.12g\"} %" PRIu64 "\n", hists[h].name,
                        role, bounds[b], below);
            }
            fprintf(f, "%s_bucket{role=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", hists[h].name, role,
                    hist->count);
            fprintf(f, "%s_sum{role=\"%s\"} %.15g\n", hists[h].name, role, hist->sum);
            fprintf(f, "%s_count{role=\"%s\"} %" PRIu64 "\n", hists[h].name, role, hist->count);
        }
    }
    admin_prom_family(f, "b10d_transfers_failed_by_status_total", "counter",
                      "Transfers that failed, by role and status (B10_ERR_...).");
    for (unsigned r = 0; r < STATS_ROLES; r++)
        for (unsigned c = 0; c < STATS_MAX_STATUS; c++)
            if (d->hists.failed[r][c] != 0)
                fprintf(f, "b10d_transfers_failed_by_status_total{role=\"%s\",status=\"%s\"} %" PRIu64
                        "\n", xfer_role_name((enum xfer_role)r), b10_status_name((b10_status_t)c),
                        d->hists.failed[r][c]);
}

static void admin_prom_render(FILE *f, struct b10d *d)
{
    static const char *const states[] = { "serving", "draining", "drained", "stopping" };
    struct service_info si;
    uint64_t current[4] = { 0 }, in_flight[STATS_ROLES] = { 0 }, key_id = 0;
    const char *roles[STATS_ROLES];
    struct list *pos;
    char id[17];

    service_info(d->service, &si);
    admin_prom_family(f, "b10d_info", "gauge", "The daemon's version, name and id for this boot.");
    fputs("b10d_info{version=", f);
    admin_prom_label(f, B10D_VERSION);
    fputs(",name=", f);
    admin_prom_label(f, d->cfg.name);
    snprintf(id, sizeof(id), "%016" PRIx64, d->daemon_id);
    fputs(",daemon_id=", f);
    admin_prom_label(f, id);
    fputs("} 1\n", f);
    admin_prom_process(f, d);
    for (size_t i = 0; i < 4; i++)
        current[i] = strcmp(si.state, states[i]) == 0;
    admin_prom_split(f, "b10d_state", "The daemon's life-cycle state: 1 for the current one.",
                     "state", 4, states, current);
    admin_prom_family(f, "b10d_watchdog_seconds", "gauge", "systemd watchdog interval, 0 without one.");
    fprintf(f, "b10d_watchdog_seconds %.6f\n", (double)si.watchdog_usec / 1e6);
    uint64_t clients = 0;
    for (pos = d->sessions.next; pos != &d->sessions; pos = pos->next)
        clients += list_entry(pos, struct session, node)->hello_done;
    admin_prom_gauge(f, "b10d_connections", "Client connections, ranks and admin.", d->nsessions);
    admin_prom_gauge(f, "b10d_clients", "Ranks connected (said Hello).", clients);
    admin_prom_gauge(f, "b10d_peers", "Remote daemons known.", d->npeers);
    for (unsigned i = 0; i < d->keys.count; i++)
        if (d->keys.keys[i].kind == AUTH_KEY_CLUSTER && key_id == 0)
            key_id = d->keys.keys[i].id;
    admin_prom_family(f, "b10d_trust", "gauge", "How the daemon trusts others: 1 for its mode.");
    fputs("b10d_trust{mode=", f);
    admin_prom_label(f, key_id == 0 ? (d->cfg.insecure ? "insecure" : "local-only")
                                    : (d->cfg.insecure ? "cluster-key-and-insecure" : "cluster-key"));
    snprintf(id, sizeof(id), "%016" PRIx64, key_id);
    fputs(",key_id=", f);
    admin_prom_label(f, key_id != 0 ? id : "");
    fputs("} 1\n", f);
    if (d->nodeid != NULL) {
        admin_prom_family(f, "b10d_node_cert_expiry_seconds", "gauge",
                          "When this node's certificate ends, seconds since the epoch (--node-cert).");
        fputs("b10d_node_cert_expiry_seconds{name=", f);
        admin_prom_label(f, nodeid_name(d->nodeid));
        fprintf(f, "} %" PRId64 "\n", nodeid_not_after(d->nodeid));
    }
    admin_prom_peers(f, d);
    /* The roles by the names their tables give them (xfer_role_name), as the histograms. */
    for (unsigned r = 0; r < STATS_ROLES; r++)
        roles[r] = xfer_role_name((enum xfer_role)r);
    for (pos = d->xfers.next; pos != &d->xfers; pos = pos->next) {
        unsigned r = (unsigned)list_entry(pos, struct xfer, node)->role;
        if (r < STATS_ROLES)
            in_flight[r]++;
    }
    admin_prom_split(f, "b10d_transfers_in_flight", "Transfers in flight, by role.", "role", STATS_ROLES,
                     roles, in_flight);
    admin_prom_gauge(f, "b10d_quarantine_entries", "Quarantine entries (views, tags, ids, generations).",
                     quarantine_count(d->quarantine));
    admin_prom_gauge(f, "b10d_quarantine_bytes", "Staging bytes in quarantine.",
                     quarantine_bytes(d->quarantine));
    admin_prom_gauge(f, "b10d_quarantine_budget_bytes",
                     "Quarantined staging past which new transfers fail fast.", d->cfg.quarantine_budget);
    admin_prom_split(f, "b10d_tags", "Registered UCX tags, live or quarantined.", "state", 2,
                     (const char *const[]){ "live", "quarantined" },
                     (const uint64_t[]){ tags_live(d->tags), tags_quarantined(d->tags) });
    uint32_t views = staging_views(d->staging), free_views = staging_free_views(d->staging);
    uint32_t quarantined = staging_quarantined_views(d->staging);
    admin_prom_split(f, "b10d_staging_views", "Staging views, by state.", "state", 3,
                     (const char *const[]){ "free", "busy", "quarantined" },
                     (const uint64_t[]){ free_views,
                                         views > free_views + quarantined ? views - free_views - quarantined : 0,
                                         quarantined });
    admin_prom_gauge(f, "b10d_staging_view_bytes", "Bytes of one staging view.",
                     staging_view_bytes(d->staging));
    admin_prom_gauge(f, "b10d_staging_configured_bytes", "The staging pool's configured size.",
                     d->cfg.staging_bytes);
    /* The counters (stats.h), each under its metric name; cpu_us is process_cpu_seconds_total. */
    for (size_t i = 0; i < STATS_NCOUNTERS; i++) {
        char name[128];
        if (!stats_metric_name(&stats_counters[i], name, sizeof(name)))
            continue;
        admin_prom_family(f, name, "counter", stats_counters[i].help);
        fprintf(f, "%s %" PRIu64 "\n", name, stats_value(&d->stats, &stats_counters[i]));
    }
    admin_prom_histograms(f, d);
}

b10_status_t admin_metrics_text(struct b10d *d, char **text_p, size_t *length_p)
{
    char *text = NULL;
    size_t length = 0;
    FILE *f = open_memstream(&text, &length);

    if (f == NULL)
        return B10_ERR_NO_MEMORY;
    admin_prom_render(f, d);
    if (fclose(f) != 0 || text == NULL) {
        free(text);
        return B10_ERR_NO_MEMORY;
    }
    *text_p = text;
    *length_p = length;
    return B10_OK;
}

static b10_status_t admin_send(struct session *s, uint64_t seq, b10_status_t status,
                               const char *detail, B10__AdminReply *answer)
{
    B10__Reply reply = B10__REPLY__INIT;
    B10__DaemonMsg msg = B10__DAEMON_MSG__INIT;
    uint8_t *frame;
    size_t length;

    reply.seq = seq;
    reply.status = (B10__Status)status;
    reply.detail = (char *)(detail != NULL ? detail : "");
    if (answer != NULL) {
        reply.body_case = B10__REPLY__BODY_ADMIN;
        reply.admin = answer;
    }
    msg.body_case = B10__DAEMON_MSG__BODY_REPLY;
    msg.reply = &reply;
    if (frame_encode(&msg.base, s->d->cfg.max_frame, &frame, &length) != 0) {
        if (answer == NULL)
            return B10_ERR_NO_MEMORY;
        return admin_send(s, seq, B10_ERR_TOO_LARGE,
                          "the answer exceeds --max-frame: ask for fewer rows (--limit)", NULL);
    }
    return ipc_send(s->conn, frame, length);
}

/* Root, the daemon's own user, or --admin-group (primary or supplementary). */
static bool admin_is_operator(struct session *s)
{
    const struct config *cfg = &s->d->cfg;
    return s->uid == 0 || s->uid == geteuid() ||
           (cfg->admin_group_set && (s->gid == cfg->admin_gid ||
                                     ipc_conn_in_group(s->conn, cfg->admin_gid)));
}

/* b10ctl connections of non-operator uid that are open. */
static uint32_t admin_connections_of(struct b10d *d, uid_t uid)
{
    uint32_t n = 0;
    struct list *pos;
    for (pos = d->sessions.next; pos != &d->sessions; pos = pos->next) {
        struct session *o = list_entry(pos, struct session, node);
        n += o->admin_counted && o->uid == uid;
    }
    return n;
}

/* Whom operators are, in words, for a refusal. */
static void admin_operators(const struct b10d *d, char *out, size_t n)
{
    if (d->cfg.admin_group_set)
        snprintf(out, n, "root, uid %u (the daemon's) and group %u (--admin-group)",
                 (unsigned)geteuid(), (unsigned)d->cfg.admin_gid);
    else
        snprintf(out, n, "root and uid %u (the daemon's; --admin-group adds a group)",
                 (unsigned)geteuid());
}

static b10_status_t admin_cancel(struct session *s, bool operator, uint64_t id, char *detail,
                                 size_t detail_len)
{
    struct b10d *d = s->d;
    struct list *pos, *tmp;
    char who[96];
    int n = 0, others = 0;

    snprintf(who, sizeof(who), "the operator (b10ctl, uid %u, pid %d)", (unsigned)s->uid,
             (int)s->pid);
    /* Both roles of one id may live here when a daemon sends to itself: cancel each. */
    list_for_each_safe(pos, tmp, &d->xfers) {
        struct xfer *x = list_entry(pos, struct xfer, node);
        if (x->id != id)
            continue;
        if (!operator && x->uid != s->uid) {
            others++;
            continue;
        }
        log_notice("admin: uid %u (pid %d) cancels transfer %016" PRIx64 " (%s)", (unsigned)s->uid,
                   (int)s->pid, id, xfer_role_name(x->role));
        xfer_cancel_admin(x, who);
        n++;
    }
    if (n > 0)
        return B10_OK;
    if (operator) {
        snprintf(detail, detail_len, "no transfer %016" PRIx64 " is in flight", id);
        return B10_ERR_NOT_FOUND;
    }
    /*
     * Anyone else gets for another user's transfer the very answer an id of no
     * transfer gets: a PERMISSION there would tell which ids are in flight, and
     * so when other users' ranks move bytes. The operator's log keeps the truth.
     */
    if (others > 0)
        log_warning("admin: uid %u (pid %d) asked to cancel transfer %016" PRIx64 ", another "
                    "user's: answered as no such transfer", (unsigned)s->uid, (int)s->pid, id);
    snprintf(detail, detail_len, "no transfer %016" PRIx64 " of uid %u's ranks is in flight "
             "(operators cancel any)", id, (unsigned)s->uid);
    return B10_ERR_NOT_FOUND;
}

/* What a rank's b10ctl may not ask: what other users' ranks do, or steering the daemon. */
static const char *admin_operator_only(B10__AdminOp op)
{
    switch (op) {
    case B10__ADMIN_OP__ADMIN_DRAIN: return "drain";
    case B10__ADMIN_OP__ADMIN_RESUME: return "resume";
    case B10__ADMIN_OP__ADMIN_QUARANTINE: return "quarantine";
    case B10__ADMIN_OP__ADMIN_PEERS: return "peers";
    case B10__ADMIN_OP__ADMIN_METRICS: return "metrics";
    case B10__ADMIN_OP__ADMIN_STATS: return "stats";
    default: return NULL;
    }
}

/*
 * A connection's first request makes it a b10ctl one: bounded unless an
 * operator's. B10_OK, or B10_ERR_BUSY once refused (answered, said).
 */
static b10_status_t admin_connection_admit(struct session *s, uint64_t seq, bool operator)
{
    struct b10d *d = s->d;
    char detail[256];

    if (s->hello_done || s->admin)
        return B10_OK;
    uint32_t mine = operator ? 0 : admin_connections_of(d, s->uid);
    if (!operator && (d->admin_connections >= IPC_MAX_ADMIN ||
                      mine >= IPC_MAX_ADMIN_PER_UID)) {
        log_warning("admin: refusing a b10ctl connection of uid %u (pid %d): %u of users "
                    "who are no operators are open, %u of its own", (unsigned)s->uid,
                    (int)s->pid, d->admin_connections, mine);
        snprintf(detail, sizeof(detail), "%u b10ctl connections of users who are no operators "
                 "are open (at most %u), %u of uid %u (at most %u)", d->admin_connections,
                 IPC_MAX_ADMIN, mine, (unsigned)s->uid, IPC_MAX_ADMIN_PER_UID);
        admin_send(s, seq, B10_ERR_BUSY, detail, NULL);
        return B10_ERR_BUSY;
    }
    s->admin = true;
    if (!operator) {
        s->admin_counted = true;
        d->admin_connections++;
    }
    return B10_OK;
}

/* What a request does (cancel, drain, resume), before the answer reads the daemon. */
static b10_status_t admin_act(struct session *s, bool operator, const B10__AdminRequest *req,
                              char *detail, size_t detail_len)
{
    struct b10d *d = s->d;

    switch (req->op) {
    case B10__ADMIN_OP__ADMIN_CANCEL:
        return admin_cancel(s, operator, req->xfer_id, detail, detail_len);
    case B10__ADMIN_OP__ADMIN_DRAIN: {
        uint32_t bound = req->drain_timeout_ms == 0 ? d->cfg.drain_timeout_ms
                         : req->drain_timeout_ms < ADMIN_MAX_DRAIN_MS ? req->drain_timeout_ms
                                                                      : ADMIN_MAX_DRAIN_MS;
        log_notice("admin: uid %u (pid %d) asks for a drain, bound %u ms", (unsigned)s->uid,
                   (int)s->pid, bound);
        service_drain(d->service, bound, false);
        return B10_OK;
    }
    case B10__ADMIN_OP__ADMIN_RESUME: {
        bool ended = false;
        b10_status_t st = service_resume(d->service, &ended);
        log_notice("admin: uid %u (pid %d) asks to end the drain: %s", (unsigned)s->uid,
                   (int)s->pid, st != B10_OK ? "refused, stopping" : ended ? "ended" : "none ran");
        if (st != B10_OK)
            snprintf(detail, detail_len, "the daemon is stopping (a signal's drain): it "
                     "cannot be resumed; start it again");
        return st;
    }
    default:
        return B10_OK;
    }
}

/* The rows a request reads into its answer; B10_ERR_INVALID_ARG for an op this daemon has not. */
static b10_status_t admin_fill(struct admin_answer *a, const B10__AdminRequest *req, char *detail,
                               size_t detail_len)
{
    switch (req->op) {
    case B10__ADMIN_OP__ADMIN_STATUS:
    case B10__ADMIN_OP__ADMIN_CANCEL:
    case B10__ADMIN_OP__ADMIN_DRAIN:
    case B10__ADMIN_OP__ADMIN_RESUME:
        break;
    case B10__ADMIN_OP__ADMIN_TRANSFERS:
        admin_fill_xfers(a);
        break;
    case B10__ADMIN_OP__ADMIN_QUARANTINE:
        admin_fill_quarantine(a);
        break;
    case B10__ADMIN_OP__ADMIN_STAGING:
        admin_fill_staging(a);
        break;
    case B10__ADMIN_OP__ADMIN_PEERS:
        admin_fill_peers(a);
        break;
    case B10__ADMIN_OP__ADMIN_CLIENTS:
        admin_fill_clients(a);
        break;
    case B10__ADMIN_OP__ADMIN_STATS:
        admin_fill_counters(a);
        break;
    case B10__ADMIN_OP__ADMIN_METRICS: {
        /* The rows too, for --json; the text is the metrics. */
        admin_fill_staging(a);
        admin_fill_counters(a);
        admin_fill_peers(a);
        size_t length;
        char *text = NULL;
        if (admin_metrics_text(a->d, &text, &length) != B10_OK)
            text = NULL;
        a->reply.metrics_text = admin_keep(a, text);
        break;
    }
    default:
        snprintf(detail, detail_len, "unknown admin request %d", (int)req->op);
        return B10_ERR_INVALID_ARG;
    }
    return B10_OK;
}

/* A b10ctl request: admitted, allowed, acted on, answered with the rows it reads. */
b10_status_t admin_on_request(struct session *s, uint64_t seq, const B10__AdminRequest *req)
{
    struct b10d *d = s->d;
    struct admin_answer a;
    char detail[256] = "";
    b10_status_t status;
    bool operator = admin_is_operator(s);
    const char *only = admin_operator_only(req->op);

    if (admin_connection_admit(s, seq, operator) != B10_OK)
        return B10_ERR_BUSY;
    if (!operator && only != NULL) {
        char ops[128];
        admin_operators(d, ops, sizeof(ops));
        log_warning("admin: refusing uid %u gid %u (pid %d) %s: no operator", (unsigned)s->uid,
                    (unsigned)s->gid, (int)s->pid, only);
        snprintf(detail, sizeof(detail), "%s is for operators (%s); uid %u gid %u is none", only,
                 ops, (unsigned)s->uid, (unsigned)s->gid);
        admin_send(s, seq, B10_ERR_PERMISSION, detail, NULL);
        return B10_OK;
    }
    memset(&a, 0, sizeof(a));
    a.d = d;
    a.now = d->now_ms(d);
    a.rows = req->limit != 0 && req->limit < d->cfg.max_admin_rows ? req->limit
                                                                    : d->cfg.max_admin_rows;
    b10__admin_reply__init(&a.reply);
    b10__admin_daemon__init(&a.daemon);
    b10__admin_staging__init(&a.staging);
    a.reply.operator_ = operator;
    a.reply.uid = (uint32_t)s->uid;
    a.scoped = !operator;
    a.uid = s->uid;

    /* Actions first, so that the status that comes back shows their effect. */
    status = admin_act(s, operator, req, detail, sizeof(detail));
    admin_fill_daemon(&a);
    b10_status_t filled = admin_fill(&a, req, detail, sizeof(detail));
    if (filled != B10_OK)
        status = filled;
    if (a.failed) {
        status = B10_ERR_NO_MEMORY;
        snprintf(detail, sizeof(detail), "no memory for the answer");
    }
    admin_send(s, seq, status, detail, status == B10_OK || status == B10_ERR_NOT_FOUND ? &a.reply : NULL);
    admin_answer_free(&a);
    return B10_OK;
}
