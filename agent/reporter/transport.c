/*
 * transport.c - the reporter's gRPC client over the grpc core C API.
 *
 * Rules: reporter process only, single-threaded use. One channel and one completion queue per
 * transport; every RPC is run to completion here (synchronous style) with the deadline
 * collector.grpc_upstream_timeout, and every batch started on a call is waited for before the
 * call is released, so no completion can ever arrive for freed memory. A batch of segments is
 * delivered only when its call(s) ended with status OK. Batches go as SegmentCollection
 * messages on collectInSync (one gRPC message, so one gzip stream, per batch: per-message
 * compression set-up dominated the reporter's CPU when every segment was its own message on
 * the `collect` stream); a collector answering UNIMPLEMENTED there gets the `collect` stream
 * for the rest of the transport's life. After a failed call the transport backs
 * off (100 ms doubling to 10 s) and refuses calls with -EAGAIN until the backoff ends, so a
 * dead collector never makes the reporter busy-loop; gRPC's own reconnect backoff is bounded
 * to the same range with channel arguments. A connection attempt (TCP, TLS, HTTP/2 SETTINGS)
 * may take CONNECT_TIMEOUT_MS and outlives the calls that wait for it; a call waits for it
 * CONNECT_WAIT_S at most, a probe (a call while calls fail) PROBE_CONNECT_WAIT_MS, so a distant
 * or slow collector has time to connect, and one that never completes a connection (a black
 * hole, dropped SYNs) holds the reporter CONNECT_WAIT_S once, then PROBE_CONNECT_WAIT_MS per
 * probe. While calls fail, a batch of segments is preceded by a probe that carries none (see
 * sw_transport_collect), and the batch itself goes under the configured deadline once the probe
 * is answered. A reporter that is stopping (sw_transport_set_stop) gives up a call that is
 * still waiting for its connection within STOP_POLL_MS; a call already made runs to its end.
 *
 * The two management messages (InstanceProperties, InstancePingPkg) are plain strings and
 * key/value pairs, so they are encoded here with a few lines of protobuf wire format rather
 * than through generated code; segments arrive already packed (encode.c).
 */
#include "common.h"

#include "transport.h"

#include "encode.h"

#include "config.h"
#include "log.h"

#include <libdeflate.h>
#include <sched.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/compression.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 10000
#define CQ_GRACE_S 5      /* extra wait on the queue beyond the call deadline */
#define PROBE_TIMEOUT_S 5 /* deadline of calls while the collector is failing */
/*
 * How long a call whose send failed waits for the status the receiver ended it with before
 * it is cancelled (see end_failed_send).
 */
#define STATUS_WAIT_MS 2000
/*
 * The time one connection attempt may take: TCP connect, TLS handshake and the HTTP/2
 * SETTINGS exchange (gRPC's default, and the MIN_CONNECT_TIMEOUT of gRPC's connection-backoff
 * spec). It is set with GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: despite its name, gRPC core uses
 * that argument as the minimum connect timeout (each attempt's deadline is the later of the
 * next backoff and now + this), not as a backoff. It was once set to BACKOFF_MIN_MS (100 ms),
 * which failed every connection slower than that (a collector > ~50 ms away, TLS on a loaded
 * host, the reporter under valgrind): "connection attempt timed out before receiving SETTINGS
 * frame", failed batches and spooling with a healthy collector.
 */
#define CONNECT_TIMEOUT_MS 20000
/*
 * How long a call waits for its channel to connect (within the call's deadline); a probe (a
 * call while calls fail) waits PROBE_CONNECT_WAIT_MS. A call still connecting then fails
 * without being made, and the attempt is left to go on (up to CONNECT_TIMEOUT_MS). gRPC core
 * moves a connection on only while a thread polls for it (a call or a watch on our queue,
 * else only its backup poller, every 5 s): these waits do, and so do the reporter's pauses
 * between calls while the channel is connecting or failing (sw_transport_poll). So a collector
 * that never completes a connection (a black hole, a host that drops SYNs) holds the reporter
 * CONNECT_WAIT_S for the first failed call and PROBE_CONNECT_WAIT_MS per probe after it, and
 * spooling goes on in between.
 */
#define CONNECT_WAIT_S PROBE_TIMEOUT_S
#define PROBE_CONNECT_WAIT_MS 1000
/*
 * A connection wait looks at the stop flag (sw_transport_set_stop) this often: a reporter
 * told to stop while its call still waits for a connection gives the call up within this time
 * instead of waiting out CONNECT_WAIT_S.
 */
#define STOP_POLL_MS 100

#define M_COLLECT "/skywalking.v3.TraceSegmentReportService/collect"
#define M_COLLECT_SYNC "/skywalking.v3.TraceSegmentReportService/collectInSync"
#define M_PROPS "/skywalking.v3.ManagementService/reportInstanceProperties"
#define M_KEEPALIVE "/skywalking.v3.ManagementService/keepAlive"
#define M_METERS "/skywalking.v3.MeterReportService/collectBatch"
#define M_CDS "/skywalking.v3.ConfigurationDiscoveryService/fetchConfigurations"

#define MAX_TARGETS 8
#define ROTATE_AFTER 3 /* consecutive failed calls before trying the next backend address */
/*
 * Bytes of segments per SegmentCollection message. gRPC servers refuse messages above 4 MiB
 * unless configured otherwise (OAP allows 50 MiB), so a batch larger than this is split into
 * several collectInSync calls; one segment larger than it goes alone.
 */
#define COLLECTION_MAX_BYTES (2u * 1024 * 1024)
/*
 * A collector (or a gRPC proxy before it) that refuses a message as too large
 * (RESOURCE_EXHAUSTED, see too_large()) gets messages of at most its limit, or half the refused
 * size when it names none, from then on; a segment refused alone can never be delivered, and
 * sw_transport_collect says so (-EMSGSIZE) instead of sending it again forever.
 */

struct sw_transport {
    grpc_channel *ch;
    grpc_completion_queue *cq;
    const struct sw_config *cfg;               /* outlives the transport */
    char targets[MAX_TARGETS][SW_CFG_STR_MAX]; /* collector.backend_service, split at ',' */
    int ntargets, cur;
    int failures;                /* consecutive failed calls */
    char target[SW_CFG_STR_MAX]; /* targets[cur] */
    char auth[SW_CFG_STR_MAX];   /* empty: no authentication metadata */
    int timeout_s;
    size_t msg_max;       /* bytes of segments per collectInSync message (lowered on refusals,
                             reset on a move to the next address) */
    size_t refused_limit; /* the limit the last too-large refusal named (0: none; reset like
                             msg_max) */
    size_t refused_at;    /* on the collect stream: the index of the message it refused */
    long backoff_ms;   /* current backoff step, 0 after a success */
    uint64_t retry_at; /* monotonic ms before which calls are refused */
    /* The same for the segment calls alone (note_result): they may fail while others succeed. */
    long seg_backoff_ms;
    uint64_t seg_retry_at;
    int last_status;   /* last grpc_status_code */
    bool batch;        /* collectInSync; false: the collect stream (asked for, or refused) */
    bool gzip;         /* messages go gzip-compressed (swagent.grpc_gzip) */
    uint8_t **resp_out; /* sw_transport_call: where run_call copies the response */
    size_t *resp_len;
    struct libdeflate_compressor *zc; /* the compressor of those messages (made at first use) */
    unsigned char *zbuf;              /* its output */
    size_t zcap;
    char last_msg[256];                /* its details */
    const volatile sig_atomic_t *stop; /* nonzero: the reporter is stopping; NULL: never */
    /* sw_transport_fetch_config: run_call keeps the answer's bytes (malloc'd) here. */
    struct {
        bool want;
        uint8_t *p;
        size_t n;
    } answer;
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Reads a whole (small) PEM file into a NUL-terminated heap buffer, or returns NULL. */
static char *read_pem(const char *path)
{
    FILE *f = fopen(path, "re");
    char *buf = NULL;
    long n;

    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || n > (1L << 20) ||
        fseek(f, 0, SEEK_SET) != 0)
        goto out;
    buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    } else if (buf) {
        buf[n] = '\0';
    }
out:
    fclose(f);
    return buf;
}

/*
 * Channel credentials: insecure unless TLS is used, which it is when agent.force_tls is set or
 * the trusted CA file exists (the Java agent's rule: its default CA path is
 * `<agent dir>/ca/ca.crt`, and a missing file means plaintext); then the server CA and an
 * optional client key pair. The same test the agent makes for its reporter key (config.h).
 */
static bool use_tls(const struct sw_config *c)
{
    return sw_config_uses_tls(c);
}

static grpc_channel_credentials *make_creds(const struct sw_config *c)
{
    char *ca = NULL, *key = NULL, *chain = NULL;
    grpc_ssl_pem_key_cert_pair pair;
    grpc_channel_credentials *creds;

    if (!use_tls(c))
        return grpc_insecure_credentials_create();
    if (c->ssl_trusted_ca_path[0] != '\0' && access(c->ssl_trusted_ca_path, R_OK) == 0) {
        ca = read_pem(c->ssl_trusted_ca_path);
        if (!ca)
            SW_LOGW("reporter: cannot read agent.ssl_trusted_ca_path %s; using system roots",
                    c->ssl_trusted_ca_path);
    }
    if (c->ssl_key_path[0] != '\0' && c->ssl_cert_chain_path[0] != '\0') {
        key = read_pem(c->ssl_key_path);
        chain = read_pem(c->ssl_cert_chain_path);
    }
    pair.private_key = key;
    pair.cert_chain = chain;
    creds = grpc_ssl_credentials_create(ca, (key && chain) ? &pair : NULL, NULL, NULL);
    free(ca);
    free(key);
    free(chain);
    return creds;
}

/* Creates the channel to targets[cur]. Returns 0 or -EIO. */
static int make_channel(struct sw_transport *t)
{
    const struct sw_config *c = t->cfg;
    grpc_channel_credentials *creds;
    grpc_arg args[6];
    grpc_channel_args chargs;
    int n = 0;

    if (t->ch) {
        grpc_channel_destroy(t->ch);
        t->ch = NULL;
    }
    snprintf(t->target, sizeof(t->target), "%s", t->targets[t->cur]);
    args[n].type = GRPC_ARG_INTEGER;
    args[n].key = (char *)GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS;
    args[n++].value.integer = BACKOFF_MIN_MS;
    args[n].type = GRPC_ARG_INTEGER;
    args[n].key = (char *)GRPC_ARG_MIN_RECONNECT_BACKOFF_MS; /* the connect timeout, see above */
    args[n++].value.integer = CONNECT_TIMEOUT_MS;
    args[n].type = GRPC_ARG_INTEGER;
    args[n].key = (char *)GRPC_ARG_MAX_RECONNECT_BACKOFF_MS;
    args[n++].value.integer = BACKOFF_MAX_MS;
    args[n].type = GRPC_ARG_STRING;
    args[n].key = (char *)GRPC_ARG_PRIMARY_USER_AGENT_STRING;
    args[n++].value.string = (char *)"swagent/" SW_VERSION_STRING;
    if (c->grpc_gzip) {
        /* OAP (grpc-java) decompresses only gzip; the compressed flag is set per message. */
        args[n].type = GRPC_ARG_INTEGER;
        args[n].key = (char *)GRPC_COMPRESSION_CHANNEL_DEFAULT_ALGORITHM;
        args[n++].value.integer = GRPC_COMPRESS_GZIP;
    }
    chargs.num_args = (size_t)n;
    chargs.args = args;

    creds = make_creds(c);
    if (!creds)
        return -EIO;
    t->ch = grpc_channel_create(t->target, creds, &chargs);
    grpc_channel_credentials_release(creds);
    if (!t->ch)
        return -EIO;
    SW_LOGI("reporter: channel to %s (gzip %s, tls %s, auth %s, segments %s)", t->target,
            c->grpc_gzip ? "on" : "off", use_tls(c) ? "on" : "off", t->auth[0] ? "on" : "off",
            t->batch ? "batched (collectInSync)" : "streamed (collect)");
    return 0;
}

struct sw_transport *sw_transport_new(const struct sw_config *c, const char *target)
{
    struct sw_transport *t = calloc(1, sizeof(*t));
    const char *p;

    if (!t)
        return NULL;
    grpc_init();
    t->cfg = c;
    /* `host:port[,host:port...]`: one address at a time, the next after repeated failures. */
    p = target ? target : c->backend_service;
    while (*p && t->ntargets < MAX_TARGETS) {
        size_t len = strcspn(p, ",");
        while (len > 0 && (*p == ' ' || *p == '\t'))
            p++, len--;
        size_t l2 = len;
        while (l2 > 0 && (p[l2 - 1] == ' ' || p[l2 - 1] == '\t'))
            l2--;
        if (l2 > 0 && l2 < SW_CFG_STR_MAX)
            snprintf(t->targets[t->ntargets++], SW_CFG_STR_MAX, "%.*s", (int)l2, p);
        p += len;
        if (*p == ',')
            p++;
    }
    if (t->ntargets == 0)
        goto fail;
    snprintf(t->auth, sizeof(t->auth), "%s", c->authentication);
    t->timeout_s = c->grpc_upstream_timeout > 0 ? c->grpc_upstream_timeout : 30;
    t->batch = c->grpc_batch;
    t->msg_max = COLLECTION_MAX_BYTES;
    t->gzip = c->grpc_gzip;
    t->cq = grpc_completion_queue_create_for_next(NULL);
    if (!t->cq || make_channel(t) != 0)
        goto fail;
    return t;
fail:
    sw_transport_free(t);
    return NULL;
}

void sw_transport_free(struct sw_transport *t)
{
    if (!t)
        return;
    if (t->ch)
        grpc_channel_destroy(t->ch);
    if (t->cq) {
        grpc_completion_queue_shutdown(t->cq);
        while (grpc_completion_queue_next(t->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
               GRPC_QUEUE_SHUTDOWN)
            ;
        grpc_completion_queue_destroy(t->cq);
    }
    libdeflate_free_compressor(t->zc);
    free(t->zbuf);
    free(t);
    grpc_shutdown();
}

void sw_transport_set_stop(struct sw_transport *t, const volatile sig_atomic_t *stop)
{
    t->stop = stop;
}

static bool stopping(const struct sw_transport *t)
{
    return t->stop && *t->stop;
}

/* The later of the two backoffs' ends: when segment calls may go again. */
static uint64_t seg_retry_at(const struct sw_transport *t)
{
    return t->retry_at > t->seg_retry_at ? t->retry_at : t->seg_retry_at;
}

bool sw_transport_backing_off(const struct sw_transport *t)
{
    return seg_retry_at(t) > now_ms();
}

bool sw_transport_mgmt_backing_off(const struct sw_transport *t)
{
    return t->retry_at > now_ms();
}

bool sw_transport_failing(const struct sw_transport *t)
{
    return t->backoff_ms > 0 || t->seg_backoff_ms > 0;
}

long sw_transport_backoff_left_ms(const struct sw_transport *t)
{
    uint64_t now = now_ms(), at = seg_retry_at(t);
    return at > now ? (long)(at - now) : 0;
}

int sw_transport_last_status(const struct sw_transport *t, const char **message)
{
    if (message)
        *message = t->last_msg;
    return t->last_status;
}

static long next_step(long step)
{
    return step == 0 ? BACKOFF_MIN_MS : step * 2 < BACKOFF_MAX_MS ? step * 2 : BACKOFF_MAX_MS;
}

/*
 * Notes the end of a call: `seg` for the segment calls (collect, collectInSync, their probes),
 * else a management call (properties, keepAlive). Every failure arms the backoff that holds
 * all calls; a failed segment call also arms the segment calls' own, which only a segment call
 * ending OK clears. A collector can answer one kind and fail the other (a segment receiver
 * that is down or overloaded behind a healthy front, a proxy's limit): an answered heartbeat
 * then lets the heartbeats go on, but does not restart the segment calls' backoff, and does not
 * count as the address working (rotation). It once did: a collector failing every batch was
 * sent one again ~100 ms after each heartbeat (about 9 failed batches per 30 s instead of 3),
 * and the heartbeats themselves were held while the batches failed.
 */
static void note_result(struct sw_transport *t, bool ok, bool seg)
{
    if (ok) {
        if (seg) {
            t->seg_backoff_ms = 0;
            t->seg_retry_at = 0;
        }
        t->backoff_ms = 0;
        t->retry_at = 0;
        if (t->seg_backoff_ms == 0)
            t->failures = 0;
        return;
    }
    if (seg) {
        t->seg_backoff_ms = next_step(t->seg_backoff_ms);
        t->seg_retry_at = now_ms() + (uint64_t)t->seg_backoff_ms;
    }
    if (++t->failures >= ROTATE_AFTER && t->ntargets > 1) {
        t->failures = 0;
        t->cur = (t->cur + 1) % t->ntargets;
        SW_LOGW("reporter: switching to collector address %s", t->targets[t->cur]);
        /* Another collector (or proxy): a smaller message size learnt from the last one's
         * refusals does not apply to it; its own refusals, if any, make it smaller again. */
        t->msg_max = COLLECTION_MAX_BYTES;
        t->refused_limit = 0;
        if (make_channel(t) != 0)
            SW_LOGE("reporter: cannot create a channel to %s", t->targets[t->cur]);
    }
    t->backoff_ms = next_step(t->backoff_ms);
    t->retry_at = now_ms() + (uint64_t)t->backoff_ms;
}

static int status_to_errno(grpc_status_code s)
{
    switch (s) {
    case GRPC_STATUS_OK:
        return 0;
    case GRPC_STATUS_UNAVAILABLE:
        return -ECONNREFUSED;
    case GRPC_STATUS_DEADLINE_EXCEEDED:
        return -ETIMEDOUT;
    case GRPC_STATUS_PERMISSION_DENIED:
    case GRPC_STATUS_UNAUTHENTICATED:
        return -EACCES;
    case GRPC_STATUS_UNIMPLEMENTED:
        return -ENOSYS;
    default:
        return -EIO;
    }
}

/* Counts the `commands` (field 1) in a packed Commands message; -1 if it does not parse. */
static int count_commands(const uint8_t *p, size_t n)
{
    size_t i = 0;
    int count = 0;

    while (i < n) {
        uint64_t key = 0, len = 0;
        int shift = 0;
        while (i < n && shift < 64) {
            key |= (uint64_t)(p[i] & 0x7f) << shift;
            shift += 7;
            if (!(p[i++] & 0x80))
                break;
        }
        if ((key & 7) != 2)
            return -1;
        shift = 0;
        while (i < n && shift < 64) {
            len |= (uint64_t)(p[i] & 0x7f) << shift;
            shift += 7;
            if (!(p[i++] & 0x80))
                break;
        }
        if (len > n - i)
            return -1;
        i += (size_t)len;
        if ((key >> 3) == 1)
            count++;
    }
    return count;
}

/*
 * Tags of the batches of one call; each completes exactly once. TAG_WATCH: a connectivity
 * watch (wait_connected); wait_tag ignores it.
 */
enum { TAG_START = 0, TAG_STATUS, TAG_SEND, TAG_FINISH, TAG_N, TAG_WATCH = TAG_N };

struct call_state {
    bool started[TAG_N];
    bool done[TAG_N];
    bool ok[TAG_N];
};

/* A batch of the call completed: which one, and whether it succeeded. */
static void note_done(struct call_state *st, grpc_event ev)
{
    int k = (int)(intptr_t)ev.tag;

    if (k >= 0 && k < TAG_N) {
        st->done[k] = true;
        st->ok[k] = ev.success != 0;
    }
}

/*
 * Waits until batch `tag` completed (or, with tag == TAG_N, every started batch). Past the
 * deadline the call is cancelled, which completes every batch, so this always returns.
 */
static void wait_tag(struct sw_transport *t, grpc_call *call, struct call_state *st, int tag,
                     gpr_timespec deadline)
{
    gpr_timespec limit = gpr_time_add(deadline, gpr_time_from_seconds(CQ_GRACE_S, GPR_TIMESPAN));
    bool cancelled = false;

    for (;;) {
        bool all = true;
        if (tag < TAG_N) {
            all = st->done[tag];
        } else {
            for (int i = 0; i < TAG_N; i++)
                if (st->started[i] && !st->done[i])
                    all = false;
        }
        if (all)
            return;
        grpc_event ev = grpc_completion_queue_next(
            t->cq, cancelled ? gpr_inf_future(GPR_CLOCK_MONOTONIC) : limit, NULL);
        if (ev.type == GRPC_OP_COMPLETE) {
            note_done(st, ev);
        } else if (ev.type == GRPC_QUEUE_TIMEOUT && !cancelled) {
            grpc_call_cancel(call, NULL);
            cancelled = true;
        } else if (ev.type == GRPC_QUEUE_SHUTDOWN) {
            return;
        }
    }
}

/*
 * Waits on the queue until the channel's state is no longer `s`, or `limit`: true if it changed.
 * Meanwhile this thread polls the channel's connections, which is what moves a connection
 * attempt on (see CONNECT_WAIT_S).
 */
static bool watch_state(struct sw_transport *t, grpc_connectivity_state s, gpr_timespec limit)
{
    gpr_timespec grace = gpr_time_add(limit, gpr_time_from_seconds(CQ_GRACE_S, GPR_TIMESPAN));
    grpc_event ev;

    /* Completes exactly once: at the change (success 1) or at `limit` (success 0). */
    grpc_channel_watch_connectivity_state(t->ch, s, limit, t->cq, (void *)(intptr_t)TAG_WATCH);
    do
        ev = grpc_completion_queue_next(t->cq, grace, NULL);
    while (ev.type == GRPC_OP_COMPLETE && (intptr_t)ev.tag != TAG_WATCH);
    return ev.type == GRPC_OP_COMPLETE && ev.success;
}

/*
 * Waits until the channel is connected or has failed to connect (TRANSIENT_FAILURE: a call
 * then fails at once, with gRPC's status and message, as for a refused connection), until
 * `limit` at most; an idle channel is made to connect. Returns 1 then, 0 when it is still
 * connecting at `limit`, -EINTR when the reporter is stopping (looked at every STOP_POLL_MS).
 * In the last two cases the attempt is not cancelled. Each watch ends by its own time limit,
 * so none is left on the queue.
 */
static int wait_connected(struct sw_transport *t, gpr_timespec limit)
{
    grpc_connectivity_state s = grpc_channel_check_connectivity_state(t->ch, 1);

    while (s == GRPC_CHANNEL_IDLE || s == GRPC_CHANNEL_CONNECTING) {
        if (stopping(t))
            return -EINTR;
        gpr_timespec now = gpr_now(GPR_CLOCK_MONOTONIC);
        if (gpr_time_cmp(now, limit) >= 0)
            return 0;
        gpr_timespec slice = gpr_time_add(now, gpr_time_from_millis(STOP_POLL_MS, GPR_TIMESPAN));
        watch_state(t, s, gpr_time_cmp(slice, limit) < 0 ? slice : limit);
        s = grpc_channel_check_connectivity_state(t->ch, 1);
    }
    return 1;
}

bool sw_transport_poll(struct sw_transport *t, long ms)
{
    grpc_connectivity_state s =
        t->ch ? grpc_channel_check_connectivity_state(t->ch, 0) : GRPC_CHANNEL_SHUTDOWN;

    if (s != GRPC_CHANNEL_CONNECTING && s != GRPC_CHANNEL_TRANSIENT_FAILURE)
        return false;
    watch_state(t, s,
                gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN)));
    return true;
}

static bool start(grpc_call *call, struct call_state *st, int tag, const grpc_op *ops, size_t n)
{
    if (grpc_call_start_batch(call, ops, n, (void *)(intptr_t)tag, NULL) != GRPC_CALL_OK)
        return false;
    st->started[tag] = true;
    return true;
}

/*
 * A send on the call failed: the call has ended, most often because the receiver ended it
 * with a status while messages were still going (a message refused as too large, a quota).
 * That status is what the caller needs: on the collect stream a refusal says which segments
 * the receiver took. The call used to be cancelled at once, which put CANCELLED in its place
 * whenever the status had not surfaced yet, and gRPC (1.51) can hold a status back until the
 * call's receiving side has been asked for (seen here: such a status then waited for the
 * deadline). A refusal on the stream then looked like an ordinary failure and the stream
 * went again whole: the segments before the refused one reached the collector twice
 * (reliability_toolarge_java_stream, 1 run in 15 to 1 in 3). So the call's receiving ops are
 * started and the status is waited for, up to STATUS_WAIT_MS within the deadline; only a call
 * that has not ended by then is cancelled.
 */
static void end_failed_send(struct sw_transport *t, grpc_call *call, struct call_state *st,
                            grpc_metadata_array *recv_md, grpc_byte_buffer **resp,
                            gpr_timespec deadline)
{
    grpc_op ops[2];

    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[0].data.recv_initial_metadata.recv_initial_metadata = recv_md;
    ops[1].op = GRPC_OP_RECV_MESSAGE;
    ops[1].data.recv_message.recv_message = resp;
    start(call, st, TAG_FINISH, ops, 2);
    gpr_timespec until = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                      gpr_time_from_millis(STATUS_WAIT_MS, GPR_TIMESPAN));

    if (gpr_time_cmp(until, deadline) > 0)
        until = deadline;
    while (!st->done[TAG_STATUS]) {
        grpc_event ev = grpc_completion_queue_next(t->cq, until, NULL);
        if (ev.type == GRPC_OP_COMPLETE) {
            note_done(st, ev);
        } else {
            break; /* the wait is over (or the queue is shutting down) */
        }
    }
    if (!st->done[TAG_STATUS])
        grpc_call_cancel(call, NULL);
}

/*
 * gzip of the messages, done here at level 1 rather than by gRPC (which compresses every
 * message with zlib at its default level 6): a batch of segments is highly repetitive, level 1
 * keeps nearly all of the ratio at a fraction of the CPU. libdeflate compresses the whole
 * message in one call (a batch is one buffer already) and computes the gzip trailer's CRC-32
 * with carry-less multiplication: on the reporter bench's batches it takes ~5,800 instructions
 * per segment where zlib's level 1 took ~10,200, and its output is 13 % smaller. The
 * buffer is handed to gRPC as already compressed (grpc_raw_compressed_byte_buffer_create), so
 * gRPC sets the message's compressed flag and does not compress it again; the call's
 * grpc-encoding is gzip (the channel's default algorithm). A message that does not compress
 * goes as it is.
 */
static unsigned char *gzip_message(struct sw_transport *t, const void *data, size_t len,
                                   size_t *out_len)
{
    if (!t->zc && !(t->zc = libdeflate_alloc_compressor(1)))
        return NULL;
    size_t bound = libdeflate_gzip_compress_bound(t->zc, len);
    if (bound > t->zcap) {
        unsigned char *nb = realloc(t->zbuf, bound);
        if (!nb)
            return NULL;
        t->zbuf = nb;
        t->zcap = bound;
    }
    size_t n = libdeflate_gzip_compress(t->zc, data, len, t->zbuf, t->zcap);
    if (n == 0)
        return NULL;
    *out_len = n;
    return t->zbuf;
}

static void free_buffers(grpc_byte_buffer **bbs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        grpc_byte_buffer_destroy(bbs[i]);
    free(bbs);
}

/* The byte buffer of one message: gzip-compressed by gzip_message when gzip is on. */
static grpc_byte_buffer *message_buffer(struct sw_transport *t, const void *data, size_t len)
{
    size_t zlen = 0;
    unsigned char *z = t->gzip && len >= 64 ? gzip_message(t, data, len, &zlen) : NULL;
    grpc_byte_buffer *bb;
    if (z && zlen < len) {
        grpc_slice s = grpc_slice_from_copied_buffer((const char *)z, zlen);
        bb = grpc_raw_compressed_byte_buffer_create(&s, 1, GRPC_COMPRESS_GZIP);
        grpc_slice_unref(s);
    } else {
        grpc_slice s = grpc_slice_from_copied_buffer(data, len);
        bb = grpc_raw_byte_buffer_create(&s, 1);
        grpc_slice_unref(s);
    }
    return bb;
}

/*
 * True when a RESOURCE_EXHAUSTED's details say a message was over the receiver's size limit,
 * with *limit the limit they name (0: none). gRPC core and grpc-go word it "Received message
 * larger than max (SIZE vs. LIMIT)"; grpc-java, the OAP's server, "gRPC message exceeds
 * maximum size LIMIT: SIZE" or, for the inflated size, "Decompressed gRPC message exceeds
 * maximum size LIMIT". Any other RESOURCE_EXHAUSTED is a quota or an overload.
 */
static bool too_large(const char *d, size_t *limit)
{
    const char *p = strstr(d, "larger than max");

    *limit = 0;
    if (p) {
        p = strstr(p, " vs. ");
        p = p ? p + 5 : NULL;
    } else if ((p = strstr(d, "exceeds maximum size"))) {
        p += strlen("exceeds maximum size");
        while (*p == ' ')
            p++;
    } else {
        return false;
    }
    if (p && *p >= '0' && *p <= '9') {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (errno == 0 && v <= SIZE_MAX)
            *limit = (size_t)v;
    }
    return true;
}

/* Keeps a copy of the answer of a call made by sw_transport_fetch_config. */
static void keep_answer(struct sw_transport *t, const uint8_t *p, size_t n)
{
    free(t->answer.p);
    t->answer.p = malloc(n ? n : 1);
    t->answer.n = t->answer.p ? n : 0;
    if (t->answer.p && n)
        memcpy(t->answer.p, p, n);
}

/*
 * Runs one RPC to completion: initial metadata (authentication), the `n` messages one at a
 * time, half-close, then the single response and the status. Returns 0 on status OK, -EINTR
 * when the reporter is stopping and the channel is still connecting (nothing sent); a call
 * once made is run to its end (its deadline at most), stopping or not.
 */
static int run_call(struct sw_transport *t, const char *method, const struct sw_msg *msgs, size_t n)
{
    /*
     * After a failure the next calls are probes: at most PROBE_TIMEOUT_S, so a collector that
     * accepts connections but never answers holds the reporter (and its spooling) only briefly.
     * For a batch of segments the probe is an empty call (sw_transport_collect): the batch may
     * need longer than that on a slow link, and goes once the probe was answered.
     */
    bool seg = strcmp(method, M_COLLECT) == 0 || strcmp(method, M_COLLECT_SYNC) == 0;
    bool probe = t->backoff_ms > 0 || (seg && t->seg_backoff_ms > 0);
    int timeout_s = probe && t->timeout_s > PROBE_TIMEOUT_S ? PROBE_TIMEOUT_S : t->timeout_s;
    gpr_timespec deadline =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_seconds(timeout_s, GPR_TIMESPAN));
    grpc_metadata md[1];
    grpc_metadata_array recv_md, trailing_md;
    grpc_byte_buffer *resp = NULL;
    grpc_status_code status = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    struct call_state st;
    grpc_op ops[3];
    grpc_call *call;
    bool send_ok = true;
    int rc;

    if (seg ? sw_transport_backing_off(t) : sw_transport_mgmt_backing_off(t))
        return -EAGAIN;
    if (!t->ch) {
        note_result(t, false, seg); /* backs off, and may rebuild the channel (rotation) */
        if (!t->ch && t->ntargets == 1 && make_channel(t) != 0)
            return -EIO;
        return -EIO;
    }
    long wait_ms = probe ? PROBE_CONNECT_WAIT_MS : CONNECT_WAIT_S * 1000L;
    if (wait_ms > timeout_s * 1000L)
        wait_ms = timeout_s * 1000L;
    int conn = wait_connected(
        t, gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(wait_ms, GPR_TIMESPAN)));
    if (conn < 0) {
        /*
         * Stopping while still connecting: the call is given up unmade. Nothing was sent, so
         * this says nothing about the collector (no backoff); the caller keeps the batch.
         */
        t->last_status = GRPC_STATUS_CANCELLED;
        snprintf(t->last_msg, sizeof(t->last_msg), "not sent: stopping while connecting");
        return -EINTR;
    }
    if (conn == 0) {
        t->last_status = GRPC_STATUS_UNAVAILABLE;
        snprintf(t->last_msg, sizeof(t->last_msg),
                 "not connected after %ld ms (the connection attempt goes on)", wait_ms);
        SW_LOG_DEBUG_("reporter: %s to %s: %s", method, t->target, t->last_msg);
        note_result(t, false, seg);
        return -ETIMEDOUT;
    }
    /* The messages are made (and compressed) once the channel is connected and before the call
     * exists, so that no stream is open while the CPU compresses. */
    grpc_byte_buffer **bbs = calloc(n ? n : 1, sizeof(*bbs));
    if (!bbs)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (msgs[i].len >= 64 * 1024 || (i & (SW_YIELD_EVERY - 1)) == SW_YIELD_EVERY - 1)
            sched_yield(); /* see SW_YIELD_EVERY (transport.h) */
        if (!(bbs[i] = message_buffer(t, msgs[i].data, msgs[i].len))) {
            free_buffers(bbs, i);
            return -ENOMEM;
        }
    }
    memset(&st, 0, sizeof(st));
    memset(md, 0, sizeof(md));
    grpc_metadata_array_init(&recv_md);
    grpc_metadata_array_init(&trailing_md);
    call = grpc_channel_create_call(t->ch, NULL, GRPC_PROPAGATE_DEFAULTS, t->cq,
                                    grpc_slice_from_static_string(method), NULL, deadline, NULL);
    if (!call) {
        rc = -ENOMEM;
        goto out_nocall;
    }

    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (t->auth[0]) {
        md[0].key = grpc_slice_from_static_string("authentication");
        md[0].value = grpc_slice_from_copied_string(t->auth);
        ops[0].data.send_initial_metadata.count = 1;
        ops[0].data.send_initial_metadata.metadata = md;
    }
    send_ok = start(call, &st, TAG_START, ops, 1);

    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[0].data.recv_status_on_client.trailing_metadata = &trailing_md;
    ops[0].data.recv_status_on_client.status = &status;
    ops[0].data.recv_status_on_client.status_details = &details;
    if (!start(call, &st, TAG_STATUS, ops, 1)) {
        grpc_call_cancel(call, NULL);
        wait_tag(t, call, &st, TAG_N, deadline);
        grpc_call_unref(call);
        rc = -EIO;
        goto out_nocall;
    }

    for (size_t i = 0; send_ok && i < n; i++) {
        grpc_byte_buffer *bb = bbs[i];
        memset(ops, 0, sizeof(ops));
        ops[0].op = GRPC_OP_SEND_MESSAGE;
        ops[0].data.send_message.send_message = bb;
        st.started[TAG_SEND] = false; /* a failed start must not be waited for */
        st.done[TAG_SEND] = false;
        if (!start(call, &st, TAG_SEND, ops, 1)) {
            send_ok = false;
        } else {
            wait_tag(t, call, &st, TAG_SEND, deadline);
            send_ok = st.ok[TAG_SEND];
        }
    }

    if (send_ok) {
        memset(ops, 0, sizeof(ops));
        ops[0].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
        ops[1].op = GRPC_OP_RECV_INITIAL_METADATA;
        ops[1].data.recv_initial_metadata.recv_initial_metadata = &recv_md;
        ops[2].op = GRPC_OP_RECV_MESSAGE;
        ops[2].data.recv_message.recv_message = &resp;
        if (!start(call, &st, TAG_FINISH, ops, 3))
            grpc_call_cancel(call, NULL);
    } else {
        end_failed_send(t, call, &st, &recv_md, &resp, deadline);
    }
    wait_tag(t, call, &st, TAG_N, deadline);

    rc = status_to_errno(status);
    t->last_status = (int)status;
    {
        char *d = grpc_slice_to_c_string(details);
        snprintf(t->last_msg, sizeof(t->last_msg), "%s", d ? d : "");
        gpr_free(d);
    }
    /*
     * A segment message refused as too large: the collector answered (no outage, no backoff,
     * no rotation). A collectInSync message: collect_sync sends smaller ones. On the collect
     * stream, a message per segment in order, the receiver refused the first one above the
     * limit it names and received the ones before it: refused_at says which (no limit named,
     * or no message above it: the stream is an ordinary failure, sent again whole). Any other
     * RESOURCE_EXHAUSTED (a quota, an overload) stays an ordinary failure.
     */
    if (status == GRPC_STATUS_RESOURCE_EXHAUSTED && seg &&
        too_large(t->last_msg, &t->refused_limit)) {
        if (strcmp(method, M_COLLECT_SYNC) == 0) {
            rc = -EMSGSIZE;
        } else {
            for (size_t i = 0; t->refused_limit > 0 && i < n; i++)
                if (msgs[i].len > t->refused_limit) {
                    t->refused_at = i;
                    rc = -EMSGSIZE;
                    break;
                }
        }
    }
    if (rc == 0 && resp) {
        grpc_byte_buffer_reader rd;
        if (grpc_byte_buffer_reader_init(&rd, resp)) {
            grpc_slice all = grpc_byte_buffer_reader_readall(&rd);
            if (t->resp_out && GRPC_SLICE_LENGTH(all) > 0 &&
                (*t->resp_out = malloc(GRPC_SLICE_LENGTH(all))) != NULL) {
                memcpy(*t->resp_out, GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all));
                *t->resp_len = GRPC_SLICE_LENGTH(all);
            }
            int cmds = count_commands(GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all));
            if (t->answer.want) {
                keep_answer(t, GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all));
                cmds = 0;
            }
            if (cmds != 0)
                SW_LOG_DEBUG_("reporter: %s answered %d command(s) (not acted on yet)", method,
                              cmds);
            grpc_slice_unref(all);
            grpc_byte_buffer_reader_destroy(&rd);
        }
    }
    if (rc != 0)
        SW_LOG_DEBUG_("reporter: %s to %s failed: status %d %s", method, t->target, (int)status,
                      t->last_msg);
    if (resp)
        grpc_byte_buffer_destroy(resp);
    grpc_call_unref(call);
out_nocall:
    free_buffers(bbs, n); /* every op that used them is complete (or was never started) */
    if (t->auth[0])
        grpc_slice_unref(md[0].value);
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&recv_md);
    grpc_metadata_array_destroy(&trailing_md);
    if (rc == -ENOMEM || (rc == -EIO && call == NULL))
        t->last_status = GRPC_STATUS_INTERNAL;
    /* A collector without a meter receiver answered: no outage (meter.c turns meters off). A
     * CDS call the collector answered with an error of its own (UNIMPLEMENTED: no such service;
     * INTERNAL, ...): not an outage either, so segments are not held back by it. */
    bool answered = (rc == -ENOSYS && strcmp(method, M_METERS) == 0) ||
                    (t->answer.want && call != NULL && (rc == -ENOSYS || rc == -EIO));
    note_result(t, rc == 0 || rc == -EMSGSIZE || answered, seg);
    return rc;
}

/* ---- protobuf wire format: the management messages and SegmentCollection ---- */

struct pbuf {
    uint8_t *p;
    size_t len, cap;
    bool overflow;
};

static void pb_byte(struct pbuf *b, uint8_t v)
{
    if (b->len >= b->cap) {
        b->overflow = true;
        return;
    }
    b->p[b->len++] = v;
}

static void pb_varint(struct pbuf *b, uint64_t v)
{
    while (v >= 0x80) {
        pb_byte(b, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    pb_byte(b, (uint8_t)v);
}

static void pb_bytes(struct pbuf *b, int field, const void *s, size_t n)
{
    pb_varint(b, ((uint64_t)field << 3) | 2);
    pb_varint(b, n);
    if (n > b->cap - b->len || b->overflow) {
        b->overflow = true;
        return;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void pb_str(struct pbuf *b, int field, const char *s)
{
    if (s && *s)
        pb_bytes(b, field, s, strlen(s));
}

/*
 * Sends segs[0..n) as SegmentCollections (field 1, `repeated SegmentObject segments`, each an
 * already packed SegmentObject, so the collection is the concatenation of length-delimited
 * fields) on collectInSync, t->msg_max bytes at most per call. A message the collector refuses
 * as too large (-EMSGSIZE) is sent again at once in messages of at most the limit the refusal
 * named (half the size when it names none), until one segment alone is refused. Returns 0 when
 * every call ended OK; else the first error, with *done set to the segments delivered before it
 * (for -EMSGSIZE: segs[*done] alone was refused).
 */
/* The bytes of a SegmentCollection entry's header (tag 1, length) for the message m. */
static size_t bytes_hdr(const struct sw_msg *m)
{
    return 1 + sw_pb_varint_len(m->len);
}

/*
 * True when the n messages are framed (sw_msg.framed) and lie back to back from `first`, so
 * that first[0 .. bytes) is their SegmentCollection. Only pointers are compared: the header
 * bytes themselves are the encoder's (sw_encode_segment_framed).
 */
static bool contiguous(const struct sw_msg *m, size_t n, const uint8_t *first, size_t bytes)
{
    const uint8_t *at = first;
    for (size_t i = 0; i < n; i++) {
        if (!m[i].framed || (const uint8_t *)m[i].data != at + bytes_hdr(&m[i]))
            return false;
        at = (const uint8_t *)m[i].data + m[i].len;
    }
    return at == first + bytes;
}

static int collect_sync(struct sw_transport *t, const struct sw_msg *segs, size_t n, size_t *done)
{
    uint8_t *buf = NULL;
    size_t cap = 0;
    int rc = 0;

    *done = 0;
    while (*done < n) {
        size_t end = *done, bytes = 0;
        while (end < n) {
            size_t one = 1 + sw_pb_varint_len(segs[end].len) + segs[end].len;
            if (end > *done && bytes + one > t->msg_max)
                break;
            bytes += one;
            end++;
        }
        /* Entries already framed and back to back (the reporter's batches) go as they lie. */
        const uint8_t *first = NULL;
        if (segs[*done].framed) {
            first = (const uint8_t *)segs[*done].data - bytes_hdr(&segs[*done]);
            if (!contiguous(segs + *done, end - *done, first, bytes))
                first = NULL;
        }
        if (!first) {
            if (bytes > cap) {
                uint8_t *p = realloc(buf, bytes);
                if (!p) {
                    rc = -ENOMEM;
                    break;
                }
                buf = p;
                cap = bytes;
            }
            struct pbuf b = {buf, 0, bytes, false};
            for (size_t i = *done; i < end; i++)
                pb_bytes(&b, 1, segs[i].data, segs[i].len);
            if (b.overflow) { /* cannot happen: `bytes` is the exact size */
                rc = -EIO;
                break;
            }
            first = buf;
        }
        struct sw_msg m = {first, bytes, false};
        rc = run_call(t, M_COLLECT_SYNC, &m, 1);
        if (rc == -EMSGSIZE && end - *done > 1) {
            /*
             * Refused as too large: the same segments again at once, in messages of at most
             * the limit the refusal named (it counts the message, which is these bytes), else
             * of half the size.
             */
            size_t lim = t->refused_limit;
            t->msg_max = lim > 0 && lim < bytes ? lim : bytes / 2;
            SW_LOGW("reporter: %s refused a message of %zu bytes (%zu segments) as too large "
                    "(%s); messages of at most %zu bytes from now on",
                    t->target, bytes, end - *done, t->last_msg, t->msg_max);
            continue;
        }
        if (rc != 0)
            break;
        *done = end;
    }
    free(buf);
    return rc;
}

/*
 * Sends segs[0..n) on the collect stream, a message per segment. Returns as collect_sync, with
 * *done the segments delivered before a -EMSGSIZE. The receiver refuses the first message
 * above its limit and has taken the ones before it (run_call: refused_at). Once a refusal has
 * named the limit, a segment above it is not sent at all: the ones before it go, and
 * -EMSGSIZE names it. A stream that carries one is not only a wasted call: the sends that
 * follow the refusal fail, and the call then ended CANCELLED instead of with the refusal in
 * about one stream in three here (gRPC 1.51, loaded machine): an ordinary failure, the stream
 * sent again whole after the backoff.
 */
static int collect_stream(struct sw_transport *t, const struct sw_msg *segs, size_t n, size_t *done)
{
    size_t k = n;

    *done = 0;
    for (size_t i = 0; t->refused_limit > 0 && i < n; i++)
        if (segs[i].len > t->refused_limit) {
            k = i;
            break;
        }
    if (k > 0 || n == 0) {
        int rc = run_call(t, M_COLLECT, segs, k);
        if (rc == -EMSGSIZE)
            *done = t->refused_at;
        if (rc != 0)
            return rc;
    }
    *done = k;
    return k < n ? -EMSGSIZE : 0;
}

/*
 * UNIMPLEMENTED for collectInSync: a collector without it (an old OAP). The collect stream is
 * used from now on, for the life of the reporter (the refusal is not an outage: its backoff is
 * cleared).
 */
static void use_stream(struct sw_transport *t)
{
    SW_LOGW("reporter: %s answered UNIMPLEMENTED for collectInSync (%s); sending segments on "
            "the collect stream from now on",
            t->target, t->last_msg);
    t->batch = false;
    note_result(t, true, true);
}

/*
 * A batch failed after its probe was answered (the answer cleared the backoffs): the segment
 * calls' backoff goes on from `step`, the one before the probe, doubled, as if the probe had
 * failed. Else a collector that answers the probe but fails every batch (a size limit on the
 * way, a link too slow even for the configured deadline) would be sent the batch again every
 * BACKOFF_MIN_MS. The management calls' backoff is left as the failure set it: the collector
 * answered.
 */
static void resume_backoff(struct sw_transport *t, long step)
{
    long b = next_step(step);

    if (b > t->seg_backoff_ms) {
        t->seg_backoff_ms = b;
        t->seg_retry_at = now_ms() + (uint64_t)b;
    }
}

/*
 * While calls fail, a batch is preceded by a probe: the batch's call with no segment in it (an
 * empty SegmentCollection on collectInSync, a collect stream of no message; OAP and
 * collector-stub answer both with OK and store nothing) under PROBE_TIMEOUT_S. So a collector
 * that accepts connections and never answers still holds the reporter PROBE_TIMEOUT_S per
 * retry, and once the collector answers, the batch itself goes under the configured deadline
 * (t->timeout_s): a big batch on a slow link (up to 2,000 segments, messages of up to 2 MiB)
 * may need longer than PROBE_TIMEOUT_S, and when the batch itself was the probe it failed on
 * every retry, for as long as the link stayed slow. An empty probe rather than the batch's
 * first segments: a probe answered before the batch fails delivers nothing that is sent again.
 * It costs one small call per retry, only while calls fail.
 */
int sw_transport_collect(struct sw_transport *t, const struct sw_msg *segs, size_t n,
                         size_t *delivered)
{
    /* > 0: segment calls are failing, probe first */
    long step = t->backoff_ms > t->seg_backoff_ms ? t->backoff_ms : t->seg_backoff_ms;
    size_t done = 0;
    int rc;

    *delivered = 0;
    if (step > 0) {
        static const struct sw_msg none = {"", 0, false};
        rc = t->batch ? run_call(t, M_COLLECT_SYNC, &none, 1) : run_call(t, M_COLLECT, NULL, 0);
        if (rc == -ENOSYS && t->batch)
            use_stream(t);
        else if (rc != 0)
            return rc;
        if (stopping(t))
            return -EINTR; /* the batch has not started: it stays where it is */
    }
    if (!t->batch) {
        rc = collect_stream(t, segs, n, &done);
    } else {
        rc = collect_sync(t, segs, n, &done);
        if (rc == -ENOSYS) {
            /* Then the rest of this batch goes on the stream at once. */
            size_t more = 0;
            use_stream(t);
            rc = collect_stream(t, segs + done, n - done, &more);
            done += more;
        }
    }
    /* The calls that ended OK delivered a prefix of the batch; a failed stream, nothing sure. */
    *delivered = rc == 0 ? n : done;
    if (rc != 0 && rc != -EINTR && rc != -EMSGSIZE && step > 0)
        resume_backoff(t, step);
    return rc;
}

bool sw_transport_batched(const struct sw_transport *t)
{
    return t->batch;
}

int sw_transport_properties(struct sw_transport *t, const char *service, const char *instance,
                            const struct sw_kv *props, size_t n)
{
    uint8_t buf[8192], kvbuf[1024];
    struct pbuf b = {buf, 0, sizeof(buf), false};
    struct sw_msg m;

    /* InstanceProperties: 1 service, 2 serviceInstance, 3 properties (KeyStringValuePair). */
    pb_str(&b, 1, service);
    pb_str(&b, 2, instance);
    for (size_t i = 0; i < n; i++) {
        struct pbuf kv = {kvbuf, 0, sizeof(kvbuf), false};
        pb_str(&kv, 1, props[i].key);
        pb_str(&kv, 2, props[i].value);
        if (!kv.overflow)
            pb_bytes(&b, 3, kv.p, kv.len);
    }
    if (b.overflow)
        return -EMSGSIZE;
    m.data = b.p;
    m.len = b.len;
    m.framed = false;
    return run_call(t, M_PROPS, &m, 1);
}

/* A unary call whose request is two strings, fields 1 and 2 (InstancePingPkg,
   ConfigurationSyncRequest). */
static int call_two_strings(struct sw_transport *t, const char *method, const char *a,
                            const char *b2)
{
    uint8_t buf[1024];
    struct pbuf b = {buf, 0, sizeof(buf), false};
    struct sw_msg m;

    pb_str(&b, 1, a);
    pb_str(&b, 2, b2);
    if (b.overflow)
        return -EMSGSIZE;
    m.data = b.p;
    m.len = b.len;
    m.framed = false;
    return run_call(t, method, &m, 1);
}

int sw_transport_keepalive(struct sw_transport *t, const char *service, const char *instance)
{
    /* InstancePingPkg: 1 service, 2 serviceInstance. */
    return call_two_strings(t, M_KEEPALIVE, service, instance);
}

int sw_transport_fetch_config(struct sw_transport *t, const char *service, const char *uuid,
                              uint8_t **answer, size_t *len)
{
    *answer = NULL;
    *len = 0;
    t->answer.want = true;
    t->answer.p = NULL;
    t->answer.n = 0;
    /* ConfigurationSyncRequest: 1 service, 2 uuid. */
    int rc = call_two_strings(t, M_CDS, service, uuid);
    t->answer.want = false;
    if (rc == 0 && !t->answer.p)
        t->answer.p = calloc(1, 1); /* answered without a message body: an empty Commands */
    if (rc == 0 && t->answer.p) {
        *answer = t->answer.p;
        *len = t->answer.n;
    } else {
        free(t->answer.p);
        if (rc == 0)
            rc = -ENOMEM;
    }
    t->answer.p = NULL;
    t->answer.n = 0;
    return rc;
}

int sw_transport_call(struct sw_transport *t, const char *method, const struct sw_msg *msgs,
                      size_t n, uint8_t **resp, size_t *resp_len)
{
    if (resp) {
        *resp = NULL;
        *resp_len = 0;
    }
    t->resp_out = resp;
    t->resp_len = resp_len;
    int rc = run_call(t, method, msgs, n);
    t->resp_out = NULL;
    t->resp_len = NULL;
    if (rc != 0 && resp && *resp) {
        free(*resp);
        *resp = NULL;
        *resp_len = 0;
    }
    return rc;
}

int sw_transport_meters(struct sw_transport *t, const struct sw_msg *msgs, size_t n)
{
    return run_call(t, M_METERS, msgs, n);
}
