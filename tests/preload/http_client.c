/*
 * http_client.c - the application side of the preload tests: a small HTTP/1.1 client that
 * writes its requests the awkward ways real programs do (one byte at a time on a non-blocking
 * socket, writev, pipelined, keep-alive, after fork, through a dup), against echo_server.py,
 * which returns each request head as received. Checks, for every request:
 *   - the head came back with exactly EXPECT_SW8 (default 1) well-formed "sw8:" lines, and
 *     is otherwise byte-identical to what this program wrote;
 *   - the counts returned by write()/writev()/send() add up to exactly this program's bytes;
 *   - request bodies arrived intact (length and byte sum reported by the server).
 * Usage: http_client <port> <mode>   (modes: see main). Exit 0 on success.
 */
#define _GNU_SOURCE 1
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "http_client: " __VA_ARGS__);                                              \
        fprintf(stderr, " (line %d)\n", __LINE__);                                                 \
        exit(1);                                                                                   \
    } while (0)

static int port;
static int expect_sw8 = 1;

static void wait_fd(int fd, short ev)
{
    struct pollfd p = {.fd = fd, .events = ev};
    if (poll(&p, 1, 10000) != 1)
        FAIL("poll timeout");
}

static int connect_to(int nonblock)
{
    int fd = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0)
        FAIL("socket: %s", strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        if (errno != EINPROGRESS)
            FAIL("connect: %s", strerror(errno));
        wait_fd(fd, POLLOUT);
        int err = 0;
        socklen_t l = sizeof(err);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
        if (err)
            FAIL("connect: %s", strerror(err));
    }
    return fd;
}

/* Writes all of buf in calls of at most `chunk` bytes; checks the counts. */
static void write_all(int fd, const char *buf, size_t len, size_t chunk, int use_send)
{
    size_t sum = 0;
    while (sum < len) {
        size_t n = chunk && chunk < len - sum ? chunk : len - sum;
        errno = EDOM; /* a successful call leaves errno alone, with or without the agent */
        ssize_t r = use_send ? send(fd, buf + sum, n, MSG_NOSIGNAL) : write(fd, buf + sum, n);
        if (r > 0 && errno != EDOM)
            FAIL("errno changed by a successful write: %d", errno);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            wait_fd(fd, POLLOUT);
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 || (size_t)r > n)
            FAIL("write returned %zd for %zu bytes (%s)", r, n, strerror(errno));
        sum += (size_t)r;
    }
    if (sum != len)
        FAIL("write counts add up to %zu, wrote %zu", sum, len);
}

/* Response reader with a leftover buffer (pipelined responses). */
static __thread char rbuf[1 << 18];
static __thread size_t rlen;

static void fill(int fd)
{
    if (rlen == sizeof(rbuf))
        FAIL("response too big");
    for (;;) {
        errno = EDOM;
        ssize_t r = read(fd, rbuf + rlen, sizeof(rbuf) - rlen);
        if (r > 0 && errno != EDOM)
            FAIL("errno changed by a successful read: %d", errno);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            wait_fd(fd, POLLIN);
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            FAIL("read: %zd %s", r, r < 0 ? strerror(errno) : "EOF");
        rlen += (size_t)r;
        return;
    }
}

/* Reads one response; copies its body (NUL-terminated) to out. */
static void read_response(int fd, char *out, size_t cap)
{
    char *end;
    while (!(end = memmem(rbuf, rlen, "\r\n\r\n", 4)))
        fill(fd);
    size_t hl = (size_t)(end - rbuf) + 4;
    if (strncmp(rbuf, "HTTP/1.1 200", 12) != 0)
        FAIL("bad status line");
    char *cl = memmem(rbuf, hl, "Content-Length: ", 16);
    if (!cl)
        FAIL("no Content-Length");
    size_t blen = strtoul(cl + 16, NULL, 10);
    while (rlen < hl + blen)
        fill(fd);
    if (blen >= cap)
        FAIL("body too big");
    memcpy(out, rbuf + hl, blen);
    out[blen] = 0;
    memmove(rbuf, rbuf + hl + blen, rlen - hl - blen);
    rlen -= hl + blen;
}

static int is_b64(const char *s, size_t n)
{
    if (!n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(s[i] >= 'A' && s[i] <= 'Z') && !(s[i] >= 'a' && s[i] <= 'z') &&
            !(s[i] >= '0' && s[i] <= '9') && s[i] != '+' && s[i] != '/' && s[i] != '=')
            return 0;
    return 1;
}

/* Checks one sw8 value: 8 '-'-separated fields of the documented kinds. */
static void check_sw8_value(const char *v, size_t n)
{
    const char *f[9];
    size_t fl[9];
    int k = 0;
    const char *s = v, *e = v + n;
    while (k < 9) {
        const char *d = memchr(s, '-', (size_t)(e - s));
        f[k] = s;
        fl[k] = (size_t)((d ? d : e) - s);
        k++;
        if (!d)
            break;
        s = d + 1;
    }
    if (k != 8)
        FAIL("sw8 has %d fields: %.*s", k, (int)n, v);
    if (fl[0] != 1 || (f[0][0] != '0' && f[0][0] != '1'))
        FAIL("sw8 sample flag");
    for (size_t i = 0; i < fl[3]; i++)
        if (f[3][i] < '0' || f[3][i] > '9')
            FAIL("sw8 span id");
    int idx[] = {1, 2, 4, 5, 6, 7};
    for (int i = 0; i < 6; i++)
        if (!is_b64(f[idx[i]], fl[idx[i]]))
            FAIL("sw8 field %d not base64: %.*s", idx[i] + 1, (int)n, v);
}

/*
 * The echoed body = head as received + "\n--body-..." lines. Checks the sw8 lines and that the
 * head without them equals `sent_head`; returns the body-len and body-sum the server saw.
 */
static void check_echo(const char *body, const char *sent_head, long *blen, unsigned long *bsum)
{
    const char *marker = strstr(body, "\n--body-md5: ");
    if (!marker)
        FAIL("echo without marker");
    size_t hl = (size_t)(marker - body);
    static __thread char stripped[1 << 16];
    size_t sl = 0;
    int n_sw8 = 0;
    const char *p = body, *end = body + hl;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t ll = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
        if (ll >= 5 && strncasecmp(p, "sw8: ", 5) == 0) {
            n_sw8++;
            size_t vl = ll - 5;
            while (vl && (p[5 + vl - 1] == '\n' || p[5 + vl - 1] == '\r'))
                vl--;
            check_sw8_value(p + 5, vl);
        } else if (ll >= 16 && strncasecmp(p, "sw8-correlation:", 16) == 0) {
            /* allowed, passed on by the trace module */
        } else {
            memcpy(stripped + sl, p, ll);
            sl += ll;
        }
        p += ll;
    }
    stripped[sl] = 0;
    if (n_sw8 != expect_sw8)
        FAIL("%d sw8 lines, expected %d in:\n%s", n_sw8, expect_sw8, body);
    if (strcmp(stripped, sent_head) != 0)
        FAIL("head changed beyond sw8:\n--- sent\n%s--- received\n%s", sent_head, stripped);
    const char *l = strstr(marker, "--body-len: ");
    const char *su = strstr(marker, "--body-sum: ");
    if (!l || !su)
        FAIL("echo without body info");
    *blen = strtol(l + 12, NULL, 10);
    *bsum = strtoul(su + 12, NULL, 10);
}

static __thread char body[1 << 18];

/* One GET on fd written in `chunk`-byte writes; checks the echo. */
static void get(int fd, const char *path, size_t chunk, int use_send)
{
    char head[512];
    int n = snprintf(head, sizeof(head),
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: swagent-test\r\n"
                     "Accept: */*\r\n\r\n",
                     path, port);
    write_all(fd, head, (size_t)n, chunk, use_send);
    read_response(fd, body, sizeof(body));
    long bl;
    unsigned long bs;
    check_echo(body, head, &bl, &bs);
    if (bl != 0)
        FAIL("GET body length %ld", bl);
}

static void mode_bytewise(void)
{
    size_t chunks[] = {1, 2, 3, 5, 0};
    for (size_t i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
        int fd = connect_to(1);
        get(fd, "/bytewise", chunks[i], i % 2);
        close(fd);
    }
}

static void mode_keepalive(void)
{
    int fd = connect_to(1);
    for (int i = 0; i < 5; i++)
        get(fd, i % 2 ? "/ka/odd" : "/ka/even?x=1", (size_t)i, 0);
    close(fd);
}

static void mode_pipeline(void)
{
    int fd = connect_to(0);
    char heads[3][256], all[1024];
    size_t al = 0;
    for (int i = 0; i < 3; i++) {
        int n = snprintf(heads[i], sizeof(heads[i]),
                         "GET /pipe/%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", i, port);
        memcpy(all + al, heads[i], (size_t)n);
        al += (size_t)n;
    }
    write_all(fd, all, al, 0, 0); /* one write carrying three heads */
    for (int i = 0; i < 3; i++) {
        long bl;
        unsigned long bs;
        read_response(fd, body, sizeof(body));
        check_echo(body, heads[i], &bl, &bs);
    }
    close(fd);
}

static void mode_post(void)
{
    static char payload[300000];
    unsigned long sum = 0;
    for (size_t i = 0; i < sizeof(payload); i++) {
        payload[i] = (char)(i * 7 + (i >> 8));
        sum += (unsigned char)payload[i];
    }
    for (int nb = 0; nb < 2; nb++) {
        int fd = connect_to(nb);
        char head[256];
        int n = snprintf(head, sizeof(head),
                         "POST /upload HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: %zu\r\n\r\n",
                         port, sizeof(payload));
        struct iovec v[2] = {{head, (size_t)n}, {payload, sizeof(payload)}};
        size_t total = (size_t)n + sizeof(payload), done = 0;
        while (done < total) {
            struct iovec w[2];
            int c = 0;
            size_t skip = done;
            for (int i = 0; i < 2; i++) {
                if (skip >= v[i].iov_len) {
                    skip -= v[i].iov_len;
                    continue;
                }
                w[c].iov_base = (char *)v[i].iov_base + skip;
                w[c].iov_len = v[i].iov_len - skip;
                skip = 0;
                c++;
            }
            ssize_t r = writev(fd, w, c);
            if (r < 0 && errno == EAGAIN) {
                wait_fd(fd, POLLOUT);
                continue;
            }
            if (r <= 0 || (size_t)r > total - done)
                FAIL("writev %zd", r);
            done += (size_t)r;
        }
        read_response(fd, body, sizeof(body));
        long bl;
        unsigned long bs;
        check_echo(body, head, &bl, &bs);
        if (bl != (long)sizeof(payload) || bs != (sum & 0xffffffffUL))
            FAIL("POST body damaged: len %ld sum %lu", bl, bs);
        close(fd);
    }
}

static void mode_raw(void)
{
    static unsigned char out[200000], in[200000];
    unsigned x = 12345;
    for (size_t i = 0; i < sizeof(out); i++) {
        x = x * 1103515245u + 12345u;
        out[i] = (unsigned char)(x >> 16);
    }
    int fd = connect_to(1);
    size_t sent = 0, got = 0, step = 1;
    while (got < sizeof(in)) {
        if (sent < sizeof(out)) {
            size_t n = step < sizeof(out) - sent ? step : sizeof(out) - sent;
            ssize_t r = write(fd, out + sent, n);
            if (r > 0)
                sent += (size_t)r;
            else if (r < 0 && errno != EAGAIN)
                FAIL("raw write: %s", strerror(errno));
            step = step * 3 % 4093 + 1;
        }
        ssize_t r = read(fd, in + got, sizeof(in) - got);
        if (r > 0)
            got += (size_t)r;
        else if (r == 0)
            FAIL("raw EOF");
        else if (errno == EAGAIN && sent == sizeof(out))
            wait_fd(fd, POLLIN);
    }
    if (memcmp(in, out, sizeof(in)) != 0)
        FAIL("raw bytes changed");
    close(fd);
}

static void mode_fork(void)
{
    int fd = connect_to(1);
    get(fd, "/before-fork", 0, 0);
    pid_t pid = fork();
    if (pid < 0)
        FAIL("fork");
    if (pid == 0) {
        int c = connect_to(1);
        get(c, "/in-child", 1, 0);
        close(c);
        close(fd);
        _exit(0);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        FAIL("child failed");
    get(fd, "/after-fork", 2, 0); /* the parent's inherited connection still works */
    close(fd);
}

static void mode_forkexec(const char *curl)
{
    int p[2];
    if (pipe(p) < 0)
        FAIL("pipe");
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        char url[128];
        snprintf(url, sizeof(url), "http://127.0.0.1:%d/exec", port);
        execlp(curl, curl, "-s", "-H", "Accept: */*", url, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    size_t n = 0;
    ssize_t r;
    while ((r = read(p[0], body + n, sizeof(body) - 1 - n)) > 0)
        n += (size_t)r;
    body[n] = 0;
    close(p[0]);
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        FAIL("curl failed");
    int count = 0;
    for (const char *q = body; (q = strstr(q, "\nsw8: ")); q++)
        count++;
    if (count != expect_sw8)
        FAIL("exec'ed curl sent %d sw8 lines:\n%s", count, body);
}

static void mode_dup(void)
{
    int fd = connect_to(1);
    int d = dup2(fd, fd + 20);
    if (d < 0)
        FAIL("dup2");
    close(fd);
    get(d, "/through-dup", 3, 0);
    int d2 = dup(d);
    close(d);
    get(d2, "/through-dup-again", 0, 0);
    close(d2);
}

static void mode_close_range(void)
{
    int a = connect_to(1), b = connect_to(1);
    get(a, "/cr-a", 0, 0);
    int lo = a < b ? a : b, hi = a < b ? b : a;
    if (close_range((unsigned)lo, (unsigned)hi, 0) < 0)
        FAIL("close_range: %s", strerror(errno));
    if (write(a, "x", 1) != -1 || errno != EBADF)
        FAIL("fd still open after close_range");
    int c = connect_to(1); /* likely reuses a's number */
    get(c, "/cr-c", 1, 0);
    close(c);
}

static void *thread_main(void *arg)
{
    long id = (long)arg;
    for (int conn = 0; conn < 4; conn++) {
        int fd = connect_to((int)((id + conn) % 2));
        for (int i = 0; i < 5; i++) {
            char path[64];
            snprintf(path, sizeof(path), "/thread/%ld/%d/%d", id, conn, i);
            get(fd, path, (size_t)((id + i) % 4), i % 2);
        }
        close(fd);
    }
    return NULL;
}

/* Eight threads, each with its own keep-alive connections, all at once. */
static void mode_threads(void)
{
    pthread_t t[8];
    for (long i = 0; i < 8; i++)
        if (pthread_create(&t[i], NULL, thread_main, (void *)i) != 0)
            FAIL("pthread_create");
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        FAIL("usage: http_client <port> <mode> [curl]");
    port = atoi(argv[1]);
    const char *e = getenv("EXPECT_SW8");
    if (e)
        expect_sw8 = atoi(e);
    const char *m = argv[2];
    if (!strcmp(m, "bytewise"))
        mode_bytewise();
    else if (!strcmp(m, "keepalive"))
        mode_keepalive();
    else if (!strcmp(m, "pipeline"))
        mode_pipeline();
    else if (!strcmp(m, "post"))
        mode_post();
    else if (!strcmp(m, "raw"))
        mode_raw();
    else if (!strcmp(m, "fork"))
        mode_fork();
    else if (!strcmp(m, "forkexec"))
        mode_forkexec(argc > 3 ? argv[3] : "curl");
    else if (!strcmp(m, "dup"))
        mode_dup();
    else if (!strcmp(m, "threads"))
        mode_threads();
    else if (!strcmp(m, "close_range"))
        mode_close_range();
    else
        FAIL("unknown mode %s", m);
    printf("ok %s\n", m);
    return 0;
}
