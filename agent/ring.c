/*
 * ring.c - the shared-memory MPSC ring of finished segments (see ring.h for the contract).
 *
 * Rules:
 * - sw_ring_reserve, sw_ring_commit, sw_ring_count_drop and sw_ring_mark_exited run on
 *   application threads: no malloc, no lock, no syscall, no blocking, errno untouched.
 * - Creation and the consumer side make syscalls with raw syscall(2) for the names the agent
 *   interposes (openat, read, close), because this file is linked into libswagent.so.
 * - The consumer treats the mapping as untrusted input: every position and length read from
 *   shared memory is validated before use; the producer uses only its private copy of the
 *   size, so a corrupted header can never make it write outside the mapping.
 *
 * Positions: `head` (next byte to reserve) and `tail` (oldest unreleased byte) are 64-bit
 * byte counts that only grow; the offset in the data area is `pos & (data_bytes - 1)`.
 * Records are { 8-byte header word; payload } padded to 8 bytes. A producer reserves with a
 * CAS on head (full when head + need - tail > data_bytes: the drop is counted), writes the
 * header BUSY|len, fills the payload, then stores COMMITTED|len with release order. A record
 * that would straddle the end of the data area is preceded by a committed PAD record that
 * fills to the end. The consumer zeroes everything it releases before it publishes the new
 * tail, so a zero header word below head means "reserved, not written yet".
 *
 * First turn. A new ring's file is sparse: its pages are allocated and mapped into the
 * producing process SW_RING_MAP_CHUNK at a time, just ahead of the producers, by
 * MADV_POPULATE_WRITE (ring_map_ahead), and `mapped` says how far. A producer never writes
 * beyond `mapped` (the fast path's room test uses it as the end of the data area; the general
 * path maps the next chunk before its CAS, or drops the record when the kernel cannot allocate
 * it: a full tmpfs, where writing would raise SIGBUS). So writing the ring takes no page fault
 * (~10 us each on the bench's VM, one per 4 KiB, 512 over a 2 MiB ring's first turn) and
 * creating it allocates 64 KiB instead of the whole ring: a process that commits a few
 * segments and exits (curl, a CGI program) no longer pays for 2 MiB it never uses. Once the
 * first turn is over, `mapped` is the data area's size and nothing of this runs again. On a
 * kernel without MADV_POPULATE_WRITE (before 5.14) the whole file is allocated at creation
 * (fallocate) and its pages fault in as they are first written.
 */
#include "common.h"

#include "record.h"
#include "ring.h"

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The first turn's unit of allocation and mapping (see "First turn" above): 16 pages, one
 * madvise per ~400 nginx segments. Measured on the bench's VM, a 2 MiB turn of 160-byte
 * records: 512 page faults, 5.3 ms; mapped 64 KiB ahead, 0 faults and 32 calls of ~11 us; mapped
 * whole at once, one call of ~250 us (what creation cost before). */
#define SW_RING_MAP_CHUNK (64u << 10)

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ring header word layout assumes a little-endian machine"
#endif

/* The header page shared by producers and the consumer. */
struct ring_shared {
    _Atomic uint64_t magic;                  /* SW_RING_MAGIC, stored last at creation (release) */
    uint32_t version;                        /* SW_RING_VERSION */
    uint32_t hdr_bytes;                      /* SW_RING_HDR_BYTES */
    uint64_t data_bytes;                     /* size of the data area, a power of two */
    uint64_t file_bytes;                     /* hdr_bytes + data_bytes */
    struct sw_ring_meta meta;                /* the producing process */
    _Alignas(64) _Atomic uint64_t head;      /* producers' reserve position */
    _Alignas(64) _Atomic uint64_t tail;      /* consumer's release position */
    _Alignas(64) _Atomic uint64_t committed; /* struct sw_ring_stats */
    _Atomic uint64_t dropped;
    _Atomic uint64_t consumed;
    _Atomic uint32_t alive;                   /* 1 from creation until sw_ring_mark_exited */
    _Alignas(64) _Atomic uint64_t release_to; /* a release in progress (see sw_ring_recover) */
    uint64_t created_ns; /* CLOCK_REALTIME at creation: orders rings of one pid */
    /* Added last (rings of older builds have 0 here, their header page being zeroed): traces
     * not started because the ring was nearly full (sw_ring_count_shed). */
    _Alignas(64) _Atomic uint64_t shed;
    /* Added after shed (0 in older rings): exits whose request was not known (trace.c). */
    _Atomic uint64_t parent_unknown;
    /* Added after parent_unknown (0 in older rings): requests kept beyond the sampling quota
     * (trace.c, "Keeping beyond the quota"), by reason, and those its own limit refused. */
    _Atomic uint64_t kept[SW_RING_KEEP_N];
    /* Added after kept (0 in older rings): the HTTP/2 module's counters (enum sw_ring_h2). */
    _Atomic uint64_t h2[SW_RING_H2_N];
};

_Static_assert(sizeof(struct ring_shared) <= SW_RING_HDR_BYTES, "ring header page too small");
_Static_assert(offsetof(struct ring_shared, tail) - offsetof(struct ring_shared, head) ==
                   SW_RING_TAIL_AFTER_HEAD * sizeof(uint64_t),
               "sw_ring_fill_head: tail is SW_RING_TAIL_AFTER_HEAD words after head");
_Static_assert(sizeof(struct sw_ring_rec_hdr) == 8, "record header must be 8 bytes");

/* A process-private handle: the sizes here are trusted, the shared header's are not. */
struct sw_ring {
    struct ring_shared *sh;     /* the mapping (header page first) */
    uint8_t *data;              /* sh + SW_RING_HDR_BYTES */
    uint64_t data_bytes;        /* private copy, validated */
    uint64_t mask;              /* data_bytes - 1 */
    _Atomic uint64_t mapped;    /* producer: data bytes allocated and mapped (see "First turn") */
    _Atomic uint32_t map_fails; /* ring_map_ahead's failed calls since its last success */
    size_t map_bytes;           /* length of the mapping */
    struct sw_ring_meta meta;   /* consumer: a private NUL-terminated copy */
    char name[64];              /* the file name (without the directory) when created here */
};

#define REC_ALIGN 8u
#define WORD_STATE_MASK (SW_RING_BUSY | SW_RING_COMMITTED)

static inline uint64_t rec_total(uint32_t len)
{
    return sizeof(struct sw_ring_rec_hdr) + (((uint64_t)len + REC_ALIGN - 1) & ~(uint64_t)7);
}

static inline uint64_t hdr_word(uint32_t state, uint32_t len, uint16_t type)
{
    return (uint64_t)(state | (len & SW_RING_LEN_MASK)) | ((uint64_t)type << 32);
}

static inline _Atomic uint64_t *word_at(const struct sw_ring *r, uint64_t off)
{
    return (_Atomic uint64_t *)(void *)(r->data + off);
}

/* Allocates a handle without malloc (the producer may run under any allocator). */
static struct sw_ring *handle_alloc(void)
{
    void *p = mmap(NULL, sizeof(struct sw_ring), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void handle_free(struct sw_ring *r)
{
    munmap(r, sizeof(*r));
}

static int sys_close(int fd)
{
    return (int)syscall(SYS_close, fd);
}

/* ---------------------------------------------------------------- producer side */

/*
 * Maps the data area up to at least `upto` (see "First turn"): the next chunks, on the
 * producer's thread, before anything is reserved there. False when the kernel could not
 * allocate them: the caller drops its record. After a failure only every 256th call tries
 * again, so a full tmpfs costs the producers one system call per 256 records, not one each.
 * errno is kept.
 */
static SW_NOINLINE bool ring_map_ahead(struct sw_ring *r, uint64_t upto)
{
    if (SW_UNLIKELY(sw_atomic_load_relaxed(&r->map_fails)) &&
        (sw_atomic_add_relaxed(&r->map_fails, 1) & 255u) != 0)
        return false;
    uint64_t end = sw_atomic_load_acquire(&r->mapped);
    while (end < upto) {
        uint64_t to = (upto + SW_RING_MAP_CHUNK - 1) & ~(uint64_t)(SW_RING_MAP_CHUNK - 1);
        if (to > r->data_bytes)
            to = r->data_bytes;
        int e = errno;
        int rc = madvise(r->data + end, to - end, MADV_POPULATE_WRITE);
        errno = e;
        if (rc != 0) {
            if (!sw_atomic_load_relaxed(&r->map_fails))
                sw_atomic_store_relaxed(&r->map_fails, 1);
            return false;
        }
        sw_atomic_store_relaxed(&r->map_fails, 0);
        /* Another thread may have mapped some of it meanwhile (mapping twice is harmless):
         * the larger end stays. */
        if (sw_atomic_cas_acq_rel(&r->mapped, &end, to))
            return true;
    }
    return true;
}

SW_HOT void *sw_ring_reserve(struct sw_ring *r, uint32_t len, uint16_t type)
{
    struct ring_shared *sh = r->sh;
    if (SW_UNLIKELY(len > SW_REC_MAX_LEN || type == SW_RING_PAD))
        goto drop;
    uint64_t need = rec_total(len);
    if (SW_UNLIKELY(need > r->data_bytes))
        goto drop;

    uint64_t head = sw_atomic_load_relaxed(&sh->head);
    uint64_t pad;
    unsigned stale = 0;
    for (;;) {
        uint64_t tail = sw_atomic_load_acquire(&sh->tail);
        if (SW_UNLIKELY((int64_t)(head - tail) < 0)) {
            /*
             * Our head is stale: other producers moved head on and the consumer released past
             * it. head - tail would wrap and look like a full ring (a spurious drop, seen in
             * safety_forkstorm under TSan): read head again. A tail that stays ahead of head
             * is a corrupt header (the ring is shared memory another process can write): drop
             * after a few tries instead of spinning forever on the application's thread
             * (found by fuzz_record).
             */
            if (++stale > 8)
                goto drop;
            head = sw_atomic_load_acquire(&sh->head);
            continue;
        }
        uint64_t room = r->data_bytes - (head & r->mask);
        pad = need > room ? room : 0;
        /* Producers only ever move head by multiples of 8: an unaligned head is a corrupt
         * header, and its PAD word (8 bytes at head) would be written past the end of the
         * data area when fewer than 8 bytes are left (found by fuzz_record). */
        if (SW_UNLIKELY(head + pad + need - tail > r->data_bytes || (head & (REC_ALIGN - 1))))
            goto drop;
        /* First turn: what this reservation writes must be mapped before it is reserved (a PAD
         * runs to the end, and the consumer zeroes all of it). */
        uint64_t upto = pad ? r->data_bytes : (head & r->mask) + need;
        if (SW_UNLIKELY(upto > sw_atomic_load_relaxed(&r->mapped)) && !ring_map_ahead(r, upto))
            goto drop;
        if (sw_atomic_cas_acq_rel(&sh->head, &head, head + pad + need))
            break;
    }
    if (pad)
        sw_atomic_store_release(word_at(r, head & r->mask),
                                hdr_word(SW_RING_COMMITTED, (uint32_t)(pad - 8), SW_RING_PAD));
    uint64_t off = (head + pad) & r->mask;
    sw_atomic_store_relaxed(word_at(r, off), hdr_word(SW_RING_BUSY, len, type));
    return r->data + off + sizeof(struct sw_ring_rec_hdr);
drop:
    sw_atomic_add_relaxed(&sh->dropped, 1);
    return NULL;
}

SW_HOT void sw_ring_commit(struct sw_ring *r, void *payload)
{
    _Atomic uint64_t *w = (_Atomic uint64_t *)(void *)((uint8_t *)payload - 8);
    uint64_t v = sw_atomic_load_relaxed(w);
    v = (v & ~(uint64_t)WORD_STATE_MASK) | SW_RING_COMMITTED;
    sw_atomic_store_release(w, v);
    sw_atomic_add_relaxed(&r->sh->committed, 1);
}

static SW_NOINLINE bool ring_put_any(struct sw_ring *r, const void *src, uint32_t len,
                                     uint16_t type)
{
    void *p = sw_ring_reserve(r, len, type);
    if (!p)
        return false;
    memcpy(p, src, len);
    sw_ring_commit(r, p);
    return true;
}

/*
 * reserve + copy + commit of a record that is already complete in the caller's memory. The
 * usual case (the record fits before the end of the data area, the ring has room, the CAS wins
 * the first time) is handled here with the header word written directly: BUSY|len, the
 * payload, COMMITTED|len (release), as sw_ring_reserve and sw_ring_commit would. Anything else
 * (a wrap with its PAD record, a full ring, contention) goes through sw_ring_reserve.
 */
static inline __attribute__((always_inline)) bool ring_put_in(struct sw_ring *r, const void *src,
                                                              uint32_t len, uint16_t type)
{
    if (SW_UNLIKELY(len > SW_REC_MAX_LEN || type == SW_RING_PAD))
        return ring_put_any(r, src, len, type);
    struct ring_shared *sh = r->sh;
    uint64_t need = rec_total(len);
    uint64_t head = sw_atomic_load_relaxed(&sh->head);
    uint64_t tail = sw_atomic_load_acquire(&sh->tail);
    uint64_t off = head & r->mask;
    /* head - tail as unsigned: a stale head (behind tail) is huge and takes the slow path.
     * `mapped` is the end of the data area once the first turn is over (see "First turn"). */
    if (SW_UNLIKELY(off + need > sw_atomic_load_relaxed(&r->mapped) ||
                    head - tail > r->data_bytes - need ||
                    !sw_atomic_cas_acq_rel(&sh->head, &head, head + need)))
        return ring_put_any(r, src, len, type);
    _Atomic uint64_t *w = word_at(r, off);
    sw_atomic_store_relaxed(w, hdr_word(SW_RING_BUSY, len, type));
    /* Counted before the copy (a statistic that nothing orders with the record; early, it keeps
     * consumed <= committed), so only the copy's destination is live across the copy: the
     * header word is found again from there. */
    sw_atomic_add_relaxed(&sh->committed, 1);
    uint8_t *p = memcpy((uint8_t *)(void *)w + sizeof(struct sw_ring_rec_hdr), src, len);
    w = (_Atomic uint64_t *)(void *)(p - sizeof(struct sw_ring_rec_hdr));
    sw_atomic_store_release(w, sw_atomic_load_relaxed(w) ^ (SW_RING_BUSY | SW_RING_COMMITTED));
    /*
     * The next record's lines, fetched now for the next put. The data area (2 MiB by default)
     * is written once per turn, so its lines are cold, and last written by the consumer,
     * which zeroes what it releases: most likely each line of a record missed, and the next
     * locked instruction waited for all of them (measured: the time saved, not the misses).
     * Fetched here, they arrive while the application works on its next request. A hint
     * only: nothing is written, no fault (a line past the end of the data area, at the end of
     * a turn, is only a wasted hint). 512 bytes, eight instructions without a loop (a loop
     * with the mask per line cost ~55 instructions per request): a few records ahead (an
     * nginx entry's record takes 160 bytes of the ring). 384 bytes did as well in nginx
     * (bench/insitu.sh: -1 ns paired).
     */
    const uint8_t *next = r->data + ((off + need) & r->mask);
    __builtin_prefetch(next, 1, 3);
    __builtin_prefetch(next + 64, 1, 3);
    __builtin_prefetch(next + 128, 1, 3);
    __builtin_prefetch(next + 192, 1, 3);
    __builtin_prefetch(next + 256, 1, 3);
    __builtin_prefetch(next + 320, 1, 3);
    __builtin_prefetch(next + 384, 1, 3);
    __builtin_prefetch(next + 448, 1, 3);
    return true;
}

/* ring_put_in of a segment record: with the type known, fewer values are live and fewer tests
 * made. */
SW_HOT_PATH bool sw_ring_put_segment(struct sw_ring *r, const void *src, uint32_t len)
{
    return ring_put_in(r, src, len, SW_REC_SEGMENT);
}

void sw_ring_count_drop(struct sw_ring *r)
{
    sw_atomic_add_relaxed(&r->sh->dropped, 1);
}

void sw_ring_count_shed(struct sw_ring *r)
{
    sw_atomic_add_relaxed(&r->sh->shed, 1);
}

void sw_ring_count_parent_unknown(struct sw_ring *r)
{
    sw_atomic_add_relaxed(&r->sh->parent_unknown, 1);
}

void sw_ring_count_keep(struct sw_ring *r, enum sw_ring_keep k)
{
    if ((unsigned)k < SW_RING_KEEP_N)
        sw_atomic_add_relaxed(&r->sh->kept[k], 1);
}

void sw_ring_count_h2(struct sw_ring *r, enum sw_ring_h2 k)
{
    if ((unsigned)k < SW_RING_H2_N)
        sw_atomic_add_relaxed(&r->sh->h2[k], 1);
}

const _Atomic uint64_t *sw_ring_fill_head(const struct sw_ring *r)
{
    return &r->sh->head;
}

void sw_ring_mark_exited(struct sw_ring *r)
{
    sw_atomic_store_release(&r->sh->alive, 0);
}

void sw_ring_detach(struct sw_ring *r)
{
    if (!r)
        return;
    SW_SAVE_ERRNO({
        munmap(r->sh, r->map_bytes);
        handle_free(r);
    });
}

/* ---------------------------------------------------------------- files and directories */

int sw_ring_dir_open(const char *dir, bool create)
{
    int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    bool made = false;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, dir, flags);
    if (fd < 0 && errno == ENOENT && create) {
        if (syscall(SYS_mkdirat, AT_FDCWD, dir, 0700) == 0)
            made = true;
        else if (errno != EEXIST)
            return -errno;
        fd = (int)syscall(SYS_openat, AT_FDCWD, dir, flags);
    }
    if (fd < 0)
        return errno == ELOOP || errno == ENOTDIR ? -ENOTDIR : -errno;
    if (made)
        (void)fchmod(fd, 0700); /* the umask may have removed bits we never wanted anyway */
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = -errno;
        sys_close(fd);
        return e;
    }
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 07777) != 0700) {
        sys_close(fd);
        return -EPERM;
    }
    return fd;
}

static size_t put_dec(char *p, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

static uint64_t random64(void)
{
    uint64_t v = 0;
    if (syscall(SYS_getrandom, &v, sizeof(v), 0x01 /* GRND_NONBLOCK */) == (long)sizeof(v))
        return v;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    v = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec ^
        (uint64_t)(uintptr_t)&v ^ ((uint64_t)getpid() << 32);
    return v;
}

/* Formats `ring-<pid>-<16 hex>.swr` into `buf` (at least 64 bytes). */
static void ring_name(char *buf, int pid, uint64_t nonce)
{
    static const char hex[] = "0123456789abcdef";
    char *p = buf;
    memcpy(p, "ring-", 5);
    p += 5;
    p += put_dec(p, (uint64_t)(pid < 0 ? 0 : pid));
    *p++ = '-';
    for (int i = 15; i >= 0; i--)
        *p++ = hex[(nonce >> (i * 4)) & 0xf];
    memcpy(p, ".swr", 5);
}

static uint64_t round_data_bytes(size_t want)
{
    uint64_t n = SW_RING_MIN_DATA;
    while (n < want && n < SW_RING_MAX_DATA)
        n <<= 1;
    return n;
}

int sw_ring_create(const char *dir, const struct sw_ring_meta *meta, size_t data_bytes,
                   struct sw_ring **out)
{
    int saved = errno;
    int rc;
    int dfd = sw_ring_dir_open(dir, true);
    if (dfd < 0) {
        errno = saved;
        return dfd;
    }
    uint64_t data = round_data_bytes(data_bytes);
    uint64_t file = SW_RING_HDR_BYTES + data;
    char name[64];
    int fd = -1;
    for (int i = 0; i < 8 && fd < 0; i++) {
        ring_name(name, getpid(), random64());
        fd = (int)syscall(SYS_openat, dfd, name, O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_RDWR,
                          0600);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        rc = -errno;
        goto fail_dir;
    }
    (void)fchmod(fd, 0600);
    /* Sparse: the data area is allocated as the first turn reaches it (see "First turn"). */
    if (ftruncate(fd, (off_t)file) != 0) {
        rc = -errno;
        goto fail_file;
    }
    void *map = mmap(NULL, file, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        rc = -errno;
        goto fail_file;
    }
    /* The header page and the first chunk, allocated and mapped now. */
    uint64_t mapped = data < SW_RING_MAP_CHUNK ? data : SW_RING_MAP_CHUNK;
    if (madvise(map, SW_RING_HDR_BYTES + mapped, MADV_POPULATE_WRITE) != 0) {
        if (errno != EINVAL) { /* no room (a full tmpfs: EFAULT), no memory */
            rc = -errno;
            munmap(map, file);
            goto fail_file;
        }
        /*
         * Before Linux 5.14: allocate the whole file now, or on a full tmpfs the first write
         * into a page would die of SIGBUS (where fallocate is not supported, as it is).
         */
        if (syscall(SYS_fallocate, fd, 0, (off_t)0, (off_t)file) != 0 && errno != EOPNOTSUPP &&
            errno != ENOSYS) {
            rc = -errno;
            munmap(map, file);
            goto fail_file;
        }
        mapped = data;
    }
    struct sw_ring *r = handle_alloc();
    if (!r) {
        rc = -ENOMEM;
        munmap(map, file);
        goto fail_file;
    }
    sys_close(fd);
    sys_close(dfd);

    memcpy(r->name, name, sizeof(r->name));
    r->sh = map;
    r->data = (uint8_t *)map + SW_RING_HDR_BYTES;
    r->data_bytes = data;
    r->mask = data - 1;
    sw_atomic_store_relaxed(&r->mapped, mapped);
    r->map_bytes = file;
    if (meta)
        r->meta = *meta;
    struct ring_shared *sh = r->sh;
    sh->version = SW_RING_VERSION;
    sh->hdr_bytes = SW_RING_HDR_BYTES;
    sh->data_bytes = data;
    sh->file_bytes = file;
    sh->meta = r->meta;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    sh->created_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
    sh->meta.service[SW_RING_NAME_MAX - 1] = '\0';
    sh->meta.instance[SW_RING_NAME_MAX - 1] = '\0';
    sh->meta.collector[SW_RING_NAME_MAX - 1] = '\0';
    sh->meta.exe[SW_RING_NAME_MAX - 1] = '\0';
    sw_atomic_store_relaxed(&sh->alive, 1);
    sw_atomic_store_release(&sh->magic, SW_RING_MAGIC); /* the reporter may open it from now */
    *out = r;
    errno = saved;
    return 0;

fail_file:
    syscall(SYS_unlinkat, dfd, name, 0);
    sys_close(fd);
fail_dir:
    sys_close(dfd);
    errno = saved;
    return rc;
}

int sw_ring_proc_start_ticks(int pid, uint64_t *out)
{
    char path[48] = "/proc/";
    size_t n = 6 + put_dec(path + 6, (uint64_t)(pid < 0 ? 0 : pid));
    memcpy(path + n, "/stat", 6);
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char buf[1024];
    long got = syscall(SYS_read, fd, buf, sizeof(buf) - 1);
    int e = errno;
    sys_close(fd);
    if (got <= 0)
        return got < 0 ? -e : -EIO;
    buf[got] = '\0';
    /* The command name (field 2) may hold spaces and parentheses: start after the last ')'. */
    char *p = NULL;
    for (long i = got - 1; i >= 0; i--) {
        if (buf[i] == ')') {
            p = buf + i + 1;
            break;
        }
    }
    if (!p)
        return -EIO;
    /* p is at " S ppid ...": field 3 is the first token; field 22 is the 20th. */
    for (int field = 3; field <= 22; field++) {
        while (*p == ' ')
            p++;
        if (field == 22) {
            uint64_t v = 0;
            if (*p < '0' || *p > '9')
                return -EIO;
            while (*p >= '0' && *p <= '9')
                v = v * 10 + (uint64_t)(*p++ - '0');
            *out = v;
            return 0;
        }
        while (*p && *p != ' ')
            p++;
        if (!*p)
            return -EIO;
    }
    return -EIO;
}

/* ---------------------------------------------------------------- consumer side */

int sw_ring_open(const char *path, struct sw_ring **out)
{
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        rc = -errno;
        goto fail;
    }
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 07777) != 0600) {
        rc = -EPERM;
        goto fail;
    }
    if (st.st_size < (off_t)(SW_RING_HDR_BYTES + SW_RING_MIN_DATA) ||
        st.st_size > (off_t)(SW_RING_HDR_BYTES + (uint64_t)SW_RING_MAX_DATA)) {
        rc = st.st_size == 0 ? -EAGAIN : -EBADMSG; /* 0: the creator has not sized it yet */
        goto fail;
    }
    size_t file = (size_t)st.st_size;
    void *map = mmap(NULL, file, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        rc = -errno;
        goto fail;
    }
    sys_close(fd);
    struct ring_shared *sh = map;
    uint64_t magic = sw_atomic_load_acquire(&sh->magic);
    if (magic != SW_RING_MAGIC) {
        munmap(map, file);
        return magic == 0 ? -EAGAIN : -EBADMSG; /* 0: being created, the caller retries */
    }
    uint64_t data = sh->data_bytes;
    if (sh->version != SW_RING_VERSION || sh->hdr_bytes != SW_RING_HDR_BYTES ||
        data < SW_RING_MIN_DATA || data > SW_RING_MAX_DATA || (data & (data - 1)) != 0 ||
        sh->file_bytes != file || SW_RING_HDR_BYTES + data != file) {
        munmap(map, file);
        return -EBADMSG;
    }
    struct sw_ring *r = handle_alloc();
    if (!r) {
        munmap(map, file);
        return -ENOMEM;
    }
    r->sh = sh;
    r->data = (uint8_t *)map + SW_RING_HDR_BYTES;
    r->data_bytes = data;
    r->mask = data - 1;
    sw_atomic_store_relaxed(&r->mapped, data); /* a consumer writes only where a producer mapped */
    r->map_bytes = file;
    memcpy(&r->meta, (const void *)&sh->meta, sizeof(r->meta));
    r->meta.service[SW_RING_NAME_MAX - 1] = '\0';
    r->meta.instance[SW_RING_NAME_MAX - 1] = '\0';
    r->meta.collector[SW_RING_NAME_MAX - 1] = '\0';
    r->meta.exe[SW_RING_NAME_MAX - 1] = '\0';
    *out = r;
    return 0;
fail:
    sys_close(fd);
    return rc;
}

void sw_ring_close(struct sw_ring *r)
{
    if (!r)
        return;
    munmap(r->sh, r->map_bytes);
    handle_free(r);
}

uint64_t sw_ring_tail(const struct sw_ring *r)
{
    return sw_atomic_load_acquire(&r->sh->tail);
}

uint64_t sw_ring_head(const struct sw_ring *r)
{
    return sw_atomic_load_acquire(&r->sh->head);
}

size_t sw_ring_capacity(const struct sw_ring *r)
{
    return (size_t)r->data_bytes;
}

bool sw_ring_alive_hint(const struct sw_ring *r)
{
    return sw_atomic_load_relaxed(&r->sh->alive) != 0;
}

bool sw_ring_empty(const struct sw_ring *r)
{
    return sw_ring_head(r) == sw_ring_tail(r);
}

static void zero_span(struct sw_ring *r, uint64_t tail, uint64_t cursor);

/* Checks that [tail, head) is a plausible window and cursor lies in it, 8-aligned. */
static bool window_ok(const struct sw_ring *r, uint64_t tail, uint64_t head, uint64_t cursor)
{
    return head - tail <= r->data_bytes && cursor - tail <= head - tail && (cursor & 7) == 0;
}

/*
 * Decodes the header at `cursor`: returns 1 with a complete record (state may be BUSY), 0 when
 * the header is still zero, -EBADMSG when it cannot be a header written by our producer.
 */
static int read_hdr(const struct sw_ring *r, uint64_t cursor, uint64_t head, uint32_t *state,
                    uint32_t *len, uint16_t *type, uint64_t *total)
{
    uint64_t off = cursor & r->mask;
    uint64_t w = sw_atomic_load_acquire(word_at(r, off));
    if (w == 0)
        return 0;
    *state = (uint32_t)w & WORD_STATE_MASK;
    *len = (uint32_t)w & SW_RING_LEN_MASK;
    *type = (uint16_t)(w >> 32);
    if ((w >> 48) != 0 || (*state != SW_RING_BUSY && *state != SW_RING_COMMITTED))
        return -EBADMSG;
    *total = rec_total(*len);
    uint64_t room = r->data_bytes - off;
    if (*type == SW_RING_PAD) {
        if (*state != SW_RING_COMMITTED || *total != room)
            return -EBADMSG; /* a pad always fills exactly to the end */
    } else if (*len > SW_REC_MAX_LEN || *total > room) {
        return -EBADMSG;
    }
    if (*total > head - cursor)
        return -EBADMSG;
    return 1;
}

int sw_ring_peek(struct sw_ring *r, uint64_t cursor, const void **payload, uint32_t *len,
                 uint16_t *type, uint64_t *next_cursor)
{
    uint64_t tail = sw_ring_tail(r);
    uint64_t head = sw_ring_head(r);
    if (!window_ok(r, tail, head, cursor))
        return -EBADMSG;
    while (cursor != head) {
        uint32_t state, l;
        uint16_t t;
        uint64_t total;
        int rc = read_hdr(r, cursor, head, &state, &l, &t, &total);
        if (rc <= 0)
            return rc;
        if (state == SW_RING_BUSY)
            return 0;
        if (t == SW_RING_PAD) {
            cursor += total;
            continue;
        }
        *payload = r->data + (cursor & r->mask) + sizeof(struct sw_ring_rec_hdr);
        *len = l;
        *type = t;
        *next_cursor = cursor + total;
        return 1;
    }
    return 0;
}

int sw_ring_skip_stuck(struct sw_ring *r, uint64_t cursor, uint64_t *next_cursor)
{
    uint64_t tail = sw_ring_tail(r);
    uint64_t head = sw_ring_head(r);
    if (!window_ok(r, tail, head, cursor))
        return -EBADMSG;
    while (cursor != head) {
        uint32_t state, l;
        uint16_t t;
        uint64_t total;
        int rc = read_hdr(r, cursor, head, &state, &l, &t, &total);
        if (rc < 0)
            return rc;
        if (rc == 0) { /* died between the CAS and the header store: nothing after is framed */
            sw_atomic_add_relaxed(&r->sh->dropped, 1);
            *next_cursor = head;
            return 1;
        }
        if (t == SW_RING_PAD) {
            cursor += total;
            continue;
        }
        if (state == SW_RING_COMMITTED)
            return 0;
        sw_atomic_add_relaxed(&r->sh->dropped, 1);
        *next_cursor = cursor + total;
        return 1;
    }
    return 0;
}

void sw_ring_release(struct sw_ring *r, uint64_t cursor)
{
    uint64_t tail = sw_ring_tail(r);
    uint64_t head = sw_ring_head(r);
    if (cursor == tail || !window_ok(r, tail, head, cursor))
        return;
    /* Count the records being released (pads and skipped BUSY records excluded). */
    uint64_t n = 0;
    for (uint64_t p = tail; p < cursor;) {
        uint32_t state, l;
        uint16_t t;
        uint64_t total;
        if (read_hdr(r, p, cursor, &state, &l, &t, &total) <= 0)
            break;
        if (t != SW_RING_PAD && state == SW_RING_COMMITTED)
            n++;
        p += total;
    }
    /*
     * Zero the released bytes, then publish the tail: producers reuse them only after. The
     * target is persisted first so that a consumer killed while zeroing (which leaves zero
     * headers below head that nobody will ever write) is finished by sw_ring_recover.
     */
    sw_atomic_store_release(&r->sh->release_to, cursor);
    zero_span(r, tail, cursor);
    sw_atomic_store_release(&r->sh->tail, cursor);
    sw_atomic_add_relaxed(&r->sh->consumed, n);
}

int sw_ring_recover(struct sw_ring *r)
{
    uint64_t tail = sw_ring_tail(r);
    uint64_t head = sw_ring_head(r);
    uint64_t to = sw_atomic_load_acquire(&r->sh->release_to);
    if (head - tail > r->data_bytes)
        return -EBADMSG;
    if (to == tail || to == 0 || !window_ok(r, tail, head, to))
        return 0;
    zero_span(r, tail, to);
    sw_atomic_store_release(&r->sh->tail, to);
    return 1;
}

static void zero_span(struct sw_ring *r, uint64_t tail, uint64_t cursor)
{
    uint64_t off = tail & r->mask;
    uint64_t span = cursor - tail;
    uint64_t first = r->data_bytes - off < span ? r->data_bytes - off : span;
    memset(r->data + off, 0, first);
    if (span > first)
        memset(r->data, 0, span - first);
}

const struct sw_ring_meta *sw_ring_get_meta(const struct sw_ring *r)
{
    return &r->meta;
}

void sw_ring_get_stats(const struct sw_ring *r, struct sw_ring_stats *out)
{
    out->committed = sw_atomic_load_relaxed(&r->sh->committed);
    out->dropped = sw_atomic_load_relaxed(&r->sh->dropped);
    out->consumed = sw_atomic_load_relaxed(&r->sh->consumed);
    out->shed = sw_atomic_load_relaxed(&r->sh->shed);
    out->parent_unknown = sw_atomic_load_relaxed(&r->sh->parent_unknown);
    for (int k = 0; k < SW_RING_KEEP_N; k++)
        out->kept[k] = sw_atomic_load_relaxed(&r->sh->kept[k]);
    for (int k = 0; k < SW_RING_H2_N; k++)
        out->h2[k] = sw_atomic_load_relaxed(&r->sh->h2[k]);
}

uint64_t sw_ring_created_ns(const struct sw_ring *r)
{
    return r->sh->created_ns;
}

const char *sw_ring_name(const struct sw_ring *r)
{
    return r->name;
}

#ifdef SW_TESTING
/* Offsets of the shared positions, so tests can corrupt a ring image on purpose. */
size_t sw_ring_test_off_head(void)
{
    return offsetof(struct ring_shared, head);
}

size_t sw_ring_test_off_tail(void)
{
    return offsetof(struct ring_shared, tail);
}

size_t sw_ring_test_off_release_to(void)
{
    return offsetof(struct ring_shared, release_to);
}
#endif
