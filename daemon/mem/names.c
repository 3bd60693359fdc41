/* names.c — see names.h. */
#include "names.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth.h"
#include "list.h"

#define NAMES_BUCKETS 4096u     /* a power of two; chains stay short at NAMES_MAX */

struct name_entry {
    struct name_entry *next;    /* in its bucket */
    struct list idle_node;      /* names.idle while no rank is connected under it */
    uint64_t idle_ms;           /* names.now_ms's time its last rank left; 0 while connected */
    uid_t uid;
    bool connected;
    uint8_t len;                /* of name: the walk of names-file.c needs no strlen */
    char name[NAMES_NAME_MAX + 1];
};

struct uid_count {
    uid_t uid;
    uint32_t count;             /* never 0: a uid that holds nothing has no entry */
};

struct names {
    uint8_t key[16];
    struct name_entry *buckets[NAMES_BUCKETS];
    struct list idle;           /* oldest release first: idle_ms never decreases along it */
    uint32_t count;
    /*
     * Names held per uid, sorted by uid: a lookup is a binary search, and a
     * restore (names-file.c gives the claims in uid order) only appends.
     */
    struct uid_count *uids;
    uint32_t nuids, uids_cap;
    uint64_t hold_ms;           /* 0: idle claims hold for the table's life */
    uint64_t (*now_ms)(void *arg);
    void *clock_arg;
    void (*changed)(void *arg);
    void *changed_arg;
};

static uint64_t names_boottime_ms(void *arg)
{
    struct timespec ts;
    (void)arg;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

struct names *names_create(void)
{
    struct names *n = calloc(1, sizeof(*n));
    if (n == NULL)
        return NULL;
    auth_random(n->key, sizeof(n->key));
    list_init(&n->idle);
    n->now_ms = names_boottime_ms;
    return n;
}

void names_clear(struct names *n)
{
    for (uint32_t b = 0; b < NAMES_BUCKETS; b++) {
        struct name_entry *e = n->buckets[b];
        while (e != NULL) {
            struct name_entry *next = e->next;
            free(e);
            e = next;
        }
        n->buckets[b] = NULL;
    }
    list_init(&n->idle);
    n->count = 0;
    n->nuids = 0;
}

void names_destroy(struct names *n)
{
    if (n == NULL)
        return;
    names_clear(n);
    free(n->uids);
    free(n);
}

void names_set_hold(struct names *n, uint64_t hold_ms)
{
    n->hold_ms = hold_ms;
}

void names_set_clock(struct names *n, uint64_t (*now_ms)(void *arg), void *arg)
{
    n->now_ms = now_ms;
    n->clock_arg = arg;
}

uint64_t names_now(const struct names *n)
{
    return n->now_ms(n->clock_arg);
}

void names_on_change(struct names *n, void (*changed)(void *arg), void *arg)
{
    n->changed = changed;
    n->changed_arg = arg;
}

static void names_changed(struct names *n)
{
    if (n->changed != NULL)
        n->changed(n->changed_arg);
}

static struct name_entry **names_slot_len(const struct names *n, const char *name, size_t len)
{
    uint64_t h = auth_shorthash(n->key, name, len);
    struct name_entry **p = (struct name_entry **)&n->buckets[h & (NAMES_BUCKETS - 1)];
    while (*p != NULL && (strncmp((*p)->name, name, len) != 0 || (*p)->name[len] != '\0'))
        p = &(*p)->next;
    return p;
}

static struct name_entry **names_slot(const struct names *n, const char *name)
{
    return names_slot_len(n, name, strlen(name));
}

/* Where uid's entry is, or would go to keep the array sorted. */
static uint32_t names_uid_at(const struct names *n, uid_t uid)
{
    uint32_t lo = 0, hi = n->nuids;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (n->uids[mid].uid < uid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static uint32_t names_uid_count(const struct names *n, uid_t uid)
{
    uint32_t i = names_uid_at(n, uid);
    return i < n->nuids && n->uids[i].uid == uid ? n->uids[i].count : 0;
}

/* One more name of uid; false without memory for a uid new to the table. */
static bool names_uid_add(struct names *n, uid_t uid)
{
    uint32_t i = names_uid_at(n, uid);
    if (i < n->nuids && n->uids[i].uid == uid) {
        n->uids[i].count++;
        return true;
    }
    if (n->nuids == n->uids_cap) {
        uint32_t cap = n->uids_cap ? 2 * n->uids_cap : 16;
        struct uid_count *uids = realloc(n->uids, cap * sizeof(*uids));
        if (uids == NULL)
            return false;
        n->uids = uids;
        n->uids_cap = cap;
    }
    memmove(&n->uids[i + 1], &n->uids[i], (n->nuids - i) * sizeof(*n->uids));
    n->uids[i] = (struct uid_count){ uid, 1 };
    n->nuids++;
    return true;
}

static void names_uid_drop(struct names *n, uid_t uid)
{
    uint32_t i = names_uid_at(n, uid);
    if (i >= n->nuids || n->uids[i].uid != uid)
        return;
    if (--n->uids[i].count == 0) {
        memmove(&n->uids[i], &n->uids[i + 1], (n->nuids - i - 1) * sizeof(*n->uids));
        n->nuids--;
    }
}

static void names_forget(struct names *n, struct name_entry *e)
{
    struct name_entry **p = names_slot_len(n, e->name, e->len);

    *p = e->next;
    list_remove(&e->idle_node);
    names_uid_drop(n, e->uid);
    n->count--;
    free(e);
    names_changed(n);
}

static bool names_expired(const struct names *n, const struct name_entry *e, uint64_t now)
{
    return !e->connected && n->hold_ms != 0 && now >= e->idle_ms && now - e->idle_ms >= n->hold_ms;
}

/* The idle list runs oldest first: the expired claims are at its head. */
void names_expire(struct names *n)
{
    uint64_t now = names_now(n);
    while (!list_empty(&n->idle)) {
        struct name_entry *e = list_entry(n->idle.next, struct name_entry, idle_node);
        if (!names_expired(n, e, now))
            break;
        names_forget(n, e);
    }
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

/* A new claim of uid, connected or (a restore) idle since idle_ms; the slot is where it goes. */
static b10_status_t names_add(struct names *n, struct name_entry **p, const char *name, size_t len,
                              uid_t uid, bool connected, uint64_t idle_ms)
{
    struct name_entry *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return B10_ERR_NO_MEMORY;
    if (!names_uid_add(n, uid)) {
        free(e);
        return B10_ERR_NO_MEMORY;
    }
    memcpy(e->name, name, len);
    e->name[len] = '\0';
    e->len = (uint8_t)len;
    e->uid = uid;
    e->connected = connected;
    e->idle_ms = connected ? 0 : idle_ms;
    list_init(&e->idle_node);
    if (!connected)
        list_insert_tail(&n->idle, &e->idle_node);
    *p = e;
    n->count++;
    names_changed(n);
    return B10_OK;
}

b10_status_t names_claim(struct names *n, const char *name, uid_t uid, uid_t *holder_p)
{
    size_t len = strnlen(name, NAMES_NAME_MAX + 1);
    struct name_entry **p, *e;

    if (len == 0 || len > NAMES_NAME_MAX)
        return B10_ERR_INVALID_ARG;
    names_expire(n);
    p = names_slot(n, name);
    if ((e = *p) != NULL) {
        if (e->uid != uid) {
            *holder_p = e->uid;
            return B10_ERR_PERMISSION;
        }
        if (e->connected)
            return B10_ERR_EXISTS;
        e->connected = true;
        e->idle_ms = 0;
        list_remove(&e->idle_node);
        names_changed(n);
        return B10_OK;
    }
    bool uid_full = names_uid_count(n, uid) >= NAMES_PER_UID;
    if (uid_full || n->count >= NAMES_MAX) {
        struct name_entry *victim = names_victim(n, uid, uid_full);
        if (victim == NULL)
            return B10_ERR_TOO_LARGE;
        names_forget(n, victim);
        p = names_slot(n, name);      /* the chain may have changed */
    }
    return names_add(n, p, name, len, uid, true, 0);
}

void names_release(struct names *n, const char *name)
{
    struct name_entry *e = *names_slot(n, name);
    if (e == NULL || !e->connected)
        return;
    uint64_t now = names_now(n);
    /* The list stays in order even if a test's clock stepped back. */
    if (!list_empty(&n->idle)) {
        const struct name_entry *last = list_entry(n->idle.prev, struct name_entry, idle_node);
        if (last->idle_ms > now)
            now = last->idle_ms;
    }
    e->connected = false;
    e->idle_ms = now;
    list_insert_tail(&n->idle, &e->idle_node);
    names_changed(n);
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

void names_walk(const struct names *n,
                void (*fn)(void *arg, const char *name, size_t len, uid_t uid, uint64_t idle_ms),
                void *arg)
{
    for (uint32_t b = 0; b < NAMES_BUCKETS; b++)
        for (const struct name_entry *e = n->buckets[b]; e != NULL; e = e->next)
            fn(arg, e->name, e->len, e->uid, e->connected ? 0 : e->idle_ms);
}

b10_status_t names_restore(struct names *n, const char *name, size_t len, uid_t uid,
                           uint64_t idle_ms)
{
    if (len == 0 || len > NAMES_NAME_MAX || memchr(name, '\0', len) != NULL)
        return B10_ERR_INVALID_ARG;
    if (n->count >= NAMES_MAX || names_uid_count(n, uid) >= NAMES_PER_UID)
        return B10_ERR_TOO_LARGE;
    struct name_entry **p = names_slot_len(n, name, len);
    if (*p != NULL)
        return B10_ERR_EXISTS;
    return names_add(n, p, name, len, uid, false, idle_ms);
}

static int names_by_idle(const void *a, const void *b)
{
    const struct name_entry *x = *(const struct name_entry *const *)a;
    const struct name_entry *y = *(const struct name_entry *const *)b;
    return x->idle_ms < y->idle_ms ? -1 : x->idle_ms > y->idle_ms;
}

b10_status_t names_restore_done(struct names *n)
{
    struct name_entry **all = malloc((n->count ? n->count : 1) * sizeof(*all));
    uint32_t k = 0;
    struct list *pos, *tmp;

    if (all == NULL)
        return B10_ERR_NO_MEMORY;
    for (pos = n->idle.next, tmp = pos->next; pos != &n->idle; pos = tmp, tmp = pos->next) {
        all[k++] = list_entry(pos, struct name_entry, idle_node);
        list_remove(pos);
    }
    qsort(all, k, sizeof(*all), names_by_idle);
    for (uint32_t i = 0; i < k; i++)
        list_insert_tail(&n->idle, &all[i]->idle_node);
    free(all);
    return B10_OK;
}
