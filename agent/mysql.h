/*
 * mysql.h - an incremental parser of the MySQL / MariaDB client/server protocol, as seen by
 * a client (or a proxy): the bytes of each direction are fed as they pass, in any splits, and the
 * parser answers with events (a command began, its response ended, stop following).
 *
 * Rules: pure and allocation-free. No syscalls, no clock, no logging: the caller owns the state
 * (struct sw_mysql, ~6.5 KiB) and decides what an event means (spans: proto_spans.c). The
 * bytes are only read, never changed: MySQL has no place for a trace header, so nothing is
 * inserted into this protocol.
 *
 * What is followed:
 *   - the handshake: the server speaks first (HandshakeV10, or ERR); the client's
 *     HandshakeResponse41 gives the capabilities (CLIENT_DEPRECATE_EOF, CLIENT_QUERY_ATTRIBUTES)
 *     and the database; the authentication exchange until the server's OK. An SSLRequest
 *     (CLIENT_SSL, 32 bytes) or compression (CLIENT_COMPRESS) stops following: the bytes after
 *     are not MySQL packets in the clear.
 *   - commands (a client packet with sequence id 0): COM_QUERY, COM_STMT_PREPARE,
 *     COM_STMT_EXECUTE (the statement's text from a bounded table by statement id, MariaDB's
 *     direct execute id 0xffffffff included), COM_STMT_FETCH, COM_STMT_BULK_EXECUTE, COM_INIT_DB
 *     (the database, once the server said OK), COM_STMT_CLOSE / SEND_LONG_DATA (no response),
 *     COM_PING, COM_STMT_RESET, COM_SET_OPTION, COM_RESET_CONNECTION, COM_STATISTICS,
 *     COM_PROCESS_KILL, COM_DEBUG, COM_FIELD_LIST, COM_QUIT, COM_CHANGE_USER (authentication
 *     again). Any other command stops following (its response framing is unknown).
 *   - responses: OK, ERR, EOF, result sets (column count, column definitions, the EOF that
 *     ends them unless CLIENT_DEPRECATE_EOF, rows, the EOF/OK that ends them; MariaDB's
 *     "metadata follows" byte; SERVER_MORE_RESULTS_EXISTS), the prepare response with its
 *     parameter and column definitions, LOCAL INFILE (the client's file, then the server's OK).
 *     Packets of 16 MiB and more (0xffffff continuation) are one logical packet.
 *   - commands sent before the previous response (pipelining, MariaDB's prepare + execute
 *     direct): up to SW_MYSQL_PENDING are matched with their responses in order.
 */
#ifndef SW_MYSQL_H
#define SW_MYSQL_H

#include "common.h"

#define SW_MYSQL_TEXT_MAX 2048u  /* statement bytes kept (SkyWalking's db.statement limit) */
#define SW_MYSQL_STMTS 8         /* prepared statements remembered per connection */
#define SW_MYSQL_STMT_TEXT 512u  /* bytes of a remembered statement's text */
#define SW_MYSQL_PENDING 4       /* commands awaiting their response */
#define SW_MYSQL_HEAD 256u       /* first bytes of a logical packet kept for parsing */
#define SW_MYSQL_DB_MAX 64u      /* database name bytes kept */
#define SW_MYSQL_MSG_MAX 128u    /* error message bytes reported */
#define SW_MYSQL_PARAMS_MAX 512u /* bytes of an execution's parameters text (db.sql.parameters) */
#define SW_MYSQL_PTYPES 16u      /* parameter types remembered per statement */

/* Command bytes (the first byte of a command packet). */
enum {
    SW_MYSQL_COM_QUIT = 0x01,
    SW_MYSQL_COM_INIT_DB = 0x02,
    SW_MYSQL_COM_QUERY = 0x03,
    SW_MYSQL_COM_FIELD_LIST = 0x04,
    SW_MYSQL_COM_STATISTICS = 0x09,
    SW_MYSQL_COM_PROCESS_KILL = 0x0c,
    SW_MYSQL_COM_DEBUG = 0x0d,
    SW_MYSQL_COM_PING = 0x0e,
    SW_MYSQL_COM_CHANGE_USER = 0x11,
    SW_MYSQL_COM_STMT_PREPARE = 0x16,
    SW_MYSQL_COM_STMT_EXECUTE = 0x17,
    SW_MYSQL_COM_STMT_SEND_LONG_DATA = 0x18,
    SW_MYSQL_COM_STMT_CLOSE = 0x19,
    SW_MYSQL_COM_STMT_RESET = 0x1a,
    SW_MYSQL_COM_SET_OPTION = 0x1b,
    SW_MYSQL_COM_STMT_FETCH = 0x1c,
    SW_MYSQL_COM_RESET_CONNECTION = 0x1f,
    SW_MYSQL_COM_STMT_BULK_EXECUTE = 0xfa,
};

enum sw_mysql_ev_kind {
    SW_MYSQL_EV_BEGIN, /* a command was sent (its statement text is complete or cut) */
    SW_MYSQL_EV_END,   /* its response ended (or the connection did: sw_mysql_close) */
    SW_MYSQL_EV_STOP,  /* the parser stops following this connection (reason) */
};

/* One event. Pointers are valid during the callback only. */
struct sw_mysql_ev {
    enum sw_mysql_ev_kind kind;
    uint8_t cmd;      /* BEGIN, END: the command byte */
    const char *text; /* BEGIN: the statement (COM_QUERY, PREPARE, EXECUTE, INIT_DB), may be "" */
    size_t text_len;
    bool text_cut;      /* BEGIN: the statement was longer than text_len */
    const char *params; /* BEGIN of an EXECUTE, when asked for (sw_mysql_init): its parameter
                           values as "[1,plum,NULL]", cut to the limit with "..." */
    size_t params_len;
    bool error;        /* END: an ERR packet (or the connection ended: closed) */
    bool closed;       /* END: no response, the connection ended (sw_mysql_close) */
    uint16_t err_code; /* END: the ERR packet's error code */
    char sqlstate[6];  /* END: its SQLSTATE, "" when none */
    const char *msg;   /* END: its message (cut to SW_MYSQL_MSG_MAX) */
    size_t msg_len;
    uint64_t rows;      /* END: rows of the result sets */
    uint64_t user;      /* END: what the callback returned for this command's BEGIN */
    const char *reason; /* STOP: why; END (closed) of a command the parser gave up on: why */
};

/* Called for every event; the value returned for a BEGIN comes back in its END's `user`. */
typedef uint64_t (*sw_mysql_cb)(void *ctx, const struct sw_mysql_ev *ev);

/* One direction's packet framing (internal). */
struct sw_mysql_dir {
    uint8_t hdr[4];
    uint8_t hdr_n;   /* header bytes seen of the current physical packet */
    bool cont;       /* the logical packet continues in the next physical one */
    uint8_t seq;     /* sequence id of the current physical packet */
    uint8_t seq0;    /* sequence id of the logical packet's first physical packet */
    uint32_t left;   /* payload bytes left in the current physical packet */
    uint32_t plen;   /* its payload length */
    uint64_t lpos;   /* payload bytes of the current logical packet so far */
    uint16_t head_n; /* bytes kept in head */
    uint8_t head[SW_MYSQL_HEAD];
};

/* A command awaiting its response (internal). */
struct sw_mysql_pend {
    uint8_t cmd;
    uint8_t slot; /* PREPARE: the statement table slot holding its text */
    uint64_t user;
};

/* A remembered prepared statement (internal). */
struct sw_mysql_stmt {
    uint32_t id;
    uint32_t age;  /* last use: the least recently used one is replaced */
    uint8_t state; /* 0 free, 1 prepare sent (no id yet), 2 prepared */
    bool cut;
    uint16_t len;
    uint16_t nparams; /* from the prepare response */
    uint8_t ntypes;   /* parameter types known (the last execute that sent them) */
    uint16_t types[SW_MYSQL_PTYPES];
    char text[SW_MYSQL_STMT_TEXT];
};

struct sw_mysql {
    uint8_t phase;       /* internal: handshake, auth, command, stopped */
    uint8_t rstate;      /* internal: where the response of pend[0] is */
    bool in_cmd;         /* internal: the client's logical packet is a command being captured */
    bool begun;          /* internal: its BEGIN was emitted */
    uint8_t cmd;         /* internal: its command byte */
    uint8_t npend;       /* commands awaiting a response */
    uint32_t caps;       /* capabilities in effect (client's, and the server's when known) */
    uint32_t srv_caps;   /* the server's */
    uint32_t text_max;   /* statement bytes captured (<= SW_MYSQL_TEXT_MAX) */
    uint16_t params_max; /* parameters text bytes (<= SW_MYSQL_PARAMS_MAX), 0: not decoded */
    uint32_t text_n;     /* bytes captured of the current command's payload after its byte */
    uint64_t count;      /* internal: definitions left to skip (result set, prepare) */
    uint64_t count2;     /* internal: prepare: column definitions after the parameters */
    uint64_t rows;       /* rows of the current response */
    uint32_t age;        /* internal: statement table clock */
    uint8_t last_prep;   /* internal: table slot of the latest PREPARE + 1, 0 none */
    uint8_t db_len;
    uint8_t pend_db_len; /* COM_INIT_DB sent, not yet confirmed */
    char db[SW_MYSQL_DB_MAX];
    char pend_db[SW_MYSQL_DB_MAX];
    struct sw_mysql_dir dir[2]; /* [0] client -> server, [1] server -> client */
    struct sw_mysql_pend pend[SW_MYSQL_PENDING];
    struct sw_mysql_stmt stmt[SW_MYSQL_STMTS];
    char text[SW_MYSQL_TEXT_MAX + 8]; /* the current command's payload after its byte */
};

/*
 * Starts the state of a new connection; `text_max` statement bytes are kept (capped), and the
 * parameters of prepared statements' executions are decoded into at most `params_max` bytes
 * (0: not decoded; plugin.jdbc.trace_sql_parameters).
 */
void sw_mysql_init(struct sw_mysql *m, size_t text_max, size_t params_max);

/*
 * Feeds `n` bytes that passed from the server (`from_server`) or the client. Calls `cb` for each
 * event. Never fails: input that is not this protocol makes a STOP event, and the parser then
 * ignores everything.
 */
void sw_mysql_feed(struct sw_mysql *m, bool from_server, const uint8_t *p, size_t n, sw_mysql_cb cb,
                   void *ctx);

/* The connection ended: an END (closed, error) for each command still awaiting its response. */
void sw_mysql_close(struct sw_mysql *m, sw_mysql_cb cb, void *ctx);

/* The current database (from the handshake, then COM_INIT_DB), and its length (0: none). */
static inline const char *sw_mysql_db(const struct sw_mysql *m, size_t *len)
{
    *len = m->db_len;
    return m->db;
}

/* In a child after fork: the commands awaiting a response keep no span value (the parent's). */
void sw_mysql_forget_spans(struct sw_mysql *m);

/* True once the parser stopped following (TLS, compression, not MySQL, unknown command). */
bool sw_mysql_stopped(const struct sw_mysql *m);

#endif /* SW_MYSQL_H */
