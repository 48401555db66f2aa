/*
 * test_trace_writer.c - trace.c's unchecked record writer and in-place name building against
 * the checked references (record.h's sw_wbuf writer; the temporary-buffer + copy_cut names).
 *
 * span_write writes a span without bounds checks into exactly span_size() bytes: a size
 * miscalculation would corrupt the arena, so many random spans (every string up to its limit,
 * UTF-8 continuation bytes, refs, error logs, correlation tags, odd status codes) are written
 * both ways and must match byte for byte, with nothing written past the computed size.
 */
#include "common.h"

#include "../check.h"
#include "config.h"
#include "id.h"
#include "trace.h"

#include <stdio.h>

int sw_trace_test_writer(uint64_t seed, int rounds);
int sw_trace_test_names(uint64_t seed, int rounds);
int sw_trace_test_image(uint64_t seed, int rounds);
int sw_trace_test_paths(uint64_t seed, int rounds);

/* trace.c calls the reporter spawner when a ring is made; never here. */
int sw_spawn_reporter_in(const struct sw_config *c, const char *dir)
{
    (void)c;
    (void)dir;
    return 0;
}

/*
 * sw_id_new_at keeps the decimal digits of its last value and updates them in place (a +1, or
 * the elapsed milliseconds added to the millisecond digits): every id's number must still be
 * exactly the value of the rule in id.h, for clock steps small, large, backwards, and more than
 * 10000 ids in one millisecond.
 */
/* Checks one sw_id_new_at(ms) against the rule, tracking the expected value in *last. */
static void id_check(int64_t ms, int64_t *last, int64_t *last_ms)
{
    char id[SW_ID_STR_MAX];
    size_t n = sw_id_new_at(id, sizeof(id), ms);
    int64_t v = ms * 10000;
    if (ms != *last_ms && v > *last)
        *last = v;
    else
        (*last)++;
    *last_ms = ms;
    const char *dot = strrchr(id, '.');
    CHECK(n > 0 && dot);
    char want[32];
    snprintf(want, sizeof(want), "%lld", (long long)*last);
    CHECK_STR(dot + 1, want);
}

static void test_id_digits(void)
{
    uint64_t x = 7;
    int64_t ms = 9990000, last = 0, last_ms = 0;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        unsigned r = (unsigned)(x % 100);
        if (r < 40)
            ms += 0; /* same millisecond */
        else if (r < 80)
            ms += 1 + (int64_t)(x >> 40) % 9;
        else if (r < 90)
            ms += (int64_t)(x >> 20) % 5000;
        else if (r < 95)
            ms -= (int64_t)(x >> 40) % 50;
        int burst = r == 42 ? 10050 : 1;
        for (int b = 0; b < burst; b++)
            id_check(ms, &last, &last_ms);
    }
    /* The millisecond part gains a digit (99..9 + a few ms): the in-place add must not. */
    for (int64_t p = 100000000; p <= 10000000000000LL; p *= 10)
        for (ms = p - 25; ms < p + 25; ms += 1 + (ms & 1) * 2)
            for (int b = 0; b < 3; b++)
                id_check(ms + (b == 2), &last, &last_ms);
}

static struct sw_req_info req_of(const char *target, const char *corr)
{
    struct sw_req_info q;
    memset(&q, 0, sizeof(q));
    q.method = "GET";
    q.method_len = 3;
    q.target = target;
    q.target_len = strlen(target);
    q.host = "h:1";
    q.host_len = 3;
    q.peer = "1.1.1.1:1";
    q.peer_len = 9;
    q.correlation = corr;
    q.correlation_len = corr ? strlen(corr) : 0;
    return q;
}

/*
 * Unsampled entries: without sw8-correlation they get no segment (SEG_NONE), with one they
 * do; either way an exit made while serving them records nothing and sends no sw8 (only the
 * correlation), an exec'ed program gets no context, and they end cleanly. Sampling 1 per
 * window makes every entry after the first unsampled (the budget-used-up fast path); an
 * ignored path takes the other unsampled path.
 */
static void test_unsampled(void)
{
    static struct sw_config c;
    sw_config_defaults(&c);
    snprintf(c.service_name, sizeof(c.service_name), "svc");
    snprintf(c.instance_name, sizeof(c.instance_name), "inst");
    snprintf(c.runtime_dir, sizeof(c.runtime_dir), "/proc/self/no/such/dir"); /* no ring */
    c.sample_n_per_3_secs = 2;
    c.keep_errors = false; /* keeping beyond the quota off: unsampled exits record nothing */
    c.keep_slow_ms = 0;
    CHECK_EQ(sw_trace_init(&c), 0);
    int64_t t0 = 3000LL * 1000000;
    struct sw_req_info first = req_of("/first", NULL);
    uint64_t h0 = sw_trace_entry_start(&first, t0); /* takes the window's budget */
    CHECK(h0);
    char inj[1024], ctx[1024];
    size_t l = 0;
    struct sw_req_info x = req_of("/up", NULL);
    uint64_t xs = sw_trace_exit_start(&x, t0, inj, sizeof(inj), &l);
    CHECK(xs != 0 && l > 0 && memcmp(inj, "sw8: ", 5) == 0); /* sampled: a span and sw8 */
    sw_trace_exit_finish(xs, 200, t0 + 1);
    sw_trace_entry_finish(h0, 200, t0 + 1);

    /* "/b.css" is ignored (agent.ignore_suffix) while one trace of the budget is left: an exit
     * that did not see its entry would start a sampled root trace. Then "/z" takes the rest
     * of the budget and "/a", "/c?x=1" are unsampled by the budget-used-up fast path. */
    static const char *const targets[] = {"/b.css", "/z", "/a", "/c?x=1"};
    for (int i = 0; i < 4; i++) {
        if (i == 1) {
            struct sw_req_info z = req_of(targets[i], NULL);
            uint64_t hz = sw_trace_entry_start(&z, t0 + 5);
            xs = sw_trace_exit_start(&x, t0 + 6, inj, sizeof(inj), &l);
            CHECK(xs != 0 && l > 0); /* sampled */
            sw_trace_exit_finish(xs, 200, t0 + 7);
            sw_trace_entry_finish(hz, 200, t0 + 7);
            continue;
        }
        for (int with_corr = 0; with_corr < 2; with_corr++) {
            struct sw_req_info q = req_of(targets[i], with_corr ? "a2V5:dmFs" : NULL);
            uint64_t h = sw_trace_entry_start(&q, t0 + 10);
            CHECK(h);
            CHECK(sw_trace_current() == h);
            l = 77;
            CHECK(sw_trace_exit_start(&x, t0 + 11, inj, sizeof(inj), &l) == 0);
            if (with_corr) {
                CHECK(l > 0);
                inj[l] = '\0';
                CHECK(strstr(inj, "sw8-correlation: a2V5:dmFs\r\n") == inj);
            } else {
                CHECK_EQ(l, 0);
            }
            CHECK_EQ(sw_trace_exec_context(ctx, sizeof(ctx), "/bin/true"), 0);
            sw_trace_entry_finish(h, 200, t0 + 12);
            CHECK(sw_trace_current() == 0);
            sw_trace_entry_finish(h, 200, t0 + 13); /* a second finish does nothing */
        }
    }
    /* No request: a root exit, unsampled too (the budget is used up). */
    l = 77;
    CHECK(sw_trace_exit_start(&x, t0 + 20, inj, sizeof(inj), &l) == 0);
    CHECK_EQ(l, 0);
    /* Nested unsampled entries on one thread: the newest is current, then the older one. */
    struct sw_req_info q = req_of("/n", NULL);
    uint64_t a = sw_trace_entry_start(&q, t0 + 30), b = sw_trace_entry_start(&q, t0 + 31);
    CHECK(a && b && a != b && sw_trace_current() == b);
    sw_trace_entry_finish(b, 200, t0 + 32);
    CHECK(sw_trace_current() == a);
    sw_trace_entry_finish(a, 200, t0 + 33);
    CHECK(sw_trace_current() == 0);
}

int main(void)
{
    test_id_digits(); /* first: it models the thread's id sequence from the start */
    test_unsampled();
    static const uint64_t seeds[] = {1, 42, 0x9e3779b97f4a7c15ull, 123456789, 987654321987ull};
    for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
        CHECK_EQ(sw_trace_test_writer(seeds[i], 4000), 0);
        CHECK_EQ(sw_trace_test_names(seeds[i], 20000), 0);
        CHECK_EQ(sw_trace_test_image(seeds[i], 4000), 0);
        CHECK_EQ(sw_trace_test_paths(seeds[i], 20000), 0);
    }
    printf("test_trace_writer: ok\n");
    return 0;
}
