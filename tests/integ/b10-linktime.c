/*
 * b10-linktime — how long a link between two daemons takes to set up: one
 * process plays a rank on each daemon, loads the other's descriptor, and
 * times a check of remote descriptors (one round trip on the link) first
 * when the link must be opened, then again on the open link. The setup is
 * the difference. For scripts/bench-link.sh, which runs it against fresh
 * daemons, alternating builds.
 *
 *   b10-linktime SOCKET_A SOCKET_B
 *
 * Prints "first US second US setup US" (microseconds); exits 0, or 1 with a
 * reason.
 */
#include <b10/b10.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REGION (1u << 20)

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int fail(const char *what, b10_status_t st)
{
    fprintf(stderr, "b10-linktime: %s: %s\n", what, b10_status_name(st));
    return 1;
}

int main(int argc, char **argv)
{
    b10_conn_t *a, *b;
    b10_mem_t *mem;
    void *region;
    const void *desc;
    size_t desc_len;
    b10_status_t st;

    if (argc != 3) {
        fprintf(stderr, "usage: b10-linktime SOCKET_A SOCKET_B\n");
        return 2;
    }
    b10_conn_params_t pa = { .field_mask = B10_CONN_FIELD_SOCKET_PATH, .agent_name = "lt-a",
                             .socket_path = argv[1] };
    b10_conn_params_t pb = { .field_mask = B10_CONN_FIELD_SOCKET_PATH, .agent_name = "lt-b",
                             .socket_path = argv[2] };
    if ((st = b10_conn_open(&pa, &a)) != B10_OK || (st = b10_conn_open(&pb, &b)) != B10_OK)
        return fail("connect", st);
    if ((st = b10_dram_alloc(REGION, &region)) != B10_OK)
        return fail("dram alloc", st);
    b10_mem_params_t mp = { .kind = B10_MEM_DRAM, .addr = region, .length = REGION };
    if ((st = b10_mem_register(b, &mp, &mem)) != B10_OK)
        return fail("register", st);
    if ((st = b10_agent_desc(b, &desc, &desc_len)) != B10_OK ||
        (st = b10_agent_load(a, "lt-b", desc, desc_len)) != B10_OK)
        return fail("load the descriptor", st);
    b10_span_t span = { .addr = (uint64_t)(uintptr_t)region, .length = 4096 };
    double t0 = now_us();
    if ((st = b10_agent_check(a, "lt-b", &span, 1)) != B10_OK)
        return fail("first check", st);
    double t1 = now_us();
    if ((st = b10_agent_check(a, "lt-b", &span, 1)) != B10_OK)
        return fail("second check", st);
    double t2 = now_us();
    printf("first %.0f second %.0f setup %.0f\n", t1 - t0, t2 - t1, (t1 - t0) - (t2 - t1));
    b10_conn_close(a);
    b10_conn_close(b);
    b10_dram_free(region);
    return 0;
}
