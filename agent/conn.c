/*
 * conn.c - the connection layer: the fd table, the pool of connection objects and the byte
 * streams of each connection, handed to a protocol module per connection (proto.h; HTTP/1.x in
 * proto_http1.c).
 *
 * Runs on application threads, only for tracked fds (interpose.c filters the rest with one
 * branch). No malloc (table and pool are mmap'd at init), no stdio, no lock held across a
 * syscall: a per-connection spin flag protects the bookkeeping of the two directions, which
 * may run on two threads at once (one reads while another writes). errno is preserved except
 * where a send path reports the real call's errno, exactly as the application expects.
 *
 * The insertion invariant (kept here, for every module): the application sees exactly its own
 * byte counts and errno. Bytes of the application's outgoing stream are counted in absolute
 * offsets per connection:
 *   claimed  bytes reported as written to the application;
 *   sent     bytes given to the kernel (claimed - sent bytes are held in `hold`: the last bytes
 *            of a write the module asked to hold back, at most SW_CONN_HOLD_MAX);
 *   parsed   bytes given to the module's out() (with out_ahead parsing runs ahead of the
 *            kernel, so a module knows where to edit before the write that carries it goes out).
 * The module's edit (proto.h) inserts bytes before the application's byte ins_abs and replaces
 * application bytes by as many of its own. A write that reaches an edit is sent as
 * app-bytes-before + inserted bytes + the rest (replaced bytes swapped in) with one
 * writev/sendmsg of the real function (no copy of the app's bytes); the count returned is the
 * number of the app's bytes the kernel took. When the kernel takes only part of the inserted
 * bytes, the rest stays here and goes out first on the next call; a call that could not move
 * any app byte reports the real call's error (EAGAIN for non-blocking sockets). Held bytes are
 * reported as written and sent first with the next call. A write carrying bytes past the point
 * where the module paused (sw_conn_out_pause) while an edit is pending is cut there (a short
 * write; the app sends the rest).
 *
 * Which module: at connect()/accept() a module's claim() may take the connection; otherwise,
 * when some module sniffs, the first bytes of either direction decide (proto.h); otherwise a
 * TCP connection gets the default module (the last of proto_list.c: HTTP/1.x) at once. The
 * server's usual read of a request and write of a response go straight to the HTTP/1.x module
 * (c->fast; proto_http1.h), every other call through the module's hooks.
 *
 * Heuristics and limits (documented in docs/architecture.md):
 * - Roles come from socket()+connect() (client) and accept() (server). Sockets inherited
 *   through exec, or connected by code we do not see, stay untracked.
 * - A client's exits belong to the thread's request at connect() for its first request, to
 *   the thread's request when written for later ones (sw_conn_exit_parent); where that is not
 *   known (sw_trace_request_now), the exit gets no parent: a tagged root segment, counted
 *   (docs/architecture.md, "Which request an outbound call belongs to").
 * - dup/dup2/dup3 share the connection object; the last close ends it. fork keeps it (the child
 *   inherits the fd) but drops the parent's span handles. close_range untracks the range.
 * - Pool of SW_CONN_POOL_DEFAULT connection objects: beyond it connections stay untracked
 *   (counted in pool_exhausted).
 */
#include "common.h"

#include "config.h"
#include "conn.h"
#include "guard.h"
#include "h2_adopt.h"
#include "log.h"
#include "proto.h"
#include "proto_dbmod.h"
#include "proto_http1.h"
#include "real.h"
#include "trace.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define OUT_IOV_MAX 64 /* iovecs of one modified write (app iovecs beyond are sent later) */

/* c->fast: which fast path the fd's calls take. */
enum fast { FAST_NONE = 0, FAST_HTTP1_SERVER = 1 };

uint32_t sw_conn_max;
uint32_t *sw_conn_tab;

static struct sw_conn *pool;
static uint32_t pool_n;
static _Atomic uint64_t *used_bits; /* bit i: pool[i] taken (after the pool in its mapping) */
static uint32_t used_words;
static size_t tab_bytes, pool_bytes;
static bool any_claim; /* some module has claim() */
static bool any_sniff; /* some module other than the default has sniff() */
static struct {
    _Atomic uint64_t conns_tracked, pool_exhausted, not_http, inserted, insert_skipped, rs_given_up;
} stats;

/* TLS calls in progress on this thread (sw_conn_tls_enter): the sessions' references. */
#define TLS_NEST_MAX 4
static __thread __attribute__((tls_model("initial-exec"))) uint8_t tls_depth;
static __thread __attribute__((tls_model("initial-exec"))) sw_conn_ref tls_stack[TLS_NEST_MAX];

/* ---- pool and table ---------------------------------------------------------------------- */

int sw_conn_init(const struct sw_config *cfg, uint32_t pool_size)
{
    struct rlimit rl;
    rlim_t nfd = 1024;
    if (syscall(SYS_getrlimit, RLIMIT_NOFILE, &rl) == 0)
        nfd = rl.rlim_max > rl.rlim_cur ? rl.rlim_max : rl.rlim_cur;
    if (nfd == RLIM_INFINITY || nfd > SW_CONN_FD_CAP)
        nfd = SW_CONN_FD_CAP;
    if (nfd < 64)
        nfd = 64;
    if (pool_size == 0)
        pool_size = SW_CONN_POOL_DEFAULT;
    if (pool_size >= SW_CONN_CAND - 1)
        pool_size = SW_CONN_CAND - 2; /* slot values stay below SW_CONN_CAND (slot_is_obj) */
    tab_bytes = (size_t)nfd * sizeof(uint32_t);
    pool_bytes = (size_t)pool_size * sizeof(struct sw_conn);
    size_t objs_bytes = pool_bytes;
    pool_bytes += (size_t)(pool_size + 63) / 64 * sizeof(uint64_t);
    void *t = mmap(NULL, tab_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (t == MAP_FAILED)
        return -ENOMEM;
    void *p = mmap(NULL, pool_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        munmap(t, tab_bytes);
        return -ENOMEM;
    }
    sw_http1_init(cfg);
    any_claim = any_sniff = false;
    for (unsigned i = 0; i < sw_protos_n; i++) {
        if (sw_protos[i]->init)
            sw_protos[i]->init(cfg); /* the modules' configuration (proto.h) */
        any_claim |= sw_protos[i]->claim != NULL;
        any_sniff |= i + 1 < sw_protos_n && sw_protos[i]->sniff != NULL;
    }
    pool = p;
    pool_n = pool_size;
    used_bits = (_Atomic uint64_t *)(void *)((char *)p + objs_bytes);
    used_words = (pool_size + 63) / 64;
    sw_conn_tab = t;
    __atomic_store_n(&sw_conn_max, (uint32_t)nfd, __ATOMIC_RELEASE);
    return 0;
}

void sw_conn_shutdown(void)
{
    __atomic_store_n(&sw_conn_max, 0, __ATOMIC_RELEASE);
    if (sw_conn_tab)
        munmap(sw_conn_tab, tab_bytes);
    if (pool)
        munmap(pool, pool_bytes);
    sw_conn_tab = NULL;
    pool = NULL;
    pool_n = 0;
}

void sw_conn_get_stats(struct sw_conn_stats *o)
{
    o->conns_tracked = stats.conns_tracked;
    o->pool_exhausted = stats.pool_exhausted;
    o->not_http = stats.not_http;
    o->inserted = stats.inserted;
    o->insert_skipped = stats.insert_skipped;
    o->rs_given_up = stats.rs_given_up;
}

void sw_conn_count(enum sw_conn_counter k)
{
    switch (k) {
    case SW_CNT_NOT_PROTO:
        sw_atomic_add_relaxed(&stats.not_http, 1);
        break;
    case SW_CNT_INSERTED:
        sw_atomic_add_relaxed(&stats.inserted, 1);
        break;
    case SW_CNT_INSERT_SKIPPED:
        sw_atomic_add_relaxed(&stats.insert_skipped, 1);
        break;
    case SW_CNT_GIVEN_UP:
        sw_atomic_add_relaxed(&stats.rs_given_up, 1);
        break;
    }
}

/*
 * The spin flag is taken with the re-entrancy guard held, so a signal handler that writes to
 * the same socket on this thread goes straight to libc instead of spinning forever.
 */
static inline __attribute__((always_inline)) void lock(struct sw_conn *c)
{
    SW_GUARD_ENTER();
    while (atomic_flag_test_and_set_explicit(&c->busy, memory_order_acquire))
        __builtin_ia32_pause();
}

static inline __attribute__((always_inline)) void unlock(struct sw_conn *c)
{
    atomic_flag_clear_explicit(&c->busy, memory_order_release);
    SW_GUARD_LEAVE();
}

/*
 * Claims the lowest free slot of the used bitmap (CAS on one word; lock-free). Lowest first,
 * so a process with a few connections at a time touches the pages of a few objects only
 * (an object is ~16 KiB: handing out slots round-robin would make all 4096 resident after
 * 4096 connections), and the atfork child scans 64 words instead of 4096 objects.
 */
static int slot_claim(void)
{
    for (uint32_t w = 0; w < used_words; w++) {
        uint64_t v = sw_atomic_load_relaxed(&used_bits[w]);
        while (~v) {
            unsigned bit = (unsigned)__builtin_ctzll(~v);
            uint32_t idx = w * 64 + bit;
            if (idx >= pool_n)
                break;
            if (atomic_compare_exchange_weak_explicit(&used_bits[w], &v, v | (1ull << bit),
                                                      memory_order_acq_rel, memory_order_relaxed))
                return (int)idx;
        }
    }
    return -1;
}

static void edit_clear(struct sw_conn_edit *e)
{
    e->active = e->limit_set = e->pause = false;
    e->ins_abs = SW_CONN_NO_ABS;
    e->ins_len = e->ins_off = 0;
    e->n_rep = 0;
}

/* Takes a free pool object (no module yet); NULL when exhausted. */
static struct sw_conn *conn_alloc(enum sw_conn_role role, int family, uint32_t *idx_out)
{
    int got = slot_claim();
    if (got < 0) {
        if (sw_atomic_add_relaxed(&stats.pool_exhausted, 1) == 0)
            SW_GUARDED(SW_LOGW("conn: all %u connection objects in use: new connections are "
                               "not traced (counted)",
                               pool_n));
        return NULL;
    }
    uint32_t idx = (uint32_t)got;
    struct sw_conn *c = &pool[idx];
    atomic_store_explicit(&c->in_use, 1, memory_order_relaxed);
    /* Reset only the small state; the big buffers are written before being read. */
    atomic_store(&c->refs, 1);
    atomic_flag_clear(&c->busy);
    c->role = (uint8_t)role;
    c->dead = false;
    c->mflag[0] = c->mflag[1] = 0;
    c->out_ahead = c->out_noclock = c->tls = c->tls_fd = c->head_seen = false;
    c->tw.active = false;
    atomic_store_explicit(&c->forked, false, memory_order_relaxed);
    c->family = (uint8_t)family;
    c->proto = SW_PROTO_NONE;
    c->fast = FAST_NONE;
    c->span_head = c->span_len = c->hold_len = c->peer_len = c->hold_want = 0;
    c->sniff_len[0] = c->sniff_len[1] = 0;
    c->port = 0;
    c->claimed = c->sent = c->parsed = c->received = 0;
    c->owner = c->parent = 0;
    edit_clear(&c->edit);
    sw_atomic_add_relaxed(&stats.conns_tracked, 1);
    *idx_out = idx;
    return c;
}

/* The connection becomes module `i`'s. */
static void attach(struct sw_conn *c, unsigned i)
{
    const struct sw_proto *m = sw_protos[i];
    c->proto = (uint8_t)i;
    if (m->attach)
        m->attach(c);
    c->fast = m == &sw_proto_http1 && c->role == SW_ROLE_SERVER && !c->tls ? FAST_HTTP1_SERVER
                                                                           : FAST_NONE;
}

void sw_conn_set_proto(struct sw_conn *c, const struct sw_proto *m)
{
    for (unsigned i = 0; i < sw_protos_n; i++) {
        if (sw_protos[i] == m) {
            c->sniff_len[SW_DIR_OUT] = c->sniff_len[SW_DIR_IN] = 0;
            attach(c, i);
            return;
        }
    }
    c->dead = true;
}

/* A new connection, before any byte: a module's claim(), the default, or sniffing later. */
static void choose_at_open(struct sw_conn *c)
{
    if (SW_UNLIKELY(any_claim)) {
        for (unsigned i = 0; i < sw_protos_n; i++) {
            if (sw_protos[i]->claim && sw_protos[i]->claim(c)) {
                attach(c, i);
                return;
            }
        }
    }
    if (SW_LIKELY(!any_sniff) && c->family != AF_UNIX)
        attach(c, sw_protos_n - 1);
}

/* Appends the first `n` bytes of an iovec array to `buf` (holding *len of `cap`), as many as
 * fit. */
static void gather(char *buf, size_t cap, uint8_t *len, const struct iovec *iov, int iovcnt,
                   size_t n)
{
    size_t k = *len;
    for (int i = 0; i < iovcnt && k < cap && n; i++) {
        size_t l = iov[i].iov_len < n ? iov[i].iov_len : n;
        n -= l;
        if (l > cap - k)
            l = cap - k;
        memcpy(buf + k, iov[i].iov_base, l);
        k += l;
    }
    *len = (uint8_t)k;
}

/*
 * The module just chosen gets the bytes that went through while the modules sniffed (under
 * the lock): read ones to in(), written ones (already sent: no edit can touch them) to out()
 * or written().
 */
static void replay_sniffed(struct sw_conn *c, int64_t *t)
{
    const struct sw_proto *m = sw_protos[c->proto];
    if (c->sniff_len[SW_DIR_OUT]) {
        const char *p = c->sniff[SW_DIR_OUT];
        size_t len = c->sniff_len[SW_DIR_OUT];
        if (c->out_ahead) {
            /* Each round consumes a byte at least (these bytes went out: no edit can pause
             * them), so SW_CONN_SNIFF_BYTES rounds take them all; a module that consumes none
             * is not followed, rather than having bytes it never saw counted as parsed. */
            uint64_t abs = 0;
            for (int rounds = 0; len && !c->dead && rounds < SW_CONN_SNIFF_BYTES; rounds++) {
                size_t k = m->out(c, p, len, abs, t);
                k = k < len ? k : len;
                if (!k)
                    break;
                p += k;
                len -= k;
                abs += k;
            }
            if (len)
                c->dead = true;
            c->parsed = c->claimed;
        } else if (m->written) {
            struct iovec v = {(void *)p, len};
            m->written(c, &v, 1, len, t);
        }
    }
    if (c->sniff_len[SW_DIR_IN] && !c->dead)
        m->in(c, c->sniff[SW_DIR_IN], c->sniff_len[SW_DIR_IN], t);
    c->sniff_len[SW_DIR_OUT] = c->sniff_len[SW_DIR_IN] = 0;
}

/*
 * The first bytes of a connection nobody claimed yet (under the lock): the modules sniff the
 * bytes of direction `dir` so far (those that went through before, then the first `n` of
 * `iov`, at most SW_CONN_SNIFF_BYTES), in list order (the default too, for a Unix-domain
 * stream). A yes attaches that module; a "more" from any keeps the choice open (the caller
 * passes the bytes through and keeps them with sniff_keep()); else, or once a direction has
 * SW_CONN_SNIFF_BYTES, the default takes a TCP connection and a Unix-domain one is not
 * followed. A module chosen gets the bytes that went through before (replay_sniffed).
 */
static SW_NOINLINE void choose_by_bytes(struct sw_conn *c, enum sw_conn_dir dir,
                                        const struct iovec *iov, int iovcnt, size_t n, int64_t *t)
{
    char b[SW_CONN_SNIFF_BYTES];
    uint8_t k = c->sniff_len[dir];
    memcpy(b, c->sniff[dir], k);
    gather(b, sizeof(b), &k, iov, iovcnt, n);
    if (!k)
        return;
    bool more = false;
    unsigned last = c->family == AF_UNIX ? sw_protos_n : sw_protos_n - 1;
    for (unsigned i = 0; i < last; i++) {
        if (!sw_protos[i]->sniff)
            continue;
        enum sw_sniff v = sw_protos[i]->sniff(c, dir, b, k);
        if (v == SW_SNIFF_YES) {
            attach(c, i);
            replay_sniffed(c, t);
            return;
        }
        more |= v == SW_SNIFF_MORE;
    }
    if (more && k < sizeof(b))
        return;
    if (c->family != AF_UNIX) {
        attach(c, sw_protos_n - 1);
        replay_sniffed(c, t);
    } else {
        c->dead = true; /* no module for it: untracked */
    }
}

/* Keeps bytes that went through while the choice is open (under the lock). */
static void sniff_keep(struct sw_conn *c, enum sw_conn_dir dir, const struct iovec *iov, int iovcnt,
                       size_t n)
{
    gather(c->sniff[dir], SW_CONN_SNIFF_BYTES, &c->sniff_len[dir], iov, iovcnt, n);
}

/*
 * True when a slot value names a pool object: 1..pool_n. One compare: 0 wraps to UINT32_MAX
 * and SW_CONN_CAND to UINT32_MAX - 1, both >= pool_n (sw_conn_init keeps pool_n below them).
 */
static inline __attribute__((always_inline)) bool slot_is_obj(uint32_t v)
{
    return v - 1u < pool_n;
}

/* Inlined: on every interposed call of a tracked fd (a call costs as much as the body). */
static inline __attribute__((always_inline)) struct sw_conn *conn_of(int fd)
{
    if ((unsigned)fd >= sw_conn_max)
        return NULL;
    uint32_t v = __atomic_load_n(&sw_conn_tab[fd], __ATOMIC_ACQUIRE);
    return slot_is_obj(v) ? &pool[v - 1] : NULL;
}

static void slot_set(int fd, uint32_t v)
{
    if ((unsigned)fd < sw_conn_max)
        __atomic_store_n(&sw_conn_tab[fd], v, __ATOMIC_RELEASE);
}

static inline __attribute__((always_inline)) uint32_t slot_get(int fd)
{
    if ((unsigned)fd >= sw_conn_max)
        return 0;
    return __atomic_load_n(&sw_conn_tab[fd], __ATOMIC_ACQUIRE);
}

/* The object of a slot value read by slot_get() (conn_of() without a second load). */
static inline __attribute__((always_inline)) struct sw_conn *conn_at(uint32_t v)
{
    return slot_is_obj(v) ? &pool[v - 1] : NULL;
}

#ifdef SW_TESTING
/* The connection object of a tracked fd (unit tests look into it). */
struct sw_conn *sw_conn_test_obj(int fd)
{
    return conn_of(fd);
}
#endif

/* ---- spans --------------------------------------------------------------------------------- */

/* Deeper pipelining than we follow: the newest request goes untraced. */
SW_NOINLINE void sw_conn_span_full(struct sw_conn *c, uint64_t h)
{
    if (h) {
        if (c->role == SW_ROLE_SERVER)
            SW_GUARDED(sw_trace_entry_abort(h, "agent", "pipeline too deep", sw_trace_now_ms()));
        else
            SW_GUARDED(sw_trace_exit_error(h, "agent", "pipeline too deep", sw_trace_now_ms()));
    }
}

void sw_conn_spans_fail(struct sw_conn *c, const char *kind, const char *msg, int64_t t)
{
    while (c->span_len) {
        uint64_t h = sw_conn_span_pop(c);
        if (!h)
            continue;
        if (c->role == SW_ROLE_SERVER)
            SW_GUARDED(sw_trace_entry_abort(h, kind, msg, t));
        else
            SW_GUARDED(sw_trace_exit_error(h, kind, msg, t));
    }
}

/* The request a client connection's first exit belongs to (see sw_conn_exit_parent). */
static uint64_t conn_owner(const struct sw_conn *c)
{
    return c->owner ? c->owner : sw_trace_request_now();
}

uint64_t sw_conn_exit_parent(struct sw_conn *c)
{
    uint64_t parent = !c->head_seen ? conn_owner(c) : sw_trace_request_now();
    c->head_seen = true;
    c->parent = parent;
    return parent;
}

/*
 * A client's reply was read: the thread now works for the request of its latest exit (an
 * event loop handles that request's upstream), or, when that was not known, for none it knows.
 */
void sw_conn_reply_read(const struct sw_conn *c)
{
    if (c->parent == SW_TRACE_UNKNOWN)
        sw_trace_tls.current = 0;
    else if (c->parent)
        sw_trace_touch(c->parent);
}

static size_t fmt_addr(const struct sockaddr *sa, char *out, size_t cap)
{
    char ip[INET6_ADDRSTRLEN];
    unsigned port;
    size_t n = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const void *)sa;
        if (!inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip)))
            return 0;
        port = ntohs(s4->sin_port);
        n = strlen(ip);
        if (n + 7 > cap)
            return 0;
        memcpy(out, ip, n);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const void *)sa;
        if (!inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip)))
            return 0;
        port = ntohs(s6->sin6_port);
        size_t l = strlen(ip);
        if (l + 9 > cap)
            return 0;
        out[n++] = '[';
        memcpy(out + n, ip, l);
        n += l;
        out[n++] = ']';
    } else {
        return 0;
    }
    char digits[8];
    int d = 0;
    do {
        digits[d++] = (char)('0' + port % 10);
        port /= 10;
    } while (port && d < 6);
    out[n++] = ':';
    while (d)
        out[n++] = digits[--d];
    return n;
}

/*
 * The peer of a Unix-domain stream: "unix:" and the socket path ("unix:@name" for an abstract
 * one, "unix:" alone for an unnamed one); `len` is the address length the kernel gave.
 */
static size_t fmt_unix(const struct sockaddr *sa, socklen_t len, char *out, size_t cap)
{
    const struct sockaddr_un *su = (const void *)sa;
    size_t off = offsetof(struct sockaddr_un, sun_path);
    size_t pl = len > off ? len - off : 0;
    if (pl > sizeof(su->sun_path))
        pl = sizeof(su->sun_path);
    const char *path = su->sun_path;
    size_t n = 5;
    memcpy(out, "unix:", 5);
    if (pl && path[0] == '\0') { /* abstract: the name is every byte after the NUL */
        out[n++] = '@';
        path++;
        pl--;
    } else {
        pl = strnlen(path, pl);
    }
    if (pl > cap - n)
        pl = cap - n;
    memcpy(out + n, path, pl);
    return n + pl;
}

/* ---- edits of the outgoing stream ------------------------------------------------------------ */

bool sw_conn_out_insert(struct sw_conn *c, uint64_t abs, size_t len)
{
    struct sw_conn_edit *e = &c->edit;
    if (!len || len > SW_CONN_INSERT_MAX || abs < c->sent || abs == SW_CONN_NO_ABS ||
        (e->active && e->ins_abs != SW_CONN_NO_ABS))
        return false;
    e->ins_abs = abs;
    e->ins_len = (uint16_t)len;
    e->ins_off = 0;
    e->active = true;
    return true;
}

bool sw_conn_out_replace(struct sw_conn *c, uint64_t abs, const void *bytes, size_t len)
{
    struct sw_conn_edit *e = &c->edit;
    if (!len || len > SW_CONN_REPLACE_LEN || abs < c->sent || abs > UINT64_MAX - len ||
        e->n_rep == SW_CONN_REPLACE_MAX)
        return false;
    int at = e->n_rep;
    for (int i = 0; i < e->n_rep; i++) {
        uint64_t a = e->rep_abs[i], z = a + e->rep_len[i];
        if (abs < z && a < abs + len)
            return false; /* overlaps another one */
        if (abs < a && at == e->n_rep)
            at = i;
    }
    for (int i = e->n_rep; i > at; i--) {
        e->rep_abs[i] = e->rep_abs[i - 1];
        e->rep_len[i] = e->rep_len[i - 1];
        memcpy(e->rep[i], e->rep[i - 1], SW_CONN_REPLACE_LEN);
    }
    e->rep_abs[at] = abs;
    e->rep_len[at] = (uint8_t)len;
    memcpy(e->rep[at], bytes, len);
    e->n_rep++;
    if (!e->active) {
        e->ins_abs = SW_CONN_NO_ABS;
        e->ins_len = e->ins_off = 0;
    }
    e->active = true;
    return true;
}

/* The lowest stream offset the pending edit concerns (SW_CONN_NO_ABS: none). */
static uint64_t edit_first(const struct sw_conn *c)
{
    const struct sw_conn_edit *e = &c->edit;
    uint64_t lo = e->ins_off < e->ins_len ? e->ins_abs : SW_CONN_NO_ABS;
    if (e->n_rep && e->rep_abs[0] < lo)
        lo = e->rep_abs[0];
    return e->active ? lo : SW_CONN_NO_ABS;
}

/* The edit is over once its inserted bytes and every byte it concerns went out. */
static void edit_check_done(struct sw_conn *c)
{
    struct sw_conn_edit *e = &c->edit;
    if (!e->active)
        return;
    if (e->ins_abs != SW_CONN_NO_ABS && (e->ins_off < e->ins_len || c->sent < e->ins_abs))
        return;
    if (e->n_rep && c->sent < e->rep_abs[e->n_rep - 1] + e->rep_len[e->n_rep - 1])
        return;
    edit_clear(e);
}

/* ---- untracking ---------------------------------------------------------------------------- */

/* Drops one reference; the last one ends the connection's spans and frees the object. */
static void release_ref(struct sw_conn *c, bool closing)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    int64_t t = sw_trace_now_ms();
    lock(c);
    if (c->proto != SW_PROTO_NONE && sw_protos[c->proto]->close)
        sw_protos[c->proto]->close(c, closing, &t);
    sw_conn_spans_fail(c, "closed", "connection closed before the response completed", t);
    unlock(c);
    atomic_store_explicit(&c->in_use, 0, memory_order_release);
    uint32_t idx = (uint32_t)(c - pool);
    atomic_fetch_and_explicit(&used_bits[idx / 64], ~(1ull << (idx % 64)), memory_order_release);
}

/* Drops one fd's reference. */
static void release(int fd, struct sw_conn *c, bool closing)
{
    slot_set(fd, 0);
    release_ref(c, closing);
}

/* Stops following a connection once nothing of ours is waiting to be sent. */
static void untrack_if_dead(int fd, struct sw_conn *c)
{
    if (c->dead && !c->hold_len && !c->edit.active)
        release(fd, c, false);
}

/* ---- fd lifecycle -------------------------------------------------------------------------- */

void sw_conn_on_socket(int fd, int domain, int type)
{
    int e = errno;
    struct sw_conn *c = conn_of(fd);
    if (c) /* a stale slot: its close went around us (raw syscall) */
        release(fd, c, false);
    bool stream = (domain == AF_INET || domain == AF_INET6 || domain == AF_UNIX) &&
                  (type & 0xf) == SOCK_STREAM;
    slot_set(fd, stream ? SW_CONN_CAND : 0);
    errno = e;
}

static bool is_conn_error(int e)
{
    return e == ECONNREFUSED || e == ECONNRESET || e == EPIPE || e == ETIMEDOUT ||
           e == EHOSTUNREACH || e == ENETUNREACH || e == ECONNABORTED;
}

static const char *errno_name(int e)
{
    switch (e) {
    case ECONNREFUSED:
        return "ECONNREFUSED";
    case ECONNRESET:
        return "ECONNRESET";
    case EPIPE:
        return "EPIPE";
    case ETIMEDOUT:
        return "ETIMEDOUT";
    case EHOSTUNREACH:
        return "EHOSTUNREACH";
    case ENETUNREACH:
        return "ENETUNREACH";
    case ECONNABORTED:
        return "ECONNABORTED";
    case EPROTO:
        return "EPROTO";
    default:
        return "error";
    }
}

/* A client connection failed before any request was written: one error exit span, under the
 * request the connection was opened for (`parent`: its owner, as for its first request). */
static void connect_failed(uint64_t parent, const char *peer, size_t peer_len, int e,
                           const char *msg)
{
    struct sw_req_info ri;
    memset(&ri, 0, sizeof(ri));
    ri.method = "CONNECT";
    ri.method_len = 0;
    ri.target = "/";
    ri.target_len = 0;
    ri.peer = peer;
    ri.peer_len = peer_len;
    int64_t t = sw_trace_now_ms();
    size_t n = 0;
    char dummy[1];
    uint64_t h;
    SW_GUARDED(h = sw_trace_exit_start_in(parent, &ri, t, dummy, 0, &n));
    SW_GUARDED(sw_trace_exit_error(h, e ? errno_name(e) : "connect", msg, t));
}

/*
 * A connection error on a read or write (`err`, under the lock): the module hears it, what is
 * left of its spans ends as failed, and the connection is no longer followed.
 */
static void conn_error(struct sw_conn *c, int err, int64_t *t)
{
    if (c->proto != SW_PROTO_NONE && sw_protos[c->proto]->error)
        sw_protos[c->proto]->error(c, err, t);
    sw_conn_spans_fail(c, errno_name(err), "connection error", sw_conn_now(t));
    c->dead = true;
}

int sw_conn_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    int r = sw_libc.connect(fd, addr, len);
    int e = errno;
    if (slot_get(fd) != SW_CONN_CAND || !addr || len < sizeof(sa_family_t) ||
        (addr->sa_family != AF_INET && addr->sa_family != AF_INET6 && addr->sa_family != AF_UNIX)) {
        errno = e;
        return r;
    }
    char peer[SW_CONN_PEER_MAX];
    bool unix_ = addr->sa_family == AF_UNIX;
    size_t pl =
        unix_ ? fmt_unix(addr, len, peer, sizeof(peer)) : fmt_addr(addr, peer, sizeof(peer));
    if (r == 0 || e == EINPROGRESS || e == EINTR) {
        uint32_t idx;
        struct sw_conn *c = conn_alloc(SW_ROLE_CLIENT, addr->sa_family, &idx);
        if (c) {
            c->owner = sw_trace_request_now(); /* opened for the thread's request */
            memcpy(c->peer, peer, pl);
            c->peer_len = (uint8_t)pl;
            c->port =
                unix_ ? 0
                      : ntohs(addr->sa_family == AF_INET
                                  ? ((const struct sockaddr_in *)(const void *)addr)->sin_port
                                  : ((const struct sockaddr_in6 *)(const void *)addr)->sin6_port);
            choose_at_open(c);
            slot_set(fd, idx + 1);
        } else {
            slot_set(fd, 0);
        }
    } else if (is_conn_error(e) && !unix_) {
        /* (A Unix-domain socket no module has seen is no known service: no span.) */
        connect_failed(sw_trace_request_now(), peer, pl, e, "connect failed");
    }
    errno = e;
    return r;
}

/*
 * An accepted Unix-domain stream: tracked until its first bytes show no module wants it. Its
 * peer is the listening socket's path (the clients' own addresses are unnamed).
 */
static SW_NOINLINE void accept_unix(int fd)
{
    struct sockaddr_un su;
    socklen_t sl = sizeof(su);
    if (getsockname(fd, (struct sockaddr *)&su, &sl) != 0 || su.sun_family != AF_UNIX)
        return;
    uint32_t idx;
    struct sw_conn *c = conn_alloc(SW_ROLE_SERVER, AF_UNIX, &idx);
    if (!c)
        return;
    c->peer_len = (uint8_t)fmt_unix((struct sockaddr *)&su, sl, c->peer, sizeof(c->peer));
    choose_at_open(c);
    slot_set(fd, idx + 1);
}

int sw_conn_accept(int lfd, struct sockaddr *addr, socklen_t *len, int flags, bool four)
{
    socklen_t cap = (addr && len) ? *len : 0;
    int r = four ? sw_libc.accept4(lfd, addr, len, flags) : sw_libc.accept(lfd, addr, len);
    int e = errno;
    if (r < 0 || (unsigned)r >= sw_conn_max) {
        errno = e;
        return r;
    }
    struct sw_conn *old = conn_of(r);
    if (old)
        release(r, old, false);
    slot_set(r, 0);
    struct sockaddr_storage ss;
    const struct sockaddr *sa = NULL;
    if (cap >= sizeof(struct sockaddr_in) && *len <= cap) {
        sa = addr;
    } else {
        socklen_t sl = sizeof(ss);
        if (sw_libc.getpeername(r, (struct sockaddr *)&ss, &sl) == 0)
            sa = (struct sockaddr *)&ss;
    }
    if (sa && sa->sa_family == AF_UNIX) {
        accept_unix(r);
    } else if (sa && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6)) {
        uint32_t idx;
        struct sw_conn *c = conn_alloc(SW_ROLE_SERVER, sa->sa_family, &idx);
        if (c) {
            c->peer_len = (uint8_t)fmt_addr(sa, c->peer, sizeof(c->peer));
            if (SW_UNLIKELY(any_claim)) {
                /* The listening port, for claim(). */
                struct sockaddr_storage ls;
                socklen_t ll = sizeof(ls);
                if (getsockname(r, (struct sockaddr *)&ls, &ll) == 0)
                    c->port = ntohs(ls.ss_family == AF_INET
                                        ? ((const struct sockaddr_in *)(void *)&ls)->sin_port
                                        : ((const struct sockaddr_in6 *)(void *)&ls)->sin6_port);
            }
            choose_at_open(c);
            slot_set(r, idx + 1);
        }
    }
    errno = e;
    return r;
}

void sw_conn_on_close(int fd)
{
    int e = errno;
    struct sw_conn *c = conn_of(fd);
    if (c && c->role == SW_ROLE_CLIENT && !c->claimed && !c->span_len && !c->tls &&
        atomic_load(&c->refs) == 1 && c->family != AF_UNIX) {
        /*
         * A non-blocking connect that failed is seen by the app through poll + SO_ERROR,
         * never by us: a client closed before it wrote anything, in state CLOSE (not
         * SYN_SENT: an attempt abandoned while in progress, e.g. happy eyeballs), failed.
         */
        struct tcp_info ti;
        socklen_t tl = sizeof(ti);
        if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0 && ti.tcpi_state == TCP_CLOSE)
            connect_failed(conn_owner(c), c->peer, c->peer_len, 0,
                           "connection failed before the request");
    }
    if (c)
        release(fd, c, true);
    else
        slot_set(fd, 0);
    errno = e;
}

void sw_conn_on_shutdown(int fd, int how)
{
    if (how != SHUT_WR && how != SHUT_RDWR)
        return;
    int e = errno;
    struct sw_conn *c = conn_of(fd);
    if (c && c->proto != SW_PROTO_NONE && sw_protos[c->proto]->shutdown) {
        int64_t t = 0;
        lock(c);
        if (!c->dead)
            sw_protos[c->proto]->shutdown(c, how, &t);
        unlock(c);
    }
    errno = e;
}

void sw_conn_on_dup(int oldfd, int newfd)
{
    int e = errno;
    if (oldfd != newfd) {
        struct sw_conn *prev = conn_of(newfd);
        if (prev)
            release(newfd, prev, true);
        uint32_t v = slot_get(oldfd);
        struct sw_conn *c = conn_of(oldfd);
        if (c) {
            atomic_fetch_add(&c->refs, 1);
            slot_set(newfd, v);
        } else {
            slot_set(newfd, v == SW_CONN_CAND ? SW_CONN_CAND : 0);
        }
    }
    errno = e;
}

void sw_conn_close_range(unsigned int first, unsigned int last)
{
    int e = errno;
    if (last >= sw_conn_max)
        last = sw_conn_max ? sw_conn_max - 1 : 0;
    for (unsigned int fd = first; fd <= last && fd < sw_conn_max; fd++) {
        if (sw_conn_tab[fd])
            sw_conn_on_close((int)fd);
    }
    errno = e;
}

void sw_conn_after_fork_parent(void)
{
    for (uint32_t w = 0; pool && w < used_words; w++) {
        uint64_t v = sw_atomic_load_relaxed(&used_bits[w]);
        while (v) {
            uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(v);
            v &= v - 1;
            if (i < pool_n)
                atomic_store_explicit(&pool[i].forked, true, memory_order_relaxed);
        }
    }
}

void sw_conn_after_fork(void)
{
    /*
     * The trace module forgot the parent's spans: drop their handles, keep the framing. A spin
     * flag still set was held by a parent thread that does not exist here: clear it (nothing
     * can deadlock on it), and stop following that connection in this process, since its
     * bookkeeping may be half-updated (the child rarely uses a connection another thread of
     * the parent was using at that very moment).
     */
    for (uint32_t w = 0; pool && w < used_words; w++) {
        uint64_t v = sw_atomic_load_relaxed(&used_bits[w]);
        while (v) {
            uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(v);
            v &= v - 1;
            if (i >= pool_n)
                break;
            struct sw_conn *c = &pool[i];
            if (atomic_flag_test_and_set(&c->busy))
                c->dead = true;
            atomic_flag_clear(&c->busy);
            for (int k = 0; k < SW_CONN_SPANS; k++)
                c->spans[k] = 0;
            if (c->proto != SW_PROTO_NONE && sw_protos[c->proto]->fork_child)
                sw_protos[c->proto]->fork_child(c);
        }
    }
}

/* ---- TLS: the fd side ---------------------------------------------------------------------- */

/* True when the first bytes of a stream (`len` of them at `p`) may begin a TLS record. */
static bool tls_record(const char *p, size_t len)
{
    return len >= 1 && (uint8_t)p[0] == 0x16 && (len < 2 || (uint8_t)p[1] == 0x03) &&
           (len < 3 || (uint8_t)p[2] <= 0x04);
}

void sw_conn_not_proto(struct sw_conn *c, const char *p, size_t len)
{
    sw_conn_count(SW_CNT_NOT_PROTO);
    if (tls_record(p, len) && !c->tls && !c->span_len && !c->edit.active && !c->hold_len) {
        /* A TLS session may bind it (sw_conn_tls_open): kept, unparsed, until then. */
        c->tls = true;
        c->fast = FAST_NONE;
        c->proto = SW_PROTO_NONE;
        return;
    }
    c->dead = true;
}

/* The TLS session of the innermost TLS call on this thread (0: none, or not followed). */
static inline sw_conn_ref tls_current(void)
{
    return tls_depth ? tls_stack[(tls_depth <= TLS_NEST_MAX ? tls_depth : TLS_NEST_MAX) - 1] : 0;
}

/* The object of a session reference, NULL if it names none. */
static struct sw_conn *tls_obj(sw_conn_ref ref)
{
    if (!ref || ref > pool_n || !pool)
        return NULL;
    struct sw_conn *c = &pool[ref - 1];
    return atomic_load_explicit(&c->in_use, memory_order_relaxed) ? c : NULL;
}

/*
 * Session `s` (without an fd so far) learns its fd, whose connection object is `c` (or NULL):
 * the fd's peer, role, port and request go to the session's object, which the fd then names
 * (the fd's own object is let go: it carried only ciphertext).
 */
static void tls_bind_fd(struct sw_conn *s, int fd, struct sw_conn *c)
{
    lock(s);
    if (s->tls_fd) {
        unlock(s);
        return;
    }
    s->tls_fd = true;
    if (c && c != s) {
        memcpy(s->peer, c->peer, c->peer_len);
        s->peer_len = c->peer_len;
        s->role = c->role;
        s->port = c->port;
        s->family = c->family;
        s->owner = c->owner;
        if (!s->claimed && !s->received && !s->span_len) {
            /* No plaintext yet: the module is chosen again with what the fd tells. */
            s->proto = SW_PROTO_NONE;
            choose_at_open(s);
        }
    }
    unlock(s);
    /* The fd carries only ciphertext from now on: untracked, its calls take interpose.c's
     * one-branch path (~300 instructions less per HTTPS request of an nginx: its reads and
     * writes of records, and the reads that would block), and with KTLS their plaintext is
     * never parsed. The session's reference keeps the object until SSL_free/gnutls_deinit. */
    if (c != s) {
        slot_set(fd, 0);
        if (c)
            release_ref(c, false);
    }
}

/*
 * A socket call on a tracked fd inside a TLS call of this thread: true when it is to pass
 * untouched (the fd is the session's, or becomes it: a session without an fd takes the fd of
 * the first socket call inside one of its TLS calls, curl's memory BIO).
 */
static SW_NOINLINE bool tls_nested(int fd, struct sw_conn *c)
{
    struct sw_conn *s = tls_obj(tls_current());
    if (!s)
        return false;
    if (s == c)
        return true;
    if (s->tls_fd || c->tls_fd)
        return false; /* another connection's call, or another session's fd */
    tls_bind_fd(s, fd, c);
    return true;
}

/*
 * True when a call on a tracked fd passes untouched: its connection carries ciphertext, or the
 * call is made inside a TLS call of this thread for that session (tls_nested).
 */
static inline __attribute__((always_inline)) bool fd_passes(int fd, struct sw_conn *c)
{
    if (SW_LIKELY(!c->tls && !tls_depth))
        return false;
    return (tls_depth && tls_nested(fd, c)) || c->tls;
}

/* ---- reads --------------------------------------------------------------------------------- */

/*
 * A server read `r` > 0 bytes into `p` (one buffer): the usual read of a traced request, to
 * the HTTP/1.x module directly.
 */
static inline __attribute__((always_inline)) void server_read(int fd, struct sw_conn *c,
                                                              const char *p, size_t r)
{
    lock(c);
    if (SW_LIKELY(!c->dead))
        sw_http1_server_read(c, p, r);
    unlock(c);
    untrack_if_dead(fd, c);
}

SW_HOT void sw_conn_on_read(int fd, const struct iovec *iov, int iovcnt, ssize_t r, int err,
                            int flags)
{
    uint32_t v = slot_get(fd);
    if (v == SW_CONN_CAND) {
        slot_set(fd, 0); /* I/O on a socket we never saw connect or accept: not ours */
        return;
    }
    struct sw_conn *c = conn_at(v);
    if (!c || (flags & MSG_PEEK))
        return;
    if (fd_passes(fd, c))
        return;    /* ciphertext: the plaintext comes through sw_conn_tls_read */
    int64_t t = 0; /* see sw_conn_now */
    lock(c);
    if (c->dead) {
        /* nothing */
    } else if (r > 0 && (flags & MSG_TRUNC)) {
        c->dead = true; /* the bytes were discarded by the kernel: we cannot follow */
    } else if (r > 0) {
        if (SW_UNLIKELY(c->proto == SW_PROTO_NONE)) {
            choose_by_bytes(c, SW_DIR_IN, iov, iovcnt, (size_t)r, &t);
            if (c->proto == SW_PROTO_NONE && !c->dead) {
                sniff_keep(c, SW_DIR_IN, iov, iovcnt, (size_t)r);
                c->received += (uint64_t)r;
            }
        }
        if (!c->dead && c->proto != SW_PROTO_NONE) {
            const struct sw_proto *m = sw_protos[c->proto];
            size_t left = (size_t)r;
            for (int i = 0; i < iovcnt && left && !c->dead; i++) {
                size_t l = iov[i].iov_len < left ? iov[i].iov_len : left;
                if (l)
                    m->in(c, iov[i].iov_base, l, &t);
                left -= l;
            }
            c->received += (uint64_t)r;
        }
    } else if (r == 0) {
        size_t want = 0;
        for (int i = 0; i < iovcnt; i++)
            want += iov[i].iov_len;
        if (want && c->proto != SW_PROTO_NONE && sw_protos[c->proto]->eof)
            sw_protos[c->proto]->eof(c, &t);
    } else if (is_conn_error(err)) {
        if (c->role == SW_ROLE_CLIENT && !c->span_len && !c->claimed && err == ECONNREFUSED &&
            c->family != AF_UNIX) {
            unlock(c);
            connect_failed(conn_owner(c), c->peer, c->peer_len, err, "connect failed");
            lock(c);
        }
        conn_error(c, err, &t);
    }
    unlock(c);
    untrack_if_dead(fd, c);
}

/*
 * The end of read() and recv() on a tracked fd (`r` from the real call, `flags` recv's): what
 * sw_conn_on_read() does, with errno kept. A server's read of request bytes goes straight to
 * server_read().
 */
static inline __attribute__((always_inline)) ssize_t read_done(int fd, void *buf, size_t n,
                                                               ssize_t r, int flags)
{
    int *ep = &errno; /* one __errno_location call */
    int e = *ep;
    uint32_t v = slot_get(fd);
    if (SW_LIKELY(r > 0 && !(flags & (MSG_PEEK | MSG_TRUNC)) && slot_is_obj(v)) &&
        pool[v - 1].fast == FAST_HTTP1_SERVER && SW_LIKELY(!tls_depth)) {
        server_read(fd, &pool[v - 1], buf, (size_t)r);
    } else {
        struct iovec io = {buf, n};
        sw_conn_on_read(fd, &io, 1, r, e, flags);
    }
    *ep = e;
    return r;
}

SW_HOT_PATH ssize_t sw_conn_read(int fd, void *buf, size_t n)
{
    return read_done(fd, buf, n, sw_libc.read(fd, buf, n), 0);
}

SW_HOT_PATH ssize_t sw_conn_recv(int fd, void *buf, size_t n, int flags)
{
    return read_done(fd, buf, n, sw_libc.recv(fd, buf, n, flags), flags);
}

/* ---- writes -------------------------------------------------------------------------------- */

/* The application's call, unchanged. */
SW_HOT static ssize_t call_original(int fd, const struct sw_send_op *op)
{
    switch (op->kind) {
    case SW_SEND_WRITE:
        return sw_libc.write(fd, op->iov[0].iov_base, op->iov[0].iov_len);
    case SW_SEND_WRITEV:
        return sw_libc.writev(fd, op->iov, op->iovcnt);
    case SW_SEND_SEND:
        return sw_libc.send(fd, op->iov[0].iov_base, op->iov[0].iov_len, op->flags);
    case SW_SEND_SENDTO:
        return sw_libc.sendto(fd, op->iov[0].iov_base, op->iov[0].iov_len, op->flags, op->to,
                              op->tolen);
    default:
        return sw_libc.sendmsg(fd, op->msg, op->flags);
    }
}

/* A modified call: the same kind of real function, with our iovecs. */
static ssize_t call_vector(int fd, const struct sw_send_op *op, const struct iovec *v, int n,
                           bool first)
{
    if (op->kind == SW_SEND_WRITE || op->kind == SW_SEND_WRITEV)
        return sw_libc.writev(fd, v, n);
    struct msghdr m;
    memset(&m, 0, sizeof(m));
    m.msg_iov = (struct iovec *)v;
    m.msg_iovlen = (size_t)n;
    if (op->kind == SW_SEND_SENDTO) {
        m.msg_name = (void *)op->to;
        m.msg_namelen = op->tolen;
    } else if (op->kind == SW_SEND_SENDMSG) {
        m.msg_name = op->msg->msg_name;
        m.msg_namelen = op->msg->msg_namelen;
        if (first) { /* ancillary data goes with the first bytes only */
            m.msg_control = op->msg->msg_control;
            m.msg_controllen = op->msg->msg_controllen;
        }
    }
    return sw_libc.sendmsg(fd, &m, op->flags);
}

/* The application's bytes of a write call. */
static inline const struct iovec *op_iov(const struct sw_send_op *op, int *cnt)
{
    if (op->kind == SW_SEND_SENDMSG) {
        *cnt = (int)op->msg->msg_iovlen;
        return op->msg->msg_iov;
    }
    *cnt = op->iovcnt;
    return op->iov;
}

/*
 * Gives the bytes of this call that were not parsed yet to the module (before the kernel gets
 * them); stops where the module pauses (the write is then cut there while the edit is pending).
 */
static void parse_ahead(struct sw_conn *c, const struct iovec *iov, int iovcnt, int64_t *t)
{
    const struct sw_proto *m = sw_protos[c->proto];
    uint64_t pos = c->claimed;
    for (int i = 0; i < iovcnt && !c->dead && !c->edit.limit_set && c->proto != SW_PROTO_NONE;
         i++) {
        size_t len = iov[i].iov_len;
        int rounds = 0;
        while (pos + len > c->parsed && !c->dead && c->proto != SW_PROTO_NONE && rounds++ < 64) {
            size_t skip = c->parsed > pos ? (size_t)(c->parsed - pos) : 0;
            size_t rest = len - skip;
            c->hold_want = 0;
            c->edit.pause = false;
            size_t k = m->out(c, (const char *)iov[i].iov_base + skip, rest, pos + skip, t);
            if (k > rest)
                k = rest;
            c->parsed = pos + skip + k;
            if (c->edit.pause || k < rest) {
                c->edit.pause = false;
                if (c->edit.active) {
                    c->edit.limit = c->parsed;
                    c->edit.limit_set = true;
                    return;
                }
                if (!k)
                    c->dead = true; /* a module that neither consumes nor waits: not followed */
            }
        }
        pos += len;
    }
}

enum seg_kind { SEG_HOLD, SEG_INJ, SEG_APP };

struct out_vec {
    struct iovec v[OUT_IOV_MAX];
    uint8_t kind[OUT_IOV_MAX];
    int n;
    bool full;
};

static void out_add(struct out_vec *o, const void *p, size_t len, enum seg_kind k)
{
    if (!len)
        return;
    if (o->n == OUT_IOV_MAX) {
        o->full = true;
        return;
    }
    o->v[o->n].iov_base = (void *)p;
    o->v[o->n].iov_len = len;
    o->kind[o->n] = (uint8_t)k;
    o->n++;
}

/*
 * Adds app (or held) bytes at absolute offset `abs`, with the inserted bytes spliced in before
 * ins_abs and the replaced ranges swapped for the edit's bytes (same length, so counts are
 * kept). At one offset the insertion goes before the replacement.
 */
SW_HOT static void out_app(struct out_vec *o, struct sw_conn *c, const char *p, size_t len,
                           uint64_t abs, enum seg_kind k, bool *inj_done)
{
    const struct sw_conn_edit *e = &c->edit;
    while (len) {
        if (!*inj_done && e->ins_abs == abs) {
            out_add(o, c->ins + e->ins_off, (size_t)(e->ins_len - e->ins_off), SEG_INJ);
            *inj_done = true;
        }
        uint64_t next = abs + len;
        bool replaced = false;
        for (int i = 0; i < e->n_rep && e->active; i++) {
            uint64_t a = e->rep_abs[i], z = a + e->rep_len[i];
            if (a <= abs && abs < z) { /* inside a replaced range */
                size_t n = (size_t)(z - abs) < len ? (size_t)(z - abs) : len;
                out_add(o, e->rep[i] + (abs - a), n, k);
                p += n;
                len -= n;
                abs += n;
                replaced = true;
                break;
            }
            if (a > abs && a < next)
                next = a;
        }
        if (replaced)
            continue;
        if (!*inj_done && e->ins_abs > abs && e->ins_abs < next)
            next = e->ins_abs;
        size_t pre = (size_t)(next - abs);
        out_add(o, p, pre, k);
        p += pre;
        len -= pre;
        abs += pre;
    }
}

/*
 * The sending half of a write that needs changes: held bytes, inserted bytes, replaced bytes
 * or a bound. `m` app bytes of the call are offered (the call's first m bytes). Returns the
 * count of app bytes the kernel took (> 0; with m == 0: 0 once our pending bytes are all out),
 * or -1 with errno when none could be moved.
 */
SW_HOT static ssize_t send_modified(int fd, struct sw_conn *c, const struct sw_send_op *op,
                                    size_t m)
{
    bool first = true;
    int iovcnt;
    const struct iovec *iov = op_iov(op, &iovcnt);
    for (int round = 0; round < 64; round++) {
        struct out_vec o;
        o.n = 0;
        o.full = false;
        bool inj_done = !c->edit.active || c->edit.ins_off >= c->edit.ins_len;
        out_app(&o, c, c->hold, c->hold_len, c->sent, SEG_HOLD, &inj_done);
        uint64_t abs = c->claimed;
        size_t left = m;
        for (int i = 0; i < iovcnt && left; i++) {
            size_t l = iov[i].iov_len < left ? iov[i].iov_len : left;
            out_app(&o, c, iov[i].iov_base, l, abs, SEG_APP, &inj_done);
            abs += l;
            left -= l;
        }
        if (!inj_done && c->edit.ins_abs == abs)
            out_add(&o, c->ins + c->edit.ins_off, (size_t)(c->edit.ins_len - c->edit.ins_off),
                    SEG_INJ);
        if (o.n == 0)
            return 0;
        ssize_t r = call_vector(fd, op, o.v, o.n, first);
        if (r < 0)
            return -1;
        if (r == 0) {
            errno = EAGAIN;
            return -1;
        }
        first = false;
        size_t took = (size_t)r, app = 0;
        lock(c);
        for (int i = 0; i < o.n && took; i++) {
            size_t l = o.v[i].iov_len < took ? o.v[i].iov_len : took;
            took -= l;
            if (o.kind[i] == SEG_HOLD) {
                memmove(c->hold, c->hold + l, c->hold_len - l);
                c->hold_len = (uint8_t)(c->hold_len - l);
                c->sent += l;
            } else if (o.kind[i] == SEG_INJ) {
                c->edit.ins_off = (uint16_t)(c->edit.ins_off + l);
            } else {
                app += l;
                c->sent += l;
            }
        }
        edit_check_done(c);
        bool flushed = !c->hold_len && !(c->edit.active && c->edit.ins_off < c->edit.ins_len &&
                                         c->edit.ins_abs <= c->sent);
        unlock(c);
        if (app > 0 || (m == 0 && flushed))
            return (ssize_t)app;
    }
    errno = EAGAIN;
    return -1;
}

/* Copies the last n bytes of the first `len` bytes of an iovec array to `out`. */
static void iov_tail(const struct iovec *iov, int iovcnt, size_t len, size_t n, char *out)
{
    size_t pos = 0, from = len - n;
    for (int i = 0; i < iovcnt && pos < len; i++) {
        const char *b = iov[i].iov_base;
        for (size_t j = 0; j < iov[i].iov_len && pos < len; j++, pos++)
            if (pos >= from)
                out[pos - from] = b[j];
    }
}

/* A write of a connection whose module parses written bytes ahead of the kernel. */
static ssize_t send_ahead(int fd, struct sw_conn *c, const struct sw_send_op *op)
{
    int iovcnt;
    const struct iovec *iov = op_iov(op, &iovcnt);
    size_t n = 0;
    for (int i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len > SSIZE_MAX - n)
            return call_original(fd, op); /* the kernel answers EINVAL */
        n += iov[i].iov_len;
    }
    if (n == 0)
        return call_original(fd, op);
    int64_t t = sw_trace_now_ms();
    lock(c);
    if (!c->dead)
        parse_ahead(c, iov, iovcnt, &t);
    /* The module may hold back the call's last bytes (see proto.h). */
    size_t hk = c->hold_want;
    bool want_hold = hk && !c->dead && hk <= n && c->parsed == c->claimed + n &&
                     c->hold_len + hk <= SW_CONN_HOLD_MAX;
    size_t m = n - (want_hold ? hk : 0);
    if (c->edit.limit_set && c->edit.limit - c->claimed < m)
        m = (size_t)(c->edit.limit - c->claimed);
    uint64_t ef = edit_first(c);
    bool modify =
        want_hold || c->hold_len || m < n || (ef != SW_CONN_NO_ABS && ef <= c->claimed + m);
    unlock(c);
    ssize_t r;
    int e;
    if (!modify) {
        r = call_original(fd, op);
        e = errno;
        if (r > 0) {
            lock(c);
            c->claimed += (uint64_t)r;
            c->sent += (uint64_t)r;
            unlock(c);
        }
    } else {
        r = send_modified(fd, c, op, m);
        e = errno;
        lock(c);
        if (r >= 0) {
            if (want_hold && m == n - hk && (size_t)r == m && c->sent == c->claimed + m) {
                iov_tail(iov, iovcnt, n, hk, c->hold + c->hold_len);
                c->hold_len = (uint8_t)(c->hold_len + hk);
                r += (ssize_t)hk;
            }
            c->claimed += (uint64_t)r;
        }
        unlock(c);
    }
    if (r < 0 && is_conn_error(e)) {
        lock(c);
        if (c->role == SW_ROLE_CLIENT && !c->span_len && !c->claimed && e != EPIPE &&
            c->family != AF_UNIX) {
            unlock(c);
            connect_failed(conn_owner(c), c->peer, c->peer_len, e, "connect failed");
            lock(c);
        }
        conn_error(c, e, &t);
        unlock(c);
    }
    untrack_if_dead(fd, c);
    errno = e;
    return r;
}

/*
 * The clock for a write without out_ahead, read BEFORE the write: a reply's span ends when its
 * last bytes are handed to the kernel, so it can never end after the peer's span (which ends
 * when it has read them), even if this thread is preempted right after the write. Not when no
 * span can end on it (out_noclock). Read outside the lock: a stale value only moves the read
 * after the write (sw_conn_now), or reads it for nothing.
 */
static inline __attribute__((always_inline)) int64_t out_clock(const struct sw_conn *c)
{
    if (SW_LIKELY(!__atomic_load_n(&c->out_noclock, __ATOMIC_RELAXED)))
        return sw_trace_now_ms();
    return 0;
}

/* A write that moved no byte, or on a dead connection (`e`: the call's errno). */
static SW_NOINLINE void not_written(int fd, struct sw_conn *c, ssize_t r, int e)
{
    if (!c->dead && r < 0 && is_conn_error(e)) {
        int64_t t = sw_trace_now_ms();
        lock(c);
        conn_error(c, e, &t);
        unlock(c);
    }
    untrack_if_dead(fd, c);
}

/*
 * A write while nobody claimed the connection yet: its bytes decide (choose_by_bytes); while
 * the choice stays open the call passes through unchanged and its bytes are kept.
 */
static SW_NOINLINE ssize_t send_unclaimed(int fd, struct sw_conn *c, const struct sw_send_op *op,
                                          bool *decided)
{
    int iovcnt;
    const struct iovec *iov = op_iov(op, &iovcnt);
    size_t n = 0;
    for (int i = 0; i < iovcnt && n < SW_CONN_SNIFF_BYTES; i++)
        n += iov[i].iov_len;
    int64_t t = 0;
    lock(c);
    if (!c->dead && c->proto == SW_PROTO_NONE)
        choose_by_bytes(c, SW_DIR_OUT, iov, iovcnt, n, &t);
    *decided = c->proto != SW_PROTO_NONE && !c->dead;
    unlock(c);
    if (*decided)
        return 0;
    ssize_t r = call_original(fd, op);
    int e = errno;
    if (r > 0) {
        lock(c);
        if (!c->dead && c->proto == SW_PROTO_NONE)
            sniff_keep(c, SW_DIR_OUT, iov, iovcnt, (size_t)r);
        c->claimed += (uint64_t)r;
        c->sent += (uint64_t)r;
        c->parsed = c->claimed;
        unlock(c);
    }
    untrack_if_dead(fd, c);
    errno = e;
    return r;
}

SW_HOT ssize_t sw_conn_send(int fd, const struct sw_send_op *op)
{
    uint32_t v = slot_get(fd);
    if (v == SW_CONN_CAND)
        slot_set(fd, 0);
    struct sw_conn *c = conn_at(v); /* NULL for SW_CONN_CAND */
    if (!c)
        return call_original(fd, op);
    if (fd_passes(fd, c))
        return call_original(fd, op); /* ciphertext (or KTLS's plaintext of a TLS call) */
    if (SW_UNLIKELY(c->proto == SW_PROTO_NONE)) {
        bool decided;
        ssize_t r = send_unclaimed(fd, c, op, &decided);
        if (!decided)
            return r;
    }
    if (c->out_ahead)
        return send_ahead(fd, c, op);
    int64_t t = out_clock(c);
    ssize_t r = call_original(fd, op);
    int e = errno;
    if (r > 0 && !c->dead) {
        int iovcnt;
        const struct iovec *iov = op_iov(op, &iovcnt);
        lock(c);
        if (!c->dead)
            sw_protos[c->proto]->written(c, iov, iovcnt, (size_t)r, &t);
        unlock(c);
        untrack_if_dead(fd, c);
    } else {
        not_written(fd, c, r, e);
    }
    errno = e;
    return r;
}

/*
 * A server wrote `r` > 0 bytes from one buffer `p` (write, or writev whose first iovec holds
 * them): to the HTTP/1.x module directly.
 */
static inline __attribute__((always_inline)) void server_wrote(struct sw_conn *c, const char *p,
                                                               size_t r, int64_t t)
{
    lock(c);
    sw_http1_server_wrote(c, p, r, t);
    unlock(c);
}

/*
 * write() on a tracked fd: sw_conn_send() for SW_SEND_WRITE, without the sw_send_op and its
 * dispatch for an HTTP/1.x server (the usual write of a response).
 */
SW_HOT_PATH ssize_t sw_conn_write(int fd, const void *buf, size_t n)
{
    uint32_t v = slot_get(fd);
    if (SW_UNLIKELY(!slot_is_obj(v) || pool[v - 1].fast != FAST_HTTP1_SERVER || tls_depth)) {
        struct iovec io = {(void *)buf, n};
        struct sw_send_op op = {.kind = SW_SEND_WRITE, .iov = &io, .iovcnt = 1};
        return sw_conn_send(fd, &op);
    }
    struct sw_conn *c = &pool[v - 1];
    int64_t t = out_clock(c); /* before the call: see out_clock */
    ssize_t r = sw_libc.write(fd, buf, n);
    int *ep = &errno; /* one __errno_location call */
    int e = *ep;
    if (SW_LIKELY(r > 0 && !c->dead)) {
        server_wrote(c, buf, (size_t)r, t);
        untrack_if_dead(fd, c);
    } else {
        not_written(fd, c, r, e);
    }
    *ep = e;
    return r;
}

/* writev() on a tracked fd: sw_conn_send() for SW_SEND_WRITEV, shorter for a server. */
SW_HOT_PATH ssize_t sw_conn_writev(int fd, const struct iovec *iov, int cnt)
{
    uint32_t v = slot_get(fd);
    if (SW_UNLIKELY(!slot_is_obj(v) || pool[v - 1].fast != FAST_HTTP1_SERVER || tls_depth)) {
        struct sw_send_op op = {.kind = SW_SEND_WRITEV, .iov = iov, .iovcnt = cnt};
        return sw_conn_send(fd, &op);
    }
    struct sw_conn *c = &pool[v - 1];
    int64_t t = out_clock(c); /* before the call: see out_clock */
    ssize_t r = sw_libc.writev(fd, iov, cnt);
    int *ep = &errno; /* one __errno_location call */
    int e = *ep;
    if (SW_LIKELY(r > 0 && !c->dead)) {
        /* r > 0: iov[0] exists. Usually every byte written is in it (a head, or all). */
        if (SW_LIKELY((size_t)r <= iov[0].iov_len)) {
            server_wrote(c, iov[0].iov_base, (size_t)r, t);
        } else {
            lock(c);
            sw_proto_http1.written(c, iov, cnt, (size_t)r, &t);
            unlock(c);
        }
        untrack_if_dead(fd, c);
    } else {
        not_written(fd, c, r, e);
    }
    *ep = e;
    return r;
}

/* An edit that cannot be carried out (the application sends a file where it was planned). */
static void edit_give_up(struct sw_conn *c)
{
    edit_clear(&c->edit);
    c->dead = true;
}

SW_HOT_PATH ssize_t sw_conn_sendfile(int out_fd, int in_fd, off64_t *off, size_t n, bool is64)
{
#define REAL_SENDFILE()                                                                            \
    (is64 ? sw_libc.sendfile64(out_fd, in_fd, off, n)                                              \
          : sw_libc.sendfile(out_fd, in_fd, (off_t *)off, n))
    uint32_t v = slot_get(out_fd);
    if (v == SW_CONN_CAND)
        slot_set(out_fd, 0);
    struct sw_conn *c = conn_at(v); /* NULL for SW_CONN_CAND */
    if (!c || fd_passes(out_fd, c))
        return REAL_SENDFILE();
    if (SW_UNLIKELY(c->proto == SW_PROTO_NONE))
        c->dead = true; /* its first bytes come from a file: nobody can sniff them */
    if (c->out_ahead) {
        /* Our pending bytes (held bytes, inserted ones) must precede the file's. */
        if (c->edit.active && c->edit.ins_abs != SW_CONN_NO_ABS && c->edit.ins_abs > c->sent)
            edit_give_up(c); /* the app sends a file where we expected the rest of its head */
        if (c->hold_len || (c->edit.active && c->edit.ins_off < c->edit.ins_len)) {
            struct sw_send_op op = {.kind = SW_SEND_WRITEV, .iov = NULL, .iovcnt = 0};
            if (send_modified(out_fd, c, &op, 0) < 0)
                return -1; /* errno of the real call (EAGAIN: the app retries) */
        }
        if (c->edit.active) /* replaced bytes not sent yet: the stream is not what we parsed */
            edit_give_up(c);
        if (c->parsed != c->claimed)
            c->dead = true; /* the app did not re-send what we parsed ahead */
    }
    int64_t t = out_clock(c); /* before the call, as for writes (see out_clock) */
    ssize_t r = REAL_SENDFILE();
    int *ep = &errno; /* one __errno_location call */
    int e = *ep;
    if (r > 0) {
        lock(c);
        if (!c->dead) {
            const struct sw_proto *m = sw_protos[c->proto];
            if (m->unseen)
                m->unseen(c, (uint64_t)r, &t);
            else
                c->dead = true;
            if (c->out_ahead)
                c->parsed += (uint64_t)r;
        }
        if (c->out_ahead) {
            c->claimed += (uint64_t)r;
            c->sent += (uint64_t)r;
        }
        unlock(c);
    }
    untrack_if_dead(out_fd, c);
    *ep = e;
    return r;
#undef REAL_SENDFILE
}

/* ---- TLS sessions: the plaintext ------------------------------------------------------------ */

sw_conn_ref sw_conn_tls_open(int fd, int role)
{
    if (!SW_CONN_ON())
        return 0;
    int e = errno;
    struct sw_conn *c;
    uint32_t idx;
    if (fd >= 0) {
        c = conn_of(fd);
        if (!c) {
            errno = e;
            return 0; /* not a connection we follow */
        }
        lock(c);
        atomic_fetch_add(&c->refs, 1);
        if (!c->tls_fd) {
            bool fresh = !c->tls; /* plaintext before (STARTTLS, SSLRequest): keep its module */
            c->tls = c->tls_fd = true;
            c->fast = FAST_NONE;
            if (c->proto == SW_PROTO_NONE || !(c->claimed || c->received) || !fresh) {
                /* No plaintext module yet (or the fd carried only ciphertext): chosen anew. */
                c->proto = SW_PROTO_NONE;
                c->dead = false;
                choose_at_open(c);
            }
            if (c->edit.active || c->hold_len)
                c->dead = true; /* our bytes of the plaintext before cannot go out now */
            c->claimed = c->sent = c->parsed = c->received = 0;
            c->sniff_len[0] = c->sniff_len[1] = 0;
        }
        bool bound_now = c->tls_fd && conn_of(fd) == c;
        unlock(c);
        idx = (uint32_t)(c - pool);
        if (bound_now) {
            /* The fd carries only ciphertext: untracked (see tls_bind_fd); its reference goes,
             * the session's (taken above) keeps the object. */
            slot_set(fd, 0);
            release_ref(c, false);
        }
    } else {
        c = conn_alloc(role == SW_ROLE_SERVER ? SW_ROLE_SERVER : SW_ROLE_CLIENT, 0, &idx);
        if (!c) {
            errno = e;
            return 0;
        }
        c->tls = true;
        c->owner = sw_trace_request_now(); /* until the fd tells the request of its connect */
        lock(c);
        choose_at_open(c);
        unlock(c);
    }
    errno = e;
    return idx + 1;
}

void sw_conn_tls_set_fd(sw_conn_ref ref, int fd)
{
    struct sw_conn *s = tls_obj(ref);
    if (!s || s->tls_fd || fd < 0)
        return;
    int e = errno;
    struct sw_conn *c = conn_of(fd);
    if (c && c != s && c->tls_fd) {
        errno = e;
        return; /* the fd is another session's */
    }
    tls_bind_fd(s, fd, c);
    errno = e;
}

void sw_conn_tls_enter(sw_conn_ref ref)
{
    if (tls_depth < TLS_NEST_MAX)
        tls_stack[tls_depth] = ref;
    if (tls_depth < UINT8_MAX)
        tls_depth++;
}

void sw_conn_tls_leave(void)
{
    if (tls_depth)
        tls_depth--;
}

void sw_conn_tls_read(sw_conn_ref ref, const void *buf, long r, int err)
{
    struct sw_conn *c = tls_obj(ref);
    if (!c)
        return;
    int e = errno;
    int64_t t = 0;
    lock(c);
    if (c->dead) {
        /* nothing */
    } else if (r > 0) {
        struct iovec v = {(void *)buf, (size_t)r};
        if (SW_UNLIKELY(c->proto == SW_PROTO_NONE)) {
            choose_by_bytes(c, SW_DIR_IN, &v, 1, (size_t)r, &t);
            if (c->proto == SW_PROTO_NONE && !c->dead)
                sniff_keep(c, SW_DIR_IN, &v, 1, (size_t)r);
        }
        if (!c->dead && c->proto != SW_PROTO_NONE) {
            if (c->role == SW_ROLE_SERVER && sw_protos[c->proto] == &sw_proto_http1)
                sw_http1_server_read(c, buf, (size_t)r); /* as a socket's server_read() */
            else
                sw_protos[c->proto]->in(c, buf, (size_t)r, &t);
        }
        c->received += (uint64_t)r;
    } else if (r == 0) {
        if (c->proto != SW_PROTO_NONE && sw_protos[c->proto]->eof)
            sw_protos[c->proto]->eof(c, &t);
    } else if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR) {
        conn_error(c, err ? err : EPROTO, &t);
    }
    unlock(c);
    errno = e;
}

bool sw_conn_tls_adopt_h2(sw_conn_ref ref)
{
    struct sw_conn *c = tls_obj(ref);
    if (!c || !sw_h2_adopt)
        return false;
    int e = errno;
    bool ok;
    lock(c);
    if (c->dead)
        ok = false;
    else if (c->proto != SW_PROTO_NONE && (c->claimed || c->received)) /* its preface was seen */
        ok = strcmp(sw_protos[c->proto]->name, "h2") == 0;
    else
        ok = sw_h2_adopt(c, c->role == SW_ROLE_SERVER);
    unlock(c);
    errno = e;
    return ok;
}

void sw_conn_tls_close(sw_conn_ref ref)
{
    struct sw_conn *c = tls_obj(ref);
    if (!c)
        return;
    int e = errno;
    release_ref(c, true);
    errno = e;
}

/* Counts `r` bytes fn took of the piece (kind `k`) it was given (under the lock). */
static void tls_took(struct sw_conn *c, enum seg_kind k, size_t r)
{
    if (k == SEG_HOLD) {
        memmove(c->hold, c->hold + r, c->hold_len - r);
        c->hold_len = (uint8_t)(c->hold_len - r);
        c->sent += r;
    } else if (k == SEG_INJ) {
        c->edit.ins_off = (uint16_t)(c->edit.ins_off + r);
    } else {
        c->tw.done += r;
        c->sent += r;
    }
    edit_check_done(c);
}

/* The application's call is over with `n` of its bytes taken (under the lock). */
static void tls_call_done(struct sw_conn *c, size_t n)
{
    c->claimed += n;
    c->tw.active = false;
}

/*
 * The call's fn failed with `r` (under the lock; returns with it released): in partial-write
 * mode the count of the application's bytes that went, if any; else r, and the application
 * repeats the call: the same piece goes again.
 */
static long tls_failed(struct sw_conn *c, int flags, long r)
{
    if ((flags & SW_CONN_TLS_PARTIAL) && c->tw.done > 0) {
        size_t n = c->tw.done;
        tls_call_done(c, n);
        unlock(c);
        return (long)n;
    }
    unlock(c);
    return r;
}

/*
 * A TLS write of a connection whose module parses written bytes ahead (or with bytes of ours
 * pending): called under the lock, returns with it released. Each call of fn gets one
 * contiguous piece: the application's bytes up to the next edit, the inserted bytes, replaced
 * bytes, held bytes. A failed fn leaves the state as it was, so the repeated call computes the
 * same piece again: ours at the same address (in the object), the application's at the same
 * place of its buffer.
 */
static long tls_write_ahead(struct sw_conn *c, const char *buf, size_t len, int flags,
                            sw_conn_tls_write_fn fn, void *ctx, int64_t *t)
{
    bool resume = !buf && !len; /* GnuTLS: NULL/0 repeats the interrupted call */
    if (c->tw.active && !resume && len != c->tw.len) {
        /* Not the repeat the library demands: our pending bytes are given up. */
        edit_clear(&c->edit);
        c->hold_len = 0;
        c->tw.active = false;
        c->dead = true;
        unlock(c);
        return fn(ctx, buf, len);
    }
    if (!c->tw.active) {
        if (!len || !buf || ((flags & SW_CONN_TLS_NO_EDIT) && !c->hold_len && !c->edit.active)) {
            if (len && buf && (flags & SW_CONN_TLS_NO_EDIT))
                c->dead = true; /* early data is never edited: the stream is not followed */
            unlock(c);
            long r = fn(ctx, buf, len);
            if (r > 0) {
                lock(c);
                c->claimed += (uint64_t)r;
                c->sent += (uint64_t)r;
                c->parsed = c->claimed;
                unlock(c);
            }
            return r;
        }
        c->tw = (__typeof__(c->tw)){.buf = buf, .len = len, .m = len, .active = true};
        if (flags & SW_CONN_TLS_NO_EDIT)
            c->dead = true; /* early data is never edited: the stream is not followed */
    }
    const char *base = buf ? buf : c->tw.buf; /* pointers only: read by fn, never by us */
    /*
     * A round either gives fn a piece (which fails, ending the call, or takes at least a byte:
     * those rounds are bounded by the bytes of the call, ours included, however few fn takes
     * each time) or, idle, lifts an edit's bound; only the idle ones are counted. The loop
     * never ends by the count with bytes unsent that the call would then claim as written.
     */
    bool all = false;
    for (int idle = 0; idle < 1024;) {
        if (buf && !c->edit.limit_set && !c->dead && c->proto != SW_PROTO_NONE &&
            c->parsed < c->claimed + len) {
            /* The call's bytes not parsed yet (all at first; after an edit that paused the
             * parsing, the rest): parsed before they go, and the last ones may be held. */
            struct iovec v = {(void *)buf, len};
            parse_ahead(c, &v, 1, t);
            size_t hk = c->hold_want;
            if (hk && !c->dead && hk <= len - c->tw.done && c->parsed == c->claimed + len &&
                c->hold_len + hk <= SW_CONN_HOLD_MAX) {
                c->tw.m = len - hk;
                c->tw.hold = (uint8_t)hk;
            }
        }
        size_t m = c->tw.m;
        if (c->edit.limit_set && c->edit.limit - c->claimed < m)
            m = (size_t)(c->edit.limit - c->claimed);
        struct out_vec o;
        o.n = 0;
        o.full = false;
        bool inj_done = !c->edit.active || c->edit.ins_off >= c->edit.ins_len;
        out_app(&o, c, c->hold, c->hold_len, c->sent, SEG_HOLD, &inj_done);
        if (m > c->tw.done)
            out_app(&o, c, base + c->tw.done, m - c->tw.done, c->claimed + c->tw.done, SEG_APP,
                    &inj_done);
        if (!inj_done && c->edit.ins_abs == c->claimed + m)
            out_add(&o, c->ins + c->edit.ins_off, (size_t)(c->edit.ins_len - c->edit.ins_off),
                    SEG_INJ);
        if (o.n == 0) {
            if (m < c->tw.m) {
                c->edit.limit_set = false; /* nothing of ours left: the rest goes on */
                idle++;
                continue;
            }
            all = true;
            break;
        }
        enum seg_kind k = (enum seg_kind)o.kind[0];
        size_t plen = o.v[0].iov_len;
        const void *pp = resume ? NULL : o.v[0].iov_base;
        unlock(c);
        long r = fn(ctx, pp, resume ? 0 : plen);
        lock(c);
        if (r <= 0)
            return tls_failed(c, flags, r);
        tls_took(c, k, (size_t)r < plen ? (size_t)r : plen);
        if (resume) {
            /* The library had the interrupted piece; the application's bytes after it are
             * not at hand: what went of them is the count. */
            size_t n = c->tw.done;
            tls_call_done(c, n);
            unlock(c);
            return (long)n;
        }
    }
    if (SW_UNLIKELY(!all)) {
        /* Never seen: as a failed fn, the bytes not sent are not claimed (the repeat goes on). */
        errno = EAGAIN;
        return tls_failed(c, flags, -1);
    }
    /* Every byte of the call went (but those held back). */
    size_t hk = c->tw.hold;
    if (hk && c->sent == c->claimed + c->tw.m) {
        memcpy(c->hold + c->hold_len, buf + c->tw.m, hk);
        c->hold_len = (uint8_t)(c->hold_len + hk);
    }
    tls_call_done(c, c->tw.m + hk);
    unlock(c);
    return (long)len;
}

long sw_conn_tls_write(sw_conn_ref ref, const void *buf, size_t len, int flags,
                       sw_conn_tls_write_fn fn, void *ctx)
{
    struct sw_conn *c = tls_obj(ref);
    long r;
    if (!c) {
        sw_conn_tls_enter(ref);
        r = fn(ctx, buf, len);
        sw_conn_tls_leave();
        return r;
    }
    /* A session opened on its fd needs no marker: that fd is untracked (tls_bind_fd), so the
     * socket calls inside pass untouched; one without names its fd by them (tls_nested). */
    bool mark = !c->tls_fd;
    if (mark)
        sw_conn_tls_enter(ref);
    int e0 = errno;
    int64_t t = 0;
    lock(c);
    if (SW_UNLIKELY(c->proto == SW_PROTO_NONE) && !c->dead && buf && len && !c->tw.active) {
        struct iovec v = {(void *)buf, len};
        choose_by_bytes(c, SW_DIR_OUT, &v, 1, len < SW_CONN_SNIFF_BYTES ? len : SW_CONN_SNIFF_BYTES,
                        &t);
        if (c->proto == SW_PROTO_NONE && !c->dead) {
            unlock(c);
            r = fn(ctx, buf, len);
            int e = errno;
            if (r > 0) {
                lock(c);
                struct iovec w = {(void *)buf, (size_t)r};
                if (c->proto == SW_PROTO_NONE)
                    sniff_keep(c, SW_DIR_OUT, &w, 1, (size_t)r);
                c->claimed += (uint64_t)r;
                c->sent += (uint64_t)r;
                c->parsed = c->claimed;
                unlock(c);
            }
            if (mark)
                sw_conn_tls_leave();
            errno = e;
            return r;
        }
    }
    if (c->out_ahead || c->tw.active || c->hold_len || c->edit.active) {
        t = sw_trace_now_ms();
        r = tls_write_ahead(c, buf, len, flags, fn, ctx, &t);
        if (r > 0)
            errno = e0; /* the trace module's errno is not the application's */
    } else {
        /* The module follows what was taken, after the call (a server's response). */
        bool follow = !c->dead && c->proto != SW_PROTO_NONE;
        unlock(c);
        t = follow ? out_clock(c) : 0;
        r = fn(ctx, buf, len);
        int e = errno;
        if (r > 0 && follow) {
            lock(c);
            if (!buf) {
                c->dead = true; /* GnuTLS's NULL/0 resume: the bytes that went are not at hand */
            } else if (c->role == SW_ROLE_SERVER && sw_protos[c->proto] == &sw_proto_http1) {
                if (!c->dead)
                    sw_http1_server_wrote(c, buf, (size_t)r, t); /* as a socket's server_wrote() */
            } else if (!c->dead) {
                struct iovec v = {(void *)buf, (size_t)r};
                sw_protos[c->proto]->written(c, &v, 1, (size_t)r, &t);
            }
            c->claimed += (uint64_t)r;
            c->sent += (uint64_t)r;
            unlock(c);
        }
        errno = e;
    }
    if (mark)
        sw_conn_tls_leave();
    return r;
}
