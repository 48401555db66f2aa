/*
 * probes.c - where the agent's time per request goes, measured inside a real program
 * (bench/insitu.sh --breakdown). Linked into libsw_bench_probed.so: libswagent.so's own
 * objects (interpose.c, swagent_core, swcommon) with these wrappers put between the connection
 * layer and five functions of the request path by the linker (-Wl,--wrap=NAME: conn.c's calls
 * of NAME go to __wrap_NAME, which calls the agent's NAME as __real_NAME). No agent source
 * changes; the library is built only for the bench.
 *
 *   sw_http_fast_request   parsing a request head (the whole-head fast path)
 *   sw_http_fast_response  parsing a response head
 *   sw_trace_entry_start   starting the entry span (sampling, ids, the span's fields)
 *   sw_trace_entry_finish  ending it and writing its segment into the ring
 *   sw_trace_now_ms        the connection layer's clock reads (the TSC, clock.c)
 *   sw_ring_put_segment    the ring write of sw_trace_entry_finish (trace.c's calls), so that
 *                          the span's end and the record's write into the ring are told apart
 *
 * Each call is timed with rdtscp around it (the ticks of one empty rdtscp pair, measured at
 * load, are taken off every call). Each parse is then run a second time on copies of the
 * parser's state and the same bytes, timed too: that second run finds the code, the data and
 * the branch predictors warm, so first minus second is what the parse paid for finding them
 * cold after the syscall (the second run changes nothing the program sees; it costs the
 * probed variant time the agent variant does not spend).
 *
 * Like the outer shim of insitu_shim.c: the first 16,384 entry starts are left out (warm-up;
 * $SHIM_WARM when set), then every 4,096 entry finishes ($SHIM_EVERY) and at exit a line of
 * cumulative counts and ticks since then is appended to $PROBE_OUT.<pid> (read at load: nginx
 * clears its environment). One thread assumed (nginx with one worker): the counters are plain.
 * x86-64 only (rdtscp).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "http.h"
#include "ring.h"
#include "trace.h"
#include "tsc_out.h"

size_t __real_sw_http_fast_request(struct sw_http *h, const char *buf, size_t len,
                                   struct sw_http_event *ev, bool brief);
size_t __real_sw_http_fast_response(struct sw_http *h, const char *buf, size_t len,
                                    struct sw_http_event *ev, bool brief);
uint64_t __real_sw_trace_entry_start(const struct sw_req_info *req, int64_t start_ms);
void __real_sw_trace_entry_finish(uint64_t h, int status_code, int64_t end_ms);
int64_t __real_sw_trace_now_ms(void);
bool __real_sw_ring_put_segment(struct sw_ring *r, const void *src, uint32_t len);

static uint64_t warm = 16384, every = 4096;
enum { P_REQ, P_REQ_AGAIN, P_RESP, P_RESP_AGAIN, P_START, P_FINISH, P_CLOCK, P_PUT, P_N };
static const char *const names[P_N] = {"req",   "req_again", "resp",  "resp_again",
                                       "start", "finish",    "clock", "put"};
static uint64_t ticks_[P_N], calls_[P_N], snap_t[P_N], snap_c[P_N];
static uint64_t starts, finishes, pair_ticks, tsc0;
static struct timespec ts0;
static char out[512];

static inline void add(int i, uint64_t t0, uint64_t t1)
{
    uint64_t d = t1 - t0;
    ticks_[i] += d > pair_ticks ? d - pair_ticks : 0;
    calls_[i]++;
}

/* Appends "finishes=N tsc_ghz=G pair=P req=CALLS:TICKS ...": since the snapshot, cumulative. */
static void dump(void)
{
    FILE *f = tsc_out_file(out);
    if (!f)
        return;
    fprintf(f, "finishes=%llu tsc_ghz=%.4f pair=%llu", (unsigned long long)finishes,
            tsc_ghz(tsc0, &ts0), (unsigned long long)pair_ticks);
    for (int i = 0; i < P_N; i++)
        fprintf(f, " %s=%llu:%llu", names[i], (unsigned long long)(calls_[i] - snap_c[i]),
                (unsigned long long)(ticks_[i] - snap_t[i]));
    fputc('\n', f);
    fflush(f);
}

__attribute__((constructor)) static void probes_init(void)
{
    const char *o = getenv("PROBE_OUT");
    if (o)
        snprintf(out, sizeof(out), "%s", o);
    warm = env_count("SHIM_WARM", warm);
    every = env_count("SHIM_EVERY", every);
    clock_gettime(CLOCK_MONOTONIC, &ts0);
    tsc0 = ticks();
    /* The cost of the timing itself: the least of many empty rdtscp pairs. */
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 10000; i++) {
        uint64_t t0 = ticks(), t1 = ticks();
        if (t1 - t0 < best)
            best = t1 - t0;
    }
    pair_ticks = best;
}

/* nginx exits with exit() on SIGTERM. */
__attribute__((destructor)) static void probes_fini(void)
{
    if (out[0] && starts > warm)
        dump();
}

typedef size_t (*parse_fn)(struct sw_http *, const char *, size_t, struct sw_http_event *, bool);

/* A parse timed, then run again on h2 (a copy of *h) and timed as step i + 1. */
static inline __attribute__((always_inline)) size_t
parse_twice(parse_fn fn, int i, struct sw_http *h, struct sw_http *h2, const char *buf, size_t len,
            struct sw_http_event *ev, bool brief)
{
    struct sw_http_event ev2;
    uint64_t t0 = ticks();
    size_t n = fn(h, buf, len, ev, brief);
    uint64_t t1 = ticks();
    fn(h2, buf, len, &ev2, brief);
    uint64_t t2 = ticks();
    add(i, t0, t1);
    add(i + 1, t1, t2);
    return n;
}

size_t __wrap_sw_http_fast_request(struct sw_http *h, const char *buf, size_t len,
                                   struct sw_http_event *ev, bool brief)
{
    /* The fast path only writes the request's fields (struct sw_http_req, 6.6 KiB: a copy of
       it would cost more than the parse), so the second run writes them into a scratch one.
       (A head the fast path gives up on goes to the general parser, which also reads them:
       not the bench's nginx and wrk, whose heads all take the fast path.) */
    static struct sw_http_req scratch;
    struct sw_http h2 = *h;
    if (h->req)
        h2.req = &scratch;
    return parse_twice(__real_sw_http_fast_request, P_REQ, h, &h2, buf, len, ev, brief);
}

size_t __wrap_sw_http_fast_response(struct sw_http *h, const char *buf, size_t len,
                                    struct sw_http_event *ev, bool brief)
{
    struct sw_http h2 = *h;
    return parse_twice(__real_sw_http_fast_response, P_RESP, h, &h2, buf, len, ev, brief);
}

uint64_t __wrap_sw_trace_entry_start(const struct sw_req_info *req, int64_t start_ms)
{
    uint64_t t0 = ticks();
    uint64_t h = __real_sw_trace_entry_start(req, start_ms);
    add(P_START, t0, ticks());
    if (++starts == warm) {
        for (int i = 0; i < P_N; i++) {
            snap_t[i] = ticks_[i];
            snap_c[i] = calls_[i];
        }
        finishes = 0;
    }
    return h;
}

void __wrap_sw_trace_entry_finish(uint64_t h, int status_code, int64_t end_ms)
{
    uint64_t t0 = ticks();
    __real_sw_trace_entry_finish(h, status_code, end_ms);
    add(P_FINISH, t0, ticks());
    if (++finishes % every == 0 && out[0] && starts > warm)
        dump();
}

int64_t __wrap_sw_trace_now_ms(void)
{
    uint64_t t0 = ticks();
    int64_t ms = __real_sw_trace_now_ms();
    add(P_CLOCK, t0, ticks());
    return ms;
}

bool __wrap_sw_ring_put_segment(struct sw_ring *r, const void *src, uint32_t len)
{
    uint64_t t0 = ticks();
    bool ok = __real_sw_ring_put_segment(r, src, len);
    add(P_PUT, t0, ticks());
    return ok;
}
