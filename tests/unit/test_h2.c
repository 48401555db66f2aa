/*
 * test_h2.c - the HTTP/2 module (agent/proto_h2.c, hpack.c) driven through the connection
 * layer (conn.c) against the fake socket and the fake trace module, with real frame bytes
 * made by Debian's python3-h2 family (tests/unit/h2_vectors.py: DIR/client.bin, server.bin).
 *
 *   test_h2 DIR
 *
 * - HPACK: RFC 7541 Appendix C.4 (Huffman, dynamic table), split at every offset.
 * - Client: client.bin written in two writes split at every offset (and as a writev of many
 *   small iovecs), server.bin read split likewise: every stream an exit with its method and
 *   path, the right ends (finish, gRPC error, RST_STREAM error); every wire goes to
 *   DIR/wires.bin for `h2_vectors.py check`, which decodes them with hpack's own decoder (sw8
 *   present where it must be, everything else the application's bytes).
 * - Server: client.bin read, server.bin written split at every offset: entries, their sw8, the
 *   written bytes unchanged.
 * - Bad input: broken preface, HPACK failure, CONTINUATION flood, oversized block, a table size
 *   above 4096: no byte changed, the connection no longer followed, counted; unknown frames
 *   ignored.
 */
#include "common.h"

#include "check.h"
#include "conn.h"
#include "hpack.h"
#include "proto.h"
#include "proto_h2.h"
#include "ring.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fake_socket.h"
#include "fake_trace.h"

static char cli[1 << 15], srv[1 << 15];
static size_t cli_n, srv_n;
static const char *dir;
static FILE *wires;
static size_t sw8_at;     /* client.bin: offset just past stream 7's header block */
static char sw8_val[256]; /* the sw8 stream 7 carries */

static size_t load(const char *name, char *buf, size_t cap)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    size_t n = fread(buf, 1, cap, f);
    CHECK(n > 0 && n < cap);
    fclose(f);
    return n;
}

/* ---- HPACK: RFC 7541 C.4 ------------------------------------------------------------------- */

static const unsigned char c41[] = {0x82, 0x86, 0x84, 0x41, 0x8c, 0xf1, 0xe3, 0xc2, 0xe5,
                                    0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff};
static const unsigned char c42[] = {0x82, 0x86, 0x84, 0xbe, 0x58, 0x86,
                                    0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf};
static const unsigned char c43[] = {0x82, 0x87, 0x85, 0xbf, 0x40, 0x88, 0x25, 0xa8,
                                    0x49, 0xe9, 0x5b, 0xa9, 0x7d, 0x7f, 0x89, 0x25,
                                    0xa8, 0x49, 0xe9, 0x5b, 0xb8, 0xe8, 0xb4, 0xbf};

static void block(struct sw_hpack *d, const unsigned char *b, size_t n, size_t k)
{
    if (k > n)
        k = n;
    sw_hpack_begin(d);
    CHECK_EQ(sw_hpack_feed(d, b, k), 0);
    CHECK_EQ(sw_hpack_feed(d, b + k, n - k), 0);
    CHECK_EQ(sw_hpack_end(d), 0);
}

static void expect_cap(struct sw_hpack *d, enum sw_hk k, const char *want)
{
    size_t l;
    const char *v = sw_hpack_get(d, k, &l);
    if (!want) {
        CHECK(v == NULL);
        return;
    }
    CHECK(v != NULL);
    CHECK_EQ(l, strlen(want));
    CHECK(memcmp(v, want, l) == 0);
}

static void test_hpack_rfc(void)
{
    static struct sw_hpack d;
    for (size_t k = 0; k <= sizeof(c43); k++) {
        sw_hpack_init(&d);
        block(&d, c41, sizeof(c41), k);
        expect_cap(&d, SW_HK_METHOD, "GET");
        expect_cap(&d, SW_HK_PATH, "/");
        expect_cap(&d, SW_HK_AUTHORITY, "www.example.com");
        CHECK_EQ(d.size, 57);
        block(&d, c42, sizeof(c42), k);
        expect_cap(&d, SW_HK_AUTHORITY, "www.example.com"); /* from the dynamic table */
        CHECK_EQ(d.size, 110);
        block(&d, c43, sizeof(c43), k);
        expect_cap(&d, SW_HK_PATH, "/index.html");
        expect_cap(&d, SW_HK_AUTHORITY, "www.example.com");
        expect_cap(&d, SW_HK_SW8, NULL);
        CHECK_EQ(d.size, 164);
        CHECK_EQ(d.n, 3);
    }
    /* broken Huffman (EOS inside), an index past the table, a size update above 4096 */
    static const unsigned char bad1[] = {0x41, 0x84, 0xff, 0xff, 0xff, 0xff};
    static const unsigned char bad2[] = {0xc0};
    static const unsigned char bad3[] = {0x3f, 0xe1, 0x3f}; /* 31 + 97 + 63 * 128 = 8192 */
    sw_hpack_init(&d);
    sw_hpack_begin(&d);
    CHECK(sw_hpack_feed(&d, bad1, sizeof(bad1)) == SW_HPACK_E_DECODE);
    sw_hpack_init(&d);
    sw_hpack_begin(&d);
    CHECK(sw_hpack_feed(&d, bad2, sizeof(bad2)) == SW_HPACK_E_DECODE);
    sw_hpack_init(&d);
    sw_hpack_set_limit(&d, 65536);
    sw_hpack_begin(&d);
    CHECK(sw_hpack_feed(&d, bad3, sizeof(bad3)) == SW_HPACK_E_TABLE);
}

/* ---- client ------------------------------------------------------------------------------- */

static void new_client(void)
{
    sw_conn_on_socket(5, AF_INET, SOCK_STREAM);
    struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(8080)};
    s.sin_addr.s_addr = htonl(0x7f000001);
    CHECK_EQ(sw_conn_connect(5, (struct sockaddr *)&s, sizeof(s)), 0);
    reset_wire();
}

/* The application writes p[0..n) with write() (or a writev of `iov_sz`-byte pieces) until all
 * is taken. */
static void app_write(int fd, const char *p, size_t n, size_t iov_sz)
{
    size_t off = 0;
    int guard = 0;
    while (off < n) {
        CHECK(++guard < 100000);
        ssize_t r;
        if (iov_sz) {
            struct iovec v[200];
            int k = 0;
            size_t at = off;
            while (at < n && k < 200) {
                size_t l = (size_t)(1 + (k * 7 + (int)iov_sz) % 13);
                if (l > n - at)
                    l = n - at;
                v[k].iov_base = (void *)(p + at);
                v[k++].iov_len = l;
                at += l;
            }
            r = sw_conn_writev(fd, v, k);
        } else {
            r = sw_conn_write(fd, p + off, n - off);
        }
        if (r < 0) {
            CHECK_EQ(errno, EAGAIN);
            continue;
        }
        CHECK(r > 0);
        off += (size_t)r;
    }
}

/* The application reads p[0..n) in chunks of `chunk` (0: all at once). */
static void app_read(int fd, const char *p, size_t n, size_t chunk)
{
    size_t off = 0;
    while (off < n) {
        static char buf[1 << 15];
        size_t l = chunk && chunk < n - off ? chunk : n - off;
        if (l > sizeof(buf))
            l = sizeof(buf);
        rd_src = p + off;
        rd_len = l;
        rd_err = 0;
        CHECK_EQ(sw_conn_read(fd, buf, l), (ssize_t)l);
        off += l;
    }
}

static void client_run(size_t k, size_t iov_sz)
{
    int es = n_exit_start, ef = n_exit_finish, ee = n_exit_error, rn = n_rpc_named,
        rf = n_rpc_finish, re = n_rpc_error;
    new_client();
    if (iov_sz) {
        app_write(5, cli, cli_n, iov_sz);
    } else {
        app_write(5, cli, k, 0);
        app_write(5, cli + k, cli_n - k, 0);
    }
    app_read(5, srv, srv_n, k % 97);
    CHECK_EQ(n_exit_start - es, 7);
    CHECK_EQ(n_exit_finish - ef, 4); /* streams 1, 5 (404), 9, 11 */
    CHECK_EQ(n_exit_error - ee, 1);  /* stream 7 reset */
    CHECK_EQ(n_rpc_named - rn, 2);   /* gRPC streams 3 and 13 */
    CHECK_EQ(n_rpc_finish - rf, 2);
    CHECK_EQ(n_rpc_error - re, 1); /* stream 13: grpc-status 5 (Trailers-Only) */
    CHECK_EQ(last_rpc_status, 5);
    CHECK_STR(last_rpc_op, "pkg.Svc.fail");
    CHECK_STR(last_target, "/pkg.Svc/Fail");
    CHECK_STR(last_method, "POST");
    CHECK_STR(last_peer, "grpc.local:80");
    uint32_t kk = (uint32_t)(iov_sz ? 0 : k), wl = (uint32_t)wire_len;
    CHECK(fwrite(&kk, 4, 1, wires) == 1 && fwrite(&wl, 4, 1, wires) == 1 &&
          fwrite(wire, 1, wire_len, wires) == wire_len);
    sw_conn_on_close(5);
    CHECK_EQ(sw_conn_tab[5], 0);
}

static void test_client(void)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/wires.bin", dir);
    wires = fopen(path, "wb");
    CHECK(wires != NULL);
    struct sw_h2_stats a, b;
    sw_h2_get_stats(&a);
    client_run(0, 3);
    client_run(0, 5);
    for (size_t k = 1; k < cli_n; k++)
        client_run(k, 0);
    sw_h2_get_stats(&b);
    CHECK_EQ(b.hpack_errors, a.hpack_errors);
    CHECK_EQ(b.proto_errors, a.proto_errors);
    CHECK(b.sw8_inserted > a.sw8_inserted);
    CHECK(b.unknown_frames > a.unknown_frames);
    fclose(wires);
}

/* ---- server ------------------------------------------------------------------------------- */

static void server_run(size_t k)
{
    int es = n_entry_start, ef = n_entry_finish, ea = n_entry_abort, rf = n_rpc_finish,
        re = n_rpc_error;
    CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);
    /* up to stream 7's block: its sw8 reaches the entry */
    app_read(7, cli, sw8_at, k % 61);
    CHECK_EQ(n_entry_start - es, 4);
    CHECK_STR(last_sw8, sw8_val);
    CHECK_STR(last_rpc_op, "helloworld.Greeter.sayHello");
    CHECK_STR(last_target, "/fwd");
    app_read(7, cli + sw8_at, cli_n - sw8_at, k % 61);
    CHECK_EQ(n_entry_start - es, 7);
    CHECK_STR(last_method, "POST");
    CHECK_STR(last_target, "/pkg.Svc/Fail");
    CHECK_STR(last_host, "grpc.local");
    CHECK_STR(last_sw8, "");
    if (k & 1) {
        /* the client's EOF read (grpc core's poller thread) before the responses are written:
         * the complete requests stay open until their responses end them */
        char b[16];
        rd_src = "";
        rd_len = 0;
        rd_err = 0;
        CHECK_EQ(sw_conn_read(7, b, sizeof(b)), 0);
        CHECK_EQ(n_entry_abort - ea, 0);
    }
    reset_wire();
    app_write(7, srv, k % srv_n, 0);
    app_write(7, srv + k % srv_n, srv_n - k % srv_n, 0);
    CHECK_EQ(wire_len, srv_n);
    CHECK(memcmp(wire, srv, srv_n) == 0); /* a server's bytes are never changed */
    CHECK_EQ(n_entry_finish - ef, 4);
    CHECK_EQ(n_entry_abort - ea, 1);
    CHECK_EQ(n_rpc_finish - rf, 2);
    CHECK_EQ(n_rpc_error - re, 1);
    sw_conn_on_close(7);
}

static void test_server(void)
{
    for (size_t k = 0; k < cli_n; k += 1)
        server_run(k);
}

/* ---- bad input ---------------------------------------------------------------------------- */

static char bad[1 << 18];

static size_t frame(char *q, uint32_t len, uint8_t type, uint8_t flags, uint32_t sid)
{
    q[0] = (char)(len >> 16);
    q[1] = (char)(len >> 8);
    q[2] = (char)len;
    q[3] = (char)type;
    q[4] = (char)flags;
    q[5] = (char)(sid >> 24);
    q[6] = (char)(sid >> 16);
    q[7] = (char)(sid >> 8);
    q[8] = (char)sid;
    return 9;
}

/* A server reads `n` bytes of `bad`: the counter `field` of the stats goes up by one, no entry
 * starts, the connection is no longer followed (a later write passes untouched). */
#define BAD_CASE(n, field)                                                                         \
    do {                                                                                           \
        struct sw_h2_stats sa_, sb_;                                                               \
        sw_h2_get_stats(&sa_);                                                                     \
        int es_ = n_entry_start;                                                                   \
        CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);                                      \
        app_read(7, bad, (n), 0);                                                                  \
        sw_h2_get_stats(&sb_);                                                                     \
        CHECK_EQ(sb_.field, sa_.field + 1);                                                        \
        CHECK_EQ(n_entry_start, es_);                                                              \
        struct sw_conn *c_ = sw_conn_test_obj(7);                                                  \
        CHECK(c_ == NULL || c_->dead);                                                             \
        reset_wire();                                                                              \
        app_write(7, srv, srv_n, 0);                                                               \
        CHECK(wire_len == srv_n && memcmp(wire, srv, srv_n) == 0);                                 \
        sw_conn_on_close(7);                                                                       \
    } while (0)

static void test_bad(void)
{
    size_t n;
    /* a HEADERS block that fails to decode (index 0) */
    memcpy(bad, cli, 24);
    n = 24 + frame(bad + 24, 1, 1, 5, 1);
    bad[n++] = (char)0x80;
    int ring_hpack = n_h2_ring[SW_RING_H2_HPACK];
    BAD_CASE(n, hpack_errors);
    CHECK_EQ(n_h2_ring[SW_RING_H2_HPACK], ring_hpack + 1); /* `swagent status` shows it */
    /* a CONTINUATION flood: empty CONTINUATIONs without end */
    n = 24 + frame(bad + 24, 0, 1, 0, 1);
    for (int i = 0; i < 100; i++)
        n += frame(bad + n, 0, 9, 0, 1);
    BAD_CASE(n, proto_errors);
    /* a frame of another stream inside a header block */
    n = 24 + frame(bad + 24, 0, 1, 0, 1);
    n += frame(bad + n, 0, 0, 0, 3);
    BAD_CASE(n, proto_errors);
    /* an oversized header block: 80 KiB of literal value in HEADERS + CONTINUATIONs */
    n = 24 + frame(bad + 24, 16384, 1, 0, 1);
    bad[n] = 0x00;     /* literal without indexing, new name */
    bad[n + 1] = 0x01; /* name length 1 */
    bad[n + 2] = 'x';
    bad[n + 3] = 0x7f; /* value length 127 + 81920 */
    bad[n + 4] = (char)0x80;
    bad[n + 5] = (char)0x80;
    bad[n + 6] = 0x05;
    memset(bad + n + 7, 'v', 16384 - 7);
    n += 16384;
    for (int i = 0; i < 4; i++) {
        n += frame(bad + n, 16384, 9, 0, 1);
        memset(bad + n, 'v', 16384);
        n += 16384;
    }
    BAD_CASE(n, list_too_big);
    /* a dynamic table size update above 4096 (the SETTINGS of our side allowed 65536) */
    {
        size_t m = 0;
        static char out[64];
        memcpy(out, "\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x01\x00\x01\x00\x00", 15);
        m = 15;
        struct sw_h2_stats a, b;
        sw_h2_get_stats(&a);
        CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);
        reset_wire();
        app_write(7, out, m, 0); /* our SETTINGS: header table size 65536 */
        n = 24 + frame(bad + 24, 3, 1, 5, 1);
        memcpy(bad + n, "\x3f\xe1\x3f", 3); /* size update to 8192 */
        n += 3;
        app_read(7, bad, n, 0);
        sw_h2_get_stats(&b);
        CHECK_EQ(b.table_too_big, a.table_too_big + 1);
        sw_conn_on_close(7);
    }
    /* a broken preface on a connection handed over as HTTP/2 (ALPN) */
    {
        struct sw_h2_stats a, b;
        sw_h2_get_stats(&a);
        CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);
        struct sw_conn *c = sw_conn_test_obj(7);
        CHECK(c != NULL);
        CHECK(sw_h2_adopt(c, true));
        memcpy(bad, "PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n", 24);
        app_read(7, bad, 24, 0);
        sw_h2_get_stats(&b);
        CHECK_EQ(b.bad_preface, a.bad_preface + 1);
        c = sw_conn_test_obj(7);
        CHECK(c == NULL || c->dead);
        sw_conn_on_close(7);
    }
    /* unknown frame types are ignored: the request after them is followed */
    {
        int es = n_entry_start;
        CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);
        memcpy(bad, cli, 24);
        n = 24;
        for (int i = 0; i < 5; i++) {
            n += frame(bad + n, 3, (uint8_t)(0x20 + i), 0xff, (uint32_t)i);
            memcpy(bad + n, "abc", 3);
            n += 3;
        }
        n += frame(bad + n, 5, 1, 5, 1);
        memcpy(bad + n, "\x82\x86\x84\x41\x00", 5); /* GET http / , :authority "" */
        n += 5;
        app_read(7, bad, n, 0);
        CHECK_EQ(n_entry_start, es + 1);
        CHECK_STR(last_target, "/");
        sw_conn_on_close(7);
    }
}

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    dir = argv[1];
    cli_n = load("client.bin", cli, sizeof(cli));
    srv_n = load("server.bin", srv, sizeof(srv));
    {
        char path[512], line[512];
        snprintf(path, sizeof(path), "%s/expect.txt", dir);
        FILE *f = fopen(path, "r");
        CHECK(f != NULL);
        while (fgets(line, sizeof(line), f))
            if (sscanf(line, "sw8at %zu %255s", &sw8_at, sw8_val) == 2)
                break;
        fclose(f);
        CHECK(sw8_at > 24 && sw8_at < cli_n);
    }
    fake_socket_install();
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK_EQ(sw_conn_init(NULL, 16), 0);
    RUN_TEST(test_hpack_rfc);
    RUN_TEST(test_client);
    RUN_TEST(test_server);
    RUN_TEST(test_bad);
    sw_conn_shutdown();
    return 0;
}
