/*
 * sampler.c - N locally started traces per 3-second window, lock-free.
 *
 * Rules: runs on application threads: no allocation, no syscall, no lock. The whole state is
 * one 64-bit word (window index << 24 | count), updated by CAS, so moving to a new window and
 * counting the first trace in it are one atomic step and the count is exact. The word may live
 * in shared memory (svcblock.h), counted by several processes: nothing is ever held, so a
 * process killed at any point leaves it usable, and any value it holds is valid (a garbage
 * count ends one window's budget early, a garbage window is replaced by the next count).
 */
#include "common.h"

#include "sampler.h"

void sw_sampler_reset(struct sw_sampler *s)
{
    sw_atomic_store_relaxed(&s->state, 0);
}

/* Counts one trace if `forced` or below `limit`; returns whether it was counted. */
static bool take(struct sw_sampler *s, uint64_t limit, bool forced, int64_t now_ms)
{
    uint64_t win = sw_sampler_window(now_ms);
    uint64_t cur = sw_atomic_load_relaxed(&s->state);

    if (limit > SW_SAMPLER_COUNT_MASK)
        limit = SW_SAMPLER_COUNT_MASK;
    for (;;) {
        uint64_t next;
        uint64_t at = cur >> SW_SAMPLER_COUNT_BITS;
        if (at != win && at != win + 1) {
            next = win << SW_SAMPLER_COUNT_BITS | 1; /* a new window (or the clock stepped back) */
        } else {
            /* The word's window, or the one after it: a process whose clock is a little behind
             * another's (the word is shared by the processes of a service, svcblock.h) counts
             * against the newer window instead of taking the word back to the older one and
             * giving both a second budget. */
            uint64_t count = cur & SW_SAMPLER_COUNT_MASK;
            if (!forced && count >= limit)
                return false;
            if (count == SW_SAMPLER_COUNT_MASK) /* saturated: forced traces stop counting */
                return true;
            next = cur + 1;
        }
        if (sw_atomic_cas_acq_rel(&s->state, &cur, next))
            return true;
    }
}

SW_HOT bool sw_sampler_try(struct sw_sampler *s, int n_per_3s, int64_t now_ms)
{
    if (n_per_3s <= 0)
        return true;
    return take(s, (uint64_t)n_per_3s, false, now_ms);
}

void sw_sampler_force(struct sw_sampler *s, int64_t now_ms)
{
    (void)take(s, SW_SAMPLER_COUNT_MASK, true, now_ms);
}
