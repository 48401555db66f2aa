/*
 * fuzz_h2.c - libFuzzer target for the HTTP/2 module (agent/proto_h2.c: frame parser, HPACK
 * decoder hpack.c, sw8 insertion) driven through the connection layer (conn.c) against the
 * fake socket and fake trace module of the unit tests.
 *
 * Input: byte 0: bit 0 the role (1: server), bit 1: the client preface is put first in its
 * direction (the fuzzer then spends its bytes on frames). Then segments { u8 d: direction d & 1
 * (1: written by the application), length d >> 1 ; bytes }. Checked beyond "no crash": the
 * application's counts add up to its own bytes; a server's written bytes reach the wire
 * unchanged; a client's wire holds at least its own bytes; once the connection is closed every
 * span that started has ended, and no other (whichever module followed the connection).
 */
#include "common.h"

#include "conn.h"
#include "proto.h"
#include "proto_h2.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "unit/fake_socket.h"
#include "unit/fake_trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool inited;

static void app_write(int fd, const uint8_t *p, size_t n)
{
    size_t off = 0;
    for (int guard = 0; off < n && guard < 100000; guard++) {
        ssize_t r = sw_conn_write(fd, p + off, n - off);
        if (r < 0) {
            if (errno != EAGAIN)
                abort();
            continue;
        }
        if (r == 0 || (size_t)r > n - off)
            abort();
        off += (size_t)r;
    }
    if (off != n)
        abort();
}

static void app_read(int fd, const uint8_t *p, size_t n)
{
    static char buf[1 << 16];
    rd_src = (const char *)p;
    rd_len = n;
    rd_err = 0;
    if (sw_conn_read(fd, buf, n) != (ssize_t)n)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    if (!inited) {
        fake_socket_install();
        if (sw_conn_init(NULL, 16) != 0)
            abort();
        inited = true;
    }
    if (size < 1)
        return 0;
    bool server = data[0] & 1, pre = data[0] & 2;
    int fd;
    int es = n_entry_start, ef = n_entry_finish, ea = n_entry_abort;
    int xs = n_exit_start, xf = n_exit_finish, xe = n_exit_error, rf = n_rpc_finish;
    reset_wire();
    if (server) {
        fd = sw_conn_accept(3, NULL, NULL, 0, false);
        if (fd != 7)
            abort();
        if (pre)
            app_read(fd, preface, 24);
    } else {
        fd = 5;
        sw_conn_on_socket(fd, AF_INET, SOCK_STREAM);
        struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(8080)};
        s.sin_addr.s_addr = htonl(0x7f000001);
        if (sw_conn_connect(fd, (struct sockaddr *)&s, sizeof(s)) != 0)
            abort();
        if (pre)
            app_write(fd, preface, 24);
    }
    size_t written = pre && !server ? 24 : 0, wire_from = wire_len;
    static uint8_t out_bytes[1 << 16];
    size_t out_n = 0;
    for (size_t at = 1; at < size;) {
        uint8_t d = data[at++];
        size_t n = d >> 1;
        if (n > size - at)
            n = size - at;
        if (d & 1) {
            app_write(fd, data + at, n);
            if (out_n + n <= sizeof(out_bytes))
                memcpy(out_bytes + out_n, data + at, n);
            out_n += n;
            written += n;
        } else if (n) {
            app_read(fd, data + at, n);
        }
        at += n;
    }
    if (server) {
        /* a server's bytes are never changed */
        if (wire_len - wire_from != out_n ||
            (out_n <= sizeof(out_bytes) && memcmp(wire + wire_from, out_bytes, out_n) != 0))
            abort();
    } else if (wire_len < written) {
        abort();
    }
    struct sw_conn *c = sw_conn_test_obj(fd);
    if (getenv("FUZZ_H2_WHO"))
        fprintf(stderr, "module: %s\n",
                c && c->proto != SW_PROTO_NONE ? sw_protos[c->proto]->name : "none");
    sw_conn_on_close(fd);
    /* every span that started has ended, once, whichever module took the bytes (another one,
     * FastCGI say, may have: its spans count the same) */
    if ((n_entry_start - es) + (n_exit_start - xs) != (n_entry_finish - ef) + (n_entry_abort - ea) +
                                                          (n_exit_finish - xf) +
                                                          (n_exit_error - xe) + (n_rpc_finish - rf))
        abort();
    return 0;
}
