/*
 * mem.h — a rank's registered memory, as the daemon reaches it.
 *
 * A region is [addr, addr + length) of the client's address space, reached
 * by the daemon through its kind of memory (struct mem_kind_ops, a file
 * each): DRAM (dram.c: a shared mapping of the client's memfd), process
 * memory (procmem.c: any host memory, through the rank's /proc/<pid>/mem)
 * or VRAM (vram.c, mapped by gpu.c). The client's addresses translate
 * through the table of its regions; a span must lie wholly inside regions
 * that are contiguous in the client, or it is refused.
 *
 * A region is reference counted: the table holds one reference, and every
 * copy in flight that touches it holds one more, so a deregistration or a
 * client that goes away unmaps only after those copies finished.
 */
#ifndef B10D_MEM_H
#define B10D_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "b10/b10.h"

struct region;

/* What a client asks to register; fd is the daemon's own descriptor (or -1). */
struct mem_request {
    b10_mem_kind_t kind;
    uint64_t addr;
    uint64_t length;
    int fd;                         /* DRAM: the memfd; VRAM: a VMM allocation's fd */
    uint64_t fd_offset;
    /* VRAM: the allocation holding the region, and how to open it. */
    const char *pci_bus_id;
    uint64_t alloc_base;
    uint64_t alloc_length;
    const uint8_t *ipc_handle;      /* cudaIpcMemHandle of alloc_base, or NULL for VMM */
    size_t ipc_handle_length;
    bool vmm_fd;                    /* VRAM: the registration carries a VMM allocation's fd */
    bool open;                      /* B10_MEM_OPEN_TO_NODE: any rank of the node may reach it */
    bool process_mem;               /* DRAM: fd is the rank's /proc/<pid>/mem (procmem.c) */
    pid_t pid;                      /* the rank's, from its socket's credentials */
};

/*
 * How a copier reaches a region's bytes from its base, which the kind's
 * open sets: the copy room picks memcpy, pread/pwrite or the GPU by this,
 * never by the kind.
 */
enum mem_reach {
    MEM_REACH_MAPPED,           /* base is the daemon's own mapping of them: memcpy */
    MEM_REACH_FILE,             /* base is the rank's address, reached through proc_fd */
    MEM_REACH_DEVICE,           /* base is a device pointer on device: the GPU's copiers */
};

/*
 * A kind of memory, the way SQLite has kinds of storage (its VFS): what a
 * registration of it must carry, how it is mapped and released, and what
 * the rooms above ask of a region of it. Each kind is a file of mem/ that
 * defines one of these, and a row of mem.c's table: no file outside mem/
 * asks which kind a region is, it asks the ops (mem_region_* and
 * mem_request_* below). Every member is set but populate.
 *
 * The bounds of a region against what backs it (a memfd's size, the rank's
 * mapped memory, the driver's size of a GPU allocation) are open's to
 * check: each kind learns them only as it opens.
 */
struct mem_kind_ops {
    const char *name;           /* its own: log lines, b10ctl regions' backend column */
    const char *kind_name;      /* the client's kind, as b10ctl regions' kind column says it */
    b10_mem_kind_t kind;        /* the client's kind it serves (b10.h) */
    enum mem_reach reach;
    /* Whether it serves this request of its kind (DRAM has two: memfds, process memory). */
    bool (*serves)(const struct mem_request *req);
    /* Whether the registration comes with a descriptor, which the session takes off the socket. */
    bool (*takes_fd)(const struct mem_request *req);
    /*
     * Check the request against what backs it and map the region: set
     * r->base (and r->device, r->proc_fd as reach says), and what close
     * undoes. Any thread: it touches no table. The request's fd stays the
     * caller's to close. On failure nothing is left for close to undo.
     */
    b10_status_t (*open)(struct region *r, const struct mem_request *req, char *detail,
                         size_t detail_len);
    /* Fault the region in after open, on the same thread; NULL: nothing to fault in. */
    void (*populate)(struct region *r, const struct mem_request *req);
    /* Release what open took: the last reference is gone. */
    void (*close)(struct region *r);
};

/* The kinds, a file each, in the order mem.c's table searches them. */
extern const struct mem_kind_ops dram_kind;         /* dram.c */
extern const struct mem_kind_ops procmem_kind;      /* procmem.c */
extern const struct mem_kind_ops vram_kind;         /* vram.c */

/* The kind serving req (its kind, and among a kind's the one whose serves says so); NULL: none. */
const struct mem_kind_ops *mem_kind_of(const struct mem_request *req);
/* The table itself, for its tests: row i, NULL past the last. */
const struct mem_kind_ops *mem_kind_at(size_t i);
/*
 * Whether req's registration carries a descriptor to take off the socket:
 * its kind's takes_fd; of a kind the table has not, whether it says so
 * (vmm_fd).
 */
bool mem_request_takes_fd(const struct mem_request *req);
/* Whether req is host memory, counted against a uid's host bytes (false: no such kind). */
bool mem_request_host(const struct mem_request *req);

/*
 * What stands between a copy and a hole of the region's file: pages nobody
 * allocated yet, which the daemon must never fill, for it would pay for
 * them (guard.h says how).
 */
enum region_holes {
    REGION_HOLES_NONE,          /* no file of its own: process memory, VRAM */
    REGION_HOLES_GUARDED,       /* a memfd's mapping that faults on a hole instead (guard.h) */
    REGION_HOLES_CHECKED,       /* a memfd's the guard could not take: each copy asks first (hole.h) */
};

struct region {
    uint64_t id;
    uint64_t addr;                      /* in the client */
    uint64_t length;
    const struct mem_kind_ops *ops;     /* its kind's */
    bool open;                          /* to every rank of the node (access.h) */
    /*
     * The daemon's pointer for addr. A process-memory region has none: its
     * base is addr itself, an address in the rank, and its bytes are reached
     * only through proc_fd (copy.c does so for every segment of it).
     */
    uint8_t *base;
    int proc_fd;                        /* MEM_REACH_FILE: the rank's /proc/<pid>/mem; else -1 */
    int device;                         /* MEM_REACH_DEVICE: the CUDA device; else -1 */
    enum region_holes holes;
    /*
     * REGION_HOLES_CHECKED: the daemon's own open file description of the
     * memfd (lseek here never moves the rank's file offset), and the file
     * offset of base. Else -1 and 0.
     */
    int hole_fd;
    uint64_t hole_offset;
    void *map;                          /* the kind's: what to unmap, from the first copy on */
    size_t map_length;
    uint32_t refs;
    uint32_t stuck;                     /* scatters of failed transfers past --settle-ms */
    /* Called once when only one reference is left (a deregistration waiting for copies). */
    void (*on_idle)(void *arg);
    void *idle_arg;
};

/* Device memory, which the GPU's copiers reach (host memory: the daemon's threads). */
static inline bool mem_region_on_device(const struct region *r)
{
    return r->ops->reach == MEM_REACH_DEVICE;
}

/* The CUDA device a copy of r's bytes runs on; -1: host memory. */
static inline int mem_region_device(const struct region *r)
{
    return mem_region_on_device(r) ? r->device : -1;
}

/* Whether base is the daemon's own mapping of r's bytes, a pointer it may read and write. */
static inline bool mem_region_mapped(const struct region *r)
{
    return r->ops->reach == MEM_REACH_MAPPED;
}

struct mem_table {
    struct region **regions;            /* sorted by addr, never overlapping */
    uint32_t count;
    uint32_t capacity;
    uint32_t limit;
    uint64_t bytes;                     /* registered */
    uint64_t host_bytes;                /* ... of it in host memory (not VRAM) */
    uint64_t max_bytes;                 /* --max-register-bytes */
    uint32_t hint;                      /* the region the last walk began in: a
                                           request's spans come a KV pool at a time */
};

void mem_table_init(struct mem_table *t, uint32_t limit, uint64_t max_bytes);
/* Drop the table's references: regions go once their copies finished. */
void mem_table_clear(struct mem_table *t);

/* Map a region through its kind and add it. Refuses overlaps and past the limits. */
b10_status_t mem_table_add(struct mem_table *t, uint64_t id, const struct mem_request *req,
                           char *detail, size_t detail_len, struct region **region_p);
/*
 * mem_table_add in three steps, so that the slow middle one (mapping and
 * populating, opening an IPC handle: seconds for GiBs) runs off the loop:
 * check the request against the table; open the region (any thread: it
 * touches no table); insert it (checked again). A region opened and not
 * inserted goes with region_unref().
 */
b10_status_t mem_table_check(const struct mem_table *t, const struct mem_request *req, char *detail,
                             size_t detail_len);
b10_status_t mem_region_open(uint64_t id, const struct mem_request *req, char *detail,
                             size_t detail_len, struct region **region_p);
b10_status_t mem_table_insert(struct mem_table *t, struct region *r, char *detail,
                              size_t detail_len);
b10_status_t mem_table_remove(struct mem_table *t, uint64_t id);
/* Take region id out of the table with the table's reference: the caller's now. NULL: none. */
struct region *mem_table_take(struct mem_table *t, uint64_t id);

/*
 * Walk [addr, addr + length) through the regions: emit(arg, region, offset,
 * n) for each run inside one region, in address order. B10_ERR_NOT_REGISTERED
 * at the first byte no region holds (nothing emitted after it); emit's own
 * non-OK status stops the walk and is returned. Loop thread only: the walk
 * records where it began, in t->hint.
 */
typedef b10_status_t mem_emit_fn(void *arg, struct region *r, uint64_t offset, uint64_t n);
b10_status_t mem_table_walk(struct mem_table *t, uint64_t addr, uint64_t length,
                            mem_emit_fn *emit, void *arg);

/*
 * The region the last walk began in, when it alone holds all of [addr, addr +
 * length); else NULL, and mem_table_walk decides. A check that runs once a
 * span of 10^5 asks this first: inline, without the walk's call and emit.
 */
static inline struct region *mem_table_hinted(const struct mem_table *t, uint64_t addr,
                                              uint64_t length)
{
    if (t->hint >= t->count)
        return NULL;
    struct region *r = t->regions[t->hint];
    uint64_t offset = addr - r->addr;   /* below the region, it wraps past its length */
    return offset < r->length && length <= r->length - offset ? r : NULL;
}

void region_ref(struct region *r);
void region_unref(struct region *r);

#endif
