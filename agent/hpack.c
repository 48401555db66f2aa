/*
 * hpack.c - the streaming HPACK decoder of hpack.h (RFC 7541): integers, strings (raw and
 * Huffman, by a nibble state machine generated into hpack_huff.h), the static and dynamic
 * tables, size updates. Runs on application threads under the connection's lock: no malloc, no
 * stdio, no syscall; fixed memory (struct sw_hpack).
 */
#include "common.h"

#include "hpack.h"
#include "hpack_huff.h"

#include <string.h>

enum { ST_REP, ST_INT, ST_SHDR, ST_SBODY };
enum { R_INDEXED, R_LIT_INC, R_LIT, R_SIZE };       /* representations */
enum { P_INDEX, P_LITIDX, P_SIZE, P_NLEN, P_VLEN }; /* what an integer is (rep's phase) */

/* The static table (RFC 7541 Appendix A): name length, value length, kind, value. */
#define HK_OTHER SW_HK_OTHER
#define HK_METHOD SW_HK_METHOD
#define HK_PATH SW_HK_PATH
#define HK_AUTHORITY SW_HK_AUTHORITY
#define HK_STATUS SW_HK_STATUS
#define HK_CTYPE SW_HK_CTYPE
#define HK_HOST SW_HK_HOST
static const struct {
    uint8_t nlen, vlen, kind;
    const char *val;
} stab[61] = {
    {10, 0, HK_AUTHORITY, ""},           /* 1 :authority */
    {7, 3, HK_METHOD, "GET"},            /* 2 :method */
    {7, 4, HK_METHOD, "POST"},           /* 3 :method */
    {5, 1, HK_PATH, "/"},                /* 4 :path */
    {5, 11, HK_PATH, "/index.html"},     /* 5 :path */
    {7, 4, HK_OTHER, "http"},            /* 6 :scheme */
    {7, 5, HK_OTHER, "https"},           /* 7 :scheme */
    {7, 3, HK_STATUS, "200"},            /* 8 :status */
    {7, 3, HK_STATUS, "204"},            /* 9 :status */
    {7, 3, HK_STATUS, "206"},            /* 10 :status */
    {7, 3, HK_STATUS, "304"},            /* 11 :status */
    {7, 3, HK_STATUS, "400"},            /* 12 :status */
    {7, 3, HK_STATUS, "404"},            /* 13 :status */
    {7, 3, HK_STATUS, "500"},            /* 14 :status */
    {14, 0, HK_OTHER, ""},               /* 15 accept-charset */
    {15, 13, HK_OTHER, "gzip, deflate"}, /* 16 accept-encoding */
    {15, 0, HK_OTHER, ""},               /* 17 accept-language */
    {13, 0, HK_OTHER, ""},               /* 18 accept-ranges */
    {6, 0, HK_OTHER, ""},                /* 19 accept */
    {27, 0, HK_OTHER, ""},               /* 20 access-control-allow-origin */
    {3, 0, HK_OTHER, ""},                /* 21 age */
    {5, 0, HK_OTHER, ""},                /* 22 allow */
    {13, 0, HK_OTHER, ""},               /* 23 authorization */
    {13, 0, HK_OTHER, ""},               /* 24 cache-control */
    {19, 0, HK_OTHER, ""},               /* 25 content-disposition */
    {16, 0, HK_OTHER, ""},               /* 26 content-encoding */
    {16, 0, HK_OTHER, ""},               /* 27 content-language */
    {14, 0, HK_OTHER, ""},               /* 28 content-length */
    {16, 0, HK_OTHER, ""},               /* 29 content-location */
    {13, 0, HK_OTHER, ""},               /* 30 content-range */
    {12, 0, HK_CTYPE, ""},               /* 31 content-type */
    {6, 0, HK_OTHER, ""},                /* 32 cookie */
    {4, 0, HK_OTHER, ""},                /* 33 date */
    {4, 0, HK_OTHER, ""},                /* 34 etag */
    {6, 0, HK_OTHER, ""},                /* 35 expect */
    {7, 0, HK_OTHER, ""},                /* 36 expires */
    {4, 0, HK_OTHER, ""},                /* 37 from */
    {4, 0, HK_HOST, ""},                 /* 38 host */
    {8, 0, HK_OTHER, ""},                /* 39 if-match */
    {17, 0, HK_OTHER, ""},               /* 40 if-modified-since */
    {13, 0, HK_OTHER, ""},               /* 41 if-none-match */
    {8, 0, HK_OTHER, ""},                /* 42 if-range */
    {19, 0, HK_OTHER, ""},               /* 43 if-unmodified-since */
    {13, 0, HK_OTHER, ""},               /* 44 last-modified */
    {4, 0, HK_OTHER, ""},                /* 45 link */
    {8, 0, HK_OTHER, ""},                /* 46 location */
    {12, 0, HK_OTHER, ""},               /* 47 max-forwards */
    {18, 0, HK_OTHER, ""},               /* 48 proxy-authenticate */
    {19, 0, HK_OTHER, ""},               /* 49 proxy-authorization */
    {5, 0, HK_OTHER, ""},                /* 50 range */
    {7, 0, HK_OTHER, ""},                /* 51 referer */
    {7, 0, HK_OTHER, ""},                /* 52 refresh */
    {11, 0, HK_OTHER, ""},               /* 53 retry-after */
    {6, 0, HK_OTHER, ""},                /* 54 server */
    {10, 0, HK_OTHER, ""},               /* 55 set-cookie */
    {25, 0, HK_OTHER, ""},               /* 56 strict-transport-security */
    {17, 0, HK_OTHER, ""},               /* 57 transfer-encoding */
    {10, 0, HK_OTHER, ""},               /* 58 user-agent */
    {4, 0, HK_OTHER, ""},                /* 59 vary */
    {3, 0, HK_OTHER, ""},                /* 60 via */
    {16, 0, HK_OTHER, ""},               /* 61 www-authenticate */
};

/* Bytes of a value of each kind kept in a block's captures (and in the table). */
static const uint16_t kcap[SW_HK_N] = {
    [SW_HK_METHOD] = 16, [SW_HK_PATH] = 512, [SW_HK_AUTHORITY] = 256, [SW_HK_STATUS] = 4,
    [SW_HK_CTYPE] = 40,  [SW_HK_HOST] = 256, [SW_HK_GRPC_STATUS] = 4, [SW_HK_GRPC_MESSAGE] = 128,
    [SW_HK_SW8] = 1024,  [SW_HK_CORR] = 512, [SW_HK_SW8X] = 16,
};

/* Kinds whose values are useless cut: a cut one is absent. Of these, the last in a block wins
 * (a proxy forwards the sw8 it received and ours follows it: proto_h2.c), as gRPC's
 * Metadata.get takes the last; of the others, the first. */
static inline bool whole_only(unsigned k)
{
    return k >= SW_HK_SW8;
}

/* The kind of a literal name (n bytes, lower case as HTTP/2 requires). */
static uint8_t name_kind(const char *n, size_t l)
{
    switch (l) {
    case 3:
        return memcmp(n, "sw8", 3) == 0 ? SW_HK_SW8 : SW_HK_OTHER;
    case 4:
        return memcmp(n, "host", 4) == 0 ? SW_HK_HOST : SW_HK_OTHER;
    case 5:
        return memcmp(n, ":path", 5) == 0   ? SW_HK_PATH
               : memcmp(n, "sw8-x", 5) == 0 ? SW_HK_SW8X
                                            : SW_HK_OTHER;
    case 7:
        return memcmp(n, ":method", 7) == 0   ? SW_HK_METHOD
               : memcmp(n, ":status", 7) == 0 ? SW_HK_STATUS
                                              : SW_HK_OTHER;
    case 10:
        return memcmp(n, ":authority", 10) == 0 ? SW_HK_AUTHORITY : SW_HK_OTHER;
    case 11:
        return memcmp(n, "grpc-status", 11) == 0 ? SW_HK_GRPC_STATUS : SW_HK_OTHER;
    case 12:
        return memcmp(n, "content-type", 12) == 0   ? SW_HK_CTYPE
               : memcmp(n, "grpc-message", 12) == 0 ? SW_HK_GRPC_MESSAGE
                                                    : SW_HK_OTHER;
    case 15:
        return memcmp(n, "sw8-correlation", 15) == 0 ? SW_HK_CORR : SW_HK_OTHER;
    default:
        return SW_HK_OTHER;
    }
}

void sw_hpack_init(struct sw_hpack *d)
{
    d->size = d->n = d->head = 0;
    d->vused = d->vend = 0;
    d->max = d->limit = SW_HPACK_TABLE_MAX;
    sw_hpack_begin(d);
}

void sw_hpack_set_limit(struct sw_hpack *d, uint32_t v)
{
    d->limit = (uint16_t)(v > 0xffff ? 0xffff : v);
}

void sw_hpack_begin(struct sw_hpack *d)
{
    d->st = ST_REP;
    d->first = true;
    d->list = 0;
    d->aused = 0;
    memset(d->cptr, 0, sizeof(d->cptr));
}

/* Drops the oldest entry. */
static void evict(struct sw_hpack *d)
{
    const struct sw_hpack_ent *e = &d->ent[(d->head + d->n - 1) % SW_HPACK_ENTRIES];
    d->size = (uint16_t)(d->size - e->sz);
    d->vused = (uint16_t)(d->vused - e->vlen);
    d->n--;
}

/*
 * The block's captures that point into vals[] (a table entry's value taken by reference) and
 * whose bytes [at, at + n) (ring) are about to be overwritten (the entry was evicted in this
 * block): copied to the arena first (dropped when it is full).
 */
static void keep_captures(struct sw_hpack *d, size_t at, size_t n)
{
    for (unsigned k = 1; k < SW_HK_N; k++) {
        const char *p = d->cptr[k];
        if (!p || p < d->vals || p >= d->vals + SW_HPACK_VSTORE)
            continue;
        size_t o = (size_t)(p - d->vals), l = d->clen[k];
        /* overlap of [o, o + l) with [at, at + n) modulo the ring */
        size_t rel = (o + SW_HPACK_VSTORE - at) % SW_HPACK_VSTORE;
        size_t rel2 = (at + SW_HPACK_VSTORE - o) % SW_HPACK_VSTORE;
        if (rel >= n && rel2 >= l)
            continue;
        if (l > SW_HPACK_ARENA - d->aused) {
            d->cptr[k] = NULL;
            continue;
        }
        memcpy(d->arena + d->aused, p, l);
        d->cptr[k] = d->arena + d->aused;
        d->aused = (uint16_t)(d->aused + l);
    }
}

/* Adds an entry (name nlen bytes of kind `kind`, value vlen bytes; `v` its kept bytes, kv of
 * them, NULL: not kept). */
static void table_add(struct sw_hpack *d, uint32_t nlen, uint32_t vlen, uint8_t kind, const char *v,
                      size_t kv)
{
    uint32_t sz = nlen + vlen + 32;
    while (d->n && d->size + sz > d->max)
        evict(d);
    if (sz > d->max)
        return; /* larger than the table: it is left empty (RFC 7541 4.4) */
    d->head = (uint8_t)((d->head + SW_HPACK_ENTRIES - 1) % SW_HPACK_ENTRIES);
    d->n++;
    struct sw_hpack_ent *e = &d->ent[d->head];
    e->sz = (uint16_t)sz;
    e->nlen = (uint16_t)nlen;
    e->kind = kind;
    e->vlen = 0;
    e->voff = d->vend;
    d->size = (uint16_t)(d->size + sz);
    if (kind == SW_HK_OTHER)
        return;
    if (!v || kv != vlen || kv > 255 || d->vused + kv > SW_HPACK_VSTORE) {
        e->kind |= 0x80; /* its value is not kept */
        return;
    }
    keep_captures(d, d->vend, kv);
    size_t first = SW_HPACK_VSTORE - d->vend < kv ? SW_HPACK_VSTORE - d->vend : kv;
    memcpy(d->vals + d->vend, v, first);
    memcpy(d->vals, v + first, kv - first);
    e->vlen = (uint8_t)kv;
    d->vend = (uint16_t)((d->vend + kv) % SW_HPACK_VSTORE);
    d->vused = (uint16_t)(d->vused + kv);
}

/* Captures a value of kind k from the tables (the first of its kind in the block). */
static void capture_copy(struct sw_hpack *d, uint8_t k, const char *v, size_t vl, bool ring,
                         uint16_t voff)
{
    if (k == SW_HK_OTHER || (d->cptr[k] && !whole_only(k)))
        return;
    size_t cap = kcap[k];
    if (vl > cap) {
        if (whole_only(k))
            return;
        vl = cap;
    }
    d->clen[k] = (uint16_t)vl;
    if (!ring) { /* the static table's value */
        d->cptr[k] = v;
        return;
    }
    if (voff + vl <= SW_HPACK_VSTORE) { /* in one piece: by reference (see keep_captures) */
        d->cptr[k] = d->vals + voff;
        return;
    }
    if (vl > SW_HPACK_ARENA - d->aused)
        return;
    char *o = d->arena + d->aused;
    size_t first = SW_HPACK_VSTORE - voff;
    memcpy(o, d->vals + voff, first);
    memcpy(o + first, d->vals, vl - first);
    d->cptr[k] = o;
    d->aused = (uint16_t)(d->aused + vl);
}

/* An indexed field (index i >= 1). */
static int indexed(struct sw_hpack *d, uint32_t i)
{
    if (i == 0)
        return SW_HPACK_E_DECODE;
    if (i <= 61) {
        d->list += stab[i - 1].nlen + stab[i - 1].vlen + 32u;
        capture_copy(d, stab[i - 1].kind, stab[i - 1].val, stab[i - 1].vlen, false, 0);
        return SW_HPACK_OK;
    }
    if (i - 62 >= d->n)
        return SW_HPACK_E_DECODE;
    const struct sw_hpack_ent *e = &d->ent[(d->head + i - 62) % SW_HPACK_ENTRIES];
    d->list += e->sz;
    if (!(e->kind & 0x80))
        capture_copy(d, e->kind, NULL, e->vlen, true, e->voff);
    return SW_HPACK_OK;
}

/* A literal's name by index i (>= 1): its kind and length. */
static int name_ref(struct sw_hpack *d, uint32_t i)
{
    if (i == 0)
        return SW_HPACK_E_DECODE;
    if (i <= 61) {
        d->fkind = stab[i - 1].kind;
        d->fnlen = stab[i - 1].nlen;
        return SW_HPACK_OK;
    }
    if (i - 62 >= d->n)
        return SW_HPACK_E_DECODE;
    const struct sw_hpack_ent *e = &d->ent[(d->head + i - 62) % SW_HPACK_ENTRIES];
    d->fkind = e->kind & 0x7f;
    d->fnlen = e->nlen;
    return SW_HPACK_OK;
}

/* A string begins: first byte b (H flag, 7-bit length prefix). */
static void str_begin(struct sw_hpack *d, uint32_t len)
{
    d->slen = len;
    d->dlen = 0;
    d->hstate = 0;
    d->hacc = true;
    d->st = ST_SBODY;
}

/* The value string begins: decides whether it is captured. */
static void value_begin(struct sw_hpack *d)
{
    d->kcap = 0;
    d->ccut = false;
    uint8_t k = d->fkind;
    if (k != SW_HK_OTHER && (!d->cptr[k] || whole_only(k)) && d->aused < SW_HPACK_ARENA)
        d->kcap = 1;
}

/* One decoded byte of the current string. */
static inline void emit(struct sw_hpack *d, unsigned char ch)
{
    uint32_t at = d->dlen++;
    if (d->nlen_b) { /* the name */
        if (at < sizeof(d->nbuf))
            d->nbuf[at] = (char)ch;
        else
            d->nover = true;
    } else if (d->kcap) {
        uint32_t cap = kcap[d->fkind];
        if (cap > SW_HPACK_ARENA - d->aused)
            cap = SW_HPACK_ARENA - d->aused;
        if (at < cap)
            d->arena[d->aused + at] = (char)ch;
        else
            d->ccut = true;
    }
}

/* Decoded bytes of a raw string: emit() for `n` bytes at once. */
static void emit_raw(struct sw_hpack *d, const unsigned char *q, size_t n)
{
    uint32_t at = d->dlen;
    d->dlen += (uint32_t)n;
    char *dst;
    size_t room;
    if (d->nlen_b) {
        dst = d->nbuf;
        room = sizeof(d->nbuf);
    } else {
        uint32_t cap = kcap[d->fkind];
        if (cap > SW_HPACK_ARENA - d->aused)
            cap = SW_HPACK_ARENA - d->aused;
        dst = d->arena + d->aused;
        room = cap;
    }
    size_t k = at < room ? room - at : 0;
    if (k > n)
        k = n;
    memcpy(dst + at, q, k);
    if (k < n) {
        if (d->nlen_b)
            d->nover = true;
        else
            d->ccut = true;
    }
}

/* A field's value is complete: capture, table, list size. */
static int field_done(struct sw_hpack *d)
{
    uint32_t vlen = d->dlen;
    uint8_t k = d->fkind;
    const char *kept = NULL;
    size_t kv = 0;
    if (d->kcap) {
        size_t n = vlen;
        uint32_t cap = kcap[k];
        if (cap > SW_HPACK_ARENA - d->aused)
            cap = SW_HPACK_ARENA - d->aused;
        if (n > cap)
            n = cap;
        if (!(d->ccut && whole_only(k))) {
            d->cptr[k] = d->arena + d->aused;
            d->clen[k] = (uint16_t)n;
            kept = d->arena + d->aused;
            kv = n;
            d->aused = (uint16_t)(d->aused + n);
        }
    }
    d->list += d->fnlen + vlen + 32;
    if (d->list > SW_HPACK_LIST_MAX)
        return SW_HPACK_E_LIST;
    if (d->rep == R_LIT_INC)
        table_add(d, d->fnlen, vlen, k, kept, kv);
    d->st = ST_REP;
    return SW_HPACK_OK;
}

/* A string (name or value) is complete. */
static int str_done(struct sw_hpack *d)
{
    if (d->huff && !d->hacc)
        return SW_HPACK_E_DECODE;
    if (d->nlen_b) {
        d->fnlen = d->dlen;
        d->fkind = d->nover ? SW_HK_OTHER : name_kind(d->nbuf, d->dlen);
        d->nlen_b = 0;
        value_begin(d);
        d->st = ST_SHDR;
        return SW_HPACK_OK;
    }
    return field_done(d);
}

/* An integer is complete: what it means depends on the phase. */
static int int_done(struct sw_hpack *d, uint8_t phase, uint32_t v)
{
    int e;
    switch (phase) {
    case P_INDEX:
        d->first = false;
        e = indexed(d, v);
        d->st = ST_REP;
        return e;
    case P_LITIDX:
        d->first = false;
        if (v == 0) { /* a literal name follows */
            d->nlen_b = 1;
            d->nover = false;
            d->st = ST_SHDR;
            return SW_HPACK_OK;
        }
        e = name_ref(d, v);
        if (e)
            return e;
        d->nlen_b = 0;
        value_begin(d);
        d->st = ST_SHDR;
        return SW_HPACK_OK;
    case P_SIZE:
        if (!d->first)
            return SW_HPACK_E_DECODE; /* only at the start of a block (RFC 7541 4.2) */
        if (v > SW_HPACK_TABLE_MAX)
            return v > d->limit ? SW_HPACK_E_DECODE : SW_HPACK_E_TABLE;
        if (v > d->limit)
            return SW_HPACK_E_DECODE;
        d->max = (uint16_t)v;
        while (d->n && d->size > d->max)
            evict(d);
        d->st = ST_REP;
        return SW_HPACK_OK;
    default: /* P_NLEN, P_VLEN: a string's length */
        str_begin(d, v);
        if (!v)
            return str_done(d);
        return SW_HPACK_OK;
    }
}

#define PHASE(d) ((d)->rep == R_INDEXED ? P_INDEX : (d)->rep == R_SIZE ? P_SIZE : P_LITIDX)

int sw_hpack_feed(struct sw_hpack *d, const unsigned char *p, size_t len)
{
    size_t i = 0;
    int e;
    while (i < len) {
        switch (d->st) {
        case ST_REP: {
            unsigned b = p[i++];
            unsigned mask;
            if (b & 0x80) {
                d->rep = R_INDEXED;
                mask = 0x7f;
            } else if (b & 0x40) {
                d->rep = R_LIT_INC;
                mask = 0x3f;
            } else if (b & 0x20) {
                d->rep = R_SIZE;
                mask = 0x1f;
            } else {
                d->rep = R_LIT;
                mask = 0x0f;
            }
            uint32_t v = b & mask;
            if (v < mask) {
                if ((e = int_done(d, (uint8_t)PHASE(d), v)) != 0)
                    return e;
            } else {
                d->ival = v;
                d->ishift = 0;
                d->st = ST_INT;
                d->iphase = (uint8_t)PHASE(d);
            }
            break;
        }
        case ST_INT: {
            unsigned b = p[i++];
            if (d->ishift > 21)
                return SW_HPACK_E_DECODE; /* more than 2^28: no such size or index */
            d->ival += (uint32_t)(b & 0x7f) << d->ishift;
            d->ishift = (uint8_t)(d->ishift + 7);
            if (!(b & 0x80)) {
                if ((e = int_done(d, d->iphase, d->ival)) != 0)
                    return e;
            }
            break;
        }
        case ST_SHDR: {
            unsigned b = p[i++];
            d->huff = (b & 0x80) != 0;
            uint32_t v = b & 0x7f;
            uint8_t phase = d->nlen_b ? P_NLEN : P_VLEN;
            if (v < 0x7f) {
                if ((e = int_done(d, phase, v)) != 0)
                    return e;
            } else {
                d->ival = v;
                d->ishift = 0;
                d->st = ST_INT;
                d->iphase = phase;
            }
            break;
        }
        default: { /* ST_SBODY */
            size_t take = len - i < d->slen ? len - i : d->slen;
            const unsigned char *q = p + i;
            i += take;
            d->slen -= (uint32_t)take;
            bool want = d->nlen_b || d->kcap;
            if (!d->huff) {
                if (want)
                    emit_raw(d, q, take);
                else
                    d->dlen += (uint32_t)take;
            } else {
                unsigned s = d->hstate;
                unsigned fl = 0;
                for (size_t j = 0; j < take; j++) {
                    const unsigned char *t = sw_huff_fsm[s * 16 + (q[j] >> 4)];
                    if (t[2] & (SW_HUFF_FAIL | SW_HUFF_EMIT)) {
                        if (t[2] & SW_HUFF_FAIL)
                            return SW_HPACK_E_DECODE;
                        if (want)
                            emit(d, t[1]);
                        else
                            d->dlen++;
                    }
                    t = sw_huff_fsm[t[0] * 16 + (q[j] & 15)];
                    if (t[2] & (SW_HUFF_FAIL | SW_HUFF_EMIT)) {
                        if (t[2] & SW_HUFF_FAIL)
                            return SW_HPACK_E_DECODE;
                        if (want)
                            emit(d, t[1]);
                        else
                            d->dlen++;
                    }
                    s = t[0];
                    fl = t[2];
                }
                if (take) {
                    d->hstate = (uint8_t)s;
                    d->hacc = (fl & SW_HUFF_ACCEPT) != 0;
                }
            }
            if (d->dlen > SW_HPACK_LIST_MAX)
                return SW_HPACK_E_LIST;
            if (!d->slen && (e = str_done(d)) != 0)
                return e;
            break;
        }
        }
    }
    return SW_HPACK_OK;
}

int sw_hpack_end(struct sw_hpack *d)
{
    return d->st == ST_REP ? SW_HPACK_OK : SW_HPACK_E_DECODE;
}
