/* names.c — see names.h. */
#include "names.h"

#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "list.h"

#define NAMES_BUCKETS 4096u     /* a power of two; chains stay short at NAMES_MAX */
#define NAMES_NAME_MAX 256

struct name_entry {
    struct name_entry *next;    /* in its bucket */
    struct list idle_node;      /* names.idle while no rank is connected under it */
    uid_t uid;
    bool connected;
    char name[NAMES_NAME_MAX];
};

struct uid_count {
    uid_t uid;
    uint32_t count;
};

struct names {
    uint8_t key[16];
    struct name_entry *buckets[NAMES_BUCKETS];
    struct list idle;           /* oldest release first */
    uint32_t count;
    struct uid_count *uids;     /* names held per uid: few distinct uids on a node */
    uint32_t nuids, uids_cap;
};

struct names *names_create(void)
{
    struct names *n = calloc(1, sizeof(*n));
    if (n == NULL)
        return NULL;
    auth_random(n->key, sizeof(n->key));
    list_init(&n->idle);
    return n;
}

void names_destroy(struct names *n)
{
    if (n == NULL)
        return;
    for (uint32_t b = 0; b < NAMES_BUCKETS; b++) {
        struct name_entry *e = n->buckets[b];
        while (e != NULL) {
            struct name_entry *next = e->next;
            free(e);
            e = next;
        }
    }
    free(n->uids);
    free(n);
}

static struct name_entry **names_slot(const struct names *n, const char *name)
{
    uint64_t h = auth_shorthash(n->key, name, strlen(name));
    struct name_entry **p = (struct name_entry **)&n->buckets[h & (NAMES_BUCKETS - 1)];
    while (*p != NULL && strcmp((*p)->name, name) != 0)
        p = &(*p)->next;
    return p;
}

static struct uid_count *names_uid(struct names *n, uid_t uid, bool make)
{
    for (uint32_t i = 0; i < n->nuids; i++)
        if (n->uids[i].uid == uid)
            return &n->uids[i];
    if (!make)
        return NULL;
    if (n->nuids == n->uids_cap) {
        uint32_t cap = n->uids_cap ? 2 * n->uids_cap : 16;
        struct uid_count *uids = realloc(n->uids, cap * sizeof(*uids));
        if (uids == NULL)
            return NULL;
        n->uids = uids;
        n->uids_cap = cap;
    }
    n->uids[n->nuids] = (struct uid_count){ uid, 0 };
    return &n->uids[n->nuids++];
}

static void names_forget(struct names *n, struct name_entry *e)
{
    struct name_entry **p = names_slot(n, e->name);
    struct uid_count *u = names_uid(n, e->uid, false);

    *p = e->next;
    list_remove(&e->idle_node);
    if (u != NULL && u->count > 0)
        u->count--;
    n->count--;
    free(e);
}

/*
 * The idle claim to forget for one more of uid's: its own oldest; when only
 * the daemon's bound is reached and uid has none idle, anyone's oldest.
 */
static struct name_entry *names_victim(struct names *n, uid_t uid, bool uid_full)
{
    struct list *pos;
    for (pos = n->idle.next; pos != &n->idle; pos = pos->next) {
        struct name_entry *e = list_entry(pos, struct name_entry, idle_node);
        if (e->uid == uid)
            return e;
    }
    return uid_full || list_empty(&n->idle) ? NULL
                                            : list_entry(n->idle.next, struct name_entry, idle_node);
}

b10_status_t names_claim(struct names *n, const char *name, uid_t uid, uid_t *holder_p)
{
    size_t len = strnlen(name, NAMES_NAME_MAX);
    struct name_entry **p, *e;

    if (len == 0 || len >= NAMES_NAME_MAX)
        return B10_ERR_INVALID_ARG;
    p = names_slot(n, name);
    if ((e = *p) != NULL) {
        if (e->uid != uid) {
            *holder_p = e->uid;
            return B10_ERR_PERMISSION;
        }
        if (e->connected)
            return B10_ERR_EXISTS;
        e->connected = true;
        list_remove(&e->idle_node);
        return B10_OK;
    }
    struct uid_count *u = names_uid(n, uid, true);
    if (u == NULL)
        return B10_ERR_NO_MEMORY;
    bool uid_full = u->count >= NAMES_PER_UID;
    if (uid_full || n->count >= NAMES_MAX) {
        struct name_entry *victim = names_victim(n, uid, uid_full);
        if (victim == NULL)
            return B10_ERR_TOO_LARGE;
        names_forget(n, victim);
        p = names_slot(n, name);      /* the chain may have changed */
        u = names_uid(n, uid, false);
    }
    if ((e = calloc(1, sizeof(*e))) == NULL)
        return B10_ERR_NO_MEMORY;
    memcpy(e->name, name, len + 1);
    e->uid = uid;
    e->connected = true;
    list_init(&e->idle_node);
    *p = e;
    u->count++;
    n->count++;
    return B10_OK;
}

void names_release(struct names *n, const char *name)
{
    struct name_entry *e = *names_slot(n, name);
    if (e == NULL || !e->connected)
        return;
    e->connected = false;
    list_insert_tail(&n->idle, &e->idle_node);
}

bool names_holder(const struct names *n, const char *name, uid_t *uid_p)
{
    const struct name_entry *e = *names_slot(n, name);
    if (e == NULL)
        return false;
    *uid_p = e->uid;
    return true;
}

uint32_t names_count(const struct names *n)
{
    return n->count;
}
