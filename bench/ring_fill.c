/*
 * ring_fill.c - the producer side of the reporter throughput benchmark (bench/run.sh).
 *
 *   sw_bench_fill --dir DIR --collector HOST:PORT --count N [--timeout SECONDS]
 *
 * Creates one ring in DIR (sized to hold all N records), commits N segment records written as
 * the agent writes them (record.h version 2: ids as numbers, an entry span GET /api/orders/<i>
 * with Host, status and a client peer and an exit span to a backend, both of form HTTP, from
 * which the reporter makes the operation names, url, http.method and http.status_code), then
 * prints `ready <pid>` and watches the ring's consumed counter, which swagent-reporter advances
 * only once a batch was acknowledged by the collector. When all N are consumed it prints
 *
 *   first_ms=<ready -> first batch acknowledged> done_ms=<ready -> all acknowledged>
 *   steady_per_s=<(N - first batch) / (done - first)>
 *
 * and exits (marking the ring exited, so the reporter removes it). Bench tool: stdio and
 * allocation are fine here; it is never loaded into a traced process.
 */
#include "common.h"

#include "record.h"
#include "ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int64_t epoch_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void put_span(struct sw_wbuf *w, int id, int parent, int64_t t0, int type,
                     const char *target, const char *host, const char *peer)
{
    uint16_t tl = (uint16_t)strlen(target);
    sw_wbuf_i32(w, id);
    sw_wbuf_i32(w, parent);
    sw_wbuf_i64(w, t0);
    sw_wbuf_i64(w, t0 + 2);
    sw_wbuf_u8(w, (uint8_t)type);
    sw_wbuf_u8(w, SW_LAYER_HTTP);
    sw_wbuf_u8(w, 0);
    sw_wbuf_u8(w, SW_REC_FORM_HTTP);
    sw_wbuf_i32(w, 49);
    sw_wbuf_i32(w, 200); /* status */
    sw_wbuf_u8(w, SW_REC_HTTP_URL_HOST);
    sw_wbuf_cstr(w, "GET");
    sw_wbuf_cstr(w, target);
    sw_wbuf_u16(w, 0);                  /* path offset */
    sw_wbuf_u16(w, tl);                 /* path length */
    sw_wbuf_u16(w, (uint16_t)(4 + tl)); /* "GET:" path */
    sw_wbuf_cstr(w, host);
    sw_wbuf_u16(w, (uint16_t)(7 + strlen(host) + tl)); /* http:// host target */
    sw_wbuf_u16(w, 0);                                 /* no http.params */
    sw_wbuf_cstr(w, "");                               /* no http.headers */
    sw_wbuf_cstr(w, peer);
    sw_wbuf_u16(w, 0); /* other tags */
    sw_wbuf_u16(w, 0); /* refs */
    sw_wbuf_u16(w, 0); /* logs */
}

/* Builds record i into buf; returns its length or 0. */
static size_t build(uint8_t *buf, size_t cap, long i)
{
    static const uint8_t uuid[16] = {0x3f, 0x2a, 0x8c, 0x1e, 0x9b, 0x7d, 0x4e, 0x6f,
                                     0xa1, 0xb2, 0xc3, 0xd4, 0xe5, 0xf6, 0x07, 0x18};
    char target[64];
    struct sw_wbuf w;
    int64_t t0 = epoch_ms();

    snprintf(target, sizeof(target), "/api/orders/%ld", i % 1000);
    sw_wbuf_init(&w, buf, cap);
    sw_wbuf_u8(&w, SW_REC_VERSION);
    sw_wbuf_u8(&w, SW_REC_SEG_OWN_IDS | SW_REC_SEG_OWN_TRACE);
    sw_wbuf_put(&w, uuid, sizeof(uuid));
    sw_wbuf_u32(&w, 4242);                            /* tid */
    sw_wbuf_i64(&w, t0 * 10000 + 2 * (i % 5000) + 1); /* segment id */
    sw_wbuf_i64(&w, t0 * 10000 + 2 * (i % 5000));     /* trace id */
    sw_wbuf_u16(&w, 2);
    put_span(&w, 1, 0, t0, SW_SPAN_EXIT, "/inventory", "backend:8081", "backend:8081");
    put_span(&w, 0, -1, t0, SW_SPAN_ENTRY, target, "127.0.0.1:8080", "127.0.0.1:54321");
    return w.overflow ? 0 : w.len;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *collector = "127.0.0.1:11800";
    long count = 100000;
    int timeout_s = 120;
    struct sw_ring_meta meta;
    struct sw_ring *r;
    uint8_t buf[2048];

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--dir") == 0)
            dir = argv[i + 1];
        else if (strcmp(argv[i], "--collector") == 0)
            collector = argv[i + 1];
        else if (strcmp(argv[i], "--count") == 0)
            count = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--timeout") == 0)
            timeout_s = atoi(argv[i + 1]);
    }
    if (!dir || count <= 0) {
        fprintf(stderr, "usage: sw_bench_fill --dir DIR --collector HOST:PORT --count N\n");
        return 2;
    }
    size_t len = build(buf, sizeof(buf), 0);
    size_t want = (size_t)count * ((len + 8 + 8 + 7) & ~(size_t)7) + 2 * SW_RING_MIN_DATA;

    memset(&meta, 0, sizeof(meta));
    meta.pid = (int32_t)getpid();
    meta.start_time_ms = (uint64_t)epoch_ms();
    (void)sw_ring_proc_start_ticks(meta.pid, &meta.proc_start_ticks);
    snprintf(meta.service, sizeof(meta.service), "bench-svc");
    snprintf(meta.instance, sizeof(meta.instance), "bench-inst-%d", (int)getpid());
    snprintf(meta.collector, sizeof(meta.collector), "%s", collector);
    snprintf(meta.exe, sizeof(meta.exe), "sw_bench_fill");
    int rc = sw_ring_create(dir, &meta, want, &r);
    if (rc != 0) {
        fprintf(stderr, "sw_ring_create: %s\n", strerror(-rc));
        return 1;
    }
    for (long i = 0; i < count; i++) {
        len = build(buf, sizeof(buf), i);
        void *p = len ? sw_ring_reserve(r, (uint32_t)len, SW_REC_SEGMENT) : NULL;
        if (!p) {
            fprintf(stderr, "record %ld did not fit\n", i);
            return 1;
        }
        memcpy(p, buf, len);
        sw_ring_commit(r, p);
    }
    printf("ready %d bytes_per_record=%zu\n", (int)getpid(), len);
    fflush(stdout);

    double t0 = mono_ms(), t_first = 0, t_end = 0;
    uint64_t c_first = 0;
    struct timespec nap = {0, 1000000};
    while (mono_ms() - t0 < timeout_s * 1e3) {
        struct sw_ring_stats st;
        sw_ring_get_stats(r, &st);
        if (st.consumed > 0 && c_first == 0) {
            c_first = st.consumed;
            t_first = mono_ms();
        }
        if (st.consumed >= (uint64_t)count) {
            t_end = mono_ms();
            break;
        }
        nanosleep(&nap, NULL);
    }
    int ok = t_end > 0;
    if (ok) {
        double steady =
            t_end > t_first ? (double)((uint64_t)count - c_first) / ((t_end - t_first) / 1e3) : 0;
        printf("first_ms=%.1f done_ms=%.1f first_batch=%llu steady_per_s=%.0f\n", t_first - t0,
               t_end - t0, (unsigned long long)c_first, steady);
    } else {
        fprintf(stderr, "timeout: not all records were consumed\n");
    }
    fflush(stdout);
    sw_ring_mark_exited(r);
    sw_ring_detach(r);
    return ok ? 0 : 1;
}
