/* cpuload.c — see cpuload.h. */
#include "cpuload.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define CPULOAD_REFRESH_NS 10000000ull

/* Field 4 of /proc/loadavg: "runnable/total" scheduling entities, the asker among them. */
static bool cpuload_read(void)
{
    char buf[128];
    int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    double l1, l5, l15;
    unsigned long running, total;
    if (sscanf(buf, "%lf %lf %lf %lu/%lu", &l1, &l5, &l15, &running, &total) != 5)
        return false;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus > 0 && running > (unsigned long)cpus;
}

bool cpuload_oversubscribed(void)
{
    static __thread unsigned long long next_ns;
    static __thread bool over;
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    unsigned long long ns = (unsigned long long)now.tv_sec * 1000000000ull + (unsigned long long)now.tv_nsec;
    if (ns >= next_ns) {
        over = cpuload_read();
        next_ns = ns + CPULOAD_REFRESH_NS;
    }
    return over;
}
