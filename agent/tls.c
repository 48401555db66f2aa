/*
 * tls.c - HTTPS: the plaintext of OpenSSL (libssl.so.3) and GnuTLS sessions, handed to the
 * connection layer exactly as the bytes of a plain socket (conn_tls.h).
 *
 * Interposed (exported by swagent.map; only TLS names are defined here, libc's are in
 * interpose.c): SSL_read, SSL_read_ex, SSL_write, SSL_write_ex (the application's data),
 * SSL_set_fd/rfd/wfd (a session's socket), SSL_do_handshake, SSL_connect, SSL_accept (the
 * socket calls made inside them name the socket of a memory-BIO session, curl), SSL_free;
 * SSL_write_early_data and SSL_read_early_data (0-RTT: passed through untouched, the _ex calls
 * they make inside are not followed); gnutls_record_send, gnutls_record_recv,
 * gnutls_handshake, gnutls_deinit. SSL_peek* is not consumed data and is not interposed.
 *
 * Rules: runs on application threads. No malloc: the session table is one anonymous mapping
 * made by the first TLS call after the agent activated (a process that never calls into a
 * TLS library maps nothing and pays nothing); no lock (a session's entry is claimed with one
 * CAS); errno as the real call left it. libssl and libgnutls are never linked: each real
 * function is looked up at its first use (dlopen of the already loaded library with
 * RTLD_NOLOAD, else dlsym(RTLD_NEXT)), which also finds a libssl that Python's _ssl dlopen'ed
 * long after start-up (RTLD_NEXT alone does not search a library loaded RTLD_LOCAL). The
 * ciphertext the library reads and writes on the socket is never parsed or changed: the
 * "inside a TLS call" marker (tls.h) tells the socket paths so, and gives tls.c the fd.
 *
 * Which socket a session uses, best first: SSL_set_fd (nginx, Python's ssl), SSL_get_fd at
 * the first call, the socket call made on the same thread inside a handshake or data call
 * (curl's memory BIO, GnuTLS: its transport int is garbage with curl's push callback), else
 * none: the connection has no peer rather than a wrong one.
 *
 * Limits (docs/architecture.md, "HTTPS"): a TLS library linked into the executable (Go,
 * NodeSource's node, Envoy/BoringSSL), JSSE and rustls are not seen; neither is BIO_f_ssl
 * (BIO_write on an SSL BIO calls libssl internally), nor a module dlopen'ed with RTLD_DEEPBIND.
 */
#include "common.h"

#include "conn.h"
#include "guard.h"
#include "h2_adopt.h"
#include "log.h"
#include "tls.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/types.h>

/* TLS calls of ours in progress on this thread: a TLS function the library calls inside one
 * (SSL_connect -> SSL_do_handshake, SSL_write_early_data -> SSL_write_ex, through its PLT)
 * goes straight to the real one. */
static __thread __attribute__((tls_model("initial-exec"))) uint32_t depth;

/* ---- the real functions, looked up at first use ------------------------------------------- */

enum lib { LIB_SSL, LIB_GNUTLS, LIB_CRYPTO };

/* Names in arrays, not pointers: no relocation when the library is loaded (see own_fn). */
static const char lib_names[3][2][20] = {
    {"libssl.so.3", "libssl.so.1.1"},
    {"libgnutls.so.30", ""},
    {"libcrypto.so.3", "libcrypto.so.1.1"},
};

enum fn {
    F_SSL_READ,
    F_SSL_READ_EX,
    F_SSL_WRITE,
    F_SSL_WRITE_EX,
    F_SSL_SET_FD,
    F_SSL_SET_RFD,
    F_SSL_SET_WFD,
    F_SSL_FREE,
    F_SSL_DO_HANDSHAKE,
    F_SSL_CONNECT,
    F_SSL_ACCEPT,
    F_SSL_WRITE_EARLY,
    F_SSL_READ_EARLY,
    F_SSL_GET_FD,
    F_SSL_GET_ERROR,
    F_SSL_IS_SERVER,
    F_SSL_CTRL,
    F_SSL_ALPN,
    F_GT_SEND,
    F_GT_RECV,
    F_GT_HANDSHAKE,
    F_GT_DEINIT,
    F_GT_FATAL,
    F_GT_ALPN,
    F_ERR_PEEK,
    F_SSL_WANT,
    F_SSL_IN_INIT,
    F_SSL_GET_SHUTDOWN,
    F_SSL_GET_RBIO,
    F_SSL_GET_WBIO,
    F_BIO_TEST_FLAGS,
    F_N
};

static const struct {
    char name[40];
    uint8_t lib;
} fn_info[F_N] = {
    [F_SSL_READ] = {"SSL_read", LIB_SSL},
    [F_SSL_READ_EX] = {"SSL_read_ex", LIB_SSL},
    [F_SSL_WRITE] = {"SSL_write", LIB_SSL},
    [F_SSL_WRITE_EX] = {"SSL_write_ex", LIB_SSL},
    [F_SSL_SET_FD] = {"SSL_set_fd", LIB_SSL},
    [F_SSL_SET_RFD] = {"SSL_set_rfd", LIB_SSL},
    [F_SSL_SET_WFD] = {"SSL_set_wfd", LIB_SSL},
    [F_SSL_FREE] = {"SSL_free", LIB_SSL},
    [F_SSL_DO_HANDSHAKE] = {"SSL_do_handshake", LIB_SSL},
    [F_SSL_CONNECT] = {"SSL_connect", LIB_SSL},
    [F_SSL_ACCEPT] = {"SSL_accept", LIB_SSL},
    [F_SSL_WRITE_EARLY] = {"SSL_write_early_data", LIB_SSL},
    [F_SSL_READ_EARLY] = {"SSL_read_early_data", LIB_SSL},
    [F_SSL_GET_FD] = {"SSL_get_fd", LIB_SSL},
    [F_SSL_GET_ERROR] = {"SSL_get_error", LIB_SSL},
    [F_SSL_IS_SERVER] = {"SSL_is_server", LIB_SSL},
    [F_SSL_CTRL] = {"SSL_ctrl", LIB_SSL},
    [F_SSL_ALPN] = {"SSL_get0_alpn_selected", LIB_SSL},
    [F_GT_SEND] = {"gnutls_record_send", LIB_GNUTLS},
    [F_GT_RECV] = {"gnutls_record_recv", LIB_GNUTLS},
    [F_GT_HANDSHAKE] = {"gnutls_handshake", LIB_GNUTLS},
    [F_GT_DEINIT] = {"gnutls_deinit", LIB_GNUTLS},
    [F_GT_FATAL] = {"gnutls_error_is_fatal", LIB_GNUTLS},
    [F_GT_ALPN] = {"gnutls_alpn_get_selected_protocol", LIB_GNUTLS},
    [F_ERR_PEEK] = {"ERR_peek_error", LIB_CRYPTO},
    [F_SSL_WANT] = {"SSL_want", LIB_SSL},
    [F_SSL_IN_INIT] = {"SSL_in_init", LIB_SSL},
    [F_SSL_GET_SHUTDOWN] = {"SSL_get_shutdown", LIB_SSL},
    [F_SSL_GET_RBIO] = {"SSL_get_rbio", LIB_SSL},
    [F_SSL_GET_WBIO] = {"SSL_get_wbio", LIB_SSL},
    [F_BIO_TEST_FLAGS] = {"BIO_test_flags", LIB_CRYPTO},
};

static void *real_fn[F_N];
static struct {
    _Atomic uint64_t sessions, no_fd, table_full, not_followed, h2, h2_followed, early_data,
        unresolved;
} stats;

/* Our own definitions of the interposed names (a lookup that finds one of them is refused). */
static void *own_fn(enum fn f);

/*
 * Looks `f` up: in the loaded TLS library first (RTLD_NOLOAD never loads anything; the handle
 * keeps the library mapped, so the pointer stays valid even if the application dlcloses it),
 * then in the objects after ours. Runs once per function, at its first call, with the guard
 * held (the loader may call hooked functions). NULL when nothing is found (counted, logged).
 */
static SW_NOINLINE void *resolve(enum fn f)
{
    void *p = NULL;
    int e = errno;
    SW_GUARD_ENTER();
    for (int i = 0; !p && i < 2 && lib_names[fn_info[f].lib][i][0]; i++) {
        void *h = dlopen(lib_names[fn_info[f].lib][i], RTLD_LAZY | RTLD_NOLOAD);
        if (h)
            p = dlsym(h, fn_info[f].name);
    }
    if (!p)
        p = dlsym(RTLD_NEXT, fn_info[f].name);
    if (p && p == own_fn(f))
        p = NULL;
    SW_GUARD_LEAVE();
    if (p) {
        __atomic_store_n(&real_fn[f], p, __ATOMIC_RELEASE);
    } else {
        sw_atomic_add_relaxed(&stats.unresolved, 1);
        SW_LOGE("tls: %s not found in a loaded TLS library", fn_info[f].name);
    }
    errno = e;
    return p;
}

static inline __attribute__((always_inline)) void *real(enum fn f)
{
    void *p = __atomic_load_n(&real_fn[f], __ATOMIC_ACQUIRE);
    return SW_LIKELY(p != NULL) ? p : resolve(f);
}

typedef int (*ssl_rw_fn)(void *, void *, int);
typedef int (*ssl_rw_ex_fn)(void *, void *, size_t, size_t *);
typedef int (*ssl_int_fn)(void *, int);
typedef int (*ssl_one_fn)(void *);
typedef void (*ssl_void_fn)(void *);
typedef long (*ssl_ctrl_fn)(void *, int, long, void *);
typedef void (*ssl_alpn_fn)(const void *, const unsigned char **, unsigned int *);
typedef ssize_t (*gt_rw_fn)(void *, void *, size_t);

#define SSL_ERROR_SSL_ 1
#define SSL_ERROR_WANT_READ_ 2
#define SSL_ERROR_WANT_WRITE_ 3
#define SSL_ERROR_SYSCALL_ 5
#define SSL_ERROR_ZERO_RETURN_ 6
#define SSL_CTRL_MODE_ 33
#define SSL_WRITING_ 2
#define SSL_READING_ 3
#define SSL_RECEIVED_SHUTDOWN_ 2
#define BIO_FLAGS_SHOULD_RETRY_ 0x08
#define SSL_R_UNEXPECTED_EOF_WHILE_READING_ 294
#define ERR_REASON_MASK_ 0x7fffffUL
#define SSL_MODE_ENABLE_PARTIAL_WRITE_ 0x1L
#define GNUTLS_E_AGAIN_ (-28)
#define GNUTLS_E_INTERRUPTED_ (-52)
#define GNUTLS_E_PREMATURE_TERMINATION_ (-110)

/* ---- the session table -------------------------------------------------------------------- */

/*
 * Open addressing on the session pointer, linear probing. An entry is claimed by a CAS of its
 * key from EMPTY or TOMB, then filled, then published (ready); readers use only ready entries.
 * SSL_free/gnutls_deinit clear it before the real free (the address is reused as soon as it is
 * freed): TOMB, or EMPTY when the next entry is EMPTY (so tombstones do not pile up).
 */
#define SESS_BITS 14
#define SESS_N (1u << SESS_BITS)
#define SESS_PROBE 64
#define K_EMPTY ((uintptr_t)0)
#define K_TOMB ((uintptr_t)1)

enum { S_NEW, S_FOLLOW, S_IGNORE }; /* state: being filled, followed, not followed */

struct sess {
    _Atomic uintptr_t key;
    _Atomic uint8_t state;
    uint8_t lib;     /* enum lib */
    bool checked;    /* ALPN and the write mode looked at (first data call) */
    bool partial;    /* SSL_MODE_ENABLE_PARTIAL_WRITE (set up before the first data call) */
    int32_t fd;      /* the fd it was opened with (SSL_set_fd, SSL_get_fd), -1 none */
    sw_conn_ref ref; /* the connection layer's reference, 0 none */
};

static struct sess *sess_tab;
static _Atomic int tab_state; /* 0 not mapped, 1 mapping, 2 mapped, 3 failed */

static SW_NOINLINE bool tab_map(void)
{
    int s = 0;
    if (atomic_compare_exchange_strong(&tab_state, &s, 1)) {
        void *p = mmap(NULL, SESS_N * sizeof(struct sess), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            atomic_store(&tab_state, 3);
            SW_LOGE("tls: no memory for the session table: TLS sessions are not followed");
            return false;
        }
        __atomic_store_n(&sess_tab, (struct sess *)p, __ATOMIC_RELEASE);
        atomic_store(&tab_state, 2);
        return true;
    }
    for (int i = 0; i < 1000 && s == 1; i++) /* another thread maps it (one mmap) */
        s = atomic_load(&tab_state);
    return s == 2;
}

static inline uint32_t sess_hash(const void *k)
{
    return (uint32_t)(((uintptr_t)k >> 4) * 0x9e3779b97f4a7c15ull >> (64 - SESS_BITS));
}

/* The entry of `k`, or NULL. */
static inline struct sess *sess_find(const void *k)
{
    struct sess *t = __atomic_load_n(&sess_tab, __ATOMIC_ACQUIRE);
    if (!t)
        return NULL;
    uint32_t i = sess_hash(k);
    for (int n = 0; n < SESS_PROBE; n++, i = (i + 1) & (SESS_N - 1)) {
        uintptr_t v = atomic_load_explicit(&t[i].key, memory_order_acquire);
        if (v == (uintptr_t)k)
            return &t[i];
        if (v == K_EMPTY)
            return NULL;
    }
    return NULL;
}

/* Claims an entry for `k` (state S_NEW, to be filled by the caller); the existing one if
 * another thread claimed it first (*fresh false); NULL when the table is full. */
static struct sess *sess_claim(const void *k, bool *fresh)
{
    *fresh = false;
    if (!sess_tab && !tab_map())
        return NULL;
    for (int round = 0; round < 4; round++) {
        struct sess *t = sess_tab, *free_e = NULL;
        uint32_t i = sess_hash(k);
        for (int n = 0; n < SESS_PROBE; n++, i = (i + 1) & (SESS_N - 1)) {
            uintptr_t v = atomic_load_explicit(&t[i].key, memory_order_acquire);
            if (v == (uintptr_t)k)
                return &t[i];
            if (v == K_TOMB && !free_e)
                free_e = &t[i];
            if (v == K_EMPTY) {
                if (!free_e)
                    free_e = &t[i];
                break;
            }
        }
        if (!free_e)
            break;
        uintptr_t want = atomic_load_explicit(&free_e->key, memory_order_relaxed);
        if ((want == K_EMPTY || want == K_TOMB) &&
            atomic_compare_exchange_strong(&free_e->key, &want, (uintptr_t)k)) {
            atomic_store_explicit(&free_e->state, S_NEW, memory_order_relaxed);
            free_e->ref = 0;
            free_e->fd = -1;
            free_e->checked = false;
            *fresh = true;
            return free_e;
        }
    }
    sw_atomic_add_relaxed(&stats.table_full, 1);
    return NULL;
}

static void sess_clear(struct sess *e)
{
    struct sess *t = sess_tab;
    uint32_t i = (uint32_t)(e - t);
    uintptr_t next = atomic_load_explicit(&t[(i + 1) & (SESS_N - 1)].key, memory_order_relaxed);
    atomic_store_explicit(&e->state, S_IGNORE, memory_order_relaxed);
    atomic_store_explicit(&e->key, next == K_EMPTY ? K_EMPTY : K_TOMB, memory_order_release);
}

/* ---- binding a session to a connection ---------------------------------------------------- */

/* The agent follows TLS calls now: activated, and not inside its own or a nested TLS call. */
#define TLS_PASS() (SW_UNLIKELY(!SW_CONN_ON()) || SW_GUARD_HELD() || depth != 0)

/*
 * The entry of session `s`, opened at its first sight on `fd` (SSL_set_fd), else on the fd
 * SSL_get_fd names, else on none (a socket call made inside a later TLS call names it: the
 * connection layer binds it, sw_conn_tls_enter). NULL: not followed.
 */
static SW_NOINLINE struct sess *sess_open_in(void *s, enum lib lib, int fd);

/* sess_open_in with the application's errno kept (mapping the table, logging). */
static SW_NOINLINE struct sess *sess_open(void *s, enum lib lib, int fd)
{
    int saved = errno;
    struct sess *e = sess_open_in(s, lib, fd);
    errno = saved;
    return e;
}

static SW_NOINLINE struct sess *sess_open_in(void *s, enum lib lib, int fd)
{
    bool fresh;
    struct sess *e = sess_claim(s, &fresh);
    if (!e)
        return NULL;
    if (!fresh)
        return atomic_load_explicit(&e->state, memory_order_acquire) == S_FOLLOW ? e : NULL;
    e->lib = (uint8_t)lib;
    int role = SW_ROLE_CLIENT; /* GnuTLS: no role call; the fd's connection keeps its own */
    if (lib == LIB_SSL) {
        ssl_one_fn get_fd = (ssl_one_fn)real(F_SSL_GET_FD);
        if (fd < 0 && get_fd)
            fd = get_fd(s);
        ssl_one_fn is_server = (ssl_one_fn)real(F_SSL_IS_SERVER);
        if (is_server && is_server(s))
            role = SW_ROLE_SERVER;
    }
    e->fd = fd;
    e->ref = sw_conn_tls_open(fd, role);
    if (!e->ref) {
        sw_atomic_add_relaxed(&stats.not_followed, 1);
        atomic_store_explicit(&e->state, S_IGNORE, memory_order_release);
        return NULL;
    }
    sw_atomic_add_relaxed(&stats.sessions, 1);
    if (fd < 0)
        sw_atomic_add_relaxed(&stats.no_fd, 1);
    atomic_store_explicit(&e->state, S_FOLLOW, memory_order_release);
    return e;
}

/* The followed entry of `s` (opening it at first sight), NULL when not followed. */
static inline struct sess *sess_get(void *s, enum lib lib)
{
    struct sess *e = sess_find(s);
    if (SW_LIKELY(e != NULL))
        return atomic_load_explicit(&e->state, memory_order_acquire) == S_FOLLOW ? e : NULL;
    return sess_open(s, lib, -1);
}

/* Ends the session's entry (SSL_free, gnutls_deinit, a new fd after SSL_clear). */
static void sess_end(void *s)
{
    struct sess *e = sess_find(s);
    if (!e)
        return;
    sw_conn_ref r = e->ref;
    bool followed = atomic_load_explicit(&e->state, memory_order_acquire) == S_FOLLOW;
    e->ref = 0;
    sess_clear(e);
    if (followed && r)
        sw_conn_tls_close(r);
}

/* A real TLS call other than a write, made with the session's socket calls marked. */
#define MARKED(ref, call)                                                                          \
    do {                                                                                           \
        sw_conn_tls_enter(ref);                                                                    \
        depth++;                                                                                   \
        call;                                                                                      \
        depth--;                                                                                   \
        sw_conn_tls_leave();                                                                       \
    } while (0)

/* ---- OpenSSL ------------------------------------------------------------------------------ */

/*
 * A session whose ALPN selected "h2" (p, n: the protocol) carries HTTP/2: the HTTP/2 module
 * takes its connection (sw_conn_tls_adopt_h2) before any plaintext byte is parsed. Without that
 * module (a build that leaves it out), or when it refuses, the session is not followed
 * (counted). Returns false when the session is no longer followed.
 */
static bool alpn_h2(struct sess *e, void *s, const unsigned char *p, unsigned int n)
{
    if (n != 2 || p[0] != 'h' || p[1] != '2')
        return true;
    if (sw_conn_tls_adopt_h2(e->ref)) {
        sw_atomic_add_relaxed(&stats.h2_followed, 1);
        return true;
    }
    sw_atomic_add_relaxed(&stats.h2, 1);
    sess_end(s);
    return false;
}

/* First data call of an OpenSSL session: its write mode and ALPN (alpn_h2). */
static SW_NOINLINE bool ssl_check(struct sess *e, void *s)
{
    e->checked = true;
    ssl_ctrl_fn ctrl = (ssl_ctrl_fn)real(F_SSL_CTRL);
    e->partial = ctrl && (ctrl(s, SSL_CTRL_MODE_, 0, NULL) & SSL_MODE_ENABLE_PARTIAL_WRITE_);
    ssl_alpn_fn alpn = (ssl_alpn_fn)real(F_SSL_ALPN);
    const unsigned char *p = NULL;
    unsigned int n = 0;
    if (alpn)
        alpn(s, &p, &n);
    return alpn_h2(e, s, p, n);
}

static inline struct sess *ssl_sess_in(void *s)
{
    struct sess *e = sess_get(s, LIB_SSL);
    if (e && SW_UNLIKELY(!e->checked) && !ssl_check(e, s))
        return NULL;
    return e;
}

/*
 * The followed and checked OpenSSL session this thread used last (a server's thread serves a
 * connection's request and response in a row): its entry without the hash and the probe.
 * Valid while the entry still holds `s`, followed and checked (SSL_free clears the key; an
 * entry claimed again for a new session at the same address is not checked yet).
 */
static __thread __attribute__((tls_model("initial-exec"))) struct {
    void *s;
    struct sess *e;
} last_sess;

static inline struct sess *ssl_sess(void *s)
{
    struct sess *e = last_sess.e;
    if (SW_LIKELY(last_sess.s == s && e &&
                  atomic_load_explicit(&e->key, memory_order_acquire) == (uintptr_t)s &&
                  atomic_load_explicit(&e->state, memory_order_acquire) == S_FOLLOW && e->checked))
        return e;
    e = ssl_sess_in(s);
    if (e) {
        last_sess.s = s;
        last_sess.e = e;
    }
    return e;
}

/*
 * What a failed SSL call (SSL_get_error's `err`) means for the stream, as an errno for
 * sw_conn_tls_read: 0 the stream ended as at a socket's EOF (close_notify; or the peer closed
 * without one, which a response framed by the close of its connection does: its framing
 * decides), ECONNRESET a reset, EPROTO an alert or a broken record, -1 nothing (WANT_*).
 */
static int ssl_failure(void *s, int ret, int sys_errno)
{
    /*
     * The usual failure, a non-blocking read or write that would block, told cheaply, as
     * SSL_get_error tells it but without its look at the thread's error queue (~150
     * instructions per call in libcrypto; the application calls it right after anyway): the
     * session waits for its BIO (SSL_want) and the BIO says "retry" (a reset or an EOF leaves
     * that flag clear), the session is not in a handshake or in its error state (SSL_in_init:
     * a fatal error puts it there) and got no close_notify.
     */
    static struct {
        ssl_one_fn want, in_init, get_shutdown;
        void *(*rbio)(const void *), *(*wbio)(const void *);
        int (*test_flags)(const void *, int);
        _Atomic int state; /* 0 not looked up, 1 all found, 2 some missing */
    } q;
    int qs = atomic_load_explicit(&q.state, memory_order_acquire);
    if (SW_UNLIKELY(qs == 0)) {
        q.want = (ssl_one_fn)real(F_SSL_WANT);
        q.in_init = (ssl_one_fn)real(F_SSL_IN_INIT);
        q.get_shutdown = (ssl_one_fn)real(F_SSL_GET_SHUTDOWN);
        q.rbio = (void *(*)(const void *))real(F_SSL_GET_RBIO);
        q.wbio = (void *(*)(const void *))real(F_SSL_GET_WBIO);
        q.test_flags = (int (*)(const void *, int))real(F_BIO_TEST_FLAGS);
        qs = q.want && q.in_init && q.get_shutdown && q.rbio && q.wbio && q.test_flags ? 1 : 2;
        atomic_store_explicit(&q.state, qs, memory_order_release);
    }
    if (SW_LIKELY(qs == 1)) {
        int w = q.want(s);
        void *b = w == SSL_READING_ ? q.rbio(s) : w == SSL_WRITING_ ? q.wbio(s) : NULL;
        if (b && q.test_flags(b, BIO_FLAGS_SHOULD_RETRY_) && !q.in_init(s) &&
            !(q.get_shutdown(s) & SSL_RECEIVED_SHUTDOWN_))
            return -1;
    }
    ssl_int_fn get_error = (ssl_int_fn)real(F_SSL_GET_ERROR);
    if (!get_error)
        return -1;
    switch (get_error(s, ret)) {
    case SSL_ERROR_ZERO_RETURN_:
        return 0;
    case SSL_ERROR_SYSCALL_:
        return sys_errno == 0 ? 0 : sys_errno;
    case SSL_ERROR_SSL_: {
        unsigned long (*peek)(void) = (unsigned long (*)(void))real(F_ERR_PEEK);
        if (peek && (peek() & ERR_REASON_MASK_) == SSL_R_UNEXPECTED_EOF_WHILE_READING_)
            return 0;
        return EPROTO;
    }
    default:
        return -1;
    }
}

/* Hands a failed read's meaning to the connection layer (errno kept). */
static void ssl_read_failed(struct sess *e, void *s, int ret)
{
    int saved = errno;
    int f = ssl_failure(s, ret, saved);
    if (f == 0)
        sw_conn_tls_read(e->ref, NULL, 0, 0);
    else if (f > 0)
        sw_conn_tls_read(e->ref, NULL, -1, f);
    errno = saved;
}

struct ssl_wr {
    void *s;
    void *fn;
    uint8_t kind; /* 0 SSL_write, 1 SSL_write_ex, 2 SSL_write_early_data */
};

/* The connection layer's real write: one SSL_write / SSL_write_ex / SSL_write_early_data. */
static long ssl_wr_fn(void *ctx, const void *p, size_t len)
{
    struct ssl_wr *w = ctx;
    if (w->kind == 0) {
        int n = len > INT32_MAX ? INT32_MAX : (int)len;
        return ((ssl_rw_fn)w->fn)(w->s, (void *)p, n);
    }
    size_t done = 0;
    int ok = ((ssl_rw_ex_fn)w->fn)(w->s, (void *)p, len, &done);
    return ok == 1 ? (long)done : 0;
}

/*
 * A write (kind: struct ssl_wr), the session followed or not: returns what the application's
 * call returns (SSL_write: the count or the failure value; the _ex calls: 1 or 0, with
 * *written), so that the entry points end in a tail call.
 */
static SW_NOINLINE int ssl_write_slow(void *s, const void *buf, size_t n, size_t *written, void *fn,
                                      int kind)
{
    struct sess *e = ssl_sess(s); /* keeps errno (sess_open, sw_conn_tls_*) */
    long r;
    if (SW_UNLIKELY(!e)) {
        if (kind == 0)
            return ((ssl_rw_fn)fn)(s, (void *)buf, (int)n);
        return ((ssl_rw_ex_fn)fn)(s, (void *)buf, n, written);
    }
    struct ssl_wr w = {s, fn, (uint8_t)kind};
    int flags = (e->partial ? SW_CONN_TLS_PARTIAL : 0) | (kind == 2 ? SW_CONN_TLS_NO_EDIT : 0);
    depth++;
    r = sw_conn_tls_write(e->ref, buf, n, flags, ssl_wr_fn, &w);
    depth--;
    if (r <= 0) {
        int err = errno;
        int f = ssl_failure(s, kind == 0 ? (int)r : 0, err);
        if (f > 0) /* the connection failed: a request in flight ends as an error */
            sw_conn_tls_read(e->ref, NULL, -1, f);
        errno = err;
    }
    if (kind == 0)
        return (int)r;
    if (written)
        *written = r > 0 ? (size_t)r : 0;
    return r > 0 ? 1 : 0;
}

/* errno while the real read runs: no call sets it, so errno after the call tells whether the
 * call set it (when not, the application's value is put back). */
#define ERRNO_UNSET (-0x5357)

static SW_NOINLINE int ssl_read_slow(void *s, void *buf, size_t n, size_t *got, void *fn, int kind)
{
    struct sess *e = ssl_sess(s); /* keeps errno (sess_open, sw_conn_tls_*) */
    int r;
    size_t k = 0;
    size_t *kp = got ? got : &k;
    int *ep = &errno; /* one __errno_location call */
    int e0 = *ep;
    *ep = ERRNO_UNSET;
    if (e && e->fd >= 0) {
        /* Opened on its fd (SSL_set_fd, SSL_get_fd): the connection layer untracked that fd,
         * so the socket calls inside pass untouched without the marker. */
        depth++;
        if (kind == 0)
            r = ((ssl_rw_fn)fn)(s, buf, n > INT32_MAX ? INT32_MAX : (int)n);
        else
            r = ((ssl_rw_ex_fn)fn)(s, buf, n, kp);
        depth--;
    } else if (kind == 0) {
        MARKED(e ? e->ref : 0, r = ((ssl_rw_fn)fn)(s, buf, n > INT32_MAX ? INT32_MAX : (int)n));
    } else {
        MARKED(e ? e->ref : 0, r = ((ssl_rw_ex_fn)fn)(s, buf, n, kp));
    }
    int err = *ep;
    if (err == ERRNO_UNSET)
        *ep = e0; /* the call left errno alone */
    if (!e)
        return r;
    /* SSL_read: > 0 bytes; SSL_read_ex: 1; SSL_read_early_data: 1 (SUCCESS) with bytes. */
    long got_n = kind == 0 ? r : (r == 1 ? (long)*kp : 0);
    if (got_n > 0) {
        sw_conn_tls_read(e->ref, buf, got_n, 0); /* keeps errno */
    } else if (kind == 1 || (kind == 0 && r <= 0)) {
        /*
         * The usual failure, a read that would block, told for nothing: OpenSSL clears errno
         * before it reads the socket (clear_sys_error) and returns as soon as that read fails,
         * so EAGAIN set during this call is the socket's answer to its last read: WANT_READ
         * (or WANT_WRITE). The rest (an EOF, a close_notify, a reset, an alert; a BIO that
         * sets no errno) is told by ssl_failure.
         */
        if (err != EAGAIN && err != EWOULDBLOCK)
            ssl_read_failed(e, s, r);
    }
    return r;
}

/*
 * The entry points. Each is the real call when the agent does not follow TLS now, else the
 * slow path above. A real function that cannot be found makes the call fail as a failed TLS
 * call would (logged once per function, counted).
 */
#define REAL_OR_FAIL(f, T, failv)                                                                  \
    T fp_ = (T)real(f);                                                                            \
    if (SW_UNLIKELY(!fp_))                                                                         \
        return failv;

SW_EXPORT int SSL_write(void *s, const void *buf, int num)
{
    REAL_OR_FAIL(F_SSL_WRITE, ssl_rw_fn, -1);
    if (TLS_PASS() || num <= 0)
        return fp_(s, (void *)buf, num);
    return ssl_write_slow(s, buf, (size_t)num, NULL, (void *)fp_, 0);
}

/* SSL_write_ex and SSL_write_early_data: (ssl, buf, num, &written) -> 1 or 0. */
static inline int ssl_write_ex_like(void *s, const void *buf, size_t num, size_t *written,
                                    ssl_rw_ex_fn fp, int kind)
{
    if (TLS_PASS() || num == 0)
        return fp(s, (void *)buf, num, written);
    return ssl_write_slow(s, buf, num, written, (void *)fp, kind);
}

SW_EXPORT int SSL_write_ex(void *s, const void *buf, size_t num, size_t *written)
{
    REAL_OR_FAIL(F_SSL_WRITE_EX, ssl_rw_ex_fn, 0);
    return ssl_write_ex_like(s, buf, num, written, fp_, 1);
}

/* 0-RTT: replayable, so never edited (SW_CONN_TLS_NO_EDIT); the SSL_write_ex it calls inside
 * passes straight (depth). */
SW_EXPORT int SSL_write_early_data(void *s, const void *buf, size_t num, size_t *written)
{
    REAL_OR_FAIL(F_SSL_WRITE_EARLY, ssl_rw_ex_fn, 0);
    if (!TLS_PASS())
        sw_atomic_add_relaxed(&stats.early_data, 1);
    return ssl_write_ex_like(s, buf, num, written, fp_, 2);
}

SW_EXPORT int SSL_read(void *s, void *buf, int num)
{
    REAL_OR_FAIL(F_SSL_READ, ssl_rw_fn, -1);
    if (TLS_PASS())
        return fp_(s, buf, num);
    return ssl_read_slow(s, buf, num < 0 ? 0 : (size_t)num, NULL, (void *)fp_, 0);
}

SW_EXPORT int SSL_read_ex(void *s, void *buf, size_t num, size_t *readbytes)
{
    REAL_OR_FAIL(F_SSL_READ_EX, ssl_rw_ex_fn, 0);
    if (TLS_PASS())
        return fp_(s, buf, num, readbytes);
    return ssl_read_slow(s, buf, num, readbytes, (void *)fp_, 1);
}

/* SSL_read_early_data: SUCCESS (1) with bytes, FINISH (2), ERROR (0). */
SW_EXPORT int SSL_read_early_data(void *s, void *buf, size_t num, size_t *readbytes)
{
    REAL_OR_FAIL(F_SSL_READ_EARLY, ssl_rw_ex_fn, 0);
    if (TLS_PASS())
        return fp_(s, buf, num, readbytes);
    sw_atomic_add_relaxed(&stats.early_data, 1);
    return ssl_read_slow(s, buf, num, readbytes, (void *)fp_, 2);
}

/*
 * SSL_set_fd/rfd/wfd: the session's socket is known before its handshake, so the connection
 * layer stops parsing the fd's bytes before the ClientHello. A followed session given another
 * fd (SSL_clear, then a new socket) is a new connection.
 */
static SW_NOINLINE void ssl_set_fd_slow(void *s, int fd)
{
    int saved = errno;
    struct sess *e = sess_find(s);
    if (e && e->fd != fd) {
        sess_end(s);
        e = NULL;
    }
    if (!e && fd >= 0)
        sess_open(s, LIB_SSL, fd);
    errno = saved;
}

#define SSL_SET_FD(name, f)                                                                        \
    SW_EXPORT int name(void *s, int fd)                                                            \
    {                                                                                              \
        REAL_OR_FAIL(f, ssl_int_fn, 0);                                                            \
        int r = fp_(s, fd);                                                                        \
        if (r == 1 && !TLS_PASS())                                                                 \
            ssl_set_fd_slow(s, fd);                                                                \
        return r;                                                                                  \
    }

SSL_SET_FD(SSL_set_fd, F_SSL_SET_FD)
SSL_SET_FD(SSL_set_rfd, F_SSL_SET_RFD)
SSL_SET_FD(SSL_set_wfd, F_SSL_SET_WFD)

/* Handshakes (both libraries): the session is opened here, so a socket call made inside names
 * its socket. */
static SW_NOINLINE int handshake_slow(void *s, ssl_one_fn fp, enum lib lib)
{
    int saved = errno;
    struct sess *e = sess_get(s, lib);
    errno = saved;
    int r;
    MARKED(e ? e->ref : 0, r = fp(s));
    return r;
}

#define SSL_HANDSHAKE(name, f)                                                                     \
    SW_EXPORT int name(void *s)                                                                    \
    {                                                                                              \
        REAL_OR_FAIL(f, ssl_one_fn, -1);                                                           \
        if (TLS_PASS())                                                                            \
            return fp_(s);                                                                         \
        return handshake_slow(s, fp_, LIB_SSL);                                                    \
    }

SSL_HANDSHAKE(SSL_do_handshake, F_SSL_DO_HANDSHAKE)
SSL_HANDSHAKE(SSL_connect, F_SSL_CONNECT)
SSL_HANDSHAKE(SSL_accept, F_SSL_ACCEPT)

/* The session ends: cleared before the real free (the address may be reused right after). */
static SW_NOINLINE void sess_free_slow(void *s)
{
    int saved = errno;
    sess_end(s);
    errno = saved;
}

SW_EXPORT void SSL_free(void *s)
{
    ssl_void_fn fp = (ssl_void_fn)real(F_SSL_FREE);
    if (s && __atomic_load_n(&sess_tab, __ATOMIC_RELAXED) && !SW_GUARD_HELD())
        sess_free_slow(s);
    if (fp)
        fp(s);
}

/* ---- GnuTLS -------------------------------------------------------------------------------- */

static long gt_wr_fn(void *ctx, const void *p, size_t len)
{
    void **w = ctx;
    return (long)((gt_rw_fn)w[1])(w[0], (void *)p, len);
}

static bool gt_retry(long r)
{
    return r == GNUTLS_E_AGAIN_ || r == GNUTLS_E_INTERRUPTED_;
}

/* A GnuTLS failure as sw_conn_tls_read's errno (see ssl_failure): -1 when not an end. */
static int gt_failure(long r)
{
    if (r == 0 || r == GNUTLS_E_PREMATURE_TERMINATION_)
        return 0;
    if (gt_retry(r))
        return -1;
    int (*fatal)(int) = (int (*)(int))real(F_GT_FATAL);
    if (fatal && !fatal((int)r))
        return -1; /* a warning alert, a rehandshake request */
    return r == -53 /* GNUTLS_E_PUSH_ERROR */ || r == -54 /* GNUTLS_E_PULL_ERROR */ ? ECONNRESET
                                                                                    : EPROTO;
}

/* GnuTLS sends at most one record per call, so its callers take short counts: partial mode. */
/* First data call of a GnuTLS session: its ALPN (alpn_h2). */
static SW_NOINLINE bool gt_check(struct sess *e, void *s)
{
    e->checked = true;
    struct {
        unsigned char *data;
        unsigned int size;
    } d = {NULL, 0}; /* gnutls_datum_t */
    int (*alpn)(void *, void *) = (int (*)(void *, void *))real(F_GT_ALPN);
    if (!alpn || alpn(s, &d) != 0 || !d.data)
        return true;
    return alpn_h2(e, s, d.data, d.size);
}

/* The followed entry of GnuTLS session `s` (errno kept), NULL when not followed. */
static inline struct sess *gt_sess(void *s)
{
    int saved = errno;
    struct sess *e = sess_get(s, LIB_GNUTLS);
    if (e && SW_UNLIKELY(!e->checked) && !gt_check(e, s))
        e = NULL;
    errno = saved;
    return e;
}

SW_EXPORT ssize_t gnutls_record_send(void *s, const void *buf, size_t n)
{
    REAL_OR_FAIL(F_GT_SEND, gt_rw_fn, -50 /* GNUTLS_E_INVALID_REQUEST */);
    if (TLS_PASS())
        return fp_(s, (void *)buf, n);
    struct sess *e = gt_sess(s);
    if (!e)
        return fp_(s, (void *)buf, n);
    void *w[2] = {s, (void *)fp_};
    depth++;
    long r = sw_conn_tls_write(e->ref, buf, n, SW_CONN_TLS_PARTIAL, gt_wr_fn, w);
    depth--;
    if (r < 0) {
        int err = errno;
        int f = gt_failure(r);
        if (f > 0)
            sw_conn_tls_read(e->ref, NULL, -1, f);
        errno = err;
    }
    return (ssize_t)r;
}

static SW_NOINLINE ssize_t gt_recv_slow(void *s, void *buf, size_t n, gt_rw_fn fp)
{
    struct sess *e = gt_sess(s);
    ssize_t r;
    MARKED(e ? e->ref : 0, r = fp(s, buf, n));
    if (!e)
        return r;
    int err = errno;
    if (r > 0) {
        sw_conn_tls_read(e->ref, buf, r, 0);
    } else {
        int f = gt_failure(r);
        if (f >= 0)
            sw_conn_tls_read(e->ref, NULL, f == 0 ? 0 : -1, f);
    }
    errno = err;
    return r;
}

SW_EXPORT ssize_t gnutls_record_recv(void *s, void *buf, size_t n)
{
    REAL_OR_FAIL(F_GT_RECV, gt_rw_fn, -50);
    if (TLS_PASS())
        return fp_(s, buf, n);
    return gt_recv_slow(s, buf, n, fp_);
}

SW_EXPORT int gnutls_handshake(void *s)
{
    REAL_OR_FAIL(F_GT_HANDSHAKE, ssl_one_fn, -50);
    if (TLS_PASS())
        return fp_(s);
    return handshake_slow(s, fp_, LIB_GNUTLS);
}

SW_EXPORT void gnutls_deinit(void *s)
{
    ssl_void_fn fp = (ssl_void_fn)real(F_GT_DEINIT);
    if (s && __atomic_load_n(&sess_tab, __ATOMIC_RELAXED) && !SW_GUARD_HELD())
        sess_free_slow(s);
    if (fp)
        fp(s);
}

/*
 * Hidden aliases of our own definitions: their addresses need no symbol lookup when the
 * library is loaded (taking the address of an exported, interposable name would: one
 * R_X86_64_64 relocation per name, ~12,000 instructions added to every process's start,
 * measured with /bin/true under callgrind).
 */
#define OWN(name)                                                                                  \
    extern __typeof__(name) own_##name __attribute__((alias(#name), visibility("hidden")))
OWN(SSL_read);
OWN(SSL_read_ex);
OWN(SSL_write);
OWN(SSL_write_ex);
OWN(SSL_set_fd);
OWN(SSL_set_rfd);
OWN(SSL_set_wfd);
OWN(SSL_free);
OWN(SSL_do_handshake);
OWN(SSL_connect);
OWN(SSL_accept);
OWN(SSL_write_early_data);
OWN(SSL_read_early_data);
OWN(gnutls_record_send);
OWN(gnutls_record_recv);
OWN(gnutls_handshake);
OWN(gnutls_deinit);

static void *own_fn(enum fn f)
{
    switch (f) { /* a switch, not a table of pointers: no relocations at load */
    case F_SSL_READ:
        return (void *)own_SSL_read;
    case F_SSL_READ_EX:
        return (void *)own_SSL_read_ex;
    case F_SSL_WRITE:
        return (void *)own_SSL_write;
    case F_SSL_WRITE_EX:
        return (void *)own_SSL_write_ex;
    case F_SSL_SET_FD:
        return (void *)own_SSL_set_fd;
    case F_SSL_SET_RFD:
        return (void *)own_SSL_set_rfd;
    case F_SSL_SET_WFD:
        return (void *)own_SSL_set_wfd;
    case F_SSL_FREE:
        return (void *)own_SSL_free;
    case F_SSL_DO_HANDSHAKE:
        return (void *)own_SSL_do_handshake;
    case F_SSL_CONNECT:
        return (void *)own_SSL_connect;
    case F_SSL_ACCEPT:
        return (void *)own_SSL_accept;
    case F_SSL_WRITE_EARLY:
        return (void *)own_SSL_write_early_data;
    case F_SSL_READ_EARLY:
        return (void *)own_SSL_read_early_data;
    case F_GT_SEND:
        return (void *)own_gnutls_record_send;
    case F_GT_RECV:
        return (void *)own_gnutls_record_recv;
    case F_GT_HANDSHAKE:
        return (void *)own_gnutls_handshake;
    case F_GT_DEINIT:
        return (void *)own_gnutls_deinit;
    default:
        return NULL;
    }
}

void sw_tls_get_stats(struct sw_tls_stats *o)
{
    o->sessions = stats.sessions;
    o->no_fd = stats.no_fd;
    o->table_full = stats.table_full;
    o->not_followed = stats.not_followed;
    o->h2 = stats.h2;
    o->h2_followed = stats.h2_followed;
    o->early_data = stats.early_data;
    o->unresolved = stats.unresolved;
}
