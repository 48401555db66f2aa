/*
 * test_log.c - the agent log: early lines, line format, level, formatter, errno, rate limit,
 * size limit, concurrent writers, the deferred open (the file opened by its first line).
 */
#include "common.h"

#include "log.h"

#include "check.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <regex.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char dir[] = "/tmp/swagent-test-log-XXXXXX";

/* Reads a whole file into a static buffer (NUL-terminated). */
static const char *slurp(const char *name)
{
    static char buf[1 << 17];
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* Sleeps until just after the wall-clock second changes, so a test owns a fresh rate window. */
static void next_second(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct timespec d = {0, 1000000000L - ts.tv_nsec + 2000000L};
    if (d.tv_nsec >= 1000000000L) {
        d.tv_sec = 1;
        d.tv_nsec -= 1000000000L;
    }
    nanosleep(&d, NULL);
}

static void test_early_and_format(void)
{
    sw_log(SW_LOG_WARN, "early %d", 42); /* before open: kept */
    sw_log(SW_LOG_DEBUG, "early debug"); /* below the default INFO: dropped */
    next_second();
    CHECK_EQ(sw_log_open(dir, "a.log", SW_LOG_INFO, 0), 0);
    sw_log(SW_LOG_INFO, "hello %s", "world");
    sw_log(SW_LOG_DEBUG, "not written");
    const char *s = slurp("a.log");
    CHECK(strstr(s, "early 42\n") != NULL);
    CHECK(strstr(s, "early debug") == NULL);
    CHECK(strstr(s, "not written") == NULL);
    regex_t re;
    char pat[256];
    snprintf(pat, sizeof(pat),
             "^[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]\\.[0-9]{3}Z "
             "WARN swagent\\[%ld\\]: early 42\n"
             "[0-9]{4}-[0-9-]{5}T[0-9:.]{12}Z INFO swagent\\[%ld\\]: hello world\n$",
             (long)getpid(), (long)getpid());
    CHECK(regcomp(&re, pat, REG_EXTENDED) == 0);
    CHECK(regexec(&re, s, 0, NULL, 0) == 0);
    regfree(&re);
    /* The date is today's (UTC). */
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char day[16];
    strftime(day, sizeof(day), "%Y-%m-%dT", &tm);
    CHECK(strncmp(s, day, strlen(day)) == 0);
    sw_log_set_level(SW_LOG_DEBUG);
    sw_log(SW_LOG_DEBUG, "now written");
    CHECK(strstr(slurp("a.log"), "DEBUG swagent[") != NULL);
    sw_log_set_level(SW_LOG_INFO);
}

static void test_formatter(void)
{
    next_second();
    CHECK_EQ(sw_log_open(dir, "f.log", SW_LOG_INFO, 0), 0);
    const char *volatile nul = NULL;
    errno = 1234;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat"
#pragma GCC diagnostic ignored "-Wformat-extra-args"
    sw_log(SW_LOG_INFO, "[%d|%i|%u|%ld|%lld|%llu|%zu|%zd|%x|%lx|%c|%%|%s|%.*s|%s|%q]", -7, 0,
           4000000000u, LONG_MIN, LLONG_MIN, ULLONG_MAX, (size_t)12, (ssize_t)-3, 0xbeefu,
           0xdeadbeefUL, 'Z', "str", 3, "abcdef", nul);
#pragma GCC diagnostic pop
    CHECK_EQ(errno, 1234);
    sw_log(SW_LOG_INFO, "p=%p", (void *)0x1234);
    const char *s = slurp("f.log");
    char want[512];
    snprintf(want, sizeof(want),
             "[-7|0|4000000000|%ld|%lld|%llu|12|-3|beef|deadbeef|Z|%%|str|abc|(null)|%%q]\n",
             LONG_MIN, LLONG_MIN, ULLONG_MAX);
    CHECK(strstr(s, want) != NULL);
    CHECK(strstr(s, "p=0x1234\n") != NULL);
    /* A long line is cut to SW_LOG_LINE_MAX bytes, newline included. */
    char big[3000];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    sw_log(SW_LOG_ERROR, "%s", big);
    s = slurp("f.log");
    const char *last = strstr(s, "ERROR swagent");
    CHECK(last != NULL);
    while (last > s && last[-1] != '\n')
        last--;
    CHECK_EQ(strlen(last), SW_LOG_LINE_MAX);
    CHECK(last[SW_LOG_LINE_MAX - 1] == '\n');
    /* A trailing newline in the message is not doubled. */
    sw_log(SW_LOG_INFO, "nl\n");
    CHECK(strstr(slurp("f.log"), "nl\n\n") == NULL);
}

static void test_levels_and_fd(void)
{
    CHECK_EQ(sw_log_level_parse("debug", 5), SW_LOG_DEBUG);
    CHECK_EQ(sw_log_level_parse("TRACE", 5), SW_LOG_DEBUG);
    CHECK_EQ(sw_log_level_parse("Info", 4), SW_LOG_INFO);
    CHECK_EQ(sw_log_level_parse("WARNING", 7), SW_LOG_WARN);
    CHECK_EQ(sw_log_level_parse("error", 5), SW_LOG_ERROR);
    CHECK_EQ(sw_log_level_parse("off", 3), SW_LOG_OFF);
    CHECK_EQ(sw_log_level_parse("infox", 5), -1);
    CHECK_EQ(sw_log_level_parse("", 0), -1);
    CHECK_EQ(sw_log_open(dir, "sub/x.log", SW_LOG_INFO, 0), -EINVAL);
    CHECK_EQ(sw_log_open("", "x.log", SW_LOG_INFO, 0), -EINVAL);
    CHECK(sw_log_open("/proc/no/such/dir", "x.log", SW_LOG_INFO, 0) < 0);
    /* A missing last directory level is created (0700). */
    char sub[256];
    snprintf(sub, sizeof(sub), "%s/newdir", dir);
    CHECK_EQ(sw_log_open(sub, "n.log", SW_LOG_INFO, 0), 0);
    struct stat st;
    CHECK(stat(sub, &st) == 0 && (st.st_mode & 0777) == 0700);
    snprintf(sub, sizeof(sub), "%s/newdir/n.log", dir);
    CHECK(stat(sub, &st) == 0 && (st.st_mode & 0777) == 0600);
    int fd = open(sub, O_RDONLY);
    CHECK(!sw_log_owns_fd(fd));
    CHECK(!sw_log_owns_fd(-1));
    close(fd);
    bool found = false;
    for (int i = 0; i < 1024; i++)
        found |= sw_log_owns_fd(i);
    CHECK(found);
    sw_log_close();
    for (int i = 0; i < 1024; i++)
        CHECK(!sw_log_owns_fd(i));
}

static void test_rate_limit(void)
{
    CHECK_EQ(sw_log_open(dir, "r.log", SW_LOG_INFO, 0), 0);
    next_second();
    for (int i = 0; i < 250; i++)
        sw_log(SW_LOG_INFO, "rl %d", i);
    next_second();
    sw_log(SW_LOG_INFO, "after");
    const char *s = slurp("r.log");
    CHECK_EQ(count(s, ": rl "), SW_LOG_RATE);
    CHECK(strstr(s, ": rl 99\n") != NULL);
    CHECK(strstr(s, ": rl 100\n") == NULL);
    CHECK(strstr(s, "150 lines suppressed\n") != NULL);
    CHECK(strstr(s, "suppressed") < strstr(s, "after"));
}

static void test_size_limit(void)
{
    next_second();
    CHECK_EQ(sw_log_open(dir, "s.log", SW_LOG_INFO, 400), 0);
    for (int i = 0; i < 20; i++)
        sw_log(SW_LOG_INFO, "size line %d with some padding text", i);
    const char *s = slurp("s.log");
    CHECK_EQ(count(s, "log size limit reached"), 1);
    CHECK(strlen(s) <= 400 + 128);
    CHECK(count(s, "size line") >= 3);
    /* Reopening an existing file counts its size. */
    next_second();
    CHECK_EQ(sw_log_open(dir, "s.log", SW_LOG_INFO, 400), 0);
    sw_log(SW_LOG_INFO, "size line again");
    s = slurp("s.log");
    CHECK(strstr(s, "size line again") == NULL);
    CHECK_EQ(count(s, "log size limit reached"), 2);
}

#define THREADS 4
#define LINES 20

static void *writer(void *arg)
{
    for (int i = 0; i < LINES; i++)
        sw_log(SW_LOG_INFO, "thread %d line %d %s", (int)(intptr_t)arg, i,
               "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz");
    return NULL;
}

/* The first lines of a deferred log come from many threads at once: one opens, none is lost. */
static void test_deferred_threads(void)
{
    pthread_t th[THREADS];
    sw_log_close();
    CHECK_EQ(sw_log_open_deferred(dir, "dt.log", SW_LOG_INFO, 0), 0);
    next_second();
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&th[i], NULL, writer, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    const char *s = slurp("dt.log");
    CHECK_EQ(count(s, "xyz\n"), THREADS * LINES);
}

static void test_threads(void)
{
    pthread_t th[THREADS];
    CHECK_EQ(sw_log_open(dir, "t.log", SW_LOG_INFO, 0), 0);
    next_second();
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&th[i], NULL, writer, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    const char *s = slurp("t.log");
    CHECK_EQ(count(s, "\n"), THREADS * LINES);
    CHECK_EQ(count(s, "xyz\n"), THREADS * LINES);
    for (int t = 0; t < THREADS; t++)
        for (int i = 0; i < LINES; i++) {
            char want[64];
            snprintf(want, sizeof(want), ": thread %d line %d abc", t, i);
            CHECK_EQ(count(s, want), 1);
        }
}

static bool exists(const char *rel)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    return stat(path, &st) == 0;
}

/* sw_log_open_deferred: nothing is created until a line at the level is written. */
static void test_deferred(void)
{
    char sub[256];
    sw_log_close();
    snprintf(sub, sizeof(sub), "%s/lazy", dir);
    CHECK_EQ(sw_log_open_deferred(dir, "sub/x.log", SW_LOG_INFO, 0), -EINVAL);
    CHECK_EQ(sw_log_open_deferred(sub, "d.log", SW_LOG_INFO, 0), 0);
    CHECK(!exists("lazy"));
    sw_log(SW_LOG_DEBUG, "below the level");
    CHECK(!exists("lazy")); /* a line that is not written opens nothing */
    errno = 1234;
    sw_log(SW_LOG_INFO, "first %d", 1);
    CHECK_EQ(errno, 1234);
    struct stat st;
    CHECK(stat(sub, &st) == 0 && (st.st_mode & 0777) == 0700); /* the last level is created */
    sw_log(SW_LOG_WARN, "second");
    const char *t = slurp("lazy/d.log");
    CHECK_EQ(count(t, "\n"), 2);
    CHECK(strstr(t, " INFO swagent[") && strstr(t, "]: first 1\n"));
    CHECK(strstr(t, "]: second\n") > strstr(t, "]: first 1\n"));
    CHECK(!strstr(t, "below the level"));

    /* Lines kept before the call (configuration problems): the file opens at once. */
    sw_log_close();
    sw_log(SW_LOG_WARN, "kept early");
    CHECK_EQ(sw_log_open_deferred(dir, "e.log", SW_LOG_INFO, 0), 0);
    CHECK(exists("e.log"));
    CHECK(strstr(slurp("e.log"), "]: kept early\n") != NULL);

    /* An unusable file: no line is written anywhere, nothing breaks. */
    sw_log_close();
    CHECK_EQ(sw_log_open_deferred("/proc/no/such/dir", "x.log", SW_LOG_INFO, 0), 0);
    sw_log(SW_LOG_ERROR, "lost");
    sw_log(SW_LOG_ERROR, "lost again");
    CHECK(!exists("x.log"));
}

int main(void)
{
    CHECK(mkdtemp(dir) != NULL);
    RUN_TEST(test_early_and_format);
    RUN_TEST(test_formatter);
    RUN_TEST(test_levels_and_fd);
    RUN_TEST(test_rate_limit);
    RUN_TEST(test_size_limit);
    RUN_TEST(test_threads);
    RUN_TEST(test_deferred);
    RUN_TEST(test_deferred_threads);
    sw_log_close();
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return 0;
}
