/*
 * json.h - proto3 JSON lines for what the collector-stub receives.
 *
 * Rules: output follows the proto3 JSON mapping with the .proto field names (lowerCamel),
 * enums by name (an unknown number is printed as a number), int64 as strings. For test
 * friendliness every field is always printed, defaults and empty arrays included. Strings
 * must be valid UTF-8: a message with an invalid string is refused whole (-EILSEQ) and
 * nothing of it is written. protobuf-c keeps strings NUL-terminated, so a string with an
 * embedded U+0000 is cut at the NUL.
 */
#ifndef SW_STUB_JSON_H
#define SW_STUB_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "language-agent/ConfigurationDiscoveryService.pb-c.h"
#include "language-agent/Meter.pb-c.h"
#include "language-agent/Tracing.pb-c.h"
#include "logging/Logging.pb-c.h"
#include "management/Management.pb-c.h"

/* A growable output buffer. Zero-initialise it; release it with sw_json_free(). */
struct sw_json {
    char *p;    /* the text, NUL-terminated while len < cap */
    size_t len; /* bytes used */
    size_t cap; /* bytes allocated */
    bool oom;   /* set once an allocation failed; later appends are dropped */
};

void sw_json_free(struct sw_json *j);
void sw_json_reset(struct sw_json *j);

/* Append raw bytes (no escaping). */
void sw_json_append(struct sw_json *j, const char *s, size_t n);

/* True if s[0..n) is well-formed UTF-8 (no overlongs, no surrogates, at most U+10FFFF). */
bool sw_json_utf8_valid(const char *s, size_t n);

/* Append s[0..n) as a quoted JSON string; -EILSEQ if it is not valid UTF-8. */
int sw_json_put_string(struct sw_json *j, const char *s, size_t n);

/*
 * Append one message as a JSON object (no newline). Returns 0, -EILSEQ for invalid UTF-8
 * or -ENOMEM. On error the buffer content is unspecified; reset it before reuse. The
 * management forms start with a "method" member naming the RPC, then the message fields.
 */
int sw_json_segment(struct sw_json *j, const Skywalking__V3__SegmentObject *seg);
int sw_json_instance_properties(struct sw_json *j, const char *method,
                                const Skywalking__V3__InstanceProperties *m);
int sw_json_ping(struct sw_json *j, const char *method, const Skywalking__V3__InstancePingPkg *m);
/*
 * One line for the meters of one MeterDataCollection (collectBatch) or one MeterData (collect):
 * {"method", "meters": [{"service", "serviceInstance", "timestamp", "name", "labels",
 * "value" | "buckets": [{"bucket", "count", "isNegativeInfinity"}]}]}. A value that JSON cannot
 * hold (NaN, an infinity) is printed as null.
 */
int sw_json_meters(struct sw_json *j, const char *method, Skywalking__V3__MeterData *const *m,
                   size_t n);
int sw_json_cds(struct sw_json *j, const char *method,
                const Skywalking__V3__ConfigurationSyncRequest *m);

/*
 * One line per LogData (LogReportService/collect): {"method", "service", "serviceInstance",
 * "endpoint", "layer", "timestamp", "type", "text" (the body's text, json or yaml), "traceContext":
 * {"traceId", "traceSegmentId", "spanId"} or null, "tags": [{"key","value"}]}.
 */
int sw_json_log(struct sw_json *j, const char *method, const Skywalking__V3__LogData *d);

#endif /* SW_STUB_JSON_H */
