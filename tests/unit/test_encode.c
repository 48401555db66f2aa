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

#include "language-agent/Tracing.pb-c.h"

static struct sw_ring_meta meta = {.pid = 42, .service = "orders|ns|cl", .instance = "abc@10.0.0.1"};

static Skywalking__V3__SegmentObject *roundtrip(const struct tw_seg *s)
{
    static uint8_t rec[1 << 20];
    size_t n = tw_write(s, rec, sizeof(rec));
    CHECK(n > 0);
    uint8_t *out = NULL;
    size_t out_len = 0;
    CHECK_EQ(sw_encode_segment(rec, n, &meta, &out, &out_len), 0);
    CHECK_EQ(sw_encode_check(rec, n), 0);
    Skywalking__V3__SegmentObject *o =
        skywalking__v3__segment_object__unpack(NULL, out_len, out);
    CHECK(o != NULL);
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
    struct tw_span sp = {0, -1, -5, INT64_MAX, 2, 0, 2, 0, "", "", 0, NULL, 1, &ref, 0, NULL};
    struct tw_seg s = {SW_REC_SEG_SIZE_LIMITED, "t", "s", 1, &sp};
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
    struct tw_span sp = {0, -1, 1, 2, 0, 3, 0, 49, op, "h\xc3", 0, NULL, 0, NULL, 0, NULL};
    struct tw_seg s = {0, "t", "s", 1, &sp};
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
        sp[i] = (struct tw_span){i, i - 1, 1, 2, 2, 0, 0, 0, "", "", 0, NULL, 0, NULL, 0, NULL};
    sp[0].ntags = 20000;
    sp[0].tags = kv;
    struct tw_seg s = {0, "t", "s", 2000, sp};
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

static void test_invalid_values(void)
{
    struct tw_span sp = tw_spans[1];
    struct tw_seg s = {0, "t", "s", 1, &sp};
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
    rec[0] = 2; /* an unknown record version */
    CHECK_EQ(sw_encode_segment(rec, n, &meta, &out, &out_len), -EBADMSG);
    rec[0] = SW_REC_VERSION;
    /* The reserved byte of span 0 (after ids and times): offset 2 + 2+9 + 2+7 + 2 + 16 + 16 + 3. */
    size_t reserved_at = 2 + 2 + strlen(tw_sample.trace) + 2 + strlen(tw_sample.seg) + 2 + 8 + 16 + 3;
    CHECK_EQ(rec[reserved_at], 0);
    rec[reserved_at] = 1;
    CHECK_EQ(sw_encode_segment(rec, n, &meta, &out, &out_len), -EBADMSG);
    rec[reserved_at] = 0;
    CHECK_EQ(sw_encode_segment(rec, n, &meta, &out, &out_len), 0);
    free(out);
    CHECK_EQ(sw_encode_segment(NULL, 0, &meta, &out, &out_len), -EBADMSG);
    CHECK_EQ(sw_encode_segment(rec, SW_REC_MAX_LEN + 1, &meta, &out, &out_len), -EBADMSG);
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
    struct tw_span sp = {0, -1, 1, 2, 0, 3, 0, 49, "", "", 0, NULL, 0, NULL, 0, NULL};
    struct tw_seg s = {0, "t", "s", 1, &sp};
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
    size_t n = tw_write(&tw_sample, good, sizeof(good));
    unsigned seed = 1;
    int ok = 0, bad = 0;
    for (int iter = 0; iter < 20000; iter++) {
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
            skywalking__v3__segment_object__free_unpacked(o, NULL);
            free(out);
            ok++;
        } else {
            bad++;
        }
    }
    CHECK(ok > 100 && bad > 100);
}

int main(void)
{
    RUN_TEST(test_roundtrip);
    RUN_TEST(test_utf8_sanitized);
    RUN_TEST(test_dense);
    RUN_TEST(test_invalid_values);
    RUN_TEST(test_truncated_and_trailing);
    RUN_TEST(test_random_mutations);
    return 0;
}
