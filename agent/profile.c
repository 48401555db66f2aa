/*
 * profile.c - trace profiling in the application (docs/profiling.md, profile.h).
 *
 * Runs on application threads. While no task is active for the service the only cost is one
 * load per sampled entry span (sw_profile_entry) and one per request end (sw_profile_end): no
 * timer, no signal handler installed. With a task:
 *   - a sampled request whose operation name equals the task's endpoint claims one of
 *     profile.max_parallel slots; its thread gets a timer (timer_create, SIGEV_THREAD_ID, the
 *     profile.signal real-time signal) whose first expiry is at MinDurationThreshold after the
 *     request's start and then every DumpPeriod. This arming path reads /proc/self/maps (the
 *     thread's stack bounds, and the mappings record for the reporter) with raw syscalls into
 *     static buffers held by a try-lock: no allocation, no blocking (a busy lock skips the
 *     request);
 *   - the handler (async-signal-safe: atomics, vDSO clock, the lock-free ring) walks frame
 *     pointers from the interrupted context, reading only inside the thread's stack mapping
 *     (aligned, strictly increasing frames), and writes one SW_REC_PROF_SAMPLE record;
 *   - wait wrappers (interpose.c) hold the signal across waits, see sw_prof_wait_begin;
 *   - the request's end deletes the timer and frees the slot.
 * Nothing here allocates, locks, or uses stdio; errno is kept everywhere.
 */
#include "common.h"

#include "config.h"
#include "id.h"
#include "log.h"
#include "profile.h"
#include "record.h"
#include "ring.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define SLOTS 16 /* profile.max_parallel at most */

enum { S_FREE, S_SETUP, S_ARMED, S_DONE };

struct slot {
    _Atomic int state;    /* S_* */
    _Atomic uint64_t gen; /* bumped when the slot is claimed and freed (handler's check) */
    uint64_t h;           /* the entry handle watched */
    const int *owner;     /* &sw_prof_armed of the watched thread (identifies it) */
    int timer;            /* kernel timer id */
    uint32_t tid;         /* segment id parts (record.h) */
    uint64_t seg_value;
    uint64_t task_key;  /* the task it was armed under */
    uint32_t period_ms; /* DumpPeriod */
    uint32_t max_count; /* MaxSamplingCount */
    uintptr_t stack_lo; /* the thread's stack mapping, [lo, hi) */
    uintptr_t stack_hi;
    _Atomic bool counted; /* the trace took its MaxSamplingCount unit (first sample) */
};

static const struct sw_prof_page g_zero_page; /* read while no page is mapped */
const struct sw_prof_page *_Atomic sw_prof_page_now SW_HIDDEN = &g_zero_page;
static struct sw_prof_page *g_page; /* the mapping (sw_profile_attach's thread only) */
__thread __attribute__((tls_model("initial-exec"))) int sw_prof_armed SW_HIDDEN;
/* volatile: only the signal handler reads it (the stores around the mask call must stay). */
static __thread __attribute__((tls_model("initial-exec"))) volatile int t_in_wait_end;
_Atomic int sw_prof_watching SW_HIDDEN;
static struct slot g_slots[SLOTS];
static int g_nslots = 5;
static uint32_t g_stack_words = 512;   /* profile.stack_bytes / 8 */
static const struct sw_config *g_cfg;  /* kept by sw_profile_attach */
static int g_sig;                      /* the profiling signal, once chosen */
static _Atomic int g_handler;          /* 0 not installed, 1 installed, -1 refused */
static struct sw_ring *_Atomic g_ring; /* this process's ring (sw_profile_attach) */
static _Atomic bool g_scratch_busy;    /* the try-lock of the buffers below */
static _Atomic uint64_t g_maps_task;   /* task whose mappings record this process wrote */
static _Atomic uint64_t g_maps_gen;    /* generation of the last mappings record */
static _Atomic bool g_logged_signal;   /* "signal in use" logged */
static _Atomic int g_timer_pid;        /* the process whose timers the slots hold */
static char g_rdbuf[4096];             /* /proc/self/maps chunks */
static uint8_t g_maps_rec[64 * 1024];  /* the mappings record being built */

/* The task page (the zero page while none is mapped: `active` 0, nothing is written to it). */
static struct sw_prof_page *page_now(void)
{
    return (struct sw_prof_page *)atomic_load_explicit(&sw_prof_page_now, memory_order_acquire);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* vDSO: async-signal-safe, no syscall in practice */
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sw_profile_attach(const char *dir, const char *service, struct sw_ring *ring,
                       const struct sw_config *c)
{
    g_cfg = c;
    atomic_store(&g_ring, ring);
    if (!c || !c->profile_active || g_page)
        return;
    g_stack_words = (uint32_t)(c->profile_stack_bytes / 8);
    if (g_stack_words > SW_PROF_STACK_WORDS)
        g_stack_words = SW_PROF_STACK_WORDS;
    g_nslots = c->profile_max_parallel > 0 && c->profile_max_parallel <= SLOTS
                   ? c->profile_max_parallel
                   : 5;
    char name[40], path[SW_CFG_PATH_MAX + 48];
    sw_prof_page_name(service, name);
    size_t dl = strlen(dir);
    if (dl + 1 + strlen(name) + 1 > sizeof(path))
        return;
    memcpy(path, dir, dl);
    path[dl] = '/';
    memcpy(path + dl + 1, name, strlen(name) + 1);
    int fd =
        (int)syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        SW_LOGW("profile: cannot open the task page %s (error %d): no profiling", path, errno);
        return;
    }
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_size != 0 && st.st_size != SW_PROF_PAGE_BYTES) ||
        (st.st_size == 0 && syscall(SYS_ftruncate, fd, (off_t)SW_PROF_PAGE_BYTES) != 0)) {
        SW_LOGW("profile: %s is not a task page of ours: no profiling", path);
        syscall(SYS_close, fd);
        return;
    }
    /* libc's mmap, as ring.c and svcblock.c: a sanitizer runtime intercepts it to map the
     * region's shadow (a raw SYS_mmap left TSan's shadow of the page unmapped: SIGBUS at the
     * first load of `active` in test_trace and test_proto_spans under TSan). */
    void *p = mmap(NULL, SW_PROF_PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    syscall(SYS_close, fd);
    if (p == MAP_FAILED)
        return;
    g_page = p;
    sw_atomic_store_release(&sw_prof_page_now, (const struct sw_prof_page *)p);
}

void sw_profile_after_fork(void)
{
    /* Timers are not inherited; the parent's watched requests are not ours. */
    for (int i = 0; i < SLOTS; i++) {
        atomic_store(&g_slots[i].state, S_FREE);
        atomic_fetch_add(&g_slots[i].gen, 1);
    }
    atomic_store(&sw_prof_watching, 0);
    sw_prof_armed = 0;
    t_in_wait_end = 0;
    atomic_store(&g_ring, NULL);
    atomic_store(&g_maps_task, 0);
    atomic_store(&g_scratch_busy, false);
}

/* Reads the task fields under the page's seqlock. False when no stable copy was read. */
static bool read_task(struct sw_prof_page *out)
{
    const struct sw_prof_page *p = page_now();
    for (int tries = 0; tries < 4; tries++) {
        uint64_t s1 = atomic_load_explicit(&p->seq, memory_order_acquire);
        if (s1 & 1)
            continue;
        out->magic = p->magic;
        out->endpoint_len = p->endpoint_len;
        out->task_key = p->task_key;
        out->start_ms = p->start_ms;
        out->end_ms = p->end_ms;
        out->min_duration_ms = p->min_duration_ms;
        out->dump_period_ms = p->dump_period_ms;
        out->max_sampling_count = p->max_sampling_count;
        if (out->endpoint_len > SW_PROF_ENDPOINT_MAX)
            return false;
        memcpy(out->endpoint, p->endpoint, out->endpoint_len);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&p->seq, memory_order_relaxed) == s1)
            return out->magic == SW_PROF_MAGIC;
    }
    return false;
}

/* True when method ":" path equals the endpoint (the operation name trace.c gives the span). */
static bool endpoint_match(const struct sw_prof_page *t, const char *m, size_t ml, const char *p,
                           size_t pl)
{
    if (pl == 0) {
        p = "/";
        pl = 1;
    }
    size_t want = (ml ? ml + 1 : 0) + pl;
    if (t->endpoint_len != want)
        return false;
    if (ml && (memcmp(t->endpoint, m, ml) != 0 || t->endpoint[ml] != ':'))
        return false;
    return memcmp(t->endpoint + (ml ? ml + 1 : 0), p, pl) == 0;
}

static void on_signal(int sig, siginfo_t *si, void *ucv);

/* Installs the handler once. False when the signal is the application's (logged once). */
static bool handler_ready(void)
{
    int st = atomic_load(&g_handler);
    if (st != 0)
        return st > 0;
    const struct sw_config *c = g_cfg;
    int sig = c && c->profile_signal > 0 ? c->profile_signal : SIGRTMAX - 3;
    if (sig < SIGRTMIN || sig > SIGRTMAX) {
        if (!atomic_exchange(&g_logged_signal, true))
            SW_LOGW("profile: profile.signal %d is not a real-time signal (%d..%d): no profiling",
                    sig, SIGRTMIN, SIGRTMAX);
        atomic_store(&g_handler, -1);
        return false;
    }
    struct sigaction old, sa;
    memset(&sa, 0, sizeof(sa));
    if (sigaction(sig, NULL, &old) != 0 ||
        ((old.sa_flags & SA_SIGINFO) ? old.sa_sigaction != on_signal : old.sa_handler != SIG_DFL)) {
        if (!atomic_exchange(&g_logged_signal, true))
            SW_LOGW("profile: signal %d (profile.signal) has a handler of the application: no "
                    "profiling in this process",
                    sig);
        atomic_store(&g_handler, -1);
        return false;
    }
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    g_sig = sig;
    if (sigaction(sig, &sa, NULL) != 0) {
        atomic_store(&g_handler, -1);
        return false;
    }
    atomic_store(&g_handler, 1);
    return true;
}

/* The handler is still ours (the application may have replaced it since). */
static bool handler_still_ours(void)
{
    struct sigaction cur;
    return sigaction(g_sig, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
           cur.sa_sigaction == on_signal;
}

static uint64_t hexval(const char **s, const char *end)
{
    uint64_t v = 0;
    const char *p = *s;
    while (p < end) {
        char c = *p;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            break;
        v = v << 4 | (uint64_t)d;
        p++;
    }
    *s = p;
    return v;
}

struct maps_scan {
    uintptr_t sp;       /* find the mapping that holds it */
    uintptr_t lo, hi;   /* found: the stack mapping */
    struct sw_wbuf rec; /* the mappings record (when wanted) */
    uint32_t count;
    bool want_rec;
};

/* One line of /proc/self/maps. */
static void maps_line(struct maps_scan *m, const char *l, const char *end)
{
    const char *p = l;
    uint64_t start = hexval(&p, end);
    if (p >= end || *p != '-')
        return;
    p++;
    uint64_t stop = hexval(&p, end);
    if (p + 5 >= end)
        return;
    bool exec = p[3] == 'x';
    p += 6;
    uint64_t off = hexval(&p, end);
    if (m->sp >= start && m->sp < stop) {
        m->lo = start;
        m->hi = stop;
    }
    if (!m->want_rec || !exec)
        return;
    const char *path = memchr(p, '/', (size_t)(end - p));
    if (!path) /* the vDSO (the reporter unwinds and names it with its own copy) */
        path = end - p >= 6 && memcmp(end - 6, "[vdso]", 6) == 0 ? end - 6 : NULL;
    if (!path)
        return;
    sw_wbuf_i64(&m->rec, (int64_t)start);
    sw_wbuf_i64(&m->rec, (int64_t)stop);
    sw_wbuf_i64(&m->rec, (int64_t)off);
    sw_wbuf_str(&m->rec, path, (size_t)(end - path));
    if (!m->rec.overflow)
        m->count++;
}

/* Reads /proc/self/maps (raw syscalls, g_rdbuf). Lines longer than the buffer are skipped. */
static bool maps_scan(struct maps_scan *m)
{
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    size_t have = 0;
    for (int guard = 0; guard < 100000; guard++) {
        ssize_t n = syscall(SYS_read, fd, g_rdbuf + have, sizeof(g_rdbuf) - have);
        if (n <= 0)
            break;
        have += (size_t)n;
        size_t at = 0;
        for (;;) {
            char *nl = memchr(g_rdbuf + at, '\n', have - at);
            if (!nl)
                break;
            maps_line(m, g_rdbuf + at, nl);
            at = (size_t)(nl - g_rdbuf) + 1;
        }
        if (at == 0 && have == sizeof(g_rdbuf))
            have = 0; /* a line longer than the buffer: dropped */
        else {
            memmove(g_rdbuf, g_rdbuf + at, have - at);
            have -= at;
        }
    }
    syscall(SYS_close, fd);
    return m->hi != 0;
}

/*
 * Finds the calling thread's stack mapping and, once per task in this process, writes the
 * mappings record. Holds the scratch try-lock; false when busy or the stack is not found.
 */
static bool arm_scan(uint64_t task_key, uintptr_t *lo, uintptr_t *hi)
{
    bool expect = false;
    if (!atomic_compare_exchange_strong(&g_scratch_busy, &expect, true))
        return false;
    struct maps_scan m;
    memset(&m, 0, sizeof(m));
    m.sp = (uintptr_t)__builtin_frame_address(0);
    m.want_rec = atomic_load(&g_maps_task) != task_key;
    uint64_t gen = atomic_load(&g_maps_gen) + 1;
    if (m.want_rec) {
        sw_wbuf_init(&m.rec, g_maps_rec, sizeof(g_maps_rec));
        sw_wbuf_u8(&m.rec, SW_PROF_REC_VERSION);
        sw_wbuf_put(&m.rec, "\0\0\0", 3);
        sw_wbuf_u32(&m.rec, 0); /* count, patched below */
        sw_wbuf_i64(&m.rec, (int64_t)gen);
    }
    bool ok = maps_scan(&m);
    struct sw_ring *r = atomic_load(&g_ring);
    if (ok && m.want_rec && r) {
        m.rec.p[4] = (uint8_t)m.count;
        m.rec.p[5] = (uint8_t)(m.count >> 8);
        m.rec.p[6] = (uint8_t)(m.count >> 16);
        m.rec.p[7] = (uint8_t)(m.count >> 24);
        void *dst = sw_ring_reserve(r, (uint32_t)m.rec.len, SW_REC_PROF_MAPS);
        if (dst) {
            memcpy(dst, m.rec.p, m.rec.len);
            sw_ring_commit(r, dst);
            atomic_store(&g_maps_gen, gen);
            atomic_store(&g_maps_task, task_key);
        }
    }
    *lo = m.lo;
    *hi = m.hi;
    atomic_store_explicit(&g_scratch_busy, false, memory_order_release);
    return ok;
}

bool sw_profile_wants(const char *method, size_t ml, const char *path, size_t pl)
{
    if (!path)
        return false;
    struct sw_prof_page t;
    if (!read_task(&t) || !endpoint_match(&t, method, ml, path, pl))
        return false;
    int64_t now = now_ms();
    return now >= t.start_ms && now < t.end_ms && t.dump_period_ms != 0 &&
           atomic_load(&page_now()->traces_taken) < t.max_sampling_count;
}

bool sw_profile_entry_slow(uint64_t h, const char *method, size_t ml, const char *path, size_t pl,
                           uint32_t tid, uint64_t seg_value, int64_t start_ms)
{
    if (!h || !path)
        return false;
    int saved = errno;
    bool armed = false;
    struct sw_prof_page t;
    if (!read_task(&t) || !endpoint_match(&t, method, ml, path, pl))
        goto out;
    int64_t now = now_ms();
    if (now < t.start_ms || now >= t.end_ms || t.dump_period_ms == 0 ||
        atomic_load(&page_now()->traces_taken) >= t.max_sampling_count)
        goto out;
    /* No ring yet (a forked child before its first segment: the page is its parent's
       mapping): nowhere to write samples, so not watched (nor counted). */
    if (!atomic_load(&g_ring) || !handler_ready() || !handler_still_ours())
        goto out;
    int k = -1;
    for (int i = 0; i < g_nslots; i++) {
        int expect = S_FREE;
        if (atomic_compare_exchange_strong(&g_slots[i].state, &expect, S_SETUP)) {
            k = i;
            break;
        }
    }
    if (k < 0)
        goto out; /* profile.max_parallel requests are watched already */
    struct slot *s = &g_slots[k];
    atomic_fetch_add(&s->gen, 1);
    uintptr_t lo, hi;
    if (!arm_scan(t.task_key, &lo, &hi))
        goto release;
    struct sigevent ev;
    memset(&ev, 0, sizeof(ev));
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = g_sig;
    ev.sigev_value.sival_int = k;
    ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    int timer;
    if (syscall(SYS_timer_create, CLOCK_MONOTONIC, &ev, &timer) != 0)
        goto release; /* e.g. EAGAIN under RLIMIT_SIGPENDING */
    atomic_store(&g_timer_pid, (int)syscall(SYS_getpid));
    s->h = h;
    s->owner = &sw_prof_armed;
    s->timer = timer;
    s->tid = tid;
    s->seg_value = seg_value;
    s->task_key = t.task_key;
    s->period_ms = t.dump_period_ms;
    s->max_count = t.max_sampling_count;
    s->stack_lo = lo;
    s->stack_hi = hi;
    atomic_store(&s->counted, false);
    int64_t first = start_ms + (int64_t)t.min_duration_ms - now;
    if (first < 1)
        first = 1;
    struct itimerspec its = {
        {(time_t)(t.dump_period_ms / 1000), (long)(t.dump_period_ms % 1000) * 1000000L},
        {(time_t)(first / 1000), (long)(first % 1000) * 1000000L}};
    sw_prof_armed++;
    atomic_fetch_add(&sw_prof_watching, 1);
    atomic_fetch_add(&s->gen, 1);
    atomic_store_explicit(&s->state, S_ARMED, memory_order_release);
    syscall(SYS_timer_settime, timer, 0, &its, NULL);
    armed = true;
    goto out;
release:
    atomic_fetch_add(&s->gen, 1);
    atomic_store(&s->state, S_FREE);
out:
    errno = saved;
    return armed;
}

bool sw_profile_sampled(uint64_t h)
{
    for (int i = 0; i < g_nslots; i++) {
        struct slot *s = &g_slots[i];
        int st = atomic_load_explicit(&s->state, memory_order_acquire);
        if ((st == S_ARMED || st == S_DONE) && s->h == h && atomic_load(&s->counted))
            return true;
    }
    return false;
}

bool sw_profile_end_slow(uint64_t h)
{
    int saved = errno;
    bool sampled = false;
    for (int i = 0; i < g_nslots; i++) {
        struct slot *s = &g_slots[i];
        int st = atomic_load_explicit(&s->state, memory_order_acquire);
        if ((st != S_ARMED && st != S_DONE) || s->h != h)
            continue;
        if (!atomic_compare_exchange_strong(&s->state, &st, S_SETUP))
            continue;
        if (s->timer >= 0)
            syscall(SYS_timer_delete, s->timer); /* (an expiry already queued may stay) */
        sampled = sampled || atomic_load(&s->counted);
        if (s->owner == &sw_prof_armed)
            sw_prof_armed--;
        /* (ended on another thread: that thread's flag stays set, so its waits keep holding
           the signal: a cost of two sigprocmask calls per wait, never a wrong result) */
        atomic_fetch_sub(&sw_prof_watching, 1);
        atomic_fetch_add(&s->gen, 1);
        atomic_store_explicit(&s->state, S_FREE, memory_order_release);
    }
    errno = saved;
    return sampled;
}

/* Disarms slot k's timer from the handler (the request's end frees it). */
static void stop_slot(struct slot *s)
{
    struct itimerspec zero;
    memset(&zero, 0, sizeof(zero));
    int st = S_ARMED;
    if (atomic_compare_exchange_strong(&s->state, &st, S_DONE))
        syscall(SYS_timer_settime, s->timer, 0, &zero, NULL);
}

/*
 * The handler reads the interrupted thread's stack as raw words, redzones of a sanitizer build
 * included: those reads are not instrumented (and not turned into an intercepted memcpy).
 */
#define SW_RAW_STACK __attribute__((no_sanitize("address"), noinline))

/* Copies n words of stack from src (inside the thread's stack mapping) into the ring record. */
static SW_RAW_STACK void stack_copy(uint8_t *dst, const volatile uint64_t *src, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint64_t v = src[i];
        for (int b = 0; b < 8; b++)
            dst[8 * i + (uint32_t)b] = (uint8_t)(v >> (8 * b));
    }
}

/* Frame-pointer walk inside [lo, hi): frames[0] is pc; returns the count. */
static SW_RAW_STACK uint32_t fp_walk(uintptr_t pc, uintptr_t fp, uintptr_t sp, uintptr_t lo,
                                     uintptr_t hi, uint64_t *frames, uint32_t max)
{
    uint32_t n = 0;
    frames[n++] = pc;
    if (sp < lo || sp >= hi)
        return n; /* another stack (sigaltstack, a coroutine): the pc alone */
    uintptr_t prev = sp;
    while (n < max && fp >= prev && fp >= lo && fp <= hi - 16 && (fp & 7) == 0) {
        const volatile uintptr_t *f = (const volatile uintptr_t *)fp;
        uintptr_t ret = f[1], next = f[0];
        if (ret < 4096)
            break;
        frames[n++] = ret;
        if (next <= fp)
            break;
        prev = fp;
        fp = next;
    }
    return n;
}

static void on_signal(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    int saved = errno;
    if (!si || si->si_code != SI_TIMER || si->si_value.sival_int < 0 ||
        si->si_value.sival_int >= SLOTS)
        goto out;
    struct slot *s = &g_slots[si->si_value.sival_int];
    uint64_t g1 = atomic_load_explicit(&s->gen, memory_order_acquire);
    if (atomic_load_explicit(&s->state, memory_order_acquire) != S_ARMED ||
        s->owner != &sw_prof_armed)
        goto out;
    uint64_t task = s->task_key, segv = s->seg_value;
    uint32_t tid = s->tid, period = s->period_ms, maxc = s->max_count;
    uintptr_t lo = s->stack_lo, hi = s->stack_hi;
    if (atomic_load_explicit(&s->gen, memory_order_acquire) != g1)
        goto out;
    struct sw_prof_page *pg = page_now();
    if (!atomic_load_explicit(&pg->active, memory_order_relaxed) || pg->task_key != task) {
        stop_slot(s); /* the task ended or changed */
        goto out;
    }
    struct sw_ring *r = atomic_load(&g_ring);
    if (!r)
        goto out;
    if (!atomic_load(&s->counted)) {
        /* MaxSamplingCount: a trace counts at its first sample (as in the Java agent). */
        uint32_t n = atomic_load(&pg->traces_taken);
        do {
            if (n >= maxc) {
                stop_slot(s);
                goto out;
            }
        } while (!atomic_compare_exchange_weak(&pg->traces_taken, &n, n + 1));
        atomic_store(&s->counted, true);
    }
    uint64_t frames[SW_PROF_MAX_FRAMES];
    const ucontext_t *uc = ucv;
    uint32_t nf = fp_walk(
        (uintptr_t)uc->uc_mcontext.gregs[REG_RIP], (uintptr_t)uc->uc_mcontext.gregs[REG_RBP],
        (uintptr_t)uc->uc_mcontext.gregs[REG_RSP], lo, hi, frames, SW_PROF_MAX_FRAMES);
    uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
    uint32_t nw = 0;
    if (sp >= lo && sp < hi && (sp & 7) == 0) {
        nw = (uint32_t)((hi - sp) / 8);
        if (nw > g_stack_words)
            nw = g_stack_words;
    }
    uint32_t periods = 1;
    if (si->si_overrun > 0)
        periods += (uint32_t)(si->si_overrun < 100000 ? si->si_overrun : 100000);
    uint32_t len =
        1 + 1 + 2 + 4 + 8 + 16 + 4 + 8 + 8 + 4 + 8 + 8 * SW_PROF_REGS + 2 + 8 * nw + 8 * nf;
    uint8_t *p = sw_ring_reserve(r, len, SW_REC_PROF_SAMPLE);
    if (!p)
        goto out;
    struct sw_wbuf w;
    sw_wbuf_init(&w, p, len);
    sw_wbuf_u8(&w, SW_PROF_REC_VERSION);
    sw_wbuf_u8(&w, t_in_wait_end ? SW_PROF_SAMPLE_WAIT : 0);
    sw_wbuf_u16(&w, (uint16_t)nf);
    sw_wbuf_u32(&w, periods);
    sw_wbuf_i64(&w, (int64_t)task);
    sw_wbuf_put(&w, sw_id_uuid_bytes(), 16);
    sw_wbuf_u32(&w, tid);
    sw_wbuf_i64(&w, (int64_t)segv);
    sw_wbuf_i64(&w, now_ms());
    sw_wbuf_u32(&w, period);
    sw_wbuf_i64(&w, (int64_t)atomic_load(&g_maps_gen));
    static const int regs[SW_PROF_REGS] = {REG_RIP, REG_RSP, REG_RBP, REG_RBX,
                                           REG_R12, REG_R13, REG_R14, REG_R15};
    for (int i = 0; i < SW_PROF_REGS; i++)
        sw_wbuf_i64(&w, (int64_t)uc->uc_mcontext.gregs[regs[i]]);
    sw_wbuf_u16(&w, (uint16_t)nw);
    if (!w.overflow && 8 * (size_t)nw <= w.cap - w.len) {
        stack_copy(w.p + w.len, (const volatile uint64_t *)sp, nw);
        w.len += 8 * (size_t)nw;
    }
    for (uint32_t i = 0; i < nf; i++)
        sw_wbuf_i64(&w, (int64_t)frames[i]);
    sw_ring_commit(r, p);
out:
    errno = saved;
}

void sw_prof_wait_begin(sigset_t *saved)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, g_sig);
    syscall(SYS_rt_sigprocmask, SIG_BLOCK, &set, saved, _NSIG / 8);
}

void sw_prof_wait_end(const sigset_t *saved)
{
    int e = errno;
    t_in_wait_end = 1; /* a held expiry is delivered now: the handler marks the sample */
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, saved, NULL, _NSIG / 8);
    t_in_wait_end = 0;
    errno = e;
}

void sw_profile_before_exec(void)
{
    if (atomic_load(&g_handler) != 1)
        return; /* never profiled here: no timer, nothing pending */
    int saved = errno;
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, g_sig);
    syscall(SYS_rt_sigprocmask, SIG_BLOCK, &set, &old, _NSIG / 8);
    /* A vfork child shares the slots with its parent, but not its timers: it leaves both. */
    if ((int)syscall(SYS_getpid) == atomic_load(&g_timer_pid)) {
        for (int i = 0; i < g_nslots; i++) {
            struct slot *s = &g_slots[i];
            int st = atomic_load_explicit(&s->state, memory_order_acquire);
            if ((st != S_ARMED && st != S_DONE) ||
                !atomic_compare_exchange_strong(&s->state, &st, S_SETUP))
                continue;
            if (s->timer >= 0)
                syscall(SYS_timer_delete, s->timer);
            s->timer = -1; /* the exec failed: the request's end frees the slot */
            atomic_fetch_add(&s->gen, 1);
            atomic_store_explicit(&s->state, S_DONE, memory_order_release);
        }
    }
    /* Expiries queued for this thread before the timers went: taken here, bounded. */
    struct timespec zero = {0, 0};
    for (int i = 0; i < 64; i++)
        if (syscall(SYS_rt_sigtimedwait, &set, NULL, &zero, _NSIG / 8) != g_sig)
            break;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, _NSIG / 8);
    errno = saved;
}

const sigset_t *sw_prof_wait_mask(const sigset_t *mask, sigset_t *tmp)
{
    if (!mask || !sw_prof_armed || g_sig == 0)
        return mask;
    *tmp = *mask;
    sigaddset(tmp, g_sig);
    return tmp;
}
