/*
 * fuzz_http.c - libFuzzer target for agent/http.c, and (with SW_FUZZ_REPLAY) a plain replay
 * executable over a seed corpus directory.
 *
 * Input: byte 0 selects the direction (bit 0), SW_HTTP_FEED_HOLD (bit 1), header collection
 * options (bit 2), EOF at the end (bit 3), a small head limit (bit 4; with bit 2 clear, no header
 * names, so that the whole-head fast path meets the limit); byte 1 seeds the split
 * points; the rest is the byte stream. The stream is fed whole and then split at
 * pseudo-random points (and one byte at a time for short inputs): the events, offsets and
 * captures must be the same, every offset in range, every string within its bound. Built with
 * SW_TESTING, the whole stream is also fed with http.c's whole-head fast path turned off: the
 * state machine alone must give the same log.
 */
#include "common.h"

#include "http.h"
#include "../unit/http_ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_MAX 65536

struct flog {
    char buf[LOG_MAX];
    size_t len;
};

static struct sw_http g_h;
static struct sw_http_req g_req;
/* Options by [fold_message][capture_refs]: defaults, header names, the small head limit (with
   one header name, and without). */
static struct sw_http_opts g_opts_def[2][2], g_opts_hdr[2][2], g_opts_small[2][2],
    g_opts_small_nh[2][2];
/* g_fold: runs that must log what unfolded ones do; g_refs: captures by reference allowed. */
static bool g_fold, g_refs;
/* The bytes of the sw_http_feed() call whose event is being logged (captures by reference
   must point into them). */
static const char *g_call;
static size_t g_call_len;

static void die(const char *what)
{
    fprintf(stderr, "fuzz_http: invariant failed: %s\n", what);
    abort();
}

#define ASSERT(c)                                                                                  \
    do {                                                                                           \
        if (!(c))                                                                                  \
            die(#c);                                                                               \
    } while (0)

static void put(struct flog *l, const char *fmt, unsigned long long a, unsigned long long b,
                unsigned long long c)
{
    if (l->len < LOG_MAX - 200)
        l->len += (size_t)snprintf(l->buf + l->len, LOG_MAX - l->len, fmt, a, b, c);
}

/* A capture by reference lies in the bytes of the call. */
static void check_ref(const char *p, size_t n)
{
    ASSERT(p >= g_call && n <= g_call_len && (size_t)(p - g_call) <= g_call_len - n);
}

static void check_req(void)
{
    const struct sw_http_req *r = &g_req;
    size_t tn, hn;
    const char *t = sw_http_req_target(r, &tn), *hv = sw_http_req_host(r, &hn);

    ASSERT(tn < SW_HTTP_TARGET_MAX && hn < SW_HTTP_HOST_MAX);
    if (r->target_ref)
        check_ref(t, tn);
    else
        ASSERT(r->target[tn] == '\0');
    if (r->host_ref)
        check_ref(hv, hn);
    else if (hn)
        ASSERT(r->host[hn] == '\0');
    ASSERT(g_refs || (!r->target_ref && !r->host_ref));
    ASSERT(r->sw8_len < SW_HTTP_SW8_MAX && (!r->sw8_len || r->sw8[r->sw8_len] == '\0'));
    ASSERT(r->corr_len < SW_HTTP_CORR_MAX && (!r->corr_len || r->corr[r->corr_len] == '\0'));
    ASSERT(r->sw8x_len < SW_HTTP_SW8X_MAX && (!r->sw8x_len || r->sw8x[r->sw8x_len] == '\0'));
    ASSERT(r->headers_len < SW_HTTP_HEADERS_MAX &&
           (!r->headers_len || r->headers[r->headers_len] == '\0'));
    ASSERT(memchr(r->method_text, '\0', sizeof(r->method_text)) != NULL);
    if (r->path_valid) {
        size_t pl, suf;
        ref_path(t, tn, &pl, &suf);
        ASSERT(!r->target_truncated && tn > 0 && t[0] == '/');
        ASSERT(r->path_len == pl && r->path_suffix == suf);
    }
}

static uint32_t hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static void log_ev(struct flog *l, const struct sw_http_event *ev, size_t base, bool hold)
{
    if (ev->type == SW_HTTP_EV_NONE)
        return;
    if (ev->type == SW_HTTP_EV_ERROR || ev->type == SW_HTTP_EV_NOT_HTTP) {
        put(l, "%llu err=%llu%.0llu\n", ev->type, ev->err, 0);
        return;
    }
    put(l, "%llu@%llu st=%llu", ev->type, base + ev->offset, (unsigned)ev->status);
    if (ev->type == SW_HTTP_EV_HEAD) {
        if (hold) {
            ASSERT(ev->insert_at != SW_HTTP_NO_OFFSET);
            put(l, " ins=%llu%.0llu%.0llu", base + ev->insert_at, 0, 0);
        }
        if (g_h.dir == SW_HTTP_REQUEST) {
            size_t tn, hn;
            const char *t = sw_http_req_target(&g_req, &tn), *hv = sw_http_req_host(&g_req, &hn);
            check_req();
            put(l, " m=%llu t=%llu h=%llu", g_req.method, hash(t, tn), hash(hv, hn));
            put(l, " s=%llu c=%llu x=%llu", hash(g_req.sw8, g_req.sw8_len),
                hash(g_req.corr, g_req.corr_len), hash(g_req.sw8x, g_req.sw8x_len));
            put(l, " hd=%llu f=%llu v=%llu", hash(g_req.headers, g_req.headers_len),
                (unsigned)(g_req.expect_continue | g_req.upgrade << 1 | g_req.keep_alive << 2 |
                           g_req.target_truncated << 3 | g_req.headers_truncated << 4),
                g_req.http_minor);
            put(l, " mt=%llu ml=%llu%.0llu",
                hash(g_req.method_text, strnlen(g_req.method_text, sizeof(g_req.method_text))),
                g_req.method_len, 0);
        }
    }
    put(l, " ka=%llu eof=%llu%.0llu\n", ev->keep_alive, ev->at_eof, 0);
    if (ev->type == SW_HTTP_EV_HEAD && ev->message) {
        /* Folded: logged as the MESSAGE an unfolded parser returns next. */
        ASSERT(g_fold && ev->msg_end >= ev->offset);
        put(l, "%llu@%llu st=%llu", SW_HTTP_EV_MESSAGE, base + ev->msg_end, (unsigned)ev->status);
        put(l, " ka=%llu eof=%llu%.0llu\n", ev->keep_alive, 0, 0);
    }
}

/* Feeds data with chunk ends given by `next_end` (NULL: whole). */
static void run(const uint8_t *d, size_t n, unsigned mode, uint32_t seed, int split, struct flog *l)
{
    bool hold = mode & 2;
    const struct sw_http_opts *o = (mode & 16)  ? ((mode & 4) ? &g_opts_small[g_fold][g_refs]
                                                              : &g_opts_small_nh[g_fold][g_refs])
                                   : (mode & 4) ? &g_opts_hdr[g_fold][g_refs]
                                                : &g_opts_def[g_fold][g_refs];
    size_t pos = 0, end = 0;
    bool stopped = false;
    uint32_t rng = (seed + (uint32_t)split) * 2654435761u + 1;

    l->len = 0;
    sw_http_init(&g_h, (mode & 1) ? SW_HTTP_RESPONSE : SW_HTTP_REQUEST, o, &g_req);
    if (mode & 1) {
        sw_http_push_request(&g_h, (enum sw_http_method)(seed % 10));
        sw_http_push_request(&g_h, SW_HTTP_M_HEAD);
    }
    while (end < n && !stopped) {
        if (split == 0) {
            end = n;
        } else if (split == 1) {
            end++;
        } else {
            rng = rng * 1103515245u + 12345u;
            end += 1 + (rng >> 16) % 64;
            if (end > n)
                end = n;
        }
        size_t chunk = end - pos, off = 0;
        for (int guard = 0;; guard++) {
            struct sw_http_event ev;
            ASSERT(guard < 1000000);
            size_t c = sw_http_feed(&g_h, (const char *)d + pos + off, chunk - off,
                                    hold ? SW_HTTP_FEED_HOLD : 0, &ev);
            ASSERT(c <= chunk - off);
            if (ev.type == SW_HTTP_EV_HEAD) {
                ASSERT((ev.message ? c == ev.msg_end : c == ev.offset) && c > 0);
                ASSERT(ev.insert_at == SW_HTTP_NO_OFFSET || ev.insert_at < ev.offset);
                ASSERT(d[pos + off + ev.offset - 1] == '\n');
            }
            if (ev.type == SW_HTTP_EV_MESSAGE)
                ASSERT(c == ev.offset);
            if (ev.type == SW_HTTP_EV_NONE && ev.line_end != SW_HTTP_NO_OFFSET)
                ASSERT(ev.line_end <= c && d[pos + off + ev.line_end - 1] == '\n');
            g_call = (const char *)d + pos + off;
            g_call_len = chunk - off;
            log_ev(l, &ev, pos + off, hold);
            off += c;
            if (sw_http_event_is_terminal(&ev)) {
                ASSERT(sw_http_stopped(&g_h));
                stopped = true;
                break;
            }
            if (ev.type == SW_HTTP_EV_NONE)
                break;
        }
        if (!stopped && off < chunk) {
            ASSERT(hold && chunk - off == 1 && d[pos + off] == '\r');
        }
        pos += off;
    }
    while (!stopped) {
        struct sw_http_event ev;
        sw_http_feed(&g_h, (const char *)d + n, 0, 0, &ev);
        if (ev.type == SW_HTTP_EV_NONE)
            break;
        g_call = (const char *)d + n;
        g_call_len = 0;
        log_ev(l, &ev, n, hold);
        stopped = sw_http_event_is_terminal(&ev);
    }
    if ((mode & 8) && !stopped) {
        struct sw_http_event ev;
        sw_http_eof(&g_h, &ev);
        log_ev(l, &ev, n, hold);
        ASSERT(sw_http_stopped(&g_h));
    }
}

static struct flog g_whole, g_split;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool inited;
    if (!inited) {
        for (int f = 0; f < 2; f++) {
            for (int rf = 0; rf < 2; rf++) {
                struct sw_http_opts *def = &g_opts_def[f][rf], *hdr = &g_opts_hdr[f][rf];
                struct sw_http_opts *small = &g_opts_small[f][rf];
                sw_http_opts_init(def);
                sw_http_opts_init(hdr);
                sw_http_opts_add_header(hdr, "x-a", 3);
                sw_http_opts_add_header(hdr, "user-agent", 10);
                sw_http_opts_add_header(hdr, "accept", 6);
                hdr->headers_threshold = 64;
                sw_http_opts_init(small);
                sw_http_opts_add_header(small, "x-a", 3);
                small->max_head = 64;
                sw_http_opts_init(&g_opts_small_nh[f][rf]);
                g_opts_small_nh[f][rf].max_head = 64;
                g_opts_small_nh[f][rf].fold_message = f != 0;
                g_opts_small_nh[f][rf].capture_refs = rf != 0;
                def->fold_message = hdr->fold_message = small->fold_message = f != 0;
                def->capture_refs = hdr->capture_refs = small->capture_refs = rf != 0;
            }
        }
        inited = true;
    }
    if (size < 2)
        return 0;
    unsigned mode = data[0];
    uint32_t seed = data[1];
    const uint8_t *d = data + 2;
    size_t n = size - 2;

    g_refs = true;
    run(d, n, mode, seed, 0, &g_whole);
    /* The same with every capture copied. */
    g_refs = false;
    run(d, n, mode, seed, 0, &g_split);
    if (g_whole.len != g_split.len || memcmp(g_whole.buf, g_split.buf, g_whole.len) != 0) {
        fprintf(stderr, "--- whole\n%.*s--- whole, copies\n%.*s", (int)g_whole.len, g_whole.buf,
                (int)g_split.len, g_split.buf);
        die("captures by reference differ from copies");
    }
    g_refs = true;
#ifdef SW_TESTING
    /* The whole stream without the whole-head fast path: the state machine alone. */
    sw_http_test_fast_off = true;
    run(d, n, mode, seed, 0, &g_split);
    sw_http_test_fast_off = false;
    if (g_whole.len != g_split.len || memcmp(g_whole.buf, g_split.buf, g_whole.len) != 0) {
        fprintf(stderr, "--- whole\n%.*s--- whole, no fast path\n%.*s", (int)g_whole.len,
                g_whole.buf, (int)g_split.len, g_split.buf);
        die("fast path differs from the state machine");
    }
#endif
    for (int s = 1; s <= 3; s++) {
        if (s == 1 && n > 2048)
            continue;
        run(d, n, mode, seed, s, &g_split);
        if (g_whole.len != g_split.len || memcmp(g_whole.buf, g_split.buf, g_whole.len) != 0) {
            fprintf(stderr, "--- whole\n%.*s--- split %d\n%.*s", (int)g_whole.len, g_whole.buf, s,
                    (int)g_split.len, g_split.buf);
            die("split run differs from whole run");
        }
    }
    /* Folded (opts.fold_message): the same messages at the same offsets, none lost. */
    g_fold = true;
    for (int s = 0; s <= 3; s += 3) {
        g_refs = s != 0; /* whole: mostly the fast path, copies; split: by reference */
        run(d, n, mode, seed, s, &g_split);
        if (g_whole.len != g_split.len || memcmp(g_whole.buf, g_split.buf, g_whole.len) != 0) {
            fprintf(stderr, "--- whole\n%.*s--- folded %d\n%.*s", (int)g_whole.len, g_whole.buf, s,
                    (int)g_split.len, g_split.buf);
            die("folded run differs from unfolded run");
        }
    }
    g_fold = false;
    g_refs = true;
    return 0;
}

#ifdef SW_FUZZ_REPLAY
#include <dirent.h>

static uint8_t g_file[1 << 20];

/* Replays every file of the given directories, then simple mutations of each. Each input is
   copied into an allocation of exactly its size, so that ASan sees a read past its end. */
int main(int argc, char **argv)
{
    int files = 0;
    for (int a = 1; a < argc; a++) {
        DIR *dir = opendir(argv[a]);
        struct dirent *de;
        if (!dir) {
            fprintf(stderr, "cannot open %s\n", argv[a]);
            return 1;
        }
        while ((de = readdir(dir)) != NULL) {
            char path[4096];
            FILE *f;
            size_t n;
            if (de->d_name[0] == '.')
                continue;
            snprintf(path, sizeof(path), "%s/%s", argv[a], de->d_name);
            f = fopen(path, "rb");
            if (!f)
                continue;
            n = fread(g_file, 1, sizeof(g_file), f);
            bool more = fgetc(f) != EOF;
            fclose(f);
            if (more) {
                fprintf(stderr, "%s: larger than %zu bytes\n", path, sizeof(g_file));
                return 1;
            }
            uint8_t *in = malloc(n ? n : 1);
            if (!in)
                return 1;
            memcpy(in, g_file, n);
            LLVMFuzzerTestOneInput(in, n);
            /* Every mode, and byte flips at a few positions. */
            for (unsigned m = 0; m < 32 && n >= 2; m++) {
                uint8_t save = in[0];
                in[0] = (uint8_t)((save & ~31u) | m);
                LLVMFuzzerTestOneInput(in, n);
                in[0] = save;
            }
            for (size_t i = 2; i < n; i += 1 + n / 16) {
                uint8_t save = in[i];
                in[i] ^= 0x20;
                LLVMFuzzerTestOneInput(in, n);
                in[i] = '\r';
                LLVMFuzzerTestOneInput(in, n);
                in[i] = save;
            }
            free(in);
            files++;
        }
        closedir(dir);
    }
    printf("replayed %d files\n", files);
    return files > 0 ? 0 : 1;
}
#endif
