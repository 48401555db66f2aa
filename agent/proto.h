/*
 * proto.h - the protocol module interface of the connection layer (conn.c).
 *
 * conn.c owns the byte streams: the fd table, the pool of connection objects, role and peer,
 * the offsets of each direction, the edits of the outgoing stream (bytes inserted at an
 * absolute offset, app bytes replaced by as many bytes of ours), the byte held back, the exact
 * counts and errno the application sees, dup/fork/close, reference counts, TLS sessions, and
 * which request an outbound connection belongs to. A protocol module (one file each:
 * proto_http1.c, ...) gets the bytes of each direction in order, parses them, starts and ends
 * spans through trace.c, and plans edits of what the application writes. It never makes a
 * syscall and never sees an fd.
 *
 * Registration: add the module's `const struct sw_proto` to the list in proto_list.c. At
 * connect()/accept() the layer asks every module's claim() in list order (the peer and port
 * are known then); if none claims, the first bytes of the connection (either direction,
 * whichever comes first: a MySQL server speaks first, a Redis/PostgreSQL/FastCGI client
 * writes first) go to every module's sniff() in list order; if none says yes, a TCP
 * connection gets the default module (HTTP/1.x, the last of the list) and a Unix-domain one
 * is not followed any further (untracked: dbus or journald sockets cost one sniff).
 * Connections are claimed once; a module that finds it was wrong calls sw_conn_stop().
 *
 * Hooks run on application threads, under the connection's spin lock, which holds the
 * re-entrancy guard: call trace.c directly (no SW_GUARDED), never block, allocate, lock, call
 * stdio or a syscall; errno may be changed (the layer restores it). The clock: `*t` is the
 * time of the call in ms once read, 0 until then; read it with sw_conn_now(t) only when a span
 * starts or ends (a read that does neither costs no clock read).
 *
 * Module state: each module keeps its per-connection state in c->state (SW_PROTO_STATE_MAX
 * bytes, 16-aligned, not zeroed: attach() initialises what it reads), through a cast:
 *
 *   struct redis_conn { ... };
 *   SW_PROTO_STATE_CHECK(struct redis_conn);
 *   static inline struct redis_conn *rc(struct sw_conn *c) { return (void *)c->state; }
 *
 * Directions: OUT is what this process writes, IN what it reads, whatever the role.
 *
 * Outgoing bytes and edits. A module whose attach() sets c->out_ahead sees the bytes the
 * application writes BEFORE the kernel (or the TLS library) gets them, in order, each byte
 * once, at absolute stream offsets (offset 0 = the connection's first byte written by the
 * application, our own inserted bytes not counted): while parsing them it may plan one edit:
 *   - sw_conn_out_insert(c, abs, len): the len bytes it wrote into sw_conn_out_buf() go out
 *     just before the application's byte at offset `abs` (abs may be the offset just past the
 *     bytes of this call: they then go out before the application's next byte);
 *   - sw_conn_out_replace(c, abs, bytes, len): the application's bytes [abs, abs+len) go out as
 *     `bytes` instead (same length, so every count stays the application's; up to
 *     SW_CONN_REPLACE_MAX of them, each up to SW_CONN_REPLACE_LEN bytes, with or without an
 *     insertion: "sw8:" -> "swx:", an HTTP/2 frame length, a FastCGI length field).
 * Offsets must not be below sw_conn_out_sent(c) (those bytes went out already): the calls
 * refuse them (false). One edit is pending at a time (sw_conn_out_pending()); it is done once
 * every byte it concerns went out. To keep a later message of the same write from going out
 * before the edit is planned right, out() may call sw_conn_out_pause() and return how many
 * bytes it consumed (all or fewer): the parsing stops there, and the layer sends no
 * application byte past that offset until the edit is done (the application sees a short
 * write and sends the rest again, which the module then gets). sw_conn_out_hold(c, n) says
 * that the last n (<= SW_CONN_HOLD_MAX) bytes consumed so far may be held back when a write
 * ends with them (reported as written, sent first with the next call), so that an insertion
 * can still go before them (HTTP/1.x holds a "\r" that may begin a head's blank line); it
 * stands until the next out() call (which clears it first), and is honoured only when the
 * write's bytes were all consumed. The layer does the rest: the exact counts and errno the
 * application sees over short writes, EAGAIN and retries (a writev of the application's bytes with
 * ours in between, no copy), sendfile, and the TLS write rules. A module without out_ahead gets the
 * written bytes after the kernel took them (only those), through written().
 *
 * Spans: a module starts them with trace.c (sw_trace_entry_start, sw_trace_exit_start_in with
 * sw_conn_exit_parent(c) as the parent, ...) and keeps their handles where it likes; the span
 * queue below (sw_conn_span_push/pop/front) keeps those of requests whose replies are still to
 * come, in order (pipelining), and the layer ends what is left in it as errors when the
 * connection ends without the module doing so (close, reset, stop).
 */
#ifndef SW_PROTO_H
#define SW_PROTO_H

#include "common.h"

#include "conn.h"
#include "guard.h"
#include "trace.h"

#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>

#define SW_PROTO_STATE_MAX 8192u  /* bytes of per-connection module state (c->state) */
#define SW_CONN_SPANS 8           /* span handles queued per connection (pipelining depth) */
#define SW_CONN_INSERT_MAX 3328   /* bytes of one insertion (sw8 < 2 KiB + correlation < 1 KiB) */
#define SW_CONN_REPLACE_MAX 4     /* replacements of one edit */
#define SW_CONN_REPLACE_LEN 4     /* bytes of one replacement */
#define SW_CONN_HOLD_MAX 4        /* bytes held back at the end of a write */
#define SW_CONN_PEER_MAX 116      /* "[v6-address]:port", or "unix:" + a socket path */
#define SW_CONN_SNIFF_BYTES 64    /* bytes a sniff() sees at most */
#define SW_CONN_NO_ABS UINT64_MAX /* "no offset" */

/* Checks at compile time that a module's state fits in c->state. */
#define SW_PROTO_STATE_CHECK(type)                                                                 \
    _Static_assert(sizeof(type) <= SW_PROTO_STATE_MAX && _Alignof(type) <= 16,                     \
                   #type " fits in struct sw_conn's state")

enum sw_conn_dir { SW_DIR_IN = 0, SW_DIR_OUT = 1 };
enum sw_sniff { SW_SNIFF_NO = 0, SW_SNIFF_YES = 1, SW_SNIFF_MORE = 2 };

struct sw_conn;

/* A protocol module. Hooks that are NULL are not called (what "not called" means is said). */
struct sw_proto {
    const char *name; /* "http1", "redis", ...: logs and `swagent status` */
    /*
     * At connect() (client: c->port is the remote port) and accept() (server: the listening
     * port; c->peer is the client), before any byte: true takes the connection (then
     * attach()). Unix-domain sockets: c->port is 0, c->peer the socket path. NULL: never by port.
     */
    bool (*claim)(const struct sw_conn *c);
    /*
     * The first bytes of the connection, of direction `dir` (1 to SW_CONN_SNIFF_BYTES: those
     * of the first call that carried any, and those of later calls while the choice is open;
     * the bytes of the other direction, if any, were sniffed before): SW_SNIFF_YES takes the
     * connection, SW_SNIFF_MORE asks for more bytes before deciding (they pass through
     * meanwhile, and the module that takes the connection gets them afterwards, in order:
     * written ones as already sent, so they cannot be edited), SW_SNIFF_NO leaves it to the
     * others. A wrong yes is undone with sw_conn_stop(). NULL: never by sniffing (and for the
     * default module, TCP connections nobody claimed).
     */
    enum sw_sniff (*sniff)(const struct sw_conn *c, enum sw_conn_dir dir, const char *p,
                           size_t len);
    /* The connection is this module's: initialise c->state; set c->out_ahead if needed. */
    void (*attach)(struct sw_conn *c);
    /*
     * Bytes the application read (in order; r > 0 per call, split at any boundary). A recv
     * with MSG_PEEK is not given; MSG_TRUNC stops the following (the bytes are gone).
     */
    void (*in)(struct sw_conn *c, const char *p, size_t len, int64_t *t);
    /*
     * Bytes the application writes, at stream offset `abs` (see the banner: before the kernel
     * with c->out_ahead, after it otherwise). Returns the bytes consumed (== len, or fewer to
     * pause while an edit is pending, see sw_conn_out_pause). Only with c->out_ahead.
     */
    size_t (*out)(struct sw_conn *c, const char *p, size_t len, uint64_t abs, int64_t *t);
    /*
     * Without c->out_ahead: the application's write call took r > 0 bytes, the first r of
     * `iov` (the whole call at once, so a module may look across its pieces). *t is the clock
     * read just before the write (a reply's span ends when its last bytes are handed to the
     * kernel, so it never ends after the peer's span), or 0 when c->out_noclock was set.
     */
    void (*written)(struct sw_conn *c, const struct iovec *iov, int iovcnt, size_t r, int64_t *t);
    /*
     * `n` bytes of direction OUT the module cannot see went out (sendfile): follow on (e.g. a
     * body counted by length) or sw_conn_stop(). NULL: stop following.
     */
    void (*unseen)(struct sw_conn *c, uint64_t n, int64_t *t);
    /* A read returned 0 (end of the peer's stream). NULL: nothing. */
    void (*eof)(struct sw_conn *c, int64_t *t);
    /* A read or write failed with a connection error (ECONNRESET, EPIPE, ...). The layer then
     * ends what is left in the span queue and stops following. NULL: just that. */
    void (*error)(struct sw_conn *c, int err, int64_t *t);
    /* shutdown(SHUT_WR / SHUT_RDWR) by the application. NULL: nothing. */
    void (*shutdown)(struct sw_conn *c, int how, int64_t *t);
    /*
     * The connection ends here: its last fd closed (`closing`), or it is no longer followed
     * (!closing: stopped, or an fd reused behind our back). The spans still queued are then
     * ended as errors by the layer. NULL: just that.
     */
    void (*close)(struct sw_conn *c, bool closing, int64_t *t);
    /* In the child after fork(), for each connection (span handles of the parent are void:
     * the layer clears its span queue). Not under the lock. NULL: nothing. */
    void (*fork_child)(struct sw_conn *c);
};

/* A pending edit of the outgoing stream (conn.c; modules use the functions below). */
struct sw_conn_edit {
    uint64_t ins_abs; /* insertion point (SW_CONN_NO_ABS: no insertion) */
    uint64_t limit;   /* no app byte at or past it goes out before the edit */
    uint64_t rep_abs[SW_CONN_REPLACE_MAX];
    uint16_t ins_len, ins_off; /* inserted bytes, and how many went out */
    uint8_t n_rep;             /* replacements, sorted by offset */
    uint8_t rep_len[SW_CONN_REPLACE_MAX];
    bool active;    /* an edit is pending */
    bool limit_set; /* `limit` applies */
    bool pause;     /* sw_conn_out_pause() in the current out() call */
    char rep[SW_CONN_REPLACE_MAX][SW_CONN_REPLACE_LEN];
};

/*
 * A connection object (pool-allocated by conn.c; a module reads the fields marked "ro" and
 * writes only c->state, c->out_ahead and, through the functions below, the rest).
 */
struct sw_conn {
    _Atomic uint32_t in_use; /* pool slot taken */
    _Atomic uint32_t refs;   /* fds (and TLS sessions) that point at this object */
    atomic_flag busy;        /* spin flag (sw_conn_lock), never held across a syscall */
    uint8_t role;            /* ro: enum sw_conn_role */
    bool dead;               /* ro: not followed any more (sw_conn_stop); untracked once
                                nothing of ours is waiting to go out */
    uint8_t mflag[2];        /* the module's own two bytes, right after `dead` so one load reads
                                both (HTTP/1.x: its response-following state) */
    bool out_ahead;          /* the module sees written bytes before the kernel (attach) */
    bool out_noclock;        /* no span can end on a write now (module): without out_ahead,
                                the layer reads no clock before a write */
    _Atomic bool forked;     /* ro: the process forked while the connection was open */
    bool tls;       /* ro: the fd carries ciphertext (a TLS session is bound, or the first bytes
                       were a TLS record and one may bind): its calls pass untouched; the
                       plaintext comes through sw_conn_tls_read/write */
    bool tls_fd;    /* a TLS session's object knows its fd */
    uint8_t family; /* ro: AF_INET, AF_INET6 or AF_UNIX */
    uint8_t proto;  /* ro: index of the module in proto_list.c, SW_PROTO_NONE before */
    uint8_t fast;   /* the layer's own: which fast path the fd's calls take (conn.c) */
    uint8_t span_head, span_len; /* the span queue */
    uint8_t hold_len;
    uint8_t peer_len;
    bool head_seen; /* client: sw_conn_exit_parent() was asked once */
    uint16_t port;  /* ro: client: the remote port; server: the local one if looked up
                       (a module has claim()), else 0 */
    char hold[SW_CONN_HOLD_MAX];
    uint8_t hold_want; /* sw_conn_out_hold() of the current call */
    uint64_t claimed;  /* ro: OUT bytes reported as written to the application */
    uint64_t sent;     /* ro: OUT app bytes given to the kernel (claimed - sent: held) */
    uint64_t parsed;   /* ro: OUT bytes given to out() (runs ahead with out_ahead) */
    uint64_t received; /* ro: IN bytes given to in() */
    uint64_t spans[SW_CONN_SPANS]; /* span handles of open requests, oldest first */
    /* Client: the request the connection was opened for (sw_trace_request_now at connect)
     * and the one its latest exit was given (sw_conn_exit_parent). */
    uint64_t owner, parent;
    struct sw_conn_edit edit;
    struct {
        const char *buf;          /* the application's buffer at its call (GnuTLS's NULL resume) */
        size_t len;               /* the application's length: a repeated call must give it again */
        size_t m;                 /* its bytes to send in this call (len minus those held back) */
        size_t done;              /* of them, taken by the TLS library so far */
        uint8_t hold;             /* bytes held back at the end of the call */
        bool active;              /* a TLS write is in progress (a failed call awaits its repeat) */
    } tw;                         /* the application's TLS write in progress (conn.c) */
    char peer[SW_CONN_PEER_MAX];  /* ro: server: the client's ip:port; client: the connected
                                     ip:port; Unix: the socket path (not NUL-terminated) */
    char ins[SW_CONN_INSERT_MAX]; /* the bytes of the pending insertion */
    uint8_t sniff_len[2];         /* bytes kept per direction while the choice is open */
    char sniff[2][SW_CONN_SNIFF_BYTES]; /* the first bytes of each direction, while sniffing */
    _Alignas(16) unsigned char state[SW_PROTO_STATE_MAX]; /* the module's (see the banner) */
};

#define SW_PROTO_NONE 0xffu

/* ---- what the layer offers modules ------------------------------------------------------ */

/* The modules, in claim/sniff order; the last one is the default for TCP (proto_list.c). */
extern const struct sw_proto *const sw_protos[] SW_HIDDEN;
extern const unsigned sw_protos_n SW_HIDDEN;

/* The time of the current call in ms, read once (see the banner). */
static inline int64_t sw_conn_now(int64_t *t)
{
    if (!*t)
        *t = sw_trace_now_ms();
    return *t;
}

/* Stops following the connection: no more hooks but close(); untracked once nothing of ours
 * is waiting to go out. */
static inline void sw_conn_stop(struct sw_conn *c)
{
    c->dead = true;
}

/* The span queue: handles of requests whose replies are to come, oldest first. push drops
 * (ends as an error: "pipeline too deep") a handle that does not fit. */
void sw_conn_span_full(struct sw_conn *c, uint64_t h);
static inline __attribute__((always_inline)) void sw_conn_span_push(struct sw_conn *c, uint64_t h)
{
    if (SW_UNLIKELY(c->span_len == SW_CONN_SPANS)) {
        sw_conn_span_full(c, h);
        return;
    }
    c->spans[(c->span_head + c->span_len) % SW_CONN_SPANS] = h;
    c->span_len++;
}
static inline uint64_t sw_conn_span_pop(struct sw_conn *c)
{
    if (!c->span_len)
        return 0;
    uint64_t h = c->spans[c->span_head];
    c->span_head = (uint8_t)((c->span_head + 1) % SW_CONN_SPANS);
    c->span_len--;
    return h;
}
static inline uint64_t sw_conn_span_front(const struct sw_conn *c)
{
    return c->span_len ? c->spans[c->span_head] : 0;
}
/* Ends every queued span as failed (entry abort on a server, exit error on a client). */
void sw_conn_spans_fail(struct sw_conn *c, const char *kind, const char *msg, int64_t t);

/*
 * Client: the parent of the exit span of a request being written now: the request the
 * connection was opened for when this is its first (nginx connects while serving A and writes
 * A's request later), the thread's request now for later ones (keep-alive reuse); 0 none,
 * SW_TRACE_UNKNOWN not known (docs/architecture.md, "Which request an outbound call belongs
 * to"). Remembered for sw_conn_reply_read().
 */
uint64_t sw_conn_exit_parent(struct sw_conn *c);
/* Client: a reply was read: the thread now works for the request of the latest exit. */
void sw_conn_reply_read(const struct sw_conn *c);

/* Where the bytes of an insertion are written (SW_CONN_INSERT_MAX); valid until it is done. */
static inline char *sw_conn_out_buf(struct sw_conn *c)
{
    return c->ins;
}
/* OUT bytes before this offset went out already: no edit can touch them. */
static inline uint64_t sw_conn_out_sent(const struct sw_conn *c)
{
    return c->sent;
}
/* An edit is pending (planned, not all out yet). */
static inline bool sw_conn_out_pending(const struct sw_conn *c)
{
    return c->edit.active;
}
/* Plans the insertion of sw_conn_out_buf()'s first `len` bytes before app byte `abs`. */
bool sw_conn_out_insert(struct sw_conn *c, uint64_t abs, size_t len);
/* Plans the replacement of app bytes [abs, abs+len) by `bytes` (same length). */
bool sw_conn_out_replace(struct sw_conn *c, uint64_t abs, const void *bytes, size_t len);
/* Pauses the parsing ahead at the end of the bytes out() consumes (it returns that count):
 * no application byte past them goes out before the pending edit is done. */
static inline void sw_conn_out_pause(struct sw_conn *c)
{
    c->edit.pause = true;
}
/* Holds back the last n bytes of the current write (see the banner). */
static inline void sw_conn_out_hold(struct sw_conn *c, size_t n)
{
    c->hold_want = (uint8_t)(n <= SW_CONN_HOLD_MAX ? n : 0);
}

/*
 * The connection does not carry the module's protocol: `p` (len bytes) are those of the call
 * in which it found out, beginning with the stream's first bytes. The layer counts it and
 * stops following the connection, unless the bytes are a TLS record: it then stays tracked,
 * unparsed, until a TLS session binds it (its plaintext then goes to a module chosen anew).
 */
void sw_conn_not_proto(struct sw_conn *c, const char *p, size_t len);

/*
 * Under the lock: the connection becomes module m's from its next byte on (m's attach() runs;
 * bytes kept while sniffing are dropped). Another module hands a connection over with it (the
 * HTTP/2 module after ALPN or an h2c upgrade: proto_h2.h). m not in the list: not followed.
 */
void sw_conn_set_proto(struct sw_conn *c, const struct sw_proto *m);

/* Counters of the layer a module bumps (struct sw_conn_stats in conn.h). */
enum sw_conn_counter {
    SW_CNT_NOT_PROTO,      /* a connection dropped: it did not carry its module's protocol */
    SW_CNT_INSERTED,       /* an insertion was planned */
    SW_CNT_INSERT_SKIPPED, /* an insertion was wanted but was not possible */
    SW_CNT_GIVEN_UP,       /* a connection no longer followed: where a reply starts was lost */
};
void sw_conn_count(enum sw_conn_counter k);

#endif /* SW_PROTO_H */
