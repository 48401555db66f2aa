/*
 * reporter_spawn.c - sw_spawn_reporter() as the agent calls it from an application process:
 * the reporter starts detached (new session, not our child, no zombie, one SIGCHLD at most),
 * without LD_PRELOAD in its environment, takes its lock, is not started twice, and exits by
 * itself when idle; the application's memory is neither copied nor made copy-on-write.
 *
 *   reporter_spawn REPORTER RUNTIME_DIR
 */
#include "common.h"

#include "check.h"
#include "config.h"
#include "spawn.h"

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t g_sigchld;

static void on_chld(int sig)
{
    (void)sig;
    g_sigchld++;
}

static void nap(void)
{
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* Returns the reporter pid from its status file, or 0. */
static int status_pid(const struct sw_config *c)
{
    char path[PATH_MAX];
    int pid = 0;
    FILE *f;

    CHECK_EQ(
        sw_spawn_reporter_file(path, sizeof(path), c->runtime_dir, c->backend_service, ".status"),
        0);
    f = fopen(path, "r");
    if (!f)
        return 0;
    if (fscanf(f, "pid=%d", &pid) != 1)
        pid = 0;
    fclose(f);
    return pid;
}

static bool is_zombie(int pid)
{
    char path[64], buf[512], *s;
    size_t n;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    f = fopen(path, "r");
    if (!f)
        return true;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    s = strrchr(buf, ')');
    return s && s[1] == ' ' && (s[2] == 'Z' || s[2] == 'X');
}

/* A hexadecimal mask line of /proc/PID/status ("SigBlk:", ...); ~0 when it cannot be read. */
static unsigned long long status_field(int pid, const char *key)
{
    char path[64], line[256];
    unsigned long long v = ~0ull;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    f = fopen(path, "r");
    if (!f)
        return v;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, strlen(key)) == 0) {
            v = strtoull(line + strlen(key), NULL, 16);
            break;
        }
    fclose(f);
    return v;
}

static bool environ_has_preload(int pid)
{
    char path[64], buf[65536];
    size_t n;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/environ", pid);
    f = fopen(path, "r");
    CHECK(f != NULL);
    n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
        if (strncmp(buf + i, "LD_PRELOAD=", 11) == 0)
            return true;
    return false;
}

/* Starts the reporter, sees it running, then waits for its idle exit. */
static void spawn_until_idle(struct sw_config *c)
{
    int i;
    CHECK_EQ(sw_spawn_reporter(c), 0);
    for (i = 0; i < 100 && !sw_spawn_reporter_running(c); i++)
        nap();
    CHECK(sw_spawn_reporter_running(c));
    for (i = 0; i < 150 && sw_spawn_reporter_running(c); i++)
        nap();
    CHECK(!sw_spawn_reporter_running(c));
}

int main(int argc, char **argv)
{
    struct sw_config *c = calloc(1, sizeof(*c));
    struct sigaction sa;
    int pid = 0, i, st;

    CHECK(argc == 3 && c != NULL);
    sw_config_defaults(c);
    snprintf(c->reporter_path, sizeof(c->reporter_path), "%s", argv[1]);
    snprintf(c->runtime_dir, sizeof(c->runtime_dir), "%s", argv[2]);
    /* A collector nobody listens on: the reporter has nothing to send and goes idle. */
    snprintf(c->backend_service, sizeof(c->backend_service), "127.0.0.1:9");
    c->reporter_idle_exit = 2;
    mkdir(c->runtime_dir, 0700);
    setenv("SW_AGENT_CONFIG", "/dev/null", 1);
    /* The application runs under the agent; the reporter must not inherit it. */
    setenv("LD_PRELOAD", "/nonexistent/libswagent-test.so", 1);

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_chld;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);

    CHECK(!sw_spawn_reporter_running(c));
    /* The application's memory is not copied or made copy-on-write by the spawn: 32 MiB written
       before it take no page fault when written again after it (a fork: one per page). */
    size_t heap_bytes = 32u << 20;
    char *heap = mmap(NULL, heap_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(heap != MAP_FAILED);
    memset(heap, 1, heap_bytes);
    /* The application's signal mask is its own again afterwards; the reporter's is empty. */
    sigset_t mask, now;
    sigemptyset(&mask);
    sigaddset(&mask, SIGUSR2);
    CHECK(sigprocmask(SIG_BLOCK, &mask, NULL) == 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_EQ(sw_spawn_reporter(c), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long f0 = check_minor_faults();
    for (size_t off = 0; off < heap_bytes; off += 4096)
        heap[off] = 2;
    long faults = check_minor_faults() - f0;
    printf("ok - the spawn took %ld us; 32 MiB written again after it: %ld page faults\n",
           (long)((t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000), faults);
    CHECK(faults < (long)(heap_bytes / 4096) / 8);
    munmap(heap, heap_bytes);
    CHECK(sigprocmask(SIG_BLOCK, NULL, &now) == 0);
    CHECK(sigismember(&now, SIGUSR2) == 1);
    CHECK(sigismember(&now, SIGUSR1) == 0);
    CHECK(sigprocmask(SIG_UNBLOCK, &mask, NULL) == 0);
    /* The intermediate child was reaped: nothing is left for the application to wait for. */
    CHECK_EQ(waitpid(-1, &st, WNOHANG), -1);
    CHECK_EQ(errno, ECHILD);
    CHECK(g_sigchld <= 1);

    for (i = 0; i < 100 && !(sw_spawn_reporter_running(c) && (pid = status_pid(c)) > 0); i++)
        nap();
    CHECK(pid > 0);
    CHECK(pid != getpid());
    /* Another session (the intermediate child's), and not a session leader itself. */
    CHECK(getsid(pid) != getsid(0));
    CHECK(getsid(pid) != pid);
    CHECK(!environ_has_preload(pid));
    CHECK_EQ(status_field(pid, "SigBlk:"), 0);
    printf("ok - reporter started detached (pid %d), no LD_PRELOAD\n", pid);

    /* A second call while it runs starts nothing. */
    g_sigchld = 0;
    CHECK_EQ(sw_spawn_reporter(c), 0);
    CHECK_EQ(g_sigchld, 0);
    CHECK_EQ(status_pid(c), pid);

    /* No traced process: it exits by itself after reporter_idle_exit seconds. */
    for (i = 0; i < 150 && sw_spawn_reporter_running(c); i++)
        nap();
    CHECK(!sw_spawn_reporter_running(c));
    /* Gone, or a zombie waiting for init (its parent now) to reap it. */
    for (i = 0; i < 50 && kill(pid, 0) == 0 && !is_zombie(pid); i++)
        nap();
    CHECK(kill(pid, 0) != 0 || is_zombie(pid));
    printf("ok - idle reporter exited\n");

    /* A bare reporter_path is looked up in $PATH. */
    {
        char dir[PATH_MAX];
        char *slash;
        snprintf(dir, sizeof(dir), "%s", argv[1]);
        slash = strrchr(dir, '/');
        CHECK(slash != NULL);
        *slash = '\0';
        snprintf(c->reporter_path, sizeof(c->reporter_path), "%s", slash + 1);
        setenv("PATH", dir, 1);
        spawn_until_idle(c);
        snprintf(c->reporter_path, sizeof(c->reporter_path), "no-such-swagent-reporter");
        CHECK_EQ(sw_spawn_reporter(c), -ENOENT);
        printf("ok - reporter found in PATH\n");

        /* Not configured: the one beside the library (self_dir), found at the spawn. */
        c->reporter_path[0] = '\0';
        setenv("PATH", "/nonexistent", 1);
        CHECK(strlen(dir) + 12 < sizeof(c->self_dir));
        memcpy(c->self_dir, dir, strlen(dir));
        memcpy(c->self_dir + strlen(dir), "/no-such-dir", 13);
        CHECK_EQ(sw_spawn_reporter(c), -ENOENT); /* neither ../bin/ nor beside, not in PATH */
        CHECK(!sw_spawn_reporter_running(c));
        snprintf(c->self_dir, sizeof(c->self_dir), "%s", dir);
        spawn_until_idle(c);
        printf("ok - the default reporter found beside the library at the first spawn\n");
    }
    /* Executable but not a program: its execve fails in the grandchild, and that is the
       result (it was 0, as for a reporter started). */
    {
        char bad[sizeof(c->reporter_path)];
        CHECK(strlen(c->runtime_dir) + 16 < sizeof(bad));
        snprintf(bad, sizeof(bad), "%.*s/not-a-reporter", (int)(sizeof(bad) - 16), c->runtime_dir);
        FILE *f = fopen(bad, "w");
        CHECK(f != NULL);
        fputs("not a program\n", f);
        fclose(f);
        CHECK(chmod(bad, 0755) == 0);
        snprintf(c->reporter_path, sizeof(c->reporter_path), "%s", bad);
        g_sigchld = 0;
        CHECK_EQ(sw_spawn_reporter(c), -ENOEXEC);
        CHECK(!sw_spawn_reporter_running(c));
        CHECK_EQ(waitpid(-1, &st, WNOHANG), -1); /* the intermediate child was reaped */
        unlink(bad);
        printf("ok - a reporter_path that is not a program: -ENOEXEC\n");
    }
    /* The reporter's priority is lowered by the spawn as soon as it has exec'd, before its own
       main() could (swagent.reporter_sched_idle, reporter_nice): a program started as the
       reporter that never lowers its own is under SCHED_IDLE at nice >= 10 within a second
       (at once in practice); with both settings off it keeps the application's. */
    {
        char fake[sizeof(c->reporter_path)], pidfile[PATH_MAX];
        CHECK(strlen(c->runtime_dir) + 20 < sizeof(fake));
        snprintf(fake, sizeof(fake), "%.*s/fake-reporter", (int)(sizeof(fake) - 20),
                 c->runtime_dir);
        snprintf(pidfile, sizeof(pidfile), "%s/fake.pid", c->runtime_dir);
        FILE *f = fopen(fake, "w");
        CHECK(f != NULL);
        /* Started as `fake --runtime-dir DIR ...`: leaves its pid, lives two seconds (PATH is
           /nonexistent here: builtins and absolute paths only). */
        fputs("#!/bin/sh\necho $$ > \"$2/fake.pid\"\nexec /bin/sleep 2\n", f);
        fclose(f);
        CHECK(chmod(fake, 0755) == 0);
        snprintf(c->reporter_path, sizeof(c->reporter_path), "%s", fake);
        errno = 0;
        int app_nice = getpriority(PRIO_PROCESS, 0);
        CHECK(errno == 0);
        for (int pass = 0; pass < 2; pass++) {
            bool lower = pass == 0;
            c->reporter_sched_idle = lower;
            c->reporter_nice = lower ? 10 : 0;
            unlink(pidfile);
            CHECK_EQ(sw_spawn_reporter(c), 0);
            int fpid = 0, policy = -1, nice = -100;
            for (i = 0; i < 100 && fpid == 0; i++) {
                FILE *pf = fopen(pidfile, "r");
                if (!pf || fscanf(pf, "%d", &fpid) != 1)
                    fpid = 0;
                if (pf)
                    fclose(pf);
                if (!fpid)
                    nap();
            }
            CHECK(fpid > 0);
            for (i = 0; i < 10; i++) {
                policy = sched_getscheduler(fpid);
                errno = 0;
                nice = getpriority(PRIO_PROCESS, (id_t)fpid);
                CHECK(errno == 0);
                if (!lower || (policy == SCHED_IDLE && nice >= 10))
                    break;
                nap();
            }
            if (lower) {
                CHECK_EQ(policy, SCHED_IDLE);
                CHECK(nice >= 10);
            } else {
                CHECK_EQ(policy, SCHED_OTHER);
                CHECK_EQ(nice, app_nice);
            }
            kill(fpid, SIGTERM);
            printf("ok - reporter_sched_idle=%d reporter_nice=%d: started under policy %d, "
                   "nice %d\n",
                   lower, c->reporter_nice, policy, nice);
        }
        unlink(fake);
        unlink(pidfile);
    }
    free(c);
    return 0;
}
