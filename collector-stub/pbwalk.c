/*
 * pbwalk.c - a SegmentCollection counted by walking its wire format.
 *
 * Why: collector-stub --discard runs on the same core as the traced program that bench/run.sh
 * measures. Unpacking a whole collectInSync message (up to 2,000 segments, ~900 KB) makes
 * protobuf-c allocate every span, tag and string of every segment before freeing any:
 * megabytes of heap streamed through the shared caches each batch, evicting the measured
 * program's working set, a cost a remote OAP would never put on that core. Walking the
 * collection and unpacking each SegmentObject on its own (freed before the next) gives the same
 * validation with the heap footprint of one segment, which malloc reuses.
 *
 * Rules: acceptance is exactly protobuf-c 1.4's (checked by tests/unit/test_stub_pbwalk.c and
 * tests/fuzz/fuzz_stub_collection.c against the whole-collection unpack), including its quirks:
 * - a key is at most 5 bytes (a field number of up to 32 bits, not held to 2^29 - 1); a first
 *   key byte whose field bits are all 0 and that has no continuation bit is refused (field 0),
 *   but a longer key holding 0 is an unknown field (0x80 0x00), and a padded key holding 1
 *   (0x8a 0x00) is field 1;
 * - wire types 3, 4 (groups), 6 and 7 are refused for every field, known or not;
 * - a varint is at most 10 bytes (the 10th byte's value bits are not checked), a length
 *   prefix at most 5 bytes and at most INT_MAX, and every field must fit in the message;
 * - field 1 (segments) must be length-delimited and unpack as a SegmentObject; any other
 *   field is skipped.
 */
#include "pbwalk.h"

#include <limits.h>

#include "language-agent/Tracing.pb-c.h"

/* Wire types. */
enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* A key at p (rem > 0 bytes): its length, or 0 if protobuf-c refuses it. */
static size_t read_key(const uint8_t *p, size_t rem, uint32_t *field, unsigned *wire_type)
{
    if ((p[0] & 0xf8) == 0)
        return 0;
    *wire_type = p[0] & 7;
    uint32_t f = (p[0] & 0x7f) >> 3;
    size_t max = rem < 5 ? rem : 5;
    if (!(p[0] & 0x80)) {
        *field = f;
        return 1;
    }
    for (size_t i = 1, shift = 4; i < max; i++, shift += 7) {
        f |= (uint32_t)(p[i] & 0x7f) << shift; /* 4 + 4 * 7 bits: never past bit 31 */
        if (!(p[i] & 0x80)) {
            *field = f;
            return i + 1;
        }
    }
    return 0;
}

/* The length of the value at p (rem bytes) of wire type wt, prefix included; 0 if refused. */
static size_t value_len(const uint8_t *p, size_t rem, unsigned wt, size_t *prefix)
{
    switch (wt) {
    case WT_VARINT: {
        size_t max = rem < 10 ? rem : 10;
        for (size_t i = 0; i < max; i++)
            if (!(p[i] & 0x80))
                return i + 1;
        return 0;
    }
    case WT_I64:
        return rem < 8 ? 0 : 8;
    case WT_I32:
        return rem < 4 ? 0 : 4;
    case WT_LEN: {
        size_t max = rem < 5 ? rem : 5;
        uint64_t v = 0;
        for (size_t i = 0; i < max; i++) {
            v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
            if (!(p[i] & 0x80)) {
                if (v > INT_MAX || v > rem - (i + 1))
                    return 0;
                *prefix = i + 1;
                return i + 1 + (size_t)v;
            }
        }
        return 0;
    }
    default:
        return 0;
    }
}

int sw_pbwalk_segments(const uint8_t *data, size_t len, size_t *nseg)
{
    size_t n = 0, at = 0;
    while (at < len) {
        uint32_t field;
        unsigned wt;
        size_t k = read_key(data + at, len - at, &field, &wt);
        if (k == 0)
            return -1;
        at += k;
        size_t prefix = 0;
        size_t v = value_len(data + at, len - at, wt, &prefix);
        if (v == 0)
            return -1;
        if (field == 1) {
            if (wt != WT_LEN)
                return -1;
            Skywalking__V3__SegmentObject *seg =
                skywalking__v3__segment_object__unpack(NULL, v - prefix, data + at + prefix);
            if (!seg)
                return -1;
            skywalking__v3__segment_object__free_unpacked(seg, NULL);
            n++;
        }
        at += v;
    }
    *nseg = n;
    return 0;
}
