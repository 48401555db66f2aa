/*
 * logs_flood.c - the log cap test's writer (tests/e2e/logs_cap.sh): logs_flood N [PAUSE_S]
 * writes N lines of 100 bytes to stdout, one write(2) each (the worst case for the agent's
 * per-write bookkeeping: no stdio, nothing else per line), prints "cpu_us <user+system
 * microseconds of the writes>" to stderr, then waits PAUSE_S seconds (so a test can read the
 * process's ring counters while it lives) unless killed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static long cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000L + ru.ru_utime.tv_usec +
           ru.ru_stime.tv_usec;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 0;
    char line[100];
    for (size_t i = 0; i < sizeof(line) - 1; i++)
        line[i] = (char)('a' + i % 26);
    line[sizeof(line) - 1] = '\n';
    long c0 = cpu_us();
    for (long i = 0; i < n; i++) {
        line[0] = (char)('0' + i % 10);
        if (write(1, line, sizeof(line)) != (ssize_t)sizeof(line))
            return 1;
    }
    fprintf(stderr, "cpu_us %ld\n", cpu_us() - c0);
    if (argc > 2)
        sleep((unsigned)atoi(argv[2]));
    return 0;
}
