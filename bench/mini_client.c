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

#include "http_client.h"

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
    int rl = bench_http_request(req, sizeof(req), path, port);
    if (rl < 0) {
        fprintf(stderr, "path too long\n");
        return 2;
    }
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
        if (bench_http_exchange(fd, req, (size_t)rl) < 0) {
            fprintf(stderr, "connection ended or response too large after %ld responses\n", i);
            return 1;
        }
    }
    close(fd);
    return 0;
}
