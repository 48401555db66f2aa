/*
 * proto_fcgi.c - the FastCGI protocol module of the connection layer (proto.h), both sides:
 *   - server (PHP-FPM's workers): a connection whose first bytes read are a BEGIN_REQUEST
 *     record; each request becomes an Entry span when its params are complete (its parent
 *     from HTTP_SW8), current for the thread, so the worker's database and cache calls are its
 *     children; it ends when END_REQUEST is written, with the status of the response's
 *     `Status:` header;
 *   - client (nginx's fastcgi_pass): a connection whose first bytes written are a
 *     BEGIN_REQUEST record; each request becomes an Exit span, and one PARAMS record carrying
 *     HTTP_SW8 (and HTTP_SW8_CORRELATION / HTTP_SW8_X) is inserted just before the empty PARAMS
 *     record that ends the request's params: no length field of the application's records
 *     changes. It ends when END_REQUEST is read.
 * fcgi.c parses, proto_spans.c makes the spans.
 *
 * Rules: application threads, under the connection's lock (proto.h); no allocation, no
 * syscall. swagent.trace_fastcgi=false (read once by init()): never claims.
 */
#include "common.h"

#include "config.h"
#include "fcgi.h"
#include "proto.h"
#include "proto_common.h"
#include "proto_spans.h"
#include "trace.h"

SW_PROTO_STATE_CHECK(struct sw_fcgi);

static bool g_on = true;

static void init(const struct sw_config *cfg)
{
    g_on = !cfg || cfg->trace_fastcgi;
}

static struct sw_fcgi *st(struct sw_conn *c)
{
    return (struct sw_fcgi *)(void *)c->state;
}

/* The client side's PARAMS event: the exit span, and its record inserted if it still can be. */
static uint64_t client_params(struct sw_conn *c, const struct sw_fcgi_ev *ev, int64_t *t)
{
    int64_t start = ev->user ? (int64_t)ev->user : sw_conn_now(t);
    uint64_t parent = sw_conn_exit_parent(c);
    if (sw_conn_out_pending(c) || ev->insert_off < sw_conn_out_sent(c)) {
        /* Another request's record is still going out, or this header began in bytes already
         * sent: no insertion (the exit is still recorded). */
        uint8_t none[8];
        size_t n;
        sw_conn_count(SW_CNT_INSERT_SKIPPED);
        return sw_fcgi_exit_begin(ev, c->peer, c->peer_len, parent, none, 0, &n, start);
    }
    size_t n = 0;
    uint64_t h = sw_fcgi_exit_begin(ev, c->peer, c->peer_len, parent, (uint8_t *)sw_conn_out_buf(c),
                                    SW_CONN_INSERT_MAX, &n, start);
    if (n) {
        if (sw_conn_out_insert(c, ev->insert_off, n))
            sw_conn_count(SW_CNT_INSERTED);
        else
            sw_conn_count(SW_CNT_INSERT_SKIPPED);
    }
    return h;
}

static uint64_t on_event(void *ctx, const struct sw_fcgi_ev *ev)
{
    struct sw_proto_call *k = ctx;
    struct sw_conn *c = k->c;
    bool server = c->role == SW_ROLE_SERVER;
    switch (ev->kind) {
    case SW_FCGI_EV_BEGIN:
        return (uint64_t)sw_conn_now(k->t); /* the request's start, for its PARAMS event */
    case SW_FCGI_EV_PARAMS:
        if (server)
            return sw_fcgi_entry_begin(ev, c->peer, c->peer_len,
                                       ev->user ? (int64_t)ev->user : sw_conn_now(k->t));
        return client_params(c, ev, k->t);
    case SW_FCGI_EV_ABORT:
    case SW_FCGI_EV_END:
        sw_fcgi_span_end(ev, server, sw_conn_now(k->t));
        if (!server && !ev->closed)
            sw_conn_reply_read(c);
        return 0;
    case SW_FCGI_EV_HEAD:
        return 0;
    case SW_FCGI_EV_STOP:
        sw_proto_give_up(c, ev->reason, k->t);
        return 0;
    }
    return 0;
}

/* BEGIN_REQUEST: version 1, type 1, content length 8 (written by a client, read by a server). */
static enum sw_sniff sniff(const struct sw_conn *c, enum sw_conn_dir dir, const char *p, size_t len)
{
    if (!g_on)
        return SW_SNIFF_NO;
    if (!((c->role == SW_ROLE_CLIENT && dir == SW_DIR_OUT) ||
          (c->role == SW_ROLE_SERVER && dir == SW_DIR_IN)))
        return SW_SNIFF_NO;
    static const uint8_t begin[6] = {1, 1, 0, 0, 0, 8}; /* request id (bytes 2-3) any */
    for (size_t i = 0; i < len && i < 6; i++)
        if (i != 2 && i != 3 && (uint8_t)p[i] != begin[i])
            return SW_SNIFF_NO;
    if (len >= 4 && p[2] == 0 && p[3] == 0)
        return SW_SNIFF_NO; /* request id 0 is for management records only */
    return len >= 6 ? SW_SNIFF_YES : SW_SNIFF_MORE;
}

static void attach(struct sw_conn *c)
{
    sw_fcgi_init(st(c));
    c->out_ahead = c->role == SW_ROLE_CLIENT; /* the client inserts its PARAMS record */
}

/* Bytes to the parser: `response` those of the responses (a client reads them, a server
 * writes them). */
static void feed(struct sw_conn *c, bool response, const uint8_t *p, size_t n, int64_t *t)
{
    struct sw_proto_call k = {c, t};
    sw_fcgi_feed(st(c), response, p, n, on_event, &k);
}

static void in(struct sw_conn *c, const char *p, size_t len, int64_t *t)
{
    /* A server reads requests, a client reads responses. */
    feed(c, c->role == SW_ROLE_CLIENT, (const uint8_t *)p, len, t);
}

/* Client: the request bytes before the kernel gets them (out_ahead). */
static size_t out(struct sw_conn *c, const char *p, size_t len, uint64_t abs, int64_t *t)
{
    (void)abs; /* the parser counts the same offsets from the connection's first byte */
    feed(c, false, (const uint8_t *)p, len, t);
    return len;
}

/* Server: the response bytes the kernel took. */
static void written(struct sw_conn *c, const struct iovec *iov, int iovcnt, size_t r, int64_t *t)
{
    sw_proto_feed_iov(c, iov, iovcnt, r, t, feed, true);
}

static void ended(struct sw_conn *c, int64_t *t)
{
    struct sw_proto_call k = {c, t};
    sw_fcgi_close(st(c), on_event, &k);
}
SW_PROTO_END_HOOKS(ended)

static void eof(struct sw_conn *c, int64_t *t)
{
    /* A server's peer may half-close after its request; its responses still go out. */
    if (c->role == SW_ROLE_CLIENT)
        ended(c, t);
}

static void fork_child(struct sw_conn *c)
{
    sw_fcgi_forget_spans(st(c));
}

const struct sw_proto sw_proto_fcgi = {
    .name = "fastcgi",
    .init = init,
    .sniff = sniff,
    .attach = attach,
    .in = in,
    .out = out,
    .written = written,
    .eof = eof,
    .error = error_,
    .close = close_,
    .fork_child = fork_child,
};
