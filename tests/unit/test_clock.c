/*
 * test_clock.c - sw_clock_ms() (agent/clock.c): every value within a millisecond of
 * clock_gettime(CLOCK_REALTIME) read around it; on a machine whose kernel keeps time with an
 * invariant TSC the reads come from the TSC (counted: no more than one clock_gettime() per
 * 100 ms once calibrated); a wrong mapping is corrected at the next check and, after
 * SW_CLOCK_BAD_MAX wrong ones in a row, the TSC is given up; a mapping left half-written by
 * a thread of the parent is dropped in a fork child; no value goes back when a check returns
 * a mapping that ran ahead to CLOCK_REALTIME (a span would end before it started), but a
 * step back of seconds is followed; swagent.tsc_clock=false reads clock_gettime() every
 * time; a check whose TSC/clock_gettime() pair was interrupted does not re-base the mapping
 * on it (within 5 µs of CLOCK_REALTIME after); and 4 threads reading while the mapping is
 * re-based, each never going back.
 */
#include "common.h"

#include "clock.h"

#include "check.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t real_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t slow_reads(void)
{
    return atomic_load(&sw_clock_test_slow_reads);
}

/* One read, bracketed by clock_gettime(): within a millisecond of it (the mapping's error is
   microseconds; a millisecond boundary may fall between). Returns false when outside. */
static bool read_ok(int64_t *got)
{
    int64_t a = real_ms();
    int64_t v = sw_clock_ms();
    int64_t b = real_ms();
    if (got)
        *got = v;
    return v >= a - 1 && v <= b + 1;
}

/* Reads for `ms` milliseconds; every value must be bracketed. Returns the number of reads. */
static long read_for(int64_t ms)
{
    int64_t end = mono_ns() + ms * 1000000;
    long n = 0;
    while (mono_ns() < end) {
        int64_t v;
        if (!read_ok(&v)) {
            fprintf(stderr, "value %lld outside [%lld - 1, now + 1]\n", (long long)v,
                    (long long)real_ms());
            CHECK(!"sw_clock_ms() strays from CLOCK_REALTIME");
        }
        n++;
    }
    return n;
}

/* Whether this machine should give the TSC: x86-64, constant and nonstop TSC, and a kernel
   that keeps its own time with it. */
static bool machine_has_tsc(void)
{
#if !SW_CLOCK_HAVE_TSC
    return false;
#else
    char b[64] = {0};
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (!f)
        return false;
    bool ok = fgets(b, sizeof(b), f) && (strcmp(b, "tsc\n") == 0 || strcmp(b, "kvm-clock\n") == 0);
    fclose(f);
    if (!ok)
        return false;
    f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return false;
    char line[4096];
    bool constant = false, nonstop = false;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "flags", 5) != 0)
            continue;
        constant = strstr(line, " constant_tsc") != NULL;
        nonstop = strstr(line, " nonstop_tsc") != NULL;
        break;
    }
    fclose(f);
    return constant && nonstop;
#endif
}

static void test_off(void)
{
    sw_clock_init(false);
    CHECK(!sw_clock_tsc_on());
    uint64_t s0 = slow_reads();
    long n = read_for(60);
    CHECK(n > 100);
    CHECK_EQ(slow_reads() - s0, n); /* every read is a clock_gettime() */
}

static bool tsc;

static void test_tsc_reads(void)
{
    sw_clock_init(true);
    CHECK_EQ(sw_clock_tsc_on(), tsc);
    read_for(SW_CLOCK_CAL_NS / 1000000 + 5); /* the rate is taken over the first 20 ms */
    uint64_t s0 = slow_reads();
    long n = read_for(350);
    uint64_t slow = slow_reads() - s0;
    printf("tsc %s: %ld reads in 350 ms, %llu of them clock_gettime()\n", tsc ? "on" : "off", n,
           (unsigned long long)slow);
    CHECK(n > 10000);
    if (tsc)
        CHECK(slow <= 10); /* one a 100 ms, and a few a thread preempted mid-check took */
    else
        CHECK_EQ(slow, n);
}

static void test_shift(void)
{
    if (!tsc)
        return;
    sw_clock_init(true);
    read_for(30);
    /* A mapping 5 ms off: the next check (within SW_CLOCK_SPAN_NS) re-bases it. */
    sw_clock_test_shift(5000000);
    int64_t end = mono_ns() + SW_CLOCK_SPAN_NS + 20000000;
    while (mono_ns() < end)
        (void)sw_clock_ms();
    read_for(200);
    CHECK(sw_clock_tsc_on()); /* one wrong check in a row: kept */
    uint64_t s0 = slow_reads();
    read_for(150);
    CHECK(slow_reads() - s0 <= 6);

    /* SW_CLOCK_BAD_MAX wrong checks in a row: the TSC is given up, values stay right. */
    for (int i = 0; i < SW_CLOCK_BAD_MAX; i++) {
        CHECK(sw_clock_tsc_on());
        sw_clock_test_shift(5000000);
        sw_clock_test_expire(); /* checked at the next read */
        CHECK(read_ok(NULL));
    }
    CHECK(!sw_clock_tsc_on());
    s0 = slow_reads();
    long n = read_for(50);
    CHECK_EQ(slow_reads() - s0, n);
}

#if SW_CLOCK_HAVE_TSC
/* The mapping's error now, in ns: its value for a TSC reading against the clock_gettime()
   read between it and the next one (the narrowest of 50 such pairs). */
static int64_t map_error_ns(void)
{
    uint64_t best_w = UINT64_MAX, mid = 0;
    int64_t real = 0;
    for (int i = 0; i < 50; i++) {
        struct timespec ts;
        uint64_t a = __rdtsc();
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t b = __rdtsc();
        if (b > a && b - a < best_w) {
            best_w = b - a;
            mid = a + (b - a) / 2;
            real = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
        }
    }
    uint64_t mult = atomic_load(&sw_clock_map.mult), base = atomic_load(&sw_clock_map.tsc);
    int64_t ns = atomic_load(&sw_clock_map.ns);
    CHECK(mult != 0 && mid > base);
    return ns + (int64_t)(((unsigned __int128)(mid - base) * mult) >> 32) - real;
}
#endif

/* A check whose TSC/clock_gettime() pair is interrupted between its two readings (a softirq,
   another task): the mapping is not re-based on it, or its spans would be stamped ahead of
   other processes' by up to half the pair's width for the next 100 ms. */
static void test_interrupted_pair(void)
{
#if SW_CLOCK_HAVE_TSC
    if (!tsc)
        return;
    sw_clock_init(true);
    read_for(SW_CLOCK_CAL_NS / 1000000 + 30);
    for (int i = 0; i < 5; i++) {
        sw_clock_test_expire();
        atomic_store(&sw_clock_test_pair_delay, 100000); /* 45 µs at 2.2 GHz, < PAIR_MAX_TICKS */
        CHECK(read_ok(NULL));
        CHECK_EQ(atomic_load(&sw_clock_test_pair_delay), 0); /* the check took the late pair */
        int64_t e = map_error_ns();
        printf("interrupted pair %d: the mapping is %lld ns off\n", i, (long long)e);
        CHECK(e > -5000 && e < 5000);
    }
#endif
}

/* A mapping ahead of CLOCK_REALTIME, then a check that returns to it: no value goes back
   (the span that started on the mapping and ends after the check). A step back of a second
   or more is followed, as clock_gettime() would. */
static void test_never_back(void)
{
    if (!tsc)
        return;
    sw_clock_init(true);
    read_for(30);
    sw_clock_test_shift(3000000); /* 3 ms ahead */
    int64_t v1 = sw_clock_ms();
    CHECK(v1 >= real_ms() + 2);
    sw_clock_test_expire(); /* the next read checks: clock_gettime(), 3 ms behind v1 */
    int64_t v2 = sw_clock_ms();
    CHECK(v2 >= v1);
    int64_t end = mono_ns() + 10000000;
    int64_t last = v2;
    while (mono_ns() < end) {
        int64_t v = sw_clock_ms();
        CHECK(v >= last);
        last = v;
    }
    CHECK(read_ok(NULL)); /* back on CLOCK_REALTIME */

    sw_clock_test_shift(5000000000LL); /* 5 s ahead: as if the system clock stepped back */
    CHECK(sw_clock_ms() >= real_ms() + 4000);
    sw_clock_test_expire();
    CHECK(read_ok(NULL)); /* followed, not held for 5 s */
    read_for(20);
}

static void test_fork_held(void)
{
    if (!tsc)
        return;
    sw_clock_init(true);
    read_for(30);
    sw_clock_test_hold(); /* as if a thread of this process was re-basing at the fork */
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        sw_clock_after_fork();
        read_for(SW_CLOCK_SPAN_NS / 1000000 + 30); /* correct from the start; calibrates */
        uint64_t s0 = slow_reads();
        read_for(60);
        _exit(slow_reads() - s0 <= 3 ? 0 : 3);
    }
    /* Here the mapping stays held: every read is a clock_gettime(), and right. */
    uint64_t s0 = slow_reads();
    long n = read_for(40);
    CHECK_EQ(slow_reads() - s0, n);
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st));
    CHECK_EQ(WEXITSTATUS(st), 0);
}

/* read_for(), and each thread's values never go back. */
static void *reader(void *arg)
{
    (void)arg;
    int64_t end = mono_ns() + 300000000, last = 0;
    while (mono_ns() < end) {
        int64_t v;
        CHECK(read_ok(&v));
        CHECK(v >= last);
        last = v;
    }
    return NULL;
}

static void test_threads(void)
{
    sw_clock_init(true);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        CHECK_EQ(pthread_create(&th[i], NULL, reader, NULL), 0);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(pthread_join(th[i], NULL), 0);
    CHECK_EQ(sw_clock_tsc_on(), tsc);
}

int main(void)
{
    tsc = machine_has_tsc();
    printf("this machine %s an invariant TSC that its kernel keeps time with\n",
           tsc ? "has" : "lacks");
    test_off();
    test_tsc_reads();
    test_shift();
    test_interrupted_pair();
    test_never_back();
    test_fork_held();
    test_threads();
    printf("test_clock: ok\n");
    return 0;
}
