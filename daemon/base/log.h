/*
 * log.h — the daemon's log, to stderr as its reader wants it: under systemd
 * (stderr is the journal stream) native journal entries, which carry fields
 * to filter by (TRANSFER=, PEER=, STATUS=, MESSAGE_ID=); on a terminal plain
 * "name: level: message" lines; elsewhere (a pipe, a file) lines with "<N>"
 * priority prefixes. The level is checked before formatting.
 */
#ifndef B10D_LOG_H
#define B10D_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "b10/b10.h"

/* The most fields one entry carries besides its message, priority and identifier. */
#define LOG_MAX_FIELDS 8
/*
 * The MESSAGE_ID of a transfer's failure (journalctl MESSAGE_ID=...): one
 * entry for each, from the failure funnel, with TRANSFER, PEER and STATUS.
 */
#define LOG_MESSAGE_ID_XFER_FAILED "MESSAGE_ID=9b3d6a51c2f84e0a8f0b1d2c3e4f5a61"
#define LOG_MESSAGE_ID_XFER_LANDED "MESSAGE_ID=5d1e7c2a9f304b6e8a2c4d6f8b0e1a73"

enum log_level {
    LOG_LEVEL_ERR = 3,
    LOG_LEVEL_WARNING = 4,
    LOG_LEVEL_NOTICE = 5,
    LOG_LEVEL_INFO = 6,
    LOG_LEVEL_DEBUG = 7,
};

/* The one process-wide setting of the log: level and the name on each line. */
extern int log_max_level;

void log_setup(int max_level, const char *name);
/* A level's word (err, warning, notice, info, debug; any case) into *level_p. */
b10_status_t log_level_parse(const char *word, int *level_p);
void log_write(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line with journal fields ("KEY=value"): the other sinks show the message alone. */
void log_write_fields(int level, const char *const *fields, size_t nfields, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define log_fields_at(level, fields, nfields, ...)                  \
    do {                                                            \
        if ((level) <= log_max_level)                               \
            log_write_fields((level), (fields), (nfields), __VA_ARGS__); \
    } while (0)

#define log_at(level, ...)                        \
    do {                                          \
        if ((level) <= log_max_level)             \
            log_write((level), __VA_ARGS__);      \
    } while (0)

#define log_err(...)     log_at(LOG_LEVEL_ERR, __VA_ARGS__)
#define log_warning(...) log_at(LOG_LEVEL_WARNING, __VA_ARGS__)
#define log_notice(...)  log_at(LOG_LEVEL_NOTICE, __VA_ARGS__)
#define log_info(...)    log_at(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...)   log_at(LOG_LEVEL_DEBUG, __VA_ARGS__)

#endif
