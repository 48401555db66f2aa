/*
 * test_fcgi.c - the FastCGI parser (agent/fcgi.c) and the PARAMS record it builds
 * for the client side's HTTP_SW8: records built from the specification, fed whole, one byte at
 * a time and in random splits; each must give exactly the same events, and the expected ones.
 */
#include "check.h"
#include "evlog.h"
#include "fcgi.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct buf {
    uint8_t p[1 << 17];
    size_t n;
};

static void rec(struct buf *b, uint8_t type, uint16_t id, const void *c, size_t n, uint8_t pad)
{
    CHECK(n <= 0xffff && b->n + 8 + n + pad <= sizeof(b->p));
    uint8_t *q = b->p + b->n;
    q[0] = 1;
    q[1] = type;
    q[2] = (uint8_t)(id >> 8);
    q[3] = (uint8_t)id;
    q[4] = (uint8_t)(n >> 8);
    q[5] = (uint8_t)n;
    q[6] = pad;
    q[7] = 0;
    memcpy(q + 8, c, n);
    memset(q + 8 + n, 0, pad);
    b->n += 8 + n + pad;
}

/* A name-value pair, 4-byte lengths when `long_len` (or needed). */
static size_t pair(uint8_t *q, const char *name, const char *val, bool long_len)
{
    size_t nl = strlen(name), vl = strlen(val), at = 0;
    size_t ls[2] = {nl, vl};
    for (int i = 0; i < 2; i++) {
        if (ls[i] < 128 && !long_len) {
            q[at++] = (uint8_t)ls[i];
        } else {
            q[at++] = (uint8_t)(0x80 | ls[i] >> 24);
            q[at++] = (uint8_t)(ls[i] >> 16);
            q[at++] = (uint8_t)(ls[i] >> 8);
            q[at++] = (uint8_t)ls[i];
        }
    }
    memcpy(q + at, name, nl);
    memcpy(q + at + nl, val, vl);
    return at + nl + vl;
}

struct log {
    struct evlog e; /* first: the log itself */
    uint64_t insert_off[8];
    int ninsert;
};

static uint64_t on_ev(void *ctx, const struct sw_fcgi_ev *ev)
{
    struct log *l = ctx;
    switch (ev->kind) {
    case SW_FCGI_EV_BEGIN:
        evlog_add(&l->e, "B%u r%u k%d|", ev->id, ev->role, ev->keep);
        return 1000 + ev->id;
    case SW_FCGI_EV_PARAMS:
        evlog_add(&l->e,
                  "P%u u%llu %.*s %.*s s=%.*s h=%.*s sw8=%.*s c=%.*s a=%.*s:%.*s cut=%x%s%s|",
                  ev->id, (unsigned long long)ev->user, ev->len[SW_FCGI_METHOD],
                  ev->val[SW_FCGI_METHOD], ev->len[SW_FCGI_URI] < 60 ? ev->len[SW_FCGI_URI] : 60,
                  ev->val[SW_FCGI_URI], ev->len[SW_FCGI_SCRIPT], ev->val[SW_FCGI_SCRIPT],
                  ev->len[SW_FCGI_HOST], ev->val[SW_FCGI_HOST], ev->len[SW_FCGI_SW8],
                  ev->val[SW_FCGI_SW8], ev->len[SW_FCGI_CORRELATION], ev->val[SW_FCGI_CORRELATION],
                  ev->len[SW_FCGI_REMOTE_ADDR], ev->val[SW_FCGI_REMOTE_ADDR],
                  ev->len[SW_FCGI_REMOTE_PORT], ev->val[SW_FCGI_REMOTE_PORT], ev->cut,
                  ev->has_sw8 ? " has" : "", ev->partial ? " partial" : "");
        if (l->ninsert < 8)
            l->insert_off[l->ninsert++] = ev->insert_off;
        return 2000 + ev->id;
    case SW_FCGI_EV_ABORT:
        evlog_add(&l->e, "A%u|", ev->id);
        return 0;
    case SW_FCGI_EV_HEAD:
        evlog_add(&l->e, "H%u %d u%llu|", ev->id, ev->status, (unsigned long long)ev->user);
        return 0;
    case SW_FCGI_EV_END:
        evlog_add(&l->e, "E%u %d app%u p%u%s%s%s u%llu|", ev->id, ev->status, ev->app_status,
                  ev->proto_status, ev->head_seen ? "" : " nohead", ev->closed ? " closed" : "",
                  ev->reason ? " (given up)" : "", (unsigned long long)ev->user);
        return 0;
    case SW_FCGI_EV_STOP:
        evlog_add(&l->e, "S:%s|", ev->reason);
        return 0;
    }
    return 0;
}

static struct sw_fcgi g_f;

/* The request direction all first, then the response (as a server sees them). */
static void run(const struct buf *rq, const struct buf *rs, int mode, struct log *l, bool close)
{
    memset(l, 0, sizeof(*l));
    sw_fcgi_init(&g_f);
    const struct buf *bs[2] = {rq, rs};
    for (int d = 0; d < 2; d++) {
        size_t at = 0;
        while (bs[d] && at < bs[d]->n) {
            size_t k = bs[d]->n - at;
            if (mode == 1)
                k = 1;
            else if (mode == 2)
                k = 1 + evlog_rand(k < 40 ? k : 40);
            sw_fcgi_feed(&g_f, d == 1, bs[d]->p + at, k, on_ev, l);
            at += k;
        }
    }
    if (close)
        sw_fcgi_close(&g_f, on_ev, l);
}

static void expect(const struct buf *rq, const struct buf *rs, const char *want, bool close)
{
    struct log a, b;
    for (int mode = 0; mode < 3; mode++) {
        for (int r = 0; r < (mode == 2 ? 20 : 1); r++) {
            run(rq, rs, mode, mode ? &b : &a, close);
            const char *got = mode ? b.e.s : a.e.s;
            if (strcmp(got, want) != 0) {
                fprintf(stderr, "mode %d\ngot:  %s\nwant: %s\n", mode, got, want);
                CHECK(0);
            }
        }
    }
}

static const uint8_t k_begin_keep[8] = {0, 1, 1, 0, 0, 0, 0, 0};

/* The request nginx sends: params split across records (a pair cut in its length bytes and its
 * value), the empty PARAMS, STDIN with a body, the empty STDIN. */
static void nginx_request(struct buf *b, uint16_t id, const char *sw8)
{
    uint8_t ps[8192];
    size_t n = 0;
    n += pair(ps + n, "SCRIPT_FILENAME", "/srv/www/index.php", false);
    n += pair(ps + n, "QUERY_STRING", "a=1", false);
    n += pair(ps + n, "REQUEST_METHOD", "POST", false);
    n += pair(ps + n, "SCRIPT_NAME", "/index.php", false);
    n += pair(ps + n, "REQUEST_URI", "/users/42?a=1", true);
    n += pair(ps + n, "REMOTE_ADDR", "127.0.0.1", false);
    n += pair(ps + n, "REMOTE_PORT", "51000", false);
    n += pair(ps + n, "HTTP_HOST", "shop.test", false);
    if (sw8)
        n += pair(ps + n, "HTTP_SW8", sw8, false);
    char big[300];
    memset(big, 'q', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    n += pair(ps + n, "HTTP_X_LONG", big, false);
    rec(b, 1, id, k_begin_keep, 8, 0);
    size_t cut1 = 37, cut2 = 120;
    rec(b, 4, id, ps, cut1, 3);
    rec(b, 4, id, ps + cut1, cut2 - cut1, 0);
    rec(b, 4, id, ps + cut2, n - cut2, 5);
    rec(b, 4, id, "", 0, 0);
    rec(b, 5, id, "name=x", 6, 2);
    rec(b, 5, id, "", 0, 0);
}

static void test_server_request(void)
{
    struct buf *rq = calloc(1, sizeof(*rq)), *rs = calloc(1, sizeof(*rs));
    nginx_request(rq, 1, NULL);
    const char out1[] = "X-Powered-By: PHP/8.2\r\nStatus: 404 Not Found\r\nContent-type: text/html";
    const char out2[] = "\r\n\r\n<html>not found</html>";
    rec(rs, 6, 1, out1, sizeof(out1) - 1, 0);
    rec(rs, 7, 1, "PHP Warning: x", 14, 0);
    rec(rs, 6, 1, out2, sizeof(out2) - 1, 1);
    rec(rs, 6, 1, "", 0, 0);
    rec(rs, 3, 1, "\0\0\0\0\0\0\0\0", 8, 0);
    expect(rq, rs,
           "B1 r1 k1|P1 u1001 POST /users/42?a=1 s=/index.php h=shop.test sw8= c= "
           "a=127.0.0.1:51000 cut=0|H1 404 u2001|E1 404 app0 p0 u2001|",
           false);
    free(rq);
    free(rs);
}

/* No Status header: 200, a Location alone: 302; a closed connection ends the request. */
static void test_status_defaults(void)
{
    struct buf *rq = calloc(1, sizeof(*rq)), *rs = calloc(1, sizeof(*rs));
    nginx_request(rq, 1, "1-abc-def-0-c2Vydg==-aW5zdA==-L2E=-aG9zdDo4MA==");
    rec(rs, 6, 1, "Content-Type: text/plain\n\nok", 28, 0);
    rec(rs, 3, 1, "\0\0\0\x07\0\0\0\0", 8, 0);
    expect(rq, rs,
           "B1 r1 k1|P1 u1001 POST /users/42?a=1 s=/index.php h=shop.test "
           "sw8=1-abc-def-0-c2Vydg==-aW5zdA==-L2E=-aG9zdDo4MA== c= a=127.0.0.1:51000 cut=0 has|"
           "H1 200 u2001|E1 200 app7 p0 u2001|",
           false);
    rs->n = 0;
    rec(rs, 6, 1, "Location: /login\r\nstatus:bad\r\n\r\n", 32, 0);
    expect(rq, rs,
           "B1 r1 k1|P1 u1001 POST /users/42?a=1 s=/index.php h=shop.test "
           "sw8=1-abc-def-0-c2Vydg==-aW5zdA==-L2E=-aG9zdDo4MA== c= a=127.0.0.1:51000 cut=0 has|"
           "H1 302 u2001|E1 302 app0 p0 closed u2001|",
           true);
    free(rq);
    free(rs);
}

/* Two multiplexed requests: the second's PARAMS interleave with the first's (not captured). */
static void test_multiplexed(void)
{
    struct buf *rq = calloc(1, sizeof(*rq)), *rs = calloc(1, sizeof(*rs));
    uint8_t p1[256], p2[256];
    size_t n1 = pair(p1, "REQUEST_METHOD", "GET", false);
    n1 += pair(p1 + n1, "REQUEST_URI", "/one", false);
    size_t n2 = pair(p2, "REQUEST_METHOD", "PUT", false);
    n2 += pair(p2 + n2, "REQUEST_URI", "/two", false);
    rec(rq, 1, 1, k_begin_keep, 8, 0);
    rec(rq, 1, 2, k_begin_keep, 8, 0);
    rec(rq, 4, 1, p1, 10, 0);
    rec(rq, 4, 2, p2, n2, 0);
    rec(rq, 4, 2, "", 0, 0);
    rec(rq, 4, 1, p1 + 10, n1 - 10, 0);
    rec(rq, 4, 1, "", 0, 0);
    rec(rq, 2, 2, "", 0, 0); /* ABORT 2 */
    /* a management record (id 0) and an unknown type pass by */
    rec(rq, 9, 0,
        "\x0e\x00"
        "FCGI_MAX_CONNS",
        16, 0);
    rec(rq, 8, 1, "data", 4, 4);
    rec(rs, 6, 2, "Status: 500\r\n\r\n", 15, 0);
    rec(rs, 6, 1, "Status: 201 Created\r\n\r\n", 23, 0);
    rec(rs, 3, 2, "\0\0\0\x01\x01\0\0\0", 8, 0);
    rec(rs, 3, 1, "\0\0\0\0\0\0\0\0", 8, 0);
    expect(rq, rs,
           "B1 r1 k1|B2 r1 k1|P2 u1002   s= h= sw8= c= a=: cut=0 partial|"
           "P1 u1001 GET /one s= h= sw8= c= a=: cut=0|A2|H2 500 u0|H1 201 u2001|"
           "E2 500 app1 p1 u0|E1 201 app0 p0 u2001|", /* 2's span ended at its ABORT */
           false);
    free(rq);
    free(rs);
}

/* Where the client side inserts: the offset of the empty PARAMS record; the record built for
 * it parses back as the params it carries, and a proxy's own HTTP_SW8 is reported. */
static void test_insert_and_record(void)
{
    struct buf *rq = calloc(1, sizeof(*rq));
    nginx_request(rq, 3, NULL);
    struct log l;
    run(rq, NULL, 0, &l, false);
    CHECK_EQ(l.ninsert, 1);
    /* the empty PARAMS record is 8 + 6 + 8 + 8 (STDIN, pad 2) + 8 bytes from the end */
    CHECK_EQ(l.insert_off[0], rq->n - 8 - 16 - 8);
    CHECK(memcmp(rq->p + l.insert_off[0], "\x01\x04\x00\x03\x00\x00", 6) == 0);

    const char lines[] = "sw8: 1-dHJhY2U=-c2Vn-1-c3Zj-aW5zdA==-R0VUOi8=-cGhwOjkwMDA=\r\n"
                         "sw8-correlation: a:b\r\n";
    uint8_t r[512];
    size_t n = sw_fcgi_params_record(r, sizeof(r), 3, lines, sizeof(lines) - 1);
    CHECK(n > 8);
    CHECK(memcmp(r, "\x01\x04\x00\x03", 4) == 0);
    CHECK_EQ((size_t)(r[4] << 8 | r[5]), n - 8);
    CHECK_EQ(sw_fcgi_params_record(r, 40, 3, lines, sizeof(lines) - 1), 0);
    CHECK_EQ(sw_fcgi_params_record(r, sizeof(r), 3, "", 0), 0);

    /* Insert it, feed the result to a server-side parser: it finds HTTP_SW8. */
    struct buf *out = calloc(1, sizeof(*out));
    size_t at = (size_t)l.insert_off[0];
    memcpy(out->p, rq->p, at);
    memcpy(out->p + at, r, n);
    memcpy(out->p + at + n, rq->p + at, rq->n - at);
    out->n = rq->n + n;
    expect(out, NULL,
           "B3 r1 k1|P3 u1003 POST /users/42?a=1 s=/index.php h=shop.test "
           "sw8=1-dHJhY2U=-c2Vn-1-c3Zj-aW5zdA==-R0VUOi8=-cGhwOjkwMDA= c=a:b "
           "a=127.0.0.1:51000 cut=0 has|",
           false);
    free(out);
    free(rq);
}

/* Long values are cut (and say so); a version other than 1 stops the parser. */
#define U59 "uuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuu"
static void test_cut_and_bad(void)
{
    struct buf *rq = calloc(1, sizeof(*rq));
    char *uri = malloc(5000);
    memset(uri, 'u', 4999);
    uri[0] = '/';
    uri[4999] = 0;
    uint8_t ps[6000];
    size_t n = pair(ps, "REQUEST_URI", uri, false);
    n += pair(ps + n, "REQUEST_METHOD", "GET", false);
    rec(rq, 1, 1, k_begin_keep, 8, 0);
    rec(rq, 4, 1, ps, n, 0);
    rec(rq, 4, 1, "", 0, 0);
    rq->p[rq->n++] = 2; /* version 2 */
    memset(rq->p + rq->n, 0, 7);
    rq->n += 7;
    expect(rq, NULL,
           "B1 r1 k1|P1 u1001 GET /" U59 " s= h= sw8= c= a=: cut=2|E1 0 app0 p0 nohead closed "
           "(given up) u2001|S:not FastCGI version 1|",
           false);
    free(uri);
    free(rq);
}

/* Only a span (what PARAMS returned) comes back in later events: a request given up on, or
 * closed, before its params ended gives user 0, not BEGIN's value (the client side's start
 * time, which ended as a span once); an aborted request's END_REQUEST ends nothing more; a
 * request id begun again while open ends the open one first. */
static void test_user_is_a_span(void)
{
    struct buf *rq = calloc(1, sizeof(*rq)), *rs = calloc(1, sizeof(*rs));
    uint8_t ps[64];
    size_t n = pair(ps, "REQUEST_METHOD", "GET", false);
    /* the reproducer of fuzz_h2 (corpus h2/fcgi_begin_then_bad_version): BEGIN, then junk */
    rec(rq, 1, 0x0101, k_begin_keep, 8, 0);
    rq->p[rq->n++] = 0; /* version 0 */
    memset(rq->p + rq->n, 0, 7);
    rq->n += 7;
    expect(rq, NULL,
           "B257 r1 k1|E257 0 app0 p0 nohead closed (given up) u0|S:not FastCGI version 1|", false);
    /* closed before its params ended */
    rq->n = 0;
    rec(rq, 1, 3, k_begin_keep, 8, 0);
    rec(rq, 4, 3, ps, n, 0);
    expect(rq, NULL, "B3 r1 k1|E3 0 app0 p0 nohead closed u0|", true);
    /* aborted, then its END_REQUEST */
    rq->n = 0;
    rec(rq, 1, 4, k_begin_keep, 8, 0);
    rec(rq, 4, 4, ps, n, 0);
    rec(rq, 4, 4, "", 0, 0);
    rec(rq, 2, 4, "", 0, 0);
    static const uint8_t end_ok[8] = {0};
    rec(rs, 3, 4, end_ok, 8, 0);
    expect(rq, rs, "B4 r1 k1|P4 u1004 GET  s= h= sw8= c= a=: cut=0|A4|E4 0 app0 p0 nohead u0|",
           true);
    /* id 5 begun again while open */
    rq->n = 0;
    rec(rq, 1, 5, k_begin_keep, 8, 0);
    rec(rq, 4, 5, ps, n, 0);
    rec(rq, 4, 5, "", 0, 0);
    rec(rq, 1, 5, k_begin_keep, 8, 0);
    expect(rq, NULL,
           "B5 r1 k1|P5 u1005 GET  s= h= sw8= c= a=: cut=0|E5 0 app0 p0 nohead closed (given up) "
           "u2005|B5 r1 k1|E5 0 app0 p0 nohead closed u0|",
           true);
    free(rq);
    free(rs);
}

static void test_garbage(void)
{
    static uint8_t junk[4096];
    struct buf *rq = calloc(1, sizeof(*rq));
    for (int round = 0; round < 3000; round++) {
        size_t n = evlog_rand(sizeof(junk));
        for (size_t i = 0; i < n; i++)
            junk[i] = (uint8_t)evlog_rand(256);
        if (round & 1)
            for (size_t i = 0; i + 8 <= n; i += 8 + evlog_rand(64))
                junk[i] = 1; /* mostly version 1 */
        rq->n = 0;
        memcpy(rq->p, junk, n);
        rq->n = n;
        struct log l;
        run(rq, round & 2 ? rq : NULL, 2, &l, true);
    }
    free(rq);
}

int main(void)
{
    RUN_TEST(test_server_request);
    RUN_TEST(test_status_defaults);
    RUN_TEST(test_multiplexed);
    RUN_TEST(test_insert_and_record);
    RUN_TEST(test_cut_and_bad);
    RUN_TEST(test_user_is_a_span);
    RUN_TEST(test_garbage);
    return 0;
}
