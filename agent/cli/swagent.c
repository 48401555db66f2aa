/*
 * swagent.c - the `swagent` launcher.
 *
 *   swagent run [--service NAME] [--collector HOST:PORT] [--config FILE] -- CMD [ARGS...]
 *   swagent reporter [swagent-reporter options]
 *   swagent status [--config FILE] [--runtime-dir DIR]
 *   swagent --version | --help
 *
 * Rules: an ordinary command-line program (stdio and malloc are fine; it is never run under
 * the agent: `run` sets LD_PRELOAD only for the command it execs). Exit status: the command's
 * own for `run` (exec), 0 on success, 1 on a runtime error, 2 on a usage error.
 */
#include "common.h"

#include "config.h"
#include "ring.h"
#include "spawn.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: swagent run [--service NAME] [--collector HOST:PORT] [--config FILE] -- "
               "CMD [ARGS...]\n"
               "       swagent reporter [--config FILE] [--runtime-dir DIR] "
               "[--collector HOST:PORT] [--idle-exit SECONDS]\n"
               "       swagent status [--config FILE] [--runtime-dir DIR]\n"
               "       swagent --version\n"
               "environment: SWAGENT_LIB overrides the path of libswagent.so\n");
}

/* The directory of this executable (from /proc/self/exe), or "." */
static void self_dir(char *out, size_t cap)
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    char *slash;

    if (n <= 0) {
        snprintf(out, cap, ".");
        return;
    }
    buf[n] = '\0';
    slash = strrchr(buf, '/');
    if (slash)
        *slash = '\0';
    snprintf(out, cap, "%s", buf[0] ? buf : "/");
}

static bool is_file(const char *p, int mode)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, mode) == 0;
}

/* Finds libswagent.so: $SWAGENT_LIB, beside the launcher (build tree), or in ../lib*. */
static int find_lib(char *out, size_t cap)
{
    static const char *const rel[] = {
        "libswagent.so",
        "../lib/libswagent.so",
        "../lib64/libswagent.so",
        "../lib/x86_64-linux-gnu/libswagent.so",
        "../lib/aarch64-linux-gnu/libswagent.so",
        "../agent/libswagent.so",
    };
    const char *env = getenv("SWAGENT_LIB");
    char dir[PATH_MAX], cand[PATH_MAX * 2];

    if (env && *env) {
        if (!is_file(env, R_OK))
            return -ENOENT;
        if (!realpath(env, out) && (size_t)snprintf(out, cap, "%s", env) >= cap)
            return -ENAMETOOLONG;
        return 0;
    }
    self_dir(dir, sizeof(dir));
    for (size_t i = 0; i < SW_ARRAY_LEN(rel); i++) {
        snprintf(cand, sizeof(cand), "%s/%s", dir, rel[i]);
        if (is_file(cand, R_OK)) {
            if (!realpath(cand, out) &&
                (size_t)snprintf(out, cap, "%.*s", (int)(cap - 1), cand) >= cap)
                return -ENAMETOOLONG;
            return 0;
        }
    }
    return -ENOENT;
}

static int cmd_run(int argc, char **argv)
{
    const char *service = NULL, *collector = NULL, *config = NULL;
    char lib[PATH_MAX], *preload;
    const char *old;
    int i;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        } else if (strcmp(argv[i], "--service") == 0 && i + 1 < argc) {
            service = argv[++i];
        } else if (strcmp(argv[i], "--collector") == 0 && i + 1 < argc) {
            collector = argv[++i];
        } else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            config = argv[++i];
        } else if (argv[i][0] == '-') {
            usage(stderr);
            return 2;
        } else {
            break; /* the command starts here (the `--` is optional) */
        }
    }
    if (i >= argc) {
        usage(stderr);
        return 2;
    }
    if (find_lib(lib, sizeof(lib)) != 0) {
        fprintf(stderr, "swagent: libswagent.so not found (set SWAGENT_LIB)\n");
        return 1;
    }
    old = getenv("LD_PRELOAD");
    if (old && *old) {
        size_t n = strlen(lib) + strlen(old) + 2;
        preload = malloc(n);
        if (!preload)
            return 1;
        snprintf(preload, n, "%s:%s", lib, old);
    } else {
        preload = lib;
    }
    if (setenv("LD_PRELOAD", preload, 1) != 0 ||
        (service && setenv("SW_AGENT_NAME", service, 1) != 0) ||
        (collector && setenv("SW_AGENT_COLLECTOR_BACKEND_SERVICES", collector, 1) != 0) ||
        (config && setenv("SW_AGENT_CONFIG", config, 1) != 0)) {
        perror("swagent: setenv");
        return 1;
    }
    execvp(argv[i], argv + i);
    fprintf(stderr, "swagent: cannot run %s: %s\n", argv[i], strerror(errno));
    return errno == ENOENT ? 127 : 126;
}

static int cmd_reporter(int argc, char **argv)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    char **nargv = calloc((size_t)argc + 2, sizeof(char *));
    int n = 0;

    if (!nargv)
        return 1;
    self_dir(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/swagent-reporter", dir);
    if (!is_file(path, X_OK)) {
        snprintf(path, sizeof(path), "%s/reporter/swagent-reporter", dir);
        if (!is_file(path, X_OK))
            snprintf(path, sizeof(path), "swagent-reporter");
    }
    nargv[n++] = path;
    nargv[n++] = (char *)"--foreground";
    for (int i = 1; i < argc; i++)
        nargv[n++] = argv[i];
    nargv[n] = NULL;
    unsetenv("LD_PRELOAD");
    execvp(path, nargv);
    fprintf(stderr, "swagent: cannot run %s: %s\n", path, strerror(errno));
    return 1;
}

/* True when the process `pid` exists and (if ticks != 0) started at `ticks`. */
static bool pid_alive(int pid, uint64_t ticks)
{
    char p[64], buf[1024];
    FILE *f;
    size_t n;
    char *s;
    unsigned long long st = 0;

    if (pid <= 0)
        return false;
    snprintf(p, sizeof(p), "/proc/%d/stat", pid);
    f = fopen(p, "re");
    if (!f)
        return false;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (ticks == 0)
        return true;
    s = strrchr(buf, ')'); /* comm may hold spaces; fields resume after the last ')' */
    if (!s)
        return true;
    s++;
    /* Field 3 (state) is the first after ')'; the start time is field 22. */
    for (int field = 3; field < 22 && s; field++)
        s = strchr(s + 1, ' ');
    if (!s || sscanf(s, " %llu", &st) != 1)
        return true;
    return st == ticks;
}

static int cmd_status(int argc, char **argv)
{
    const char *config = NULL, *rdir = NULL;
    struct sw_config *c = calloc(1, sizeof(*c));
    char sdir[PATH_MAX], path[PATH_MAX * 2];
    DIR *d;
    struct dirent *e;
    int reporters = 0, rings = 0;

    if (!c)
        return 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            config = argv[++i];
        } else if (strcmp(argv[i], "--runtime-dir") == 0 && i + 1 < argc) {
            rdir = argv[++i];
        } else {
            usage(stderr);
            return 2;
        }
    }
    self_dir(sdir, sizeof(sdir));
    sw_config_load(c, config, sdir);
    if (rdir)
        snprintf(c->runtime_dir, sizeof(c->runtime_dir), "%s", rdir);
    printf("runtime dir: %s\n", c->runtime_dir);
    d = opendir(c->runtime_dir);
    if (!d) {
        printf("no runtime directory (%s): no traced process has run yet\n", strerror(errno));
        free(c);
        return 0;
    }

    printf("reporters:\n");
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "reporter-", 9) != 0 || len < 5 ||
            strcmp(e->d_name + len - 5, ".lock") != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", c->runtime_dir, e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        bool running = false;
        if (fd >= 0) {
            running = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
            close(fd);
        }
        printf("  %.*s: %s\n", (int)(len - 5), e->d_name, running ? "running" : "not running");
        reporters++;
        /* The status file the reporter rewrites about once a second. */
        snprintf(path + strlen(path) - 5, 16, ".status");
        FILE *f = fopen(path, "re");
        if (f) {
            char line[512];
            while (fgets(line, sizeof(line), f))
                printf("    %s", line);
            fclose(f);
        }
    }
    if (!reporters)
        printf("  none\n");

    rewinddir(d);
    printf("rings:\n");
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        struct sw_ring *r;
        struct sw_ring_stats st;
        if (strncmp(e->d_name, "ring-", 5) != 0 || len < 4 ||
            strcmp(e->d_name + len - 4, ".swr") != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", c->runtime_dir, e->d_name);
        if (sw_ring_open(path, &r) != 0) {
            printf("  %s: unreadable\n", e->d_name);
            continue;
        }
        const struct sw_ring_meta *m = sw_ring_get_meta(r);
        sw_ring_get_stats(r, &st);
        bool live = pid_alive(m->pid, m->proc_start_ticks);
        uint64_t pending = st.committed > st.consumed ? st.committed - st.consumed : 0;
        printf("  pid %d %s service=%.*s instance=%.*s exe=%.*s collector=%.*s "
               "committed=%llu dropped=%llu shed=%llu delivered=%llu pending=%llu "
               "parent_unknown=%llu\n",
               (int)m->pid, live ? "live" : "dead", SW_RING_NAME_MAX, m->service, SW_RING_NAME_MAX,
               m->instance, SW_RING_NAME_MAX, m->exe, SW_RING_NAME_MAX, m->collector,
               (unsigned long long)st.committed, (unsigned long long)st.dropped,
               (unsigned long long)st.shed, (unsigned long long)st.consumed,
               (unsigned long long)pending, (unsigned long long)st.parent_unknown);
        sw_ring_close(r);
        rings++;
    }
    if (!rings)
        printf("  none\n");
    closedir(d);
    free(c);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("swagent %s\n", SW_VERSION_STRING);
        return 0;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "run") == 0)
        return cmd_run(argc - 1, argv + 1);
    if (strcmp(argv[1], "reporter") == 0)
        return cmd_reporter(argc - 1, argv + 1);
    if (strcmp(argv[1], "status") == 0)
        return cmd_status(argc - 1, argv + 1);
    usage(stderr);
    return 2;
}
