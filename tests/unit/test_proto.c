/*
 * test_proto.c - unit tests of the connection layer's module interface (agent/proto.h): a tiny
 * protocol module of the test's own, registered before HTTP/1.x, claims streams by sniffing
 * (the client's first write, or a server speaking first), parses the written bytes ahead of
 * the fake socket and plans, for every 'Q' record, an insertion (an 'S' record before it) and
 * two replacements (its type byte 'Q' -> 'R' at the insertion point itself, and its first three
 * payload bytes -> "XYZ"). Checked: the bytes the peer receives are exactly the application's
 * with those edits, over every split of the writes, kernel short writes and EAGAIN, for
 * write/writev/sendmsg; the counts the application sees add up to exactly its own bytes;
 * read bytes reach the module in order; a module's stop untracks; HTTP/1.x is still the
 * default for TCP connections nobody claims.
 *
 * The test protocol ("TPRO"): the magic "TPRO", then records: type (1 byte), payload length
 * L (1 byte), L payload bytes.
 */
#include "common.h"

#include "check.h"
#include "conn.h"
#include "proto.h"
#include "proto_http1.h"

#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fake_socket.h"
#include "fake_trace.h"

/* ---- the test module ------------------------------------------------------------------------ */

#define SREC "S\x02sw" /* the record inserted before every 'Q' record */

struct tpro_conn {
    uint32_t magic_left; /* bytes of "TPRO" still to come */
    uint8_t st;          /* 0: type byte next, 1: length next, 2: payload */
    uint8_t type;
    uint32_t left; /* payload bytes left */
    uint64_t rec_abs;
    uint64_t in_bytes; /* bytes read, given to in() */
    char in_first[8];  /* the first bytes read */
};
SW_PROTO_STATE_CHECK(struct tpro_conn);

static struct tpro_conn *T(struct sw_conn *c)
{
    return (struct tpro_conn *)(void *)c->state;
}

static int n_attach, n_sniff, n_close, n_eof;

static enum sw_sniff tpro_sniff(const struct sw_conn *c, enum sw_conn_dir dir, const char *p,
                                size_t len)
{
    (void)c;
    n_sniff++;
    const char *magic = dir == SW_DIR_OUT ? "TPRO" : "HELO"; /* HELO: a server speaks first */
    size_t k = len < 4 ? len : 4;
    if (memcmp(p, magic, k) != 0)
        return SW_SNIFF_NO;
    return len >= 4 ? SW_SNIFF_YES : SW_SNIFF_MORE;
}

static void tpro_attach(struct sw_conn *c)
{
    n_attach++;
    memset(T(c), 0, sizeof(struct tpro_conn));
    T(c)->magic_left = 4;
    c->out_ahead = true;
}

static size_t tpro_out(struct sw_conn *c, const char *p, size_t len, uint64_t abs, int64_t *t)
{
    (void)t;
    struct tpro_conn *s = T(c);
    size_t i = 0;
    while (i < len) {
        if (s->magic_left) {
            s->magic_left--;
            i++;
            continue;
        }
        if (s->st == 0) {
            /* A record begins. One edit at a time: while the last one is pending, pause here
             * (the layer cuts the write; the application sends this record again). */
            if (sw_conn_out_pending(c)) {
                sw_conn_out_pause(c);
                return i;
            }
            s->type = (uint8_t)p[i];
            s->rec_abs = abs + i;
            if (s->type == 'Q') {
                memcpy(sw_conn_out_buf(c), SREC, 4);
                CHECK(sw_conn_out_replace(c, s->rec_abs, "R", 1));
                CHECK(sw_conn_out_insert(c, s->rec_abs, 4));
            }
            s->st = 1;
        } else if (s->st == 1) {
            s->left = (uint8_t)p[i];
            s->st = s->left ? 2 : 0;
            if (s->type == 'Q' && s->left >= 3)
                CHECK(sw_conn_out_replace(c, s->rec_abs + 2, "XYZ", 3));
        } else if (--s->left == 0) {
            s->st = 0;
        }
        i++;
    }
    return len;
}

static void tpro_in(struct sw_conn *c, const char *p, size_t len, int64_t *t)
{
    (void)t;
    struct tpro_conn *s = T(c);
    for (size_t i = 0; i < len; i++, s->in_bytes++)
        if (s->in_bytes < sizeof(s->in_first))
            s->in_first[s->in_bytes] = p[i];
    if (s->in_bytes >= 4 && memcmp(s->in_first, "HELO", 4) == 0 && len && p[len - 1] == '!')
        sw_conn_stop(c); /* "!" ends what we follow */
}

static void tpro_eof(struct sw_conn *c, int64_t *t)
{
    (void)c, (void)t;
    n_eof++;
}

static void tpro_close(struct sw_conn *c, bool closing, int64_t *t)
{
    (void)c, (void)closing, (void)t;
    n_close++;
}

static const struct sw_proto tpro = {
    .name = "tpro",
    .sniff = tpro_sniff,
    .attach = tpro_attach,
    .in = tpro_in,
    .out = tpro_out,
    .eof = tpro_eof,
    .close = tpro_close,
};

/* The module list of this test: the test module first, HTTP/1.x the default. */
const struct sw_proto *const sw_protos[] = {&tpro, &sw_proto_http1};
const unsigned sw_protos_n = SW_ARRAY_LEN(sw_protos);

/* ---- helpers -------------------------------------------------------------------------------- */

/* What the peer must receive for the application's stream `app`. */
static size_t expected(const char *app, size_t n, char *out)
{
    size_t o = 0, i = 0;
    CHECK(n >= 4);
    memcpy(out, app, 4);
    o = i = 4;
    while (i < n) {
        char type = app[i];
        size_t len = i + 1 < n ? (uint8_t)app[i + 1] : 0;
        if (type == 'Q') {
            memcpy(out + o, SREC, 4);
            o += 4;
            type = 'R';
        }
        out[o++] = type;
        if (i + 1 < n)
            out[o++] = app[i + 1];
        for (size_t k = 0; k < len && i + 2 + k < n; k++)
            out[o++] = app[i] == 'Q' && len >= 3 && k < 3 ? "XYZ"[k] : app[i + 2 + k];
        i += 2 + len;
    }
    return o;
}

static void new_client(int fd)
{
    sw_conn_on_close(fd);
    sw_conn_on_socket(fd, AF_INET, SOCK_STREAM);
    struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(7000)};
    s.sin_addr.s_addr = htonl(0x7f000001);
    CHECK_EQ(sw_conn_connect(fd, (struct sockaddr *)&s, sizeof(s)), 0);
    CHECK(sw_conn_tab[fd] != 0 && sw_conn_tab[fd] != SW_CONN_CAND);
    reset_wire();
}

enum mode { M_WRITE, M_WRITEV3, M_SENDMSG3 };

/* The application writes app[0..n) in chunks, looping on short writes and EAGAIN; returns the
 * sum of the counts it was told (which must be n). */
static size_t app_write_all(int fd, const char *app, size_t n, size_t chunk, enum mode mode)
{
    size_t off = 0;
    int guard = 0;
    while (off < n) {
        CHECK(++guard < 100000);
        size_t len = chunk && chunk < n - off ? chunk : n - off;
        const char *p = app + off;
        struct iovec v[3];
        size_t a = len / 3, b = len / 3;
        v[0] = (struct iovec){(void *)p, a};
        v[1] = (struct iovec){(void *)(p + a), b};
        v[2] = (struct iovec){(void *)(p + a + b), len - a - b};
        struct msghdr m = {.msg_iov = v, .msg_iovlen = 3};
        struct sw_send_op op = {.kind = SW_SEND_SENDMSG, .iov = v, .iovcnt = 3, .msg = &m};
        errno = 0;
        ssize_t r = mode == M_WRITE     ? sw_conn_write(fd, p, len)
                    : mode == M_WRITEV3 ? sw_conn_writev(fd, v, 3)
                                        : sw_conn_send(fd, &op);
        if (r < 0) {
            CHECK_EQ(errno, EAGAIN); /* the only failure the fake socket makes here */
            continue;
        }
        CHECK(r > 0 && (size_t)r <= len); /* never a count that includes our bytes */
        off += (size_t)r;
    }
    return off;
}

static void check_wire(const char *app, size_t n)
{
    static char exp[4096];
    size_t el = expected(app, n, exp);
    if (el != wire_len || memcmp(exp, wire, el) != 0) {
        fprintf(stderr, "wire mismatch: expected %zu bytes, got %zu\n", el, wire_len);
        for (size_t i = 0; i < el || i < wire_len; i++)
            fprintf(stderr, "%4zu %02x %02x%s\n", i, i < el ? (uint8_t)exp[i] : 0,
                    i < wire_len ? (uint8_t)wire[i] : 0,
                    i < el && i < wire_len && exp[i] == wire[i] ? "" : "  <--");
        CHECK(0);
    }
}

/* A stream of records: 'Q' ones get the edits (two back to back), 'P' ones pass as they are. */
static const char stream[] = "TPRO"
                             "P\x03"
                             "abc"
                             "Q\x05"
                             "hello"
                             "Q\x04"
                             "wxyz"
                             "P\x00"
                             "Q\x01"
                             "k"
                             "P\x02"
                             "zz";

/* ---- tests ---------------------------------------------------------------------------------- */

/* Every chunk size, kernel acceptance and EAGAIN pattern, for each kind of write call. */
static void test_edits_matrix(void)
{
    size_t n = sizeof(stream) - 1;
    size_t chunks[] = {0, 1, 2, 3, 5, 7};
    size_t accepts[] = {0, 1, 2, 3, 5};
    int eagains[] = {0, 2, 3};
    int cases = 0;
    for (size_t c = 0; c < SW_ARRAY_LEN(chunks); c++)
        for (size_t a = 0; a < SW_ARRAY_LEN(accepts); a++)
            for (size_t e = 0; e < SW_ARRAY_LEN(eagains); e++)
                for (int m = M_WRITE; m <= M_SENDMSG3; m++) {
                    int att = n_attach;
                    new_client(5);
                    accept_per_call = accepts[a];
                    eagain_every = eagains[e];
                    CHECK_EQ(app_write_all(5, stream, n, chunks[c], (enum mode)m), n);
                    accept_per_call = 0;
                    eagain_every = 0;
                    CHECK_EQ(n_attach, att + 1); /* claimed by sniffing its first write */
                    check_wire(stream, n);
                    cases++;
                }
    printf("# %d edit cases\n", cases);
}

/* Every split of the stream into two writes. */
static void test_every_split(void)
{
    size_t n = sizeof(stream) - 1;
    for (size_t s = 1; s < n; s++) {
        for (size_t k = 0; k < 3; k++) {
            new_client(5);
            accept_per_call = k == 0 ? 0 : k == 1 ? 1 : s;
            size_t got = app_write_all(5, stream, s, 0, M_WRITE);
            got += app_write_all(5, stream + s, n - s, 0, M_WRITEV3);
            accept_per_call = 0;
            CHECK_EQ(got, n);
            check_wire(stream, n);
        }
    }
}

/* A server speaks first: the client's read decides; read bytes reach in() in order; the
 * module's stop untracks the fd; close() is heard once. */
static void test_sniff_read_and_stop(void)
{
    int att = n_attach, cl = n_close;
    new_client(6);
    char buf[64];
    rd_src = "HELO there";
    rd_len = 10;
    CHECK_EQ(sw_conn_read(6, buf, sizeof(buf)), 10);
    CHECK_EQ(n_attach, att + 1);
    struct sw_conn *c = sw_conn_test_obj(6);
    CHECK(c != NULL);
    CHECK_EQ(T(c)->in_bytes, 10);
    CHECK(memcmp(T(c)->in_first, "HELO the", 8) == 0);
    rd_src = "more!";
    rd_len = 5;
    CHECK_EQ(sw_conn_read(6, buf, sizeof(buf)), 5);
    CHECK_EQ(sw_conn_tab[6], 0); /* stopped: untracked, the object freed */
    CHECK_EQ(n_close, cl + 1);
    /* A read of 0 on a followed connection reaches eof(). */
    int eo = n_eof;
    new_client(6);
    rd_src = "HELO";
    rd_len = 4;
    CHECK_EQ(sw_conn_read(6, buf, sizeof(buf)), 4);
    rd_len = 0;
    CHECK_EQ(sw_conn_read(6, buf, sizeof(buf)), 0);
    CHECK_EQ(n_eof, eo + 1);
    sw_conn_on_close(6);
    CHECK_EQ(n_close, cl + 2);
}

/* Nobody claims it: HTTP/1.x, the default, takes a TCP connection (sw8 inserted). */
static void test_default_is_http1(void)
{
    int att = n_attach;
    new_client(5);
    const char req[] = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
    CHECK_EQ(app_write_all(5, req, sizeof(req) - 1, 0, M_WRITE), sizeof(req) - 1);
    CHECK_EQ(n_attach, att);
    CHECK(wire_len > sizeof(req) - 1);
    CHECK(memmem(wire, wire_len, "\r\nsw8: ", 7) != NULL);
}

/* The edit calls refuse what they cannot do. */
static void test_edit_refusals(void)
{
    new_client(5);
    const char a[] = "TPROP\x01x";
    CHECK_EQ(app_write_all(5, a, sizeof(a) - 1, 0, M_WRITE), sizeof(a) - 1);
    struct sw_conn *c = sw_conn_test_obj(5);
    CHECK(c != NULL);
    CHECK(!sw_conn_out_insert(c, 2, 1));                        /* went out already */
    CHECK(!sw_conn_out_replace(c, 0, "x", 1));                  /* went out already */
    CHECK(!sw_conn_out_replace(c, 100, "12345", 5));            /* longer than a replacement */
    CHECK(!sw_conn_out_insert(c, 100, SW_CONN_INSERT_MAX + 1)); /* too long */
    CHECK(sw_conn_out_replace(c, 100, "ab", 2));
    CHECK(!sw_conn_out_replace(c, 101, "c", 1)); /* overlaps */
    CHECK(sw_conn_out_insert(c, 100, 1));
    CHECK(!sw_conn_out_insert(c, 101, 1)); /* one insertion at a time */
    sw_conn_on_close(5);
}

/* A Unix-domain stream client on `fd` connected to `path` ('@' first: abstract). */
static void new_unix_client(int fd, const char *path)
{
    sw_conn_on_close(fd);
    sw_conn_on_socket(fd, AF_UNIX, SOCK_STREAM);
    CHECK_EQ(sw_conn_tab[fd], SW_CONN_CAND);
    struct sockaddr_un su = {.sun_family = AF_UNIX};
    size_t pl = strlen(path);
    memcpy(su.sun_path, path, pl);
    if (path[0] == '@')
        su.sun_path[0] = '\0';
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + pl + (path[0] != '@'));
    CHECK_EQ(sw_conn_connect(fd, (struct sockaddr *)&su, len), 0);
    CHECK(sw_conn_tab[fd] != 0 && sw_conn_tab[fd] != SW_CONN_CAND);
    reset_wire();
}

/* Unix-domain streams: tracked like TCP ones while a module may want them; one that no module
 * claims (D-Bus's first bytes) is untracked after its first write, its bytes unchanged; HTTP
 * is sniffed (even a byte at a time) and gets its sw8; the peer is "unix:" + the path. */
static void test_unix_streams(void)
{
    static const char dbus[] = "\0AUTH EXTERNAL 31303030\r\n";
    new_unix_client(5, "/run/dbus/system_bus_socket");
    CHECK_EQ(sw_conn_write(5, dbus, sizeof(dbus) - 1), sizeof(dbus) - 1);
    CHECK_EQ(sw_conn_tab[5], 0); /* nobody's: no longer followed */
    CHECK_EQ(wire_len, sizeof(dbus) - 1);
    CHECK(memcmp(wire, dbus, wire_len) == 0);

    static const char req[] = "GET /v1.43/info HTTP/1.0\r\nUser-Agent: t\r\n\r\n";
    for (size_t chunk = 0; chunk < 4; chunk++) {
        new_unix_client(5, "/run/docker.sock");
        CHECK_EQ(app_write_all(5, req, sizeof(req) - 1, chunk, M_WRITE), sizeof(req) - 1);
        static const char exp[] = "GET /v1.43/info HTTP/1.0\r\nUser-Agent: t\r\n" INJ "\r\n";
        CHECK_EQ(wire_len, sizeof(exp) - 1);
        CHECK(memcmp(wire, exp, wire_len) == 0);
        CHECK_STR(last_peer, "unix:/run/docker.sock"); /* no Host: the socket */
    }

    /* The test module claims a Unix stream by its bytes too. */
    new_unix_client(5, "@abstract-name");
    size_t n = sizeof(stream) - 1;
    CHECK_EQ(app_write_all(5, stream, n, 0, M_WRITEV3), n);
    check_wire(stream, n);
    struct sw_conn *c = sw_conn_test_obj(5);
    CHECK(c != NULL);
    CHECK_EQ(c->peer_len, strlen("unix:@abstract-name"));
    CHECK(memcmp(c->peer, "unix:@abstract-name", c->peer_len) == 0);
    sw_conn_on_close(5);
}

/* An accepted Unix stream (a real socket): its peer is the listening socket's path. */
static void test_unix_accept(void)
{
    char path[] = "/tmp/sw-test-proto-XXXXXX";
    int tmp = mkstemp(path);
    CHECK(tmp >= 0);
    close(tmp);
    unlink(path);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un su = {.sun_family = AF_UNIX};
    memcpy(su.sun_path, path, strlen(path) + 1);
    CHECK_EQ(bind(l, (struct sockaddr *)&su, sizeof(su)), 0);
    CHECK_EQ(listen(l, 1), 0);
    int cl = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK_EQ(connect(cl, (struct sockaddr *)&su, sizeof(su)), 0);
    sw_libc.accept = accept;
    sw_libc.getpeername = getpeername;
    int fd = sw_conn_accept(l, NULL, NULL, 0, false);
    sw_libc.accept = fake_accept;
    sw_libc.getpeername = fake_getpeername;
    CHECK(fd >= 0);
    struct sw_conn *c = sw_conn_test_obj(fd);
    CHECK(c != NULL);
    char want[128];
    snprintf(want, sizeof(want), "unix:%s", path);
    CHECK_EQ(c->peer_len, strlen(want));
    CHECK(memcmp(c->peer, want, c->peer_len) == 0);
    int es = n_entry_start;
    rd_src = "GET /u HTTP/1.1\r\nHost: x\r\n\r\n";
    rd_len = strlen(rd_src);
    char buf[64];
    CHECK_EQ(sw_conn_read(fd, buf, sizeof(buf)), (ssize_t)rd_len);
    CHECK_EQ(n_entry_start, es + 1);
    CHECK_STR(last_peer, want);
    CHECK_STR(last_target, "/u");
    sw_conn_on_close(fd);
    close(fd);
    close(cl);
    close(l);
    unlink(path);
}

int main(void)
{
    fake_socket_install();
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK_EQ(sw_conn_init(NULL, 16), 0);
    RUN_TEST(test_edits_matrix);
    RUN_TEST(test_every_split);
    RUN_TEST(test_sniff_read_and_stop);
    RUN_TEST(test_default_is_http1);
    RUN_TEST(test_edit_refusals);
    RUN_TEST(test_unix_streams);
    RUN_TEST(test_unix_accept);
    sw_conn_shutdown();
    return 0;
}
