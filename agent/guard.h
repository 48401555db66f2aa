/*
 * guard.h - the per-thread re-entrancy guard (libfaketime's dont_fake, mimalloc's recurse).
 *
 * Rules: held while the agent runs its own bookkeeping (trace, ring, log, reporter spawn);
 * a wrapper entered while it is held goes straight to the real function. The variable is
 * `__thread` with the initial-exec TLS model (no allocation on first access) and hidden, so
 * one flag is shared by every file of libswagent.so (a `static` one would be per file).
 */
#ifndef SW_GUARD_H
#define SW_GUARD_H

#include "common.h"

extern __thread int sw_guard_depth __attribute__((tls_model("initial-exec"))) SW_HIDDEN;

#define SW_GUARD_HELD() SW_UNLIKELY(sw_guard_depth != 0)
#define SW_GUARD_ENTER() (sw_guard_depth++)
#define SW_GUARD_LEAVE() (sw_guard_depth--)

/* Runs `stmt` with the guard held. */
#define SW_GUARDED(stmt)                                                                           \
    do {                                                                                           \
        SW_GUARD_ENTER();                                                                          \
        stmt;                                                                                      \
        SW_GUARD_LEAVE();                                                                          \
    } while (0)

#endif /* SW_GUARD_H */
