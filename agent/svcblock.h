/*
 * svcblock.h - the per-service shared block: one page in the runtime directory, next to the
 * rings, shared by every traced process of one service and instance on the host (nginx workers,
 * php-fpm children, preforked servers) and by the reporter. It holds
 *   - the sampling quota (agent.sample_n_per_3_secs): one sw_sampler word, so the N per 3 s is
 *     shared by all those processes instead of counted by each;
 *   - the dynamic configuration the reporter got from OAP's ConfigurationDiscoveryService
 *     (CDS), published under a seqlock.
 *
 * File: `svc-<16 hex>.sws` (FNV-1a 64 of service, NUL, instance), 0600 in the 0700 runtime
 * directory. Made by whichever side comes first: written whole under a temporary name, then
 * link(2)ed to its name, so nobody ever sees a half-made block; the loser of a race opens the
 * winner's. A block is opened only when it is a regular file of ours, mode 0600, exactly
 * SW_SVC_BYTES, with our magic, version and size, and names its service and instance in full:
 * anything else (garbage, truncated, another service's after a hash collision) is refused and
 * the process keeps its own quota and its file's configuration (logged once). Nothing read from
 * the block is trusted: the hot path's values are checked and copied into the process first.
 *
 * Quota: the sampler word (sampler.h) lives in the block. It is one 64-bit CAS word (window,
 * count): no lock, nothing held, so a process killed at any instruction leaves a word that is
 * either counted or not; a garbage word only ends that window's budget early (at most 3 s).
 *
 * Dynamic configuration: a seqlock. The writer (the reporter) makes `seq` odd, stores the
 * words of `struct sw_svc_dyn`, then makes `seq` even again (release); a reader copies the
 * words (relaxed atomics) between two reads of `seq` and keeps the copy only when both are the
 * same even value. A writer killed while writing leaves `seq` odd: readers keep what they had,
 * and the next writer goes on from there (it never waits).
 *
 * In the traced process (svcblock.c, application side): sw_svc_eff() is the hot path's view,
 * one load of the block's `seq` and one of the value last seen, then the process's own copy of
 * the effective values (immutable once published; see sw_svc_eff). When `seq` moved, one
 * thread rebuilds that copy (noinline, no lock: the others go on with the old copy meanwhile).
 */
#ifndef SW_SVCBLOCK_H
#define SW_SVCBLOCK_H

#include "common.h"

#include "config.h"
#include "sampler.h"

#define SW_SVC_MAGIC 0x314b4c4253544753ull /* "SGTSBLK1" little-endian */
#define SW_SVC_VERSION 1
#define SW_SVC_BYTES 4096u
#define SW_SVC_NAME_MAX 128
#define SW_SVC_UUID_MAX 136 /* OAP's UUID: 128 hex digits of a SHA-512 */

/* Keys OAP may set at runtime (bits of sw_svc_dyn.set). */
#define SW_DYN_SAMPLE 1u        /* agent.sample_n_per_3_secs */
#define SW_DYN_IGNORE_SUFFIX 2u /* agent.ignore_suffix */
#define SW_DYN_SPAN_LIMIT 4u    /* agent.span_limit_per_segment */
#define SW_DYN_ALL (SW_DYN_SAMPLE | SW_DYN_IGNORE_SUFFIX | SW_DYN_SPAN_LIMIT)

/* What the reporter publishes: the keys OAP sets now; a key not in `set` is the file's. */
struct sw_svc_dyn {
    uint32_t set; /* SW_DYN_* */
    int32_t sample_n_per_3_secs;
    int32_t span_limit_per_segment; /* 1..65535 when SW_DYN_SPAN_LIMIT is set */
    uint32_t reserved;
    uint64_t applied_ms;              /* epoch ms the reporter applied this answer */
    char uuid[SW_SVC_UUID_MAX];       /* the answer's UUID ("" before the first) */
    struct sw_cfg_list ignore_suffix; /* valid when SW_DYN_IGNORE_SUFFIX is set */
};

/* A mapping of one block; layout private to svcblock.c. */
struct sw_svc;

/*
 * The block file name for (service, instance) into out (at least 32 bytes):
 * `svc-<16 hex>.sws`.
 */
void sw_svc_name(const char *service, const char *instance, char *out, size_t cap);

/*
 * Opens the block of (service, instance) in runtime directory `dir`, creating it when missing
 * and `create` is set. Init or slow path only (syscalls; no malloc: the handle is an anonymous
 * page). Returns 0 and sets *out, -ENOENT (missing, !create), -EBADMSG (a file that is not a
 * valid block of this service and instance: left alone) or another negative errno. errno kept.
 */
int sw_svc_open(const char *dir, const char *service, const char *instance, bool create,
                struct sw_svc **out);

/* Opens the block file `path` whatever service it names (`swagent status`): the same checks
   but the names. 0, -EBADMSG or a negative errno. */
int sw_svc_open_file(const char *path, struct sw_svc **out);

/* Unmaps the block and frees the handle. NULL is allowed. */
void sw_svc_close(struct sw_svc *b);

/* The quota word in the block. */
struct sw_sampler *sw_svc_quota(struct sw_svc *b);

/* The seqlock word (the hot path compares it with the value it last saw). */
const _Atomic uint64_t *sw_svc_seq(const struct sw_svc *b);

/*
 * Reads the dynamic configuration (seqlock). Returns true and fills *out (validated: counts
 * clamped, strings NUL-terminated, the list re-indexed) with a consistent copy; false when the
 * writer was writing (the caller keeps what it had). *seq_out is the seq value read first.
 */
bool sw_svc_read(const struct sw_svc *b, struct sw_svc_dyn *out, uint64_t *seq_out);

/* Publishes `dyn` (the reporter). A write that changes nothing is skipped (seq unchanged)
   unless `force`. */
void sw_svc_publish(struct sw_svc *b, const struct sw_svc_dyn *dyn, bool force);

/* The reporter's last answer from OAP for this service (epoch ms; status only, no seqlock). */
void sw_svc_set_polled(struct sw_svc *b, uint64_t ms);
uint64_t sw_svc_polled(const struct sw_svc *b);

/* The service and instance the block names (validated at open). */
const char *sw_svc_service(const struct sw_svc *b);
const char *sw_svc_instance(const struct sw_svc *b);

/* ---- application side (libswagent.so): the process's effective values ---- */

/*
 * The values the hot path reads, immutable once published (see sw_svc_eff). `quota` points
 * into the shared block, or at the process's own sampler when there is none.
 */
struct sw_eff {
    int sample_n_per_3_secs;
    int span_limit_per_segment;
    const struct sw_cfg_list *ignore_suffix;
    struct sw_sampler *quota;
    uint32_t from_oap; /* SW_DYN_* keys that come from OAP */
};

struct sw_svc_view {
    const _Atomic uint64_t *_Atomic seq; /* the block's seq, or a constant word */
    _Atomic uint64_t seen;               /* the seq the current `eff` was made for */
    const struct sw_eff *_Atomic eff;
};
extern struct sw_svc_view sw_svc_view;

/*
 * Binds the view to `cfg` (the file's values) before any request; `local_quota` is the
 * process's own sampler (used until, or instead of, a shared block). `dir_fn` resolves the
 * runtime directory for the current uid when the block is first needed (on the first request,
 * not at load: an nginx worker changes uid after fork). Init only.
 */
typedef int (*sw_svc_dir_fn)(char *out, size_t cap);
void sw_svc_init(const struct sw_config *cfg, struct sw_sampler *local_quota, sw_svc_dir_fn dir_fn);

/* The slow path of sw_svc_eff: attaches the block the first time, re-reads it when it moved. */
void sw_svc_refresh(void);

/*
 * The effective values for this request: two loads and a compare when nothing changed.
 * Application threads: no lock, no allocation, no syscall (but the first call of a process,
 * which opens the block: a few syscalls, once).
 */
static inline const struct sw_eff *sw_svc_eff(void)
{
    if (SW_UNLIKELY(sw_atomic_load_relaxed(sw_atomic_load_acquire(&sw_svc_view.seq)) !=
                    sw_atomic_load_relaxed(&sw_svc_view.seen)))
        sw_svc_refresh();
    return sw_atomic_load_acquire(&sw_svc_view.eff);
}

/* agent.span_limit_per_segment in force (for a span joining a segment: no refresh here, the
   request's entry made it). */
static inline int sw_svc_span_limit(void)
{
    return sw_atomic_load_acquire(&sw_svc_view.eff)->span_limit_per_segment;
}

/* In the atfork child: keeps the parent's block (the same service and instance share the
   quota); forgets an attach the fork interrupted. */
void sw_svc_after_fork(void);

#ifdef SW_TESTING
/* Makes the next sw_svc_eff() read the configuration again (a test changed its sw_config). */
void sw_svc_test_reload(void);
/* The process's block (NULL when none), for tests. */
struct sw_svc *sw_svc_test_attached(void);
size_t sw_svc_test_off_seq(void);
#endif

#endif /* SW_SVCBLOCK_H */
