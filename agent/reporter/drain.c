/*
 * drain.c - finds the rings in the runtime directory and reads them (contract in drain.h).
 *
 * Rules: reporter side, single-threaded, may allocate. Nothing read from a ring file is
 * trusted: files are checked (lstat-like fstatat without following links, owner, mode) before
 * they are opened, sw_ring_open validates the header, sw_ring_peek every record, and payloads
 * are copied out of the shared mapping before anyone parses them.
 */
#include "common.h"

#include "drain.h"
#include "record.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One tracked ring. */
struct dring {
    struct sw_ring *r;
    uint64_t id;   /* handed to the caller in struct sw_drained */
    char name[64]; /* file name in the directory */
    dev_t dev;     /* identity of the file we mapped */
    ino_t ino;
    uint64_t rd;        /* read cursor: next position to peek */
    uint64_t handed;    /* cursor after the last record handed out */
    uint64_t committed; /* cursor of the last commit (or the tail when adopted) */
    bool alive;         /* producer alive at the last scan */
    bool superseded;    /* a newer ring of the same process exists (exec) */
    bool seen;          /* present in the directory at the last scan */
    uint64_t corrupt;   /* resynchronisations */
};

/*
 * A file named like a ring that could not be adopted (retried, removed once its pid is dead),
 * or a valid ring of another collector (left alone for the reporter of that collector).
 */
struct reject {
    char name[64];
    bool foreign; /* a valid ring of another collector */
    struct reject *next;
};

struct sw_drain {
    char dir[PATH_MAX];
    struct dring **v; /* tracked rings */
    size_t n, cap;
    size_t rr; /* round-robin position for sw_drain_next */
    uint64_t next_id;
    uint8_t *buf; /* SW_REC_MAX_LEN bytes: the private copy of a payload */
    struct reject *rejects;
    struct sw_drain_counters cnt;
    bool filter; /* adopt only rings of `collector` */
    char collector[SW_RING_NAME_MAX];
    struct stat seen_dir; /* the directory as the last scan found it (sw_drain_dir_changed) */
    bool have_seen_dir;
    bool creating; /* the last scan found a ring still being made (retried at the next) */
};

struct sw_drain *sw_drain_new(const char *dir)
{
    return sw_drain_new_for(dir, NULL);
}

struct sw_drain *sw_drain_new_for(const char *dir, const char *collector)
{
    if (!dir || strlen(dir) >= PATH_MAX) {
        errno = EINVAL;
        return NULL;
    }
    int fd = sw_ring_dir_open(dir, true);
    if (fd < 0) {
        errno = -fd;
        return NULL;
    }
    close(fd);
    struct sw_drain *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->buf = malloc(SW_REC_MAX_LEN);
    if (!d->buf) {
        free(d);
        errno = ENOMEM;
        return NULL;
    }
    memcpy(d->dir, dir, strlen(dir) + 1);
    d->next_id = 1;
    if (sw_drain_set_collector(d, collector) != 0) {
        sw_drain_free(d);
        errno = ENAMETOOLONG;
        return NULL;
    }
    sw_drain_scan(d);
    return d;
}

static void dring_free(struct dring *x)
{
    sw_ring_close(x->r);
    free(x);
}

void sw_drain_free(struct sw_drain *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n; i++)
        dring_free(d->v[i]);
    while (d->rejects) {
        struct reject *n = d->rejects->next;
        free(d->rejects);
        d->rejects = n;
    }
    free(d->v);
    free(d->buf);
    free(d);
}

/* Parses the pid out of `ring-<pid>-<nonce>.swr`; -1 when the name is not of that form. */
static int name_pid(const char *name)
{
    size_t n = strlen(name);
    if (n < 10 || n >= 64 || strncmp(name, "ring-", 5) != 0 || strcmp(name + n - 4, ".swr") != 0)
        return -1;
    long pid = 0;
    const char *p = name + 5;
    if (*p < '0' || *p > '9')
        return -1;
    while (*p >= '0' && *p <= '9') {
        pid = pid * 10 + (*p++ - '0');
        if (pid > 0x3fffffff)
            return -1;
    }
    return *p == '-' ? (int)pid : -1;
}

static bool pid_alive(int pid, uint64_t start_ticks)
{
    if (pid <= 0)
        return false;
    /* EPERM: a process of another user holds the pid now; the ring's producer was ours. */
    if (kill(pid, 0) != 0 && (errno == ESRCH || errno == EPERM))
        return false;
    if (start_ticks) {
        uint64_t now = 0;
        int rc = sw_ring_proc_start_ticks(pid, &now);
        if (rc == -ENOENT || rc == -ESRCH || (rc == 0 && now != start_ticks))
            return false;
    }
    return true;
}

static struct dring *find_name(struct sw_drain *d, const char *name)
{
    for (size_t i = 0; i < d->n; i++)
        if (strcmp(d->v[i]->name, name) == 0)
            return d->v[i];
    return NULL;
}

static struct reject *find_reject(struct sw_drain *d, const char *name)
{
    for (struct reject *r = d->rejects; r; r = r->next)
        if (strcmp(r->name, name) == 0)
            return r;
    return NULL;
}

static void add_reject(struct sw_drain *d, const char *name, bool foreign)
{
    if (find_reject(d, name))
        return;
    struct reject *r = calloc(1, sizeof(*r));
    if (!r)
        return;
    snprintf(r->name, sizeof(r->name), "%s", name);
    r->foreign = foreign;
    r->next = d->rejects;
    d->rejects = r;
    if (!foreign)
        d->cnt.files_rejected++;
}

int sw_drain_set_collector(struct sw_drain *d, const char *collector)
{
    if (!collector) {
        d->filter = false;
        return 0;
    }
    if (strlen(collector) >= sizeof(d->collector))
        return -ENAMETOOLONG;
    d->filter = true;
    memcpy(d->collector, collector, strlen(collector) + 1);
    /* Foreign rings already tracked stay until drained; new ones are no longer adopted. */
    return 0;
}

static void drop_reject(struct sw_drain *d, const char *name)
{
    for (struct reject **p = &d->rejects; *p; p = &(*p)->next) {
        if (strcmp((*p)->name, name) == 0) {
            struct reject *r = *p;
            *p = r->next;
            free(r);
            return;
        }
    }
}

/* Tries to adopt one directory entry. */
static void adopt(struct sw_drain *d, int dfd, const char *name)
{
    int pid = name_pid(name);
    if (pid < 0)
        return;
    struct reject *known = find_reject(d, name);
    if (known && known->foreign)
        return;
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return;
    bool ours = S_ISREG(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 07777) == 0600;
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/%s", d->dir, name);
    struct sw_ring *r = NULL;
    int rc = ours ? sw_ring_open(path, &r) : -EPERM;
    if (rc != 0) {
        /* Being created (-EAGAIN) is retried; a bad file of a dead process is removed. */
        if (rc != -EAGAIN)
            add_reject(d, name, false);
        else
            d->creating = true;
        if (ours && !pid_alive(pid, 0)) {
            unlinkat(dfd, name, 0);
            drop_reject(d, name);
        }
        return;
    }
    if (d->filter &&
        strncmp(sw_ring_get_meta(r)->collector, d->collector, SW_RING_NAME_MAX - 1) != 0) {
        sw_ring_close(r);
        add_reject(d, name, true); /* another collector's reporter drains it */
        return;
    }
    drop_reject(d, name);
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 16;
        struct dring **v = realloc(d->v, cap * sizeof(*v));
        if (!v) {
            sw_ring_close(r);
            return;
        }
        d->v = v;
        d->cap = cap;
    }
    struct dring *x = calloc(1, sizeof(*x));
    if (!x) {
        sw_ring_close(r);
        return;
    }
    sw_ring_recover(r); /* we are the consumer now: finish a release a killed reporter began */
    x->r = r;
    x->id = d->next_id++;
    snprintf(x->name, sizeof(x->name), "%s", name);
    x->dev = st.st_dev;
    x->ino = st.st_ino;
    x->rd = x->handed = x->committed = sw_ring_tail(r);
    x->alive = true;
    x->seen = true;
    d->v[d->n++] = x;
    d->cnt.rings_adopted++;
}

/* Releases what was read past the last hand-out (skipped or resynchronised bytes). */
static void release_skipped(struct dring *x)
{
    if (x->handed == x->committed && x->rd != x->committed) {
        sw_ring_release(x->r, x->rd);
        x->committed = x->handed = x->rd;
    }
}

/* The fields of a directory's stat that a file created, removed or renamed in it changes. */
static bool same_dir(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

bool sw_drain_dir_changed(struct sw_drain *d)
{
    struct stat st;

    if (!d->have_seen_dir || d->creating || stat(d->dir, &st) != 0)
        return true;
    return !same_dir(&st, &d->seen_dir);
}

int sw_drain_scan(struct sw_drain *d)
{
    int dfd = sw_ring_dir_open(d->dir, false);
    if (dfd < 0) {
        d->have_seen_dir = false;
        return dfd;
    }
    /* Before the listing: a change made while it is read shows at the next look. */
    d->have_seen_dir = fstat(dfd, &d->seen_dir) == 0;
    d->creating = false;
    DIR *dir = fdopendir(dfd);
    if (!dir) {
        int e = -errno;
        close(dfd);
        return e;
    }
    for (size_t i = 0; i < d->n; i++)
        d->v[i]->seen = false;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (strncmp(e->d_name, "ring-", 5) != 0)
            continue;
        struct dring *x = find_name(d, e->d_name);
        if (x) {
            struct stat st;
            if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == x->dev &&
                st.st_ino == x->ino)
                x->seen = true;
            continue; /* a replaced file is adopted once the old mapping is gone */
        }
        adopt(d, dfd, e->d_name);
    }

    /* Liveness: the pid, its start time, and no newer ring of the same process. */
    for (size_t i = 0; i < d->n; i++) {
        struct dring *x = d->v[i];
        const struct sw_ring_meta *m = sw_ring_get_meta(x->r);
        x->alive = pid_alive(m->pid, m->proc_start_ticks);
        x->superseded = false;
        for (size_t j = 0; j < d->n && x->alive; j++) {
            const struct sw_ring_meta *o = sw_ring_get_meta(d->v[j]->r);
            if (j != i && o->pid == m->pid && o->proc_start_ticks == m->proc_start_ticks &&
                sw_ring_created_ns(d->v[j]->r) > sw_ring_created_ns(x->r))
                x->superseded = true;
        }
        if (x->superseded)
            x->alive = false;
        release_skipped(x);
    }

    /* Remove drained rings of dead producers (and forget rings whose file vanished). */
    size_t k = 0;
    for (size_t i = 0; i < d->n; i++) {
        struct dring *x = d->v[i];
        uint64_t used = sw_ring_head(x->r) - sw_ring_tail(x->r);
        bool insane = used > sw_ring_capacity(x->r); /* can never be drained: give up */
        bool drained = (sw_ring_empty(x->r) || insane) && x->handed == x->committed;
        if (!x->alive && drained) {
            if (x->seen)
                unlinkat(dfd, x->name, 0);
            dring_free(x);
            d->cnt.rings_removed++;
            continue;
        }
        if (!x->seen && drained) {
            dring_free(x);
            continue;
        }
        d->v[k++] = x;
    }
    d->n = k;
    if (d->rr >= d->n)
        d->rr = 0;

    /* Rejected files whose creator is dead are garbage. */
    for (struct reject **p = &d->rejects; *p;) {
        struct reject *r = *p;
        struct stat st;
        bool gone = fstatat(dfd, r->name, &st, AT_SYMLINK_NOFOLLOW) != 0;
        if (!gone && !r->foreign && !pid_alive(name_pid(r->name), 0) && S_ISREG(st.st_mode) &&
            st.st_uid == geteuid()) {
            unlinkat(dfd, r->name, 0);
            gone = true;
        }
        if (gone) {
            *p = r->next;
            free(r);
        } else {
            p = &r->next;
        }
    }
    closedir(dir);
    return (int)d->n;
}

/* Reads the next record of one ring into d->buf; 1, or 0 when it has none now. */
static int next_in(struct sw_drain *d, struct dring *x, struct sw_drained *out)
{
    for (int guard = 0; guard < 64; guard++) {
        const void *p;
        uint32_t len;
        uint16_t type;
        uint64_t next;
        int rc = sw_ring_peek(x->r, x->rd, &p, &len, &type, &next);
        if (rc == 1) {
            if (len > SW_REC_MAX_LEN) /* sw_ring_peek guarantees it; never trust twice-read */
                return 0;
            memcpy(d->buf, p, len);
            x->rd = x->handed = next;
            out->ring_id = x->id;
            out->meta = sw_ring_get_meta(x->r);
            out->payload = d->buf;
            out->len = len;
            out->type = type;
            out->cursor = next;
            return 1;
        }
        if (rc == 0) {
            if (x->alive)
                return 0;
            /* The producer is dead: nobody will finish a BUSY record. */
            if (sw_ring_skip_stuck(x->r, x->rd, &next) == 1) {
                x->rd = next;
                d->cnt.stuck_skipped++;
                continue;
            }
            return 0;
        }
        /* Corrupt: resynchronise at head when the window is sane, else stop reading it. */
        uint64_t tail = sw_ring_tail(x->r), head = sw_ring_head(x->r);
        x->corrupt++;
        d->cnt.corrupt++;
        if (head - tail > sw_ring_capacity(x->r) || head - x->rd > head - tail || (head & 7) != 0)
            return 0;
        x->rd = head;
        release_skipped(x);
    }
    return 0;
}

int sw_drain_next(struct sw_drain *d, struct sw_drained *out)
{
    for (size_t k = 0; k < d->n; k++) {
        size_t i = (d->rr + k) % d->n;
        if (next_in(d, d->v[i], out) == 1) {
            d->rr = (i + 1) % d->n;
            return 1;
        }
    }
    return 0;
}

int sw_drain_next_in(struct sw_drain *d, uint64_t ring_id, struct sw_drained *out)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->v[i]->id == ring_id)
            return next_in(d, d->v[i], out);
    return 0;
}

void sw_drain_commit(struct sw_drain *d, uint64_t ring_id, uint64_t cursor)
{
    for (size_t i = 0; i < d->n; i++) {
        struct dring *x = d->v[i];
        if (x->id != ring_id)
            continue;
        if (cursor - x->committed > x->handed - x->committed || cursor == x->committed)
            return; /* not a handed-out cursor past the last commit */
        sw_ring_release(x->r, cursor);
        x->committed = cursor;
        release_skipped(x);
        return;
    }
}

void sw_drain_rewind(struct sw_drain *d)
{
    for (size_t i = 0; i < d->n; i++) {
        struct dring *x = d->v[i];
        x->rd = x->handed = x->committed = sw_ring_tail(x->r);
    }
}

uint64_t sw_drain_backlog(const struct sw_drain *d, unsigned *max_permille)
{
    uint64_t total = 0;
    unsigned worst = 0;
    for (size_t i = 0; i < d->n; i++) {
        const struct dring *x = d->v[i];
        uint64_t cap = sw_ring_capacity(x->r), used = sw_ring_head(x->r) - sw_ring_tail(x->r);
        if (used > cap)
            used = cap; /* a corrupt header: counted as full (the drain resynchronises it) */
        unsigned pm = cap ? (unsigned)(used * 1000 / cap) : 1000;
        if (pm > worst)
            worst = pm;
        total += used;
    }
    *max_permille = worst;
    return total;
}

int sw_drain_list(struct sw_drain *d, struct sw_drain_info *out, int max)
{
    for (size_t i = 0; i < d->n && (int)i < max; i++) {
        struct dring *x = d->v[i];
        struct sw_drain_info *o = &out[i];
        memset(o, 0, sizeof(*o));
        o->ring_id = x->id;
        o->meta = *sw_ring_get_meta(x->r);
        snprintf(o->name, sizeof(o->name), "%s", x->name);
        o->alive = x->alive;
        o->alive_hint = sw_ring_alive_hint(x->r);
        sw_ring_get_stats(x->r, &o->stats);
        o->capacity = sw_ring_capacity(x->r);
        uint64_t used = sw_ring_head(x->r) - sw_ring_tail(x->r);
        o->used = used > o->capacity ? o->capacity : used;
        o->corrupt = x->corrupt;
    }
    return (int)d->n;
}

void sw_drain_get_counters(const struct sw_drain *d, struct sw_drain_counters *out)
{
    *out = d->cnt;
}
