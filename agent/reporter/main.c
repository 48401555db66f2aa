/*
 * main.c - swagent-reporter: drains the shared-memory rings of traced processes and ships
 * their segments to one collector over gRPC; sends heartbeats for each live traced process.
 *
 *   swagent-reporter [--foreground] [--config FILE] [--runtime-dir DIR]
 *                    [--collector HOST:PORT] [--idle-exit SECONDS]
 *
 * Rules: its own process, never run under the agent (LD_PRELOAD is removed from its
 * environment at start, re-executing itself if libswagent.so was preloaded). One reporter per
 * user and collector: an exclusive flock on `<runtime_dir>/reporter-<collector>.lock` (see
 * spawn.h); a second instance exits 0 at once. Single-threaded main loop:
 *   - every 500 ms: find rings (`ring-*.swr`) of processes reporting to this collector;
 *   - read up to SW_BATCH_MAX records from every ring (cursors, nothing released yet), encode
 *     each into a SegmentObject, send them on one `collect` stream; only when that call ends
 *     OK are the records released (at-least-once; a failed batch is re-read after backoff);
 *   - heartbeats: each live instance gets reportInstanceProperties at once and every
 *     properties_report_period_factor ticks, keepAlive on the other ticks, one tick every
 *     collector.heartbeat_period seconds;
 *   - rings of dead processes are removed once drained;
 *   - `<runtime_dir>/reporter-<collector>.status` is rewritten about once a second;
 *   - with no live traced process and nothing left to send for --idle-exit seconds
 *     (swagent.reporter_idle_exit when started on demand; never with --foreground unless
 *     --idle-exit is given), it exits. SIGTERM/SIGINT: finish the current batch, exit.
 * It sleeps 20 ms when there was nothing to send (more while backing off): never busy-loops.
 */
#include "common.h"

#include "config.h"
#include "encode.h"
#include "log.h"
#include "record.h"
#include "ring.h"
#include "spawn.h"
#include "transport.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SW_BATCH_MAX 500    /* segments per collect stream */
#define SW_SCAN_MS 500      /* ring discovery period */
#define SW_IDLE_SLEEP_MS 20 /* sleep when there is nothing to send */
#define SW_STATUS_MS 1000   /* status file period */
#define SW_MAX_RINGS 1024
/*
 * InstanceProperties `language`: "native". The traced program may be written in anything (C,
 * Rust, Go with cgo, Python's interpreter...): the agent sees its libc calls, not its source
 * language, so the property names the kind of agent rather than guessing. `agent` carries
 * "swagent <version>" and `executable` the program's name.
 */
#define SW_LANGUAGE "native"

struct ring_ent {
    char name[NAME_MAX + 1]; /* file name in the runtime dir */
    struct sw_ring *r;
    struct sw_ring_meta meta; /* NUL-terminated copy */
    uint64_t batch_end;       /* cursor after the records of the batch in flight */
    uint64_t sent;            /* segments delivered */
    uint64_t bad;             /* records dropped here: corrupt or not encodable */
    bool corrupt;             /* the ring failed validation: never read again */
    bool dead;                /* the producing process is gone */
    bool seen;                /* found by the last scan */
    uint64_t created_ns;      /* when the ring was made (tells an exec'ed image's rings apart) */
    /* heartbeat state */
    uint64_t hb_next_ms; /* monotonic time of the next heartbeat */
    uint64_t hb_ticks;   /* heartbeats sent */
};

static struct {
    struct sw_config cfg;
    char collector[SW_CFG_STR_MAX];
    bool foreground;
    int idle_exit; /* seconds, 0 = never */
    struct sw_transport *t;
    struct ring_ent *rings[SW_MAX_RINGS];
    int nrings;
    uint64_t sent, failed_batches, dropped, removed;
    char hostname[256];
    char ipv4[10][INET_ADDRSTRLEN];
    int nipv4;
    char status_path[PATH_MAX];
    int64_t started;
} g;

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL); /* a signal ends it early, which is what SIGTERM wants */
}

/* /proc/<pid>/stat field 22 (start time in clock ticks), or 0. */
static uint64_t proc_start_ticks(int pid)
{
    char p[64], buf[1024], *s;
    unsigned long long v = 0;
    size_t n;
    FILE *f;

    snprintf(p, sizeof(p), "/proc/%d/stat", pid);
    f = fopen(p, "re");
    if (!f)
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    s = strrchr(buf, ')');
    for (int field = 2; s && field < 22; field++)
        s = strchr(s + 1, ' ');
    if (s && sscanf(s, " %llu", &v) == 1)
        return v;
    return 0;
}

static bool process_alive(const struct sw_ring_meta *m)
{
    uint64_t ticks;

    if (m->pid <= 0)
        return false;
    ticks = proc_start_ticks(m->pid);
    if (ticks == 0)
        return false;
    return m->proc_start_ticks == 0 || ticks == m->proc_start_ticks;
}

/* ---- rings ---- */

static struct ring_ent *find_ring(const char *name)
{
    for (int i = 0; i < g.nrings; i++)
        if (strcmp(g.rings[i]->name, name) == 0)
            return g.rings[i];
    return NULL;
}

static void drop_ring(int i, bool unlink_file)
{
    struct ring_ent *e = g.rings[i];
    char path[PATH_MAX + NAME_MAX + 2];

    if (unlink_file) {
        snprintf(path, sizeof(path), "%s/%s", g.cfg.runtime_dir, e->name);
        if (unlink(path) == 0) {
            g.removed++;
            SW_LOGI("reporter: removed the drained ring %s of exited pid %d (%s)", e->name,
                    (int)e->meta.pid, e->meta.service);
        }
    }
    sw_ring_close(e->r);
    free(e);
    g.rings[i] = g.rings[--g.nrings];
}

/* Finds new rings for this collector and notes which known ones are still there. */
static void scan_rings(void)
{
    DIR *d = opendir(g.cfg.runtime_dir);
    struct dirent *de;

    for (int i = 0; i < g.nrings; i++)
        g.rings[i]->seen = false;
    if (!d)
        return;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        char path[PATH_MAX + NAME_MAX + 2];
        struct ring_ent *e;
        struct sw_ring *r;

        if (strncmp(de->d_name, "ring-", 5) != 0 || len < 9 || len > NAME_MAX ||
            strcmp(de->d_name + len - 4, ".swr") != 0)
            continue;
        e = find_ring(de->d_name);
        if (e) {
            e->seen = true;
            continue;
        }
        if (g.nrings >= SW_MAX_RINGS)
            break;
        snprintf(path, sizeof(path), "%s/%s", g.cfg.runtime_dir, de->d_name);
        if (sw_ring_open(path, &r) != 0)
            continue; /* being created, or not a ring: looked at again next scan */
        const struct sw_ring_meta *m = sw_ring_get_meta(r);
        /* The ring holds the collector cut to SW_RING_NAME_MAX - 1 bytes; compare as much. */
        if (strncmp(m->collector, g.collector, SW_RING_NAME_MAX - 1) != 0) {
            sw_ring_close(r); /* another collector's reporter drains it */
            continue;
        }
        e = calloc(1, sizeof(*e));
        if (!e) {
            sw_ring_close(r);
            break;
        }
        /* A previous reporter may have been killed in the middle of a release. */
        if (sw_ring_recover(r) < 0)
            e->corrupt = true;
        e->created_ns = sw_ring_created_ns(r);
        snprintf(e->name, sizeof(e->name), "%s", de->d_name);
        e->r = r;
        memcpy(&e->meta, m, sizeof(e->meta));
        e->meta.service[SW_RING_NAME_MAX - 1] = '\0';
        e->meta.instance[SW_RING_NAME_MAX - 1] = '\0';
        e->meta.collector[SW_RING_NAME_MAX - 1] = '\0';
        e->meta.exe[SW_RING_NAME_MAX - 1] = '\0';
        e->seen = true;
        e->hb_next_ms = 0; /* properties at once */
        g.rings[g.nrings++] = e;
        SW_LOGI("reporter: draining %s (pid %d, service %s, instance %s)", e->name,
                (int)e->meta.pid, e->meta.service, e->meta.instance);
    }
    closedir(d);
    for (int i = 0; i < g.nrings;) {
        struct ring_ent *e = g.rings[i];
        if (!e->seen) { /* deleted by someone else */
            drop_ring(i, false);
            continue;
        }
        e->dead = !process_alive(&e->meta);
        i++;
    }
    /*
     * After exec the same process (same pid and start time) makes a new ring: every older ring
     * of that process belongs to an image that is gone, so it is drained and removed.
     */
    for (int i = 0; i < g.nrings; i++) {
        struct ring_ent *e = g.rings[i];
        for (int j = 0; j < g.nrings && !e->dead; j++) {
            const struct ring_ent *o = g.rings[j];
            if (o != e && o->meta.pid == e->meta.pid &&
                o->meta.proc_start_ticks == e->meta.proc_start_ticks &&
                o->created_ns > e->created_ns)
                e->dead = true;
        }
    }
}

/* ---- one batch ---- */

struct batch {
    struct sw_msg msgs[SW_BATCH_MAX];
    int n;
};

static void batch_free(struct batch *b)
{
    for (int i = 0; i < b->n; i++)
        free((void *)b->msgs[i].data);
    b->n = 0;
}

/*
 * Reads records from every ring into `b` (up to SW_BATCH_MAX) without releasing them; each
 * ring's batch_end is the cursor after its last record taken. Corrupt or unencodable records
 * are counted and skipped (they are released with the batch).
 */
static void fill_batch(struct batch *b)
{
    static unsigned first; /* rotates, so a busy ring cannot starve the others */

    for (int i = 0; i < g.nrings; i++)
        g.rings[i]->batch_end = sw_ring_tail(g.rings[i]->r);
    first++;
    for (int k = 0; k < g.nrings; k++) {
        struct ring_ent *e = g.rings[(first + (unsigned)k) % (unsigned)g.nrings];
        uint64_t cur = sw_ring_tail(e->r);

        e->batch_end = cur;
        if (e->corrupt)
            continue;
        while (b->n < SW_BATCH_MAX) {
            const void *payload;
            uint32_t len;
            uint16_t type;
            uint64_t next;
            int rc = sw_ring_peek(e->r, cur, &payload, &len, &type, &next);
            if (rc == 0 && e->dead) {
                /* A producer that died mid-write leaves a record that never commits. */
                rc = sw_ring_skip_stuck(e->r, cur, &next);
                if (rc == 1) {
                    cur = next;
                    continue;
                }
            }
            if (rc == 0)
                break;
            if (rc < 0) {
                SW_LOGE("reporter: ring %s is corrupt; it is no longer read", e->name);
                e->corrupt = true;
                break;
            }
            cur = next;
            if (type != SW_REC_SEGMENT) {
                continue; /* other record kinds are for later versions */
            }
            uint8_t *out = NULL;
            size_t out_len = 0;
            if (sw_encode_segment(payload, len, &e->meta, &out, &out_len) != 0) {
                e->bad++;
                g.dropped++;
                continue;
            }
            b->msgs[b->n].data = out;
            b->msgs[b->n].len = out_len;
            b->n++;
        }
        e->batch_end = cur;
    }
}

/* Sends the batch; releases the records only when the collector confirmed it. */
static int send_batch(void)
{
    static struct batch b;
    bool any_skip = false;
    int rc = 0;

    fill_batch(&b);
    for (int i = 0; i < g.nrings; i++)
        if (g.rings[i]->batch_end != sw_ring_tail(g.rings[i]->r))
            any_skip = true;
    if (b.n == 0 && !any_skip)
        return 0;
    if (b.n > 0)
        rc = sw_transport_collect(g.t, b.msgs, (size_t)b.n);
    if (rc == 0) {
        for (int i = 0; i < g.nrings; i++) {
            struct ring_ent *e = g.rings[i];
            uint64_t tail = sw_ring_tail(e->r);
            if (e->batch_end != tail) {
                /* Count this ring's delivered segments: those taken from it in this batch. */
                sw_ring_release(e->r, e->batch_end);
            }
        }
        /* Per-ring counts: re-derived from the ring's consumed counter. */
        g.sent += (uint64_t)b.n;
        SW_LOG_DEBUG_("reporter: delivered %d segment(s)", b.n);
    } else if (rc != -EAGAIN) {
        const char *msg;
        int st = sw_transport_last_status(g.t, &msg);
        g.failed_batches++;
        SW_LOGW("reporter: collect of %d segment(s) to %s failed (status %d %s); retrying after "
                "%ld ms",
                b.n, g.collector, st, msg, sw_transport_backoff_left_ms(g.t));
    }
    int n = b.n;
    batch_free(&b);
    return rc == 0 ? n : rc;
}

/* ---- heartbeats ---- */

static void host_info(void)
{
    struct ifaddrs *ifa = NULL;

    if (gethostname(g.hostname, sizeof(g.hostname)) != 0)
        snprintf(g.hostname, sizeof(g.hostname), "localhost");
    g.hostname[sizeof(g.hostname) - 1] = '\0';
    g.nipv4 = 0;
    if (getifaddrs(&ifa) != 0)
        return;
    for (struct ifaddrs *i = ifa; i && g.nipv4 < 10; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        const struct sockaddr_in *sin = (const struct sockaddr_in *)i->ifa_addr;
        if ((ntohl(sin->sin_addr.s_addr) >> 24) == 127)
            continue;
        inet_ntop(AF_INET, &sin->sin_addr, g.ipv4[g.nipv4], INET_ADDRSTRLEN);
        g.nipv4++;
    }
    freeifaddrs(ifa);
    if (g.nipv4 == 0)
        snprintf(g.ipv4[g.nipv4++], INET_ADDRSTRLEN, "127.0.0.1");
}

/* True when another live ring already carries heartbeats for the same instance. */
static bool instance_owner_before(int idx)
{
    const struct ring_ent *e = g.rings[idx];
    for (int i = 0; i < idx; i++) {
        const struct ring_ent *o = g.rings[i];
        if (!o->dead && strcmp(o->meta.service, e->meta.service) == 0 &&
            strcmp(o->meta.instance, e->meta.instance) == 0)
            return true;
    }
    return false;
}

static int send_properties(const struct ring_ent *e)
{
    struct sw_kv kv[20];
    char pid[16];
    char ns[SW_RING_NAME_MAX] = "", cluster[SW_RING_NAME_MAX] = "";
    size_t n = 0;
    const char *bar, *bar2;

    /*
     * With agent.namespace or agent.cluster set, the service name is `name|namespace|cluster`
     * (config.c; either part may be empty): the last two '|' delimit them.
     */
    bar2 = strrchr(e->meta.service, '|');
    if (bar2) {
        for (bar = bar2; bar > e->meta.service && bar[-1] != '|';)
            bar--;
        if (bar > e->meta.service) {
            snprintf(ns, sizeof(ns), "%.*s", (int)(bar2 - bar), bar);
            snprintf(cluster, sizeof(cluster), "%s", bar2 + 1);
        }
    }
    snprintf(pid, sizeof(pid), "%d", (int)e->meta.pid);
    kv[n++] = (struct sw_kv){"language", SW_LANGUAGE};
    kv[n++] = (struct sw_kv){"OS Name", "Linux"};
    kv[n++] = (struct sw_kv){"hostname", g.hostname};
    for (int i = 0; i < g.nipv4; i++)
        kv[n++] = (struct sw_kv){"ipv4", g.ipv4[i]};
    kv[n++] = (struct sw_kv){"Process No.", pid};
    if (ns[0])
        kv[n++] = (struct sw_kv){"namespace", ns};
    if (cluster[0])
        kv[n++] = (struct sw_kv){"cluster", cluster};
    if (e->meta.exe[0])
        kv[n++] = (struct sw_kv){"executable", e->meta.exe};
    kv[n++] = (struct sw_kv){"agent", "swagent " SW_VERSION_STRING};
    return sw_transport_properties(g.t, e->meta.service, e->meta.instance, kv, n);
}

static void heartbeats(void)
{
    uint64_t now = now_ms();
    uint64_t period = (uint64_t)(g.cfg.heartbeat_period > 0 ? g.cfg.heartbeat_period : 30) * 1000;
    uint64_t factor = g.cfg.properties_report_period_factor > 0
                          ? (uint64_t)g.cfg.properties_report_period_factor
                          : 10;

    for (int i = 0; i < g.nrings; i++) {
        struct ring_ent *e = g.rings[i];
        int rc;
        if (e->dead || e->hb_next_ms > now || instance_owner_before(i))
            continue;
        if (sw_transport_backing_off(g.t))
            return;
        if (e->hb_ticks % factor == 0)
            rc = send_properties(e);
        else
            rc = sw_transport_keepalive(g.t, e->meta.service, e->meta.instance);
        if (rc == 0) {
            e->hb_ticks++;
            e->hb_next_ms = now + period;
        } else if (rc != -EAGAIN) {
            SW_LOGW("reporter: heartbeat for %s/%s failed (%d)", e->meta.service, e->meta.instance,
                    rc);
            e->hb_next_ms = now + 1000; /* retried after the transport's backoff */
        }
    }
}

/* ---- status file ---- */

static void write_status(void)
{
    char tmp[PATH_MAX + 8];
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s.tmp", g.status_path);
    f = fopen(tmp, "we");
    if (!f)
        return;
    fprintf(f, "pid=%d collector=%s started=%lld\n", (int)getpid(), g.collector,
            (long long)g.started);
    fprintf(f, "sent=%llu failed_batches=%llu dropped=%llu removed_rings=%llu backoff_ms=%ld\n",
            (unsigned long long)g.sent, (unsigned long long)g.failed_batches,
            (unsigned long long)g.dropped, (unsigned long long)g.removed,
            sw_transport_backoff_left_ms(g.t));
    for (int i = 0; i < g.nrings; i++) {
        struct ring_ent *e = g.rings[i];
        struct sw_ring_stats st;
        sw_ring_get_stats(e->r, &st);
        fprintf(f,
                "ring %s pid=%d service=%s %s committed=%llu delivered=%llu ring_dropped=%llu "
                "bad=%llu\n",
                e->name, (int)e->meta.pid, e->meta.service, e->dead ? "dead" : "live",
                (unsigned long long)st.committed, (unsigned long long)st.consumed,
                (unsigned long long)st.dropped, (unsigned long long)e->bad);
    }
    if (fclose(f) == 0)
        rename(tmp, g.status_path);
    else
        unlink(tmp);
}

/* ---- start-up ---- */

static void usage(FILE *f)
{
    fprintf(f, "usage: swagent-reporter [--foreground] [--config FILE] [--runtime-dir DIR] "
               "[--collector HOST:PORT] [--idle-exit SECONDS]\n");
}

/* Never run under the agent: drop LD_PRELOAD, re-executing when libswagent.so is loaded. */
static void leave_agent(char **argv)
{
    const char *p = getenv("LD_PRELOAD");
    bool ours = p && strstr(p, "swagent") != NULL;

    unsetenv("LD_PRELOAD");
    if (ours && !getenv("SWAGENT_REPORTER_REEXEC")) {
        setenv("SWAGENT_REPORTER_REEXEC", "1", 1);
        execv("/proc/self/exe", argv);
    }
    unsetenv("SWAGENT_REPORTER_REEXEC");
}

static void self_dir(char *out, size_t cap)
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    char *slash;

    out[0] = '\0';
    if (n <= 0)
        return;
    buf[n] = '\0';
    slash = strrchr(buf, '/');
    if (slash)
        *slash = '\0';
    snprintf(out, cap, "%s", buf);
}

int main(int argc, char **argv)
{
    const char *config = NULL, *rdir = NULL, *collector = NULL;
    char sdir[PATH_MAX], lock_path[PATH_MAX];
    int idle = -1, lock_fd;
    struct sigaction sa;

    leave_agent(argv);
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--foreground") == 0) {
            g.foreground = true;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--version") == 0) {
            printf("swagent-reporter %s\n", SW_VERSION_STRING);
            return 0;
        } else if (v && strcmp(argv[i], "--config") == 0) {
            config = v, i++;
        } else if (v && strcmp(argv[i], "--runtime-dir") == 0) {
            rdir = v, i++;
        } else if (v && strcmp(argv[i], "--collector") == 0) {
            collector = v, i++;
        } else if (v && strcmp(argv[i], "--idle-exit") == 0) {
            char *end;
            long x = strtol(v, &end, 10);
            if (*end || x < 0 || x > 86400 * 365) {
                usage(stderr);
                return 2;
            }
            idle = (int)x, i++;
        } else {
            usage(stderr);
            return 2;
        }
    }

    self_dir(sdir, sizeof(sdir));
    sw_config_load(&g.cfg, config, sdir[0] ? sdir : NULL);
    if (rdir) {
        /* The log follows the runtime directory unless logging.dir names another one. */
        if (strcmp(g.cfg.log_dir, g.cfg.runtime_dir) == 0)
            snprintf(g.cfg.log_dir, sizeof(g.cfg.log_dir), "%s", rdir);
        snprintf(g.cfg.runtime_dir, sizeof(g.cfg.runtime_dir), "%s", rdir);
    }
    if (collector)
        snprintf(g.cfg.backend_service, sizeof(g.cfg.backend_service), "%s", collector);
    snprintf(g.collector, sizeof(g.collector), "%s", g.cfg.backend_service);
    /* Started on demand: idle exit; --foreground: only when asked. */
    g.idle_exit = idle >= 0 ? idle : (g.foreground ? 0 : g.cfg.reporter_idle_exit);

    {
        /* The same checks as the agent: ours, mode 0700, not a symlink. */
        int dfd = sw_ring_dir_open(g.cfg.runtime_dir, true);
        if (dfd < 0) {
            fprintf(stderr, "swagent-reporter: unusable runtime directory %s: %s\n",
                    g.cfg.runtime_dir, strerror(-dfd));
            return 1;
        }
        close(dfd);
    }
    if (sw_spawn_reporter_file(lock_path, sizeof(lock_path), g.cfg.runtime_dir, g.collector,
                               ".lock") != 0 ||
        sw_spawn_reporter_file(g.status_path, sizeof(g.status_path), g.cfg.runtime_dir, g.collector,
                               ".status") != 0) {
        fprintf(stderr, "swagent-reporter: runtime dir path too long\n");
        return 1;
    }
    lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lock_fd < 0) {
        fprintf(stderr, "swagent-reporter: cannot open %s: %s\n", lock_path, strerror(errno));
        return 1;
    }
    if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
        if (g.foreground)
            fprintf(stderr, "swagent-reporter: a reporter for %s is already running\n",
                    g.collector);
        return 0; /* another reporter serves this user and collector */
    }

    sw_log_open(g.cfg.log_dir[0] ? g.cfg.log_dir : g.cfg.runtime_dir, "swagent-reporter.log",
                g.cfg.log_level, g.cfg.log_max_file_size);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (!g.foreground)
        signal(SIGHUP, SIG_IGN);

    g.started = (int64_t)time(NULL);
    host_info();
    g.t = sw_transport_new(&g.cfg, g.collector);
    if (!g.t) {
        SW_LOGE("reporter: cannot create a gRPC channel to %s", g.collector);
        return 1;
    }
    SW_LOGI("reporter %s started: pid %d, collector %s, runtime dir %s, idle exit %d s",
            SW_VERSION_STRING, (int)getpid(), g.collector, g.cfg.runtime_dir, g.idle_exit);
    if (g.foreground)
        fprintf(stderr, "swagent-reporter: pid %d, collector %s, runtime dir %s\n", (int)getpid(),
                g.collector, g.cfg.runtime_dir);

    uint64_t next_scan = 0, next_status = 0, idle_since = now_ms();
    while (!g_stop) {
        uint64_t now = now_ms();
        int sent;
        bool live = false, pending = false;

        if (now >= next_scan) {
            scan_rings();
            next_scan = now + SW_SCAN_MS;
        }
        sent = send_batch();
        heartbeats();
        /* Remove drained rings of dead processes; note what keeps us alive. */
        for (int i = 0; i < g.nrings;) {
            struct ring_ent *e = g.rings[i];
            bool empty = e->corrupt || sw_ring_empty(e->r);
            if (e->dead && empty) {
                drop_ring(i, true);
                continue;
            }
            if (!e->dead)
                live = true;
            if (!empty)
                pending = true;
            i++;
        }
        now = now_ms();
        if (now >= next_status) {
            write_status();
            next_status = now + SW_STATUS_MS;
        }
        if (live || pending)
            idle_since = now;
        else if (g.idle_exit > 0 && now - idle_since >= (uint64_t)g.idle_exit * 1000) {
            SW_LOGI("reporter: no traced process for %d s; exiting", g.idle_exit);
            break;
        }
        if (sent > 0)
            continue; /* more may be waiting */
        long nap = SW_IDLE_SLEEP_MS;
        if (sent < 0 && sent != -EAGAIN)
            nap = 0; /* the backoff is armed; the next pass sleeps it */
        if (sw_transport_backing_off(g.t)) {
            long left = sw_transport_backoff_left_ms(g.t);
            nap = left < 200 ? (left > SW_IDLE_SLEEP_MS ? left : SW_IDLE_SLEEP_MS) : 200;
        }
        if (nap > 0)
            sleep_ms(nap);
    }

    write_status();
    for (int i = g.nrings - 1; i >= 0; i--)
        drop_ring(i, false);
    sw_transport_free(g.t);
    SW_LOGI("reporter: exiting (sent %llu, failed batches %llu, dropped %llu)",
            (unsigned long long)g.sent, (unsigned long long)g.failed_batches,
            (unsigned long long)g.dropped);
    unlink(g.status_path);
    close(lock_fd);
    return 0;
}
