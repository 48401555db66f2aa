/*
 * reporter_producer.c - a stand-in for a traced process in the reporter tests: creates a ring
 * in a runtime directory and commits N valid segment records (record.h layout), then lingers
 * (a live process, so it gets heartbeats) and exits, with or without detaching its ring.
 *
 *   reporter_producer --dir DIR --count N [--service S] [--instance I] [--collector C]
 *                     [--linger SECONDS] [--no-cleanup] [--tag TAG] [--ring-bytes N]
 *                     [--interval-ms MS] [--pad BYTES] [--bad N]
 *
 * Segment i has trace id `<tag>-trace-<i>`, segment id `<tag>-seg-<i>` and two spans: an
 * entry span 0 (`/api/<i>`, tag http.method=GET, status_code=200) and an exit span 1 (peer
 * `backend:8080`, an error with one log). With --interval-ms, waits MS between two commits (a
 * slow trickle). With --pad (at most 12,000), the entry span has a third tag, `pad`, of BYTES
 * 'x' (big segments). With --bad, each of the first N segments is followed by a segment record
 * that does not parse (a wrong record version), which the reporter must drop and count once.
 * Prints `ready <pid>` once all records are committed.
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

static uint64_t start_ticks(void)
{
    char buf[1024], *s;
    unsigned long long v = 0;
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n;

    if (!f)
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    s = strrchr(buf, ')');
    for (int field = 2; s && field < 22; field++)
        s = strchr(s + 1, ' ');
    if (s)
        sscanf(s, " %llu", &v);
    return v;
}

static int64_t epoch_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static char pad_value[12001];

static void put_span(struct sw_wbuf *w, int id, int parent, int64_t t0, int type, const char *op,
                     const char *peer, bool err)
{
    bool pad = type == SW_SPAN_ENTRY && pad_value[0] != '\0';
    sw_wbuf_i32(w, id);
    sw_wbuf_i32(w, parent);
    sw_wbuf_i64(w, t0);
    sw_wbuf_i64(w, t0 + 5);
    sw_wbuf_u8(w, (uint8_t)type);
    sw_wbuf_u8(w, SW_LAYER_HTTP);
    sw_wbuf_u8(w, err ? SW_REC_SPAN_ERROR : 0);
    sw_wbuf_u8(w, 0);
    sw_wbuf_i32(w, type == SW_SPAN_ENTRY ? 5004 : 5005);
    sw_wbuf_cstr(w, op);
    sw_wbuf_cstr(w, peer);
    sw_wbuf_u16(w, pad ? 3 : 2); /* tags */
    sw_wbuf_cstr(w, "http.method");
    sw_wbuf_cstr(w, "GET");
    sw_wbuf_cstr(w, "http.status_code");
    sw_wbuf_cstr(w, err ? "500" : "200");
    if (pad) {
        sw_wbuf_cstr(w, "pad");
        sw_wbuf_cstr(w, pad_value);
    }
    sw_wbuf_u16(w, 0); /* refs */
    if (err) {
        sw_wbuf_u16(w, 1); /* logs */
        sw_wbuf_i64(w, t0 + 4);
        sw_wbuf_u16(w, 1);
        sw_wbuf_cstr(w, "event");
        sw_wbuf_cstr(w, "error");
    } else {
        sw_wbuf_u16(w, 0);
    }
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *tag = "t";
    struct sw_ring_meta meta;
    struct sw_ring *r;
    int count = 10, linger = 0, interval_ms = 0, bad = 0;
    uint64_t ring_bytes = 256 * 1024;
    bool cleanup = true;

    memset(&meta, 0, sizeof(meta));
    snprintf(meta.service, sizeof(meta.service), "producer-svc");
    snprintf(meta.instance, sizeof(meta.instance), "producer-inst-%d", (int)getpid());
    snprintf(meta.collector, sizeof(meta.collector), "127.0.0.1:11800");
    snprintf(meta.exe, sizeof(meta.exe), "reporter_producer");
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--no-cleanup") == 0) {
            cleanup = false;
        } else if (!v) {
            fprintf(stderr, "missing value for %s\n", argv[i]);
            return 2;
        } else if (strcmp(argv[i], "--dir") == 0) {
            dir = v, i++;
        } else if (strcmp(argv[i], "--count") == 0) {
            count = atoi(v), i++;
        } else if (strcmp(argv[i], "--ring-bytes") == 0) {
            ring_bytes = strtoull(v, NULL, 10), i++;
        } else if (strcmp(argv[i], "--bad") == 0) {
            bad = atoi(v), i++;
        } else if (strcmp(argv[i], "--interval-ms") == 0) {
            interval_ms = atoi(v), i++;
        } else if (strcmp(argv[i], "--linger") == 0) {
            linger = atoi(v), i++;
        } else if (strcmp(argv[i], "--pad") == 0) {
            int n = atoi(v);
            if (n < 0 || n >= (int)sizeof(pad_value)) {
                fprintf(stderr, "--pad: 0 to %d\n", (int)sizeof(pad_value) - 1);
                return 2;
            }
            memset(pad_value, 'x', (size_t)n);
            pad_value[n] = '\0';
            i++;
        } else if (strcmp(argv[i], "--tag") == 0) {
            tag = v, i++;
        } else if (strcmp(argv[i], "--service") == 0) {
            snprintf(meta.service, sizeof(meta.service), "%s", v), i++;
        } else if (strcmp(argv[i], "--instance") == 0) {
            snprintf(meta.instance, sizeof(meta.instance), "%s", v), i++;
        } else if (strcmp(argv[i], "--collector") == 0) {
            snprintf(meta.collector, sizeof(meta.collector), "%s", v), i++;
        } else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!dir)
        return 2;
    meta.pid = (int32_t)getpid();
    meta.start_time_ms = (uint64_t)epoch_ms();
    meta.proc_start_ticks = start_ticks();
    int rc = sw_ring_create(dir, &meta, ring_bytes, &r);
    if (rc != 0) {
        fprintf(stderr, "sw_ring_create: %s\n", strerror(-rc));
        return 1;
    }
    for (int i = 0; i < count; i++) {
        uint8_t buf[16384];
        char tid[64], sid[64], op[64];
        struct sw_wbuf w;
        int64_t t0 = epoch_ms();
        void *p;

        snprintf(tid, sizeof(tid), "%s-trace-%d", tag, i);
        snprintf(sid, sizeof(sid), "%s-seg-%d", tag, i);
        snprintf(op, sizeof(op), "/api/%d", i);
        sw_wbuf_init(&w, buf, sizeof(buf));
        sw_wbuf_u8(&w, SW_REC_VERSION);
        sw_wbuf_u8(&w, 0);
        sw_wbuf_cstr(&w, tid);
        sw_wbuf_cstr(&w, sid);
        sw_wbuf_u16(&w, 2);
        put_span(&w, 1, 0, t0 + 1, SW_SPAN_EXIT, "/backend", "backend:8080", true);
        put_span(&w, 0, -1, t0, SW_SPAN_ENTRY, op, "", false);
        if (w.overflow)
            return 1;
        /* Wait for room when the ring is full (the test may write more than it holds). */
        for (int tries = 0; !(p = sw_ring_reserve(r, (uint32_t)w.len, SW_REC_SEGMENT)); tries++) {
            if (tries > 3000) {
                fprintf(stderr, "ring stayed full\n");
                return 1;
            }
            usleep(10000);
        }
        memcpy(p, buf, w.len);
        sw_ring_commit(r, p);
        if (i < bad) {
            static const uint8_t junk[8] = {0xee}; /* no such record version */
            if (!(p = sw_ring_reserve(r, sizeof(junk), SW_REC_SEGMENT)))
                return 1;
            memcpy(p, junk, sizeof(junk));
            sw_ring_commit(r, p);
        }
        if (interval_ms > 0 && i + 1 < count)
            usleep((useconds_t)interval_ms * 1000);
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    if (linger > 0)
        sleep((unsigned)linger);
    if (cleanup) {
        sw_ring_mark_exited(r);
        sw_ring_detach(r);
    }
    _exit(0);
}
