/*
 * fuzz_mysql.c - libFuzzer target for the MySQL parser (agent/mysql.c).
 *
 * Input: byte 0 selects a prefix (bit 0: a good handshake first, bit 1: CLIENT_DEPRECATE_EOF)
 * and the statement limit; then segments { u8 d: direction d & 1, length d >> 1 ; bytes }.
 * Checked beyond "no crash": the events are the same whether each segment is fed whole or one
 * byte at a time (the parser must not depend on how the bytes were split), every END names a
 * BEGIN's value, and a BEGIN's text is within the limit.
 */
#include "common.h"

#include "mysql.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct acc {
    uint64_t h;
    uint64_t begun;
    size_t text_max;
};

static void mix(struct acc *a, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        a->h = (a->h ^ b[i]) * 1099511628211ull;
}

static uint64_t cb(void *ctx, const struct sw_mysql_ev *ev)
{
    struct acc *a = ctx;
    uint8_t k = (uint8_t)ev->kind;
    mix(a, &k, 1);
    mix(a, &ev->cmd, 1);
    if (ev->kind == SW_MYSQL_EV_BEGIN) {
        if (ev->text_len > a->text_max || (ev->text_len && !ev->text))
            abort();
        mix(a, ev->text, ev->text_len);
        mix(a, &ev->text_cut, 1);
        if (ev->params_len > 40 + 3 || (ev->params_len && !ev->params))
            abort();
        mix(a, ev->params, ev->params_len);
        return ++a->begun;
    }
    if (ev->kind == SW_MYSQL_EV_END) {
        if (ev->user == 0 || ev->user > a->begun || ev->msg_len > SW_MYSQL_MSG_MAX)
            abort();
        mix(a, &ev->user, sizeof(ev->user));
        mix(a, &ev->error, 1);
        mix(a, &ev->err_code, 2);
        mix(a, ev->msg, ev->msg_len);
        mix(a, &ev->rows, sizeof(ev->rows));
    }
    return 0;
}

static const uint8_t k_greeting[] = "\x43\x00\x00\x00\x0a"
                                    "5.5.5-10.11.6-MariaDB\0"
                                    "\x2a\x00\x00\x00"
                                    "abcdefgh\0"
                                    "\xff\xf7\x2d\x02\x00\xff\x81\x15\0\0\0\0\0\0\0\0\0\0"
                                    "ijklmnopqrst\0";
static const uint8_t k_response[] = "\x2a\x00\x00\x01"
                                    "\x8d\xa2\x0f\x00"
                                    "\x00\x00\x00\x01\x2d"
                                    "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"
                                    "\0\0\0\0\0\0\0\0"
                                    "app\0\x00"
                                    "shop\0";
static const uint8_t k_ok[] = "\x07\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00";

static void run(const uint8_t *data, size_t size, bool bytewise, struct acc *a, struct sw_mysql *m)
{
    sw_mysql_init(m, a->text_max, data[0] & 0x80 ? 0 : 40);
    if (data[0] & 1) {
        uint8_t resp[sizeof(k_response)];
        memcpy(resp, k_response, sizeof(resp));
        if (data[0] & 2)
            resp[7] |= 0x01; /* CLIENT_DEPRECATE_EOF */
        sw_mysql_feed(m, true, k_greeting, sizeof(k_greeting) - 1, cb, a);
        sw_mysql_feed(m, false, resp, sizeof(resp) - 1, cb, a);
        sw_mysql_feed(m, true, k_ok, sizeof(k_ok) - 1, cb, a);
    }
    size_t at = 1;
    while (at < size) {
        uint8_t d = data[at++];
        size_t n = d >> 1;
        if (n > size - at)
            n = size - at;
        if (bytewise)
            for (size_t i = 0; i < n; i++)
                sw_mysql_feed(m, d & 1, data + at + i, 1, cb, a);
        else
            sw_mysql_feed(m, d & 1, data + at, n, cb, a);
        at += n;
    }
    sw_mysql_close(m, cb, a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct sw_mysql m;
    if (size < 1)
        return 0;
    struct acc a = {.h = 1469598103934665603ull, .text_max = 16 + (data[0] >> 2) * 8};
    struct acc b = a;
    run(data, size, false, &a, &m);
    run(data, size, true, &b, &m);
    if (a.h != b.h || a.begun != b.begun)
        abort();
    return 0;
}
