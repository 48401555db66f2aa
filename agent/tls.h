/*
 * tls.h - what the rest of the agent sees of tls.c (the TLS libraries' plaintext calls).
 *
 * tls.c maps TLS sessions (SSL*, gnutls_session_t) to connection objects of the connection
 * layer (conn.h, "TLS sessions"), which owns everything else: the "inside a TLS call" marker
 * for the socket paths, parsing, insertion, the retry rules.
 */
#ifndef SW_TLS_H
#define SW_TLS_H

#include "common.h"

/* Counters (tests, the log). */
struct sw_tls_stats {
    uint64_t sessions;     /* sessions followed (opened on a connection object) */
    uint64_t no_fd;        /* of those, opened without an fd (memory BIO, GnuTLS) */
    uint64_t table_full;   /* sessions not followed: the session table was full */
    uint64_t not_followed; /* sessions not followed: pool full, fd not tracked, agent off */
    uint64_t h2;           /* sessions not followed: ALPN h2 and no HTTP/2 module took it */
    uint64_t h2_followed;  /* sessions with ALPN h2 handed to the HTTP/2 module */
    uint64_t early_data;   /* 0-RTT calls (passed unedited) */
    uint64_t unresolved;   /* a real TLS function could not be found (the call failed) */
};
void sw_tls_get_stats(struct sw_tls_stats *out);

#endif /* SW_TLS_H */
