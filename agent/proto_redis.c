/*
 * proto_redis.c - Redis RESP2/RESP3 framing of a client connection (see proto_redis.h).
 *
 * Two independent byte-at-a-time state machines (requests, replies) with bulk bodies skipped
 * in one step; nothing is buffered but the few captures (command name, first argument, the
 * first element of a top-level aggregate, a top-level error's text). Lengths are checked
 * against Redis's own limits; a byte that is not what RESP allows at that point gives up.
 */
#include "common.h"

#include "config.h"
#include "proto_redis.h"

#include <string.h>

/* Pending kinds. */
enum {
    K_PLAIN = 0,
    K_SUB,     /* subscribe */
    K_PSUB,    /* psubscribe */
    K_SSUB,    /* ssubscribe */
    K_UNSUB,   /* unsubscribe */
    K_PUNSUB,  /* punsubscribe */
    K_SUNSUB,  /* sunsubscribe */
    K_MESSAGE, /* message / pmessage / smessage (never pending) */
    K_MONITOR,
    K_RESET,
    K_GIVEUP, /* SYNC, PSYNC: replies that cannot be framed (never pending) */
    K_CLIENT, /* CLIENT: REPLY OFF|SKIP gives up, the rest is plain (never pending) */
};

/* Request states. */
enum {
    C_START = 0,
    C_ARGC,
    C_ARGC_LF,
    C_BULKHDR,
    C_BULKLEN,
    C_BULKLEN_LF,
    C_BULK, /* C_BULK .. C_BULK_LF: bulk_take */
    C_BULK_CR,
    C_BULK_LF,
    C_INLINE
};
/* Reply states. */
enum {
    S_TYPE = 0,
    S_LINE,
    S_LINE_LF,
    S_LEN,
    S_LEN_LF,
    S_BULK,
    S_BULK_CR,
    S_BULK_LF
}; /* bulk_take */

#define BULK_MAX (512LL * 1024 * 1024) /* proto-max-bulk-len's default and usual ceiling */
#define ARGC_MAX (1024LL * 1024 * 1024)
#define INLINE_MAX (64u * 1024u) /* PROTO_INLINE_MAX_SIZE */
#define AGG_MAX (1LL << 40)

/* ---------------------------------------------------------------- command table */

static const char *const k_reads[] = {
    "GET",
    "MGET",
    "GETRANGE",
    "GETBIT",
    "STRLEN",
    "SUBSTR",
    "EXISTS",
    "TYPE",
    "TTL",
    "PTTL",
    "EXPIRETIME",
    "PEXPIRETIME",
    "KEYS",
    "SCAN",
    "RANDOMKEY",
    "DBSIZE",
    "HGET",
    "HMGET",
    "HGETALL",
    "HKEYS",
    "HVALS",
    "HLEN",
    "HEXISTS",
    "HSTRLEN",
    "HSCAN",
    "HRANDFIELD",
    "LINDEX",
    "LLEN",
    "LRANGE",
    "LPOS",
    "SCARD",
    "SISMEMBER",
    "SMISMEMBER",
    "SMEMBERS",
    "SRANDMEMBER",
    "SSCAN",
    "SDIFF",
    "SINTER",
    "SUNION",
    "SINTERCARD",
    "ZCARD",
    "ZCOUNT",
    "ZLEXCOUNT",
    "ZRANGE",
    "ZRANGEBYLEX",
    "ZRANGEBYSCORE",
    "ZREVRANGE",
    "ZREVRANGEBYLEX",
    "ZREVRANGEBYSCORE",
    "ZRANK",
    "ZREVRANK",
    "ZSCORE",
    "ZMSCORE",
    "ZSCAN",
    "ZRANDMEMBER",
    "ZDIFF",
    "ZINTER",
    "ZUNION",
    "ZINTERCARD",
    "XRANGE",
    "XREVRANGE",
    "XREAD",
    "XLEN",
    "XINFO",
    "XPENDING",
    "GEOPOS",
    "GEODIST",
    "GEOHASH",
    "GEORADIUS_RO",
    "GEORADIUSBYMEMBER_RO",
    "GEOSEARCH",
    "BITCOUNT",
    "BITPOS",
    "PFCOUNT",
    "DUMP",
    "LCS",
    "SORT_RO",
    "TOUCH",
    "OBJECT",
    "BITFIELD_RO",
};

static const char *const k_writes[] = {
    "SET",
    "SETNX",
    "SETEX",
    "PSETEX",
    "MSET",
    "MSETNX",
    "APPEND",
    "SETRANGE",
    "SETBIT",
    "GETSET",
    "GETDEL",
    "GETEX",
    "INCR",
    "INCRBY",
    "INCRBYFLOAT",
    "DECR",
    "DECRBY",
    "DEL",
    "UNLINK",
    "EXPIRE",
    "PEXPIRE",
    "EXPIREAT",
    "PEXPIREAT",
    "PERSIST",
    "RENAME",
    "RENAMENX",
    "MOVE",
    "COPY",
    "RESTORE",
    "HSET",
    "HSETNX",
    "HMSET",
    "HDEL",
    "HINCRBY",
    "HINCRBYFLOAT",
    "LPUSH",
    "RPUSH",
    "LPUSHX",
    "RPUSHX",
    "LPOP",
    "RPOP",
    "LSET",
    "LREM",
    "LTRIM",
    "LINSERT",
    "LMOVE",
    "BLMOVE",
    "RPOPLPUSH",
    "BRPOPLPUSH",
    "BLPOP",
    "BRPOP",
    "LMPOP",
    "BLMPOP",
    "SADD",
    "SREM",
    "SPOP",
    "SMOVE",
    "SDIFFSTORE",
    "SINTERSTORE",
    "SUNIONSTORE",
    "ZADD",
    "ZINCRBY",
    "ZREM",
    "ZREMRANGEBYLEX",
    "ZREMRANGEBYRANK",
    "ZREMRANGEBYSCORE",
    "ZPOPMIN",
    "ZPOPMAX",
    "BZPOPMIN",
    "BZPOPMAX",
    "ZMPOP",
    "BZMPOP",
    "ZUNIONSTORE",
    "ZINTERSTORE",
    "ZDIFFSTORE",
    "ZRANGESTORE",
    "XADD",
    "XDEL",
    "XTRIM",
    "XACK",
    "XCLAIM",
    "XAUTOCLAIM",
    "XGROUP",
    "XREADGROUP",
    "XSETID",
    "PFADD",
    "PFMERGE",
    "GEOADD",
    "GEOSEARCHSTORE",
    "GEORADIUS",
    "GEORADIUSBYMEMBER",
    "BITOP",
    "BITFIELD",
    "SORT",
    "FLUSHDB",
    "FLUSHALL",
};

/*
 * The command table: one open-addressing hash lookup per command (the name's hash is made
 * while its bytes are upper-cased, cap_arg) gives its cache.op, its pending kind (pub/sub,
 * MONITOR, RESET, ... are K_PLAIN otherwise) and whether its first argument is a secret.
 */
#define TAB_SLOTS 512u /* power of two, more than twice the entries */
#define NAME_KEEP 24u
struct cmd_ent {
    _Alignas(8) char name[NAME_KEEP]; /* upper case, zero-padded */
    uint8_t len;
    uint8_t op;
    uint8_t kind;
    bool secret; /* no cache.key */
};
static struct cmd_ent g_cmds[TAB_SLOTS / 2];
static uint16_t g_tab[TAB_SLOTS]; /* index + 1 into g_cmds, 0 empty */
static uint32_t g_ncmds;

/* Commands other than plain ones, whatever the read / write lists say. */
static const struct {
    const char *name;
    uint8_t kind;
    bool secret;
} k_special[] = {
    {"SUBSCRIBE", K_SUB, false},       {"SSUBSCRIBE", K_SSUB, false},
    {"PSUBSCRIBE", K_PSUB, false},     {"UNSUBSCRIBE", K_UNSUB, false},
    {"SUNSUBSCRIBE", K_SUNSUB, false}, {"PUNSUBSCRIBE", K_PUNSUB, false},
    {"MONITOR", K_MONITOR, false},     {"RESET", K_RESET, false},
    {"SYNC", K_GIVEUP, false},         {"PSYNC", K_GIVEUP, false},
    {"CLIENT", K_CLIENT, false},       {"AUTH", K_PLAIN, true},
    {"HELLO", K_PLAIN, true},          {"ACL", K_PLAIN, true},
    {"CONFIG", K_PLAIN, true},         {"MIGRATE", K_PLAIN, true},
};

static inline uint8_t up(uint8_t c)
{
    return (uint8_t)(c ^ ((uint8_t)(c - 'a') < 26u) << 5); /* no branch */
}

#define HASH_SEED 2166136261u
static inline uint32_t hash_step(uint32_t h, uint8_t upper)
{
    return (h ^ upper) * 16777619u;
}

static inline uint32_t name_hash(const char *s, size_t n)
{
    uint32_t h = HASH_SEED;
    for (size_t i = 0; i < n; i++)
        h = hash_step(h, up((uint8_t)s[i]));
    return h;
}

/* NAME_KEEP bytes of two names equal (both 8-byte aligned, zero-padded). */
static inline bool name_eq(const char *a, const char *b)
{
    _Static_assert(NAME_KEEP == 24, "three words");
    uint64_t x[3], y[3];
    memcpy(x, a, sizeof(x));
    memcpy(y, b, sizeof(y));
    return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2])) == 0;
}

/* The entry of upper-case name u (n bytes, < NAME_KEEP, zero-padded to NAME_KEEP) of hash h. */
static inline __attribute__((always_inline)) const struct cmd_ent *tab_find(const char *u, size_t n,
                                                                            uint32_t h)
{
    h &= TAB_SLOTS - 1;
    for (uint32_t i = 0; i < TAB_SLOTS; i++, h = (h + 1) & (TAB_SLOTS - 1)) {
        uint16_t e = g_tab[h];
        if (e == 0)
            return NULL;
        const struct cmd_ent *c = &g_cmds[e - 1];
        if (c->len == n && name_eq(c->name, u))
            return c;
    }
    return NULL;
}

/* The entry of a name (any case), added when it is not there (NULL: not kept, table full). */
static struct cmd_ent *tab_add(const char *s, size_t n)
{
    if (n == 0 || n >= NAME_KEEP)
        return NULL;
    _Alignas(8) char u[NAME_KEEP] = {0};
    for (size_t k = 0; k < n; k++)
        u[k] = (char)up((uint8_t)s[k]);
    struct cmd_ent *c = (struct cmd_ent *)tab_find(u, n, name_hash(s, n));
    if (c)
        return c; /* a later list wins */
    if (g_ncmds >= SW_ARRAY_LEN(g_cmds))
        return NULL;
    uint32_t h = name_hash(s, n) & (TAB_SLOTS - 1);
    while (g_tab[h])
        h = (h + 1) & (TAB_SLOTS - 1);
    c = &g_cmds[g_ncmds++];
    memcpy(c->name, u, NAME_KEEP);
    c->len = (uint8_t)n;
    c->op = SW_DB_OP_NONE;
    c->kind = K_PLAIN;
    c->secret = false;
    g_tab[h] = (uint16_t)g_ncmds;
    return c;
}

static void tab_op(const char *s, uint8_t op)
{
    struct cmd_ent *c = tab_add(s, strlen(s));
    if (c)
        c->op = op;
}

void sw_redis_init(const struct sw_config *cfg)
{
    memset(g_tab, 0, sizeof(g_tab));
    memset(g_cmds, 0, sizeof(g_cmds));
    g_ncmds = 0;
    for (size_t i = 0; i < SW_ARRAY_LEN(k_special); i++) {
        struct cmd_ent *c = tab_add(k_special[i].name, strlen(k_special[i].name));
        c->kind = k_special[i].kind;
        c->secret = k_special[i].secret;
    }
    const struct sw_cfg_list *w = cfg ? &cfg->redis_op_write : NULL;
    const struct sw_cfg_list *rd = cfg ? &cfg->redis_op_read : NULL;
    if (rd && rd->n > 0) {
        for (int i = 0; i < rd->n; i++)
            tab_op(rd->item[i], SW_DB_OP_READ);
    } else {
        for (size_t i = 0; i < SW_ARRAY_LEN(k_reads); i++)
            tab_op(k_reads[i], SW_DB_OP_READ);
    }
    if (w && w->n > 0) {
        for (int i = 0; i < w->n; i++)
            tab_op(w->item[i], SW_DB_OP_WRITE);
    } else {
        for (size_t i = 0; i < SW_ARRAY_LEN(k_writes); i++)
            tab_op(k_writes[i], SW_DB_OP_WRITE);
    }
}

enum sw_db_op sw_redis_cmd_op(const char *s, size_t n)
{
    if (n == 0 || n >= NAME_KEEP)
        return SW_DB_OP_NONE;
    _Alignas(8) char u[NAME_KEEP] = {0};
    for (size_t k = 0; k < n; k++)
        u[k] = (char)up((uint8_t)s[k]);
    const struct cmd_ent *c = tab_find(u, n, name_hash(s, n));
    return c ? (enum sw_db_op)c->op : SW_DB_OP_NONE;
}

/* ---------------------------------------------------------------- helpers */

void sw_redis_reset(struct sw_redis *r)
{
    memset(r, 0, sizeof(*r));
    r->subcount = -1;
}

uint32_t sw_redis_pending(const struct sw_redis *r)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < r->pn; i++) {
        const struct sw_redis_pend *p = &r->pend[(r->ph + i) % SW_REDIS_PENDING];
        n += p->kind == K_PLAIN ? p->n : (p->ended ? 0u : 1u);
    }
    return n;
}

static size_t give_up(struct sw_redis *r, struct sw_db_ev *ev, const char *why, size_t consumed)
{
    r->done = true;
    r->why = why;
    ev->type = SW_DB_EV_GIVEUP;
    ev->msg = why;
    ev->msg_len = strlen(why);
    return consumed;
}

/* A captured argument byte run, upper-cased for the command name. */
static inline __attribute__((always_inline)) void cap_arg(struct sw_redis *r, const uint8_t *p,
                                                          size_t n)
{
    if (r->c_argi == 0) {
        size_t room = r->name_len < SW_DB_NAME_MAX - 1 ? SW_DB_NAME_MAX - 1 - r->name_len : 0;
        size_t k = n < room ? n : room;
        uint32_t h = r->name_hash;
        for (size_t i = 0; i < k; i++) {
            uint8_t u = up(p[i]);
            r->name[r->name_len + i] = (char)u;
            h = hash_step(h, u);
        }
        r->name_hash = h;
        r->name_len += (uint32_t)k;
        r->name[r->name_len] = '\0';
        if (k < n)
            r->name_cut = true;
    } else if (r->c_argi == 1) {
        sw_db_cap_put(r->key, SW_DB_KEY_MAX, &r->key_len, &r->key_cut, p, n);
    } else if (r->c_argi == 2) {
        sw_db_cap_put(r->arg2, sizeof(r->arg2), &r->arg2_len, &r->arg2_cut, p, n);
    }
}

static void cmd_begin(struct sw_redis *r)
{
    r->name_len = r->key_len = r->arg2_len = 0;
    r->name_cut = r->key_cut = r->arg2_cut = false;
    _Static_assert(SW_DB_NAME_MAX >= NAME_KEEP, "the table compares NAME_KEEP bytes");
    memset(r->name, 0, NAME_KEEP);
    r->name_hash = HASH_SEED;
    r->key[0] = r->arg2[0] = '\0';
    r->c_argi = 0;
}

static bool pend_push(struct sw_redis *r, uint8_t kind, uint32_t n)
{
    if (kind == K_PLAIN && r->pn > 0) {
        struct sw_redis_pend *t = &r->pend[(r->ph + r->pn - 1) % SW_REDIS_PENDING];
        if (t->kind == K_PLAIN && t->n < UINT32_MAX) {
            t->n++;
            return true;
        }
    }
    if (r->pn >= SW_REDIS_PENDING)
        return false;
    struct sw_redis_pend *t = &r->pend[(r->ph + r->pn) % SW_REDIS_PENDING];
    t->kind = kind;
    t->ended = false;
    t->n = n;
    r->pn++;
    return true;
}

static void pend_pop(struct sw_redis *r)
{
    r->ph = (uint8_t)((r->ph + 1) % SW_REDIS_PENDING);
    r->pn--;
}

/* A command is complete: START (or give up). Its kind, cache.op and whether its key is a
 * secret from the command table. */
static size_t cmd_done(struct sw_redis *r, struct sw_db_ev *ev, size_t consumed)
{
    const struct cmd_ent *e =
        r->name_len < NAME_KEEP ? tab_find(r->name, r->name_len, r->name_hash) : NULL;
    uint32_t n = 1;
    int kind = e ? e->kind : K_PLAIN;
    if (SW_UNLIKELY(kind != K_PLAIN)) {
        if (kind >= K_SUB && kind <= K_SUNSUB) {
            /* one confirmation per channel (at least one) */
            int64_t args = r->c_argc - 1;
            n = (uint32_t)(args > 0 ? (args < UINT32_MAX ? args : UINT32_MAX) : 1);
        } else if (kind == K_CLIENT) {
            /* CLIENT REPLY OFF and SKIP silence replies: the framing is lost. ON answers +OK. */
            kind = K_PLAIN;
            if (r->key_len == 5 && up((uint8_t)r->key[0]) == 'R' && up((uint8_t)r->key[1]) == 'E' &&
                up((uint8_t)r->key[2]) == 'P' && up((uint8_t)r->key[3]) == 'L' &&
                up((uint8_t)r->key[4]) == 'Y' &&
                !(r->arg2_len == 2 && up((uint8_t)r->arg2[0]) == 'O' &&
                  up((uint8_t)r->arg2[1]) == 'N'))
                kind = K_GIVEUP;
        }
        if (kind == K_GIVEUP)
            return give_up(r, ev, "redis: a command whose replies cannot be framed (MONITOR-like)",
                           consumed);
    }
    if (!pend_push(r, (uint8_t)kind, n))
        return give_up(r, ev, "redis: too many special commands in flight", consumed);
    if (kind >= K_SUB && kind <= K_SUNSUB)
        r->pubsub = true;
    ev->type = SW_DB_EV_START;
    ev->name = r->name;
    ev->name_len = r->name_len;
    if (!e || !e->secret) {
        ev->text = r->key;
        ev->text_len = r->key_len;
        ev->text_cut = r->key_cut;
    }
    ev->op = e ? e->op : SW_DB_OP_NONE;
    return consumed;
}

/*
 * The body of a bulk string (*rem bytes still to come) and the CRLF after it, in either
 * direction: *st is `base` (the body), base + 1 (its CR) or base + 2 (its LF). Takes what
 * p[0, n) holds of it and returns the bytes used: the body's bytes among them (at p) in *body,
 * to capture; *end when its LF was taken; *bad when a byte where CRLF belongs is not (the
 * bytes before it are returned).
 */
static size_t bulk_take(uint8_t *st, uint8_t base, int64_t *rem, const uint8_t *p, size_t n,
                        size_t *body, bool *end, bool *bad)
{
    size_t i = 0;
    *body = 0;
    *end = *bad = false;
    if (*st == base) {
        i = n < (uint64_t)*rem ? n : (size_t)*rem;
        *body = i;
        *rem -= (int64_t)i;
        if (*rem)
            return i;
        *st = (uint8_t)(base + 1);
    }
    if (*st == base + 1 && i < n) {
        if (p[i] != '\r') {
            *bad = true;
            return i;
        }
        i++;
        *st = (uint8_t)(base + 2);
    }
    if (*st == base + 2 && i < n) {
        if (p[i] != '\n') {
            *bad = true;
            return i;
        }
        i++;
        *end = true;
    }
    return i;
}

/* ---------------------------------------------------------------- requests */

/*
 * The usual command: a whole RESP array of bulk strings in the bytes at hand, read in one pass
 * (the state machine below reads the same bytes the same way one at a time). Returns the bytes
 * of the command, or 0 (nothing decided: the state machine takes it from its first byte).
 */
static size_t fast_cmd(struct sw_redis *r, const uint8_t *p, size_t n)
{
    size_t i = 1;
    int64_t argc = 0;
    while (i < n && i < 12 && p[i] >= '0' && p[i] <= '9')
        argc = argc * 10 + (p[i++] - '0');
    if (i == 1 || i + 1 >= n || p[i] != '\r' || p[i + 1] != '\n' || argc <= 0)
        return 0;
    i += 2;
    r->c_argc = argc;
    for (int64_t a = 0; a < argc; a++) {
        if (i >= n || p[i] != '$')
            return 0;
        size_t s = ++i;
        int64_t l = 0;
        if (i + 1 < n && (uint8_t)(p[i] - '0') < 10u && p[i + 1] == '\r')
            l = p[i++] - '0'; /* the usual: one digit */
        else
            while (i < n && i - s < 11 && p[i] >= '0' && p[i] <= '9')
                l = l * 10 + (p[i++] - '0');
        if (i == s || i + 1 >= n || p[i] != '\r' || p[i + 1] != '\n' || l > BULK_MAX)
            return 0;
        i += 2;
        if ((uint64_t)l + 2 > n - i || p[i + l] != '\r' || p[i + l + 1] != '\n')
            return 0;
        if (a < 3) {
            r->c_argi = a;
            cap_arg(r, p + i, (size_t)l);
        }
        i += (size_t)l + 2;
    }
    return i;
}

static size_t feed_req(struct sw_redis *r, const uint8_t *buf, size_t len, struct sw_db_ev *ev)
{
    size_t i = 0;
    while (i < len) {
        uint8_t c = buf[i];
        switch (r->cst) {
        case C_START:
            cmd_begin(r);
            if (c == '*') {
                size_t used = fast_cmd(r, buf + i, len - i);
                if (used) {
                    r->c_argi = r->c_argc;
                    return cmd_done(r, ev, i + used);
                }
                cmd_begin(r); /* what it captured is taken again below */
                r->cst = C_ARGC;
                r->c_num = 0;
                r->c_digits = 0;
                i++;
            } else {
                r->cst = C_INLINE;
                r->c_inline = 0;
                r->c_intok = false;
                r->c_argc = 0;
            }
            break;
        case C_ARGC:
        case C_BULKLEN:
            if (c >= '0' && c <= '9' && r->c_digits < 18) {
                r->c_num = r->c_num * 10 + (c - '0');
                r->c_digits++;
                i++;
            } else if (c == '-' && r->c_digits == 0 && r->cst == C_ARGC) {
                r->c_neg = true; /* "*-1": no command */
                r->c_digits = 1;
                i++;
            } else if (c == '\r' && r->c_digits > 0) {
                r->cst = r->cst == C_ARGC ? C_ARGC_LF : C_BULKLEN_LF;
                i++;
            } else {
                return give_up(r, ev, "redis: bad length in a command", i);
            }
            break;
        case C_ARGC_LF:
            if (c != '\n')
                return give_up(r, ev, "redis: bad line end in a command", i);
            i++;
            if (r->c_neg || r->c_num <= 0) { /* Redis reads no command from *0 or *-1 */
                r->c_neg = false;
                r->cst = C_START;
                break;
            }
            if (r->c_num > ARGC_MAX)
                return give_up(r, ev, "redis: too many arguments", i);
            r->c_argc = r->c_num;
            r->cst = C_BULKHDR;
            break;
        case C_BULKHDR:
            if (c != '$')
                return give_up(r, ev, "redis: a command argument that is not a bulk string", i);
            r->cst = C_BULKLEN;
            r->c_num = 0;
            r->c_digits = 0;
            i++;
            break;
        case C_BULKLEN_LF:
            if (c != '\n')
                return give_up(r, ev, "redis: bad line end in a command", i);
            i++;
            if (r->c_num > BULK_MAX)
                return give_up(r, ev, "redis: argument longer than Redis accepts", i);
            r->c_bulk = r->c_num;
            r->cst = C_BULK;
            break;
        case C_BULK:
        case C_BULK_CR:
        case C_BULK_LF: {
            size_t body;
            bool end, bad;
            size_t k = bulk_take(&r->cst, C_BULK, &r->c_bulk, buf + i, len - i, &body, &end, &bad);
            if (body)
                cap_arg(r, buf + i, body);
            i += k;
            if (bad)
                return give_up(r, ev, "redis: bulk string not followed by CRLF", i);
            if (end) {
                r->c_argi++;
                if (r->c_argi == r->c_argc) {
                    r->cst = C_START;
                    return cmd_done(r, ev, i);
                }
                r->cst = C_BULKHDR;
            }
            break;
        }
        case C_INLINE:
            if (c == '\n') {
                i++;
                r->cst = C_START;
                if (r->c_argc > 0)
                    return cmd_done(r, ev, i);
                break; /* an empty line: no command */
            }
            if (++r->c_inline > INLINE_MAX)
                return give_up(r, ev, "redis: inline command too long", i);
            if (c == ' ' || c == '\t' || c == '\r') {
                if (r->c_intok) {
                    r->c_intok = false;
                    r->c_argi++;
                }
            } else {
                if (!r->c_intok) {
                    r->c_intok = true;
                    r->c_argc++;
                }
                cap_arg(r, &c, 1);
            }
            i++;
            break;
        default:
            return give_up(r, ev, "redis: internal state", i);
        }
    }
    return len;
}

/* ---------------------------------------------------------------- replies */

static int word_kind(const struct sw_redis *r)
{
    static const struct {
        const char *w;
        int k;
    } words[] = {
        {"subscribe", K_SUB},     {"psubscribe", K_PSUB},     {"ssubscribe", K_SSUB},
        {"unsubscribe", K_UNSUB}, {"punsubscribe", K_PUNSUB}, {"sunsubscribe", K_SUNSUB},
        {"message", K_MESSAGE},   {"pmessage", K_MESSAGE},    {"smessage", K_MESSAGE},
    };
    if (r->word_cut)
        return -1;
    for (size_t i = 0; i < SW_ARRAY_LEN(words); i++)
        if (strlen(words[i].w) == r->word_len && memcmp(words[i].w, r->word, r->word_len) == 0)
            return words[i].k;
    return -1;
}

/* A top-level value is complete. */
static size_t reply_done(struct sw_redis *r, struct sw_db_ev *ev, size_t consumed)
{
    uint8_t t = r->top_type;
    r->top_open = false;
    bool push = t == '>';
    if (push)
        r->resp3 = true;
    int wk = (push || (t == '*' && r->pubsub && !r->resp3)) ? word_kind(r) : -1;
    if (wk >= 0) {
        /* pub/sub: a confirmation ends (or is counted off by) its command; messages are pushes */
        if (wk != K_MESSAGE && (wk == K_UNSUB || wk == K_PUNSUB || wk == K_SUNSUB) &&
            r->subcount == 0 && !r->resp3)
            r->pubsub = false;
        if (r->pn > 0) {
            struct sw_redis_pend *h = &r->pend[r->ph];
            if (h->kind == wk) {
                bool first = !h->ended;
                h->ended = true;
                if (h->n <= 1)
                    pend_pop(r);
                else
                    h->n--;
                if (first) {
                    ev->type = SW_DB_EV_END;
                    return consumed;
                }
            }
        }
        return consumed; /* a push */
    }
    if (push)
        return consumed; /* RESP3 out-of-band data (client tracking invalidations ...) */
    /* A reply: (un)subscribe commands whose remaining confirmations never came are done. */
    while (r->pn > 0 && r->pend[r->ph].kind != K_PLAIN && r->pend[r->ph].ended)
        pend_pop(r);
    if (r->pn == 0)
        return give_up(r, ev, "redis: a reply with no command waiting for it", consumed);
    struct sw_redis_pend *h = &r->pend[r->ph];
    uint8_t kind = h->kind;
    if (kind == K_PLAIN && h->n > 1)
        h->n--;
    else
        pend_pop(r);
    ev->type = SW_DB_EV_END;
    ev->error = t == '-' || t == '!';
    if (ev->error) {
        ev->msg = r->msg;
        ev->msg_len = r->msg_len;
    }
    if (kind == K_RESET && !ev->error)
        r->pubsub = false;
    if (kind == K_MONITOR && !ev->error) {
        r->giveup_next = true;
        r->why = "redis: MONITOR stream follows";
    }
    return consumed;
}

/* A value (scalar or finished aggregate) is complete at the current depth. */
static size_t value_done(struct sw_redis *r, struct sw_db_ev *ev, size_t consumed)
{
    for (;;) {
        if (r->depth == 0)
            return reply_done(r, ev, consumed);
        struct sw_redis_frame *f = &r->frame[r->depth - 1];
        if (r->depth == 1)
            r->top_idx++;
        if (--f->rem > 0)
            return consumed;
        bool attr = f->attr;
        r->depth--;
        if (attr) {
            if (r->depth == 0)
                r->top_open = false; /* the value the attribute annotates follows */
            return consumed;
        }
    }
}

/* The capture of the bytes of a scalar (line or bulk) being read. */
static void cap_scalar(struct sw_redis *r, const uint8_t *p, size_t n)
{
    if (r->depth == 0) {
        if (r->top_type == '-' || r->top_type == '!')
            sw_db_cap_put(r->msg, SW_DB_MSG_MAX, &r->msg_len, &r->msg_cut, p, n);
    } else if (r->depth == 1 && r->top_idx == 0 && (r->top_type == '*' || r->top_type == '>') &&
               (r->stype == '$' || r->stype == '+')) {
        size_t room = r->word_len < SW_REDIS_WORD_MAX - 1 ? SW_REDIS_WORD_MAX - 1 - r->word_len : 0;
        size_t k = n < room ? n : room;
        for (size_t i = 0; i < k; i++) {
            uint8_t c = p[i];
            r->word[r->word_len + i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        }
        r->word_len += (uint32_t)k;
        if (k < n)
            r->word_cut = true;
    } else if (r->depth == 1 && r->top_idx == 2 && r->stype == ':') {
        for (size_t i = 0; i < n; i++) {
            if (p[i] >= '0' && p[i] <= '9' && r->subcount < (1LL << 40))
                r->subcount = (r->subcount < 0 ? 0 : r->subcount * 10) + (p[i] - '0');
        }
    }
}

/*
 * The usual reply: a whole top-level simple string, error, integer or bulk string in the bytes
 * at hand, read in one pass. Returns its bytes, or 0 (the state machine reads it).
 */
static size_t fast_reply(struct sw_redis *r, const uint8_t *p, size_t n)
{
    uint8_t t = p[0];
    if (t == '$') {
        size_t i = 1;
        int64_t l = 0;
        while (i < n && i < 12 && p[i] >= '0' && p[i] <= '9')
            l = l * 10 + (p[i++] - '0');
        if (i == 1) {
            if (n >= 5 && p[1] == '-' && p[2] == '1' && p[3] == '\r' && p[4] == '\n')
                return 5; /* a null bulk */
            return 0;
        }
        if (i + 1 >= n || p[i] != '\r' || p[i + 1] != '\n' || l > BULK_MAX)
            return 0;
        i += 2;
        if ((uint64_t)l + 2 > n - i || p[i + l] != '\r' || p[i + l + 1] != '\n')
            return 0;
        return i + (size_t)l + 2;
    }
    if (t != '+' && t != '-' && t != ':')
        return 0;
    const uint8_t *cr = memchr(p + 1, '\r', n - 1);
    if (!cr || (size_t)(cr - p) + 1 >= n || cr[1] != '\n')
        return 0;
    if (t == '-')
        sw_db_cap_put(r->msg, SW_DB_MSG_MAX, &r->msg_len, &r->msg_cut, p + 1,
                      (size_t)(cr - (p + 1)));
    return (size_t)(cr - p) + 2;
}

static size_t feed_rep(struct sw_redis *r, const uint8_t *buf, size_t len, struct sw_db_ev *ev)
{
    size_t i = 0;
    while (i < len) {
        uint8_t c = buf[i];
        switch (r->sst) {
        case S_TYPE:
            if (r->depth == 0 && !r->top_open) {
                r->msg_len = 0;
                r->msg_cut = false;
                r->msg[0] = '\0';
                size_t used = fast_reply(r, buf + i, len - i);
                if (used) {
                    r->top_type = c;
                    r->word_len = 0;
                    r->word_cut = false;
                    r->top_open = true;
                    return reply_done(r, ev, i + used);
                }
            }
            if (!r->top_open && r->depth == 0) {
                r->top_open = true;
                r->top_type = c;
                r->top_idx = 0;
                r->word_len = 0;
                r->word_cut = false;
                r->msg_len = 0;
                r->msg_cut = false;
                r->msg[0] = '\0';
                r->subcount = -1;
            }
            r->stype = c;
            i++;
            switch (c) {
            case '+':
            case '-':
            case ':':
            case '_':
            case ',':
            case '#':
            case '(':
                r->sst = S_LINE;
                break;
            case '$':
            case '!':
            case '=':
            case '*':
            case '%':
            case '~':
            case '>':
            case '|':
                r->sst = S_LEN;
                r->s_num = 0;
                r->s_digits = 0;
                r->s_neg = false;
                break;
            default:
                return give_up(r, ev, "redis: a reply that is not RESP", i - 1);
            }
            if (c == '|' && r->depth == 0)
                r->top_type = 0; /* an attribute is not the reply */
            break;
        case S_LINE: {
            const uint8_t *cr = memchr(buf + i, '\r', len - i);
            size_t k = cr ? (size_t)(cr - (buf + i)) : len - i;
            cap_scalar(r, buf + i, k);
            i += k;
            if (cr) {
                r->sst = S_LINE_LF;
                i++;
            }
            break;
        }
        case S_LINE_LF:
            if (c != '\n')
                return give_up(r, ev, "redis: bad line end in a reply", i);
            i++;
            r->sst = S_TYPE;
            {
                size_t at = value_done(r, ev, i);
                if (ev->type != SW_DB_EV_NONE)
                    return at;
            }
            break;
        case S_LEN:
            if (c >= '0' && c <= '9' && r->s_digits < 18) {
                r->s_num = r->s_num * 10 + (c - '0');
                r->s_digits++;
                i++;
            } else if (c == '-' && r->s_digits == 0 && !r->s_neg) {
                r->s_neg = true;
                i++;
            } else if (c == '\r' && r->s_digits > 0) {
                r->sst = S_LEN_LF;
                i++;
            } else if (c == '?') {
                return give_up(r, ev, "redis: RESP3 streamed value", i);
            } else {
                return give_up(r, ev, "redis: bad length in a reply", i);
            }
            break;
        case S_LEN_LF: {
            if (c != '\n')
                return give_up(r, ev, "redis: bad line end in a reply", i);
            i++;
            uint8_t t = r->stype;
            bool agg = t == '*' || t == '%' || t == '~' || t == '>' || t == '|';
            if (r->s_neg) {
                if (r->s_num != 1 || (t != '$' && t != '*'))
                    return give_up(r, ev, "redis: bad negative length in a reply", i);
                r->sst = S_TYPE; /* RESP2 null bulk or null array */
            } else if (!agg) {
                if (r->s_num > BULK_MAX)
                    return give_up(r, ev, "redis: bulk reply too long", i);
                r->s_bulk = r->s_num;
                r->sst = S_BULK;
                break;
            } else {
                int64_t n = r->s_num;
                if (n > AGG_MAX)
                    return give_up(r, ev, "redis: aggregate too long", i);
                if (t == '%' || t == '|')
                    n *= 2;
                r->sst = S_TYPE;
                if (n > 0) {
                    if (r->depth >= SW_REDIS_DEPTH)
                        return give_up(r, ev, "redis: reply nested too deep", i);
                    r->frame[r->depth].rem = n;
                    r->frame[r->depth].attr = t == '|';
                    r->depth++;
                    break;
                }
                if (t == '|')
                    return give_up(r, ev, "redis: empty attribute", i);
            }
            size_t at = value_done(r, ev, i);
            if (ev->type != SW_DB_EV_NONE)
                return at;
            break;
        }
        case S_BULK:
        case S_BULK_CR:
        case S_BULK_LF: {
            size_t body;
            bool end, bad;
            size_t k = bulk_take(&r->sst, S_BULK, &r->s_bulk, buf + i, len - i, &body, &end, &bad);
            if (body)
                cap_scalar(r, buf + i, body);
            i += k;
            if (bad)
                return give_up(r, ev, "redis: bulk reply not followed by CRLF", i);
            if (end) {
                r->sst = S_TYPE;
                size_t at = value_done(r, ev, i);
                if (ev->type != SW_DB_EV_NONE)
                    return at;
            }
            break;
        }
        default:
            return give_up(r, ev, "redis: internal state", i);
        }
    }
    return len;
}

size_t sw_redis_feed(struct sw_redis *r, enum sw_db_dir dir, const uint8_t *buf, size_t len,
                     struct sw_db_ev *ev)
{
    sw_db_ev_clear(ev);
    if (SW_UNLIKELY(r->done))
        return len;
    if (SW_UNLIKELY(r->giveup_next))
        return give_up(r, ev, r->why, 0);
    return dir == SW_DB_TO_SERVER ? feed_req(r, buf, len, ev) : feed_rep(r, buf, len, ev);
}
