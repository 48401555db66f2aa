/*
 * proto_db.c - the Redis, PostgreSQL and memcached client modules of the connection layer
 * (proto.h): the parsers (proto_redis.c, proto_pg.c, proto_memcached.c) turned into exit spans.
 *
 * A connection is claimed by its remote port (6379, 5432, 11211), by its Unix socket's path
 * (".s.PGSQL.", "redis", "memcached" in it) or by the first bytes the client writes (a RESP
 * array, a PostgreSQL SSLRequest/GSSENCRequest/StartupMessage, a memcached command word).
 * Only client connections: the modules never touch a server's bytes.
 *
 * Spans: one exit span per command (Redis, memcached) or per Query / Execute (PostgreSQL),
 * started when the command's last byte was written (the clock read just before that write),
 * ended when its reply's last byte was read (pipelined replies read at once end at the same
 * time: that is when the application got them). Layer Cache (cache.type, cache.cmd, cache.key,
 * cache.op) or Database (db.type, db.instance, db.statement, db.sql.parameters), components
 * Redis 7, PostgreSQL 22, Memcached 20, peer the connection's ip:port or socket path.
 *
 * The spans of commands waiting for replies are kept in this module's own queue (the layer's
 * holds 8; a pipeline of redis-benchmark -P 16 or a Python pipeline holds more): runs of
 * { handle, count } so that a deep pipeline costs one entry for the commands beyond the
 * queue's room, which get no span (counted as untraced by the parser's order, never
 * mismatched). What is left when the connection ends, fails or is given up is ended as an
 * error with the reason.
 */
#include "common.h"

#include "config.h"
#include "proto.h"
#include "proto_common.h"
#include "proto_db.h"
#include "proto_dbmod.h"
#include "proto_memcached.h"
#include "proto_pg.h"
#include "proto_redis.h"
#include "trace.h"

#include <string.h>
#include <sys/socket.h>

/* ---------------------------------------------------------------- span queue */

struct db_run {
    uint64_t h; /* the first command of the run (0: untraced) */
    uint32_t n; /* commands in the run: the others are untraced */
};

struct db_fifo {
    uint16_t head, len, cap;
    uint32_t pending; /* commands in all runs */
};

#define FIFO_REDIS 256u
#define FIFO_MC 256u
#define FIFO_PG 24u

struct redis_conn {
    struct db_fifo f;
    struct sw_redis p;
    struct db_run e[FIFO_REDIS];
};
struct pg_conn {
    struct db_fifo f;
    struct sw_pg p;
    struct db_run e[FIFO_PG];
};
struct mc_conn {
    struct db_fifo f;
    struct sw_mc p;
    struct db_run e[FIFO_MC];
};
SW_PROTO_STATE_CHECK(struct redis_conn);
SW_PROTO_STATE_CHECK(struct pg_conn);
SW_PROTO_STATE_CHECK(struct mc_conn);

/* True when a new traced command has room (a run of its own). */
static inline bool fifo_room(const struct db_fifo *f)
{
    return f->len < f->cap;
}

static inline void fifo_push(struct db_fifo *f, struct db_run *e, uint64_t h)
{
    f->pending++;
    if (!h && f->len) {
        e[(f->head + f->len - 1) % f->cap].n++;
        return;
    }
    if (f->len == f->cap) { /* cannot happen: h is 0 when there is no room (fifo_room) */
        e[(f->head + f->len - 1) % f->cap].n++;
        return;
    }
    struct db_run *r = &e[(f->head + f->len) % f->cap];
    r->h = h;
    r->n = 1;
    f->len++;
}

static inline uint64_t fifo_pop(struct db_fifo *f, struct db_run *e)
{
    if (!f->len)
        return 0;
    struct db_run *r = &e[f->head];
    uint64_t h = r->h;
    r->h = 0;
    f->pending--;
    if (--r->n == 0) {
        f->head = (uint16_t)((f->head + 1) % f->cap);
        f->len--;
    }
    return h;
}

static void fifo_fail(struct db_fifo *f, struct db_run *e, const char *kind, const char *msg,
                      int64_t *t)
{
    while (f->len) {
        uint64_t h = fifo_pop(f, e);
        if (h)
            sw_trace_db_finish(h, kind, msg, sw_conn_now(t));
    }
    f->pending = 0;
}

static void fifo_init(struct db_fifo *f, uint16_t cap)
{
    f->head = f->len = 0;
    f->cap = cap;
    f->pending = 0;
}

/* ---------------------------------------------------------------- configuration */

static bool g_on_redis = true, g_on_pg = true, g_on_mc = true, g_params;
static size_t g_stmt_max = 2048, g_params_max = 512;

void sw_dbproto_init(const struct sw_config *cfg)
{
    sw_redis_init(cfg);
    if (!cfg)
        return;
    g_on_redis = cfg->trace_redis;
    g_on_pg = cfg->trace_postgresql;
    g_on_mc = cfg->trace_memcached;
    g_params = cfg->trace_sql_parameters;
    if (cfg->sql_body_max_length > 0)
        g_stmt_max = (size_t)cfg->sql_body_max_length;
    if (cfg->sql_parameters_max_length > 0)
        g_params_max = (size_t)cfg->sql_parameters_max_length;
}

/* ---------------------------------------------------------------- spans */

struct db_kind {
    struct sw_tag type; /* cache.type / db.type */
    const char *opfx;   /* operation name prefix */
    size_t opfx_len;
    const char *err_kind;
    uint8_t layer;
    int32_t comp;
    bool cache;
};

#define LIT(s) s, sizeof(s) - 1
static const struct db_kind k_redis = {
    {LIT("cache.type"), LIT("Redis")}, LIT("Redis/"), "RedisError", SW_TRACE_LAYER_CACHE,
    SW_TRACE_COMPONENT_REDIS,          true};
static const struct db_kind k_pg = {{LIT("db.type"), LIT("PostgreSQL")},
                                    LIT("PostgreSQL/"),
                                    "PostgreSQLError",
                                    SW_TRACE_LAYER_DATABASE,
                                    SW_TRACE_COMPONENT_POSTGRESQL,
                                    false};
static const struct db_kind k_mc = {{LIT("cache.type"), LIT("Memcached")},
                                    LIT("Memcached/"),
                                    "MemcachedError",
                                    SW_TRACE_LAYER_CACHE,
                                    SW_TRACE_COMPONENT_MEMCACHED,
                                    true};

/* The tags of a span: made as record.h strings by the trace module (sw_trace_db_start_in),
 * from the bytes as they are; a value longer than its limit is cut there with "..." after it
 * (SkyWalking's SqlBodyUtil). */
static uint64_t db_start(struct sw_conn *c, const struct db_kind *k, const struct sw_db_ev *ev,
                         const char *inst, size_t inst_len, int64_t *t)
{
    static const struct sw_tag ops[] = {
        {0}, {LIT("cache.op"), LIT("read")}, {LIT("cache.op"), LIT("write")}};
    uint32_t dots = 0;
    struct sw_tag tags[5];
    unsigned n = 0;
    tags[n++] = k->type;
    if (k->cache) {
        tags[n++] = (struct sw_tag){LIT("cache.cmd"), ev->name, ev->name_len};
        if (ev->text_len)
            tags[n++] = (struct sw_tag){LIT("cache.key"), ev->text, ev->text_len};
        if (ev->op)
            tags[n++] = ops[ev->op];
    } else {
        if (inst_len)
            tags[n++] = (struct sw_tag){LIT("db.instance"), inst, inst_len};
        if (ev->text_len) {
            bool cut = ev->text_cut || ev->text_len > g_stmt_max;
            size_t sl = ev->text_len > g_stmt_max ? g_stmt_max : ev->text_len;
            dots |= (uint32_t)cut << n;
            tags[n++] = (struct sw_tag){LIT("db.statement"), ev->text, sl};
        }
        if (ev->params && ev->params_len) {
            bool cut = ev->params_len > g_params_max;
            size_t ql = cut ? g_params_max : ev->params_len;
            dots |= (uint32_t)cut << n;
            tags[n++] = (struct sw_tag){LIT("db.sql.parameters"), ev->params, ql};
        }
    }
    struct sw_db_info info = {k->layer, k->comp, k->opfx,  k->opfx_len,  c->peer, c->peer_len,
                              tags,     n,       ev->name, ev->name_len, dots};
    return sw_trace_db_start_in(sw_conn_exit_parent(c), &info, sw_conn_now(t));
}

static void db_end(const struct db_kind *k, uint64_t h, const struct sw_db_ev *ev, int64_t *t)
{
    if (!h)
        return;
    if (!ev->error) {
        sw_trace_db_finish(h, NULL, NULL, sw_conn_now(t));
        return;
    }
    char msg[SW_DB_MSG_MAX + 32];
    size_t at = 0;
    if (ev->code[0]) {
        memcpy(msg, "SQLSTATE ", 9);
        at = 9;
        size_t cl = strnlen(ev->code, sizeof(ev->code));
        memcpy(msg + at, ev->code, cl);
        at += cl;
        msg[at++] = ':';
        msg[at++] = ' ';
    }
    size_t ml = ev->msg_len < sizeof(msg) - 1 - at ? ev->msg_len : sizeof(msg) - 1 - at;
    memcpy(msg + at, ev->msg, ml);
    msg[at + ml] = '\0';
    sw_trace_db_finish(h, k->err_kind, msg, sw_conn_now(t));
}

typedef size_t (*db_feed_fn)(void *p, enum sw_db_dir dir, const uint8_t *buf, size_t len,
                             struct sw_db_ev *ev);
typedef bool (*db_more_fn)(const void *p);

static size_t feed_redis(void *p, enum sw_db_dir d, const uint8_t *b, size_t n, struct sw_db_ev *ev)
{
    return sw_redis_feed(p, d, b, n, ev);
}
static size_t feed_pg(void *p, enum sw_db_dir d, const uint8_t *b, size_t n, struct sw_db_ev *ev)
{
    return sw_pg_feed(p, d, b, n, ev);
}
static size_t feed_mc(void *p, enum sw_db_dir d, const uint8_t *b, size_t n, struct sw_db_ev *ev)
{
    return sw_mc_feed(p, d, b, n, ev);
}
static bool more_redis(const void *p)
{
    return sw_redis_more(p);
}
static bool more_pg(const void *p)
{
    return sw_pg_more(p);
}
static bool more_mc(const void *p)
{
    return sw_mc_more(p);
}

/* Bytes of one direction through the parser; spans started and ended on its events. Inline
 * in each protocol's hooks (its parser called directly). */
static inline __attribute__((always_inline)) void
db_bytes(struct sw_conn *c, const struct db_kind *k, db_feed_fn feed, db_more_fn more, void *parser,
         struct db_fifo *f, struct db_run *e, enum sw_db_dir dir, const char *p, size_t len,
         int64_t *t)
{
    size_t off = 0;
    bool ended = false;
    for (;;) {
        struct sw_db_ev ev;
        off += feed(parser, dir, (const uint8_t *)p + off, len - off, &ev);
        if (ev.type == SW_DB_EV_NONE)
            break;
        if (ev.type == SW_DB_EV_START) {
            uint64_t h = 0;
            if (fifo_room(f)) {
                size_t il = 0;
                const char *inst = k == &k_pg ? sw_pg_database(parser, &il) : NULL;
                h = db_start(c, k, &ev, inst, il, t);
            }
            fifo_push(f, e, h);
        } else if (ev.type == SW_DB_EV_END) {
            db_end(k, fifo_pop(f, e), &ev, t);
            ended = true;
        } else {
            fifo_fail(f, e, "swagent.not_followed", ev.msg, t);
            sw_proto_give_up(c, ev.msg, t); /* counted, logged, no longer followed */
            break;
        }
        if (off == len && !more(parser))
            break; /* all consumed: a call with no bytes would give nothing */
    }
    if (ended)
        sw_conn_reply_read(c);
}

/* ---------------------------------------------------------------- claiming */

static inline uint32_t be32(const char *p)
{
    const uint8_t *b = (const uint8_t *)p;
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static bool path_has(const struct sw_conn *c, const char *s)
{
    return c->family == AF_UNIX && memmem(c->peer, c->peer_len, s, strlen(s)) != NULL;
}

static bool client_out(const struct sw_conn *c, enum sw_conn_dir dir)
{
    return c->role == SW_ROLE_CLIENT && dir == SW_DIR_OUT;
}

static bool redis_claim(const struct sw_conn *c)
{
    return g_on_redis && c->role == SW_ROLE_CLIENT &&
           ((c->family != AF_UNIX && c->port == 6379) || path_has(c, "redis"));
}

static enum sw_sniff redis_sniff(const struct sw_conn *c, enum sw_conn_dir dir, const char *p,
                                 size_t len)
{
    /* a RESP array of bulk strings: "*<count>\r\n$" (a shorter first write: ask for more) */
    if (!g_on_redis || !client_out(c, dir) || p[0] != '*')
        return SW_SNIFF_NO;
    if (len < 2)
        return SW_SNIFF_MORE;
    if (p[1] < '1' || p[1] > '9')
        return SW_SNIFF_NO;
    size_t i = 2;
    while (i < len && p[i] >= '0' && p[i] <= '9' && i < 12)
        i++;
    if (i + 2 >= len)
        return i < 12 ? SW_SNIFF_MORE : SW_SNIFF_NO;
    return p[i] == '\r' && p[i + 1] == '\n' && p[i + 2] == '$' ? SW_SNIFF_YES : SW_SNIFF_NO;
}

static bool pg_claim(const struct sw_conn *c)
{
    return g_on_pg && c->role == SW_ROLE_CLIENT &&
           ((c->family != AF_UNIX && c->port == 5432) || path_has(c, ".s.PGSQL."));
}

static enum sw_sniff pg_sniff(const struct sw_conn *c, enum sw_conn_dir dir, const char *p,
                              size_t len)
{
    if (!g_on_pg || !client_out(c, dir) || p[0] != 0)
        return SW_SNIFF_NO;
    if (len < 8)
        return SW_SNIFF_MORE; /* a length's high byte 0: the rest of the header decides */
    uint32_t l = be32(p), code = be32(p + 4);
    if (l == 8 && (code == 80877103u || code == 80877104u))
        return SW_SNIFF_YES; /* SSLRequest, GSSENCRequest */
    return l > 8 && l <= 10000 && code >> 16 == 3 ? SW_SNIFF_YES : SW_SNIFF_NO;
}

static bool mc_claim(const struct sw_conn *c)
{
    return g_on_mc && c->role == SW_ROLE_CLIENT &&
           ((c->family != AF_UNIX && c->port == 11211) || path_has(c, "memcached"));
}

static enum sw_sniff mc_sniff(const struct sw_conn *c, enum sw_conn_dir dir, const char *p,
                              size_t len)
{
    static const char *const words[] = {
        "get ",     "gets ",       "gat ",      "gats ",    "set ",    "add ",
        "replace ", "append ",     "prepend ",  "cas ",     "delete ", "incr ",
        "decr ",    "touch ",      "mg ",       "ms ",      "md ",     "ma ",
        "mn\r\n",   "version\r\n", "stats\r\n", "flush_all"};
    if (!g_on_mc || !client_out(c, dir))
        return SW_SNIFF_NO;
    bool more = false;
    for (size_t i = 0; i < SW_ARRAY_LEN(words); i++) {
        size_t wl = strlen(words[i]);
        if (len >= wl && memcmp(p, words[i], wl) == 0)
            return SW_SNIFF_YES;
        more |= len < wl && memcmp(p, words[i], len) == 0;
    }
    return more ? SW_SNIFF_MORE : SW_SNIFF_NO;
}

/* ---------------------------------------------------------------- hooks */

#define DB_HOOKS(NAME, TYPE, KIND, FEED, MORE, CAP, RESET)                                         \
    static inline struct TYPE *NAME##_st(struct sw_conn *c)                                        \
    {                                                                                              \
        return (struct TYPE *)(void *)c->state;                                                    \
    }                                                                                              \
    static void NAME##_attach(struct sw_conn *c)                                                   \
    {                                                                                              \
        struct TYPE *s = NAME##_st(c);                                                             \
        fifo_init(&s->f, CAP);                                                                     \
        RESET;                                                                                     \
        c->out_ahead = false;                                                                      \
    }                                                                                              \
    static void NAME##_in(struct sw_conn *c, const char *p, size_t len, int64_t *t)                \
    {                                                                                              \
        struct TYPE *s = NAME##_st(c);                                                             \
        db_bytes(c, &KIND, FEED, MORE, &s->p, &s->f, s->e, SW_DB_TO_CLIENT, p, len, t);            \
    }                                                                                              \
    static void NAME##_written(struct sw_conn *c, const struct iovec *iov, int iovcnt, size_t r,   \
                               int64_t *t)                                                         \
    {                                                                                              \
        struct TYPE *s = NAME##_st(c);                                                             \
        for (int i = 0; i < iovcnt && r > 0 && !c->dead; i++) {                                    \
            size_t n = iov[i].iov_len < r ? iov[i].iov_len : r;                                    \
            if (n)                                                                                 \
                db_bytes(c, &KIND, FEED, MORE, &s->p, &s->f, s->e, SW_DB_TO_SERVER,                \
                         iov[i].iov_base, n, t);                                                   \
            r -= n;                                                                                \
        }                                                                                          \
    }                                                                                              \
    static void NAME##_eof(struct sw_conn *c, int64_t *t)                                          \
    {                                                                                              \
        struct TYPE *s = NAME##_st(c);                                                             \
        fifo_fail(&s->f, s->e, "swagent.closed",                                                   \
                  "the server closed the connection before the "                                   \
                  "reply",                                                                         \
                  t);                                                                              \
    }                                                                                              \
    static void NAME##_error(struct sw_conn *c, int err, int64_t *t)                               \
    {                                                                                              \
        (void)err;                                                                                 \
        struct TYPE *s = NAME##_st(c);                                                             \
        fifo_fail(&s->f, s->e, "swagent.conn_error", "the connection failed before the reply", t); \
    }                                                                                              \
    static void NAME##_close(struct sw_conn *c, bool closing, int64_t *t)                          \
    {                                                                                              \
        struct TYPE *s = NAME##_st(c);                                                             \
        fifo_fail(&s->f, s->e, "swagent.closed",                                                   \
                  closing ? "closed by the application before the reply"                           \
                          : "the connection is no longer followed",                                \
                  t);                                                                              \
    }                                                                                              \
    static void NAME##_fork_child(struct sw_conn *c)                                               \
    {                                                                                              \
        struct TYPE *s = NAME##_st(c);                                                             \
        fifo_init(&s->f, CAP); /* the parent's handles are void here */                            \
    }

DB_HOOKS(redis, redis_conn, k_redis, feed_redis, more_redis, FIFO_REDIS, sw_redis_reset(&s->p))
DB_HOOKS(pg, pg_conn, k_pg, feed_pg, more_pg, FIFO_PG, sw_pg_reset(&s->p, g_params))
DB_HOOKS(mc, mc_conn, k_mc, feed_mc, more_mc, FIFO_MC, sw_mc_reset(&s->p))

#define DB_PROTO(NAME, LABEL)                                                                      \
    const struct sw_proto sw_proto_##NAME = {                                                      \
        .name = LABEL,                                                                             \
        .init = sw_dbproto_init, /* all three at once (idempotent) */                              \
        .claim = NAME##_claim,                                                                     \
        .sniff = NAME##_sniff,                                                                     \
        .attach = NAME##_attach,                                                                   \
        .in = NAME##_in,                                                                           \
        .written = NAME##_written,                                                                 \
        .eof = NAME##_eof,                                                                         \
        .error = NAME##_error,                                                                     \
        .close = NAME##_close,                                                                     \
        .fork_child = NAME##_fork_child,                                                           \
    }

DB_PROTO(redis, "redis");
DB_PROTO(pg, "postgresql");
DB_PROTO(mc, "memcached");
