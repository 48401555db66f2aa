/*
 * yield_count.c - preloaded into swagent-reporter by reporter_test.sh's `yield` modes: counts
 * the process's sched_yield() calls made from the reporter's own code (the main program;
 * libraries such as gRPC's may yield too, and are not counted) and writes the count to
 * $SW_TEST_YIELD_FILE at exit. A test helper, never loaded into anything else.
 */
#define _GNU_SOURCE
#include <link.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static atomic_long g_yields;
static uintptr_t g_lo, g_hi; /* the main program's loaded segments */

static int main_range(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (!g_lo || lo < g_lo)
            g_lo = lo;
        if (hi > g_hi)
            g_hi = hi;
    }
    return 1; /* the first object is the main program: stop there */
}

__attribute__((constructor)) static void find_main(void)
{
    dl_iterate_phdr(main_range, NULL);
}

int sched_yield(void)
{
    uintptr_t ra = (uintptr_t)__builtin_return_address(0);
    if (ra >= g_lo && ra < g_hi)
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
