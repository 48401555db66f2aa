/*
 * lineasm.c - lines from pieces of output (lineasm.h). Reporter side: allocates, never trusts
 * the bytes.
 */
#include "common.h"

#include "lineasm.h"
#include "record.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int sw_lineasm_init(struct sw_lineasm *a, size_t max)
{
    memset(a, 0, sizeof(*a));
    a->max = max ? max : 1;
    return 0;
}

/* The buffers, made with the first bytes (a process that never writes costs nothing). */
static bool buffers(struct sw_lineasm *a)
{
    if (a->buf)
        return true;
    a->buf = malloc(a->max);
    a->out = malloc(3 * a->max + sizeof(SW_LINEASM_CUT_MARK));
    if (a->buf && a->out)
        return true;
    sw_lineasm_free(a);
    return false;
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
    if (n > 0 && !buffers(a)) {
        a->dropped += n; /* out of memory */
        return;
    }
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

/* ---- records ---- */

struct rd {
    const uint8_t *p;
    size_t left;
    bool bad;
};

static const uint8_t *rd_take(struct rd *r, size_t n)
{
    if (r->bad || n > r->left) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += n;
    r->left -= n;
    return p;
}

static uint64_t rd_le(struct rd *r, size_t n)
{
    const uint8_t *p = rd_take(r, n);
    uint64_t v = 0;
    if (p)
        for (size_t i = 0; i < n; i++)
            v |= (uint64_t)p[i] << (8 * i);
    return v;
}

int sw_logrec_parse(const void *payload, uint32_t len, int *fd, int64_t *time_ms, bool *gap,
                    struct sw_lineasm_ctx *ctx, const uint8_t **text, uint32_t *text_len)
{
    struct rd r = {payload, len, false};
    unsigned version = (unsigned)rd_le(&r, 1);
    unsigned f = (unsigned)rd_le(&r, 1);
    unsigned flags = (unsigned)rd_le(&r, 1);
    rd_le(&r, 1);
    *time_ms = (int64_t)rd_le(&r, 8);
    if (r.bad || version != SW_REC_LOG_VERSION || (f != 1 && f != 2) ||
        (flags & ~(SW_REC_LOG_CTX | SW_REC_LOG_OWN_TRACE | SW_REC_LOG_GAP)))
        return -EBADMSG;
    *fd = (int)f;
    *gap = (flags & SW_REC_LOG_GAP) != 0;
    memset(ctx, 0, sizeof(*ctx));
    if (flags & SW_REC_LOG_CTX) {
        const uint8_t *uuid = rd_take(&r, 16);
        uint32_t tid = (uint32_t)rd_le(&r, 4);
        uint64_t seg = rd_le(&r, 8);
        ctx->span_id = (int32_t)(uint32_t)rd_le(&r, 4);
        if (r.bad)
            return -EBADMSG;
        size_t n = sw_rec_id_text(ctx->segment_id, sizeof(ctx->segment_id) - 1, uuid, tid, seg);
        ctx->segment_id[n] = '\0';
        if (flags & SW_REC_LOG_OWN_TRACE) {
            uint64_t tv = rd_le(&r, 8);
            if (r.bad)
                return -EBADMSG;
            n = sw_rec_id_text(ctx->trace_id, sizeof(ctx->trace_id) - 1, uuid, tid, tv);
            ctx->trace_id[n] = '\0';
        } else {
            size_t tl = (size_t)rd_le(&r, 2);
            const uint8_t *t = rd_take(&r, tl);
            if (r.bad || tl == 0 || tl >= sizeof(ctx->trace_id) || memchr(t, 0, tl))
                return -EBADMSG;
            memcpy(ctx->trace_id, t, tl);
            ctx->trace_id[tl] = '\0';
        }
        if (n == 0)
            return -EBADMSG;
        ctx->has = true;
    } else if (flags & SW_REC_LOG_OWN_TRACE) {
        return -EBADMSG;
    }
    uint32_t tl = (uint32_t)rd_le(&r, 4);
    if (r.bad || tl != r.left || tl == 0)
        return -EBADMSG;
    *text = r.p;
    *text_len = tl;
    return 0;
}
