/*
 * record.h - the layout of a finished trace segment as stored in a ring (version 2; the reporter
 * also reads version 1, which is version 2 with string ids and named spans only).
 *
 * This is the contract between the agent (writer, application side) and swagent-reporter
 * (reader, another process). The reporter treats every record as untrusted input: every
 * length is checked against the record's end, and a record that does not parse exactly is
 * dropped and counted, never trusted.
 *
 * Version 2 exists to keep the application thread's work small: ids go as numbers (the
 * reporter writes their text), and an HTTP span carries the parts of its request once (method,
 * target, Host) instead of its operation name, url and http.* tags, which the reporter puts
 * together with the helpers at the end of this file, exactly as the agent would have.
 *
 * A ring record is { struct sw_ring_rec_hdr (ring.h) ; payload }. For type SW_REC_SEGMENT
 * the payload is, all integers little-endian, no padding, no alignment:
 *
 *   u8   version              SW_REC_VERSION (2), or 1
 *   u8   flags                bit0 isSizeLimited (spans were dropped by the span limit)
 *                             bit1 SW_REC_SEG_OWN_IDS, bit2 SW_REC_SEG_OWN_TRACE (version 2)
 *   with SW_REC_SEG_OWN_IDS:  u8[16] uuid; u32 tid; u64 segment value
 *                             segment id = <uuid as 32 lower-case hex>.<tid>.<value> (id.h)
 *        and SW_REC_SEG_OWN_TRACE: u64 trace value (trace id = the same with this value)
 *        else:                str trace_id
 *   without:                  str trace_id; str segment_id
 *   u16  span_count           spans in finish order (children before parents)
 *   span_count x span:
 *     i32 span_id             0-based, span 0 exists and is the root
 *     i32 parent_span_id      -1 for the root
 *     i64 start_ms            epoch milliseconds
 *     i64 end_ms
 *     u8  span_type           0 Entry, 1 Exit, 2 Local (SpanType)
 *     u8  span_layer          SpanLayer, 3 = Http
 *     u8  span_flags          bit0 isError, bit1 skipAnalysis
 *     u8  form                SW_REC_FORM_NAMED (0, version 1's reserved byte) or _HTTP (1)
 *     i32 component_id
 *     form NAMED:  str operation_name; str peer
 *     form HTTP:   i32 status (> 0: an http.status_code tag); u8 http_flags (SW_REC_HTTP_*);
 *                  str method; str target; u16 path_off; u16 path_len; u16 op_len; str host;
 *                  u16 url_len; u16 params_len; str headers; str peer
 *         operation name: the first op_len bytes of method ":" path (no method: path alone),
 *                         path = target[path_off, +path_len), "/" when path_len is 0
 *         tags, in this order: url (url_len > 0): the first url_len bytes of "http://" (or
 *                         "https://" with SW_REC_HTTP_TLS) host target with
 *                         SW_REC_HTTP_URL_HOST, else of target; http.method (method not
 *                         empty); http.headers (not empty); http.params (params_len > 0): the
 *                         params_len bytes after the first '?' of target; then the tags below;
 *                         http.status_code (status > 0) last
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

#define SW_REC_VERSION 2
#define SW_REC_SEGMENT 1              /* ring record type of a segment */
#define SW_REC_MAX_LEN (256u * 1024u) /* no record is larger than this */

#define SW_REC_SEG_SIZE_LIMITED 0x01u
#define SW_REC_SEG_OWN_IDS 0x02u   /* the ids are numbers of the producing process (version 2) */
#define SW_REC_SEG_OWN_TRACE 0x04u /* ... and so is the trace id */
#define SW_REC_FORM_NAMED 0u
#define SW_REC_FORM_HTTP 1u
#define SW_REC_HTTP_TLS 0x01u      /* the url's scheme is https */
#define SW_REC_HTTP_URL_HOST 0x02u /* the url is scheme "://" host target, else the target */
#define SW_REC_HTTP_FLAGS 0x03u    /* the http_flags bits that exist */
#define SW_REC_SPAN_ERROR 0x01u
#define SW_REC_SPAN_SKIP_ANALYSIS 0x02u

enum sw_span_type { SW_SPAN_ENTRY = 0, SW_SPAN_EXIT = 1, SW_SPAN_LOCAL = 2 };
enum sw_span_layer { SW_LAYER_UNKNOWN = 0, SW_LAYER_RPC = 2, SW_LAYER_HTTP = 3 };

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

/*
 * The names an HTTP span's record stands for, put together from its parts (used by the
 * reporter, and by the agent's tests to compare with the names the agent used to build).
 * `out` has room for `cap` bytes; the length is returned (no NUL is written).
 *
 * sw_rec_http_op: the first op_len bytes of method ":" path ("/" when path_len is 0; no method:
 * the path alone). 0 when op_len is more than that (a bad record).
 */
static inline size_t sw_rec_http_op(char *out, size_t cap, const char *method, size_t ml,
                                    const char *path, size_t pl, size_t op_len)
{
    if (pl == 0) {
        path = "/";
        pl = 1;
    }
    size_t full = (ml ? ml + 1 : 0) + pl;
    if (op_len > full || op_len > cap)
        return 0;
    size_t at = 0, k;
    if (ml) {
        k = ml < op_len ? ml : op_len;
        memcpy(out, method, k);
        at = k;
        if (at < op_len)
            out[at++] = ':';
    }
    k = op_len - at;
    if (k)
        memcpy(out + at, path, k);
    return op_len;
}

/*
 * sw_rec_http_url: the first url_len bytes of "http://" (SW_REC_HTTP_TLS: "https://") host
 * target with SW_REC_HTTP_URL_HOST, else of target. 0 when url_len is more than that.
 */
static inline size_t sw_rec_http_url(char *out, size_t cap, unsigned http_flags, const char *host,
                                     size_t hl, const char *target, size_t tl, size_t url_len)
{
    const char *scheme = (http_flags & SW_REC_HTTP_TLS) ? "https://" : "http://";
    size_t sl = (http_flags & SW_REC_HTTP_URL_HOST) ? strlen(scheme) : 0;
    if (!(http_flags & SW_REC_HTTP_URL_HOST))
        hl = 0;
    if (url_len > sl + hl + tl || url_len > cap)
        return 0;
    size_t at = 0, k;
    k = sl < url_len ? sl : url_len;
    memcpy(out, scheme, k);
    at = k;
    k = hl < url_len - at ? hl : url_len - at;
    if (k)
        memcpy(out + at, host, k);
    at += k;
    if (url_len > at)
        memcpy(out + at, target, url_len - at);
    return url_len;
}

/* Writes v (decimal) at p; returns the number of digits (two at a time, from a table). */
static inline size_t sw_rec_put_u64(char *p, uint64_t v)
{
    static const char d2[201] =
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
        "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
        "8081828384858687888990919293949596979899";
    char tmp[20];
    size_t i = sizeof(tmp);
    while (v >= 100) {
        unsigned r = (unsigned)(v % 100);
        v /= 100;
        i -= 2;
        memcpy(tmp + i, d2 + 2 * r, 2);
    }
    if (v >= 10) {
        i -= 2;
        memcpy(tmp + i, d2 + 2 * v, 2);
    } else {
        tmp[--i] = (char)('0' + v);
    }
    memcpy(p, tmp + i, sizeof(tmp) - i);
    return sizeof(tmp) - i;
}

/*
 * The text of an id given as numbers (SW_REC_SEG_OWN_IDS, id.h): <uuid as 32 lower-case hex,
 * high nibble first>.<tid>.<value>, written to out[cap]. Returns its length (no NUL is
 * written), 0 when it does not fit.
 */
static inline size_t sw_rec_id_text(char *out, size_t cap, const uint8_t uuid[16], uint32_t tid,
                                    uint64_t value)
{
    static const char hex[] = "0123456789abcdef";
    char num[2][20];
    size_t nl[2] = {sw_rec_put_u64(num[0], tid), sw_rec_put_u64(num[1], value)};
    size_t n = 32 + 1 + nl[0] + 1 + nl[1];
    if (n > cap)
        return 0;
    for (size_t i = 0; i < 16; i++) {
        out[2 * i] = hex[uuid[i] >> 4];
        out[2 * i + 1] = hex[uuid[i] & 15];
    }
    out[32] = '.';
    memcpy(out + 33, num[0], nl[0]);
    out[33 + nl[0]] = '.';
    memcpy(out + 34 + nl[0], num[1], nl[1]);
    return n;
}

#endif /* SW_RECORD_H */
