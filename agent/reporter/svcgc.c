/*
 * svcgc.c - removing per-service shared blocks no process uses any more (see svcgc.h).
 *
 * Rules: swagent-reporter only; stdio and malloc are fine.
 */
#include "common.h"

#include "svcblock.h"
#include "svcgc.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define SVCGC_MAX 512 /* blocks looked at in one pass; the rest wait for the next */

#define SVCGC_RING_PIDS 4096 /* pids with a ring file, looked up for unreadable processes */

struct cand {
    dev_t dev;
    ino_t ino;
    bool mapped;
    char name[32];
};

/* `svc-<16 hex>.sws` */
static bool block_name(const char *n)
{
    if (strlen(n) != 24 || strncmp(n, "svc-", 4) != 0 || strcmp(n + 20, ".sws") != 0)
        return false;
    for (int i = 4; i < 20; i++)
        if (!isxdigit((unsigned char)n[i]))
            return false;
    return true;
}

/* The pid of a ring file's name `ring-<pid>-<nonce>.swr`, or -1. */
static long ring_pid(const char *n)
{
    size_t len = strlen(n);
    if (len < 10 || strncmp(n, "ring-", 5) != 0 || strcmp(n + len - 4, ".swr") != 0)
        return -1;
    char *end;
    long pid = strtol(n + 5, &end, 10);
    return end > n + 5 && *end == '-' && pid > 0 ? pid : -1;
}

/* Marks the candidates mapped in one maps file. */
static void mark_maps(FILE *f, struct cand *c, int n)
{
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        unsigned maj, mnr;
        unsigned long long ino;
        /* start-end perms offset maj:min inode [path] */
        if (sscanf(line, "%*s %*s %*s %x:%x %llu", &maj, &mnr, &ino) != 3 || ino == 0)
            continue;
        for (int i = 0; i < n; i++)
            if (!c[i].mapped && c[i].ino == (ino_t)ino && major(c[i].dev) == maj &&
                minor(c[i].dev) == mnr)
                c[i].mapped = true;
    }
    free(line);
}

/* Whether process `pid` has a ring in the directory (or there were too many rings to tell). */
static bool has_ring(const long *rings, int n, const char *pid)
{
    long p = strtol(pid, NULL, 10);
    if (n > 0 && rings[0] == -2)
        return true;
    for (int i = 0; i < n; i++)
        if (rings[i] == p)
            return true;
    return false;
}

/* Whether process `pid` runs with our uid in any of its ids (from its status file). */
static bool ours(const char *proc, const char *pid)
{
    char path[PATH_MAX + 300];
    snprintf(path, sizeof(path), "%s/%s/status", proc, pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return false; /* gone */
    char line[256];
    bool yes = false;
    uid_t me = geteuid();
    while (fgets(line, sizeof(line), f)) {
        unsigned long r, e, s, fs;
        if (sscanf(line, "Uid: %lu %lu %lu %lu", &r, &e, &s, &fs) == 4) {
            yes = r == me || e == me || s == me || fs == me;
            break;
        }
    }
    fclose(f);
    return yes;
}

int sw_svcgc_run(const char *dir, const char *proc, uint32_t min_age_s, struct sw_svcgc_result *out)
{
    memset(out, 0, sizeof(*out));
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return -errno;
    DIR *d = fdopendir(dup(dfd));
    if (!d) {
        int rc = -errno;
        close(dfd);
        return rc;
    }
    struct cand *c = calloc(SVCGC_MAX, sizeof(*c));
    if (!c) {
        closedir(d);
        close(dfd);
        return -ENOMEM;
    }
    long *rings = calloc(SVCGC_RING_PIDS, sizeof(*rings));
    if (!rings) {
        free(c);
        closedir(d);
        close(dfd);
        return -ENOMEM;
    }
    int n = 0, nrings = 0;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        long rp = ring_pid(e->d_name);
        if (rp > 0) {
            if (nrings < SVCGC_RING_PIDS)
                rings[nrings++] = rp;
            else
                rings[0] = -2; /* too many to tell: every unreadable process of ours counts */
            continue;
        }
        struct stat st;
        if (n == SVCGC_MAX || !block_name(e->d_name) ||
            fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || now - st.st_ctime < (time_t)min_age_s)
            continue;
        char path[PATH_MAX + 300];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        struct sw_svc *b = NULL;
        if (sw_svc_open_file(path, &b) != 0)
            continue; /* not a valid block: left alone (svcblock.h) */
        sw_svc_close(b);
        c[n].dev = st.st_dev;
        c[n].ino = st.st_ino;
        snprintf(c[n].name, sizeof(c[n].name), "%s", e->d_name);
        n++;
    }
    closedir(d);
    out->candidates = n;
    int rc = 0;
    if (n > 0) {
        DIR *p = opendir(proc);
        if (!p) {
            rc = -errno;
            n = 0;
        }
        while (p && (e = readdir(p))) {
            if (!isdigit((unsigned char)e->d_name[0]))
                continue;
            char path[PATH_MAX + 300];
            snprintf(path, sizeof(path), "%s/%s/maps", proc, e->d_name);
            FILE *f = fopen(path, "re");
            if (f) {
                mark_maps(f, c, n);
                fclose(f);
            } else if (errno != ENOENT && errno != ESRCH && has_ring(rings, nrings, e->d_name) &&
                       ours(proc, e->d_name)) {
                out->unsure++;
            }
        }
        if (p)
            closedir(p);
    }
    for (int i = 0; i < n; i++) {
        if (c[i].mapped) {
            out->in_use++;
            continue;
        }
        if (out->unsure > 0)
            continue;
        /* Still the file we looked at (not replaced since): then it goes. */
        struct stat st;
        if (fstatat(dfd, c[i].name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_ino == c[i].ino &&
            st.st_dev == c[i].dev && unlinkat(dfd, c[i].name, 0) == 0)
            out->removed++;
    }
    free(rings);
    free(c);
    close(dfd);
    return rc;
}
