/*
 * spawn.h - start swagent-reporter on demand from a traced process, and the lock-file naming
 * shared by the agent, the reporter and the `swagent` launcher.
 *
 * One reporter runs per user, collector and authentication/TLS settings: per reporter key
 * (sw_config_reporter_key: the collector, plus `+<settings id>` when a token or TLS is
 * configured). It holds an exclusive flock on `<runtime_dir>/reporter-<sanitized key>.lock`
 * for its whole life; "is a reporter running" is "can this lock not be taken". The status file
 * beside it is `reporter-<sanitized key>.status`.
 */
#ifndef SW_SPAWN_H
#define SW_SPAWN_H

#include "common.h"

#include <stddef.h>

struct sw_config;

/*
 * Writes `<dir>/reporter-<collector (a reporter key) with every byte outside [A-Za-z0-9._+-]
 * replaced by '_'><suffix>` into `out`. Returns 0, or -ENAMETOOLONG. No allocation, no syscall.
 */
static inline int sw_spawn_reporter_file(char *out, size_t cap, const char *dir,
                                         const char *collector, const char *suffix)
{
    size_t n = 0;
    const char *parts[2] = {dir, "/reporter-"};

    for (int i = 0; i < 2; i++)
        for (const char *s = parts[i]; *s; s++) {
            if (n + 1 >= cap)
                return -ENAMETOOLONG;
            out[n++] = *s;
        }
    for (const char *s = collector; *s; s++) {
        char ch = *s;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_' || ch == '+';
        if (n + 1 >= cap)
            return -ENAMETOOLONG;
        out[n++] = ok ? ch : '_';
    }
    for (const char *s = suffix; *s; s++) {
        if (n + 1 >= cap)
            return -ENAMETOOLONG;
        out[n++] = *s;
    }
    out[n] = '\0';
    return 0;
}

/*
 * True when a reporter for c's reporter key holds its lock in c->runtime_dir. Opens the lock
 * file with raw syscalls, tries a non-blocking flock, and closes it again.
 */
bool sw_spawn_reporter_running(const struct sw_config *c);

/*
 * Starts c->reporter_path (when "": sw_config_default_reporter_path of c->self_dir, looked
 * up here, at the first start, not at every process start) fully detached (`--runtime-dir
 * c->runtime_dir --collector c->backend_service --config c->config_file --agent-dir
 * c->self_dir --settings-id <sw_config_settings_id>`: the reporter reads the file this
 * process read, "" when it read none, with the same environment and the same directory for
 * derived paths, so its settings are this process's; it serves this process's reporter key
 * even if the file changed since, and logs that) unless a reporter already holds the lock of
 * c's reporter key. Runs in the application's process, so:
 *  - argv and envp (the application's environment minus LD_PRELOAD) are built before the
 *    first clone in fixed buffers on the stack; nothing is allocated;
 *  - both children are clone(CLONE_VM | CLONE_VFORK) of the application's address space, not
 *    forks: nothing of a process of any size is copied or made copy-on-write (a fork would
 *    cost the application a page fault at its next write to every page it had written), no
 *    pthread_atfork handler runs, and the calling thread waits only until the reporter is
 *    exec'd. The children run on their own stacks with every signal blocked and make only
 *    system calls (setsid; in the grandchild: the application's signal handlers reset to the
 *    default, /dev/null onto 0/1/2, close_range, unblock signals, execve);
 *  - the intermediate child exits once the reporter is exec'd and is reaped here with wait4 on
 *    its pid: no zombie is left, the reporter is re-parented to init (or the nearest
 *    subreaper), and the application sees at most one SIGCHLD for a child it did not create
 *    (a SIGCHLD handler that reaps with waitpid(-1) may reap it first; that is harmless,
 *    wait4 then gets ECHILD).
 * Returns 0 when a reporter is running or was started, a negative errno otherwise: the program
 * was not found or is not executable (-ENOENT, -EACCES: looked up before the spawn), its
 * execve failed in the grandchild (that errno, e.g. -ENOEXEC), or a child could not be made. The
 * caller (agent-core) rate-limits calls (at most once per process per N seconds).
 */
int sw_spawn_reporter(const struct sw_config *c);

/*
 * sw_spawn_reporter for the runtime directory `runtime_dir` instead of c->runtime_dir (a
 * process whose uid changed since start uses the directory of its current uid; the reporter
 * then runs as that uid). NULL or "" means c->runtime_dir.
 */
int sw_spawn_reporter_in(const struct sw_config *c, const char *runtime_dir);

#endif /* SW_SPAWN_H */
