/* log.c — see log.h. */
#include "log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <systemd/sd-journal.h>

int log_max_level = LOG_LEVEL_INFO;
static char log_name[64] = "b10d";

/* Where lines go: decided once, at log_setup, from what stderr is. */
static enum {
    LOG_TO_STREAM,      /* a pipe or a file: "<N>name: message", journald's stream format */
    LOG_TO_TERMINAL,    /* a person reads it: "name: level: message" */
    LOG_TO_JOURNAL,     /* stderr is journald's stream: native entries, with fields */
} log_sink = LOG_TO_STREAM;

/*
 * Is stderr the journal stream systemd connected (JOURNAL_STREAM is its
 * "dev:inode"), with journald there to take native entries? sd_journal_sendv
 * drops an entry without a word when its socket is missing (an inherited
 * JOURNAL_STREAM in a container): then the stream it is.
 */
static bool log_stderr_is_journal(void)
{
    const char *env = getenv("JOURNAL_STREAM");
    struct stat st;
    unsigned long long dev, ino;
    if (env == NULL || sscanf(env, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) != 0)
        return false;
    if ((unsigned long long)st.st_dev != dev || (unsigned long long)st.st_ino != ino)
        return false;
    return access("/run/systemd/journal/socket", W_OK) == 0;
}

void log_setup(int max_level, const char *name)
{
    log_max_level = max_level;
    if (name != NULL)
        snprintf(log_name, sizeof(log_name), "%s", name);
    log_sink = log_stderr_is_journal() ? LOG_TO_JOURNAL
               : isatty(STDERR_FILENO)  ? LOG_TO_TERMINAL
                                        : LOG_TO_STREAM;
}

static const char *log_level_word(int level)
{
    switch (level) {
    case LOG_LEVEL_ERR: return "error";
    case LOG_LEVEL_WARNING: return "warning";
    case LOG_LEVEL_NOTICE: return "notice";
    case LOG_LEVEL_INFO: return "info";
    default: return "debug";
    }
}

b10_status_t log_level_parse(const char *word, int *level_p)
{
    static const struct {
        const char *word;
        int level;
    } levels[] = {
        { "err", LOG_LEVEL_ERR },   { "error", LOG_LEVEL_ERR }, { "warning", LOG_LEVEL_WARNING },
        { "notice", LOG_LEVEL_NOTICE }, { "info", LOG_LEVEL_INFO }, { "debug", LOG_LEVEL_DEBUG },
    };
    for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
        if (strcasecmp(word, levels[i].word) == 0) {
            *level_p = levels[i].level;
            return B10_OK;
        }
    return B10_ERR_INVALID_ARG;
}

/* The line, to the sink; fields ("KEY=value", at most LOG_MAX_FIELDS) go to the journal only. */
static void log_emit(int level, const char *const *fields, size_t nfields, const char *line)
{
    if (log_sink == LOG_TO_JOURNAL) {
        char message[1100], priority[16], ident[80];
        struct iovec iov[3 + LOG_MAX_FIELDS];
        size_t n = 0;
        snprintf(message, sizeof(message), "MESSAGE=%s: %s", log_name, line);
        snprintf(priority, sizeof(priority), "PRIORITY=%d", level);
        snprintf(ident, sizeof(ident), "SYSLOG_IDENTIFIER=b10d");
        iov[n++] = (struct iovec){ message, strlen(message) };
        iov[n++] = (struct iovec){ priority, strlen(priority) };
        iov[n++] = (struct iovec){ ident, strlen(ident) };
        for (size_t i = 0; i < nfields && i < LOG_MAX_FIELDS; i++)
            iov[n++] = (struct iovec){ (void *)fields[i], strlen(fields[i]) };
        if (sd_journal_sendv(iov, (int)n) >= 0)
            return;
        /* The journal refused: the stream still carries the line. */
    }
    /* One fprintf per line: stderr is unbuffered and lines from threads must not interleave. */
    if (log_sink == LOG_TO_TERMINAL)
        fprintf(stderr, "%s: %s: %s\n", log_name, log_level_word(level), line);
    else
        fprintf(stderr, "<%d>%s: %s\n", level, log_name, line);
}

void log_write(int level, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    log_emit(level, NULL, 0, line);
}

void log_write_fields(int level, const char *const *fields, size_t nfields, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    log_emit(level, fields, nfields, line);
}
