/*
 * test_http_diff.c - differential test of agent/http.c's scanner: its bulk paths (a whole
 * head in one call: SSE2 runs, names matched in place, direct state jumps) against its
 * byte-at-a-time path (one byte per call: scalar loops, names kept across calls).
 *
 * Rules: every input is fed whole, one byte at a time and in random splits (the checks of
 * tests/fuzz/fuzz_http.c, included here: the event sequences, offsets and captures must be
 * identical, or the test aborts). Inputs: generated HTTP/1.x streams (requests and
 * responses with known, configured and unknown headers of every length around the 16-byte
 * blocks, mixed case, OWS, bare LF, chunked bodies, trailers, bad bytes), a sweep of every
 * byte value at every position of a target, a header name, a header value (plain, captured,
 * Content-Length digits) and a reason phrase, and the fuzz seed corpus (argv[1..]). With --digest
 * it prints a hash of all the whole-buffer event logs: the same test built with -DSW_HTTP_NO_SIMD
 * (scalar loops only) must print the same digest (ctest test http_diff_simd_vs_scalar).
 */
#include "common.h"

#include "fuzz/fuzz_http.c"

#include <dirent.h>
#include <stdlib.h>

static uint32_t g_rng = 12345u;
static uint32_t g_digest = 2166136261u;
static unsigned long g_inputs, g_heads, g_errors;

static uint32_t rnd(uint32_t n)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 17;
    g_rng ^= g_rng << 5;
    return n ? g_rng % n : 0;
}

struct gbuf {
    uint8_t b[16384];
    size_t n;
};

static void app(struct gbuf *g, const char *s, size_t n)
{
    if (g->n + n <= sizeof(g->b)) {
        memcpy(g->b + g->n, s, n);
        g->n += n;
    }
}

static void apps(struct gbuf *g, const char *s)
{
    app(g, s, strlen(s));
}

static void appc(struct gbuf *g, char c)
{
    app(g, &c, 1);
}

/*
 * Feeds one input (mode byte, seed byte, stream) through the fuzz checks, from a heap copy of
 * exactly its size (so ASan sees any read past the stream's end); hashes the log.
 */
static void one(const uint8_t *d, size_t n)
{
    uint8_t *c = malloc(n ? n : 1);

    ASSERT(c != NULL);
    memcpy(c, d, n);
    LLVMFuzzerTestOneInput(c, n);
    free(c);
    g_digest = (g_digest ^ hash(g_whole.buf, g_whole.len)) * 16777619u;
    g_inputs++;
    for (size_t i = 0; i < g_whole.len; i++) {
        if (i == 0 || g_whole.buf[i - 1] == '\n') {
            g_heads += g_whole.buf[i] == '1' && g_whole.buf[i + 1] == '@';
            g_errors +=
                (g_whole.buf[i] == '4' || g_whole.buf[i] == '5') && g_whole.buf[i + 1] == ' ';
        }
    }
}

/* Random bytes of a class: 0 token, 1 value, 2 target; now and then a byte of another. */
static void rand_bytes(struct gbuf *g, size_t n, int cls_, bool bad)
{
    static const char tok[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-"
                              "!#$%&'*+.^_`|~";
    static const uint8_t odd[] = {0x01, 0x7f, 0x80, 0xff, '\t', ' ', '\r', '\n', ':', '"', 0};
    for (size_t i = 0; i < n; i++) {
        if (bad && rnd(40) == 0) {
            appc(g, (char)odd[rnd(sizeof(odd))]);
            continue;
        }
        switch (cls_) {
        case 0:
            appc(g, tok[rnd(sizeof(tok) - 1)]);
            break;
        case 1:
            appc(g, rnd(8) == 0    ? (char)(0x80 + rnd(128))
                    : rnd(10) == 0 ? ' '
                                   : (char)(0x21 + rnd(94)));
            break;
        default:
            appc(g, rnd(10) == 0 ? (char)(0x80 + rnd(128)) : (char)(0x21 + rnd(94)));
            break;
        }
    }
}

static void eol(struct gbuf *g, bool bad)
{
    apps(g, rnd(12) == 0 ? "\n" : (bad && rnd(200) == 0) ? "\r" : "\r\n");
}

static const char *const g_names[] = {
    "Host",
    "host",
    "HOST",
    "sw8",
    "SW8",
    "sw8-correlation",
    "Sw8-Correlation",
    "sw8-x",
    "SW8-X",
    "Expect",
    "Content-Length",
    "content-length",
    "CONTENT-LENGTH",
    "Transfer-Encoding",
    "transfer-encoding",
    "Connection",
    "connection",
    "Proxy-Connection",
    "Upgrade",
    "upgrade",
    "User-Agent",
    "user-agent",
    "x-a",
    "X-A",
    "Accept",
    "Content-Type",
    "Date",
    "Server",
    "Last-Modified",
    "ETag",
    "Accept-Ranges",
    "X-Forwarded-For",
    "X-Very-Long-Header-Name-Beyond-Sixteen",
    "Foo.Bar",
    "Foo_Bar",
    "a",
    "Hos",
    "Hostt",
    "sw9",
    "Content-Lengthh",
    "Bad Name",
    "Bad(Name",
    "Transfer_Encoding",
};

/* One message of direction dir (0 request, 1 response) appended to g. */
static void gen_message(struct gbuf *g, int dir, bool bad)
{
    static const char *const methods[] = {"GET",      "POST",    "HEAD",    "PUT",
                                          "DELETE",   "OPTIONS", "CONNECT", "PROPFIND",
                                          "M-SEARCH", "PATCH",   "GEt",     "FOO"};
    static const int statuses[] = {200, 200, 200, 204, 304, 100, 101, 404, 500, 301};
    int body = -1; /* -1 none, -2 chunked, else Content-Length */
    bool connect = false;

    if (rnd(10) == 0)
        eol(g, bad); /* empty lines before a start line */
    if (dir == 0) {
        const char *m = methods[rnd(bad ? SW_ARRAY_LEN(methods) : SW_ARRAY_LEN(methods) - 2)];
        connect = strcmp(m, "CONNECT") == 0;
        apps(g, m);
        appc(g, ' ');
        if (connect) {
            apps(g, "example.com:443");
        } else {
            switch (rnd(6)) {
            case 0:
                apps(g, "*");
                break;
            case 1:
                apps(g, "http://example.com/");
                rand_bytes(g, rnd(40), 2, bad);
                break;
            default:
                appc(g, '/');
                rand_bytes(g, rnd(rnd(4) == 0 ? 1200 : 50), 2, bad);
                break;
            }
        }
        apps(g, rnd(8) == 0 ? " HTTP/1.0" : (bad && rnd(50) == 0) ? " HTTP/2.0" : " HTTP/1.1");
    } else {
        char st[32];
        snprintf(st, sizeof(st), "HTTP/1.%d %d", rnd(8) == 0 ? 0 : 1,
                 statuses[rnd(SW_ARRAY_LEN(statuses))]);
        apps(g, st);
        if (rnd(6) != 0) {
            appc(g, ' ');
            rand_bytes(g, rnd(40), 1, bad);
        }
    }
    eol(g, bad);
    for (unsigned k = 0, nh = rnd(10); k < nh; k++) {
        const char *nm = g_names[rnd(bad ? SW_ARRAY_LEN(g_names) : SW_ARRAY_LEN(g_names) - 9)];
        apps(g, nm);
        if (rnd(30) == 0)
            rand_bytes(g, rnd(20), 0, bad); /* a longer, unknown name */
        appc(g, ':');
        for (unsigned w = rnd(3); w > 0; w--)
            appc(g, rnd(4) == 0 ? '\t' : ' ');
        if (strcasecmp(nm, "Content-Length") == 0 && body == -1) {
            char v[24];
            body = (int)rnd(100);
            snprintf(v, sizeof(v), "%d%s", body, rnd(10) == 0 ? " " : "");
            apps(g, v);
        } else if (strcasecmp(nm, "Transfer-Encoding") == 0 && body == -1) {
            static const char *const te[] = {"chunked", "gzip, chunked", "CHUNKED", "chunked, gzip",
                                             "chunked "};
            unsigned t = rnd(SW_ARRAY_LEN(te));
            apps(g, te[t]);
            body = -2;
        } else if (strcasecmp(nm, "Connection") == 0 || strcasecmp(nm, "Proxy-Connection") == 0) {
            static const char *const co[] = {"close",   "keep-alive", "Keep-Alive, Upgrade",
                                             "upgrade", "close ,x",   "foo bar"};
            apps(g, co[rnd(SW_ARRAY_LEN(co))]);
        } else if (strcasecmp(nm, "Expect") == 0) {
            apps(g, rnd(2) ? "100-continue" : "100-Continue  ");
        } else if (strcasecmp(nm, "sw8") == 0) {
            apps(g, "1-MQ==-MQ==-0-c2Vydg==-aW5zdA==-L3A=-aG9zdA==");
        } else {
            rand_bytes(g, rnd(rnd(5) == 0 ? 300 : 40), 1, bad);
        }
        for (unsigned w = rnd(3) == 0 ? 1 + rnd(2) : 0; w > 0; w--)
            appc(g, ' ');
        eol(g, bad);
    }
    eol(g, bad);
    if (body >= 0) {
        rand_bytes(g, (size_t)body, 1, false);
    } else if (body == -2) {
        for (unsigned c = rnd(4); c > 0; c--) {
            char sz[16];
            unsigned len = 1 + rnd(40);
            snprintf(sz, sizeof(sz), rnd(2) ? "%x" : "%X", len);
            apps(g, sz);
            if (rnd(6) == 0)
                apps(g, ";ext=1");
            apps(g, "\r\n");
            rand_bytes(g, len, 1, false);
            apps(g, "\r\n");
        }
        apps(g, "0\r\n");
        if (rnd(3) == 0)
            apps(g, "X-Trailer: v\r\n");
        apps(g, "\r\n");
    }
}

static void generated(unsigned count)
{
    static struct gbuf g;
    for (unsigned k = 0; k < count; k++) {
        int dir = (int)rnd(2);
        bool bad = rnd(3) == 0;
        g.n = 0;
        /* Mode: direction, hold, header options, EOF; the small head limit now and then. */
        appc(&g, (char)((unsigned)dir | (rnd(16) << 1 & 14u) | (rnd(20) == 0 ? 16u : 0u)));
        appc(&g, (char)rnd(256));
        for (unsigned m = 1 + rnd(3); m > 0; m--)
            gen_message(&g, dir, bad);
        one(g.b, g.n);
    }
}

/* Every byte value at every position of a target, a name, values (plain, captured, digits), a
 * reason. */
static void sweep(void)
{
    static struct gbuf g;
    for (unsigned where = 0; where < 6; where++) {
        for (unsigned b = 0; b < 256; b++) {
            for (unsigned pos = 0; pos < 36; pos++) {
                char run[37];
                memset(run, where == 1 ? 'n' : 'v', 36);
                run[pos] = (char)b;
                g.n = 0;
                appc(&g, (char)(where == 3 ? 1 : where >= 4 ? 0 : 4)); /* 4, 5: no options */
                appc(&g, 0);
                if (where == 3) {
                    apps(&g, "HTTP/1.1 200 ");
                    app(&g, run, 36);
                    apps(&g, "\r\nContent-Length: 0\r\n\r\n");
                } else {
                    apps(&g, "GET /");
                    if (where == 0)
                        app(&g, run, 36);
                    apps(&g, " HTTP/1.1\r\nHost: h\r\n");
                    if (where == 1) {
                        app(&g, run, 36);
                        apps(&g, ": x\r\n");
                    } else if (where == 2) {
                        apps(&g, "User-Agent: ");
                        app(&g, run, 36);
                        apps(&g, "\r\n");
                    } else if (where == 4) { /* a captured value (slot_value) */
                        apps(&g, "sw8: ");
                        app(&g, run, 36);
                        apps(&g, "\r\nHost: ");
                        app(&g, run, 36);
                        apps(&g, "\r\n");
                    } else if (where == 5) { /* digits (cl_value) with one byte changed */
                        char digits[37];
                        memset(digits, '7', 36);
                        digits[pos] = (char)b;
                        apps(&g, "Content-Length: ");
                        app(&g, digits, pos < 18 ? 18 : 36);
                        apps(&g, "\r\n");
                    }
                    apps(&g, "\r\n");
                }
                one(g.b, g.n);
            }
        }
    }
}

/*
 * Feeds d[0..n) in two calls split at k (k == 0: whole), each chunk copied into a heap
 * buffer of exactly its size (so ASan sees any read past the bytes passed in), and logs the
 * events like run() does.
 */
static void run_split(const uint8_t *d, size_t n, unsigned mode, size_t k, struct flog *l)
{
    bool hold = mode & 2;
    const struct sw_http_opts *o = (mode & 4) ? &g_opts_hdr[0][1] : &g_opts_def[0][1];
    size_t ends[2] = {k ? k : n, n}, pos = 0;
    bool stopped = false;

    l->len = 0;
    sw_http_init(&g_h, (mode & 1) ? SW_HTTP_RESPONSE : SW_HTTP_REQUEST, o, &g_req);
    if (mode & 1)
        sw_http_push_request(&g_h, SW_HTTP_M_GET);
    for (int c = 0; c < 2 && !stopped; c++) {
        size_t end = ends[c], off = 0, chunk;
        char *cb;
        if (end <= pos)
            continue;
        chunk = end - pos;
        cb = malloc(chunk);
        ASSERT(cb != NULL);
        memcpy(cb, d + pos, chunk);
        for (int guard = 0;; guard++) {
            struct sw_http_event ev;
            size_t used;
            ASSERT(guard < 100000);
            used = sw_http_feed(&g_h, cb + off, chunk - off, hold ? SW_HTTP_FEED_HOLD : 0, &ev);
            ASSERT(used <= chunk - off);
            g_refs = true;
            g_call = cb + off;
            g_call_len = chunk - off;
            log_ev(l, &ev, pos + off, hold);
            off += used;
            if (sw_http_event_is_terminal(&ev)) {
                stopped = true;
                break;
            }
            if (ev.type == SW_HTTP_EV_NONE)
                break;
        }
        free(cb);
        if (!stopped && off < chunk) /* a held CR goes with the next chunk */
            ends[c] = pos + off;
        pos += off;
        if (c == 0 && !stopped && pos < ends[0])
            ends[0] = pos;
    }
    while (!stopped) {
        struct sw_http_event ev;
        sw_http_feed(&g_h, NULL, 0, 0, &ev);
        if (ev.type == SW_HTTP_EV_NONE)
            break;
        g_call = NULL;
        g_call_len = 0;
        log_ev(l, &ev, n, hold);
        stopped = sw_http_event_is_terminal(&ev);
    }
}

/*
 * Heads whose length is every value around the 16- and 64-byte blocks (padded by an X-Pad
 * value), alone, followed by a body, or followed by a pipelined next message; CRLF or bare LF;
 * with and without captured headers and HOLD. Each is fed whole and split in two at every
 * position: the events and captures must be the same.
 */
static void edges(void)
{
    static struct gbuf g;
    static const size_t lens[] = {47,  48,  49,  63,  64,  65,  79,  80,  81,  95,
                                  96,  97,  111, 112, 113, 127, 128, 129, 143, 144,
                                  145, 191, 192, 193, 255, 256, 257, 319, 320, 321};
    unsigned long runs = 0;

    for (unsigned dir = 0; dir < 2; dir++) {
        for (unsigned li = 0; li < SW_ARRAY_LEN(lens); li++) {
            for (unsigned tail = 0; tail < 3; tail++) {
                for (unsigned lfonly = 0; lfonly < 2; lfonly++) {
                    const char *eol_ = lfonly ? "\n" : "\r\n";
                    size_t el = strlen(eol_), fixed;
                    char head[512];
                    int hn;
                    if (dir == 0)
                        hn = snprintf(head, sizeof(head),
                                      "GET /api/orders HTTP/1.1%sHost: 127.0.0.1:8080%s"
                                      "User-Agent: sw-bench%ssw8: 1-MQ==-MQ==-0-c2Vy%s"
                                      "Connection: keep-alive%s%sX-Pad: ",
                                      eol_, eol_, eol_, eol_, eol_,
                                      tail == 1 ? "Content-Length: 5" : "X-A: a");
                    else
                        hn = snprintf(head, sizeof(head),
                                      "HTTP/1.1 200 OK%sContent-Type: text/plain%s"
                                      "Connection: keep-alive%s%sX-Pad: ",
                                      eol_, eol_, eol_,
                                      tail == 1 ? "Content-Length: 5" : "Content-Length: 0");
                    /* The line before X-Pad lacks its end: put it in. */
                    fixed = (size_t)hn;
                    g.n = 0;
                    appc(&g, 0);
                    appc(&g, 0);
                    {
                        char *xp = strstr(head, "X-Pad: ");
                        app(&g, head, (size_t)(xp - head));
                        apps(&g, eol_);
                        fixed = (size_t)(xp - head) + el + 7 + el + el; /* + pad line + blank */
                        if (lens[li] < fixed + 1)
                            continue;
                        apps(&g, "X-Pad: ");
                        for (size_t k = 0; k < lens[li] - fixed; k++)
                            appc(&g, (char)('a' + k % 26));
                        apps(&g, eol_);
                        apps(&g, eol_);
                    }
                    if (g.n - 2 != lens[li]) {
                        fprintf(stderr, "edges: head of %zu bytes, wanted %zu\n", g.n - 2,
                                lens[li]);
                        exit(1);
                    }
                    if (tail == 1)
                        apps(&g, "hello");
                    else if (tail == 2)
                        apps(&g, dir == 0 ? "GET /next HTTP/1.1\r\nHost: h\r\n\r\n"
                                          : "HTTP/1.1 204 No Content\r\n\r\n");
                    for (unsigned mode = dir; mode < 8; mode += 2) {
                        const uint8_t *d = g.b + 2;
                        size_t n = g.n - 2;
                        g.b[0] = (uint8_t)mode;
                        one(g.b, g.n); /* whole, byte at a time, random splits, digest */
                        run_split(d, n, mode, 0, &g_whole);
                        if (g_whole.len == 0 || g_whole.buf[0] != '1') {
                            fprintf(stderr, "edges: no head first:\n%.*s", (int)g_whole.len,
                                    g_whole.buf);
                            exit(1);
                        }
                        for (size_t k = 1; k < n; k++) {
                            run_split(d, n, mode, k, &g_split);
                            runs++;
                            if (g_whole.len != g_split.len ||
                                memcmp(g_whole.buf, g_split.buf, g_whole.len) != 0) {
                                fprintf(stderr, "--- whole\n%.*s--- split at %zu\n%.*s",
                                        (int)g_whole.len, g_whole.buf, k, (int)g_split.len,
                                        g_split.buf);
                                exit(1);
                            }
                        }
                    }
                }
            }
        }
    }
    if (runs < 10000) {
        fprintf(stderr, "edges: only %lu split runs\n", runs);
        exit(1);
    }
}

/* ---- the whole-head fast path's edges ------------------------------------------------ */

/* The 34 methods http.c knows, and two it does not. */
static const char *const g_methods[] = {
    "GET",        "POST",     "HEAD",      "PUT",       "DELETE",      "OPTIONS",
    "PATCH",      "CONNECT",  "TRACE",     "COPY",      "LOCK",        "MKCOL",
    "MOVE",       "PROPFIND", "PROPPATCH", "SEARCH",    "UNLOCK",      "BIND",
    "REBIND",     "UNBIND",   "ACL",       "REPORT",    "MKACTIVITY",  "CHECKOUT",
    "MERGE",      "M-SEARCH", "NOTIFY",    "SUBSCRIBE", "UNSUBSCRIBE", "PURGE",
    "MKCALENDAR", "LINK",     "UNLINK",    "SOURCE",    "FOO",         "UNSUBSCRIBEX",
};

/* Header names around the ones http.c matches (lengths, letters, case), and plain ones. */
static const char *const g_fast_names[] = {
    "Host",
    "host",
    "HOST",
    "Hos",
    "Hosts",
    "Hostt",
    "hOsT",
    "sw8",
    "SW8",
    "sw8x",
    "sw8-",
    "sw8-x",
    "SW8-X",
    "sw8-xx",
    "sw9-x",
    "sw8-correlation",
    "Sw8-Correlation",
    "sw8-correlatio",
    "sw8-correlations",
    "sw8-correlatiom",
    "Expect",
    "expect",
    "Expec",
    "Expects",
    "Upgrade",
    "upgrade",
    "Upgrad",
    "Upgrades",
    "Connection",
    "connection",
    "Connectio",
    "Connections",
    "Content-Length",
    "content-length",
    "CONTENT-LENGTH",
    "Content-Lengt",
    "Content-Lengths",
    "Content_Length",
    "Proxy-Connection",
    "proxy-connection",
    "Proxy-Connectio",
    "Transfer-Encoding",
    "transfer-encoding",
    "Transfer-Encodin",
    "Transfer-Encodings",
    "User-Agent",
    "Accept",
    "Accept-Encoding",
    "Content-Type",
    "Date",
    "Server",
    "Last-Modified",
    "ETag",
    "Accept-Ranges",
    "Cache-Control",
    "X-Forwarded-For",
    "Upgrade-Insecure-Requests",
    "sec-ch-ua-platform",
    "X_Under",
    "a.b",
    "x~y!z",
    "K",
    "Access-Control-Allow-Origin",
    "sw8_x",
    "sw8.a",
    "X-B3-TraceId",
    "Http2-Settings",
    "x1!y",
    "Content-Length2",
};

static void fast_value_bytes(struct gbuf *g, size_t n, bool bad)
{
    for (size_t i = 0; i < n; i++) {
        unsigned r = rnd(100);
        if (bad && r == 0)
            appc(g, (char)"\x01\x7f\r\n\x00\x1f"[rnd(6)]);
        else if (r < 8)
            appc(g, (char)(0x80 + rnd(128)));
        else if (r < 12)
            appc(g, rnd(3) ? ' ' : '\t');
        else
            appc(g, (char)(0x21 + rnd(94)));
    }
}

/* A length near one of the capture limits, or short. */
static size_t near(size_t limit)
{
    return rnd(3) == 0 ? rnd(40) : limit - 3 + rnd(6);
}

/* One header line of the fast-path generator. */
static void fast_header(struct gbuf *g, bool bad, int *body)
{
    const char *nm = g_fast_names[rnd(SW_ARRAY_LEN(g_fast_names))];
    char v[64];

    if (rnd(12) == 0) { /* a random name: letters, digits, '-', now and then a rare one */
        static const char nc[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789--";
        for (unsigned n = 1 + rnd(rnd(4) == 0 ? 40 : 18); n > 0; n--)
            appc(g, rnd(50) == 0 ? "_.!~#"[rnd(5)] : nc[rnd(sizeof(nc) - 1)]);
        nm = "";
    } else {
        apps(g, nm);
    }
    if (bad && rnd(60) == 0)
        appc(g, (char)" (@\x80\t"[rnd(5)]); /* a byte no name has */
    appc(g, ':');
    for (unsigned w = rnd(4); w > 0; w--)
        appc(g, rnd(3) == 0 ? '\t' : ' ');
    if (strcasecmp(nm, "host") == 0) {
        fast_value_bytes(g, near(SW_HTTP_HOST_MAX), bad);
    } else if (strcasecmp(nm, "sw8") == 0) {
        fast_value_bytes(g, near(SW_HTTP_SW8_MAX), bad);
    } else if (strcasecmp(nm, "sw8-correlation") == 0) {
        fast_value_bytes(g, near(SW_HTTP_CORR_MAX), bad);
    } else if (strcasecmp(nm, "sw8-x") == 0) {
        fast_value_bytes(g, near(SW_HTTP_SW8X_MAX), bad);
    } else if (strcasecmp(nm, "content-length") == 0) {
        static const char *const cl[] = {"0",
                                         "5",
                                         "64",
                                         "007",
                                         "0000000000000000000005",
                                         "18446744073709551615",
                                         "18446744073709551616",
                                         "1844674407370955161",
                                         "1844674407370955162",
                                         "9999999999999999999",
                                         "99999999999999999999",
                                         "12 ",
                                         "12\t",
                                         "1 2",
                                         "x",
                                         "",
                                         "5x",
                                         "+5",
                                         "-1",
                                         "01234567890123456789"};
        const char *c = cl[rnd(SW_ARRAY_LEN(cl))];
        apps(g, c);
        if (*body == -1 && strlen(c) <= 2 && c[0] >= '0' && c[0] <= '9')
            *body = atoi(c);
    } else if (strcasecmp(nm, "transfer-encoding") == 0) {
        static const char *const te[] = {
            "chunked",       "CHUNKED",       "gzip",
            "gzip, chunked", "chunked, gzip", "",
            "chun ked",      "chunked ",      "xxxxxxxxxxxxxxxxxxxxxxxxx",
            "chunkedx",      "identity"};
        apps(g, te[rnd(SW_ARRAY_LEN(te))]);
        if (*body == -1)
            *body = -2;
    } else if (strcasecmp(nm, "connection") == 0 || strcasecmp(nm, "proxy-connection") == 0) {
        static const char *const co[] = {"close",
                                         "keep-alive",
                                         "Keep-Alive",
                                         "upgrade",
                                         "Upgrade",
                                         "keep-alive, upgrade",
                                         "",
                                         "close ",
                                         "foo",
                                         "clos",
                                         "keep-alivex",
                                         "close,",
                                         "xxxxxxxxxxxxxxxxxxxxxxxxx",
                                         "TE",
                                         "cl\tose"};
        apps(g, co[rnd(SW_ARRAY_LEN(co))]);
    } else if (strcasecmp(nm, "expect") == 0) {
        static const char *const ex[] = {"100-continue",
                                         "100-Continue",
                                         "100-continue ",
                                         "100-continue                   ",
                                         "100-continue                  ",
                                         "100-continuex",
                                         "200-ok",
                                         ""};
        apps(g, ex[rnd(SW_ARRAY_LEN(ex))]);
    } else {
        fast_value_bytes(g, rnd(rnd(6) == 0 ? 120 : 30), bad);
    }
    for (unsigned w = rnd(4) == 0 ? 1 + rnd(2) : 0; w > 0; w--)
        appc(g, rnd(3) == 0 ? '\t' : ' ');
    snprintf(v, sizeof(v), "%s", rnd(10) == 0 ? "\n" : (bad && rnd(100) == 0) ? "\r" : "\r\n");
    apps(g, v);
}

/* One message for the fast-path generator: mostly what it takes, now and then what it gives
   up on. */
static void fast_message(struct gbuf *g, int dir, bool bad)
{
    int body = -1;

    if (bad && rnd(30) == 0)
        apps(g, "\r\n"); /* an empty line before the start line */
    if (dir == 0) {
        const char *m = rnd(3) ? "GET" : g_methods[rnd(SW_ARRAY_LEN(g_methods))];
        apps(g, rnd(60) == 0 ? "GEt" : m);
        appc(g, ' ');
        if (strcmp(m, "CONNECT") == 0) {
            apps(g, "example.com:443");
        } else {
            switch (rnd(12)) {
            case 0:
                apps(g, "*");
                break;
            case 1:
                apps(g, "http://example.com/");
                break;
            default:
                appc(g, '/');
                break;
            }
            /* Target bytes (>= 0x80 too), around the 1023 bytes kept now and then. */
            for (size_t n = rnd(4) == 0 ? 1018 + rnd(10) : rnd(40); n > 0; n--)
                appc(g, bad && rnd(300) == 0 ? (char)"\x7f\x01 "[rnd(3)]
                        : rnd(8) == 0        ? (char)(0x80 + rnd(128))
                                             : (char)(0x21 + rnd(94)));
        }
        apps(g, rnd(10) == 0 ? " HTTP/1.0" : (bad && rnd(30) == 0) ? " HTTP/1.2" : " HTTP/1.1");
    } else {
        static const char *const st[] = {"200", "200", "204", "304", "101",
                                         "100", "404", "000", "999", "199"};
        apps(g, rnd(10) == 0 ? "HTTP/1.0 " : (bad && rnd(30) == 0) ? "HTTP/2.0 " : "HTTP/1.1 ");
        apps(g, bad && rnd(40) == 0 ? "2x0" : st[rnd(SW_ARRAY_LEN(st))]);
        if (rnd(5) != 0) {
            appc(g, ' ');
            fast_value_bytes(g, rnd(30), bad);
        }
    }
    apps(g, rnd(10) == 0 ? "\n" : "\r\n");
    for (unsigned k = 0, nh = rnd(rnd(8) == 0 ? 40 : 10); k < nh; k++) {
        if (bad && rnd(80) == 0)
            appc(g, rnd(2) ? ' ' : '\t'); /* obs-fold */
        fast_header(g, bad, &body);
    }
    apps(g, rnd(10) == 0 ? "\n" : "\r\n");
    if (body >= 0) {
        fast_value_bytes(g, (size_t)body, false);
    } else if (body == -2 && rnd(2)) {
        apps(g, "3\r\nabc\r\n0\r\n\r\n");
    }
}

/*
 * Streams of heads on the fast path's accept / give-up edges: names confusable with the ones
 * matched, captured values at their size limits, targets around the 1023 bytes kept, every
 * method, CONNECT / absolute-form / '*' targets, Content-Length values with leading zeros,
 * 19 / 20 digits and OWS, Connection / Transfer-Encoding token lists, HT and OWS in values,
 * bytes >= 0x80, LF-only line ends, many headers, bad bytes now and then, and the stream cut
 * at a random length (so heads end at len, len - 1, ... or are incomplete). one() compares
 * whole / byte-at-a-time / split feeding and the whole run with the fast path turned off.
 * Returns the heads the fast path completed.
 */
static unsigned long fast_generated(unsigned count)
{
    static struct gbuf g;
    unsigned long before = sw_http_test_fast_hits;

    for (unsigned k = 0; k < count; k++) {
        int dir = (int)rnd(2);
        bool bad = rnd(4) == 0;
        size_t cut;
        g.n = 0;
        /* Mode: direction, hold, EOF; header options (no fast path) and the small head limit
           now and then. */
        appc(&g, (char)((unsigned)dir | (rnd(2) << 1) | (rnd(8) == 0 ? 4u : 0u) | (rnd(2) << 3) |
                        (rnd(30) == 0 ? 16u : 0u)));
        appc(&g, (char)rnd(256));
        for (unsigned m = 1 + rnd(3); m > 0; m--)
            fast_message(&g, dir, bad);
        if (rnd(4) == 0 && g.n > 3) { /* cut: heads end at len, len - 1, ..., or not at all */
            cut = rnd(8) == 0 ? 2 + rnd((uint32_t)(g.n - 2)) : g.n - rnd(4);
            g.n = cut < 2 ? 2 : cut;
        }
        one(g.b, g.n);
    }
    return sw_http_test_fast_hits - before;
}

/*
 * The fast path's copy of a call's last bytes (the lines within FAST_ROOM = 34 bytes of the end
 * are read in a zero-padded copy of the last 48 bytes, or of all of them in shorter calls):
 * heads of every length from 16 to 140 bytes whose last lines are of each kind (Host,
 * Content-Length, Connection, sw8, plain, long values, a bare LF, a byte the copy's zeros look
 * like, a CR or half a line at the very end), alone or followed by a body or another message.
 * Each is fed whole (fast path on and off, captures by reference and copied), split and byte
 * at a time by one().
 */
static unsigned long fast_tail_edges(void)
{
    static const char *const last[] = {
        "Host: h\r\n",
        "Host:  a.b.c:80  \r\n",
        "Content-Length: 3\r\n",
        "Content-Length: 0\r\n",
        "Connection: close\r\n",
        "Connection: keep-alive\r\n",
        "Connection: Keep-Alive \r\n",
        "Connection: clos\r\n",
        "sw8: 1-a-b\r\n",
        "X-A: abcdefghijklmnopq\r\n",
        "X: \r\n",
        "X-Y: a\n",
        "X-Z: \x01\r\n",
        "Accept: */*\r\n",
        "User-Agent: sw-bench\r\n",
        "Y: a\tb\r\n",
        /* 16-byte names, values whose CR is the last byte the unchecked loads may see */
        "Proxy-Connection: keep-alive\r\n",
        "Abcdefghijklmnop: 0123456789abcd\r\n",
        "Abcdefghijklmnop: 0123456789abcde\r\n",
        "Abcdefghijklmno: 0123456789abcde\r\n",
        /* the 17th byte after the ':' (checked for the CRLF when the 16 before it have no
           control byte): a CRLF, HT, a bare LF, a bare CR, a byte more; DEL just before it */
        "X-B: 0123456789abcde\r\n",
        "X-B: 0123456789abcde\t\r\n",
        "X-B: 0123456789abcde\n",
        "X-B: 0123456789abcde\rX\r\n",
        "X-B: 0123456789abcdef\r\n",
        "X-B: 0123456789abcd\x7f\r\n",
        "Host: 0123456789abcde\r\n",
        "Content-Length: 00000000000003\r\n",
    };
    static struct gbuf g;
    unsigned long before = sw_http_test_fast_hits;

    for (unsigned dir = 0; dir < 2; dir++) {
        for (size_t li = 0; li < SW_ARRAY_LEN(last); li++) {
            for (size_t want = 16; want <= 140; want++) {
                for (unsigned tail = 0; tail < 4; tail++) {
                    const char *start = dir ? "HTTP/1.1 200 OK\r\n" : "GET /a HTTP/1.1\r\n";
                    size_t fixed = strlen(start) + strlen(last[li]) + 2, pad;
                    g.n = 0;
                    appc(&g, (char)(dir | (tail == 3 ? 2u : 0u) | (want & 8)));
                    appc(&g, (char)want);
                    apps(&g, start);
                    if (want > fixed + 6) { /* a padding line before the last one */
                        pad = want - fixed - 6;
                        apps(&g, "P: ");
                        for (size_t k = 0; k < pad; k++)
                            appc(&g, (char)('a' + k % 26));
                        apps(&g, "\r\n");
                    } else if (want < fixed) {
                        continue;
                    }
                    apps(&g, last[li]);
                    apps(&g, tail == 2 ? "\n" : "\r\n");
                    if (tail == 1)
                        apps(&g, dir ? "abc" : "GET /b HTTP/1.1\r\n\r\n");
                    if (tail == 3 && g.n > 4) /* cut in the blank line or just before it */
                        g.n -= 1 + (want % 3);
                    one(g.b, g.n);
                }
            }
        }
    }
    return sw_http_test_fast_hits - before;
}

/*
 * Captured values (Host, sw8, sw8-correlation, sw8-x) of every length around the size of
 * their slot, with 0 to 2 SPs before and after them (the limit applies before the trailing
 * ones are trimmed), as the last line or followed by another, in heads the fast path takes.
 */
static void fast_cap_limits(void)
{
    static const struct {
        const char *name;
        size_t cap;
    } caps[] = {{"Host", SW_HTTP_HOST_MAX},
                {"sw8", SW_HTTP_SW8_MAX},
                {"sw8-correlation", SW_HTTP_CORR_MAX},
                {"sw8-x", SW_HTTP_SW8X_MAX}};
    static struct gbuf g;

    for (size_t c = 0; c < SW_ARRAY_LEN(caps); c++) {
        for (size_t n = caps[c].cap - 4; n <= caps[c].cap + 2; n++) {
            for (unsigned ws = 0; ws < 9; ws++) {
                g.n = 0;
                appc(&g, (char)(ws & 2));
                appc(&g, (char)n);
                apps(&g, "GET /a HTTP/1.1\r\n");
                apps(&g, caps[c].name);
                appc(&g, ':');
                for (unsigned k = 0; k < ws % 3; k++)
                    appc(&g, ' ');
                for (size_t k = 0; k < n; k++)
                    appc(&g, (char)('a' + k % 26));
                for (unsigned k = 0; k < ws / 3; k++)
                    appc(&g, ' ');
                apps(&g, "\r\n");
                if (ws & 1)
                    apps(&g, "Host: second\r\nX: y\r\n");
                apps(&g, "\r\n");
                one(g.b, g.n);
            }
        }
    }
}

/*
 * Every byte value at each position of a status line's " ddd", special bytes at each position
 * of reasons of every length, and of a request line's target (at every distance from the
 * 16-byte blocks' edges, '?', '#', '.' and '/' among the values): the SWAR status check, the
 * reason's line end and the target's path scan against the state machine.
 */
static void fast_line_sweep(void)
{
    static struct gbuf g;

    for (unsigned b = 0; b < 256; b++) {
        for (unsigned pos = 8; pos < 13; pos++) {
            char st[] = "HTTP/1.1 204 X\r\nContent-Length: 0\r\n\r\n";
            st[pos] = (char)b;
            g.n = 0;
            appc(&g, 1);
            appc(&g, 0);
            apps(&g, st);
            one(g.b, g.n);
        }
    }
    /* Reasons of every length up to 36 bytes (the status line's CRLF is looked for at the first
       control byte of the 16 bytes after "HTTP/1.1 200 ", or at the 17th) with HT, a bare LF,
       a bare CR, DEL or a byte >= 0x80 at each position, in calls of 19 bytes and more. */
    for (unsigned rl = 0; rl <= 36; rl++) {
        for (unsigned pos = 0; pos <= rl; pos++) {
            static const char special[] = "\t\n\r\x7f\x80x";
            for (size_t k = 0; k < sizeof(special) - 1; k++) {
                for (unsigned tail = 0; tail < 2; tail++) {
                    char r[40];
                    memset(r, 'r', rl);
                    if (pos < rl)
                        r[pos] = special[k];
                    g.n = 0;
                    appc(&g, 1);
                    appc(&g, 0);
                    apps(&g, "HTTP/1.1 200 ");
                    app(&g, r, rl);
                    apps(&g, tail ? "\r\nContent-Length: 0\r\n\r\n" : "\r\n\r\n");
                    one(g.b, g.n);
                }
            }
        }
    }
    for (unsigned tl = 1; tl <= 40; tl++) {
        for (unsigned pos = 1; pos < tl; pos++) {
            static const char special[] = "?#./ \x7f\x80%";
            for (size_t k = 0; k < sizeof(special) - 1; k++) {
                char t[48];
                memset(t, 'p', tl);
                t[0] = '/';
                t[pos] = special[k];
                if (pos + 3 < tl)
                    t[pos + 3] = special[(k + 1) % 4]; /* a second one after it */
                g.n = 0;
                appc(&g, 0);
                appc(&g, 0);
                apps(&g, pos % 2 ? "GET " : "PUT ");
                app(&g, t, tl);
                apps(&g, " HTTP/1.1\r\nHost: h\r\n\r\n");
                one(g.b, g.n);
            }
        }
    }
}

/*
 * Heads the fast path must complete (whole in one call, default options, with and without
 * fold_message and HOLD), and heads it must leave to the state machine: this fails if the
 * common case ever falls back to the slow path.
 */
static void fast_must_hit(void)
{
    static const struct {
        int dir;
        bool hit;
        const char *s;
    } heads[] = {
        {0, true,
         "GET /api/orders HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: sw-bench\r\n"
         "Accept: */*\r\n\r\n"},
        {1, true,
         "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 64\r\n\r\n"
         "0123456789012345678901234567890123456789012345678901234567890123"},
        {1, true,
         "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
         "Content-Type: text/plain\r\nContent-Length: 612\r\n"
         "Last-Modified: Mon, 01 Jan 2024 00:00:00 GMT\r\nConnection: keep-alive\r\n"
         "ETag: \"65920080-264\"\r\nAccept-Ranges: bytes\r\n\r\n"},
        {0, true, "GET /small.txt HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"},
        {0, true,
         "GET /x HTTP/1.1\r\nHost: h\r\nsw8: 1-MQ==-MQ==-0-c2Vydg==-aW5zdA==-L3A=-aG9zdA==\r\n"
         "sw8-correlation: a:b\r\nsw8-x: 0- \r\n\r\n"},
        {0, true, "POST /submit HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"},
        {0, true,
         "PUT /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"},
        {0, true,
         "GET / HTTP/1.1\r\nHost: www.example.com\r\nConnection: keep-alive\r\n"
         "Upgrade-Insecure-Requests: 1\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\n"
         "Accept: text/html,application/xhtml+xml;q=0.9,*/*;q=0.8\r\n"
         "Accept-Encoding: gzip, deflate\r\nAccept-Language: en-US,en;q=0.9\r\n"
         "Cookie: a=b; c=d\r\n\r\n"},
        {0, true, "GET / HTTP/1.0\nHost: a\n\n"},
        {0, true, "DELETE /item/1 HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n\r\n"},
        {1, true, "HTTP/1.1 204 No Content\r\nServer: x\r\n\r\n"},
        {1, true, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
        {1, true, "HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<html></html>"},
        {1, true, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"},
        /* Left to the state machine. */
        {0, false, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"},
        {0, false, "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n"},
        {0, false, "GET /a HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Upgrade\r\n\r\n"},
        {0, false, "GET /a HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n"},
        {0, false, "GET /a HTTP/1.1\r\nHost: h\r\nX-A: a\rb\r\n\r\n"},
        {0, false, "GET /a HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n"},
        {0, false, "\r\nGET /a HTTP/1.1\r\nHost: h\r\n\r\n"},
        {1, false, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
    };
    static struct sw_http_opts fold;

    sw_http_opts_init(&fold);
    fold.fold_message = true;
    for (size_t i = 0; i < SW_ARRAY_LEN(heads); i++) {
        for (unsigned v = 0; v < 4; v++) {
            struct sw_http_event ev;
            unsigned long before = sw_http_test_fast_hits;
            size_t n = strlen(heads[i].s);
            sw_http_init(&g_h, heads[i].dir ? SW_HTTP_RESPONSE : SW_HTTP_REQUEST,
                         (v & 1) ? &fold : NULL, &g_req);
            sw_http_push_request(&g_h, SW_HTTP_M_GET);
            sw_http_feed(&g_h, heads[i].s, n, (v & 2) ? SW_HTTP_FEED_HOLD : 0, &ev);
            if ((sw_http_test_fast_hits == before + 1) != heads[i].hit ||
                (heads[i].hit && ev.type != SW_HTTP_EV_HEAD)) {
                fprintf(stderr, "fast path %s for head %zu (variant %u):\n%s\n",
                        heads[i].hit ? "not taken" : "taken", i, v, heads[i].s);
                exit(1);
            }
        }
    }
}

static uint8_t g_file[1 << 20];

static int corpus(const char *dirname)
{
    DIR *dir = opendir(dirname);
    struct dirent *de;
    int files = 0;

    if (!dir) {
        fprintf(stderr, "cannot open %s\n", dirname);
        return -1;
    }
    while ((de = readdir(dir)) != NULL) {
        char path[4096];
        FILE *f;
        size_t n;
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dirname, de->d_name);
        f = fopen(path, "rb");
        if (!f)
            continue;
        n = fread(g_file, 1, sizeof(g_file), f);
        fclose(f);
        for (unsigned m = 0; m < 32 && n >= 2; m++) {
            g_file[0] = (uint8_t)m;
            one(g_file, n);
        }
        files++;
    }
    closedir(dir);
    return files;
}

int main(int argc, char **argv)
{
    bool digest = false;
    int files = 0;
    unsigned long fast_hits;

    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--digest") == 0) {
            digest = true;
            continue;
        }
        int f = corpus(argv[a]);
        if (f < 0)
            return 1;
        files += f;
    }
    sweep();
    edges();
    generated(30000);
    fast_must_hit();
    fast_line_sweep();
    fast_cap_limits();
    fast_hits = fast_generated(30000) + fast_tail_edges();
    if (digest)
        printf("%08x\n", g_digest);
    else
        printf("ok: %lu inputs (%d corpus files): %lu heads, %lu NOT_HTTP/ERROR, %lu heads of "
               "the fast-path streams on the fast path; digest %08x\n",
               g_inputs, files, g_heads, g_errors, fast_hits, g_digest);
    /* The inputs must mostly parse, or the comparison would prove little; and the fast-path
       streams must mostly take the fast path (each whole run of them is one pass). */
    if (g_heads < g_inputs / 2) {
        fprintf(stderr, "too few heads parsed\n");
        return 1;
    }
    if (fast_hits < 15000) {
        fprintf(stderr, "too few heads on the fast path: %lu\n", fast_hits);
        return 1;
    }
    return 0;
}
