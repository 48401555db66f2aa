/*
 * profile.h - trace profiling (SkyWalking ProfileTask): the contract between swagent-reporter,
 * which polls tasks and writes the active one into a per-service task page, and libswagent.so,
 * which samples the threads of matching slow requests and writes raw samples into its ring.
 * docs/profiling.md has the whole design; this file holds the shared layouts and the agent's
 * hooks.
 *
 * Task page: the file `profile-<16 hex: FNV-1a 64 of the service name>.swp` in the runtime
 * directory (0600, one 4 KiB page), created by whichever side comes first, mapped MAP_SHARED by
 * the reporter (writer) and by every traced process of that service (reader). The reporter
 * writes a task under a seqlock (`seq` odd while writing) and sets `active`; a traced process
 * reads `active` with one load per sampled entry span and nothing else while it is 0.
 * `traces_taken` counts the traces profiled under the task across all processes of the service
 * (MaxSamplingCount), taken with a CAS by the application at a trace's first sample.
 *
 * Ring records (ring.h, record types apart from SW_REC_SEGMENT), all little-endian, no padding:
 *   SW_REC_PROF_SAMPLE: u8 version (1); u8 flags (bit0: the thread was in a wait wrapper);
 *     u16 nframes; u32 periods (the sample stands for this many dump periods: > 1 when the
 *     timer's signal was held during a wait, see below); u64 task_key; u8 uuid[16]; u32 tid;
 *     u64 seg_value (segment id = record.h's sw_rec_id_text of uuid, tid, seg_value);
 *     i64 time_ms (epoch ms of the sample); u32 period_ms; u64 maps_gen;
 *     u64 regs[8]: rip, rsp, rbp, rbx, r12, r13, r14, r15 of the interrupted context;
 *     u16 nwords; nwords x u64: the stack from the interrupted sp up (profile.stack_bytes,
 *     within the thread's stack), which the reporter unwinds with the modules' CFI (libdwfl),
 *     through code built without frame pointers;
 *     nframes x u64 address (leaf first; the leaf is the interrupted pc, the others return
 *     addresses of the frame-pointer chain).
 *   SW_REC_PROF_MAPS: u8 version (1); u8 pad[3]; u32 count; u64 maps_gen; then count x
 *     { u64 start; u64 end; u64 offset; str path } of the executable file mappings (and
 *     "[vdso]") of
 *     /proc/self/maps when the first sample of a task was armed in this process, so that the
 *     reporter symbolises samples of processes that have exited.
 *
 * Runs on application threads (the hooks): one load while no task is active. With a task:
 * the matching check at an entry span, then timer_create/timer_settime for a watched request
 * (a rare path: MaxSamplingCount <= 9 traces per task), a signal handler that walks frame
 * pointers within the thread's stack and writes one record, and the wait wrappers' signal hold
 * (interpose.c). No malloc, no locks, no stdio anywhere.
 */
#ifndef SW_PROFILE_H
#define SW_PROFILE_H

#include "common.h"

#include <signal.h>

#define SW_PROF_MAGIC 0x31464f5250575357ull /* "SWPROF1" */
#define SW_PROF_VERSION 1
#define SW_PROF_PAGE_BYTES 4096u
#define SW_PROF_ENDPOINT_MAX 256
#define SW_PROF_TASK_ID_MAX 128
#define SW_PROF_MAX_FRAMES 128   /* frames captured per sample (leaf side) */
#define SW_PROF_STACK_WORDS 1024 /* stack words from sp kept per sample at most (8 KiB) */
#define SW_PROF_REGS 8           /* rip, rsp, rbp, rbx, r12..r15 */

#define SW_REC_PROF_SAMPLE 16 /* ring record types (record.h has SW_REC_SEGMENT = 1) */
#define SW_REC_PROF_MAPS 17
#define SW_PROF_REC_VERSION 1
#define SW_PROF_SAMPLE_WAIT 0x01u

struct sw_prof_page {
    uint64_t magic;                /* SW_PROF_MAGIC once the reporter wrote a task */
    uint32_t version;              /* SW_PROF_VERSION */
    uint32_t size;                 /* sizeof(struct sw_prof_page) */
    _Atomic uint64_t seq;          /* seqlock: odd while the reporter writes the fields below */
    _Atomic uint32_t active;       /* 1 while the task below runs (start_ms <= now < end_ms) */
    uint32_t endpoint_len;         /* bytes of endpoint */
    uint64_t task_key;             /* the task's CreateTime: names it in sample records */
    int64_t start_ms;              /* the task's StartTime (epoch ms) */
    int64_t end_ms;                /* StartTime + Duration */
    uint32_t min_duration_ms;      /* MinDurationThreshold */
    uint32_t dump_period_ms;       /* DumpPeriod */
    uint32_t max_sampling_count;   /* MaxSamplingCount */
    _Atomic uint32_t traces_taken; /* traces that had their first sample under task_key */
    char endpoint[SW_PROF_ENDPOINT_MAX]; /* EndpointName: the first span's operation name */
    char task_id[SW_PROF_TASK_ID_MAX];   /* TaskId (for the logs) */
};

/* The file name of a service's task page (no directory), NUL-terminated, in out[40]. */
static inline void sw_prof_page_name(const char *service, char out[40])
{
    static const char hex[] = "0123456789abcdef";
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)service; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    char *o = out;
    for (const char *q = "profile-"; *q; q++)
        *o++ = *q;
    for (int i = 15; i >= 0; i--)
        *o++ = hex[(h >> (4 * i)) & 15];
    for (const char *q = ".swp"; *q; q++)
        *o++ = *q;
    *o = '\0';
}

/* ---- agent side (libswagent.so) ---- */

/* What the hot path reads: the mapped task page, or a zero page while none is mapped. */
extern const struct sw_prof_page *_Atomic sw_prof_page_now SW_HIDDEN;

/* Per thread: nonzero while the thread has an armed sampling timer (the wait wrappers look). */
extern __thread __attribute__((tls_model("initial-exec"))) int sw_prof_armed SW_HIDDEN;

/* Number of watched requests in this process (the end hook looks). */
extern _Atomic int sw_prof_watching SW_HIDDEN;

/*
 * Maps the task page of this process's service (trace.c, once the ring exists: the runtime
 * directory is known then). Init-time path: syscalls, no allocation. Failure is logged once and
 * leaves profiling off.
 */
struct sw_ring;
struct sw_config;
void sw_profile_attach(const char *dir, const char *service, struct sw_ring *ring,
                       const struct sw_config *c);

/* atfork child: no timer survives fork; forget the watched requests (the page stays mapped). */
void sw_profile_after_fork(void);

/*
 * Before an exec (interpose.c's exec wrappers): the exec deletes the process's timers, but an
 * expiry already queued for the calling thread (held by a mask the application set) would be
 * delivered in the new image, where the signal's action is the default again (terminate). In
 * a process that ever installed the handler: every timer is deleted and such expiries are
 * taken (sigtimedwait, no wait), the application's mask as it was. errno is kept.
 */
void sw_profile_before_exec(void);

/* A task is active for this process's service: one load (trace.c's unsampled requests). */
static inline bool sw_profile_on(void)
{
    return SW_UNLIKELY(sw_atomic_load_relaxed(&sw_atomic_load_relaxed(&sw_prof_page_now)->active) !=
                       0);
}

/*
 * The active task would watch a request with this method and path now: it matches the
 * endpoint, the task runs, and MaxSamplingCount is not reached. (trace.c asks before it makes
 * an unsampled request keepable for profiling: issue 39 item 4, docs/profiling.md.)
 */
bool sw_profile_wants(const char *method, size_t ml, const char *path, size_t pl);

/* sw_profile_entry's slow path: the task is active. True when the request is watched. */
bool sw_profile_entry_slow(uint64_t h, const char *method, size_t ml, const char *path, size_t pl,
                           uint32_t tid, uint64_t seg_value, int64_t start_ms);

/*
 * A sampled entry span began (trace.c): handle `h`, the request's method and path (its
 * operation name is method ":" path), its segment id's numbers, its start. One load while no
 * task is active.
 */
static inline void sw_profile_entry(uint64_t h, const char *method, size_t ml, const char *path,
                                    size_t pl, uint32_t tid, uint64_t seg_value, int64_t start_ms)
{
    if (SW_UNLIKELY(sw_atomic_load_relaxed(&sw_atomic_load_relaxed(&sw_prof_page_now)->active)))
        (void)sw_profile_entry_slow(h, method, ml, path, pl, tid, seg_value, start_ms);
}

/* sw_profile_end's slow path: some request is watched. */
bool sw_profile_end_slow(uint64_t h);

/*
 * The entry span `h` ended (finish or abort, trace.c), or its watch is given up: the timer is
 * deleted. True when `h` was watched and had a sample taken (a snapshot names its segment).
 * One load while nothing is watched.
 */
static inline bool sw_profile_end(uint64_t h)
{
    if (SW_UNLIKELY(sw_atomic_load_relaxed(&sw_prof_watching) != 0))
        return sw_profile_end_slow(h);
    return false;
}

/* `h` is watched and had a sample taken already (its segment must be reported). */
bool sw_profile_sampled(uint64_t h);

/*
 * The wait wrappers (interpose.c) of a thread with an armed timer: the profiling signal is held
 * (blocked) across the wait, so the wait is never interrupted (no EINTR the application would
 * not have seen); the timer's expiry stays pending and is delivered when sw_prof_wait_end
 * restores the mask, where the handler samples the wrapper's stack once for all the periods
 * that passed (the record's `periods`, from the timer's overrun count). errno is kept.
 */
void sw_prof_wait_begin(sigset_t *saved);
void sw_prof_wait_end(const sigset_t *saved);

/*
 * The mask a wait that installs its own (ppoll, pselect, epoll_pwait, sigsuspend) should use
 * instead of `mask`: the same with the profiling signal added, in `tmp`. Returns `mask` when
 * the thread has no armed timer or `mask` is NULL.
 */
const sigset_t *sw_prof_wait_mask(const sigset_t *mask, sigset_t *tmp);

#define SW_PROF_WAITING() SW_UNLIKELY(sw_prof_armed != 0)

#endif /* SW_PROFILE_H */
