/*
 * http_client.h - the bench's client side of one keep-alive HTTP/1.1 exchange, shared by
 * sw_bench_client (mini_client.c) and sw_bench_startup --serve (startup.c). Bench tools only
 * (never loaded into a traced process).
 */
#ifndef SW_BENCH_HTTP_CLIENT_H
#define SW_BENCH_HTTP_CLIENT_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The GET request for `path` on 127.0.0.1:port into req[cap]; its length, or -1 if too long. */
static inline int bench_http_request(char *req, size_t cap, const char *path, int port)
{
    int n = snprintf(req, cap,
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: sw-bench\r\n"
                     "Accept: */*\r\n\r\n",
                     path, port);
    return n > 0 && (size_t)n < cap ? n : -1;
}

/*
 * Sends `req` and reads one whole response: its head, then its Content-Length body (64 bytes
 * when it has none: sw_bench_server's). 0, or -1 when the connection ended or the response does
 * not fit in 16 KiB.
 */
static inline int bench_http_exchange(int fd, const char *req, size_t rl)
{
    char buf[16384];
    size_t have = 0;
    if (write(fd, req, rl) != (ssize_t)rl)
        return -1;
    for (;;) {
        ssize_t r = read(fd, buf + have, sizeof(buf) - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        have += (size_t)r;
        char *e = memmem(buf, have, "\r\n\r\n", 4);
        if (e) {
            size_t head = (size_t)(e + 4 - buf), body = 64;
            char *cl = memmem(buf, head, "Content-Length:", 15);
            if (cl)
                body = strtoul(cl + 15, NULL, 10);
            if (head + body > sizeof(buf))
                return -1;
            if (have >= head + body)
                return 0;
        }
        if (have == sizeof(buf))
            return -1;
    }
}

#endif /* SW_BENCH_HTTP_CLIENT_H */
