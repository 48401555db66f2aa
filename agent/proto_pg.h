/*
 * proto_pg.h - incremental PostgreSQL frontend/backend protocol (v3) parsing of one client
 * connection, as proto_db.h events.
 *
 * What gets a span (a START/END pair):
 *   - a simple Query ('Q'): START when the message is written (text: the query string, which may
 *     hold several statements), END at its ReadyForQuery; an error if any ErrorResponse came
 *     before it (the first one's SQLSTATE and message). COPY inside it (CopyIn/CopyOut/CopyData)
 *     is framed and passed over.
 *   - an Execute ('E') of the extended protocol: START when written (text: the statement its
 *     portal was bound to, from the Parse that named it), END at its CommandComplete,
 *     EmptyQueryResponse, PortalSuspended or ErrorResponse. After an error the server skips the
 *     rest of the pipeline until Sync: those Executes end at once with `skipped` (and error).
 *   Parse, Bind, Describe, Sync, Flush, Close, CopyData and the rest get no span.
 *
 * Startup: SSLRequest / GSSENCRequest are answered by one byte; 'S' or 'G' means TLS or GSS
 * follows on the socket: given up (a TLS session's plaintext is another connection object, whose
 * parser starts at the StartupMessage). The StartupMessage gives db.instance: its `database`
 * parameter, else its `user` (the server's default). CancelRequest, a direct TLS handshake, an
 * unknown protocol version and any message that is not v3 framing are given up.
 *
 * Statements remembered (fixed memory): the unnamed one (SW_DB_STMT_MAX - 1 bytes) and
 * SW_PG_SLOTS named ones (SW_PG_NAMED_MAX - 1 bytes each, least recently used replaced); an
 * Execute of a statement no longer remembered has an empty text.
 */
#ifndef SW_PROTO_PG_H
#define SW_PROTO_PG_H

#include "common.h"
#include "proto_db.h"

#define SW_PG_SLOTS 6        /* named prepared statements remembered */
#define SW_PG_NAMED_MAX 641  /* bytes kept of a named statement's text (NUL included) */
#define SW_PG_PENDING 32     /* runs of requests waiting for replies */
#define SW_PG_PARAMS_MAX 513 /* db.sql.parameters bytes kept (NUL included) */
#define SW_PG_DB_MAX 64      /* db.instance bytes kept (NUL included) */

struct sw_pg_slot {
    uint64_t name_hash; /* 0: free */
    uint32_t used;      /* LRU stamp */
    uint32_t len;
    bool cut;
    char text[SW_PG_NAMED_MAX];
};

struct sw_pg_pend {
    uint8_t kind; /* proto_pg.c's P_* */
    uint32_t n;   /* requests in the run */
};

/* One direction's message framing: type byte, 4-byte length, body. */
struct sw_pg_msg {
    uint8_t hdr[8]; /* type + length (startup: length + code) */
    uint8_t hn;     /* header bytes read */
    uint8_t type;
    uint32_t left; /* body bytes still to come */
    uint32_t pos;  /* body bytes read */
    uint8_t field; /* body sub-parser: which field */
    uint32_t fpos; /* ... and bytes into it */
    uint32_t fval; /* ... a numeric field being assembled */
};

struct sw_pg {
    bool startup;   /* the client's next message has no type byte */
    bool ssl_wait;  /* the server's next byte answers SSLRequest / GSSENCRequest */
    bool params_on; /* capture Bind parameters (db.sql.parameters) */
    bool discard;   /* an error is being skipped past: Executes until Sync are not run */
    bool done;
    bool q_err;      /* the head Query got an ErrorResponse */
    uint32_t skip_n; /* skipped ENDs to give before anything else */
    struct sw_pg_msg c, s;
    /* Captures of the message being read. */
    char db[SW_PG_DB_MAX];
    uint32_t db_len;
    bool db_cut, db_set;
    char user[SW_PG_DB_MAX];
    uint32_t user_len;
    bool user_cut;
    uint8_t sp_key;          /* startup: 1 database, 2 user, 0 other */
    uint64_t h_name, h_stmt; /* Parse/Bind/Execute: hash of the name fields being read */
    int slot;                /* Parse: the slot being written (-1 none) */
    uint32_t stamp;
    char unnamed[SW_DB_STMT_MAX]; /* the unnamed statement (Parse "" or Query) */
    uint32_t unnamed_len;
    bool unnamed_cut;
    struct sw_pg_slot slots[SW_PG_SLOTS];
    /* The last Bind: its portal and statement (slot index + 1; 0 unnamed; -1 unknown). */
    uint64_t bind_portal;
    int bind_slot;
    /* Bind parameters: formats and values as they are read. */
    uint16_t nfmt, fmt0, nparams, pi;
    int32_t plen;
    char params[SW_PG_PARAMS_MAX];
    uint32_t params_len;
    bool params_cut;
    /* ErrorResponse fields. */
    uint8_t efield;
    char code[6];
    uint32_t code_len;
    char msg[SW_DB_MSG_MAX];
    uint32_t msg_len;
    bool msg_cut;
    char q_code[6];
    char q_msg[SW_DB_MSG_MAX];
    uint32_t q_msg_len;
    struct sw_pg_pend pend[SW_PG_PENDING];
    uint8_t ph, pn;
    const char *why;
};

/* `params`: capture Bind parameters (plugin.jdbc.trace_sql_parameters). */
void sw_pg_reset(struct sw_pg *p, bool params);

size_t sw_pg_feed(struct sw_pg *p, enum sw_db_dir dir, const uint8_t *buf, size_t len,
                  struct sw_db_ev *ev);

/* db.instance: the startup message's database (else user); "" before it. */
const char *sw_pg_database(const struct sw_pg *p, size_t *len);

uint32_t sw_pg_pending(const struct sw_pg *p);

/* An event may come from a call with no bytes (proto_db.h). */
static inline bool sw_pg_more(const struct sw_pg *r)
{
    return r->skip_n != 0;
}

#endif /* SW_PROTO_PG_H */
