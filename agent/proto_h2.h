/*
 * proto_h2.h - the HTTP/2 (and gRPC) protocol module (proto_h2.c): what other code calls.
 */
#ifndef SW_PROTO_H2_H
#define SW_PROTO_H2_H

#include "common.h"

#include "proto.h"

extern const struct sw_proto sw_proto_h2 SW_HIDDEN;

/*
 * Under the connection's lock (a module hook, or tls.c / conn.c holding it): the connection
 * becomes the h2 module's from its next byte on, before any HTTP/2 byte was parsed (TLS: the
 * session's ALPN selected "h2"). is_server: this process is the server (it reads the client
 * preface). false: not taken (c is not followed any more).
 */
bool sw_h2_adopt(struct sw_conn *c, bool is_server);

/*
 * h2c upgrade, under the lock, at the 101 (server: written; client: read): the connection
 * becomes the h2 module's; `span` is stream 1's span, already started from the HTTP/1.1 head
 * (server: its entry, ended when this side writes END_STREAM on stream 1; client: its exit,
 * ended at the peer's END_STREAM or RST_STREAM on stream 1; 0: none). `p`, `len`: the bytes
 * of the same call after the 101 head, direction `dir` (OUT: already sent), parsed as HTTP/2.
 */
void sw_h2_adopt_h2c(struct sw_conn *c, uint64_t span, enum sw_conn_dir dir, const char *p,
                     size_t len, int64_t *t);

/* Counters (`swagent status`, tests). */
struct sw_h2_stats {
    uint64_t conns;          /* connections followed as HTTP/2 */
    uint64_t streams;        /* streams traced (entries and exits) */
    uint64_t sw8_inserted;   /* request header blocks that got sw8 */
    uint64_t sw8_skipped;    /* ... that did not: no room in the frame or header list, the
                                frame header already sent, an edit pending, the app's own sw8 */
    uint64_t streams_full;   /* streams not traced: the connection's stream table was full */
    uint64_t bad_preface;    /* connections dropped: the client preface was not HTTP/2's */
    uint64_t hpack_errors;   /* connections dropped: a header block failed to decode */
    uint64_t table_too_big;  /* connections dropped: a dynamic table above 4096 bytes */
    uint64_t list_too_big;   /* connections dropped: a header list / block above the limits */
    uint64_t proto_errors;   /* connections dropped: framing errors (CONTINUATION flood, a
                                frame inside a header block, stream 0 HEADERS, bad padding) */
    uint64_t unknown_frames; /* frames of unknown types (ignored) */
};
void sw_h2_get_stats(struct sw_h2_stats *out);

#endif /* SW_PROTO_H2_H */
