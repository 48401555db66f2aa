/*
 * logs.h - the reporter's logs: SW_REC_LOG records (record.h) of every traced process become
 * lines (lineasm.h) and go to LogReportService/collect as LogData (issue 38 item 5;
 * docs/logs.md).
 *
 * Reporter side, single-threaded. Records are untrusted: a record that does not parse exactly
 * is counted and skipped. Delivery: lines wait in memory (at most SW_RLOG_QUEUE_BYTES; beyond
 * that the oldest are dropped, counted) and go in calls of up to SW_RLOG_SEND_MAX; a failed
 * call keeps them for the next tick (the transport's backoff applies). Unlike segments they
 * are not spooled to disk, and a reporter killed with lines in memory loses them.
 */
#ifndef SW_RLOG_H
#define SW_RLOG_H

#include "common.h"

#include "drain.h"

struct sw_config;
struct sw_transport;
struct sw_rlog;

#define SW_RLOG_QUEUE_BYTES (8u << 20)
#define SW_RLOG_SEND_MAX 512
#define SW_RLOG_QUIET_MS 1000 /* a partial line is sent after this long without more bytes */

struct sw_rlog_stats {
    uint64_t records; /* SW_REC_LOG records taken */
    uint64_t bad;     /* records that did not parse */
    uint64_t lines;   /* lines made */
    uint64_t cut;     /* lines longer than swagent.log_max_line, cut */
    uint64_t sent;    /* lines the collector confirmed */
    uint64_t dropped; /* lines dropped: queue full */
    uint64_t failed;  /* failed calls */
};

/* swagent.log_max_line from `c`. NULL on out of memory. */
struct sw_rlog *sw_rlog_new(const struct sw_config *c);
void sw_rlog_free(struct sw_rlog *l);

/* A SW_REC_LOG record of ring `ring_id` at `cursor` (records handed out again after a failed
 * segment batch are recognised by their cursor and taken once). */
void sw_rlog_record(struct sw_rlog *l, uint64_t ring_id, uint64_t cursor,
                    const struct sw_ring_meta *meta, const void *payload, uint32_t len);

/*
 * Sends partial lines quiet for SW_RLOG_QUIET_MS, and those of rings no longer in `info` or
 * whose producer died (the process ended), then the queue. `now_ms`: monotonic-independent
 * epoch ms is not needed; any millisecond clock that only grows.
 */
void sw_rlog_tick(struct sw_rlog *l, struct sw_transport *t, const struct sw_drain_info *info,
                  int ninfo, uint64_t now_ms);

/* True while lines wait to be sent (or partial lines to be finished). */
bool sw_rlog_pending(const struct sw_rlog *l);

void sw_rlog_get_stats(const struct sw_rlog *l, struct sw_rlog_stats *out);

#endif /* SW_RLOG_H */
