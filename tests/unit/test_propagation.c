/*
 * test_propagation.c - sw8 / sw8-correlation / sw8-x decoding and encoding, base64.
 */
#include "common.h"

#include "propagation.h"

#include "check.h"

#define SAMPLE                                                                                     \
    "1-M2YyYThjMWU5YjdkNGU2ZmExYjJjM2Q0ZTVmNjA3MTguNDUuMTcyNDU2Nzg5MDEyMzAwMDE=-"                  \
    "M2YyYThjMWU5YjdkNGU2ZmExYjJjM2Q0ZTVmNjA3MTguNDUuMTcyNDU2Nzg5MDEyMzAwMDA=-1-ZnJvbnRlbmQ=-"     \
    "ZjgxZDRmYWU3ZGVjMTFkMGE3NjUwMGEwYzkxZTZiZjZAMTAuMC4wLjU=-R0VUOi9hcGkvb3JkZXJz-"               \
    "YmFja2VuZDo4MDgw"

static bool decodes(const char *v)
{
    struct sw_sw8 h;
    sw_sw8_decode(v, strlen(v), &h);
    if (!h.valid)
        CHECK(h.trace_id[0] == '\0' && h.parent_service[0] == '\0');
    return h.valid;
}

static void test_reference_sample(void)
{
    struct sw_sw8 h;
    sw_sw8_decode(SAMPLE, strlen(SAMPLE), &h);
    CHECK(h.valid);
    CHECK(h.sample);
    CHECK_STR(h.trace_id, "3f2a8c1e9b7d4e6fa1b2c3d4e5f60718.45.17245678901230001");
    CHECK_STR(h.parent_segment_id, "3f2a8c1e9b7d4e6fa1b2c3d4e5f60718.45.17245678901230000");
    CHECK_EQ(h.parent_span_id, 1);
    CHECK_STR(h.parent_service, "frontend");
    CHECK_STR(h.parent_instance, "f81d4fae7dec11d0a76500a0c91e6bf6@10.0.0.5");
    CHECK_STR(h.parent_endpoint, "GET:/api/orders");
    CHECK_STR(h.address, "backend:8080");
}

static void test_round_trip(void)
{
    char buf[SW_SW8_MAX];
    size_t n = sw_sw8_encode(
        buf, sizeof(buf), "3f2a8c1e9b7d4e6fa1b2c3d4e5f60718.45.17245678901230001",
        "3f2a8c1e9b7d4e6fa1b2c3d4e5f60718.45.17245678901230000", 1, "frontend",
        "f81d4fae7dec11d0a76500a0c91e6bf6@10.0.0.5", "GET:/api/orders", "backend:8080");
    CHECK_EQ(n, strlen(SAMPLE));
    CHECK(memcmp(buf, SAMPLE, n) == 0);

    /* Every length of the string fields (all base64 padding cases), large span ids. */
    for (int len = 1; len < 60; len++) {
        char s[64];
        for (int i = 0; i < len; i++)
            s[i] = (char)('a' + (i * 7 + len) % 26);
        s[len] = '\0';
        int32_t span = len == 59 ? INT32_MAX : len;
        n = sw_sw8_encode(buf, sizeof(buf), s, s, span, s, s, s, s);
        CHECK(n > 0);
        struct sw_sw8 h;
        sw_sw8_decode(buf, n, &h);
        CHECK(h.valid);
        CHECK_STR(h.trace_id, s);
        CHECK_STR(h.parent_segment_id, s);
        CHECK_STR(h.parent_service, s);
        CHECK_STR(h.parent_instance, s);
        for (int i = 0; i < 6; i++)
            CHECK_EQ(h.len[i], len); /* the lengths kept with the strings */
        CHECK_STR(h.parent_endpoint, s);
        CHECK_STR(h.address, s);
        CHECK_EQ(h.parent_span_id, span);
    }
    /* Too small a buffer, or an empty field: nothing is encoded. */
    CHECK_EQ(sw_sw8_encode(buf, 41, "t", "s", 1, "svc", "inst", "ep", "addr"), 41);
    CHECK_EQ(sw_sw8_encode(buf, 40, "t", "s", 1, "svc", "inst", "ep", "addr"), 0);
    CHECK_EQ(sw_sw8_encode(buf, 20, "trace", "seg", 1, "svc", "inst", "ep", "addr"), 0);
    CHECK_EQ(sw_sw8_encode(buf, sizeof(buf), "t", "s", 1, "svc", "inst", "", "addr"), 0);
    CHECK_EQ(sw_sw8_encode(buf, sizeof(buf), "t", NULL, 1, "svc", "inst", "ep", "addr"), 0);
    CHECK_EQ(sw_sw8_encode(buf, sizeof(buf), "t", "s", -1, "svc", "inst", "ep", "addr"), 0);
}

static void test_flag_ignored(void)
{
    char v[sizeof(SAMPLE)];
    memcpy(v, SAMPLE, sizeof(SAMPLE));
    v[0] = '0';
    struct sw_sw8 h;
    sw_sw8_decode(v, strlen(v), &h);
    CHECK(h.valid); /* a valid sw8 forces sampling whatever its flag */
    CHECK(!h.sample);
}

static void test_malformed(void)
{
    CHECK(decodes(SAMPLE));
    CHECK(!decodes(""));
    CHECK(!decodes("-"));
    CHECK(!decodes("-------"));
    CHECK(!decodes("1-------"));
    /* 7 fields and 9 fields. */
    CHECK(!decodes("1-dA==-cw==-1-cw==-aQ==-ZQ=="));
    CHECK(decodes("1-dA==-cw==-1-cw==-aQ==-ZQ==-YQ=="));
    CHECK(!decodes("1-dA==-cw==-1-cw==-aQ==-ZQ==-YQ==-YQ=="));
    CHECK(!decodes("1-dA==-cw==-1-cw==-aQ==-ZQ==-YQ==-"));
    /* Empty fields. */
    CHECK(!decodes("1--cw==-1-cw==-aQ==-ZQ==-YQ=="));
    CHECK(!decodes("1-dA==--1-cw==-aQ==-ZQ==-YQ=="));
    CHECK(!decodes("1-dA==-cw==--cw==-aQ==-ZQ==-YQ=="));
    CHECK(!decodes("1-dA==-cw==-1--aQ==-ZQ==-YQ=="));
    CHECK(!decodes("1-dA==-cw==-1-cw==--ZQ==-YQ=="));
    CHECK(!decodes("1-dA==-cw==-1-cw==-aQ==--YQ=="));
    CHECK(!decodes("1-dA==-cw==-1-cw==-aQ==-ZQ==-"));
    /* Bad base64: unpadded, base64url characters, bad characters, data after padding. */
    CHECK(!decodes("1-dA-cw==-1-cw==-aQ==-ZQ==-YQ=="));
    CHECK(!decodes("1-dA==-cw==-1-cw==-aQ==-ZQ==-YQ"));
    CHECK(!decodes("1-P_8=-cw==-1-cw==-aQ==-ZQ==-YQ=="));
    CHECK(decodes("1-P/8=-cw==-1-cw==-aQ==-ZQ==-YQ=="));
    CHECK(!decodes("1-dA==-cw==-1-cw==-a!==-ZQ==-YQ=="));
    CHECK(!decodes("1-d=A=-cw==-1-cw==-aQ==-ZQ==-YQ=="));
    CHECK(!decodes("1-dA==dA==-cw==-1-cw==-aQ==-ZQ==-YQ=="));
    CHECK(!decodes("1-====-cw==-1-cw==-aQ==-ZQ==-YQ=="));
    CHECK(!decodes("1-dA= -cw==-1-cw==-aQ==-ZQ==-YQ=="));
    /* A decoded NUL byte. */
    CHECK(!decodes("1-AA==-cw==-1-cw==-aQ==-ZQ==-YQ=="));
    /* Span id: negative, not a number, too large. */
    CHECK(!decodes("1-dA==-cw==--1-cw==-aQ==-ZQ==-YQ=="));
    CHECK(!decodes("1-dA==-cw==-x-cw==-aQ==-ZQ==-YQ=="));
    CHECK(!decodes("1-dA==-cw==-+1-cw==-aQ==-ZQ==-YQ=="));
    CHECK(!decodes("1-dA==-cw==-2147483648-cw==-aQ==-ZQ==-YQ=="));
    CHECK(decodes("1-dA==-cw==-2147483647-cw==-aQ==-ZQ==-YQ=="));
    CHECK(!decodes("1-dA==-cw==-99999999999-cw==-aQ==-ZQ==-YQ=="));
    CHECK(!decodes("1-dA==-cw==- 1-cw==-aQ==-ZQ==-YQ=="));
}

static void test_field_too_long(void)
{
    /* A 200-byte trace id does not fit SW_ID_MAX: invalid, not truncated. */
    char id[201], buf[SW_SW8_MAX];
    memset(id, 'x', 200);
    id[200] = '\0';
    size_t n = sw_sw8_encode(buf, sizeof(buf), id, "seg", 0, "svc", "inst", "ep", "addr");
    CHECK(n > 0);
    struct sw_sw8 h;
    sw_sw8_decode(buf, n, &h);
    CHECK(!h.valid);
    /* The longest trace id that fits. */
    id[SW_ID_MAX - 1] = '\0';
    n = sw_sw8_encode(buf, sizeof(buf), id, "seg", 0, "svc", "inst", "ep", "addr");
    sw_sw8_decode(buf, n, &h);
    CHECK(h.valid);
    CHECK_EQ(strlen(h.trace_id), SW_ID_MAX - 1);
}

static void test_garbage(void)
{
    char junk[4096];
    uint32_t x = 12345;
    struct sw_sw8 h;
    for (int round = 0; round < 200; round++) {
        for (size_t i = 0; i < sizeof(junk); i++) {
            x = x * 1103515245u + 12345u;
            junk[i] = round % 2 ? "AB=-+/1"[(x >> 16) % 7] : (char)(x >> 16);
        }
        sw_sw8_decode(junk, sizeof(junk), &h);
        CHECK(!h.valid);
        struct sw_sw8x sx;
        sw_sw8x_decode(junk, sizeof(junk), &sx);
        char out[SW_CORR_MAX];
        size_t n = sw_correlation_filter(junk, sizeof(junk), 3, 128, out, sizeof(out));
        CHECK(n < sizeof(out));
        CHECK_EQ(strlen(out), n);
    }
    memset(junk, '-', sizeof(junk));
    sw_sw8_decode(junk, sizeof(junk), &h);
    CHECK(!h.valid);
    sw_sw8_decode(NULL, 0, &h);
    CHECK(!h.valid);
}

/* The base64 of RFC 4648, one character at a time: the reference for the table-driven code. */
static size_t ref_b64(const unsigned char *p, size_t n, char *out)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0u) |
                     (i + 2 < n ? p[i + 2] : 0u);
        out[o++] = a[v >> 18 & 63];
        out[o++] = a[v >> 12 & 63];
        out[o++] = i + 1 < n ? a[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? a[v & 63] : '=';
    }
    return o;
}

/* The decoding the agent always did: padded input only, '=' only as the last group's third
 * and fourth characters, no other character outside the alphabet; the low bits of a last
 * character before '=' are not checked. Returns the byte count or -1. */
static long ref_unb64(const char *s, size_t n, unsigned char *out)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    long o = 0;
    if (n % 4)
        return -1;
    for (size_t i = 0; i < n; i += 4) {
        unsigned v = 0;
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            const char *at = s[i + k] ? strchr(a, s[i + k]) : NULL;
            if (s[i + k] == '=' && i + 4 == n && k >= 2) {
                pad++;
                v <<= 6;
                continue;
            }
            if (pad || !at)
                return -1;
            v = v << 6 | (unsigned)(at - a);
        }
        out[o++] = (unsigned char)(v >> 16);
        if (pad < 2)
            out[o++] = (unsigned char)(v >> 8);
        if (pad < 1)
            out[o++] = (unsigned char)v;
    }
    return o;
}

/* Random bytes of every length up to 200 encoded, compared with the reference, decoded back;
 * then with a random character (or '=') put anywhere, decoded like the reference decoder. */
static void test_base64_random(void)
{
    unsigned seed = 7;
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int round = 0; round < 20000; round++) {
        unsigned char in[200], back[200];
        char e[300], r[300];
        size_t n = (size_t)(rand_r(&seed) % 200);
        for (size_t i = 0; i < n; i++)
            in[i] = (unsigned char)rand_r(&seed);
        long k = sw_b64_encode(in, n, e, sizeof(e));
        size_t rk = ref_b64(in, n, r);
        CHECK_EQ(k, rk);
        CHECK(memcmp(e, r, rk) == 0);
        CHECK_EQ(sw_b64_decode(e, (size_t)k, back, sizeof(back)), n);
        CHECK(memcmp(in, back, n) == 0);
        CHECK_EQ(sw_b64_decode(e, (size_t)k, back, n ? n - 1 : 0), n ? -1 : 0); /* too small */
        if (k > 0) {
            size_t at = (size_t)(rand_r(&seed) % (unsigned)k);
            char c = rand_r(&seed) % 4 ? a[rand_r(&seed) % 64] : (char)(rand_r(&seed) % 256);
            e[at] = c;
            unsigned char back2[200];
            long d = sw_b64_decode(e, (size_t)k, back, sizeof(back));
            long d2 = ref_unb64(e, (size_t)k, back2);
            CHECK_EQ(d, d2); /* both refuse, or both give the same bytes */
            CHECK(d < 0 || memcmp(back, back2, (size_t)d) == 0);
        }
    }
}

static void test_base64(void)
{
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const enc[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                      "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    char out[32];
    for (size_t i = 0; i < SW_ARRAY_LEN(plain); i++) {
        long n = sw_b64_encode(plain[i], strlen(plain[i]), out, sizeof(out));
        CHECK_EQ(n, strlen(enc[i]));
        CHECK(memcmp(out, enc[i], (size_t)n) == 0);
        n = sw_b64_decode(enc[i], strlen(enc[i]), out, sizeof(out));
        CHECK_EQ(n, strlen(plain[i]));
        CHECK(memcmp(out, plain[i], (size_t)n) == 0);
    }
    unsigned char all[256], back[256];
    char e[400];
    for (int i = 0; i < 256; i++)
        all[i] = (unsigned char)i;
    long n = sw_b64_encode(all, sizeof(all), e, sizeof(e));
    CHECK_EQ(n, 344);
    CHECK_EQ(sw_b64_decode(e, (size_t)n, back, sizeof(back)), 256);
    CHECK(memcmp(all, back, 256) == 0);
    CHECK_EQ(sw_b64_encode("foobar", 6, out, 7), -1);
    CHECK_EQ(sw_b64_encode("foobar", 6, out, 8), 8);
    CHECK_EQ(sw_b64_decode("Zm9vYmFy", 8, out, 5), -1);
    CHECK_EQ(sw_b64_decode("Zm9", 3, out, sizeof(out)), -1);
    CHECK_EQ(sw_b64_decode("Z===", 4, out, sizeof(out)), -1);
    CHECK_EQ(sw_b64_decode("Zm9v-_==", 8, out, sizeof(out)), -1);
    CHECK_EQ(sw_b64_decode("Zm=vYmFy", 8, out, sizeof(out)), -1); /* '=' before the last group */
    CHECK_EQ(sw_b64_decode("Zm9vYm=y", 8, out, sizeof(out)), -1); /* data after '=' */
    test_base64_random();
}

static void test_correlation(void)
{
    char out[SW_CORR_MAX];
    /* a:1, b:2, c:3, d:4 -> only 3 kept. */
    const char *v = "YQ==:MQ==,Yg==:Mg==, Yw==:Mw== ,ZA==:NA==";
    size_t n = sw_correlation_filter(v, strlen(v), 3, 128, out, sizeof(out));
    CHECK_STR(out, "YQ==:MQ==,Yg==:Mg==,Yw==:Mw==");
    CHECK_EQ(n, strlen(out));
    /* Bad items are skipped: no colon, two colons, bad base64, empty value, too long. */
    char longv[300], item[400];
    memset(longv, 'v', 129);
    long el = sw_b64_encode(longv, 129, item + 5, sizeof(item) - 5);
    memcpy(item, "YQ==:", 5);
    item[5 + el] = '\0';
    char in[1024];
    snprintf(in, sizeof(in), "YQ==,YQ==:MQ==:MQ==,Y!==:MQ==,YQ==:,%s,Yg==:Mg==", item);
    n = sw_correlation_filter(in, strlen(in), 3, 128, out, sizeof(out));
    CHECK_STR(out, "Yg==:Mg==");
    CHECK_EQ(sw_correlation_filter(in, strlen(in), 3, 129, out, sizeof(out)), strlen(item) + 10);
    /* Nothing valid, no limit, an output too small. */
    CHECK_EQ(sw_correlation_filter("garbage", 7, 3, 128, out, sizeof(out)), 0);
    CHECK_STR(out, "");
    CHECK_EQ(sw_correlation_filter(v, strlen(v), 0, 128, out, sizeof(out)), 0);
    CHECK_EQ(sw_correlation_filter(v, strlen(v), 3, 128, out, 12), 9);
    CHECK_STR(out, "YQ==:MQ==");
    CHECK_EQ(sw_correlation_filter("", 0, 3, 128, out, sizeof(out)), 0);
}

static void test_sw8x(void)
{
    struct sw_sw8x x;
    sw_sw8x_decode("1-1724567890123", 15, &x);
    CHECK(x.skip_analysis);
    CHECK_EQ(x.send_time_ms, 1724567890123LL);
    sw_sw8x_decode("0- ", 3, &x);
    CHECK(!x.skip_analysis);
    CHECK_EQ(x.send_time_ms, 0);
    sw_sw8x_decode("", 0, &x);
    CHECK(!x.skip_analysis);
    sw_sw8x_decode("1", 1, &x);
    CHECK(x.skip_analysis);
    sw_sw8x_decode("-5", 2, &x);
    CHECK(!x.skip_analysis);
    CHECK_EQ(x.send_time_ms, 5);
    sw_sw8x_decode("1-12x", 5, &x);
    CHECK_EQ(x.send_time_ms, 0);
    sw_sw8x_decode("11-1", 4, &x);
    CHECK(!x.skip_analysis);
}

/* The plain per-character base64 (RFC 4648, padded, strict) the table-driven sw_b64_encode /
 * sw_b64_decode must equal: results, lengths and every rejection. */
static int ref_val(unsigned char c)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = c ? strchr(a, c) : NULL;
    return p ? (int)(p - a) : -1;
}

static long ref_encode(const unsigned char *p, size_t len, char *out, size_t cap)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    if ((len + 2) / 3 * 4 > cap)
        return -1;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < len ? p[i + 2] : 0);
        out[o++] = a[v >> 18 & 63];
        out[o++] = a[v >> 12 & 63];
        out[o++] = i + 1 < len ? a[v >> 6 & 63] : '=';
        out[o++] = i + 2 < len ? a[v & 63] : '=';
    }
    return (long)o;
}

static long ref_decode(const char *s, size_t len, unsigned char *out, size_t cap)
{
    size_t o = 0;
    if (len % 4)
        return -1;
    for (size_t i = 0; i < len; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + k] == '=' && k >= 2 && i + 4 == len) {
                v[k] = 0;
                pad++;
            } else if (pad || (v[k] = ref_val((unsigned char)s[i + k])) < 0) {
                return -1;
            }
        }
        uint32_t w =
            (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        for (int k = 0; k < 3 - pad; k++) {
            if (o >= cap)
                return -1;
            out[o++] = (unsigned char)(w >> (16 - 8 * k));
        }
    }
    return (long)o;
}

static void test_base64_vs_reference(void)
{
    uint32_t x = 12345;
    unsigned char in[64], want[64];
    char e1[100], e2[100];
    for (int it = 0; it < 200000; it++) {
        x = x * 1103515245u + 12345u;
        size_t len = (x >> 8) % 49;
        for (size_t i = 0; i < len; i++) {
            x = x * 1103515245u + 12345u;
            in[i] = (unsigned char)(x >> 16);
        }
        size_t cap = it % 3 ? sizeof(e1) : (x >> 4) % 70;
        long n1 = sw_b64_encode(in, len, e1, cap), n2 = ref_encode(in, len, e2, cap);
        CHECK(n1 == n2);
        if (n1 > 0)
            CHECK(memcmp(e1, e2, (size_t)n1) == 0);
        if (n2 < 0)
            n2 = ref_encode(in, len, e2, sizeof(e2));
        /* A valid text, then one character changed to any byte, or cut, or a smaller output. */
        size_t tl = (size_t)n2;
        x = x * 1103515245u + 12345u;
        if (tl && it % 2)
            e2[(x >> 8) % tl] = (char)(x >> 20);
        if (tl && it % 7 == 0)
            tl -= (x >> 4) % tl;
        size_t dcap = it % 5 == 0 ? (x >> 12) % 40 : sizeof(want);
        /* Decoded into exactly dcap bytes of their own: ASan sees a write past the output. */
        unsigned char *g = malloc(dcap ? dcap : 1);
        CHECK(g != NULL);
        long d1 = sw_b64_decode(e2, tl, g, dcap), d2 = ref_decode(e2, tl, want, dcap);
        CHECK(d1 == d2);
        if (d1 > 0)
            CHECK(memcmp(g, want, (size_t)d1) == 0);
        free(g);
    }
}

int main(void)
{
    RUN_TEST(test_reference_sample);
    RUN_TEST(test_round_trip);
    RUN_TEST(test_flag_ignored);
    RUN_TEST(test_malformed);
    RUN_TEST(test_field_too_long);
    RUN_TEST(test_garbage);
    RUN_TEST(test_base64);
    RUN_TEST(test_base64_vs_reference);
    RUN_TEST(test_correlation);
    RUN_TEST(test_sw8x);
    return 0;
}
