/*
 * test_svcblock.c - the per-service shared block (svcblock.h): creation by whichever side is
 * first, refusal of every kind of bad file (nothing changes for the process, nothing written
 * into the file), the shared quota exact under threads and under forked processes that open
 * the block themselves, a process killed while counting or while publishing, the seqlock
 * under a writer and readers (TSan: tests/conf_prop.cmake builds it with the other unit tests,
 * scripts/test.sh stage 3 under -fsanitize=thread), and the process's effective values
 * (sw_svc_eff) following what the reporter publishes and returning to the file's.
 */
#include "common.h"

#include "config.h"
#include "sampler.h"
#include "svcblock.h"

#include "check.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_dir[256];
static void dyn_of(struct sw_svc_dyn *d, int v);
static int64_t g_t0 = INT64_C(3000) * 600000000; /* a window start */

static void path_of(const char *svc, const char *inst, char *out, size_t cap)
{
    char name[32];
    sw_svc_name(svc, inst, name, sizeof(name));
    snprintf(out, cap, "%s/%s", g_dir, name);
}

static void test_create_open(void)
{
    struct sw_svc *a = NULL, *b = NULL;
    CHECK_EQ(sw_svc_open(g_dir, "svc-x", "inst-1", false, &a), -ENOENT);
    CHECK_EQ(sw_svc_open(g_dir, "svc-x", "inst-1", true, &a), 0);
    CHECK_EQ(sw_svc_open(g_dir, "svc-x", "inst-1", false, &b), 0);
    char p[512];
    path_of("svc-x", "inst-1", p, sizeof(p));
    struct stat st;
    CHECK_EQ(stat(p, &st), 0);
    CHECK_EQ(st.st_mode & 07777, 0600);
    CHECK_EQ(st.st_size, SW_SVC_BYTES);
    CHECK_STR(sw_svc_service(b), "svc-x");
    CHECK_STR(sw_svc_instance(b), "inst-1");
    /* One quota: counted through one mapping, seen through the other. */
    CHECK(sw_sampler_try(sw_svc_quota(a), 2, g_t0));
    CHECK(sw_sampler_try(sw_svc_quota(b), 2, g_t0 + 1));
    CHECK(!sw_sampler_try(sw_svc_quota(a), 2, g_t0 + 2));
    CHECK_EQ(sw_sampler_count(sw_svc_quota(b), g_t0 + 3), 2);
    /* Another instance: another block. */
    struct sw_svc *c = NULL;
    CHECK_EQ(sw_svc_open(g_dir, "svc-x", "inst-2", true, &c), 0);
    CHECK_EQ(sw_sampler_count(sw_svc_quota(c), g_t0), 0);
    sw_svc_close(a);
    sw_svc_close(b);
    sw_svc_close(c);
}

static void write_file(const char *p, const void *data, size_t n, mode_t mode)
{
    unlink(p);
    int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, mode);
    CHECK(fd >= 0);
    CHECK_EQ(write(fd, data, n), (long)n);
    fchmod(fd, mode);
    close(fd);
}

static long file_bytes(const char *p, unsigned char *buf, size_t cap)
{
    int fd = open(p, O_RDONLY);
    if (fd < 0)
        return -1;
    long n = read(fd, buf, cap);
    close(fd);
    return n;
}

/* Every bad file is refused with -EBADMSG and left exactly as it was. */
static void test_bad_files(void)
{
    char p[512];
    path_of("svc-bad", "i", p, sizeof(p));
    static unsigned char good[SW_SVC_BYTES], junk[SW_SVC_BYTES], back[2 * SW_SVC_BYTES];
    struct sw_svc *b = NULL;
    /* A valid block's bytes to start from. */
    CHECK_EQ(sw_svc_open(g_dir, "svc-bad", "i", true, &b), 0);
    sw_svc_close(b);
    CHECK_EQ(file_bytes(p, good, sizeof(good)), SW_SVC_BYTES);
    unsigned seed = 12345;
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (unsigned char)(rand_r(&seed) >> 8);

    struct {
        const char *what;
        const void *data;
        size_t n;
        mode_t mode;
        size_t flip; /* a byte of `good` to change, or SIZE_MAX */
    } cases[] = {
        {"garbage", junk, sizeof(junk), 0600, SIZE_MAX},
        {"truncated", good, 100, 0600, SIZE_MAX},
        {"empty", good, 0, 0600, SIZE_MAX},
        {"bad magic", good, sizeof(good), 0600, 0},
        {"bad version", good, sizeof(good), 0600, 8},
        {"other service (hash collision)", good, sizeof(good), 0600, 16},
        {"mode 0644", good, sizeof(good), 0644, SIZE_MAX},
    };
    for (size_t k = 0; k < SW_ARRAY_LEN(cases); k++) {
        unsigned char img[SW_SVC_BYTES];
        memcpy(img, cases[k].data, cases[k].n);
        if (cases[k].flip != SIZE_MAX)
            img[cases[k].flip] ^= 0x5a;
        write_file(p, img, cases[k].n, cases[k].mode);
        b = NULL;
        int rc = sw_svc_open(g_dir, "svc-bad", "i", true, &b);
        if (rc != -EBADMSG)
            fprintf(stderr, "case %s: rc %d\n", cases[k].what, rc);
        CHECK_EQ(rc, -EBADMSG);
        CHECK(b == NULL);
        CHECK_EQ(file_bytes(p, back, sizeof(back)), (long)cases[k].n);
        CHECK(memcmp(back, img, cases[k].n) == 0);
    }
    /* Too long: 8 KiB of a good block followed by zeros. */
    unsigned char big[2 * SW_SVC_BYTES];
    memset(big, 0, sizeof(big));
    memcpy(big, good, sizeof(good));
    write_file(p, big, sizeof(big), 0600);
    CHECK_EQ(sw_svc_open(g_dir, "svc-bad", "i", true, &b), -EBADMSG);
    /* A symlink to a good block. */
    char target[600];
    snprintf(target, sizeof(target), "%s.target", p);
    write_file(target, good, sizeof(good), 0600);
    unlink(p);
    CHECK_EQ(symlink(target, p), 0);
    CHECK_EQ(sw_svc_open(g_dir, "svc-bad", "i", true, &b), -EBADMSG);
    unlink(p);
    unlink(target);
}

/* The process side with a bad file: its own quota and the file's values, nothing else. */
static const char *g_app_dir;
static int app_dir(char *out, size_t cap)
{
    snprintf(out, cap, "%s", g_app_dir);
    return 0;
}

/* The process side as the agent starts it: the file's values in `cfg`, instance "i". */
static void app_start(struct sw_config *cfg, const char *svc, int n, struct sw_sampler *local)
{
    sw_config_defaults(cfg);
    snprintf(cfg->service_name, sizeof(cfg->service_name), "%s", svc);
    snprintf(cfg->instance_name, sizeof(cfg->instance_name), "i");
    cfg->sample_n_per_3_secs = n;
    g_app_dir = g_dir;
    sw_svc_init(cfg, local, app_dir);
}

static void test_app_bad_block(void)
{
    char p[512];
    path_of("svc-appbad", "i", p, sizeof(p));
    static unsigned char junk[SW_SVC_BYTES];
    memset(junk, 0xab, sizeof(junk));
    write_file(p, junk, sizeof(junk), 0600);
    struct sw_config cfg;
    static struct sw_sampler local;
    app_start(&cfg, "svc-appbad", 3, &local);
    const struct sw_eff *e = sw_svc_eff();
    CHECK(e->quota == &local);
    CHECK_EQ(e->sample_n_per_3_secs, 3);
    CHECK(e->ignore_suffix == &cfg.ignore_suffix);
    CHECK(sw_svc_test_attached() == NULL);
    /* And it does not try again on every request: the view is settled. */
    CHECK(sw_svc_eff() == e);
    unsigned char back[SW_SVC_BYTES];
    CHECK_EQ(file_bytes(p, back, sizeof(back)), SW_SVC_BYTES);
    CHECK(memcmp(back, junk, sizeof(junk)) == 0);
    unlink(p);
}

/* The process side following the reporter's publications. */
static void test_app_follows(void)
{
    struct sw_config cfg;
    static struct sw_sampler local;
    app_start(&cfg, "svc-app", -1, &local);
    const struct sw_eff *e = sw_svc_eff();
    CHECK(sw_svc_test_attached() != NULL);
    CHECK(e->quota != &local);
    CHECK_EQ(e->sample_n_per_3_secs, -1);
    CHECK_EQ(e->from_oap, 0);

    struct sw_svc *rep = NULL; /* the reporter's handle */
    CHECK_EQ(sw_svc_open(g_dir, "svc-app", "i", false, &rep), 0);
    struct sw_svc_dyn d;
    memset(&d, 0, sizeof(d));
    d.set = SW_DYN_SAMPLE | SW_DYN_IGNORE_SUFFIX | SW_DYN_SPAN_LIMIT;
    d.sample_n_per_3_secs = 1;
    d.span_limit_per_segment = 5;
    snprintf(d.uuid, sizeof(d.uuid), "u1");
    d.ignore_suffix.n = 1;
    snprintf(d.ignore_suffix.item[0], SW_CFG_ITEM_MAX, "zip");
    sw_cfg_list_index(&d.ignore_suffix);
    sw_svc_publish(rep, &d, false);
    e = sw_svc_eff();
    CHECK_EQ(e->sample_n_per_3_secs, 1);
    CHECK_EQ(e->from_oap, SW_DYN_SAMPLE | SW_DYN_IGNORE_SUFFIX | SW_DYN_SPAN_LIMIT);
    CHECK_EQ(sw_svc_span_limit(), 5);
    CHECK(sw_cfg_list_ignored_suffix(e->ignore_suffix, "zip", 3));
    CHECK(!sw_cfg_list_ignored_suffix(e->ignore_suffix, "png", 3));
    /* The same again: no change, the same view (no new slot). */
    sw_svc_publish(rep, &d, false);
    CHECK(sw_svc_eff() == e);
    /* The keys removed in OAP: the file's values again. */
    memset(&d, 0, sizeof(d));
    snprintf(d.uuid, sizeof(d.uuid), "u2");
    sw_svc_publish(rep, &d, false);
    e = sw_svc_eff();
    CHECK_EQ(e->sample_n_per_3_secs, -1);
    CHECK_EQ(sw_svc_span_limit(), 300);
    CHECK(e->ignore_suffix == &cfg.ignore_suffix);
    CHECK(sw_cfg_list_ignored_suffix(e->ignore_suffix, "png", 3));
    /* Garbage in the published words (a list count of 1000, items without NUL): bounded. */
    memset(&d, 0xff, sizeof(d));
    d.set = SW_DYN_ALL;
    d.ignore_suffix.n = 1000;
    sw_svc_publish(rep, &d, false);
    e = sw_svc_eff();
    CHECK(e->ignore_suffix->n >= 0 && e->ignore_suffix->n <= SW_CFG_LIST_MAX);
    CHECK_EQ(sw_svc_span_limit(), 300); /* -1 from the garbage: out of range, the file's */
    (void)sw_cfg_list_ignored_suffix(e->ignore_suffix, "abc", 3);
    /* A writer killed in the middle (seq left odd): the process keeps what it had... */
    memset(&d, 0, sizeof(d));
    d.set = SW_DYN_SAMPLE;
    d.sample_n_per_3_secs = 7;
    sw_svc_publish(rep, &d, false);
    CHECK_EQ(sw_svc_eff()->sample_n_per_3_secs, 7);
    char p[512];
    path_of("svc-app", "i", p, sizeof(p));
    int fd = open(p, O_RDWR);
    CHECK(fd >= 0);
    uint64_t seq;
    CHECK_EQ(pread(fd, &seq, 8, (off_t)sw_svc_test_off_seq()), 8);
    seq |= 1;
    CHECK_EQ(pwrite(fd, &seq, 8, (off_t)sw_svc_test_off_seq()), 8);
    close(fd);
    CHECK_EQ(sw_svc_eff()->sample_n_per_3_secs, 7);
    /* ... and the next writer goes on from there. */
    d.sample_n_per_3_secs = 9;
    sw_svc_publish(rep, &d, false);
    CHECK_EQ(sw_svc_eff()->sample_n_per_3_secs, 9);
    sw_svc_close(rep);
}

/*
 * Request threads reading the effective values while the reporter publishes changes (fewer
 * than the slots, as in life: one change per poll interval at most; svcblock.c EFF_SLOTS).
 */
static _Atomic bool g_eff_stop;
static void *eff_reader(void *p)
{
    long *n = p;
    while (!atomic_load(&g_eff_stop)) {
        const struct sw_eff *e = sw_svc_eff();
        CHECK(e->sample_n_per_3_secs == -1 ||
              (e->sample_n_per_3_secs >= 1 && e->sample_n_per_3_secs <= 5));
        (void)sw_cfg_list_ignored_suffix(e->ignore_suffix, "x1", 2);
        (void)sw_sampler_count(e->quota, g_t0);
        ++*n;
    }
    return NULL;
}

static void test_app_threads(void)
{
    struct sw_config cfg;
    static struct sw_sampler local;
    app_start(&cfg, "svc-appthr", -1, &local);
    atomic_store(&g_eff_stop, false);
    pthread_t th[4];
    long n[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; i++)
        CHECK_EQ(pthread_create(&th[i], NULL, eff_reader, &n[i]), 0);
    usleep(20000);
    struct sw_svc *rep = NULL;
    CHECK_EQ(sw_svc_open(g_dir, "svc-appthr", "i", true, &rep), 0);
    for (int v = 1; v <= 5; v++) {
        struct sw_svc_dyn d;
        dyn_of(&d, v);
        sw_svc_publish(rep, &d, false);
        usleep(20000);
    }
    atomic_store(&g_eff_stop, true);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ(sw_svc_eff()->sample_n_per_3_secs, 5);
    sw_svc_close(rep);
}

/* ---- the quota under threads ---- */

struct qarg {
    struct sw_sampler *q;
    int64_t t;
    int ok;
};

static void *quota_thread(void *p)
{
    struct qarg *a = p;
    for (int i = 0; i < 20000; i++)
        a->ok += sw_sampler_try(a->q, 5, a->t + (i % 2000));
    return NULL;
}

static void test_quota_threads(void)
{
    struct sw_svc *b = NULL;
    CHECK_EQ(sw_svc_open(g_dir, "svc-thr", "i", true, &b), 0);
    pthread_t th[8];
    struct qarg a[8];
    for (int i = 0; i < 8; i++) {
        a[i] = (struct qarg){sw_svc_quota(b), g_t0, 0};
        CHECK_EQ(pthread_create(&th[i], NULL, quota_thread, &a[i]), 0);
    }
    int total = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        total += a[i].ok;
    }
    CHECK_EQ(total, 5);
    sw_svc_close(b);
}

/*
 * Forked processes, each opening the block by name itself (as exec'ed workers would), counting
 * in the same window: exactly N in total. The children report their counts through a pipe.
 */
static void test_quota_processes(void)
{
    int pfd[2];
    CHECK_EQ(pipe(pfd), 0);
    enum { KIDS = 4, N = 7 };
    fflush(stdout);
    pid_t kids[KIDS];
    for (int k = 0; k < KIDS; k++) {
        kids[k] = fork();
        CHECK(kids[k] >= 0);
        if (kids[k] == 0) {
            struct sw_svc *b = NULL;
            if (sw_svc_open(g_dir, "svc-procs", "i", true, &b) != 0)
                _exit(2);
            int ok = 0;
            for (int i = 0; i < 50000; i++)
                ok += sw_sampler_try(sw_svc_quota(b), N, g_t0 + (i % 2500));
            if (write(pfd[1], &ok, sizeof(ok)) != sizeof(ok))
                _exit(3);
            _exit(0);
        }
    }
    close(pfd[1]);
    int total = 0, ok;
    for (int k = 0; k < KIDS; k++) {
        int st;
        CHECK_EQ(waitpid(kids[k], &st, 0), kids[k]);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    while (read(pfd[0], &ok, sizeof(ok)) == sizeof(ok))
        total += ok;
    close(pfd[0]);
    CHECK_EQ(total, N);
}

/*
 * A process killed while it counts (SIGKILL at a random point of its CAS loop, many times):
 * the quota is never wedged nor over-spent; the next window gives exactly N again.
 */
static void test_quota_killed(void)
{
    struct sw_svc *b = NULL;
    CHECK_EQ(sw_svc_open(g_dir, "svc-kill", "i", true, &b), 0);
    enum { N = 3 };
    for (int round = 0; round < 20; round++) {
        int64_t t = g_t0 + (int64_t)round * 3000;
        fflush(stdout);
        int go[2];
        CHECK_EQ(pipe(go), 0);
        pid_t kid = fork();
        CHECK(kid >= 0);
        if (kid == 0) {
            struct sw_svc *c = NULL;
            if (sw_svc_open(g_dir, "svc-kill", "i", false, &c) != 0)
                _exit(2);
            for (long i = 0;; i++) { /* killed from outside */
                (void)sw_sampler_try(sw_svc_quota(c), N, t);
                if (i == 100 && write(go[1], "g", 1) != 1)
                    _exit(3);
            }
        }
        char g;
        CHECK_EQ(read(go[0], &g, 1), 1); /* it is counting: kill it somewhere in its loop */
        close(go[0]);
        close(go[1]);
        usleep((useconds_t)(round * 137) % 2000);
        kill(kid, SIGKILL);
        int st;
        CHECK_EQ(waitpid(kid, &st, 0), kid);
        CHECK(WIFSIGNALED(st));
        /* The killed child took the window's budget (it tried far more than N times). */
        CHECK_EQ(sw_sampler_count(sw_svc_quota(b), t), N);
        CHECK(!sw_sampler_try(sw_svc_quota(b), N, t));
        /* The next window: exactly N for the survivors. */
        int ok = 0;
        for (int i = 0; i < 100; i++)
            ok += sw_sampler_try(sw_svc_quota(b), N, t + 3000 + i);
        CHECK_EQ(ok, N);
    }
    sw_svc_close(b);
}

/* Two processes whose clocks differ by a few ms at a window boundary share one budget. */
static void test_quota_clock_skew(void)
{
    struct sw_sampler s = SW_SAMPLER_INIT;
    int64_t w1 = g_t0 + 3000;
    CHECK(sw_sampler_try(&s, 2, w1));      /* the clock ahead: the new window */
    CHECK(sw_sampler_try(&s, 2, w1 - 2));  /* 2 ms behind: counted against the new one */
    CHECK(!sw_sampler_try(&s, 2, w1 - 1)); /* ... so the new one's budget is spent */
    CHECK(!sw_sampler_try(&s, 2, w1 + 5));
    CHECK_EQ(sw_sampler_count(&s, w1 - 1), 2);
}

/* ---- the seqlock: one writer, readers never see a mix of two publications ---- */

static struct sw_svc *g_sl;
static _Atomic bool g_sl_stop;

static void dyn_of(struct sw_svc_dyn *d, int v)
{
    memset(d, 0, sizeof(*d));
    d->set = SW_DYN_ALL;
    d->sample_n_per_3_secs = v;
    snprintf(d->uuid, sizeof(d->uuid), "uuid-%d", v);
    d->ignore_suffix.n = 1 + v % SW_CFG_LIST_MAX;
    for (int i = 0; i < d->ignore_suffix.n; i++)
        snprintf(d->ignore_suffix.item[i], SW_CFG_ITEM_MAX, "x%d", v);
    sw_cfg_list_index(&d->ignore_suffix);
}

static void *sl_writer(void *p)
{
    (void)p;
    struct sw_svc_dyn d;
    for (int v = 1; v <= 20000; v++) {
        dyn_of(&d, v);
        sw_svc_publish(g_sl, &d, false);
    }
    atomic_store(&g_sl_stop, true);
    return NULL;
}

static void *sl_reader(void *p)
{
    long *good = p;
    struct sw_svc_dyn d, want;
    uint64_t seq;
    while (!atomic_load(&g_sl_stop)) {
        if (!sw_svc_read(g_sl, &d, &seq))
            continue;
        if (d.set == 0)
            continue; /* before the first publication */
        dyn_of(&want, d.sample_n_per_3_secs);
        CHECK_STR(d.uuid, want.uuid);
        CHECK_EQ(d.ignore_suffix.n, want.ignore_suffix.n);
        for (int i = 0; i < d.ignore_suffix.n; i++)
            CHECK_STR(d.ignore_suffix.item[i], want.ignore_suffix.item[i]);
        ++*good;
    }
    return NULL;
}

static void test_seqlock(void)
{
    CHECK_EQ(sw_svc_open(g_dir, "svc-seq", "i", true, &g_sl), 0);
    pthread_t w, r[3];
    long good[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++)
        CHECK_EQ(pthread_create(&r[i], NULL, sl_reader, &good[i]), 0);
    CHECK_EQ(pthread_create(&w, NULL, sl_writer, NULL), 0);
    pthread_join(w, NULL);
    for (int i = 0; i < 3; i++)
        pthread_join(r[i], NULL);
    printf("seqlock: %ld %ld %ld consistent reads\n", good[0], good[1], good[2]);
    struct sw_svc_dyn d;
    uint64_t seq;
    CHECK(sw_svc_read(g_sl, &d, &seq));
    CHECK_EQ(d.sample_n_per_3_secs, 20000);
    sw_svc_close(g_sl);
}

int main(void)
{
    snprintf(g_dir, sizeof(g_dir), "%s/sw-svc-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    CHECK(mkdtemp(g_dir) != NULL);
    chmod(g_dir, 0700);
    RUN_TEST(test_create_open);
    RUN_TEST(test_bad_files);
    RUN_TEST(test_app_bad_block);
    RUN_TEST(test_app_follows);
    RUN_TEST(test_app_threads);
    RUN_TEST(test_quota_threads);
    RUN_TEST(test_quota_processes);
    RUN_TEST(test_quota_killed);
    RUN_TEST(test_quota_clock_skew);
    RUN_TEST(test_seqlock);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        return 1;
    return 0;
}
