/*
 * test-xfer-local.c — daemon/engine/xfer-local.c: transfers between two
 * ranks of one daemon, and what of xfer.c and xfer-trace.c they run.
 *
 * Two ranks of real memory (memfds registered as a rank's are, see
 * engine-fixture.h) and real copies: a transfer's bytes are compared where
 * they landed, and the bytes around them are shown untouched. Each refusal
 * of the admission table is shown beside the same request admitted; the
 * state transitions a copy in flight makes possible (a cancel, the bound
 * on quiescence, a deadline that passed, the other rank leaving, a region
 * gone or closed since admission, a chunk changed in its view, a hole) each
 * end as the funnel says, with the rank told once.
 */
#include "engine-fixture.h"

#include "checksum.h"
#include "gpu.h"

#define MiB (1u << 20)

/* ---------------------------------------------------------------- the GPU, faked */

/*
 * A rank's "VRAM" here is its memfd's mapping, as a region of device 0
 * (as_vram); the GPU room's entry points are fakes (-Wl,--wrap): it has
 * kernels while gpu_on says so, and a job handed to it is copied on the
 * host from its segments or its grid's rows, and ended from the loop on
 * its next turn, as CUDA's host callback hands a copy back.
 */
static bool gpu_on;
static unsigned gpu_jobs;           /* handed to the GPU */
#define GPU_QUEUE 16
static struct copy_job *gpu_queue[GPU_QUEUE];
static unsigned gpu_queued;
static uv_timer_t gpu_timer;

bool __wrap_gpu_present(const struct b10d *d);
bool __wrap_gpu_present(const struct b10d *d)
{
    return gpu_on;
}

bool __wrap_gpu_kernels(const struct b10d *d);
bool __wrap_gpu_kernels(const struct b10d *d)
{
    return gpu_on;
}

static uint8_t *grid_row(uint64_t *bases, uint32_t per_base, uint64_t stride, uint32_t k)
{
    return (uint8_t *)(uintptr_t)bases[k / per_base] + (uint64_t)(k % per_base) * stride;
}

static void gpu_run(uv_timer_t *t)
{
    while (gpu_queued > 0) {
        struct copy_job *job = gpu_queue[--gpu_queued];
        const struct copy_grid *g = job->grid;
        if (g != NULL)
            for (uint32_t i = 0; i < g->count; i++)
                memcpy(grid_row(g->dst_bases, g->dst_per_base, g->dst_stride, g->pairs[2 * i + 1]),
                       grid_row(g->src_bases, g->src_per_base, g->src_stride, g->pairs[2 * i]),
                       g->length);
        for (uint32_t i = 0; i < job->nsegs; i++)
            if (job->segs[i].device >= 0)
                memcpy(job->segs[i].dst, job->segs[i].src, job->segs[i].len);
        copy_gpu_hooks.part_done(job, B10_OK);
    }
}

void __wrap_gpu_copy_job(struct b10d *d, struct copy_job *job);
void __wrap_gpu_copy_job(struct b10d *d, struct copy_job *job)
{
    assert_true(gpu_on);
    assert_true(gpu_queued < GPU_QUEUE);
    gpu_jobs++;
    job->parts++;
    gpu_queue[gpu_queued++] = job;
    uv_timer_start(&gpu_timer, gpu_run, 0, 0);
}

/*
 * VRAM of device 0 whose bytes are where a memfd is mapped: DRAM's operations
 * (closing is its unmapping), reached as device memory, so that every copy of it
 * goes to the GPU room, which these tests play.
 */
static struct mem_kind_ops vram_on_host;

/* k's regions as VRAM of device 0, their bytes where its memfd is mapped. */
static void as_vram(struct ex_rank *k)
{
    vram_on_host = dram_kind;
    vram_on_host.kind = B10_MEM_VRAM;
    vram_on_host.kind_name = "vram";
    vram_on_host.reach = MEM_REACH_DEVICE;
    for (uint32_t i = 0; i < k->s.mem.count; i++) {
        k->s.mem.regions[i]->ops = &vram_on_host;
        k->s.mem.regions[i]->device = 0;
    }
    k->s.mem.host_bytes = 0;
}

static struct ex_rank *a, *b;       /* a submits; b is the other rank, same uid */

static int setup(void **state)
{
    ex_setup(state);
    gpu_on = false;
    gpu_jobs = gpu_queued = 0;
    uv_timer_init(&ex_loop, &gpu_timer);
    a = ex_rank("rank-a", 1000, MiB, 1);
    b = ex_rank("rank-b", 1000, MiB, 2);
    ex_load(a, "rank-b", &ex_self, true, 1000, 0);
    return 0;
}

static int teardown(void **state)
{
    uv_close((uv_handle_t *)&gpu_timer, NULL);
    return ex_teardown(state);
}

/* ---------------------------------------------------------------- requests */

/* count spans of len bytes: a's from a_off, b's from b_off, each step apart. */
struct lreq {
    B10__SubmitXfer m;
    uint8_t local[8 * SPAN_BYTES], remote[8 * SPAN_BYTES];
    uint8_t sync[B10_SYNC_MSG_MAX + 1];
    size_t count;
    uint64_t a_off, b_off, step, len;
};

static void lreq_init(struct lreq *r, B10__Op op, size_t count, uint64_t len, const char *sync)
{
    memset(r, 0, sizeof(*r));
    B10__SubmitXfer init = B10__SUBMIT_XFER__INIT;
    r->m = init;
    r->m.op = op;
    r->m.remote_agent = "rank-b";
    r->count = count;
    r->a_off = 4096;
    r->b_off = 8192 + 100;
    r->step = len + 512;
    r->len = len;
    ex_spans(r->local, count, a, r->a_off, r->step, len);
    ex_spans(r->remote, count, b, r->b_off, r->step, len);
    r->m.local_spans = (ProtobufCBinaryData){ count * SPAN_BYTES, r->local };
    r->m.remote_spans = (ProtobufCBinaryData){ count * SPAN_BYTES, r->remote };
    size_t n = strlen(sync);
    memcpy(r->sync, sync, n);
    r->m.sync_msg = (ProtobufCBinaryData){ n, r->sync };
}

static b10_status_t submit(struct lreq *r, struct xfer **x_p, char *detail, size_t detail_len)
{
    detail[0] = '\0';
    return xfer_submit(&a->s, &r->m, NULL, NULL, x_p, detail, detail_len);
}

/* Submitted and started, as session.c does once its reply is queued. */
static struct xfer *start(struct lreq *r)
{
    struct xfer *x = NULL;
    char detail[256];
    b10_status_t st = submit(r, &x, detail, sizeof(detail));
    if (st != B10_OK)
        fail_msg("refused: %s: %s", b10_status_name(st), detail);
    xfer_start(x);
    return x;
}

/* The source and destination ranks of r, and where its spans lie in each. */
static void sides(const struct lreq *r, struct ex_rank **src, uint64_t *src_off,
                  struct ex_rank **dst, uint64_t *dst_off)
{
    bool read = r->m.op == B10__OP__OP_READ;
    *src = read ? b : a;
    *dst = read ? a : b;
    *src_off = read ? r->b_off : r->a_off;
    *dst_off = read ? r->a_off : r->b_off;
}

/* Every span's bytes landed, and the bytes between and around them are as before (was). */
static void assert_landed(const struct lreq *r, const uint8_t *was)
{
    struct ex_rank *src, *dst;
    uint64_t so, d0;
    sides(r, &src, &so, &dst, &d0);
    for (size_t i = 0; i < r->count; i++)
        assert_memory_equal(dst->mem + d0 + i * r->step, src->mem + so + i * r->step, r->len);
    for (size_t i = 0; i < r->count; i++) {
        uint64_t gap = d0 + i * r->step + r->len;
        assert_memory_equal(dst->mem + gap, was + gap, r->step - r->len);
    }
    assert_memory_equal(dst->mem, was, d0);
}

/* The destination as it was before (its copy, which the caller frees). */
static uint8_t *save_dst(const struct lreq *r)
{
    struct ex_rank *src, *dst;
    uint64_t so, d0;
    sides(r, &src, &so, &dst, &d0);
    uint8_t *was = malloc(dst->len);
    assert_non_null(was);
    memcpy(was, dst->mem, dst->len);
    return was;
}

static void assert_untouched(const struct lreq *r, const uint8_t *was)
{
    struct ex_rank *src, *dst;
    uint64_t so, d0;
    sides(r, &src, &so, &dst, &d0);
    assert_memory_equal(dst->mem, was, dst->len);
}

/* ---------------------------------------------------------------- transfers that land */

struct lands {
    const char *name;
    B10__Op op;
    size_t count;
    uint64_t len;
    bool staged;            /* through views (B10_TEST_LOCAL_STAGED) */
    bool verify;            /* --verify-data on: each staged chunk summed and checked */
    bool trace;
    uint32_t nchunks;       /* its plan's */
    const char *steps;      /* in its trace line */
    bool vram;              /* both ranks' memory VRAM of one GPU: its copies the GPU's */
};

static const struct lands lands_cases[] = {
    { "write, direct", B10__OP__OP_WRITE, 3, 20000, false, false, true, 1, "copy#0", false },
    { "read, direct", B10__OP__OP_READ, 3, 20000, false, false, false, 1, NULL, false },
    /* Past 512 KiB a direct copy leaves the loop for the thread pool. */
    { "write, direct, on the pool", B10__OP__OP_WRITE, 3, 250000, false, false, false, 12, NULL, false },
    { "write, staged, summed", B10__OP__OP_WRITE, 4, 70000, true, true, false, 5, NULL, false },
    /* Past 8 chunks a trace counts the later chunks' steps instead. */
    { "read, staged, traced", B10__OP__OP_READ, 3, 200000, true, false, true, 10,
      "gather#0", false },
    { "write, VRAM to VRAM, direct", B10__OP__OP_WRITE, 3, 100000, false, false, false, 5, NULL,
      true },
};

/*
 * The bytes land where the plan says and nowhere else; the rank hears
 * B10_OK once, the other rank its sync message after, with the room it
 * was promised released; the log says it landed, and a trace its steps.
 */
static void test_lands(void **state)
{
    const struct lands *c = *state;
    ex_d.test_local_staged = c->staged;
    ex_d.cfg.verify_data = c->verify ? CONFIG_VERIFY_ON : CONFIG_VERIFY_OFF;
    ex_d.cfg.trace = c->trace;
    if (c->vram) {
        gpu_on = true;
        as_vram(a);
        as_vram(b);
    }
    struct lreq r;
    lreq_init(&r, c->op, c->count, c->len, "kv ready");
    uint8_t *was = save_dst(&r);

    struct xfer *x = start(&r);
    assert_int_equal(xfer_nchunks(x), c->nchunks);
    assert_int_equal(b->s.notice_reserved, strlen("kv ready"));
    assert_int_equal(a->s.nxfers, 1);
    ex_wait_told(a);
    assert_int_equal(a->status, B10_OK);
    assert_landed(&r, was);
    assert_int_equal(b->notices, 1);
    assert_string_equal(b->notice_from, "rank-a");
    assert_int_equal(b->notice_length, strlen("kv ready"));
    assert_memory_equal(b->notice, "kv ready", b->notice_length);
    assert_int_equal(b->s.notice_reserved, 0);
    assert_int_equal(a->s.nxfers, 0);
    assert_int_equal(ex_d.stats.xfers_succeeded, 1);
    assert_int_equal(ex_d.stats.bytes_landed, c->count * c->len);
    assert_int_equal(ex_quarantined(QUARANTINE_XFER_ID), 0);
    assert_int_equal(gpu_jobs > 0, c->vram);
    const char *landed = ex_logged(c->op == B10__OP__OP_READ ? "local read" : "local write");
    assert_non_null(landed);
    assert_non_null(strstr(landed, "landed"));
    assert_non_null(strstr(landed, c->staged ? "0 of them direct" : "of them direct"));
    if (c->trace) {
        const char *trace = ex_logged("trace ");
        assert_non_null(trace);
        assert_non_null(strstr(trace, "(local, landed"));
        assert_non_null(strstr(trace, "planned"));
        assert_non_null(strstr(trace, c->steps));
        assert_non_null(strstr(trace, "told"));
        assert_true((strstr(trace, "steps untraced") != NULL) == (c->nchunks > 8));
    }
    free(was);
}

/* ---------------------------------------------------------------- refusals */

static struct region *region_of(struct ex_rank *k)
{
    assert_int_equal(k->s.mem.count, 1);
    return k->s.mem.regions[0];
}

static void op_unknown(struct lreq *r) { r->m.op = (B10__Op)7; }
static void tables_unequal(struct lreq *r) { r->m.remote_spans.len -= SPAN_BYTES; }
static void tables_empty(struct lreq *r) { r->m.local_spans.len = r->m.remote_spans.len = 0; }
static void deadline_past_max(struct lreq *r) { r->m.deadline_ms = ex_d.cfg.max_deadline_ms + 1; }
static void sync_too_large(struct lreq *r) { r->m.sync_msg.len = B10_SYNC_MSG_MAX + 1; }
static void agent_unloaded(struct lreq *r) { r->m.remote_agent = "rank-z"; }
static void rank_not_here(struct lreq *r)
{
    ex_load(a, "rank-c", &ex_self, true, 1000, 0);
    r->m.remote_agent = "rank-c";
}
static void draining(struct lreq *r) { ex_d.stopping = true; }
static void spans_past_max(struct lreq *r) { ex_d.cfg.max_spans = 2; }
static void xfers_past_max(struct lreq *r) { ex_d.cfg.max_xfers = 0; }
static void quarantine_full(struct lreq *r)
{
    struct view *v = staging_get(ex_d.staging, VIEW_SEND);
    assert_non_null(v);
    quarantine_add(ex_d.quarantine, QUARANTINE_VIEW, v->id, v->bytes, B10_ERR_CANCELLED, 1, 0, v,
                   NULL);
    ex_d.cfg.quarantine_budget = v->bytes - 1;
}
static void local_unregistered(struct lreq *r)
{
    frame_put_u64(r->local + SPAN_BYTES, a->addr + a->len - 100);
}
static void bytes_past_max(struct lreq *r) { ex_d.cfg.max_xfer_bytes = 2 * r->len; }
static void local_stuck(struct lreq *r) { region_of(a)->stuck = 1; }
static void other_uid(struct lreq *r)
{
    b->s.uid = 2000;
    r->m.sync_msg.len = 0;
}
static void other_uid_open_sync(struct lreq *r)
{
    b->s.uid = 2000;
    region_of(b)->open = true;
}
static void notices_full(struct lreq *r) { ex_notice_max = 3; }
static void dst_unregistered(struct lreq *r)
{
    frame_put_u64(r->remote + 2 * SPAN_BYTES, b->addr + b->len + 4096);
}
static void dst_stuck(struct lreq *r) { region_of(b)->stuck = 1; }
static void dst_overlap(struct lreq *r)
{
    memcpy(r->remote + SPAN_BYTES, r->remote, SPAN_BYTES);
}
static void paired_grants_write(struct lreq *r)
{
    b->s.uid = 2000;
    ex_load(b, "rank-a", &ex_self, true, 1000, B10_GRANT_WRITE);
}

struct refusal {
    const char *name;
    B10__Op op;
    void (*breaks)(struct lreq *r);
    b10_status_t want;          /* B10_OK: admitted, and it lands */
    const char *why;            /* in the detail */
};

static const struct refusal refusals[] = {
    { "operation unknown", B10__OP__OP_WRITE, op_unknown, B10_ERR_UNSUPPORTED, "unknown operation" },
    { "tables unequal", B10__OP__OP_WRITE, tables_unequal, B10_ERR_INVALID_ARG, "equal, non-empty" },
    { "tables empty", B10__OP__OP_READ, tables_empty, B10_ERR_INVALID_ARG, "equal, non-empty" },
    { "deadline past max", B10__OP__OP_WRITE, deadline_past_max, B10_ERR_INVALID_ARG,
      "--max-deadline-ms" },
    { "sync too large", B10__OP__OP_WRITE, sync_too_large, B10_ERR_TOO_LARGE, "sync message" },
    { "agent not loaded", B10__OP__OP_WRITE, agent_unloaded, B10_ERR_UNKNOWN_AGENT, "rank-z" },
    { "rank not connected", B10__OP__OP_WRITE, rank_not_here, B10_ERR_UNKNOWN_AGENT,
      "no rank named 'rank-c'" },
    { "draining", B10__OP__OP_WRITE, draining, B10_ERR_DRAINING, "draining" },
    { "spans past max", B10__OP__OP_WRITE, spans_past_max, B10_ERR_TOO_LARGE, "--max-spans" },
    { "transfers past max", B10__OP__OP_READ, xfers_past_max, B10_ERR_BUSY, "--max-xfers" },
    { "quarantine past budget", B10__OP__OP_WRITE, quarantine_full, B10_ERR_STAGING_EXHAUSTED,
      "quarantined" },
    { "local span unregistered", B10__OP__OP_WRITE, local_unregistered, B10_ERR_NOT_REGISTERED,
      "local span 1" },
    { "bytes past max", B10__OP__OP_WRITE, bytes_past_max, B10_ERR_TOO_LARGE, "--max-xfer-bytes" },
    { "local region stuck", B10__OP__OP_READ, local_stuck, B10_ERR_UNSETTLED, "--settle-ms passed" },
    { "other uid, closed region", B10__OP__OP_WRITE, other_uid, B10_ERR_PERMISSION,
      "not wholly in regions it opened" },
    { "other uid, open region, sync", B10__OP__OP_WRITE, other_uid_open_sync, B10_ERR_PERMISSION,
      "a sync message is a notice" },
    { "other uid, read, closed region", B10__OP__OP_READ, other_uid, B10_ERR_PERMISSION,
      "B10_GRANT_READ" },
    { "notices full", B10__OP__OP_WRITE, notices_full, B10_ERR_BUSY, "--max-notice-bytes" },
    { "destination unregistered", B10__OP__OP_WRITE, dst_unregistered, B10_ERR_REMOTE_REJECTED,
      "outside the destination rank's registered memory" },
    { "source unregistered (read)", B10__OP__OP_READ, dst_unregistered, B10_ERR_REMOTE_REJECTED,
      "registered memory" },
    { "destination stuck", B10__OP__OP_WRITE, dst_stuck, B10_ERR_UNSETTLED, "--settle-ms passed" },
    { "destinations overlap", B10__OP__OP_WRITE, dst_overlap, B10_ERR_INVALID_ARG, "overlap" },
    { "other uid, paired, granted", B10__OP__OP_WRITE, paired_grants_write, B10_OK, NULL },
};

/*
 * The request as it is lands; with the case's one thing broken it is
 * refused, saying why, and leaves nothing: no transfer, no promise of a
 * notice, nothing counted.
 */
static void test_refused(void **state)
{
    const struct refusal *c = *state;
    struct lreq r;
    char detail[512];
    struct xfer *x = NULL;

    lreq_init(&r, c->op, 3, 3000, c->op == B10__OP__OP_WRITE ? "sync" : "");
    uint8_t *was = save_dst(&r);
    start(&r);
    ex_wait_told(a);
    assert_int_equal(a->status, B10_OK);
    assert_landed(&r, was);
    a->told = 0;

    c->breaks(&r);
    b10_status_t st = submit(&r, &x, detail, sizeof(detail));
    if (st != c->want)
        fail_msg("%s: %s, want %s: %s", c->name, b10_status_name(st), b10_status_name(c->want),
                 detail);
    if (c->want == B10_OK) {
        xfer_start(x);
        ex_wait_told(a);
        assert_int_equal(a->status, B10_OK);
    } else {
        assert_null(x);
        if (strstr(detail, c->why) == NULL)
            fail_msg("%s: the detail \"%s\" does not say \"%s\"", c->name, detail, c->why);
        assert_int_equal(ex_d.nxfers, 0);
        assert_int_equal(a->s.nxfers, 0);
        assert_int_equal(b->s.notice_reserved, 0);
        assert_int_equal(ex_d.stats.xfers_submitted, 1);
    }
    region_of(a)->stuck = region_of(b)->stuck = 0;
    free(was);
}

/* ---------------------------------------------------------------- admitted through open regions */

/*
 * A rank of another uid, unpaired, reaches only regions opened to the node,
 * and each copy asks again: a region closed after admission refuses the
 * copy, and the rank hears why; the destination is untouched.
 */
static void test_open_only_asked_at_each_copy(void **state)
{
    struct lreq r;
    b->s.uid = 2000;
    region_of(b)->open = true;
    lreq_init(&r, B10__OP__OP_WRITE, 3, 3000, "");
    uint8_t *was = save_dst(&r);
    start(&r);
    ex_wait_told(a);
    assert_int_equal(a->status, B10_OK);
    assert_landed(&r, was);

    a->told = 0;
    memcpy(was, b->mem, b->len);
    struct xfer *x = NULL;
    char detail[256];
    assert_int_equal(submit(&r, &x, detail, sizeof(detail)), B10_OK);
    region_of(b)->open = false;
    xfer_start(x);
    ex_wait_told(a);
    assert_int_equal(a->status, B10_ERR_PERMISSION);
    assert_non_null(strstr(a->detail, "no longer in a region open to the node"));
    assert_untouched(&r, was);
    free(was);
}

/* ---------------------------------------------------------------- regions gone since admission */

struct gone {
    const char *name;
    bool dst;                   /* the destination's region goes, else the source's */
    b10_status_t want;
    const char *why;
};

static const struct gone gone_cases[] = {
    { "destination deregistered", true, B10_ERR_REMOTE_REJECTED, "destination no longer registered" },
    { "source deregistered", false, B10_ERR_NOT_REGISTERED, "copying chunk 0 from rank-a" },
};

static void test_region_gone(void **state)
{
    const struct gone *c = *state;
    struct lreq r;
    lreq_init(&r, B10__OP__OP_WRITE, 3, 3000, "sync");
    uint8_t *was = save_dst(&r);
    struct xfer *x = NULL;
    char detail[256];
    assert_int_equal(submit(&r, &x, detail, sizeof(detail)), B10_OK);
    struct ex_rank *k = c->dst ? b : a;
    assert_int_equal(mem_table_remove(&k->s.mem, region_of(k)->id), B10_OK);
    xfer_start(x);
    ex_wait_told(a);
    assert_int_equal(a->status, c->want);
    assert_non_null(strstr(a->detail, c->why));
    assert_untouched(&r, was);
    assert_int_equal(b->notices, 0);
    assert_int_equal(b->s.notice_reserved, 0);
    assert_int_equal(ex_quarantined(QUARANTINE_XFER_ID), 1);
    free(was);
}

/* ---------------------------------------------------------------- a copy in flight */

/*
 * Cancelled while its copy writes the destination: no news until that copy
 * ended, then the first reason, once; the id retired at once.
 */
static void test_cancel_waits_for_the_copy(void **state)
{
    struct lreq r;
    ex_d.test_copy_delay_ms = 100;
    lreq_init(&r, B10__OP__OP_WRITE, 3, 3000, "sync");
    struct xfer *x = start(&r);
    assert_int_equal(x->scatters, 1);
    xfer_cancel(x);
    assert_int_equal(a->told, 0);
    assert_int_equal(ex_quarantined(QUARANTINE_XFER_ID), 1);
    assert_false(list_empty(&ex_d.settling));
    xfer_fail(x, B10_ERR_DEADLINE, "a later reason");
    ex_wait_told(a);
    assert_int_equal(a->status, B10_ERR_CANCELLED);
    assert_string_equal(a->detail, "cancelled by the client");
    assert_int_equal(b->notices, 0);
    assert_int_equal(b->s.notice_reserved, 0);
    assert_int_equal(ex_d.stats.xfers_failed, 1);
    assert_int_equal(ex_quarantined(QUARANTINE_XFER_ID), 1);
    assert_non_null(ex_logged("MESSAGE_ID=9b3d6a51c2f84e0a8f0b1d2c3e4f5a61 TRANSFER="));
}

static unsigned stuck_at_news;

static void look_at_the_region(struct ex_rank *k)
{
    stuck_at_news = k == a ? region_of(b)->stuck : 0;
}

static bool region_free(const void *arg)
{
    return ((const struct region *)arg)->stuck == 0 && ex_d.nxfers == 0;
}

/*
 * The copy outlives --settle-ms: the rank hears B10_ERR_UNSETTLED, and the
 * region the copy still writes takes no new transfer until the copy ended;
 * then it does.
 */
static void test_unsettled_region_stuck_until_the_copy_ends(void **state)
{
    struct lreq r;
    char detail[256];
    struct xfer *x = NULL;
    ex_d.cfg.settle_ms = 10;
    ex_d.test_copy_delay_ms = 800;
    ex_told_hook = look_at_the_region;
    lreq_init(&r, B10__OP__OP_WRITE, 3, 3000, "");
    x = start(&r);
    xfer_cancel_admin(x, "b10ctl of uid 0");
    ex_wait_told(a);
    assert_int_equal(a->status, B10_ERR_UNSETTLED);
    assert_non_null(strstr(a->detail, "B10_ERR_CANCELLED"));
    assert_non_null(strstr(a->detail, "--settle-ms"));
    assert_non_null(strstr(a->detail, "cancelled by b10ctl of uid 0"));
    assert_int_equal(stuck_at_news, 1);     /* stuck before the news: nothing new goes there */
    struct region *rb = region_of(b);

    x = NULL;
    assert_int_equal(submit(&r, &x, detail, sizeof(detail)), B10_ERR_UNSETTLED);
    assert_non_null(strstr(detail, "--settle-ms passed"));

    assert_true(ex_run_until(region_free, rb));
    assert_non_null(ex_logged("its regions take work again"));
    ex_d.test_copy_delay_ms = 0;
    a->told = 0;
    uint8_t *was = save_dst(&r);
    start(&r);
    ex_wait_told(a);
    assert_int_equal(a->status, B10_OK);
    assert_landed(&r, was);
    free(was);
}

/*
 * A gather that completes after the deadline passed (its timer not yet
 * run) scatters nothing: the transfer fails B10_ERR_DEADLINE there.
 */
static void test_gathered_after_the_deadline(void **state)
{
    struct lreq r;
    ex_d.test_local_staged = true;
    lreq_init(&r, B10__OP__OP_WRITE, 3, 3000, "");
    r.m.deadline_ms = 5000;
    uint8_t *was = save_dst(&r);
    start(&r);
    ex_clock_ms += 6000;
    ex_wait_told(a);
    assert_int_equal(a->status, B10_ERR_DEADLINE);
    assert_non_null(strstr(a->detail, "deadline of 5000 ms expired waiting for its copies"));
    assert_untouched(&r, was);
    free(was);
}

/* The other rank leaves while its memory is written: the news waits for the copy, then says so. */
static void test_other_rank_leaves(void **state)
{
    struct lreq r;
    ex_d.test_copy_delay_ms = 100;
    lreq_init(&r, B10__OP__OP_WRITE, 3, 3000, "sync");
    struct xfer *x = start(&r);
    xfer_local_forget_rank(&b->s);
    assert_null(x->to);
    assert_ptr_equal(x->from, &a->s);
    assert_true(list_empty(&b->s.locals));
    assert_int_equal(a->told, 0);
    ex_wait_told(a);
    assert_int_equal(a->status, B10_ERR_CLIENT_GONE);
    assert_non_null(strstr(a->detail, "rank 'rank-b', whose memory it wrote, disconnected"));
}

/*
 * A chunk changed in its view after its checksum was made is not
 * scattered: the destination keeps every byte, the view is quarantined,
 * the rank hears B10_ERR_DATA_CORRUPT. Without the checksum (--verify-data
 * off) the same change would land.
 */
static void test_changed_chunk_not_scattered(void **state)
{
    struct lreq r;
    ex_d.test_local_staged = true;
    ex_d.cfg.verify_data = CONFIG_VERIFY_ON;
    ex_d.fault_flip_every = 1;
    lreq_init(&r, B10__OP__OP_WRITE, 3, 3000, "sync");
    uint8_t *was = save_dst(&r);
    start(&r);
    ex_wait_told(a);
    assert_int_equal(a->status, B10_ERR_DATA_CORRUPT);
    assert_non_null(strstr(a->detail, "none of its bytes was written"));
    assert_untouched(&r, was);
    assert_int_equal(ex_d.stats.chunks_corrupt, 1);
    assert_int_equal(ex_quarantined(QUARANTINE_VIEW), 1);
    assert_int_equal(b->notices, 0);

    ex_d.cfg.verify_data = CONFIG_VERIFY_OFF;
    a->told = 0;
    start(&r);
    ex_wait_told(a);
    assert_int_equal(a->status, B10_OK);
    bool changed = false;       /* the flipped byte landed */
    for (size_t i = 0; i < r.count; i++)
        changed |= memcmp(b->mem + r.b_off + i * r.step, a->mem + r.a_off + i * r.step, r.len) != 0;
    assert_true(changed);
    free(was);
}

/*
 * A hole in a rank's memfd (a page nobody wrote) is never filled by the
 * daemon: the copy stops, and the rank hears whose memory and where.
 */
struct hole {
    const char *name;
    bool in_dst;
    const char *whose;
};

static const struct hole hole_cases[] = {
    { "hole in the destination", true, "of 'rank-b'" },
    { "hole in the source", false, "of 'rank-a'" },
};

static void test_hole_not_filled(void **state)
{
    const struct hole *c = *state;
    struct lreq r;
    lreq_init(&r, B10__OP__OP_WRITE, 3, 3000, "");
    struct ex_rank *k = c->in_dst ? b : a;
    uint64_t off = c->in_dst ? r.b_off : r.a_off;
    long page = sysconf(_SC_PAGESIZE);
    /*
     * cmocka puts a SIGBUS handler of its own before each test's; a region
     * registered in the test puts the guard's first again (guard.h).
     */
    assert_int_equal(mem_table_remove(&k->s.mem, region_of(k)->id), B10_OK);
    ex_register(k, 0, k->len, false);
    uint64_t at = (off + (uint64_t)page - 1) / (uint64_t)page * (uint64_t)page;
    assert_int_equal(fallocate(k->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)at,
                               page), 0);
    start(&r);
    ex_wait_told(a);
    assert_int_equal(a->status, B10_ERR_NOT_POPULATED);
    assert_non_null(strstr(a->detail, c->whose));
    assert_non_null(strstr(a->detail, "write every page of the region first"));
    assert_int_equal(ex_d.stats.xfers_not_populated, 1);
    /* The hole is still one: the daemon allocated nothing there. */
    off_t data = lseek(k->fd, (off_t)at, SEEK_DATA);
    assert_true(data < 0 || data >= (off_t)(at + (uint64_t)page));
}

/* No view free: the transfer waits, and goes on when one comes back. */
static void test_waits_for_a_view(void **state)
{
    struct lreq r;
    struct view *held[EX_VIEWS + 1];
    unsigned n = 0;
    ex_d.test_local_staged = true;
    while ((held[n] = staging_get(ex_d.staging, VIEW_SEND)) != NULL)
        n++;
    assert_true(n > 0);
    lreq_init(&r, B10__OP__OP_WRITE, 3, 3000, "");
    uint8_t *was = save_dst(&r);
    struct xfer *x = start(&r);
    assert_true(x->waiting);
    assert_int_equal(x->next_chunk, 0);
    while (n > 0)
        staging_put(ex_d.staging, held[--n]);
    ex_wait_told(a);
    assert_int_equal(a->status, B10_OK);
    assert_landed(&r, was);
    free(was);
}

/* ---------------------------------------------------------------- picks */

#define PICKS 4096u
#define PICK_ROW 64u
#define PICK_STRIDE 128u

/*
 * 4096 rows picked from two grids: planned a part at a time as its copies
 * go; every row lands at its pick (the remote rows reversed).
 */
static void test_picks_planned_in_parts(void **state)
{
    static uint8_t rows[2 * PICKS * 4];
    uint8_t abase[8], bbase[8];
    frame_put_u64(abase, a->addr);
    frame_put_u64(bbase, b->addr + 4096);
    for (uint32_t i = 0; i < PICKS; i++) {
        frame_put_u32(rows + 4 * i, i);
        frame_put_u32(rows + 4 * (PICKS + i), PICKS - 1 - i);
    }
    struct xfer_picks picks = {
        .local = { abase, 1, PICKS, PICK_STRIDE, PICK_ROW },
        .remote = { bbase, 1, PICKS, PICK_STRIDE, PICK_ROW },
        .local_rows = rows, .remote_rows = rows + 4 * PICKS, .count = PICKS,
    };
    B10__SubmitXfer req = B10__SUBMIT_XFER__INIT;
    req.op = B10__OP__OP_WRITE;
    req.remote_agent = "rank-b";
    struct xfer *x = NULL;
    char detail[256];
    assert_int_equal(xfer_submit(&a->s, &req, &picks, NULL, &x, detail, sizeof(detail)), B10_OK);
    free(picks.spans);
    assert_int_equal(ex_d.stats.xfers_planned_in_parts, 1);
    assert_non_null(x->picker);
    xfer_start(x);
    ex_wait_told(a);
    assert_int_equal(a->status, B10_OK);
    for (uint32_t i = 0; i < PICKS; i++)
        assert_memory_equal(b->mem + 4096 + (uint64_t)(PICKS - 1 - i) * PICK_STRIDE,
                            a->mem + (uint64_t)i * PICK_STRIDE, PICK_ROW);
    assert_non_null(strstr(ex_logged("local write"), "then planned in"));
}

/* A pick outside its grid is refused, naming it. */
static void test_picks_outside_the_grid(void **state)
{
    static uint8_t rows[2 * 8 * 4];
    uint8_t abase[8], bbase[8];
    frame_put_u64(abase, a->addr);
    frame_put_u64(bbase, b->addr);
    for (uint32_t i = 0; i < 8; i++) {
        frame_put_u32(rows + 4 * i, i);
        frame_put_u32(rows + 4 * (8 + i), i);
    }
    frame_put_u32(rows + 4 * (8 + 5), 99);
    struct xfer_picks picks = {
        .local = { abase, 1, 16, PICK_STRIDE, PICK_ROW },
        .remote = { bbase, 1, 16, PICK_STRIDE, PICK_ROW },
        .local_rows = rows, .remote_rows = rows + 4 * 8, .count = 8,
    };
    B10__SubmitXfer req = B10__SUBMIT_XFER__INIT;
    req.op = B10__OP__OP_READ;
    req.remote_agent = "rank-b";
    struct xfer *x = NULL;
    char detail[256] = "";
    assert_int_equal(xfer_submit(&a->s, &req, &picks, NULL, &x, detail, sizeof(detail)),
                     B10_ERR_INVALID_ARG);
    free(picks.spans);
    assert_null(x);
    assert_non_null(strstr(detail, "99"));

    frame_put_u32(rows + 4 * (8 + 5), 5);
    picks.spans = NULL;
    assert_int_equal(xfer_submit(&a->s, &req, &picks, NULL, &x, detail, sizeof(detail)), B10_OK);
    free(picks.spans);
    xfer_start(x);
    ex_wait_told(a);
    assert_int_equal(a->status, B10_OK);
    for (uint32_t i = 0; i < 8; i++)
        assert_memory_equal(a->mem + i * PICK_STRIDE, b->mem + i * PICK_STRIDE, PICK_ROW);
}

/* ---------------------------------------------------------------- picks the GPU copies */

#define GRID_ROWS 64u

struct grid_case {
    const char *name;
    B10__Op op;
};

static const struct grid_case grid_cases[] = {
    { "write, rows of two grids", B10__OP__OP_WRITE },
    { "read, rows of two grids", B10__OP__OP_READ },
};

/* Picks of rank-a's rows (the local side) and rank-b's, b's reversed, 2 bases a side. */
static void grid_picks(struct xfer_picks *p, uint8_t *bases, uint8_t *rows, uint32_t count)
{
    frame_put_u64(bases, a->addr);
    frame_put_u64(bases + 8, a->addr + 256 * 1024);
    frame_put_u64(bases + 16, b->addr + 4096);
    frame_put_u64(bases + 24, b->addr + 512 * 1024);
    for (uint32_t i = 0; i < count; i++) {
        frame_put_u32(rows + 4 * i, i);
        frame_put_u32(rows + 4 * (count + i), count - 1 - i);
    }
    *p = (struct xfer_picks){
        .local = { bases, 2, count / 2, PICK_STRIDE, PICK_ROW },
        .remote = { bases + 16, 2, count / 2, PICK_STRIDE, PICK_ROW },
        .local_rows = rows, .remote_rows = rows + 4 * count, .count = count,
    };
}

/* The address in k's memory of row r of grid g. */
static const uint8_t *row_of(const struct ex_rank *k, const struct picks_grid *g, uint32_t r)
{
    uint64_t base = frame_get_u64(g->bases + 8 * (r / g->per_base));
    return k->mem + (base - k->addr) + (uint64_t)(r % g->per_base) * g->stride;
}

/*
 * Picks between two ranks' VRAM of one GPU go to the GPU as rows of two
 * grids, nothing planned a piece at a time: each row lands at its pick.
 */
static void test_grid(void **state)
{
    const struct grid_case *c = *state;
    static uint8_t rows[2 * GRID_ROWS * 4];
    uint8_t bases[32];
    struct xfer_picks picks;
    gpu_on = true;
    as_vram(a);
    as_vram(b);
    grid_picks(&picks, bases, rows, GRID_ROWS);
    B10__SubmitXfer req = B10__SUBMIT_XFER__INIT;
    req.op = c->op;
    req.remote_agent = "rank-b";
    struct xfer *x = NULL;
    char detail[256];
    assert_int_equal(xfer_submit(&a->s, &req, &picks, NULL, &x, detail, sizeof(detail)), B10_OK);
    free(picks.spans);
    assert_non_null(x->grid);
    assert_int_equal(ex_d.stats.xfers_grid_copied, 1);
    xfer_start(x);
    ex_wait_told(a);
    assert_int_equal(a->status, B10_OK);
    bool read = c->op == B10__OP__OP_READ;
    for (uint32_t i = 0; i < GRID_ROWS; i++) {
        const uint8_t *la = row_of(a, &picks.local, i);
        const uint8_t *rb = row_of(b, &picks.remote, GRID_ROWS - 1 - i);
        assert_memory_equal(read ? la : rb, read ? rb : la, PICK_ROW);
    }
    assert_int_equal(gpu_jobs, 1);
    assert_non_null(strstr(ex_logged(read ? "local read" : "local write"),
                           "copied by the GPU as rows of two grids"));
}

/*
 * A grid copy asks for its regions again at each copy: one deregistered
 * since admission fails the copy, naming whose side; one admitted open
 * to the node and closed since refuses it.
 */
struct grid_gone {
    const char *name;
    bool dst;
    bool close;                 /* the region closed to the node, else deregistered */
    b10_status_t want;
    const char *why;
};

static const struct grid_gone grid_gone_cases[] = {
    { "grid destination deregistered", true, false, B10_ERR_REMOTE_REJECTED,
      "destination no longer registered" },
    { "grid source deregistered", false, false, B10_ERR_NOT_REGISTERED, "copying chunk 0 from" },
    { "grid destination closed to the node", true, true, B10_ERR_PERMISSION,
      "no longer in a region open to the node" },
};

static void test_grid_region_gone(void **state)
{
    const struct grid_gone *c = *state;
    static uint8_t rows[2 * GRID_ROWS * 4];
    uint8_t bases[32];
    struct xfer_picks picks;
    gpu_on = true;
    if (c->close) {
        b->s.uid = 2000;                        /* unpaired: through open regions only */
        region_of(b)->open = true;
    }
    as_vram(a);
    as_vram(b);
    grid_picks(&picks, bases, rows, GRID_ROWS);
    B10__SubmitXfer req = B10__SUBMIT_XFER__INIT;
    req.op = B10__OP__OP_WRITE;
    req.remote_agent = "rank-b";
    struct xfer *x = NULL;
    char detail[256];
    assert_int_equal(xfer_submit(&a->s, &req, &picks, NULL, &x, detail, sizeof(detail)), B10_OK);
    free(picks.spans);
    assert_non_null(x->grid);
    struct ex_rank *k = c->dst ? b : a;
    if (c->close)
        region_of(k)->open = false;
    else
        assert_int_equal(mem_table_remove(&k->s.mem, region_of(k)->id), B10_OK);
    xfer_start(x);
    ex_wait_told(a);
    assert_int_equal(a->status, c->want);
    if (strstr(a->detail, c->why) == NULL)
        fail_msg("%s: the detail \"%s\" does not say \"%s\"", c->name, a->detail, c->why);
    assert_int_equal(gpu_jobs, 0);
}

#define CASES(fn, table)                                                              \
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)                     \
        tests[n++] = (struct CMUnitTest){ table[i].name, fn, setup, teardown,          \
                                          (void *)&table[i] }

int main(void)
{
    struct CMUnitTest tests[64];
    size_t n = 0;
    log_setup(LOG_LEVEL_INFO, "test-xfer-local");
    CASES(test_lands, lands_cases);
    CASES(test_refused, refusals);
    CASES(test_region_gone, gone_cases);
    CASES(test_hole_not_filled, hole_cases);
    CASES(test_grid, grid_cases);
    CASES(test_grid_region_gone, grid_gone_cases);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test_setup_teardown(
        test_open_only_asked_at_each_copy, setup, teardown);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test_setup_teardown(
        test_cancel_waits_for_the_copy, setup, teardown);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test_setup_teardown(
        test_unsettled_region_stuck_until_the_copy_ends, setup, teardown);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test_setup_teardown(
        test_gathered_after_the_deadline, setup, teardown);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test_setup_teardown(test_other_rank_leaves,
                                                                    setup, teardown);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test_setup_teardown(
        test_changed_chunk_not_scattered, setup, teardown);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test_setup_teardown(test_waits_for_a_view, setup,
                                                                    teardown);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test_setup_teardown(test_picks_planned_in_parts,
                                                                    setup, teardown);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test_setup_teardown(test_picks_outside_the_grid,
                                                                    setup, teardown);
    assert_true(n <= sizeof(tests) / sizeof(tests[0]));
    return _cmocka_run_group_tests("xfer-local", tests, n, NULL, NULL);
}
