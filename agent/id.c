/*
 * id.c - trace and segment ids: `<process uuid>.<tid>.<ms * 10000 + seq>` (format in id.h).
 *
 * Rules: sw_id_new runs on application threads: no allocation, no lock, errno preserved; the
 * only syscall is gettid, once per thread (cached in initial-exec TLS). The process uuid is
 * written at init and in the atfork child, when no other thread runs.
 *
 * Cost: each thread caches its "<uuid>.<tid>." prefix and the decimal digits of its last number.
 * An id is one clock read, an in-place decimal increment (or, on the first id of a new
 * millisecond, formatting ms * 10000) and two fixed-size copies. A uuid generation counter
 * makes every thread rebuild its prefix after the uuid is drawn again.
 */
#include "common.h"

#include "id.h"

#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static char process_uuid[SW_ID_UUID_LEN + 1];
static _Atomic int uuid_ready;
/* Bumped whenever the uuid is drawn: a thread whose cached prefix is older rebuilds it. */
static _Atomic unsigned uuid_gen;

/*
 * Per-thread state (initial-exec TLS). tls_prefix holds "<uuid>.<tid>." (at most 32 + 1 + 10 + 1
 * = 44 bytes) and tls_num the decimal digits of tls_last (at most 19), both padded so that the
 * fast path copies them with fixed-size memcpy. tls_ms is the millisecond tls_last was last
 * derived from; while the clock stays in it, the next id is tls_last + 1, incremented in place
 * in tls_num instead of formatting a 17-digit number per id.
 */
#define PREFIX_CAP 48
#define NUM_CAP 20
/* One initial-exec TLS block: in PIC code each separate TLS variable costs its own GOT load. */
static __thread __attribute__((tls_model("initial-exec"))) struct {
    int32_t tid;
    unsigned gen;
    uint32_t prefix_len;
    uint32_t num_len;
    int64_t last;
    int64_t ms;
    /* > 0: num is the digits of num_ms followed by 4 sequence digits (last is
     * num_ms * 10000 + a sequence below 10000); 0: unknown. */
    int64_t num_ms;
    char prefix[PREFIX_CAP];
    char num[NUM_CAP];
} tls_id;
#define tls_tid tls_id.tid
#define tls_gen tls_id.gen
#define tls_prefix_len tls_id.prefix_len
#define tls_num_len tls_id.num_len
#define tls_last tls_id.last
#define tls_ms tls_id.ms
#define tls_num_ms tls_id.num_ms
#define tls_prefix tls_id.prefix
#define tls_num tls_id.num

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Fills `buf` with random bytes: getrandom(2), else a mix of time, pid and addresses. */
static void random_bytes(unsigned char *buf, size_t len)
{
    size_t got = 0;
    int tries = 0;

    while (got < len && tries++ < 8) {
        long n = syscall(SYS_getrandom, buf + got, len - got, 0x0001 /* GRND_NONBLOCK */);
        if (n > 0)
            got += (size_t)n;
        else if (n < 0 && errno != EINTR)
            break;
    }
    if (got == len)
        return;
    /* No entropy source (very old kernel, seccomp): a splitmix64 stream over weak inputs. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 30 ^
                 (uint64_t)syscall(SYS_getpid) << 40 ^ (uint64_t)(uintptr_t)&ts ^
                 (uint64_t)now_ms();
    for (size_t i = got; i < len; i++) {
        x += UINT64_C(0x9e3779b97f4a7c15);
        uint64_t z = x;
        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        buf[i] = (unsigned char)(z ^ (z >> 31));
    }
}

static void draw_uuid(void)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char r[SW_ID_UUID_LEN / 2];

    random_bytes(r, sizeof(r));
    for (size_t i = 0; i < sizeof(r); i++) {
        process_uuid[2 * i] = hex[r[i] >> 4];
        process_uuid[2 * i + 1] = hex[r[i] & 15];
    }
    process_uuid[SW_ID_UUID_LEN] = '\0';
    sw_atomic_store_relaxed(&uuid_gen, sw_atomic_load_relaxed(&uuid_gen) + 1);
    sw_atomic_store_release(&uuid_ready, 1);
}

void sw_id_init(void)
{
    if (!sw_atomic_load_acquire(&uuid_ready))
        SW_SAVE_ERRNO(draw_uuid());
}

void sw_id_reset_after_fork(void)
{
    SW_SAVE_ERRNO(draw_uuid());
    tls_tid = 0;
    tls_prefix_len = 0;
    tls_last = 0;
    tls_ms = 0;
    tls_num_len = 0;
    tls_num_ms = 0;
}

const char *sw_id_process_uuid(void)
{
    sw_id_init();
    return process_uuid;
}

/* Writes the decimal form of `v` at `p`; returns the number of digits. */
static size_t put_u64(char *p, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

/* Builds this thread's "<uuid>.<tid>." prefix (first id of a thread, or after a new uuid). */
static SW_NOINLINE void build_prefix(void)
{
    if (tls_tid == 0) {
        int saved = errno;
        tls_tid = (int32_t)syscall(SYS_gettid);
        errno = saved;
    }
    memset(tls_prefix, 0, sizeof(tls_prefix));
    memcpy(tls_prefix, process_uuid, SW_ID_UUID_LEN);
    size_t o = SW_ID_UUID_LEN;
    tls_prefix[o++] = '.';
    o += put_u64(tls_prefix + o, (uint64_t)(uint32_t)tls_tid);
    tls_prefix[o++] = '.';
    tls_prefix_len = (uint32_t)o;
    tls_gen = sw_atomic_load_relaxed(&uuid_gen);
}

/* Sets tls_last to `v` and re-derives its digits. */
static void set_last(int64_t v)
{
    tls_last = v;
    memset(tls_num, 0, sizeof(tls_num));
    tls_num_len = (uint32_t)put_u64(tls_num, (uint64_t)v);
    tls_num_ms = v % 10000 == 0 && tls_num_len > 4 ? v / 10000 : 0;
}

/*
 * The first id of a new millisecond `ms` (> tls_num_ms): adds the few elapsed milliseconds to
 * the millisecond digits in place and zeroes the sequence digits, instead of formatting 17
 * digits. Falls back to set_last when the number of digits would change.
 */
static void new_ms(int64_t ms, int64_t v)
{
    uint64_t d = (uint64_t)(ms - tls_num_ms);
    int i = (int)tls_num_len - 5;
    if (tls_num_ms <= 0 || ms <= tls_num_ms || d > 1000000) {
        set_last(v);
        return;
    }
    char num[NUM_CAP];
    memcpy(num, tls_num, sizeof(num));
    unsigned carry = 0;
    while ((d || carry) && i >= 0) {
        unsigned c = (unsigned)(num[i] - '0') + (unsigned)(d % 10) + carry;
        d /= 10;
        carry = c >= 10;
        num[i--] = (char)('0' + (c >= 10 ? c - 10 : c));
    }
    if (d || carry) {
        set_last(v); /* one digit more */
        return;
    }
    memcpy(num + tls_num_len - 4, "0000", 4);
    memcpy(tls_num, num, sizeof(num));
    tls_last = v;
    tls_num_ms = ms;
}

size_t sw_id_new(char *out, size_t cap)
{
    return sw_id_new_at(out, cap, now_ms());
}

size_t sw_id_new_at(char *out, size_t cap, int64_t ms)
{
    if (SW_UNLIKELY(!sw_atomic_load_acquire(&uuid_ready)))
        sw_id_init();
    if (SW_UNLIKELY(tls_prefix_len == 0 || tls_gen != sw_atomic_load_relaxed(&uuid_gen)))
        build_prefix();

    int64_t v = ms * 10000;
    if (ms != tls_ms && v > tls_last) {
        /* A new millisecond: the sequence restarts at 0. */
        tls_ms = ms;
        new_ms(ms, v);
    } else {
        /*
         * The same millisecond, or the clock stepped back, or more than 10000 ids this ms: the
         * last value + 1, as a decimal increment in place.
         */
        tls_ms = ms;
        tls_last++;
        int i = (int)tls_num_len - 1;
        while (i >= 0 && tls_num[i] == '9')
            tls_num[i--] = '0';
        if (SW_LIKELY(i >= 0))
            tls_num[i]++;
        else
            set_last(tls_last); /* one digit more */
        if (i < (int)tls_num_len - 4)
            tls_num_ms = 0; /* the sequence passed 9999: the digits are no longer ms + seq */
    }

    size_t plen = tls_prefix_len, nlen = tls_num_len, o = plen + nlen;
    if (SW_LIKELY(cap >= PREFIX_CAP + NUM_CAP - 4)) {
        /* Fixed-size copies (the padding is overwritten or lies past the NUL). */
        _Static_assert(SW_ID_STR_MAX >= PREFIX_CAP - 4 + NUM_CAP, "id buffer");
        memcpy(out, tls_prefix, PREFIX_CAP);
        memcpy(out + plen, tls_num, NUM_CAP);
    } else {
        if (o + 1 > cap)
            return 0;
        memcpy(out, tls_prefix, plen);
        memcpy(out + plen, tls_num, nlen);
    }
    out[o] = '\0';
    return o;
}
