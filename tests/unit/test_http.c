/*
 * test_http.c - unit tests of agent/http.c: events, offsets and captures must not depend on
 * how the bytes are split (every 2-way split, every 3-way split of small inputs, one byte at
 * a time), non-HTTP detection, and the size bounds.
 */
#include "common.h"

#include "check.h"
#include "http.h"
#include "http_ref.h"

#include <stdarg.h>

#define LOG_MAX (64 * 1024)

struct run {
    char log[LOG_MAX];
    size_t log_len;
    int heads, messages, terminal;
};

struct kase {
    const char *name;
    enum sw_http_dir dir;
    const char *in;
    size_t len;
    const enum sw_http_method *push; /* methods pushed to a response parser before feeding */
    size_t npush;
    bool eof; /* call sw_http_eof at the end */
};

static struct sw_http_opts g_opts;
static struct sw_http g_h;
static struct sw_http_req g_req;

static void logf_(struct run *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(r->log + r->log_len, LOG_MAX - r->log_len, fmt, ap);
    va_end(ap);
    CHECK(n >= 0 && (size_t)n < LOG_MAX - r->log_len);
    r->log_len += (size_t)n;
}

/* The rules of http.h for the captures of a request head: terminated copies, path fields. */
static void check_captures(void)
{
    size_t tn, hn;
    const char *t = sw_http_req_target(&g_req, &tn);

    sw_http_req_host(&g_req, &hn);
    if (!g_req.target_ref)
        CHECK_EQ(strlen(g_req.target), tn);
    if (!g_req.host_ref && hn)
        CHECK_EQ(strlen(g_req.host), hn);
    if (g_req.sw8_len)
        CHECK_EQ(strlen(g_req.sw8), g_req.sw8_len);
    if (g_req.headers_len)
        CHECK_EQ(strlen(g_req.headers), g_req.headers_len);
    if (!g_opts.capture_refs)
        CHECK(!g_req.target_ref && !g_req.host_ref);
    if (g_req.path_valid) {
        size_t pl, suf;
        ref_path(t, tn, &pl, &suf);
        CHECK_EQ(g_req.path_len, pl);
        CHECK_EQ(g_req.path_suffix, suf);
    }
}

/* The Host captured is `s`. */
static void check_host(const char *s)
{
    size_t hn;
    const char *h = sw_http_req_host(&g_req, &hn);

    CHECK_EQ(hn, strlen(s));
    CHECK(memcmp(h, s, hn) == 0);
}

/* Logs an event with absolute offsets; `base` is the absolute offset of the call's buf. */
static void log_event(struct run *r, const struct sw_http_event *ev, size_t base, bool hold)
{
    switch (ev->type) {
    case SW_HTTP_EV_HEAD:
        r->heads++;
        logf_(r, "HEAD@%zu st=%d m=%s ka=%d", base + ev->offset, ev->status,
              sw_http_method_name(ev->method), ev->keep_alive);
        CHECK(ev->insert_at == SW_HTTP_NO_OFFSET || ev->insert_at < ev->offset);
        if (hold)
            CHECK(ev->insert_at != SW_HTTP_NO_OFFSET);
        if (ev->insert_at != SW_HTTP_NO_OFFSET) {
            /* The insertion point must be the start of the blank line. */
            logf_(r, " ins=%zu", base + ev->insert_at);
        }
        if (g_h.dir == SW_HTTP_REQUEST) {
            size_t tn, hn;
            const char *t = sw_http_req_target(&g_req, &tn), *hv = sw_http_req_host(&g_req, &hn);
            logf_(r,
                  " [%s %.*s%s h=%.*s sw8=%.*s corr=%.*s x=%.*s exp=%d up=%d ka=%d 1.%d hd=%.*s%s]",
                  g_req.method_text, (int)tn, t, g_req.target_truncated ? "(T)" : "", (int)hn, hv,
                  (int)g_req.sw8_len, g_req.sw8, (int)g_req.corr_len, g_req.corr,
                  (int)g_req.sw8x_len, g_req.sw8x, g_req.expect_continue, g_req.upgrade,
                  g_req.keep_alive, g_req.http_minor, (int)g_req.headers_len, g_req.headers,
                  g_req.headers_truncated ? "(T)" : "");
            check_captures();
        }
        logf_(r, "\n");
        CHECK(!ev->message || g_opts.fold_message);
        if (ev->message) {
            /* Folded: logged as the MESSAGE the unfolded parser gives at the same offset. */
            r->messages++;
            CHECK(ev->msg_end >= ev->offset);
            logf_(r, "MSG@%zu st=%d m=%s ka=%d eof=0\n", base + ev->msg_end, ev->status,
                  sw_http_method_name(ev->method), ev->keep_alive);
        }
        break;
    case SW_HTTP_EV_MESSAGE:
        r->messages++;
        logf_(r, "MSG@%zu st=%d m=%s ka=%d eof=%d\n", base + ev->offset, ev->status,
              sw_http_method_name(ev->method), ev->keep_alive, ev->at_eof);
        break;
    case SW_HTTP_EV_UPGRADE:
        r->terminal++;
        logf_(r, "UPGRADE@%zu st=%d\n", base + ev->offset, ev->status);
        break;
    case SW_HTTP_EV_NOT_HTTP:
        r->terminal++;
        logf_(r, "NOT_HTTP err=%d\n", ev->err);
        break;
    case SW_HTTP_EV_ERROR:
        r->terminal++;
        logf_(r, "ERROR err=%d\n", ev->err);
        break;
    default:
        break;
    }
}

/*
 * Feeds `k` split at the given cut points (sorted absolute offsets), or one byte at a time
 * when `bytewise`. With `hold`, bytes the parser holds back are re-sent at the front of the
 * next chunk, as an application does after a short write.
 */
static void run_case(const struct kase *k, const size_t *cuts, size_t ncuts, bool bytewise,
                     bool hold, struct run *r)
{
    size_t pos = 0, cut_i = 0, end = 0;
    bool stopped = false;

    memset(r, 0, sizeof(*r));
    sw_http_init(&g_h, k->dir, &g_opts, &g_req);
    for (size_t i = 0; i < k->npush; i++)
        sw_http_push_request(&g_h, k->push[i]);
    while (end < k->len && !stopped) {
        /* The app has made bytes up to `end` available; bytes held back earlier (pos < the
           previous end) are sent again at the front, as after a short write. */
        if (bytewise)
            end++;
        else
            end = cut_i < ncuts ? cuts[cut_i++] : k->len;
        size_t chunk = end - pos, off = 0;
        for (int guard = 0;; guard++) {
            struct sw_http_event ev;
            CHECK(guard < 100000);
            size_t n = sw_http_feed(&g_h, k->in + pos + off, chunk - off,
                                    hold ? SW_HTTP_FEED_HOLD : 0, &ev);
            CHECK(n <= chunk - off);
            if (ev.type == SW_HTTP_EV_HEAD && ev.message)
                CHECK_EQ(n, ev.msg_end); /* folded: past the message */
            else if (ev.type == SW_HTTP_EV_HEAD || ev.type == SW_HTTP_EV_MESSAGE)
                CHECK_EQ(n, ev.offset);
            if (ev.type == SW_HTTP_EV_NONE && sw_http_head_in_progress(&g_h) &&
                ev.line_end != SW_HTTP_NO_OFFSET) {
                CHECK(ev.line_end <= n && ev.line_end > 0);
                CHECK_EQ(k->in[pos + off + ev.line_end - 1], '\n');
            }
            log_event(r, &ev, pos + off, hold);
            off += n;
            if (sw_http_event_is_terminal(&ev)) {
                stopped = true;
                break;
            }
            if (ev.type == SW_HTTP_EV_NONE)
                break;
        }
        if (!stopped && off < chunk) {
            /* Held back: only a trailing "\r", only with hold. */
            CHECK(hold);
            CHECK_EQ(chunk - off, 1);
            CHECK_EQ(k->in[pos + off], '\r');
        }
        pos += off;
    }
    if (!stopped) {
        /* Deliver events still owed (a pending MESSAGE after a HEAD at the very end). */
        for (;;) {
            struct sw_http_event ev;
            sw_http_feed(&g_h, k->in + k->len, 0, 0, &ev);
            if (ev.type == SW_HTTP_EV_NONE)
                break;
            log_event(r, &ev, k->len, hold);
            if (sw_http_event_is_terminal(&ev)) {
                stopped = true;
                break;
            }
        }
    }
    if (k->eof && !stopped) {
        struct sw_http_event ev;
        sw_http_eof(&g_h, &ev);
        log_event(r, &ev, k->len, hold);
        CHECK(sw_http_stopped(&g_h));
    }
}

static struct run g_whole, g_split;

/* Runs every split of `k` and compares with the unsplit run. Returns the unsplit log. */
static const char *check_all_splits(const struct kase *k, bool hold)
{
    run_case(k, NULL, 0, false, hold, &g_whole);
    /* Captures by reference (the whole-head fast path's) must log what copies log. */
    g_opts.capture_refs = true;
    run_case(k, NULL, 0, false, hold, &g_split);
    g_opts.capture_refs = false;
    if (strcmp(g_whole.log, g_split.log) != 0) {
        fprintf(stderr, "%s by reference hold=%d:\n--- whole\n%s--- by reference\n%s", k->name,
                hold, g_whole.log, g_split.log);
        CHECK(0);
    }
    run_case(k, NULL, 0, true, hold, &g_split);
    if (strcmp(g_whole.log, g_split.log) != 0) {
        fprintf(stderr, "%s bytewise hold=%d:\n--- whole\n%s--- split\n%s", k->name, hold,
                g_whole.log, g_split.log);
        CHECK(0);
    }
    /* opts.fold_message (a HEAD stands for the MESSAGE of a bodyless message, or of a
       response whose Content-Length body is in the same call) must give the same messages at
       the same offsets: none lost, none doubled. */
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        g_opts.fold_message = true;
        run_case(k, NULL, 0, bytewise != 0, hold, &g_split);
        g_opts.fold_message = false;
        if (strcmp(g_whole.log, g_split.log) != 0 || g_whole.messages != g_split.messages) {
            fprintf(stderr, "%s folded bytewise=%d hold=%d:\n--- whole\n%s--- folded\n%s", k->name,
                    bytewise, hold, g_whole.log, g_split.log);
            CHECK(0);
        }
    }
    for (size_t c = 1; c < k->len; c++) {
        run_case(k, &c, 1, false, hold, &g_split);
        if (strcmp(g_whole.log, g_split.log) != 0) {
            fprintf(stderr, "%s cut %zu hold=%d:\n--- whole\n%s--- split\n%s", k->name, c, hold,
                    g_whole.log, g_split.log);
            CHECK(0);
        }
        g_opts.fold_message = true;
        run_case(k, &c, 1, false, hold, &g_split);
        g_opts.fold_message = false;
        if (strcmp(g_whole.log, g_split.log) != 0) {
            fprintf(stderr, "%s folded cut %zu hold=%d:\n--- whole\n%s--- folded\n%s", k->name, c,
                    hold, g_whole.log, g_split.log);
            CHECK(0);
        }
    }
    if (k->len <= 400) {
        for (size_t a = 1; a < k->len; a += 3) {
            for (size_t b = a + 1; b < k->len; b += 2) {
                size_t cuts[2] = {a, b};
                run_case(k, cuts, 2, false, hold, &g_split);
                if (strcmp(g_whole.log, g_split.log) != 0) {
                    fprintf(stderr, "%s cuts %zu,%zu hold=%d:\n--- whole\n%s--- split\n%s", k->name,
                            a, b, hold, g_whole.log, g_split.log);
                    CHECK(0);
                }
            }
        }
    }
    return g_whole.log;
}

/* Same as check_all_splits, but insert_at is only compared in hold mode (without hold, a
   split between the final CR and LF legitimately gives SW_HTTP_NO_OFFSET). */
static void check_case(const struct kase *k, const char *expect)
{
    static char whole_hold[LOG_MAX];
    const char *log = check_all_splits(k, true);

    if (expect && strcmp(log, expect) != 0) {
        fprintf(stderr, "%s:\n--- expected\n%s--- got\n%s", k->name, expect, log);
        CHECK(0);
    }
    snprintf(whole_hold, sizeof(whole_hold), "%s", log);
    if (k->dir == SW_HTTP_RESPONSE) {
        /* Without hold (read paths): same events; insert_at may be absent after CR/LF splits,
           so only the unsplit run is compared exactly. */
        run_case(k, NULL, 0, false, false, &g_whole);
        CHECK_STR(g_whole.log, whole_hold);
    }
}

#define KASE(nm, d, str)                                                                           \
    {                                                                                              \
        .name = nm, .dir = d, .in = str, .len = sizeof(str) - 1                                    \
    }

static void setup_opts(void)
{
    sw_http_opts_init(&g_opts);
    CHECK_EQ(sw_http_opts_add_header(&g_opts, "X-Custom", 8), 0);
    CHECK_EQ(sw_http_opts_add_header(&g_opts, "accept", 6), 0);
    CHECK_EQ(sw_http_opts_add_header(&g_opts, "missing", 7), 0);
}

static void test_simple_request(void)
{
    struct kase k = KASE("simple", SW_HTTP_REQUEST,
                         "GET /a/b?x=1&y=2 HTTP/1.1\r\n"
                         "Host: example.com:8080\r\n"
                         "SW8: 1-abc-def\r\n"
                         "sw8-Correlation: a:b\r\n"
                         "Sw8-X: 0- \r\n"
                         "X-Custom: v1\r\n"
                         "Accept: */*\r\n"
                         "x-CUSTOM:   v2  \r\n"
                         "\r\n");
    check_case(&k, "HEAD@148 st=0 m=GET ka=1 ins=146 [GET /a/b?x=1&y=2 h=example.com:8080 "
                   "sw8=1-abc-def corr=a:b x=0- exp=0 up=0 ka=1 1.1 "
                   "hd=x-custom=[v1, v2]\naccept=[*/*]]\n"
                   "MSG@148 st=0 m=GET ka=1 eof=0\n");
}

static void test_pipelined_requests(void)
{
    struct kase k = KASE("pipelined", SW_HTTP_REQUEST,
                         "GET /one HTTP/1.1\r\nHost: a\r\n\r\n"
                         "POST /two HTTP/1.1\r\nhost: b\r\nContent-Length: 5\r\n\r\nhello"
                         "PUT /three HTTP/1.1\r\nHOST: c\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "5;ext=1;x=\"y\"\r\nabcde\r\n0A\r\n0123456789\r\n0\r\nTrailer-A: 1\r\n"
                         "sw8: not-a-trailer-capture\r\n\r\n"
                         "DELETE /four HTTP/1.0\r\n\r\n");
    check_case(&k, "HEAD@30 st=0 m=GET ka=1 ins=28 [GET /one h=a sw8= corr= x= exp=0 up=0 ka=1 "
                   "1.1 hd=]\n"
                   "MSG@30 st=0 m=GET ka=1 eof=0\n"
                   "HEAD@80 st=0 m=POST ka=1 ins=78 [POST /two h=b sw8= corr= x= exp=0 up=0 "
                   "ka=1 1.1 hd=]\n"
                   "MSG@85 st=0 m=POST ka=1 eof=0\n"
                   "HEAD@145 st=0 m=PUT ka=1 ins=143 [PUT /three h=c sw8= corr= x= exp=0 up=0 "
                   "ka=1 1.1 hd=]\n"
                   "MSG@230 st=0 m=PUT ka=1 eof=0\n"
                   "HEAD@255 st=0 m=DELETE ka=0 ins=253 [DELETE /four h= sw8= corr= x= exp=0 "
                   "up=0 ka=0 1.0 hd=]\n"
                   "MSG@255 st=0 m=DELETE ka=0 eof=0\n");
}

static void test_expect_continue(void)
{
    struct kase k = KASE("expect", SW_HTTP_REQUEST,
                         "POST /up HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\n"
                         "Content-Length: 3\r\n\r\nabc");
    check_case(&k, "HEAD@71 st=0 m=POST ka=1 ins=69 [POST /up h=h sw8= corr= x= exp=1 up=0 ka=1 "
                   "1.1 hd=]\n"
                   "MSG@74 st=0 m=POST ka=1 eof=0\n");
}

static void test_bare_lf(void)
{
    struct kase k = KASE("bare-lf", SW_HTTP_REQUEST, "GET / HTTP/1.1\nHost: a\n\n");
    check_case(&k, "HEAD@24 st=0 m=GET ka=1 ins=23 [GET / h=a sw8= corr= x= exp=0 up=0 ka=1 1.1 "
                   "hd=]\nMSG@24 st=0 m=GET ka=1 eof=0\n");
}

static void test_responses(void)
{
    static const enum sw_http_method push[] = {SW_HTTP_M_GET,  SW_HTTP_M_GET,  SW_HTTP_M_GET,
                                               SW_HTTP_M_HEAD, SW_HTTP_M_POST, SW_HTTP_M_GET};
    struct kase k = KASE("responses", SW_HTTP_RESPONSE,
                         "HTTP/1.1 100 Continue\r\n\r\n"
                         "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
                         "HTTP/1.1 204 No Content\r\ncontent-length: 7\r\n\r\n"
                         "HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n"
                         "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"
                         "HTTP/1.1 100 Continue\r\n\r\n"
                         "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "3;a=b\r\nabc\r\n0\r\nX-T: 1\r\n\r\n"
                         "HTTP/1.0 200 OK\r\nServer: x\r\n\r\nuntil close body");
    k.push = push;
    k.npush = SW_ARRAY_LEN(push);
    k.eof = true;
    check_case(&k, "HEAD@63 st=200 m=GET ka=1 ins=61\n"
                   "MSG@68 st=200 m=GET ka=1 eof=0\n"
                   "HEAD@114 st=204 m=GET ka=1 ins=112\n"
                   "MSG@114 st=204 m=GET ka=1 eof=0\n"
                   "HEAD@164 st=304 m=GET ka=1 ins=162\n"
                   "MSG@164 st=304 m=GET ka=1 eof=0\n"
                   "HEAD@205 st=200 m=HEAD ka=1 ins=203\n"
                   "MSG@205 st=200 m=HEAD ka=1 eof=0\n"
                   "HEAD@282 st=201 m=POST ka=1 ins=280\n"
                   "MSG@307 st=201 m=POST ka=1 eof=0\n"
                   "HEAD@337 st=200 m=GET ka=0 ins=335\n"
                   "MSG@353 st=200 m=GET ka=0 eof=1\n");
}

static void test_connection_close_then_garbage(void)
{
    struct kase k = KASE("close", SW_HTTP_RESPONSE,
                         "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
                         "HTTP/1.1 200 OK\r\n\r\n");
    /* http_parser (non-strict build) keeps parsing after a "close" message; the second
       response has no length, so it runs until EOF. */
    k.eof = true;
    check_case(&k, "HEAD@57 st=200 m=GET ka=0 ins=55\n"
                   "MSG@59 st=200 m=GET ka=0 eof=0\n"
                   "HEAD@78 st=200 m=GET ka=0 ins=76\n"
                   "MSG@78 st=200 m=GET ka=0 eof=1\n");
}

static void test_upgrade(void)
{
    struct kase k1 = KASE("ws-req", SW_HTTP_REQUEST,
                          "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\n"
                          "Upgrade: websocket\r\n\r\n\x81\x05hello");
    check_case(&k1, "HEAD@70 st=0 m=GET ka=0 ins=68 [GET /ws h=a sw8= corr= x= exp=0 up=1 ka=0 "
                    "1.1 hd=]\nUPGRADE@70 st=0\n");
    struct kase k2 = KASE("ws-resp", SW_HTTP_RESPONSE,
                          "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                          "Upgrade: websocket\r\n\r\n\x81\x05hello");
    check_case(&k2, "HEAD@77 st=101 m=GET ka=0 ins=75\nUPGRADE@77 st=101\n");
    struct kase k3 = KASE("connect-req", SW_HTTP_REQUEST,
                          "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"
                          "\x16\x03\x01\x00\x05hello");
    check_case(&k3, "HEAD@59 st=0 m=CONNECT ka=0 ins=57 [CONNECT example.com:443 "
                    "h=example.com:443 sw8= corr= x= exp=0 up=1 ka=0 1.1 hd=]\n"
                    "UPGRADE@59 st=0\n");
    static const enum sw_http_method push[] = {SW_HTTP_M_CONNECT};
    struct kase k4 = KASE("connect-resp", SW_HTTP_RESPONSE,
                          "HTTP/1.1 200 Connection established\r\n\r\n\x16\x03\x03\x00\x02hi");
    k4.push = push;
    k4.npush = 1;
    check_case(&k4, "HEAD@39 st=200 m=CONNECT ka=0 ins=37\nUPGRADE@39 st=200\n");
}

static void check_not_http(enum sw_http_dir dir, const char *in, size_t len, size_t within,
                           enum sw_http_err err)
{
    /* Byte at a time: the verdict must come within the first `within` bytes. */
    struct sw_http_event ev;
    size_t i;

    sw_http_init(&g_h, dir, &g_opts, &g_req);
    for (i = 0; i < len; i++) {
        sw_http_feed(&g_h, in + i, 1, 0, &ev);
        if (ev.type != SW_HTTP_EV_NONE)
            break;
    }
    if (ev.type != SW_HTTP_EV_NOT_HTTP || i >= within) {
        fprintf(stderr, "not-http case '%.*s' type=%d at %zu\n", (int)(len < 20 ? len : 20), in,
                ev.type, i);
        CHECK(0);
    }
    CHECK_EQ(ev.err, err);
    CHECK(sw_http_stopped(&g_h));
    /* Later bytes are ignored. */
    CHECK_EQ(sw_http_feed(&g_h, in, len, 0, &ev), len);
    CHECK_EQ(ev.type, SW_HTTP_EV_NONE);
    /* Whole buffer at once: same verdict. */
    sw_http_init(&g_h, dir, &g_opts, &g_req);
    sw_http_feed(&g_h, in, len, 0, &ev);
    CHECK_EQ(ev.type, SW_HTTP_EV_NOT_HTTP);
}

#define NOT_HTTP(dir, s, within, err) check_not_http(dir, s, sizeof(s) - 1, within, err)

static void test_not_http(void)
{
    const enum sw_http_err S = SW_HTTP_ERR_SYNTAX;
    /* TLS ClientHello, HTTP/2 preface, Redis, PostgreSQL, SSH, binary. */
    NOT_HTTP(SW_HTTP_REQUEST, "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 1, S);
    NOT_HTTP(SW_HTTP_REQUEST, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 3, S);
    NOT_HTTP(SW_HTTP_REQUEST, "*1\r\n$4\r\nPING\r\n", 1, S);
    NOT_HTTP(SW_HTTP_REQUEST, "PING\r\n", 2, S);
    NOT_HTTP(SW_HTTP_REQUEST, "\x00\x00\x00\x08\x04\xd2\x16\x2f", 1, S);
    NOT_HTTP(SW_HTTP_REQUEST, "\x00\x00\x00\x29\x00\x03\x00\x00user\x00postgres\x00\x00", 1, S);
    NOT_HTTP(SW_HTTP_REQUEST, "SSH-2.0-OpenSSH_9.2\r\n", 2, S);
    NOT_HTTP(SW_HTTP_REQUEST, "\xff\xfe\x01\x02\x03", 1, S);
    NOT_HTTP(SW_HTTP_REQUEST, "GET / HTTP/2.0\r\n\r\n", 18, SW_HTTP_ERR_VERSION);
    NOT_HTTP(SW_HTTP_RESPONSE, "\x16\x03\x03\x00\x5a\x02\x00\x00\x56", 1, S);
    NOT_HTTP(SW_HTTP_RESPONSE, "+PONG\r\n", 1, S);
    NOT_HTTP(SW_HTTP_RESPONSE, "R\x00\x00\x00\x08\x00\x00\x00\x00", 1, S);
    NOT_HTTP(SW_HTTP_RESPONSE, "\x00\x00\x12\x04\x00\x00\x00\x00\x00", 1, S);
    NOT_HTTP(SW_HTTP_RESPONSE, "HTTP/2 200\r\n\r\n", 7, S);
}

static char g_big[200 * 1024];

static void test_head_limits(void)
{
    struct sw_http_event ev;
    size_t n = 0;

    /* A 70 KiB header: ERROR too large, whether fed whole or in 1000-byte chunks. */
    n += (size_t)snprintf(g_big, sizeof(g_big), "GET / HTTP/1.1\r\nX-Big: ");
    memset(g_big + n, 'a', 70 * 1024);
    n += 70 * 1024;
    n += (size_t)snprintf(g_big + n, sizeof(g_big) - n, "\r\n\r\n");
    for (size_t step = 1000; step <= n; step = step == 1000 ? n : n + 1) {
        size_t pos = 0;
        sw_http_init(&g_h, SW_HTTP_REQUEST, &g_opts, &g_req);
        ev.type = SW_HTTP_EV_NONE;
        while (pos < n && ev.type == SW_HTTP_EV_NONE) {
            size_t c = n - pos < step ? n - pos : step;
            pos += sw_http_feed(&g_h, g_big + pos, c, 0, &ev);
        }
        CHECK_EQ(ev.type, SW_HTTP_EV_ERROR);
        CHECK_EQ(ev.err, SW_HTTP_ERR_TOO_LARGE);
        CHECK(sw_http_stopped(&g_h));
    }
    /* Head ending exactly at the limit passes; one byte more fails (folded or not: the whole-head
       fast path has a check of its own for each), for a request and for a response head
       (Content-Length 0: no body). */
    static const char *const starts[2] = {"GET / HTTP/1.1\r\nX: ",
                                          "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX: "};
    for (int d = 0; d < 2; d++) {
        for (int extra = 0; extra <= 3; extra++) {
            struct sw_http_opts o;
            sw_http_opts_init(&o);
            o.max_head = 1000;
            o.fold_message = extra >= 2;
            n = (size_t)snprintf(g_big, sizeof(g_big), "%s", starts[d]);
            memset(g_big + n, 'b', 1000 - n - 4 + (size_t)(extra & 1));
            n = 1000 + (size_t)(extra & 1);
            memcpy(g_big + n - 4, "\r\n\r\n", 4);
            if (d == 0)
                sw_http_init(&g_h, SW_HTTP_REQUEST, &o, &g_req);
            else
                sw_http_init(&g_h, SW_HTTP_RESPONSE, &o, NULL);
            size_t c = sw_http_feed(&g_h, g_big, n, 0, &ev);
            if ((extra & 1) == 0) {
                CHECK_EQ(ev.type, SW_HTTP_EV_HEAD);
                CHECK_EQ(c, 1000);
            } else {
                CHECK_EQ(ev.type, SW_HTTP_EV_ERROR);
                CHECK_EQ(ev.err, SW_HTTP_ERR_TOO_LARGE);
            }
        }
    }
    /* Empty lines before a head, consumed by an earlier call, count towards the limit of the
       head (the whole-head fast path leaves such a head to the state machine): after "\r\n"
       or "\n", a head that ends at the limit passes and one a byte longer fails. */
    for (int extra = 0; extra <= 3; extra++) {
        struct sw_http_opts o;
        size_t lead = (extra & 2) ? 1 : 2;
        sw_http_opts_init(&o);
        o.max_head = 1000;
        o.fold_message = true;
        sw_http_init(&g_h, SW_HTTP_REQUEST, &o, &g_req);
        CHECK_EQ(sw_http_feed(&g_h, &"\r\n"[2 - lead], lead, 0, &ev), lead);
        CHECK_EQ(ev.type, SW_HTTP_EV_NONE);
        CHECK_EQ(snprintf(g_big, sizeof(g_big), "GET / HTTP/1.1\r\nX: "), 19);
        n = 1000 - lead + (size_t)(extra & 1);
        memset(g_big + 19, 'd', n - 19 - 4);
        memcpy(g_big + n - 4, "\r\n\r\n", 4);
        size_t c = sw_http_feed(&g_h, g_big, n, 0, &ev);
        if ((extra & 1) == 0) {
            CHECK_EQ(ev.type, SW_HTTP_EV_HEAD);
            CHECK_EQ(c, n);
        } else {
            CHECK_EQ(ev.type, SW_HTTP_EV_ERROR);
            CHECK_EQ(ev.err, SW_HTTP_ERR_TOO_LARGE);
        }
    }
    /* A 60 KiB head is fine with the default limit. */
    n = (size_t)snprintf(g_big, sizeof(g_big), "GET / HTTP/1.1\r\nX-Big: ");
    memset(g_big + n, 'c', 60 * 1024);
    n += 60 * 1024;
    n += (size_t)snprintf(g_big + n, sizeof(g_big) - n, "\r\n\r\n");
    sw_http_init(&g_h, SW_HTTP_REQUEST, &g_opts, &g_req);
    CHECK_EQ(sw_http_feed(&g_h, g_big, n, 0, &ev), n);
    CHECK_EQ(ev.type, SW_HTTP_EV_HEAD);
}

static void test_capture_bounds(void)
{
    struct sw_http_event ev;
    size_t n;
    struct sw_http_opts o;

    /* Long URL: kept up to SW_HTTP_TARGET_MAX - 1 bytes, flagged. */
    n = (size_t)snprintf(g_big, sizeof(g_big), "GET /");
    memset(g_big + n, 'u', 5000);
    n += 5000;
    n += (size_t)snprintf(g_big + n, sizeof(g_big) - n, "?q=1 HTTP/1.1\r\nHost: h\r\n\r\n");
    sw_http_init(&g_h, SW_HTTP_REQUEST, &g_opts, &g_req);
    CHECK_EQ(sw_http_feed(&g_h, g_big, n, 0, &ev), n);
    CHECK_EQ(ev.type, SW_HTTP_EV_HEAD);
    CHECK_EQ(g_req.target_len, SW_HTTP_TARGET_MAX - 1);
    CHECK(g_req.target_truncated);
    {
        size_t tl;
        CHECK_EQ(sw_http_req_target(&g_req, &tl)[0], '/');
    }
    check_host("h");

    /* Oversized sw8 is dropped (absent), a later duplicate is ignored too; http.headers is cut
       at the threshold. */
    sw_http_opts_init(&o);
    o.headers_threshold = 40;
    CHECK_EQ(sw_http_opts_add_header(&o, "X-A", 3), 0);
    CHECK_EQ(sw_http_opts_add_header(&o, "x-b", 3), 0);
    n = (size_t)snprintf(g_big, sizeof(g_big), "GET / HTTP/1.1\r\nsw8: ");
    memset(g_big + n, 's', 3000);
    n += 3000;
    n += (size_t)snprintf(g_big + n, sizeof(g_big) - n,
                          "\r\nx-a: 0123456789\r\nx-b: abcdefghijklmnopqrstuvwxyz\r\n"
                          "x-a: second\r\n\r\n");
    sw_http_init(&g_h, SW_HTTP_REQUEST, &o, &g_req);
    CHECK_EQ(sw_http_feed(&g_h, g_big, n, 0, &ev), n);
    CHECK_EQ(ev.type, SW_HTTP_EV_HEAD);
    CHECK_EQ(g_req.sw8_len, 0);
    CHECK_EQ(g_req.headers_len, 40);
    CHECK(g_req.headers_truncated);
    CHECK_STR(g_req.headers, "x-a=[0123456789, second]\nx-b=[abcdefghij");

    /* A forwarded sw8 followed by the one swagent appended: the last one counts; Host keeps
       the first. */
    n = (size_t)snprintf(g_big, sizeof(g_big),
                         "GET / HTTP/1.1\r\nHost: first\r\nsw8: upstream\r\nHost: second\r\n"
                         "sw8-x: 0\r\nsw8: closest-hop\r\nsw8-x: 1\r\n\r\n");
    sw_http_init(&g_h, SW_HTTP_REQUEST, &g_opts, &g_req);
    CHECK_EQ(sw_http_feed(&g_h, g_big, n, 0, &ev), n);
    CHECK_EQ(ev.type, SW_HTTP_EV_HEAD);
    CHECK_STR(g_req.sw8, "closest-hop");
    CHECK_STR(g_req.sw8x, "1");
    check_host("first");

    /* Many custom header values: scratch bounded, no overflow. */
    n = (size_t)snprintf(g_big, sizeof(g_big), "GET / HTTP/1.1\r\n");
    for (int i = 0; i < 500; i++)
        n += (size_t)snprintf(g_big + n, sizeof(g_big) - n, "X-A: value-%d\r\n", i);
    n += (size_t)snprintf(g_big + n, sizeof(g_big) - n, "\r\n");
    o.headers_threshold = 0; /* maximum */
    sw_http_init(&g_h, SW_HTTP_REQUEST, &o, &g_req);
    CHECK_EQ(sw_http_feed(&g_h, g_big, n, 0, &ev), n);
    CHECK_EQ(ev.type, SW_HTTP_EV_HEAD);
    CHECK(g_req.headers_truncated);
    CHECK(g_req.headers_len <= SW_HTTP_HEADERS_MAX - 1);
    CHECK(strncmp(g_req.headers, "x-a=[value-0, value-1, ", 23) == 0);

    /* Option errors. */
    CHECK_EQ(sw_http_opts_add_header(&o, "", 0), -EINVAL);
    CHECK_EQ(sw_http_opts_add_header(&o, "0123456789012345678901234567890123", 34), -EINVAL);
    for (int i = 0; i < 6; i++)
        CHECK_EQ(sw_http_opts_add_header(&o, "y", 1), 0);
    CHECK_EQ(sw_http_opts_add_header(&o, "z", 1), -ENOSPC);
}

static void test_eof(void)
{
    struct sw_http_event ev;
    static const char body[] = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc";
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Le";

    /* Cut inside a Content-Length body or a head: ERROR EOF. */
    sw_http_init(&g_h, SW_HTTP_RESPONSE, NULL, NULL);
    CHECK_EQ(sw_http_feed(&g_h, body, sizeof(body) - 1, 0, &ev), 39);
    CHECK_EQ(ev.type, SW_HTTP_EV_HEAD);
    CHECK_EQ(sw_http_feed(&g_h, body + 39, sizeof(body) - 1 - 39, 0, &ev), 3);
    CHECK_EQ(ev.type, SW_HTTP_EV_NONE);
    CHECK(sw_http_in_body(&g_h));
    sw_http_eof(&g_h, &ev);
    CHECK_EQ(ev.type, SW_HTTP_EV_ERROR);
    CHECK_EQ(ev.err, SW_HTTP_ERR_EOF);

    sw_http_init(&g_h, SW_HTTP_RESPONSE, NULL, NULL);
    CHECK_EQ(sw_http_feed(&g_h, head, sizeof(head) - 1, 0, &ev), sizeof(head) - 1);
    CHECK(sw_http_head_in_progress(&g_h));
    CHECK_EQ(ev.line_end, 17);
    sw_http_eof(&g_h, &ev);
    CHECK_EQ(ev.type, SW_HTTP_EV_ERROR);

    /* EOF between messages: nothing. */
    sw_http_init(&g_h, SW_HTTP_REQUEST, NULL, NULL);
    sw_http_eof(&g_h, &ev);
    CHECK_EQ(ev.type, SW_HTTP_EV_NONE);
    CHECK(sw_http_stopped(&g_h));
}

static void test_hold_lone_cr(void)
{
    /* The app writes the head in pieces, the last piece of the head being exactly "\r". */
    static const char a[] = "GET / HTTP/1.1\r\nHost: x\r\n";
    struct sw_http_event ev;

    sw_http_init(&g_h, SW_HTTP_REQUEST, NULL, &g_req);
    CHECK_EQ(sw_http_feed(&g_h, a, sizeof(a) - 1, SW_HTTP_FEED_HOLD, &ev), sizeof(a) - 1);
    CHECK_EQ(ev.type, SW_HTTP_EV_NONE);
    CHECK_EQ(ev.line_end, sizeof(a) - 1);
    CHECK(sw_http_head_in_progress(&g_h));
    CHECK_EQ(sw_http_feed(&g_h, "\r", 1, SW_HTTP_FEED_HOLD, &ev), 0);
    CHECK_EQ(ev.type, SW_HTTP_EV_NONE);
    /* The caller gives up holding: no insertion point. */
    CHECK_EQ(sw_http_feed(&g_h, "\r", 1, 0, &ev), 1);
    CHECK_EQ(sw_http_feed(&g_h, "\n", 1, 0, &ev), 1);
    CHECK_EQ(ev.type, SW_HTTP_EV_HEAD);
    CHECK_EQ(ev.insert_at, SW_HTTP_NO_OFFSET);
    check_host("x");
    /* "\r\n\r" at the end of a chunk: the final "\r" is held. */
    static const char b[] = "GET / HTTP/1.1\r\n\r";
    sw_http_init(&g_h, SW_HTTP_REQUEST, NULL, &g_req);
    CHECK_EQ(sw_http_feed(&g_h, b, sizeof(b) - 1, SW_HTTP_FEED_HOLD, &ev), sizeof(b) - 2);
    CHECK_EQ(sw_http_feed(&g_h, "\r\n", 2, SW_HTTP_FEED_HOLD, &ev), 2);
    CHECK_EQ(ev.type, SW_HTTP_EV_HEAD);
    CHECK_EQ(ev.insert_at, 0);
}

/* Every split, with and without hold, must give exactly `expect` (no insertion point logged
   unless the case has a head, so both modes are comparable). */
static void check_both_modes(const struct kase *k, const char *expect)
{
    for (int hold = 0; hold <= 1; hold++) {
        const char *log = check_all_splits(k, hold);
        if (strcmp(log, expect) != 0) {
            fprintf(stderr, "%s hold=%d:\n--- expected\n%s--- got\n%s", k->name, hold, expect, log);
            CHECK(0);
        }
    }
}

static void test_bare_cr(void)
{
    static const char not_http[] = "NOT_HTTP err=1\n";
    /* The fuzz_conn repro: http_parser (non-strict) would end the line at "\r" + 'b'. */
    struct kase k1 =
        KASE("cr-value", SW_HTTP_REQUEST, "GET / HTTP/1.1\r\nHost: a\r\nX: \rb\r\nY: z\r\n\r\n");
    check_both_modes(&k1, not_http);
    struct kase k2 = KASE("cr-name", SW_HTTP_REQUEST, "GET / HTTP/1.1\r\nX\rY: 1\r\n\r\n");
    check_both_modes(&k2, not_http);
    struct kase k3 = KASE("cr-target", SW_HTTP_REQUEST, "GET /a\rb HTTP/1.1\r\n\r\n");
    check_both_modes(&k3, not_http);
    struct kase k4 = KASE("cr-version", SW_HTTP_REQUEST, "GET / HTTP/1.1\rX: 1\r\n\r\n");
    check_both_modes(&k4, not_http);
    struct kase k5 = KASE("cr-blank", SW_HTTP_REQUEST, "GET / HTTP/1.1\r\nHost: a\r\n\rX\r\n\r\n");
    check_both_modes(&k5, not_http);
    struct kase k6 = KASE("cr-cr", SW_HTTP_REQUEST, "GET / HTTP/1.1\r\nX: a\r\r\n\r\n");
    check_both_modes(&k6, not_http);
    struct kase k7 = KASE("cr-leading", SW_HTTP_REQUEST, "\rGET / HTTP/1.1\r\n\r\n");
    check_both_modes(&k7, not_http);
    struct kase k8 =
        KASE("cr-status", SW_HTTP_RESPONSE, "HTTP/1.1 200 O\rK\r\nContent-Length: 0\r\n\r\n");
    check_both_modes(&k8, not_http);
    struct kase k9 = KASE("cr-resp-value", SW_HTTP_RESPONSE,
                          "HTTP/1.1 200 OK\r\nX: \ry\r\nContent-Length: 0\r\n\r\n");
    check_both_modes(&k9, not_http);
    /* After a first message: ERROR, the first message's events come first. */
    struct kase k10 = KASE("cr-second", SW_HTTP_REQUEST,
                           "GET /1 HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\nX: \r\r\n\r\n");
    check_case(&k10, "HEAD@19 st=0 m=GET ka=1 ins=17 [GET /1 h= sw8= corr= x= exp=0 up=0 ka=1 "
                     "1.1 hd=]\nMSG@19 st=0 m=GET ka=1 eof=0\nERROR err=1\n");
    /* A CR in a body is data; empty CRLF lines before a request line are skipped. */
    struct kase k11 = KASE("cr-body", SW_HTTP_REQUEST,
                           "POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\na\rb"
                           "\r\nGET / HTTP/1.1\r\n\r\n");
    check_case(&k11, "HEAD@38 st=0 m=POST ka=1 ins=36 [POST / h= sw8= corr= x= exp=0 up=0 ka=1 "
                     "1.1 hd=]\nMSG@41 st=0 m=POST ka=1 eof=0\n"
                     "HEAD@61 st=0 m=GET ka=1 ins=59 [GET / h= sw8= corr= x= exp=0 up=0 ka=1 1.1 "
                     "hd=]\nMSG@61 st=0 m=GET ka=1 eof=0\n");
    /* A header value with a control byte is refused by http_parser: not traced, documented. */
    struct kase k12 = KASE("ctl-value", SW_HTTP_REQUEST, "GET / HTTP/1.1\r\nsw8: a\x01b\r\n\r\n");
    check_both_modes(&k12, not_http);
    /* Mixed bare LF / CRLF: the insertion point is the start of the final line end. */
    struct kase k13 = KASE("lf-then-crlf", SW_HTTP_REQUEST, "GET / HTTP/1.1\nHost: a\n\r\n");
    check_case(&k13, "HEAD@25 st=0 m=GET ka=1 ins=23 [GET / h=a sw8= corr= x= exp=0 up=0 ka=1 "
                     "1.1 hd=]\nMSG@25 st=0 m=GET ka=1 eof=0\n");
    struct kase k14 = KASE("crlf-then-lf", SW_HTTP_REQUEST, "GET / HTTP/1.1\r\nHost: a\r\n\n");
    check_case(&k14, "HEAD@26 st=0 m=GET ka=1 ins=25 [GET / h=a sw8= corr= x= exp=0 up=0 ka=1 "
                     "1.1 hd=]\nMSG@26 st=0 m=GET ka=1 eof=0\n");
}

static void test_bare_cr_feeds(void)
{
    struct sw_http_event ev;
    static const char a[] = "GET / HTTP/1.1\r\nX: a\r";

    /* A CR ending one feed, a non-LF byte starting the next: refused at the next feed. */
    sw_http_init(&g_h, SW_HTTP_REQUEST, NULL, &g_req);
    CHECK_EQ(sw_http_feed(&g_h, a, sizeof(a) - 1, 0, &ev), sizeof(a) - 1);
    CHECK_EQ(ev.type, SW_HTTP_EV_NONE);
    CHECK_EQ(sw_http_feed(&g_h, "b\r\n\r\n", 5, 0, &ev), 5);
    CHECK_EQ(ev.type, SW_HTTP_EV_NOT_HTTP);
    CHECK_EQ(ev.err, SW_HTTP_ERR_SYNTAX);
    CHECK(sw_http_stopped(&g_h));
    /* Same with hold: the CR is held back, then refused with the byte after it. */
    sw_http_init(&g_h, SW_HTTP_REQUEST, NULL, &g_req);
    CHECK_EQ(sw_http_feed(&g_h, a, sizeof(a) - 1, SW_HTTP_FEED_HOLD, &ev), sizeof(a) - 2);
    CHECK_EQ(ev.type, SW_HTTP_EV_NONE);
    sw_http_feed(&g_h, "\rb\r\n\r\n", 6, SW_HTTP_FEED_HOLD, &ev);
    CHECK_EQ(ev.type, SW_HTTP_EV_NOT_HTTP);
    /* A CR ending a feed, then its LF: a normal line end, the head completes. */
    sw_http_init(&g_h, SW_HTTP_REQUEST, NULL, &g_req);
    CHECK_EQ(sw_http_feed(&g_h, a, sizeof(a) - 1, 0, &ev), sizeof(a) - 1);
    CHECK_EQ(sw_http_feed(&g_h, "\n\r\n", 3, 0, &ev), 3);
    CHECK_EQ(ev.type, SW_HTTP_EV_HEAD);
    CHECK_EQ(ev.insert_at, 1);
    /* The final CR ending a feed (no hold), its LF alone: no insertion point in this call. */
    static const char b[] = "GET / HTTP/1.1\r\nX: a\r\n\r";
    sw_http_init(&g_h, SW_HTTP_REQUEST, NULL, &g_req);
    CHECK_EQ(sw_http_feed(&g_h, b, sizeof(b) - 1, 0, &ev), sizeof(b) - 1);
    CHECK_EQ(ev.type, SW_HTTP_EV_NONE);
    CHECK_EQ(sw_http_feed(&g_h, "\n", 1, 0, &ev), 1);
    CHECK_EQ(ev.type, SW_HTTP_EV_HEAD);
    CHECK_EQ(ev.insert_at, SW_HTTP_NO_OFFSET);
    /* ... and the same final CR followed by another byte: refused. */
    sw_http_init(&g_h, SW_HTTP_REQUEST, NULL, &g_req);
    CHECK_EQ(sw_http_feed(&g_h, b, sizeof(b) - 1, 0, &ev), sizeof(b) - 1);
    sw_http_feed(&g_h, "X", 1, 0, &ev);
    CHECK_EQ(ev.type, SW_HTTP_EV_NOT_HTTP);
    /* A CR ending a feed at the head size limit, then a non-LF byte: syntax, as unsplit. */
    struct sw_http_opts o;
    sw_http_opts_init(&o);
    o.max_head = sizeof(a) - 1;
    sw_http_init(&g_h, SW_HTTP_REQUEST, &o, &g_req);
    CHECK_EQ(sw_http_feed(&g_h, a, sizeof(a) - 1, 0, &ev), sizeof(a) - 1);
    CHECK_EQ(ev.type, SW_HTTP_EV_NONE);
    sw_http_feed(&g_h, "b", 1, 0, &ev);
    CHECK_EQ(ev.type, SW_HTTP_EV_NOT_HTTP);
    CHECK_EQ(ev.err, SW_HTTP_ERR_SYNTAX);
    sw_http_init(&g_h, SW_HTTP_REQUEST, &o, &g_req);
    sw_http_feed(&g_h, "GET / HTTP/1.1\r\nX: a\rb", sizeof(a), 0, &ev);
    CHECK_EQ(ev.type, SW_HTTP_EV_NOT_HTTP);
    CHECK_EQ(ev.err, SW_HTTP_ERR_SYNTAX);
}

/*
 * The whole-head fast path (taken when no http.headers names are configured and a head at the
 * start of a call ends in it): exact logs for the common heads, the same logs whatever the
 * split (split feeding mostly takes the state machine), and one fast-path hit per head fed whole.
 */
/* Two events are the same (field by field; `brief`: the fields of a brief event). */
static bool same_event(const struct sw_http_event *a, const struct sw_http_event *b, bool brief)
{
    if (brief)
        return a->type == b->type && a->err == b->err && a->status == b->status &&
               a->method == b->method && a->message == b->message;
    return a->type == b->type && a->err == b->err && a->offset == b->offset &&
           a->insert_at == b->insert_at && a->line_end == b->line_end && a->msg_end == b->msg_end &&
           a->status == b->status && a->method == b->method && a->keep_alive == b->keep_alive &&
           a->at_eof == b->at_eof && a->message == b->message;
}

/*
 * sw_http_feed_request() / sw_http_feed_response() (conn.c's entries) against sw_http_feed()
 * with flags 0: the stream `in` fed in pieces of `step` bytes (0: whole) to two parsers gives
 * the same return values, events (brief ones: their fields) and captures. Returns the
 * fast-path hits of the direct one.
 */
static unsigned long feed_direct_vs_general(enum sw_http_dir dir, const char *in, size_t len,
                                            const enum sw_http_method *push, size_t npush,
                                            size_t step)
{
    static struct sw_http a, b;
    static struct sw_http_req ra, rb;
    unsigned long hits = 0;

    sw_http_init(&a, dir, &g_opts, &ra);
    sw_http_init(&b, dir, &g_opts, &rb);
    for (size_t i = 0; i < npush; i++) {
        sw_http_push_request(&a, push[i]);
        sw_http_push_request(&b, push[i]);
    }
    for (size_t base = 0; base < len;) {
        size_t piece = step && len - base > step ? step : len - base, off = 0;
        for (;;) {
            struct sw_http_event ea, eb;
            unsigned long before = sw_http_test_fast_hits;
            size_t na = sw_http_feed(&a, in + base + off, piece - off, 0, &ea);
            unsigned long mid = sw_http_test_fast_hits;
            size_t nb = dir == SW_HTTP_REQUEST
                            ? sw_http_feed_request(&b, in + base + off, piece - off, &eb)
                            : sw_http_feed_response(&b, in + base + off, piece - off, &eb);
            CHECK_EQ(sw_http_test_fast_hits - mid, mid - before);
            hits += sw_http_test_fast_hits - mid;
            CHECK_EQ(na, nb);
            /* A fast-path HEAD of a direct entry may be brief (at least when it is usual). */
            CHECK(
                same_event(&ea, &eb, sw_http_test_fast_hits != mid && eb.type == SW_HTTP_EV_HEAD));
            if (dir == SW_HTTP_REQUEST && ea.type == SW_HTTP_EV_HEAD) {
                size_t ta, tb;
                const char *pa = sw_http_req_target(&ra, &ta), *pb = sw_http_req_target(&rb, &tb);
                CHECK(ta == tb && memcmp(pa, pb, ta) == 0);
                CHECK_EQ(ra.method, rb.method);
                CHECK_EQ(ra.host_len, rb.host_len);
                CHECK_EQ(ra.sw8_len, rb.sw8_len);
            }
            off += na;
            if (ea.type == SW_HTTP_EV_NONE || sw_http_event_is_terminal(&ea) ||
                (off >= piece && !sw_http_has_pending(&a)))
                break;
        }
        base += piece;
    }
    return hits;
}

static void test_fast_path(void)
{
    static const char body64[] = "0123456789012345678901234567890123456789012345678901234567890123";
    struct sw_http_opts saved = g_opts;
    struct kase req = KASE("fast-req", SW_HTTP_REQUEST,
                           "GET /api/orders HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
                           "User-Agent: sw-bench\r\nAccept: */*\r\n\r\n"
                           "POST /p?q=1 HTTP/1.1\r\nhost: h\r\nsw8: 1-a-b\r\nSW8-X: x\r\n"
                           "sw8-correlation: c\r\nExpect: 100-continue\r\n"
                           "Content-Length:  3 \r\n\r\nabc"
                           "GET / HTTP/1.0\nConnection: keep-alive\nHost: \nHost: second\n\n");
    struct kase resp = {.name = "fast-resp", .dir = SW_HTTP_RESPONSE};
    static char rbuf[512];
    static const enum sw_http_method push[] = {SW_HTTP_M_GET, SW_HTTP_M_GET, SW_HTTP_M_HEAD};
    struct sw_http_event ev;
    unsigned long before;

    snprintf(rbuf, sizeof(rbuf),
             "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 64\r\n\r\n%s"
             "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
             "3\r\nabc\r\n0\r\n\r\n"
             "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n",
             body64);
    resp.in = rbuf;
    resp.len = strlen(rbuf);
    resp.push = push;
    resp.npush = SW_ARRAY_LEN(push);
    sw_http_opts_init(&g_opts);
    check_case(&req, "HEAD@85 st=0 m=GET ka=1 ins=83 [GET /api/orders h=127.0.0.1:8080 sw8= "
                     "corr= x= exp=0 up=0 ka=1 1.1 hd=]\n"
                     "MSG@85 st=0 m=GET ka=1 eof=0\n"
                     "HEAD@203 st=0 m=POST ka=1 ins=201 [POST /p?q=1 h=h sw8=1-a-b corr=c x=x "
                     "exp=1 up=0 ka=1 1.1 hd=]\n"
                     "MSG@206 st=0 m=POST ka=1 eof=0\n"
                     "HEAD@265 st=0 m=GET ka=1 ins=264 [GET / h=second sw8= corr= x= exp=0 "
                     "up=0 ka=1 1.0 hd=]\n"
                     "MSG@265 st=0 m=GET ka=1 eof=0\n");
    check_case(&resp, "HEAD@65 st=200 m=GET ka=1 ins=63\n"
                      "MSG@129 st=200 m=GET ka=1 eof=0\n"
                      "HEAD@195 st=200 m=GET ka=0 ins=193\n"
                      "MSG@208 st=200 m=GET ka=0 eof=0\n"
                      "HEAD@247 st=200 m=HEAD ka=1 ins=245\n"
                      "MSG@247 st=200 m=HEAD ka=1 eof=0\n");
    /* Each head fed whole at the start of a call is one fast-path hit. */
    sw_http_init(&g_h, SW_HTTP_REQUEST, &g_opts, &g_req);
    before = sw_http_test_fast_hits;
    for (size_t off = 0, n; off < req.len; off += n) {
        n = sw_http_feed(&g_h, req.in + off, req.len - off, 0, &ev);
        CHECK(ev.type == SW_HTTP_EV_HEAD || ev.type == SW_HTTP_EV_MESSAGE);
    }
    CHECK_EQ(sw_http_test_fast_hits - before, 3);
    sw_http_init(&g_h, SW_HTTP_RESPONSE, &g_opts, NULL);
    for (size_t i = 0; i < SW_ARRAY_LEN(push); i++)
        sw_http_push_request(&g_h, push[i]);
    before = sw_http_test_fast_hits;
    for (size_t off = 0, n; off < resp.len; off += n) {
        n = sw_http_feed(&g_h, resp.in + off, resp.len - off, 0, &ev);
        CHECK(ev.type == SW_HTTP_EV_HEAD || ev.type == SW_HTTP_EV_MESSAGE);
    }
    CHECK_EQ(sw_http_test_fast_hits - before, 3);
    /* conn.c's direct entries: the same as sw_http_feed(), whole heads through the fast path
       (3 hits each), and any split; with conn.c's options (brief events at the usual end) and
       without. */
    for (int k = 0; k < 4; k++) {
        g_opts.fold_message = (k & 1) != 0;
        g_opts.capture_refs = (k & 2) != 0;
        CHECK_EQ(feed_direct_vs_general(SW_HTTP_REQUEST, req.in, req.len, NULL, 0, 0), 3);
        CHECK_EQ(feed_direct_vs_general(SW_HTTP_RESPONSE, resp.in, resp.len, push,
                                        SW_ARRAY_LEN(push), 0),
                 3);
        for (size_t step = 1; step < 80; step++) {
            feed_direct_vs_general(SW_HTTP_REQUEST, req.in, req.len, NULL, 0, step);
            feed_direct_vs_general(SW_HTTP_RESPONSE, resp.in, resp.len, push, SW_ARRAY_LEN(push),
                                   step);
        }
    }
    /* With http.headers names configured, the state machine does it all. */
    g_opts = saved;
    CHECK_EQ(feed_direct_vs_general(SW_HTTP_REQUEST, req.in, req.len, NULL, 0, 0), 0);
    sw_http_init(&g_h, SW_HTTP_REQUEST, &g_opts, &g_req);
    before = sw_http_test_fast_hits;
    sw_http_feed(&g_h, req.in, req.len, 0, &ev);
    CHECK_EQ(ev.type, SW_HTTP_EV_HEAD);
    CHECK_EQ(sw_http_test_fast_hits, before);
}

/*
 * Sets g_h up from `head` (fed whole, fold_message off) and then feeds `pre` body zeros:
 * g_h is inside (or after) that message's body.
 */
static void unseen_setup(enum sw_http_dir dir, const char *head, size_t pre)
{
    static const char zeros[64];
    struct sw_http_event ev;
    size_t len = strlen(head), off = 0;

    sw_http_opts_init(&g_opts);
    sw_http_init(&g_h, dir, &g_opts, dir == SW_HTTP_REQUEST ? &g_req : NULL);
    while (off < len) {
        off += sw_http_feed(&g_h, head + off, len - off, 0, &ev);
        if (ev.type == SW_HTTP_EV_NONE || ev.type >= SW_HTTP_EV_NOT_HTTP)
            break;
    }
    CHECK(pre <= sizeof(zeros));
    if (pre) {
        sw_http_feed(&g_h, zeros, pre, 0, &ev);
        CHECK_EQ(ev.type, SW_HTTP_EV_NONE);
    }
}

/*
 * sw_http_body_unseen() (sendfile bytes) against sw_http_feed() of as many zeros: where it
 * counts, the same parser state and the same end of message (and status); elsewhere -1 with
 * nothing changed. A Content-Length body of 10 at every position and every count around its
 * end; a chunked, an until-close and an upgrade body, and a parser between messages: never.
 */
static void test_body_unseen(void)
{
    static const char zeros[64];
    static const struct {
        enum sw_http_dir dir;
        const char *head;
        int status; /* -1: sw_http_body_unseen() never counts here */
    } cases[] = {
        {SW_HTTP_RESPONSE, "HTTP/1.1 206 Partial\r\nContent-Length: 10\r\n\r\n", 206},
        {SW_HTTP_RESPONSE, "HTTP/1.1 404 Not Found\r\nServer: x\r\nContent-Length: 10\r\n\r\n",
         404},
        {SW_HTTP_REQUEST, "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n", 0},
        {SW_HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", -1},
        {SW_HTTP_RESPONSE, "HTTP/1.0 200 OK\r\n\r\n", -1},
        {SW_HTTP_REQUEST,
         "POST /u HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: x\r\nContent-Length: 10\r\n\r\n", -1},
        {SW_HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", -1},
    };
    struct sw_http_opts saved = g_opts;

    for (size_t i = 0; i < SW_ARRAY_LEN(cases); i++) {
        for (size_t pre = 0; pre < 10; pre++) {
            for (uint64_t n = 0; n <= 12; n++) {
                struct sw_http before, ref;
                struct sw_http_event ev;
                int st = -7, k;

                unseen_setup(cases[i].dir, cases[i].head, cases[i].status < 0 ? 0 : pre);
                before = g_h;
                k = sw_http_body_unseen(&g_h, n, &st);
                if (cases[i].status < 0 || n == 0 || pre + n > 10) {
                    CHECK_EQ(k, -1);
                    CHECK_EQ(st, -7);
                    CHECK(memcmp(&g_h, &before, sizeof(g_h)) == 0);
                    continue;
                }
                ref = before;
                sw_http_feed(&ref, zeros, (size_t)n, 0, &ev);
                CHECK(memcmp(&g_h, &ref, sizeof(g_h)) == 0);
                CHECK_EQ(k, pre + n == 10);
                CHECK_EQ(ev.type, k ? SW_HTTP_EV_MESSAGE : SW_HTTP_EV_NONE);
                if (k)
                    CHECK_EQ(st, cases[i].status);
                else
                    CHECK_EQ(st, -7);
            }
        }
    }
    g_opts = saved;
}

/* Feeds `head` whole to a fresh request parser with `o`; the HEAD event must come. */
static void feed_head(const struct sw_http_opts *o, const char *head)
{
    struct sw_http_event ev;

    sw_http_init(&g_h, SW_HTTP_REQUEST, o, &g_req);
    CHECK_EQ(sw_http_feed(&g_h, head, strlen(head), 0, &ev), strlen(head));
    CHECK_EQ(ev.type, SW_HTTP_EV_HEAD);
}

/*
 * The path information of struct sw_http_req (path_len, path_suffix, path_valid) and the
 * captures by reference: exact values for some targets, the reference computation for targets
 * of every length up to 48 with '?', '#', '.' and '/' at every position (around the 16-byte
 * blocks the fast path reads), and none from the state machine.
 */
static void test_path_info(void)
{
    static const struct {
        const char *t;
        unsigned plen, suf;
    } cases[] = {
        {"/", 1, 0},
        {"/a", 2, 0},
        {"/a.b", 4, 3},
        {"/a.b/c", 6, 0},
        {"/img/logo.png", 13, 10},
        {"/a/b.c?x=1.2", 6, 5},
        {"/a/b.c#f.g", 6, 5},
        {"/a?b#c", 2, 0},
        {"/a#b?c", 2, 0},
        {"/.x", 3, 2},
        {"/a./", 4, 0},
        {"/a.", 3, 3},
        {"/0123456789abcd.e", 17, 16},
        {"/0123456789abcde.fghij/k", 24, 0},
        {"/0123456789/abcdefghijklmnopqrstuvwxyz.html", 43, 39},
        {"/0123456789abcdefghijklmnopqrstuvwxyz.html?q=/x.y", 42, 38},
    };
    struct sw_http_opts o;
    char head[4096];
    size_t n;

    sw_http_opts_init(&o);
    for (size_t i = 0; i < SW_ARRAY_LEN(cases); i++) {
        snprintf(head, sizeof(head), "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", cases[i].t);
        feed_head(&o, head);
        if (!g_req.path_valid || g_req.path_len != cases[i].plen ||
            g_req.path_suffix != cases[i].suf) {
            fprintf(stderr, "path of %s: valid %d len %u suffix %u\n", cases[i].t, g_req.path_valid,
                    g_req.path_len, g_req.path_suffix);
            CHECK(0);
        }
        check_captures();
    }
    /* Every length, a stop character at every position, a second one after it. */
    for (unsigned tl = 1; tl <= 48; tl++) {
        for (unsigned pos = 1; pos < tl; pos++) {
            for (unsigned k = 0; k < 4; k++) {
                char t[64];
                memset(t, 'x', tl);
                t[0] = '/';
                t[pos] = "?#./"[k];
                if (pos + 2 < tl)
                    t[pos + 2] = "./?#"[(k + pos) % 4];
                n = (size_t)snprintf(head, sizeof(head), "GET %.*s HTTP/1.1\r\nHost: h\r\n\r\n",
                                     (int)tl, t);
                feed_head(&o, head);
                CHECK(g_req.path_valid);
                check_captures();
            }
        }
    }
    /* By reference: into the bytes fed; copied: NUL-terminated copies. */
    o.capture_refs = true;
    snprintf(head, sizeof(head), "GET /x.y HTTP/1.1\r\nHost:  host:1 \r\n\r\n");
    feed_head(&o, head);
    {
        size_t tl, hl;
        const char *t = sw_http_req_target(&g_req, &tl), *hv = sw_http_req_host(&g_req, &hl);
        CHECK(g_req.target_ref == head + 4 && t == head + 4 && tl == 4);
        CHECK(g_req.host_ref == head + 26 && hv == head + 26 && hl == 6);
    }
    o.capture_refs = false;
    feed_head(&o, head);
    CHECK(!g_req.target_ref && !g_req.host_ref);
    CHECK_STR(g_req.target, "/x.y");
    CHECK_STR(g_req.host, "host:1");
    /* The state machine does not set them (header names configured; a target cut). */
    feed_head(&g_opts, "GET /a.b HTTP/1.1\r\n\r\n");
    CHECK(!g_req.path_valid && !g_req.target_ref);
    n = (size_t)snprintf(head, sizeof(head), "GET /");
    memset(head + n, 'u', 2000);
    snprintf(head + n + 2000, sizeof(head) - n - 2000, ".txt HTTP/1.1\r\n\r\n");
    feed_head(&o, head);
    CHECK(g_req.target_truncated && !g_req.path_valid);
}

static void test_sizes(void)
{
    printf("# sizeof(struct sw_http)=%zu sizeof(struct sw_http_req)=%zu "
           "sizeof(struct sw_http_opts)=%zu\n",
           sizeof(struct sw_http), sizeof(struct sw_http_req), sizeof(struct sw_http_opts));
    CHECK(sizeof(struct sw_http) <= 128);
    CHECK(sizeof(struct sw_http_req) <= 7 * 1024);
}

int main(void)
{
    setup_opts();
    RUN_TEST(test_sizes);
    RUN_TEST(test_simple_request);
    RUN_TEST(test_pipelined_requests);
    RUN_TEST(test_expect_continue);
    RUN_TEST(test_bare_lf);
    RUN_TEST(test_responses);
    RUN_TEST(test_connection_close_then_garbage);
    RUN_TEST(test_upgrade);
    RUN_TEST(test_not_http);
    RUN_TEST(test_head_limits);
    RUN_TEST(test_capture_bounds);
    RUN_TEST(test_eof);
    RUN_TEST(test_hold_lone_cr);
    RUN_TEST(test_bare_cr);
    RUN_TEST(test_bare_cr_feeds);
    RUN_TEST(test_fast_path);
    RUN_TEST(test_body_unseen);
    RUN_TEST(test_path_info);
    return 0;
}
