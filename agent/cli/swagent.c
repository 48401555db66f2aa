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
#include "reporter/spool.h"
#include "ring.h"
#include "spawn.h"
#include "svcblock.h"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
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

/*
 * ELF facts for `swagent run`: what makes a program untraceable by LD_PRELOAD. A statically
 * linked program has no PT_INTERP (no dynamic loader runs, so nothing is preloaded; a
 * static-pie has PT_DYNAMIC but no PT_INTERP either). A Go program (its build id note
 * `.note.go.buildid`, or its `.go.buildinfo` section) makes its network calls with raw
 * system calls, not through libc, even when it is dynamically linked (cgo).
 */
struct elf_facts {
    bool elf, interp, go;
    bool other_class; /* an ELF of another class (32-bit): libswagent.so cannot be loaded in it */
};

static bool read_at(int fd, void *buf, size_t n, off_t off)
{
    return pread(fd, buf, n, off) == (ssize_t)n;
}

/* A PT_NOTE segment or SHT_NOTE section at [off, off+size): holds the Go build id note
   (owner "Go", type 4)? */
static bool note_is_go(int fd, uint64_t off, uint64_t size)
{
    unsigned char buf[4096];
    size_t n = size < sizeof(buf) ? (size_t)size : sizeof(buf);
    size_t at = 0;

    if (n < 12 || !read_at(fd, buf, n, (off_t)off))
        return false;
    while (at + 12 <= n) {
        uint32_t namesz, descsz, type;
        memcpy(&namesz, buf + at, 4);
        memcpy(&descsz, buf + at + 4, 4);
        memcpy(&type, buf + at + 8, 4);
        if (namesz > n || descsz > n)
            return false;
        size_t name_at = at + 12, desc_at = name_at + ((namesz + 3u) & ~3u);
        if (desc_at > n)
            return false;
        if (namesz == 3 && memcmp(buf + name_at, "Go", 3) == 0 && type == 4)
            return true;
        at = desc_at + ((descsz + 3u) & ~3u);
    }
    return false;
}

static void elf_inspect(const char *path, struct elf_facts *f)
{
    unsigned char id[EI_NIDENT];
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    memset(f, 0, sizeof(*f));
    if (fd < 0)
        return;
    if (!read_at(fd, id, sizeof(id), 0) || memcmp(id, ELFMAG, SELFMAG) != 0 ||
        id[EI_CLASS] != ELFCLASS64 || id[EI_DATA] != ELFDATA2LSB) {
        /* Not an ELF file (a script: its interpreter is what runs, and is looked at when it is
           exec'd), or a 32-bit one (the loader refuses the 64-bit library for it). */
        f->other_class = read_at(fd, id, sizeof(id), 0) && memcmp(id, ELFMAG, SELFMAG) == 0 &&
                         id[EI_CLASS] == ELFCLASS32 && sizeof(void *) == 8;
        close(fd);
        return;
    }
    Elf64_Ehdr eh;
    if (!read_at(fd, &eh, sizeof(eh), 0) || eh.e_phentsize != sizeof(Elf64_Phdr)) {
        close(fd);
        return;
    }
    f->elf = true;
    for (unsigned i = 0; i < eh.e_phnum && i < 256; i++) {
        Elf64_Phdr ph;
        if (!read_at(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (uint64_t)i * sizeof(ph))))
            break;
        if (ph.p_type == PT_INTERP)
            f->interp = true;
        else if (ph.p_type == PT_NOTE && !f->go)
            f->go = note_is_go(fd, ph.p_offset, ph.p_filesz);
    }
    /* The sections, by name: `.note.go.buildid`, `.go.buildinfo` (kept even when the build id
       note is not in a PT_NOTE segment). */
    Elf64_Shdr strh;
    if (!f->go && eh.e_shentsize == sizeof(Elf64_Shdr) && eh.e_shstrndx < eh.e_shnum &&
        eh.e_shnum < 4096 &&
        read_at(fd, &strh, sizeof(strh),
                (off_t)(eh.e_shoff + (uint64_t)eh.e_shstrndx * sizeof(strh)))) {
        for (unsigned i = 0; i < eh.e_shnum && !f->go; i++) {
            Elf64_Shdr sh;
            char name[32] = {0};
            if (!read_at(fd, &sh, sizeof(sh), (off_t)(eh.e_shoff + (uint64_t)i * sizeof(sh))))
                break;
            if (sh.sh_name >= strh.sh_size ||
                pread(fd, name, sizeof(name) - 1, (off_t)(strh.sh_offset + sh.sh_name)) <= 0)
                continue;
            f->go = strcmp(name, ".note.go.buildid") == 0 || strcmp(name, ".go.buildinfo") == 0;
        }
    }
    close(fd);
}

/*
 * True when the ELF file at `path` defines (not only imports) SSL_write or SSL_write_ex in its
 * dynamic symbol table: OpenSSL or BoringSSL linked into it (NodeSource's node, Envoy, a
 * library with a private copy). Its TLS calls are bound inside the object at link time, so the
 * agent's SSL_* never see them (issue 35; tls.c).
 */
static bool elf_defines_tls(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    Elf64_Ehdr eh;
    bool found = false;

    if (fd < 0)
        return false;
    if (!read_at(fd, &eh, sizeof(eh), 0) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) ||
        eh.e_shnum >= 4096) {
        close(fd);
        return false;
    }
    for (unsigned i = 0; i < eh.e_shnum && !found; i++) {
        Elf64_Shdr sh, strh;
        if (!read_at(fd, &sh, sizeof(sh), (off_t)(eh.e_shoff + (uint64_t)i * sizeof(sh))))
            break;
        if (sh.sh_type != SHT_DYNSYM || sh.sh_entsize != sizeof(Elf64_Sym) ||
            sh.sh_link >= eh.e_shnum || sh.sh_size > (64u << 20) ||
            !read_at(fd, &strh, sizeof(strh),
                     (off_t)(eh.e_shoff + (uint64_t)sh.sh_link * sizeof(strh))) ||
            strh.sh_size > (64u << 20))
            continue;
        Elf64_Sym *syms = malloc(sh.sh_size ? sh.sh_size : 1);
        char *str = malloc(strh.sh_size + 1);
        if (syms && str && read_at(fd, syms, sh.sh_size, (off_t)sh.sh_offset) &&
            read_at(fd, str, strh.sh_size, (off_t)strh.sh_offset)) {
            str[strh.sh_size] = '\0';
            for (size_t k = 0; k < sh.sh_size / sizeof(Elf64_Sym) && !found; k++)
                found = syms[k].st_shndx != SHN_UNDEF && syms[k].st_name < strh.sh_size &&
                        (strcmp(str + syms[k].st_name, "SSL_write") == 0 ||
                         strcmp(str + syms[k].st_name, "SSL_write_ex") == 0);
        }
        free(syms);
        free(str);
    }
    close(fd);
    return found;
}

/* The file execvp would run for `cmd` ($PATH search for a bare name); false if none. */
static bool which(const char *cmd, char *out, size_t cap)
{
    const char *p = getenv("PATH");

    if (strchr(cmd, '/'))
        return (size_t)snprintf(out, cap, "%s", cmd) < cap && is_file(out, X_OK);
    if (!p || !*p)
        p = "/usr/local/bin:/usr/bin:/bin";
    while (*p) {
        size_t n = strcspn(p, ":");
        if ((size_t)snprintf(out, cap, "%.*s/%s", (int)n, n ? p : ".", cmd) < cap &&
            is_file(out, X_OK))
            return true;
        p += n;
        if (*p == ':')
            p++;
    }
    return false;
}

/*
 * Says on stderr, before the exec, when the program cannot be traced (static ELF, Go, setuid),
 * and why; the program is run all the same.
 */
static void warn_untraceable(const char *cmd)
{
    char path[PATH_MAX];
    struct elf_facts f;
    struct stat st;

    if (!which(cmd, path, sizeof(path)))
        return; /* execvp reports it */
    elf_inspect(path, &f);
    if (f.other_class)
        fprintf(stderr,
                "swagent: %s is a 32-bit program: it is NOT traced. The dynamic loader "
                "cannot load the 64-bit libswagent.so into it. Running it untraced.\n",
                path);
    else if (f.elf && f.go)
        fprintf(stderr,
                "swagent: %s is a Go program: it is NOT traced. Go makes its network calls "
                "with raw system calls, not through libc, so swagent sees none of its "
                "traffic (use SkyWalking's Go agent for it). Running it untraced.\n",
                path);
    else if (f.elf && !f.interp)
        fprintf(stderr,
                "swagent: %s is statically linked (no ELF interpreter): it is NOT traced. "
                "LD_PRELOAD needs the dynamic loader, which a static program does not run. "
                "Running it untraced.\n",
                path);
    else if (f.elf && elf_defines_tls(path))
        fprintf(stderr,
                "swagent: %s has OpenSSL (or BoringSSL) linked into it: its HTTPS traffic is "
                "NOT seen (the agent sees TLS plaintext only through a shared libssl or "
                "libgnutls). Its plain HTTP is traced.\n",
                path);
    else if (stat(path, &st) == 0 && (((st.st_mode & S_ISUID) && st.st_uid != geteuid()) ||
                                      ((st.st_mode & S_ISGID) && st.st_gid != getegid())))
        fprintf(stderr,
                "swagent: %s is set-user-ID or set-group-ID: it is NOT traced. The dynamic "
                "loader ignores LD_PRELOAD for it (secure execution). Running it untraced.\n",
                path);
}

/*
 * The directory of libswagent.so (find_lib), else this program's: the directory the library's
 * own configuration search starts from, so that `swagent reporter` and `swagent status` read the
 * agent.config a traced process reads (config.h, sw_config_find_file).
 */
static void agent_dir(char *out, size_t cap)
{
    char lib[PATH_MAX];
    char *slash;

    if (find_lib(lib, sizeof(lib)) == 0 && (slash = strrchr(lib, '/')) != NULL) {
        *slash = '\0';
        snprintf(out, cap, "%s", lib[0] ? lib : "/");
        return;
    }
    self_dir(out, cap);
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
    /* An absolute path: the program may change directory, its reporter gets the same file. */
    char cfg_abs[PATH_MAX];
    if (config && realpath(config, cfg_abs))
        config = cfg_abs;
    if (setenv("LD_PRELOAD", preload, 1) != 0 ||
        (service && setenv("SW_AGENT_NAME", service, 1) != 0) ||
        (collector && setenv("SW_AGENT_COLLECTOR_BACKEND_SERVICES", collector, 1) != 0) ||
        (config && setenv("SW_AGENT_CONFIG", config, 1) != 0)) {
        perror("swagent: setenv");
        return 1;
    }
    warn_untraceable(argv[i]);
    execvp(argv[i], argv + i);
    fprintf(stderr, "swagent: cannot run %s: %s\n", argv[i], strerror(errno));
    return errno == ENOENT ? 127 : 126;
}

static int cmd_reporter(int argc, char **argv)
{
    char dir[PATH_MAX], path[PATH_MAX + 32], adir[PATH_MAX];
    char **nargv = calloc((size_t)argc + 4, sizeof(char *));
    int n = 0;
    bool has_dir = false;

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
    for (int i = 1; i < argc; i++) {
        has_dir = has_dir || strcmp(argv[i], "--agent-dir") == 0;
        nargv[n++] = argv[i];
    }
    /* The library's directory: the same agent.config, and the same derived paths, as the
       traced processes and the reporter they start. */
    if (!has_dir) {
        agent_dir(adir, sizeof(adir));
        nargv[n++] = (char *)"--agent-dir";
        nargv[n++] = adir;
    }
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

/* `config: FILE`, the settings it gives, and agent.config files that exist but are not read. */
static void print_config(const struct sw_config *c, const char *explicit_path, const char *dir)
{
    static const char *const rel[] = {"agent.config", "../etc/swagent/agent.config"};
    char key[SW_CFG_STR_MAX], cand[PATH_MAX * 2], a[PATH_MAX], b[PATH_MAX];

    if (sw_config_reporter_key(c, key, sizeof(key)) != 0)
        snprintf(key, sizeof(key), "%s", c->backend_service);
    printf("config: %s (library dir %s)\n",
           c->config_file[0] ? c->config_file : "none: built-in defaults and environment", dir);
    printf("reporter key of this environment: %s (authentication %s, TLS %s)\n", key,
           c->authentication[0] ? "on" : "off", sw_config_uses_tls(c) ? "on" : "off");
    printf("beyond the sampling quota: keep_errors=%s keep_slow_ms=%d keep_n_per_3_secs=%d; "
           "meters: %s every %d s\n",
           c->keep_errors ? "true" : "false", c->keep_slow_ms, c->keep_n_per_3_secs,
           c->meter_active ? "on" : "off", c->meter_report_interval);
    if (explicit_path || getenv("SW_AGENT_CONFIG"))
        return;
    for (size_t i = 0; i < SW_ARRAY_LEN(rel); i++) {
        snprintf(cand, sizeof(cand), "%s/%s", dir, rel[i]);
        if (is_file(cand, R_OK) && realpath(cand, a) &&
            !(c->config_file[0] && realpath(c->config_file, b) && strcmp(a, b) == 0))
            printf("note: %s exists and is NOT read (%s comes first)\n", a, c->config_file);
    }
}

/* Where a sampling key's value came from (config.h SW_CFG_SRC_*). */
static void print_src(const struct sw_config *c, int src, const char *env)
{
    if (src > 0)
        printf("file %s:%d", c->config_file, src);
    else if (src == SW_CFG_SRC_ENV_SUB)
        printf("env, through a ${...} of %s", c->config_file);
    else if (src == SW_CFG_SRC_ENV)
        printf("env %s", env);
    else
        printf("default");
}

static void print_list(const struct sw_cfg_list *l)
{
    for (int i = 0; i < l->n && i < SW_CFG_LIST_MAX; i++)
        printf("%s.%.*s", i ? "," : "", SW_CFG_ITEM_MAX, l->item[i]);
}

/* The sampling settings of this environment's agent.config and where each came from. */
static void print_sampling(const struct sw_config *c)
{
    printf("sampling (this environment): agent.sample_n_per_3_secs=%d", c->sample_n_per_3_secs);
    printf(c->sample_n_per_3_secs <= 0 ? " (every trace; " : " (per 3 s per service; ");
    print_src(c, c->sample_src, "SW_AGENT_SAMPLE");
    printf(")\n  agent.ignore_suffix=");
    print_list(&c->ignore_suffix);
    printf(" (");
    print_src(c, c->ignore_suffix_src, "SW_AGENT_IGNORE_SUFFIX");
    printf(")\n");
    if (c->cds_interval > 0)
        printf("  OAP (CDS) asked every %d s (collector.get_agent_dynamic_config_interval)\n",
               c->cds_interval);
    else
        printf("  OAP (CDS) not asked (collector.get_agent_dynamic_config_interval=0)\n");
}

static void print_ago(const char *what, uint64_t ms, uint64_t now)
{
    if (!ms)
        printf(", %s never", what);
    else
        printf(", %s %llu s ago", what, (unsigned long long)(now > ms ? (now - ms) / 1000 : 0));
}

/*
 * The shared blocks (svcblock.h) of the runtime directory: per service and instance, the quota
 * used in this window and the sampling values in force, with where they come from: OAP (the
 * answer's UUID) or each process's agent.config.
 */
static void print_services(const struct sw_config *c, DIR *d)
{
    struct dirent *e;
    int n = 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;

    rewinddir(d);
    printf("services (shared sampling quota and OAP configuration):\n");
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "svc-", 4) != 0 || len != 24 || strcmp(e->d_name + 20, ".sws") != 0)
            continue;
        n++;
        char path[PATH_MAX * 2], want[32];
        snprintf(path, sizeof(path), "%s/%s", c->runtime_dir, e->d_name);
        struct sw_svc *b = NULL;
        if (sw_svc_open_file(path, &b) != 0 ||
            (sw_svc_name(sw_svc_service(b), sw_svc_instance(b), want, sizeof(want)),
             strcmp(want, e->d_name) != 0)) {
            sw_svc_close(b);
            printf("  %s: not a valid block (ignored by the agent: its processes sample on "
                   "their own, with their agent.config)\n                   ",
                   e->d_name);
            continue;
        }
        const char *svc = sw_svc_service(b), *ins = sw_svc_instance(b);
        struct sw_svc_dyn dyn;
        uint64_t seq;
        bool ok = sw_svc_read(b, &dyn, &seq);
        printf("  service=%s instance=%s: %d sampled in this 3 s window", svc, ins,
               sw_sampler_count(sw_svc_quota(b), (int64_t)now));
        if (!ok) {
            printf(", configuration being written\n");
        } else {
            printf("\n    agent.sample_n_per_3_secs: ");
            if (dyn.set & SW_DYN_SAMPLE)
                printf("%d (OAP)", dyn.sample_n_per_3_secs);
            else
                printf("agent.config of each process (%d here)", c->sample_n_per_3_secs);
            printf("\n    agent.span_limit_per_segment: ");
            if (dyn.set & SW_DYN_SPAN_LIMIT)
                printf("%d (OAP)", dyn.span_limit_per_segment);
            else
                printf("agent.config of each process (%d here)", c->span_limit_per_segment);
            printf("\n    agent.ignore_suffix: ");
            if (dyn.set & SW_DYN_IGNORE_SUFFIX) {
                print_list(&dyn.ignore_suffix);
                printf(" (OAP)");
            } else {
                printf("agent.config of each process");
            }
            printf("\n    OAP answer %s", dyn.uuid[0] ? dyn.uuid : "none yet");
            print_ago("applied", dyn.applied_ms, now);
            print_ago("last asked", sw_svc_polled(b), now);
            printf("\n");
        }
        sw_svc_close(b);
    }
    if (!n)
        printf("  none\n");
}

/*
 * Reporters sending to the same collector with different authentication/TLS settings (their
 * status files' `collector=` and `settings=`): said, so a token set for some processes only
 * does not go unnoticed.
 */
static void settings_conflicts(const char *rundir)
{
    enum { MAXR = 64 };
    static char coll[MAXR][SW_CFG_STR_MAX];
    unsigned sett[MAXR];
    int n = 0;
    char path[PATH_MAX * 2], line[1024];
    DIR *d = opendir(rundir);
    struct dirent *e;

    if (!d)
        return;
    while ((e = readdir(d)) != NULL && n < MAXR) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "reporter-", 9) != 0 || len < 7 ||
            strcmp(e->d_name + len - 7, ".status") != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", rundir, e->d_name);
        FILE *f = fopen(path, "re");
        bool got_c = false, got_s = false;
        if (!f)
            continue;
        while (fgets(line, sizeof(line), f)) {
            char *p = strstr(line, "collector=");
            if (!got_c && strncmp(line, "pid=", 4) == 0 && p &&
                sscanf(p, "collector=%255s", coll[n]) == 1)
                got_c = true;
            if (!got_s && strncmp(line, "config=", 7) == 0 && (p = strstr(line, " settings=")) &&
                sscanf(p, " settings=%x", &sett[n]) == 1)
                got_s = true;
        }
        fclose(f);
        if (got_c && got_s)
            n++;
    }
    closedir(d);
    for (int i = 0; i < n; i++) {
        int same = 0;
        bool first = true;
        for (int j = 0; j < n; j++) {
            if (strcmp(coll[i], coll[j]) != 0)
                continue;
            first = first && j >= i;
            same += sett[j] != sett[i];
        }
        if (same > 0 && first)
            printf("warning: %d reporters send to %s with different authentication/TLS settings: "
                   "each serves the processes configured as it is, with their settings; if they "
                   "should agree, check agent.authentication, agent.force_tls and agent.ssl_*\n",
                   same + 1, coll[i]);
    }
}

/* Files, bytes and segments (from the files' names) of spool directory `dir`. */
static bool spool_tally(const char *dir, unsigned long long *files, unsigned long long *bytes,
                        unsigned long long *segs)
{
    char path[PATH_MAX * 3];
    DIR *d = opendir(dir);
    struct dirent *e;

    *files = *bytes = *segs = 0;
    if (!d)
        return false;
    while ((e = readdir(d)) != NULL) {
        uint64_t seq;
        uint32_t count;
        struct stat st;
        if (!sw_spool_parse_name(e->d_name, &seq, &count))
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        (*files)++;
        *bytes += (unsigned long long)st.st_size;
        *segs += count;
    }
    closedir(d);
    return true;
}

/* One line per spool directory of `base` (`spool-<key>`), or of the configured spool_dir. */
static int spool_lines(const struct sw_config *c, const char *base, const char *only)
{
    char path[PATH_MAX * 2], lock[PATH_MAX * 3];
    unsigned long long files, bytes, segs;
    DIR *d = only ? NULL : opendir(base);
    struct dirent *e = NULL;
    int shown = 0;

    if (!only && !d)
        return 0;
    for (;;) {
        const char *key;
        if (only) {
            snprintf(path, sizeof(path), "%s", only);
            key = NULL;
        } else {
            if ((e = readdir(d)) == NULL)
                break;
            if (strncmp(e->d_name, "spool-", 6) != 0)
                continue;
            snprintf(path, sizeof(path), "%s/%s", base, e->d_name);
            key = e->d_name + 6;
        }
        if (spool_tally(path, &files, &bytes, &segs) && files > 0) {
            bool running = false;
            if (key) {
                snprintf(lock, sizeof(lock), "%s/reporter-%s.lock", c->runtime_dir, key);
                int fd = open(lock, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                if (fd >= 0) {
                    running = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
                    close(fd);
                }
            }
            printf("  %s: %llu file(s), %llu bytes, %llu segment(s) not delivered yet in %s%s\n",
                   key ? key : "swagent.spool_dir", files, bytes, segs, path,
                   key ? (running ? " (its reporter is running)"
                                  : " (no reporter: the next traced process for this collector "
                                    "starts one, which replays them)")
                       : "");
            shown++;
        }
        if (only)
            break;
    }
    if (d)
        closedir(d);
    return shown;
}

/* Spooled, undelivered segments per collector: they outlive their reporter (it leaves when
   no traced process is left while the collector is down). */
static void print_spools(const struct sw_config *c)
{
    char disk[PATH_MAX];
    int shown = 0;

    printf("spool (segments kept on disk while their collector was unreachable):\n");
    if (c->spool_dir[0]) {
        shown += spool_lines(c, NULL, c->spool_dir);
    } else {
        shown += spool_lines(c, c->runtime_dir, NULL);
        snprintf(disk, sizeof(disk), "/tmp/swagent-%u", (unsigned)geteuid());
        if (sw_config_dir_in_shm(c->runtime_dir))
            shown += spool_lines(c, disk, NULL);
    }
    if (!shown)
        printf("  none\n");
}

/*
 * `swagent status`: what a live traced process's HTTPS looks like to the agent, from its
 * executable and the objects it has mapped: a shared libssl or libgnutls is followed (tls.c);
 * OpenSSL/BoringSSL linked into the executable or into another library, and Java's own TLS
 * (JSSE), are not. (rustls, Go, RTLD_DEEPBIND modules and BIO_f_ssl users cannot be told from
 * here: docs/architecture.md, "HTTPS".)
 */
static void print_tls(int pid)
{
    char path[64], line[PATH_MAX + 256], seen[256] = "", unseen[1024] = "";
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/exe", pid);
    if (elf_defines_tls(path)) {
        char exe[PATH_MAX];
        ssize_t n = readlink(path, exe, sizeof(exe) - 1);
        exe[n > 0 ? n : 0] = '\0';
        snprintf(unseen, sizeof(unseen), " OpenSSL/BoringSSL linked into %.900s;",
                 n > 0 ? exe : "the executable");
    }
    snprintf(path, sizeof(path), "/proc/%d/maps", pid);
    f = fopen(path, "re");
    if (!f) {
        printf("    tls: not known (%s: %s)\n", path, strerror(errno));
        return;
    }
    char last[PATH_MAX] = "";
    while (fgets(line, sizeof(line), f)) {
        char *p = strchr(line, '/');
        if (!p)
            continue;
        p[strcspn(p, "\n")] = '\0';
        if (strcmp(p, last) == 0)
            continue;
        snprintf(last, sizeof(last), "%s", p);
        const char *b = strrchr(p, '/') + 1;
        size_t sl = strlen(seen), ul = strlen(unseen);
        if (strncmp(b, "libssl.so", 9) == 0 || strncmp(b, "libgnutls.so", 12) == 0)
            snprintf(seen + sl, sizeof(seen) - sl, " %.40s;", b);
        else if (strncmp(b, "libjvm.so", 9) == 0)
            snprintf(unseen + ul, sizeof(unseen) - ul, " Java's TLS (JSSE);");
        else if (strstr(b, ".so") && strncmp(b, "libswagent", 10) != 0 &&
                 strncmp(b, "libgnutls-openssl", 17) != 0 && elf_defines_tls(p))
            snprintf(unseen + ul, sizeof(unseen) - ul, " OpenSSL/BoringSSL linked into %.200s;", b);
    }
    fclose(f);
    printf("    tls: followed:%s NOT seen:%s\n", seen[0] ? seen : " none;",
           unseen[0] ? unseen : " nothing known;");
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
    agent_dir(sdir, sizeof(sdir));
    sw_config_load(c, config, sdir);
    if (rdir)
        snprintf(c->runtime_dir, sizeof(c->runtime_dir), "%s", rdir);
    print_config(c, config, sdir);
    print_sampling(c);
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
    settings_conflicts(c->runtime_dir);

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
               "parent_unknown=%llu kept_errors=%llu kept_slow=%llu keep_limited=%llu\n",
               (int)m->pid, live ? "live" : "dead", SW_RING_NAME_MAX, m->service, SW_RING_NAME_MAX,
               m->instance, SW_RING_NAME_MAX, m->exe, SW_RING_NAME_MAX, m->collector,
               (unsigned long long)st.committed, (unsigned long long)st.dropped,
               (unsigned long long)st.shed, (unsigned long long)st.consumed,
               (unsigned long long)pending, (unsigned long long)st.parent_unknown,
               (unsigned long long)st.kept[SW_RING_KEPT_ERROR],
               (unsigned long long)st.kept[SW_RING_KEPT_SLOW],
               (unsigned long long)st.kept[SW_RING_KEEP_LIMITED]);
        uint64_t h2_any = 0;
        for (int k = 0; k < SW_RING_H2_N; k++)
            h2_any |= st.h2[k];
        if (h2_any) /* issue 37: HTTP/2 connections not followed, and why; sw8 not inserted */
            printf("    h2: dropped bad_preface=%llu hpack=%llu table_too_big=%llu "
                   "list_too_big=%llu framing=%llu; sw8_skipped=%llu streams_full=%llu "
                   "unknown_frames=%llu\n",
                   (unsigned long long)st.h2[SW_RING_H2_BAD_PREFACE],
                   (unsigned long long)st.h2[SW_RING_H2_HPACK],
                   (unsigned long long)st.h2[SW_RING_H2_TABLE],
                   (unsigned long long)st.h2[SW_RING_H2_LIST],
                   (unsigned long long)st.h2[SW_RING_H2_FRAMING],
                   (unsigned long long)st.h2[SW_RING_H2_SW8_SKIPPED],
                   (unsigned long long)st.h2[SW_RING_H2_STREAMS_FULL],
                   (unsigned long long)st.h2[SW_RING_H2_UNKNOWN_FRAMES]);
        if (live)
            print_tls(m->pid);
        sw_ring_close(r);
        rings++;
    }
    if (!rings)
        printf("  none\n");
    print_services(c, d);
    closedir(d);
    print_spools(c);
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
