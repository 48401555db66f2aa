/*
 * db_client.c - the callgrind target of bench/db_cg.sh: N round trips of one command on one
 * connection, written and read with plain write()/read() and nothing else, so that the agent's
 * added instructions per command are all that differs between a bare and a traced run.
 *
 *   sw_bench_db_client redis PORT N      N x GET (after one SET) to a Redis server
 *   sw_bench_db_client pg PORT N         N x simple Query "SELECT 1" to a PostgreSQL server
 *                                        (user and database postgres, trust authentication)
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static char buf[1 << 16];

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void put(int fd, const void *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            die("write");
        p = (const char *)p + w;
        n -= (size_t)w;
    }
}

/* Reads until `want` bytes (exactly) have come. */
static void get_n(int fd, size_t want)
{
    size_t got = 0;
    while (got < want) {
        ssize_t r = read(fd, buf + got, want - got);
        if (r <= 0)
            die("read");
        got += (size_t)r;
    }
}

static uint32_t be32(const char *p)
{
    const unsigned char *b = (const unsigned char *)p;
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* PostgreSQL: reads (as libpq does: whatever has come, into one buffer) until a whole
 * ReadyForQuery has come; messages are walked in the buffer. */
static void pg_until_z(int fd)
{
    size_t have = 0, at = 0;
    for (;;) {
        while (have - at >= 5) {
            uint32_t len = be32(buf + at + 1);
            if (len < 4 || len > sizeof(buf) - 1)
                die("pg message");
            if (have - at < 1 + (size_t)len)
                break;
            char type = buf[at];
            at += 1 + len;
            if (type == 'E')
                die("pg error");
            if (type == 'Z') {
                if (at != have)
                    die("pg: bytes after ReadyForQuery");
                return;
            }
        }
        if (have == sizeof(buf))
            die("pg buffer");
        ssize_t r = read(fd, buf + have, sizeof(buf) - have);
        if (r <= 0)
            die("read");
        have += (size_t)r;
    }
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    int port = atoi(argv[2]);
    long n = atol(argv[3]);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        die("connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (strcmp(argv[1], "redis") == 0) {
        static const char set[] = "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$3\r\nval\r\n";
        static const char getc_[] = "*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n";
        put(fd, set, sizeof(set) - 1);
        get_n(fd, 5); /* +OK\r\n */
        for (long i = 0; i < n; i++) {
            put(fd, getc_, sizeof(getc_) - 1);
            get_n(fd, 9); /* $3\r\nval\r\n */
        }
    } else {
        static const char startup[] = "\0\0\0\x29\0\x03\0\0user\0postgres\0database\0postgres\0\0";
        put(fd, startup, sizeof(startup) - 1);
        pg_until_z(fd);
        static const char q[] = "Q\0\0\0\x0dSELECT 1\0";
        for (long i = 0; i < n; i++) {
            put(fd, q, sizeof(q) - 1);
            pg_until_z(fd);
        }
        put(fd, "X\0\0\0\x04", 5);
    }
    close(fd);
    return 0;
}
