/*
 * fuzz_sw8.c - libFuzzer target for the propagation decoders: sw8, sw8-correlation, sw8-x and
 * base64. Checks, beyond "no crash": a valid sw8 re-encodes and decodes to the same fields,
 * and the correlation filter's output is itself a fixed point of the filter.
 */
#include "common.h"

#include "propagation.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *v = (const char *)data;
    struct sw_sw8 h, h2;

    sw_sw8_decode(v, size, &h);
    if (h.valid) {
        char buf[SW_SW8_MAX * 2];
        size_t n =
            sw_sw8_encode(buf, sizeof(buf), h.trace_id, h.parent_segment_id, h.parent_span_id,
                          h.parent_service, h.parent_instance, h.parent_endpoint, h.address);
        if (n == 0)
            abort();
        sw_sw8_decode(buf, n, &h2);
        if (!h2.valid || strcmp(h.trace_id, h2.trace_id) != 0 ||
            strcmp(h.parent_segment_id, h2.parent_segment_id) != 0 ||
            h.parent_span_id != h2.parent_span_id ||
            strcmp(h.parent_service, h2.parent_service) != 0 ||
            strcmp(h.parent_instance, h2.parent_instance) != 0 ||
            strcmp(h.parent_endpoint, h2.parent_endpoint) != 0 ||
            strcmp(h.address, h2.address) != 0)
            abort();
    }

    char out[SW_CORR_MAX], out2[SW_CORR_MAX];
    size_t n = sw_correlation_filter(v, size, 3, 128, out, sizeof(out));
    if (n >= sizeof(out) || strlen(out) != n)
        abort();
    size_t n2 = sw_correlation_filter(out, n, 3, 128, out2, sizeof(out2));
    if (n2 != n || memcmp(out, out2, n) != 0)
        abort();

    struct sw_sw8x x;
    sw_sw8x_decode(v, size, &x);
    if (x.send_time_ms < 0)
        abort();

    unsigned char raw[4096];
    char enc[8192];
    long d = sw_b64_decode(v, size, raw, sizeof(raw));
    if (d >= 0) {
        long e = sw_b64_encode(raw, (size_t)d, enc, sizeof(enc));
        if (e < 0 || (size_t)e > size)
            abort();
    }
    return 0;
}
