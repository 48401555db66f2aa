/*
 * common.h - included first by every swagent C file (agent, reporter, launcher).
 *
 * Rules: nothing here allocates or has side effects; only macros and tiny inlines.
 */
#ifndef SW_COMMON_H
#define SW_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* SW_STATIC is `static` except in unit-test builds, so tests reach internals (curl UNITTEST). */
#ifdef SW_TESTING
#define SW_STATIC
#else
#define SW_STATIC static
#endif

#define SW_LIKELY(x) __builtin_expect(!!(x), 1)
#define SW_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define SW_NOINLINE __attribute__((noinline))
/*
 * The functions on every traced request's path (callgrind of bench/mini_server.c names them):
 * placed together in .text.hot, which the linker groups, so that a request that finds the
 * caches cold (a server at a few hundred requests per second) touches a few pages of the
 * agent's code instead of one per function scattered over its text.
 */
#define SW_HOT __attribute__((section(".text.hot.swagent")))
/*
 * Of those, the ones a traced server request runs every time, whatever the server (the
 * interposers of read, recv, write, writev, sendfile and close, the connection layer's fast
 * paths, the two head scanners, the entry span's start and end, the ring write): in a section
 * of their own that the linker's default script places right after .text.hot, so they lie
 * together instead of spread over the whole hot section. Callgrind of nginx: 10 → 6 pages per
 * request. Without PCID (many VMs) every syscall flushes the TLB (pti), so each of a request's
 * syscalls is followed by one page walk per page of agent code it runs.
 */
#define SW_HOT_PATH __attribute__((section(".text.sorted.swagent")))
/*
 * Small state the constructor writes, kept in .data: the page that already holds the real
 * functions' table, which the loader writes while relocating (a zero variable would go to
 * .bss, where each page first written costs a page fault, and a page first read then written
 * two). Start-up is mostly page faults (bench/HISTORY.md).
 */
#define SW_INIT_DATA __attribute__((section(".data.swagent_init")))
#define SW_HIDDEN __attribute__((visibility("hidden")))
#define SW_EXPORT __attribute__((visibility("default")))
#define SW_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Atomics named by memory order (mimalloc), so each ordering choice is visible at the call. */
#define sw_atomic_load_relaxed(p) atomic_load_explicit((p), memory_order_relaxed)
#define sw_atomic_load_acquire(p) atomic_load_explicit((p), memory_order_acquire)
#define sw_atomic_store_relaxed(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)
#define sw_atomic_store_release(p, v) atomic_store_explicit((p), (v), memory_order_release)
#define sw_atomic_add_relaxed(p, v) atomic_fetch_add_explicit((p), (v), memory_order_relaxed)
#define sw_atomic_add_acq_rel(p, v) atomic_fetch_add_explicit((p), (v), memory_order_acq_rel)
#define sw_atomic_cas_acq_rel(p, expected, desired)                                                \
    atomic_compare_exchange_weak_explicit((p), (expected), (desired), memory_order_acq_rel,        \
                                          memory_order_relaxed)

/* Save and restore errno around agent bookkeeping (libuv SAVE_ERRNO). */
#define SW_SAVE_ERRNO(block)                                                                       \
    do {                                                                                           \
        int sw_saved_errno_ = errno;                                                               \
        do {                                                                                       \
            block;                                                                                 \
        } while (0);                                                                               \
        errno = sw_saved_errno_;                                                                   \
    } while (0)

#define SW_VERSION_STRING "0.1.0"

/*
 * memcpy for short strings (names, peers, keys): up to 16 bytes with two overlapping loads and
 * stores, reading and writing only [0, n), so no call (a libc memcpy call with its register
 * spills costs more than the copy). Longer: memcpy.
 */
static inline __attribute__((always_inline)) void sw_copy_small(void *dst, const void *src,
                                                                size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    if (n >= 8) {
        if (n > 16) {
            __builtin_memcpy(d, s, n);
            return;
        }
        uint64_t a, b;
        __builtin_memcpy(&a, s, 8);
        __builtin_memcpy(&b, s + n - 8, 8);
        __builtin_memcpy(d, &a, 8);
        __builtin_memcpy(d + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        __builtin_memcpy(&a, s, 4);
        __builtin_memcpy(&b, s + n - 4, 4);
        __builtin_memcpy(d, &a, 4);
        __builtin_memcpy(d + n - 4, &b, 4);
    } else if (n) {
        d[0] = s[0];
        d[n / 2] = s[n / 2];
        d[n - 1] = s[n - 1];
    }
}

#endif /* SW_COMMON_H */
