/*
 * rank.h — the rank of the integration programs that drive libb10 (b10-agentops,
 * b10-settle): one connection, one registered DRAM region filled with a byte,
 * and the descriptor exchange. Each program includes it once.
 */
#ifndef B10_TEST_RANK_H
#define B10_TEST_RANK_H

#include <b10/b10.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct rank {
    const char *name;
    b10_conn_t *conn;
    uint8_t *mem;
    b10_mem_t *reg;
};

/* A "FAIL what: status (sentence): detail" line, which the runners report; returns 1. */
static inline int fail(const char *what, b10_status_t st, const char *detail)
{
    printf("FAIL %s: %s (%s)%s%s\n", what, b10_status_name(st), b10_status_str(st),
           detail && detail[0] ? ": " : "", detail ? detail : "");
    return 1;
}

/* Connect as name, allocate and register `region` bytes filled with fill; 0, else 1 (said). */
static inline int rank_open(struct rank *r, const char *socket, const char *name, size_t region,
                     uint8_t fill)
{
    b10_conn_params_t cp = { .field_mask = B10_CONN_FIELD_SOCKET_PATH, .agent_name = name,
                             .socket_path = socket };
    b10_status_t st = b10_conn_open(&cp, &r->conn);
    if (st != B10_OK)
        return fail("open", st, NULL);
    r->name = name;
    void *p;
    if ((st = b10_dram_alloc(region, &p)) != B10_OK)
        return fail("dram alloc", st, NULL);
    r->mem = p;
    memset(r->mem, fill, region);
    b10_mem_params_t mp = { .kind = B10_MEM_DRAM, .addr = p, .length = region };
    if ((st = b10_mem_register(r->conn, &mp, &r->reg)) != B10_OK)
        return fail("register", st, b10_conn_detail(r->conn));
    return 0;
}

/* from loads to's agent descriptor (it may then write and read to's memory). */
static inline int rank_load(struct rank *from, struct rank *to)
{
    const void *desc;
    size_t len;
    b10_status_t st = b10_agent_desc(to->conn, &desc, &len);
    if (st == B10_OK)
        st = b10_agent_load(from->conn, to->name, desc, len);
    return st == B10_OK ? 0 : fail("load agent", st, b10_conn_detail(from->conn));
}

#endif
