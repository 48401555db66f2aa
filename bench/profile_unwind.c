/*
 * profile_unwind.c - what one profile sample costs the sampled thread (docs/profiling.md):
 * a SIGEV_THREAD_ID timer signals a thread that spins 25 frames deep (frame pointers kept),
 * and the handler captures the stack in one of these ways, timed with CLOCK_MONOTONIC:
 *   fp       the agent's capture (agent/profile.c): a frame-pointer walk bounded by the
 *            thread's stack, registers and 4 KiB of stack copied (profile.stack_bytes)
 *   unw_bt   libunwind's unw_backtrace (1.6.2: DWARF, dl_iterate_phdr, caches)
 *   unw_step unw_init_local2(UNW_INIT_SIGNAL_FRAME) and unw_step per frame
 * then the signal round trip alone (tgkill to itself, empty handler) and the walks in normal
 * context.
 *   usage: sw_bench_profile_unwind [samples]   (default 2000)
 */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define DEPTH 25
#define MAXF 128

static int g_mode; /* 0 none, 1 fp, 2 unw_bt, 3 unw_step */
static volatile int g_samples;
static double g_ns_sum;
static float g_ns[16384]; /* each sample's time in the handler */
static int g_frames_sum;
static uintptr_t g_lo, g_hi;
static uint8_t g_rec[8192];
static volatile unsigned long sink;

static double now_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int fp_walk(uintptr_t pc, uintptr_t fp, uintptr_t sp, uint64_t *f, int max)
{
    int n = 0;
    f[n++] = pc;
    uintptr_t prev = sp;
    while (n < max && fp >= prev && fp >= g_lo && fp <= g_hi - 16 && (fp & 7) == 0) {
        const uintptr_t *p = (const uintptr_t *)fp;
        if (p[1] < 4096)
            break;
        f[n++] = p[1];
        if (p[0] <= fp)
            break;
        prev = fp;
        fp = p[0];
    }
    return n;
}

static void on_sig(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    (void)si;
    ucontext_t *uc = ucv;
    uint64_t f[MAXF];
    int n = 0;
    double t0 = now_ns(CLOCK_MONOTONIC);
    if (g_mode == 1) {
        uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
        n = fp_walk((uintptr_t)uc->uc_mcontext.gregs[REG_RIP],
                    (uintptr_t)uc->uc_mcontext.gregs[REG_RBP], sp, f, MAXF);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);                /* the record's time */
        size_t copy = g_hi - sp < 4096 ? g_hi - sp : 4096; /* profile.stack_bytes */
        memcpy(g_rec, (const void *)sp, copy);
        memcpy(g_rec + 4096, f, (size_t)n * 8);
    } else if (g_mode == 2) {
        n = unw_backtrace((void **)f, MAXF);
    } else if (g_mode == 3) {
        unw_cursor_t c;
        if (unw_init_local2(&c, uc, UNW_INIT_SIGNAL_FRAME) == 0) {
            do {
                unw_word_t ip;
                unw_get_reg(&c, UNW_REG_IP, &ip);
                f[n++] = ip;
            } while (n < MAXF && unw_step(&c) > 0);
        }
    }
    if (g_mode) {
        double dt = now_ns(CLOCK_MONOTONIC) - t0;
        g_ns_sum += dt;
        g_frames_sum += n;
        if (g_samples < (int)(sizeof(g_ns) / sizeof(g_ns[0])))
            g_ns[g_samples] = (float)dt;
    }
    g_samples++;
}

static int by_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

__attribute__((noinline)) static void spin(long iters)
{
    for (long i = 0; i < iters; i++)
        sink += (unsigned long)i;
}

__attribute__((noinline)) static void deep(int d, long iters, void (*leaf)(long))
{
    if (d > 0)
        deep(d - 1, iters, leaf);
    else
        leaf(iters);
    sink++;
}

static long g_normal_n;
static double g_normal_ns[2];
static int g_normal_frames[2];

__attribute__((noinline)) static void normal_walks(long n)
{
    uint64_t f[MAXF];
    for (int m = 0; m < 2; m++) {
        int frames = 0;
        double t0 = now_ns(CLOCK_MONOTONIC);
        for (long i = 0; i < n; i++) {
            if (m == 0) {
                uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
                frames = fp_walk((uintptr_t)normal_walks, fp, fp, f, MAXF);
            } else {
                frames = unw_backtrace((void **)f, MAXF);
            }
        }
        g_normal_ns[m] = (now_ns(CLOCK_MONOTONIC) - t0) / (double)n;
        g_normal_frames[m] = frames;
    }
}

/* Thread stack bounds from /proc/self/maps (the agent does the same at arm time). */
static void stack_bounds(void)
{
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    while (f && fgets(line, sizeof(line), f)) {
        unsigned long a, b;
        if (sscanf(line, "%lx-%lx", &a, &b) == 2 && sp >= a && sp < b) {
            g_lo = a;
            g_hi = b;
        }
    }
    if (f)
        fclose(f);
}

int main(int argc, char **argv)
{
    int want = argc > 1 ? atoi(argv[1]) : 2000;
    stack_bounds();
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_sig;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGRTMAX - 3, &sa, NULL);
    struct sigevent ev;
    memset(&ev, 0, sizeof(ev));
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = SIGRTMAX - 3;
    ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    timer_t tm;
    if (timer_create(CLOCK_MONOTONIC, &ev, &tm) != 0) {
        perror("timer_create");
        return 1;
    }
    /* Work calibrated to `want` ms of CPU. */
    double t0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    deep(DEPTH, 10000000, spin);
    double per_iter = (now_ns(CLOCK_THREAD_CPUTIME_ID) - t0) / 1e7;
    long iters = (long)((double)want * 1e6 / per_iter);
    static const char *const names[] = {"none", "fp (agent)", "unw_backtrace", "unw_step"};
    printf("%d frames deep, about %d samples at 1 kHz per way\n", DEPTH + 3, want);
    for (int mode = 1; mode < 4; mode++) {
        g_mode = mode;
        g_samples = 0;
        g_ns_sum = 0;
        g_frames_sum = 0;
        struct itimerspec its = {{0, 1000000}, {0, 1000000}};
        timer_settime(tm, 0, &its, NULL);
        deep(DEPTH, iters, spin);
        struct itimerspec off = {{0, 0}, {0, 0}};
        timer_settime(tm, 0, &off, NULL);
        int s = g_samples ? g_samples : 1;
        int k = g_samples < 16384 ? g_samples : 16384;
        qsort(g_ns, (size_t)k, sizeof(g_ns[0]), by_float);
        printf("  %-14s %5d samples, %3d frames, in the handler: median %6.2f us, p90 %6.2f us, "
               "mean %6.2f us\n",
               names[mode], g_samples, g_frames_sum / s, k ? g_ns[k / 2] / 1e3 : 0.0,
               k ? g_ns[k * 9 / 10] / 1e3 : 0.0, g_ns_sum / s / 1e3);
    }
    /* The signal itself: delivery to this thread, an empty handler, sigreturn. */
    g_mode = 0;
    pid_t pid = getpid(), tid = (pid_t)syscall(SYS_gettid);
    double best = 1e18;
    for (int r = 0; r < 5; r++) {
        t0 = now_ns(CLOCK_MONOTONIC);
        for (int i = 0; i < 20000; i++)
            syscall(SYS_tgkill, pid, tid, SIGRTMAX - 3);
        double per = (now_ns(CLOCK_MONOTONIC) - t0) / 20000;
        if (per < best)
            best = per;
    }
    printf("  signal round trip (tgkill, empty handler, return): %.2f us (best of 5 x 20000)\n",
           best / 1e3);
    g_normal_n = 20000;
    deep(DEPTH, g_normal_n, normal_walks);
    printf("  normal context: fp %.3f us (%d frames), unw_backtrace %.3f us (%d frames)\n",
           g_normal_ns[0] / 1e3, g_normal_frames[0], g_normal_ns[1] / 1e3, g_normal_frames[1]);
    return 0;
}
