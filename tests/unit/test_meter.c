/*
 * test_meter.c - agent/reporter/meter.c: /proc parsing (a command name with spaces and
 * parentheses, negative fields, truncated and missing files) on a fake /proc tree, and the
 * encoded MeterDataCollection (names, values, service/instance/timestamp) decoded with
 * protobuf-c.
 */
#include "common.h"

#include "check.h"
#include "meter.h"
#include "transport.h"

#include "language-agent/Meter.pb-c.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* meter.c's call: not made by these tests. */
int sw_transport_meters(struct sw_transport *t, const struct sw_msg *msgs, size_t n)
{
    (void)t, (void)msgs, (void)n;
    return -ENOSYS;
}

static char g_root[256];

static void put_file(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", g_root, rel);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
}

static void test_read_proc(void)
{
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/4242", g_root);
    CHECK(mkdir(dir, 0700) == 0);
    /* comm "a) b) c(" : fields are counted from the last ')'; tpgid -1 and priority -20. */
    put_file("4242/stat", "4242 (a) b) c() S 1 4242 4242 0 -1 4194560 100 0 0 0 150 50 0 0 -20 0 "
                          "7 0 12345 1000000 250 18446744073709551615 1 1 0 0 0 0 0\n");
    struct sw_meter_sample s;
    CHECK_EQ(sw_meter_read_proc(g_root, 4242, &s), 0);
    CHECK_EQ(s.cpu_ticks, 200);
    CHECK_EQ(s.threads, 7);
    CHECK_EQ(s.start_ticks, 12345);
    CHECK_EQ(s.rss_bytes, 250 * (uint64_t)sysconf(_SC_PAGESIZE));
    /* Cut short, no ')', garbage, absent: refused, nothing made up. */
    put_file("4242/stat", "4242 (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 150");
    CHECK_EQ(sw_meter_read_proc(g_root, 4242, &s), -EBADMSG);
    put_file("4242/stat", "4242 x S 1 2 3");
    CHECK_EQ(sw_meter_read_proc(g_root, 4242, &s), -EBADMSG);
    put_file("4242/stat", "");
    CHECK_EQ(sw_meter_read_proc(g_root, 4242, &s), -EBADMSG);
    CHECK_EQ(sw_meter_read_proc(g_root, 4343, &s), -ENOENT);
    /* The real one of this process. */
    CHECK_EQ(sw_meter_read_proc(NULL, (int32_t)getpid(), &s), 0);
    CHECK(s.threads >= 1 && s.rss_bytes > 0 && s.start_ticks > 0);
}

static void test_read_host(void)
{
    struct sw_meter_host h;
    put_file("stat", "cpu  100 0 100 700 100 0 0 0 5 5\ncpu0 1 2 3 4 5 6 7 8 9 10\n");
    put_file("meminfo", "MemTotal:        1000 kB\nMemFree: 10 kB\nMemAvailable:     250 kB\n");
    put_file("uptime", "1000.00 1500.00\n");
    CHECK_EQ(sw_meter_read_host(g_root, &h), 0);
    CHECK_EQ(h.cpu_total, 1000);
    CHECK_EQ(h.cpu_idle, 800);
    CHECK_EQ(h.mem_total, 1000 * 1024);
    CHECK_EQ(h.mem_available, 250 * 1024);
    CHECK(fabs(h.uptime_s - 1000.0) < 1e-9);
    put_file("meminfo", "MemFree: 10 kB\n");
    CHECK_EQ(sw_meter_read_host(g_root, &h), -EBADMSG);
    put_file("meminfo", "MemTotal:        1000 kB\nMemAvailable:     250 kB\n");
    put_file("stat", "intr 1 2 3\n");
    CHECK_EQ(sw_meter_read_host(g_root, &h), -EBADMSG);
    CHECK_EQ(sw_meter_read_host(NULL, &h), 0);
    CHECK(h.mem_total > 0 && h.cpu_total > 0 && h.uptime_s > 0);
}

static double value_of(const Skywalking__V3__MeterDataCollection *c, const char *name)
{
    for (size_t i = 0; i < c->n_meterdata; i++) {
        const Skywalking__V3__MeterData *d = c->meterdata[i];
        if (d->metric_case == SKYWALKING__V3__METER_DATA__METRIC_SINGLE_VALUE &&
            strcmp(d->singlevalue->name, name) == 0)
            return d->singlevalue->value;
    }
    fprintf(stderr, "no meter %s\n", name);
    exit(1);
}

static void test_encode(void)
{
    double hz = (double)sysconf(_SC_CLK_TCK), page = (double)sysconf(_SC_PAGESIZE);
    struct sw_meter_proc p[2] = {
        {.pid = 1,
         .service = "svc",
         .instance = "inst",
         .committed = 10,
         .sent = 9,
         .dropped = 1,
         .shed = 2,
         .spooled = 3,
         .failed = 4,
         .kept = {5, 6, 7},
         .ring_used = 100,
         .ring_capacity = 1000},
        {.pid = 2,
         .service = "svc",
         .instance = "inst",
         .committed = 1,
         .sent = 1,
         .kept = {1, 0, 0},
         .ring_used = 500,
         .ring_capacity = 1000},
    };
    /* Process 1: 1 s of CPU (hz ticks) over the 10 s since its previous sample: 10 %. Process
     * 2: no previous sample: 50 s of CPU over its 500 s of life: 10 %. */
    struct sw_meter_sample s[2] = {
        {.cpu_ticks = (uint64_t)(2 * hz),
         .start_ticks = 0,
         .rss_bytes = 250 * (uint64_t)page,
         .threads = 7},
        {.cpu_ticks = (uint64_t)(50 * hz),
         .start_ticks = (uint64_t)(500 * hz),
         .rss_bytes = 250 * (uint64_t)page,
         .threads = 3},
    };
    struct sw_meter_prev prev[2] = {{(uint64_t)hz, 990.0}, {0, 0}};
    struct sw_meter_host host = {1000, 800, 1024000, 256000, 1000.0};
    struct sw_meter_host host_prev = {500, 450, 1024000, 256000, 990.0};
    size_t len = 0;
    uint8_t *buf = sw_meter_encode(p, s, prev, 2, &host, &host_prev, 1234567, &len);
    CHECK(buf != NULL && len > 0);
    Skywalking__V3__MeterDataCollection *c =
        skywalking__v3__meter_data_collection__unpack(NULL, len, buf);
    CHECK(c != NULL);
    CHECK_EQ(c->n_meterdata, 15);
    for (size_t i = 0; i < c->n_meterdata; i++) {
        CHECK_STR(c->meterdata[i]->service, "svc");
        CHECK_STR(c->meterdata[i]->serviceinstance, "inst");
        CHECK_EQ(c->meterdata[i]->timestamp, 1234567);
    }
    CHECK(fabs(value_of(c, "instance_pvm_process_cpu_utilization") - 20.0) < 1e-6);
    /* The machine: 500 ticks, 350 of them idle, since the previous report: 30 %. */
    CHECK(fabs(value_of(c, "instance_pvm_total_cpu_utilization") - 30.0) < 1e-6);
    CHECK(fabs(value_of(c, "instance_pvm_total_mem_utilization") - 75.0) < 1e-6);
    CHECK(fabs(value_of(c, "instance_pvm_process_mem_utilization") - 500 * page / 1024000) < 1e-9);
    CHECK_EQ(value_of(c, "instance_pvm_thread_active_count"), 10);
    CHECK_EQ(value_of(c, "swagent_segments_committed"), 11);
    CHECK_EQ(value_of(c, "swagent_segments_sent"), 10);
    CHECK_EQ(value_of(c, "swagent_segments_dropped"), 1);
    CHECK_EQ(value_of(c, "swagent_segments_shed"), 2);
    CHECK_EQ(value_of(c, "swagent_segments_spooled"), 3);
    CHECK_EQ(value_of(c, "swagent_segments_failed"), 4);
    CHECK_EQ(value_of(c, "swagent_kept_errors"), 6);
    CHECK_EQ(value_of(c, "swagent_kept_slow"), 6);
    CHECK_EQ(value_of(c, "swagent_keep_limited"), 7);
    CHECK(fabs(value_of(c, "swagent_ring_fill") - 0.5) < 1e-9);
    skywalking__v3__meter_data_collection__free_unpacked(c, NULL);
    free(buf);
    /* Without a previous report: the machine's CPU since boot (200 of 1000 ticks busy). */
    buf = sw_meter_encode(p, s, prev, 2, &host, NULL, 1, &len);
    c = skywalking__v3__meter_data_collection__unpack(NULL, len, buf);
    CHECK(c != NULL);
    CHECK(fabs(value_of(c, "instance_pvm_total_cpu_utilization") - 20.0) < 1e-6);
    skywalking__v3__meter_data_collection__free_unpacked(c, NULL);
    free(buf);
    CHECK(sw_meter_encode(p, s, prev, 0, &host, NULL, 1, &len) == NULL);
}

int main(void)
{
    snprintf(g_root, sizeof(g_root), "%s/sw-meter.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    CHECK(mkdtemp(g_root) != NULL);
    test_read_proc();
    test_read_host();
    test_encode();
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_root);
    CHECK(system(cmd) == 0);
    printf("ok test_meter\n");
    return 0;
}
