/*
 * procs.c - the reporter's table of traced processes (see procs.h).
 */
#include "procs.h"

#include <stdio.h>
#include <string.h>

#define WAYS 4 /* cache slots looked at per lookup: c, c + 1, c + 2, c + 3 (wrapping) */

static unsigned cache_slot(int32_t pid, uint64_t start_ms)
{
    uint64_t k = ((uint64_t)(uint32_t)pid << 32 ^ start_ms) * 0x9e3779b97f4a7c15ull;
    return (unsigned)(k >> 52) & (SW_PROCS_CACHE_SLOTS - 1);
}

/* Remembers position i for a process whose first cache slot is c: an empty slot of its WAYS,
 * else one that points at an exited process (no ring), else c. */
static void cache_put(struct sw_procs *t, unsigned c, int i)
{
    unsigned pick = c;
    for (unsigned w = 0; w < WAYS; w++) {
        unsigned s = (c + w) & (SW_PROCS_CACHE_SLOTS - 1);
        if (!t->cache[s]) {
            pick = s;
            break;
        }
        if (!t->ps[t->cache[s] - 1].has_ring && pick == c)
            pick = s;
    }
    t->cache[pick] = (uint16_t)(i + 1);
}

struct sw_pstat *sw_procs_get(struct sw_procs *t, int32_t pid, uint64_t start_ms,
                              const char *service, const char *instance, uint64_t now_ms)
{
    unsigned c = cache_slot(pid, start_ms);
    for (unsigned w = 0; w < WAYS; w++) {
        unsigned s = (c + w) & (SW_PROCS_CACHE_SLOTS - 1);
        if (!t->cache[s])
            continue;
        struct sw_pstat *p = &t->ps[t->cache[s] - 1];
        t->probes++;
        if (p->pid == pid && p->start_ms == start_ms) {
            p->touched_ms = now_ms;
            return p;
        }
    }
    int victim = -1;
    for (int i = 0; i < t->n; i++) {
        struct sw_pstat *p = &t->ps[i];
        t->probes++;
        if (p->pid == pid && p->start_ms == start_ms) {
            p->touched_ms = now_ms;
            cache_put(t, c, i);
            return p;
        }
        if (!p->has_ring && (victim < 0 || p->touched_ms < t->ps[victim].touched_ms))
            victim = i;
    }
    if (t->n < SW_PROCS_MAX)
        victim = t->n++;
    else if (victim < 0)
        return NULL;
    /* Cache slots that pointed at the victim now point at another process: they are checked. */
    struct sw_pstat *p = &t->ps[victim];
    memset(p, 0, sizeof(*p));
    p->pid = pid;
    p->start_ms = start_ms;
    snprintf(p->service, sizeof(p->service), "%s", service ? service : "");
    snprintf(p->instance, sizeof(p->instance), "%s", instance ? instance : "");
    p->touched_ms = now_ms;
    cache_put(t, c, victim);
    return p;
}
