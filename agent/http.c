/*
 * http.c - incremental HTTP/1.x parsing for one direction of one connection (see http.h).
 *
 * Rules: runs on application threads inside read()/write() interposers. No malloc, no locks,
 * no syscalls, no stdio, errno untouched; all state lives in the caller's struct sw_http
 * (and struct sw_http_req). Framing is libhttp-parser's (linked statically, see http.h);
 * this file turns its callbacks into one event per call by pausing the parser inside the
 * callback that found the event, so every event comes with an exact byte offset.
 *
 * Offsets, as http_parser 2.9.4 reports them when paused:
 *   - in on_headers_complete: execute() returns the index of the LF that ends the head (the
 *     LF is not consumed); we then run execute() on that single LF, which may itself complete
 *     a body-less message (kept as a pending event for the next call);
 *   - in on_message_complete: execute() returns the index just past the message's last byte.
 *
 * Bare CR: head bytes (phases idle and head) are handed to http_parser only up to the first CR
 * that is known not to be followed by LF; if no event comes before it, the stream is refused
 * (NOT_HTTP/ERROR). A CR that ends a call sets cr_open, and the next call must begin with LF.
 * So the verdict depends on the bytes only, never on how they were split.
 */
#include "common.h"

#include "http.h"

#include <http_parser.h>
#include <string.h>

_Static_assert(sizeof(http_parser) <= sizeof(((struct sw_http *)0)->hp),
               "struct sw_http.hp too small for http_parser");

enum phase { PH_IDLE = 0, PH_HEAD, PH_BODY, PH_STOPPED };
enum cb_event { CB_NONE = 0, CB_HEAD, CB_MESSAGE, CB_BADVER };
enum pending { PEND_NONE = 0, PEND_MESSAGE, PEND_UPGRADE, PEND_ERROR };
enum last_cb { LCB_NONE = 0, LCB_FIELD, LCB_VALUE };

/* Where the value of the current header goes. Custom header i is SLOT_CUSTOM + i. */
enum slot { SLOT_NONE = 0, SLOT_HOST, SLOT_SW8, SLOT_CORR, SLOT_SW8X, SLOT_EXPECT, SLOT_CUSTOM };

#define ENTRY_HDR 3 /* scratch entry: u8 name index, u16 value length, value bytes */

static const struct sw_http_opts default_opts = {
    .max_head = SW_HTTP_HEAD_MAX,
    .headers_threshold = SW_HTTP_HEADERS_MAX - 1,
    .header_count = 0,
};

static inline http_parser *hp_of(struct sw_http *h)
{
    return (http_parser *)(void *)h->hp;
}

static inline struct sw_http *sw_of(http_parser *p)
{
    return p->data;
}

static const struct sw_http_opts *opts_of(const struct sw_http *h)
{
    return h->opts ? h->opts : &default_opts;
}

static uint32_t max_head_of(const struct sw_http *h)
{
    uint32_t m = opts_of(h)->max_head;
    return (m == 0 || m > SW_HTTP_HEAD_MAX) ? SW_HTTP_HEAD_MAX : m;
}

static inline char lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c + ('a' - 'A')) : c;
}

static enum sw_http_method method_from_hp(unsigned m)
{
    switch (m) {
    case HTTP_GET:
        return SW_HTTP_M_GET;
    case HTTP_HEAD:
        return SW_HTTP_M_HEAD;
    case HTTP_POST:
        return SW_HTTP_M_POST;
    case HTTP_PUT:
        return SW_HTTP_M_PUT;
    case HTTP_DELETE:
        return SW_HTTP_M_DELETE;
    case HTTP_CONNECT:
        return SW_HTTP_M_CONNECT;
    case HTTP_OPTIONS:
        return SW_HTTP_M_OPTIONS;
    case HTTP_TRACE:
        return SW_HTTP_M_TRACE;
    case HTTP_PATCH:
        return SW_HTTP_M_PATCH;
    default:
        return SW_HTTP_M_OTHER;
    }
}

const char *sw_http_method_name(enum sw_http_method m)
{
    static const char *const names[] = {"OTHER", "GET",     "HEAD",    "POST",  "PUT",
                                        "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"};
    return ((unsigned)m < SW_ARRAY_LEN(names)) ? names[m] : "OTHER";
}

/* ---- request captures ------------------------------------------------------------------ */

static void req_reset(struct sw_http_req *r)
{
    r->method = SW_HTTP_M_OTHER;
    r->method_text[0] = '\0';
    r->http_minor = 0;
    r->target_truncated = false;
    r->expect_continue = false;
    r->upgrade = false;
    r->keep_alive = false;
    r->headers_truncated = false;
    r->target_len = r->host_len = r->sw8_len = r->corr_len = r->sw8x_len = 0;
    r->headers_len = 0;
    r->target[0] = r->host[0] = r->sw8[0] = r->corr[0] = r->sw8x[0] = r->headers[0] = '\0';
    r->scratch_len = 0;
    r->entry_start = 0;
    r->name_len = 0;
    r->slot = SLOT_NONE;
    r->slot_overflow = false;
}

/* The buffer and length field of a fixed slot, or NULL for custom and none. */
static char *slot_buf(struct sw_http_req *r, unsigned slot, uint16_t **len, size_t *cap)
{
    switch (slot) {
    case SLOT_HOST:
        *len = &r->host_len;
        *cap = sizeof(r->host);
        return r->host;
    case SLOT_SW8:
        *len = &r->sw8_len;
        *cap = sizeof(r->sw8);
        return r->sw8;
    case SLOT_CORR:
        *len = &r->corr_len;
        *cap = sizeof(r->corr);
        return r->corr;
    case SLOT_SW8X:
        *len = &r->sw8x_len;
        *cap = sizeof(r->sw8x);
        return r->sw8x;
    default:
        return NULL;
    }
}

static bool name_is(const struct sw_http_req *r, const char *s, size_t n)
{
    return r->name_len == n && memcmp(r->name, s, n) == 0;
}

/* The header name is complete (first value byte seen): choose where its value goes. */
static void header_name_done(struct sw_http *h, struct sw_http_req *r)
{
    unsigned slot = SLOT_NONE;
    uint16_t *len;
    size_t cap;

    r->slot_overflow = false;
    if (r->name_len >= sizeof(r->name)) { /* longer than any name we look for */
        r->slot = SLOT_NONE;
        return;
    }
    if (name_is(r, "host", 4))
        slot = SLOT_HOST;
    else if (name_is(r, "sw8", 3))
        slot = SLOT_SW8;
    else if (name_is(r, "sw8-correlation", 15))
        slot = SLOT_CORR;
    else if (name_is(r, "sw8-x", 5))
        slot = SLOT_SW8X;
    else if (name_is(r, "expect", 6))
        slot = SLOT_EXPECT;
    /*
     * Host: the first occurrence counts. sw8 and friends: the LAST one counts. A proxy traced
     * by swagent forwards the sw8 it received and swagent appends its own just before the
     * blank line, so the last one is the closest hop's.
     */
    if (slot == SLOT_HOST && slot_buf(r, slot, &len, &cap) && *len != 0)
        slot = SLOT_NONE;
    else if (slot != SLOT_NONE && slot != SLOT_EXPECT && slot_buf(r, slot, &len, &cap)) {
        *len = 0;
        r->slot_overflow = false;
    }
    if (slot == SLOT_NONE) {
        const struct sw_http_opts *o = opts_of(h);
        uint32_t n = o->header_count < SW_HTTP_HDR_NAMES ? o->header_count : SW_HTTP_HDR_NAMES;
        for (uint32_t i = 0; i < n; i++) {
            size_t nl = strnlen(o->header_names[i], SW_HTTP_HDR_NAME_MAX);
            if (nl != 0 && name_is(r, o->header_names[i], nl)) {
                slot = SLOT_CUSTOM + i;
                break;
            }
        }
        if (slot >= SLOT_CUSTOM) {
            if ((size_t)r->scratch_len + ENTRY_HDR > sizeof(r->scratch)) {
                r->headers_truncated = true;
                slot = SLOT_NONE;
            } else {
                char *e = r->scratch + r->scratch_len;
                r->entry_start = r->scratch_len;
                e[0] = (char)(slot - SLOT_CUSTOM);
                e[1] = e[2] = 0;
                r->scratch_len += ENTRY_HDR;
            }
        }
    }
    r->slot = (uint8_t)slot;
    r->name_len = 0; /* SLOT_EXPECT reuses name[] for its value */
}

static size_t trim_len(const char *s, size_t n)
{
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    return n;
}

/* The current header's value is complete. */
static void header_value_done(struct sw_http_req *r)
{
    uint16_t *len;
    size_t cap;
    char *b = slot_buf(r, r->slot, &len, &cap);

    if (b) {
        *len = r->slot_overflow ? 0 : (uint16_t)trim_len(b, *len);
        b[*len] = '\0';
    } else if (r->slot == SLOT_EXPECT) {
        size_t n = trim_len(r->name, r->name_len);
        if (!r->slot_overflow && n == 12 && memcmp(r->name, "100-continue", 12) == 0)
            r->expect_continue = true;
    } else if (r->slot >= SLOT_CUSTOM) {
        size_t start = r->entry_start;
        size_t vlen = trim_len(r->scratch + start + ENTRY_HDR, r->scratch_len - start - ENTRY_HDR);

        r->scratch[start + 1] = (char)(vlen & 0xff);
        r->scratch[start + 2] = (char)(vlen >> 8);
        r->scratch_len = (uint16_t)(start + ENTRY_HDR + vlen);
    }
    r->slot = SLOT_NONE;
    r->name_len = 0;
}

static void header_value_append(struct sw_http_req *r, const char *at, size_t n)
{
    uint16_t *len;
    size_t cap;
    char *b = slot_buf(r, r->slot, &len, &cap);

    if (b) {
        if (r->slot_overflow || n >= cap - *len) {
            r->slot_overflow = true;
            return;
        }
        memcpy(b + *len, at, n);
        *len = (uint16_t)(*len + n);
    } else if (r->slot == SLOT_EXPECT) {
        if (r->slot_overflow || n >= sizeof(r->name) - r->name_len) {
            r->slot_overflow = true;
            return;
        }
        for (size_t i = 0; i < n; i++)
            r->name[r->name_len + i] = lower(at[i]);
        r->name_len = (uint8_t)(r->name_len + n);
    } else if (r->slot >= SLOT_CUSTOM) {
        size_t room = sizeof(r->scratch) - r->scratch_len;
        if (n > room) {
            n = room;
            r->headers_truncated = true;
        }
        memcpy(r->scratch + r->scratch_len, at, n);
        r->scratch_len = (uint16_t)(r->scratch_len + n);
    }
}

/* Appends to headers[] within `limit`; returns false (and marks truncation) when cut. */
static bool out_put(struct sw_http_req *r, size_t limit, const char *s, size_t n)
{
    size_t room = limit > r->headers_len ? limit - r->headers_len : 0;
    bool fits = n <= room;

    if (!fits) {
        n = room;
        r->headers_truncated = true;
    }
    memcpy(r->headers + r->headers_len, s, n);
    r->headers_len = (uint16_t)(r->headers_len + n);
    return fits;
}

/* Builds the http.headers tag value from scratch: "name=[v1, v2]" per name, "\n"-joined. */
static void headers_build(const struct sw_http *h, struct sw_http_req *r)
{
    const struct sw_http_opts *o = opts_of(h);
    size_t limit = o->headers_threshold;
    uint32_t names = o->header_count < SW_HTTP_HDR_NAMES ? o->header_count : SW_HTTP_HDR_NAMES;
    bool ok = true;

    if (limit == 0 || limit > sizeof(r->headers) - 1)
        limit = sizeof(r->headers) - 1;
    r->headers_len = 0;
    for (uint32_t i = 0; i < names && ok; i++) {
        bool first = true;
        for (size_t off = 0; off + ENTRY_HDR <= r->scratch_len && ok;) {
            size_t l = (uint8_t)r->scratch[off + 1] | ((size_t)(uint8_t)r->scratch[off + 2] << 8);
            if (off + ENTRY_HDR + l > r->scratch_len)
                break;
            if ((uint8_t)r->scratch[off] == i) {
                if (first) {
                    const char *nm = o->header_names[i];
                    if (r->headers_len != 0)
                        ok = out_put(r, limit, "\n", 1);
                    ok = ok && out_put(r, limit, nm, strnlen(nm, SW_HTTP_HDR_NAME_MAX));
                    ok = ok && out_put(r, limit, "=[", 2);
                    first = false;
                } else {
                    ok = out_put(r, limit, ", ", 2);
                }
                ok = ok && out_put(r, limit, r->scratch + off + ENTRY_HDR, l);
            }
            off += ENTRY_HDR + l;
        }
        if (!first && ok)
            ok = out_put(r, limit, "]", 1);
    }
    r->headers[r->headers_len] = '\0';
}

/* ---- http_parser callbacks ------------------------------------------------------------- */

static int on_message_begin(http_parser *p)
{
    struct sw_http *h = sw_of(p);

    h->phase = PH_HEAD;
    h->status = 0;
    h->upgrade_after = false;
    h->last_cb = LCB_NONE;
    if (h->req)
        req_reset(h->req);
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
    struct sw_http_req *r = sw_of(p)->req;
    size_t room;

    if (!r)
        return 0;
    room = sizeof(r->target) - 1 - r->target_len;
    if (n > room) {
        n = room;
        r->target_truncated = true;
    }
    memcpy(r->target + r->target_len, at, n);
    r->target_len = (uint16_t)(r->target_len + n);
    r->target[r->target_len] = '\0';
    return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
    struct sw_http *h = sw_of(p);
    struct sw_http_req *r = h->req;

    if (!r || h->phase != PH_HEAD) /* trailers are not captured */
        return 0;
    if (h->last_cb == LCB_VALUE)
        header_value_done(r);
    h->last_cb = LCB_FIELD;
    for (size_t i = 0; i < n; i++) {
        if (r->name_len < sizeof(r->name))
            r->name[r->name_len] = lower(at[i]);
        if (r->name_len < 0xff)
            r->name_len++;
    }
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
    struct sw_http *h = sw_of(p);
    struct sw_http_req *r = h->req;

    if (!r || h->phase != PH_HEAD)
        return 0;
    if (h->last_cb == LCB_FIELD)
        header_name_done(h, r);
    h->last_cb = LCB_VALUE;
    header_value_append(r, at, n);
    return 0;
}

static enum sw_http_method queue_pop(struct sw_http *h)
{
    enum sw_http_method m = SW_HTTP_M_GET;

    if (h->q_len) {
        m = (enum sw_http_method)h->queue[h->q_head];
        h->q_head = (uint8_t)((h->q_head + 1) % SW_HTTP_PENDING_MAX);
        h->q_len--;
    }
    return m;
}

static int on_headers_complete(http_parser *p)
{
    struct sw_http *h = sw_of(p);
    int ret = 0;

    if (h->dir == SW_HTTP_RESPONSE) {
        int st = p->status_code;

        h->status = st;
        if (st / 100 == 1 && st != 101)
            return 1; /* informational: no body, no event, the final response follows */
        h->cur_method = (uint8_t)queue_pop(h);
        if (st == 101 || (h->cur_method == SW_HTTP_M_CONNECT && st / 100 == 2))
            h->upgrade_after = true;
        if (h->upgrade_after)
            ret = 2;
        else if (h->cur_method == SW_HTTP_M_HEAD || st == 204 || st == 304)
            ret = 1;
    } else {
        struct sw_http_req *r = h->req;

        h->cur_method = (uint8_t)method_from_hp(p->method);
        h->upgrade_after = p->upgrade;
        if (r) {
            const char *mt = http_method_str((enum http_method)p->method);
            size_t ml = strnlen(mt, sizeof(r->method_text) - 1);

            if (h->last_cb == LCB_VALUE)
                header_value_done(r);
            h->last_cb = LCB_NONE;
            r->method = (enum sw_http_method)h->cur_method;
            memcpy(r->method_text, mt, ml);
            r->method_text[ml] = '\0';
            r->http_minor = (uint8_t)p->http_minor;
            r->upgrade = p->upgrade;
            r->keep_alive = !p->upgrade && http_should_keep_alive(p);
            headers_build(h, r);
        }
    }
    h->cb_event = CB_HEAD;
    if (p->http_major != 1 || p->http_minor > 1)
        h->cb_event = CB_BADVER;
    http_parser_pause(p, 1);
    return ret;
}

static int on_message_complete(http_parser *p)
{
    struct sw_http *h = sw_of(p);

    h->phase = PH_IDLE;
    if (h->dir == SW_HTTP_RESPONSE && h->status / 100 == 1 && h->status != 101)
        return 0; /* end of a 100 Continue (or 102, 103): keep going */
    h->cb_event = CB_MESSAGE;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_message_complete = on_message_complete,
};

/* ---- API --------------------------------------------------------------------------------- */

void sw_http_opts_init(struct sw_http_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->max_head = SW_HTTP_HEAD_MAX;
    o->headers_threshold = SW_HTTP_HEADERS_MAX - 1;
}

int sw_http_opts_add_header(struct sw_http_opts *o, const char *name, size_t len)
{
    if (len == 0 || len >= SW_HTTP_HDR_NAME_MAX)
        return -EINVAL;
    if (o->header_count >= SW_HTTP_HDR_NAMES)
        return -ENOSPC;
    for (size_t i = 0; i < len; i++)
        o->header_names[o->header_count][i] = lower(name[i]);
    o->header_names[o->header_count][len] = '\0';
    o->header_count++;
    return 0;
}

void sw_http_init(struct sw_http *h, enum sw_http_dir dir, const struct sw_http_opts *opts,
                  struct sw_http_req *req)
{
    memset(h, 0, sizeof(*h));
    h->dir = (uint8_t)dir;
    h->opts = opts;
    h->req = dir == SW_HTTP_REQUEST ? req : NULL;
    http_parser_init(hp_of(h), dir == SW_HTTP_REQUEST ? HTTP_REQUEST : HTTP_RESPONSE);
    hp_of(h)->data = h;
    if (h->req)
        req_reset(h->req);
}

static void ev_clear(struct sw_http_event *ev)
{
    memset(ev, 0, sizeof(*ev));
    ev->type = SW_HTTP_EV_NONE;
    ev->insert_at = SW_HTTP_NO_OFFSET;
    ev->line_end = SW_HTTP_NO_OFFSET;
}

static void ev_fill_msg(struct sw_http *h, struct sw_http_event *ev, enum sw_http_ev_type t,
                        size_t off)
{
    ev->type = t;
    ev->offset = off;
    ev->status = h->dir == SW_HTTP_RESPONSE ? h->status : 0;
    ev->method = (enum sw_http_method)h->cur_method;
    ev->keep_alive = !h->upgrade_after && http_should_keep_alive(hp_of(h));
}

static size_t stop(struct sw_http *h, struct sw_http_event *ev, enum sw_http_ev_type t,
                   enum sw_http_err err, size_t consumed)
{
    h->phase = PH_STOPPED;
    h->pending = PEND_NONE;
    ev->type = t;
    ev->err = err;
    ev->offset = 0; /* unused for NOT_HTTP and ERROR: the caller stops looking */
    return consumed;
}

/* A parse error: before the first complete head it means the peer does not speak HTTP/1.x. */
static size_t fail(struct sw_http *h, struct sw_http_event *ev, enum sw_http_err err, size_t len)
{
    bool not_http = !h->seen_head && err != SW_HTTP_ERR_TOO_LARGE;
    return stop(h, ev, not_http ? SW_HTTP_EV_NOT_HTTP : SW_HTTP_EV_ERROR, err, len);
}

static enum sw_http_err err_of(enum http_errno e)
{
    return e == HPE_HEADER_OVERFLOW ? SW_HTTP_ERR_TOO_LARGE : SW_HTTP_ERR_SYNTAX;
}

/*
 * The offset of the first bare CR (a CR whose next byte, buf[i + 1] < buf + len, is not LF)
 * among buf[0..lim), or lim if none. A CR at buf[len - 1] is undecided: its LF may come in
 * the next call (cr_open).
 */
static size_t find_bare_cr(const char *buf, size_t lim, size_t len)
{
    const char *p = buf, *end = buf + lim;

    while ((p = memchr(p, '\r', (size_t)(end - p))) != NULL) {
        size_t i = (size_t)(p - buf);
        if (i + 1 < len && buf[i + 1] != '\n')
            return i;
        p++;
    }
    return lim;
}

size_t sw_http_feed(struct sw_http *h, const char *buf, size_t len, unsigned flags,
                    struct sw_http_event *ev)
{
    http_parser *p = hp_of(h);
    bool counting, capped = false, at_bare = false;
    size_t lim = len, n;
    enum http_errno e;

    ev_clear(ev);
    if (h->phase == PH_STOPPED)
        return len;
    p->data = h;
    if (h->pending != PEND_NONE) {
        enum pending pe = (enum pending)h->pending;

        h->pending = PEND_NONE;
        if (pe == PEND_MESSAGE) {
            ev_fill_msg(h, ev, SW_HTTP_EV_MESSAGE, 0);
            return 0;
        }
        if (pe == PEND_UPGRADE) {
            ev_fill_msg(h, ev, SW_HTTP_EV_UPGRADE, 0);
            h->phase = PH_STOPPED;
            return 0;
        }
        return stop(h, ev, SW_HTTP_EV_ERROR, SW_HTTP_ERR_SYNTAX, 0);
    }
    if (len == 0)
        return 0;

    counting = h->phase == PH_IDLE || h->phase == PH_HEAD;
    if (counting) {
        uint32_t maxh = max_head_of(h);

        /* A CR that ended the previous call must be followed by its LF (checked before the
           size limit, as an unsplit stream would see this CR before reaching the limit). */
        if (h->cr_open && buf[0] != '\n')
            return fail(h, ev, SW_HTTP_ERR_SYNTAX, len);
        h->cr_open = false;
        if (h->head_bytes >= maxh)
            return stop(h, ev, SW_HTTP_EV_ERROR, SW_HTTP_ERR_TOO_LARGE, len);
        if (lim > maxh - h->head_bytes) {
            lim = maxh - h->head_bytes;
            capped = true;
        }
        /* Hold back a trailing "\r": it may begin the blank line that ends the head (any CR
           is held; when it ends a header line instead, or turns out to be a bare CR, holding
           it only costs a short write). */
        if ((flags & SW_HTTP_FEED_HOLD) && !capped && buf[lim - 1] == '\r' &&
            (lim >= 2 || h->phase == PH_HEAD))
            lim--;
        /* Head bytes are parsed only up to a bare CR: if no event comes before it, the
           stream is not HTTP as we (and a strict peer) understand it. */
        n = find_bare_cr(buf, lim, len);
        if (n < lim) {
            lim = n;
            at_bare = true;
        }
    }

    h->cb_event = CB_NONE;
    n = lim ? http_parser_execute(p, &settings, buf, lim) : 0;
    e = HTTP_PARSER_ERRNO(p);

    if (e == HPE_PAUSED) {
        enum cb_event cb = (enum cb_event)h->cb_event;

        http_parser_pause(p, 0);
        h->cb_event = CB_NONE;
        if (cb == CB_BADVER)
            return stop(h, ev, h->seen_head ? SW_HTTP_EV_ERROR : SW_HTTP_EV_NOT_HTTP,
                        SW_HTTP_ERR_VERSION, len);
        if (cb == CB_HEAD) {
            size_t lf = n; /* the LF that ends the head, not yet consumed */

            /* lf < lim always holds with http_parser 2.9.4; never trust it. Its non-strict
               build also ends a head at "\r" + any byte: we do not (bare CRs are cut off
               before parsing, so this is only a safety net). */
            if (lf >= lim || buf[lf] != '\n')
                return fail(h, ev, SW_HTTP_ERR_SYNTAX, len);
            ev_fill_msg(h, ev, SW_HTTP_EV_HEAD, lf + 1);
            if (lf > 0)
                ev->insert_at = buf[lf - 1] == '\r' ? lf - 1 : lf;
            else
                ev->insert_at = h->last_byte == '\r' ? SW_HTTP_NO_OFFSET : 0;
            h->seen_head = true;
            h->head_bytes = 0;
            h->phase = PH_BODY;
            h->last_byte = '\n';
            /* Consume the LF: for a message without body this completes it. */
            http_parser_execute(p, &settings, buf + lf, 1);
            e = HTTP_PARSER_ERRNO(p);
            if (e == HPE_PAUSED) {
                http_parser_pause(p, 0);
                h->pending = h->upgrade_after ? PEND_UPGRADE : PEND_MESSAGE;
            } else if (e != HPE_OK) {
                h->pending = PEND_ERROR;
            }
            h->cb_event = CB_NONE;
            return lf + 1;
        }
        if (cb == CB_MESSAGE) {
            if (n > 0)
                h->last_byte = (uint8_t)buf[n - 1];
            if (h->upgrade_after) {
                ev_fill_msg(h, ev, SW_HTTP_EV_UPGRADE, n);
                h->phase = PH_STOPPED;
                return n;
            }
            ev_fill_msg(h, ev, SW_HTTP_EV_MESSAGE, n);
            h->head_bytes = 0;
            return n;
        }
        return fail(h, ev, SW_HTTP_ERR_SYNTAX, len); /* paused without our event: not ours */
    }
    if (e != HPE_OK)
        return fail(h, ev, err_of(e), len);

    /* No event: all `lim` bytes consumed. */
    if (at_bare)
        return fail(h, ev, SW_HTTP_ERR_SYNTAX, len); /* the head reached a bare CR */
    if (n > 0)
        h->last_byte = (uint8_t)buf[n - 1];
    if (counting && (h->phase == PH_IDLE || h->phase == PH_HEAD)) {
        h->head_bytes += (uint32_t)n;
        if (capped)
            return stop(h, ev, SW_HTTP_EV_ERROR, SW_HTTP_ERR_TOO_LARGE, len);
        h->cr_open = n > 0 && buf[n - 1] == '\r';
    }
    if (h->phase == PH_HEAD) {
        const char *lf = memrchr(buf, '\n', n);
        if (lf)
            ev->line_end = (size_t)(lf - buf) + 1;
    }
    return n;
}

void sw_http_eof(struct sw_http *h, struct sw_http_event *ev)
{
    http_parser *p = hp_of(h);
    enum http_errno e;

    ev_clear(ev);
    if (h->phase == PH_STOPPED)
        return;
    if (h->pending != PEND_NONE) {
        /* An event still owed for the last bytes: the caller should have looped; give it. */
        sw_http_feed(h, NULL, 0, 0, ev);
        if (ev->type != SW_HTTP_EV_MESSAGE)
            return;
        h->phase = PH_STOPPED;
        return;
    }
    p->data = h;
    h->cb_event = CB_NONE;
    if (h->phase == PH_BODY) {
        http_parser_execute(p, &settings, NULL, 0);
        e = HTTP_PARSER_ERRNO(p);
        if (e == HPE_PAUSED && h->cb_event == CB_MESSAGE) {
            http_parser_pause(p, 0);
            ev_fill_msg(h, ev, SW_HTTP_EV_MESSAGE, 0);
            ev->keep_alive = false;
            ev->at_eof = true;
        } else {
            ev->type = SW_HTTP_EV_ERROR;
            ev->err = SW_HTTP_ERR_EOF;
        }
    } else if (h->phase == PH_HEAD) {
        ev->type = SW_HTTP_EV_ERROR;
        ev->err = SW_HTTP_ERR_EOF;
    }
    h->cb_event = CB_NONE;
    h->phase = PH_STOPPED;
}

void sw_http_push_request(struct sw_http *h, enum sw_http_method m)
{
    if (h->dir != SW_HTTP_RESPONSE)
        return;
    if (h->q_len == SW_HTTP_PENDING_MAX) { /* drop the oldest */
        h->q_head = (uint8_t)((h->q_head + 1) % SW_HTTP_PENDING_MAX);
        h->q_len--;
    }
    h->queue[(h->q_head + h->q_len) % SW_HTTP_PENDING_MAX] = (uint8_t)m;
    h->q_len++;
}

void sw_http_expect_head_response(struct sw_http *h)
{
    sw_http_push_request(h, SW_HTTP_M_HEAD);
}

bool sw_http_head_in_progress(const struct sw_http *h)
{
    return h->phase == PH_HEAD;
}

int sw_http_partial_status(const struct sw_http *h)
{
    if (h->dir != SW_HTTP_RESPONSE || h->phase != PH_HEAD)
        return 0;
    /* http_parser accumulates the three status digits as it reads the status line. */
    int st = (int)((const http_parser *)(const void *)h->hp)->status_code;
    return st >= 100 && st <= 999 ? st : 0;
}

bool sw_http_in_body(const struct sw_http *h)
{
    return h->phase == PH_BODY || h->pending == PEND_MESSAGE || h->pending == PEND_UPGRADE;
}

bool sw_http_stopped(const struct sw_http *h)
{
    return h->phase == PH_STOPPED;
}
