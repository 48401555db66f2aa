/*
 * record_writer.h - test-only: writes a segment record (record.h layout) from a plain
 * description, with record.h's sw_wbuf helpers, the way the agent writes them. Used by
 * test_encode, test_drain and the fuzz corpus generator.
 */
#ifndef SW_TEST_RECORD_WRITER_H
#define SW_TEST_RECORD_WRITER_H

#include "record.h"

struct tw_kv {
    const char *k, *v;
};

struct tw_ref {
    uint8_t type;
    const char *trace, *pseg;
    int32_t pspan;
    const char *psvc, *pinst, *pep, *addr;
};

struct tw_log {
    int64_t t;
    int nkv;
    const struct tw_kv *kv;
};

/* The parts of a span of form HTTP (record.h); the span's op is then unused. */
struct tw_http {
    int32_t status;
    uint8_t flags; /* SW_REC_HTTP_* */
    const char *method, *target;
    uint16_t path_off, path_len, op_len;
    const char *host;
    uint16_t url_len, params_len;
    const char *hdrs;
};

struct tw_span {
    int32_t id, parent;
    int64_t start, end;
    uint8_t type, layer, flags;
    int32_t comp;
    const char *op, *peer;
    int ntags; /* form HTTP: the tags after its parts' tags */
    const struct tw_kv *tags;
    int nrefs;
    const struct tw_ref *refs;
    int nlogs;
    const struct tw_log *logs;
    const struct tw_http *http; /* non-NULL: form HTTP */
};

/* Ids as numbers (SW_REC_SEG_OWN_IDS); the trace id too with own_trace. */
struct tw_ids {
    uint8_t uuid[16];
    uint32_t tid;
    uint64_t seg, trace;
    bool own_trace;
};

struct tw_seg {
    uint8_t flags;
    const char *trace, *seg; /* with ids: the trace id unless ids->own_trace; seg unused */
    int nspans;
    const struct tw_span *spans;
    const struct tw_ids *ids;
    uint8_t version; /* 0: SW_REC_VERSION */
};

/* Writes the record into buf; returns its length, or 0 when it does not fit. */
static inline size_t tw_write(const struct tw_seg *s, void *buf, size_t cap)
{
    struct sw_wbuf w;
    sw_wbuf_init(&w, buf, cap);
    const struct tw_ids *ids = s->ids;
    sw_wbuf_u8(&w, s->version ? s->version : SW_REC_VERSION);
    sw_wbuf_u8(&w, (uint8_t)(s->flags | (ids ? SW_REC_SEG_OWN_IDS : 0) |
                             (ids && ids->own_trace ? SW_REC_SEG_OWN_TRACE : 0)));
    if (ids) {
        sw_wbuf_put(&w, ids->uuid, 16);
        sw_wbuf_u32(&w, ids->tid);
        sw_wbuf_i64(&w, (int64_t)ids->seg);
        if (ids->own_trace)
            sw_wbuf_i64(&w, (int64_t)ids->trace);
        else
            sw_wbuf_cstr(&w, s->trace);
    } else {
        sw_wbuf_cstr(&w, s->trace);
        sw_wbuf_cstr(&w, s->seg);
    }
    sw_wbuf_u16(&w, (uint16_t)s->nspans);
    for (int i = 0; i < s->nspans; i++) {
        const struct tw_span *p = &s->spans[i];
        sw_wbuf_i32(&w, p->id);
        sw_wbuf_i32(&w, p->parent);
        sw_wbuf_i64(&w, p->start);
        sw_wbuf_i64(&w, p->end);
        sw_wbuf_u8(&w, p->type);
        sw_wbuf_u8(&w, p->layer);
        sw_wbuf_u8(&w, p->flags);
        sw_wbuf_u8(&w, p->http ? SW_REC_FORM_HTTP : SW_REC_FORM_NAMED);
        sw_wbuf_i32(&w, p->comp);
        if (p->http) {
            const struct tw_http *h = p->http;
            sw_wbuf_i32(&w, h->status);
            sw_wbuf_u8(&w, h->flags);
            sw_wbuf_cstr(&w, h->method);
            sw_wbuf_cstr(&w, h->target);
            sw_wbuf_u16(&w, h->path_off);
            sw_wbuf_u16(&w, h->path_len);
            sw_wbuf_u16(&w, h->op_len);
            sw_wbuf_cstr(&w, h->host);
            sw_wbuf_u16(&w, h->url_len);
            sw_wbuf_u16(&w, h->params_len);
            sw_wbuf_cstr(&w, h->hdrs);
        } else {
            sw_wbuf_cstr(&w, p->op);
        }
        sw_wbuf_cstr(&w, p->peer);
        sw_wbuf_u16(&w, (uint16_t)p->ntags);
        for (int t = 0; t < p->ntags; t++) {
            sw_wbuf_cstr(&w, p->tags[t].k);
            sw_wbuf_cstr(&w, p->tags[t].v);
        }
        sw_wbuf_u16(&w, (uint16_t)p->nrefs);
        for (int t = 0; t < p->nrefs; t++) {
            const struct tw_ref *r = &p->refs[t];
            sw_wbuf_u8(&w, r->type);
            sw_wbuf_cstr(&w, r->trace);
            sw_wbuf_cstr(&w, r->pseg);
            sw_wbuf_i32(&w, r->pspan);
            sw_wbuf_cstr(&w, r->psvc);
            sw_wbuf_cstr(&w, r->pinst);
            sw_wbuf_cstr(&w, r->pep);
            sw_wbuf_cstr(&w, r->addr);
        }
        sw_wbuf_u16(&w, (uint16_t)p->nlogs);
        for (int t = 0; t < p->nlogs; t++) {
            sw_wbuf_i64(&w, p->logs[t].t);
            sw_wbuf_u16(&w, (uint16_t)p->logs[t].nkv);
            for (int k = 0; k < p->logs[t].nkv; k++) {
                sw_wbuf_cstr(&w, p->logs[t].kv[k].k);
                sw_wbuf_cstr(&w, p->logs[t].kv[k].v);
            }
        }
    }
    return w.overflow ? 0 : w.len;
}

/* A typical two-span segment (an entry with a cross-process ref, and an exit). */
static const struct tw_kv tw_tags0[] = {{"http.method", "GET"},
                                        {"url", "http://127.0.0.1:8080/api/orders?id=1"},
                                        {"http.status_code", "500"}};
static const struct tw_kv tw_tags1[] = {{"http.method", "POST"}};
static const struct tw_kv tw_logkv[] = {{"event", "error"}, {"message", "bad gateway"}};
static const struct tw_log tw_logs0[] = {{1700000000123, 2, tw_logkv}};
static const struct tw_ref tw_refs0[] = {{0, "trace.1.2", "pseg.3.4", 1, "frontend",
                                          "inst@10.0.0.5", "GET:/api/orders", "backend:8080"}};
static const struct tw_span tw_spans[] = {
    {1, 0, 1700000000100, 1700000000110, 1, 3, 0, 49, "/stock", "stock:9000", 1, tw_tags1, 0, NULL,
     0, NULL, NULL},
    {0, -1, 1700000000050, 1700000000150, 0, 3, 1, 49, "GET:/api/orders", "", 3, tw_tags0, 1,
     tw_refs0, 1, tw_logs0, NULL},
};
static const struct tw_seg tw_sample = {0, "trace.1.2", "seg.5.6", 2, tw_spans, NULL, 0};

/*
 * The same segment as the agent writes it (record version 2): ids as numbers, both spans of
 * form HTTP. Its protobuf equals tw_sample's but for the ids and the extra tag of span 1.
 */
static const struct tw_http tw_http0 = {
    500, SW_REC_HTTP_URL_HOST, "GET", "/api/orders?id=1", 0, 11, 15, "127.0.0.1:8080", 37, 4, ""};
static const struct tw_http tw_http1 = {0, 0, "POST", "/stock", 0, 6, 11, "", 0, 0, ""};
static const struct tw_kv tw_extra1[] = {{"k", "v"}};
static const struct tw_span tw_hspans[] = {
    {1, 0, 1700000000100, 1700000000110, 1, 3, 0, 49, NULL, "stock:9000", 1, tw_extra1, 0, NULL, 0,
     NULL, &tw_http1},
    {0, -1, 1700000000050, 1700000000150, 0, 3, 1, 49, NULL, "", 0, NULL, 1, tw_refs0, 1, tw_logs0,
     &tw_http0},
};
static const struct tw_ids tw_ids0 = {{0x3f, 0x2a, 0x8c, 0x1e, 0x9b, 0x7d, 0x4e, 0x6f, 0xa1, 0xb2,
                                       0xc3, 0xd4, 0xe5, 0xf6, 0x07, 0x18},
                                      45,
                                      17245678901230001ull,
                                      17245678901230000ull,
                                      true};
static const struct tw_seg tw_hsample = {0, NULL, NULL, 2, tw_hspans, &tw_ids0, 0};

#endif /* SW_TEST_RECORD_WRITER_H */
