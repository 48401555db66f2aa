/*
 * server.c - the collector-stub gRPC server on the grpc core C API.
 *
 * Rules:
 * - One thread, one completion queue. New calls come from generic grpc_server_request_call()
 *   and are dispatched on the method path. Every call is a state machine (struct stub_call)
 *   driven by three tags: RECV (one message at a time), SEND (the reply and the status) and
 *   CLOSE (RECV_CLOSE_ON_SERVER, started first, reports cancellation). A call is freed when
 *   none of its batches is pending.
 * - Like OAP, collect (client streaming) answers with one empty Commands message and OK only
 *   after the client half-closes. Unary calls answer right after their one message.
 * - Refusals: an unknown method gets UNIMPLEMENTED; a missing or wrong `authentication`
 *   token (with --auth) PERMISSION_DENIED; a message that does not parse, or that holds a
 *   string which is not valid UTF-8, INVALID_ARGUMENT (nothing of that message is written;
 *   earlier messages of the same stream stay written). Each refusal and each call the
 *   client cancels or drops mid-stream gets one log line on stderr.
 * - --discard (opt->discard): segments (collect, collectInSync) are still unpacked, so a
 *   malformed message is refused and counted as before, but no JSON is made or written and the
 *   per-message compression line is not logged; the totals (segments, messages, refused
 *   messages, wire bytes) are logged at stop. This keeps the stub's CPU per segment small when
 *   it shares a core with what is measured (bench/run.sh). For the same reason a collectInSync
 *   collection is walked by pbwalk.c, one SegmentObject unpacked and freed at a time (the heap
 *   and cache footprint of one segment, not of 2,000), accepting exactly what protobuf-c's
 *   unpack of the whole collection accepts. --no-sync (opt->no_sync) answers UNIMPLEMENTED for
 *   collectInSync, as an OAP that lacks it, to test clients' fallback.
 * - --fail-calls (opt->fail_from, opt->fail_to): the segment messages with at least one byte
 *   are numbered as they arrive, and those in the range are answered UNAVAILABLE (an OAP
 *   that is overloaded, or a proxy that gives up) with nothing of them written, while empty
 *   ones (probes) are answered OK: how tests fail one call of a batch split into several, or
 *   every batch behind answered probes.
 * - --max-message (opt->max_message): a message above it, as received or once inflated, gets
 *   RESOURCE_EXHAUSTED with gRPC core's own wording for its limit ("Received message larger
 *   than max"), or grpc-java's with --java-wording (the OAP's: "gRPC message exceeds maximum
 *   size"), checked here rather than by the core so that it covers the inflated size of the
 *   messages this stub inflates itself.
 * - Compression: identity and gzip are enabled (as OAP); any other grpc-encoding gets
 *   UNIMPLEMENTED from the core. Per-message decompression in the core is turned off so the
 *   stub sees, and logs, which messages arrived gzip-compressed, and inflates them itself
 *   with zlib (grpc 1.51's byte buffer reader no longer does).
 */
#include "common.h"

#include "cds.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "json.h"
#include "pbwalk.h"
#include "profile.h"
#include "server.h"

#define STUB_MAX_MESSAGE (50 * 1024 * 1024) /* OAP's gRPC message limit */
#define STUB_PENDING_ACCEPTS 16             /* request_call()s kept outstanding */
#define STUB_GRACE_MS 2000                  /* shutdown waits this long before cancelling calls */

enum route_kind {
    R_COLLECT,
    R_COLLECT_SYNC,
    R_PROPERTIES,
    R_KEEPALIVE,
    R_CDS,
    R_PROF_POLL, /* ProfileTask (profile.c) */
    R_PROF_SNAPSHOT,
    R_PROF_FINISH,
    R_METER,       /* MeterReportService/collect: a stream of MeterData */
    R_METER_BATCH, /* MeterReportService/collectBatch: a stream of MeterDataCollection */
    R_LOG,         /* LogReportService/collect: a stream of LogData */
};

struct route {
    const char *path;
    enum route_kind kind;
    bool streaming; /* client streaming: reply after half-close */
    const char *name;
};

static const struct route routes[] = {
    {"/skywalking.v3.TraceSegmentReportService/collect", R_COLLECT, true, "collect"},
    {"/skywalking.v3.TraceSegmentReportService/collectInSync", R_COLLECT_SYNC, false,
     "collectInSync"},
    {"/skywalking.v3.ManagementService/reportInstanceProperties", R_PROPERTIES, false,
     "reportInstanceProperties"},
    {"/skywalking.v3.ManagementService/keepAlive", R_KEEPALIVE, false, "keepAlive"},
    {"/skywalking.v3.ConfigurationDiscoveryService/fetchConfigurations", R_CDS, false,
     "fetchConfigurations"},
    {"/skywalking.v3.ProfileTask/getProfileTaskCommands", R_PROF_POLL, false,
     "getProfileTaskCommands"},
    {"/skywalking.v3.ProfileTask/collectSnapshot", R_PROF_SNAPSHOT, true, "collectSnapshot"},
    {"/skywalking.v3.ProfileTask/reportTaskFinish", R_PROF_FINISH, false, "reportTaskFinish"},
    {"/skywalking.v3.MeterReportService/collect", R_METER, true, "meterCollect"},
    {"/skywalking.v3.MeterReportService/collectBatch", R_METER_BATCH, true, "collectBatch"},
    {"/skywalking.v3.LogReportService/collect", R_LOG, true, "logCollect"},
    /* Package-less compat paths (TracingCompat.proto, ManagementCompat.proto). */
    {"/TraceSegmentReportService/collect", R_COLLECT, true, "collect"},
    {"/TraceSegmentReportService/collectInSync", R_COLLECT_SYNC, false, "collectInSync"},
    {"/ManagementService/reportInstanceProperties", R_PROPERTIES, false,
     "reportInstanceProperties"},
    {"/ManagementService/keepAlive", R_KEEPALIVE, false, "keepAlive"},
};

enum tag_kind {
    T_NEW,
    T_RECV,
    T_SEND,
    T_CLOSE,
    T_SHUTDOWN,
};

struct stub_call;

struct tag {
    enum tag_kind kind;
    struct stub_call *call; /* NULL for T_SHUTDOWN */
};

struct stub_call {
    struct tag t_new, t_recv, t_send, t_close; /* the tags of this call's batches */
    grpc_call *call;                           /* owned; unref'd when the call is freed */
    grpc_call_details details;                 /* method path, from request_call */
    grpc_metadata_array md;                    /* request metadata, from request_call */
    grpc_byte_buffer *recv_buf;                /* target of RECV_MESSAGE */
    grpc_byte_buffer *send_buf;                /* the Commands reply while SEND is pending */
    uint8_t *reply;                            /* a non-empty Commands reply (profile.c) */
    size_t reply_len;
    grpc_slice status_details;                 /* status text while SEND is pending */
    int cancelled;                             /* set by RECV_CLOSE_ON_SERVER */
    int pending;                               /* batches started and not yet completed */
    bool status_sent;                          /* SEND_STATUS_FROM_SERVER was started */
    const struct route *route;                 /* NULL for an unknown method */
    unsigned long id;                          /* call number, for log lines */
    char path[160];                            /* method path, for log lines */
    size_t messages;                           /* messages received so far */
    uint8_t *answer;                           /* --cds: the Commands to answer, packed */
    size_t answer_len;
};

struct stub_server {
    const struct sw_stub_options *opt;
    grpc_server *server;
    grpc_completion_queue *cq;
    bool shutting_down; /* shutdown_and_notify was called: no new accepts */
    bool cq_shut;       /* grpc_completion_queue_shutdown was called: no new batches */
    bool cancelled_all; /* grpc_server_cancel_all_calls was called (shutdown grace is over) */
    int accepts;        /* outstanding request_call()s */
    int live;           /* struct stub_call objects allocated */
    unsigned long next_id;
    struct sw_json json;
    uint64_t segments;     /* SegmentObjects accepted (collect, collectInSync) */
    uint64_t seg_messages; /* collect / collectInSync messages accepted */
    uint64_t refused;      /* messages refused (do not parse, invalid UTF-8, ...) */
    uint64_t wire_bytes;   /* bytes of the segment messages as received (compressed or not) */
    uint64_t numbered;     /* segment messages with at least one byte (--fail-calls) */
    uint64_t failed;       /* of them, failed on purpose (--fail-calls) */
};

static volatile sig_atomic_t stop_requested;

void sw_stub_server_request_stop(void)
{
    stop_requested = 1;
}

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void logf_(const char *fmt, ...)
{
    va_list ap;
    fputs("collector-stub: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
}

static const char *status_name(grpc_status_code s)
{
    switch (s) {
    case GRPC_STATUS_OK:
        return "OK";
    case GRPC_STATUS_INVALID_ARGUMENT:
        return "INVALID_ARGUMENT";
    case GRPC_STATUS_PERMISSION_DENIED:
        return "PERMISSION_DENIED";
    case GRPC_STATUS_UNIMPLEMENTED:
        return "UNIMPLEMENTED";
    case GRPC_STATUS_UNAVAILABLE:
        return "UNAVAILABLE";
    case GRPC_STATUS_INTERNAL:
        return "INTERNAL";
    default:
        return "ERROR";
    }
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void free_call(struct stub_server *srv, struct stub_call *c)
{
    if (c->call)
        grpc_call_unref(c->call);
    if (c->recv_buf)
        grpc_byte_buffer_destroy(c->recv_buf);
    if (c->send_buf)
        grpc_byte_buffer_destroy(c->send_buf);
    free(c->answer);
    grpc_slice_unref(c->status_details);
    grpc_call_details_destroy(&c->details);
    grpc_metadata_array_destroy(&c->md);
    free(c->reply);
    free(c);
    srv->live--;
}

static void maybe_free(struct stub_server *srv, struct stub_call *c)
{
    if (c->pending == 0)
        free_call(srv, c);
}

/* Keep STUB_PENDING_ACCEPTS request_call()s outstanding so many clients can connect at once. */
static void accept_more(struct stub_server *srv)
{
    while (!srv->shutting_down && srv->accepts < STUB_PENDING_ACCEPTS) {
        struct stub_call *c = calloc(1, sizeof(*c));
        if (!c) {
            logf_("out of memory accepting calls");
            return;
        }
        c->t_new = (struct tag){T_NEW, c};
        c->t_recv = (struct tag){T_RECV, c};
        c->t_send = (struct tag){T_SEND, c};
        c->t_close = (struct tag){T_CLOSE, c};
        c->status_details = grpc_empty_slice();
        grpc_call_details_init(&c->details);
        grpc_metadata_array_init(&c->md);
        srv->live++;
        grpc_call_error e = grpc_server_request_call(srv->server, &c->call, &c->details, &c->md,
                                                     srv->cq, srv->cq, &c->t_new);
        if (e != GRPC_CALL_OK) {
            logf_("grpc_server_request_call: %s", grpc_call_error_to_string(e));
            free_call(srv, c);
            return;
        }
        srv->accepts++;
    }
}

static bool start_batch(struct stub_server *srv, struct stub_call *c, const grpc_op *ops, size_t n,
                        struct tag *t)
{
    if (srv->cq_shut)
        return false;
    grpc_call_error e = grpc_call_start_batch(c->call, ops, n, t, NULL);
    if (e != GRPC_CALL_OK) {
        logf_("call %lu %s: grpc_call_start_batch: %s", c->id, c->path,
              grpc_call_error_to_string(e));
        return false;
    }
    c->pending++;
    return true;
}

/*
 * Send initial metadata, on OK an empty Commands message, and the status. This ends the
 * server's side of the call; only the CLOSE (and maybe a RECV) completion remain.
 */
static void finish(struct stub_server *srv, struct stub_call *c, grpc_status_code status,
                   const char *detail)
{
    grpc_op ops[3];
    size_t n = 0;

    if (c->status_sent)
        return;
    if (status != GRPC_STATUS_OK)
        logf_("call %lu %s: %s: %s", c->id, c->path, status_name(status), detail);
    memset(ops, 0, sizeof(ops));
    ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
    n++;
    if (status == GRPC_STATUS_OK) {
        /* The empty Commands message packs to zero bytes. */
        Skywalking__V3__Commands cmds = SKYWALKING__V3__COMMANDS__INIT;
        uint8_t packed[16];
        size_t len = skywalking__v3__commands__pack(&cmds, packed);
        grpc_slice s =
            c->answer ? grpc_slice_from_copied_buffer((const char *)c->answer, c->answer_len)
            : c->reply ? grpc_slice_from_copied_buffer((const char *)c->reply, c->reply_len)
                       : grpc_slice_from_copied_buffer((const char *)packed, len);
        free(c->reply);
        c->reply = NULL;
        c->send_buf = grpc_raw_byte_buffer_create(&s, 1);
        grpc_slice_unref(s);
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n].data.send_message.send_message = c->send_buf;
        n++;
    }
    grpc_slice_unref(c->status_details);
    c->status_details = grpc_slice_from_copied_string(detail);
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = status;
    ops[n].data.send_status_from_server.status_details = &c->status_details;
    n++;
    c->status_sent = true;
    start_batch(srv, c, ops, n, &c->t_send);
}

static void start_recv(struct stub_server *srv, struct stub_call *c)
{
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &c->recv_buf;
    start_batch(srv, c, &op, 1, &c->t_recv);
}

/* Write the buffered JSON text as one line and flush it. */
static int emit_line(FILE *f, struct sw_json *j)
{
    if (!f)
        return 0;
    if (fwrite(j->p, 1, j->len, f) != j->len || fputc('\n', f) == EOF || fflush(f) != 0)
        return -EIO;
    return 0;
}

/*
 * Decode one request message and write its JSON line(s). Returns OK or the status to end
 * the call with; *detail then says why.
 */
static grpc_status_code handle_message(struct stub_server *srv, struct stub_call *c,
                                       const uint8_t *data, size_t len, const char **detail)
{
    struct sw_json *j = &srv->json;
    FILE *out = srv->opt->management;
    size_t nseg = 0; /* segments in the message (collect, collectInSync) */
    int rc = 0;

    sw_json_reset(j);
    if (srv->opt->discard && (c->route->kind == R_COLLECT || c->route->kind == R_COLLECT_SYNC)) {
        /* Parsed (so malformed data is still refused and counted), never formatted. */
        size_t n = 0;
        if (c->route->kind == R_COLLECT) {
            Skywalking__V3__SegmentObject *m =
                skywalking__v3__segment_object__unpack(NULL, len, data);
            if (!m) {
                *detail = "cannot parse SegmentObject";
                return GRPC_STATUS_INVALID_ARGUMENT;
            }
            n = 1;
            skywalking__v3__segment_object__free_unpacked(m, NULL);
        } else if (sw_pbwalk_segments(data, len, &n) != 0) {
            /* One segment unpacked at a time: the cache footprint of one, not of 2,000. */
            *detail = "cannot parse SegmentCollection";
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
        srv->segments += n;
        srv->seg_messages++;
        return GRPC_STATUS_OK;
    }
    switch (c->route->kind) {
    case R_COLLECT: {
        Skywalking__V3__SegmentObject *m = skywalking__v3__segment_object__unpack(NULL, len, data);
        if (!m) {
            *detail = "cannot parse SegmentObject";
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
        rc = sw_json_segment(j, m);
        skywalking__v3__segment_object__free_unpacked(m, NULL);
        out = srv->opt->segments;
        nseg = 1;
        break;
    }
    case R_COLLECT_SYNC: {
        Skywalking__V3__SegmentCollection *m =
            skywalking__v3__segment_collection__unpack(NULL, len, data);
        if (!m) {
            *detail = "cannot parse SegmentCollection";
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
        /* All segments are rendered before any is written, so the call is all or nothing. */
        for (size_t i = 0; i < m->n_segments && rc == 0; i++) {
            if (i)
                sw_json_append(j, "\n", 1);
            rc = sw_json_segment(j, m->segments[i]);
        }
        nseg = m->n_segments;
        skywalking__v3__segment_collection__free_unpacked(m, NULL);
        out = srv->opt->segments;
        if (rc == 0 && j->len == 0) {
            srv->seg_messages++;
            return GRPC_STATUS_OK; /* an empty collection writes nothing */
        }
        break;
    }
    case R_PROPERTIES: {
        Skywalking__V3__InstanceProperties *m =
            skywalking__v3__instance_properties__unpack(NULL, len, data);
        if (!m) {
            *detail = "cannot parse InstanceProperties";
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
        rc = sw_json_instance_properties(j, c->route->name, m);
        skywalking__v3__instance_properties__free_unpacked(m, NULL);
        break;
    }
    case R_KEEPALIVE: {
        Skywalking__V3__InstancePingPkg *m =
            skywalking__v3__instance_ping_pkg__unpack(NULL, len, data);
        if (!m) {
            *detail = "cannot parse InstancePingPkg";
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
        rc = sw_json_ping(j, c->route->name, m);
        skywalking__v3__instance_ping_pkg__free_unpacked(m, NULL);
        break;
    }
    case R_PROF_POLL:
    case R_PROF_SNAPSHOT:
    case R_PROF_FINISH: {
        FILE *pf = srv->opt->profile;
        int prc = c->route->kind == R_PROF_POLL
                      ? sw_stub_prof_poll(data, len, pf, &c->reply, &c->reply_len)
                  : c->route->kind == R_PROF_SNAPSHOT ? sw_stub_prof_snapshot(data, len, pf)
                                                      : sw_stub_prof_finish(data, len, pf);
        if (prc != 0) {
            *detail = "cannot parse the ProfileTask message";
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
        return GRPC_STATUS_OK;
    }
    case R_CDS: {
        Skywalking__V3__ConfigurationSyncRequest *m =
            skywalking__v3__configuration_sync_request__unpack(NULL, len, data);
        if (!m) {
            *detail = "cannot parse ConfigurationSyncRequest";
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
        rc = sw_json_cds(j, c->route->name, m);
        if (srv->opt->cds_file && !c->answer &&
            stub_cds_answer(srv->opt->cds_file, m->uuid, &c->answer, &c->answer_len) != 0)
            c->answer = NULL;
        skywalking__v3__configuration_sync_request__free_unpacked(m, NULL);
        break;
    }
    case R_METER: {
        Skywalking__V3__MeterData *m = skywalking__v3__meter_data__unpack(NULL, len, data);
        if (!m) {
            *detail = "cannot parse MeterData";
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
        rc = sw_json_meters(j, c->route->name, &m, 1);
        skywalking__v3__meter_data__free_unpacked(m, NULL);
        if (srv->opt->meters)
            out = srv->opt->meters;
        break;
    }
    case R_METER_BATCH: {
        Skywalking__V3__MeterDataCollection *m =
            skywalking__v3__meter_data_collection__unpack(NULL, len, data);
        if (!m) {
            *detail = "cannot parse MeterDataCollection";
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
        rc = sw_json_meters(j, c->route->name, m->meterdata, m->n_meterdata);
        skywalking__v3__meter_data_collection__free_unpacked(m, NULL);
        if (srv->opt->meters)
            out = srv->opt->meters;
        break;
    }
    case R_LOG: {
        Skywalking__V3__LogData *m = skywalking__v3__log_data__unpack(NULL, len, data);
        if (!m) {
            *detail = "cannot parse LogData";
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
        rc = sw_json_log(j, c->route->name, m);
        skywalking__v3__log_data__free_unpacked(m, NULL);
        if (srv->opt->logs)
            out = srv->opt->logs;
        break;
    }
    }
    if (rc == -EILSEQ) {
        *detail = "a string field is not valid UTF-8";
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    if (rc < 0) {
        *detail = "out of memory";
        return GRPC_STATUS_RESOURCE_EXHAUSTED;
    }
    if (emit_line(out, j) < 0) {
        *detail = "cannot write the output file";
        return GRPC_STATUS_INTERNAL;
    }
    if (c->route->kind == R_COLLECT || c->route->kind == R_COLLECT_SYNC) {
        srv->segments += nseg;
        srv->seg_messages++;
    }
    return GRPC_STATUS_OK;
}

static bool slice_eq(grpc_slice s, const char *text)
{
    size_t n = strlen(text);
    return GRPC_SLICE_LENGTH(s) == n && memcmp(GRPC_SLICE_START_PTR(s), text, n) == 0;
}

/* With --auth, the call needs `authentication: <token>` in its metadata (as OAP). */
static bool authorized(const struct stub_server *srv, const struct stub_call *c)
{
    if (!srv->opt->auth)
        return true;
    for (size_t i = 0; i < c->md.count; i++) {
        if (slice_eq(c->md.metadata[i].key, "authentication"))
            return slice_eq(c->md.metadata[i].value, srv->opt->auth);
    }
    return false;
}

static void on_new(struct stub_server *srv, struct stub_call *c, int ok)
{
    srv->accepts--;
    if (!ok) {
        /* The server is shutting down and returns the unused request_call(). */
        free_call(srv, c);
        return;
    }
    accept_more(srv);
    c->id = ++srv->next_id;
    size_t n = GRPC_SLICE_LENGTH(c->details.method);
    if (n >= sizeof(c->path))
        n = sizeof(c->path) - 1;
    memcpy(c->path, GRPC_SLICE_START_PTR(c->details.method), n);
    c->path[n] = '\0';

    /* RECV_CLOSE_ON_SERVER first: it completes when the call ends and says if it was cancelled. */
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &c->cancelled;
    if (!start_batch(srv, c, &op, 1, &c->t_close)) {
        maybe_free(srv, c);
        return;
    }
    for (size_t i = 0; i < SW_ARRAY_LEN(routes); i++) {
        if (slice_eq(c->details.method, routes[i].path)) {
            c->route = &routes[i];
            break;
        }
    }
    if (!c->route) {
        finish(srv, c, GRPC_STATUS_UNIMPLEMENTED, "unknown method");
        return;
    }
    if (c->route->kind == R_COLLECT_SYNC && srv->opt->no_sync) {
        finish(srv, c, GRPC_STATUS_UNIMPLEMENTED, "collectInSync is disabled (--no-sync)");
        return;
    }
    if (!authorized(srv, c)) {
        finish(srv, c, GRPC_STATUS_PERMISSION_DENIED, "missing or wrong authentication token");
        return;
    }
    start_recv(srv, c);
}

/*
 * Inflate a gzip (or zlib/deflate) message body of at most STUB_MAX_MESSAGE bytes.
 * Returns a new slice the caller unrefs, or an empty slice with *ok false.
 */
static grpc_slice inflate_slice(grpc_slice in, grpc_compression_algorithm algo, bool *ok)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    *ok = false;
    /* 16 + MAX_WBITS reads a gzip wrapper; plain MAX_WBITS a zlib one (grpc "deflate"). */
    if (inflateInit2(&z, algo == GRPC_COMPRESS_GZIP ? 16 + MAX_WBITS : MAX_WBITS) != Z_OK)
        return grpc_empty_slice();
    size_t cap = GRPC_SLICE_LENGTH(in) * 4 + 256, len = 0;
    uint8_t *out = malloc(cap);
    z.next_in = GRPC_SLICE_START_PTR(in);
    z.avail_in = (uInt)GRPC_SLICE_LENGTH(in);
    int zr = Z_OK;
    while (out && zr == Z_OK) {
        if (len == cap) {
            if (cap >= STUB_MAX_MESSAGE)
                break;
            cap = cap * 2 > STUB_MAX_MESSAGE ? STUB_MAX_MESSAGE : cap * 2;
            uint8_t *p = realloc(out, cap);
            if (!p)
                break;
            out = p;
        }
        z.next_out = out + len;
        z.avail_out = (uInt)(cap - len);
        zr = inflate(&z, Z_NO_FLUSH);
        len = cap - z.avail_out;
        if (zr == Z_BUF_ERROR && z.avail_out != 0)
            break; /* truncated input */
        if (zr == Z_BUF_ERROR)
            zr = Z_OK;
    }
    inflateEnd(&z);
    if (zr != Z_STREAM_END || z.avail_in != 0) {
        free(out);
        return grpc_empty_slice();
    }
    *ok = true;
    /* The slice takes the buffer (no second copy of up to STUB_MAX_MESSAGE bytes). */
    return len ? grpc_slice_new(out, len, free) : (free(out), grpc_empty_slice());
}

static void on_recv(struct stub_server *srv, struct stub_call *c, int ok)
{
    c->pending--;
    if (!ok || c->status_sent) {
        /* The call failed underneath us (client gone); the CLOSE completion logs it. */
        maybe_free(srv, c);
        return;
    }
    if (!c->recv_buf) {
        /* The client half-closed. */
        if (c->route->streaming || c->messages > 0)
            finish(srv, c, GRPC_STATUS_OK, "");
        else
            finish(srv, c, GRPC_STATUS_INTERNAL, "half-closed without a request message");
        maybe_free(srv, c);
        return;
    }

    grpc_compression_algorithm algo =
        c->recv_buf->type == GRPC_BB_RAW ? c->recv_buf->data.raw.compression : GRPC_COMPRESS_NONE;
    grpc_byte_buffer_reader reader;
    if (!grpc_byte_buffer_reader_init(&reader, c->recv_buf)) {
        grpc_byte_buffer_destroy(c->recv_buf);
        c->recv_buf = NULL;
        finish(srv, c, GRPC_STATUS_INVALID_ARGUMENT, "cannot decompress the message");
        maybe_free(srv, c);
        return;
    }
    grpc_slice s = grpc_byte_buffer_reader_readall(&reader);
    grpc_byte_buffer_reader_destroy(&reader);
    grpc_byte_buffer_destroy(c->recv_buf);
    c->recv_buf = NULL;
    c->messages++;
    bool seg_route = c->route->kind == R_COLLECT || c->route->kind == R_COLLECT_SYNC;
    size_t wire_len = GRPC_SLICE_LENGTH(s);
    if (seg_route)
        srv->wire_bytes += wire_len;
    if (algo != GRPC_COMPRESS_NONE) {
        bool inflated;
        grpc_slice plain = inflate_slice(s, algo, &inflated);
        size_t wire = GRPC_SLICE_LENGTH(s);
        grpc_slice_unref(s);
        s = plain;
        if (!inflated) {
            finish(srv, c, GRPC_STATUS_INTERNAL, "cannot decompress the message");
            maybe_free(srv, c);
            return;
        }
        if (!(srv->opt->discard && seg_route))
            logf_("call %lu %s: message %zu arrived %s-compressed (%zu bytes, %zu inflated)", c->id,
                  c->path, c->messages, algo == GRPC_COMPRESS_GZIP ? "gzip" : "deflate", wire,
                  (size_t)GRPC_SLICE_LENGTH(s));
    }

    const char *detail = "";
    char why[96];
    grpc_status_code st = GRPC_STATUS_OK;
    size_t max = srv->opt->max_message, got = GRPC_SLICE_LENGTH(s);
    if (max && (got > max || wire_len > max)) {
        size_t n = got > wire_len ? got : wire_len;
        if (srv->opt->java_wording)
            snprintf(why, sizeof(why), "gRPC message exceeds maximum size %zu: %zu", max, n);
        else
            snprintf(why, sizeof(why), "Received message larger than max (%zu vs. %zu)", n, max);
        detail = why;
        st = GRPC_STATUS_RESOURCE_EXHAUSTED;
    } else if (seg_route && GRPC_SLICE_LENGTH(s) > 0) {
        uint64_t k = ++srv->numbered;
        if (srv->opt->fail_from && k >= srv->opt->fail_from && k <= srv->opt->fail_to) {
            snprintf(why, sizeof(why), "segment message %llu failed on purpose (--fail-calls)",
                     (unsigned long long)k);
            detail = why;
            st = GRPC_STATUS_UNAVAILABLE;
            srv->failed++;
        }
    }
    if (st == GRPC_STATUS_OK) {
        st = handle_message(srv, c, GRPC_SLICE_START_PTR(s), GRPC_SLICE_LENGTH(s), &detail);
        if (st != GRPC_STATUS_OK && seg_route)
            srv->refused++;
    }
    grpc_slice_unref(s);
    if (st != GRPC_STATUS_OK)
        finish(srv, c, st, detail);
    else if (c->route->streaming)
        start_recv(srv, c);
    else
        finish(srv, c, GRPC_STATUS_OK, "");
    maybe_free(srv, c);
}

static void on_send(struct stub_server *srv, struct stub_call *c, int ok)
{
    c->pending--;
    if (c->send_buf) {
        grpc_byte_buffer_destroy(c->send_buf);
        c->send_buf = NULL;
    }
    maybe_free(srv, c);
}

static void on_close(struct stub_server *srv, struct stub_call *c, int ok)
{
    c->pending--;
    if (c->cancelled && srv->cancelled_all)
        logf_("call %lu %s: cancelled by the shutdown after %zu message(s)", c->id, c->path,
              c->messages);
    else if (c->cancelled)
        logf_("call %lu %s: cancelled or disconnected by the client after %zu message(s)", c->id,
              c->path, c->messages);
    maybe_free(srv, c);
}

static int write_port_file(const char *path, int port)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -errno;
    fprintf(f, "%d\n", port);
    if (fclose(f) != 0) {
        unlink(tmp);
        return -EIO;
    }
    /* rename() makes the file appear complete, so a polling test never reads half of it. */
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return -e;
    }
    return 0;
}

/* Split "host:port" (or "[v6]:port") for the "listening on" line. */
static void print_listening(const char *listen, int port)
{
    const char *colon = strrchr(listen, ':');
    int hostlen = colon ? (int)(colon - listen) : (int)strlen(listen);
    fprintf(stderr, "listening on %.*s:%d\n", hostlen, listen, port);
    fflush(stderr);
}

/* Reads a whole PEM file (at most 1 MiB) into a NUL-terminated heap buffer; NULL on error. */
static char *read_pem(const char *path)
{
    FILE *f = fopen(path, "re");
    char *buf;
    size_t n;

    if (!f) {
        logf_("cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    buf = malloc((1u << 20) + 1);
    n = buf ? fread(buf, 1, 1u << 20, f) : 0;
    fclose(f);
    if (!buf || n == 0) {
        free(buf);
        logf_("cannot read %s", path);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

/*
 * Insecure credentials, or TLS with --tls-cert/--tls-key; with --tls-client-ca the client must
 * present a certificate signed by that CA (mTLS), else the handshake fails.
 */
static grpc_server_credentials *make_server_creds(const struct sw_stub_options *opt)
{
    grpc_ssl_pem_key_cert_pair pair;
    grpc_server_credentials *creds;
    char *ca = NULL;

    if (!opt->tls_cert && !opt->tls_key)
        return grpc_insecure_server_credentials_create();
    if (!opt->tls_cert || !opt->tls_key) {
        logf_("--tls-cert and --tls-key go together");
        return NULL;
    }
    pair.cert_chain = read_pem(opt->tls_cert);
    pair.private_key = read_pem(opt->tls_key);
    if (opt->tls_client_ca)
        ca = read_pem(opt->tls_client_ca);
    if (!pair.cert_chain || !pair.private_key || (opt->tls_client_ca && !ca)) {
        creds = NULL;
    } else {
        creds = grpc_ssl_server_credentials_create_ex(
            ca, &pair, 1,
            ca ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
               : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
            NULL);
        logf_("serving TLS%s", ca ? " (client certificates required)" : "");
    }
    free((void *)pair.cert_chain);
    free((void *)pair.private_key);
    free(ca);
    return creds;
}

int sw_stub_server_run(const struct sw_stub_options *opt)
{
    struct stub_server srv;
    struct tag shutdown_tag = {T_SHUTDOWN, NULL};
    int rc = 0;

    memset(&srv, 0, sizeof(srv));
    srv.opt = opt;
    grpc_init();

    grpc_arg args[3];
    memset(args, 0, sizeof(args));
    args[0].type = GRPC_ARG_INTEGER;
    args[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
    args[0].value.integer = STUB_MAX_MESSAGE;
    args[1].type = GRPC_ARG_INTEGER;
    args[1].key = (char *)GRPC_COMPRESSION_CHANNEL_ENABLED_ALGORITHMS_BITSET;
    args[1].value.integer = (1 << GRPC_COMPRESS_NONE) | (1 << GRPC_COMPRESS_GZIP);
    args[2].type = GRPC_ARG_INTEGER;
    args[2].key = (char *)GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION;
    args[2].value.integer = 0;
    grpc_channel_args chargs = {SW_ARRAY_LEN(args), args};

    srv.cq = grpc_completion_queue_create_for_next(NULL);
    srv.server = grpc_server_create(&chargs, NULL);
    grpc_server_register_completion_queue(srv.server, srv.cq, NULL);
    grpc_server_credentials *creds = make_server_creds(opt);
    if (!creds) {
        grpc_server_destroy(srv.server);
        grpc_completion_queue_shutdown(srv.cq);
        while (grpc_completion_queue_next(srv.cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
               GRPC_QUEUE_SHUTDOWN)
            ;
        grpc_completion_queue_destroy(srv.cq);
        grpc_shutdown();
        return -EINVAL;
    }
    int port = grpc_server_add_http2_port(srv.server, opt->listen, creds);
    grpc_server_credentials_release(creds);
    if (port <= 0) {
        logf_("cannot listen on %s", opt->listen);
        grpc_server_destroy(srv.server);
        grpc_completion_queue_shutdown(srv.cq);
        while (grpc_completion_queue_next(srv.cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
               GRPC_QUEUE_SHUTDOWN)
            ;
        grpc_completion_queue_destroy(srv.cq);
        grpc_shutdown();
        return -EADDRINUSE;
    }
    grpc_server_start(srv.server);
    accept_more(&srv);
    if (opt->port_file) {
        int e = write_port_file(opt->port_file, port);
        if (e < 0)
            logf_("cannot write port file %s: %s", opt->port_file, strerror(-e));
    }
    print_listening(opt->listen, port);

    int64_t shutdown_at = 0;
    for (;;) {
        if (stop_requested && !srv.shutting_down) {
            logf_("shutting down");
            srv.shutting_down = true;
            shutdown_at = now_ms();
            grpc_server_shutdown_and_notify(srv.server, srv.cq, &shutdown_tag);
        }
        if (srv.shutting_down && !srv.cancelled_all && now_ms() - shutdown_at > STUB_GRACE_MS) {
            /* Calls still open after the grace period (e.g. an idle stream) are cancelled. */
            srv.cancelled_all = true;
            grpc_server_cancel_all_calls(srv.server);
        }
        gpr_timespec deadline =
            gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(200, GPR_TIMESPAN));
        grpc_event ev = grpc_completion_queue_next(srv.cq, deadline, NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        struct tag *t = ev.tag;
        switch (t->kind) {
        case T_NEW:
            on_new(&srv, t->call, ev.success);
            break;
        case T_RECV:
            on_recv(&srv, t->call, ev.success);
            break;
        case T_SEND:
            on_send(&srv, t->call, ev.success);
            break;
        case T_CLOSE:
            on_close(&srv, t->call, ev.success);
            break;
        case T_SHUTDOWN:
            /* Every call has finished; what remains in the queue is drained below. */
            srv.cq_shut = true;
            grpc_completion_queue_shutdown(srv.cq);
            break;
        }
    }
    grpc_server_destroy(srv.server);
    grpc_completion_queue_destroy(srv.cq);
    if (srv.live != 0)
        logf_("%d call object(s) still allocated at exit", srv.live);
    sw_json_free(&srv.json);
    if (opt->discard)
        logf_("received %llu segment(s) in %llu message(s) (%llu wire bytes), refused %llu "
              "message(s)",
              (unsigned long long)srv.segments, (unsigned long long)srv.seg_messages,
              (unsigned long long)srv.wire_bytes, (unsigned long long)srv.refused);
    if (opt->fail_from)
        logf_("failed %llu of %llu segment message(s) on purpose (--fail-calls)",
              (unsigned long long)srv.failed, (unsigned long long)srv.numbered);
    if (opt->segments && fflush(opt->segments) != 0)
        rc = -EIO;
    if (opt->management && fflush(opt->management) != 0)
        rc = -EIO;
    grpc_shutdown();
    logf_("stopped");
    return rc;
}
