/*
 * id.c - trace and segment ids: `<process uuid>.<tid>.<ms * 10000 + seq>` (format in id.h).
 *
 * Rules: sw_id_new runs on application threads: no allocation, no lock, errno preserved; the
 * only syscall is gettid, once per thread (cached in initial-exec TLS). The process uuid is
 * written at init and in the atfork child, when no other thread runs.
 *
 * Cost: the hot path (sw_id_next; sw_id_next2_in, inline in id.h, for the usual traced request)
 * is a compare and an increment of the thread's last value; the decimal text is written only by
 * sw_id_format, for the ids an outgoing sw8 carries (the reporter formats the ids of segment
 * records itself). The uuid is kept both as 16 bytes and as its hex text, written together
 * whenever it is drawn.
 */
#include "common.h"

#include "id.h"
#include "record.h"

#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static char process_uuid[SW_ID_UUID_LEN + 1];
static uint8_t process_uuid_raw[SW_ID_UUID_LEN / 2];
static _Atomic int uuid_ready;

/* One initial-exec TLS block (id.h: sw_id_next2_in reads it too): in PIC code each separate
 * TLS variable costs its own GOT load. */
__thread __attribute__((tls_model("initial-exec"))) struct sw_id_tls sw_id_tls;
#define tls_id sw_id_tls

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
    memcpy(process_uuid_raw, r, sizeof(r));
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
    tls_id.tid = 0; /* the child's thread has another tid */
    tls_id.last = 0;
}

const char *sw_id_process_uuid(void)
{
    sw_id_init();
    return process_uuid;
}

const uint8_t *sw_id_uuid_bytes(void)
{
    sw_id_init();
    return process_uuid_raw;
}

/* The thread's first id (or its first in an atfork child): its tid. */
SW_NOINLINE uint32_t sw_id_tid_fetch(void)
{
    int saved = errno;
    tls_id.tid = (uint32_t)syscall(SYS_gettid);
    errno = saved;
    return tls_id.tid;
}

SW_HOT uint64_t sw_id_next2(int64_t ms, uint32_t *tid)
{
    return sw_id_next2_in(ms, tid);
}

uint64_t sw_id_next(int64_t ms, uint32_t *tid)
{
    uint32_t t = tls_id.tid;
    *tid = SW_LIKELY(t) ? t : sw_id_tid_fetch();
    /* A new millisecond restarts the sequence at 0; the same one (or a clock that stepped back,
     * or more than 10000 ids in one ms) continues from the last value + 1. */
    uint64_t v = ms > 0 ? (uint64_t)ms * 10000u : 0;
    tls_id.last = v > tls_id.last ? v : tls_id.last + 1;
    return tls_id.last;
}

size_t sw_id_format(char *out, size_t cap, uint32_t tid, uint64_t value)
{
    /* The uuid's hex text is kept (process_uuid): only the numbers are formatted. */
    char num[2][20];
    size_t nl[2] = {sw_rec_put_u64(num[0], tid), sw_rec_put_u64(num[1], value)};
    size_t n = SW_ID_UUID_LEN + 1 + nl[0] + 1 + nl[1];
    if (n + 1 > cap)
        return 0;
    sw_id_init();
    memcpy(out, process_uuid, SW_ID_UUID_LEN);
    out[SW_ID_UUID_LEN] = '.';
    memcpy(out + SW_ID_UUID_LEN + 1, num[0], nl[0]);
    out[SW_ID_UUID_LEN + 1 + nl[0]] = '.';
    memcpy(out + SW_ID_UUID_LEN + 2 + nl[0], num[1], nl[1]);
    out[n] = '\0';
    return n;
}

size_t sw_id_new(char *out, size_t cap)
{
    return sw_id_new_at(out, cap, now_ms());
}

size_t sw_id_new_at(char *out, size_t cap, int64_t ms)
{
    uint32_t tid;
    uint64_t v = sw_id_next(ms, &tid);
    return sw_id_format(out, cap, tid, v);
}
