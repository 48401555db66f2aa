/*
 * fcgi.c - the FastCGI parser (see fcgi.h).
 *
 * Rules: pure, allocation-free, no syscalls; runs on application threads inside the connection
 * layer's read and write paths. Every length comes from a record header and is only counted
 * down: content that does not arrive is simply not seen. A record of another version stops the
 * parser (STOP): what follows is not FastCGI.
 */
#include "fcgi.h"

#include <string.h>

enum {
    T_BEGIN = 1,
    T_ABORT = 2,
    T_END = 3,
    T_PARAMS = 4,
    T_STDIN = 5,
    T_STDOUT = 6,
    T_STDERR = 7,
    T_DATA = 8,
};

enum { P_NLEN, P_VLEN, P_NAME, P_VALUE };

static const struct {
    const char *name;
    uint8_t len;
} k_names[SW_FCGI_NPARAMS] = {
    [SW_FCGI_METHOD] = {"REQUEST_METHOD", 14},
    [SW_FCGI_URI] = {"REQUEST_URI", 11},
    [SW_FCGI_SCRIPT] = {"SCRIPT_NAME", 11},
    [SW_FCGI_HOST] = {"HTTP_HOST", 9},
    [SW_FCGI_SW8] = {"HTTP_SW8", 8},
    [SW_FCGI_CORRELATION] = {"HTTP_SW8_CORRELATION", 20},
    [SW_FCGI_SW8X] = {"HTTP_SW8_X", 10},
    [SW_FCGI_REMOTE_ADDR] = {"REMOTE_ADDR", 11},
    [SW_FCGI_REMOTE_PORT] = {"REMOTE_PORT", 11},
};

static char *buf_of(struct sw_fcgi *f, int p, size_t *cap)
{
    switch (p) {
    case SW_FCGI_METHOD:
        *cap = sizeof(f->method);
        return f->method;
    case SW_FCGI_URI:
        *cap = sizeof(f->uri);
        return f->uri;
    case SW_FCGI_SCRIPT:
        *cap = sizeof(f->script);
        return f->script;
    case SW_FCGI_HOST:
        *cap = sizeof(f->host);
        return f->host;
    case SW_FCGI_SW8:
        *cap = sizeof(f->sw8);
        return f->sw8;
    case SW_FCGI_CORRELATION:
        *cap = sizeof(f->corr);
        return f->corr;
    case SW_FCGI_SW8X:
        *cap = sizeof(f->sw8x);
        return f->sw8x;
    case SW_FCGI_REMOTE_ADDR:
        *cap = sizeof(f->raddr);
        return f->raddr;
    default:
        *cap = sizeof(f->rport);
        return f->rport;
    }
}

void sw_fcgi_init(struct sw_fcgi *f)
{
    f->stopped = false;
    f->cap_on = false;
    memset(f->dir, 0, sizeof(f->dir));
    memset(f->req, 0, sizeof(f->req));
}

void sw_fcgi_forget_spans(struct sw_fcgi *f)
{
    for (int i = 0; i < SW_FCGI_REQS; i++)
        f->req[i].user = 0;
}

bool sw_fcgi_stopped(const struct sw_fcgi *f)
{
    return f->stopped;
}

static struct sw_fcgi_req *req_of(struct sw_fcgi *f, uint16_t id)
{
    for (int i = 0; i < SW_FCGI_REQS; i++)
        if (f->req[i].used && f->req[i].id == id)
            return &f->req[i];
    return NULL;
}

/* The `user` of a request's events after PARAMS: what PARAMS returned (its span), 0 before
 * that (r->user then holds what BEGIN returned, which is not a span). */
static uint64_t user_of(const struct sw_fcgi_req *r)
{
    return r->params_done ? r->user : 0;
}

static void end_req(struct sw_fcgi *f, struct sw_fcgi_req *r, const struct sw_fcgi_ev *base,
                    sw_fcgi_cb cb, void *ctx)
{
    struct sw_fcgi_ev ev = *base;
    ev.kind = SW_FCGI_EV_END;
    ev.id = r->id;
    ev.head_seen = r->head_done;
    ev.status = r->head_done ? r->status : 0;
    ev.user = user_of(r);
    r->used = false;
    if (f->cap_on && f->cap_id == r->id)
        f->cap_on = false;
    cb(ctx, &ev);
}

/* An END (closed) for each open request; `why` non-NULL: the parser gave up (ev.reason). */
static void close_all(struct sw_fcgi *f, const char *why, sw_fcgi_cb cb, void *ctx)
{
    struct sw_fcgi_ev base = {.kind = SW_FCGI_EV_END, .closed = true, .reason = why};
    for (int i = 0; i < SW_FCGI_REQS; i++)
        if (f->req[i].used)
            end_req(f, &f->req[i], &base, cb, ctx);
}

void sw_fcgi_close(struct sw_fcgi *f, sw_fcgi_cb cb, void *ctx)
{
    close_all(f, NULL, cb, ctx);
}

static void stop(struct sw_fcgi *f, const char *why, sw_fcgi_cb cb, void *ctx)
{
    if (f->stopped)
        return;
    close_all(f, why, cb, ctx);
    f->stopped = true;
    struct sw_fcgi_ev ev = {.kind = SW_FCGI_EV_STOP, .reason = why};
    cb(ctx, &ev);
}

/* ---------------------------------------------------------------- PARAMS */

static void cap_start(struct sw_fcgi *f, uint16_t id)
{
    f->cap_on = true;
    f->cap_id = id;
    f->pst = P_NLEN;
    f->lb_n = 0;
    f->has_sw8 = false;
    f->cut = 0;
    memset(f->len, 0, sizeof(f->len));
}

/* The name is complete: which param its value goes to. */
static void name_done(struct sw_fcgi *f)
{
    f->target = -1;
    if (f->nlen > sizeof(f->name))
        return;
    for (int i = 0; i < SW_FCGI_NPARAMS; i++) {
        if (k_names[i].len == f->nlen && memcmp(k_names[i].name, f->name, f->nlen) == 0) {
            f->target = (int8_t)i;
            f->len[i] = 0;
            f->cut &= ~(1u << i);
            if (i == SW_FCGI_SW8)
                f->has_sw8 = true;
            break;
        }
    }
}

/* Name-value pair bytes of the captured request's PARAMS stream. */
static void pairs(struct sw_fcgi *f, const uint8_t *p, size_t n)
{
    while (n > 0) {
        switch (f->pst) {
        case P_NLEN:
        case P_VLEN: {
            f->lb[f->lb_n++] = *p++;
            n--;
            if (f->lb_n == 1 && !(f->lb[0] & 0x80)) {
                /* one-byte length */
            } else if (f->lb_n < 4) {
                continue;
            }
            uint32_t v = f->lb_n == 1
                             ? f->lb[0]
                             : ((uint32_t)(f->lb[0] & 0x7f) << 24 | (uint32_t)f->lb[1] << 16 |
                                (uint32_t)f->lb[2] << 8 | f->lb[3]);
            f->lb_n = 0;
            if (f->pst == P_NLEN) {
                f->nlen = v;
                f->pst = P_VLEN;
            } else {
                f->vlen = v;
                f->nleft = f->nlen;
                f->name_n = 0;
                f->pst = P_NAME;
                if (f->nleft == 0) {
                    name_done(f);
                    f->vleft = f->vlen;
                    f->pst = P_VALUE;
                    if (f->vleft == 0)
                        f->pst = P_NLEN;
                }
            }
            break;
        }
        case P_NAME: {
            size_t k = f->nleft < n ? f->nleft : n;
            if (f->name_n < sizeof(f->name)) {
                size_t c = sizeof(f->name) - f->name_n < k ? sizeof(f->name) - f->name_n : k;
                memcpy(f->name + f->name_n, p, c);
                f->name_n = (uint8_t)(f->name_n + c);
            }
            f->nleft -= (uint32_t)k;
            p += k;
            n -= k;
            if (f->nleft == 0) {
                name_done(f);
                f->vleft = f->vlen;
                f->pst = f->vleft ? P_VALUE : P_NLEN;
            }
            break;
        }
        case P_VALUE: {
            size_t k = f->vleft < n ? f->vleft : n;
            if (f->target >= 0) {
                size_t cap;
                char *b = buf_of(f, f->target, &cap);
                size_t have = f->len[f->target];
                size_t c = cap - have < k ? cap - have : k;
                memcpy(b + have, p, c);
                f->len[f->target] = (uint16_t)(have + c);
                if (c < k)
                    f->cut |= 1u << f->target;
            }
            f->vleft -= (uint32_t)k;
            p += k;
            n -= k;
            if (f->vleft == 0)
                f->pst = P_NLEN;
            break;
        }
        }
    }
}

static void params_end(struct sw_fcgi *f, struct sw_fcgi_dir *d, sw_fcgi_cb cb, void *ctx)
{
    struct sw_fcgi_req *r = req_of(f, d->id);
    if (!r || r->params_done)
        return;
    r->params_done = true;
    struct sw_fcgi_ev ev = {
        .kind = SW_FCGI_EV_PARAMS, .id = d->id, .insert_off = d->rec_off, .user = r->user};
    if (f->cap_on && f->cap_id == d->id) {
        for (int i = 0; i < SW_FCGI_NPARAMS; i++) {
            size_t cap;
            ev.val[i] = buf_of(f, i, &cap);
            ev.len[i] = f->len[i];
        }
        ev.cut = f->cut;
        ev.has_sw8 = f->has_sw8;
        f->cap_on = false;
    } else {
        for (int i = 0; i < SW_FCGI_NPARAMS; i++)
            ev.val[i] = "";
        ev.partial = true;
    }
    r->user = cb(ctx, &ev);
}

/* ---------------------------------------------------------------- STDOUT head */

static bool prefix_ci(const char *s, size_t n, const char *lower, size_t ln)
{
    if (n < ln)
        return false;
    for (size_t i = 0; i < ln; i++)
        if ((s[i] | 0x20) != lower[i])
            return false;
    return true;
}

static void head_line(struct sw_fcgi_req *r)
{
    size_t n = r->line_n;
    const char *s = r->line;
    if (prefix_ci(s, n, "status:", 7)) {
        size_t i = 7;
        while (i < n && (s[i] == ' ' || s[i] == '\t'))
            i++;
        unsigned v = 0, k = 0;
        while (i < n && k < 3 && s[i] >= '0' && s[i] <= '9') {
            v = v * 10 + (unsigned)(s[i++] - '0');
            k++;
        }
        if (k == 3 && v >= 100)
            r->status = (uint16_t)v;
    } else if (prefix_ci(s, n, "location:", 9)) {
        r->location = true;
    }
}

static void stdout_bytes(struct sw_fcgi_req *r, const uint8_t *p, size_t n, sw_fcgi_cb cb,
                         void *ctx)
{
    for (size_t i = 0; i < n && !r->head_done; i++) {
        uint8_t c = p[i];
        if (c == '\n') {
            size_t len = r->line_n;
            if (len > 0 && len <= sizeof(r->line) && r->line[len - 1] == '\r')
                len--;
            if (len == 0) {
                r->head_done = true;
                if (!r->status)
                    r->status = r->location ? 302 : 200;
                struct sw_fcgi_ev ev = {
                    .kind = SW_FCGI_EV_HEAD, .id = r->id, .status = r->status, .user = user_of(r)};
                cb(ctx, &ev);
                return;
            }
            r->line_n = (uint8_t)(len < sizeof(r->line) ? len : sizeof(r->line));
            head_line(r);
            r->line_n = 0;
        } else if (r->line_n < sizeof(r->line)) {
            r->line[r->line_n++] = (char)c;
        } else if (r->line_n == sizeof(r->line)) {
            r->line_n = (uint8_t)(sizeof(r->line) + 1); /* long line: kept start only */
            head_line(r);
        }
    }
}

/* ---------------------------------------------------------------- records */

static void rec_small_done(struct sw_fcgi *f, struct sw_fcgi_dir *d, sw_fcgi_cb cb, void *ctx)
{
    if (d->type == T_BEGIN && d->small_n >= 3 && d->id != 0) {
        struct sw_fcgi_req *r = req_of(f, d->id);
        if (r) {
            /* The id of a request still open begins another: the open one ends here. */
            struct sw_fcgi_ev base = {.closed = true,
                                      .reason = "FastCGI: request id reused before its "
                                                "FCGI_END_REQUEST"};
            end_req(f, r, &base, cb, ctx);
        }
        for (int i = 0; i < SW_FCGI_REQS && !r; i++)
            if (!f->req[i].used)
                r = &f->req[i];
        if (!r)
            return; /* more requests open at once than followed: this one is not */
        memset(r, 0, sizeof(*r));
        r->used = true;
        r->id = d->id;
        if (!f->cap_on)
            cap_start(f, d->id);
        struct sw_fcgi_ev ev = {.kind = SW_FCGI_EV_BEGIN,
                                .id = d->id,
                                .role = (uint16_t)(d->small[0] << 8 | d->small[1]),
                                .keep = d->small[2] & 1};
        r->user = cb(ctx, &ev);
    } else if (d->type == T_END && d->small_n >= 5) {
        struct sw_fcgi_req *r = req_of(f, d->id);
        if (!r)
            return;
        struct sw_fcgi_ev base = {.app_status = (uint32_t)d->small[0] << 24 |
                                                (uint32_t)d->small[1] << 16 |
                                                (uint32_t)d->small[2] << 8 | d->small[3],
                                  .proto_status = d->small[4]};
        end_req(f, r, &base, cb, ctx);
    }
}

/* A record header is complete. */
static void rec_start(struct sw_fcgi *f, struct sw_fcgi_dir *d, bool response, sw_fcgi_cb cb,
                      void *ctx)
{
    d->type = d->hdr[1];
    d->id = (uint16_t)(d->hdr[2] << 8 | d->hdr[3]);
    d->clen = (uint16_t)(d->hdr[4] << 8 | d->hdr[5]);
    d->pad = d->hdr[6];
    d->small_n = 0;
    if (d->hdr[0] != 1) {
        stop(f, "not FastCGI version 1", cb, ctx);
        return;
    }
    if (response || d->clen != 0)
        return;
    /* Empty records of the request direction end a stream. */
    if (d->type == T_PARAMS) {
        params_end(f, d, cb, ctx);
    } else if (d->type == T_ABORT) {
        struct sw_fcgi_req *r = req_of(f, d->id);
        if (r) {
            struct sw_fcgi_ev ev = {.kind = SW_FCGI_EV_ABORT, .id = d->id, .user = user_of(r)};
            cb(ctx, &ev);
            r->user = 0; /* its span ended: its END_REQUEST ends nothing more */
        }
    }
}

static void content(struct sw_fcgi *f, struct sw_fcgi_dir *d, bool response, const uint8_t *p,
                    size_t k, sw_fcgi_cb cb, void *ctx)
{
    if (d->id == 0)
        return; /* management records */
    switch (d->type) {
    case T_BEGIN:
    case T_END:
        if ((d->type == T_BEGIN) == !response) {
            size_t c = sizeof(d->small) - d->small_n < k ? sizeof(d->small) - d->small_n : k;
            memcpy(d->small + d->small_n, p, c);
            d->small_n = (uint8_t)(d->small_n + c);
        }
        break;
    case T_PARAMS:
        if (!response && f->cap_on && f->cap_id == d->id)
            pairs(f, p, k);
        break;
    case T_STDOUT:
        if (response) {
            struct sw_fcgi_req *r = req_of(f, d->id);
            if (r && !r->head_done)
                stdout_bytes(r, p, k, cb, ctx);
        }
        break;
    default:
        break;
    }
}

void sw_fcgi_feed(struct sw_fcgi *f, bool response, const uint8_t *p, size_t n, sw_fcgi_cb cb,
                  void *ctx)
{
    struct sw_fcgi_dir *d = &f->dir[response ? 1 : 0];
    while (n > 0 && !f->stopped) {
        if (d->hdr_n < 8) {
            if (d->hdr_n == 0)
                d->rec_off = d->off;
            size_t c = 8u - d->hdr_n < n ? 8u - d->hdr_n : n;
            memcpy(d->hdr + d->hdr_n, p, c);
            d->hdr_n = (uint8_t)(d->hdr_n + c);
            d->off += c;
            p += c;
            n -= c;
            if (d->hdr_n < 8)
                return;
            rec_start(f, d, response, cb, ctx);
            if (f->stopped)
                return;
        } else if (d->clen > 0) {
            size_t k = d->clen < n ? d->clen : n;
            content(f, d, response, p, k, cb, ctx);
            d->clen = (uint16_t)(d->clen - k);
            d->off += k;
            p += k;
            n -= k;
            if (d->clen == 0 && (d->type == T_BEGIN || d->type == T_END))
                rec_small_done(f, d, cb, ctx);
        } else {
            size_t k = d->pad < n ? d->pad : n;
            d->pad = (uint8_t)(d->pad - k);
            d->off += k;
            p += k;
            n -= k;
        }
        if (d->hdr_n == 8 && d->clen == 0 && d->pad == 0) {
            if (d->hdr[4] == 0 && d->hdr[5] == 0 && (d->type == T_BEGIN || d->type == T_END))
                rec_small_done(f, d, cb, ctx); /* an empty BEGIN/END: ignored (too short) */
            d->hdr_n = 0;
        }
    }
}

/* ---------------------------------------------------------------- insertion */

static size_t put_len(uint8_t *q, size_t v)
{
    if (v < 128) {
        q[0] = (uint8_t)v;
        return 1;
    }
    q[0] = (uint8_t)(0x80 | v >> 24);
    q[1] = (uint8_t)(v >> 16);
    q[2] = (uint8_t)(v >> 8);
    q[3] = (uint8_t)v;
    return 4;
}

size_t sw_fcgi_params_record(uint8_t *out, size_t cap, uint16_t id, const char *lines, size_t n)
{
    if (cap < 8)
        return 0;
    size_t at = 8, i = 0;
    while (i < n) {
        const char *e = memchr(lines + i, '\n', n - i);
        size_t ll = e ? (size_t)(e - (lines + i)) : n - i;
        const char *line = lines + i;
        i += ll + (e ? 1 : 0);
        if (ll > 0 && line[ll - 1] == '\r')
            ll--;
        const char *colon = memchr(line, ':', ll);
        if (!colon || colon == line)
            continue;
        size_t nl = (size_t)(colon - line);
        const char *v = colon + 1;
        size_t vl = ll - nl - 1;
        while (vl > 0 && (*v == ' ' || *v == '\t')) {
            v++;
            vl--;
        }
        size_t pn = 5 + nl;
        if (pn > 0x7fffffff || vl > 0x7fffffff)
            return 0;
        size_t need = (pn < 128 ? 1 : 4) + (vl < 128 ? 1 : 4) + pn + vl;
        if (need > cap - at || at + need - 8 > 0xffff)
            return 0;
        at += put_len(out + at, pn);
        at += put_len(out + at, vl);
        memcpy(out + at, "HTTP_", 5);
        for (size_t k = 0; k < nl; k++) {
            char c = line[k];
            if (c >= 'a' && c <= 'z')
                c = (char)(c - 32);
            else if (c == '-')
                c = '_';
            out[at + 5 + k] = (uint8_t)c;
        }
        at += pn;
        memcpy(out + at, v, vl);
        at += vl;
    }
    size_t clen = at - 8;
    if (clen == 0)
        return 0;
    out[0] = 1;
    out[1] = T_PARAMS;
    out[2] = (uint8_t)(id >> 8);
    out[3] = (uint8_t)id;
    out[4] = (uint8_t)(clen >> 8);
    out[5] = (uint8_t)clen;
    out[6] = 0; /* no padding */
    out[7] = 0;
    return at;
}
