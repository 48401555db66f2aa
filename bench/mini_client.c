/*
 * mini_client.c - drives sw_bench_server: N GET requests, one at a time, on one keep-alive
 * connection to 127.0.0.1:PORT; each response is read completely (its Content-Length body,
 * 64 bytes when absent) before the next request. Runs outside valgrind and without the agent.
 *
 *   sw_bench_client PORT N [PATH]
 */
#define _GNU_SOURCE /* memmem */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: sw_bench_client PORT N [PATH]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    long n = atol(argv[2]);
    const char *path = argc > 3 ? argv[3] : "/api/orders";
    char req[512];
    int rl = snprintf(req, sizeof(req),
                      "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: sw-bench\r\n"
                      "Accept: */*\r\n\r\n",
                      path, port);
    struct sockaddr_in a;
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        perror("connect");
        return 1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    for (long i = 0; i < n; i++) {
        if (write(fd, req, (size_t)rl) != rl) {
            perror("write");
            return 1;
        }
        /* The response is a fixed head + 64-byte body: read until the body is complete. */
        char buf[4096];
        size_t have = 0;
        for (;;) {
            ssize_t r = read(fd, buf + have, sizeof(buf) - have);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                fprintf(stderr, "read: connection ended after %ld responses\n", i);
                return 1;
            }
            have += (size_t)r;
            char *e = memmem(buf, have, "\r\n\r\n", 4);
            if (e) {
                size_t head = (size_t)(e + 4 - buf), body = 64;
                char *cl = memmem(buf, head, "Content-Length:", 15);
                if (cl)
                    body = strtoul(cl + 15, NULL, 10);
                if (have >= head + body)
                    break;
            }
            if (have == sizeof(buf)) {
                fprintf(stderr, "response too large\n");
                return 1;
            }
        }
    }
    close(fd);
    return 0;
}
