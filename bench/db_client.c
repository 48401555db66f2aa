/*
 * db_client.c - the callgrind target of bench/db_cg.sh: N round trips of one command on one
 * connection, written and read with plain write()/read() and nothing else, so that the agent's
 * added instructions per command are all that differs between a bare and a traced run.
 *
 *   sw_bench_db_client redis PORT N      N x GET (after one SET) to a Redis server
 *   sw_bench_db_client redis-set PORT N  N x SET
 *   sw_bench_db_client redis-p16 PORT N  N x 16 GETs in one write, their 16 replies read
 *   sw_bench_db_client pg PORT N         N x simple Query "SELECT 1" to a PostgreSQL server
 *                                        (user and database postgres, trust authentication)
 *   sw_bench_db_client pg-ext PORT N     N x Parse/Bind/Execute/Sync of "SELECT 1" (unnamed
 *                                        statement, one write: pgbench -M extended's shape)
 *   sw_bench_db_client mc PORT N         N x "get key" (after one set) to a memcached server
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
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
    const char *m = argv[1];
    if (strcmp(m, "redis") == 0 || strcmp(m, "redis-set") == 0 || strcmp(m, "redis-p16") == 0) {
        static const char set[] = "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$3\r\nval\r\n";
        static const char getc_[] = "*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n";
        put(fd, set, sizeof(set) - 1);
        get_n(fd, 5); /* +OK\r\n */
        if (strcmp(m, "redis-p16") == 0) {
            static char p16[16 * (sizeof(getc_) - 1)];
            for (int k = 0; k < 16; k++)
                memcpy(p16 + k * (sizeof(getc_) - 1), getc_, sizeof(getc_) - 1);
            for (long i = 0; i < n; i++) {
                put(fd, p16, sizeof(p16));
                get_n(fd, 16 * 9);
            }
        } else {
            bool is_set = strcmp(m, "redis-set") == 0;
            for (long i = 0; i < n; i++) {
                if (is_set) {
                    put(fd, set, sizeof(set) - 1);
                    get_n(fd, 5);
                } else {
                    put(fd, getc_, sizeof(getc_) - 1);
                    get_n(fd, 9); /* $3\r\nval\r\n */
                }
            }
        }
    } else if (strcmp(m, "mc") == 0) {
        static const char set[] = "set key 0 0 3\r\nval\r\n";
        static const char get[] = "get key\r\n";
        put(fd, set, sizeof(set) - 1);
        get_n(fd, 8); /* STORED\r\n */
        for (long i = 0; i < n; i++) {
            put(fd, get, sizeof(get) - 1);
            get_n(fd, 25); /* VALUE key 0 3\r\nval\r\nEND\r\n */
        }
    } else if (strcmp(m, "pg") == 0 || strcmp(m, "pg-ext") == 0) {
        static const char startup[] = "\0\0\0\x29\0\x03\0\0user\0postgres\0database\0postgres\0\0";
        put(fd, startup, sizeof(startup) - 1);
        pg_until_z(fd);
        static const char q[] = "Q\0\0\0\x0dSELECT 1\0";
        /* Parse "" "SELECT 1" 0 types; Bind "" "" 0 formats 0 params 0 result formats;
         * Execute "" 0; Sync */
        static const char ext[] = "P\0\0\0\x10\0SELECT 1\0\0\0"
                                  "B\0\0\0\x0c\0\0\0\0\0\0\0\0"
                                  "E\0\0\0\x09\0\0\0\0\0"
                                  "S\0\0\0\x04";
        bool is_ext = strcmp(m, "pg-ext") == 0;
        for (long i = 0; i < n; i++) {
            if (is_ext)
                put(fd, ext, sizeof(ext) - 1);
            else
                put(fd, q, sizeof(q) - 1);
            pg_until_z(fd);
        }
        put(fd, "X\0\0\0\x04", 5);
    } else {
        return 2;
    }
    close(fd);
    return 0;
}
