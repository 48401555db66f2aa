/*
 * tls_nb_client.c - the HTTPS tests' non-blocking OpenSSL client (a test program: it links
 * libssl; libswagent.so never does).
 *
 *   tls_nb_client PORT CAFILE PAD BODY OUT
 *
 * Connects to 127.0.0.1:PORT with a small send buffer (SO_SNDBUF 4096), makes the socket
 * non-blocking, binds it with SSL_set_fd, and writes one POST request - a head padded with
 * X-Pad header lines to about PAD bytes, then BODY bytes of body - with ONE SSL_write call
 * repeated with exactly the same arguments after every SSL_ERROR_WANT_WRITE/WANT_READ (poll
 * in between), as OpenSSL requires. Writes the application's bytes to OUT. Then reads the
 * response (Content-Length framed; the server answers the body length it received).
 * Prints "wants=N ret=R len=L status=S body=B" and exits 0 only when SSL_write returned
 * exactly L (the application's own count) and no call failed (e.g. "bad write retry").
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void die(const char *what)
{
    fprintf(stderr, "tls_nb_client: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(1);
}

/* Waits for the direction SSL_get_error asked for (at most 20 s). */
static void wait_io(int fd, int err)
{
    struct pollfd p = {fd, err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, 0};
    if (poll(&p, 1, 20000) != 1)
        die("poll timed out");
}

int main(int argc, char **argv)
{
    if (argc != 6)
        die("usage: tls_nb_client PORT CAFILE PAD BODY OUT");
    int port = atoi(argv[1]);
    size_t pad = strtoul(argv[3], NULL, 10), body = strtoul(argv[4], NULL, 10);

    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int sb = 4096;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sb, sizeof(sb));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        die("connect");
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);

    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx || SSL_CTX_load_verify_locations(ctx, argv[2], NULL) != 1)
        die("CA");
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    /* Neither SSL_MODE_ENABLE_PARTIAL_WRITE nor ACCEPT_MOVING_WRITE_BUFFER: the strict rules. */
    SSL_CTX_clear_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL *ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    SSL_set1_host(ssl, "127.0.0.1");
    int r;
    while ((r = SSL_connect(ssl)) != 1) {
        int e = SSL_get_error(ssl, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
            die("handshake");
        wait_io(fd, e);
    }

    /* The request: one buffer, head then body. */
    size_t cap = pad + body + 4096;
    char *req = malloc(cap);
    size_t n = (size_t)snprintf(req, cap, "POST /nb HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n", port);
    for (int i = 0; n + 200 < pad; i++) {
        n += (size_t)snprintf(req + n, cap - n, "X-Pad-%d: ", i);
        for (int k = 0; k < 150; k++)
            req[n++] = (char)('a' + (i + k) % 26);
        req[n++] = '\r';
        req[n++] = '\n';
    }
    n += (size_t)snprintf(req + n, cap - n, "Content-Length: %zu\r\n\r\n", body);
    for (size_t k = 0; k < body; k++)
        req[n++] = (char)('A' + k % 23);
    FILE *out = fopen(argv[5], "wb");
    if (!out || fwrite(req, 1, n, out) != n || fclose(out) != 0)
        die("OUT");

    int wants = 0, wr;
    while ((wr = SSL_write(ssl, req, (int)n)) <= 0) {
        int e = SSL_get_error(ssl, wr);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
            die("SSL_write failed");
        wants++;
        wait_io(fd, e);
    }

    char resp[4096];
    size_t got = 0;
    for (;;) {
        r = SSL_read(ssl, resp + got, (int)(sizeof(resp) - 1 - got));
        if (r > 0) {
            got += (size_t)r;
            resp[got] = 0;
            char *h = strstr(resp, "\r\n\r\n");
            char *cl = strstr(resp, "Content-Length: ");
            if (h && cl && got >= (size_t)(h + 4 - resp) + strtoul(cl + 16, NULL, 10))
                break;
            continue;
        }
        int e = SSL_get_error(ssl, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
            die("SSL_read failed");
        wait_io(fd, e);
    }
    int status = 0;
    sscanf(resp, "HTTP/1.%*d %d", &status);
    char *b = strstr(resp, "\r\n\r\n") + 4;
    printf("wants=%d ret=%d len=%zu status=%d body=%s", wants, wr, n, status, b);
    SSL_shutdown(ssl);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
    free(req);
    return (size_t)wr == n && status == 200 && strtoul(b, NULL, 10) == body ? 0 : 1;
}
