/*
 * trace.h - spans, segments and the current request of a thread. Knows nothing about sockets:
 * the connection layer (interpose/conn) tells it what it saw in HTTP heads, and when.
 *
 * Runs on application threads: no malloc, no locks, no syscalls except the lazy ring creation
 * (done once, through pthread_once, on the first finished segment) and the reporter spawn.
 * Open segments and spans live in fixed pools created at init; finished segments are
 * serialised (record.h) into the process's ring (ring.h). Pool exhausted or ring full: the
 * segment is dropped and counted, the application never notices.
 *
 * Handles: an open span is named by a uint64_t handle (slot and generation); 0 means "not
 * traced" and every function accepts 0 and does nothing, so callers need no checks.
 */
#ifndef SW_TRACE_H
#define SW_TRACE_H

#include "common.h"

struct sw_config;

/* What the connection layer learned from one request head. Strings need not be NUL-terminated
 * and are only read during the call (the trace module copies what it keeps). */
struct sw_req_info {
    const char *method; /* "GET" */
    size_t method_len;
    const char *target; /* request target as sent: path and query */
    size_t target_len;
    const char *host; /* Host header value, may be NULL */
    size_t host_len;
    const char *sw8; /* entry only: incoming sw8 value, may be NULL */
    size_t sw8_len;
    const char *correlation; /* entry only: incoming sw8-correlation, may be NULL */
    size_t correlation_len;
    const char *sw8x; /* entry only: incoming sw8-x, may be NULL */
    size_t sw8x_len;
    const char *headers_tag; /* http.headers tag value (plugin.http.include_http_headers) */
    size_t headers_tag_len;
    const char *peer; /* entry: client "ip:port"; exit: the exit peer (Host as sent with
                         ":80" added, else the connected "ip:port") */
    size_t peer_len;
    bool tls; /* reserved for the TLS seam: scheme https in the url tag */
    /* target lies in a buffer that can be read in whole 16-byte blocks up to target_len
     * rounded up to 16 (the HTTP parser's capture), so it is scanned 16 bytes at a time. */
    bool padded;
    /* path_valid: the target is origin-form, path_len its bytes before the first '?' or '#'
     * and path_suffix the offset just past the path's last '.' with no '/' after it (0: none),
     * as the HTTP parser found them; else the tracer finds them itself. */
    bool path_valid;
    uint16_t path_len, path_suffix;
    /* exit only: an RPC span's name (sw_trace_span_rpc, given before sw8 is made), NULL: HTTP */
    const char *rpc_op;
    size_t rpc_op_len;
};

/* Loads nothing itself: takes the already loaded configuration (kept by pointer). The limits
 * of the request path (operation name threshold, peer_max_length, collect_http_params) are
 * derived from it here: a configuration changed afterwards needs sw_trace_init again. */
int sw_trace_init(const struct sw_config *cfg);

/* sw_trace_init for a process whose effective uid at start was `start_euid` (the uid its
 * runtime directory was worked out for; sw_trace_init takes the current one). */
int sw_trace_init_as(const struct sw_config *cfg, uint32_t start_euid);

/* atfork child: forget the parent's open segments, ring and thread state. */
void sw_trace_after_fork(void);

/*
 * atfork prepare / parent: a fork made while the thread serves a (sampled) request opens an
 * Exit span `EXEC:<program>` (layer Unknown, peer `exec:<program>`) in that request's segment;
 * the child names the program when it execs, and the span ends when the request's entry span
 * ends (not recorded if the child never exec'ed). See sw_trace_exec_context.
 */
void sw_trace_before_fork(void);
void sw_trace_after_fork_parent(void);

/*
 * An entry span begins: a request head was read on a served connection. `start_ms` is the
 * epoch-ms time of the first byte of the request. Samples (or not), decodes sw8, opens a
 * segment rooted at the entry span and makes it the calling thread's current request.
 * Returns the handle (0: not traced). An unsampled or ignored request (ignore_suffix) also gets
 * a handle: it records nothing, but exits made while serving it then send no sw8 (only
 * sw8-correlation) instead of starting new traces; finish it like any other. An unsampled one
 * over the quota is keepable while swagent.keep_errors or keep_slow_ms is on
 * (sw_trace_entry_keepable): it records in case it ends badly, and commits only if kept.
 */
uint64_t sw_trace_entry_start(const struct sw_req_info *req, int64_t start_ms);

/*
 * Handles below SW_TRACE_SPAN_SLOTS (by their slot, the low 32 bits) name spans of the span
 * pool; an entry span gets one only when its request is not recorded and has no segment (no
 * sw8-correlation to pass on: trace.c's SEG_NONE), and 0 is "not traced". Every other entry
 * handle names the root span of a segment; SW_TRACE_KEEP_BIT set in it marks a keepable entry
 * (not sampled, kept only if it ends badly: trace.c, "Keeping beyond the quota").
 */
#define SW_TRACE_SPAN_SLOTS 4096u
#define SW_TRACE_SEG_SLOTS 1024u
#define SW_TRACE_KEEP_BIT 0x80000000u

/*
 * True when the entry `h` (from sw_trace_entry_start) records nothing unless it is kept: its
 * finish may come early, without a status (the connection layer then need not follow the
 * response; proto_http1.c, "Untraced responses"). A keepable entry (sw_trace_entry_keepable) is
 * one of them: sw_trace_entry_respond at its response's first write says whether it is kept,
 * and a kept one's response is followed from there.
 */
static inline bool sw_trace_entry_unrecorded(uint64_t h)
{
    /* Below SW_TRACE_SPAN_SLOTS (wraps) or SW_TRACE_KEEP_BIT set: negative. */
    return (int32_t)((uint32_t)h - SW_TRACE_SPAN_SLOTS) < 0;
}

/* True when the entry `h` is keepable: not sampled, but kept if it ends badly. */
static inline bool sw_trace_entry_keepable(uint64_t h)
{
    return ((uint32_t)h & SW_TRACE_KEEP_BIT) != 0;
}

/*
 * The first bytes of a keepable entry's response are being written: `status` from their
 * status line, `now_ms` the time. Returns true when the request is kept (a 5xx with
 * swagent.keep_errors, a failed exit, or a response begun swagent.keep_slow_ms or more after
 * the request, within swagent.keep_n_per_3_secs): its segment is recorded from now on and the
 * caller follows the response, so that the entry ends with its status and end time.
 */
bool sw_trace_entry_respond(uint64_t h, int status, int64_t now_ms);

/* The last byte of the response was written: status tag, isError for >= 400, segment ends. */
void sw_trace_entry_finish(uint64_t h, int status_code, int64_t end_ms);

/* The connection ended before the response completed: the span ends with an error log. */
void sw_trace_entry_abort(uint64_t h, const char *error_kind, const char *message, int64_t end_ms);

/*
 * An exit span begins: the application is writing a request head on a client connection.
 * The exit joins the current request of the calling thread (child of its entry span), or is
 * its own segment when there is none. Writes the header lines to insert into the request head
 * (`sw8: ...\r\n`, and `sw8-correlation: ...\r\n` when there is one) to `inject` and their
 * length to *inject_len (0: insert nothing, e.g. not sampled). Returns the handle.
 */
uint64_t sw_trace_exit_start(const struct sw_req_info *req, int64_t start_ms, char *inject,
                             size_t cap, size_t *inject_len);

/*
 * The request an outbound call made now on this thread belongs to, as far as the agent knows
 * (docs/architecture.md, "Which request an outbound call belongs to"): the thread's current request
 * when a read or write of a connection made it current and it is still open; else the one open
 * request of the thread; 0 when the thread serves none; SW_TRACE_UNKNOWN when it has several
 * open and none was touched since the last one ended (which one is not known). No allocation,
 * no syscall.
 */
#define SW_TRACE_UNKNOWN UINT64_MAX
uint64_t sw_trace_request_now(void);

/*
 * sw_trace_exit_start with the request named by the caller (the connection layer's rules):
 * `parent` an entry handle (from sw_trace_request_now, maybe on another thread): the exit is
 * its child while it is open; once it has ended, or for SW_TRACE_UNKNOWN, the exit is a root
 * segment of its own tagged `swagent.parent=unknown` and counted (sw_trace_stats, the ring's
 * parent_unknown: `swagent status`), never a child of another request. 0: no request (a root
 * exit, or the exec parent's trace). sw_trace_exit_start(...) is
 * sw_trace_exit_start_in(<current request, else the latest open one>, ...).
 */
uint64_t sw_trace_exit_start_in(uint64_t parent, const struct sw_req_info *req, int64_t start_ms,
                                char *inject, size_t cap, size_t *inject_len);

/*
 * Database and cache exit spans (issue 36): no header is inserted, the span's names and tags
 * are given whole. Layer SW_TRACE_LAYER_DATABASE or _CACHE, a component id from SkyWalking's
 * registry, operation name and peer as they should appear, and tags (cut to what a span holds:
 * a tag that does not fit is cut or left out). Strings are only read during the call.
 * sw_trace_db_start_in names its request as sw_trace_exit_start_in does (no request: a root
 * exit segment of a new trace, sampled like one). sw_trace_db_finish ends it; error_kind
 * non-NULL marks it as an error with a log (error.kind, message: NUL-terminated, cut).
 */
#define SW_TRACE_LAYER_DATABASE 1
#define SW_TRACE_LAYER_CACHE 5
#define SW_TRACE_COMPONENT_REDIS 7
#define SW_TRACE_COMPONENT_POSTGRESQL 22
#define SW_TRACE_COMPONENT_MEMCACHED 20
struct sw_tag {
    const char *key;
    size_t key_len;
    const char *val;
    size_t val_len;
};
struct sw_db_info {
    uint8_t layer;
    int32_t component;
    const char *op; /* "Redis/GET" */
    size_t op_len;
    const char *peer; /* "host:port", or a Unix socket's name */
    size_t peer_len;
    const struct sw_tag *tags;
    unsigned ntags;
};
uint64_t sw_trace_db_start_in(uint64_t parent, const struct sw_db_info *info, int64_t start_ms);
void sw_trace_db_finish(uint64_t h, const char *error_kind, const char *message, int64_t end_ms);

/*
 * gRPC (issue 37, proto_h2.c): sw_trace_span_rpc makes open span `h` (an entry or exit started
 * with the HTTP/2 request) an RPC span named `op` (SkyWalking's Java agent's form,
 * `package.Service.method`), layer RPCFramework, component GRPC; sw_trace_rpc_finish ends it
 * with the gRPC status as the rpc.status_code tag, non-zero an error with an error log
 * (error.kind grpc, `message`, NUL-terminated, may be NULL). Any span may end that way.
 */
#define SW_TRACE_COMPONENT_GRPC 23
/* Counts an HTTP/2 module event (enum sw_ring_h2, ring.h) in the process's ring. */
void sw_trace_count_h2(int k);
void sw_trace_span_rpc(uint64_t h, const char *op, size_t opl);
void sw_trace_rpc_finish(uint64_t h, int status, const char *message, int64_t end_ms);

/* The response head was read (status), then the response ended (end_ms). */
void sw_trace_exit_finish(uint64_t h, int status_code, int64_t end_ms);

/* The exit failed (connect refused, reset, closed early): error span with a log. */
void sw_trace_exit_error(uint64_t h, const char *error_kind, const char *message, int64_t end_ms);

/*
 * The current request of the calling thread, for the connection layer's heuristics:
 * sw_trace_set_current() makes `h` (an entry handle) current again, e.g. when an event loop
 * goes back to a connection whose request is still open. Returns the previous one.
 */
uint64_t sw_trace_current(void);
uint64_t sw_trace_set_current(uint64_t h);

/*
 * The calling thread's requests (trace.c's state; declared here for sw_trace_touch only). One
 * TLS block: in PIC code each separate TLS variable costs its own GOT load.
 */
#define SW_TRACE_OPEN_ENTRIES 8u /* recently started entries remembered per thread */
struct sw_trace_tls {
    uint64_t current; /* may name a span that has ended: every reader checks (trace.c) */
    uint64_t open[SW_TRACE_OPEN_ENTRIES];
    uint32_t open_pos;
    uint32_t open_n; /* non-zero entries of open[] */
    uint32_t hint;
};
extern __thread
    __attribute__((tls_model("initial-exec"))) struct sw_trace_tls sw_trace_tls SW_HIDDEN;

/*
 * sw_trace_set_current(h) without its result, for the connection layer's reads and writes of
 * a connection whose request `h` is open: skipped (inline) when `h` is current already, the
 * usual case. (That `h` may have ended meanwhile does not matter: sw_trace_set_current would
 * then leave the latest open entry current, and every reader of the current request checks
 * it and finds that one itself.)
 */
static inline void sw_trace_touch(uint64_t h)
{
    if (h != sw_trace_tls.current)
        sw_trace_set_current(h);
}

/*
 * Exec context (CGI-style children join the trace of the request that started them).
 *
 * sw_trace_exec_context: the value to put in SW_AGENT_PARENT_CTX (an sw8 value, field 8
 * `exec:<basename of path>`) of a program this thread is about to exec. The parent span it
 * names is always an Exit span `EXEC:<basename>` (layer Unknown, component 49, peer equal to
 * field 8 byte for byte), child of the request's entry span, so OAP links caller and callee:
 *   - the thread serves a request (vfork child, posix_spawn, or an exec that replaces the
 *     serving process): that exit span is recorded now with duration 0. A plain exec replaces
 *     the image, so that request's segment is lost (it never finishes);
 *   - else the thread was serving a request when this process was forked (the usual CGI
 *     shape: fork, then exec in the child): the exit span opened at the fork
 *     (sw_trace_before_fork) is named here, through a slot shared with the parent, and the
 *     parent ends it with its entry span. Without such a span (slots exhausted, more than 4
 *     forks in one request, or the parent's request already over) the entry span (0) is named;
 *   - else the context this process itself was exec'ed with, passed on unchanged (so a shell
 *     script's commands join too, with the same parent exit span and address).
 * Returns its length (not NUL-terminated), 0 for none or not sampled. No allocation, no
 * syscall: callable from an exec wrapper, also in a vfork child.
 *
 * sw_trace_set_exec_parent: called once at start with $SW_AGENT_PARENT_CTX. A root exit of
 * this process (no request being served) then becomes a segment of that trace: an Entry span
 * `EXEC:<basename of the executable>` (layer Unknown) with a CrossProcess ref to the parent's
 * EXEC exit span (SkyWalking refs live on entry spans), and the exit as its child. The
 * inherited context is used for 10 minutes after start only, so a daemon started from a CGI
 * program does not attach its root exits to that trace forever.
 */
size_t sw_trace_exec_context(char *out, size_t cap, const char *path);
void sw_trace_set_exec_parent(const char *sw8, size_t len);

/*
 * The runtime directory of this process's ring once it exists (it may differ from the
 * configured one after a uid change, see config.h), else the configured one.
 */
const char *sw_trace_runtime_dir(void);

/* The configuration sw_trace_init was given (NULL before): for protocol modules' settings. */
const struct sw_config *sw_trace_config(void);

/* The effective uid the process had when the agent started. */
uint32_t sw_trace_start_euid(void);

/* Epoch milliseconds (vDSO clock_gettime, no syscall in practice). */
int64_t sw_trace_now_ms(void);

/* Counters for the log and `swagent status`. */
struct sw_trace_stats {
    uint64_t segments_committed; /* written to the ring */
    uint64_t segments_dropped;   /* ring full or segment pool exhausted */
    uint64_t segments_shed;      /* traces not started: the ring had no room (trace.c) */
    uint64_t spans_limited;      /* spans not recorded because of span_limit_per_segment */
    uint64_t spans_dropped;      /* spans not recorded: span pool exhausted or segment arena full */
    uint64_t spans_reaped;       /* exits closed by the agent: still open 30 s after their root */
    uint64_t parent_unknown;     /* exits whose request was not known: own segment, tagged */
    uint64_t kept_errors;        /* unsampled requests kept: 5xx, failed exit, reset */
    uint64_t kept_slow;          /* unsampled requests kept: slow */
    uint64_t keep_limited;       /* not kept: over swagent.keep_n_per_3_secs */
};
void sw_trace_get_stats(struct sw_trace_stats *out);

#endif /* SW_TRACE_H */
