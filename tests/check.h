/*
 * check.h - the unit-test helper (libuv task.h / redis testhelp.h in spirit).
 * A failed CHECK prints file:line and the expression, and the test exits 1.
 */
#ifndef SW_TEST_CHECK_H
#define SW_TEST_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define CHECK(expr)                                                                                \
    do {                                                                                           \
        if (!(expr)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #expr);               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_EQ(a, b)                                                                             \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_) {                                                                            \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %s (%lld != %lld)\n", __FILE__,         \
                    __LINE__, #a, #b, a_, b_);                                                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                                   \
            fprintf(stderr, "%s:%d: CHECK_STR failed: %s == %s (\"%s\" != \"%s\")\n", __FILE__,   \
                    __LINE__, #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)");                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Runs one test function and reports it. */
#define RUN_TEST(fn)                                                                               \
    do {                                                                                           \
        fn();                                                                                      \
        printf("ok - %s\n", #fn);                                                                  \
    } while (0)

/* Minor page faults of this process so far (tests of work that must not fault pages in). */
static inline long check_minor_faults(void)
{
    struct rusage ru;
    CHECK(getrusage(RUSAGE_SELF, &ru) == 0);
    return ru.ru_minflt;
}

#endif /* SW_TEST_CHECK_H */
