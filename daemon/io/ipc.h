/*
 * ipc.h — the client socket: a Unix stream listener, and one connection per
 * rank read with recvmsg (frames plus the descriptors that ride on them)
 * and written through a bounded queue.
 */
#ifndef B10D_IPC_H
#define B10D_IPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "b10d.h"

struct ipc;
struct ipc_conn;

/*
 * b10ctl connections of users who are no operators, all together and of
 * one uid; past either admin.c answers a new one B10_ERR_BUSY. Operators'
 * are not counted. The socket's cap on connections counts them.
 */
#define IPC_MAX_ADMIN 32u
#define IPC_MAX_ADMIN_PER_UID 8u

/*
 * What a connection carries goes up to the room that serves it (session.c)
 * through hooks b10d.c installs: this room reads frames and descriptors and
 * bounds connections, and does not know what the frames say.
 */
struct ipc_hooks {
    /* A connection from pid, uid, gid was accepted: its user, or NULL to refuse it. */
    void *(*open)(struct b10d *d, struct ipc_conn *conn, pid_t pid, uid_t uid, gid_t gid);
    /* The connection is gone: the user's last call. */
    void (*close)(void *user);
    /*
     * One frame. B10_OK: feed the next; B10_IN_PROGRESS: feed no more until
     * ipc_conn_resume() (work off the loop it must wait for); any other
     * status: drop the connection (what was queued for it goes out first).
     */
    b10_status_t (*on_frame)(void *user, const uint8_t *buf, size_t length);
    /* Has it said who it is? Until then it counts among the fresh connections. */
    bool (*introduced)(const void *user);
    /* Its name in log lines, "?" until it said one. */
    const char *(*name)(const void *user);
};

/*
 * Listen on a Unix socket at path. Why not is logged here, with the path;
 * the status says what to do (B10_ERR_EXISTS: a running daemon holds it, or
 * the path is not a socket; B10_ERR_PERMISSION; as errno says otherwise).
 */
b10_status_t ipc_create(struct b10d *d, const char *path, const struct ipc_hooks *hooks,
                        struct ipc **ipc_p);
/* Listen on a socket systemd passed; it is left in place at the end. */
b10_status_t ipc_adopt(struct b10d *d, int fd, const struct ipc_hooks *hooks, struct ipc **ipc_p);
/* The socket's path, as bound. */
const char *ipc_path(const struct ipc *ipc);
/* Was gid among the connecting process's groups? */
bool ipc_conn_in_group(struct ipc_conn *conn, gid_t gid);
/* Stop listening, drop every connection (their sessions are destroyed). */
void ipc_destroy(struct ipc *ipc);

/*
 * Queue a frame to the client; takes ownership of frame. B10_ERR_CLIENT_GONE
 * when the connection is closing, is being dropped (it let too much queue up
 * unread, said in the log) or its socket failed: the frame is freed unsent.
 */
b10_status_t ipc_send(struct ipc_conn *conn, uint8_t *frame, size_t length);
/* The same for a notice, whose bytes ipc_notice_bytes() counts until they are written. */
b10_status_t ipc_send_notice(struct ipc_conn *conn, uint8_t *frame, size_t length);
size_t ipc_notice_bytes(const struct ipc_conn *conn);
/* The oldest descriptor the client sent and no frame took yet, or -1; the caller owns it. */
int ipc_conn_take_fd(struct ipc_conn *conn);
/*
 * The frame being fed made bytes of work beyond its own bytes (a submit
 * whose spans lie in the span arena: the tables it reads and plans): they
 * count in the connection's budget for this loop turn, so that the turn
 * feeds it fewer frames, and none more once the budget is spent.
 */
void ipc_conn_charge(struct ipc_conn *conn, size_t bytes);
/*
 * The user paused its connection (on_frame returned 1: work off
 * the loop it must wait for); feed its frames again from the next turn on.
 */
void ipc_conn_resume(struct ipc_conn *conn);
/* Drop the connection after what is queued has been written (bounded). */
void ipc_conn_close(struct ipc_conn *conn);

#endif
