/*
 * names-file.h — the agent names' claims, kept across the daemon's own
 * restarts in its runtime folder (--runtime-dir; under systemd the unit's
 * RuntimeDirectory=, which outlives a restart but not a stop).
 *
 * Why: a claim that lived only in memory went with the process. A user
 * who crashed the daemon (or whose crash came by itself) could say Hello
 * with another user's rank name to the restarted daemon before that rank's
 * libb10 reconnected, and the owner was refused B10_ERR_PERMISSION until
 * the next restart. With the claims kept, the new process refuses the
 * other user and gives the name back to its owner's rank.
 *
 * The file, <dir>/names, written whole to <dir>/names.tmp (0600, O_EXCL,
 * never through a link) and renamed over the last: a reader sees one
 * complete file or the one before. Little-endian:
 *
 *   "b10names"  u32 version (1)  u32 count  16 bytes boot id
 *   u64 written_ms (CLOCK_BOOTTIME, the clock of names.h)
 *   count records: u32 uid, u64 idle_ms (0: a rank was connected under
 *                  it), u8 length, that many bytes of name
 *   u64 XXH3-64 of everything before it (checksum.h), seeded
 *
 * It is read back as hostile: another process of the daemon's user, or a
 * bad disk, may have changed it. The folder must be the daemon's own and
 * not writable by group or others (else the start fails: a setting to
 * fix). A file that is not a regular file of the daemon's uid, is writable
 * by group or others, is larger than the table's bounds could make, or
 * does not decode (bounds, lengths, printable names, times not ahead of
 * the clock, the sum, each uid's and the daemon's bounds, no name twice)
 * is refused whole: logged at error, moved aside to names.refused, and the
 * daemon starts with no claims. Failing the start instead would turn a bad
 * file into a daemon that never serves any rank, which is worse than the
 * window it would close. A file of another boot of the machine (after a
 * reboot every rank is gone) is dropped quietly.
 *
 * Writes: the table tells of every change (names_on_change); at most one
 * write each NAMES_FILE_SYNC_MS, encoded on the loop (one walk of the
 * table: 35 us for 1,024 names, 25 ms at the bounds, 65,536 names of 255
 * bytes, measured on a loaded 2-core machine) and written on libuv's
 * thread pool, and once more at shutdown. A table that took longer than
 * 1 ms to encode is written no sooner than 100 times that after, so the
 * writes take at most 1% of the loop. A crash loses what changed since the
 * last write began: a claim made in the last 100 ms or so (seconds, for a
 * table near its bounds) is not known to the next process (its name is
 * free there, as before this file), and a rank that left in that time is
 * taken for one connected at the crash (its hold starts at the restart).
 * No fsync: the file matters only within one boot of the machine, and
 * within a boot the page cache is the file.
 */
#ifndef B10D_NAMES_FILE_H
#define B10D_NAMES_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "b10/b10.h"
#include "names.h"

#define NAMES_FILE_NAME "names"
#define NAMES_FILE_SYNC_MS 100
#define NAMES_FILE_HEAD 40                      /* magic, version, count, boot id, written_ms */
#define NAMES_FILE_RECORD_MIN 14                /* uid, idle_ms, length, one byte of name */
#define NAMES_FILE_TAIL 8
#define NAMES_FILE_MAX ((size_t)NAMES_FILE_HEAD + (size_t)NAMES_MAX * (13 + NAMES_NAME_MAX) + \
                        NAMES_FILE_TAIL)

struct b10d;
struct names_file;

/* A claim as the file holds it: name points into the decoded bytes (no NUL). */
struct names_record {
    const char *name;
    uint8_t len;
    uid_t uid;
    uint64_t idle_ms;           /* 0: a rank was connected under it when the file was written */
};

/* The file's bytes for the table as it is, written at now_ms. */
b10_status_t names_file_encode(const struct names *n, const uint8_t boot_id[16], uint64_t now_ms,
                               uint8_t **buf_p, size_t *len_p);
/*
 * Check every byte of a file read back and list its claims (*records_p, to
 * free; they point into buf). B10_ERR_NOT_FOUND: written in another boot.
 * B10_ERR_INVALID_ARG: refused, detail says why. B10_ERR_NO_MEMORY.
 */
b10_status_t names_file_decode(const uint8_t *buf, size_t len, const uint8_t boot_id[16],
                               uint64_t now_ms, struct names_record **records_p, uint32_t *count_p,
                               char *detail, size_t detail_len);
/*
 * Put the records back into an empty table (they are sorted by uid for
 * it): a claim whose rank was connected is idle from now (the table's
 * clock); those past the table's hold are forgotten (*expired_p). On
 * failure (B10_ERR_INVALID_ARG: a bound, a name twice; B10_ERR_NO_MEMORY)
 * the table is left empty and detail says why.
 */
b10_status_t names_file_restore(struct names *n, struct names_record *records, uint32_t count,
                                uint32_t *expired_p, char *detail, size_t detail_len);

/*
 * The runtime folder: a directory of the daemon's uid that group and others
 * cannot write. Its fd (O_CLOEXEC) in *fd_p; the start's and --check-config's
 * check. B10_ERR_INVALID_ARG or B10_ERR_IO with detail.
 */
b10_status_t names_file_dir(const char *path, int *fd_p, char *detail, size_t detail_len);
/*
 * Read <dir>/names, refusing what is not the daemon's own file (see above).
 * B10_ERR_NOT_FOUND: there is none.
 */
b10_status_t names_file_read(int dirfd, uint8_t **buf_p, size_t *len_p, char *detail,
                             size_t detail_len);
/* Write buf as <dir>/names, atomically. 0, or the errno of the step that failed. */
int names_file_write(int dirfd, const uint8_t *buf, size_t len);
/* This boot of the machine (/proc/sys/kernel/random/boot_id); zeros where unreadable. */
void names_file_boot_id(uint8_t id[16]);

/*
 * Start keeping d->names in d->cfg.runtime_dir: lock the folder (one
 * daemon a folder), load what the last run left, and write from now on.
 * *nf_p stays NULL without a folder (logged). Fails only for the folder.
 */
b10_status_t names_file_open(struct b10d *d, struct names_file **nf_p);
/* Write the table a last time and stop (NULL accepted). The loop runs for the last write. */
void names_file_close(struct names_file *nf);
/* Files written since open, for tests and b10ctl. */
uint64_t names_file_writes(const struct names_file *nf);

#endif
