/*
 * execenv.h - the environment given to programs the application execs: the application's own
 * envp plus SW_AGENT_PARENT_CTX=<sw8 value> when the exec happens while a request is being
 * served (trace.h, sw_trace_exec_context), so a CGI-style child joins the request's trace.
 *
 * Rules: runs in exec wrappers, possibly in a vfork child: no allocation, no lock, no syscall,
 * nothing written outside the caller's stack buffer. The new array is bounded: an environment
 * of more than SW_EXEC_ENV_MAX entries is passed on unchanged (no context).
 */
#ifndef SW_EXECENV_H
#define SW_EXECENV_H

#include "common.h"

#include "propagation.h"

#define SW_EXEC_ENV_MAX 1024
#define SW_EXEC_CTX_NAME "SW_AGENT_PARENT_CTX"

/* Caller-owned (stack) storage for one modified environment, about 10 KiB. */
struct sw_exec_env {
    char *envp[SW_EXEC_ENV_MAX + 2];
    char var[sizeof(SW_EXEC_CTX_NAME "=") + SW_SW8_MAX];
};

/*
 * Returns the environment to exec `path` with: `envp` itself when there is no context to pass
 * (or it is too large), else b->envp: envp without any SW_AGENT_PARENT_CTX entry, plus ours.
 * `envp` may be NULL (an empty environment). The result lives as long as `b`.
 */
char *const *sw_exec_env(char *const *envp, const char *path, struct sw_exec_env *b);

#endif /* SW_EXECENV_H */
