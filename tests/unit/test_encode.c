/*
 * test_encode.c - unit tests of agent/reporter/encode.c: a record written with sw_wbuf (the
 * agent's writer) is encoded and unpacked again with protobuf-c and compared field by field;
 * truncated, trailing, out-of-range and random records are rejected without a crash.
 */
#include "common.h"

#include "check.h"
#include "encode.h"
#include "record_writer.h"

#include <stdlib.h>
#include <string.h>

#include "language-agent/Tracing.pb-c.h"

static struct sw_ring_meta meta = {
    .pid = 42, .service = "orders|ns|cl", .instance = "abc@10.0.0.1"};

static Skywalking__V3__SegmentObject *roundtrip(const struct tw_seg *s)
{
    static uint8_t rec[1 << 20];
    size_t n = tw_write(s, rec, sizeof(rec));
    CHECK(n > 0);
    uint8_t *out = NULL;
    size_t out_len = 0;
    CHECK_EQ(sw_encode_segment(rec, n, &meta, &out, &out_len), 0);
    CHECK_EQ(sw_encode_check(rec, n), 0);
    Skywalking__V3__SegmentObject *o = skywalking__v3__segment_object__unpack(NULL, out_len, out);
    CHECK(o != NULL);
    /* The encoder writes protobuf itself: byte for byte what protobuf-c packs of the same. */
    size_t n2 = skywalking__v3__segment_object__get_packed_size(o);
    uint8_t *again = malloc(n2 ? n2 : 1);
    CHECK(again != NULL);
    CHECK_EQ(skywalking__v3__segment_object__pack(o, again), n2);
    CHECK_EQ(n2, out_len);
    CHECK(memcmp(again, out, out_len) == 0);
    free(again);
    free(out);
    return o;
}

static void check_kvs(Skywalking__V3__KeyStringValuePair **got, size_t n, const struct tw_kv *want,
                      int wn)
{
    CHECK_EQ(n, wn);
    for (int i = 0; i < wn; i++) {
        CHECK_STR(got[i]->key, want[i].k);
        CHECK_STR(got[i]->value, want[i].v);
    }
}

static void test_roundtrip(void)
{
    Skywalking__V3__SegmentObject *o = roundtrip(&tw_sample);
    CHECK_STR(o->traceid, "trace.1.2");
    CHECK_STR(o->tracesegmentid, "seg.5.6");
    CHECK_STR(o->service, "orders|ns|cl");
    CHECK_STR(o->serviceinstance, "abc@10.0.0.1");
    CHECK_EQ(o->issizelimited, 0);
    CHECK_EQ(o->n_spans, 2);
    for (size_t i = 0; i < o->n_spans; i++) {
        const struct tw_span *w = &tw_spans[i];
        const Skywalking__V3__SpanObject *s = o->spans[i];
        CHECK_EQ(s->spanid, w->id);
        CHECK_EQ(s->parentspanid, w->parent);
        CHECK_EQ(s->starttime, w->start);
        CHECK_EQ(s->endtime, w->end);
        CHECK_EQ(s->spantype, w->type);
        CHECK_EQ(s->spanlayer, w->layer);
        CHECK_EQ(s->componentid, w->comp);
        CHECK_EQ(s->iserror, (w->flags & SW_REC_SPAN_ERROR) != 0);
        CHECK_EQ(s->skipanalysis, (w->flags & SW_REC_SPAN_SKIP_ANALYSIS) != 0);
        CHECK_STR(s->operationname, w->op);
        CHECK_STR(s->peer, w->peer);
        check_kvs(s->tags, s->n_tags, w->tags, w->ntags);
        CHECK_EQ(s->n_refs, w->nrefs);
        for (int r = 0; r < w->nrefs; r++) {
            const Skywalking__V3__SegmentReference *g = s->refs[r];
            const struct tw_ref *x = &w->refs[r];
            CHECK_EQ(g->reftype, x->type);
            CHECK_STR(g->traceid, x->trace);
            CHECK_STR(g->parenttracesegmentid, x->pseg);
            CHECK_EQ(g->parentspanid, x->pspan);
            CHECK_STR(g->parentservice, x->psvc);
            CHECK_STR(g->parentserviceinstance, x->pinst);
            CHECK_STR(g->parentendpoint, x->pep);
            CHECK_STR(g->networkaddressusedatpeer, x->addr);
        }
        CHECK_EQ(s->n_logs, w->nlogs);
        for (int l = 0; l < w->nlogs; l++) {
            CHECK_EQ(s->logs[l]->time, w->logs[l].t);
            check_kvs(s->logs[l]->data, s->logs[l]->n_data, w->logs[l].kv, w->logs[l].nkv);
        }
    }
    CHECK_EQ(o->spans[1]->iserror, 1);
    skywalking__v3__segment_object__free_unpacked(o, NULL);

    /* isSizeLimited, skipAnalysis, negative times and the CrossThread ref type. */
    struct tw_ref ref = {1, "t", "p", 3, "", "", "", ""};
    struct tw_span sp = {0, -1, -5, INT64_MAX, 2, 0, 2, 0, "", "", 0, NULL, 1, &ref, 0, NULL, NULL};
    struct tw_seg s = {SW_REC_SEG_SIZE_LIMITED, "t", "s", 1, &sp, NULL, 0};
    o = roundtrip(&s);
    CHECK_EQ(o->issizelimited, 1);
    CHECK_EQ(o->spans[0]->skipanalysis, 1);
    CHECK_EQ(o->spans[0]->iserror, 0);
    CHECK_EQ(o->spans[0]->starttime, -5);
    CHECK(o->spans[0]->endtime == INT64_MAX);
    CHECK_EQ(o->spans[0]->refs[0]->reftype, SKYWALKING__V3__REF_TYPE__CrossThread);
    skywalking__v3__segment_object__free_unpacked(o, NULL);
}

static void test_utf8_sanitized(void)
{
    char op[] = "GET:/caf\xc3\xa9/\xff\xfe/\xe2\x82\xac/\xed\xa0\x80/\xc0\xaf/\xf0\x9f\x98\x80";
    struct tw_span sp = {0, -1, 1, 2, 0, 3, 0, 49, op, "h\xc3", 0, NULL, 0, NULL, 0, NULL, NULL};
    struct tw_seg s = {0, "t", "s", 1, &sp, NULL, 0};
    Skywalking__V3__SegmentObject *o = roundtrip(&s);
    CHECK_STR(o->spans[0]->operationname,
              "GET:/caf\xc3\xa9/?\?/\xe2\x82\xac/?\?\?/?\?/\xf0\x9f\x98\x80");
    CHECK_STR(o->spans[0]->peer, "h?");
    skywalking__v3__segment_object__free_unpacked(o, NULL);

    /* An embedded NUL becomes '?', it does not cut the string. */
    uint8_t rec[256];
    size_t n = tw_write(&s, rec, sizeof(rec));
    uint8_t *p = memmem(rec, n, "GET:", 4);
    CHECK(p != NULL);
    p[3] = 0;
    uint8_t *out;
    size_t out_len;
    CHECK_EQ(sw_encode_segment(rec, n, &meta, &out, &out_len), 0);
    o = skywalking__v3__segment_object__unpack(NULL, out_len, out);
    CHECK(o != NULL);
    CHECK(strncmp(o->spans[0]->operationname, "GET?/caf", 8) == 0);
    skywalking__v3__segment_object__free_unpacked(o, NULL);
    free(out);
}

/* Many small items: the arena bound holds for the densest records. */
static void test_dense(void)
{
    static struct tw_kv kv[20000];
    for (size_t i = 0; i < SW_ARRAY_LEN(kv); i++)
        kv[i] = (struct tw_kv){"", ""};
    static struct tw_span sp[2000];
    for (int i = 0; i < 2000; i++)
        sp[i] =
            (struct tw_span){i, i - 1, 1, 2, 2, 0, 0, 0, "", "", 0, NULL, 0, NULL, 0, NULL, NULL};
    sp[0].ntags = 20000;
    sp[0].tags = kv;
    struct tw_seg s = {0, "t", "s", 2000, sp, NULL, 0};
    Skywalking__V3__SegmentObject *o = roundtrip(&s);
    CHECK_EQ(o->n_spans, 2000);
    CHECK_EQ(o->spans[0]->n_tags, 20000);
    CHECK_EQ(o->spans[1999]->parentspanid, 1998);
    skywalking__v3__segment_object__free_unpacked(o, NULL);
}

static int enc(const struct tw_seg *s)
{
    uint8_t rec[4096];
    size_t n = tw_write(s, rec, sizeof(rec));
    CHECK(n > 0);
    uint8_t *out = NULL;
    size_t out_len = 0;
    int rc = sw_encode_segment(rec, n, &meta, &out, &out_len);
    if (rc == 0)
        free(out);
    return rc;
}

/* HTTP spans whose names are several times their parts: the arena bound holds for them too. */
static void test_dense_http(void)
{
    static char target[60001], host[60001];
    memset(target, 'a', sizeof(target) - 1);
    target[0] = '/';
    target[30000] = '?';
    memset(host, 'h', sizeof(host) - 1);
    struct tw_http h = {
        599, SW_REC_HTTP_URL_HOST, "PROPPATCH", target, 0, 30000, 30010, host, 65535, 29999, ""};
    static struct tw_span sp[2];
    sp[0] = (struct tw_span){0, -1, 1, 2, 0, 3, 0, 49, NULL, "", 0, NULL, 0, NULL, 0, NULL, &h};
    struct tw_seg s = {0, NULL, NULL, 1, sp, &tw_ids0, 0};
    Skywalking__V3__SegmentObject *o = roundtrip(&s);
    CHECK_EQ(strlen(o->spans[0]->operationname), 30010);
    CHECK_EQ(strlen(o->spans[0]->tags[0]->value), 65535);
    CHECK_EQ(strlen(o->spans[0]->tags[2]->value), 29999);
    skywalking__v3__segment_object__free_unpacked(o, NULL);
    /* Many small ones, each with every name. */
    static struct tw_span many[1500];
    static const struct tw_http small = {
        200, SW_REC_HTTP_URL_HOST | SW_REC_HTTP_TLS, "M", "/?", 0, 1, 3, "", 10, 0, "x"};
    for (int i = 0; i < 1500; i++)
        many[i] = (struct tw_span){i,  i - 1, 1,    2, 0,    3, 0,    49,    NULL,
                                   "", 0,     NULL, 0, NULL, 0, NULL, &small};
    s.spans = many;
    s.nspans = 1500;
    o = roundtrip(&s);
    CHECK_EQ(o->n_spans, 1500);
    CHECK_STR(o->spans[1499]->tags[0]->value, "https:///?");
    skywalking__v3__segment_object__free_unpacked(o, NULL);
}

static void test_invalid_values(void)
{
    struct tw_span sp = tw_spans[1];
    struct tw_seg s = {0, "t", "s", 1, &sp, NULL, 0};
    CHECK_EQ(enc(&s), 0);
    sp.type = 3;
    CHECK_EQ(enc(&s), -EBADMSG);
    sp = tw_spans[1];
    sp.layer = 8;
    CHECK_EQ(enc(&s), -EBADMSG);
    sp = tw_spans[1];
    sp.id = 1; /* no span 0 */
    CHECK_EQ(enc(&s), -EBADMSG);
    sp = tw_spans[1];
    sp.parent = -2;
    CHECK_EQ(enc(&s), -EBADMSG);
    sp = tw_spans[1];
    sp.id = -1;
    CHECK_EQ(enc(&s), -EBADMSG);
    sp = tw_spans[1];
    struct tw_ref bad = tw_refs0[0];
    bad.type = 2;
    sp.refs = &bad;
    CHECK_EQ(enc(&s), -EBADMSG);
    sp = tw_spans[1];
    s.nspans = 0;
    CHECK_EQ(enc(&s), -EBADMSG);
    s.nspans = 1;
    s.trace = "";
    CHECK_EQ(enc(&s), -EBADMSG);
    s.trace = "t";
    s.seg = "";
    CHECK_EQ(enc(&s), -EBADMSG);
    s.seg = "s";
    CHECK_EQ(enc(&s), 0);

    uint8_t rec[4096];
    size_t n = tw_write(&tw_sample, rec, sizeof(rec));
    uint8_t *out;
    size_t out_len;
    rec[0] = 3; /* an unknown record version */
    CHECK_EQ(sw_encode_segment(rec, n, &meta, &out, &out_len), -EBADMSG);
    rec[0] = 0;
    CHECK_EQ(sw_encode_segment(rec, n, &meta, &out, &out_len), -EBADMSG);
    rec[0] = SW_REC_VERSION;
    /* The form byte of span 0 (after ids and times; version 1's reserved byte): offset
     * 2 + 2+9 + 2+7 + 2 + 16 + 16 + 3. */
    size_t form_at = 2 + 2 + strlen(tw_sample.trace) + 2 + strlen(tw_sample.seg) + 2 + 8 + 16 + 3;
    CHECK_EQ(rec[form_at], SW_REC_FORM_NAMED);
    rec[form_at] = 2; /* no such form */
    CHECK_EQ(sw_encode_segment(rec, n, &meta, &out, &out_len), -EBADMSG);
    rec[form_at] = SW_REC_FORM_NAMED;
    rec[1] = 0x80; /* an unknown flag */
    CHECK_EQ(sw_encode_segment(rec, n, &meta, &out, &out_len), -EBADMSG);
    rec[1] = SW_REC_SEG_OWN_TRACE; /* a trace id as numbers needs the ids as numbers */
    CHECK_EQ(sw_encode_segment(rec, n, &meta, &out, &out_len), -EBADMSG);
    rec[1] = 0;
    CHECK_EQ(sw_encode_segment(rec, n, &meta, &out, &out_len), 0);
    free(out);
    /* Version 1 (a ring of an agent before version 2): the same layout with named spans. */
    rec[0] = 1;
    CHECK_EQ(sw_encode_segment(rec, n, &meta, &out, &out_len), 0);
    free(out);
    rec[form_at] = SW_REC_FORM_HTTP; /* version 1 had no other form */
    CHECK_EQ(sw_encode_segment(rec, n, &meta, &out, &out_len), -EBADMSG);
    rec[form_at] = SW_REC_FORM_NAMED;
    rec[1] = SW_REC_SEG_OWN_IDS | SW_REC_SEG_OWN_TRACE; /* version 1 ignores other flag bits */
    CHECK_EQ(sw_encode_segment(rec, n, &meta, &out, &out_len), 0);
    free(out);
    CHECK_EQ(sw_encode_segment(NULL, 0, &meta, &out, &out_len), -EBADMSG);
    CHECK_EQ(sw_encode_segment(rec, SW_REC_MAX_LEN + 1, &meta, &out, &out_len), -EBADMSG);
}

static const char *tag_of(const Skywalking__V3__SpanObject *s, size_t i, const char *key)
{
    CHECK(i < s->n_tags);
    CHECK_STR(s->tags[i]->key, key);
    return s->tags[i]->value;
}

/* Record version 2 as the agent writes it: ids as numbers, spans of form HTTP. */
static void test_http_form(void)
{
    Skywalking__V3__SegmentObject *o = roundtrip(&tw_hsample);
    CHECK_STR(o->traceid, "3f2a8c1e9b7d4e6fa1b2c3d4e5f60718.45.17245678901230000");
    CHECK_STR(o->tracesegmentid, "3f2a8c1e9b7d4e6fa1b2c3d4e5f60718.45.17245678901230001");
    CHECK_EQ(o->n_spans, 2);
    const Skywalking__V3__SpanObject *x = o->spans[0], *e = o->spans[1];
    CHECK_STR(x->operationname, "POST:/stock");
    CHECK_STR(x->peer, "stock:9000");
    CHECK_EQ(x->n_tags, 2); /* no url (url_len 0), no status (0) */
    CHECK_STR(tag_of(x, 0, "http.method"), "POST");
    CHECK_STR(tag_of(x, 1, "k"), "v");
    CHECK_STR(e->operationname, "GET:/api/orders");
    CHECK_STR(e->peer, "");
    CHECK_EQ(e->n_tags, 4);
    CHECK_STR(tag_of(e, 0, "url"), "http://127.0.0.1:8080/api/orders?id=1");
    CHECK_STR(tag_of(e, 1, "http.method"), "GET");
    CHECK_STR(tag_of(e, 2, "http.params"), "id=1");
    CHECK_STR(tag_of(e, 3, "http.status_code"), "500");
    CHECK_EQ(e->iserror, 1);
    CHECK_EQ(e->n_refs, 1);
    CHECK_STR(e->refs[0]->parentendpoint, "GET:/api/orders");
    CHECK_EQ(e->n_logs, 1);
    skywalking__v3__segment_object__free_unpacked(o, NULL);

    /* Cut names, https, a url without a host, headers, an empty method, a trace id as text. */
    struct tw_http h = {
        404,    SW_REC_HTTP_URL_HOST | SW_REC_HTTP_TLS, "GET", "/a/b?q#f", 0, 4, 5, "h:1", 12, 1,
        "x=[1]"};
    struct tw_span sp = {0, -1, 1, 2, 0, 3, 0, 49, NULL, "p", 0, NULL, 0, NULL, 0, NULL, &h};
    struct tw_ids ids = tw_ids0;
    ids.own_trace = false;
    struct tw_seg sg = {0, "up.1.2", NULL, 1, &sp, &ids, 0};
    o = roundtrip(&sg);
    CHECK_STR(o->traceid, "up.1.2");
    CHECK_STR(o->tracesegmentid, "3f2a8c1e9b7d4e6fa1b2c3d4e5f60718.45.17245678901230001");
    e = o->spans[0];
    CHECK_STR(e->operationname, "GET:/");
    CHECK_STR(tag_of(e, 0, "url"), "https://h:1/");
    CHECK_STR(tag_of(e, 1, "http.method"), "GET");
    CHECK_STR(tag_of(e, 2, "http.headers"), "x=[1]");
    CHECK_STR(tag_of(e, 3, "http.params"), "q");
    CHECK_STR(tag_of(e, 4, "http.status_code"), "404");
    skywalking__v3__segment_object__free_unpacked(o, NULL);
    h = (struct tw_http){0, 0, "", "http://up/x", 9, 2, 2, "", 11, 0, ""};
    o = roundtrip(&sg);
    e = o->spans[0];
    CHECK_STR(e->operationname, "/x"); /* no method: the path alone */
    CHECK_EQ(e->n_tags, 1);
    CHECK_STR(tag_of(e, 0, "url"), "http://up/x"); /* the target as it is */
    skywalking__v3__segment_object__free_unpacked(o, NULL);
    h.path_len = 0;
    h.op_len = 1;
    o = roundtrip(&sg);
    CHECK_STR(o->spans[0]->operationname, "/"); /* an empty path is "/" */
    skywalking__v3__segment_object__free_unpacked(o, NULL);
    h.op_len = 0;
    o = roundtrip(&sg);
    CHECK_STR(o->spans[0]->operationname, ""); /* cut to nothing */
    skywalking__v3__segment_object__free_unpacked(o, NULL);
}

/* Lengths of an HTTP span that do not fit its parts: the record is refused. */
static void test_http_invalid(void)
{
    struct tw_http h;
    struct tw_span sp = {0, -1, 1, 2, 0, 3, 0, 49, NULL, "p", 0, NULL, 0, NULL, 0, NULL, &h};
    struct tw_seg sg = {0, NULL, NULL, 1, &sp, &tw_ids0, 0};
    const struct tw_http good = {200, SW_REC_HTTP_URL_HOST, "GET", "/a?b", 0, 2, 6, "h", 12, 1, ""};
    struct {
        const char *what;
        struct tw_http h;
    } bad[] = {
        {"path past the target", {200, 0, "GET", "/a?b", 3, 2, 6, "h", 0, 0, ""}},
        {"path offset past the target", {200, 0, "GET", "/a?b", 5, 0, 1, "h", 0, 0, ""}},
        {"operation name longer than its parts", {200, 0, "GET", "/a?b", 0, 2, 7, "h", 0, 0, ""}},
        {"url longer than its parts",
         {200, SW_REC_HTTP_URL_HOST, "GET", "/a?b", 0, 2, 6, "h", 13, 0, ""}},
        {"url without host longer than the target",
         {200, 0, "GET", "/a?b", 0, 2, 6, "h", 5, 0, ""}},
        {"params past the target", {200, 0, "GET", "/a?b", 0, 2, 6, "h", 0, 2, ""}},
        {"params without a '?'", {200, 0, "GET", "/ab", 0, 2, 6, "h", 0, 1, ""}},
        {"unknown http flag", {200, 0x04, "GET", "/a?b", 0, 2, 6, "h", 0, 0, ""}},
    };
    uint8_t rec[1024];
    h = good;
    size_t n = tw_write(&sg, rec, sizeof(rec));
    CHECK_EQ(sw_encode_check(rec, n), 0);
    for (size_t i = 0; i < SW_ARRAY_LEN(bad); i++) {
        h = bad[i].h;
        n = tw_write(&sg, rec, sizeof(rec));
        CHECK(n > 0);
        if (sw_encode_check(rec, n) != -EBADMSG) {
            fprintf(stderr, "accepted: %s\n", bad[i].what);
            CHECK(0);
        }
    }
}

static void test_truncated_and_trailing(void)
{
    uint8_t rec[4096];
    size_t n = tw_write(&tw_sample, rec, sizeof(rec));
    uint8_t *out = NULL;
    size_t out_len;
    for (size_t i = 0; i < n; i++)
        CHECK_EQ(sw_encode_segment(rec, i, &meta, &out, &out_len), -EBADMSG);
    rec[n] = 0;
    CHECK_EQ(sw_encode_segment(rec, n + 1, &meta, &out, &out_len), -EBADMSG);
    CHECK(out == NULL);
    /* A count far larger than the bytes left. */
    struct tw_span sp = {0, -1, 1, 2, 0, 3, 0, 49, "", "", 0, NULL, 0, NULL, 0, NULL, NULL};
    struct tw_seg s = {0, "t", "s", 1, &sp, NULL, 0};
    n = tw_write(&s, rec, sizeof(rec));
    /* The tag count is the 6th-to-last u16: tags, refs, logs are the last three u16s. */
    rec[n - 6] = 0xff;
    rec[n - 5] = 0xff;
    CHECK_EQ(sw_encode_segment(rec, n, &meta, &out, &out_len), -EBADMSG);
}

/* Random mutations of a valid record: never a crash, only 0 or -EBADMSG. */
static void test_random_mutations(void)
{
    uint8_t good[4096], rec[4096];
    unsigned seed = 1;
    int ok = 0, bad = 0;
    for (int iter = 0; iter < 40000; iter++) {
        /* The named sample and the HTTP one, alternately. */
        size_t n = tw_write(iter % 2 ? &tw_hsample : &tw_sample, good, sizeof(good));
        memcpy(rec, good, n);
        int flips = 1 + (int)(rand_r(&seed) % 4);
        for (int f = 0; f < flips; f++)
            rec[rand_r(&seed) % n] = (uint8_t)rand_r(&seed);
        size_t len = (rand_r(&seed) % 8) ? n : rand_r(&seed) % (n + 1);
        uint8_t *out = NULL;
        size_t out_len;
        int rc = sw_encode_segment(rec, len, &meta, &out, &out_len);
        CHECK(rc == 0 || rc == -EBADMSG);
        if (rc == 0) {
            Skywalking__V3__SegmentObject *o =
                skywalking__v3__segment_object__unpack(NULL, out_len, out);
            CHECK(o != NULL);
            uint8_t again[8192];
            CHECK(skywalking__v3__segment_object__get_packed_size(o) == out_len &&
                  out_len <= sizeof(again));
            skywalking__v3__segment_object__pack(o, again);
            CHECK(memcmp(again, out, out_len) == 0);
            skywalking__v3__segment_object__free_unpacked(o, NULL);
            free(out);
            ok++;
        } else {
            bad++;
        }
    }
    CHECK(ok > 100 && bad > 100);
}

/*
 * sw_encode_segment_framed: entries appended to one buffer are a SegmentCollection as they lie,
 * each SegmentObject byte for byte what sw_encode_segment makes; a refused record leaves the
 * buffer's length as it was; ids of processes with different uuids alternate correctly (the
 * encoder keeps the last uuid's hex digits); records above the stack copy and segments with
 * more spans than the stack array take the heap path.
 */
static void test_framed_batch(void)
{
    static uint8_t rec[1 << 20];
    struct tw_ids ia = tw_ids0, ib = tw_ids0;
    ib.uuid[0] = 0x01;
    ib.uuid[15] = 0xfe;
    struct tw_seg sa = tw_hsample, sb = tw_hsample;
    sa.ids = &ia;
    sb.ids = &ib;
    static struct tw_span many[12];
    for (int i = 0; i < 12; i++)
        many[i] =
            (struct tw_span){i, i - 1, 1, 2, 2, 0, 0, 0, "op", "", 0, NULL, 0, NULL, 0, NULL, NULL};
    static char big[3000];
    memset(big, 'b', sizeof(big) - 1);
    many[3].op = big; /* the record is over the 2 KiB the encoder copies to its stack */
    struct tw_seg sm = {0, "t.1.2", "s.3.4", 12, many, NULL, 0};
    const struct tw_seg *order[] = {&sa, &sb, &tw_sample, &sa, &sm, &sb};
    const char *want_trace[] = {"3f2a8c1e9b7d4e6fa1b2c3d4e5f60718",
                                "012a8c1e9b7d4e6fa1b2c3d4e5f607fe",
                                "trace.1.2",
                                "3f2a8c1e9b7d4e6fa1b2c3d4e5f60718",
                                "t.1.2",
                                "012a8c1e9b7d4e6fa1b2c3d4e5f607fe"};
    size_t nseg = SW_ARRAY_LEN(order);
    struct sw_obuf ob = {NULL, 0, 0};
    size_t off[8], len[8];
    for (size_t i = 0; i < nseg; i++) {
        size_t n = tw_write(order[i], rec, sizeof(rec));
        CHECK(n > 0);
        if (i == 2) { /* a refused record in between: nothing appended */
            size_t before = ob.len;
            CHECK_EQ(sw_encode_segment_framed(rec, n - 1, &meta, &ob, &off[i], &len[i]), -EBADMSG);
            CHECK_EQ(ob.len, before);
        }
        CHECK_EQ(sw_encode_segment_framed(rec, n, &meta, &ob, &off[i], &len[i]), 0);
        uint8_t *one = NULL;
        size_t one_len = 0;
        CHECK_EQ(sw_encode_segment(rec, n, &meta, &one, &one_len), 0);
        CHECK_EQ(one_len, len[i]);
        CHECK(memcmp(one, ob.p + off[i], one_len) == 0);
        free(one);
    }
    Skywalking__V3__SegmentCollection *c =
        skywalking__v3__segment_collection__unpack(NULL, ob.len, ob.p);
    CHECK(c != NULL);
    CHECK_EQ(c->n_segments, nseg);
    for (size_t i = 0; i < nseg; i++) {
        CHECK(strncmp(c->segments[i]->traceid, want_trace[i], strlen(want_trace[i])) == 0);
        CHECK_EQ(c->segments[i]->n_spans, (size_t)order[i]->nspans);
    }
    CHECK_STR(c->segments[1]->tracesegmentid,
              "012a8c1e9b7d4e6fa1b2c3d4e5f607fe.45.17245678901230001");
    CHECK_EQ(strlen(c->segments[4]->spans[3]->operationname), sizeof(big) - 1);
    skywalking__v3__segment_collection__free_unpacked(c, NULL);
    free(ob.p);
}

int main(void)
{
    RUN_TEST(test_roundtrip);
    RUN_TEST(test_utf8_sanitized);
    RUN_TEST(test_dense);
    RUN_TEST(test_dense_http);
    RUN_TEST(test_invalid_values);
    RUN_TEST(test_http_form);
    RUN_TEST(test_http_invalid);
    RUN_TEST(test_truncated_and_trailing);
    RUN_TEST(test_random_mutations);
    RUN_TEST(test_framed_batch);
    return 0;
}
