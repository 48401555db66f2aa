/*
 * agent.c - start-up of libswagent.so: resolve the real functions, decide whether to run,
 * load the configuration, open the log, start trace and conn, register the atfork handler.
 *
 * Rules: runs once, from the library constructor (under the loader lock): no threads, no
 * exit/abort, no stdio. Every failure leaves the agent off (sw_conn_max stays 0, so every
 * wrapper goes straight to libc) with one log line. The configuration lives here for the life
 * of the process (trace keeps a pointer to it).
 *
 * Fork: the child keeps the tracked connections (it inherited the fds, and a forking server
 * often serves the accepted connection in the child) and their parser state, but forgets the
 * parent's open spans (sw_trace_after_fork drops the parent's segments and ring; conn drops
 * the handles). exec starts from scratch: the new image runs this constructor again and
 * inherited sockets stay untracked.
 */
#include "common.h"

#include "agent.h"
#include "config.h"
#include "conn.h"
#include "guard.h"
#include "log.h"
#include "real.h"
#include "selfnote.h"
#include "trace.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

static struct sw_config cfg;
static bool enabled;

/* The log's fallback directory after a uid change: the runtime directory of the new uid. */
static int log_dir_for_uid(char *out, size_t cap)
{
    bool uid_changed = (uint32_t)syscall(SYS_geteuid) != sw_trace_start_euid();
    return sw_config_runtime_dir_for_uid(&cfg, out, cap, uid_changed, NULL);
}

/* A fork while serving a request opens the request's EXEC exit span (trace.h). Forks made by
 * the agent itself (guard held: the reporter spawn) do not. */
static void before_fork(void)
{
    if (!enabled || SW_GUARD_HELD())
        return;
    SW_GUARD_ENTER();
    sw_trace_before_fork();
    SW_GUARD_LEAVE();
}

static void after_fork_parent(void)
{
    if (!enabled)
        return;
    SW_GUARD_ENTER();
    sw_trace_after_fork_parent();
    sw_conn_after_fork_parent();
    SW_GUARD_LEAVE();
}

static void after_fork_child(void)
{
    if (!enabled)
        return;
    SW_GUARD_ENTER();
    sw_log_after_fork_child();
    sw_trace_after_fork();
    sw_conn_after_fork();
    SW_GUARD_LEAVE();
}

/* True when this process is the reporter (it must never trace itself): its executable carries
 * the note of selfnote.h. Memory reads of the main program's program headers only. */
static bool is_reporter(void)
{
    const ElfW(Phdr) *ph = (const ElfW(Phdr) *)getauxval(AT_PHDR);
    size_t n = getauxval(AT_PHNUM);
    uintptr_t bias = 0;
    bool have_bias = false;

    if (ph == NULL || n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (ph[i].p_type == PT_PHDR) {
            bias = (uintptr_t)ph - ph[i].p_vaddr;
            have_bias = true;
        }
    if (!have_bias) /* the reporter is linked dynamically: it has a PT_PHDR */
        return false;
    for (size_t i = 0; i < n; i++) {
        if (ph[i].p_type != PT_NOTE)
            continue;
        const unsigned char *p = (const unsigned char *)(bias + ph[i].p_vaddr);
        size_t left = ph[i].p_memsz, a = ph[i].p_align == 8 ? 7 : 3; /* .note.gnu.property: 8 */
        while (left >= 12) {
            uint32_t h[3];
            memcpy(h, p, sizeof(h));
            size_t nsz = (h[0] + a) & ~a, dsz = (h[1] + a) & ~a;
            if (nsz > left - 12 || dsz > left - 12 - nsz)
                break;
            if (h[2] == SW_SELFNOTE_TYPE && h[0] == sizeof(SW_SELFNOTE_NAME) && h[1] == 4 &&
                memcmp(p + 12, SW_SELFNOTE_NAME, sizeof(SW_SELFNOTE_NAME)) == 0) {
                uint32_t d;
                memcpy(&d, p + 12 + nsz, sizeof(d));
                if (d == SW_SELFNOTE_DESC)
                    return true;
            }
            p += 12 + nsz + dsz;
            left -= 12 + nsz + dsz;
        }
    }
    return false;
}

void sw_agent_init(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    SW_GUARD_ENTER();
    int rc = sw_real_resolve();
    const char *why = NULL;
    if (rc < 0) {
        why = rc == -ELOOP ? "dlsym(RTLD_NEXT) returned our own wrapper" : "libc symbol missing";
        goto off;
    }
    if (getauxval(AT_SECURE)) {
        why = "secure-execution (setuid) process";
        goto off;
    }
    if (is_reporter()) {
        why = NULL;
        goto off_quiet;
    }
    /* SW_AGENT_DISABLE=1 (config.c reads it too): off before the configuration is loaded. */
    if (sw_config_bool_true(getenv("SW_AGENT_DISABLE")))
        goto off_quiet;
    char dir[PATH_MAX];
    const char *self_dir = NULL;
    Dl_info di;
    if (dladdr((void *)&sw_agent_init, &di) && di.dli_fname) {
        size_t l = strlen(di.dli_fname);
        const char *slash = strrchr(di.dli_fname, '/');
        if (slash && l < sizeof(dir)) {
            size_t dl = (size_t)(slash - di.dli_fname);
            memcpy(dir, di.dli_fname, dl);
            dir[dl ? dl : 1] = 0;
            if (!dl)
                dir[0] = '/';
            self_dir = dir;
        }
    }
    sw_config_load_zeroed(&cfg, NULL, self_dir); /* static, all zero (sw_agent_init runs once) */
    if (cfg.disabled)
        goto off_quiet;
    /* Opened by its first line: most preloaded processes (a shell's commands) never log. */
    sw_log_open_deferred(cfg.log_dir, cfg.log_file_name, cfg.log_level, cfg.log_max_file_size);
    sw_log_set_dir_fn(log_dir_for_uid);
    if ((rc = sw_trace_init(&cfg)) < 0) {
        why = "trace module failed to start";
        goto off;
    }
    /* Exec'ed while the parent served a request (CGI): our root exits join that trace. */
    const char *ctx = getenv("SW_AGENT_PARENT_CTX");
    if (ctx && *ctx)
        sw_trace_set_exec_parent(ctx, strlen(ctx));
    if ((rc = sw_conn_init(&cfg, SW_CONN_POOL_DEFAULT)) < 0) {
        why = "connection table could not be mapped";
        goto off;
    }
    if (pthread_atfork(before_fork, after_fork_parent, after_fork_child) != 0) {
        sw_conn_shutdown();
        why = "pthread_atfork failed";
        goto off;
    }
    enabled = true;
    /* INFO when the process records its first segment (trace.c), not for every command. */
    SW_LOG_DEBUG_("swagent %s enabled: service=%s", SW_VERSION_STRING, cfg.service_name);
    SW_GUARD_LEAVE();
    return;
off:
    SW_LOGW("swagent off: %s (%d)", why, rc);
off_quiet:
    SW_GUARD_LEAVE();
}

bool sw_agent_enabled(void)
{
    return enabled;
}
