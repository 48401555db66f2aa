/*
 * conn.h - the fd table and the per-connection HTTP state (interpose's slow paths).
 *
 * Rules: runs on application threads. No malloc (the fd table and the connection pool are
 * mmap'd once by sw_conn_init), no blocking of our own, errno of the application preserved
 * (send paths set errno exactly as the real call would have). The fast path in interpose.c
 * reads only sw_conn_max and sw_conn_tab: an fd is "untracked" when it is out of the table
 * or its slot is 0, and then nothing else of this module runs.
 *
 * Slot values: 0 untracked; SW_CONN_CAND a TCP socket (AF_INET/AF_INET6, SOCK_STREAM) not yet
 * connected (listener or client before connect); otherwise 1 + index of a connection object
 * in the pool. dup'ed fds share the object (reference count); the last close ends it.
 */
#ifndef SW_CONN_H
#define SW_CONN_H

#include "common.h"

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

struct sw_config;

#define SW_CONN_CAND 0xffffffffu
#define SW_CONN_POOL_DEFAULT 4096u
#define SW_CONN_FD_CAP (1u << 20)

extern uint32_t sw_conn_max SW_HIDDEN;  /* fd table size; 0 while the agent is off */
extern uint32_t *sw_conn_tab SW_HIDDEN; /* fd -> slot value (see above) */

/*
 * The one predictable branch of every fd-keyed wrapper (plain movs on x86). sw_conn_max is
 * published with release once the table is mapped (the agent activates while other threads
 * may run: agent.c), so it is read with acquire before the table pointer.
 */
#define SW_CONN_UNTRACKED(fd)                                                                      \
    ((unsigned)(fd) >= __atomic_load_n(&sw_conn_max, __ATOMIC_ACQUIRE) ||                          \
     !__atomic_load_n(&sw_conn_tab[(fd)], __ATOMIC_RELAXED))

/* The connection module is on (the agent activated). */
#define SW_CONN_ON() (__atomic_load_n(&sw_conn_max, __ATOMIC_ACQUIRE) != 0)

/* A connection's role: from accept() (server) or connect() (client). */
enum sw_conn_role { SW_ROLE_SERVER = 1, SW_ROLE_CLIENT = 2 };

/* What kind of write call the application made (the slow path replays it exactly). */
enum sw_send_kind { SW_SEND_WRITE, SW_SEND_WRITEV, SW_SEND_SEND, SW_SEND_SENDTO, SW_SEND_SENDMSG };

/* One write-family call, described without copying anything. */
struct sw_send_op {
    enum sw_send_kind kind;
    int flags;               /* send*: flags */
    const struct iovec *iov; /* the application's bytes (a 1-element iovec for write/send) */
    int iovcnt;
    const struct sockaddr *to; /* sendto: address */
    socklen_t tolen;
    const struct msghdr *msg; /* sendmsg: the application's message */
};

/* Counters for the log and tests. */
struct sw_conn_stats {
    uint64_t conns_tracked;  /* connection objects taken from the pool */
    uint64_t pool_exhausted; /* connections left untracked because the pool was full */
    uint64_t not_http;       /* connections dropped because they did not carry HTTP/1.x */
    uint64_t inserted;       /* request heads that got inserted header lines */
    uint64_t insert_skipped; /* request heads where insertion was not possible */
    uint64_t rs_given_up;    /* served connections no longer followed: a response's start was
                                not certain (proto_http1.c, "Untraced responses") */
};

/*
 * Maps the fd table (sized from RLIMIT_NOFILE, capped at SW_CONN_FD_CAP) and a pool of
 * `pool_size` connection objects. `cfg` may be NULL (defaults). Returns 0 or -errno; on
 * failure the module stays off (sw_conn_max == 0).
 */
int sw_conn_init(const struct sw_config *cfg, uint32_t pool_size);

/* Turns the module off and unmaps everything (tests; never called under live traffic). */
void sw_conn_shutdown(void);

/* atfork child: keeps tracked connections and their parser state, forgets span handles. */
void sw_conn_after_fork(void);

/*
 * atfork parent: marks the open connections as shared with a child. A served connection
 * closed here with its response head begun but not complete was handed to the child (CGI:
 * the program writes the rest to its stdout): its entry span ends without a status instead of
 * as an error. Limit: a server that forks for another reason and then really drops a response
 * half-way is not reported as an error.
 */
void sw_conn_after_fork_parent(void);

void sw_conn_get_stats(struct sw_conn_stats *out);

/* socket() returned `fd` (>= 0): marks TCP v4/v6 sockets as candidates, clears stale slots. */
void sw_conn_on_socket(int fd, int domain, int type);

/* connect() on a candidate (or tracked) fd: makes the real call and tracks a client. */
int sw_conn_connect(int fd, const struct sockaddr *addr, socklen_t len);

/* accept()/accept4(): makes the real call and tracks TCP v4/v6 connections as servers. */
int sw_conn_accept(int lfd, struct sockaddr *addr, socklen_t *len, int flags, bool four);

/*
 * A read-family call on a tracked fd returned `r` (errno `err` when r < 0) into `iov`.
 * `flags` are recv flags (MSG_PEEK bytes are not consumed). May change errno: the caller
 * (interpose.c) restores the real call's errno after it.
 */
void sw_conn_on_read(int fd, const struct iovec *iov, int iovcnt, ssize_t r, int err, int flags);

/* A write-family call on a tracked fd: makes the real call(s) itself (sw8 insertion). */
ssize_t sw_conn_send(int fd, const struct sw_send_op *op);

/*
 * read(), recv(), write() and writev() on a tracked fd (the guard not held): make the real
 * call themselves and then do what sw_conn_on_read() / sw_conn_send() do, errno as the real
 * call left it. The usual server read of a request and write of a response take a shorter
 * path through them.
 */
ssize_t sw_conn_read(int fd, void *buf, size_t n);
ssize_t sw_conn_recv(int fd, void *buf, size_t n, int flags);
ssize_t sw_conn_write(int fd, const void *buf, size_t n);
ssize_t sw_conn_writev(int fd, const struct iovec *iov, int cnt);

/* sendfile()/sendfile64() on a tracked fd: makes the real call itself. */
ssize_t sw_conn_sendfile(int out_fd, int in_fd, off64_t *off, size_t n, bool is64);

/* close() of a tracked fd, before the real close: ends its spans, untracks. Preserves errno. */
void sw_conn_on_close(int fd);

/*
 * shutdown(fd, how): with SHUT_WR or SHUT_RDWR on a served connection whose response head we
 * began and a forked child finishes (CGI), our part of the request ends here (as at close):
 * the peer sees EOF now, so the entry span must not end later.
 */
void sw_conn_on_shutdown(int fd, int how);

/* dup family returned `newfd` for `oldfd` (newfd's previous connection was closed). */
void sw_conn_on_dup(int oldfd, int newfd);

/* close_range(first, last) without CLOSE_RANGE_CLOEXEC: untracks the fds in the range. */
void sw_conn_close_range(unsigned int first, unsigned int last);

#ifdef SW_TESTING
struct sw_conn *sw_conn_test_obj(int fd); /* the object of a tracked fd, NULL if none */
#endif

/* ---- TLS sessions (the plaintext of SSL_read/SSL_write, gnutls_record_recv/send) ---------- */
/*
 * The TLS wrappers (tls.c) hand the plaintext of a session to the connection layer through
 * these; the layer gives it to the protocol modules exactly as a plain socket's bytes, and
 * inserts into the written plaintext (sw8) under the TLS libraries' retry rules. The fd of a
 * bound session carries ciphertext: its reads and writes pass untouched and unparsed (a
 * connection whose first bytes look like a TLS record stays tracked, unparsed, until a
 * session binds it or it closes, so the peer and the request it was opened for are kept).
 *
 * A session is named by a reference: 1 + the index of its connection object, 0 for "not
 * traced". The reference counts as one of the object's references (like an fd): the object
 * lives until sw_conn_tls_close(), even when the fd is closed before SSL_free.
 */
typedef uint32_t sw_conn_ref;

enum {
    SW_CONN_TLS_PARTIAL = 1, /* partial-write mode (SSL_MODE_ENABLE_PARTIAL_WRITE; GnuTLS always):
                                a write may report fewer bytes than asked */
    SW_CONN_TLS_NO_EDIT = 2, /* never edit these bytes (0-RTT early data) */
};

/*
 * A TLS session begins on `fd` (SSL_set_fd, SSL_get_fd, the socket call seen inside a TLS call;
 * -1 when not known: the object then has no peer until sw_conn_tls_set_fd()). `role`: the
 * session's (SSL_is_server: SW_ROLE_SERVER, else SW_ROLE_CLIENT); a tracked fd keeps its own.
 * Returns the session's reference, or 0: not traced (the fd is not a tracked connection, e.g.
 * inherited or the pool is full, or the agent is off). Binding an fd whose stream carried plaintext
 * before (PostgreSQL's SSLRequest, STARTTLS) keeps its module, which goes on with the plaintext;
 * the stream offsets of the plaintext start at 0. Preserves errno. Not under the guard (takes it).
 */
sw_conn_ref sw_conn_tls_open(int fd, int role);

/* The fd of a session bound without one became known: peer, role and owner are taken from
 * the fd's connection (which then passes untouched). No effect when it already has one. */
void sw_conn_tls_set_fd(sw_conn_ref ref, int fd);

/*
 * Around a real TLS call other than the write (SSL_read, SSL_do_handshake, ...): socket calls
 * made inside it on this thread belong to `ref`: they pass untouched (never parsed, never
 * edited: KTLS puts plaintext in them) and, when the session has no fd yet, bind theirs
 * (curl's memory BIO). Nestable per thread; `ref` 0 marks the thread only (no binding).
 */
void sw_conn_tls_enter(sw_conn_ref ref);
void sw_conn_tls_leave(void);

/*
 * A plaintext read of the session returned `r`: r > 0 bytes in `buf` (given to the module as
 * read bytes); r == 0 a clean end (close_notify: as a read of 0 on a socket); r < 0 a failure,
 * `err` an errno value saying what it was (ECONNRESET for a reset or truncated record, EPROTO
 * for an alert or a failed handshake, EAGAIN for WANT_READ/WANT_WRITE: ignored). Peeked bytes
 * (SSL_peek) must not be given. Preserves errno.
 */
void sw_conn_tls_read(sw_conn_ref ref, const void *buf, long r, int err);

/*
 * The real write of a session: writes `len` bytes at `buf` with the library's call
 * (SSL_write, SSL_write_ex, gnutls_record_send) and returns the bytes it took (> 0), or the
 * library's own failure value (<= 0: SSL_write's -1 / 0, SSL_write_ex's 0, a GNUTLS_E_*),
 * which sw_conn_tls_write hands back to the application unchanged. The wrapper reads the
 * library's error state (SSL_get_error) itself, after sw_conn_tls_write returns.
 */
typedef long (*sw_conn_tls_write_fn)(void *ctx, const void *buf, size_t len);

/*
 * The application writes `len` plaintext bytes at `buf` to the session: the layer parses them
 * ahead (the module may plan an insertion) and calls `fn` (on this thread, inside
 * sw_conn_tls_enter) once or more with the application's bytes and, where planned, the
 * inserted ones. Returns what the application's call returns: the number of its own bytes
 * taken (> 0; == len unless SW_CONN_TLS_PARTIAL), or fn's failure value unchanged.
 * Retry rule (OpenSSL: after WANT_WRITE/WANT_READ the application repeats the call with the
 * same arguments; GnuTLS: the same or NULL/0): when fn failed, the layer remembers the exact
 * pointer and length it gave fn, and the application's repeated call gives fn exactly those
 * again (our inserted bytes live in the connection object, the application's in its buffer),
 * then goes on with the rest; the application never sees a count that includes our bytes.
 * Without SW_CONN_TLS_PARTIAL, when fn fails after some of the call's own bytes went out, the
 * failure is returned (the library's rule: the call either takes everything or fails), and
 * the repeated call goes on from there.
 * `flags`: SW_CONN_TLS_*. ref 0, or a session no longer followed: fn(ctx, buf, len) directly.
 * errno is what fn left.
 */
long sw_conn_tls_write(sw_conn_ref ref, const void *buf, size_t len, int flags,
                       sw_conn_tls_write_fn fn, void *ctx);

/* The session ends (SSL_free, gnutls_deinit; the address may be reused right after): ends
 * its spans as a close of the connection would, and drops the reference. Preserves errno. */
void sw_conn_tls_close(sw_conn_ref ref);

#endif /* SW_CONN_H */
