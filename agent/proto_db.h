/*
 * proto_db.h - what the database and cache protocol parsers (proto_redis.c, proto_pg.c,
 * proto_memcached.c) tell the connection layer: the events of one client connection, fed the
 * bytes of each direction as the application writes and reads them.
 *
 * Rules (as http.h): runs on application threads inside read()/write() interposers. No malloc,
 * no locks, no syscalls, no stdio, errno untouched. All state is in a fixed-size struct owned
 * by the caller; bytes may arrive split at any boundary. Input is untrusted: anything the parser
 * cannot frame for certain ends in SW_DB_EV_GIVEUP (terminal: stop following the connection,
 * end its open spans as not followed), never in a guess.
 *
 * Usage (event-at-a-time; no callbacks), for each direction:
 *
 *   struct sw_db_ev ev;
 *   size_t off = 0;
 *   for (;;) {
 *       off += sw_redis_feed(p, dir, buf + off, len - off, &ev);
 *       if (ev.type == SW_DB_EV_NONE)
 *           break;              // every byte consumed
 *       handle(&ev);            // START: open a span; END: end the oldest open one
 *       if (ev.type == SW_DB_EV_GIVEUP)
 *           break;
 *   }
 *
 * Every call stops right after ONE event and returns the bytes consumed up to and including it
 * (a call may return 0 with an event: several events can end at the same byte). A call with no
 * bytes gives an event only when the parser's sw_*_more() says so (the caller skips it else). START
 * events come in the order of the requests on the wire, END events in the same order, and never
 * more ENDs than STARTs: the caller keeps its span handles in a FIFO. Strings of an event point
 * into the parser's state and stay valid until the next call.
 */
#ifndef SW_PROTO_DB_H
#define SW_PROTO_DB_H

#include "common.h"

enum sw_db_dir {
    SW_DB_TO_SERVER = 0, /* bytes the client writes (requests) */
    SW_DB_TO_CLIENT = 1, /* bytes the client reads (replies) */
};

enum sw_db_ev_type {
    SW_DB_EV_NONE = 0, /* no event in the bytes consumed (all of them) */
    SW_DB_EV_START,    /* a request is complete on the wire: open its span */
    SW_DB_EV_END,      /* the reply of the oldest started request is complete */
    SW_DB_EV_GIVEUP,   /* terminal: the stream cannot be framed any more (msg says why) */
};

/* cache.op of a command (SkyWalking's values are "read" and "write" exactly). */
enum sw_db_op { SW_DB_OP_NONE = 0, SW_DB_OP_READ, SW_DB_OP_WRITE };

#define SW_DB_NAME_MAX 32   /* command name bytes kept (NUL included), upper-cased for Redis */
#define SW_DB_KEY_MAX 129   /* cache.key bytes kept (NUL included): SkyWalking cuts at 128 */
#define SW_DB_MSG_MAX 256   /* error message bytes kept (NUL included) */
#define SW_DB_STMT_MAX 2049 /* db.statement bytes kept (NUL included): SkyWalking's 2048 */

struct sw_db_ev {
    enum sw_db_ev_type type;
    bool error;       /* END: the reply is an error (Redis -ERR, PG ErrorResponse, ...) */
    bool text_cut;    /* START: text is longer on the wire than what is kept */
    bool skipped;     /* END (PG): never executed, an earlier statement of its pipeline failed */
    uint8_t op;       /* START: enum sw_db_op */
    const char *name; /* START: command name ("GET", "get", "Query", "Execute"); GIVEUP: "" */
    size_t name_len;
    const char *text; /* START: key (caches) or statement (PG), may be empty */
    size_t text_len;
    const char *params; /* START (PG, when asked): db.sql.parameters "[a,b]", else NULL */
    size_t params_len;
    const char *msg; /* END with error: the server's message; GIVEUP: why */
    size_t msg_len;
    char code[6]; /* END with error (PG): SQLSTATE, NUL-terminated, else "" */
};

static inline void sw_db_ev_clear(struct sw_db_ev *ev)
{
    ev->type = SW_DB_EV_NONE;
    ev->error = ev->text_cut = ev->skipped = false;
    ev->op = SW_DB_OP_NONE;
    ev->name = ev->text = ev->msg = "";
    ev->params = NULL;
    ev->name_len = ev->text_len = ev->msg_len = ev->params_len = 0;
    ev->code[0] = '\0';
}

/* A bounded capture into a fixed buffer (cap includes room for a NUL). */
static inline void sw_db_cap_put(char *dst, size_t cap, uint32_t *len, bool *cut,
                                 const uint8_t *src, size_t n)
{
    size_t room = *len < cap - 1 ? cap - 1 - *len : 0;
    size_t k = n < room ? n : room;
    sw_copy_small(dst + *len, src, k);
    *len += (uint32_t)k;
    dst[*len] = '\0';
    if (k < n)
        *cut = true;
}

#endif /* SW_PROTO_DB_H */
