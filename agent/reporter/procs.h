/*
 * procs.h - the reporter's table of traced processes (live and recently exited): their
 * counters, found by (pid, start time).
 *
 * The reporter looks a process up for every segment it encodes, so a lookup must not depend on
 * how many processes the table remembers: a host that runs many short-lived traced programs
 * (a CGI server, scripts calling curl) fills it with exited ones, up to SW_PROCS_MAX (a scan of
 * them all for each segment made the reporter's CPU per segment 1.8x with ~800 exited processes
 * remembered). A cache of table positions, four slots per (pid, start time) hash, each checked
 * against the entry it points to, finds a process in a probe or a few; only a process's first
 * lookup (or one whose slots others took) scans the table.
 */
#ifndef SW_REPORTER_PROCS_H
#define SW_REPORTER_PROCS_H

#include "ring.h"

#include <stdbool.h>
#include <stdint.h>

#define SW_PROCS_MAX 1024         /* per-process counters kept (live and recently exited) */
#define SW_PROCS_CACHE_SLOTS 4096 /* a power of two, 4 x SW_PROCS_MAX: few collisions */

/*
 * Counters of one traced process (identified by pid and start time): its ring's committed and
 * dropped records (the ring header, as of the last scan) and what the reporter did with its
 * segments. `failed` counts segments of collect streams that did not end OK (each attempt).
 */
struct sw_pstat {
    int32_t pid;
    uint64_t start_ms;
    char service[SW_RING_NAME_MAX];
    char instance[SW_RING_NAME_MAX];
    char exe[SW_RING_NAME_MAX];               /* from its ring (main.c), "" until seen */
    uint64_t committed, dropped, shed;        /* ring header */
    uint64_t sent, failed, spooled, replayed; /* reporter */
    bool has_ring;                            /* its ring is tracked now */
    bool alive;
    uint64_t touched_ms;
    uint64_t logged_sig;   /* counters_sig at the last log line */
    uint64_t reported_sig; /* loss_sig at the last reportInstanceProperties */
    uint64_t final_sig;    /* all_sig at its last report after it exited (main.c) */
};

struct sw_procs {
    struct sw_pstat ps[SW_PROCS_MAX];
    int n;                                /* entries in use: ps[0..n) */
    uint16_t cache[SW_PROCS_CACHE_SLOTS]; /* position + 1 of a process; 0: none */
    uint64_t probes;                      /* entries compared by lookups (tests) */
};

/*
 * The counters of process (pid, start_ms), created when new: a free entry, else the one of an
 * exited process (no ring) touched longest ago (its counters are forgotten); NULL when every
 * entry has a ring. `now_ms` is kept as the entry's last touch. `t` starts zeroed.
 */
struct sw_pstat *sw_procs_get(struct sw_procs *t, int32_t pid, uint64_t start_ms,
                              const char *service, const char *instance, uint64_t now_ms);

#endif /* SW_REPORTER_PROCS_H */
