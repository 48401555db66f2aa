/*
 * logcap.c - copies what the application wrote to stdout/stderr into its ring (logcap.h).
 *
 * Rules: runs on application threads, after the application's own write has been made. No
 * malloc, no lock, no stdio, no blocking: a clock read, a few relaxed atomics, the ring's
 * reserve/commit and a memcpy of the bytes written. errno is the real call's. Anything that
 * does not fit (the cap, a ring more than half full) is dropped and counted, and the next
 * record of that fd carries SW_REC_LOG_GAP so the reporter does not join pieces of lines
 * across the hole.
 *
 * The cap (swagent.log_cap_bytes_per_sec, 0: none) is a per-process budget per wall-clock
 * second: a write is captured whole or not at all (never a prefix: the reporter would make a
 * line of it); a write larger than the cap is never captured. Its bookkeeping is one clock
 * read and one atomic add per write (plus a compare-and-swap once per second).
 */
#include "common.h"

#include "agent.h"
#include "config.h"
#include "guard.h"
#include "id.h"
#include "logcap.h"
#include "real.h"
#include "record.h"
#include "ring.h"
#include "trace.h"

#include <string.h>

uint32_t sw_logcap_fds SW_HIDDEN;

static int g_mode;                   /* SW_LOGCAP_* */
static uint64_t g_cap;               /* bytes per second, 0: no cap */
static _Atomic int64_t g_win_sec;    /* the cap's current second (epoch) */
static _Atomic uint64_t g_win_bytes; /* bytes asked for in it */
static _Atomic uint32_t g_gap[3];    /* per fd: bytes were not captured since its last record */
static _Atomic uint64_t g_records, g_bytes, g_capped, g_lost, g_no_ctx;

void sw_logcap_init(const struct sw_config *cfg, bool exec_child)
{
    g_mode = cfg->log_capture;
    g_cap = cfg->log_cap_bytes_per_sec > 0 ? (uint64_t)cfg->log_cap_bytes_per_sec : 0;
    uint32_t fds = 0;
    if (g_mode != SW_LOGCAP_OFF)
        fds = exec_child ? 2u : 3u;
    __atomic_store_n(&sw_logcap_fds, fds, __ATOMIC_RELEASE);
}

/* Takes `n` bytes of this second's budget; false when that goes over the cap. */
static bool cap_take(int64_t now_ms, size_t n)
{
    if (g_cap == 0)
        return true;
    int64_t sec = now_ms / 1000;
    int64_t w = sw_atomic_load_relaxed(&g_win_sec);
    if (SW_UNLIKELY(w != sec) && sw_atomic_cas_acq_rel(&g_win_sec, &w, sec))
        sw_atomic_store_relaxed(&g_win_bytes, 0);
    uint64_t used = sw_atomic_add_relaxed(&g_win_bytes, n) + n;
    return used <= g_cap;
}

/* The ring has room for log records: at most half of it in use (segments keep the rest). */
static bool ring_room(struct sw_ring *r, size_t n)
{
    const _Atomic uint64_t *hp = sw_ring_fill_head(r);
    uint64_t used =
        sw_atomic_load_relaxed(hp) - sw_atomic_load_relaxed(hp + SW_RING_TAIL_AFTER_HEAD);
    size_t cap = sw_ring_capacity(r);
    return used <= cap / 2 && n <= cap / 2 - used;
}

static void lose(struct sw_ring *r, int fd, size_t n, bool capped)
{
    sw_atomic_store_relaxed(&g_gap[fd], 1);
    sw_atomic_add_relaxed(capped ? &g_capped : &g_lost, n);
    if (r)
        sw_ring_count_log(r, capped ? SW_RING_LOG_CAPPED : SW_RING_LOG_LOST, n);
}

/* Copies `n` bytes from the iovec array, starting `*skip` bytes in, to `dst`; advances. */
static void iov_copy(uint8_t *dst, const struct iovec **iov, size_t *skip, size_t n)
{
    while (n > 0) {
        const struct iovec *v = *iov;
        size_t k = v->iov_len - *skip;
        if (k > n)
            k = n;
        memcpy(dst, (const uint8_t *)v->iov_base + *skip, k);
        dst += k;
        n -= k;
        *skip += k;
        if (*skip == v->iov_len) {
            (*iov)++;
            *skip = 0;
        }
    }
}

static void capture(int fd, const struct iovec *iov, int cnt, size_t r)
{
    /* Never activates the agent (this may run in a signal handler): with
     * swagent.log_capture=all it is active from the start (agent.c), else from the program's
     * first socket. */
    if (!sw_agent_enabled())
        return;
    struct sw_trace_logctx ctx;
    bool has = sw_trace_log_ctx(&ctx);
    if (!has && g_mode != SW_LOGCAP_ALL) {
        sw_atomic_add_relaxed(&g_no_ctx, 1);
        return;
    }
    int64_t now = sw_trace_now_ms();
    struct sw_ring *ring = NULL;
    if (!cap_take(now, r)) {
        lose(sw_trace_ring(), fd, r, true);
        return;
    }
    ring = sw_trace_ring();
    if (!ring) {
        lose(ring, fd, r, false);
        return;
    }

    /* The head of every record of this write (its ids and time are the same): at most 12 +
     * 32 + 8 + 2 + 63 bytes (an incoming sw8's trace id). */
    uint8_t head[128];
    struct sw_wbuf w;
    sw_wbuf_init(&w, head, sizeof(head));
    sw_wbuf_u8(&w, SW_REC_LOG_VERSION);
    sw_wbuf_u8(&w, (uint8_t)fd);
    size_t flags_at = w.len;
    uint8_t flags = 0;
    if (has)
        flags |= SW_REC_LOG_CTX | (ctx.own_trace ? SW_REC_LOG_OWN_TRACE : 0);
    sw_wbuf_u8(&w, flags);
    sw_wbuf_u8(&w, 0);
    sw_wbuf_i64(&w, now);
    if (has) {
        sw_wbuf_put(&w, sw_id_uuid_bytes(), 16);
        sw_wbuf_u32(&w, ctx.tid);
        sw_wbuf_i64(&w, (int64_t)ctx.seg_value);
        sw_wbuf_i32(&w, ctx.span_id);
        if (ctx.own_trace)
            sw_wbuf_i64(&w, (int64_t)ctx.trace_value);
        else
            sw_wbuf_str(&w, ctx.trace_id, ctx.trace_len);
    }
    if (w.overflow) {
        lose(ring, fd, r, false);
        return;
    }

    size_t skip = 0, left = r;
    while (cnt > 0 && iov->iov_len == 0) {
        iov++;
        cnt--;
    }
    while (left > 0) {
        size_t n = left < SW_REC_LOG_CHUNK ? left : SW_REC_LOG_CHUNK;
        /* Each piece only while the ring is at most half full: what does not fit is lost
         * (counted) and the next record says so (SW_REC_LOG_GAP). */
        uint8_t *p = ring_room(ring, w.len + 4 + n)
                         ? sw_ring_reserve(ring, (uint32_t)(w.len + 4 + n), SW_REC_LOG)
                         : NULL;
        if (!p) {
            lose(ring, fd, left, false);
            return;
        }
        if (sw_atomic_load_relaxed(&g_gap[fd]) &&
            atomic_exchange_explicit(&g_gap[fd], 0, memory_order_relaxed))
            head[flags_at] = (uint8_t)(flags | SW_REC_LOG_GAP);
        else
            head[flags_at] = flags;
        memcpy(p, head, w.len);
        uint8_t *q = p + w.len;
        q[0] = (uint8_t)n;
        q[1] = (uint8_t)(n >> 8);
        q[2] = (uint8_t)(n >> 16);
        q[3] = (uint8_t)(n >> 24);
        iov_copy(q + 4, &iov, &skip, n);
        sw_ring_commit(ring, p);
        sw_ring_count_log(ring, SW_RING_LOG_BYTES, n);
        sw_atomic_add_relaxed(&g_records, 1);
        sw_atomic_add_relaxed(&g_bytes, n);
        left -= n;
    }
}

SW_NOINLINE void sw_logcap_capture(int fd, const struct iovec *iov, int cnt, size_t r)
{
    if (SW_GUARD_HELD() || r == 0 || (unsigned)fd - 1u >= 2u)
        return;
    int e = errno;
    SW_GUARDED(capture(fd, iov, cnt, r));
    errno = e;
}

ssize_t sw_logcap_write(int fd, const void *buf, size_t n)
{
    ssize_t r = sw_libc.write(fd, buf, n);
    if (r > 0) {
        struct iovec v = {(void *)buf, (size_t)r};
        sw_logcap_capture(fd, &v, 1, (size_t)r);
    }
    return r;
}

ssize_t sw_logcap_writev(int fd, const struct iovec *iov, int cnt)
{
    ssize_t r = sw_libc.writev(fd, iov, cnt);
    if (r > 0)
        sw_logcap_capture(fd, iov, cnt, (size_t)r);
    return r;
}

void sw_logcap_get_stats(struct sw_logcap_stats *out)
{
    out->records = sw_atomic_load_relaxed(&g_records);
    out->bytes = sw_atomic_load_relaxed(&g_bytes);
    out->capped = sw_atomic_load_relaxed(&g_capped);
    out->lost = sw_atomic_load_relaxed(&g_lost);
    out->no_ctx = sw_atomic_load_relaxed(&g_no_ctx);
}
