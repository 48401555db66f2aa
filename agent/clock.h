/*
 * clock.h - the wall clock of span times (CLOCK_REALTIME in milliseconds), cheap enough for
 * the request path.
 *
 * A traced server request reads the clock three times (nginx: when the request is read,
 * before the head is written, before the body is sent). clock_gettime() through the vDSO
 * took 55-120 ns of each of those reads on the bench's 2-core VM, measured in nginx by
 * bench/insitu.sh (30-35 ns in a loop): right after a syscall its code and the clock pages it
 * reads are cold. That was 15-20 % of all the agent's own time per request. On x86-64 with an
 * invariant TSC that the kernel itself uses for time (clocksource tsc or kvm-clock),
 * sw_clock_ms() reads the TSC instead (~20 ns there) and maps it to CLOCK_REALTIME with a
 * base and a rate that clock.c takes from clock_gettime():
 *   - the rate from two clock_gettime() readings 20 ms or more apart (until then every read
 *     is a clock_gettime()); each reading is paired with the TSC read just before and after
 *     it, and a pair that was interrupted (wide) is taken again (clock.c, PAIR_GOOD_TICKS);
 *   - a mapping serves SW_CLOCK_SPAN_NS (100 ms) of TSC ticks from its base; the first read
 *     after that (or a read on a CPU whose TSC is behind the base) takes clock_gettime(),
 *     which re-bases the mapping and refines the rate. So the value never strays from
 *     CLOCK_REALTIME by more than the rate's error over 100 ms (well under a millisecond; a
 *     step of the system clock shows after at most 100 ms);
 *   - a clock_gettime() more than 1 ms (and 0.1 % of the interval) away from what the mapping
 *     predicted re-bases it; SW_CLOCK_BAD_MAX of those in a row turn the TSC off for the
 *     process (clock_gettime() for every read from then on);
 *   - swagent.tsc_clock=false turns it off too.
 * The mapping is a seqlock (any thread may re-base it; a reader that sees it change takes
 * clock_gettime()). Elsewhere (other CPUs, the TSC unusable) every read is clock_gettime().
 */
#ifndef SW_CLOCK_H
#define SW_CLOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#define SW_CLOCK_HAVE_TSC 1
#else
#define SW_CLOCK_HAVE_TSC 0
#endif

#define SW_CLOCK_SPAN_NS 100000000LL /* TSC time one mapping serves */
#define SW_CLOCK_CAL_NS 20000000LL   /* the least interval a rate is taken from */
#define SW_CLOCK_BAD_MAX 4           /* failed checks in a row that turn the TSC off */

/* The TSC-to-CLOCK_REALTIME mapping: seq is odd while a thread changes it. */
struct sw_clock_map {
    _Atomic uint32_t seq;
    _Atomic uint64_t mult; /* nanoseconds per tick << 32; 0: no mapping (clock_gettime) */
    _Atomic uint64_t tsc;  /* the base: a TSC reading ... */
    _Atomic int64_t ns;    /* ... and CLOCK_REALTIME at it, in ns */
    _Atomic uint64_t span; /* ticks from the base that the mapping serves */
};
extern struct sw_clock_map sw_clock_map;
/* The largest value sw_clock_ms() has returned: see sw_clock_floor_of(). */
extern _Atomic int64_t sw_clock_floor;

/* Chooses the TSC when `use_tsc` and the machine allows it (see above); forgets any mapping. */
void sw_clock_init(bool use_tsc);
/* In a fork child: a mapping that a thread of the parent was changing is dropped. */
void sw_clock_after_fork(void);
/* True while reads may come from the TSC (chosen at init and not turned off since). */
bool sw_clock_tsc_on(void);
/* clock_gettime(CLOCK_REALTIME) in ms, and the mapping's upkeep. */
int64_t sw_clock_ms_slow(void);

/*
 * Never a value below one already returned, unless by a second or more (a step of the system
 * clock, kept as it was with clock_gettime()): the mapping runs a few microseconds ahead of
 * CLOCK_REALTIME or behind it between two checks, and a check (or a read that takes
 * clock_gettime()) returns to it, so without this floor a span could end a millisecond before
 * it started. In the usual case (the same millisecond) one load and one compare.
 */
static inline __attribute__((always_inline)) int64_t sw_clock_floor_of(int64_t v)
{
    int64_t f = atomic_load_explicit(&sw_clock_floor, memory_order_relaxed);
    if (SW_LIKELY(v == f))
        return v;
    while (v > f)
        if (atomic_compare_exchange_weak_explicit(&sw_clock_floor, &f, v, memory_order_relaxed,
                                                  memory_order_relaxed))
            return v;
    if (v > f - 1000)
        return f;
    atomic_store_explicit(&sw_clock_floor, v, memory_order_relaxed); /* stepped back */
    return v;
}

/* CLOCK_REALTIME in milliseconds (seconds * 1000 + nanoseconds / 1e6), never going back by
   less than a second (sw_clock_floor_of). */
static inline __attribute__((always_inline)) int64_t sw_clock_ms(void)
{
#if SW_CLOCK_HAVE_TSC
    struct sw_clock_map *m = &sw_clock_map;
    uint32_t s = atomic_load_explicit(&m->seq, memory_order_acquire);
    uint64_t mult = atomic_load_explicit(&m->mult, memory_order_relaxed);
    uint64_t base = atomic_load_explicit(&m->tsc, memory_order_relaxed);
    int64_t ns = atomic_load_explicit(&m->ns, memory_order_relaxed);
    uint64_t span = atomic_load_explicit(&m->span, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    /* d < span: at most SW_CLOCK_SPAN_NS of ticks, so d * mult (ns << 32) fits 64 bits; a
       TSC behind the base makes d huge. */
    uint64_t d = __rdtsc() - base;
    if (SW_LIKELY(mult != 0 && d < span && !(s & 1) &&
                  atomic_load_explicit(&m->seq, memory_order_relaxed) == s))
        return sw_clock_floor_of(
            (int64_t)((uint64_t)(ns + (int64_t)((d * mult) >> 32)) / 1000000u));
#endif
    return sw_clock_floor_of(sw_clock_ms_slow());
}

#ifdef SW_TESTING
/* Counts the reads that took clock_gettime(). */
extern _Atomic uint64_t sw_clock_test_slow_reads;
/* TSC ticks between the next TSC/clock_gettime() pair's two readings (a pair preempted). */
extern _Atomic uint64_t sw_clock_test_pair_delay;
/* Moves the mapping's base by `ns` (a wrong mapping, as after a step of the system clock). */
void sw_clock_test_shift(int64_t ns);
/* Ends the mapping's span: the next read checks it against clock_gettime(). */
void sw_clock_test_expire(void);
/* Leaves the mapping as a thread that was changing it would (seq odd). */
void sw_clock_test_hold(void);
#endif

#endif /* SW_CLOCK_H */
