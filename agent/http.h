/*
 * http.h - incremental HTTP/1.x parsing of one direction of one connection: head captures
 * (method, target, Host, sw8, sw8-correlation, sw8-x, chosen headers, status) and message
 * framing (Content-Length, chunked with trailers, until-close, HEAD, 1xx, 204/304,
 * keep-alive, pipelining), reported as events with exact byte offsets.
 *
 * Rules: runs on application threads inside read()/write() interposers. No malloc, no locks,
 * no syscalls, no stdio, errno untouched. All state is in fixed-size structs owned by the
 * caller (embedded in its per-connection object); bytes may arrive split at any boundary.
 * Input is untrusted: anything malformed ends in a terminal event, never a crash.
 *
 * Implementation: a hand-written resumable scanner in http.c (no library; libhttp-parser
 * 2.9.4 was used until it was measured to be most of the agent's per-request instructions, see
 * http.c's banner). It is strict: a request/status line, header line, chunk line or version it
 * does not understand gives SW_HTTP_EV_NOT_HTTP (before the first head of the connection) or
 * SW_HTTP_EV_ERROR, so the connection is left alone (passed through, not traced) rather than
 * parsed differently from the peer. In particular a bare CR (a CR not immediately followed by
 * LF) anywhere in a head, including the empty lines before a request/status line, is refused
 * (SW_HTTP_ERR_SYNTAX) whatever the split of the bytes across calls (a CR ending one call must
 * be followed by LF at the start of the next), so a peer and we never disagree on where a head
 * line ends. Bare LF line ends are accepted (insert_at then points at the final LF). Header
 * values with control bytes (such as "sw8: a\x01b") are refused too. http.c lists the rules.
 *
 * Usage (event-at-a-time; no callbacks):
 *
 *   struct sw_http_event ev;
 *   size_t off = 0;
 *   for (;;) {
 *       off += sw_http_feed(h, buf + off, len - off, 0, &ev);
 *       if (ev.type == SW_HTTP_EV_NONE)
 *           break;                      // everything consumed (or held back, see below)
 *       handle(&ev, off);               // ev offsets are relative to buf + (off - consumed)
 *       if (sw_http_event_is_terminal(&ev))
 *           break;                      // NOT_HTTP / ERROR / UPGRADE: stop parsing this fd
 *   }
 *
 * Every call stops right after ONE event; its return value is the number of bytes consumed
 * up to and including that event (== ev.offset for HEAD and MESSAGE). Call again with the
 * rest, EVEN WHEN THE REST IS EMPTY (len 0): a message without body produces HEAD and then
 * MESSAGE at the same position, and the second comes from a call that consumes 0 bytes.
 * Loop until the event is SW_HTTP_EV_NONE. len 0 never means EOF: use sw_http_eof().
 * Two shortcuts for callers that count instructions: with opts->fold_message, the HEAD of a
 * message without body (or of a response whose Content-Length body is all in the call's
 * bytes) has ev.message set and stands for the MESSAGE too (none follows; the call then
 * returns ev.msg_end, past the body, instead of ev.offset); and
 * when every byte was fed and sw_http_has_pending() is false, the next call would return
 * SW_HTTP_EV_NONE, so it can be skipped.
 *
 * Client write path (sw8 insertion): feed the bytes the app writes to a REQUEST parser with
 * SW_HTTP_FEED_HOLD. On SW_HTTP_EV_HEAD, ev.insert_at is the offset (relative to the buf of
 * that call) of the START of the CRLF (or bare LF) that ends the head: write
 * buf[..insert_at] + "sw8: ...\r\n" + buf[insert_at..]. With SW_HTTP_FEED_HOLD the parser
 * never consumes a "\r" that ends a chunk while a head is in progress, as it may begin the
 * blank line (so insert_at is never in an earlier chunk): the call then returns EV_NONE with
 * a return value < len, and the caller writes only that many bytes (a short write; the app
 * re-sends the rest, which begins with that "\r"). If the held part is the whole chunk (the
 * app wrote exactly "\r"), the return is 0: the caller either keeps that byte itself or
 * feeds it again without SW_HTTP_FEED_HOLD and gives up inserting for this request (then
 * ev.insert_at of the HEAD event is SW_HTTP_NO_OFFSET). Independently, for EV_NONE while a
 * head is in progress, ev.line_end is the offset just past the last complete head line in the
 * consumed bytes (SW_HTTP_NO_OFFSET if none), and sw_http_head_in_progress() says a head has
 * begun. A caller that feeds without SW_HTTP_FEED_HOLD (conn.c holds the byte itself) gets
 * SW_HTTP_NO_OFFSET only when the CR of a final CRLF ended an earlier call: the insertion
 * point is then that CR, 2 bytes before the end of the head (bare CRs are refused, so it
 * begins the blank line); for a bare-LF blank line insert_at is always set.
 *
 * Responses: the response parser must know which responses answer HEAD (no body) or CONNECT
 * (a 2xx starts a tunnel). Call sw_http_push_request(resp, method) for every request of
 * the connection, in order (on HEAD events of the request parser); unknown = GET. 1xx
 * responses other than 101 (e.g. 100 Continue) are consumed silently: no event, they do not
 * take a request from the queue. 101, CONNECT 2xx, and requests with Upgrade or CONNECT
 * give SW_HTTP_EV_UPGRADE instead of SW_HTTP_EV_MESSAGE (after the HEAD event): stop.
 */
#ifndef SW_HTTP_H
#define SW_HTTP_H

#include "common.h"

#include <string.h>

#define SW_HTTP_HEAD_MAX (64u * 1024u) /* default and upper bound of a head's size */
#define SW_HTTP_TARGET_MAX 1024        /* request-target bytes kept (NUL included) */
#define SW_HTTP_HOST_MAX 256           /* Host value bytes kept (NUL included) */
#define SW_HTTP_SW8_MAX 2048           /* sw8 value bytes kept (NUL included) */
#define SW_HTTP_CORR_MAX 1024          /* sw8-correlation value bytes kept (NUL included) */
#define SW_HTTP_SW8X_MAX 128           /* sw8-x value bytes kept (NUL included) */
#define SW_HTTP_HEADERS_MAX 1024       /* http.headers tag value bytes kept (NUL included) */
#define SW_HTTP_HDR_NAMES 8            /* configured header names collected */
#define SW_HTTP_HDR_NAME_MAX 32        /* bytes per configured name (NUL included) */
#define SW_HTTP_METHOD_MAX 16          /* method text (NUL included) */
#define SW_HTTP_PENDING_MAX 16         /* request methods queued in a response parser */
#define SW_HTTP_NO_OFFSET ((size_t)-1)

enum sw_http_dir {
    SW_HTTP_REQUEST = 0,  /* parses requests (server reading, or client writing) */
    SW_HTTP_RESPONSE = 1, /* parses responses (client reading, or server writing) */
};

enum sw_http_method {
    SW_HTTP_M_OTHER = 0, /* any other method: see method_text */
    SW_HTTP_M_GET,
    SW_HTTP_M_HEAD,
    SW_HTTP_M_POST,
    SW_HTTP_M_PUT,
    SW_HTTP_M_DELETE,
    SW_HTTP_M_CONNECT,
    SW_HTTP_M_OPTIONS,
    SW_HTTP_M_TRACE,
    SW_HTTP_M_PATCH,
};

enum sw_http_ev_type {
    SW_HTTP_EV_NONE = 0, /* no event in the bytes consumed (all of them, unless held back) */
    SW_HTTP_EV_HEAD,     /* a head (request or final response) is complete */
    SW_HTTP_EV_MESSAGE,  /* a message (head + body) is complete */
    SW_HTTP_EV_UPGRADE,  /* terminal: CONNECT/Upgrade/101; later bytes are another protocol */
    SW_HTTP_EV_NOT_HTTP, /* terminal: the connection does not carry HTTP/1.0 or 1.1 */
    SW_HTTP_EV_ERROR,    /* terminal: malformed message, head too large, truncated at EOF */
};

/* Why an SW_HTTP_EV_ERROR (or NOT_HTTP) happened. */
enum sw_http_err {
    SW_HTTP_ERR_NONE = 0,
    SW_HTTP_ERR_SYNTAX,    /* malformed bytes after a valid HTTP start */
    SW_HTTP_ERR_TOO_LARGE, /* head (or trailers) larger than the limit */
    SW_HTTP_ERR_VERSION,   /* not HTTP/1.0 or HTTP/1.1 (e.g. HTTP/2 preface) */
    SW_HTTP_ERR_EOF,       /* connection closed inside a message */
};

/* One event. Offsets are relative to the `buf` of the sw_http_feed() call that returned it. */
struct sw_http_event {
    enum sw_http_ev_type type;
    enum sw_http_err err;       /* for ERROR and NOT_HTTP */
    size_t offset;              /* HEAD: just past the blank line; MESSAGE: just past the last byte
                                   of the message; UPGRADE: first byte of the other protocol;
                                   NOT_HTTP/ERROR: 0 (unused) */
    size_t insert_at;           /* HEAD: start of the final CRLF (or LF); SW_HTTP_NO_OFFSET when
                                   that CR was consumed by an earlier call */
    size_t line_end;            /* NONE with a head in progress: just past the last head line ended
                                   in the consumed bytes, else SW_HTTP_NO_OFFSET */
    size_t msg_end;             /* HEAD with `message`: just past the message's last byte (the
                                   call's return value; == offset when there is no body) */
    int status;                 /* response status (HEAD, MESSAGE of a response), else 0 */
    enum sw_http_method method; /* request method (HEAD/MESSAGE of a request); for a response,
                                   the method of the request it answers */
    bool keep_alive;            /* HEAD/MESSAGE: another message may follow on this connection */
    bool at_eof;                /* MESSAGE: completed by sw_http_eof() (until-close body) */
    bool message;               /* HEAD, only with opts->fold_message: the message is complete
                                   too (no MESSAGE event follows for it): it has no body, or
                                   (responses) its Content-Length body is in this call's bytes */
};

/*
 * Parsing options, shared by many parsers: caller-owned, must outlive every parser inited
 * with them and must not change while those parsers are in use (typically one static instance
 * built from the config at start-up; sw_http_init() takes some of them into the parser).
 */
struct sw_http_opts {
    uint32_t max_head;          /* head size limit in bytes; 0 or > SW_HTTP_HEAD_MAX: max */
    uint32_t headers_threshold; /* http.headers value bound; 0 or too big: SW_HTTP_HEADERS_MAX-1 */
    uint32_t header_count;      /* names in header_names */
    bool fold_message;          /* a message without body (or a response whose Content-Length
                                   body is in the same call) gives one HEAD event with `message`
                                   set instead of HEAD then MESSAGE (UPGRADE still follows) */
    bool capture_refs;          /* the target and Host of a request head may be captured by
                                   reference (struct sw_http_req.target_ref / host_ref) instead
                                   of copied: read them through sw_http_req_target() and
                                   sw_http_req_host() */
    char header_names[SW_HTTP_HDR_NAMES][SW_HTTP_HDR_NAME_MAX]; /* lower-case, NUL-terminated */
};

/*
 * What a request head carried. Caller-owned, optional (only request parsers fill it). Valid
 * from a request's SW_HTTP_EV_HEAD until the next sw_http_feed() that begins another request
 * (on a pipelined connection: read it at HEAD before calling sw_http_feed again). *_len
 * excludes the NUL; a length of 0 means absent.
 *
 * Rules for readers:
 *   - Read the target and Host through sw_http_req_target() / sw_http_req_host(). With
 *     opts->capture_refs, target_ref / host_ref may point into the bytes given to the
 *     sw_http_feed() call that returned the HEAD event (not NUL-terminated, valid while the
 *     caller keeps those bytes, at most until its next sw_http_feed() call on this parser);
 *     NULL means the copy in target[] / host[] is the one (NUL-terminated; target[] is
 *     SW_HTTP_TARGET_MAX bytes, so it may be read in 16-byte blocks up to target_len rounded
 *     up, a referenced target not past target_len). Without capture_refs both are always NULL.
 *   - A capture whose length is 0 is absent, and its buffer is not to be read (host[], sw8[],
 *     corr[], sw8x[] and headers[] may then still hold an earlier request's bytes). A capture
 *     kept in its buffer with a length other than 0 is NUL-terminated.
 *   - path_valid: path_len and path_suffix describe the target as captured (the one
 *     sw_http_req_target() gives). The whole-head fast path sets them for the origin-form
 *     targets it takes that were not truncated; otherwise path_valid is false and they are
 *     meaningless (the caller finds the path itself).
 */
struct sw_http_req {
    enum sw_http_method method;
    char method_text[SW_HTTP_METHOD_MAX]; /* e.g. "GET", "PROPFIND" */
    uint8_t method_len;                   /* strlen(method_text) */
    uint8_t http_minor;                   /* 0 or 1 */
    bool target_truncated;                /* the target was longer than kept */
    bool expect_continue;                 /* Expect: 100-continue */
    bool upgrade;                         /* Connection: upgrade + Upgrade:, or CONNECT */
    bool keep_alive;                      /* the connection stays open after this request */
    bool headers_truncated;               /* http.headers hit its bound */
    bool path_valid;                      /* path_len and path_suffix are set (see above) */
    uint16_t target_len;
    uint16_t host_len;
    uint16_t sw8_len;
    uint16_t corr_len;
    uint16_t sw8x_len;
    uint16_t headers_len;
    uint16_t path_len;      /* path_valid: target bytes before the first '?' or '#' */
    uint16_t path_suffix;   /* path_valid: offset in the target just past the path's last '.'
                               when no '/' follows it in the path (e.g. 11 for "/img/logo.png"),
                               else 0 */
    const char *target_ref; /* see above: the target in the fed bytes, or NULL */
    const char *host_ref;   /* see above: the Host value in the fed bytes, or NULL */
    char target[SW_HTTP_TARGET_MAX];   /* request-target as sent: path?query (or absolute) */
    char host[SW_HTTP_HOST_MAX];       /* first Host value */
    char sw8[SW_HTTP_SW8_MAX];         /* last sw8 value (whole if it fit, else absent) */
    char corr[SW_HTTP_CORR_MAX];       /* last sw8-correlation value (same rule) */
    char sw8x[SW_HTTP_SW8X_MAX];       /* last sw8-x value (same rule) */
    char headers[SW_HTTP_HEADERS_MAX]; /* http.headers tag: "name=[v1, v2]\nname2=[v]" in
                                          opts order, cut at opts->headers_threshold */
    /* Scratch used while the head is parsed (values in arrival order); not for callers. */
    uint16_t scratch_len;
    uint16_t entry_start; /* scratch offset of the entry being written */
    uint8_t name_len;     /* current header name bytes (lower-cased) */
    uint8_t slot;         /* where the current header value goes */
    bool slot_overflow;   /* current value did not fit its slot */
    char name[SW_HTTP_HDR_NAME_MAX];
    char scratch[SW_HTTP_HEADERS_MAX];
};

/* The request-target captured (*len bytes; see the rules above struct sw_http_req). */
static inline const char *sw_http_req_target(const struct sw_http_req *r, size_t *len)
{
    *len = r->target_len;
    return r->target_ref ? r->target_ref : r->target;
}

/* The Host value captured (*len bytes, 0: absent and the pointer not to be read). */
static inline const char *sw_http_req_host(const struct sw_http_req *r, size_t *len)
{
    *len = r->host_len;
    return r->host_ref ? r->host_ref : r->host;
}

/*
 * The parser of one direction of one connection. Fixed size (no pointers into caller data
 * between calls); treat the fields as private. Re-init with sw_http_init() to reuse.
 */
struct sw_http {
    uint64_t remaining;              /* body bytes left (Content-Length or chunk); while a
                                        head is read, the Content-Length value so far */
    const struct sw_http_opts *opts; /* never NULL (init puts the defaults for NULL) */
    struct sw_http_req *req;         /* captures for request parsers, or NULL */
    uint32_t fast_max;               /* max_head where the usual end of the whole-head fast
                                        path applies, else 0 (http.c; at init) */
    uint32_t max_head;               /* the head size limit (opts->max_head at init) */
    uint32_t head_bytes;             /* bytes of the current head so far */
    uint8_t phase;                   /* idle / head / body / stopped (http.c) */
    uint8_t st;                      /* scanner state inside the phase (http.c) */
    uint8_t pending;                 /* an event found but not yet returned (http.c) */
    uint8_t nofast;                  /* no whole-head fast path (http.c; from opts at init) */
    uint8_t dir;                     /* enum sw_http_dir */
    uint8_t fopts;                   /* the opts bits the parser uses (http.c; at init) */
    uint16_t mflags;                 /* flags of the current message (http.c) */
    uint8_t kind;                    /* what the line whose CR was just read is (http.c) */
    uint8_t idx;                     /* position inside the current token (http.c) */
    uint8_t hdr;                     /* which header the current line is (http.c) */
    uint8_t major, minor;            /* HTTP version of the current message */
    uint8_t last_byte;               /* last byte consumed (CR/LF tracking across calls) */
    bool seen_head;                  /* a head completed on this connection */
    bool upgrade_after;              /* the current message ends in another protocol */
    uint8_t cur_method;              /* method of the current message (enum sw_http_method) */
    uint8_t q_head, q_len;           /* queue of pending request methods (responses) */
    uint8_t queue[SW_HTTP_PENDING_MAX];
    uint8_t fflags; /* the flags of the call the whole-head fast path is in (http.c) */
    int status;     /* status of the current response */
    char tok[20];   /* method, header name or value token being read */
};

/* Flags for sw_http_feed(). */
#define SW_HTTP_FEED_HOLD 0x1u /* do not consume a trailing "\r" that may start the blank line */

/* Fills `o` with defaults: max_head SW_HTTP_HEAD_MAX, threshold 2047, no header names. */
void sw_http_opts_init(struct sw_http_opts *o);

/*
 * Adds a header name to collect into http.headers (any case; stored lower-cased).
 * Returns 0, -ENOSPC when SW_HTTP_HDR_NAMES names are set, -EINVAL if empty or too long.
 */
int sw_http_opts_add_header(struct sw_http_opts *o, const char *name, size_t len);

/*
 * Initialises a parser. `opts` may be NULL (defaults); `req` is where a REQUEST parser puts
 * its captures (may be NULL: framing only; ignored for RESPONSE parsers). Both stay owned
 * by the caller and must outlive the parser (they may live in the same object).
 */
void sw_http_init(struct sw_http *h, enum sw_http_dir dir, const struct sw_http_opts *opts,
                  struct sw_http_req *req);

/*
 * Feeds bytes; stops after the first event. Returns the bytes consumed (see the usage at
 * the top: == ev->offset for HEAD/MESSAGE; len for NONE unless SW_HTTP_FEED_HOLD held a
 * byte back; for terminal events the caller stops anyway). After a terminal event every
 * later call returns len with SW_HTTP_EV_NONE. `flags`: SW_HTTP_FEED_*.
 */
size_t sw_http_feed(struct sw_http *h, const char *buf, size_t len, unsigned flags,
                    struct sw_http_event *ev);

/*
 * Tells the parser that the connection reached EOF. Fills `ev`: MESSAGE (at_eof, offset 0)
 * when an until-close body ends here, NONE when between messages, ERROR (SW_HTTP_ERR_EOF)
 * when a message was cut short. The parser is stopped afterwards.
 */
void sw_http_eof(struct sw_http *h, struct sw_http_event *ev);

/*
 * Queues the method of a request sent (or received) on this connection into a RESPONSE
 * parser, so it frames the answer right (HEAD: no body; CONNECT: tunnel on 2xx). A full
 * queue drops the oldest. No-op on a REQUEST parser.
 */
static inline void sw_http_push_response_of(struct sw_http *h, enum sw_http_method m);

static inline void sw_http_push_request(struct sw_http *h, enum sw_http_method m)
{
    if (h->dir != SW_HTTP_RESPONSE)
        return;
    sw_http_push_response_of(h, m);
}

/* sw_http_push_request() for a parser known to be a RESPONSE parser (no test of its
   direction). */
static inline void sw_http_push_response_of(struct sw_http *h, enum sw_http_method m)
{
    if (h->q_len == SW_HTTP_PENDING_MAX) { /* drop the oldest */
        h->q_head = (uint8_t)((h->q_head + 1) % SW_HTTP_PENDING_MAX);
        h->q_len--;
    }
    h->queue[(h->q_head + h->q_len) % SW_HTTP_PENDING_MAX] = (uint8_t)m;
    h->q_len++;
}

/* Shorthand for sw_http_push_request(h, SW_HTTP_M_HEAD). */
void sw_http_expect_head_response(struct sw_http *h);

/* Values of struct sw_http's phase and pending fields used by the inline queries below. */
#define SW_HTTP_PH_HEAD 1
#define SW_HTTP_PH_BODY 2
#define SW_HTTP_PEND_MESSAGE 1
#define SW_HTTP_PEND_UPGRADE 2

/* True when a head has begun (first byte of a request/status line seen) and is not complete. */
static inline bool sw_http_head_in_progress(const struct sw_http *h)
{
    return h->phase == SW_HTTP_PH_HEAD;
}

/*
 * The status code of the status line of a RESPONSE head that has begun but is not complete
 * (a CGI server wrote its status line and some headers, then a child writes the rest), once
 * its three digits were seen; 0 otherwise (no head in progress, a REQUEST parser, too early).
 */
int sw_http_partial_status(const struct sw_http *h);

/* True while a message body is being framed (between HEAD and MESSAGE). */
static inline bool sw_http_in_body(const struct sw_http *h)
{
    return h->phase == SW_HTTP_PH_BODY || h->pending == SW_HTTP_PEND_MESSAGE ||
           h->pending == SW_HTTP_PEND_UPGRADE;
}

/* struct sw_http's st in a Content-Length body (http.c), for sw_http_body_unseen(). */
#define SW_HTTP_ST_CL 12

/*
 * `n` bytes of a message body that the caller does not see (sendfile): what sw_http_feed()
 * does with any n bytes there, for the usual case only: a Content-Length body (not one that
 * ends in another protocol), no event held, and 0 < n <= the body bytes left. Then it returns
 * 0 when the body goes on, or 1 when these bytes end the message (*status: its status, 0 for
 * a request; the parser is between messages, as after the MESSAGE event). Otherwise it
 * returns -1 with nothing changed: feed the bytes (zeros will do) to sw_http_feed().
 */
static inline int sw_http_body_unseen(struct sw_http *h, uint64_t n, int *status)
{
    if (h->phase != SW_HTTP_PH_BODY || h->st != SW_HTTP_ST_CL || h->pending || h->upgrade_after ||
        n - 1 >= h->remaining)
        return -1;
    h->remaining -= n;
    if (h->remaining)
        return 0;
    *status = h->status;
    /* fast_cl_body()'s msg_done(): phase and st idle, head_bytes 0 (PH_IDLE and ST_IDLE are 0). */
    h->head_bytes = 0;
    h->phase = 0;
    h->st = 0;
    return 1;
}

/* True once a terminal event was returned (or sw_http_eof() was called). */
bool sw_http_stopped(const struct sw_http *h);

/*
 * True when the parser holds an event found in bytes already consumed (a MESSAGE or UPGRADE
 * right after a HEAD, at the same offset): the next sw_http_feed() returns it even with len 0.
 * When this is false and every byte was fed, another call would return SW_HTTP_EV_NONE, so a
 * caller may stop there instead of making the empty call.
 */
static inline bool sw_http_has_pending(const struct sw_http *h)
{
    return h->pending != 0;
}

/* True for NOT_HTTP, ERROR and UPGRADE. */
static inline bool sw_http_event_is_terminal(const struct sw_http_event *ev)
{
    return ev->type >= SW_HTTP_EV_UPGRADE;
}

/* The method's name for enum values ("GET"...; "OTHER" for SW_HTTP_M_OTHER). */
const char *sw_http_method_name(enum sw_http_method m);

#ifdef SW_TESTING
/* Test hooks (http.c): heads the whole-head fast path completed; true: never take it. */
extern unsigned long sw_http_test_fast_hits;
extern bool sw_http_test_fast_off;
#endif

/*
 * The whole-head fast paths of sw_http_feed() (http.c), for a parser of that direction whose
 * head begins at buf[0] (head_bytes, phase, st, pending and nofast all zero), len >= 16 and
 * the fflags field set to the call's flags; they fall back to the general path themselves
 * (and take it at once under the test switch sw_http_test_fast_off). `brief`: the event of
 * the usual end is brief (see sw_http_feed_request()).
 * Call them through sw_http_feed_request() / sw_http_feed_response().
 */
size_t sw_http_fast_request(struct sw_http *h, const char *buf, size_t len,
                            struct sw_http_event *ev, bool brief);
size_t sw_http_fast_response(struct sw_http *h, const char *buf, size_t len,
                             struct sw_http_event *ev, bool brief);

/* True when sw_http_feed() would take the whole-head fast path (see above). */
static inline bool sw_http_fast_ready(const struct sw_http *h, size_t len)
{
    uint64_t w;

    memcpy(&w, (const char *)h + offsetof(struct sw_http, head_bytes), sizeof(w));
    return w == 0 && len >= 16;
}

/*
 * sw_http_feed(h, buf, len, 0, ev) for a REQUEST parser, with the test of the usual call (a
 * head at buf[0]) inline: the fast path is called without the general entry. One difference:
 * a HEAD event of the fast path's usual end (a message complete in the call, or a response
 * whose Content-Length body comes later) is brief: only type, err, status, method and message
 * are set, the other fields are undefined (conn.c reads no others where it calls these).
 */
static inline size_t sw_http_feed_request(struct sw_http *h, const char *buf, size_t len,
                                          struct sw_http_event *ev)
{
    if (sw_http_fast_ready(h, len)) {
        h->fflags = 0;
        return sw_http_fast_request(h, buf, len, ev, true);
    }
    return sw_http_feed(h, buf, len, 0, ev);
}

/* sw_http_feed(h, buf, len, 0, ev) for a RESPONSE parser (see sw_http_feed_request()). */
static inline size_t sw_http_feed_response(struct sw_http *h, const char *buf, size_t len,
                                           struct sw_http_event *ev)
{
    if (sw_http_fast_ready(h, len)) {
        h->fflags = 0;
        return sw_http_fast_response(h, buf, len, ev, true);
    }
    return sw_http_feed(h, buf, len, 0, ev);
}

#endif /* SW_HTTP_H */
