/*
 * test_stub_json.c - unit tests for the collector-stub JSON writer (collector-stub/json.c):
 * UTF-8 validation, string escaping and the segment line layout.
 */
#include "common.h"

#include <string.h>

#include "check.h"
#include "json.h"

static void check_escape(const char *in, const char *want)
{
    struct sw_json j = {0};
    CHECK_EQ(sw_json_put_string(&j, in, strlen(in)), 0);
    CHECK_STR(j.p, want);
    sw_json_free(&j);
}

int main(void)
{
    /* Well-formed: ASCII, 2-, 3- and 4-byte sequences, the largest code point. */
    CHECK(sw_json_utf8_valid("abc", 3));
    CHECK(sw_json_utf8_valid("\xc3\xa9", 2));
    CHECK(sw_json_utf8_valid("\xe2\x82\xac", 3));
    CHECK(sw_json_utf8_valid("\xf0\x9f\x98\x80", 4));
    CHECK(sw_json_utf8_valid("\xf4\x8f\xbf\xbf", 4));
    /* Ill-formed: lone continuation, overlongs, surrogates, above U+10FFFF, cut sequences. */
    CHECK(!sw_json_utf8_valid("\x80", 1));
    CHECK(!sw_json_utf8_valid("\xc0\x80", 2));
    CHECK(!sw_json_utf8_valid("\xe0\x80\x80", 3));
    CHECK(!sw_json_utf8_valid("\xf0\x80\x80\x80", 4));
    CHECK(!sw_json_utf8_valid("\xed\xa0\x80", 3));
    CHECK(!sw_json_utf8_valid("\xf4\x90\x80\x80", 4));
    CHECK(!sw_json_utf8_valid("\xe2\x82", 2));
    CHECK(!sw_json_utf8_valid("a\xff", 2));
    CHECK(!sw_json_utf8_valid("\xc3(", 2));

    check_escape("plain", "\"plain\"");
    check_escape("q\"b\\", "\"q\\\"b\\\\\"");
    check_escape("\n\t\x01\x1f\x7f", "\"\\u000a\\u0009\\u0001\\u001f\x7f\"");
    check_escape("\xc3\xa9/", "\"\xc3\xa9/\"");

    struct sw_json j = {0};
    CHECK_EQ(sw_json_put_string(&j, "\xff", 1), -EILSEQ);
    sw_json_free(&j);

    /* A minimal segment: every field is present, enums by name, int64 as strings. */
    Skywalking__V3__SpanObject span = SKYWALKING__V3__SPAN_OBJECT__INIT;
    span.parentspanid = -1;
    span.starttime = 9007199254740993LL; /* above 2^53: only a string keeps it exact */
    span.spantype = SKYWALKING__V3__SPAN_TYPE__Exit;
    span.spanlayer = 42; /* unknown to the descriptor: printed as a number */
    Skywalking__V3__SpanObject *spans[] = {&span};
    Skywalking__V3__SegmentObject seg = SKYWALKING__V3__SEGMENT_OBJECT__INIT;
    seg.traceid = "t";
    seg.n_spans = 1;
    seg.spans = spans;
    CHECK_EQ(sw_json_segment(&j, &seg), 0);
    CHECK_STR(j.p, "{\"traceId\":\"t\",\"traceSegmentId\":\"\",\"spans\":[{\"spanId\":0,"
                   "\"parentSpanId\":-1,\"startTime\":\"9007199254740993\",\"endTime\":\"0\","
                   "\"refs\":[],\"operationName\":\"\",\"peer\":\"\",\"spanType\":\"Exit\","
                   "\"spanLayer\":42,\"componentId\":0,\"isError\":false,\"tags\":[],"
                   "\"logs\":[],\"skipAnalysis\":false}],\"service\":\"\","
                   "\"serviceInstance\":\"\",\"isSizeLimited\":false}");

    /* An invalid string deep inside (a tag value) refuses the whole segment. */
    Skywalking__V3__KeyStringValuePair kv = SKYWALKING__V3__KEY_STRING_VALUE_PAIR__INIT;
    kv.key = "k";
    kv.value = "\xc0\xaf";
    Skywalking__V3__KeyStringValuePair *tags[] = {&kv};
    span.n_tags = 1;
    span.tags = tags;
    sw_json_reset(&j);
    CHECK_EQ(sw_json_segment(&j, &seg), -EILSEQ);

    /* Management lines lead with the method. */
    Skywalking__V3__InstancePingPkg ping = SKYWALKING__V3__INSTANCE_PING_PKG__INIT;
    ping.service = "s";
    ping.serviceinstance = "i";
    sw_json_reset(&j);
    CHECK_EQ(sw_json_ping(&j, "keepAlive", &ping), 0);
    CHECK_STR(j.p, "{\"method\":\"keepAlive\",\"service\":\"s\",\"serviceInstance\":\"i\","
                   "\"layer\":\"\"}");
    sw_json_free(&j);
    puts("test_stub_json: ok");
    return 0;
}
