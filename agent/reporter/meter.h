/*
 * meter.h - the traced processes' meters (MeterReportService), made by swagent-reporter from
 * /proc and its own counters, never by the application (issue 38, item 4).
 *
 * Rules: runs only in swagent-reporter's main loop (single-threaded); reads /proc with stdio
 * and allocates freely. Every meter.report_interval seconds (meter.active=false: never) each
 * instance (service + instance name) with a live traced process gets one MeterDataCollection
 * on /skywalking.v3.MeterReportService/collectBatch; the processes of one instance (nginx
 * workers) are summed. Names (docs/configuration.md, "Meters"):
 *   - the Python agent's PVM meters, which OAP's python-runtime rules (active by default) turn
 *     into the instance dashboard's CPU, memory and thread charts:
 *     instance_pvm_total_cpu_utilization (the machine's CPU, percent, psutil.cpu_percent()),
 *     instance_pvm_process_cpu_utilization (the processes' CPU, percent of one core, above 100
 *     with several cores busy, as psutil's Process.cpu_percent()),
 *     instance_pvm_total_mem_utilization (the machine's memory in use, percent: MemTotal -
 *     MemAvailable), instance_pvm_process_mem_utilization (the processes' RSS / MemTotal, a
 *     fraction), instance_pvm_thread_active_count (their threads);
 *   - swagent's own counters (cumulative, as the Java agent's self-observability counters):
 *     swagent_segments_{committed,sent,dropped,shed,spooled,failed},
 *     swagent_kept_{errors,slow}, swagent_keep_limited, and swagent_ring_fill (the fullest
 *     ring's bytes in use / its size).
 * CPU figures are averages over the time since the previous report of the process (the first
 * one: since the process started; the machine's: since boot).
 */
#ifndef SW_REPORTER_METER_H
#define SW_REPORTER_METER_H

#include "common.h"

#include "ring.h"

struct sw_transport;

/* What the reporter knows of one live traced process (one ring). */
struct sw_meter_proc {
    int32_t pid;
    uint64_t start_ticks; /* its start time (/proc/PID/stat field 22), 0: not known */
    const char *service, *instance;
    uint64_t committed, dropped, shed; /* its ring's header */
    uint64_t sent, spooled, failed;    /* the reporter's counts of its segments */
    uint64_t kept[SW_RING_KEEP_N];     /* its ring's header */
    uint64_t ring_used, ring_capacity; /* bytes */
};

/* One process's figures from /proc (sw_meter_read_proc). */
struct sw_meter_sample {
    uint64_t cpu_ticks;   /* utime + stime, in clock ticks */
    uint64_t start_ticks; /* field 22 */
    uint64_t rss_bytes;
    uint32_t threads;
};

/* The machine's (sw_meter_read_host). */
struct sw_meter_host {
    uint64_t cpu_total, cpu_idle;      /* /proc/stat "cpu" line: all fields, idle + iowait */
    uint64_t mem_total, mem_available; /* bytes (/proc/meminfo) */
    double uptime_s;                   /* /proc/uptime */
};

/* Reads /proc/<pid>/stat (under `proc`, "/proc" unless a test gives another). 0 or -errno. */
int sw_meter_read_proc(const char *proc, int32_t pid, struct sw_meter_sample *out);
int sw_meter_read_host(const char *proc, struct sw_meter_host *out);

/*
 * Sends the meters of the `n` processes (live ones, any order) when meter.report_interval has
 * passed since the last report (`now_ms`: a monotonic clock); the first call only starts the
 * period. Processes gone from /proc (or whose start time differs: another process has the pid)
 * are left out. Returns the number of instances reported, 0 when it was not time, or a
 * negative errno of the call (the transport's backoff applies; a collector without
 * MeterReportService (UNIMPLEMENTED) turns meters off, logged once).
 */
int sw_meter_tick(struct sw_transport *t, const struct sw_meter_proc *procs, size_t n,
                  int interval_s, uint64_t now_ms);

/* True when sw_meter_tick would do something now (the caller then gathers the processes). */
bool sw_meter_due(int interval_s, uint64_t now_ms);

/* Counters for the status file: reports (calls that ended OK), meters sent, failed calls. */
struct sw_meter_counters {
    uint64_t reports, meters, instances, failed;
    bool off; /* the collector does not implement MeterReportService */
};
void sw_meter_get_counters(struct sw_meter_counters *out);

/*
 * Encodes the meters of one instance (the processes `procs[0..n)`, all of it) as a packed
 * MeterDataCollection into a malloc'ed buffer (*len bytes; the caller frees it), NULL on
 * failure. `dt_s` per process: seconds since its previous sample (prev), or 0 for none.
 * Separate from sw_meter_tick for tests.
 */
struct sw_meter_prev {
    uint64_t cpu_ticks;
    double at_s; /* uptime at the sample */
};
uint8_t *sw_meter_encode(const struct sw_meter_proc *procs, const struct sw_meter_sample *s,
                         const struct sw_meter_prev *prev, size_t n,
                         const struct sw_meter_host *host, const struct sw_meter_host *host_prev,
                         int64_t timestamp_ms, size_t *len);

#endif /* SW_REPORTER_METER_H */
