/*
 * proto_spans.h - spans from the events of the MySQL and FastCGI parsers (mysql.h,
 * fcgi.h): what a statement or a FastCGI request becomes in the trace. The connection
 * layer calls these from its parser callbacks with the connection's peer and the request the
 * call belongs to (sw_trace_request_now); they know nothing of sockets.
 *
 * Rules: application threads; no allocation, no syscalls (the clock is read by the caller).
 *
 * MySQL: one Exit span per statement (sw_trace_db_start_in) (COM_QUERY "Mysql/Query",
 * COM_STMT_PREPARE "Mysql/Prepare", COM_STMT_EXECUTE / BULK_EXECUTE "Mysql/Execute", COM_STMT_FETCH
 * "Mysql/Fetch", COM_INIT_DB "Mysql/InitDB"); layer Database, component Mysql (5), tags
 * db.type=Mysql, db.instance (the database in use, when known), db.statement (cut to
 * plugin.jdbc.sql_body_max_length, "..." appended when cut). Other commands (ping, close,
 * ...) make no span. An ERR response is an error span whose log says `MySQL <code> (<SQLSTATE>)`
 * and the server's message.
 *
 * FastCGI server (PHP-FPM): an Entry span per request, HTTP-shaped as an HTTP entry is:
 * `METHOD:/path` from REQUEST_METHOD and REQUEST_URI (SCRIPT_NAME when there is no
 * REQUEST_URI), url from HTTP_HOST, its parent from HTTP_SW8 (HTTP_SW8_CORRELATION, HTTP_SW8_X
 * too), peer REMOTE_ADDR:REMOTE_PORT (the client the web server served; the connection's peer
 * when absent), status from the response's `Status:` (302 for a `Location:` alone, else 200).
 *
 * FastCGI client (nginx fastcgi_pass): an Exit span per request, HTTP-shaped (method, uri,
 * HTTP_HOST), peer the application server's address (host:port or unix:<socket path>); its sw8 goes
 * out as one PARAMS record (HTTP_SW8, and HTTP_SW8_CORRELATION / HTTP_SW8_X when there are
 * such) inserted before the empty PARAMS record that ends the request's params. An HTTP_SW8 the
 * web server already forwards (nginx passes the client's `sw8` header as HTTP_SW8) comes
 * before ours, and FastCGI servers keep the last value of a repeated name (PHP-FPM's
 * fcgi_hash_set), so ours wins, as the HTTP side's own lines do.
 */
#ifndef SW_PROTO_SPANS_H
#define SW_PROTO_SPANS_H

#include "common.h"

#include "fcgi.h"
#include "mysql.h"

#define SW_COMPONENT_MYSQL 5

/* A BEGIN event: the statement's exit span (0: this command makes none, or not traced). */
uint64_t sw_mysql_span_begin(const struct sw_mysql *m, const struct sw_mysql_ev *ev,
                             const char *peer, size_t peer_len, uint64_t parent, int64_t start_ms);

/* An END event: the span named by ev->user ends (error for ERR or a lost connection). */
void sw_mysql_span_end(const struct sw_mysql_ev *ev, int64_t end_ms);

/* A PARAMS event on the server side: the request's entry span (sw_trace_entry_start). */
uint64_t sw_fcgi_entry_begin(const struct sw_fcgi_ev *ev, const char *peer, size_t peer_len,
                             int64_t start_ms);

/*
 * A PARAMS event on the client side: the request's exit span; the PARAMS record to insert at
 * ev->insert_off is written to rec (cap bytes), its length to *rec_len (0: insert nothing).
 */
uint64_t sw_fcgi_exit_begin(const struct sw_fcgi_ev *ev, const char *peer, size_t peer_len,
                            uint64_t parent, uint8_t *rec, size_t cap, size_t *rec_len,
                            int64_t start_ms);

/*
 * An END event (or ABORT): the span ev->user ends, an entry (`entry`) or an exit: the response's
 * status; an error when the connection ended first, the request was aborted or the server said
 * it could not take it (protocol status other than REQUEST_COMPLETE).
 */
void sw_fcgi_span_end(const struct sw_fcgi_ev *ev, bool entry, int64_t end_ms);

#endif /* SW_PROTO_SPANS_H */
