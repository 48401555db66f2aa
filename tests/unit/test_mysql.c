/*
 * test_mysql.c - the MySQL / MariaDB parser (agent/mysql.c): conversations built
 * byte by byte from the protocol documentation, fed whole, one byte at a time and in random
 * splits; each must give exactly the same events, and the expected ones.
 */
#include "check.h"
#include "evlog.h"
#include "mysql.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- a conversation */

struct chunk {
    bool server;
    uint8_t *p;
    size_t n;
};

struct conv {
    struct chunk c[64];
    int n;
};

static void conv_free(struct conv *cv)
{
    for (int i = 0; i < cv->n; i++)
        free(cv->c[i].p);
    cv->n = 0;
}

/* Appends one logical packet (split into 0xffffff-byte physical packets) to the last chunk of
 * the same direction, or a new chunk. */
static void pkt(struct conv *cv, bool server, uint8_t seq, const void *payload, size_t n)
{
    struct chunk *ch;
    if (cv->n > 0 && cv->c[cv->n - 1].server == server) {
        ch = &cv->c[cv->n - 1];
    } else {
        CHECK(cv->n < 64);
        ch = &cv->c[cv->n++];
        ch->server = server;
        ch->p = NULL;
        ch->n = 0;
    }
    size_t phys = n / 0xffffff + 1;
    ch->p = realloc(ch->p, ch->n + n + 4 * phys);
    CHECK(ch->p != NULL);
    const uint8_t *s = payload;
    size_t left = n;
    for (;;) {
        size_t k = left < 0xffffff ? left : 0xffffff;
        uint8_t *q = ch->p + ch->n;
        q[0] = (uint8_t)k;
        q[1] = (uint8_t)(k >> 8);
        q[2] = (uint8_t)(k >> 16);
        q[3] = seq++;
        memcpy(q + 4, s, k);
        ch->n += 4 + k;
        s += k;
        left -= k;
        if (k < 0xffffff)
            break;
    }
}

/* A packet from a string literal (embedded NULs allowed: the size is given). */
#define PKT(cv, server, seq, lit) pkt(cv, server, seq, lit, sizeof(lit) - 1)

/* ---------------------------------------------------------------- events */

struct log {
    struct evlog e; /* first: the log itself */
    uint64_t next;
};

static uint64_t on_ev(void *ctx, const struct sw_mysql_ev *ev)
{
    struct log *l = ctx;
    switch (ev->kind) {
    case SW_MYSQL_EV_BEGIN: {
        size_t show = ev->text_len < 40 ? ev->text_len : 40;
        evlog_add(&l->e, "B%02x:%.*s%s/%zu%s%.*s|", ev->cmd, (int)show, ev->text,
                  ev->text_cut ? "+" : "", ev->text_len, ev->params_len ? " p=" : "",
                  (int)ev->params_len, ev->params ? ev->params : "");
        return ++l->next;
    }
    case SW_MYSQL_EV_END:
        if (ev->error)
            evlog_add(&l->e, "E%02x#%llu:err %u %s %.*s%s%s|", ev->cmd,
                      (unsigned long long)ev->user, ev->err_code, ev->sqlstate, (int)ev->msg_len,
                      ev->msg ? ev->msg : "", ev->closed ? "closed" : "",
                      ev->reason ? " (given up)" : "");
        else
            evlog_add(&l->e, "E%02x#%llu:ok rows=%llu|", ev->cmd, (unsigned long long)ev->user,
                      (unsigned long long)ev->rows);
        return 0;
    case SW_MYSQL_EV_STOP:
        evlog_add(&l->e, "S:%s|", ev->reason);
        return 0;
    }
    return 0;
}

static struct sw_mysql g_m;

/* mode 0: whole chunks; 1: one byte at a time (small conversations); 2: random splits. */
static void run(const struct conv *cv, int mode, struct log *l, size_t text_max)
{
    memset(l, 0, sizeof(*l));
    sw_mysql_init(&g_m, text_max, 64);
    for (int i = 0; i < cv->n; i++) {
        const struct chunk *ch = &cv->c[i];
        size_t at = 0;
        while (at < ch->n) {
            size_t k = ch->n - at;
            if (mode == 1)
                k = 1;
            else if (mode == 2)
                k = 1 + evlog_rand(k < 64 ? k : (evlog_rand(4) ? 64 : k));
            sw_mysql_feed(&g_m, ch->server, ch->p + at, k, on_ev, l);
            at += k;
        }
    }
}

static void expect(const struct conv *cv, const char *want, size_t text_max, bool bytewise)
{
    struct log a, b;
    run(cv, 0, &a, text_max);
    if (strcmp(a.e.s, want) != 0) {
        fprintf(stderr, "got:  %s\nwant: %s\n", a.e.s, want);
        CHECK(0);
    }
    if (bytewise) {
        run(cv, 1, &b, text_max);
        CHECK_STR(b.e.s, want);
    }
    for (int r = 0; r < 20; r++) {
        run(cv, 2, &b, text_max);
        CHECK_STR(b.e.s, want);
    }
}

/* ---------------------------------------------------------------- handshake pieces */

#define CAPS_BASE 0x000fa285U /* LONG_PASSWORD..PROTOCOL_41, SECURE_CONN, MULTI_*, PLUGIN_AUTH */
#define DEPRECATE_EOF 0x01000000U
#define CONNECT_WITH_DB 0x8U
#define SSL 0x800U

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static void greeting(struct conv *cv, uint32_t caps)
{
    uint8_t g[128];
    size_t n = 0;
    g[n++] = 10;
    memcpy(g + n, "5.5.5-10.11.6-MariaDB", 22);
    n += 22;
    put32(g + n, 42); /* thread id */
    n += 4;
    memcpy(g + n, "abcdefgh", 8);
    n += 8;
    g[n++] = 0;
    g[n++] = (uint8_t)caps;
    g[n++] = (uint8_t)(caps >> 8);
    g[n++] = 45; /* charset */
    g[n++] = 2;  /* status */
    g[n++] = 0;
    g[n++] = (uint8_t)(caps >> 16);
    g[n++] = (uint8_t)(caps >> 24);
    g[n++] = 21;
    memset(g + n, 0, 10);
    n += 10;
    memcpy(g + n, "ijklmnopqrst", 13);
    n += 13;
    memcpy(g + n, "mysql_native_password", 22);
    n += 22;
    pkt(cv, true, 0, g, n);
}

static void response(struct conv *cv, uint32_t caps, const char *db)
{
    uint8_t r[128];
    memset(r, 0, sizeof(r));
    size_t n = 0;
    put32(r, caps | (db ? CONNECT_WITH_DB : 0));
    put32(r + 4, 1 << 24);
    r[8] = 45;
    n = 32;
    memcpy(r + n, "app", 4);
    n += 4;
    r[n++] = 20; /* auth data length */
    memset(r + n, 0x5a, 20);
    n += 20;
    if (db) {
        memcpy(r + n, db, strlen(db) + 1);
        n += strlen(db) + 1;
    }
    memcpy(r + n, "mysql_native_password", 22);
    n += 22;
    pkt(cv, false, 1, r, n);
}

/* Handshake with an auth switch round: the server asks for another plugin first. */
static void connect_(struct conv *cv, uint32_t caps, const char *db)
{
    greeting(cv, caps);
    response(cv, caps, db);
    PKT(cv, true, 2,
        "\xfe"
        "mysql_native_password\0"
        "0123456789abcdefghij");
    PKT(cv, false, 3, "0123456789abcdefghij");
    PKT(cv, true, 4, "\x00\x00\x00\x02\x00\x00\x00");
}

static void query(struct conv *cv, const char *sql)
{
    uint8_t b[4096];
    size_t n = strlen(sql);
    b[0] = 0x03;
    memcpy(b + 1, sql, n);
    pkt(cv, false, 0, b, n + 1);
}

/* ---------------------------------------------------------------- tests */

static void test_query_deprecate_eof(void)
{
    struct conv cv = {0};
    connect_(&cv, CAPS_BASE | DEPRECATE_EOF, "shop");
    query(&cv, "SELECT id, name FROM t");
    PKT(&cv, true, 1, "\x02");
    PKT(&cv, true, 2,
        "\x03"
        "def\x04shop\x01t\x01t\x02id\x02id\x0c\x3f\x00\x0b\x00\x00\x00\x03\x00\x00\x00\x00\x00");
    PKT(&cv, true, 3,
        "\x03"
        "def\x04shop\x01t\x01t\x04name\x04name\x0c\x2d\x00\x80\x00\x00\x00\xfd\x00\x00\x00\x00"
        "\x00");
    PKT(&cv, true, 4,
        "\x01"
        "1\x03"
        "abc");
    PKT(&cv, true, 5,
        "\x01"
        "2\xfb");
    PKT(&cv, true, 6, "\xfe\x00\x00\x02\x00\x00\x00");
    PKT(&cv, false, 0, "\x0e"); /* COM_PING */
    PKT(&cv, true, 1, "\x00\x00\x00\x02\x00\x00\x00");
    expect(&cv, "B03:SELECT id, name FROM t/22|E03#1:ok rows=2|B0e:/0|E0e#2:ok rows=0|", 2048,
           true);
    size_t dl;
    const char *db = sw_mysql_db(&g_m, &dl);
    CHECK_EQ(dl, 4);
    CHECK(memcmp(db, "shop", 4) == 0);
    CHECK(!sw_mysql_stopped(&g_m));
    conv_free(&cv);
}

static void test_query_eof_multi_results(void)
{
    struct conv cv = {0};
    connect_(&cv, CAPS_BASE, NULL);
    query(&cv, "CALL p()");
    /* result 1: one column, one row, EOF with SERVER_MORE_RESULTS_EXISTS */
    PKT(&cv, true, 1, "\x01");
    PKT(&cv, true, 2,
        "\x03"
        "def\x00\x00\x00\x01"
        "a\x01"
        "a\x0c\x3f\x00\x0b\x00\x00\x00\x03\x00\x00\x00\x00\x00");
    PKT(&cv, true, 3, "\xfe\x00\x00\x0a\x00");
    PKT(&cv, true, 4,
        "\x01"
        "7");
    PKT(&cv, true, 5, "\xfe\x00\x00\x0a\x00");
    /* result 2: the procedure's final OK */
    PKT(&cv, true, 6, "\x00\x00\x00\x02\x00\x00\x00");
    query(&cv, "SELECT * FROM nope");
    PKT(&cv, true, 1, "\xff\x7a\x04#42S02Table 'shop.nope' doesn't exist");
    expect(&cv,
           "B03:CALL p()/8|E03#1:ok rows=1|B03:SELECT * FROM nope/18|"
           "E03#2:err 1146 42S02 Table 'shop.nope' doesn't exist|",
           2048, true);
    size_t dl;
    sw_mysql_db(&g_m, &dl);
    CHECK_EQ(dl, 0);
    conv_free(&cv);
}

static void test_prepared(void)
{
    struct conv cv = {0};
    connect_(&cv, CAPS_BASE, "shop");
    PKT(&cv, false, 0, "\x16SELECT ? + ?");
    /* stmt id 7, 1 column, 2 params */
    PKT(&cv, true, 1, "\x00\x07\x00\x00\x00\x01\x00\x02\x00\x00\x00\x00");
    PKT(&cv, true, 2,
        "\x03"
        "def\x00\x00\x00\x01?\x00\x0c\x3f\x00\x00\x00\x00\x00\xfd\x80\x00\x00\x00\x00");
    PKT(&cv, true, 3,
        "\x03"
        "def\x00\x00\x00\x01?\x00\x0c\x3f\x00\x00\x00\x00\x00\xfd\x80\x00\x00\x00\x00");
    PKT(&cv, true, 4, "\xfe\x00\x00\x02\x00");
    PKT(&cv, true, 5,
        "\x03"
        "def\x00\x00\x00\x05? + ?\x00\x0c\x3f\x00\x00\x00\x00\x00\x05\x80\x00\x00\x00\x00");
    PKT(&cv, true, 6, "\xfe\x00\x00\x02\x00");
    /* execute 7: two longlong params, binary result of one row */
    PKT(&cv, false, 0,
        "\x17\x07\x00\x00\x00\x00\x01\x00\x00\x00\x00\x01\x08\x00\x08\x00"
        "\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00");
    PKT(&cv, true, 1, "\x01");
    PKT(&cv, true, 2,
        "\x03"
        "def\x00\x00\x00\x05? + ?\x00\x0c\x3f\x00\x00\x00\x00\x00\x05\x80\x00\x00\x00\x00");
    PKT(&cv, true, 3, "\xfe\x00\x00\x02\x00");
    PKT(&cv, true, 4, "\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00");
    PKT(&cv, true, 5, "\xfe\x00\x00\x02\x00");
    /* close 7 (no response), then an execute of 7 has no text */
    PKT(&cv, false, 0, "\x19\x07\x00\x00\x00");
    PKT(&cv, false, 0, "\x17\x07\x00\x00\x00\x00\x01\x00\x00\x00");
    PKT(&cv, true, 1, "\xff\xf3\x00#HY000Unknown prepared statement handler");
    expect(&cv,
           "B16:SELECT ? + ?/12|E16#1:ok rows=0|B17:SELECT ? + ?/12 p=[1,2]|E17#2:ok rows=1|B17:/0|"
           "E17#3:err 243 HY000 Unknown prepared statement handler|",
           2048, true);
    conv_free(&cv);
}

/* plugin.jdbc.trace_sql_parameters: the values of an execution, by their binary types; the
 * types remembered for an execute that does not send them again; cut at the limit. */
static void test_exec_params(void)
{
    struct conv cv = {0};
    connect_(&cv, CAPS_BASE | DEPRECATE_EOF, NULL);
    PKT(&cv, false, 0, "\x16INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)");
    PKT(&cv, true, 1, "\x00\x05\x00\x00\x00\x00\x00\x06\x00\x00\x00\x00");
    for (uint8_t i = 2; i < 8; i++)
        PKT(&cv, true, i, "\x03" "def\x00\x00\x00\x01?\x00\x0c\x3f\x00\x00\x00\x00\x00\xfd\x80\x00\x00\x00\x00");
    /* -5 (LONGLONG), "plum" (VAR_STRING), NULL, 2.5 (DOUBLE), 2024-01-02 03:04:05 (DATETIME),
     * 200 (TINY unsigned) */
    PKT(&cv, false, 0,
        "\x17\x05\x00\x00\x00\x00\x01\x00\x00\x00" "\x04" "\x01"
        "\x08\x00\xfd\x00\x06\x00\x05\x00\x0c\x00\x01\x80"
        "\xfb\xff\xff\xff\xff\xff\xff\xff" "\x04plum" "\x00\x00\x00\x00\x00\x00\x04\x40"
        "\x07\xe8\x07\x01\x02\x03\x04\x05" "\xc8");
    PKT(&cv, true, 1, "\x00\x01\x00\x02\x00\x00\x00");
    /* again without the types (new-params-bound 0): the ones sent before */
    PKT(&cv, false, 0,
        "\x17\x05\x00\x00\x00\x00\x01\x00\x00\x00" "\x00" "\x00"
        "\x07\x00\x00\x00\x00\x00\x00\x00" "\x02" "ab" "\x00\x00\x00\x00\x00\x00\x00\x00"
        "\x00" "\x01");
    PKT(&cv, true, 1, "\x00\x01\x00\x02\x00\x00\x00");
    expect(&cv,
           "B16:INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)/39|E16#1:ok rows=0|"
           "B17:INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)/39 p=[-5,plum,NULL,2.5,2024-01-02 03:04:05,200]|"
           "E17#2:ok rows=0|B17:INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)/39 p=[7,ab,NULL,0,0000-00-00,1]|"
           "E17#3:ok rows=0|",
           2048, true);
    /* a limit of 16 bytes: cut with "..." */
    struct log l;
    memset(&l, 0, sizeof(l));
    sw_mysql_init(&g_m, 2048, 16);
    for (int i = 0; i < cv.n; i++)
        sw_mysql_feed(&g_m, cv.c[i].server, cv.c[i].p, cv.c[i].n, on_ev, &l);
    CHECK(strstr(l.e.s, " p=[-5,plum,NULL,2....|") != NULL);
    conv_free(&cv);
}

/* MariaDB's execute direct: PREPARE and EXECUTE(-1) pipelined before any response. */
static void test_pipelined_direct(void)
{
    struct conv cv = {0};
    connect_(&cv, CAPS_BASE | DEPRECATE_EOF, NULL);
    PKT(&cv, false, 0,
        "\x16"
        "INSERT INTO t VALUES (?)");
    PKT(&cv, false, 0, "\x17\xff\xff\xff\xff\x00\x01\x00\x00\x00\x00\x01\x03\x00\x05\x00\x00\x00");
    PKT(&cv, true, 1, "\x00\x09\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00");
    PKT(&cv, true, 2,
        "\x03"
        "def\x00\x00\x00\x01?\x00\x0c\x3f\x00\x00\x00\x00\x00\xfd\x80\x00\x00\x00\x00");
    PKT(&cv, true, 1, "\x00\x01\x00\x02\x00\x00\x00");
    PKT(&cv, false, 0, "\x17\x09\x00\x00\x00\x00\x01\x00\x00\x00\x00\x01\x03\x00\x06\x00\x00\x00");
    PKT(&cv, true, 1, "\x00\x01\x00\x02\x00\x00\x00");
    expect(&cv,
           "B16:INSERT INTO t VALUES (?)/24|B17:INSERT INTO t VALUES (?)/24|E16#1:ok rows=0|"
           "E17#2:ok rows=0|B17:INSERT INTO t VALUES (?)/24 p=[6]|E17#3:ok rows=0|",
           2048, true);
    conv_free(&cv);
}

static void test_init_db_infile(void)
{
    struct conv cv = {0};
    connect_(&cv, CAPS_BASE | DEPRECATE_EOF, "a");
    PKT(&cv, false, 0,
        "\x02"
        "bee");
    PKT(&cv, true, 1, "\x00\x00\x00\x02\x00\x00\x00");
    PKT(&cv, false, 0,
        "\x02"
        "nope");
    PKT(&cv, true, 1, "\xff\x19\x04#42000Unknown database 'nope'");
    query(&cv, "LOAD DATA LOCAL INFILE 'x' INTO TABLE t");
    PKT(&cv, true, 1, "\xfbx");
    PKT(&cv, false, 2, "1\n2\n");
    PKT(&cv, false, 3, "3\n");
    PKT(&cv, false, 4, "");
    PKT(&cv, true, 5, "\x00\x03\x00\x02\x00\x00\x00");
    expect(&cv,
           "B02:bee/3|E02#1:ok rows=0|B02:nope/4|E02#2:err 1049 42000 Unknown database 'nope'|"
           "B03:LOAD DATA LOCAL INFILE 'x' INTO TABLE t/39|E03#3:ok rows=0|",
           2048, true);
    size_t dl;
    const char *db = sw_mysql_db(&g_m, &dl);
    CHECK_EQ(dl, 3);
    CHECK(memcmp(db, "bee", 3) == 0);
    conv_free(&cv);
}

static void test_ssl_and_garbage(void)
{
    struct conv cv = {0};
    greeting(&cv, CAPS_BASE | SSL);
    uint8_t r[32] = {0};
    put32(r, CAPS_BASE | SSL);
    pkt(&cv, false, 1, r, 32);
    PKT(&cv, false, 2, "\x16\x03\x01 tls bytes, not a packet");
    expect(&cv, "S:TLS (SSLRequest): the bytes after are encrypted|", 2048, true);
    conv_free(&cv);

    PKT(&cv, false, 0, "GET / HTTP/1.1\r\n\r\n");
    expect(&cv, "S:the client spoke first: not MySQL|", 2048, true);
    conv_free(&cv);

    PKT(&cv, true, 0, "HTTP/1.1 200 OK\r\n");
    expect(&cv, "S:not a MySQL handshake|", 2048, true);
    conv_free(&cv);

    /* a command whose framing is not followed (COM_BINLOG_DUMP) stops; the one before ends */
    connect_(&cv, CAPS_BASE, NULL);
    query(&cv, "SELECT 1");
    PKT(&cv, false, 0, "\x12\x04\x00\x00\x00");
    expect(&cv, "B03:SELECT 1/8|E03#1:err 0  closed (given up)|S:a command whose response is not followed|",
           2048, true);
    conv_free(&cv);
}

/* A statement longer than the limit is reported cut, as soon as the limit is reached; packets
 * of 16 MiB and more (a statement, and a row starting with 0xfe) frame as one. */
static void test_big(void)
{
    struct conv cv = {0};
    connect_(&cv, CAPS_BASE | DEPRECATE_EOF, NULL);
    size_t n = 0xffffff + 100;
    uint8_t *q = malloc(n);
    CHECK(q != NULL);
    q[0] = 0x03;
    memset(q + 1, 'x', n - 1);
    memcpy(q + 1, "INSERT INTO blob VALUES ('", 26);
    pkt(&cv, false, 0, q, n);
    PKT(&cv, true, 1, "\x00\x01\x00\x02\x00\x00\x00");
    query(&cv, "SELECT b FROM blob");
    PKT(&cv, true, 1, "\x01");
    PKT(&cv, true, 2,
        "\x03"
        "def\x00\x00\x00\x01"
        "b\x01"
        "b\x0c\x3f\x00\xff\xff\xff\xff\xfc\x90\x00\x00\x00\x00");
    /* a row: one value of 0xffffff + 50 bytes (lenenc 0xfe + 8 bytes) */
    size_t vl = 0xffffff + 50;
    q = realloc(q, vl + 9);
    CHECK(q != NULL);
    q[0] = 0xfe;
    for (int i = 0; i < 8; i++)
        q[1 + i] = (uint8_t)((uint64_t)vl >> (8 * i));
    memset(q + 9, 'y', vl);
    pkt(&cv, true, 3, q, vl + 9);
    PKT(&cv, true, 5, "\xfe\x00\x00\x02\x00\x00\x00");
    free(q);
    expect(&cv,
           "B03:INSERT INTO blob VALUES ('xxxxxxxxxxxxxx+/100|E03#1:ok rows=0|"
           "B03:SELECT b FROM blob/18|E03#2:ok rows=1|",
           100, false);
    conv_free(&cv);
}

/* The connection ends while a command waits: END closed; the query attributes prefix. */
static void test_close_and_attrs(void)
{
    struct conv cv = {0};
    connect_(&cv, CAPS_BASE | DEPRECATE_EOF | 0x08000000u, NULL);
    PKT(&cv, false, 0, "\x03\x00\x01SELECT 2");
    struct log l;
    run(&cv, 0, &l, 2048);
    sw_mysql_close(&g_m, on_ev, &l);
    CHECK_STR(l.e.s, "B03:SELECT 2/8|E03#1:err 0  closed|");
    conv_free(&cv);
}

/* Random bytes after a good handshake, and random conversations: no crash, bounded. */
static void test_garbage_fuzz(void)
{
    uint8_t buf[4096];
    for (int round = 0; round < 2000; round++) {
        struct conv cv = {0};
        connect_(&cv, CAPS_BASE | (round & 1 ? DEPRECATE_EOF : 0), "x");
        size_t n = evlog_rand(sizeof(buf));
        for (size_t i = 0; i < n; i++)
            buf[i] = (uint8_t)evlog_rand(256);
        pkt(&cv, round & 2, 0, buf, n);
        struct log l;
        run(&cv, 2, &l, 64);
        conv_free(&cv);
    }
}

int main(void)
{
    RUN_TEST(test_query_deprecate_eof);
    RUN_TEST(test_query_eof_multi_results);
    RUN_TEST(test_prepared);
    RUN_TEST(test_exec_params);
    RUN_TEST(test_pipelined_direct);
    RUN_TEST(test_init_db_infile);
    RUN_TEST(test_ssl_and_garbage);
    RUN_TEST(test_big);
    RUN_TEST(test_close_and_attrs);
    RUN_TEST(test_garbage_fuzz);
    return 0;
}
