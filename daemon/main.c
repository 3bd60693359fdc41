/* main.c — b10d's entry: settings, the daemon, the loop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b10d.h"

int main(int argc, char **argv)
{
    struct b10d d;

    memset(&d, 0, sizeof(d));
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
