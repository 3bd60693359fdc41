/*
 * log.h — the daemon's log: stderr lines with "<N>" priority prefixes that
 * journald turns into priorities. The level is checked before formatting.
 */
#ifndef B10D_LOG_H
#define B10D_LOG_H

#include <stdarg.h>

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
int log_level_parse(const char *word);
void log_write(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

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
