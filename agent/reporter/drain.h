/*
 * drain.h - the reporter's view of every ring in the runtime directory.
 *
 * Reporter side, ordinary code (allocates, makes syscalls), single-threaded: one struct
 * sw_drain is used by one thread. Rings are untrusted input: files are adopted only when they
 * are regular files (not symlinks) owned by our uid with mode 0600 and a valid header, and
 * every record is validated by the ring code before it is handed out (the payload still has to
 * be parsed as untrusted bytes: see encode.h).
 *
 * Delivery contract (at-least-once, nothing committed is lost):
 *   sw_drain_scan()   adopts new rings, checks which producers are dead, removes the rings of
 *                     dead producers once they are fully drained and released. Call it
 *                     periodically (e.g. every second, and when sw_drain_dir_changed says
 *                     so) and before a heartbeat.
 *   sw_drain_next()   hands out the next record of some ring (round robin) WITHOUT releasing
 *                     it; the payload is a private copy, so a producer cannot change it while
 *                     it is parsed.
 *   sw_drain_commit() releases a ring up to the cursor of a handed-out record once that record
 *                     (and those before it in the same ring) is delivered or spooled. Commits
 *                     of one ring must come in hand-out order; committing the last record of a
 *                     batch commits the whole batch of that ring.
 *   sw_drain_rewind() forgets every handed-out but uncommitted record, so the next calls to
 *                     sw_drain_next() hand them out again (a failed batch).
 * A reporter that is killed loses nothing: records are released only by sw_drain_commit, and a
 * new reporter resumes every ring at its persisted tail (finishing a release interrupted by
 * the kill, see sw_ring_recover). Records handed out but not committed are delivered again.
 *
 * Dead producers: a ring's producer is dead when kill(pid, 0) fails with ESRCH, when
 * /proc/<pid>/stat's start time differs from meta.proc_start_ticks (pid reused), or when a
 * newer ring of the same pid and start time exists (the process exec'ed and made a new ring).
 * For a dead producer, a record stuck BUSY (killed between reserve and commit) is skipped and
 * counted as dropped. A corrupt ring is resynchronised at its head (its unread records are lost
 * and counted in `corrupt`); a file that never becomes a valid ring is removed once the pid in
 * its name is dead.
 */
#ifndef SW_DRAIN_H
#define SW_DRAIN_H

#include "common.h"

#include "ring.h"

#include <limits.h>

struct sw_drain;

/* One record handed out by sw_drain_next. */
struct sw_drained {
    uint64_t ring_id;                /* the ring, for sw_drain_commit */
    const struct sw_ring_meta *meta; /* its producer; valid while the ring is tracked, which is
                                        at least until this record is committed */
    const void *payload;             /* private copy, valid until the next sw_drain_next */
    uint32_t len;                    /* payload bytes */
    uint16_t type;                   /* SW_REC_SEGMENT, ... */
    uint64_t cursor;                 /* ring position after this record, for sw_drain_commit */
};

/* One ring, for heartbeats and `swagent status`. */
struct sw_drain_info {
    uint64_t ring_id;
    struct sw_ring_meta meta;   /* pid, start time, service, instance, collector, exe */
    char name[64];              /* file name in the runtime directory */
    bool alive;                 /* the producing process is alive (as of the last scan) */
    bool alive_hint;            /* the producer has not marked itself exited */
    struct sw_ring_stats stats; /* committed / dropped / consumed records */
    uint64_t capacity;          /* data bytes */
    uint64_t used;              /* bytes not yet released */
    uint64_t corrupt;           /* times this ring was found corrupt and resynchronised */
};

/* Totals since sw_drain_new. */
struct sw_drain_counters {
    uint64_t rings_adopted;  /* ring files opened */
    uint64_t rings_removed;  /* drained rings of dead producers unlinked */
    uint64_t files_rejected; /* files named like rings but not acceptable (owner, mode, header) */
    uint64_t stuck_skipped;  /* BUSY records of dead producers skipped */
    uint64_t corrupt;        /* corrupt-ring resynchronisations */
};

/*
 * Creates a drain over the runtime directory `dir` (created 0700 if missing; refused unless
 * owned by us and mode 0700). Returns NULL with errno set on failure. Scans once.
 */
struct sw_drain *sw_drain_new(const char *dir);

/* The same, adopting only the rings of `collector` (see sw_drain_set_collector). */
struct sw_drain *sw_drain_new_for(const char *dir, const char *collector);

/*
 * Adopts only rings whose meta.collector equals `collector` (compared on the
 * SW_RING_NAME_MAX - 1 bytes a ring keeps); rings of other collectors are left alone for their
 * own reporter, never removed. NULL adopts every ring (the default). Takes effect at the next
 * scan. Returns 0 or -ENAMETOOLONG.
 */
int sw_drain_set_collector(struct sw_drain *d, const char *collector);

/* Unmaps every ring and frees the drain (no file is removed). NULL is ignored. */
void sw_drain_free(struct sw_drain *d);

/* Adopts new rings, updates liveness, removes drained dead rings. Returns the number of rings
 * tracked, or a negative errno when the directory cannot be read. */
int sw_drain_scan(struct sw_drain *d);

/*
 * True when the directory may hold other files than at the last sw_drain_scan (its mtime,
 * ctime or inode differ, or it cannot be looked at), or that scan found a ring still being
 * made, which the next one adopts without any further change to the directory: one stat, where a
 * scan lists the directory, stats every ring and reads /proc for every producer. Timestamps are
 * only as fine as the kernel's clock tick, so a file made in the same tick as the scan, just after
 * it, may not show here: scan on a change and also at a slower fixed period.
 */
bool sw_drain_dir_changed(struct sw_drain *d);

/* Hands out the next record: 1 and fills *out, or 0 when no ring has a committed record. */
int sw_drain_next(struct sw_drain *d, struct sw_drained *out);

/* The same as sw_drain_next, from ring `ring_id` only (spooling one ring). */
int sw_drain_next_in(struct sw_drain *d, uint64_t ring_id, struct sw_drained *out);

/* Releases ring `ring_id` up to `cursor` (from a handed-out record). Unknown ids are ignored. */
void sw_drain_commit(struct sw_drain *d, uint64_t ring_id, uint64_t cursor);

/* Hands out again every record not yet committed (see above). */
void sw_drain_rewind(struct sw_drain *d);

/*
 * Bytes reserved in every tracked ring and not yet released (committed records waiting, plus
 * any being written), and in *max_permille the fullest ring's share of its capacity (0-1000).
 * Reads two counters per ring: cheap enough for every pass of the reporter's loop.
 */
uint64_t sw_drain_backlog(const struct sw_drain *d, unsigned *max_permille);

/* Fills up to `max` entries (one per tracked ring); returns the number of rings tracked. */
int sw_drain_list(struct sw_drain *d, struct sw_drain_info *out, int max);

void sw_drain_get_counters(const struct sw_drain *d, struct sw_drain_counters *out);

#endif /* SW_DRAIN_H */
