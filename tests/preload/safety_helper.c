/*
 * safety_helper.c - an application that does unfriendly things to the agent (tests/safety.cmake,
 * tests/preload/safety_test.sh). Plain program: the agent comes in by LD_PRELOAD or dlopen.
 *
 *   safety_helper get PORT              one GET to 127.0.0.1:PORT (the echo server); prints
 *                                       "SW8 <n>": sw8 lines the server saw
 *   safety_helper dlopen LIB PORT       loads the agent with dlopen (not LD_PRELOAD: the loader
 *                                       ignores LD_PRELOAD paths in a setuid process, dlopen is
 *                                       not restricted) and makes the GET through the agent's
 *                                       own socket functions: "SW8 1" means the agent ran
 *   safety_helper closefds MODE PORT FILE
 *                                       MODE closefrom (close 3..1023 one by one), close_range,
 *                                       or dup2 (the app's file dup2'ed over the agent's log
 *                                       fd); then the app opens FILE (closefrom/close_range: it
 *                                       typically gets the log fd's number), writes "app1\n",
 *                                       makes the agent log (a GET whose segment cannot get a
 *                                       ring), writes "app2\n". FILE must hold exactly
 *                                       "app1\napp2\n" afterwards: the agent never wrote into it
 *   safety_helper cloexec PORT          after a GET, every fd above 2 (the agent's) must be
 *                                       close-on-exec
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <pthread.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

struct fns {
    int (*socket)(int, int, int);
    int (*connect)(int, const struct sockaddr *, socklen_t);
    ssize_t (*write)(int, const void *, size_t);
    ssize_t (*read)(int, void *, size_t);
    int (*close)(int);
};

/* One GET; returns the number of "sw8: " lines the echo server reports, -1 on failure. */
static int get(const struct fns *f, int port)
{
    int fd = f->socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || f->connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        return -1;
    static const char req[] = "GET /safety HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    if (f->write(fd, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1)
        return -1;
    char buf[16384];
    size_t have = 0;
    long clen = -1;
    char *body = NULL;
    while (have < sizeof(buf) - 1) {
        ssize_t r = f->read(fd, buf + have, sizeof(buf) - 1 - have);
        if (r <= 0)
            break;
        have += (size_t)r;
        buf[have] = 0;
        if (!body && (body = strstr(buf, "\r\n\r\n")) != NULL) {
            body += 4;
            char *cl = strcasestr(buf, "\r\nContent-Length:");
            clen = cl ? strtol(cl + 17, NULL, 10) : -1;
        }
        if (body && clen >= 0 && (size_t)(buf + have - body) >= (size_t)clen)
            break;
    }
    f->close(fd);
    if (!body)
        return -1;
    int n = 0;
    for (char *p = body; (p = strcasestr(p, "\nsw8: ")) != NULL; p++)
        n++;
    if (strncasecmp(body, "GET ", 4) == 0 && strcasestr(body, "\r\nsw8: ") == NULL && n == 0)
        return 0;
    return n;
}

static const struct fns libc_fns = {socket, connect, write, read, close};

/* The fd whose /proc/self/fd link ends in "/swagent.log", or -1. */
static int find_log_fd(void)
{
    DIR *d = opendir("/proc/self/fd");
    int found = -1;
    char path[64], target[4096];
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        int fd = atoi(e->d_name);
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(path, target, sizeof(target) - 1);
        if (n > 0) {
            target[n] = 0;
            size_t l = strlen(target);
            if (l >= 12 && strcmp(target + l - 12, "/swagent.log") == 0)
                found = fd;
        }
    }
    if (d)
        closedir(d);
    return found;
}

/* Opens `path` so that it gets fd number `want` (the lower free numbers are filled first). */
static int open_at_number(const char *path, int want)
{
    int f;
    while ((f = open("/dev/null", O_RDONLY)) >= 0 && f < want)
        ;
    if (f >= 0)
        close(f);
    return open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
}

/* race: threads that make their first internet socket at the same moment (the agent's
 * activation, agent.c): every one of their requests must carry sw8. */
static pthread_barrier_t race_barrier;
static int race_port;

static void *race_thread(void *arg)
{
    pthread_barrier_wait(&race_barrier);
    *(int *)arg = get(&libc_fns, race_port);
    return NULL;
}

static int race(int port, int n)
{
    pthread_t t[64];
    int res[64], ok = 0;
    if (n < 1 || n > 64)
        return -1;
    race_port = port;
    pthread_barrier_init(&race_barrier, NULL, (unsigned)n);
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, race_thread, &res[i]) != 0)
            return -1;
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        ok += res[i] == 1;
    }
    return ok;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && strcmp(argv[1], "race") == 0) {
        printf("SW8 %d\n", race(atoi(argv[2]), atoi(argv[3])));
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "get") == 0) {
        printf("SW8 %d\n", get(&libc_fns, atoi(argv[2])));
        return 0;
    }
    if (argc >= 4 && strcmp(argv[1], "dlopen") == 0) {
        void *h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            return 1;
        }
        struct fns f = {dlsym(h, "socket"), dlsym(h, "connect"), dlsym(h, "write"),
                        dlsym(h, "read"), dlsym(h, "close")};
        if (!f.socket || !f.connect || !f.write || !f.read || !f.close) {
            fprintf(stderr, "the agent's wrappers are missing\n");
            return 1;
        }
        printf("SW8 %d\n", get(&f, atoi(argv[3])));
        return 0;
    }
    if (argc >= 5 && strcmp(argv[1], "closefds") == 0) {
        const char *mode = argv[2];
        int logfd = find_log_fd();
        if (logfd < 0) {
            fprintf(stderr, "the agent's log fd was not found\n");
            return 1;
        }
        int app;
        if (strcmp(mode, "closefrom") == 0) {
            for (int fd = 3; fd < 1024; fd++)
                close(fd);
            app = open_at_number(argv[4], logfd);
        } else if (strcmp(mode, "close_range") == 0) {
            if (syscall(SYS_close_range, 3U, ~0U, 0) != 0 && close_range(3, ~0U, 0) != 0) {
                perror("close_range");
                return 1;
            }
            app = open_at_number(argv[4], logfd);
        } else {
            int f = open(argv[4], O_WRONLY | O_CREAT | O_TRUNC, 0600);
            app = dup2(f, logfd);
            close(f);
        }
        if (app < 0) {
            perror("open");
            return 1;
        }
        printf("log fd %d, app fd %d\n", logfd, app);
        if (app != logfd) {
            fprintf(stderr, "the application's file did not get the log fd's number\n");
            return 1;
        }
        if (write(app, "app1\n", 5) != 5)
            return 1;
        int n = get(&libc_fns, atoi(argv[3]));
        if (write(app, "app2\n", 5) != 5)
            return 1;
        close(app);
        printf("SW8 %d\n", n);
        return n < 0;
    }
    if (argc >= 3 && strcmp(argv[1], "cloexec") == 0) {
        int n = get(&libc_fns, atoi(argv[2]));
        int bad = 0, seen = 0;
        for (int fd = 3; fd < 1024; fd++) {
            int fl = fcntl(fd, F_GETFD);
            if (fl < 0)
                continue;
            seen++;
            if (!(fl & FD_CLOEXEC)) {
                fprintf(stderr, "fd %d is not close-on-exec\n", fd);
                bad++;
            }
        }
        printf("SW8 %d fds %d\n", n, seen);
        return bad || n != 1 || seen == 0;
    }
    fprintf(stderr, "usage: see the file banner\n");
    return 2;
}
