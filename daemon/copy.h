/*
 * copy.h — gathers (regions → staging view) and scatters (view → regions),
 * off the loop thread.
 *
 * A job is a list of segments plus a reference on every region they touch,
 * so the regions stay mapped until the copy is over. DRAM jobs run on the
 * libuv thread pool; the completion callback runs on the loop thread.
 */
#ifndef B10D_COPY_H
#define B10D_COPY_H

#include <stddef.h>
#include <stdint.h>

#include "b10d.h"
#include "mem.h"

struct copy_seg {
    void *dst;
    const void *src;
    size_t len;
};

struct copy_job;
typedef void copy_done_fn(struct copy_job *job, b10_status_t status);

struct copy_job {
    uv_work_t work;
    struct copy_seg *segs;
    uint32_t nsegs, cap;
    struct region **refs;       /* one reference each */
    uint32_t nrefs, refcap;
    uint64_t bytes;
    copy_done_fn *done;
    void *arg;
    uint32_t index;             /* the caller's: e.g. the chunk */
};

struct copy_job *copy_job_new(copy_done_fn *done, void *arg, uint32_t index);
/* Add a segment; takes a reference on r (once per run of segments in r). */
b10_status_t copy_job_add(struct copy_job *job, struct region *r, void *dst, const void *src,
                          size_t len);
/* Run the job; done() runs on the loop thread, then the job is freed. */
void copy_job_submit(struct b10d *d, struct copy_job *job);
/* Free a job never submitted. */
void copy_job_free(struct copy_job *job);

#endif
