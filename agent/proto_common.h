/*
 * proto_common.h - what the protocol modules of the connection layer (proto.h) share beyond the
 * layer itself: giving up on a connection (counted, logged), and the hook pieces that the
 * modules built on a pure parser (proto_mysql.c, proto_fcgi.c) have alike.
 *
 * Rules: application threads, under the connection's lock (proto.h).
 */
#ifndef SW_PROTO_COMMON_H
#define SW_PROTO_COMMON_H

#include "common.h"

#include "proto.h"

#include <sys/uio.h>

/*
 * The module stops following connection `c`: its framing is lost (bytes that are not the
 * protocol, a message too large or cut, a reply to nothing, a variant not followed). The
 * connection's bytes pass on untouched. Counted: given_up in `swagent status` (the ring's
 * counter) and the layer's SW_CNT_GIVEN_UP; logged as a WARN line naming the module, the
 * peer and `why`, at most one such line a second per process (the next one says how many were
 * not logged). The module ends its waiting spans itself, before or after.
 */
void sw_proto_give_up(struct sw_conn *c, const char *why, int64_t *t);

/* The context of one hook call, for a parser's event callback. */
struct sw_proto_call {
    struct sw_conn *c;
    int64_t *t;
};

/* The first r bytes of the application's write (iov), piece by piece, to feed(c, dir, ...)
 * (a module's written(); `dir` is the parser's direction flag for these bytes). */
typedef void (*sw_proto_bytes_fn)(struct sw_conn *c, bool dir, const uint8_t *p, size_t n,
                                  int64_t *t);
void sw_proto_feed_iov(struct sw_conn *c, const struct iovec *iov, int iovcnt, size_t r, int64_t *t,
                       sw_proto_bytes_fn feed, bool dir);

/*
 * The error() and close() hooks of a module for which both mean "the connection ended":
 * `end(c, t)` ends what it follows (statements or requests still waiting end as errors).
 * Defines static error_() and close_() for the module's struct sw_proto.
 */
#define SW_PROTO_END_HOOKS(end)                                                                    \
    static void error_(struct sw_conn *c, int err, int64_t *t)                                     \
    {                                                                                              \
        (void)err;                                                                                 \
        end(c, t);                                                                                 \
    }                                                                                              \
    static void close_(struct sw_conn *c, bool closing, int64_t *t)                                \
    {                                                                                              \
        (void)closing;                                                                             \
        end(c, t);                                                                                 \
    }

#endif /* SW_PROTO_COMMON_H */
