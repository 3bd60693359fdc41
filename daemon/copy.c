/* copy.c — see copy.h. */
#include "copy.h"

#include "gpu.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct copy_job *copy_job_new(struct b10d *d, bool gather, copy_done_fn *done, void *arg,
                              uint32_t index)
{
    struct copy_job *job = calloc(1, sizeof(*job));
    if (job == NULL)
        return NULL;
    job->d = d;
    job->gather = gather;
    job->status = B10_OK;
    job->done = done;
    job->arg = arg;
    job->index = index;
    job->work.data = job;
    return job;
}

void copy_job_free(struct copy_job *job)
{
    if (job == NULL)
        return;
    for (uint32_t i = 0; i < job->nrefs; i++)
        region_unref(job->refs[i]);
    free(job->refs);
    free(job->segs);
    free(job);
}

b10_status_t copy_job_add(struct copy_job *job, struct region *r, void *dst, const void *src,
                          size_t len)
{
    if (job->nsegs == job->cap) {
        uint32_t cap = job->cap ? job->cap * 2 : 8;
        struct copy_seg *segs = realloc(job->segs, cap * sizeof(*segs));
        if (segs == NULL)
            return B10_ERR_NO_MEMORY;
        job->segs = segs;
        job->cap = cap;
    }
    if (job->nrefs == 0 || job->refs[job->nrefs - 1] != r) {
        if (job->nrefs == job->refcap) {
            uint32_t cap = job->refcap ? job->refcap * 2 : 4;
            struct region **refs = realloc(job->refs, cap * sizeof(*refs));
            if (refs == NULL)
                return B10_ERR_NO_MEMORY;
            job->refs = refs;
            job->refcap = cap;
        }
        region_ref(r);
        job->refs[job->nrefs++] = r;
    }
    int device = r->kind == B10_MEM_VRAM ? r->device : -1;
    job->segs[job->nsegs++] = (struct copy_seg){ dst, src, len, device };
    job->host_segs += device < 0;
    job->bytes += len;
    return B10_OK;
}

/* On a pool thread: touches only the job's own host segments. */
static void copy_run(uv_work_t *work)
{
    struct copy_job *job = work->data;
    if (!job->gather && job->d->test_copy_delay_ms > 0)
        usleep(job->d->test_copy_delay_ms * 1000u);
    for (uint32_t i = 0; i < job->nsegs; i++)
        if (job->segs[i].device < 0)
            memcpy(job->segs[i].dst, job->segs[i].src, job->segs[i].len);
}

static void copy_after(uv_work_t *work, int status)
{
    /* UV_ECANCELED only when the loop is torn down before the job ran. */
    copy_job_part_done(work->data, status == 0 ? B10_OK : B10_ERR_CANCELLED);
}

void copy_job_part_done(struct copy_job *job, b10_status_t status)
{
    if (status != B10_OK && job->status == B10_OK)
        job->status = status;
    if (--job->parts > 0)
        return;
    job->done(job, job->status);
    copy_job_free(job);
}

void copy_job_submit(struct copy_job *job)
{
    /* One part for this call itself, so that no part finishing early ends the job. */
    job->parts = 1;
    if (job->host_segs > 0) {
        job->parts++;
        uv_queue_work(job->d->loop, &job->work, copy_run, copy_after);
    }
    if (job->host_segs < job->nsegs)
        gpu_copy_job(job->d, job);
    copy_job_part_done(job, B10_OK);
}
