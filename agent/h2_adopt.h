/*
 * h2_adopt.h - how a connection becomes the HTTP/2 module's other than by its preface: a TLS
 * session whose ALPN selected "h2" (tls.c -> sw_conn_tls_adopt_h2), and an HTTP/1.1 request
 * upgraded by "Upgrade: h2c" (proto_http1.c). The HTTP/2 module's entry points (proto_h2.c)
 * are weak references here: a build without that module (unit tests that link conn.c,
 * proto_http1.c or tls.c alone) sees NULL and keeps the older behaviour (ALPN h2 not
 * followed; a 101 ends the following).
 */
#ifndef SW_H2_ADOPT_H
#define SW_H2_ADOPT_H

#include "common.h"

#include "conn.h"
#include "proto.h"

/* proto_h2.c: under the lock, the connection becomes the HTTP/2 module's from its next byte
 * on; is_server: this process is the server. false: not taken. */
extern bool sw_h2_adopt(struct sw_conn *c, bool is_server) __attribute__((weak)) SW_HIDDEN;

/*
 * proto_h2.c: under the lock, at the 101 response to a request that asked for "Upgrade: h2c"
 * (server: the 101 written; client: the 101 read). The connection becomes the HTTP/2
 * module's; `span` is stream 1's span (server: the entry of the upgraded HTTP/1.1 request;
 * client: its exit; 0 none), started with the HTTP/1.1 head (sw8 read or inserted there) and
 * ended by the HTTP/2 module when stream 1 ends; `p`, `len` are the bytes of the same call
 * after the 101 head, of direction `dir` (server: OUT, already sent; client: IN).
 */
extern void sw_h2_adopt_h2c(struct sw_conn *c, uint64_t span, enum sw_conn_dir dir, const char *p,
                            size_t len, int64_t *t) __attribute__((weak)) SW_HIDDEN;

/*
 * conn.c, for tls.c: at the first data call of a session whose ALPN selected "h2", before any
 * plaintext byte of it: its connection object becomes the HTTP/2 module's (sw_h2_adopt, with
 * the object's role), or is already (its preface was seen). false: not taken (no HTTP/2
 * module, the session is not followed, or its plaintext already went to another module).
 */
bool sw_conn_tls_adopt_h2(sw_conn_ref ref) SW_HIDDEN;

#endif /* SW_H2_ADOPT_H */
