/*
 * yield_count.c - preloaded into swagent-reporter by reporter_test.sh's `yield` mode: counts
 * the process's sched_yield() calls and writes the count to $SW_TEST_YIELD_FILE at exit.
 * A test helper, never loaded into anything else.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static atomic_long g_yields;

int sched_yield(void)
{
    atomic_fetch_add_explicit(&g_yields, 1, memory_order_relaxed);
    return (int)syscall(SYS_sched_yield);
}

__attribute__((destructor)) static void write_count(void)
{
    const char *path = getenv("SW_TEST_YIELD_FILE");
    FILE *f;

    if (!path || !(f = fopen(path, "w")))
        return;
    fprintf(f, "%ld\n", atomic_load(&g_yields));
    fclose(f);
}
