/*
 * json.c - proto3 JSON lines for the collector-stub (see json.h for the format rules).
 *
 * Rules: hand-written, no JSON library. Every string goes through put_string(), which
 * validates UTF-8 and escapes '"', '\\' and all control characters below 0x20 as \u00XX.
 * The emitters return the first error and stop; the caller drops the half-built line.
 */
#include "common.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

void sw_json_free(struct sw_json *j)
{
    free(j->p);
    j->p = NULL;
    j->len = j->cap = 0;
    j->oom = false;
}

void sw_json_reset(struct sw_json *j)
{
    j->len = 0;
    j->oom = false;
    if (j->p)
        j->p[0] = '\0';
}

/* Make room for n more bytes plus a NUL. */
static bool reserve(struct sw_json *j, size_t n)
{
    if (j->oom)
        return false;
    if (j->len + n + 1 <= j->cap)
        return true;
    size_t cap = j->cap ? j->cap : 256;
    while (cap < j->len + n + 1)
        cap *= 2;
    char *p = realloc(j->p, cap);
    if (!p) {
        j->oom = true;
        return false;
    }
    j->p = p;
    j->cap = cap;
    return true;
}

static void put_raw(struct sw_json *j, const char *s, size_t n)
{
    if (!reserve(j, n))
        return;
    memcpy(j->p + j->len, s, n);
    j->len += n;
    j->p[j->len] = '\0';
}

void sw_json_append(struct sw_json *j, const char *s, size_t n)
{
    put_raw(j, s, n);
}

static void put_lit(struct sw_json *j, const char *s)
{
    put_raw(j, s, strlen(s));
}

bool sw_json_utf8_valid(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        unsigned cp, min;
        if (c >= 0xc2 && c <= 0xdf) {
            need = 1;
            cp = c & 0x1f;
            min = 0x80;
        } else if (c >= 0xe0 && c <= 0xef) {
            need = 2;
            cp = c & 0x0f;
            min = 0x800;
        } else if (c >= 0xf0 && c <= 0xf4) {
            need = 3;
            cp = c & 0x07;
            min = 0x10000;
        } else {
            return false; /* a continuation byte, an overlong lead (c0, c1) or f5..ff */
        }
        if (n - i <= need)
            return false;
        for (size_t k = 1; k <= need; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += need + 1;
    }
    return true;
}

int sw_json_put_string(struct sw_json *j, const char *s, size_t n)
{
    if (!sw_json_utf8_valid(s, n))
        return -EILSEQ;
    put_raw(j, "\"", 1);
    size_t run = 0; /* start of the pending run of bytes that need no escape */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        put_raw(j, s + run, i - run);
        run = i + 1;
        if (c == '"') {
            put_raw(j, "\\\"", 2);
        } else if (c == '\\') {
            put_raw(j, "\\\\", 2);
        } else {
            char esc[8];
            snprintf(esc, sizeof(esc), "\\u%04x", c);
            put_raw(j, esc, 6);
        }
    }
    put_raw(j, s + run, n - run);
    put_raw(j, "\"", 1);
    return 0; /* running out of memory is reported once, by the message emitter */
}

/* ,"name": -- every member but the first of an object starts with a comma. */
static void put_key(struct sw_json *j, const char *name, bool first)
{
    if (!first)
        put_raw(j, ",", 1);
    put_raw(j, "\"", 1);
    put_lit(j, name);
    put_raw(j, "\":", 2);
}

static int put_str_member(struct sw_json *j, const char *name, const char *v, bool first)
{
    put_key(j, name, first);
    return sw_json_put_string(j, v ? v : "", v ? strlen(v) : 0);
}

static void put_int_member(struct sw_json *j, const char *name, long long v, bool first)
{
    char num[32];
    put_key(j, name, first);
    snprintf(num, sizeof(num), "%lld", v);
    put_lit(j, num);
}

/* int64 values are JSON strings in the proto3 mapping. */
static void put_int64_member(struct sw_json *j, const char *name, int64_t v, bool first)
{
    char num[32];
    put_key(j, name, first);
    snprintf(num, sizeof(num), "\"%" PRId64 "\"", v);
    put_lit(j, num);
}

static void put_bool_member(struct sw_json *j, const char *name, protobuf_c_boolean v, bool first)
{
    put_key(j, name, first);
    put_lit(j, v ? "true" : "false");
}

/* Enums by their proto name; a number the descriptor does not know is printed as a number. */
static void put_enum_member(struct sw_json *j, const char *name, const ProtobufCEnumDescriptor *d,
                            int v, bool first)
{
    const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(d, v);
    if (!ev) {
        put_int_member(j, name, v, first);
        return;
    }
    put_key(j, name, first);
    put_raw(j, "\"", 1);
    put_lit(j, ev->name);
    put_raw(j, "\"", 1);
}

static int put_kv_array(struct sw_json *j, const char *name, size_t n,
                        Skywalking__V3__KeyStringValuePair *const *kv, bool first)
{
    put_key(j, name, first);
    put_raw(j, "[", 1);
    for (size_t i = 0; i < n; i++) {
        if (i)
            put_raw(j, ",", 1);
        put_raw(j, "{", 1);
        if (put_str_member(j, "key", kv[i]->key, true) < 0 ||
            put_str_member(j, "value", kv[i]->value, false) < 0)
            return -EILSEQ;
        put_raw(j, "}", 1);
    }
    put_raw(j, "]", 1);
    return 0;
}

static int put_ref(struct sw_json *j, const Skywalking__V3__SegmentReference *r)
{
    put_raw(j, "{", 1);
    put_enum_member(j, "refType", &skywalking__v3__ref_type__descriptor, r->reftype, true);
    if (put_str_member(j, "traceId", r->traceid, false) < 0 ||
        put_str_member(j, "parentTraceSegmentId", r->parenttracesegmentid, false) < 0)
        return -EILSEQ;
    put_int_member(j, "parentSpanId", r->parentspanid, false);
    if (put_str_member(j, "parentService", r->parentservice, false) < 0 ||
        put_str_member(j, "parentServiceInstance", r->parentserviceinstance, false) < 0 ||
        put_str_member(j, "parentEndpoint", r->parentendpoint, false) < 0 ||
        put_str_member(j, "networkAddressUsedAtPeer", r->networkaddressusedatpeer, false) < 0)
        return -EILSEQ;
    put_raw(j, "}", 1);
    return 0;
}

static int put_span(struct sw_json *j, const Skywalking__V3__SpanObject *s)
{
    put_raw(j, "{", 1);
    put_int_member(j, "spanId", s->spanid, true);
    put_int_member(j, "parentSpanId", s->parentspanid, false);
    put_int64_member(j, "startTime", s->starttime, false);
    put_int64_member(j, "endTime", s->endtime, false);
    put_key(j, "refs", false);
    put_raw(j, "[", 1);
    for (size_t i = 0; i < s->n_refs; i++) {
        if (i)
            put_raw(j, ",", 1);
        if (put_ref(j, s->refs[i]) < 0)
            return -EILSEQ;
    }
    put_raw(j, "]", 1);
    if (put_str_member(j, "operationName", s->operationname, false) < 0 ||
        put_str_member(j, "peer", s->peer, false) < 0)
        return -EILSEQ;
    put_enum_member(j, "spanType", &skywalking__v3__span_type__descriptor, s->spantype, false);
    put_enum_member(j, "spanLayer", &skywalking__v3__span_layer__descriptor, s->spanlayer, false);
    put_int_member(j, "componentId", s->componentid, false);
    put_bool_member(j, "isError", s->iserror, false);
    if (put_kv_array(j, "tags", s->n_tags, s->tags, false) < 0)
        return -EILSEQ;
    put_key(j, "logs", false);
    put_raw(j, "[", 1);
    for (size_t i = 0; i < s->n_logs; i++) {
        if (i)
            put_raw(j, ",", 1);
        put_raw(j, "{", 1);
        put_int64_member(j, "time", s->logs[i]->time, true);
        if (put_kv_array(j, "data", s->logs[i]->n_data, s->logs[i]->data, false) < 0)
            return -EILSEQ;
        put_raw(j, "}", 1);
    }
    put_raw(j, "]", 1);
    put_bool_member(j, "skipAnalysis", s->skipanalysis, false);
    put_raw(j, "}", 1);
    return 0;
}

static int done(struct sw_json *j, int rc)
{
    if (rc < 0)
        return rc;
    return j->oom ? -ENOMEM : 0;
}

int sw_json_segment(struct sw_json *j, const Skywalking__V3__SegmentObject *seg)
{
    put_raw(j, "{", 1);
    if (put_str_member(j, "traceId", seg->traceid, true) < 0 ||
        put_str_member(j, "traceSegmentId", seg->tracesegmentid, false) < 0)
        return -EILSEQ;
    put_key(j, "spans", false);
    put_raw(j, "[", 1);
    for (size_t i = 0; i < seg->n_spans; i++) {
        if (i)
            put_raw(j, ",", 1);
        if (put_span(j, seg->spans[i]) < 0)
            return -EILSEQ;
    }
    put_raw(j, "]", 1);
    if (put_str_member(j, "service", seg->service, false) < 0 ||
        put_str_member(j, "serviceInstance", seg->serviceinstance, false) < 0)
        return -EILSEQ;
    put_bool_member(j, "isSizeLimited", seg->issizelimited, false);
    put_raw(j, "}", 1);
    return done(j, 0);
}

static void put_method(struct sw_json *j, const char *method)
{
    put_raw(j, "{", 1);
    put_key(j, "method", true);
    put_raw(j, "\"", 1);
    put_lit(j, method);
    put_raw(j, "\"", 1);
}

int sw_json_instance_properties(struct sw_json *j, const char *method,
                                const Skywalking__V3__InstanceProperties *m)
{
    put_method(j, method);
    if (put_str_member(j, "service", m->service, false) < 0 ||
        put_str_member(j, "serviceInstance", m->serviceinstance, false) < 0 ||
        put_kv_array(j, "properties", m->n_properties, m->properties, false) < 0 ||
        put_str_member(j, "layer", m->layer, false) < 0)
        return -EILSEQ;
    put_raw(j, "}", 1);
    return done(j, 0);
}

int sw_json_ping(struct sw_json *j, const char *method, const Skywalking__V3__InstancePingPkg *m)
{
    put_method(j, method);
    if (put_str_member(j, "service", m->service, false) < 0 ||
        put_str_member(j, "serviceInstance", m->serviceinstance, false) < 0 ||
        put_str_member(j, "layer", m->layer, false) < 0)
        return -EILSEQ;
    put_raw(j, "}", 1);
    return done(j, 0);
}

static void put_double_member(struct sw_json *j, const char *name, double v, bool first)
{
    char num[40];
    put_key(j, name, first);
    if (isfinite(v))
        snprintf(num, sizeof(num), "%.17g", v);
    else
        snprintf(num, sizeof(num), "null");
    put_lit(j, num);
}

static int put_labels(struct sw_json *j, Skywalking__V3__Label *const *l, size_t n)
{
    put_key(j, "labels", false);
    put_raw(j, "[", 1);
    for (size_t i = 0; i < n; i++) {
        if (i)
            put_raw(j, ",", 1);
        put_raw(j, "{", 1);
        if (put_str_member(j, "name", l[i]->name, true) < 0 ||
            put_str_member(j, "value", l[i]->value, false) < 0)
            return -EILSEQ;
        put_raw(j, "}", 1);
    }
    put_raw(j, "]", 1);
    return 0;
}

int sw_json_meters(struct sw_json *j, const char *method, Skywalking__V3__MeterData *const *m,
                   size_t n)
{
    put_method(j, method);
    put_key(j, "meters", false);
    put_raw(j, "[", 1);
    for (size_t i = 0; i < n; i++) {
        const Skywalking__V3__MeterData *d = m[i];
        if (i)
            put_raw(j, ",", 1);
        put_raw(j, "{", 1);
        if (put_str_member(j, "service", d->service, true) < 0 ||
            put_str_member(j, "serviceInstance", d->serviceinstance, false) < 0)
            return -EILSEQ;
        put_int64_member(j, "timestamp", d->timestamp, false);
        if (d->metric_case == SKYWALKING__V3__METER_DATA__METRIC_SINGLE_VALUE && d->singlevalue) {
            const Skywalking__V3__MeterSingleValue *v = d->singlevalue;
            if (put_str_member(j, "name", v->name, false) < 0 ||
                put_labels(j, v->labels, v->n_labels) < 0)
                return -EILSEQ;
            put_double_member(j, "value", v->value, false);
        } else if (d->metric_case == SKYWALKING__V3__METER_DATA__METRIC_HISTOGRAM && d->histogram) {
            const Skywalking__V3__MeterHistogram *h = d->histogram;
            if (put_str_member(j, "name", h->name, false) < 0 ||
                put_labels(j, h->labels, h->n_labels) < 0)
                return -EILSEQ;
            put_key(j, "buckets", false);
            put_raw(j, "[", 1);
            for (size_t b = 0; b < h->n_values; b++) {
                if (b)
                    put_raw(j, ",", 1);
                put_raw(j, "{", 1);
                put_double_member(j, "bucket", h->values[b]->bucket, true);
                put_int64_member(j, "count", h->values[b]->count, false);
                put_bool_member(j, "isNegativeInfinity", h->values[b]->isnegativeinfinity, false);
                put_raw(j, "}", 1);
            }
            put_raw(j, "]", 1);
        }
        put_raw(j, "}", 1);
    }
    put_raw(j, "]}", 2);
    return done(j, 0);
}

int sw_json_cds(struct sw_json *j, const char *method,
                const Skywalking__V3__ConfigurationSyncRequest *m)
{
    put_method(j, method);
    if (put_str_member(j, "service", m->service, false) < 0 ||
        put_str_member(j, "uuid", m->uuid, false) < 0)
        return -EILSEQ;
    put_raw(j, "}", 1);
    return done(j, 0);
}

int sw_json_log(struct sw_json *j, const char *method, const Skywalking__V3__LogData *d)
{
    put_method(j, method);
    if (put_str_member(j, "service", d->service, false) < 0 ||
        put_str_member(j, "serviceInstance", d->serviceinstance, false) < 0 ||
        put_str_member(j, "endpoint", d->endpoint, false) < 0 ||
        put_str_member(j, "layer", d->layer, false) < 0)
        return -EILSEQ;
    put_int64_member(j, "timestamp", d->timestamp, false);
    const char *type = d->body ? d->body->type : "";
    const char *text = "";
    if (d->body && d->body->content_case == SKYWALKING__V3__LOG_DATA_BODY__CONTENT_TEXT &&
        d->body->text)
        text = d->body->text->text;
    else if (d->body && d->body->content_case == SKYWALKING__V3__LOG_DATA_BODY__CONTENT_JSON &&
             d->body->json)
        text = d->body->json->json;
    else if (d->body && d->body->content_case == SKYWALKING__V3__LOG_DATA_BODY__CONTENT_YAML &&
             d->body->yaml)
        text = d->body->yaml->yaml;
    if (put_str_member(j, "type", type, false) < 0 || put_str_member(j, "text", text, false) < 0)
        return -EILSEQ;
    put_key(j, "traceContext", false);
    if (d->tracecontext) {
        put_raw(j, "{", 1);
        if (put_str_member(j, "traceId", d->tracecontext->traceid, true) < 0 ||
            put_str_member(j, "traceSegmentId", d->tracecontext->tracesegmentid, false) < 0)
            return -EILSEQ;
        put_int_member(j, "spanId", d->tracecontext->spanid, false);
        put_raw(j, "}", 1);
    } else {
        put_lit(j, "null");
    }
    if (put_kv_array(j, "tags", d->tags ? d->tags->n_data : 0, d->tags ? d->tags->data : NULL,
                     false) < 0)
        return -EILSEQ;
    put_raw(j, "}", 1);
    return done(j, 0);
}
