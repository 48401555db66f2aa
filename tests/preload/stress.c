/*
 * stress.c - the agent under concurrency, through the real interposition layer: this program
 * is linked with interpose.c and the agent's modules (so its own read/write/connect/accept
 * calls are the agent's wrappers, exactly as under LD_PRELOAD, and a -fsanitize=thread build
 * instruments the agent too without preloading a sanitized library; see tests/safety.cmake).
 *
 *   stress THREADS REQUESTS drain|nodrain|forkstorm
 *
 * THREADS client threads each make REQUESTS keep-alive requests to THREADS server threads of
 * the same process (a thread-pool server: each server thread accepts and serves connections).
 * Every request must carry exactly one sw8 line inserted by the agent (the server counts them
 * and answers the count), every response must be right.
 *
 * drain: a consumer thread reads this process's ring while the load runs (like the reporter)
 * and checks every record: one span; a client exit segment and the server entry segment of
 * the same request share the trace id and operation name, and the entry's ref points at the
 * exit span (span 0 of the client segment). At the end, records read == segments committed
 * == 2 x requests (+ one entry per fork child), none dropped or shed, one pair per request.
 * nodrain: nobody drains (use a tiny ring): the ring fills; the load must still finish
 * promptly (the agent never blocks). Once the ring has no room for another segment, new traces
 * are not started (trace.c, admission): those requests carry no sw8 and are counted as shed,
 * and no segment that was started is dropped at the ring (each is ~150 bytes, under the room
 * every open segment holds). committed + dropped + shed == 2 x requests.
 *
 * forkstorm: drain, and meanwhile the main thread forks 100 times while the other threads are
 * inside the agent; each child (which inherits whatever state those threads left: spin flags,
 * half-updated pools, a ring being created) makes one traced request of its own, which must
 * carry its sw8, and exits. A child that hangs for 20 s is a failure (the atfork reset did not
 * leave it a usable agent).
 *
 * The runtime directory comes from the environment (SW_AGENT_RUNTIME_DIR), set by the caller.
 */
#include "common.h"

#include "record.h"
#include "ring.h"
#include "trace.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TID_MAX 64
#define OP_MAX 40

static int nthreads, nreq;
static int lfd;
static uint16_t port;
static _Atomic int failures;
static _Atomic int clients_done;
static bool nodrain;          /* a request may carry no sw8 (its trace was shed) */
static _Atomic long with_sw8; /* requests that carried one sw8 line */

#define FAILF(...)                                                                                 \
    do {                                                                                           \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        failures++;                                                                                \
    } while (0)

/* Reads until "\r\n\r\n"; returns the head length, 0 on EOF, -1 on error. */
static int read_head(int fd, char *buf, size_t cap, size_t *have)
{
    for (;;) {
        buf[*have] = 0;
        char *e = strstr(buf, "\r\n\r\n");
        if (e)
            return (int)(e + 4 - buf);
        if (*have + 1 >= cap)
            return -1;
        ssize_t r = read(fd, buf + *have, cap - 1 - *have);
        if (r <= 0)
            return r == 0 && *have == 0 ? 0 : -1;
        *have += (size_t)r;
    }
}

static void consume(char *buf, size_t *have, size_t n)
{
    memmove(buf, buf + n, *have - n);
    *have -= n;
}

static void *server(void *arg)
{
    (void)arg;
    char buf[8192];
    for (;;) {
        int c = accept(lfd, NULL, NULL);
        if (c < 0)
            return NULL;
        size_t have = 0;
        for (;;) {
            int h = read_head(c, buf, sizeof(buf), &have);
            if (h <= 0)
                break;
            int sw8 = 0;
            for (char *p = buf; p < buf + h; p++)
                if (p[0] == '\n' && strncmp(p + 1, "sw8: ", 5) == 0)
                    sw8++;
            consume(buf, &have, (size_t)h);
            char resp[128];
            int n = snprintf(resp, sizeof(resp), "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n%d",
                             sw8 > 9 ? 9 : sw8);
            if (write(c, resp, (size_t)n) != n)
                break;
        }
        close(c);
    }
}

static void *client(void *arg)
{
    int id = (int)(intptr_t)arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        FAILF("client %d: connect", id);
        return NULL;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    char buf[4096], req[128];
    size_t have = 0;
    for (int k = 0; k < nreq; k++) {
        int n =
            snprintf(req, sizeof(req), "GET /t%d/%d HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", id, k);
        if (write(fd, req, (size_t)n) != n) {
            FAILF("client %d: write %d", id, k);
            break;
        }
        int h = read_head(fd, buf, sizeof(buf), &have);
        if (h <= 0 || strncmp(buf, "HTTP/1.1 200 ", 13) != 0) {
            FAILF("client %d: response %d", id, k);
            break;
        }
        consume(buf, &have, (size_t)h);
        while (have < 1) {
            ssize_t r = read(fd, buf + have, sizeof(buf) - have);
            if (r <= 0)
                break;
            have += (size_t)r;
        }
        if (have < 1 || (buf[0] != '1' && !(nodrain && buf[0] == '0'))) {
            FAILF("client %d: request %d carried %c sw8 lines", id, k, have ? buf[0] : '?');
            break;
        }
        if (buf[0] == '1')
            with_sw8++;
        consume(buf, &have, 1);
    }
    close(fd);
    clients_done++;
    return NULL;
}

/* One request on a new connection from a forked child: 0 when it carried exactly one sw8. */
static int child_get(int k)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        return 1;
    char req[128], buf[4096];
    int n = snprintf(req, sizeof(req), "GET /tfork/%d HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", k);
    if (write(fd, req, (size_t)n) != n)
        return 2;
    size_t have = 0;
    int h = read_head(fd, buf, sizeof(buf), &have);
    if (h <= 0 || strncmp(buf, "HTTP/1.1 200 ", 13) != 0)
        return 3;
    consume(buf, &have, (size_t)h);
    while (have < 1) {
        ssize_t r = read(fd, buf + have, sizeof(buf) - have);
        if (r <= 0)
            return 4;
        have += (size_t)r;
    }
    close(fd);
    return buf[0] == '1' ? 0 : 5;
}

static int forks_done;

/* Forks `count` children while the load runs; each makes one request and exits. */
static void fork_storm(int count)
{
    for (int k = 0; k < count; k++) {
        pid_t pid = fork();
        if (pid < 0) {
            FAILF("fork: %d", k);
            return;
        }
        if (pid == 0)
            _exit(child_get(k));
        int st = 0;
        for (int i = 0; i < 2000; i++) { /* 20 s */
            pid_t w = waitpid(pid, &st, WNOHANG);
            if (w == pid)
                break;
            if (i == 1999) {
                kill(pid, SIGKILL);
                waitpid(pid, &st, 0);
                FAILF("fork child %d hung", k);
                return;
            }
            usleep(10000);
        }
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            FAILF("fork child %d failed (status %d)", k, st);
        forks_done++;
        usleep(2000);
    }
}

/* ---- ring consumer ---- */

struct rd {
    const uint8_t *p, *end;
    bool bad;
};

static uint64_t rd_n(struct rd *r, int n)
{
    uint64_t v = 0;
    if (r->end - r->p < n) {
        r->bad = true;
        return 0;
    }
    for (int i = 0; i < n; i++)
        v |= (uint64_t)r->p[i] << (8 * i);
    r->p += n;
    return v;
}

/* Reads a str into out (cut, NUL-terminated). */
static void rd_str(struct rd *r, char *out, size_t cap)
{
    size_t n = (size_t)rd_n(r, 2);
    if ((size_t)(r->end - r->p) < n) {
        r->bad = true;
        n = 0;
    }
    size_t c = n < cap - 1 ? n : cap - 1;
    memcpy(out, r->p, c);
    out[c] = 0;
    r->p += n;
}

struct half {
    char tid[TID_MAX];
    char op[OP_MAX];
    char exit_seg[TID_MAX]; /* the client segment id (exit side) */
    char ref_seg[TID_MAX];  /* the entry's ref parent segment (entry side) */
    uint8_t seen;           /* 1 exit, 2 entry */
};

static struct half *tab;
static size_t tab_n;
static long records, pairs;

static struct half *slot_of(const char *tid)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *s = tid; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    for (size_t i = 0; i < tab_n; i++) {
        struct half *e = &tab[(h + i) % tab_n];
        if (!e->tid[0] || strcmp(e->tid, tid) == 0)
            return e;
    }
    return NULL;
}

static void check_record(const void *payload, uint32_t len)
{
    struct rd r = {payload, (const uint8_t *)payload + len, false};
    char tid[TID_MAX], seg[TID_MAX], op[OP_MAX], tmp[256], rtid[TID_MAX], rseg[TID_MAX];
    records++;
    rd_n(&r, 1); /* version */
    unsigned flags = (unsigned)rd_n(&r, 1);
    if (flags & SW_REC_SEG_OWN_IDS) { /* ids as numbers (record.h) */
        const uint8_t *uuid = r.p;
        rd_n(&r, 8);
        rd_n(&r, 8);
        uint32_t t = (uint32_t)rd_n(&r, 4);
        uint64_t sv = rd_n(&r, 8);
        seg[sw_rec_id_text(seg, sizeof(seg) - 1, uuid, t, sv)] = 0;
        if (flags & SW_REC_SEG_OWN_TRACE)
            tid[sw_rec_id_text(tid, sizeof(tid) - 1, uuid, t, rd_n(&r, 8))] = 0;
        else
            rd_str(&r, tid, sizeof(tid));
    } else {
        rd_str(&r, tid, sizeof(tid));
        rd_str(&r, seg, sizeof(seg));
    }
    int nspans = (int)rd_n(&r, 2);
    int32_t span_id = (int32_t)rd_n(&r, 4), parent = (int32_t)rd_n(&r, 4);
    int64_t start = (int64_t)rd_n(&r, 8), end = (int64_t)rd_n(&r, 8);
    int type = (int)rd_n(&r, 1);
    rd_n(&r, 2); /* layer, flags */
    int form = (int)rd_n(&r, 1);
    rd_n(&r, 4); /* component */
    op[0] = 0;
    if (form == SW_REC_FORM_HTTP) { /* the operation name is made of the request's parts */
        char method[32], target[OP_MAX];
        rd_n(&r, 5); /* status, http flags */
        rd_str(&r, method, sizeof(method));
        rd_str(&r, target, sizeof(target));
        size_t off = (size_t)rd_n(&r, 2), plen = (size_t)rd_n(&r, 2), ol = (size_t)rd_n(&r, 2);
        if (off + plen > strlen(target) || ol >= sizeof(op) ||
            sw_rec_http_op(op, sizeof(op) - 1, method, strlen(method), target + off, plen, ol) !=
                ol)
            r.bad = true;
        else
            op[ol] = 0;
        rd_str(&r, tmp, sizeof(tmp)); /* host */
        rd_n(&r, 4);                  /* url and params lengths */
        rd_str(&r, tmp, sizeof(tmp)); /* headers */
        rd_str(&r, tmp, sizeof(tmp)); /* peer */
    } else {
        rd_str(&r, op, sizeof(op));
        rd_str(&r, tmp, sizeof(tmp));
    }
    int ntags = (int)rd_n(&r, 2);
    for (int i = 0; i < 2 * ntags; i++)
        rd_str(&r, tmp, sizeof(tmp));
    int nrefs = (int)rd_n(&r, 2);
    int32_t rspan = -1;
    rseg[0] = rtid[0] = 0;
    for (int i = 0; i < nrefs; i++) {
        rd_n(&r, 1);
        rd_str(&r, rtid, sizeof(rtid));
        rd_str(&r, rseg, sizeof(rseg));
        rspan = (int32_t)rd_n(&r, 4);
        for (int k = 0; k < 4; k++)
            rd_str(&r, tmp, sizeof(tmp));
    }
    int nlogs = (int)rd_n(&r, 2);
    if (r.bad || r.p != r.end || nspans != 1 || span_id != 0 || parent != -1 || end < start ||
        nlogs != 0 || strncmp(op, "GET:/t", 6) != 0 || (type != 0 && type != 1)) {
        FAILF("bad record: tid %s op %s type %d spans %d logs %d", tid, op, type, nspans, nlogs);
        return;
    }
    if (type == 0 && (nrefs != 1 || strcmp(rtid, tid) != 0 || rspan != 0)) {
        FAILF("entry %s: ref %d %s span %d", op, nrefs, rtid, rspan);
        return;
    }
    if (type == 1 && nrefs != 0) {
        FAILF("exit %s with refs", op);
        return;
    }
    struct half *h = slot_of(tid);
    if (!h) {
        FAILF("table full");
        return;
    }
    if (!h->tid[0]) {
        memcpy(h->tid, tid, sizeof(tid));
        memcpy(h->op, op, sizeof(op));
    } else if (strcmp(h->op, op) != 0) {
        FAILF("trace %s: exit %s, entry %s", tid, h->op, op);
    }
    uint8_t bit = type == 1 ? 1 : 2;
    if (h->seen & bit)
        FAILF("trace %s: two %s segments", tid, type == 1 ? "exit" : "entry");
    h->seen |= bit;
    if (type == 1)
        memcpy(h->exit_seg, seg, sizeof(seg));
    else
        memcpy(h->ref_seg, rseg, sizeof(rseg));
    if (h->seen == 3) {
        pairs++;
        if (strcmp(h->exit_seg, h->ref_seg) != 0)
            FAILF("trace %s: entry ref %s is not the exit's segment %s", tid, h->ref_seg,
                  h->exit_seg);
    }
}

/*
 * The directory stream is opened once, before the load starts: the agent opens and closes its
 * ring file with raw system calls ThreadSanitizer does not see, so an fd number the test
 * opened later could look like a racy reuse of the agent's fd (a false report).
 */
static DIR *ring_dir;

static struct sw_ring *find_ring(const char *dir)
{
    char prefix[64], path[4096];
    snprintf(prefix, sizeof(prefix), "ring-%d-", (int)getpid());
    struct sw_ring *r = NULL;
    rewinddir(ring_dir);
    for (struct dirent *e; (e = readdir(ring_dir)) != NULL;)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            if (sw_ring_open(path, &r) != 0)
                r = NULL;
            break;
        }
    return r;
}

static void *consumer(void *arg)
{
    const char *dir = arg;
    struct sw_ring *r = NULL;
    int idle = 0;
    for (;;) {
        if (!r)
            r = find_ring(dir);
        int got = 0;
        if (r) {
            uint64_t cur = sw_ring_tail(r), next;
            const void *p;
            uint32_t len;
            uint16_t type;
            int rc;
            while ((rc = sw_ring_peek(r, cur, &p, &len, &type, &next)) == 1) {
                if (type == 1)
                    check_record(p, len);
                cur = next;
                got++;
            }
            if (rc < 0)
                FAILF("ring corrupt");
            if (got)
                sw_ring_release(r, cur);
        }
        if (got == 0) {
            /* Done when the load finished and the ring stayed empty for a while. */
            if (clients_done == nthreads && ++idle > 50)
                break;
            usleep(10000);
        } else {
            idle = 0;
        }
    }
    if (r) {
        struct sw_ring_stats st;
        sw_ring_get_stats(r, &st);
        sw_ring_close(r);
    }
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: stress THREADS REQUESTS drain|nodrain|forkstorm\n");
        return 2;
    }
    nthreads = atoi(argv[1]);
    nreq = atoi(argv[2]);
    bool storm = strcmp(argv[3], "forkstorm") == 0;
    bool drain = storm || strcmp(argv[3], "drain") == 0;
    nodrain = !drain;
    const char *dir = getenv("SW_AGENT_RUNTIME_DIR");
    if (nthreads <= 0 || nthreads > 64 || nreq <= 0 || !dir) {
        fprintf(stderr, "bad arguments or SW_AGENT_RUNTIME_DIR unset\n");
        return 2;
    }
    long total = (long)nthreads * nreq;
    tab_n = (size_t)total * 2 + 16;
    tab = calloc(tab_n, sizeof(*tab));
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof(a);
    if (!tab || lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(lfd, 128) != 0 || getsockname(lfd, (struct sockaddr *)&a, &al) != 0) {
        perror("setup");
        return 1;
    }
    port = ntohs(a.sin_port);
    ring_dir = opendir(dir);
    if (!ring_dir) {
        perror(dir);
        return 1;
    }
    pthread_t srv[65], cli[64], con;
    double t0 = now_s();
    if (drain)
        pthread_create(&con, NULL, consumer, (void *)dir);
    /* One server thread per client connection, plus one for the fork children's requests. */
    for (int i = 0; i <= nthreads; i++)
        pthread_create(&srv[i], NULL, server, NULL);
    for (int i = 0; i < nthreads; i++)
        pthread_create(&cli[i], NULL, client, (void *)(intptr_t)i);
    if (storm)
        fork_storm(100);
    for (int i = 0; i < nthreads; i++)
        pthread_join(cli[i], NULL);
    double t1 = now_s();
    shutdown(lfd, SHUT_RDWR); /* the server threads' accept() fails: they return */
    for (int i = 0; i <= nthreads; i++)
        pthread_join(srv[i], NULL);
    if (drain)
        pthread_join(con, NULL);
    struct sw_trace_stats ts;
    sw_trace_get_stats(&ts);
    printf("%ld requests in %.2f s; segments committed %llu dropped %llu shed %llu; requests "
           "with sw8 %ld; records read %ld, pairs %ld\n",
           total, t1 - t0, (unsigned long long)ts.segments_committed,
           (unsigned long long)ts.segments_dropped, (unsigned long long)ts.segments_shed,
           (long)with_sw8, records, pairs);
    /* Each forked child's request adds one server entry segment here (its exit is the
     * child's own). */
    long want = 2 * total + forks_done;
    if (ts.segments_committed + ts.segments_dropped + ts.segments_shed != (uint64_t)want)
        FAILF("committed + dropped + shed != %ld", want);
    if (storm && forks_done != 100)
        FAILF("only %d fork children ran", forks_done);
    if (drain) {
        if ((uint64_t)records != ts.segments_committed)
            FAILF("read %ld records of %llu committed", records,
                  (unsigned long long)ts.segments_committed);
        /* The consumer keeps up: nothing is lost, and every request of the threads is one
           exit + entry pair (a fork child's exit is in its own ring: its entry is unpaired). */
        if (ts.segments_dropped != 0 || ts.segments_shed != 0)
            FAILF("drain: %llu segments dropped, %llu traces shed",
                  (unsigned long long)ts.segments_dropped, (unsigned long long)ts.segments_shed);
        if (pairs != total)
            FAILF("drain: %ld complete request pairs read for %ld requests", pairs, total);
    } else {
        if (ts.segments_shed == 0)
            FAILF("nodrain: no trace was shed (the ring never filled?)");
        if (ts.segments_dropped != 0)
            FAILF("nodrain: %llu started segments dropped at the ring",
                  (unsigned long long)ts.segments_dropped);
        if (with_sw8 == 0 || with_sw8 == total)
            FAILF("nodrain: %ld of %ld requests carried sw8 (expected some, not all)",
                  (long)with_sw8, total);
    }
    free(tab);
    closedir(ring_dir);
    return failures ? 1 : 0;
}
