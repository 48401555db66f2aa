/*
 * proto_pg.c - PostgreSQL v3 framing of a client connection (see proto_pg.h).
 *
 * Both directions are `type, int32 length, body` after the client's startup message (length,
 * code, body). The framing never depends on the contents; the bodies of Query, Parse, Bind,
 * Execute (client) and ErrorResponse (server) are read field by field for the captures, every
 * other body is skipped in one step. A length below 4, above PostgreSQL's own limits, or a type
 * byte the protocol does not have gives up.
 */
#include "common.h"

#include "proto_pg.h"

#include <string.h>

enum { P_QUERY = 1, P_EXEC, P_SYNC, P_FUNC };

#define MSG_MAX (1u << 30) /* PostgreSQL refuses larger messages */
#define STARTUP_MAX 10000u /* MAX_STARTUP_PACKET_LENGTH */
#define CODE_SSL 80877103u
#define CODE_GSS 80877104u
#define CODE_CANCEL 80877102u
#define FNV_BASIS 14695981039346656037ull
#define FNV_PRIME 1099511628211ull

static inline uint32_t be32(const uint8_t *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

void sw_pg_reset(struct sw_pg *p, bool params)
{
    memset(p, 0, sizeof(*p));
    p->startup = true;
    p->params_on = params;
    p->slot = -1;
    p->bind_slot = -1;
}

const char *sw_pg_database(const struct sw_pg *p, size_t *len)
{
    if (p->db_set) {
        *len = p->db_len;
        return p->db;
    }
    *len = p->user_len;
    return p->user;
}

uint32_t sw_pg_pending(const struct sw_pg *p)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->pn; i++) {
        const struct sw_pg_pend *e = &p->pend[(p->ph + i) % SW_PG_PENDING];
        if (e->kind == P_QUERY || e->kind == P_EXEC)
            n += e->n;
    }
    return n;
}

static size_t give_up(struct sw_pg *p, struct sw_db_ev *ev, const char *why, size_t consumed)
{
    p->done = true;
    p->why = why;
    ev->type = SW_DB_EV_GIVEUP;
    ev->msg = why;
    ev->msg_len = strlen(why);
    return consumed;
}

static bool pend_push(struct sw_pg *p, uint8_t kind)
{
    if (p->pn > 0) {
        struct sw_pg_pend *t = &p->pend[(p->ph + p->pn - 1) % SW_PG_PENDING];
        if (t->kind == kind && kind == P_EXEC && t->n < UINT32_MAX) {
            t->n++;
            return true;
        }
    }
    if (p->pn >= SW_PG_PENDING)
        return false;
    struct sw_pg_pend *t = &p->pend[(p->ph + p->pn) % SW_PG_PENDING];
    t->kind = kind;
    t->n = 1;
    p->pn++;
    return true;
}

/* Takes one request off the head run. */
static void pend_take(struct sw_pg *p)
{
    struct sw_pg_pend *h = &p->pend[p->ph];
    if (h->n > 1) {
        h->n--;
        return;
    }
    p->ph = (uint8_t)((p->ph + 1) % SW_PG_PENDING);
    p->pn--;
}

static bool sync_pending(const struct sw_pg *p)
{
    for (uint32_t i = 0; i < p->pn; i++)
        if (p->pend[(p->ph + i) % SW_PG_PENDING].kind == P_SYNC)
            return true;
    return false;
}

static int slot_find(const struct sw_pg *p, uint64_t h)
{
    for (int i = 0; i < SW_PG_SLOTS; i++)
        if (p->slots[i].name_hash == h)
            return i;
    return -1;
}

/* The slot a Parse of statement `h` writes: the one of that name, else the least recently used. */
static int slot_take(struct sw_pg *p, uint64_t h)
{
    int s = slot_find(p, h);
    if (s < 0) {
        s = 0;
        for (int i = 1; i < SW_PG_SLOTS; i++)
            if (p->slots[i].used < p->slots[s].used)
                s = i;
    }
    struct sw_pg_slot *sl = &p->slots[s];
    sl->name_hash = h;
    sl->used = ++p->stamp;
    sl->len = 0;
    sl->cut = false;
    sl->text[0] = '\0';
    return s;
}

/* ---------------------------------------------------------------- bodies */

/* Reads a NUL-terminated field: hashes it into *h; returns the bytes used and whether its NUL
 * was among them. */
static size_t cstr_hash(const uint8_t *b, size_t n, uint64_t *h, bool *end)
{
    const uint8_t *z = memchr(b, 0, n);
    size_t k = z ? (size_t)(z - b) : n;
    for (size_t i = 0; i < k; i++)
        *h = (*h ^ b[i]) * FNV_PRIME;
    *end = z != NULL;
    return z ? k + 1 : k;
}

static size_t cstr_cap(const uint8_t *b, size_t n, char *dst, size_t cap, uint32_t *len, bool *cut,
                       bool *end)
{
    const uint8_t *z = memchr(b, 0, n);
    size_t k = z ? (size_t)(z - b) : n;
    sw_db_cap_put(dst, cap, len, cut, b, k);
    *end = z != NULL;
    return z ? k + 1 : k;
}

static void params_put(struct sw_pg *p, const char *s, size_t n)
{
    sw_db_cap_put(p->params, SW_PG_PARAMS_MAX, &p->params_len, &p->params_cut, (const uint8_t *)s,
                  n);
}

/* Bind parameters: field 2 nfmt, 3 formats, 4 nparams, 5 a length, 6 a value, 7 the rest. */
static size_t bind_params(struct sw_pg *p, struct sw_pg_msg *m, const uint8_t *b, size_t n)
{
    size_t i = 0;
    while (i < n) {
        switch (m->field) {
        case 2:
        case 4:
        case 5: {
            size_t want = m->field == 5 ? 4u : 2u;
            m->fval = m->fval << 8 | b[i++];
            if (++m->fpos < want)
                break;
            uint32_t v = m->fval;
            m->fpos = 0;
            m->fval = 0;
            if (m->field == 2) {
                p->nfmt = (uint16_t)v;
                p->fmt0 = 0;
                m->field = p->nfmt ? 3 : 4;
            } else if (m->field == 4) {
                p->nparams = (uint16_t)v;
                p->pi = 0;
                params_put(p, "[", 1);
                if (!p->nparams) {
                    params_put(p, "]", 1);
                    m->field = 7;
                } else {
                    m->field = 5;
                }
            } else {
                p->plen = (int32_t)v;
                if (p->pi)
                    params_put(p, ",", 1);
                bool bin = p->nfmt == 1 ? p->fmt0 == 1 : false;
                if (p->plen < 0) {
                    params_put(p, "null", 4);
                } else if (bin) {
                    params_put(p, "(binary)", 8);
                }
                if (p->plen <= 0 || bin) {
                    m->fpos = p->plen > 0 ? (uint32_t)p->plen : 0;
                    m->field = 6; /* skip the value (if any) */
                    if (!m->fpos)
                        goto value_end;
                } else {
                    m->fpos = (uint32_t)p->plen;
                    m->field = 6;
                }
            }
            break;
        }
        case 3: {
            /* formats: nfmt int16; the first kept (one code applies to every parameter) */
            if (m->fpos == 1)
                p->fmt0 = (uint16_t)(m->fval << 8 | b[i]);
            else
                m->fval = b[i];
            i++;
            if (++m->fpos == 2u * p->nfmt) {
                m->fpos = 0;
                m->fval = 0;
                m->field = 4;
            }
            break;
        }
        case 6: {
            size_t k = n - i < m->fpos ? n - i : m->fpos;
            bool bin = p->nfmt == 1 ? p->fmt0 == 1 : false;
            /* per-parameter formats (nfmt > 1) are not followed: shown as text */
            if (p->plen > 0 && !bin)
                params_put(p, (const char *)b + i, k);
            i += k;
            m->fpos -= (uint32_t)k;
            if (m->fpos)
                break;
        value_end:
            m->fval = 0;
            m->fpos = 0;
            if (++p->pi >= p->nparams) {
                params_put(p, "]", 1);
                m->field = 7;
            } else {
                m->field = 5;
            }
            break;
        }
        default:
            return n;
        }
    }
    return n;
}

static void client_body(struct sw_pg *p, const uint8_t *b, size_t n)
{
    struct sw_pg_msg *m = &p->c;
    size_t i = 0;
    bool end;
    while (i < n) {
        switch (m->type) {
        case 0: /* startup: int32 code was in the header; then key\0value\0 ... \0 */
            if (m->field == 0) {
                const uint8_t *z = memchr(b + i, 0, n - i);
                size_t k = z ? (size_t)(z - (b + i)) : n - i;
                /* the key: "database" or "user" (captured whole into fval as a tiny match) */
                for (size_t j = 0; j < k; j++) {
                    static const char db[] = "database", us[] = "user";
                    uint32_t at = m->fpos + (uint32_t)j;
                    uint8_t c = b[i + j];
                    if (!(at < 8 && c == (uint8_t)db[at]))
                        m->fval &= ~1u;
                    if (!(at < 4 && c == (uint8_t)us[at]))
                        m->fval &= ~2u;
                }
                m->fpos += (uint32_t)k;
                i += z ? k + 1 : k;
                if (z) {
                    p->sp_key = 0;
                    if ((m->fval & 1u) && m->fpos == 8)
                        p->sp_key = 1;
                    else if ((m->fval & 2u) && m->fpos == 4)
                        p->sp_key = 2;
                    if (m->fpos == 0) { /* the final \0 */
                        m->field = 2;
                        break;
                    }
                    m->field = 1;
                    m->fpos = 0;
                    if (p->sp_key == 1) {
                        p->db_len = 0;
                        p->db_cut = false;
                        p->db_set = true;
                    }
                }
            } else if (m->field == 1) {
                if (p->sp_key == 1)
                    i += cstr_cap(b + i, n - i, p->db, SW_PG_DB_MAX, &p->db_len, &p->db_cut, &end);
                else if (p->sp_key == 2)
                    i += cstr_cap(b + i, n - i, p->user, SW_PG_DB_MAX, &p->user_len, &p->user_cut,
                                  &end);
                else {
                    uint64_t h = 0;
                    i += cstr_hash(b + i, n - i, &h, &end);
                }
                if (end) {
                    m->field = 0;
                    m->fpos = 0;
                    m->fval = 3;
                }
            } else {
                return;
            }
            break;
        case 'Q':
            if (m->field != 0)
                return; /* after the string's NUL: nothing more is read */
            i += cstr_cap(b + i, n - i, p->unnamed, SW_DB_STMT_MAX, &p->unnamed_len,
                          &p->unnamed_cut, &end);
            if (end)
                m->field = 1;
            break;
        case 'P':
            if (m->field == 0) {
                i += cstr_hash(b + i, n - i, &p->h_name, &end);
                if (end) {
                    m->field = 1;
                    if (p->h_name == FNV_BASIS) {
                        p->slot = -1; /* the unnamed statement */
                        p->unnamed_len = 0;
                        p->unnamed_cut = false;
                        p->unnamed[0] = '\0';
                    } else {
                        p->slot = slot_take(p, p->h_name);
                    }
                }
            } else if (m->field == 1) {
                if (p->slot < 0) {
                    i += cstr_cap(b + i, n - i, p->unnamed, SW_DB_STMT_MAX, &p->unnamed_len,
                                  &p->unnamed_cut, &end);
                } else {
                    struct sw_pg_slot *sl = &p->slots[p->slot];
                    i +=
                        cstr_cap(b + i, n - i, sl->text, SW_PG_NAMED_MAX, &sl->len, &sl->cut, &end);
                }
                if (end)
                    m->field = 2;
            } else {
                return;
            }
            break;
        case 'B':
            if (m->field == 0) {
                i += cstr_hash(b + i, n - i, &p->h_name, &end);
                if (end)
                    m->field = 1;
            } else if (m->field == 1) {
                i += cstr_hash(b + i, n - i, &p->h_stmt, &end);
                if (end) {
                    m->field = 2;
                    m->fpos = 0;
                    m->fval = 0;
                    if (!p->params_on)
                        return;
                }
            } else if (p->params_on) {
                i += bind_params(p, m, b + i, n - i);
            } else {
                return;
            }
            break;
        case 'E':
            if (m->field != 0)
                return;
            i += cstr_hash(b + i, n - i, &p->h_name, &end);
            if (end)
                m->field = 1;
            break;
        default:
            return;
        }
    }
}

static void server_body(struct sw_pg *p, const uint8_t *b, size_t n)
{
    struct sw_pg_msg *m = &p->s;
    size_t i = 0;
    bool end;
    if (m->type != 'E')
        return;
    while (i < n) {
        if (m->field == 2)
            return;          /* after the terminating 0 */
        if (m->field == 0) { /* a field type byte; 0 ends the message */
            p->efield = b[i++];
            if (!p->efield) {
                m->field = 2;
                return;
            }
            m->field = 1;
            if (p->efield == 'C')
                p->code_len = 0;
        } else if (p->efield == 'C') {
            bool cut = false;
            i += cstr_cap(b + i, n - i, p->code, sizeof(p->code), &p->code_len, &cut, &end);
            if (end)
                m->field = 0;
        } else if (p->efield == 'M') {
            i += cstr_cap(b + i, n - i, p->msg, SW_DB_MSG_MAX, &p->msg_len, &p->msg_cut, &end);
            if (end)
                m->field = 0;
        } else {
            uint64_t h = 0;
            i += cstr_hash(b + i, n - i, &h, &end);
            if (end)
                m->field = 0;
        }
    }
}

/* ---------------------------------------------------------------- message ends */

static const char *slot_text(struct sw_pg *p, int s, size_t *len, bool *cut)
{
    if (s == 0) {
        *len = p->unnamed_len;
        *cut = p->unnamed_cut;
        return p->unnamed;
    }
    if (s > 0 && s <= SW_PG_SLOTS) {
        struct sw_pg_slot *sl = &p->slots[s - 1];
        sl->used = ++p->stamp;
        *len = sl->len;
        *cut = sl->cut;
        return sl->text;
    }
    *len = 0;
    *cut = false;
    return "";
}

static size_t client_end(struct sw_pg *p, struct sw_db_ev *ev, size_t consumed)
{
    struct sw_pg_msg *m = &p->c;
    switch (m->type) {
    case 0: {
        uint32_t code = be32(m->hdr + 4);
        if (code == CODE_SSL || code == CODE_GSS) {
            p->ssl_wait = true;
            return consumed; /* the startup message comes next, unless TLS/GSS is accepted */
        }
        if (code == CODE_CANCEL)
            return give_up(p, ev, "postgresql: CancelRequest connection", consumed);
        if (code >> 16 != 3)
            return give_up(p, ev, "postgresql: not protocol version 3", consumed);
        p->startup = false;
        return consumed;
    }
    case 'Q':
        if (!pend_push(p, P_QUERY))
            return give_up(p, ev, "postgresql: too many requests in flight", consumed);
        ev->type = SW_DB_EV_START;
        ev->name = "Query";
        ev->name_len = 5;
        ev->text = p->unnamed;
        ev->text_len = p->unnamed_len;
        ev->text_cut = p->unnamed_cut;
        /* a Query replaces the unnamed statement: a later Bind to "" has no text of ours */
        p->unnamed_len = 0;
        p->unnamed_cut = false;
        return consumed;
    case 'B':
        p->bind_portal = p->h_name;
        if (p->h_stmt == FNV_BASIS) {
            p->bind_slot = 0;
        } else {
            int s = slot_find(p, p->h_stmt);
            p->bind_slot = s < 0 ? -1 : s + 1;
        }
        return consumed;
    case 'E': {
        /* While the server skips to Sync (discard) the Execute is not run: it ends at once. */
        if (p->discard)
            p->skip_n++;
        else if (!pend_push(p, P_EXEC))
            return give_up(p, ev, "postgresql: too many requests in flight", consumed);
        size_t tl = 0;
        bool cut = false;
        const char *t = p->h_name == p->bind_portal ? slot_text(p, p->bind_slot, &tl, &cut) : "";
        ev->type = SW_DB_EV_START;
        ev->name = "Execute";
        ev->name_len = 7;
        ev->text = t;
        ev->text_len = tl;
        ev->text_cut = cut;
        if (p->params_on && p->h_name == p->bind_portal && p->params_len) {
            ev->params = p->params;
            ev->params_len = p->params_len;
        }
        return consumed;
    }
    case 'S':
        if (!pend_push(p, P_SYNC))
            return give_up(p, ev, "postgresql: too many requests in flight", consumed);
        p->discard = false;
        return consumed;
    case 'F':
        if (!pend_push(p, P_FUNC))
            return give_up(p, ev, "postgresql: too many requests in flight", consumed);
        return consumed;
    default:
        return consumed;
    }
}

static void end_error(struct sw_pg *p, struct sw_db_ev *ev)
{
    ev->error = true;
    memcpy(ev->code, p->code, sizeof(ev->code));
    ev->code[p->code_len < 5 ? p->code_len : 5] = '\0';
    ev->msg = p->msg;
    ev->msg_len = p->msg_len;
}

static size_t server_end(struct sw_pg *p, struct sw_db_ev *ev, size_t consumed)
{
    struct sw_pg_msg *m = &p->s;
    uint8_t head = p->pn ? p->pend[p->ph].kind : 0;
    switch (m->type) {
    case 'C':
    case 'I':
    case 's':
        if (head == P_EXEC) {
            pend_take(p);
            ev->type = SW_DB_EV_END;
        }
        return consumed;
    case 'E':
        if (head == P_EXEC) {
            struct sw_pg_pend *h = &p->pend[p->ph];
            pend_take(p);
            ev->type = SW_DB_EV_END;
            end_error(p, ev);
            /* the rest of the pipeline up to Sync is not run */
            if (h->kind == P_EXEC && p->pn && p->pend[p->ph].kind == P_EXEC) {
                p->skip_n += p->pend[p->ph].n;
                p->ph = (uint8_t)((p->ph + 1) % SW_PG_PENDING);
                p->pn--;
            }
            p->discard = !sync_pending(p);
        } else if (head == P_QUERY && !p->q_err) {
            p->q_err = true;
            memcpy(p->q_code, p->code, sizeof(p->q_code));
            p->q_code[p->code_len < 5 ? p->code_len : 5] = '\0';
            memcpy(p->q_msg, p->msg, p->msg_len + 1);
            p->q_msg_len = p->msg_len;
        } else if (head == P_SYNC) {
            p->discard = false;
        }
        return consumed;
    case 'Z':
        if (head == P_EXEC) {
            /* Executes whose results never came before ReadyForQuery */
            p->skip_n += p->pend[p->ph].n;
            p->ph = (uint8_t)((p->ph + 1) % SW_PG_PENDING);
            p->pn--;
            head = p->pn ? p->pend[p->ph].kind : 0;
        }
        if (head == P_QUERY) {
            pend_take(p);
            ev->type = SW_DB_EV_END;
            if (p->q_err) {
                ev->error = true;
                memcpy(ev->code, p->q_code, sizeof(ev->code));
                ev->msg = p->q_msg;
                ev->msg_len = p->q_msg_len;
            }
            p->q_err = false;
        } else if (head == P_SYNC || head == P_FUNC) {
            pend_take(p);
        }
        return consumed;
    default:
        return consumed;
    }
}

/* An Execute the server skipped (an earlier error of its pipeline) ends now. */
static void skip_event(struct sw_pg *p, struct sw_db_ev *ev)
{
    p->skip_n--;
    ev->type = SW_DB_EV_END;
    ev->error = true;
    ev->skipped = true;
    ev->msg = "not executed: an earlier statement of its pipeline failed";
    ev->msg_len = strlen(ev->msg);
}

/* ---------------------------------------------------------------- framing */

/* The message types of each direction (protocol 3), as bit sets over the type byte:
 * client Q P B E S H D C X d c f p F; server R S K Z T D C I E N A 1 2 3 n t s G H W d c V v. */
static const uint64_t k_client_types[4] = {0x0ull, 0x10058010b017cull, 0x0ull, 0x0ull};
static const uint64_t k_server_types[4] = {0xe000000000000ull, 0x58401804dc4bbaull, 0x0ull, 0x0ull};

static inline bool client_type_ok(uint8_t t)
{
    return k_client_types[t >> 6] >> (t & 63) & 1u;
}

static inline bool server_type_ok(uint8_t t)
{
    return k_server_types[t >> 6] >> (t & 63) & 1u;
}

static void msg_begin(struct sw_pg *p, struct sw_pg_msg *m, bool client)
{
    m->pos = 0;
    m->field = 0;
    m->fpos = 0;
    m->fval = 0;
    if (client) {
        p->h_name = FNV_BASIS;
        p->h_stmt = FNV_BASIS;
        if (m->type == 'Q') {
            p->unnamed_len = 0;
            p->unnamed_cut = false;
            p->unnamed[0] = '\0';
        } else if (m->type == 'B') {
            p->params_len = 0;
            p->params_cut = false;
            p->params[0] = '\0';
        } else if (m->type == 0) {
            m->fval = 3; /* startup key match bits */
        }
    } else if (m->type == 'E') {
        p->code_len = 0;
        p->code[0] = '\0';
        p->msg_len = 0;
        p->msg_cut = false;
        p->msg[0] = '\0';
    }
}

static size_t feed_dir(struct sw_pg *p, bool client, const uint8_t *buf, size_t len,
                       struct sw_db_ev *ev)
{
    struct sw_pg_msg *m = client ? &p->c : &p->s;
    size_t i = 0;
    while (i < len) {
        if (!client && p->ssl_wait && m->hn == 0 && m->left == 0) {
            uint8_t a = buf[i++];
            p->ssl_wait = false;
            if (a == 'N')
                continue;
            if (a == 'S' || a == 'G')
                return give_up(p, ev, "postgresql: TLS or GSS encryption follows", i);
            return give_up(p, ev, "postgresql: bad answer to SSLRequest", i);
        }
        if (!client && m->pos == 0 && m->hn == 0 && len - i >= 5) {
            /* The usual reply message: whole at hand and no body to read (all but
             * ErrorResponse), framed here in one step as below. */
            uint8_t t = buf[i];
            uint32_t l = be32(buf + i + 1);
            if (t != 'E' && l >= 4 && l <= MSG_MAX && l - 4 <= len - i - 5 && server_type_ok(t)) {
                m->type = t;
                i += 1 + (size_t)l;
                if (t == 'C' || t == 'I' || t == 's' || t == 'Z') {
                    size_t at = server_end(p, ev, i);
                    if (ev->type == SW_DB_EV_NONE && p->skip_n)
                        skip_event(p, ev);
                    if (ev->type != SW_DB_EV_NONE || p->done)
                        return at;
                }
                continue;
            }
        }
        if (m->pos == 0) {
            /* a header */
            bool startup = client && p->startup;
            uint8_t need = startup ? 8 : 5;
            if (m->hn == 0 && len - i >= need) {
                if (need == 5) /* the usual: a whole header at hand (constant sizes: no call) */
                    memcpy(m->hdr, buf + i, 5);
                else
                    memcpy(m->hdr, buf + i, 8);
                m->hn = need;
                i += need;
            }
            while (m->hn < need && i < len)
                m->hdr[m->hn++] = buf[i++];
            if (m->hn < need)
                return len;
            uint32_t l;
            if (startup) {
                m->type = 0;
                l = be32(m->hdr);
                if (l < 8 || l > STARTUP_MAX)
                    return give_up(p, ev, "postgresql: not a startup message", i);
                l -= 8;
            } else {
                m->type = m->hdr[0];
                l = be32(m->hdr + 1);
                if (!(client ? client_type_ok(m->type) : server_type_ok(m->type)))
                    return give_up(p, ev, "postgresql: unknown message type", i);
                if (l < 4 || l > MSG_MAX)
                    return give_up(p, ev, "postgresql: bad message length", i);
                l -= 4;
            }
            m->hn = 0;
            msg_begin(p, m, client);
            m->left = l;
            m->pos = 1; /* a body (maybe empty) is in progress */
        }
        size_t k = len - i < m->left ? len - i : m->left;
        if (k) {
            if (client)
                client_body(p, buf + i, k);
            else
                server_body(p, buf + i, k);
            i += k;
            m->left -= (uint32_t)k;
        }
        if (m->left == 0) {
            m->pos = 0;
            size_t at = client ? client_end(p, ev, i) : server_end(p, ev, i);
            if (ev->type == SW_DB_EV_NONE && p->skip_n)
                skip_event(p, ev); /* at once: events never depend on how bytes were split */
            if (ev->type != SW_DB_EV_NONE || p->done)
                return at;
        }
    }
    return len;
}

size_t sw_pg_feed(struct sw_pg *p, enum sw_db_dir dir, const uint8_t *buf, size_t len,
                  struct sw_db_ev *ev)
{
    sw_db_ev_clear(ev);
    if (SW_UNLIKELY(p->done))
        return len;
    if (SW_UNLIKELY(p->skip_n)) {
        skip_event(p, ev);
        return 0;
    }
    return feed_dir(p, dir == SW_DB_TO_SERVER, buf, len, ev);
}
