/*
 * b10.h — libb10, the client library of the b10d KV-cache transfer daemon.
 *
 * A rank process links libb10 to reach the b10d running on its node. Through
 * one connection it registers the memory that holds its KV cache, learns the
 * remote ranks it will exchange KV with (from their agent descriptors), and
 * submits transfers whose bytes b10d moves between nodes.
 *
 * Contract, in short:
 *  - Every call returns a b10_status_t. B10_OK is success; every other value
 *    has a name and a sentence (b10_status_name(), b10_status_str()) and an
 *    action class (b10_status_action()) saying what the caller should do.
 *  - A transfer that ends in B10_OK has landed: every destination byte is in
 *    the remote rank's memory. Anything else is a failure with a reason.
 *  - Parameter structs begin with a field_mask: set the bit of each optional
 *    field you fill in; fields whose bit is clear take their default. This lets
 *    the structs grow without breaking callers.
 *  - Output arguments end in _p and are written only on success.
 *  - A connection may be used from several threads; its calls serialise on an
 *    internal lock, and b10_xfer_wait() from one thread does not block
 *    submissions from another.
 *  - The library never prints. Give it a log callback if you want its notes.
 *  - A connection outlives a restart of its daemon. When the daemon goes
 *    (its socket ends and its process ended), what was in flight fails
 *    B10_ERR_DAEMON_EXITED: that daemon no longer reads or writes this
 *    rank's memory, so a READ's local spans and a WRITE's sources are the
 *    caller's again. A WRITE's destination is another daemon's: it may
 *    still scatter chunks it already received; it fails the transfer
 *    (B10_ERR_PEER_LOST at the target's end) and quarantines what a late
 *    copy could still touch. When the socket ends but the daemon's process
 *    does not end within 3 s (it dropped this rank) or cannot be watched
 *    (socket activation, another pid namespace), what was in flight fails
 *    B10_ERR_DAEMON_LOST instead, which claims nothing about the bytes.
 *    So does a submit the daemon did not answer within the request timeout
 *    (a stopped daemon may still read and run it), with everything else in
 *    flight: libb10 closes the connection behind it, so that the daemon
 *    fails what it reads of it later instead of running it unheard.
 *    Either way the next call on the connection, or
 *    b10_conn_progress(), connects again to the same socket path, registers
 *    every region again and reloads every descriptor loaded, so that the
 *    handles stay valid and the next transfer works as before. A descriptor
 *    the daemon refuses then (sealed under a cluster key it no longer holds,
 *    after a rotation) is not loaded: a transfer to that rank is refused
 *    B10_ERR_UNKNOWN_AGENT saying so; load a fresh one of it. Each attempt
 *    is bounded (the request timeout); while the daemon is away the calls
 *    return B10_ERR_DAEMON_EXITED with the reason in b10_conn_detail().
 *    A refusal that cannot pass (B10_ERR_VERSION, B10_ERR_PERMISSION: the
 *    name taken by another user's rank meanwhile, B10_ERR_UNAUTHENTICATED,
 *    B10_ERR_INVALID_ARG, B10_ERR_UNSUPPORTED) ends the connection with
 *    that status instead of retrying. A remote rank that still holds this
 *    rank's descriptor reaches this rank only while its user holds the
 *    name: whatever it sends another user's rank under it is refused
 *    (B10_ERR_UNKNOWN_AGENT).
 */
#ifndef B10_B10_H
#define B10_B10_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define B10_API_VERSION 1

/*
 * The one status type of b10, end to end: libb10, the daemon and the wire
 * (proto/b10.proto mirrors these values; a unit test holds them equal).
 * Grouped by what the caller must do, with the action in the third column:
 *   NONE    success or still running
 *   FIX     the request itself is wrong: fix it, retrying as is fails again
 *   RETRY   a request-scoped failure: the same request may succeed later
 *   PEER    the remote side failed: reload the remote agent, then retry
 *   REOPEN  the daemon connection is unusable: close it and open a new one;
 *           after B10_ERR_DAEMON_EXITED libb10 reopens it itself, and
 *           after a transfer's B10_ERR_DAEMON_LOST whose daemon closed the
 *           connection (the connection then says B10_ERR_DAEMON_EXITED
 *           until it is back)
 */
#define B10_STATUS_MAP(X)                                                                        \
    X(OK,                  0, NONE,   "success")                                                 \
    X(IN_PROGRESS,         1, NONE,   "in progress")                                             \
    X(ERR_INVALID_ARG,    10, FIX,    "invalid argument")                                        \
    X(ERR_NOT_REGISTERED, 11, FIX,    "local span outside this rank's registered memory")        \
    X(ERR_REMOTE_REJECTED,12, FIX,    "remote span outside the remote rank's registered memory") \
    X(ERR_UNKNOWN_AGENT,  13, FIX,    "remote agent not loaded or unknown to its daemon")        \
    X(ERR_TOO_LARGE,      14, FIX,    "request exceeds a configured limit")                      \
    X(ERR_UNSUPPORTED,    15, FIX,    "operation or memory kind not supported by this daemon")   \
    X(ERR_EXISTS,         16, FIX,    "name or region already registered")                       \
    X(ERR_NOT_FOUND,      17, FIX,    "no such transfer, region or agent")                       \
    X(ERR_PERMISSION,     18, FIX,    "not permitted: another user's name or memory, or operators only") \
    X(ERR_UNAUTHENTICATED,19, FIX,    "not authenticated under a cluster key this daemon holds") \
    X(ERR_NOT_POPULATED,  20, FIX,    "the rank's memory has holes: pages the daemon would have to allocate (write to the memory first)") \
    X(ERR_DEADLINE,       30, RETRY,  "transfer deadline expired")                               \
    X(ERR_CANCELLED,      31, RETRY,  "transfer cancelled")                                      \
    X(ERR_STAGING_EXHAUSTED,32,RETRY, "staging exhausted")                                       \
    X(ERR_TAG_COLLISION,  33, RETRY,  "tag collision")                                           \
    X(ERR_BUSY,           34, RETRY,  "too many transfers in flight")                            \
    X(ERR_DRAINING,       35, RETRY,  "daemon is draining and admits no new work")               \
    X(ERR_CLIENT_GONE,    36, RETRY,  "a rank taking part in the transfer disconnected")         \
    X(ERR_UNSETTLED,      37, RETRY,  "failed, and a copy into the destination may still write it") \
    X(ERR_DATA_CORRUPT,   38, RETRY,  "a chunk's bytes changed on the way: its checksum did not match") \
    X(ERR_PEER_UNREACHABLE,50,PEER,   "remote daemon unreachable")                               \
    X(ERR_PEER_LOST,      51, PEER,   "remote daemon lost during the transfer")                  \
    X(ERR_PEER_PROTOCOL,  52, PEER,   "remote daemon violated the protocol")                     \
    X(ERR_DAEMON_UNREACHABLE,70,REOPEN,"local b10d unreachable")                                 \
    X(ERR_DAEMON_LOST,    71, REOPEN, "connection to the local b10d lost: what was in flight may or may not land") \
    X(ERR_PROTOCOL,       72, REOPEN, "malformed or unexpected message on the daemon connection")\
    X(ERR_VERSION,        73, REOPEN, "client and daemon protocol versions differ")              \
    X(ERR_DAEMON_EXITED,  74, REOPEN, "the local b10d exited with this in flight: it no longer reads or writes this rank's memory") \
    X(ERR_NO_MEMORY,      90, RETRY,  "out of memory")                                           \
    X(ERR_IO,             91, RETRY,  "i/o error")                                               \
    X(ERR_INTERNAL,       92, RETRY,  "internal error")

typedef enum {
#define B10_STATUS_ENUM(name, value, action, text) B10_##name = value,
    B10_STATUS_MAP(B10_STATUS_ENUM)
#undef B10_STATUS_ENUM
} b10_status_t;

typedef enum {
    B10_ACTION_NONE,
    B10_ACTION_FIX,
    B10_ACTION_RETRY,
    B10_ACTION_PEER,
    B10_ACTION_REOPEN,
} b10_action_t;

/* "B10_ERR_DEADLINE"; "B10_UNKNOWN" for a value outside the map. */
const char *b10_status_name(b10_status_t status);
/* "transfer deadline expired"; "unknown status" for a value outside the map. */
const char *b10_status_str(b10_status_t status);
/* What the caller should do about it (see B10_STATUS_MAP). */
b10_action_t b10_status_action(b10_status_t status);

/* ---------------------------------------------------------------- connection */

typedef struct b10_conn b10_conn_t;
typedef struct b10_mem b10_mem_t;
typedef struct b10_xfer b10_xfer_t;

enum {
    B10_CONN_FIELD_SOCKET_PATH     = 1u << 0,
    B10_CONN_FIELD_LOG             = 1u << 1,
    B10_CONN_FIELD_REQUEST_TIMEOUT = 1u << 2,
};

#define B10_LOG_ERR     3
#define B10_LOG_WARNING 4
#define B10_LOG_INFO    6
#define B10_LOG_DEBUG   7

typedef struct {
    uint64_t field_mask;
    /*
     * Name of this rank as remote ranks will address it; unique on the node
     * (the daemon refuses a second connection with a name in use). The
     * first user to connect with a name holds it while the daemon runs:
     * ranks of that uid may take it again, others get B10_ERR_PERMISSION.
     * Required; 1..255 bytes of printable ASCII without spaces.
     */
    const char *agent_name;
    /* Default: $B10_SOCKET, else /run/b10d/b10d.sock. */
    const char *socket_path;
    /*
     * Called with a level (B10_LOG_*) and a line without newline, under the
     * connection's lock: it must not call back into the same connection.
     */
    void (*log_cb)(void *arg, int level, const char *line);
    void *log_arg;
    /* How long a request to the daemon may take. Default 30000 ms. An
     * unanswered submit fails B10_ERR_DAEMON_LOST and the connection is
     * opened anew (above); other requests fail B10_ERR_IO. */
    int request_timeout_ms;
} b10_conn_params_t;

/* Connect to the local b10d and say hello. */
b10_status_t b10_conn_open(const b10_conn_params_t *params, b10_conn_t **conn_p);

/*
 * Close the connection. The daemon fails this rank's transfers still in
 * flight (B10_ERR_CLIENT_GONE) and drops its registrations once no copy
 * touches them. Handles of the connection become invalid; NULL is accepted.
 */
void b10_conn_close(b10_conn_t *conn);

/*
 * A file descriptor that turns readable when the daemon has news (a transfer
 * finished). Poll it (poll, select or an epoll set of yours), then call
 * b10_conn_progress(). Owned by the connection: do not read or close it.
 * It is an epoll descriptor of libb10's own, the same for the connection's
 * life, whose set follows the daemon's restarts: it holds the socket, and
 * while the daemon is away a timer that turns readable when the next
 * reconnection is due. Once the connection failed for good it turns
 * readable once; the calls then return why.
 */
int b10_conn_fd(b10_conn_t *conn);

/*
 * Read and apply whatever the daemon has sent, without blocking; after the
 * daemon exited, try to connect again (bounded by the request timeout).
 */
b10_status_t b10_conn_progress(b10_conn_t *conn);

/*
 * The daemon's explanation of the last call on this connection that failed
 * ("" if it gave none), e.g. which span lay outside the registrations.
 * Valid until the next call on the connection from any thread.
 */
const char *b10_conn_detail(b10_conn_t *conn);

/* ---------------------------------------------------------------- memory */

typedef enum {
    B10_MEM_DRAM = 1, /* host memory: a memfd's mapping, or any memory of this process */
    /*
     * CUDA device memory. The device is found from the address. Each
     * allocation the region covers must be cudaMalloc memory (exported as a
     * cudaIpcMemHandle) or VMM memory created with
     * CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR (exported as a file
     * descriptor); a region may cover several allocations mapped side by
     * side, as PyTorch's expandable segments map them. Anything else is
     * refused with the reason, never copied through a slow path. libb10
     * loads the CUDA driver only when needed.
     */
    B10_MEM_VRAM = 2,
} b10_mem_kind_t;

enum {
    B10_MEM_FIELD_FD        = 1u << 0,
    B10_MEM_FIELD_FD_OFFSET = 1u << 1,
    B10_MEM_FIELD_FLAGS     = 1u << 2,
};

/* b10_mem_params_t.flags */
enum {
    /*
     * Any rank of this node may write into and read from the region, also
     * ranks of other users that this rank did not pair with. Without it a
     * rank of another uid reaches the region only as this rank granted it
     * (b10_agent_pair); ranks of this rank's own uid always
     * may, and ranks of other nodes as the daemon's --remote-access says.
     */
    B10_MEM_OPEN_TO_NODE = 1u << 0,
};

typedef struct {
    uint64_t field_mask;
    b10_mem_kind_t kind;  /* required */
    void *addr;           /* required: start of the region in this process */
    size_t length;        /* required: bytes, > 0 */
    /*
     * DRAM: the descriptor whose shared mapping holds [addr, addr+length),
     * and the file offset that corresponds to addr. The daemon maps it too,
     * so it must be a memfd sealed with F_SEAL_SHRINK (a file that shrank
     * under the daemon would fault its copies). Without FD, a region from
     * b10_dram_alloc() uses its memfd, which it remembers and sealed. Any
     * other host memory (malloc, numpy, torch CPU tensors, cudaHostAlloc)
     * the daemon reaches through this process's /proc/self/mem, which
     * libb10 opens and passes: no mapping is shared, every copy is a read
     * or write of that file (slower than a memfd's), and the daemon reaches
     * this process only while it lives. Deregister such memory before
     * freeing it: until then a transfer writes whatever is mapped at the
     * address, read-only pages too (the kernel's debugger access).
     *
     * Every page of a memfd a transfer touches must be one the file has
     * (written, or swapped out): a page never written (a hole: ftruncate
     * makes a file of them) or punched out again would be allocated by the
     * daemon, at its own cost, so the transfer fails B10_ERR_NOT_POPULATED
     * instead. Write the memory first (touch each page, MAP_POPULATE,
     * MADV_POPULATE_WRITE); fallocate alone may not do, for its pages stay
     * unwritten, which a daemon without userfaultfd cannot tell from holes.
     * b10_dram_alloc() writes them all. Process memory has no such rule:
     * the daemon's writes there fault pages in this process, at its cost.
     */
    int fd;
    uint64_t fd_offset;
    uint64_t flags;       /* B10_MEM_OPEN_TO_NODE; default none */
} b10_mem_params_t;

/*
 * Register [addr, addr+length) with the daemon so that transfers may read
 * it (as local spans) or write it (as remote spans of other ranks). The
 * daemon maps the memory itself; this process keeps using it as before.
 * The handle holds across a restart of the daemon, which libb10 gives the
 * region again: it keeps a duplicate of a DRAM region's memfd (the memory
 * lives while the handle does) and exports VRAM afresh. That duplicate is
 * one open file of this process per memfd-backed region, counted against
 * its RLIMIT_NOFILE like any other: past it, registering fails with the
 * errno's status and says so in b10_conn_detail().
 */
b10_status_t b10_mem_register(b10_conn_t *conn, const b10_mem_params_t *params,
                              b10_mem_t **mem_p);

/*
 * Deregister. The daemon answers once no copy goes through the region any
 * more, so that the memory may be reused on return. B10_ERR_UNSETTLED: a
 * copy of a failed transfer still ran through it at the daemon's
 * --settle-ms; the region is gone (the handle too), but that copy may
 * still write the memory: do not reuse it yet.
 */
b10_status_t b10_mem_deregister(b10_conn_t *conn, b10_mem_t *mem);

/*
 * Allocate length bytes of host memory that can be registered as DRAM: a
 * shared mapping of a memfd, every page of it written (zeros) before it
 * returns, at this process's cost: the daemon fills no hole of a rank's
 * memfd (see b10_mem_params_t.fd). Free with b10_dram_free().
 */
b10_status_t b10_dram_alloc(size_t length, void **addr_p);
void b10_dram_free(void *addr);

/* ---------------------------------------------------------------- agents */

/* One contiguous piece of memory, as an address of its owner's process. */
typedef struct {
    uint64_t addr;
    uint64_t length;
} b10_span_t;


/*
 * This rank's agent descriptor: opaque bytes naming this rank and how to
 * reach its node's b10d. Hand them to remote ranks (out of band), which pass
 * them to b10_agent_load(). The bytes stay valid until the connection closes.
 * A descriptor names the node by its daemon's stable name and stays good
 * across that daemon's restarts: remote ranks keep theirs. After a restart
 * this returns the new boot's descriptor (earlier bytes stay valid too).
 */
b10_status_t b10_agent_desc(b10_conn_t *conn, const void **desc_p, size_t *length_p);

/*
 * Learn a remote rank, to send to it or read from it. name must be the
 * agent name inside desc. Loading lets the remote rank do nothing to this
 * rank's memory: a rank of another user on this node (or, under the
 * daemon's --remote-access paired, of any node) reaches it only as
 * b10_agent_pair() grants; until then its requests fail with
 * B10_ERR_PERMISSION, naming the grant it lacks.
 */
b10_status_t b10_agent_load(b10_conn_t *conn, const char *name, const void *desc,
                            size_t length);

/* b10_agent_pair() grants */
enum {
    B10_GRANT_WRITE = 1u << 0,  /* WRITE into this rank's memory, NOTIFY it, CHECK its spans */
    B10_GRANT_READ = 1u << 1,   /* READ this rank's memory, CHECK its spans */
};

/*
 * Load a remote rank as b10_agent_load() does, and grant it what grants
 * says (B10_GRANT_*; 0 takes back what an earlier pairing granted). A
 * decode rank that a prefill rank of another tenant writes into grants it
 * B10_GRANT_WRITE; a prefill rank whose KV a decode rank pulls grants it
 * B10_GRANT_READ. Ranks of this rank's own uid, and remote ranks under the
 * default --remote-access any, need no grant. Reloaded with its grants
 * after the local daemon restarted.
 */
b10_status_t b10_agent_pair(b10_conn_t *conn, const char *name, const void *desc,
                            size_t length, uint32_t grants);

/*
 * Descriptors loaded are loaded again after the local daemon restarted,
 * which also makes the restarted daemon known to the remote ranks' nodes.
 */

/* Forget a remote rank; transfers to it that are in flight go on. */
b10_status_t b10_agent_invalidate(b10_conn_t *conn, const char *name);

/*
 * Would the remote rank accept transfers into these spans? B10_OK when every
 * span lies inside memory it registered, B10_ERR_REMOTE_REJECTED (with the
 * first span outside in b10_conn_detail()) when not; other statuses when the
 * question could not be answered. Asks the remote daemon; bounded by the
 * connection's request timeout.
 */
b10_status_t b10_agent_check(b10_conn_t *conn, const char *remote_agent, const b10_span_t *spans,
                             size_t count);

/* ---------------------------------------------------------------- sync messages */

#define B10_SYNC_MSG_MAX 65536   /* bytes of one sync message */

/*
 * Send a small message to a remote rank. It is delivered once, in order with
 * the other messages from this rank, to the remote rank's
 * b10_agent_notifications(). B10_OK means the local daemon accepted it.
 */
b10_status_t b10_agent_notify(b10_conn_t *conn, const char *remote_agent, const void *msg,
                              size_t length);

/* One message notified to this rank: who sent it and its bytes. */
typedef struct {
    char agent[256];            /* the sending rank's agent name */
    void *data;
    size_t length;
} b10_notification_t;

/*
 * Take the messages notified to this rank so far (without blocking), oldest
 * first. *list_p is NULL when there are none; free it with
 * b10_notifications_free(). A message that rode on a transfer
 * (B10_XFER_FIELD_SYNC) arrives only after that transfer landed here.
 */
b10_status_t b10_agent_notifications(b10_conn_t *conn, b10_notification_t **list_p,
                                     size_t *count_p);
void b10_notifications_free(b10_notification_t *list, size_t count);

/* ---------------------------------------------------------------- transfers */

typedef enum {
    B10_OP_WRITE = 1, /* local spans → remote spans */
    /*
     * remote spans → local spans: the remote daemon writes them back, with a
     * WRITE's guarantees; B10_OK means the bytes landed in local memory.
     */
    B10_OP_READ = 2,
} b10_op_t;

enum {
    B10_XFER_FIELD_DEADLINE = 1u << 0,
    B10_XFER_FIELD_SYNC     = 1u << 1,
    B10_XFER_FIELD_INDICES  = 1u << 2,
};

/*
 * A table of spans given by its shape rather than its rows: row k is
 * bases[k / per_base] + (k % per_base) * stride, length bytes long, and
 * there are nbases * per_base rows. A KV pool's list of blocks is one: a
 * base per layer's K or V region, a row per block (B10_XFER_FIELD_INDICES).
 */
typedef struct {
    const uint64_t *bases;
    size_t nbases;             /* at least 1 */
    size_t per_base;           /* at least 1 */
    uint64_t stride;
    uint64_t length;           /* not 0 */
} b10_span_grid_t;

typedef struct {
    uint64_t field_mask;
    b10_op_t op;               /* required */
    const b10_span_t *local;   /* required: spans in this rank's registered memory */
    const b10_span_t *remote;  /* required: spans in the remote rank's memory */
    size_t count;              /* required: entries in each list; local[i].length == remote[i].length */
    const char *remote_agent;  /* required: a loaded remote agent */
    /*
     * Milliseconds from submission. 0 (or the bit unset): the daemon's
     * default (--deadline-ms); above its --max-deadline-ms the submission
     * is refused B10_ERR_INVALID_ARG, never capped.
     */
    uint32_t deadline_ms;
    /*
     * A sync message (at most B10_SYNC_MSG_MAX bytes) for the remote rank,
     * delivered to its b10_agent_notifications() after the transfer's bytes
     * landed in its memory (WRITE) or were read from it (READ).
     */
    const void *sync_msg;
    size_t sync_length;
    /*
     * B10_XFER_FIELD_INDICES: local and remote are whole tables of
     * local_table_count and remote_table_count spans (a prepared list each),
     * and the transfer's count pairs are local[local_index[i]] →
     * remote[remote_index[i]]. libb10 picks the rows itself, each index
     * checked, on its one pass into the request: a caller holding 10^5
     * indices makes no copy of the spans first. An index outside its table
     * is refused B10_ERR_INVALID_ARG, naming it.
     */
    const int64_t *local_index;
    const int64_t *remote_index;
    size_t local_table_count;
    size_t remote_table_count;
    /*
     * B10_XFER_FIELD_INDICES, optional: a side whose grid is not NULL is
     * that grid, its table pointer and count unused (NULL and 0 are fine).
     * libb10 computes each picked row instead of reading it from a table the
     * size of the pool, which 10^5 random picks find out of the caches. With
     * both sides grids of fewer than 2^32 rows, a large request sends the
     * daemon the grids and a u32 index a pair each way instead of the spans
     * (where the daemon reads them), and the daemon computes the rows.
     */
    const b10_span_grid_t *local_grid;
    const b10_span_grid_t *remote_grid;
} b10_xfer_params_t;

/*
 * Submit a transfer. On B10_OK the daemon has accepted it and *xfer_p
 * tracks it; a request the daemon refuses outright returns its reason here
 * and creates no handle.
 */
b10_status_t b10_xfer_submit(b10_conn_t *conn, const b10_xfer_params_t *params,
                             b10_xfer_t **xfer_p);

/*
 * The transfer's state, without blocking: B10_IN_PROGRESS, B10_OK (landed),
 * or the reason it failed.
 */
b10_status_t b10_xfer_status(b10_xfer_t *xfer);

/*
 * Wait up to timeout_ms (-1: forever) for the transfer to finish. Returns
 * its final status, or B10_IN_PROGRESS if the wait timed out and the
 * transfer goes on: a timed-out wait is never mistaken for a failure.
 */
b10_status_t b10_xfer_wait(b10_xfer_t *xfer, int timeout_ms);

/*
 * Ask the daemon to cancel. The transfer then ends in B10_ERR_CANCELLED,
 * unless it finished first; wait for it as usual.
 */
b10_status_t b10_xfer_cancel(b10_xfer_t *xfer);

/* The daemon's explanation of a failure ("" while none), valid until release. */
const char *b10_xfer_detail(b10_xfer_t *xfer);

/* The daemon's id of the transfer, as b10ctl and the logs show it. */
uint64_t b10_xfer_id(b10_xfer_t *xfer);

/*
 * Forget the handle. A transfer still in progress goes on in the daemon;
 * its outcome is dropped. NULL is accepted.
 */
void b10_xfer_release(b10_xfer_t *xfer);

/* Which fields of a b10_xfer_times_t were written (0 in the others). */
enum {
    B10_XFER_TIMES_CLIENT = 1u << 0,   /* submit_ns, encoded_ns, sent_ns, replied_ns */
    B10_XFER_TIMES_DAEMON = 1u << 1,   /* received_ns .. ended_ns, bytes, spans */
    B10_XFER_TIMES_FIRST  = 1u << 2,   /* first_ns: at least one byte began to move */
};

/*
 * A transfer's timings, CLOCK_MONOTONIC nanoseconds. libb10 takes the
 * client's in this process; the daemon takes its own and sends them with
 * the transfer's end, so they tell when it moved bytes, not when the
 * caller next looked. Both clocks are one on a host (a time namespace
 * apart, only the differences within each group hold).
 */
typedef struct {
    uint64_t field_mask;       /* B10_XFER_TIMES_* of the fields written */
    uint64_t submit_ns;        /* b10_xfer_submit was called */
    uint64_t encoded_ns;       /* its request frame was built */
    uint64_t sent_ns;          /* ... and written whole to the daemon's socket */
    uint64_t replied_ns;       /* the daemon's acceptance was read */
    uint64_t received_ns;      /* the daemon had the request frame whole */
    uint64_t decoded_ns;       /* ... had decoded it, before any check */
    uint64_t accepted_ns;      /* ... had checked and planned it: the acceptance went out */
    uint64_t first_ns;         /* ... began moving its first bytes (copy, gather or read) */
    uint64_t ended_ns;         /* ... saw it over: every byte landed, or it failed and is quiet */
    uint64_t bytes;            /* bytes the transfer moves: the sum of its span lengths */
    uint64_t spans;            /* spans it was submitted with */
    uint64_t plan_ns;          /* of decoded_ns .. accepted_ns, the daemon's planning alone */
} b10_xfer_times_t;

/*
 * The timings of a transfer that is over, into *times_p: B10_OK;
 * B10_IN_PROGRESS (nothing written) while it runs. A transfer that ended
 * with its connection has no daemon timings (field_mask says so).
 */
b10_status_t b10_xfer_times(b10_xfer_t *xfer, b10_xfer_times_t *times_p);

#ifdef __cplusplus
}
#endif

#endif /* B10_B10_H */
