/*
 * test_proto_spans.c - database exit spans (sw_trace_db_start_in) and the spans the MySQL and
 * FastCGI parsers' events become (agent/proto_spans.c), read back from a real ring through
 * test_trace.c's record parser and, when it is built, the reporter's own (sw_encode_check).
 *
 * FastCGI end to end without sockets: nginx's request bytes go through a client-side parser,
 * whose exit span's PARAMS record is inserted where the event says; the result goes through a
 * server-side parser, whose entry span must name that exit as its parent.
 */
#pragma GCC diagnostic ignored "-Wunused-function"
#define main test_trace_main
#include "test_trace.c"
#undef main

#include "proto_spans.h"

/* ---------------------------------------------------------------- named exits */

static struct sw_db_info db3(struct sw_tag *t, const char *stmt)
{
    t[0] = (struct sw_tag){"db.type", 7, "Mysql", 5};
    t[1] = (struct sw_tag){"db.instance", 11, "shop", 4};
    t[2] = (struct sw_tag){"db.statement", 12, stmt, strlen(stmt)};
    return (struct sw_db_info){.layer = SW_TRACE_LAYER_DATABASE,
                               .component = 5,
                               .op = "Mysql/Query",
                               .op_len = 11,
                               .peer = "127.0.0.1:3306",
                               .peer_len = 14,
                               .tags = t,
                               .ntags = 3};
}

/* Database exits as the MySQL module makes them (sw_trace_db_start_in): layer, component,
 * tags, error log; a root segment of their own outside a request; a long tag cut. */
static void test_proto_db_exits(void)
{
    setup();
    struct sw_req_info q = req_of("GET", "/page", "front:80", "1.2.3.4:1000");
    uint64_t h = sw_trace_entry_start(&q, 100);
    CHECK(h);
    struct sw_tag t[3];
    struct sw_db_info x = db3(t, "SELECT 1");
    uint64_t e1 = sw_trace_db_start_in(sw_trace_request_now(), &x, 101);
    CHECK(e1);
    sw_trace_db_finish(e1, NULL, NULL, 103);
    x = db3(t, "SELECT * FROM nope");
    uint64_t e2 = sw_trace_db_start_in(sw_trace_request_now(), &x, 104);
    sw_trace_db_finish(e2, "MySQL 1146 (42S02)", "Table 'shop.nope' doesn't exist", 105);
    sw_trace_entry_finish(h, 200, 106);

    struct tseg *s;
    CHECK_EQ(read_all(&s), 1);
    CHECK_EQ(s[0].nspans, 3);
    const struct tspan *a = span_by_id(&s[0], 1), *b = span_by_id(&s[0], 2);
    CHECK(a && b);
    CHECK_EQ(a->parent, 0);
    CHECK_EQ(a->type, SW_SPAN_EXIT);
    CHECK_EQ(a->layer, SW_TRACE_LAYER_DATABASE);
    CHECK_EQ(a->form, SW_REC_FORM_NAMED);
    CHECK_EQ(a->comp, 5);
    CHECK_STR(a->op, "Mysql/Query");
    CHECK_STR(a->peer, "127.0.0.1:3306");
    CHECK_EQ(a->ntags, 3);
    CHECK_STR(tag(a, "db.type"), "Mysql");
    CHECK_STR(tag(a, "db.instance"), "shop");
    CHECK_STR(tag(a, "db.statement"), "SELECT 1");
    CHECK(tag(a, "http.status_code") == NULL);
    CHECK_EQ(a->start, 101);
    CHECK_EQ(a->end, 103);
    CHECK_EQ(a->flags, 0);
    CHECK_EQ(a->nlogs, 0);
    CHECK_EQ(b->flags, SW_REC_SPAN_ERROR);
    CHECK_STR(tag(b, "db.statement"), "SELECT * FROM nope");
    CHECK_EQ(b->nlogs, 1);
    CHECK_STR(b->kv[1].v, "MySQL 1146 (42S02)");
    CHECK_STR(b->kv[2].v, "Table 'shop.nope' doesn't exist");
    const struct tspan *en = span_by_id(&s[0], 0);
    CHECK_EQ(en->comp, 49); /* the entry keeps the http component */
    CHECK_EQ(en->layer, SW_LAYER_HTTP);
    free_segs(s, 1);

    /* No request: a root exit segment of its own. */
    setup();
    x = db3(t, "SELECT 2");
    uint64_t e3 = sw_trace_db_start_in(sw_trace_request_now(), &x, 200);
    CHECK(e3);
    sw_trace_db_finish(e3, NULL, NULL, 201);
    CHECK_EQ(read_all(&s), 1);
    CHECK_EQ(s[0].nspans, 1);
    CHECK_EQ(s[0].spans[0].parent, -1);
    CHECK_EQ(s[0].spans[0].comp, 5);
    CHECK_STR(tag(&s[0].spans[0], "db.statement"), "SELECT 2");
    free_segs(s, 1);
}

/* ---------------------------------------------------------------- MySQL events */

struct mctx {
    struct sw_mysql *m;
    int64_t now;
};

static uint64_t mysql_cb(void *ctx, const struct sw_mysql_ev *ev)
{
    struct mctx *c = ctx;
    if (ev->kind == SW_MYSQL_EV_BEGIN)
        return sw_mysql_span_begin(c->m, ev, "/run/mysqld/mysqld.sock", 23, sw_trace_request_now(),
                                   c->now);
    if (ev->kind == SW_MYSQL_EV_END)
        sw_mysql_span_end(ev, c->now);
    return 0;
}

static void feed_pkt(struct sw_mysql *m, struct mctx *c, bool server, uint8_t seq,
                     const char *payload, size_t n)
{
    uint8_t h[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), seq};
    sw_mysql_feed(m, server, h, 4, mysql_cb, c);
    sw_mysql_feed(m, server, (const uint8_t *)payload, n, mysql_cb, c);
}
#define FP(m, c, server, seq, lit) feed_pkt(m, c, server, seq, lit, sizeof(lit) - 1)

static void test_mysql_spans(void)
{
    setup();
    static struct sw_mysql m;
    sw_mysql_init(&m, 40, 64);
    struct mctx c = {&m, 1000};
    struct sw_req_info q = req_of("GET", "/list", "front:80", "1.2.3.4:1000");
    uint64_t h = sw_trace_entry_start(&q, 999);
    /* greeting, response with database "shop" (CLIENT_DEPRECATE_EOF), OK */
    FP(&m, &c, true, 0,
       "\x0a"
       "10.11.6-MariaDB\0"
       "\x01\x00\x00\x00"
       "abcdefgh\0"
       "\xfe\xf7\x2d\x02\x00\xff\x81"
       "\x15\0\0\0\0\0\0\0\0\0\0"
       "ijklmnopqrst\0");
    FP(&m, &c, false, 1,
       "\x8d\xa2\x0f\x01"
       "\0\0\0\1"
       "\x2d"
       "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"
       "app\0"
       "\0"
       "shop\0");
    FP(&m, &c, true, 2, "\x00\x00\x00\x02\x00\x00\x00");
    c.now = 1001;
    FP(&m, &c, false, 0, "\x03SELECT name FROM users WHERE id IN (1, 2, 3, 4, 5, 6, 7)");
    c.now = 1003;
    FP(&m, &c, true, 1, "\xff\x7a\x04#42S02Table 'shop.users' doesn't exist");
    c.now = 1004;
    FP(&m, &c, false, 0, "\x0e"); /* ping: no span */
    FP(&m, &c, true, 1, "\x00\x00\x00\x02\x00\x00\x00");
    FP(&m, &c, false, 0,
       "\x02"
       "other");
    c.now = 1005;
    FP(&m, &c, true, 1, "\x00\x00\x00\x02\x00\x00\x00");
    /* a prepared statement and its execution with its parameter (trace_sql_parameters) */
    FP(&m, &c, false, 0, "\x16SELECT name FROM users WHERE id = ?");
    FP(&m, &c, true, 1, "\x00\x01\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00");
    FP(&m, &c, true, 2,
       "\x03"
       "def\x00\x00\x00\x01?\x00\x0c\x3f\x00\x00\x00\x00\x00\xfd\x80\x00\x00\x00\x00");
    c.now = 1006;
    FP(&m, &c, false, 0,
       "\x17\x01\x00\x00\x00\x00\x01\x00\x00\x00\x00\x01\x03\x00\x2a\x00\x00\x00");
    c.now = 1007;
    FP(&m, &c, true, 1, "\x00\x00\x00\x02\x00\x00\x00");
    FP(&m, &c, false, 0,
       "\x03"
       "SELECT 1");
    sw_mysql_close(&m, mysql_cb, &c); /* the server went away */
    sw_trace_entry_finish(h, 200, 1010);

    struct tseg *s;
    CHECK_EQ(read_all(&s), 1);
    CHECK_EQ(s[0].nspans, 6);
    const struct tspan *a = span_by_id(&s[0], 1), *b = span_by_id(&s[0], 2),
                       *pr = span_by_id(&s[0], 3), *ex = span_by_id(&s[0], 4),
                       *d = span_by_id(&s[0], 5);
    CHECK(a && b && pr && ex && d);
    CHECK_STR(pr->op, "Mysql/Prepare");
    CHECK(tag(pr, "db.sql.parameters") == NULL);
    CHECK_STR(ex->op, "Mysql/Execute");
    CHECK_STR(tag(ex, "db.statement"), "SELECT name FROM users WHERE id = ?");
    CHECK_STR(tag(ex, "db.sql.parameters"), "[42]");
    CHECK_EQ(ex->start, 1006);
    CHECK_EQ(ex->end, 1007);
    CHECK_STR(a->op, "Mysql/Query");
    CHECK_STR(a->peer, "/run/mysqld/mysqld.sock");
    CHECK_EQ(a->comp, 5);
    CHECK_EQ(a->layer, SW_TRACE_LAYER_DATABASE);
    CHECK_STR(tag(a, "db.type"), "Mysql");
    CHECK_STR(tag(a, "db.instance"), "shop");
    CHECK_STR(tag(a, "db.statement"), "SELECT name FROM users WHERE id IN (1, 2...");
    CHECK_EQ(a->flags, SW_REC_SPAN_ERROR);
    CHECK_STR(a->kv[1].v, "MySQL 1146 (42S02)");
    CHECK_STR(a->kv[2].v, "Table 'shop.users' doesn't exist");
    CHECK_EQ(a->start, 1001);
    CHECK_EQ(a->end, 1003);
    CHECK_STR(b->op, "Mysql/InitDB");
    CHECK_STR(tag(b, "db.instance"), "other");
    CHECK(tag(b, "db.statement") == NULL);
    CHECK_EQ(b->flags, 0);
    CHECK_STR(d->op, "Mysql/Query");
    CHECK_STR(tag(d, "db.instance"), "other");
    CHECK_STR(tag(d, "db.statement"), "SELECT 1");
    CHECK_EQ(d->flags, SW_REC_SPAN_ERROR);
    CHECK_STR(d->kv[1].v, "closed");
    free_segs(s, 1);
}

/* ---------------------------------------------------------------- FastCGI end to end */

struct fctx {
    bool entry;
    int64_t now;
    uint8_t rec[4096];
    size_t rec_len;
    uint64_t insert_off;
    uint64_t parent;
};

static uint64_t fcgi_cb(void *ctx, const struct sw_fcgi_ev *ev)
{
    struct fctx *c = ctx;
    switch (ev->kind) {
    case SW_FCGI_EV_PARAMS:
        if (c->entry)
            return sw_fcgi_entry_begin(ev, "", 0, c->now);
        c->insert_off = ev->insert_off;
        return sw_fcgi_exit_begin(ev, "/run/php/fpm.sock", 17, c->parent, c->rec, sizeof(c->rec),
                                  &c->rec_len, c->now);
    case SW_FCGI_EV_END:
    case SW_FCGI_EV_ABORT:
        sw_fcgi_span_end(ev, c->entry, c->now);
        return 0;
    default:
        return 0;
    }
}

static size_t fpair(uint8_t *q, const char *n, const char *v)
{
    size_t nl = strlen(n), vl = strlen(v);
    q[0] = (uint8_t)nl;
    q[1] = (uint8_t)vl;
    memcpy(q + 2, n, nl);
    memcpy(q + 2 + nl, v, vl);
    return 2 + nl + vl;
}

static size_t frec(uint8_t *q, uint8_t type, const void *c, size_t n)
{
    uint8_t h[8] = {1, type, 0, 1, (uint8_t)(n >> 8), (uint8_t)n, 0, 0};
    memcpy(q, h, 8);
    memcpy(q + 8, c, n);
    return 8 + n;
}

static void test_fcgi_spans(void)
{
    setup();
    /* nginx: its entry (from curl, with curl's sw8), and the request it writes to PHP-FPM,
     * which forwards curl's sw8 as HTTP_SW8 (fastcgi_pass_request_headers). */
    struct sw_req_info q = req_of("GET", "/index.php?x=1", "shop:8080", "127.0.0.1:5000");
    char curl_sw8[] = "1-dHJhY2UtY3VybA==-c2VnLWN1cmw=-3-Y3VybA==-Y3VybC1pbnN0-L2luZGV4LnBocA==-"
                      "c2hvcDo4MDgw";
    q.sw8 = curl_sw8;
    q.sw8_len = strlen(curl_sw8);
    uint64_t ng = sw_trace_entry_start(&q, 2000);
    CHECK(ng);
    static uint8_t rq[8192], out[16384];
    uint8_t ps[2048];
    size_t n = 0, pn = 0;
    pn += fpair(ps + pn, "REQUEST_METHOD", "GET");
    pn += fpair(ps + pn, "REQUEST_URI", "/index.php?x=1");
    pn += fpair(ps + pn, "SCRIPT_NAME", "/index.php");
    pn += fpair(ps + pn, "HTTP_HOST", "shop:8080");
    pn += fpair(ps + pn, "REMOTE_ADDR", "127.0.0.1");
    pn += fpair(ps + pn, "REMOTE_PORT", "5000");
    pn += fpair(ps + pn, "HTTP_SW8", curl_sw8);
    n += frec(rq + n, 1, "\0\1\1\0\0\0\0\0", 8);
    n += frec(rq + n, 4, ps, pn);
    n += frec(rq + n, 4, "", 0);
    n += frec(rq + n, 5, "", 0);

    static struct sw_fcgi cl, sv;
    struct fctx cc = {.entry = false, .now = 2001, .parent = sw_trace_request_now()};
    sw_fcgi_init(&cl);
    sw_fcgi_feed(&cl, false, rq, n, fcgi_cb, &cc);
    CHECK(cc.rec_len > 8);
    size_t at = (size_t)cc.insert_off;
    memcpy(out, rq, at);
    memcpy(out + at, cc.rec, cc.rec_len);
    memcpy(out + at + cc.rec_len, rq + at, n - at);

    /* PHP-FPM (another process in life; its own segment here). */
    struct fctx sc = {.entry = true, .now = 2002};
    sw_fcgi_init(&sv);
    sw_fcgi_feed(&sv, false, out, n + cc.rec_len, fcgi_cb, &sc);
    uint8_t rs[512];
    size_t rn = 0;
    rn += frec(rs + rn, 6, "Status: 201 Created\r\nContent-Type: text/html\r\n\r\nhi", 51);
    rn += frec(rs + rn, 3, "\0\0\0\0\0\0\0\0", 8);
    sc.now = 2005;
    sw_fcgi_feed(&sv, true, rs, rn, fcgi_cb, &sc);
    cc.now = 2006;
    sw_fcgi_feed(&cl, true, rs, rn, fcgi_cb, &cc);
    sw_trace_entry_finish(ng, 201, 2007);

    struct tseg *s;
    CHECK_EQ(read_all(&s), 2);
    /* PHP-FPM's segment ends first. */
    CHECK_EQ(s[0].nspans, 1);
    const struct tspan *fpm = &s[0].spans[0];
    CHECK_EQ(s[1].nspans, 2);
    const struct tspan *fx = span_by_id(&s[1], 1);
    CHECK(fx);
    CHECK_EQ(fx->type, SW_SPAN_EXIT);
    CHECK_STR(fx->op, "GET:/index.php");
    CHECK_STR(fx->peer, "/run/php/fpm.sock");
    CHECK_STR(tag(fx, "http.status_code"), "201");
    CHECK_EQ(fx->start, 2001);
    CHECK_EQ(fx->end, 2006);
    CHECK_EQ(fpm->type, SW_SPAN_ENTRY);
    CHECK_STR(fpm->op, "GET:/index.php");
    CHECK_STR(fpm->peer, "127.0.0.1:5000");
    CHECK_STR(tag(fpm, "url"), "http://shop:8080/index.php?x=1");
    CHECK_STR(tag(fpm, "http.status_code"), "201");
    CHECK_EQ(fpm->start, 2002);
    CHECK_EQ(fpm->end, 2005);
    /* Its parent: nginx's FastCGI exit (not curl's span, forwarded before ours). */
    CHECK_EQ(fpm->nrefs, 1);
    CHECK_STR(fpm->ref_tid, s[1].tid);
    CHECK_STR(fpm->ref_psid, s[1].sid);
    CHECK_EQ(fpm->ref_pspan, 1);
    CHECK_STR(fpm->ref_addr, "/run/php/fpm.sock");
    CHECK_STR(fpm->ref_ep, "GET:/index.php");
    CHECK_STR(s[0].tid, "trace-curl");
    free_segs(s, 2);

    /* The connection ends before END_REQUEST: both spans end as errors. */
    setup();
    cc = (struct fctx){.entry = false, .now = 3000};
    sc = (struct fctx){.entry = true, .now = 3000};
    sw_fcgi_init(&cl);
    sw_fcgi_init(&sv);
    sw_fcgi_feed(&cl, false, rq, n, fcgi_cb, &cc);
    sw_fcgi_feed(&sv, false, rq, n, fcgi_cb, &sc);
    sw_fcgi_close(&cl, fcgi_cb, &cc);
    sw_fcgi_close(&sv, fcgi_cb, &sc);
    CHECK_EQ(read_all(&s), 2);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(s[i].spans[0].flags & SW_REC_SPAN_ERROR, SW_REC_SPAN_ERROR);
        CHECK_STR(s[i].spans[0].kv[1].v, "closed");
    }
    free_segs(s, 2);
}

/* The keys of the protocol modules (docs/configuration.md, "Protocol modules"): defaults, the
 * file, the environment, a value out of range refused (the default kept); the SQL keys are
 * plugin.jdbc.*, shared by MySQL and PostgreSQL, and the older plugin.mysql.* names are refused
 * (they change nothing). */
static void test_config_keys(void)
{
    struct sw_config c;
    (void)sw_config_load(&c, "", NULL); /* no file: -ENOENT, defaults and the environment */
    CHECK_EQ(c.sql_body_max_length, 2048);
    CHECK_EQ(c.sql_parameters_max_length, 512);
    CHECK(!c.trace_sql_parameters);
    CHECK(c.trace_mysql && c.trace_fastcgi && c.trace_redis && c.trace_postgresql &&
          c.trace_memcached);
    char path[600];
    snprintf(path, sizeof(path), "%s/keys.config", g_root);
    FILE *f = fopen(path, "w");
    CHECK(f);
    fputs("plugin.jdbc.sql_body_max_length=100\nplugin.jdbc.trace_sql_parameters=true\n"
          "plugin.jdbc.sql_parameters_max_length=5000\nswagent.trace_fastcgi=false\n"
          "plugin.mysql.sql_body_max_length=7\nplugin.mysql.trace_sql_parameters=false\n"
          "plugin.mysql.sql_parameters_max_length=9\n",
          f);
    fclose(f);
    setenv("SW_AGENT_TRACE_MYSQL", "false", 1);
    CHECK_EQ(sw_config_load(&c, path, NULL), 0);
    unsetenv("SW_AGENT_TRACE_MYSQL");
    CHECK_EQ(c.sql_body_max_length, 100);
    CHECK(c.trace_sql_parameters);
    CHECK_EQ(c.sql_parameters_max_length, 512); /* 5000 refused */
    CHECK(!c.trace_fastcgi);
    CHECK(!c.trace_mysql);
    CHECK(c.trace_redis && c.trace_postgresql && c.trace_memcached);
}

int main(void)
{
    char tmpl[] = "/tmp/swagent-proto-trace-XXXXXX";
    CHECK(mkdtemp(tmpl) != NULL);
    snprintf(g_root, sizeof(g_root), "%s", tmpl);
    atexit(cleanup);
    RUN_TEST(test_proto_db_exits);
    RUN_TEST(test_mysql_spans);
    RUN_TEST(test_fcgi_spans);
    RUN_TEST(test_config_keys);
    return 0;
}
