/*
 * fuzz_conn.c - libFuzzer target for the connection layer (agent/conn.c): the write path that
 * inserts sw8 lines into request heads, fed random application write splits, write kinds and
 * a fake kernel that takes a random number of bytes per call, answers EAGAIN or fails; plus
 * the read path (responses on clients, requests on servers) and close.
 *
 * The real sw_libc table is pointed at fakes (as tests/unit/test_conn.c does) and the trace
 * module is replaced by a fake that hands out numbered handles. Invariants checked on every
 * input:
 *   - every write call returns -1 (errno EAGAIN, or the injected error) or 1..len bytes,
 *     never 0 for a non-empty write; errno is untouched by the read hooks (the fake trace
 *     calls change it);
 *   - client: the wire bytes with the inserted lines taken out are the application's bytes
 *     (a forwarded "sw8" name may go out as "swx"; one held-back '\r' and a partly written
 *     inserted line may be missing at the end); inserted lines start at a line start;
 *   - server: the wire bytes are exactly the application's bytes;
 *   - span handles are finished at most once, and only after they were started; after close
 *     no span is left open.
 *
 * TLS mode (input byte 0 bit 5): a TLS session is bound to the connection and the application
 * writes and reads its plaintext through sw_conn_tls_write/sw_conn_tls_read instead, with a
 * fake TLS library whose write takes everything (or, in partial-write mode, bit 6, at most the
 * fake kernel's bytes per call) and fails every Nth call like WANT_WRITE; checked besides: the
 * application repeats a failed call with the same arguments and the layer then gives the
 * library the pointer of its failed call and at least its length (OpenSSL's retry rule), a
 * call returns the library's failure value (-1) or 1..len (len without partial mode).
 *
 * Input: byte 0 = options (bit 0 server, bit 1 insertion enabled, bit 2 accept4, bits 3-4
 * which entries record nothing: see unrec_mode, bit 5 TLS, bit 6 TLS partial-write mode, bit 7
 * unrecorded entries are keepable and kept at a 5xx status line: see keep_mode); then
 * operations, each an opcode byte and its arguments (see run_ops). write() and writev() with an odd
 * kind / 5 and reads with opcode bits 3-4 set go through sw_conn_write() / sw_conn_writev() /
 * sw_conn_read() / sw_conn_recv() (what interpose.c's wrappers of those names call), the
 * others through sw_conn_send() / sw_conn_on_read(). The application never writes byte 0x01,
 * which only the fake trace module's inserted line contains.
 *
 * Built with -DSW_FUZZ_REPLAY (plain gcc) the entry point is run over the seed corpus by
 * tests/fuzz/replay_conf_prop.c.
 */
#include "common.h"

#include "conn.h"
#include "real.h"
#include "trace.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INJ                                                                                        \
    "sw8: \x01"                                                                                    \
    "fz\x01\r\n"
#define INJ_LEN (sizeof(INJ) - 1)
#define STREAM_MAX (1 << 16)
#define HANDLES_MAX 4096
#define CLIENT_FD 5
#define SERVER_FD 7

static char wire[STREAM_MAX]; /* the bytes the fake kernel took */
static size_t wire_len;
static char app[STREAM_MAX]; /* the bytes the application was told were written */
static size_t app_len;

static void dump(const char *name, const char *p, size_t n);

static void die(const char *what)
{
    fprintf(stderr, "fuzz_conn: invariant failed: %s\n", what);
    dump("application bytes", app, app_len);
    dump("wire bytes", wire, wire_len);
    abort();
}

#define ASSERT(c)                                                                                  \
    do {                                                                                           \
        if (!(c))                                                                                  \
            die(#c);                                                                               \
    } while (0)

/* ---- fake trace module: numbered handles, each started once and ended at most once -------- */

static uint8_t h_state[HANDLES_MAX]; /* 0 unused, 1 open, 2 ended */
static uint64_t next_handle;
static bool inject_enabled;
/* Which entries record nothing (sw_trace_entry_unrecorded; trace.h): input byte 0 bits 3-4,
 * none / all / every second / every third. A recorded one's handle is its number plus
 * SW_TRACE_SPAN_SLOTS (HANDLES_MAX is below it). */
static unsigned unrec_mode;
/* Unrecorded entries are keepable (SW_TRACE_KEEP_BIT) and sw_trace_entry_respond keeps those
 * whose response's status line is 5xx (rs_keep then follows that response). */
static bool keep_mode;
_Static_assert(HANDLES_MAX <= SW_TRACE_SPAN_SLOTS, "handle numbers below SW_TRACE_SPAN_SLOTS");

/* The fake trace calls change errno, as the real module may (ring creation, reporter spawn). */
static uint64_t h_start(void)
{
    errno = ENOSYS;
    if (next_handle >= HANDLES_MAX)
        return 0; /* out of handles: the agent must cope with "no span" */
    h_state[next_handle] = 1;
    return next_handle++;
}

static void h_end(uint64_t h)
{
    errno = ENOSYS;
    if (h == 0)
        return;
    h &= ~(uint64_t)SW_TRACE_KEEP_BIT;
    if (h >= SW_TRACE_SPAN_SLOTS)
        h -= SW_TRACE_SPAN_SLOTS; /* a recorded entry */
    ASSERT(h < HANDLES_MAX);
    ASSERT(h_state[h] == 1);
    h_state[h] = 2;
}

int sw_trace_init(const struct sw_config *cfg)
{
    (void)cfg;
    return 0;
}
void sw_trace_after_fork(void)
{
}
uint64_t sw_trace_entry_start(const struct sw_req_info *req, int64_t start_ms)
{
    (void)start_ms;
    ASSERT(req->method_len == 0 || req->method != NULL);
    uint64_t h = h_start();
    bool unrec = unrec_mode == 1 || (unrec_mode == 2 && h % 2) || (unrec_mode == 3 && h % 3 == 0);
    if (h && unrec && keep_mode)
        return h + SW_TRACE_SPAN_SLOTS + SW_TRACE_KEEP_BIT;
    return h && !unrec ? h + SW_TRACE_SPAN_SLOTS : h;
}
bool sw_trace_entry_respond(uint64_t h, int status, int64_t now_ms)
{
    (void)now_ms;
    errno = ENOSYS;
    uint64_t n = (h & ~(uint64_t)SW_TRACE_KEEP_BIT) - SW_TRACE_SPAN_SLOTS;
    ASSERT(sw_trace_entry_keepable(h) && n < HANDLES_MAX && h_state[n] == 1);
    ASSERT(status >= 100 && status <= 999);
    return status >= 500;
}
void sw_trace_entry_finish(uint64_t h, int status_code, int64_t end_ms)
{
    (void)status_code, (void)end_ms;
    h_end(h);
}
void sw_trace_entry_abort(uint64_t h, const char *k, const char *m, int64_t end_ms)
{
    (void)k, (void)m, (void)end_ms;
    h_end(h);
}
uint64_t sw_trace_exit_start(const struct sw_req_info *req, int64_t start_ms, char *inject,
                             size_t cap, size_t *inject_len)
{
    (void)req, (void)start_ms;
    *inject_len = 0;
    if (inject_enabled && cap >= INJ_LEN) {
        memcpy(inject, INJ, INJ_LEN);
        *inject_len = INJ_LEN;
    }
    return h_start();
}
uint64_t sw_trace_exit_start_in(uint64_t parent, const struct sw_req_info *req, int64_t start_ms,
                                char *inject, size_t cap, size_t *inject_len)
{
    (void)parent;
    return sw_trace_exit_start(req, start_ms, inject, cap, inject_len);
}
uint64_t sw_trace_request_now(void)
{
    return 0; /* no request: the connection layer names none (client_touch never touches) */
}
void sw_trace_exit_finish(uint64_t h, int status_code, int64_t end_ms)
{
    (void)status_code, (void)end_ms;
    h_end(h);
}
void sw_trace_exit_error(uint64_t h, const char *k, const char *m, int64_t end_ms)
{
    (void)k, (void)m, (void)end_ms;
    h_end(h);
}
/* Database and cache exits (proto_db.c): every span started is ended once, as the others. */
uint64_t sw_trace_db_start_in(uint64_t parent, const struct sw_db_info *info, int64_t start_ms)
{
    (void)parent, (void)start_ms;
    ASSERT(info && info->op && info->peer && info->ntags <= 8);
    return h_start();
}
void sw_trace_db_finish(uint64_t h, const char *k, const char *m, int64_t end_ms)
{
    (void)k, (void)m, (void)end_ms;
    h_end(h);
}
/* gRPC spans (proto_h2.c, reached through proto_list.c): nothing recorded here. */
void sw_trace_span_rpc(uint64_t h, const char *op, size_t opl)
{
    (void)h, (void)op, (void)opl;
}
void sw_trace_count_h2(int k)
{
    (void)k;
}
void sw_trace_rpc_finish(uint64_t h, int status, const char *m, int64_t end_ms)
{
    (void)h, (void)status, (void)m, (void)end_ms;
}
uint64_t sw_trace_current(void)
{
    return 0;
}
__thread struct sw_trace_tls sw_trace_tls; /* stays 0: sw_trace_touch always calls */
uint64_t sw_trace_set_current(uint64_t h)
{
    h &= ~(uint64_t)SW_TRACE_KEEP_BIT; /* a keepable entry (keep_mode) */
    ASSERT(h % SW_TRACE_SPAN_SLOTS < HANDLES_MAX && h < 2 * SW_TRACE_SPAN_SLOTS);
    return 0;
}
int64_t sw_trace_now_ms(void)
{
    return 1000;
}
void sw_trace_get_stats(struct sw_trace_stats *out)
{
    memset(out, 0, sizeof(*out));
}
/* The configuration protocol modules read (proto_mysql.c, proto_fcgi.c): none, their defaults. */
const struct sw_config *sw_trace_config(void)
{
    return NULL;
}

/* ---- fake kernel ----------------------------------------------------------------------------- */

static size_t k_take; /* bytes the kernel takes per call (0: all) */
static int k_eagain;  /* every Nth call answers EAGAIN (0: never) */
static int k_error;   /* the next call fails with this errno (0: none) */
static int k_calls;

static ssize_t fake_take(const struct iovec *v, int n)
{
    k_calls++;
    if (k_error) {
        errno = k_error;
        return -1;
    }
    if (k_eagain && k_calls % k_eagain == 0) {
        errno = EAGAIN;
        return -1;
    }
    size_t cap = k_take ? k_take : SIZE_MAX, took = 0;
    for (int i = 0; i < n && took < cap; i++) {
        size_t l = v[i].iov_len < cap - took ? v[i].iov_len : cap - took;
        if (l > sizeof(wire) - wire_len)
            l = sizeof(wire) - wire_len; /* a full "socket buffer" takes less */
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
static ssize_t fake_sendto(int fd, const void *b, size_t n, int f, const struct sockaddr *a,
                           socklen_t l)
{
    (void)f, (void)a, (void)l;
    return fake_write(fd, b, n);
}
static ssize_t fake_sendmsg(int fd, const struct msghdr *m, int f)
{
    (void)fd, (void)f;
    return fake_take(m->msg_iov, (int)m->msg_iovlen);
}
static char file_bytes[4096];
static ssize_t fake_sendfile64(int o, int i, off64_t *off, size_t n)
{
    (void)o, (void)i, (void)off;
    struct iovec v = {file_bytes, n < sizeof(file_bytes) ? n : sizeof(file_bytes)};
    return fake_take(&v, 1);
}
static ssize_t fake_sendfile(int o, int i, off_t *off, size_t n)
{
    return fake_sendfile64(o, i, (off64_t *)off, n);
}
/* The bytes the next fake read() returns (sw_conn_read makes the real call itself). */
static const char *rd_src;
static size_t rd_len;
static ssize_t fake_read(int fd, void *b, size_t n)
{
    (void)fd;
    size_t k = rd_len < n ? rd_len : n;
    memcpy(b, rd_src, k);
    return (ssize_t)k;
}
static ssize_t fake_recv(int fd, void *b, size_t n, int flags)
{
    (void)flags; /* MSG_PEEK or not: the same bytes */
    return fake_read(fd, b, n);
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
    return SERVER_FD;
}
static int fake_accept4(int fd, struct sockaddr *a, socklen_t *l, int flags)
{
    (void)flags;
    return fake_accept(fd, a, l);
}
static int fake_getpeername(int fd, struct sockaddr *a, socklen_t *l)
{
    return fake_accept(fd, a, l) == SERVER_FD ? 0 : -1;
}

/* ---- fake TLS library ------------------------------------------------------------------------ */

static bool broken; /* a write failed with a connection error: stop writing */

static sw_conn_ref tls_ref; /* the session (TLS mode), 0 otherwise */
static bool tls_partial;    /* SSL_MODE_ENABLE_PARTIAL_WRITE */
static bool tls_pending;    /* the last call failed: the next must repeat it */
static const void *tls_fail_p;
static size_t tls_fail_len;

/* SSL_write's behaviour: the plaintext it takes is what the peer gets (`wire`). */
static long fake_tls_write(void *ctx, const void *buf, size_t len)
{
    (void)ctx;
    k_calls++;
    if (tls_pending) {
        ASSERT(buf == tls_fail_p && len >= tls_fail_len); /* else SSL_R_BAD_WRITE_RETRY */
        tls_pending = false;
    } else if (k_error) {
        errno = k_error;
        return -1;
    } else if (k_eagain && k_calls % k_eagain == 0) {
        tls_pending = true;
        tls_fail_p = buf;
        tls_fail_len = len;
        errno = EAGAIN;
        return -1;
    }
    ASSERT(len > 0);
    size_t k = tls_partial && k_take && len > k_take ? k_take : len;
    ASSERT(k <= sizeof(wire) - wire_len);
    memcpy(wire + wire_len, buf, k);
    wire_len += k;
    return (long)k;
}

/* Round `round` of an application's write loop: the peer drains eventually (no more EAGAIN
 * nor short writes after 200 rounds), and the loop ends. */
static void peer_drains(int round)
{
    if (round == 200) {
        k_eagain = 0;
        k_take = 0;
    }
    ASSERT(round < 400);
}

/* The application's SSL_write loop: a failed call is repeated with the same arguments. */
static void app_tls_write(const char *p0, size_t len)
{
    size_t off = 0;
    for (int round = 0; off < len && !broken; round++) {
        peer_drains(round);
        size_t n = len - off;
        const char *p = p0 + off;
        errno = 0;
        long r = sw_conn_tls_write(tls_ref, p, n, tls_partial ? SW_CONN_TLS_PARTIAL : 0,
                                   fake_tls_write, NULL);
        if (r < 0) {
            ASSERT(r == -1);
            if (errno == EAGAIN)
                continue;
            ASSERT(k_error != 0 && errno == k_error);
            broken = true;
            return;
        }
        ASSERT(r > 0 && (size_t)r <= n && (tls_partial || (size_t)r == n));
        memcpy(app + app_len, p, (size_t)r);
        app_len += (size_t)r;
        off += (size_t)r;
    }
}

/* ---- the application ------------------------------------------------------------------------ */

struct input {
    const uint8_t *p;
    size_t n;
};

static unsigned take_byte(struct input *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

/* Up to `want` payload bytes from the input, 0x01 mapped to 0x02 (see the banner). */
static size_t take_payload(struct input *in, char *out, size_t want)
{
    size_t n = want < in->n ? want : in->n;
    for (size_t i = 0; i < n; i++)
        out[i] = in->p[i] == 1 ? 2 : (char)in->p[i];
    in->p += n;
    in->n -= n;
    return n;
}

/* One application write of `buf` (a loop over partial writes and EAGAIN, as programs do). */
static void app_write(int fd, const char *buf, size_t len, unsigned kind)
{
    if (tls_ref) {
        app_tls_write(buf, len);
        return;
    }
    size_t off = 0;
    for (int round = 0; off < len && !broken; round++) {
        peer_drains(round);
        size_t n = len - off;
        const char *p = buf + off;
        struct iovec v[3];
        struct msghdr m;
        struct sw_send_op op;
        memset(&op, 0, sizeof(op));
        memset(&m, 0, sizeof(m));
        int cnt = 1;
        v[0].iov_base = (void *)p;
        v[0].iov_len = n;
        if (kind % 5 >= 3) { /* writev / sendmsg: three pieces, some possibly empty */
            size_t a = n / 3, b = (n - a) / 2;
            v[0].iov_len = a;
            v[1].iov_base = (void *)(p + a);
            v[1].iov_len = b;
            v[2].iov_base = (void *)(p + a + b);
            v[2].iov_len = n - a - b;
            cnt = 3;
        }
        static const enum sw_send_kind kinds[] = {SW_SEND_WRITE, SW_SEND_SEND, SW_SEND_SENDTO,
                                                  SW_SEND_WRITEV, SW_SEND_SENDMSG};
        op.kind = kinds[kind % 5];
        op.iov = v;
        op.iovcnt = cnt;
        m.msg_iov = v;
        m.msg_iovlen = (size_t)cnt;
        op.msg = &m;
        errno = 0;
        ssize_t r;
        if (SW_CONN_UNTRACKED(fd)) /* what interpose.c does for untracked fds */
            r = op.kind == SW_SEND_WRITEV || op.kind == SW_SEND_SENDMSG ? fake_writev(fd, v, cnt)
                                                                        : fake_write(fd, p, n);
        else if (op.kind == SW_SEND_WRITE && (kind / 5) % 2) /* write() as interpose.c makes it */
            r = sw_conn_write(fd, p, n);
        else if (op.kind == SW_SEND_WRITEV && (kind / 5) % 2) /* writev() likewise */
            r = sw_conn_writev(fd, v, cnt);
        else
            r = sw_conn_send(fd, &op);
        if (r < 0) {
            if (errno == EAGAIN)
                continue;
            ASSERT(k_error != 0 && errno == k_error);
            broken = true;
            return;
        }
        ASSERT(r > 0 && (size_t)r <= n);
        memcpy(app + app_len, p, (size_t)r);
        app_len += (size_t)r;
        off += (size_t)r;
    }
}

/* sendfile of `n` bytes of file_bytes, looping like nginx does. */
static void app_sendfile(int fd, size_t n)
{
    size_t off = 0;
    for (int round = 0; off < n && !broken; round++) {
        peer_drains(round);
        off64_t fo = (off64_t)off;
        ssize_t r = SW_CONN_UNTRACKED(fd) ? fake_sendfile64(fd, 3, &fo, n - off)
                                          : sw_conn_sendfile(fd, 3, &fo, n - off, true);
        if (r < 0) {
            if (errno == EAGAIN)
                continue;
            ASSERT(k_error != 0 && errno == k_error);
            broken = true;
            return;
        }
        ASSERT(r > 0 && (size_t)r <= n - off);
        memset(app + app_len, 'Z', (size_t)r);
        app_len += (size_t)r;
        off += (size_t)r;
    }
}

/*
 * Bytes arriving from the peer (a response on a client, a request on a server): one read() or
 * recv() as interpose.c makes it (`how` 1: read, 2: recv, 3: recv with MSG_PEEK first, then
 * recv), or (0) a two-iovec read seen by sw_conn_on_read().
 */
static void app_read(int fd, const char *buf, size_t len, int split, unsigned how)
{
    if (tls_ref) { /* SSL_read's plaintext, in one piece or two */
        size_t a = split > 0 && (size_t)split < len ? (size_t)split : len;
        errno = 1234;
        sw_conn_tls_read(tls_ref, buf, (long)a, 0);
        if (a < len)
            sw_conn_tls_read(tls_ref, buf + a, (long)(len - a), 0);
        ASSERT(errno == 1234);
        return;
    }
    if (how) {
        static char into[STREAM_MAX];
        rd_src = buf;
        rd_len = len;
        for (int peek = how == 3; peek >= 0; peek--) {
            int flags = peek ? MSG_PEEK : 0;
            errno = 1234;
            ssize_t r = SW_CONN_UNTRACKED(fd) ? fake_read(fd, into, len)
                        : how == 1            ? sw_conn_read(fd, into, len)
                                              : sw_conn_recv(fd, into, len, flags);
            ASSERT(r == (ssize_t)len && memcmp(into, buf, len) == 0);
            ASSERT(errno == 1234);
        }
        return;
    }
    struct iovec v[2];
    size_t a = split > 0 && (size_t)split < len ? (size_t)split : len;
    v[0].iov_base = (void *)buf;
    v[0].iov_len = a;
    v[1].iov_base = (void *)(buf + a);
    v[1].iov_len = len - a;
    errno = 1234;
    if (!SW_CONN_UNTRACKED(fd)) /* sw_conn_on_read may change errno: interpose.c restores it */
        SW_SAVE_ERRNO(sw_conn_on_read(fd, v, 2, (ssize_t)len, 0, 0));
    ASSERT(errno == 1234);
}

static void app_read_end(int fd, unsigned how)
{
    static const int errs[] = {0, ECONNRESET, EAGAIN, EINTR, ETIMEDOUT};
    char b[16];
    struct iovec v = {b, sizeof(b)};
    int e = errs[how % 5];
    errno = 4321;
    if (tls_ref)
        sw_conn_tls_read(tls_ref, NULL, e ? -1 : 0, e);
    else if (!SW_CONN_UNTRACKED(fd))
        SW_SAVE_ERRNO(sw_conn_on_read(fd, &v, 1, e ? -1 : 0, e, 0));
    ASSERT(errno == 4321);
}

static void run_ops(struct input *in, int fd)
{
    static char buf[STREAM_MAX];
    while (in->n > 0 && app_len < STREAM_MAX - 8192 && wire_len < STREAM_MAX - 8192) {
        unsigned op = take_byte(in);
        switch (op % 8) {
        case 0:
        case 1:
        case 2: { /* write: op>>3 picks the kind (app_write), next byte the length (0: 256+) */
            size_t len = take_byte(in);
            if (len == 0)
                len = 256 + 16 * take_byte(in);
            len = take_payload(in, buf, len);
            if (len)
                app_write(fd, buf, len, op >> 3);
            break;
        }
        case 3: /* kernel behaviour: bytes per call and EAGAIN period */
            k_take = take_byte(in) % 24;
            k_eagain = (int)(take_byte(in) % 5);
            if (k_eagain == 1)
                k_eagain = 0;
            break;
        case 4: { /* bytes from the peer: op bits 3-4 pick how (app_read) */
            size_t len = take_byte(in);
            int split = (int)take_byte(in);
            len = take_payload(in, buf, len);
            if (len)
                app_read(fd, buf, len, split, (op >> 3) & 3);
            break;
        }
        case 5: /* end of stream or an error from the peer */
            app_read_end(fd, op >> 3);
            break;
        case 6: /* sendfile (not in TLS mode: SSL_sendfile is KTLS's, plaintext we never see) */
            if (!tls_ref)
                app_sendfile(fd, 1 + (size_t)take_byte(in) * 8);
            break;
        case 7: /* the next write fails (connection error) */
            if ((op >> 3) % 4 == 0)
                k_error = (op >> 5) & 1 ? EPIPE : ECONNRESET;
            break;
        }
    }
}

static bool is_sw(const char *p)
{
    return (p[0] == 's' || p[0] == 'S') && (p[1] == 'w' || p[1] == 'W');
}

/* The client invariant: wire = app with INJ lines inserted at line starts (see the banner). */
static void check_client_wire(void)
{
    size_t w = 0, a = 0;
    while (w < wire_len) {
        if (wire[w] == 's' && wire_len - w >= 6 && memcmp(wire + w, INJ, 6) == 0) {
            /* Also for streams with a bare CR: http.c refuses such heads (no insertion). */
            ASSERT(w == 0 || wire[w - 1] == '\n');
            size_t l = wire_len - w < INJ_LEN ? wire_len - w : INJ_LEN;
            ASSERT(memcmp(wire + w, INJ, l) == 0);
            w += l;
            continue;
        }
        if (a >= app_len) {
            /* Only the start of an inserted line may follow the application's last byte. */
            size_t l = wire_len - w;
            ASSERT(l < 6 && memcmp(wire + w, INJ, l) == 0);
            break;
        }
        if (wire[w] != app[a]) {
            /* A forwarded sw8 name renamed to swx (same length). */
            ASSERT(wire[w] == 'x' && app[a] == '8' && a >= 2 && is_sw(app + a - 2));
        }
        w++;
        a++;
    }
    ASSERT(memchr(app, 1, app_len) == NULL);
    /* At most one byte (a held-back '\r') may not have gone out. */
    ASSERT(a == app_len || (a + 1 == app_len && app[a] == '\r'));
}

static void dump(const char *name, const char *p, size_t n)
{
    fprintf(stderr, "--- %s (%zu bytes)\n", name, n);
    for (size_t i = 0; i < n && i < 4096; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch == '\n' || (ch >= 32 && ch < 127))
            fputc(ch, stderr);
        else
            fprintf(stderr, "\\x%02x", ch);
    }
    fputc('\n', stderr);
}

static bool initialized;

static void setup(void)
{
    sw_libc.read = fake_read;
    sw_libc.recv = fake_recv;
    sw_libc.write = fake_write;
    sw_libc.writev = fake_writev;
    sw_libc.send = fake_send;
    sw_libc.sendto = fake_sendto;
    sw_libc.sendmsg = fake_sendmsg;
    sw_libc.sendfile = fake_sendfile;
    sw_libc.sendfile64 = fake_sendfile64;
    sw_libc.connect = fake_connect;
    sw_libc.accept = fake_accept;
    sw_libc.accept4 = fake_accept4;
    sw_libc.getpeername = fake_getpeername;
    memset(file_bytes, 'Z', sizeof(file_bytes));
    if (sw_conn_init(NULL, 4) != 0)
        die("sw_conn_init");
    initialized = true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!initialized)
        setup();
    if (size < 1)
        return 0;
    struct input in = {data + 1, size - 1};
    bool server = data[0] & 1;
    inject_enabled = (data[0] & 2) != 0;
    unrec_mode = (data[0] >> 3) & 3;
    keep_mode = (data[0] >> 7) & 1;
    memset(h_state, 0, sizeof(h_state));
    next_handle = 1;
    wire_len = app_len = 0;
    k_take = 0;
    k_eagain = 0;
    k_error = 0;
    k_calls = 0;
    broken = false;

    int fd;
    if (server) {
        fd = sw_conn_accept(3, NULL, NULL, 0, (data[0] & 4) != 0);
        ASSERT(fd == SERVER_FD);
    } else {
        fd = CLIENT_FD;
        sw_conn_on_socket(fd, AF_INET, SOCK_STREAM);
        struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(8080)};
        s.sin_addr.s_addr = htonl(0x7f000001);
        ASSERT(sw_conn_connect(fd, (struct sockaddr *)&s, sizeof(s)) == 0);
    }
    ASSERT(!SW_CONN_UNTRACKED(fd)); /* the pool (4 objects) got every object back so far */
    tls_ref = 0;
    tls_pending = false;
    tls_partial = (data[0] & 64) != 0;
    if (data[0] & 32) {
        tls_ref = sw_conn_tls_open(fd, server ? SW_ROLE_SERVER : SW_ROLE_CLIENT);
        ASSERT(tls_ref != 0);
    }
    run_ops(&in, fd);
    if (server)
        ASSERT(wire_len == app_len && memcmp(wire, app, app_len) == 0);
    else
        check_client_wire();
    errno = 777;
    if (tls_ref)
        sw_conn_tls_close(tls_ref);
    sw_conn_on_close(fd);
    ASSERT(errno == 777);
    ASSERT(SW_CONN_UNTRACKED(fd));
    /* No span is left open after close, and the pool object came back. */
    for (uint64_t h = 1; h < next_handle; h++)
        ASSERT(h_state[h] != 1);
    return 0;
}
