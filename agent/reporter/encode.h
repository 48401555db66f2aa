/*
 * encode.h - a ring record of type SW_REC_SEGMENT (layout in record.h) to a packed protobuf
 * `skywalking.v3.SegmentObject` (proto/language-agent/Tracing.proto), written directly (the
 * same bytes protobuf-c would pack; the tests compare them).
 *
 * Reporter side, ordinary code (allocates). The record is untrusted input: every length and
 * count is checked against the record's end, enums against their ranges, and a record that does
 * not parse exactly (trailing bytes included) is rejected with -EBADMSG; the caller drops and
 * counts it. Strings are made safe for proto3 `string` fields (which must be valid UTF-8, or the
 * OAP rejects the whole message): invalid UTF-8 bytes and NULs become '?'.
 */
#ifndef SW_ENCODE_H
#define SW_ENCODE_H

#include "common.h"

#include "ring.h"

#include <stddef.h>

/*
 * Parses the segment record `payload` (`len` bytes) and packs it as a SegmentObject whose
 * service and serviceInstance come from `meta`. On success returns 0 and sets *out to a
 * malloc'ed buffer of *out_len bytes, owned by the caller (free()). Returns -EBADMSG for an
 * invalid record and -ENOMEM when out of memory; *out is untouched then. `payload` may point
 * into a ring's shared mapping: it is copied once and only the copy is parsed, so a concurrent
 * writer can make the result wrong but never unsafe.
 */
int sw_encode_segment(const void *payload, size_t len, const struct sw_ring_meta *meta,
                      uint8_t **out, size_t *out_len);

/* A growable output buffer (realloc'ed; the owner frees p). */
struct sw_obuf {
    uint8_t *p;
    size_t len, cap;
};

/*
 * The same, appended to `ob` as one entry of a SegmentCollection (field 1: its tag and length,
 * then the SegmentObject), so that consecutive entries are a SegmentCollection as they lie, to
 * be sent without another copy. The SegmentObject is ob->p[*body_off ..] (*body_len bytes);
 * offsets, not pointers, since a later append may move the buffer. On failure `ob` keeps its
 * length (its capacity may have grown).
 */
int sw_encode_segment_framed(const void *payload, size_t len, const struct sw_ring_meta *meta,
                             struct sw_obuf *ob, size_t *body_off, size_t *body_len);

/* Validates a segment record without encoding it: 0 or -EBADMSG. */
int sw_encode_check(const void *payload, size_t len);

/* Bytes of a protobuf varint of v (the writer here and the batch framing of transport.c). */
static inline size_t sw_pb_varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

#endif /* SW_ENCODE_H */
