/*
 * log.h - the agent's own log: a file in logging.dir (never the application's stdout or
 * stderr). Formats into a stack buffer with its own tiny formatter and writes each line with
 * one raw syscall(SYS_write) on an O_APPEND fd, so lines from threads and processes never
 * interleave and the agent's own write() hook is never entered. No stdio, no allocation,
 * no lock. Safe from any thread, also in an atfork child.
 *
 * Line format: `2026-11-29T19:30:00.123Z WARN swagent[1234]: message` (UTC).
 * Rate limit: at most SW_LOG_RATE lines per second (process-wide); the first line of the next
 * second that logs is preceded by `N lines suppressed`. Size limit: once the file would grow
 * beyond max_size, one `log size limit reached` line is written and later lines are dropped.
 * Lines logged before sw_log_open (for example config errors in the constructor) are kept in a
 * small static buffer (SW_LOG_EARLY_MAX bytes) and written when the log opens.
 */
#ifndef SW_LOG_H
#define SW_LOG_H

#include "common.h"

enum sw_log_level {
    SW_LOG_DEBUG = 0,
    SW_LOG_INFO = 1,
    SW_LOG_WARN = 2,
    SW_LOG_ERROR = 3,
    SW_LOG_OFF = 4
};

/*
 * Opens the log file `dir`/`name` (0600, O_APPEND|O_CLOEXEC|O_NOFOLLOW) at init. Until then,
 * or if it fails, messages are dropped (never sent to the application's fds).
 */
int sw_log_open(const char *dir, const char *name, int level, long max_size);

/*
 * The same, but the file is opened by the first line written at the level (so a process that
 * logs nothing never opens or creates it: the agent in a short-lived command). Lines already
 * kept open it at once. Fails only on a bad dir or name.
 */
int sw_log_open_deferred(const char *dir, const char *name, int level, long max_size);

/* True when lines are kept, waiting for the log to open (problems found before it). */
bool sw_log_has_early(void);

#define SW_LOG_RATE 100
#define SW_LOG_LINE_MAX 1024
#define SW_LOG_EARLY_MAX 4096

/*
 * Where the log goes when the configured file cannot be used by the process's current uid
 * (it changed uid since start, or the file is not owned by it): `fn` writes a directory (the
 * runtime directory of the current uid) and returns 0. Set by the agent; the reporter has
 * none. Before every line the log checks that its fd is still the file it opened and owned by
 * the current effective uid; if not, it forgets the fd (never writing or closing an fd the
 * application now owns) and reopens, at most once a second.
 */
void sw_log_set_dir_fn(int (*fn)(char *out, size_t cap));

/* Changes the level (for example after a configuration update). */
void sw_log_set_level(int level);

/* Parses DEBUG/TRACE, INFO, WARN/WARNING, ERROR/FATAL, OFF (any case). Returns -1 if unknown. */
int sw_log_level_parse(const char *s, size_t len);

/* In a fork child: a deferred open another thread of the parent had begun is redone here. */
void sw_log_after_fork_child(void);

/* Closes the log fd (atfork child keeps it: the fd is O_CLOEXEC and shared, which is fine). */
void sw_log_close(void);

/* True when the fd belongs to the log (the interposition layer ignores it). */
bool sw_log_owns_fd(int fd);

/*
 * printf-like subset: %s %.*s %d %i %u %x %c %p %% with the length modifiers h, l, ll, z (so
 * %ld %lu %lld %llu %zu %zd %lx ...). At most SW_LOG_LINE_MAX bytes a line (longer: cut).
 */
void sw_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define SW_LOG_DEBUG_(...) sw_log(SW_LOG_DEBUG, __VA_ARGS__)
#define SW_LOGI(...) sw_log(SW_LOG_INFO, __VA_ARGS__)
#define SW_LOGW(...) sw_log(SW_LOG_WARN, __VA_ARGS__)
#define SW_LOGE(...) sw_log(SW_LOG_ERROR, __VA_ARGS__)

#endif /* SW_LOG_H */
