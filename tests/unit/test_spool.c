/*
 * test_spool.c - unit tests of the reporter's spool (agent/reporter/spool.c): round trip in
 * order, file modes, leftover `.tmp` files, a truncated file keeps its valid prefix, garbage is
 * removed and counted, the byte cap drops the oldest files and counts their segments, and the
 * sequence continues after a reopen.
 */
#include "common.h"

#include "check.h"
#include "spool.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[256];

static void rm_rf(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

/* Adds `n` records "seg-<base+i>" (with a random-ish tail so zstd cannot shrink them to 0). */
static void add_n(struct sw_spool *s, int base, int n, size_t pad)
{
    char seg[4096];
    static uint32_t x = 2463534242u;
    for (int i = 0; i < n; i++) {
        int len = snprintf(seg, sizeof(seg), "seg-%d|", base + i);
        for (size_t k = 0; k < pad && (size_t)len < sizeof(seg); k++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5; /* xorshift: poorly compressible */
            seg[len++] = (char)('a' + x % 26);
        }
        struct sw_spool_rec r = {.pid = 100 + i,
                                 .start_ms = 5000 + (uint64_t)i,
                                 .service = "svc",
                                 .instance = "inst",
                                 .seg = seg,
                                 .seg_len = (size_t)len};
        CHECK_EQ(sw_spool_add(s, &r), 0);
    }
}

static int first_id(const struct sw_spool_rec *r)
{
    return atoi((const char *)r->seg + 4);
}

/* Path of the only (or the first by name) file starting with `prefix`. */
static int find_file(const char *prefix, char *out, size_t cap)
{
    DIR *d = opendir(g_dir);
    struct dirent *e;
    int n = 0;
    char best[256] = "";
    CHECK(d != NULL);
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        if (!best[0] || strcmp(e->d_name, best) < 0)
            snprintf(best, sizeof(best), "%s", e->d_name);
        n++;
    }
    closedir(d);
    if (n)
        snprintf(out, cap, "%s/%s", g_dir, best);
    return n;
}

static void test_round_trip(void)
{
    struct sw_spool *s = sw_spool_open(g_dir, 1 << 20);
    struct sw_spool_batch b;
    struct stat st;
    char path[600];

    CHECK(s != NULL);
    CHECK(sw_spool_empty(s));
    CHECK(stat(g_dir, &st) == 0 && (st.st_mode & 07777) == 0700);
    add_n(s, 0, 3, 10);
    CHECK_EQ(sw_spool_pending(s), 3);
    CHECK_EQ(sw_spool_commit(s), 0);
    add_n(s, 3, 2, 10);
    CHECK_EQ(sw_spool_commit(s), 0);
    CHECK_EQ(find_file("seg-", path, sizeof(path)), 2);
    CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0600);

    /* Oldest first; nothing removed until confirmed. */
    CHECK_EQ(sw_spool_load_oldest(s, &b), 1);
    CHECK_EQ(b.n, 3);
    CHECK(!b.damaged);
    CHECK_EQ(first_id(&b.recs[0]), 0);
    CHECK_EQ(first_id(&b.recs[2]), 2);
    CHECK_EQ(b.recs[1].pid, 101);
    CHECK_EQ(b.recs[1].start_ms, 5001);
    CHECK_STR(b.recs[1].service, "svc");
    CHECK_STR(b.recs[1].instance, "inst");
    CHECK_EQ(sw_spool_load_oldest(s, &b), 1);
    CHECK_EQ(first_id(&b.recs[0]), 0); /* still the same file */
    CHECK_EQ(sw_spool_remove(s, b.seq), 0);
    CHECK_EQ(sw_spool_load_oldest(s, &b), 1);
    CHECK_EQ(b.n, 2);
    CHECK_EQ(first_id(&b.recs[0]), 3);
    uint64_t last = b.seq;
    sw_spool_close(s);

    /* Reopen: the file is still there, and new files come after it. */
    s = sw_spool_open(g_dir, 1 << 20);
    CHECK(s != NULL);
    add_n(s, 10, 1, 10);
    CHECK_EQ(sw_spool_commit(s), 0);
    CHECK_EQ(sw_spool_load_oldest(s, &b), 1);
    CHECK_EQ(b.seq, last);
    CHECK_EQ(sw_spool_remove(s, b.seq), 0);
    CHECK_EQ(sw_spool_load_oldest(s, &b), 1);
    CHECK(b.seq > last);
    CHECK_EQ(first_id(&b.recs[0]), 10);
    CHECK_EQ(sw_spool_remove(s, b.seq), 0);
    CHECK(sw_spool_empty(s));
    CHECK_EQ(sw_spool_load_oldest(s, &b), 0);
    sw_spool_close(s);
}

static void test_tmp_removed(void)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/seg-0000000000000099-5.swz.tmp", g_dir);
    int fd = open(path, O_CREAT | O_WRONLY | O_EXCL, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, "partial", 7) == 7);
    close(fd);
    struct sw_spool *s = sw_spool_open(g_dir, 1 << 20);
    CHECK(s != NULL);
    CHECK(access(path, F_OK) != 0);
    CHECK(sw_spool_empty(s));
    sw_spool_close(s);
}

static void test_truncated(void)
{
    struct sw_spool *s = sw_spool_open(g_dir, 1 << 20);
    struct sw_spool_batch b;
    struct sw_spool_counters c;
    char path[600];
    struct stat st;

    CHECK(s != NULL);
    add_n(s, 0, 200, 300);
    CHECK_EQ(sw_spool_commit(s), 0);
    sw_spool_close(s);
    CHECK_EQ(find_file("seg-", path, sizeof(path)), 1);
    CHECK(stat(path, &st) == 0);
    CHECK(truncate(path, st.st_size * 2 / 3) == 0); /* killed mid-write, or a damaged disk */

    s = sw_spool_open(g_dir, 1 << 20);
    CHECK(s != NULL);
    CHECK_EQ(sw_spool_load_oldest(s, &b), 1);
    CHECK(b.damaged);
    CHECK(b.n > 0 && b.n < 200);
    for (size_t i = 0; i < b.n; i++)
        CHECK_EQ(first_id(&b.recs[i]), (int)i); /* the valid prefix, intact and in order */
    sw_spool_get_counters(s, &c);
    CHECK_EQ(c.damaged, 200 - b.n);
    CHECK_EQ(sw_spool_load_oldest(s, &b), 1); /* counted once */
    sw_spool_get_counters(s, &c);
    CHECK_EQ(c.damaged, 200 - b.n);
    CHECK_EQ(sw_spool_remove(s, b.seq), 0);
    sw_spool_close(s);

    /* Garbage that yields nothing: removed and counted. */
    snprintf(path, sizeof(path), "%s/seg-0000000000000500-7.swz", g_dir);
    int fd = open(path, O_CREAT | O_WRONLY | O_EXCL, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, "not zstd at all", 15) == 15);
    close(fd);
    s = sw_spool_open(g_dir, 1 << 20);
    CHECK(s != NULL);
    CHECK_EQ(sw_spool_load_oldest(s, &b), 0);
    sw_spool_get_counters(s, &c);
    CHECK_EQ(c.damaged, 7);
    CHECK(access(path, F_OK) != 0);
    sw_spool_close(s);
}

static void test_cap(void)
{
    struct sw_spool *s = sw_spool_open(g_dir, 64 * 1024);
    struct sw_spool_counters c;
    struct sw_spool_batch b;

    CHECK(s != NULL);
    /* Each batch: 20 records of ~1 KiB of poorly compressible text, ~12+ KiB compressed. */
    for (int k = 0; k < 12; k++) {
        add_n(s, k * 100, 20, 1000);
        CHECK_EQ(sw_spool_commit(s), 0);
    }
    sw_spool_get_counters(s, &c);
    CHECK(c.bytes <= 64 * 1024);
    CHECK(c.dropped > 0);
    CHECK_EQ(c.dropped % 20, 0);
    CHECK_EQ(c.dropped, c.dropped_files * 20);
    CHECK_EQ(c.written, 240);
    CHECK_EQ(c.segments + c.dropped, 240);
    /* The oldest went first: what is left is the newest, in order. */
    CHECK_EQ(sw_spool_load_oldest(s, &b), 1);
    CHECK_EQ(first_id(&b.recs[0]), (int)(c.dropped_files * 100));
    sw_spool_close(s);
}

int main(void)
{
    snprintf(g_dir, sizeof(g_dir), "/tmp/swspool.%d", (int)getpid());
    rm_rf(g_dir);
    RUN_TEST(test_round_trip);
    RUN_TEST(test_tmp_removed);
    RUN_TEST(test_truncated);
    rm_rf(g_dir);
    RUN_TEST(test_cap);
    rm_rf(g_dir);
    return 0;
}
