/*
 * test_dbproto.c - the Redis, PostgreSQL and memcached parsers (agent/proto_*.c): conversations
 * fed whole, one byte at a time and at random splits must give exactly the expected events.
 */
#include "common.h"

#include "check.h"
#include "config.h"
#include "proto_memcached.h"
#include "proto_pg.h"
#include "proto_redis.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum proto { REDIS, PG, MC };

union pstate {
    struct sw_redis r;
    struct sw_pg p;
    struct sw_mc m;
};

static union pstate g_st;
static bool g_params;

struct step {
    int dir; /* SW_DB_TO_SERVER or SW_DB_TO_CLIENT */
    const char *bytes;
    size_t len; /* 0: strlen */
};

#define LOG_MAX 8192

static void reset(enum proto pr)
{
    if (pr == REDIS)
        sw_redis_reset(&g_st.r);
    else if (pr == PG)
        sw_pg_reset(&g_st.p, g_params);
    else
        sw_mc_reset(&g_st.m);
}

static size_t feed(enum proto pr, int dir, const uint8_t *b, size_t n, struct sw_db_ev *ev)
{
    if (pr == REDIS)
        return sw_redis_feed(&g_st.r, (enum sw_db_dir)dir, b, n, ev);
    if (pr == PG)
        return sw_pg_feed(&g_st.p, (enum sw_db_dir)dir, b, n, ev);
    return sw_mc_feed(&g_st.m, (enum sw_db_dir)dir, b, n, ev);
}

static void app(char *log, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void app(char *log, const char *fmt, ...)
{
    size_t at = strlen(log);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(log + at, LOG_MAX - at, fmt, ap);
    va_end(ap);
}

static void log_ev(char *log, const struct sw_db_ev *ev)
{
    static const char *ops[] = {"-", "r", "w"};
    switch (ev->type) {
    case SW_DB_EV_START:
        app(log, "S %.*s|%.*s%s|%s", (int)ev->name_len, ev->name, (int)ev->text_len, ev->text,
            ev->text_cut ? "+" : "", ops[ev->op]);
        if (ev->params)
            app(log, "|p=%.*s", (int)ev->params_len, ev->params);
        app(log, "\n");
        break;
    case SW_DB_EV_END:
        if (ev->skipped)
            app(log, "E skip\n");
        else if (ev->error)
            app(log, "E err %s %.*s\n", ev->code, (int)ev->msg_len, ev->msg);
        else
            app(log, "E ok\n");
        break;
    case SW_DB_EV_GIVEUP:
        app(log, "G\n");
        break;
    default:
        break;
    }
}

/* Feeds one step in pieces of the sizes chosen by `split` (0: whole). */
static bool feed_step(enum proto pr, const struct step *s, int mode, unsigned *seed, char *log)
{
    size_t len = s->len ? s->len : strlen(s->bytes);
    const uint8_t *b = (const uint8_t *)s->bytes;
    size_t at = 0;
    while (at < len || (at == len && len == 0)) {
        size_t piece = len - at;
        if (mode == 1)
            piece = piece ? 1 : 0;
        else if (mode == 2 && piece > 1)
            piece = 1 + (size_t)(rand_r(seed) % (unsigned)piece);
        size_t off = 0;
        for (int guard = 0; guard < 100000; guard++) {
            struct sw_db_ev ev;
            size_t used = feed(pr, s->dir, b + at + off, piece - off, &ev);
            CHECK(used <= piece - off);
            off += used;
            if (ev.type == SW_DB_EV_NONE) {
                CHECK(off == piece);
                break;
            }
            log_ev(log, &ev);
            if (ev.type == SW_DB_EV_GIVEUP)
                return false;
        }
        at += piece;
        if (len == 0)
            break;
    }
    return true;
}

static void run(enum proto pr, const struct step *steps, size_t n, const char *want)
{
    for (int mode = 0; mode < 3; mode++) {
        for (unsigned rep = 0; rep < (mode == 2 ? 20u : 1u); rep++) {
            unsigned seed = rep * 7919u + 1u;
            char log[LOG_MAX] = "";
            reset(pr);
            for (size_t i = 0; i < n; i++)
                if (!feed_step(pr, &steps[i], mode, &seed, log))
                    break;
            if (strcmp(log, want) != 0) {
                fprintf(stderr, "mode %d rep %u:\n--- got\n%s--- want\n%s", mode, rep, log, want);
                exit(1);
            }
        }
    }
}

#define C SW_DB_TO_SERVER
#define R SW_DB_TO_CLIENT
#define RUN(pr, want, ...)                                                                         \
    do {                                                                                           \
        const struct step st_[] = {__VA_ARGS__};                                                   \
        run(pr, st_, SW_ARRAY_LEN(st_), want);                                                     \
    } while (0)

/* ---------------------------------------------------------------- Redis */

static void test_redis_basic(void)
{
    RUN(REDIS, "S SET|foo|w\nE ok\nS GET|foo|r\nE ok\nS GET|nokey|r\nE ok\n",
        {C, "*3\r\n$3\r\nset\r\n$3\r\nfoo\r\n$3\r\nbar\r\n"}, {R, "+OK\r\n"},
        {C, "*2\r\n$3\r\nGET\r\n$3\r\nfoo\r\n"}, {R, "$3\r\nbar\r\n"},
        {C, "*2\r\n$3\r\nGET\r\n$5\r\nnokey\r\n"}, {R, "$-1\r\n"});
    /* an error reply marks the span */
    RUN(REDIS, "S INCR|s|w\nE err  ERR value is not an integer or out of range\n",
        {C, "*2\r\n$4\r\nINCR\r\n$1\r\ns\r\n"},
        {R, "-ERR value is not an integer or out of range\r\n"});
    /* inline commands, empty lines ignored */
    RUN(REDIS, "S PING||-\nS GET|k|r\nE ok\nE ok\n", {C, "\r\nPING\r\nget k\n"},
        {R, "+PONG\r\n$1\r\nv\r\n"});
    /* secrets are not keys */
    RUN(REDIS, "S AUTH||-\nE ok\n", {C, "*2\r\n$4\r\nAUTH\r\n$6\r\nsecret\r\n"}, {R, "+OK\r\n"});
}

static void test_redis_pipeline(void)
{
    /* a pipeline of three, replies in one read, one of them nested */
    RUN(REDIS, "S SET|a|w\nS LRANGE|l|r\nS GET|b|r\nE ok\nE ok\nE ok\n",
        {C, "*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n*4\r\n$6\r\nLRANGE\r\n$1\r\nl\r\n$1\r\n0\r\n"
            "$2\r\n-1\r\n*2\r\n$3\r\nGET\r\n$1\r\nb\r\n"},
        {R, "+OK\r\n*2\r\n$1\r\nx\r\n*1\r\n:5\r\n$-1\r\n"});
    /* MULTI/EXEC: every command has a reply */
    RUN(REDIS, "S MULTI||-\nS INCR|c|w\nS EXEC||-\nE ok\nE ok\nE ok\n",
        {C, "*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR\r\n$1\r\nc\r\n*1\r\n$4\r\nEXEC\r\n"},
        {R, "+OK\r\n+QUEUED\r\n*1\r\n:1\r\n"});
    /* a key longer than cache.key's limit is cut */
    char cmd[512], want[256];
    memset(want, 0, sizeof(want));
    snprintf(cmd, sizeof(cmd), "*2\r\n$3\r\nGET\r\n$200\r\n%0200d\r\n", 0);
    snprintf(want, sizeof(want), "S GET|%0128d+|r\nE ok\n", 0);
    RUN(REDIS, want, {C, cmd}, {R, "$-1\r\n"});
}

static void test_redis_resp3(void)
{
    /* HELLO 3: a map reply; attributes and pushes are no replies */
    RUN(REDIS, "S HELLO||-\nE ok\nS GET|k|r\nE ok\nS DEL|k|w\nE err  WRONG\n",
        {C, "*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n"}, {R, "%2\r\n+server\r\n+redis\r\n+proto\r\n:3\r\n"},
        {C, "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"},
        {R, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n|1\r\n+ttl\r\n:3\r\n=7\r\ntxt:abc\r\n"},
        {C, "*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n"}, {R, "!5\r\nWRONG\r\n"});
    /* other RESP3 scalars and sets */
    RUN(REDIS, "S X||-\nS Y||-\nS Z||-\nE ok\nE ok\nE ok\n", {C, "X\r\nY\r\nZ\r\n"},
        {R, "_\r\n~2\r\n,1.5\r\n#t\r\n(123456789012345678901234567890\r\n"});
    /* streamed values cannot be framed */
    RUN(REDIS, "S GET|k|r\nG\n", {C, "GET k\r\n"}, {R, "$?\r\n;4\r\nabcd\r\n;0\r\n"});
}

static void test_redis_pubsub(void)
{
    /* RESP2: SUBSCRIBE a b gives two confirmations, messages are pushes, PING in subscribed
     * mode is a reply, UNSUBSCRIBE to zero leaves the mode */
    RUN(REDIS,
        "S SUBSCRIBE|a|-\nE ok\nS PING||-\nE ok\nS UNSUBSCRIBE||-\nE ok\nS LRANGE|l|r\nE ok\n",
        {C, "*3\r\n$9\r\nSUBSCRIBE\r\n$1\r\na\r\n$1\r\nb\r\n"},
        {R, "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n"},
        {R, "*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$2\r\nhi\r\n"}, {C, "*1\r\n$4\r\nPING\r\n"},
        {R, "*2\r\n$4\r\npong\r\n$0\r\n\r\n"},
        {R, "*3\r\n$7\r\nmessage\r\n$1\r\nb\r\n$2\r\nho\r\n"}, {C, "*1\r\n$11\r\nUNSUBSCRIBE\r\n"},
        {R, "*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n"
            ":0\r\n"},
        /* out of pub/sub: an array starting with "message" is a reply */
        {C, "*4\r\n$6\r\nLRANGE\r\n$1\r\nl\r\n$1\r\n0\r\n$2\r\n-1\r\n"},
        {R, "*2\r\n$7\r\nmessage\r\n$1\r\nx\r\n"});
    /* RESP3: confirmations and messages are pushes */
    RUN(REDIS, "S SUBSCRIBE|a|-\nE ok\nS GET|k|r\nE ok\n",
        {C, "*2\r\n$9\r\nSUBSCRIBE\r\n$1\r\na\r\n"},
        {R,
         ">3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n>3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\nm\r\n"},
        {C, "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"},
        {R, ">3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\nm\r\n*2\r\n$7\r\nmessage\r\n$1\r\nx\r\n"});
}

static void test_redis_giveup(void)
{
    /* MONITOR: its +OK ends it, then the stream is not followed */
    RUN(REDIS, "S MONITOR||-\nE ok\nG\n", {C, "*1\r\n$7\r\nMONITOR\r\n"},
        {R, "+OK\r\n+1700000000.123 [0 127.0.0.1:1] \"GET\" \"x\"\r\n"});
    RUN(REDIS, "G\n", {C, "*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$3\r\nOFF\r\n"});
    RUN(REDIS, "S CLIENT|REPLY|-\nE ok\n", {C, "*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$2\r\nON\r\n"},
        {R, "+OK\r\n"});
    RUN(REDIS, "G\n", {C, "PSYNC ? -1\r\n"});
    /* a reply nobody asked for, garbage, a bulk not ended by CRLF */
    RUN(REDIS, "G\n", {R, "+OK\r\n"});
    RUN(REDIS, "S GET|k|r\nG\n", {C, "GET k\r\n"}, {R, "hello\r\n"});
    RUN(REDIS, "G\n", {C, "*1\r\n$3\r\nGETX\r\n"});
    RUN(REDIS, "S GET|k|r\nG\n", {C, "GET k\r\n"}, {R, "$1\r\nab\r\n"});
    /* binary keys are kept as they are */
    RUN(REDIS, "S GET|a\x01\xff|r\nE ok\n", {C, "*2\r\n$3\r\nGET\r\n$3\r\na\x01\xff\r\n"},
        {R, "$-1\r\n"});
}

static void test_redis_table(void)
{
    sw_redis_init(NULL);
    CHECK_EQ(sw_redis_cmd_op("get", 3), SW_DB_OP_READ);
    CHECK_EQ(sw_redis_cmd_op("HSET", 4), SW_DB_OP_WRITE);
    CHECK_EQ(sw_redis_cmd_op("PING", 4), SW_DB_OP_NONE);
    struct sw_config cfg;
    sw_config_defaults(&cfg);
    cfg.redis_op_read.n = 1;
    strcpy(cfg.redis_op_read.item[0], "ping");
    sw_redis_init(&cfg);
    CHECK_EQ(sw_redis_cmd_op("PING", 4), SW_DB_OP_READ);
    CHECK_EQ(sw_redis_cmd_op("GET", 3), SW_DB_OP_NONE); /* the read list replaced */
    CHECK_EQ(sw_redis_cmd_op("SET", 3), SW_DB_OP_WRITE);
    sw_redis_init(NULL);
}

/* ---------------------------------------------------------------- PostgreSQL */

/* Builds a v3 message: type, length, body (body given with its NULs as len). */
static size_t pgmsg(char *out, char type, const char *body, size_t n)
{
    size_t at = 0;
    if (type)
        out[at++] = type;
    uint32_t l = (uint32_t)n + 4 + (type ? 0 : 0);
    out[at++] = (char)(l >> 24);
    out[at++] = (char)(l >> 16);
    out[at++] = (char)(l >> 8);
    out[at++] = (char)l;
    memcpy(out + at, body, n);
    return at + n;
}

static const char k_startup[] = "\0\0\0\x20\0\x03\0\0user\0bob\0database\0shop\0\0";
#define STARTUP_LEN 32
static const char k_auth_ok[] = "R\0\0\0\x08\0\0\0\0Z\0\0\0\x05I";

static void test_pg_simple(void)
{
    char q[256], err[256], cc[64];
    size_t ql = pgmsg(q, 'Q', "SELECT 1\0", 9);
    size_t el = pgmsg(err, 'E', "SERROR\0C42P01\0Mrelation \"x\" does not exist\0\0", 44);
    size_t cl = pgmsg(cc, 'C', "SELECT 1\0", 9);
    char reply[512];
    size_t rl = 0;
    rl += pgmsg(reply + rl, 'T', "\0\0", 2);
    rl += pgmsg(reply + rl, 'D',
                "\0\x01\0\0\0\x01"
                "1",
                7);
    memcpy(reply + rl, cc, cl);
    rl += cl;
    rl += pgmsg(reply + rl, 'Z', "I", 1);
    char reply2[256];
    size_t r2 = 0;
    memcpy(reply2, err, el);
    r2 += el;
    r2 += pgmsg(reply2 + r2, 'Z', "I", 1);
    RUN(PG,
        "S Query|SELECT 1|-\nE ok\nS Query|SELECT 1|-\nE err 42P01 relation \"x\" does not exist\n",
        {C, k_startup, STARTUP_LEN}, {R, k_auth_ok, 15}, {C, q, ql}, {R, reply, rl}, {C, q, ql},
        {R, reply2, r2});
    size_t dl;
    sw_pg_reset(&g_st.p, false);
    struct sw_db_ev ev;
    sw_pg_feed(&g_st.p, C, (const uint8_t *)k_startup, STARTUP_LEN, &ev);
    CHECK_STR(sw_pg_database(&g_st.p, &dl), "shop");
    CHECK_EQ(dl, 4);
}

static void test_pg_ssl(void)
{
    static const char sslreq[] = "\0\0\0\x08\x04\xd2\x16\x2f";
    char q[64];
    size_t ql = pgmsg(q, 'Q', "BEGIN\0", 6);
    char z[64];
    size_t zl = pgmsg(z, 'C', "BEGIN\0", 6);
    zl += pgmsg(z + zl, 'Z', "T", 1);
    /* refused: the startup message follows in clear */
    RUN(PG, "S Query|BEGIN|-\nE ok\n", {C, sslreq, 8}, {R, "N", 1}, {C, k_startup, STARTUP_LEN},
        {R, k_auth_ok, 15}, {C, q, ql}, {R, z, zl});
    /* accepted: TLS follows */
    RUN(PG, "G\n", {C, sslreq, 8}, {R, "S", 1}, {C, "\x16\x03\x01\x02\x00", 5});
    /* CancelRequest, a direct TLS handshake */
    RUN(PG, "G\n", {C, "\0\0\0\x10\x04\xd2\x16\x2e\0\0\0\x01\0\0\0\x02", 16});
    RUN(PG, "G\n", {C, "\x16\x03\x01\x02\x00\x01\0\0", 8});
}

static void test_pg_extended(void)
{
    char c[1024], r[1024];
    size_t cl = 0, rl = 0;
    /* named statement s1, two executes pipelined, one Sync */
    cl += pgmsg(c + cl, 'P', "s1\0SELECT $1::int\0\0\0", 20);
    cl += pgmsg(c + cl, 'B',
                "\0s1\0\0\0\0\x01\0\0\0\x02"
                "42\0\0",
                17);
    cl += pgmsg(c + cl, 'E', "\0\0\0\0\0", 5);
    cl += pgmsg(c + cl, 'B', "\0s1\0\0\0\0\x01\xff\xff\xff\xff\0\0", 15);
    cl += pgmsg(c + cl, 'E', "\0\0\0\0\0", 5);
    cl += pgmsg(c + cl, 'S', "", 0);
    rl += pgmsg(r + rl, '1', "", 0);
    rl += pgmsg(r + rl, '2', "", 0);
    rl += pgmsg(r + rl, 'D',
                "\0\x01\0\0\0\x02"
                "42",
                8);
    rl += pgmsg(r + rl, 'C', "SELECT 1\0", 9);
    rl += pgmsg(r + rl, '2', "", 0);
    rl += pgmsg(r + rl, 'C', "SELECT 1\0", 9);
    rl += pgmsg(r + rl, 'Z', "I", 1);
    RUN(PG, "S Execute|SELECT $1::int|-\nS Execute|SELECT $1::int|-\nE ok\nE ok\n",
        {C, k_startup, STARTUP_LEN}, {R, k_auth_ok, 15}, {C, c, cl}, {R, r, rl});
    g_params = true;
    RUN(PG, "S Execute|SELECT $1::int|-|p=[42]\nS Execute|SELECT $1::int|-|p=[null]\nE ok\nE ok\n",
        {C, k_startup, STARTUP_LEN}, {R, k_auth_ok, 15}, {C, c, cl}, {R, r, rl});
    g_params = false;
    /* an error in the first Execute: the second is skipped until Sync */
    size_t el = 0;
    char e[512];
    el += pgmsg(e + el, '1', "", 0);
    el += pgmsg(e + el, '2', "", 0);
    el += pgmsg(e + el, 'E', "SERROR\0C22012\0Mdivision by zero\0\0", 33);
    el += pgmsg(e + el, 'Z', "I", 1);
    RUN(PG,
        "S Execute|SELECT $1::int|-\nS Execute|SELECT $1::int|-\nE err 22012 division by "
        "zero\nE skip\n",
        {C, k_startup, STARTUP_LEN}, {R, k_auth_ok, 15}, {C, c, cl}, {R, e, el});
    /* the error comes before the client sent its next Execute and Sync: that Execute is not
     * run by the server (it skips to Sync) and ends at once */
    {
        char c1[256], r1[256], c2[256], r2[64];
        size_t c1l = 0, r1l = 0, c2l = 0, r2l = 0;
        c1l += pgmsg(c1 + c1l, 'P', "s1\0SELECT $1::int\0\0\0", 20);
        c1l += pgmsg(c1 + c1l, 'B',
                     "\0s1\0\0\0\0\x01\0\0\0\x01"
                     "0\0\0",
                     16);
        c1l += pgmsg(c1 + c1l, 'E', "\0\0\0\0\0", 5);
        r1l += pgmsg(r1 + r1l, '1', "", 0);
        r1l += pgmsg(r1 + r1l, '2', "", 0);
        r1l += pgmsg(r1 + r1l, 'E', "SERROR\0C22012\0Mdivision by zero\0\0", 33);
        c2l += pgmsg(c2 + c2l, 'B',
                     "\0s1\0\0\0\0\x01\0\0\0\x01"
                     "1\0\0",
                     16);
        c2l += pgmsg(c2 + c2l, 'E', "\0\0\0\0\0", 5);
        c2l += pgmsg(c2 + c2l, 'S', "", 0);
        r2l += pgmsg(r2 + r2l, 'Z', "I", 1);
        RUN(PG,
            "S Execute|SELECT $1::int|-\nE err 22012 division by zero\nS Execute|SELECT "
            "$1::int|-\nE skip\n",
            {C, k_startup, STARTUP_LEN}, {R, k_auth_ok, 15}, {C, c1, c1l}, {R, r1, r1l},
            {C, c2, c2l}, {R, r2, r2l});
        CHECK_EQ(sw_pg_pending(&g_st.p), 0);
    }
    /* unnamed statement, statement text of the Parse before it */
    cl = 0;
    cl += pgmsg(c + cl, 'P', "\0INSERT INTO t VALUES ($1)\0\0\0", 29);
    cl += pgmsg(c + cl, 'B', "\0\0\0\0\0\0\0\0", 8);
    cl += pgmsg(c + cl, 'D', "P\0", 2);
    cl += pgmsg(c + cl, 'E', "\0\0\0\0\0", 5);
    cl += pgmsg(c + cl, 'S', "", 0);
    rl = 0;
    rl += pgmsg(r + rl, '1', "", 0);
    rl += pgmsg(r + rl, '2', "", 0);
    rl += pgmsg(r + rl, 'n', "", 0);
    rl += pgmsg(r + rl, 'N', "SNOTICE\0Mhello\0\0", 16);
    rl += pgmsg(r + rl, 'C', "INSERT 0 1\0", 11);
    rl += pgmsg(r + rl, 'Z', "I", 1);
    RUN(PG, "S Execute|INSERT INTO t VALUES ($1)|-\nE ok\n", {C, k_startup, STARTUP_LEN},
        {R, k_auth_ok, 15}, {C, c, cl}, {R, r, rl});
}

static void test_pg_copy(void)
{
    char c[512], r[512], d[512];
    size_t cl = 0, rl = 0, dl = 0;
    cl += pgmsg(c + cl, 'Q', "COPY t FROM STDIN\0", 18);
    rl += pgmsg(r + rl, 'G', "\0\0\x01\0\0", 5);
    dl += pgmsg(d + dl, 'd', "1\tx\n", 4);
    dl += pgmsg(d + dl, 'd', "2\ty\n", 4);
    dl += pgmsg(d + dl, 'c', "", 0);
    char z[64];
    size_t zl = pgmsg(z, 'C', "COPY 2\0", 7);
    zl += pgmsg(z + zl, 'Z', "I", 1);
    char o[512];
    size_t ol = 0;
    char q2[64];
    size_t q2l = pgmsg(q2, 'Q', "COPY t TO STDOUT\0", 17);
    ol += pgmsg(o + ol, 'H', "\0\0\x01\0\0", 5);
    ol += pgmsg(o + ol, 'd', "1\tx\n", 4);
    ol += pgmsg(o + ol, 'c', "", 0);
    ol += pgmsg(o + ol, 'C', "COPY 1\0", 7);
    ol += pgmsg(o + ol, 'Z', "I", 1);
    RUN(PG, "S Query|COPY t FROM STDIN|-\nE ok\nS Query|COPY t TO STDOUT|-\nE ok\n",
        {C, k_startup, STARTUP_LEN}, {R, k_auth_ok, 15}, {C, c, cl}, {R, r, rl}, {C, d, dl},
        {R, z, zl}, {C, q2, q2l}, {R, o, ol});
}

static void test_pg_bad(void)
{
    /* a bad length, an unknown type */
    RUN(PG, "G\n", {C, k_startup, STARTUP_LEN}, {C, "Q\0\0\0\x02", 5});
    RUN(PG, "G\n", {C, k_startup, STARTUP_LEN}, {R, "\x01\0\0\0\x04", 5});
    /* a long statement is cut at SW_DB_STMT_MAX - 1 */
    static char big[5000], msg[5100], want[2200];
    memset(big, 'x', 4000);
    memcpy(big, "SELECT ", 7);
    big[4000] = '\0';
    size_t ml = pgmsg(msg, 'Q', big, 4001);
    snprintf(want, sizeof(want), "S Query|%.2048s+|-\n", big);
    RUN(PG, want, {C, k_startup, STARTUP_LEN}, {C, msg, ml});
}

/* ---------------------------------------------------------------- memcached */

static void test_mc(void)
{
    RUN(MC,
        "S set|k1|w\nE ok\nS get|k1|r\nE ok\nS get|a|r\nE ok\nS delete|zz|w\nE ok\nS incr|n|w\nE "
        "err  bad\n",
        {C, "set k1 0 0 5\r\nhello\r\n"}, {R, "STORED\r\n"}, {C, "get k1\r\n"},
        {R, "VALUE k1 0 5\r\nhello\r\nEND\r\n"}, {C, "get a b\r\n"},
        {R, "VALUE a 0 1\r\nx\r\nVALUE b 0 3\r\nEND\r\nEND\r\n"}, {C, "delete zz\r\n"},
        {R, "NOT_FOUND\r\n"}, {C, "incr n 1\r\n"}, {R, "CLIENT_ERROR bad\r\n"});
    /* pipelined, noreply, stats, meta */
    RUN(MC, "S set|a|w\nE ok\nS get|a|r\nS stats||-\nS mg|a|r\nS mn||-\nE ok\nE ok\nE ok\nE ok\n",
        {C, "set a 0 0 1 noreply\r\nx\r\nget a\r\nstats\r\nmg a v\r\nmn\r\n"},
        {R,
         "VALUE a 0 1\r\nx\r\nEND\r\nSTAT pid 1\r\nSTAT uptime 2\r\nEND\r\nVA 1\r\nx\r\nMN\r\n"});
    RUN(MC, "G\n", {C, "\x80\x00\x00\x00", 4});
    RUN(MC, "G\n", {C, "mg a v q\r\n"});
    RUN(MC, "S get|a|r\nG\n", {C, "get a\r\n"}, {R, "VALUE a 0 1\r\nxy\r\nEND\r\n"});
    RUN(MC, "G\n", {C, "set a 0 0 3\r\nabcd\r\n"});
    RUN(MC, "G\n", {R, "STORED\r\n"});
    RUN(MC, "S bogus||-\nE err  \n", {C, "bogus\r\n"}, {R, "ERROR\r\n"});
}

int main(void)
{
    sw_redis_init(NULL);
    RUN_TEST(test_redis_basic);
    RUN_TEST(test_redis_pipeline);
    RUN_TEST(test_redis_resp3);
    RUN_TEST(test_redis_pubsub);
    RUN_TEST(test_redis_giveup);
    RUN_TEST(test_redis_table);
    RUN_TEST(test_pg_simple);
    RUN_TEST(test_pg_ssl);
    RUN_TEST(test_pg_extended);
    RUN_TEST(test_pg_copy);
    RUN_TEST(test_pg_bad);
    RUN_TEST(test_mc);
    return 0;
}
