/*
 * mysql.c - the MySQL / MariaDB protocol parser (see mysql.h).
 *
 * Rules: pure, allocation-free, no syscalls; runs on application threads inside the connection
 * layer's read and write paths. Every length read from the wire is checked against what was
 * kept; input that does not frame makes a STOP event and the parser goes quiet.
 *
 * Framing. Each direction is a stream of physical packets (3-byte length, 1-byte sequence id);
 * a physical packet of exactly 0xffffff bytes continues in the next one, so a logical packet
 * is a run of such packets and one shorter one. The first SW_MYSQL_HEAD bytes of a logical
 * packet are kept (head) and the packet is handled when it ends; a client command's payload is
 * also copied into the statement buffer as it passes, and a long COM_QUERY is reported (BEGIN)
 * as soon as that buffer is full, so a 1 MiB statement's span starts when its first bytes are
 * written.
 */
#include "mysql.h"

#include <string.h>

enum { PH_GREETING, PH_RESPONSE, PH_AUTH, PH_CMD, PH_STOPPED };

/* Where the response of pend[0] is. */
enum {
    R_FIRST,       /* its first packet (OK, ERR, column count, prepare OK, ...) */
    R_DEFS,        /* column definitions (count left) */
    R_DEFS_EOF,    /* the EOF after them (no CLIENT_DEPRECATE_EOF) */
    R_ROWS,        /* rows until EOF/OK or ERR */
    R_PREP_PARAMS, /* prepare: parameter definitions (count left) */
    R_PREP_PEOF,   /* ... their EOF */
    R_PREP_COLS,   /* prepare: column definitions (count left) */
    R_PREP_CEOF,   /* ... their EOF */
    R_INFILE,      /* LOCAL INFILE: the client sends the file, then an empty packet */
    R_AUTH,        /* COM_CHANGE_USER: authentication until OK or ERR */
};

#define CLIENT_CONNECT_WITH_DB 0x00000008u
#define CLIENT_COMPRESS 0x00000020u
#define CLIENT_PROTOCOL_41 0x00000200u
#define CLIENT_SSL 0x00000800u
#define CLIENT_SECURE_CONNECTION 0x00008000u
#define CLIENT_PLUGIN_AUTH_LENENC 0x00200000u
#define CLIENT_DEPRECATE_EOF 0x01000000u
#define CLIENT_QUERY_ATTRIBUTES 0x08000000u
#define SERVER_MORE_RESULTS_EXISTS 0x0008u
#define SERVER_STATUS_CURSOR_EXISTS 0x0040u
#define MAXPKT 0xffffffu

static uint16_t le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A length-encoded integer at p[*at] within n bytes; false when it does not fit or is NULL. */
static bool lenenc(const uint8_t *p, size_t n, size_t *at, uint64_t *v)
{
    if (*at >= n)
        return false;
    uint8_t b = p[*at];
    size_t k = b < 0xfb ? 0 : b == 0xfc ? 2 : b == 0xfd ? 3 : b == 0xfe ? 8 : SIZE_MAX;
    if (k == SIZE_MAX || n - *at - 1 < k)
        return false;
    if (k == 0) {
        *v = b;
    } else {
        *v = 0;
        for (size_t i = 0; i < k; i++)
            *v |= (uint64_t)p[*at + 1 + i] << (8 * i);
    }
    *at += 1 + k;
    return true;
}

void sw_mysql_init(struct sw_mysql *m, size_t text_max, size_t params_max)
{
    memset(m, 0, offsetof(struct sw_mysql, stmt));
    for (size_t i = 0; i < SW_MYSQL_STMTS; i++)
        m->stmt[i].state = 0;
    m->text_max = (uint32_t)(text_max < SW_MYSQL_TEXT_MAX ? text_max : SW_MYSQL_TEXT_MAX);
    m->params_max = (uint16_t)(params_max < SW_MYSQL_PARAMS_MAX ? params_max : SW_MYSQL_PARAMS_MAX);
    m->phase = PH_GREETING;
}

void sw_mysql_forget_spans(struct sw_mysql *m)
{
    for (int i = 0; i < m->npend; i++)
        m->pend[i].user = 0;
}

bool sw_mysql_stopped(const struct sw_mysql *m)
{
    return m->phase == PH_STOPPED;
}

static void close_all(struct sw_mysql *m, const char *why, sw_mysql_cb cb, void *ctx);

static void stop(struct sw_mysql *m, const char *why, sw_mysql_cb cb, void *ctx)
{
    if (m->phase == PH_STOPPED)
        return;
    /* Commands awaiting a response end without one (their spans must not stay open). */
    close_all(m, why, cb, ctx);
    m->phase = PH_STOPPED;
    struct sw_mysql_ev ev = {.kind = SW_MYSQL_EV_STOP, .reason = why};
    cb(ctx, &ev);
}

/* ---------------------------------------------------------------- statements */

static int stmt_find(const struct sw_mysql *m, uint32_t id)
{
    if (id == 0xffffffffu) /* MariaDB: the statement prepared last (execute direct) */
        return m->last_prep ? m->last_prep - 1 : -1;
    for (int i = 0; i < SW_MYSQL_STMTS; i++)
        if (m->stmt[i].state == 2 && m->stmt[i].id == id)
            return i;
    return -1;
}

/* A slot for a new PREPARE: a free one, else the least recently used. */
static int stmt_slot(struct sw_mysql *m)
{
    int best = 0;
    for (int i = 0; i < SW_MYSQL_STMTS; i++) {
        if (m->stmt[i].state == 0)
            return i;
        if ((int32_t)(m->stmt[i].age - m->stmt[best].age) < 0)
            best = i;
    }
    return best;
}

/* ---------------------------------------------------------------- parameters */

/* A bounded text writer (the parameters' text); `cut` once something did not fit. */
struct ptext {
    char *p;
    size_t n, cap;
    bool cut;
};

static void pt_put(struct ptext *t, const void *s, size_t n)
{
    size_t k = t->cap - t->n < n ? t->cap - t->n : n;
    memcpy(t->p + t->n, s, k);
    t->n += k;
    t->cut |= k < n;
}

static void pt_u64(struct ptext *t, uint64_t v, bool neg)
{
    char d[24];
    size_t i = sizeof(d);
    do {
        d[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (neg)
        d[--i] = '-';
    pt_put(t, d + i, sizeof(d) - i);
}

/* A number zero-padded to two digits (dates and times). */
static void pt_2(struct ptext *t, unsigned v, char sep)
{
    char d[3] = {(char)('0' + v / 10 % 10), (char)('0' + v % 10), sep};
    pt_put(t, d, sep ? 3 : 2);
}

/* A double without stdio: sign, integer part, up to 6 decimals (trailing zeros dropped). */
static void pt_double(struct ptext *t, double v)
{
    if (v != v) {
        pt_put(t, "NaN", 3);
        return;
    }
    bool neg = v < 0;
    if (neg)
        v = -v;
    if (v >= 1e18) {
        pt_put(t, neg ? "-1e18+" : "1e18+", neg ? 6 : 5);
        return;
    }
    uint64_t ip = (uint64_t)v;
    uint64_t fr = (uint64_t)((v - (double)ip) * 1e6 + 0.5);
    if (fr >= 1000000) {
        ip++;
        fr -= 1000000;
    }
    pt_u64(t, ip, neg);
    if (fr) {
        char d[7];
        int k = 6;
        for (int i = 5; i >= 0; i--, fr /= 10)
            d[i + 1] = (char)('0' + fr % 10);
        d[0] = '.';
        while (k > 0 && d[k] == '0')
            k--;
        pt_put(t, d, (size_t)k + 1);
    }
}

/*
 * One value of the binary protocol of type `type` at p[*at] (n bytes): its text; false when it
 * runs past the bytes kept.
 */
static bool pt_value(struct ptext *t, uint16_t type, const uint8_t *p, size_t n, size_t *at)
{
    bool uns = type & 0x8000u;
    size_t a = *at, k;
    uint64_t v = 0;
    switch (type & 0xff) {
    case 1:  /* TINY */
    case 2:  /* SHORT */
    case 13: /* YEAR */
    case 3:  /* LONG */
    case 9:  /* INT24 */
    case 8:  /* LONGLONG */
        k = (type & 0xff) == 1                           ? 1
            : (type & 0xff) == 8                         ? 8
            : ((type & 0xff) == 3 || (type & 0xff) == 9) ? 4
                                                         : 2;
        if (n - a < k)
            return false;
        for (size_t i = 0; i < k; i++)
            v |= (uint64_t)p[a + i] << (8 * i);
        if (!uns && k < 8 && (v >> (8 * k - 1) & 1))
            v |= ~(uint64_t)0 << (8 * k); /* sign-extend */
        if (!uns && (int64_t)v < 0)
            pt_u64(t, (uint64_t)0 - v, true);
        else
            pt_u64(t, v, false);
        *at = a + k;
        return true;
    case 4: { /* FLOAT */
        if (n - a < 4)
            return false;
        uint32_t u = (uint32_t)p[a] | (uint32_t)p[a + 1] << 8 | (uint32_t)p[a + 2] << 16 |
                     (uint32_t)p[a + 3] << 24;
        float f;
        memcpy(&f, &u, 4);
        pt_double(t, f);
        *at = a + 4;
        return true;
    }
    case 5: { /* DOUBLE */
        if (n - a < 8)
            return false;
        for (size_t i = 0; i < 8; i++)
            v |= (uint64_t)p[a + i] << (8 * i);
        double d;
        memcpy(&d, &v, 8);
        pt_double(t, d);
        *at = a + 8;
        return true;
    }
    case 6: /* NULL */
        pt_put(t, "NULL", 4);
        return true;
    case 7:  /* TIMESTAMP */
    case 10: /* DATE */
    case 12: /* DATETIME */
    case 11: /* TIME */ {
        if (a >= n || n - a - 1 < p[a])
            return false;
        size_t l = p[a];
        const uint8_t *q = p + a + 1;
        if ((type & 0xff) == 11) {
            if (l >= 8) {
                uint32_t days = (uint32_t)q[1] | (uint32_t)q[2] << 8 | (uint32_t)q[3] << 16 |
                                (uint32_t)q[4] << 24;
                pt_u64(t, (uint64_t)days * 24 + q[5], q[0] != 0);
                pt_put(t, ":", 1);
                pt_2(t, q[6], ':');
                pt_2(t, q[7], 0);
            } else {
                pt_put(t, "00:00:00", 8);
            }
        } else if (l >= 4) {
            pt_u64(t, (uint64_t)(q[0] | q[1] << 8), false);
            pt_put(t, "-", 1);
            pt_2(t, q[2], '-');
            pt_2(t, q[3], l >= 7 ? ' ' : 0);
            if (l >= 7) {
                pt_2(t, q[4], ':');
                pt_2(t, q[5], ':');
                pt_2(t, q[6], 0);
            }
        } else {
            pt_put(t, "0000-00-00", 10);
        }
        *at = a + 1 + l;
        return true;
    }
    default: { /* strings, decimals, blobs, JSON, ...: a length-encoded string */
        uint64_t l;
        size_t b = a;
        if (!lenenc(p, n, &b, &l))
            return false;
        size_t have = n - b;
        pt_put(t, p + b, l < have ? (size_t)l : have);
        if (l > have) {
            *at = n;
            return false;
        }
        *at = b + (size_t)l;
        return true;
    }
    }
}

/*
 * The parameters of an execution of statement `s`: p[0..n) is the packet after its command byte
 * (statement id, flags, iteration count, NULL bitmap, new-params-bound flag, types, values).
 * Writes "[v1,v2,...]" to out (cap bytes, "..." when cut); returns its length, 0 for none.
 */
static size_t exec_params(struct sw_mysql_stmt *s, const uint8_t *p, size_t n, char *out,
                          size_t cap)
{
    size_t np = s->nparams;
    if (np == 0 || np > SW_MYSQL_PTYPES || cap < 8)
        return 0;
    size_t nb = (np + 7) / 8, at = 9 + nb + 1;
    if (n < at)
        return 0;
    const uint8_t *nulls = p + 9;
    if (p[9 + nb]) { /* new params bound: the types follow */
        if (n - at < 2 * np)
            return 0;
        for (size_t i = 0; i < np; i++)
            s->types[i] = (uint16_t)(p[at + 2 * i] | p[at + 2 * i + 1] << 8);
        s->ntypes = (uint8_t)np;
        at += 2 * np;
    }
    if (s->ntypes != np)
        return 0; /* types never seen (sent with an earlier execute we did not follow) */
    struct ptext t = {out, 0, cap - 3, false};
    pt_put(&t, "[", 1);
    bool ok = true;
    for (size_t i = 0; i < np && ok; i++) {
        if (i)
            pt_put(&t, ",", 1);
        if (nulls[i / 8] >> (i % 8) & 1)
            pt_put(&t, "NULL", 4);
        else
            ok = pt_value(&t, s->types[i], p, n, &at);
    }
    if (ok)
        pt_put(&t, "]", 1);
    if (!ok || t.cut) { /* a value past the bytes kept, or past the limit */
        memcpy(out + t.n, "...", 3);
        t.n += 3;
    }
    return t.n;
}

/* ---------------------------------------------------------------- events */

static void end_cmd(struct sw_mysql *m, bool err, const uint8_t *h, size_t hn, sw_mysql_cb cb,
                    void *ctx)
{
    if (m->npend == 0)
        return;
    struct sw_mysql_pend pd = m->pend[0];
    memmove(&m->pend[0], &m->pend[1], (size_t)(m->npend - 1) * sizeof(m->pend[0]));
    m->npend--;
    struct sw_mysql_ev ev = {
        .kind = SW_MYSQL_EV_END, .cmd = pd.cmd, .error = err, .user = pd.user, .rows = m->rows};
    if (err && h && hn >= 3) {
        ev.err_code = le16(h + 1);
        size_t at = 3;
        if (hn >= 9 && h[3] == '#') {
            memcpy(ev.sqlstate, h + 4, 5);
            at = 9;
        }
        ev.msg = (const char *)h + at;
        ev.msg_len = hn - at < SW_MYSQL_MSG_MAX ? hn - at : SW_MYSQL_MSG_MAX;
    }
    if (pd.cmd == SW_MYSQL_COM_INIT_DB && !err) {
        memcpy(m->db, m->pend_db, m->pend_db_len);
        m->db_len = m->pend_db_len;
    }
    if (pd.cmd == SW_MYSQL_COM_STMT_PREPARE && err && pd.slot < SW_MYSQL_STMTS &&
        m->stmt[pd.slot].state == 1)
        m->stmt[pd.slot].state = 0;
    m->rows = 0;
    m->rstate = R_FIRST;
    cb(ctx, &ev);
}

/* END (closed) for each command awaiting its response; `why` non-NULL: the parser gave up. */
static void close_all(struct sw_mysql *m, const char *why, sw_mysql_cb cb, void *ctx)
{
    while (m->npend > 0) {
        struct sw_mysql_pend pd = m->pend[0];
        memmove(&m->pend[0], &m->pend[1], (size_t)(m->npend - 1) * sizeof(m->pend[0]));
        m->npend--;
        struct sw_mysql_ev ev = {.kind = SW_MYSQL_EV_END,
                                 .cmd = pd.cmd,
                                 .error = true,
                                 .closed = true,
                                 .user = pd.user,
                                 .rows = m->rows,
                                 .reason = why};
        m->rows = 0;
        cb(ctx, &ev);
    }
    m->rstate = R_FIRST;
}

void sw_mysql_close(struct sw_mysql *m, sw_mysql_cb cb, void *ctx)
{
    close_all(m, NULL, cb, ctx);
}

/* Whether a command gets a response (and so an entry in pend). */
static bool has_response(uint8_t c)
{
    return c != SW_MYSQL_COM_STMT_CLOSE && c != SW_MYSQL_COM_STMT_SEND_LONG_DATA &&
           c != SW_MYSQL_COM_QUIT;
}

static bool known_cmd(uint8_t c)
{
    switch (c) {
    case SW_MYSQL_COM_QUIT:
    case SW_MYSQL_COM_INIT_DB:
    case SW_MYSQL_COM_QUERY:
    case SW_MYSQL_COM_FIELD_LIST:
    case SW_MYSQL_COM_STATISTICS:
    case SW_MYSQL_COM_PROCESS_KILL:
    case SW_MYSQL_COM_DEBUG:
    case SW_MYSQL_COM_PING:
    case SW_MYSQL_COM_CHANGE_USER:
    case SW_MYSQL_COM_STMT_PREPARE:
    case SW_MYSQL_COM_STMT_EXECUTE:
    case SW_MYSQL_COM_STMT_SEND_LONG_DATA:
    case SW_MYSQL_COM_STMT_CLOSE:
    case SW_MYSQL_COM_STMT_RESET:
    case SW_MYSQL_COM_SET_OPTION:
    case SW_MYSQL_COM_STMT_FETCH:
    case SW_MYSQL_COM_RESET_CONNECTION:
    case SW_MYSQL_COM_STMT_BULK_EXECUTE:
        return true;
    default:
        return false;
    }
}

/*
 * The command being captured is reported: `total` is the payload length after the command byte
 * when known (the packet ended), else 0 (the buffer is full and more follows).
 */
static void begin_cmd(struct sw_mysql *m, uint64_t total, bool ended, sw_mysql_cb cb, void *ctx)
{
    uint8_t c = m->cmd;
    m->begun = true;
    struct sw_mysql_ev ev = {.kind = SW_MYSQL_EV_BEGIN, .cmd = c, .text = "", .text_len = 0};
    const struct sw_mysql_dir *d = &m->dir[0];
    uint8_t slot = 0xff;
    size_t skip = 0;
    char pbuf[SW_MYSQL_PARAMS_MAX + 3];
    size_t have = m->text_n;
    switch (c) {
    case SW_MYSQL_COM_QUERY:
        if (m->caps & CLIENT_QUERY_ATTRIBUTES) {
            /* parameter_count, parameter_set_count: "\0\1" when no attributes are sent. */
            if (have >= 2 && m->text[0] == 0 && m->text[1] == 1)
                skip = 2;
            else
                have = skip = 0; /* attributes before the text: not decoded */
        }
        /* fall through */
    case SW_MYSQL_COM_STMT_PREPARE:
    case SW_MYSQL_COM_INIT_DB: {
        size_t len = have - skip;
        uint64_t full = ended ? total - skip : UINT64_MAX;
        if (len > m->text_max)
            len = m->text_max;
        ev.text = m->text + skip;
        ev.text_len = len;
        ev.text_cut = full > len;
        break;
    }
    case SW_MYSQL_COM_STMT_EXECUTE:
    case SW_MYSQL_COM_STMT_BULK_EXECUTE:
    case SW_MYSQL_COM_STMT_FETCH: {
        if (d->head_n >= 5) {
            int i = stmt_find(m, le32(d->head + 1));
            if (i >= 0) {
                m->stmt[i].age = ++m->age;
                ev.text = m->stmt[i].text;
                ev.text_len = m->stmt[i].len;
                ev.text_cut = m->stmt[i].cut;
                if (m->params_max && c == SW_MYSQL_COM_STMT_EXECUTE) {
                    ev.params_len = exec_params(&m->stmt[i], (const uint8_t *)m->text, m->text_n,
                                                pbuf, (size_t)m->params_max + 3);
                    ev.params = pbuf;
                }
            }
        }
        break;
    }
    default:
        break;
    }
    if (c == SW_MYSQL_COM_STMT_PREPARE) {
        int i = stmt_slot(m);
        struct sw_mysql_stmt *s = &m->stmt[i];
        s->state = 1;
        s->nparams = 0; /* known from the prepare response (an execute-direct sent before it
                           has its parameters not decoded) */
        s->ntypes = 0;
        s->age = ++m->age;
        s->len = (uint16_t)(ev.text_len < SW_MYSQL_STMT_TEXT ? ev.text_len : SW_MYSQL_STMT_TEXT);
        s->cut = ev.text_cut || ev.text_len > SW_MYSQL_STMT_TEXT;
        memcpy(s->text, ev.text, s->len);
        slot = (uint8_t)i;
        m->last_prep = (uint8_t)(i + 1);
    } else if (c == SW_MYSQL_COM_INIT_DB) {
        size_t k = ev.text_len < SW_MYSQL_DB_MAX ? ev.text_len : SW_MYSQL_DB_MAX;
        memcpy(m->pend_db, ev.text, k);
        m->pend_db_len = (uint8_t)k;
    } else if (c == SW_MYSQL_COM_STMT_CLOSE && d->head_n >= 5) {
        int i = stmt_find(m, le32(d->head + 1));
        if (i >= 0 && le32(d->head + 1) != 0xffffffffu)
            m->stmt[i].state = 0;
    }
    if (!has_response(c))
        return;
    if (m->npend == SW_MYSQL_PENDING) {
        stop(m, "more commands pipelined than followed", cb, ctx);
        return;
    }
    struct sw_mysql_pend *pd = &m->pend[m->npend++];
    pd->cmd = c;
    pd->slot = slot;
    pd->user = 0;
    if (m->npend == 1) {
        m->rstate = c == SW_MYSQL_COM_CHANGE_USER ? R_AUTH : R_FIRST;
        m->rows = 0;
    }
    pd->user = cb(ctx, &ev);
}

/* ---------------------------------------------------------------- packets */

/* The server's greeting: HandshakeV10 or ERR. */
static void on_greeting(struct sw_mysql *m, const uint8_t *h, size_t hn, sw_mysql_cb cb, void *ctx)
{
    if (hn >= 1 && h[0] == 0xff) {
        stop(m, "the server refused the connection", cb, ctx);
        return;
    }
    if (hn < 1 || h[0] != 10) {
        stop(m, "not a MySQL handshake", cb, ctx);
        return;
    }
    const uint8_t *z = memchr(h + 1, 0, hn - 1);
    m->srv_caps = 0xffffffffu; /* not known: the client's alone count */
    if (z) {
        size_t at = (size_t)(z - h) + 1 + 4 + 8 + 1; /* version, thread id, scramble, filler */
        if (at + 2 <= hn) {
            m->srv_caps = le16(h + at);
            if (at + 2 + 1 + 2 + 2 <= hn)
                m->srv_caps |= (uint32_t)le16(h + at + 5) << 16;
            else
                m->srv_caps |= 0xffff0000u;
        }
    }
    m->phase = PH_RESPONSE;
}

/* The client's HandshakeResponse41 (or SSLRequest). */
static void on_response(struct sw_mysql *m, const uint8_t *h, size_t hn, uint64_t len,
                        sw_mysql_cb cb, void *ctx)
{
    if (hn < 4) {
        stop(m, "short handshake response", cb, ctx);
        return;
    }
    uint32_t caps = le32(h);
    if (caps & CLIENT_SSL) {
        stop(m, "TLS (SSLRequest): the bytes after are encrypted", cb, ctx);
        return;
    }
    if (!(caps & CLIENT_PROTOCOL_41) || len < 32) {
        stop(m, "pre-4.1 protocol", cb, ctx);
        return;
    }
    if (caps & m->srv_caps & CLIENT_COMPRESS) {
        stop(m, "compressed protocol", cb, ctx);
        return;
    }
    m->caps = caps & m->srv_caps;
    m->phase = PH_AUTH;
    /* user NUL, auth data, database NUL: whatever of it lies in the kept head. */
    size_t at = 32;
    const uint8_t *z = at < hn ? memchr(h + at, 0, hn - at) : NULL;
    if (!z || !(caps & CLIENT_CONNECT_WITH_DB))
        return;
    at = (size_t)(z - h) + 1;
    uint64_t alen;
    if (caps & CLIENT_PLUGIN_AUTH_LENENC) {
        if (!lenenc(h, hn, &at, &alen))
            return;
    } else if (caps & CLIENT_SECURE_CONNECTION) {
        if (at >= hn)
            return;
        alen = h[at++];
    } else {
        z = at < hn ? memchr(h + at, 0, hn - at) : NULL;
        if (!z)
            return;
        alen = (uint64_t)(z - (h + at)) + 1;
    }
    if (alen > hn - at)
        return;
    at += (size_t)alen;
    z = at < hn ? memchr(h + at, 0, hn - at) : NULL;
    if (!z)
        return;
    size_t k = (size_t)(z - (h + at));
    if (k > SW_MYSQL_DB_MAX)
        k = SW_MYSQL_DB_MAX;
    memcpy(m->db, h + at, k);
    m->db_len = (uint8_t)k;
}

/* Status flags of an OK packet (0x00 or, with CLIENT_DEPRECATE_EOF, 0xfe) or an EOF packet. */
static uint16_t end_status(const struct sw_mysql *m, const uint8_t *h, size_t hn, bool ok_form)
{
    if (!ok_form)
        return hn >= 5 ? le16(h + 3) : 0; /* 0xfe, warnings, status */
    size_t at = 1;
    uint64_t v;
    if (!lenenc(h, hn, &at, &v) || !lenenc(h, hn, &at, &v))
        return 0;
    if (!(m->caps & CLIENT_PROTOCOL_41) || at + 2 > hn)
        return 0;
    return le16(h + at);
}

/* The end of a result set or OK: another result follows, or the command's response ends. */
static void result_done(struct sw_mysql *m, uint16_t status, sw_mysql_cb cb, void *ctx)
{
    if (status & SERVER_MORE_RESULTS_EXISTS)
        m->rstate = R_FIRST;
    else
        end_cmd(m, false, NULL, 0, cb, ctx);
}

static void on_server(struct sw_mysql *m, const uint8_t *h, size_t hn, uint64_t len, sw_mysql_cb cb,
                      void *ctx)
{
    uint8_t b = hn ? h[0] : 0;
    bool deprecate = m->caps & CLIENT_DEPRECATE_EOF;
    bool eof = b == 0xfe && len < MAXPKT; /* EOF, or OK with 0xfe: not a row (they are longer) */
    if (b == 0xff && hn >= 3 && le16(h + 1) == 0xffff)
        return; /* MariaDB progress report, not the end */
    if (m->npend == 0) {
        stop(m, "a server packet with no command awaiting it", cb, ctx);
        return;
    }
    uint8_t c = m->pend[0].cmd;
    switch (m->rstate) {
    case R_AUTH:
        if (b == 0x00)
            end_cmd(m, false, NULL, 0, cb, ctx);
        else if (b == 0xff)
            end_cmd(m, true, h, hn, cb, ctx);
        return;
    case R_INFILE:
        if (b == 0xff)
            end_cmd(m, true, h, hn, cb, ctx);
        return;
    case R_FIRST:
        if (b == 0xff) {
            end_cmd(m, true, h, hn, cb, ctx);
            return;
        }
        if (c == SW_MYSQL_COM_STMT_PREPARE) {
            if (b != 0x00 || hn < 9) {
                stop(m, "bad prepare response", cb, ctx);
                return;
            }
            uint8_t slot = m->pend[0].slot;
            if (slot < SW_MYSQL_STMTS && m->stmt[slot].state == 1) {
                m->stmt[slot].id = le32(h + 1);
                m->stmt[slot].state = 2;
                m->stmt[slot].nparams = le16(h + 7);
                m->stmt[slot].ntypes = 0;
            }
            m->count2 = le16(h + 5);
            m->count = le16(h + 7);
            m->rstate = R_PREP_PARAMS;
            if (m->count == 0)
                goto prep_cols;
            return;
        }
        if (c == SW_MYSQL_COM_STATISTICS) {
            end_cmd(m, false, NULL, 0, cb, ctx);
            return;
        }
        if (c == SW_MYSQL_COM_STMT_FETCH || c == SW_MYSQL_COM_FIELD_LIST) {
            m->rstate = R_ROWS; /* rows (definitions) straight away, then EOF */
            goto rows;
        }
        if (b == 0x00) {
            result_done(m, end_status(m, h, hn, true), cb, ctx);
            return;
        }
        if (eof) {
            result_done(m, end_status(m, h, hn, deprecate), cb, ctx);
            return;
        }
        if (b == 0xfb && c == SW_MYSQL_COM_QUERY) {
            m->rstate = R_INFILE;
            return;
        }
        {
            size_t at = 0;
            uint64_t n;
            if (!lenenc(h, hn, &at, &n) || n == 0) {
                stop(m, "bad result set header", cb, ctx);
                return;
            }
            /* MariaDB (MARIADB_CLIENT_CACHE_METADATA): a byte says whether definitions follow. */
            if (len > at && hn > at && h[at] == 0)
                n = 0;
            m->count = n;
            m->rstate = n ? R_DEFS : R_ROWS;
        }
        return;
    case R_DEFS:
        if (--m->count == 0)
            m->rstate = deprecate ? R_ROWS : R_DEFS_EOF;
        return;
    case R_DEFS_EOF:
        if (!eof) {
            stop(m, "no EOF after column definitions", cb, ctx);
            return;
        }
        /* A cursor was opened (COM_STMT_EXECUTE with a cursor): rows come by COM_STMT_FETCH. */
        if (end_status(m, h, hn, false) & SERVER_STATUS_CURSOR_EXISTS)
            end_cmd(m, false, NULL, 0, cb, ctx);
        else
            m->rstate = R_ROWS;
        return;
    case R_ROWS:
    rows:
        if (b == 0xff) {
            end_cmd(m, true, h, hn, cb, ctx);
        } else if (eof) {
            bool ok_form = deprecate && c != SW_MYSQL_COM_FIELD_LIST;
            result_done(m, end_status(m, h, hn, ok_form), cb, ctx);
        } else {
            m->rows++;
        }
        return;
    case R_PREP_PARAMS:
        if (--m->count > 0)
            return;
        if (!deprecate) {
            m->rstate = R_PREP_PEOF;
            return;
        }
    prep_cols:
        m->count = m->count2;
        m->rstate = R_PREP_COLS;
        if (m->count == 0)
            end_cmd(m, false, NULL, 0, cb, ctx);
        return;
    case R_PREP_PEOF:
        if (!eof) {
            stop(m, "no EOF after parameter definitions", cb, ctx);
            return;
        }
        goto prep_cols;
    case R_PREP_COLS:
        if (--m->count > 0)
            return;
        if (deprecate)
            end_cmd(m, false, NULL, 0, cb, ctx);
        else
            m->rstate = R_PREP_CEOF;
        return;
    case R_PREP_CEOF:
        if (!eof) {
            stop(m, "no EOF after column definitions", cb, ctx);
            return;
        }
        end_cmd(m, false, NULL, 0, cb, ctx);
        return;
    default:
        return;
    }
}

/* A client logical packet ended. */
static void on_client(struct sw_mysql *m, const struct sw_mysql_dir *d, sw_mysql_cb cb, void *ctx)
{
    switch (m->phase) {
    case PH_GREETING:
        stop(m, "the client spoke first: not MySQL", cb, ctx);
        return;
    case PH_RESPONSE:
        on_response(m, d->head, d->head_n, d->lpos, cb, ctx);
        return;
    case PH_AUTH:
        return;
    default:
        break;
    }
    if (m->in_cmd) {
        m->in_cmd = false;
        if (!m->begun)
            begin_cmd(m, d->lpos - 1, true, cb, ctx);
        return;
    }
    /* Not a command: LOCAL INFILE data (its empty packet ends it) or authentication data. */
    if (m->npend > 0 && m->rstate == R_INFILE) {
        if (d->lpos == 0)
            m->rstate = R_FIRST;
        return;
    }
    if (m->npend > 0 && m->rstate == R_AUTH)
        return;
    stop(m, "a client packet out of sequence", cb, ctx);
}

/* Payload bytes of the current logical packet of direction `dn` (after the header). */
static void payload(struct sw_mysql *m, int dn, const uint8_t *p, size_t k, sw_mysql_cb cb,
                    void *ctx)
{
    struct sw_mysql_dir *d = &m->dir[dn];
    size_t after = d->left - k; /* bytes of this physical packet after these */
    if (d->head_n < SW_MYSQL_HEAD) {
        size_t c = SW_MYSQL_HEAD - d->head_n < k ? SW_MYSQL_HEAD - d->head_n : k;
        memcpy(d->head + d->head_n, p, c);
        d->head_n = (uint16_t)(d->head_n + c);
    }
    if (dn == 0 && m->phase == PH_CMD && d->lpos == 0 && k > 0 && d->seq0 == 0 &&
        !(m->npend > 0 && (m->rstate == R_INFILE || m->rstate == R_AUTH))) {
        /* The first byte of a command packet. */
        if (!known_cmd(p[0])) {
            stop(m, "a command whose response is not followed", cb, ctx);
            return;
        }
        m->in_cmd = true;
        m->begun = false;
        m->cmd = p[0];
        m->text_n = 0;
        p++;
        k--;
        d->lpos++;
    }
    if (dn == 0 && m->in_cmd && !m->begun) {
        /* Room for the query attributes' two bytes; an EXECUTE's parameters in full. */
        size_t cap = m->cmd == SW_MYSQL_COM_STMT_EXECUTE ? SW_MYSQL_TEXT_MAX + 2 : m->text_max + 2;
        size_t c = cap - m->text_n < k ? cap - m->text_n : k;
        memcpy(m->text + m->text_n, p, c);
        m->text_n += (uint32_t)c;
        /* Full while more follows: a long COM_QUERY (or PREPARE) begins now. */
        bool more = c < k || after > 0 || d->plen == MAXPKT;
        if (m->text_n == cap && more &&
            (m->cmd == SW_MYSQL_COM_QUERY || m->cmd == SW_MYSQL_COM_STMT_PREPARE))
            begin_cmd(m, 0, false, cb, ctx);
    }
    d->lpos += k;
}

void sw_mysql_feed(struct sw_mysql *m, bool from_server, const uint8_t *p, size_t n, sw_mysql_cb cb,
                   void *ctx)
{
    int dn = from_server ? 1 : 0;
    struct sw_mysql_dir *d = &m->dir[dn];
    while (n > 0 && m->phase != PH_STOPPED) {
        if (d->hdr_n < 4) {
            size_t c = 4u - d->hdr_n < n ? 4u - d->hdr_n : n;
            memcpy(d->hdr + d->hdr_n, p, c);
            d->hdr_n = (uint8_t)(d->hdr_n + c);
            p += c;
            n -= c;
            if (d->hdr_n < 4)
                return;
            d->plen = (uint32_t)d->hdr[0] | (uint32_t)d->hdr[1] << 8 | (uint32_t)d->hdr[2] << 16;
            d->seq = d->hdr[3];
            d->left = d->plen;
            if (!d->cont) {
                d->lpos = 0;
                d->head_n = 0;
                d->seq0 = d->seq;
            }
            if (d->left > 0)
                continue;
        } else {
            size_t k = d->left < n ? d->left : n;
            payload(m, dn, p, k, cb, ctx);
            d->left -= (uint32_t)k;
            p += k;
            n -= k;
            if (d->left > 0 || m->phase == PH_STOPPED)
                return;
        }
        /* The physical packet is complete. */
        d->hdr_n = 0;
        d->cont = d->plen == MAXPKT;
        if (d->cont)
            continue;
        if (dn == 0) {
            on_client(m, d, cb, ctx);
        } else if (m->phase == PH_GREETING) {
            on_greeting(m, d->head, d->head_n, cb, ctx);
        } else if (m->phase == PH_AUTH) {
            if (d->head_n && d->head[0] == 0x00)
                m->phase = PH_CMD;
            else if (d->head_n && d->head[0] == 0xff)
                stop(m, "authentication failed", cb, ctx);
        } else if (m->phase == PH_CMD) {
            on_server(m, d->head, d->head_n, d->lpos, cb, ctx);
        } else {
            stop(m, "a server packet before the handshake response", cb, ctx);
        }
    }
}
