/*
 * fuzz_conn_tls.c - libFuzzer target for the connection layer's TLS entry points (conn.h, "TLS
 * sessions"): a session opened on a connected or accepted fd, or without one (memory BIO) and
 * bound later; the application's plaintext writes go through sw_conn_tls_write() with a fake
 * TLS library write that takes all, takes part (partial-write mode), asks for a retry
 * (WANT_WRITE: the application repeats the call with the same arguments; GnuTLS mode: or with
 * NULL/0) or fails for good; plaintext reads and ends through sw_conn_tls_read(); the library's
 * ciphertext written and read on the fd inside the calls. Reuses fuzz_conn.c's fake trace
 * module, fake kernel and wire check (included below, its entry point renamed).
 *
 * Invariants checked on every input:
 *   - OpenSSL's retry rule: after the fake write asked for a retry, the next call of it passes
 *     the same pointer and at least the same length (else OpenSSL says "bad write retry" or
 *     "bad length"), and completes only the refused piece;
 *   - the application's count: == its length without partial mode, 1..length with it; a
 *     failure is the fake's own value (-1); a NULL/0 resume (GnuTLS) returns the application's
 *     bytes that went, or 0 when the resumed piece was ours (the application then sends its
 *     data again); errno untouched by the read entry points;
 *   - client: the plaintext the fake library took is the application's with the inserted
 *     lines at line starts (fuzz_conn.c's check_client_wire); server: exactly the application's;
 *   - the ciphertext written on the fd inside a TLS call reaches the kernel unchanged;
 *   - spans end at most once, and none is left open once the session and its fd are closed.
 *
 * Input: byte 0 = options: bit 0 server, bit 1 insertion enabled, bit 2 partial-write mode,
 * bit 3 opened without an fd (bound later by op 7 or by a socket call inside a TLS call),
 * bit 4 GnuTLS-style retries (NULL/0), bits 5-6 which entries record nothing (unrec_mode);
 * then operations (see run_tls_ops).
 */
#define LLVMFuzzerTestOneInput fuzz_conn_socket_one
#include "fuzz_conn.c"
#undef LLVMFuzzerTestOneInput

#include "conn.h" /* SW_ROLE_*, the TLS entry points */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int tf_fd;              /* the session's socket */
static bool tf_partial;        /* SW_CONN_TLS_PARTIAL */
static bool tf_gnutls;         /* retries may pass NULL/0 */
static unsigned tf_fail_every; /* the fake write asks for a retry every Nth call (0 never) */
static size_t tf_take;         /* partial mode: bytes taken per call (0 all) */
static bool tf_fatal_next;     /* the next fake write fails for good */
static bool tf_fatal;          /* it did: the application stopped writing */
static unsigned tf_calls;
static bool tf_pend; /* the last fake write asked for a retry */
static const void *tf_pend_p;
static size_t tf_pend_len;
static size_t tf_wire_ok; /* wire_len when the application's last write returned */

/* Ciphertext of the library, written on the fd inside a TLS call: passes unchanged. */
static void tf_cipher_write(void)
{
    static const char rec[] = "\x17\x03\x03\x00\x10"
                              "0123456789abcdef";
    if (tf_fd < 0 || SW_CONN_UNTRACKED(tf_fd))
        return;
    size_t before = wire_len;
    ssize_t r = sw_conn_write(tf_fd, rec, sizeof(rec) - 1);
    if (r > 0) {
        ASSERT(wire_len - before == (size_t)r && memcmp(wire + before, rec, (size_t)r) == 0);
        wire_len = before; /* the ciphertext is not the plaintext stream */
    }
}

/* The fake SSL_write: see the banner. */
static long tf_fake_tls_write(void *ctx, const void *p, size_t len)
{
    (void)ctx;
    if (tf_pend && tf_gnutls && p == NULL && len == 0) {
        p = tf_pend_p; /* GnuTLS: NULL/0 completes the record it kept */
        len = tf_pend_len;
    }
    if (tf_pend) {
        /* OpenSSL: another pointer is "bad write retry", a shorter length "bad length"; a
         * longer one completes the pending record only (as GnuTLS, which flushes its pending
         * record whatever is passed). */
        ASSERT(p == tf_pend_p && len >= tf_pend_len);
        len = tf_pend_len;
    }
    ASSERT(p != NULL && len > 0);
    tf_calls++;
    tf_cipher_write();
    if (tf_fatal_next) {
        tf_fatal_next = false;
        tf_fatal = true;
        tf_pend = false;
        return -1;
    }
    if (tf_fail_every && tf_calls % tf_fail_every == 0) {
        tf_pend = true;
        tf_pend_p = p;
        tf_pend_len = len;
        return -1;
    }
    tf_pend = false;
    size_t k = len;
    if (tf_partial && tf_take && tf_take < len)
        k = tf_take;
    ASSERT(wire_len + k <= sizeof(wire));
    memcpy(wire + wire_len, p, k);
    wire_len += k;
    return (long)k;
}

/* One application write of `buf` through the session: repeated after a retry as the rules
 * say, the rest written again after a short count (partial mode). */
static void tf_app_write(sw_conn_ref ref, const char *buf, size_t len, unsigned how)
{
    size_t off = 0;
    int flags = tf_partial ? SW_CONN_TLS_PARTIAL : 0;
    bool failed = false; /* the last call returned a failure: this one repeats it */
    for (int round = 0; off < len && !tf_fatal; round++) {
        if (round == 200) {
            tf_fail_every = 0; /* the peer drains eventually */
            tf_take = 0;
        }
        ASSERT(round < 400);
        const char *p = buf + off;
        size_t n = len - off;
        bool null_retry = tf_gnutls && failed && (how + (unsigned)round) % 2;
        errno = 0;
        long r = null_retry ? sw_conn_tls_write(ref, NULL, 0, flags, tf_fake_tls_write, NULL)
                            : sw_conn_tls_write(ref, p, n, flags, tf_fake_tls_write, NULL);
        if (null_retry && r == 0) {
            failed = false; /* the resumed piece was ours: the application sends its data again */
            continue;
        }
        if (r <= 0) {
            ASSERT(r == -1);
            failed = true;
            continue; /* a retry (or, tf_fatal, the end) */
        }
        failed = false;
        if (null_retry) {
            /* GnuTLS: the NULL/0 retry reports the bytes of the call it completes. */
            ASSERT((size_t)r <= n);
        } else if (!tf_partial) {
            ASSERT((size_t)r == n);
        } else {
            ASSERT((size_t)r >= 1 && (size_t)r <= n);
        }
        memcpy(app + app_len, p, (size_t)r);
        app_len += (size_t)r;
        off += (size_t)r;
        tf_wire_ok = wire_len;
    }
}

/* Plaintext read by the application, with the library's ciphertext read inside the call. */
static void tf_app_read(sw_conn_ref ref, const char *buf, size_t len)
{
    sw_conn_tls_enter(ref);
    if (tf_fd >= 0 && !SW_CONN_UNTRACKED(tf_fd)) {
        static const char rec[] = "\x17\x03\x03\x00\x04wxyz";
        static char into[64];
        rd_src = rec;
        rd_len = sizeof(rec) - 1;
        ASSERT(sw_conn_read(tf_fd, into, sizeof(into)) == (ssize_t)(sizeof(rec) - 1));
    }
    sw_conn_tls_leave();
    errno = 1234;
    sw_conn_tls_read(ref, buf, (long)len, 0);
    ASSERT(errno == 1234);
}

static void tf_run_tls_ops(struct input *in, sw_conn_ref ref, int later_fd)
{
    static char buf[STREAM_MAX];
    while (in->n > 0 && app_len < STREAM_MAX - 8192 && wire_len < STREAM_MAX - 8192) {
        unsigned op = take_byte(in);
        switch (op % 8) {
        case 0:
        case 1:
        case 2: { /* write: the next byte the length (0: 256 + 16 * next) */
            size_t len = take_byte(in);
            if (len == 0)
                len = 256 + 16 * take_byte(in);
            len = take_payload(in, buf, len);
            if (len && !tf_fatal)
                tf_app_write(ref, buf, len, op >> 3);
            break;
        }
        case 3: /* the library's behaviour */
            tf_fail_every = take_byte(in) % 5;
            if (tf_fail_every == 1)
                tf_fail_every = 0;
            tf_take = take_byte(in) % 40;
            break;
        case 4: { /* plaintext from the peer */
            size_t len = take_payload(in, buf, take_byte(in));
            if (len)
                tf_app_read(ref, buf, len);
            break;
        }
        case 5: { /* the end of the peer's stream, or a failure */
            static const int errs[] = {0, ECONNRESET, EPROTO, EAGAIN};
            int e = errs[(op >> 3) % 4];
            errno = 4321;
            sw_conn_tls_read(ref, NULL, e ? -1 : 0, e);
            ASSERT(errno == 4321);
            break;
        }
        case 6: /* the next library write fails for good */
            if ((op >> 3) % 4 == 0)
                tf_fatal_next = true;
            break;
        case 7: /* the fd of a session opened without one becomes known */
            if (later_fd >= 0 && tf_fd < 0) {
                tf_fd = later_fd;
                sw_conn_tls_set_fd(ref, later_fd);
            }
            break;
        }
    }
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
    tf_partial = (data[0] & 4) != 0;
    bool fdless = (data[0] & 8) != 0;
    tf_gnutls = (data[0] & 16) != 0;
    tf_partial = tf_partial || tf_gnutls; /* GnuTLS: one record per call, short counts */
    unrec_mode = (data[0] >> 5) & 3;
    memset(h_state, 0, sizeof(h_state));
    next_handle = 1;
    wire_len = app_len = tf_wire_ok = 0;
    k_take = 0;
    k_eagain = 0;
    k_error = 0;
    k_calls = 0;
    broken = false;
    tf_fail_every = 0;
    tf_take = 0;
    tf_fatal_next = tf_fatal = tf_pend = false;
    tf_calls = 0;

    int fd;
    if (server) {
        fd = sw_conn_accept(3, NULL, NULL, 0, true);
        ASSERT(fd == SERVER_FD);
    } else {
        fd = CLIENT_FD;
        sw_conn_on_socket(fd, AF_INET, SOCK_STREAM);
        struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(8443)};
        s.sin_addr.s_addr = htonl(0x7f000001);
        ASSERT(sw_conn_connect(fd, (struct sockaddr *)&s, sizeof(s)) == 0);
    }
    ASSERT(!SW_CONN_UNTRACKED(fd));
    /* The handshake's first record on the socket, before the session is bound: untouched. */
    size_t before = wire_len;
    static const char hello[] = "\x16\x03\x01\x00\x05hello";
    ASSERT(sw_conn_write(fd, hello, sizeof(hello) - 1) == (ssize_t)(sizeof(hello) - 1));
    ASSERT(wire_len - before == sizeof(hello) - 1 && memcmp(wire + before, hello, 5) == 0);
    wire_len = 0;

    tf_fd = fdless ? -1 : fd;
    errno = 555;
    sw_conn_ref ref = sw_conn_tls_open(tf_fd, server ? SW_ROLE_SERVER : SW_ROLE_CLIENT);
    ASSERT(errno == 555);
    if (ref)
        tf_run_tls_ops(&in, ref, fd);
    if (tf_fatal)
        wire_len = tf_wire_ok; /* a failed call's bytes: the application was not told they went */
    if (server)
        ASSERT(wire_len == app_len && memcmp(wire, app, app_len) == 0);
    else if (ref)
        check_client_wire();
    errno = 777;
    if (ref)
        sw_conn_tls_close(ref);
    sw_conn_on_close(fd);
    ASSERT(errno == 777);
    ASSERT(SW_CONN_UNTRACKED(fd));
    for (uint64_t h = 1; h < next_handle; h++)
        ASSERT(h_state[h] != 1);
    return 0;
}
