/*
 * real.h - the table of the real libc functions behind the interposed names.
 *
 * Rules: the table is filled once by sw_real_resolve() (constructor, or the first hook that
 * needs it); the hot path only loads a pointer from it, never calls dlsym. Before it is
 * filled every pointer already points at a small fallback in real.c that makes the raw
 * syscall, so a hook called from another library's constructor (before ours) still works.
 * Unit tests point entries at fakes.
 */
#ifndef SW_REAL_H
#define SW_REAL_H

#include "common.h"

#include <signal.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

typedef ssize_t (*sw_read_fn)(int, void *, size_t);
typedef ssize_t (*sw_readv_fn)(int, const struct iovec *, int);
typedef ssize_t (*sw_recv_fn)(int, void *, size_t, int);
typedef ssize_t (*sw_recvfrom_fn)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
typedef ssize_t (*sw_recvmsg_fn)(int, struct msghdr *, int);
typedef ssize_t (*sw_write_fn)(int, const void *, size_t);
typedef ssize_t (*sw_writev_fn)(int, const struct iovec *, int);
typedef ssize_t (*sw_send_fn)(int, const void *, size_t, int);
typedef ssize_t (*sw_sendto_fn)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
typedef ssize_t (*sw_sendmsg_fn)(int, const struct msghdr *, int);
typedef ssize_t (*sw_sendfile_fn)(int, int, off_t *, size_t);
typedef ssize_t (*sw_sendfile64_fn)(int, int, off64_t *, size_t);
typedef int (*sw_socket_fn)(int, int, int);
typedef int (*sw_accept_fn)(int, struct sockaddr *, socklen_t *);
typedef int (*sw_accept4_fn)(int, struct sockaddr *, socklen_t *, int);
typedef int (*sw_connect_fn)(int, const struct sockaddr *, socklen_t);
typedef int (*sw_close_fn)(int);
typedef int (*sw_shutdown_fn)(int, int);
typedef int (*sw_dup_fn)(int);
typedef int (*sw_dup2_fn)(int, int);
typedef int (*sw_dup3_fn)(int, int, int);
typedef pid_t (*sw_fork_fn)(void);
typedef ssize_t (*sw_read_chk_fn)(int, void *, size_t, size_t);
typedef ssize_t (*sw_recv_chk_fn)(int, void *, size_t, size_t, int);
typedef ssize_t (*sw_recvfrom_chk_fn)(int, void *, size_t, size_t, int, struct sockaddr *,
                                      socklen_t *);
typedef int (*sw_close_range_fn)(unsigned int, unsigned int, int);
typedef int (*sw_getpeername_fn)(int, struct sockaddr *, socklen_t *);
typedef int (*sw_execve_fn)(const char *, char *const[], char *const[]);
typedef int (*sw_fexecve_fn)(int, char *const[], char *const[]);
typedef int (*sw_posix_spawn_fn)(pid_t *, const char *, const void *, const void *, char *const[],
                                 char *const[]);

/* Waits the application may be blocked in: wrapped for trace profiling (profile.h). */
struct epoll_event;
struct pollfd;
struct timespec;
struct timeval;
typedef int (*sw_epoll_wait_fn)(int, struct epoll_event *, int, int);
typedef int (*sw_epoll_pwait_fn)(int, struct epoll_event *, int, int, const sigset_t *);
typedef int (*sw_poll_fn)(struct pollfd *, unsigned long, int);
typedef int (*sw_ppoll_fn)(struct pollfd *, unsigned long, const struct timespec *,
                           const sigset_t *);
typedef int (*sw_select_fn)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
typedef int (*sw_pselect_fn)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
                             const sigset_t *);
typedef int (*sw_nanosleep_fn)(const struct timespec *, struct timespec *);
typedef int (*sw_clock_nanosleep_fn)(clockid_t, int, const struct timespec *, struct timespec *);
typedef unsigned int (*sw_sleep_fn)(unsigned int);
typedef int (*sw_usleep_fn)(useconds_t);
typedef int (*sw_pause_fn)(void);
typedef int (*sw_sigsuspend_fn)(const sigset_t *);
typedef int (*sw_sigtimedwait_fn)(const sigset_t *, siginfo_t *, const struct timespec *);
typedef int (*sw_sigwaitinfo_fn)(const sigset_t *, siginfo_t *);

/* The real functions. Never NULL: a syscall fallback until resolved. */
struct sw_libc {
    sw_read_fn read;
    sw_readv_fn readv;
    sw_recv_fn recv;
    sw_recvfrom_fn recvfrom;
    sw_recvmsg_fn recvmsg;
    sw_write_fn write;
    sw_writev_fn writev;
    sw_send_fn send;
    sw_sendto_fn sendto;
    sw_sendmsg_fn sendmsg;
    sw_sendfile_fn sendfile;
    sw_sendfile64_fn sendfile64;
    sw_socket_fn socket;
    sw_accept_fn accept;
    sw_accept4_fn accept4;
    sw_connect_fn connect;
    sw_close_fn close;
    sw_shutdown_fn shutdown;
    sw_dup_fn dup;
    sw_dup2_fn dup2;
    sw_dup3_fn dup3;
    sw_fork_fn fork;
    sw_read_chk_fn read_chk;
    sw_recv_chk_fn recv_chk;
    sw_recvfrom_chk_fn recvfrom_chk;
    sw_close_range_fn close_range;
    sw_getpeername_fn getpeername; /* not interposed; used by the connection layer */
    sw_execve_fn execve;
    sw_execve_fn execvpe; /* (file, argv, envp): execvp and execlp go through it */
    sw_fexecve_fn fexecve;
    sw_posix_spawn_fn posix_spawn; /* file_actions and attr passed through as pointers */
    sw_posix_spawn_fn posix_spawnp;
    sw_epoll_wait_fn epoll_wait; /* the waits (profile.h) */
    sw_epoll_pwait_fn epoll_pwait;
    sw_poll_fn poll;
    sw_ppoll_fn ppoll;
    sw_select_fn select;
    sw_pselect_fn pselect;
    sw_nanosleep_fn nanosleep;
    sw_clock_nanosleep_fn clock_nanosleep;
    sw_sleep_fn sleep;
    sw_usleep_fn usleep;
    sw_pause_fn pause;
    sw_sigsuspend_fn sigsuspend;
    sw_sigtimedwait_fn sigtimedwait;
    sw_sigwaitinfo_fn sigwaitinfo;
};

extern struct sw_libc sw_libc SW_HIDDEN;

/*
 * Resolves every entry with dlsym(RTLD_NEXT), once (later calls return the first result).
 * Returns 0, or -ELOOP when dlsym handed back one of our own wrappers (the agent must then
 * stay off; the table keeps the syscall fallbacks for that entry), or -ENOENT when a
 * required symbol is missing. Optional ones (close_range, __*_chk) keep their fallbacks.
 */
int sw_real_resolve(void);

/* True once sw_real_resolve() has run. */
bool sw_real_resolved(void);

#endif /* SW_REAL_H */
