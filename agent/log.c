/*
 * log.c - the agent's own log file (format and limits in log.h).
 *
 * Rules: callable from any thread, including application threads inside hooks and an atfork
 * child: no allocation, no stdio, no lock, errno preserved. I/O is raw syscall(SYS_...) only,
 * never the libc names that libswagent.so interposes. Each line is one write(2) on an O_APPEND
 * fd. Never writes to the application's stdout or stderr.
 */
#include "common.h"

#include "log.h"

#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static _Atomic int log_fd = -1;
static _Atomic int log_level = SW_LOG_INFO;

/*
 * The rest of the state, zero at start, in one object: setting it up (the configured file and
 * its name, the flags) touches one or two pages instead of one per variable wherever the
 * linker put it, a page fault each at every process start. The early lines' buffer stays apart
 * (touched only when lines are kept).
 */
static struct {
    _Atomic bool opened;        /* sw_log_open succeeded once: no more early lines */
    _Atomic int deferred;       /* sw_log_open_deferred: 1 to open, 2 opening */
    _Atomic uint64_t dev, ino;  /* identity of the file behind log_fd */
    _Atomic uint64_t retry_sec; /* the last second a lost log was reopened */
    int (*_Atomic dir_fn)(char *out, size_t cap); /* per-uid fallback dir (agent) */
    _Atomic long max_size;                        /* 0: no limit */
    _Atomic long size;           /* bytes in the file (approximate across processes) */
    _Atomic int size_noted;      /* the size-limit note was written */
    _Atomic uint64_t rate_state; /* second << 16 | lines written in that second */
    _Atomic uint64_t rate_suppressed;
    _Atomic uint64_t early_dropped;
    size_t dir_len;      /* path[0..dir_len) is the file's directory */
    char name[256];      /* the configured file's base name, for the per-uid fallback */
    char path[PATH_MAX]; /* the configured file, set by sw_log_open */
} L;

/* Lines logged before the log opens (init time, or the first line of a deferred open). */
static char early_buf[SW_LOG_EARLY_MAX];
static _Atomic size_t early_len SW_INIT_DATA; /* bytes in early_buf (read at every start) */

static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};

/* ---- formatting ---- */

struct out {
    char *p;
    size_t len, cap;
};

static void put_ch(struct out *o, char ch)
{
    if (o->len < o->cap)
        o->p[o->len++] = ch;
}

static void put_mem(struct out *o, const char *s, size_t n)
{
    if (n > o->cap - o->len)
        n = o->cap - o->len;
    memcpy(o->p + o->len, s, n);
    o->len += n;
}

static void put_uint(struct out *o, unsigned long long v, unsigned base, int min_digits)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    while (n < min_digits && n < (int)sizeof(tmp))
        tmp[n++] = '0';
    while (n)
        put_ch(o, tmp[--n]);
}

static void put_int(struct out *o, long long v)
{
    if (v < 0) {
        put_ch(o, '-');
        put_uint(o, 0ull - (unsigned long long)v, 10, 1);
    } else {
        put_uint(o, (unsigned long long)v, 10, 1);
    }
}

/* The printf subset documented in log.h. Unknown conversions are copied literally. */
static void format_v(struct out *o, const char *fmt, va_list ap)
{
    for (const char *f = fmt; *f; f++) {
        if (*f != '%') {
            put_ch(o, *f);
            continue;
        }
        f++;
        int prec = -1;
        if (f[0] == '.' && f[1] == '*') {
            prec = va_arg(ap, int);
            f += 2;
        }
        int lng = 0; /* 0 int, 1 long, 2 long long, 3 size_t */
        while (*f == 'l' || *f == 'h' || *f == 'z') {
            if (*f == 'l')
                lng = lng == 1 ? 2 : 1;
            else if (*f == 'z')
                lng = 3;
            f++;
        }
        switch (*f) {
        case 's': {
            const char *s = va_arg(ap, const char *);
            if (s == NULL)
                s = "(null)";
            size_t n = prec >= 0 ? strnlen(s, (size_t)prec) : strlen(s);
            put_mem(o, s, n);
            break;
        }
        case 'd':
        case 'i': {
            long long v = lng == 0   ? va_arg(ap, int)
                          : lng == 1 ? va_arg(ap, long)
                          : lng == 2 ? va_arg(ap, long long)
                                     : (long long)va_arg(ap, ssize_t);
            put_int(o, v);
            break;
        }
        case 'u':
        case 'x': {
            unsigned long long v = lng == 0   ? va_arg(ap, unsigned)
                                   : lng == 1 ? va_arg(ap, unsigned long)
                                   : lng == 2 ? va_arg(ap, unsigned long long)
                                              : va_arg(ap, size_t);
            put_uint(o, v, *f == 'x' ? 16 : 10, 1);
            break;
        }
        case 'p':
            put_mem(o, "0x", 2);
            put_uint(o, (uintptr_t)va_arg(ap, void *), 16, 1);
            break;
        case 'c':
            put_ch(o, (char)va_arg(ap, int));
            break;
        case '%':
            put_ch(o, '%');
            break;
        case '\0':
            return;
        default:
            put_ch(o, '%');
            put_ch(o, *f);
            break;
        }
    }
}

static void format(struct out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    format_v(o, fmt, ap);
    va_end(ap);
}

/* Writes `YYYY-MM-DDTHH:MM:SS.mmmZ` for epoch milliseconds `ms` (civil-from-days, UTC). */
static void put_time(struct out *o, int64_t ms)
{
    int64_t secs = ms / 1000, days = secs / 86400, sod = secs % 86400;
    days += 719468;
    int64_t era = (days >= 0 ? days : days - 146096) / 146097;
    int64_t doe = days - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;
    int64_t y = yoe + era * 400 + (m <= 2);
    put_uint(o, (unsigned long long)y, 10, 4);
    put_ch(o, '-');
    put_uint(o, (unsigned long long)m, 10, 2);
    put_ch(o, '-');
    put_uint(o, (unsigned long long)d, 10, 2);
    put_ch(o, 'T');
    put_uint(o, (unsigned long long)(sod / 3600), 10, 2);
    put_ch(o, ':');
    put_uint(o, (unsigned long long)(sod / 60 % 60), 10, 2);
    put_ch(o, ':');
    put_uint(o, (unsigned long long)(sod % 60), 10, 2);
    put_ch(o, '.');
    put_uint(o, (unsigned long long)(ms % 1000), 10, 3);
    put_ch(o, 'Z');
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Formats one complete line (prefix, message, '\n') into `buf`; returns its length. */
static size_t format_line(char *buf, size_t cap, int level, const char *fmt, va_list ap)
{
    struct out o = {buf, 0, cap - 1};
    put_time(&o, now_ms());
    format(&o, " %s swagent[%ld]: ", level_names[level], (long)syscall(SYS_getpid));
    format_v(&o, fmt, ap);
    while (o.len > 0 && o.p[o.len - 1] == '\n')
        o.len--;
    o.p[o.len++] = '\n'; /* cap - 1 above keeps room for it */
    return o.len;
}

/* ---- output ---- */

static void raw_write(int fd, const char *p, size_t n)
{
    while (n > 0) {
        long w = syscall(SYS_write, fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

/* Writes a line to the file, enforcing the size limit. */
static void emit(int fd, const char *line, size_t n)
{
    long max = sw_atomic_load_relaxed(&L.max_size);
    if (max > 0) {
        long after = sw_atomic_add_relaxed(&L.size, (long)n) + (long)n;
        if (after > max) {
            if (atomic_exchange(&L.size_noted, 1) == 0) {
                static const char note[] = "log size limit reached, further lines dropped\n";
                char buf[128];
                struct out o = {buf, 0, sizeof(buf)};
                put_time(&o, now_ms());
                format(&o, " WARN swagent[%ld]: %s", (long)syscall(SYS_getpid), note);
                raw_write(fd, buf, o.len);
            }
            return;
        }
    }
    raw_write(fd, line, n);
}

/* The per-second rate limit. Returns false if the line must be suppressed. */
static bool rate_allow(int fd)
{
    uint64_t sec = (uint64_t)now_ms() / 1000;
    uint64_t cur = sw_atomic_load_relaxed(&L.rate_state);
    for (;;) {
        uint64_t next;
        bool new_window = cur >> 16 != (sec & (UINT64_MAX >> 16));
        if (new_window) {
            next = sec << 16 | 1;
        } else {
            if ((cur & 0xffff) >= SW_LOG_RATE) {
                sw_atomic_add_relaxed(&L.rate_suppressed, 1);
                return false;
            }
            next = cur + 1;
        }
        if (sw_atomic_cas_acq_rel(&L.rate_state, &cur, next)) {
            uint64_t n = new_window ? atomic_exchange(&L.rate_suppressed, 0) : 0;
            if (n > 0) {
                char buf[128];
                struct out o = {buf, 0, sizeof(buf)};
                put_time(&o, now_ms());
                format(&o, " WARN swagent[%ld]: %llu lines suppressed\n", (long)syscall(SYS_getpid),
                       (unsigned long long)n);
                emit(fd, buf, o.len);
            }
            return true;
        }
    }
}

/*
 * Opens `path` for appending as the agent's log: 0600, no symlink as last component, close-on-
 * exec, and only a regular file with one link, owned by the effective uid (the agent never
 * writes into a file its user does not own: a process that changed uid keeps no right to its
 * old log; a hard link planted in a shared directory is refused). Creates
 * the last directory level (0700) when `mkdir_dir` names it. Returns the fd or -errno, and the
 * file's identity and size.
 */
static int open_owned(const char *path, const char *mkdir_dir, uint64_t *dev, uint64_t *ino,
                      long *size)
{
    int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW;
    long fd = syscall(SYS_openat, AT_FDCWD, path, flags, 0600);
    if (fd < 0 && errno == ENOENT && mkdir_dir) {
        syscall(SYS_mkdirat, AT_FDCWD, mkdir_dir, 0700); /* one level, like the runtime dir */
        fd = syscall(SYS_openat, AT_FDCWD, path, flags, 0600);
    }
    if (fd < 0)
        return -errno;
    struct stat st;
    if (syscall(SYS_fstat, (int)fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
        st.st_uid != (uid_t)syscall(SYS_geteuid)) {
        syscall(SYS_close, (int)fd);
        return -EPERM;
    }
    *dev = (uint64_t)st.st_dev;
    *ino = (uint64_t)st.st_ino;
    *size = (long)st.st_size;
    return (int)fd;
}

/*
 * The log fd, checked before every line (lines are rare and rate-limited, so one fstat and
 * one geteuid a line are cheap): it must still be the file we opened (the application may
 * have closed it, closed it in a closefrom loop and reused the number, or dup2'ed its own fd
 * over it) and be owned by our current effective uid (the process may have changed uid, like
 * an nginx worker). Otherwise the fd is forgotten (closed only when it is still our file:
 * never close or write an application fd) and the log is reopened, at most once a second:
 * the configured file, else `<per-uid runtime dir>/<name>` (sw_log_set_dir_fn). Returns -1
 * when there is no usable log (the line is dropped).
 */
static int log_acquire(void)
{
    int fd = sw_atomic_load_acquire(&log_fd);
    uint64_t dev = 0, ino = 0;
    long size = 0;
    if (fd >= 0) {
        struct stat st;
        bool alive = syscall(SYS_fstat, fd, &st) == 0;
        bool same = alive && (uint64_t)st.st_dev == sw_atomic_load_relaxed(&L.dev) &&
                    (uint64_t)st.st_ino == sw_atomic_load_relaxed(&L.ino);
        if (same && st.st_uid == (uid_t)syscall(SYS_geteuid)) {
            sw_atomic_store_relaxed(&L.size, (long)st.st_size);
            return fd;
        }
        int expect = fd;
        if (atomic_compare_exchange_strong(&log_fd, &expect, -1) && same)
            syscall(SYS_close, fd); /* still our file, but no longer ours to write */
    }
    if (L.path[0] == '\0')
        return -1;
    uint64_t sec = (uint64_t)now_ms() / 1000;
    uint64_t last = sw_atomic_load_relaxed(&L.retry_sec);
    if (last == sec || !sw_atomic_cas_acq_rel(&L.retry_sec, &last, sec))
        return -1;
    fd = open_owned(L.path, NULL, &dev, &ino, &size);
    int (*fn)(char *, size_t) = sw_atomic_load_acquire(&L.dir_fn);
    if (fd < 0 && fn) {
        char dir[PATH_MAX], path[PATH_MAX];
        struct out o = {path, 0, sizeof(path) - 1};
        if (fn(dir, sizeof(dir)) == 0) {
            format(&o, "%s/%s", dir, L.name);
            if (o.len < sizeof(path) - 1) {
                path[o.len] = '\0';
                fd = open_owned(path, dir, &dev, &ino, &size);
            }
        }
    }
    if (fd < 0)
        return -1;
    sw_atomic_store_relaxed(&L.dev, dev);
    sw_atomic_store_relaxed(&L.ino, ino);
    sw_atomic_store_relaxed(&L.size, size);
    int expect = -1;
    if (!atomic_compare_exchange_strong(&log_fd, &expect, fd)) {
        syscall(SYS_close, fd); /* another thread reopened first */
        return expect;
    }
    return fd;
}

void sw_log_set_dir_fn(int (*fn)(char *out, size_t cap))
{
    sw_atomic_store_release(&L.dir_fn, fn);
}

static void early_keep(const char *line, size_t n)
{
    size_t at = sw_atomic_add_relaxed(&early_len, n);
    if (at + n > sizeof(early_buf)) {
        sw_atomic_add_relaxed(&L.early_dropped, 1);
        return;
    }
    memcpy(early_buf + at, line, n);
}

static bool log_open_deferred(void);

bool sw_log_has_early(void)
{
    return sw_atomic_load_relaxed(&early_len) > 0;
}

void sw_log(int level, const char *fmt, ...)
{
    if (level < SW_LOG_DEBUG || level >= SW_LOG_OFF || level < sw_atomic_load_relaxed(&log_level))
        return;
    int saved = errno;
    char line[SW_LOG_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    size_t n = format_line(line, sizeof(line), level, fmt, ap);
    va_end(ap);

    if (sw_atomic_load_acquire(&L.opened) ||
        (sw_atomic_load_acquire(&L.deferred) != 0 && log_open_deferred())) {
        int fd = log_acquire();
        if (fd >= 0 && rate_allow(fd))
            emit(fd, line, n);
    } else {
        early_keep(line, n);
    }
    errno = saved;
}

/* Writes the lines kept before the log opened. */
static void early_flush(int fd)
{
    size_t n = atomic_exchange(&early_len, 0);
    if (n > sizeof(early_buf))
        n = sizeof(early_buf);
    /* A line cut at the end of the buffer is dropped whole. */
    while (n > 0 && early_buf[n - 1] != '\n')
        n--;
    emit(fd, early_buf, n);
    uint64_t dropped = atomic_exchange(&L.early_dropped, 0);
    if (dropped > 0) {
        char buf[128];
        struct out o = {buf, 0, sizeof(buf)};
        put_time(&o, now_ms());
        format(&o, " WARN swagent[%ld]: %llu early lines dropped\n", (long)syscall(SYS_getpid),
               (unsigned long long)dropped);
        emit(fd, buf, o.len);
    }
}

/* `dir`/`name` into path[PATH_MAX]: its length, or -errno. */
static int log_file_path(char *path, const char *dir, const char *name)
{
    struct out o = {path, 0, PATH_MAX - 1};

    if (dir == NULL || dir[0] == '\0' || name == NULL || name[0] == '\0' ||
        strchr(name, '/') != NULL)
        return -EINVAL;
    format(&o, "%s/%s", dir, name);
    if (o.len >= PATH_MAX - 1)
        return -ENAMETOOLONG;
    path[o.len] = '\0';
    return (int)o.len;
}

/* Keeps the file (path[0..len)), its base name, level and size limit. */
static void log_keep(const char *path, size_t len, const char *name, int level, long max_size)
{
    memcpy(L.path, path, len + 1);
    size_t nl = strlen(name);
    L.dir_len = len - nl - 1; /* path is dir "/" name (log_file_path) */
    if (nl >= sizeof(L.name))
        nl = sizeof(L.name) - 1;
    memcpy(L.name, name, nl);
    L.name[nl] = '\0';
    sw_log_set_level(level);
    sw_atomic_store_relaxed(&L.max_size, max_size > 0 ? max_size : 0);
    sw_atomic_store_relaxed(&L.size_noted, 0);
}

/* Makes the opened file `fd` the log: the lines kept so far go first. */
static void log_publish(int fd, uint64_t dev, uint64_t ino, long size)
{
    sw_atomic_store_relaxed(&L.size, size);
    early_flush(fd);
    sw_atomic_store_relaxed(&L.dev, dev);
    sw_atomic_store_relaxed(&L.ino, ino);
    int old = atomic_exchange(&log_fd, fd);
    sw_atomic_store_release(&L.opened, true);
    if (old >= 0)
        syscall(SYS_close, old);
}

int sw_log_open(const char *dir, const char *name, int level, long max_size)
{
    char path[PATH_MAX];
    int saved = errno, len = log_file_path(path, dir, name);

    if (len < 0)
        return len;
    uint64_t dev, ino;
    long size;
    int fd = open_owned(path, dir, &dev, &ino, &size);
    if (fd < 0) {
        errno = saved;
        return fd;
    }
    log_keep(path, (size_t)len, name, level, max_size);
    sw_atomic_store_relaxed(&L.deferred, 0);
    log_publish(fd, dev, ino, size);
    errno = saved;
    return 0;
}

int sw_log_open_deferred(const char *dir, const char *name, int level, long max_size)
{
    char path[PATH_MAX];
    int len = log_file_path(path, dir, name);

    if (len < 0)
        return len;
    if (sw_atomic_load_relaxed(&early_len) > 0) /* lines are waiting (config problems) */
        return sw_log_open(dir, name, level, max_size);
    log_keep(path, (size_t)len, name, level, max_size);
    sw_atomic_store_release(&L.deferred, 1);
    return 0;
}

/*
 * The first line after sw_log_open_deferred: one thread opens the file (creating its
 * directory's last level, as sw_log_open) and writes the lines kept before, if any; a thread
 * that comes meanwhile waits for it (a few yields: one open and fstat) and, should it still be
 * opening, keeps its line as an early line. If the file cannot be opened the log goes on as a
 * lost log (log_acquire: the per-uid fallback, a retry a second). True when the log is open (or
 * lost) now, so the caller writes its line the usual way.
 */
static bool log_open_deferred(void)
{
    int one = 1;
    if (!atomic_compare_exchange_strong(&L.deferred, &one, 2)) {
        for (int i = 0; i < 1000 && sw_atomic_load_acquire(&L.deferred) == 2; i++)
            syscall(SYS_sched_yield);
        return sw_atomic_load_acquire(&L.opened);
    }
    char dir[PATH_MAX];
    uint64_t dev = 0, ino = 0;
    long size = 0;
    memcpy(dir, L.path, L.dir_len);
    dir[L.dir_len] = '\0';
    int fd = open_owned(L.path, dir, &dev, &ino, &size);
    if (fd >= 0) {
        log_publish(fd, dev, ino, size);
    } else {
        sw_atomic_store_release(&L.opened, true);
        if ((fd = log_acquire()) >= 0)
            early_flush(fd);
    }
    sw_atomic_store_release(&L.deferred, 0);
    return true;
}

void sw_log_set_level(int level)
{
    if (level < SW_LOG_DEBUG)
        level = SW_LOG_DEBUG;
    if (level > SW_LOG_OFF)
        level = SW_LOG_OFF;
    sw_atomic_store_relaxed(&log_level, level);
}

static bool word_eq(const char *s, size_t len, const char *w)
{
    size_t i;
    for (i = 0; i < len && w[i]; i++) {
        char c = s[i];
        if (c >= 'a' && c <= 'z')
            c = (char)(c - 'a' + 'A');
        if (c != w[i])
            return false;
    }
    return i == len && w[i] == '\0';
}

int sw_log_level_parse(const char *s, size_t len)
{
    if (word_eq(s, len, "DEBUG") || word_eq(s, len, "TRACE") || word_eq(s, len, "ALL"))
        return SW_LOG_DEBUG;
    if (word_eq(s, len, "INFO"))
        return SW_LOG_INFO;
    if (word_eq(s, len, "WARN") || word_eq(s, len, "WARNING"))
        return SW_LOG_WARN;
    if (word_eq(s, len, "ERROR") || word_eq(s, len, "FATAL"))
        return SW_LOG_ERROR;
    if (word_eq(s, len, "OFF"))
        return SW_LOG_OFF;
    return -1;
}

void sw_log_after_fork_child(void)
{
    int two = 2; /* another thread of the parent was opening the file: open again here */
    atomic_compare_exchange_strong(&L.deferred, &two, 1);
}

void sw_log_close(void)
{
    int saved = errno;
    L.path[0] = '\0'; /* no reopen; lines are kept as early lines again */
    sw_atomic_store_relaxed(&L.deferred, 0);
    sw_atomic_store_release(&L.opened, false);
    int fd = atomic_exchange(&log_fd, -1);
    if (fd >= 0)
        syscall(SYS_close, fd);
    errno = saved;
}

bool sw_log_owns_fd(int fd)
{
    return fd >= 0 && fd == sw_atomic_load_relaxed(&log_fd);
}
