/*
 * server.h - the collector-stub gRPC server (grpc core C API, one completion queue).
 *
 * Rules: one thread drives everything from one completion queue; each call is a small state
 * machine whose batches carry tags pointing back at it. Output files are written and flushed
 * one line per received message (one line per segment; a collectInSync collection is written
 * with one write), so tests can read them while the stub runs. With `discard` segments are
 * only parsed and counted; the totals are logged when the server stops.
 */
#ifndef SW_STUB_SERVER_H
#define SW_STUB_SERVER_H

#include <stdbool.h>
#include <stdio.h>

struct sw_stub_options {
    const char *listen;        /* host:port; port 0 picks a free one */
    FILE *segments;            /* one JSON line per SegmentObject */
    FILE *management;          /* one JSON line per management / CDS call, or NULL to discard */
    FILE *logs;                /* one JSON line per LogData; NULL: with management */
    FILE *meters;              /* one JSON line per meter message; NULL: with management */
    const char *auth;          /* required `authentication` metadata value, or NULL */
    const char *port_file;     /* where to write the bound port, or NULL */
    const char *tls_cert;      /* PEM server certificate chain: serve TLS (with tls_key) */
    const char *tls_key;       /* PEM server private key */
    const char *tls_client_ca; /* PEM CA: require and verify client certificates (mTLS) */
    bool discard;              /* segments are parsed and counted, never formatted or written */
    bool no_sync;              /* collectInSync answers UNIMPLEMENTED (an old OAP) */
    /*
     * Segment messages (collect, collectInSync) that carry at least one byte are numbered from
     * 1 as they arrive; those numbered fail_from..fail_to (0: none) are answered UNAVAILABLE
     * and nothing of them is written. Empty ones (a client's probe) are always answered OK.
     */
    unsigned long fail_from, fail_to;
    /*
     * Nonzero: a message larger than this, as received or once inflated, is answered
     * RESOURCE_EXHAUSTED "Received message larger than max (N vs. M)", as gRPC servers answer
     * one above their limit (a proxy or an OAP with a smaller gRPC message size).
     */
    size_t max_message;
    /* That refusal in grpc-java's words, as the OAP (a Java gRPC server) answers it:
     * "gRPC message exceeds maximum size M: N". */
    bool java_wording;
    /* fetchConfigurations is answered from this file (cds.c); NULL: always no command. */
    const char *cds_file;
    FILE *profile; /* one JSON line per ThreadSnapshot, task poll and task end (profile.h) */
};

/* Set by the SIGTERM/SIGINT handler; the server loop notices it within 200 ms. */
void sw_stub_server_request_stop(void);

/*
 * Serve until stopped by sw_stub_server_request_stop(). Returns 0 after a clean shutdown
 * (all calls finished, files flushed) or -errno if the server could not start.
 */
int sw_stub_server_run(const struct sw_stub_options *opt);

#endif /* SW_STUB_SERVER_H */
