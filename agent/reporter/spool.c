/*
 * spool.c - zstd-compressed spool files of undeliverable segments (contract and format in
 * spool.h).
 *
 * Rules: reporter side, single-threaded, may allocate. Files are created 0600 with
 * O_EXCL|O_NOFOLLOW|O_CLOEXEC relative to a directory fd opened without following links; a
 * batch is durable (file and directory fsync'ed) before sw_spool_commit reports success. What
 * is read back is untrusted: every length is checked against the bytes actually decoded.
 */
#include "common.h"

#include "spool.h"

#include "log.h"
#include "ring.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#define SPOOL_MAGIC "SWSPOOL1"
#define SPOOL_MAGIC_LEN 8
#define REC_FIXED 20                  /* u32 + i32 + u64 + u16 + u16 */
#define SEG_MAX (16u * 1024u * 1024u) /* no segment record is larger */
#define DECODED_MAX (256u * 1024u * 1024u)
#define ZSTD_LEVEL 3
#define FRAME_BYTES (32u * 1024u) /* uncompressed bytes per zstd frame */

struct sfile {
    uint64_t seq;
    uint32_t count;
    uint64_t bytes;
};

struct sw_spool {
    char dir[PATH_MAX];
    int dfd;
    uint64_t max_bytes;
    uint64_t next_seq;
    struct sfile *files; /* sorted by seq */
    size_t nfiles, capfiles;
    /* The batch being built. */
    uint8_t *wbuf;
    size_t wlen, wcap;
    uint32_t wcount;
    /* The batch loaded for replay. */
    uint8_t *rbuf;
    size_t rcap;
    struct sw_spool_rec *recs;
    size_t caprecs;
    char (*names)[2][SW_RING_NAME_MAX];
    struct sw_spool_counters cnt;
    uint64_t damage_noted; /* seq of the last file whose damage was counted */
};

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static bool parse_name(const char *name, uint64_t *seq, uint32_t *count)
{
    return sw_spool_parse_name(name, seq, count);
}

static void file_name(char *out, size_t cap, uint64_t seq, uint32_t count, bool tmp)
{
    snprintf(out, cap, "seg-%016llu-%u.swz%s", (unsigned long long)seq, count, tmp ? ".tmp" : "");
}

static int cmp_files(const void *a, const void *b)
{
    const struct sfile *x = a, *y = b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int add_file(struct sw_spool *s, uint64_t seq, uint32_t count, uint64_t bytes)
{
    if (s->nfiles == s->capfiles) {
        size_t cap = s->capfiles ? s->capfiles * 2 : 64;
        struct sfile *v = realloc(s->files, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        s->files = v;
        s->capfiles = cap;
    }
    s->files[s->nfiles++] = (struct sfile){seq, count, bytes};
    s->cnt.files++;
    s->cnt.bytes += bytes;
    s->cnt.segments += count;
    return 0;
}

static void forget_file(struct sw_spool *s, size_t i)
{
    s->cnt.files--;
    s->cnt.bytes -= s->files[i].bytes;
    s->cnt.segments -= s->files[i].count;
    memmove(&s->files[i], &s->files[i + 1], (s->nfiles - i - 1) * sizeof(s->files[0]));
    s->nfiles--;
}

struct sw_spool *sw_spool_open(const char *dir, uint64_t max_bytes)
{
    struct sw_spool *s;
    DIR *d;
    struct dirent *e;
    int fd;

    if (!dir || strlen(dir) >= PATH_MAX) {
        errno = EINVAL;
        return NULL;
    }
    fd = sw_ring_dir_open(dir, true); /* ours, 0700, not a symlink */
    if (fd < 0) {
        errno = -fd;
        return NULL;
    }
    s = calloc(1, sizeof(*s));
    if (!s) {
        close(fd);
        errno = ENOMEM;
        return NULL;
    }
    snprintf(s->dir, sizeof(s->dir), "%s", dir);
    s->dfd = fd;
    s->max_bytes = max_bytes;
    s->next_seq = 1;
    d = fdopendir(dup(fd));
    if (!d) {
        sw_spool_close(s);
        return NULL;
    }
    while ((e = readdir(d)) != NULL) {
        uint64_t seq;
        uint32_t count;
        struct stat st;
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "seg-", 4) != 0)
            continue;
        if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != geteuid())
            continue;
        if (len > 4 && strcmp(e->d_name + len - 4, ".tmp") == 0) {
            /* A batch cut short by a kill: its records were never released from their ring. */
            unlinkat(fd, e->d_name, 0);
            SW_LOGI("spool: removed the unfinished %s (its segments are still in their ring)",
                    e->d_name);
            continue;
        }
        if (!parse_name(e->d_name, &seq, &count))
            continue;
        if (add_file(s, seq, count, (uint64_t)st.st_size) != 0)
            break;
        if (seq >= s->next_seq)
            s->next_seq = seq + 1;
    }
    closedir(d);
    if (s->nfiles > 1)
        qsort(s->files, s->nfiles, sizeof(s->files[0]), cmp_files);
    return s;
}

void sw_spool_close(struct sw_spool *s)
{
    if (!s)
        return;
    if (s->dfd >= 0)
        close(s->dfd);
    free(s->files);
    free(s->wbuf);
    free(s->rbuf);
    free(s->recs);
    free(s->names);
    free(s);
}

static int wreserve(struct sw_spool *s, size_t more)
{
    if (s->wcap - s->wlen >= more)
        return 0;
    size_t cap = s->wcap ? s->wcap : 64 * 1024;
    while (cap - s->wlen < more)
        cap *= 2;
    uint8_t *p = realloc(s->wbuf, cap);
    if (!p)
        return -ENOMEM;
    s->wbuf = p;
    s->wcap = cap;
    return 0;
}

int sw_spool_add(struct sw_spool *s, const struct sw_spool_rec *r)
{
    size_t sl = r->service ? strnlen(r->service, SW_RING_NAME_MAX - 1) : 0;
    size_t il = r->instance ? strnlen(r->instance, SW_RING_NAME_MAX - 1) : 0;
    uint8_t *p;

    if (!r->seg || r->seg_len == 0 || r->seg_len > SEG_MAX)
        return -EINVAL;
    if (s->wlen == 0) {
        if (wreserve(s, SPOOL_MAGIC_LEN) != 0)
            return -ENOMEM;
        memcpy(s->wbuf, SPOOL_MAGIC, SPOOL_MAGIC_LEN);
        s->wlen = SPOOL_MAGIC_LEN;
    }
    if (wreserve(s, REC_FIXED + sl + il + r->seg_len) != 0)
        return -ENOMEM;
    p = s->wbuf + s->wlen;
    put_le(p, r->seg_len, 4);
    put_le(p + 4, (uint32_t)r->pid, 4);
    put_le(p + 8, r->start_ms, 8);
    put_le(p + 16, sl, 2);
    put_le(p + 18, il, 2);
    p += REC_FIXED;
    memcpy(p, r->service, sl);
    p += sl;
    memcpy(p, r->instance, il);
    p += il;
    memcpy(p, r->seg, r->seg_len);
    s->wlen += REC_FIXED + sl + il + r->seg_len;
    s->wcount++;
    return 0;
}

size_t sw_spool_pending(const struct sw_spool *s)
{
    return s->wcount;
}

void sw_spool_abort(struct sw_spool *s)
{
    s->wlen = 0;
    s->wcount = 0;
}

static int write_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Removes the oldest file (cap), counting its segments as dropped. */
static void drop_oldest(struct sw_spool *s)
{
    char name[64];
    struct sfile f = s->files[0];

    file_name(name, sizeof(name), f.seq, f.count, false);
    unlinkat(s->dfd, name, 0);
    forget_file(s, 0);
    s->cnt.dropped += f.count;
    s->cnt.dropped_files++;
    SW_LOGW("spool: over swagent.spool_max_bytes (%llu): dropped %s, %u segment(s) lost "
            "(%llu so far)",
            (unsigned long long)s->max_bytes, name, f.count, (unsigned long long)s->cnt.dropped);
}

int sw_spool_commit(struct sw_spool *s)
{
    char name[64], tmp[64];
    uint32_t count = s->wcount;
    size_t bound;
    void *z;
    size_t zlen;
    int fd, rc;

    if (count == 0)
        return 0;
    /*
     * Independent frames of FRAME_BYTES each: a file cut short still decodes up to its last
     * whole frame (a single frame would be one block, unreadable when truncated).
     */
    bound = 0;
    for (size_t off = 0; off < s->wlen; off += FRAME_BYTES)
        bound += ZSTD_compressBound(s->wlen - off < FRAME_BYTES ? s->wlen - off : FRAME_BYTES);
    z = malloc(bound);
    ZSTD_CCtx *cc = z ? ZSTD_createCCtx() : NULL;
    if (!cc) {
        free(z);
        sw_spool_abort(s);
        s->cnt.write_errors++;
        return -ENOMEM;
    }
    zlen = 0;
    for (size_t off = 0; off < s->wlen; off += FRAME_BYTES) {
        size_t piece = s->wlen - off < FRAME_BYTES ? s->wlen - off : FRAME_BYTES;
        size_t r = ZSTD_compressCCtx(cc, (uint8_t *)z + zlen, bound - zlen, s->wbuf + off, piece,
                                     ZSTD_LEVEL);
        if (ZSTD_isError(r)) {
            zlen = r;
            break;
        }
        zlen += r;
    }
    ZSTD_freeCCtx(cc);
    sw_spool_abort(s);
    if (ZSTD_isError(zlen)) {
        free(z);
        s->cnt.write_errors++;
        return -EIO;
    }
    if (zlen > s->max_bytes) {
        free(z);
        s->cnt.dropped += count;
        SW_LOGW("spool: a batch of %u segment(s) (%zu bytes) is larger than "
                "swagent.spool_max_bytes: dropped",
                count, zlen);
        return 0;
    }
    while (s->nfiles > 0 && s->cnt.bytes + zlen > s->max_bytes)
        drop_oldest(s);

    file_name(name, sizeof(name), s->next_seq, count, false);
    file_name(tmp, sizeof(tmp), s->next_seq, count, true);
    fd = openat(s->dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = -errno;
        goto fail;
    }
    rc = write_all(fd, z, zlen);
    if (rc == 0 && fsync(fd) != 0)
        rc = -errno;
    close(fd);
    if (rc == 0 && renameat(s->dfd, tmp, s->dfd, name) != 0)
        rc = -errno;
    if (rc == 0 && fsync(s->dfd) != 0)
        rc = -errno;
    if (rc != 0) {
        unlinkat(s->dfd, tmp, 0);
        unlinkat(s->dfd, name, 0);
        goto fail;
    }
    free(z);
    add_file(s, s->next_seq, count, zlen);
    s->next_seq++;
    s->cnt.written += count;
    return 0;
fail:
    free(z);
    s->cnt.write_errors++;
    SW_LOGW("spool: cannot write %s/%s: %s", s->dir, tmp, strerror(-rc));
    return rc;
}

/* Decompresses `in` into s->rbuf, keeping what decodes before an error. Returns bytes. */
static size_t decompress_prefix(struct sw_spool *s, const uint8_t *in, size_t in_len, bool *damaged)
{
    ZSTD_DStream *ds = ZSTD_createDStream();
    ZSTD_inBuffer ib = {in, in_len, 0};
    size_t out = 0;

    if (!ds) {
        *damaged = true;
        return 0;
    }
    ZSTD_initDStream(ds);
    for (;;) {
        if (s->rcap - out < 64 * 1024) {
            size_t cap = s->rcap ? s->rcap * 2 : 256 * 1024;
            uint8_t *p = cap <= DECODED_MAX ? realloc(s->rbuf, cap) : NULL;
            if (!p) {
                *damaged = true;
                break;
            }
            s->rbuf = p;
            s->rcap = cap;
        }
        ZSTD_outBuffer ob = {s->rbuf + out, s->rcap - out, 0};
        size_t r = ZSTD_decompressStream(ds, &ob, &ib);
        out += ob.pos;
        if (ZSTD_isError(r)) {
            *damaged = true;
            break;
        }
        if (r == 0 && ib.pos == ib.size)
            break; /* the last frame is complete */
        if (r == 0)
            continue; /* the next frame */
        if (ib.pos == ib.size && ob.pos < ob.size) {
            *damaged = true; /* the frame was cut short */
            break;
        }
    }
    ZSTD_freeDStream(ds);
    return out;
}

/* Parses records out of s->rbuf[0..len) into s->recs; returns how many are whole. */
static size_t parse_records(struct sw_spool *s, size_t len, uint32_t expect, bool *damaged)
{
    size_t off = SPOOL_MAGIC_LEN, n = 0;

    if (len < SPOOL_MAGIC_LEN || memcmp(s->rbuf, SPOOL_MAGIC, SPOOL_MAGIC_LEN) != 0) {
        *damaged = true;
        return 0;
    }
    while (off < len) {
        const uint8_t *p = s->rbuf + off;
        if (len - off < REC_FIXED) {
            *damaged = true;
            break;
        }
        uint64_t sl = get_le(p, 4), svl = get_le(p + 16, 2), inl = get_le(p + 18, 2);
        if (sl == 0 || sl > SEG_MAX || svl >= SW_RING_NAME_MAX || inl >= SW_RING_NAME_MAX ||
            len - off - REC_FIXED < svl + inl + sl) {
            *damaged = true;
            break;
        }
        if (n == s->caprecs) {
            size_t cap = s->caprecs ? s->caprecs * 2 : 512;
            struct sw_spool_rec *v = realloc(s->recs, cap * sizeof(*v));
            char(*nm)[2][SW_RING_NAME_MAX] = realloc(s->names, cap * sizeof(*nm));
            if (v)
                s->recs = v;
            if (nm)
                s->names = nm;
            if (!v || !nm) {
                *damaged = true;
                break;
            }
            s->caprecs = cap;
        }
        memcpy(s->names[n][0], p + REC_FIXED, svl);
        s->names[n][0][svl] = '\0';
        memcpy(s->names[n][1], p + REC_FIXED + svl, inl);
        s->names[n][1][inl] = '\0';
        s->recs[n] = (struct sw_spool_rec){
            .pid = (int32_t)get_le(p + 4, 4),
            .start_ms = get_le(p + 8, 8),
            .service = s->names[n][0],
            .instance = s->names[n][1],
            .seg = p + REC_FIXED + svl + inl,
            .seg_len = sl,
        };
        n++;
        off += REC_FIXED + svl + inl + sl;
    }
    if (n != expect)
        *damaged = true;
    return n;
}

int sw_spool_load_oldest(struct sw_spool *s, struct sw_spool_batch *b)
{
    while (s->nfiles > 0) {
        struct sfile f = s->files[0];
        char name[64];
        struct stat st;
        bool damaged = false;
        size_t n = 0;
        uint8_t *in = NULL;
        int fd;

        file_name(name, sizeof(name), f.seq, f.count, false);
        fd = openat(s->dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
            (uint64_t)st.st_size <= DECODED_MAX) {
            in = malloc((size_t)st.st_size);
            size_t got = 0;
            while (in && got < (size_t)st.st_size) {
                ssize_t r = read(fd, in + got, (size_t)st.st_size - got);
                if (r < 0 && errno == EINTR)
                    continue;
                if (r <= 0)
                    break;
                got += (size_t)r;
            }
            if (in) {
                if (got < (size_t)st.st_size)
                    damaged = true;
                size_t dl = decompress_prefix(s, in, got, &damaged);
                n = parse_records(s, dl, f.count, &damaged);
            }
            free(in);
        } else if (fd < 0 && errno == ENOENT) {
            forget_file(s, 0); /* removed behind our back */
            if (fd >= 0)
                close(fd);
            continue;
        } else {
            damaged = true;
        }
        if (fd >= 0)
            close(fd);
        if (damaged && s->damage_noted != f.seq) {
            uint64_t lost = f.count > n ? f.count - n : 0;
            s->cnt.damaged += lost;
            s->damage_noted = f.seq;
            SW_LOGW("spool: %s is damaged: %zu of %u segment(s) readable, %llu lost", name, n,
                    f.count, (unsigned long long)lost);
        }
        if (n == 0) {
            unlinkat(s->dfd, name, 0);
            forget_file(s, 0);
            continue;
        }
        b->seq = f.seq;
        b->n = n;
        b->recs = s->recs;
        b->damaged = damaged;
        return 1;
    }
    return 0;
}

int sw_spool_remove(struct sw_spool *s, uint64_t seq)
{
    for (size_t i = 0; i < s->nfiles; i++) {
        if (s->files[i].seq != seq)
            continue;
        char name[64];
        file_name(name, sizeof(name), seq, s->files[i].count, false);
        int rc = unlinkat(s->dfd, name, 0) == 0 || errno == ENOENT ? 0 : -errno;
        forget_file(s, i);
        return rc;
    }
    return -ENOENT;
}

bool sw_spool_empty(const struct sw_spool *s)
{
    return s->nfiles == 0;
}

void sw_spool_get_counters(const struct sw_spool *s, struct sw_spool_counters *out)
{
    *out = s->cnt;
}

const char *sw_spool_dir(const struct sw_spool *s)
{
    return s->dir;
}
