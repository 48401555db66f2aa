/*
 * log.h - the agent's own log: a file in logging.dir (never the application's stdout or
 * stderr). Formats into a stack buffer and writes with the real write(2) under the
 * re-entrancy guard; no stdio, no allocation; rate-limited per call site class.
 */
#ifndef SW_LOG_H
#define SW_LOG_H

#include "common.h"

enum sw_log_level { SW_LOG_DEBUG = 0, SW_LOG_INFO = 1, SW_LOG_WARN = 2, SW_LOG_ERROR = 3, SW_LOG_OFF = 4 };

/*
 * Opens the log file `dir`/`name` (0600, O_APPEND|O_CLOEXEC|O_NOFOLLOW) at init. Until then,
 * or if it fails, messages are dropped (never sent to the application's fds).
 */
int sw_log_open(const char *dir, const char *name, int level, long max_size);

/* Closes the log fd (atfork child keeps it: the fd is O_CLOEXEC and shared, which is fine). */
void sw_log_close(void);

/* True when the fd belongs to the log (the interposition layer ignores it). */
bool sw_log_owns_fd(int fd);

/* printf-like subset (%s %d %u %ld %lu %lld %llu %zu %x %p %c %%), at most 1 KiB a line. */
void sw_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define SW_LOG_DEBUG_(...) sw_log(SW_LOG_DEBUG, __VA_ARGS__)
#define SW_LOGI(...) sw_log(SW_LOG_INFO, __VA_ARGS__)
#define SW_LOGW(...) sw_log(SW_LOG_WARN, __VA_ARGS__)
#define SW_LOGE(...) sw_log(SW_LOG_ERROR, __VA_ARGS__)

#endif /* SW_LOG_H */
