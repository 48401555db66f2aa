/*
 * overflow_server.c - a tiny HTTP server for tests/harness/harness_test.sh, built with
 * -fsanitize=address. It listens on a kernel-chosen loopback port, writes the port to the file
 * given as argv[1], answers one request, and then, when argv[2] is "overflow", copies the
 * request into a heap buffer one byte too small: a real heap-buffer-overflow that ASan reports
 * (through log_path, since the server runs in the background with its stderr thrown away).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(l, 1) != 0 ||
        getsockname(l, (struct sockaddr *)&a, &al) != 0)
        return 1;
    FILE *f = fopen(argv[1], "w");
    if (!f)
        return 1;
    fprintf(f, "%d\n", ntohs(a.sin_port));
    fclose(f);
    int c = accept(l, NULL, NULL);
    if (c < 0)
        return 1;
    char req[512];
    ssize_t n = read(c, req, sizeof(req) - 1);
    if (n <= 0)
        return 1;
    static const char resp[] =
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
    if (write(c, resp, sizeof(resp) - 1) < 0)
        return 1;
    close(c);
    close(l);
    /* After the answer (the client, and so the test, sees nothing wrong): the bug under test,
       room for the request's bytes but not for the terminating NUL. */
    size_t len = (size_t)n;
    size_t cap = strcmp(argv[2], "overflow") == 0 ? len : len + 1;
    char *copy = malloc(cap);
    if (!copy)
        return 1;
    memcpy(copy, req, len);
    copy[len] = '\0';
    int first = copy[0];
    free(copy);
    return first == 'G' ? 0 : 1;
}
