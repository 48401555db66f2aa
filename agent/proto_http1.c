/*
 * proto_http1.c - the HTTP/1.x protocol module: entry spans on served connections, exit spans
 * and the sw8 insertion on client connections, on top of the connection layer (conn.c,
 * proto.h), which owns the byte streams and carries out the insertion this module plans.
 *
 * Runs on application threads under the connection's lock (proto.h): no malloc, no stdio, no
 * syscall. The default module: TCP connections no other module claims come here; a Unix-domain
 * stream comes here when its first bytes look like HTTP/1.x (sniff).
 *
 * Client writes (c->out_ahead): the request bytes are parsed ahead of the kernel; at the end of
 * a request head the exit span starts and its sw8 (and sw8-correlation) lines are inserted just
 * before the head's final CRLF (sw_conn_out_insert). A trailing "\r" at a line start of a head
 * may begin the blank line: it is held back (sw_conn_out_hold) so the insertion can still go
 * before it. A write carrying more than one message while the insertion is pending is cut at
 * the end of the first (sw_conn_out_pause). A proxy that forwards the sw8 it received: see
 * forwarded_headers().
 *
 * Heuristics and limits (documented in docs/architecture.md):
 * - Current request: an entry span becomes the thread's current request when its head is read
 *   (trace), and again whenever its connection is read or written on that thread; reading a
 *   client's response makes its exit's request current (an event loop handles that request).
 *   A client's first request head joins the request that was the thread's when connect() was
 *   made, later heads (keep-alive reuse) the thread's request when they are written
 *   (sw_conn_exit_parent).
 * - Span handles of up to SW_CONN_SPANS pipelined requests per connection; deeper ones are
 *   ended as errors ("pipeline too deep") and not followed.
 * - sendfile bytes are counted as body bytes (a Content-Length body's count goes down,
 *   sw_http_body_unseen; otherwise zeros are fed to the framing); a head sent from a file
 *   stops the following of that connection.
 *
 * Untraced responses (server side). A request that records nothing (unsampled, or shed:
 * sw_trace_entry_unrecorded) needs nothing from its response, so its bytes are not parsed,
 * and no clock is read for its writes; following them cost more than all the rest of such a
 * request (nginx's response head has eight lines). Only the next recorded request needs to
 * know where its own response begins. States (rs, c->mflag[0]):
 * - RS_PARSE: everything written is parsed. An unrecorded request read while no response is
 *   pending and the parser stands between messages -> RS_SKIP.
 * - RS_SKIP: the span queue holds that request; writes are only noted (rs_wrote). At the next
 *   request head: nothing written since the last one means the client pipelined (it sent the
 *   next request before the response), the parser still stands right -> RS_PARSE for good
 *   (rs_never). Otherwise the response began, so the request is ended (no status; it records
 *   nothing) and the new one decides: unrecorded -> RS_LOST, recorded -> RS_RESYNC.
 * - RS_LOST: as RS_SKIP, but the stream position is not known; a pipelined head (nothing
 *   written since the last one) -> RS_RESYNC with both requests (the next status line begins
 *   the older one's response: nothing of it was written).
 * - RS_RESYNC: the queue holds requests whose responses are still to come. The first write that
 *   begins with a status line ("HTTP/1.x ddd") resumes parsing from its first byte (-> RS_PARSE;
 *   the parser's queue holds the span queue's methods). Writes before it are the rest of a
 *   response we did not follow and are skipped, unless they may hide a status line (one not at
 *   their start, or cut short, or a sendfile): then we stop following the connection and its
 *   requests end without a status (rs_given_up).
 * Without pipelining a client sends the next request only once it has the whole response, so
 * the next status line written is that request's. A pipelining client whose request arrives
 * in the middle of an unfollowed response's body is followed right too (the body's writes do
 * not begin with a status line). What is not: a body write that begins with "HTTP/1.x ddd"
 * while RS_RESYNC waits (the waiting request then gets that body's "status" and end), or a
 * status line whose first bytes end a write of other bytes ("...HT", then "TP/1.1 200": it is
 * missed, and the waiting request gets the next response's status and end).
 */
#include "common.h"

#include "config.h"
#include "h2_adopt.h"
#include "http.h"
#include "proto.h"
#include "proto_common.h"
#include "proto_http1.h"
#include "trace.h"

#include <string.h>
#include <sys/socket.h>

/* A server's response stream ("Untraced responses"), in c->mflag[0]. */
enum rs {
    RS_PARSE,  /* every written byte goes to the response parser */
    RS_RESYNC, /* the queue holds requests whose responses are to come; the next write that
                  begins with a status line begins the first of them */
    RS_SKIP,   /* the queue holds one unrecorded request; the parser stands at its response */
    RS_LOST,   /* the queue holds one unrecorded request (or none); where a response starts is
                  not known */
};

/* The module's per-connection state (c->state). c->mflag[0] is rs (changed under the lock,
 * read outside it only by the layer's clock flag), c->mflag[1] ri_ext: ri carries an sw8,
 * sw8-correlation or sw8-x value (server). */
struct http1_conn {
    struct sw_http reqp;  /* requests: read (server) or written (client) */
    struct sw_http respp; /* responses: written (server) or read (client) */
    int resp_status;      /* status of the response head being framed */
    bool req_stopped;     /* the request direction switched protocol (CONNECT/Upgrade) */
    bool nm_alive;        /* header-name scanner: still reading a name on this line */
    uint8_t nm_len;
    uint8_t rs_method; /* RS_LOST: the method of the request in the queue */
    bool rs_wrote;     /* RS_SKIP/LOST/RESYNC: bytes were written since the last request head */
    bool rs_never;     /* pipelined requests were seen: always follow the responses */
    char tail[2];      /* client: the last two bytes parsed (tail[1] is the last) */
    char nm[16];
    int64_t req_start_ms; /* first byte of the request in progress */
    /* Client: propagation headers the application itself writes (a proxy forwarding them). */
    uint64_t app_sw8_abs;  /* stream offset of its "sw8:" line, SW_CONN_NO_ABS if none */
    uint64_t app_corr_abs; /* stream offset of its "sw8-correlation:" line */
    uint64_t line_abs;     /* stream offset of the current head line */
    /* Server: what sw_trace_entry_start() is told about each request head. The parts that do
     * not change between requests (method buffer, peer, tls) are set at attach; each head
     * stores only the rest (server_head). */
    struct sw_req_info ri;
    struct sw_http_req req; /* captures of the request parser */
};
SW_PROTO_STATE_CHECK(struct http1_conn);

#define RS(c) ((c)->mflag[0])
#define RI_EXT(c) ((c)->mflag[1])

static inline __attribute__((always_inline)) struct http1_conn *H(struct sw_conn *c)
{
    return (struct http1_conn *)(void *)c->state;
}

static struct sw_http_opts http_opts;
static uint16_t exclude_ports[SW_CFG_LIST_MAX]; /* plugin.httpclient.propagation_exclude_ports */
static int n_exclude_ports;

static const char zeros[4096];

/* Two adjacent bytes of a connection as one word (little-endian: `first` in the low byte). */
static inline __attribute__((always_inline)) uint16_t flags2(const void *first)
{
    uint16_t w;
    memcpy(&w, first, sizeof(w));
    return w;
}

void sw_http1_init(const struct sw_config *cfg)
{
    sw_http_opts_init(&http_opts);
    http_opts.fold_message = true; /* one event for a message without body (see http.h) */
    /* The target and Host of a request head may stay in the caller's bytes: every reader here
     * (req_info, exit_peer) runs at that HEAD event, inside the call that holds them. */
    http_opts.capture_refs = true;
    n_exclude_ports = 0;
    if (!cfg)
        return;
    if (cfg->http_headers_length_threshold > 0)
        http_opts.headers_threshold = (uint32_t)cfg->http_headers_length_threshold;
    for (int i = 0; i < cfg->include_http_headers.n; i++)
        sw_http_opts_add_header(&http_opts, cfg->include_http_headers.item[i],
                                strlen(cfg->include_http_headers.item[i]));
    for (int i = 0; i < cfg->propagation_exclude_ports.n; i++) {
        const char *ps = cfg->propagation_exclude_ports.item[i];
        unsigned v = 0;
        while (*ps == ' ')
            ps++;
        while (*ps >= '0' && *ps <= '9' && v <= 65535)
            v = v * 10 + (unsigned)(*ps++ - '0');
        if (v > 0 && v <= 65535 && n_exclude_ports < SW_CFG_LIST_MAX)
            exclude_ports[n_exclude_ports++] = (uint16_t)v;
    }
}

static void http1_attach(struct sw_conn *c)
{
    struct http1_conn *s = H(c);
    RS(c) = RS_PARSE;
    RI_EXT(c) = false;
    s->resp_status = 0;
    s->req_stopped = false;
    s->req_start_ms = 0;
    s->tail[0] = s->tail[1] = 0;
    s->app_sw8_abs = s->app_corr_abs = SW_CONN_NO_ABS;
    s->nm_alive = true;
    s->nm_len = 0;
    s->line_abs = 0;
    s->rs_wrote = s->rs_never = false;
    sw_http_init(&s->reqp, SW_HTTP_REQUEST, &http_opts, &s->req);
    sw_http_init(&s->respp, SW_HTTP_RESPONSE, &http_opts, NULL);
    if (c->role == SW_ROLE_SERVER) {
        memset(&s->ri, 0, sizeof(s->ri));
        s->ri.method = s->req.method_text;
        s->ri.peer = c->peer;
        s->ri.peer_len = c->peer_len;
        s->ri.tls = c->tls;
    } else {
        c->out_ahead = true; /* request heads are parsed before they go out (sw8) */
    }
}

/* A Unix-domain stream is HTTP/1.x when it begins with a request line (a method token and a
 * space) or a status line ("HTTP/1."). */
static enum sw_sniff http1_sniff(const struct sw_conn *c, enum sw_conn_dir dir, const char *p,
                                 size_t len)
{
    (void)c, (void)dir;
    size_t k = len < 7 ? len : 7;
    if (memcmp(p, "HTTP/1.", k) == 0)
        return len >= 7 ? SW_SNIFF_YES : SW_SNIFF_MORE;
    size_t i = 0;
    while (i < len && i < 16 && p[i] >= 'A' && p[i] <= 'Z')
        i++;
    if (i == len && i < 16)
        return SW_SNIFF_MORE;
    return i >= 3 && i < len && p[i] == ' ' ? SW_SNIFF_YES : SW_SNIFF_NO;
}

/*
 * A response (server: written; client: read) is complete. Inlined: once per request. Runs
 * under the lock, which holds the guard.
 */
static inline __attribute__((always_inline)) void response_done_as(struct sw_conn *c, int status,
                                                                   int64_t t, int role)
{
    uint64_t h = sw_conn_span_pop(c);
    if (!h)
        return;
    if (role == SW_ROLE_SERVER)
        sw_trace_entry_finish(h, status, t);
    else
        sw_trace_exit_finish(h, status, t);
}

static inline __attribute__((always_inline)) void response_done(struct sw_conn *c, int status,
                                                                int64_t t)
{
    response_done_as(c, status, t, c->role);
}

/* Fills the common part of a sw_req_info from the request captures (the optional strings
 * are NULL when absent; sw8, correlation, sw8-x and the peer are the caller's). */
static inline void req_info(struct sw_conn *c, struct sw_req_info *ri)
{
    const struct sw_http_req *r = &H(c)->req;
    size_t tl, hl;
    const char *target = sw_http_req_target(r, &tl), *host = sw_http_req_host(r, &hl);
    *ri = (struct sw_req_info){
        .method = r->method_text,
        .method_len = r->method_len,
        .target = target,
        .target_len = tl,
        .host = hl ? host : NULL,
        .host_len = hl,
        .headers_tag = r->headers_len ? r->headers : NULL,
        .headers_tag_len = r->headers_len,
        .tls = c->tls,
        /* A copied target lies in the capture buffer (see the assertion below); one in the
         * caller's bytes may not be read past its end. */
        .padded = r->target_ref == NULL,
        .path_valid = r->path_valid,
        .path_len = r->path_len,
        .path_suffix = r->path_suffix,
    };
}
_Static_assert(SW_HTTP_TARGET_MAX % 16 == 0, "a captured target is readable in 16-byte blocks");
_Static_assert(
    offsetof(struct sw_http_req, corr_len) == offsetof(struct sw_http_req, sw8_len) + 2 &&
        offsetof(struct sw_http_req, sw8x_len) == offsetof(struct sw_http_req, sw8_len) + 4 &&
        offsetof(struct sw_http_req, headers_len) == offsetof(struct sw_http_req, sw8_len) + 6 &&
        __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
    "server_head: four lengths in one little-endian word");

/* ---- untraced responses ---------------------------------------------------------------------- */

static void rs_set(struct sw_conn *c, enum rs v)
{
    __atomic_store_n(&RS(c), (uint8_t)v, __ATOMIC_RELAXED);
    /* No span can end on a write in RS_SKIP or RS_LOST: the layer reads no clock for it. */
    __atomic_store_n(&c->out_noclock, v >= RS_SKIP, __ATOMIC_RELAXED);
}

/* Ends the requests of the queue without a status: their responses were not followed. */
static inline __attribute__((always_inline)) void rs_drop(struct sw_conn *c, int64_t *t)
{
    while (c->span_len) {
        uint64_t h = sw_conn_span_pop(c);
        if (h)
            sw_trace_entry_finish(h, 0, sw_conn_now(t)); /* the lock holds the guard */
    }
}

/* Stops following the connection (a response start that may have been missed). */
static SW_NOINLINE void rs_give_up(struct sw_conn *c, int64_t *t)
{
    rs_drop(c, t);
    sw_proto_give_up(c, "a response's start was lost after an unfollowed response", t);
}

/* A request head after the previous response's position was lost (see "Untraced responses"). */
static inline __attribute__((always_inline)) void rs_lost_head(struct sw_conn *c, uint64_t h,
                                                               enum sw_http_method m)
{
    struct http1_conn *s = H(c);
    s->rs_wrote = false;
    sw_conn_span_push(c, h);
    if (sw_trace_entry_unrecorded(h)) {
        s->rs_method = (uint8_t)m;
        rs_set(c, RS_LOST);
    } else {
        sw_http_init(&s->respp, SW_HTTP_RESPONSE, &http_opts, NULL);
        sw_http_push_response_of(&s->respp, m);
        rs_set(c, RS_RESYNC);
    }
}

/*
 * server_head()'s request when it records nothing or the responses are not all followed: the
 * transitions of "Untraced responses" at a request head, but for the usual one while skipping
 * (the request of the queue ended, its response having begun: server_head_rest). Under the
 * lock.
 */
SW_HOT static SW_NOINLINE void server_head_rs(struct sw_conn *c, uint64_t h, enum sw_http_method m)
{
    struct http1_conn *s = H(c);
    switch (RS(c)) {
    case RS_LOST:
        /* Pipelined (the queue still holds one): nothing was written for it, so the next status
         * line begins its response, and the parser follows from there on. */
        s->rs_never = true;
        sw_http_init(&s->respp, SW_HTTP_RESPONSE, &http_opts, NULL);
        sw_http_push_response_of(&s->respp, (enum sw_http_method)s->rs_method);
        rs_set(c, RS_RESYNC);
        break;
    case RS_SKIP:
        /* Pipelined: the parser still stands at the first one's response. */
        s->rs_never = true;
        rs_set(c, RS_PARSE);
        break;
    case RS_PARSE: /* h records nothing */
        if (!s->rs_never && !c->span_len && m != SW_HTTP_M_CONNECT &&
            !sw_http_head_in_progress(&s->respp) && !sw_http_in_body(&s->respp) &&
            !sw_http_has_pending(&s->respp)) {
            s->rs_wrote = false;
            rs_set(c, RS_SKIP);
        }
        break;
    default: /* RS_RESYNC: one more response to come */
        break;
    }
    s->rs_wrote = false;
    sw_conn_span_push(c, h);
    sw_http_push_response_of(&s->respp, m);
}

/*
 * True when `b` (n bytes) begins with a status line ("HTTP/1.x ddd"); *maybe: it may begin
 * one that the bytes are too short to show.
 */
static bool rs_status_line(const char *b, size_t n, bool *maybe)
{
    static const char pat[] = "HTTP/1.";
    size_t k = n < 7 ? n : 7;
    *maybe = false;
    if (memcmp(b, pat, k) != 0)
        return false;
    for (size_t i = 7; i < 12; i++) {
        if (i >= n) {
            *maybe = true;
            return false;
        }
        char ch = b[i];
        bool ok = i == 7 ? (ch == '0' || ch == '1') : i == 8 ? ch == ' ' : ch >= '0' && ch <= '9';
        if (!ok)
            return false;
    }
    return true;
}

/*
 * A server wrote `r` > 0 bytes of `iov` in RS_RESYNC (under the lock). Returns true when they
 * are to be fed to the response parser: they begin with the status line waited for. Otherwise
 * they are skipped, and bytes that may hold a status line elsewhere (not at their start, or
 * cut short) end the following of the connection.
 */
static SW_NOINLINE bool rs_written(struct sw_conn *c, const struct iovec *iov, int iovcnt, size_t r,
                                   int64_t *t)
{
    static const char pat[] = "HTTP/1.";
    H(c)->rs_wrote = true;
    char first[12], tail[6], sb[12];
    size_t nf = 0, nt = 0;  /* bytes in first (the write's first ones), tail (its last ones) */
    bool elsewhere = false; /* "HTTP/1." past the first byte */
    for (int i = 0; i < iovcnt && r; i++) {
        size_t l = iov[i].iov_len < r ? iov[i].iov_len : r;
        const char *b = iov[i].iov_base;
        r -= l;
        if (!l)
            continue;
        size_t k = l < 6 ? l : 6;
        for (size_t j = 0; j < l && nf < sizeof(first); j++)
            first[nf++] = b[j];
        /* across the seam with the bytes before, then inside this piece */
        memcpy(sb, tail, nt);
        memcpy(sb + nt, b, k);
        if (nt && memmem(sb, nt + k, pat, 7))
            elsewhere = true;
        if (i == 0 ? l > 7 && memmem(b + 1, l - 1, pat, 7) : l >= 7 && memmem(b, l, pat, 7))
            elsewhere = true;
        /* the last six bytes so far */
        size_t all = nt + l;
        if (l >= 6) {
            memcpy(tail, b + l - 6, 6);
        } else {
            memcpy(sb, tail, nt);
            memcpy(sb + nt, b, l);
            memcpy(tail, sb + (all > 6 ? all - 6 : 0), all > 6 ? 6 : all);
        }
        nt = all > 6 ? 6 : all;
    }
    bool maybe;
    if (rs_status_line(first, nf, &maybe)) {
        rs_set(c, RS_PARSE);
        return true;
    }
    /* A status line cut short, one inside the bytes, or a start that looks like one but is
     * not: where the response begins is not certain. */
    if (maybe || elsewhere || (nf >= 7 && memcmp(first, pat, 7) == 0))
        rs_give_up(c, t);
    return false;
}

/*
 * The first write of a keepable request's response (trace.h, sw_trace_entry_respond; the span
 * queue holds it alone): its status line tells the trace module, which may keep the request;
 * a kept one's response is followed from these bytes on (true: feed them).
 */
static SW_NOINLINE bool rs_keep(struct sw_conn *c, const struct iovec *iov, int iovcnt, size_t r,
                                int64_t *t)
{
    char b[12];
    const char *p = iov[0].iov_base;
    if (SW_UNLIKELY(iov[0].iov_len < sizeof(b) || r < sizeof(b))) { /* gather the first 12 */
        size_t n = 0;
        for (int i = 0; i < iovcnt && n < sizeof(b) && n < r; i++)
            for (size_t j = 0; j < iov[i].iov_len && n < sizeof(b) && n < r; j++)
                b[n++] = ((const char *)iov[i].iov_base)[j];
        if (n < sizeof(b))
            return false;
        p = b;
    }
    /* "HTTP/1.x ddd" (rs_status_line, in two loads and a few compares), a status 100..999: a
     * "0dd" one is no status the trace module is asked about (the request is then not kept) */
    uint64_t w;
    memcpy(&w, p, 8);
    unsigned d0 = (unsigned)(p[9] - '0'), d1 = (unsigned)(p[10] - '0'),
             d2 = (unsigned)(p[11] - '0');
    if ((w & 0xfeffffffffffffffull) != 0x302e312f50545448ull || p[8] != ' ' || d0 - 1 > 8 ||
        d1 > 9 || d2 > 9 ||
        !sw_trace_entry_respond(sw_conn_span_front(c), (int)(d0 * 100 + d1 * 10 + d2),
                                sw_conn_now(t)))
        return false;
    if (RS(c) == RS_LOST) { /* the parser's position was lost: it starts at this status line */
        struct http1_conn *s = H(c);
        sw_http_init(&s->respp, SW_HTTP_RESPONSE, &http_opts, NULL);
        sw_http_push_response_of(&s->respp, (enum sw_http_method)s->rs_method);
    }
    rs_set(c, RS_PARSE);
    return true;
}

/*
 * A server wrote `r` > 0 bytes of `iov` while not every response is followed and the
 * connection is not dead (under the lock): true when they are to be fed to the response
 * parser (RS_RESYNC found its status line, or a keepable request is kept: rs_keep).
 */
static inline __attribute__((always_inline)) bool
rs_feeds(struct sw_conn *c, const struct iovec *iov, int iovcnt, size_t r, int64_t *t)
{
    if (RS(c) >= RS_SKIP) {
        if (!H(c)->rs_wrote && c->span_len == 1 && sw_trace_entry_keepable(sw_conn_span_front(c)) &&
            rs_keep(c, iov, iovcnt, r, t))
            return true;
        H(c)->rs_wrote = true;
        return false;
    }
    return rs_written(c, iov, iovcnt, r, t);
}

/* ---- server side: requests read, responses written ----------------------------------------- */

/*
 * server_head() for a head with sw8 values (or after one), or while the responses are not all
 * followed (rs; "Untraced responses"): the rest of ri, and the entry starts.
 */
SW_HOT static SW_NOINLINE uint64_t server_head_rest(struct sw_conn *c, enum sw_http_method m,
                                                    int64_t *t, bool ext)
{
    struct http1_conn *s = H(c);
    const struct sw_http_req *r = &s->req;
    struct sw_req_info *ri = &s->ri;
    if (ext) {
        ri->sw8 = r->sw8_len ? r->sw8 : NULL;
        ri->sw8_len = r->sw8_len;
        ri->correlation = r->corr_len ? r->corr : NULL;
        ri->correlation_len = r->corr_len;
        ri->sw8x = r->sw8x_len ? r->sw8x : NULL;
        ri->sw8x_len = r->sw8x_len;
        RI_EXT(c) = (r->sw8_len | r->corr_len | r->sw8x_len) != 0;
    }
    /* The response of the request in the queue began: it ends before the new one starts (the
     * trace module forgets its latest entry cheapest). */
    if (RS(c) >= RS_SKIP && s->rs_wrote)
        rs_drop(c, t);
    uint64_t h = sw_trace_entry_start(ri, s->req_start_ms ? s->req_start_ms : sw_conn_now(t));
    if (RS(c) >= RS_SKIP && !c->span_len) {
        rs_lost_head(c, h, m); /* the usual one while skipping; the others: server_head_rs */
    } else if (RS(c) != RS_PARSE || sw_trace_entry_unrecorded(h)) {
        server_head_rs(c, h, m);
    } else {
        sw_conn_span_push(c, h);
        sw_http_push_response_of(&s->respp, m);
    }
    return h;
}

/*
 * A request head was read: the entry span starts (under the lock, which holds the guard).
 * ri keeps what does not change between requests; only the rest is stored here.
 */
static inline __attribute__((always_inline)) uint64_t server_head(struct sw_conn *c,
                                                                  enum sw_http_method m, int64_t *t)
{
    struct http1_conn *s = H(c);
    const struct sw_http_req *r = &s->req;
    struct sw_req_info *ri = &s->ri;
    size_t hl;
    ri->method_len = r->method_len;
    ri->target = sw_http_req_target(r, &ri->target_len);
    const char *host = sw_http_req_host(r, &hl);
    ri->host = hl ? host : NULL;
    ri->host_len = hl;
    /* sw8_len, corr_len, sw8x_len and headers_len in one load (the last in the top bits). */
    uint64_t lens;
    memcpy(&lens, &r->sw8_len, sizeof(lens));
    size_t hdl = (size_t)(lens >> 48);
    ri->headers_tag = hdl ? r->headers : NULL;
    ri->headers_tag_len = hdl;
    /* A copied target lies in the capture buffer (see the assertion after req_info); one in the
     * caller's bytes may not be read past its end. */
    ri->padded = r->target_ref == NULL;
    ri->path_valid = r->path_valid;
    ri->path_len = r->path_len;
    ri->path_suffix = r->path_suffix;
    /* The usual head: no sw8 values now or before, the responses followed (rs and ri_ext in
     * one load). */
    if (SW_UNLIKELY((lens << 16) | flags2(&RS(c))))
        return server_head_rest(c, m, t, (lens << 16) | RI_EXT(c));
    uint64_t h = sw_trace_entry_start(ri, s->req_start_ms ? s->req_start_ms : sw_conn_now(t));
    if (SW_UNLIKELY(sw_trace_entry_unrecorded(h))) {
        server_head_rs(c, h, m);
        return h;
    }
    sw_conn_span_push(c, h);
    sw_http_push_response_of(&s->respp, m); /* a server's response parser */
    return h;
}

/*
 * The events of request bytes read by a server, from the one in *ev (the call that gave it
 * consumed p[..off)) on: what server_feed_request_in() does after its first sw_http_feed.
 * Returns the handle of the last entry started (`started` if none).
 */
static inline __attribute__((always_inline)) uint64_t
server_events(struct sw_conn *c, const char *p, size_t len, size_t off, struct sw_http_event *ev,
              int64_t *t, uint64_t started)
{
    struct http1_conn *s = H(c);
    for (;;) {
        if (SW_LIKELY(ev->type == SW_HTTP_EV_HEAD)) {
            started = server_head(c, ev->method, t);
        } else if (ev->type == SW_HTTP_EV_NONE) {
            break;
        } else if (ev->type == SW_HTTP_EV_UPGRADE) {
            s->req_stopped = true; /* later bytes are another protocol; the response decides */
            break;
        } else if (ev->type == SW_HTTP_EV_NOT_HTTP) {
            sw_conn_not_proto(c, p, len); /* no request was read before */
            break;
        } else if (ev->type == SW_HTTP_EV_ERROR) {
            sw_proto_give_up(c, "malformed request", t);
            break;
        }
        /* HEAD and MESSAGE change neither dead nor req_stopped. */
        if (off >= len && !sw_http_has_pending(&s->reqp))
            break;
        if (off < len && !sw_http_head_in_progress(&s->reqp) && !sw_http_in_body(&s->reqp))
            s->req_start_ms = sw_conn_now(t);
        off += sw_http_feed_request(&s->reqp, p + off, len - off, ev);
    }
    return started;
}

/* server_events() out of line: the rest of the usual read when it was not usual. */
SW_HOT static SW_NOINLINE uint64_t server_events_rest(struct sw_conn *c, const char *p, size_t len,
                                                      size_t off, struct sw_http_event *ev,
                                                      int64_t *t)
{
    return server_events(c, p, len, off, ev, t, 0);
}

/*
 * Feeds request bytes read by a server (the caller checked !c->dead). Returns the handle of
 * the last entry it started (0: none), which is the thread's current request already.
 * Events may be brief (sw_http_feed_request(), http.h): only type and method are read here.
 */
SW_HOT static uint64_t server_feed_request(struct sw_conn *c, const char *p, size_t len, int64_t *t)
{
    struct http1_conn *s = H(c);
    struct sw_http_event ev;
    /* Once every byte is consumed and no event is held, another call would only say NONE. */
    if (s->req_stopped || (!len && !sw_http_has_pending(&s->reqp)))
        return 0;
    if (len && !sw_http_head_in_progress(&s->reqp) && !sw_http_in_body(&s->reqp))
        s->req_start_ms = sw_conn_now(t);
    size_t off = sw_http_feed_request(&s->reqp, p, len, &ev);
    return server_events(c, p, len, off, &ev, t, 0);
}

/* The request being served becomes current again (an entry just started is). */
static inline __attribute__((always_inline)) void server_touch(struct sw_conn *c, uint64_t started)
{
    uint64_t front = c->span_len ? sw_conn_span_front(c) : 0;
    if (front && !(c->span_len == 1 && front == started))
        sw_trace_touch(front); /* the lock holds the guard */
}

/*
 * A server read `r` > 0 bytes into `p` (one buffer): the usual read of a traced request.
 * Straight through for the usual bytes: a whole head at p[0] between messages (what
 * server_feed_request() does for them, without its loop), else server_events_rest() goes
 * on from the first event, or server_feed_request() does it all.
 */
SW_HOT_PATH void sw_http1_server_read(struct sw_conn *c, const char *p, size_t r)
{
    struct http1_conn *s = H(c);
    int64_t t = 0; /* see sw_conn_now */
    uint64_t started;
    if (SW_LIKELY(!s->req_stopped && sw_http_fast_ready(&s->reqp, r))) {
        /* Between messages (no head begun, no body, nothing held): a request starts. */
        struct sw_http_event ev;
        s->req_start_ms = t = sw_trace_now_ms();
        s->reqp.fflags = 0;
        size_t n = sw_http_fast_request(&s->reqp, p, r, &ev, true);
        if (SW_LIKELY(ev.type == SW_HTTP_EV_HEAD && n == r && !sw_http_has_pending(&s->reqp)))
            started = server_head(c, ev.method, &t);
        else
            started = server_events_rest(c, p, r, n, &ev, &t);
    } else {
        started = server_feed_request(c, p, r, &t);
    }
    server_touch(c, started);
}

/*
 * A 101 response (the head ends at p[end], the call's bytes end at p[len]) switches the connection
 * to HTTP/2 when it says "Upgrade: h2c" (RFC 7540 3.2; a 101 answers only an Upgrade request, and
 * "h2c" in its head is that header's token): the HTTP/2 module takes the connection, stream 1
 * being the upgraded request, whose span (the queue's front) it ends, and gets the rest of the
 * bytes (p[end..len)). True when taken. Limit: a
 * 101 head split over calls with "h2c" in an earlier one is not seen as an upgrade to h2c.
 */
static SW_NOINLINE bool h2c_adopt(struct sw_conn *c, const char *p, size_t end, size_t len,
                                  int64_t *t)
{
    if (!sw_h2_adopt_h2c)
        return false;
    bool h2c = false;
    for (size_t i = 0; i + 3 <= end && !h2c; i++)
        h2c = (p[i] | 0x20) == 'h' && p[i + 1] == '2' && (p[i + 2] | 0x20) == 'c';
    if (!h2c)
        return false;
    uint64_t h = sw_conn_span_pop(c);
    bool server = c->role == SW_ROLE_SERVER;
    sw_h2_adopt_h2c(c, h, server ? SW_DIR_OUT : SW_DIR_IN, p + end, len - end, t);
    if (sw_protos[c->proto] != &sw_proto_http1)
        return true;
    sw_conn_span_push(c, h); /* not taken: ended with the 101 as before */
    return false;
}

/*
 * A server's write went on past the iovec piece whose 101 handed the connection to HTTP/2
 * (h2c_adopt): its other pieces (r bytes of `iov`) are the HTTP/2 module's.
 */
static void h2c_rest(struct sw_conn *c, const struct iovec *iov, int iovcnt, size_t r, int64_t *t)
{
    const struct sw_proto *m = sw_protos[c->proto];
    if (r && !c->dead && m->written)
        m->written(c, iov, iovcnt, r, t);
}

/*
 * Feeds response bytes (written by a server, read by a client); runs under the lock. Usually
 * one pass: a whole response in the bytes gives one HEAD event with `message` set. Events may
 * be brief (sw_http_feed_response(), http.h): only type, status and message are read here.
 */
static inline __attribute__((always_inline)) bool
feed_response_on(struct sw_conn *c, const char *p, size_t len, int64_t *t, int role, bool alive)
{
    struct http1_conn *s = H(c);
    size_t off = 0;
    /* Once every byte is consumed and no event is held, another call would only say NONE. */
    if ((!alive && c->dead) || (!len && !sw_http_has_pending(&s->respp)))
        return false;
    for (;;) {
        struct sw_http_event ev;
        size_t base = off;
        off += sw_http_feed_response(&s->respp, p + off, len - off, &ev);
        if (SW_LIKELY(ev.type == SW_HTTP_EV_HEAD)) {
            s->resp_status = ev.status;
            if (ev.message) /* no body, or all of it in these bytes: the response is done */
                response_done_as(c, ev.status, sw_conn_now(t), role);
        } else if (ev.type == SW_HTTP_EV_NONE) {
            break;
        } else if (ev.type == SW_HTTP_EV_MESSAGE) {
            response_done_as(c, ev.status ? ev.status : s->resp_status, sw_conn_now(t), role);
        } else if (ev.type == SW_HTTP_EV_UPGRADE) {
            int st = ev.status ? ev.status : s->resp_status;
            size_t end = base + ev.offset < len ? base + ev.offset : len;
            if (st == 101 && h2c_adopt(c, p, end, len, t))
                return true; /* p[end..len) went to the HTTP/2 module */
            response_done_as(c, st, sw_conn_now(t), role);
            sw_conn_stop(c);
            break;
        } else if (ev.type == SW_HTTP_EV_NOT_HTTP) {
            /* Before any request: not HTTP (normal); after one: its framing is lost. */
            bool followed = c->span_len != 0;
            sw_conn_spans_fail(c, "http", "response is not HTTP/1.x", sw_conn_now(t));
            if (followed) {
                sw_proto_give_up(c, "response is not HTTP/1.x", t);
            } else {
                sw_conn_count(SW_CNT_NOT_PROTO);
                sw_conn_stop(c);
            }
            break;
        } else {
            sw_conn_spans_fail(c, "http", "malformed response", sw_conn_now(t));
            sw_proto_give_up(c, "malformed response", t);
            break;
        }
        /* HEAD and MESSAGE do not make the connection dead. */
        if (off >= len && !sw_http_has_pending(&s->respp))
            break;
    }
    return false;
}

/*
 * feed_response_on() out of line, for the general paths. True when a 101 handed the
 * connection to HTTP/2 (h2c_adopt), whose module got the rest of the bytes.
 */
SW_HOT static bool feed_response(struct sw_conn *c, const char *p, size_t len, int64_t *t)
{
    return feed_response_on(c, p, len, t, c->role, false);
}

/* The queue's front request becomes the thread's current one (a server's write). */
static inline __attribute__((always_inline)) void front_touch(struct sw_conn *c)
{
    if (c->span_len && sw_conn_span_front(c))
        sw_trace_touch(sw_conn_span_front(c)); /* the lock holds the guard */
}

/*
 * A server wrote `r` > 0 bytes of `iov` (hook `written`): the response parser follows them.
 */
static void http1_written(struct sw_conn *c, const struct iovec *iov, int iovcnt, size_t r,
                          int64_t *t)
{
    if (c->role != SW_ROLE_SERVER)
        return; /* a client's writes go through `out` */
    if (SW_LIKELY(RS(c) == RS_PARSE) || (!c->dead && rs_feeds(c, iov, iovcnt, r, t))) {
        for (int i = 0; i < iovcnt && r; i++) {
            size_t l = iov[i].iov_len < r ? iov[i].iov_len : r;
            r -= l;
            if (feed_response(c, iov[i].iov_base, l, t)) { /* HTTP/2 now: the other pieces */
                if (r)
                    h2c_rest(c, iov + i + 1, iovcnt - i - 1, r, t);
                return;
            }
        }
    }
    front_touch(c);
}

/*
 * A server wrote `r` > 0 bytes from one buffer `p`: http1_written() without the iovec loop
 * (nginx's heads fit in its first iovec).
 */
SW_HOT_PATH void sw_http1_server_wrote(struct sw_conn *c, const char *p, size_t r, int64_t t)
{
    /* Not dead and every response followed (dead and rs in one load), or the status line that
     * RS_RESYNC waited for ("Untraced responses"). */
    if (SW_LIKELY(flags2(&c->dead) == 0) ||
        (!c->dead && rs_feeds(c, &(struct iovec){(void *)p, r}, 1, r, &t))) {
        if (SW_UNLIKELY(feed_response_on(c, p, r, &t, SW_ROLE_SERVER, true)))
            return; /* HTTP/2 now (h2c) */
    }
    front_touch(c);
}

/* Bytes read (hook `in`): requests on a server, responses on a client. */
static void http1_in(struct sw_conn *c, const char *p, size_t len, int64_t *t)
{
    if (c->role == SW_ROLE_SERVER) {
        server_touch(c, server_feed_request(c, p, len, t));
    } else {
        feed_response(c, p, len, t); /* a 101 may hand the rest to HTTP/2 */
        sw_conn_reply_read(c);       /* the lock holds the guard */
    }
}

/* ---- client side: requests written, responses read ----------------------------------------- */

/* Peer of an exit span: Host as sent (":80" added without a port), else the connected ip. */
static size_t exit_peer(struct sw_conn *c, char *out, size_t cap)
{
    size_t hl;
    const char *host = sw_http_req_host(&H(c)->req, &hl);
    if (!hl) {
        memcpy(out, c->peer, c->peer_len);
        return c->peer_len;
    }
    size_t n = hl < cap - 4 ? hl : cap - 4;
    memcpy(out, host, n);
    bool has_port;
    if (out[0] == '[') {
        const char *rb = memchr(out, ']', n);
        has_port = rb && rb + 1 < out + n && rb[1] == ':';
    } else {
        has_port = memchr(out, ':', n) != NULL;
    }
    if (!has_port) {
        memcpy(out + n, ":80", 3);
        n += 3;
    }
    return n;
}

/* True when our lines to insert (n bytes at `inj`) contain a header line named `name`. */
static bool inj_has(const char *inj, size_t n, const char *name, size_t nl)
{
    for (size_t i = 0; i + nl <= n; i++) {
        if ((i == 0 || inj[i - 1] == '\n') && memcmp(inj + i, name, nl) == 0)
            return true;
    }
    return false;
}

/*
 * A proxy forwards the sw8 (and sw8-correlation) lines it received; our own lines must win,
 * because receivers take the first value. When such lines are in the head and not sent yet,
 * our lines go just before the first of them, and each forwarded name loses its meaning by
 * one byte sent as 'x' ("sw8:" -> "swx:"), so the byte count is unchanged. When one of them
 * already went out (an earlier write), ours go before the final CRLF as usual (the peer then
 * sees both, the forwarded one first).
 */
static void forwarded_headers(struct sw_conn *c, size_t n, uint64_t *ins)
{
    struct http1_conn *s = H(c);
    const char *inj = sw_conn_out_buf(c);
    uint64_t lines[2];
    int k = 0;
    if (s->app_sw8_abs != SW_CONN_NO_ABS && inj_has(inj, n, "sw8:", 4))
        lines[k++] = s->app_sw8_abs;
    if (s->app_corr_abs != SW_CONN_NO_ABS && inj_has(inj, n, "sw8-correlation:", 16))
        lines[k++] = s->app_corr_abs;
    if (!k)
        return;
    uint64_t first = k == 2 && lines[1] < lines[0] ? lines[1] : lines[0];
    if (first < sw_conn_out_sent(c) || first >= *ins)
        return;
    *ins = first;
    for (int i = 0; i < k; i++)
        sw_conn_out_replace(c, lines[i] + 2, "x", 1);
}

/* True when "sw8" (ASCII case folded) occurs in p[0..len): found from its '8's (memchr). */
static bool has_sw8(const char *p, size_t len)
{
    const char *e = p + len, *q = p;
    while (q < e && (q = memchr(q, '8', (size_t)(e - q))) != NULL) {
        if (q - p >= 2 && (q[-1] | 0x20) == 'w' && (q[-2] | 0x20) == 's')
            return true;
        q++;
    }
    return false;
}

/* Scans head bytes (stream offset `abs`) for the names of the lines the app writes. */
static void scan_names(struct http1_conn *s, const char *p, size_t len, uint64_t abs)
{
    /*
     * Usually the bytes hold no "sw8" at all and no name was begun in the previous call: then
     * no line of them can be an sw8 / sw8-correlation line, and only what follows their last
     * LF matters for the next call (the byte loop below takes it from there).
     */
    if (!(s->nm_alive && s->nm_len) && !has_sw8(p, len)) {
        const char *nl = memrchr(p, '\n', len);
        if (nl) {
            size_t k = (size_t)(nl - p) + 1;
            s->nm_alive = true;
            s->nm_len = 0;
            s->line_abs = abs + k;
            p += k;
            len -= k;
            abs += k;
        }
    }
    for (size_t i = 0; i < len; i++) {
        char b = p[i];
        if (b == '\n') {
            s->nm_alive = true;
            s->nm_len = 0;
            s->line_abs = abs + i + 1;
            continue;
        }
        if (!s->nm_alive)
            continue;
        if (b == ':') {
            s->nm_alive = false;
            if (s->nm_len == 3 && memcmp(s->nm, "sw8", 3) == 0 && s->app_sw8_abs == SW_CONN_NO_ABS)
                s->app_sw8_abs = s->line_abs;
            else if (s->nm_len == 15 && memcmp(s->nm, "sw8-correlation", 15) == 0 &&
                     s->app_corr_abs == SW_CONN_NO_ABS)
                s->app_corr_abs = s->line_abs;
            continue;
        }
        if (s->nm_len == sizeof(s->nm)) {
            s->nm_alive = false;
            continue;
        }
        s->nm[s->nm_len++] = (char)(b >= 'A' && b <= 'Z' ? b + 32 : b);
    }
}

/* A request head written by the client is complete; `ins` is where the lines go. */
static void client_head(struct sw_conn *c, enum sw_http_method m, uint64_t ins, int64_t t)
{
    struct http1_conn *s = H(c);
    struct sw_req_info ri;
    req_info(c, &ri);
    char peer[SW_HTTP_HOST_MAX + 8];
    ri.peer = peer;
    ri.peer_len = exit_peer(c, peer, sizeof(peer));
    size_t n = 0;
    bool can_insert =
        !sw_conn_out_pending(c) && ins != SW_CONN_NO_ABS && ins >= sw_conn_out_sent(c);
    for (int i = 0; i < n_exclude_ports; i++)
        if (exclude_ports[i] == c->port)
            can_insert = false; /* the span is recorded, nothing is propagated */
    /* The first request belongs to the request the connection was opened for, if known; a
     * later one (a reused connection) to the thread's request now. */
    uint64_t parent = sw_conn_exit_parent(c);
    uint64_t h =
        sw_trace_exit_start_in(parent, &ri, s->req_start_ms ? s->req_start_ms : t,
                               sw_conn_out_buf(c), can_insert ? SW_CONN_INSERT_MAX : 0, &n);
    sw_conn_span_push(c, h);
    sw_http_push_request(&s->respp, m);
    if (can_insert && n > 0 && n <= SW_CONN_INSERT_MAX) {
        forwarded_headers(c, n, &ins);
        sw_conn_out_insert(c, ins, n);
        sw_conn_count(SW_CNT_INSERTED);
    } else if (!can_insert) {
        sw_conn_count(SW_CNT_INSERT_SKIPPED);
    }
}

/*
 * Feeds app bytes at absolute offset `abs` to the request parser of a client. Returns the
 * bytes consumed: all of them, unless a message ended while an insertion is still pending
 * (then sw_conn_out_pause() was called and the rest waits).
 */
SW_HOT static size_t client_feed_request(struct sw_conn *c, const char *p, size_t len, uint64_t abs,
                                         int64_t t)
{
    struct http1_conn *s = H(c);
    size_t off = 0;
    while (!c->dead && !s->req_stopped) {
        bool in_body = sw_http_in_body(&s->reqp);
        if (off < len && !sw_http_head_in_progress(&s->reqp) && !in_body) {
            /* A new message begins in these bytes. */
            s->req_start_ms = t;
            s->app_sw8_abs = s->app_corr_abs = SW_CONN_NO_ABS;
            s->nm_alive = false; /* the request line is no header */
            s->nm_len = 0;
        }
        struct sw_http_event ev;
        size_t base = off;
        size_t k = sw_http_feed(&s->reqp, p + off, len - off, 0, &ev);
        off += k;
        if (!in_body)
            scan_names(s, p + base, k, abs + base);
        if (k >= 2) {
            s->tail[0] = p[off - 2];
            s->tail[1] = p[off - 1];
        } else if (k == 1) {
            s->tail[0] = s->tail[1];
            s->tail[1] = p[off - 1];
        }
        switch (ev.type) {
        case SW_HTTP_EV_NONE:
            return len;
        case SW_HTTP_EV_HEAD: {
            uint64_t head_end = abs + base + ev.offset;
            uint64_t ins = ev.insert_at != SW_HTTP_NO_OFFSET ? abs + base + ev.insert_at
                           : head_end >= 2                   ? head_end - 2
                                                             : SW_CONN_NO_ABS;
            client_head(c, ev.method, ins, t);
            if (ev.message && sw_conn_out_pending(c)) { /* no body: as for MESSAGE below */
                sw_conn_out_pause(c);
                return off;
            }
            break;
        }
        case SW_HTTP_EV_MESSAGE:
            if (sw_conn_out_pending(c)) {
                sw_conn_out_pause(c);
                return off;
            }
            break;
        case SW_HTTP_EV_UPGRADE:
            s->req_stopped = true;
            return len;
        case SW_HTTP_EV_NOT_HTTP:
            sw_conn_not_proto(c, p, len); /* no request was written before */
            return len;
        default:
            sw_conn_spans_fail(c, "http", "malformed request", t);
            sw_proto_give_up(c, "malformed request", &t);
            return len;
        }
    }
    return len;
}

/*
 * Bytes a client writes, before they go out (hook `out`). A trailing "\r" at a line start
 * inside a head may begin the blank line: it is held back (the insertion goes before it).
 */
static size_t http1_out(struct sw_conn *c, const char *p, size_t len, uint64_t abs, int64_t *t)
{
    struct http1_conn *s = H(c);
    if (s->req_stopped)
        return len;
    size_t k = client_feed_request(c, p, len, abs, sw_conn_now(t));
    if (!c->dead && !s->req_stopped && sw_http_head_in_progress(&s->reqp) && s->tail[1] == '\r' &&
        s->tail[0] == '\n')
        sw_conn_out_hold(c, 1);
    return k;
}

/*
 * Feeds `n` body bytes we cannot see (sendfile) as zeros: framing only needs the count.
 * Inlined: a server's sendfile of a response body (nginx) runs one frame.
 */
static inline __attribute__((always_inline)) void feed_zeros(struct sw_conn *c, struct sw_http *h,
                                                             uint64_t n, int64_t *t)
{
    struct http1_conn *s = H(c);
    if (!sw_http_in_body(h)) {
        sw_proto_give_up(c, "a message head sent from a file (sendfile)", t);
        return;
    }
    uint64_t abs = c->parsed; /* a client's: the layer counts them in after this */
    while (n && !c->dead) {
        size_t k = n < sizeof(zeros) ? (size_t)n : sizeof(zeros);
        if (h == &s->respp)
            feed_response(c, zeros, k, t);
        else
            client_feed_request(c, zeros, k, abs, sw_conn_now(t));
        n -= k;
        abs += k;
    }
}

/* Bytes sent from a file (hook `unseen`): counted as body bytes. */
SW_HOT_PATH static void http1_unseen(struct sw_conn *c, uint64_t n, int64_t *t)
{
    struct http1_conn *s = H(c);
    if (c->role == SW_ROLE_CLIENT) {
        feed_zeros(c, &s->reqp, n, t);
    } else if (SW_UNLIKELY(RS(c) != RS_PARSE)) {
        /* Not followed; a status line waited for may be in the file: give up. */
        s->rs_wrote = true;
        if (RS(c) == RS_RESYNC)
            rs_give_up(c, t);
    } else {
        /* The usual one: (the rest of) a Content-Length body, counted without zeros. */
        int st, k = sw_http_body_unseen(&s->respp, n, &st);
        if (SW_LIKELY(k > 0))
            response_done_as(c, st ? st : s->resp_status, sw_conn_now(t), SW_ROLE_SERVER);
        else if (k < 0)
            feed_zeros(c, &s->respp, n, t);
    }
}

/* A read returned 0 (hook `eof`): a client's until-close response ends, the rest failed. */
static void http1_eof(struct sw_conn *c, int64_t *t)
{
    if (c->role != SW_ROLE_CLIENT)
        return;
    struct http1_conn *s = H(c);
    struct sw_http_event ev;
    sw_http_eof(&s->respp, &ev);
    if (ev.type == SW_HTTP_EV_MESSAGE)
        response_done(c, ev.status ? ev.status : s->resp_status, sw_conn_now(t));
    sw_conn_spans_fail(c, "closed", "peer closed the connection before the response",
                       sw_conn_now(t));
    sw_conn_stop(c);
}

/* Ends the entry of a CGI response (head begun here, finished by a forked child). */
static void cgi_part_done(struct sw_conn *c, int64_t t)
{
    int st = sw_http_partial_status(&H(c)->respp);
    uint64_t h = sw_conn_span_pop(c);
    if (h)
        sw_trace_entry_finish(h, st, t);
}

/* A served response whose head was begun here and which a forked child finishes (CGI). */
static bool cgi_pending(struct sw_conn *c)
{
    return !c->dead && c->span_len && c->role == SW_ROLE_SERVER &&
           atomic_load_explicit(&c->forked, memory_order_relaxed) &&
           sw_http_head_in_progress(&H(c)->respp);
}

/*
 * shutdown(SHUT_WR / SHUT_RDWR) (hook): with the response head begun and a forked child
 * finishing it (CGI), our part of the request ends here (as at close): the peer sees EOF now,
 * so the entry span must not end later.
 */
static void http1_shutdown(struct sw_conn *c, int how, int64_t *t)
{
    (void)how;
    if (cgi_pending(c))
        cgi_part_done(c, sw_conn_now(t));
}

/* The connection ends (hook `close`). */
static void http1_close(struct sw_conn *c, bool closing, int64_t *t)
{
    if (closing && cgi_pending(c)) {
        /*
         * CGI: the response head was begun here, the process forked, and a child (the CGI
         * program, with the socket as its stdout) writes the rest. Closing our copy ends our
         * part: the request ends here with the status of the status line we wrote (isError
         * for >= 400), or without a status when the status line was not complete.
         */
        cgi_part_done(c, sw_conn_now(t));
    } else if (closing && !c->dead && c->span_len) {
        /* EOF on our side: an until-close response written/read so far ends here. */
        struct sw_http_event ev;
        sw_http_eof(&H(c)->respp, &ev);
        if (ev.type == SW_HTTP_EV_MESSAGE)
            response_done(c, ev.status ? ev.status : H(c)->resp_status, sw_conn_now(t));
    }
    /* An unfollowed response began: it ends without a status, no error (before the layer
     * ends what is left in the queue as failed). */
    if (c->role == SW_ROLE_SERVER && RS(c) >= RS_SKIP && H(c)->rs_wrote)
        rs_drop(c, t);
}

const struct sw_proto sw_proto_http1 = {
    .name = "http1",
    .sniff = http1_sniff,
    .attach = http1_attach,
    .in = http1_in,
    .out = http1_out,
    .written = http1_written,
    .unseen = http1_unseen,
    .eof = http1_eof,
    .shutdown = http1_shutdown,
    .close = http1_close,
};
