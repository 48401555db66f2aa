/*
 * spawn.c - starting swagent-reporter from a traced process (see spawn.h for the contract).
 *
 * Rules: application process, but off the hot path (called when a segment is committed and
 * no reporter was seen, rate-limited by the caller). Raw system calls only (libswagent.so
 * exports open/close/... itself), no allocation, errno preserved, never exits or aborts the
 * host. Everything the child needs is prepared before the fork.
 */
#include "common.h"

#include "spawn.h"

#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
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
    char path[PATH_MAX];
    bool running = false;
    int fd;

    if (sw_spawn_reporter_file(path, sizeof(path), dir, c->backend_service, ".lock") != 0)
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

/* fork() without the libc wrapper: no atfork handlers run, in the parent or the child. */
static long raw_fork(void)
{
    return syscall(SYS_clone, (unsigned long)SIGCHLD, 0UL, 0UL, 0UL, 0UL);
}

/* The detached child: new session, fds 0/1/2 on /dev/null, no other fd, then exec. */
static void child_exec(const char *path, char *const argv[], char *const envp[])
{
    sigset_t none;
    int fd;

    syscall(SYS_setsid);
    if (raw_fork() != 0)
        syscall(SYS_exit_group, 0); /* the intermediate child (or a failed fork) leaves now */
    fd = sys_open("/dev/null", O_RDWR, 0);
    if (fd >= 0) {
        for (int i = 0; i < 3; i++)
            if (fd != i)
                syscall(SYS_dup3, fd, i, 0);
        if (fd > 2)
            sys_close(fd);
    }
    if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0)
        for (int i = 3; i < 4096; i++)
            sys_close(i);
    sigemptyset(&none);
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof(unsigned long));
    syscall(SYS_execve, path, argv, envp);
    syscall(SYS_exit_group, 127);
}

int sw_spawn_reporter(const struct sw_config *c)
{
    return sw_spawn_reporter_in(c, NULL);
}

int sw_spawn_reporter_in(const struct sw_config *c, const char *dir)
{
    char *argv[8];
    char *envp[SPAWN_ENV_MAX + 1];
    char path[PATH_MAX], dflt[PATH_MAX];
    char idle[24];
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
    argv[0] = path;
    argv[1] = (char *)"--runtime-dir";
    argv[2] = (char *)dir;
    argv[3] = (char *)"--collector";
    argv[4] = (char *)c->backend_service;
    argv[5] = (char *)"--idle-exit";
    argv[6] = idle;
    argv[7] = NULL;
    for (char **e = environ; e && *e && n < SPAWN_ENV_MAX; e++)
        if (strncmp(*e, "LD_PRELOAD=", 11) != 0)
            envp[n++] = *e;
    envp[n] = NULL;

    pid = raw_fork();
    if (pid < 0) {
        rc = -errno;
        goto out;
    }
    if (pid == 0)
        child_exec(path, argv, envp); /* never returns */
    while (syscall(SYS_wait4, (pid_t)pid, &st, 0, NULL) < 0 && errno == EINTR)
        ;
out:
    errno = saved;
    return rc;
}
