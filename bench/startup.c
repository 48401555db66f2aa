/*
 * startup.c - paired start-up timing of a short command with and without preloaded libraries.
 *
 *   sw_bench_startup RUNS [--serve=PORT:PATH] LABEL=LIB [LABEL=LIB ...] -- CMD [ARGS]
 *
 * LIB may be empty (no LD_PRELOAD). Each round runs CMD once per variant, in an order rotated
 * every round (so no variant always runs first after another), with posix_spawn + wait4, and
 * records the wall time from spawn to reap and the child's peak RSS (ru_maxrss). Prints one
 * line per variant:
 *
 *   LABEL median_us=.. p10_us=.. p90_us=.. ratio_median=.. ratio_p10=.. ratio_p90=.. maxrss_kb=..
 *
 * where ratio_* are the distribution of the per-round ratio to the first variant (paired).
 *
 * --serve: CMD is a server listening on 127.0.0.1:PORT. Each run connects as soon as it
 * accepts (a refused connect is retried every 100 us, for 20 s at most), sends two GET PATH
 * requests on one keep-alive connection, one after the other, each response read whole
 * (Content-Length), then stops the server (SIGTERM) and reaps it. The time is spawn -> first
 * response (its start-up as a client sees it) and the line gets second_* fields (spawn ->
 * second response: the work a server does after its first response, such as a tracer's first
 * segment, delays the second) and exit_* (spawn -> reaped).
 * Bench tool (stdio, malloc); never loaded into a traced process.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "http_client.h"

extern char **environ;

#define MAXV 8

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_d);
    int i = (int)(p / 100.0 * (n - 1) + 0.5);
    return v[i];
}

/* A connection to 127.0.0.1:port once the server listens; -1 after 20 s or on an error. */
static int connect_when_up(int port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < 200000; i++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            return fd;
        }
        int e = errno;
        close(fd);
        if (e != ECONNREFUSED)
            return -1;
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

/* The environment of a variant: ours without LD_PRELOAD, plus LD_PRELOAD=lib if lib is set. */
static char **make_env(const char *lib)
{
    int n = 0;
    while (environ[n])
        n++;
    char **e = calloc((size_t)n + 2, sizeof(*e));
    int k = 0;
    for (int i = 0; i < n; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
            e[k++] = environ[i];
    if (lib && *lib) {
        size_t len = strlen(lib) + 12;
        e[k] = malloc(len);
        snprintf(e[k], len, "LD_PRELOAD=%s", lib);
        k++;
    }
    e[k] = NULL;
    return e;
}

int main(int argc, char **argv)
{
    int runs, nv = 0, cmd = 0, port = 0;
    const char *label[MAXV], *path = NULL;
    char req[512];
    size_t rl = 0;
    char **env[MAXV];

    if (argc < 4)
        goto usage;
    runs = atoi(argv[1]);
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            cmd = i + 1;
            break;
        }
        if (strncmp(argv[i], "--serve=", 8) == 0) {
            port = atoi(argv[i] + 8);
            path = strchr(argv[i] + 8, ':');
            if (port <= 0 || port > 65535 || !path || path[1] != '/')
                goto usage;
            path++;
            int n = bench_http_request(req, sizeof(req), path, port);
            if (n < 0)
                goto usage;
            rl = (size_t)n;
            continue;
        }
        char *eq = strchr(argv[i], '=');
        if (!eq || nv == MAXV)
            goto usage;
        *eq = '\0';
        label[nv] = argv[i];
        env[nv] = make_env(eq + 1);
        nv++;
    }
    if (!cmd || cmd >= argc || nv == 0 || runs < 1)
        goto usage;

    double *t[MAXV], *ratio[MAXV], *t2[MAXV], *r2[MAXV], *tx[MAXV], *rx[MAXV];
    long maxrss[MAXV] = {0}, minflt[MAXV] = {0};
    for (int v = 0; v < nv; v++) {
        t[v] = calloc((size_t)runs, sizeof(double));
        ratio[v] = calloc((size_t)runs, sizeof(double));
        t2[v] = calloc((size_t)runs, sizeof(double));
        r2[v] = calloc((size_t)runs, sizeof(double));
        tx[v] = calloc((size_t)runs, sizeof(double));
        rx[v] = calloc((size_t)runs, sizeof(double));
    }
    for (int r = 0; r < runs; r++) {
        for (int j = 0; j < nv; j++) {
            int v = (j + r) % nv;
            pid_t pid;
            int st;
            struct rusage ru;
            double t0 = now_us();
            if (posix_spawn(&pid, argv[cmd], NULL, NULL, argv + cmd, env[v]) != 0) {
                perror("posix_spawn");
                return 1;
            }
            if (port) {
                int fd = connect_when_up(port);
                if (fd < 0 || bench_http_exchange(fd, req, rl) < 0) {
                    fprintf(stderr, "sw_bench_startup: %s: no response on port %d\n", label[v],
                            port);
                    kill(pid, SIGKILL);
                    waitpid(pid, &st, 0);
                    return 1;
                }
                t[v][r] = now_us() - t0;
                if (bench_http_exchange(fd, req, rl) < 0) {
                    fprintf(stderr, "sw_bench_startup: %s: no second response\n", label[v]);
                    kill(pid, SIGKILL);
                    waitpid(pid, &st, 0);
                    return 1;
                }
                t2[v][r] = now_us() - t0;
                close(fd);
                kill(pid, SIGTERM);
            }
            if (wait4(pid, &st, 0, &ru) != pid) {
                perror("wait4");
                return 1;
            }
            tx[v][r] = now_us() - t0;
            if (!port)
                t[v][r] = tx[v][r];
            if (ru.ru_maxrss > maxrss[v])
                maxrss[v] = ru.ru_maxrss;
            if (r == runs - 1)
                minflt[v] = ru.ru_minflt; /* the same in every run (the last: warm caches) */
        }
        for (int v = 0; v < nv; v++) {
            ratio[v][r] = t[v][r] / t[0][r];
            r2[v][r] = port ? t2[v][r] / t2[0][r] : 0;
            rx[v][r] = tx[v][r] / tx[0][r];
        }
    }
    for (int v = 0; v < nv; v++) {
        double med = pct(t[v], runs, 50), p10 = pct(t[v], runs, 10), p90 = pct(t[v], runs, 90);
        double rm = pct(ratio[v], runs, 50), r10 = pct(ratio[v], runs, 10),
               r90 = pct(ratio[v], runs, 90);
        printf("%s median_us=%.1f p10_us=%.1f p90_us=%.1f ratio_median=%.3f ratio_p10=%.3f "
               "ratio_p90=%.3f maxrss_kb=%ld minflt=%ld",
               label[v], med, p10, p90, rm, r10, r90, maxrss[v], minflt[v]);
        if (port)
            printf(" second_median_us=%.1f second_ratio_median=%.3f second_ratio_p10=%.3f "
                   "second_ratio_p90=%.3f exit_median_us=%.1f exit_ratio_median=%.3f",
                   pct(t2[v], runs, 50), pct(r2[v], runs, 50), pct(r2[v], runs, 10),
                   pct(r2[v], runs, 90), pct(tx[v], runs, 50), pct(rx[v], runs, 50));
        printf("\n");
    }
    return 0;
usage:
    fprintf(stderr,
            "usage: sw_bench_startup RUNS [--serve=PORT:PATH] LABEL=LIB [LABEL=LIB ...] -- CMD "
            "[ARGS]\n");
    return 2;
}
