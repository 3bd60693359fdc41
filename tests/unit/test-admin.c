/*
 * test-admin.c — daemon/node/admin.c: b10ctl's requests, answered from the
 * live state of a daemon (engine-fixture.h: ranks of real memory, real
 * transfers, tags, staging and quarantine; a remote daemon node-b).
 *
 * Who asks decides what the answer holds: an operator (root or the
 * daemon's own user) sees and acts on everything; anyone else sees only
 * its own uid's ranks and transfers, cancels only those, is answered about
 * another user's transfer as about none, and is refused what tells of
 * other users' work. Each refusal is shown beside an operator's request
 * answered. Lists are cut at the limit and say how much they left out;
 * b10ctl connections of non-operators are bounded; the metrics text is
 * the daemon's state in Prometheus's format. The answer is the frame
 * admin.c hands the client socket (ipc_send, a fake), decoded.
 */
#include "engine-fixture.h"

#include "admin.h"
#include "service.h"

#define MiB (1u << 20)
#define USER 4242u                  /* no operator */
#define OTHER 4343u

/* ---------------------------------------------------------------- below: the socket, the service */

static B10__DaemonMsg *answer;      /* the last frame sent, decoded */
static unsigned answers;

b10_status_t __wrap_ipc_send(struct ipc_conn *conn, uint8_t *frame, size_t length);
b10_status_t __wrap_ipc_send(struct ipc_conn *conn, uint8_t *frame, size_t length)
{
    assert_true(length > FRAME_HEADER_BYTES);
    if (answer != NULL)
        b10__daemon_msg__free_unpacked(answer, NULL);
    answer = b10__daemon_msg__unpack(NULL, length - FRAME_HEADER_BYTES, frame + FRAME_HEADER_BYTES);
    assert_non_null(answer);
    assert_int_equal(answer->body_case, B10__DAEMON_MSG__BODY_REPLY);
    answers++;
    free(frame);
    return B10_OK;
}

bool __wrap_ipc_conn_in_group(struct ipc_conn *conn, gid_t gid);
bool __wrap_ipc_conn_in_group(struct ipc_conn *conn, gid_t gid)
{
    return false;
}

static const char *service_state;
static uint32_t drain_bound;
static unsigned drains;
static b10_status_t resume_status;

void __wrap_service_info(const struct service *svc, struct service_info *info_p);
void __wrap_service_info(const struct service *svc, struct service_info *info_p)
{
    *info_p = (struct service_info){ .started_ms = 400, .state = service_state };
}

void __wrap_service_drain(struct service *svc, uint32_t bound_ms, bool stop);
void __wrap_service_drain(struct service *svc, uint32_t bound_ms, bool stop)
{
    assert_false(stop);
    drains++;
    drain_bound = bound_ms;
    service_state = "draining";
}

b10_status_t __wrap_service_resume(struct service *svc, bool *ended_p);
b10_status_t __wrap_service_resume(struct service *svc, bool *ended_p)
{
    *ended_p = resume_status == B10_OK;
    if (resume_status == B10_OK)
        service_state = "serving";
    return resume_status;
}

const char *__wrap_wire_ep_transports(struct wire_ep *ep);
const char *__wrap_wire_ep_transports(struct wire_ep *ep)
{
    return "tcp";
}

/* ---------------------------------------------------------------- fixture */

static struct ex_rank *mine, *theirs;  /* ranks of USER and of OTHER */

/* b10ctl connections: sessions that said no Hello. */
#define ADMINS 12
static struct session admins[ADMINS];

static struct session *b10ctl(unsigned i, uid_t uid)
{
    struct session *s = &admins[i];
    memset(s, 0, sizeof(*s));
    s->d = &ex_d;
    s->uid = uid;
    s->gid = uid;
    s->pid = 100 + (pid_t)i;
    list_init(&s->agents);
    list_init(&s->xfers);
    list_init(&s->targets);
    list_init(&s->locals);
    list_init(&s->asks);
    list_init(&s->deregs);
    list_insert_tail(&ex_d.sessions, &s->node);
    ex_d.nsessions++;
    return s;
}

static int setup(void **state)
{
    ex_setup(state);
    mine = ex_rank("rank-mine", USER, MiB, 1);
    theirs = ex_rank("rank-theirs", OTHER, MiB, 2);
    service_state = "serving";
    drains = 0;
    drain_bound = 0;
    resume_status = B10_OK;
    return 0;
}

static int teardown(void **state)
{
    while (!list_empty(&ex_d.xfers))
        xfer_fail(list_entry(ex_d.xfers.next, struct xfer, node), B10_ERR_CANCELLED, "test over");
    ex_flush();
    for (unsigned i = 0; i < ADMINS; i++)
        if (admins[i].d != NULL)
            list_remove(&admins[i].node);
    memset(admins, 0, sizeof(admins));
    if (answer != NULL)
        b10__daemon_msg__free_unpacked(answer, NULL);
    answer = NULL;
    return ex_teardown(state);
}

/* A transfer of rank k in flight, of role, with node-b or none; told as ex_xfer_done records. */
static struct xfer *in_flight(struct ex_rank *k, enum xfer_role role, bool with_b)
{
    struct xfer *x = xfer_new(&ex_d, role, ids_new_xfer(&ex_d.ids), 60000);
    assert_non_null(x);
    x->plan = calloc(1, sizeof(*x->plan));
    assert_non_null(x->plan);
    x->plan->nchunks = 2;
    x->plan->total = 8192;
    x->session = &k->s;
    x->uid = k->s.uid;
    x->state = XFER_RUNNING;
    k->s.nxfers++;
    list_insert_tail(&k->s.xfers, &x->session_node);
    snprintf(x->local_agent, sizeof(x->local_agent), "%s", k->s.agent);
    snprintf(x->remote_agent, sizeof(x->remote_agent), "rank-far");
    if (with_b) {
        x->peer = &ex_node_b;
        ex_node_b.holds++;
    }
    return x;
}

static const B10__AdminReply *ask(struct session *s, B10__AdminOp op, uint64_t xfer_id,
                                  uint32_t limit, b10_status_t want)
{
    B10__AdminRequest req = B10__ADMIN_REQUEST__INIT;
    req.op = op;
    req.xfer_id = xfer_id;
    req.limit = limit;
    unsigned before = answers;
    assert_int_equal(admin_on_request(s, 77, &req), B10_OK);
    assert_int_equal(answers, before + 1);
    const B10__Reply *r = answer->reply;
    assert_int_equal(r->seq, 77);
    if ((b10_status_t)r->status != want)
        fail_msg("%s, want %s: %s", b10_status_name((b10_status_t)r->status),
                 b10_status_name(want), r->detail);
    return r->body_case == B10__REPLY__BODY_ADMIN ? r->admin : NULL;
}

static const char *detail(void)
{
    return answer->reply->detail;
}

/* ---------------------------------------------------------------- who may ask what */

struct op_case {
    const char *name;
    B10__AdminOp op;
    bool operator_only;
};

static const struct op_case op_cases[] = {
    { "status", B10__ADMIN_OP__ADMIN_STATUS, false },
    { "transfers", B10__ADMIN_OP__ADMIN_TRANSFERS, false },
    { "staging", B10__ADMIN_OP__ADMIN_STAGING, false },
    { "clients", B10__ADMIN_OP__ADMIN_CLIENTS, false },
    { "quarantine", B10__ADMIN_OP__ADMIN_QUARANTINE, true },
    { "peers", B10__ADMIN_OP__ADMIN_PEERS, true },
    { "stats", B10__ADMIN_OP__ADMIN_STATS, true },
    { "metrics", B10__ADMIN_OP__ADMIN_METRICS, true },
    { "drain", B10__ADMIN_OP__ADMIN_DRAIN, true },
    { "resume", B10__ADMIN_OP__ADMIN_RESUME, true },
};

/*
 * What tells of other users' work or steers the daemon is an operator's:
 * anyone else is refused it, saying who operators are; the operator's
 * same request is answered, and says it came from one.
 */
static void test_who_may_ask(void **state)
{
    const struct op_case *c = *state;
    const B10__AdminReply *a = ask(b10ctl(0, USER), c->op, 0, 0,
                                   c->operator_only ? B10_ERR_PERMISSION : B10_OK);
    if (c->operator_only) {
        assert_null(a);
        assert_non_null(strstr(detail(), "is for operators"));
        assert_non_null(strstr(detail(), "uid 4242 gid 4242 is none"));
        assert_int_equal(drains, 0);
    } else {
        assert_non_null(a);
        assert_false(a->operator_);
        assert_int_equal(a->uid, USER);
    }
    a = ask(b10ctl(1, geteuid()), c->op, 0, 0, B10_OK);
    assert_non_null(a);
    assert_true(a->operator_);
    assert_non_null(a->daemon);
    assert_string_equal(a->daemon->name, "node-a");
    assert_string_equal(a->daemon->state, service_state);
}

/* A rank's b10ctl sees only its own uid's transfers and ranks; an operator all of them. */
static void test_each_sees_its_own(void **state)
{
    in_flight(mine, XFER_LOCAL, false);
    in_flight(theirs, XFER_READ, true);
    in_flight(theirs, XFER_SEND, true);

    const B10__AdminReply *a = ask(b10ctl(0, USER), B10__ADMIN_OP__ADMIN_TRANSFERS, 0, 0, B10_OK);
    assert_int_equal(a->n_xfers, 1);
    assert_string_equal(a->xfers[0]->local_agent, "rank-mine");
    assert_string_equal(a->xfers[0]->role, "local");
    assert_string_equal(a->xfers[0]->state, "running");
    assert_int_equal(a->xfers[0]->bytes, 8192);
    assert_int_equal(a->xfers[0]->chunks, 2);
    assert_int_equal(a->omitted, 0);
    a = ask(&admins[0], B10__ADMIN_OP__ADMIN_CLIENTS, 0, 0, B10_OK);
    assert_int_equal(a->n_clients, 1);
    assert_string_equal(a->clients[0]->agent, "rank-mine");
    assert_int_equal(a->clients[0]->n_regions, 1);
    assert_string_equal(a->clients[0]->regions[0]->kind, "dram");
    assert_int_equal(a->clients[0]->regions[0]->length, MiB);
    assert_int_equal(a->clients[0]->xfers, 1);

    a = ask(b10ctl(1, geteuid()), B10__ADMIN_OP__ADMIN_TRANSFERS, 0, 0, B10_OK);
    assert_int_equal(a->n_xfers, 3);
    assert_string_equal(a->xfers[1]->peer_name, "node-b");
    assert_int_equal(a->daemon->xfers_send, 1 + 1);     /* local and send */
    assert_int_equal(a->daemon->xfers_recv, 1);         /* the READ waits to receive */
    assert_int_equal(a->daemon->clients, 2);
    assert_int_equal(a->daemon->connections, 2);
    a = ask(&admins[1], B10__ADMIN_OP__ADMIN_CLIENTS, 0, 0, B10_OK);
    assert_int_equal(a->n_clients, 2);
}

/* A list is cut at the request's limit, and says how many rows it left out. */
static void test_rows_cut_at_the_limit(void **state)
{
    for (int i = 0; i < 3; i++)
        in_flight(mine, XFER_LOCAL, false);
    const B10__AdminReply *a = ask(b10ctl(0, USER), B10__ADMIN_OP__ADMIN_TRANSFERS, 0, 1, B10_OK);
    assert_int_equal(a->n_xfers, 1);
    assert_int_equal(a->omitted, 2);
    a = ask(&admins[0], B10__ADMIN_OP__ADMIN_TRANSFERS, 0, 0, B10_OK);
    assert_int_equal(a->n_xfers, 3);
    assert_int_equal(a->omitted, 0);
}

/* ---------------------------------------------------------------- cancel */

/*
 * A rank's b10ctl cancels its own uid's transfer, through the funnel; about
 * another user's it is told what it would be told of an id of none, and
 * that transfer goes on. An operator cancels any.
 */
static void test_cancel(void **state)
{
    struct xfer *own = in_flight(mine, XFER_LOCAL, false);
    struct xfer *other = in_flight(theirs, XFER_LOCAL, false);
    uint64_t other_id = other->id;
    struct session *user = b10ctl(0, USER);

    ask(user, B10__ADMIN_OP__ADMIN_CANCEL, other_id, 0, B10_ERR_NOT_FOUND);
    char refused[256];
    snprintf(refused, sizeof(refused), "%s", detail());
    assert_non_null(strstr(refused, "of uid 4242's ranks is in flight"));
    assert_int_equal(other->state, XFER_RUNNING);
    assert_int_equal(theirs->told, 0);
    /* The very answer an id of none gets, but for the id. */
    ask(user, B10__ADMIN_OP__ADMIN_CANCEL, 0x1234, 0, B10_ERR_NOT_FOUND);
    assert_non_null(strstr(detail(), "no transfer 0000000000001234 of uid 4242's ranks"));
    assert_non_null(ex_logged("another user's: answered as no such transfer"));

    ask(user, B10__ADMIN_OP__ADMIN_CANCEL, own->id, 0, B10_OK);
    assert_int_equal(mine->told, 1);
    assert_int_equal(mine->status, B10_ERR_CANCELLED);
    assert_non_null(strstr(mine->detail, "cancelled by the operator (b10ctl, uid 4242, pid 100)"));

    struct session *op = b10ctl(1, geteuid());
    ask(op, B10__ADMIN_OP__ADMIN_CANCEL, other_id, 0, B10_OK);
    assert_int_equal(theirs->told, 1);
    assert_int_equal(theirs->status, B10_ERR_CANCELLED);
    ask(op, B10__ADMIN_OP__ADMIN_CANCEL, other_id, 0, B10_ERR_NOT_FOUND);
    assert_non_null(strstr(detail(), "is in flight"));
    assert_null(strstr(detail(), "of uid"));
}

/* ---------------------------------------------------------------- drain, resume */

/* An operator's drain goes to the service with its bound, capped; a resume a stopping daemon refuses. */
static void test_drain_and_resume(void **state)
{
    struct session *op = b10ctl(0, geteuid());
    B10__AdminRequest req = B10__ADMIN_REQUEST__INIT;
    req.op = B10__ADMIN_OP__ADMIN_DRAIN;
    req.drain_timeout_ms = 4000000;
    assert_int_equal(admin_on_request(op, 1, &req), B10_OK);
    assert_int_equal(answer->reply->status, B10_OK);
    assert_int_equal(drains, 1);
    assert_int_equal(drain_bound, 600000);
    assert_string_equal(answer->reply->admin->daemon->state, "draining");
    req.drain_timeout_ms = 0;
    assert_int_equal(admin_on_request(op, 2, &req), B10_OK);
    assert_int_equal(drain_bound, ex_d.cfg.drain_timeout_ms);

    ask(op, B10__ADMIN_OP__ADMIN_RESUME, 0, 0, B10_OK);
    assert_string_equal(answer->reply->admin->daemon->state, "serving");
    resume_status = B10_ERR_DRAINING;
    ask(op, B10__ADMIN_OP__ADMIN_RESUME, 0, 0, B10_ERR_DRAINING);
    assert_non_null(strstr(detail(), "cannot be resumed"));
}

/* ---------------------------------------------------------------- connections */

/*
 * b10ctl connections of users who are no operators are bounded, each uid's
 * and all together: past the bound a new one is answered B10_ERR_BUSY and
 * dropped. An operator's are not counted, nor refused.
 */
static void test_connections_bounded(void **state)
{
    unsigned i;
    for (i = 0; i < IPC_MAX_ADMIN_PER_UID; i++)
        ask(b10ctl(i, USER), B10__ADMIN_OP__ADMIN_STATUS, 0, 0, B10_OK);
    assert_int_equal(ex_d.admin_connections, IPC_MAX_ADMIN_PER_UID);
    B10__AdminRequest req = B10__ADMIN_REQUEST__INIT;
    req.op = B10__ADMIN_OP__ADMIN_STATUS;
    struct session *extra = b10ctl(i++, USER);
    assert_int_equal(admin_on_request(extra, 9, &req), B10_ERR_BUSY);
    assert_int_equal(answer->reply->status, B10_ERR_BUSY);
    assert_non_null(strstr(detail(), "of uid 4242 (at most 8)"));
    assert_false(extra->admin_counted);
    /* Another uid still gets in; an operator too, uncounted. */
    ask(b10ctl(i++, OTHER), B10__ADMIN_OP__ADMIN_STATUS, 0, 0, B10_OK);
    ask(b10ctl(i++, geteuid()), B10__ADMIN_OP__ADMIN_STATUS, 0, 0, B10_OK);
    assert_int_equal(ex_d.admin_connections, IPC_MAX_ADMIN_PER_UID + 1);
    /* A connection's later requests are not counted again. */
    ask(&admins[0], B10__ADMIN_OP__ADMIN_STATUS, 0, 0, B10_OK);
    assert_int_equal(ex_d.admin_connections, IPC_MAX_ADMIN_PER_UID + 1);
}

/* An unknown request is refused as such. */
static void test_unknown_request(void **state)
{
    ask(b10ctl(0, geteuid()), (B10__AdminOp)99, 0, 0, B10_ERR_INVALID_ARG);
    assert_non_null(strstr(detail(), "unknown admin request 99"));
}

/* ---------------------------------------------------------------- what an operator reads */

/*
 * The quarantine's entries name their kind, reason and remote daemon; the
 * peers their state, links and share; the staging pool its views by
 * state; the counters their values.
 */
static void test_operator_reads(void **state)
{
    struct session *op = b10ctl(0, geteuid());
    struct view *v = staging_get(ex_d.staging, VIEW_SEND);
    quarantine_add(ex_d.quarantine, QUARANTINE_VIEW, v->id, v->bytes, B10_ERR_PEER_LOST, 0x77,
                   ex_node_b.daemon_id, v, &ex_node_b.quarantined);
    quarantine_add(ex_d.quarantine, QUARANTINE_XFER_ID, 0x77, 0, B10_ERR_PEER_LOST, 0x77, 0, NULL,
                   NULL);
    ex_d.stats.bytes_sent = 12345;
    ex_node_b.counters.refused = 3;
    in_flight(mine, XFER_SEND, true);

    const B10__AdminReply *a = ask(op, B10__ADMIN_OP__ADMIN_QUARANTINE, 0, 0, B10_OK);
    assert_int_equal(a->n_quarantine, 2);
    assert_string_equal(a->quarantine[0]->kind, "view");
    assert_string_equal(a->quarantine[0]->reason, "B10_ERR_PEER_LOST");
    assert_string_equal(a->quarantine[0]->peer_name, "node-b");
    assert_int_equal(a->quarantine[0]->size, EX_VIEW);
    assert_string_equal(a->quarantine[1]->peer_name, "");
    assert_int_equal(a->daemon->quarantine_entries, 2);
    assert_int_equal(a->daemon->quarantine_bytes, EX_VIEW);

    a = ask(op, B10__ADMIN_OP__ADMIN_PEERS, 0, 0, B10_OK);
    assert_int_equal(a->n_peers, 2);
    const B10__AdminPeer *b = strcmp(a->peers[0]->name, "node-b") == 0 ? a->peers[0] : a->peers[1];
    assert_string_equal(b->state, "up");
    assert_int_equal(b->out_gen, 7);
    assert_int_equal(b->in_gen, 9);
    assert_int_equal(b->refused, 3);
    assert_int_equal(b->quarantined_bytes, EX_VIEW);
    assert_string_equal(b->transports, "tcp");

    a = ask(op, B10__ADMIN_OP__ADMIN_STAGING, 0, 0, B10_OK);
    assert_int_equal(a->staging->views, EX_VIEWS);
    assert_int_equal(a->staging->quarantined, 1);
    assert_int_equal(a->staging->free, EX_VIEWS - 1);
    assert_int_equal(a->staging->view_bytes, EX_VIEW);

    a = ask(op, B10__ADMIN_OP__ADMIN_STATS, 0, 0, B10_OK);
    bool found = false;
    for (size_t i = 0; i < a->n_counters; i++)
        if (strcmp(a->counters[i]->name, "bytes_sent") == 0) {
            assert_int_equal(a->counters[i]->value, 12345);
            found = true;
        }
    assert_true(found);
}

/* ---------------------------------------------------------------- metrics */

/* The line of text that begins with prefix, or a failure naming it. */
static void assert_metric(const char *text, const char *line)
{
    const char *p = text;
    size_t n = strlen(line);
    while ((p = strstr(p, line)) != NULL) {
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
            return;
        p += n;
    }
    fail_msg("no line \"%s\" in the metrics", line);
}

/*
 * The metrics are the daemon's state in Prometheus's text format: its
 * identity, transfers in flight by role and by remote daemon (a name's
 * quotes escaped), the quarantine, staging and tags, the counters as
 * _total and the histograms of landed transfers.
 */
static void test_metrics_text(void **state)
{
    snprintf(ex_node_b.name, sizeof(ex_node_b.name), "node\"b");
    in_flight(mine, XFER_SEND, true);
    in_flight(mine, XFER_SEND, true);
    in_flight(theirs, XFER_LOCAL, false);
    ex_node_b.counters.unauthenticated = 5;
    stats_landed(&ex_d.hists, XFER_SEND, 0.004, 0.001, 65536, 3);

    const B10__AdminReply *a = ask(b10ctl(0, geteuid()), B10__ADMIN_OP__ADMIN_METRICS, 0, 0,
                                   B10_OK);
    const char *t = a->metrics_text;
    assert_non_null(t);
    assert_non_null(strstr(t, "b10d_info{version=\"" B10D_VERSION "\",name=\"node-a\","
                              "daemon_id=\"000000000000a0a0\"} 1\n"));
    assert_metric(t, "b10d_state{state=\"serving\"} 1");
    assert_metric(t, "b10d_state{state=\"draining\"} 0");
    assert_metric(t, "b10d_transfers_in_flight{role=\"send\"} 2");
    assert_metric(t, "b10d_transfers_in_flight{role=\"local\"} 1");
    assert_metric(t, "b10d_peer_transfers_in_flight{peer=\"node\\\"b\"} 2");
    assert_metric(t, "b10d_peer_transfer_bytes_in_flight{peer=\"node\\\"b\"} 16384");
    assert_metric(t, "b10d_peer_transfers_in_flight{peer=\"node-a\"} 0");
    assert_metric(t, "b10d_peer_dropped_total{peer=\"node\\\"b\",why=\"unauthenticated\"} 5");
    assert_metric(t, "b10d_clients 2");
    assert_metric(t, "b10d_trust{mode=\"local-only\",key_id=\"\"} 1");
    assert_metric(t, "b10d_staging_views{state=\"free\"} 8");
    assert_metric(t, "b10d_transfers_duration_seconds_count{role=\"send\"} 1");
    assert_metric(t, "b10d_transfers_duration_seconds_bucket{role=\"send\",le=\"+Inf\"} 1");
    assert_metric(t, "b10d_transfers_size_bytes_sum{role=\"send\"} 65536");
    assert_non_null(strstr(t, "# TYPE process_cpu_seconds_total counter\n"));
    assert_non_null(strstr(t, "\nprocess_open_fds "));
    assert_non_null(a->staging);
    assert_true(a->n_counters > 0);
    assert_int_equal(a->n_peers, 2);

    /* admin_metrics_text is what GET /metrics serves: the same text. */
    char *text = NULL;
    size_t length = 0;
    assert_int_equal(admin_metrics_text(&ex_d, &text, &length), B10_OK);
    assert_int_equal(length, strlen(text));
    assert_non_null(strstr(text, "b10d_peer_transfers_in_flight{peer=\"node\\\"b\"} 2\n"));
    free(text);
}

#define CASES(fn, table)                                                              \
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)                     \
        tests[n++] = (struct CMUnitTest){ table[i].name, fn, setup, teardown,          \
                                          (void *)&table[i] }
#define ONE(fn) tests[n++] = (struct CMUnitTest)cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    struct CMUnitTest tests[32];
    size_t n = 0;
    log_setup(LOG_LEVEL_INFO, "test-admin");
    CASES(test_who_may_ask, op_cases);
    ONE(test_each_sees_its_own);
    ONE(test_rows_cut_at_the_limit);
    ONE(test_cancel);
    ONE(test_drain_and_resume);
    ONE(test_connections_bounded);
    ONE(test_unknown_request);
    ONE(test_operator_reads);
    ONE(test_metrics_text);
    assert_true(n <= sizeof(tests) / sizeof(tests[0]));
    return _cmocka_run_group_tests("admin", tests, n, NULL, NULL);
}
