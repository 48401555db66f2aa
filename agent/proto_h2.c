/*
 * proto_h2.c - the HTTP/2 protocol module (and gRPC over it): an entry span per stream served,
 * an exit span per stream opened, sw8 appended to the request's header block, on top of the
 * connection layer (conn.c, proto.h). Design and limits: docs/http2.md.
 *
 * Runs on application threads under the connection's lock (proto.h): no malloc, no stdio, no
 * syscall; fixed memory (struct h2_conn in c->state).
 *
 * Detection: cleartext prior knowledge by the client preface (sniff, either direction; the side
 * that reads it is the server; a server's own SETTINGS written first keep the choice open), TLS
 * ALPN and h2c by sw_h2_adopt / sw_h2_adopt_h2c (proto_h2.h).
 *
 * Each direction has a frame parser (frames split anywhere across calls and iovecs) and a
 * streaming HPACK decoder (hpack.c) that every header block goes through in order, so the
 * dynamic table stays in step with the peer's. DATA and other frames are skipped by count;
 * PADDED and PRIORITY parts stripped before HPACK; unknown frame types ignored (counted).
 *
 * sw8 out (client): the header block of a new stream's request gets sw8 (and sw8-correlation,
 * sw8-x) as literal fields never indexed (RFC 7541 6.2.3: no table changes on either side),
 * inserted at the end of the block in its END_HEADERS frame (before any padding), whose 24-bit
 * length is replaced (sw_conn_out_replace). Only when that frame's header has not gone out yet
 * (it usually travels in the same write as the block's end; otherwise: no sw8, counted), the
 * new length is within the peer's SETTINGS_MAX_FRAME_SIZE and the list within its
 * SETTINGS_MAX_HEADER_LIST_SIZE. A write carrying another request HEADERS after the planned
 * edit is cut before it (sw_conn_out_pause: a short write the application completes).
 *
 * Bad input (broken preface, HPACK failure, CONTINUATION flood, oversized list, a frame inside a
 * header block): the connection is no longer followed, its open streams end as errors, counted.
 */
#include "common.h"

#include "hpack.h"
#include "log.h"
#include "proto.h"
#include "proto_h2.h"
#include "ring.h"
#include "trace.h"

#include <string.h>

#define H2_STREAMS 128     /* streams traced at once per connection */
#define H2_CONT_MAX 64     /* CONTINUATION frames of one header block */
#define H2_BLOCK_MAX 65536 /* bytes of one header block (all its frames) */

static const char preface[24] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

enum {
    F_DATA = 0,
    F_HEADERS = 1,
    F_PRIORITY = 2,
    F_RST = 3,
    F_SETTINGS = 4,
    F_PUSH = 5,
    F_PING = 6,
    F_GOAWAY = 7,
    F_WINDOW = 8,
    F_CONT = 9
};
enum {
    FL_END_STREAM = 0x1,
    FL_ACK = 0x1,
    FL_END_HEADERS = 0x4,
    FL_PADDED = 0x8,
    FL_PRIORITY = 0x20
};
/* payload states */
enum { PS_HDR, PS_SKIP, PS_PADLEN, PS_PRIO, PS_BLOCK, PS_PAD, PS_SMALL };
/* stream flags */
enum { S_LOCAL_END = 1, S_REMOTE_END = 2, S_GRPC = 4, S_ENTRY = 8, S_RESP = 16 };

struct h2_stream {
    uint64_t span;
    uint32_t sid;
    uint16_t hstatus; /* :status of the response */
    uint8_t gstatus;  /* grpc-status, 0xff none */
    uint8_t fl;
};

struct h2_dir {
    struct sw_hpack hp;
    uint64_t frame_abs; /* OUT: stream offset of the current frame's first byte */
    uint32_t flen;      /* the current frame's length */
    uint32_t left;      /* its payload bytes not parsed yet */
    uint32_t pad;       /* of them, padding at its end */
    uint32_t sid;       /* its stream */
    uint32_t block_sid; /* the header block in progress (block) */
    uint32_t block_bytes;
    uint16_t nframes;
    uint8_t hdr[9], hn; /* the frame header being gathered */
    uint8_t type, flags, ps, prio_left, small_n, pre_n;
    uint8_t small[8];
    bool pre;           /* the client preface comes first in this direction */
    bool block;         /* a header block is open (CONTINUATION expected) */
    bool block_es;      /* its HEADERS carried END_STREAM */
    uint8_t block_type; /* F_HEADERS or F_PUSH */
};

struct h2_conn {
    struct h2_dir d[2];      /* [SW_DIR_IN], [SW_DIR_OUT] */
    uint32_t peer_max_frame; /* the peer's SETTINGS_MAX_FRAME_SIZE (our frames' limit) */
    uint32_t peer_max_list;  /* the peer's SETTINGS_MAX_HEADER_LIST_SIZE, 0: none */
    bool srv;                /* this side serves (it reads the preface) */
    uint8_t n;               /* streams in s[] */
    struct h2_stream s[H2_STREAMS];
};
SW_PROTO_STATE_CHECK(struct h2_conn);

static inline struct h2_conn *H(struct sw_conn *c)
{
    return (struct h2_conn *)(void *)c->state;
}

static struct {
    _Atomic uint64_t conns, streams, sw8_inserted, sw8_skipped, streams_full, bad_preface,
        hpack_errors, table_too_big, list_too_big, proto_errors, unknown_frames;
} st;

void sw_h2_get_stats(struct sw_h2_stats *o)
{
    o->conns = atomic_load_explicit(&st.conns, memory_order_relaxed);
    o->streams = atomic_load_explicit(&st.streams, memory_order_relaxed);
    o->sw8_inserted = atomic_load_explicit(&st.sw8_inserted, memory_order_relaxed);
    o->sw8_skipped = atomic_load_explicit(&st.sw8_skipped, memory_order_relaxed);
    o->streams_full = atomic_load_explicit(&st.streams_full, memory_order_relaxed);
    o->bad_preface = atomic_load_explicit(&st.bad_preface, memory_order_relaxed);
    o->hpack_errors = atomic_load_explicit(&st.hpack_errors, memory_order_relaxed);
    o->table_too_big = atomic_load_explicit(&st.table_too_big, memory_order_relaxed);
    o->list_too_big = atomic_load_explicit(&st.list_too_big, memory_order_relaxed);
    o->proto_errors = atomic_load_explicit(&st.proto_errors, memory_order_relaxed);
    o->unknown_frames = atomic_load_explicit(&st.unknown_frames, memory_order_relaxed);
}

#define COUNT(f) sw_atomic_add_relaxed(&st.f, 1)
/* A counter that `swagent status` shows too (the process's ring, enum sw_ring_h2). */
#define COUNT_R(f, k) (COUNT(f), sw_trace_count_h2(k))

/* ---- streams ------------------------------------------------------------------------------ */

static struct h2_stream *stream_find(struct h2_conn *s, uint32_t sid)
{
    for (unsigned i = 0; i < s->n; i++)
        if (s->s[i].sid == sid)
            return &s->s[i];
    return NULL;
}

static struct h2_stream *stream_new(struct h2_conn *s, uint32_t sid)
{
    if (s->n == H2_STREAMS) {
        COUNT_R(streams_full, SW_RING_H2_STREAMS_FULL);
        return NULL;
    }
    struct h2_stream *x = &s->s[s->n++];
    x->sid = sid;
    x->span = 0;
    x->hstatus = 0;
    x->gstatus = 0xff;
    x->fl = 0;
    return x;
}

static void stream_drop(struct h2_conn *s, struct h2_stream *x)
{
    *x = s->s[--s->n];
}

/* Ends a stream's span: its response status; gRPC's status (non-zero: an error; none: 2,
 * UNKNOWN, as a gRPC client takes a response without one). */
static void stream_finish(struct sw_conn *c, struct h2_stream *x, int64_t *t)
{
    uint64_t h = x->span;
    if (h && (x->fl & S_GRPC)) {
        int gs = x->gstatus != 0xff ? x->gstatus : 2;
        char msg[32] = "grpc-status ";
        size_t k = 12;
        char dg[4];
        size_t nd = 0;
        int v = gs;
        do {
            dg[nd++] = (char)('0' + v % 10);
            v /= 10;
        } while (v && nd < sizeof(dg));
        while (nd)
            msg[k++] = dg[--nd];
        msg[k] = '\0';
        sw_trace_rpc_finish(h, gs, msg, sw_conn_now(t));
    } else if (h && (x->fl & S_ENTRY)) {
        sw_trace_entry_finish(h, x->hstatus, sw_conn_now(t));
    } else if (h) {
        sw_trace_exit_finish(h, x->hstatus, sw_conn_now(t));
    }
    stream_drop(H(c), x);
}

/*
 * SkyWalking's gRPC name of a stream (as its Java agent names it): the path
 * "/package.Service/Method" as "package.Service.method" (the last '/' a '.', the method's first
 * letter in lower case), written to op[256]; 0: a path of another shape (the HTTP/2 name stays).
 */
static size_t grpc_op(const struct sw_hpack *hp, char *op)
{
    size_t l;
    const char *p = sw_hpack_get(hp, SW_HK_PATH, &l);
    if (!p || l < 4 || l > 256 || p[0] != '/')
        return 0;
    const char *sl = memrchr(p, '/', l);
    size_t svc = (size_t)(sl - p) - 1, m = l - (size_t)(sl - p) - 1;
    if (sl == p || !m || memchr(p + 1, '/', svc))
        return 0;
    memcpy(op, p + 1, svc);
    op[svc] = '.';
    memcpy(op + svc + 1, sl + 1, m);
    char *f = op + svc + 1;
    if (*f >= 'A' && *f <= 'Z')
        *f = (char)(*f + 32);
    return svc + 1 + m;
}

/* Ends a stream's span as failed (reset, refused, closed). */
static void stream_fail(struct sw_conn *c, struct h2_stream *x, const char *msg, int64_t *t)
{
    if (x->span) {
        if (x->fl & S_ENTRY)
            sw_trace_entry_abort(x->span, "h2", msg, sw_conn_now(t));
        else
            sw_trace_exit_error(x->span, "h2", msg, sw_conn_now(t));
    }
    stream_drop(H(c), x);
}

static void streams_fail_all(struct sw_conn *c, const char *msg, int64_t *t)
{
    struct h2_conn *s = H(c);
    while (s->n)
        stream_fail(c, &s->s[s->n - 1], msg, t);
}

/* One side of a stream ended (END_STREAM): both ended, the span ends. */
static void stream_end(struct sw_conn *c, uint32_t sid, uint8_t side, int64_t *t)
{
    struct h2_stream *x = stream_find(H(c), sid);
    if (!x)
        return;
    x->fl |= side;
    if ((x->fl & (S_LOCAL_END | S_REMOTE_END)) == (S_LOCAL_END | S_REMOTE_END))
        stream_finish(c, x, t);
}

/* The connection is no longer followed: bad input, counted by the caller. */
static void give_up(struct sw_conn *c, const char *msg, int64_t *t)
{
    streams_fail_all(c, msg, t);
    sw_conn_stop(c);
}

/*
 * Bad input: the connection is no longer followed (its open streams end as errors), counted
 * (`cnt`, and the ring's `ring_k`: `swagent status`), and the first of each reason in the
 * process gets a log line (a write under the connection's lock, once per reason and process).
 */
static SW_NOINLINE void bad_input(struct sw_conn *c, _Atomic uint64_t *cnt, int ring_k,
                                  const char *what, _Atomic bool *logged, int64_t *t)
{
    atomic_fetch_add_explicit(cnt, 1, memory_order_relaxed);
    if (!atomic_exchange_explicit(logged, true, memory_order_relaxed))
        SW_LOGW("h2: %s on the connection %s %.*s: it is no longer followed, its bytes pass "
                "unchanged (counted: swagent status, h2:)",
                what, c->role == SW_ROLE_SERVER ? "from" : "to", (int)c->peer_len, c->peer);
    sw_trace_count_h2(ring_k);
    give_up(c, what, t);
}
#define BAD(c, f, k, what, t)                                                                      \
    do {                                                                                           \
        static _Atomic bool logged_; /* this reason was logged in this process */                  \
        bad_input((c), &st.f, (k), (what), &logged_, (t));                                         \
    } while (0)

static void hpack_fail(struct sw_conn *c, int e, int64_t *t)
{
    if (e == SW_HPACK_E_TABLE)
        BAD(c, table_too_big, SW_RING_H2_TABLE, "HPACK dynamic table above 4096 bytes", t);
    else if (e == SW_HPACK_E_LIST)
        BAD(c, list_too_big, SW_RING_H2_LIST, "header list too large (HPACK)", t);
    else
        BAD(c, hpack_errors, SW_RING_H2_HPACK, "HPACK header block failed to decode", t);
}

/* ---- header blocks -------------------------------------------------------------------------- */

/* "application/grpc" begins the content-type. */
static bool is_grpc(const struct sw_hpack *hp)
{
    size_t l;
    const char *v = sw_hpack_get(hp, SW_HK_CTYPE, &l);
    return v && l >= 16 && memcmp(v, "application/grpc", 16) == 0;
}

static int small_int(const char *v, size_t l)
{
    int r = 0;
    if (!v || !l || l > 4)
        return -1;
    for (size_t i = 0; i < l; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        r = r * 10 + (v[i] - '0');
    }
    return r;
}

/* Fills the request info of a stream from a decoded request block. */
static void req_info(struct sw_conn *c, const struct sw_hpack *hp, struct sw_req_info *ri)
{
    memset(ri, 0, sizeof(*ri));
    ri->method = sw_hpack_get(hp, SW_HK_METHOD, &ri->method_len);
    ri->target = sw_hpack_get(hp, SW_HK_PATH, &ri->target_len);
    ri->host = sw_hpack_get(hp, SW_HK_AUTHORITY, &ri->host_len);
    if (!ri->host)
        ri->host = sw_hpack_get(hp, SW_HK_HOST, &ri->host_len);
    ri->tls = c->tls;
}

/*
 * Converts the propagation lines trace.c wrote ("name: value\r\n"...) at `in` (n bytes) into
 * HPACK literal fields never indexed, raw strings, at `out` (cap bytes). Returns the bytes
 * written (0: none fit) and adds their header list size to *list.
 */
static size_t to_hpack(const char *in, size_t n, char *out, size_t cap, uint32_t *list)
{
    size_t o = 0, i = 0;
    while (i < n) {
        const char *eol = memchr(in + i, '\n', n - i);
        const char *colon = memchr(in + i, ':', n - i);
        if (!eol || !colon || colon > eol)
            break;
        size_t nl = (size_t)(colon - (in + i));
        const char *v = colon + 1;
        while (v < eol && *v == ' ')
            v++;
        size_t vl = (size_t)(eol - v);
        if (vl && v[vl - 1] == '\r')
            vl--;
        if (nl >= 127 || o + 2 + nl + 4 + vl > cap)
            return 0;
        out[o++] = 0x10;
        out[o++] = (char)nl;
        memcpy(out + o, in + i, nl);
        o += nl;
        if (vl < 127) {
            out[o++] = (char)vl;
        } else {
            size_t r = vl - 127;
            out[o++] = 0x7f;
            while (r >= 128) {
                out[o++] = (char)(0x80 | (r & 0x7f));
                r >>= 7;
            }
            out[o++] = (char)r;
        }
        memcpy(out + o, v, vl);
        o += vl;
        *list += (uint32_t)(nl + vl + 32);
        i = (size_t)(eol - in) + 1;
    }
    return o;
}

/* Client: a request block written on a new stream: the exit starts, sw8 goes in. `ins` is the
 * stream offset of the block's end (before padding) in its END_HEADERS frame. */
/*
 * The served HTTP/2 stream this thread last made its current request (its HEADERS read or
 * written). A thread that reads a multiplexed server connection is often not the one that runs
 * the request's handler: grpc core's poller thread reads the requests of every connection and
 * writes the frames of calls that handler threads make, so the thread's current request is not
 * the caller of a stream it opens on a connection already in use. Such a stream's exit is then a
 * root of its own tagged swagent.parent=unknown, never the child of that request (h2_attrib:
 * under ASan two handlers' calls were written by one poller thread and both joined the request
 * it had just read). A connection's first stream keeps the layer's rule (the request current at
 * connect(): nginx's grpc_pass opens an upstream connection per request).
 */
static __thread __attribute__((tls_model("initial-exec"))) uint64_t h2_current;

static inline bool same_request(uint64_t a, uint64_t b)
{
    uint64_t m = ~(uint64_t)SW_TRACE_KEEP_BIT;
    return a && a != SW_TRACE_UNKNOWN && (a & m) == (b & m);
}

static void client_request(struct sw_conn *c, struct h2_dir *d, struct h2_stream *x, uint64_t ins,
                           int64_t *t)
{
    struct h2_conn *s = H(c);
    struct sw_req_info ri;
    req_info(c, &d->hp, &ri);
    char peer[SW_CONN_PEER_MAX + 8];
    if (ri.host && ri.host_len && ri.host_len < SW_CONN_PEER_MAX) {
        memcpy(peer, ri.host, ri.host_len);
        ri.peer_len = ri.host_len;
        if (!memchr(ri.host, ':', ri.host_len)) { /* as HTTP/1.x: the default port added */
            memcpy(peer + ri.peer_len, c->tls ? ":443" : ":80", c->tls ? 4 : 3);
            ri.peer_len += c->tls ? 4 : 3;
        }
        ri.peer = peer;
    } else {
        ri.peer = c->peer;
        ri.peer_len = c->peer_len;
    }
    /* A proxy's forwarded sw8 (nginx grpc_pass) stays; ours goes after it, and receivers that
     * take the last value (gRPC's Metadata.get, this module's decoder) take ours. */
    bool can = !sw_conn_out_pending(c) && d->frame_abs >= sw_conn_out_sent(c);
    char op[256];
    ri.rpc_op_len = (x->fl & S_GRPC) ? grpc_op(&d->hp, op) : 0;
    ri.rpc_op = ri.rpc_op_len ? op : NULL;
    char lines[SW_CONN_INSERT_MAX];
    size_t n = 0;
    bool first = !c->head_seen;
    uint64_t parent = sw_conn_exit_parent(c);
    if (!first && same_request(parent, h2_current)) {
        parent = SW_TRACE_UNKNOWN; /* see h2_current */
        c->parent = parent;
    }
    x->span = sw_trace_exit_start_in(parent, &ri, sw_conn_now(t), lines, sizeof(lines), &n);
    COUNT(streams);
    if (!n)
        return;
    uint32_t list = sw_hpack_list(&d->hp);
    size_t k = can ? to_hpack(lines, n, sw_conn_out_buf(c), SW_CONN_INSERT_MAX, &list) : 0;
    uint32_t newlen = d->flen + (uint32_t)k;
    if (!k || newlen > s->peer_max_frame || (s->peer_max_list && list > s->peer_max_list)) {
        COUNT_R(sw8_skipped, SW_RING_H2_SW8_SKIPPED);
        sw_conn_count(SW_CNT_INSERT_SKIPPED);
        return;
    }
    unsigned char lb[3] = {(unsigned char)(newlen >> 16), (unsigned char)(newlen >> 8),
                           (unsigned char)newlen};
    if (!sw_conn_out_replace(c, d->frame_abs, lb, 3) || !sw_conn_out_insert(c, ins, k)) {
        COUNT_R(sw8_skipped, SW_RING_H2_SW8_SKIPPED);
        sw_conn_count(SW_CNT_INSERT_SKIPPED);
        return;
    }
    COUNT(sw8_inserted);
    sw_conn_count(SW_CNT_INSERTED);
}

/* Server: a request block read on a new stream: the entry starts. */
static void server_request(struct sw_conn *c, struct h2_dir *d, struct h2_stream *x, int64_t *t)
{
    struct sw_req_info ri;
    req_info(c, &d->hp, &ri);
    ri.sw8 = sw_hpack_get(&d->hp, SW_HK_SW8, &ri.sw8_len);
    ri.correlation = sw_hpack_get(&d->hp, SW_HK_CORR, &ri.correlation_len);
    ri.sw8x = sw_hpack_get(&d->hp, SW_HK_SW8X, &ri.sw8x_len);
    ri.peer = c->peer;
    ri.peer_len = c->peer_len;
    x->span = sw_trace_entry_start(&ri, sw_conn_now(t));
    h2_current = x->span;
    x->fl |= S_ENTRY;
    char op[256];
    size_t opl = (x->fl & S_GRPC) ? grpc_op(&d->hp, op) : 0;
    if (opl)
        sw_trace_span_rpc(x->span, op, opl);
    COUNT(streams);
}

/* A header block is complete (END_HEADERS seen and decoded). `ins`: OUT, the offset of its end. */
static void block_done(struct sw_conn *c, int dir, uint64_t ins, int64_t *t)
{
    struct h2_conn *s = H(c);
    struct h2_dir *d = &s->d[dir];
    int e = sw_hpack_end(&d->hp);
    d->block = false;
    if (e) {
        hpack_fail(c, e, t);
        return;
    }
    if (d->block_type != F_HEADERS)
        return; /* PUSH_PROMISE: decoded for the table only */
    uint32_t sid = d->block_sid;
    struct h2_stream *x = stream_find(s, sid);
    bool request_side = (dir == SW_DIR_IN) == s->srv; /* the client's blocks */
    if (!x && request_side) {
        size_t pl;
        const char *path = sw_hpack_get(&d->hp, SW_HK_PATH, &pl);
        if (pl >= 12 && memcmp(path, "/skywalking.", 12) == 0)
            return; /* another SkyWalking agent's reports to its collector: not traced */
        x = stream_new(s, sid);
        if (!x)
            return;
        if (is_grpc(&d->hp))
            x->fl |= S_GRPC;
        if (s->srv)
            server_request(c, d, x, t);
        else
            client_request(c, d, x, ins, t);

    } else if (x && !request_side) {
        /* a response's headers or trailers (or Trailers-Only) */
        size_t l;
        const char *v = sw_hpack_get(&d->hp, SW_HK_STATUS, &l);
        int hs = small_int(v, l);
        if (hs >= 100 && hs < 200 && !(x->fl & S_RESP))
            hs = -1; /* an interim response: the final one comes later */
        if (hs > 0 && !(x->fl & S_RESP)) {
            x->hstatus = (uint16_t)hs;
            x->fl |= S_RESP;
        }
        if (is_grpc(&d->hp))
            x->fl |= S_GRPC;
        v = sw_hpack_get(&d->hp, SW_HK_GRPC_STATUS, &l);
        int gs = small_int(v, l);
        if (gs >= 0)
            x->gstatus = (uint8_t)(gs < 0xff ? gs : 0xfe);
    }
    if (x && x->span && (x->fl & S_ENTRY)) {
        sw_trace_touch(x->span); /* the lock holds the guard */
        h2_current = x->span;
    }
    if (d->block_es)
        stream_end(c, sid, dir == SW_DIR_OUT ? S_LOCAL_END : S_REMOTE_END, t);
}

/* ---- frames --------------------------------------------------------------------------------- */

static void settings_entry(struct sw_conn *c, int dir, const uint8_t *e)
{
    struct h2_conn *s = H(c);
    uint16_t id = (uint16_t)(e[0] << 8 | e[1]);
    uint32_t v = (uint32_t)e[2] << 24 | (uint32_t)e[3] << 16 | (uint32_t)e[4] << 8 | e[5];
    if (id == 1) {
        /* the sender's decoder table: bounds the size updates of the other direction */
        sw_hpack_set_limit(&s->d[dir == SW_DIR_IN ? SW_DIR_OUT : SW_DIR_IN].hp, v);
    } else if (dir == SW_DIR_IN && id == 5 && v >= 16384 && v <= 0xffffff) {
        s->peer_max_frame = v;
    } else if (dir == SW_DIR_IN && id == 6) {
        s->peer_max_list = v;
    }
}

/* A small frame's payload is complete (PS_SMALL: up to 8 bytes kept). */
static void small_done(struct sw_conn *c, int dir, struct h2_dir *d, int64_t *t)
{
    struct h2_conn *s = H(c);
    if (d->type == F_RST && d->small_n >= 4) {
        struct h2_stream *x = stream_find(s, d->sid);
        if (x)
            stream_fail(c, x, "stream reset (RST_STREAM)", t);
    } else if (d->type == F_GOAWAY && d->small_n >= 4) {
        uint32_t last = ((uint32_t)d->small[0] << 24 | (uint32_t)d->small[1] << 16 |
                         (uint32_t)d->small[2] << 8 | d->small[3]) &
                        0x7fffffffu;
        for (unsigned i = s->n; i-- > 0;)
            if (s->s[i].sid > last && ((s->s[i].sid & 1) == (dir == SW_DIR_IN ? !s->srv : s->srv)))
                stream_fail(c, &s->s[i], "refused (GOAWAY)", t);
    }
}

/* The 9-byte frame header is complete: the frame's payload state. */
static void frame_begin(struct sw_conn *c, int dir, struct h2_dir *d, const uint8_t *h, int64_t *t)
{
    d->flen = (uint32_t)h[0] << 16 | (uint32_t)h[1] << 8 | h[2];
    d->type = h[3];
    d->flags = h[4];
    d->sid =
        ((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 8 | h[8]) & 0x7fffffffu;
    d->left = d->flen;
    d->pad = 0;
    d->small_n = 0;
    if (d->block && (d->type != F_CONT || d->sid != d->block_sid)) {
        /* nothing may come between a block's frames (RFC 9113 6.10) */
        BAD(c, proto_errors, SW_RING_H2_FRAMING, "framing error: a frame inside a header block", t);
        return;
    }
    switch (d->type) {
    case F_HEADERS:
    case F_PUSH:
        if (!d->sid) {
            BAD(c, proto_errors, SW_RING_H2_FRAMING, "framing error: HEADERS on stream 0", t);
            return;
        }
        d->block = true;
        d->block_type = d->type;
        d->block_sid = d->sid;
        d->block_es = d->type == F_HEADERS && (d->flags & FL_END_STREAM);
        d->nframes = 1;
        d->block_bytes = 0;
        sw_hpack_begin(&d->hp);
        d->prio_left = d->type == F_PUSH ? 4 : (d->flags & FL_PRIORITY) ? 5 : 0;
        d->ps = (d->flags & FL_PADDED) ? PS_PADLEN : d->prio_left ? PS_PRIO : PS_BLOCK;
        break;
    case F_CONT:
        if (!d->block) {
            BAD(c, proto_errors, SW_RING_H2_FRAMING, "framing error: CONTINUATION without HEADERS",
                t);
            return;
        }
        if (++d->nframes > H2_CONT_MAX) {
            BAD(c, proto_errors, SW_RING_H2_FRAMING,
                "CONTINUATION flood (more than 64 frames in one header block)", t);
            return;
        }
        d->ps = PS_BLOCK;
        break;
    case F_SETTINGS:
    case F_RST:
    case F_GOAWAY:
        d->ps = (d->type == F_SETTINGS && (d->flags & FL_ACK)) ? PS_SKIP : PS_SMALL;
        break;
    case F_DATA:
    case F_PRIORITY:
    case F_PING:
    case F_WINDOW:
        d->ps = PS_SKIP;
        break;
    default:
        COUNT_R(unknown_frames, SW_RING_H2_UNKNOWN_FRAMES); /* ignored (RFC 9113 4.1) */
        d->ps = PS_SKIP;
        break;
    }
}

/* The current frame's payload is all parsed. */
static void frame_end(struct sw_conn *c, int dir, struct h2_dir *d, int64_t *t)
{
    if (d->ps == PS_SMALL)
        small_done(c, dir, d, t);
    d->ps = PS_HDR;
    d->hn = 0;
    if (d->type == F_DATA && (d->flags & FL_END_STREAM))
        stream_end(c, d->sid, dir == SW_DIR_OUT ? S_LOCAL_END : S_REMOTE_END, t);
}

/*
 * Parses `len` bytes of direction `dir` (OUT: at stream offset `abs`). Returns the bytes
 * consumed: all, or fewer when OUT pauses before a request HEADERS while an edit is pending.
 */
static size_t feed(struct sw_conn *c, int dir, const unsigned char *p, size_t len, uint64_t abs,
                   int64_t *t)
{
    struct h2_conn *s = H(c);
    struct h2_dir *d = &s->d[dir];
    size_t i = 0;
    if (SW_UNLIKELY(d->pre)) {
        size_t k = len < 24u - d->pre_n ? len : 24u - d->pre_n;
        if (memcmp(p, preface + d->pre_n, k) != 0) {
            BAD(c, bad_preface, SW_RING_H2_BAD_PREFACE, "broken client preface", t);
            return len;
        }
        d->pre_n = (uint8_t)(d->pre_n + k);
        i = k;
        if (d->pre_n == 24)
            d->pre = false;
    }
    while (!c->dead) {
        /* transitions that need no byte */
        if (d->ps == PS_BLOCK && d->left == d->pad) {
            bool end = d->flags & FL_END_HEADERS;
            d->ps = d->pad ? PS_PAD : PS_SKIP;
            if (end)
                block_done(c, dir, abs + i, t);
            if (c->dead)
                break;
            continue;
        }
        if (d->ps != PS_HDR && d->left == 0 &&
            (d->ps == PS_SKIP || d->ps == PS_PAD || d->ps == PS_SMALL)) {
            frame_end(c, dir, d, t);
            continue;
        }
        if (i >= len)
            break;
        size_t avail = len - i;
        switch (d->ps) {
        case PS_HDR:
            if (d->hn == 0) {
                if (dir == SW_DIR_OUT && sw_conn_out_pending(c) && !s->srv &&
                    (avail < 9 || p[i + 3] == F_HEADERS)) {
                    sw_conn_out_pause(c); /* the next request waits for the edit */
                    return i;
                }
                d->frame_abs = abs + i;
                if (avail >= 9) { /* the usual: a whole frame header in these bytes */
                    i += 9;
                    d->hn = 9;
                    frame_begin(c, dir, d, p + i - 9, t);
                    break;
                }
            }
            {
                size_t k = 9u - d->hn < avail ? 9u - d->hn : avail;
                memcpy(d->hdr + d->hn, p + i, k);
                d->hn = (uint8_t)(d->hn + k);
                i += k;
            }
            if (d->hn == 9)
                frame_begin(c, dir, d, d->hdr, t);
            break;
        case PS_SKIP:
        case PS_PAD: {
            size_t k = d->left < avail ? d->left : avail;
            d->left -= (uint32_t)k;
            i += k;
            break;
        }
        case PS_PADLEN:
            d->pad = p[i++];
            d->left--;
            if (d->pad + d->prio_left > d->left) {
                BAD(c, proto_errors, SW_RING_H2_FRAMING, "framing error: bad padding", t);
                break;
            }
            d->ps = d->prio_left ? PS_PRIO : PS_BLOCK;
            break;
        case PS_PRIO: {
            if (d->left < d->prio_left + d->pad) {
                BAD(c, proto_errors, SW_RING_H2_FRAMING, "framing error: bad padding", t);
                break;
            }
            size_t k = d->prio_left < avail ? d->prio_left : avail;
            d->prio_left = (uint8_t)(d->prio_left - k);
            d->left -= (uint32_t)k;
            i += k;
            if (!d->prio_left)
                d->ps = PS_BLOCK;
            break;
        }
        case PS_BLOCK: {
            size_t k = d->left - d->pad < avail ? d->left - d->pad : avail;
            d->block_bytes += (uint32_t)k;
            if (d->block_bytes > H2_BLOCK_MAX) {
                BAD(c, list_too_big, SW_RING_H2_LIST,
                    "header list too large (a header block above 64 KiB)", t);
                break;
            }
            int e = sw_hpack_feed(&d->hp, p + i, k);
            if (e) {
                hpack_fail(c, e, t);
                break;
            }
            d->left -= (uint32_t)k;
            i += k;
            break;
        }
        default: { /* PS_SMALL */
            size_t k = d->left < avail ? d->left : avail;
            for (size_t j = 0; j < k; j++) {
                if (d->small_n < sizeof(d->small))
                    d->small[d->small_n++] = p[i + j];
                if (d->type == F_SETTINGS && d->small_n == 6) {
                    settings_entry(c, dir, d->small);
                    d->small_n = 0;
                }
            }
            d->left -= (uint32_t)k;
            i += k;
            break;
        }
        }
    }
    return len;
}

/* ---- hooks ---------------------------------------------------------------------------------- */

/* The client preface, or (a server speaking first) a SETTINGS frame before it: more. */
static enum sw_sniff h2_sniff(const struct sw_conn *c, enum sw_conn_dir dir, const char *p,
                              size_t len)
{
    size_t k = len < 24 ? len : 24;
    if (memcmp(p, preface, k) == 0)
        return len >= 24 ? SW_SNIFF_YES : SW_SNIFF_MORE;
    /* a server's SETTINGS, written (server) or read (client) before the client's preface */
    bool server_side = (dir == SW_DIR_OUT) == (c->role == SW_ROLE_SERVER);
    if (server_side && p[0] == 0 &&
        (len < 4 || (p[3] == F_SETTINGS && (len < 9 || (p[5] | p[6] | p[7] | p[8]) == 0))))
        return SW_SNIFF_MORE;
    return SW_SNIFF_NO;
}

static void init_state(struct sw_conn *c, bool srv)
{
    struct h2_conn *s = H(c);
    for (int i = 0; i < 2; i++) {
        struct h2_dir *d = &s->d[i];
        sw_hpack_init(&d->hp);
        d->ps = PS_HDR;
        d->hn = 0;
        d->pre_n = 0;
        d->block = false;
        d->left = 0;
    }
    s->d[SW_DIR_IN].pre = srv;
    s->d[SW_DIR_OUT].pre = !srv;
    s->peer_max_frame = 16384;
    s->peer_max_list = 0;
    s->srv = srv;
    s->n = 0;
    c->out_ahead = !srv; /* a client's request blocks are parsed before they go out (sw8) */
}

static void h2_attach(struct sw_conn *c)
{
    /* sniffed: the side whose reads begin with the preface serves */
    bool srv = c->role == SW_ROLE_SERVER;
    if (c->sniff_len[SW_DIR_IN] && memcmp(c->sniff[SW_DIR_IN], preface, 4) == 0)
        srv = true;
    else if (c->sniff_len[SW_DIR_OUT] && memcmp(c->sniff[SW_DIR_OUT], preface, 4) == 0)
        srv = false;
    init_state(c, srv);
    COUNT(conns);
}

static void h2_in(struct sw_conn *c, const char *p, size_t len, int64_t *t)
{
    feed(c, SW_DIR_IN, (const unsigned char *)p, len, 0, t);
    if (!H(c)->srv)
        sw_conn_reply_read(c);
}

static size_t h2_out(struct sw_conn *c, const char *p, size_t len, uint64_t abs, int64_t *t)
{
    return feed(c, SW_DIR_OUT, (const unsigned char *)p, len, abs, t);
}

static void h2_written(struct sw_conn *c, const struct iovec *iov, int iovcnt, size_t r, int64_t *t)
{
    for (int i = 0; i < iovcnt && r && !c->dead; i++) {
        size_t l = iov[i].iov_len < r ? iov[i].iov_len : r;
        feed(c, SW_DIR_OUT, iov[i].iov_base, l, c->parsed, t);
        r -= l;
    }
}

/* Bytes sent from a file: only DATA payload can be, counted as such; else stop. */
static void h2_unseen(struct sw_conn *c, uint64_t n, int64_t *t)
{
    struct h2_dir *d = &H(c)->d[SW_DIR_OUT];
    if (d->ps == PS_SKIP && d->type == F_DATA && n <= d->left) {
        d->left -= (uint32_t)n;
        if (!d->left)
            frame_end(c, SW_DIR_OUT, d, t);
        return;
    }
    give_up(c, "HTTP/2 bytes sent from a file", t);
}

/*
 * A read returned 0. A client's streams without their response end as errors. A server's
 * streams whose request was complete stay: their response may be being written by another
 * thread (grpc core reads EOF on its poller thread while the handler's thread writes the
 * trailers); they end at that write or at close(). The others end as errors.
 */
static void h2_eof(struct sw_conn *c, int64_t *t)
{
    struct h2_conn *s = H(c);
    for (unsigned i = s->n; i-- > 0;)
        if (!s->srv || !(s->s[i].fl & S_REMOTE_END))
            stream_fail(c, &s->s[i], "peer closed the connection", t);
}

static void h2_error(struct sw_conn *c, int err, int64_t *t)
{
    (void)err;
    streams_fail_all(c, "connection error", t);
}

static void h2_close(struct sw_conn *c, bool closing, int64_t *t)
{
    streams_fail_all(c, closing ? "connection closed" : "connection not followed", t);
}

static void h2_fork_child(struct sw_conn *c)
{
    struct h2_conn *s = H(c);
    for (unsigned i = 0; i < s->n; i++)
        s->s[i].span = 0; /* the parent's handles */
}

const struct sw_proto sw_proto_h2 = {
    .name = "h2",
    .sniff = h2_sniff,
    .attach = h2_attach,
    .in = h2_in,
    .out = h2_out,
    .written = h2_written,
    .unseen = h2_unseen,
    .eof = h2_eof,
    .error = h2_error,
    .close = h2_close,
    .fork_child = h2_fork_child,
};

/* ---- hand-over from other code -------------------------------------------------------------- */

bool sw_h2_adopt(struct sw_conn *c, bool is_server)
{
    if (c->dead)
        return false;
    sw_conn_set_proto(c, &sw_proto_h2);
    init_state(c, is_server);
    return !c->dead;
}

void sw_h2_adopt_h2c(struct sw_conn *c, uint64_t span, enum sw_conn_dir dir, const char *p,
                     size_t len, int64_t *t)
{
    if (!sw_h2_adopt(c, c->role == SW_ROLE_SERVER))
        return;
    struct h2_conn *s = H(c);
    struct h2_stream *x = stream_new(s, 1);
    if (x) {
        x->span = span;
        /* the upgraded request was sent whole (HTTP/1.1); the response comes as HTTP/2 */
        x->fl = s->srv ? (S_ENTRY | S_REMOTE_END) : S_LOCAL_END;
    }
    if (len)
        feed(c, dir, (const unsigned char *)p, len, c->parsed, t);
}
