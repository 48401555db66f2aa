/*
 * proto_memcached.c - memcached text protocol framing of a client connection (see
 * proto_memcached.h). Lines are split into tokens as they arrive (nothing buffered but short
 * tokens and the key); data blocks are skipped by their announced length and must end in CRLF.
 */
#include "common.h"

#include "proto_memcached.h"

#include <string.h>

enum { M_SINGLE = 1, M_RETR, M_STATS, M_META };
enum { L_LINE = 0, L_DATA };

#define LINE_MAX_BYTES (64u * 1024u)
#define DATA_MAX (1LL << 31)

struct mc_cmd {
    const char *name;
    uint8_t kind;
    uint8_t key_tok;
    uint8_t len_tok;
    uint8_t op;
    bool meta;
};

static const struct mc_cmd k_cmds[] = {
    {"get", M_RETR, 1, 0, SW_DB_OP_READ, false},
    {"gets", M_RETR, 1, 0, SW_DB_OP_READ, false},
    {"gat", M_RETR, 2, 0, SW_DB_OP_READ, false},
    {"gats", M_RETR, 2, 0, SW_DB_OP_READ, false},
    {"set", M_SINGLE, 1, 4, SW_DB_OP_WRITE, false},
    {"add", M_SINGLE, 1, 4, SW_DB_OP_WRITE, false},
    {"replace", M_SINGLE, 1, 4, SW_DB_OP_WRITE, false},
    {"append", M_SINGLE, 1, 4, SW_DB_OP_WRITE, false},
    {"prepend", M_SINGLE, 1, 4, SW_DB_OP_WRITE, false},
    {"cas", M_SINGLE, 1, 4, SW_DB_OP_WRITE, false},
    {"delete", M_SINGLE, 1, 0, SW_DB_OP_WRITE, false},
    {"incr", M_SINGLE, 1, 0, SW_DB_OP_WRITE, false},
    {"decr", M_SINGLE, 1, 0, SW_DB_OP_WRITE, false},
    {"touch", M_SINGLE, 1, 0, SW_DB_OP_WRITE, false},
    {"flush_all", M_SINGLE, 0, 0, SW_DB_OP_WRITE, false},
    {"stats", M_STATS, 0, 0, SW_DB_OP_NONE, false},
    {"mg", M_META, 1, 0, SW_DB_OP_READ, true},
    {"ms", M_SINGLE, 1, 2, SW_DB_OP_WRITE, true},
    {"md", M_SINGLE, 1, 0, SW_DB_OP_WRITE, true},
    {"ma", M_META, 1, 0, SW_DB_OP_WRITE, true},
    {"me", M_SINGLE, 1, 0, SW_DB_OP_NONE, true},
    {"mn", M_SINGLE, 0, 0, SW_DB_OP_NONE, true},
};

void sw_mc_reset(struct sw_mc *m)
{
    memset(m, 0, sizeof(*m));
    m->c_fresh = m->s_fresh = true;
}

uint32_t sw_mc_pending(const struct sw_mc *m)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->pn; i++)
        n += m->pend[(m->ph + i) % SW_MC_PENDING].n;
    return n;
}

static size_t give_up(struct sw_mc *m, struct sw_db_ev *ev, const char *why, size_t consumed)
{
    m->done = true;
    m->why = why;
    ev->type = SW_DB_EV_GIVEUP;
    ev->msg = why;
    ev->msg_len = strlen(why);
    return consumed;
}

/* Of the k bytes at p of a data block whose last 2 of `left` bytes to come must be CRLF: the
 * index of the first wrong one, else k. */
static size_t crlf_check(const uint8_t *p, size_t k, int64_t left)
{
    if (left - 2 >= 0 && (uint64_t)(left - 2) < k && p[left - 2] != '\r')
        return (size_t)(left - 2);
    if (left - 1 >= 0 && (uint64_t)(left - 1) < k && p[left - 1] != '\n')
        return (size_t)(left - 1);
    return k;
}

/* A token equal to a literal (a constant length: the compare is inline). */
#define TOK_IS(t, n, lit) ((n) == sizeof(lit) - 1 && memcmp((t), (lit), sizeof(lit) - 1) == 0)

static bool tok_is(const char *t, uint32_t n, const char *lit)
{
    size_t l = strlen(lit);
    return n == l && memcmp(t, lit, l) == 0;
}

static const struct mc_cmd *cmd_find(const char *t, uint32_t n)
{
    if (n == 0)
        return NULL;
    for (size_t i = 0; i < SW_ARRAY_LEN(k_cmds); i++)
        if (k_cmds[i].name[0] == t[0] && tok_is(t, n, k_cmds[i].name))
            return &k_cmds[i];
    return NULL;
}

static bool pend_push(struct sw_mc *m, uint8_t kind)
{
    if (m->pn > 0) {
        struct sw_mc_pend *t = &m->pend[(m->ph + m->pn - 1) % SW_MC_PENDING];
        if (t->kind == kind && t->n < UINT32_MAX) {
            t->n++;
            return true;
        }
    }
    if (m->pn >= SW_MC_PENDING)
        return false;
    struct sw_mc_pend *t = &m->pend[(m->ph + m->pn) % SW_MC_PENDING];
    t->kind = kind;
    t->n = 1;
    m->pn++;
    return true;
}

static void pend_take(struct sw_mc *m)
{
    struct sw_mc_pend *h = &m->pend[m->ph];
    if (h->n > 1) {
        h->n--;
        return;
    }
    m->ph = (uint8_t)((m->ph + 1) % SW_MC_PENDING);
    m->pn--;
}

/* ---------------------------------------------------------------- commands */

static void line_begin(struct sw_mc *m)
{
    m->line = 0;
    m->tok = 0;
    m->intok = false;
    m->tlen = 0;
    m->name_len = 0;
    m->name[0] = '\0';
    m->key_len = 0;
    m->key[0] = '\0';
    m->key_cut = false;
    m->ckind = M_SINGLE;
    m->cmeta = false;
    m->key_tok = 0;
    m->len_tok = 0;
    m->dlen = -1;
    m->noreply = m->quiet = m->badnum = false;
}

/* A token of a command line ended (m->t holds its first bytes). Returns false to give up. */
static bool tok_end(struct sw_mc *m, const char **why)
{
    if (m->tok == 0) {
        size_t k = m->tlen < SW_DB_NAME_MAX - 1 ? m->tlen : SW_DB_NAME_MAX - 1;
        memcpy(m->name, m->t, k);
        m->name[k] = '\0';
        m->name_len = (uint32_t)k;
        const struct mc_cmd *c = m->tlen <= SW_MC_TOK ? cmd_find(m->t, m->tlen) : NULL;
        m->cmeta = c && c->meta;
        if (c) {
            m->ckind = c->kind;
            m->key_tok = c->key_tok;
            m->len_tok = c->len_tok;
        } else if (TOK_IS(m->t, m->tlen, "watch") || TOK_IS(m->t, m->tlen, "lru_crawler")) {
            *why = "memcached: a command whose replies are a stream";
            return false;
        }
    } else {
        if (m->tok == 1 && m->ckind == M_STATS &&
            (TOK_IS(m->t, m->tlen, "reset") || TOK_IS(m->t, m->tlen, "detail"))) {
            m->ckind = M_SINGLE; /* "RESET" / "OK"; "detail dump" is checked below */
            m->len_tok = 0;
        }
        if (m->tok == 2 && TOK_IS(m->name, m->name_len, "stats") && TOK_IS(m->t, m->tlen, "dump")) {
            *why = "memcached: stats detail dump";
            return false;
        }
        if (m->tok == m->len_tok && m->len_tok) {
            int64_t v = 0;
            bool ok = m->tlen > 0 && m->tlen < 12;
            for (uint32_t i = 0; ok && i < m->tlen; i++) {
                if (m->t[i] < '0' || m->t[i] > '9')
                    ok = false;
                else
                    v = v * 10 + (m->t[i] - '0');
            }
            m->dlen = ok ? v : -1;
            m->badnum = !ok;
        }
        m->noreply = TOK_IS(m->t, m->tlen, "noreply");
        if (m->cmeta && m->tok >= 2 && m->tlen >= 1 && m->t[0] == 'q') {
            *why = "memcached: a meta command in quiet mode";
            return false;
        }
    }
    return true;
}

static size_t cmd_done(struct sw_mc *m, struct sw_db_ev *ev, size_t consumed)
{
    const struct mc_cmd *c = cmd_find(m->name, m->name_len);
    if (m->noreply && c && !c->meta) {
        m->end_n++;
    } else if (TOK_IS(m->name, m->name_len, "quit")) {
        return consumed; /* no reply, the server closes */
    } else if (!pend_push(m, m->ckind)) {
        return give_up(m, ev, "memcached: too many commands in flight", consumed);
    }
    ev->type = SW_DB_EV_START;
    ev->name = m->name;
    ev->name_len = m->name_len;
    ev->text = m->key;
    ev->text_len = m->key_len;
    ev->text_cut = m->key_cut;
    ev->op = c ? c->op : SW_DB_OP_NONE;
    return consumed;
}

static size_t feed_cmd(struct sw_mc *m, const uint8_t *buf, size_t len, struct sw_db_ev *ev)
{
    size_t i = 0;
    while (i < len) {
        if (m->cst == L_DATA) {
            size_t k = len - i < (uint64_t)m->c_data ? len - i : (size_t)m->c_data;
            /* the last two bytes must be CRLF */
            size_t bad = crlf_check(buf + i, k, m->c_data);
            if (bad < k)
                return give_up(m, ev, "memcached: data block not ended by CRLF", i + bad);
            m->c_data -= (int64_t)k;
            i += k;
            if (m->c_data == 0) {
                m->cst = L_LINE;
                m->c_fresh = true;
                size_t at = cmd_done(m, ev, i);
                if (ev->type != SW_DB_EV_NONE)
                    return at;
            }
            continue;
        }
        if (m->c_fresh) {
            /* lazily: the strings of the last START stay valid until the next call */
            line_begin(m);
            m->c_fresh = false;
        }
        uint8_t c = buf[i];
        if (m->line == 0 && m->tok == 0 && !m->intok && c == 0x80)
            return give_up(m, ev, "memcached: binary protocol", i);
        i++;
        if (++m->line > LINE_MAX_BYTES)
            return give_up(m, ev, "memcached: command line too long", i);
        if (c == ' ' || c == '\r' || c == '\n' || c == '\t') {
            if (m->intok) {
                const char *why = NULL;
                if (!tok_end(m, &why))
                    return give_up(m, ev, why, i);
                m->intok = false;
                m->tok++;
            }
            if (c != '\n')
                continue;
            if (m->tok == 0) { /* an empty line: memcached answers ERROR */
                m->c_fresh = true;
                if (!pend_push(m, M_SINGLE))
                    return give_up(m, ev, "memcached: too many commands in flight", i);
                ev->type = SW_DB_EV_START;
                ev->name = "";
                return i;
            }
            if (m->len_tok) {
                if (m->badnum || m->dlen < 0 || m->dlen > DATA_MAX)
                    return give_up(m, ev, "memcached: bad data length", i);
                m->c_data = m->dlen + 2;
                m->cst = L_DATA;
                continue;
            }
            m->c_fresh = true;
            size_t at = cmd_done(m, ev, i);
            if (ev->type != SW_DB_EV_NONE)
                return at;
            continue; /* quit: no event */
        }
        if (!m->intok) {
            m->intok = true;
            m->tlen = 0;
        }
        if (m->tlen < SW_MC_TOK)
            m->t[m->tlen] = (char)c;
        if (m->tlen < UINT32_MAX)
            m->tlen++;
        if (m->tlen > SW_MC_TOK)
            m->tlen = SW_MC_TOK + 1; /* longer than any word compared */
        if (m->tok == m->key_tok && m->key_tok)
            sw_db_cap_put(m->key, SW_DB_KEY_MAX, &m->key_len, &m->key_cut, &c, 1);
    }
    return len;
}

/* ---------------------------------------------------------------- replies */

static bool is_error_line(const struct sw_mc *m)
{
    return TOK_IS(m->st, m->stlen, "ERROR") || TOK_IS(m->st, m->stlen, "CLIENT_ERROR") ||
           TOK_IS(m->st, m->stlen, "SERVER_ERROR");
}

static size_t reply_end(struct sw_mc *m, struct sw_db_ev *ev, size_t consumed, bool error)
{
    pend_take(m);
    ev->type = SW_DB_EV_END;
    ev->error = error;
    if (error) {
        ev->msg = m->msg;
        ev->msg_len = m->msg_len;
    }
    return consumed;
}

/* A reply line is complete. */
static size_t rline_done(struct sw_mc *m, struct sw_db_ev *ev, size_t consumed)
{
    if (m->pn == 0)
        return give_up(m, ev, "memcached: a reply with no command waiting for it", consumed);
    uint8_t kind = m->pend[m->ph].kind;
    if (is_error_line(m))
        return reply_end(m, ev, consumed, true);
    switch (kind) {
    case M_RETR:
        if (TOK_IS(m->st, m->stlen, "END"))
            return reply_end(m, ev, consumed, false);
        if (TOK_IS(m->st, m->stlen, "VALUE") && m->snum_ok) {
            m->s_data = m->snum + 2;
            m->sst = L_DATA;
            return consumed;
        }
        return give_up(m, ev, "memcached: unexpected line in a retrieval reply", consumed);
    case M_STATS:
        if (TOK_IS(m->st, m->stlen, "END"))
            return reply_end(m, ev, consumed, false);
        return consumed;
    case M_META:
        if (TOK_IS(m->st, m->stlen, "VA")) {
            if (!m->snum_ok)
                return give_up(m, ev, "memcached: bad VA length", consumed);
            m->s_data = m->snum + 2;
            m->sst = L_DATA;
            return consumed;
        }
        return reply_end(m, ev, consumed, false);
    default:
        return reply_end(m, ev, consumed, false);
    }
}

static void rline_begin(struct sw_mc *m)
{
    m->sline = 0;
    m->stlen = 0;
    m->stok = 0;
    m->sintok = false;
    m->snum = 0;
    m->snum_ok = false;
    m->msg_len = 0;
    m->msg_cut = false;
    m->msg[0] = '\0';
}

/* A reply line ended (consumed: after its LF): rline_done; a new line begins next unless a data
 * block follows. */
static size_t rline_end(struct sw_mc *m, struct sw_db_ev *ev, size_t consumed)
{
    size_t at = rline_done(m, ev, consumed);
    if (m->sst == L_LINE)
        m->s_fresh = true;
    return at;
}

/* A byte of a reply's data length token (VALUE's fourth, VA's second). */
static inline void snum_byte(struct sw_mc *m, uint8_t c)
{
    if (c >= '0' && c <= '9' && m->snum < DATA_MAX) {
        m->snum = m->snum * 10 + (c - '0');
        m->snum_ok = true;
    } else {
        m->snum = DATA_MAX + 1;
        m->snum_ok = false;
    }
}

/*
 * The usual reply line: whole in p[0, n) (its LF there, no CR but the one before it), read in
 * one pass into what feed_rep's byte loop below would have made of it (just begun: rline_begin).
 * Returns its bytes (LF included), or 0: the byte loop reads it.
 */
static size_t rline_whole(struct sw_mc *m, const uint8_t *p, size_t n)
{
    const uint8_t *lf = memchr(p, '\n', n < LINE_MAX_BYTES ? n : LINE_MAX_BYTES);
    if (!lf)
        return 0;
    size_t e = (size_t)(lf - p), end = e > 0 && p[e - 1] == '\r' ? e - 1 : e;
    if (memchr(p, '\r', end))
        return 0;
    uint32_t stok = 0, stlen = 0;
    bool intok = false;
    size_t msg_at = end;
    int want = 0; /* the token of the data length: 3 after VALUE, 1 after VA */
    for (size_t j = 0; j < end; j++) {
        uint8_t c = p[j];
        if (c == ' ') {
            if (intok) {
                intok = false;
                if (++stok == 1) {
                    msg_at = j + 1;
                    want = TOK_IS(m->st, stlen, "VALUE") ? 3 : TOK_IS(m->st, stlen, "VA") ? 1 : -1;
                }
            }
            continue;
        }
        intok = true;
        if (stok == 0) {
            if (stlen < SW_MC_TOK)
                m->st[stlen] = (char)c;
            stlen = stlen < SW_MC_TOK ? stlen + 1 : SW_MC_TOK + 1;
        } else if ((int)stok == want) {
            snum_byte(m, c);
        }
    }
    if (intok)
        stok++; /* the last token ends at the CR or the LF */
    if (msg_at < end)
        sw_db_cap_put(m->msg, SW_DB_MSG_MAX, &m->msg_len, &m->msg_cut, p + msg_at, end - msg_at);
    m->stlen = stlen;
    m->stok = stok;
    m->sintok = false;
    m->sline = (uint32_t)e + 1;
    return e + 1;
}

static size_t feed_rep(struct sw_mc *m, const uint8_t *buf, size_t len, struct sw_db_ev *ev)
{
    size_t i = 0;
    while (i < len) {
        if (m->sst == L_DATA) {
            size_t k = len - i < (uint64_t)m->s_data ? len - i : (size_t)m->s_data;
            size_t bad = crlf_check(buf + i, k, m->s_data);
            if (bad < k)
                return give_up(m, ev, "memcached: value not ended by CRLF", i + bad);
            m->s_data -= (int64_t)k;
            i += k;
            if (m->s_data == 0) {
                m->sst = L_LINE;
                m->s_fresh = true;
                if (m->pn && m->pend[m->ph].kind == M_META)
                    return reply_end(m, ev, i, false);
            }
            continue;
        }
        if (m->s_fresh) {
            rline_begin(m);
            m->s_fresh = false;
            size_t used = rline_whole(m, buf + i, len - i);
            if (used) {
                i += used;
                size_t at = rline_end(m, ev, i);
                if (ev->type != SW_DB_EV_NONE)
                    return at;
                continue;
            }
        }
        uint8_t c = buf[i++];
        if (++m->sline > LINE_MAX_BYTES)
            return give_up(m, ev, "memcached: reply line too long", i);
        if (c == '\n') {
            if (m->sintok)
                m->stok++;
            size_t at = rline_end(m, ev, i);
            if (ev->type != SW_DB_EV_NONE)
                return at;
            continue;
        }
        /* the message of an error line: everything after its first token */
        if (m->stok >= 1 && c != '\r')
            sw_db_cap_put(m->msg, SW_DB_MSG_MAX, &m->msg_len, &m->msg_cut, &c, 1);
        if (c == ' ' || c == '\r') {
            if (m->sintok) {
                m->sintok = false;
                m->stok++;
            }
            continue;
        }
        if (!m->sintok) {
            m->sintok = true;
            if (m->stok == 0)
                m->stlen = 0;
        }
        if (m->stok == 0) {
            if (m->stlen < SW_MC_TOK)
                m->st[m->stlen] = (char)c;
            m->stlen = m->stlen < SW_MC_TOK ? m->stlen + 1 : SW_MC_TOK + 1;
        }
        /* the data length: VALUE <key> <flags> <bytes>; VA <size> */
        bool want = (m->stok == 3 && TOK_IS(m->st, m->stlen, "VALUE")) ||
                    (m->stok == 1 && TOK_IS(m->st, m->stlen, "VA"));
        if (want) {
            snum_byte(m, c);
        }
    }
    return len;
}

size_t sw_mc_feed(struct sw_mc *m, enum sw_db_dir dir, const uint8_t *buf, size_t len,
                  struct sw_db_ev *ev)
{
    sw_db_ev_clear(ev);
    if (SW_UNLIKELY(m->done))
        return len;
    if (SW_UNLIKELY(m->end_n)) {
        m->end_n--;
        ev->type = SW_DB_EV_END;
        return 0;
    }
    return dir == SW_DB_TO_SERVER ? feed_cmd(m, buf, len, ev) : feed_rep(m, buf, len, ev);
}
