/*
 * test_drain.c - unit tests of agent/reporter/drain.c: adopting rings, handing out and
 * committing records, rewind, a restarted reporter resuming at the persisted tail, dead
 * producers (stuck record skipped, ring removed once drained), pid reuse, an exec'ed image's
 * new ring superseding the old one, rejected files, and a corrupt ring resynchronised.
 */
#include "common.h"

#include "check.h"
#include "drain.h"
#include "encode.h"
#include "record_writer.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char base[256];
static int dirs;

static void new_dir(char *out, size_t n)
{
    snprintf(out, n, "%s/d%d", base, dirs++);
    CHECK(mkdir(out, 0700) == 0);
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static struct sw_ring *mk_ring(const char *dir, int pid, uint64_t ticks)
{
    struct sw_ring_meta m;
    memset(&m, 0, sizeof(m));
    m.pid = pid;
    m.proc_start_ticks = ticks;
    snprintf(m.service, sizeof(m.service), "svc-%d", pid);
    snprintf(m.instance, sizeof(m.instance), "inst");
    struct sw_ring *r = NULL;
    CHECK_EQ(sw_ring_create(dir, &m, 0, &r), 0);
    return r;
}

static uint64_t my_ticks(void)
{
    uint64_t t = 0;
    CHECK_EQ(sw_ring_proc_start_ticks(getpid(), &t), 0);
    return t;
}

/* Pushes a small record whose payload is "rec-<n>". */
static void push(struct sw_ring *r, int n)
{
    char buf[32];
    int len = snprintf(buf, sizeof(buf), "rec-%d", n);
    void *p = sw_ring_reserve(r, (uint32_t)len, SW_REC_SEGMENT);
    CHECK(p != NULL);
    memcpy(p, buf, (size_t)len);
    sw_ring_commit(r, p);
}

static int rec_no(const struct sw_drained *x)
{
    char buf[32];
    CHECK(x->len < sizeof(buf));
    memcpy(buf, x->payload, x->len);
    buf[x->len] = '\0';
    CHECK(strncmp(buf, "rec-", 4) == 0);
    return atoi(buf + 4);
}

static void test_basic_commit_rewind_restart(void)
{
    char dir[300];
    new_dir(dir, sizeof(dir));
    struct sw_ring *r = mk_ring(dir, getpid(), my_ticks());
    for (int i = 0; i < 5; i++)
        push(r, i);
    struct sw_drain *d = sw_drain_new(dir);
    CHECK(d != NULL);
    struct sw_drained x;
    CHECK_EQ(sw_drain_next(d, &x), 1);
    CHECK_EQ(rec_no(&x), 0);
    char svc[32];
    snprintf(svc, sizeof(svc), "svc-%d", (int)getpid());
    CHECK_STR(x.meta->service, svc);
    CHECK_EQ(x.type, SW_REC_SEGMENT);
    CHECK_EQ(sw_drain_next(d, &x), 1);
    CHECK_EQ(rec_no(&x), 1);
    /* Rewind: both are handed out again. */
    sw_drain_rewind(d);
    CHECK_EQ(sw_drain_next(d, &x), 1);
    CHECK_EQ(rec_no(&x), 0);
    sw_drain_commit(d, x.ring_id, x.cursor);
    CHECK_EQ(sw_drain_next(d, &x), 1);
    CHECK_EQ(rec_no(&x), 1);
    CHECK_EQ(sw_drain_next(d, &x), 1);
    CHECK_EQ(rec_no(&x), 2);
    /* A bogus commit (unknown ring, cursor not handed out) changes nothing. */
    sw_drain_commit(d, 999, x.cursor);
    sw_drain_commit(d, x.ring_id, x.cursor + 8);
    struct sw_ring_stats st;
    sw_ring_get_stats(r, &st);
    CHECK_EQ(st.consumed, 1);
    /* Committing rec-1 only; then the reporter "dies" (no further commit). */
    struct sw_drained one;
    sw_drain_rewind(d);
    CHECK_EQ(sw_drain_next(d, &one), 1);
    CHECK_EQ(rec_no(&one), 1);
    sw_drain_commit(d, one.ring_id, one.cursor);
    CHECK_EQ(sw_drain_next(d, &x), 1); /* rec-2 handed out, never committed */
    struct sw_drain_info info[4];
    CHECK_EQ(sw_drain_list(d, info, 4), 1);
    CHECK(info[0].alive);
    CHECK(info[0].alive_hint);
    CHECK_EQ(info[0].meta.pid, getpid());
    CHECK_EQ(info[0].stats.committed, 5);
    CHECK_EQ(info[0].stats.consumed, 2);
    CHECK(info[0].used > 0);
    sw_drain_free(d);
    /* A new reporter resumes at the persisted tail: rec-2 again, nothing lost or repeated. */
    d = sw_drain_new(dir);
    CHECK(d != NULL);
    for (int i = 2; i < 5; i++) {
        CHECK_EQ(sw_drain_next(d, &x), 1);
        CHECK_EQ(rec_no(&x), i);
    }
    CHECK_EQ(sw_drain_next(d, &x), 0);
    sw_drain_commit(d, x.ring_id, x.cursor);
    CHECK(sw_ring_empty(r));
    /* A live producer's empty ring stays. */
    CHECK_EQ(sw_drain_scan(d), 1);
    CHECK_EQ(count_files(dir), 1);
    push(r, 5);
    CHECK_EQ(sw_drain_next(d, &x), 1);
    CHECK_EQ(rec_no(&x), 5);
    sw_drain_free(d);
    sw_ring_detach(r);
}

static void test_dead_producer_removed(void)
{
    char dir[300];
    new_dir(dir, sizeof(dir));
    struct sw_drain *d = sw_drain_new(dir);
    CHECK(d != NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        uint64_t t = 0;
        sw_ring_proc_start_ticks(getpid(), &t);
        struct sw_ring *r = mk_ring(dir, getpid(), t);
        push(r, 0);
        push(r, 1);
        void *stuck = sw_ring_reserve(r, 100, SW_REC_SEGMENT);
        if (!stuck)
            _exit(1);
        push(r, 3);
        raise(SIGKILL);
        _exit(1);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status));
    CHECK_EQ(sw_drain_scan(d), 1);
    struct sw_drain_info info;
    CHECK_EQ(sw_drain_list(d, &info, 1), 1);
    CHECK(!info.alive);
    CHECK_EQ(info.meta.pid, pid);
    struct sw_drained x;
    int want[] = {0, 1, 3};
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(sw_drain_next(d, &x), 1);
        CHECK_EQ(rec_no(&x), want[i]);
    }
    CHECK_EQ(sw_drain_next(d, &x), 0);
    /* Not removed while a handed-out record is uncommitted. */
    CHECK_EQ(sw_drain_scan(d), 1);
    CHECK_EQ(count_files(dir), 1);
    sw_drain_commit(d, x.ring_id, x.cursor);
    CHECK_EQ(sw_drain_scan(d), 0);
    CHECK_EQ(count_files(dir), 0);
    struct sw_drain_counters c;
    sw_drain_get_counters(d, &c);
    CHECK_EQ(c.stuck_skipped, 1);
    CHECK_EQ(c.rings_removed, 1);
    CHECK_EQ(c.rings_adopted, 1);
    sw_drain_free(d);
}

/* Pid reuse (start ticks differ) and exec (a newer ring of the same process). */
static void test_pid_reuse_and_exec(void)
{
    char dir[300];
    new_dir(dir, sizeof(dir));
    struct sw_ring *reused = mk_ring(dir, getpid(), my_ticks() + 12345);
    push(reused, 7);
    struct sw_ring *old = mk_ring(dir, getpid(), my_ticks());
    push(old, 8);
    usleep(2000);
    struct sw_ring *cur = mk_ring(dir, getpid(), my_ticks());
    struct sw_drain *d = sw_drain_new(dir);
    CHECK(d != NULL);
    CHECK_EQ(sw_drain_scan(d), 3);
    struct sw_drain_info info[3];
    CHECK_EQ(sw_drain_list(d, info, 3), 3);
    int alive = 0;
    for (int i = 0; i < 3; i++)
        alive += info[i].alive;
    CHECK_EQ(alive, 1);
    struct sw_drained x;
    int seen = 0;
    while (sw_drain_next(d, &x) == 1) {
        int n = rec_no(&x);
        CHECK(n == 7 || n == 8);
        seen |= 1 << (n - 7);
        sw_drain_commit(d, x.ring_id, x.cursor);
    }
    CHECK_EQ(seen, 3);
    CHECK_EQ(sw_drain_scan(d), 1);
    CHECK_EQ(count_files(dir), 1);
    CHECK_EQ(sw_drain_list(d, info, 3), 1);
    CHECK(info[0].alive);
    sw_drain_free(d);
    sw_ring_detach(reused);
    sw_ring_detach(old);
    sw_ring_detach(cur);
}

static void test_rejected_files(void)
{
    char dir[300], p[600];
    new_dir(dir, sizeof(dir));
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    /* Garbage of a dead process, mode 0600: removed. */
    snprintf(p, sizeof(p), "%s/ring-%d-00.swr", dir, (int)dead);
    int fd = open(p, O_CREAT | O_WRONLY, 0600);
    CHECK(fd >= 0);
    char junk[100000];
    memset(junk, 'x', sizeof(junk));
    CHECK(write(fd, junk, sizeof(junk)) == (ssize_t)sizeof(junk));
    close(fd);
    /* A file of a live process with a wrong mode: rejected, kept. */
    snprintf(p, sizeof(p), "%s/ring-%d-01.swr", dir, (int)getpid());
    fd = open(p, O_CREAT | O_WRONLY, 0644);
    CHECK(fd >= 0);
    CHECK(fchmod(fd, 0644) == 0);
    close(fd);
    /* A symlink to a valid ring: never followed. */
    char sub[300];
    new_dir(sub, sizeof(sub));
    struct sw_ring *r = mk_ring(sub, getpid(), 0);
    push(r, 1);
    char target[700], link[600];
    snprintf(target, sizeof(target), "%s/%s", sub, sw_ring_name(r));
    snprintf(link, sizeof(link), "%s/ring-%d-02.swr", dir, (int)getpid());
    CHECK(symlink(target, link) == 0);
    /* Other names are ignored. */
    snprintf(p, sizeof(p), "%s/swagent.log", dir);
    fd = open(p, O_CREAT | O_WRONLY, 0600);
    close(fd);
    struct sw_drain *d = sw_drain_new(dir);
    CHECK(d != NULL);
    CHECK_EQ(sw_drain_scan(d), 0);
    struct sw_drained x;
    CHECK_EQ(sw_drain_next(d, &x), 0);
    struct sw_drain_counters c;
    sw_drain_get_counters(d, &c);
    CHECK_EQ(c.files_rejected, 3);
    CHECK_EQ(c.rings_adopted, 0);
    CHECK_EQ(count_files(dir), 3); /* the dead process's garbage is gone */
    sw_drain_free(d);
    sw_ring_detach(r);
    /* A directory with bad permissions is refused. */
    char bad[300];
    new_dir(bad, sizeof(bad));
    CHECK(chmod(bad, 0755) == 0);
    errno = 0;
    CHECK(sw_drain_new(bad) == NULL);
    CHECK_EQ(errno, EPERM);
}

static void test_corrupt_ring_resync(void)
{
    char dir[300], p[700];
    new_dir(dir, sizeof(dir));
    struct sw_ring *r = mk_ring(dir, getpid(), my_ticks());
    push(r, 0);
    push(r, 1);
    snprintf(p, sizeof(p), "%s/%s", dir, sw_ring_name(r));
    int fd = open(p, O_RDWR);
    CHECK(fd >= 0);
    uint8_t *m = mmap(NULL, SW_RING_HDR_BYTES + SW_RING_MIN_DATA, PROT_READ | PROT_WRITE,
                      MAP_SHARED, fd, 0);
    CHECK(m != MAP_FAILED);
    close(fd);
    m[SW_RING_HDR_BYTES + 7] = 0x55; /* reserved bits of the first header */
    struct sw_drain *d = sw_drain_new(dir);
    CHECK(d != NULL);
    struct sw_drained x;
    CHECK_EQ(sw_drain_next(d, &x), 0);
    CHECK(sw_ring_empty(r)); /* resynchronised at head, the garbage released */
    push(r, 2);
    CHECK_EQ(sw_drain_next(d, &x), 1);
    CHECK_EQ(rec_no(&x), 2);
    struct sw_drain_info info;
    sw_drain_list(d, &info, 1);
    CHECK_EQ(info.corrupt, 1);
    munmap(m, SW_RING_HDR_BYTES + SW_RING_MIN_DATA);
    sw_drain_free(d);
    sw_ring_detach(r);
}

/* Rings of another collector are left alone, even when their producer is dead. */
static void test_collector_filter(void)
{
    char dir[300];
    new_dir(dir, sizeof(dir));
    struct sw_ring_meta m;
    memset(&m, 0, sizeof(m));
    m.pid = getpid();
    m.proc_start_ticks = my_ticks();
    snprintf(m.collector, sizeof(m.collector), "a:11800");
    struct sw_ring *mine, *other, *dead_other;
    CHECK_EQ(sw_ring_create(dir, &m, 0, &mine), 0);
    push(mine, 1);
    snprintf(m.collector, sizeof(m.collector), "b:11800");
    CHECK_EQ(sw_ring_create(dir, &m, 0, &other), 0);
    push(other, 2);
    m.proc_start_ticks += 99; /* a dead process */
    CHECK_EQ(sw_ring_create(dir, &m, 0, &dead_other), 0);
    struct sw_drain *d = sw_drain_new_for(dir, "a:11800");
    CHECK(d != NULL);
    CHECK_EQ(sw_drain_scan(d), 1);
    struct sw_drained x;
    CHECK_EQ(sw_drain_next(d, &x), 1);
    CHECK_EQ(rec_no(&x), 1);
    CHECK_STR(x.meta->collector, "a:11800");
    CHECK_EQ(sw_drain_next(d, &x), 0);
    CHECK_EQ(sw_drain_scan(d), 1);
    CHECK_EQ(count_files(dir), 3);
    struct sw_drain_counters c;
    sw_drain_get_counters(d, &c);
    CHECK_EQ(c.files_rejected, 0);
    sw_drain_free(d);
    /* Without a filter every ring is adopted (and the dead one removed). */
    d = sw_drain_new(dir);
    CHECK_EQ(sw_drain_scan(d), 2);
    CHECK_EQ(count_files(dir), 2);
    sw_drain_free(d);
    sw_ring_detach(mine);
    sw_ring_detach(other);
    sw_ring_detach(dead_other);
}

/* A real segment record drained and encoded. */
static void test_drain_then_encode(void)
{
    char dir[300];
    new_dir(dir, sizeof(dir));
    struct sw_ring *r = mk_ring(dir, getpid(), my_ticks());
    uint8_t rec[4096];
    size_t n = tw_write(&tw_sample, rec, sizeof(rec));
    void *p = sw_ring_reserve(r, (uint32_t)n, SW_REC_SEGMENT);
    CHECK(p != NULL);
    memcpy(p, rec, n);
    sw_ring_commit(r, p);
    struct sw_drain *d = sw_drain_new(dir);
    struct sw_drained x;
    CHECK_EQ(sw_drain_next(d, &x), 1);
    uint8_t *out;
    size_t out_len;
    CHECK_EQ(sw_encode_segment(x.payload, x.len, x.meta, &out, &out_len), 0);
    CHECK(out_len > n / 2);
    free(out);
    sw_drain_commit(d, x.ring_id, x.cursor);
    CHECK(sw_ring_empty(r));
    sw_drain_free(d);
    sw_ring_detach(r);
}

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char p[600];
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            rm_tree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *t = getenv("TMPDIR");
    snprintf(base, sizeof(base), "%s/swdrain-test-XXXXXX", t && *t ? t : "/tmp");
    CHECK(mkdtemp(base) != NULL);
    RUN_TEST(test_basic_commit_rewind_restart);
    RUN_TEST(test_dead_producer_removed);
    RUN_TEST(test_pid_reuse_and_exec);
    RUN_TEST(test_rejected_files);
    RUN_TEST(test_corrupt_ring_resync);
    RUN_TEST(test_collector_filter);
    RUN_TEST(test_drain_then_encode);
    rm_tree(base);
    return 0;
}
