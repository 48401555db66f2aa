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
 *   - every second, and within 200 ms of a change in the directory: sw_drain_scan finds the
 *     rings (`ring-*.swr`) of processes reporting to this collector (sw_drain_set_collector),
 *     notes which producers died, and removes drained rings of dead processes (drain.c);
 *   - sw_drain_next hands out up to SW_BATCH_MAX records round robin (nothing released yet);
 *     each is encoded into a SegmentObject and all go as one SegmentCollection on collectInSync
 *     (or on one `collect` stream: swagent.grpc_batch=false, or a collector without
 *     collectInSync; transport.h); only when that call ends OK are they committed (released):
 *     at-least-once; a failed batch is rewound and handed out again after the transport's
 *     backoff, apart from the segments of the collectInSync calls (one per 2 MiB) that ended OK
 *     before the failure, which are committed. After a partial batch (the rings are empty) the
 *     next one waits 20 ms, so batches stay large at moderate rates; full batches follow each
 *     other without a pause;
 *   - heartbeats: each live instance gets reportInstanceProperties and a keepAlive at once
 *     (the keepAlive registers its service in the OAP), reportInstanceProperties every
 *     properties_report_period_factor ticks, keepAlive on the other ticks, one tick every
 *     collector.heartbeat_period seconds; an exited process gets one last report (with a
 *     keepAlive if it never had one) once all its segments are accounted for;
 *   - collector unreachable (a call failed, until one succeeds): the rings of exited processes,
 *     rings more than half full, and after 30 s of outage every ring, are spooled to disk (spool.h:
 *     zstd files in swagent.spool_dir, default `<runtime_dir>/spool-<collector>` (with the
 *     runtime directory in /dev/shm: `/tmp/swagent-<uid>/spool-<collector>`, on a disk), capped by
 *     swagent.spool_max_bytes; the ring records are released only once the file is fsync'ed),
 *     so rings of dead processes can be removed and a live application never drops because of
 *     an outage. Calls made while failing are probes with a deadline of at most 5 s, so a
 *     collector that accepts connections but never answers holds the loop only briefly; a
 *     batch is preceded by an empty probe then, and goes under the configured deadline once
 *     the probe was answered (a big batch on a slow link may need more than 5 s);
 *   - collector reachable again: spool files are replayed oldest first, one file per collect
 *     stream, alternating with live batches (one spool file, then one live batch, per pass), so
 *     live rings keep draining during a long replay; a file is removed only when its stream
 *     ended OK (at-least-once: a segment is sent again only when its call did not end OK, or
 *     when the reporter was killed between the OK and the release/unlink; a file's segments
 *     delivered by calls before a failed one are counted in memory and skipped next time);
 *   - per traced process (pid + start time): the ring header's committed and dropped, and
 *     sent / failed / spooled / replayed segments are kept, written to the status file, logged
 *     every 10 s when they changed, and reported as instance properties
 *     (swagent.segments.{committed,dropped,sent,failed,spooled,replayed}) with the periodic
 *     reportInstanceProperties and at once when dropped/failed/spooled/replayed changed;
 *   - `<runtime_dir>/reporter-<collector>.status` is rewritten when it changes, at most about
 *     once a second (and every 60 s);
 *   - with no live traced process and nothing left to send (rings, and the spool unless the
 *     collector is failing: spooled segments are safe on disk and wait for the next reporter of
 *     this collector) for --idle-exit seconds (swagent.reporter_idle_exit when started on
 *     demand; never with --foreground unless --idle-exit is given), it exits, after one more
 *     look at the rings with its lock and at the directory once the lock is released
 *     (idle_leave; --test-exit-pause-ms N, for tests only, holds it N ms before the release).
 *     SIGTERM/SIGINT: finish the current batch, exit; a batch whose channel is still
 *     connecting is not sent but left where it is (its ring or spool file) within ~100 ms, and
 *     no new batch, spooling or heartbeat starts.
 * It sleeps 20 ms when there was nothing to send (100 ms after a quiet second, up to 200 ms
 * steps while backing off): it never busy-loops.
 */
#include "common.h"

#include "cds.h"
#include "config.h"
#include "drain.h"
#include "encode.h"
#include "log.h"
#include "logs.h"
#include "meter.h"
#include "procs.h"
#include "profile.h" /* agent/reporter/profile.h */
#include "record.h"
#include "ring.h"
#include "selfnote.h"
#include "spawn.h"
#include "spool.h"
#include "svcgc.h"
#include "transport.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

SW_SELFNOTE_ASM; /* libswagent.so stays off in this process (selfnote.h) */

#define SW_BATCH_MAX 2000      /* segments per batch (transport.c splits it into 2 MiB messages) */
#define SW_SPOOL_FILE_SEGS 500 /* segments per spool file (one replayed call each) */
/*
 * Rings: the directory is looked at (one stat) every SW_DIR_LOOK_MS and scanned when it
 * changed, or SW_SCAN_MS after the last scan. A scan (list the directory, stat every ring,
 * read /proc for every producer's liveness) every 200 ms was about half the CPU of an idle
 * reporter; a new ring is still found within ~200 ms, and a producer's exit within a second.
 */
#define SW_SCAN_MS 1000
#define SW_DIR_LOOK_MS 200
#define SW_IDLE_SLEEP_MS 20   /* the shortest pause while backing off */
#define SW_QUIET_SLEEP_MS 100 /* the pause when no batch is held */
/*
 * Flushing: a batch goes out once SW_FLUSH_BYTES are waiting in the rings (about 2,000
 * typical segments), once a ring is SW_FLUSH_FILL_PERMILLE full, or SW_FLUSH_MAX_MS after the
 * previous batch, whichever comes first; a held batch is looked at every SW_HOLD_NAP_MS. One
 * collectInSync call costs the reporter ~450 µs of CPU whatever it carries (bench/: at 800
 * requests/s, 20 ms batches of 16 segments cost 29 µs of reporter CPU per request, on the
 * application's core when there is no spare one), so a slow trickle waits up to
 * SW_FLUSH_MAX_MS and goes in one call, while a fast stream is sent as soon as a batch is full.
 * Measured on the paced nginx pair of bench/ (8,000 requests/s, the reporter on nginx's
 * core): batches of up to 500 segments flushed at 96 KiB or a ring 1/8 full made ~20 calls a
 * second and nginx's p99 1.12x of bare; up to 2,000 flushed at 512 KiB or 1/4 full, ~5 calls
 * a second and 1.05x (medians of 12 repetitions each, alternated in one run): fewer wake-ups
 * of the reporter and the collector on that core, fewer times nginx finds its caches cold.
 */
#define SW_FLUSH_MAX_MS 1000
/*
 * While a batch is held (too little waiting, flushed too recently), the rings are looked at
 * every SW_HOLD_NAP_MS: often enough that a ring filling at the fastest rate an application
 * core produces (~30,000 segments/s of ~250 bytes: 750 KB in 100 ms, a third of the default
 * 2 MiB ring) is flushed at 1/4 full before it overflows; seldom enough that holding costs
 * ten wake-ups a second, not fifty.
 */
#define SW_HOLD_NAP_MS 100
#define SW_FLUSH_BYTES (512 * 1024)
#define SW_FLUSH_FILL_PERMILLE 250
#define SW_STATUS_MS 1000 /* status file period */
#define SW_MAX_RINGS 1024
#define SW_STATS_LOG_MS 10000       /* per-process counters are logged this often when changed */
#define SW_SPOOL_FILES_PER_PASS 4   /* spool files written per loop pass at most */
#define SW_SPOOL_ALL_AFTER_MS 30000 /* an outage this long spools every ring */
#define SW_EXIT_REPORTS_PER_S 10    /* last reports of exited processes a second, at most */
/*
 * InstanceProperties `language`: "native". The traced program may be written in anything (C,
 * Rust, Go with cgo, Python's interpreter...): the agent sees its libc calls, not its source
 * language, so the property names the kind of agent rather than guessing. `agent` carries
 * "swagent <version>" and `executable` the program's name.
 */
#define SW_LANGUAGE "native"

/* Heartbeat state of one tracked ring (one traced process). */
struct hb {
    uint64_t ring_id; /* sw_drain ring id */
    uint64_t next_ms; /* monotonic time of the next heartbeat; 0 = at once */
    uint64_t ticks;   /* heartbeats sent */
    bool seen;        /* listed by the last sw_drain_list */
};

/* One record of the batch in flight: where it came from, for sw_drain_commit. */
struct taken {
    uint64_t ring_id;
    uint64_t cursor;
    bool bad; /* a segment record that does not encode: counted as dropped once committed */
};

static struct {
    struct sw_config cfg;
    char collector[SW_CFG_STR_MAX]; /* collector.backend_service: where to send */
    char key[SW_CFG_STR_MAX];       /* the reporter key (config.h): lock, status, spool, rings */
    uint32_t settings_id;           /* sw_config_settings_id of cfg */
    bool foreground;
    int idle_exit; /* seconds, 0 = never */
    struct sw_transport *t;
    struct sw_drain *d;
    struct sw_rprof *prof; /* trace profiling (profile.c); NULL when profile.active is off */
    struct sw_rlog *logs;  /* stdout/stderr lines (logs.c); NULL on out of memory */
    struct sw_drain_info info[SW_MAX_RINGS]; /* the last sw_drain_list */
    int ninfo;
    struct hb hb[SW_MAX_RINGS];
    int nhb;
    struct sw_procs procs;  /* the processes' counters (procs.h) */
    uint64_t pass_ms;       /* the main loop's pass started (a process's last touch) */
    struct sw_spool *spool; /* NULL: spooling unavailable (logged) */
    uint64_t failing_since; /* monotonic ms the collector started failing; 0 = reachable */
    uint64_t sent, failed_batches, dropped, spooled, replayed, failed_segments;
    /* A spool file whose replay failed after its first replay_done segments were delivered
     * (a file of more than 2 MiB goes in several calls): those are not sent again. */
    uint64_t replay_seq;
    size_t replay_done;
    char hostname[256];
    char ipv4[10][INET_ADDRSTRLEN];
    int nipv4;
    char status_path[PATH_MAX];
    int64_t started;
    long test_exit_pause_ms; /* --test-exit-pause-ms: tests hold an idle exit here */
} g;

static volatile sig_atomic_t g_stop;
static struct sw_cds *g_cds; /* OAP's configuration for the services served (cds.h) */

/*
 * Per-service shared blocks no process maps any more are removed every SW_SVCGC_EVERY_MS once
 * they are SW_SVCGC_MIN_AGE_S old (svcgc.h): without it each separately started program (its
 * instance name is random) would leave its 4 KiB block in the runtime directory for good.
 */
#define SW_SVCGC_EVERY_MS (5u * 60u * 1000u)
#define SW_SVCGC_MIN_AGE_S 600u

static void svc_gc(uint64_t now)
{
    static uint64_t next;
    static bool unsure_logged;
    if (next == 0)
        next = now + 60u * 1000u; /* the first pass a minute after start */
    if (now < next)
        return;
    next = now + SW_SVCGC_EVERY_MS;
    struct sw_svcgc_result r;
    int rc = sw_svcgc_run(g.cfg.runtime_dir, "/proc", SW_SVCGC_MIN_AGE_S, &r);
    if (rc < 0) {
        SW_LOGW("svc: shared blocks not looked at (error %d)", -rc);
        return;
    }
    if (r.removed > 0)
        SW_LOGI("svc: %d shared block(s) no process uses removed (%d in use)", r.removed,
                r.in_use);
    if (r.unsure > 0 && !unsure_logged)
        SW_LOGI("svc: %d process(es) of this user cannot be looked into (not dumpable): unused "
                "shared blocks are kept while they run",
                r.unsure);
    unsure_logged = r.unsure > 0;
}

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

/* ---- per-process counters ---- */

static uint64_t counters_sig(const struct sw_pstat *p)
{
    return p->committed * 31 + p->dropped * 37 + p->sent * 41 + p->failed * 43 + p->spooled * 47 +
           p->replayed * 53 + p->shed * 59;
}

/* What must reach the collector soon: losses and the ways segments were kept from loss. */
static uint64_t loss_sig(const struct sw_pstat *p)
{
    return p->dropped * 37 + p->failed * 43 + p->spooled * 47 + p->replayed * 53 + p->shed * 59 + 1;
}

/* All of a process's counters: they changed when this did. */
static uint64_t all_sig(const struct sw_pstat *p)
{
    return loss_sig(p) + p->committed * 31 + p->sent * 41;
}

/* The counters of process (pid, start_ms), created when new (procs.h). */
static struct sw_pstat *ps_get(int32_t pid, uint64_t start_ms, const char *service,
                               const char *instance)
{
    return sw_procs_get(&g.procs, pid, start_ms, service, instance, g.pass_ms);
}

static struct sw_pstat *ps_of(const struct sw_ring_meta *m)
{
    return ps_get(m->pid, m->start_time_ms, m->service, m->instance);
}

static void log_counters(const struct sw_pstat *p)
{
    SW_LOGI("reporter: process %d service=%s instance=%s%s: committed=%llu dropped=%llu "
            "sent=%llu failed=%llu spooled=%llu replayed=%llu shed=%llu",
            (int)p->pid, p->service, p->instance, p->has_ring ? (p->alive ? "" : " (exited)") : "",
            (unsigned long long)p->committed, (unsigned long long)p->dropped,
            (unsigned long long)p->sent, (unsigned long long)p->failed,
            (unsigned long long)p->spooled, (unsigned long long)p->replayed,
            (unsigned long long)p->shed);
}

/* Logs the counters of every process whose counters changed since its last line. */
static void log_changed_counters(void)
{
    for (int i = 0; i < g.procs.n; i++) {
        struct sw_pstat *p = &g.procs.ps[i];
        uint64_t sig = counters_sig(p);
        if (sig != p->logged_sig) {
            log_counters(p);
            p->logged_sig = sig;
        }
    }
}

/* Finds rings, notes liveness, removes drained rings of dead processes (drain.c). */
static void scan_rings(void)
{
    int n;

    sw_drain_scan(g.d);
    n = sw_drain_list(g.d, g.info, SW_MAX_RINGS);
    g.ninfo = n < SW_MAX_RINGS ? n : SW_MAX_RINGS;
    for (int i = 0; i < g.procs.n; i++)
        g.procs.ps[i].has_ring = false;
    for (int i = 0; i < g.ninfo; i++) {
        struct sw_pstat *p = ps_of(&g.info[i].meta);
        if (!p)
            continue;
        p->has_ring = true;
        if (!p->exe[0])
            memcpy(p->exe, g.info[i].meta.exe, sizeof(p->exe));
        p->alive = g.info[i].alive;
        p->committed = g.info[i].stats.committed;
        p->dropped = g.info[i].stats.dropped;
        p->shed = g.info[i].stats.shed;
    }
}

/* ---- one batch ---- */

static struct sw_msg g_msgs[SW_BATCH_MAX];
/*
 * The batch's SegmentCollection, encoded entry by entry into one buffer kept between batches
 * (sw_encode_segment_framed): it is sent as it lies, without a copy per segment or a heap block
 * each, and the same memory is reused by the next batch (a smaller footprint in the caches of
 * the core the reporter shares with the application). g_msg_off: each SegmentObject's offset.
 */
static struct sw_obuf g_out;
#define SW_OUT_KEEP_BYTES (4u << 20) /* more than this is freed after its batch */
static size_t g_msg_off[SW_BATCH_MAX];
static struct sw_pstat *g_msg_ps[SW_BATCH_MAX];
static int g_msg_taken[SW_BATCH_MAX]; /* each segment's record in g_taken */
static struct taken g_taken[SW_BATCH_MAX * 2];
static bool g_batch_full; /* the last batch taken stopped at a limit, not at empty rings */

/*
 * A segment the collector refused alone as too large (sw_transport_collect: -EMSGSIZE) is
 * dropped and counted; logged at most once per SW_REFUSED_LOG_MS with the number since, so a
 * collector whose limit every segment exceeds does not flood the log.
 */
#define SW_REFUSED_LOG_MS 10000
static void drop_refused(size_t bytes, const char *service, const char *what)
{
    static uint64_t last_ms, unlogged;
    uint64_t now = now_ms();
    const char *msg;

    g.dropped++;
    if (last_ms && now - last_ms < SW_REFUSED_LOG_MS) {
        unlogged++;
        return;
    }
    sw_transport_last_status(g.t, &msg);
    SW_LOGW("reporter: %s refused a %s of %zu bytes (service %s) as too large (%s); dropped, "
            "it can never be delivered (%llu more since the last such line)",
            g.collector, what, bytes, service, msg, (unsigned long long)unlogged);
    last_ms = now;
    unlogged = 0;
}

/*
 * Takes up to SW_BATCH_MAX segments from the rings (round robin, nothing released), encodes
 * them, and sends them (sw_transport_collect). Only what the collector confirmed is committed
 * (released): the whole batch, or after a failure the segments of the calls that ended OK
 * before it (a batch of more than 2 MiB goes in several); the rest is handed out again next
 * time. Records that are not segments or do not parse are committed with the segments around
 * them (counted). Returns the number of segments delivered, or a negative errno.
 */
static int send_batch(void)
{
    struct sw_drained rec;
    int nmsg = 0, ntaken = 0, rc = 0;

    if (sw_transport_backing_off(g.t))
        return -EAGAIN; /* nothing is taken (or encoded) until the backoff ends */
    while (nmsg < SW_BATCH_MAX && ntaken < (int)SW_ARRAY_LEN(g_taken) &&
           sw_drain_next(g.d, &rec) == 1) {
        g_taken[ntaken].ring_id = rec.ring_id;
        g_taken[ntaken].cursor = rec.cursor;
        g_taken[ntaken].bad = false;
        ntaken++;
        if (rec.type == SW_REC_LOG) { /* stdout/stderr bytes (logs.c) */
            sw_rlog_record(g.logs, rec.ring_id, rec.cursor, rec.meta, rec.payload, rec.len);
            continue;
        }
        if (rec.type != SW_REC_SEGMENT) { /* profile samples (profile.c); others: later versions */
            sw_rprof_record(g.prof, rec.ring_id, rec.cursor, rec.meta, rec.type, rec.payload,
                            rec.len);
            continue;
        }
        size_t off, len;
        if (sw_encode_segment_framed(rec.payload, rec.len, rec.meta, &g_out, &off, &len) != 0) {
            g_taken[ntaken - 1].bad = true; /* a failed batch hands it out again */
            continue;
        }
        g_msg_off[nmsg] = off;
        g_msg_taken[nmsg] = ntaken - 1;
        g_msgs[nmsg].len = len;
        g_msgs[nmsg].framed = true;
        g_msg_ps[nmsg] = ps_of(rec.meta);
        nmsg++;
        if ((nmsg & (SW_YIELD_EVERY - 1)) == 0)
            sched_yield(); /* see SW_YIELD_EVERY (transport.h) */
    }
    if (ntaken == 0)
        return 0;
    for (int i = 0; i < nmsg; i++) /* the buffer has stopped moving */
        g_msgs[i].data = g_out.p + g_msg_off[i];
    g_batch_full = nmsg == SW_BATCH_MAX || ntaken == (int)SW_ARRAY_LEN(g_taken);
    size_t got = 0;
    if (nmsg > 0)
        rc = sw_transport_collect(g.t, g_msgs, (size_t)nmsg, &got);
    int delivered = rc == 0 ? nmsg : (int)got;
    /* -EMSGSIZE: the segment after the delivered ones was refused alone as too large. */
    int refused = rc == -EMSGSIZE && delivered < nmsg ? 1 : 0;
    /* The records up to the last delivered (or refused) segment, all of them when the batch
     * went through; a ring's records are taken in its order, so each is released to a cursor. */
    int upto = delivered + refused;
    int ncommit = rc == 0 ? ntaken : upto > 0 ? g_msg_taken[upto - 1] + 1 : 0;
    for (int i = 0; i < ncommit; i++) {
        sw_drain_commit(g.d, g_taken[i].ring_id, g_taken[i].cursor);
        if (g_taken[i].bad)
            g.dropped++;
    }
    g.sent += (uint64_t)delivered;
    for (int i = 0; i < delivered; i++)
        if (g_msg_ps[i])
            g_msg_ps[i]->sent++;
    if (rc == 0) {
        SW_LOG_DEBUG_("reporter: delivered %d segment(s)", nmsg);
    } else {
        sw_drain_rewind(g.d);
        if (refused) {
            const struct sw_pstat *p = g_msg_ps[delivered];
            drop_refused(g_msgs[delivered].len, p ? p->service : "?", "segment");
            rc = 0; /* not a failure: the rest goes on at once */
            g_batch_full = true;
        } else if (rc == -EINTR) {
            /* Stopping while the channel was still connecting: nothing was sent. */
            SW_LOGI("reporter: stopping while connecting to %s: %d segment(s) stay in their "
                    "rings for the next reporter",
                    g.collector, nmsg - delivered);
        } else if (rc != -EAGAIN) {
            const char *msg;
            int st = sw_transport_last_status(g.t, &msg);
            g.failed_batches++;
            g.failed_segments += (uint64_t)(nmsg - delivered);
            for (int i = delivered; i < nmsg; i++)
                if (g_msg_ps[i])
                    g_msg_ps[i]->failed++;
            if (delivered == 0)
                SW_LOGW("reporter: collect of %d segment(s) to %s failed (status %d %s); "
                        "retrying after %ld ms",
                        nmsg, g.collector, st, msg, sw_transport_backoff_left_ms(g.t));
            else
                SW_LOGW("reporter: collect of %d segment(s) to %s failed (status %d %s) after "
                        "the first %d were delivered; retrying the other %d after %ld ms",
                        nmsg, g.collector, st, msg, delivered, nmsg - delivered,
                        sw_transport_backoff_left_ms(g.t));
        }
    }
    g_out.len = 0;
    if (g_out.cap > SW_OUT_KEEP_BYTES) { /* a batch of large segments: do not keep its memory */
        free(g_out.p);
        g_out = (struct sw_obuf){NULL, 0, 0};
    }
    return rc == 0 ? delivered : rc;
}

/* ---- spool: keeping segments on disk while the collector is unreachable ---- */

/*
 * While the collector is failing, a ring is spooled when its producer is dead (its ring file
 * can then be removed, and it is not held up by a later collector), when it is more than
 * half full (the application would soon drop), or when the outage has lasted
 * SW_SPOOL_ALL_AFTER_MS (the segments then wait on disk rather than in shared memory). Everything
 * committed in such rings goes to disk, SW_SPOOL_FILE_SEGS segments per spool file (segments of
 * several rings share a file); ring records are released only after the file is durable
 * (sw_spool_commit).
 */
static struct taken g_spool_last[SW_MAX_RINGS];   /* per ring in the batch: its last cursor */
static struct sw_pstat *g_spool_ps[SW_MAX_RINGS]; /* ... its process */
static int g_spool_n[SW_MAX_RINGS];               /* ... its segments */

static int spool_file(bool all)
{
    struct sw_drained rec;
    int nrings = 0, nseg = 0, ntaken = 0, nbad = 0;

    for (int i = 0; i < g.ninfo && nseg < SW_SPOOL_FILE_SEGS; i++) {
        const struct sw_drain_info *e = &g.info[i];
        int slot = -1;
        if (e->used == 0 || (e->alive && e->used * 2 <= e->capacity && !all))
            continue;
        while (nseg < SW_SPOOL_FILE_SEGS && sw_drain_next_in(g.d, e->ring_id, &rec) == 1) {
            if (slot < 0) {
                slot = nrings++;
                g_spool_last[slot].ring_id = e->ring_id;
                g_spool_ps[slot] = ps_of(&e->meta);
                g_spool_n[slot] = 0;
            }
            g_spool_last[slot].cursor = rec.cursor;
            ntaken++;
            if (rec.type == SW_REC_LOG) /* kept in memory by logs.c, not spooled (logs.h) */
                sw_rlog_record(g.logs, rec.ring_id, rec.cursor, rec.meta, rec.payload, rec.len);
            if (rec.type != SW_REC_SEGMENT)
                continue;
            uint8_t *out = NULL;
            size_t out_len = 0;
            if (sw_encode_segment(rec.payload, rec.len, rec.meta, &out, &out_len) != 0) {
                nbad++; /* counted once the file is committed (else it is taken again) */
                continue;
            }
            struct sw_spool_rec sr = {
                .pid = rec.meta->pid,
                .start_ms = rec.meta->start_time_ms,
                .service = rec.meta->service,
                .instance = rec.meta->instance,
                .seg = out,
                .seg_len = out_len,
            };
            int rc = sw_spool_add(g.spool, &sr);
            free(out);
            if (rc != 0) {
                sw_spool_abort(g.spool);
                sw_drain_rewind(g.d);
                return rc;
            }
            nseg++;
            g_spool_n[slot]++;
        }
    }
    if (ntaken == 0)
        return 0;
    if (sw_spool_commit(g.spool) != 0) {
        sw_drain_rewind(g.d); /* the records stay in their rings */
        return -EIO;
    }
    for (int i = 0; i < nrings; i++) {
        sw_drain_commit(g.d, g_spool_last[i].ring_id, g_spool_last[i].cursor);
        if (g_spool_ps[i])
            g_spool_ps[i]->spooled += (uint64_t)g_spool_n[i];
    }
    g.spooled += (uint64_t)nseg;
    g.dropped += (uint64_t)nbad;
    SW_LOGI("reporter: collector %s unreachable: spooled %d segment(s) of %d process(es) to %s",
            g.collector, nseg, nrings, sw_spool_dir(g.spool));
    return nseg;
}

static void spool_at_risk(void)
{
    uint64_t now = now_ms();

    if (!sw_transport_failing(g.t)) {
        g.failing_since = 0;
        return;
    }
    if (!g.failing_since)
        g.failing_since = now;
    if (!g.spool)
        return;
    bool all = now - g.failing_since >= SW_SPOOL_ALL_AFTER_MS;
    for (int files = 0; files < SW_SPOOL_FILES_PER_PASS; files++)
        if (spool_file(all) <= 0)
            break;
}

/* Counts spool records [from, to) as replayed, per process too. */
static void count_replayed(const struct sw_spool_batch *b, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) {
        struct sw_pstat *p =
            ps_get(b->recs[i].pid, b->recs[i].start_ms, b->recs[i].service, b->recs[i].instance);
        if (p)
            p->replayed++;
    }
    g.replayed += to - from;
}

/*
 * Sends the oldest spool file as one batch (sw_transport_collect); the file is removed only
 * when every segment in it was delivered. After a failure, the segments that calls ending OK
 * delivered (a file of more than 2 MiB goes in several) are remembered, in memory, and not
 * sent again by this reporter. Returns the number of segments replayed, 0 when there is
 * nothing to replay, or a negative errno.
 */
static int replay_spool(void)
{
    struct sw_spool_batch b;
    int rc;

    if (!g.spool || sw_spool_empty(g.spool) || sw_transport_backing_off(g.t))
        return 0;
    rc = sw_spool_load_oldest(g.spool, &b);
    if (rc <= 0)
        return rc;
    size_t n = b.n, skip = b.seq == g.replay_seq && g.replay_done < n ? g.replay_done : 0;
    struct sw_msg *msgs = malloc((n - skip + 1) * sizeof(*msgs));
    if (!msgs)
        return -ENOMEM;
    for (size_t i = skip; i < n; i++) {
        msgs[i - skip] = (struct sw_msg){b.recs[i].seg, b.recs[i].seg_len, false}; /* not framed */
    }
    size_t got = 0;
    rc = sw_transport_collect(g.t, msgs, n - skip, &got);
    free(msgs);
    if (rc != 0 && got > 0) {
        count_replayed(&b, skip, skip + got);
        g.replay_seq = b.seq;
        g.replay_done = skip + got;
    }
    if (rc == -EMSGSIZE) {
        /* Record skip + got was refused alone as too large: dropped, the rest goes on. */
        drop_refused(b.recs[skip + got].seg_len, b.recs[skip + got].service, "spooled segment");
        g.replay_seq = b.seq;
        g.replay_done = skip + got + 1;
        if (g.replay_done == n)
            sw_spool_remove(g.spool, b.seq); /* that was its last segment */
        return (int)got;
    }
    if (rc != 0) {
        if (rc == -EINTR) {
            SW_LOGI("reporter: stopping while connecting to %s: spool file %llu kept", g.collector,
                    (unsigned long long)b.seq);
        } else if (rc != -EAGAIN) {
            const char *msg;
            int st = sw_transport_last_status(g.t, &msg);
            g.failed_batches++;
            g.failed_segments += n - skip - got;
            if (skip + got == 0)
                SW_LOGW("reporter: replay of spool file %llu (%zu segment(s)) to %s failed "
                        "(status %d %s); kept",
                        (unsigned long long)b.seq, n, g.collector, st, msg);
            else
                SW_LOGW("reporter: replay of spool file %llu (%zu segment(s)) to %s failed "
                        "(status %d %s); kept, its first %zu delivered (not sent again)",
                        (unsigned long long)b.seq, n, g.collector, st, msg, skip + got);
        }
        return rc;
    }
    count_replayed(&b, skip, n);
    sw_spool_remove(g.spool, b.seq);
    SW_LOG_DEBUG_("reporter: replayed spool file %llu (%zu segment(s))", (unsigned long long)b.seq,
                  n - skip);
    return (int)(n - skip);
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

/* A budget of last reports of exited processes: SW_EXIT_REPORTS_PER_S per second. */
static bool exit_report_allowed(uint64_t now)
{
    static uint64_t window_ms;
    static int used;

    if (now - window_ms >= 1000) {
        window_ms = now;
        used = 0;
    }
    if (used >= SW_EXIT_REPORTS_PER_S)
        return false;
    used++;
    return true;
}

/* True when a live ring carries heartbeats for m's instance. */
static bool instance_live(const struct sw_ring_meta *m)
{
    for (int i = 0; i < g.ninfo; i++) {
        const struct sw_drain_info *o = &g.info[i];
        if (o->alive && strncmp(o->meta.service, m->service, SW_RING_NAME_MAX) == 0 &&
            strncmp(o->meta.instance, m->instance, SW_RING_NAME_MAX) == 0)
            return true;
    }
    return false;
}

/* True when an earlier live ring already carries heartbeats for the same instance. */
static bool instance_owner_before(int idx)
{
    const struct sw_ring_meta *m = &g.info[idx].meta;
    for (int i = 0; i < idx; i++) {
        const struct sw_drain_info *o = &g.info[i];
        if (o->alive && strncmp(o->meta.service, m->service, SW_RING_NAME_MAX) == 0 &&
            strncmp(o->meta.instance, m->instance, SW_RING_NAME_MAX) == 0)
            return true;
    }
    return false;
}

static bool same_instance(const struct sw_pstat *p, const struct sw_ring_meta *m)
{
    return strncmp(p->service, m->service, SW_RING_NAME_MAX) == 0 &&
           strncmp(p->instance, m->instance, SW_RING_NAME_MAX) == 0;
}

/* The losses of some process of m's instance changed since its last report. */
static bool instance_news(const struct sw_ring_meta *m)
{
    ps_of(m); /* m's own process is in the table */
    for (int i = 0; i < g.procs.n; i++) {
        const struct sw_pstat *p = &g.procs.ps[i];
        if (same_instance(p, m) && p->reported_sig != 0 && loss_sig(p) != p->reported_sig)
            return true;
    }
    return false;
}

/*
 * reportInstanceProperties of m's instance. One instance may be several processes: the forked
 * workers of a server (nginx, a prefork server) inherit their master's instance name, so they
 * are one instance, as SkyWalking's agents for such servers report them (the nginx Lua and PHP
 * agents: one instance per server; docs/oap.md). Its properties must not depend on which
 * process reports: `Process No.` is the lowest pid of its live processes, `swagent.processes`
 * their number, and the swagent.segments.* counters are the sums over all its processes the
 * reporter remembers (live and exited), so they only grow.
 */
static int send_properties(const struct sw_ring_meta *m)
{
    struct sw_kv kv[29];
    char pid[16], nproc[16], num[7][24];
    char ns[SW_RING_NAME_MAX] = "", cluster[SW_RING_NAME_MAX] = "";
    size_t n = 0;
    const char *bar, *bar2;
    int32_t low = m->pid;
    int live = 0;
    uint64_t v[7] = {0};
    bool counted = false;

    for (int i = 0; i < g.ninfo; i++) {
        const struct sw_drain_info *o = &g.info[i];
        if (o->alive && strncmp(o->meta.service, m->service, SW_RING_NAME_MAX) == 0 &&
            strncmp(o->meta.instance, m->instance, SW_RING_NAME_MAX) == 0) {
            live++;
            if (o->meta.pid < low)
                low = o->meta.pid;
        }
    }
    ps_of(m); /* m's own process is counted */
    for (int i = 0; i < g.procs.n; i++) {
        struct sw_pstat *p = &g.procs.ps[i];
        if (!same_instance(p, m))
            continue;
        const uint64_t c[7] = {p->committed, p->dropped,  p->sent, p->failed,
                               p->spooled,   p->replayed, p->shed};
        for (int k = 0; k < 7; k++)
            v[k] += c[k];
        p->reported_sig = loss_sig(p);
        counted = true;
    }

    /*
     * With agent.namespace or agent.cluster set, the service name is `name|namespace|cluster`
     * (config.c; either part may be empty): the last two '|' delimit them.
     */
    bar2 = strrchr(m->service, '|');
    if (bar2) {
        for (bar = bar2; bar > m->service && bar[-1] != '|';)
            bar--;
        if (bar > m->service) {
            snprintf(ns, sizeof(ns), "%.*s", (int)(bar2 - bar), bar);
            snprintf(cluster, sizeof(cluster), "%s", bar2 + 1);
        }
    }
    snprintf(pid, sizeof(pid), "%d", (int)low);
    snprintf(nproc, sizeof(nproc), "%d", live);
    kv[n++] = (struct sw_kv){"language", SW_LANGUAGE};
    kv[n++] = (struct sw_kv){"OS Name", "Linux"};
    kv[n++] = (struct sw_kv){"hostname", g.hostname};
    for (int i = 0; i < g.nipv4; i++)
        kv[n++] = (struct sw_kv){"ipv4", g.ipv4[i]};
    kv[n++] = (struct sw_kv){"Process No.", pid};
    kv[n++] = (struct sw_kv){"swagent.processes", nproc};
    if (ns[0])
        kv[n++] = (struct sw_kv){"namespace", ns};
    if (cluster[0])
        kv[n++] = (struct sw_kv){"cluster", cluster};
    if (m->exe[0])
        kv[n++] = (struct sw_kv){"executable", m->exe};
    kv[n++] = (struct sw_kv){"agent", "swagent " SW_VERSION_STRING};
    if (counted) {
        /*
         * The instance's segment counters (see `swagent status`): committed to its rings,
         * dropped because a ring was full, sent, failed (segments of streams that did not end
         * OK, each attempt), spooled to disk while the collector was unreachable, replayed from
         * the spool, and the traces not started because a ring was nearly full (shed). Visible
         * in the OAP UI's instance view.
         */
        static const char *const names[7] = {
            "swagent.segments.committed", "swagent.segments.dropped", "swagent.segments.sent",
            "swagent.segments.failed",    "swagent.segments.spooled", "swagent.segments.replayed",
            "swagent.segments.shed",
        };
        for (int i = 0; i < 7; i++) {
            snprintf(num[i], sizeof(num[i]), "%llu", (unsigned long long)v[i]);
            kv[n++] = (struct sw_kv){names[i], num[i]};
        }
    }
    return sw_transport_properties(g.t, m->service, m->instance, kv, n);
}

static struct hb *hb_get(uint64_t ring_id)
{
    for (int i = 0; i < g.nhb; i++)
        if (g.hb[i].ring_id == ring_id)
            return &g.hb[i];
    if (g.nhb >= SW_MAX_RINGS)
        return NULL;
    memset(&g.hb[g.nhb], 0, sizeof(g.hb[0]));
    g.hb[g.nhb].ring_id = ring_id; /* new process: properties at once */
    return &g.hb[g.nhb++];
}

static void heartbeats(void)
{
    uint64_t now = now_ms();
    uint64_t period = (uint64_t)(g.cfg.heartbeat_period > 0 ? g.cfg.heartbeat_period : 30) * 1000;
    uint64_t factor = g.cfg.properties_report_period_factor > 0
                          ? (uint64_t)g.cfg.properties_report_period_factor
                          : 10;

    for (int i = 0; i < g.nhb; i++)
        g.hb[i].seen = false;
    for (int i = 0; i < g.ninfo && !g_stop; i++) {
        const struct sw_drain_info *e = &g.info[i];
        struct hb *h = hb_get(e->ring_id);
        int rc;
        if (!h)
            continue;
        h->seen = true;
        struct sw_pstat *p = ps_of(&e->meta);
        if (!e->alive) {
            /*
             * An exited process, once the reporter accounted for all its segments (sent,
             * spooled or dropped: the pass that drained its ring comes before this one, and
             * the ring is still listed), gets one last report of its instance unless a live
             * process of the instance reports it: properties, and a keepAlive if it never had a
             * heartbeat (a curl run), so that the OAP lists its service (the OAP registers
             * services from entry spans and keepAlives; a client-only program has no entry
             * span). Again only if its counters change. At most SW_EXIT_REPORTS_PER_S a
             * second: a host running hundreds of short traced programs a second (CGI, scripts
             * calling curl) must not turn each into two calls to the collector; the first ones
             * register their services, the rest go unreported.
             */
            if (p && !instance_live(&e->meta) && !sw_transport_backing_off(g.t) &&
                !sw_transport_failing(g.t) && p->sent + p->spooled + p->dropped >= p->committed &&
                all_sig(p) != p->final_sig && exit_report_allowed(now) &&
                send_properties(&e->meta) == 0 &&
                (h->ticks > 0 ||
                 sw_transport_keepalive(g.t, e->meta.service, e->meta.instance) == 0)) {
                h->ticks++;
                p->final_sig = all_sig(p);
            }
            continue;
        }
        if (h->next_ms > now || instance_owner_before(i))
            continue;
        if (sw_transport_mgmt_backing_off(g.t))
            continue;
        /*
         * Losses (or spooling) of a process of the instance changed since its last report:
         * properties rather than a keepAlive. Looked at only when a heartbeat is due (it scans
         * the process table).
         */
        bool news = instance_news(&e->meta);
        if (h->ticks % factor == 0 || news)
            rc = send_properties(&e->meta);
        else
            rc = sw_transport_keepalive(g.t, e->meta.service, e->meta.instance);
        /* The first heartbeat also registers the service at once (see above). */
        if (rc == 0 && h->ticks == 0)
            rc = sw_transport_keepalive(g.t, e->meta.service, e->meta.instance);
        if (rc == 0) {
            h->ticks++;
            h->next_ms = now + period;
        } else if (rc != -EAGAIN && rc != -EINTR) {
            SW_LOGW("reporter: heartbeat for %s/%s failed (%d)", e->meta.service, e->meta.instance,
                    rc);
            h->next_ms = now + 1000; /* retried after the transport's backoff */
        }
    }
    /*
     * A process whose ring went to the spool while the collector was down (its ring is gone
     * now) gets its last report once the collector is back and its segments were replayed:
     * the ring loop above could not report it.
     */
    for (int i = 0; i < g.procs.n && !g_stop; i++) {
        struct sw_pstat *p = &g.procs.ps[i];
        if (p->has_ring || p->spooled == 0 || p->replayed < p->spooled ||
            all_sig(p) == p->final_sig || sw_transport_backing_off(g.t) ||
            sw_transport_failing(g.t))
            continue;
        struct sw_ring_meta m;
        memset(&m, 0, sizeof(m));
        m.pid = p->pid;
        m.start_time_ms = p->start_ms;
        memcpy(m.service, p->service, sizeof(m.service));
        memcpy(m.instance, p->instance, sizeof(m.instance));
        memcpy(m.exe, p->exe, sizeof(m.exe));
        if (instance_live(&m) || !exit_report_allowed(now))
            continue;
        if (send_properties(&m) == 0 && sw_transport_keepalive(g.t, m.service, m.instance) == 0)
            p->final_sig = all_sig(p);
    }
    /* Forget the state of rings that are gone. */
    for (int i = 0; i < g.nhb;) {
        if (!g.hb[i].seen)
            g.hb[i] = g.hb[--g.nhb];
        else
            i++;
    }
}

/* ---- meters (meter.c) ---- */

/* The live traced processes and their counters, for meter.c (meter.active=false: nothing). */
static void meters(void)
{
    static struct sw_meter_proc mp[SW_MAX_RINGS];
    size_t n = 0;
    uint64_t now = now_ms();
    if (!g.cfg.meter_active || !sw_meter_due(g.cfg.meter_report_interval, now) ||
        sw_transport_mgmt_backing_off(g.t))
        return;
    for (int i = 0; i < g.ninfo && n < SW_MAX_RINGS; i++) {
        const struct sw_drain_info *e = &g.info[i];
        if (!e->alive)
            continue;
        const struct sw_pstat *p = ps_of(&e->meta);
        struct sw_meter_proc *x = &mp[n++];
        memset(x, 0, sizeof(*x));
        x->pid = e->meta.pid;
        x->start_ticks = e->meta.proc_start_ticks;
        x->service = e->meta.service;
        x->instance = e->meta.instance;
        x->committed = e->stats.committed;
        x->dropped = e->stats.dropped;
        x->shed = e->stats.shed;
        memcpy(x->kept, e->stats.kept, sizeof(x->kept));
        x->ring_used = e->used;
        x->ring_capacity = e->capacity;
        if (p) {
            x->sent = p->sent;
            x->spooled = p->spooled;
            x->failed = p->failed;
        }
    }
    int rc = sw_meter_tick(g.t, mp, n, g.cfg.meter_report_interval, now);
    if (rc < 0 && rc != -EAGAIN && rc != -ENOSYS && rc != -EINTR)
        SW_LOG_DEBUG_("reporter: meters not sent (%d)", rc);
}

/* ---- status file ---- */

/*
 * The status file is made in memory and written only when it differs from the last one
 * written, or SW_STATUS_REFRESH_MS after it, or when `force`d (at exit). An idle reporter wrote
 * the same file every second: on ext4 a new inode and a journal entry each time, most of an
 * idle reporter's CPU after its wake-ups.
 *
 * A new content goes into `<status>.next`, written in place, and the two names are swapped
 * (renameat2 RENAME_EXCHANGE): a reader still opens a complete file, and the two inodes take
 * turns. A new file renamed over the old one, as before, made ext4 allocate and write its block
 * at once (auto_da_alloc, the replace-via-rename rule): a disk write every second while
 * segments flowed, and about 200 us of CPU per rewrite on this VM against 80 us. Where the
 * exchange is not supported (or either name went away) the new file is renamed over the old
 * one and a new `.next` is made next time.
 */
#define SW_STATUS_REFRESH_MS 60000

/* The inode named `<status>.next` (fd, -1 when not open) and the one named `<status>` that this
 * reporter wrote (-1 when none), with the bytes each holds. */
static struct {
    int next_fd, cur_fd;
    size_t next_len, cur_len;
} g_st = {-1, -1, 0, 0};

static void status_next_path(char *out, size_t cap)
{
    snprintf(out, cap, "%s.next", g.status_path);
}

/* Writes `buf` as the status file (see above). True when it is in place. */
static bool put_status(const char *buf, size_t len)
{
    char next[PATH_MAX + 8];
    size_t off = 0;

    status_next_path(next, sizeof(next));
    if (g_st.next_fd < 0) {
        /* No O_TRUNC: truncating to zero arms ext4's flush at close, as a rename over does. */
        g_st.next_fd = open(next, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (g_st.next_fd < 0)
            return false;
        g_st.next_len = SIZE_MAX; /* unknown: truncated after the write */
    }
    while (off < len) {
        ssize_t n = pwrite(g_st.next_fd, buf + off, len - off, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            goto fail;
        off += (size_t)n;
    }
    if (g_st.next_len != len && ftruncate(g_st.next_fd, (off_t)len) != 0)
        goto fail;
    g_st.next_len = len;
    if (renameat2(AT_FDCWD, next, AT_FDCWD, g.status_path, RENAME_EXCHANGE) == 0) {
        /* The inode just written is the status file now, the previous one is `.next`. */
        int fd = g_st.cur_fd;
        size_t l = g_st.cur_len;
        g_st.cur_fd = g_st.next_fd;
        g_st.cur_len = g_st.next_len;
        g_st.next_fd = fd; /* -1 when another process wrote it: opened by name next time */
        g_st.next_len = l;
        return true;
    }
    /* No status file yet, or no exchange on this filesystem: the new file replaces it. */
    if (rename(next, g.status_path) != 0)
        goto fail;
    if (g_st.cur_fd >= 0)
        close(g_st.cur_fd);
    g_st.cur_fd = g_st.next_fd;
    g_st.cur_len = g_st.next_len;
    g_st.next_fd = -1;
    return true;
fail:
    /* Whatever happened to `.next`, it is opened (or made) afresh next time. */
    close(g_st.next_fd);
    g_st.next_fd = -1;
    return false;
}

/* At exit: both names removed, both descriptors closed. */
static void remove_status(void)
{
    char next[PATH_MAX + 8];

    status_next_path(next, sizeof(next));
    unlink(g.status_path);
    unlink(next);
    if (g_st.next_fd >= 0)
        close(g_st.next_fd);
    if (g_st.cur_fd >= 0)
        close(g_st.cur_fd);
    g_st.next_fd = g_st.cur_fd = -1;
}

static void write_status(bool force)
{
    static char *last;
    static size_t last_len;
    static uint64_t last_ms;
    struct sw_drain_counters cnt;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    if (!f)
        return;
    sw_drain_get_counters(g.d, &cnt);
    fprintf(f, "pid=%d collector=%s started=%lld\n", (int)getpid(), g.collector,
            (long long)g.started);
    /* Which settings this reporter sends with (never the token itself), and from where. */
    fprintf(f, "config=%s settings=%08x auth=%s tls=%s key=%s\n",
            g.cfg.config_file[0] ? g.cfg.config_file : "(none: defaults and environment)",
            (unsigned)g.settings_id, g.cfg.authentication[0] ? "on" : "off",
            sw_config_uses_tls(&g.cfg) ? "on" : "off", g.key);
    fprintf(f,
            "sent=%llu failed_batches=%llu dropped=%llu removed_rings=%llu stuck_skipped=%llu "
            "corrupt=%llu backoff_ms=%ld\n",
            (unsigned long long)g.sent, (unsigned long long)g.failed_batches,
            (unsigned long long)g.dropped, (unsigned long long)cnt.rings_removed,
            (unsigned long long)cnt.stuck_skipped, (unsigned long long)cnt.corrupt,
            sw_transport_backoff_left_ms(g.t));
    if (g.spool) {
        struct sw_spool_counters sc;
        sw_spool_get_counters(g.spool, &sc);
        fprintf(f,
                "spooled=%llu replayed=%llu failed_segments=%llu spool_files=%llu "
                "spool_bytes=%llu spool_segments=%llu spool_dropped=%llu spool_damaged=%llu "
                "spool_dir=%s\n",
                (unsigned long long)g.spooled, (unsigned long long)g.replayed,
                (unsigned long long)g.failed_segments, (unsigned long long)sc.files,
                (unsigned long long)sc.bytes, (unsigned long long)sc.segments,
                (unsigned long long)sc.dropped, (unsigned long long)sc.damaged,
                sw_spool_dir(g.spool));
    } else {
        fprintf(f, "spooled=0 replayed=%llu failed_segments=%llu spool=unavailable\n",
                (unsigned long long)g.replayed, (unsigned long long)g.failed_segments);
    }
    {
        struct sw_meter_counters mc;
        sw_meter_get_counters(&mc);
        fprintf(f,
                "meters=%s interval_s=%d reports=%llu instances=%llu meters_sent=%llu "
                "failed=%llu\n",
                !g.cfg.meter_active ? "off"
                : mc.off            ? "unimplemented"
                                    : "on",
                g.cfg.meter_report_interval, (unsigned long long)mc.reports,
                (unsigned long long)mc.instances, (unsigned long long)mc.meters,
                (unsigned long long)mc.failed);
    }
    {
        struct sw_rlog_stats ls;
        sw_rlog_get_stats(g.logs, &ls);
        fprintf(f,
                "logs=%s max_line=%d log_records=%llu log_bad=%llu lines=%llu lines_cut=%llu "
                "lines_sent=%llu lines_dropped=%llu log_calls_failed=%llu\n",
                g.cfg.log_capture == SW_LOGCAP_ALL  ? "all"
                : g.cfg.log_capture == SW_LOGCAP_ON ? "on"
                                                    : "off",
                g.cfg.log_max_line, (unsigned long long)ls.records, (unsigned long long)ls.bad,
                (unsigned long long)ls.lines, (unsigned long long)ls.cut,
                (unsigned long long)ls.sent, (unsigned long long)ls.dropped,
                (unsigned long long)ls.failed);
    }
    for (int i = 0; i < g.ninfo; i++) {
        const struct sw_drain_info *e = &g.info[i];
        fprintf(f,
                "ring %.64s pid=%d service=%.128s %s committed=%llu delivered=%llu "
                "ring_dropped=%llu ring_shed=%llu used_bytes=%llu\n",
                e->name, (int)e->meta.pid, e->meta.service, e->alive ? "live" : "dead",
                (unsigned long long)e->stats.committed, (unsigned long long)e->stats.consumed,
                (unsigned long long)e->stats.dropped, (unsigned long long)e->stats.shed,
                (unsigned long long)e->used);
    }
    for (int i = 0; i < g.procs.n; i++) {
        const struct sw_pstat *p = &g.procs.ps[i];
        fprintf(f,
                "process pid=%d service=%.128s instance=%.128s %s committed=%llu dropped=%llu "
                "sent=%llu failed=%llu spooled=%llu replayed=%llu shed=%llu\n",
                (int)p->pid, p->service, p->instance,
                p->has_ring ? (p->alive ? "live" : "exited") : "gone",
                (unsigned long long)p->committed, (unsigned long long)p->dropped,
                (unsigned long long)p->sent, (unsigned long long)p->failed,
                (unsigned long long)p->spooled, (unsigned long long)p->replayed,
                (unsigned long long)p->shed);
    }
    if (fclose(f) != 0) {
        free(buf);
        return;
    }
    uint64_t now = now_ms();
    if (!force && last && len == last_len && memcmp(buf, last, len) == 0 &&
        now - last_ms < SW_STATUS_REFRESH_MS) {
        free(buf);
        return;
    }
    if (put_status(buf, len)) {
        free(last);
        last = buf;
        last_len = len;
        last_ms = now;
        return;
    }
    free(buf);
}

/* True while `path` still names the file that `fd` holds the lock on. */
static bool lock_still_ours(int fd, const char *path)
{
    struct stat a, b;

    if (fstat(fd, &a) != 0 || lstat(path, &b) != 0)
        return false;
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* The drain of this collector's rings, made anew (only by the lock holder). */
static struct sw_drain *open_drain(void)
{
    char cut[SW_RING_NAME_MAX];

    snprintf(cut, sizeof(cut), "%.*s", SW_RING_NAME_MAX - 1, g.key);
    return sw_drain_new_for(g.cfg.runtime_dir, cut);
}

/* After scan_rings(): a live producer or unread records. */
static bool rings_waiting(void)
{
    for (int i = 0; i < g.ninfo; i++)
        if (g.info[i].alive || g.info[i].used > 0)
            return true;
    return false;
}

/*
 * The idle exit: true when the reporter may leave, with its lock released; false to stay,
 * with the lock held. A traced process creates its ring, then looks at the lock (spawn.c):
 * held, it starts no reporter, and tries again only with a segment SPAWN_EVERY_MS later. So
 * a ring created after this reporter's last look but while it still held the lock waited
 * for the process's next segment, perhaps for ever (e2e_sampling caught one created 8 ms
 * before the exit). Hence: look once more with the lock, release it, and look at the
 * directory: unchanged since that look, every later ring's process finds the lock free and
 * starts a reporter itself. Changed: take the lock back if it is free (else a new reporter
 * has it) and stay, with the drain made anew (another reporter may have consumed meanwhile);
 * the next passes serve what appeared and the next idle exit looks again. Rings are only
 * read with the lock held (adopting one writes to it).
 */
static bool idle_leave(int lock_fd)
{
    /* The status file is the lock holder's (a reporter started from now on writes its own);
       removed before the look, whose directory state the check below compares. */
    remove_status();
    scan_rings();
    if (!rings_waiting()) {
        if (g.test_exit_pause_ms > 0) {
            SW_LOGI("reporter: idle; %ld ms before the lock is released (--test-exit-pause-ms)",
                    g.test_exit_pause_ms);
            sleep_ms(g.test_exit_pause_ms);
        }
        flock(lock_fd, LOCK_UN);
        if (!sw_drain_dir_changed(g.d))
            return true;
        if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0)
            return true; /* a reporter a traced process started holds it now */
        struct sw_drain *d = open_drain();
        if (d) { /* else the old drain stays */
            sw_drain_free(g.d);
            g.d = d;
        }
        SW_LOGI("reporter: the runtime directory changed while leaving; staying");
    }
    write_status(true);
    return false;
}

/* ---- start-up ---- */

static void usage(FILE *f)
{
    fprintf(f, "usage: swagent-reporter [--foreground] [--config FILE] [--runtime-dir DIR] "
               "[--collector HOST:PORT] [--idle-exit SECONDS] [--agent-dir DIR] "
               "[--settings-id HEX]\n");
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

/*
 * Lowers this process's priority before gRPC starts its threads (they inherit both settings):
 * SCHED_IDLE when swagent.reporter_sched_idle (a waking traced program preempts the reporter
 * at once, whatever the scheduler's slice), and the nice value swagent.reporter_nice. Only ever
 * lowers: a reporter started at a higher nice value keeps it. Unprivileged processes may do
 * both.
 */
static void lower_priority(void)
{
    int want = g.cfg.reporter_nice, cur;

    if (g.cfg.reporter_sched_idle) {
        struct sched_param sp = {.sched_priority = 0};
        if (sched_setscheduler(0, SCHED_IDLE, &sp) != 0)
            SW_LOGW("reporter: cannot use SCHED_IDLE: %s", strerror(errno));
        else
            SW_LOGI("reporter: SCHED_IDLE (swagent.reporter_sched_idle)");
    }
    errno = 0;
    cur = getpriority(PRIO_PROCESS, 0);
    if (want <= 0 || (cur == -1 && errno != 0) || cur >= want)
        return;
    if (setpriority(PRIO_PROCESS, 0, want) != 0)
        SW_LOGW("reporter: cannot set nice %d: %s", want, strerror(errno));
    else
        SW_LOGI("reporter: nice %d (swagent.reporter_nice)", want);
}

/*
 * Says which settings this reporter sends with, and makes two kinds of disagreement visible:
 * the process that started it expected other authentication/TLS settings (`want_id`: the file
 * or its environment changed since that process read it), and another reporter sends to the
 * same collector with other settings (two groups of processes configured differently: each
 * group's segments go with its own settings, by its own reporter; config.h).
 */
static void settings_report(const char *want_id)
{
    char prefix[PATH_MAX], own[PATH_MAX], path[PATH_MAX * 2];
    const char *file = g.cfg.config_file[0] ? g.cfg.config_file : "(no file)";
    char id[9];
    DIR *d;
    struct dirent *e;

    sw_config_settings_hex(g.settings_id, id);
    SW_LOGI("reporter: configuration %s; authentication %s, TLS %s (settings %s)", file,
            g.cfg.authentication[0] ? "on" : "off", sw_config_uses_tls(&g.cfg) ? "on" : "off", id);
    if (want_id && want_id[0] && strtoul(want_id, NULL, 16) != g.settings_id)
        SW_LOGW("reporter: the authentication/TLS settings read from %s (settings %s) are not "
                "those of the processes that started this reporter (settings %s): the file or "
                "the environment changed since they read them; this reporter serves them (key "
                "%s) with the settings read now",
                file, id, want_id, g.key);
    /* `reporter-<collector>.lock` and `reporter-<collector>+<id>.lock`: the same collector. */
    if (sw_spawn_reporter_file(prefix, sizeof(prefix), "", g.collector, "") != 0 ||
        sw_spawn_reporter_file(own, sizeof(own), "", g.key, ".lock") != 0)
        return;
    d = opendir(g.cfg.runtime_dir);
    if (!d)
        return;
    size_t plen = strlen(prefix + 1); /* without the leading '/' */
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name, *rest = n + plen;
        if (strncmp(n, prefix + 1, plen) != 0 || strcmp(n, own + 1) == 0 ||
            (strcmp(rest, ".lock") != 0 &&
             (rest[0] != '+' || strlen(rest) != 14 || strcmp(rest + 9, ".lock") != 0)))
            continue;
        snprintf(path, sizeof(path), "%s/%s", g.cfg.runtime_dir, n);
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            continue;
        bool held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
        close(fd);
        if (held)
            SW_LOGW("reporter: another reporter (%s) sends to %s with other authentication/TLS "
                    "settings than this one's (settings %s, %s): the processes configured "
                    "as each is are served by it, each with its own settings; if they should "
                    "agree, check agent.authentication, agent.force_tls and agent.ssl_* and "
                    "their environment variables (`swagent status` lists both)",
                    n, g.collector, id, file);
    }
    closedir(d);
}

int main(int argc, char **argv)
{
    const char *config = NULL, *rdir = NULL, *collector = NULL, *agent_dir = NULL;
    const char *want_id = NULL;
    char sdir[PATH_MAX], lock_path[PATH_MAX];
    int idle = -1, lock_fd;
    struct sigaction sa;

    leave_agent(argv);
    umask(077); /* lock, status and log files are the user's alone */
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
        } else if (v && strcmp(argv[i], "--agent-dir") == 0) {
            agent_dir = v, i++; /* the library's directory: derived paths as the agent's */
        } else if (v && strcmp(argv[i], "--settings-id") == 0) {
            want_id = v, i++; /* the starting process's sw_config_settings_id */
        } else if (v && strcmp(argv[i], "--idle-exit") == 0) {
            char *end;
            long x = strtol(v, &end, 10);
            if (*end || x < 0 || x > 86400 * 365) {
                usage(stderr);
                return 2;
            }
            idle = (int)x, i++;
        } else if (v && strcmp(argv[i], "--test-exit-pause-ms") == 0) {
            /* For tests only: an idle exit waits this long before it releases the lock. */
            g.test_exit_pause_ms = strtol(v, NULL, 10), i++;
        } else {
            usage(stderr);
            return 2;
        }
    }

    /* The agent's directory when given (auto-start, `swagent reporter`): the same file search
       and the same derived paths (the default CA file) as the traced processes'. */
    if (agent_dir && agent_dir[0])
        snprintf(sdir, sizeof(sdir), "%s", agent_dir);
    else
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
    g.settings_id = sw_config_settings_id(&g.cfg);
    /*
     * The key: of the processes that started this reporter when it was given their settings id
     * (their rings are served even if the file changed since they read it: logged, see
     * settings_report), else of the settings read here.
     */
    {
        uint32_t serve = g.settings_id;
        char *end = NULL;
        unsigned long w = want_id && want_id[0] ? strtoul(want_id, &end, 16) : 0;
        if (end && end != want_id && *end == '\0' && w <= 0xffffffffUL)
            serve = (uint32_t)w;
        if (sw_config_reporter_key_for(&g.cfg, serve, g.key, sizeof(g.key)) != 0)
            snprintf(g.key, sizeof(g.key), "%s", g.collector);
    }
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
    if (sw_spawn_reporter_file(lock_path, sizeof(lock_path), g.cfg.runtime_dir, g.key, ".lock") !=
            0 ||
        sw_spawn_reporter_file(g.status_path, sizeof(g.status_path), g.cfg.runtime_dir, g.key,
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
    lower_priority();
    host_info();
    /* Only the lock holder may consume rings: the drain is made after the lock is taken. */
    g.d = open_drain();
    if (!g.d) {
        SW_LOGE("reporter: cannot read the runtime directory %s", g.cfg.runtime_dir);
        return 1;
    }
    {
        char sp[PATH_MAX], disk[PATH_MAX];
        /* A runtime directory in /dev/shm (memory): the spool goes to /tmp/swagent-<uid>. */
        const char *base = g.cfg.runtime_dir;
        if (!g.cfg.spool_dir[0] && sw_config_dir_in_shm(base) &&
            sw_config_disk_dir(disk, sizeof(disk)) == 0)
            base = disk;
        if (g.cfg.spool_dir[0])
            snprintf(sp, sizeof(sp), "%s", g.cfg.spool_dir);
        else if (sw_spawn_reporter_file(sp, sizeof(sp), base, g.key, "") != 0)
            sp[0] = '\0';
        else {
            /* `<runtime_dir>/reporter-<collector>` -> `<runtime_dir>/spool-<collector>` */
            char *slash = strrchr(sp, '/');
            if (slash && strncmp(slash + 1, "reporter-", 9) == 0)
                memcpy(slash + 1, "spool-", 6),
                    memmove(slash + 7, slash + 10, strlen(slash + 10) + 1);
        }
        g.spool = sp[0] ? sw_spool_open(sp, (uint64_t)g.cfg.spool_max_bytes) : NULL;
        if (!g.spool)
            SW_LOGE("reporter: cannot use the spool directory %s (%s): segments are kept in the "
                    "rings only while the collector is unreachable",
                    sp, strerror(errno));
        else if (!sw_spool_empty(g.spool)) {
            struct sw_spool_counters sc;
            sw_spool_get_counters(g.spool, &sc);
            SW_LOGI("reporter: spool %s holds %llu segment(s) in %llu file(s) to replay", sp,
                    (unsigned long long)sc.segments, (unsigned long long)sc.files);
        }
    }
    g.t = sw_transport_new(&g.cfg, g.collector);
    if (!g.t) {
        SW_LOGE("reporter: cannot create a gRPC channel to %s", g.collector);
        return 1;
    }
    sw_transport_set_stop(g.t, &g_stop);
    g_cds = sw_cds_new(&g.cfg, g.cfg.runtime_dir); /* NULL (no memory): no CDS, logged */
    if (!g_cds)
        SW_LOGE("reporter: out of memory: no configuration from OAP (CDS)");
    g.prof = sw_rprof_new(&g.cfg, g.cfg.runtime_dir);
    g.logs = sw_rlog_new(&g.cfg);
    SW_LOGI("reporter %s started: pid %d, collector %s, runtime dir %s, idle exit %d s",
            SW_VERSION_STRING, (int)getpid(), g.collector, g.cfg.runtime_dir, g.idle_exit);
    settings_report(want_id);
    if (g.foreground)
        fprintf(stderr, "swagent-reporter: pid %d, collector %s, runtime dir %s\n", (int)getpid(),
                g.collector, g.cfg.runtime_dir);

    uint64_t next_stats_log = now_ms() + SW_STATS_LOG_MS;
    uint64_t next_scan = 0, next_look = 0, next_status = 0, idle_since = now_ms(), last_sent = 0;
    bool released = false; /* the idle exit released the lock (and removed the status) */
    while (!g_stop) {
        uint64_t now = now_ms();
        int sent;
        g.pass_ms = now;
        bool live = false, pending = false, more = false;

        if (now >= next_scan || (now >= next_look && sw_drain_dir_changed(g.d))) {
            scan_rings();
            next_scan = now + SW_SCAN_MS;
        }
        if (now >= next_look)
            next_look = now + SW_DIR_LOOK_MS;
        /* Too little waiting, too recently flushed: gather more first (see SW_FLUSH_MAX_MS). */
        unsigned fill = 0;
        bool hold = last_sent != 0 && now - last_sent < SW_FLUSH_MAX_MS &&
                    (!g.spool || sw_spool_empty(g.spool)) &&
                    sw_drain_backlog(g.d, &fill) < SW_FLUSH_BYTES && fill < SW_FLUSH_FILL_PERMILLE;
        if (hold) {
            sent = 0;
        } else {
            /* Spooled (older) segments and live ones alternate, one batch each. */
            int r = replay_spool();
            g_batch_full = false;
            sent = g_stop ? 0 : send_batch(); /* stopping: no new batch */
            /* A full live batch, or a spool still to replay: more is waiting now. */
            more = (sent > 0 && g_batch_full) || (r > 0 && g.spool && !sw_spool_empty(g.spool));
            if (r > 0 && sent <= 0)
                sent = r;
            else if (r < 0 && r != -EAGAIN && sent == -EAGAIN)
                sent = r;
        }
        /*
         * SIGTERM/SIGINT: the batch in a call was finished (or, still connecting, left where it
         * was); nothing new starts (no spooling, no heartbeat).
         */
        if (g_stop)
            break;
        spool_at_risk();
        heartbeats();
        meters();
        sw_cds_tick(g_cds, g.t, g.info, g.ninfo, now_ms());
        sw_rprof_tick(g.prof, g.t, g.info, g.ninfo);
        svc_gc(now_ms());
        sw_rlog_tick(g.logs, g.t, g.info, g.ninfo, now_ms());
        /* A live producer, or a ring not yet drained and removed, keeps us running. */
        for (int i = 0; i < g.ninfo; i++) {
            if (g.info[i].alive)
                live = true;
            else
                pending = true; /* removed by the scan once drained */
            if (g.info[i].used > 0)
                pending = true;
        }
        /*
         * Stay while the spool can be delivered. While the collector fails, what is in the spool
         * is safe there (fsync'ed, released from the rings): with no traced process left it is
         * no reason to stay, and the next reporter for this collector (started by the next
         * traced process) replays it. A reporter that retried for ever kept one process per
         * collector address ever used.
         */
        bool spool_waits = g.spool && !sw_spool_empty(g.spool);
        if (spool_waits && !sw_transport_failing(g.t))
            pending = true;
        if (sw_rlog_pending(g.logs) && !sw_transport_failing(g.t))
            pending = true; /* lines in memory (logs.h) */
        now = now_ms();
        if (now >= next_status) {
            if (!lock_still_ours(lock_fd, lock_path)) {
                /*
                 * The runtime directory or the lock file was removed (or replaced): a new
                 * reporter may already hold a new lock, and two consumers must never share a
                 * ring. Leave.
                 */
                SW_LOGW("reporter: %s was removed or replaced; exiting", lock_path);
                break;
            }
            write_status(false);
            next_status = now + SW_STATUS_MS;
        }
        if (now >= next_stats_log) {
            log_changed_counters();
            next_stats_log = now + SW_STATS_LOG_MS;
        }
        if (live || pending)
            idle_since = now;
        else if (g.idle_exit > 0 && now - idle_since >= (uint64_t)g.idle_exit * 1000) {
            if (!idle_leave(lock_fd)) {
                idle_since = now_ms();
                continue;
            }
            released = true;
            if (spool_waits) {
                struct sw_spool_counters sc;
                sw_spool_get_counters(g.spool, &sc);
                SW_LOGW("reporter: no traced process for %d s and %s failing (unreachable or "
                        "refusing); exiting: %llu "
                        "segment(s) in %llu spool file(s) (%llu bytes) wait in %s for the next "
                        "reporter of this collector",
                        g.idle_exit, g.collector, (unsigned long long)sc.segments,
                        (unsigned long long)sc.files, (unsigned long long)sc.bytes,
                        sw_spool_dir(g.spool));
            } else {
                SW_LOGI("reporter: no traced process for %d s; exiting", g.idle_exit);
            }
            break;
        }
        if (sent > 0) {
            last_sent = now;
            if (more)
                continue; /* the rings (or the spool) hold more: no pause */
            /*
             * A partial batch emptied the rings: the next one is held (SW_FLUSH_MAX_MS) and
             * takes everything that arrived meanwhile, so a steady trickle costs one call a
             * second rather than one call per few segments, unless 512 KiB or a ring 1/4 full
             * come first. Full batches go without a pause.
             */
        }
        /* A held batch is looked at every SW_HOLD_NAP_MS until its SW_FLUSH_MAX_MS are over;
         * otherwise the rings every SW_QUIET_SLEEP_MS. */
        long nap = SW_QUIET_SLEEP_MS;
        if (last_sent != 0 && now - last_sent < SW_FLUSH_MAX_MS) {
            long left = (long)(last_sent + SW_FLUSH_MAX_MS - now);
            nap = left < SW_HOLD_NAP_MS ? (left > 1 ? left : 1) : SW_HOLD_NAP_MS;
        }
        if (sent < 0 && sent != -EAGAIN)
            nap = 0; /* the backoff is armed; the next pass sleeps it */
        if (sw_transport_backing_off(g.t)) {
            long left = sw_transport_backoff_left_ms(g.t);
            nap = left < 200 ? (left > SW_IDLE_SLEEP_MS ? left : SW_IDLE_SLEEP_MS) : 200;
        }
        /* While a connection is being made or retried, the pause polls it (transport.h). */
        if (nap > 0 && !sw_transport_poll(g.t, nap))
            sleep_ms(nap);
    }

    if (!released)
        write_status(true);
    log_changed_counters();
    sw_drain_free(g.d);
    sw_cds_free(g_cds);
    sw_rprof_free(g.prof);
    sw_rlog_free(g.logs);
    sw_transport_free(g.t);
    free(g_out.p);
    sw_spool_close(g.spool);
    SW_LOGI("reporter: exiting (sent %llu, failed batches %llu, dropped %llu, spooled %llu, "
            "replayed %llu)",
            (unsigned long long)g.sent, (unsigned long long)g.failed_batches,
            (unsigned long long)g.dropped, (unsigned long long)g.spooled,
            (unsigned long long)g.replayed);
    if (!released)
        remove_status();
    close(lock_fd);
    return 0;
}
