/*
 * proto_redis.h - incremental Redis protocol (RESP2 and RESP3) parsing of one client
 * connection: commands the client writes (RESP arrays of bulk strings, or inline lines) and the
 * replies it reads, as proto_db.h events.
 *
 * Framing rules (proto_redis.c has the details):
 *   - Every command gets one START when its last byte is written, and one END when its reply
 *     is read, in order (pipelines: many commands in one write, many replies in one read; each
 *     reply ends its own command). MULTI/EXEC: every command has a reply (+QUEUED), nothing
 *     special.
 *   - RESP3 pushes (`>`) and attributes (`|`) are no replies. RESP2 pub/sub (after a
 *     (P|S)SUBSCRIBE, until the subscription count drops to 0 or RESET): arrays whose first
 *     element is message/pmessage/smessage or a (un)subscribe confirmation are pushes; the
 *     first confirmation of a (un)subscribe command ends it, the others (one per channel) are
 *     counted off.
 *   - Given up (SW_DB_EV_GIVEUP), because no reply or no framed reply follows: MONITOR (after
 *     its +OK the stream is the server's log), SYNC/PSYNC (an RDB payload), CLIENT REPLY OFF/SKIP
 *     (commands without replies), RESP3 streamed strings and aggregates (length `?`), a reply
 *     with no command waiting for it, more than SW_REDIS_PENDING runs of special commands in
 *     flight, aggregates nested deeper than SW_REDIS_DEPTH, and any byte that is not RESP.
 *
 * cache.key is the command's first argument, cut to SW_DB_KEY_MAX - 1 bytes, except for
 * commands whose arguments are secrets (AUTH, HELLO, ACL, CONFIG, MIGRATE): empty.
 */
#ifndef SW_PROTO_REDIS_H
#define SW_PROTO_REDIS_H

#include "common.h"
#include "proto_db.h"

struct sw_config;

#define SW_REDIS_DEPTH 32 /* nesting of aggregates followed */
#define SW_REDIS_PENDING                                                                           \
    16 /* runs of commands waiting for replies (plain commands share a run)                        \
        */
#define SW_REDIS_WORD_MAX 16

struct sw_redis_pend {
    uint8_t kind; /* proto_redis.c's K_* */
    bool ended;   /* (un)subscribe: its END was given, confirmations are being counted off */
    uint32_t n;   /* plain: commands in the run; (un)subscribe: confirmations still due */
};

struct sw_redis_frame {
    int64_t rem; /* elements still to come */
    bool attr;   /* an attribute (`|`): complete, it is no value of its parent */
};

struct sw_redis {
    /* Requests (client writes). */
    uint8_t cst;      /* state */
    bool c_neg;       /* unused sign of a length (refused) */
    uint8_t c_digits; /* digits read of the current length */
    int64_t c_num;    /* length being read */
    int64_t c_argc, c_argi, c_bulk;
    uint32_t c_inline;                     /* bytes of the current inline line */
    bool c_intok;                          /* inline: inside a token */
    _Alignas(8) char name[SW_DB_NAME_MAX]; /* upper case; zero after the name */
    uint32_t name_len;
    uint32_t name_hash; /* of the name as captured (proto_redis.c's command table) */
    bool name_cut;
    char key[SW_DB_KEY_MAX];
    uint32_t key_len;
    bool key_cut;
    char arg2[8];
    uint32_t arg2_len;
    bool arg2_cut;
    /* Replies (client reads). */
    uint8_t sst;   /* state */
    uint8_t stype; /* type byte of the value being read */
    uint8_t s_digits;
    bool s_neg;
    int64_t s_num;
    int64_t s_bulk;
    uint8_t depth;
    uint8_t top_type; /* type byte of the top-level value ('|' values excluded) */
    bool top_open;    /* a top-level value has begun */
    int64_t top_idx;  /* index of the element of the top aggregate being read */
    bool resp3;       /* a push was seen: the server speaks RESP3 (pub/sub comes as pushes) */
    bool pubsub;      /* RESP2 subscribed mode */
    int64_t subcount; /* third element of a confirmation (subscriptions left), -1 unknown */
    char word[SW_REDIS_WORD_MAX]; /* first element of a top aggregate, lower-cased */
    uint32_t word_len;
    bool word_cut;
    char msg[SW_DB_MSG_MAX]; /* a top-level error's text */
    uint32_t msg_len;
    bool msg_cut;
    struct sw_redis_frame frame[SW_REDIS_DEPTH];
    /* Commands waiting for replies: a ring of runs. */
    struct sw_redis_pend pend[SW_REDIS_PENDING];
    uint8_t ph, pn;
    bool done;        /* given up: every later call consumes all and gives nothing */
    bool giveup_next; /* the next call gives SW_DB_EV_GIVEUP at once (after MONITOR's END) */
    const char *why;
};

/* Fills the command table (read/write) from the built-in one and the configuration
 * (plugin.jedis.operation_mapping_write / _read replace the built-in writes / reads). Called
 * once at start, before any feed; cfg may be NULL (built-in table). */
void sw_redis_init(const struct sw_config *cfg);

/* cache.op of a command name (any case). */
enum sw_db_op sw_redis_cmd_op(const char *name, size_t len);

void sw_redis_reset(struct sw_redis *r);

/* Feeds bytes of one direction (proto_db.h). */
size_t sw_redis_feed(struct sw_redis *r, enum sw_db_dir dir, const uint8_t *buf, size_t len,
                     struct sw_db_ev *ev);

/* Commands started and not yet ended (the caller's FIFO must hold as many). */
uint32_t sw_redis_pending(const struct sw_redis *r);

/* An event may come from a call with no bytes (proto_db.h). */
static inline bool sw_redis_more(const struct sw_redis *r)
{
    return r->giveup_next;
}

#endif /* SW_PROTO_REDIS_H */
