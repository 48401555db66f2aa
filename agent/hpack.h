/*
 * hpack.h - a streaming HPACK decoder (RFC 7541) in fixed memory, for the HTTP/2 module
 * (proto_h2.c): one per connection and direction, inside the module's per-connection state.
 *
 * Runs on application threads under the connection's lock: no malloc, no stdio, no syscall.
 * A header block may arrive in pieces split anywhere (frames, calls); every field updates the
 * dynamic table exactly as the peer's decoder does, but only the values of the few fields the
 * tracer reads (enum sw_hk) are kept: in the table (cut to 255 bytes, in a small store; a value
 * that finds no room there is "lost": a later reference to it reads as absent) and, for the
 * block being decoded, in the block's captures. Every other field costs its size only.
 *
 * Limits (docs/http2.md): a dynamic table of at most SW_HPACK_TABLE_MAX (4096) bytes, HPACK's
 * default; a size update above it (a peer that advertised a larger table and uses it) is
 * SW_HPACK_E_TABLE: the connection stops being followed, counted. Header lists above
 * SW_HPACK_LIST_MAX decoded bytes are SW_HPACK_E_LIST.
 */
#ifndef SW_HPACK_H
#define SW_HPACK_H

#include "common.h"

#include <stddef.h>
#include <stdint.h>

#define SW_HPACK_TABLE_MAX 4096u         /* dynamic table bytes we can follow */
#define SW_HPACK_ENTRIES (4096u / 32u)   /* entries it can hold (each counts 32 + its bytes) */
#define SW_HPACK_VSTORE 512u             /* bytes of kept values of table entries */
#define SW_HPACK_ARENA 1216u             /* bytes of a block's captured values */
#define SW_HPACK_LIST_MAX (256u * 1024u) /* decoded header list bytes of one block */

/* The fields whose values are kept. */
enum sw_hk {
    SW_HK_OTHER = 0,
    SW_HK_METHOD,
    SW_HK_PATH,
    SW_HK_AUTHORITY,
    SW_HK_STATUS,
    SW_HK_CTYPE,
    SW_HK_HOST,
    SW_HK_GRPC_STATUS,
    SW_HK_GRPC_MESSAGE,
    SW_HK_SW8,
    SW_HK_CORR,
    SW_HK_SW8X,
    SW_HK_N
};

enum sw_hpack_err {
    SW_HPACK_OK = 0,
    SW_HPACK_E_DECODE = -1, /* not valid HPACK (bad index, integer, Huffman, size update) */
    SW_HPACK_E_TABLE = -2,  /* a dynamic table larger than SW_HPACK_TABLE_MAX */
    SW_HPACK_E_LIST = -3,   /* a header list larger than SW_HPACK_LIST_MAX */
};

struct sw_hpack_ent {
    uint16_t sz;   /* HPACK size: name + value + 32 */
    uint16_t nlen; /* name bytes (a reference to the name needs its length) */
    uint16_t voff; /* kept value in vals[] (ring) */
    uint8_t kind;  /* enum sw_hk, | 0x80: its value was not kept (lost) */
    uint8_t vlen;  /* kept value bytes */
};

struct sw_hpack {
    /* the dynamic table: ent[(head + i) % SW_HPACK_ENTRIES] is dynamic index i + 1 */
    uint16_t size, max, limit; /* bytes in use, current maximum, the decoder side's SETTINGS */
    uint8_t n, head;
    uint16_t vused, vend; /* value store ring: bytes in use, where the next one goes */
    /* the field being decoded (across pieces) */
    uint8_t st;                     /* decoder state (hpack.c) */
    uint8_t rep;                    /* representation */
    uint8_t fkind;                  /* kind of the field's name */
    uint8_t hstate;                 /* Huffman state */
    bool huff, hacc;                /* string is Huffman coded; it may end here */
    bool first;                     /* nothing but size updates decoded in this block yet */
    bool nover;                     /* the literal name did not fit nbuf */
    uint8_t ishift, nlen_b, iphase; /* integer: shift, phase; a name is being decoded */
    uint8_t kcap;                   /* capture: the value goes to the arena (0: no) */
    uint32_t ival;                  /* integer being decoded */
    uint32_t slen;                  /* string bytes left */
    uint32_t dlen;                  /* decoded bytes of the string so far */
    uint32_t fnlen;                 /* the field's name length (decoded) */
    uint32_t list; /* decoded header list bytes of this block (name + value + 32) */
    char nbuf[20];
    /* the block's captures: value of kind k at cptr[k] (NULL: none), clen[k] bytes; in the
     * arena (decoded literals), the static table or vals[] (a table entry's kept value) */
    const char *cptr[SW_HK_N];
    uint16_t clen[SW_HK_N];
    uint16_t aused;
    bool ccut; /* the value being captured did not fit (sw8-like: then absent) */
    struct sw_hpack_ent ent[SW_HPACK_ENTRIES];
    char vals[SW_HPACK_VSTORE];
    char arena[SW_HPACK_ARENA];
};

/* Initialises a decoder (table empty, size 4096, SETTINGS limit 4096). */
void sw_hpack_init(struct sw_hpack *d);

/* The decoder side advertised SETTINGS_HEADER_TABLE_SIZE `v`: size updates up to it are valid. */
void sw_hpack_set_limit(struct sw_hpack *d, uint32_t v);

/* A header block begins: the captures are cleared. */
void sw_hpack_begin(struct sw_hpack *d);

/* Decodes the next `len` bytes of the block. Returns SW_HPACK_OK or an error. */
int sw_hpack_feed(struct sw_hpack *d, const unsigned char *p, size_t len);

/* The block ends: an error when a field is incomplete. */
int sw_hpack_end(struct sw_hpack *d);

/* The captured value of kind k in the block just decoded (NULL, *len 0: absent). */
static inline const char *sw_hpack_get(const struct sw_hpack *d, enum sw_hk k, size_t *len)
{
    *len = d->cptr[k] ? d->clen[k] : 0;
    return d->cptr[k];
}

/* The decoded header list size of the block (name + value + 32 per field). */
static inline uint32_t sw_hpack_list(const struct sw_hpack *d)
{
    return d->list;
}

#endif /* SW_HPACK_H */
