/*
 * proto_spans.c - spans from MySQL and FastCGI parser events (see proto_spans.h).
 *
 * Rules: application threads; no allocation, no syscalls. Tag bytes are put together on the
 * stack (record.h strings) and copied by the trace module.
 */
#include "proto_spans.h"

#include "propagation.h"
#include "record.h"
#include "trace.h"

#include <string.h>

/* ---------------------------------------------------------------- MySQL */

static const char *mysql_op(uint8_t cmd, size_t *len)
{
    const char *op;
    switch (cmd) {
    case SW_MYSQL_COM_QUERY:
        op = "Mysql/Query";
        break;
    case SW_MYSQL_COM_STMT_PREPARE:
        op = "Mysql/Prepare";
        break;
    case SW_MYSQL_COM_STMT_EXECUTE:
    case SW_MYSQL_COM_STMT_BULK_EXECUTE:
        op = "Mysql/Execute";
        break;
    case SW_MYSQL_COM_STMT_FETCH:
        op = "Mysql/Fetch";
        break;
    case SW_MYSQL_COM_INIT_DB:
        op = "Mysql/InitDB";
        break;
    default:
        return NULL;
    }
    *len = strlen(op);
    return op;
}

uint64_t sw_mysql_span_begin(const struct sw_mysql *m, const struct sw_mysql_ev *ev,
                             const char *peer, size_t peer_len, uint64_t parent, int64_t start_ms)
{
    struct sw_exit_named x = {0};
    x.op = mysql_op(ev->cmd, &x.op_len);
    if (!x.op)
        return 0;
    x.peer = peer;
    x.peer_len = peer_len;
    x.layer = SW_LAYER_DATABASE;
    x.component = SW_COMPONENT_MYSQL;
    uint8_t tags[SW_TRACE_TAGS_MAX];
    struct sw_wbuf w;
    sw_wbuf_init(&w, tags, sizeof(tags));
    sw_wbuf_str(&w, "db.type", 7);
    sw_wbuf_str(&w, "Mysql", 5);
    x.tags_n = 1;
    size_t dbl;
    const char *db = sw_mysql_db(m, &dbl);
    if (ev->cmd == SW_MYSQL_COM_INIT_DB) { /* the database it switches to */
        db = ev->text;
        dbl = ev->text_len < SW_MYSQL_DB_MAX ? ev->text_len : SW_MYSQL_DB_MAX;
    }
    if (dbl) {
        sw_wbuf_str(&w, "db.instance", 11);
        sw_wbuf_str(&w, db, dbl);
        x.tags_n++;
    }
    if (ev->text_len && ev->cmd != SW_MYSQL_COM_INIT_DB) {
        size_t n = ev->text_len < SW_MYSQL_TEXT_MAX ? ev->text_len : SW_MYSQL_TEXT_MAX;
        /* Not cut inside a UTF-8 sequence when cut. */
        if (ev->text_cut)
            while (n > 0 && ((unsigned char)ev->text[n] & 0xc0u) == 0x80u)
                n--;
        sw_wbuf_str(&w, "db.statement", 12);
        sw_wbuf_u16(&w, (uint16_t)(n + (ev->text_cut ? 3 : 0)));
        sw_wbuf_put(&w, ev->text, n);
        if (ev->text_cut)
            sw_wbuf_put(&w, "...", 3);
        x.tags_n++;
    }
    if (ev->params_len) {
        sw_wbuf_str(&w, "db.sql.parameters", 17);
        sw_wbuf_str(&w, ev->params, ev->params_len);
        x.tags_n++;
    }
    if (w.overflow)
        return 0; /* cannot happen: SW_TRACE_TAGS_MAX holds a full statement and the rest */
    x.tags = (const char *)tags;
    x.tags_len = w.len;
    return sw_trace_exit_named_in(parent, &x, start_ms);
}

static size_t put_uint(char *p, unsigned v)
{
    char t[12];
    size_t n = 0;
    do {
        t[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        p[i] = t[n - 1 - i];
    return n;
}

void sw_mysql_span_end(const struct sw_mysql_ev *ev, int64_t end_ms)
{
    if (!ev->user)
        return;
    if (!ev->error) {
        sw_trace_exit_finish(ev->user, 0, end_ms);
        return;
    }
    if (ev->closed) {
        sw_trace_exit_error(ev->user, "closed", "the connection ended before the server's response",
                            end_ms);
        return;
    }
    char kind[40], msg[SW_MYSQL_MSG_MAX + 1];
    size_t at = 0;
    memcpy(kind, "MySQL ", 6);
    at = 6 + put_uint(kind + 6, ev->err_code);
    if (ev->sqlstate[0]) {
        memcpy(kind + at, " (", 2);
        memcpy(kind + at + 2, ev->sqlstate, 5);
        kind[at + 7] = ')';
        at += 8;
    }
    kind[at] = '\0';
    size_t ml = ev->msg_len < SW_MYSQL_MSG_MAX ? ev->msg_len : SW_MYSQL_MSG_MAX;
    if (ml)
        memcpy(msg, ev->msg, ml);
    msg[ml] = '\0';
    sw_trace_exit_error(ev->user, kind, msg, end_ms);
}

/* ---------------------------------------------------------------- FastCGI */

/* The HTTP request a FastCGI request stands for, and the peer (REMOTE_ADDR:REMOTE_PORT when
 * `remote`, in pbuf). */
static void fcgi_req(const struct sw_fcgi_ev *ev, struct sw_req_info *q, const char *peer,
                     size_t peer_len, bool remote, char *pbuf, size_t pcap)
{
    memset(q, 0, sizeof(*q));
    q->method = ev->val[SW_FCGI_METHOD];
    q->method_len = ev->len[SW_FCGI_METHOD];
    int t = ev->len[SW_FCGI_URI] ? SW_FCGI_URI : SW_FCGI_SCRIPT;
    q->target = ev->val[t];
    q->target_len = ev->len[t];
    if (ev->len[SW_FCGI_HOST]) {
        q->host = ev->val[SW_FCGI_HOST];
        q->host_len = ev->len[SW_FCGI_HOST];
    }
    q->peer = peer;
    q->peer_len = peer_len;
    size_t al = ev->len[SW_FCGI_REMOTE_ADDR], pl = ev->len[SW_FCGI_REMOTE_PORT];
    if (remote && al && al + 1 + pl < pcap) {
        memcpy(pbuf, ev->val[SW_FCGI_REMOTE_ADDR], al);
        size_t n = al;
        if (pl) {
            pbuf[n++] = ':';
            memcpy(pbuf + n, ev->val[SW_FCGI_REMOTE_PORT], pl);
            n += pl;
        }
        q->peer = pbuf;
        q->peer_len = n;
    }
}

uint64_t sw_fcgi_entry_begin(const struct sw_fcgi_ev *ev, const char *peer, size_t peer_len,
                             int64_t start_ms)
{
    if (ev->partial || !ev->len[SW_FCGI_METHOD])
        return 0; /* params not captured: nothing to name it by */
    struct sw_req_info q;
    char pbuf[96];
    fcgi_req(ev, &q, peer, peer_len, true, pbuf, sizeof(pbuf));
    if (ev->len[SW_FCGI_SW8] && !(ev->cut & (1u << SW_FCGI_SW8))) {
        q.sw8 = ev->val[SW_FCGI_SW8];
        q.sw8_len = ev->len[SW_FCGI_SW8];
    }
    if (ev->len[SW_FCGI_CORRELATION] && !(ev->cut & (1u << SW_FCGI_CORRELATION))) {
        q.correlation = ev->val[SW_FCGI_CORRELATION];
        q.correlation_len = ev->len[SW_FCGI_CORRELATION];
    }
    if (ev->len[SW_FCGI_SW8X] && !(ev->cut & (1u << SW_FCGI_SW8X))) {
        q.sw8x = ev->val[SW_FCGI_SW8X];
        q.sw8x_len = ev->len[SW_FCGI_SW8X];
    }
    return sw_trace_entry_start(&q, start_ms);
}

uint64_t sw_fcgi_exit_begin(const struct sw_fcgi_ev *ev, const char *peer, size_t peer_len,
                            uint64_t parent, uint8_t *rec, size_t cap, size_t *rec_len,
                            int64_t start_ms)
{
    *rec_len = 0;
    if (ev->partial || !ev->len[SW_FCGI_METHOD])
        return 0;
    struct sw_req_info q;
    fcgi_req(ev, &q, peer, peer_len, false, NULL, 0);
    char inject[SW_SW8_MAX + SW_CORR_MAX + 64];
    size_t n = 0;
    uint64_t h = sw_trace_exit_start_in(parent, &q, start_ms, inject, sizeof(inject), &n);
    if (n)
        *rec_len = sw_fcgi_params_record(rec, cap, ev->id, inject, n);
    return h;
}

void sw_fcgi_span_end(const struct sw_fcgi_ev *ev, bool entry, int64_t end_ms)
{
    uint64_t h = ev->user;
    if (!h)
        return;
    const char *kind = NULL, *msg = NULL;
    if (ev->kind == SW_FCGI_EV_ABORT) {
        kind = "aborted";
        msg = "the web server aborted the FastCGI request";
    } else if (ev->closed) {
        kind = "closed";
        msg = "the connection ended before FCGI_END_REQUEST";
    } else if (ev->proto_status != 0) {
        kind = "refused";
        msg = ev->proto_status == 1   ? "FCGI_CANT_MPX_CONN"
              : ev->proto_status == 2 ? "FCGI_OVERLOADED"
              : ev->proto_status == 3 ? "FCGI_UNKNOWN_ROLE"
                                      : "unknown protocol status";
    }
    if (kind) {
        if (entry)
            sw_trace_entry_abort(h, kind, msg, end_ms);
        else
            sw_trace_exit_error(h, kind, msg, end_ms);
        return;
    }
    int status = ev->head_seen ? ev->status : 200;
    if (entry)
        sw_trace_entry_finish(h, status, end_ms);
    else
        sw_trace_exit_finish(h, status, end_ms);
}
