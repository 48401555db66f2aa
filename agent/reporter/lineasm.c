/*
 * lineasm.c - lines from pieces of output (lineasm.h). Reporter side: allocates, never trusts
 * the bytes.
 */
#include "common.h"

#include "lineasm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int sw_lineasm_init(struct sw_lineasm *a, size_t max)
{
    memset(a, 0, sizeof(*a));
    if (max == 0)
        max = 1;
    a->max = max;
    a->buf = malloc(max);
    a->out = malloc(3 * max + sizeof(SW_LINEASM_CUT_MARK));
    if (!a->buf || !a->out) {
        sw_lineasm_free(a);
        return -ENOMEM;
    }
    return 0;
}

void sw_lineasm_free(struct sw_lineasm *a)
{
    free(a->buf);
    free(a->out);
    a->buf = a->out = NULL;
}

bool sw_lineasm_pending(const struct sw_lineasm *a)
{
    return a->started && !a->dropping;
}

/* The length of the well-formed UTF-8 sequence at p (n bytes left), 0 when there is none. */
static size_t utf8_seq(const uint8_t *p, size_t n)
{
    uint8_t c = p[0];
    if (c < 0x80)
        return c ? 1 : 0;
    size_t len;
    uint8_t lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0; /* no overlong forms */
        else if (c == 0xed)
            hi = 0x9f; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f; /* <= U+10FFFF */
    } else {
        return 0;
    }
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return len;
}

size_t sw_utf8_sanitize(char *out, const uint8_t *in, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(in + i, n - i);
        if (k == 0) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
            continue;
        }
        memcpy(out + o, in + i, k);
        o += k;
        i += k;
    }
    return o;
}

static void emit_line(struct sw_lineasm *a, bool cut, sw_lineasm_emit_fn emit, void *arg)
{
    size_t n = a->len;
    if (!cut && n > 0 && a->buf[n - 1] == '\r')
        n--;
    a->started = false;
    a->len = 0;
    if (n == 0)
        return;
    size_t o = sw_utf8_sanitize(a->out, (const uint8_t *)a->buf, n);
    if (cut) {
        memcpy(a->out + o, SW_LINEASM_CUT_MARK, sizeof(SW_LINEASM_CUT_MARK) - 1);
        o += sizeof(SW_LINEASM_CUT_MARK) - 1;
        a->cut++;
    }
    a->out[o] = '\0';
    a->lines++;
    struct sw_line l = {a->out, o, cut, a->time_ms, &a->ctx};
    emit(arg, &l);
}

void sw_lineasm_flush(struct sw_lineasm *a, sw_lineasm_emit_fn emit, void *arg)
{
    if (a->started && !a->dropping)
        emit_line(a, false, emit, arg);
    a->started = false;
    a->len = 0;
}

void sw_lineasm_push(struct sw_lineasm *a, const void *p, size_t n, int64_t time_ms,
                     const struct sw_lineasm_ctx *ctx, bool gap, sw_lineasm_emit_fn emit, void *arg)
{
    const uint8_t *b = p;
    if (gap) {
        sw_lineasm_flush(a, emit, arg);
        a->dropping = false; /* the line being dropped ended somewhere in the gap, maybe */
    }
    while (n > 0) {
        const uint8_t *nl = memchr(b, '\n', n);
        size_t k = nl ? (size_t)(nl - b) : n; /* bytes of this line in this piece */
        if (a->dropping) {
            a->dropped += k;
        } else {
            if (!a->started) {
                a->started = true;
                a->time_ms = time_ms;
                if (ctx)
                    a->ctx = *ctx;
                else
                    memset(&a->ctx, 0, sizeof(a->ctx));
            }
            size_t room = a->max - a->len;
            if (k <= room) {
                memcpy(a->buf + a->len, b, k);
                a->len += k;
            } else {
                memcpy(a->buf + a->len, b, room);
                a->len += room;
                a->dropped += k - room;
                emit_line(a, true, emit, arg);
                a->dropping = true;
            }
        }
        if (!nl)
            return;
        if (a->dropping)
            a->dropping = false;
        else
            emit_line(a, false, emit, arg);
        b += k + 1;
        n -= k + 1;
    }
}
