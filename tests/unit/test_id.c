/*
 * test_id.c - ids: the Java-like format, uniqueness over 1e6 ids from several threads, strict
 * per-thread monotonicity of the numeric part (checked against its parsed value, so the in-place
 * decimal increment of id.c is verified digit by digit), the ms part following the clock, a new
 * process uuid after fork (also for a thread whose prefix was cached before), and the fork child's
 * own tid and monotonic ids.
 */
#include "common.h"

#include "id.h"
#include "propagation.h"
#include "record.h"

#include "check.h"

#include <pthread.h>
#include <regex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define THREADS 4
#define PER_THREAD 250000

static char (*ids)[SW_ID_STR_MAX];

/* The numeric (last) part of an id, or -1 if the id is malformed. */
static int64_t id_num(const char *id)
{
    const char *dot = strrchr(id, '.');
    if (dot == NULL || dot[1] == '\0')
        return -1;
    char *end;
    long long v = strtoll(dot + 1, &end, 10);
    return *end == '\0' ? (int64_t)v : -1;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Each id's number is greater than the previous one of the thread; when it is not exactly the
 * previous + 1, a new millisecond began and the sequence restarts at 0.
 */
static int check_monotonic(char (*v)[SW_ID_STR_MAX], size_t n)
{
    int64_t prev = -1;
    for (size_t i = 0; i < n; i++) {
        int64_t x = id_num(v[i]);
        if (x <= prev || (x != prev + 1 && x % 10000 != 0 && prev >= 0))
            return -1;
        prev = x;
    }
    return 0;
}

static void *gen(void *arg)
{
    size_t base = (size_t)(uintptr_t)arg * PER_THREAD;
    for (size_t i = 0; i < PER_THREAD; i++)
        CHECK(sw_id_new(ids[base + i], SW_ID_STR_MAX) > 0);
    CHECK(check_monotonic(ids + base, PER_THREAD) == 0);
    /* Every id of the thread shares its "<uuid>.<tid>." prefix. */
    const char *last = strrchr(ids[base], '.');
    for (size_t i = 1; i < PER_THREAD; i++)
        CHECK(strncmp(ids[base + i], ids[base], (size_t)(last - ids[base]) + 1) == 0);
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void test_format(void)
{
    regex_t re;
    char id[SW_ID_STR_MAX];
    CHECK(regcomp(&re, "^[0-9a-f]{32}\\.[1-9][0-9]*\\.[1-9][0-9]{15,18}$", REG_EXTENDED) == 0);
    sw_id_init();
    size_t n = sw_id_new(id, sizeof(id));
    CHECK_EQ(n, strlen(id));
    CHECK(regexec(&re, id, 0, NULL, 0) == 0);
    CHECK(strncmp(id, sw_id_process_uuid(), SW_ID_UUID_LEN) == 0);
    CHECK_EQ(strlen(sw_id_process_uuid()), SW_ID_UUID_LEN);
    CHECK(SW_ID_STR_MAX <= SW_ID_MAX);
    /* The tid part is this thread's kernel tid. */
    char tid[24];
    snprintf(tid, sizeof(tid), ".%ld.", (long)gettid());
    CHECK(strstr(id, tid) != NULL);
    /* Too small a buffer. */
    CHECK_EQ(sw_id_new(id, 10), 0);
    /* An exact-size buffer (not the fast path's fixed copies) gives the same form. */
    char small[SW_ID_STR_MAX];
    size_t len = sw_id_new(id, sizeof(id));
    CHECK_EQ(sw_id_new(small, len + 1), len);
    CHECK(id_num(small) > id_num(id));
    CHECK(strncmp(small, id, len - 17) == 0);
    CHECK(regexec(&re, small, 0, NULL, 0) == 0);
    CHECK_EQ(sw_id_new(small, len), 0);
    /* After a pause the number is a fresh ms * 10000, within the clock read around it. */
    usleep(3000);
    int64_t before = wall_ms();
    sw_id_new(id, sizeof(id));
    int64_t after = wall_ms();
    int64_t num = id_num(id);
    CHECK(num % 10000 == 0);
    CHECK(num / 10000 >= before && num / 10000 <= after);
    regfree(&re);
}

static void test_unique_threads(void)
{
    pthread_t th[THREADS];
    ids = calloc((size_t)THREADS * PER_THREAD, SW_ID_STR_MAX);
    CHECK(ids != NULL);
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&th[i], NULL, gen, (void *)(uintptr_t)i) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    /* Threads other than the first got the same uuid and their own tids. */
    CHECK(strncmp(ids[0], ids[PER_THREAD], SW_ID_UUID_LEN + 1) == 0);
    CHECK(strcmp(strchr(ids[0], '.'), strchr(ids[PER_THREAD], '.')) != 0);
    qsort(ids, (size_t)THREADS * PER_THREAD, SW_ID_STR_MAX, cmp);
    for (size_t i = 1; i < (size_t)THREADS * PER_THREAD; i++)
        CHECK(strcmp(ids[i - 1], ids[i]) != 0);
    free(ids);
}

static void test_fork_new_uuid(void)
{
    int p[2];
    char parent[SW_ID_UUID_LEN + 1], child[SW_ID_UUID_LEN + 1] = {0};
    memcpy(parent, sw_id_process_uuid(), sizeof(parent));
    CHECK(pipe(p) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        sw_id_reset_after_fork();
        char id[SW_ID_STR_MAX];
        sw_id_new(id, sizeof(id));
        if (strncmp(id, sw_id_process_uuid(), SW_ID_UUID_LEN) != 0)
            _exit(2);
        /* The child's own tid, and its ids still increase. */
        char tid[24];
        snprintf(tid, sizeof(tid), ".%ld.", (long)gettid());
        if (strstr(id, tid) == NULL)
            _exit(3);
        static char more[1000][SW_ID_STR_MAX];
        for (int i = 0; i < 1000; i++)
            sw_id_new(more[i], SW_ID_STR_MAX);
        if (check_monotonic(more, 1000) != 0 || id_num(more[0]) <= id_num(id))
            _exit(4);
        ssize_t w = write(p[1], sw_id_process_uuid(), SW_ID_UUID_LEN);
        _exit(w == SW_ID_UUID_LEN ? 0 : 1);
    }
    close(p[1]);
    CHECK_EQ(read(p[0], child, SW_ID_UUID_LEN), SW_ID_UUID_LEN);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(strcmp(parent, child) != 0);
    close(p[0]);
    /* The parent keeps its uuid. */
    char id[SW_ID_STR_MAX];
    sw_id_new(id, sizeof(id));
    CHECK(strncmp(id, parent, SW_ID_UUID_LEN) == 0);
}

/*
 * A new uuid reaches a thread whose "<uuid>.<tid>." prefix was cached before it was drawn (the
 * generation check; sw_id_reset_after_fork stands in for any redraw here).
 */
static pthread_barrier_t bar;
static char th_before[SW_ID_STR_MAX], th_after[SW_ID_STR_MAX];

static void *redraw_thread(void *arg)
{
    (void)arg;
    sw_id_new(th_before, sizeof(th_before));
    pthread_barrier_wait(&bar); /* main redraws the uuid now */
    pthread_barrier_wait(&bar);
    sw_id_new(th_after, sizeof(th_after));
    return NULL;
}

static void test_redraw_reaches_threads(void)
{
    pthread_t th;
    char uuid[SW_ID_UUID_LEN + 1];
    CHECK(pthread_barrier_init(&bar, NULL, 2) == 0);
    CHECK(pthread_create(&th, NULL, redraw_thread, NULL) == 0);
    pthread_barrier_wait(&bar);
    sw_id_reset_after_fork();
    memcpy(uuid, sw_id_process_uuid(), sizeof(uuid));
    pthread_barrier_wait(&bar);
    pthread_join(th, NULL);
    pthread_barrier_destroy(&bar);
    CHECK(strncmp(th_before, uuid, SW_ID_UUID_LEN) != 0);
    CHECK(strncmp(th_after, uuid, SW_ID_UUID_LEN) == 0);
    /* The same tid part before and after. */
    CHECK(strncmp(th_before + SW_ID_UUID_LEN, th_after + SW_ID_UUID_LEN,
                  (size_t)(strrchr(th_after, '.') - th_after) - SW_ID_UUID_LEN) == 0);
}

/* sw_id_format (the kept hex, two digits at a time) against printf of the same numbers, and
 * against record.h's sw_rec_id_text over the uuid's bytes (what the reporter writes of a
 * record). */
static void test_format_numbers(void)
{
    static const uint64_t values[] = {
        0,         1, 9, 10, 99, 100, 101, 999, 1000, 17245678901230000ull, 99999999999999999ull,
        UINT64_MAX};
    static const uint32_t tids[] = {0, 1, 7, 10, 42, 99, 100, 4194304, UINT32_MAX};
    char a[SW_ID_STR_MAX + 16], b[SW_ID_STR_MAX + 16], c[SW_ID_STR_MAX + 16];
    unsigned seed = 3;
    for (int round = 0; round < 20000; round++) {
        uint32_t tid = round < 100 ? tids[round % 9] : (uint32_t)rand_r(&seed);
        uint64_t v = round < 100 ? values[round % 12]
                                 : (uint64_t)rand_r(&seed) << 33 ^ (uint64_t)rand_r(&seed);
        size_t n = sw_id_format(a, sizeof(a), tid, v);
        int m =
            snprintf(b, sizeof(b), "%s.%u.%llu", sw_id_process_uuid(), tid, (unsigned long long)v);
        CHECK_EQ(n, (size_t)m);
        CHECK_STR(a, b);
        size_t k = sw_rec_id_text(c, sizeof(c) - 1, sw_id_uuid_bytes(), tid, v);
        CHECK_EQ(k, n);
        c[k] = '\0';
        CHECK_STR(c, a);
        CHECK_EQ(sw_id_format(a, n, tid, v), 0); /* no room for the NUL */
    }
}

/*
 * sw_id_next2_in (the inline pair of the usual traced request) against sw_id_next: the same
 * values, the second id (v + 1) never handed out again, the thread's tid fetched on its
 * first id, a clock that steps back or stays continuing from the last value.
 */
static void *next2_thread(void *arg)
{
    uint64_t *out = arg;
    uint32_t tid = 0;
    out[0] = sw_id_next2_in(5, &tid); /* the thread's first id: its tid is fetched */
    out[1] = tid;
    out[2] = (uint64_t)syscall(SYS_gettid);
    return NULL;
}

static void test_next2_inline(void)
{
    uint32_t tid = 0, t2 = 0;
    int64_t ms = wall_ms() + 1000000; /* later than anything this thread drew */
    uint64_t v = sw_id_next2_in(ms, &tid);
    CHECK_EQ(v, (uint64_t)ms * 10000u);
    CHECK_EQ(tid, (uint32_t)syscall(SYS_gettid));
    CHECK_EQ(sw_id_next(ms, &t2), v + 2); /* v + 1 is the pair's second id */
    CHECK_EQ(t2, tid);
    CHECK_EQ(sw_id_next2_in(ms, &tid), v + 3);     /* the same ms */
    CHECK_EQ(sw_id_next2_in(ms - 5, &tid), v + 5); /* the clock stepped back */
    CHECK_EQ(sw_id_next2_in(0, &tid), v + 7);      /* no clock */
    CHECK_EQ(sw_id_next2_in(ms + 1, &tid), (uint64_t)(ms + 1) * 10000u); /* a new ms */
    CHECK_EQ(sw_id_next2(ms + 1, &t2), (uint64_t)(ms + 1) * 10000u + 2); /* the out-of-line one */
    CHECK_EQ(sw_id_next(ms + 1, &t2), (uint64_t)(ms + 1) * 10000u + 4);
    uint64_t th[3] = {0, 0, 0};
    pthread_t p;
    CHECK(pthread_create(&p, NULL, next2_thread, th) == 0);
    pthread_join(p, NULL);
    CHECK_EQ(th[0], 50000u);
    CHECK(th[1] != 0);
    CHECK_EQ(th[1], th[2]);
    CHECK(th[1] != tid);
}

int main(void)
{
    RUN_TEST(test_format);
    RUN_TEST(test_format_numbers);
    RUN_TEST(test_unique_threads);
    RUN_TEST(test_fork_new_uuid);
    RUN_TEST(test_redraw_reaches_threads);
    RUN_TEST(test_next2_inline); /* last: it moves the thread's ids into the future */
    return 0;
}
