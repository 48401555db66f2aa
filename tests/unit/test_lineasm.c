/*
 * test_lineasm.c - the reporter's line assembly of captured stdout/stderr (agent/reporter/
 * lineasm.c): pieces joined into lines, CR LF, empty lines, the context of a line's first
 * piece, cut lines and the bytes dropped after the cut, gaps, flushes, UTF-8 sanitising, and
 * SW_REC_LOG record parsing (record.h) including malformed records.
 */
#include "common.h"

#include "check.h"
#include "lineasm.h"
#include "record.h"

#include <errno.h>

struct got {
    int n;
    char text[16][256];
    bool cut[16];
    int64_t ms[16];
    char trace[16][SW_LINEASM_ID_MAX];
};

static void on_line(void *arg, const struct sw_line *l)
{
    struct got *g = arg;
    CHECK(g->n < 16);
    CHECK(l->text[l->len] == '\0');
    CHECK(l->len < sizeof(g->text[0]));
    memcpy(g->text[g->n], l->text, l->len + 1);
    g->cut[g->n] = l->cut;
    g->ms[g->n] = l->time_ms;
    snprintf(g->trace[g->n], sizeof(g->trace[0]), "%s", l->ctx->has ? l->ctx->trace_id : "");
    g->n++;
}

static void push(struct sw_lineasm *a, const char *s, int64_t ms, const struct sw_lineasm_ctx *c,
                 bool gap, struct got *g)
{
    sw_lineasm_push(a, s, strlen(s), ms, c, gap, on_line, g);
}

static void test_join(void)
{
    struct sw_lineasm a;
    struct got g = {0};
    struct sw_lineasm_ctx c1 = {.trace_id = "t1", .segment_id = "s1", .has = true};
    struct sw_lineasm_ctx c2 = {.trace_id = "t2", .segment_id = "s2", .has = true};
    CHECK_EQ(sw_lineasm_init(&a, 64), 0);
    push(&a, "one ", 10, &c1, false, &g);
    CHECK_EQ(g.n, 0);
    CHECK(sw_lineasm_pending(&a));
    push(&a, "two\r\nthree\n\n\r\nfour", 20, &c2, false, &g);
    CHECK_EQ(g.n, 2);
    CHECK_STR(g.text[0], "one two"); /* CR LF ends it, empty lines are skipped */
    CHECK_STR(g.trace[0], "t1");     /* the context of its first byte */
    CHECK_EQ(g.ms[0], 10);
    CHECK_STR(g.text[1], "three");
    CHECK_STR(g.trace[1], "t2");
    push(&a, " five\n", 30, NULL, false, &g);
    CHECK_EQ(g.n, 3);
    CHECK_STR(g.text[2], "four five");
    CHECK_STR(g.trace[2], "t2");
    CHECK_EQ(g.ms[2], 20);
    push(&a, "bare\n", 40, NULL, false, &g);
    CHECK_STR(g.trace[3], ""); /* no context */
    /* A partial line goes out as it is on a flush, and on a gap before the next piece. */
    push(&a, "partial", 50, NULL, false, &g);
    sw_lineasm_flush(&a, on_line, &g);
    CHECK_EQ(g.n, 5);
    CHECK_STR(g.text[4], "partial");
    CHECK(!sw_lineasm_pending(&a));
    sw_lineasm_flush(&a, on_line, &g);
    CHECK_EQ(g.n, 5);
    push(&a, "before gap", 60, NULL, false, &g);
    push(&a, "after\n", 70, NULL, true, &g);
    CHECK_EQ(g.n, 7);
    CHECK_STR(g.text[5], "before gap");
    CHECK_STR(g.text[6], "after");
    CHECK_EQ(a.lines, 7);
    sw_lineasm_free(&a);
}

static void test_cut(void)
{
    struct sw_lineasm a;
    struct got g = {0};
    CHECK_EQ(sw_lineasm_init(&a, 8), 0);
    push(&a, "12345678\n", 1, NULL, false, &g); /* exactly max: not cut */
    CHECK_EQ(g.n, 1);
    CHECK_STR(g.text[0], "12345678");
    CHECK(!g.cut[0]);
    push(&a, "abcdef", 2, NULL, false, &g);
    push(&a, "ghijk", 3, NULL, false, &g); /* over max: cut now, the rest dropped */
    CHECK_EQ(g.n, 2);
    CHECK_STR(g.text[1], "abcdefgh" SW_LINEASM_CUT_MARK);
    CHECK(g.cut[1]);
    CHECK(!sw_lineasm_pending(&a));
    push(&a, "still the same line", 4, NULL, false, &g);
    sw_lineasm_flush(&a, on_line, &g); /* nothing: that line went out already */
    CHECK_EQ(g.n, 2);
    push(&a, " end\nnext\n", 5, NULL, false, &g);
    CHECK_EQ(g.n, 3);
    CHECK_STR(g.text[2], "next");
    CHECK_EQ(g.ms[2], 5);
    CHECK_EQ(a.cut, 1);
    CHECK_EQ(a.dropped, 3 + 19 + 4);
    /* A cut line ended by a gap: the next piece starts a line. */
    push(&a, "0123456789", 6, NULL, false, &g);
    push(&a, "x\n", 7, NULL, true, &g);
    CHECK_EQ(g.n, 5);
    CHECK_STR(g.text[4], "x");
    sw_lineasm_free(&a);
}

static void test_utf8(void)
{
    struct sw_lineasm a;
    struct got g = {0};
    CHECK_EQ(sw_lineasm_init(&a, 64), 0);
    /* A sequence split across pieces is kept (lines are put together before sanitising). */
    push(&a, "caf\xc3", 1, NULL, false, &g);
    push(&a, "\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\n", 2, NULL, false, &g);
    CHECK_STR(g.text[0], "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    /* Invalid: a lone continuation, an overlong form, a surrogate, above U+10FFFF, a cut
     * sequence, 0xff; and NUL. */
    static const uint8_t bad[] = {'a',  0x80, 'b',  0xc0, 0x80, 'c',  0xed, 0xa0, 0x80, 'd', 0xf4,
                                  0x90, 0x80, 0x80, 'e',  0xe2, 0x82, 'f',  0xff, 0,    'g', '\n'};
    sw_lineasm_push(&a, bad, sizeof(bad), 3, NULL, false, on_line, &g);
    CHECK_EQ(g.n, 2);
#define R "\xef\xbf\xbd"
    CHECK_STR(g.text[1], "a" R "b" R R "c" R R R "d" R R R R "e" R R "f" R R "g");
#undef R
    char out[3 * 4];
    static const uint8_t all_bad[] = {0xfe, 0xc2, 0xf0, 0x80};
    CHECK_EQ(sw_utf8_sanitize(out, all_bad, 4), 12);
    sw_lineasm_free(&a);
}

/* Builds a SW_REC_LOG payload (record.h) with own ids, or a string trace id. */
static size_t make_rec(uint8_t *buf, size_t cap, int fd, unsigned flags, const char *trace,
                       const char *text)
{
    struct sw_wbuf w;
    sw_wbuf_init(&w, buf, cap);
    sw_wbuf_u8(&w, SW_REC_LOG_VERSION);
    sw_wbuf_u8(&w, (uint8_t)fd);
    sw_wbuf_u8(&w, (uint8_t)flags);
    sw_wbuf_u8(&w, 0);
    sw_wbuf_i64(&w, 1700000000123);
    if (flags & SW_REC_LOG_CTX) {
        uint8_t uuid[16];
        for (int i = 0; i < 16; i++)
            uuid[i] = (uint8_t)(0x10 * i + i);
        sw_wbuf_put(&w, uuid, 16);
        sw_wbuf_u32(&w, 42);
        sw_wbuf_i64(&w, 7001);
        sw_wbuf_i32(&w, 0);
        if (flags & SW_REC_LOG_OWN_TRACE)
            sw_wbuf_i64(&w, 7000);
        else
            sw_wbuf_cstr(&w, trace);
    }
    sw_wbuf_u32(&w, (uint32_t)strlen(text));
    sw_wbuf_put(&w, text, strlen(text));
    CHECK(!w.overflow);
    return w.len;
}

static void test_parse(void)
{
    uint8_t b[256];
    int fd;
    int64_t ms;
    bool gap;
    struct sw_lineasm_ctx c;
    const uint8_t *t;
    uint32_t tl;
    size_t n = make_rec(b, sizeof(b), 2, SW_REC_LOG_CTX | SW_REC_LOG_OWN_TRACE | SW_REC_LOG_GAP,
                        NULL, "hello\n");
    CHECK_EQ(sw_logrec_parse(b, (uint32_t)n, &fd, &ms, &gap, &c, &t, &tl), 0);
    CHECK_EQ(fd, 2);
    CHECK_EQ(ms, 1700000000123);
    CHECK(gap && c.has);
    CHECK_STR(c.trace_id, "00112233445566778899aabbccddeeff.42.7000");
    CHECK_STR(c.segment_id, "00112233445566778899aabbccddeeff.42.7001");
    CHECK_EQ(c.span_id, 0);
    CHECK_EQ(tl, 6);
    CHECK(memcmp(t, "hello\n", 6) == 0);
    /* Every shorter prefix, and a longer record, are refused. */
    for (size_t k = 0; k < n; k++)
        CHECK_EQ(sw_logrec_parse(b, (uint32_t)k, &fd, &ms, &gap, &c, &t, &tl), -EBADMSG);
    b[n] = 'x';
    CHECK_EQ(sw_logrec_parse(b, (uint32_t)n + 1, &fd, &ms, &gap, &c, &t, &tl), -EBADMSG);

    n = make_rec(b, sizeof(b), 1, SW_REC_LOG_CTX, "upstream-trace-1", "x");
    CHECK_EQ(sw_logrec_parse(b, (uint32_t)n, &fd, &ms, &gap, &c, &t, &tl), 0);
    CHECK_STR(c.trace_id, "upstream-trace-1");
    CHECK(!gap);
    n = make_rec(b, sizeof(b), 1, 0, NULL, "no ctx");
    CHECK_EQ(sw_logrec_parse(b, (uint32_t)n, &fd, &ms, &gap, &c, &t, &tl), 0);
    CHECK(!c.has);
    /* Bad: fd 3, an unknown flag, a version, an empty text, an empty or NUL trace id. */
    n = make_rec(b, sizeof(b), 3, 0, NULL, "x");
    CHECK_EQ(sw_logrec_parse(b, (uint32_t)n, &fd, &ms, &gap, &c, &t, &tl), -EBADMSG);
    n = make_rec(b, sizeof(b), 1, 0x80, NULL, "x");
    CHECK_EQ(sw_logrec_parse(b, (uint32_t)n, &fd, &ms, &gap, &c, &t, &tl), -EBADMSG);
    n = make_rec(b, sizeof(b), 1, 0, NULL, "x");
    b[0] = 9;
    CHECK_EQ(sw_logrec_parse(b, (uint32_t)n, &fd, &ms, &gap, &c, &t, &tl), -EBADMSG);
    n = make_rec(b, sizeof(b), 1, 0, NULL, "");
    CHECK_EQ(sw_logrec_parse(b, (uint32_t)n, &fd, &ms, &gap, &c, &t, &tl), -EBADMSG);
    n = make_rec(b, sizeof(b), 1, SW_REC_LOG_CTX, "", "x");
    CHECK_EQ(sw_logrec_parse(b, (uint32_t)n, &fd, &ms, &gap, &c, &t, &tl), -EBADMSG);
    n = make_rec(b, sizeof(b), 1, SW_REC_LOG_OWN_TRACE, NULL, "x");
    CHECK_EQ(sw_logrec_parse(b, (uint32_t)n, &fd, &ms, &gap, &c, &t, &tl), -EBADMSG);
}

int main(void)
{
    test_join();
    test_cut();
    test_utf8();
    test_parse();
    printf("ok test_lineasm\n");
    return 0;
}
