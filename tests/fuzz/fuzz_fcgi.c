/*
 * fuzz_fcgi.c - libFuzzer target for the FastCGI parser (agent/fcgi.c) and the
 * PARAMS record builder.
 *
 * Input: segments { u8 d: direction d & 1 (1: response), length d >> 1 ; bytes }. Checked beyond
 * "no crash": the events are the same whether each segment is fed whole or one byte at a time,
 * a PARAMS event's insertion offset lies within the bytes fed so far and names the start of an
 * empty PARAMS record, captured values are within their buffers, and a record built from the
 * input parses back with its HTTP_SW8 found.
 */
#include "common.h"

#include "fcgi.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct acc {
    uint64_t h;
    uint64_t fed;      /* request-direction bytes fed so far */
    const uint8_t *rq; /* ... and those bytes, in order */
    bool saw_sw8;
};

static void mix(struct acc *a, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        a->h = (a->h ^ b[i]) * 1099511628211ull;
}

static uint64_t cb(void *ctx, const struct sw_fcgi_ev *ev)
{
    struct acc *a = ctx;
    uint8_t k = (uint8_t)ev->kind;
    mix(a, &k, 1);
    mix(a, &ev->id, 2);
    if (ev->kind == SW_FCGI_EV_PARAMS) {
        if (a->rq) {
            if (ev->insert_off + 8 > a->fed)
                abort();
            const uint8_t *r = a->rq + ev->insert_off;
            if (r[0] != 1 || r[1] != 4 || r[4] != 0 || r[5] != 0)
                abort();
        }
        for (int i = 0; i < SW_FCGI_NPARAMS; i++) {
            if (ev->len[i] && !ev->val[i])
                abort();
            mix(a, ev->val[i], ev->len[i]);
        }
        mix(a, &ev->insert_off, sizeof(ev->insert_off));
        mix(a, &ev->has_sw8, 1);
        a->saw_sw8 |= ev->has_sw8;
        return 7;
    }
    if (ev->kind == SW_FCGI_EV_HEAD || ev->kind == SW_FCGI_EV_END) {
        mix(a, &ev->status, sizeof(ev->status));
        mix(a, &ev->user, sizeof(ev->user));
    }
    return ev->kind == SW_FCGI_EV_BEGIN ? 3 : 0;
}

static void run(const uint8_t *data, size_t size, bool bytewise, struct acc *a, uint8_t *rq,
                struct sw_fcgi *f)
{
    sw_fcgi_init(f);
    size_t at = 0;
    a->fed = 0;
    a->rq = rq;
    while (at < size) {
        uint8_t d = data[at++];
        size_t n = d >> 1;
        if (n > size - at)
            n = size - at;
        for (size_t i = 0; i < n; i += bytewise ? 1 : n) {
            size_t k = bytewise ? 1 : n;
            if (!(d & 1)) {
                memcpy(rq + a->fed, data + at + i, k);
                a->fed += k;
            }
            sw_fcgi_feed(f, d & 1, data + at + i, k, cb, a);
        }
        at += n;
    }
    sw_fcgi_close(f, cb, a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct sw_fcgi f;
    uint8_t *rq = malloc(size + 1);
    if (!rq)
        return 0;
    struct acc a = {.h = 1469598103934665603ull}, b = a;
    run(data, size, false, &a, rq, &f);
    run(data, size, true, &b, rq, &f);
    if (a.h != b.h)
        abort();
    free(rq);

    /* The builder: the input as header lines; the record it makes parses back. */
    uint8_t rec[1024 + 8 + 16];
    size_t n = sw_fcgi_params_record(rec + 8, sizeof(rec) - 16, 1, (const char *)data,
                                     size < 1024 ? size : 1024);
    if (n) {
        static const uint8_t begin[16] = {1, 1, 0, 1, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0};
        static const uint8_t end[8] = {1, 4, 0, 1, 0, 0, 0, 0};
        struct acc c = {.h = 0};
        sw_fcgi_init(&f);
        sw_fcgi_feed(&f, false, begin, sizeof(begin), cb, &c);
        sw_fcgi_feed(&f, false, rec + 8, n, cb, &c);
        sw_fcgi_feed(&f, false, end, sizeof(end), cb, &c);
        if (sw_fcgi_stopped(&f))
            abort();
    }
    return 0;
}
