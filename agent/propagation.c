/*
 * propagation.c - sw8, sw8-correlation and sw8-x (SkyWalking cross-process propagation v3).
 *
 * Rules: runs on application threads: no allocation, no syscall, no lock, no logging (a bad
 * header is normal traffic, not an agent error). All input is untrusted: every field is
 * length-checked against its output buffer, and anything malformed makes the result invalid.
 */
#include "common.h"

#include "propagation.h"

#include <string.h>

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/*
 * Tables for the hot paths (an exit's sw8 is ~280 base64 characters, an entry's as many to
 * decode): b64_pair[v] is the two characters of the 12 bits v (little-endian: the first in the
 * low byte); B64V(c) is the value of character c or -1 (also for '-', '_' and '='), made into
 * the decoder's tables below.
 */
#define B64C(v)                                                                                    \
    ((v) < 26    ? 'A' + (v)                                                                       \
     : (v) < 52  ? 'a' + (v)-26                                                                    \
     : (v) < 62  ? '0' + (v)-52                                                                    \
     : (v) == 62 ? '+'                                                                             \
                 : '/')
#define B64P(i) (uint16_t)(B64C((i) >> 6) | B64C((i)&63) << 8)
#define B64P4(i) B64P(i), B64P((i) + 1), B64P((i) + 2), B64P((i) + 3)
#define B64P16(i) B64P4(i), B64P4((i) + 4), B64P4((i) + 8), B64P4((i) + 12)
#define B64P64(i) B64P16(i), B64P16((i) + 16), B64P16((i) + 32), B64P16((i) + 48)
#define B64P256(i) B64P64(i), B64P64((i) + 64), B64P64((i) + 128), B64P64((i) + 192)
#define B64P1K(i) B64P256(i), B64P256((i) + 256), B64P256((i) + 512), B64P256((i) + 768)
static const uint16_t b64_pair[4096] = {B64P1K(0), B64P1K(1024), B64P1K(2048), B64P1K(3072)};

/* The cast: clang checks the conversion of every arm, also those a constant c never takes. */
#define B64V(c)                                                                                    \
    ((int8_t)((c) >= 'A' && (c) <= 'Z'   ? (c) - 'A'                                               \
              : (c) >= 'a' && (c) <= 'z' ? (c) - 'a' + 26                                          \
              : (c) >= '0' && (c) <= '9' ? (c) - '0' + 52                                          \
              : (c) == '+'               ? 62                                                      \
              : (c) == '/'               ? 63                                                      \
                                         : -1))

/*
 * The decoder's tables: b64_dK[c] is the value of character c shifted to its place in a group's
 * 24 bits (18, 12, 6, 0), or 0xff000000 for a character that is not in the alphabet: the OR of
 * a group's four has a byte above the 24 bits exactly when one of them is bad.
 */
#define B64D(c, sh) (B64V(c) < 0 ? 0xff000000u : (uint32_t)B64V(c) << (sh))
#define B64D4(c, sh) B64D(c, sh), B64D((c) + 1, sh), B64D((c) + 2, sh), B64D((c) + 3, sh)
#define B64D16(c, sh) B64D4(c, sh), B64D4((c) + 4, sh), B64D4((c) + 8, sh), B64D4((c) + 12, sh)
#define B64D64(c, sh)                                                                              \
    B64D16(c, sh), B64D16((c) + 16, sh), B64D16((c) + 32, sh), B64D16((c) + 48, sh)
#define B64D256(sh)                                                                                \
    {                                                                                              \
        B64D64(0, sh), B64D64(64, sh), B64D64(128, sh), B64D64(192, sh)                            \
    }
static const uint32_t b64_d0[256] = B64D256(18), b64_d1[256] = B64D256(12),
                      b64_d2[256] = B64D256(6), b64_d3[256] = B64D256(0);

/* Four bytes at p as a big-endian number, and the 24 bits w as three bytes at q plus one byte
 * that the caller overwrites (or owns). */
static inline uint32_t load_be32(const unsigned char *p)
{
    uint32_t x;
    memcpy(&x, p, 4);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    x = __builtin_bswap32(x);
#endif
    return x;
}

static inline void store_be24_4(unsigned char *q, uint32_t w)
{
    uint32_t x = w << 8;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    x = __builtin_bswap32(x);
#endif
    memcpy(q, &x, 4);
}

/* The two characters pairs a and b (b64_pair) as four bytes at out. */
static inline void store_pairs(char *out, uint16_t a, uint16_t b)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint32_t x = (uint32_t)a | (uint32_t)b << 16;
    memcpy(out, &x, 4);
#else
    char c[4] = {(char)(a & 0xff), (char)(a >> 8), (char)(b & 0xff), (char)(b >> 8)};
    memcpy(out, c, 4);
#endif
}

SW_HOT long sw_b64_encode(const void *src, size_t len, char *out, size_t cap)
{
    const unsigned char *p = src;
    size_t need = (len + 2) / 3 * 4;
    size_t o = 0, i = 0;

    if (len > ((size_t)-1) / 2 || need > cap)
        return -1;
    /* Groups of three bytes read as four (while a fourth is there): two table lookups, one
     * four-byte store each. */
    for (; len - i >= 4; i += 3, o += 4) {
        uint32_t v = load_be32(p + i);
        store_pairs(out + o, b64_pair[v >> 20], b64_pair[(v >> 8) & 0xfff]);
    }
    if (len - i == 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        store_pairs(out + o, b64_pair[v >> 12], b64_pair[v & 0xfff]);
        i += 3;
        o += 4;
    }
    if (i < len) { /* one or two bytes left: padded with '=' */
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0u);
        out[o] = b64_alphabet[(v >> 18) & 63];
        out[o + 1] = b64_alphabet[(v >> 12) & 63];
        out[o + 2] = i + 1 < len ? b64_alphabet[(v >> 6) & 63] : '=';
        out[o + 3] = '=';
        o += 4;
    }
    if (o < cap)
        out[o] = '\0';
    return (long)o;
}

long sw_b64_decode(const char *src, size_t len, void *out, size_t cap)
{
    const unsigned char *s = (const unsigned char *)src;
    unsigned char *q = out;
    size_t o = 0;

    if (len % 4 != 0)
        return -1; /* unpadded input is rejected */
    if (len == 0)
        return 0;
    /* Every group but the last: four lookups, one check for a bad character, one four-byte
     * store (its fourth byte is the last group's first, so the body plus one byte must fit:
     * a result that does not is rejected anyway). */
    size_t body = len - 4;
    if (body / 4 * 3 + 1 > cap)
        return -1;
    size_t i = 0;
    for (; body - i >= 8; i += 8, o += 6) { /* two groups at a time: one check */
        uint32_t w = b64_d0[s[i]] | b64_d1[s[i + 1]] | b64_d2[s[i + 2]] | b64_d3[s[i + 3]];
        uint32_t x = b64_d0[s[i + 4]] | b64_d1[s[i + 5]] | b64_d2[s[i + 6]] | b64_d3[s[i + 7]];
        if ((w | x) >> 24)
            return -1;
        store_be24_4(q + o, w);
        store_be24_4(q + o + 3, x);
    }
    for (; i < body; i += 4, o += 3) {
        uint32_t w = b64_d0[s[i]] | b64_d1[s[i + 1]] | b64_d2[s[i + 2]] | b64_d3[s[i + 3]];
        if (w >> 24)
            return -1;
        store_be24_4(q + o, w);
    }
    /* The last group: '=' only as its fourth, or third and fourth, characters ('=' is a bad
     * character to the tables, so one anywhere else is rejected). */
    const unsigned char *t = s + body;
    uint32_t w = b64_d0[t[0]] | b64_d1[t[1]];
    size_t n = 1;
    if (t[3] != '=') {
        w |= b64_d2[t[2]] | b64_d3[t[3]];
        n = 3;
    } else if (t[2] != '=') {
        w |= b64_d2[t[2]];
        n = 2;
    }
    if ((w >> 24) || o + n > cap)
        return -1;
    q[o++] = (unsigned char)(w >> 16);
    if (n > 1)
        q[o++] = (unsigned char)(w >> 8);
    if (n > 2)
        q[o++] = (unsigned char)w;
    return (long)o;
}

/*
 * Decodes one base64 field into a NUL-terminated string of at most cap - 1 bytes; returns its
 * length, or -1 for an empty field, bad base64, a result that does not fit, or a decoded NUL.
 */
static long decode_field(const char *s, size_t len, char *out, size_t cap)
{
    if (len == 0 || cap == 0)
        return -1;
    long n = sw_b64_decode(s, len, out, cap - 1);
    if (n <= 0)
        return -1;
    if (memchr(out, '\0', (size_t)n) != NULL)
        return -1;
    out[n] = '\0';
    return n;
}

/* Parses a non-negative decimal int32 (digits only). */
static bool parse_span_id(const char *s, size_t len, int32_t *out)
{
    int64_t v = 0;

    if (len == 0 || len > 10)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v > INT32_MAX)
        return false;
    *out = (int32_t)v;
    return true;
}

void sw_sw8_decode(const char *value, size_t len, struct sw_sw8 *out)
{
    const char *f[8];
    size_t fl[8];
    int n = 0;

    if (value == NULL || len == 0)
        goto bad;
    /* The eight fields, split at '-' (memchr: an sw8 is a few hundred bytes). */
    for (const char *p = value, *e = value + len;;) {
        const char *d = memchr(p, '-', (size_t)(e - p));
        if (n == 8)
            goto bad; /* more than 8 fields */
        f[n] = p;
        fl[n++] = (size_t)((d ? d : e) - p);
        if (!d)
            break;
        p = d + 1;
    }
    if (n != 8)
        goto bad;

    /* Every field is written on success (no clearing first: the struct is ~700 bytes). */
    char *dst[6] = {out->trace_id,        out->parent_segment_id, out->parent_service,
                    out->parent_instance, out->parent_endpoint,   out->address};
    static const size_t cap[6] = {SW_ID_MAX,        SW_ID_MAX,      SW_PROP_NAME_MAX,
                                  SW_PROP_NAME_MAX, SW_PROP_EP_MAX, SW_PROP_ADDR_MAX};
    static const uint8_t field[6] = {1, 2, 4, 5, 6, 7};
    if (!parse_span_id(f[3], fl[3], &out->parent_span_id))
        goto bad;
    for (int i = 0; i < 6; i++) {
        long k = decode_field(f[field[i]], fl[field[i]], dst[i], cap[i]);
        if (k < 0)
            goto bad;
        out->len[i] = (uint16_t)k;
    }
    out->sample = fl[0] == 1 && f[0][0] == '1';
    out->valid = true;
    return;
bad:
    memset(out, 0, sizeof(*out));
}

/* Appends `s` base64-encoded plus an optional '-' separator. */
SW_HOT static bool put_b64(char *buf, size_t cap, size_t *o, const char *s, bool dash)
{
    size_t len = s ? strlen(s) : 0;
    if (len == 0)
        return false;
    long n = sw_b64_encode(s, len, buf + *o, cap - *o);
    if (n < 0)
        return false;
    *o += (size_t)n;
    if (dash) {
        if (*o >= cap)
            return false;
        buf[(*o)++] = '-';
    }
    return true;
}

size_t sw_sw8_svc_inst(char *out, size_t cap, const char *service, const char *instance)
{
    size_t o = 0;
    if (!put_b64(out, cap, &o, service, true) || !put_b64(out, cap, &o, instance, true))
        return 0;
    return o;
}

/* sw8 from its span id on (the ids' fields and their '-' are already in buf[0..o)). */
SW_HOT static size_t sw8_tail(char *buf, size_t cap, size_t o, int32_t span_id,
                              const char *svc_inst, size_t svc_inst_len, const char *endpoint,
                              const char *address)
{
    char num[12];
    int nl = 0;
    uint32_t v = (uint32_t)span_id;
    if (span_id < 0 || svc_inst_len == 0)
        return 0;
    do {
        num[nl++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (o + (size_t)nl + 1 + svc_inst_len > cap)
        return 0;
    while (nl)
        buf[o++] = num[--nl];
    buf[o++] = '-';
    memcpy(buf + o, svc_inst, svc_inst_len);
    o += svc_inst_len;
    if (!put_b64(buf, cap, &o, endpoint, true) || !put_b64(buf, cap, &o, address, false))
        return 0;
    return o;
}

SW_HOT size_t sw_sw8_encode_pre(char *buf, size_t cap, const char *trace_b64, size_t trace_b64_len,
                                const char *seg_b64, size_t seg_b64_len, int32_t span_id,
                                const char *svc_inst, size_t svc_inst_len, const char *endpoint,
                                const char *address)
{
    size_t o = 0;
    if (trace_b64_len == 0 || seg_b64_len == 0 || 4 + trace_b64_len + seg_b64_len > cap)
        return 0;
    buf[o++] = '1';
    buf[o++] = '-';
    memcpy(buf + o, trace_b64, trace_b64_len);
    o += trace_b64_len;
    buf[o++] = '-';
    memcpy(buf + o, seg_b64, seg_b64_len);
    o += seg_b64_len;
    buf[o++] = '-';
    return sw8_tail(buf, cap, o, span_id, svc_inst, svc_inst_len, endpoint, address);
}

size_t sw_sw8_encode(char *buf, size_t cap, const char *trace_id, const char *segment_id,
                     int32_t span_id, const char *service, const char *instance,
                     const char *endpoint, const char *address)
{
    char si[2 * (SW_PROP_NAME_MAX / 3 + 1) * 4 + 4];
    size_t n = sw_sw8_svc_inst(si, sizeof(si), service, instance), o = 0;
    if (cap < 2)
        return 0;
    buf[o++] = '1';
    buf[o++] = '-';
    if (!put_b64(buf, cap, &o, trace_id, true) || !put_b64(buf, cap, &o, segment_id, true))
        return 0;
    return sw8_tail(buf, cap, o, span_id, si, n, endpoint, address);
}

static bool is_ows(char ch)
{
    return ch == ' ' || ch == '\t';
}

size_t sw_correlation_filter(const char *value, size_t len, int max_elems, int max_value_len,
                             char *out, size_t cap)
{
    size_t o = 0;
    int kept = 0;
    size_t i = 0;

    if (cap == 0)
        return 0;
    out[0] = '\0';
    if (value == NULL || max_elems <= 0 || max_value_len <= 0)
        return 0;
    while (i < len && kept < max_elems) {
        size_t b = i;
        while (i < len && value[i] != ',')
            i++;
        size_t e = i;
        i++; /* skip the ',' */
        while (b < e && is_ows(value[b]))
            b++;
        while (e > b && is_ows(value[e - 1]))
            e--;
        const char *item = value + b;
        size_t il = e - b;
        const char *colon = memchr(item, ':', il);
        if (colon == NULL || memchr(colon + 1, ':', il - (size_t)(colon - item) - 1) != NULL)
            continue; /* not exactly 2 parts */
        size_t kl = (size_t)(colon - item);
        size_t vl = il - kl - 1;
        unsigned char tmp[SW_CORR_MAX];
        if (kl == 0 || vl == 0 || sw_b64_decode(item, kl, tmp, sizeof(tmp)) <= 0)
            continue;
        long dv = sw_b64_decode(colon + 1, vl, tmp, sizeof(tmp));
        if (dv <= 0 || dv > max_value_len)
            continue;
        size_t need = il + (kept ? 1 : 0);
        if (o + need + 1 > cap)
            break;
        if (kept)
            out[o++] = ',';
        memcpy(out + o, item, il);
        o += il;
        kept++;
    }
    out[o] = '\0';
    return o;
}

void sw_sw8x_decode(const char *value, size_t len, struct sw_sw8x *out)
{
    size_t i = 0;
    int field = 0;

    out->skip_analysis = false;
    out->send_time_ms = 0;
    if (value == NULL)
        return;
    while (i <= len && field < 2) {
        size_t b = i;
        while (i < len && value[i] != '-')
            i++;
        size_t e = i;
        while (b < e && is_ows(value[b]))
            b++;
        while (e > b && is_ows(value[e - 1]))
            e--;
        if (field == 0) {
            out->skip_analysis = e - b == 1 && value[b] == '1';
        } else if (e > b && e - b <= 18) {
            int64_t v = 0;
            size_t k;
            for (k = b; k < e && value[k] >= '0' && value[k] <= '9'; k++)
                v = v * 10 + (value[k] - '0');
            if (k == e)
                out->send_time_ms = v;
        }
        field++;
        i++; /* skip the '-' */
    }
}
