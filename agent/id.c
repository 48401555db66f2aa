/*
 * id.c - trace and segment ids: `<process uuid>.<tid>.<ms * 10000 + seq>` (format in id.h).
 *
 * Rules: sw_id_new runs on application threads: no allocation, no lock, errno preserved; the
 * only syscall is gettid, once per thread (cached in initial-exec TLS). The process uuid is
 * written at init and in the atfork child, when no other thread runs.
 */
#include "common.h"

#include "id.h"

#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static char process_uuid[SW_ID_UUID_LEN + 1];
static _Atomic int uuid_ready;

static __thread __attribute__((tls_model("initial-exec"))) int32_t tls_tid;
static __thread __attribute__((tls_model("initial-exec"))) int64_t tls_last;

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
    tls_last = 0;
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

size_t sw_id_new(char *out, size_t cap)
{
    char buf[SW_ID_STR_MAX];
    size_t o;

    if (SW_UNLIKELY(!sw_atomic_load_acquire(&uuid_ready)))
        sw_id_init();
    if (SW_UNLIKELY(tls_tid == 0)) {
        int saved = errno;
        tls_tid = (int32_t)syscall(SYS_gettid);
        errno = saved;
    }
    int64_t v = now_ms() * 10000;
    if (v <= tls_last)
        v = tls_last + 1; /* more than 10000 ids this ms, or the clock stepped back */
    tls_last = v;

    memcpy(buf, process_uuid, SW_ID_UUID_LEN);
    o = SW_ID_UUID_LEN;
    buf[o++] = '.';
    o += put_u64(buf + o, (uint64_t)(uint32_t)tls_tid);
    buf[o++] = '.';
    o += put_u64(buf + o, (uint64_t)v);
    if (o + 1 > cap)
        return 0;
    memcpy(out, buf, o);
    out[o] = '\0';
    return o;
}
