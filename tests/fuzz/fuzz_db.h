/*
 * fuzz_db.h - the libFuzzer harness shared by fuzz_db_redis.c, fuzz_db_pg.c and
 * fuzz_db_memcached.c (one target per parser; with replay_conf_prop.c a plain replay executable).
 *
 * Input: byte 0 seeds the split points and byte 1 bit 0 an option (PG: capture parameters);
 * the rest is a conversation of records { u8 direction (bit 0: 0 client writes, 1 client
 * reads), u8 length, bytes }. The conversation is fed twice: each record whole, and each record
 * cut at pseudo-random points (one byte at a time for short ones). Both runs must log the same
 * events; every call consumes at most what it was given and all of it when it reports nothing;
 * ENDs never outnumber STARTs (the caller's FIFO of spans could not hold them); strings stay
 * within their documented bounds; after GIVEUP nothing more is reported.
 *
 * Before including: FZ_STATE (struct type), FZ_RESET(st, opt), FZ_FEED(st, dir, b, n, ev).
 */
#include "common.h"

#include "proto_db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FZ_LOG_MAX 65536

struct fz_log {
    unsigned char buf[FZ_LOG_MAX];
    size_t len;
};

static FZ_STATE g_fz_st;

static void fz_die(const char *what)
{
    fprintf(stderr, "fuzz_db: invariant failed: %s\n", what);
    abort();
}

#define FZ_ASSERT(c)                                                                               \
    do {                                                                                           \
        if (!(c))                                                                                  \
            fz_die(#c);                                                                            \
    } while (0)

static void fz_put(struct fz_log *l, const void *p, size_t n)
{
    if (n > FZ_LOG_MAX - l->len)
        n = FZ_LOG_MAX - l->len;
    memcpy(l->buf + l->len, p, n);
    l->len += n;
}

static void fz_ev(struct fz_log *l, const struct sw_db_ev *ev, long *open, bool *gave_up)
{
    FZ_ASSERT(!*gave_up);
    FZ_ASSERT(ev->name && ev->text && ev->msg);
    FZ_ASSERT(ev->name_len < SW_DB_NAME_MAX || ev->type == SW_DB_EV_GIVEUP);
    FZ_ASSERT(ev->text_len < SW_DB_STMT_MAX);
    FZ_ASSERT(ev->msg_len < SW_DB_MSG_MAX);
    FZ_ASSERT(ev->op <= SW_DB_OP_WRITE);
    FZ_ASSERT(strnlen(ev->code, sizeof(ev->code)) < sizeof(ev->code));
    if (ev->params)
        FZ_ASSERT(ev->params_len < SW_DB_STMT_MAX);
    unsigned char t = (unsigned char)ev->type;
#ifdef FZ_DEBUG
    fprintf(stderr, "ev %d %.*s|%.*s err=%d skip=%d\n", ev->type, (int)ev->name_len, ev->name,
            (int)ev->text_len, ev->text, ev->error, ev->skipped);
#endif
    fz_put(l, &t, 1);
    if (ev->type == SW_DB_EV_START) {
        (*open)++;
        fz_put(l, ev->name, ev->name_len);
        fz_put(l, "|", 1);
        fz_put(l, ev->text, ev->text_len);
        if (ev->params)
            fz_put(l, ev->params, ev->params_len);
    } else if (ev->type == SW_DB_EV_END) {
        FZ_ASSERT(*open > 0);
        (*open)--;
        unsigned char e = (unsigned char)(ev->error | ev->skipped << 1);
        fz_put(l, &e, 1);
        fz_put(l, ev->msg, ev->msg_len);
        fz_put(l, ev->code, strlen(ev->code));
    } else {
        *gave_up = true;
    }
}

static void fz_run(const uint8_t *data, size_t size, bool split, uint8_t seed, bool opt,
                   struct fz_log *l)
{
    uint32_t x = seed * 2654435761u + 1u;
    long open = 0;
    bool gave_up = false;
    FZ_RESET(&g_fz_st, opt);
    size_t at = 0;
    while (at + 2 <= size) {
        int dir = data[at] & 1;
        size_t n = data[at + 1];
        at += 2;
        if (n > size - at)
            n = size - at;
        const uint8_t *b = data + at;
        at += n;
        size_t done = 0;
        while (done < n || n == 0) {
            size_t piece = n - done;
            if (split && piece > 1) {
                x = x * 1103515245u + 12345u;
                piece = n < 16 ? 1 : 1 + (x >> 8) % piece;
            }
            size_t off = 0;
            for (int guard = 0;; guard++) {
                FZ_ASSERT(guard < 100000);
                struct sw_db_ev ev;
                size_t used = FZ_FEED(&g_fz_st, dir, b + done + off, piece - off, &ev);
                FZ_ASSERT(used <= piece - off);
                off += used;
                if (ev.type == SW_DB_EV_NONE) {
                    FZ_ASSERT(off == piece);
                    break;
                }
                fz_ev(l, &ev, &open, &gave_up);
                if (ev.type == SW_DB_EV_GIVEUP) {
                    /* a given-up parser consumes everything and reports nothing */
                    struct sw_db_ev e2;
                    FZ_ASSERT(FZ_FEED(&g_fz_st, dir, b, n, &e2) == n);
                    FZ_ASSERT(e2.type == SW_DB_EV_NONE);
                    return;
                }
            }
            done += piece;
            if (n == 0)
                break;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct fz_log whole, cut;
    if (size < 2)
        return 0;
    whole.len = cut.len = 0;
    fz_run(data + 2, size - 2, false, data[0], data[1] & 1, &whole);
#ifdef FZ_DEBUG
    fprintf(stderr, "-- split\n");
#endif
    fz_run(data + 2, size - 2, true, data[0], data[1] & 1, &cut);
    FZ_ASSERT(whole.len == cut.len && memcmp(whole.buf, cut.buf, whole.len) == 0);
    return 0;
}
