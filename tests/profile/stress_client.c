/*
 * stress_client.c - load for the long profiling stress (tests/profile/stress_long.sh): THREADS
 * threads, each sending RATE requests per second (one connection each, paced on
 * CLOCK_MONOTONIC) of GET PATH to 127.0.0.1:PORT for SECONDS, checking every answer (status
 * 200 and the body "ok"). Prints "requests N ok N errors N late N" and the first few bad
 * answers; exits 0 when every answer was right.
 *   stress_client PORT THREADS RATE SECONDS PATH
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int g_port, g_rate, g_seconds;
static const char *g_path;
static atomic_ulong g_req, g_ok, g_err, g_late;
static atomic_int g_shown;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void bad(const char *what, const char *got)
{
    atomic_fetch_add(&g_err, 1);
    if (atomic_fetch_add(&g_shown, 1) < 5)
        fprintf(stderr, "stress_client: %s: '%.120s'\n", what, got ? got : "");
}

static void one(void)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)g_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    atomic_fetch_add(&g_req, 1);
    if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) != 0) {
        bad("connect failed", NULL);
        if (s >= 0)
            close(s);
        return;
    }
    char req[256], buf[1024];
    int n = snprintf(req, sizeof(req),
                     "GET %s HTTP/1.1\r\nHost: stress\r\nConnection: close\r\n\r\n", g_path);
    if (write(s, req, (size_t)n) != n) {
        bad("write failed", NULL);
        close(s);
        return;
    }
    size_t got = 0;
    for (int guard = 0; guard < 1000 && got < sizeof(buf) - 1; guard++) {
        ssize_t r = read(s, buf + got, sizeof(buf) - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    buf[got] = '\0';
    close(s);
    const char *body = strstr(buf, "\r\n\r\n");
    if (strncmp(buf, "HTTP/1.1 200 ", 13) != 0 || !body || strcmp(body + 4, "ok") != 0)
        bad("bad answer", buf);
    else
        atomic_fetch_add(&g_ok, 1);
}

static void *run(void *arg)
{
    (void)arg;
    double t0 = now_s(), next = t0, step = 1.0 / g_rate;
    while (now_s() - t0 < g_seconds) {
        one();
        next += step;
        double d = next - now_s();
        if (d > 0) {
            struct timespec ts = {(time_t)d, (long)((d - (time_t)d) * 1e9)};
            nanosleep(&ts, NULL);
        } else if (d < -1.0) {
            atomic_fetch_add(&g_late, 1); /* more than 1 s behind: the pace is given up */
            next = now_s();
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: stress_client PORT THREADS RATE SECONDS PATH\n");
        return 2;
    }
    g_port = atoi(argv[1]);
    int threads = atoi(argv[2]);
    g_rate = atoi(argv[3]);
    g_seconds = atoi(argv[4]);
    g_path = argv[5];
    if (threads < 1 || threads > 64 || g_rate < 1 || g_seconds < 1)
        return 2;
    pthread_t th[64];
    for (int i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, run, NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    printf("requests %lu ok %lu errors %lu late %lu\n", atomic_load(&g_req), atomic_load(&g_ok),
           atomic_load(&g_err), atomic_load(&g_late));
    return atomic_load(&g_err) == 0 ? 0 : 1;
}
