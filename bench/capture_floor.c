/*
 * capture_floor.c - an experiment, not an agent: what the application thread would still pay
 * per request if the agent only found each HTTP head's end and copied the head into its ring,
 * and swagent-reporter did the parsing and built the spans (a "capture" design). Measured
 * against libswagent.so inside nginx by `bench/insitu.sh --lib=<this library>`; the result and
 * what it leaves out are in bench/HISTORY.md ("capture floor").
 *
 * Per recv / read / write / writev / sendfile that moved bytes on a connection from accept():
 *   - the per-fd table lookup (a byte per fd, as the agent's slot table);
 *   - at a request's first bytes, a request number (what a trace id would cost);
 *   - a lenient framing scan of the bytes the call saw (read / recv) or of the first iovec
 *     (write / writev): a 16-byte LF mask per block, the first letter of each line, and
 *     Content-Length's digits and a Transfer-Encoding line when their names match; no byte is
 *     validated;
 *   - one record: a 24-byte header (type, fd, TSC, byte count, request number) and the head's
 *     bytes up to 512 (sendfile: the header alone), claimed in a 2 MiB shared ring with one
 *     atomic add, published with a release store of its length, the next 512 bytes prefetched
 *     as libswagent.so does.
 * A child process (core 0, SCHED_IDLE, killed with its parent) reads each record's lines and
 * zeroes them, as swagent-reporter does, so the ring's lines come back to the writer from
 * another core as they do for the agent. One writer thread is assumed (nginx with one worker):
 * the room check and the claim are not one atomic step. A record that finds the ring full is
 * dropped and counted; the count is written to stderr at exit.
 * Left out, so the real design would cost more than this: the sampling decision, the trace
 * context a traced request's outgoing calls need (sw8), keep-alive bookkeeping (a request's
 * bytes after its head, pipelining), bodies that need their framing followed (chunked).
 * x86-64 only (SSE2, rdtsc).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <emmintrin.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>
#include <x86intrin.h>

#define RING_SIZE (2u << 20) /* a multiple of 64, as every record's length */
#define COPY_MAX 512u        /* head bytes copied per record */
#define FD_MAX 65536
#define REC_PAD 9u /* a record that only fills the ring's end */

struct rec {
    _Atomic uint32_t len; /* the record's bytes (a multiple of 64); 0 until published */
    uint16_t type;        /* 0 bytes read, 1 bytes written, 2 bytes sent from a file */
    uint16_t fd;
    uint64_t tsc;
    uint32_t total; /* the call's byte count */
    uint32_t req;   /* the request number of the fd */
};

struct ring_ctl {
    _Atomic uint64_t head;
    char pad[56];
    _Atomic uint64_t tail;
};

static ssize_t (*real_recv)(int, void *, size_t, int);
static ssize_t (*real_read)(int, void *, size_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_sendfile)(int, int, off_t *, size_t);
static int (*real_accept4)(int, struct sockaddr *, socklen_t *, int);
static int (*real_accept)(int, struct sockaddr *, socklen_t *);
static int (*real_close)(int);

static uint8_t conn_of[FD_MAX]; /* 1: a connection from accept() */
static uint32_t req_of[FD_MAX]; /* its request number; 0 between requests */
static uint32_t next_req;
static struct ring_ctl *ctl;
static uint8_t *ring;
static uint64_t records, dropped;
static volatile uint64_t g_sink; /* what the scans found: kept from being optimised away */

/* The reader: swagent-reporter's part, reading and zeroing what the writer published. */
__attribute__((noreturn)) static void consume(void)
{
    cpu_set_t set;
    struct sched_param sp = {0};

    CPU_ZERO(&set);
    CPU_SET(0, &set);
    (void)sched_setaffinity(0, sizeof(set), &set);
    (void)sched_setscheduler(0, SCHED_IDLE, &sp);
    for (;;) {
        uint64_t h = atomic_load_explicit(&ctl->head, memory_order_acquire);
        uint64_t t = atomic_load_explicit(&ctl->tail, memory_order_relaxed);
        if (t == h) {
            usleep(1000);
            continue;
        }
        while (t < h) {
            struct rec *r = (struct rec *)(void *)(ring + t % RING_SIZE);
            uint32_t len;
            uint8_t x = 0;

            while ((len = atomic_load_explicit(&r->len, memory_order_acquire)) == 0)
                sched_yield(); /* claimed, not yet published */
            for (uint32_t i = 0; i < len; i += 64)
                x ^= ring[t % RING_SIZE + i];
            g_sink = x;
            memset(r, 0, len); /* a record never crosses the ring's end (REC_PAD) */
            t += len;
        }
        atomic_store_explicit(&ctl->tail, t, memory_order_release);
    }
}

__attribute__((constructor)) static void capture_init(void)
{
    real_recv = (ssize_t(*)(int, void *, size_t, int))dlsym(RTLD_NEXT, "recv");
    real_read = (ssize_t(*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
    real_writev = (ssize_t(*)(int, const struct iovec *, int))dlsym(RTLD_NEXT, "writev");
    real_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    real_sendfile = (ssize_t(*)(int, int, off_t *, size_t))dlsym(RTLD_NEXT, "sendfile64");
    real_accept4 = (int (*)(int, struct sockaddr *, socklen_t *, int))dlsym(RTLD_NEXT, "accept4");
    real_accept = (int (*)(int, struct sockaddr *, socklen_t *))dlsym(RTLD_NEXT, "accept");
    real_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
    void *m = mmap(NULL, 4096 + RING_SIZE, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (m == MAP_FAILED)
        return; /* nothing is recorded */
    pid_t parent = getpid();
    pid_t p = fork();
    if (p < 0) {
        munmap(m, 4096 + RING_SIZE);
        return;
    }
    if (p == 0) {
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(0);
        ctl = m;
        ring = (uint8_t *)m + 4096;
        consume();
    }
    ctl = m;
    ring = (uint8_t *)m + 4096;
}

__attribute__((destructor)) static void capture_fini(void)
{
    char b[96];
    int k = snprintf(b, sizeof(b), "capture_floor: %llu records, %llu dropped (ring full)\n",
                     (unsigned long long)records, (unsigned long long)dropped);
    if (k > 0 && real_write)
        (void)!real_write(2, b, (size_t)k);
}

static inline bool lower_is(const uint8_t *p, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((uint8_t)(p[i] | 0x20) != (uint8_t)s[i])
            return false;
    return true;
}

/* The bytes of p[0..n) up to the end of a head (its blank line), or n if it does not end in
   them. Content-Length's value and a Transfer-Encoding line are picked up on the way (a real
   design would keep them per fd for the body's framing; here they go to g_sink). */
static size_t head_len(const uint8_t *p, size_t n)
{
    const __m128i lf = _mm_set1_epi8('\n');
    size_t line = 0;

    for (size_t b = 0; b < n; b += 16) {
        __m128i v;
        if (b + 16 <= n) {
            v = _mm_loadu_si128((const __m128i *)(const void *)(p + b));
        } else {
            uint8_t t[16] = {0};
            memcpy(t, p + b, n - b);
            v = _mm_loadu_si128((const __m128i *)(const void *)t);
        }
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, lf));
        while (m) {
            size_t at = b + (unsigned)__builtin_ctz(m);
            m &= m - 1;
            size_t ll = at - line;
            if (ll <= 1)
                return at + 1; /* "\r\n" or "\n": the blank line */
            uint8_t c0 = p[line] | 0x20;
            if (c0 == 'c' && ll > 16 && lower_is(p + line, "content-length:", 15)) {
                uint64_t x = 0;
                for (size_t i = line + 15; i < at; i++)
                    if (p[i] >= '0' && p[i] <= '9')
                        x = x * 10 + (uint64_t)(p[i] - '0');
                g_sink = x;
            } else if (c0 == 't' && ll > 19 && lower_is(p + line, "transfer-encoding:", 18)) {
                g_sink = 1;
            }
            line = at + 1;
        }
    }
    return n;
}

static inline void put(int fd, uint16_t type, const void *p, size_t n, size_t total)
{
    if (!ctl)
        return;
    size_t c = n < COPY_MAX ? n : COPY_MAX;
    uint32_t len = (uint32_t)((sizeof(struct rec) + c + 63) & ~(size_t)63);
    uint64_t h = atomic_load_explicit(&ctl->head, memory_order_relaxed);
    uint32_t room = RING_SIZE - (uint32_t)(h % RING_SIZE);
    uint32_t need = room < len ? room + len : len; /* a pad to the ring's end first */
    if (h + need - atomic_load_explicit(&ctl->tail, memory_order_acquire) > RING_SIZE) {
        dropped++;
        return;
    }
    uint64_t pos = atomic_fetch_add_explicit(&ctl->head, need, memory_order_relaxed);
    if (room < len) {
        struct rec *pad = (struct rec *)(void *)(ring + pos % RING_SIZE);
        pad->type = REC_PAD;
        atomic_store_explicit(&pad->len, room, memory_order_release);
        pos += room;
    }
    uint8_t *q = ring + pos % RING_SIZE;
    struct rec *r = (struct rec *)(void *)q;
    r->type = type;
    r->fd = (uint16_t)fd;
    r->tsc = __rdtsc();
    r->total = (uint32_t)total;
    r->req = req_of[fd];
    if (c)
        memcpy(q + sizeof(*r), p, c);
    atomic_store_explicit(&r->len, len, memory_order_release);
    records++;
    for (int i = 0; i < 8; i++)
        __builtin_prefetch(q + len + 64 * i, 1);
}

static inline bool is_conn(int fd)
{
    return (unsigned)fd < FD_MAX && conn_of[fd];
}

static void got_bytes(int fd, uint16_t type, const void *p, size_t n, size_t total)
{
    int e = errno;
    if (type == 0 && !req_of[fd])
        req_of[fd] = ++next_req;
    put(fd, type, p, n ? head_len(p, n) : 0, total);
    errno = e;
}

static int accepted(int fd)
{
    if ((unsigned)fd < FD_MAX) {
        conn_of[fd] = 1;
        req_of[fd] = 0;
    }
    return fd;
}

int accept4(int s, struct sockaddr *a, socklen_t *l, int flags)
{
    return accepted(real_accept4(s, a, l, flags));
}

int accept(int s, struct sockaddr *a, socklen_t *l)
{
    return accepted(real_accept(s, a, l));
}

int close(int fd)
{
    if ((unsigned)fd < FD_MAX)
        conn_of[fd] = 0;
    return real_close(fd);
}

ssize_t recv(int fd, void *buf, size_t n, int flags)
{
    ssize_t r = real_recv(fd, buf, n, flags);
    if (r > 0 && is_conn(fd))
        got_bytes(fd, 0, buf, (size_t)r, (size_t)r);
    return r;
}

ssize_t read(int fd, void *buf, size_t n)
{
    ssize_t r = real_read(fd, buf, n);
    if (r > 0 && is_conn(fd))
        got_bytes(fd, 0, buf, (size_t)r, (size_t)r);
    return r;
}

ssize_t write(int fd, const void *buf, size_t n)
{
    ssize_t r = real_write(fd, buf, n);
    if (r > 0 && is_conn(fd))
        got_bytes(fd, 1, buf, (size_t)r, (size_t)r);
    return r;
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    ssize_t r = real_writev(fd, iov, cnt);
    if (r > 0 && is_conn(fd))
        got_bytes(fd, 1, iov[0].iov_base, (size_t)r < iov[0].iov_len ? (size_t)r : iov[0].iov_len,
                  (size_t)r);
    return r;
}

ssize_t sendfile64(int out, int in, off_t *off, size_t n)
{
    ssize_t r = real_sendfile(out, in, off, n);
    if (r > 0 && is_conn(out)) {
        got_bytes(out, 2, NULL, 0, (size_t)r);
        req_of[out] = 0; /* nginx: the body of a static file ends its response */
    }
    return r;
}

ssize_t sendfile(int out, int in, off_t *off, size_t n) __attribute__((alias("sendfile64")));
