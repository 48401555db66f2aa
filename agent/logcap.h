/*
 * logcap.h - stdout/stderr lines as SkyWalking logs (swagent.log_capture; issue 38 item 5;
 * docs/logs.md).
 *
 * What the application writes to fd 1 and 2 with write() or writev() (Python's print, a
 * program's own write calls; not glibc's stdio, which calls its internal write: docs/logs.md)
 * is copied, after the real call and only the count it returned, into the process's ring as
 * SW_REC_LOG records (record.h), with the ids of the request current on the writing thread.
 * The reporter puts lines together (reporter/logs.c). The application's bytes are written by
 * the real call first, unchanged; what follows never blocks, allocates, locks or calls stdio.
 *
 * The fast path in interpose.c reads only sw_logcap_fds: bit value 1 for fd 1, 2 for fd 2, so
 * "fd is captured" is (sw_logcap_fds && (unsigned)fd - 1 < 2 && (sw_logcap_fds & fd)), tested
 * only on the untracked path of write()/writev() after its first branch.
 */
#ifndef SW_LOGCAP_H
#define SW_LOGCAP_H

#include "common.h"

#include <sys/types.h>
#include <sys/uio.h>

struct sw_config;

extern uint32_t sw_logcap_fds SW_HIDDEN; /* 1: fd 1 captured, 2: fd 2 captured; 0 while off */

/* fd is captured: one load and test while capture is off (the mask first, then the fd). */
static inline bool sw_logcap_fd(int fd)
{
    uint32_t m = __atomic_load_n(&sw_logcap_fds, __ATOMIC_RELAXED);
    return SW_UNLIKELY(m != 0) && (unsigned)fd - 1u < 2u && (m & (uint32_t)fd);
}
#define SW_LOGCAP_FD(fd) sw_logcap_fd(fd)

/*
 * Reads swagent.log_capture and its limits from `cfg` (kept by pointer) at load. fd 1 is not
 * captured in a program exec'ed by a traced request (SW_AGENT_PARENT_CTX set: a CGI program's
 * stdout is its response, not its log).
 */
void sw_logcap_init(const struct sw_config *cfg, bool exec_child);

/* write()/writev() on a captured fd: the real call, then the copy of what it wrote. errno is
 * the real call's. */
ssize_t sw_logcap_write(int fd, const void *buf, size_t n);
ssize_t sw_logcap_writev(int fd, const struct iovec *iov, int cnt);

/*
 * Copies the first `r` bytes of `iov` (r > 0: what a write of fd 1 or 2 wrote) into the ring
 * with the calling thread's request ids, under the cap. Changes nothing the application sees
 * (errno kept). Exposed for tests.
 */
void sw_logcap_capture(int fd, const struct iovec *iov, int cnt, size_t r);

/* Counters of this process (tests, `swagent status` reads the ring's). */
struct sw_logcap_stats {
    uint64_t records; /* SW_REC_LOG records committed */
    uint64_t bytes;   /* bytes captured */
    uint64_t capped;  /* bytes not captured: over the cap */
    uint64_t lost;    /* bytes not captured: no ring or no room */
    uint64_t no_ctx;  /* writes not captured: no traced request (swagent.log_capture=on) */
};
void sw_logcap_get_stats(struct sw_logcap_stats *out);

#endif /* SW_LOGCAP_H */
