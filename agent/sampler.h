/*
 * sampler.h - the local trace sampler: at most N locally started traces per 3-second window
 * (agent.sample_n_per_3_secs), as the Java agent's SamplingService.
 *
 * Runs on application threads: lock-free (one 64-bit atomic word), no allocation, no syscall.
 * The caller passes the time, so tests control it. A window is the 3-second slot
 * `now_ms / 3000`; the first call in a new slot resets the count in the same CAS that counts it,
 * so the count is exact under any number of threads.
 */
#ifndef SW_SAMPLER_H
#define SW_SAMPLER_H

#include "common.h"

#define SW_SAMPLER_WINDOW_MS 3000

/* Zero-initialised (static storage, or SW_SAMPLER_INIT) is a valid, empty sampler. */
struct sw_sampler {
    _Atomic uint64_t state; /* see SW_SAMPLER_COUNT_BITS */
};

#define SW_SAMPLER_INIT                                                                            \
    {                                                                                              \
        0                                                                                          \
    }

/* Resets the sampler to empty (for example in an atfork child). */
void sw_sampler_reset(struct sw_sampler *s);

/*
 * Decides whether a trace that starts locally is sampled. `n_per_3s` <= 0 means sample
 * everything (nothing is counted). Otherwise returns true and counts the trace while fewer than
 * `n_per_3s` traces were counted in the window of `now_ms` (any clock in milliseconds).
 */
bool sw_sampler_try(struct sw_sampler *s, int n_per_3s, int64_t now_ms);

/*
 * Counts a trace that is sampled regardless of the budget (a valid incoming sw8 forces
 * sampling, as in Java); it uses up the local budget of the window of `now_ms`.
 */
void sw_sampler_force(struct sw_sampler *s, int64_t now_ms);

/* The state word: window index << SW_SAMPLER_COUNT_BITS | samples counted in that window. */
#define SW_SAMPLER_COUNT_BITS 24
#define SW_SAMPLER_COUNT_MASK ((UINT64_C(1) << SW_SAMPLER_COUNT_BITS) - 1)

/* The window index of `now_ms` as the state word holds it. */
static inline uint64_t sw_sampler_window(int64_t now_ms)
{
    if (now_ms < 0)
        now_ms = 0;
    return ((uint64_t)now_ms / SW_SAMPLER_WINDOW_MS) & (UINT64_MAX >> SW_SAMPLER_COUNT_BITS);
}

/* The number of traces counted in the window of `now_ms` (0 if the sampler is in another).
   Inline: the agent's unsampled requests ask it once each. */
static inline int sw_sampler_count(struct sw_sampler *s, int64_t now_ms)
{
    uint64_t cur = sw_atomic_load_relaxed(&s->state);
    uint64_t at = cur >> SW_SAMPLER_COUNT_BITS, win = sw_sampler_window(now_ms);
    if (at != win && at != win + 1) /* the next window: a clock slightly ahead (sampler.c) */
        return 0;
    return (int)(cur & SW_SAMPLER_COUNT_MASK);
}

#endif /* SW_SAMPLER_H */
