/*
 * spawn.c - starting swagent-reporter from a traced process (see spawn.h for the contract).
 *
 * Rules: application process, but off the hot path (called when a segment is committed and
 * no reporter was seen, rate-limited by the caller). Raw system calls only (libswagent.so
 * exports open/close/... itself), no allocation, errno preserved, never exits or aborts the
 * host. Everything the children need is prepared before the first clone.
 */
#include "common.h"

#include "spawn.h"

#include "config.h"

#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define SPAWN_ENV_MAX 512 /* environment entries passed on; extra ones are dropped */

extern char **environ;

static int sys_open(const char *path, int flags, int mode)
{
    return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

static void sys_close(int fd)
{
    syscall(SYS_close, fd);
}

static bool running_in(const struct sw_config *c, const char *dir)
{
    char path[PATH_MAX], key[SW_CFG_STR_MAX];
    bool running = false;
    int fd;

    if (sw_config_reporter_key(c, key, sizeof(key)) != 0 ||
        sw_spawn_reporter_file(path, sizeof(path), dir, key, ".lock") != 0)
        return false;
    fd = sys_open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return false;
    if (syscall(SYS_flock, fd, LOCK_EX | LOCK_NB) != 0)
        running = errno == EWOULDBLOCK;
    /* Closing the only fd of this open file description drops a lock we may have taken. */
    sys_close(fd);
    return running;
}

bool sw_spawn_reporter_running(const struct sw_config *c)
{
    return running_in(c, c->runtime_dir);
}

/*
 * Resolves the reporter program: a name with a '/' is used as is, a bare name is looked up in
 * $PATH (execve does no search). Stack buffers only. Returns 0 or a negative errno.
 */
static int resolve(const char *name, char *out, size_t cap)
{
    const char *p = getenv("PATH");
    size_t nlen = strlen(name);

    if (strchr(name, '/')) {
        if (nlen >= cap)
            return -ENAMETOOLONG;
        memcpy(out, name, nlen + 1);
        return syscall(SYS_faccessat, AT_FDCWD, out, X_OK, 0) == 0 ? 0 : -errno;
    }
    if (!p || !*p)
        p = "/usr/local/bin:/usr/bin:/bin";
    while (*p) {
        size_t dlen = strcspn(p, ":");
        if (dlen > 0 && dlen + 1 + nlen < cap) {
            memcpy(out, p, dlen);
            out[dlen] = '/';
            memcpy(out + dlen + 1, name, nlen + 1);
            if (syscall(SYS_faccessat, AT_FDCWD, out, X_OK, 0) == 0)
                return 0;
        }
        p += dlen;
        if (*p == ':')
            p++;
    }
    return -ENOENT;
}

/*
 * The two children run in the application's address space (CLONE_VM: nothing of it is copied,
 * and its pages are not made copy-on-write, which a fork would do to every writable page of a
 * process of any size, each then costing a page fault at its next write). They run on stacks of
 * their own and make only system calls, under the application's thread's TLS (errno: restored
 * by the caller): no sanitizer instrumentation either (it would keep state in that TLS).
 */
#if defined(__has_attribute)
#if __has_attribute(disable_sanitizer_instrumentation)
#define SPAWN_CHILD __attribute__((noinline, disable_sanitizer_instrumentation))
#endif
#endif
#ifndef SPAWN_CHILD
#define SPAWN_CHILD __attribute__((noinline, no_sanitize_address))
#endif

#define SPAWN_STACK (16u * 1024u) /* each child's; they only make system calls */

struct spawn_args {
    const char *path;
    char *const *argv;
    char *const *envp;
    char *stack_top; /* the grandchild's */
    int exec_err;    /* the grandchild's execve error, written before it exits (CLONE_VM) */
    bool sched_idle; /* swagent.reporter_sched_idle */
    int nice;        /* swagent.reporter_nice */
};

/* The kernel's struct sigaction (rt_sigaction with an 8-byte mask). */
struct k_sigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    uint64_t mask;
};

/*
 * The grandchild, which becomes the reporter: its parent (the intermediate child) exits as soon
 * as it has exec'd, so it is re-parented to init (or the nearest subreaper) and is not a session
 * leader. All signals are blocked (the caller blocked them before the clones): the application's
 * handlers, which must never run here, are reset to the default first, then the mask is cleared
 * and the reporter exec'd. fds 0/1/2 on /dev/null, no other fd (this fd table is a copy).
 */
SPAWN_CHILD static int grandchild(void *p)
{
    const struct spawn_args *a = p;
    struct k_sigaction dfl, cur;
    uint64_t none = 0;
    int fd;

    dfl.handler = SIG_DFL;
    dfl.flags = 0;
    dfl.restorer = NULL;
    dfl.mask = 0;
    for (int sig = 1; sig <= 64; sig++)
        if (sig != SIGKILL && sig != SIGSTOP &&
            syscall(SYS_rt_sigaction, sig, NULL, &cur, sizeof(uint64_t)) == 0 &&
            cur.handler != SIG_DFL && cur.handler != SIG_IGN)
            syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(uint64_t));
    fd = (int)syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDWR, 0);
    if (fd >= 0) {
        for (int i = 0; i < 3; i++)
            if (fd != i)
                syscall(SYS_dup3, fd, i, 0);
        if (fd > 2)
            syscall(SYS_close, fd);
    }
    if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0)
        for (int i = 3; i < 4096; i++)
            syscall(SYS_close, i);
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof(none));
    syscall(SYS_execve, a->path, a->argv, a->envp);
    /* Not exec'd: the caller reads why once the intermediate child has been reaped (the
       memory is its; errno is the caller's thread's, which it restores). */
    ((struct spawn_args *)p)->exec_err = errno ? errno : ENOEXEC;
    syscall(SYS_exit_group, 127);
    return 127;
}

/*
 * The intermediate child: a new session, the grandchild, and exit once that has exec'd.
 * Once it has, the reporter's priority is lowered here, as its main() does again
 * (reporter/main.c, lower_priority: SCHED_IDLE, then the nice value, only ever lowered). Else
 * the reporter starts at the application's priority, on the application's core: the dynamic
 * loader maps its ~55 libraries, then main() reads the configuration, 7-8 ms from the exec to
 * lower_priority on the 2-core test VM, during which a waking thread of the application on
 * that core could wait for it (a 1 kHz wake-up probe on the core: up to 3.2 ms).
 * Not before the exec: a SCHED_IDLE grandchild on a busy core would get almost no CPU for
 * its execve, and the application's thread waits for that (CLONE_VFORK).
 */
SPAWN_CHILD static int intermediate(void *p)
{
    const struct spawn_args *a = p;
    long pid;

    syscall(SYS_setsid);
    /* CLONE_VFORK: this returns once the grandchild has exec'd (or exited). */
    pid = clone(grandchild, a->stack_top, CLONE_VM | CLONE_VFORK | SIGCHLD, p);
    if (pid < 0) {
        ((struct spawn_args *)p)->exec_err = errno ? errno : EAGAIN;
    } else if (a->exec_err == 0) {
        if (a->sched_idle) {
            struct sched_param sp = {.sched_priority = 0};
            syscall(SYS_sched_setscheduler, (pid_t)pid, SCHED_IDLE, &sp);
        }
        /* The raw getpriority returns 20 - nice (no negative results to tell from errors). */
        long cur = a->nice > 0 ? syscall(SYS_getpriority, PRIO_PROCESS, (pid_t)pid) : 0;
        if (cur > 0 && 20 - cur < a->nice)
            syscall(SYS_setpriority, PRIO_PROCESS, (pid_t)pid, a->nice);
    }
    syscall(SYS_exit_group, 0);
    return 0;
}

/* The children's stacks; one spawn at a time (g_spawn_busy). Untouched until a spawn. */
static _Alignas(64) char g_spawn_stacks[2][SPAWN_STACK];
static atomic_flag g_spawn_busy = ATOMIC_FLAG_INIT;

int sw_spawn_reporter(const struct sw_config *c)
{
    return sw_spawn_reporter_in(c, NULL);
}

int sw_spawn_reporter_in(const struct sw_config *c, const char *dir)
{
    char *argv[16];
    char *envp[SPAWN_ENV_MAX + 1];
    char path[PATH_MAX], dflt[PATH_MAX];
    char idle[24], sid[12];
    const char *name = c->reporter_path;
    int saved = errno, rc = 0, n = 0, st;
    long pid;

    if (!dir || !dir[0])
        dir = c->runtime_dir;
    if (dir[0] == '\0')
        return -EINVAL;
    if (running_in(c, dir))
        goto out;
    /* Not configured: found now, once it is needed, rather than at every process start. */
    if (name[0] == '\0') {
        rc = sw_config_default_reporter_path(dflt, sizeof(dflt), c->self_dir);
        if (rc != 0)
            goto out;
        name = dflt;
    }
    rc = resolve(name, path, sizeof(path));
    if (rc != 0)
        goto out;

    /* Everything the child needs, built now: argv, then the environment minus LD_PRELOAD. */
    {
        int v = c->reporter_idle_exit, k = 0;
        char tmp[16];
        if (v < 0)
            v = 0;
        do {
            tmp[k++] = (char)('0' + v % 10);
            v /= 10;
        } while (v > 0 && k < (int)sizeof(tmp));
        for (int i = 0; i < k; i++)
            idle[i] = tmp[k - 1 - i];
        idle[k] = '\0';
    }
    /* The settings the reporter must find in the file and environment it is given. */
    sw_config_settings_hex(sw_config_settings_id(c), sid);
    int na = 0;
    argv[na++] = path;
    argv[na++] = (char *)"--runtime-dir";
    argv[na++] = (char *)dir;
    argv[na++] = (char *)"--collector";
    argv[na++] = (char *)c->backend_service;
    argv[na++] = (char *)"--idle-exit";
    argv[na++] = idle;
    /* The file this process read ("" when none): the reporter reads exactly that. */
    argv[na++] = (char *)"--config";
    argv[na++] = (char *)c->config_file;
    if (c->self_dir[0] != '\0') {
        argv[na++] = (char *)"--agent-dir";
        argv[na++] = (char *)c->self_dir;
    }
    argv[na++] = (char *)"--settings-id";
    argv[na++] = sid;
    argv[na] = NULL;
    for (char **e = environ; e && *e && n < SPAWN_ENV_MAX; e++)
        if (strncmp(*e, "LD_PRELOAD=", 11) != 0)
            envp[n++] = *e;
    envp[n] = NULL;

    if (atomic_flag_test_and_set_explicit(&g_spawn_busy, memory_order_acquire))
        goto out; /* another thread of this process is starting one right now */
    {
        struct spawn_args a = {.path = path,
                               .argv = argv,
                               .envp = envp,
                               .stack_top = g_spawn_stacks[1] + SPAWN_STACK,
                               .sched_idle = c->reporter_sched_idle,
                               .nice = c->reporter_nice};
        uint64_t all = ~0ull, old = 0;
        /* No signal handler of the application may run in the children (they share its
           memory): blocked here, inherited by both, cleared in the grandchild before exec. */
        syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, sizeof(all));
        /* CLONE_VFORK: this thread waits until the intermediate child exits, which it does as
           soon as the grandchild has exec'd (~3 ms on the 2-core test VM, where a fork took
           4-5 ms and then a page fault of ~10 us at each page the process wrote). */
        pid = clone(intermediate, g_spawn_stacks[0] + SPAWN_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD,
                    &a);
        if (pid < 0)
            rc = -errno;
        else if (a.exec_err != 0)
            rc = -a.exec_err; /* written before the intermediate child exited (CLONE_VFORK) */
        syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof(old));
    }
    atomic_flag_clear_explicit(&g_spawn_busy, memory_order_release);
    if (pid > 0)
        while (syscall(SYS_wait4, (pid_t)pid, &st, 0, NULL) < 0 && errno == EINTR)
            ;
out:
    errno = saved;
    return rc;
}
