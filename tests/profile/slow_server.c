/*
 * slow_server.c - the trace profiling tests' HTTP server (tests/profile/profile.sh): one
 * request per connection, served on the accepting thread, "PORT n" on stdout once listening.
 *
 *   GET /slow  ~300 ms busy in slow_busy_function (a named function for the profile tree)
 *   GET /fast  at once
 *   GET /wait  ~60 ms busy, then waits the agent wraps (epoll_wait, nanosleep, poll, select,
 *              clock_nanosleep, usleep, sigtimedwait) and a read of a pipe written 100 ms
 *              later: answers "ok", or "EINTR <call>" for the first wait that was interrupted
 *   GET /nap   ~2 ms busy, usleep(4 ms), poll(6 ms): "ok", or what was interrupted/short
 *   GET /sleeps ~30 ms busy, then sleep(1), usleep(200 ms), nanosleep(200 ms), each timed:
 *              answers "ok", or the first that failed, returned early or was cut short
 *   GET /slow?reexec  every signal blocked, ~100 ms busy, then the server execs itself
 *              (inheriting the listening socket and the connection); the new image unblocks
 *              the signals and answers "reexec"
 *   GET /forkworkers  answers "forked", then forks two workers that serve from then on
 *              (this process waits for them; they die with it)
 *   GET /quit  exits
 * With SLOW_THREADS=1 in the environment each connection is served by a thread of its own.
 * Built with frame pointers (-fno-omit-frame-pointer): the agent's sampler walks them.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static __thread volatile unsigned long sink; /* per thread: SLOW_THREADS serves in parallel */
static char **g_argv;
static int g_listen = -1;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void busy_inner(void)
{
    for (int i = 0; i < 1000; i++)
        sink += (unsigned long)i * 2654435761u;
}

__attribute__((noinline)) void slow_busy_function(double seconds)
{
    double end = now_s() + seconds;
    while (now_s() < end)
        busy_inner();
}

static void *late_writer(void *arg)
{
    int fd = (int)(intptr_t)arg;
    struct timespec t = {0, 100 * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR)
        ;
    if (write(fd, "x", 1) != 1)
        return NULL;
    return NULL;
}

/* The waits; returns NULL or the name of the first one that failed with EINTR. */
__attribute__((noinline)) static const char *wait_battery(void)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev;
    if (epoll_wait(ep, &ev, 1, 150) < 0 && errno == EINTR)
        return "epoll_wait";
    close(ep);
    struct timespec t = {0, 100 * 1000000L};
    if (nanosleep(&t, NULL) < 0 && errno == EINTR)
        return "nanosleep";
    if (poll(NULL, 0, 60) < 0 && errno == EINTR)
        return "poll";
    struct timeval tv = {0, 60000};
    if (select(0, NULL, NULL, NULL, &tv) < 0 && errno == EINTR)
        return "select";
    t.tv_nsec = 60 * 1000000L;
    if (clock_nanosleep(CLOCK_MONOTONIC, 0, &t, NULL) == EINTR)
        return "clock_nanosleep";
    if (usleep(60000) < 0 && errno == EINTR)
        return "usleep";
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    t.tv_nsec = 60 * 1000000L;
    if (sigtimedwait(&set, NULL, &t) < 0 && errno == EINTR)
        return "sigtimedwait";
    int p[2];
    if (pipe(p) != 0)
        return "pipe";
    pthread_t th;
    pthread_create(&th, NULL, late_writer, (void *)(intptr_t)p[1]);
    char c;
    ssize_t r = read(p[0], &c, 1);
    int e = errno;
    pthread_join(th, NULL);
    close(p[0]);
    close(p[1]);
    if (r < 0 && e == EINTR)
        return "read";
    return NULL;
}

/*
 * sleep(1), usleep(200 ms), nanosleep(200 ms): each timed on CLOCK_MONOTONIC. Writes "ok", or
 * what went wrong: "EINTR <call>", "<call> returned <r>", "short <call> <ms>" (it returned before
 * its time: a sleep cut short by a signal).
 */
__attribute__((noinline)) static void sleep_battery(char *out, size_t cap)
{
    double t0 = now_s();
    unsigned left = sleep(1);
    double ms = (now_s() - t0) * 1e3;
    if (left != 0) {
        snprintf(out, cap, "sleep returned %u", left);
        return;
    }
    if (ms < 999) {
        snprintf(out, cap, "short sleep %.1f", ms);
        return;
    }
    t0 = now_s();
    int r = usleep(200000);
    ms = (now_s() - t0) * 1e3;
    if (r != 0) {
        snprintf(out, cap, "%s usleep", errno == EINTR ? "EINTR" : "failed");
        return;
    }
    if (ms < 199) {
        snprintf(out, cap, "short usleep %.1f", ms);
        return;
    }
    struct timespec t = {0, 200 * 1000000L}, rem = {0, 0};
    t0 = now_s();
    r = nanosleep(&t, &rem);
    ms = (now_s() - t0) * 1e3;
    if (r != 0) {
        snprintf(out, cap, "%s nanosleep (%ld ns left)", errno == EINTR ? "EINTR" : "failed",
                 rem.tv_nsec);
        return;
    }
    if (ms < 199) {
        snprintf(out, cap, "short nanosleep %.1f", ms);
        return;
    }
    snprintf(out, cap, "ok");
}

static void reply(int fd, const char *body)
{
    char buf[256];
    int n = snprintf(buf, sizeof(buf),
                     "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     strlen(body), body);
    if (write(fd, buf, (size_t)n) != n)
        perror("write");
}

/* Serves one connection and closes it; true for GET /quit. */
static bool serve(int c)
{
    char req[2048];
    size_t got = 0;
    while (got < sizeof(req) - 1) {
        ssize_t n = read(c, req + got, sizeof(req) - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
        req[got] = '\0';
        if (strstr(req, "\r\n\r\n"))
            break;
    }
    req[got] = '\0';
    if (strncmp(req, "GET /slow ", 10) == 0) {
        slow_busy_function(0.3);
        reply(c, "slow");
    } else if (strncmp(req, "GET /wait ", 10) == 0) {
        slow_busy_function(0.06);
        const char *bad = wait_battery();
        char body[64];
        snprintf(body, sizeof(body), "%s%s", bad ? "EINTR " : "ok", bad ? bad : "");
        reply(c, body);
    } else if (strncmp(req, "GET /slow?reexec ", 17) == 0) {
        /* As a server that masks signals around an exec: every signal blocked, ~100 ms busy
           (a profiled request's timer expires meanwhile, held by the mask), then the server
           execs itself; the new image unblocks everything and answers on the inherited
           connection (main). */
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, NULL);
        slow_busy_function(0.1);
        char fd[16], lfd[16];
        snprintf(fd, sizeof(fd), "%d", c);
        snprintf(lfd, sizeof(lfd), "%d", g_listen);
        fcntl(c, F_SETFD, 0);
        fcntl(g_listen, F_SETFD, 0);
        setenv("SLOW_REPLY_FD", fd, 1);
        setenv("SLOW_LISTEN_FD", lfd, 1);
        execv("/proc/self/exe", g_argv);
        perror("execv");
        exit(4);
    } else if (strncmp(req, "GET /forkworkers ", 17) == 0) {
        /* Two worker processes take over accepting; this one only waits for them. */
        reply(c, "forked");
        close(c);
        for (int i = 0; i < 2; i++) {
            pid_t p = fork();
            if (p == 0) {
                prctl(PR_SET_PDEATHSIG, SIGTERM);
                return false; /* back to main's loop, as a worker */
            }
        }
        for (int guard = 0; guard < 2; guard++)
            if (wait(NULL) < 0)
                break;
        exit(0);
    } else if (strncmp(req, "GET /nap ", 9) == 0) {
        /* The long stress's request: ~2 ms busy, then 4 ms in usleep and 6 ms in poll. */
        slow_busy_function(0.002);
        double t0 = now_s();
        const char *badw = usleep(4000) != 0 ? "EINTR usleep" : NULL;
        if (!badw && poll(NULL, 0, 6) != 0)
            badw = "EINTR poll";
        if (!badw && now_s() - t0 < 0.0099)
            badw = "short wait";
        reply(c, badw ? badw : "ok");
    } else if (strncmp(req, "GET /sleeps ", 12) == 0) {
        slow_busy_function(0.03);
        char body[96];
        sleep_battery(body, sizeof(body));
        reply(c, body);
    } else if (strncmp(req, "GET /quit ", 10) == 0) {
        reply(c, "bye");
        close(c);
        return true;
    } else {
        reply(c, "fast");
    }
    close(c);
    return false;
}

static int serve_loop(bool threads);

static void *serve_thread(void *arg)
{
    if (serve((int)(intptr_t)arg))
        exit(0);
    return NULL;
}

int main(int argc, char **argv)
{
    (void)argc;
    g_argv = argv;
    bool threads = getenv("SLOW_THREADS") != NULL;
    const char *lfd = getenv("SLOW_LISTEN_FD");
    if (lfd) {
        /* Re-executed by GET /slow?reexec: the signals unblocked, that request answered. */
        sigset_t none, pend;
        sigpending(&pend);
        if (sigismember(&pend, SIGRTMAX - 3) == 1) /* the profiling signal (profile.sh) */
            fprintf(stderr, "the profiling signal is pending at the start of the new image\n");
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        g_listen = atoi(lfd);
        fcntl(g_listen, F_SETFD, FD_CLOEXEC);
        const char *rfd = getenv("SLOW_REPLY_FD");
        if (rfd) {
            reply(atoi(rfd), "reexec");
            close(atoi(rfd));
        }
        unsetenv("SLOW_LISTEN_FD");
        unsetenv("SLOW_REPLY_FD");
        return serve_loop(threads);
    }
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    if (bind(s, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(s, 64) != 0 ||
        getsockname(s, (struct sockaddr *)&a, &al) != 0) {
        perror("listen");
        return 1;
    }
    printf("PORT %d\n", ntohs(a.sin_port));
    fflush(stdout);
    g_listen = s;
    return serve_loop(threads);
}

static int serve_loop(bool threads)
{
    int s = g_listen;
    for (;;) {
        int c = accept(s, NULL, NULL);
        if (c < 0) {
            if (errno == EINTR) {
                fprintf(stderr, "EINTR in accept\n");
                return 3;
            }
            continue;
        }
        if (threads) {
            pthread_t th;
            pthread_attr_t at;
            pthread_attr_init(&at);
            pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
            if (pthread_create(&th, &at, serve_thread, (void *)(intptr_t)c) != 0)
                close(c);
            pthread_attr_destroy(&at);
            continue;
        }
        if (serve(c))
            return 0;
    }
}
