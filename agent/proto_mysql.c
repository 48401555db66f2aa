/*
 * proto_mysql.c - the MySQL / MariaDB protocol module of the connection layer (proto.h): a client
 * connection whose server speaks first with a MySQL greeting (HandshakeV10) is parsed by
 * mysql.c, and each statement becomes an Exit span (proto_spans.c). Nothing is inserted: the
 * protocol has no place for sw8, so the database is a leaf of the trace (a "virtual database"
 * node in OAP's topology, named by the peer).
 *
 * Rules: application threads, under the connection's lock (proto.h); no allocation, no
 * syscall. The parser's whole state is the connection's module state (struct sw_mysql).
 * Configuration, read once by init() (docs/configuration.md, "Protocol modules"):
 * swagent.trace_mysql=false never claims; plugin.jdbc.sql_body_max_length is the statement
 * bytes kept, plugin.jdbc.trace_sql_parameters / sql_parameters_max_length an execution's
 * parameters.
 */
#include "common.h"

#include "config.h"
#include "mysql.h"
#include "proto.h"
#include "proto_common.h"
#include "proto_spans.h"
#include "trace.h"

SW_PROTO_STATE_CHECK(struct sw_mysql);

static bool g_on = true;
static size_t g_text_max = SW_MYSQL_TEXT_MAX, g_params_max; /* g_params_max 0: no parameters */

static void init(const struct sw_config *cfg)
{
    g_on = !cfg || cfg->trace_mysql;
    g_text_max = cfg ? (size_t)cfg->sql_body_max_length : SW_MYSQL_TEXT_MAX;
    g_params_max = cfg && cfg->trace_sql_parameters ? (size_t)cfg->sql_parameters_max_length : 0;
}

static struct sw_mysql *st(struct sw_conn *c)
{
    return (struct sw_mysql *)(void *)c->state;
}

static uint64_t on_event(void *ctx, const struct sw_mysql_ev *ev)
{
    struct sw_proto_call *k = ctx;
    struct sw_conn *c = k->c;
    switch (ev->kind) {
    case SW_MYSQL_EV_BEGIN:
        return sw_mysql_span_begin(st(c), ev, c->peer, c->peer_len, sw_conn_exit_parent(c),
                                   sw_conn_now(k->t));
    case SW_MYSQL_EV_END:
        sw_mysql_span_end(ev, sw_conn_now(k->t));
        if (!ev->closed)
            sw_conn_reply_read(c);
        return 0;
    case SW_MYSQL_EV_STOP:
        sw_proto_give_up(c, ev->reason, k->t);
        return 0;
    }
    return 0;
}

/*
 * A client reading a MySQL greeting: packet length 20..1023, sequence 0, protocol version 10,
 * a version string starting with a digit. A server speaking first is never HTTP, so the first
 * four bytes alone (a length and sequence 0) are enough to ask for more.
 */
static enum sw_sniff sniff(const struct sw_conn *c, enum sw_conn_dir dir, const char *p, size_t len)
{
    if (c->role != SW_ROLE_CLIENT || dir != SW_DIR_IN || !g_on)
        return SW_SNIFF_NO;
    const uint8_t *b = (const uint8_t *)p;
    size_t plen = (size_t)b[0] | (size_t)(len > 1 ? b[1] : 0) << 8;
    if (len >= 3 && (b[2] != 0 || plen < 20 || plen > 1023))
        return SW_SNIFF_NO;
    if (len >= 4 && b[3] != 0)
        return SW_SNIFF_NO;
    if (len >= 5 && b[4] != 10)
        return SW_SNIFF_NO;
    if (len >= 6 && !(b[5] >= '0' && b[5] <= '9'))
        return SW_SNIFF_NO;
    return len >= 6 ? SW_SNIFF_YES : SW_SNIFF_MORE;
}

static void attach(struct sw_conn *c)
{
    sw_mysql_init(st(c), g_text_max, g_params_max);
    c->out_noclock = true; /* spans start and end at reads; a write's clock is never needed */
}

/* Bytes of one direction (client: the server's from_server), to the parser. */
static void feed(struct sw_conn *c, bool from_server, const uint8_t *p, size_t n, int64_t *t)
{
    struct sw_proto_call k = {c, t};
    sw_mysql_feed(st(c), from_server, p, n, on_event, &k);
}

static void in(struct sw_conn *c, const char *p, size_t len, int64_t *t)
{
    feed(c, true, (const uint8_t *)p, len, t);
}

static void written(struct sw_conn *c, const struct iovec *iov, int iovcnt, size_t r, int64_t *t)
{
    sw_proto_feed_iov(c, iov, iovcnt, r, t, feed, false);
}

/* The connection ends or fails: statements still waiting end as errors. */
static void ended(struct sw_conn *c, int64_t *t)
{
    struct sw_proto_call k = {c, t};
    sw_mysql_close(st(c), on_event, &k);
}
SW_PROTO_END_HOOKS(ended)

static void fork_child(struct sw_conn *c)
{
    sw_mysql_forget_spans(st(c));
}

const struct sw_proto sw_proto_mysql = {
    .name = "mysql",
    .init = init,
    .sniff = sniff,
    .attach = attach,
    .in = in,
    .written = written,
    .eof = ended,
    .error = error_,
    .close = close_,
    .fork_child = fork_child,
};
