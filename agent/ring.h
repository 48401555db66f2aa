/*
 * ring.h - the shared-memory ring of finished segments: many producer threads in one traced
 * process, one consumer (swagent-reporter, another process).
 *
 * A ring is a file `ring-<pid>-<nonce>.swr` in the per-user runtime directory (0700 directory,
 * 0600 file, created with O_EXCL|O_NOFOLLOW|O_CLOEXEC), mapped MAP_SHARED by both sides. The
 * file outlives the process, so segments of a process that exits right after its last request
 * are still delivered; the reporter removes drained rings of dead processes.
 *
 * Layout: a header page (struct sw_ring_meta, counters, positions) then a power-of-two data
 * area of variable-length records, each { struct sw_ring_rec_hdr; payload } padded to 8 bytes.
 *
 * Producer rules (application threads): sw_ring_reserve/sw_ring_commit never block, allocate,
 * or make a syscall; a full ring returns NULL and counts the drop.
 * Consumer rules: the ring is untrusted input (another process wrote it): every position and
 * length is validated; a corrupt ring is reported, never trusted.
 *
 * Positions: `head` (producers' reserve position) and `tail` (consumer's release position) are
 * 64-bit byte counts in the header page that only grow (compared by difference, so they are
 * modular); the data offset is pos & (capacity - 1). A record's header word goes 0 (reserved)
 * -> BUSY|len (being written) -> COMMITTED|len (store-release). A record that would straddle
 * the end of the data area is preceded by a committed SW_RING_PAD record filling to the end.
 * The consumer zeroes released bytes before it publishes the new tail, so a header word of 0
 * below head always means "reserved, not written yet".
 * Producer death: its BUSY record (or zero header) blocks the consumer until the consumer knows
 * the process is dead, then sw_ring_skip_stuck skips it (counted as dropped).
 * Consumer death: only sw_ring_release moves the tail, so a restarted consumer resumes at the
 * persisted tail: released records are never seen again, unreleased ones are read again;
 * sw_ring_recover finishes a release that was cut short while zeroing.
 */
#ifndef SW_RING_H
#define SW_RING_H

#include "common.h"

#include <sys/types.h>

#define SW_RING_MAGIC 0x3152474e49525753ull /* "SWRINGR1" little-endian */
#define SW_RING_VERSION 1
#define SW_RING_NAME_MAX 128

/* Per-process identity, written once by the producer at creation, read by the reporter. */
struct sw_ring_meta {
    int32_t pid;                      /* the traced process */
    uint64_t start_time_ms;           /* its start (epoch ms) */
    uint64_t proc_start_ticks;        /* /proc/<pid>/stat field 22, to tell pid reuse */
    char service[SW_RING_NAME_MAX];   /* agent.service_name (with namespace/cluster) */
    char instance[SW_RING_NAME_MAX];  /* agent.instance_name */
    char collector[SW_RING_NAME_MAX]; /* collector.backend_service this process reports to */
    char exe[SW_RING_NAME_MAX];       /* basename of the executable, for `swagent status` */
};

/* Counters kept in the ring header, updated with relaxed atomics. */
/* Requests kept beyond the sampling quota (trace.c), counted by the producer in its ring. */
enum sw_ring_keep {
    SW_RING_KEPT_ERROR,   /* kept: 5xx, a failed exit or a reset */
    SW_RING_KEPT_SLOW,    /* kept: the response began swagent.keep_slow_ms or more late */
    SW_RING_KEEP_LIMITED, /* would have been kept: over swagent.keep_n_per_3_secs */
    SW_RING_KEEP_N
};

/* The HTTP/2 module's counters (proto_h2.c, issue 37), counted by the producer in its ring:
 * connections no longer followed, by reason, and what was not done on followed ones. */
enum sw_ring_h2 {
    SW_RING_H2_BAD_PREFACE,    /* the client preface was not HTTP/2's */
    SW_RING_H2_HPACK,          /* a header block failed to decode */
    SW_RING_H2_TABLE,          /* a dynamic table above 4096 bytes */
    SW_RING_H2_LIST,           /* a header block or list above the limits */
    SW_RING_H2_FRAMING,        /* framing errors (CONTINUATION flood, ...) */
    SW_RING_H2_SW8_SKIPPED,    /* request blocks without our sw8 (no room, header gone out) */
    SW_RING_H2_STREAMS_FULL,   /* streams not traced: the connection's table was full */
    SW_RING_H2_UNKNOWN_FRAMES, /* frames of unknown types (ignored) */
    SW_RING_H2_N
};

struct sw_ring_stats {
    uint64_t committed;      /* records committed by producers */
    uint64_t dropped;        /* records dropped because the ring was full or too small */
    uint64_t consumed;       /* records released by the consumer */
    uint64_t shed;           /* traces not started because the ring was nearly full (trace.c) */
    uint64_t parent_unknown; /* exits whose request was not known (trace.c, own segments) */
    uint64_t kept[SW_RING_KEEP_N]; /* enum sw_ring_keep */
    uint64_t h2[SW_RING_H2_N];     /* enum sw_ring_h2 */
};

struct sw_ring; /* a mapping of one ring; layout private to ring.c */

/*
 * Every record in the data area starts with this 8-byte header, written by the producer as one
 * 64-bit atomic store (little-endian: len_and_state is the low word). The payload follows and
 * the record is padded to 8 bytes. A header word of 0 means "reserved but not written yet";
 * the consumer zeroes released space, so a stale header is never taken for a new one.
 */
struct sw_ring_rec_hdr {
    uint32_t len_and_state; /* payload length (bits 0-29) | SW_RING_BUSY or SW_RING_COMMITTED */
    uint16_t type;          /* SW_REC_SEGMENT (record.h), ...; SW_RING_PAD fills to the end */
    uint16_t reserved;      /* 0 */
};

#define SW_RING_LEN_MASK 0x3fffffffu
#define SW_RING_BUSY 0x40000000u      /* reserved, the producer is writing the payload */
#define SW_RING_COMMITTED 0x80000000u /* the payload is complete */
#define SW_RING_PAD 0xffffu           /* record type of the filler before a wrap */
#define SW_RING_HDR_BYTES 4096u       /* the header page before the data area */
#define SW_RING_MIN_DATA (64u * 1024u)
#define SW_RING_MAX_DATA (1024u * 1024u * 1024u)

/* ---- producer side (libswagent.so) ---- */

/*
 * Creates a ring of `data_bytes` (rounded up to a power of two, at least 64 KiB) in `dir`,
 * which must exist, be owned by the caller and be mode 0700. Init-time only (allocates, makes
 * syscalls). Returns 0 and sets *out, or a negative errno. The file descriptor is closed after
 * mapping, so the application can never see or close it.
 */
int sw_ring_create(const char *dir, const struct sw_ring_meta *meta, size_t data_bytes,
                   struct sw_ring **out);

/*
 * Reserves room for a record of `len` payload bytes and type `type`. Returns a pointer to the
 * payload, or NULL when the ring is full (the drop is counted). Lock-free; safe from any thread.
 */
void *sw_ring_reserve(struct sw_ring *r, uint32_t len, uint16_t type);

/* Publishes a reserved record to the consumer. */
void sw_ring_commit(struct sw_ring *r, void *payload);

/*
 * sw_ring_reserve(r, len, SW_REC_SEGMENT), a copy of `len` bytes from `src` and sw_ring_commit
 * in one call (a segment record already complete in the caller's memory: the usual end of a
 * traced request). Returns false when the ring is full (the drop is counted, as by
 * sw_ring_reserve).
 */
bool sw_ring_put_segment(struct sw_ring *r, const void *src, uint32_t len);

/* Counts a record dropped for another reason (for example larger than the ring). */
void sw_ring_count_drop(struct sw_ring *r);

/* Counts a trace the producer did not start because the ring was nearly full (trace.c). */
void sw_ring_count_shed(struct sw_ring *r);

/* Counts an exit whose request the producer did not know (trace.c, sw_trace_exit_start_in). */
void sw_ring_count_parent_unknown(struct sw_ring *r);

/* Counts a request kept beyond the sampling quota, or refused by the keep limit (trace.c). */
void sw_ring_count_keep(struct sw_ring *r, enum sw_ring_keep k);

/* Counts an HTTP/2 module event (proto_h2.c). */
void sw_ring_count_h2(struct sw_ring *r, enum sw_ring_h2 k);

/*
 * Where a producer reads how full the ring is without a call (trace.c decides at a trace's
 * start whether its segment will find room): the shared head position, valid while the ring
 * is mapped, and the tail always SW_RING_TAIL_AFTER_HEAD words after it, so that a reader
 * reaches both from one published pointer (two pointers published apart let a reader pair an
 * old head with a new tail). head - tail is the bytes in use (huge when a stale head is read
 * behind tail: read both again); sw_ring_capacity() is the data area's size.
 */
#define SW_RING_TAIL_AFTER_HEAD 8 /* 64-bit words: head and tail are on their own lines */
const _Atomic uint64_t *sw_ring_fill_head(const struct sw_ring *r);

/* Unmaps the ring (the file stays for the reporter). Used in the atfork child and at exit. */
void sw_ring_detach(struct sw_ring *r);

/*
 * Clears the "producer alive" hint in the header (the process is exiting normally). A hint
 * only, shown by `swagent status`: the reporter decides death from the pid and its start time.
 * Not for the atfork child (the parent still produces). Hot-path safe.
 */
void sw_ring_mark_exited(struct sw_ring *r);

/*
 * Opens the runtime directory `dir` (O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC), creating it 0700 when
 * missing and `create` is set. Refuses (-EPERM) a directory not owned by the effective uid or
 * whose mode is not exactly 0700, and (-ENOTDIR) a symlink or non-directory. Returns the
 * directory fd (close it with syscall(SYS_close) in the agent) or a negative errno.
 */
int sw_ring_dir_open(const char *dir, bool create);

/*
 * Reads field 22 (start time in clock ticks since boot) of /proc/<pid>/stat, to tell a live
 * process from a new one that reuses its pid. Raw syscalls, no allocation: usable by the agent
 * at init (pid = getpid()) to fill sw_ring_meta.proc_start_ticks. Returns 0 or a negative errno.
 */
int sw_ring_proc_start_ticks(int pid, uint64_t *out);

/* ---- consumer side (swagent-reporter, tests) ---- */

/*
 * Opens and maps an existing ring file read-write, validating it: a regular file (not a
 * symlink) owned by the effective uid, mode 0600, magic, version, and sizes consistent with
 * the file size. Returns 0, -EAGAIN while the creator has not finished initialising it,
 * -EBADMSG or -EPERM for a file that is not a valid ring of ours, or another negative errno.
 * The meta returned later by sw_ring_get_meta is a private, NUL-terminated copy.
 */
int sw_ring_open(const char *path, struct sw_ring **out);

/*
 * Reads the record at the consumer cursor without releasing it. Returns 1 and sets the out
 * parameters, 0 when no committed record is there, or -EBADMSG when the ring is corrupt.
 * `cursor` starts at sw_ring_tail() and is advanced to *next_cursor after each record, so a
 * batch of records can be read before any is released. 0 is also returned for a record still
 * being written (BUSY) or reserved but without a header yet: call sw_ring_skip_stuck when its
 * producer is known to be dead. The payload points into shared memory: copy it before parsing
 * if the producer may still be running (it cannot legally change a committed record, but the
 * consumer must not depend on that).
 */
int sw_ring_peek(struct sw_ring *r, uint64_t cursor, const void **payload, uint32_t *len,
                 uint16_t *type, uint64_t *next_cursor);

/* The position of the oldest unreleased record. */
uint64_t sw_ring_tail(const struct sw_ring *r);

/*
 * Releases every record before `cursor` (they were delivered or spooled), making room for
 * producers. `cursor` must be one returned by sw_ring_peek.
 */
void sw_ring_release(struct sw_ring *r, uint64_t cursor);

/* True when no committed or in-progress record is left. */
bool sw_ring_empty(const struct sw_ring *r);

/* The producers' reserve position (untrusted: compare with tail and the capacity). */
uint64_t sw_ring_head(const struct sw_ring *r);

/*
 * Skips the record at `cursor` when its producer died between reserve and commit: a BUSY
 * record is skipped by its length; a header still 0 (the process died between reserving and
 * writing the header) makes everything up to head unreadable, so the cursor jumps to head.
 * Call it only when the producing process is known to be dead. Returns 1 and sets
 * *next_cursor (the skipped records are counted as dropped), 0 when there is nothing to skip
 * (cursor at head, or a committed record is there), or -EBADMSG.
 */
int sw_ring_skip_stuck(struct sw_ring *r, uint64_t cursor, uint64_t *next_cursor);

/*
 * Finishes a release that a previous consumer was killed in the middle of (it had zeroed part
 * of the released span but not published the new tail). Call once when a process becomes the
 * consumer of a ring (drain), never from a mere observer (`swagent status`). Returns 1 when a
 * release was completed, 0 when there was none, -EBADMSG for a corrupt header.
 */
int sw_ring_recover(struct sw_ring *r);

/* The file name (no directory) of a ring made by sw_ring_create; "" for an opened one. */
const char *sw_ring_name(const struct sw_ring *r);

/*
 * When the ring was created (CLOCK_REALTIME ns, untrusted). The reporter uses it to tell the
 * ring of an exec'ed image (same pid and start time, newer ring) from its predecessor's.
 */
uint64_t sw_ring_created_ns(const struct sw_ring *r);

/* The data area size in bytes (a power of two). */
size_t sw_ring_capacity(const struct sw_ring *r);

/* The "producer alive" hint (see sw_ring_mark_exited). */
bool sw_ring_alive_hint(const struct sw_ring *r);

const struct sw_ring_meta *sw_ring_get_meta(const struct sw_ring *r);
void sw_ring_get_stats(const struct sw_ring *r, struct sw_ring_stats *out);

/* Unmaps and frees the handle (consumer side). */
void sw_ring_close(struct sw_ring *r);

#ifdef SW_TESTING
size_t sw_ring_test_off_head(void);
size_t sw_ring_test_off_tail(void);
size_t sw_ring_test_off_release_to(void);
#endif

#endif /* SW_RING_H */
