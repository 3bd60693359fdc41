/*
 * session.h — one connected rank: its hello, registrations, remote agents
 * and the transfers it takes part in. Frames arrive from ipc.c decoded to
 * bytes; everything in them is checked here before use.
 */
#ifndef B10D_SESSION_H
#define B10D_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "b10d.h"
#include "arena.h"
#include "ipc.h"
#include "mem.h"

struct ipc_conn;
struct peer;
struct xfer;

struct remote_agent {
    struct list node;
    char name[256];
    struct peer *peer;
    /* A rank of this node: the uid that held its name when loaded (names.h). */
    bool uid_known;
    uid_t uid;
    bool reload_linked;             /* its reload asked for a link to its node (once a session) */
    uint32_t grants;                /* what the rank let it do to its memory (B10_GRANT_*, access.h) */
};

struct session {
    struct list node;               /* b10d.sessions */
    struct b10d *d;
    struct ipc_conn *conn;
    bool hello_done;
    bool admin;                     /* a b10ctl connection (an admin request, no Hello) */
    bool admin_counted;             /* ... of a non-operator: in b10d.admin_connections */
    struct session_reg *reg;        /* a registration being opened off the loop */
    struct session_ahead *ahead;    /* a submit of many spans being planned off the loop */
    char agent[256];
    pid_t pid;
    uid_t uid;
    gid_t gid;
    struct mem_table mem;
    struct list agents;             /* struct remote_agent */
    uint32_t nagents;
    struct list xfers;              /* sending transfers it submitted, in flight */
    uint32_t nxfers;
    struct list targets;            /* receiving transfers writing into its memory */
    struct list locals;             /* local transfers of other ranks through its memory */
    struct list asks;               /* struct ask.session_node: questions to remote daemons */
    struct list deregs;             /* deregistrations waiting for copies through their region */
    size_t notice_reserved;         /* bytes of sync messages promised to landing transfers */
    struct arena arena;             /* where its large requests' span tables lie (arena.h) */
};

/* The client socket's hooks (ipc.h): a connection opens a session, and its frames go to it. */
extern const struct ipc_hooks session_ipc_hooks;
/* What the transfer engine asks of ranks (rank.h), installed in struct b10d at start. */
extern const struct rank_ops session_rank_ops;

/* The daemon's own news for the client: a transfer it submitted finished. */
void session_xfer_done(struct session *s, const struct xfer *x);

/* Answer request seq later (an ask finished). */
void session_answer(struct session *s, uint64_t seq, b10_status_t status, const char *detail);
/* A message for this rank from another (Notify, or a transfer's sync message). */
void session_notice(struct session *s, const char *from, const uint8_t *data, size_t length);
/*
 * Room for a notice of length bytes among the rank's queued and promised
 * ones (--max-notice-bytes)? A transfer that will deliver one reserves it
 * when admitted and releases it when it lands (just before delivering) or fails.
 */
bool session_notice_room(struct session *s, size_t length);
void session_notice_reserve(struct session *s, size_t length);
void session_notice_release(struct session *s, size_t length);
/* The remote agent this rank loaded under name, or NULL. */
struct remote_agent *session_agent(struct session *s, const char *name);
/*
 * The remote agent to send to: loaded, and (a rank of this node) its name
 * still held by the uid that held it at the load. B10_OK and *agent_p, or
 * B10_ERR_UNKNOWN_AGENT and why.
 */
b10_status_t session_agent_use(struct session *s, const char *name, struct remote_agent **agent_p,
                               char *detail, size_t detail_len);

/* The session of a local agent name, or NULL. */
struct session *session_find(struct b10d *d, const char *agent);

#endif
