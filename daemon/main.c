/* main.c — b10d's entry: settings, the daemon, the loop. */
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "b10d.h"
#include "caps.h"
#include "metrics.h"
#include "names-file.h"
#include "nodeid.h"
#include "peer.h"

/* b10d --gen-key PATH: one fresh cluster key, for an operator to copy to every node. */
static int main_gen_key(const char *path)
{
    char err[512];
    uint64_t id;

    if (auth_init() != B10_OK) {
        fprintf(stderr, "b10d: libsodium could not start\n");
        return 1;
    }
    if (auth_key_generate(path, &id, err, sizeof(err)) != B10_OK) {
        fprintf(stderr, "b10d: %s\n", err);
        return 1;
    }
    printf("b10d: wrote cluster key %016" PRIx64 " to %s (mode 0600); every daemon of the cluster "
           "needs a copy\n", id, path);
    return 0;
}

/*
 * b10d --make-ca DIR, --issue-node-cert NAME: a small cluster's CA and its
 * nodes' certificates, for those who run no PKI of their own.
 */
static int main_certs(const struct config *cfg)
{
    char err[512];
    b10_status_t st;

    if (cfg->make_ca[0] != '\0') {
        unsigned days = cfg->cert_days != 0 ? cfg->cert_days : 3650;
        if ((st = nodeid_make_ca(cfg->make_ca, days, err, sizeof(err))) != B10_OK) {
            fprintf(stderr, "b10d: --make-ca: %s\n", err);
            return 1;
        }
        printf("b10d: wrote %s/ca.key (mode 0600) and %s/ca.crt, valid %u days; every daemon's "
               "--node-ca is ca.crt, ca.key stays with whoever issues certificates\n",
               cfg->make_ca, cfg->make_ca, days);
    }
    if (cfg->issue_name[0] != '\0') {
        unsigned days = cfg->cert_days != 0 ? cfg->cert_days : 365;
        if ((st = nodeid_issue(cfg->ca_cert, cfg->ca_key, cfg->issue_name, cfg->cert_out, -300,
                               (int64_t)days * 86400, err, sizeof(err))) != B10_OK) {
            fprintf(stderr, "b10d: --issue-node-cert: %s\n", err);
            return 1;
        }
        printf("b10d: wrote %s/%s.key (mode 0600) and %s/%s.crt, valid %u days, for the daemon "
               "named %s\n", cfg->cert_out, cfg->issue_name, cfg->cert_out, cfg->issue_name, days,
               cfg->issue_name);
    }
    return 0;
}

static uint64_t main_monotonic_ms(struct b10d *d)
{
    return uv_hrtime() / 1000000u;
}

/*
 * b10d --check-config: the options were checked by config_parse; the keys
 * are loaded by the very code the start runs (peer_start), so that a key
 * that would stop the start stops the check with the same message. Then
 * the effective values. 0: it would start; 1: a key, the metrics address or
 * the runtime folder stops it.
 */
static int main_check_config(struct b10d *d)
{
    char path[512] = "";
    uint64_t id = 0;

    list_init(&d->peers);
    d->loop = uv_default_loop();
    d->now_ms = main_monotonic_ms;
    bool ok = peer_start(d, NULL) == B10_OK;     /* why in the log */
    peer_stop(d);
    peer_free_all(d);
    /* The metrics address binds, as the start will bind it (in use, not this host's, ...). */
    if (ok)
        ok = metrics_start(d, NULL) == B10_OK;
    uv_run(d->loop, UV_RUN_NOWAIT);
    /* The runtime folder as the start checks it; not its lock: this daemon may be running. */
    if (ok && d->cfg.runtime_dir[0] != '\0') {
        char why[512];
        int fd;
        ok = names_file_dir(d->cfg.runtime_dir, &fd, why, sizeof(why)) == B10_OK;
        if (ok)
            close(fd);
        else
            log_err("%s", why);
    }
    if (!ok)
        return 1;
    if (d->keys.count > 0 && d->keys.keys[0].kind == AUTH_KEY_CLUSTER) {
        /* The file peer_start read: the same order as there. */
        const char *creds = getenv("CREDENTIALS_DIRECTORY");
        if (d->cfg.cluster_key[0] != '\0')
            snprintf(path, sizeof(path), "%s", d->cfg.cluster_key);
        else if (creds != NULL && creds[0] != '\0')
            snprintf(path, sizeof(path), "%s/%s", creds, CONFIG_KEY_CREDENTIAL);
        else
            snprintf(path, sizeof(path), "%s", CONFIG_KEY_FILE_DEFAULT);
        id = d->keys.keys[0].id;
    }
    config_print(&d->cfg, path, id);
    return 0;
}

int main(int argc, char **argv)
{
    struct b10d d;

    memset(&d, 0, sizeof(d));
    config_defaults(&d.cfg);
    if (config_parse(&d.cfg, argc, argv) != B10_OK)
        return 2;
    if (d.cfg.info_only)
        return 0;
    if (d.cfg.gen_key[0] != '\0')
        return main_gen_key(d.cfg.gen_key);
    if (d.cfg.make_ca[0] != '\0' || d.cfg.issue_name[0] != '\0')
        return main_certs(&d.cfg);
    log_setup(d.cfg.log_level, d.cfg.name);
    if (d.cfg.check_only)
        return main_check_config(&d);
    /* Before any thread starts: each inherits its creator's capabilities. */
    caps_settle();
    /*
     * The loop handles requests of megabytes back to back (82k spans are
     * 2.6 MB of tables, decoded, checked and planned in as much again).
     * glibc maps such buffers fresh, or takes them from the heap and trims
     * the heap again once twice the largest lies free: either way the next
     * request faults every page in anew, which cost as much as the planning.
     * Keep them on the heap (up to glibc's 32 MiB cap on this threshold),
     * and keep up to 256 MiB of freed heap for the next request.
     */
    if (mallopt(M_MMAP_THRESHOLD, 32 << 20) != 1 || mallopt(M_TRIM_THRESHOLD, 256 << 20) != 1)
        log_warning("mallopt refused the heap thresholds: large requests fault their buffers in");
    d.loop = uv_default_loop();
    /* Before the start, which nothing in them needs started: a bad value stops it first. */
    if (b10d_test_hooks(&d) != B10_OK)
        return 1;
    if (b10d_start(&d) != B10_OK) {
        b10d_stop(&d);
        return 1;
    }
    uv_run(d.loop, UV_RUN_DEFAULT);
    b10d_stop(&d);
    log_info("stopped");
    return 0;
}
