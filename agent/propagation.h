/*
 * propagation.h - the `sw8`, `sw8-correlation` and `sw8-x` headers (SkyWalking cross-process
 * propagation v3): decode on entry, encode on exit.
 *
 * Runs on application threads: no allocation, no syscall; fixed-size outputs. Input is
 * untrusted: every field is length-checked; anything malformed makes the context invalid,
 * which callers treat as absent (a new trace), never as an error of the request.
 */
#ifndef SW_PROPAGATION_H
#define SW_PROPAGATION_H

#include "common.h"

#define SW_ID_MAX 64         /* trace and segment ids */
#define SW_PROP_NAME_MAX 128 /* service, instance */
#define SW_PROP_EP_MAX 160   /* endpoint */
#define SW_PROP_ADDR_MAX 208 /* network address used at peer */
#define SW_SW8_MAX 2048      /* an encoded sw8 value is below this */
#define SW_CORR_MAX 1024     /* an sw8-correlation value kept and passed on */

/* A decoded sw8 header. */
struct sw_sw8 {
    bool valid;                        /* all 7 non-flag fields present, span id >= 0 */
    bool sample;                       /* field 1 (informational: a valid sw8 forces sampling) */
    int32_t parent_span_id;            /* field 4 */
    char trace_id[SW_ID_MAX];          /* field 2, decoded */
    char parent_segment_id[SW_ID_MAX]; /* field 3 */
    char parent_service[SW_PROP_NAME_MAX];  /* field 5 */
    char parent_instance[SW_PROP_NAME_MAX]; /* field 6 */
    char parent_endpoint[SW_PROP_EP_MAX];   /* field 7 */
    char address[SW_PROP_ADDR_MAX];         /* field 8: networkAddressUsedAtPeer */
    /* valid: the strlen of the six strings above, in their order (trace_id .. address) */
    uint16_t len[6];
};

/* Decodes an sw8 value (without the header name). Sets out->valid; never fails otherwise. An
 * invalid result is all zero. */
void sw_sw8_decode(const char *value, size_t len, struct sw_sw8 *out);

/*
 * Encodes an sw8 value into `buf` (not NUL-terminated). Returns its length, or 0 if it did not
 * fit in `cap` (callers then send no sw8).
 */
size_t sw_sw8_encode(char *buf, size_t cap, const char *trace_id, const char *segment_id,
                     int32_t span_id, const char *service, const char *instance,
                     const char *endpoint, const char *address);

/*
 * The service and instance fields of sw8 encoded once (they do not change in a process):
 * writes "<b64 service>-<b64 instance>-" and returns its length, 0 when a name is empty or it
 * does not fit.
 */
size_t sw_sw8_svc_inst(char *out, size_t cap, const char *service, const char *instance);

/* sw_sw8_encode with the trace and segment id fields already base64-encoded and `svc_inst` what
 * sw_sw8_svc_inst() wrote. */
size_t sw_sw8_encode_pre(char *buf, size_t cap, const char *trace_b64, size_t trace_b64_len,
                         const char *seg_b64, size_t seg_b64_len, int32_t span_id,
                         const char *svc_inst, size_t svc_inst_len, const char *endpoint,
                         const char *address);

/*
 * Validates and normalises an sw8-correlation value: keeps at most `max_elems` items of the
 * form base64(key):base64(value) whose decoded value is at most `max_value_len` bytes.
 * Writes the kept items, comma-joined, to `out` (NUL-terminated). Returns the length written
 * (0: nothing to pass on).
 */
size_t sw_correlation_filter(const char *value, size_t len, int max_elems, int max_value_len,
                             char *out, size_t cap);

/* A decoded sw8-x header. */
struct sw_sw8x {
    bool skip_analysis;   /* field 1 == "1" */
    int64_t send_time_ms; /* field 2, 0 when absent */
};

void sw_sw8x_decode(const char *value, size_t len, struct sw_sw8x *out);

/* Standard RFC 4648 base64 with padding. Return the output length, or -1 (bad input/space). */
long sw_b64_encode(const void *src, size_t len, char *out, size_t cap);
long sw_b64_decode(const char *src, size_t len, void *out, size_t cap);

#endif /* SW_PROPAGATION_H */
