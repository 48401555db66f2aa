/*
 * evlog.h - what the protocol parsers' unit tests (test_mysql.c, test_fcgi.c) share: a text log
 * of the events a parser gave (compared whole with the expected one) and a seeded xorshift for
 * the random splits, so every run feeds the same splits.
 */
#ifndef SW_TEST_EVLOG_H
#define SW_TEST_EVLOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct evlog {
    char s[8192];
    size_t n;
};

/* Appends to the log (cut, never past its end). */
static void evlog_add(struct evlog *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void evlog_add(struct evlog *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(l->s + l->n, sizeof(l->s) - l->n, fmt, ap);
    va_end(ap);
    if (k > 0)
        l->n += (size_t)k < sizeof(l->s) - l->n ? (size_t)k : sizeof(l->s) - l->n - 1;
}

/* A number below `mod` (> 0), from a fixed seed. */
static size_t evlog_rand(size_t mod)
{
    static uint64_t x = 88172645463325252ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return (size_t)(x % mod);
}

#endif /* SW_TEST_EVLOG_H */
