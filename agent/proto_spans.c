/*
 * proto_spans.c - spans from MySQL and FastCGI parser events (see proto_spans.h).
 *
 * Rules: application threads; no allocation, no syscalls. Tag bytes are put together on the
 * stack (record.h strings) and copied by the trace module.
 */
#include "proto_spans.h"

#include "propagation.h"
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
    struct sw_db_info d = {.layer = SW_TRACE_LAYER_DATABASE, .component = SW_COMPONENT_MYSQL};
    d.op = mysql_op(ev->cmd, &d.op_len);
    if (!d.op)
        return 0;
    d.peer = peer;
    d.peer_len = peer_len;
    struct sw_tag tags[4] = {{"db.type", 7, "Mysql", 5}};
    unsigned n = 1;
    size_t dbl;
    const char *db = sw_mysql_db(m, &dbl);
    if (ev->cmd == SW_MYSQL_COM_INIT_DB) { /* the database it switches to */
        db = ev->text;
        dbl = ev->text_len < SW_MYSQL_DB_MAX ? ev->text_len : SW_MYSQL_DB_MAX;
    }
    if (dbl)
        tags[n++] = (struct sw_tag){"db.instance", 11, db, dbl};
    char stmt[SW_MYSQL_TEXT_MAX + 3];
    if (ev->text_len && ev->cmd != SW_MYSQL_COM_INIT_DB) {
        size_t k = ev->text_len < SW_MYSQL_TEXT_MAX ? ev->text_len : SW_MYSQL_TEXT_MAX;
        /* A statement cut ends in "...", not inside a UTF-8 sequence. */
        if (ev->text_cut)
            while (k > 0 && ((unsigned char)ev->text[k] & 0xc0u) == 0x80u)
                k--;
        memcpy(stmt, ev->text, k);
        if (ev->text_cut) {
            memcpy(stmt + k, "...", 3);
            k += 3;
        }
        tags[n++] = (struct sw_tag){"db.statement", 12, stmt, k};
    }
    if (ev->params_len)
        tags[n++] = (struct sw_tag){"db.sql.parameters", 17, ev->params, ev->params_len};
    d.tags = tags;
    d.ntags = n;
    return sw_trace_db_start_in(parent, &d, start_ms);
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
        sw_trace_db_finish(ev->user, NULL, NULL, end_ms);
        return;
    }
    if (ev->closed) {
        if (ev->reason) /* given up on: the connection is no longer followed (proto_common.h) */
            sw_trace_db_finish(ev->user, "swagent.not_followed", ev->reason, end_ms);
        else
            sw_trace_db_finish(ev->user, "closed",
                               "the connection ended before the server's response", end_ms);
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
    sw_trace_db_finish(ev->user, kind, msg, end_ms);
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
    } else if (ev->closed && ev->reason) {
        kind = "swagent.not_followed"; /* given up on (proto_common.h) */
        msg = ev->reason;
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
