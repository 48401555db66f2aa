/*
 * stub_smoke_client.c - a small grpc core client that drives collector-stub, one call per run.
 *
 *   stub_smoke_client [--gzip|--deflate] [--auth TOKEN] [--expect STATUS] TARGET CASE [TAG]
 *
 * CASE: collect (two segments on one stream), compat (the same on the package-less path),
 * insync (a SegmentCollection of two), props, keepalive, cds, unknown (an unknown method),
 * truncated (a cut protobuf message), badutf8 (a segment with an invalid UTF-8 string),
 * cancel (one segment, then the client cancels mid-stream), hold (one segment, then the
 * stream stays open for 5 s before the half-close), empty (a stream with no messages),
 * emptyunary (collectInSync half-closed without its message). TAG goes
 * into the ids (default "t"). STATUS is a grpc status name (default OK). Exit 0 when the call ends
 * with the expected status (and, on OK, a parseable Commands).
 *
 * Rules: loopback only, every wait is bounded by a 10 s deadline.
 */
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/Command.pb-c.h"
#include "language-agent/ConfigurationDiscoveryService.pb-c.h"
#include "language-agent/Tracing.pb-c.h"
#include "management/Management.pb-c.h"

struct packed {
    uint8_t *data;
    size_t len;
};

static const char *status_names[] = {
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

static const char *status_name(int s)
{
    if (s >= 0 && s < (int)(sizeof(status_names) / sizeof(status_names[0])))
        return status_names[s];
    return "?";
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        perror("malloc");
        exit(2);
    }
    return p;
}

#define PACK(kind, msg)                                                                            \
    do {                                                                                           \
        out->len = kind##__get_packed_size(msg);                                                   \
        out->data = xmalloc(out->len);                                                             \
        kind##__pack(msg, out->data);                                                              \
    } while (0)

/*
 * A two-span segment: an entry span with a cross-process ref, tags that need JSON escaping
 * and a log; an exit span with a peer. Ids are "<tag>-trace-<n>" / "<tag>-seg-<n>".
 */
static void pack_segment(struct packed *out, const char *tag, int n, const char *trace_override)
{
    char trace[128], seg[128];
    snprintf(trace, sizeof(trace), "%s-trace-%d", tag, n);
    snprintf(seg, sizeof(seg), "%s-seg-%d", tag, n);

    Skywalking__V3__SegmentReference ref = SKYWALKING__V3__SEGMENT_REFERENCE__INIT;
    ref.reftype = SKYWALKING__V3__REF_TYPE__CrossProcess;
    ref.traceid = trace;
    ref.parenttracesegmentid = "parent-seg";
    ref.parentspanid = 1;
    ref.parentservice = "frontend";
    ref.parentserviceinstance = "fe-1";
    ref.parentendpoint = "GET:/";
    ref.networkaddressusedatpeer = "backend:8080";
    Skywalking__V3__SegmentReference *refs[] = {&ref};

    Skywalking__V3__KeyStringValuePair t1 = SKYWALKING__V3__KEY_STRING_VALUE_PAIR__INIT;
    t1.key = "http.method";
    t1.value = "GET";
    Skywalking__V3__KeyStringValuePair t2 = SKYWALKING__V3__KEY_STRING_VALUE_PAIR__INIT;
    t2.key = "url";
    t2.value = "/a\"b\\c\nd\te\x01\xc3\xa9"; /* quote, backslash, LF, TAB, U+0001, e-acute */
    Skywalking__V3__KeyStringValuePair *tags[] = {&t1, &t2};

    Skywalking__V3__KeyStringValuePair ld = SKYWALKING__V3__KEY_STRING_VALUE_PAIR__INIT;
    ld.key = "event";
    ld.value = "error";
    Skywalking__V3__KeyStringValuePair *ldata[] = {&ld};
    Skywalking__V3__Log log = SKYWALKING__V3__LOG__INIT;
    log.time = 1724567890125LL;
    log.n_data = 1;
    log.data = ldata;
    Skywalking__V3__Log *logs[] = {&log};

    Skywalking__V3__SpanObject entry = SKYWALKING__V3__SPAN_OBJECT__INIT;
    entry.spanid = 0;
    entry.parentspanid = -1;
    entry.starttime = 1724567890123LL;
    entry.endtime = 1724567890456LL;
    entry.n_refs = 1;
    entry.refs = refs;
    entry.operationname = "GET:/api/orders";
    entry.spantype = SKYWALKING__V3__SPAN_TYPE__Entry;
    entry.spanlayer = SKYWALKING__V3__SPAN_LAYER__Http;
    entry.componentid = 49;
    entry.iserror = 1;
    entry.n_tags = 2;
    entry.tags = tags;
    entry.n_logs = 1;
    entry.logs = logs;

    Skywalking__V3__SpanObject exitspan = SKYWALKING__V3__SPAN_OBJECT__INIT;
    exitspan.spanid = 1;
    exitspan.parentspanid = 0;
    exitspan.starttime = 1724567890200LL;
    exitspan.endtime = 1724567890300LL;
    exitspan.operationname = "/db";
    exitspan.peer = "db:5432";
    exitspan.spantype = SKYWALKING__V3__SPAN_TYPE__Exit;
    exitspan.spanlayer = SKYWALKING__V3__SPAN_LAYER__Http;
    exitspan.componentid = 49;
    Skywalking__V3__SpanObject *spans[] = {&entry, &exitspan};

    Skywalking__V3__SegmentObject so = SKYWALKING__V3__SEGMENT_OBJECT__INIT;
    so.traceid = trace_override ? (char *)trace_override : trace;
    so.tracesegmentid = seg;
    so.n_spans = 2;
    so.spans = spans;
    so.service = "backend";
    so.serviceinstance = "be-1";
    PACK(skywalking__v3__segment_object, &so);
}

static int run_call(grpc_channel *ch, const char *method, const char *auth, struct packed *msgs,
                    size_t n, bool cancel, int hold_ms, grpc_status_code *status, char *detail,
                    size_t detail_len, bool *got_reply)
{
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
    gpr_timespec deadline =
        gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_seconds(10, GPR_TIMESPAN));
    grpc_slice mslice = grpc_slice_from_static_string(method);
    grpc_call *call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, mslice, NULL,
                                               deadline, NULL);
    grpc_metadata md;
    memset(&md, 0, sizeof(md));
    size_t nmd = 0;
    if (auth) {
        md.key = grpc_slice_from_static_string("authentication");
        md.value = grpc_slice_from_static_string(auth);
        nmd = 1;
    }

    grpc_op op[3];
    int tag_send = 1, tag_recv = 2;
    memset(op, 0, sizeof(op));
    op[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    op[0].data.send_initial_metadata.count = nmd;
    op[0].data.send_initial_metadata.metadata = nmd ? &md : NULL;
    if (grpc_call_start_batch(call, op, 1, &tag_send, NULL) != GRPC_CALL_OK)
        return -1;
    grpc_completion_queue_pluck(cq, &tag_send, deadline, NULL);

    /* The receive side runs as one batch: the stub answers only after the half-close. */
    grpc_metadata_array initial, trailing;
    grpc_metadata_array_init(&initial);
    grpc_metadata_array_init(&trailing);
    grpc_byte_buffer *reply = NULL;
    grpc_slice details = grpc_empty_slice();
    memset(op, 0, sizeof(op));
    op[0].op = GRPC_OP_RECV_INITIAL_METADATA;
    op[0].data.recv_initial_metadata.recv_initial_metadata = &initial;
    op[1].op = GRPC_OP_RECV_MESSAGE;
    op[1].data.recv_message.recv_message = &reply;
    op[2].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    op[2].data.recv_status_on_client.trailing_metadata = &trailing;
    op[2].data.recv_status_on_client.status = status;
    op[2].data.recv_status_on_client.status_details = &details;
    if (grpc_call_start_batch(call, op, 3, &tag_recv, NULL) != GRPC_CALL_OK)
        return -1;

    for (size_t i = 0; i < n; i++) {
        grpc_slice s = grpc_slice_from_copied_buffer((const char *)msgs[i].data, msgs[i].len);
        grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
        grpc_slice_unref(s);
        memset(op, 0, sizeof(op));
        op[0].op = GRPC_OP_SEND_MESSAGE;
        op[0].data.send_message.send_message = bb;
        if (grpc_call_start_batch(call, op, 1, &tag_send, NULL) == GRPC_CALL_OK)
            grpc_completion_queue_pluck(cq, &tag_send, deadline, NULL);
        grpc_byte_buffer_destroy(bb);
    }
    if (hold_ms > 0)
        gpr_sleep_until(
            gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_millis(hold_ms, GPR_TIMESPAN)));
    if (cancel) {
        /* Give the stub time to read what was sent, then drop the call mid-stream. */
        gpr_sleep_until(
            gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_millis(300, GPR_TIMESPAN)));
        grpc_call_cancel(call, NULL);
    } else {
        memset(op, 0, sizeof(op));
        op[0].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
        if (grpc_call_start_batch(call, op, 1, &tag_send, NULL) == GRPC_CALL_OK)
            grpc_completion_queue_pluck(cq, &tag_send, deadline, NULL);
    }
    grpc_event ev = grpc_completion_queue_pluck(cq, &tag_recv, deadline, NULL);
    if (ev.type != GRPC_OP_COMPLETE) {
        fprintf(stderr, "no status before the deadline\n");
        return -1;
    }
    snprintf(detail, detail_len, "%.*s", (int)GRPC_SLICE_LENGTH(details),
             (const char *)GRPC_SLICE_START_PTR(details));
    *got_reply = false;
    if (reply) {
        grpc_byte_buffer_reader r;
        if (grpc_byte_buffer_reader_init(&r, reply)) {
            grpc_slice all = grpc_byte_buffer_reader_readall(&r);
            Skywalking__V3__Commands *cmds = skywalking__v3__commands__unpack(
                NULL, GRPC_SLICE_LENGTH(all), GRPC_SLICE_START_PTR(all));
            if (cmds) {
                *got_reply = true;
                skywalking__v3__commands__free_unpacked(cmds, NULL);
            }
            grpc_slice_unref(all);
            grpc_byte_buffer_reader_destroy(&r);
        }
        grpc_byte_buffer_destroy(reply);
    }
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&initial);
    grpc_metadata_array_destroy(&trailing);
    grpc_call_unref(call);
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cq);
    return 0;
}

static void usage(void)
{
    fputs("usage: stub_smoke_client [--gzip|--deflate] [--auth TOKEN] [--expect STATUS] TARGET "
          "CASE [TAG]\n",
          stderr);
    exit(2);
}

int main(int argc, char **argv)
{
    int algo = GRPC_COMPRESS_NONE;
    const char *auth = NULL, *expect = "OK";
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i++) {
        if (strcmp(argv[i], "--gzip") == 0)
            algo = GRPC_COMPRESS_GZIP;
        else if (strcmp(argv[i], "--deflate") == 0)
            algo = GRPC_COMPRESS_DEFLATE;
        else if (strcmp(argv[i], "--auth") == 0 && i + 1 < argc)
            auth = argv[++i];
        else if (strcmp(argv[i], "--expect") == 0 && i + 1 < argc)
            expect = argv[++i];
        else
            usage();
    }
    if (argc - i < 2 || argc - i > 3)
        usage();
    const char *target = argv[i], *kase = argv[i + 1];
    const char *tag = argc - i == 3 ? argv[i + 2] : "t";

    struct packed msgs[2];
    size_t n = 0;
    bool cancel = false;
    int hold_ms = 0;
    const char *method = "/skywalking.v3.TraceSegmentReportService/collect";
    struct packed *out = &msgs[0];

    if (strcmp(kase, "collect") == 0 || strcmp(kase, "compat") == 0) {
        pack_segment(&msgs[0], tag, 1, NULL);
        pack_segment(&msgs[1], tag, 2, NULL);
        n = 2;
        if (strcmp(kase, "compat") == 0)
            method = "/TraceSegmentReportService/collect";
    } else if (strcmp(kase, "insync") == 0) {
        struct packed a, b;
        pack_segment(&a, tag, 1, NULL);
        pack_segment(&b, tag, 2, NULL);
        Skywalking__V3__SegmentObject *sa =
            skywalking__v3__segment_object__unpack(NULL, a.len, a.data);
        Skywalking__V3__SegmentObject *sb =
            skywalking__v3__segment_object__unpack(NULL, b.len, b.data);
        Skywalking__V3__SegmentObject *segs[] = {sa, sb};
        Skywalking__V3__SegmentCollection coll = SKYWALKING__V3__SEGMENT_COLLECTION__INIT;
        coll.n_segments = 2;
        coll.segments = segs;
        PACK(skywalking__v3__segment_collection, &coll);
        skywalking__v3__segment_object__free_unpacked(sa, NULL);
        skywalking__v3__segment_object__free_unpacked(sb, NULL);
        free(a.data);
        free(b.data);
        n = 1;
        method = "/skywalking.v3.TraceSegmentReportService/collectInSync";
    } else if (strcmp(kase, "props") == 0) {
        Skywalking__V3__KeyStringValuePair p1 = SKYWALKING__V3__KEY_STRING_VALUE_PAIR__INIT;
        p1.key = "language";
        p1.value = "c";
        Skywalking__V3__KeyStringValuePair *props[] = {&p1};
        Skywalking__V3__InstanceProperties m = SKYWALKING__V3__INSTANCE_PROPERTIES__INIT;
        m.service = "backend";
        m.serviceinstance = (char *)tag;
        m.n_properties = 1;
        m.properties = props;
        PACK(skywalking__v3__instance_properties, &m);
        n = 1;
        method = "/skywalking.v3.ManagementService/reportInstanceProperties";
    } else if (strcmp(kase, "keepalive") == 0) {
        Skywalking__V3__InstancePingPkg m = SKYWALKING__V3__INSTANCE_PING_PKG__INIT;
        m.service = "backend";
        m.serviceinstance = (char *)tag;
        PACK(skywalking__v3__instance_ping_pkg, &m);
        n = 1;
        method = "/skywalking.v3.ManagementService/keepAlive";
    } else if (strcmp(kase, "cds") == 0) {
        Skywalking__V3__ConfigurationSyncRequest m =
            SKYWALKING__V3__CONFIGURATION_SYNC_REQUEST__INIT;
        m.service = "backend";
        m.uuid = (char *)tag;
        PACK(skywalking__v3__configuration_sync_request, &m);
        n = 1;
        method = "/skywalking.v3.ConfigurationDiscoveryService/fetchConfigurations";
    } else if (strcmp(kase, "unknown") == 0) {
        pack_segment(&msgs[0], tag, 1, NULL);
        n = 1;
        method = "/skywalking.v3.NoSuchService/collect";
    } else if (strcmp(kase, "truncated") == 0) {
        pack_segment(&msgs[0], tag, 1, NULL);
        msgs[0].len /= 2; /* cut inside a length-delimited field */
        n = 1;
    } else if (strcmp(kase, "badutf8") == 0) {
        pack_segment(&msgs[0], tag, 1, "bad-\xff\xfe-utf8");
        n = 1;
    } else if (strcmp(kase, "cancel") == 0) {
        pack_segment(&msgs[0], tag, 1, NULL);
        n = 1;
        cancel = true;
    } else if (strcmp(kase, "hold") == 0) {
        pack_segment(&msgs[0], tag, 1, NULL);
        n = 1;
        hold_ms = 5000;
    } else if (strcmp(kase, "empty") == 0) {
        n = 0;
    } else if (strcmp(kase, "emptyunary") == 0) {
        n = 0;
        method = "/skywalking.v3.TraceSegmentReportService/collectInSync";
    } else {
        usage();
    }

    grpc_init();
    grpc_arg arg;
    memset(&arg, 0, sizeof(arg));
    arg.type = GRPC_ARG_INTEGER;
    arg.key = (char *)GRPC_COMPRESSION_CHANNEL_DEFAULT_ALGORITHM;
    arg.value.integer = algo;
    grpc_channel_args args = {1, &arg};
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    grpc_channel *ch = grpc_channel_create(target, creds, &args);
    grpc_channel_credentials_release(creds);

    grpc_status_code status = GRPC_STATUS_UNKNOWN;
    char detail[256] = "";
    bool got_reply = false;
    int rc = run_call(ch, method, auth, msgs, n, cancel, hold_ms, &status, detail, sizeof(detail),
                      &got_reply);
    grpc_channel_destroy(ch);
    grpc_shutdown();
    if (rc < 0)
        return 1;
    printf("%s %s status=%s detail=\"%s\" reply=%s\n", kase, method, status_name(status), detail,
           got_reply ? "Commands" : "none");
    if (strcmp(status_name(status), expect) != 0) {
        fprintf(stderr, "expected status %s, got %s\n", expect, status_name(status));
        return 1;
    }
    if (status == GRPC_STATUS_OK && !got_reply) {
        fprintf(stderr, "OK without a Commands reply\n");
        return 1;
    }
    for (size_t k = 0; k < n; k++)
        free(msgs[k].data);
    (void)out;
    return 0;
}
