/*
 * meter.c - the traced processes' meters, from /proc and the reporter's counters (meter.h).
 *
 * Rules: swagent-reporter's main loop only (single-threaded); may allocate and use stdio. What
 * is read from /proc is untrusted text: every field is parsed with bounds, and a process whose
 * files do not parse is left out of that report (it may have exited between the scan and the
 * read).
 */
#include "common.h"

#include "log.h"
#include "meter.h"
#include "transport.h"

#include "language-agent/Meter.pb-c.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define METER_PROCS_MAX 1024 /* processes whose previous sample is kept */
#define METER_COUNT 15       /* meters per instance (sw_meter_encode) */

/* ---- /proc ---- */

/* Reads a small file whole into buf (NUL-terminated); its length or -errno. */
static long read_small(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    size_t n = fread(buf, 1, cap - 1, f);
    int e = ferror(f) ? EIO : 0;
    fclose(f);
    if (e)
        return -e;
    buf[n] = '\0';
    return (long)n;
}

/* The next unsigned decimal at *p (spaces skipped); false when there is none. */
static bool next_u64(const char **p, uint64_t *out)
{
    const char *s = *p;
    while (*s == ' ')
        s++;
    if (*s < '0' || *s > '9')
        return false;
    uint64_t v = 0;
    while (*s >= '0' && *s <= '9') {
        unsigned d = (unsigned)(*s++ - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    *p = s;
    return true;
}

/* Skips one space-separated field at *p. */
static bool skip_field(const char **p)
{
    const char *s = *p;
    while (*s == ' ')
        s++;
    if (!*s)
        return false;
    while (*s && *s != ' ')
        s++;
    *p = s;
    return true;
}

int sw_meter_read_proc(const char *proc, int32_t pid, struct sw_meter_sample *out)
{
    char path[256], buf[2048];
    snprintf(path, sizeof(path), "%s/%d/stat", proc ? proc : "/proc", (int)pid);
    long n = read_small(path, buf, sizeof(buf));
    if (n < 0)
        return (int)n;
    /* "pid (comm) state ppid ...": comm may hold spaces and parentheses, so the fields are
     * counted from the last ')'. Fields 3.. after it: 14 utime, 15 stime, 20 num_threads,
     * 22 starttime, 24 rss (pages). */
    const char *p = strrchr(buf, ')');
    if (!p)
        return -EBADMSG;
    p++;
    uint64_t v[25] = {0};
    for (int f = 3; f <= 24; f++) {
        if (f == 3) {
            if (!skip_field(&p))
                return -EBADMSG;
        } else if (!next_u64(&p, &v[f])) {
            /* fields 4-24 are numbers (some may be negative, e.g. priority: skipped) */
            if (!skip_field(&p))
                return -EBADMSG;
        }
    }
    long page = sysconf(_SC_PAGESIZE);
    out->cpu_ticks = v[14] + v[15];
    out->threads = (uint32_t)v[20];
    out->start_ticks = v[22];
    out->rss_bytes = v[24] * (uint64_t)(page > 0 ? page : 4096);
    return 0;
}

int sw_meter_read_host(const char *proc, struct sw_meter_host *out)
{
    char path[256], buf[8192];
    const char *root = proc ? proc : "/proc";
    memset(out, 0, sizeof(*out));

    snprintf(path, sizeof(path), "%s/stat", root);
    long n = read_small(path, buf, sizeof(buf));
    if (n < 0)
        return (int)n;
    if (strncmp(buf, "cpu ", 4) != 0)
        return -EBADMSG;
    /* user nice system idle iowait irq softirq steal (guest and guest_nice are already in user
     * and nice, as psutil counts them) */
    const char *p = buf + 4;
    uint64_t f[8];
    for (int i = 0; i < 8; i++)
        if (!next_u64(&p, &f[i]))
            return -EBADMSG;
    for (int i = 0; i < 8; i++)
        out->cpu_total += f[i];
    out->cpu_idle = f[3] + f[4];

    snprintf(path, sizeof(path), "%s/meminfo", root);
    n = read_small(path, buf, sizeof(buf));
    if (n < 0)
        return (int)n;
    for (const char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        uint64_t kb;
        const char *q;
        if (strncmp(l, "MemTotal:", 9) == 0 && (q = l + 9, next_u64(&q, &kb)))
            out->mem_total = kb * 1024;
        else if (strncmp(l, "MemAvailable:", 13) == 0 && (q = l + 13, next_u64(&q, &kb)))
            out->mem_available = kb * 1024;
    }
    if (!out->mem_total)
        return -EBADMSG;

    snprintf(path, sizeof(path), "%s/uptime", root);
    n = read_small(path, buf, sizeof(buf));
    if (n < 0)
        return (int)n;
    char *end;
    out->uptime_s = strtod(buf, &end);
    if (end == buf || out->uptime_s <= 0)
        return -EBADMSG;
    return 0;
}

/* ---- encoding ---- */

struct mbuild {
    Skywalking__V3__MeterData *d;
    Skywalking__V3__MeterSingleValue *v;
    size_t n, cap;
};

static void add(struct mbuild *b, const char *name, double value)
{
    if (b->n == b->cap)
        return;
    Skywalking__V3__MeterData *d = &b->d[b->n];
    Skywalking__V3__MeterSingleValue *v = &b->v[b->n];
    skywalking__v3__meter_data__init(d);
    skywalking__v3__meter_single_value__init(v);
    v->name = (char *)name;
    v->value = value;
    d->metric_case = SKYWALKING__V3__METER_DATA__METRIC_SINGLE_VALUE;
    d->singlevalue = v;
    b->n++;
}

uint8_t *sw_meter_encode(const struct sw_meter_proc *procs, const struct sw_meter_sample *s,
                         const struct sw_meter_prev *prev, size_t n,
                         const struct sw_meter_host *host, const struct sw_meter_host *host_prev,
                         int64_t timestamp_ms, size_t *len)
{
    Skywalking__V3__MeterData d[METER_COUNT], *dp[METER_COUNT];
    Skywalking__V3__MeterSingleValue v[METER_COUNT];
    struct mbuild b = {d, v, 0, METER_COUNT};
    long hz = sysconf(_SC_CLK_TCK);
    double tck = hz > 0 ? (double)hz : 100.0;
    double cpu = 0, rss = 0, threads = 0, fill = 0;
    uint64_t c[9] = {0}; /* committed sent dropped shed spooled failed kept_e kept_s limited */

    if (n == 0)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        /* The process's CPU since its previous sample, or since it started. */
        double ticks = (double)s[i].cpu_ticks, dt;
        if (prev && prev[i].at_s > 0 && s[i].cpu_ticks >= prev[i].cpu_ticks) {
            ticks -= (double)prev[i].cpu_ticks;
            dt = host->uptime_s - prev[i].at_s;
        } else {
            dt = host->uptime_s - (double)s[i].start_ticks / tck;
        }
        if (dt > 0.001)
            cpu += ticks / tck / dt * 100.0;
        rss += (double)s[i].rss_bytes;
        threads += s[i].threads;
        const struct sw_meter_proc *p = &procs[i];
        const uint64_t v9[9] = {p->committed,
                                p->sent,
                                p->dropped,
                                p->shed,
                                p->spooled,
                                p->failed,
                                p->kept[SW_RING_KEPT_ERROR],
                                p->kept[SW_RING_KEPT_SLOW],
                                p->kept[SW_RING_KEEP_LIMITED]};
        for (int k = 0; k < 9; k++)
            c[k] += v9[k];
        if (p->ring_capacity) {
            double f = (double)p->ring_used / (double)p->ring_capacity;
            if (f > fill)
                fill = f > 1 ? 1 : f;
        }
    }
    /* The machine's CPU since the previous report (or since boot). */
    double total = (double)host->cpu_total, idle = (double)host->cpu_idle;
    if (host_prev && host_prev->cpu_total && host->cpu_total > host_prev->cpu_total &&
        host->cpu_idle >= host_prev->cpu_idle) {
        total -= (double)host_prev->cpu_total;
        idle -= (double)host_prev->cpu_idle;
    }
    double mem_total = (double)host->mem_total;
    add(&b, "instance_pvm_total_cpu_utilization", total > 0 ? (total - idle) / total * 100.0 : 0);
    add(&b, "instance_pvm_process_cpu_utilization", cpu);
    add(&b, "instance_pvm_total_mem_utilization",
        (mem_total - (double)host->mem_available) / mem_total * 100.0);
    add(&b, "instance_pvm_process_mem_utilization", rss / mem_total);
    add(&b, "instance_pvm_thread_active_count", threads);
    static const char *const names[9] = {
        "swagent_segments_committed", "swagent_segments_sent",    "swagent_segments_dropped",
        "swagent_segments_shed",      "swagent_segments_spooled", "swagent_segments_failed",
        "swagent_kept_errors",        "swagent_kept_slow",        "swagent_keep_limited"};
    for (int k = 0; k < 9; k++)
        add(&b, names[k], (double)c[k]);
    add(&b, "swagent_ring_fill", fill);
    /* Service, instance and time on each (as the Python agent sends them; OAP needs them on
     * the first of a collection). */
    for (size_t i = 0; i < b.n; i++) {
        d[i].service = (char *)procs[0].service;
        d[i].serviceinstance = (char *)procs[0].instance;
        d[i].timestamp = timestamp_ms;
        dp[i] = &d[i];
    }
    Skywalking__V3__MeterDataCollection col = SKYWALKING__V3__METER_DATA_COLLECTION__INIT;
    col.n_meterdata = b.n;
    col.meterdata = dp;
    size_t sz = skywalking__v3__meter_data_collection__get_packed_size(&col);
    uint8_t *out = malloc(sz ? sz : 1);
    if (!out)
        return NULL;
    *len = skywalking__v3__meter_data_collection__pack(&col, out);
    return out;
}

/* ---- the periodic report ---- */

static struct {
    uint64_t next_ms; /* monotonic: the next report; 0 before the first call */
    struct sw_meter_host host_prev;
    struct {
        int32_t pid;
        uint64_t start_ticks;
        struct sw_meter_prev prev;
        bool seen;
    } procs[METER_PROCS_MAX];
    int nprocs;
    struct sw_meter_counters cnt;
    bool off_logged;
} m;

static struct sw_meter_prev *prev_of(int32_t pid, uint64_t start_ticks, bool make)
{
    for (int i = 0; i < m.nprocs; i++)
        if (m.procs[i].pid == pid && m.procs[i].start_ticks == start_ticks) {
            m.procs[i].seen = true;
            return &m.procs[i].prev;
        }
    if (!make || m.nprocs == METER_PROCS_MAX)
        return NULL;
    int i = m.nprocs++;
    m.procs[i].pid = pid;
    m.procs[i].start_ticks = start_ticks;
    m.procs[i].prev = (struct sw_meter_prev){0, 0};
    m.procs[i].seen = true;
    return &m.procs[i].prev;
}

static int cmp_inst(const struct sw_meter_proc *a, const struct sw_meter_proc *b)
{
    int r = strcmp(a->service, b->service);
    return r ? r : strcmp(a->instance, b->instance);
}

/* The live processes of this report (sampled), sorted by instance. */
struct taken_proc {
    const struct sw_meter_proc *p;
    struct sw_meter_sample s;
};

static int cmp_taken(const void *a, const void *b)
{
    return cmp_inst(((const struct taken_proc *)a)->p, ((const struct taken_proc *)b)->p);
}

int sw_meter_tick(struct sw_transport *t, const struct sw_meter_proc *procs, size_t n,
                  int interval_s, uint64_t now_ms)
{
    if (m.cnt.off || interval_s <= 0)
        return 0;
    if (m.next_ms == 0) {
        m.next_ms = now_ms + (uint64_t)interval_s * 1000;
        return 0;
    }
    if (now_ms < m.next_ms || n == 0)
        return 0;
    struct sw_meter_host host;
    if (sw_meter_read_host(NULL, &host) != 0) {
        m.next_ms = now_ms + (uint64_t)interval_s * 1000;
        return -EIO;
    }
    struct taken_proc *tp = calloc(n, sizeof(*tp));
    struct sw_meter_proc *ps = calloc(n, sizeof(*ps));
    struct sw_meter_sample *ss = calloc(n, sizeof(*ss));
    struct sw_meter_prev *pv = calloc(n, sizeof(*pv));
    struct sw_msg *msgs = calloc(n, sizeof(*msgs));
    size_t k = 0, nm = 0;
    int rc = -ENOMEM;
    if (!tp || !ps || !ss || !pv || !msgs)
        goto out;
    for (size_t i = 0; i < n; i++) {
        struct sw_meter_sample s;
        if (sw_meter_read_proc(NULL, procs[i].pid, &s) != 0)
            continue; /* exited meanwhile */
        if (procs[i].start_ticks && s.start_ticks != procs[i].start_ticks)
            continue; /* another process has the pid now */
        tp[k].p = &procs[i];
        tp[k++].s = s;
    }
    qsort(tp, k, sizeof(*tp), cmp_taken);
    int64_t ts = (int64_t)time(NULL) * 1000;
    {
        struct timespec now;
        if (clock_gettime(CLOCK_REALTIME, &now) == 0)
            ts = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    }
    for (size_t i = 0; i < k;) {
        size_t j = i;
        while (j < k && cmp_inst(tp[i].p, tp[j].p) == 0)
            j++;
        for (size_t x = i; x < j; x++) {
            ps[x - i] = *tp[x].p;
            ss[x - i] = tp[x].s;
            const struct sw_meter_prev *pr = prev_of(tp[x].p->pid, tp[x].s.start_ticks, false);
            pv[x - i] = pr ? *pr : (struct sw_meter_prev){0, 0};
        }
        size_t len = 0;
        uint8_t *buf = sw_meter_encode(ps, ss, pv, j - i, &host,
                                       m.host_prev.cpu_total ? &m.host_prev : NULL, ts, &len);
        if (buf) {
            msgs[nm].data = buf;
            msgs[nm].len = len;
            msgs[nm].framed = false;
            nm++;
        }
        i = j;
    }
    rc = nm ? sw_transport_meters(t, msgs, nm) : 0;
    if (rc == -EAGAIN) { /* the transport backs off: again in a second */
        m.next_ms = now_ms + 1000;
        goto out;
    }
    m.next_ms = now_ms + (uint64_t)interval_s * 1000;
    if (rc == -ENOSYS) {
        m.cnt.off = true;
        SW_LOGW("reporter: the collector does not implement MeterReportService (UNIMPLEMENTED): "
                "meters are not sent (meter.active=false says the same)");
        goto out;
    }
    if (rc != 0) {
        m.cnt.failed++;
        goto out;
    }
    /* Delivered: these samples are the next report's starting point. */
    for (int i = 0; i < m.nprocs; i++)
        m.procs[i].seen = false;
    for (size_t x = 0; x < k; x++) {
        struct sw_meter_prev *pr = prev_of(tp[x].p->pid, tp[x].s.start_ticks, true);
        if (pr)
            *pr = (struct sw_meter_prev){tp[x].s.cpu_ticks, host.uptime_s};
    }
    for (int i = 0; i < m.nprocs;) { /* forget processes not in this report */
        if (!m.procs[i].seen)
            m.procs[i] = m.procs[--m.nprocs];
        else
            i++;
    }
    m.host_prev = host;
    if (nm) {
        m.cnt.reports++;
        m.cnt.instances += nm;
        m.cnt.meters += nm * METER_COUNT;
    }
    rc = (int)nm;
out:
    for (size_t i = 0; msgs && i < nm; i++)
        free((void *)msgs[i].data);
    free(tp);
    free(ps);
    free(ss);
    free(pv);
    free(msgs);
    return rc;
}

bool sw_meter_due(int interval_s, uint64_t now_ms)
{
    return !m.cnt.off && interval_s > 0 && (m.next_ms == 0 || now_ms >= m.next_ms);
}

void sw_meter_get_counters(struct sw_meter_counters *out)
{
    *out = m.cnt;
}
