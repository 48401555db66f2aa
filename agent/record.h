/*
 * record.h - the layout of a finished trace segment as stored in a ring (version 1).
 *
 * This is the contract between the agent (writer, application side) and swagent-reporter
 * (reader, another process). The reporter treats every record as untrusted input: every
 * length is checked against the record's end, and a record that does not parse exactly is
 * dropped and counted, never trusted.
 *
 * A ring record is { struct sw_ring_rec_hdr (ring.h) ; payload }. For type SW_REC_SEGMENT
 * the payload is, all integers little-endian, no padding, no alignment:
 *
 *   u8   version              SW_REC_VERSION
 *   u8   flags                bit0: isSizeLimited (spans were dropped by the span limit)
 *   str  trace_id
 *   str  segment_id
 *   u16  span_count           spans in finish order (children before parents)
 *   span_count x span:
 *     i32 span_id             0-based, span 0 exists and is the root
 *     i32 parent_span_id      -1 for the root
 *     i64 start_ms            epoch milliseconds
 *     i64 end_ms
 *     u8  span_type           0 Entry, 1 Exit, 2 Local (SpanType)
 *     u8  span_layer          SpanLayer, 3 = Http
 *     u8  span_flags          bit0 isError, bit1 skipAnalysis
 *     u8  reserved            0
 *     i32 component_id
 *     str operation_name
 *     str peer
 *     u16 tag_count;  tag_count x { str key; str value }
 *     u16 ref_count;  ref_count x {
 *            u8 ref_type (0 CrossProcess, 1 CrossThread); str trace_id;
 *            str parent_segment_id; i32 parent_span_id; str parent_service;
 *            str parent_instance; str parent_endpoint; str network_address_used_at_peer }
 *     u16 log_count;  log_count x { i64 time_ms; u16 kv_count; kv_count x { str key; str value } }
 *
 *   str = u16 length + that many bytes (UTF-8 expected, not NUL-terminated).
 *
 * The service and instance names are per process and live in the ring's header
 * (struct sw_ring_meta in ring.h), not in each record.
 */
#ifndef SW_RECORD_H
#define SW_RECORD_H

#include "common.h"

#include <string.h>

#define SW_REC_VERSION 1
#define SW_REC_SEGMENT 1 /* ring record type of a segment */
#define SW_REC_MAX_LEN (256u * 1024u) /* no record is larger than this */

#define SW_REC_SEG_SIZE_LIMITED 0x01u
#define SW_REC_SPAN_ERROR 0x01u
#define SW_REC_SPAN_SKIP_ANALYSIS 0x02u

enum sw_span_type { SW_SPAN_ENTRY = 0, SW_SPAN_EXIT = 1, SW_SPAN_LOCAL = 2 };
enum sw_span_layer { SW_LAYER_UNKNOWN = 0, SW_LAYER_HTTP = 3 };

/*
 * A bounded little-endian writer over a caller-owned buffer. Runs on application threads:
 * no allocation, no syscall. Once a write would overflow, `overflow` is set and every later
 * write is a no-op, so callers check once at the end.
 */
struct sw_wbuf {
    uint8_t *p;    /* start of the buffer */
    size_t cap;    /* its size */
    size_t len;    /* bytes written so far */
    bool overflow; /* a write did not fit */
};

static inline void sw_wbuf_init(struct sw_wbuf *w, void *buf, size_t cap)
{
    w->p = buf;
    w->cap = cap;
    w->len = 0;
    w->overflow = false;
}

static inline void sw_wbuf_put(struct sw_wbuf *w, const void *src, size_t n)
{
    if (w->overflow || n > w->cap - w->len) {
        w->overflow = true;
        return;
    }
    memcpy(w->p + w->len, src, n);
    w->len += n;
}

static inline void sw_wbuf_u8(struct sw_wbuf *w, uint8_t v)
{
    sw_wbuf_put(w, &v, 1);
}

static inline void sw_wbuf_u16(struct sw_wbuf *w, uint16_t v)
{
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    sw_wbuf_put(w, b, 2);
}

static inline void sw_wbuf_u32(struct sw_wbuf *w, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    sw_wbuf_put(w, b, 4);
}

static inline void sw_wbuf_i32(struct sw_wbuf *w, int32_t v)
{
    sw_wbuf_u32(w, (uint32_t)v);
}

static inline void sw_wbuf_i64(struct sw_wbuf *w, int64_t v)
{
    sw_wbuf_u32(w, (uint32_t)((uint64_t)v & 0xffffffffu));
    sw_wbuf_u32(w, (uint32_t)((uint64_t)v >> 32));
}

/* Writes a str: u16 length then bytes; strings longer than 65535 bytes are cut. */
static inline void sw_wbuf_str(struct sw_wbuf *w, const char *s, size_t n)
{
    if (n > 0xffff)
        n = 0xffff;
    sw_wbuf_u16(w, (uint16_t)n);
    sw_wbuf_put(w, s, n);
}

static inline void sw_wbuf_cstr(struct sw_wbuf *w, const char *s)
{
    sw_wbuf_str(w, s, s ? strlen(s) : 0);
}

/* Patches a u16 written earlier at offset `at` (used for counts known only at the end). */
static inline void sw_wbuf_patch_u16(struct sw_wbuf *w, size_t at, uint16_t v)
{
    if (!w->overflow && at + 2 <= w->len) {
        w->p[at] = (uint8_t)v;
        w->p[at + 1] = (uint8_t)(v >> 8);
    }
}

#endif /* SW_RECORD_H */
