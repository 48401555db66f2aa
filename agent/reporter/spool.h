/*
 * spool.h - the reporter's on-disk spool of segments it could not deliver (collector down).
 *
 * Rules: reporter process only, single-threaded, may allocate. One spool directory per user and
 * collector (swagent.spool_dir, default `<runtime_dir>/spool-<collector>`), mode 0700, owned by
 * us, not a symlink (the runtime directory's checks). Everything read back from it is treated as
 * untrusted input: lengths are checked, a damaged file yields only its valid prefix.
 *
 * Format. A spool file holds one batch: `seg-<seq, 16 digits>-<count>.swz`, zstd frames (one per
 * 32 KiB of content, so a cut file decodes up to its last whole frame) whose content is the magic
 * "SWSPOOL1" followed by `count` records u32 seg_len | i32 pid | u64 start_ms | u16 service_len |
 * u16 instance_len | service | instance | seg (a packed SegmentObject) (little-endian). The
 * sequence number only grows (the next is one past the largest present), so the file names sort
 * oldest first. A file is written as `<name>.tmp` (0600, O_EXCL|O_NOFOLLOW|O_CLOEXEC), fsync'ed,
 * renamed to its name, and the directory fsync'ed; only then does the caller release the ring
 * records it holds (sw_spool_commit returns 0). So a reporter killed at any moment leaves either a
 * complete file (the ring records may still be there too: then they are delivered twice) or a
 * `.tmp` file whose records are all still in their ring: `.tmp` files are removed when the spool is
 * opened. A file truncated or damaged on disk is read up to its first bad byte (zstd frame error,
 * short record), the rest is counted as lost (`damaged`).
 *
 * Cap: the files together stay under `max_bytes` (compressed size). Committing a batch that
 * would pass it first removes the oldest files; their segments are counted in `dropped` (and
 * logged). A batch larger than the cap alone is dropped and counted the same way.
 *
 * Replay: sw_spool_load_oldest hands out the oldest file's records; the caller sends them on
 * one collect stream and calls sw_spool_remove only when that stream ended OK.
 */
#ifndef SW_SPOOL_H
#define SW_SPOOL_H

#include "common.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

struct sw_spool;

/*
 * Parses a spool file's name, `seg-<seq>-<count>.swz` (see Format); false when the name is not
 * of that form. Inline: `swagent status` counts the spooled segments by their files' names.
 */
static inline bool sw_spool_parse_name(const char *name, uint64_t *seq, uint32_t *count)
{
    unsigned long long s;
    unsigned c;
    int used = 0;

    if (strncmp(name, "seg-", 4) != 0 || sscanf(name, "seg-%16llu-%u.swz%n", &s, &c, &used) != 2)
        return false;
    if (name[used] != '\0' || used < 10 || strcmp(name + used - 4, ".swz") != 0)
        return false;
    *seq = s;
    *count = c;
    return true;
}

/* One spooled segment and the identity of the process that made it. */
struct sw_spool_rec {
    int32_t pid;
    uint64_t start_ms;    /* the process's start (sw_ring_meta.start_time_ms) */
    const char *service;  /* NUL-terminated */
    const char *instance; /* NUL-terminated */
    const void *seg;      /* packed SegmentObject */
    size_t seg_len;
};

/* The records of one spool file (sw_spool_load_oldest); storage owned by the spool. */
struct sw_spool_batch {
    uint64_t seq;
    size_t n;                  /* records read */
    struct sw_spool_rec *recs; /* n records */
    bool damaged;              /* the file ended early or had bad bytes */
};

struct sw_spool_counters {
    uint64_t files;    /* files present */
    uint64_t bytes;    /* their size */
    uint64_t segments; /* segments in them (from their names) */
    uint64_t written;  /* segments spooled since open */
    uint64_t dropped;  /* segments lost to the byte cap since open */
    uint64_t dropped_files;
    uint64_t damaged;      /* segments lost to damaged files since open */
    uint64_t write_errors; /* failed commits */
};

/*
 * Opens (creating it 0700 if missing) the spool directory `dir` capped at `max_bytes`, removes
 * leftover `.tmp` files and lists the spool files. Returns NULL with errno set on failure.
 */
struct sw_spool *sw_spool_open(const char *dir, uint64_t max_bytes);

void sw_spool_close(struct sw_spool *s);

/* Appends a record to the batch being built (in memory). 0, -EINVAL or -ENOMEM. */
int sw_spool_add(struct sw_spool *s, const struct sw_spool_rec *r);

/* Records in the batch being built. */
size_t sw_spool_pending(const struct sw_spool *s);

/*
 * Writes the batch being built as a new spool file, durably (see above), enforcing the cap.
 * Returns 0 when the segments are on disk or were dropped by the cap (counted: the caller may
 * release them either way), or a negative errno when writing failed (nothing written; the
 * caller keeps the records in their ring). The batch is empty afterwards either way.
 */
int sw_spool_commit(struct sw_spool *s);

/* Discards the batch being built. */
void sw_spool_abort(struct sw_spool *s);

/*
 * Loads the oldest spool file. Returns 1 and fills *b (valid until the next load or close),
 * 0 when the spool is empty, or a negative errno. A file that yields no record at all is
 * removed (counted as damaged) and the next one is tried.
 */
int sw_spool_load_oldest(struct sw_spool *s, struct sw_spool_batch *b);

/* Removes spool file `seq` (its batch was delivered). 0 or a negative errno. */
int sw_spool_remove(struct sw_spool *s, uint64_t seq);

bool sw_spool_empty(const struct sw_spool *s);

void sw_spool_get_counters(const struct sw_spool *s, struct sw_spool_counters *out);

const char *sw_spool_dir(const struct sw_spool *s);

#endif /* SW_SPOOL_H */
