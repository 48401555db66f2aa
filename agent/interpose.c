/*
 * interpose.c - the only file that defines libc names. Every wrapper has the same shape:
 * an fd nobody tracks (or the guard held, or the agent off: then sw_conn_max is 0) goes
 * straight to the real function with one predictable branch; otherwise the real call is
 * made, errno saved, a noinline slow path in conn.c runs, errno is restored. Write-family
 * calls on tracked fds are made by the slow path itself (it may insert sw8 lines), and so are
 * read() and recv(): read(), recv(), write() and writev() on a tracked fd are tail calls to
 * sw_conn_read(), sw_conn_recv(), sw_conn_write() and sw_conn_writev(), which keep errno
 * themselves.
 *
 * Rules: no state here, no allocation, nothing but the shape above. Exports are limited to
 * these names by swagent.map.
 */
#undef _FORTIFY_SOURCE
#include "common.h"

#include "agent.h"
#include "conn.h"
#include "execenv.h"
#include "guard.h"
#include "logcap.h"
#include "profile.h"
#include "real.h"
#include "tls.h"

#include <poll.h>
#include <stdarg.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* Untracked, guarded or agent off: the real function, nothing else. */
#define SW_PASS(fd) (SW_LIKELY(SW_CONN_UNTRACKED(fd)) || SW_GUARD_HELD())

/* tls.c defines the TLS libraries' names (SSL_read, gnutls_record_send, ...; swagent.map):
 * this reference pulls it from the static core into the library, as the constructor does
 * agent.o. */
__attribute__((used)) static void (*const sw_interpose_keep_tls)(struct sw_tls_stats *) =
    sw_tls_get_stats;

/* Lives here so that linking the static core always pulls agent.o into the library. */
__attribute__((constructor)) static void sw_interpose_ctor(void)
{
    sw_agent_init();
}

/* Read family: the slow path sees only the bytes actually returned. */
#define SW_READ_TAIL(fd, base, len, flags)                                                         \
    int e = errno;                                                                                 \
    struct iovec v = {(void *)(base), (len)};                                                      \
    sw_conn_on_read((fd), &v, 1, r, e, (flags));                                                   \
    errno = e;                                                                                     \
    return r

SW_HOT_PATH SW_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
    if (SW_PASS(fd))
        return sw_libc.read(fd, buf, n);
    return sw_conn_read(fd, buf, n); /* makes the real call (a tail call from here) */
}

SW_HOT SW_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t cap)
{
    if (SW_PASS(fd))
        return sw_libc.read_chk(fd, buf, n, cap);
    ssize_t r = sw_libc.read_chk(fd, buf, n, cap);
    SW_READ_TAIL(fd, buf, n, 0);
}

SW_HOT_PATH SW_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
    if (SW_PASS(fd))
        return sw_libc.recv(fd, buf, n, flags);
    return sw_conn_recv(fd, buf, n, flags); /* makes the real call */
}

SW_HOT SW_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t cap, int flags)
{
    if (SW_PASS(fd))
        return sw_libc.recv_chk(fd, buf, n, cap, flags);
    ssize_t r = sw_libc.recv_chk(fd, buf, n, cap, flags);
    SW_READ_TAIL(fd, buf, n, flags);
}

SW_HOT SW_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *a,
                                  socklen_t *l)
{
    if (SW_PASS(fd))
        return sw_libc.recvfrom(fd, buf, n, flags, a, l);
    ssize_t r = sw_libc.recvfrom(fd, buf, n, flags, a, l);
    SW_READ_TAIL(fd, buf, n, flags);
}

SW_HOT SW_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t cap, int flags,
                                        struct sockaddr *a, socklen_t *l)
{
    if (SW_PASS(fd))
        return sw_libc.recvfrom_chk(fd, buf, n, cap, flags, a, l);
    ssize_t r = sw_libc.recvfrom_chk(fd, buf, n, cap, flags, a, l);
    SW_READ_TAIL(fd, buf, n, flags);
}

SW_HOT SW_EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
    if (SW_PASS(fd))
        return sw_libc.readv(fd, iov, cnt);
    ssize_t r = sw_libc.readv(fd, iov, cnt);
    int e = errno;
    sw_conn_on_read(fd, iov, cnt, r, e, 0);
    errno = e;
    return r;
}

SW_HOT SW_EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
    if (SW_PASS(fd))
        return sw_libc.recvmsg(fd, m, flags);
    ssize_t r = sw_libc.recvmsg(fd, m, flags);
    int e = errno;
    sw_conn_on_read(fd, m->msg_iov, (int)m->msg_iovlen, r, e, flags);
    errno = e;
    return r;
}

/* Write family: the slow path makes the real call(s), so it can insert the sw8 lines. */
/* An untracked fd 1 or 2 with swagent.log_capture on: the real call, then a copy of what it
 * wrote (logcap.h). A tracked one (a socket as stdout: inetd) is a connection like any other. */
SW_HOT_PATH SW_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
    if (SW_PASS(fd)) {
        if (SW_LOGCAP_FD(fd))
            return sw_logcap_write(fd, buf, n);
        return sw_libc.write(fd, buf, n);
    }
    return sw_conn_write(fd, buf, n);
}

SW_HOT_PATH SW_EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    if (SW_PASS(fd)) {
        if (SW_LOGCAP_FD(fd))
            return sw_logcap_writev(fd, iov, cnt);
        return sw_libc.writev(fd, iov, cnt);
    }
    return sw_conn_writev(fd, iov, cnt);
}

SW_HOT SW_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
    if (SW_PASS(fd))
        return sw_libc.send(fd, buf, n, flags);
    struct iovec v = {(void *)buf, n};
    struct sw_send_op op = {.kind = SW_SEND_SEND, .flags = flags, .iov = &v, .iovcnt = 1};
    return sw_conn_send(fd, &op);
}

SW_HOT SW_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags,
                                const struct sockaddr *a, socklen_t l)
{
    if (SW_PASS(fd))
        return sw_libc.sendto(fd, buf, n, flags, a, l);
    struct iovec v = {(void *)buf, n};
    struct sw_send_op op = {.kind = SW_SEND_SENDTO, .flags = flags, .iov = &v, .iovcnt = 1};
    op.to = a;
    op.tolen = l;
    return sw_conn_send(fd, &op);
}

SW_HOT SW_EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
    if (SW_PASS(fd) || SW_UNLIKELY(m == NULL || m->msg_iovlen > INT32_MAX))
        return sw_libc.sendmsg(fd, m, flags);
    struct sw_send_op op = {.kind = SW_SEND_SENDMSG, .flags = flags, .msg = m};
    op.iov = m->msg_iov;
    op.iovcnt = (int)m->msg_iovlen;
    return sw_conn_send(fd, &op);
}

SW_HOT_PATH SW_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t n)
{
    if (SW_PASS(out))
        return sw_libc.sendfile(out, in, off, n);
    return sw_conn_sendfile(out, in, (off64_t *)off, n, false);
}

SW_HOT_PATH SW_EXPORT ssize_t sendfile64(int out, int in, off64_t *off, size_t n)
{
    if (SW_PASS(out))
        return sw_libc.sendfile64(out, in, off, n);
    return sw_conn_sendfile(out, in, off, n, true);
}

/* Socket lifecycle. The agent activates with the process's first stream socket (internet or
 * Unix-domain) or accept: a process that never opens one pays only the load (agent.c). */
SW_EXPORT int socket(int domain, int type, int proto)
{
    int s = sw_libc.socket(domain, type, proto);
    if (SW_UNLIKELY(!SW_CONN_ON()) && s >= 0 &&
        (domain == AF_INET || domain == AF_INET6 || domain == AF_UNIX) &&
        (type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) == SOCK_STREAM && sw_agent_armed())
        sw_agent_activate();
    if (SW_LIKELY(s < 0 || !SW_CONN_ON()) || SW_GUARD_HELD())
        return s;
    sw_conn_on_socket(s, domain, type);
    return s;
}

SW_EXPORT int connect(int fd, const struct sockaddr *a, socklen_t l)
{
    if (SW_PASS(fd))
        return sw_libc.connect(fd, a, l);
    return sw_conn_connect(fd, a, l);
}

SW_EXPORT int accept(int fd, struct sockaddr *a, socklen_t *l)
{
    if (SW_UNLIKELY(!SW_CONN_ON()) && sw_agent_armed())
        sw_agent_activate();
    if (SW_LIKELY(!SW_CONN_ON()) || SW_GUARD_HELD())
        return sw_libc.accept(fd, a, l);
    return sw_conn_accept(fd, a, l, 0, false);
}

SW_EXPORT int accept4(int fd, struct sockaddr *a, socklen_t *l, int flags)
{
    if (SW_UNLIKELY(!SW_CONN_ON()) && sw_agent_armed())
        sw_agent_activate();
    if (SW_LIKELY(!SW_CONN_ON()) || SW_GUARD_HELD())
        return sw_libc.accept4(fd, a, l, flags);
    return sw_conn_accept(fd, a, l, flags, true);
}

SW_HOT_PATH SW_EXPORT int close(int fd)
{
    if (SW_PASS(fd))
        return sw_libc.close(fd);
    sw_conn_on_close(fd); /* untrack first: the number may be reused as soon as it is closed */
    return sw_libc.close(fd);
}

/* shutdown(SHUT_WR / SHUT_RDWR) ends our side of a CGI response (conn.h). */
SW_EXPORT int shutdown(int fd, int how)
{
    if (SW_PASS(fd))
        return sw_libc.shutdown(fd, how);
    sw_conn_on_shutdown(fd, how);
    return sw_libc.shutdown(fd, how);
}

SW_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
    if (SW_CONN_ON() && !SW_GUARD_HELD() && !(flags & CLOSE_RANGE_CLOEXEC))
        sw_conn_close_range(first, last);
    return sw_libc.close_range(first, last, flags);
}

/* dup family: the new fd shares the connection object (dup2/dup3 end newfd's old one). */
#define SW_DUP_TAIL(oldfd, r)                                                                      \
    if ((r) >= 0 && SW_CONN_ON() && !SW_GUARD_HELD() &&                                            \
        (!SW_CONN_UNTRACKED(oldfd) || !SW_CONN_UNTRACKED(r)))                                      \
        sw_conn_on_dup((oldfd), (r));                                                              \
    return (r)

SW_EXPORT int dup(int fd)
{
    int r = sw_libc.dup(fd);
    SW_DUP_TAIL(fd, r);
}

SW_EXPORT int dup2(int fd, int fd2)
{
    int r = sw_libc.dup2(fd, fd2);
    SW_DUP_TAIL(fd, r);
}

SW_EXPORT int dup3(int fd, int fd2, int flags)
{
    int r = sw_libc.dup3(fd, fd2, flags);
    SW_DUP_TAIL(fd, r);
}

/*
 * exec family: the program is exec'ed with the application's environment plus, while a
 * request is being served, SW_AGENT_PARENT_CTX (execenv.h), so a CGI-style child joins the
 * trace. LD_PRELOAD is whatever the application passes (kept unless it scrubs it). glibc's
 * execv/execvp/execl* call its internal __execve, so each name is wrapped here. Not seen:
 * system() and popen() (glibc spawns through internal calls), vfork()+execve made by raw
 * syscalls.
 */
#define SW_EXEC_OFF() (SW_LIKELY(!SW_CONN_ON()) || SW_GUARD_HELD())

extern char **environ;

static int exec_env(const char *path, char *const argv[], char *const envp[], bool search)
{
    sw_profile_before_exec();
    if (SW_EXEC_OFF())
        return search ? sw_libc.execvpe(path, argv, envp) : sw_libc.execve(path, argv, envp);
    struct sw_exec_env b;
    char *const *e = sw_exec_env(envp, path, &b);
    return search ? sw_libc.execvpe(path, argv, e) : sw_libc.execve(path, argv, e);
}

SW_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    return exec_env(path, argv, envp, false);
}

SW_EXPORT int execv(const char *path, char *const argv[])
{
    return exec_env(path, argv, environ, false);
}

SW_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    return exec_env(file, argv, envp, true);
}

SW_EXPORT int execvp(const char *file, char *const argv[])
{
    return exec_env(file, argv, environ, true);
}

SW_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    sw_profile_before_exec();
    if (SW_EXEC_OFF())
        return sw_libc.fexecve(fd, argv, envp);
    struct sw_exec_env b;
    return sw_libc.fexecve(fd, argv, sw_exec_env(envp, NULL, &b));
}

/*
 * posix_spawn: the file-actions and attribute objects are passed through as pointers (the
 * agent's own spawn.h shadows <spawn.h>, and they are never looked at).
 */

/* execl family: the argument list becomes an array on the stack, as glibc itself does. */
#define SW_EXECL_ARGV(arg, argv, extra)                                                            \
    va_list ap;                                                                                    \
    size_t argc = 1;                                                                               \
    va_start(ap, arg);                                                                             \
    while (va_arg(ap, char *))                                                                     \
        argc++;                                                                                    \
    va_end(ap);                                                                                    \
    char *argv[argc + 1];                                                                          \
    argv[0] = (char *)(arg);                                                                       \
    va_start(ap, arg);                                                                             \
    for (size_t i = 1; i <= argc; i++)                                                             \
        argv[i] = va_arg(ap, char *);                                                              \
    extra;                                                                                         \
    va_end(ap)

SW_EXPORT int execl(const char *path, const char *arg, ...)
{
    SW_EXECL_ARGV(arg, argv, (void)0);
    return exec_env(path, argv, environ, false);
}

SW_EXPORT int execlp(const char *file, const char *arg, ...)
{
    SW_EXECL_ARGV(arg, argv, (void)0);
    return exec_env(file, argv, environ, true);
}

SW_EXPORT int execle(const char *path, const char *arg, ...)
{
    char *const *envp;
    SW_EXECL_ARGV(arg, argv, envp = va_arg(ap, char *const *));
    return exec_env(path, argv, envp, false);
}

SW_EXPORT int posix_spawn(pid_t *pid, const char *path, const void *fa, const void *attr,
                          char *const argv[], char *const envp[])
{
    if (SW_EXEC_OFF())
        return sw_libc.posix_spawn(pid, path, fa, attr, argv, envp);
    struct sw_exec_env b;
    return sw_libc.posix_spawn(pid, path, fa, attr, argv, sw_exec_env(envp, path, &b));
}

SW_EXPORT int posix_spawnp(pid_t *pid, const char *file, const void *fa, const void *attr,
                           char *const argv[], char *const envp[])
{
    if (SW_EXEC_OFF())
        return sw_libc.posix_spawnp(pid, file, fa, attr, argv, envp);
    struct sw_exec_env b;
    return sw_libc.posix_spawnp(pid, file, fa, attr, argv, sw_exec_env(envp, file, &b));
}

/*
 * Waits (trace profiling, profile.h): a thread with an armed sampling timer holds the profiling
 * signal across the wait, so the wait is never cut short by it (epoll_wait, poll, select,
 * nanosleep, ... return EINTR whatever SA_RESTART says); the held expiry is delivered, and the
 * sample taken, as the wait returns. A wait that installs its own mask gets the signal added
 * to it. Any other thread: the real function, after one thread-local load.
 * Each wrapper makes exactly the one wait the application asked for (sleep and usleep
 * included: glibc's sleep/usleep call its clock_nanosleep internally, past our nanosleep
 * wrappers, so they need their own): the agent adds no wait, allocation or lock of its own.
 */
#define SW_WAIT(type, call)                                                                        \
    if (SW_LIKELY(!SW_PROF_WAITING()))                                                             \
        return call;                                                                               \
    sigset_t held_;                                                                                \
    sw_prof_wait_begin(&held_);                                                                    \
    type r_ = call;                                                                                \
    sw_prof_wait_end(&held_);                                                                      \
    return r_

SW_EXPORT int epoll_wait(int fd, struct epoll_event *ev, int n, int ms)
{
    SW_WAIT(int, sw_libc.epoll_wait(fd, ev, n, ms));
}

SW_EXPORT int epoll_pwait(int fd, struct epoll_event *ev, int n, int ms, const sigset_t *m)
{
    sigset_t tmp;
    SW_WAIT(int, sw_libc.epoll_pwait(fd, ev, n, ms, sw_prof_wait_mask(m, &tmp)));
}

SW_EXPORT int poll(struct pollfd *f, nfds_t n, int ms)
{
    SW_WAIT(int, sw_libc.poll(f, n, ms));
}

SW_EXPORT int ppoll(struct pollfd *f, nfds_t n, const struct timespec *t, const sigset_t *m)
{
    sigset_t tmp;
    SW_WAIT(int, sw_libc.ppoll(f, n, t, sw_prof_wait_mask(m, &tmp)));
}

SW_EXPORT int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
    SW_WAIT(int, sw_libc.select(n, r, w, e, tv));
}

SW_EXPORT int pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t,
                      const sigset_t *m)
{
    sigset_t tmp;
    SW_WAIT(int, sw_libc.pselect(n, r, w, e, t, sw_prof_wait_mask(m, &tmp)));
}

SW_EXPORT int nanosleep(const struct timespec *t, struct timespec *rem)
{
    SW_WAIT(int, sw_libc.nanosleep(t, rem));
}

SW_EXPORT int clock_nanosleep(clockid_t c, int f, const struct timespec *t, struct timespec *rem)
{
    SW_WAIT(int, sw_libc.clock_nanosleep(c, f, t, rem));
}

SW_EXPORT unsigned int sleep(unsigned int s)
{
    SW_WAIT(unsigned int, sw_libc.sleep(s));
}

SW_EXPORT int usleep(useconds_t us)
{
    SW_WAIT(int, sw_libc.usleep(us));
}

SW_EXPORT int pause(void)
{
    SW_WAIT(int, sw_libc.pause());
}

SW_EXPORT int sigsuspend(const sigset_t *m)
{
    sigset_t tmp;
    SW_WAIT(int, sw_libc.sigsuspend(sw_prof_wait_mask(m, &tmp)));
}

SW_EXPORT int sigtimedwait(const sigset_t *m, siginfo_t *si, const struct timespec *t)
{
    SW_WAIT(int, sw_libc.sigtimedwait(m, si, t));
}

SW_EXPORT int sigwaitinfo(const sigset_t *m, siginfo_t *si)
{
    SW_WAIT(int, sw_libc.sigwaitinfo(m, si));
}
