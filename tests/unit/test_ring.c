/*
 * test_ring.c - unit tests of the shared-memory ring (agent/ring.c): single-thread wrap-around,
 * full ring, concurrent producers with a consumer thread and with a consumer process, a
 * consumer killed mid-stream, a producer killed between reserve and commit, corrupt images,
 * and the directory/file safety checks.
 *
 * Usage: test_ring [mode]  (no argument: every test but the two below; "mt" runs only the
 * threaded test, for TSan; "first_turn" and "tmpfs_full" run the tests that need perf_event_open
 * and a mount namespace, each its own ctest entry that exits 77 (skipped) where it cannot run)
 */
#include "common.h"

#include "check.h"
#include "record.h"
#include "ring.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) /* clang 14 does not define __SANITIZE_ADDRESS__ */
#define TEST_RING_ASAN 1
#endif
#endif
#ifndef TEST_RING_ASAN
#define TEST_RING_ASAN 0
#endif

static char base_dir[256];

static void make_base(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(base_dir, sizeof(base_dir), "%s/swring-test-XXXXXX", t && *t ? t : "/tmp");
    CHECK(mkdtemp(base_dir) != NULL);
}

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
            rm_tree(p);
            rmdir(p);
        } else {
            unlink(p);
        }
    }
    closedir(d);
    rmdir(dir);
}

/* A fresh runtime dir (created by the ring code itself) under the test's base dir. */
static void new_dir(char *out, size_t n, const char *tag)
{
    snprintf(out, n, "%s/%s", base_dir, tag);
}

static struct sw_ring *new_ring(const char *dir, size_t bytes, int pid)
{
    struct sw_ring_meta m;
    memset(&m, 0, sizeof(m));
    m.pid = pid;
    m.start_time_ms = 1700000000000ull;
    snprintf(m.service, sizeof(m.service), "svc");
    snprintf(m.instance, sizeof(m.instance), "inst");
    snprintf(m.exe, sizeof(m.exe), "test_ring");
    struct sw_ring *r = NULL;
    int rc = sw_ring_create(dir, &m, bytes, &r);
    if (rc != 0)
        fprintf(stderr, "sw_ring_create(%s): %d\n", dir, rc);
    CHECK_EQ(rc, 0);
    CHECK(r != NULL);
    return r;
}

static void ring_path(char *out, size_t n, const char *dir, const struct sw_ring *r)
{
    snprintf(out, n, "%s/%s", dir, sw_ring_name(r));
}

/* ---- record contents: {u32 producer, u32 seq, bytes..., u32 checksum} ---- */

static uint32_t fnv(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

static uint32_t len_for(uint32_t who, uint32_t seq, uint32_t maxlen)
{
    uint32_t x = (who * 2654435761u) ^ (seq * 40503u);
    x ^= x >> 13;
    return 12 + x % (maxlen - 12);
}

static void fill(uint8_t *p, uint32_t len, uint32_t who, uint32_t seq)
{
    memcpy(p, &who, 4);
    memcpy(p + 4, &seq, 4);
    for (uint32_t i = 8; i < len - 4; i++)
        p[i] = (uint8_t)(i * 7 + seq + who);
    uint32_t h = fnv(p, len - 4);
    memcpy(p + len - 4, &h, 4);
}

static bool verify(const uint8_t *p, uint32_t len, uint32_t *who, uint32_t *seq)
{
    if (len < 12)
        return false;
    uint32_t h;
    memcpy(&h, p + len - 4, 4);
    memcpy(who, p, 4);
    memcpy(seq, p + 4, 4);
    return h == fnv(p, len - 4);
}

static bool push(struct sw_ring *r, uint32_t who, uint32_t seq, uint32_t len)
{
    static _Thread_local uint8_t buf[16384];
    if ((seq & 1) && len <= sizeof(buf)) {
        /* Every other record through sw_ring_put_segment (a copy of a finished record): its
         * fast path, and its fallback at a wrap (PAD) or a full ring, must write the same. */
        fill(buf, len, who, seq);
        return sw_ring_put_segment(r, buf, len);
    }
    uint8_t *p = sw_ring_reserve(r, len, SW_REC_SEGMENT);
    if (!p)
        return false;
    fill(p, len, who, seq);
    sw_ring_commit(r, p);
    return true;
}

/* ---- tests ---- */

static void test_dir_and_file_checks(void)
{
    char dir[300], p[600];
    new_dir(dir, sizeof(dir), "d1");
    struct sw_ring *r = new_ring(dir, 1, getpid()); /* the dir is created 0700 */
    struct stat st;
    CHECK(lstat(dir, &st) == 0);
    CHECK_EQ(st.st_mode & 07777, 0700);
    const char *name = sw_ring_name(r);
    CHECK(strncmp(name, "ring-", 5) == 0);
    CHECK(strlen(name) > 9 && strcmp(name + strlen(name) - 4, ".swr") == 0);
    char want[32];
    snprintf(want, sizeof(want), "ring-%d-", (int)getpid());
    CHECK(strncmp(name, want, strlen(want)) == 0);
    ring_path(p, sizeof(p), dir, r);
    CHECK(lstat(p, &st) == 0);
    CHECK(S_ISREG(st.st_mode));
    CHECK_EQ(st.st_mode & 07777, 0600);
    CHECK_EQ(st.st_size, SW_RING_HDR_BYTES + SW_RING_MIN_DATA); /* rounded up to 64 KiB */
    CHECK_EQ(sw_ring_capacity(r), SW_RING_MIN_DATA);

    /* A second ring of the same process gets another name. */
    struct sw_ring *r2 = new_ring(dir, 100000, getpid());
    CHECK(strcmp(sw_ring_name(r), sw_ring_name(r2)) != 0);
    CHECK_EQ(sw_ring_capacity(r2), 128 * 1024);
    sw_ring_detach(r2);

    /* Open validates the owner and mode of the file. */
    struct sw_ring *c = NULL;
    CHECK_EQ(sw_ring_open(p, &c), 0);
    CHECK_STR(sw_ring_get_meta(c)->service, "svc");
    CHECK_EQ(sw_ring_get_meta(c)->pid, getpid());
    CHECK(sw_ring_alive_hint(c));
    sw_ring_mark_exited(r);
    CHECK(!sw_ring_alive_hint(c));
    sw_ring_close(c);
    CHECK(chmod(p, 0644) == 0);
    CHECK_EQ(sw_ring_open(p, &c), -EPERM);
    CHECK(chmod(p, 0600) == 0);
    char link[600];
    snprintf(link, sizeof(link), "%s/ring-link.swr", dir);
    CHECK(symlink(p, link) == 0);
    CHECK(sw_ring_open(link, &c) < 0); /* O_NOFOLLOW: ELOOP */
    sw_ring_detach(r);

    /* A directory with group/other bits is refused; so is a symlink to a good directory. */
    char d2[300];
    new_dir(d2, sizeof(d2), "d2");
    CHECK(mkdir(d2, 0755) == 0);
    CHECK(chmod(d2, 0755) == 0);
    struct sw_ring *bad = NULL;
    CHECK_EQ(sw_ring_create(d2, NULL, 0, &bad), -EPERM);
    CHECK_EQ(sw_ring_dir_open(d2, false), -EPERM);
    char d3[300];
    new_dir(d3, sizeof(d3), "d3");
    CHECK(symlink(dir, d3) == 0);
    CHECK_EQ(sw_ring_create(d3, NULL, 0, &bad), -ENOTDIR);
    /* A missing dir without create is ENOENT. */
    char d4[300];
    new_dir(d4, sizeof(d4), "d4");
    CHECK_EQ(sw_ring_dir_open(d4, false), -ENOENT);
    /* A regular file in place of the directory is refused. */
    char d5[300];
    new_dir(d5, sizeof(d5), "d5");
    int fd = open(d5, O_CREAT | O_WRONLY, 0700);
    CHECK(fd >= 0);
    close(fd);
    CHECK_EQ(sw_ring_create(d5, NULL, 0, &bad), -ENOTDIR);
    if (geteuid() == 0) {
        /* As root, a directory owned by another user is refused. */
        char d6[300];
        new_dir(d6, sizeof(d6), "d6");
        CHECK(mkdir(d6, 0700) == 0);
        CHECK(chown(d6, 65534, 65534) == 0);
        CHECK_EQ(sw_ring_create(d6, NULL, 0, &bad), -EPERM);
    }
    /* errno is preserved by create, success or failure. */
    errno = 1234;
    CHECK(sw_ring_create(d2, NULL, 0, &bad) < 0);
    CHECK_EQ(errno, 1234);
    uint64_t ticks = 0;
    CHECK_EQ(sw_ring_proc_start_ticks(getpid(), &ticks), 0);
    CHECK(ticks > 0);
    CHECK(sw_ring_proc_start_ticks(-5, &ticks) < 0);
}

static void test_single_thread_wrap(void)
{
    char dir[300];
    new_dir(dir, sizeof(dir), "st");
    struct sw_ring *r = new_ring(dir, 0, getpid());
    uint64_t cursor = sw_ring_tail(r);
    uint32_t next_push = 0, next_pop = 0;
    unsigned seed = 7;
    int wraps = 0;
    uint64_t last_off = 0;
    while (next_pop < 50000) {
        int burst = 1 + (int)(rand_r(&seed) % 8);
        for (int i = 0; i < burst && next_push < 50000; i++) {
            uint32_t len = len_for(1, next_push, (rand_r(&seed) % 4) ? 300 : 9000);
            if (!push(r, 1, next_push, len))
                break;
            next_push++;
        }
        int take = 1 + (int)(rand_r(&seed) % 8);
        for (int i = 0; i < take; i++) {
            const void *p;
            uint32_t len, who, seq;
            uint16_t type;
            uint64_t next;
            int rc = sw_ring_peek(r, cursor, &p, &len, &type, &next);
            CHECK(rc >= 0);
            if (rc == 0) {
                CHECK_EQ(next_pop, next_push);
                break;
            }
            CHECK_EQ(type, SW_REC_SEGMENT);
            CHECK(verify(p, len, &who, &seq));
            CHECK_EQ(seq, next_pop);
            next_pop++;
            if ((next & (sw_ring_capacity(r) - 1)) < last_off)
                wraps++;
            last_off = next & (sw_ring_capacity(r) - 1);
            cursor = next;
        }
        /* Release in batches, sometimes keeping the tail behind the read cursor. */
        if (rand_r(&seed) % 3 == 0)
            sw_ring_release(r, cursor);
    }
    sw_ring_release(r, cursor);
    CHECK(wraps > 10);
    CHECK(sw_ring_empty(r));
    struct sw_ring_stats st;
    sw_ring_get_stats(r, &st);
    CHECK_EQ(st.committed, next_push);
    CHECK_EQ(st.consumed, next_pop);
    sw_ring_detach(r);
}

static void test_full_and_drop(void)
{
    char dir[300];
    new_dir(dir, sizeof(dir), "full");
    struct sw_ring *r = new_ring(dir, 0, getpid());
    uint32_t n = 0;
    while (push(r, 2, n, 1000))
        n++;
    /* 64 KiB / (8 + 1000) bytes per record. */
    CHECK_EQ(n, SW_RING_MIN_DATA / 1008);
    struct sw_ring_stats st;
    sw_ring_get_stats(r, &st);
    CHECK_EQ(st.dropped, 1);
    CHECK_EQ(st.committed, n);
    /* Too large, and the reserved PAD type, are dropped and counted too. */
    CHECK(sw_ring_reserve(r, SW_REC_MAX_LEN + 1, SW_REC_SEGMENT) == NULL);
    CHECK(sw_ring_reserve(r, 8, SW_RING_PAD) == NULL);
    sw_ring_count_drop(r);
    sw_ring_get_stats(r, &st);
    CHECK_EQ(st.dropped, 4);
    /* Releasing one record makes room for exactly one more of the same size. */
    const void *p;
    uint32_t len;
    uint16_t type;
    uint64_t next;
    CHECK_EQ(sw_ring_peek(r, sw_ring_tail(r), &p, &len, &type, &next), 1);
    CHECK_EQ(len, 1000);
    sw_ring_release(r, next);
    CHECK(push(r, 2, n, 1000));
    CHECK(!push(r, 2, n + 1, 1000));
    /* A record bigger than the whole ring can never fit. */
    CHECK(sw_ring_reserve(r, SW_RING_MIN_DATA, SW_REC_SEGMENT) == NULL);
    /* Drain everything: the sequence is intact. */
    uint64_t c = sw_ring_tail(r);
    uint32_t want = 1, who, seq;
    while (sw_ring_peek(r, c, &p, &len, &type, &c) == 1) {
        CHECK(verify(p, len, &who, &seq));
        CHECK_EQ(seq, want);
        want++;
    }
    CHECK_EQ(want, n + 1);
    sw_ring_release(r, c);
    CHECK(sw_ring_empty(r));
    /* A zero-length record is legal. */
    void *z = sw_ring_reserve(r, 0, 7);
    CHECK(z != NULL);
    sw_ring_commit(r, z);
    CHECK_EQ(sw_ring_peek(r, c, &p, &len, &type, &next), 1);
    CHECK_EQ(len, 0);
    CHECK_EQ(type, 7);
    sw_ring_detach(r);
}

/* ---- concurrency ---- */

struct prod_arg {
    struct sw_ring *r;
    uint32_t who;
    uint32_t count;
    uint64_t retries;
};

static void *producer(void *arg)
{
    struct prod_arg *a = arg;
    for (uint32_t s = 0; s < a->count; s++) {
        uint32_t len = len_for(a->who, s, 200);
        while (!push(a->r, a->who, s, len)) {
            a->retries++;
            sched_yield();
        }
    }
    return NULL;
}

/*
 * Consumes until every producer's `count` records arrived, checking contents, per-producer
 * order (which implies exactly once). Returns 0 or a failure line number.
 */
static int consume_all(struct sw_ring *r, uint32_t nprod, uint32_t count, int timeout_s)
{
    uint32_t expect[64] = {0};
    uint64_t total = (uint64_t)nprod * count, got = 0;
    uint64_t c = sw_ring_tail(r);
    time_t deadline = time(NULL) + timeout_s;
    int batch = 0;
    while (got < total) {
        const void *p;
        uint32_t len, who, seq;
        uint16_t type;
        uint64_t next;
        int rc = sw_ring_peek(r, c, &p, &len, &type, &next);
        if (rc < 0)
            return __LINE__;
        if (rc == 0) {
            sw_ring_release(r, c);
            if (time(NULL) > deadline)
                return __LINE__;
            sched_yield();
            continue;
        }
        if (!verify(p, len, &who, &seq) || who >= nprod || seq != expect[who])
            return __LINE__;
        if (len != len_for(who, seq, 200))
            return __LINE__;
        expect[who]++;
        got++;
        c = next;
        if (++batch == 16) {
            sw_ring_release(r, c);
            batch = 0;
        }
    }
    sw_ring_release(r, c);
    return sw_ring_empty(r) ? 0 : __LINE__;
}

struct cons_arg {
    struct sw_ring *r;
    uint32_t nprod, count;
    int result;
};

static void *consumer_thread(void *arg)
{
    struct cons_arg *a = arg;
    a->result = consume_all(a->r, a->nprod, a->count, 100);
    return NULL;
}

static void run_producers(struct sw_ring *r, uint32_t nprod, uint32_t count)
{
    pthread_t t[64];
    struct prod_arg a[64];
    for (uint32_t i = 0; i < nprod; i++) {
        a[i] = (struct prod_arg){.r = r, .who = i, .count = count};
        CHECK(pthread_create(&t[i], NULL, producer, &a[i]) == 0);
    }
    for (uint32_t i = 0; i < nprod; i++)
        pthread_join(t[i], NULL);
}

/*
 * Producers and the consumer in one process (the variant TSan can check). The consumer uses
 * the producers' mapping: TSan tracks happens-before per virtual address, so a second mapping
 * of the same file would hide the release/acquire pairs from it.
 */
static void test_mt_consumer_thread(void)
{
    char dir[300];
    new_dir(dir, sizeof(dir), "mt");
    struct sw_ring *r = new_ring(dir, 0, getpid());
    struct sw_ring *c = r;
    struct cons_arg ca = {.r = c, .nprod = 4, .count = 20000};
    pthread_t ct;
    CHECK(pthread_create(&ct, NULL, consumer_thread, &ca) == 0);
    run_producers(r, 4, 20000);
    pthread_join(ct, NULL);
    if (ca.result)
        fprintf(stderr, "consumer failed at test_ring.c:%d\n", ca.result);
    CHECK_EQ(ca.result, 0);
    struct sw_ring_stats st;
    sw_ring_get_stats(c, &st);
    CHECK_EQ(st.committed, 80000);
    CHECK_EQ(st.consumed, 80000);
    sw_ring_detach(r);
}

static int wait_child(pid_t pid, int timeout_s)
{
    int status = 0;
    for (int i = 0; i < timeout_s * 100; i++) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

/* 8 producer threads x 100k records, consumer in a forked child mapping the same file. */
__attribute__((unused)) static void test_mp_consumer_process(void)
{
    char dir[300], p[600];
    new_dir(dir, sizeof(dir), "mp");
    struct sw_ring *r = new_ring(dir, 256 * 1024, getpid());
    ring_path(p, sizeof(p), dir, r);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        struct sw_ring *c = NULL;
        if (sw_ring_open(p, &c) != 0)
            _exit(2);
        int rc = consume_all(c, 8, 100000, 100);
        if (rc)
            fprintf(stderr, "child consumer failed at test_ring.c:%d\n", rc);
        _exit(rc ? 1 : 0);
    }
    run_producers(r, 8, 100000);
    CHECK_EQ(wait_child(pid, 120), 0);
    struct sw_ring_stats st;
    sw_ring_get_stats(r, &st);
    CHECK_EQ(st.committed, 800000);
    CHECK_EQ(st.consumed, 800000);
    CHECK(sw_ring_empty(r));
    sw_ring_detach(r);
}

/* Shared between the test and its consumer children. */
struct kill_state {
    _Atomic uint64_t intended; /* seq of the first record after the batch being released */
    _Atomic uint64_t done;     /* the same, once sw_ring_release returned */
};

static void consume_seq(const char *path, struct kill_state *ks, uint32_t total, bool second)
{
    struct sw_ring *c = NULL;
    if (sw_ring_open(path, &c) != 0)
        _exit(2);
    if (sw_ring_recover(c) < 0)
        _exit(3);
    uint64_t cur = sw_ring_tail(c);
    uint32_t expect = UINT32_MAX;
    uint32_t batch = 0;
    time_t deadline = time(NULL) + 60;
    for (;;) {
        const void *p;
        uint32_t len, who, seq;
        uint16_t type;
        uint64_t next;
        int rc = sw_ring_peek(c, cur, &p, &len, &type, &next);
        if (rc < 0)
            _exit(4);
        if (rc == 0) {
            if (time(NULL) > deadline)
                _exit(5);
            sched_yield();
            continue;
        }
        if (!verify(p, len, &who, &seq))
            _exit(6);
        if (expect == UINT32_MAX) {
            /* The first record after a restart: exactly where the last release ended. */
            if (second) {
                uint64_t lo = atomic_load(&ks->done), hi = atomic_load(&ks->intended);
                if (seq < lo || seq > hi || seq == 0) {
                    fprintf(stderr, "resume at %u, released [%llu, %llu]\n", seq,
                            (unsigned long long)lo, (unsigned long long)hi);
                    _exit(7);
                }
            } else if (seq != 0) {
                _exit(8);
            }
            expect = seq;
        }
        if (seq != expect)
            _exit(9);
        expect++;
        cur = next;
        if (++batch == 50 || expect == total) {
            atomic_store(&ks->intended, expect);
            sw_ring_release(c, cur);
            atomic_store(&ks->done, expect);
            batch = 0;
            if (!second)
                usleep(50); /* slow, so the kill lands mid-stream */
        }
        if (expect == total)
            _exit(0);
    }
}

static void test_consumer_killed_resumes(void)
{
    char dir[300], p[600];
    new_dir(dir, sizeof(dir), "kill");
    struct sw_ring *r = new_ring(dir, 0, getpid());
    ring_path(p, sizeof(p), dir, r);
    struct kill_state *ks = mmap(NULL, sizeof(*ks), PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(ks != MAP_FAILED);
    const uint32_t total = 60000;
    pid_t c1 = fork();
    CHECK(c1 >= 0);
    if (c1 == 0)
        consume_seq(p, ks, total, false);
    uint32_t s = 0;
    bool killed = false;
    pid_t c2 = -1;
    time_t deadline = time(NULL) + 60;
    while (s < total) {
        if (push(r, 9, s, len_for(9, s, 200)))
            s++;
        else
            sched_yield();
        CHECK(time(NULL) < deadline);
        if (!killed && atomic_load(&ks->done) > total / 4) {
            kill(c1, SIGKILL);
            int st;
            waitpid(c1, &st, 0);
            CHECK(WIFSIGNALED(st));
            killed = true;
            c2 = fork();
            CHECK(c2 >= 0);
            if (c2 == 0)
                consume_seq(p, ks, total, true);
        }
    }
    CHECK(killed);
    CHECK_EQ(wait_child(c2, 60), 0);
    CHECK(sw_ring_empty(r));
    munmap(ks, sizeof(*ks));
    sw_ring_detach(r);
}

/* A consumer killed while zeroing the released span: sw_ring_recover finishes the release. */
static void test_recover_half_release(void)
{
    char dir[300], p[600];
    new_dir(dir, sizeof(dir), "half");
    struct sw_ring *r = new_ring(dir, 0, getpid());
    ring_path(p, sizeof(p), dir, r);
    for (uint32_t s = 0; s < 10; s++)
        CHECK(push(r, 3, s, 100));
    const void *pl;
    uint32_t len;
    uint16_t type;
    uint64_t c = sw_ring_tail(r), next;
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(sw_ring_peek(r, c, &pl, &len, &type, &next), 1);
        c = next;
    }
    /* Simulate the dead consumer: release_to set, the first record's header zeroed. */
    int fd = open(p, O_RDWR);
    CHECK(fd >= 0);
    uint8_t *m = mmap(NULL, SW_RING_HDR_BYTES + SW_RING_MIN_DATA, PROT_READ | PROT_WRITE,
                      MAP_SHARED, fd, 0);
    CHECK(m != MAP_FAILED);
    close(fd);
    memcpy(m + sw_ring_test_off_release_to(), &c, 8);
    memset(m + SW_RING_HDR_BYTES, 0, 8);
    struct sw_ring *k = NULL;
    CHECK_EQ(sw_ring_open(p, &k), 0);
    CHECK_EQ(sw_ring_peek(k, sw_ring_tail(k), &pl, &len, &type, &next), 0); /* stuck */
    CHECK_EQ(sw_ring_recover(k), 1);
    CHECK_EQ(sw_ring_tail(k), c);
    CHECK_EQ(sw_ring_recover(k), 0);
    uint32_t who, seq;
    CHECK_EQ(sw_ring_peek(k, sw_ring_tail(k), &pl, &len, &type, &next), 1);
    CHECK(verify(pl, len, &who, &seq));
    CHECK_EQ(seq, 4);
    munmap(m, SW_RING_HDR_BYTES + SW_RING_MIN_DATA);
    sw_ring_close(k);
    sw_ring_detach(r);
}

/*
 * Released bytes are zeroed: a slot that a producer has reserved (head moved) but whose header
 * it has not written yet must read as "not yet written", never as the old record that was
 * there one lap earlier.
 */
static void test_release_zeroes(void)
{
    char dir[300], p[600];
    new_dir(dir, sizeof(dir), "zero");
    struct sw_ring *r = new_ring(dir, 0, getpid());
    ring_path(p, sizeof(p), dir, r);
    int fd = open(p, O_RDWR);
    CHECK(fd >= 0);
    size_t fsz = SW_RING_HDR_BYTES + SW_RING_MIN_DATA;
    uint8_t *m = mmap(NULL, fsz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(m != MAP_FAILED);
    close(fd);
    /* One full lap of 56-byte records (64 bytes each with the header), all released. */
    uint32_t n = 0;
    while (push(r, 8, n, 56))
        n++;
    CHECK_EQ(n, SW_RING_MIN_DATA / 64);
    const void *pl;
    uint32_t len;
    uint16_t type;
    uint64_t c = sw_ring_tail(r), next;
    while (sw_ring_peek(r, c, &pl, &len, &type, &next) == 1)
        c = next;
    sw_ring_release(r, c);
    for (size_t i = 0; i < SW_RING_MIN_DATA; i++)
        CHECK_EQ(m[SW_RING_HDR_BYTES + i], 0);
    /* A producer "between the CAS and the header store": head moved, header not written. */
    uint64_t *head = (uint64_t *)(void *)(m + sw_ring_test_off_head());
    *head += 64;
    CHECK_EQ(sw_ring_peek(r, c, &pl, &len, &type, &next), 0);
    munmap(m, fsz);
    sw_ring_detach(r);
}

/* A producer process killed between reserve and commit: the consumer skips its record. */
static void test_producer_dies(void)
{
    char dir[300];
    new_dir(dir, sizeof(dir), "pd");
    CHECK(mkdir(dir, 0700) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        struct sw_ring *r = new_ring(dir, 0, getpid());
        if (!push(r, 4, 0, 64))
            _exit(1);
        void *stuck = sw_ring_reserve(r, 500, SW_REC_SEGMENT); /* never committed */
        if (!stuck || !push(r, 4, 2, 64))
            _exit(1);
        raise(SIGKILL);
        _exit(1);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFSIGNALED(st));
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    struct dirent *e;
    char p[600] = "";
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "ring-", 5) == 0)
            snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
    closedir(d);
    CHECK(p[0] != '\0');
    struct sw_ring *c = NULL;
    CHECK_EQ(sw_ring_open(p, &c), 0);
    CHECK_EQ(sw_ring_get_meta(c)->pid, pid);
    CHECK(kill(pid, 0) != 0 && errno == ESRCH);
    const void *pl;
    uint32_t len, who, seq;
    uint16_t type;
    uint64_t cur = sw_ring_tail(c), next;
    CHECK_EQ(sw_ring_peek(c, cur, &pl, &len, &type, &next), 1);
    CHECK(verify(pl, len, &who, &seq));
    CHECK_EQ(seq, 0);
    cur = next;
    CHECK_EQ(sw_ring_peek(c, cur, &pl, &len, &type, &next), 0); /* BUSY: wait... */
    CHECK_EQ(sw_ring_skip_stuck(c, cur, &next), 1);              /* ...until known dead */
    cur = next;
    CHECK_EQ(sw_ring_skip_stuck(c, cur, &next), 0); /* a committed record: nothing to skip */
    CHECK_EQ(sw_ring_peek(c, cur, &pl, &len, &type, &next), 1);
    CHECK(verify(pl, len, &who, &seq));
    CHECK_EQ(seq, 2);
    sw_ring_release(c, next);
    CHECK(sw_ring_empty(c));
    struct sw_ring_stats s;
    sw_ring_get_stats(c, &s);
    CHECK_EQ(s.committed, 2);
    CHECK_EQ(s.consumed, 2);
    CHECK_EQ(s.dropped, 1);
    sw_ring_close(c);

    /* Died between the CAS and the header store: the header is still 0 -> jump to head. */
    new_dir(dir, sizeof(dir), "pd2");
    struct sw_ring *r = new_ring(dir, 0, getpid());
    CHECK(push(r, 5, 0, 64));
    uint8_t *stuck = sw_ring_reserve(r, 100, SW_REC_SEGMENT);
    CHECK(stuck != NULL);
    memset(stuck - 8, 0, 8);
    CHECK(push(r, 5, 2, 64));
    cur = sw_ring_tail(r);
    CHECK_EQ(sw_ring_peek(r, cur, &pl, &len, &type, &next), 1);
    cur = next;
    CHECK_EQ(sw_ring_peek(r, cur, &pl, &len, &type, &next), 0);
    CHECK_EQ(sw_ring_skip_stuck(r, cur, &next), 1);
    CHECK_EQ(next, sw_ring_head(r));
    sw_ring_release(r, next);
    CHECK(sw_ring_empty(r));
    sw_ring_detach(r);
}

/* Corrupt headers and positions are reported as -EBADMSG, never trusted. */
static void test_corrupt(void)
{
    char dir[300], p[600];
    new_dir(dir, sizeof(dir), "bad");
    struct sw_ring *r = new_ring(dir, 0, getpid());
    ring_path(p, sizeof(p), dir, r);
    CHECK(push(r, 6, 0, 100));
    CHECK(push(r, 6, 1, 100));
    int fd = open(p, O_RDWR);
    CHECK(fd >= 0);
    size_t fsz = SW_RING_HDR_BYTES + SW_RING_MIN_DATA;
    uint8_t *m = mmap(NULL, fsz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(m != MAP_FAILED);
    uint64_t *w0 = (uint64_t *)(void *)(m + SW_RING_HDR_BYTES);
    uint64_t good = *w0;
    const void *pl;
    uint32_t len;
    uint16_t type;
    uint64_t next;
    uint64_t bad_words[] = {
        good | (1ull << 48),                          /* reserved bits */
        (good & ~0xc0000000ull) | 0xc0000000ull,      /* both state bits */
        (good & ~0xffffffffull) | 0x80000000u | (SW_REC_MAX_LEN + 1), /* too long */
        (good & ~0xffffffffull) | 0x80000000u | 5000, /* beyond head */
        0x80000000ull | 100 | (0xffffull << 32),      /* a pad that does not reach the end */
        0x80000000ull | (SW_RING_MIN_DATA - 8 + 8) | (0xffffull << 32), /* pad too long */
    };
    for (size_t i = 0; i < SW_ARRAY_LEN(bad_words); i++) {
        *w0 = bad_words[i];
        CHECK_EQ(sw_ring_peek(r, 0, &pl, &len, &type, &next), -EBADMSG);
        CHECK_EQ(sw_ring_skip_stuck(r, 0, &next), -EBADMSG);
    }
    *w0 = good;
    CHECK_EQ(sw_ring_peek(r, 0, &pl, &len, &type, &next), 1);
    /* Bad cursors. */
    CHECK_EQ(sw_ring_peek(r, 4, &pl, &len, &type, &next), -EBADMSG);
    CHECK_EQ(sw_ring_peek(r, 1u << 20, &pl, &len, &type, &next), -EBADMSG);
    /* A head beyond the capacity. */
    uint64_t *head = (uint64_t *)(void *)(m + sw_ring_test_off_head());
    uint64_t h = *head;
    *head = h + 10 * SW_RING_MIN_DATA;
    CHECK_EQ(sw_ring_peek(r, 0, &pl, &len, &type, &next), -EBADMSG);
    sw_ring_release(r, 216); /* ignored: the window is invalid */
    CHECK_EQ(sw_ring_tail(r), 0);
    *head = h;
    sw_ring_release(r, 12345); /* not a valid cursor: ignored */
    CHECK_EQ(sw_ring_tail(r), 0);
    /* The producer survives a garbage tail: it drops, never writes out of bounds. */
    uint64_t *tail = (uint64_t *)(void *)(m + sw_ring_test_off_tail());
    *tail = 0xfff0000000000000ull;
    CHECK(sw_ring_reserve(r, 100, SW_REC_SEGMENT) == NULL);
    /* ... and an unaligned head 2 bytes before the end (a wrap's PAD word would not fit). */
    *tail = *head = SW_RING_MIN_DATA - 2;
    uint8_t end[2] = {0x5a, 0xa5};
    memcpy(m + fsz - 2, end, 2);
    struct sw_ring_stats st0, st1;
    sw_ring_get_stats(r, &st0);
    CHECK(sw_ring_reserve(r, 100, SW_REC_SEGMENT) == NULL);
    CHECK(!sw_ring_put_segment(r, end, 2));
    sw_ring_get_stats(r, &st1);
    CHECK_EQ(st1.dropped, st0.dropped + 2);
    CHECK_EQ(*head, SW_RING_MIN_DATA - 2);
    CHECK(memcmp(m + fsz - 2, end, 2) == 0);
    *head = h;
    *tail = 0;

    /* Bad files. */
    struct sw_ring *c = NULL;
    uint64_t magic = *(uint64_t *)(void *)m;
    *(uint64_t *)(void *)m = 0;
    CHECK_EQ(sw_ring_open(p, &c), -EAGAIN);
    *(uint64_t *)(void *)m = 42;
    CHECK_EQ(sw_ring_open(p, &c), -EBADMSG);
    *(uint64_t *)(void *)m = magic;
    uint64_t *data_bytes = (uint64_t *)(void *)(m + 16);
    *data_bytes = 3 * SW_RING_MIN_DATA;
    CHECK_EQ(sw_ring_open(p, &c), -EBADMSG);
    *data_bytes = 2 * SW_RING_MIN_DATA;
    CHECK_EQ(sw_ring_open(p, &c), -EBADMSG);
    *data_bytes = SW_RING_MIN_DATA;
    CHECK_EQ(sw_ring_open(p, &c), 0);
    sw_ring_close(c);
    CHECK(ftruncate(fd, 100) == 0);
    CHECK_EQ(sw_ring_open(p, &c), -EBADMSG);
    CHECK(ftruncate(fd, 0) == 0);
    CHECK_EQ(sw_ring_open(p, &c), -EAGAIN);
    munmap(m, fsz);
    close(fd);
    sw_ring_detach(r); /* the producer mapping of a truncated file: never touched again */
}

#if defined(__SANITIZE_THREAD__)
#define SW_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SW_TSAN 1
#endif
#endif

/*
 * A new ring's pages are mapped when it is created: the first turn of the ring (every record
 * an application thread writes into a page not written before) takes no page fault. Without
 * that, each 4 KiB of the data area costs the writing thread one fault (~10 us each on the
 * bench's VM). TSan's shadow memory faults on every access to new memory: not checked there.
 */
/* 4 KiB pages allocated to the ring file `path` (st_blocks: tmpfs pages, disk blocks). */
static long file_pages(const char *path)
{
    struct stat st;
    CHECK(stat(path, &st) == 0);
    return (long)(st.st_blocks * 512 / 4096);
}

/* Can this kernel populate mappings (MADV_POPULATE_WRITE, Linux 5.14)? */
static bool have_populate(void)
{
    void *probe = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(probe != MAP_FAILED);
    int prc = madvise(probe, 4096, 23 /* MADV_POPULATE_WRITE */);
    munmap(probe, 4096);
    return prc == 0;
}

/*
 * A new ring allocates its header page and 64 KiB, and the producers map the rest ahead of
 * themselves (ring.c, "First turn"): the first turn takes no page fault, whatever the size.
 */
static void test_first_turn_no_faults(void)
{
#ifdef SW_TSAN
    CHECK_SKIP("TSan's shadow memory faults in on every first access: page faults of the ring "
               "cannot be told apart");
#else
    if (!have_populate())
        CHECK_SKIP("this kernel has no MADV_POPULATE_WRITE (Linux < 5.14)");
    if (check_page_faults() < 0)
        CHECK_SKIP("perf_event_open (a user-mode page-fault counter) is not allowed here");
    char dir[300], path[600];
    new_dir(dir, sizeof(dir), "firstturn");
    for (size_t bytes = 2u << 20; bytes <= (16u << 20); bytes *= 8) {
        struct sw_ring *r = new_ring(dir, bytes, getpid());
        CHECK_EQ(sw_ring_capacity(r), bytes);
        ring_path(path, sizeof(path), dir, r);
        long at_create = file_pages(path);
        long f0 = check_page_faults();
        uint32_t n = 0;
        while (push(r, 3, n, 1000))
            n++;
        long faults = check_page_faults() - f0;
        long after = file_pages(path);
        CHECK_EQ(n, bytes / 1008);
        printf("  %zu KiB ring: %ld pages at creation, %ld after %u records; %ld page faults\n",
               bytes >> 10, at_create, after, n, faults);
        /* The header page and 16 (the whole file before: fallocate). */
        CHECK(at_create >= 1 + 16 && at_create <= 1 + 16 + 1);
        CHECK(after >= (long)(bytes / 4096) - 1);
        /* Without the mapping ahead: one per 4 KiB (or per tmpfs folio of a few pages). ASan
           reads the shadow of the area (1/8 of it, zero pages): bytes/32K of them and more. */
#if defined(__SANITIZE_ADDRESS__) || TEST_RING_ASAN
        CHECK(faults <= (long)(bytes / 4096) / 4);
#else
        CHECK(faults <= 4);
#endif
        sw_ring_detach(r);
    }
#endif
}

/*
 * A ring on a tmpfs too small for it: the producers allocate it as they go, so they never write
 * into a page that could not be allocated (SIGBUS, killing the application); records that find
 * no room are dropped, and the process carries on. Runs in a child with a mount namespace of
 * its own (as root, or in a user namespace where the user's id is mapped to itself), skipped
 * where neither is allowed.
 */
/* Writes `text` to the /proc file `path`; true if it took it whole. */
static bool write_proc(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text);
}

/*
 * A user and mount namespace of its own, with this process's uid and gid mapped to themselves
 * (unmapped, files would show the overflow uid and the ring's ownership checks refuse them).
 */
static bool user_namespace(void)
{
    char map[64];
    unsigned uid = (unsigned)getuid(), gid = (unsigned)getgid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
        return false;
    snprintf(map, sizeof(map), "%u %u 1\n", uid, uid);
    if (!write_proc("/proc/self/uid_map", map))
        return false;
    write_proc("/proc/self/setgroups", "deny"); /* absent before Linux 3.19 */
    snprintf(map, sizeof(map), "%u %u 1\n", gid, gid);
    return write_proc("/proc/self/gid_map", map);
}

static void test_full_tmpfs(void)
{
    if (!have_populate())
        CHECK_SKIP("this kernel has no MADV_POPULATE_WRITE (Linux < 5.14)");
    char dir[300];
    new_dir(dir, sizeof(dir), "smalltmpfs");
    CHECK(mkdir(dir, 0700) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (unshare(CLONE_NEWNS) != 0 && !user_namespace())
            _exit(77);
        if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
            mount("swtest", dir, "tmpfs", 0, "size=160k,mode=0700") != 0)
            _exit(77);
        struct sw_ring *r = new_ring(dir, 2u << 20, getpid()); /* 2 MiB on 160 KiB */
        uint32_t ok = 0;
        for (uint32_t i = 0; i < 4000; i++)
            ok += push(r, 5, i, 1000);
        char path[600];
        ring_path(path, sizeof(path), dir, r);
        long pages = file_pages(path);
        struct sw_ring_stats st;
        sw_ring_get_stats(r, &st);
        printf("  2048 KiB ring on a 160 KiB tmpfs: %u of 4000 records written, %llu dropped\n", ok,
               (unsigned long long)st.dropped);
        /* 156 KiB for the data at most; at least the 64 KiB allocated at creation. */
        CHECK(ok >= 64 && ok <= 160);
        CHECK_EQ(st.dropped, 4000 - ok);
        CHECK(pages <= 160 / 4); /* a sparse file: what the tmpfs could allocate, no more */
        sw_ring_detach(r);
        _exit(0);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(!WIFSIGNALED(status)); /* SIGBUS: a write into a page tmpfs had no room for */
    if (WEXITSTATUS(status) == 77) {
        rm_tree(base_dir);
        CHECK_SKIP("no mount namespace here (neither root nor user namespaces)");
    }
    CHECK_EQ(WEXITSTATUS(status), 0);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* forked children must not replay buffered output */
    make_base();
    if (argc > 1 && strcmp(argv[1], "mt") == 0) {
        RUN_TEST(test_mt_consumer_thread);
    } else if (argc > 1 && strcmp(argv[1], "first_turn") == 0) {
        RUN_TEST(test_first_turn_no_faults);
    } else if (argc > 1 && strcmp(argv[1], "tmpfs_full") == 0) {
        RUN_TEST(test_full_tmpfs);
    } else {
        RUN_TEST(test_dir_and_file_checks);
        RUN_TEST(test_single_thread_wrap);
        RUN_TEST(test_full_and_drop);
        RUN_TEST(test_corrupt);
        RUN_TEST(test_recover_half_release);
        RUN_TEST(test_release_zeroes);
        RUN_TEST(test_producer_dies);
        RUN_TEST(test_mt_consumer_thread);
#ifndef SW_TSAN
        /* TSan cannot see release/acquire pairs between two processes: run it without TSan. */
        RUN_TEST(test_mp_consumer_process);
#endif
        RUN_TEST(test_consumer_killed_resumes);
    }
    rm_tree(base_dir);
    return 0;
}
