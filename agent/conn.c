/*
 * conn.c - the fd table, the connection pool and the per-connection HTTP/1.x state machine:
 * entry spans on served connections, exit spans and sw8 insertion on client connections.
 *
 * Runs on application threads, only for tracked fds (interpose.c filters the rest with one
 * branch). No malloc (table and pool are mmap'd at init), no stdio, no lock held across a
 * syscall: a per-connection spin flag protects the bookkeeping of the two directions, which
 * may run on two threads at once (one reads while another writes). errno is preserved except
 * where a send path reports the real call's errno, exactly as the application expects.
 *
 * The insertion invariant: the application sees exactly its own byte counts and errno. Bytes
 * of the application's stream are counted in absolute offsets per connection:
 *   claimed  bytes reported as written to the application;
 *   sent     bytes given to the kernel (claimed - sent bytes are held in `hold`, at most one:
 *            a trailing "\r" at a line start of a head, which may begin the blank line);
 *   parsed   bytes fed to the request parser (parsing runs ahead of the kernel, so the end of
 *            a head is known before the write that carries it goes out).
 * The inserted lines go into the outgoing stream just before the head's final CRLF (ins_abs).
 * A write that reaches ins_abs is sent as app-bytes-before + inserted lines + the rest with
 * one writev/sendmsg of the real function (no copy of the app's bytes); the count returned is
 * the number of the app's bytes the kernel took. When the kernel takes only part of the
 * inserted lines, the rest stays here and goes out first on the next call; a call that could
 * not move any app byte reports the real call's error (EAGAIN for non-blocking sockets).
 * A trailing "\r" at a line start of a head is the only byte ever held back (reported as
 * written, sent first with the next call): if it begins the blank line, the insertion point is
 * before it. A write carrying more than one head while an insertion is pending is cut at the
 * end of the first message (a short write; the app sends the rest). A proxy that forwards the
 * sw8 it received: see forwarded_headers().
 *
 * Heuristics and limits (documented in docs/architecture.md):
 * - Current request: an entry span becomes the thread's current request when its head is read
 *   (trace), and again whenever its connection is read or written on that thread; reading a
 *   client's response makes its exit's request current (an event loop handles that request).
 *   A client's first request head joins the request that was the thread's when connect() was
 *   made (c->owner: nginx connects while serving A and writes A's head only once the socket is
 *   writable, after serving others); later heads (keep-alive reuse) join the thread's request
 *   when they are written. Where that is not known (sw_trace_request_now), the exit gets no
 *   parent: a tagged root segment, counted (docs/architecture.md, "Which request an outbound
 *   call belongs to").
 * - Roles come from socket()+connect() (client) and accept() (server). Sockets inherited
 *   through exec, or connected by code we do not see, stay untracked.
 * - dup/dup2/dup3 share the connection object; the last close ends it. fork keeps it (the child
 *   inherits the fd) but drops the parent's span handles. close_range untracks the range.
 * - Span handles of up to FIFO_LEN pipelined requests per connection; deeper ones are ended as
 *   errors ("pipeline too deep") and not followed.
 * - sendfile bytes are counted as body bytes (a Content-Length body's count goes down,
 *   sw_http_body_unseen; otherwise zeros are fed to the framing); a head sent from a file
 *   stops the tracing of that connection.
 * - Pool of SW_CONN_POOL_DEFAULT connection objects: beyond it connections stay untracked
 *   (counted in pool_exhausted).
 *
 * Untraced responses (server side). A request that records nothing (unsampled, or shed:
 * sw_trace_entry_unrecorded) needs nothing from its response, so its bytes are not parsed,
 * and no clock is read for its writes; following them cost more than all the rest of such a
 * request (nginx's response head has eight lines). Only the next recorded request needs to
 * know where its own response begins. States (c->rs):
 * - RS_PARSE: everything written is parsed. An unrecorded request read while no response is
 *   pending and the parser stands between messages -> RS_SKIP.
 * - RS_SKIP: the fifo holds that request; writes are only noted (rs_wrote). At the next request
 *   head: nothing written since the last one means the client pipelined (it sent the next
 *   request before the response), the parser still stands right -> RS_PARSE for good
 *   (rs_never). Otherwise the response began, so the request is ended (no status; it records
 *   nothing) and the new one decides: unrecorded -> RS_LOST, recorded -> RS_RESYNC.
 * - RS_LOST: as RS_SKIP, but the stream position is not known; a pipelined head (nothing
 *   written since the last one) -> RS_RESYNC with both requests (the next status line begins
 *   the older one's response: nothing of it was written).
 * - RS_RESYNC: the fifo holds requests whose responses are still to come. The first write that
 *   begins with a status line ("HTTP/1.x ddd") resumes parsing from its first byte (-> RS_PARSE;
 *   the parser's queue holds the fifo's methods). Writes before it are the rest of a response
 *   we did not follow and are skipped, unless they may hide a status line (one not at their
 *   start, or cut short, or a sendfile): then we stop following the connection and its
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
#include "conn.h"
#include "guard.h"
#include "http.h"
#include "log.h"
#include "real.h"
#include "trace.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FIFO_LEN 8     /* open requests per connection (pipelining depth we follow) */
#define INJ_MAX 3328   /* sw8 (< 2 KiB) + sw8-correlation (< 1 KiB) lines */
#define PEER_MAX 64    /* "[v6-address]:port" */
#define OUT_IOV_MAX 64 /* iovecs of one modified write (app iovecs beyond are sent later) */
#define NO_ABS UINT64_MAX

enum role { ROLE_SERVER = 1, ROLE_CLIENT = 2 };

/* Two adjacent bytes of a connection as one word (little-endian: `first` in the low byte). */
static inline __attribute__((always_inline)) uint16_t flags2(const void *first)
{
    uint16_t w;
    memcpy(&w, first, sizeof(w));
    return w;
}

/* A server's response stream ("Untraced responses"). */
enum rs {
    RS_PARSE,  /* every written byte goes to the response parser */
    RS_RESYNC, /* the fifo holds requests whose responses are to come; the next write that
                  begins with a status line begins the first of them */
    RS_SKIP,   /* the fifo holds one unrecorded request; the parser stands at its response */
    RS_LOST,   /* the fifo holds one unrecorded request (or none); where a response starts is
                  not known */
};

struct sw_conn {
    _Atomic uint32_t in_use; /* pool slot taken */
    _Atomic uint32_t refs;   /* fds that point at this object */
    atomic_flag busy;        /* spin flag for the bookkeeping, never held across a syscall */
    uint8_t role;            /* enum role */
    bool dead;               /* stop parsing; untrack once nothing is pending */
    /* Server: how the written responses are followed ("Untraced responses"): enum rs, changed
     * under the lock, read outside it only for the clock (rs_clock). Between dead and ri_ext:
     * the usual paths test it with either in one load (flags2). */
    uint8_t rs;
    bool ri_ext;      /* server: ri carries an sw8, sw8-correlation or sw8-x value */
    bool req_stopped; /* the request direction switched protocol (CONNECT/Upgrade) */
    bool ins_active;  /* inserted lines are waiting for their position */
    bool limit_set;   /* do not send past `limit` before the insertion is done */
    uint8_t fifo_head, fifo_len;
    uint8_t hold_len;
    uint8_t peer_len;
    int resp_status;         /* status of the response head being framed */
    uint64_t fifo[FIFO_LEN]; /* span handles of the open requests, oldest first */
    int64_t req_start_ms;    /* first byte of the request in progress */
    uint64_t claimed, sent, parsed, ins_abs, limit;
    uint16_t inj_len, inj_off;
    uint16_t rport; /* client: the connected port */
    char hold[4];
    char tail[2]; /* client: the last two bytes parsed (tail[1] is the last) */
    /* Client: propagation headers the application itself writes (a proxy forwarding them). */
    uint64_t app_sw8_abs;  /* stream offset of its "sw8:" line, NO_ABS if none */
    uint64_t app_corr_abs; /* stream offset of its "sw8-correlation:" line */
    uint64_t ren[2];       /* stream offsets of app bytes sent as 'x' ("sw8" -> "swx") */
    uint8_t n_ren;
    bool nm_alive;       /* header-name scanner: still reading a name on this line */
    _Atomic bool forked; /* the process forked while this connection was open */
    uint8_t nm_len;
    char nm[16];
    uint64_t line_abs; /* stream offset of the current head line */
    /* Client: which request its exits belong to (docs/architecture.md, "Which request an outbound
     * call belongs to"): the thread's request at connect (sw_trace_request_now: 0 none,
     * SW_TRACE_UNKNOWN not known), for its first request head only; the request its latest
     * exit was given (a read of its response makes that request the thread's current one). */
    uint64_t owner, parent;
    bool head_seen;    /* client: a request head was written */
    uint8_t rs_method; /* RS_LOST: the method of the request in the fifo */
    bool rs_wrote;     /* RS_SKIP/LOST/RESYNC: bytes were written since the last request head */
    bool rs_never;     /* pipelined requests were seen: always follow the responses */
    /* Server: what sw_trace_entry_start() is told about each request head. The parts that do
     * not change between requests (method buffer, peer, tls) are set at accept; each head
     * stores only the rest (server_head). */
    struct sw_req_info ri;
    char peer[PEER_MAX];    /* server: the client's ip:port; client: the connected ip:port */
    struct sw_http reqp;    /* requests: read (server) or written (client) */
    struct sw_http respp;   /* responses: written (server) or read (client) */
    struct sw_http_req req; /* captures of the request parser */
    char inj[INJ_MAX];      /* the lines to insert (client) */
};

_Static_assert(offsetof(struct sw_conn, rs) == offsetof(struct sw_conn, dead) + 1 &&
                   offsetof(struct sw_conn, ri_ext) == offsetof(struct sw_conn, rs) + 1,
               "flags2: dead, rs and ri_ext adjacent");

uint32_t sw_conn_max;
uint32_t *sw_conn_tab;

static struct sw_conn *pool;
static uint32_t pool_n;
static _Atomic uint64_t *used_bits; /* bit i: pool[i] taken (after the pool in its mapping) */
static uint32_t used_words;
static size_t tab_bytes, pool_bytes;
static struct sw_http_opts http_opts;
static uint16_t exclude_ports[SW_CFG_LIST_MAX]; /* plugin.httpclient.propagation_exclude_ports */
static int n_exclude_ports;
static const struct sw_config *conf;
static struct {
    _Atomic uint64_t conns_tracked, pool_exhausted, not_http, inserted, insert_skipped, rs_given_up;
} stats;

static const char zeros[4096];

/* ---- pool and table ---------------------------------------------------------------------- */

int sw_conn_init(const struct sw_config *cfg, uint32_t pool_size)
{
    struct rlimit rl;
    rlim_t nfd = 1024;
    if (syscall(SYS_getrlimit, RLIMIT_NOFILE, &rl) == 0)
        nfd = rl.rlim_max > rl.rlim_cur ? rl.rlim_max : rl.rlim_cur;
    if (nfd == RLIM_INFINITY || nfd > SW_CONN_FD_CAP)
        nfd = SW_CONN_FD_CAP;
    if (nfd < 64)
        nfd = 64;
    if (pool_size == 0)
        pool_size = SW_CONN_POOL_DEFAULT;
    if (pool_size >= SW_CONN_CAND - 1)
        pool_size = SW_CONN_CAND - 2; /* slot values stay below SW_CONN_CAND (slot_is_obj) */
    tab_bytes = (size_t)nfd * sizeof(uint32_t);
    pool_bytes = (size_t)pool_size * sizeof(struct sw_conn);
    size_t objs_bytes = pool_bytes;
    pool_bytes += (size_t)(pool_size + 63) / 64 * sizeof(uint64_t);
    void *t = mmap(NULL, tab_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (t == MAP_FAILED)
        return -ENOMEM;
    void *p = mmap(NULL, pool_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        munmap(t, tab_bytes);
        return -ENOMEM;
    }
    conf = cfg;
    sw_http_opts_init(&http_opts);
    http_opts.fold_message = true; /* one event for a message without body (see http.h) */
    /* The target and Host of a request head may stay in the caller's bytes: every reader here
     * (req_info, exit_peer) runs at that HEAD event, inside the call that holds them. */
    http_opts.capture_refs = true;
    if (cfg) {
        if (cfg->http_headers_length_threshold > 0)
            http_opts.headers_threshold = (uint32_t)cfg->http_headers_length_threshold;
        for (int i = 0; i < cfg->include_http_headers.n; i++)
            sw_http_opts_add_header(&http_opts, cfg->include_http_headers.item[i],
                                    strlen(cfg->include_http_headers.item[i]));
        n_exclude_ports = 0;
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
    pool = p;
    pool_n = pool_size;
    used_bits = (_Atomic uint64_t *)(void *)((char *)p + objs_bytes);
    used_words = (pool_size + 63) / 64;
    sw_conn_tab = t;
    __atomic_store_n(&sw_conn_max, (uint32_t)nfd, __ATOMIC_RELEASE);
    return 0;
}

void sw_conn_shutdown(void)
{
    __atomic_store_n(&sw_conn_max, 0, __ATOMIC_RELEASE);
    if (sw_conn_tab)
        munmap(sw_conn_tab, tab_bytes);
    if (pool)
        munmap(pool, pool_bytes);
    sw_conn_tab = NULL;
    pool = NULL;
    pool_n = 0;
}

void sw_conn_get_stats(struct sw_conn_stats *o)
{
    o->conns_tracked = stats.conns_tracked;
    o->pool_exhausted = stats.pool_exhausted;
    o->not_http = stats.not_http;
    o->inserted = stats.inserted;
    o->insert_skipped = stats.insert_skipped;
    o->rs_given_up = stats.rs_given_up;
}

/*
 * The spin flag is taken with the re-entrancy guard held, so a signal handler that writes to
 * the same socket on this thread goes straight to libc instead of spinning forever.
 */
static void lock(struct sw_conn *c)
{
    SW_GUARD_ENTER();
    while (atomic_flag_test_and_set_explicit(&c->busy, memory_order_acquire))
        __builtin_ia32_pause();
}

static void unlock(struct sw_conn *c)
{
    atomic_flag_clear_explicit(&c->busy, memory_order_release);
    SW_GUARD_LEAVE();
}

/*
 * Claims the lowest free slot of the used bitmap (CAS on one word; lock-free). Lowest first,
 * so a process with a few connections at a time touches the pages of a few objects only
 * (an object is ~10 KiB: handing out slots round-robin would make all 4096 resident, ~40 MiB,
 * after 4096 connections), and the atfork child scans 64 words instead of 4096 objects.
 */
static int slot_claim(void)
{
    for (uint32_t w = 0; w < used_words; w++) {
        uint64_t v = sw_atomic_load_relaxed(&used_bits[w]);
        while (~v) {
            unsigned bit = (unsigned)__builtin_ctzll(~v);
            uint32_t idx = w * 64 + bit;
            if (idx >= pool_n)
                break;
            if (atomic_compare_exchange_weak_explicit(&used_bits[w], &v, v | (1ull << bit),
                                                      memory_order_acq_rel, memory_order_relaxed))
                return (int)idx;
        }
    }
    return -1;
}

/* Takes a free pool object; NULL when exhausted. */
static struct sw_conn *conn_alloc(enum role role, uint32_t *idx_out)
{
    int got = slot_claim();
    if (got >= 0) {
        uint32_t idx = (uint32_t)got;
        {
            struct sw_conn *c = &pool[idx];
            atomic_store_explicit(&c->in_use, 1, memory_order_relaxed);
            /* Reset only the small state; the big buffers are written before being read. */
            atomic_store(&c->refs, 1);
            atomic_flag_clear(&c->busy);
            c->role = (uint8_t)role;
            c->dead = c->req_stopped = c->ins_active = c->limit_set = false;
            c->fifo_head = c->fifo_len = c->hold_len = c->peer_len = 0;
            c->resp_status = 0;
            c->req_start_ms = 0;
            c->claimed = c->sent = c->parsed = c->ins_abs = c->limit = 0;
            c->inj_len = c->inj_off = 0;
            c->tail[0] = c->tail[1] = 0;
            c->rport = 0;
            c->app_sw8_abs = c->app_corr_abs = NO_ABS;
            c->n_ren = 0;
            c->nm_alive = true;
            atomic_store_explicit(&c->forked, false, memory_order_relaxed);
            c->nm_len = 0;
            c->line_abs = 0;
            c->owner = c->parent = 0;
            c->head_seen = false;
            __atomic_store_n(&c->rs, RS_PARSE, __ATOMIC_RELAXED);
            c->rs_wrote = c->rs_never = false;
            sw_http_init(&c->reqp, SW_HTTP_REQUEST, &http_opts, &c->req);
            sw_http_init(&c->respp, SW_HTTP_RESPONSE, &http_opts, NULL);
            sw_atomic_add_relaxed(&stats.conns_tracked, 1);
            *idx_out = idx;
            return c;
        }
    }
    if (sw_atomic_add_relaxed(&stats.pool_exhausted, 1) == 0)
        SW_GUARDED(SW_LOGW("conn: all %u connection objects in use: new connections are not "
                           "traced (counted)",
                           pool_n));
    return NULL;
}

/*
 * True when a slot value names a pool object: 1..pool_n. One compare: 0 wraps to UINT32_MAX
 * and SW_CONN_CAND to UINT32_MAX - 1, both >= pool_n (sw_conn_init keeps pool_n below them).
 */
static inline __attribute__((always_inline)) bool slot_is_obj(uint32_t v)
{
    return v - 1u < pool_n;
}

/* Inlined: on every interposed call of a tracked fd (a call costs as much as the body). */
static inline __attribute__((always_inline)) struct sw_conn *conn_of(int fd)
{
    if ((unsigned)fd >= sw_conn_max)
        return NULL;
    uint32_t v = __atomic_load_n(&sw_conn_tab[fd], __ATOMIC_ACQUIRE);
    return slot_is_obj(v) ? &pool[v - 1] : NULL;
}

static void slot_set(int fd, uint32_t v)
{
    if ((unsigned)fd < sw_conn_max)
        __atomic_store_n(&sw_conn_tab[fd], v, __ATOMIC_RELEASE);
}

static inline __attribute__((always_inline)) uint32_t slot_get(int fd)
{
    if ((unsigned)fd >= sw_conn_max)
        return 0;
    return __atomic_load_n(&sw_conn_tab[fd], __ATOMIC_ACQUIRE);
}

/* The object of a slot value read by slot_get() (conn_of() without a second load). */
static inline __attribute__((always_inline)) struct sw_conn *conn_at(uint32_t v)
{
    return slot_is_obj(v) ? &pool[v - 1] : NULL;
}

/* ---- spans --------------------------------------------------------------------------------- */

/* Deeper pipelining than we follow: the newest request goes untraced. */
static SW_NOINLINE void fifo_full(struct sw_conn *c, uint64_t h)
{
    if (h) {
        if (c->role == ROLE_SERVER)
            SW_GUARDED(sw_trace_entry_abort(h, "agent", "pipeline too deep", sw_trace_now_ms()));
        else
            SW_GUARDED(sw_trace_exit_error(h, "agent", "pipeline too deep", sw_trace_now_ms()));
    }
}

static inline __attribute__((always_inline)) void fifo_push(struct sw_conn *c, uint64_t h)
{
    if (SW_UNLIKELY(c->fifo_len == FIFO_LEN)) {
        fifo_full(c, h);
        return;
    }
    c->fifo[(c->fifo_head + c->fifo_len) % FIFO_LEN] = h;
    c->fifo_len++;
}

static uint64_t fifo_pop(struct sw_conn *c)
{
    if (!c->fifo_len)
        return 0;
    uint64_t h = c->fifo[c->fifo_head];
    c->fifo_head = (uint8_t)((c->fifo_head + 1) % FIFO_LEN);
    c->fifo_len--;
    return h;
}

static uint64_t fifo_front(const struct sw_conn *c)
{
    return c->fifo_len ? c->fifo[c->fifo_head] : 0;
}

/* Ends every open span of the connection as failed. */
static void fail_all(struct sw_conn *c, const char *kind, const char *msg, int64_t t)
{
    while (c->fifo_len) {
        uint64_t h = fifo_pop(c);
        if (!h)
            continue;
        if (c->role == ROLE_SERVER)
            SW_GUARDED(sw_trace_entry_abort(h, kind, msg, t));
        else
            SW_GUARDED(sw_trace_exit_error(h, kind, msg, t));
    }
}

/*
 * A response (server: written; client: read) is complete. Inlined: once per request. Runs
 * under the lock, which holds the guard.
 */
static inline __attribute__((always_inline)) void response_done_as(struct sw_conn *c, int status,
                                                                   int64_t t, int role)
{
    uint64_t h = fifo_pop(c);
    if (!h)
        return;
    if (role == ROLE_SERVER)
        sw_trace_entry_finish(h, status, t);
    else
        sw_trace_exit_finish(h, status, t);
}

static inline __attribute__((always_inline)) void response_done(struct sw_conn *c, int status,
                                                                int64_t t)
{
    response_done_as(c, status, t, c->role);
}

static size_t fmt_addr(const struct sockaddr *sa, char *out, size_t cap)
{
    char ip[INET6_ADDRSTRLEN];
    unsigned port;
    size_t n = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const void *)sa;
        if (!inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip)))
            return 0;
        port = ntohs(s4->sin_port);
        n = strlen(ip);
        if (n + 7 > cap)
            return 0;
        memcpy(out, ip, n);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const void *)sa;
        if (!inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip)))
            return 0;
        port = ntohs(s6->sin6_port);
        size_t l = strlen(ip);
        if (l + 9 > cap)
            return 0;
        out[n++] = '[';
        memcpy(out + n, ip, l);
        n += l;
        out[n++] = ']';
    } else {
        return 0;
    }
    char digits[8];
    int d = 0;
    do {
        digits[d++] = (char)('0' + port % 10);
        port /= 10;
    } while (port && d < 6);
    out[n++] = ':';
    while (d)
        out[n++] = digits[--d];
    return n;
}

/* Fills the common part of a sw_req_info from the request captures (the optional strings
 * are NULL when absent; sw8, correlation, sw8-x and the peer are the caller's). */
static inline void req_info(const struct sw_conn *c, struct sw_req_info *ri)
{
    const struct sw_http_req *r = &c->req;
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

/*
 * The clock of one interposed call, read at most once and only when needed (a read that
 * neither begins a request nor ends a response does not read it). 0: not read yet.
 */
static int64_t now_lazy(int64_t *t)
{
    if (!*t)
        *t = sw_trace_now_ms();
    return *t;
}

/* ---- server side: requests read, responses written ----------------------------------------- */

/* ---- untraced responses ---------------------------------------------------------------------- */

static void rs_set(struct sw_conn *c, enum rs v)
{
    __atomic_store_n(&c->rs, (uint8_t)v, __ATOMIC_RELAXED);
}

/*
 * The clock for a write, unless no span can end on it: a server in RS_SKIP or RS_LOST (a
 * client's rs stays RS_PARSE). Read outside the lock: a stale value only moves the read after
 * the write (now_lazy), or reads it for nothing.
 */
static inline __attribute__((always_inline)) int64_t rs_clock(const struct sw_conn *c)
{
    if (SW_LIKELY(__atomic_load_n(&c->rs, __ATOMIC_RELAXED) < RS_SKIP))
        return sw_trace_now_ms();
    return 0;
}

/* Ends the requests of the fifo without a status: their responses were not followed. */
static inline __attribute__((always_inline)) void rs_drop(struct sw_conn *c, int64_t *t)
{
    while (c->fifo_len) {
        uint64_t h = fifo_pop(c);
        if (h)
            sw_trace_entry_finish(h, 0, now_lazy(t)); /* the lock holds the guard */
    }
}

/* Stops following the connection (a response start that may have been missed). */
static SW_NOINLINE void rs_give_up(struct sw_conn *c, int64_t *t)
{
    rs_drop(c, t);
    c->dead = true;
    sw_atomic_add_relaxed(&stats.rs_given_up, 1);
}

/* A request head after the previous response's position was lost (see "Untraced responses"). */
static inline __attribute__((always_inline)) void rs_lost_head(struct sw_conn *c, uint64_t h,
                                                               enum sw_http_method m)
{
    c->rs_wrote = false;
    fifo_push(c, h);
    if (sw_trace_entry_unrecorded(h)) {
        c->rs_method = (uint8_t)m;
        rs_set(c, RS_LOST);
    } else {
        sw_http_init(&c->respp, SW_HTTP_RESPONSE, &http_opts, NULL);
        sw_http_push_response_of(&c->respp, m);
        rs_set(c, RS_RESYNC);
    }
}

/*
 * server_head()'s request when it records nothing or the responses are not all followed: the
 * transitions of "Untraced responses" at a request head, but for the usual one while skipping
 * (the request of the fifo ended, its response having begun: server_head_rest). Under the lock.
 */
SW_HOT static SW_NOINLINE void server_head_rs(struct sw_conn *c, uint64_t h, enum sw_http_method m)
{
    switch (c->rs) {
    case RS_LOST:
        /* Pipelined (the fifo still holds one): nothing was written for it, so the next status
         * line begins its response, and the parser follows from there on. */
        c->rs_never = true;
        sw_http_init(&c->respp, SW_HTTP_RESPONSE, &http_opts, NULL);
        sw_http_push_response_of(&c->respp, (enum sw_http_method)c->rs_method);
        rs_set(c, RS_RESYNC);
        break;
    case RS_SKIP:
        /* Pipelined: the parser still stands at the first one's response. */
        c->rs_never = true;
        rs_set(c, RS_PARSE);
        break;
    case RS_PARSE: /* h records nothing */
        if (!c->rs_never && !c->fifo_len && m != SW_HTTP_M_CONNECT &&
            !sw_http_head_in_progress(&c->respp) && !sw_http_in_body(&c->respp) &&
            !sw_http_has_pending(&c->respp)) {
            c->rs_wrote = false;
            rs_set(c, RS_SKIP);
        }
        break;
    default: /* RS_RESYNC: one more response to come */
        break;
    }
    c->rs_wrote = false;
    fifo_push(c, h);
    sw_http_push_response_of(&c->respp, m);
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
    c->rs_wrote = true;
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
 * The first write of a keepable request's response (trace.h, sw_trace_entry_respond; the
 * fifo holds it alone): its status line tells the trace module, which may keep the request;
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
    /* "HTTP/1.x ddd" (rs_status_line, in two loads and a few compares) */
    uint64_t w;
    memcpy(&w, p, 8);
    unsigned d0 = (unsigned)(p[9] - '0'), d1 = (unsigned)(p[10] - '0'),
             d2 = (unsigned)(p[11] - '0');
    if ((w & 0xfeffffffffffffffull) != 0x302e312f50545448ull || p[8] != ' ' || d0 > 9 || d1 > 9 ||
        d2 > 9 ||
        !sw_trace_entry_respond(fifo_front(c), (int)(d0 * 100 + d1 * 10 + d2), now_lazy(t)))
        return false;
    if (c->rs == RS_LOST) { /* the parser's position was lost: it starts at this status line */
        sw_http_init(&c->respp, SW_HTTP_RESPONSE, &http_opts, NULL);
        sw_http_push_response_of(&c->respp, (enum sw_http_method)c->rs_method);
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
    if (c->rs >= RS_SKIP) {
        if (!c->rs_wrote && c->fifo_len == 1 && sw_trace_entry_keepable(fifo_front(c)) &&
            rs_keep(c, iov, iovcnt, r, t))
            return true;
        c->rs_wrote = true;
        return false;
    }
    return rs_written(c, iov, iovcnt, r, t);
}

/*
 * server_head() for a head with sw8 values (or after one), or while the responses are not all
 * followed (rs; "Untraced responses"): the rest of c->ri, and the entry starts.
 */
SW_HOT static SW_NOINLINE uint64_t server_head_rest(struct sw_conn *c, enum sw_http_method m,
                                                    int64_t *t, bool ext)
{
    const struct sw_http_req *r = &c->req;
    struct sw_req_info *ri = &c->ri;
    if (ext) {
        ri->sw8 = r->sw8_len ? r->sw8 : NULL;
        ri->sw8_len = r->sw8_len;
        ri->correlation = r->corr_len ? r->corr : NULL;
        ri->correlation_len = r->corr_len;
        ri->sw8x = r->sw8x_len ? r->sw8x : NULL;
        ri->sw8x_len = r->sw8x_len;
        c->ri_ext = (r->sw8_len | r->corr_len | r->sw8x_len) != 0;
    }
    /* The response of the request in the fifo began: it ends before the new one starts (the
     * trace module forgets its latest entry cheapest). */
    if (c->rs >= RS_SKIP && c->rs_wrote)
        rs_drop(c, t);
    uint64_t h = sw_trace_entry_start(ri, c->req_start_ms ? c->req_start_ms : now_lazy(t));
    if (c->rs >= RS_SKIP && !c->fifo_len) {
        rs_lost_head(c, h, m); /* the usual one while skipping; the others: server_head_rs */
    } else if (c->rs != RS_PARSE || sw_trace_entry_unrecorded(h)) {
        server_head_rs(c, h, m);
    } else {
        fifo_push(c, h);
        sw_http_push_response_of(&c->respp, m);
    }
    return h;
}

/*
 * A request head was read: the entry span starts (under the lock, which holds the guard).
 * c->ri keeps what does not change between requests; only the rest is stored here.
 */
static inline __attribute__((always_inline)) uint64_t server_head(struct sw_conn *c,
                                                                  enum sw_http_method m, int64_t *t)
{
    const struct sw_http_req *r = &c->req;
    struct sw_req_info *ri = &c->ri;
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
    if (SW_UNLIKELY((lens << 16) | flags2(&c->rs)))
        return server_head_rest(c, m, t, (lens << 16) | c->ri_ext);
    uint64_t h = sw_trace_entry_start(ri, c->req_start_ms ? c->req_start_ms : now_lazy(t));
    if (SW_UNLIKELY(sw_trace_entry_unrecorded(h))) {
        server_head_rs(c, h, m);
        return h;
    }
    fifo_push(c, h);
    sw_http_push_response_of(&c->respp, m); /* a server's response parser */
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
    for (;;) {
        if (SW_LIKELY(ev->type == SW_HTTP_EV_HEAD)) {
            started = server_head(c, ev->method, t);
        } else if (ev->type == SW_HTTP_EV_NONE) {
            break;
        } else if (ev->type == SW_HTTP_EV_UPGRADE) {
            c->req_stopped = true; /* later bytes are another protocol; the response decides */
            break;
        } else if (ev->type == SW_HTTP_EV_NOT_HTTP) {
            if (!c->fifo_len)
                sw_atomic_add_relaxed(&stats.not_http, 1);
            c->dead = true;
            break;
        } else if (ev->type == SW_HTTP_EV_ERROR) {
            c->dead = true;
            break;
        }
        /* HEAD and MESSAGE change neither dead nor req_stopped. */
        if (off >= len && !sw_http_has_pending(&c->reqp))
            break;
        if (off < len && !sw_http_head_in_progress(&c->reqp) && !sw_http_in_body(&c->reqp))
            c->req_start_ms = now_lazy(t);
        off += sw_http_feed_request(&c->reqp, p + off, len - off, ev);
    }
    return started;
}

/* server_events() out of line: the rest of server_read()'s usual read when it was not usual. */
SW_HOT static SW_NOINLINE uint64_t server_events_rest(struct sw_conn *c, const char *p, size_t len,
                                                      size_t off, struct sw_http_event *ev,
                                                      int64_t *t)
{
    return server_events(c, p, len, off, ev, t, 0);
}

/*
 * Feeds request bytes read by a server (the caller checked !c->dead). Returns the handle of
 * the last entry it started (0: none), which is the thread's current request already.
 * Usually one pass: a whole head (and no body) in the bytes gives one HEAD event that
 * consumes them all, and nothing is pending after it. Events may be brief
 * (sw_http_feed_request(), http.h): only type and method are read here.
 */
static inline __attribute__((always_inline)) uint64_t
server_feed_request_in(struct sw_conn *c, const char *p, size_t len, int64_t *t)
{
    struct sw_http_event ev;
    /* Once every byte is consumed and no event is held, another call would only say NONE. */
    if (c->req_stopped || (!len && !sw_http_has_pending(&c->reqp)))
        return 0;
    if (len && !sw_http_head_in_progress(&c->reqp) && !sw_http_in_body(&c->reqp))
        c->req_start_ms = now_lazy(t);
    size_t off = sw_http_feed_request(&c->reqp, p, len, &ev);
    return server_events(c, p, len, off, &ev, t, 0);
}

/* server_feed_request_in() out of line, for the general read path. */
SW_HOT static uint64_t server_feed_request(struct sw_conn *c, const char *p, size_t len, int64_t *t)
{
    return server_feed_request_in(c, p, len, t);
}

/*
 * Feeds response bytes (written by a server, read by a client); runs under the lock. Usually
 * one pass: a whole response in the bytes gives one HEAD event with `message` set. Events may
 * be brief (sw_http_feed_response(), http.h): only type, status and message are read here.
 */
static inline __attribute__((always_inline)) void
feed_response_on(struct sw_conn *c, const char *p, size_t len, int64_t *t, int role, bool alive)
{
    size_t off = 0;
    /* Once every byte is consumed and no event is held, another call would only say NONE. */
    if ((!alive && c->dead) || (!len && !sw_http_has_pending(&c->respp)))
        return;
    for (;;) {
        struct sw_http_event ev;
        off += sw_http_feed_response(&c->respp, p + off, len - off, &ev);
        if (SW_LIKELY(ev.type == SW_HTTP_EV_HEAD)) {
            c->resp_status = ev.status;
            if (ev.message) /* no body, or all of it in these bytes: the response is done */
                response_done_as(c, ev.status, now_lazy(t), role);
        } else if (ev.type == SW_HTTP_EV_NONE) {
            break;
        } else if (ev.type == SW_HTTP_EV_MESSAGE) {
            response_done_as(c, ev.status ? ev.status : c->resp_status, now_lazy(t), role);
        } else if (ev.type == SW_HTTP_EV_UPGRADE) {
            response_done_as(c, ev.status ? ev.status : c->resp_status, now_lazy(t), role);
            c->dead = true;
            break;
        } else if (ev.type == SW_HTTP_EV_NOT_HTTP) {
            if (!c->fifo_len)
                sw_atomic_add_relaxed(&stats.not_http, 1);
            fail_all(c, "http", "response is not HTTP/1.x", now_lazy(t));
            c->dead = true;
            break;
        } else {
            fail_all(c, "http", "malformed response", now_lazy(t));
            c->dead = true;
            break;
        }
        /* HEAD and MESSAGE do not make the connection dead. */
        if (off >= len && !sw_http_has_pending(&c->respp))
            break;
    }
}

static inline __attribute__((always_inline)) void feed_response_in(struct sw_conn *c, const char *p,
                                                                   size_t len, int64_t *t, int role)
{
    feed_response_on(c, p, len, t, role, false);
}

/* feed_response_in() out of line, for the general paths. */
SW_HOT static void feed_response(struct sw_conn *c, const char *p, size_t len, int64_t *t)
{
    feed_response_in(c, p, len, t, c->role);
}

/* Calls `fn` for the first `r` bytes of an iovec array. */
#define FOR_BYTES(iov, iovcnt, r, fn)                                                              \
    do {                                                                                           \
        size_t left_ = (size_t)(r);                                                                \
        for (int i_ = 0; i_ < (iovcnt) && left_; i_++) {                                           \
            size_t l_ = (iov)[i_].iov_len < left_ ? (iov)[i_].iov_len : left_;                     \
            fn((const char *)(iov)[i_].iov_base, l_);                                              \
            left_ -= l_;                                                                           \
        }                                                                                          \
    } while (0)

/* ---- untracking ---------------------------------------------------------------------------- */

/* Ends the entry of a CGI response (head begun here, finished by a forked child). */
static void cgi_part_done(struct sw_conn *c, int64_t t)
{
    int st = sw_http_partial_status(&c->respp);
    uint64_t h = fifo_pop(c);
    if (h)
        SW_GUARDED(sw_trace_entry_finish(h, st, t));
}

/* Drops one fd's reference; the last one ends the connection's spans and frees the object. */
static void release(int fd, struct sw_conn *c, bool closing)
{
    slot_set(fd, 0);
    if (atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    int64_t t = sw_trace_now_ms();
    lock(c);
    if (closing && !c->dead && c->fifo_len && c->role == ROLE_SERVER &&
        atomic_load_explicit(&c->forked, memory_order_relaxed) &&
        sw_http_head_in_progress(&c->respp)) {
        /*
         * CGI: the response head was begun here, the process forked, and a child (the CGI
         * program, with the socket as its stdout) writes the rest. Closing our copy ends our
         * part: the request ends here with the status of the status line we wrote (isError
         * for >= 400), or without a status when the status line was not complete.
         */
        cgi_part_done(c, t);
    } else if (closing && !c->dead && c->fifo_len) {
        /* EOF on our side: an until-close response written/read so far ends here. */
        struct sw_http_event ev;
        sw_http_eof(&c->respp, &ev);
        if (ev.type == SW_HTTP_EV_MESSAGE)
            response_done(c, ev.status ? ev.status : c->resp_status, t);
    }
    if (c->role == ROLE_SERVER && c->rs >= RS_SKIP && c->rs_wrote)
        rs_drop(c, &t); /* an unfollowed response began: it ends without a status, no error */
    fail_all(c, "closed", "connection closed before the response completed", t);
    unlock(c);
    atomic_store_explicit(&c->in_use, 0, memory_order_release);
    uint32_t idx = (uint32_t)(c - pool);
    atomic_fetch_and_explicit(&used_bits[idx / 64], ~(1ull << (idx % 64)), memory_order_release);
}

/* Stops following a connection once nothing of ours is waiting to be sent. */
static void untrack_if_dead(int fd, struct sw_conn *c)
{
    if (c->dead && !c->hold_len && !c->ins_active)
        release(fd, c, false);
}

/* ---- fd lifecycle -------------------------------------------------------------------------- */

void sw_conn_on_socket(int fd, int domain, int type)
{
    int e = errno;
    struct sw_conn *c = conn_of(fd);
    if (c) /* a stale slot: its close went around us (raw syscall) */
        release(fd, c, false);
    bool tcp = (domain == AF_INET || domain == AF_INET6) && (type & 0xf) == SOCK_STREAM;
    slot_set(fd, tcp ? SW_CONN_CAND : 0);
    errno = e;
}

static bool is_conn_error(int e)
{
    return e == ECONNREFUSED || e == ECONNRESET || e == EPIPE || e == ETIMEDOUT ||
           e == EHOSTUNREACH || e == ENETUNREACH || e == ECONNABORTED;
}

static const char *errno_name(int e)
{
    switch (e) {
    case ECONNREFUSED:
        return "ECONNREFUSED";
    case ECONNRESET:
        return "ECONNRESET";
    case EPIPE:
        return "EPIPE";
    case ETIMEDOUT:
        return "ETIMEDOUT";
    case EHOSTUNREACH:
        return "EHOSTUNREACH";
    case ENETUNREACH:
        return "ENETUNREACH";
    case ECONNABORTED:
        return "ECONNABORTED";
    default:
        return "error";
    }
}

/* The request a client connection's first exit belongs to (see client_head). */
static uint64_t conn_owner(const struct sw_conn *c)
{
    return c->owner ? c->owner : sw_trace_request_now();
}

/* A client connection failed before any request was written: one error exit span, under the
 * request the connection was opened for (`parent`: its owner, as for its first head). */
static void connect_failed(uint64_t parent, const char *peer, size_t peer_len, int e,
                           const char *msg)
{
    struct sw_req_info ri;
    memset(&ri, 0, sizeof(ri));
    ri.method = "CONNECT";
    ri.method_len = 0;
    ri.target = "/";
    ri.target_len = 0;
    ri.peer = peer;
    ri.peer_len = peer_len;
    int64_t t = sw_trace_now_ms();
    size_t n = 0;
    char dummy[1];
    uint64_t h;
    SW_GUARDED(h = sw_trace_exit_start_in(parent, &ri, t, dummy, 0, &n));
    SW_GUARDED(sw_trace_exit_error(h, e ? errno_name(e) : "connect", msg, t));
}

int sw_conn_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    int r = sw_libc.connect(fd, addr, len);
    int e = errno;
    if (slot_get(fd) != SW_CONN_CAND || !addr || len < sizeof(sa_family_t) ||
        (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)) {
        errno = e;
        return r;
    }
    char peer[PEER_MAX];
    size_t pl = fmt_addr(addr, peer, sizeof(peer));
    if (r == 0 || e == EINPROGRESS || e == EINTR) {
        uint32_t idx;
        struct sw_conn *c = conn_alloc(ROLE_CLIENT, &idx);
        if (c) {
            c->owner = sw_trace_request_now(); /* opened for the thread's request */
            memcpy(c->peer, peer, pl);
            c->peer_len = (uint8_t)pl;
            c->rport = ntohs(addr->sa_family == AF_INET
                                 ? ((const struct sockaddr_in *)(const void *)addr)->sin_port
                                 : ((const struct sockaddr_in6 *)(const void *)addr)->sin6_port);
            slot_set(fd, idx + 1);
        } else {
            slot_set(fd, 0);
        }
    } else if (is_conn_error(e)) {
        connect_failed(sw_trace_request_now(), peer, pl, e, "connect failed");
    }
    errno = e;
    return r;
}

int sw_conn_accept(int lfd, struct sockaddr *addr, socklen_t *len, int flags, bool four)
{
    socklen_t cap = (addr && len) ? *len : 0;
    int r = four ? sw_libc.accept4(lfd, addr, len, flags) : sw_libc.accept(lfd, addr, len);
    int e = errno;
    if (r < 0 || (unsigned)r >= sw_conn_max) {
        errno = e;
        return r;
    }
    struct sw_conn *old = conn_of(r);
    if (old)
        release(r, old, false);
    slot_set(r, 0);
    struct sockaddr_storage ss;
    const struct sockaddr *sa = NULL;
    if (cap >= sizeof(struct sockaddr_in) && *len <= cap) {
        sa = addr;
    } else {
        socklen_t sl = sizeof(ss);
        if (sw_libc.getpeername(r, (struct sockaddr *)&ss, &sl) == 0)
            sa = (struct sockaddr *)&ss;
    }
    if (sa && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6)) {
        uint32_t idx;
        struct sw_conn *c = conn_alloc(ROLE_SERVER, &idx);
        if (c) {
            c->peer_len = (uint8_t)fmt_addr(sa, c->peer, sizeof(c->peer));
            memset(&c->ri, 0, sizeof(c->ri));
            c->ri.method = c->req.method_text;
            c->ri.peer = c->peer;
            c->ri.peer_len = c->peer_len;
            c->ri_ext = false;
            slot_set(r, idx + 1);
        }
    }
    errno = e;
    return r;
}

void sw_conn_on_close(int fd)
{
    int e = errno;
    struct sw_conn *c = conn_of(fd);
    if (c && c->role == ROLE_CLIENT && !c->claimed && !c->fifo_len && atomic_load(&c->refs) == 1) {
        /*
         * A non-blocking connect that failed is seen by the app through poll + SO_ERROR,
         * never by us: a client closed before it wrote anything, in state CLOSE (not
         * SYN_SENT: an attempt abandoned while in progress, e.g. happy eyeballs), failed.
         */
        struct tcp_info ti;
        socklen_t tl = sizeof(ti);
        if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0 && ti.tcpi_state == TCP_CLOSE)
            connect_failed(conn_owner(c), c->peer, c->peer_len, 0,
                           "connection failed before the request");
    }
    if (c)
        release(fd, c, true);
    else
        slot_set(fd, 0);
    errno = e;
}

void sw_conn_on_shutdown(int fd, int how)
{
    if (how != SHUT_WR && how != SHUT_RDWR)
        return;
    int e = errno;
    struct sw_conn *c = conn_of(fd);
    if (c && c->role == ROLE_SERVER) {
        int64_t t = sw_trace_now_ms();
        lock(c);
        if (!c->dead && c->fifo_len && atomic_load_explicit(&c->forked, memory_order_relaxed) &&
            sw_http_head_in_progress(&c->respp))
            cgi_part_done(c, t);
        unlock(c);
    }
    errno = e;
}

void sw_conn_on_dup(int oldfd, int newfd)
{
    int e = errno;
    if (oldfd != newfd) {
        struct sw_conn *prev = conn_of(newfd);
        if (prev)
            release(newfd, prev, true);
        uint32_t v = slot_get(oldfd);
        struct sw_conn *c = conn_of(oldfd);
        if (c) {
            atomic_fetch_add(&c->refs, 1);
            slot_set(newfd, v);
        } else {
            slot_set(newfd, v == SW_CONN_CAND ? SW_CONN_CAND : 0);
        }
    }
    errno = e;
}

void sw_conn_close_range(unsigned int first, unsigned int last)
{
    int e = errno;
    if (last >= sw_conn_max)
        last = sw_conn_max ? sw_conn_max - 1 : 0;
    for (unsigned int fd = first; fd <= last && fd < sw_conn_max; fd++) {
        if (sw_conn_tab[fd])
            sw_conn_on_close((int)fd);
    }
    errno = e;
}

void sw_conn_after_fork_parent(void)
{
    for (uint32_t w = 0; pool && w < used_words; w++) {
        uint64_t v = sw_atomic_load_relaxed(&used_bits[w]);
        while (v) {
            uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(v);
            v &= v - 1;
            if (i < pool_n)
                atomic_store_explicit(&pool[i].forked, true, memory_order_relaxed);
        }
    }
}

void sw_conn_after_fork(void)
{
    /*
     * The trace module forgot the parent's spans: drop their handles, keep the framing. A spin
     * flag still set was held by a parent thread that does not exist here: clear it (nothing
     * can deadlock on it), and stop following that connection in this process, since its
     * bookkeeping may be half-updated (the child rarely uses a connection another thread of
     * the parent was using at that very moment).
     */
    for (uint32_t w = 0; pool && w < used_words; w++) {
        uint64_t v = sw_atomic_load_relaxed(&used_bits[w]);
        while (v) {
            uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(v);
            v &= v - 1;
            if (i >= pool_n)
                break;
            struct sw_conn *c = &pool[i];
            if (atomic_flag_test_and_set(&c->busy))
                c->dead = true;
            atomic_flag_clear(&c->busy);
            for (int k = 0; k < FIFO_LEN; k++)
                c->fifo[k] = 0;
        }
    }
}

/* ---- reads --------------------------------------------------------------------------------- */

/*
 * A server read `r` > 0 bytes into `p` (one buffer): the usual read of a traced request.
 * Straight through for the usual bytes: a whole head at p[0] between messages (what
 * server_feed_request_in() does for them, without its loop), else server_events_rest() goes
 * on from the first event, or server_feed_request() does it all.
 */
static inline __attribute__((always_inline)) void server_read(int fd, struct sw_conn *c,
                                                              const char *p, size_t r)
{
    int64_t t = 0; /* see now_lazy */
    lock(c);
    if (SW_LIKELY(!c->dead)) {
        uint64_t started;
        if (SW_LIKELY(!c->req_stopped && sw_http_fast_ready(&c->reqp, r))) {
            /* Between messages (no head begun, no body, nothing held): a request starts. */
            struct sw_http_event ev;
            c->req_start_ms = t = sw_trace_now_ms();
            c->reqp.fflags = 0;
            size_t n = sw_http_fast_request(&c->reqp, p, r, &ev, true);
            if (SW_LIKELY(ev.type == SW_HTTP_EV_HEAD && n == r && !sw_http_has_pending(&c->reqp)))
                started = server_head(c, ev.method, &t);
            else
                started = server_events_rest(c, p, r, n, &ev, &t);
        } else {
            started = server_feed_request(c, p, r, &t);
        }
        /* The request being served becomes current again (an entry just started is). */
        uint64_t front = c->fifo_len ? fifo_front(c) : 0;
        if (front && !(c->fifo_len == 1 && front == started))
            sw_trace_touch(front); /* the lock holds the guard */
    }
    unlock(c);
    untrack_if_dead(fd, c);
}

/*
 * A client's response was read: the thread now works for the request of its latest exit (an
 * event loop handles that request's upstream), or, when that was not known, for none it knows.
 */
static inline void client_touch(const struct sw_conn *c)
{
    if (c->parent == SW_TRACE_UNKNOWN)
        sw_trace_tls.current = 0;
    else if (c->parent)
        sw_trace_touch(c->parent);
}

SW_HOT void sw_conn_on_read(int fd, const struct iovec *iov, int iovcnt, ssize_t r, int err,
                            int flags)
{
    uint32_t v = slot_get(fd);
    if (v == SW_CONN_CAND) {
        slot_set(fd, 0); /* I/O on a socket we never saw connect or accept: not ours */
        return;
    }
    struct sw_conn *c = conn_at(v);
    if (!c || (flags & MSG_PEEK))
        return;
    int64_t t = 0; /* see now_lazy */
    lock(c);
    if (c->dead) {
        /* nothing */
    } else if (r > 0 && (flags & MSG_TRUNC)) {
        c->dead = true; /* the bytes were discarded by the kernel: we cannot follow */
    } else if (r > 0) {
        uint64_t started = 0;
#define FEED_SRV(p, l) started = server_feed_request(c, p, l, &t)
#define FEED_RESP(p, l) feed_response(c, p, l, &t)
        if (c->role == ROLE_SERVER) {
            FOR_BYTES(iov, iovcnt, r, FEED_SRV);
            /* The request being served becomes current again (an entry just started is). */
            uint64_t front = c->fifo_len ? fifo_front(c) : 0;
            if (front && !(c->fifo_len == 1 && front == started))
                sw_trace_touch(front); /* the lock holds the guard */
        } else {
            FOR_BYTES(iov, iovcnt, r, FEED_RESP);
            client_touch(c); /* the lock holds the guard */
        }
    } else if (r == 0) {
        size_t want = 0;
        for (int i = 0; i < iovcnt; i++)
            want += iov[i].iov_len;
        if (want && c->role == ROLE_CLIENT) {
            struct sw_http_event ev;
            sw_http_eof(&c->respp, &ev);
            if (ev.type == SW_HTTP_EV_MESSAGE)
                response_done(c, ev.status ? ev.status : c->resp_status, now_lazy(&t));
            fail_all(c, "closed", "peer closed the connection before the response", now_lazy(&t));
            c->dead = true;
        }
    } else if (is_conn_error(err)) {
        if (c->role == ROLE_CLIENT && !c->fifo_len && !c->claimed && err == ECONNREFUSED) {
            unlock(c);
            connect_failed(conn_owner(c), c->peer, c->peer_len, err, "connect failed");
            lock(c);
        }
        fail_all(c, errno_name(err), "connection error", now_lazy(&t));
        c->dead = true;
    }
    unlock(c);
    untrack_if_dead(fd, c);
}

/*
 * The end of read() and recv() on a tracked fd (`r` from the real call, `flags` recv's): what
 * sw_conn_on_read() does, with errno kept. A server's read of request bytes goes straight to
 * server_read().
 */
static inline __attribute__((always_inline)) ssize_t read_done(int fd, void *buf, size_t n,
                                                               ssize_t r, int flags)
{
    int *ep = &errno; /* one __errno_location call */
    int e = *ep;
    uint32_t v = slot_get(fd);
    if (SW_LIKELY(r > 0 && !(flags & (MSG_PEEK | MSG_TRUNC)) && slot_is_obj(v)) &&
        pool[v - 1].role == ROLE_SERVER) {
        server_read(fd, &pool[v - 1], buf, (size_t)r);
    } else {
        struct iovec io = {buf, n};
        sw_conn_on_read(fd, &io, 1, r, e, flags);
    }
    *ep = e;
    return r;
}

SW_HOT_PATH ssize_t sw_conn_read(int fd, void *buf, size_t n)
{
    return read_done(fd, buf, n, sw_libc.read(fd, buf, n), 0);
}

SW_HOT_PATH ssize_t sw_conn_recv(int fd, void *buf, size_t n, int flags)
{
    return read_done(fd, buf, n, sw_libc.recv(fd, buf, n, flags), flags);
}

/* ---- writes -------------------------------------------------------------------------------- */

/* The application's call, unchanged. */
SW_HOT static ssize_t call_original(int fd, const struct sw_send_op *op)
{
    switch (op->kind) {
    case SW_SEND_WRITE:
        return sw_libc.write(fd, op->iov[0].iov_base, op->iov[0].iov_len);
    case SW_SEND_WRITEV:
        return sw_libc.writev(fd, op->iov, op->iovcnt);
    case SW_SEND_SEND:
        return sw_libc.send(fd, op->iov[0].iov_base, op->iov[0].iov_len, op->flags);
    case SW_SEND_SENDTO:
        return sw_libc.sendto(fd, op->iov[0].iov_base, op->iov[0].iov_len, op->flags, op->to,
                              op->tolen);
    default:
        return sw_libc.sendmsg(fd, op->msg, op->flags);
    }
}

/* A modified call: the same kind of real function, with our iovecs. */
static ssize_t call_vector(int fd, const struct sw_send_op *op, const struct iovec *v, int n,
                           bool first)
{
    if (op->kind == SW_SEND_WRITE || op->kind == SW_SEND_WRITEV)
        return sw_libc.writev(fd, v, n);
    struct msghdr m;
    memset(&m, 0, sizeof(m));
    m.msg_iov = (struct iovec *)v;
    m.msg_iovlen = (size_t)n;
    if (op->kind == SW_SEND_SENDTO) {
        m.msg_name = (void *)op->to;
        m.msg_namelen = op->tolen;
    } else if (op->kind == SW_SEND_SENDMSG) {
        m.msg_name = op->msg->msg_name;
        m.msg_namelen = op->msg->msg_namelen;
        if (first) { /* ancillary data goes with the first bytes only */
            m.msg_control = op->msg->msg_control;
            m.msg_controllen = op->msg->msg_controllen;
        }
    }
    return sw_libc.sendmsg(fd, &m, op->flags);
}

/* Peer of an exit span: Host as sent (":80" added without a port), else the connected ip. */
static size_t exit_peer(const struct sw_conn *c, char *out, size_t cap)
{
    size_t hl;
    const char *host = sw_http_req_host(&c->req, &hl);
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

/* True when our lines to insert (n bytes) contain a header line named `name`. */
static bool inj_has(const struct sw_conn *c, size_t n, const char *name, size_t nl)
{
    for (size_t i = 0; i + nl <= n; i++) {
        if ((i == 0 || c->inj[i - 1] == '\n') && memcmp(c->inj + i, name, nl) == 0)
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
    uint64_t lines[2];
    int k = 0;
    if (c->app_sw8_abs != NO_ABS && inj_has(c, n, "sw8:", 4))
        lines[k++] = c->app_sw8_abs;
    if (c->app_corr_abs != NO_ABS && inj_has(c, n, "sw8-correlation:", 16))
        lines[k++] = c->app_corr_abs;
    if (!k)
        return;
    uint64_t first = k == 2 && lines[1] < lines[0] ? lines[1] : lines[0];
    if (first < c->sent || first >= *ins)
        return;
    *ins = first;
    for (int i = 0; i < k; i++)
        c->ren[i] = lines[i] + 2;
    if (k == 2 && c->ren[1] < c->ren[0]) {
        uint64_t t = c->ren[0];
        c->ren[0] = c->ren[1];
        c->ren[1] = t;
    }
    c->n_ren = (uint8_t)k;
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
static void scan_names(struct sw_conn *c, const char *p, size_t len, uint64_t abs)
{
    /*
     * Usually the bytes hold no "sw8" at all and no name was begun in the previous call: then
     * no line of them can be an sw8 / sw8-correlation line, and only what follows their last
     * LF matters for the next call (the byte loop below takes it from there).
     */
    if (!(c->nm_alive && c->nm_len) && !has_sw8(p, len)) {
        const char *nl = memrchr(p, '\n', len);
        if (nl) {
            size_t k = (size_t)(nl - p) + 1;
            c->nm_alive = true;
            c->nm_len = 0;
            c->line_abs = abs + k;
            p += k;
            len -= k;
            abs += k;
        }
    }
    for (size_t i = 0; i < len; i++) {
        char b = p[i];
        if (b == '\n') {
            c->nm_alive = true;
            c->nm_len = 0;
            c->line_abs = abs + i + 1;
            continue;
        }
        if (!c->nm_alive)
            continue;
        if (b == ':') {
            c->nm_alive = false;
            if (c->nm_len == 3 && memcmp(c->nm, "sw8", 3) == 0 && c->app_sw8_abs == NO_ABS)
                c->app_sw8_abs = c->line_abs;
            else if (c->nm_len == 15 && memcmp(c->nm, "sw8-correlation", 15) == 0 &&
                     c->app_corr_abs == NO_ABS)
                c->app_corr_abs = c->line_abs;
            continue;
        }
        if (c->nm_len == sizeof(c->nm)) {
            c->nm_alive = false;
            continue;
        }
        c->nm[c->nm_len++] = (char)(b >= 'A' && b <= 'Z' ? b + 32 : b);
    }
}

/* A request head written by the client is complete; `ins` is where the lines go. */
static void client_head(struct sw_conn *c, enum sw_http_method m, uint64_t ins, int64_t t)
{
    struct sw_req_info ri;
    req_info(c, &ri);
    char peer[SW_HTTP_HOST_MAX + 8];
    ri.peer = peer;
    ri.peer_len = exit_peer(c, peer, sizeof(peer));
    size_t n = 0;
    bool can_insert = !c->ins_active && ins != UINT64_MAX && ins >= c->sent;
    for (int i = 0; i < n_exclude_ports; i++)
        if (exclude_ports[i] == c->rport)
            can_insert = false; /* the span is recorded, nothing is propagated */
    /* The first request belongs to the request the connection was opened for, if known; a
     * later one (a reused connection) to the thread's request now. */
    uint64_t parent = !c->head_seen ? conn_owner(c) : sw_trace_request_now();
    c->head_seen = true;
    c->parent = parent;
    uint64_t h;
    SW_GUARDED(h = sw_trace_exit_start_in(parent, &ri, c->req_start_ms ? c->req_start_ms : t,
                                          c->inj, can_insert ? sizeof(c->inj) : 0, &n));
    fifo_push(c, h);
    sw_http_push_request(&c->respp, m);
    if (can_insert && n > 0 && n <= sizeof(c->inj)) {
        c->n_ren = 0;
        forwarded_headers(c, n, &ins);
        c->ins_active = true;
        c->ins_abs = ins;
        c->inj_len = (uint16_t)n;
        c->inj_off = 0;
        sw_atomic_add_relaxed(&stats.inserted, 1);
    } else if (!can_insert) {
        sw_atomic_add_relaxed(&stats.insert_skipped, 1);
    }
}

/*
 * Feeds app bytes at absolute offset `abs` to the request parser of a client. Returns false
 * when parsing must pause here (a message ended while an insertion is still pending).
 */
SW_HOT static bool client_feed_request(struct sw_conn *c, const char *p, size_t len, uint64_t abs,
                                       int64_t t)
{
    size_t off = 0;
    while (!c->dead && !c->req_stopped) {
        if (c->limit_set)
            return false;
        bool in_body = sw_http_in_body(&c->reqp);
        if (off < len && !sw_http_head_in_progress(&c->reqp) && !in_body) {
            /* A new message begins in these bytes. */
            c->req_start_ms = t;
            c->app_sw8_abs = c->app_corr_abs = NO_ABS;
            c->nm_alive = false; /* the request line is no header */
            c->nm_len = 0;
        }
        struct sw_http_event ev;
        size_t base = off;
        size_t k = sw_http_feed(&c->reqp, p + off, len - off, 0, &ev);
        off += k;
        c->parsed = abs + off;
        if (!in_body)
            scan_names(c, p + base, k, abs + base);
        if (k >= 2) {
            c->tail[0] = p[off - 2];
            c->tail[1] = p[off - 1];
        } else if (k == 1) {
            c->tail[0] = c->tail[1];
            c->tail[1] = p[off - 1];
        }
        switch (ev.type) {
        case SW_HTTP_EV_NONE:
            return true;
        case SW_HTTP_EV_HEAD: {
            uint64_t head_end = abs + base + ev.offset;
            uint64_t ins = ev.insert_at != SW_HTTP_NO_OFFSET ? abs + base + ev.insert_at
                           : head_end >= 2                   ? head_end - 2
                                                             : UINT64_MAX;
            client_head(c, ev.method, ins, t);
            if (ev.message && c->ins_active) { /* no body: as for SW_HTTP_EV_MESSAGE below */
                c->limit = c->parsed;
                c->limit_set = true;
                return false;
            }
            break;
        }
        case SW_HTTP_EV_MESSAGE:
            if (c->ins_active) {
                c->limit = c->parsed;
                c->limit_set = true;
                return false;
            }
            break;
        case SW_HTTP_EV_UPGRADE:
            c->req_stopped = true;
            return true;
        case SW_HTTP_EV_NOT_HTTP:
            if (!c->fifo_len)
                sw_atomic_add_relaxed(&stats.not_http, 1);
            c->dead = true;
            return true;
        default:
            fail_all(c, "http", "malformed request", t);
            c->dead = true;
            return true;
        }
    }
    return true;
}

/* Parses (ahead of the kernel) the app bytes of this call that were not parsed yet. */
static void client_parse_ahead(struct sw_conn *c, const struct iovec *iov, int iovcnt, int64_t t)
{
    uint64_t pos = c->claimed;
    for (int i = 0; i < iovcnt && !c->dead && !c->req_stopped; i++) {
        size_t len = iov[i].iov_len;
        if (pos + len > c->parsed) {
            size_t skip = c->parsed > pos ? (size_t)(c->parsed - pos) : 0;
            if (!client_feed_request(c, (const char *)iov[i].iov_base + skip, len - skip,
                                     pos + skip, t))
                return;
        }
        pos += len;
    }
}

enum seg_kind { SEG_HOLD, SEG_INJ, SEG_APP };

struct out_vec {
    struct iovec v[OUT_IOV_MAX];
    uint8_t kind[OUT_IOV_MAX];
    int n;
    bool full;
};

static void out_add(struct out_vec *o, const void *p, size_t len, enum seg_kind k)
{
    if (!len)
        return;
    if (o->n == OUT_IOV_MAX) {
        o->full = true;
        return;
    }
    o->v[o->n].iov_base = (void *)p;
    o->v[o->n].iov_len = len;
    o->kind[o->n] = (uint8_t)k;
    o->n++;
}

static const char rename_byte = 'x';

/*
 * Adds app (or held) bytes at absolute offset `abs`, with the inserted lines spliced in at
 * ins_abs and the renamed bytes (ren[]) replaced by 'x' (same length, so counts are kept).
 */
SW_HOT static void out_app(struct out_vec *o, struct sw_conn *c, const char *p, size_t len,
                           uint64_t abs, enum seg_kind k, bool *inj_done)
{
    while (len) {
        uint64_t next = abs + len;
        int what = 0; /* 1 inject, 2 rename */
        if (!*inj_done && c->ins_abs >= abs && c->ins_abs < next) {
            next = c->ins_abs;
            what = 1;
        }
        for (int i = 0; i < c->n_ren && c->ins_active; i++) {
            if (c->ren[i] >= abs && c->ren[i] < next) {
                next = c->ren[i];
                what = 2;
            }
        }
        size_t pre = (size_t)(next - abs);
        out_add(o, p, pre, k);
        p += pre;
        len -= pre;
        abs += pre;
        if (what == 1) {
            out_add(o, c->inj + c->inj_off, (size_t)(c->inj_len - c->inj_off), SEG_INJ);
            *inj_done = true;
        } else if (what == 2) {
            out_add(o, &rename_byte, 1, k);
            p++;
            len--;
            abs++;
        }
    }
}

/*
 * The sending half of a client write that needs changes: held bytes, inserted lines or a
 * bound. `m` app bytes of the call are offered (the call's first m bytes). Returns the count
 * of app bytes the kernel took (> 0; with m == 0: 0 once our pending bytes are all out), or
 * -1 with errno when none could be moved.
 */
SW_HOT static ssize_t client_send_modified(int fd, struct sw_conn *c, const struct sw_send_op *op,
                                           size_t m)
{
    bool first = true;
    for (int round = 0; round < 64; round++) {
        struct out_vec o;
        o.n = 0;
        o.full = false;
        bool inj_done = !c->ins_active || c->inj_off >= c->inj_len;
        out_app(&o, c, c->hold, c->hold_len, c->sent, SEG_HOLD, &inj_done);
        uint64_t abs = c->claimed;
        size_t left = m;
        for (int i = 0; i < op->iovcnt && left; i++) {
            size_t l = op->iov[i].iov_len < left ? op->iov[i].iov_len : left;
            out_app(&o, c, op->iov[i].iov_base, l, abs, SEG_APP, &inj_done);
            abs += l;
            left -= l;
        }
        if (!inj_done && c->ins_abs == abs)
            out_add(&o, c->inj + c->inj_off, (size_t)(c->inj_len - c->inj_off), SEG_INJ);
        if (o.n == 0)
            return 0;
        ssize_t r = call_vector(fd, op, o.v, o.n, first);
        if (r < 0)
            return -1;
        if (r == 0) {
            errno = EAGAIN;
            return -1;
        }
        first = false;
        size_t took = (size_t)r, app = 0;
        lock(c);
        for (int i = 0; i < o.n && took; i++) {
            size_t l = o.v[i].iov_len < took ? o.v[i].iov_len : took;
            took -= l;
            if (o.kind[i] == SEG_HOLD) {
                memmove(c->hold, c->hold + l, c->hold_len - l);
                c->hold_len = (uint8_t)(c->hold_len - l);
                c->sent += l;
            } else if (o.kind[i] == SEG_INJ) {
                c->inj_off = (uint16_t)(c->inj_off + l);
            } else {
                app += l;
                c->sent += l;
            }
        }
        if (c->ins_active && c->inj_off >= c->inj_len && c->sent >= c->ins_abs &&
            (!c->n_ren || c->sent > c->ren[c->n_ren - 1])) {
            c->ins_active = false;
            c->limit_set = false;
            c->n_ren = 0;
        }
        bool flushed =
            !c->hold_len && !(c->ins_active && c->inj_off < c->inj_len && c->ins_abs <= c->sent);
        unlock(c);
        if (app > 0 || (m == 0 && flushed))
            return (ssize_t)app;
    }
    errno = EAGAIN;
    return -1;
}

static ssize_t client_send(int fd, struct sw_conn *c, const struct sw_send_op *op)
{
    size_t n = 0;
    for (int i = 0; i < op->iovcnt; i++) {
        if (op->iov[i].iov_len > SSIZE_MAX - n)
            return call_original(fd, op); /* the kernel answers EINVAL */
        n += op->iov[i].iov_len;
    }
    if (n == 0)
        return call_original(fd, op);
    int64_t t = sw_trace_now_ms();
    lock(c);
    if (!c->dead && !c->req_stopped)
        client_parse_ahead(c, op->iov, op->iovcnt, t);
    /* A trailing "\r" at a line start inside a head may begin the blank line: hold it. */
    bool want_hold = !c->dead && !c->req_stopped && sw_http_head_in_progress(&c->reqp) &&
                     c->parsed == c->claimed + n && c->tail[1] == '\r' && c->tail[0] == '\n';
    size_t m = n - (want_hold ? 1 : 0);
    if (c->limit_set && c->limit - c->claimed < m)
        m = (size_t)(c->limit - c->claimed);
    bool modify =
        want_hold || c->hold_len || m < n || (c->ins_active && c->ins_abs <= c->claimed + m);
    unlock(c);
    ssize_t r;
    int e;
    if (!modify) {
        r = call_original(fd, op);
        e = errno;
        if (r > 0) {
            lock(c);
            c->claimed += (uint64_t)r;
            c->sent += (uint64_t)r;
            unlock(c);
        }
    } else {
        r = client_send_modified(fd, c, op, m);
        e = errno;
        lock(c);
        if (r >= 0) {
            if (want_hold && m == n - 1 && (size_t)r == m && c->sent == c->claimed + m) {
                c->hold[c->hold_len++] = '\r';
                r++;
            }
            c->claimed += (uint64_t)r;
        }
        unlock(c);
    }
    if (r < 0 && is_conn_error(e)) {
        lock(c);
        if (!c->fifo_len && !c->claimed && e != EPIPE) {
            unlock(c);
            connect_failed(conn_owner(c), c->peer, c->peer_len, e, "connect failed");
            lock(c);
        }
        fail_all(c, errno_name(e), "connection error", t);
        c->dead = true;
        unlock(c);
    }
    untrack_if_dead(fd, c);
    errno = e;
    return r;
}

/*
 * A server wrote `r` > 0 bytes of `iov`: the response parser follows them (under the lock).
 * Inlined into sw_conn_writev (nginx writes its response heads with writev) and sw_conn_send.
 */
static inline __attribute__((always_inline)) void
server_written(struct sw_conn *c, const struct iovec *iov, int iovcnt, ssize_t r, int64_t t)
{
    lock(c);
#define FEED_RESP_W(p, l) feed_response_in(c, p, l, &t, ROLE_SERVER)
    if (SW_LIKELY(c->rs == RS_PARSE) || (!c->dead && rs_feeds(c, iov, iovcnt, (size_t)r, &t)))
        FOR_BYTES(iov, iovcnt, r, FEED_RESP_W);
    if (c->fifo_len && fifo_front(c))
        sw_trace_touch(fifo_front(c)); /* the lock holds the guard */
    unlock(c);
}

/*
 * A server wrote `r` > 0 bytes from one buffer `p`: server_written() without the iovec loop.
 * Inlined into sw_conn_write and sw_conn_writev (nginx's heads fit in its first iovec).
 */
static inline __attribute__((always_inline)) void server_wrote(struct sw_conn *c, const char *p,
                                                               size_t r, int64_t t)
{
    lock(c);
    /* Not dead and every response followed (dead and rs in one load), or the status line that
     * RS_RESYNC waited for ("Untraced responses"). */
    if (SW_LIKELY(flags2(&c->dead) == 0) ||
        (!c->dead && rs_feeds(c, &(struct iovec){(void *)p, r}, 1, r, &t)))
        feed_response_on(c, p, r, &t, ROLE_SERVER, true);
    if (c->fifo_len && fifo_front(c))
        sw_trace_touch(fifo_front(c)); /* the lock holds the guard */
    unlock(c);
}

/* A server's write that moved no byte, or on a dead connection (`e`: the call's errno). */
static SW_NOINLINE void server_not_written(int fd, struct sw_conn *c, ssize_t r, int e)
{
    if (!c->dead && r < 0 && is_conn_error(e)) {
        lock(c);
        fail_all(c, errno_name(e), "connection error", sw_trace_now_ms());
        c->dead = true;
        unlock(c);
    }
    untrack_if_dead(fd, c);
}

SW_HOT ssize_t sw_conn_send(int fd, const struct sw_send_op *op)
{
    uint32_t v = slot_get(fd);
    if (v == SW_CONN_CAND)
        slot_set(fd, 0);
    struct sw_conn *c = conn_at(v); /* NULL for SW_CONN_CAND */
    if (!c)
        return call_original(fd, op);
    if (c->role == ROLE_CLIENT)
        return client_send(fd, c, op);
    /*
     * The clock is read BEFORE the write: an entry span ends when its last bytes are handed to
     * the kernel, so it can never end after the caller's exit span (which ends when it has
     * read them), even if this thread is preempted right after the write. Not when no span
     * can end on it (rs_clock).
     */
    int64_t t = rs_clock(c);
    ssize_t r = call_original(fd, op);
    int e = errno;
    if (r > 0 && !c->dead) {
        server_written(c, op->kind == SW_SEND_SENDMSG ? op->msg->msg_iov : op->iov,
                       op->kind == SW_SEND_SENDMSG ? (int)op->msg->msg_iovlen : op->iovcnt, r, t);
        untrack_if_dead(fd, c);
    } else {
        server_not_written(fd, c, r, e);
    }
    errno = e;
    return r;
}

/*
 * write() on a tracked fd: sw_conn_send() for SW_SEND_WRITE, without the sw_send_op and its
 * dispatch for a server (the usual write of a response).
 */
SW_HOT_PATH ssize_t sw_conn_write(int fd, const void *buf, size_t n)
{
    uint32_t v = slot_get(fd);
    if (SW_UNLIKELY(!slot_is_obj(v) || pool[v - 1].role != ROLE_SERVER)) {
        struct iovec io = {(void *)buf, n};
        struct sw_send_op op = {.kind = SW_SEND_WRITE, .iov = &io, .iovcnt = 1};
        return sw_conn_send(fd, &op);
    }
    struct sw_conn *c = &pool[v - 1];
    int64_t t = rs_clock(c); /* before the call: see sw_conn_send */
    ssize_t r = sw_libc.write(fd, buf, n);
    int *ep = &errno; /* one __errno_location call */
    int e = *ep;
    if (SW_LIKELY(r > 0 && !c->dead)) {
        server_wrote(c, buf, (size_t)r, t);
        untrack_if_dead(fd, c);
    } else {
        server_not_written(fd, c, r, e);
    }
    *ep = e;
    return r;
}

/* writev() on a tracked fd: sw_conn_send() for SW_SEND_WRITEV, shorter for a server. */
SW_HOT_PATH ssize_t sw_conn_writev(int fd, const struct iovec *iov, int cnt)
{
    uint32_t v = slot_get(fd);
    if (SW_UNLIKELY(!slot_is_obj(v) || pool[v - 1].role != ROLE_SERVER)) {
        struct sw_send_op op = {.kind = SW_SEND_WRITEV, .iov = iov, .iovcnt = cnt};
        return sw_conn_send(fd, &op);
    }
    struct sw_conn *c = &pool[v - 1];
    int64_t t = rs_clock(c); /* before the call: see sw_conn_send */
    ssize_t r = sw_libc.writev(fd, iov, cnt);
    int *ep = &errno; /* one __errno_location call */
    int e = *ep;
    if (SW_LIKELY(r > 0 && !c->dead)) {
        /* r > 0: iov[0] exists. Usually every byte written is in it (a head, or all). */
        if (SW_LIKELY((size_t)r <= iov[0].iov_len))
            server_wrote(c, iov[0].iov_base, (size_t)r, t);
        else
            server_written(c, iov, cnt, r, t);
        untrack_if_dead(fd, c);
    } else {
        server_not_written(fd, c, r, e);
    }
    *ep = e;
    return r;
}

/*
 * Feeds `n` body bytes we cannot see (sendfile) as zeros: framing only needs the count.
 * Inlined: a server's sendfile of a response body (nginx) runs one frame.
 */
static inline __attribute__((always_inline)) void feed_zeros(struct sw_conn *c, struct sw_http *h,
                                                             size_t n, int64_t t)
{
    if (!sw_http_in_body(h)) {
        c->dead = true; /* a head from a file: we cannot follow */
        return;
    }
    while (n && !c->dead) {
        size_t k = n < sizeof(zeros) ? n : sizeof(zeros);
        if (h == &c->respp)
            feed_response_in(c, zeros, k, &t, c->role);
        else
            client_feed_request(c, zeros, k, c->parsed, t);
        n -= k;
    }
}

SW_HOT_PATH ssize_t sw_conn_sendfile(int out_fd, int in_fd, off64_t *off, size_t n, bool is64)
{
#define REAL_SENDFILE()                                                                            \
    (is64 ? sw_libc.sendfile64(out_fd, in_fd, off, n)                                              \
          : sw_libc.sendfile(out_fd, in_fd, (off_t *)off, n))
    uint32_t v = slot_get(out_fd);
    if (v == SW_CONN_CAND)
        slot_set(out_fd, 0);
    struct sw_conn *c = conn_at(v); /* NULL for SW_CONN_CAND */
    if (!c)
        return REAL_SENDFILE();
    if (c->role == ROLE_CLIENT) {
        /* Our pending bytes (held byte, inserted lines) must precede the file's. */
        if (c->ins_active && c->ins_abs > c->sent) {
            /* The app sends a file where we expected the rest of its head: give up. */
            c->ins_active = c->limit_set = false;
            c->n_ren = 0;
            c->dead = true;
        }
        if (c->hold_len || (c->ins_active && c->inj_off < c->inj_len)) {
            struct sw_send_op op = {.kind = SW_SEND_WRITEV, .iov = NULL, .iovcnt = 0};
            if (client_send_modified(out_fd, c, &op, 0) < 0)
                return -1; /* errno of the real call (EAGAIN: the app retries) */
        }
        if (c->ins_active) { /* renamed bytes not sent yet: the stream is not what we parsed */
            c->ins_active = c->limit_set = false;
            c->n_ren = 0;
            c->dead = true;
        }
        if (c->parsed != c->claimed)
            c->dead = true; /* the app did not re-send what we parsed ahead */
    }
    int64_t t = rs_clock(c); /* before the call, as for writes (see sw_conn_send) */
    ssize_t r = REAL_SENDFILE();
    int *ep = &errno; /* one __errno_location call */
    int e = *ep;
    if (r > 0) {
        lock(c);
        if (!c->dead) {
            if (SW_UNLIKELY(c->role == ROLE_SERVER && c->rs != RS_PARSE)) {
                /* Not followed; a status line waited for may be in the file: give up. */
                c->rs_wrote = true;
                if (c->rs == RS_RESYNC)
                    rs_give_up(c, &t);
            } else if (c->role == ROLE_SERVER) {
                /* The usual one: (the rest of) a Content-Length body, counted without zeros. */
                int st, k = sw_http_body_unseen(&c->respp, (uint64_t)r, &st);
                if (SW_LIKELY(k > 0))
                    response_done_as(c, st ? st : c->resp_status, now_lazy(&t), ROLE_SERVER);
                else if (k < 0)
                    feed_zeros(c, &c->respp, (size_t)r, t);
            } else {
                feed_zeros(c, &c->reqp, (size_t)r, t);
                c->claimed += (uint64_t)r;
                c->sent += (uint64_t)r;
            }
        } else if (c->role == ROLE_CLIENT) {
            c->claimed += (uint64_t)r;
            c->sent += (uint64_t)r;
        }
        unlock(c);
    }
    untrack_if_dead(out_fd, c);
    *ep = e;
    return r;
#undef REAL_SENDFILE
}
