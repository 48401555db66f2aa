/*
 * stub_client.c - a streaming TraceSegmentReportService/collect client for end-to-end tests of
 * collector-stub (and a demo source of a known multi-service trace).
 *
 *   stub_client --target HOST:PORT [--scenario NAME] [--count N] [--streams K] [--gzip]
 *               [--auth TOKEN] [--prefix P] [--base-time MS] [--deadline SEC]
 *               [--expect STATUS] [--hold MS] [--separate-channels] [--disconnect]
 *               [--sync] [--quiet]
 *
 * Scenarios (each stream sends its segments, half-closes and waits for the status):
 *   multi-trace (default)  N segments per stream, each its own trace (ids below)
 *   demo                   the known 3-service trace: curl exit -> nginx entry+exit -> python
 *                          entry (error, status 500, a log) + a python local span
 *   orphan                 one segment whose ref points at a segment that is never sent
 *   bad-protobuf           N good segments, then a truncated SegmentObject
 *   bad-utf8               N good segments, then one whose service is not valid UTF-8
 * --streams K runs K streams at once, one thread each, on one shared channel (multiplexed on
 * one HTTP/2 connection) or, with --separate-channels, on a channel (connection) each.
 * --hold MS keeps each stream open for MS after its last message before half-closing (less
 * if the server ends the call first).
 * --disconnect sends the segments without half-closing, then exits the process abruptly
 * (the connection drops mid-stream).
 * --sync sends each stream's segments as one SegmentCollection on collectInSync instead (one
 * call per stream); bad-protobuf's truncated SegmentObject then sits in the middle of the
 * collection (after N/2 good ones), framed with its own (cut) length, so only that segment
 * does not parse; `sent` counts the good segments of the collection.
 *
 * multi-trace ids, for stream k (0-based) and segment i (0-based): traceId P-t<k>-<i>,
 * traceSegmentId P-s<k>-<i>, service svc-<k>, serviceInstance inst-<k>@127.0.0.1; span 0 is an
 * Entry GET:/item/<i> (startTime T+i, endTime T+i+5, tags http.method=GET,
 * http.status_code=200), span 1 an Exit /backend/<i> to peer 127.0.0.1:<9000+k> (startTime
 * T+i+1, endTime T+i+4, componentId 49, layer Http).
 *
 * Output: one line per stream, `stream K: sent N status NAME (CODE) "details"`, then
 * `total: sent N, streams matching M/K`. Exit status 0 when every stream ended with the
 * expected status (default OK), 1 otherwise, 2 on a usage error.
 *
 * Rules: test code; every wait is bounded by the call deadline.
 */
#include "common.h"

#include <grpc/byte_buffer.h>
#include <grpc/compression.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/Common.pb-c.h"
#include "language-agent/Tracing.pb-c.h"

#define COLLECT_METHOD "/skywalking.v3.TraceSegmentReportService/collect"
#define SYNC_METHOD "/skywalking.v3.TraceSegmentReportService/collectInSync"
#define MAX_SPANS 3
#define MAX_KV 4

enum scenario { SC_MULTI, SC_DEMO, SC_ORPHAN, SC_BAD_PROTOBUF, SC_BAD_UTF8 };

struct options {
    const char *target;
    enum scenario scenario;
    long count;
    int streams;
    bool gzip;
    const char *auth;
    const char *prefix;
    int64_t base;
    int deadline_s;
    int expect;
    bool disconnect;
    bool quiet;
    long hold_ms;
    bool separate; /* one channel (connection) per stream instead of one shared */
    bool sync;     /* one SegmentCollection per stream on collectInSync */
};

/* A plain description of a segment; pack_segment() turns it into protobuf-c structs. */
struct kv {
    const char *k, *v;
};

struct span_spec {
    int id, parent;
    int64_t start, end;
    Skywalking__V3__SpanType type;
    Skywalking__V3__SpanLayer layer;
    int component;
    const char *op, *peer;
    bool error;
    const char *ref_seg; /* one CrossProcess ref when set */
    int ref_span;
    const char *ref_service, *ref_instance, *ref_endpoint, *ref_addr;
    struct kv tags[MAX_KV];
    int ntags;
    int64_t log_time; /* one log when nlog > 0 */
    struct kv log[MAX_KV];
    int nlog;
};

struct seg_spec {
    const char *trace, *seg, *service, *instance;
    struct span_spec spans[MAX_SPANS];
    int nspans;
};

/* The SegmentCollection being built with --sync: field 1 (segments) entries. */
struct collection {
    uint8_t *p;
    size_t len, cap;
    bool oom;
};

struct stream_result {
    long sent;
    grpc_status_code status;
    char details[256];
};

struct worker {
    const struct options *opt;
    grpc_channel *channel;
    int index;
    struct stream_result res;
};

static int64_t now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* Packs `s` into a malloc'd buffer (*len bytes). Returns NULL on allocation failure. */
static uint8_t *pack_segment(const struct seg_spec *s, size_t *len)
{
    Skywalking__V3__SegmentObject seg = SKYWALKING__V3__SEGMENT_OBJECT__INIT;
    Skywalking__V3__SpanObject spans[MAX_SPANS], *span_ptrs[MAX_SPANS];
    Skywalking__V3__SegmentReference refs[MAX_SPANS], *ref_ptrs[MAX_SPANS];
    Skywalking__V3__KeyStringValuePair tags[MAX_SPANS][MAX_KV], *tag_ptrs[MAX_SPANS][MAX_KV];
    Skywalking__V3__KeyStringValuePair data[MAX_SPANS][MAX_KV], *data_ptrs[MAX_SPANS][MAX_KV];
    Skywalking__V3__Log logs[MAX_SPANS], *log_ptrs[MAX_SPANS];

    seg.traceid = (char *)s->trace;
    seg.tracesegmentid = (char *)s->seg;
    seg.service = (char *)s->service;
    seg.serviceinstance = (char *)s->instance;
    seg.n_spans = (size_t)s->nspans;
    seg.spans = span_ptrs;
    for (int i = 0; i < s->nspans; i++) {
        const struct span_spec *ss = &s->spans[i];
        Skywalking__V3__SpanObject *sp = &spans[i];
        *sp = (Skywalking__V3__SpanObject)SKYWALKING__V3__SPAN_OBJECT__INIT;
        span_ptrs[i] = sp;
        sp->spanid = ss->id;
        sp->parentspanid = ss->parent;
        sp->starttime = ss->start;
        sp->endtime = ss->end;
        sp->operationname = (char *)ss->op;
        if (ss->peer)
            sp->peer = (char *)ss->peer;
        sp->spantype = ss->type;
        sp->spanlayer = ss->layer;
        sp->componentid = ss->component;
        sp->iserror = ss->error;
        if (ss->ref_seg) {
            Skywalking__V3__SegmentReference *r = &refs[i];
            *r = (Skywalking__V3__SegmentReference)SKYWALKING__V3__SEGMENT_REFERENCE__INIT;
            r->reftype = SKYWALKING__V3__REF_TYPE__CrossProcess;
            r->traceid = (char *)s->trace;
            r->parenttracesegmentid = (char *)ss->ref_seg;
            r->parentspanid = ss->ref_span;
            r->parentservice = (char *)ss->ref_service;
            r->parentserviceinstance = (char *)ss->ref_instance;
            r->parentendpoint = (char *)ss->ref_endpoint;
            r->networkaddressusedatpeer = (char *)ss->ref_addr;
            ref_ptrs[i] = r;
            sp->n_refs = 1;
            sp->refs = &ref_ptrs[i];
        }
        for (int t = 0; t < ss->ntags; t++) {
            tags[i][t] =
                (Skywalking__V3__KeyStringValuePair)SKYWALKING__V3__KEY_STRING_VALUE_PAIR__INIT;
            tags[i][t].key = (char *)ss->tags[t].k;
            tags[i][t].value = (char *)ss->tags[t].v;
            tag_ptrs[i][t] = &tags[i][t];
        }
        sp->n_tags = (size_t)ss->ntags;
        sp->tags = tag_ptrs[i];
        if (ss->nlog) {
            logs[i] = (Skywalking__V3__Log)SKYWALKING__V3__LOG__INIT;
            logs[i].time = ss->log_time;
            for (int t = 0; t < ss->nlog; t++) {
                data[i][t] =
                    (Skywalking__V3__KeyStringValuePair)SKYWALKING__V3__KEY_STRING_VALUE_PAIR__INIT;
                data[i][t].key = (char *)ss->log[t].k;
                data[i][t].value = (char *)ss->log[t].v;
                data_ptrs[i][t] = &data[i][t];
            }
            logs[i].n_data = (size_t)ss->nlog;
            logs[i].data = data_ptrs[i];
            log_ptrs[i] = &logs[i];
            sp->n_logs = 1;
            sp->logs = &log_ptrs[i];
        }
    }
    *len = skywalking__v3__segment_object__get_packed_size(&seg);
    uint8_t *buf = malloc(*len ? *len : 1);
    if (buf)
        skywalking__v3__segment_object__pack(&seg, buf);
    return buf;
}

/* Fills the i-th multi-trace segment of stream k; the strings live in `names` (4 x 96). */
static void multi_segment(const struct options *opt, int k, long i, char names[4][96],
                          char ops[2][64], char *peer, size_t peer_len, struct seg_spec *s)
{
    int64_t t = opt->base + i;
    snprintf(names[0], 96, "%s-t%d-%ld", opt->prefix, k, i);
    snprintf(names[1], 96, "%s-s%d-%ld", opt->prefix, k, i);
    snprintf(names[2], 96, "svc-%d", k);
    snprintf(names[3], 96, "inst-%d@127.0.0.1", k);
    snprintf(ops[0], 64, "GET:/item/%ld", i);
    snprintf(ops[1], 64, "/backend/%ld", i);
    snprintf(peer, peer_len, "127.0.0.1:%d", 9000 + k);
    *s = (struct seg_spec){
        .trace = names[0],
        .seg = names[1],
        .service = names[2],
        .instance = names[3],
        .nspans = 2,
        .spans =
            {
                {.id = 0,
                 .parent = -1,
                 .start = t,
                 .end = t + 5,
                 .type = SKYWALKING__V3__SPAN_TYPE__Entry,
                 .layer = SKYWALKING__V3__SPAN_LAYER__Http,
                 .component = 49,
                 .op = ops[0],
                 .tags = {{"http.method", "GET"}, {"http.status_code", "200"}},
                 .ntags = 2},
                {.id = 1,
                 .parent = 0,
                 .start = t + 1,
                 .end = t + 4,
                 .type = SKYWALKING__V3__SPAN_TYPE__Exit,
                 .layer = SKYWALKING__V3__SPAN_LAYER__Http,
                 .component = 49,
                 .op = ops[1],
                 .peer = peer},
            },
    };
}

/*
 * The known demo trace, sent in finish order (python, nginx, curl) like real agents would.
 * Times are relative to `b`.
 */
static int demo_segments(int64_t b, struct seg_spec *out)
{
    static const char *trace = "swagent-demo-trace-1";
    out[0] = (struct seg_spec){
        .trace = trace,
        .seg = "seg-python-1",
        .service = "python",
        .instance = "python@demo",
        .nspans = 2,
        .spans =
            {
                {.id = 1,
                 .parent = 0,
                 .start = b + 12,
                 .end = b + 30,
                 .type = SKYWALKING__V3__SPAN_TYPE__Local,
                 .op = "load_order"},
                {.id = 0,
                 .parent = -1,
                 .start = b + 9,
                 .end = b + 41,
                 .type = SKYWALKING__V3__SPAN_TYPE__Entry,
                 .layer = SKYWALKING__V3__SPAN_LAYER__Http,
                 .component = 49,
                 .op = "GET:/api/orders",
                 .error = true,
                 .ref_seg = "seg-nginx-1",
                 .ref_span = 1,
                 .ref_service = "nginx",
                 .ref_instance = "nginx@demo",
                 .ref_endpoint = "GET:/api/orders",
                 .ref_addr = "127.0.0.1:8081",
                 .tags = {{"http.method", "GET"},
                          {"url", "http://127.0.0.1:8081/api/orders"},
                          {"http.status_code", "500"}},
                 .ntags = 3,
                 .log_time = b + 30,
                 .log = {{"event", "error"},
                         {"error.kind", "KeyError"},
                         {"message", "order 42 not found"}},
                 .nlog = 3},
            },
    };
    out[1] = (struct seg_spec){
        .trace = trace,
        .seg = "seg-nginx-1",
        .service = "nginx",
        .instance = "nginx@demo",
        .nspans = 2,
        .spans =
            {
                {.id = 1,
                 .parent = 0,
                 .start = b + 5,
                 .end = b + 44,
                 .type = SKYWALKING__V3__SPAN_TYPE__Exit,
                 .layer = SKYWALKING__V3__SPAN_LAYER__Http,
                 .component = 49,
                 .op = "/api/orders",
                 .peer = "127.0.0.1:8081",
                 .tags = {{"http.method", "GET"}, {"http.status_code", "500"}},
                 .ntags = 2},
                {.id = 0,
                 .parent = -1,
                 .start = b + 2,
                 .end = b + 46,
                 .type = SKYWALKING__V3__SPAN_TYPE__Entry,
                 .layer = SKYWALKING__V3__SPAN_LAYER__Http,
                 .component = 49,
                 .op = "GET:/api/orders",
                 .ref_seg = "seg-curl-1",
                 .ref_span = 0,
                 .ref_service = "curl",
                 .ref_instance = "curl@demo",
                 .ref_endpoint = "/api/orders",
                 .ref_addr = "127.0.0.1:8080",
                 .tags = {{"http.method", "GET"}, {"http.status_code", "500"}},
                 .ntags = 2},
            },
    };
    out[2] = (struct seg_spec){
        .trace = trace,
        .seg = "seg-curl-1",
        .service = "curl",
        .instance = "curl@demo",
        .nspans = 1,
        .spans =
            {
                {.id = 0,
                 .parent = -1,
                 .start = b,
                 .end = b + 48,
                 .type = SKYWALKING__V3__SPAN_TYPE__Exit,
                 .layer = SKYWALKING__V3__SPAN_LAYER__Http,
                 .component = 49,
                 .op = "/api/orders",
                 .peer = "127.0.0.1:8080",
                 .tags = {{"url", "http://127.0.0.1:8080/api/orders"},
                          {"http.method", "GET"},
                          {"http.status_code", "500"}},
                 .ntags = 3},
            },
    };
    return 3;
}

/* A python entry whose parent (gateway segment seg-missing-1, span 1) is never sent. */
static void orphan_segment(int64_t b, struct seg_spec *out)
{
    *out = (struct seg_spec){
        .trace = "swagent-orphan-trace-1",
        .seg = "seg-orphan-1",
        .service = "python",
        .instance = "python@demo",
        .nspans = 1,
        .spans =
            {
                {.id = 0,
                 .parent = -1,
                 .start = b + 100,
                 .end = b + 107,
                 .type = SKYWALKING__V3__SPAN_TYPE__Entry,
                 .layer = SKYWALKING__V3__SPAN_LAYER__Http,
                 .component = 49,
                 .op = "GET:/health",
                 .ref_seg = "seg-missing-1",
                 .ref_span = 1,
                 .ref_service = "gateway",
                 .ref_instance = "gateway@demo",
                 .ref_endpoint = "GET:/health",
                 .ref_addr = "127.0.0.1:8090",
                 .tags = {{"http.status_code", "200"}},
                 .ntags = 1},
            },
    };
}

/* Waits until `tag` completes; other completions are recorded in *done (bit = tag). */
static bool wait_tag(grpc_completion_queue *cq, uintptr_t tag, unsigned *done, bool *oks,
                     gpr_timespec deadline)
{
    while (!(*done & (1u << tag))) {
        grpc_event ev = grpc_completion_queue_next(cq, deadline, NULL);
        if (ev.type != GRPC_OP_COMPLETE)
            return false;
        uintptr_t t = (uintptr_t)ev.tag;
        *done |= 1u << t;
        oks[t] = ev.success;
    }
    return oks[tag];
}

enum { TAG_SEND_MD = 1, TAG_STATUS, TAG_MSG, TAG_CLOSE };

/* Sends one packed message on `call`; returns false when the call is over. */
static bool send_bytes(grpc_call *call, grpc_completion_queue *cq, const uint8_t *buf, size_t len,
                       unsigned *done, bool *oks, gpr_timespec deadline)
{
    grpc_slice slice = grpc_slice_from_copied_buffer((const char *)buf, len);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&slice, 1);
    grpc_slice_unref(slice);
    grpc_op op = {.op = GRPC_OP_SEND_MESSAGE};
    op.data.send_message.send_message = bb;
    *done &= ~(1u << TAG_MSG);
    bool ok = grpc_call_start_batch(call, &op, 1, (void *)(uintptr_t)TAG_MSG, NULL) == GRPC_CALL_OK;
    if (ok)
        ok = wait_tag(cq, TAG_MSG, done, oks, deadline);
    grpc_byte_buffer_destroy(bb);
    return ok;
}

static bool send_segment(grpc_call *call, grpc_completion_queue *cq, const struct seg_spec *s,
                         size_t cut, unsigned *done, bool *oks, gpr_timespec deadline)
{
    size_t len;
    uint8_t *buf = pack_segment(s, &len);
    if (!buf)
        return false;
    bool ok = send_bytes(call, cq, buf, cut && cut < len ? cut : len, done, oks, deadline);
    free(buf);
    return ok;
}

static void coll_put(struct collection *c, const void *p, size_t n)
{
    if (c->oom)
        return;
    if (c->len + n > c->cap) {
        size_t cap = c->cap ? c->cap : 4096;
        while (cap < c->len + n)
            cap *= 2;
        uint8_t *np = realloc(c->p, cap);
        if (!np) {
            c->oom = true;
            return;
        }
        c->p = np;
        c->cap = cap;
    }
    memcpy(c->p + c->len, p, n);
    c->len += n;
}

/* Appends `s` (its first `cut` bytes when cut > 0) as one segments entry of the collection. */
static void coll_add(struct collection *c, const struct seg_spec *s, size_t cut)
{
    size_t len;
    uint8_t *buf = pack_segment(s, &len);
    if (!buf) {
        c->oom = true;
        return;
    }
    if (cut && cut < len)
        len = cut;
    uint8_t hdr[11] = {0x0a}; /* field 1, length-delimited */
    size_t h = 1, v = len;
    for (; v >= 0x80; v >>= 7)
        hdr[h++] = (uint8_t)(v | 0x80);
    hdr[h++] = (uint8_t)v;
    coll_put(c, hdr, h);
    coll_put(c, buf, len);
    free(buf);
}

/*
 * Sends segment `s` (cut to `cut` bytes when cut > 0) on the stream, or with --sync adds it to
 * the collection. Returns false when the call is over.
 */
static bool emit_segment(const struct options *opt, struct collection *coll, grpc_call *call,
                         grpc_completion_queue *cq, const struct seg_spec *s, size_t cut,
                         unsigned *done, bool *oks, gpr_timespec deadline)
{
    if (!opt->sync)
        return send_segment(call, cq, s, cut, done, oks, deadline);
    coll_add(coll, s, cut);
    return !coll->oom;
}

/* Runs one collect stream (or, with --sync, one collectInSync call) for worker `w`. */
static void run_stream(struct worker *w)
{
    const struct options *opt = w->opt;
    gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
                                         gpr_time_from_seconds(opt->deadline_s, GPR_TIMESPAN));
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    grpc_slice method = grpc_slice_from_static_string(opt->sync ? SYNC_METHOD : COLLECT_METHOD);
    grpc_call *call = grpc_channel_create_call(w->channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                               method, NULL, deadline, NULL);
    grpc_metadata md = {0};
    grpc_metadata_array initial_md, trailing_md;
    grpc_byte_buffer *reply = NULL;
    grpc_slice details = grpc_empty_slice();
    unsigned done = 0;
    bool oks[8] = {0};
    bool alive = true;
    struct collection coll = {0};
    long in_coll = 0; /* good segments added to the collection (--sync) */

    grpc_metadata_array_init(&initial_md);
    grpc_metadata_array_init(&trailing_md);
    w->res.status = GRPC_STATUS_UNKNOWN;

    grpc_op ops[3];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (opt->auth) {
        md.key = grpc_slice_from_static_string("authentication");
        md.value = grpc_slice_from_copied_string(opt->auth);
        ops[0].data.send_initial_metadata.count = 1;
        ops[0].data.send_initial_metadata.metadata = &md;
    }
    grpc_call_start_batch(call, ops, 1, (void *)(uintptr_t)TAG_SEND_MD, NULL);

    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[0].data.recv_initial_metadata.recv_initial_metadata = &initial_md;
    ops[1].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[1].data.recv_status_on_client.trailing_metadata = &trailing_md;
    ops[1].data.recv_status_on_client.status = &w->res.status;
    ops[1].data.recv_status_on_client.status_details = &details;
    grpc_call_start_batch(call, ops, 2, (void *)(uintptr_t)TAG_STATUS, NULL);

    /* The segments of this stream. */
    if (opt->scenario == SC_DEMO || opt->scenario == SC_ORPHAN) {
        struct seg_spec segs[3];
        int n = 1;
        if (opt->scenario == SC_DEMO)
            n = demo_segments(opt->base, segs);
        else
            orphan_segment(opt->base, &segs[0]);
        for (int i = 0; i < n && alive; i++)
            if ((alive = emit_segment(opt, &coll, call, cq, &segs[i], 0, &done, oks, deadline)))
                in_coll++;
    } else {
        /* With --sync the bad segment goes in the middle of the collection, else last. */
        long bad_at = opt->sync ? opt->count / 2 : opt->count;
        for (long i = 0; i <= opt->count && alive; i++) {
            if (i == bad_at && opt->scenario != SC_MULTI) {
                struct seg_spec s;
                char names[4][96], opnames[2][64], peer[32];
                multi_segment(opt, w->index, opt->count, names, opnames, peer, sizeof(peer), &s);
                size_t cut = 0;
                if (opt->scenario == SC_BAD_UTF8) {
                    s.service = "bad-\xff\xfe-\xc3";
                } else {
                    size_t full;
                    free(pack_segment(&s, &full));
                    cut = full - 3; /* inside the last string field: never a valid message */
                }
                /* The bad message is not counted in `sent`. */
                alive = emit_segment(opt, &coll, call, cq, &s, cut, &done, oks, deadline);
            }
            if (i == opt->count || !alive)
                break;
            struct seg_spec s;
            char names[4][96], opnames[2][64], peer[32];
            multi_segment(opt, w->index, i, names, opnames, peer, sizeof(peer), &s);
            if ((alive = emit_segment(opt, &coll, call, cq, &s, 0, &done, oks, deadline)))
                in_coll++;
        }
    }
    if (!opt->sync)
        w->res.sent = in_coll;
    else if (alive && (alive = send_bytes(call, cq, coll.p ? coll.p : (const uint8_t *)"", coll.len,
                                          &done, oks, deadline)))
        w->res.sent = in_coll;
    free(coll.p);

    if (opt->hold_ms) {
        /* Hold the stream open, but stop early when the server ends the call. */
        gpr_timespec until = gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
                                          gpr_time_from_millis(opt->hold_ms, GPR_TIMESPAN));
        if (gpr_time_cmp(until, deadline) > 0)
            until = deadline;
        wait_tag(cq, TAG_STATUS, &done, oks, until);
    }
    if (opt->disconnect) {
        /* Give the transport a moment to flush, then drop the connection mid-stream. */
        usleep(200 * 1000);
        printf("stream %d: sent %ld, disconnecting\n", w->index, w->res.sent);
        fflush(stdout);
        _exit(0);
    }

    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[1].op = GRPC_OP_RECV_MESSAGE;
    ops[1].data.recv_message.recv_message = &reply;
    grpc_call_start_batch(call, ops, 2, (void *)(uintptr_t)TAG_CLOSE, NULL);

    wait_tag(cq, TAG_SEND_MD, &done, oks, deadline);
    wait_tag(cq, TAG_CLOSE, &done, oks, deadline);
    if (!wait_tag(cq, TAG_STATUS, &done, oks, deadline) && !(done & (1u << TAG_STATUS))) {
        /* The deadline passed without a status: cancel and collect the completions. */
        grpc_call_cancel(call, NULL);
        gpr_timespec later =
            gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_seconds(5, GPR_TIMESPAN));
        wait_tag(cq, TAG_STATUS, &done, oks, later);
        wait_tag(cq, TAG_CLOSE, &done, oks, later);
    }

    char *d = grpc_slice_to_c_string(details);
    snprintf(w->res.details, sizeof(w->res.details), "%s", d);
    gpr_free(d);

    if (reply)
        grpc_byte_buffer_destroy(reply);
    grpc_slice_unref(details);
    if (opt->auth)
        grpc_slice_unref(md.value);
    grpc_metadata_array_destroy(&initial_md);
    grpc_metadata_array_destroy(&trailing_md);
    grpc_call_unref(call);
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cq);
}

static void *worker_main(void *arg)
{
    run_stream(arg);
    return NULL;
}

static const char *const status_names[] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

static const char *status_name(grpc_status_code s)
{
    return (unsigned)s < SW_ARRAY_LEN(status_names) ? status_names[s] : "?";
}

/* Accepts a status name (OK, PERMISSION_DENIED, ...) or its number. */
static int parse_status(const char *s)
{
    for (size_t i = 0; i < SW_ARRAY_LEN(status_names); i++)
        if (strcmp(s, status_names[i]) == 0)
            return (int)i;
    char *end;
    long v = strtol(s, &end, 10);
    return *s && !*end && v >= 0 && v < (long)SW_ARRAY_LEN(status_names) ? (int)v : -1;
}

static grpc_channel *open_channel(const struct options *opt, const grpc_channel_args *args)
{
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    grpc_channel *ch = grpc_channel_create(opt->target, creds, args);
    grpc_channel_credentials_release(creds);
    return ch;
}

static int usage(void)
{
    fputs("usage: stub_client --target HOST:PORT [--scenario multi-trace|demo|orphan|bad-protobuf|"
          "bad-utf8]\n"
          "                   [--count N] [--streams K] [--gzip] [--auth TOKEN] [--prefix P]\n"
          "                   [--base-time MS] [--deadline SEC] [--expect STATUS] [--hold MS]\n"
          "                   [--separate-channels] [--disconnect] [--sync] [--quiet]\n",
          stderr);
    return 2;
}

static bool parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || !*s || *end || v < min || v > max)
        return false;
    *out = (long)v;
    return true;
}

int main(int argc, char **argv)
{
    static char default_prefix[32];
    struct options opt = {.count = 1, .streams = 1, .deadline_s = 30, .expect = 0};
    long v;

    snprintf(default_prefix, sizeof(default_prefix), "c%ld", (long)getpid());
    opt.prefix = default_prefix;
    opt.base = now_ms();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--gzip") == 0) {
            opt.gzip = true;
        } else if (strcmp(a, "--disconnect") == 0) {
            opt.disconnect = true;
        } else if (strcmp(a, "--separate-channels") == 0) {
            opt.separate = true;
        } else if (strcmp(a, "--quiet") == 0) {
            opt.quiet = true;
        } else if (strcmp(a, "--sync") == 0) {
            opt.sync = true;
        } else if (!val) {
            return usage();
        } else if (strcmp(a, "--target") == 0) {
            opt.target = val, i++;
        } else if (strcmp(a, "--auth") == 0) {
            opt.auth = val, i++;
        } else if (strcmp(a, "--prefix") == 0) {
            opt.prefix = val, i++;
        } else if (strcmp(a, "--count") == 0 && parse_long(val, 0, 10000000, &v)) {
            opt.count = v, i++;
        } else if (strcmp(a, "--streams") == 0 && parse_long(val, 1, 256, &v)) {
            opt.streams = (int)v, i++;
        } else if (strcmp(a, "--hold") == 0 && parse_long(val, 0, 600000, &v)) {
            opt.hold_ms = v, i++;
        } else if (strcmp(a, "--deadline") == 0 && parse_long(val, 1, 3600, &v)) {
            opt.deadline_s = (int)v, i++;
        } else if (strcmp(a, "--base-time") == 0 && parse_long(val, 0, INT64_MAX / 2, &v)) {
            opt.base = v, i++;
        } else if (strcmp(a, "--expect") == 0 && (opt.expect = parse_status(val)) >= 0) {
            i++;
        } else if (strcmp(a, "--scenario") == 0) {
            i++;
            if (strcmp(val, "multi-trace") == 0)
                opt.scenario = SC_MULTI;
            else if (strcmp(val, "demo") == 0)
                opt.scenario = SC_DEMO;
            else if (strcmp(val, "orphan") == 0)
                opt.scenario = SC_ORPHAN;
            else if (strcmp(val, "bad-protobuf") == 0)
                opt.scenario = SC_BAD_PROTOBUF;
            else if (strcmp(val, "bad-utf8") == 0)
                opt.scenario = SC_BAD_UTF8;
            else
                return usage();
        } else {
            return usage();
        }
    }
    if (!opt.target)
        return usage();

    grpc_init();
    grpc_arg arg = {.type = GRPC_ARG_INTEGER,
                    .key = (char *)GRPC_COMPRESSION_CHANNEL_DEFAULT_ALGORITHM,
                    .value.integer = GRPC_COMPRESS_GZIP};
    grpc_channel_args args = {.num_args = opt.gzip ? 1 : 0, .args = &arg};
    grpc_channel *channel = open_channel(&opt, &args);
    struct worker *workers = calloc((size_t)opt.streams, sizeof(*workers));
    pthread_t *threads = calloc((size_t)opt.streams, sizeof(*threads));
    if (!workers || !threads) {
        fputs("stub_client: out of memory\n", stderr);
        return 1;
    }
    for (int k = 0; k < opt.streams; k++) {
        workers[k] = (struct worker){.opt = &opt, .channel = channel, .index = k};
        if (opt.separate && k > 0)
            workers[k].channel = open_channel(&opt, &args);
        if (opt.streams == 1)
            break;
        if (pthread_create(&threads[k], NULL, worker_main, &workers[k]) != 0) {
            fprintf(stderr, "stub_client: pthread_create failed\n");
            return 1;
        }
    }
    if (opt.streams == 1)
        run_stream(&workers[0]);
    else
        for (int k = 0; k < opt.streams; k++)
            pthread_join(threads[k], NULL);

    long total = 0;
    int matching = 0;
    for (int k = 0; k < opt.streams; k++) {
        struct stream_result *r = &workers[k].res;
        total += r->sent;
        matching += (int)r->status == opt.expect;
        if (!opt.quiet || (int)r->status != opt.expect)
            printf("stream %d: sent %ld status %s (%d) \"%s\"\n", k, r->sent,
                   status_name(r->status), (int)r->status, r->details);
    }
    printf("total: sent %ld, streams matching %d/%d\n", total, matching, opt.streams);
    fflush(stdout);

    for (int k = 1; opt.separate && k < opt.streams; k++)
        grpc_channel_destroy(workers[k].channel);
    grpc_channel_destroy(channel);
    grpc_shutdown();
    free(workers);
    free(threads);
    return matching == opt.streams ? 0 : 1;
}
