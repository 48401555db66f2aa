/*
 * proto_memcached.h - incremental memcached text protocol (classic and meta commands) parsing
 * of one client connection, as proto_db.h events.
 *
 * Every command line (and its data block for set/add/replace/append/prepend/cas/ms) gets one
 * START when complete; its reply ends it: retrieval (get/gets/gat/gats) at END after any VALUE
 * blocks, stats at END, mg/ma at VA + data block or a status line, every other command at its
 * one reply line. ERROR, CLIENT_ERROR and SERVER_ERROR replies are errors. A command with
 * `noreply` ends at once (ok). The name is the command as sent, the key its first key.
 * Given up: the binary protocol, meta commands in quiet mode (`q`: replies are left out),
 * commands whose replies are streams or irregular (watch, lru_crawler, stats detail dump ...),
 * a reply with no command waiting or of the wrong shape, lines over 64 KiB.
 */
#ifndef SW_PROTO_MEMCACHED_H
#define SW_PROTO_MEMCACHED_H

#include "common.h"
#include "proto_db.h"

#define SW_MC_PENDING 32 /* runs of commands waiting for replies */
#define SW_MC_TOK 16     /* bytes kept of a short token */

struct sw_mc_pend {
    uint8_t kind; /* proto_memcached.c's M_* */
    uint32_t n;
};

struct sw_mc {
    /* Commands. */
    uint8_t cst;
    uint32_t line; /* bytes of the current line */
    uint32_t tok;  /* index of the current token */
    bool intok;
    char t[SW_MC_TOK]; /* the current token (cut) */
    uint32_t tlen;
    char name[SW_DB_NAME_MAX];
    uint32_t name_len;
    char key[SW_DB_KEY_MAX];
    uint32_t key_len;
    bool key_cut;
    uint8_t ckind;    /* kind of the command being read */
    bool cmeta;       /* ... a meta command */
    uint32_t key_tok; /* token index of its key */
    uint32_t len_tok; /* token index of its data length, 0 none */
    int64_t dlen;     /* data length */
    bool noreply, quiet, badnum;
    int64_t c_data; /* data block bytes still to come (+2 for CRLF) */
    /* Replies. */
    uint8_t sst;
    uint32_t sline;
    char st[SW_MC_TOK]; /* first token of the line */
    uint32_t stlen;
    uint32_t stok;
    bool sintok;
    int64_t snum; /* the length token of VALUE / VA */
    bool snum_ok;
    char msg[SW_DB_MSG_MAX];
    uint32_t msg_len;
    bool msg_cut;
    int64_t s_data;
    uint32_t end_n; /* ENDs to give at once (noreply commands) */
    struct sw_mc_pend pend[SW_MC_PENDING];
    uint8_t ph, pn;
    bool c_fresh, s_fresh; /* a new line begins: reset its captures first */
    bool done;
    const char *why;
};

void sw_mc_reset(struct sw_mc *m);

size_t sw_mc_feed(struct sw_mc *m, enum sw_db_dir dir, const uint8_t *buf, size_t len,
                  struct sw_db_ev *ev);

uint32_t sw_mc_pending(const struct sw_mc *m);

/* An event may come from a call with no bytes (proto_db.h). */
static inline bool sw_mc_more(const struct sw_mc *r)
{
    return r->end_n != 0;
}

#endif /* SW_PROTO_MEMCACHED_H */
