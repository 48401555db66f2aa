/*
 * insitu_shim.c - the time the agent spends on an application's thread, measured in the real
 * program (bench/insitu.sh): LD_PRELOAD="outer.so libswagent.so inner.so".
 *
 * Built twice. The inner shim (-DSHIM_INNER) lies behind libswagent.so, so the agent's
 * dlsym(RTLD_NEXT) "real" calls land in it: it adds up the TSC ticks spent inside the real
 * libc calls. The outer shim (-DSHIM_OUTER) lies in front: it adds up the ticks of the whole
 * interposed call. Outer minus inner is what the agent's code took around the syscall, cold
 * caches, TLB and branch predictors after the syscall included, which callgrind cannot see
 * and which paired timings resolve only to a few percent. Without the agent in between
 * (LD_PRELOAD="outer.so inner.so") the same difference is the shims' own floor.
 *
 * The outer shim leaves out the first 16,384 requests (warm-up: the ring's creation, the
 * clock's calibration; a request is a read or recv that returned bytes; $SHIM_WARM requests
 * instead when set), then every 4,096 ($SHIM_EVERY)
 * requests and at exit appends to $SHIM_OUT.<pid> (read at load: nginx clears its
 * environment) the requests and the ticks outside the real calls since then, and the TSC
 * rate. rdtscp costs ~10-20 ns; the floor includes it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "tsc_out.h"

enum { F_READ, F_RECV, F_WRITE, F_WRITEV, F_SENDFILE, F_CLOSE, F_N };

struct insitu_inner {
    uint64_t ticks[F_N]; /* inside the real calls */
};

/* The next definition of `name` (libswagent.so's for the outer shim, libc's for the inner). */
#define NEXT(ret, name, params)                                                                    \
    static ret(*nx) params;                                                                        \
    if (!nx)                                                                                       \
        nx = (ret(*) params)dlsym(RTLD_NEXT, #name);

#if defined(SHIM_INNER)

__attribute__((visibility("default"))) struct insitu_inner insitu_inner;

#define WRAP(i, ret, name, params, args)                                                           \
    __attribute__((visibility("default"))) ret name params                                         \
    {                                                                                              \
        NEXT(ret, name, params)                                                                    \
        uint64_t t0 = ticks();                                                                     \
        ret r = nx args;                                                                           \
        insitu_inner.ticks[i] += ticks() - t0;                                                     \
        return r;                                                                                  \
    }

#elif defined(SHIM_OUTER)

/* The first `warm` requests are left out (the ring's creation, the clock's calibration, first
   touches): the totals are taken from a snapshot at that request; a record every `every` after. */
static uint64_t warm = 16384, every = 4096;
static const char *const names[F_N] = {"read", "recv", "write", "writev", "sendfile", "close"};
static uint64_t total[F_N], requests, tsc0;
static uint64_t snap_total[F_N], snap_inner[F_N];
static struct timespec ts0;
static struct insitu_inner *inner;
static char out[512];

/* Appends "requests=N ticks=T tsc_ghz=G read=.. recv=.. ...": requests and ticks outside the
   real calls since the snapshot, in all and by function (cumulative: the script takes differences
   between its rounds). */
static void dump(void)
{
    FILE *f = tsc_out_file(out);
    if (!f)
        return;
    uint64_t t = 0, per[F_N];
    for (int i = 0; i < F_N; i++) {
        per[i] = (total[i] - snap_total[i]) - (inner->ticks[i] - snap_inner[i]);
        t += per[i];
    }
    fprintf(f, "requests=%llu ticks=%llu tsc_ghz=%.4f", (unsigned long long)(requests - warm),
            (unsigned long long)t, tsc_ghz(tsc0, &ts0));
    for (int i = 0; i < F_N; i++)
        fprintf(f, " %s=%llu", names[i], (unsigned long long)per[i]);
    fputc('\n', f);
    fflush(f);
}

__attribute__((constructor)) static void init(void)
{
    const char *o = getenv("SHIM_OUT");
    if (o)
        snprintf(out, sizeof(out), "%s", o);
    clock_gettime(CLOCK_MONOTONIC, &ts0);
    tsc0 = ticks();
    warm = env_count("SHIM_WARM", warm);
    every = env_count("SHIM_EVERY", every);
}

static void snapshot(void)
{
    for (int i = 0; i < F_N; i++) {
        snap_total[i] = total[i];
        snap_inner[i] = inner->ticks[i];
    }
}

/* And at exit (nginx exits with exit() on SIGTERM). */
__attribute__((destructor)) static void fini(void)
{
    if (requests > warm && out[0] && inner)
        dump();
}

#define WRAP(i, ret, name, params, args)                                                           \
    __attribute__((visibility("default"))) ret name params                                         \
    {                                                                                              \
        NEXT(ret, name, params)                                                                    \
        if (!inner)                                                                                \
            inner = (struct insitu_inner *)dlsym(RTLD_DEFAULT, "insitu_inner");                    \
        uint64_t t0 = ticks();                                                                     \
        ret r = nx args;                                                                           \
        total[i] += ticks() - t0;                                                                  \
        if ((i == F_READ || i == F_RECV) && (ssize_t)r > 0 && out[0] && inner) {                   \
            if (++requests == warm)                                                                \
                snapshot();                                                                        \
            else if (requests > warm && requests % every == 0)                                     \
                dump();                                                                            \
        }                                                                                          \
        return r;                                                                                  \
    }

#else
#error "build with -DSHIM_INNER or -DSHIM_OUTER"
#endif

WRAP(F_READ, ssize_t, read, (int fd, void *b, size_t n), (fd, b, n))
WRAP(F_RECV, ssize_t, recv, (int fd, void *b, size_t n, int fl), (fd, b, n, fl))
WRAP(F_WRITE, ssize_t, write, (int fd, const void *b, size_t n), (fd, b, n))
WRAP(F_WRITEV, ssize_t, writev, (int fd, const struct iovec *v, int c), (fd, v, c))
WRAP(F_SENDFILE, ssize_t, sendfile64, (int o, int i, off_t *off, size_t n), (o, i, off, n))
WRAP(F_CLOSE, int, close, (int fd), (fd))
