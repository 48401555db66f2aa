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

#include <stdio.h>

int sw_trace_test_writer(uint64_t seed, int rounds);
int sw_trace_test_names(uint64_t seed, int rounds);

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

int main(void)
{
    test_id_digits();
    static const uint64_t seeds[] = {1, 42, 0x9e3779b97f4a7c15ull, 123456789, 987654321987ull};
    for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
        CHECK_EQ(sw_trace_test_writer(seeds[i], 4000), 0);
        CHECK_EQ(sw_trace_test_names(seeds[i], 20000), 0);
    }
    printf("test_trace_writer: ok\n");
    return 0;
}
