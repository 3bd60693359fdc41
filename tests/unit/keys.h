/*
 * keys.h — cluster keys for the unit tests, made as an operator makes them
 * (b10d --generate-key: auth_key_generate into a file) and read as a daemon
 * reads them (auth_key_load), in a folder of the test's own.
 */
#ifndef B10_TEST_KEYS_H
#define B10_TEST_KEYS_H

#include <stdio.h>
#include <stdlib.h>

#include "auth.h"

static char keys_dir[64];

/* The folder, and libsodium: 0, or -1 (a group setup's failure). */
static inline int keys_setup(void)
{
    snprintf(keys_dir, sizeof(keys_dir), "/tmp/b10-test-keys.XXXXXX");
    if (mkdtemp(keys_dir) == NULL || auth_init() != 0)
        return -1;
    return 0;
}

static inline int keys_teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", keys_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A fresh cluster key, in the file name of the folder: 0, or -1 with the reason printed. */
static inline int keys_make(const char *name, struct auth_key *key)
{
    char path[128], err[256];
    uint64_t id;

    snprintf(path, sizeof(path), "%s/%s", keys_dir, name);
    if (auth_key_generate(path, &id, err, sizeof(err)) != 0 ||
        auth_key_load(path, key, err, sizeof(err)) != 0) {
        fprintf(stderr, "cannot make a key: %s\n", err);
        return -1;
    }
    if (key->id != id || key->kind != AUTH_KEY_CLUSTER) {
        fprintf(stderr, "key %s: loaded as another key\n", path);
        return -1;
    }
    return 0;
}

#endif
