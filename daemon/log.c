/* log.c — see log.h. */
#include "log.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

int log_max_level = LOG_LEVEL_INFO;
static char log_name[64] = "b10d";

void log_setup(int max_level, const char *name)
{
    log_max_level = max_level;
    if (name != NULL)
        snprintf(log_name, sizeof(log_name), "%s", name);
}

int log_level_parse(const char *word)
{
    static const struct {
        const char *word;
        int level;
    } levels[] = {
        { "err", LOG_LEVEL_ERR },   { "error", LOG_LEVEL_ERR }, { "warning", LOG_LEVEL_WARNING },
        { "notice", LOG_LEVEL_NOTICE }, { "info", LOG_LEVEL_INFO }, { "debug", LOG_LEVEL_DEBUG },
    };
    for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
        if (strcasecmp(word, levels[i].word) == 0)
            return levels[i].level;
    return -1;
}

void log_write(int level, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    /* One fprintf per line: stderr is unbuffered and lines from threads must not interleave. */
    fprintf(stderr, "<%d>%s: %s\n", level, log_name, line);
}
