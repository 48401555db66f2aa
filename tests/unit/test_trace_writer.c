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

int main(void)
{
    static const uint64_t seeds[] = {1, 42, 0x9e3779b97f4a7c15ull, 123456789, 987654321987ull};
    for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
        CHECK_EQ(sw_trace_test_writer(seeds[i], 4000), 0);
        CHECK_EQ(sw_trace_test_names(seeds[i], 20000), 0);
    }
    printf("test_trace_writer: ok\n");
    return 0;
}
