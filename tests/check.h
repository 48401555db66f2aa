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
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/perf_event.h>

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

/*
 * A test that cannot run here: prints "SKIP: <reason>" and exits 77, which ctest reports as
 * skipped (SKIP_RETURN_CODE, set on every test by tests/CMakeLists.txt) and CI accepts only
 * when the test is on tests/expected/skips.txt. Never a silent pass.
 */
#define CHECK_SKIP(reason)                                                                         \
    do {                                                                                           \
        printf("SKIP: %s\n", reason);                                                              \
        fflush(stdout);                                                                            \
        exit(77);                                                                                  \
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

/*
 * Page faults the calling thread has taken so far, counted from the first call (a perf
 * software counter, user mode): only real faults, where getrusage's minor faults also count
 * the pages MADV_POPULATE_WRITE maps. -1 when perf_event_open is not allowed here.
 */
static inline long check_page_faults(void)
{
    static int fd = -2;
    if (fd == -2) {
        struct perf_event_attr a;
        memset(&a, 0, sizeof(a));
        a.type = PERF_TYPE_SOFTWARE;
        a.size = sizeof(a);
        a.config = PERF_COUNT_SW_PAGE_FAULTS;
        a.exclude_kernel = 1;
        a.exclude_hv = 1;
        fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
    }
    uint64_t n = 0;
    if (fd < 0 || read(fd, &n, sizeof(n)) != (ssize_t)sizeof(n))
        return -1;
    return (long)n;
}

#endif /* SW_TEST_CHECK_H */
