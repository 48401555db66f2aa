/*
 * agent.c - start-up of libswagent.so in two steps.
 *
 * At load (the constructor): resolve the real functions, decide whether to run, load the
 * configuration. That is all a program that never opens a stream socket pays (a shell's
 * commands: ls, sed, true), and it is kept to a few page faults.
 *
 * At activation (the first socket(AF_INET/AF_INET6/AF_UNIX, SOCK_STREAM), accept or accept4 of the
 * process, or the constructor of a program exec'ed while serving a request): the default
 * instance name, the log's setup, the trace and connection modules (their pools are mappings)
 * and the atfork handler. Until then every wrapper goes straight to libc (sw_conn_max is 0)
 * and there is nothing to trace or to fork.
 *
 * Rules: the constructor runs once (under the loader lock); activation runs once, in the
 * first thread that gets there (the compare-and-swap below; a thread that loses the race
 * leaves its one socket untracked rather than wait). No threads, no exit/abort, no stdio,
 * errno kept. Every failure leaves the agent off (sw_conn_max stays 0, so every wrapper goes
 * straight to libc) with one log line. The configuration lives here for the life of the
 * process (trace keeps a pointer to it).
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
#include "logcap.h"
#include "profile.h"
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
#include <time.h>
#include <unistd.h>

static struct sw_config cfg;
static _Atomic bool enabled SW_INIT_DATA;  /* activated and tracing (the atfork handlers look) */
static _Atomic int act_state SW_INIT_DATA; /* enum below */
static uint32_t start_euid SW_INIT_DATA;   /* the effective uid at load (sw_trace_init_as) */
static bool log_ready SW_INIT_DATA;        /* the log's file and fallback are set */

enum { ACT_OFF, ACT_ARMED, ACT_RUNNING, ACT_DONE };

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
    if (!sw_atomic_load_relaxed(&enabled) || SW_GUARD_HELD())
        return;
    SW_GUARD_ENTER();
    sw_trace_before_fork();
    SW_GUARD_LEAVE();
}

static void after_fork_parent(void)
{
    if (!sw_atomic_load_relaxed(&enabled))
        return;
    SW_GUARD_ENTER();
    sw_trace_after_fork_parent();
    sw_conn_after_fork_parent();
    SW_GUARD_LEAVE();
}

static void after_fork_child(void)
{
    if (!sw_atomic_load_relaxed(&enabled))
        return;
    SW_GUARD_ENTER();
    sw_log_after_fork_child();
    sw_trace_after_fork();
    sw_profile_after_fork();
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

/* The log's file (opened by its first line) and its fallback after a uid change. */
static void log_setup(void)
{
    if (log_ready)
        return;
    log_ready = true;
    sw_log_open_deferred(cfg.log_dir, cfg.log_file_name, cfg.log_level, cfg.log_max_file_size);
    sw_log_set_dir_fn(log_dir_for_uid);
}

void sw_agent_init(void)
{
    static bool done SW_INIT_DATA;
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
    start_euid = (uint32_t)syscall(SYS_geteuid); /* the uid the runtime directory is for */
    /* Configuration problems (or DEBUG) are written now, not at activation. */
    if (sw_log_has_early() || cfg.log_level <= SW_LOG_DEBUG)
        log_setup();
    atomic_store(&act_state, ACT_ARMED);
    /* Exec'ed while the parent served a request (CGI): our root exits join that trace. */
    const char *ctx = getenv("SW_AGENT_PARENT_CTX");
    bool exec_child = ctx && *ctx;
    sw_logcap_init(&cfg, exec_child);
    /* swagent.log_capture=all: every line of the program, from its first write: active now
     * (never from the write path, which may run in a signal handler; logcap.c). */
    if (exec_child || cfg.log_capture == SW_LOGCAP_ALL) {
        SW_GUARD_LEAVE();
        sw_agent_activate();
        if (exec_child && sw_atomic_load_relaxed(&enabled))
            sw_trace_set_exec_parent(ctx, strlen(ctx));
        return;
    }
    /* INFO when the process records its first segment (trace.c), not for every command. */
    SW_LOG_DEBUG_("swagent %s loaded: service=%s", SW_VERSION_STRING, cfg.service_name);
    SW_GUARD_LEAVE();
    return;
off:
    SW_LOGW("swagent off: %s (%d)", why, rc);
off_quiet:
    SW_GUARD_LEAVE();
}

/*
 * Another thread is activating: wait for it, so that this thread's first socket is tracked
 * too. Bounded (100 ms), yielding the CPU; the activating thread holds nothing this one could
 * hold (a signal handler of the activating thread itself never gets here: the guard is held).
 * A child forked by another thread in the middle of an activation stays inactive.
 */
static void activation_wait(void)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (atomic_load(&act_state) == ACT_RUNNING) {
        syscall(SYS_sched_yield);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > 100000000L)
            return;
    }
}

void sw_agent_activate(void)
{
    int expect = ACT_ARMED;
    if (SW_GUARD_HELD())
        return;
    int saved = errno, rc;
    if (!atomic_compare_exchange_strong(&act_state, &expect, ACT_RUNNING)) {
        if (expect == ACT_RUNNING)
            activation_wait();
        errno = saved;
        return;
    }
    const char *why;
    SW_GUARD_ENTER();
    sw_config_default_instance(&cfg);
    log_setup();
    if ((rc = sw_trace_init_as(&cfg, start_euid)) < 0) {
        why = "trace module failed to start";
        goto off;
    }
    /* Before the connection table is published: a fork from then on runs the handlers. */
    sw_atomic_store_relaxed(&enabled, true);
    if (pthread_atfork(before_fork, after_fork_parent, after_fork_child) != 0) {
        rc = -ENOMEM;
        why = "pthread_atfork failed";
        goto off;
    }
    if ((rc = sw_conn_init(&cfg, SW_CONN_POOL_DEFAULT)) < 0) {
        why = "connection table could not be mapped";
        goto off;
    }
    SW_LOG_DEBUG_("swagent %s enabled: service=%s", SW_VERSION_STRING, cfg.service_name);
    atomic_store(&act_state, ACT_DONE);
    SW_GUARD_LEAVE();
    errno = saved;
    return;
off:
    sw_atomic_store_relaxed(&enabled, false);
    atomic_store(&act_state, ACT_OFF);
    SW_LOGW("swagent off: %s (%d)", why, rc);
    SW_GUARD_LEAVE();
    errno = saved;
}

bool sw_agent_enabled(void)
{
    return sw_atomic_load_relaxed(&enabled);
}

bool sw_agent_armed(void)
{
    int st = atomic_load_explicit(&act_state, memory_order_relaxed);
    return st == ACT_ARMED || st == ACT_RUNNING;
}
