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
#include "proto_h2.h"

/* proto_h2.h's sw_h2_adopt (TLS) and sw_h2_adopt_h2c (the 101), weak here. */
#pragma weak sw_h2_adopt
#pragma weak sw_h2_adopt_h2c

/*
 * conn.c, for tls.c: at the first data call of a session whose ALPN selected "h2", before any
 * plaintext byte of it: its connection object becomes the HTTP/2 module's (sw_h2_adopt, with
 * the object's role), or is already (its preface was seen). false: not taken (no HTTP/2
 * module, the session is not followed, or its plaintext already went to another module).
 */
bool sw_conn_tls_adopt_h2(sw_conn_ref ref) SW_HIDDEN;

#endif /* SW_H2_ADOPT_H */
