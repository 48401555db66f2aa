/*
 * execenv.c - builds the environment of exec'ed programs (see execenv.h for the contract).
 *
 * Rules: exec wrappers only (possibly a vfork child): stack buffer of the caller, no
 * allocation, no syscall, errno untouched.
 */
#include "common.h"

#include "execenv.h"
#include "guard.h"
#include "trace.h"

#include <string.h>

char *const *sw_exec_env(char *const *envp, const char *path, struct sw_exec_env *b)
{
    static const char name[] = SW_EXEC_CTX_NAME "=";
    const size_t pre = sizeof(name) - 1;
    int saved = errno;
    size_t n;

    SW_GUARD_ENTER();
    n = sw_trace_exec_context(b->var + pre, sizeof(b->var) - pre - 1, path);
    SW_GUARD_LEAVE();
    errno = saved;
    if (n == 0)
        return envp;
    memcpy(b->var, name, pre);
    b->var[pre + n] = '\0';
    size_t k = 0;
    for (char *const *e = envp; e && *e; e++) {
        if (strncmp(*e, name, pre) == 0)
            continue;
        if (k == SW_EXEC_ENV_MAX)
            return envp;
        b->envp[k++] = *e;
    }
    b->envp[k++] = b->var;
    b->envp[k] = NULL;
    return b->envp;
}
