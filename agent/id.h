/*
 * id.h - globally unique trace and segment ids, in the Java agent's format:
 *
 *     <process uuid: 32 lower-case hex>.<thread id (decimal)>.<ms * 10000 + seq (decimal)>
 *     e.g. 3f2a8c1e9b7d4e6fa1b2c3d4e5f60718.45.17245678901230000
 *
 * The process uuid is 128 random bits from getrandom(2) drawn at sw_id_init() and drawn again
 * by sw_id_reset_after_fork() in an atfork child, so parent and child never share ids. The
 * thread id is the kernel tid (cached per thread). The last part is strictly increasing per
 * thread: normally the epoch ms times 10000 plus a sequence, and if a thread needs more than
 * 10000 ids in one millisecond (or the clock steps back), it continues from its last value + 1.
 * An id is at most SW_ID_STR_MAX - 1 bytes (it fits propagation.h's SW_ID_MAX).
 *
 * sw_id_new runs on application threads: no allocation, no lock; its only syscall is gettid
 * once per thread. Thread-local state is initial-exec TLS.
 *
 * The hot path takes ids as numbers (sw_id_next: the thread id and the last part) and formats
 * them only where text is needed (sw_id_format: an outgoing sw8); segment records carry them
 * as numbers with the uuid's 16 bytes (record.h) and the reporter writes the text.
 */
#ifndef SW_ID_H
#define SW_ID_H

#include "common.h"

#define SW_ID_UUID_LEN 32 /* hex chars of the process uuid */
#define SW_ID_STR_MAX 64  /* bytes an id needs, with its NUL */

/* Draws the process uuid. Idempotent; called from the agent's constructor (and lazily). */
void sw_id_init(void);

/* In an atfork child: draws a new process uuid and forgets the calling thread's cached tid. */
void sw_id_reset_after_fork(void);

/*
 * Writes a new id, NUL-terminated, to `out`. Returns its length, or 0 if `cap` is too small
 * (use SW_ID_STR_MAX).
 */
size_t sw_id_new(char *out, size_t cap);

/*
 * sw_id_new for a time the caller already read (epoch ms, e.g. the start of the request), so
 * a traced request reads the clock once, not once per id. Ids stay unique and increasing per
 * thread whatever `ms` is (an older ms continues from the thread's last value + 1).
 */
size_t sw_id_new_at(char *out, size_t cap, int64_t ms);

/* The 32-hex-char process uuid (NUL-terminated, static storage). */
const char *sw_id_process_uuid(void);

/* The same uuid as 16 bytes (the hex form is these bytes, high nibble first). */
const uint8_t *sw_id_uuid_bytes(void);

/*
 * A new id as numbers: returns the last part (strictly increasing per thread, ms * 10000 + seq
 * for time `ms` as sw_id_new_at) and sets *tid to the calling thread's id. No formatting.
 */
uint64_t sw_id_next(int64_t ms, uint32_t *tid);

/* Two new ids at once: returns v, and v + 1 is the second (one call for a new trace id and a
 * segment id, in that order). */
uint64_t sw_id_next2(int64_t ms, uint32_t *tid);

/* The thread's id state (id.c), for sw_id_next2_in: internal. */
struct sw_id_tls {
    uint32_t tid;  /* kernel tid, 0 until the first id of the thread */
    uint64_t last; /* the thread's last value (ms * 10000 + seq) */
};
extern __thread __attribute__((tls_model("initial-exec"))) struct sw_id_tls sw_id_tls SW_HIDDEN;
uint32_t sw_id_tid_fetch(void) SW_HIDDEN;

/* sw_id_next2 inline (the usual entry of a traced request: no call). The same ids. */
static inline uint64_t sw_id_next2_in(int64_t ms, uint32_t *tid)
{
    uint32_t t = sw_id_tls.tid;
    *tid = SW_LIKELY(t) ? t : sw_id_tid_fetch();
    uint64_t v = ms > 0 ? (uint64_t)ms * 10000u : 0, last = sw_id_tls.last;
    v = v > last ? v : last + 1; /* as sw_id_next */
    sw_id_tls.last = v + 1;
    return v;
}

/*
 * Writes the id <process uuid>.<tid>.<value> of this process, NUL-terminated. Returns its
 * length, or 0 if `cap` is too small (SW_ID_STR_MAX always suffices).
 */
size_t sw_id_format(char *out, size_t cap, uint32_t tid, uint64_t value);

#endif /* SW_ID_H */
