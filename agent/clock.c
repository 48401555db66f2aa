/*
 * clock.c - the TSC mapping of sw_clock_ms() (see clock.h): when it may be used, how it is
 * made, checked and re-based. Everything here runs at init, or once per SW_CLOCK_SPAN_NS of a
 * process's reads, never per request.
 */
#include "clock.h"

#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if SW_CLOCK_HAVE_TSC
#include <cpuid.h>
#endif

struct sw_clock_map sw_clock_map;
_Atomic int64_t sw_clock_floor;
static _Atomic bool tsc_on; /* chosen at init; turned off after SW_CLOCK_BAD_MAX failures */
static _Atomic int bad;     /* failed checks in a row */

#ifdef SW_TESTING
_Atomic uint64_t sw_clock_test_slow_reads;
_Atomic uint64_t sw_clock_test_pair_delay;

#if SW_CLOCK_HAVE_TSC
/* The next pair's clock_gettime() comes this many ticks after its first TSC reading. */
static void pair_test_delay(void)
{
    uint64_t d = atomic_exchange_explicit(&sw_clock_test_pair_delay, 0, memory_order_relaxed);
    for (uint64_t t0 = __rdtsc(); d && __rdtsc() - t0 < d;)
        ;
}
#endif
#endif

/* A TSC reading and clock_gettime() this far apart (ticks; preempted in between) are no base:
   20 µs at 10 GHz, more at lower rates. */
#define PAIR_MAX_TICKS 200000u
/*
 * A pair this narrow is taken at once (0.4 µs at 10 GHz, 4 µs at 1 GHz; a clock_gettime()
 * through the vDSO is ~500 ticks wide); a wider one is tried again, up to PAIR_TRIES pairs, and
 * the narrowest kept. The base's error is up to half its pair's width, and it lasts the
 * mapping's 100 ms: under loopback traffic about one pair in 10,000 was 35,000-40,000 ticks
 * wide (a softirq in between; 2.2 GHz VM), a base ~8 µs off, and the first rate taken from it
 * 20 ms later off by 4e-4 (40 µs over a span). Each process maps the TSC on its own, so such a
 * process's spans are stamped ahead of its peers' by that much, and across a millisecond
 * boundary a request's span can begin before the caller's exit span that sent it (the likely
 * cause of one tests/validator failure).
 */
#define PAIR_GOOD_TICKS 4000u
#define PAIR_TRIES 4

#if SW_CLOCK_HAVE_TSC
/* CPUID 8000_0007h EDX bit 8: the TSC runs at a constant rate in every P-, C- and T-state. */
static bool tsc_invariant(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
        return false;
    if (!__get_cpuid(0x80000007u, &a, &b, &c, &d))
        return false;
    return (d >> 8) & 1u;
}

/* The kernel's own clocksource reads the TSC: "tsc", or "kvm-clock" (a KVM guest: the host
   keeps the vCPUs' TSCs in step, or the kernel would not use it for its fast clock either).
   A kernel that found its TSC unstable uses hpet or acpi_pm instead. Raw syscalls: read() is
   interposed, and this runs before the agent's own I/O is set up. */
static bool kernel_uses_tsc(void)
{
    char b[64];
    long fd = syscall(SYS_openat, AT_FDCWD,
                      "/sys/devices/system/clocksource/clocksource0/current_clocksource",
                      O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    long n = syscall(SYS_read, (int)fd, b, sizeof(b) - 1);
    syscall(SYS_close, (int)fd);
    if (n <= 0)
        return false;
    b[n] = '\0';
    return strcmp(b, "tsc\n") == 0 || strcmp(b, "kvm-clock\n") == 0;
}
#endif

void sw_clock_init(bool use_tsc)
{
    struct sw_clock_map *m = &sw_clock_map;
    bool on = false;
#if SW_CLOCK_HAVE_TSC
    on = use_tsc && tsc_invariant() && kernel_uses_tsc();
#else
    (void)use_tsc;
#endif
    atomic_store_explicit(&m->mult, 0, memory_order_relaxed);
    atomic_store_explicit(&m->tsc, 0, memory_order_relaxed);
    atomic_store_explicit(&m->ns, 0, memory_order_relaxed);
    atomic_store_explicit(&m->span, 0, memory_order_relaxed);
    atomic_store_explicit(&m->seq, 0, memory_order_release);
    atomic_store_explicit(&bad, 0, memory_order_relaxed);
    atomic_store_explicit(&sw_clock_floor, 0, memory_order_relaxed);
    atomic_store_explicit(&tsc_on, on, memory_order_relaxed);
}

void sw_clock_after_fork(void)
{
    struct sw_clock_map *m = &sw_clock_map;
    uint32_t s = atomic_load_explicit(&m->seq, memory_order_relaxed);
    if (s & 1) { /* half written by a thread that is not in this process: start again */
        atomic_store_explicit(&m->mult, 0, memory_order_relaxed);
        atomic_store_explicit(&m->tsc, 0, memory_order_relaxed);
        atomic_store_explicit(&m->seq, s + 1, memory_order_release);
    }
}

bool sw_clock_tsc_on(void)
{
    return atomic_load_explicit(&tsc_on, memory_order_relaxed);
}

#if SW_CLOCK_HAVE_TSC
/* 2^32 ns per tick for a TSC of 50 MHz .. 20 GHz: anything else is no TSC rate. */
static bool mult_sane(uint64_t mult)
{
    return mult >= (UINT64_C(1) << 32) / 20 && mult <= (UINT64_C(1) << 32) * 20;
}

/*
 * A clock_gettime() reading `ns` at TSC `t`: makes, checks and re-bases the mapping. Only one
 * thread at a time (the one that turns seq odd); the others keep their clock_gettime() value.
 */
static void remap(uint64_t t, int64_t ns)
{
    struct sw_clock_map *m = &sw_clock_map;
    uint32_t s = atomic_load_explicit(&m->seq, memory_order_relaxed);
    if ((s & 1) || !atomic_compare_exchange_strong_explicit(
                       &m->seq, &s, s + 1, memory_order_acquire, memory_order_relaxed))
        return;
    atomic_thread_fence(memory_order_release); /* seq odd before any field changes */
    uint64_t mult = atomic_load_explicit(&m->mult, memory_order_relaxed);
    uint64_t base = atomic_load_explicit(&m->tsc, memory_order_relaxed);
    int64_t bns = atomic_load_explicit(&m->ns, memory_order_relaxed);
    bool rebase = true;

    if (base != 0 && t > base && ns > bns) {
        uint64_t dt = t - base;
        int64_t dn = ns - bns;
        uint64_t rate = (uint64_t)(((unsigned __int128)dn << 32) / dt);
        if (mult == 0) {
            /* No rate yet: take one from 20 ms or more; until then keep the first base. */
            if (dn < SW_CLOCK_CAL_NS)
                rebase = false;
            else if (mult_sane(rate))
                mult = rate;
        } else {
            int64_t pred = bns + (int64_t)(((unsigned __int128)dt * mult) >> 32);
            int64_t err = ns > pred ? ns - pred : pred - ns;
            if (err <= 1000000 || err <= dn / 1000) {
                atomic_store_explicit(&bad, 0, memory_order_relaxed);
                /* A finer rate from the longer interval, unless it moved by 0.1 % or more
                   (then the interval held something else: keep the old one). */
                uint64_t diff = rate > mult ? rate - mult : mult - rate;
                if (dn >= SW_CLOCK_CAL_NS && diff < mult / 1000)
                    mult = rate;
            } else if (atomic_fetch_add_explicit(&bad, 1, memory_order_relaxed) + 1 >=
                       SW_CLOCK_BAD_MAX) {
                atomic_store_explicit(&tsc_on, false, memory_order_relaxed);
                mult = 0;
            }
        }
    } else if (base != 0 && mult != 0) {
        /* The TSC or the system clock went back past the base: re-base, and count it. */
        if (atomic_fetch_add_explicit(&bad, 1, memory_order_relaxed) + 1 >= SW_CLOCK_BAD_MAX) {
            atomic_store_explicit(&tsc_on, false, memory_order_relaxed);
            mult = 0;
        }
    }
    if (rebase) {
        atomic_store_explicit(&m->tsc, t, memory_order_relaxed);
        atomic_store_explicit(&m->ns, ns, memory_order_relaxed);
        atomic_store_explicit(
            &m->span, mult ? (uint64_t)(((unsigned __int128)SW_CLOCK_SPAN_NS << 32) / mult) : 0,
            memory_order_relaxed);
        atomic_store_explicit(&m->mult, mult, memory_order_relaxed);
    }
    atomic_store_explicit(&m->seq, s + 2, memory_order_release);
}
#endif

__attribute__((noinline, cold)) int64_t sw_clock_ms_slow(void)
{
    struct timespec ts;
#ifdef SW_TESTING
    atomic_fetch_add_explicit(&sw_clock_test_slow_reads, 1, memory_order_relaxed);
#endif
#if SW_CLOCK_HAVE_TSC
    if (atomic_load_explicit(&tsc_on, memory_order_relaxed)) {
        uint64_t best_t = 0, best_w = PAIR_MAX_TICKS; /* the narrowest pair: its middle, width */
        int64_t best_ns = 0;
        for (int i = 0; i < PAIR_TRIES; i++) {
            uint64_t t1 = __rdtsc();
#ifdef SW_TESTING
            pair_test_delay();
#endif
            clock_gettime(CLOCK_REALTIME, &ts);
            uint64_t t2 = __rdtsc();
            if (t2 > t1 && t2 - t1 < best_w) {
                best_w = t2 - t1;
                best_t = t1 + best_w / 2;
                best_ns = (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
            }
            if (best_w <= PAIR_GOOD_TICKS)
                break;
        }
        if (best_t)
            remap(best_t, best_ns);
        return (int64_t)ts.tv_sec * 1000 + (int64_t)((uint32_t)ts.tv_nsec / 1000000u);
    }
#endif
    clock_gettime(CLOCK_REALTIME, &ts);
    /* tv_nsec is in [0, 1e9): an unsigned 32-bit division, which compilers make an exact
     * multiply and shift, without the sign fix-up of a signed 64-bit one. */
    return (int64_t)ts.tv_sec * 1000 + (int64_t)((uint32_t)ts.tv_nsec / 1000000u);
}

#ifdef SW_TESTING
void sw_clock_test_shift(int64_t ns)
{
    atomic_fetch_add_explicit(&sw_clock_map.ns, ns, memory_order_relaxed);
}

void sw_clock_test_expire(void)
{
    atomic_store_explicit(&sw_clock_map.span, 0, memory_order_relaxed);
}

void sw_clock_test_hold(void)
{
    atomic_fetch_add_explicit(&sw_clock_map.seq, 1, memory_order_relaxed);
}
#endif
