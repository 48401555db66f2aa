/*
 * fake_socket.h - a fake socket for the connection layer's unit tests (test_conn.c,
 * test_proto.c): writes land in `wire`, taking accept_per_call bytes per call (0: all) and
 * answering EAGAIN every eagain_every-th call; reads return a script. Install it into sw_libc
 * with fake_socket_install(). Include once, in the test's one translation unit.
 */
#ifndef SW_TEST_FAKE_SOCKET_H
#define SW_TEST_FAKE_SOCKET_H

#include "check.h"
#include "real.h"

#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

/* ---- fake socket ---------------------------------------------------------------------------- */

static char wire[1 << 16];
static size_t wire_len;
static size_t accept_per_call; /* 0: everything */
static int eagain_every;       /* every Nth call answers EAGAIN (0: never) */
static int call_no;
static int n_writes;
static int wr_err; /* every call fails with this errno (0: none) */

static ssize_t fake_take(const struct iovec *v, int n)
{
    call_no++;
    n_writes++;
    if (wr_err) {
        errno = wr_err;
        return -1;
    }
    if (eagain_every && call_no % eagain_every == 0) {
        errno = EAGAIN;
        return -1;
    }
    size_t cap = accept_per_call ? accept_per_call : (size_t)-1, took = 0;
    for (int i = 0; i < n && took < cap; i++) {
        size_t l = v[i].iov_len < cap - took ? v[i].iov_len : cap - took;
        CHECK(wire_len + l <= sizeof(wire));
        memcpy(wire + wire_len, v[i].iov_base, l);
        wire_len += l;
        took += l;
    }
    if (took == 0) {
        errno = EAGAIN;
        return -1;
    }
    return (ssize_t)took;
}
static ssize_t fake_write(int fd, const void *b, size_t n)
{
    (void)fd;
    struct iovec v = {(void *)b, n};
    return fake_take(&v, 1);
}
static ssize_t fake_writev(int fd, const struct iovec *v, int n)
{
    (void)fd;
    return fake_take(v, n);
}
static ssize_t fake_send(int fd, const void *b, size_t n, int f)
{
    (void)f;
    return fake_write(fd, b, n);
}
static ssize_t fake_sendmsg(int fd, const struct msghdr *m, int f)
{
    (void)fd, (void)f;
    return fake_take(m->msg_iov, (int)m->msg_iovlen);
}
static ssize_t fake_sendfile64(int o, int i, off64_t *off, size_t n)
{
    (void)o, (void)i, (void)off;
    static char file[4096];
    memset(file, 'Z', sizeof(file));
    struct iovec v = {file, n < sizeof(file) ? n : sizeof(file)};
    return fake_take(&v, 1);
}
/* What the next fake read() returns: rd_len bytes of rd_src, or -1 with rd_err (rd_err != 0). */
static const char *rd_src;
static size_t rd_len;
static int rd_err;
static ssize_t fake_read(int fd, void *b, size_t n)
{
    (void)fd;
    if (rd_err) {
        errno = rd_err;
        return -1;
    }
    size_t k = rd_len < n ? rd_len : n;
    memcpy(b, rd_src, k);
    return (ssize_t)k; /* errno untouched, as the real call on success */
}

static int rd_flags; /* flags of the last fake recv() */
static ssize_t fake_recv(int fd, void *b, size_t n, int flags)
{
    rd_flags = flags;
    return fake_read(fd, b, n); /* MSG_PEEK or not: the script gives the same bytes */
}

static int fake_connect(int fd, const struct sockaddr *a, socklen_t l)
{
    (void)fd, (void)a, (void)l;
    return 0;
}
static int fake_accept(int fd, struct sockaddr *a, socklen_t *l)
{
    (void)fd;
    struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(5555)};
    s.sin_addr.s_addr = htonl(0x7f000001);
    if (a && l) {
        memcpy(a, &s, *l < sizeof(s) ? *l : sizeof(s));
        *l = sizeof(s);
    }
    return 7;
}
static int fake_getpeername(int fd, struct sockaddr *a, socklen_t *l)
{
    return fake_accept(fd, a, l) == 7 ? 0 : -1;
}

static void reset_wire(void)
{
    wire_len = 0;
    call_no = 0;
    n_writes = 0;
}

/* Points sw_libc's socket calls at the fakes above. */
static void fake_socket_install(void)
{
    sw_libc.read = fake_read;
    sw_libc.recv = fake_recv;
    sw_libc.write = fake_write;
    sw_libc.writev = fake_writev;
    sw_libc.send = fake_send;
    sw_libc.sendmsg = fake_sendmsg;
    sw_libc.connect = fake_connect;
    sw_libc.sendfile64 = fake_sendfile64;
    sw_libc.accept = fake_accept;
    sw_libc.getpeername = fake_getpeername;
}

#endif /* SW_TEST_FAKE_SOCKET_H */
