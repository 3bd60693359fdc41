/* main.c — b10d's entry: settings, the daemon, the loop. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b10d.h"

int main(int argc, char **argv)
{
    struct b10d d;

    memset(&d, 0, sizeof(d));
    /*
     * The loop handles requests of megabytes (82k spans are 2.6 MB of
     * tables, decoded, planned and sorted in as much again) back to back.
     * glibc would map each such buffer fresh and unmap it when freed, and
     * the page faults of touching it again cost as much as the planning:
     * keep them on the heap, and keep the freed heap for the next request.
     */
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    config_defaults(&d.cfg);
    int rc = config_parse(&d.cfg, argc, argv);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    log_setup(d.cfg.log_level, d.cfg.name);
    d.loop = uv_default_loop();

    if (b10d_start(&d) != 0) {
        b10d_stop(&d);
        return 1;
    }
    uv_run(d.loop, UV_RUN_DEFAULT);
    b10d_stop(&d);
    log_info("stopped");
    return 0;
}
