/*
 * transport.h - the reporter's gRPC client (grpc core C API): segment batches (collectInSync,
 * or the `collect` stream), management heartbeats, auth metadata, gzip, TLS seam, and failure
 * backoff.
 *
 * Rules: runs only in swagent-reporter (never in a traced process). Single-threaded use: one
 * channel, one completion queue, every call is run to completion (synchronous style) with a
 * deadline of collector.grpc_upstream_timeout. A segment counts as delivered only when the call
 * that carried it ended with status OK; the caller releases ring records only then
 * (at-least-once delivery).
 */
#ifndef SW_TRANSPORT_H
#define SW_TRANSPORT_H

#include "common.h"

#include <signal.h>
#include <stddef.h>

struct sw_config;
struct sw_transport; /* one gRPC channel to one collector; layout private to transport.c */

/*
 * The reporter calls sched_yield() every SW_YIELD_EVERY segments it encodes (main.c,
 * send_batch: ~70 us), and in the transport every SW_YIELD_EVERY messages it makes (the
 * collect stream: one per segment) and before each message of 64 KiB or more (a batch's: up to
 * ~1 ms of gzip). Under SCHED_IDLE a waking application preempts it at once, but an
 * application thread that is already runnable does not: when the CPU frees, the kernel's EEVDF
 * scheduler may pick the reporter over a thread that is not eligible yet (it used more than
 * its share lately), and the reporter then keeps the CPU until it blocks or its slice ends. A
 * batch of 2,000 segments was ~2 ms in one stretch: traced with tracefs on nginx's core under
 * the paced load, wrk or nginx waited behind the reporter up to 2.3 ms, six times in 10 s;
 * with the yields never over 0.1 ms, and the paced pair's p99.9 went from 1.49x to 1.08x of
 * the bare side's (bench/run.sh --ab-reporter, 24 repetitions each).
 */
#define SW_YIELD_EVERY 128

/*
 * One packed protobuf message (for collect: a SegmentObject). The caller owns `data`. `framed`:
 * the bytes just before `data` are its SegmentCollection entry header (tag 1, length), as
 * sw_encode_segment_framed writes them; consecutive framed messages that lie back to back are
 * sent on collectInSync as they lie, without a copy.
 */
struct sw_msg {
    const void *data;
    size_t len;
    bool framed;
};

/* A key/value string pair (InstanceProperties.properties). */
struct sw_kv {
    const char *key;
    const char *value;
};

/*
 * Creates the transport for `target` (host:port; NULL means c->backend_service), with
 * agent.authentication, swagent.grpc_gzip, agent.force_tls / ssl_trusted_ca_path and
 * collector.grpc_upstream_timeout from `c`. Calls grpc_init(). Returns NULL on failure.
 */
struct sw_transport *sw_transport_new(const struct sw_config *c, const char *target);

/* Shuts the channel down and frees everything (grpc_shutdown()). NULL is allowed. */
void sw_transport_free(struct sw_transport *t);

/*
 * Makes `*stop` (a signal handler's flag; it must outlive the transport) the transport's stop
 * request: while it is nonzero, a call whose channel is still connecting is given up unmade
 * within ~100 ms (-EINTR, no backoff) instead of waiting up to 5 s; a call already made runs to
 * its end (its deadline at most).
 */
void sw_transport_set_stop(struct sw_transport *t, const volatile sig_atomic_t *stop);

/*
 * Delivers `n` packed SegmentObjects. Batched (swagent.grpc_batch, the default): as
 * SegmentCollection messages to /skywalking.v3.TraceSegmentReportService/collectInSync, one
 * unary call per 2 MiB of segments (usually one call per batch). Otherwise, or once the
 * collector answered UNIMPLEMENTED for collectInSync (then for the life of the transport,
 * logged once, and the batch is sent again at once that way): one message per segment on one
 * client stream to .../collect, half-close, then the Commands and the status. While calls fail,
 * the batch is preceded by a probe, the same call without segments under the probe deadline
 * (5 s); once that is answered, the batch goes under collector.grpc_upstream_timeout, and if it
 * fails the backoff goes on growing. Returns 0 when every call ended with status OK (the whole
 * batch is delivered), else a negative errno (-EAGAIN while in backoff, -EINTR when stopping
 * while still connecting (sw_transport_set_stop), -ECONNREFUSED/-ETIMEDOUT/-EACCES/-EIO for
 * call failures). *delivered is the number of segments from the start of `segs` that calls
 * ended OK delivered: n on success, and after a failure those of the collectInSync calls
 * (one per 2 MiB) that went through before it, so that only the rest is sent again. A failed
 * collect stream may have delivered some of its segments too, unknown which: it counts none
 * (at-least-once). A collectInSync message refused as too large (RESOURCE_EXHAUSTED "...larger
 * than max (N vs. LIMIT)", or grpc-java's "...exceeds maximum size LIMIT") is sent again at
 * once as messages of at most LIMIT bytes (half its size when no limit is named), while the
 * transport stays at that address; -EMSGSIZE: segs[*delivered] alone was refused so, and can
 * never be delivered (not an outage: no backoff). The caller drops it and sends the rest. On
 * the collect stream the same refusal names the first segment above LIMIT, and the ones before
 * it count as delivered (the receiver took them in order before refusing).
 */
int sw_transport_collect(struct sw_transport *t, const struct sw_msg *segs, size_t n,
                         size_t *delivered);

/* True while segments go on collectInSync (false after an UNIMPLEMENTED answer). */
bool sw_transport_batched(const struct sw_transport *t);

/* ManagementService/reportInstanceProperties for one instance. 0 on status OK. */
int sw_transport_properties(struct sw_transport *t, const char *service, const char *instance,
                            const struct sw_kv *props, size_t n);

/*
 * MeterReportService/collectBatch: the `n` packed MeterDataCollection messages (meter.c) on
 * one call. 0 on status OK; -ENOSYS when the collector answered UNIMPLEMENTED (it has no meter
 * receiver: no backoff is armed for that answer).
 */
int sw_transport_meters(struct sw_transport *t, const struct sw_msg *msgs, size_t n);

/* ManagementService/keepAlive for one instance. 0 on status OK. */
int sw_transport_keepalive(struct sw_transport *t, const char *service, const char *instance);

/*
 * ConfigurationDiscoveryService/fetchConfigurations(service, uuid) (CDS). On status OK returns 0
 * and the packed Commands answer in *answer (malloc'd, the caller frees; *len may be 0: no
 * command). -ENOSYS: the collector has no such service (UNIMPLEMENTED; not counted as a failure
 * of the collector). Other errors as sw_transport_properties. Management backoff rules.
 */
int sw_transport_fetch_config(struct sw_transport *t, const char *service, const char *uuid,
                              uint8_t **answer, size_t *len);

/*
 * True while the transport is backing off after a failure (100 ms doubling to 10 s): callers
 * should not attempt a segment call (sw_transport_collect returns -EAGAIN without touching the
 * network). A failed call of any kind arms it; so does a failed segment call alone, until a
 * segment call ends OK.
 */
bool sw_transport_backing_off(const struct sw_transport *t);

/*
 * The same for the management calls (sw_transport_properties, _keepalive): they are held
 * after any failed call until its backoff ends, but once one is answered, they go on while
 * the segment calls still fail and back off (a collector that answers heartbeats and fails
 * batches stays informed that the instance lives).
 */
bool sw_transport_mgmt_backing_off(const struct sw_transport *t);

/*
 * True from a failed call until the next successful one (for segment calls: until a segment
 * call ends OK): the collector is unreachable (or refusing). While failing, calls use a
 * deadline of at most 5 s (probes); a batch is preceded by an empty probe
 * (sw_transport_collect).
 */
bool sw_transport_failing(const struct sw_transport *t);

/*
 * While the channel is connecting or has failed to connect: waits up to `ms` (less if its
 * state changes), polling its connection meanwhile, and returns true. gRPC core moves a
 * connection attempt on only while a thread polls for it; the reporter's thread does so in
 * the pauses of its loop. Otherwise returns false at once (nothing to poll: sleep instead).
 */
bool sw_transport_poll(struct sw_transport *t, long ms);

/* Milliseconds until the segment calls' backoff ends (0 when not backing off). */
long sw_transport_backoff_left_ms(const struct sw_transport *t);

/*
 * One call of another RPC (profile.c: ProfileTask): the n messages (a client stream when n > 1),
 * half-close, the response. The response bytes go to *resp (malloc'ed, the caller frees; NULL
 * when empty or not wanted). Held and backed off like the management calls. 0 on status OK.
 */
int sw_transport_call(struct sw_transport *t, const char *method, const struct sw_msg *msgs,
                      size_t n, uint8_t **resp, size_t *resp_len);

/* The last gRPC status code and message (for logs and the status file). */
int sw_transport_last_status(const struct sw_transport *t, const char **message);

#endif /* SW_TRANSPORT_H */
