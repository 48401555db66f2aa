/*
 * real.c - resolves the real libc functions behind the interposed names (see real.h).
 *
 * Rules: dlsym is called only here, once, for symbols that exist in glibc (a missing symbol
 * makes dlsym allocate through dlerror, libfaketime #130). The init flag is set before the
 * lookups, so a hook reached while resolving uses the syscall fallbacks instead of
 * recursing. No stdio, no malloc of our own.
 */
#include "common.h"

#include "guard.h"
#include "real.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The re-entrancy guard (guard.h) lives here so every module of the agent shares it. */
__thread int sw_guard_depth __attribute__((tls_model("initial-exec")));

/* Syscall fallbacks, used until sw_real_resolve() has filled the table. */
static ssize_t fb_read(int fd, void *b, size_t n)
{
    return syscall(SYS_read, fd, b, n);
}
static ssize_t fb_readv(int fd, const struct iovec *v, int c)
{
    return syscall(SYS_readv, fd, v, c);
}
static ssize_t fb_recv(int fd, void *b, size_t n, int f)
{
    return syscall(SYS_recvfrom, fd, b, n, f, NULL, NULL);
}
static ssize_t fb_recvfrom(int fd, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l)
{
    return syscall(SYS_recvfrom, fd, b, n, f, a, l);
}
static ssize_t fb_recvmsg(int fd, struct msghdr *m, int f)
{
    return syscall(SYS_recvmsg, fd, m, f);
}
static ssize_t fb_write(int fd, const void *b, size_t n)
{
    return syscall(SYS_write, fd, b, n);
}
static ssize_t fb_writev(int fd, const struct iovec *v, int c)
{
    return syscall(SYS_writev, fd, v, c);
}
static ssize_t fb_send(int fd, const void *b, size_t n, int f)
{
    return syscall(SYS_sendto, fd, b, n, f, NULL, 0);
}
static ssize_t fb_sendto(int fd, const void *b, size_t n, int f, const struct sockaddr *a,
                         socklen_t l)
{
    return syscall(SYS_sendto, fd, b, n, f, a, l);
}
static ssize_t fb_sendmsg(int fd, const struct msghdr *m, int f)
{
    return syscall(SYS_sendmsg, fd, m, f);
}
static ssize_t fb_sendfile(int o, int i, off_t *off, size_t n)
{
    return syscall(SYS_sendfile, o, i, off, n);
}
static ssize_t fb_sendfile64(int o, int i, off64_t *off, size_t n)
{
    return syscall(SYS_sendfile, o, i, off, n);
}
static int fb_socket(int d, int t, int p)
{
    return (int)syscall(SYS_socket, d, t, p);
}
static int fb_accept(int fd, struct sockaddr *a, socklen_t *l)
{
    return (int)syscall(SYS_accept4, fd, a, l, 0);
}
static int fb_accept4(int fd, struct sockaddr *a, socklen_t *l, int f)
{
    return (int)syscall(SYS_accept4, fd, a, l, f);
}
static int fb_connect(int fd, const struct sockaddr *a, socklen_t l)
{
    return (int)syscall(SYS_connect, fd, a, l);
}
static int fb_close(int fd)
{
    return (int)syscall(SYS_close, fd);
}
static int fb_shutdown(int fd, int how)
{
    return (int)syscall(SYS_shutdown, fd, how);
}
static int fb_dup(int fd)
{
    return (int)syscall(SYS_dup, fd);
}
static int fb_dup2(int o, int n)
{
#ifdef SYS_dup2
    return (int)syscall(SYS_dup2, o, n);
#else
    if (o == n)
        return (int)syscall(SYS_fcntl, o, F_GETFD) < 0 ? -1 : n;
    return (int)syscall(SYS_dup3, o, n, 0);
#endif
}
static int fb_dup3(int o, int n, int f)
{
    return (int)syscall(SYS_dup3, o, n, f);
}
static ssize_t fb_read_chk(int fd, void *b, size_t n, size_t cap)
{
    (void)cap;
    return syscall(SYS_read, fd, b, n);
}
static ssize_t fb_recv_chk(int fd, void *b, size_t n, size_t cap, int f)
{
    (void)cap;
    return syscall(SYS_recvfrom, fd, b, n, f, NULL, NULL);
}
static ssize_t fb_recvfrom_chk(int fd, void *b, size_t n, size_t cap, int f, struct sockaddr *a,
                               socklen_t *l)
{
    (void)cap;
    return syscall(SYS_recvfrom, fd, b, n, f, a, l);
}
static int fb_epoll_wait(int fd, struct epoll_event *ev, int n, int ms)
{
    return (int)syscall(SYS_epoll_pwait, fd, ev, n, ms, NULL, _NSIG / 8);
}
static int fb_epoll_pwait(int fd, struct epoll_event *ev, int n, int ms, const sigset_t *m)
{
    return (int)syscall(SYS_epoll_pwait, fd, ev, n, ms, m, _NSIG / 8);
}
static int fb_ppoll(struct pollfd *f, unsigned long n, const struct timespec *t, const sigset_t *m)
{
    return (int)syscall(SYS_ppoll, f, n, t, m, _NSIG / 8);
}
static int fb_poll(struct pollfd *f, unsigned long n, int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    return fb_ppoll(f, n, ms < 0 ? NULL : &t, NULL);
}
static int fb_pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t,
                      const sigset_t *m)
{
    struct {
        const sigset_t *m;
        size_t len;
    } sm = {m, _NSIG / 8};
    struct timespec tc, *tp = NULL;
    if (t) {
        tc = *t;
        tp = &tc;
    }
    return (int)syscall(SYS_pselect6, n, r, w, e, tp, m ? &sm : NULL);
}
static int fb_select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
    return (int)syscall(SYS_select, n, r, w, e, tv);
}
static int fb_nanosleep(const struct timespec *t, struct timespec *rem)
{
    return (int)syscall(SYS_nanosleep, t, rem);
}
static int fb_clock_nanosleep(clockid_t c, int f, const struct timespec *t, struct timespec *rem)
{
    long r = syscall(SYS_clock_nanosleep, c, f, t, rem);
    if (r < 0)
        return errno; /* clock_nanosleep returns the error */
    return 0;
}
static unsigned int fb_sleep(unsigned int s)
{
    struct timespec t = {(time_t)s, 0}, rem = {0, 0};
    if (syscall(SYS_nanosleep, &t, &rem) < 0)
        return (unsigned int)rem.tv_sec + (rem.tv_nsec > 0);
    return 0;
}
static int fb_usleep(useconds_t us)
{
    struct timespec t = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000L};
    return (int)syscall(SYS_nanosleep, &t, NULL);
}
static int fb_pause(void)
{
    return (int)syscall(SYS_pause);
}
static int fb_sigsuspend(const sigset_t *m)
{
    return (int)syscall(SYS_rt_sigsuspend, m, _NSIG / 8);
}
static int fb_sigtimedwait(const sigset_t *m, siginfo_t *si, const struct timespec *t)
{
    return (int)syscall(SYS_rt_sigtimedwait, m, si, t, _NSIG / 8);
}
static int fb_sigwaitinfo(const sigset_t *m, siginfo_t *si)
{
    return fb_sigtimedwait(m, si, NULL);
}
static int fb_close_range(unsigned int a, unsigned int b, int f)
{
#ifdef SYS_close_range
    return (int)syscall(SYS_close_range, a, b, f);
#else
    errno = ENOSYS;
    return -1;
#endif
}
static int fb_getpeername(int fd, struct sockaddr *a, socklen_t *l)
{
    return (int)syscall(SYS_getpeername, fd, a, l);
}

static int fb_execve(const char *p, char *const a[], char *const e[])
{
    return (int)syscall(SYS_execve, p, a, e);
}
static int fb_fexecve(int fd, char *const a[], char *const e[])
{
    return (int)syscall(SYS_execveat, fd, "", a, e, 0x1000 /* AT_EMPTY_PATH */);
}
/* execvpe and posix_spawn* search PATH or spawn through libc: resolve first. */
static int fb_execvpe(const char *p, char *const a[], char *const e[]);
static int fb_posix_spawn(pid_t *pid, const char *p, const void *fa, const void *at,
                          char *const a[], char *const e[]);
static int fb_posix_spawnp(pid_t *pid, const char *p, const void *fa, const void *at,
                           char *const a[], char *const e[]);

/* fork is not a plain syscall for glibc (atfork handlers, its own locks): resolve first. */
static pid_t fb_fork(void)
{
    if (sw_real_resolve() == 0 && sw_libc.fork != fb_fork)
        return sw_libc.fork();
    return (pid_t)syscall(SYS_fork);
}

struct sw_libc sw_libc = {
    .read = fb_read,
    .readv = fb_readv,
    .recv = fb_recv,
    .recvfrom = fb_recvfrom,
    .recvmsg = fb_recvmsg,
    .write = fb_write,
    .writev = fb_writev,
    .send = fb_send,
    .sendto = fb_sendto,
    .sendmsg = fb_sendmsg,
    .sendfile = fb_sendfile,
    .sendfile64 = fb_sendfile64,
    .socket = fb_socket,
    .accept = fb_accept,
    .accept4 = fb_accept4,
    .connect = fb_connect,
    .close = fb_close,
    .shutdown = fb_shutdown,
    .dup = fb_dup,
    .dup2 = fb_dup2,
    .dup3 = fb_dup3,
    .fork = fb_fork,
    .read_chk = fb_read_chk,
    .recv_chk = fb_recv_chk,
    .recvfrom_chk = fb_recvfrom_chk,
    .close_range = fb_close_range,
    .getpeername = fb_getpeername,
    .execve = fb_execve,
    .execvpe = fb_execvpe,
    .fexecve = fb_fexecve,
    .posix_spawn = fb_posix_spawn,
    .posix_spawnp = fb_posix_spawnp,
    .epoll_wait = fb_epoll_wait,
    .epoll_pwait = fb_epoll_pwait,
    .poll = fb_poll,
    .ppoll = fb_ppoll,
    .select = fb_select,
    .pselect = fb_pselect,
    .nanosleep = fb_nanosleep,
    .clock_nanosleep = fb_clock_nanosleep,
    .sleep = fb_sleep,
    .usleep = fb_usleep,
    .pause = fb_pause,
    .sigsuspend = fb_sigsuspend,
    .sigtimedwait = fb_sigtimedwait,
    .sigwaitinfo = fb_sigwaitinfo,
};

static int fb_execvpe(const char *p, char *const a[], char *const e[])
{
    if (sw_real_resolve() == 0 && sw_libc.execvpe != fb_execvpe)
        return sw_libc.execvpe(p, a, e);
    errno = ENOSYS;
    return -1;
}
static int fb_posix_spawn(pid_t *pid, const char *p, const void *fa, const void *at,
                          char *const a[], char *const e[])
{
    if (sw_real_resolve() == 0 && sw_libc.posix_spawn != fb_posix_spawn)
        return sw_libc.posix_spawn(pid, p, fa, at, a, e);
    return ENOSYS;
}
static int fb_posix_spawnp(pid_t *pid, const char *p, const void *fa, const void *at,
                           char *const a[], char *const e[])
{
    if (sw_real_resolve() == 0 && sw_libc.posix_spawnp != fb_posix_spawnp)
        return sw_libc.posix_spawnp(pid, p, fa, at, a, e);
    return ENOSYS;
}

static _Atomic int resolve_state SW_INIT_DATA; /* 0 not started, 1 running, 2 done */
static int resolve_result SW_INIT_DATA;

/*
 * The address range of the object that contains this file, from its own program headers
 * (__ehdr_start is the linker-provided ELF header of this object). Cheaper than dladdr per
 * symbol: _dl_addr scans libc's whole symbol table (measured: 2.5 M instructions for 26
 * lookups at start-up).
 */
extern const ElfW(Ehdr) __ehdr_start __attribute__((visibility("hidden")));
static uintptr_t self_lo SW_INIT_DATA, self_hi SW_INIT_DATA;

static void self_range(void)
{
    const ElfW(Ehdr) *eh = &__ehdr_start;
    const ElfW(Phdr) *ph = (const void *)((const char *)eh + eh->e_phoff);
    uintptr_t bias = (uintptr_t)eh;
    for (int i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0)
            bias = (uintptr_t)eh - ph[i].p_vaddr;
    self_lo = UINTPTR_MAX;
    self_hi = 0;
    for (int i = 0; i < eh->e_phnum; i++) {
        if (ph[i].p_type != PT_LOAD)
            continue;
        uintptr_t lo = bias + ph[i].p_vaddr, hi = lo + ph[i].p_memsz;
        if (lo < self_lo)
            self_lo = lo;
        if (hi > self_hi)
            self_hi = hi;
    }
}

/* True when `p` lies in this object (dlsym handed back our own wrapper). */
static bool is_ours(void *p)
{
    return (uintptr_t)p >= self_lo && (uintptr_t)p < self_hi;
}

/* Looks one symbol up; keeps the fallback when it is missing or our own. */
static int lookup(void **slot, const char *name, bool required)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (!p)
        return required ? -ENOENT : 0;
    if (is_ours(p))
        return -ELOOP;
    __atomic_store_n(slot, p, __ATOMIC_RELEASE);
    return 0;
}

int sw_real_resolve(void)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong(&resolve_state, &expected, 1))
        return expected == 2 ? resolve_result : -EAGAIN;
    sw_guard_depth++;
    self_range();
    struct {
        void **slot;
        const char *name;
        bool required;
    } tab[] = {
        {(void **)&sw_libc.read, "read", true},
        {(void **)&sw_libc.readv, "readv", true},
        {(void **)&sw_libc.recv, "recv", true},
        {(void **)&sw_libc.recvfrom, "recvfrom", true},
        {(void **)&sw_libc.recvmsg, "recvmsg", true},
        {(void **)&sw_libc.write, "write", true},
        {(void **)&sw_libc.writev, "writev", true},
        {(void **)&sw_libc.send, "send", true},
        {(void **)&sw_libc.sendto, "sendto", true},
        {(void **)&sw_libc.sendmsg, "sendmsg", true},
        {(void **)&sw_libc.sendfile, "sendfile", true},
        {(void **)&sw_libc.sendfile64, "sendfile64", true},
        {(void **)&sw_libc.socket, "socket", true},
        {(void **)&sw_libc.accept, "accept", true},
        {(void **)&sw_libc.accept4, "accept4", true},
        {(void **)&sw_libc.connect, "connect", true},
        {(void **)&sw_libc.close, "close", true},
        {(void **)&sw_libc.shutdown, "shutdown", true},
        {(void **)&sw_libc.dup, "dup", true},
        {(void **)&sw_libc.dup2, "dup2", true},
        {(void **)&sw_libc.dup3, "dup3", true},
        {(void **)&sw_libc.fork, "fork", true},
        {(void **)&sw_libc.read_chk, "__read_chk", false},
        {(void **)&sw_libc.recv_chk, "__recv_chk", false},
        {(void **)&sw_libc.recvfrom_chk, "__recvfrom_chk", false},
        {(void **)&sw_libc.close_range, "close_range", false},
        {(void **)&sw_libc.getpeername, "getpeername", true},
        {(void **)&sw_libc.execve, "execve", true},
        {(void **)&sw_libc.execvpe, "execvpe", true},
        {(void **)&sw_libc.fexecve, "fexecve", true},
        {(void **)&sw_libc.posix_spawn, "posix_spawn", true},
        {(void **)&sw_libc.posix_spawnp, "posix_spawnp", true},
        {(void **)&sw_libc.epoll_wait, "epoll_wait", true},
        {(void **)&sw_libc.epoll_pwait, "epoll_pwait", true},
        {(void **)&sw_libc.poll, "poll", true},
        {(void **)&sw_libc.ppoll, "ppoll", true},
        {(void **)&sw_libc.select, "select", true},
        {(void **)&sw_libc.pselect, "pselect", true},
        {(void **)&sw_libc.nanosleep, "nanosleep", true},
        {(void **)&sw_libc.clock_nanosleep, "clock_nanosleep", true},
        {(void **)&sw_libc.sleep, "sleep", true},
        {(void **)&sw_libc.usleep, "usleep", true},
        {(void **)&sw_libc.pause, "pause", true},
        {(void **)&sw_libc.sigsuspend, "sigsuspend", true},
        {(void **)&sw_libc.sigtimedwait, "sigtimedwait", true},
        {(void **)&sw_libc.sigwaitinfo, "sigwaitinfo", true},
    };
    int rc = 0;
    for (size_t i = 0; i < SW_ARRAY_LEN(tab); i++) {
        int r = lookup(tab[i].slot, tab[i].name, tab[i].required);
        if (r < 0 && rc == 0)
            rc = r;
    }
    resolve_result = rc;
    atomic_store(&resolve_state, 2);
    sw_guard_depth--;
    return rc;
}

bool sw_real_resolved(void)
{
    return atomic_load(&resolve_state) == 2;
}
