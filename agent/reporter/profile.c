/*
 * profile.c (reporter) - ProfileTask polling, task pages, symbolisation and snapshots (see
 * profile.h here and agent/profile.h for the page and record layouts; docs/profiling.md).
 *
 * Rules: swagent-reporter's thread only. Every ring record is untrusted: each length is checked.
 * A bad task command is logged and ignored (never written to a page).
 */
#include "common.h"

#include "config.h"
#include "drain.h"
#include "log.h"
#include "profile.h"
#include "record.h"
#include "ring.h"
#include "transport.h"

#include "../profile.h"
#include "common/Command.pb-c.h"
#include "profile/Profile.pb-c.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define M_POLL "/skywalking.v3.ProfileTask/getProfileTaskCommands"
#define M_SNAPSHOT "/skywalking.v3.ProfileTask/collectSnapshot"
#define M_FINISH "/skywalking.v3.ProfileTask/reportTaskFinish"

#define MAX_TASKS 4          /* tasks remembered per service */
#define QUEUE_MAX 4500       /* snapshots waiting to be sent (the Java agent's queue) */
#define SEND_MAX 500         /* snapshots per collectSnapshot call */
#define FINISH_GRACE_MS 1500 /* after a task's end: samples still in the rings */
#define MAX_PERIODS 3000     /* snapshots made of one held sample at most */
#define MAX_SIGNATURES 500   /* frames per snapshot (the Java agent's limit) */
#define GRPC_UNIMPLEMENTED 12
#define RMAPS_UNLISTED_MS 30000 /* a ring's symboliser kept this long after it went */
#define NAME_CACHE 4096         /* frame names cached (direct-mapped), by module build-id */

enum { T_WAITING, T_RUNNING, T_ENDING, T_DONE };

struct task {
    char id[SW_PROF_TASK_ID_MAX];
    char endpoint[SW_PROF_ENDPOINT_MAX];
    int64_t create_ms, start_ms, end_ms;
    uint32_t min_ms, period_ms, max_count;
    int state;
};

struct svc {
    char service[SW_RING_NAME_MAX];
    char instance[SW_RING_NAME_MAX];
    int64_t last_command_time; /* the largest CreateTime seen (-1 at start) */
    int64_t next_poll_ms;
    bool off;                  /* the collector has no ProfileTask service */
    struct sw_prof_page *page; /* the task page, mapped */
    struct task tasks[MAX_TASKS];
    int ntasks;
    struct svc *next;
};

struct rmaps { /* one ring's mappings (SW_REC_PROF_MAPS) and its symboliser */
    uint64_t ring_id;
    uint64_t last_cursor; /* records up to here were taken (a failed batch hands them again) */
    Dwfl *dwfl;
    int attached;        /* dwfl_attach_state: 0 not yet, 1 done, -1 failed (frame pointers only) */
    int64_t unlisted_ms; /* since when the drainer no longer lists the ring (0: listed) */
    struct rmaps *next;
};

struct seqs { /* consecutive sequence per (task, segment) */
    int64_t task_key;
    char seg[96];
    int32_t next;
    int64_t last_ms;
    struct seqs *next_s;
};

struct ustate {                  /* the sample being unwound (dwarf_unwind) */
    uint64_t regs[SW_PROF_REGS]; /* rip, rsp, rbp, rbx, r12..r15 */
    uint32_t nw;
    uint64_t words[SW_PROF_STACK_WORDS];
};

/*
 * A frame's name by (build-id of its module, its file name, its offset in the module, leaf or
 * not): processes running the same modules (workers, re-started or forked processes) and
 * every sample after the first of an address reuse the name without the module's symbol
 * table or DWARF being loaded again in their own symboliser (only the ELF headers, which
 * the unwinding needs anyway). Keyed by the build-id the file opened carries, not by its
 * path: a file replaced on disk is another key. Modules without a build-id are not cached.
 */
struct name_ent {
    uint64_t key; /* FNV-1a 64 of build-id, file name, offset, leaf; 0: empty */
    uint64_t off; /* the offset itself (checked too) */
    char name[256];
};

struct sw_rprof {
    char vdso[SW_CFG_PATH_MAX + 32]; /* the reporter's own vDSO as a file ("" until made) */
    struct name_ent *names;          /* NAME_CACHE entries, or NULL (no cache) */
    uint64_t name_hits, name_misses; /* frames named from the cache / looked up */
    uint64_t sym_ns, sym_samples;    /* unwinding and naming time of the samples taken */
    struct ustate u;                 /* dwfl_attach_state's argument: stays at this address */
    const struct sw_config *cfg;
    char dir[SW_CFG_PATH_MAX];
    struct svc *svcs;
    struct rmaps *maps;
    struct seqs *seqs;
    struct sw_msg queue[QUEUE_MAX];
    size_t nqueue;
    uint64_t sent, dropped, bad_records;
};

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct sw_rprof *sw_rprof_new(const struct sw_config *c, const char *dir)
{
    if (!c->profile_active)
        return NULL;
    struct sw_rprof *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->cfg = c;
    snprintf(p->dir, sizeof(p->dir), "%s", dir);
    p->names = calloc(NAME_CACHE, sizeof(*p->names)); /* NULL: names looked up every time */
    return p;
}

void sw_rprof_free(struct sw_rprof *p)
{
    if (!p)
        return;
    for (struct svc *s = p->svcs, *n; s; s = n) {
        n = s->next;
        if (s->page)
            munmap(s->page, SW_PROF_PAGE_BYTES);
        free(s);
    }
    for (struct rmaps *m = p->maps, *n; m; m = n) {
        n = m->next;
        if (m->dwfl)
            dwfl_end(m->dwfl);
        free(m);
    }
    for (struct seqs *q = p->seqs, *n; q; q = n) {
        n = q->next_s;
        free(q);
    }
    for (size_t i = 0; i < p->nqueue; i++)
        free((void *)p->queue[i].data);
    if (p->sym_samples)
        SW_LOGI("reporter: profile: %llu samples unwound and named, %llu ns each (frame names: "
                "%llu from the cache, %llu looked up)",
                (unsigned long long)p->sym_samples,
                (unsigned long long)(p->sym_ns / p->sym_samples), (unsigned long long)p->name_hits,
                (unsigned long long)p->name_misses);
    free(p->names);
    free(p);
}

/* ---- task pages ---- */

static struct sw_prof_page *page_map(const char *dir, const char *service)
{
    char name[40], path[SW_CFG_PATH_MAX + 48];
    sw_prof_page_name(service, name);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        SW_LOGW("reporter: profile: cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    void *m = MAP_FAILED;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        (st.st_size == SW_PROF_PAGE_BYTES ||
         (st.st_size == 0 && ftruncate(fd, SW_PROF_PAGE_BYTES) == 0)))
        m = mmap(NULL, SW_PROF_PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        SW_LOGW("reporter: profile: %s is not a task page", path);
        return NULL;
    }
    return m;
}

/* Writes task `t` into the page (active) or clears `active` (t NULL), under the seqlock. */
static void page_write(struct sw_prof_page *pg, const struct task *t)
{
    if (!t) {
        atomic_store(&pg->active, 0);
        return;
    }
    uint64_t s = atomic_load(&pg->seq);
    atomic_store(&pg->seq, (s | 1) + ((s & 1) ? 0 : 0));
    atomic_thread_fence(memory_order_release);
    pg->magic = SW_PROF_MAGIC;
    pg->version = SW_PROF_VERSION;
    pg->size = sizeof(*pg);
    pg->task_key = (uint64_t)t->create_ms;
    pg->start_ms = t->start_ms;
    pg->end_ms = t->end_ms;
    pg->min_duration_ms = t->min_ms;
    pg->dump_period_ms = t->period_ms;
    pg->max_sampling_count = t->max_count;
    pg->endpoint_len = (uint32_t)strlen(t->endpoint);
    memcpy(pg->endpoint, t->endpoint, pg->endpoint_len);
    snprintf(pg->task_id, sizeof(pg->task_id), "%s", t->id);
    atomic_store(&pg->traces_taken, 0);
    atomic_store(&pg->seq, (s | 1) + 1);
    atomic_store(&pg->active, 1);
}

/* ---- tasks from commands ---- */

static const char *arg_of(const Skywalking__V3__Command *c, const char *key)
{
    for (size_t i = 0; i < c->n_args; i++)
        if (c->args[i] && c->args[i]->key && strcmp(c->args[i]->key, key) == 0)
            return c->args[i]->value;
    return NULL;
}

static bool int_arg(const Skywalking__V3__Command *c, const char *key, int64_t lo, int64_t hi,
                    int64_t *out)
{
    const char *v = arg_of(c, key);
    if (!v || !*v)
        return false;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || *end || x < lo || x > hi)
        return false;
    *out = x;
    return true;
}

/*
 * Checks one ProfileTaskQuery command (OAP's and the Java agent's limits) into *t. Returns NULL,
 * or what is wrong with it.
 */
static const char *task_parse(const Skywalking__V3__Command *c, struct task *t)
{
    memset(t, 0, sizeof(*t));
    const char *id = arg_of(c, "TaskId"), *ep = arg_of(c, "EndpointName");
    int64_t dur, minv, period, maxc, start, create;
    if (!id || !*id || strlen(id) >= sizeof(t->id))
        return "TaskId missing or too long";
    snprintf(t->id, sizeof(t->id), "%s", id);
    if (!ep || !*ep || strlen(ep) >= sizeof(t->endpoint))
        return "EndpointName missing or longer than 255 bytes";
    snprintf(t->endpoint, sizeof(t->endpoint), "%s", ep);
    if (!int_arg(c, "Duration", 1, 15, &dur))
        return "Duration is not 1..15 minutes";
    if (!int_arg(c, "MinDurationThreshold", 0, 3600 * 1000, &minv))
        return "MinDurationThreshold is not 0..3600000 ms";
    if (!int_arg(c, "DumpPeriod", 10, 60 * 1000, &period))
        return "DumpPeriod is not 10..60000 ms";
    if (!int_arg(c, "MaxSamplingCount", 1, 9, &maxc))
        return "MaxSamplingCount is not 1..9";
    if (!int_arg(c, "StartTime", 0, INT64_MAX / 2, &start))
        return "StartTime is not a time in ms";
    if (!int_arg(c, "CreateTime", 1, INT64_MAX / 2, &create))
        return "CreateTime is not a time in ms";
    t->create_ms = create;
    t->start_ms = start;
    t->end_ms = start + dur * 60000;
    t->min_ms = (uint32_t)minv;
    t->period_ms = (uint32_t)period;
    t->max_count = (uint32_t)maxc;
    t->state = T_WAITING;
    return NULL;
}

static void task_add(struct svc *s, const struct task *t)
{
    for (int i = 0; i < s->ntasks; i++) {
        const struct task *o = &s->tasks[i];
        if (strcmp(o->id, t->id) == 0)
            return; /* known already */
        if (o->state != T_DONE && t->start_ms < o->end_ms && o->start_ms < t->end_ms) {
            SW_LOGW("reporter: profile: task %s for %s ignored: its time overlaps task %s", t->id,
                    s->service, o->id);
            return;
        }
    }
    if (s->ntasks == MAX_TASKS) { /* forget the oldest finished one */
        int k = -1;
        for (int i = 0; i < s->ntasks && k < 0; i++)
            if (s->tasks[i].state == T_DONE)
                k = i;
        if (k < 0) {
            SW_LOGW("reporter: profile: task %s for %s ignored: %d tasks pending", t->id,
                    s->service, MAX_TASKS);
            return;
        }
        memmove(&s->tasks[k], &s->tasks[k + 1], (size_t)(s->ntasks - k - 1) * sizeof(*t));
        s->ntasks--;
    }
    s->tasks[s->ntasks++] = *t;
    SW_LOGI("reporter: profile: task %s for %s: endpoint \"%s\", %lld min from %lld, threshold "
            "%u ms, period %u ms, max %u traces",
            t->id, s->service, t->endpoint, (long long)((t->end_ms - t->start_ms) / 60000),
            (long long)t->start_ms, t->min_ms, t->period_ms, t->max_count);
}

/* One unary ProfileTask call with `msg` (a small message: names and ids). */
static int call_one(struct sw_transport *tr, const char *method, const ProtobufCMessage *msg,
                    uint8_t **resp, size_t *rlen)
{
    uint8_t buf[1024];
    size_t n = protobuf_c_message_get_packed_size(msg);
    if (n > sizeof(buf))
        return -EMSGSIZE;
    protobuf_c_message_pack(msg, buf);
    struct sw_msg m = {buf, n, false};
    return sw_transport_call(tr, method, &m, 1, resp, rlen);
}

static void poll_tasks(struct svc *s, struct sw_transport *tr)
{
    Skywalking__V3__ProfileTaskCommandQuery q = SKYWALKING__V3__PROFILE_TASK_COMMAND_QUERY__INIT;
    q.service = s->service;
    q.serviceinstance = s->instance;
    q.lastcommandtime = s->last_command_time;
    uint8_t *resp = NULL;
    size_t rlen = 0;
    int rc = call_one(tr, M_POLL, &q.base, &resp, &rlen);
    if (rc != 0) {
        const char *msg;
        if (sw_transport_last_status(tr, &msg) == GRPC_UNIMPLEMENTED) {
            s->off = true;
            SW_LOGI("reporter: profile: the collector has no ProfileTask service: no profiling "
                    "for %s",
                    s->service);
        }
        return;
    }
    Skywalking__V3__Commands *cmds =
        resp ? skywalking__v3__commands__unpack(NULL, rlen, resp) : NULL;
    if (resp && !cmds)
        SW_LOGW("reporter: profile: an answer to getProfileTaskCommands for %s does not parse "
                "(%zu bytes): ignored",
                s->service, rlen);
    for (size_t i = 0; cmds && i < cmds->n_commands; i++) {
        const Skywalking__V3__Command *c = cmds->commands[i];
        if (!c || !c->command || strcmp(c->command, "ProfileTaskQuery") != 0)
            continue;
        struct task t;
        const char *why = task_parse(c, &t);
        int64_t create = 0;
        if (int_arg(c, "CreateTime", 1, INT64_MAX / 2, &create) && create > s->last_command_time)
            s->last_command_time = create; /* a bad command is not fetched again */
        if (why) {
            const char *id = arg_of(c, "TaskId");
            SW_LOGW("reporter: profile: a task command for %s is ignored (task %s): %s", s->service,
                    id && *id ? id : "?", why);
            continue;
        }
        task_add(s, &t);
    }
    if (cmds)
        skywalking__v3__commands__free_unpacked(cmds, NULL);
    free(resp);
}

static int finish_task(struct svc *s, struct task *t, struct sw_transport *tr)
{
    Skywalking__V3__ProfileTaskFinishReport r = SKYWALKING__V3__PROFILE_TASK_FINISH_REPORT__INIT;
    r.service = s->service;
    r.serviceinstance = s->instance;
    r.taskid = t->id;
    int rc = call_one(tr, M_FINISH, &r.base, NULL, NULL);
    if (rc == 0)
        SW_LOGI("reporter: profile: task %s for %s finished", t->id, s->service);
    return rc;
}

static struct svc *svc_get(struct sw_rprof *p, const char *service, const char *instance)
{
    for (struct svc *s = p->svcs; s; s = s->next)
        if (strcmp(s->service, service) == 0)
            return s;
    struct svc *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    snprintf(s->service, sizeof(s->service), "%s", service);
    snprintf(s->instance, sizeof(s->instance), "%s", instance);
    s->last_command_time = -1;
    s->next = p->svcs;
    p->svcs = s;
    return s;
}

static struct task *task_by_key(struct sw_rprof *p, const char *service, int64_t key)
{
    for (struct svc *s = p->svcs; s; s = s->next)
        if (strcmp(s->service, service) == 0)
            for (int i = 0; i < s->ntasks; i++)
                if (s->tasks[i].create_ms == key)
                    return &s->tasks[i];
    return NULL;
}

/* ---- snapshots ---- */

static int send_queue(struct sw_rprof *p, struct sw_transport *tr)
{
    while (p->nqueue > 0) {
        size_t n = p->nqueue < SEND_MAX ? p->nqueue : SEND_MAX;
        int rc = sw_transport_call(tr, M_SNAPSHOT, p->queue, n, NULL, NULL);
        if (rc != 0)
            return rc;
        for (size_t i = 0; i < n; i++)
            free((void *)p->queue[i].data);
        memmove(p->queue, p->queue + n, (p->nqueue - n) * sizeof(p->queue[0]));
        p->nqueue -= n;
        p->sent += n;
    }
    return 0;
}

static void enqueue(struct sw_rprof *p, const Skywalking__V3__ThreadSnapshot *s)
{
    size_t n = skywalking__v3__thread_snapshot__get_packed_size(s);
    uint8_t *b = malloc(n ? n : 1);
    if (!b)
        return;
    skywalking__v3__thread_snapshot__pack(s, b);
    if (p->nqueue == QUEUE_MAX) { /* the oldest goes (counted) */
        free((void *)p->queue[0].data);
        memmove(p->queue, p->queue + 1, (QUEUE_MAX - 1) * sizeof(p->queue[0]));
        p->nqueue--;
        p->dropped++;
    }
    p->queue[p->nqueue++] = (struct sw_msg){b, n, false};
}

static struct seqs *seq_get(struct sw_rprof *p, int64_t task, const char *seg)
{
    for (struct seqs *q = p->seqs; q; q = q->next_s)
        if (q->task_key == task && strcmp(q->seg, seg) == 0)
            return q;
    struct seqs *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    q->task_key = task;
    snprintf(q->seg, sizeof(q->seg), "%s", seg);
    q->next_s = p->seqs;
    p->seqs = q;
    return q;
}

static struct rmaps *maps_of(struct sw_rprof *p, uint64_t ring_id, bool create)
{
    for (struct rmaps *m = p->maps; m; m = m->next)
        if (m->ring_id == ring_id)
            return m;
    if (!create)
        return NULL;
    struct rmaps *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->ring_id = ring_id;
    m->next = p->maps;
    p->maps = m;
    return m;
}

static const Dwfl_Callbacks g_dwfl_cb = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
};

struct rd {
    const uint8_t *p, *end;
    bool bad;
};

static uint64_t rd_u(struct rd *r, int n)
{
    uint64_t v = 0;
    if (r->bad || r->end - r->p < n) {
        r->bad = true;
        return 0;
    }
    for (int i = 0; i < n; i++)
        v |= (uint64_t)r->p[i] << (8 * i);
    r->p += n;
    return v;
}

/*
 * The vDSO is the same in every process of this kernel: the reporter's own, written once to
 * <runtime dir>/swagent-vdso.so, stands in for a sample process's "[vdso]" mapping.
 */
static const char *vdso_file(struct sw_rprof *p)
{
    if (p->vdso[0])
        return p->vdso[0] == '-' ? NULL : p->vdso;
    p->vdso[0] = '-';
    const void *img = (const void *)getauxval(AT_SYSINFO_EHDR);
    FILE *f = img ? fopen("/proc/self/maps", "r") : NULL;
    char line[512];
    unsigned long lo = 0, hi = 0;
    while (f && fgets(line, sizeof(line), f))
        if (strstr(line, "[vdso]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
            break;
    if (f)
        fclose(f);
    if (!img || (unsigned long)img != lo || hi <= lo)
        return NULL;
    char path[sizeof(p->vdso)];
    snprintf(path, sizeof(path), "%s/swagent-vdso.so", p->dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return NULL;
    bool ok = write(fd, img, hi - lo) == (ssize_t)(hi - lo);
    close(fd);
    if (!ok)
        return NULL;
    memcpy(p->vdso, path, strlen(path) + 1);
    return p->vdso;
}

/* SW_REC_PROF_MAPS: a new symboliser for the ring, modules reported at their load bias. */
static void take_maps(struct sw_rprof *p, uint64_t ring_id, const void *payload, uint32_t len)
{
    struct rd r = {payload, (const uint8_t *)payload + len, false};
    if (rd_u(&r, 1) != SW_PROF_REC_VERSION)
        goto bad;
    rd_u(&r, 3);
    uint32_t count = (uint32_t)rd_u(&r, 4);
    rd_u(&r, 8);
    Dwfl *d = dwfl_begin(&g_dwfl_cb);
    if (!d)
        return;
    dwfl_report_begin(d);
    /* One module per file: from the lowest (start - offset) to the highest end. */
    struct mod {
        char path[512];
        uint64_t lo, hi;
    } *mods = calloc(count ? count : 1, sizeof(*mods));
    uint32_t nm = 0;
    for (uint32_t i = 0; mods && i < count && !r.bad; i++) {
        uint64_t start = rd_u(&r, 8), end = rd_u(&r, 8), off = rd_u(&r, 8);
        uint64_t pl = rd_u(&r, 2);
        if (r.bad || (uint64_t)(r.end - r.p) < pl || pl == 0 || pl >= sizeof(mods[0].path) ||
            end <= start || off > start)
            goto bad_free;
        char path[512];
        memcpy(path, r.p, pl);
        path[pl] = '\0';
        r.p += pl;
        if (strcmp(path, "[vdso]") == 0) {
            const char *v = vdso_file(p);
            if (!v)
                continue;
            if (strlen(v) >= sizeof(path))
                continue;
            memcpy(path, v, strlen(v) + 1);
        } else if (path[0] != '/') {
            goto bad_free;
        }
        uint32_t k = 0;
        while (k < nm && strcmp(mods[k].path, path) != 0)
            k++;
        if (k == nm) {
            memcpy(mods[nm].path, path, strlen(path) + 1);
            mods[nm].lo = start - off;
            mods[nm].hi = end;
            nm++;
        } else {
            if (start - off < mods[k].lo)
                mods[k].lo = start - off;
            if (end > mods[k].hi)
                mods[k].hi = end;
        }
    }
    for (uint32_t k = 0; k < nm; k++)
        dwfl_report_module(d, mods[k].path, mods[k].lo, mods[k].hi);
    dwfl_report_end(d, NULL, NULL);
    free(mods);
    struct rmaps *m = maps_of(p, ring_id, true);
    if (!m) {
        dwfl_end(d);
        return;
    }
    if (m->dwfl)
        dwfl_end(m->dwfl);
    m->dwfl = d;
    m->attached = 0;
    return;
bad_free:
    free(mods);
    dwfl_end(d);
bad:
    p->bad_records++;
    SW_LOGW("reporter: profile: a mappings record (%u bytes) does not parse: ignored", len);
}

/*
 * The return address of the leaf at `pc` when its CFA is the stack pointer plus an offset (no
 * frame pointer set up: a leaf function, a prologue, code built without frame pointers): the
 * word at CFA - 8, from the sample's stack words. 0 otherwise (an rbp-based frame: the walk has
 * its caller already).
 */
static uint64_t leaf_return(Dwfl *d, uint64_t pc, const uint64_t *words, uint32_t nw)
{
    Dwfl_Module *m = d ? dwfl_addrmodule(d, pc) : NULL;
    Dwarf_Addr bias;
    Dwarf_CFI *cfi = m ? dwfl_module_eh_cfi(m, &bias) : NULL;
    if (!cfi)
        cfi = m ? dwfl_module_dwarf_cfi(m, &bias) : NULL;
    Dwarf_Frame *f = NULL;
    if (!cfi || dwarf_cfi_addrframe(cfi, pc - bias, &f) != 0)
        return 0;
    Dwarf_Op *ops;
    size_t nops;
    uint64_t ra = 0;
    /* A register+offset CFA comes as DW_OP_bregx (number: the register, number2: the offset);
       DWARF register 7 is rsp on x86-64. */
    if (dwarf_frame_cfa(f, &ops, &nops) == 0 && nops == 1 && ops[0].atom == DW_OP_bregx &&
        ops[0].number == 7 && ops[0].number2 >= 8 && (ops[0].number2 & 7) == 0 &&
        (ops[0].number2 - 8) / 8 < nw)
        ra = words[(ops[0].number2 - 8) / 8];
    free(f);
    return ra;
}

/*
 * Unwinding a sample's stack copy with libdwfl (dwfl_attach_state): one pretend thread whose
 * registers and memory are the sample's (p->u); memory outside the copy cannot be read, which
 * ends the walk there.
 */
static pid_t u_next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
    (void)dwfl;
    if (*thread_argp)
        return 0;
    *thread_argp = arg;
    return 1;
}

static bool u_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
    (void)dwfl;
    const struct ustate *u = arg;
    uint64_t sp = u->regs[1];
    if (addr < sp || addr - sp > (uint64_t)u->nw * 8 - 8 || u->nw == 0)
        return false;
    memcpy(result, (const uint8_t *)u->words + (addr - sp), 8);
    return true;
}

static bool u_set_registers(Dwfl_Thread *thread, void *arg)
{
    const struct ustate *u = arg;
    /* DWARF numbers (x86-64): 3 rbx, 6 rbp, 7 rsp, 12..15 r12..r15. */
    Dwarf_Word rbx = u->regs[3], bp_sp[2] = {u->regs[2], u->regs[1]};
    Dwarf_Word r12_15[4] = {u->regs[4], u->regs[5], u->regs[6], u->regs[7]};
    dwfl_thread_state_register_pc(thread, u->regs[0]);
    return dwfl_thread_state_registers(thread, 3, 1, &rbx) &&
           dwfl_thread_state_registers(thread, 6, 2, bp_sp) &&
           dwfl_thread_state_registers(thread, 12, 4, r12_15);
}

static const Dwfl_Thread_Callbacks g_unwind_cb = {
    .next_thread = u_next_thread,
    .memory_read = u_memory_read,
    .set_initial_registers = u_set_registers,
};

struct uwalk {
    uint64_t *out;
    uint32_t n, max;
};

static int u_frame(Dwfl_Frame *state, void *arg)
{
    struct uwalk *w = arg;
    Dwarf_Addr pc;
    bool activation;
    if (!dwfl_frame_pc(state, &pc, &activation) || pc < 4096)
        return DWARF_CB_ABORT;
    w->out[w->n++] = pc;
    return w->n < w->max ? DWARF_CB_OK : DWARF_CB_ABORT;
}

static uint32_t dwarf_unwind(struct rmaps *m, struct ustate *u, uint64_t *out, uint32_t max)
{
    if (!m->dwfl || m->attached < 0)
        return 0;
    if (m->attached == 0) {
        m->attached = dwfl_attach_state(m->dwfl, NULL, 1, &g_unwind_cb, u) ? 1 : -1;
        if (m->attached < 0)
            return 0;
    }
    struct uwalk w = {out, 0, max};
    (void)dwfl_getthread_frames(m->dwfl, 1, u_frame, &w);
    return w.n;
}

/*
 * The line of `addr` found by walking the module's compile units: libdw 0.188's address
 * lookup (dwfl_module_getsrc) misses the DWARF 5 of clang 14 ("address out of range"), whose
 * units come without .debug_aranges. 0 when no unit holds it (no debug info: returns at once).
 */
static int cu_line(Dwfl_Module *m, Dwarf_Addr addr)
{
    Dwarf_Addr bias;
    int line = 0;
    for (Dwarf_Die *cu = NULL; (cu = dwfl_module_nextcu(m, cu, &bias)) != NULL;) {
        if (dwarf_haspc(cu, addr - bias) == 1) {
            Dwarf_Line *l = dwarf_getsrc_die(cu, addr - bias);
            if (l)
                dwarf_lineno(l, &line);
            break;
        }
    }
    return line;
}

static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const uint8_t *)data)[i]) * 0x100000001b3ull;
    return h;
}

/* The cache entry of (module m, file name `base`, addr, leaf), or NULL (no build-id, no
 * cache); *key its key. */
static struct name_ent *name_slot(struct sw_rprof *p, Dwfl_Module *m, const char *base,
                                  uint64_t addr, bool leaf, uint64_t *key, uint64_t *off)
{
    Dwarf_Addr lo, bias;
    const unsigned char *bits;
    GElf_Addr vaddr;
    if (!p->names || !dwfl_module_getelf(m, &bias))
        return NULL; /* (the ELF headers: the build-id is read from the file opened) */
    int n = dwfl_module_build_id(m, &bits, &vaddr);
    if (n <= 0)
        return NULL;
    dwfl_module_info(m, NULL, &lo, NULL, NULL, NULL, NULL, NULL);
    *off = addr - lo;
    uint64_t h = fnv(0xcbf29ce484222325ull, bits, (size_t)n);
    h = fnv(h, base, strlen(base) + 1);
    h = fnv(h, off, sizeof(*off));
    h = fnv(h, &leaf, sizeof(leaf));
    *key = h ? h : 1;
    return &p->names[*key % NAME_CACHE];
}

/* "module!function:line" of one frame (line only for callers: a leaf's line varies). */
static bool frame_name(struct sw_rprof *p, Dwfl *d, uint64_t addr, bool leaf, char *out, size_t cap)
{
    Dwfl_Module *m = d ? dwfl_addrmodule(d, addr) : NULL;
    if (!m)
        return false;
    const char *mname = dwfl_module_info(m, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    const char *base = mname ? strrchr(mname, '/') : NULL;
    base = base ? base + 1 : mname ? mname : "?";
    if (strcmp(base, "swagent-vdso.so") == 0)
        base = "[vdso]";
    uint64_t key = 0, off = 0;
    struct name_ent *e = name_slot(p, m, base, addr, leaf, &key, &off);
    if (e && e->key == key && e->off == off) {
        size_t n = strnlen(e->name, cap - 1);
        memcpy(out, e->name, n);
        out[n] = '\0';
        p->name_hits++;
        return true;
    }
    p->name_misses++;
    const char *fn = dwfl_module_addrname(m, addr);
    int line = 0;
    if (!leaf) {
        Dwfl_Line *l = dwfl_module_getsrc(m, addr);
        if (l)
            dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL);
        else
            line = cu_line(m, addr);
    }
    if (fn && line > 0)
        snprintf(out, cap, "%s!%s:%d", base, fn, line);
    else if (fn)
        snprintf(out, cap, "%s!%s", base, fn);
    else {
        Dwarf_Addr lo;
        dwfl_module_info(m, NULL, &lo, NULL, NULL, NULL, NULL, NULL);
        snprintf(out, cap, "%s!0x%llx", base, (unsigned long long)(addr - lo));
    }
    if (e) {
        e->key = key;
        e->off = off;
        size_t n = strnlen(out, sizeof(e->name) - 1);
        memcpy(e->name, out, n);
        e->name[n] = '\0';
    }
    return true;
}

static void take_sample(struct sw_rprof *p, uint64_t ring_id, const struct sw_ring_meta *meta,
                        const void *payload, uint32_t len)
{
    struct rd r = {payload, (const uint8_t *)payload + len, false};
    if (rd_u(&r, 1) != SW_PROF_REC_VERSION)
        goto bad;
    unsigned flags = (unsigned)rd_u(&r, 1);
    uint32_t nf = (uint32_t)rd_u(&r, 2);
    uint32_t periods = (uint32_t)rd_u(&r, 4);
    int64_t task_key = (int64_t)rd_u(&r, 8);
    uint8_t uuid[16];
    if (r.end - r.p < 16)
        goto bad;
    memcpy(uuid, r.p, 16);
    r.p += 16;
    uint32_t tid = (uint32_t)rd_u(&r, 4);
    uint64_t segv = rd_u(&r, 8);
    int64_t time_ms = (int64_t)rd_u(&r, 8);
    uint32_t period = (uint32_t)rd_u(&r, 4);
    rd_u(&r, 8); /* maps_gen: the ring's latest mappings are used */
    struct ustate *u = &p->u;
    for (int i = 0; i < SW_PROF_REGS; i++)
        u->regs[i] = rd_u(&r, 8);
    uint32_t nw = (uint32_t)rd_u(&r, 2);
    if (r.bad || nw > SW_PROF_STACK_WORDS || (size_t)(r.end - r.p) < (size_t)nw * 8)
        goto bad;
    uint64_t *words = u->words;
    for (uint32_t i = 0; i < nw; i++)
        words[i] = rd_u(&r, 8);
    u->nw = nw;
    if (r.bad || nf == 0 || nf > SW_PROF_MAX_FRAMES || (size_t)(r.end - r.p) != (size_t)nf * 8 ||
        periods == 0 || period == 0)
        goto bad;
    uint64_t frames[SW_PROF_MAX_FRAMES + 1];
    for (uint32_t i = 0; i < nf; i++)
        frames[i] = rd_u(&r, 8);
    struct task *t = task_by_key(p, meta->service, task_key);
    if (!t)
        return; /* a task this reporter does not know (any more) */
    char seg[96];
    size_t sl = sw_rec_id_text(seg, sizeof(seg) - 1, uuid, tid, segv);
    seg[sl] = '\0';
    struct rmaps *m = maps_of(p, ring_id, false);
    Dwfl *d = m ? m->dwfl : NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /*
     * The stack copy unwound with the modules' CFI when that goes further than the frame
     * pointers; else the frame-pointer chain, with a frameless leaf's return address from its
     * CFI.
     */
    uint64_t dw[SW_PROF_MAX_FRAMES + 1];
    uint32_t ndw = m && nw ? dwarf_unwind(m, u, dw, SW_PROF_MAX_FRAMES) : 0;
    uint64_t ra = ndw > nf ? 0 : leaf_return(d, frames[0], words, nw);
    if (ndw > nf) {
        memcpy(frames, dw, ndw * sizeof(frames[0]));
        nf = ndw;
    } else if (ra && (nf < 2 || frames[1] != ra)) {
        memmove(frames + 2, frames + 1, (nf - 1) * sizeof(frames[0]));
        frames[1] = ra;
        nf++;
    }
    /* Names, leaf first; a wait sample's leaf is the signal mask call in the wait wrapper. */
    static char names[SW_PROF_MAX_FRAMES][256];
    uint32_t nn = 0;
    for (uint32_t i = (flags & SW_PROF_SAMPLE_WAIT) ? 1 : 0; i < nf; i++) {
        bool leaf = nn == 0;
        uint64_t a = frames[i] - (i > 0 ? 1 : 0); /* a return address: look up the call */
        if (!frame_name(p, d, a, leaf, names[nn], sizeof(names[nn]))) {
            if (nn > 0)
                break; /* a return address outside every module: the chain is broken here */
            /* A leaf outside the file mappings: the vDSO, or generated code. */
            snprintf(names[nn], sizeof(names[0]), "%s", "[vdso or anonymous code]");
        }
        nn++;
    }
    /*
     * A held sample (taken as a wait wrapper released the signal): its leaf frames are the
     * wrapper's own (the mask call); the wait itself, the wrapper named after the libc call,
     * becomes the leaf, without a line.
     */
    uint32_t from = 0;
    if (flags & SW_PROF_SAMPLE_WAIT) {
        while (from + 1 < nn &&
               (strstr(names[from], "!syscall") || strstr(names[from], "!sw_prof_")))
            from++;
        char *colon = strrchr(names[from], ':');
        if (colon && from > 0)
            *colon = '\0';
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    uint64_t took = (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec));
    p->sym_ns += took;
    p->sym_samples++;
    SW_LOG_DEBUG_("reporter: profile: a sample of %u frames unwound and named in %llu ns", nn,
                  (unsigned long long)took);
    if (nn == 0)
        return;
    char *sigs[MAX_SIGNATURES];
    uint32_t ns = nn - from < MAX_SIGNATURES ? nn - from : MAX_SIGNATURES;
    for (uint32_t i = 0; i < ns; i++)
        sigs[i] = names[from + ns - 1 - i]; /* root first */
    struct seqs *q = seq_get(p, task_key, seg);
    if (!q)
        return;
    if (periods > MAX_PERIODS)
        periods = MAX_PERIODS;
    Skywalking__V3__ThreadStack st = SKYWALKING__V3__THREAD_STACK__INIT;
    st.n_codesignatures = ns;
    st.codesignatures = sigs;
    for (uint32_t k = 0; k < periods; k++) {
        Skywalking__V3__ThreadSnapshot s = SKYWALKING__V3__THREAD_SNAPSHOT__INIT;
        s.taskid = t->id;
        s.tracesegmentid = seg;
        s.time = time_ms - (int64_t)(periods - 1 - k) * period;
        if (s.time <= q->last_ms)
            s.time = q->last_ms + 1;
        s.sequence = q->next++;
        s.stack = &st;
        q->last_ms = s.time;
        enqueue(p, &s);
    }
    return;
bad:
    p->bad_records++;
    SW_LOGW("reporter: profile: a sample record (%u bytes) does not parse: ignored", len);
}

void sw_rprof_record(struct sw_rprof *p, uint64_t ring_id, uint64_t cursor,
                     const struct sw_ring_meta *meta, uint16_t type, const void *payload,
                     uint32_t len)
{
    if (!p || (type != SW_REC_PROF_SAMPLE && type != SW_REC_PROF_MAPS))
        return;
    struct rmaps *m = maps_of(p, ring_id, true);
    if (m) {
        if (cursor <= m->last_cursor)
            return; /* handed out again after a failed batch: taken already */
        m->last_cursor = cursor;
    }
    if (type == SW_REC_PROF_MAPS)
        take_maps(p, ring_id, payload, len);
    else
        take_sample(p, ring_id, meta, payload, len);
}

void sw_rprof_tick(struct sw_rprof *p, struct sw_transport *tr, const struct sw_drain_info *info,
                   int ninfo)
{
    if (!p)
        return;
    int64_t now = wall_ms();
    /* The symbolisers of rings no longer listed for RMAPS_UNLISTED_MS (drained, their process
       gone) are freed: the reporter's memory does not grow with the processes it ever
       profiled. (A ring first seen between two lists, or one cut from a full list, is
       listed again before that.) */
    for (struct rmaps **mp = &p->maps; *mp;) {
        struct rmaps *m = *mp;
        int i = 0;
        while (i < ninfo && info[i].ring_id != m->ring_id)
            i++;
        if (i < ninfo || m->unlisted_ms == 0 || now - m->unlisted_ms < RMAPS_UNLISTED_MS) {
            m->unlisted_ms = i < ninfo ? 0 : m->unlisted_ms ? m->unlisted_ms : now;
            mp = &m->next;
            continue;
        }
        *mp = m->next;
        if (m->dwfl)
            dwfl_end(m->dwfl);
        free(m);
    }
    /* Services of live processes get polled; the first live instance speaks for them. */
    for (int i = 0; i < ninfo; i++)
        if (info[i].alive && info[i].meta.service[0])
            (void)svc_get(p, info[i].meta.service, info[i].meta.instance);
    int64_t every =
        (int64_t)(p->cfg->get_profile_task_interval > 0 ? p->cfg->get_profile_task_interval : 20) *
        1000;
    for (struct svc *s = p->svcs; s; s = s->next) {
        if (!s->off && now >= s->next_poll_ms && !sw_transport_mgmt_backing_off(tr)) {
            s->next_poll_ms = now + every;
            poll_tasks(s, tr);
        }
        for (int i = 0; i < s->ntasks; i++) {
            struct task *t = &s->tasks[i];
            if (t->state == T_WAITING && now >= t->start_ms) {
                if (now >= t->end_ms) {
                    t->state = T_ENDING; /* came too late to run: only its end is reported */
                    continue;
                }
                if (!s->page)
                    s->page = page_map(p->dir, s->service);
                if (!s->page)
                    continue;
                page_write(s->page, t);
                t->state = T_RUNNING;
                SW_LOGI("reporter: profile: task %s for %s is running", t->id, s->service);
            } else if (t->state == T_RUNNING && now >= t->end_ms) {
                if (s->page && s->page->task_key == (uint64_t)t->create_ms)
                    page_write(s->page, NULL);
                t->state = T_ENDING;
            } else if (t->state == T_RUNNING && s->page &&
                       atomic_load(&s->page->traces_taken) >= t->max_count &&
                       atomic_load(&s->page->active)) {
                /* Every trace it may profile has had a first sample: it runs until its end
                   (the Java agent's task too) so that those traces finish being sampled. */
            }
        }
    }
    if (p->nqueue > 0)
        (void)send_queue(p, tr);
    for (struct svc *s = p->svcs; s; s = s->next)
        for (int i = 0; i < s->ntasks; i++) {
            struct task *t = &s->tasks[i];
            if (t->state == T_ENDING && now >= t->end_ms + FINISH_GRACE_MS && p->nqueue == 0 &&
                finish_task(s, t, tr) == 0)
                t->state = T_DONE;
        }
}
