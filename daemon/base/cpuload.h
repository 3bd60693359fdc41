/*
 * cpuload.h — is this host's CPU oversubscribed right now?
 *
 * Spinning on a UCX worker buys latency with a core; when more threads want
 * to run than the host has CPUs, the spin takes that core from the copy
 * threads, the other daemon's lanes or the inference engine, and every one
 * of them goes slower. The lanes and the loop ask this before they spin.
 */
#ifndef B10D_CPULOAD_H
#define B10D_CPULOAD_H

#include <stdbool.h>

/*
 * True when the kernel counts more runnable threads than online CPUs
 * (/proc/loadavg), looked at most every 10 ms per thread; false when that
 * cannot be read.
 */
bool cpuload_oversubscribed(void);

#endif
