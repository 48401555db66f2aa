/*
 * proto_http1.h - the HTTP/1.x protocol module (proto_http1.c): its entry in the module list
 * and the direct entry points of the connection layer's fast paths (conn.c): the usual read of
 * a request and write of a response by a server take them instead of the module's hooks, so
 * the per-request path has no indirect call. Same rules as the hooks (proto.h): under the
 * connection's lock, the connection not dead.
 */
#ifndef SW_PROTO_HTTP1_H
#define SW_PROTO_HTTP1_H

#include "proto.h"

#include <sys/uio.h>

struct sw_config;

extern const struct sw_proto sw_proto_http1 SW_HIDDEN;

/* Parsing options from the configuration (sw_conn_init). */
void sw_http1_init(const struct sw_config *cfg);

/* A server read r > 0 request bytes at p. */
void sw_http1_server_read(struct sw_conn *c, const char *p, size_t r);

/* A server wrote r > 0 bytes from one buffer p (t: the clock read before the write, or 0). */
void sw_http1_server_wrote(struct sw_conn *c, const char *p, size_t r, int64_t t);

/* The dead flag and the module's response-following state are both 0 (one load): the usual
 * write of a server goes straight to sw_http1_server_wrote(). */
static inline __attribute__((always_inline)) bool sw_http1_usual(const struct sw_conn *c)
{
    uint16_t w;
    memcpy(&w, &c->dead, sizeof(w));
    return w == 0;
}
_Static_assert(offsetof(struct sw_conn, mflag) == offsetof(struct sw_conn, dead) + 1,
               "sw_http1_usual: dead and mflag[0] adjacent");

#endif /* SW_PROTO_HTTP1_H */
