/*
 * encode.c - segment record (record.h) -> packed protobuf-c SegmentObject.
 *
 * Rules: reporter side, the record is untrusted (and may even be shared memory that a broken
 * producer still writes: every length is read exactly once, and bytes are only copied, then
 * checked in the private copy; the parts of an HTTP span may be copied more than once, into
 * each name made of them). Reads go through a bounded
 * reader that turns every overrun into a sticky error; counts are checked against the bytes
 * left (each item has a minimum encoded size) before anything is allocated for them. All protobuf-c
 * objects and strings of one segment live in a single arena whose size is bounded by a multiple of
 * the record length (see ARENA_FACTOR), so one malloc and one free serve a whole record.
 */
#include "common.h"

#include "encode.h"
#include "record.h"

#include <stdlib.h>
#include <string.h>

#include "language-agent/Tracing.pb-c.h"

/* Minimum encoded sizes (record.h) of the repeated items. */
#define MIN_SPAN 42u /* ids 8, times 16, type/layer/flags/form 4, component 4, 5 empty lists/strs  \
                      */
#define MIN_HTTP 63u /* a span of form HTTP: MIN_SPAN + status 4, flags 1, 5 more strs 10, 6 */
#define HTTP_TAGS 5u /* tags an HTTP span's parts stand for: url, method, headers, params, status  \
                      */
#define MIN_TAG 4u   /* two empty strs */
#define MIN_REF 17u  /* type 1, six empty strs 12, parent span 4 */
#define MIN_LOG 10u  /* time 8, kv count 2 */
#define MIN_KV 4u
#define MAX_SPAN_LAYER 7 /* GenAI, the newest SpanLayer */

/*
 * Every item costs at most ARENA_FACTOR times its minimum encoded size in arena bytes (its
 * struct, its slot in the pointer array, alignment), and a string of n bytes (2 + n encoded)
 * costs n + 1, so ARENA_FACTOR * len + ARENA_FIXED always suffices.
 */
#define ARENA_FACTOR 16u
#define ARENA_FIXED (4096u + 2u * SW_RING_NAME_MAX)
_Static_assert(sizeof(Skywalking__V3__SpanObject) + 16 <= ARENA_FACTOR * MIN_SPAN, "span");
_Static_assert(sizeof(Skywalking__V3__KeyStringValuePair) + 16 <= ARENA_FACTOR * MIN_TAG, "kv");
_Static_assert(sizeof(Skywalking__V3__SegmentReference) + 16 <= ARENA_FACTOR * MIN_REF, "ref");
_Static_assert(sizeof(Skywalking__V3__Log) + 16 <= ARENA_FACTOR * MIN_LOG, "log");
/*
 * An HTTP span's names are made of its parts: the operation name, url, http.params and the
 * method copy use at most 4 x the bytes its strs take plus 50 (status), and its objects (the
 * span, HTTP_TAGS key-value pairs, their pointers) half of ARENA_FACTOR x MIN_HTTP, so the
 * bound above holds for it too.
 */
_Static_assert(sizeof(Skywalking__V3__SpanObject) + 16 +
                       HTTP_TAGS * (sizeof(Skywalking__V3__KeyStringValuePair) + 16 + 8) <=
                   ARENA_FACTOR * MIN_HTTP / 2,
               "http span");
_Static_assert(4 * MIN_HTTP >= 50 + 16, "http span strings");
_Static_assert(sizeof(Skywalking__V3__SegmentObject) + 16 <= 4096u, "segment");

/* A bounded little-endian reader; any overrun sets `bad` and later reads return zeros. */
struct rd {
    const uint8_t *p; /* the record */
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

static int64_t rd_i64(struct rd *r)
{
    uint64_t lo = rd_u32(r);
    uint64_t hi = rd_u32(r);
    return (int64_t)(lo | hi << 32);
}

static uint64_t rd_u64(struct rd *r)
{
    return (uint64_t)rd_i64(r);
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

/* One allocation per record: objects grow up from `lo`, strings down from `hi`. */
struct arena {
    uint8_t *base;
    size_t lo, hi;
    bool oom; /* the bound was wrong: treated as a bad record, never an overflow */
};

static void *a_obj(struct arena *a, size_t n)
{
    size_t at = (a->lo + 7) & ~(size_t)7;
    if (a->oom || at > a->hi || a->hi - at < n) {
        a->oom = true;
        return NULL;
    }
    a->lo = at + n;
    memset(a->base + at, 0, n);
    return a->base + at;
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

/* Room for a string of n bytes and its NUL (n > 0), or NULL (out of arena). */
static char *a_raw(struct arena *a, size_t n)
{
    if (a->oom || a->hi - a->lo < n + 1) {
        a->oom = true;
        return NULL;
    }
    a->hi -= n + 1;
    return (char *)a->base + a->hi;
}

/* Makes the n bytes at d (a private copy) valid UTF-8 (bad bytes and NULs become '?'). */
static char *a_fix(char *d, size_t n)
{
    uint8_t *u = (uint8_t *)d;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(u + i, n - i);
        if (k == 0)
            u[i++] = '?';
        else
            i += k;
    }
    d[n] = '\0';
    return d;
}

/* Copies n bytes as a NUL-terminated, valid UTF-8 string (bad bytes and NULs become '?'). */
static char *a_str(struct arena *a, const uint8_t *s, size_t n)
{
    char *d = n ? a_raw(a, n) : NULL;
    if (!d)
        return (char *)protobuf_c_empty_string;
    /*
     * Copy first, then repair the private copy: the source may be shared memory that a broken
     * producer still writes, so it is read exactly once.
     */
    memcpy(d, s, n);
    return a_fix(d, n);
}

/* A str of the record, not copied: p and n (n is 0 after an overrun). */
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

static char *rd_str(struct rd *r, struct arena *a)
{
    struct slice v = rd_slice(r);
    return a_str(a, (const uint8_t *)v.p, v.n);
}

/* An id given as numbers (record.h, SW_REC_SEG_OWN_IDS). */
static char *a_id(struct arena *a, const uint8_t *uuid, uint32_t tid, uint64_t value)
{
    char buf[80];
    size_t n = sw_rec_id_text(buf, sizeof(buf), uuid, tid, value);
    return a_str(a, (const uint8_t *)buf, n);
}

static Skywalking__V3__KeyStringValuePair **read_kvs(struct rd *r, struct arena *a, size_t n)
{
    Skywalking__V3__KeyStringValuePair **v = a_obj(a, n * sizeof(*v));
    for (size_t i = 0; v && i < n; i++) {
        Skywalking__V3__KeyStringValuePair *kv = a_obj(a, sizeof(*kv));
        if (!kv)
            return NULL;
        skywalking__v3__key_string_value_pair__init(kv);
        kv->key = rd_str(r, a);
        kv->value = rd_str(r, a);
        v[i] = kv;
    }
    return v;
}

static Skywalking__V3__SegmentReference *read_ref(struct rd *r, struct arena *a)
{
    Skywalking__V3__SegmentReference *ref = a_obj(a, sizeof(*ref));
    if (!ref)
        return NULL;
    skywalking__v3__segment_reference__init(ref);
    uint8_t type = rd_u8(r);
    if (type > SKYWALKING__V3__REF_TYPE__CrossThread)
        r->bad = true;
    ref->reftype = (Skywalking__V3__RefType)type;
    ref->traceid = rd_str(r, a);
    ref->parenttracesegmentid = rd_str(r, a);
    ref->parentspanid = (int32_t)rd_u32(r);
    ref->parentservice = rd_str(r, a);
    ref->parentserviceinstance = rd_str(r, a);
    ref->parentendpoint = rd_str(r, a);
    ref->networkaddressusedatpeer = rd_str(r, a);
    return ref;
}

/* A key-value pair with a constant key. */
static Skywalking__V3__KeyStringValuePair *a_kv(struct arena *a, const char *key, char *value)
{
    Skywalking__V3__KeyStringValuePair *kv = a_obj(a, sizeof(*kv));
    if (!kv)
        return NULL;
    skywalking__v3__key_string_value_pair__init(kv);
    kv->key = (char *)key;
    kv->value = value;
    return kv;
}

/*
 * The fields of a span of form HTTP (record.h): its operation name and peer, and its tags made
 * of its parts, around the `extra` tags of the record. False for a record whose lengths do not
 * fit its parts.
 */
static bool read_http(struct rd *r, struct arena *a, Skywalking__V3__SpanObject *s)
{
    int32_t status = (int32_t)rd_u32(r);
    uint8_t hf = rd_u8(r);
    struct slice method = rd_slice(r), target = rd_slice(r);
    uint16_t path_off = rd_u16(r), path_len = rd_u16(r), op_len = rd_u16(r);
    struct slice host = rd_slice(r);
    uint16_t url_len = rd_u16(r), params_len = rd_u16(r);
    struct slice hdrs = rd_slice(r), peer = rd_slice(r);
    uint16_t extra = rd_count(r, MIN_TAG);
    if (r->bad || (hf & ~SW_REC_HTTP_FLAGS) || path_off > target.n ||
        path_len > target.n - path_off)
        return false;

    /* op_len 0: an operation name cut to nothing (a threshold of 1 before a multi-byte
     * character), as the agent would have sent it. */
    char *op = a_raw(a, op_len);
    if (!op || sw_rec_http_op(op, op_len, method.p, method.n, target.p + path_off, path_len,
                              op_len) != op_len)
        return false;
    s->operationname = op_len ? a_fix(op, op_len) : (char *)protobuf_c_empty_string;
    s->peer = a_str(a, (const uint8_t *)peer.p, peer.n);

    char *url = NULL, *params = NULL;
    if (url_len) {
        url = a_raw(a, url_len);
        if (!url || sw_rec_http_url(url, url_len, hf, host.p, host.n, target.p, target.n,
                                    url_len) != url_len)
            return false;
        a_fix(url, url_len);
    }
    if (params_len) {
        const char *q = memchr(target.p, '?', target.n);
        if (!q || params_len > target.n - (size_t)(q - target.p) - 1)
            return false;
        params = a_str(a, (const uint8_t *)q + 1, params_len);
    }
    size_t n = (url ? 1 : 0) + (method.n ? 1 : 0) + (hdrs.n ? 1 : 0) + (params ? 1 : 0) + extra +
               (status > 0 ? 1 : 0);
    s->n_tags = n;
    s->tags = n ? a_obj(a, n * sizeof(*s->tags)) : NULL;
    if (n && !s->tags)
        return false;
    size_t i = 0;
    if (url)
        s->tags[i++] = a_kv(a, "url", url);
    if (method.n)
        s->tags[i++] = a_kv(a, "http.method", a_str(a, (const uint8_t *)method.p, method.n));
    if (hdrs.n)
        s->tags[i++] = a_kv(a, "http.headers", a_str(a, (const uint8_t *)hdrs.p, hdrs.n));
    if (params)
        s->tags[i++] = a_kv(a, "http.params", params);
    if (extra) {
        Skywalking__V3__KeyStringValuePair **x = read_kvs(r, a, extra);
        if (!x)
            return false;
        memcpy(s->tags + i, x, extra * sizeof(*x));
        i += extra;
    }
    if (status > 0) {
        char txt[16];
        size_t tl = sw_rec_put_u64(txt, (uint64_t)status);
        s->tags[i++] = a_kv(a, "http.status_code", a_str(a, (const uint8_t *)txt, tl));
    }
    for (size_t k = 0; k < i; k++)
        if (!s->tags[k])
            return false;
    return !a->oom;
}

static Skywalking__V3__SpanObject *read_span(struct rd *r, struct arena *a, unsigned version)
{
    Skywalking__V3__SpanObject *s = a_obj(a, sizeof(*s));
    if (!s)
        return NULL;
    skywalking__v3__span_object__init(s);
    s->spanid = (int32_t)rd_u32(r);
    s->parentspanid = (int32_t)rd_u32(r);
    s->starttime = rd_i64(r);
    s->endtime = rd_i64(r);
    uint8_t type = rd_u8(r), layer = rd_u8(r), flags = rd_u8(r), form = rd_u8(r);
    if (s->spanid < 0 || s->parentspanid < -1 || s->parentspanid == s->spanid ||
        type > SKYWALKING__V3__SPAN_TYPE__Local || layer > MAX_SPAN_LAYER ||
        form > (version >= 2 ? SW_REC_FORM_HTTP : SW_REC_FORM_NAMED))
        r->bad = true;
    s->spantype = (Skywalking__V3__SpanType)type;
    s->spanlayer = (Skywalking__V3__SpanLayer)layer;
    s->iserror = (flags & SW_REC_SPAN_ERROR) != 0;
    s->skipanalysis = (flags & SW_REC_SPAN_SKIP_ANALYSIS) != 0;
    s->componentid = (int32_t)rd_u32(r);
    if (form == SW_REC_FORM_HTTP) {
        if (!read_http(r, a, s)) {
            r->bad = true;
            return NULL;
        }
    } else {
        s->operationname = rd_str(r, a);
        s->peer = rd_str(r, a);
        s->n_tags = rd_count(r, MIN_TAG);
        s->tags = s->n_tags ? read_kvs(r, a, s->n_tags) : NULL;
    }

    s->n_refs = rd_count(r, MIN_REF);
    if (s->n_refs) {
        s->refs = a_obj(a, s->n_refs * sizeof(*s->refs));
        for (size_t i = 0; s->refs && i < s->n_refs; i++)
            if (!(s->refs[i] = read_ref(r, a)))
                return NULL;
    }

    s->n_logs = rd_count(r, MIN_LOG);
    if (s->n_logs) {
        s->logs = a_obj(a, s->n_logs * sizeof(*s->logs));
        for (size_t i = 0; s->logs && i < s->n_logs; i++) {
            Skywalking__V3__Log *l = a_obj(a, sizeof(*l));
            if (!l)
                return NULL;
            skywalking__v3__log__init(l);
            l->time = rd_i64(r);
            l->n_data = rd_count(r, MIN_KV);
            l->data = l->n_data ? read_kvs(r, a, l->n_data) : NULL;
            s->logs[i] = l;
        }
    }
    return s;
}

/* Parses the whole record into objects in `a`; NULL when the record is invalid. */
static Skywalking__V3__SegmentObject *parse(struct rd *r, struct arena *a,
                                            const struct sw_ring_meta *meta)
{
    Skywalking__V3__SegmentObject *seg = a_obj(a, sizeof(*seg));
    if (!seg)
        return NULL;
    skywalking__v3__segment_object__init(seg);
    unsigned version = rd_u8(r);
    if (version != 1 && version != SW_REC_VERSION)
        return NULL;
    uint8_t flags = rd_u8(r);
    seg->issizelimited = (flags & SW_REC_SEG_SIZE_LIMITED) != 0;
    if (version >= 2 && (flags & SW_REC_SEG_OWN_IDS)) {
        const uint8_t *uuid;
        if (!rd_take(r, 16, &uuid))
            return NULL;
        uint32_t tid = rd_u32(r);
        uint64_t sv = rd_u64(r);
        if (flags & SW_REC_SEG_OWN_TRACE)
            seg->traceid = a_id(a, uuid, tid, rd_u64(r));
        else
            seg->traceid = rd_str(r, a);
        seg->tracesegmentid = a_id(a, uuid, tid, sv);
    } else {
        if (version >= 2 && (flags & SW_REC_SEG_OWN_TRACE))
            return NULL;
        seg->traceid = rd_str(r, a);
        seg->tracesegmentid = rd_str(r, a);
    }
    if (version >= 2 &&
        (flags & ~(SW_REC_SEG_SIZE_LIMITED | SW_REC_SEG_OWN_IDS | SW_REC_SEG_OWN_TRACE)))
        return NULL;
    if (r->bad || !*seg->traceid || !*seg->tracesegmentid)
        return NULL;
    seg->n_spans = rd_count(r, MIN_SPAN);
    if (seg->n_spans == 0)
        return NULL; /* the OAP silently drops a segment without spans */
    seg->spans = a_obj(a, seg->n_spans * sizeof(*seg->spans));
    bool root = false;
    for (size_t i = 0; seg->spans && i < seg->n_spans && !r->bad; i++) {
        seg->spans[i] = read_span(r, a, version);
        if (!seg->spans[i])
            return NULL;
        root |= seg->spans[i]->spanid == 0;
    }
    if (r->bad || a->oom || r->off != r->len || !root)
        return NULL;
    if (meta) {
        seg->service =
            a_str(a, (const uint8_t *)meta->service, strnlen(meta->service, sizeof(meta->service)));
        seg->serviceinstance = a_str(a, (const uint8_t *)meta->instance,
                                     strnlen(meta->instance, sizeof(meta->instance)));
    }
    return a->oom ? NULL : seg;
}

static int encode(const void *payload, size_t len, const struct sw_ring_meta *meta, uint8_t **out,
                  size_t *out_len)
{
    if (!payload || len > SW_REC_MAX_LEN)
        return -EBADMSG;
    size_t cap = ARENA_FACTOR * len + ARENA_FIXED;
    struct arena a = {.base = malloc(cap), .lo = 0, .hi = cap};
    if (!a.base)
        return -ENOMEM;
    struct rd r = {.p = payload, .len = len};
    Skywalking__V3__SegmentObject *seg = parse(&r, &a, meta);
    int rc = 0;
    if (!seg) {
        rc = -EBADMSG;
    } else if (out) {
        size_t n = skywalking__v3__segment_object__get_packed_size(seg);
        uint8_t *buf = malloc(n ? n : 1);
        if (!buf) {
            rc = -ENOMEM;
        } else {
            *out_len = skywalking__v3__segment_object__pack(seg, buf);
            *out = buf;
        }
    }
    free(a.base);
    return rc;
}

int sw_encode_segment(const void *payload, size_t len, const struct sw_ring_meta *meta,
                      uint8_t **out, size_t *out_len)
{
    if (!out || !out_len)
        return -EINVAL;
    return encode(payload, len, meta, out, out_len);
}

int sw_encode_check(const void *payload, size_t len)
{
    return encode(payload, len, NULL, NULL, NULL);
}
