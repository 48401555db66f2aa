/*
 * h2_pair.c - a gRPC-like unary exchange over cleartext HTTP/2 (prior knowledge) for the
 * agent's cost on the application thread (bench/h2_cg.sh, issue 37): plain blocking sockets,
 * one connection, N calls one after the other, header blocks as an HPACK encoder with a dynamic
 * table writes them (the first call's fields indexed, later calls one byte per field), as grpc
 * core does.
 *
 *   sw_bench_h2_pair server N      listens on a free loopback port, prints "PORT p", serves N
 *   sw_bench_h2_pair client PORT N  N calls: HEADERS + DATA (END_STREAM) in one write; reads
 *                                   HEADERS, DATA, trailers (grpc-status 0, END_STREAM)
 * With H2_PAIR_FAIL set (both sides), every call's trailers say grpc-status 5 (tests).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
static const unsigned char settings[] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
static const unsigned char settings_ack[] = {0, 0, 0, 4, 1, 0, 0, 0, 0};
static const unsigned char msg[15] = {0,   0,   0,   0,   10,  'h', 'e', 'l',
                                      'l', 'o', ' ', 'g', 'r', 'p', 'c'};

static void die(const char *w)
{
    perror(w);
    exit(1);
}

static void put_all(int fd, const void *p, size_t n)
{
    const char *b = p;
    while (n) {
        ssize_t r = write(fd, b, n);
        if (r <= 0)
            die("write");
        b += r;
        n -= (size_t)r;
    }
}

static void get_all(int fd, void *p, size_t n)
{
    char *b = p;
    while (n) {
        ssize_t r = read(fd, b, n);
        if (r <= 0)
            die("read");
        b += r;
        n -= (size_t)r;
    }
}

static size_t frame(unsigned char *q, size_t len, int type, int flags, unsigned sid)
{
    q[0] = (unsigned char)(len >> 16);
    q[1] = (unsigned char)(len >> 8);
    q[2] = (unsigned char)len;
    q[3] = (unsigned char)type;
    q[4] = (unsigned char)flags;
    q[5] = (unsigned char)(sid >> 24);
    q[6] = (unsigned char)(sid >> 16);
    q[7] = (unsigned char)(sid >> 8);
    q[8] = (unsigned char)sid;
    return 9;
}

static size_t lit(unsigned char *q, unsigned char first, const char *name, const char *val)
{
    size_t o = 0;
    q[o++] = first;
    if (name) {
        q[o++] = (unsigned char)strlen(name);
        memcpy(q + o, name, strlen(name));
        o += strlen(name);
    }
    q[o++] = (unsigned char)strlen(val);
    memcpy(q + o, val, strlen(val));
    return o + strlen(val);
}

/* The request of call i: HEADERS (END_HEADERS) + DATA (END_STREAM). */
static size_t request(unsigned char *q, int i, const char *authority)
{
    unsigned char blk[256];
    size_t b = 0;
    blk[b++] = 0x83; /* :method POST */
    blk[b++] = 0x86; /* :scheme http */
    if (i == 0) {
        b += lit(blk + b, 0x44, NULL, "/helloworld.Greeter/SayHello");
        b += lit(blk + b, 0x41, NULL, authority);
        b += lit(blk + b, 0x5f, NULL, "application/grpc");
        b += lit(blk + b, 0x40, "te", "trailers");
    } else {
        blk[b++] = 0xc1; /* :path (65) */
        blk[b++] = 0xc0; /* :authority (64) */
        blk[b++] = 0xbf; /* content-type (63) */
        blk[b++] = 0xbe; /* te (62) */
    }
    unsigned sid = (unsigned)(2 * i + 1);
    size_t o = frame(q, b, 1, 4, sid);
    memcpy(q + o, blk, b);
    o += b;
    o += frame(q + o, sizeof(msg), 0, 1, sid);
    memcpy(q + o, msg, sizeof(msg));
    return o + sizeof(msg);
}

/* The response of call i: HEADERS, DATA, trailers HEADERS (END_STREAM). */
static size_t response(unsigned char *q, int i)
{
    unsigned sid = (unsigned)(2 * i + 1);
    unsigned char blk[64];
    size_t b = 0, o;
    blk[b++] = 0x88; /* :status 200 */
    if (i == 0)
        b += lit(blk + b, 0x5f, NULL, "application/grpc");
    else /* content-type: 63 (62 when the trailers add nothing to the table) */
        blk[b++] = getenv("H2_PAIR_FAIL") ? 0xbe : 0xbf;
    o = frame(q, b, 1, 4, sid);
    memcpy(q + o, blk, b);
    o += b;
    o += frame(q + o, sizeof(msg), 0, 0, sid);
    memcpy(q + o, msg, sizeof(msg));
    o += sizeof(msg);
    b = 0;
    if (getenv("H2_PAIR_FAIL")) /* every call fails: NOT_FOUND, a literal left out of the table */
        b += lit(blk + b, 0x00, "grpc-status", "5");
    else if (i == 0)
        b += lit(blk + b, 0x40, "grpc-status", "0");
    else
        blk[b++] = 0xbe; /* grpc-status: 0 (62) */
    o += frame(q + o, b, 1, 5, sid);
    memcpy(q + o, blk, b);
    return o + b;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    static unsigned char buf[4096], got[4096];
    int one = 1;
    if (strcmp(argv[1], "server") == 0) {
        int n = atoi(argv[2]);
        int l = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t al = sizeof(a);
        if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 4) ||
            getsockname(l, (struct sockaddr *)&a, &al))
            die("listen");
        printf("PORT %d\n", ntohs(a.sin_port));
        fflush(stdout);
        int c = accept(l, NULL, NULL);
        if (c < 0)
            die("accept");
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        put_all(c, settings, sizeof(settings));
        get_all(c, got, 24 + sizeof(settings)); /* preface + SETTINGS */
        put_all(c, settings_ack, sizeof(settings_ack));
        get_all(c, got, sizeof(settings_ack));
        char auth[64];
        snprintf(auth, sizeof(auth), "127.0.0.1:%d", ntohs(a.sin_port));
        for (int i = 0; i < n; i++) {
            /* the request as the client sent it, plus the sw8 a traced client inserted: read
             * the HEADERS frame by its length, then the DATA frame */
            get_all(c, got, 9);
            size_t hl = (size_t)got[0] << 16 | (size_t)got[1] << 8 | got[2];
            get_all(c, got + 9, hl + 9 + sizeof(msg));
            size_t k = response(buf, i);
            put_all(c, buf, k);
        }
        close(c);
        close(l);
        return 0;
    }
    int port = atoi(argv[2]), n = argc > 3 ? atoi(argv[3]) : 1;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)))
        die("connect");
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    memcpy(buf, preface, 24);
    memcpy(buf + 24, settings, sizeof(settings));
    put_all(s, buf, 24 + sizeof(settings));
    get_all(s, got, sizeof(settings)); /* the server's SETTINGS */
    put_all(s, settings_ack, sizeof(settings_ack));
    get_all(s, got, sizeof(settings_ack));
    char auth[64];
    snprintf(auth, sizeof(auth), "127.0.0.1:%d", port);
    for (int i = 0; i < n; i++) {
        size_t k = request(buf, i, auth);
        put_all(s, buf, k);
        get_all(s, got, response(buf, i));
    }
    close(s);
    return 0;
}
