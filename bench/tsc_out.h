/*
 * tsc_out.h - what bench's in-process timers (insitu_shim.c, probes.c) share: their output
 * file, $PREFIX.<pid> opened once for appending, and the TSC's rate since their load.
 */
#ifndef SW_BENCH_TSC_OUT_H
#define SW_BENCH_TSC_OUT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

static inline uint64_t ticks(void)
{
    unsigned aux;
    return __rdtscp(&aux);
}

/* prefix.<pid>, opened for appending at the first call (NULL when it cannot be). */
static inline FILE *tsc_out_file(const char *prefix)
{
    static FILE *f;
    if (!f) {
        char path[600];
        snprintf(path, sizeof(path), "%s.%d", prefix, (int)getpid());
        f = fopen(path, "a");
    }
    return f;
}

/* A count from the environment (read at load: nginx clears its environment), or `dflt`. */
static inline uint64_t env_count(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    long long n = v ? atoll(v) : 0;
    return n > 0 ? (uint64_t)n : dflt;
}

/* TSC ticks per nanosecond since (tsc0, ts0), both taken at load. */
static inline double tsc_ghz(uint64_t tsc0, const struct timespec *ts0)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double ns = (double)(ts.tv_sec - ts0->tv_sec) * 1e9 + (double)(ts.tv_nsec - ts0->tv_nsec);
    return (double)(ticks() - tsc0) / ns;
}

#endif
