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

/* Feeds one input (mode byte, seed byte, stream) through the fuzz checks; hashes the log. */
static void one(const uint8_t *d, size_t n)
{
    LLVMFuzzerTestOneInput(d, n);
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
    const struct sw_http_opts *o = (mode & 4) ? &g_opts_hdr : NULL;
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
    if (digest)
        printf("%08x\n", g_digest);
    else
        printf("ok: %lu inputs (%d corpus files): %lu heads, %lu NOT_HTTP/ERROR; digest %08x\n",
               g_inputs, files, g_heads, g_errors, g_digest);
    /* The inputs must mostly parse, or the comparison would prove little. */
    if (g_heads < g_inputs / 2) {
        fprintf(stderr, "too few heads parsed\n");
        return 1;
    }
    return 0;
}
