/*
 * svcblock.c - the per-service shared block (see svcblock.h for the contract).
 *
 * Rules:
 * - sw_svc_eff (inline) runs on application threads: loads only. sw_svc_refresh is its slow
 *   path: once per process it opens the block (syscalls, like the ring's creation on the first
 *   segment), later it copies the block's configuration (no syscall, no allocation, no lock: a
 *   thread that finds another refreshing goes on with the current values).
 * - File syscalls use raw syscall(2) for the names the agent interposes (openat, close), as
 *   ring.c, because this file is linked into libswagent.so. errno is kept.
 * - The mapping is untrusted input (another process may have written anything): it is checked
 *   at open, and every value copied out of it is validated before the hot path sees it.
 */
#include "common.h"

#include "log.h"
#include "svcblock.h"

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define DYN_WORDS ((sizeof(struct sw_svc_dyn) + 7) / 8)

/* The shared page. */
struct svc_shared {
    _Atomic uint64_t magic; /* SW_SVC_MAGIC, stored last at creation (release) */
    uint32_t version;       /* SW_SVC_VERSION */
    uint32_t bytes;         /* SW_SVC_BYTES */
    char service[SW_SVC_NAME_MAX];
    char instance[SW_SVC_NAME_MAX];
    uint64_t created_ms;
    _Atomic uint64_t polled_ms; /* the reporter's last answer from OAP (status only) */
    _Alignas(64) struct sw_sampler quota;
    _Alignas(64) _Atomic uint64_t seq; /* seqlock of dyn: odd while written */
    _Atomic uint64_t dyn[DYN_WORDS];   /* struct sw_svc_dyn, word by word */
};
_Static_assert(sizeof(struct svc_shared) <= SW_SVC_BYTES, "svc block larger than its page");

struct sw_svc {
    struct svc_shared *sh;
    char service[SW_SVC_NAME_MAX];
    char instance[SW_SVC_NAME_MAX];
};

static int sys_close(int fd)
{
    return (int)syscall(SYS_close, fd);
}

static uint64_t epoch_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void sw_svc_name(const char *service, const char *instance, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    uint64_t h = 14695981039346656037ull;
    for (const char *s = service;; s++) {
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
        if (!*s)
            break;
    }
    for (const char *s = instance; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    char name[32];
    memcpy(name, "svc-", 4);
    for (int i = 0; i < 16; i++)
        name[4 + i] = hex[(h >> (60 - 4 * i)) & 15];
    memcpy(name + 20, ".sws", 5);
    if (cap > 0) {
        size_t n = cap - 1 < 24 ? cap - 1 : 24;
        memcpy(out, name, n);
        out[n] = '\0';
    }
}

static bool name_fits(const char *s)
{
    return strnlen(s, SW_SVC_NAME_MAX) < SW_SVC_NAME_MAX;
}

/* Maps an open block file and checks it is the block of (service, instance). */
static int map_checked(int fd, const char *service, const char *instance, struct svc_shared **out)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -errno;
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 07777) != 0600 ||
        st.st_size != (off_t)SW_SVC_BYTES)
        return -EBADMSG;
    void *m = mmap(NULL, SW_SVC_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return -errno;
    struct svc_shared *sh = m;
    if (sw_atomic_load_acquire(&sh->magic) != SW_SVC_MAGIC || sh->version != SW_SVC_VERSION ||
        sh->bytes != SW_SVC_BYTES || !name_fits(sh->service) || !name_fits(sh->instance) ||
        (service && strncmp(sh->service, service, SW_SVC_NAME_MAX) != 0) ||
        (instance && strncmp(sh->instance, instance, SW_SVC_NAME_MAX) != 0)) {
        munmap(m, SW_SVC_BYTES);
        return -EBADMSG;
    }
    *out = sh;
    return 0;
}

/* Makes a whole block under a temporary name and links it to `name`. -EEXIST: someone was
   first (open theirs). */
static int create_linked(int dfd, const char *name, const char *service, const char *instance,
                         struct svc_shared **out)
{
    char tmp[64];
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t r = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&ts;
    static const char hex[] = "0123456789abcdef";
    size_t n = strlen(name);
    memcpy(tmp, name, n);
    tmp[n++] = '.';
    for (int i = 0; i < 12; i++)
        tmp[n++] = hex[(r >> (4 * i)) & 15];
    memcpy(tmp + n, ".tmp", 5);
    int fd = (int)syscall(SYS_openat, dfd, tmp, O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_RDWR,
                          0600);
    if (fd < 0)
        return -errno;
    int rc = 0;
    void *m = MAP_FAILED;
    (void)fchmod(fd, 0600);
    if (ftruncate(fd, SW_SVC_BYTES) != 0) {
        rc = -errno;
        goto out;
    }
    m = mmap(NULL, SW_SVC_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        rc = -errno;
        goto out;
    }
    struct svc_shared *sh = m;
    sh->version = SW_SVC_VERSION;
    sh->bytes = SW_SVC_BYTES;
    memcpy(sh->service, service, strlen(service) + 1);
    memcpy(sh->instance, instance, strlen(instance) + 1);
    sh->created_ms = epoch_ms();
    sw_atomic_store_release(&sh->magic, SW_SVC_MAGIC);
    if (syscall(SYS_linkat, dfd, tmp, dfd, name, 0) != 0) {
        rc = -errno;
        munmap(m, SW_SVC_BYTES);
        goto out;
    }
    *out = sh;
out:
    syscall(SYS_unlinkat, dfd, tmp, 0);
    sys_close(fd);
    return rc;
}

/* A handle (an anonymous page: no malloc in the agent) for the checked mapping `sh`, with a
   private copy of its names. On failure the mapping is undone. */
static int handle_make(struct svc_shared *sh, struct sw_svc **out)
{
    struct sw_svc *b =
        mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED) {
        munmap(sh, SW_SVC_BYTES);
        return -ENOMEM;
    }
    b->sh = sh;
    memcpy(b->service, sh->service, SW_SVC_NAME_MAX);
    memcpy(b->instance, sh->instance, SW_SVC_NAME_MAX);
    b->service[SW_SVC_NAME_MAX - 1] = b->instance[SW_SVC_NAME_MAX - 1] = '\0';
    *out = b;
    return 0;
}

int sw_svc_open(const char *dir, const char *service, const char *instance, bool create,
                struct sw_svc **out)
{
    int saved = errno;
    int rc;
    if (!name_fits(service) || !name_fits(instance))
        return -ENAMETOOLONG;
    int dfd =
        (int)syscall(SYS_openat, AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        rc = -errno;
        errno = saved;
        return rc;
    }
    char name[32];
    sw_svc_name(service, instance, name, sizeof(name));
    struct svc_shared *sh = NULL;
    rc = -ENOENT;
    for (int tries = 0; tries < 3 && !sh; tries++) {
        int fd = (int)syscall(SYS_openat, dfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
            rc = map_checked(fd, service, instance, &sh);
            sys_close(fd);
            break;
        }
        rc = errno == ELOOP ? -EBADMSG : -errno;
        if (rc != -ENOENT || !create)
            break;
        rc = create_linked(dfd, name, service, instance, &sh);
        if (rc != -EEXIST)
            break;
    }
    sys_close(dfd);
    if (rc == 0)
        rc = handle_make(sh, out);
    errno = saved;
    return rc;
}

int sw_svc_open_file(const char *path, struct sw_svc **out)
{
    int saved = errno;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int rc = errno == ELOOP ? -EBADMSG : -errno;
        errno = saved;
        return rc;
    }
    struct svc_shared *sh = NULL;
    int rc = map_checked(fd, NULL, NULL, &sh);
    sys_close(fd);
    if (rc == 0)
        rc = handle_make(sh, out);
    errno = saved;
    return rc;
}

void sw_svc_close(struct sw_svc *b)
{
    if (!b)
        return;
    SW_SAVE_ERRNO({
        munmap(b->sh, SW_SVC_BYTES);
        munmap(b, sizeof(*b));
    });
}

struct sw_sampler *sw_svc_quota(struct sw_svc *b)
{
    return &b->sh->quota;
}

const _Atomic uint64_t *sw_svc_seq(const struct sw_svc *b)
{
    return &b->sh->seq;
}

const char *sw_svc_service(const struct sw_svc *b)
{
    return b->service;
}

const char *sw_svc_instance(const struct sw_svc *b)
{
    return b->instance;
}

void sw_svc_set_polled(struct sw_svc *b, uint64_t ms)
{
    sw_atomic_store_relaxed(&b->sh->polled_ms, ms);
}

uint64_t sw_svc_polled(const struct sw_svc *b)
{
    return sw_atomic_load_relaxed(&b->sh->polled_ms);
}

/* Makes a copy read from shared memory safe to use: whatever its bytes, bounded strings and
   counts, and list filters that match its items. */
static void dyn_sanitize(struct sw_svc_dyn *d)
{
    d->set &= SW_DYN_ALL;
    if (d->span_limit_per_segment < 1 || d->span_limit_per_segment > 65535)
        d->set &= ~SW_DYN_SPAN_LIMIT;
    d->uuid[SW_SVC_UUID_MAX - 1] = '\0';
    struct sw_cfg_list *l = &d->ignore_suffix;
    if (l->n < 0 || l->n > SW_CFG_LIST_MAX)
        l->n = 0;
    for (int i = 0; i < SW_CFG_LIST_MAX; i++)
        l->item[i][SW_CFG_ITEM_MAX - 1] = '\0';
    for (int i = 0; i < l->n; i++)
        if (l->item[i][0] == '\0') /* an empty item would match nothing; keep the list dense */
            l->n = i;
    sw_cfg_list_index(l);
}

bool sw_svc_read(const struct sw_svc *b, struct sw_svc_dyn *out, uint64_t *seq_out)
{
    const struct svc_shared *sh = b->sh;
    uint64_t words[DYN_WORDS];
    for (int tries = 0; tries < 4; tries++) {
        uint64_t s1 = sw_atomic_load_acquire(&sh->seq);
        if (tries == 0)
            *seq_out = s1;
        if (s1 & 1)
            return false; /* being written (or its writer died): keep what we have */
        for (size_t i = 0; i < DYN_WORDS; i++)
            words[i] = sw_atomic_load_relaxed(&sh->dyn[i]);
        atomic_thread_fence(memory_order_acquire);
        if (sw_atomic_load_relaxed(&sh->seq) == s1) {
            memcpy(out, words, sizeof(*out));
            dyn_sanitize(out);
            *seq_out = s1;
            return true;
        }
    }
    return false;
}

void sw_svc_publish(struct sw_svc *b, const struct sw_svc_dyn *dyn, bool force)
{
    struct svc_shared *sh = b->sh;
    uint64_t words[DYN_WORDS];
    memset(words, 0, sizeof(words));
    memcpy(words, dyn, sizeof(*dyn));
    if (!force) {
        bool same = true;
        for (size_t i = 0; i < DYN_WORDS && same; i++)
            same = sw_atomic_load_relaxed(&sh->dyn[i]) == words[i];
        if (same && !(sw_atomic_load_relaxed(&sh->seq) & 1))
            return;
    }
    uint64_t s = sw_atomic_load_relaxed(&sh->seq);
    if (s & 1)
        s++; /* a writer died in the middle: go on from there */
    sw_atomic_store_relaxed(&sh->seq, s + 1);
    atomic_thread_fence(memory_order_release);
    for (size_t i = 0; i < DYN_WORDS; i++)
        sw_atomic_store_relaxed(&sh->dyn[i], words[i]);
    sw_atomic_store_release(&sh->seq, s + 2);
}

/* ---------------------------------------------------------------- application side */

/*
 * The process's effective values: EFF_SLOTS immutable slots used in turn. A slot is written
 * again only EFF_SLOTS - 1 publications later (each one a change made by an operator in OAP,
 * seen at most once per poll interval), long after any thread that loaded its pointer for one
 * request is done with it; and whatever a reader would see there is a valid list (bounded).
 */
#define EFF_SLOTS 8
struct eff_slot {
    struct sw_eff eff;
    struct sw_cfg_list list; /* OAP's agent.ignore_suffix, when it sets one */
};

static const struct sw_config *g_cfg;
static struct sw_sampler *g_local_quota;
static sw_svc_dir_fn g_dir_fn;
static struct eff_slot g_slots[EFF_SLOTS];
static unsigned g_next_slot;
static struct sw_svc *g_blk;
static _Atomic int g_attach; /* 0: not tried, 1: being made, 2: done (g_blk set or failed) */
static _Atomic bool g_busy;  /* a thread is refreshing */
static _Atomic uint64_t g_none_seq = 1; /* the seq word while there is no block */

struct sw_svc_view sw_svc_view = {&g_none_seq, 0, &g_slots[0].eff};

/* Fills the next slot from the file's values and `d` (NULL: no block), and publishes it. */
static void eff_publish(const struct sw_svc_dyn *d, struct sw_sampler *quota)
{
    struct eff_slot *sl = &g_slots[g_next_slot++ % EFF_SLOTS];
    sl->eff.quota = quota;
    sl->eff.from_oap = d ? d->set : 0;
    sl->eff.sample_n_per_3_secs =
        d && (d->set & SW_DYN_SAMPLE) ? d->sample_n_per_3_secs : g_cfg->sample_n_per_3_secs;
    sl->eff.span_limit_per_segment =
        d && (d->set & SW_DYN_SPAN_LIMIT)
            ? d->span_limit_per_segment
            : (g_cfg->span_limit_per_segment > 0 ? g_cfg->span_limit_per_segment : 300);
    if (d && (d->set & SW_DYN_IGNORE_SUFFIX)) {
        sl->list = d->ignore_suffix;
        sl->eff.ignore_suffix = &sl->list;
    } else {
        sl->eff.ignore_suffix = &g_cfg->ignore_suffix;
    }
    sw_atomic_store_release(&sw_svc_view.eff, &sl->eff);
}

void sw_svc_init(const struct sw_config *cfg, struct sw_sampler *local_quota, sw_svc_dir_fn dir_fn)
{
    g_cfg = cfg;
    g_local_quota = local_quota;
    if (g_blk) { /* initialised again (tests) */
        sw_svc_close(g_blk);
        g_blk = NULL;
    }
    g_dir_fn = dir_fn;
    g_next_slot = 0;
    sw_atomic_store_relaxed(&g_attach, 0);
    sw_atomic_store_relaxed(&sw_svc_view.seen, 0);
    sw_atomic_store_relaxed(&sw_svc_view.seq, &g_none_seq);
    eff_publish(NULL, local_quota);
}

static void attach(void)
{
    char dir[1024];
    int rc = g_dir_fn ? g_dir_fn(dir, sizeof(dir)) : -ENOENT;
    struct sw_svc *b = NULL;
    if (rc == 0)
        rc = sw_svc_open(dir, g_cfg->service_name, g_cfg->instance_name, true, &b);
    if (rc < 0) {
        if (rc == -EBADMSG)
            SW_LOGW("svc: the shared block of service %s instance %s in %s is not valid "
                    "(ignored): this process samples on its own and takes no configuration "
                    "from OAP; remove the file to share again",
                    g_cfg->service_name, g_cfg->instance_name, dir);
        else
            SW_LOGW("svc: no shared block for service %s (error %d): this process samples on "
                    "its own and takes no configuration from OAP",
                    g_cfg->service_name, -rc);
        return;
    }
    g_blk = b;
    eff_publish(NULL, sw_svc_quota(b));
    sw_atomic_store_release(&sw_svc_view.seq, sw_svc_seq(b));
}

SW_NOINLINE void sw_svc_refresh(void)
{
    if (!g_cfg)
        return;
    int saved = errno;
    bool f = false;
    if (!atomic_compare_exchange_strong_explicit(&g_busy, &f, true, memory_order_acquire,
                                                 memory_order_relaxed)) {
        errno = saved;
        return;
    }
    int a = 0;
    if (atomic_compare_exchange_strong_explicit(&g_attach, &a, 1, memory_order_acq_rel,
                                                memory_order_relaxed)) {
        attach();
        sw_atomic_store_release(&g_attach, 2);
    }
    if (!g_blk) {
        eff_publish(NULL, g_local_quota);
        sw_atomic_store_relaxed(&sw_svc_view.seen, sw_atomic_load_relaxed(&g_none_seq));
    } else {
        struct sw_svc_dyn d;
        uint64_t s;
        if (sw_svc_read(g_blk, &d, &s)) {
            const struct sw_eff *cur = sw_atomic_load_relaxed(&sw_svc_view.eff);
            uint32_t was = cur->from_oap;
            eff_publish(&d, sw_svc_quota(g_blk));
            if (d.set != was || (d.set & SW_DYN_SAMPLE))
                SW_LOGI("svc: configuration from OAP (uuid %.*s...): agent.sample_n_per_3_secs=%d "
                        "(%s), agent.ignore_suffix %s",
                        16, d.uuid[0] ? d.uuid : "none",
                        sw_atomic_load_relaxed(&sw_svc_view.eff)->sample_n_per_3_secs,
                        (d.set & SW_DYN_SAMPLE) ? "OAP" : "agent.config",
                        (d.set & SW_DYN_IGNORE_SUFFIX) ? "from OAP" : "from agent.config");
        }
        sw_atomic_store_relaxed(&sw_svc_view.seen, s);
    }
    sw_atomic_store_release(&g_busy, false);
    errno = saved;
}

void sw_svc_after_fork(void)
{
    /* Only the forking thread exists: an attach or refresh another thread was making stays
       unfinished forever unless reset here. */
    int a = 1;
    if (atomic_compare_exchange_strong_explicit(&g_attach, &a, 0, memory_order_relaxed,
                                                memory_order_relaxed))
        sw_atomic_store_relaxed(&sw_svc_view.seen, 0);
    sw_atomic_store_relaxed(&g_busy, false);
}

#ifdef SW_TESTING
void sw_svc_test_reload(void)
{
    sw_atomic_store_relaxed(&sw_svc_view.seen, UINT64_MAX);
}

struct sw_svc *sw_svc_test_attached(void)
{
    return g_blk;
}

size_t sw_svc_test_off_seq(void)
{
    return offsetof(struct svc_shared, seq);
}
#endif
