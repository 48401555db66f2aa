/*
 * test_conn.c - unit tests of the connection layer with its HTTP/1.x module (agent/conn.c,
 * proto_http1.c): the fd table, entry and exit span events, and above all the sw8 insertion on
 * writes, against a fake socket that takes k bytes per call or answers EAGAIN (fake_socket.h),
 * and a fake trace module (fake_trace.h). The module interface itself: test_proto.c.
 *
 * The invariant checked everywhere: the bytes on the wire are the application's bytes with the
 * inserted lines just before the final CRLF of each request head, and the counts returned to
 * the application add up to exactly its own bytes.
 */
#include "common.h"

#include "check.h"
#include "conn.h"
#include "guard.h"
#include "real.h"
#include "trace.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fake_socket.h"
#include "fake_trace.h"

/* A fresh client connection on fd 5 to 127.0.0.1:8080. */
static void new_client(void)
{
    sw_conn_on_close(5);
    sw_conn_on_socket(5, AF_INET, SOCK_STREAM);
    CHECK_EQ(sw_conn_tab[5], SW_CONN_CAND);
    struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(8080)};
    s.sin_addr.s_addr = htonl(0x7f000001);
    CHECK_EQ(sw_conn_connect(5, (struct sockaddr *)&s, sizeof(s)), 0);
    CHECK(sw_conn_tab[5] != 0 && sw_conn_tab[5] != SW_CONN_CAND);
    reset_wire();
}

/* The wire bytes expected for `app`: INJ before the final CRLF (or LF) of every head. */
static size_t expected(const char *app, size_t n, char *out)
{
    size_t o = 0, i = 0, line_start = 0;
    bool in_head = true;
    size_t body_left = 0;
    while (i < n) {
        if (!in_head) {
            size_t k = body_left < n - i ? body_left : n - i;
            memcpy(out + o, app + i, k);
            o += k;
            i += k;
            body_left -= k;
            if (!body_left)
                in_head = true, line_start = i;
            continue;
        }
        if (i == line_start &&
            (app[i] == '\n' || (app[i] == '\r' && i + 1 < n && app[i + 1] == '\n'))) {
            memcpy(out + o, INJ, sizeof(INJ) - 1);
            o += sizeof(INJ) - 1;
            size_t el = app[i] == '\n' ? 1 : 2;
            memcpy(out + o, app + i, el);
            o += el;
            /* Content-Length of this head, if any. */
            body_left = 0;
            const char *cl = NULL;
            for (size_t j = i; j > 0; j--) {
                if (j + 15 <= n && strncasecmp(app + j, "content-length:", 15) == 0) {
                    cl = app + j + 15;
                    break;
                }
                if (j >= 4 && app[j - 1] == '\n' &&
                    (app[j - 2] == '\n' || (app[j - 2] == '\r' && app[j - 3] == '\n')))
                    break;
            }
            if (cl)
                body_left = strtoul(cl, NULL, 10);
            i += el;
            line_start = i;
            in_head = body_left == 0;
            continue;
        }
        out[o++] = app[i];
        if (app[i] == '\n')
            line_start = i + 1;
        i++;
    }
    return o;
}

enum app_mode { APP_WRITE, APP_WRITEV3, APP_SEND, APP_SENDMSG2, APP_CONN_WRITE, APP_CONN_WRITEV3 };

/* The application writes `app` in chunks of `chunk` bytes, looping on partial writes/EAGAIN. */
static void app_send_all(const char *app, size_t n, size_t chunk, enum app_mode mode)
{
    size_t off = 0;
    int guard = 0;
    while (off < n) {
        CHECK(++guard < 100000);
        size_t len = chunk && chunk < n - off ? chunk : n - off;
        const char *p = app + off;
        ssize_t r;
        struct iovec v[3];
        struct sw_send_op op;
        memset(&op, 0, sizeof(op));
        if (mode == APP_WRITE || mode == APP_SEND || mode == APP_CONN_WRITE) {
            v[0].iov_base = (void *)p;
            v[0].iov_len = len;
            op.kind = mode == APP_WRITE ? SW_SEND_WRITE : SW_SEND_SEND;
            op.iov = v;
            op.iovcnt = 1;
        } else {
            /* Three (or two) pieces, some possibly empty. */
            size_t a = len / 3, b = len / 3;
            v[0].iov_base = (void *)p;
            v[0].iov_len = a;
            v[1].iov_base = (void *)(p + a);
            v[1].iov_len = b;
            v[2].iov_base = (void *)(p + a + b);
            v[2].iov_len = len - a - b;
            op.kind = mode == APP_SENDMSG2 ? SW_SEND_SENDMSG : SW_SEND_WRITEV;
            op.iov = v;
            op.iovcnt = 3;
        }
        struct msghdr m;
        memset(&m, 0, sizeof(m));
        m.msg_iov = v;
        m.msg_iovlen = (size_t)op.iovcnt;
        op.msg = &m;
        errno = 0;
        r = mode == APP_CONN_WRITE     ? sw_conn_write(5, p, len)
            : mode == APP_CONN_WRITEV3 ? sw_conn_writev(5, v, 3)
                                       : sw_conn_send(5, &op);
        if (r < 0) {
            CHECK_EQ(errno, EAGAIN);
            continue;
        }
        CHECK(r > 0);
        CHECK((size_t)r <= len);
        off += (size_t)r;
    }
    CHECK_EQ(off, n);
}

static void check_wire(const char *app, size_t n)
{
    static char exp[1 << 16];
    size_t el = expected(app, n, exp);
    if (el != wire_len || memcmp(exp, wire, el) != 0) {
        fprintf(stderr, "wire mismatch:\n--- expected (%zu)\n%.*s\n--- got (%zu)\n%.*s\n", el,
                (int)el, exp, wire_len, (int)wire_len, wire);
        CHECK(0);
    }
}

static const char *requests[] = {
    "GET /a HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n",
    "POST /upload?x=1 HTTP/1.1\r\nHost: h:81\r\nContent-Length: 11\r\n\r\nhello world",
    "GET /lf HTTP/1.1\nHost: lf\n\n",
    ("GET /ka HTTP/1.1\r\nHost: k\r\n\r\nPOST /two HTTP/1.1\r\nHost: k\r\nContent-Length: 3\r\n\r\n"
     "abcGET /three HTTP/1.1\r\nHost: k\r\n\r\n"),
    "GET / HTTP/1.0\r\n\r\n",
};

static void test_insertion_matrix(void)
{
    size_t chunks[] = {0, 1, 2, 3, 5, 7, 13};
    size_t accepts[] = {0, 1, 2, 3, 9, 64};
    int eagains[] = {0, 2, 3};
    enum app_mode modes[] = {APP_WRITE,    APP_WRITEV3,    APP_SEND,
                             APP_SENDMSG2, APP_CONN_WRITE, APP_CONN_WRITEV3};
    int cases = 0;
    for (size_t r = 0; r < SW_ARRAY_LEN(requests); r++)
        for (size_t c = 0; c < SW_ARRAY_LEN(chunks); c++)
            for (size_t a = 0; a < SW_ARRAY_LEN(accepts); a++)
                for (size_t e = 0; e < SW_ARRAY_LEN(eagains); e++)
                    for (size_t m = 0; m < SW_ARRAY_LEN(modes); m++) {
                        new_client();
                        accept_per_call = accepts[a];
                        eagain_every = eagains[e];
                        app_send_all(requests[r], strlen(requests[r]), chunks[c], modes[m]);
                        accept_per_call = 0;
                        eagain_every = 0;
                        check_wire(requests[r], strlen(requests[r]));
                        cases++;
                    }
    printf("# %d insertion cases\n", cases);
}

/* Every split of a request into two writes, with the kernel taking everything. */
static void test_every_split(void)
{
    for (size_t r = 0; r < SW_ARRAY_LEN(requests); r++) {
        const char *req = requests[r];
        size_t n = strlen(req);
        for (size_t s = 1; s < n; s++) {
            for (size_t k = 0; k < 4; k++) {
                new_client();
                accept_per_call = k == 0 ? 0 : k == 1 ? 1 : k == 2 ? s : s + 1;
                app_send_all(req, s, 0, k % 2 ? APP_CONN_WRITE : APP_WRITE);
                app_send_all(req + s, n - s, 0, APP_WRITE);
                accept_per_call = 0;
                /* Writing in two calls is the same stream as one. */
                check_wire(req, n);
            }
        }
    }
}

static void test_exit_peer_and_response(void)
{
    new_client();
    int before_start = n_exit_start, before_finish = n_exit_finish;
    const char *req = "GET /p?q=1 HTTP/1.1\r\nHost: example.com\r\n\r\n";
    app_send_all(req, strlen(req), 0, APP_WRITE);
    CHECK_EQ(n_exit_start, before_start + 1);
    CHECK_STR(last_peer, "example.com:80");
    CHECK_STR(last_target, "/p?q=1");
    CHECK_STR(last_method, "GET");
    const char *resp = "HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\n\r\nnope!";
    /* Response read in two pieces. */
    struct iovec v = {(void *)resp, 20};
    sw_conn_on_read(5, &v, 1, 20, 0, 0);
    CHECK_EQ(n_exit_finish, before_finish);
    v.iov_base = (void *)(resp + 20);
    v.iov_len = strlen(resp) - 20;
    sw_conn_on_read(5, &v, 1, (ssize_t)v.iov_len, 0, 0);
    CHECK_EQ(n_exit_finish, before_finish + 1);
    CHECK_EQ(last_status, 404);

    /* IPv6 literal without port, and no Host at all (the connected address). */
    new_client();
    req = "GET / HTTP/1.1\r\nHost: [::1]\r\n\r\n";
    app_send_all(req, strlen(req), 0, APP_WRITE);
    CHECK_STR(last_peer, "[::1]:80");
    new_client();
    req = "GET / HTTP/1.0\r\n\r\n";
    app_send_all(req, strlen(req), 0, APP_WRITE);
    CHECK_STR(last_peer, "127.0.0.1:8080");

    /* HEAD response has no body; until-close response ends at EOF. */
    new_client();
    req = "HEAD / HTTP/1.1\r\nHost: h:1\r\n\r\nGET /x HTTP/1.1\r\nHost: h:1\r\n\r\n";
    app_send_all(req, strlen(req), 0, APP_WRITE);
    before_finish = n_exit_finish;
    resp = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nHTTP/1.0 201 OK\r\n\r\nuntil close";
    v.iov_base = (void *)resp;
    v.iov_len = strlen(resp);
    sw_conn_on_read(5, &v, 1, (ssize_t)v.iov_len, 0, 0);
    CHECK_EQ(n_exit_finish, before_finish + 1);
    CHECK_EQ(last_status, 200);
    char buf[8];
    v.iov_base = buf;
    v.iov_len = sizeof(buf);
    sw_conn_on_read(5, &v, 1, 0, 0, 0);
    CHECK_EQ(n_exit_finish, before_finish + 2);
    CHECK_EQ(last_status, 201);

    /* A reset while waiting for the response: an error exit. */
    new_client();
    req = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
    app_send_all(req, strlen(req), 0, APP_WRITE);
    int before_err = n_exit_error;
    sw_conn_on_read(5, &v, 1, -1, ECONNRESET, 0);
    CHECK_EQ(n_exit_error, before_err + 1);
}

/*
 * Which request an exit belongs to (docs/architecture.md, "Which request an outbound call
 * belongs to"), as an event loop drives the connection layer: a connection's first request head
 * joins the request the thread served when connect() was made, however many requests the loop
 * turned to before the socket became writable; a reused connection's head joins the thread's
 * request when it is written; a response read makes its exit's request the thread's current one.
 */
static void test_attribution(void)
{
    const char *req = "GET /a HTTP/1.1\r\nHost: up\r\n\r\n";
    const char *resp = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    const uint64_t A = SW_TRACE_SPAN_SLOTS + 100000, B = A + 1, C = A + 2;
    struct iovec v = {(void *)resp, strlen(resp)};
    /* nginx: connect (EINPROGRESS) while serving A; B is read; A's head goes out later. */
    fake_request_now = A;
    new_client();
    fake_request_now = B;
    app_send_all(req, strlen(req), 0, APP_WRITE);
    CHECK_EQ(last_parent, A);
    sw_trace_tls.current = B;
    sw_conn_on_read(5, &v, 1, (ssize_t)v.iov_len, 0, 0);
    CHECK_EQ(sw_trace_tls.current, A); /* the loop handles A's upstream now */
    /* The connection cached and reused for C (keep-alive): the request of the thread now. */
    fake_request_now = C;
    app_send_all(req, strlen(req), 0, APP_WRITE);
    CHECK_EQ(last_parent, C);
    sw_conn_on_read(5, &v, 1, (ssize_t)v.iov_len, 0, 0);
    CHECK_EQ(sw_trace_tls.current, C);
    /* Opened while the thread's request was not known: its first head has no parent, whatever
     * the thread serves when it is written, and its response leaves no current request. */
    fake_request_now = SW_TRACE_UNKNOWN;
    new_client();
    fake_request_now = B;
    app_send_all(req, strlen(req), 0, APP_WRITE);
    CHECK_EQ(last_parent, SW_TRACE_UNKNOWN);
    sw_trace_tls.current = B;
    sw_conn_on_read(5, &v, 1, (ssize_t)v.iov_len, 0, 0);
    CHECK_EQ(sw_trace_tls.current, 0);
    /* Opened while the thread served nothing (a pool made at start): the first head takes the
     * thread's request when it is written. */
    fake_request_now = 0;
    new_client();
    fake_request_now = C;
    app_send_all(req, strlen(req), 0, APP_WRITE);
    CHECK_EQ(last_parent, C);
    /* A non-blocking connect refused (seen at the first read, the loop serving B by then): the
     * error exit belongs to the request the connection was opened for. */
    fake_request_now = A;
    new_client();
    fake_request_now = B;
    int errs = n_exit_error;
    sw_conn_on_read(5, &v, 1, -1, ECONNREFUSED, 0);
    CHECK_EQ(n_exit_error, errs + 1);
    CHECK_EQ(last_parent, A);
    fake_request_now = 0;
    sw_trace_tls.current = 0;
    sw_conn_on_close(5);
}

/* A proxy forwards the sw8 it received: ours goes first, the forwarded name becomes "swx". */
static void test_forwarded_sw8(void)
{
    const char *app = "GET /fwd HTTP/1.1\r\nHost: up:8080\r\nsw8: 1-old-forwarded\r\n"
                      "SW8-Correlation: a:b\r\nX-Other: 1\r\n\r\n";
    const char *want = "GET /fwd HTTP/1.1\r\nHost: up:8080\r\n" INJ "swx: 1-old-forwarded\r\n"
                       "SW8-Correlation: a:b\r\nX-Other: 1\r\n\r\n";
    size_t chunks[] = {0, 1, 4, 30, 40};
    size_t accepts[] = {0, 1, 5, 41};
    for (size_t c = 0; c < SW_ARRAY_LEN(chunks); c++)
        for (size_t a = 0; a < SW_ARRAY_LEN(accepts); a++)
            for (int e = 0; e < 3; e++) {
                new_client();
                accept_per_call = accepts[a];
                eagain_every = e * 2;
                app_send_all(app, strlen(app), chunks[c], c % 2 ? APP_WRITEV3 : APP_WRITE);
                accept_per_call = 0;
                eagain_every = 0;
                if (wire_len == strlen(want) && memcmp(wire, want, wire_len) == 0)
                    continue;
                /* Written in pieces, the forwarded line may go out before the head's end is
                   known: then ours follow it at the end of the head (both present). */
                if (chunks[c] != 0) {
                    check_wire(app, strlen(app));
                    continue;
                }
                fprintf(stderr, "chunk %zu accept %zu eagain %d:\n%.*s\n", chunks[c], accepts[a], e,
                        (int)wire_len, wire);
                CHECK(0);
            }
}

/* Head written with write(), body with sendfile64(): framing follows, insertion intact. */
static void test_client_sendfile(void)
{
    new_client();
    const char *head = "PUT /f HTTP/1.1\r\nHost: h:9\r\nContent-Length: 300\r\n\r\n";
    app_send_all(head, strlen(head), 7, APP_WRITE);
    size_t left = 300;
    accept_per_call = 64;
    while (left) {
        ssize_t r = sw_conn_sendfile(5, 3, NULL, left, true);
        CHECK(r > 0);
        left -= (size_t)r;
    }
    accept_per_call = 0;
    static char app[512];
    size_t hl = strlen(head);
    memcpy(app, head, hl);
    memset(app + hl, 'Z', 300);
    check_wire(app, hl + 300);
    /* The request is complete: a second request on the connection gets its own sw8. */
    size_t w0 = wire_len;
    const char *again = "GET /again HTTP/1.1\r\nHost: h:9\r\n\r\n";
    app_send_all(again, strlen(again), 0, APP_WRITE);
    static char exp[512];
    size_t el = expected(again, strlen(again), exp);
    CHECK_EQ(wire_len - w0, el);
    CHECK(memcmp(wire + w0, exp, el) == 0);
    int f = n_exit_finish;
    const char *resp = "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"
                       "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    struct iovec v = {(void *)resp, strlen(resp)};
    sw_conn_on_read(5, &v, 1, (ssize_t)v.iov_len, 0, 0);
    CHECK_EQ(n_exit_finish, f + 2);
}

static void test_not_http_untracked(void)
{
    new_client();
    static const char bin[] = "\x01\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 random binary";
    app_send_all(bin, sizeof(bin) - 1, 3, APP_WRITE);
    CHECK_EQ(wire_len, sizeof(bin) - 1);
    CHECK(memcmp(wire, bin, wire_len) == 0);
    CHECK_EQ(sw_conn_tab[5], 0);
    /* A TLS record: unchanged too, and kept tracked (unparsed) for a TLS session to bind. */
    new_client();
    static const char hello[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 GET / HTTP/1.1\r\n";
    app_send_all(hello, sizeof(hello) - 1, 3, APP_WRITE);
    CHECK_EQ(wire_len, sizeof(hello) - 1);
    CHECK(memcmp(wire, hello, wire_len) == 0);
    CHECK(sw_conn_tab[5] != 0);
    sw_conn_on_close(5);
    CHECK_EQ(sw_conn_tab[5], 0);
}

static void test_no_inject_when_not_sampled(void)
{
    inject_enabled = false;
    new_client();
    const char *req = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
    app_send_all(req, strlen(req), 1, APP_WRITE);
    CHECK_EQ(wire_len, strlen(req));
    CHECK(memcmp(wire, req, wire_len) == 0);
    inject_enabled = true;
}

static void test_server_side(void)
{
    /* accept() of a TCP connection, two pipelined requests, responses written back. */
    CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);
    CHECK(sw_conn_tab[7] != 0 && sw_conn_tab[7] != SW_CONN_CAND);
    int es = n_entry_start, ef = n_entry_finish;
    const char *reqs = "GET /one HTTP/1.1\r\nHost: me\r\nsw8: 1-abc\r\n\r\nHEAD /two HTTP/1.1\r\n"
                       "Host: me\r\n\r\n";
    struct iovec v = {(void *)reqs, strlen(reqs)};
    sw_conn_on_read(7, &v, 1, (ssize_t)strlen(reqs), 0, 0);
    CHECK_EQ(n_entry_start, es + 2);
    CHECK_STR(last_peer, "127.0.0.1:5555");
    CHECK_STR(last_target, "/two");
    reset_wire();
    const char *resp = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 500 x\r\n"
                       "Content-Length: 9\r\n\r\n";
    struct iovec w = {(void *)resp, strlen(resp)};
    struct sw_send_op op = {.kind = SW_SEND_WRITE, .iov = &w, .iovcnt = 1};
    accept_per_call = 10;
    size_t off = 0;
    while (off < strlen(resp)) {
        w.iov_base = (void *)(resp + off);
        w.iov_len = strlen(resp) - off;
        ssize_t r = sw_conn_send(7, &op);
        CHECK(r > 0);
        off += (size_t)r;
    }
    accept_per_call = 0;
    CHECK_EQ(wire_len, strlen(resp)); /* servers' bytes are never changed */
    CHECK_EQ(n_entry_finish, ef + 2);
    CHECK_EQ(last_status, 500);
    /* close with an open request aborts it */
    v.iov_base = (void *)"GET /3 HTTP/1.1\r\n\r\n";
    v.iov_len = strlen(v.iov_base);
    sw_conn_on_read(7, &v, 1, (ssize_t)v.iov_len, 0, 0);
    int ab = n_entry_abort;
    sw_conn_on_close(7);
    CHECK_EQ(n_entry_abort, ab + 1);
    CHECK_EQ(sw_conn_tab[7], 0);
}

/* sw_conn_read() of `req` on fd 7; errno must be as the fake read left it. */
static ssize_t srv_read(const char *req)
{
    char buf[512];
    rd_src = req;
    rd_len = strlen(req);
    rd_err = 0;
    errno = 777;
    ssize_t r = sw_conn_read(7, buf, sizeof(buf));
    CHECK_EQ(errno, 777);
    CHECK_EQ(r, (ssize_t)strlen(req));
    CHECK(memcmp(buf, req, (size_t)r) == 0);
    return r;
}

/*
 * sw_conn_write() (or with `vec`, sw_conn_writev() of three pieces, the middle one empty) of
 * `resp` on fd 7 until all is taken; the wire gets exactly those bytes.
 */
static bool vec;
static void srv_write(const char *resp, size_t per_call)
{
    reset_wire();
    accept_per_call = per_call;
    size_t off = 0, n = strlen(resp);
    while (off < n) {
        errno = 555;
        size_t a = (n - off) / 2;
        struct iovec v[3] = {{(void *)(resp + off), a},
                             {(void *)(resp + off + a), 0},
                             {(void *)(resp + off + a), n - off - a}};
        ssize_t r = vec ? sw_conn_writev(7, v, 3) : sw_conn_write(7, resp + off, n - off);
        CHECK_EQ(errno, 555);
        CHECK(r > 0);
        off += (size_t)r;
    }
    accept_per_call = 0;
    CHECK_EQ(wire_len, n);
    CHECK(memcmp(wire, resp, n) == 0);
}

/* The read(), recv(), write() and writev() paths of a server (sw_conn_read and the others). */
static void server_read_write(void)
{
    CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);
    int es = n_entry_start, ef = n_entry_finish, ab = n_entry_abort;
    n_unguarded = 0;
    /* A whole head in one read, a whole response in one write. */
    srv_read("GET /a/b.png?x=1 HTTP/1.1\r\nHost: srv:81\r\nUser-Agent: t\r\n\r\n");
    CHECK_EQ(n_entry_start, es + 1);
    CHECK_STR(last_target, "/a/b.png?x=1");
    CHECK_STR(last_host, "srv:81");
    CHECK_STR(last_method, "GET");
    CHECK_STR(last_peer, "127.0.0.1:5555");
    CHECK_STR(last_sw8, "");
    srv_write("HTTP/1.1 201 Created\r\nContent-Length: 3\r\n\r\nabc", 0);
    CHECK_EQ(n_entry_finish, ef + 1);
    CHECK_EQ(last_status, 201);
    /* An incoming sw8 and correlation, then a request without them: none is left over. */
    srv_read("POST /p HTTP/1.1\r\nHost: h\r\nsw8: 1-abc\r\nsw8-correlation: k:v\r\n"
             "Content-Length: 2\r\n\r\nhi");
    CHECK_STR(last_sw8, "1-abc");
    CHECK_STR(last_corr, "k:v");
    CHECK_STR(last_method, "POST");
    srv_write("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0);
    srv_read("PUT /q HTTP/1.1\r\n\r\n");
    CHECK_STR(last_sw8, "");
    CHECK_STR(last_corr, "");
    CHECK_STR(last_host, ""); /* no Host */
    CHECK_STR(last_method, "PUT");
    CHECK_STR(last_target, "/q");
    /* The response in pieces of 7 bytes: the span ends with its last byte. */
    int f = n_entry_finish;
    srv_write("HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope", 7);
    CHECK_EQ(n_entry_finish, f + 1);
    CHECK_EQ(last_status, 404);
    /* A head in two reads, then two pipelined requests (one a HEAD) in one read. */
    es = n_entry_start;
    srv_read("GET /split HTTP/1.1\r\nHo");
    CHECK_EQ(n_entry_start, es);
    srv_read("st: s\r\n\r\n");
    CHECK_EQ(n_entry_start, es + 1);
    CHECK_STR(last_target, "/split");
    CHECK_STR(last_host, "s");
    srv_read("HEAD /h HTTP/1.1\r\nHost: a\r\n\r\nGET /g HTTP/1.1\r\nHost: b\r\n\r\n");
    CHECK_EQ(n_entry_start, es + 3);
    CHECK_STR(last_target, "/g");
    f = n_entry_finish;
    srv_write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 0);
    CHECK_EQ(n_entry_finish, f + 1);
    int sc = n_set_current;
    /* HEAD: a Content-Length but no body. */
    srv_write("HTTP/1.1 203 OK\r\nContent-Length: 100\r\n\r\n", 0);
    CHECK_EQ(n_entry_finish, f + 2);
    CHECK_EQ(last_status, 203);
    CHECK_EQ(n_set_current, sc + 1); /* the third request is the one being served now */
    srv_write("HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n", 0);
    CHECK_EQ(n_entry_finish, f + 3);
    CHECK_EQ(last_status, 500);
    /* A body sent with sendfile after the head: the span ends with its last byte. */
    srv_read("GET /file HTTP/1.1\r\n\r\n");
    f = n_entry_finish;
    srv_write("HTTP/1.1 206 Partial\r\nContent-Length: 300\r\n\r\n", 0);
    CHECK_EQ(n_entry_finish, f);
    accept_per_call = 64;
    for (size_t left = 300; left;) {
        ssize_t r = sw_conn_sendfile(7, 3, NULL, left, true);
        CHECK(r > 0);
        left -= (size_t)r;
        CHECK_EQ(n_entry_finish, f + (left == 0));
    }
    accept_per_call = 0;
    CHECK_EQ(last_status, 206);
    /* A file that goes past the body's end: the response ends at it, the bytes after it are
       no head we can follow (the counting shortcut must leave this to the general path). */
    srv_read("GET /file2 HTTP/1.1\r\n\r\n");
    f = n_entry_finish;
    srv_write("HTTP/1.1 203 Partial\r\nContent-Length: 300\r\n\r\n", 0);
    CHECK_EQ(sw_conn_sendfile(7, 3, NULL, 200, true), 200);
    CHECK_EQ(n_entry_finish, f);
    CHECK_EQ(sw_conn_sendfile(7, 3, NULL, 110, true), 110);
    CHECK_EQ(n_entry_finish, f + 1);
    CHECK_EQ(last_status, 203);
    CHECK_EQ(sw_conn_tab[7], 0);
    CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);
    /* writev: the bytes written from the first iovec only when they all lie in it; a head
       split over two separate buffers (the first one followed by other bytes in memory). */
    if (vec) {
        static const char a[] = "HTTP/1.1 200 OK\r\nConteXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX";
        static const char b[] = "nt-Length: 2\r\n\r\nok";
        srv_read("GET /iov HTTP/1.1\r\n\r\n");
        f = n_entry_finish;
        ab = n_entry_abort;
        struct iovec v2[2] = {{(void *)a, 22}, {(void *)b, sizeof(b) - 1}};
        reset_wire();
        CHECK_EQ(sw_conn_writev(7, v2, 2), (ssize_t)(22 + sizeof(b) - 1));
        CHECK_EQ(n_entry_finish, f + 1);
        CHECK_EQ(last_status, 200);
        CHECK_EQ(n_entry_abort, ab);
        CHECK(sw_conn_tab[7] != 0);
        /* All in the first buffer (the second one empty), then exactly its length. */
        srv_read("GET /iov2 HTTP/1.1\r\n\r\n");
        struct iovec v3[2] = {{(void *)"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", 43},
                              {(void *)b, 0}};
        CHECK_EQ(sw_conn_writev(7, v3, 2), 43);
        CHECK_EQ(n_entry_finish, f + 2);
        CHECK_EQ(last_status, 201);
    }
    /* The request of a connection becomes the thread's current one again when it is written
       (sw_trace_touch): no call when it is current already, one when another one is. */
    srv_read("GET /cur HTTP/1.1\r\n\r\n");
    sw_trace_tls.current = 0; /* as if another connection's request had ended meanwhile */
    sc = n_set_current;
    f = n_entry_finish;
    srv_write("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nab", 0);
    CHECK_EQ(n_set_current, sc + 1);
    uint64_t cur = sw_trace_tls.current;
    CHECK(cur != 0);
    srv_write("cd", 0);
    CHECK_EQ(n_set_current, sc + 1);   /* current already */
    sw_trace_tls.current = cur + 1000; /* the thread served another request meanwhile */
    srv_write("e", 0);
    CHECK_EQ(n_set_current, sc + 2);
    CHECK_EQ(sw_trace_tls.current, cur);
    CHECK_EQ(n_entry_finish, f);
    srv_write("f", 0);
    CHECK_EQ(n_entry_finish, f + 1);
    /* Errors: errno as the real call left it; an open request ends as aborted. */
    srv_read("GET /err HTTP/1.1\r\n\r\n");
    char b[8];
    rd_err = EAGAIN;
    CHECK_EQ(sw_conn_read(7, b, sizeof(b)), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK_EQ(n_entry_abort, ab);
    eagain_every = 1;
    struct iovec ev0 = {(void *)"HTTP/1.1 200 OK\r\n", 17};
    CHECK_EQ(vec ? sw_conn_writev(7, &ev0, 1) : sw_conn_write(7, ev0.iov_base, 17), -1);
    CHECK_EQ(errno, EAGAIN);
    eagain_every = 0;
    CHECK_EQ(n_entry_abort, ab);
    rd_err = ECONNRESET;
    CHECK_EQ(sw_conn_read(7, b, sizeof(b)), -1);
    CHECK_EQ(errno, ECONNRESET);
    rd_err = 0;
    CHECK_EQ(n_entry_abort, ab + 1);
    CHECK(sw_conn_tab[7] == 0); /* a connection error ends the following */
    CHECK_EQ(n_unguarded, 0);
    /* Bytes that are not HTTP: the connection is dropped at once, nothing started. */
    CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);
    es = n_entry_start;
    srv_read("\x01\x03\x01 not http at all\r\n\r\n");
    CHECK_EQ(n_entry_start, es);
    CHECK_EQ(sw_conn_tab[7], 0);
    /* A TLS record: nothing started either, kept (unparsed) for a TLS session to bind. */
    CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);
    srv_read("\x16\x03\x01 not http at all\r\n\r\n");
    srv_read("GET / HTTP/1.1\r\n\r\n");
    CHECK_EQ(n_entry_start, es);
    CHECK(sw_conn_tab[7] != 0);
    sw_conn_on_close(7);
    /* A response that is not HTTP ends the open request and the following. */
    CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);
    srv_read("GET / HTTP/1.1\r\n\r\n");
    ab = n_entry_abort;
    srv_write("SSH-2.0-x\r\n", 0);
    CHECK_EQ(n_entry_abort, ab + 1);
    CHECK_EQ(sw_conn_tab[7], 0);
    /* A connection error on a write: the open request ends as aborted, errno is the call's. */
    CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);
    srv_read("GET / HTTP/1.1\r\n\r\n");
    ab = n_entry_abort;
    wr_err = EPIPE;
    struct iovec ev1 = {(void *)"HTTP/1.1 200 OK\r\n", 17};
    CHECK_EQ(vec ? sw_conn_writev(7, &ev1, 1) : sw_conn_write(7, ev1.iov_base, 17), -1);
    wr_err = 0;
    CHECK_EQ(errno, EPIPE);
    CHECK_EQ(n_entry_abort, ab + 1);
    CHECK_EQ(sw_conn_tab[7], 0);
    /* recv(): MSG_PEEK bytes are not consumed (the same head read again is one request). */
    CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);
    es = n_entry_start;
    const char *peeked = "GET /peek HTTP/1.1\r\nHost: p\r\n\r\n";
    char rb[128];
    rd_src = peeked;
    rd_len = strlen(peeked);
    errno = 321;
    CHECK_EQ(sw_conn_recv(7, rb, sizeof(rb), MSG_PEEK), (ssize_t)strlen(peeked));
    CHECK_EQ(rd_flags, MSG_PEEK);
    CHECK_EQ(errno, 321);
    CHECK_EQ(n_entry_start, es);
    CHECK_EQ(sw_conn_recv(7, rb, sizeof(rb), 0), (ssize_t)strlen(peeked));
    CHECK_EQ(errno, 321);
    CHECK_EQ(n_entry_start, es + 1);
    CHECK_STR(last_target, "/peek");
    f = n_entry_finish;
    srv_write("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0);
    CHECK_EQ(n_entry_finish, f + 1);
    /* recv() with MSG_TRUNC: the bytes were discarded, the connection is no longer followed. */
    CHECK_EQ(sw_conn_recv(7, rb, sizeof(rb), MSG_TRUNC), (ssize_t)strlen(peeked));
    CHECK_EQ(n_entry_start, es + 1);
    CHECK_EQ(sw_conn_tab[7], 0);
    /* A response head sent from a file: not followed, the open request ends as aborted. */
    CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);
    srv_read("GET / HTTP/1.1\r\n\r\n");
    ab = n_entry_abort;
    CHECK(sw_conn_sendfile(7, 3, NULL, 10, true) == 10);
    CHECK_EQ(sw_conn_tab[7], 0);
    CHECK_EQ(n_entry_abort, ab + 1);
    /* A CAND slot (a socket never connected or accepted) is let go at its first read. */
    sw_conn_on_socket(7, AF_INET, SOCK_STREAM);
    CHECK_EQ(sw_conn_tab[7], SW_CONN_CAND);
    srv_read("GET / HTTP/1.1\r\n\r\n");
    CHECK_EQ(sw_conn_tab[7], 0);
}

/* Runs `fn` with write() and then with writev() as the server's write path (vec). */
static void both_write_paths(void (*fn)(void))
{
    vec = false;
    fn();
    vec = true;
    fn();
    vec = false;
}

static void test_server_read_write(void)
{
    both_write_paths(server_read_write);
}

/* One request read (recorded or not) and its response written (srv_write), on fd 7. */
static void untraced_rr(bool unrecorded, const char *req, const char *resp)
{
    entry_unrecorded = unrecorded;
    srv_read(req);
    entry_unrecorded = false;
    if (resp)
        srv_write(resp, 0);
}

/*
 * A server's responses to requests that record nothing are not parsed ("Untraced responses",
 * conn.c); the next recorded request's response is found at its status line. Fails without
 * it: the writes of unrecorded requests would end their entries (n_entry_finish) and read the
 * clock.
 */
static void untraced_responses(void)
{
    static const char req[] = "GET /u HTTP/1.1\r\nHost: h\r\n\r\n";
    static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);
    int ef = n_entry_finish, ab = n_entry_abort;
    /* 1. Unrecorded requests: their writes end nothing and read no clock. */
    untraced_rr(true, req, NULL);
    int now = n_now;
    srv_write(resp, 0);
    CHECK_EQ(n_now, now);
    CHECK_EQ(n_entry_finish, ef);
    untraced_rr(true, req, NULL); /* the first one ends at the second's head, without status */
    CHECK_EQ(n_entry_finish, ef + 1);
    CHECK_EQ(last_status, 0);
    now = n_now;
    srv_write("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", 0); /* body in pieces */
    srv_write("HTTP/1.1 500 x\r\n", 0); /* body bytes that look like a status line: ignored */
    CHECK_EQ(n_now, now);
    /* 2. A recorded request: its response is the next status line (RS_RESYNC). */
    untraced_rr(false, "GET /rec HTTP/1.1\r\nHost: h\r\n\r\n", NULL);
    CHECK_EQ(n_entry_finish, ef + 2);
    now = n_now;
    srv_write("HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope", 0);
    CHECK(n_now > now);
    CHECK_EQ(n_entry_finish, ef + 3);
    CHECK_EQ(last_status, 404);
    /* ... and parsing goes on: a recorded request's response in two writes. */
    untraced_rr(false, req, "HTTP/1.1 201 Created\r\nContent-Length: 3\r\n\r\nab");
    CHECK_EQ(n_entry_finish, ef + 3);
    srv_write("c", 0);
    CHECK_EQ(n_entry_finish, ef + 4);
    CHECK_EQ(last_status, 201);
    /* 3. The rest of an unfollowed body after the recorded request's head (a client that
     * pipelined it while the body was being sent): skipped; then its status line. */
    untraced_rr(true, req, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nab");
    untraced_rr(false, req, "cdef");
    CHECK_EQ(n_entry_finish, ef + 5); /* the unrecorded one */
    if (vec) {
        /* the status line cut between two iovecs of one writev */
        static const char rest[] = "1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n";
        struct iovec v2[2] = {{(void *)"HTTP/", 5}, {(void *)rest, sizeof(rest) - 1}};
        reset_wire();
        CHECK_EQ(sw_conn_writev(7, v2, 2), (ssize_t)(5 + sizeof(rest) - 1));
    } else {
        srv_write("HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n", 0);
    }
    CHECK_EQ(n_entry_finish, ef + 6);
    CHECK_EQ(last_status, 202);
    /* 4. Pipelined while skipping (nothing written between the two heads): the parser stood
     * at the first response, so both are followed, and from then on every response is. */
    entry_unrecorded = true;
    srv_read("GET /p1 HTTP/1.1\r\n\r\n");
    entry_unrecorded = false;
    srv_read("GET /p2 HTTP/1.1\r\n\r\n");
    srv_write("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 203 OK\r\n"
              "Content-Length: 0\r\n\r\n",
              0);
    CHECK_EQ(n_entry_finish, ef + 8);
    CHECK_EQ(last_status, 203);
    untraced_rr(true, req, "HTTP/1.1 204 No Content\r\n\r\n");
    CHECK_EQ(n_entry_finish, ef + 9); /* followed: this connection pipelines */
    CHECK_EQ(last_status, 204);
    CHECK_EQ(n_entry_abort, ab);
    sw_conn_on_close(7);

    /* 5. Pipelined after the position was lost: the next status line is the older one's. */
    CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);
    ef = n_entry_finish;
    untraced_rr(true, req, resp);
    untraced_rr(true, req, NULL); /* RS_LOST; nothing written for it yet */
    untraced_rr(false, "GET /late HTTP/1.1\r\n\r\n", NULL);
    CHECK_EQ(n_entry_finish, ef + 1);
    srv_write("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0);
    CHECK_EQ(n_entry_finish, ef + 2);
    CHECK_EQ(last_status, 200);
    srv_write("HTTP/1.1 410 Gone\r\nContent-Length: 0\r\n\r\n", 0);
    CHECK_EQ(n_entry_finish, ef + 3);
    CHECK_EQ(last_status, 410);
    untraced_rr(true, req, resp);
    CHECK_EQ(n_entry_finish, ef + 4); /* this connection pipelines: followed */
    sw_conn_on_close(7);
    /* 6. Close while a recorded request waits for its status line: it ends aborted. */
    CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);
    ab = n_entry_abort;
    untraced_rr(true, req, resp);
    untraced_rr(false, req, NULL);
    sw_conn_on_close(7);
    CHECK_EQ(n_entry_abort, ab + 1);

    /* 7. Status lines that cannot be placed while one is waited for: stop following. */
    static const char *const unsure[] = {
        "abcHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", /* not at the start */
        "HTTP/1",                                          /* cut short */
        "HTTP/1.1 2",                                      /* cut short */
        "HTTP/1.x 200 OK\r\n\r\n",                         /* looks like one */
    };
    int gu = n_given_up;
    for (size_t i = 0; i < sizeof(unsure) / sizeof(unsure[0]); i++) {
        struct sw_conn_stats st0, st1;
        sw_conn_get_stats(&st0);
        CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);
        ef = n_entry_finish;
        ab = n_entry_abort;
        untraced_rr(true, req, resp);
        untraced_rr(false, req, "the body's end ");
        CHECK(sw_conn_tab[7] != 0);
        srv_write(unsure[i], 0);
        CHECK_EQ(sw_conn_tab[7], 0); /* untracked */
        CHECK_EQ(n_entry_finish, ef + 2);
        CHECK_EQ(last_status, 0);
        CHECK_EQ(n_entry_abort, ab);
        sw_conn_get_stats(&st1);
        CHECK_EQ(st1.rs_given_up, st0.rs_given_up + 1);
        CHECK_EQ(n_given_up, gu + 1 + (int)i); /* the ring's given_up (sw_proto_give_up) */
        sw_conn_on_close(7);
    }
    /* 8. sendfile: skipped while skipping; while a status line is waited for, it may hold it. */
    CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);
    ef = n_entry_finish;
    untraced_rr(true, req, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
    CHECK_EQ(sw_conn_sendfile(7, 3, NULL, 100, true), 100);
    CHECK_EQ(n_entry_finish, ef);
    untraced_rr(false, req, NULL);
    CHECK_EQ(n_entry_finish, ef + 1);
    CHECK(sw_conn_tab[7] != 0);
    CHECK_EQ(sw_conn_sendfile(7, 3, NULL, 50, true), 50);
    CHECK_EQ(sw_conn_tab[7], 0);
    CHECK_EQ(n_entry_finish, ef + 2);
    sw_conn_on_close(7);
    /* 9. Close while skipping: the unrecorded request whose response began ends without a status
     * and without an error (whether its response was complete is not known; a keepable one is
     * not kept for it); one whose response never began is aborted. */
    CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);
    ab = n_entry_abort;
    ef = n_entry_finish;
    untraced_rr(true, req, "HTTP/1.1 200 OK\r\n");
    sw_conn_on_close(7);
    CHECK_EQ(n_entry_abort, ab);
    CHECK_EQ(n_entry_finish, ef + 1);
    CHECK_EQ(last_status, 0);
    CHECK_EQ(sw_conn_tab[7], 0);
    CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);
    untraced_rr(true, req, NULL);
    sw_conn_on_close(7);
    CHECK_EQ(n_entry_abort, ab + 1);
    CHECK_EQ(sw_conn_tab[7], 0);
}

/*
 * Keepable requests (trace.h): the status line of their response's first write goes to
 * sw_trace_entry_respond, once; a kept one's response is followed from there and its entry ends
 * with its status; one not kept is not followed. Fails without rs_keep (proto_http1.c): no respond
 * call, and the kept request would end without a status at the next request head.
 */
static void keep_responses(void)
{
    static const char req[] = "GET /k HTTP/1.1\r\nHost: h\r\n\r\n";
    CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);
    entry_keepable = true;
    int ef = n_entry_finish, nr = n_respond;
    /* Not kept (200): the response is not followed, the request ends at the next head. */
    untraced_rr(true, req, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    CHECK_EQ(n_respond, nr + 1);
    CHECK_EQ(last_respond_status, 200);
    CHECK_EQ(n_entry_finish, ef);
    srv_write("xx", 0); /* later writes ask nothing */
    CHECK_EQ(n_respond, nr + 1);
    /* Kept (503, head and body written apart): followed, its entry ends at its last byte. */
    untraced_rr(true, req, "HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\n");
    CHECK_EQ(n_respond, nr + 2);
    CHECK_EQ(last_respond_status, 503);
    CHECK_EQ(n_entry_finish, ef + 1); /* the previous request, at this head */
    CHECK_EQ(last_status, 0);
    srv_write("busy", 0);
    CHECK_EQ(n_entry_finish, ef + 2);
    CHECK_EQ(last_status, 503);
    /* A first write that is no status line asks nothing. */
    untraced_rr(true, req, "garbage");
    CHECK_EQ(n_respond, nr + 2);
    /* Nor does a status line whose status is below 100 (fuzz_conn: "HTTP/1.1 053"). */
    untraced_rr(true, req, "HTTP/1.1 053 OK\r\nContent-Length: 0\r\n\r\n");
    CHECK_EQ(n_respond, nr + 2);
    entry_keepable = false;
    CHECK_EQ(n_unguarded, 0);
    sw_conn_on_close(7);
}

static void test_keep_responses(void)
{
    both_write_paths(keep_responses);
}

static void test_untraced_responses(void)
{
    both_write_paths(untraced_responses);
}

static void test_fd_table(void)
{
    /* UDP and Unix datagrams are never tracked (Unix streams: test_proto.c); dup shares; dup2
     * over a tracked fd ends it. */
    sw_conn_on_socket(9, AF_INET, SOCK_DGRAM);
    CHECK_EQ(sw_conn_tab[9], 0);
    sw_conn_on_socket(9, AF_UNIX, SOCK_DGRAM);
    CHECK_EQ(sw_conn_tab[9], 0);
    sw_conn_on_socket(9, AF_INET6, SOCK_STREAM | SOCK_NONBLOCK);
    CHECK_EQ(sw_conn_tab[9], SW_CONN_CAND);
    new_client();
    sw_conn_on_dup(5, 11);
    CHECK_EQ(sw_conn_tab[11], sw_conn_tab[5]);
    sw_conn_on_close(5);
    CHECK_EQ(sw_conn_tab[5], 0);
    CHECK(sw_conn_tab[11] != 0);
    /* The dup still carries the connection (insertion works through it). */
    sw_conn_on_dup(11, 5);
    sw_conn_on_close(11);
    reset_wire();
    const char *req = "GET / HTTP/1.1\r\nHost: d\r\n\r\n";
    app_send_all(req, strlen(req), 4, APP_WRITE);
    check_wire(req, strlen(req));
    sw_conn_close_range(0, ~0u);
    CHECK_EQ(sw_conn_tab[5], 0);
    CHECK_EQ(sw_conn_tab[9], 0);
    /* Pool exhaustion: connections beyond the pool stay untracked and are counted. */
    struct sw_conn_stats st0, st1;
    sw_conn_get_stats(&st0);
    for (int fd = 20; fd < 40; fd++) {
        sw_conn_on_socket(fd, AF_INET, SOCK_STREAM);
        struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(1)};
        sw_conn_connect(fd, (struct sockaddr *)&s, sizeof(s));
    }
    sw_conn_get_stats(&st1);
    CHECK(st1.pool_exhausted > st0.pool_exhausted);
    sw_conn_close_range(20, 39);
    for (int fd = 20; fd < 40; fd++)
        CHECK_EQ(sw_conn_tab[fd], 0);
}

/* Threads take and give back pool objects concurrently (run under TSan with SW_SANITIZE). */
static void *pool_worker(void *arg)
{
    int base = 200 + 10 * (int)(long)arg;
    struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(80)};
    for (int i = 0; i < 3000; i++) {
        sw_conn_on_socket(base, AF_INET, SOCK_STREAM);
        sw_conn_connect(base, (struct sockaddr *)&s, sizeof(s));
        sw_conn_on_dup(base, base + 1);
        sw_conn_on_close(base);
        sw_conn_on_close(base + 1);
        CHECK_EQ(sw_conn_tab[base], 0);
        CHECK_EQ(sw_conn_tab[base + 1], 0);
    }
    return NULL;
}

/* ---- TLS sessions (conn.h): the plaintext of SSL_write/SSL_read ------------------------------ */

/*
 * A fake TLS library's write: OpenSSL's rules. After a failure (WANT_WRITE) the next call must
 * present the pointer of the failed one and at least its length (ssl3_write_bytes and
 * ssl3_write_pending: SSL_R_BAD_LENGTH / SSL_R_BAD_WRITE_RETRY otherwise), or NULL/0
 * (GnuTLS's resume); every want_every-th call fails; in partial mode a call takes at most
 * `record` bytes. What it takes lands in `plain` (what the peer decrypts).
 */
struct fake_tls {
    int calls, want_every;
    bool partial;
    size_t record;
    bool pending;
    const void *fail_p;
    size_t fail_len;
    int bad_retry;
    char plain[1 << 16];
    size_t plain_len;
};

static long fake_tls_write(void *ctx, const void *buf, size_t len)
{
    struct fake_tls *f = ctx;
    f->calls++;
    if (f->pending) {
        if (buf == NULL && len == 0) { /* resume: the library had the bytes */
            buf = f->fail_p;
            len = f->fail_len;
        } else if (buf != f->fail_p || len < f->fail_len) {
            f->bad_retry++; /* OpenSSL: SSL_R_BAD_WRITE_RETRY / SSL_R_BAD_LENGTH */
        }
        f->pending = false;
    } else if (f->want_every && f->calls % f->want_every == 0) {
        f->pending = true;
        f->fail_p = buf;
        f->fail_len = len;
        errno = EAGAIN;
        return -1; /* SSL_write's failure value (SSL_get_error: WANT_WRITE) */
    }
    size_t k = f->partial && f->record && len > f->record ? f->record : len;
    CHECK(f->plain_len + k <= sizeof(f->plain));
    memcpy(f->plain + f->plain_len, buf, k);
    f->plain_len += k;
    return (long)k;
}

/* The application's SSL_write loop: repeats a failed call with the same arguments (or NULL/0
 * with `resume_null`); in partial mode goes on after short counts. */
static void tls_app_write(sw_conn_ref ref, struct fake_tls *f, const char *app, size_t n,
                          size_t chunk, bool resume_null)
{
    size_t off = 0;
    bool repeat = false;
    for (int guard = 0; off < n; guard++) {
        CHECK(guard < 100000);
        size_t len = chunk && chunk < n - off ? chunk : n - off;
        long r = repeat && resume_null
                     ? sw_conn_tls_write(ref, NULL, 0, SW_CONN_TLS_PARTIAL, fake_tls_write, f)
                     : sw_conn_tls_write(ref, app + off, len, f->partial ? SW_CONN_TLS_PARTIAL : 0,
                                         fake_tls_write, f);
        if (r == 0 && repeat && resume_null) {
            repeat = false; /* only our bytes went on the resume: the application sends its own */
            continue;
        }
        if (r <= 0) {
            CHECK_EQ(r, -1); /* the library's own failure value, unchanged */
            CHECK_EQ(errno, EAGAIN);
            repeat = true;
            continue;
        }
        repeat = false;
        if (!f->partial)
            CHECK_EQ(r, len); /* all or nothing, as the library's rule */
        CHECK((size_t)r <= len);
        off += (size_t)r;
    }
}

static void check_plain(const struct fake_tls *f, const char *app, size_t n)
{
    static char exp[1 << 16];
    size_t el = expected(app, n, exp);
    if (el != f->plain_len || memcmp(exp, f->plain, el) != 0) {
        fprintf(stderr, "TLS plaintext mismatch:\n--- expected (%zu)\n%.*s\n--- got (%zu)\n%.*s\n",
                el, (int)el, exp, f->plain_len, (int)f->plain_len, f->plain);
        CHECK(0);
    }
    CHECK_EQ(f->bad_retry, 0);
}

/* A client session on fd 5: the fd's own bytes pass untouched, the plaintext gets its sw8 under
 * WANT_WRITE in the middle of a head, in every chunking, partial mode or not. */
static void test_tls_client_write(void)
{
    static struct fake_tls f;
    size_t chunks[] = {0, 1, 3, 7};
    int wants[] = {0, 2, 3, 5};
    int cases = 0;
    for (size_t r = 0; r < SW_ARRAY_LEN(requests); r++)
        for (size_t c = 0; c < SW_ARRAY_LEN(chunks); c++)
            for (size_t w = 0; w < SW_ARRAY_LEN(wants); w++)
                for (int mode = 0; mode < 3; mode++) {
                    new_client();
                    sw_conn_ref ref = sw_conn_tls_open(5, SW_ROLE_CLIENT);
                    CHECK(ref != 0);
                    memset(&f, 0, sizeof(f));
                    f.want_every = wants[w];
                    f.partial = mode >= 1;
                    f.record = mode >= 1 ? 5 : 0;
                    tls_app_write(ref, &f, requests[r], strlen(requests[r]), chunks[c], mode == 2);
                    check_plain(&f, requests[r], strlen(requests[r]));
                    sw_conn_tls_close(ref);
                    cases++;
                }
    printf("# %d TLS write cases\n", cases);

    /* A long head in one call, taken a byte per call (partial mode, GnuTLS's too): more pieces
     * than any fixed count of rounds, and every byte the call claims goes (fuzz_conn found the
     * call claiming all after 1024 pieces). */
    static char big[3000];
    int hl = snprintf(big, sizeof(big), "GET /big HTTP/1.1\r\nHost: example.com\r\nX-Pad: ");
    CHECK(hl > 0);
    memset(big + hl, 'p', 2000);
    const char tail[] = "\r\nAccept: */*\r\n\r\n";
    memcpy(big + hl + 2000, tail, sizeof(tail) - 1);
    size_t bl = (size_t)hl + 2000 + sizeof(tail) - 1;
    for (int w = 0; w < 2; w++) {
        new_client();
        sw_conn_ref bref = sw_conn_tls_open(5, SW_ROLE_CLIENT);
        CHECK(bref != 0);
        memset(&f, 0, sizeof(f));
        f.partial = true;
        f.record = 1;
        f.want_every = w ? 7 : 0;
        tls_app_write(bref, &f, big, bl, 0, false);
        check_plain(&f, big, bl);
        CHECK(f.calls > 2000);
        sw_conn_tls_close(bref);
    }

    /* The fd's ciphertext passes untouched and unparsed. */
    new_client();
    sw_conn_ref ref = sw_conn_tls_open(5, SW_ROLE_CLIENT);
    const char rec[] = "\x16\x03\x01\x00\x05hello GET / HTTP/1.1\r\n\r\n";
    CHECK_EQ(sw_conn_write(5, rec, sizeof(rec) - 1), sizeof(rec) - 1);
    CHECK_EQ(wire_len, sizeof(rec) - 1);
    CHECK(memcmp(wire, rec, wire_len) == 0);
    /* A response read through the session ends the exit span with its status. */
    int xf = n_exit_finish;
    memset(&f, 0, sizeof(f));
    tls_app_write(ref, &f, requests[0], strlen(requests[0]), 0, false);
    const char resp[] = "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";
    sw_conn_tls_read(ref, resp, sizeof(resp) - 1, 0);
    CHECK_EQ(n_exit_finish, xf + 1);
    CHECK_EQ(last_status, 201);
    sw_conn_tls_close(ref);
}

/* A session without an fd (curl's memory BIO) takes the fd of the socket call made inside its
 * TLS call, with the fd's peer; a ClientHello written before the session binds keeps the fd
 * tracked (unparsed) for it. */
static void test_tls_bind_nested(void)
{
    new_client(); /* fd 5, connected to 127.0.0.1:8080 */
    const char hello[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
    CHECK_EQ(sw_conn_write(5, hello, sizeof(hello) - 1), sizeof(hello) - 1);
    CHECK(sw_conn_tab[5] != 0); /* kept for a session */
    CHECK_EQ(wire_len, sizeof(hello) - 1);
    sw_conn_ref ref = sw_conn_tls_open(-1, SW_ROLE_CLIENT);
    CHECK(ref != 0);
    sw_conn_tls_enter(ref);
    CHECK_EQ(sw_conn_write(5, "\x17\x03\x03", 3), 3); /* nested: binds fd 5 */
    sw_conn_tls_leave();
    CHECK_EQ(sw_conn_tab[5], 0); /* bound: ciphertext only, untracked (one-branch path) */
    static struct fake_tls f;
    memset(&f, 0, sizeof(f));
    tls_app_write(ref, &f, requests[0], strlen(requests[0]), 0, false);
    check_plain(&f, requests[0], strlen(requests[0]));
    CHECK_STR(last_peer, "example.com:80");
    sw_conn_on_close(5);
    sw_conn_tls_close(ref);
}

/* A server session: requests read through the session start entry spans, responses written
 * through it end them; nothing is inserted; the counts are the library's. */
static void test_tls_server(void)
{
    sw_conn_on_close(7);
    char buf[256];
    CHECK_EQ(sw_conn_accept(3, NULL, NULL, 0, false), 7);
    sw_conn_ref ref =
        sw_conn_tls_open(7, SW_ROLE_CLIENT); /* before the handshake: fd's role wins */
    CHECK(ref != 0);
    CHECK_EQ(sw_conn_tab[7], 0); /* bound: ciphertext only, untracked (one-branch path) */
    rd_src = "\x16\x03\x01\x00\x10";
    rd_len = 5;
    CHECK_EQ(sw_conn_read(7, buf, sizeof(buf)), 5); /* ciphertext: nothing parsed */
    int es = n_entry_start, ef = n_entry_finish;
    const char req[] = "GET /tls HTTP/1.1\r\nHost: s\r\n\r\n";
    sw_conn_tls_read(ref, req, sizeof(req) - 1, 0);
    CHECK_EQ(n_entry_start, es + 1);
    CHECK_STR(last_target, "/tls");
    static struct fake_tls f;
    memset(&f, 0, sizeof(f));
    const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    CHECK_EQ(sw_conn_tls_write(ref, resp, sizeof(resp) - 1, 0, fake_tls_write, &f),
             sizeof(resp) - 1);
    CHECK_EQ(f.plain_len, sizeof(resp) - 1); /* nothing inserted in a response */
    CHECK_EQ(n_entry_finish, ef + 1);
    CHECK_EQ(last_status, 200);
    /* A fatal read error ends a request in flight as an error. */
    int ea = n_entry_abort;
    sw_conn_tls_read(ref, req, sizeof(req) - 1, 0);
    sw_conn_tls_read(ref, NULL, -1, ECONNRESET);
    CHECK_EQ(n_entry_abort, ea + 1);
    sw_conn_tls_close(ref);
    sw_conn_on_close(7);
    CHECK_EQ(sw_conn_tab[7], 0);
}

static void test_pool_threads(void)
{
    pthread_t t[4];
    for (long i = 0; i < 4; i++)
        CHECK_EQ(pthread_create(&t[i], NULL, pool_worker, (void *)i), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    /* Every object came back: the pool (16) serves 16 new connections. */
    struct sw_conn_stats a, b;
    sw_conn_get_stats(&a);
    struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(80)};
    for (int fd = 300; fd < 316; fd++) {
        sw_conn_on_socket(fd, AF_INET, SOCK_STREAM);
        sw_conn_connect(fd, (struct sockaddr *)&s, sizeof(s));
        CHECK(sw_conn_tab[fd] != 0 && sw_conn_tab[fd] != SW_CONN_CAND);
    }
    sw_conn_get_stats(&b);
    CHECK_EQ(b.pool_exhausted, a.pool_exhausted);
    sw_conn_close_range(300, 315);
}

/* The real table resolves in a plain executable (RTLD_NEXT = libc) and the calls work. */
static void test_real_resolve(void)
{
    CHECK_EQ(sw_real_resolve(), 0);
    CHECK(sw_real_resolved());
    CHECK_EQ(sw_real_resolve(), 0); /* idempotent */
    int p[2];
    CHECK_EQ(pipe(p), 0);
    CHECK_EQ(sw_libc.write(p[1], "ab", 2), 2);
    char b[2];
    CHECK_EQ(sw_libc.read(p[0], b, 2), 2);
    CHECK(b[0] == 'a' && b[1] == 'b');
    CHECK_EQ(sw_libc.close(p[0]), 0);
    CHECK_EQ(sw_libc.close(p[1]), 0);
}

int main(void)
{
    RUN_TEST(test_real_resolve);
    fake_socket_install();
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK_EQ(sw_conn_init(NULL, 16), 0);
    CHECK(sw_conn_max >= 64);
    RUN_TEST(test_every_split);
    RUN_TEST(test_insertion_matrix);
    RUN_TEST(test_exit_peer_and_response);
    RUN_TEST(test_attribution);
    RUN_TEST(test_forwarded_sw8);
    RUN_TEST(test_client_sendfile);
    RUN_TEST(test_not_http_untracked);
    RUN_TEST(test_no_inject_when_not_sampled);
    RUN_TEST(test_server_side);
    RUN_TEST(test_server_read_write);
    RUN_TEST(test_untraced_responses);
    RUN_TEST(test_keep_responses);
    RUN_TEST(test_fd_table);
    RUN_TEST(test_tls_client_write);
    RUN_TEST(test_tls_bind_nested);
    RUN_TEST(test_tls_server);
    RUN_TEST(test_pool_threads);
    sw_conn_shutdown();
    return 0;
}
