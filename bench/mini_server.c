/*
 * mini_server.c - the smallest honest HTTP/1.1 server, the valgrind target of the instruction
 * benchmarks (bench/run.sh). Rules: blocking, single-threaded, plain libc read/write/accept/
 * close (the calls the agent interposes), no allocation per request, nothing but the work a
 * real server cannot avoid, so that what callgrind adds under the agent is the agent.
 *
 *   sw_bench_server http PORT_FILE N
 *       listens on 127.0.0.1:0, writes the port to PORT_FILE, accepts connections and serves
 *       keep-alive GET requests (a 64-byte body) until N responses are written, then exits.
 *   sw_bench_server http-at PORT N
 *       the same on 127.0.0.1:PORT, no port file (bench/startup.c's --serve times its start).
 *   sw_bench_server syscalls N
 *       N x (write 64 bytes to /dev/null) and N x (write 64 bytes to a pipe + read them back):
 *       3N syscalls on fds the agent does not track, in a process where the agent is active
 *       (a TCP socket is opened first: the agent activates with the first one, and before
 *       that every call passes with an even cheaper test).
 *
 * Instructions per request (or per syscall) come from two runs with different N: the
 * difference of the totals divided by the difference of N cancels start-up and exit costs.
 */
#define _GNU_SOURCE /* memmem */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char g_resp[] = "HTTP/1.1 200 OK\r\n"
                             "Content-Type: text/plain\r\n"
                             "Content-Length: 64\r\n"
                             "\r\n"
                             "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n";

/* Serves one connection; returns the number of responses written. */
static long serve(int fd, long budget)
{
    char buf[8192];
    size_t have = 0;
    long done = 0;

    while (done < budget) {
        char *end = have ? memmem(buf, have, "\r\n\r\n", 4) : NULL;
        if (!end) {
            if (have == sizeof(buf))
                return done; /* head too large: drop the connection */
            ssize_t n = read(fd, buf + have, sizeof(buf) - have);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                return done;
            have += (size_t)n;
            continue;
        }
        size_t used = (size_t)(end + 4 - buf);
        size_t off = 0;
        while (off < sizeof(g_resp) - 1) {
            ssize_t n = write(fd, g_resp + off, sizeof(g_resp) - 1 - off);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                return done;
            off += (size_t)n;
        }
        done++;
        memmove(buf, buf + used, have - used);
        have -= used;
    }
    return done;
}

/* port_file: write the port there (listening on port 0); else listen on `port`. */
static int run_http(const char *port_file, int port, long n)
{
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    int one = 1;
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 16) < 0 ||
        getsockname(ls, (struct sockaddr *)&a, &alen) < 0) {
        perror("listen");
        return 1;
    }
    if (port_file) {
        FILE *f = fopen(port_file, "w");
        if (!f) {
            perror(port_file);
            return 1;
        }
        fprintf(f, "%d\n", ntohs(a.sin_port));
        fclose(f);
    }
    long done = 0;
    while (done < n) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            perror("accept");
            return 1;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        done += serve(fd, n - done);
        close(fd);
    }
    close(ls);
    return 0;
}

static int run_syscalls(long n)
{
    char buf[64];
    int p[2];
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

    int tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); /* activates the agent */

    memset(buf, 'x', sizeof(buf));
    if (tcp < 0 || null < 0 || pipe(p) < 0) {
        perror("setup");
        return 1;
    }
    for (long i = 0; i < n; i++) {
        if (write(null, buf, sizeof(buf)) != (ssize_t)sizeof(buf) ||
            write(p[1], buf, sizeof(buf)) != (ssize_t)sizeof(buf) ||
            read(p[0], buf, sizeof(buf)) != (ssize_t)sizeof(buf)) {
            perror("syscall loop");
            return 1;
        }
    }
    close(null);
    close(p[0]);
    close(p[1]);
    close(tcp);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "http") == 0)
        return run_http(argv[2], 0, atol(argv[3]));
    if (argc == 4 && strcmp(argv[1], "http-at") == 0 && atoi(argv[2]) > 0)
        return run_http(NULL, atoi(argv[2]), atol(argv[3]));
    if (argc == 3 && strcmp(argv[1], "syscalls") == 0)
        return run_syscalls(atol(argv[2]));
    fprintf(stderr, "usage: sw_bench_server http PORT_FILE N | http-at PORT N | syscalls N\n");
    return 2;
}
