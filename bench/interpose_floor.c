/*
 * interpose_floor.c - an experiment, not an agent: the floor of interposition alone. It exports
 * the socket and I/O calls libswagent.so interposes on a request's path and forwards each to
 * the next definition (libc's) through a pointer resolved once, doing nothing else: one more
 * indirect jump per call, and a preloaded object with its own code and data pages.
 *
 * Measured against the empty preloaded object (empty_preload.c) and the agent with
 * `bench/run.sh --ab-lib=A --ab-b=B --saturated` (bench/HISTORY.md, "where the saturated cost
 * is"): what interposing costs a program before any per-call work.
 *
 * Left out: the exec and spawn calls (the agent wraps them to keep its environment; they are
 * not on a request's path) and fork (the agent uses pthread_atfork).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

/* FLOOR(ret, name, (params), (args)): a pointer to the next `name`, and `name` calling it. The
   pointer is resolved by the first call (a separate function, so that the usual call is a
   load, a test and a jump). */
#define FLOOR(ret, name, params, args)                                                             \
    static ret(*next_##name) params;                                                               \
    __attribute__((noinline, cold)) static ret first_##name params                                 \
    {                                                                                              \
        next_##name = (ret(*) params)dlsym(RTLD_NEXT, #name);                                      \
        return next_##name args;                                                                   \
    }                                                                                              \
    __attribute__((visibility("default"))) ret name params                                         \
    {                                                                                              \
        if (__builtin_expect(!next_##name, 0))                                                     \
            return first_##name args;                                                              \
        return next_##name args;                                                                   \
    }

FLOOR(ssize_t, read, (int fd, void *b, size_t n), (fd, b, n))
FLOOR(ssize_t, readv, (int fd, const struct iovec *v, int c), (fd, v, c))
FLOOR(ssize_t, recv, (int fd, void *b, size_t n, int f), (fd, b, n, f))
FLOOR(ssize_t, recvfrom, (int fd, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l),
      (fd, b, n, f, a, l))
FLOOR(ssize_t, recvmsg, (int fd, struct msghdr *m, int f), (fd, m, f))
FLOOR(ssize_t, __read_chk, (int fd, void *b, size_t n, size_t bl), (fd, b, n, bl))
FLOOR(ssize_t, __recv_chk, (int fd, void *b, size_t n, size_t bl, int f), (fd, b, n, bl, f))
FLOOR(ssize_t, __recvfrom_chk,
      (int fd, void *b, size_t n, size_t bl, int f, struct sockaddr *a, socklen_t *l),
      (fd, b, n, bl, f, a, l))
FLOOR(ssize_t, write, (int fd, const void *b, size_t n), (fd, b, n))
FLOOR(ssize_t, writev, (int fd, const struct iovec *v, int c), (fd, v, c))
FLOOR(ssize_t, send, (int fd, const void *b, size_t n, int f), (fd, b, n, f))
FLOOR(ssize_t, sendto,
      (int fd, const void *b, size_t n, int f, const struct sockaddr *a, socklen_t l),
      (fd, b, n, f, a, l))
FLOOR(ssize_t, sendmsg, (int fd, const struct msghdr *m, int f), (fd, m, f))
FLOOR(ssize_t, sendfile, (int o, int i, off_t *off, size_t n), (o, i, off, n))
FLOOR(ssize_t, sendfile64, (int o, int i, off_t *off, size_t n), (o, i, off, n))
FLOOR(int, accept, (int s, struct sockaddr *a, socklen_t *l), (s, a, l))
FLOOR(int, accept4, (int s, struct sockaddr *a, socklen_t *l, int f), (s, a, l, f))
FLOOR(int, connect, (int s, const struct sockaddr *a, socklen_t l), (s, a, l))
FLOOR(int, socket, (int d, int t, int p), (d, t, p))
FLOOR(int, shutdown, (int s, int h), (s, h))
FLOOR(int, close, (int fd), (fd))
FLOOR(int, close_range, (unsigned lo, unsigned hi, int f), (lo, hi, f))
FLOOR(int, dup, (int fd), (fd))
FLOOR(int, dup2, (int a, int b), (a, b))
FLOOR(int, dup3, (int a, int b, int f), (a, b, f))
