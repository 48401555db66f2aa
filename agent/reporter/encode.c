/*
 * encode.c - segment record (record.h) -> packed protobuf SegmentObject.
 *
 * Rules: reporter side, the record is untrusted (and may even be shared memory that a broken
 * producer still writes: it is copied once, and only the private copy is looked at). Reads go
 * through a bounded reader that turns every overrun into a sticky error; counts are checked
 * against the bytes left (each item has a minimum encoded size) before they are used.
 *
 * The protobuf is written here, not built as protobuf-c objects and packed: one pass over the
 * record checks it and works out the size of every message (strings keep their length when
 * they are made valid UTF-8, and the names an HTTP span stands for have their lengths in the
 * record), a second pass writes the bytes into one buffer of exactly that size. Measured on the
 * reporter bench (sw_bench_fill records): the protobuf-c objects, their arena and packing cost
 * about 10,000 instructions per segment, this about a third of that. Fields are written in
 * field-number order and, as proto3 wants, scalars and strings only when not zero or empty
 * (repeated messages always); test_encode and the fuzzer unpack the output with protobuf-c.
 */
#include "common.h"

#include "encode.h"
#include "record.h"

#include <stdlib.h>
#include <string.h>

/* Minimum encoded sizes (record.h) of the repeated items. */
#define MIN_SPAN                                                                                   \
    42u             /* ids 8, times 16, type/layer/flags/form 4, component 4, 5 empty lists/strs   \
                     */
#define MIN_TAG 4u  /* two empty strs */
#define MIN_REF 17u /* type 1, six empty strs 12, parent span 4 */
#define MIN_LOG 10u /* time 8, kv count 2 */
#define MIN_KV 4u
#define MAX_SPAN_LAYER 7 /* GenAI, the newest SpanLayer */

/* A bounded little-endian reader; any overrun sets `bad` and later reads return zeros. */
struct rd {
    const uint8_t *p; /* the record (the private copy) */
    size_t len;       /* its length */
    size_t off;       /* bytes consumed */
    bool bad;         /* an overrun or invalid value was seen */
};

static bool rd_take(struct rd *r, size_t n, const uint8_t **at)
{
    if (r->bad || r->len - r->off < n) {
        r->bad = true;
        return false;
    }
    *at = r->p + r->off;
    r->off += n;
    return true;
}

static uint8_t rd_u8(struct rd *r)
{
    const uint8_t *b;
    return rd_take(r, 1, &b) ? b[0] : 0;
}

static uint16_t rd_u16(struct rd *r)
{
    const uint8_t *b;
    return rd_take(r, 2, &b) ? (uint16_t)(b[0] | b[1] << 8) : 0;
}

static uint32_t rd_u32(struct rd *r)
{
    const uint8_t *b;
    if (!rd_take(r, 4, &b))
        return 0;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t rd_u64(struct rd *r)
{
    uint64_t lo = rd_u32(r);
    uint64_t hi = rd_u32(r);
    return lo | hi << 32;
}

static size_t rd_left(const struct rd *r)
{
    return r->bad ? 0 : r->len - r->off;
}

/* Reads a count and checks that `min_each` bytes per item remain; 0 on failure. */
static uint16_t rd_count(struct rd *r, size_t min_each)
{
    uint16_t n = rd_u16(r);
    if ((size_t)n * min_each > rd_left(r)) {
        r->bad = true;
        return 0;
    }
    return n;
}

/* A str of the record, not copied (n is 0 after an overrun). */
struct slice {
    const char *p;
    size_t n;
};

static struct slice rd_slice(struct rd *r)
{
    uint16_t n = rd_u16(r);
    const uint8_t *s;
    if (!rd_take(r, n, &s))
        return (struct slice){"", 0};
    return (struct slice){(const char *)s, n};
}

/* ---------------------------------------------------------------- protobuf sizes */

/* A length-delimited field (1-byte tag) of n bytes, or a string field (0 when empty). */
static size_t f_len(size_t n)
{
    return 1 + sw_pb_varint_len(n) + n;
}

static size_t f_str(size_t n)
{
    return n ? f_len(n) : 0;
}

/* An int32 / int64 / enum field (negative int32s take 10 bytes), 0 when zero. */
static size_t f_int(int64_t v)
{
    return v ? 1 + sw_pb_varint_len((uint64_t)v) : 0;
}

static size_t f_kv(size_t kn, size_t vn)
{
    return f_len(f_str(kn) + f_str(vn));
}

/* ---------------------------------------------------------------- the parsed record */

/* What an HTTP span's parts stand for (record.h), and where its lists are in the record. */
struct pspan {
    int32_t id, parent;
    int64_t start, end;
    uint8_t type, layer, form;
    bool error, skip;
    int32_t comp;
    struct slice op, peer; /* FORM_NAMED */
    /* FORM_HTTP */
    int32_t status;
    uint8_t hf;
    struct slice method, target, host, hdrs;
    size_t path_off, path_len, op_len, url_len, params_len, params_off;
    size_t status_len;
    /* the record's tags (FORM_HTTP: the ones after its parts'), refs and logs */
    size_t tags_at, refs_at, logs_at;
    uint16_t ntags, nrefs, nlogs;
    size_t size; /* the SpanObject's encoded size */
};

struct pseg {
    uint8_t version, flags;
    const uint8_t *uuid; /* SW_REC_SEG_OWN_IDS */
    uint32_t tid;
    uint64_t seg_value, trace_value;
    struct slice trace, seg; /* ids as text */
    size_t trace_len, seg_len;
    uint16_t nspans;
    struct pspan *spans; /* the caller's array of spans_cap, or malloc'ed for more */
    size_t spans_cap;
    bool oom;
};

static size_t utoa_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

/* The length of the text sw_rec_id_text writes (<32 hex>.<tid>.<value>), without writing it. */
static size_t id_len(uint32_t tid, uint64_t value)
{
    return 32 + 1 + utoa_len(tid) + 1 + utoa_len(value);
}

/* Reads the kv list of `n` items at the reader and returns the size of their fields `field`
 * (tags, or a log's data): each a KeyStringValuePair. */
static size_t kvs_size(struct rd *r, size_t n)
{
    size_t size = 0;
    for (size_t i = 0; i < n && !r->bad; i++) {
        struct slice k = rd_slice(r), v = rd_slice(r);
        size += f_kv(k.n, v.n);
    }
    return size;
}

/* Pass 1 for one span: checks it, remembers where its parts are, works out its size. */
static void span_parse(struct rd *r, struct pspan *s, unsigned version)
{
    s->id = (int32_t)rd_u32(r);
    s->parent = (int32_t)rd_u32(r);
    s->start = (int64_t)rd_u64(r);
    s->end = (int64_t)rd_u64(r);
    s->type = rd_u8(r);
    s->layer = rd_u8(r);
    uint8_t flags = rd_u8(r);
    s->form = rd_u8(r);
    if (s->id < 0 || s->parent < -1 || s->parent == s->id || s->type > 2 ||
        s->layer > MAX_SPAN_LAYER ||
        s->form > (version >= 2 ? SW_REC_FORM_HTTP : SW_REC_FORM_NAMED))
        r->bad = true;
    s->error = (flags & SW_REC_SPAN_ERROR) != 0;
    s->skip = (flags & SW_REC_SPAN_SKIP_ANALYSIS) != 0;
    s->comp = (int32_t)rd_u32(r);
    size_t tags = 0;
    if (s->form == SW_REC_FORM_HTTP) {
        s->status = (int32_t)rd_u32(r);
        s->hf = rd_u8(r);
        s->method = rd_slice(r);
        s->target = rd_slice(r);
        s->path_off = rd_u16(r);
        s->path_len = rd_u16(r);
        s->op_len = rd_u16(r);
        s->host = rd_slice(r);
        s->url_len = rd_u16(r);
        s->params_len = rd_u16(r);
        s->hdrs = rd_slice(r);
        s->peer = rd_slice(r);
        size_t tn = s->target.n;
        if ((s->hf & ~SW_REC_HTTP_FLAGS) || s->path_off > tn || s->path_len > tn - s->path_off)
            r->bad = true;
        size_t pl = s->path_len ? s->path_len : 1;
        if (s->op_len > (s->method.n ? s->method.n + 1 : 0) + pl)
            r->bad = true;
        size_t hl = (s->hf & SW_REC_HTTP_URL_HOST) ? s->host.n : 0;
        size_t sl = (s->hf & SW_REC_HTTP_URL_HOST) ? ((s->hf & SW_REC_HTTP_TLS) ? 8 : 7) : 0;
        if (s->url_len > sl + hl + tn)
            r->bad = true;
        if (s->params_len) {
            const char *q = tn ? memchr(s->target.p, '?', tn) : NULL;
            if (!q || s->params_len > tn - (size_t)(q - s->target.p) - 1)
                r->bad = true;
            else
                s->params_off = (size_t)(q - s->target.p) + 1;
        }
        s->status_len = s->status > 0 ? utoa_len((uint64_t)s->status) : 0;
        if (s->url_len)
            tags += f_kv(3, s->url_len);
        if (s->method.n)
            tags += f_kv(11, s->method.n);
        if (s->hdrs.n)
            tags += f_kv(12, s->hdrs.n);
        if (s->params_len)
            tags += f_kv(11, s->params_len);
        if (s->status_len)
            tags += f_kv(16, s->status_len);
    } else {
        s->op = rd_slice(r);
        s->peer = rd_slice(r);
    }
    s->ntags = rd_count(r, MIN_TAG);
    s->tags_at = r->off;
    tags += kvs_size(r, s->ntags);

    size_t refs = 0;
    s->nrefs = rd_count(r, MIN_REF);
    s->refs_at = r->off;
    for (size_t i = 0; i < s->nrefs && !r->bad; i++) {
        uint8_t type = rd_u8(r);
        if (type > 1)
            r->bad = true;
        struct slice tid = rd_slice(r), pseg = rd_slice(r);
        int32_t pspan = (int32_t)rd_u32(r);
        struct slice svc = rd_slice(r), inst = rd_slice(r), ep = rd_slice(r), addr = rd_slice(r);
        refs += f_len(f_int(type) + f_str(tid.n) + f_str(pseg.n) + f_int(pspan) + f_str(svc.n) +
                      f_str(inst.n) + f_str(ep.n) + f_str(addr.n));
    }

    size_t logs = 0;
    s->nlogs = rd_count(r, MIN_LOG);
    s->logs_at = r->off;
    for (size_t i = 0; i < s->nlogs && !r->bad; i++) {
        int64_t t = (int64_t)rd_u64(r);
        uint16_t n = rd_count(r, MIN_KV);
        logs += f_len(f_int(t) + kvs_size(r, n));
    }

    size_t opn = s->form == SW_REC_FORM_HTTP ? s->op_len : s->op.n;
    s->size = f_int(s->id) + f_int(s->parent) + f_int(s->start) + f_int(s->end) + refs +
              f_str(opn) + f_str(s->peer.n) + f_int(s->type) + f_int(s->layer) + f_int(s->comp) +
              (s->error ? 2 : 0) + tags + logs + (s->skip ? 2 : 0);
}

/* Pass 1: the whole record; false when it is invalid. */
static bool seg_parse(struct rd *r, struct pseg *g)
{
    g->version = rd_u8(r);
    if (g->version != 1 && g->version != SW_REC_VERSION)
        return false;
    g->flags = rd_u8(r);
    if (g->version >= 2 && (g->flags & SW_REC_SEG_OWN_IDS)) {
        if (!rd_take(r, 16, &g->uuid))
            return false;
        g->tid = rd_u32(r);
        g->seg_value = rd_u64(r);
        g->seg_len = id_len(g->tid, g->seg_value);
        if (g->flags & SW_REC_SEG_OWN_TRACE) {
            g->trace_value = rd_u64(r);
            g->trace_len = id_len(g->tid, g->trace_value);
        } else {
            g->trace = rd_slice(r);
            g->trace_len = g->trace.n;
        }
    } else {
        if (g->version >= 2 && (g->flags & SW_REC_SEG_OWN_TRACE))
            return false;
        g->trace = rd_slice(r);
        g->seg = rd_slice(r);
        g->trace_len = g->trace.n;
        g->seg_len = g->seg.n;
    }
    if (g->version >= 2 &&
        (g->flags & ~(SW_REC_SEG_SIZE_LIMITED | SW_REC_SEG_OWN_IDS | SW_REC_SEG_OWN_TRACE)))
        return false;
    if (r->bad || g->trace_len == 0 || g->seg_len == 0)
        return false;
    g->nspans = rd_count(r, MIN_SPAN);
    if (g->nspans == 0)
        return false; /* the OAP silently drops a segment without spans */
    if (g->nspans > g->spans_cap) {
        g->spans = malloc(g->nspans * sizeof(*g->spans));
        if (!g->spans) {
            g->oom = true;
            return false;
        }
    }
    bool root = false;
    for (size_t i = 0; i < g->nspans && !r->bad; i++) {
        span_parse(r, &g->spans[i], g->version);
        root |= g->spans[i].id == 0;
    }
    return !r->bad && r->off == r->len && root;
}

/* ---------------------------------------------------------------- pass 2: the bytes */

struct wr {
    uint8_t *p;
};

static void w_varint(struct wr *w, uint64_t v)
{
    while (v >= 0x80) {
        *w->p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *w->p++ = (uint8_t)v;
}

static void w_tag(struct wr *w, unsigned field, unsigned wire)
{
    *w->p++ = (uint8_t)(field << 3 | wire);
}

static void w_int(struct wr *w, unsigned field, int64_t v)
{
    if (v) {
        w_tag(w, field, 0);
        w_varint(w, (uint64_t)v);
    }
}

static void w_bool(struct wr *w, unsigned field, bool v)
{
    if (v) {
        w_tag(w, field, 0);
        *w->p++ = 1;
    }
}

static void w_lenhdr(struct wr *w, unsigned field, size_t n)
{
    w_tag(w, field, 2);
    w_varint(w, n);
}

/* The length of a valid UTF-8 sequence at s (n bytes available), or 0. */
static size_t utf8_seq(const uint8_t *s, size_t n)
{
    uint8_t c = s[0];
    if (c >= 0x01 && c <= 0x7f)
        return 1;
    size_t need;
    uint8_t lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
        need = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        need = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f; /* no UTF-16 surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else {
        return 0;
    }
    if (n < need || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < need; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return need;
}

/* Makes the n bytes at u (already written) valid UTF-8: bad bytes and NULs become '?'. */
static void utf8_fix(uint8_t *u, size_t n)
{
    size_t i = 0;
    /* Eight bytes at a time while they are ASCII and not NUL (the usual case). */
    while (n - i >= 8) {
        uint64_t v;
        memcpy(&v, u + i, 8);
        const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
        if ((v & highs) || ((v - ones) & ~v & highs))
            break;
        i += 8;
    }
    while (i < n) {
        if (u[i] >= 0x01 && u[i] <= 0x7f) { /* ASCII, the usual case */
            i++;
            continue;
        }
        size_t k = utf8_seq(u + i, n - i);
        if (k == 0)
            u[i++] = '?';
        else
            i += k;
    }
}

/* A string field: bytes copied, then made valid UTF-8 (same length). Empty: nothing. */
static void w_str(struct wr *w, unsigned field, const char *s, size_t n)
{
    if (!n)
        return;
    w_lenhdr(w, field, n);
    memcpy(w->p, s, n);
    utf8_fix(w->p, n);
    w->p += n;
}

static void w_kv(struct wr *w, unsigned field, const char *k, size_t kn, const char *v, size_t vn)
{
    w_lenhdr(w, field, f_str(kn) + f_str(vn));
    w_str(w, 1, k, kn);
    w_str(w, 2, v, vn);
}

static void w_kvs(struct wr *w, struct rd *r, unsigned field, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct slice k = rd_slice(r), v = rd_slice(r);
        w_kv(w, field, k.p, k.n, v.p, v.n);
    }
}

/* A string field whose bytes are known to be valid UTF-8 (this file's literals, digits). */
static void w_lit(struct wr *w, unsigned field, const char *s, size_t n)
{
    w_lenhdr(w, field, n);
    memcpy(w->p, s, n);
    w->p += n;
}

static void w_kv_lit(struct wr *w, unsigned field, const char *k, size_t kn, const char *v,
                     size_t vn)
{
    w_lenhdr(w, field, f_str(kn) + f_str(vn));
    w_lit(w, 1, k, kn);
    w_str(w, 2, v, vn);
}

/*
 * An id written as text straight into a string field of `n` bytes: the text of
 * sw_rec_id_text (record.h), with the uuid's 32 hex digits kept from the last id. Every
 * segment of a process carries the same uuid, so a batch converts it about once per process.
 * (The reporter is single-threaded.)
 */
static void w_id(struct wr *w, unsigned field, const uint8_t *uuid, uint32_t tid, uint64_t value,
                 size_t n)
{
    static uint8_t last[16];
    static char hex[32];
    static bool have;
    w_lenhdr(w, field, n);
    if (n < 34 || !have || memcmp(uuid, last, 16) != 0) {
        size_t k = sw_rec_id_text((char *)w->p, n, uuid, tid, value);
        if (k >= 32) {
            memcpy(last, uuid, 16);
            memcpy(hex, w->p, 32);
            have = true;
        }
        w->p += k;
        return;
    }
    memcpy(w->p, hex, 32);
    char *p = (char *)w->p + 32;
    *p++ = '.';
    p += sw_rec_put_u64(p, tid);
    *p++ = '.';
    p += sw_rec_put_u64(p, value);
    w->p = (uint8_t *)p;
}

static void span_write(struct wr *w, const struct pspan *s, const uint8_t *rec)
{
    struct rd r = {rec, SIZE_MAX, 0, false};
    w_int(w, 1, s->id);
    w_int(w, 2, s->parent);
    w_int(w, 3, s->start);
    w_int(w, 4, s->end);
    r.off = s->refs_at;
    for (size_t i = 0; i < s->nrefs; i++) {
        uint8_t type = rd_u8(&r);
        struct slice tid = rd_slice(&r), pseg = rd_slice(&r);
        int32_t pspan = (int32_t)rd_u32(&r);
        struct slice svc = rd_slice(&r), inst = rd_slice(&r), ep = rd_slice(&r);
        struct slice addr = rd_slice(&r);
        w_lenhdr(w, 5,
                 f_int(type) + f_str(tid.n) + f_str(pseg.n) + f_int(pspan) + f_str(svc.n) +
                     f_str(inst.n) + f_str(ep.n) + f_str(addr.n));
        w_int(w, 1, type);
        w_str(w, 2, tid.p, tid.n);
        w_str(w, 3, pseg.p, pseg.n);
        w_int(w, 4, pspan);
        w_str(w, 5, svc.p, svc.n);
        w_str(w, 6, inst.p, inst.n);
        w_str(w, 7, ep.p, ep.n);
        w_str(w, 8, addr.p, addr.n);
    }
    bool http = s->form == SW_REC_FORM_HTTP;
    if (http && s->op_len) {
        w_lenhdr(w, 6, s->op_len);
        sw_rec_http_op((char *)w->p, s->op_len, s->method.p, s->method.n, s->target.p + s->path_off,
                       s->path_len, s->op_len);
        utf8_fix(w->p, s->op_len);
        w->p += s->op_len;
    } else if (!http) {
        w_str(w, 6, s->op.p, s->op.n);
    }
    w_str(w, 7, s->peer.p, s->peer.n);
    w_int(w, 8, s->type);
    w_int(w, 9, s->layer);
    w_int(w, 10, s->comp);
    w_bool(w, 11, s->error);
    if (http) {
        if (s->url_len) {
            w_lenhdr(w, 12, f_str(3) + f_str(s->url_len));
            w_lit(w, 1, "url", 3);
            w_lenhdr(w, 2, s->url_len);
            sw_rec_http_url((char *)w->p, s->url_len, s->hf, s->host.p, s->host.n, s->target.p,
                            s->target.n, s->url_len);
            utf8_fix(w->p, s->url_len);
            w->p += s->url_len;
        }
        if (s->method.n)
            w_kv_lit(w, 12, "http.method", 11, s->method.p, s->method.n);
        if (s->hdrs.n)
            w_kv_lit(w, 12, "http.headers", 12, s->hdrs.p, s->hdrs.n);
        if (s->params_len)
            w_kv_lit(w, 12, "http.params", 11, s->target.p + s->params_off, s->params_len);
    }
    r.off = s->tags_at;
    w_kvs(w, &r, 12, s->ntags);
    if (http && s->status_len) {
        char txt[24];
        size_t n = sw_rec_put_u64(txt, (uint64_t)s->status);
        w_lenhdr(w, 12, f_str(16) + f_str(n));
        w_lit(w, 1, "http.status_code", 16);
        w_lit(w, 2, txt, n);
    }
    r.off = s->logs_at;
    for (size_t i = 0; i < s->nlogs; i++) {
        int64_t t = (int64_t)rd_u64(&r);
        uint16_t n = rd_u16(&r);
        size_t at = r.off;
        size_t data = kvs_size(&r, n);
        r.off = at;
        w_lenhdr(w, 13, f_int(t) + data);
        w_int(w, 1, t);
        w_kvs(w, &r, 2, n);
    }
    w_bool(w, 14, s->skip);
}

/* Records up to this size are copied to the stack; larger ones (rare) to the heap. */
#define REC_STACK_BYTES 2048u
#define SPANS_STACK 8u

/*
 * Checks the record and, with `ob`, appends its SegmentObject there (after the field-1 header
 * of a SegmentCollection when `framed`); *body_off is where the object starts. `ob` is
 * untouched on failure.
 */
static int encode(const void *payload, size_t len, const struct sw_ring_meta *meta,
                  struct sw_obuf *ob, bool framed, size_t *body_off, size_t *body_len)
{
    if (!payload || len > SW_REC_MAX_LEN)
        return -EBADMSG;
    /* A private copy: the record may be shared memory, and both passes must see the same. */
    uint8_t stack_rec[REC_STACK_BYTES];
    uint8_t *rec = len <= sizeof(stack_rec) ? stack_rec : malloc(len);
    if (!rec)
        return -ENOMEM;
    memcpy(rec, payload, len);
    struct rd r = {rec, len, 0, false};
    struct pspan stack_spans[SPANS_STACK];
    struct pseg g;
    memset(&g, 0, sizeof(g));
    g.spans = stack_spans;
    g.spans_cap = SPANS_STACK;
    int rc = 0;
    if (!seg_parse(&r, &g)) {
        rc = g.oom ? -ENOMEM : -EBADMSG;
        goto done;
    }
    if (ob) {
        size_t svc = meta ? strnlen(meta->service, sizeof(meta->service)) : 0;
        size_t inst = meta ? strnlen(meta->instance, sizeof(meta->instance)) : 0;
        size_t size = f_str(g.trace_len) + f_str(g.seg_len) + f_str(svc) + f_str(inst) +
                      ((g.flags & SW_REC_SEG_SIZE_LIMITED) ? 2 : 0);
        for (size_t i = 0; i < g.nspans; i++)
            size += f_len(g.spans[i].size);
        size_t need = (framed ? 1 + sw_pb_varint_len(size) : 0) + size;
        if (ob->cap - ob->len < need) {
            size_t cap = ob->cap ? ob->cap : 4096;
            while (cap - ob->len < need)
                cap *= 2;
            uint8_t *nb = realloc(ob->p, cap);
            if (!nb) {
                rc = -ENOMEM;
                goto done;
            }
            ob->p = nb;
            ob->cap = cap;
        }
        struct wr w = {ob->p + ob->len};
        if (framed)
            w_lenhdr(&w, 1, size); /* SegmentCollection.segments */
        uint8_t *body = w.p;
        bool own = g.version >= 2 && (g.flags & SW_REC_SEG_OWN_IDS);
        if (own && (g.flags & SW_REC_SEG_OWN_TRACE))
            w_id(&w, 1, g.uuid, g.tid, g.trace_value, g.trace_len);
        else
            w_str(&w, 1, g.trace.p, g.trace.n);
        if (own)
            w_id(&w, 2, g.uuid, g.tid, g.seg_value, g.seg_len);
        else
            w_str(&w, 2, g.seg.p, g.seg.n);
        for (size_t i = 0; i < g.nspans; i++) {
            w_lenhdr(&w, 3, g.spans[i].size);
            span_write(&w, &g.spans[i], rec);
        }
        if (meta) {
            w_str(&w, 4, meta->service, svc);
            w_str(&w, 5, meta->instance, inst);
        }
        w_bool(&w, 6, (g.flags & SW_REC_SEG_SIZE_LIMITED) != 0);
        if ((size_t)(w.p - body) != size) {
            /* Cannot happen (the sizes of pass 1 are those of pass 2): refuse, never send it. */
            rc = -EBADMSG;
            goto done;
        }
        *body_off = (size_t)(body - ob->p);
        *body_len = size;
        ob->len += need;
    }
done:
    if (g.spans != stack_spans)
        free(g.spans);
    if (rec != stack_rec)
        free(rec);
    return rc;
}

int sw_encode_segment(const void *payload, size_t len, const struct sw_ring_meta *meta,
                      uint8_t **out, size_t *out_len)
{
    if (!out || !out_len)
        return -EINVAL;
    struct sw_obuf ob = {NULL, 0, 0};
    size_t off, n;
    int rc = encode(payload, len, meta, &ob, false, &off, &n);
    if (rc != 0) {
        free(ob.p);
        return rc;
    }
    *out = ob.p;
    *out_len = n;
    return 0;
}

int sw_encode_segment_framed(const void *payload, size_t len, const struct sw_ring_meta *meta,
                             struct sw_obuf *ob, size_t *body_off, size_t *body_len)
{
    if (!ob || !body_off || !body_len)
        return -EINVAL;
    return encode(payload, len, meta, ob, true, body_off, body_len);
}

int sw_encode_check(const void *payload, size_t len)
{
    return encode(payload, len, NULL, NULL, false, NULL, NULL);
}
